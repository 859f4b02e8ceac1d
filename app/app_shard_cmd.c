/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Control-socket commands executed on the shard lcore (docs/appliance.md "Control
 * socket"). The main lcore hands this lcore struct app_cmd pointers on its mgmt ring; each
 * comes back on mgmt_done, answered. A mutation is proposed alone in an entry of its own
 * (the open batch is sealed before and after), and answered by the ADMIN_REPLY the service
 * emits when that entry - same index, same term - is applied: the answer means committed
 * and applied, on this member. Views are read here because this lcore is the only reader
 * of the service's state.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ring.h>

#include "app_shard_int.h"
#include "common/check.h"
#include "me/me.h"
#include "mgmt/mgmt.h"
#include "oms/oms.h"

void
app_cmd_give(struct app_shard *s, struct app_cmd *c, enum app_cmd_status st)
{
	c->status = st;
	sc_add(s, st == APP_CMD_OK ? SC_MGMT_OK : SC_MGMT_REFUSED, 1);
	/* mgmt_done holds 2 * APP_CMDS_MAX and main never has more than APP_CMDS_MAX out. */
	CHECK(rte_ring_mp_enqueue(s->w.mgmt_done, c) == 0);
	dp_bell_ring(&s->app->main_bell);
}

static void
cmd_not_leader(struct app_shard *s, struct app_cmd *c)
{
	uint32_t l = cns_leader(s->cns);
	c->leader = l == s->self ? 0 : l;
	app_cmd_give(s, c, APP_CMD_NOT_LEADER);
}

void
app_cmd_unwait(struct app_shard *s, uint32_t i)
{
	CHECK(i < s->cmd_wait_count);
	s->cmd_wait[i] = s->cmd_wait[--s->cmd_wait_count];
	s->cmd_wait[s->cmd_wait_count] = NULL;
}

/* The ADMIN_REPLY of an entry being applied: the answer of the command that proposed it. */
void
app_cmd_admin_reply(struct app_shard *s, const struct wire_admin_reply *r)
{
	for (uint32_t i = 0; i < s->cmd_wait_count; i++) {
		struct app_cmd *c = s->cmd_wait[i];
		/* The OMS echoes the key in req_id, the ME in value (me_admin.c) — but for the
		 * steps of a symbol move, whose value is a count: the entry (index, term)
		 * holds only this command, so that is what matches them. */
		uint16_t type = ((const struct wire_msg_hdr *)(const void *)c->msg)->type;
		bool by_entry = !s->is_oms && (type == WIRE_SYMBOL_MOVE || type == WIRE_BOOK_CHUNK);
		uint64_t key = s->is_oms ? r->req_id : r->value;
		if (c->kind != APP_CMD_PROPOSE || c->index != s->apply_index ||
		    (!by_entry && c->req_key != key))
			continue;
		app_cmd_unwait(s, i);
		if (s->apply_term != c->term) {
			app_cmd_give(s, c, APP_CMD_LOST); /* another leader's entry took the index */
			return;
		}
		c->reason = r->reason;
		c->value = r->value;
		app_cmd_give(s, c, r->reason == WIRE_REASON_NONE ? APP_CMD_OK : APP_CMD_REJECTED);
		return;
	}
}

/* routes set: the new membership under the applied epoch + 1, keeping the applied pins. */
static void
route_merge(struct app_shard *s, struct wire_routing_config *m, bool scale)
{
	struct oms_route_info ri;
	oms_route_get(s->svc, &ri);
	if (scale) {
		/* shards scale: the applied membership with shards[0] added or changed. */
		struct wire_route_shard add = m->shards[0];
		uint32_t n = 0;
		bool found = false;
		for (uint32_t i = 0; i < ri.shard_count; i++) {
			m->shards[n] = ri.shards[i];
			if (ri.shards[i].shard == add.shard) {
				m->shards[n].state = add.state;
				found = true;
			}
			n++;
		}
		if (!found && n < WIRE_ROUTE_SHARDS_MAX)
			m->shards[n++] = add;
		m->shard_count = n;
	}
	if (m->epoch == 0)
		m->epoch = ri.epoch + 1;
	m->pin_count = ri.pin_count;
	memcpy(m->pins, ri.pins, sizeof(ri.pins[0]) * ri.pin_count);
}

/* symbols move: the symbol's config as this replica holds it, me_shard as asked. 0, or
 * -ENOENT when this replica cannot fill it. */
static int
symbol_fill(struct app_shard *s, struct wire_symbol_config *m)
{
	if (s->is_oms) {
		struct oms_symbol_info y;
		if (oms_symbol_get(s->svc, m->symbol, &y) != 0)
			return -ENOENT;
		m->maker_fee_bps = y.maker_fee_bps;
		m->taker_fee_bps = y.taker_fee_bps;
		return 0;
	}
	struct me_symbol_info y;
	if (me_symbol_get(s->svc, m->symbol, &y) != 0 || y.me_shard != s->id)
		return m->tick > 0 ? 0 : -ENOENT; /* not ours: the message must be complete */
	m->base_asset = y.base_asset;
	m->quote_asset = y.quote_asset;
	m->status = y.status;
	m->tick = y.tick;
	m->lot = y.lot;
	m->min_qty = y.min_qty;
	m->min_notional = y.min_notional;
	m->base_unit = y.base_unit;
	m->ref_px = y.ref_px;
	m->band_bps = y.band_bps;
	return 0;
}

int
app_cmd_fill(struct app_shard *s, struct wire_msg_hdr *m, uint32_t flags)
{
	if (((flags & APP_CMD_ROUTE_MERGE) && (!s->is_oms || m->type != WIRE_ROUTING_CONFIG)) ||
	    ((flags & APP_CMD_SYMBOL_FILL) && m->type != WIRE_SYMBOL_CONFIG))
		return -EINVAL; /* a routing config for an ME shard: the operator named one */
	if (flags & APP_CMD_ROUTE_MERGE)
		route_merge(s, (void *)m, (flags & APP_CMD_ROUTE_SCALE) != 0);
	if ((flags & APP_CMD_SYMBOL_FILL) && symbol_fill(s, (void *)m) != 0)
		return -ENOENT;
	return 0;
}

static void
cmd_propose(struct app_shard *s, struct app_cmd *c)
{
	struct wire_msg_hdr *m = (void *)c->msg;
	if (cns_role(s->cns) != CNS_LEADER) {
		/* Led elsewhere since main looked: its leader proposes it (app_admin_fwd.c). */
		if (c->flags & APP_CMD_MAY_FORWARD)
			app_fwd_cmd_start(s, c);
		else
			cmd_not_leader(s, c);
		return;
	}
	if (s->cmd_wait_count == APP_CMD_PENDING_MAX) {
		app_cmd_give(s, c, APP_CMD_BUSY);
		return;
	}
	int frc = app_cmd_fill(s, m, c->flags);
	if (frc == -EINVAL) {
		c->err = frc;
		app_cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	if (frc == -ENOENT) {
		c->reason = WIRE_REASON_UNKNOWN_SYMBOL;
		app_cmd_give(s, c, APP_CMD_REJECTED); /* nothing proposed */
		return;
	}
	if (c->flags & APP_CMD_ROUTE_MERGE) {
		c->req_key = ((struct wire_routing_config *)m)->epoch;
		c->value = c->req_key;
	}
	/* Seal what is open, so the command's entry is the next one and holds only it. */
	cns_flush(s->cns, s->now);
	uint64_t last = cns_last_index(s->cns);
	int rc = app_shard_propose(s, m);
	if (rc == -EPERM) {
		cmd_not_leader(s, c);
		return;
	}
	if (rc == -EAGAIN || rc == -EBUSY) {
		app_cmd_give(s, c, APP_CMD_BUSY); /* backpressure, or a leadership transfer */
		return;
	}
	if (rc != 0) {
		c->err = rc;
		app_cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	cns_flush(s->cns, s->now);
	/* If the log store was full the batch is sealed later, still as the next entry. */
	c->index = last + 1;
	c->term = cns_term(s->cns);
	s->cmd_wait[s->cmd_wait_count++] = c;
}

#define SNAP_CHILD_MAX_NS (300ull * 1000000000ull) /* a child this late is stuck: killed */
#define SNAP_CHILD_NICE 10 /* below the lcores when it shares their CPUs */

static void snap_cmd_answer(struct app_shard *s, int rc);

/* An asynchronous snapshot's bytes are in consensus's buffer (len 0: none; failed_by names
 * what produced nothing, NULL: the buffer was too small): make it the base, and count. A
 * snapshot taken while the shadow copy was lost seeds it. */
static void
snap_end(struct app_shard *s, size_t len, const char *failed_by)
{
	uint64_t index = cns_snapshot_pending(s->cns);
	s->snap_taking = true;
	int rc = cns_snapshot_end(s->cns, len);
	s->snap_taking = false;
	const struct cns_snapshot_meta *base = cns_snapshot(s->cns, NULL);
	if (len == 0 && base != NULL && base->index >= index)
		rc = -ESTALE; /* the shadow's job, superseded by an install that covers it */
	if (s->shadow_seeding) {
		s->shadow_seeding = false;
		app_shadow_seed_base(s->shadow, rc == 0 ? s->shadow_base : NULL, len);
	}
	if (rc == 0) {
		if (s->logw == NULL)
			sc_add(s, SC_SNAPSHOTS, 1); /* else once its file is durable (app_flog.c) */
	} else if (rc == -ESTALE) {
		sc_add(s, SC_SNAPSHOT_STALE, 1);
	} else {
		sc_add(s, SC_SNAPSHOT_FAILED, 1);
		if (failed_by != NULL)
			APP_LOG(ERR, "shard %u: %s for %" PRIu64 " gave no result: the log is "
				"not compacted; the next snapshot is due in [limits] "
				"snapshot_entries", s->id, failed_by, index);
		else
			APP_LOG(ERR, "shard %u: snapshot at %" PRIu64 " failed: %s (raise "
				"[limits] snapshot_mb): the log is not compacted and will fill",
				s->id, index, strerror(-rc));
	}
	snap_cmd_answer(s, rc);
}

/* Max-type counters only grow: add the difference. */
static void
sc_max(struct app_shard *s, enum shard_counter c, uint64_t v)
{
	if (v > s->c[c])
		sc_add(s, c, v - s->c[c]);
}

/* The shadow copy: its loss counted once, its snapshot collected. */
static void
shadow_poll(struct app_shard *s)
{
	bool lost = app_shadow_lost(s->shadow);
	if (lost && !s->shadow_lost_seen) {
		sc_add(s, SC_SNAPSHOT_SHADOW_LOST, 1);
		APP_LOG(WARNING, "shard %u: the shadow copy is lost (it fell behind by its whole "
			"ring, [limits] shadow_ring_mb, or refused a base): the next snapshot is "
			"taken without it, and seeds it again", s->id);
	}
	s->shadow_lost_seen = lost;
	size_t len;
	if (!app_shadow_snap_busy(s->shadow) || app_shadow_snap_poll(s->shadow, &len) != 0)
		return;
	sc_max(s, SC_SNAPSHOT_SHADOW_MAX_NS,
	       app_shadow_counter(s->shadow, APP_SHADOW_SERIALIZE_MAX_NS));
	sc_max(s, SC_SHADOW_LAG_MAX_BYTES, app_shadow_counter(s->shadow, APP_SHADOW_LAG_MAX));
#ifdef OMSD_DCHECK
	if (len != 0 && app_shadow_snap_hash(s->shadow) != s->shadow_hash) {
		APP_LOG(CRIT, "shard %u: the shadow copy's state at %" PRIu64 " is not the "
			"service's", s->id, cns_snapshot_pending(s->cns));
		CHECK(app_shadow_snap_hash(s->shadow) == s->shadow_hash);
	}
#endif
	if (len != 0 && app_shadow_snap_digest(s->shadow) != s->shadow_digest) {
		/* The copy is not the service (a bug; every test's build aborts above): its
		 * snapshot must not become the base. Dropped, it is seeded again by the next
		 * snapshot, taken without it. */
		APP_LOG(CRIT, "shard %u: the shadow copy's counts at %" PRIu64 " are not the "
			"service's (digest %#" PRIx64 ", service %#" PRIx64 "): its snapshot is "
			"dropped and the copy seeded again", s->id, cns_snapshot_pending(s->cns),
			app_shadow_snap_digest(s->shadow), s->shadow_digest);
		app_shadow_drop(s->shadow);
		len = 0;
	}
	if (len != 0)
		sc_add(s, SC_SNAPSHOT_SHADOWED, 1);
	CHECK(cns_snapshot_pending(s->cns) != 0); /* only snap_end ends it, after this */
	snap_end(s, len, len == 0 && app_shadow_lost(s->shadow) ? "the shadow copy" : NULL);
}

void
app_shard_snapshot_poll(struct app_shard *s)
{
	if (s->shadow != NULL)
		shadow_poll(s);
	if (!s->snapfork_ok || s->snapfork.pid == 0)
		return;
	bool pending = cns_snapshot_pending(s->cns) != 0;
	size_t len = 0;
	int status = 0;
	enum pst_fork_state st = pst_fork_poll(&s->snapfork, &len, &status);
	if (s->snapfork.pid == 0) /* reaped: main may collapse the service's pages now */
		PUB(s->collapse_req, s->collapse_req + 1);
	switch (st) {
	case PST_FORK_DONE:
		sc_max(s, SC_SNAPSHOT_CHILD_MAX_NS, s->snapfork.child_ns);
		if (pending)
			snap_end(s, len, NULL);
		return;
	case PST_FORK_FAILED:
		APP_LOG(ERR, "shard %u: snapshot child exited with status %d", s->id, status);
		if (pending)
			snap_end(s, 0, "the snapshot child");
		return;
	case PST_FORK_RUNNING:
		if (s->now - s->snapfork.started_ns < SNAP_CHILD_MAX_NS || !pending)
			return;
		APP_LOG(ERR, "shard %u: the snapshot child (pid %d) has run for %llu s: killed",
			s->id, s->snapfork.pid, SNAP_CHILD_MAX_NS / 1000000000ull);
		pst_fork_kill(&s->snapfork);
		PUB(s->collapse_req, s->collapse_req + 1);
		snap_end(s, 0, "the snapshot child");
		return;
	case PST_FORK_IDLE:
		return;
	}
}

/* [limits] snapshot_by = shadow: consensus fixes the snapshot's index, the shadow copy
 * serialises the state at it into consensus's third buffer once it has applied what this
 * lcore applied up to now, and this lcore goes on; app_shard_snapshot_poll ends it.
 * -EINPROGRESS, or what app_shard_snapshot_take returns. */
static int
snapshot_shadow(struct app_shard *s)
{
	void *buf;
	size_t cap;
	int rc = cns_snapshot_begin(s->cns, &buf, &cap);
	if (rc != 0)
		return rc;
	rc = app_shadow_snap_post(s->shadow, cns_snapshot_pending(s->cns), buf, cap);
	CHECK(rc == 0); /* ready (not lost), and no job out: none is pending in consensus */
	s->shadow_digest = app_shard_digest(s, s->svc);
#ifdef OMSD_DCHECK
	/* Every test's build checks the copy against the service (a pass over the state, so
	 * not in a release build): the same hash at the same index. */
	s->shadow_hash = s->is_oms ? oms_svc_ops.state_hash(s->svc) : me_svc_ops.state_hash(s->svc);
#endif
	return -EINPROGRESS;
}

/* [limits] snapshot_by = fork: consensus fixes the snapshot's index, a child serialises the
 * state as it is at this instant (copy-on-write) into consensus's third buffer, and this
 * lcore goes on; app_shard_snapshot_poll ends it. If fork fails, or fork is false, the
 * serialisation is done here (the stall of snapshot_by = lcore). With a shadow copy (lost:
 * the snapshot is taken without it) the snapshot seeds it: the messages applied from here
 * on follow it. -EINPROGRESS, or what app_shard_snapshot_take returns. */
static int
snapshot_async(struct app_shard *s, bool fork)
{
	if (s->snapfork.pid != 0)
		return -EBUSY; /* the last child is not reaped yet */
	void *buf;
	size_t cap;
	int rc = cns_snapshot_begin(s->cns, &buf, &cap);
	if (rc != 0)
		return rc;
	if (s->shadow != NULL) {
		app_shadow_seed_later(s->shadow);
		s->shadow_base = buf; /* consensus's base once snap_end makes it so */
		s->shadow_seeding = true;
	}
	const struct svc_ops *ops = s->is_oms ? &oms_svc_ops : &me_svc_ops;
	if (!fork) {
		snap_end(s, ops->snapshot(s->svc, buf, cap), NULL);
		return 0;
	}
	const struct app *app = s->app;
	/* The child maps what the last snapshot took and an eighth more in one go (the size
	 * itself would be a pass over the state here). */
	uint64_t last = cns_snapshot(s->cns, NULL)->len;
	s->snapfork.populate = last != 0 ? (size_t)(last + last / 8) : cap;
	rc = pst_fork_start(&s->snapfork, ops->snapshot, s->svc, buf, cap,
			    app->snap_cpus_ok ? &app->snap_cpus : NULL, sizeof(app->snap_cpus),
			    SNAP_CHILD_NICE);
	if (rc == 0) {
		/* The cluster clock and CLOCK_MONOTONIC both count ns: the timeout uses ours. */
		s->snapfork.started_ns = s->now;
		sc_add(s, SC_SNAPSHOT_FORKS, 1);
		sc_max(s, SC_SNAPSHOT_FORK_MAX_NS, s->snapfork.fork_ns);
		return -EINPROGRESS;
	}
	APP_LOG(WARNING, "shard %u: cannot fork a snapshot child (%s): serialising on the "
		"shard lcore", s->id, strerror(-rc));
	snap_end(s, ops->snapshot(s->svc, buf, cap), NULL);
	return 0;
}

/* Take a snapshot at the applied index and count what happened: `snapshots` when it was
 * taken (durable mode: once its file is durable, written by the file log's writer in the
 * background: app_flog.c), `snapshot_failed` when either failed, nothing when nothing was
 * applied since the last one. 0, -EINPROGRESS (a child or the shadow copy is serialising
 * it: app_shard_snapshot_poll ends it), -EALREADY, -EBUSY (the previous snapshot's file is
 * still being written, its child still runs, or the shadow copy still reads its seed: try
 * later) or -ENOSPC (too big). */
int
app_shard_snapshot_take(struct app_shard *s)
{
	uint64_t applied = cns_applied_index(s->cns);
	if (app_flog_snap_busy(s) || cns_snapshot_pending(s->cns) != 0)
		return -EBUSY;
	if (s->shadow != NULL) {
		if (app_shadow_ready(s->shadow)) {
			int rc = snapshot_shadow(s);
			if (rc != -EALREADY)
				s->snap_index = applied;
			return rc;
		}
		/* Seeded from a base consensus keeps until its next snapshot: not before the
		 * copy has read it. Lost: taken without the copy, as below, and seeds it. */
		if (!app_shadow_lost(s->shadow))
			return -EBUSY;
	}
	/* A small state is serialised here: a fork copies the page tables of the whole process
	 * (DPDK's memory, the heaps, the log), which costs the lcore more than a few MiB of
	 * serialising (docs/persist.md). The last snapshot's length is the estimate. */
	uint64_t last = cns_snapshot(s->cns, NULL)->len;
	bool fork = s->snapfork_ok && last >= (s->app->cfg.snapshot_fork_min_mb << 20);
	if (fork || s->shadow != NULL) {
		int rc = snapshot_async(s, fork);
		if (rc != -EALREADY && rc != -EBUSY)
			s->snap_index = applied;
		return rc;
	}
	s->snap_taking = true;
	int rc = cns_snapshot_take(s->cns);
	s->snap_taking = false;
	if (rc == -EALREADY)
		return rc;
	s->snap_index = applied;
	if (rc == 0 && s->logw != NULL)
		return 0; /* counted when its file is durable, or failed */
	sc_add(s, rc == 0 ? SC_SNAPSHOTS : SC_SNAPSHOT_FAILED, 1);
	if (rc != 0)
		APP_LOG(ERR, "shard %u: snapshot at %" PRIu64 " failed: %s (raise [limits] "
			"snapshot_mb): the log is not compacted and will fill", s->id, applied,
			strerror(-rc));
	return rc;
}

/* The snapshot command's answer: the base's index once the snapshot is taken (or was
 * already: nothing applied since), FAILED with the error otherwise. */
static void
snap_cmd_give(struct app_shard *s, struct app_cmd *c, int rc)
{
	if (rc != 0 && rc != -EALREADY) {
		c->err = rc;
		app_cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	const struct cns_snapshot_meta *meta = cns_snapshot(s->cns, NULL);
	c->index = meta != NULL ? meta->index : 0;
	c->value = c->index;
	c->term = meta != NULL ? meta->term : 0;
	app_cmd_give(s, c, APP_CMD_OK);
}

static void
snap_cmd_answer(struct app_shard *s, int rc)
{
	struct app_cmd *c = s->snap_cmd;
	if (c == NULL)
		return;
	s->snap_cmd = NULL;
	/* Dropped because a leader's snapshot covering it was installed: that one is the
	 * base, and it covers what was asked. */
	snap_cmd_give(s, c, rc == -ESTALE ? 0 : rc);
}

static void
cmd_snapshot(struct app_shard *s, struct app_cmd *c)
{
	int rc = app_shard_snapshot_take(s);
	if (rc == -EBUSY) {
		c->err = rc;
		app_cmd_give(s, c, APP_CMD_BUSY);
		return;
	}
	if (rc == -EINPROGRESS) {
		s->snap_cmd = c; /* answered when the child is done (snap_end) */
		return;
	}
	snap_cmd_give(s, c, rc);
}

/* A membership change (thesis §4.1): the leader appends the configuration entry and the
 * command waits for its commit. BUSY says why nothing was appended (err: -EBUSY a change or
 * the term's first entry is not committed yet, -EAGAIN the learner is behind or the log is
 * full); FAILED with -EINVAL / -ENOSPC is a change that makes no sense here. */
static void
cmd_members(struct app_shard *s, struct app_cmd *c)
{
	if (cns_role(s->cns) != CNS_LEADER) {
		/* Led elsewhere since main looked: its leader makes it (app_admin_fwd.c). */
		if (c->flags & APP_CMD_MAY_FORWARD)
			app_fwd_cmd_start(s, c);
		else
			cmd_not_leader(s, c);
		return;
	}
	if (s->cmd_wait_count == APP_CMD_PENDING_MAX) {
		app_cmd_give(s, c, APP_CMD_BUSY);
		return;
	}
	/* Already so: answered once the configuration that made it so commits (at once when
	 * it has), so an operator repeating a change whose answer was lost gets ok, not an
	 * error for a change that makes no sense any more. */
	if (app_fwd_member_effected(c->member_op, cns_is_voter(s->cns, c->target),
				    cns_is_learner(s->cns, c->target))) {
		c->index = cns_members(s->cns, NULL);
		c->term = cns_term_at(s->cns, c->index);
		s->cmd_wait[s->cmd_wait_count++] = c; /* settled by app_cmd_work */
		return;
	}
	int rc = cns_member_change(s->cns, s->now, (enum cns_member_op)c->member_op, c->target);
	if (rc == -EPERM) {
		cmd_not_leader(s, c);
		return;
	}
	if (rc == -EBUSY || rc == -EAGAIN) {
		c->err = rc;
		app_cmd_give(s, c, APP_CMD_BUSY);
		return;
	}
	if (rc != 0) {
		c->err = rc;
		app_cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	c->index = cns_members(s->cns, NULL);
	c->term = cns_term(s->cns);
	APP_LOG(NOTICE, "shard %u: membership change %s node %u appended at %" PRIu64
		" in term %" PRIu64, s->id,
		c->member_op == CNS_MEMBER_ADD	   ? "add learner"
		: c->member_op == CNS_MEMBER_PROMOTE ? "promote"
						     : "remove",
		c->target, c->index, c->term);
	s->cmd_wait[s->cmd_wait_count++] = c;
}

/* A leadership transfer (thesis §3.10): answered once target is seen leading (at once when
 * this member is the target), or TIMEOUT at the deadline when it lapsed; FAILED -EINVAL when
 * target is not a voter here. */
static void
cmd_transfer(struct app_shard *s, struct app_cmd *c)
{
	if (cns_role(s->cns) != CNS_LEADER) {
		/* Led elsewhere since main looked: its leader hands over (app_admin_fwd.c). */
		if (c->flags & APP_CMD_MAY_FORWARD)
			app_fwd_cmd_start(s, c);
		else
			cmd_not_leader(s, c);
		return;
	}
	if (c->target == s->self) {
		c->value = cns_term(s->cns);
		app_cmd_give(s, c, APP_CMD_OK);
		return;
	}
	if (s->cmd_wait_count == APP_CMD_PENDING_MAX) {
		app_cmd_give(s, c, APP_CMD_BUSY);
		return;
	}
	int rc = cns_transfer(s->cns, s->now, c->target);
	if (rc == -EPERM) {
		cmd_not_leader(s, c);
		return;
	}
	if (rc != 0) {
		c->err = rc; /* -EINVAL: not a member */
		app_cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	c->term = cns_term(s->cns);
	s->cmd_wait[s->cmd_wait_count++] = c;
}

static const char *
sym_status_name(uint8_t st)
{
	return st == WIRE_SYM_TRADING ? "trading" : st == WIRE_SYM_HALTED ? "halted" : "unknown";
}

static const char *
user_status_name(uint32_t st)
{
	switch (st) {
	case OMS_USER_HYDRATING:
		return "hydrating";
	case OMS_USER_RESIDENT:
		return "resident";
	case OMS_USER_FLUSHING:
		return "flushing";
	case OMS_USER_WAITING:
		return "waiting";
	default:
		return "absent";
	}
}

/* One row per symbol, each naming this shard (main joins the rows of every shard). */
static void
row_begin(struct app_shard *s, struct mgmt_out *o, uint32_t symbol, uint8_t status, bool killed)
{
	mgmt_out_obj_begin(o);
	mgmt_out_kv_u64(o, "shard", s->id);
	mgmt_out_kv_str(o, "service", s->is_oms ? "oms" : "me");
	mgmt_out_kv_u64(o, "symbol", symbol);
	mgmt_out_kv_str(o, "status", sym_status_name(status));
	mgmt_out_kv_bool(o, "killed", killed);
}

static void
view_symbols(struct app_shard *s, struct mgmt_out *o)
{
	mgmt_out_arr_begin(o);
	if (s->is_oms) {
		struct oms_symbol_info y;
		for (uint32_t i = 0; oms_symbol_at(s->svc, i, &y) == 0; i++) {
			row_begin(s, o, y.symbol, y.status, y.killed != 0);
			mgmt_out_kv_u64(o, "me_shard", y.me_shard);
			mgmt_out_kv_u64(o, "base", y.base_asset);
			mgmt_out_kv_u64(o, "quote", y.quote_asset);
			mgmt_out_kv_i64(o, "maker_fee_bps", y.maker_fee_bps);
			mgmt_out_kv_i64(o, "taker_fee_bps", y.taker_fee_bps);
			mgmt_out_obj_end(o);
		}
	} else {
		struct me_symbol_info y;
		for (uint32_t i = 0; me_symbol_at(s->svc, i, &y) == 0; i++) {
			row_begin(s, o, y.symbol, y.status, y.killed != 0);
			mgmt_out_kv_u64(o, "me_shard", y.me_shard);
			mgmt_out_kv_u64(o, "resting", y.resting);
			mgmt_out_kv_i64(o, "tick", y.tick);
			mgmt_out_kv_i64(o, "lot", y.lot);
			mgmt_out_kv_i64(o, "last_px", y.last_px);
			mgmt_out_obj_end(o);
		}
	}
	mgmt_out_arr_end(o);
}

static void
view_routes(struct app_shard *s, struct mgmt_out *o)
{
	struct oms_route_info ri;
	oms_route_get(s->svc, &ri);
	mgmt_out_kv_u64(o, "epoch", ri.epoch);
	mgmt_out_kv_bool(o, "draining", oms_route_draining(s->svc));
	mgmt_out_key(o, "shards");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < ri.shard_count; i++) {
		mgmt_out_obj_begin(o);
		mgmt_out_kv_u64(o, "shard", ri.shards[i].shard);
		mgmt_out_kv_str(o, "state", ri.shards[i].state == WIRE_SHARD_ACTIVE ? "active"
										  : "receiving");
		mgmt_out_obj_end(o);
	}
	mgmt_out_arr_end(o);
	mgmt_out_key(o, "pins");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < ri.pin_count; i++) {
		mgmt_out_obj_begin(o);
		mgmt_out_kv_u64(o, "user", ri.pins[i].user);
		mgmt_out_kv_u64(o, "shard", ri.pins[i].shard);
		mgmt_out_obj_end(o);
	}
	mgmt_out_arr_end(o);
}

/* A user's balances of the configured assets (total and reserved). */
static void
view_balances(struct app_shard *s, uint64_t user, struct mgmt_out *o)
{
	mgmt_out_key(o, "balances");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < s->asset_count; i++) {
		int64_t total, reserved;
		if (oms_balance_get(s->svc, user, s->assets[i], &total, &reserved) != 0)
			continue;
		mgmt_out_obj_begin(o);
		mgmt_out_kv_u64(o, "asset", s->assets[i]);
		mgmt_out_kv_i64(o, "total", total);
		mgmt_out_kv_i64(o, "reserved", reserved);
		mgmt_out_obj_end(o);
	}
	mgmt_out_arr_end(o);
}

static void
view_user(struct app_shard *s, uint64_t user, struct mgmt_out *o)
{
	struct oms_user_info ui;
	int rc = oms_user_get(s->svc, user, &ui);
	mgmt_out_kv_u64(o, "user", user);
	mgmt_out_kv_u64(o, "owner", oms_owner(s->svc, user));
	mgmt_out_kv_bool(o, "killed", oms_user_killed(s->svc, user));
	mgmt_out_kv_str(o, "status", user_status_name(rc == 0 ? ui.status : OMS_USER_ABSENT));
	if (rc != 0)
		return;
	mgmt_out_kv_u64(o, "orders", ui.orders);
	mgmt_out_kv_u64(o, "sagas", ui.sagas);
	mgmt_out_kv_u64(o, "live", ui.live);
	mgmt_out_kv_u64(o, "parked", ui.parked);
	mgmt_out_kv_u64(o, "epoch", ui.epoch);
	mgmt_out_kv_u64(o, "version", ui.version);
	view_balances(s, user, o);
}

/* A page of the resident set: users with their status and balances, and where the next
 * page starts (a harness checks money over the whole set in a few queries). */
static void
view_users(struct app_shard *s, struct app_cmd *c, struct mgmt_out *o)
{
	uint64_t users[256];
	uint32_t cursor = c->cursor, limit = RTE_MIN(c->limit, (uint32_t)RTE_DIM(users));
	uint32_t n = oms_users_list(s->svc, &cursor, users, limit);
	mgmt_out_kv_u64(o, "resident", oms_resident_count(s->svc));
	mgmt_out_key(o, "users");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < n; i++) {
		struct oms_user_info ui;
		if (oms_user_get(s->svc, users[i], &ui) != 0)
			continue;
		mgmt_out_obj_begin(o);
		mgmt_out_kv_u64(o, "user", users[i]);
		mgmt_out_kv_str(o, "status", user_status_name(ui.status));
		mgmt_out_kv_u64(o, "sagas", ui.sagas);
		mgmt_out_kv_u64(o, "live", ui.live);
		mgmt_out_kv_u64(o, "owner", oms_owner(s->svc, users[i]));
		view_balances(s, users[i], o);
		mgmt_out_obj_end(o);
	}
	mgmt_out_arr_end(o);
	if (cursor == UINT32_MAX)
		mgmt_out_kv_str(o, "next", "end");
	else
		mgmt_out_kv_u64(o, "next", cursor);
}

/* symbols move: what this replica of the source ME shard knows of the symbol's move, and
 * up to c->limit orders of its frozen book from c->cursor (binary, struct app_move_view). */
static void
view_move(struct app_shard *s, struct app_cmd *c)
{
	struct app_move_view *v = (void *)c->out;
	if (c->out_cap < sizeof(*v)) {
		c->err = -E2BIG;
		app_cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	memset(v, 0, sizeof(*v));
	v->applied = cns_applied_index(s->cns);
	uint32_t symbol = c->target;
	struct me_symbol_info y;
	if (me_symbol_get(s->svc, symbol, &y) == 0) {
		v->known = 1;
		v->me_shard = y.me_shard;
		v->status = y.status;
		v->killed = y.killed;
		v->trade_seq = y.trade_seq;
		v->last_px = y.last_px;
		v->tick = y.tick;
		v->lot = y.lot;
		v->min_qty = y.min_qty;
		v->min_notional = y.min_notional;
		v->base_unit = y.base_unit;
		v->ref_px = y.ref_px;
		v->base_asset = y.base_asset;
		v->quote_asset = y.quote_asset;
		v->band_bps = y.band_bps;
	}
	struct me_move_info mi;
	if (v->known && me_move_info(s->svc, symbol, &mi) == 0) {
		v->move_id = mi.move_id;
		v->hash = mi.hash;
		v->count = mi.count;
		v->peer = mi.peer;
		v->role = mi.role;
		v->phase = mi.phase;
		v->ready = mi.ready;
		v->journal = mi.journal;
		v->journal_ok = mi.journal_ok;
		if (c->flags & APP_VIEW_MOVE_READY)
			v->ready = me_move_ready(s->svc, symbol) == 1;
		v->need_n = mi.need_n;
		v->need_over = mi.need_over;
		static_assert(APP_MOVE_NEED_MAX == ME_MOVE_NEED_MAX, "app_move_view.need");
		memcpy(v->need_shard, mi.need_shard, sizeof(v->need_shard));
		memcpy(v->need_seq, mi.need_seq, sizeof(v->need_seq));
	}
	size_t room = (c->out_cap - sizeof(*v)) / sizeof(struct wire_book_order);
	if (v->known && (c->flags & APP_VIEW_MOVE_LIVE)) {
		/* The book as it is (it may be trading): the copy made before the freeze. The
		 * move reported is the newest one (the copy's WATCH, once applied here). */
		v->count = y.resting;
		if (room >= y.resting) {
			int n = me_move_export(s->svc, symbol, 0, 0, (void *)(v + 1), y.resting);
			v->n = n > 0 ? (uint32_t)n : 0;
		}
		c->out_len = sizeof(*v) + (size_t)v->n * sizeof(struct wire_book_order);
		app_cmd_give(s, c, APP_CMD_OK);
		return;
	}
	uint32_t want = c->limit < room ? c->limit : (uint32_t)room;
	if (v->move_id != 0 && v->move_id == c->user && v->role == ME_MOVE_SOURCE &&
	    v->phase == ME_MOVE_FROZEN && want > 0) {
		int n = (c->flags & APP_VIEW_MOVE_JOURNAL)
				? me_move_journal_export(s->svc, symbol, c->user, c->cursor,
							 (void *)(v + 1), want)
				: me_move_export(s->svc, symbol, c->user, c->cursor,
						 (void *)(v + 1), want);
		if (n == -EOVERFLOW)
			v->journal_ok = 0; /* the caller reads the whole book instead */
		v->n = n > 0 ? (uint32_t)n : 0;
	}
	c->out_len = sizeof(*v) + (size_t)v->n * sizeof(struct wire_book_order);
	app_cmd_give(s, c, APP_CMD_OK);
}

/* symbols book: one side of the symbol's depth as this replica holds it, best first. */
static void
book_side(struct app_shard *s, struct mgmt_out *o, const char *key, uint32_t symbol,
	  enum wire_side side, uint32_t levels)
{
	mgmt_out_key(o, key);
	mgmt_out_arr_begin(o);
	/* A view, not the hot path: one allocation for the levels asked (at most 4096). */
	uint32_t want = levels < 4096 ? levels : 4096;
	struct me_depth_level *all = malloc(sizeof(*all) * want);
	uint32_t n = all != NULL ? me_depth(s->svc, symbol, side, all, want) : 0;
	for (uint32_t i = 0; i < n; i++) {
		mgmt_out_arr_begin(o);
		mgmt_out_i64(o, all[i].px);
		mgmt_out_i64(o, all[i].qty);
		mgmt_out_u64(o, all[i].count);
		mgmt_out_arr_end(o);
	}
	free(all);
	mgmt_out_arr_end(o);
}

static void
view_book(struct app_shard *s, struct app_cmd *c, struct mgmt_out *o)
{
	struct me_symbol_info y;
	bool known = me_symbol_get(s->svc, c->target, &y) == 0;
	mgmt_out_obj_begin(o);
	mgmt_out_kv_u64(o, "shard", s->id);
	mgmt_out_kv_u64(o, "applied", cns_applied_index(s->cns));
	mgmt_out_kv_u64(o, "symbol", c->target);
	mgmt_out_kv_bool(o, "known", known);
	if (known) {
		mgmt_out_kv_u64(o, "me_shard", y.me_shard);
		mgmt_out_kv_str(o, "status", sym_status_name(y.status));
		mgmt_out_kv_u64(o, "resting", y.resting);
		mgmt_out_kv_u64(o, "trade_seq", y.trade_seq);
		uint32_t levels = c->limit > 0 ? c->limit : 1000;
		book_side(s, o, "bids", c->target, WIRE_SIDE_BUY, levels);
		book_side(s, o, "asks", c->target, WIRE_SIDE_SELL, levels);
	}
	mgmt_out_obj_end(o);
}

/* Read-only views: this lcore is the only reader of the service's state. */
static void
cmd_view(struct app_shard *s, struct app_cmd *c)
{
	if (c->view == APP_VIEW_MOVE && !s->is_oms) {
		view_move(s, c);
		return;
	}
	if (c->view == APP_VIEW_STREAM && s->is_oms) {
		struct app_stream_view *v = (void *)c->out;
		if (c->out_cap < sizeof(*v) || c->target > UINT16_MAX) {
			c->err = c->out_cap < sizeof(*v) ? -E2BIG : -EINVAL;
			app_cmd_give(s, c, APP_CMD_FAILED);
			return;
		}
		v->applied = cns_applied_index(s->cns);
		uint64_t next = oms_stream_next_seq(s->svc, (uint16_t)c->target);
		v->seq = next > 0 ? next - 1 : 0;
		c->out_len = sizeof(*v);
		app_cmd_give(s, c, APP_CMD_OK);
		return;
	}
	if (c->view == APP_VIEW_BOOK && !s->is_oms) {
		struct mgmt_out bo;
		mgmt_out_init(&bo, c->out, c->out_cap);
		view_book(s, c, &bo);
		if (bo.overflow) {
			c->err = -E2BIG;
			app_cmd_give(s, c, APP_CMD_FAILED);
			return;
		}
		c->out_len = bo.len;
		app_cmd_give(s, c, APP_CMD_OK);
		return;
	}
	if (c->view < APP_VIEW_SYMBOLS || c->view > APP_VIEW_USERS ||
	    (c->view != APP_VIEW_SYMBOLS && !s->is_oms)) {
		c->err = -ENOTSUP;
		app_cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	struct mgmt_out o;
	mgmt_out_init(&o, c->out, c->out_cap);
	if (c->view == APP_VIEW_SYMBOLS) {
		view_symbols(s, &o); /* an array of rows */
	} else {
		mgmt_out_obj_begin(&o);
		mgmt_out_kv_u64(&o, "shard", s->id);
		mgmt_out_kv_str(&o, "role",
				cns_role(s->cns) == CNS_LEADER ? "leader" : "follower");
		mgmt_out_kv_u64(&o, "applied", cns_applied_index(s->cns));
		if (c->view == APP_VIEW_ROUTES)
			view_routes(s, &o);
		else if (c->view == APP_VIEW_USERS)
			view_users(s, c, &o);
		else
			view_user(s, c->user, &o);
		mgmt_out_obj_end(&o);
	}
	if (o.overflow) {
		c->err = -E2BIG;
		app_cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	c->out_len = o.len;
	app_cmd_give(s, c, APP_CMD_OK);
}

/* Take new commands (bounded), then settle the waiting ones: committed entries were
 * answered during apply; here the lost, the transferred and the late. Then the forwarded
 * member changes and leadership transfers this leader made for other nodes. */
uint32_t
app_cmd_work(struct app_shard *s)
{
	struct app_cmd *cmds[APP_CMD_DRAIN_MAX];
	unsigned n = rte_ring_sc_dequeue_burst(s->w.mgmt_rx, (void **)cmds, APP_CMD_DRAIN_MAX,
					       NULL);
	for (unsigned i = 0; i < n; i++) {
		struct app_cmd *c = cmds[i];
		sc_add(s, SC_MGMT_CMDS, 1);
		if (c->kind != APP_CMD_FORWARD)
			CHECK(c->shard == s->id); /* a forward may ride any shard lcore */
		switch (c->kind) {
		case APP_CMD_PROPOSE:
			cmd_propose(s, c);
			break;
		case APP_CMD_FORWARD:
			if (c->shard == s->id && cns_role(s->cns) == CNS_LEADER) {
				/* Led here since main looked. */
				uint16_t type =
					((const struct wire_msg_hdr *)(const void *)c->msg)->type;
				if (type == WIRE_MEMBER_CHANGE) {
					c->kind = APP_CMD_MEMBERS;
					cmd_members(s, c);
				} else if (type == WIRE_LEADER_TRANSFER) {
					c->kind = APP_CMD_TRANSFER;
					cmd_transfer(s, c);
				} else {
					c->kind = APP_CMD_PROPOSE;
					cmd_propose(s, c);
				}
			} else {
				app_fwd_cmd_start(s, c);
			}
			break;
		case APP_CMD_SNAPSHOT:
			cmd_snapshot(s, c);
			break;
		case APP_CMD_TRANSFER:
			cmd_transfer(s, c);
			break;
		case APP_CMD_MEMBERS:
			cmd_members(s, c);
			break;
		case APP_CMD_VIEW:
			cmd_view(s, c);
			break;
		default:
			c->err = -EINVAL;
			app_cmd_give(s, c, APP_CMD_FAILED);
			break;
		}
	}
	for (uint32_t i = 0; i < s->cmd_wait_count;) {
		struct app_cmd *c = s->cmd_wait[i];
		enum app_cmd_status st = APP_CMD_OK;
		bool done = false;
		if (c->kind == APP_CMD_FORWARD) {
			done = app_fwd_cmd_settle(s, c, &st);
		} else if (c->kind == APP_CMD_TRANSFER) {
			if (cns_leader(s->cns) == c->target) {
				c->value = cns_term(s->cns);
				done = true;
			}
		} else if (c->kind == APP_CMD_MEMBERS) {
			/* Done once its entry commits; lost once the log no longer holds it. */
			uint64_t t = c->index <= cns_last_index(s->cns)
					     ? cns_term_at(s->cns, c->index) : 0;
			bool ours = t == c->term || t == UINT64_MAX; /* compacted: it committed */
			if (!ours) {
				st = APP_CMD_LOST;
				done = true;
			} else if (cns_commit_index(s->cns) >= c->index) {
				c->value = c->index;
				done = true;
			}
		} else {
			uint64_t last = cns_last_index(s->cns);
			uint64_t t = c->index <= last ? cns_term_at(s->cns, c->index) : 0;
			/* Applied without its reply having matched: not our entry (or a snapshot
			 * jumped over it). Replaced by another term, or gone with our term. */
			if (cns_applied_index(s->cns) >= c->index ||
			    (t != c->term && (t != 0 || cns_term(s->cns) != c->term))) {
				st = APP_CMD_LOST;
				done = true;
			}
		}
		if (!done && s->clock_ns >= c->deadline_ns) {
			st = APP_CMD_TIMEOUT;
			done = true;
		}
		if (!done) {
			i++;
			continue;
		}
		app_cmd_unwait(s, i);
		app_cmd_give(s, c, st);
	}
	return n + app_fwd_members_settle(s) + app_fwd_transfers_settle(s);
}

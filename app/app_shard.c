/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shard lcore: one Raft member (consensus/) hosting one service (oms/ or me/), plus
 * the host roles that must read that service's state and therefore live on the same lcore
 * (docs/appliance.md). This file is its duty cycle and the service as consensus sees it:
 *
 *   - each cycle: frames in (app_ingress.c), cns_tick, the durability report (app_flog.c),
 *     cns_apply (bounded; the service's egress goes out through app_egress.c), bridge and
 *     bootstrap (app_bridge.c), inline persistence answers, control-socket commands, a
 *     snapshot every [limits] snapshot_entries entries, the outbox flushed, the published
 *     values for main;
 *   - the service adapter: the real service (oms or me), with the index and term of the
 *     entry being applied noted for the control-socket commands waiting for it.
 *
 * The files of the lcore and their layers are listed in app_shard_int.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <rte_ring.h>

#include "app_shard_int.h"
#include "me/me.h"
#include "oms/oms.h"

#define AGG_EVERY_NS (200 * 1000000ull) /* aggregate refresh for the stats */
#define AGG_SLICE 2048u                 /* actor slots an asset pass reads per cycle */
#define READY_EVERY_NS (1000000ull)     /* pub_ready refresh (the RX gate's view) */

static void
aggregates(struct app_shard *s)
{
	if (s->now - s->last_agg < AGG_EVERY_NS)
		return;
	s->last_agg = s->now;
	if (s->is_oms) {
		const struct oms *oms = s->svc;
		PUB(s->pub_route_epoch, oms_route_epoch(oms));
		PUB(s->pub_inflight, (uint64_t)oms_inflight_count(oms));
		PUB(s->pub_resident, (uint64_t)oms_resident_count(oms));
		PUB(s->pub_parked, (uint64_t)oms_parked_count(oms));
		struct oms_cache_info ci;
		oms_cache_info(oms, &ci);
		const uint32_t cache[7] = { ci.idle,	  ci.open,    ci.inflight, ci.flushing,
					    ci.hydrating, ci.waiting, ci.cap };
		for (int i = 0; i < 7; i++)
			PUB(s->pub_cache[i], (uint64_t)cache[i]);
	} else {
		PUB(s->pub_resting, (uint64_t)me_orders_resting(s->svc));
	}
}

/* OMS: the money held (every resident user's balances and the fee account, per watched
 * asset) for the stats and the conservation checks that read them. A walk of every actor
 * slot — a million in the production config, tens of milliseconds of this lcore at once
 * (docs/perf.md) — so a pass goes AGG_SLICE slots a cycle, one pass every AGG_EVERY_NS. A
 * sum over state that changes under it would be no sum: a pass is dropped (until the next
 * period, so a loaded lcore pays at most a slice or two a period) when the service applies
 * a message before it ends — balances, fees and the resident set change only by messages
 * (a user leaves it on its FLUSH_OK, joins on its HYDRATE; the timers only start flushes,
 * which keep it counted); tick entries (an idle leader's, every tick_ms) do not drop it.
 * Only a whole pass is published, with the applied index it ended at: with more slots than
 * one slice, under steady load the figures are those of the last quiet moment. */
static void
asset_pass(struct app_shard *s)
{
	if (!s->is_oms || s->asset_count == 0)
		return;
	const struct oms *oms = s->svc;
	uint64_t msgs = oms_counter_get(oms, OMS_C_MSGS);
	if (!s->agg_pass) {
		if (s->now - s->last_pass < AGG_EVERY_NS)
			return;
		s->last_pass = s->now;
		s->agg_pass = true;
		s->agg_cursor = 0;
		s->agg_msgs = msgs;
		memset(s->agg_sum, 0, sizeof(s->agg_sum));
	} else if (msgs != s->agg_msgs) {
		s->agg_pass = false; /* the money moved under it: next period */
		return;
	}
	s->agg_cursor = oms_asset_sums_slice(oms, s->assets, s->asset_count, s->agg_cursor,
					     AGG_SLICE, s->agg_sum);
	if (s->agg_cursor < oms_actor_slots(oms))
		return;
	for (uint32_t i = 0; i < s->asset_count; i++) {
		int64_t fees = oms_fees_get(oms, s->assets[i]);
		PUB(s->pub_asset_sum[i], s->agg_sum[i] + fees);
		PUB(s->pub_asset_fees[i], fees);
	}
	PUB(s->pub_asset_applied, cns_applied_index(s->cns));
	s->agg_pass = false;
}

/* Ready to take client load ([port] rx_start = leader): a leader is known; this replica has
 * applied everything committed and the commit point is in the current term (so the new
 * leader's bootstrap config, proposed the moment it had committed its first entry, precedes
 * anything the node forwards from now on); an OMS replica has applied the configured
 * routing epoch (proposed after the symbols); the leader has proposed its bootstrap and, on
 * an OMS shard, rebuilt its bridge. */
static bool
ready(const struct app_shard *s)
{
	uint64_t term = cns_term(s->cns), commit = cns_commit_index(s->cns);
	if (cns_leader(s->cns) == CNS_NODE_NONE || commit == 0)
		return false;
	if (cns_term_at(s->cns, commit) != term || cns_applied_index(s->cns) < commit)
		return false;
	if (s->is_oms && oms_route_epoch(s->svc) < s->app->cfg.routing.epoch)
		return false;
	if (cns_role(s->cns) == CNS_LEADER && (s->boot_term != term || (s->is_oms && !s->roles_ready)))
		return false;
	return true;
}

uint32_t
app_shard_take(struct app_shard *s, struct rte_ring *ring)
{
	struct rte_mbuf *ms[APP_SHARD_DRAIN_MAX];
	unsigned n = rte_ring_sc_dequeue_burst(ring, (void **)ms, APP_SHARD_DRAIN_MAX, NULL);
	for (unsigned i = 0; i < n; i++)
		app_ingress_frame(s, ms[i]);
	return n;
}

uint32_t
app_shard_do_work(void *arg, uint64_t now_ns)
{
	struct app_shard *s = arg;
	uint32_t work = 0;

	s->now = (uint64_t)((int64_t)now_ns + s->app->clock_offset_ns);
	s->clock_ns = now_ns;
	work += app_shard_take(s, s->w.rx);
	work += app_shard_take(s, s->w.local);

	if (s->is_gateway)
		app_session_duty(s);
	cns_tick(s->cns, s->now);
	app_flog_durable_report(s);
	s->leader = cns_role(s->cns) == CNS_LEADER;
	uint32_t applied = cns_apply(s->cns, CNS_APPLY_DRAIN_MAX);
	s->apply_index = 0;
	sc_add(s, SC_APPLIED, applied);
	work += applied;
	/* [gateway]: the routing, for the gateway lcore, whenever it changed (every change
	 * moves the epoch); no free copy: again next cycle (app_route_pub.h). */
	if (s->route_pub && oms_route_epoch(s->svc) != s->route_pub_epoch) {
		struct oms_route_info ri;
		oms_route_get(s->svc, &ri);
		if (app_route_publish(&s->app->route, &ri))
			s->route_pub_epoch = ri.epoch;
	}

	uint32_t leader = cns_leader(s->cns);
	if (leader != CNS_NODE_NONE)
		PUB(s->app->leader_hint[s->id], leader);
	app_bridge_tick(s);
	app_placement_tick(s);
	if (s->is_oms)
		work += app_inline_persist_drain(s);
	work += app_cmd_work(s);

	uint64_t idx = cns_applied_index(s->cns);
	app_shard_snapshot_poll(s);
	if (idx - s->snap_index >= s->app->cfg.snapshot_entries) {
		/* Counts and logs; while the last one's file is written, tried again later. */
		if (app_shard_snapshot_take(s) != -EBUSY)
			s->snap_index = idx;
	}
	app_outbox_flush(&s->ob);
	if (s->shadow != NULL)
		app_shadow_publish(s->shadow); /* this cycle's messages, to the copy */
	aggregates(s);
	asset_pass(s);

	PUB(s->pub_role, (uint32_t)cns_role(s->cns));
	if (s->now - s->last_ready >= READY_EVERY_NS) {
		s->last_ready = s->now; /* a few loads and a log lookup: not on every empty poll */
		PUB(s->pub_ready, ready(s));
	}
	PUB(s->pub_leader, leader);
	PUB(s->pub_term, cns_term(s->cns));
	PUB(s->pub_commit, cns_commit_index(s->cns));
	PUB(s->pub_applied, idx);
	PUB(s->pub_last, cns_last_index(s->cns));
	app_shard_pub_members(s);
	return work;
}

static const struct svc_ops *
svc_real(const struct app_shard *s)
{
	return s->is_oms ? &oms_svc_ops : &me_svc_ops;
}

/* wrap_apply's first message of an entry, a forwarded admin command, or any message with a
 * shadow copy kept. */
static __attribute__((noinline)) void
wrap_apply_rest(struct app_shard *s, uint64_t index, uint64_t now_ns,
		const struct wire_msg_hdr *msg, struct svc_sink *sink)
{
	if (s->apply_index != index) {
		s->apply_index = index;
		s->apply_term = s->cns != NULL ? cns_term_at(s->cns, index) : 0;
	}
	if (msg->type == WIRE_FORWARDED_ADMIN) {
		/* An admin command another node forwarded: the service applies the wrapped
		 * message; its outcome is recorded and answered (app_admin_fwd.c). */
		struct app_fwd_apply fa;
		const struct wire_msg_hdr *inner = app_fwd_apply_begin(s, &fa, msg, sink);
		if (inner == NULL)
			return; /* not a message for the service (app_admin_fwd.c) */
		svc_real(s)->apply(s->svc, index, now_ns, inner, &fa.sink);
		app_fwd_apply_end(&fa);
		if (s->shadow != NULL)
			app_shadow_push_apply(s->shadow, index, now_ns, inner);
		return;
	}
	/* The copy is given what the service is given (first: the apply is then a jump); a
	 * full ring loses it (counted by app_shard_snapshot_poll; the next snapshot, taken
	 * without it, seeds it again). */
	if (s->shadow != NULL)
		app_shadow_push_apply(s->shadow, index, now_ns, msg);
	svc_real(s)->apply(s->svc, index, now_ns, msg, sink);
}

/* The service's apply, seen by the lcore first: the term of each entry's index for the
 * service's egress, forwarded admin commands unwrapped, and the shadow copy fed. A message
 * after the first of its entry, with no copy kept, goes straight on (a jump). */
static void
wrap_apply(void *svc, uint64_t index, uint64_t now_ns, const struct wire_msg_hdr *msg,
	   struct svc_sink *sink)
{
	struct app_shard *s = svc;
	if (__builtin_expect(s->apply_index != index || msg->type == WIRE_FORWARDED_ADMIN ||
				     s->shadow != NULL,
			     0)) {
		wrap_apply_rest(s, index, now_ns, msg, sink);
		return;
	}
	svc_real(s)->apply(s->svc, index, now_ns, msg, sink);
}

static void
wrap_tick(void *svc, uint64_t index, uint64_t now_ns, struct svc_sink *sink)
{
	struct app_shard *s = svc;
	svc_real(s)->tick(s->svc, index, now_ns, sink);
	if (s->shadow != NULL)
		app_shadow_push_tick(s->shadow, index, now_ns);
}

static size_t
wrap_snapshot_size(const void *svc)
{
	const struct app_shard *s = svc;
	return svc_real(s)->snapshot_size(s->svc);
}

static size_t
wrap_snapshot(const void *svc, void *buf, size_t cap)
{
	const struct app_shard *s = svc;
	return svc_real(s)->snapshot(s->svc, buf, cap);
}

static int
wrap_restore(void *svc, const void *buf, size_t len)
{
	struct app_shard *s = svc;
	int rc = svc_real(s)->restore(s->svc, buf, len);
	if (s->shadow != NULL) {
		/* At boot, on an install and on the reload of our own base after a refused one,
		 * consensus restores from bytes it keeps until its next snapshot or install
		 * (which app_shard_snapshot_take holds, and which a later seed waits out):
		 * the copy restores from them too. A refused snapshot left the service empty,
		 * which only a reload (another restore) or a later snapshot mends. */
		if (rc == 0) {
			app_shadow_seed(s->shadow, buf, len);
		} else {
			app_shadow_seed_later(s->shadow);
			app_shadow_seed_base(s->shadow, NULL, 0);
		}
		s->shadow_seeding = false; /* a snapshot taken without the copy: superseded */
	}
	return rc;
}

static uint64_t
wrap_state_hash(const void *svc)
{
	const struct app_shard *s = svc;
	return svc_real(s)->state_hash(s->svc);
}

const struct svc_ops app_shard_svc_ops = {
	.name = "shard",
	.apply = wrap_apply,
	.tick = wrap_tick,
	.snapshot_size = wrap_snapshot_size,
	.snapshot = wrap_snapshot,
	.restore = wrap_restore,
	.state_hash = wrap_state_hash,
};

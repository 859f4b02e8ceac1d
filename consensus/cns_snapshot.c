/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshots and log compaction (Raft §7): taking one at the applied index, receiving one in
 * chunks (InstallSnapshot) and installing it, the leader's side of the replies, and
 * restoring one at boot. Sending the chunks is in cns_progress.c.
 */
#include "cns_int.h"

static void
keep_compacting(struct cns *c)
{
	/* Keep a tail of entries behind the snapshot so a slightly lagging follower catches up
	 * with AppendEntries rather than a whole snapshot. */
	uint64_t keep = c->cfg.log_keep_entries;
	if (c->snap.index > keep && c->snap.index - keep > c->base_index)
		cns_log_compact(c, c->snap.index - keep);
}

/* The configuration prefix of a snapshot taken now (Raft §7: the snapshot carries the
 * configuration as of its index), and the meta of the applied index. */
static void
take_prefix(struct cns *c, uint8_t *buf, struct cns_snapshot_meta *meta)
{
	struct cns_snap_prefix pre;
	pre.magic = CNS_SNAP_MAGIC;
	cns_members_encode(&c->mem_applied, &pre.config);
	memcpy(buf, &pre, sizeof(pre));
	uint64_t term = cns_log_term(c, c->applied);
	CHECK(term != CNS_TERM_UNKNOWN);
	meta->index = c->applied;
	meta->term = term;
	meta->time_ns = c->applied_time_ns;
	meta->len = sizeof(pre);
}

/* A snapshot taken here is the base now: tell the host, compact behind it. */
static void
taken(struct cns *c)
{
	CNS_COUNT(c, SNAPSHOTS_TAKEN);
	if (c->env.host.snapshot_saved != NULL)
		c->env.host.snapshot_saved(c->env.host.ctx, &c->snap, c->snap_buf);
	/* The snapshot is durable now, and it covers everything through its index. */
	if (c->durable < c->snap.index)
		c->durable = c->snap.index;
	keep_compacting(c);
	CHECK(c->base_index <= c->snap.index);
}

int
cns_snapshot_take(struct cns *c)
{
	CHECK(c != NULL);
	if (c->take.index != 0)
		return -EBUSY;
	if (c->applied <= c->snap.index)
		return -EALREADY;
	const struct svc_ops *ops = c->env.svc_ops;
	size_t size = ops->snapshot_size(c->env.svc);
	if (size > c->lim.snapshot_bytes_max)
		return -ENOSPC;
	struct cns_snapshot_meta meta;
	take_prefix(c, c->snap_buf, &meta);
	size_t written = ops->snapshot(c->env.svc, c->snap_buf + meta.len,
				       c->lim.snapshot_bytes_max);
	CHECK(written == size);
	meta.len += size;
	c->snap = meta;
	taken(c);
	return 0;
}

int
cns_snapshot_begin(struct cns *c, void **buf, size_t *cap)
{
	CHECK(c != NULL && buf != NULL && cap != NULL);
	if (c->take_buf == NULL)
		return -ENOTSUP;
	if (c->take.index != 0)
		return -EBUSY;
	if (c->applied <= c->snap.index)
		return -EALREADY;
	take_prefix(c, c->take_buf, &c->take);
	*buf = c->take_buf + c->take.len;
	*cap = c->lim.snapshot_bytes_max;
	return 0;
}

int
cns_snapshot_end(struct cns *c, size_t len)
{
	CHECK(c != NULL);
	if (c->take.index == 0)
		return -EINVAL;
	struct cns_snapshot_meta meta = c->take;
	memset(&c->take, 0, sizeof(c->take));
	if (len > c->lim.snapshot_bytes_max)
		return -EINVAL;
	if (len == 0)
		return -ENOSPC;
	/* Installed meanwhile: the base covers this one's index, or is at it (a leader's
	 * snapshot of the same entry). Only an install moves the base while one is pending. */
	if (meta.index <= c->snap.index)
		return -ESTALE;
	/* The base is before the pending index and nothing compacts past the base, and what
	 * was applied is committed, never truncated: the log still holds the entry. */
	CHECK(cns_log_term(c, meta.index) == meta.term);
	meta.len += len;
	uint8_t *t = c->snap_buf;
	c->snap_buf = c->take_buf;
	c->take_buf = t;
	c->snap = meta;
	taken(c);
	return 0;
}

uint64_t
cns_snapshot_pending(const struct cns *c)
{
	return c->take.index;
}

static void
send_snapshot_reply(struct cns *c, uint32_t to, uint64_t last_index, uint64_t next_offset,
		    bool done, bool gap)
{
	struct wire_snapshot_reply r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_SNAPSHOT_REPLY, c->cfg.shard);
	r.term = c->term;
	r.last_index = last_index;
	r.next_offset = next_offset;
	r.follower = c->cfg.self;
	r.done = done;
	r.gap = gap;
	cns_send(c, to, &r);
}

/* The service refused a received snapshot (and reset itself to empty): go back to our own
 * base and replay the log after it. Everything after the base is still in the log. */
static void
reload_own_base(struct cns *c)
{
	const struct svc_ops *ops = c->env.svc_ops;
	int rc = -EINVAL;
	if (c->snap.index != 0) {
		struct cns_members m;
		uint64_t off = 0;
		CHECK(cns_snap_split(c, c->snap_buf, c->snap.len, &m, &off) == 0);
		rc = ops->restore(c->env.svc, c->snap_buf + off, c->snap.len - off);
		c->mem_applied = m;
	} else {
		/* No base: the service is empty, as the refused restore left it, and so is what
		 * was applied; the log from index 1 replays the configuration with the rest. */
		cns_members_bootstrap(c, &c->mem_applied);
	}
	/* Our own snapshot was accepted once; with no snapshot the service is empty now. */
	CHECK(rc == 0 || c->snap.index == 0);
	CHECK(c->base_index <= c->snap.index);
	c->applied = c->snap.index;
	c->applied_time_ns = c->snap.time_ns;
	memset(&c->recv, 0, sizeof(c->recv));
	c->recv_offset = 0;
	CNS_COUNT(c, MALFORMED);
}

/* Make the received snapshot this node's base (Raft §7, receiver steps 5-8). Returns false
 * when the service refused it. */
static bool
install(struct cns *c)
{
	const struct svc_ops *ops = c->env.svc_ops;
	/* Before the snapshot becomes our base (cns_log_term answers from it). */
	bool have = c->recv.index <= c->last_index &&
		    cns_log_term(c, c->recv.index) == c->recv.term;
	struct cns_members m;
	uint64_t off = 0;
	int rc = cns_snap_split(c, c->recv_buf, c->recv.len, &m, &off);
	if (rc == 0)
		rc = ops->restore(c->env.svc, c->recv_buf + off, c->recv.len - off);
	if (rc != 0) {
		reload_own_base(c);
		return false;
	}
	c->mem_applied = m;
	uint8_t *t = c->snap_buf;
	c->snap_buf = c->recv_buf;
	c->recv_buf = t;
	c->snap = c->recv;
	uint64_t index = c->snap.index;
	c->applied = index;
	c->applied_time_ns = c->snap.time_ns;
	if (c->commit < index)
		c->commit = index;
	if (have) {
		/* Step 6: we hold the entry it ends with; keep the entries after it. */
		cns_log_compact(c, index);
	} else {
		/* Step 7: discard the whole log; the snapshot's configuration is in effect. */
		cns_log_reset_to(c, index, c->snap.term, c->snap.time_ns);
		c->durable = index;
	}
	/* The configuration in effect is the latest entry of the log we kept, else the
	 * snapshot's. Step 7 keeps no entry: an uncommitted configuration beyond the snapshot's
	 * index went with the rest (sim-raft --members seed 16: a leader's own removal at 653,
	 * never committed, outlived a discarded log under a snapshot at 646). */
	if (!have && c->mem_index > index)
		CNS_COUNT(c, CONFIG_REVERTED);
	if (!have || c->mem_index <= index) {
		c->mem_prev_known = 0;
		cns_members_set(c, &m, index);
	}
	if (c->durable < index)
		c->durable = index;
	if (c->leader_match < index)
		c->leader_match = index;
	memset(&c->recv, 0, sizeof(c->recv));
	c->recv_offset = 0;
	CNS_COUNT(c, SNAPSHOTS_INSTALLED);
	if (c->env.host.snapshot_saved != NULL)
		c->env.host.snapshot_saved(c->env.host.ctx, &c->snap, c->snap_buf);
	CHECK(c->commit <= c->last_index);
	return true;
}

void
cns_on_install_snapshot(struct cns *c, const struct wire_install_snapshot *m)
{
	if (m->term < c->term) {
		CNS_COUNT(c, STALE_MSGS);
		send_snapshot_reply(c, m->leader, m->last_index, 0, false, false);
		return;
	}
	CHECK(c->role != CNS_LEADER);
	if (c->role != CNS_FOLLOWER || c->leader != m->leader)
		cns_become_follower(c, m->term, m->leader);
	c->leader_heard_ns = c->now_ns;
	cns_reset_election_timer(c);

	if (m->last_index <= c->commit) {
		/* We already hold everything it covers, committed. */
		send_snapshot_reply(c, m->leader, m->last_index, m->total_len, true, false);
		return;
	}
	if (m->offset == 0 && (c->recv.index != m->last_index || c->recv.term != m->last_term)) {
		if (m->total_len > c->lim.snapshot_bytes_max + sizeof(struct cns_snap_prefix)) {
			send_snapshot_reply(c, m->leader, m->last_index, 0, false, false);
			return;
		}
		c->recv.index = m->last_index;
		c->recv.term = m->last_term;
		c->recv.time_ns = m->last_time_ns;
		c->recv.len = m->total_len;
		c->recv_offset = 0;
	}
	if (c->recv.index != m->last_index || c->recv.term != m->last_term ||
	    c->recv.len != m->total_len || m->offset != c->recv_offset ||
	    m->offset + m->tail_len > c->recv.len) {
		/* Out of order or a different snapshot: say where we are, and whether a chunk
		 * before this one is missing (a duplicate of one we hold is no gap). */
		bool same = c->recv.index == m->last_index && c->recv.term == m->last_term;
		uint64_t at = same ? c->recv_offset : 0;
		send_snapshot_reply(c, m->leader, m->last_index, at, false, m->offset > at);
		return;
	}
	memcpy(c->recv_buf + m->offset, m + 1, m->tail_len);
	c->recv_offset += m->tail_len;
	if (!m->done || c->recv_offset != c->recv.len) {
		send_snapshot_reply(c, m->leader, m->last_index, c->recv_offset, false, false);
		return;
	}
	uint64_t index = c->recv.index;
	uint64_t len = c->recv.len;
	if (install(c))
		send_snapshot_reply(c, m->leader, index, len, true, false);
	else
		send_snapshot_reply(c, m->leader, index, 0, false, true); /* start it over */
}

void
cns_on_snapshot_reply(struct cns *c, const struct wire_snapshot_reply *m)
{
	if (c->role != CNS_LEADER || m->term != c->term) {
		CNS_COUNT(c, STALE_MSGS);
		return;
	}
	struct cns_peer *p = cns_peer_find(c, m->follower);
	if (p == NULL) {
		CNS_COUNT(c, STALE_MSGS); /* removed since */
		return;
	}
	p->last_ack_ns = c->now_ns;
	if (p->state != CNS_PEER_SNAPSHOT)
		return;
	if (m->done) {
		if (m->last_index > p->match_index && m->last_index <= c->last_index)
			p->match_index = m->last_index;
		if (p->recv_index < p->match_index)
			p->recv_index = p->match_index;
		p->next_index = p->match_index + 1;
		p->state = CNS_PEER_PROBE;
		p->inflight = 0;
		p->progress_ns = c->now_ns;
		cns_leader_commit(c);
		cns_send_append(c, p);
		return;
	}
	cns_snapshot_follow(c, p);
	if (m->last_index != p->snap_index || m->next_offset > c->snap.len) {
		/* About another snapshot (a reply to an old chunk) or nonsense: the retransmit
		 * timer covers a follower that really lost its place. */
		CNS_COUNT(c, STALE_MSGS);
		return;
	}
	if (m->next_offset > p->snap_offset) {
		/* Cumulative acknowledgement: the follower holds [0, next_offset). */
		p->snap_offset = m->next_offset;
		if (p->snap_probe) {
			/* The probe was answered: whatever followed the gap was dropped or is
			 * stale, pipeline again from here. */
			p->snap_probe = 0;
			p->snap_sent = p->snap_offset;
		} else if (p->snap_sent < p->snap_offset) {
			p->snap_sent = p->snap_offset;
		}
		p->progress_ns = c->now_ns;
		if (!m->gap) {
			cns_snapshot_fill(c, p);
			return;
		}
	}
	if (!m->gap)
		return; /* a duplicate chunk or a late reply: nothing is missing */
	/* A gap: the follower dropped a chunk beyond next_offset (one before it was lost or
	 * overtaken), or it lost its place (restarted, refused the snapshot). The other chunks
	 * in flight report the same gap: probe once, ignore them while the probe is out (the
	 * retransmit timer in cns_leader_tick covers a lost probe), so reordering costs a
	 * round trip per hole, never a storm. A gap behind what it acknowledged is stale,
	 * unless a probe is out (then it is where the follower is now). */
	if (p->snap_probe ? m->next_offset >= p->snap_offset : m->next_offset < p->snap_offset)
		return;
	cns_snapshot_probe(c, p, m->next_offset);
}

int
cns_snapshot_restore(struct cns *c, const struct cns_snapshot_meta *meta, const void *data)
{
	CHECK(meta->len <= c->lim.snapshot_bytes_max + sizeof(struct cns_snap_prefix));
	memcpy(c->snap_buf, data, meta->len);
	struct cns_members m;
	uint64_t off = 0;
	if (cns_snap_split(c, c->snap_buf, meta->len, &m, &off) != 0)
		return -EINVAL;
	if (off == 0 && meta->len > c->lim.snapshot_bytes_max)
		return -EINVAL;
	if (c->env.svc_ops->restore(c->env.svc, c->snap_buf + off, meta->len - off) != 0)
		return -EINVAL;
	c->mem_prev_known = 0;
	cns_members_set(c, &m, meta->index);
	c->mem_applied = m;
	c->snap = *meta;
	c->applied = meta->index;
	c->commit = meta->index;
	c->applied_time_ns = meta->time_ns;
	const struct cns_log_ops *ops = c->env.log_ops;
	uint64_t first = ops->first_index(c->env.log);
	uint64_t last = ops->last_index(c->env.log);
	if (first <= meta->index && meta->index <= last &&
	    ops->entry(c->env.log, meta->index)->term == meta->term) {
		ops->compact(c->env.log, meta->index);
	} else if (first != meta->index + 1) {
		if (last >= first)
			ops->truncate(c->env.log, first);
		ops->compact(c->env.log, meta->index);
	}
	CHECK(ops->first_index(c->env.log) == meta->index + 1);
	c->base_index = meta->index;
	c->base_term = meta->term;
	c->base_time_ns = meta->time_ns;
	cns_log_refresh(c);
	return 0;
}

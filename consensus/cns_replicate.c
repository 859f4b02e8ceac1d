/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Log replication (Raft §5.3): the follower's side of AppendEntries, the leader's side of its
 * replies (fast back-up, the move from probe to pipeline), and the leader's tick:
 * heartbeats, retransmits, check-quorum and the end of a leadership transfer. What to send
 * a follower is decided in cns_progress.c.
 */
#include "cns_int.h"

static void
maybe_timeout_now(struct cns *c)
{
	if (c->transfer_target == CNS_NODE_NONE || c->batch_len != 0)
		return;
	struct cns_peer *p = cns_peer_find(c, c->transfer_target);
	CHECK(p != NULL); /* a configuration change cancels a transfer to a non-voter */
	if (p->match_index != c->last_index)
		return;
	/* Once per heartbeat: a lost TimeoutNow is resent, a delivered one not repeated. */
	if (c->transfer_sent_ns != 0 && c->now_ns - c->transfer_sent_ns < c->cfg.heartbeat_ns)
		return;
	c->transfer_sent_ns = c->now_ns;
	struct wire_timeout_now m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_TIMEOUT_NOW, c->cfg.shard);
	m.term = c->term;
	m.leader = c->cfg.self;
	cns_send(c, p->id, &m);
	CNS_COUNT(c, TIMEOUT_NOW_SENT);
}

static bool
leader_removed(struct cns *c)
{
	/* Thesis §4.2.2: a leader outside the configuration manages the cluster until the
	 * configuration that removed it commits, then steps down, handing over to the voter
	 * that holds everything so the cluster does not wait out an election timeout. */
	if (c->role != CNS_LEADER || cns_self_votes(c) || c->commit < c->mem_index)
		return false;
	uint32_t best = CNS_NODE_NONE;
	for (uint32_t i = 0; i < c->mem.count; i++) {
		if (i == c->self_slot || !cns_slot_votes(c, i))
			continue;
		if (c->peers[i].match_index == c->last_index) {
			best = c->peers[i].id;
			break;
		}
	}
	if (best != CNS_NODE_NONE) {
		struct wire_timeout_now m;
		memset(&m, 0, sizeof(m));
		wire_hdr_init(&m.hdr, WIRE_TIMEOUT_NOW, c->cfg.shard);
		m.term = c->term;
		m.leader = c->cfg.self;
		cns_send(c, best, &m);
		CNS_COUNT(c, TIMEOUT_NOW_SENT);
	}
	cns_become_follower(c, c->term, CNS_NODE_NONE);
	return true;
}

void
cns_leader_tick(struct cns *c)
{
	CHECK(c->role == CNS_LEADER);
	uint64_t now = c->now_ns;
	if (leader_removed(c))
		return;
	cns_seal_batch(c);
	if (c->need_first_entry)
		cns_append_first_entry(c);
	cns_maybe_tick_entry(c);

	/* Check-quorum (thesis §6.2): a leader that has not heard from a majority within an
	 * election timeout steps down, so its lease cannot hold back a new election. */
	uint64_t window = c->cfg.election_timeout_max_ns;
	if (now - c->leader_since_ns >= window) {
		uint32_t heard = cns_self_votes(c) ? 1 : 0;
		for (uint32_t i = 0; i < c->mem.count; i++)
			if (i != c->self_slot && cns_slot_votes(c, i) &&
			    now - c->peers[i].last_ack_ns < window)
				heard++;
		if (heard < c->majority) {
			CNS_COUNT(c, CHECK_QUORUM_LOST);
			cns_become_follower(c, c->term, CNS_NODE_NONE);
			return;
		}
	}
	if (c->transfer_target != CNS_NODE_NONE && now >= c->transfer_deadline_ns)
		c->transfer_target = CNS_NODE_NONE; /* abandoned: keep leading */

	uint64_t hb = c->cfg.heartbeat_ns;
	for (uint32_t i = 0; i < c->mem.count; i++) {
		if (i == c->self_slot)
			continue;
		struct cns_peer *p = &c->peers[i];
		switch (p->state) {
		case CNS_PEER_REPLICATE:
			if (p->next_index - 1 > p->recv_index && now - p->progress_ns >= 2 * hb) {
				/* Lost in flight: fall back to probing from what it holds. */
				p->state = CNS_PEER_PROBE;
				p->next_index = p->recv_index + 1;
				p->inflight = 0;
				cns_send_append(c, p);
			} else if (now - p->last_send_ns >= hb || p->commit_sent < c->commit) {
				/* Heartbeat, or tell it the new commit index at once so followers
				 * apply promptly (Aeron's commit position). */
				if (cns_window_open(c, p))
					cns_send_append(c, p);
				else
					cns_send_heartbeat(c, p);
			}
			break;
		case CNS_PEER_PROBE:
			if (now - p->last_send_ns >= hb) {
				p->inflight = 0;
				cns_send_append(c, p);
			}
			break;
		case CNS_PEER_SNAPSHOT:
			if (now - p->last_send_ns >= hb) {
				/* Retransmit timer: nothing sent for a heartbeat means the window
				 * is stuck (chunks or replies lost): one chunk from what was acked,
				 * the window again once it is answered. */
				cns_snapshot_probe(c, p, p->snap_offset);
			}
			break;
		default:
			CHECK(false);
		}
	}
	cns_replicate_all(c);
	if (c->role == CNS_LEADER)
		maybe_timeout_now(c);
}

/* recv: what we hold matching this leader (leader_match), 0 when answering a stale leader. */
static void
send_append_reply(struct cns *c, uint32_t to, uint64_t seq, bool success, uint64_t match,
		  uint64_t recv, uint64_t conflict_index, uint64_t conflict_term)
{
	CHECK(recv >= match);
	if (success)
		c->match_acked = match;
	struct wire_append_reply r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_APPEND_REPLY, c->cfg.shard);
	r.term = c->term;
	r.match_index = match;
	r.recv_index = recv;
	r.conflict_index = conflict_index;
	r.conflict_term = conflict_term;
	r.seq = seq;
	r.follower = c->cfg.self;
	r.success = success;
	cns_send(c, to, &r);
}

/* What a follower reports as replicated: in memory, or only what is durable. */
static uint64_t
follower_match(const struct cns *c)
{
	uint64_t m = c->leader_match;
	if (c->cfg.durability == CNS_DURABLE_DISK && c->durable < m)
		m = c->durable;
	return m;
}

void
cns_follower_ack(struct cns *c)
{
	if (c->role != CNS_FOLLOWER || c->leader == CNS_NODE_NONE)
		return;
	uint64_t m = follower_match(c);
	if (m == c->match_acked)
		return; /* the disk caught up with nothing new for this leader */
	send_append_reply(c, c->leader, 0, true, m, c->leader_match, 0, 0);
}

/* Validate an entry from the wire before it reaches the log (the log's CHECKs guard the
 * other side of this boundary): lengths, kind, a term no newer than the leader's. */
static bool
entry_ok(const struct wire_append_entries *m, const struct wire_entry_hdr *e, uint32_t avail)
{
	if (avail < sizeof(*e) || e->data_len > avail - sizeof(*e))
		return false;
	if (e->data_len > CNS_ENTRY_DATA_MAX || e->data_len % 8 != 0 || e->reserved != 0)
		return false;
	if (e->kind < CNS_ENTRY_NORMAL || e->kind > CNS_ENTRY_NOOP)
		return false;
	struct cns_members mem;
	if (e->kind == CNS_ENTRY_CONFIG && !cns_members_decode(e + 1, e->data_len, &mem))
		return false;
	return e->term <= m->term;
}

void
cns_on_append_entries(struct cns *c, const struct wire_append_entries *m)
{
	if (m->term < c->term) {
		/* Raft §5.1: tell the stale leader about the newer term. */
		CNS_COUNT(c, STALE_MSGS);
		send_append_reply(c, m->leader, m->seq, false, 0, 0, 0, 0);
		return;
	}
	/* Election Safety (Raft §5.2): one leader per term. Another leader of our own term
	 * means safety is already lost: fail-stop rather than diverge. */
	CHECK(c->role != CNS_LEADER);
	if (c->role != CNS_FOLLOWER || c->leader != m->leader)
		cns_become_follower(c, m->term, m->leader);
	c->leader_heard_ns = c->now_ns;
	cns_reset_election_timer(c);
	CNS_COUNT(c, APPEND_RECV);

	const uint8_t *tail = (const uint8_t *)(m + 1);
	uint32_t tail_len = m->tail_len;
	uint32_t count = m->entry_count;
	uint32_t pos = 0;
	uint64_t prev = m->prev_index;
	uint64_t prev_term = m->prev_term;

	/* Entries at or below our compaction point are committed and in our snapshot. */
	while (prev < c->base_index && count > 0) {
		const struct wire_entry_hdr *e = (const void *)(tail + pos);
		if (tail_len - pos < sizeof(*e) || e->data_len > tail_len - pos - sizeof(*e))
			return;
		prev++;
		prev_term = e->term;
		pos += (uint32_t)sizeof(*e) + e->data_len;
		count--;
	}
	if (prev < c->base_index) {
		send_append_reply(c, m->leader, m->seq, true, follower_match(c), c->leader_match,
				  0, 0);
		return;
	}
	if (prev > c->last_index) {
		/* Fast back-up: tell the leader where our log ends. */
		CNS_COUNT(c, APPEND_REJECTED);
		send_append_reply(c, m->leader, m->seq, false, 0, c->leader_match,
				  c->last_index + 1, 0);
		return;
	}
	uint64_t have = cns_log_term(c, prev);
	CHECK(have != CNS_TERM_UNKNOWN);
	if (have != prev_term) {
		/* Raft §5.3: the logs disagree at prev. Log Matching puts every committed entry
		 * in agreement, so the disagreement lies beyond our commit index. Fast back-up
		 * (§5.3, last paragraph): the first index of the conflicting term. */
		CHECK(prev > c->commit);
		uint64_t i = prev;
		for (uint32_t n = 0; n < CNS_SCAN_MAX && i - 1 > c->base_index && i - 1 > c->commit &&
				     cns_log_term(c, i - 1) == have;
		     n++)
			i--;
		CNS_COUNT(c, APPEND_REJECTED);
		send_append_reply(c, m->leader, m->seq, false, 0, c->leader_match, i, have);
		return;
	}

	/* Raft §5.3 steps 3-4: skip what we already hold, cut at the first conflict, append. */
	uint64_t index = prev;
	while (count > 0) {
		const struct wire_entry_hdr *e = (const void *)(tail + pos);
		if (!entry_ok(m, e, tail_len - pos)) {
			/* A leader that sends this is broken: take nothing more from it. */
			CNS_COUNT(c, MALFORMED);
			break;
		}
		uint64_t i = index + 1;
		if (i <= c->last_index) {
			if (cns_log_term(c, i) == e->term) {
				index = i;
				pos += (uint32_t)sizeof(*e) + e->data_len;
				count--;
				continue;
			}
			cns_log_truncate(c, i);
		}
		if (e->term < c->last_term || e->time_ns < c->last_time_ns) {
			/* Terms and cluster time never go backwards along a log. */
			CNS_COUNT(c, MALFORMED);
			break;
		}
		if (cns_log_append(c, e, e + 1) != 0)
			break; /* store full: acknowledge what we took */
		index = i;
		pos += (uint32_t)sizeof(*e) + e->data_len;
		count--;
	}
	if (index > c->leader_match)
		c->leader_match = index;
	/* Raft §5.3 step 5: commit up to the leader's commit, within what we know matches. */
	uint64_t commit = m->commit < c->leader_match ? m->commit : c->leader_match;
	if (commit > c->commit) {
		CNS_ADD(c, ENTRIES_COMMITTED, commit - c->commit);
		c->commit = commit;
	}
	send_append_reply(c, m->leader, m->seq, true, follower_match(c), c->leader_match, 0,
			  0);
	CHECK(c->leader_match <= c->last_index);
}

void
cns_on_append_reply(struct cns *c, const struct wire_append_reply *m)
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
	if (p->state == CNS_PEER_SNAPSHOT)
		return; /* the snapshot reply moves it on */
	if (m->recv_index > c->last_index) {
		/* Beyond anything we sent: a broken follower; never trust it. */
		CNS_COUNT(c, MALFORMED);
		return;
	}
	if (m->success) {
		bool advanced = m->match_index > p->match_index;
		if (advanced) {
			p->match_index = m->match_index;
			p->progress_ns = c->now_ns;
		}
		bool received = m->recv_index > p->recv_index;
		if (received) {
			p->recv_index = m->recv_index;
			p->progress_ns = c->now_ns;
		}
		if (p->recv_index < p->match_index)
			p->recv_index = p->match_index;
		if (p->next_index <= p->recv_index)
			p->next_index = p->recv_index + 1;
		bool probing = p->state == CNS_PEER_PROBE;
		if (probing) {
			/* The logs match: pipeline from what it holds, not from what it has made
			 * durable (re-sending those entries is what a slow disk used to cost).
			 * Rejections of anything sent before this run are stale from now on. */
			p->state = CNS_PEER_REPLICATE;
			p->next_index = p->recv_index + 1;
			p->inflight = 0;
			p->seq_mark = p->seq_next;
		}
		cns_leader_commit(c);
		maybe_timeout_now(c);
		/* Refill the window only on progress: a follower that acknowledges without taking
		 * the entries (log store full) is retried at heartbeat pace, not at network speed;
		 * one whose disk is behind took them (recv moved) and gets new ones only. */
		if (advanced || received || probing)
			cns_replicate_peer(c, p);
		return;
	}
	if (m->seq < p->seq_mark) {
		/* It answers a message sent before we went back (probe or new pipeline run):
		 * the network reordered, and what we sent since answers for the follower. */
		CNS_COUNT(c, STALE_MSGS);
		return;
	}
	if (p->state == CNS_PEER_REPLICATE && m->conflict_term == 0 &&
	    m->conflict_index == m->recv_index + 1 && m->recv_index >= p->match_index &&
	    m->conflict_index < p->next_index) {
		/* Its log is ours through recv and ends there: an AppendEntries after recv was
		 * lost or overtaken (the network reorders) and it dropped the ones after it.
		 * Probe from recv + 1, one message, and pipeline again from what it holds once
		 * that is answered, so the window is re-sent after the stale messages in
		 * flight have drained, not into them. */
		if (m->recv_index > p->recv_index)
			p->progress_ns = c->now_ns;
		p->recv_index = m->recv_index;
		p->next_index = m->recv_index + 1;
		p->state = CNS_PEER_PROBE;
		p->inflight = 0;
		cns_send_append(c, p);
		return;
	}
	/* Fast back-up (Raft §5.3): jump over the follower's conflicting term. */
	uint64_t next = m->conflict_index;
	if (m->conflict_term != 0) {
		uint64_t i = p->next_index - 1 < c->last_index ? p->next_index - 1 : c->last_index;
		uint32_t n = 0;
		while (i > c->base_index && i > p->match_index && n < CNS_SCAN_MAX &&
		       cns_log_term(c, i) > m->conflict_term) {
			i--;
			n++;
		}
		if (cns_log_term(c, i) == m->conflict_term)
			next = i + 1;
	}
	if (next <= p->match_index)
		next = p->match_index + 1;
	if (next > c->last_index + 1)
		next = c->last_index + 1;
	if (next == 0)
		next = 1;
	p->next_index = next;
	/* What it holds is only known again when the logs match. */
	p->recv_index = p->match_index;
	p->state = CNS_PEER_PROBE;
	p->inflight = 0;
	cns_send_append(c, p);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the leader sends each follower next, and the commit rule that reads their progress
 * (Raft §5.3, §5.4.2, §7). One follower's flow control (etcd's Progress: probe, pipelined
 * replicate, snapshot) decides between entries and a snapshot in one place,
 * cns_send_append: the replication and snapshot handlers both call down into it, so
 * neither calls the other. Message handling (the replies that move a follower's progress)
 * stays in cns_replicate.c and cns_snapshot.c.
 */
#include "cns_int.h"

/* An empty AppendEntries at the point the follower is known to hold: keeps its timer and
 * commit index fresh without disturbing the pipeline. */
void
cns_send_heartbeat(struct cns *c, struct cns_peer *p)
{
	uint64_t prev = p->recv_index > c->base_index ? p->recv_index : c->base_index;
	struct wire_append_entries m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_APPEND_ENTRIES, c->cfg.shard);
	m.term = c->term;
	m.prev_index = prev;
	m.prev_term = cns_log_term(c, prev);
	CHECK(m.prev_term != CNS_TERM_UNKNOWN);
	m.commit = c->commit;
	m.seq = p->seq_next++;
	m.leader = c->cfg.self;
	p->commit_sent = c->commit;
	cns_send(c, p->id, &m);
	CNS_COUNT(c, APPEND_SENT);
	p->last_send_ns = c->now_ns;
}

/* One AppendEntries with the entries from index `from` on (as many whole entries as fit one
 * tail, at most append_entries_max). Returns the entries sent. */
static uint32_t
send_entries(struct cns *c, struct cns_peer *p, uint64_t from)
{
	CHECK(from > c->base_index);
	CHECK(from <= c->last_index + 1);
	uint64_t prev = from - 1;
	struct wire_append_entries *m = (struct wire_append_entries *)c->send_buf;
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_APPEND_ENTRIES, c->cfg.shard);
	m->term = c->term;
	m->prev_index = prev;
	m->prev_term = cns_log_term(c, prev);
	CHECK(m->prev_term != CNS_TERM_UNKNOWN);
	m->commit = c->commit;
	m->seq = p->seq_next++;
	m->leader = c->cfg.self;
	p->commit_sent = c->commit;

	/* Batching: as many whole entries as fit one tail. */
	uint8_t *tail = (uint8_t *)(m + 1);
	uint32_t tail_len = 0;
	uint32_t count = 0;
	for (uint64_t i = from; i <= c->last_index && count < c->cfg.append_entries_max; i++) {
		const struct wire_entry_hdr *e = cns_log_entry(c, i);
		uint32_t size = (uint32_t)sizeof(*e) + e->data_len;
		if (tail_len + size > WIRE_TAIL_MAX)
			break;
		memcpy(tail + tail_len, e, size);
		tail_len += size;
		count++;
	}
	m->entry_count = (uint16_t)count;
	m->tail_len = (uint16_t)tail_len;
	m->hdr.length = (uint16_t)(sizeof(*m) + tail_len);
	cns_send(c, p->id, m);
	CNS_COUNT(c, APPEND_SENT);
	p->last_send_ns = c->now_ns;
	DCHECK(count > 0 || from == c->last_index + 1);
	return count;
}

void
cns_send_append(struct cns *c, struct cns_peer *p)
{
	CHECK(c->role == CNS_LEADER);
	if (p->next_index <= c->base_index) {
		/* Raft §7: the entries it needs are compacted away; send the snapshot. */
		cns_snapshot_start(c, p);
		return;
	}
	CHECK(p->next_index <= c->last_index + 1);
	if (p->state != CNS_PEER_REPLICATE)
		p->seq_mark = p->seq_next; /* the probe: only its answer (or newer) counts */
	uint32_t count = send_entries(c, p, p->next_index);
	if (p->state == CNS_PEER_REPLICATE) {
		/* Pipelining: assume success and move on; a rejection falls back to probing. */
		if (p->next_index - 1 == p->recv_index)
			p->progress_ns = c->now_ns;
		p->next_index += count;
	} else {
		p->inflight = 1;
	}
}

/* Pipelining window (Raft §10.2.1 of the thesis): entries sent and not yet acknowledged,
 * up to inflight_max AppendEntries worth. Counting entries rather than messages keeps the
 * window right when replies or heartbeats are lost, duplicated or reordered. */
bool
cns_window_open(const struct cns *c, const struct cns_peer *p)
{
	DCHECK(p->next_index > p->recv_index);
	DCHECK(p->recv_index >= p->match_index);
	uint64_t outstanding = p->next_index - 1 - p->recv_index;
	return p->next_index <= c->last_index &&
	       outstanding < (uint64_t)c->cfg.inflight_max * c->cfg.append_entries_max;
}

/* Fill one follower's window. */
void
cns_replicate_peer(struct cns *c, struct cns_peer *p)
{
	switch (p->state) {
	case CNS_PEER_REPLICATE:
		while (p->state == CNS_PEER_REPLICATE && cns_window_open(c, p))
			cns_send_append(c, p);
		break;
	case CNS_PEER_PROBE:
		if (p->inflight == 0)
			cns_send_append(c, p);
		break;
	default:
		break;
	}
}

void
cns_replicate_all(struct cns *c)
{
	if (c->role != CNS_LEADER)
		return;
	for (uint32_t i = 0; i < c->mem.count; i++)
		if (i != c->self_slot)
			cns_replicate_peer(c, &c->peers[i]);
	cns_leader_commit(c);
}

void
cns_leader_commit(struct cns *c)
{
	if (c->role != CNS_LEADER)
		return;
	/* Voters of the configuration in effect only (thesis §4.1: from when it is appended).
	 * A leader that removed itself does not count itself (thesis §4.2.2). */
	uint64_t m[CNS_MEMBERS_MAX];
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->mem.count; i++) {
		if (!cns_slot_votes(c, i))
			continue;
		if (i == c->self_slot)
			/* The leader counts itself like anyone else: in memory, or once durable. */
			m[n++] = c->cfg.durability == CNS_DURABLE_DISK ? c->durable : c->last_index;
		else
			m[n++] = c->peers[i].match_index;
	}
	CHECK(n >= c->majority);
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && m[j - 1] < m[j]; j--) {
			uint64_t t = m[j];
			m[j] = m[j - 1];
			m[j - 1] = t;
		}
	uint64_t index = m[c->majority - 1];
	/* Raft §5.4.2: never commit an entry from an earlier term by counting replicas; only
	 * an entry of the current term is committed this way, and the ones before it with it. */
	if (index > c->commit && cns_log_term(c, index) == c->term) {
		CNS_ADD(c, ENTRIES_COMMITTED, index - c->commit);
		c->commit = index;
	}
	CHECK(c->commit <= c->last_index);
}

/* Send the chunk of the current snapshot that starts at byte off (at most
 * snapshot_chunk_bytes; an empty snapshot is one empty chunk). Returns the bytes sent. */
static uint32_t
send_chunk(struct cns *c, struct cns_peer *p, uint64_t off)
{
	CHECK(off <= c->snap.len);
	uint64_t left = c->snap.len - off;
	uint32_t chunk = c->cfg.snapshot_chunk_bytes;
	uint32_t n = left < chunk ? (uint32_t)left : chunk;
	struct wire_install_snapshot *m = (struct wire_install_snapshot *)c->send_buf;
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_INSTALL_SNAPSHOT, c->cfg.shard);
	m->term = c->term;
	m->last_index = c->snap.index;
	m->last_term = c->snap.term;
	m->last_time_ns = c->snap.time_ns;
	m->offset = off;
	m->total_len = c->snap.len;
	m->leader = c->cfg.self;
	m->done = off + n == c->snap.len;
	m->tail_len = (uint16_t)n;
	uint8_t *tail = (uint8_t *)(m + 1);
	memcpy(tail, c->snap_buf + off, n);
	uint32_t len = ((uint32_t)sizeof(*m) + n + 7u) & ~7u;
	memset(tail + n, 0, len - sizeof(*m) - n);
	m->hdr.length = (uint16_t)len;
	p->last_send_ns = c->now_ns;
	cns_send(c, p->id, m);
	CNS_COUNT(c, SNAPSHOT_CHUNKS_SENT);
	DCHECK(n <= CNS_SNAPSHOT_CHUNK_MAX);
	return n;
}

/* A newer snapshot replaced the one being sent: start it over. */
void
cns_snapshot_follow(struct cns *c, struct cns_peer *p)
{
	if (p->snap_index == c->snap.index)
		return;
	p->snap_index = c->snap.index;
	p->snap_offset = 0;
	p->snap_sent = 0;
	p->snap_probe = 0;
}

/* Keep up to snapshot_inflight_max chunks in flight beyond what the follower acknowledged.
 * The follower takes chunks in order only and drops one beyond its position. */
void
cns_snapshot_fill(struct cns *c, struct cns_peer *p)
{
	uint64_t window = (uint64_t)c->cfg.snapshot_inflight_max * c->cfg.snapshot_chunk_bytes;
	uint32_t sent = 0;
	while (p->snap_sent < c->snap.len && p->snap_sent - p->snap_offset < window &&
	       sent < c->cfg.snapshot_inflight_max) {
		p->snap_sent += send_chunk(c, p, p->snap_sent);
		sent++;
	}
	CHECK(p->snap_offset <= p->snap_sent);
	CHECK(p->snap_sent <= c->snap.len);
}

/* One chunk from offset (where the follower is, or says it is), and the window again only
 * once it is answered: re-sending a whole window while stale chunks are still in flight
 * would have them overtake each other again (the follower drops each one that is early). */
void
cns_snapshot_probe(struct cns *c, struct cns_peer *p, uint64_t offset)
{
	CHECK(c->role == CNS_LEADER);
	CHECK(c->snap.index > 0);
	/* The base changed since the offset was taken (a snapshot taken, or an asynchronous
	 * one ended, mid-transfer): the offset was into the old one, which may have been
	 * longer; the follower starts the new one from its beginning. */
	if (p->snap_index != c->snap.index)
		offset = 0;
	cns_snapshot_follow(c, p);
	CHECK(offset <= c->snap.len);
	p->state = CNS_PEER_SNAPSHOT;
	p->snap_probe = 1;
	p->snap_offset = offset;
	p->snap_sent = offset + send_chunk(c, p, offset); /* an empty snapshot: one empty chunk */
	CHECK(p->snap_sent <= c->snap.len);
}

/* Raft §7: the entries the follower needs are compacted away; send it the snapshot, a
 * window of chunks at once. */
void
cns_snapshot_start(struct cns *c, struct cns_peer *p)
{
	CHECK(c->role == CNS_LEADER);
	CHECK(c->snap.index > 0);
	p->state = CNS_PEER_SNAPSHOT;
	p->inflight = 0;
	p->snap_index = c->snap.index;
	p->snap_offset = 0;
	p->snap_sent = 0;
	p->snap_probe = 0;
	p->progress_ns = c->now_ns;
	if (c->snap.len == 0)
		send_chunk(c, p, 0); /* an empty snapshot: one empty chunk */
	else
		cns_snapshot_fill(c, p);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Asynchronous snapshots (cns_snapshot_begin/end, CNS_LIM_SNAP_ASYNC): the host writes the
 * service as it is at begin into the third buffer (in production a forked child does, from
 * a copy-on-write image) while the node goes on applying, and end makes it the base.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

static struct fx F;

/* The service as it was at begin, and a scratch service to restore snapshots into. */
static struct fx_svc at_begin, scratch;

static void
fini(void)
{
	fx_check(&F);
	fx_fini(&F);
}

/* n voters with the third snapshot buffer, log_keep_entries keep, n1 leading. */
static void
setup_async(uint32_t n, uint32_t keep)
{
	fx_init(&F, n, CNS_DURABLE_MEMORY);
	F.lim.flags = CNS_LIM_SNAP_ASYNC;
	F.cfg.log_keep_entries = keep;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	cr_assert(eq(int, fx_leader(&F), 0));
}

static void
propose_entries(uint32_t node, uint64_t first, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		cr_assert(eq(int, fx_propose(&F, node, first + k), 0));
		cns_flush(F.nodes[node].c, fx_local(&F, node));
	}
}

static uint64_t
hash_of(const struct fx_svc *s)
{
	return F.nodes[0].c->env.svc_ops->state_hash(s);
}

static uint64_t
first_index(uint32_t i)
{
	return cns_memlog_ops.first_index(F.nodes[i].log);
}

/* begin on node i and write the service as it is now into the buffer begin gives, as the
 * host's child would from its image; keeps a copy in at_begin. Returns the bytes written. */
static size_t
begin_and_write(uint32_t i)
{
	struct fx_node *nd = &F.nodes[i];
	void *buf = NULL;
	size_t cap = 0;
	cr_assert(eq(int, cns_snapshot_begin(nd->c, &buf, &cap), 0));
	cr_assert(buf != NULL);
	cr_assert(eq(sz, cap, (size_t)F.lim.snapshot_bytes_max));
	cr_assert(eq(u64, cns_snapshot_pending(nd->c), cns_applied_index(nd->c)));
	size_t len = nd->c->env.svc_ops->snapshot(&nd->svc, buf, cap);
	cr_assert(eq(sz, len, sizeof(struct fx_svc)));
	memcpy(&at_begin, &nd->svc, sizeof(at_begin));
	return len;
}

/* The service part of node i's base restored into scratch (0, or restore's error). */
static int
restore_base(uint32_t i)
{
	const void *data;
	const struct cns_snapshot_meta *m = cns_snapshot(F.nodes[i].c, &data);
	cr_assert(m->len >= sizeof(struct cns_snap_prefix));
	struct cns_snap_prefix pre;
	memcpy(&pre, data, sizeof(pre));
	cr_assert(eq(u64, pre.magic, CNS_SNAP_MAGIC));
	memset(&scratch, 0, sizeof(scratch));
	return F.nodes[i].c->env.svc_ops->restore(
		&scratch, (const uint8_t *)data + sizeof(pre), m->len - sizeof(pre));
}

/* Restart node i from the snapshot its host saved last: it boots at that index with the
 * state hashed h. */
static void
restart_from_saved(uint32_t i, uint64_t index, uint64_t h)
{
	struct fx_node *n = &F.nodes[i];
	cr_assert(eq(int, fx_restart(&F, i, &n->saved_meta, n->saved), 0));
	cr_assert(eq(u64, cns_applied_index(n->c), index));
	cr_assert(eq(u64, hash_of(&n->svc), h));
}

/* 50 ms on: node i applied what node 0 (the leader) did and holds the same state. */
static void
caught_up(uint32_t i, uint64_t sum)
{
	struct fx_node *n = &F.nodes[i];
	fx_run_ms(&F, 50);
	cr_assert(eq(u64, cns_applied_index(n->c), cns_applied_index(F.nodes[0].c)));
	cr_assert(eq(u64, n->svc.sum, sum));
	cr_assert(eq(u64, hash_of(&n->svc), hash_of(&F.nodes[0].svc)));
}

/* Goal: begin fixes index, term and time at the applied index; end makes the bytes the
 * host wrote the base, hands them to host.snapshot_saved, compacts behind it keeping
 * log_keep_entries; a restart from what was saved restores the state it describes.
 * Method: 3 nodes, 50 entries applied, keep 10; begin/write/end on follower n2; check the
 * base against what begin saw, the saved copy byte for byte, the log's first index; boot
 * n2 from the saved copy: applied and state hash are those at begin, then it catches up. */
Test(cns_snapshot_async, begin_end_makes_the_base, .fini = fini)
{
	setup_async(3, 10);
	propose_entries(0, 1, 50);
	fx_run_ms(&F, 20);
	struct fx_node *n2 = &F.nodes[1];
	struct cns *c = n2->c;
	uint64_t applied = cns_applied_index(c);
	cr_assert(applied >= 51);
	uint64_t term = cns_term_at(c, applied);
	uint64_t time_ns = cns_applied_time(c);
	uint64_t h = hash_of(&n2->svc);
	uint32_t saved_before = n2->saved_count;

	size_t len = begin_and_write(1);
	/* Nothing changes until end: no base, nothing compacted, nothing saved. */
	cr_assert(eq(u64, cns_snapshot(c, NULL)->index, 0));
	cr_assert(eq(u64, first_index(1), 1));
	cr_assert(eq(u32, n2->saved_count, saved_before));

	cr_assert(eq(int, cns_snapshot_end(c, len), 0));
	cr_assert(eq(u64, cns_snapshot_pending(c), 0));
	const void *data;
	const struct cns_snapshot_meta *m = cns_snapshot(c, &data);
	cr_assert(eq(u64, m->index, applied));
	cr_assert(eq(u64, m->term, term));
	cr_assert(eq(u64, m->time_ns, time_ns));
	cr_assert(eq(u64, m->len, sizeof(struct cns_snap_prefix) + len));
	cr_assert(eq(u64, first_index(1), applied - 10 + 1));
	cr_assert(eq(u64, cns_counter(c, CNS_C_SNAPSHOTS_TAKEN), 1));
	/* The configuration prefix begin wrote: the three voters. */
	struct cns_snap_prefix pre;
	memcpy(&pre, data, sizeof(pre));
	cr_assert(eq(u64, pre.magic, CNS_SNAP_MAGIC));
	cr_assert(eq(u32, pre.config.member_count, 3));
	cr_assert(eq(u32, pre.config.learners, 0));
	/* host.snapshot_saved got exactly the base. */
	cr_assert(eq(u32, n2->saved_count, saved_before + 1));
	cr_assert(eq(u64, n2->saved_meta.index, applied));
	cr_assert(eq(u64, n2->saved_meta.term, term));
	cr_assert(eq(u64, n2->saved_meta.len, m->len));
	cr_assert(memcmp(n2->saved, data, m->len) == 0, "saved bytes differ from the base");
	cr_assert(eq(int, restore_base(1), 0));
	cr_assert(eq(u64, hash_of(&scratch), h));
	/* Nothing applied since: no other snapshot, either way. */
	void *buf;
	size_t cap;
	cr_assert(eq(int, cns_snapshot_begin(c, &buf, &cap), -EALREADY));
	cr_assert(eq(int, cns_snapshot_take(c), -EALREADY));

	/* A restart from the saved snapshot over the compacted log. */
	restart_from_saved(1, applied, h);
	cr_assert(eq(u64, cns_applied_time(n2->c), time_ns));
	cr_assert(eq(u64, cns_snapshot_pending(n2->c), 0));
	propose_entries(0, 100, 2);
	caught_up(1, 1275 + 201);
}

/* Goal: the node applies between begin and end, and the snapshot still holds the state at
 * begin's index; the log keeps what is after the old base until end, so a restart from the
 * new base replays the entries applied meanwhile.
 * Method: begin on n2 at A (30 entries), 20 more applied (B), end: the base is A, its
 * service bytes restore to the state hashed at begin (not the current one), the log starts
 * at A + 1; a restart from it replays to B and equals the leader. */
Test(cns_snapshot_async, applies_between_begin_and_end, .fini = fini)
{
	setup_async(3, 0);
	propose_entries(0, 1, 30);
	fx_run_ms(&F, 20);
	struct fx_node *n2 = &F.nodes[1];
	uint64_t a = cns_applied_index(n2->c);
	size_t len = begin_and_write(1);
	uint64_t h_a = hash_of(&at_begin);
	cr_assert(eq(u64, at_begin.sum, 465));

	propose_entries(0, 100, 20);
	fx_run_ms(&F, 20);
	uint64_t b = cns_applied_index(n2->c);
	cr_assert(b >= a + 20, "applied %lu after %lu", (unsigned long)b, (unsigned long)a);
	cr_assert(eq(u64, n2->svc.sum, 465 + 2190));
	cr_assert(ne(u64, hash_of(&n2->svc), h_a));
	cr_assert(eq(u64, cns_snapshot_pending(n2->c), a));
	cr_assert(eq(u64, first_index(1), 1), "compacted while a snapshot was pending");

	cr_assert(eq(int, cns_snapshot_end(n2->c, len), 0));
	const struct cns_snapshot_meta *m = cns_snapshot(n2->c, NULL);
	cr_assert(eq(u64, m->index, a));
	cr_assert(eq(u64, cns_applied_index(n2->c), b));
	cr_assert(eq(u64, first_index(1), a + 1));
	cr_assert(eq(int, restore_base(1), 0));
	cr_assert(eq(u64, hash_of(&scratch), h_a));
	cr_assert(memcmp(&scratch, &at_begin, sizeof(scratch)) == 0);
	cr_assert(eq(u64, scratch.last_index, a));

	/* The entries applied meanwhile are still in the log after the new base. */
	restart_from_saved(1, a, h_a);
	caught_up(1, 465 + 2190);
}

/* Goal: while one is pending, neither another begin nor a synchronous take runs; they do
 * again once it ended. A restart (the host process died with its child) drops it.
 * Method: begin on the leader; begin and take give -EBUSY (before and after applying
 * more), the pending index, base and buffers untouched; end; take succeeds at the newer
 * applied index. Then begin again and restart the node: nothing pending, end -EINVAL. */
Test(cns_snapshot_async, busy_while_pending, .fini = fini)
{
	setup_async(3, 0);
	propose_entries(0, 1, 10);
	fx_run_ms(&F, 20);
	struct fx_node *n1 = &F.nodes[0];
	uint64_t a = cns_applied_index(n1->c);
	size_t len = begin_and_write(0);
	void *buf = (void *)&len;
	size_t cap = 7;
	cr_assert(eq(int, cns_snapshot_begin(n1->c, &buf, &cap), -EBUSY));
	cr_assert(buf == (void *)&len, "begin wrote *buf when busy");
	cr_assert(eq(sz, cap, 7));
	cr_assert(eq(int, cns_snapshot_take(n1->c), -EBUSY));
	propose_entries(0, 100, 5);
	fx_run_ms(&F, 20);
	cr_assert(cns_applied_index(n1->c) > a);
	cr_assert(eq(int, cns_snapshot_begin(n1->c, &buf, &cap), -EBUSY));
	cr_assert(eq(int, cns_snapshot_take(n1->c), -EBUSY));
	cr_assert(eq(u64, cns_snapshot_pending(n1->c), a));
	cr_assert(eq(u64, cns_snapshot(n1->c, NULL)->index, 0));
	cr_assert(eq(u32, n1->saved_count, 0));

	cr_assert(eq(int, cns_snapshot_end(n1->c, len), 0));
	cr_assert(eq(u64, cns_snapshot(n1->c, NULL)->index, a));
	cr_assert(eq(int, cns_snapshot_take(n1->c), 0));
	cr_assert(eq(u64, cns_snapshot(n1->c, NULL)->index, cns_applied_index(n1->c)));
	cr_assert(eq(u32, n1->saved_count, 2));

	/* A crash of the host takes the pending one with it. */
	struct fx_node *n3 = &F.nodes[2];
	begin_and_write(2);
	cr_assert(ne(u64, cns_snapshot_pending(n3->c), 0));
	cr_assert(eq(int, fx_restart(&F, 2, NULL, NULL), 0));
	cr_assert(eq(u64, cns_snapshot_pending(n3->c), 0));
	cr_assert(eq(int, cns_snapshot_end(n3->c, len), -EINVAL));
	cr_assert(eq(u64, cns_snapshot(n3->c, NULL)->index, 0));
	fx_run_ms(&F, 50);
	cr_assert(eq(u64, cns_applied_index(n3->c), cns_applied_index(n1->c)));
}

/* Goal: -EALREADY when nothing was applied since the base, as for take; nothing pending.
 * Method: a node that applied nothing; then one right after a synchronous take. */
Test(cns_snapshot_async, already_when_nothing_applied, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.lim.flags = CNS_LIM_SNAP_ASYNC;
	fx_reconfigure(&F);
	void *buf = NULL;
	size_t cap = 0;
	cr_assert(eq(int, cns_snapshot_begin(F.nodes[0].c, &buf, &cap), -EALREADY));
	cr_assert(eq(u64, cns_snapshot_pending(F.nodes[0].c), 0));
	fx_campaign(&F, 0);
	propose_entries(0, 1, 5);
	fx_run_ms(&F, 20);
	struct cns *c = F.nodes[0].c;
	cr_assert(eq(int, cns_snapshot_take(c), 0));
	cr_assert(eq(int, cns_snapshot_begin(c, &buf, &cap), -EALREADY));
	cr_assert(buf == NULL);
	cr_assert(eq(u64, cns_snapshot_pending(c), 0));
	cr_assert(eq(int, cns_snapshot_end(c, 8), -EINVAL));
	cr_assert(eq(u64, cns_counter(c, CNS_C_SNAPSHOTS_TAKEN), 1));
}

/* Goal: without CNS_LIM_SNAP_ASYNC there is no third buffer: begin is -ENOTSUP and end has
 * nothing to end; take works as before. The flag costs exactly one buffer, and an unknown
 * flag is refused.
 * Method: the fixture's default limits; footprints with and without the flag. */
Test(cns_snapshot_async, not_supported_without_flag, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	propose_entries(0, 1, 5);
	fx_run_ms(&F, 20);
	struct cns *c = F.nodes[0].c;
	void *buf = NULL;
	size_t cap = 0;
	cr_assert(eq(int, cns_snapshot_begin(c, &buf, &cap), -ENOTSUP));
	cr_assert(buf == NULL);
	cr_assert(eq(sz, cap, 0));
	cr_assert(eq(u64, cns_snapshot_pending(c), 0));
	cr_assert(eq(int, cns_snapshot_end(c, 8), -EINVAL));
	cr_assert(eq(int, cns_snapshot_take(c), 0));

	struct cns_limits sync = F.lim, async = F.lim, bad = F.lim;
	async.flags = CNS_LIM_SNAP_ASYNC;
	size_t buffer = (F.lim.snapshot_bytes_max + sizeof(struct cns_snap_prefix) + 63) & ~63ul;
	cr_assert(eq(sz, cns_footprint(&async) - cns_footprint(&sync), buffer));
	bad.flags = CNS_LIM_SNAP_ASYNC << 1;
	struct cns_env env = F.nodes[0].c->env;
	struct cns_boot boot = {0};
	struct cns_config cfg = F.cfg;
	struct cns *other;
	void *mem = aligned_alloc(64, cns_footprint(&async));
	cr_assert(mem != NULL);
	cr_assert(eq(int, cns_init(&other, mem, &bad, &cfg, &env, &boot), -EINVAL));
	free(mem);
}

/* Goal: end with 0 bytes (the child failed, or the state did not fit) is -ENOSPC and
 * changes nothing; a length beyond the buffer is -EINVAL; either way nothing is pending and
 * the next begin works.
 * Method: begin/end(0), begin/end(cap + 1), begin/end(len) on follower n2. */
Test(cns_snapshot_async, end_failed_leaves_nothing_pending, .fini = fini)
{
	setup_async(3, 0);
	propose_entries(0, 1, 10);
	fx_run_ms(&F, 20);
	struct fx_node *n2 = &F.nodes[1];
	struct cns *c = n2->c;
	begin_and_write(1);
	cr_assert(eq(int, cns_snapshot_end(c, 0), -ENOSPC));
	cr_assert(eq(u64, cns_snapshot_pending(c), 0));
	cr_assert(eq(u64, cns_snapshot(c, NULL)->index, 0));
	cr_assert(eq(u32, n2->saved_count, 0));
	cr_assert(eq(u64, first_index(1), 1));
	cr_assert(eq(u64, cns_counter(c, CNS_C_SNAPSHOTS_TAKEN), 0));
	cr_assert(eq(int, cns_snapshot_end(c, 0), -EINVAL));

	begin_and_write(1);
	cr_assert(eq(int, cns_snapshot_end(c, F.lim.snapshot_bytes_max + 1), -EINVAL));
	cr_assert(eq(u64, cns_snapshot_pending(c), 0));
	cr_assert(eq(u64, cns_snapshot(c, NULL)->index, 0));
	cr_assert(eq(u32, n2->saved_count, 0));

	uint64_t a = cns_applied_index(c);
	size_t len = begin_and_write(1);
	cr_assert(eq(int, cns_snapshot_end(c, len), 0));
	cr_assert(eq(u64, cns_snapshot(c, NULL)->index, a));
	cr_assert(eq(u32, n2->saved_count, 1));
	cr_assert(eq(int, restore_base(1), 0));
	cr_assert(memcmp(&scratch, &at_begin, sizeof(scratch)) == 0);
}

/* Goal: a follower that installs a leader's snapshot while its own is pending drops its
 * own at end (-ESTALE): the installed one, which covers more, stays the base.
 * Method: n3 begins at A, is cut off while 50 more entries commit and n1, n2 snapshot
 * with no kept tail at L > A; healed, n3 installs L with its own still pending; end is
 * -ESTALE, the base is n1's snapshot byte for byte, snapshot_saved saw only the install. */
Test(cns_snapshot_async, install_meanwhile_is_stale, .fini = fini)
{
	setup_async(3, 0);
	propose_entries(0, 1, 10);
	fx_run_ms(&F, 20);
	struct fx_node *n3 = &F.nodes[2];
	uint64_t a = cns_applied_index(n3->c);
	size_t len = begin_and_write(2);
	fx_isolate(&F, 2, true);
	propose_entries(0, 100, 50);
	fx_run_ms(&F, 20);
	cr_assert(eq(int, cns_snapshot_take(F.nodes[0].c), 0));
	cr_assert(eq(int, cns_snapshot_take(F.nodes[1].c), 0));
	uint64_t l = cns_snapshot(F.nodes[0].c, NULL)->index;
	cr_assert(l > a);
	fx_heal(&F);
	fx_run_ms(&F, 200);
	cr_assert(eq(u64, cns_counter(n3->c, CNS_C_SNAPSHOTS_INSTALLED), 1));
	cr_assert(eq(u64, cns_snapshot_pending(n3->c), a), "an install ended the pending one");

	cr_assert(eq(int, cns_snapshot_end(n3->c, len), -ESTALE));
	cr_assert(eq(u64, cns_snapshot_pending(n3->c), 0));
	const void *d1, *d3;
	const struct cns_snapshot_meta *s1 = cns_snapshot(F.nodes[0].c, &d1);
	const struct cns_snapshot_meta *s3 = cns_snapshot(n3->c, &d3);
	cr_assert(eq(u64, s3->index, l));
	cr_assert(eq(u64, s3->term, s1->term));
	cr_assert(eq(u64, s3->len, s1->len));
	cr_assert(memcmp(d3, d1, s1->len) == 0, "the base is not the installed snapshot");
	cr_assert(eq(u32, n3->saved_count, 1));
	cr_assert(eq(u64, n3->saved_meta.index, l));
	cr_assert(eq(u64, cns_counter(n3->c, CNS_C_SNAPSHOTS_TAKEN), 0));
	cr_assert(eq(u64, cns_memlog_ops.first_index(n3->log), l + 1));
	propose_entries(0, 1000, 3);
	fx_run_ms(&F, 20);
	cr_assert(eq(u64, n3->svc.sum, 55 + 6225 + 3003));
	cr_assert(eq(u64, cns_applied_index(n3->c), cns_applied_index(F.nodes[0].c)));
}

/* Deliver messages one at a time (ticking the clock when none is queued) until the leader
 * has sent `chunks` InstallSnapshot chunks in all. */
static void
run_until_chunks(uint64_t chunks)
{
	struct cns *c1 = F.nodes[0].c;
	for (uint32_t k = 0; cns_counter(c1, CNS_C_SNAPSHOT_CHUNKS_SENT) < chunks; k++) {
		cr_assert(k < 100000, "the transfer did not start");
		if (fx_deliver_one(&F))
			continue;
		F.now += 1000000;
		for (uint32_t i = 0; i < F.n; i++) {
			cns_tick(F.nodes[i].c, fx_local(&F, i));
			fx_check(&F);
		}
	}
}

/* Goal: the leader's asynchronous snapshot ends while it is sending its previous base to a
 * lagging follower in chunks: the transfer moves to the new base and the follower ends
 * with it, byte for byte, and the state at its index.
 * Method: n3 cut off; n1 takes X synchronously (no kept tail), applies 10 more and begins
 * at Y; healed, 64-byte chunks 4 in flight, delivered one message at a time until 40
 * chunks of X went out and n3 holds part of X; end on n1 (base Y); run: n3 installs once,
 * Y, whose service is the state n1 had at begin. */
Test(cns_snapshot_async, leader_ends_mid_transfer, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.lim.flags = CNS_LIM_SNAP_ASYNC;
	F.cfg.log_keep_entries = 0;
	F.cfg.snapshot_chunk_bytes = 64;
	F.cfg.snapshot_inflight_max = 4;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_isolate(&F, 2, true);
	propose_entries(0, 1, 100);
	fx_run_ms(&F, 20);
	struct cns *c1 = F.nodes[0].c;
	cr_assert(eq(int, cns_snapshot_take(c1), 0));
	cr_assert(eq(int, cns_snapshot_take(F.nodes[1].c), 0));
	uint64_t x = cns_snapshot(c1, NULL)->index;
	propose_entries(0, 1000, 10);
	fx_run_ms(&F, 20);
	uint64_t y = cns_applied_index(c1);
	cr_assert(y >= x + 10);
	size_t len = begin_and_write(0);
	uint64_t h_y = hash_of(&at_begin);

	fx_heal(&F);
	run_until_chunks(40);
	struct cns *c3 = F.nodes[2].c;
	cr_assert(eq(u64, c3->recv.index, x), "n3 is not receiving the old base");
	cr_assert(c3->recv_offset > 0);
	cr_assert(c3->recv_offset < c3->recv.len);
	cr_assert(eq(int, cns_snapshot_end(c1, len), 0));
	cr_assert(eq(u64, cns_snapshot(c1, NULL)->index, y));

	fx_run_ms(&F, 300);
	const void *d1, *d3;
	const struct cns_snapshot_meta *s1 = cns_snapshot(c1, &d1);
	const struct cns_snapshot_meta *s3 = cns_snapshot(c3, &d3);
	cr_assert(eq(u64, cns_counter(c3, CNS_C_SNAPSHOTS_INSTALLED), 1));
	cr_assert(eq(u64, s3->index, y));
	cr_assert(eq(u64, s3->len, s1->len));
	cr_assert(memcmp(d3, d1, s1->len) == 0, "installed snapshot differs from the leader's");
	cr_assert(eq(int, restore_base(2), 0));
	cr_assert(eq(u64, hash_of(&scratch), h_y));
	cr_assert(eq(u64, cns_applied_index(c3), cns_applied_index(c1)));
	cr_assert(eq(u64, F.nodes[2].svc.sum, 5050 + 10045));
	cr_assert(eq(u64, hash_of(&F.nodes[2].svc), hash_of(&F.nodes[0].svc)));
}

/* A base of 1000 bytes: smaller than the fixture's service snapshot. */
static size_t
small_size(const void *svc)
{
	(void)svc;
	return 1000;
}

static size_t
small_snap(const void *svc, void *buf, size_t cap)
{
	(void)cap;
	memcpy(buf, svc, 1000);
	return 1000;
}

/* Goal: a leader whose base shrinks mid-transfer (a snapshot taken or an asynchronous one
 * ended while a follower receives the old one) survives its retransmit timer: the probe
 * offset into the old base is no offset into the new one (it was a CHECK failure in
 * cns_snapshot_probe, offset <= snap.len, found by the helper's reproduction).
 * Method: n3 is cut off while 100 entries commit; both others snapshot; n3 comes back and
 * receives part of the leader's base in 64-byte chunks; n3 is cut off again and the leader
 * takes a 1000-byte snapshot; 30 ms later its timer probes n3. Then n3 comes back and
 * receives the new base whole (and refuses it: those bytes are no service snapshot). */
Test(cns_snapshot_async, base_shrinks_mid_transfer, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.log_keep_entries = 0;
	F.cfg.snapshot_chunk_bytes = 64;
	F.cfg.snapshot_inflight_max = 4;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_isolate(&F, 2, true);
	struct cns *c1 = F.nodes[0].c;
	for (int k = 1; k <= 100; k++) {
		cr_assert(eq(int, fx_propose(&F, 0, k), 0));
		cns_flush(c1, fx_local(&F, 0));
	}
	fx_run_ms(&F, 20);
	cr_assert(eq(int, cns_snapshot_take(c1), 0));
	cr_assert(eq(int, cns_snapshot_take(F.nodes[1].c), 0));
	for (int k = 1; k <= 5; k++) {
		cr_assert(eq(int, fx_propose(&F, 0, 1000 + k), 0));
		cns_flush(c1, fx_local(&F, 0));
	}
	fx_run_ms(&F, 20);
	fx_heal(&F);
	for (uint32_t k = 0; cns_counter(c1, CNS_C_SNAPSHOT_CHUNKS_SENT) < 200; k++) {
		cr_assert(k < 100000, "the transfer never got going");
		if (fx_deliver_one(&F))
			continue;
		F.now += 1000000;
		for (uint32_t i = 0; i < F.n; i++)
			cns_tick(F.nodes[i].c, fx_local(&F, i));
	}
	cr_assert(gt(u64, F.nodes[2].c->recv_offset, 1000), "n3 holds part of the old base");
	fx_isolate(&F, 2, true);
	F.q_len = 0;
	static struct svc_ops small;
	const struct svc_ops *orig = c1->env.svc_ops;
	small = *orig;
	small.snapshot_size = small_size;
	small.snapshot = small_snap;
	c1->env.svc_ops = &small;
	for (int k = 1; k <= 3; k++) {
		cr_assert(eq(int, fx_propose(&F, 0, 2000 + k), 0));
		cns_flush(c1, fx_local(&F, 0));
	}
	fx_run_ms(&F, 5);
	cr_assert(eq(int, cns_snapshot_take(c1), 0));
	c1->env.svc_ops = orig;
	const struct cns_snapshot_meta *base = cns_snapshot(c1, NULL);
	cr_assert(lt(u64, base->len, F.nodes[2].c->recv_offset), "the new base is shorter");
	F.now += 30000000;
	cns_tick(c1, fx_local(&F, 0)); /* the retransmit timer: probe n3 */
	cr_assert(eq(int, cns_role(c1), CNS_LEADER));
	fx_heal(&F);
	fx_run_ms(&F, 200);
	/* The 1000 bytes are no service snapshot: n3 receives the new base whole and refuses
	 * it (a malformed snapshot), rather than the leader sending from the old offset. */
	cr_assert(eq(u64, F.nodes[2].c->recv.index, 0));
	cr_assert(gt(u64, cns_counter(F.nodes[2].c, CNS_C_MALFORMED), 0),
		  "n3 received the leader's new base");
}

/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>

#include "fixture.h"

static struct fx F;

static void
fini(void)
{
	fx_check(&F);
	fx_fini(&F);
}

static void
propose_n(uint32_t node, uint64_t first, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		cr_assert(eq(int, fx_propose(&F, node, first + k), 0));
	cns_flush(F.nodes[node].c, fx_local(&F, node));
}

/* Goal: batching puts many ingress messages in one entry; everything is applied in order
 * on every member.
 * Method: 100 proposals then one flush make one NORMAL entry (plus nothing else); after
 * delivery all three services hold the same sum. */
Test(cns_replication, batches_many_messages_per_entry, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	uint64_t last = cns_last_index(F.nodes[0].c);
	propose_n(0, 1, 100);
	cr_assert(eq(u64, cns_last_index(F.nodes[0].c), last + 1));
	cr_assert(eq(u32, cns_log_entry(F.nodes[0].c, last + 1)->data_len,
		     100 * (uint32_t)sizeof(struct wire_transfer)));
	fx_deliver_all(&F);
	fx_run_ms(&F, 50);
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert(eq(u64, F.nodes[i].svc.sum, 5050));
		cr_assert(eq(u64, F.nodes[i].svc.msgs, 100));
	}
}

/* Goal: a full batch is sealed on its own and the next proposal opens a new one.
 * Method: batch_bytes_max = 4 messages; 10 proposals give 3 entries. */
Test(cns_replication, full_batch_seals, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.batch_bytes_max = 4 * sizeof(struct wire_transfer);
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	uint64_t last = cns_last_index(F.nodes[0].c);
	propose_n(0, 1, 10);
	cr_assert(eq(u64, cns_last_index(F.nodes[0].c), last + 3));
}

/* Goal: pipelining keeps several AppendEntries in flight to one follower.
 * Method: window 4, one entry per AppendEntries; 10 separate entries produce 4 messages to
 * each follower before any reply is delivered. */
Test(cns_replication, pipelines_a_window, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.append_entries_max = 1;
	F.cfg.inflight_max = 4;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	cr_assert(eq(u32, F.q_len, 0));
	for (uint64_t v = 1; v <= 10; v++)
		propose_n(0, v, 1);
	uint32_t to2 = 0;
	for (uint32_t k = 0; k < F.q_len; k++)
		to2 += F.q[(F.q_head + k) % FX_QUEUE].to == 2;
	cr_assert(eq(u32, to2, 4), "AppendEntries in flight to n2: %u", to2);
	fx_run_ms(&F, 100);
	cr_assert(eq(u64, F.nodes[1].svc.sum, 55));
}

/* Goal: conflicting uncommitted entries are overwritten by the new leader's (Raft §5.3),
 * using the fast back-up hint.
 * Method: isolate the leader n1 and let it append 5 entries nobody else sees; n2 wins a
 * new term and commits its own; heal: n1 truncates its 5 entries and converges. */
Test(cns_replication, conflicting_entries_are_truncated, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	fx_isolate(&F, 0, true);
	for (uint64_t v = 1; v <= 5; v++)
		propose_n(0, 100 + v, 1);
	F.now += 400000000;
	fx_campaign(&F, 1);
	cr_assert(fx_leader(&F) == 1 || cns_term(F.nodes[1].c) > cns_term(F.nodes[0].c));
	propose_n(1, 1, 3);
	fx_deliver_all(&F);
	fx_heal(&F);
	fx_run_ms(&F, 500);
	cr_assert(cns_counter(F.nodes[0].c, CNS_C_ENTRIES_TRUNCATED) >= 5);
	cr_assert(cns_counter(F.nodes[1].c, CNS_C_APPEND_SENT) > 0);
	for (uint32_t i = 0; i < 3; i++)
		cr_assert(eq(u64, F.nodes[i].svc.sum, 6), "n%u sum %lu", i + 1,
			  (unsigned long)F.nodes[i].svc.sum);
}

/* Goal: Raft §5.4.2 (Figure 8): a leader never commits an entry of an earlier term by
 * counting replicas; it commits it only together with an entry of its own term.
 * Method: n1 (term 1) appends E alone; n2 wins term 2 without replicating anything; n1
 * wins a later term with its noop after E. With one entry per AppendEntries, E reaches n3
 * (a majority now holds E) strictly before the noop: the leader's commit must not move to
 * E's index until the noop is acknowledged, then both commit. */
static bool
drop_appends(struct fx *f, uint32_t from, uint32_t to, const struct wire_msg_hdr *msg)
{
	(void)f;
	(void)to;
	return from == 2 && msg->type == WIRE_APPEND_ENTRIES;
}

Test(cns_replication, no_commit_of_old_term_by_counting, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.append_entries_max = 1;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	uint64_t base = cns_commit_index(F.nodes[0].c);
	cr_assert(eq(u64, base, 1));
	/* n1 appends E at index 2 (term 1), alone. */
	fx_isolate(&F, 0, true);
	propose_n(0, 42, 1);
	uint64_t e_index = cns_last_index(F.nodes[0].c);
	cr_assert(eq(u64, e_index, 2));
	/* n2 wins term 2 but its entries never leave (its AppendEntries are dropped). */
	F.now += 400000000;
	F.drop = drop_appends;
	fx_campaign(&F, 1);
	cr_assert(eq(int, cns_role(F.nodes[1].c), CNS_LEADER));
	/* n2 goes away; n1 comes back and wins (its log 2/1 beats n3's 1/1). */
	fx_isolate(&F, 1, true);
	fx_isolate(&F, 0, false);
	fx_isolate(&F, 1, true);
	F.drop = NULL;
	F.now += 400000000;
	struct cns *c1 = F.nodes[0].c;
	c1->election_deadline_ns = 1;
	if (cns_role(c1) == CNS_LEADER)
		cns_become_follower(c1, cns_term(c1), CNS_NODE_NONE);
	cns_tick(c1, fx_local(&F, 0));
	bool e_held_by_majority_uncommitted = false;
	for (uint32_t ms = 0; ms < 3000 && cns_commit_index(c1) <= e_index; ms++) {
		F.now += 1000000;
		for (uint32_t i = 0; i < 3; i++)
			cns_tick(F.nodes[i].c, fx_local(&F, i));
		do {
			if (cns_role(c1) != CNS_LEADER)
				continue;
			cr_assert(cns_commit_index(c1) != e_index,
				  "committed the term-1 entry by counting replicas");
			if (cns_term_at(F.nodes[2].c, e_index) == 1 &&
			    cns_commit_index(c1) < e_index)
				e_held_by_majority_uncommitted = true;
		} while (fx_deliver_one(&F));
	}
	cr_assert(eq(int, cns_role(c1), CNS_LEADER));
	cr_assert(cns_term(c1) >= 3);
	cr_assert(e_held_by_majority_uncommitted, "scenario did not reach the Figure 8 state");
	cr_assert(eq(u64, cns_commit_index(c1), e_index + 1));
	cr_assert(eq(u16, cns_log_entry(c1, e_index + 1)->kind, CNS_ENTRY_NOOP));
	fx_run_ms(&F, 50);
	cr_assert(eq(u64, F.nodes[2].svc.sum, 42));
}

/* Goal: durability mode "disk": nobody counts for a majority until its log store reported
 * the entry durable, the leader included; mode "memory" commits on receipt.
 * Method: disk mode with automatic reports off: a proposal stays uncommitted while no
 * store reports; reporting on the leader alone is not enough; one follower more commits. */
Test(cns_replication, disk_mode_waits_for_durability, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_DISK);
	fx_campaign(&F, 0);
	for (uint32_t i = 0; i < 3; i++)
		fx_durable(&F, i);
	fx_run_ms(&F, 5);
	F.auto_durable = false;
	uint64_t commit = cns_commit_index(F.nodes[0].c);
	propose_n(0, 9, 1);
	fx_deliver_all(&F);
	cr_assert(eq(u64, cns_commit_index(F.nodes[0].c), commit), "committed before durable");
	fx_durable(&F, 0);
	fx_deliver_all(&F);
	cr_assert(eq(u64, cns_commit_index(F.nodes[0].c), commit), "leader alone is no majority");
	fx_durable(&F, 2);
	fx_deliver_all(&F);
	cr_assert(eq(u64, cns_commit_index(F.nodes[0].c), commit + 1));
	F.auto_durable = true;
}

Test(cns_replication, memory_mode_commits_on_receipt, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	uint64_t commit = cns_commit_index(F.nodes[0].c);
	propose_n(0, 9, 1);
	fx_deliver_all(&F);
	cr_assert(eq(u64, cns_commit_index(F.nodes[0].c), commit + 1));
	cr_assert(eq(u64, cns_durable_index(F.nodes[0].c), 0));
}

/* Goal: a stale durability report (an entry since truncated) is ignored.
 * Method: report (last index, wrong term) on a follower; durable index unchanged and the
 * stale counter moves. */
Test(cns_replication, stale_durability_report_ignored, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_DISK);
	F.auto_durable = false;
	fx_campaign(&F, 0);
	struct cns *c = F.nodes[1].c;
	uint64_t last = cns_last_index(c);
	cr_assert(last >= 1);
	cns_durable(c, last, cns_last_term(c) + 7);
	cr_assert(eq(u64, cns_durable_index(c), 0));
	cr_assert(eq(u64, cns_counter(c, CNS_C_DURABLE_REPORTS_STALE), 1));
	F.auto_durable = true;
}

/* Goal: backpressure: proposals beyond the uncommitted window are refused with -EAGAIN.
 * Method: uncommitted_max 4, followers isolated; after 4 sealed entries the next
 * proposal that needs a new entry is refused. */
Test(cns_replication, backpressure_on_uncommitted_window, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.uncommitted_max = 4;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_isolate(&F, 0, true);
	int rc = 0;
	uint32_t ok = 0;
	for (uint64_t v = 1; v <= 10 && rc == 0; v++) {
		rc = fx_propose(&F, 0, v);
		cns_flush(F.nodes[0].c, fx_local(&F, 0));
		ok += rc == 0;
	}
	cr_assert(eq(int, rc, -EAGAIN));
	cr_assert(eq(u32, ok, 4));
	fx_heal(&F);
}

/* Goal: entries from the wire are validated before they reach the log: a bad kind or a
 * cluster time going backwards is refused and counted, never a CHECK.
 * Method: hand a follower AppendEntries with a kind-9 entry, then one whose time is below
 * its last entry's; neither is appended and MALFORMED counts both. */
static void
send_one_entry(struct cns *c, uint64_t term, uint64_t prev, uint64_t prev_term, uint16_t kind,
	       uint64_t time_ns)
{
	struct {
		struct wire_append_entries ae;
		struct wire_entry_hdr e;
	} m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.ae.hdr, WIRE_APPEND_ENTRIES, F.cfg.shard);
	m.ae.hdr.length = sizeof(m);
	m.ae.term = term;
	m.ae.prev_index = prev;
	m.ae.prev_term = prev_term;
	m.ae.leader = 1;
	m.ae.entry_count = 1;
	m.ae.tail_len = sizeof(m.e);
	m.e.term = term;
	m.e.time_ns = time_ns;
	m.e.kind = kind;
	cr_assert(eq(int, cns_step(c, fx_local(&F, 1), &m.ae.hdr), 0));
}

Test(cns_replication, malformed_entries_refused, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	struct cns *c = F.nodes[1].c;
	uint64_t last = cns_last_index(c), term = cns_term(c);
	uint64_t t = cns_log_entry(c, last)->time_ns;
	send_one_entry(c, term, last, cns_last_term(c), 9, t + 1);
	cr_assert(eq(u64, cns_last_index(c), last));
	send_one_entry(c, term, last, cns_last_term(c), CNS_ENTRY_TICK, t - 1);
	cr_assert(eq(u64, cns_last_index(c), last));
	cr_assert(eq(u64, cns_counter(c, CNS_C_MALFORMED), 2));
	send_one_entry(c, term, last, cns_last_term(c), CNS_ENTRY_TICK, t + 1);
	cr_assert(eq(u64, cns_last_index(c), last + 1));
	F.q_len = 0; /* drop the replies to the fake leader message */
}

/* Goal: a follower commits only within the prefix it verified against the current leader
 * (Raft §5.3 step 5: "index of last new entry"), never its own stale entries beyond it.
 * Method: n3 holds three uncommitted term-1 entries (its acks to n1 are lost); a term-2
 * leader's empty AppendEntries at prev = 1 with commit = 4 may move n3's commit to 1 only. */
Test(cns_replication, follower_commits_only_verified_prefix, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	F.cut[0][1] = true; /* n1 -> n2 lost */
	F.cut[2][0] = true; /* n3 -> n1 lost */
	for (uint64_t v = 1; v <= 3; v++) {
		cr_assert(eq(int, fx_propose(&F, 0, v), 0));
		cns_flush(F.nodes[0].c, fx_local(&F, 0));
	}
	fx_deliver_all(&F);
	struct cns *c3 = F.nodes[2].c;
	cr_assert(eq(u64, cns_last_index(c3), 4));
	cr_assert(eq(u64, cns_commit_index(c3), 1));
	struct wire_append_entries ae;
	memset(&ae, 0, sizeof(ae));
	wire_hdr_init(&ae.hdr, WIRE_APPEND_ENTRIES, F.cfg.shard);
	ae.term = cns_term(c3) + 1;
	ae.prev_index = 1;
	ae.prev_term = cns_term_at(c3, 1);
	ae.commit = 4;
	ae.leader = 2;
	F.leader_of_term[ae.term] = 2; /* n2 is the (imagined) leader of that term */
	cr_assert(eq(int, cns_step(c3, fx_local(&F, 2), &ae.hdr), 0));
	cr_assert(eq(u64, cns_commit_index(c3), 1), "committed entries not verified with the leader");
	F.q_len = 0;
	fx_heal(&F);
}

/* Goal: the leader's per-member match index (the mgmt lag view) follows replication and is
 * refused off the leader and for non-members.
 * Method: three members, node 2 cut off; after 5 entries the leader reports its own last
 * index, the connected follower caught up and the cut one behind; after healing all are
 * equal. A follower answers UINT64_MAX, and so does the leader for an unknown node. */
Test(cns_replication, match_index_per_member, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	struct cns *l = F.nodes[0].c;
	uint32_t n1 = F.cfg.members[1], n2 = F.cfg.members[2];
	uint64_t before = cns_match_index(l, n2);
	cr_assert(eq(u64, before, cns_last_index(l)));
	fx_isolate(&F, 2, true);
	for (uint64_t v = 1; v <= 5; v++)
		propose_n(0, v, 1);
	fx_run_ms(&F, 20);
	uint64_t last = cns_last_index(l);
	cr_assert(eq(u64, cns_match_index(l, F.cfg.members[0]), last));
	cr_assert(eq(u64, cns_match_index(l, n1), last));
	cr_assert(lt(u64, cns_match_index(l, n2), last));
	cr_assert(eq(u64, cns_match_index(l, n2), before));
	cr_assert(eq(u64, cns_match_index(F.nodes[1].c, n1), UINT64_MAX));
	cr_assert(eq(u64, cns_match_index(l, 4242), UINT64_MAX));
	fx_heal(&F);
	fx_run_ms(&F, 200);
	int ld = fx_leader(&F);
	cr_assert(ge(int, ld, 0));
	struct cns *l2 = F.nodes[ld].c;
	for (uint32_t i = 0; i < 3; i++)
		cr_assert(eq(u64, cns_match_index(l2, F.cfg.members[i]), cns_last_index(l2)));
}

/* Goal: an AppendEntries overtaken by the next one (the network reorders) costs one probe
 * and the entries the follower dropped, however many rejections the hole causes.
 * Method: one entry per AppendEntries, window 16; 16 entries are sent to n2 back to back,
 * the first two swapped in the queue. n2 rejects the second (a hole after its last entry),
 * takes the first and rejects the 14 after it (they follow the hole). The leader probes
 * once, pipelines again from what n2 holds when the first success arrives, and ignores the
 * 14 rejections (their seq is older than the new run): entries sent to n2 are
 * 16 + 1 + 15. (Before: every rejection sent a probe and every probe's success
 * re-pipelined the window.) */
Test(cns_replication, reordered_append_fills_hole_once, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.append_entries_max = 1;
	F.cfg.inflight_max = 16;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	cr_assert(eq(u32, F.q_len, 0));
	uint64_t before = F.sent_entries[0][1];
	for (uint64_t v = 1; v <= 16; v++) {
		cr_assert(eq(int, fx_propose(&F, 0, v), 0));
		cns_flush(F.nodes[0].c, fx_local(&F, 0));
	}
	/* Swap the first two AppendEntries to n2. */
	int32_t first = -1, second = -1;
	for (uint32_t k = 0; k < F.q_len && second < 0; k++) {
		struct fx_msg *m = &F.q[(F.q_head + k) % FX_QUEUE];
		if (m->to != 2)
			continue;
		if (first < 0)
			first = (int32_t)k;
		else
			second = (int32_t)k;
	}
	cr_assert(second > first && first >= 0);
	struct fx_msg tmp = F.q[(F.q_head + (uint32_t)first) % FX_QUEUE];
	F.q[(F.q_head + (uint32_t)first) % FX_QUEUE] = F.q[(F.q_head + (uint32_t)second) % FX_QUEUE];
	F.q[(F.q_head + (uint32_t)second) % FX_QUEUE] = tmp;
	fx_deliver_all(&F);
	cr_assert(eq(u64, cns_counter(F.nodes[1].c, CNS_C_APPEND_REJECTED), 15));
	cr_assert(eq(u64, cns_counter(F.nodes[0].c, CNS_C_STALE_MSGS), 14));
	cr_assert(F.sent_entries[0][1] - before <= 32, "entries sent to n2: %lu",
		  (unsigned long)(F.sent_entries[0][1] - before));
	fx_run_ms(&F, 10);
	cr_assert(eq(u64, F.nodes[1].svc.sum, 136));
	cr_assert(eq(u64, cns_applied_index(F.nodes[1].c), cns_applied_index(F.nodes[0].c)));
}

/* Goal: a follower whose disk is slow (it holds the entries, durability lags) is sent
 * every entry once: the leader pipelines from what it holds, not from what is durable.
 * Method: disk mode, one entry per AppendEntries, window 32; n2 reports no durability
 * for 600 ms while 200 entries are proposed one per 2 ms (n1 and n3 commit them). Count
 * the entries the leader put into AppendEntries for n2: at most the 200 proposed plus a
 * few. (Before: the window closed 32 entries past n2's durable index, and every two
 * heartbeats the leader fell back to PROBE and re-sent all 32: 421 entries with that
 * flow control.) Then the disk catches up and n2 commits and applies everything. */
Test(cns_replication, slow_disk_follower_not_resent, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_DISK);
	F.cfg.append_entries_max = 1;
	F.cfg.inflight_max = 32;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	struct cns *c1 = F.nodes[0].c, *c2 = F.nodes[1].c;
	uint64_t first = cns_last_index(c1) + 1;
	uint64_t before = F.sent_entries[0][1], msgs_before = F.sent[0][1];
	F.nodes[1].disk_stalled = true;
	uint64_t sum = 0;
	for (uint64_t v = 1; v <= 200; v++) {
		cr_assert(eq(int, fx_propose(&F, 0, v), 0));
		cns_flush(c1, fx_local(&F, 0));
		sum += v;
		fx_run_ms(&F, 2);
	}
	fx_run_ms(&F, 200);
	uint64_t entries = F.sent_entries[0][1] - before;
	uint64_t msgs = F.sent[0][1] - msgs_before;
	cr_assert(entries <= 200 + 4, "entries sent to n2 while its disk lagged: %lu",
		  (unsigned long)entries);
	cr_assert(cns_commit_index(c1) >= first + 199, "n1 and n3 commit without n2's disk");
	cr_assert(cns_last_index(c2) >= first + 199, "n2 holds every entry");
	cr_assert(cns_durable_index(c2) < first, "n2's disk made nothing durable");
	/* AppendEntries with entries, a commit push per commit advance (one per entry here)
	 * and a heartbeat per 25 ms. (Before: > 700.) */
	cr_assert(msgs <= 200 + 4 + 200 + 600 / 25 + 4, "messages to n2: %lu",
		  (unsigned long)msgs);
	F.nodes[1].disk_stalled = false;
	fx_run_ms(&F, 20);
	cr_assert(eq(u64, cns_durable_index(c2), cns_last_index(c2)));
	cr_assert(eq(u64, cns_applied_index(c2), cns_applied_index(c1)));
	cr_assert(eq(u64, F.nodes[1].svc.sum, sum));
	cr_assert(eq(u64, F.sent_entries[0][1] - before, entries), "nothing re-sent afterwards");
}

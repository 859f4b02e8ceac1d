/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Membership changes (thesis §4.1-4.3): the traps of one-server-at-a-time changes with
 * learners. Each test drives the fixture's cluster into the situation and checks the rule.
 */
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

static struct cns *
cns_of(uint32_t node)
{
	return F.nodes[node - 1].c;
}

static void
propose_entries(uint32_t node, uint64_t first, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		cr_assert(eq(int, fx_propose(&F, node - 1, first + k), 0));
		cns_flush(cns_of(node), fx_local(&F, node - 1));
	}
}

/* Node `node`'s configuration in effect is ids (a learner where the bit in learners is
 * set); returns its index. */
static uint64_t
expect_members(uint32_t node, uint32_t count, const uint32_t *ids, uint32_t learners)
{
	struct cns_members m;
	uint64_t index = cns_members(cns_of(node), &m);
	cr_assert(eq(u32, m.count, count), "n%u: %u members", node, m.count);
	cr_assert(eq(u32, m.learners, learners), "n%u: learners %#x", node, m.learners);
	for (uint32_t i = 0; i < count; i++)
		cr_assert(eq(u32, m.ids[i], ids[i]), "n%u: member %u is %u", node, i, m.ids[i]);
	return index;
}

/* Run until the change `node` made commits (at most ms milliseconds). */
static void
settle(uint32_t node, uint32_t ms)
{
	for (uint32_t t = 0; t < ms && cns_members(cns_of(node), NULL) > cns_commit_index(cns_of(node)); t++)
		fx_run_ms(&F, 1);
	cr_assert(cns_members(cns_of(node), NULL) <= cns_commit_index(cns_of(node)), "change not committed");
	fx_run_ms(&F, 5);
}

static bool
drop_append_replies(struct fx *f, uint32_t from, uint32_t to, const struct wire_msg_hdr *msg)
{
	(void)f;
	(void)from;
	(void)to;
	return msg->type == WIRE_APPEND_REPLY;
}

/* Goal: a learner receives the log and is never counted for commit or check-quorum.
 * Method: n4 joins as a learner and catches up; n2 and n3 are cut off. n4 acknowledges
 * three new entries (the leader's match for it is its last index) yet the commit index
 * does not move; after an election timeout the leader steps down (check-quorum) although
 * the learner answers every heartbeat. Healed, a voter leads and commits for all four. */
Test(cns_members, learner_not_counted_for_commit_or_quorum, .fini = fini)
{
	fx_init_join(&F, 3, 4, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 4), 0));
	settle(1, 50);
	cr_assert(cns_is_learner(cns_of(1), 4));
	cr_assert(cns_is_learner(cns_of(4), 4), "the learner took the configuration from the log");
	cr_assert(eq(u64, cns_applied_index(cns_of(4)), cns_applied_index(cns_of(1))));
	fx_isolate(&F, 1, true);
	fx_isolate(&F, 2, true);
	uint64_t commit = cns_commit_index(cns_of(1));
	propose_entries(1, 1, 3);
	fx_run_ms(&F, 20);
	cr_assert(eq(u64, cns_match_index(cns_of(1), 4), cns_last_index(cns_of(1))), "learner acked all");
	cr_assert(eq(u64, cns_commit_index(cns_of(1)), commit), "committed on a learner's ack");
	fx_run_ms(&F, 400);
	cr_assert(ne(int, cns_role(cns_of(1)), CNS_LEADER), "learner kept a leader's quorum");
	cr_assert(eq(u64, cns_counter(cns_of(1), CNS_C_CHECK_QUORUM_LOST), 1));
	/* Healed, a voter leads (the three entries were never committed: they survive only
	 * if n1 wins again) and commits for everyone, the learner too. */
	fx_heal(&F);
	fx_run_ms(&F, 1000);
	int l = fx_leader(&F);
	cr_assert(l >= 0 && l < 3, "leader %d", l);
	propose_entries((uint32_t)l + 1, 100, 1);
	fx_run_ms(&F, 50);
	uint64_t sum = F.nodes[l].svc.sum;
	cr_assert(sum == 100 || sum == 106, "sum %lu", (unsigned long)sum);
	for (uint32_t i = 0; i < 4; i++)
		cr_assert(eq(u64, F.nodes[i].svc.sum, sum), "n%u", i + 1);
}

/* Goal: learners and joining nodes never stand for election.
 * Method: n4 is a caught-up learner, n5 a joining node never added. Their election timers
 * fire (once by hand, then for 2 s of isolation): no pre-vote, no election, no message, the
 * term is unchanged. */
Test(cns_members, learner_and_joiner_never_stand, .fini = fini)
{
	fx_init_join(&F, 3, 5, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 4), 0));
	settle(1, 50);
	uint64_t term = cns_term(cns_of(4));
	for (uint32_t node = 4; node <= 5; node++) {
		struct cns *c = cns_of(node);
		uint64_t sent = 0;
		for (uint32_t j = 0; j < 5; j++)
			sent += F.sent[node - 1][j];
		c->election_deadline_ns = 1;
		cns_tick(c, fx_local(&F, node - 1));
		cr_assert(eq(int, cns_role(c), CNS_FOLLOWER));
		uint64_t after = 0;
		for (uint32_t j = 0; j < 5; j++)
			after += F.sent[node - 1][j];
		cr_assert(eq(u64, after, sent), "n%u sent something when its timer fired", node);
	}
	fx_isolate(&F, 3, true);
	fx_isolate(&F, 4, true);
	fx_run_ms(&F, 2000);
	for (uint32_t node = 4; node <= 5; node++) {
		cr_assert(eq(u64, cns_counter(cns_of(node), CNS_C_PRE_VOTES_STARTED), 0));
		cr_assert(eq(u64, cns_counter(cns_of(node), CNS_C_ELECTIONS_STARTED), 0));
	}
	cr_assert(eq(u64, cns_term(cns_of(4)), term));
	cr_assert(eq(int, fx_leader(&F), 0));
}

static void
vote_reply(uint32_t to, uint32_t voter, uint64_t term, bool pre)
{
	struct wire_vote_reply r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_VOTE_REPLY, F.cfg.shard);
	r.hdr.flags = pre ? WIRE_VOTE_F_PRE : 0;
	r.term = term;
	r.voter = voter;
	r.granted = 1;
	cr_assert(eq(int, cns_step(cns_of(to), fx_local(&F, to - 1), &r.hdr), 0));
}

/* Goal: a vote (or pre-vote) from a node that is a learner in the candidate's
 * configuration is not counted; a voter's is.
 * Method: config {1 2 3 4L}; n1 and n3 are cut off, leases expire. n2 pre-votes and is
 * granted a pre-vote by learner n4: still a pre-candidate (1 of the 2 needed). As a
 * candidate, n4's vote leaves it a candidate; n3's vote makes it leader. */
Test(cns_members, learner_votes_not_counted, .fini = fini)
{
	fx_init_join(&F, 3, 4, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 4), 0));
	settle(1, 50);
	fx_isolate(&F, 0, true);
	fx_isolate(&F, 1, true);
	fx_isolate(&F, 2, true);
	F.now += 400000000ull;
	struct cns *c2 = cns_of(2);
	c2->election_deadline_ns = 1;
	cns_tick(c2, fx_local(&F, 1));
	cr_assert(eq(int, cns_role(c2), CNS_PRE_CANDIDATE));
	vote_reply(2, 4, cns_term(c2) + 1, true);
	cr_assert(eq(int, cns_role(c2), CNS_PRE_CANDIDATE), "a learner's pre-vote counted");
	vote_reply(2, 3, cns_term(c2) + 1, true);
	cr_assert(eq(int, cns_role(c2), CNS_CANDIDATE));
	uint64_t term = cns_term(c2);
	vote_reply(2, 4, term, false);
	cr_assert(eq(int, cns_role(c2), CNS_CANDIDATE), "a learner's vote counted");
	vote_reply(2, 3, term, false);
	cr_assert(eq(int, cns_role(c2), CNS_LEADER));
	F.q_len = 0; /* its messages went nowhere */
}

static bool
request_vote(uint32_t to, uint32_t from, uint64_t term, bool pre)
{
	struct cns *c = cns_of(to);
	struct wire_request_vote rv;
	memset(&rv, 0, sizeof(rv));
	wire_hdr_init(&rv.hdr, WIRE_REQUEST_VOTE, F.cfg.shard);
	rv.hdr.flags = pre ? WIRE_VOTE_F_PRE : 0;
	rv.term = term;
	rv.last_index = 1000;
	rv.last_term = term - 1;
	rv.candidate = from;
	uint64_t granted = cns_counter(c, CNS_C_VOTES_GRANTED);
	cr_assert(eq(int, cns_step(c, fx_local(&F, to - 1), &rv.hdr), 0));
	F.q_len = 0; /* the reply goes nowhere */
	return cns_counter(c, CNS_C_VOTES_GRANTED) > granted;
}

/* Goal: a joining node that holds no configuration yet grants no vote and no pre-vote,
 * however up to date the candidate: a candidate that counts it can only hold a
 * configuration from before its id was re-used (sim-raft --members seed 12: a wiped and
 * re-joined node's vote elected a node removed long before). Once it holds a
 * configuration it votes like anyone (a learner may have been promoted without knowing).
 * Method: joining node n5, never added, refuses a pre-vote and a vote from a candidate with
 * a longer log; n4, added and caught up, grants both once the leader has gone quiet. */
Test(cns_members, empty_joiner_grants_no_vote, .fini = fini)
{
	fx_init_join(&F, 3, 5, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	uint64_t t = cns_term(cns_of(1)) + 1;
	cr_assert(not(request_vote(5, 2, t, true)));
	cr_assert(not(request_vote(5, 2, t, false)));
	cr_assert(eq(u64, cns_term(cns_of(5)), t), "a real vote's term is still taken");
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 4), 0));
	settle(1, 50);
	fx_isolate(&F, 3, true);
	F.now += 400000000ull;
	uint64_t term = cns_term(cns_of(4));
	cr_assert(request_vote(4, 2, term + 1, true));
	cr_assert(request_vote(4, 2, term + 1, false));
}

/* Goal: a removed server that never learns of its removal cannot disrupt the cluster
 * (thesis §4.2.3): pre-vote and the voters' leases refuse it while a leader lives, so it
 * never bumps anyone's term; when the leader is gone it still cannot win (its log lacks
 * the removal), and the remaining voters elect one of theirs.
 * Method: five voters; n5 is isolated while n1 removes it; healed, n5's timer fires for
 * 3 s; then n1 is cut off and n2..n4 elect a leader. */
Test(cns_members, removed_server_does_not_disrupt, .fini = fini)
{
	fx_init(&F, 5, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	fx_isolate(&F, 4, true);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 5), 0));
	settle(1, 50);
	const uint32_t four[] = {1, 2, 3, 4};
	expect_members(1, 4, four, 0);
	cr_assert(cns_is_voter(cns_of(5), 5), "n5 never heard of its removal");
	uint64_t term = cns_term(cns_of(1));
	fx_heal(&F);
	fx_run_ms(&F, 3000);
	cr_assert(cns_counter(cns_of(5), CNS_C_PRE_VOTES_STARTED) > 5);
	cr_assert(eq(u64, cns_counter(cns_of(5), CNS_C_ELECTIONS_STARTED), 0));
	for (uint32_t node = 1; node <= 5; node++)
		cr_assert(eq(u64, cns_term(cns_of(node)), term), "n%u term moved", node);
	cr_assert(eq(int, fx_leader(&F), 0));
	/* The leader goes away: the four remaining voters elect one of theirs. */
	fx_isolate(&F, 0, true);
	fx_run_ms(&F, 3000);
	int l = fx_leader(&F);
	cr_assert(l >= 1 && l <= 3, "leader %d", l);
	for (uint32_t t = 0; t < 1024; t++)
		cr_assert(ne(u32, F.leader_of_term[t], 5), "the removed node led term %u", t);
	propose_entries((uint32_t)l + 1, 1, 2);
	fx_run_ms(&F, 50);
	cr_assert(eq(u64, F.nodes[l].svc.sum, 3));
}

/* Goal: a leader that removes itself commits the removal without counting itself, keeps
 * leading until then, then steps down and hands over with TimeoutNow, so a remaining voter
 * leads within milliseconds, well inside an election timeout (thesis §4.2.2).
 * Method: three voters; n3's messages to n1 are cut, n1 removes itself. With n2's ack
 * alone (1 of the 2 voters of {2 3}) the removal does not commit, although n1 and n2 would
 * be a majority of {1 2 3}. Healed, it commits; n1 steps down within a tick and n2 or n3
 * leads within 10 ms. n1 never stands again. */
Test(cns_members, leader_removes_itself, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	F.cut[2][0] = true;
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 1), 0));
	uint64_t index = cns_members(cns_of(1), NULL);
	cr_assert(not(cns_is_voter(cns_of(1), 1)));
	fx_run_ms(&F, 20);
	cr_assert(eq(int, cns_role(cns_of(1)), CNS_LEADER));
	cr_assert(cns_match_index(cns_of(1), 2) >= index, "n2 acknowledged the removal");
	cr_assert(cns_commit_index(cns_of(1)) < index, "the leader counted itself");
	F.cut[2][0] = false;
	uint32_t ms = 0;
	while (cns_role(cns_of(1)) == CNS_LEADER && ms < 50) {
		fx_run_ms(&F, 1);
		ms++;
	}
	cr_assert(ne(int, cns_role(cns_of(1)), CNS_LEADER), "the removed leader kept leading");
	cr_assert(cns_commit_index(cns_of(1)) >= index);
	cr_assert(eq(u64, cns_counter(cns_of(1), CNS_C_TIMEOUT_NOW_SENT), 1));
	uint64_t pre_votes = cns_counter(cns_of(1), CNS_C_PRE_VOTES_STARTED);
	ms = 0;
	while (fx_leader(&F) < 0 && ms < 10) {
		fx_run_ms(&F, 1);
		ms++;
	}
	int l = fx_leader(&F);
	cr_assert(l == 1 || l == 2, "no new leader %u ms after the step-down", ms);
	const uint32_t two[] = {2, 3};
	expect_members((uint32_t)l + 1, 2, two, 0);
	propose_entries((uint32_t)l + 1, 1, 2);
	fx_run_ms(&F, 1000);
	cr_assert(eq(u64, F.nodes[l].svc.sum, 3));
	cr_assert(eq(u64, F.nodes[3 - l].svc.sum, 3));
	cr_assert(eq(u64, cns_counter(cns_of(1), CNS_C_PRE_VOTES_STARTED), pre_votes));
}

/* Goal: one change at a time: -EBUSY while the previous change is not committed; every
 * other refusal has its error.
 * Method: acknowledgements are dropped, n1 adds n4: a second add, a promote and a remove
 * are -EBUSY; once it commits the next change is taken. Then -EINVAL for adding a member,
 * promoting a voter or a stranger, removing a stranger, node 0, the last voter; -ENOSPC
 * beyond CNS_MEMBERS_MAX; -EPERM on a follower; -EBUSY during a leadership transfer. */
Test(cns_members, one_change_at_a_time, .fini = fini)
{
	fx_init_join(&F, 3, 5, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	F.drop = drop_append_replies;
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 4), 0));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 5), -EBUSY));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_PROMOTE, 4), -EBUSY));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 3), -EBUSY));
	fx_run_ms(&F, 20);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 5), -EBUSY));
	F.drop = NULL;
	settle(1, 50);
	cr_assert(eq(u64, cns_counter(cns_of(1), CNS_C_CONFIG_CHANGES), 1));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 5), 0));
	settle(1, 50);
	const uint32_t five[] = {1, 2, 3, 4, 5};
	expect_members(1, 5, five, 0x18);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 2), -EINVAL));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 6), -ENOSPC));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_PROMOTE, 2), -EINVAL));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_PROMOTE, 9), -EINVAL));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 9), -EINVAL));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 0), -EINVAL));
	cr_assert(eq(int, fx_change(&F, 0, (enum cns_member_op)9, 4), -EINVAL));
	cr_assert(eq(int, fx_change(&F, 1, CNS_MEMBER_REMOVE, 3), -EPERM));
	cr_assert(eq(int, cns_transfer(cns_of(1), fx_local(&F, 0), 4), -EINVAL), "transfer to a learner");
	cr_assert(eq(int, cns_transfer(cns_of(1), fx_local(&F, 0), 2), 0));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 3), -EBUSY));
	fx_run_ms(&F, 50);
	/* The last voter: remove down to one voter, then that one is refused. */
	int l = fx_leader(&F);
	cr_assert(l >= 0);
	uint32_t ln = (uint32_t)l + 1;
	for (uint32_t node = 1; node <= 3; node++) {
		if (node == ln)
			continue;
		cr_assert(eq(int, fx_change(&F, (uint32_t)l, CNS_MEMBER_REMOVE, node), 0));
		settle(ln, 100);
	}
	cr_assert(eq(int, fx_change(&F, (uint32_t)l, CNS_MEMBER_REMOVE, ln), -EINVAL));
	const uint32_t rest[] = {ln, 4, 5};
	expect_members(ln, 3, rest, 0x6);
}

/* Goal: a leader of a new term makes no change before an entry of its own term commits
 * (the single-server change errata, thesis §4.1 / raft-dev 2015): a deposed leader may
 * hold an uncommitted change the new leader never saw, and a second change stacked on the
 * same committed configuration could give two majorities without a common member.
 * Method: five voters; n1, cut off, appends its removal of n5 (only it holds the entry).
 * n2 wins term 2 with {1 2 3 4 5} (committed) in effect; while its noop is not
 * acknowledged a change is -EBUSY; once the noop commits it is taken. */
Test(cns_members, busy_until_new_leaders_first_entry_commits, .fini = fini)
{
	fx_init(&F, 5, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	fx_isolate(&F, 0, true);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 5), 0));
	F.now += 400000000ull;
	F.drop = drop_append_replies;
	fx_campaign(&F, 1);
	cr_assert(eq(int, cns_role(cns_of(2)), CNS_LEADER));
	cr_assert(cns_members(cns_of(2), NULL) <= cns_commit_index(cns_of(2)), "its configuration is committed");
	cr_assert(eq(int, fx_change(&F, 1, CNS_MEMBER_REMOVE, 4), -EBUSY));
	F.drop = NULL;
	fx_run_ms(&F, 100); /* the lost acknowledgements are answered again at heartbeat pace */
	cr_assert(eq(int, fx_change(&F, 1, CNS_MEMBER_REMOVE, 4), 0));
	settle(2, 50);
	fx_heal(&F);
	fx_run_ms(&F, 300);
	const uint32_t ids[] = {1, 2, 3, 5};
	cr_assert(eq(u64, cns_counter(cns_of(1), CNS_C_CONFIG_REVERTED), 1));
	for (uint32_t node = 1; node <= 5; node++)
		if (node != 4)
			expect_members(node, 4, ids, 0);
}

/* Goal: a leader that inherits an uncommitted change takes no other until it commits.
 * Method: five voters; n1 removes n5 and the entry reaches n2 only; n1 is cut off and n2
 * wins term 2 with {1 2 3 4} in effect, its noop unacknowledged: -EBUSY. Once the noop
 * commits (and the removal with it) a change is taken. */
Test(cns_members, busy_while_inherited_change_uncommitted, .fini = fini)
{
	fx_init(&F, 5, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	for (uint32_t j = 2; j < 5; j++)
		F.cut[0][j] = true;
	F.cut[1][0] = true;
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 5), 0));
	fx_deliver_all(&F);
	const uint32_t four[] = {1, 2, 3, 4};
	uint64_t index = expect_members(2, 4, four, 0);
	cr_assert(cns_commit_index(cns_of(2)) < index);
	fx_heal(&F);
	fx_isolate(&F, 0, true);
	F.now += 400000000ull;
	F.drop = drop_append_replies;
	fx_campaign(&F, 1);
	cr_assert(eq(int, cns_role(cns_of(2)), CNS_LEADER));
	cr_assert(eq(int, fx_change(&F, 1, CNS_MEMBER_REMOVE, 4), -EBUSY));
	F.drop = NULL;
	fx_run_ms(&F, 100);
	cr_assert(cns_commit_index(cns_of(2)) > index);
	cr_assert(eq(int, fx_change(&F, 1, CNS_MEMBER_REMOVE, 4), 0));
}

/* Goal: promote waits until the learner is caught up (-EAGAIN while it is more than
 * append_entries_max entries behind), so a new voter never stalls commits.
 * Method: one entry per AppendEntries... four: n4 is added while cut off, ten entries
 * commit without it: -EAGAIN. Healed, it catches up and the promote is taken; n4 then
 * counts: with n2 and n3 cut off, n1 and n4 commit. */
Test(cns_members, promote_refused_while_behind, .fini = fini)
{
	fx_init_join(&F, 3, 4, CNS_DURABLE_MEMORY);
	F.cfg.append_entries_max = 4;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_isolate(&F, 3, true);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 4), 0));
	settle(1, 50);
	propose_entries(1, 1, 10);
	fx_run_ms(&F, 10);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_PROMOTE, 4), -EAGAIN));
	fx_heal(&F);
	fx_run_ms(&F, 50);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_PROMOTE, 4), 0));
	settle(1, 50);
	cr_assert(cns_is_voter(cns_of(4), 4), "n4 knows it votes");
	fx_isolate(&F, 1, true);
	fx_isolate(&F, 2, true);
	uint64_t commit = cns_commit_index(cns_of(1));
	propose_entries(1, 100, 1);
	fx_run_ms(&F, 10);
	cr_assert(eq(u64, cns_commit_index(cns_of(1)), commit), "2 of 4 voters committed");
	fx_isolate(&F, 2, false);
	fx_run_ms(&F, 100); /* n3 is re-sent what it missed after two heartbeats */
	cr_assert(cns_commit_index(cns_of(1)) > commit);
}

/* Goal: a configuration is in effect from its append, so a truncation of an uncommitted
 * configuration entry restores the one before (on the leader that made it and on a
 * follower that took it).
 * Method: five voters; n1 removes n5 and the entry reaches n2 only; n1 is cut off and n3
 * wins with n4 and n5 (n2 refuses: its log is longer) and commits its own entries. Healed,
 * n1 and n2 truncate the removal: {1 2 3 4 5} is in effect again (index 1), each counts
 * CONFIG_REVERTED once, and everyone applies n3's entries. */
Test(cns_members, truncated_configuration_reverts, .fini = fini)
{
	fx_init(&F, 5, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	for (uint32_t j = 2; j < 5; j++)
		F.cut[0][j] = true;
	F.cut[1][0] = true;
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 5), 0));
	fx_deliver_all(&F);
	const uint32_t four[] = {1, 2, 3, 4};
	expect_members(1, 4, four, 0);
	expect_members(2, 4, four, 0);
	fx_heal(&F);
	fx_isolate(&F, 0, true);
	fx_isolate(&F, 1, true);
	F.now += 400000000ull;
	fx_campaign(&F, 2);
	cr_assert(eq(int, cns_role(cns_of(3)), CNS_LEADER));
	propose_entries(3, 1, 3);
	fx_run_ms(&F, 10);
	fx_heal(&F);
	fx_run_ms(&F, 500);
	const uint32_t five[] = {1, 2, 3, 4, 5};
	for (uint32_t node = 1; node <= 5; node++) {
		cr_assert(eq(u64, expect_members(node, 5, five, 0), 1));
		cr_assert(eq(u64, F.nodes[node - 1].svc.sum, 6));
	}
	cr_assert(eq(u64, cns_counter(cns_of(1), CNS_C_CONFIG_REVERTED), 1));
	cr_assert(eq(u64, cns_counter(cns_of(2), CNS_C_CONFIG_REVERTED), 1));
}

/* Goal: a snapshot install that discards the whole log (Raft §7 step 7) discards an
 * uncommitted configuration beyond the snapshot's index with it: the snapshot's
 * configuration is in effect (sim-raft --members seed 16 found the old one kept, a later
 * configuration entry at a lower index then failed a CHECK).
 * Method: five voters, no kept tail. n1 appends five entries and its removal of n5; they
 * reach n2 only. n3 wins term 2 with n4 and n5, commits one entry and snapshots below the
 * removal's index. n2 is healed: it does not hold the snapshot's last entry (another term),
 * installs it, reverts to {1 2 3 4 5} and then takes n3's removal of n4 at a lower index
 * than the one it dropped. */
Test(cns_members, install_discards_uncommitted_configuration, .fini = fini)
{
	fx_init(&F, 5, CNS_DURABLE_MEMORY);
	F.cfg.log_keep_entries = 0;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 5);
	for (uint32_t j = 2; j < 5; j++)
		F.cut[0][j] = true;
	propose_entries(1, 1, 5);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 5), 0));
	fx_deliver_all(&F);
	uint64_t removal = cns_members(cns_of(2), NULL);
	cr_assert(eq(u64, removal, cns_last_index(cns_of(1))));
	fx_heal(&F);
	fx_isolate(&F, 0, true);
	fx_isolate(&F, 1, true);
	F.now += 400000000ull;
	fx_campaign(&F, 2);
	cr_assert(eq(int, cns_role(cns_of(3)), CNS_LEADER));
	propose_entries(3, 100, 1);
	fx_run_ms(&F, 10);
	cr_assert(eq(int, cns_snapshot_take(cns_of(3)), 0));
	uint64_t snap = cns_snapshot(cns_of(3), NULL)->index;
	cr_assert(snap < removal);
	cr_assert(ne(u64, cns_term_at(cns_of(2), snap), cns_term_at(cns_of(3), snap)));
	fx_isolate(&F, 1, false);
	fx_run_ms(&F, 100);
	cr_assert(eq(u64, cns_counter(cns_of(2), CNS_C_SNAPSHOTS_INSTALLED), 1));
	const uint32_t five[] = {1, 2, 3, 4, 5};
	cr_assert(cns_members(cns_of(2), NULL) <= snap);
	expect_members(2, 5, five, 0);
	cr_assert(eq(u64, cns_counter(cns_of(2), CNS_C_CONFIG_REVERTED), 1));
	cr_assert(eq(int, fx_change(&F, 2, CNS_MEMBER_REMOVE, 4), 0));
	uint64_t index = cns_members(cns_of(3), NULL);
	cr_assert(index < removal);
	fx_run_ms(&F, 50);
	const uint32_t four[] = {1, 2, 3, 5};
	cr_assert(eq(u64, expect_members(2, 4, four, 0), index));
	cr_assert(eq(u64, F.nodes[1].svc.sum, F.nodes[2].svc.sum));
}

/* Goal: a joining node caught up by InstallSnapshot takes the configuration from the
 * snapshot's prefix and the entries after it: it ends as a learner of the right set and
 * can be promoted.
 * Method: 20 entries commit, n1 snapshots and compacts everything; n1 adds n4, which has
 * an empty log: it installs the snapshot (whose prefix says {1 2 3}), appends the entry
 * that adds it, applies everything, and is promoted. */
Test(cns_members, joiner_caught_up_by_snapshot, .fini = fini)
{
	fx_init_join(&F, 3, 4, CNS_DURABLE_MEMORY);
	F.cfg.log_keep_entries = 0;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	propose_entries(1, 1, 20);
	fx_run_ms(&F, 20);
	cr_assert(eq(int, cns_snapshot_take(cns_of(1)), 0));
	const void *data;
	const struct cns_snapshot_meta *s = cns_snapshot(cns_of(1), &data);
	struct cns_snap_prefix pre;
	memcpy(&pre, data, sizeof(pre));
	cr_assert(eq(u64, pre.magic, CNS_SNAP_MAGIC));
	cr_assert(eq(u32, pre.config.member_count, 3));
	cr_assert(eq(u64, s->len, sizeof(pre) + sizeof(struct fx_svc)));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 4), 0));
	uint64_t index = cns_members(cns_of(1), NULL);
	fx_run_ms(&F, 100);
	cr_assert(eq(u64, cns_counter(cns_of(4), CNS_C_SNAPSHOTS_INSTALLED), 1));
	const uint32_t ids[] = {1, 2, 3, 4};
	cr_assert(eq(u64, expect_members(4, 4, ids, 0x8), index));
	cr_assert(eq(u64, cns_applied_index(cns_of(4)), cns_applied_index(cns_of(1))));
	cr_assert(eq(u64, F.nodes[3].svc.sum, 210));
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_PROMOTE, 4), 0));
	settle(1, 50);
	expect_members(4, 4, ids, 0);
}

/* Goal: a snapshot carries the configuration applied at its index, not the one in effect
 * (Raft §7): an appended but uncommitted change is not in it.
 * Method: acknowledgements are dropped; n1 adds n4 (in effect on n1 from the append) and
 * snapshots at its applied index: the prefix still says {1 2 3}. Once the change commits
 * and is applied, the next snapshot says {1 2 3 4L}. */
Test(cns_members, snapshot_carries_applied_configuration, .fini = fini)
{
	fx_init_join(&F, 3, 4, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	propose_entries(1, 1, 2);
	fx_run_ms(&F, 10);
	F.drop = drop_append_replies;
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 4), 0));
	cr_assert(cns_is_learner(cns_of(1), 4));
	cr_assert(eq(int, cns_snapshot_take(cns_of(1)), 0));
	const void *data;
	struct cns_snap_prefix pre;
	cr_assert(cns_snapshot(cns_of(1), &data)->index < cns_members(cns_of(1), NULL));
	memcpy(&pre, data, sizeof(pre));
	cr_assert(eq(u32, pre.config.member_count, 3));
	F.drop = NULL;
	settle(1, 100);
	propose_entries(1, 10, 1);
	fx_run_ms(&F, 10);
	cr_assert(eq(int, cns_snapshot_take(cns_of(1)), 0));
	memcpy(&pre, (cns_snapshot(cns_of(1), &data), data), sizeof(pre));
	cr_assert(eq(u32, pre.config.member_count, 4));
	cr_assert(eq(u32, pre.config.members[3], 4));
	cr_assert(eq(u32, pre.config.learners, 0x8));
}

/* Goal: a joining node caught up from the log takes the bootstrap configuration from
 * entry 1 and every change after it.
 * Method: no snapshot; n1 adds n4 after a few entries: n4 receives the whole log from
 * index 1, no snapshot, and ends with the leader's configuration and state. */
Test(cns_members, joiner_caught_up_by_log, .fini = fini)
{
	fx_init_join(&F, 3, 4, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	propose_entries(1, 1, 5);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 4), 0));
	settle(1, 50);
	cr_assert(eq(u64, cns_counter(cns_of(4), CNS_C_SNAPSHOTS_INSTALLED), 0));
	const uint32_t ids[] = {1, 2, 3, 4};
	cr_assert(eq(u64, expect_members(4, 4, ids, 0x8), cns_members(cns_of(1), NULL)));
	cr_assert(eq(u16, cns_log_entry(cns_of(4), 1)->kind, CNS_ENTRY_CONFIG));
	cr_assert(eq(u64, F.nodes[3].svc.sum, 15));
}

/* Goal: a restart from a snapshot plus the log after it restores the latest configuration
 * (the log's, over the snapshot's), also on a node that joined.
 * Method: n4 joins and is promoted; n4 and n2 snapshot ({1 2 3 4} in the prefix); then n3
 * is removed and n5 added, after the snapshots. n2 and n4 restart from snapshot + log:
 * {1 2 4 5L} with the index of its entry, and they keep replicating. */
Test(cns_members, restart_restores_latest_configuration, .fini = fini)
{
	fx_init_join(&F, 3, 5, CNS_DURABLE_MEMORY);
	F.cfg.log_keep_entries = 0;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 4), 0));
	settle(1, 50);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_PROMOTE, 4), 0));
	settle(1, 50);
	propose_entries(1, 1, 5);
	fx_run_ms(&F, 20);
	static uint8_t saved[2][sizeof(struct fx_svc) + 64];
	struct cns_snapshot_meta meta[2];
	const uint32_t who[2] = {2, 4};
	for (uint32_t k = 0; k < 2; k++) {
		cr_assert(eq(int, cns_snapshot_take(cns_of(who[k])), 0));
		const void *data;
		meta[k] = *cns_snapshot(cns_of(who[k]), &data);
		memcpy(saved[k], data, meta[k].len);
	}
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_REMOVE, 3), 0));
	settle(1, 50);
	cr_assert(eq(int, fx_change(&F, 0, CNS_MEMBER_ADD, 5), 0));
	settle(1, 50);
	const uint32_t ids[] = {1, 2, 4, 5};
	uint64_t index = expect_members(1, 4, ids, 0x8);
	for (uint32_t k = 0; k < 2; k++) {
		uint32_t node = who[k];
		cr_assert(eq(int, fx_restart(&F, node - 1, &meta[k], saved[k]), 0));
		cr_assert(eq(u64, expect_members(node, 4, ids, 0x8), index));
		cr_assert(eq(u64, cns_applied_index(cns_of(node)), meta[k].index));
	}
	propose_entries(1, 100, 1);
	fx_run_ms(&F, 50);
	for (uint32_t k = 0; k < 2; k++)
		cr_assert(eq(u64, F.nodes[who[k] - 1].svc.sum, 115));
}

/* Goal: a snapshot written before membership changes (no prefix: all service bytes) is
 * still read, as the bootstrap set at its index; a joining node, which has no bootstrap
 * set, refuses it.
 * Method: n2 snapshots; the prefix is cut off and n2 restarts from the rest: its service
 * is restored and {1 2 3} is in effect at the snapshot's index. The same bytes refused at
 * the boot of a joining node (-EINVAL). */
Test(cns_members, legacy_snapshot_reads_as_bootstrap_set, .fini = fini)
{
	fx_init_join(&F, 3, 4, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	propose_entries(1, 1, 5);
	fx_run_ms(&F, 20);
	cr_assert(eq(int, cns_snapshot_take(cns_of(2)), 0));
	const void *data;
	struct cns_snapshot_meta meta = *cns_snapshot(cns_of(2), &data);
	static uint8_t legacy[sizeof(struct fx_svc)];
	cr_assert(eq(u64, meta.len, sizeof(struct cns_snap_prefix) + sizeof(legacy)));
	memcpy(legacy, (const uint8_t *)data + sizeof(struct cns_snap_prefix), sizeof(legacy));
	meta.len = sizeof(legacy);
	cr_assert(eq(int, fx_restart(&F, 1, &meta, legacy), 0));
	const uint32_t ids[] = {1, 2, 3};
	cr_assert(eq(u64, expect_members(2, 3, ids, 0), meta.index));
	cr_assert(eq(u64, F.nodes[1].svc.sum, 15));
	fx_run_ms(&F, 20);
	cr_assert(eq(int, fx_restart(&F, 3, &meta, legacy), -EINVAL));
}

/* Goal: cns_init refuses a log whose CONFIG entry is malformed (-EINVAL, no CHECK):
 * no member, a duplicate, node 0, a learner bit beyond the count, no voter, reserved bits,
 * a wrong length.
 * Method: n2's store holds the bootstrap entry then one bad CONFIG entry; restart it. */
Test(cns_members, init_refuses_malformed_config_entry, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	struct cns_config_entry bad[7];
	memset(bad, 0, sizeof(bad));
	bad[1].member_count = 2; /* duplicate */
	bad[1].members[0] = 1;
	bad[1].members[1] = 1;
	bad[2].member_count = 2; /* node 0 */
	bad[2].members[0] = 1;
	bad[3].member_count = 1; /* learner bit beyond the count */
	bad[3].members[0] = 1;
	bad[3].learners = 0x2;
	bad[4].member_count = 1; /* no voter */
	bad[4].members[0] = 1;
	bad[4].learners = 0x1;
	bad[5].member_count = 1; /* reserved */
	bad[5].members[0] = 1;
	bad[5].reserved = 1;
	bad[6].member_count = 1; /* wrong length, below */
	bad[6].members[0] = 1;
	struct cns_config_entry good;
	memset(&good, 0, sizeof(good));
	good.member_count = 3;
	for (uint32_t i = 0; i < 3; i++)
		good.members[i] = i + 1;
	for (uint32_t k = 0; k < 7; k++) {
		struct fx_node *nd = &F.nodes[1];
		cr_assert(eq(int, cns_memlog_init(&nd->log, nd->logmem, &F.ll), 0));
		struct wire_entry_hdr h;
		memset(&h, 0, sizeof(h));
		h.term = 1;
		h.kind = CNS_ENTRY_CONFIG;
		h.data_len = sizeof(good);
		cr_assert(eq(int, cns_memlog_ops.append(nd->log, 1, &h, &good), 0));
		h.data_len = k == 6 ? 24 : sizeof(bad[k]);
		cr_assert(eq(int, cns_memlog_ops.append(nd->log, 2, &h, &bad[k]), 0));
		nd->c->env.log = nd->log;
		cr_assert(eq(int, fx_restart(&F, 1, NULL, NULL), -EINVAL), "case %u accepted", k);
	}
	struct fx_node *nd = &F.nodes[1];
	cr_assert(eq(int, cns_memlog_init(&nd->log, nd->logmem, &F.ll), 0));
	cr_assert(eq(int, fx_restart(&F, 1, NULL, NULL), 0));
}

/* Goal: an AppendEntries carrying a malformed CONFIG entry is counted MALFORMED and the
 * entry is not appended (the configuration in effect does not move); a good one is.
 * Method: hand follower n2 one-entry AppendEntries from leader n1 with bad configuration
 * data, then a good one. */
static void
send_config_entry(struct cns *c, const struct cns_config_entry *ce)
{
	struct {
		struct wire_append_entries ae;
		struct wire_entry_hdr e;
		struct cns_config_entry ce;
	} m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.ae.hdr, WIRE_APPEND_ENTRIES, F.cfg.shard);
	m.ae.hdr.length = sizeof(m);
	m.ae.term = cns_term(c);
	m.ae.prev_index = cns_last_index(c);
	m.ae.prev_term = cns_last_term(c);
	m.ae.leader = 1;
	m.ae.entry_count = 1;
	m.ae.tail_len = sizeof(m.e) + sizeof(m.ce);
	m.e.term = cns_term(c);
	m.e.time_ns = cns_log_entry(c, cns_last_index(c))->time_ns + 1;
	m.e.kind = CNS_ENTRY_CONFIG;
	m.e.data_len = sizeof(m.ce);
	m.ce = *ce;
	cr_assert(eq(int, cns_step(c, fx_local(&F, 1), &m.ae.hdr), 0));
}

Test(cns_members, malformed_config_entry_from_the_wire, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	struct cns *c = cns_of(2);
	uint64_t last = cns_last_index(c);
	struct cns_config_entry ce;
	memset(&ce, 0, sizeof(ce));
	send_config_entry(c, &ce); /* no member */
	ce.member_count = 3;
	ce.members[0] = 1;
	ce.members[1] = 2;
	ce.members[2] = 2; /* duplicate */
	send_config_entry(c, &ce);
	ce.members[2] = 3;
	ce.learners = 0x7; /* no voter */
	send_config_entry(c, &ce);
	cr_assert(eq(u64, cns_counter(c, CNS_C_MALFORMED), 3));
	cr_assert(eq(u64, cns_last_index(c), last));
	cr_assert(eq(u64, cns_members(c, NULL), 1));
	ce.learners = 0x4;
	send_config_entry(c, &ce);
	cr_assert(eq(u64, cns_last_index(c), last + 1));
	cr_assert(cns_is_learner(c, 3), "in effect from its append");
	F.q_len = 0; /* drop the replies to the fake leader message */
}

/* Goal: a joining node's configuration is validated: CNS_CFG_JOIN with self among the
 * members, unknown flags, and a bootstrap set of 0 or an even count without the flag are
 * refused; a joining node may name the members it knows of. */
Test(cns_members, join_config_validated, .fini = fini)
{
	fx_init(&F, 1, CNS_DURABLE_MEMORY);
	struct fx_node *nd = &F.nodes[0];
	struct cns_env env = nd->c->env;
	struct cns_boot boot = {0};
	struct cns *c;
	struct cns_config cfg = F.cfg;
	cfg.flags = CNS_CFG_JOIN; /* self (1) among the members */
	cr_assert(eq(int, cns_init(&c, nd->mem, &F.lim, &cfg, &env, &boot), -EINVAL));
	cfg.flags = 0x2;
	cr_assert(eq(int, cns_init(&c, nd->mem, &F.lim, &cfg, &env, &boot), -EINVAL));
	cfg.flags = 0;
	cfg.member_count = 0;
	cr_assert(eq(int, cns_init(&c, nd->mem, &F.lim, &cfg, &env, &boot), -EINVAL));
	cfg.self = 4;
	cfg.flags = CNS_CFG_JOIN;
	cr_assert(eq(int, cns_init(&c, nd->mem, &F.lim, &cfg, &env, &boot), 0));
	cr_assert(eq(u64, cns_members(c, NULL), 0));
	cr_assert(not(cns_is_voter(c, 4)));
	cr_assert(not(cns_is_learner(c, 4)));
	cfg.member_count = 2;
	cfg.members[1] = 2;
	cr_assert(eq(int, cns_init(&c, nd->mem, &F.lim, &cfg, &env, &boot), 0));
	cr_assert(eq(int, cns_init(&nd->c, nd->mem, &F.lim, &F.cfg, &env, &boot), 0));
}

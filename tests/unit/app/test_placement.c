/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leadership placement's pure part (app/app_placement.h): the policies' preferred nodes,
 * the leader's record of caught-up members, and one check's verdict. No DPDK: the file is
 * compiled in alone. The shard lcore's use of it is e2e_placement's.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "app/app_placement.h"

#define MS 1000000ull

/* Goal: spread is the (shard mod n)-th node of the sorted members, whatever order the file
 * lists them in, so every node computes the same one.
 * Method: three orders of {1,2,3}, shards 0..5; five members; one member. */
Test(app_place, spread_sorted_rotated)
{
	const uint32_t a[3] = { 1, 2, 3 }, b[3] = { 3, 1, 2 }, c[3] = { 2, 3, 1 };
	const uint32_t want[6] = { 1, 2, 3, 1, 2, 3 };
	for (uint16_t shard = 0; shard < 6; shard++) {
		cr_assert(eq(u32, app_place_spread(shard, a, 3), want[shard]));
		cr_assert(eq(u32, app_place_spread(shard, b, 3), want[shard]));
		cr_assert(eq(u32, app_place_spread(shard, c, 3), want[shard]));
	}
	/* OMS 1-2 and ME 3-4 on three nodes: 2, 3, 1, 2 (no node leads more than two). */
	cr_assert(eq(u32, app_place_spread(1, a, 3), 2));
	cr_assert(eq(u32, app_place_spread(4, a, 3), 2));
	const uint32_t five[5] = { 50, 10, 40, 20, 30 };
	cr_assert(eq(u32, app_place_spread(7, five, 5), 30)); /* 7 mod 5 = 2: 10,20,[30] */
	const uint32_t one[1] = { 9 };
	cr_assert(eq(u32, app_place_spread(63, one, 1), 9));
}

/* Goal: colocate picks the node whose ME leaderships weigh most, unknown leaders and
 * weightless shards aside; a tie keeps the current leader, else the lowest node id. */
Test(app_place, colocate_weights_and_ties)
{
	struct app_place_me one[1] = { { .leader = 3, .weight = 1 } };
	cr_assert(eq(u32, app_place_colocate(one, 1, 1), 3));
	struct app_place_me unknown[1] = { { .leader = 0, .weight = 5 } };
	cr_assert(eq(u32, app_place_colocate(unknown, 1, 1), 0));
	cr_assert(eq(u32, app_place_colocate(NULL, 0, 1), 0));
	/* ME 3 (two symbols) on node 2, ME 4 (one symbol) on node 3: node 2. */
	struct app_place_me two[2] = { { 2, 2 }, { 3, 1 } };
	cr_assert(eq(u32, app_place_colocate(two, 2, 3), 2));
	/* One symbol each on nodes 3 and 2: a tie; the current leader stays when tied. */
	struct app_place_me tie[2] = { { 3, 1 }, { 2, 1 } };
	cr_assert(eq(u32, app_place_colocate(tie, 2, 3), 3));
	cr_assert(eq(u32, app_place_colocate(tie, 2, 2), 2));
	cr_assert(eq(u32, app_place_colocate(tie, 2, 1), 2)); /* not tied: the lowest */
	cr_assert(eq(u32, app_place_colocate(tie, 2, 0), 2));
	/* Two ME shards led by the same node add up against a heavier single one. */
	struct app_place_me sum[3] = { { 1, 1 }, { 1, 1 }, { 2, 1 } };
	cr_assert(eq(u32, app_place_colocate(sum, 3, 2), 1));
	struct app_place_me zero[2] = { { 1, 0 }, { 2, 1 } };
	cr_assert(eq(u32, app_place_colocate(zero, 2, 1), 2));
}

/* Goal: each policy builds the ranking the docs say: none nothing; spread one node; prefer
 * the list in order; colocate the ME leaders' node for an OMS shard and the list for an ME
 * shard. */
Test(app_place, rank_per_policy)
{
	const uint32_t members[3] = { 3, 1, 2 }, pref[2] = { 3, 1 };
	struct app_place_in in = {
		.shard = 2, .is_oms = true, .members = members, .member_count = 3,
		.pref = pref, .pref_count = 2, .colocate_node = 1,
	};
	struct app_place_rank r;
	in.policy = APP_PLACE_NONE;
	app_place_rank_build(&in, &r);
	cr_assert(eq(u32, r.count, 0));
	in.policy = APP_PLACE_SPREAD;
	app_place_rank_build(&in, &r);
	cr_assert(eq(u32, r.count, 1));
	cr_assert(eq(u32, r.nodes[0], 3));
	in.policy = APP_PLACE_PREFER;
	app_place_rank_build(&in, &r);
	cr_assert(eq(u32, r.count, 2));
	cr_assert(eq(u32, r.nodes[0], 3));
	cr_assert(eq(u32, r.nodes[1], 1));
	in.policy = APP_PLACE_COLOCATE;
	app_place_rank_build(&in, &r);
	cr_assert(eq(u32, r.count, 1));
	cr_assert(eq(u32, r.nodes[0], 1));
	in.colocate_node = 0; /* no ME leader known */
	app_place_rank_build(&in, &r);
	cr_assert(eq(u32, r.count, 0));
	in.is_oms = false;
	app_place_rank_build(&in, &r);
	cr_assert(eq(u32, r.count, 2));
	cr_assert(eq(u32, r.nodes[0], 3));
}

/* Goal: the policy names round-trip and anything else is refused. */
Test(app_place, policy_names)
{
	enum app_place_policy p;
	for (int i = APP_PLACE_NONE; i <= APP_PLACE_PREFER; i++) {
		cr_assert(eq(int, app_place_policy_parse(app_place_policy_name(i), &p), 0));
		cr_assert(eq(int, p, i));
	}
	cr_assert(eq(int, app_place_policy_parse("spreads", &p), -EINVAL));
	cr_assert(eq(str, (char *)app_place_verdict_name(APP_PLACE_V_SETTLING), "settling"));
}

/* A leader (node 1) with followers 2 and 3 (voters unless said otherwise). */
struct leader {
	struct app_place_track t;
	struct app_place_member m[2];
	uint64_t last;
	uint64_t now;
};

static void
leader_init(struct leader *l)
{
	memset(l, 0, sizeof(*l));
	app_place_track_reset(&l->t);
	l->m[0] = (struct app_place_member){ .node = 2, .voter = true, .match = 100 };
	l->m[1] = (struct app_place_member){ .node = 3, .voter = true, .match = 100 };
	l->last = 100;
	l->now = 1000 * MS;
}

/* One check every 100 ms: the log grows by `grow` (tick entries) and each live follower
 * (alive[i]) follows it; a dead one's match stays. */
static enum app_place_verdict
step(struct leader *l, const struct app_place_rank *r, uint64_t grow, const bool alive[2],
     uint32_t *target)
{
	l->now += 100 * MS;
	l->last += grow;
	for (int i = 0; i < 2; i++)
		if (alive[i])
			l->m[i].match = l->last;
	app_place_observe(&l->t, l->m, 2, l->last, APP_PLACE_LAG_MAX, l->now);
	return app_place_decide(&l->t, r, 1, l->now, 500 * MS, target);
}

/* Goal: a better node moves leadership only once it has been caught up and heard for
 * settle_ns; before that the verdict is SETTLING, and the leader that is the best is
 * PLACED. Method: a spread rank of node 2; checks every 100 ms, settle 500 ms. */
Test(app_place, settle_then_move)
{
	struct leader l;
	leader_init(&l);
	const struct app_place_rank r = { .count = 1, .nodes = { 2 } };
	const bool both[2] = { true, true };
	uint32_t target = 99;
	/* The first check only records the match indexes: nothing heard yet. */
	cr_assert(eq(int, step(&l, &r, 10, both, &target), APP_PLACE_V_BEHIND));
	cr_assert(eq(u32, target, 0));
	/* Heard from the second check on: settling for 500 ms (checks 2..6), then move. */
	for (int i = 0; i < 5; i++)
		cr_assert(eq(int, step(&l, &r, 10, both, &target), APP_PLACE_V_SETTLING), "i=%d", i);
	cr_assert(eq(int, step(&l, &r, 10, both, &target), APP_PLACE_V_MOVE));
	cr_assert(eq(u32, target, 2));
	/* After a transfer attempt the target must settle again. */
	app_place_forget(&l.t, 2);
	cr_assert(eq(int, step(&l, &r, 10, both, &target), APP_PLACE_V_SETTLING));
	/* Node 1 leading and preferred: placed. */
	const struct app_place_rank self = { .count = 1, .nodes = { 1 } };
	cr_assert(eq(int, app_place_decide(&l.t, &self, 1, l.now, 500 * MS, &target),
		     APP_PLACE_V_PLACED));
	cr_assert(eq(u32, target, 0));
	const struct app_place_rank none = { .count = 0 };
	cr_assert(eq(int, app_place_decide(&l.t, &none, 1, l.now, 500 * MS, &target),
		     APP_PLACE_V_OFF));
}

/* Goal: a dead node is never chosen even while its match index is within the lag bound
 * (it is not heard: its match stops moving), and a flapping node restarts its settle
 * time every time it drops out, so it cannot pull leadership back and forth. */
Test(app_place, dead_and_flapping)
{
	struct leader l;
	leader_init(&l);
	const struct app_place_rank r = { .count = 1, .nodes = { 2 } };
	const bool both[2] = { true, true }, dead2[2] = { false, true };
	uint32_t target;
	for (int i = 0; i < 4; i++)
		step(&l, &r, 5, both, &target);
	cr_assert(eq(int, step(&l, &r, 5, both, &target), APP_PLACE_V_SETTLING));
	/* Node 2 dies: 5 entries behind is well within the lag bound, but not heard. */
	cr_assert(eq(int, step(&l, &r, 5, dead2, &target), APP_PLACE_V_BEHIND));
	for (int i = 0; i < 10; i++)
		cr_assert(eq(int, step(&l, &r, 5, dead2, &target), APP_PLACE_V_BEHIND));
	/* Back and caught up: the settle time starts again from its return. */
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 4; i++)
			cr_assert(eq(int, step(&l, &r, 5, both, &target), APP_PLACE_V_SETTLING));
		cr_assert(eq(int, step(&l, &r, 5, dead2, &target), APP_PLACE_V_BEHIND));
	}
	for (int i = 0; i < 5; i++)
		cr_assert(eq(int, step(&l, &r, 5, both, &target), APP_PLACE_V_SETTLING));
	cr_assert(eq(int, step(&l, &r, 5, both, &target), APP_PLACE_V_MOVE));
	cr_assert(eq(u32, target, 2));
}

/* Goal: a node more than APP_PLACE_LAG_MAX behind is passed over even while its match
 * moves (catching up); one the leader no longer knows (match UINT64_MAX) too. */
Test(app_place, behind_by_more_than_lag)
{
	struct leader l;
	leader_init(&l);
	const struct app_place_rank r = { .count = 1, .nodes = { 2 } };
	const bool only3[2] = { false, true };
	uint32_t target;
	for (int i = 0; i < 10; i++) {
		l.m[0].match += 10; /* catching up by 10 while the log grows by 100 */
		cr_assert(eq(int, step(&l, &r, 100, only3, &target), APP_PLACE_V_BEHIND));
	}
	l.m[0].match = UINT64_MAX;
	cr_assert(eq(int, step(&l, &r, 1, only3, &target), APP_PLACE_V_BEHIND));
}

/* Goal: a preferred node that is a learner, or not in the configuration at all, is never
 * a target (NOT_VOTER), and the next node of the list is taken instead. */
Test(app_place, not_voter_passed_over)
{
	struct leader l;
	leader_init(&l);
	l.m[0].voter = false; /* node 2: a learner */
	const struct app_place_rank r = { .count = 3, .nodes = { 2, 3, 1 } };
	const bool both[2] = { true, true };
	uint32_t target;
	step(&l, &r, 10, both, &target);
	for (int i = 0; i < 5; i++)
		cr_assert(eq(int, step(&l, &r, 10, both, &target), APP_PLACE_V_SETTLING));
	cr_assert(eq(int, step(&l, &r, 10, both, &target), APP_PLACE_V_MOVE));
	cr_assert(eq(u32, target, 3));
	const struct app_place_rank gone = { .count = 1, .nodes = { 7 } };
	cr_assert(eq(int, app_place_decide(&l.t, &gone, 1, l.now, 500 * MS, &target),
		     APP_PLACE_V_NOT_VOTER));
}

/* Goal: an ordered list waits for its best node rather than moving twice, falls back to the
 * next one when the best is down, and a leader that is the best available stays (with the
 * reason the better one was passed over). Method: prefer 2,3,1; node 1 leads. */
Test(app_place, prefer_order)
{
	struct leader l;
	leader_init(&l);
	const struct app_place_rank r = { .count = 3, .nodes = { 2, 3, 1 } };
	const bool both[2] = { true, true }, dead2[2] = { false, true }, dead23[2] = { false, false };
	uint32_t target;
	/* Both settle together: the best (2) is taken. */
	for (int i = 0; i < 6; i++)
		step(&l, &r, 10, both, &target);
	cr_assert(eq(int, step(&l, &r, 10, both, &target), APP_PLACE_V_MOVE));
	cr_assert(eq(u32, target, 2));
	/* Node 3 settled, node 2 only settling: wait for 2. */
	app_place_forget(&l.t, 2);
	cr_assert(eq(int, step(&l, &r, 10, both, &target), APP_PLACE_V_SETTLING));
	cr_assert(eq(u32, target, 0));
	/* Node 2 down: node 3 (settled) is taken. */
	cr_assert(eq(int, step(&l, &r, 10, dead2, &target), APP_PLACE_V_MOVE));
	cr_assert(eq(u32, target, 3));
	/* Both down: node 1 (third) stays, the best's reason given. */
	cr_assert(eq(int, step(&l, &r, 10, dead23, &target), APP_PLACE_V_BEHIND));
	cr_assert(eq(u32, target, 0));
	/* Node 3 leading with 2 down: it stays (nothing better is available). */
	cr_assert(eq(int, app_place_decide(&l.t, &r, 3, l.now, 500 * MS, &target),
		     APP_PLACE_V_BEHIND));
	cr_assert(eq(u32, target, 0));
}

/* Goal: the record follows the configuration: a member removed is forgotten, one added
 * starts unheard; a reset forgets everything (a new term). */
Test(app_place, track_follows_members)
{
	struct leader l;
	leader_init(&l);
	const struct app_place_rank r = { .count = 1, .nodes = { 3 } };
	const bool both[2] = { true, true };
	uint32_t target;
	for (int i = 0; i < 3; i++)
		step(&l, &r, 10, both, &target);
	cr_assert(eq(u32, l.t.count, 2));
	cr_assert(ne(u64, l.t.ok_since_ns[1], 0));
	/* Node 3 removed: observed without it. */
	l.now += 100 * MS;
	app_place_observe(&l.t, l.m, 1, l.last, APP_PLACE_LAG_MAX, l.now);
	cr_assert(eq(u32, l.t.count, 1));
	cr_assert(eq(int, app_place_decide(&l.t, &r, 1, l.now, 500 * MS, &target),
		     APP_PLACE_V_NOT_VOTER));
	/* Added back: unheard at its first check. */
	cr_assert(eq(int, step(&l, &r, 10, both, &target), APP_PLACE_V_BEHIND));
	cr_assert(eq(int, step(&l, &r, 10, both, &target), APP_PLACE_V_SETTLING));
	app_place_track_reset(&l.t);
	cr_assert(eq(u32, l.t.count, 0));
	cr_assert(eq(int, app_place_decide(&l.t, &r, 1, l.now, 500 * MS, &target),
		     APP_PLACE_V_NOT_VOTER));
}

/* Goal: the pure part refuses what its callers must never pass (CHECK, always on). */
Test(app_place, spread_needs_members, .signal = SIGABRT)
{
	app_place_spread(1, NULL, 0);
}

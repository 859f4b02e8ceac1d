/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admin forwarding's pure parts (app/app_fwd.h): the dedup table a shard member keeps of
 * forwarded commands, the verdict a leader takes on a (re-)sent command, the origin's
 * re-send and hint-following policy, and a control request's verdict with the shards that
 * applied their command.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/app_fwd.h"
#include "common/wire.h"

static struct app_fwd_seen_table *tab;

static void
setup(void)
{
	tab = calloc(1, sizeof(*tab));
	cr_assert(not(eq(ptr, tab, NULL)));
}

static void
teardown(void)
{
	free(tab);
}

/* Goal: a command is known by (origin, fwd_id) only: the same id from another origin is
 * another command. Method: get two entries differing in origin, find each, miss a third. */
Test(app_fwd_seen, keyed_by_origin_and_id, .init = setup, .fini = teardown)
{
	struct app_fwd_seen *a = app_fwd_seen_get(tab, 1, 77);
	struct app_fwd_seen *b = app_fwd_seen_get(tab, 2, 77);
	cr_assert(not(eq(ptr, a, b)));
	a->state = APP_FWD_PENDING;
	b->state = APP_FWD_DONE;
	cr_assert(eq(ptr, app_fwd_seen_find(tab, 1, 77), a));
	cr_assert(eq(ptr, app_fwd_seen_find(tab, 2, 77), b));
	cr_assert(eq(ptr, app_fwd_seen_find(tab, 3, 77), NULL));
	cr_assert(eq(ptr, app_fwd_seen_find(tab, 1, 78), NULL));
	cr_assert(eq(ptr, app_fwd_seen_get(tab, 1, 77), a), "get finds, never duplicates");
	cr_assert(eq(ptr, app_fwd_seen_find(tab, 0, 0), NULL), "origin 0 is nobody");
}

/* Goal: the table is a ring: the oldest command is forgotten first, the newest are kept.
 * Method: fill it and one more; the first is gone, the second and the last are there. */
Test(app_fwd_seen, ring_forgets_oldest, .init = setup, .fini = teardown)
{
	for (uint64_t id = 1; id <= APP_FWD_SEEN_MAX + 1; id++)
		app_fwd_seen_get(tab, 5, id)->state = APP_FWD_DONE;
	cr_assert(eq(ptr, app_fwd_seen_find(tab, 5, 1), NULL));
	cr_assert(not(eq(ptr, app_fwd_seen_find(tab, 5, 2), NULL)));
	cr_assert(not(eq(ptr, app_fwd_seen_find(tab, 5, APP_FWD_SEEN_MAX + 1), NULL)));
}

/* Goal: exactly once: a re-send is proposed again only when its earlier proposal cannot
 * commit any more. Method: each state against the current term. */
Test(app_fwd_seen, verdict, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, app_fwd_seen_verdict(NULL, 3), APP_FWD_PROPOSE), "unknown");
	struct app_fwd_seen *e = app_fwd_seen_get(tab, 1, 9);
	cr_assert(eq(int, app_fwd_seen_verdict(e, 3), APP_FWD_PROPOSE), "made, never proposed");
	e->state = APP_FWD_PENDING;
	e->term = 3;
	cr_assert(eq(int, app_fwd_seen_verdict(e, 3), APP_FWD_WAIT), "pending in this term");
	cr_assert(eq(int, app_fwd_seen_verdict(e, 4), APP_FWD_PROPOSE),
		  "pending in an earlier term, not applied by a current leader: lost");
	e->state = APP_FWD_DONE;
	cr_assert(eq(int, app_fwd_seen_verdict(e, 4), APP_FWD_ANSWER), "applied: answered");
	cr_assert(eq(int, app_fwd_seen_verdict(e, 3), APP_FWD_ANSWER));
}

/* Goal: a membership change the configuration already shows is recognised, so a repeat or a
 * re-send a new leader never saw answers ok and is not made twice; anything else is made
 * (or refused by consensus). Method: each op against each role of the node (none, learner,
 * voter), and an op out of range. */
Test(app_fwd_member, effected)
{
	/* role: 0 not a member, 1 learner, 2 voter */
	static const bool want[3][3] = {
		[0] = {false, true, true},   /* ADD: already a member */
		[1] = {false, false, true},  /* PROMOTE: already a voter */
		[2] = {true, false, false},  /* REMOVE: already gone */
	};
	for (uint32_t op = WIRE_MEMBER_ADD; op <= WIRE_MEMBER_REMOVE; op++)
		for (int role = 0; role < 3; role++)
			cr_assert(eq(int, app_fwd_member_effected(op, role == 2, role == 1),
				     want[op - 1][role]), "op %u role %d", op, role);
	cr_assert(not(app_fwd_member_effected(0, false, false)));
	cr_assert(not(app_fwd_member_effected(WIRE_MEMBER_REMOVE + 1, false, false)));
}

/* Goal: a forwarded transfer is answered OK only once its target is seen leading, BUSY only
 * when this member still leads after consensus must have given it up (or leads again in a
 * later term), and otherwise waits or is forgotten for the leader a re-send reaches.
 * Method: node 1 leads and transfers to node 3; step who leads and the clock. */
Test(app_fwd_transfer, state)
{
	struct app_fwd_transfer_view v = {.to = 3, .leader = 1, .leads = true, .same_term = true,
					  .now_ns = 100, .abandon_ns = 400, .forget_ns = 900};
	cr_assert(eq(int, app_fwd_transfer_state(&v), APP_FWD_TRANSFER_WAIT), "running");
	v.now_ns = 400;
	cr_assert(eq(int, app_fwd_transfer_state(&v), APP_FWD_TRANSFER_FAILED), "given up");
	v.now_ns = 100;
	v.same_term = false;
	cr_assert(eq(int, app_fwd_transfer_state(&v), APP_FWD_TRANSFER_FAILED), "led again");
	/* Deposed by the vote `to` asked for: nobody known yet, then `to`. */
	v.leads = false;
	v.leader = 0;
	cr_assert(eq(int, app_fwd_transfer_state(&v), APP_FWD_TRANSFER_WAIT), "electing");
	v.now_ns = 500;
	cr_assert(eq(int, app_fwd_transfer_state(&v), APP_FWD_TRANSFER_WAIT),
		  "electing past the abandon time");
	v.leader = 3;
	cr_assert(eq(int, app_fwd_transfer_state(&v), APP_FWD_TRANSFER_DONE), "to leads");
	v.now_ns = 5000;
	cr_assert(eq(int, app_fwd_transfer_state(&v), APP_FWD_TRANSFER_DONE), "to leads, late");
	v.leader = 2;
	cr_assert(eq(int, app_fwd_transfer_state(&v), APP_FWD_TRANSFER_FORGET), "another won");
	v.leader = 0;
	v.now_ns = 900;
	cr_assert(eq(int, app_fwd_transfer_state(&v), APP_FWD_TRANSFER_FORGET), "none for long");
}

/* Goal: the first send goes out at once to the guess, re-sends only every
 * APP_FWD_RESEND_NS, nothing goes out while no leader is known, and a guess that stays
 * silent is reported for rotation. Method: step the clock. */
Test(app_fwd_try, resend_schedule)
{
	struct app_fwd_try t = {.id = 1};
	bool rot;
	cr_assert(eq(int, app_fwd_due(&t, 1000, 0, &rot), APP_FWD_ACT_WAIT), "no leader known");
	cr_assert(eq(int, app_fwd_due(&t, 1001, 2, &rot), APP_FWD_ACT_WAIT), "not due yet");
	uint64_t now = 1000 + APP_FWD_RESEND_NS;
	cr_assert(eq(int, app_fwd_due(&t, now, 2, &rot), APP_FWD_ACT_SEND));
	cr_assert(eq(u32, t.node, 2));
	cr_assert(not(rot));
	cr_assert(eq(int, app_fwd_due(&t, now + 1, 2, &rot), APP_FWD_ACT_WAIT));
	now += APP_FWD_RESEND_NS;
	cr_assert(eq(int, app_fwd_due(&t, now, 2, &rot), APP_FWD_ACT_SEND));
	cr_assert(not(rot), "one silence is a lost frame");
	now += APP_FWD_RESEND_NS;
	cr_assert(eq(int, app_fwd_due(&t, now, 2, &rot), APP_FWD_ACT_SEND));
	cr_assert(rot, "silent %u times: try another member", APP_FWD_SILENT_MAX);
	cr_assert(eq(u32, t.sends, 3));

	struct app_fwd_try f = {.id = 2};
	cr_assert(eq(int, app_fwd_due(&f, 5, 3, &rot), APP_FWD_ACT_SEND), "first: at once");
}

/* Goal: NOT_LEADER hints are followed at once, a few times, then the command gives up
 * with not_leader; an answer without a hint (an election) waits for the next resend.
 * Method: a chain of hints. */
Test(app_fwd_try, hints_followed_then_give_up)
{
	struct app_fwd_try t = {.id = 1, .node = 1};
	cr_assert(eq(int, app_fwd_not_leader(&t, 10, 1, 0), APP_FWD_ACT_WAIT), "no hint");
	cr_assert(eq(u64, t.next_ns, 10 + APP_FWD_RESEND_NS));
	cr_assert(eq(int, app_fwd_not_leader(&t, 10, 1, 1), APP_FWD_ACT_WAIT),
		  "a hint naming the refuser is none");
	uint32_t from = 1;
	for (uint32_t i = 0; i < APP_FWD_HOPS_MAX; i++) {
		uint32_t hint = from % 3 + 1;
		cr_assert(eq(int, app_fwd_not_leader(&t, 20, from, hint), APP_FWD_ACT_SEND));
		cr_assert(eq(u32, t.node, hint));
		from = hint;
	}
	cr_assert(eq(int, app_fwd_not_leader(&t, 30, from, from % 3 + 1), APP_FWD_ACT_GIVE_UP));
	app_fwd_busy(&t, 40);
	cr_assert(eq(u64, t.next_ns, 40 + APP_FWD_RESEND_NS));
}

/* Goal: the request's verdict names the first command not ok and lists the shards that
 * applied theirs, each once; users evict/migrate accept NOT_FOUND elsewhere but need one
 * ok. Method: mixed outcomes. */
Test(app_fwd_verdict, first_bad_and_applied)
{
	struct app_fwd_outcome o[] = {
		{.shard = 3, .status = APP_CMD_OK},
		{.shard = 1, .status = APP_CMD_TIMEOUT},
		{.shard = 2, .status = APP_CMD_OK},
		{.shard = 4, .status = APP_CMD_REJECTED, .reason = WIRE_REASON_HALTED},
		{.shard = 3, .status = APP_CMD_OK},
	};
	uint16_t applied[8];
	uint32_t n;
	cr_assert(eq(int, app_fwd_verdict(o, 5, false, applied, 8, &n), 1));
	cr_assert(eq(u32, n, 2));
	cr_assert(eq(u16, applied[0], 3));
	cr_assert(eq(u16, applied[1], 2));
	cr_assert(eq(int, app_fwd_verdict(o, 1, false, applied, 8, &n), -1), "all ok");

	struct app_fwd_outcome any[] = {
		{.shard = 1, .status = APP_CMD_REJECTED, .reason = WIRE_REASON_NOT_FOUND},
		{.shard = 2, .status = APP_CMD_OK},
	};
	cr_assert(eq(int, app_fwd_verdict(any, 2, true, applied, 8, &n), -1));
	cr_assert(eq(int, app_fwd_verdict(any, 2, false, applied, 8, &n), 0));
	cr_assert(eq(int, app_fwd_verdict(any, 1, true, applied, 8, &n), 0),
		  "not found anywhere");
	cr_assert(eq(u32, n, 0));
	cr_assert(eq(int, app_fwd_verdict(o, 5, false, applied, 1, &n), 1));
	cr_assert(eq(u32, n, 1), "capped");
}

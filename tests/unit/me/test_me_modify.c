/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me modify and control: cancel, amend-down, cancel-replace, kill-switches, halt/resume.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "me_fixture.h"

#define B WIRE_SIDE_BUY
#define S WIRE_SIDE_SELL

TestSuite(me_modify, .init = fx_setup, .fini = fx_fini);

/* Goal: cancel emits CANCELLED(USER, qty = leaves, contra = req) on the target, which says
 * the order is done (WIRE_EV_F_DONE: no DONE event of its own). */
Test(me_modify, cancel)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_reset();
	fx_cancel(1, 2, 1);
	cr_assert_eq(fx_events(), 1);
	const struct wire_me_event *c = fx_ev(0);
	cr_assert_eq(c->event, WIRE_EV_CANCELLED);
	cr_assert(wire_oid_eq(c->oid, fx_oid(1, 1)));
	cr_assert(wire_oid_eq(c->contra, fx_oid(1, 2)));
	cr_assert_eq(c->cause, WIRE_CAUSE_USER);
	cr_assert_eq(c->qty, 5);
	cr_assert_eq(c->hdr.flags, WIRE_EV_F_DONE);
	cr_assert_eq(fx_best(B), 0);
	/* The request is deduplicated: a re-send answers ME_RESULT and changes nothing. */
	fx_reset();
	fx_cancel(1, 2, 1);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(fx_result()->known, 1);
	cr_assert_eq(fx_result()->final, 1);
}

/* Goal: a cancel may not touch another user's order (ids carry the user). */
Test(me_modify, cancel_other_user_refused)
{
	fx_gtc(1, 1, B, 100, 5);
	struct wire_modify m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_CANCEL_TO_ME, 0);
	m.req = fx_oid(2, 1);
	m.target = fx_oid(1, 1);
	m.symbol = FX_SYM;
	fx_apply(&m);
	cr_assert_eq(fx_reject_reason(2, 1), WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(fx_depth_qty(B, 100), 5);
}

/* Goal: amend-down keeps time priority. Method: two bids at 100, amend the first down, sell
 * into the level: the amended order still fills first. */
Test(me_modify, amend_keeps_priority)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(2, 1, B, 100, 5);
	fx_reset();
	fx_amend(1, 2, 1, 3);
	const struct wire_me_event *a = fx_find(1, 1, WIRE_EV_AMENDED, 0);
	cr_assert(a);
	cr_assert_eq(a->qty, 3);
	cr_assert(wire_oid_eq(a->contra, fx_oid(1, 2)));
	cr_assert_eq(fx_depth_qty(B, 100), 8);
	fx_reset();
	fx_gtc(3, 1, S, 100, 4);
	cr_assert_eq(fx_find(3, 1, WIRE_EV_FILL, 0)->contra_user, 1);
	cr_assert_eq(fx_find(3, 1, WIRE_EV_FILL, 0)->qty, 3);
	cr_assert_eq(fx_find(3, 1, WIRE_EV_FILL, 1)->contra_user, 2);
}

/* Goal: amend counts total quantity: after a partial fill, the new total must exceed what
 * filled to stay live; amending to what filled ends the order (AMENDED 0, DONE). */
Test(me_modify, amend_after_partial_fill)
{
	fx_gtc(1, 1, B, 100, 10);
	fx_gtc(2, 1, S, 100, 4);
	fx_reset();
	fx_amend(1, 2, 1, 6); /* total 6, filled 4 → leaves 2 */
	cr_assert_eq(fx_find(1, 1, WIRE_EV_AMENDED, 0)->qty, 2);
	cr_assert_eq(fx_depth_qty(B, 100), 2);
	fx_reset();
	fx_amend(1, 3, 1, 4);
	cr_assert_eq(fx_find(1, 1, WIRE_EV_AMENDED, 0)->qty, 0);
	cr_assert_eq(fx_done(1, 1), 1);
	cr_assert_eq(fx_best(B), 0);
}

/* Goal: OFF_LOT for an amend to a quantity off the lot. Method: lot 5, amend 20 → 12. */
Test(me_modify, amend_off_lot)
{
	cr_assert_eq(fx_config(2, 10, 5, 5, 0, 1, 0, 0, 0), WIRE_REASON_NONE);
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 20);
	s.symbol = 2;
	fx_submit(&s);
	struct wire_modify m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_AMEND_TO_ME, 0);
	m.req = fx_oid(1, 2);
	m.target = fx_oid(1, 1);
	m.symbol = 2;
	m.qty = 12;
	fx_apply(&m);
	cr_assert_eq(fx_reject_reason(1, 2), WIRE_REASON_OFF_LOT);
}

/* Goal: cancel-replace loses priority: CANCELLED(REPLACED, done) on the old order naming the
 * new one, then the new order (id = req) enters and goes to the back of the queue. */
Test(me_modify, replace_loses_priority)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(2, 1, B, 100, 5);
	fx_reset();
	fx_replace(1, 2, 1, 100, 4);
	cr_assert_eq(fx_ev(0)->event, WIRE_EV_CANCELLED);
	cr_assert_eq(fx_ev(0)->cause, WIRE_CAUSE_REPLACED);
	cr_assert(wire_oid_eq(fx_ev(0)->contra, fx_oid(1, 2)));
	cr_assert_eq(fx_ev(0)->hdr.flags, WIRE_EV_F_DONE);
	cr_assert_eq(fx_events(), 2); /* and the replacement's RESTED */
	/* The replacement's first event says it was taken; the target's CANCELLED names it. */
	cr_assert_eq(fx_entered(1, 2), 1);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_RESTED, 0)->qty, 4);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_RESTED, 0)->hdr.flags, WIRE_EV_F_ENTERED);
	fx_reset();
	fx_gtc(3, 1, S, 100, 6);
	cr_assert_eq(fx_find(3, 1, WIRE_EV_FILL, 0)->contra_user, 2);
	cr_assert(wire_oid_eq(fx_find(3, 1, WIRE_EV_FILL, 1)->contra, fx_oid(1, 2)));
	/* The replacement can itself be cancelled by its id. */
	fx_cancel(1, 3, 2);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_CANCELLED, 0)->qty, 3);
}

/* Goal: a replace that crosses trades at once like a new order. */
Test(me_modify, replace_crosses)
{
	fx_gtc(1, 1, B, 90, 5);
	fx_gtc(2, 1, S, 100, 3);
	fx_reset();
	fx_replace(1, 2, 1, 100, 5);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_FILL, 0)->qty, 3);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_RESTED, 0)->qty, 2);
}

/* Goal: a replace refused on its new parameters leaves the target untouched. */
Test(me_modify, replace_refused_keeps_target)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_reset();
	fx_replace(1, 2, 1, 105, 5);
	cr_assert_eq(fx_reject_reason(1, 2), WIRE_REASON_OFF_TICK);
	cr_assert_eq(fx_events(), 1);
	cr_assert_eq(fx_depth_qty(B, 100), 5);
	/* Post-only decided after the cancel: the old order is gone, the new one REJECTED. */
	fx_limit(1, 3, B, 90, 5, WIRE_TIF_POST_ONLY);
	fx_gtc(2, 1, S, 110, 5);
	fx_reset();
	fx_replace(1, 4, 3, 110, 5);
	cr_assert_eq(fx_find(1, 3, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_REPLACED);
	cr_assert_eq(fx_find(1, 4, WIRE_EV_REJECTED, 0)->reason,
		     WIRE_REASON_POST_ONLY_WOULD_CROSS);
}

/* ---- kill-switch ---- */

TestSuite(me_kill, .init = fx_setup, .fini = fx_fini);

/* Goal: a user kill-switch cancels the user's resting orders (cause KILL_SWITCH), blocks new
 * ones with KILLED, still allows cancels, and is released. */
Test(me_kill, user)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(1, 2, S, 200, 5);
	fx_gtc(1, 3, B, 90, 5);
	fx_gtc(2, 1, B, 100, 5);
	fx_reset();
	cr_assert_eq(fx_kill(WIRE_KILL_USER, 1, 1), WIRE_REASON_NONE);
	cr_assert_eq(fx_find(1, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_KILL_SWITCH);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_KILL_SWITCH);
	cr_assert_eq(fx_find(1, 3, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_KILL_SWITCH);
	/* Oldest first. */
	cr_assert(wire_oid_eq(fx_ev(0)->oid, fx_oid(1, 1)));
	cr_assert_eq(fx_depth_qty(B, 100), 5);
	fx_gtc(1, 4, B, 100, 5);
	cr_assert_eq(fx_reject_reason(1, 4), WIRE_REASON_KILLED);
	fx_replace(1, 5, 1, 100, 1);
	cr_assert_eq(fx_reject_reason(1, 5), WIRE_REASON_TOO_LATE);
	cr_assert_eq(fx_kill(WIRE_KILL_USER, 1, 0), WIRE_REASON_NONE);
	fx_gtc(1, 6, B, 100, 5);
	cr_assert_eq(fx_count(1, 6, WIRE_EV_RESTED), 1);
}

/* Goal: a symbol kill-switch cancels the whole book and blocks new orders with KILLED. */
Test(me_kill, symbol)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(2, 1, S, 200, 5);
	fx_reset();
	cr_assert_eq(fx_kill(WIRE_KILL_SYMBOL, FX_SYM, 1), WIRE_REASON_NONE);
	cr_assert_eq(fx_find(1, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_KILL_SWITCH);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_KILL_SWITCH);
	cr_assert_eq(me_orders_resting(fx_me), 0);
	fx_gtc(3, 1, B, 100, 5);
	cr_assert_eq(fx_reject_reason(3, 1), WIRE_REASON_KILLED);
	cr_assert_eq(fx_kill(WIRE_KILL_SYMBOL, FX_SYM, 0), WIRE_REASON_NONE);
	fx_gtc(3, 2, B, 100, 5);
	cr_assert_eq(fx_count(3, 2, WIRE_EV_RESTED), 1);
}

/* ---- halt ---- */

TestSuite(me_halt, .init = fx_setup, .fini = fx_fini);

/* Goal: halted: new orders rejected HALTED, cancels and amends allowed, replace refused;
 * resume restores trading. */
Test(me_halt, halt_and_resume)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(1, 2, B, 90, 5);
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_HALTED, 0), WIRE_REASON_NONE);
	fx_gtc(2, 1, S, 100, 5);
	cr_assert_eq(fx_reject_reason(2, 1), WIRE_REASON_HALTED);
	fx_cancel(1, 3, 1);
	cr_assert_eq(fx_find(1, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_USER);
	fx_amend(1, 4, 2, 3);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_AMENDED, 0)->qty, 3);
	fx_replace(1, 5, 2, 90, 2);
	cr_assert_eq(fx_reject_reason(1, 5), WIRE_REASON_HALTED);
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_TRADING, 0), WIRE_REASON_NONE);
	fx_gtc(2, 2, S, 90, 3);
	cr_assert_eq(fx_find(2, 2, WIRE_EV_FILL, 0)->qty, 3);
}

/* Goal: a halt with cancel_resting cancels every resting order with cause HALT. */
Test(me_halt, halt_cancels_resting)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(2, 1, S, 200, 5);
	fx_reset();
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_HALTED, 1), WIRE_REASON_NONE);
	cr_assert_eq(fx_find(1, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_HALT);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_HALT);
	cr_assert_eq(fx_done(2, 1), 1);
	cr_assert_eq(me_orders_resting(fx_me), 0);
	cr_assert_eq(me_counter(fx_me, ME_C_HALT_CANCELLED), 2);
}

/* Goal: a symbol config with status HALTED halts too (without cancelling). */
Test(me_halt, config_status)
{
	fx_gtc(1, 1, B, 100, 5);
	struct wire_symbol_config c;
	memset(&c, 0, sizeof(c));
	wire_hdr_init(&c.hdr, WIRE_SYMBOL_CONFIG, 0);
	c.symbol = FX_SYM;
	c.status = WIRE_SYM_HALTED;
	c.tick = 10;
	c.lot = 1;
	c.min_qty = 1;
	c.base_unit = 1;
	fx_apply(&c);
	cr_assert_eq(fx_admin()->reason, WIRE_REASON_NONE);
	fx_gtc(2, 1, S, 100, 1);
	cr_assert_eq(fx_reject_reason(2, 1), WIRE_REASON_HALTED);
	cr_assert_eq(fx_depth_qty(B, 100), 5);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The dedup window and the bounded replay (both found by sim-system, docs/simulation.md). */
#include <criterion/criterion.h>

#include "me_fixture.h"

#define B WIRE_SIDE_BUY
#define S WIRE_SIDE_SELL
#define MS UINT64_C(1000000)

static void
setup_window(void)
{
	/* The default limits with a 100 ms dedup window. */
	fx_setup();
	struct me_limits l = fx_limits;
	fx_teardown();
	l.dedup_ttl_ns = 100 * MS;
	fx_setup_limits(&l);
}

/* Goal: a re-sent SUBMIT that arrives after the ack but inside the dedup window is answered
 * from the record, not executed again; after the window the record is released.
 * Method: an IOC that finishes at once, acked; re-submit at +50 ms (duplicate), tick to
 * +150 ms (released). */
Test(me_window, resubmit_after_ack_within_window, .init = setup_window, .fini = fx_fini)
{
	fx_limit(1, 1, B, 100, 5, WIRE_TIF_IOC); /* CANCELLED (entered, done): seq 1 */
	cr_assert_eq(fx_events(), 1);
	fx_ack(0, 1);
	cr_assert_eq(me_records_used(fx_me), 1, "kept: still inside its dedup window");
	fx_tick(fx_now + 50 * MS);
	fx_reset();
	fx_limit(1, 1, B, 100, 5, WIRE_TIF_IOC);
	cr_assert_eq(fx_events(), 0, "a late re-send must not execute again");
	cr_assert_eq(fx_result()->known, 1);
	cr_assert_eq(fx_result()->final, 1);
	fx_tick(fx_now + 100 * MS);
	cr_assert_eq(me_records_used(fx_me), 0, "released once acked and past the window");
}

/* Goal: the window alone never releases a record the OMS has not acknowledged, and a late
 * ack keeps it half a window longer: the OMS may have re-sent it just before it acked, and
 * that re-send executes for half a window after it was stamped (below).
 * Method: an IOC finished, 10 s without an ack (kept); acked: kept 50 ms, released after. */
Test(me_window, window_needs_the_ack, .init = setup_window, .fini = fx_fini)
{
	fx_limit(1, 1, B, 100, 5, WIRE_TIF_IOC);
	fx_tick(fx_now + 10000 * MS);
	cr_assert_eq(me_records_used(fx_me), 1);
	fx_ack(0, 3);
	cr_assert_eq(me_records_used(fx_me), 1, "a re-send stamped before the ack may follow");
	fx_tick(fx_now + 49 * MS);
	cr_assert_eq(me_records_used(fx_me), 1);
	fx_tick(fx_now + 1 * MS);
	cr_assert_eq(me_records_used(fx_me), 0);
}

/* Goal (chaos pause-leader): a request stamped more than half the dedup window before the
 * ME applies it is dropped unexecuted (a deposed leader's queued re-send after a pause),
 * counted; one inside half the window executes; an unstamped one (0) is not judged. And a
 * re-send stamped just before a late ack, applied within half a window, finds its record.
 * Method: 100 ms window at now = 10 s; stamps now - 51 ms (dropped), now - 50 ms (runs). */
Test(me_window, stale_requests_dropped, .init = setup_window, .fini = fx_fini)
{
	fx_tick(10000 * MS);
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_IOC, 100, 5);
	s.sent_ns = fx_now - 51 * MS;
	fx_submit(&s);
	cr_assert_eq(fx_events(), 0, "a stale request must not execute");
	cr_assert_eq(me_counter(fx_me, ME_C_STALE_REQUESTS), 1);
	cr_assert_eq(me_records_used(fx_me), 0);
	s.sent_ns = fx_now - 50 * MS;
	fx_submit(&s);
	cr_assert_eq(fx_events(), 1); /* CANCELLED (entered, done) */
	/* Finished; its ack comes late (after the window); a re-send stamped just before it. */
	fx_tick(fx_now + 500 * MS);
	s.sent_ns = fx_now;
	fx_ack(0, 1);
	fx_tick(fx_now + 49 * MS);
	fx_reset();
	fx_submit(&s);
	cr_assert_eq(fx_events(), 0, "the re-send found its record: no second execution");
	cr_assert_eq(me_counter(fx_me, ME_C_STALE_REQUESTS), 1);
}

/* Goal: a replay re-emits a bounded number of events per request, in order, and a request
 * past the end of the stream emits nothing. Method: 300 resting orders (300 events, one
 * RESTED each), replay from 1 gives 128, from 129 gives the next 128, from 301 gives none. */
Test(me_window, replay_is_bounded, .init = fx_setup, .fini = fx_fini)
{
	for (uint64_t i = 1; i <= 300; i++)
		fx_gtc(1 + i % 7, i, S, 1000 + (int64_t)(i % 5) * 10, 1);
	uint32_t total = fx_events();
	cr_assert_eq(total, 300);
	fx_reset();
	fx_replay(0, 1);
	cr_assert_eq(fx_events(), 128);
	cr_assert_eq(fx_ev(0)->seq, 1);
	cr_assert_eq(fx_ev(127)->seq, 128);
	fx_reset();
	fx_replay(0, 129);
	cr_assert_eq(fx_events(), 128);
	cr_assert_eq(fx_ev(0)->seq, 129);
	fx_reset();
	fx_replay(0, 301);
	cr_assert_eq(fx_events(), 0);
	fx_replay(0, 5000);
	cr_assert_eq(fx_events(), 0);
}

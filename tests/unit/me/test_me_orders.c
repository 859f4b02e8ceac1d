/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me order types, time-in-force, price-time priority, market orders (self-trade prevention
 * is test_me_stp.c).
 * Default symbol: tick 10, lot 1, min qty 1, base_unit 1, no band.
 */
#include <criterion/criterion.h>

#include "me_fixture.h"

#define B WIRE_SIDE_BUY
#define S WIRE_SIDE_SELL

TestSuite(me_orders, .init = fx_setup, .fini = fx_fini);

/* Goal: a GTC limit that does not cross rests: one RESTED, which says the ME took it
 * (WIRE_EV_F_ENTERED; no ACCEPTED event of its own).
 * Method: submit one buy into an empty book, read the events and the depth. */
Test(me_orders, limit_gtc_rests)
{
	fx_gtc(7, 1, B, 100, 5);
	cr_assert_eq(fx_events(), 1);
	cr_assert_eq(fx_ev(0)->event, WIRE_EV_RESTED);
	cr_assert_eq(fx_ev(0)->hdr.flags, WIRE_EV_F_ENTERED);
	cr_assert_eq(fx_ev(0)->seq, 1);
	cr_assert_eq(fx_ev(0)->qty, 5);
	cr_assert_eq(fx_ev(0)->px, 100);
	cr_assert_eq(fx_best(B), 100);
	cr_assert_eq(me_orders_resting(fx_me), 1);
}

/* Goal: price-time priority within one level, and the best level first.
 * Method: rest three sells at 100 and one better at 90, cross with a buy of 12 at 100. */
Test(me_orders, price_time_priority)
{
	fx_gtc(1, 1, S, 100, 5);
	fx_gtc(2, 1, S, 100, 5);
	fx_gtc(3, 1, S, 100, 5);
	fx_gtc(4, 1, S, 90, 2);
	fx_reset();
	fx_gtc(9, 1, B, 100, 12);
	const struct wire_me_event *f0 = fx_find(9, 1, WIRE_EV_FILL, 0);
	const struct wire_me_event *f1 = fx_find(9, 1, WIRE_EV_FILL, 1);
	const struct wire_me_event *f2 = fx_find(9, 1, WIRE_EV_FILL, 2);
	cr_assert(f0 && f1 && f2);
	cr_assert_eq(f0->contra.user, 4);
	cr_assert_eq(f0->px, 90);
	cr_assert_eq(f0->qty, 2);
	cr_assert_eq(f1->contra.user, 1);
	cr_assert_eq(f1->qty, 5);
	cr_assert_eq(f2->contra.user, 2);
	cr_assert_eq(f2->qty, 5);
	cr_assert_null(fx_find(9, 1, WIRE_EV_FILL, 3));
	cr_assert_eq(fx_done(9, 1), 1);
	cr_assert_eq(fx_count(3, 1, WIRE_EV_FILL), 0);
	cr_assert_eq(fx_depth_qty(S, 100), 5);
}

/* Goal: trades happen at the maker's price, with maker/taker flags and exact notional.
 * Method: rest a sell at 100, cross with a buy at 120 on a symbol with base_unit 100. */
Test(me_orders, maker_price_and_flags)
{
	cr_assert_eq(fx_config(2, 10, 100, 100, 0, 100, 0, 0, 0), WIRE_REASON_NONE);
	struct wire_submit s = fx_order(1, 1, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 300);
	s.symbol = 2;
	fx_submit(&s);
	s = fx_order(2, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 120, 200);
	s.symbol = 2;
	fx_reset();
	fx_submit(&s);
	const struct wire_me_event *t = fx_find(2, 1, WIRE_EV_FILL, 0);
	const struct wire_me_event *m = fx_find(1, 1, WIRE_EV_FILL, 0);
	cr_assert(t && m);
	cr_assert_eq(t->px, 100);
	cr_assert_eq(t->liquidity, 2);
	cr_assert_eq(m->liquidity, 1);
	cr_assert_eq(t->notional, 200); /* 100 * 200 / 100 */
	cr_assert_eq(m->notional, 200);
	cr_assert_eq(t->trade_id, m->trade_id);
	cr_assert_eq(t->contra_user, 1);
	cr_assert_eq(m->contra_user, 2);
	cr_assert_eq(m->leaves_qty, 100);
	cr_assert_eq(t->leaves_qty, 0);
	cr_assert_eq(fx_done(2, 1), 1);
	cr_assert_eq(fx_done(1, 1), 0);
}

/* Goal: a partial fill rests the remainder; the maker's later full fill ends it (the FILL
 * says done: WIRE_EV_F_DONE).
 * Method: buy 10 against a sell of 4, then sell 6 into the resting remainder. */
Test(me_orders, partial_fill_then_done)
{
	fx_gtc(1, 1, S, 100, 4);
	fx_reset();
	fx_gtc(2, 1, B, 100, 10);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 0)->qty, 4);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_RESTED, 0)->qty, 6);
	cr_assert_eq(fx_done(1, 1), 1);
	fx_reset();
	fx_gtc(3, 1, S, 100, 6);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 0)->leaves_qty, 0);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 0)->hdr.flags, WIRE_EV_F_DONE);
	cr_assert_eq(fx_done(2, 1), 1);
	cr_assert_eq(fx_count(2, 1, WIRE_EV_DONE), 0);
	cr_assert_eq(fx_rec(2, 1)->cum, 10);
	cr_assert_eq(me_orders_resting(fx_me), 0);
}

/* Goal: IOC fills what it can and cancels the rest with cause IOC. */
Test(me_orders, ioc_remainder_cancelled)
{
	fx_gtc(1, 1, S, 100, 3);
	fx_reset();
	fx_limit(2, 1, B, 110, 5, WIRE_TIF_IOC);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 0)->qty, 3);
	const struct wire_me_event *c = fx_find(2, 1, WIRE_EV_CANCELLED, 0);
	cr_assert(c);
	cr_assert_eq(c->cause, WIRE_CAUSE_IOC);
	cr_assert_eq(c->qty, 2);
	cr_assert_eq(fx_done(2, 1), 1);
	cr_assert_eq(fx_best(B), 0);
}

/* Goal: FOK fills whole across levels when it can. */
Test(me_orders, fok_fills_whole)
{
	fx_gtc(1, 1, S, 100, 3);
	fx_gtc(1, 2, S, 110, 3);
	fx_reset();
	fx_limit(2, 1, B, 110, 5, WIRE_TIF_FOK);
	cr_assert_eq(fx_count(2, 1, WIRE_EV_FILL), 2);
	cr_assert_eq(fx_done(2, 1), 1);
	cr_assert_eq(fx_depth_qty(S, 110), 1);
}

/* Goal: a FOK that cannot fill whole is rejected without ACCEPTED and leaves the book as is. */
Test(me_orders, fok_not_fillable_book_untouched)
{
	fx_gtc(1, 1, S, 100, 3);
	fx_gtc(1, 2, S, 120, 3);
	uint64_t h = me_state_hash(fx_me);
	fx_reset();
	fx_limit(2, 1, B, 110, 5, WIRE_TIF_FOK);
	cr_assert_eq(fx_events(), 1);
	cr_assert_eq(fx_ev(0)->event, WIRE_EV_REJECTED);
	cr_assert_eq(fx_ev(0)->reason, WIRE_REASON_FOK_NOT_FILLABLE);
	cr_assert_eq(fx_depth_qty(S, 100), 3);
	/* Only the rejection's stream slot and dedup record changed: no book change. */
	cr_assert_neq(me_state_hash(fx_me), h);
	cr_assert_eq(me_orders_resting(fx_me), 2);
}

/* Goal: POST_ONLY rests when it does not cross and is refused when it would. */
Test(me_orders, post_only)
{
	fx_gtc(1, 1, S, 100, 3);
	fx_reset();
	fx_limit(2, 1, B, 90, 5, WIRE_TIF_POST_ONLY);
	cr_assert_eq(fx_count(2, 1, WIRE_EV_RESTED), 1);
	fx_limit(2, 2, B, 100, 5, WIRE_TIF_POST_ONLY);
	cr_assert_eq(fx_reject_reason(2, 2), WIRE_REASON_POST_ONLY_WOULD_CROSS);
	cr_assert_eq(fx_count(2, 2, WIRE_EV_ACCEPTED), 0);
	cr_assert_eq(fx_depth_qty(S, 100), 3);
}

/* Goal: GTD rests and expires when cluster time reaches expire_ns, on a tick.
 * Method: rest a GTD, tick before and at its expiry. */
Test(me_orders, gtd_expires_on_tick)
{
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 100, 5);
	s.expire_ns = 5000;
	fx_submit(&s);
	cr_assert_eq(fx_count(1, 1, WIRE_EV_RESTED), 1);
	fx_reset();
	fx_tick(4999);
	cr_assert_eq(fx_events(), 0);
	fx_tick(5000);
	const struct wire_me_event *c = fx_find(1, 1, WIRE_EV_CANCELLED, 0);
	cr_assert(c);
	cr_assert_eq(c->cause, WIRE_CAUSE_EXPIRED);
	cr_assert_eq(c->qty, 5);
	cr_assert_eq(c->time_ns, 5000);
	cr_assert_eq(fx_done(1, 1), 1);
	cr_assert_eq(fx_best(B), 0);
	cr_assert_eq(me_counter(fx_me, ME_C_EXPIRED), 1);
}

/* Goal: expiry also runs on any applied message, before the message: an expired maker never
 * trades. */
Test(me_orders, gtd_expires_before_apply)
{
	struct wire_submit s = fx_order(1, 1, S, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 100, 5);
	s.expire_ns = 2000;
	fx_submit(&s);
	fx_now = 2500;
	fx_reset();
	fx_gtc(2, 1, B, 100, 5);
	cr_assert_eq(fx_ev(0)->event, WIRE_EV_CANCELLED);
	cr_assert_eq(fx_ev(0)->cause, WIRE_CAUSE_EXPIRED);
	cr_assert_eq(fx_count(2, 1, WIRE_EV_FILL), 0);
	cr_assert_eq(fx_count(2, 1, WIRE_EV_RESTED), 1);
}

/* Goal: a GTD whose expiry already passed is refused (TOO_LATE); GTD without expiry is a bad
 * request. */
Test(me_orders, gtd_already_expired)
{
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 100, 5);
	s.expire_ns = fx_now;
	fx_submit(&s);
	cr_assert_eq(fx_reject_reason(1, 1), WIRE_REASON_TOO_LATE);
	s = fx_order(1, 2, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 100, 5);
	fx_submit(&s);
	cr_assert_eq(fx_reject_reason(1, 2), WIRE_REASON_BAD_REQUEST);
}

/* Goal: MARKET sell by quantity sweeps bids; the remainder is cancelled NO_LIQUIDITY. */
Test(me_orders, market_sell_by_qty)
{
	fx_gtc(1, 1, B, 100, 3);
	fx_gtc(1, 2, B, 90, 3);
	fx_reset();
	fx_market_sell(2, 1, 8);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 0)->px, 100);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 1)->px, 90);
	const struct wire_me_event *c = fx_find(2, 1, WIRE_EV_CANCELLED, 0);
	cr_assert(c);
	cr_assert_eq(c->cause, WIRE_CAUSE_NO_LIQUIDITY);
	cr_assert_eq(c->qty, 2);
	cr_assert_eq(fx_done(2, 1), 1);
}

/* Goal: MARKET buy by quote budget fills while cumulative notional stays within the budget,
 * the last fill rounded down to the lot; unused budget just ends with DONE.
 * Method: lot 2; asks 2@100, 6@110; budget 650: 2@100 = 200, then floor(450/110) = 4 → 4 on
 * lot → 4@110 = 440; 10 left, which buys nothing. */
Test(me_orders, market_buy_by_quote)
{
	cr_assert_eq(fx_config(3, 10, 2, 2, 0, 1, 0, 0, 0), WIRE_REASON_NONE);
	struct wire_submit s = fx_order(1, 1, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 2);
	s.symbol = 3;
	fx_submit(&s);
	s = fx_order(1, 2, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 110, 6);
	s.symbol = 3;
	fx_submit(&s);
	s = fx_order(2, 1, B, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 0);
	s.symbol = 3;
	s.quote_qty = 650;
	fx_reset();
	fx_submit(&s);
	const struct wire_me_event *f0 = fx_find(2, 1, WIRE_EV_FILL, 0);
	const struct wire_me_event *f1 = fx_find(2, 1, WIRE_EV_FILL, 1);
	cr_assert(f0 && f1);
	cr_assert_eq(f0->qty, 2);
	cr_assert_eq(f0->notional, 200);
	cr_assert_eq(f1->qty, 4);
	cr_assert_eq(f1->notional, 440);
	cr_assert_eq(fx_count(2, 1, WIRE_EV_CANCELLED), 0);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_DONE, 0)->qty, 6);
	const struct me_order *o = fx_rec(2, 1);
	cr_assert_eq(o->cum, 6);
}

/* Goal: a market buy that runs out of book (budget left) is cancelled NO_LIQUIDITY. */
Test(me_orders, market_buy_runs_out_of_book)
{
	fx_gtc(1, 1, S, 100, 2);
	fx_reset();
	fx_market_buy(2, 1, 1000);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 0)->qty, 2);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_NO_LIQUIDITY);
	cr_assert_eq(fx_done(2, 1), 1);
}

/* Goal: market orders take only IOC (or FOK for a sell) and reject malformed shapes. */
Test(me_orders, market_shapes)
{
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_MARKET, WIRE_TIF_GTC, 0, 0);
	s.quote_qty = 100;
	fx_submit(&s);
	cr_assert_eq(fx_reject_reason(1, 1), WIRE_REASON_BAD_REQUEST);
	s = fx_order(1, 2, B, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 5); /* buy by qty */
	fx_submit(&s);
	cr_assert_eq(fx_reject_reason(1, 2), WIRE_REASON_BAD_REQUEST);
	fx_gtc(3, 1, B, 100, 2);
	s = fx_order(1, 3, S, WIRE_ORD_MARKET, WIRE_TIF_FOK, 0, 5);
	fx_submit(&s);
	cr_assert_eq(fx_reject_reason(1, 3), WIRE_REASON_FOK_NOT_FILLABLE);
	s = fx_order(1, 4, S, WIRE_ORD_MARKET, WIRE_TIF_FOK, 0, 2);
	fx_submit(&s);
	cr_assert_eq(fx_count(1, 4, WIRE_EV_FILL), 1);
}

/* Goal: a market order never trades outside the price band around the reference at its
 * entry: the rest is cancelled NO_LIQUIDITY.
 * Method: ref 1000, band 10% (900..1100): rest bids 950, 900 and asks 1050, 1100 inside it,
 * and a bid at 880 and an ask at 1200 through a temporarily wider band; a market sell stops
 * after 900; then (reference now 900, band 810..990) a market buy finds no ask in band. */
Test(me_orders, market_respects_band)
{
	cr_assert_eq(fx_config(4, 10, 1, 1, 0, 1, 1000, 1000, 0), WIRE_REASON_NONE);
	struct wire_submit s;
	int64_t px[4] = {950, 900, 1050, 1100};
	uint8_t side[4] = {B, B, S, S};
	for (uint64_t i = 0; i < 4; i++) {
		s = fx_order(1, 1 + i, side[i], WIRE_ORD_LIMIT, WIRE_TIF_GTC, px[i], 2);
		s.symbol = 4;
		fx_submit(&s);
		cr_assert_eq(fx_count(1, 1 + i, WIRE_EV_RESTED), 1);
	}
	cr_assert_eq(fx_config(4, 10, 1, 1, 0, 1, 1000, 2000, 0), WIRE_REASON_NONE);
	s = fx_order(1, 10, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 880, 3);
	s.symbol = 4;
	fx_submit(&s);
	s = fx_order(1, 11, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1200, 3);
	s.symbol = 4;
	fx_submit(&s);
	cr_assert_eq(fx_config(4, 10, 1, 1, 0, 1, 1000, 1000, 0), WIRE_REASON_NONE);
	fx_reset();
	s = fx_order(2, 1, S, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 10);
	s.symbol = 4;
	fx_submit(&s);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 0)->px, 950);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 1)->px, 900);
	cr_assert_null(fx_find(2, 1, WIRE_EV_FILL, 2));
	cr_assert_eq(fx_find(2, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_NO_LIQUIDITY);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_CANCELLED, 0)->qty, 6);
	/* The reference is now the last trade (900): band 810..990, so asks at 1050+ are out. */
	fx_reset();
	s = fx_order(3, 1, B, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 0);
	s.symbol = 4;
	s.quote_qty = 100000;
	fx_submit(&s);
	cr_assert_eq(fx_count(3, 1, WIRE_EV_FILL), 0);
	cr_assert_eq(fx_find(3, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_NO_LIQUIDITY);
}

/* Reference for me_book_find: a linear scan of the side's sorted array. */
static uint32_t
book_find_linear(uint32_t si, uint32_t side, int64_t px, uint32_t *pos)
{
	const struct me_lref *r = me_lrefs(fx_me, si, side);
	uint32_t n = me_sym(fx_me, si)->side_count[side];
	uint32_t i = n;
	while (i > 0 && (side == 0 ? r[i - 1].px > px : r[i - 1].px < px))
		i--;
	*pos = i;
	return i > 0 && r[i - 1].px == px ? r[i - 1].level : ME_NIL;
}

/* Goal: me_book_find's guess from the tick (the level at px sits (touch - px) / tick entries
 * from the touch when the side is dense there) never changes its answer, on dense runs, on
 * gaps, at the ends and off the tick. Method: rest bids and asks in dense runs with gaps
 * between them (tick 10), then compare level and position with a linear scan for every
 * price around the book. */
Test(me_orders, book_find_guess_agrees_with_scan)
{
	uint64_t seq = 0;
	for (int64_t k = 0; k < 60; k++) {
		if (k % 7 == 3 || k % 11 == 5 || (k > 20 && k < 26))
			continue; /* gaps of one tick and a longer one */
		fx_gtc(1, ++seq, B, 1000 - 10 * k, 1);
		fx_gtc(2, ++seq, S, 1010 + 10 * k, 1);
	}
	uint32_t si = me_symbol_find(fx_me, FX_SYM);
	cr_assert_neq(si, ME_NIL);
	cr_assert_gt(me_sym(fx_me, si)->side_count[0], 40);
	for (uint32_t side = 0; side < 2; side++)
		for (int64_t px = 300; px <= 1700; px++) {
			uint32_t pos, want_pos;
			uint32_t got = me_book_find(fx_me, si, side, px, &pos);
			uint32_t want = book_find_linear(si, side, px, &want_pos);
			cr_assert_eq(got, want, "side %u px %ld: level %u, want %u", side, (long)px,
				     got, want);
			cr_assert_eq(pos, want_pos, "side %u px %ld: pos %u, want %u", side,
				     (long)px, pos, want_pos);
		}
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me self-trade prevention: the three modes against limit orders, FOK, and the rule that STP
 * acts only where a trade with the same-user resting order would actually happen (a market
 * buy whose remaining budget buys no lot at that level just ends DONE; a limit that does not
 * cross never reaches the order).
 * Default symbol: tick 10, lot 1, min qty 1, base_unit 1, no band.
 */
#include <criterion/criterion.h>

#include "me_fixture.h"

#define B WIRE_SIDE_BUY
#define S WIRE_SIDE_SELL

TestSuite(me_stp, .init = fx_setup, .fini = fx_fini);

/* Goal: STP NONE lets a user trade with themself. */
Test(me_stp, none_self_trades)
{
	fx_gtc(1, 1, S, 100, 5);
	fx_reset();
	fx_gtc(1, 2, B, 100, 5);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_FILL, 0)->contra_user, 1);
}

static void
stp_buy(uint64_t user, uint64_t seq, int64_t px, int64_t qty, uint8_t tif, uint8_t stp)
{
	struct wire_submit s = fx_order(user, seq, B, WIRE_ORD_LIMIT, tif, px, qty);
	s.stp = stp;
	fx_submit(&s);
}

/* Goal: EXPIRE_TAKER cancels the incoming remainder (cause STP); the maker stays. */
Test(me_stp, expire_taker)
{
	fx_gtc(2, 1, S, 100, 2);
	fx_gtc(1, 1, S, 100, 5);
	fx_reset();
	stp_buy(1, 2, 100, 5, WIRE_TIF_GTC, WIRE_STP_EXPIRE_TAKER);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_FILL, 0)->qty, 2); /* other user's order first */
	const struct wire_me_event *c = fx_find(1, 2, WIRE_EV_CANCELLED, 0);
	cr_assert(c);
	cr_assert_eq(c->cause, WIRE_CAUSE_STP);
	cr_assert_eq(c->qty, 3);
	cr_assert_eq(fx_depth_qty(S, 100), 5);
	cr_assert_eq(fx_count(1, 1, WIRE_EV_CANCELLED), 0);
}

/* Goal: EXPIRE_MAKER cancels the resting self order and continues matching. */
Test(me_stp, expire_maker)
{
	fx_gtc(1, 1, S, 100, 5);
	fx_gtc(2, 1, S, 100, 5);
	fx_reset();
	stp_buy(1, 2, 100, 7, WIRE_TIF_GTC, WIRE_STP_EXPIRE_MAKER);
	const struct wire_me_event *c = fx_find(1, 1, WIRE_EV_CANCELLED, 0);
	cr_assert(c);
	cr_assert_eq(c->cause, WIRE_CAUSE_STP);
	cr_assert_eq(fx_done(1, 1), 1);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_FILL, 0)->contra_user, 2);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_RESTED, 0)->qty, 2);
}

/* Goal: EXPIRE_BOTH cancels the resting self order and the incoming remainder. */
Test(me_stp, expire_both)
{
	fx_gtc(1, 1, S, 100, 5);
	fx_gtc(2, 1, S, 100, 5);
	fx_reset();
	stp_buy(1, 2, 100, 7, WIRE_TIF_GTC, WIRE_STP_EXPIRE_BOTH);
	cr_assert_eq(fx_find(1, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_STP);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_STP);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_CANCELLED, 0)->qty, 7);
	cr_assert_eq(fx_count(1, 2, WIRE_EV_FILL), 0);
	cr_assert_eq(fx_depth_qty(S, 100), 5);
}

/* Goal: FOK decides fillability before touching the book, honouring STP.
 * Method: self order first in the queue; EXPIRE_TAKER cannot get past it (rejected, book
 * untouched); EXPIRE_MAKER counts only the other user's quantity. */
Test(me_stp, fok_honours_stp)
{
	fx_gtc(1, 1, S, 100, 5);
	fx_gtc(2, 1, S, 100, 5);
	fx_reset();
	stp_buy(1, 2, 100, 5, WIRE_TIF_FOK, WIRE_STP_EXPIRE_TAKER);
	cr_assert_eq(fx_reject_reason(1, 2), WIRE_REASON_FOK_NOT_FILLABLE);
	stp_buy(1, 3, 100, 8, WIRE_TIF_FOK, WIRE_STP_EXPIRE_MAKER);
	cr_assert_eq(fx_reject_reason(1, 3), WIRE_REASON_FOK_NOT_FILLABLE);
	cr_assert_eq(fx_depth_qty(S, 100), 10);
	fx_reset();
	stp_buy(1, 4, 100, 5, WIRE_TIF_FOK, WIRE_STP_EXPIRE_MAKER);
	cr_assert_eq(fx_find(1, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_STP);
	cr_assert_eq(fx_find(1, 4, WIRE_EV_FILL, 0)->qty, 5);
	cr_assert_eq(fx_done(1, 4), 1);
	cr_assert_eq(fx_best(S), 0);
}

/* ---- market buy by quote: STP acts only when the budget buys a lot there ---- */

static void
stp_market_buy(uint64_t user, uint64_t seq, int64_t quote, uint8_t stp)
{
	struct wire_submit s = fx_order(user, seq, B, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 0);
	s.quote_qty = quote;
	s.stp = stp;
	fx_submit(&s);
}

/* The market buy (user, seq) ended DONE with cum filled, without a CANCELLED, and STP never
 * acted. */
static void
assert_taker_done(uint64_t user, uint64_t seq, int64_t cum)
{
	cr_assert_eq(fx_count(user, seq, WIRE_EV_CANCELLED), 0);
	const struct wire_me_event *d = fx_find(user, seq, WIRE_EV_DONE, 0);
	cr_assert(d);
	cr_assert_eq(d->qty, cum);
	cr_assert_eq(me_counter(fx_me, ME_C_STP), 0);
}

/* The resting order (user, seq) of OMS shard fx_oms_shard saw no event and is still live. */
static void
assert_untouched(uint64_t user, uint64_t seq)
{
	cr_assert_eq(fx_count(user, seq, WIRE_EV_CANCELLED), 0);
	cr_assert_eq(fx_done(user, seq), 0);
	const struct me_order *o = fx_rec(user, seq);
	cr_assert(o);
	cr_assert_eq(o->state, ME_ST_LIVE);
}

/* Goal: EXPIRE_TAKER does not expire a market buy whose remaining budget buys no lot at the
 * level of the self order: no trade would happen, the order ends DONE.
 * Method: asks at 100: user 2 2, then user 1 5; user 1 buys with budget 250: 2@100 = 200,
 * the 50 left buys nothing at 100 when user 1's own order comes up. */
Test(me_stp, market_budget_short_expire_taker)
{
	fx_gtc(2, 1, S, 100, 2);
	fx_gtc(1, 1, S, 100, 5);
	fx_reset();
	stp_market_buy(1, 2, 250, WIRE_STP_EXPIRE_TAKER);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_FILL, 0)->qty, 2);
	assert_taker_done(1, 2, 2);
	assert_untouched(1, 1);
	cr_assert_eq(fx_depth_qty(S, 100), 5);
}

/* Goal: EXPIRE_MAKER does not cancel a self order at a level the remaining budget cannot buy
 * a lot at; the market buy ends DONE (not NO_LIQUIDITY after sweeping the self order away).
 * Method: user 2 sells 2@100, user 1 sells 5@110; user 1 buys with budget 250: 2@100 = 200,
 * the 50 left buys nothing at 110. */
Test(me_stp, market_budget_short_expire_maker)
{
	fx_gtc(2, 1, S, 100, 2);
	fx_gtc(1, 1, S, 110, 5);
	fx_reset();
	stp_market_buy(1, 2, 250, WIRE_STP_EXPIRE_MAKER);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_FILL, 0)->qty, 2);
	assert_taker_done(1, 2, 2);
	assert_untouched(1, 1);
	cr_assert_eq(fx_depth_qty(S, 110), 5);
}

/* Goal: EXPIRE_BOTH touches neither order when the whole budget buys no lot at the best
 * level, which holds only a self order: DONE with nothing filled.
 * Method: user 1 sells 5@100 and buys with budget 50. */
Test(me_stp, market_budget_short_expire_both)
{
	fx_gtc(1, 1, S, 100, 5);
	fx_reset();
	stp_market_buy(1, 2, 50, WIRE_STP_EXPIRE_BOTH);
	cr_assert_eq(fx_count(1, 2, WIRE_EV_FILL), 0);
	assert_taker_done(1, 2, 0);
	assert_untouched(1, 1);
	cr_assert_eq(fx_depth_qty(S, 100), 5);
}

/* Goal: STP still acts on a market buy whose budget does buy a lot at the self order's level.
 * Method: asks at 100: user 1 5, then user 2 5; user 1 buys with budget 250 EXPIRE_MAKER: its
 * own order is cancelled (STP), 2@100 from user 2, the 50 left ends it DONE. */
Test(me_stp, market_budget_buys_expire_maker_acts)
{
	fx_gtc(1, 1, S, 100, 5);
	fx_gtc(2, 1, S, 100, 5);
	fx_reset();
	stp_market_buy(1, 2, 250, WIRE_STP_EXPIRE_MAKER);
	cr_assert_eq(fx_find(1, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_STP);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_FILL, 0)->contra_user, 2);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_FILL, 0)->qty, 2);
	cr_assert_eq(fx_count(1, 2, WIRE_EV_CANCELLED), 0);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_DONE, 0)->qty, 2);
	cr_assert_eq(me_counter(fx_me, ME_C_STP), 1);
	cr_assert_eq(fx_depth_qty(S, 100), 3);
}

/* Goal: a limit whose price does not reach the self order never triggers STP: the IOC
 * remainder is cancelled IOC and the self order stays.
 * Method: user 2 sells 2@100, user 1 sells 5@110; user 1 IOC buys 5@100 with EXPIRE_BOTH. */
Test(me_stp, limit_not_crossing_self_untouched)
{
	fx_gtc(2, 1, S, 100, 2);
	fx_gtc(1, 1, S, 110, 5);
	fx_reset();
	stp_buy(1, 2, 100, 5, WIRE_TIF_IOC, WIRE_STP_EXPIRE_BOTH);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_FILL, 0)->qty, 2);
	const struct wire_me_event *c = fx_find(1, 2, WIRE_EV_CANCELLED, 0);
	cr_assert(c);
	cr_assert_eq(c->cause, WIRE_CAUSE_IOC);
	cr_assert_eq(c->qty, 3);
	cr_assert_eq(fx_count(1, 1, WIRE_EV_CANCELLED), 0);
	cr_assert_eq(me_counter(fx_me, ME_C_STP), 0);
}

/* Goal: a market buy whose budget buys no lot ends DONE even when the maker's stream has no
 * retention left: neither STP nor the retention stop acts where no trade would happen.
 * Method: events_max 32, reserve 12; user 2 (OMS shard 1) rests 11 sells of 1@100 (its
 * stream: 10 free); user 3 (shard 0) IOC-buys 4 of them (2 free, below a maker step's 3);
 * then market buys with budget 50 (no lot at 100): user 3 without STP, user 2 EXPIRE_MAKER. */
Test(me_stp, market_budget_short_maker_stream_full)
{
	fx_teardown();
	struct me_limits l = {
		.shard = 0, .streams_max = 2, .symbols_max = 2, .orders_max = 64, .users_max = 8,
		.levels_max = 64, .levels_side_max = 16, .gtd_max = 4, .events_max = 32,
		.events_reserve = 12,
	};
	fx_setup_limits(&l);
	fx_oms_shard = 1;
	for (uint64_t i = 1; i <= 11; i++) {
		fx_gtc(2, i, S, 100, 1);
		cr_assert_eq(fx_count(2, i, WIRE_EV_RESTED), 1);
	}
	fx_oms_shard = 0;
	fx_limit(3, 1, B, 100, 4, WIRE_TIF_IOC);
	cr_assert_eq(fx_done_ev(3, 1)->event, WIRE_EV_FILL); /* its last fill: done */
	cr_assert_eq(fx_rec(3, 1)->cum, 4);
	fx_reset();
	stp_market_buy(3, 2, 50, WIRE_STP_NONE);
	assert_taker_done(3, 2, 0);
	stp_market_buy(2, 20, 50, WIRE_STP_EXPIRE_MAKER);
	assert_taker_done(2, 20, 0);
	fx_oms_shard = 1;
	assert_untouched(2, 5);
	cr_assert_eq(me_counter(fx_me, ME_C_RETENTION_STOP), 0);
	cr_assert_eq(fx_depth_qty(S, 100), 7);
}

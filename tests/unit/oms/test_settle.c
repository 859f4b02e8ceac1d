/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Settlement never goes beyond the reservation: a buy reserves its notional plus the fee
 * bound (the larger of maker and taker, rounded up once), and whatever mix of maker and
 * taker fills, partial fills, amends and replaces follows, the fills are paid from that
 * reservation alone (docs/oms.md, "How the reservation bounds settlement"). Each test runs
 * the shape on a symbol where a fill of 100 notional costs a rounded-up fee of 1, so every
 * fill crosses a rounding boundary; alarm_settle_shortfall and fee_capped stay 0 and money
 * is conserved. The last test checks oms_order_fee itself (rounding once, 128-bit path).
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "harness.h"

/* base_unit 1, tick 1, lot 1, maker 10 and taker 10 bps: 100 notional costs 0.1 → 1. */
#define S_X 3
/* The same with a maker rebate: maker −10, taker 10 bps. */
#define S_R 4

#define TAKER 2
#define MAKER 1

static struct h H;
static int64_t usd0;

static void
setup(void)
{
	h_init(&H, NULL);
	h_std_symbols(&H);
	h_symbol(&H, S_X, A_ETH, A_USD, 0, 1, 1, 1, 10, 10);
	h_symbol(&H, S_R, A_BTC, A_USD, 0, 1, 1, 1, -10, 10);
	h_user(&H, 7, 1000000, 1000000);
	usd0 = oms_asset_sum(H.oms, A_USD);
}

static void
teardown(void)
{
	h_fini(&H);
}

TestSuite(oms_settle, .init = setup, .fini = teardown);

/* A limit buy, accepted; its oid. */
static struct wire_oid
buy(uint64_t cl, uint32_t symbol, int64_t px, int64_t qty)
{
	h_limit(&H, 7, cl, symbol, WIRE_SIDE_BUY, px, qty);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, symbol, WIRE_EV_ACCEPTED, 0, 0, qty, 0);
	return o;
}

/* No fill went beyond the reservation, none needed the venue to absorb a fee, the USD
 * reservation is what is still open, and USD is conserved: balances + fees fell by exactly
 * the notional paid to the sellers (who are not users of this shard here). */
static void
settled_within(int64_t reserved, int64_t notional)
{
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_SETTLE_SHORTFALL), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_FEE_CAPPED), 0));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), reserved));
	cr_assert(eq(i64, oms_asset_sum(H.oms, A_USD), usd0 - notional));
	cr_assert(eq(int, oms_check_invariants(H.oms), 0));
}

static void
done(struct wire_oid o, uint32_t symbol)
{
	h_ev(&H, o, symbol, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
	cr_assert(oms_actor_flat(oms_actor_find(H.oms, 7)));
}

/* Goal: the case seen in the load runs: buy 5 @ 100 reserves 501 and, filled as taker then
 * as maker, pays exactly 501 (fees rounded once on the order, not once per liquidity).
 * Method: taker 2 (200, fee 1), maker 3 (300, fee 0: 0.5 in all rounds up to 1). */
Test(oms_settle, taker_then_maker)
{
	struct wire_oid o = buy(1, S_X, 100, 5);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 501));
	h_ev(&H, o, S_X, WIRE_EV_FILL, 100, 2, 3, TAKER);
	cr_assert(eq(i64, ((const struct wire_exec_report *)h_get(&H, WIRE_EXEC_REPORT, 0))->fee,
		     1));
	h_ev(&H, o, S_X, WIRE_EV_FILL, 100, 3, 0, MAKER);
	settled_within(0, 500);
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 501));
	cr_assert(eq(i64, oms_fees_get(H.oms, A_USD), 1));
	done(o, S_X);
}

/* Goal: many partial fills alternating taker and maker stay within the reservation even
 * when the last fill's own fee is 0 (the excess was charged by earlier fills).
 * Method: buy 5 @ 100 (501); fills of 1 as T, M, T, M, T. */
Test(oms_settle, alternating_partial_fills)
{
	struct wire_oid o = buy(1, S_X, 100, 5);
	for (int i = 0; i < 5; i++) {
		h_ev(&H, o, S_X, WIRE_EV_FILL, 100, 1, 4 - i, i % 2 == 0 ? TAKER : MAKER);
		cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_SETTLE_SHORTFALL), 0), "fill %d", i);
	}
	settled_within(0, 500);
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 501));
	done(o, S_X);
}

/* Goal: fills at a better price than the limit, mixed liquidity, leave the unused
 * reservation to be released on DONE and never exceed it.
 * Method: buy 7 @ 100 (700 + 1); fills T 3 @ 97, M 2 @ 99, T 2 @ 100. */
Test(oms_settle, price_improvement_mixed)
{
	struct wire_oid o = buy(1, S_X, 100, 7);
	h_ev(&H, o, S_X, WIRE_EV_FILL, 97, 3, 4, TAKER);
	h_ev(&H, o, S_X, WIRE_EV_FILL, 99, 2, 2, MAKER);
	h_ev(&H, o, S_X, WIRE_EV_FILL, 100, 2, 0, TAKER);
	/* 291 + 198 + 200 = 689, fee ceil(0.689) = 1: 11 of 701 left for DONE. */
	settled_within(11, 689);
	done(o, S_X);
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 690));
}

/* Goal: an amend down after partial fills trims the reservation to what the new leaves can
 * cost, and mixed fills after it stay within the trimmed reservation.
 * Method: buy 20 @ 100 (2002); taker 10 (1000 + 1); amend to 13 (leaves 3: trimmed to
 * 300 + 1); then T 1, M 1, T 1. */
Test(oms_settle, amend_down_after_partial_fill)
{
	struct wire_oid o = buy(1, S_X, 100, 20);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 2002));
	h_ev(&H, o, S_X, WIRE_EV_FILL, 100, 10, 10, TAKER);
	h_amend(&H, 7, 2, 1, 13);
	const struct wire_modify *a = h_get(&H, WIRE_AMEND_TO_ME, 0);
	cr_assert(a != NULL);
	h_ev_contra(&H, o, S_X, WIRE_EV_AMENDED, a->req, 0, 0, 3, 3);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 301));
	h_ev(&H, o, S_X, WIRE_EV_FILL, 100, 1, 2, TAKER);
	h_ev(&H, o, S_X, WIRE_EV_FILL, 100, 1, 1, MAKER);
	h_ev(&H, o, S_X, WIRE_EV_FILL, 100, 1, 0, TAKER);
	/* 1300 notional, fee ceil(1.3) = 2. */
	settled_within(0, 1300);
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 1302));
	done(o, S_X);
}

/* Goal: cancel-replace after partial fills: the replacement reserves on its own and its
 * mixed fills stay within that reservation; the old order releases the rest on DONE.
 * Method: buy 10 @ 100 (1001), taker 4; replace with 5 @ 100 (501); the old order's
 * CANCELLED(REPLACED) + DONE; the replacement fills T, M, T, M, T of 1. */
Test(oms_settle, cancel_replace_after_partial_fill)
{
	struct wire_oid o = buy(1, S_X, 100, 10);
	h_ev(&H, o, S_X, WIRE_EV_FILL, 100, 4, 6, TAKER);
	h_replace(&H, 7, 2, 1, 100, 5);
	const struct wire_modify *r = h_get(&H, WIRE_REPLACE_TO_ME, 0);
	cr_assert(r != NULL);
	struct wire_oid req = r->req;
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 1001 - 401 + 501));
	h_ev_contra(&H, o, S_X, WIRE_EV_CANCELLED, req, WIRE_CAUSE_REPLACED, 0, 6, 0);
	h_ev(&H, o, S_X, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 501));
	h_ev_contra(&H, req, S_X, WIRE_EV_ACCEPTED, o, 0, 0, 0, 5);
	for (int i = 0; i < 5; i++)
		h_ev(&H, req, S_X, WIRE_EV_FILL, 100, 1, 4 - i, i % 2 == 0 ? TAKER : MAKER);
	settled_within(0, 900);
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 401 - 501));
	done(req, S_X);
}

/* Goal: a market buy by quote spends at most its spend however its fills split: the ME's
 * budget (notional) plus the taker fee on it fit the spend.
 * Method: spend 1000 (budget 999: 999 + 1); fills of 1 @ 100 … crossing each rounding
 * boundary, then 99 @ 1 lands the notional on the budget. */
Test(oms_settle, market_buy_by_quote)
{
	struct wire_new_order m;
	h_new_order_msg(&m, 7, 1, S_X, WIRE_SIDE_BUY, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 0, 1000);
	h_apply(&H, &m);
	const struct wire_submit *sub = h_get(&H, WIRE_SUBMIT, 0);
	cr_assert(sub != NULL);
	cr_assert(eq(i64, sub->quote_qty, 999));
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_X, WIRE_EV_ACCEPTED, 0, 0, 0, 0);
	for (int i = 0; i < 9; i++)
		h_ev(&H, o, S_X, WIRE_EV_FILL, 100, 1, 0, TAKER);
	h_ev(&H, o, S_X, WIRE_EV_FILL, 1, 99, 0, TAKER);
	settled_within(0, 999);
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 1000));
	h_ev_contra(&H, o, S_X, WIRE_EV_CANCELLED, (struct wire_oid){ 0, 0 },
		    WIRE_CAUSE_NO_LIQUIDITY, 0, 0, 0);
	done(o, S_X);
}

/* Goal: with a maker rebate the order's fee is still rounded once, toward the venue never
 * paying a fraction, and mixed fills stay within the reservation (taker bound).
 * Method: buy 5 @ 100 on a maker −10 / taker 10 symbol (501); T, M, T, M, T of 1: the
 * exact fee is 0.3 − 0.2 = 0.1, charged 1. */
Test(oms_settle, maker_rebate_mixed)
{
	struct wire_oid o = buy(1, S_R, 100, 5);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 501));
	for (int i = 0; i < 5; i++)
		h_ev(&H, o, S_R, WIRE_EV_FILL, 100, 1, 4 - i, i % 2 == 0 ? TAKER : MAKER);
	settled_within(0, 500);
	cr_assert(eq(i64, oms_fees_get(H.oms, A_USD), 1));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 501));
	done(o, S_R);
}

/* Goal: the order fee equals money_fee for one liquidity, also past 64 bits (the 128-bit
 * path), rounds a mixed total once, and reports overflow rather than wrap.
 * Method: compare with money_fee on small and huge notionals; a mixed 0.5 + 0.5; INT64_MAX
 * notionals at 32767 bps both sides (the result exceeds 64 bits). */
Test(oms_settle, order_fee_rounding_and_overflow)
{
	const int64_t ns[] = { 0, 1, 99, 100, 12345, INT64_MAX / 3, INT64_MAX };
	for (unsigned i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		const int16_t bps[] = { -10, -1, 0, 1, 7, 1000 };
		for (unsigned k = 0; k < sizeof(bps) / sizeof(bps[0]); k++) {
			int64_t want, got_m, got_t;
			cr_assert(eq(int, money_fee(ns[i], bps[k], &want), 0));
			cr_assert(eq(int, oms_order_fee(ns[i], 0, bps[k], 3, &got_m), 0));
			cr_assert(eq(int, oms_order_fee(0, ns[i], 3, bps[k], &got_t), 0));
			cr_assert(eq(i64, got_m, want), "n %ld bps %d", (long)ns[i], bps[k]);
			cr_assert(eq(i64, got_t, want), "n %ld bps %d", (long)ns[i], bps[k]);
		}
	}
	int64_t f;
	cr_assert(eq(int, oms_order_fee(500, 500, 10, 10, &f), 0));
	cr_assert(eq(i64, f, 1));
	cr_assert(eq(int, oms_order_fee(300, 200, -10, 10, &f), 0)); /* −0.3 + 0.2 → 0 */
	cr_assert(eq(i64, f, 0));
	cr_assert(eq(int, oms_order_fee(INT64_MAX / 2, INT64_MAX / 2, 7, 5, &f), 0));
	cr_assert(eq(int, oms_order_fee(INT64_MAX, INT64_MAX, 32767, 32767, &f), -EOVERFLOW));
}

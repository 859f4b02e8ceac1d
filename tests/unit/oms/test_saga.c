/* SPDX-License-Identifier: Apache-2.0 */
/* The saga's OMS side: provisional ack → open | rejected, fills settled at their real price
 * with maker/taker fees, release of the remainder, cancel / amend / replace, and the
 * enumerable PENDING set the bridge rebuilds its queue from. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct h H;

static void
setup(void)
{
	h_init(&H, NULL);
	h_std_symbols(&H);
	h_user(&H, 7, 1000000, 1000000);
	h_user(&H, 8, 1000000, 1000000);
}

static void
teardown(void)
{
	h_fini(&H);
}

TestSuite(oms_saga, .init = setup, .fini = teardown);

static struct oms_user_info
info(uint64_t user)
{
	struct oms_user_info i;
	oms_user_get(H.oms, user, &i);
	return i;
}

/* Goal: fills settle at the real notional with the liquidity's fee; DONE releases the rest;
 * Σ totals + fees is conserved.
 * Method: buy 100 @ 20000 (reserve 20010); taker fill 60 @ 19990 (11994 + fee 6); maker fill
 * 40 @ 20000 (8000 + fee 2); DONE releases 8. The seller side mirrors it. */
Test(oms_saga, fills_settle_and_done_releases)
{
	int64_t usd0 = oms_asset_sum(H.oms, A_USD), btc0 = oms_asset_sum(H.oms, A_BTC);
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	h_limit(&H, 8, 1, S_BTCUSD, WIRE_SIDE_SELL, 19990, 100);
	struct wire_oid b = h_oid(&H, 7, 1), s = h_oid(&H, 8, 1);
	cr_assert(eq(u32, info(7).sagas, 1));
	h_ev(&H, b, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	cr_assert(eq(u32, info(7).sagas, 0));
	cr_assert(eq(u32, info(7).live, 1));
	h_ev(&H, s, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	h_ev(&H, b, S_BTCUSD, WIRE_EV_FILL, 19990, 60, 40, 2);
	const struct wire_exec_report *e = h_get(&H, WIRE_EXEC_REPORT, 0);
	cr_assert(eq(u8, e->exec, WIRE_EXEC_FILL));
	cr_assert(eq(i64, e->fee, 6));
	cr_assert(eq(i64, e->cum_qty, 60));
	cr_assert(eq(i64, e->leaves_qty, 40));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 20010 - 12000));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 12000));
	cr_assert(eq(i64, h_total(&H, 7, A_BTC), 1000060));
	h_ev(&H, s, S_BTCUSD, WIRE_EV_FILL, 19990, 60, 40, 1);
	/* Seller maker: receives 11994 − ceil(11994 × 2 bps) = 11994 − 3. */
	cr_assert(eq(i64, h_total(&H, 8, A_USD), 1000000 + 11991));
	cr_assert(eq(i64, h_reserved(&H, 8, A_BTC), 40));
	h_ev(&H, b, S_BTCUSD, WIRE_EV_FILL, 20000, 40, 0, 1);
	h_ev(&H, s, S_BTCUSD, WIRE_EV_FILL, 20000, 40, 0, 2);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 8));
	h_ev(&H, b, S_BTCUSD, WIRE_EV_DONE, 0, 0, 0, 0);
	h_ev(&H, s, S_BTCUSD, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 12000 - 8002));
	cr_assert(eq(i64, h_reserved(&H, 8, A_BTC), 0));
	cr_assert(eq(i64, h_total(&H, 8, A_BTC), 1000000 - 100));
	cr_assert(eq(i64, oms_asset_sum(H.oms, A_USD), usd0));
	cr_assert(eq(i64, oms_asset_sum(H.oms, A_BTC), btc0));
	cr_assert(gt(i64, oms_fees_get(H.oms, A_USD), 0));
	cr_assert(oms_actor_flat(oms_actor_find(H.oms, 7)));
	cr_assert(oms_actor_flat(oms_actor_find(H.oms, 8)));
}

/* Goal: a maker rebate (negative bps) pays the user and debits the fee account. */
Test(oms_saga, maker_rebate)
{
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_SELL, 10, 0);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_BAD_REQUEST));
	h_transfer(&H, 7, 1, A_ETH, 1000);
	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_SELL, 100, 1000);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 1000, 0);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_FILL, 100, 1000, 0, 1);
	/* notional 100000, maker −1 bps → fee −10, seller receives 100010. */
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 + 100010));
	cr_assert(eq(i64, oms_fees_get(H.oms, A_USD), -10));
}

/* Goal: REJECTED credits the whole reservation back and reports pending → rejected. */
Test(oms_saga, reject_releases)
{
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	struct wire_oid o = h_last_ack_oid(&H);
	struct wire_me_event e;
	h_event_msg(&H, &e, H.me_seq[0]++, o, S_BTCUSD, WIRE_EV_REJECTED);
	e.reason = WIRE_REASON_POST_ONLY_WOULD_CROSS;
	h_apply(&H, &e);
	const struct wire_exec_report *r = h_get(&H, WIRE_EXEC_REPORT, 0);
	cr_assert(eq(u8, r->exec, WIRE_EXEC_REJECTED));
	cr_assert(eq(u16, r->reason, WIRE_REASON_POST_ONLY_WOULD_CROSS));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000));
	cr_assert(eq(u32, info(7).orders, 0));
	cr_assert(eq(u32, oms_inflight_count(H.oms), 0));
}

/* Goal: market buy spends at most the client's spend; the unused budget is released on
 * DONE. Fees are charged on cumulative notional, so rounding is paid once. */
Test(oms_saga, market_buy_budget_and_release)
{
	struct wire_new_order m;
	h_new_order_msg(&m, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 0, 10000);
	h_apply(&H, &m);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 0, 0);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_FILL, 20000, 30, 0, 2); /* 6000 + fee 3 */
	h_ev(&H, o, S_BTCUSD, WIRE_EV_FILL, 30000, 10, 0, 2); /* 3000, cum fee 5 → +2 */
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 9005));
	h_ev_contra(&H, o, S_BTCUSD, WIRE_EV_CANCELLED, (struct wire_oid){ 0, 0 },
		    WIRE_CAUSE_NO_LIQUIDITY, 0, 0, 0);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000 - 9005));
	cr_assert(eq(i64, h_total(&H, 7, A_BTC), 1000040));
	cr_assert(eq(i64, oms_fees_get(H.oms, A_USD), 5));
}

/* Goal: RESTED reports OPEN; a partial fill then CANCELLED + DONE releases the rest. */
Test(oms_saga, partial_fill_then_cancel_releases_remainder)
{
	h_limit(&H, 8, 1, S_BTCUSD, WIRE_SIDE_SELL, 20000, 100);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_RESTED, 20000, 100, 100, 0);
	cr_assert(eq(u8, ((const struct wire_exec_report *)h_get(&H, WIRE_EXEC_REPORT, 0))->exec,
		     WIRE_EXEC_OPEN));
	h_ev(&H, o, S_BTCUSD, WIRE_EV_FILL, 20000, 30, 70, 1);
	cr_assert(eq(i64, h_reserved(&H, 8, A_BTC), 70));
	h_ev_contra(&H, o, S_BTCUSD, WIRE_EV_CANCELLED, (struct wire_oid){ 0, 0 },
		    WIRE_CAUSE_EXPIRED, 0, 70, 0);
	cr_assert(eq(i64, h_reserved(&H, 8, A_BTC), 0));
	const struct wire_exec_report *r = h_get(&H, WIRE_EXEC_REPORT, 0);
	cr_assert(eq(u8, r->cause, WIRE_CAUSE_EXPIRED));
	h_ev(&H, o, S_BTCUSD, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(eq(i64, h_total(&H, 8, A_BTC), 1000000 - 30));
	cr_assert(oms_actor_flat(oms_actor_find(H.oms, 8)));
}

/* Goal: cancel: Ack with its own id, CancelToME names req and target; the target's
 * CANCELLED (contra = req) resolves the request; DONE frees the order. */
Test(oms_saga, cancel_flow)
{
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	h_cancel(&H, 7, 2, 1);
	const struct wire_modify *c = h_get(&H, WIRE_CANCEL_TO_ME, 0);
	cr_assert(c != NULL);
	cr_assert(wire_oid_eq(c->target, o));
	cr_assert(wire_oid_eq(c->req, h_oid(&H, 7, 2)));
	cr_assert(wire_oid_eq(h_last_ack_oid(&H), c->req));
	cr_assert(eq(u32, info(7).sagas, 1));
	h_cancel(&H, 7, 3, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_BACKPRESSURE));
	h_ev_contra(&H, o, S_BTCUSD, WIRE_EV_CANCELLED, c->req, WIRE_CAUSE_USER, 0, 100, 0);
	cr_assert(eq(u32, info(7).sagas, 0));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
	h_ev(&H, o, S_BTCUSD, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(oms_actor_flat(oms_actor_find(H.oms, 7)));
	h_cancel(&H, 7, 4, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_UNKNOWN_ORDER));
}

/* Goal: a refused cancel (CANCEL_REJECTED oid = req) is terminal for the request only. */
Test(oms_saga, cancel_rejected)
{
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	h_cancel(&H, 7, 2, 1);
	struct wire_oid req = h_last_ack_oid(&H);
	h_ev_contra(&H, req, S_BTCUSD, WIRE_EV_CANCEL_REJECTED, o, 0, WIRE_REASON_TOO_LATE, 0, 0);
	const struct wire_exec_report *r = h_get(&H, WIRE_EXEC_REPORT, 0);
	cr_assert(eq(u8, r->exec, WIRE_EXEC_CANCEL_REJECTED));
	cr_assert(eq(u64, r->cl_ord_id, 2));
	cr_assert(eq(u32, info(7).sagas, 0));
	cr_assert(eq(u32, info(7).live, 1));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 20010));
	h_cancel(&H, 7, 3, 1); /* the target accepts a new modify again */
	cr_assert(eq(u32, h_count(&H, WIRE_CANCEL_TO_ME), 1));
}

/* Goal: amend-down reduces the reservation to what the leaves can cost; amend up is
 * refused AMEND_NOT_DOWN. */
Test(oms_saga, amend_down)
{
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	h_amend(&H, 7, 2, 1, 200);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_AMEND_NOT_DOWN));
	h_amend(&H, 7, 3, 1, 50);
	const struct wire_modify *a = h_get(&H, WIRE_AMEND_TO_ME, 0);
	cr_assert(a != NULL);
	cr_assert(eq(i64, a->qty, 50));
	h_ev_contra(&H, o, S_BTCUSD, WIRE_EV_AMENDED, a->req, 0, 0, 50, 50);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 10005));
	cr_assert(eq(u32, info(7).sagas, 0));
	cr_assert(eq(u32, info(7).orders, 1));
}

/* Goal: cancel-replace: the replacement reserves on its own; the old order's reservation is
 * released on its DONE; a refused replace releases the replacement. */
Test(oms_saga, cancel_replace)
{
	h_limit(&H, 8, 1, S_BTCUSD, WIRE_SIDE_SELL, 20000, 100);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_RESTED, 20000, 100, 100, 0);
	h_replace(&H, 8, 2, 1, 21000, 80);
	const struct wire_modify *r = h_get(&H, WIRE_REPLACE_TO_ME, 0);
	cr_assert(r != NULL);
	cr_assert(eq(i64, r->px, 21000));
	cr_assert(eq(i64, h_reserved(&H, 8, A_BTC), 180));
	struct wire_oid req = r->req;
	h_ev_contra(&H, o, S_BTCUSD, WIRE_EV_CANCELLED, req, WIRE_CAUSE_REPLACED, 0, 100, 0);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(eq(i64, h_reserved(&H, 8, A_BTC), 80));
	h_ev_contra(&H, req, S_BTCUSD, WIRE_EV_ACCEPTED, o, 0, 0, 0, 80);
	h_ev(&H, req, S_BTCUSD, WIRE_EV_RESTED, 21000, 80, 80, 0);
	cr_assert(eq(u32, info(8).live, 1));
	cr_assert(eq(u32, info(8).sagas, 0));
	/* Now a refused replace of the replacement. */
	h_replace(&H, 8, 3, 2, 22000, 50);
	struct wire_oid req2 = h_last_ack_oid(&H);
	cr_assert(eq(i64, h_reserved(&H, 8, A_BTC), 130));
	h_ev_contra(&H, req2, S_BTCUSD, WIRE_EV_CANCEL_REJECTED, req, 0, WIRE_REASON_TOO_LATE, 0, 0);
	cr_assert(eq(i64, h_reserved(&H, 8, A_BTC), 80));
	cr_assert(eq(u32, info(8).sagas, 0));
}

struct collect {
	uint32_t n;
	_Alignas(8) uint8_t msgs[16][128];
	enum wire_dest dest[16];
};

static void
collect_fn(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct collect *c = ctx;
	cr_assert(c->n < 16);
	memcpy(c->msgs[c->n], msg, msg->length);
	c->dest[c->n++] = dest;
}

/* Goal: the PENDING sagas are enumerable from state and rebuild byte-identical egress
 * (the bridge's durable work queue, seed). */
Test(oms_saga, pending_foreach_rebuilds_queue)
{
	H.keep = true;
	h_clear(&H);
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 5);
	h_limit(&H, 8, 1, S_BTCUSD, WIRE_SIDE_SELL, 20000, 100);
	struct wire_oid o = h_oid(&H, 8, 1);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	h_cancel(&H, 8, 2, 1);
	struct collect c = { 0 };
	uint32_t n = oms_pending_foreach(H.oms, collect_fn, &c);
	cr_assert(eq(u32, n, 3));
	/* Each rebuilt message equals one emitted at admission. */
	for (uint32_t i = 0; i < n; i++) {
		const struct wire_msg_hdr *m = (const void *)c.msgs[i];
		cr_assert(eq(int, c.dest[i], WIRE_DEST_ME));
		bool found = false;
		for (uint32_t k = 0; k < H.n; k++)
			if (memcmp(H.out[k].msg, m, m->length) == 0)
				found = true;
		cr_assert(found, "rebuilt %s not identical", wire_type_name(m->type));
	}
	const struct wire_submit *eth = NULL;
	for (uint32_t i = 0; i < n; i++) {
		const struct wire_submit *s = (const void *)c.msgs[i];
		if (s->hdr.type == WIRE_SUBMIT && s->symbol == S_ETHUSD)
			eth = s;
	}
	cr_assert(eth != NULL);
	cr_assert(eq(u16, eth->hdr.shard, 1));
}

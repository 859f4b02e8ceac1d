/* SPDX-License-Identifier: Apache-2.0 */
/* Admission: exact debit, every NAK reason, session dedup, egress sequence, rate limit (and
 * its bucket across eviction). */
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
}

static void
teardown(void)
{
	h_fini(&H);
}

TestSuite(oms_admit, .init = setup, .fini = teardown);

/* Goal: a limit buy reserves price×qty/base_unit + the max(maker, taker) fee, exactly.
 * Method: buy 100 @ 20000 on BTCUSD (base_unit 100, fees 2/5 bps): 20000 + 10. */
Test(oms_admit, limit_buy_reserves_notional_plus_max_fee)
{
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 1));
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 1));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 20010));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000));
	const struct wire_submit *s = h_get(&H, WIRE_SUBMIT, 0);
	cr_assert(eq(int, h_dest(&H, WIRE_SUBMIT, 0), WIRE_DEST_ME));
	cr_assert(eq(u16, s->hdr.shard, 0));
	cr_assert(wire_oid_eq(s->oid, wire_oid_make(0, 7, 1)));
	cr_assert(eq(i64, s->px, 20000));
	cr_assert(eq(i64, s->qty, 100));
	cr_assert(eq(u64, s->sent_ns, H.oms->c.now_ns)); /* stamped: the ME expires it */
	cr_assert(ne(u64, s->sent_ns, 0));
	const struct wire_ack *a = h_get(&H, WIRE_ACK, 0);
	cr_assert(eq(int, h_dest(&H, WIRE_ACK, 0), WIRE_DEST_CLIENT));
	cr_assert(wire_oid_eq(a->oid, s->oid));
	cr_assert(eq(u64, a->seq, 1));
	cr_assert(eq(u32, oms_inflight_count(H.oms), 1));
}

/* Goal: a limit sell reserves the base quantity. */
Test(oms_admit, limit_sell_reserves_base_qty)
{
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_SELL, 20000, 100);
	cr_assert(eq(i64, h_reserved(&H, 7, A_BTC), 100));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
}

/* Goal: a market buy reserves the client's spend and sends the ME the largest notional
 * whose notional + taker fee fits it; a market sell reserves base qty.
 * Method: spend 10000 at taker 5 bps → budget 9995 (9995 + ceil(4.9975) = 10000). */
Test(oms_admit, market_orders_reserve_exactly)
{
	struct wire_new_order m;
	h_new_order_msg(&m, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 0, 10000);
	h_apply(&H, &m);
	const struct wire_submit *s = h_get(&H, WIRE_SUBMIT, 0);
	cr_assert(s != NULL);
	cr_assert(eq(i64, s->quote_qty, 9995));
	cr_assert(eq(i64, s->qty, 0));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 10000));
	int64_t fee;
	money_fee(s->quote_qty, 5, &fee);
	cr_assert(le(i64, s->quote_qty + fee, 10000));
	money_fee(s->quote_qty + 1, 5, &fee);
	cr_assert(gt(i64, s->quote_qty + 1 + fee, 10000));
	h_new_order_msg(&m, 7, 2, S_BTCUSD, WIRE_SIDE_SELL, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 30, 0);
	h_apply(&H, &m);
	cr_assert(eq(i64, h_reserved(&H, 7, A_BTC), 30));
}

/* Goal: INSUFFICIENT_FUNDS refuses without debiting anything and emits no SubmitToME. */
Test(oms_admit, insufficient_funds_no_debit)
{
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 1000000, 1000);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_INSUFFICIENT_FUNDS));
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 0));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
	const struct wire_nak *n = h_get(&H, WIRE_NAK, 0);
	cr_assert(eq(u64, n->seq, 1));
	cr_assert(eq(u64, n->cl_ord_id, 1));
}

/* Goal: every malformed field is a BAD_REQUEST-family NAK, never a crash. */
Test(oms_admit, bad_requests)
{
	struct {
		uint8_t side, type, tif;
		int64_t px, qty, quote;
		uint16_t reason;
	} cases[] = {
		{ 0, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1000, 10, 0, WIRE_REASON_BAD_REQUEST },
		{ 3, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1000, 10, 0, WIRE_REASON_BAD_REQUEST },
		{ WIRE_SIDE_BUY, 9, WIRE_TIF_GTC, 1000, 10, 0, WIRE_REASON_BAD_REQUEST },
		{ WIRE_SIDE_BUY, WIRE_ORD_LIMIT, 0, 1000, 10, 0, WIRE_REASON_BAD_REQUEST },
		{ WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, -10, 10, 0, WIRE_REASON_BAD_REQUEST },
		{ WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1000, 0, 0, WIRE_REASON_BAD_REQUEST },
		{ WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1000, 10, 5, WIRE_REASON_BAD_REQUEST },
		{ WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1005, 10, 0, WIRE_REASON_OFF_TICK },
		{ WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1000, 15, 0, WIRE_REASON_OFF_LOT },
		{ WIRE_SIDE_BUY, WIRE_ORD_MARKET, WIRE_TIF_GTC, 0, 0, 100, WIRE_REASON_BAD_REQUEST },
		{ WIRE_SIDE_BUY, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 10, 0, WIRE_REASON_BAD_REQUEST },
		{ WIRE_SIDE_SELL, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 0, 100, WIRE_REASON_BAD_REQUEST },
		{ WIRE_SIDE_BUY, WIRE_ORD_MARKET, WIRE_TIF_IOC, 10, 0, 100, WIRE_REASON_BAD_REQUEST },
		{ WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, INT64_MAX - 3, 100000000, 0,
		  WIRE_REASON_OFF_TICK },
		{ WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, INT64_MAX / 10 * 10, 1000000000,
		  0, WIRE_REASON_OVERFLOW },
		{ WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 1000, 10, 0, WIRE_REASON_BAD_REQUEST },
	};
	for (uint32_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct wire_new_order m;
		h_new_order_msg(&m, 7, 100 + i, S_BTCUSD, cases[i].side, cases[i].type, cases[i].tif,
				cases[i].px, cases[i].qty, cases[i].quote);
		h_apply(&H, &m);
		cr_assert(eq(u16, h_last_nak(&H), cases[i].reason), "case %u", i);
		cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 0));
	}
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
	cr_assert(eq(i64, h_reserved(&H, 7, A_BTC), 0));
}

/* Goal: unknown symbol, halted symbol and kill-switches refuse with their reasons. */
Test(oms_admit, symbol_halt_and_kill)
{
	h_limit(&H, 7, 1, 99, WIRE_SIDE_BUY, 1000, 10);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_UNKNOWN_SYMBOL));
	struct wire_symbol_status_msg st;
	memset(&st, 0, sizeof(st));
	st.hdr.type = WIRE_SYMBOL_STATUS;
	st.hdr.length = sizeof(st);
	st.symbol = S_BTCUSD;
	st.status = WIRE_SYM_HALTED;
	h_apply(&H, &st);
	h_limit(&H, 7, 2, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_HALTED));
	st.status = WIRE_SYM_TRADING;
	h_apply(&H, &st);
	struct wire_kill_switch k;
	memset(&k, 0, sizeof(k));
	k.hdr.type = WIRE_KILL_SWITCH;
	k.hdr.length = sizeof(k);
	k.id = 7;
	k.scope = WIRE_KILL_USER;
	k.engage = 1;
	h_apply(&H, &k);
	h_limit(&H, 7, 3, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_KILLED));
	k.engage = 0;
	h_apply(&H, &k);
	k.id = S_BTCUSD;
	k.scope = WIRE_KILL_SYMBOL;
	k.engage = 1;
	h_apply(&H, &k);
	h_limit(&H, 7, 4, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_KILLED));
	k.engage = 0;
	h_apply(&H, &k);
	h_limit(&H, 7, 5, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 1));
}

/* Goal: over the in-flight cap new orders NAK BACKPRESSURE with no debit; cancels still go.
 * Method: inflight_max 2; three orders. */
Test(oms_admit, backpressure_over_inflight_cap)
{
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.inflight_max = 2;
	h_init(&H, &l);
	h_std_symbols(&H);
	h_user(&H, 7, 1000000, 1000000);
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	h_limit(&H, 7, 2, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	int64_t r = h_reserved(&H, 7, A_USD);
	h_limit(&H, 7, 3, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_BACKPRESSURE));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), r));
	h_cancel(&H, 7, 4, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_CANCEL_TO_ME), 1));
	/* Transient refusals are not remembered: the retry succeeds once there is room. */
	h_ev(&H, h_oid(&H, 7, 1), S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&H, h_oid(&H, 7, 2), S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_limit(&H, 7, 3, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 1));
}

/* Goal: the per-user open-orders bound refuses with CAPACITY. */
Test(oms_admit, per_user_capacity)
{
	for (uint64_t i = 0; i < H.lim.orders_per_user; i++) {
		h_limit(&H, 7, 1 + i, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
		cr_assert(eq(u32, h_count(&H, WIRE_ACK), 1));
	}
	h_limit(&H, 7, 999, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_CAPACITY));
}

/* Goal: a duplicate (user, clientOrderId) gets the original outcome, not a second order;
 * a reused id with other content is refused DUPLICATE_REQUEST. */
Test(oms_admit, duplicate_answers_original_outcome)
{
	h_limit(&H, 7, 42, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	struct wire_oid first = h_last_ack_oid(&H);
	int64_t r = h_reserved(&H, 7, A_USD);
	h_limit(&H, 7, 42, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 0));
	cr_assert(wire_oid_eq(h_last_ack_oid(&H), first));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), r));
	h_limit(&H, 7, 42, S_BTCUSD, WIRE_SIDE_BUY, 2000, 10);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_DUPLICATE_REQUEST));
	/* A final refusal is remembered too. */
	h_limit(&H, 7, 43, S_BTCUSD, WIRE_SIDE_BUY, 1001, 10);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_OFF_TICK));
	h_limit(&H, 7, 43, S_BTCUSD, WIRE_SIDE_BUY, 1001, 10);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_OFF_TICK));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_DUPLICATES), 3));
}

/* Goal: the dedup window (per user) is bounded: the oldest outcome is forgotten first. */
Test(oms_admit, dedup_window_bounded)
{
	for (uint64_t i = 0; i < H.lim.dedup_per_user + 1; i++)
		h_limit(&H, 7, 1000 + i, S_ETHUSD, WIRE_SIDE_BUY, 10, 1000000000);
	/* All were refused (funds: not remembered); now fill the window with final NAKs. */
	for (uint64_t i = 0; i < H.lim.dedup_per_user + 1; i++)
		h_limit(&H, 7, 5000 + i, 99, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_DUPLICATES), 0));
	h_limit(&H, 7, 5000 + H.lim.dedup_per_user, 99, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_DUPLICATES), 1));
	h_limit(&H, 7, 5000, 99, WIRE_SIDE_BUY, 10, 1); /* evicted from the window */
	cr_assert(eq(u64, h_ctr(&H, OMS_C_DUPLICATES), 1));
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_STALE_REQUEST)); /* below the floor */
}

/* Goal (issue 15, chaos kill-all): a request whose outcome the window forgot is never
 * executed again, however late its re-send comes: ids at or below the user's floor (the
 * highest id evicted) that the window does not hold are refused STALE_REQUEST, remembered
 * nowhere (so they push nothing out), orders and modifies alike; ids above it are served.
 * The floor travels with the user's state (the flush) and comes back with a hydration.
 * Method: 17 admitted orders (window 16), re-send the first: STALE, nothing reserved or
 * sent; an unseen id below the floor: STALE; a cancel at the floor: STALE; a fresh id: a
 * new order; the state built for a flush carries the floor; a second user hydrated with a
 * floor of 900 refuses 900 and takes 901. */
Test(oms_admit, forgotten_ids_refused_stale)
{
	uint32_t w = H.lim.dedup_per_user;
	for (uint64_t i = 0; i <= w; i++)
		h_limit(&H, 7, 100 + i, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_SUBMITS), w + 1));
	int64_t r = h_reserved(&H, 7, A_USD);
	h_limit(&H, 7, 100, S_ETHUSD, WIRE_SIDE_BUY, 10, 1); /* executed, forgotten */
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_STALE_REQUEST));
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 0));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), r));
	h_limit(&H, 7, 50, S_ETHUSD, WIRE_SIDE_BUY, 10, 1); /* never seen, but below */
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_STALE_REQUEST));
	h_cancel(&H, 7, 99, 101);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_STALE_REQUEST));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_STALE_REQUESTS), 3));
	/* The window still answers what it holds (nothing was pushed out by the refusals). */
	h_limit(&H, 7, 101, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 1));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_DUPLICATES), 1));
	h_limit(&H, 7, 100 + w + 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 1));
	/* 101 left the window with that one: the floor moved up and travels in a flush. */
	struct wire_user_state st;
	oms_build_user_state(H.oms, oms_actor_find(H.oms, 7), &st);
	cr_assert(eq(u64, st.cl_ord_floor, 101));

	struct wire_user_state row = {.user = 8, .version = 3, .cl_ord_floor = 900,
				      .balance_count = 1,
				      .balances[0] = {.asset = A_USD, .total = 1000000}};
	h_hydrate_state(&H, &row);
	cr_assert(eq(u64, oms_actor_find(H.oms, 8)->cl_ord_floor, 900));
	h_limit(&H, 8, 900, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_STALE_REQUEST));
	h_limit(&H, 8, 901, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 1));
}

/* Goal: every Ack/Nak/ExecReport to a user carries the next per-user egress seq. */
Test(oms_admit, egress_sequence_on_every_report)
{
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	h_limit(&H, 7, 2, S_BTCUSD, WIRE_SIDE_BUY, 1001, 10);
	const struct wire_nak *n = h_get(&H, WIRE_NAK, 0);
	cr_assert(eq(u64, n->seq, 2));
	struct wire_oid o = h_oid(&H, 7, 1);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&H, o, S_BTCUSD, WIRE_EV_RESTED, 1000, 10, 10, 0);
	const struct wire_exec_report *e = h_get(&H, WIRE_EXEC_REPORT, 0);
	cr_assert(eq(u64, e->seq, 3));
	cr_assert(eq(u8, e->exec, WIRE_EXEC_OPEN));
}

/* Goal: token bucket per tier, refilled by cluster time only.
 * Method: tier 0 = 2 req/s burst 2; three at once → third RATE_LIMITED; +0.5 s → one more. */
Test(oms_admit, rate_limit_token_bucket)
{
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.tiers[0] = (struct oms_tier){ 2, 2 };
	h_init(&H, &l);
	h_std_symbols(&H);
	h_user(&H, 7, 1000000, 1000000);
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 7, 3, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_RATE_LIMITED));
	H.now += SEC / 2;
	h_limit(&H, 7, 3, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 1));
	h_limit(&H, 7, 4, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_RATE_LIMITED));
}

/* A shard whose tier 0 allows 1 request a second, burst 2, and whose idle users go after
 * 0.1 s (evictions within a second of cluster time). */
static void
rl_setup(void)
{
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.tiers[0] = (struct oms_tier){ 1, 2 };
	l.ttl_ns = SEC / 10;
	l.sweep_interval_ns = SEC / 10;
	h_init(&H, &l);
	h_std_symbols(&H);
}

/* User 7 spends its whole bucket (two orders, which the ME rejects, so 7 is flat again), goes
 * idle past the TTL and is evicted: flushed and dropped. Returns the state its flush wrote
 * (as the row holds it: the version the flush made). */
static struct wire_user_state
rl_spend_and_evict(void)
{
	h_user(&H, 7, 1000000, 1000000);
	uint64_t spent_ns = H.now;
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_SUBMITS), 2));
	h_ev(&H, h_oid(&H, 7, 1), S_ETHUSD, WIRE_EV_REJECTED, 0, 0, 0, 0);
	h_ev(&H, h_oid(&H, 7, 2), S_ETHUSD, WIRE_EV_REJECTED, 0, 0, 0, 0);
	H.now += SEC / 5;
	h_tick(&H);
	const struct wire_begin_dehydrate *bd = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(bd != NULL, "7 is evicted");
	struct wire_user_state st = bd->state;
	cr_assert(eq(i64, st.rl_tokens, 0)); /* empty ... */
	cr_assert(eq(u64, st.rl_tokens_ns, spent_ns)); /* ... as of the second order */
	h_flush(&H, 7, bd->epoch, WIRE_FLUSH_OK, st.version + 1);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_ABSENT));
	st.version++;
	return st;
}

/* Goal (issue 17): the rate-limit bucket is part of the user's saved state: a user evicted
 * with an empty bucket and hydrated again within the second is still limited (with a full
 * bucket at hydration, as before, its next order went through).
 * Method: tier 1/s burst 2; spend both tokens, evict (0.2 s later), the next order parks,
 * hydrate with the flushed state: RATE_LIMITED, nothing submitted. */
Test(oms_admit, rate_limit_bucket_survives_eviction)
{
	rl_setup();
	struct wire_user_state row = rl_spend_and_evict();
	h_limit(&H, 7, 3, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_HYDRATING));
	h_hydrate_state(&H, &row);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_RATE_LIMITED));
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_SUBMITS), 2));
}

/* Goal: a restored bucket refills from the time it was saved, by cluster time.
 * Method: as above, but 1.2 s after the spend: the parked order goes through (1.2 tokens)
 * and the next one is refused (0.2 left; a full bucket would have taken it). */
Test(oms_admit, rate_limit_bucket_refills_from_its_saved_time)
{
	rl_setup();
	struct wire_user_state row = rl_spend_and_evict();
	H.now += SEC;
	h_limit(&H, 7, 3, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_hydrate_state(&H, &row);
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 1));
	h_limit(&H, 7, 4, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_RATE_LIMITED));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_SUBMITS), 3));
}

/* Goal: a saved bucket is clamped, never trusted: at most the tier's burst (the tier may
 * have changed), at least empty, and its time never after the shard's (a shard whose clock
 * ran ahead saved it: unclamped, now - tokens_ns would wrap and fill the bucket); time 0
 * means nothing was saved (a full bucket, rows before migration 0007).
 * Method: tier 1/s burst 2. User 8: 100 tokens, time 1000 s ahead → 2 tokens as of now (two
 * orders, the third refused). User 9: -5 tokens, time ahead → empty as of now (refused; one
 * second later one goes). User 10: 0 tokens at time 0 → full (two orders). */
Test(oms_admit, rate_limit_saved_bucket_clamped)
{
	rl_setup();
	struct wire_user_state row = {.version = 3, .balance_count = 1,
				      .balances[0] = {.asset = A_USD, .total = 1000000}};
	row.user = 8;
	row.rl_tokens = 100 * (int64_t)SEC;
	row.rl_tokens_ns = H.now + 1000 * SEC;
	h_hydrate_state(&H, &row);
	const struct oms_actor *a = oms_actor_find(H.oms, 8);
	cr_assert(a != NULL);
	cr_assert(eq(i64, a->tokens, 2 * (int64_t)SEC));
	cr_assert(eq(u64, a->tokens_ns, H.now));
	for (uint64_t cl = 1; cl <= 3; cl++)
		h_limit(&H, 8, cl, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_RATE_LIMITED));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_SUBMITS), 2));

	row.user = 9;
	row.rl_tokens = -5;
	h_hydrate_state(&H, &row);
	a = oms_actor_find(H.oms, 9);
	cr_assert(eq(i64, a->tokens, 0));
	cr_assert(eq(u64, a->tokens_ns, H.now));
	h_limit(&H, 9, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_RATE_LIMITED));
	H.now += SEC;
	h_limit(&H, 9, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 1));

	row.user = 10;
	row.rl_tokens = 0;
	row.rl_tokens_ns = 0;
	h_hydrate_state(&H, &row);
	a = oms_actor_find(H.oms, 10);
	cr_assert(eq(i64, a->tokens, 2 * (int64_t)SEC));
	h_limit(&H, 10, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 10, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_SUBMITS), 5));
}

/* Goal: malformed messages (wrong length, unknown type, null user) never crash. */
Test(oms_admit, malformed_messages_counted)
{
	struct wire_new_order m;
	h_new_order_msg(&m, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1000, 10, 0);
	m.hdr.length = 40;
	h_apply(&H, &m);
	m.hdr.length = sizeof(m);
	m.hdr.type = 999;
	h_apply(&H, &m);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_BAD_MSGS), 2));
	h_new_order_msg(&m, 0, 1, S_BTCUSD, WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1000, 10, 0);
	h_apply(&H, &m);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_BAD_REQUEST));
}

/* Goal: random bytes in every ingress type never crash and never break invariants. */
Test(oms_admit, random_garbage_is_harmless)
{
	static const uint16_t types[] = { WIRE_NEW_ORDER, WIRE_CANCEL, WIRE_AMEND,
					  WIRE_CANCEL_REPLACE, WIRE_ME_EVENT, WIRE_ME_RESULT,
					  WIRE_OPEN_ORDERS_SNAPSHOT, WIRE_HYDRATE_USER,
					  WIRE_FLUSH_COMPLETE, WIRE_ROUTING_CONFIG,
					  WIRE_SYMBOL_CONFIG, WIRE_SYMBOL_STATUS, WIRE_KILL_SWITCH,
					  WIRE_TRANSFER, WIRE_WHALE_PIN, WIRE_USER_ADMIN, WIRE_TICK };
	struct prng p;
	prng_seed(&p, 1234);
	uint64_t buf[1024 / 8];
	for (int i = 0; i < 20000; i++) {
		for (uint32_t k = 0; k < ARRAY_SIZE(buf); k++)
			buf[k] = prng_next(&p);
		uint8_t *b = (uint8_t *)buf;
		/* Small numbers in the low bytes make the fields plausible more often. */
		for (uint32_t k = 8; k < 1024; k++)
			if (prng_chance(&p, 3, 4))
				b[k] &= 3;
		struct wire_msg_hdr *hd = (void *)buf;
		hd->type = types[prng_below(&p, ARRAY_SIZE(types))];
		hd->length = wire_type_size(hd->type);
		hd->shard = 0;
		if (hd->type == WIRE_ROUTING_CONFIG)
			continue; /* would change ownership; covered in oms_route */
		h_apply(&H, buf);
		H.now += prng_below(&p, SEC);
	}
}

/* Goal: unusable limits are refused; init works in caller memory and is reproducible. */
Test(oms_init, limits_and_footprint)
{
	struct oms_limits l;
	h_limits(&l);
	cr_assert(eq(int, oms_limits_check(&l), 0));
	cr_assert(gt(sz, oms_footprint(&l), sizeof(struct oms)));
	struct oms_limits bad = l;
	bad.users_max = 0;
	cr_assert(eq(sz, oms_footprint(&bad), 0));
	bad = l;
	bad.assets_per_user = WIRE_BALANCES_MAX + 1;
	cr_assert(eq(int, oms_limits_check(&bad), -EINVAL));
	bad = l;
	bad.sweep_scan_max = bad.sweep_evict_max - 1;
	cr_assert(eq(int, oms_limits_check(&bad), -EINVAL));
	bad = l;
	bad.releases_max = 0;
	cr_assert(eq(int, oms_limits_check(&bad), -EINVAL));
	bad = l;
	bad.tiers[1] = (struct oms_tier){ 5, 0 };
	cr_assert(eq(int, oms_limits_check(&bad), -EINVAL));
	size_t fp = oms_footprint(&l);
	uint8_t *mem = aligned_alloc(64, fp + 64);
	struct oms *o;
	cr_assert(eq(int, oms_init(&o, mem + 4, &l), -EINVAL)); /* misaligned */
	cr_assert(eq(int, oms_init(&o, mem, &bad), -EINVAL));
	cr_assert(eq(int, oms_init(&o, mem, &l), 0));
	uint64_t h1 = oms_state_hash(o);
	memset(mem, 0x5a, fp);
	cr_assert(eq(int, oms_init(&o, mem, &l), 0));
	cr_assert(eq(u64, oms_state_hash(o), h1)); /* init does not depend on memory contents */
	cr_assert(eq(u32, oms_resident_count(o), 0));
	cr_assert(eq(int, oms_check_invariants(o), 0));
	free(mem);
}

/* Goal: wall-clock use is impossible by construction: the only time is now_ns in the
 * entries, so the same entries applied at different real times give the same state. */
Test(oms_init, no_wall_clock)
{
	struct h A, B;
	h_init(&A, NULL);
	h_init(&B, NULL);
	struct h *both[2] = { &A, &B };
	for (int i = 0; i < 2; i++) {
		struct h *x = both[i];
		h_std_symbols(x);
		h_user(x, 7, 1000, 100000);
		h_limit(x, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 5);
		x->now += 30 * SEC;
		h_tick(x);
		for (volatile int spin = 0; spin < 3000000; spin++)
			; /* real time passes between the two runs */
	}
	cr_assert(eq(u64, oms_state_hash(A.oms), oms_state_hash(B.oms)));
	h_fini(&A);
	h_fini(&B);
}

/* Goal: admin edge cases answer with a reason and never crash. */
Test(oms_admit, admin_edge_cases)
{
	struct wire_user_admin ua;
	memset(&ua, 0, sizeof(ua));
	ua.hdr.type = WIRE_USER_ADMIN;
	ua.hdr.length = sizeof(ua);
	ua.user = 999;
	ua.op = 1;
	h_apply(&H, &ua);
	cr_assert(eq(u16, ((const struct wire_admin_reply *)h_get(&H, WIRE_ADMIN_REPLY, 0))->reason,
		     WIRE_REASON_NOT_FOUND));
	ua.op = 9;
	h_apply(&H, &ua);
	cr_assert(eq(u16, ((const struct wire_admin_reply *)h_get(&H, WIRE_ADMIN_REPLY, 0))->reason,
		     WIRE_REASON_BAD_REQUEST));
	struct wire_kill_switch k;
	memset(&k, 0, sizeof(k));
	k.hdr.type = WIRE_KILL_SWITCH;
	k.hdr.length = sizeof(k);
	k.scope = WIRE_KILL_USER;
	k.engage = 1;
	for (uint64_t u = 1; u <= H.lim.kill_users_max; u++) {
		k.id = 1000 + u;
		h_apply(&H, &k);
	}
	k.id = 5000;
	h_apply(&H, &k);
	cr_assert(eq(u16, ((const struct wire_admin_reply *)h_get(&H, WIRE_ADMIN_REPLY, 0))->reason,
		     WIRE_REASON_CAPACITY));
	k.engage = 0;
	k.id = 1001;
	h_apply(&H, &k); /* swap-remove keeps the others engaged */
	k.engage = 1;
	k.id = 5000;
	h_apply(&H, &k);
	cr_assert(eq(u16, ((const struct wire_admin_reply *)h_get(&H, WIRE_ADMIN_REPLY, 0))->reason,
		     WIRE_REASON_NONE));
	h_hydrate(&H, 1000 + H.lim.kill_users_max, 1, A_USD, 100000, 0, 0);
	h_limit(&H, 1000 + H.lim.kill_users_max, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_KILLED));
	/* Symbol config refusals. */
	struct wire_symbol_config sc;
	memset(&sc, 0, sizeof(sc));
	sc.hdr.type = WIRE_SYMBOL_CONFIG;
	sc.hdr.length = sizeof(sc);
	sc.symbol = S_BTCUSD;
	sc.base_asset = A_ETH; /* assets of a live symbol never change */
	sc.quote_asset = A_USD;
	sc.status = WIRE_SYM_TRADING;
	sc.tick = sc.lot = sc.base_unit = 1;
	h_apply(&H, &sc);
	cr_assert(eq(u16, ((const struct wire_admin_reply *)h_get(&H, WIRE_ADMIN_REPLY, 0))->reason,
		     WIRE_REASON_BAD_REQUEST));
	sc.symbol = 77;
	sc.tick = 3;
	sc.lot = 3;
	sc.base_unit = 2; /* tick × lot not a multiple of base_unit */
	h_apply(&H, &sc);
	cr_assert(eq(u16, ((const struct wire_admin_reply *)h_get(&H, WIRE_ADMIN_REPLY, 0))->reason,
		     WIRE_REASON_BAD_REQUEST));
}

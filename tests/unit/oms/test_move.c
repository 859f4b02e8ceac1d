/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Moving a user with open orders between OMS shards (docs/fencing.md "Moving a user with open
 * orders"): the old owner quiesces (NOT_OWNER), re-binds each live order (REBIND_TO_ME),
 * frees it on MOVED and flushes the user; the new owner hydrates the flushed state and
 * rebuilds each order from ADOPTED. Two shards in one test, the ME played by hand.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "common/hrw.h"
#include "harness.h"

static struct h A, B, C; /* A: shard 0 (old owner), B: shard 1 (new owner), C: no move */

#define U 77

static void
route(struct h *h, uint64_t epoch, uint16_t pin)
{
	struct wire_routing_config m;
	memset(&m, 0, sizeof(m));
	m.hdr.type = WIRE_ROUTING_CONFIG;
	m.hdr.length = sizeof(m);
	m.epoch = epoch;
	m.shards[m.shard_count++] = (struct wire_route_shard){ 0, WIRE_SHARD_ACTIVE, 0 };
	m.shards[m.shard_count++] = (struct wire_route_shard){ 1, WIRE_SHARD_ACTIVE, 0 };
	m.pins[0].user = U;
	m.pins[0].shard = pin;
	m.pin_count = 1;
	h_apply(h, &m);
}

static void
setup(void)
{
	struct oms_limits l;
	h_limits(&l);
	l.shard_id = 0;
	h_init(&A, &l);
	h_init(&C, &l);
	l.shard_id = 1;
	h_init(&B, &l);
	struct h *all[] = { &A, &B, &C };
	for (int i = 0; i < 3; i++) {
		h_std_symbols(all[i]);
		route(all[i], 1, 0);
	}
}

static void
teardown(void)
{
	h_fini(&A);
	h_fini(&B);
	h_fini(&C);
}

TestSuite(oms_move, .init = setup, .fini = teardown);

static uint32_t rebinds_seen;

static void
count_rebinds(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	cr_assert(eq(int, dest, WIRE_DEST_ME));
	rebinds_seen += msg->type == WIRE_REBIND_TO_ME;
}

/* The ADOPTED event the ME emits for a REBIND_TO_ME (me_rebind), in h's stream. */
static void
adopted_from(struct h *h, const struct wire_rebind *r, int64_t px, int64_t cum, int64_t leaves)
{
	struct wire_me_event e;
	const struct oms_symbol *s = oms_symbol_find(h->oms, r->symbol);
	cr_assert(s != NULL);
	h_event_msg(h, &e, h->me_seq[s->me_shard]++, r->oid, r->symbol, WIRE_EV_ADOPTED);
	e.side = WIRE_SIDE_BUY;
	e.px = px;
	e.qty = cum;
	e.leaves_qty = leaves;
	e.liquidity = WIRE_ORD_LIMIT;
	e.cause = WIRE_TIF_GTC;
	e.reason = WIRE_STP_NONE;
	e.contra.user = r->cl_ord_id;
	e.contra.shard_seq = (uint64_t)r->qty;
	e.contra_user = (uint64_t)r->reserved;
	e.trade_id = (uint64_t)r->notional_maker;
	e.notional = r->notional_taker;
	h_apply(h, &e);
}

/* Goal: a user holding a partly filled resting buy moves from shard 0 to shard 1 and trades
 * on there exactly as it would have without the move: the old owner refuses it NOT_OWNER,
 * sends REBIND_TO_ME with the order's reservation and notionals, frees the order on MOVED
 * (funds stay in the total, no report) and flushes the user; the new owner, handed that
 * state, rebuilds the order from ADOPTED (same orderId, same reservation), continues the
 * report sequence, settles the next fill and cancels it by the old orderId. Its money at
 * the end equals a shard's (C) that saw the same trades without a move. */
Test(oms_move, resting_order_moves_with_its_user)
{
	struct h *side[] = { &A, &C };
	struct wire_oid oid = { 0 };
	for (int i = 0; i < 2; i++) {
		struct h *h = side[i];
		h_user(h, U, 1000000, 1000000);
		h_limit(h, U, 1, S_ETHUSD, WIRE_SIDE_BUY, 100, 10);
		oid = h_last_ack_oid(h);
		h_ev(h, oid, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
		h_ev(h, oid, S_ETHUSD, WIRE_EV_RESTED, 100, 10, 10, 0);
		h_ev(h, oid, S_ETHUSD, WIRE_EV_FILL, 100, 4, 6, 1);
	}
	cr_assert(eq(u16, wire_oid_shard(oid), 0));
	int64_t reserved = h_reserved(&A, U, A_USD);
	int64_t total = h_total(&A, U, A_USD);
	cr_assert(gt(i64, reserved, 0));

	/* The pin moves the user to shard 1. */
	route(&A, 2, 1);
	route(&B, 2, 1);
	h_cancel(&A, U, 2, 1);
	const struct wire_nak *n = h_get(&A, WIRE_NAK, 0);
	cr_assert(n != NULL && n->reason == WIRE_REASON_NOT_OWNER && n->owner_shard == 1);
	const struct wire_rebind *r = h_get(&A, WIRE_REBIND_TO_ME, 0);
	cr_assert(r != NULL, "the open order is re-bound");
	cr_assert(eq(int, h_dest(&A, WIRE_REBIND_TO_ME, 0), WIRE_DEST_ME));
	struct wire_rebind rb = *r;
	cr_assert(wire_oid_eq(rb.oid, oid));
	cr_assert(eq(u16, rb.from_shard, 0));
	cr_assert(eq(u16, rb.to_shard, 1));
	cr_assert(eq(u64, rb.cl_ord_id, 1));
	cr_assert(eq(i64, rb.qty, 10));
	cr_assert(eq(i64, rb.reserved, reserved));
	cr_assert(eq(i64, rb.notional_maker, 400));
	cr_assert(eq(u32, h_status(&A, U), OMS_USER_RESIDENT), "not flat until MOVED");
	/* The bridge re-sends it like a saga until MOVED. */
	rebinds_seen = 0;
	cr_assert(eq(u32, oms_pending_foreach(A.oms, count_rebinds, NULL), 1));
	cr_assert(eq(u32, rebinds_seen, 1));

	/* MOVED: the order leaves shard 0 without a report; the user is flushed. */
	h_ev(&A, oid, S_ETHUSD, WIRE_EV_MOVED, 100, 4, 6, 0);
	cr_assert(eq(u32, h_count(&A, WIRE_EXEC_REPORT), 0));
	cr_assert(eq(i64, h_reserved(&A, U, A_USD), 0));
	cr_assert(eq(i64, h_total(&A, U, A_USD), total));
	cr_assert(eq(u64, h_ctr(&A, OMS_C_ORDERS_MOVED_OUT), 1));
	const struct wire_begin_dehydrate *bd = h_get(&A, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(bd != NULL, "the last MOVED flushes the user");
	struct wire_user_state st = bd->state;
	uint64_t epoch = bd->epoch;
	cr_assert(gt(u64, st.egress_seq, 0));
	h_flush(&A, U, epoch, WIRE_FLUSH_OK, st.version + 1);
	cr_assert(eq(u32, h_count(&A, WIRE_RELEASE_CLAIM), 1));
	const struct wire_release_claim *rel = h_get(&A, WIRE_RELEASE_CLAIM, 0);
	cr_assert(eq(u8, rel->handoff, 1), "the claim goes to the shard that adopts the order");
	cr_assert(eq(u16, rel->to_shard, 1));
	cr_assert(eq(u32, h_status(&A, U), OMS_USER_ABSENT));

	/* Shard 1: ADOPTED arrives before the user; it waits for the hydration. */
	adopted_from(&B, &rb, 100, 4, 6);
	cr_assert(eq(u32, h_count(&B, WIRE_HYDRATE_REQUEST), 1));
	cr_assert(eq(u64, h_ctr(&B, OMS_C_EVENTS_PARKED), 1));
	/* The old owner still held the claim at first: OWNED is asked again (an event waits). */
	h_hydrate_status(&B, U, WIRE_HYD_OWNED, 0);
	cr_assert(eq(u32, h_status(&B, U), OMS_USER_HYDRATING));
	st.version += 1;
	h_hydrate_state(&B, &st);
	cr_assert(eq(u32, h_status(&B, U), OMS_USER_RESIDENT));
	cr_assert(eq(u64, h_ctr(&B, OMS_C_ORDERS_ADOPTED), 1));
	cr_assert(eq(i64, h_reserved(&B, U, A_USD), reserved));
	cr_assert(eq(i64, h_total(&B, U, A_USD), total));
	cr_assert(eq(int, oms_check_invariants(B.oms), 0));

	/* Both go on trading: a fill, then the client cancels by its clientOrderId. */
	struct h *after[] = { &B, &C };
	for (int i = 0; i < 2; i++) {
		struct h *h = after[i];
		h_ev(h, oid, S_ETHUSD, WIRE_EV_FILL, 100, 2, 4, 1);
		const struct wire_exec_report *x = h_get(h, WIRE_EXEC_REPORT, 0);
		cr_assert(x != NULL);
		cr_assert(wire_oid_eq(x->oid, oid), "the orderId the client knows");
		if (h == &B)
			cr_assert(eq(u64, x->seq, st.egress_seq + 1), "the report sequence goes on");
		h_cancel(h, U, 3, 1);
		const struct wire_modify *c = h_get(h, WIRE_CANCEL_TO_ME, 0);
		cr_assert(c != NULL);
		cr_assert(wire_oid_eq(c->target, oid), "the target keeps its first orderId");
		cr_assert(eq(u16, wire_oid_shard(c->req), h == &B ? 1 : 0));
		struct wire_oid req = c->req;
		h_ev_contra(h, oid, S_ETHUSD, WIRE_EV_CANCELLED, req, WIRE_CAUSE_USER, 0, 4, 0);
		h_ev(h, oid, S_ETHUSD, WIRE_EV_DONE, 0, 0, 0, 0);
		cr_assert(eq(i64, h_reserved(h, U, A_USD), 0));
		cr_assert(eq(int, oms_check_invariants(h->oms), 0));
	}
	cr_assert(eq(i64, h_total(&B, U, A_USD), h_total(&C, U, A_USD)), "a move changes no money");
	cr_assert(eq(i64, h_total(&B, U, A_ETH), h_total(&C, U, A_ETH)));
	cr_assert(eq(u64, h_ctr(&B, OMS_C_ALARM_EVENT_ORDER) + h_ctr(&A, OMS_C_ALARM_EVENT_ORDER), 0));
	cr_assert(eq(u64, h_ctr(&B, OMS_C_ALARM_BAD_STATE) + h_ctr(&A, OMS_C_ALARM_BAD_STATE), 0));
	cr_assert(eq(u64, h_ctr(&B, OMS_C_ALARM_SETTLE_SHORTFALL), 0));
}

/* Goal: a user with a saga in flight is not moved until it is over (a modify's target must
 * not move under it); requests are refused meanwhile; then its orders move. */
Test(oms_move, waits_for_sagas)
{
	h_user(&A, U, 1000000, 1000000);
	h_limit(&A, U, 1, S_ETHUSD, WIRE_SIDE_BUY, 100, 10);
	struct wire_oid o1 = h_last_ack_oid(&A);
	h_ev(&A, o1, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&A, o1, S_ETHUSD, WIRE_EV_RESTED, 100, 10, 10, 0);
	h_limit(&A, U, 2, S_ETHUSD, WIRE_SIDE_BUY, 90, 10); /* PENDING */
	struct wire_oid o2 = h_last_ack_oid(&A);
	route(&A, 2, 1);
	h_limit(&A, U, 3, S_ETHUSD, WIRE_SIDE_BUY, 90, 10);
	cr_assert(eq(u16, h_last_nak(&A), WIRE_REASON_NOT_OWNER));
	cr_assert(eq(u32, h_count(&A, WIRE_REBIND_TO_ME), 0), "a saga is in flight");
	A.now += 2 * SEC;
	h_tick(&A);
	cr_assert(eq(u32, h_count(&A, WIRE_REBIND_TO_ME), 0));
	/* The saga ends (the order rests): the drain moves both. */
	h_ev(&A, o2, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&A, o2, S_ETHUSD, WIRE_EV_RESTED, 90, 10, 10, 0);
	A.now += 2 * SEC;
	h_tick(&A);
	cr_assert(eq(u32, h_count(&A, WIRE_REBIND_TO_ME), 2));
	cr_assert(eq(u32, A.oms->c.moving, 2));
	/* One order is filled whole before its REBIND reaches the ME (which then ignores it):
	 * its DONE ends it here; the other's MOVED flushes the user. */
	h_ev(&A, o1, S_ETHUSD, WIRE_EV_FILL, 100, 10, 0, 1);
	h_ev(&A, o1, S_ETHUSD, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(eq(u32, A.oms->c.moving, 1));
	h_ev(&A, o2, S_ETHUSD, WIRE_EV_MOVED, 90, 0, 10, 0);
	cr_assert(eq(u32, A.oms->c.moving, 0));
	cr_assert(eq(u32, h_count(&A, WIRE_BEGIN_DEHYDRATE), 1));
	cr_assert(eq(int, oms_check_invariants(A.oms), 0));
}

/* Goal: a move goes to its end even when routing gives the user back meanwhile (some orders
 * may report to the new owner already): the old owner keeps refusing the user, naming the
 * move's destination, re-sends its re-binds there, and flushes it after the last MOVED; the
 * new owner, hydrated for the adopted order while routing points back, is woken to move it
 * back (a second move). */
Test(oms_move, routing_flip_during_a_move)
{
	h_user(&A, U, 1000000, 1000000);
	h_limit(&A, U, 1, S_ETHUSD, WIRE_SIDE_BUY, 100, 10);
	struct wire_oid oid = h_last_ack_oid(&A);
	h_ev(&A, oid, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&A, oid, S_ETHUSD, WIRE_EV_RESTED, 100, 10, 10, 0);
	route(&A, 2, 1);
	h_limit(&A, U, 2, S_ETHUSD, WIRE_SIDE_BUY, 90, 1);
	cr_assert(eq(u32, h_count(&A, WIRE_REBIND_TO_ME), 1));
	struct wire_rebind rb = *(const struct wire_rebind *)h_get(&A, WIRE_REBIND_TO_ME, 0);
	route(&A, 3, 0); /* back to shard 0 before the ME re-bound it */
	h_limit(&A, U, 3, S_ETHUSD, WIRE_SIDE_BUY, 90, 1);
	const struct wire_nak *n = h_get(&A, WIRE_NAK, 0);
	cr_assert(n != NULL && n->reason == WIRE_REASON_NOT_OWNER && n->owner_shard == 1,
		  "still moving to shard 1");
	rebinds_seen = 0;
	oms_pending_foreach(A.oms, count_rebinds, NULL);
	cr_assert(eq(u32, rebinds_seen, 1), "the re-bind is still re-sent, to shard 1");
	h_ev(&A, oid, S_ETHUSD, WIRE_EV_MOVED, 100, 0, 10, 0);
	const struct wire_begin_dehydrate *bd = h_get(&A, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(bd != NULL, "flushed after its last MOVED although routing says shard 0");
	struct wire_user_state st = bd->state;
	h_flush(&A, U, bd->epoch, WIRE_FLUSH_OK, st.version + 1);
	cr_assert(eq(u32, h_status(&A, U), OMS_USER_ABSENT));
	/* Shard 1 adopts it (routing there points back to 0 as well), then moves it back. */
	route(&B, 2, 1);
	route(&B, 3, 0);
	adopted_from(&B, &rb, 100, 0, 10);
	st.version += 1;
	h_hydrate_state(&B, &st);
	cr_assert(eq(u64, h_ctr(&B, OMS_C_ORDERS_ADOPTED), 1));
	B.now += 2 * SEC;
	h_tick(&B);
	const struct wire_rebind *back = h_get(&B, WIRE_REBIND_TO_ME, 0);
	cr_assert(back != NULL, "the drain moves it back");
	cr_assert(eq(u16, back->from_shard, 1));
	cr_assert(eq(u16, back->to_shard, 0));
	cr_assert(wire_oid_eq(back->oid, oid));
	cr_assert(eq(int, oms_check_invariants(B.oms), 0));
	cr_assert(eq(int, oms_check_invariants(A.oms), 0));
}

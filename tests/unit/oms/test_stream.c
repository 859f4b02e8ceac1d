/* SPDX-License-Identifier: Apache-2.0 */
/* ME event streams: strictly in sequence per ME shard, duplicates ignored, gaps held with a
 * rate-limited ReplayRequest, batched StreamAcks. */
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

TestSuite(oms_stream, .init = setup, .fini = teardown);

static void
send_ev_flags(uint64_t seq, struct wire_oid oid, uint32_t sym, uint8_t ev, int64_t px,
	      int64_t qty, int64_t leaves, uint16_t flags)
{
	struct wire_me_event e;
	h_event_msg(&H, &e, seq, oid, sym, ev);
	e.hdr.flags = flags;
	e.px = px;
	e.qty = qty;
	e.leaves_qty = leaves;
	e.liquidity = 2;
	e.notional = px * qty / (sym == S_BTCUSD ? 100 : 1);
	h_apply(&H, &e);
}

static void
send_ev(uint64_t seq, struct wire_oid oid, uint32_t sym, uint8_t ev, int64_t px, int64_t qty,
	int64_t leaves)
{
	send_ev_flags(seq, oid, sym, ev, px, qty, leaves, 0);
}

/* The exec kind of the nth EXEC_REPORT of the last apply. */
static uint8_t
exec_kind(uint32_t nth)
{
	const struct wire_exec_report *r = h_get(&H, WIRE_EXEC_REPORT, nth);
	cr_assert(r != NULL);
	return r->exec;
}

/* The hdr.flags of the nth EXEC_REPORT of the last apply. */
static uint16_t
exec_flags(uint32_t nth)
{
	const struct wire_exec_report *r = h_get(&H, WIRE_EXEC_REPORT, nth);
	cr_assert(r != NULL);
	return r->hdr.flags;
}

/* Goal: the ME sends no ACCEPTED: an order's first event carries WIRE_EV_F_ENTERED and ends
 * the saga's first step (a FILL, a RESTED, or a DONE when a market buy's budget bought
 * nothing); a pending order's event without it, or the flag on an order already taken, is
 * counted as an event out of order, and applied all the same.
 * Method: three orders on one stream; the alarm counter and the user's state after each. */
Test(oms_stream, entered_flag_takes_the_order)
{
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid a = h_last_ack_oid(&H);
	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid b = h_last_ack_oid(&H);
	h_limit(&H, 7, 3, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid c = h_last_ack_oid(&H);
	struct oms_actor *u = oms_actor_find(H.oms, 7);
	cr_assert(eq(u32, u->live, 0));
	send_ev_flags(1, a, S_ETHUSD, WIRE_EV_FILL, 10, 4, 6, WIRE_EV_F_ENTERED);
	cr_assert(eq(u32, u->live, 1));
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 1)); /* FILL */
	send_ev(2, a, S_ETHUSD, WIRE_EV_RESTED, 10, 6, 6);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_EVENT_ORDER), 0));
	/* b: its first event says nothing of its entry. */
	send_ev(3, b, S_ETHUSD, WIRE_EV_RESTED, 10, 10, 10);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_EVENT_ORDER), 1));
	cr_assert(eq(u32, u->live, 2));
	/* a again says it was taken. */
	send_ev_flags(4, a, S_ETHUSD, WIRE_EV_FILL, 10, 1, 5, WIRE_EV_F_ENTERED);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_EVENT_ORDER), 2));
	/* c: taken and done in one event, nothing filled: the reservation comes back. */
	send_ev_flags(5, c, S_ETHUSD, WIRE_EV_DONE, 0, 0, 0, WIRE_EV_F_ENTERED);
	cr_assert(eq(u8, exec_kind(0), WIRE_EXEC_DONE)); /* its own report, which says done */
	cr_assert(eq(u16, exec_flags(0), WIRE_REPORT_F_DONE));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_EVENT_ORDER), 2));
	cr_assert(eq(u32, u->live, 2));
	cr_assert(eq(u32, u->order_count, 2));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, 1), 6));
}

/* Goal: the ME sends no DONE after the event that leaves nothing of an order live: that
 * event carries WIRE_EV_F_DONE, and the OMS ends the order on it as on a DONE — the client
 * sees the event's report, which says done (WIRE_REPORT_F_DONE, no DONE report after it),
 * the record is freed, the reservation released. Method: one order filled whole at once
 * (FILL entered and done), one rested then cancelled (CANCELLED done), one rested (its
 * report does not say done); the user is flat at the end. */
Test(oms_stream, done_flag_ends_the_order)
{
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid a = h_last_ack_oid(&H);
	send_ev_flags(1, a, S_ETHUSD, WIRE_EV_FILL, 10, 10, 0, WIRE_EV_F_ENTERED | WIRE_EV_F_DONE);
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 1));
	cr_assert(eq(u8, exec_kind(0), WIRE_EXEC_FILL));
	cr_assert(eq(u16, exec_flags(0), WIRE_REPORT_F_DONE));
	cr_assert(eq(u32, oms_actor_find(H.oms, 7)->order_count, 0));
	cr_assert(eq(i64, h_total(&H, 7, A_ETH), 10));

	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid b = h_last_ack_oid(&H);
	send_ev_flags(2, b, S_ETHUSD, WIRE_EV_RESTED, 10, 10, 10, WIRE_EV_F_ENTERED);
	cr_assert(eq(u8, exec_kind(0), WIRE_EXEC_OPEN));
	cr_assert(eq(u16, exec_flags(0), 0));
	h_cancel(&H, 7, 3, 2);
	struct wire_me_event c;
	h_event_msg(&H, &c, 3, b, S_ETHUSD, WIRE_EV_CANCELLED);
	c.hdr.flags = WIRE_EV_F_DONE;
	c.px = 10;
	c.qty = 10;
	c.cause = WIRE_CAUSE_USER;
	c.contra = h_last_ack_oid(&H); /* the cancel request */
	h_apply(&H, &c);
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 1));
	cr_assert(eq(u8, exec_kind(0), WIRE_EXEC_CANCELLED));
	cr_assert(eq(u16, exec_flags(0), WIRE_REPORT_F_DONE));
	cr_assert(eq(i64, ((const struct wire_exec_report *)h_get(&H, WIRE_EXEC_REPORT, 0))
				  ->leaves_qty,
			  0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_EVENT_ORDER), 0));
	cr_assert(oms_actor_flat(oms_actor_find(H.oms, 7)));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
}

/* Goal: a duplicate event (seq already applied) changes nothing — settle is idempotent. */
Test(oms_stream, duplicate_ignored)
{
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid o = h_last_ack_oid(&H);
	send_ev(1, o, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10);
	send_ev(2, o, S_ETHUSD, WIRE_EV_FILL, 10, 4, 6);
	int64_t usd = h_total(&H, 7, A_USD);
	send_ev(2, o, S_ETHUSD, WIRE_EV_FILL, 10, 4, 6);
	send_ev(1, o, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10);
	cr_assert(eq(i64, h_total(&H, 7, A_USD), usd));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_EVENTS_DUP), 2));
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 0));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, 1), 3));
}

/* Goal: a gap holds later events and asks for a replay once per interval; when the gap
 * fills the held events run in order. */
Test(oms_stream, gap_holds_and_replays)
{
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid o = h_last_ack_oid(&H);
	send_ev(2, o, S_ETHUSD, WIRE_EV_FILL, 10, 4, 6);
	cr_assert(eq(u32, h_count(&H, WIRE_REPLAY_REQUEST), 1));
	const struct wire_replay_request *r = h_get(&H, WIRE_REPLAY_REQUEST, 0);
	cr_assert(eq(u64, r->from_seq, 1));
	cr_assert(eq(u16, r->hdr.shard, 1));
	cr_assert(eq(u16, r->stream, 0));
	send_ev(3, o, S_ETHUSD, WIRE_EV_FILL, 10, 6, 0);
	cr_assert(eq(u32, h_count(&H, WIRE_REPLAY_REQUEST), 0)); /* rate-limited */
	cr_assert(eq(i64, h_total(&H, 7, A_ETH), 0));
	H.now += SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_REPLAY_REQUEST), 1)); /* gap persists: ask again */
	send_ev(1, o, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10);
	cr_assert(eq(i64, h_total(&H, 7, A_ETH), 10));
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 2));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, 1), 4));
	send_ev(4, o, S_ETHUSD, WIRE_EV_DONE, 0, 0, 0);
	cr_assert(oms_actor_flat(oms_actor_find(H.oms, 7)));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_EVENTS_HELD), 2));
}

/* Goal: each ME shard's stream has its own sequence (identified by the symbol's ME shard). */
Test(oms_stream, streams_per_me_shard)
{
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid a = h_last_ack_oid(&H);
	h_limit(&H, 7, 2, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
	struct wire_oid b = h_last_ack_oid(&H);
	send_ev(1, a, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10);
	send_ev(1, b, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 10);
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, 0), 2));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, 1), 2));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_EVENTS_DUP), 0));
}

/* Goal: StreamAck is batched: every stream_ack_every events, and on tick for the rest. */
Test(oms_stream, stream_ack_batched)
{
	H.keep = true;
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid o = h_last_ack_oid(&H);
	h_clear(&H);
	send_ev(1, o, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10);
	send_ev(2, o, S_ETHUSD, WIRE_EV_RESTED, 10, 10, 10);
	send_ev(3, o, S_ETHUSD, WIRE_EV_FILL, 10, 1, 9);
	cr_assert(eq(u32, h_count(&H, WIRE_STREAM_ACK), 0));
	send_ev(4, o, S_ETHUSD, WIRE_EV_FILL, 10, 1, 8);
	cr_assert(eq(u32, h_count(&H, WIRE_STREAM_ACK), 1));
	const struct wire_stream_ack *a = h_get(&H, WIRE_STREAM_ACK, 0);
	cr_assert(eq(u64, a->seq, 4));
	cr_assert(eq(u16, a->hdr.shard, 1));
	cr_assert(eq(int, h_dest(&H, WIRE_STREAM_ACK, 0), WIRE_DEST_ME));
	send_ev(5, o, S_ETHUSD, WIRE_EV_FILL, 10, 1, 7);
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_STREAM_ACK), 2));
	a = h_get(&H, WIRE_STREAM_ACK, 1);
	cr_assert(eq(u64, a->seq, 5));
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_STREAM_ACK), 2)); /* nothing new to ack */
}

/* Goal: events for another OMS shard or with a bad enum are counted and ignored. An event in
 * our stream naming another shard's orderId is taken as about an order of ours (one adopted
 * in a move keeps its first orderId): unknown here, it is an alarm. */
Test(oms_stream, foreign_and_bad_events)
{
	struct wire_me_event e;
	h_event_msg(&H, &e, 1, wire_oid_make(5, 7, 1), S_ETHUSD, WIRE_EV_ACCEPTED);
	h_apply(&H, &e); /* consumed in sequence; user 7 holds no order 1 adopted from shard 5 */
	cr_assert(eq(u64, h_ctr(&H, OMS_C_EVENTS_FOREIGN), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_UNKNOWN_ORDER), 1));
	h_event_msg(&H, &e, 2, h_oid(&H, 7, 1), S_ETHUSD, 99);
	h_apply(&H, &e);
	e.event = WIRE_EV_ACCEPTED;
	e.hdr.shard = 3;
	h_apply(&H, &e);
	h_event_msg(&H, &e, 2, h_oid(&H, 7, 1), 12345, WIRE_EV_ACCEPTED);
	h_apply(&H, &e);
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, 1), 2));
}

/* Goal: ME_RESULT is unsequenced and changes no money; a last_seq beyond what we applied
 * (a lost stream tail) asks for a replay. */
Test(oms_stream, me_result_changes_nothing)
{
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	uint64_t h0 = oms_state_hash(H.oms);
	struct wire_me_result r;
	memset(&r, 0, sizeof(r));
	r.hdr.type = WIRE_ME_RESULT;
	r.hdr.length = sizeof(r);
	r.oid = h_oid(&H, 7, 1);
	r.known = 1;
	h_apply(&H, &r);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_RESULTS), 1));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 101));
	cr_assert(eq(u32, h_count(&H, WIRE_REPLAY_REQUEST), 0));
	/* It names a stream seq we have not applied: the stream's tail was lost. */
	r.symbol = S_ETHUSD;
	r.last_seq = 3;
	h_apply(&H, &r);
	const struct wire_replay_request *rr = h_get(&H, WIRE_REPLAY_REQUEST, 0);
	cr_assert(rr != NULL);
	cr_assert(eq(u64, rr->from_seq, 1));
	cr_assert(eq(u16, rr->hdr.shard, 1));
	(void)h0;
}

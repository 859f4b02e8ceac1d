/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A symbol moving between ME shards with its book (docs/oms.md "Moving a symbol between ME
 * shards"): events are sequenced on the stream of the ME shard that emitted them, and the
 * routing switch (SYMBOL_CONFIG with the new me_shard) re-points the symbol's live orders to
 * the target while what still waits for the source's answer stays on the source. The ME is
 * played by hand: F (ME shard 1) is the source of S_ETHUSD, M (ME shard 2) the target.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define F 1 /* source ME shard (S_ETHUSD's in h_std_symbols) */
#define M 2 /* target ME shard */
#define MAP_VERSION 5

static struct h H, G;

static void
setup(void)
{
	h_init(&H, NULL);
	h_init(&G, NULL);
	h_std_symbols(&H);
	h_user(&H, 7, 1000000, 1000000);
	h_user(&H, 8, 1000000, 1000000);
}

static void
teardown(void)
{
	h_fini(&H);
	h_fini(&G);
}

TestSuite(oms_symbol_move, .init = setup, .fini = teardown);

/* An event as ME shard ms emits it (wire_me_event.me_shard = ms; 0 as an older build). */
static void
ev_on(struct h *h, uint16_t ms, uint64_t seq, struct wire_oid oid, uint8_t event, int64_t px,
      int64_t qty, int64_t leaves, uint16_t reason)
{
	struct wire_me_event e;
	h_event_msg(h, &e, seq, oid, S_ETHUSD, event);
	e.me_shard = ms;
	e.px = px;
	e.qty = qty;
	e.leaves_qty = leaves;
	e.reason = reason;
	if (event == WIRE_EV_FILL) {
		e.liquidity = 1;
		e.notional = px * qty; /* S_ETHUSD: base_unit 1 */
	}
	h_apply(h, &e);
}

/* User 7's buy of 10 at 10 (clientOrderId 1), accepted and resting on F (stream seqs 1, 2). */
static struct wire_oid
rest_on_f(struct h *h)
{
	h_limit(h, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid a = h_last_ack_oid(h);
	ev_on(h, F, 1, a, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	ev_on(h, F, 2, a, WIRE_EV_RESTED, 10, 10, 10, 0);
	return a;
}

/* The routing switch: S_ETHUSD's SYMBOL_CONFIG (as h_std_symbols) with me_shard = ms. */
static void
switch_to(struct h *h, uint16_t ms)
{
	struct wire_symbol_config m;
	memset(&m, 0, sizeof(m));
	m.hdr.type = WIRE_SYMBOL_CONFIG;
	m.hdr.length = sizeof(m);
	m.symbol = S_ETHUSD;
	m.base_asset = A_ETH;
	m.quote_asset = A_USD;
	m.me_shard = ms;
	m.status = WIRE_SYM_TRADING;
	m.tick = 1;
	m.lot = 1;
	m.base_unit = 1;
	m.maker_fee_bps = -1;
	m.taker_fee_bps = 4;
	m.map_version = MAP_VERSION;
	h_apply(h, &m);
	const struct wire_admin_reply *r = h_get(h, WIRE_ADMIN_REPLY, 0);
	cr_assert(r != NULL);
	cr_assert(eq(u16, r->reason, WIRE_REASON_NONE));
	cr_assert(eq(u64, r->value, MAP_VERSION)); /* the reply's value stays the map version */
}

static uint16_t
me_shard_of(const struct h *h, struct wire_oid oid)
{
	const struct oms_order *o = oms_order_find(h->oms, oid.user, wire_oid_seq(oid));
	cr_assert(o != NULL);
	return o->me_shard;
}

static const struct wire_exec_report *
last_report(const struct h *h)
{
	uint32_t n = h_count(h, WIRE_EXEC_REPORT);
	cr_assert(n > 0);
	return h_get(h, WIRE_EXEC_REPORT, n - 1);
}

/* An ADOPTED from F (seq 1) of a resting limit buy of 10 at 10: the fields the old owner's
 * REBIND_TO_ME hands over (contra, contra_user, trade_id, notional) are the caller's. */
static void
adopted_msg(struct h *h, struct wire_me_event *e, struct wire_oid oid)
{
	h_event_msg(h, e, 1, oid, S_ETHUSD, WIRE_EV_ADOPTED);
	e->me_shard = F;
	e->side = WIRE_SIDE_BUY;
	e->px = 10;
	e->leaves_qty = 10;
	e->liquidity = WIRE_ORD_LIMIT;
	e->cause = WIRE_TIF_GTC;
	e->reason = WIRE_STP_NONE;
}

/* Goal: after the switch, an event F emitted (me_shard = F) is sequenced on F's stream and
 * one M emitted on M's, each from its own seq; held events stay on their stream; an event
 * with me_shard 0 (an older build) takes the symbol's map entry as before; an out-of-range
 * me_shard is refused.
 * Method: a resting order and two pending submits on F; switch; F rejects the submits
 * SYMBOL_MOVING out of order (a gap, a hold, a replay asked of F), M fills the resting
 * order, then an event without me_shard; check each stream's next seq after each step. */
Test(oms_symbol_move, events_sequenced_on_the_emitting_shard)
{
	struct wire_oid a = rest_on_f(&H);
	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid b = h_last_ack_oid(&H);
	h_limit(&H, 7, 3, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid c = h_last_ack_oid(&H);
	switch_to(&H, M);
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, F), 3));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, M), 1));

	/* F's refusals of the frozen symbol's submits, c's ahead of b's: held on F's stream. */
	ev_on(&H, F, 4, c, WIRE_EV_REJECTED, 0, 0, 0, WIRE_REASON_SYMBOL_MOVING);
	cr_assert(eq(u32, H.oms->streams[F].held_count, 1));
	cr_assert(eq(u32, H.oms->streams[M].held_count, 0));
	const struct wire_replay_request *rr = h_get(&H, WIRE_REPLAY_REQUEST, 0);
	cr_assert(rr != NULL);
	cr_assert(eq(u16, rr->hdr.shard, F));
	cr_assert(eq(u64, rr->from_seq, 3));
	ev_on(&H, F, 3, b, WIRE_EV_REJECTED, 0, 0, 0, WIRE_REASON_SYMBOL_MOVING);
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 2));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, F), 5));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, M), 1));

	/* M trades the moved order from its own seq 1. */
	ev_on(&H, M, 1, a, WIRE_EV_FILL, 10, 4, 6, 0);
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, M), 2));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, F), 5));
	cr_assert(eq(i64, h_total(&H, 7, A_ETH), 4));

	/* No me_shard (a build before symbol moves): the symbol's map entry, M now. */
	ev_on(&H, 0, 2, a, WIRE_EV_FILL, 10, 1, 5, 0);
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, M), 3));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, 0), 1));
	cr_assert(eq(i64, h_total(&H, 7, A_ETH), 5));

	/* F's replay of its refusals is a duplicate on F's stream, not news on M's. */
	uint64_t dup = h_ctr(&H, OMS_C_EVENTS_DUP);
	ev_on(&H, F, 3, b, WIRE_EV_REJECTED, 0, 0, 0, WIRE_REASON_SYMBOL_MOVING);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_EVENTS_DUP), dup + 1));
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 0));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, M), 3));

	/* A shard id past me_shards_max: refused before it touches any stream. */
	uint64_t bad = h_ctr(&H, OMS_C_BAD_MSGS);
	ev_on(&H, H.lim.me_shards_max, 3, a, WIRE_EV_FILL, 10, 1, 4, 0);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_BAD_MSGS), bad + 1));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, M), 3));
	cr_assert(eq(i64, h_total(&H, 7, A_ETH), 5));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_UNKNOWN_ORDER), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_EVENT_ORDER), 0));
}

/* What the harness' bridge would re-drive now (oms_pending_foreach). */
static struct wire_modify redrive_mod[8];
static struct wire_submit redrive_sub[8];
static uint32_t redrive_mods, redrive_subs;

static void
redrive(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	cr_assert(eq(int, dest, WIRE_DEST_ME));
	if (msg->type == WIRE_SUBMIT) {
		cr_assert(redrive_subs < 8);
		memcpy(&redrive_sub[redrive_subs++], msg, sizeof(redrive_sub[0]));
	} else {
		cr_assert(redrive_mods < 8);
		memcpy(&redrive_mod[redrive_mods++], msg, sizeof(redrive_mod[0]));
	}
}

struct book {
	struct wire_oid o1;   /* 7: resting on F, a replacement of it in flight */
	struct wire_oid o2;   /* 7: resting on F, a cancel of it in flight */
	struct wire_oid can;  /* 7: the cancel of o2 (pending on F) */
	struct wire_oid o4;   /* 7: a submit F has not answered (pending on F) */
	struct wire_oid o5;   /* 7: resting on ME shard 0, another symbol */
	struct wire_oid rep;  /* 7: the replacement of o1 (pending on F) */
	struct wire_oid u8;   /* 8: resting on F */
};

/* User 7 and 8's orders as in struct book, F's stream applied through seq 6, then the
 * switch of S_ETHUSD to M. */
static void
build(struct h *h, struct book *b)
{
	h_limit(h, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	b->o1 = h_last_ack_oid(h);
	ev_on(h, F, 1, b->o1, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	ev_on(h, F, 2, b->o1, WIRE_EV_RESTED, 10, 10, 10, 0);
	h_limit(h, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	b->o2 = h_last_ack_oid(h);
	ev_on(h, F, 3, b->o2, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	ev_on(h, F, 4, b->o2, WIRE_EV_RESTED, 10, 10, 10, 0);
	h_cancel(h, 7, 3, 2);
	b->can = h_last_ack_oid(h);
	h_limit(h, 7, 4, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	b->o4 = h_last_ack_oid(h);
	h_limit(h, 7, 5, S_BTCUSD, WIRE_SIDE_SELL, 1000, 10);
	b->o5 = h_last_ack_oid(h);
	h_ev(h, b->o5, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(h, b->o5, S_BTCUSD, WIRE_EV_RESTED, 1000, 10, 10, 0);
	h_replace(h, 7, 6, 1, 11, 10);
	b->rep = h_last_ack_oid(h);
	h_limit(h, 8, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	b->u8 = h_last_ack_oid(h);
	ev_on(h, F, 5, b->u8, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	ev_on(h, F, 6, b->u8, WIRE_EV_RESTED, 10, 10, 10, 0);
	switch_to(h, M);
}

/* Goal: the switch re-points exactly the live orders of the moved symbol (a resting one
 * with a cancel in flight and one with a replacement in flight included) and leaves on F
 * what waits for F's answer: a pending submit, a cancel and a replacement in flight; F's
 * SYMBOL_MOVING refusals finalise each once with the reason in the client's report; a new
 * cancel of a re-pointed order goes to M; money is exact after.
 * Method: build the book, switch, check each record's me_shard, the counter and the
 * bridge's re-drive; deliver F's refusals (one twice), cancel on M, check the reports and
 * the balances. */
Test(oms_symbol_move, switch_repoints_live_orders_only)
{
	struct book b;
	build(&H, &b);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ORDERS_REPOINTED), 3));
	cr_assert(eq(u16, me_shard_of(&H, b.o1), M));
	cr_assert(eq(u16, me_shard_of(&H, b.o2), M));
	cr_assert(eq(u16, me_shard_of(&H, b.u8), M));
	cr_assert(eq(u16, me_shard_of(&H, b.can), F));
	cr_assert(eq(u16, me_shard_of(&H, b.o4), F));
	cr_assert(eq(u16, me_shard_of(&H, b.rep), F));
	cr_assert(eq(u16, me_shard_of(&H, b.o5), 0));
	/* The same config again changes nothing more. */
	switch_to(&H, M);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ORDERS_REPOINTED), 3));

	/* The bridge re-drives what waits for F to F. */
	redrive_mods = redrive_subs = 0;
	cr_assert(eq(u32, oms_pending_foreach(H.oms, redrive, NULL), 3));
	cr_assert(eq(u32, redrive_subs, 1));
	cr_assert(eq(u32, redrive_mods, 2));
	cr_assert(wire_oid_eq(redrive_sub[0].oid, b.o4));
	cr_assert(eq(u16, redrive_sub[0].hdr.shard, F));
	for (uint32_t i = 0; i < redrive_mods; i++)
		cr_assert(eq(u16, redrive_mod[i].hdr.shard, F));

	/* F refuses all three SYMBOL_MOVING (frozen), the submit's refusal twice. */
	struct wire_me_event e;
	h_event_msg(&H, &e, 7, b.can, S_ETHUSD, WIRE_EV_CANCEL_REJECTED);
	e.me_shard = F;
	e.contra = b.o2;
	e.reason = WIRE_REASON_SYMBOL_MOVING;
	h_apply(&H, &e);
	const struct wire_exec_report *r = last_report(&H);
	cr_assert(eq(u8, r->exec, WIRE_EXEC_CANCEL_REJECTED));
	cr_assert(eq(u16, r->reason, WIRE_REASON_SYMBOL_MOVING));
	cr_assert(eq(u64, r->cl_ord_id, 3));
	ev_on(&H, F, 8, b.rep, WIRE_EV_REJECTED, 0, 0, 0, WIRE_REASON_SYMBOL_MOVING);
	r = last_report(&H);
	cr_assert(eq(u8, r->exec, WIRE_EXEC_REJECTED));
	cr_assert(eq(u16, r->reason, WIRE_REASON_SYMBOL_MOVING));
	cr_assert(eq(u64, r->cl_ord_id, 6));
	ev_on(&H, F, 9, b.o4, WIRE_EV_REJECTED, 0, 0, 0, WIRE_REASON_SYMBOL_MOVING);
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 1));
	r = last_report(&H);
	cr_assert(eq(u8, r->exec, WIRE_EXEC_REJECTED));
	cr_assert(eq(u16, r->reason, WIRE_REASON_SYMBOL_MOVING));
	cr_assert(eq(u64, r->cl_ord_id, 4));
	cr_assert(eq(int, h_dest(&H, WIRE_EXEC_REPORT, 0), WIRE_DEST_CLIENT));
	ev_on(&H, F, 9, b.o4, WIRE_EV_REJECTED, 0, 0, 0, WIRE_REASON_SYMBOL_MOVING);
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 0)); /* once */
	cr_assert(eq(u32, oms_inflight_count(H.oms), 0));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, F), 10));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, M), 1));

	/* Left: o1, o2 (on M), o5 (shard 0), u8 (on M); no modify in flight. */
	cr_assert(eq(u64, oms_order_find(H.oms, 7, wire_oid_seq(b.o1))->mod_seq, 0));
	cr_assert(eq(u64, oms_order_find(H.oms, 7, wire_oid_seq(b.o2))->mod_seq, 0));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 2 * 101));
	cr_assert(eq(i64, h_reserved(&H, 7, A_BTC), 10));

	/* The client cancels o2 again: to M, which holds it now. */
	h_cancel(&H, 7, 7, 2);
	const struct wire_modify *cm = h_get(&H, WIRE_CANCEL_TO_ME, 0);
	cr_assert(cm != NULL);
	cr_assert(eq(u16, cm->hdr.shard, M));
	cr_assert(wire_oid_eq(cm->target, b.o2));
	struct wire_oid can2 = h_last_ack_oid(&H);
	h_event_msg(&H, &e, 1, b.o2, S_ETHUSD, WIRE_EV_CANCELLED);
	e.me_shard = M;
	e.contra = can2;
	e.cause = WIRE_CAUSE_USER;
	e.qty = 10;
	h_apply(&H, &e);
	ev_on(&H, M, 2, b.o2, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, M), 3));
	/* And a cancel of the other user's moved order too. */
	h_cancel(&H, 8, 2, 1);
	cm = h_get(&H, WIRE_CANCEL_TO_ME, 0);
	cr_assert(cm != NULL);
	cr_assert(eq(u16, cm->hdr.shard, M));

	/* Money: nothing traded; what is reserved is exactly what rests. */
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 101));
	cr_assert(eq(i64, h_reserved(&H, 7, A_BTC), 10));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000000));
	cr_assert(eq(i64, h_total(&H, 7, A_BTC), 1000000));
	cr_assert(eq(i64, h_reserved(&H, 8, A_USD), 101));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_UNKNOWN_ORDER), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_EVENT_ORDER), 0));
	cr_assert(eq(u64, oms_nak_count(H.oms, WIRE_REASON_SYMBOL_MOVING), 0)); /* reports, no NAKs */
}

/* Goal: a snapshot taken after the switch restores every record's me_shard, the counter
 * and the streams, and the restored shard routes as the original does.
 * Method: build and switch on H, snapshot into G, compare hashes and records, then send
 * the same cancel to both and compare the CANCEL_TO_ME they emit. */
Test(oms_symbol_move, snapshot_keeps_me_shards)
{
	struct book b;
	build(&H, &b);
	size_t len = oms_snapshot_size(H.oms);
	void *buf = malloc(len);
	cr_assert(buf != NULL);
	cr_assert(eq(sz, oms_snapshot(H.oms, buf, len), len));
	cr_assert(eq(int, oms_restore(G.oms, buf, len), 0));
	free(buf);
	cr_assert(eq(u64, oms_state_hash(G.oms), oms_state_hash(H.oms)));
	const struct wire_oid all[] = { b.o1, b.o2, b.can, b.o4, b.o5, b.rep, b.u8 };
	for (uint32_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		cr_assert(eq(u16, me_shard_of(&G, all[i]), me_shard_of(&H, all[i])), "record %u", i);
	cr_assert(eq(u64, h_ctr(&G, OMS_C_ORDERS_REPOINTED), 3));
	cr_assert(eq(u64, oms_stream_next_seq(G.oms, F), 7));
	G.now = H.now;
	h_cancel(&H, 8, 2, 1);
	h_cancel(&G, 8, 2, 1);
	const struct wire_modify *x = h_get(&H, WIRE_CANCEL_TO_ME, 0);
	const struct wire_modify *y = h_get(&G, WIRE_CANCEL_TO_ME, 0);
	cr_assert(x != NULL && y != NULL);
	cr_assert(eq(u16, y->hdr.shard, M));
	cr_assert(eq(int, memcmp(x, y, sizeof(*x)), 0));
	cr_assert(eq(u64, oms_state_hash(G.oms), oms_state_hash(H.oms)));
}

/* Goal: an order adopted after the switch (a user's move between OMS shards whose ADOPTED
 * F emitted before the freeze, applied here later) takes the symbol's ME shard now, M.
 * Method: hydrate a user whose row says user_seq 5, switch, deliver an ADOPTED on F's
 * stream for its order 3 from OMS shard 5, cancel it. */
Test(oms_symbol_move, adopted_after_switch_goes_to_target)
{
	struct wire_user_state st;
	memset(&st, 0, sizeof(st));
	st.user = 9;
	st.version = 1;
	st.user_seq = 5;
	st.balance_count = 1;
	st.balances[0].asset = A_USD;
	st.balances[0].total = 1000;
	h_hydrate_state(&H, &st);
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_RESIDENT));
	switch_to(&H, M);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ORDERS_REPOINTED), 0));
	struct wire_oid oid = wire_oid_make(5, 9, 3);
	struct wire_me_event e;
	adopted_msg(&H, &e, oid);
	e.contra.user = 1;        /* cl_ord_id */
	e.contra.shard_seq = 10;  /* qty */
	e.contra_user = 101;      /* reservation */
	h_apply(&H, &e);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ORDERS_ADOPTED), 1));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, F), 2));
	cr_assert(eq(u16, me_shard_of(&H, oid), M));
	cr_assert(eq(i64, h_reserved(&H, 9, A_USD), 101));
	h_cancel(&H, 9, 2, 1);
	const struct wire_modify *cm = h_get(&H, WIRE_CANCEL_TO_ME, 0);
	cr_assert(cm != NULL);
	cr_assert(eq(u16, cm->hdr.shard, M));
	cr_assert(wire_oid_eq(cm->target, oid));
}

/* Goal: an ME_RESULT is checked against the stream of the shard its request went to: a
 * pending submit's (F) for a moved symbol, a live order's (M) after the switch.
 * Method: a pending submit and a resting order; switch; an ME_RESULT for each naming a
 * seq past what was applied; check where the REPLAY_REQUEST goes. */
Test(oms_symbol_move, me_result_checked_on_the_record_shard)
{
	struct wire_oid a = rest_on_f(&H);
	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid b = h_last_ack_oid(&H);
	switch_to(&H, M);
	struct wire_me_result r;
	memset(&r, 0, sizeof(r));
	r.hdr.type = WIRE_ME_RESULT;
	r.hdr.length = sizeof(r);
	r.oid = b;
	r.symbol = S_ETHUSD;
	r.known = 1;
	r.final = 1;
	r.reason = WIRE_REASON_SYMBOL_MOVING;
	r.last_seq = 3; /* F's refusal, not applied yet */
	h_apply(&H, &r);
	const struct wire_replay_request *rr = h_get(&H, WIRE_REPLAY_REQUEST, 0);
	cr_assert(rr != NULL);
	cr_assert(eq(u16, rr->hdr.shard, F));
	cr_assert(eq(u64, rr->from_seq, 3));
	r.oid = a;
	r.final = 0;
	r.reason = 0;
	r.last_seq = 1; /* M's first event about it, not applied yet */
	h_apply(&H, &r);
	rr = h_get(&H, WIRE_REPLAY_REQUEST, 0);
	cr_assert(rr != NULL);
	cr_assert(eq(u16, rr->hdr.shard, M));
	cr_assert(eq(u64, rr->from_seq, 1));
}

static void
snapshot_of(struct h *h, uint64_t req, uint64_t as_of, uint16_t ms, const struct wire_oid *oids,
	    const uint32_t *syms, uint32_t n, int64_t leaves)
{
	struct wire_open_orders_snapshot m;
	memset(&m, 0, sizeof(m));
	m.hdr.type = WIRE_OPEN_ORDERS_SNAPSHOT;
	m.hdr.length = sizeof(m);
	m.user = 7;
	m.req_id = req;
	m.as_of_seq = as_of;
	m.me_shard = ms;
	m.last = 1;
	m.count = n;
	for (uint32_t i = 0; i < n; i++) {
		m.orders[i].oid = oids[i];
		m.orders[i].symbol = syms[i];
		m.orders[i].leaves_qty = leaves;
	}
	h_apply(h, &m);
}

/* Goal: reconciliation across the switch raises no false alarm: M's answer to a query sent
 * before the switch (which may predate M opening the book) does not close the re-pointed
 * order as a phantom, F's frozen copy of it is not compared; a query sent after the switch
 * goes to M and reconciles the moved order there.
 * Method: reconciliation on, a third symbol on M; orders resting on F and M; a sweep asks
 * both; switch; answers; another sweep asks M only; answer. */
Test(oms_symbol_move, reconciliation_across_the_switch)
{
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.reconcile_interval_ns = 5 * SEC;
	l.reconcile_users_max = 1; /* the cursor wraps the slab: one pick per sweep */
	h_init(&H, &l);
	h_std_symbols(&H);
	h_symbol(&H, 3, A_ETH, A_USD, M, 1, 1, 1, -1, 4);
	h_user(&H, 7, 1000000, 1000000);
	/* F's stream runs ahead of M's: an order that came and went on F first. */
	h_limit(&H, 7, 9, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid d = h_last_ack_oid(&H);
	ev_on(&H, F, 1, d, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	ev_on(&H, F, 2, d, WIRE_EV_CANCELLED, 0, 10, 0, 0);
	ev_on(&H, F, 3, d, WIRE_EV_DONE, 0, 0, 0, 0);
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid a = h_last_ack_oid(&H);
	ev_on(&H, F, 4, a, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	ev_on(&H, F, 5, a, WIRE_EV_RESTED, 10, 10, 10, 0); /* a's last_seq: 5, of F's stream */
	h_limit(&H, 7, 2, 3, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid c = h_last_ack_oid(&H);
	struct wire_me_event e;
	h_event_msg(&H, &e, 1, c, 3, WIRE_EV_ACCEPTED);
	e.me_shard = M;
	e.leaves_qty = 10;
	h_apply(&H, &e);
	h_event_msg(&H, &e, 2, c, 3, WIRE_EV_RESTED);
	e.me_shard = M;
	e.px = 10;
	e.qty = 10;
	e.leaves_qty = 10;
	h_apply(&H, &e);

	H.now += 5 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_OPEN_ORDERS_QUERY), 2));
	const struct wire_open_orders_query *q0 = h_get(&H, WIRE_OPEN_ORDERS_QUERY, 0);
	const struct wire_open_orders_query *q1 = h_get(&H, WIRE_OPEN_ORDERS_QUERY, 1);
	uint64_t req_f = q0->hdr.shard == F ? q0->req_id : q1->req_id;
	uint64_t req_m = q0->hdr.shard == M ? q0->req_id : q1->req_id;
	cr_assert(ne(u64, req_f, req_m));
	switch_to(&H, M);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ORDERS_REPOINTED), 1));

	/* M answered before it opened the moved book: c only. */
	const uint32_t sym_c = 3, sym_a = S_ETHUSD;
	snapshot_of(&H, req_m, 2, M, &c, &sym_c, 1, 10);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_PHANTOM), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 0));
	/* F's frozen copy lists a with other leaves: not the order's state any more. */
	snapshot_of(&H, req_f, 5, F, &a, &sym_a, 1, 7);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_MISMATCH), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_PHANTOM), 0));

	/* After the switch both orders are M's: one query, and it reconciles both (a's seq
	 * of F's stream is not compared with M's as_of_seq). */
	H.now += 5 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_OPEN_ORDERS_QUERY), 1));
	const struct wire_open_orders_query *q = h_get(&H, WIRE_OPEN_ORDERS_QUERY, 0);
	cr_assert(eq(u16, q->hdr.shard, M));
	uint64_t matched = h_ctr(&H, OMS_C_RECON_MATCHED);
	const struct wire_oid both[] = { a, c };
	const uint32_t syms[] = { S_ETHUSD, 3 };
	snapshot_of(&H, q->req_id, 2, M, both, syms, 2, 10);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_RECON_MATCHED), matched + 2));
	/* And a phantom on M is still found after the switch: M no longer lists a. */
	H.now += 5 * SEC;
	h_tick(&H);
	q = h_get(&H, WIRE_OPEN_ORDERS_QUERY, 0);
	cr_assert(q != NULL);
	snapshot_of(&H, q->req_id, 2, M, &c, &sym_c, 1, 10);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_PHANTOM), 1));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 101));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_MISMATCH), 0));
}

/* Routing epoch `epoch`: OMS shards 0 and 1 active, user 7 pinned to `pin`. */
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
	m.pins[0].user = 7;
	m.pins[0].shard = pin;
	m.pin_count = 1;
	h_apply(h, &m);
}

static struct wire_rebind rebind_seen;
static uint32_t rebinds_seen;

static void
take_rebind(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	cr_assert(eq(int, dest, WIRE_DEST_ME));
	cr_assert(eq(u16, msg->type, WIRE_REBIND_TO_ME));
	memcpy(&rebind_seen, msg, sizeof(rebind_seen));
	rebinds_seen++;
}

/* Goal: a live order whose user is moving to another OMS shard (REBIND_TO_ME out, re-sent
 * until MOVED) is re-pointed by the switch like any live order: the re-send goes to M, and
 * M's MOVED, on M's stream, ends it here.
 * Method: a resting order, the user's pin moved away (the REBIND_TO_ME goes to F), switch,
 * rebuild the bridge's queue, deliver MOVED from M. */
Test(oms_symbol_move, moving_order_rebinds_to_target)
{
	route(&H, 1, 0);
	struct wire_oid a = rest_on_f(&H);
	route(&H, 2, 1);
	h_cancel(&H, 7, 2, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_NOT_OWNER));
	const struct wire_rebind *r = h_get(&H, WIRE_REBIND_TO_ME, 0);
	cr_assert(r != NULL);
	cr_assert(eq(u16, r->hdr.shard, F));
	switch_to(&H, M);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ORDERS_REPOINTED), 1));
	const struct oms_order *o = oms_order_find(H.oms, 7, wire_oid_seq(a));
	cr_assert(eq(u8, o->moving, 1));
	cr_assert(eq(u16, o->me_shard, M));
	rebinds_seen = 0;
	cr_assert(eq(u32, oms_pending_foreach(H.oms, take_rebind, NULL), 1));
	cr_assert(eq(u32, rebinds_seen, 1));
	cr_assert(eq(u16, rebind_seen.hdr.shard, M));
	cr_assert(wire_oid_eq(rebind_seen.oid, a));
	ev_on(&H, M, 1, a, WIRE_EV_MOVED, 10, 0, 10, 0);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ORDERS_MOVED_OUT), 1));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, M), 2));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, F), 3));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1), "the last MOVED flushes the user");
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_EVENT_ORDER), 0));
}

/* Goal: an ADOPTED that F emitted before the freeze and that waited, parked, for its user's
 * hydration on the new OMS shard until after the switch there, rebuilds the order on M
 * (the book's shard by then), not on F.
 * Method: shard 0 (H) moves user 7's resting order; F's MOVED there, F's ADOPTED on shard
 * 1 (G) parks behind the hydration; switch on both; hydrate; cancel on G. */
Test(oms_symbol_move, parked_adopted_applied_after_switch)
{
	struct oms_limits l;
	h_limits(&l);
	l.shard_id = 1;
	h_fini(&G);
	h_init(&G, &l);
	h_std_symbols(&G);
	route(&H, 1, 0);
	route(&G, 1, 0);
	struct wire_oid a = rest_on_f(&H);
	route(&H, 2, 1);
	route(&G, 2, 1);
	h_cancel(&H, 7, 2, 1);
	struct wire_rebind rb = *(const struct wire_rebind *)h_get(&H, WIRE_REBIND_TO_ME, 0);
	cr_assert(eq(u16, rb.hdr.shard, F));
	ev_on(&H, F, 3, a, WIRE_EV_MOVED, 10, 0, 10, 0);
	const struct wire_begin_dehydrate *bd = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(bd != NULL);
	struct wire_user_state st = bd->state;

	/* F's ADOPTED on shard 1's stream: the user is not there yet, it parks. */
	struct wire_me_event e;
	adopted_msg(&G, &e, a);
	e.contra.user = rb.cl_ord_id;
	e.contra.shard_seq = (uint64_t)rb.qty;
	e.contra_user = (uint64_t)rb.reserved;
	h_apply(&G, &e);
	cr_assert(eq(u64, h_ctr(&G, OMS_C_EVENTS_PARKED), 1));
	cr_assert(eq(u64, oms_stream_next_seq(G.oms, F), 2));

	switch_to(&H, M);
	switch_to(&G, M);
	cr_assert(eq(u64, h_ctr(&G, OMS_C_ORDERS_REPOINTED), 0)); /* not in memory yet */
	st.version += 1;
	h_hydrate_state(&G, &st);
	cr_assert(eq(u32, h_status(&G, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u64, h_ctr(&G, OMS_C_ORDERS_ADOPTED), 1));
	cr_assert(eq(u16, me_shard_of(&G, a), M));
	cr_assert(eq(i64, h_reserved(&G, 7, A_USD), 101));
	h_cancel(&G, 7, 3, 1);
	const struct wire_modify *cm = h_get(&G, WIRE_CANCEL_TO_ME, 0);
	cr_assert(cm != NULL);
	cr_assert(eq(u16, cm->hdr.shard, M));
	cr_assert(wire_oid_eq(cm->target, a));
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me rejects: every refusal is a REJECTED / CANCEL_REJECTED event (or, for duplicates, an
 * ME_RESULT) with a reason code — one test per wire_reason the ME produces.
 * Default symbol: tick 10, lot 1, min qty 1, base_unit 1, no band.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "me_fixture.h"

#define B WIRE_SIDE_BUY
#define S WIRE_SIDE_SELL

TestSuite(me_reject, .init = fx_setup, .fini = fx_fini);

/* Goal: a refusal is terminal and alone: REJECTED, no event that says the order was taken,
 * nothing rests. */
static void
assert_rejected(uint64_t user, uint64_t seq, uint16_t reason)
{
	cr_assert_eq(fx_reject_reason(user, seq), reason, "reason %d, want %u",
		     fx_reject_reason(user, seq), reason);
	cr_assert_eq(fx_entered(user, seq), 0);
	cr_assert_eq(fx_count(user, seq, WIRE_EV_RESTED), 0);
}

/* Goal: malformed orders are refused BAD_REQUEST. Method: bad side, zero tif, zero qty,
 * negative price, STP out of range. */
Test(me_reject, bad_request_enums_and_shapes)
{
	struct wire_submit s = fx_order(1, 1, 9, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 1);
	fx_submit(&s);
	assert_rejected(1, 1, WIRE_REASON_BAD_REQUEST);
	s = fx_order(1, 2, B, WIRE_ORD_LIMIT, 0, 100, 1);
	fx_submit(&s);
	assert_rejected(1, 2, WIRE_REASON_BAD_REQUEST);
	s = fx_order(1, 3, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 0);
	fx_submit(&s);
	assert_rejected(1, 3, WIRE_REASON_BAD_REQUEST);
	s = fx_order(1, 4, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, -10, 1);
	fx_submit(&s);
	assert_rejected(1, 4, WIRE_REASON_BAD_REQUEST);
	s = fx_order(1, 5, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 1);
	s.stp = 7;
	fx_submit(&s);
	assert_rejected(1, 5, WIRE_REASON_BAD_REQUEST);
}

/* Goal: UNKNOWN_SYMBOL for a symbol never configured. Method: submit on symbol 77. */
Test(me_reject, unknown_symbol)
{
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 1);
	s.symbol = 77;
	fx_submit(&s);
	assert_rejected(1, 1, WIRE_REASON_UNKNOWN_SYMBOL);
}

/* Goal: SYMBOL_NOT_OWNED for a symbol mapped to another ME shard. Method: configure it
 * for shard 3, submit. */
Test(me_reject, symbol_not_owned)
{
	cr_assert_eq(fx_config(5, 10, 1, 1, 0, 1, 0, 0, 3), WIRE_REASON_NONE); /* shard 3's */
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 1);
	s.symbol = 5;
	fx_submit(&s);
	assert_rejected(1, 1, WIRE_REASON_SYMBOL_NOT_OWNED);
}

/* Goal: HALTED while the symbol is halted. Method: halt, submit. */
Test(me_reject, halted)
{
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_HALTED, 0), WIRE_REASON_NONE);
	fx_gtc(1, 1, B, 100, 1);
	assert_rejected(1, 1, WIRE_REASON_HALTED);
}

/* Goal: OFF_TICK. Method: price 105 on tick 10. */
Test(me_reject, off_tick)
{
	fx_gtc(1, 1, B, 105, 1);
	assert_rejected(1, 1, WIRE_REASON_OFF_TICK);
}

/* Goal: OFF_LOT. Method: qty 7 on lot 5. */
Test(me_reject, off_lot)
{
	cr_assert_eq(fx_config(2, 10, 5, 5, 0, 1, 0, 0, 0), WIRE_REASON_NONE);
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 7);
	s.symbol = 2;
	fx_submit(&s);
	assert_rejected(1, 1, WIRE_REASON_OFF_LOT);
}

/* Goal: BELOW_MIN_QTY. Method: qty 15 with min qty 20. */
Test(me_reject, below_min_qty)
{
	cr_assert_eq(fx_config(2, 10, 5, 20, 0, 1, 0, 0, 0), WIRE_REASON_NONE);
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 15);
	s.symbol = 2;
	fx_submit(&s);
	assert_rejected(1, 1, WIRE_REASON_BELOW_MIN_QTY);
}

/* Goal: BELOW_MIN_NOTIONAL for limits and market buys. Method: notional 900 and budget 999
 * under a minimum of 1000; exactly 1000 rests. */
Test(me_reject, below_min_notional)
{
	cr_assert_eq(fx_config(2, 10, 1, 1, 1000, 1, 0, 0, 0), WIRE_REASON_NONE);
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 9);
	s.symbol = 2;
	fx_submit(&s);
	assert_rejected(1, 1, WIRE_REASON_BELOW_MIN_NOTIONAL);
	s = fx_order(1, 2, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 10);
	s.symbol = 2;
	fx_submit(&s);
	cr_assert_eq(fx_count(1, 2, WIRE_EV_RESTED), 1);
	s = fx_order(1, 3, B, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 0);
	s.symbol = 2;
	s.quote_qty = 999;
	fx_submit(&s);
	assert_rejected(1, 3, WIRE_REASON_BELOW_MIN_NOTIONAL);
}

/* Goal: the band is measured from the configured reference until the first trade, then from
 * the last trade price. Method: ref 1000, band 10% (1000 bps). */
Test(me_reject, outside_band)
{
	cr_assert_eq(fx_config(2, 10, 1, 1, 0, 1, 1000, 1000, 0), WIRE_REASON_NONE);
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1110, 1);
	s.symbol = 2;
	fx_submit(&s);
	assert_rejected(1, 1, WIRE_REASON_OUTSIDE_BAND);
	s = fx_order(1, 2, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1100, 1);
	s.symbol = 2;
	fx_submit(&s);
	cr_assert_eq(fx_count(1, 2, WIRE_EV_RESTED), 1);
	s = fx_order(2, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1100, 1);
	s.symbol = 2;
	fx_submit(&s); /* trade at 1100: the reference moves */
	s = fx_order(1, 3, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 1200, 1);
	s.symbol = 2;
	fx_submit(&s);
	cr_assert_eq(fx_count(1, 3, WIRE_EV_RESTED), 1);
	s = fx_order(1, 4, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 980, 1);
	s.symbol = 2;
	fx_submit(&s);
	assert_rejected(1, 4, WIRE_REASON_OUTSIDE_BAND);
}

/* Goal: the band holds exactly where |px - ref| * 10000 or ref * band_bps does not fit 64
 * bits (validate then compares in 128 bits). Method: ref 4e18, band 10%: 4e17 away is
 * inside, one tick further is out, on both sides. */
Test(me_reject, outside_band_huge_prices)
{
	const int64_t ref = INT64_C(4000000000000000000);
	const int64_t dist = ref / 10;
	cr_assert_eq(fx_config(2, 1, 1, 1, 0, 1, ref, 1000, 0), WIRE_REASON_NONE);
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, ref + dist + 1, 1);
	s.symbol = 2;
	fx_submit(&s);
	assert_rejected(1, 1, WIRE_REASON_OUTSIDE_BAND);
	s = fx_order(1, 2, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, ref - dist - 1, 1);
	s.symbol = 2;
	fx_submit(&s);
	assert_rejected(1, 2, WIRE_REASON_OUTSIDE_BAND);
	s = fx_order(1, 3, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, ref + dist, 1);
	s.symbol = 2;
	fx_submit(&s);
	cr_assert_eq(fx_count(1, 3, WIRE_EV_RESTED), 1);
	s = fx_order(1, 4, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, ref - dist, 1);
	s.symbol = 2;
	fx_submit(&s);
	cr_assert_eq(fx_count(1, 4, WIRE_EV_RESTED), 1);
}

/* Goal: POST_ONLY_WOULD_CROSS. Method: post-only bid through a resting ask. */
Test(me_reject, post_only_would_cross)
{
	fx_gtc(1, 1, S, 100, 1);
	fx_limit(2, 1, B, 110, 1, WIRE_TIF_POST_ONLY);
	assert_rejected(2, 1, WIRE_REASON_POST_ONLY_WOULD_CROSS);
}

/* Goal: FOK_NOT_FILLABLE. Method: FOK into an empty book. */
Test(me_reject, fok_not_fillable)
{
	fx_limit(2, 1, B, 110, 1, WIRE_TIF_FOK);
	assert_rejected(2, 1, WIRE_REASON_FOK_NOT_FILLABLE);
}

/* Goal: OVERFLOW when px * qty / base_unit does not fit int64. Method: 2^40 x 2^40. */
Test(me_reject, overflow)
{
	cr_assert_eq(fx_config(2, 1, 1, 1, 0, 1, 0, 0, 0), WIRE_REASON_NONE);
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, INT64_C(1) << 40,
					INT64_C(1) << 40);
	s.symbol = 2;
	fx_submit(&s);
	assert_rejected(1, 1, WIRE_REASON_OVERFLOW);
}

/* Goal: KILLED for a user under a kill-switch, others unaffected. Method: kill user 1. */
Test(me_reject, killed)
{
	cr_assert_eq(fx_kill(WIRE_KILL_USER, 1, 1), WIRE_REASON_NONE);
	fx_gtc(1, 1, B, 100, 1);
	assert_rejected(1, 1, WIRE_REASON_KILLED);
	fx_gtc(2, 1, B, 100, 1);
	cr_assert_eq(fx_count(2, 1, WIRE_EV_RESTED), 1);
}

/* Goal: UNKNOWN_ORDER for a cancel of an unknown id (contra = target), TOO_LATE for a
 * finished one. Method: cancel before any order; cancel an IOC that already finished. */
Test(me_reject, too_late_and_unknown_order)
{
	fx_cancel(1, 2, 1);
	cr_assert_eq(fx_reject_reason(1, 2), WIRE_REASON_UNKNOWN_ORDER);
	const struct wire_me_event *e = fx_find(1, 2, WIRE_EV_CANCEL_REJECTED, 0);
	cr_assert(wire_oid_eq(e->contra, fx_oid(1, 1)));
	fx_limit(1, 3, B, 100, 1, WIRE_TIF_IOC);
	fx_cancel(1, 4, 3);
	cr_assert_eq(fx_reject_reason(1, 4), WIRE_REASON_TOO_LATE);
}

/* Goal: AMEND_NOT_DOWN for an amend to the same or a larger total. Method: 5 → 5, 5 → 9. */
Test(me_reject, amend_not_down)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_amend(1, 2, 1, 5);
	cr_assert_eq(fx_reject_reason(1, 2), WIRE_REASON_AMEND_NOT_DOWN);
	fx_amend(1, 3, 1, 9);
	cr_assert_eq(fx_reject_reason(1, 3), WIRE_REASON_AMEND_NOT_DOWN);
	cr_assert_eq(fx_depth_qty(B, 100), 5);
}

/* Goal: a known id with the same content changes nothing and answers ME_RESULT; different
 * content answers DUPLICATE_ID_MISMATCH; neither emits a sequenced event. */
Test(me_reject, duplicate_id_mismatch)
{
	fx_gtc(1, 1, B, 100, 5);
	uint64_t h = me_state_hash(fx_me);
	fx_reset();
	fx_gtc(1, 1, B, 100, 5);
	cr_assert_eq(fx_events(), 0);
	const struct wire_me_result *r = fx_result();
	cr_assert(r);
	cr_assert_eq(r->known, 1);
	cr_assert_eq(r->final, 0);
	cr_assert_eq(r->reason, WIRE_REASON_NONE);
	cr_assert_eq(r->leaves_qty, 5);
	cr_assert_eq(r->last_seq, 1); /* RESTED */
	fx_gtc(1, 1, B, 110, 5);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(fx_result()->reason, WIRE_REASON_DUPLICATE_ID_MISMATCH);
	/* Counters moved; everything else is as before. */
	cr_assert_eq(fx_depth_qty(B, 100), 5);
	cr_assert_eq(fx_best(B), 100);
	(void)h;
	/* A modify request id is deduplicated the same way. */
	fx_amend(1, 2, 1, 3);
	fx_reset();
	fx_amend(1, 2, 1, 3);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(fx_result()->known, 1);
	cr_assert_eq(fx_result()->reason, WIRE_REASON_NONE);
	fx_amend(1, 2, 1, 2);
	cr_assert_eq(fx_result()->reason, WIRE_REASON_DUPLICATE_ID_MISMATCH);
	cr_assert_eq(fx_depth_qty(B, 100), 3);
}

/* Goal: pools that run out refuse with CAPACITY (records, levels), never crash. */
Test(me_reject, capacity_records)
{
	fx_teardown();
	struct me_limits l = {
		.shard = 0, .streams_max = 2, .symbols_max = 2, .orders_max = 4, .users_max = 4,
		.levels_max = 8, .levels_side_max = 4, .gtd_max = 4, .events_max = 64,
		.events_reserve = 16,
	};
	fx_setup_limits(&l);
	fx_gtc(1, 1, B, 100, 1);
	fx_gtc(1, 2, B, 90, 1);
	fx_gtc(1, 3, B, 80, 1);
	fx_gtc(1, 4, B, 70, 1);
	assert_rejected(1, 4, WIRE_REASON_CAPACITY);
	/* The refusal is recorded (it took the last record): a re-drive is a duplicate. */
	fx_reset();
	fx_gtc(1, 4, B, 70, 1);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(fx_result()->known, 1);
	cr_assert_eq(fx_result()->reason, WIRE_REASON_CAPACITY);
	/* Pool completely full: a refusal is unsequenced, nothing recorded. */
	fx_cancel(1, 5, 1);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(fx_result()->known, 0);
	cr_assert_eq(fx_result()->reason, WIRE_REASON_CAPACITY);
	cr_assert_null(fx_rec(1, 5));
	/* Acks release the refusal's record; a cancel then frees the pool. */
	fx_ack(0, 1000);
	fx_cancel(1, 6, 1);
	cr_assert_eq(fx_done(1, 1), 1);
	fx_ack(0, 1000);
	fx_gtc(1, 7, B, 70, 1);
	cr_assert_eq(fx_count(1, 7, WIRE_EV_RESTED), 1);
}

/* Goal: CAPACITY when a new price level is needed on a full side; existing levels and
 * orders that never rest are unaffected. Method: levels_side_max 2. */
Test(me_reject, capacity_levels)
{
	fx_teardown();
	struct me_limits l = {
		.shard = 0, .streams_max = 2, .symbols_max = 2, .orders_max = 64, .users_max = 8,
		.levels_max = 64, .levels_side_max = 2, .gtd_max = 4, .events_max = 256,
		.events_reserve = 16,
	};
	fx_setup_limits(&l);
	fx_gtc(1, 1, B, 100, 1);
	fx_gtc(1, 2, B, 90, 1);
	fx_gtc(1, 3, B, 90, 1); /* existing level: fine */
	cr_assert_eq(fx_count(1, 3, WIRE_EV_RESTED), 1);
	fx_gtc(1, 4, B, 80, 1);
	assert_rejected(1, 4, WIRE_REASON_CAPACITY);
	fx_limit(1, 5, B, 80, 1, WIRE_TIF_IOC); /* never rests: no level needed */
	cr_assert_eq(fx_entered(1, 5), 1);
}

/* Goal: nearing the retention bound refuses new requests with BACKPRESSURE (one slot each);
 * an ack frees the stream. Method: events_max 16, reserve 12. */
Test(me_reject, backpressure)
{
	fx_teardown();
	struct me_limits l = {
		.shard = 0, .streams_max = 2, .symbols_max = 2, .orders_max = 64, .users_max = 8,
		.levels_max = 64, .levels_side_max = 16, .gtd_max = 4, .events_max = 16,
		.events_reserve = 12,
	};
	fx_setup_limits(&l);
	for (uint64_t seq = 1; seq <= 5; seq++)
		fx_gtc(1, seq, B, 100, 1); /* RESTED, seq 1 .. 5: 11 free after the fifth */
	fx_gtc(1, 6, B, 100, 1);
	assert_rejected(1, 6, WIRE_REASON_BACKPRESSURE); /* seq 6 */
	fx_cancel(1, 9, 1);
	cr_assert_eq(fx_reject_reason(1, 9), WIRE_REASON_BACKPRESSURE); /* seq 7 */
	fx_ack(0, 7);
	fx_gtc(1, 10, B, 100, 1);
	cr_assert_eq(fx_count(1, 10, WIRE_EV_RESTED), 1);
	cr_assert_eq(me_counter(fx_me, ME_C_BACKPRESSURE), 2);
}

/* Goal: symbol config errors are refused as admin replies with BAD_REQUEST. */
Test(me_reject, config_errors)
{
	/* tick * lot not a multiple of base_unit */
	cr_assert_eq(fx_config(2, 10, 1, 1, 0, 100, 0, 0, 0), WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(fx_admin()->hdr.type, WIRE_ADMIN_REPLY);
	cr_assert_eq(fx_caps[fx_cap_count - 1].dest, WIRE_DEST_ADMIN);
	cr_assert_eq(fx_config(2, 0, 1, 1, 0, 1, 0, 0, 0), WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(fx_config(2, 10, -1, 1, 0, 1, 0, 0, 0), WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(fx_config(2, 10, 1, -1, 0, 1, 0, 0, 0), WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(fx_config(2, 10, 1, 1, 0, 1, 15, 0, 0), WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(fx_config(2, 10, 1, 1, 0, 1, 0, 20000, 0), WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(fx_config(0, 10, 1, 1, 0, 1, 0, 0, 0), WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(fx_config(2, INT64_MAX, 2, 1, 0, 1, 0, 0, 0), WIRE_REASON_BAD_REQUEST);
	/* A grid change or a move away under resting orders needs an empty book. */
	fx_gtc(1, 1, B, 100, 1);
	cr_assert_eq(fx_config(FX_SYM, 5, 1, 1, 0, 1, 0, 0, 0), WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(fx_config(FX_SYM, 10, 1, 1, 0, 1, 0, 0, 1), WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(fx_config(FX_SYM, 10, 1, 1, 50, 1, 0, 0, 0), WIRE_REASON_NONE);
	cr_assert_eq(fx_status(99, WIRE_SYM_HALTED, 0), WIRE_REASON_UNKNOWN_SYMBOL);
	cr_assert_eq(fx_kill(WIRE_KILL_SYMBOL, 99, 1), WIRE_REASON_UNKNOWN_SYMBOL);
	cr_assert_eq(fx_kill(9, 1, 1), WIRE_REASON_BAD_REQUEST);
}

/* Goal: malformed or foreign messages are counted and ignored, never a crash. */
Test(me_reject, short_and_foreign_messages)
{
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 1);
	s.hdr.length = 16;
	fx_submit(&s);
	struct wire_tick t;
	wire_hdr_init(&t.hdr, WIRE_TICK, 0);
	fx_apply(&t);
	struct wire_nak n;
	memset(&n, 0, sizeof(n));
	wire_hdr_init(&n.hdr, WIRE_NAK, 0);
	fx_apply(&n);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(me_counter(fx_me, ME_C_IGNORED), 2);
}

/* ---- programmer errors and limits ---- */

#include <signal.h>

/* Goal: a host that calls the engine without a sink is a programmer error: CHECK aborts. */
Test(me_reject, null_sink_aborts, .signal = SIGABRT)
{
	struct wire_tick t;
	wire_hdr_init(&t.hdr, WIRE_TICK, 0);
	me_apply(fx_me, fx_now, &t.hdr, NULL);
}

/* Goal: invalid limits are refused up front (footprint 0, init -EINVAL), never half-built. */
Test(me_reject, invalid_limits)
{
	struct me_limits l = fx_limits;
	l.events_max = 1000; /* not a power of two */
	cr_assert_eq(me_footprint(&l), 0);
	l = fx_limits;
	l.events_reserve = l.events_max;
	cr_assert_eq(me_footprint(&l), 0);
	l = fx_limits;
	l.orders_max = 0;
	cr_assert_eq(me_footprint(&l), 0);
	struct me *e;
	static _Alignas(64) uint8_t mem[64];
	cr_assert_eq(me_init(&e, mem, &l), -EINVAL);
	cr_assert_eq(me_init(&e, mem + 8, &fx_limits), -EINVAL); /* misaligned */
	cr_assert_eq(me_init(NULL, mem, &fx_limits), -EINVAL);
	cr_assert(me_bytes_per_order(&fx_limits) > 96);
}

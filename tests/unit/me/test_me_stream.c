/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me streams and the exactly-once contract (docs/me-contract.md): per-OMS-shard sequencing,
 * retention until ack, identical replay, dedup records kept until acked, queries, open-orders
 * snapshots, L2 depth, snapshot/restore.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "me_fixture.h"

#define B WIRE_SIDE_BUY
#define S WIRE_SIDE_SELL

TestSuite(me_stream, .init = fx_setup, .fini = fx_fini);

/* Goal: every event about an order goes to its OMS shard's stream with that stream's next seq;
 * a fill between two shards' orders lands one leg in each stream.
 * Method: shard 1 rests, shard 2 crosses. */
Test(me_stream, per_shard_sequencing)
{
	fx_oms_shard = 1;
	fx_gtc(1, 1, S, 100, 5); /* shard 1: rested 1 */
	fx_oms_shard = 2;
	fx_reset();
	fx_gtc(2, 1, B, 100, 5); /* shard 2: fill 1 (entered, done); shard 1: fill 2 (done) */
	for (uint32_t i = 0; i < fx_events(); i++) {
		const struct wire_me_event *e = fx_ev(i);
		cr_assert_eq(e->hdr.shard, wire_oid_shard(e->oid));
	}
	fx_oms_shard = 1;
	cr_assert_eq(fx_find(1, 1, WIRE_EV_FILL, 0)->seq, 2);
	/* The maker's: no entry, and it takes the last of it. */
	cr_assert_eq(fx_find(1, 1, WIRE_EV_FILL, 0)->hdr.flags, WIRE_EV_F_DONE);
	cr_assert_eq(fx_count(1, 1, WIRE_EV_DONE), 0);
	fx_oms_shard = 2;
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 0)->seq, 1);
	cr_assert_eq(fx_find(2, 1, WIRE_EV_FILL, 0)->hdr.flags,
		     WIRE_EV_F_ENTERED | WIRE_EV_F_DONE);
	cr_assert_eq(fx_count(2, 1, WIRE_EV_DONE), 0);
	cr_assert_eq(fx_events(), 2);
	for (uint32_t i = 0; i < fx_cap_count; i++)
		cr_assert_eq(fx_caps[i].dest, WIRE_DEST_OMS);
}

/* Goal: replay re-emits retained events byte-identically; from an acknowledged seq it starts
 * at the oldest retained one. */
Test(me_stream, replay_identical)
{
	fx_gtc(1, 1, S, 100, 5);
	fx_gtc(2, 1, B, 100, 3);
	fx_gtc(3, 1, B, 90, 3);
	uint32_t n = fx_events();
	struct wire_me_event *first = calloc(n, sizeof(*first));
	for (uint32_t i = 0; i < n; i++)
		first[i] = *fx_ev(i);
	fx_reset();
	fx_replay(0, 1);
	cr_assert_eq(fx_events(), n);
	for (uint32_t i = 0; i < n; i++)
		cr_assert(memcmp(fx_ev(i), &first[i], sizeof(first[i])) == 0);
	cr_assert_eq(n, 4); /* rested; fill (entered, done), maker fill; rested */
	fx_ack(0, 2);
	fx_reset();
	fx_replay(0, 2);
	cr_assert_eq(fx_events(), n - 2);
	cr_assert_eq(fx_ev(0)->seq, 3);
	cr_assert(memcmp(fx_ev(0), &first[2], sizeof(first[2])) == 0);
	fx_reset();
	fx_replay(0, 1000);
	cr_assert_eq(fx_events(), 0);
	fx_replay(5, 1); /* unknown stream */
	cr_assert_eq(fx_events(), 0);
	free(first);
}

/* Goal: dedup records of finished orders are kept until the ack covers their final event,
 * then released; live orders are never released by an ack. */
Test(me_stream, dedup_kept_until_ack)
{
	fx_limit(1, 1, B, 100, 5, WIRE_TIF_IOC); /* seq 1, cancelled (entered, done): final */
	fx_gtc(1, 2, B, 100, 5);                 /* seq 2, live */
	fx_limit(1, 3, S, 200, 5, WIRE_TIF_IOC); /* seq 3, final */
	cr_assert_eq(me_records_used(fx_me), 3);
	fx_ack(0, 2);
	cr_assert_eq(me_records_used(fx_me), 2); /* (1, 3)'s final event not yet covered */
	fx_reset();
	fx_limit(1, 3, S, 200, 5, WIRE_TIF_IOC);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(fx_result()->final, 1);
	fx_ack(0, 3);
	cr_assert_eq(me_records_used(fx_me), 1);
	fx_ack(0, 1000); /* clamped to the last emitted seq */
	cr_assert_eq(me_records_used(fx_me), 1);
	cr_assert_eq(fx_rec(1, 2)->state, ME_ST_LIVE);
	/* A late duplicate after the ack is outside the dedup window (contract). */
	fx_query(1, 1);
	cr_assert_eq(fx_result()->known, 0);
}

/* Goal: ORDER_QUERY answers the current state of a known order and known=0 otherwise. */
Test(me_stream, order_query)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(2, 1, S, 100, 2);
	fx_reset();
	fx_query(1, 1);
	const struct wire_me_result *r = fx_result();
	cr_assert_eq(r->known, 1);
	cr_assert_eq(r->final, 0);
	cr_assert_eq(r->cum_qty, 2);
	cr_assert_eq(r->leaves_qty, 3);
	cr_assert_eq(r->symbol, FX_SYM);
	cr_assert_eq(r->last_seq, 3); /* rested 1; (2,1): its fill 2, the maker's fill 3 */
	cr_assert_eq(fx_events(), 0);
	fx_query(9, 9);
	cr_assert_eq(fx_result()->known, 0);
	/* A rejected order remembers its reason. */
	fx_gtc(3, 1, B, 105, 1);
	fx_query(3, 1);
	cr_assert_eq(fx_result()->final, 1);
	cr_assert_eq(fx_result()->reason, WIRE_REASON_OFF_TICK);
}

/* Goal: OPEN_ORDERS_SNAPSHOT lists a user's live orders in parts of 16 with as_of_seq = the
 * asking shard's last seq. */
Test(me_stream, open_orders_snapshot)
{
	for (uint64_t i = 1; i <= 20; i++)
		fx_gtc(7, i, B, 100 - (int64_t)(i % 5) * 10, 1);
	fx_cancel(7, 100, 3);
	fx_gtc(8, 1, B, 100, 1);
	fx_reset();
	struct wire_open_orders_query q;
	memset(&q, 0, sizeof(q));
	wire_hdr_init(&q.hdr, WIRE_OPEN_ORDERS_QUERY, 0);
	q.user = 7;
	q.req_id = 42;
	q.oms_shard = 0;
	fx_apply(&q);
	cr_assert_eq(fx_cap_count, 2);
	const struct wire_open_orders_snapshot *p0 = &fx_caps[0].u.snap;
	const struct wire_open_orders_snapshot *p1 = &fx_caps[1].u.snap;
	cr_assert_eq(p0->hdr.type, WIRE_OPEN_ORDERS_SNAPSHOT);
	cr_assert_eq(p0->count, 16);
	cr_assert_eq(p0->part, 0);
	cr_assert_eq(p0->last, 0);
	cr_assert_eq(p1->count, 3);
	cr_assert_eq(p1->part, 1);
	cr_assert_eq(p1->last, 1);
	cr_assert_eq(p0->req_id, 42);
	cr_assert_eq(p0->as_of_seq, 20 + 1 + 1); /* rested ×20, cancelled (done), rested */
	cr_assert(wire_oid_eq(p0->orders[0].oid, fx_oid(7, 1)));
	cr_assert(wire_oid_eq(p0->orders[2].oid, fx_oid(7, 4))); /* 3 was cancelled */
	cr_assert_eq(p1->orders[2].leaves_qty, 1);
	/* A user with nothing open gets one empty, last part. */
	fx_reset();
	q.user = 99;
	fx_apply(&q);
	cr_assert_eq(fx_cap_count, 1);
	cr_assert_eq(fx_caps[0].u.snap.count, 0);
	cr_assert_eq(fx_caps[0].u.snap.last, 1);
}

/* Goal: L2 depth aggregates levels best first. */
Test(me_stream, depth)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(2, 1, B, 100, 2);
	fx_gtc(3, 1, B, 80, 1);
	fx_gtc(3, 2, B, 90, 4);
	fx_gtc(4, 1, S, 120, 6);
	struct me_depth_level d[8];
	uint32_t n = me_depth(fx_me, FX_SYM, WIRE_SIDE_BUY, d, 8);
	cr_assert_eq(n, 3);
	cr_assert_eq(d[0].px, 100);
	cr_assert_eq(d[0].qty, 7);
	cr_assert_eq(d[0].count, 2);
	cr_assert_eq(d[1].px, 90);
	cr_assert_eq(d[2].px, 80);
	cr_assert_eq(me_depth(fx_me, FX_SYM, WIRE_SIDE_BUY, d, 2), 2);
	cr_assert_eq(me_depth(fx_me, FX_SYM, WIRE_SIDE_SELL, d, 8), 1);
	cr_assert_eq(me_depth(fx_me, 999, WIRE_SIDE_SELL, d, 8), 0);
}

/* ---- snapshot / restore ---- */

TestSuite(me_snapshot, .init = fx_setup, .fini = fx_fini);

static void
some_state(void)
{
	fx_gtc(1, 1, S, 100, 5);
	fx_gtc(2, 1, S, 110, 5);
	struct wire_submit s = fx_order(3, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 90, 5);
	s.expire_ns = 50000;
	fx_submit(&s);
	fx_gtc(4, 1, B, 100, 3);
	fx_cancel(2, 2, 1);
	fx_kill(WIRE_KILL_USER, 9, 1);
	fx_ack(0, 3);
}

/* Goal: restore(snapshot(x)) hashes equal to x, and the same inputs after restore produce the
 * same events and the same state as without it. */
Test(me_snapshot, restore_then_continue_equals_continue)
{
	some_state();
	size_t size = me_snapshot_size(fx_me);
	void *buf = malloc(size);
	cr_assert_eq(me_snapshot(fx_me, buf, size), size);
	cr_assert_eq(me_snapshot(fx_me, buf, size - 1), 0);
	struct me *other = fx_new_engine(&fx_limits);
	cr_assert_eq(me_restore(other, buf, size), 0);
	cr_assert_eq(me_state_hash(other), me_state_hash(fx_me));

	/* Continue both with the same inputs; compare emitted bytes. */
	struct me *engines[2] = {fx_me, other};
	uint8_t *out[2];
	uint32_t len[2];
	uint64_t t0 = fx_now;
	for (int k = 0; k < 2; k++) {
		fx_me = engines[k];
		fx_now = t0;
		fx_reset();
		fx_gtc(5, 1, B, 110, 7);
		fx_tick(60000); /* GTD expiry */
		fx_market_sell(6, 1, 2);
		fx_amend(5, 2, 1, 1);
		fx_replay(0, 1);
		len[k] = fx_cap_count;
		out[k] = malloc(fx_cap_count * sizeof(struct fx_cap));
		memcpy(out[k], fx_caps, fx_cap_count * sizeof(struct fx_cap));
	}
	fx_me = engines[0];
	cr_assert_eq(len[0], len[1]);
	cr_assert(len[0] > 5);
	for (uint32_t i = 0; i < len[0]; i++) {
		const struct fx_cap *a = (const struct fx_cap *)out[0] + i;
		const struct fx_cap *b = (const struct fx_cap *)out[1] + i;
		cr_assert_eq(a->dest, b->dest);
		cr_assert(memcmp(a->u.bytes, b->u.bytes, a->u.hdr.length) == 0, "msg %u type %u", i, a->u.hdr.type);
	}
	cr_assert_eq(me_state_hash(engines[0]), me_state_hash(engines[1]));
	/* And the snapshots themselves are byte-identical. */
	void *b2 = malloc(size);
	void *b3 = malloc(size);
	me_snapshot(engines[0], b2, size);
	me_snapshot(engines[1], b3, size);
	cr_assert(memcmp(b2, b3, size) == 0);
	free(b2);
	free(b3);
	free(out[0]);
	free(out[1]);
	free(buf);
}

/* Goal: a corrupt, truncated or foreign snapshot is refused with -EINVAL and leaves an empty
 * engine. */
Test(me_snapshot, corrupt_refused)
{
	some_state();
	size_t size = me_snapshot_size(fx_me);
	uint8_t *buf = malloc(size);
	me_snapshot(fx_me, buf, size);
	struct me *other = fx_new_engine(&fx_limits);
	uint64_t empty = me_state_hash(other);
	buf[size / 2] ^= 1;
	cr_assert_eq(me_restore(other, buf, size), -EINVAL);
	cr_assert_eq(me_state_hash(other), empty);
	buf[size / 2] ^= 1;
	cr_assert_eq(me_restore(other, buf, size - 1), -EINVAL);
	cr_assert_eq(me_restore(other, buf, 10), -EINVAL);
	struct me_limits l = fx_limits;
	l.orders_max++;
	struct me *third = fx_new_engine(&l);
	cr_assert_eq(me_restore(third, buf, size), -EINVAL);
	cr_assert_eq(me_restore(other, buf, size), 0);
	cr_assert_eq(me_state_hash(other), me_state_hash(fx_me));
	free(buf);
}

/* Goal: the svc_ops table drives the same engine (consensus' view). */
Test(me_snapshot, svc_ops)
{
	cr_assert_str_eq(me_svc_ops.name, "me");
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 5);
	fx_reset();
	me_svc_ops.apply(fx_me, 1, fx_now, &s.hdr, &fx_sink);
	cr_assert_eq(fx_events(), 1);
	me_svc_ops.tick(fx_me, 2, fx_now + 1, &fx_sink);
	size_t size = me_svc_ops.snapshot_size(fx_me);
	void *buf = malloc(size);
	cr_assert_eq(me_svc_ops.snapshot(fx_me, buf, size), size);
	struct me *other = fx_new_engine(&fx_limits);
	cr_assert_eq(me_svc_ops.restore(other, buf, size), 0);
	cr_assert_eq(me_svc_ops.state_hash(other), me_svc_ops.state_hash(fx_me));
	free(buf);
}

/* Goal: a snapshot is compact (only what init did not leave as is), and restoring it over an
 * engine with other state rebuilds the snapshotted state exactly.
 * Method: snapshot, keep trading, restore the old snapshot into the same engine, compare the
 * hash with the one taken at snapshot time. */
Test(me_snapshot, compact_and_restores_over_dirty_state)
{
	some_state();
	uint64_t h0 = me_state_hash(fx_me);
	size_t size = me_snapshot_size(fx_me);
	cr_assert(size < me_footprint(&fx_limits) / 4, "snapshot %zu of footprint %zu", size,
		  me_footprint(&fx_limits));
	void *buf = malloc(size);
	cr_assert_eq(me_snapshot(fx_me, buf, size), size);
	for (uint64_t i = 0; i < 50; i++)
		fx_gtc(20 + i % 7, 100 + i, i % 2 ? WIRE_SIDE_BUY : WIRE_SIDE_SELL,
		       10 * (int64_t)(95 + i % 11), 3);
	fx_tick(100000);
	cr_assert_neq(me_state_hash(fx_me), h0);
	cr_assert_eq(me_restore(fx_me, buf, size), 0);
	cr_assert_eq(me_state_hash(fx_me), h0);
	free(buf);
}

/* The event of type `event` about oid in the captured messages (any stream), or NULL. */
static const struct wire_me_event *
ev_of(struct wire_oid oid, uint8_t event)
{
	for (uint32_t i = 0; i < fx_events(); i++)
		if (wire_oid_eq(fx_ev(i)->oid, oid) && fx_ev(i)->event == event)
			return fx_ev(i);
	return NULL;
}

/* Goal (docs/me-contract.md "Moving a user's orders"): a live order re-bound to another OMS
 * shard closes on the old stream with MOVED (after its earlier events there) and opens on the
 * new stream with ADOPTED carrying the ME's view and the old owner's fields; from then on
 * every event about it (a fill, the cancel the new owner sends, its DONE) is in the new
 * stream, and the book is unchanged.
 * Method: shard 1 rests 5 @ 100 and fills 2; rebind to shard 3; shard 2 takes 1 more; shard 3
 * cancels it with a request id of its own. */
Test(me_stream, rebind_moves_a_live_order)
{
	fx_oms_shard = 1;
	fx_gtc(1, 1, B, 100, 5);     /* stream 1: RESTED 1 */
	fx_oms_shard = 2;
	fx_gtc(2, 1, S, 100, 2);     /* stream 1: FILL 2 */
	struct wire_oid oid = wire_oid_make(1, 1, 1);
	fx_reset();
	fx_rebind(1, 1, 1, 3);
	cr_assert_eq(fx_events(), 2);
	const struct wire_me_event *mv = ev_of(oid, WIRE_EV_MOVED);
	const struct wire_me_event *ad = ev_of(oid, WIRE_EV_ADOPTED);
	cr_assert(mv != NULL && ad != NULL);
	cr_assert_eq(mv->hdr.shard, 1);
	cr_assert_eq(mv->seq, 3);
	cr_assert_eq(mv->leaves_qty, 3);
	cr_assert_eq(mv->qty, 2);
	cr_assert_eq(ad->hdr.shard, 3);
	cr_assert_eq(ad->seq, 1);
	cr_assert_eq(ad->px, 100);
	cr_assert_eq(ad->qty, 2);
	cr_assert_eq(ad->leaves_qty, 3);
	cr_assert_eq(ad->side, B);
	cr_assert_eq(ad->liquidity, WIRE_ORD_LIMIT);
	cr_assert_eq(ad->cause, WIRE_TIF_GTC);
	cr_assert_eq(ad->contra.user, 701);
	cr_assert_eq(ad->contra.shard_seq, 5);
	cr_assert_eq(ad->contra_user, 503);
	cr_assert_eq(ad->trade_id, 200);
	cr_assert_eq(ad->notional, 0);
	cr_assert_eq(fx_depth_qty(B, 100), 3, "the book does not change");
	cr_assert_eq(me_counter(fx_me, ME_C_REBINDS), 1);
	/* A fill after the move goes to the new owner's stream. */
	fx_oms_shard = 2;
	fx_reset();
	fx_gtc(2, 2, S, 100, 1);
	const struct wire_me_event *f = ev_of(oid, WIRE_EV_FILL);
	cr_assert(f != NULL);
	cr_assert_eq(f->hdr.shard, 3);
	cr_assert_eq(f->seq, 2);
	/* The new owner cancels it (its own request id, the old orderId as target). */
	struct wire_modify c;
	memset(&c, 0, sizeof(c));
	wire_hdr_init(&c.hdr, WIRE_CANCEL_TO_ME, 0);
	c.req = wire_oid_make(3, 1, 9);
	c.target = oid;
	c.symbol = FX_SYM;
	fx_reset();
	fx_apply(&c);
	const struct wire_me_event *x = ev_of(oid, WIRE_EV_CANCELLED);
	cr_assert(x != NULL);
	cr_assert_eq(x->hdr.shard, 3);
	cr_assert_eq(x->hdr.flags, WIRE_EV_F_DONE);
	cr_assert_eq(x->leaves_qty, 0);
	for (uint32_t i = 0; i < fx_events(); i++)
		cr_assert_eq(fx_ev(i)->hdr.shard, 3, "nothing more on the old stream");
	cr_assert_eq(fx_depth_qty(B, 100), 0);
}

/* Goal: a rebind that finds nothing to move changes nothing and emits nothing: a re-send of
 * a move already made, one whose order has finished (its last event is in the old stream), one
 * from a shard that does not hold the order, one for an unknown order. (A stale one is
 * dropped before it is looked at, as every request: me_window::stale_requests_dropped.) */
Test(me_stream, rebind_is_idempotent)
{
	fx_oms_shard = 1;
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(1, 2, B, 90, 5);
	fx_rebind(1, 1, 1, 3);
	fx_reset();
	fx_rebind(1, 1, 1, 3); /* again: bound to shard 3 since the first */
	fx_rebind(1, 2, 2, 3); /* shard 2 does not hold it (nor does its orderId name shard 2) */
	fx_rebind(1, 7, 1, 3); /* unknown */
	fx_cancel(1, 3, 2); /* order 2 finishes on stream 1 */
	fx_reset();
	fx_rebind(1, 2, 1, 3);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(me_counter(fx_me, ME_C_REBIND_IGNORED), 4);
	cr_assert_eq(me_counter(fx_me, ME_C_REBINDS), 1);
}

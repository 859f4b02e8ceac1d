/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me live symbol moves (me_move.c, docs/me.md "Moving a symbol with its book"): a source
 * engine F (ME shard 0, owning the symbol) freezes its book (OUT), the book travels in
 * BOOK_CHUNKs into a target engine M (ME shard 1, the symbol configured, not owned), M opens
 * it (IN) and F drops its copy (DONE); ABORT undoes either side. Both engines are driven
 * here the way the move driver drives them (app/app_mgmt_move.c): export from F's state,
 * chunks into M, each step's ADMIN_REPLY checked.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "me_fixture.h"

#define B WIRE_SIDE_BUY
#define S WIRE_SIDE_SELL
#define F_SHARD 0
#define M_SHARD 1
#define SYM2 2             /* a second symbol, owned by M */
#define DEPTH_MAX 512
#define CHUNK_MAX 100      /* orders per chunk, as a driver on a jumbo-frame port sends */
#define BIG 1200           /* orders of the big book */
#define T_GTD 1000000000u  /* GTD orders of the big book expire from fx_now + T_GTD */

static const struct me_limits move_limits = {
	.shard = F_SHARD,
	.streams_max = 4,
	.symbols_max = 4,
	.orders_max = 8192,
	.users_max = 256,
	.levels_max = 1024,
	.levels_side_max = DEPTH_MAX,
	.gtd_max = 512,
	.events_max = 8192,
	.events_reserve = 64,
};

static struct me *M; /* the target; fx_me is the source F */

/* ---- engines ---- */

static void
on(struct me *e, const void *msg)
{
	me_apply(e, fx_now, msg, &fx_sink);
}

/* The fixture's SYMBOL_CONFIG (tick 10, lot 1, min qty 1), on any engine. */
static uint16_t
config_on(struct me *e, uint32_t sym, uint16_t owner)
{
	struct me *keep = fx_me;
	fx_me = e;
	uint16_t r = fx_config(sym, 10, 1, 1, 0, 1, 0, 0, owner);
	fx_me = keep;
	return r;
}

static struct me *
engine(uint16_t shard)
{
	struct me_limits l = move_limits;
	l.shard = shard;
	return fx_new_engine(&l);
}

static void
move_setup(void)
{
	fx_setup_limits(&move_limits);
	M = engine(M_SHARD);
	/* Every ME shard knows every symbol (the SYMBOL_CONFIG bootstrap); F owns FX_SYM. */
	cr_assert_eq(config_on(M, FX_SYM, F_SHARD), WIRE_REASON_NONE);
	fx_reset();
}

/* The fixture's invariant walk, on any engine. */
static void
check_on(struct me *e)
{
	struct me *keep = fx_me;
	fx_me = e;
	fx_check_invariants();
	fx_me = keep;
}

static void
move_fini(void)
{
	check_on(M);
	fx_fini();
}

TestSuite(me_move, .init = move_setup, .fini = move_fini, .timeout = 120);

static uint32_t
sym_index(struct me *e, uint32_t sym)
{
	uint32_t si = me_symbol_find(e, sym);
	cr_assert_neq(si, ME_NIL);
	return si;
}

static struct me_symbol *
sym_of(struct me *e)
{
	return me_sym(e, sym_index(e, FX_SYM));
}

/* ---- steps, answered by an ADMIN_REPLY that is the last message the step emits ---- */

static struct wire_admin_reply
last_reply(uint32_t caps_before)
{
	cr_assert_gt(fx_cap_count, caps_before, "no answer");
	const struct fx_cap *c = &fx_caps[fx_cap_count - 1];
	cr_assert_eq(c->u.hdr.type, WIRE_ADMIN_REPLY);
	cr_assert_eq(c->dest, WIRE_DEST_ADMIN);
	return c->u.admin;
}

static struct wire_symbol_move
move_msg(uint8_t phase, uint64_t id, uint16_t peer)
{
	struct wire_symbol_move s;
	memset(&s, 0, sizeof(s));
	wire_hdr_init(&s.hdr, WIRE_SYMBOL_MOVE, 0);
	s.move_id = id;
	s.symbol = FX_SYM;
	s.peer = peer;
	s.phase = phase;
	return s;
}

static struct wire_admin_reply
step_msg(struct me *e, const struct wire_symbol_move *s)
{
	uint32_t before = fx_cap_count;
	on(e, s);
	return last_reply(before);
}

static struct wire_admin_reply
step(struct me *e, uint8_t phase, uint64_t id, uint16_t peer)
{
	struct wire_symbol_move s = move_msg(phase, id, peer);
	return step_msg(e, &s);
}

#define OUT(id) step(fx_me, WIRE_MOVE_OUT, (id), M_SHARD)
#define DONE(id) step(fx_me, WIRE_MOVE_DONE, (id), M_SHARD)

/* IN as the driver builds it: count and hash from F's move, the rest from F's symbol. */
static struct wire_symbol_move
in_msg(uint64_t id)
{
	struct me_move_info mi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	const struct me_symbol *s = sym_of(fx_me);
	struct wire_symbol_move m = move_msg(WIRE_MOVE_IN, id, F_SHARD);
	m.count = mi.count;
	m.hash = mi.hash;
	m.status = s->status;
	m.killed = s->killed;
	m.trade_seq = s->trade_seq;
	m.last_px = s->last_px;
	return m;
}

static struct wire_admin_reply
chunk_on(struct me *e, uint64_t id, uint32_t seq, uint16_t source,
	 const struct wire_book_order *o, uint32_t n)
{
	_Alignas(8) uint8_t buf[sizeof(struct wire_book_chunk) +
				128 * sizeof(struct wire_book_order)];
	cr_assert(n <= 128);
	struct wire_book_chunk *c = (void *)buf;
	memset(c, 0, sizeof(*c));
	wire_hdr_init(&c->hdr, WIRE_BOOK_CHUNK, 0);
	c->hdr.length = (uint16_t)(sizeof(*c) + n * sizeof(*o));
	c->move_id = id;
	c->symbol = FX_SYM;
	c->seq = seq;
	c->source = source;
	c->count = (uint16_t)n;
	c->tail_len = (uint16_t)(n * sizeof(*o));
	if (n > 0)
		memcpy(c + 1, o, n * sizeof(*o));
	uint32_t before = fx_cap_count;
	on(e, c);
	return last_reply(before);
}

/* Chunk `seq` of F's frozen book (per orders each), exported from F. Returns its size. */
static uint32_t
export_chunk(uint64_t id, uint32_t seq, uint32_t per, struct wire_book_order *o)
{
	int n = me_move_export(fx_me, FX_SYM, id, seq * per, o, per);
	cr_assert_geq(n, 0);
	return (uint32_t)n;
}

/* Every chunk of F's frozen book into M, from chunk `first`; returns the chunks sent. */
static uint32_t
transfer(uint64_t id, uint32_t first, uint32_t per)
{
	struct wire_book_order o[128];
	struct me_move_info mi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	uint32_t chunks = mi.count == 0 ? 1 : (mi.count + per - 1) / per;
	for (uint32_t seq = first; seq < chunks; seq++) {
		uint32_t n = export_chunk(id, seq, per, o);
		struct wire_admin_reply r = chunk_on(M, id, seq, F_SHARD, o, n);
		cr_assert_eq(r.reason, WIRE_REASON_NONE, "chunk %u: reason %u", seq, r.reason);
		cr_assert_eq(r.value, seq + 1);
		fx_reset();
	}
	return chunks;
}

static void
ack_all_on(struct me *e)
{
	struct me_stream_info si;
	for (uint32_t i = 0; me_stream_info_at(e, i, &si) == 0; i++) {
		struct wire_stream_ack a;
		memset(&a, 0, sizeof(a));
		wire_hdr_init(&a.hdr, WIRE_STREAM_ACK, 0);
		a.stream = si.shard;
		a.seq = si.next_seq - 1;
		on(e, &a);
	}
}

/* A frozen source's needs (me_move_info.need_*): one entry per OMS shard in `shards` (a
 * bit per shard), each the last seq of that shard's stream. */
static void
check_needs(const struct me_move_info *fi, uint32_t shards)
{
	struct me_stream_info st;
	uint32_t want = 0;
	for (uint32_t i = 0; me_stream_info_at(fx_me, i, &st) == 0; i++)
		if ((shards >> st.shard) & 1)
			want++;
	cr_assert_eq(fi->need_over, 0);
	cr_assert_eq(fi->need_n, want, "%u OMS shards wait, want %u", fi->need_n, want);
	for (uint32_t k = 0; k < fi->need_n; k++) {
		cr_assert((shards >> fi->need_shard[k]) & 1, "shard %u", fi->need_shard[k]);
		for (uint32_t i = 0; me_stream_info_at(fx_me, i, &st) == 0; i++)
			if (st.shard == fi->need_shard[k])
				cr_assert_eq(fi->need_seq[k], st.next_seq - 1, "shard %u",
					     st.shard);
	}
}

/* ---- books ---- */

static uint64_t
big_user(uint32_t i)
{
	return 1 + i % 7;
}

static struct wire_oid
big_oid(uint32_t i)
{
	return wire_oid_make((uint16_t)(i % 3), big_user(i), 1000 + i);
}

/* n orders on FX_SYM of F: bids at or below 10000 and asks at or above 10010 over 150
 * levels a side, seven users, three OMS shards (streams), every tenth a GTD. */
static void
populate(uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		fx_oms_shard = (uint16_t)(i % 3);
		uint8_t side = i % 2 ? S : B;
		int64_t level = (int64_t)((i / 2) % 150);
		int64_t px = side == B ? 10000 - 10 * level : 10010 + 10 * level;
		struct wire_submit s = fx_order(big_user(i), 1000 + i, side, WIRE_ORD_LIMIT,
						i % 10 == 0 ? WIRE_TIF_GTD : WIRE_TIF_GTC, px,
						1 + i % 5);
		if (i % 10 == 0)
			s.expire_ns = fx_now + T_GTD + i;
		fx_submit(&s);
		cr_assert_eq(fx_reject_reason(big_user(i), 1000 + i), -1);
		if (fx_cap_count > FX_CAP_MAX / 2)
			fx_reset();
	}
	fx_oms_shard = 0;
	fx_reset();
}

static uint32_t
depth_of(struct me *e, uint8_t side, struct me_depth_level *d)
{
	return me_depth(e, FX_SYM, (enum wire_side)side, d, DEPTH_MAX);
}

static void
check_depth_equal(struct me *e, const struct me_depth_level *bid, uint32_t nb,
		  const struct me_depth_level *ask, uint32_t na)
{
	static struct me_depth_level d[DEPTH_MAX];
	cr_assert_eq(depth_of(e, B, d), nb);
	cr_assert(memcmp(d, bid, nb * sizeof(*d)) == 0, "bids differ");
	cr_assert_eq(depth_of(e, S, d), na);
	cr_assert(memcmp(d, ask, na * sizeof(*d)) == 0, "asks differ");
}

static const struct me_order *
rec_on(struct me *e, struct wire_oid oid)
{
	uint32_t oi = me_order_find(e, oid);
	return oi == ME_NIL ? NULL : me_ord(e, oi);
}

static uint16_t
stream_shard(struct me *e, const struct me_order *o)
{
	return me_stream_at(e, o->stream)->shard;
}

static struct wire_admin_reply
admin_on(struct me *e, const void *msg)
{
	uint32_t before = fx_cap_count;
	on(e, msg);
	return last_reply(before);
}

/* ---- the whole move ---- */

/* Goal: a book of 1,200 orders over 300 levels, seven users, three OMS streams and GTD
 * orders moves whole: M's depth equals F's before the move level by level, every order has
 * the same fields, M trades the moved orders in F's time priority with trade numbers going
 * on from F's, and F after DONE holds nothing of the book and names M as the owner.
 * Method: two trades on F (trade_seq 2), populate, OUT, 12 chunks of 100, ack F's streams
 * (ready), IN, compare, cross the best bid level on M, DONE. */
Test(me_move, round_trip_big_book)
{
	fx_gtc(90, 1, B, 10000, 2);
	fx_gtc(91, 1, S, 10000, 1);
	fx_gtc(91, 2, S, 10000, 1);
	cr_assert_eq(sym_of(fx_me)->trade_seq, 2);
	populate(BIG);
	cr_assert_eq(me_orders_resting(fx_me), BIG);
	static struct me_depth_level bid[DEPTH_MAX], ask[DEPTH_MAX];
	uint32_t nb = depth_of(fx_me, B, bid), na = depth_of(fx_me, S, ask);
	cr_assert_eq(nb, 150);
	cr_assert_eq(na, 150);
	/* F's FIFO at its best bid, oldest first: the makers M must fill in this order. */
	uint64_t fifo[16];
	uint32_t nfifo = 0;
	uint32_t si = sym_index(fx_me, FX_SYM);
	for (uint32_t oi = me_lvl(fx_me, me_book_best(fx_me, si, 0))->head; oi != ME_NIL;
	     oi = me_ord(fx_me, oi)->next)
		fifo[nfifo++] = me_ord(fx_me, oi)->oid.shard_seq;
	cr_assert_eq(nfifo, 4);

	struct wire_admin_reply r = OUT(77);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, BIG);
	struct me_move_info fi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &fi), 0);
	cr_assert_eq(fi.move_id, 77);
	cr_assert_eq(fi.role, ME_MOVE_SOURCE);
	cr_assert_eq(fi.phase, ME_MOVE_FROZEN);
	cr_assert_eq(fi.count, BIG);
	cr_assert_eq(fi.peer, M_SHARD);
	cr_assert_eq(fi.ready, 0, "events not acknowledged yet");
	check_needs(&fi, 0xff);
	/* One stream acknowledged one short of its last event about the book, another whole:
	 * the first still waits for that event, the second no longer. */
	struct me_stream_info st;
	for (uint32_t i = 0; me_stream_info_at(fx_me, i, &st) == 0; i++) {
		if (st.shard != 1 && st.shard != 2)
			continue;
		struct wire_stream_ack a;
		memset(&a, 0, sizeof(a));
		wire_hdr_init(&a.hdr, WIRE_STREAM_ACK, 0);
		a.stream = st.shard;
		a.seq = st.next_seq - (st.shard == 1 ? 2 : 1);
		on(fx_me, &a);
	}
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &fi), 0);
	cr_assert_eq(fi.ready, 0);
	check_needs(&fi, 1u << 0 | 1u << 1);
	cr_assert_eq(me_move_ready(fx_me, FX_SYM), 0);

	cr_assert_eq(transfer(77, 0, CHUNK_MAX), BIG / CHUNK_MAX);
	struct me_move_info mi;
	cr_assert_eq(me_move_info(M, FX_SYM, &mi), 0);
	cr_assert_eq(mi.role, ME_MOVE_TARGET);
	cr_assert_eq(mi.phase, ME_MOVE_INSTALLING);
	cr_assert_eq(mi.count, BIG);
	cr_assert_eq(mi.hash, fi.hash);
	cr_assert_eq(mi.next_chunk, BIG / CHUNK_MAX);
	cr_assert_eq(mi.peer, F_SHARD);
	/* Export past the end, and for another move, give nothing. */
	struct wire_book_order tmp[4];
	cr_assert_eq(me_move_export(fx_me, FX_SYM, 77, BIG, tmp, 4), 0);
	cr_assert_eq(me_move_export(fx_me, FX_SYM, 78, 0, tmp, 4), -ENOENT);
	cr_assert_eq(me_move_export(M, FX_SYM, 77, 0, tmp, 4), -ENOENT);

	ack_all_on(fx_me);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &fi), 0);
	cr_assert_eq(fi.ready, 1);
	cr_assert_eq(fi.need_n, 0);
	cr_assert_eq(me_move_ready(fx_me, FX_SYM), 1);

	struct wire_symbol_move in = in_msg(77);
	r = step_msg(M, &in);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, BIG);
	cr_assert_eq(sym_of(M)->me_shard, M_SHARD);
	cr_assert_eq(sym_of(M)->trade_seq, 2);
	cr_assert_eq(sym_of(M)->last_px, 10000);
	cr_assert_eq(me_move_info(M, FX_SYM, &mi), 0);
	cr_assert_eq(mi.phase, ME_MOVE_FINISHED);
	check_depth_equal(M, bid, nb, ask, na);
	for (uint32_t i = 0; i < BIG; i++) {
		const struct me_order *of = rec_on(fx_me, big_oid(i));
		const struct me_order *om = rec_on(M, big_oid(i));
		cr_assert(of != NULL);
		cr_assert(om != NULL, "order %u not on M", i);
		cr_assert_eq(om->state, ME_ST_LIVE);
		cr_assert_eq(om->px, of->px);
		cr_assert_eq(om->leaves, of->leaves);
		cr_assert_eq(om->cum, of->cum);
		cr_assert_eq(om->side, of->side);
		cr_assert_eq(om->tif, of->tif);
		cr_assert_eq(om->stp, of->stp);
		cr_assert_eq(om->ord_type, of->ord_type);
		cr_assert_eq(om->expire_ns, of->expire_ns);
		cr_assert_eq(om->fp, of->fp);
		cr_assert_eq(stream_shard(M, om), stream_shard(fx_me, of));
		cr_assert_eq(stream_shard(M, om), i % 3);
	}
	/* GTD orders are on M's heap again (one entry each). */
	cr_assert_eq(M->gtd_count, BIG / 10);
	cr_assert_eq(M->gtd_held, 0);
	check_on(M);

	/* Cross M's best bid level: the makers fill oldest first, trade ids go on from 3. */
	fx_reset();
	int64_t best_qty = bid[0].qty;
	struct wire_submit t = fx_order(900, 1, S, WIRE_ORD_LIMIT, WIRE_TIF_IOC, bid[0].px,
					best_qty);
	on(M, &t);
	uint32_t fills = 0;
	for (uint32_t k = 0; k < fx_events(); k++) {
		const struct wire_me_event *e = fx_ev(k);
		cr_assert_eq(e->me_shard, M_SHARD);
		if (e->event != WIRE_EV_FILL || e->liquidity != 1)
			continue;
		cr_assert_lt(fills, nfifo);
		cr_assert_eq(e->oid.shard_seq, fifo[fills], "fill %u out of time priority", fills);
		cr_assert_eq(e->trade_id, 3 + fills);
		fills++;
	}
	cr_assert_eq(fills, nfifo);
	cr_assert_eq(sym_of(M)->trade_seq, 2 + nfifo);

	/* F drops its frozen copy: nothing of the book is left, M owns the symbol. */
	fx_reset();
	uint32_t records = me_records_used(fx_me);
	r = DONE(77);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, BIG);
	cr_assert_eq(fx_events(), 0, "DONE is silent");
	cr_assert_eq(me_orders_resting(fx_me), 0);
	cr_assert_eq(me_records_used(fx_me), records - BIG);
	cr_assert_eq(fx_me->levels_used, 0);
	cr_assert_eq(fx_me->gtd_held, 0);
	cr_assert_eq(sym_of(fx_me)->me_shard, M_SHARD);
	cr_assert_eq(sym_of(fx_me)->resting, 0);
	for (uint32_t i = 0; i < BIG; i++)
		cr_assert(rec_on(fx_me, big_oid(i)) == NULL);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &fi), 0);
	cr_assert_eq(fi.phase, ME_MOVE_FINISHED);
	cr_assert_eq(fi.ready, 0);
	/* F answers for the symbol as any non-owner now. */
	fx_gtc(5, 1, B, 100, 1);
	cr_assert_eq(fx_reject_reason(5, 1), WIRE_REASON_SYMBOL_NOT_OWNED);
}

/* Goal: a move with an empty book works (one empty chunk), and the moved symbol can come
 * back the same way (a second move in the other direction on the same engines).
 * Method: OUT an empty book, chunk 0 with no orders, IN, DONE; rest two orders on M; move
 * them back from M to F. */
Test(me_move, empty_book_and_back)
{
	cr_assert_eq(OUT(1).value, 0);
	cr_assert_eq(chunk_on(M, 1, 0, F_SHARD, NULL, 0).value, 1);
	struct wire_symbol_move in = in_msg(1);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	cr_assert_eq(DONE(1).reason, WIRE_REASON_NONE);
	struct wire_submit s = fx_order(3, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 2);
	on(M, &s);
	s = fx_order(3, 2, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 120, 2);
	on(M, &s);
	cr_assert_eq(me_orders_resting(M), 2);
	/* Back: M is the source now, F the target. */
	struct wire_admin_reply r = step(M, WIRE_MOVE_OUT, 2, F_SHARD);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 2);
	struct wire_book_order o[2];
	cr_assert_eq(me_move_export(M, FX_SYM, 2, 0, o, 2), 2);
	cr_assert_eq(o[0].side, B);
	cr_assert_eq(o[1].side, S);
	cr_assert_eq(chunk_on(fx_me, 2, 0, M_SHARD, o, 2).reason, WIRE_REASON_NONE);
	struct me_move_info mi;
	cr_assert_eq(me_move_info(M, FX_SYM, &mi), 0);
	struct wire_symbol_move back = move_msg(WIRE_MOVE_IN, 2, M_SHARD);
	back.count = mi.count;
	back.hash = mi.hash;
	back.status = WIRE_SYM_TRADING;
	cr_assert_eq(step_msg(fx_me, &back).reason, WIRE_REASON_NONE);
	cr_assert_eq(step(M, WIRE_MOVE_DONE, 2, F_SHARD).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_orders_resting(fx_me), 2);
	cr_assert_eq(me_orders_resting(M), 0);
	cr_assert_eq(sym_of(fx_me)->me_shard, F_SHARD);
	cr_assert_eq(sym_of(M)->me_shard, F_SHARD);
	/* F trades them. */
	fx_gtc(4, 1, S, 100, 2);
	cr_assert_eq(fx_count(3, 1, WIRE_EV_FILL), 1);
}

/* ---- frozen and installing books ---- */

/* Goal: a frozen book answers every request that would change it with SYMBOL_MOVING (a
 * submit REJECTED, a cancel, amend or replace CANCEL_REJECTED), admin changes to the symbol
 * with BACKPRESSURE, a rebind is ignored; queries and open-orders snapshots still show its
 * orders; other symbols trade on.
 * Method: rest three orders, OUT, send each request. */
Test(me_move, frozen_source_refuses)
{
	cr_assert_eq(config_on(fx_me, SYM2, F_SHARD), WIRE_REASON_NONE);
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(1, 2, S, 200, 5);
	fx_gtc(2, 1, B, 90, 5);
	cr_assert_eq(OUT(9).reason, WIRE_REASON_NONE);
	uint64_t hash = me_state_hash(fx_me);
	fx_reset();
	fx_gtc(3, 1, B, 100, 1);
	cr_assert_eq(fx_reject_reason(3, 1), WIRE_REASON_SYMBOL_MOVING);
	fx_cancel(1, 10, 1);
	cr_assert_eq(fx_reject_reason(1, 10), WIRE_REASON_SYMBOL_MOVING);
	cr_assert_eq(fx_find(1, 10, WIRE_EV_CANCEL_REJECTED, 0)->side, B);
	fx_amend(1, 11, 2, 2);
	cr_assert_eq(fx_reject_reason(1, 11), WIRE_REASON_SYMBOL_MOVING);
	fx_replace(2, 12, 1, 80, 5);
	cr_assert_eq(fx_reject_reason(2, 12), WIRE_REASON_SYMBOL_MOVING);
	/* A cancel of an order that is not live answers as before. */
	fx_cancel(1, 13, 99);
	cr_assert_eq(fx_reject_reason(1, 13), WIRE_REASON_UNKNOWN_ORDER);
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_HALTED, 1), WIRE_REASON_BACKPRESSURE);
	cr_assert_eq(fx_kill(WIRE_KILL_SYMBOL, FX_SYM, 1), WIRE_REASON_BACKPRESSURE);
	cr_assert_eq(fx_config(FX_SYM, 10, 1, 1, 0, 1, 0, 0, F_SHARD), WIRE_REASON_BACKPRESSURE);
	uint64_t ignored = me_counter(fx_me, ME_C_REBIND_IGNORED);
	struct wire_rebind rb;
	memset(&rb, 0, sizeof(rb));
	wire_hdr_init(&rb.hdr, WIRE_REBIND_TO_ME, 0);
	rb.oid = fx_oid(1, 1);
	rb.from_shard = 0;
	rb.to_shard = 2;
	rb.symbol = FX_SYM;
	fx_apply(&rb);
	cr_assert_eq(me_counter(fx_me, ME_C_REBIND_IGNORED), ignored + 1);
	cr_assert_eq(fx_count(1, 1, WIRE_EV_MOVED), 0);
	/* The book is exactly as frozen. */
	cr_assert_eq(me_orders_resting(fx_me), 3);
	cr_assert_eq(fx_depth_qty(B, 100), 5);
	cr_assert_eq(fx_depth_qty(S, 200), 5);
	cr_assert_eq(fx_rec(1, 1)->stream, 0);
	struct me_move_info mi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.count, 3);
	/* Queries answer as before; the frozen orders are still F's to list. */
	fx_query(1, 1);
	cr_assert_eq(fx_result()->known, 1);
	cr_assert_eq(fx_result()->leaves_qty, 5);
	struct wire_open_orders_query q;
	memset(&q, 0, sizeof(q));
	wire_hdr_init(&q.hdr, WIRE_OPEN_ORDERS_QUERY, 0);
	q.user = 1;
	fx_apply(&q);
	cr_assert_eq(fx_caps[fx_cap_count - 1].u.snap.count, 2);
	/* A duplicate submit is answered from its record. */
	fx_gtc(1, 1, B, 100, 5);
	cr_assert_eq(fx_result()->reason, WIRE_REASON_NONE);
	cr_assert_eq(fx_result()->known, 1);
	/* Another symbol trades. */
	struct wire_submit s = fx_order(4, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 1);
	s.symbol = SYM2;
	fx_submit(&s);
	cr_assert_eq(fx_reject_reason(4, 1), -1);
	cr_assert_neq(me_state_hash(fx_me), hash); /* the refusals were recorded, of course */
}

/* Goal: the needs of a frozen source (me_move_info.need_*) name every OMS shard whose stream
 * has events not acknowledged, with the stream's last seq — an event about another symbol
 * included (reading the streams, not the book) — while me_move_ready answers for the frozen
 * orders alone; neither changes the engine.
 * Method: two orders of two OMS shards, OUT, acknowledge, then an order of SYM2 from one. */
Test(me_move, needs_cover_the_streams_ready_the_book)
{
	cr_assert_eq(config_on(fx_me, SYM2, F_SHARD), WIRE_REASON_NONE);
	fx_gtc(1, 1, B, 100, 5);
	fx_oms_shard = 1;
	fx_gtc(2, 1, S, 200, 5);
	fx_oms_shard = 0;
	cr_assert_eq(OUT(9).reason, WIRE_REASON_NONE);
	struct me_move_info fi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &fi), 0);
	cr_assert_eq(fi.ready, 0);
	check_needs(&fi, 1u << 0 | 1u << 1);
	cr_assert_eq(me_move_ready(fx_me, FX_SYM), 0);
	ack_all_on(fx_me);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &fi), 0);
	cr_assert_eq(fi.ready, 1);
	cr_assert_eq(fi.need_n, 0);
	cr_assert_eq(me_move_ready(fx_me, FX_SYM), 1);
	/* Another symbol trades for OMS shard 1: its stream waits again, the book does not. */
	fx_oms_shard = 1;
	struct wire_submit s = fx_order(4, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 1);
	s.symbol = SYM2;
	fx_submit(&s);
	fx_oms_shard = 0;
	cr_assert_eq(fx_reject_reason(4, 1), -1);
	uint64_t hash = me_state_hash(fx_me);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &fi), 0);
	cr_assert_eq(fi.ready, 0);
	check_needs(&fi, 1u << 1);
	cr_assert_eq(me_move_ready(fx_me, FX_SYM), 1);
	cr_assert_eq(me_move_ready(fx_me, SYM2), -ENOENT, "no move of SYM2");
	cr_assert_eq(me_state_hash(fx_me), hash);
}

/* Goal: a book being installed on M is inert: a submit or a cancel of an installed order
 * gets SYMBOL_MOVING, halts and kill-switches of the symbol BACKPRESSURE, an open-orders
 * snapshot does not list installed orders, a user kill-switch does not cancel them.
 * Method: F rests orders; OUT; one chunk into M; try each on M. */
Test(me_move, installing_target_is_inert)
{
	fx_gtc(1, 1, B, 100, 5);
	fx_gtc(1, 2, B, 90, 5);
	fx_gtc(2, 1, S, 200, 5);
	cr_assert_eq(OUT(4).reason, WIRE_REASON_NONE);
	transfer(4, 0, CHUNK_MAX);
	cr_assert_eq(me_orders_resting(M), 3);
	fx_reset();
	struct wire_submit s = fx_order(3, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 1);
	on(M, &s);
	cr_assert_eq(fx_reject_reason(3, 1), WIRE_REASON_SYMBOL_MOVING);
	struct wire_modify c;
	memset(&c, 0, sizeof(c));
	wire_hdr_init(&c.hdr, WIRE_CANCEL_TO_ME, 0);
	c.req = fx_oid(1, 5);
	c.target = fx_oid(1, 1);
	c.symbol = FX_SYM;
	on(M, &c);
	cr_assert_eq(fx_reject_reason(1, 5), WIRE_REASON_SYMBOL_MOVING);
	struct wire_symbol_status_msg h;
	memset(&h, 0, sizeof(h));
	wire_hdr_init(&h.hdr, WIRE_SYMBOL_STATUS, 0);
	h.symbol = FX_SYM;
	h.status = WIRE_SYM_HALTED;
	cr_assert_eq(admin_on(M, &h).reason, WIRE_REASON_BACKPRESSURE);
	struct wire_kill_switch k;
	memset(&k, 0, sizeof(k));
	wire_hdr_init(&k.hdr, WIRE_KILL_SWITCH, 0);
	k.scope = WIRE_KILL_SYMBOL;
	k.id = FX_SYM;
	k.engage = 1;
	cr_assert_eq(admin_on(M, &k).reason, WIRE_REASON_BACKPRESSURE);
	cr_assert_eq(config_on(M, FX_SYM, M_SHARD), WIRE_REASON_BACKPRESSURE);
	/* A user kill-switch engaged on M while its orders install cancels none of them. */
	k.scope = WIRE_KILL_USER;
	k.id = 1;
	cr_assert_eq(admin_on(M, &k).reason, WIRE_REASON_NONE);
	cr_assert_eq(fx_count(1, 1, WIRE_EV_CANCELLED), 0);
	cr_assert_eq(me_orders_resting(M), 3);
	struct wire_open_orders_query q;
	memset(&q, 0, sizeof(q));
	wire_hdr_init(&q.hdr, WIRE_OPEN_ORDERS_QUERY, 0);
	q.user = 1;
	on(M, &q);
	const struct wire_open_orders_snapshot *snap = &fx_caps[fx_cap_count - 1].u.snap;
	cr_assert_eq(snap->hdr.type, WIRE_OPEN_ORDERS_SNAPSHOT);
	cr_assert_eq(snap->count, 0);
	cr_assert_eq(snap->last, 1);
	/* IN opens the book, and the kill-switch job starts on it then: user 1's two orders
	 * are cancelled by M, user 2's stays. */
	fx_reset();
	struct wire_symbol_move in = in_msg(4);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	cr_assert_eq(fx_find(1, 1, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_KILL_SWITCH);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_CANCELLED, 0)->me_shard, M_SHARD);
	cr_assert_eq(me_orders_resting(M), 1);
	q.user = 2;
	on(M, &q);
	cr_assert_eq(fx_caps[fx_cap_count - 1].u.snap.count, 1);
}

/* ---- GTD ---- */

/* Goal: GTD orders never expire while their book is frozen or being installed; on the
 * target they expire once IN opens the book — at once if their time passed meanwhile,
 * else at their time.
 * Method: two GTD orders (t1 < t2); OUT; time past t1; chunk; more time; IN; then past t2. */
Test(me_move, gtd_waits_for_the_move)
{
	uint64_t t1 = fx_now + 1000, t2 = fx_now + 100000;
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 100, 1);
	s.expire_ns = t1;
	fx_submit(&s);
	s = fx_order(1, 2, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 90, 1);
	s.expire_ns = t2;
	fx_submit(&s);
	fx_gtc(2, 1, S, 200, 1);
	cr_assert_eq(fx_me->gtd_count, 2);
	cr_assert_eq(OUT(3).reason, WIRE_REASON_NONE);
	cr_assert_eq(fx_me->gtd_count, 0, "the frozen orders' entries are off the heap");
	cr_assert_eq(fx_me->gtd_held, 2);
	fx_tick(t1 + 1);
	fx_gtc(3, 1, B, 10, 1); /* an apply on F: refused, the book is frozen */
	cr_assert_eq(fx_reject_reason(3, 1), WIRE_REASON_SYMBOL_MOVING);
	cr_assert_eq(fx_count(1, 1, WIRE_EV_CANCELLED), 0);
	cr_assert_eq(me_orders_resting(fx_me), 3);
	transfer(3, 0, CHUNK_MAX);
	cr_assert_eq(M->gtd_held, 2);
	me_tick(M, t1 + 2, &fx_sink);
	cr_assert_eq(fx_count(1, 1, WIRE_EV_CANCELLED), 0);
	fx_reset();
	struct wire_symbol_move in = in_msg(3);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	const struct wire_me_event *e = fx_find(1, 1, WIRE_EV_CANCELLED, 0);
	cr_assert(e != NULL, "past due: expired as IN opens the book");
	cr_assert_eq(e->cause, WIRE_CAUSE_EXPIRED);
	cr_assert_eq(e->me_shard, M_SHARD);
	cr_assert_eq(fx_count(1, 2, WIRE_EV_CANCELLED), 0);
	me_tick(M, t2, &fx_sink);
	cr_assert_eq(fx_find(1, 2, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_EXPIRED);
	cr_assert_eq(fx_count(1, 1, WIRE_EV_CANCELLED), 1);
	cr_assert_eq(fx_count(1, 2, WIRE_EV_CANCELLED), 1);
	cr_assert_eq(M->gtd_held, 0);
	cr_assert_eq(DONE(3).reason, WIRE_REASON_NONE);
	cr_assert_eq(fx_me->gtd_held, 0);
	/* F: an apply past t2 expires nothing (the orders are gone). */
	fx_reset();
	fx_tick(t2 + 1);
	cr_assert_eq(fx_events(), 0);
}

/* Goal: an installed order reusing the record of an earlier GTD order with the same expiry
 * is not expired by that order's stale heap entry while its book installs, and expires
 * exactly once after IN.
 * Method: on M, a GTD order of SYM2 (owned by M) at T is cancelled and its records released
 * (acked); F freezes two GTD orders at T; they install into the released records; time
 * passes T on M; IN. */
Test(me_move, recycled_record_not_expired_while_installing)
{
	uint64_t T = fx_now + 5000;
	cr_assert_eq(config_on(M, SYM2, M_SHARD), WIRE_REASON_NONE);
	struct wire_submit s = fx_order(7, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 100, 1);
	s.symbol = SYM2;
	s.expire_ns = T;
	on(M, &s);
	struct wire_modify c;
	memset(&c, 0, sizeof(c));
	wire_hdr_init(&c.hdr, WIRE_CANCEL_TO_ME, 0);
	c.req = fx_oid(7, 2);
	c.target = fx_oid(7, 1);
	c.symbol = SYM2;
	on(M, &c);
	uint32_t freed = me_order_find(M, fx_oid(7, 1));
	cr_assert_neq(freed, ME_NIL);
	ack_all_on(M);
	cr_assert_eq(me_order_find(M, fx_oid(7, 1)), ME_NIL);
	cr_assert_eq(M->gtd_count, 1, "the cancelled order's entry is still on the heap");

	s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 100, 1);
	s.expire_ns = T;
	fx_submit(&s);
	s = fx_order(1, 2, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 100, 1);
	s.expire_ns = T;
	fx_submit(&s);
	cr_assert_eq(OUT(5).reason, WIRE_REASON_NONE);
	transfer(5, 0, CHUNK_MAX);
	cr_assert(me_order_find(M, fx_oid(1, 1)) == freed ||
			  me_order_find(M, fx_oid(1, 2)) == freed,
		  "an installed order took the released record");
	fx_reset();
	me_tick(M, T + 1, &fx_sink);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(me_orders_resting(M), 2);
	struct wire_symbol_move in = in_msg(5);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	me_tick(M, T + 2, &fx_sink);
	cr_assert_eq(fx_count(1, 1, WIRE_EV_CANCELLED), 1);
	cr_assert_eq(fx_count(1, 2, WIRE_EV_CANCELLED), 1);
	cr_assert_eq(me_orders_resting(M), 0);
}

/* ---- answers to each step ---- */

/* Goal: OUT is idempotent on move_id and refuses what it must: itself as the target, an
 * unknown symbol, a symbol not owned, another move's id while frozen (CONFLICT naming it),
 * a book a halt is still cancelling (BACKPRESSURE).
 * Method: each case against F or M. */
Test(me_move, out_answers)
{
	fx_gtc(1, 1, B, 100, 1);
	struct wire_admin_reply r = step(fx_me, WIRE_MOVE_OUT, 1, F_SHARD);
	cr_assert_eq(r.reason, WIRE_REASON_BAD_REQUEST);
	struct wire_symbol_move m = move_msg(WIRE_MOVE_OUT, 1, M_SHARD);
	m.symbol = 99;
	cr_assert_eq(step_msg(fx_me, &m).reason, WIRE_REASON_UNKNOWN_SYMBOL);
	cr_assert_eq(step(M, WIRE_MOVE_OUT, 1, 2).reason, WIRE_REASON_SYMBOL_NOT_OWNED);
	m = move_msg(WIRE_MOVE_OUT, 0, M_SHARD);
	cr_assert_eq(step_msg(fx_me, &m).reason, WIRE_REASON_BAD_REQUEST);
	m = move_msg(9, 1, M_SHARD);
	cr_assert_eq(step_msg(fx_me, &m).reason, WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &(struct me_move_info){0}), -ENOENT);

	r = OUT(1);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 1);
	uint64_t h = me_state_hash(fx_me);
	r = OUT(1);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 1);
	r = OUT(2);
	cr_assert_eq(r.reason, WIRE_REASON_CONFLICT);
	cr_assert_eq(r.value, 1);
	r = step(fx_me, WIRE_MOVE_OUT, 1, 3);
	cr_assert_eq(r.reason, WIRE_REASON_BAD_REQUEST, "the same move to another target");
	fx_me->counters[ME_C_CONFIG_REJECTED] -= 2;
	cr_assert_eq(me_state_hash(fx_me), h, "repeats and refusals change nothing else");
	cr_assert_eq(step(fx_me, WIRE_MOVE_ABORT, 1, M_SHARD).reason, WIRE_REASON_NONE);

	/* A halt with cancel whose job waits for retention: OUT waits too. */
	fx_oms_shard = 2;
	uint32_t n = (uint32_t)(move_limits.events_max / 2);
	for (uint32_t i = 0; i < n; i++)
		fx_gtc(50, 10 + i, S, 1000 + 10 * (i % 300), 1);
	fx_oms_shard = 0;
	fx_reset();
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_HALTED, 1), WIRE_REASON_NONE);
	cr_assert(me_bulk_pending(fx_me, ME_BULK_BOOK, sym_index(fx_me, FX_SYM)));
	cr_assert_eq(OUT(3).reason, WIRE_REASON_BACKPRESSURE);
}

/* Goal: chunks apply once and in order: a repeat is answered with the seq taken next, a
 * gap is refused with it (lower than the chunk's), a chunk for a move M never opened says
 * "from 0", chunk 0 of another move while one installs is a CONFLICT naming it; chunk 0 is
 * refused for an unknown symbol, a symbol M owns, or from M itself.
 * Method: a 250-order book in chunks of 100. */
Test(me_move, chunk_answers)
{
	populate(250);
	cr_assert_eq(OUT(6).reason, WIRE_REASON_NONE);
	struct wire_book_order o[3][CHUNK_MAX];
	uint32_t n[3];
	for (uint32_t k = 0; k < 3; k++)
		n[k] = export_chunk(6, k, CHUNK_MAX, o[k]);
	cr_assert_eq(n[2], 50);
	struct wire_admin_reply r = chunk_on(M, 6, 1, F_SHARD, o[1], n[1]);
	cr_assert_eq(r.reason, WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(r.value, 0, "nothing installed: from chunk 0");
	r = chunk_on(M, 6, 0, M_SHARD, o[0], n[0]);
	cr_assert_eq(r.reason, WIRE_REASON_BAD_REQUEST, "from itself");
	r = chunk_on(M, 6, 0, F_SHARD, o[0], n[0]);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 1);
	uint64_t h = me_state_hash(M);
	r = chunk_on(M, 6, 0, F_SHARD, o[0], n[0]);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 1);
	r = chunk_on(M, 6, 2, F_SHARD, o[2], n[2]);
	cr_assert_eq(r.reason, WIRE_REASON_BAD_REQUEST);
	cr_assert_eq(r.value, 1, "a gap: resend from 1");
	r = chunk_on(M, 7, 0, F_SHARD, o[0], n[0]);
	cr_assert_eq(r.reason, WIRE_REASON_CONFLICT);
	cr_assert_eq(r.value, 6);
	M->counters[ME_C_CONFIG_REJECTED] -= 2;
	cr_assert_eq(me_state_hash(M), h, "a repeat, a gap and a conflict change nothing");
	cr_assert_eq(chunk_on(M, 6, 1, F_SHARD, o[1], n[1]).value, 2);
	cr_assert_eq(chunk_on(M, 6, 2, F_SHARD, o[2], n[2]).value, 3);
	struct me_move_info mi;
	cr_assert_eq(me_move_info(M, FX_SYM, &mi), 0);
	cr_assert_eq(mi.count, 250);
	cr_assert_eq(mi.next_chunk, 3);
	/* After IN, a late chunk is answered as a repeat. */
	struct wire_symbol_move in = in_msg(6);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	r = chunk_on(M, 6, 2, F_SHARD, o[2], n[2]);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 3);
	/* M owns it now: a new install is refused; so is one of an unknown symbol. */
	cr_assert_eq(chunk_on(M, 8, 0, F_SHARD, NULL, 0).reason, WIRE_REASON_BAD_REQUEST);
	_Alignas(8) uint8_t buf[sizeof(struct wire_book_chunk)];
	struct wire_book_chunk *c = (void *)buf;
	memset(c, 0, sizeof(*c));
	wire_hdr_init(&c->hdr, WIRE_BOOK_CHUNK, 0);
	c->move_id = 8;
	c->symbol = 99;
	c->source = F_SHARD;
	cr_assert_eq(admin_on(M, c).reason, WIRE_REASON_UNKNOWN_SYMBOL);
	/* A tail that does not match its count. */
	c->symbol = FX_SYM;
	c->count = 1;
	cr_assert_eq(admin_on(M, c).reason, WIRE_REASON_BAD_REQUEST);
}

/* Goal: IN opens only the book the source froze: a count or hash that differs is a
 * CONFLICT; IN and DONE repeat; a step for an unknown move is refused; ABORT after the
 * end is TOO_LATE, ABORT of an unknown move NONE.
 * Method: a 30-order move driven to the end with the wrong steps in between. */
Test(me_move, in_done_abort_answers)
{
	populate(30);
	cr_assert_eq(OUT(11).reason, WIRE_REASON_NONE);
	transfer(11, 0, 7);
	cr_assert_eq(DONE(12).reason, WIRE_REASON_CONFLICT);
	cr_assert_eq(DONE(12).value, 11);
	struct wire_symbol_move in = in_msg(11);
	in.hash ^= 1;
	struct wire_admin_reply r = step_msg(M, &in);
	cr_assert_eq(r.reason, WIRE_REASON_CONFLICT);
	cr_assert_eq(r.value, 30);
	in = in_msg(11);
	in.count--;
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_CONFLICT);
	in = in_msg(11);
	in.move_id = 12;
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_CONFLICT);
	in = in_msg(11);
	in.status = 0;
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_BAD_REQUEST);
	in = in_msg(11);
	in.symbol = 99;
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_UNKNOWN_SYMBOL);
	struct me_move_info mi;
	cr_assert_eq(me_move_info(M, FX_SYM, &mi), 0);
	cr_assert_eq(mi.phase, ME_MOVE_INSTALLING, "refused INs changed nothing");
	in = in_msg(11);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	uint64_t h = me_state_hash(M);
	r = step_msg(M, &in);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 30);
	cr_assert_eq(me_state_hash(M), h);
	cr_assert_eq(step(M, WIRE_MOVE_ABORT, 11, F_SHARD).reason, WIRE_REASON_TOO_LATE);
	cr_assert_eq(step(M, WIRE_MOVE_ABORT, 13, F_SHARD).reason, WIRE_REASON_NONE);
	r = DONE(11);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 30);
	h = me_state_hash(fx_me);
	cr_assert_eq(DONE(11).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_state_hash(fx_me), h);
	cr_assert_eq(step(fx_me, WIRE_MOVE_ABORT, 11, M_SHARD).reason, WIRE_REASON_TOO_LATE);
	/* A repeated OUT of the finished move is answered too (the driver then finds it
	 * FINISHED and goes on from the switch). */
	cr_assert_eq(OUT(11).reason, WIRE_REASON_NONE);
}

/* ---- ABORT ---- */

/* Goal: ABORT on the source gives the book back exactly: same depth, same orders, it
 * trades again, GTD orders expire again (one that came due while frozen at once), and a
 * user kill-switch engaged while frozen cancels that user's frozen orders then.
 * Method: populate; OUT; kill user 3; time past the first GTD; ABORT; compare. */
Test(me_move, abort_on_source_restores_it)
{
	uint64_t base = fx_now;
	populate(200);
	static struct me_depth_level bid[DEPTH_MAX], ask[DEPTH_MAX];
	uint32_t nb = depth_of(fx_me, B, bid), na = depth_of(fx_me, S, ask);
	uint32_t gtd = fx_me->gtd_count;
	cr_assert_eq(gtd, 20);
	cr_assert_eq(OUT(21).reason, WIRE_REASON_NONE);
	cr_assert_eq(fx_kill(WIRE_KILL_USER, 3, 1), WIRE_REASON_NONE);
	cr_assert_eq(fx_count(3, 1002, WIRE_EV_CANCELLED), 0, "frozen: the job skips it");
	cr_assert_eq(me_bulk_pending(fx_me, ME_BULK_USER, 3), false);
	cr_assert_eq(me_orders_resting(fx_me), 200);
	/* The first GTD (order 0, user 1) comes due while frozen. */
	fx_tick(base + T_GTD + 5);
	cr_assert_eq(fx_count(1, 1000, WIRE_EV_CANCELLED), 0);
	check_depth_equal(fx_me, bid, nb, ask, na);
	fx_reset();
	struct wire_admin_reply r = step(fx_me, WIRE_MOVE_ABORT, 21, M_SHARD);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 200);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &(struct me_move_info){0}), -ENOENT);
	cr_assert_eq(fx_me->moves_active, 0);
	cr_assert_eq(fx_me->gtd_held, 0);
	/* User 3's orders (i % 7 == 2) cancelled by the kill-switch, order 0 and order 10
	 * (expire T_GTD + 0 and + 10; the tick passed + 5) expired: by order 0 only. */
	uint32_t killed = 0;
	for (uint32_t i = 0; i < 200; i++) {
		if (big_user(i) != 3)
			continue;
		fx_oms_shard = (uint16_t)(i % 3);
		const struct wire_me_event *e = fx_find(3, 1000 + i, WIRE_EV_CANCELLED, 0);
		cr_assert(e != NULL);
		cr_assert_eq(e->cause, WIRE_CAUSE_KILL_SWITCH);
		killed++;
	}
	fx_oms_shard = 0;
	cr_assert_eq(fx_find(1, 1000, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_EXPIRED);
	cr_assert_eq(me_orders_resting(fx_me), 200 - killed - 1);
	/* Each GTD order pushed back once; order 0's entry popped (the killed users' entries
	 * stay, stale, as after any cancel). */
	cr_assert_eq(fx_me->gtd_count, gtd - 1);
	/* The book trades again. */
	fx_reset();
	fx_gtc(800, 1, S, 9000, 1);
	cr_assert_eq(fx_count(800, 1, WIRE_EV_FILL), 1);
	/* And the next GTD (order 10: user 4, OMS shard 1) expires at its time. */
	fx_oms_shard = 1;
	cr_assert_eq(fx_rec(4, 1010)->state, ME_ST_LIVE);
	fx_tick(base + T_GTD + 9);
	cr_assert_eq(fx_count(4, 1010, WIRE_EV_CANCELLED), 0);
	fx_tick(base + T_GTD + 10);
	cr_assert_eq(fx_find(4, 1010, WIRE_EV_CANCELLED, 0)->cause, WIRE_CAUSE_EXPIRED);
	fx_oms_shard = 0;
}

/* Goal: ABORT on the target drops what it installed, silently, leaving M as before the
 * first chunk; a new install can start; ABORT repeats.
 * Method: two of three chunks installed, ABORT on M, compare counts, then a new move. */
Test(me_move, abort_on_target_drops_the_install)
{
	uint32_t records = me_records_used(M), users = M->users_used, levels = M->levels_used;
	populate(250);
	cr_assert_eq(OUT(31).reason, WIRE_REASON_NONE);
	struct wire_book_order o[CHUNK_MAX];
	for (uint32_t k = 0; k < 2; k++) {
		uint32_t n = export_chunk(31, k, CHUNK_MAX, o);
		cr_assert_eq(chunk_on(M, 31, k, F_SHARD, o, n).reason, WIRE_REASON_NONE);
	}
	cr_assert_eq(me_orders_resting(M), 200);
	cr_assert_gt(M->gtd_held, 0);
	fx_reset();
	struct wire_admin_reply r = step(M, WIRE_MOVE_ABORT, 31, F_SHARD);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 200);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(me_orders_resting(M), 0);
	cr_assert_eq(me_records_used(M), records);
	cr_assert_eq(M->users_used, users);
	cr_assert_eq(M->levels_used, levels);
	cr_assert_eq(M->gtd_held, 0);
	cr_assert_eq(M->moves_active, 0);
	cr_assert_eq(me_move_info(M, FX_SYM, &(struct me_move_info){0}), -ENOENT);
	cr_assert_eq(step(M, WIRE_MOVE_ABORT, 31, F_SHARD).reason, WIRE_REASON_NONE);
	cr_assert_eq(step(fx_me, WIRE_MOVE_ABORT, 31, M_SHARD).reason, WIRE_REASON_NONE);
	/* A new move of the same symbol installs from scratch. */
	cr_assert_eq(OUT(32).reason, WIRE_REASON_NONE);
	transfer(32, 0, CHUNK_MAX);
	struct wire_symbol_move in = in_msg(32);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_orders_resting(M), 250);
}

/* ---- capacity and validation: a chunk applies whole or not at all ---- */

/* Goal: a chunk that does not fit the target (records, levels, a side's levels, users,
 * streams, GTD room) or holds one bad order is refused and leaves the target exactly as it
 * was (state hash equal once the refusal counter is taken back).
 * Method: targets with one limit each too small; bad orders made from a good chunk. */
Test(me_move, chunk_that_does_not_fit_changes_nothing)
{
	populate(100);
	cr_assert_eq(OUT(41).reason, WIRE_REASON_NONE);
	struct wire_book_order o[CHUNK_MAX];
	uint32_t n = export_chunk(41, 0, CHUNK_MAX, o);
	cr_assert_eq(n, 100);
	static const struct {
		uint32_t orders, users, levels, side, gtd;
		uint16_t streams;
	} small[] = {
		{.orders = 101},    /* records (two stay free) */
		{.users = 6},       /* seven users */
		{.levels = 99},     /* 100 levels */
		{.side = 49},       /* 50 a side */
		{.gtd = 9},         /* ten GTD orders */
		{.streams = 2},     /* three OMS shards */
	};
	for (uint32_t k = 0; k < sizeof(small) / sizeof(small[0]); k++) {
		struct me_limits l = move_limits;
		l.shard = M_SHARD;
		if (small[k].orders)
			l.orders_max = small[k].orders;
		if (small[k].users)
			l.users_max = small[k].users;
		if (small[k].levels)
			l.levels_max = small[k].levels;
		if (small[k].side)
			l.levels_side_max = small[k].side;
		if (small[k].gtd)
			l.gtd_max = small[k].gtd;
		if (small[k].streams)
			l.streams_max = small[k].streams;
		/* The fixture keeps four extra engines at most: these are freed here. */
		size_t fp = me_footprint(&l);
		cr_assert_gt(fp, 0);
		void *mem = aligned_alloc(64, (fp + 63) & ~(size_t)63);
		cr_assert(mem != NULL);
		struct me *t;
		cr_assert_eq(me_init(&t, mem, &l), 0);
		cr_assert_eq(config_on(t, FX_SYM, F_SHARD), WIRE_REASON_NONE);
		uint64_t h = me_state_hash(t);
		struct wire_admin_reply r = chunk_on(t, 41, 0, F_SHARD, o, n);
		cr_assert_eq(r.reason, WIRE_REASON_CAPACITY, "case %u: reason %u", k, r.reason);
		cr_assert_eq(r.value, 0);
		t->counters[ME_C_CONFIG_REJECTED]--;
		cr_assert_eq(me_state_hash(t), h, "case %u changed the target", k);
		check_on(t);
		free(mem);
		fx_reset();
	}

	/* Bad orders, each alone in an otherwise good chunk, on M. */
	uint64_t h = me_state_hash(M);
	uint32_t refused = 0;
	for (uint32_t bad = 0; bad < 14; bad++) {
		struct wire_book_order b[CHUNK_MAX];
		memcpy(b, o, sizeof(b));
		struct wire_book_order *w = &b[37];
		switch (bad) {
		case 0: w->reserved[2] = 1; break;
		case 1: w->side = 3; break;
		case 2: w->ord_type = WIRE_ORD_MARKET; break;
		case 3: w->tif = WIRE_TIF_IOC; break;
		case 4: w->stp = 4; break;
		case 5: w->oid.user = 0; break;
		case 6: w->px += 5; break;                    /* off tick */
		case 7: w->leaves = 0; break;
		case 8: w->cum = -1; break;
		case 9: w->tif = WIRE_TIF_GTD; w->expire_ns = 0; break;
		case 10: w->oid = b[36].oid; break;           /* twice in the chunk */
		case 11: w->op = WIRE_BOOK_REMOVE + 1; break;   /* no such op */
		case 12: w->px = INT64_MAX - INT64_MAX % 10; w->leaves = 1000; break;
		case 13: w->op = WIRE_BOOK_UPDATE; break;       /* an order not installed */
		}
		struct wire_admin_reply r = chunk_on(M, 41, 0, F_SHARD, b, n);
		cr_assert_eq(r.reason, WIRE_REASON_BAD_REQUEST, "bad order %u: reason %u", bad,
			     r.reason);
		refused++;
	}
	M->counters[ME_C_CONFIG_REJECTED] -= refused;
	cr_assert_eq(me_state_hash(M), h);
	/* An oid M knows already. */
	struct wire_submit s = fx_order(1, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 1);
	s.oid = o[5].oid;
	s.symbol = SYM2;
	on(M, &s); /* unknown symbol on M: refused, but its record keeps the oid */
	cr_assert_neq(me_order_find(M, o[5].oid), ME_NIL);
	cr_assert_eq(chunk_on(M, 41, 0, F_SHARD, o, n).reason, WIRE_REASON_BAD_REQUEST);
	/* The true chunk installs. */
	ack_all_on(M);
	cr_assert_eq(me_order_find(M, o[5].oid), ME_NIL);
	cr_assert_eq(chunk_on(M, 41, 0, F_SHARD, o, n).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_orders_resting(M), 100);
}

/* Goal: a later chunk that does not fit is refused with the seq it would have been, and the
 * part installed so far stays as it was; ABORT then drops it.
 * Method: a target with room for 150 records, chunks of 100. */
Test(me_move, later_chunk_over_capacity)
{
	struct me_limits l = move_limits;
	l.shard = M_SHARD;
	l.orders_max = 150;
	struct me *t = fx_new_engine(&l);
	cr_assert_eq(config_on(t, FX_SYM, F_SHARD), WIRE_REASON_NONE);
	populate(200);
	cr_assert_eq(OUT(42).reason, WIRE_REASON_NONE);
	struct wire_book_order o[CHUNK_MAX];
	uint32_t n = export_chunk(42, 0, CHUNK_MAX, o);
	cr_assert_eq(chunk_on(t, 42, 0, F_SHARD, o, n).reason, WIRE_REASON_NONE);
	uint64_t h = me_state_hash(t);
	n = export_chunk(42, 1, CHUNK_MAX, o);
	struct wire_admin_reply r = chunk_on(t, 42, 1, F_SHARD, o, n);
	cr_assert_eq(r.reason, WIRE_REASON_CAPACITY);
	cr_assert_eq(r.value, 1, "not a gap: the driver aborts");
	t->counters[ME_C_CONFIG_REJECTED]--;
	cr_assert_eq(me_state_hash(t), h);
	cr_assert_eq(step(t, WIRE_MOVE_ABORT, 42, F_SHARD).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_orders_resting(t), 0);
	cr_assert_eq(me_records_used(t), 0);
	check_on(t);
}

/* ---- snapshots ---- */

static struct me *
snap_copy(struct me *e, uint16_t shard)
{
	size_t len = me_snapshot_size(e);
	uint8_t *buf = malloc(len);
	cr_assert(buf != NULL);
	cr_assert_eq(me_snapshot(e, buf, len), len);
	struct me *c = engine(shard);
	cr_assert_eq(me_restore(c, buf, len), 0);
	cr_assert_eq(me_state_hash(c), me_state_hash(e));
	free(buf);
	return c;
}

/* Goal: a snapshot taken in the middle of a move restores on both sides with the same
 * state hash, and the restored engines finish the move exactly as the originals do.
 * Method: F frozen, M with two of four chunks; snapshot and restore both; run the rest of
 * the move and some trading on both pairs, comparing hashes at each step. */
Test(me_move, snapshot_mid_move_round_trips)
{
	populate(350);
	cr_assert_eq(OUT(51).reason, WIRE_REASON_NONE);
	struct wire_book_order o[CHUNK_MAX];
	for (uint32_t k = 0; k < 2; k++) {
		uint32_t n = export_chunk(51, k, CHUNK_MAX, o);
		cr_assert_eq(chunk_on(M, 51, k, F_SHARD, o, n).reason, WIRE_REASON_NONE);
	}
	struct me *F2 = snap_copy(fx_me, F_SHARD);
	struct me *M2 = snap_copy(M, M_SHARD);
	struct me_move_info a, b;
	cr_assert_eq(me_move_info(F2, FX_SYM, &a), 0);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &b), 0);
	cr_assert(memcmp(&a, &b, sizeof(a)) == 0);
	fx_reset();
	for (uint32_t k = 2; k < 4; k++) {
		uint32_t n = export_chunk(51, k, CHUNK_MAX, o);
		int n2 = me_move_export(F2, FX_SYM, 51, k * CHUNK_MAX, o, CHUNK_MAX);
		cr_assert_eq((uint32_t)n2, n);
		cr_assert_eq(chunk_on(M, 51, k, F_SHARD, o, n).reason, WIRE_REASON_NONE);
		cr_assert_eq(chunk_on(M2, 51, k, F_SHARD, o, n).reason, WIRE_REASON_NONE);
		cr_assert_eq(me_state_hash(M2), me_state_hash(M));
		fx_reset();
	}
	struct wire_symbol_move in = in_msg(51);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	cr_assert_eq(step_msg(M2, &in).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_state_hash(M2), me_state_hash(M));
	cr_assert_eq(DONE(51).reason, WIRE_REASON_NONE);
	cr_assert_eq(step(F2, WIRE_MOVE_DONE, 51, M_SHARD).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_state_hash(F2), me_state_hash(fx_me));
	struct wire_submit s = fx_order(900, 1, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 9900, 40);
	on(M, &s);
	on(M2, &s);
	me_tick(M, fx_now + T_GTD + 200, &fx_sink);
	me_tick(M2, fx_now + T_GTD + 200, &fx_sink);
	cr_assert_eq(me_state_hash(M2), me_state_hash(M));
	check_on(M2);
	check_on(F2);
}

/* Restore buf (a snapshot whose body a test altered) with its checksum made right again, so
 * that restore judges the content, not the checksum. */
static int
restore_resealed(struct me *e, uint8_t *buf, size_t len, size_t hdr)
{
	uint64_t sum = XXH3_64bits(buf + hdr, len - hdr);
	memcpy(buf + 24, &sum, sizeof(sum));
	return me_restore(e, buf, len);
}

/* Goal: restore refuses a snapshot whose move table is not one an engine could hold.
 * Method: snapshot a frozen F; make its move's phase INSTALLING (a source never is),
 * recompute the checksum: -EINVAL; the true bytes restore. */
Test(me_move, snapshot_bad_move_refused)
{
	populate(20);
	cr_assert_eq(OUT(61).reason, WIRE_REASON_NONE);
	size_t len = me_snapshot_size(fx_me);
	uint8_t *buf = malloc(len);
	cr_assert(buf != NULL);
	cr_assert_eq(me_snapshot(fx_me, buf, len), len);
	struct me *e2 = engine(F_SHARD);
	size_t hdr = 88;
	size_t off = hdr + offsetof(struct me, moves) - ME_RT_SIZE;
	struct me_move mv;
	memcpy(&mv, buf + off, sizeof(mv));
	cr_assert_eq(mv.move_id, 61);
	cr_assert_eq(mv.phase, ME_MOVE_FROZEN);
	for (int bad = 0; bad < 3; bad++) {
		struct me_move f = mv;
		if (bad == 0)
			f.phase = ME_MOVE_INSTALLING;
		else if (bad == 1)
			f.gtd_held++;
		else
			f.symbol = 3;
		memcpy(buf + off, &f, sizeof(f));
		cr_assert_eq(restore_resealed(e2, buf, len, hdr), -EINVAL, "case %d", bad);
	}
	memcpy(buf + off, &mv, sizeof(mv));
	cr_assert_eq(restore_resealed(e2, buf, len, hdr), 0);
	cr_assert_eq(me_state_hash(e2), me_state_hash(fx_me));
	free(buf);
}

/* ---- the move table ---- */

/* Goal: FINISHED moves are remembered for repeats and their slots recycled oldest first;
 * when every slot holds a book, a new move is refused CAPACITY.
 * Method: ten empty-book moves of FX_SYM back and forth (each leaves a FINISHED move on
 * both engines); then eight symbols frozen at once on one engine. */
Test(me_move, slots_recycle_oldest_first)
{
	struct me *src = fx_me, *dst = M;
	uint16_t ss = F_SHARD, ds = M_SHARD;
	for (uint64_t id = 1; id <= 10; id++) {
		cr_assert_eq(step(src, WIRE_MOVE_OUT, id, ds).reason, WIRE_REASON_NONE);
		cr_assert_eq(chunk_on(dst, id, 0, ss, NULL, 0).reason, WIRE_REASON_NONE);
		struct me_move_info mi;
		cr_assert_eq(me_move_info(src, FX_SYM, &mi), 0);
		struct wire_symbol_move in = move_msg(WIRE_MOVE_IN, id, ss);
		in.count = mi.count;
		in.hash = mi.hash;
		in.status = WIRE_SYM_TRADING;
		cr_assert_eq(step_msg(dst, &in).reason, WIRE_REASON_NONE);
		cr_assert_eq(step(src, WIRE_MOVE_DONE, id, ds).reason, WIRE_REASON_NONE);
		struct me *te = src;
		src = dst;
		dst = te;
		uint16_t ts = ss;
		ss = ds;
		ds = ts;
	}
	/* F was the source of 1, 3, 5, 7, 9 and the target of 2, 4, 6, 8, 10: all remembered
	 * (eight slots). A repeat of the newest is answered; of one recycled, not. */
	uint32_t used = 0;
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++)
		used += fx_me->moves[i].move_id != 0;
	cr_assert_eq(used, ME_MOVES_MAX);
	cr_assert_eq(step(fx_me, WIRE_MOVE_DONE, 9, M_SHARD).reason, WIRE_REASON_NONE);
	cr_assert_eq(step(fx_me, WIRE_MOVE_DONE, 1, M_SHARD).reason, WIRE_REASON_CONFLICT,
		     "move 1 was the oldest: recycled");
	struct me_move_info mi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.move_id, 10);
	cr_assert_eq(mi.role, ME_MOVE_TARGET);

	/* Every slot holding a book: no ninth. The engine owns FX_SYM again (move 10). */
	struct me_limits l = move_limits;
	l.symbols_max = 16;
	struct me *e = fx_new_engine(&l);
	for (uint32_t sym = 1; sym <= ME_MOVES_MAX + 1; sym++)
		cr_assert_eq(config_on(e, sym, F_SHARD), WIRE_REASON_NONE);
	for (uint32_t sym = 1; sym <= ME_MOVES_MAX + 1; sym++) {
		struct wire_symbol_move m = move_msg(WIRE_MOVE_OUT, 100 + sym, M_SHARD);
		m.symbol = sym;
		cr_assert_eq(step_msg(e, &m).reason,
			     sym <= ME_MOVES_MAX ? WIRE_REASON_NONE : WIRE_REASON_CAPACITY);
	}
	cr_assert_eq(e->moves_active, ME_MOVES_MAX);
}

/* Goal: one order's term of the move hash is the documented function of the symbol, the
 * record and its predecessor's oid, and depends on each; the book hash is their sum, so a
 * level's sequence matters through the predecessors.
 * Method: hash two records with and without predecessors, with one field changed; compare
 * with XXH3 computed here. */
Test(me_move, hash_covers_order_and_fields)
{
	struct wire_book_order a, b;
	memset(&a, 0, sizeof(a));
	a.oid = wire_oid_make(1, 2, 3);
	a.px = 100;
	a.leaves = 5;
	b = a;
	b.oid.shard_seq++;
	struct wire_oid none = {0, 0};
	uint64_t h0 = me_move_hash_init(FX_SYM);
	cr_assert_neq(h0, me_move_hash_init(SYM2));
	cr_assert_eq(me_move_order_hash(FX_SYM, &a, none),
		     XXH3_64bits_withSeed(&a, sizeof(a), h0 ^ XXH3_64bits(&none, sizeof(none))));
	cr_assert_eq(me_move_order_hash(FX_SYM, &b, a.oid),
		     XXH3_64bits_withSeed(&b, sizeof(b), h0 ^ XXH3_64bits(&a.oid, sizeof(a.oid))));
	cr_assert_neq(me_move_order_hash(FX_SYM, &a, none), me_move_order_hash(SYM2, &a, none));
	/* a then b, or b then a, on one level: the same records, another sum. */
	uint64_t ab = me_move_order_hash(FX_SYM, &a, none) + me_move_order_hash(FX_SYM, &b, a.oid);
	uint64_t ba = me_move_order_hash(FX_SYM, &b, none) + me_move_order_hash(FX_SYM, &a, b.oid);
	cr_assert_neq(ab, ba);
	struct wire_book_order c = b;
	c.stream = 1;
	cr_assert_neq(me_move_order_hash(FX_SYM, &c, a.oid), me_move_order_hash(FX_SYM, &b, a.oid));
}

/* ---- a copy made while the book trades, then the difference ---- */

/* Index of oid in a[0, n), or -1. */
static int
index_of(const struct wire_book_order *a, int n, struct wire_oid oid)
{
	for (int i = 0; i < n; i++)
		if (wire_oid_eq(a[i].oid, oid))
			return i;
	return -1;
}

/* ops[0, n) into M as chunks of `per` from chunk `seq`; returns the next seq. */
static uint32_t
send_ops(uint64_t id, uint32_t seq, const struct wire_book_order *ops, uint32_t n, uint32_t per)
{
	for (uint32_t i = 0; i < n || (i == 0 && seq == 0); i += per, seq++) {
		uint32_t k = n - i < per ? n - i : per;
		struct wire_admin_reply r = chunk_on(M, id, seq, F_SHARD, ops + i, k);
		cr_assert_eq(r.reason, WIRE_REASON_NONE, "chunk %u: reason %u", seq, r.reason);
		cr_assert_eq(r.value, seq + 1);
		fx_reset();
		if (n == 0)
			break;
	}
	return seq + (n == 0 ? 1 : 0);
}

/* Goal: the driver's copy before the freeze (app/app_mgmt_move.c): the book is exported
 * while it trades (move_id 0) and sent as ADDs; F then trades on (orders cancelled, filled
 * in part and whole, new ones at old and new levels, an amend); after OUT the difference
 * goes as REMOVE, UPDATE and ADD, and IN finds M's book — hashed by walking it in export
 * order — equal to F's frozen one: same depth, same fields, the same time priority (the new
 * orders behind the copied ones at a shared level). An ADD of a copied order, an UPDATE of
 * an unknown one and an IN before the difference arrived are refused.
 * Method: populate 400, export whole, 4 ADD chunks; trade on F; OUT; diff by oid in the
 * test (as the driver does); chunks; IN; compare; trade on M against the best ask level. */
Test(me_move, copy_then_difference)
{
	populate(400);
	static struct wire_book_order copy[512], fz[512], diff[1024];
	int nc = me_move_export(fx_me, FX_SYM, 0, 0, copy, 512);
	cr_assert_eq(nc, 400);
	uint32_t seq = send_ops(90, 0, copy, (uint32_t)nc, 100);
	cr_assert_eq(seq, 4);
	/* F trades on: cancels, fills in part and whole, new orders (old and new levels). */
	/* (orders i % 3 == 0 carry OMS shard 0's orderIds, as the fixture's requests do) */
	fx_cancel(big_user(0), 5000, 1000 + 0);
	fx_cancel(big_user(3), 5001, 1000 + 3);
	fx_amend(big_user(6), 5002, 1000 + 6, 1);       /* leaves down, priority kept */
	fx_market_buy(9, 6000, 10010 * 3);                /* eats into the best ask level */
	fx_gtc(8, 7000, B, 10000, 2);                     /* behind the copied best bids */
	fx_gtc(8, 7001, S, 9990 + 10 * 200, 1);          /* a new ask level */
	fx_gtc(8, 7002, B, 10000 - 10 * 160, 3);          /* a new bid level */
	fx_reset();
	cr_assert_eq(OUT(90).reason, WIRE_REASON_NONE);
	/* IN before the difference: M's book is the copy, not F's frozen one. */
	struct wire_symbol_move in = in_msg(90);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_CONFLICT);
	fx_reset();
	M->counters[ME_C_CONFIG_REJECTED]--;
	int nf = me_move_export(fx_me, FX_SYM, 90, 0, fz, 512);
	cr_assert_gt(nf, 0);
	uint32_t nd = 0, adds = 0, updates = 0, removes = 0;
	for (int i = 0; i < nc; i++) {
		if (index_of(fz, nf, copy[i].oid) < 0) {
			diff[nd] = copy[i];
			diff[nd++].op = WIRE_BOOK_REMOVE;
			removes++;
		}
	}
	for (int j = 0; j < nf; j++) {
		int k = index_of(copy, nc, fz[j].oid);
		if (k >= 0 && memcmp(&copy[k], &fz[j], sizeof(fz[j])) != 0) {
			diff[nd] = fz[j];
			diff[nd++].op = WIRE_BOOK_UPDATE;
			updates++;
		}
	}
	for (int j = 0; j < nf; j++) {
		if (index_of(copy, nc, fz[j].oid) < 0) {
			diff[nd] = fz[j];
			diff[nd++].op = WIRE_BOOK_ADD;
			adds++;
		}
	}
	cr_assert_geq(removes, 3, "two cancels and a level eaten: %u", removes);
	cr_assert_geq(updates, 1, "the amend (and a partial fill): %u", updates);
	cr_assert_eq(adds, 3);
	/* Refused, changing nothing: a copied order added again; an unknown one updated. */
	struct wire_book_order bad = copy[10];
	bad.op = WIRE_BOOK_ADD;
	cr_assert_eq(chunk_on(M, 90, seq, F_SHARD, &bad, 1).reason, WIRE_REASON_BAD_REQUEST);
	bad = fz[0];
	bad.oid.shard_seq += 100000;
	bad.op = WIRE_BOOK_UPDATE;
	cr_assert_eq(chunk_on(M, 90, seq, F_SHARD, &bad, 1).reason, WIRE_REASON_BAD_REQUEST);
	M->counters[ME_C_CONFIG_REJECTED] -= 2;
	fx_reset();
	send_ops(90, seq, diff, nd, 7);
	ack_all_on(fx_me);
	fx_reset();
	in = in_msg(90);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	fx_reset();
	/* The same book: depth, and every frozen order's export in the same order. */
	static struct me_depth_level bid[DEPTH_MAX], ask[DEPTH_MAX];
	struct me *keep = fx_me;
	uint32_t nb = depth_of(keep, B, bid), na = depth_of(keep, S, ask);
	check_depth_equal(M, bid, nb, ask, na);
	/* After DONE F holds nothing; M's export order is F's frozen one (time priority). */
	cr_assert_eq(DONE(90).reason, WIRE_REASON_NONE);
	fx_reset();
	struct me_move_info mi;
	cr_assert_eq(me_move_info(M, FX_SYM, &mi), 0);
	cr_assert_eq(mi.phase, ME_MOVE_FINISHED);
	cr_assert_eq(mi.count, (uint32_t)nf);
	/* The new bid at 10000 (user 8) is behind every copied order of that level. */
	const struct me_order *o8 = rec_on(M, fx_oid(8, 7000));
	cr_assert_not_null(o8);
	cr_assert_eq(o8->next, ME_NIL, "the newest order is the level's tail");
	cr_assert_eq(me_lvl(M, o8->level)->tail, me_order_find(M, fx_oid(8, 7000)));
}

/* ---- the journal: WATCH, then the difference read from it (me_journal.c) ---- */

#define WATCH(id) step(fx_me, WIRE_MOVE_WATCH, (id), M_SHARD)
#define ABORT(id) step(fx_me, WIRE_MOVE_ABORT, (id), M_SHARD)

/* The book as it is (move_id 0) into copy (room for `cap`); returns its size. */
static uint32_t
copy_book(struct me *e, struct wire_book_order *copy, uint32_t cap)
{
	int n = me_move_export(e, FX_SYM, 0, 0, copy, cap);
	cr_assert_geq(n, 0);
	cr_assert_eq((uint32_t)n, me_sym(e, sym_index(e, FX_SYM))->resting);
	return (uint32_t)n;
}

/* Trading on a populated book, every way its orders change: new orders (behind copied
 * ones at a shared level, at new levels), partial and full fills of copied and new orders,
 * cancels, an amend, a replace, an order that comes and goes, a rebind to another OMS
 * stream, GTD expiries (a copied and a new order) and a user kill-switch's bulk cancel.
 * `base` is fx_now when the book was populated (its GTD times). On fx_me. */
static void
trade_every_way(uint64_t base)
{
	fx_gtc(8, 7000, B, 10000, 2);                  /* behind the best bid's copied order */
	fx_gtc(8, 7001, S, 9990 + 10 * 200, 1);       /* a new ask level */
	fx_gtc(8, 7002, B, 10000 - 10 * 160, 3);       /* a new bid level */
	fx_cancel(big_user(0), 5000, 1000);            /* the copied order at the best bid */
	fx_amend(big_user(6), 5001, 1006, 1);          /* leaves down, priority kept */
	fx_market_buy(9, 6000, 10010 * 3);             /* eats into the best ask level */
	fx_limit(9, 6001, S, 10000, 1, WIRE_TIF_IOC);   /* fills 7000 in part */
	fx_limit(9, 6002, S, 9990, 2, WIRE_TIF_IOC);    /* the rest of 7000, a copied bid in part */
	fx_gtc(8, 7003, B, 5000, 1);                   /* comes and goes */
	fx_cancel(8, 7004, 7003);
	fx_replace(big_user(9), 5002, 1009, 10100, 4);  /* leaves, a new order rests */
	fx_oms_shard = 0;
	fx_rebind(big_user(12), 1012, 0, 2);           /* its stream changes */
	struct wire_submit s = fx_order(8, 7005, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 9000, 1);
	s.expire_ns = fx_now + 100;
	fx_submit(&s);
	fx_tick(base + T_GTD + 15);                    /* 7005 and copied order 10 expire */
	cr_assert_eq(fx_count(8, 7005, WIRE_EV_CANCELLED), 1);
	cr_assert_eq(fx_kill(WIRE_KILL_USER, 5, 1), WIRE_REASON_NONE); /* bulk cancel */
	fx_gtc(8, 7006, S, 10010, 2);                  /* where the ask level was eaten */
	cr_assert_eq(me_bulk_pending(fx_me, ME_BULK_USER, 5), false);
	fx_limit(9, 6003, B, 10010, 1, WIRE_TIF_IOC);   /* fills 7006 in part */
	cr_assert_eq(fx_find(9, 6002, WIRE_EV_FILL, 1)->px, 9990);
	cr_assert_eq(fx_count(9, 6002, WIRE_EV_FILL), 2);
	fx_reset();
}

/* The difference the driver sends M after OUT, made from the journal (app/app_mgmt_move.c
 * does the same): the first entry of each order decides; a copied order gone is a REMOVE
 * (with its copy's fields, which M checks), a copied one changed an UPDATE, a new one an
 * ADD, in the order of first entries. Returns the operations written to diff. */
static uint32_t
journal_diff(const struct wire_book_order *copy, uint32_t nc, const struct wire_book_order *jr,
	     uint32_t nj, struct wire_book_order *diff)
{
	uint32_t nd = 0;
	for (uint32_t i = 0; i < nj; i++) {
		bool seen = false;
		for (uint32_t p = 0; p < i && !seen; p++)
			seen = wire_oid_eq(jr[p].oid, jr[i].oid);
		if (seen)
			continue;
		int k = index_of(copy, (int)nc, jr[i].oid);
		if (k >= 0 && jr[i].op == WIRE_BOOK_REMOVE) {
			diff[nd] = copy[k];
			diff[nd++].op = WIRE_BOOK_REMOVE;
		} else if (k >= 0) {
			struct wire_book_order w = jr[i];
			w.op = copy[k].op;
			if (memcmp(&w, &copy[k], sizeof(w)) != 0) {
				diff[nd] = jr[i];
				diff[nd++].op = WIRE_BOOK_UPDATE;
			}
		} else if (jr[i].op == WIRE_BOOK_UPDATE) {
			diff[nd] = jr[i];
			diff[nd++].op = WIRE_BOOK_ADD;
		}
	}
	return nd;
}

/* Goal: after WATCH the source journals every change of the book, so that the copy read
 * right after WATCH plus the journal read after OUT is exactly the frozen book, order by
 * order and in time priority; and the difference a driver makes from it carries the book
 * to M, which IN accepts (count and hash). DONE forgets the journal.
 * Method: populate 300, WATCH, copy, trade every way, OUT; check the journal against the
 * frozen export (fx_check_journal); send the copy and the difference to M; IN; DONE. */
Test(me_move, journal_gives_the_frozen_book)
{
	uint64_t base = fx_now;
	populate(300);
	struct wire_admin_reply r = WATCH(70);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 0);
	static struct wire_book_order copy[512], jr[1024], diff[1024];
	uint32_t nc = copy_book(fx_me, copy, 512);
	cr_assert_eq(nc, 300);
	trade_every_way(base);
	struct me_move_info mi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.phase, ME_MOVE_WATCHING);
	cr_assert_eq(mi.journal, fx_me->journal_n);
	cr_assert_gt(mi.journal, 40, "every change journaled: %u", mi.journal);
	cr_assert_eq(mi.journal_ok, 1);
	cr_assert_eq(me_move_journal_export(fx_me, FX_SYM, 70, 0, jr, 1), -ENOENT,
		     "not frozen yet");
	r = OUT(70);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	uint32_t frozen = (uint32_t)r.value;
	cr_assert_eq(fx_me->watch_si, ME_NIL, "a frozen book is not watched");
	uint32_t nj = fx_check_journal(fx_me, FX_SYM, 70, copy, nc);
	cr_assert_eq(nj, mi.journal, "nothing journaled by the freeze");
	cr_assert_lt(nj, 1024);
	cr_assert_eq(me_move_journal_export(fx_me, FX_SYM, 70, 0, jr, nj), (int)nj);
	uint32_t removes = 0, updates = 0;
	for (uint32_t i = 0; i < nj; i++) {
		removes += jr[i].op == WIRE_BOOK_REMOVE;
		updates += jr[i].op == WIRE_BOOK_UPDATE;
	}
	cr_assert_eq(removes + updates, nj);
	cr_assert_gt(removes, 0);
	cr_assert_gt(updates, 0);
	/* Another move, move_id 0, a symbol not frozen, the target: nothing to read. */
	cr_assert_eq(me_move_journal_export(fx_me, FX_SYM, 71, 0, jr, 1), -ENOENT);
	cr_assert_eq(me_move_journal_export(fx_me, FX_SYM, 0, 0, jr, 1), -ENOENT);
	cr_assert_eq(me_move_journal_export(fx_me, 99, 70, 0, jr, 1), -ENOENT);
	cr_assert_eq(me_move_journal_export(M, FX_SYM, 70, 0, jr, 1), -ENOENT);
	cr_assert_eq(me_move_journal_export(fx_me, FX_SYM, 70, 0, NULL, 0), 0);

	/* The move itself, as the driver makes it: the copy, then the difference. */
	uint32_t seq = send_ops(70, 0, copy, nc, CHUNK_MAX);
	uint32_t nd = journal_diff(copy, nc, jr, nj, diff);
	cr_assert_gt(nd, 0);
	send_ops(70, seq, diff, nd, 7);
	ack_all_on(fx_me);
	fx_reset();
	struct wire_symbol_move in = in_msg(70);
	r = step_msg(M, &in);
	cr_assert_eq(r.reason, WIRE_REASON_NONE, "IN: reason %u", r.reason);
	cr_assert_eq(r.value, frozen);
	cr_assert_eq(me_orders_resting(M), frozen);
	cr_assert_eq(DONE(70).reason, WIRE_REASON_NONE);
	cr_assert_eq(fx_me->journal_slot, ME_NIL, "DONE forgets the journal");
	cr_assert_eq(fx_me->journal_n, 0);
	cr_assert_eq(me_move_journal_export(fx_me, FX_SYM, 70, 0, jr, 1), -ENOENT);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.phase, ME_MOVE_FINISHED);
	cr_assert_eq(mi.journal, 0);
	cr_assert_eq(mi.journal_ok, 0);
}

/* Goal: WATCH is idempotent on move_id and emits nothing to the OMS streams; it refuses a
 * target of itself, the same move to another target, and a DONE or IN naming a move that
 * only watches; after OUT a WATCH of the move is a CONFLICT naming it, after DONE TOO_LATE.
 * Method: WATCH, a change, repeats and wrong steps with the state hash compared. */
Test(me_move, watch_answers)
{
	fx_gtc(1, 1, B, 100, 5);
	struct me_stream_info before;
	cr_assert_eq(me_stream_info_at(fx_me, 0, &before), 0);
	fx_reset();
	struct wire_admin_reply r = WATCH(5);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 0);
	cr_assert_eq(fx_cap_count, 1, "only the answer");
	cr_assert_eq(fx_events(), 0);
	struct me_stream_info after;
	cr_assert_eq(me_stream_info_at(fx_me, 0, &after), 0);
	cr_assert(memcmp(&before, &after, sizeof(after)) == 0, "no stream event");
	cr_assert_eq(me_orders_resting(fx_me), 1);
	cr_assert_eq(fx_me->moves_active, 0, "a watch holds no book");
	struct me_move_info mi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.move_id, 5);
	cr_assert_eq(mi.role, ME_MOVE_SOURCE);
	cr_assert_eq(mi.phase, ME_MOVE_WATCHING);
	cr_assert_eq(mi.peer, M_SHARD);
	cr_assert_eq(mi.count, 0);
	cr_assert_eq(mi.journal, 0);
	cr_assert_eq(mi.journal_ok, 1);
	cr_assert_eq(mi.ready, 0);
	/* The book trades: two changes (a new order, the old one filled whole). */
	fx_gtc(2, 1, S, 110, 3);
	fx_gtc(3, 1, S, 100, 5);
	cr_assert_eq(fx_done(1, 1), 1);
	cr_assert_eq(fx_me->journal_n, 2);

	fx_reset();
	uint64_t h = me_state_hash(fx_me);
	r = WATCH(5);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 2, "a repeat answers the entries so far");
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(me_state_hash(fx_me), h, "a repeat changes nothing");
	r = step(fx_me, WIRE_MOVE_WATCH, 5, F_SHARD);
	cr_assert_eq(r.reason, WIRE_REASON_BAD_REQUEST, "itself as the target");
	r = step(fx_me, WIRE_MOVE_WATCH, 5, 3);
	cr_assert_eq(r.reason, WIRE_REASON_BAD_REQUEST, "the same move to another target");
	r = DONE(5);
	cr_assert_eq(r.reason, WIRE_REASON_CONFLICT, "DONE of a book never frozen");
	cr_assert_eq(r.value, 0);
	r = step(fx_me, WIRE_MOVE_IN, 5, M_SHARD);
	cr_assert_eq(r.reason, WIRE_REASON_CONFLICT);
	fx_me->counters[ME_C_CONFIG_REJECTED] -= 4;
	cr_assert_eq(me_state_hash(fx_me), h, "refusals change nothing else");

	cr_assert_eq(OUT(5).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.phase, ME_MOVE_FROZEN);
	cr_assert_eq(mi.count, 1);
	cr_assert_eq(mi.journal, 2);
	cr_assert_eq(mi.journal_ok, 1);
	cr_assert_eq(fx_me->moves_active, 1);
	h = me_state_hash(fx_me);
	r = OUT(5);
	cr_assert_eq(r.reason, WIRE_REASON_NONE, "OUT repeats");
	cr_assert_eq(r.value, 1);
	cr_assert_eq(me_state_hash(fx_me), h);
	r = WATCH(5);
	cr_assert_eq(r.reason, WIRE_REASON_CONFLICT, "frozen already");
	cr_assert_eq(r.value, 5);
	r = WATCH(6);
	cr_assert_eq(r.reason, WIRE_REASON_CONFLICT, "frozen by another move");
	cr_assert_eq(r.value, 5);
	fx_me->counters[ME_C_CONFIG_REJECTED] -= 2;
	cr_assert_eq(me_state_hash(fx_me), h);

	/* To the end: a WATCH of the finished move is too late. */
	transfer(5, 0, CHUNK_MAX);
	ack_all_on(fx_me);
	struct wire_symbol_move in = in_msg(5);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	cr_assert_eq(DONE(5).reason, WIRE_REASON_NONE);
	r = WATCH(5);
	cr_assert_eq(r.reason, WIRE_REASON_TOO_LATE);
	r = WATCH(7);
	cr_assert_eq(r.reason, WIRE_REASON_SYMBOL_NOT_OWNED, "the symbol is M's now");
}

/* Goal: WATCH refuses a symbol this shard does not own or does not know, and a book frozen
 * by another move (CONFLICT naming it); with every move slot holding a book there is no
 * slot to watch with (CAPACITY). None of them changes anything.
 * Method: each case on F or M, state hashes compared. */
Test(me_move, watch_refusals)
{
	uint64_t h = me_state_hash(M);
	struct wire_admin_reply r = step(M, WIRE_MOVE_WATCH, 1, 2);
	cr_assert_eq(r.reason, WIRE_REASON_SYMBOL_NOT_OWNED);
	cr_assert_eq(r.value, FX_SYM);
	M->counters[ME_C_CONFIG_REJECTED]--;
	cr_assert_eq(me_state_hash(M), h);
	struct wire_symbol_move m = move_msg(WIRE_MOVE_WATCH, 1, M_SHARD);
	m.symbol = 99;
	cr_assert_eq(step_msg(fx_me, &m).reason, WIRE_REASON_UNKNOWN_SYMBOL);
	m = move_msg(WIRE_MOVE_WATCH + 1, 1, M_SHARD);
	cr_assert_eq(step_msg(fx_me, &m).reason, WIRE_REASON_BAD_REQUEST, "no phase 6");

	fx_gtc(1, 1, B, 100, 1);
	cr_assert_eq(OUT(8).reason, WIRE_REASON_NONE);
	h = me_state_hash(fx_me);
	r = WATCH(9);
	cr_assert_eq(r.reason, WIRE_REASON_CONFLICT);
	cr_assert_eq(r.value, 8);
	fx_me->counters[ME_C_CONFIG_REJECTED]--;
	cr_assert_eq(me_state_hash(fx_me), h);
	cr_assert_eq(fx_me->journal_slot, ME_NIL);
	cr_assert_eq(ABORT(8).reason, WIRE_REASON_NONE);

	/* Every slot holding a book: no room to watch a ninth symbol. */
	struct me_limits l = move_limits;
	l.symbols_max = 16;
	struct me *e = fx_new_engine(&l);
	for (uint32_t sym = 1; sym <= ME_MOVES_MAX + 1; sym++)
		cr_assert_eq(config_on(e, sym, F_SHARD), WIRE_REASON_NONE);
	for (uint32_t sym = 1; sym <= ME_MOVES_MAX; sym++) {
		m = move_msg(WIRE_MOVE_OUT, 100 + sym, M_SHARD);
		m.symbol = sym;
		cr_assert_eq(step_msg(e, &m).reason, WIRE_REASON_NONE);
	}
	m = move_msg(WIRE_MOVE_WATCH, 200, M_SHARD);
	m.symbol = ME_MOVES_MAX + 1;
	cr_assert_eq(step_msg(e, &m).reason, WIRE_REASON_CAPACITY);
	cr_assert_eq(e->journal_slot, ME_NIL);
	check_on(e);
}

/* Goal: one journal per engine. A WATCH of another move (its driver died after WATCH)
 * ends the watching one, on the same or another symbol, and takes the journal over from a
 * frozen move too (which then reads its whole book: -EOVERFLOW). An OUT of another move
 * while one watches the book ends that watch: the book freezes without a journal
 * (-EOVERFLOW), and the watching move's later steps meet the frozen one (CONFLICT).
 * Method: WATCH 1, WATCH 2, OUT 1; then watches across two symbols. */
Test(me_move, watch_replaced)
{
	cr_assert_eq(config_on(fx_me, SYM2, F_SHARD), WIRE_REASON_NONE);
	fx_gtc(1, 1, B, 100, 5);
	cr_assert_eq(WATCH(1).reason, WIRE_REASON_NONE);
	fx_gtc(1, 2, B, 90, 5);
	cr_assert_eq(fx_me->journal_n, 1);
	struct wire_admin_reply r = WATCH(2);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 0, "a fresh journal");
	cr_assert_eq(fx_me->journal_n, 0);
	struct me_move_info mi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.move_id, 2);
	cr_assert_eq(mi.phase, ME_MOVE_WATCHING);
	uint32_t used = 0;
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++)
		used += fx_me->moves[i].move_id != 0;
	cr_assert_eq(used, 1, "move 1's slot is free");
	fx_gtc(1, 3, B, 80, 5);
	cr_assert_eq(fx_me->journal_n, 1);

	/* Move 1's driver goes on with OUT: the book freezes for it, with no journal. */
	r = OUT(1);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 3);
	cr_assert_eq(fx_me->journal_slot, ME_NIL);
	cr_assert_eq(fx_me->watch_si, ME_NIL);
	cr_assert_eq(fx_me->journal_n, 0);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.move_id, 1);
	cr_assert_eq(mi.phase, ME_MOVE_FROZEN);
	cr_assert_eq(mi.journal, 0);
	cr_assert_eq(mi.journal_ok, 0);
	struct wire_book_order o[4];
	cr_assert_eq(me_move_journal_export(fx_me, FX_SYM, 1, 0, o, 4), -EOVERFLOW);
	cr_assert_eq(me_move_export(fx_me, FX_SYM, 1, 0, o, 4), 3, "the whole book instead");
	r = OUT(2);
	cr_assert_eq(r.reason, WIRE_REASON_CONFLICT);
	cr_assert_eq(r.value, 1);
	r = WATCH(2);
	cr_assert_eq(r.reason, WIRE_REASON_CONFLICT);
	cr_assert_eq(r.value, 1);
	cr_assert_eq(ABORT(2).reason, WIRE_REASON_NONE, "never started here any more");
	cr_assert_eq(ABORT(1).reason, WIRE_REASON_NONE);

	/* Across symbols: a WATCH of SYM2 ends the watch of FX_SYM, whose changes are then
	 * not journaled; a frozen move loses its journal to a new WATCH. */
	cr_assert_eq(WATCH(3).reason, WIRE_REASON_NONE);
	struct wire_symbol_move w = move_msg(WIRE_MOVE_WATCH, 4, M_SHARD);
	w.symbol = SYM2;
	cr_assert_eq(step_msg(fx_me, &w).reason, WIRE_REASON_NONE);
	cr_assert_eq(fx_me->watch_si, sym_index(fx_me, SYM2));
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), -ENOENT, "move 3 is gone");
	fx_gtc(1, 4, B, 70, 5);
	cr_assert_eq(fx_me->journal_n, 0, "FX_SYM is not watched");
	struct wire_submit s = fx_order(2, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 1);
	s.symbol = SYM2;
	fx_submit(&s);
	cr_assert_eq(fx_me->journal_n, 1);
	w.phase = WIRE_MOVE_OUT;
	cr_assert_eq(step_msg(fx_me, &w).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_move_info(fx_me, SYM2, &mi), 0);
	cr_assert_eq(mi.journal_ok, 1);
	cr_assert_eq(mi.journal, 1);
	cr_assert_eq(WATCH(5).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_move_info(fx_me, SYM2, &mi), 0);
	cr_assert_eq(mi.phase, ME_MOVE_FROZEN);
	cr_assert_eq(mi.journal_ok, 0, "the journal went to move 5");
	cr_assert_eq(me_move_journal_export(fx_me, SYM2, 4, 0, o, 4), -EOVERFLOW);
	cr_assert_eq(me_move_export(fx_me, SYM2, 4, 0, o, 4), 1);
}

/* Goal: a journal that fills up overflows: the change that finds it full is lost, the
 * move's journal is no longer complete (journal_ok 0, the export -EOVERFLOW), and the move
 * goes on by reading the whole book. Full but not overflowed is still complete.
 * Method: one big resting sell filled one lot at a time by IOC buys, ME_JOURNAL_MAX of
 * them, then one more; acks keep the records and streams recycling. */
Test(me_move, journal_overflow)
{
	fx_gtc(1, 1, S, 10010, (int64_t)ME_JOURNAL_MAX * 2);
	cr_assert_eq(WATCH(12).reason, WIRE_REASON_NONE);
	fx_reset();
	for (uint32_t i = 0; i <= ME_JOURNAL_MAX; i++) {
		if (i == ME_JOURNAL_MAX) {
			struct me_move_info mi;
			cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
			cr_assert_eq(mi.journal, ME_JOURNAL_MAX);
			cr_assert_eq(mi.journal_ok, 1, "full, nothing lost yet");
		}
		fx_limit(2, 10 + i, B, 10010, 1, WIRE_TIF_IOC);
		if (i % 1024 == 1023) {
			cr_assert_eq(fx_count(2, 10 + i, WIRE_EV_FILL), 1);
			ack_all_on(fx_me);
			fx_reset();
		}
	}
	struct me_move_info mi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.journal, ME_JOURNAL_MAX);
	cr_assert_eq(mi.journal_ok, 0);
	cr_assert_eq(fx_me->journal_overflow, 1);
	cr_assert_eq(fx_rec(1, 1)->cum, ME_JOURNAL_MAX + 1);
	cr_assert_eq(OUT(12).reason, WIRE_REASON_NONE);
	struct wire_book_order o[2];
	cr_assert_eq(me_move_journal_export(fx_me, FX_SYM, 12, 0, o, 2), -EOVERFLOW);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.journal_ok, 0);
	/* The whole book instead, and the move completes. */
	transfer(12, 0, CHUNK_MAX);
	ack_all_on(fx_me);
	struct wire_symbol_move in = in_msg(12);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	cr_assert_eq(DONE(12).reason, WIRE_REASON_NONE);
	cr_assert_eq(rec_on(M, fx_oid(1, 1))->leaves, ME_JOURNAL_MAX - 1);
	cr_assert_eq(fx_me->journal_overflow, 0, "DONE resets the journal");
	cr_assert_eq(fx_me->journal_n, 0);
}

/* Goal: ABORT of a watching move frees its slot and stops the journal (the book traded all
 * along: nothing else changes); ABORT of a frozen move that kept a journal forgets it too.
 * Method: WATCH, a change, ABORT, more trading; WATCH, OUT, ABORT. */
Test(me_move, abort_of_a_watch)
{
	fx_gtc(1, 1, B, 100, 5);
	cr_assert_eq(WATCH(7).reason, WIRE_REASON_NONE);
	fx_gtc(1, 2, B, 90, 5);
	cr_assert_eq(fx_me->journal_n, 1);
	fx_reset();
	struct wire_admin_reply r = ABORT(7);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 0);
	cr_assert_eq(fx_events(), 0);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &(struct me_move_info){0}), -ENOENT);
	cr_assert_eq(fx_me->watch_si, ME_NIL);
	cr_assert_eq(fx_me->journal_slot, ME_NIL);
	cr_assert_eq(fx_me->journal_n, 0);
	fx_gtc(1, 3, B, 80, 5);
	cr_assert_eq(fx_me->journal_n, 0, "no longer journaled");
	cr_assert_eq(ABORT(7).reason, WIRE_REASON_NONE, "ABORT repeats");
	cr_assert_eq(me_orders_resting(fx_me), 3);

	cr_assert_eq(WATCH(8).reason, WIRE_REASON_NONE);
	fx_gtc(1, 4, B, 70, 5);
	cr_assert_eq(OUT(8).reason, WIRE_REASON_NONE);
	r = ABORT(8);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, 4);
	cr_assert_eq(fx_me->journal_slot, ME_NIL);
	cr_assert_eq(fx_me->journal_n, 0);
	struct wire_book_order o[1];
	cr_assert_eq(me_move_journal_export(fx_me, FX_SYM, 8, 0, o, 1), -ENOENT);
	/* The book trades again, unwatched. */
	fx_gtc(2, 1, S, 100, 5);
	cr_assert_eq(fx_done(1, 1), 1);
	cr_assert_eq(fx_me->journal_n, 0);
}

/* Run fn on engine e (the fixture's requests go to fx_me). */
static void
on_engine(struct me *e, void (*fn)(void))
{
	struct me *keep = fx_me;
	fx_me = e;
	fn();
	fx_me = keep;
}

static uint32_t more_round; /* trade_more's requests: new ids and targets each round */

/* Round more_round of some trading on a populated book: a new bid, a market buy into the
 * asks, a cancel and an amend of copied orders (OMS shard 0's). */
static void
trade_more(void)
{
	uint64_t q = 8000 + 100 * more_round;
	uint32_t c = 3 + 6 * more_round, a = 18 + 6 * more_round;
	fx_gtc(8, q, B, 10000, 2);
	fx_market_buy(9, q + 1, 10010 * 4);
	fx_cancel(big_user(c), q + 2, 1000 + c);
	fx_amend(big_user(a), q + 3, 1000 + a, 1);
	cr_assert_eq(fx_reject_reason(big_user(c), q + 2), -1);
	cr_assert_eq(fx_reject_reason(big_user(a), q + 3), -1);
	fx_reset();
}

/* Goal: the journal is replicated state: a snapshot taken while a move watches, and one
 * taken after OUT, restore to engines with the same state hash (entries past the journal's
 * length zero even after a longer journal was forgotten), which journal the same changes
 * and export the same journal; restore refuses a journal no engine could hold.
 * Method: a longer journal forgotten (ABORT); WATCH; trade; snapshot; trade on both; OUT
 * on both; compare; snapshot again; forge the journal's owner in a snapshot. */
Test(me_move, journal_survives_snapshot)
{
	populate(200);
	cr_assert_eq(WATCH(79).reason, WIRE_REASON_NONE);
	more_round = 0;
	trade_more();
	uint32_t longer = fx_me->journal_n;
	cr_assert_eq(ABORT(79).reason, WIRE_REASON_NONE);
	cr_assert_eq(WATCH(80).reason, WIRE_REASON_NONE);
	static struct wire_book_order copy[512], ja[1024], jb[1024];
	uint32_t nc = copy_book(fx_me, copy, 512);
	fx_gtc(8, 8100, S, 10020, 1);
	cr_assert_lt(fx_me->journal_n, longer);
	struct me *F2 = snap_copy(fx_me, F_SHARD);
	struct me_move_info a, b;
	cr_assert_eq(me_move_info(F2, FX_SYM, &a), 0);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &b), 0);
	cr_assert(memcmp(&a, &b, sizeof(a)) == 0);
	cr_assert_eq(a.phase, ME_MOVE_WATCHING);
	more_round = 1;
	on_engine(fx_me, trade_more);
	on_engine(F2, trade_more);
	cr_assert_eq(me_state_hash(F2), me_state_hash(fx_me));
	cr_assert_eq(OUT(80).reason, WIRE_REASON_NONE);
	cr_assert_eq(step(F2, WIRE_MOVE_OUT, 80, M_SHARD).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_state_hash(F2), me_state_hash(fx_me));
	uint32_t nj = fx_check_journal(fx_me, FX_SYM, 80, copy, nc);
	cr_assert_eq(fx_check_journal(F2, FX_SYM, 80, copy, nc), nj);
	cr_assert_eq(me_move_journal_export(fx_me, FX_SYM, 80, 0, ja, 1024), (int)nj);
	cr_assert_eq(me_move_journal_export(F2, FX_SYM, 80, 0, jb, 1024), (int)nj);
	cr_assert(memcmp(ja, jb, nj * sizeof(*ja)) == 0);
	struct me *F3 = snap_copy(fx_me, F_SHARD);
	cr_assert_eq(fx_check_journal(F3, FX_SYM, 80, copy, nc), nj);
	check_on(F2);
	check_on(F3);

	/* A forged journal: a frozen book watched, an owner past the slots, an overflow of a
	 * journal not full. The snapshot is refused; the true bytes restore. */
	size_t len = me_snapshot_size(fx_me);
	uint8_t *buf = malloc(len);
	cr_assert(buf != NULL);
	cr_assert_eq(me_snapshot(fx_me, buf, len), len);
	size_t hdr = 88;
	static const size_t offs[] = {offsetof(struct me, watch_si), offsetof(struct me, journal_slot),
				      offsetof(struct me, journal_overflow)};
	for (uint32_t k = 0; k < 3; k++) {
		size_t off = hdr + offs[k] - ME_RT_SIZE;
		uint32_t keep, bad;
		memcpy(&keep, buf + off, sizeof(keep));
		bad = k == 0 ? 0 : k == 1 ? ME_MOVES_MAX : 1;
		memcpy(buf + off, &bad, sizeof(bad));
		cr_assert_eq(restore_resealed(F3, buf, len, hdr), -EINVAL, "case %u", k);
		memcpy(buf + off, &keep, sizeof(keep));
	}
	cr_assert_eq(restore_resealed(F3, buf, len, hdr), 0);
	cr_assert_eq(me_state_hash(F3), me_state_hash(fx_me));
	free(buf);
}

/* ---- the move hash kept running (me_move.c) ---- */

/* On fx_me: the running hashes equal a walk (fx_check_move_hashes), and the watched book
 * is still watched. */
#define STEP(x)                                                                            \
	do {                                                                               \
		x;                                                                         \
		fx_check_move_hashes(fx_me);                                               \
		fx_reset();                                                                \
	} while (0)

/* Goal: while a move WATCHes, the source keeps the book's hash and GTD count running
 * through every kind of change, equal to a walk after each; OUT takes it without walking
 * and it is the walk of the frozen book; the move opens on M (IN compares M's running
 * hash with it).
 * Method: populate 300 plus a level of our own orders; WATCH; rests at old and new levels,
 * cancels of a level's head, middle and tail, partial and full fills at heads and tails,
 * amends (head, middle, to zero), a replace, a rebind, GTD expiries, a market sweep, a
 * kill-switch, each followed by the check; OUT; transfer; IN. */
Test(me_move, watched_hash_follows_every_change)
{
	uint64_t base = fx_now;
	populate(300);
	for (uint32_t k = 0; k < 6; k++)
		fx_gtc(8, 7100 + k, B, 9000, 1 + k); /* a level: a populated head, then ours */
	fx_reset();
	cr_assert_eq(WATCH(90).reason, WIRE_REASON_NONE);
	fx_check_move_hashes(fx_me);
	const struct me_move *mv = me_move_find(fx_me, 90, sym_index(fx_me, FX_SYM));
	cr_assert_not_null(mv);
	cr_assert_neq(mv->hash, 0);
	STEP(fx_gtc(8, 7000, B, 10000, 2));                 /* behind a copied order */
	STEP(fx_gtc(8, 7001, S, 9990 + 10 * 200, 1));      /* a new level */
	STEP(fx_gtc(8, 7002, B, 10000 - 10 * 160, 3));      /* another */
	STEP(fx_cancel(8, 7200, 7102));                     /* middle of the 9000 level */
	STEP(fx_cancel(8, 7201, 7105));                     /* its tail */
	STEP(fx_amend(8, 7202, 7103, 1));                   /* middle, priority kept */
	STEP(fx_amend(big_user(0), 7203, 1000, 1));         /* head of 10000 */
	STEP(fx_limit(9, 6001, S, 10000, 1, WIRE_TIF_IOC)); /* fills the head 1000 whole */
	STEP(fx_limit(9, 6002, S, 10000, 1, WIRE_TIF_IOC)); /* 7000 (now head) in part */
	STEP(fx_limit(9, 6003, S, 10000, 1, WIRE_TIF_IOC)); /* 7000, head and tail, whole */
	STEP(fx_amend(8, 7204, 7101, 3));                   /* amend up to its qty: unchanged */
	STEP(fx_limit(9, 6004, S, 9000, 1, WIRE_TIF_IOC)); /* sweeps levels down to 9000 */
	STEP(fx_market_sell(9, 6005, 1));
	STEP(fx_cancel(8, 7205, 7100));                     /* head of 9000 if still there */
	STEP(fx_replace(big_user(9), 5002, 1009, 10100, 4)); /* leaves, a new order rests */
	fx_oms_shard = 0;
	STEP(fx_rebind(big_user(12), 1012, 0, 2));          /* its stream changes */
	struct wire_submit g = fx_order(8, 7005, B, WIRE_ORD_LIMIT, WIRE_TIF_GTD, 8600, 1);
	g.expire_ns = fx_now + 100;
	STEP(fx_submit(&g));
	STEP(fx_tick(base + T_GTD + 15));                   /* 7005 and copied order 10 expire */
	cr_assert_eq(fx_rec(8, 7005) == NULL || fx_rec(8, 7005)->state != ME_ST_LIVE, true);
	STEP(fx_market_buy(9, 6006, 10010 * 5));            /* eats into the asks */
	STEP(cr_assert_eq(fx_kill(WIRE_KILL_USER, 5, 1), WIRE_REASON_NONE)); /* bulk cancel */
	STEP(fx_amend(big_user(20), 7206, 1020, 0));        /* to zero: leaves the book */
	STEP(ack_all_on(fx_me));
	uint32_t count, gtd;
	uint64_t walk = me_move_hash_walk(fx_me, sym_index(fx_me, FX_SYM), &count, &gtd);
	cr_assert_eq(mv->hash, walk);
	cr_assert_eq(mv->gtd_held, gtd);
	struct wire_admin_reply r = OUT(90);
	cr_assert_eq(r.reason, WIRE_REASON_NONE);
	cr_assert_eq(r.value, count);
	struct me_move_info mi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &mi), 0);
	cr_assert_eq(mi.phase, ME_MOVE_FROZEN);
	cr_assert_eq(mi.hash, walk, "OUT took the running hash: the frozen book's walk");
	cr_assert_eq(me_move_hash_walk(fx_me, sym_index(fx_me, FX_SYM), NULL, NULL), walk);
	cr_assert_eq(mv->gtd_held, gtd);
	transfer(90, 0, CHUNK_MAX);
	fx_check_move_hashes(M);
	struct wire_symbol_move in = in_msg(90);
	r = step_msg(M, &in);
	cr_assert_eq(r.reason, WIRE_REASON_NONE, "IN: reason %u", r.reason);
	cr_assert_eq(r.value, count);
}

/* One chunk of ops (k of them) on M; the reply must be NONE; running hash == walk. */
static void
m_chunk(uint64_t id, uint32_t *seq, const struct wire_book_order *ops, uint32_t k)
{
	struct wire_admin_reply r = chunk_on(M, id, *seq, F_SHARD, ops, k);
	cr_assert_eq(r.reason, WIRE_REASON_NONE, "chunk %u: reason %u", *seq, r.reason);
	(*seq)++;
	fx_check_move_hashes(M);
	fx_reset();
}

/* A record of the frozen export with op set (and leaves, when not 0). */
static struct wire_book_order
op_of(const struct wire_book_order *book, uint32_t n, struct wire_oid oid, uint8_t op,
      int64_t leaves)
{
	int k = index_of(book, (int)n, oid);
	cr_assert_geq(k, 0);
	struct wire_book_order w = book[k];
	w.op = op;
	if (leaves != 0)
		w.leaves = leaves;
	return w;
}

/* The last three orders of a level of the 65-order book, a, b and tail, taken off M (one
 * chunk) and put back as first, second, tail (another): the same records, maybe another
 * sequence. */
static void
level_end_as(uint32_t *seq, const struct wire_book_order *book, struct wire_oid first,
	     struct wire_oid second, struct wire_oid tail)
{
	const struct wire_oid oids[3] = {first, second, tail};
	struct wire_book_order ops[3];
	for (int k = 0; k < 3; k++)
		ops[k] = op_of(book, 65, oids[k], WIRE_BOOK_REMOVE, 0);
	m_chunk(92, seq, ops, 3);
	for (int k = 0; k < 3; k++)
		ops[k] = op_of(book, 65, oids[k], WIRE_BOOK_ADD, 0);
	m_chunk(92, seq, ops, 3);
}

/* M's running hash (me_move_info of the INSTALLING move). */
static uint64_t
m_hash(void)
{
	struct me_move_info mi;
	cr_assert_eq(me_move_info(M, FX_SYM, &mi), 0);
	cr_assert_eq(mi.phase, ME_MOVE_INSTALLING);
	return mi.hash;
}

/* Goal: while M installs, its running hash follows ADDs, UPDATEs and REMOVEs (a level's
 * head, middle and tail) equal to a walk after each chunk; me_move_info gives it; IN
 * accepts the source's hash once the book is the same sequence and refuses it (CONFLICT)
 * when two orders of a level are swapped — same records, another time priority — and a
 * wrong hash. OUT of a book no move watched walks it for the same hash.
 * Method: populate 60 plus a level of six on F; OUT without WATCH (hash == walk); ADD all
 * in one chunk; update one and back; remove head, middle, tail and the rest, add them in
 * order; swap two; IN refused; put them back; IN accepted. */
Test(me_move, installing_hash_follows_chunks)
{
	populate(60);
	for (uint32_t k = 0; k < 5; k++)
		fx_gtc(8, 7100 + k, B, 10000, 1); /* behind populated order 0 */
	fx_reset();
	uint32_t si = sym_index(fx_me, FX_SYM);
	uint64_t walk = me_move_hash_walk(fx_me, si, NULL, NULL);
	cr_assert_eq(OUT(92).reason, WIRE_REASON_NONE);
	struct me_move_info fi;
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &fi), 0);
	cr_assert_eq(fi.hash, walk, "an unwatched book is walked at OUT");
	cr_assert_eq(fi.count, 65);
	static struct wire_book_order book[65], ops[8];
	cr_assert_eq(me_move_export(fx_me, FX_SYM, 92, 0, book, 65), 65);
	uint32_t seq = 0;
	m_chunk(92, &seq, book, 65);
	cr_assert_eq(m_hash(), fi.hash, "the same book, the same hash");
	struct wire_oid head = big_oid(0), mid = fx_oid(8, 7102), tail = fx_oid(8, 7104);
	ops[0] = op_of(book, 65, mid, WIRE_BOOK_UPDATE, 3);
	m_chunk(92, &seq, ops, 1);
	cr_assert_neq(m_hash(), fi.hash);
	ops[0] = op_of(book, 65, mid, WIRE_BOOK_UPDATE, 0);
	m_chunk(92, &seq, ops, 1);
	cr_assert_eq(m_hash(), fi.hash, "updated back");
	ops[0] = op_of(book, 65, head, WIRE_BOOK_REMOVE, 0);
	m_chunk(92, &seq, ops, 1);
	ops[0] = op_of(book, 65, mid, WIRE_BOOK_REMOVE, 0);
	m_chunk(92, &seq, ops, 1);
	ops[0] = op_of(book, 65, tail, WIRE_BOOK_REMOVE, 0);
	m_chunk(92, &seq, ops, 1);
	ops[0] = op_of(book, 65, fx_oid(8, 7101), WIRE_BOOK_REMOVE, 0);
	ops[1] = op_of(book, 65, fx_oid(8, 7100), WIRE_BOOK_REMOVE, 0);
	ops[2] = op_of(book, 65, fx_oid(8, 7103), WIRE_BOOK_REMOVE, 0);
	m_chunk(92, &seq, ops, 3);
	cr_assert_eq(me_sym(M, si)->resting, 59);
	ops[0] = op_of(book, 65, head, WIRE_BOOK_ADD, 0);
	for (uint32_t k = 0; k < 5; k++)
		ops[1 + k] = op_of(book, 65, fx_oid(8, 7100 + k), WIRE_BOOK_ADD, 0);
	m_chunk(92, &seq, ops, 6);
	cr_assert_eq(m_hash(), fi.hash, "the level rebuilt in its sequence");
	/* Two orders swapped: the same records, another sequence. */
	level_end_as(&seq, book, fx_oid(8, 7103), fx_oid(8, 7102), tail);
	cr_assert_eq(me_sym(M, si)->resting, 65);
	cr_assert_neq(m_hash(), fi.hash, "a swap changes the hash");
	struct wire_symbol_move in = in_msg(92);
	uint64_t before = m_hash();
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_CONFLICT, "the swapped book refused");
	cr_assert_eq(m_hash(), before, "a refused IN leaves the install as it was");
	/* Put them back; a wrong hash is still refused, the right one opens the book. */
	level_end_as(&seq, book, fx_oid(8, 7102), fx_oid(8, 7103), tail);
	cr_assert_eq(m_hash(), fi.hash);
	in.hash ^= 1;
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_CONFLICT);
	in.hash ^= 1;
	ack_all_on(fx_me);
	fx_reset();
	struct wire_admin_reply r = step_msg(M, &in);
	cr_assert_eq(r.reason, WIRE_REASON_NONE, "IN: reason %u", r.reason);
	cr_assert_eq(r.value, 65);
	struct me_move_info mi;
	cr_assert_eq(me_move_info(M, FX_SYM, &mi), 0);
	cr_assert_eq(mi.phase, ME_MOVE_FINISHED);
	cr_assert_eq(mi.hash, fi.hash);
}

/* Goal: the running hashes are replicated state: a snapshot taken while F watches and one
 * taken while M installs restore with the same state hash and the same running hash, and
 * the restored engines keep it exactly as the originals do, to an OUT with the same hash
 * and an IN that accepts it.
 * Method: populate 200; WATCH; trade; snapshot F; trade on both; OUT on both; two chunks
 * into M; snapshot M; the rest on both; IN on both. */
Test(me_move, running_hash_survives_snapshot)
{
	populate(200);
	cr_assert_eq(WATCH(93).reason, WIRE_REASON_NONE);
	more_round = 0;
	trade_more();
	struct me *F2 = snap_copy(fx_me, F_SHARD);
	uint32_t si = sym_index(fx_me, FX_SYM);
	cr_assert_eq(me_move_find(F2, 93, si)->hash, me_move_find(fx_me, 93, si)->hash);
	fx_check_move_hashes(F2);
	more_round = 1;
	on_engine(fx_me, trade_more);
	on_engine(F2, trade_more);
	fx_check_move_hashes(fx_me);
	fx_check_move_hashes(F2);
	cr_assert_eq(me_state_hash(F2), me_state_hash(fx_me));
	cr_assert_eq(OUT(93).reason, WIRE_REASON_NONE);
	cr_assert_eq(step(F2, WIRE_MOVE_OUT, 93, M_SHARD).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_state_hash(F2), me_state_hash(fx_me));
	struct me_move_info a, b;
	cr_assert_eq(me_move_info(F2, FX_SYM, &a), 0);
	cr_assert_eq(me_move_info(fx_me, FX_SYM, &b), 0);
	cr_assert_eq(a.hash, b.hash);
	cr_assert_eq(b.hash, me_move_hash_walk(fx_me, si, NULL, NULL));
	struct wire_book_order o[CHUNK_MAX];
	uint32_t chunks = (b.count + 49) / 50;
	cr_assert_gt(chunks, 2);
	for (uint32_t k = 0; k < 2; k++) {
		uint32_t n = export_chunk(93, k, 50, o);
		cr_assert_eq(chunk_on(M, 93, k, F_SHARD, o, n).reason, WIRE_REASON_NONE);
	}
	fx_reset();
	struct me *M2 = snap_copy(M, M_SHARD);
	cr_assert_eq(me_move_find(M2, 93, si)->hash, me_move_find(M, 93, si)->hash);
	fx_check_move_hashes(M2);
	for (uint32_t k = 2; k < chunks; k++) {
		uint32_t n = export_chunk(93, k, 50, o);
		cr_assert_eq(chunk_on(M, 93, k, F_SHARD, o, n).reason, WIRE_REASON_NONE);
		cr_assert_eq(chunk_on(M2, 93, k, F_SHARD, o, n).reason, WIRE_REASON_NONE);
		fx_check_move_hashes(M2);
		cr_assert_eq(me_state_hash(M2), me_state_hash(M));
		fx_reset();
	}
	ack_all_on(fx_me);
	fx_reset();
	struct wire_symbol_move in = in_msg(93);
	cr_assert_eq(step_msg(M, &in).reason, WIRE_REASON_NONE);
	cr_assert_eq(step_msg(M2, &in).reason, WIRE_REASON_NONE);
	cr_assert_eq(me_state_hash(M2), me_state_hash(M));
	check_on(F2);
	check_on(M2);
}

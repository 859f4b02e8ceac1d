/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me match: order entry, validation, matching, cancel / amend-down / cancel-replace.
 *
 * Price-time priority: the best opposite level is always the last entry of its side array;
 * within a level, orders fill oldest first (FIFO). Trades happen at the maker's price.
 * Every refusal is a REJECTED or CANCEL_REJECTED event with a reason (never a crash,
 * never a silent drop); every accepted order ends in DONE or rests (docs/me-contract.md).
 */
#include <string.h>

#include "me/me_int.h"

/* ---- dedup fingerprints ---- */

static inline uint64_t
fp_step(uint64_t h, uint64_t x)
{
	h = (h ^ x) * UINT64_C(0x9e3779b97f4a7c15);
	return h ^ (h >> 29);
}

static uint32_t
fp_submit(const struct wire_submit *m)
{
	uint64_t h = fp_step(ME_KIND_SUBMIT, (uint64_t)m->symbol | (uint64_t)m->side << 32 |
						     (uint64_t)m->ord_type << 40 |
						     (uint64_t)m->tif << 48 | (uint64_t)m->stp << 56);
	h = fp_step(h, (uint64_t)m->px);
	h = fp_step(h, (uint64_t)m->qty);
	h = fp_step(h, (uint64_t)m->quote_qty);
	h = fp_step(h, m->expire_ns);
	return (uint32_t)(h >> 32);
}

static uint32_t
fp_modify(const struct wire_modify *m, enum me_kind kind)
{
	uint64_t h = fp_step((uint64_t)kind, m->target.user);
	h = fp_step(h, m->target.shard_seq);
	h = fp_step(h, m->symbol);
	h = fp_step(h, (uint64_t)m->px);
	h = fp_step(h, (uint64_t)m->qty);
	return (uint32_t)(h >> 32);
}

/* ---- helpers ---- */

static inline bool
crosses(uint8_t side, int64_t limit_px, int64_t maker_px)
{
	return side == WIRE_SIDE_BUY ? maker_px <= limit_px : maker_px >= limit_px;
}

/* An order entered by enter() is accepted by its first event, whichever it is (there is no
 * ACCEPTED event, docs/me-contract.md "Event sequences"): that event carries
 * WIRE_EV_F_ENTERED. The taker's first FILL is the one before which nothing filled; after
 * the match, its RESTED, CANCELLED or DONE is the first when nothing filled. */
static inline uint16_t
entry_flag(const struct me_order *o)
{
	return o->cum == 0 ? WIRE_EV_F_ENTERED : 0;
}

/* The event that leaves nothing of an order live says so (WIRE_EV_F_DONE): a FILL that
 * takes its last leaves, a CANCELLED, an AMENDED to 0. A DONE event of its own ends only a
 * market buy whose budget buys no further lot. DONE carries the cumulative filled qty;
 * flags: WIRE_EV_F_ENTERED when it is the first event of an order enter() took. */
static void
emit_done(struct me *me, uint32_t oi, uint16_t flags)
{
	struct me_order *o = me_ord(me, oi);
	struct wire_me_event *ev = me_ev_begin(me, oi, WIRE_EV_DONE, o->px, o->cum, 0);
	ev->hdr.flags = flags;
	me_ev_emit(me, ev);
}

/* CANCELLED for the whole remaining leaves, then leaves are 0 and the order is done
 * (WIRE_EV_F_DONE); flags: WIRE_EV_F_ENTERED or 0, as emit_done's. */
static void
emit_cancelled(struct me *me, uint32_t oi, uint8_t cause, const struct wire_oid *contra,
	       uint16_t flags)
{
	struct me_order *o = me_ord(me, oi);
	struct wire_me_event *ev = me_ev_begin(me, oi, WIRE_EV_CANCELLED, o->px, o->leaves, 0);
	ev->hdr.flags = flags | WIRE_EV_F_DONE;
	ev->cause = cause;
	if (contra != NULL)
		ev->contra = *contra;
	o->leaves = 0;
	me_ev_emit(me, ev);
}

void
me_cancel_live(struct me *me, uint32_t oi, uint8_t cause, const struct wire_oid *contra)
{
	struct me_order *o = me_ord(me, oi);
	CHECK(o->state == ME_ST_LIVE);
	uint32_t si = me_lvl(me, o->level)->symbol;
	DCHECK(me_sym(me, si)->symbol == o->symbol);
	me_book_remove(me, si, oi);
	me_user_unlink(me, oi);
	emit_cancelled(me, oi, cause, contra, 0);
	me_order_finish(me, oi);
}

/* Two records free: one for this order, one left so that a cancel (which relieves the pool)
 * or a refusal can still be recorded. */
static inline bool
records_room(const struct me *me)
{
	return me->records_used + 2 <= me->limits.orders_max;
}

static bool
user_room(struct me *me, uint64_t user)
{
	return me->users_used < me->limits.users_max || me_user_find(me, user) != NULL;
}

static bool
user_killed(struct me *me, uint64_t user)
{
	if (me->users_killed == 0)
		return false; /* the common case costs no lookup */
	const struct me_user *u = me_user_find(me, user);
	return u != NULL && (u->count & ME_USER_KILLED) != 0;
}

/* The worst price an order may trade at: its limit, or for a market order the edge of the
 * price band around the reference at entry (a market order never sweeps an empty book to an
 * absurd price); 0 / INT64_MAX when a market order has no band. */
static int64_t
price_bound(const struct me_symbol *s, uint8_t side, uint8_t ord_type, int64_t px)
{
	if (ord_type == WIRE_ORD_LIMIT)
		return px;
	int64_t ref = s->last_px != 0 ? s->last_px : s->ref_px;
	if (s->band_bps == 0 || ref <= 0)
		return side == WIRE_SIDE_BUY ? INT64_MAX : 0;
	/* ref * band_bps / 10000 fits: band_bps <= 10000. */
	int64_t dist = (int64_t)((__int128)ref * s->band_bps / MONEY_BPS_DENOM);
	return side == WIRE_SIDE_BUY ? ref + dist : ref - dist;
}

/* FOK: can qty fill entirely against the book now, honouring STP? Decided before the book is
 * touched. */
static bool
fok_fillable(struct me *me, uint32_t si, const struct wire_submit *m)
{
	uint32_t opp = m->side == WIRE_SIDE_BUY ? 1u : 0u;
	const struct me_lref *r = me_lrefs(me, si, opp);
	uint32_t n = me_sym(me, si)->side_count[opp];
	int64_t need = m->qty;
	int64_t bound = price_bound(me_sym(me, si), m->side, m->ord_type, m->px);
	for (uint32_t k = n; k-- > 0;) {
		const struct me_level *l = me_lvl(me, r[k].level);
		if (!crosses(m->side, bound, l->px))
			return false;
		if (m->stp == WIRE_STP_NONE) {
			need -= l->qty;
			if (need <= 0)
				return true;
			continue;
		}
		for (uint32_t oi = l->head; oi != ME_NIL; oi = me_ord(me, oi)->next) {
			const struct me_order *o = me_ord(me, oi);
			if (o->oid.user == m->oid.user) {
				if (m->stp == WIRE_STP_EXPIRE_MAKER)
					continue; /* it would be cancelled; matching goes on */
				return false;     /* the taker would be expired here */
			}
			need -= o->leaves;
			if (need <= 0)
				return true;
		}
	}
	return false;
}

enum {
	V_BOOK = 1,            /* also run the book-dependent checks (post-only, FOK) */
	V_NO_BACKPRESSURE = 2, /* the request was already admitted (second half of a replace) */
};

/*
 * Validate a new order (a SUBMIT, or the new half of a replace). Returns a reason or NONE and
 * the symbol index. Order of checks: shape, symbol, ownership, kill-switch, halt, price and
 * quantity filters, band, retention, capacity, then the book-dependent post-only and FOK.
 */
static uint16_t
validate(struct me *me, const struct wire_submit *m, uint32_t st, uint32_t *si_out, unsigned flags)
{
	if (m->side != WIRE_SIDE_BUY && m->side != WIRE_SIDE_SELL)
		return WIRE_REASON_BAD_REQUEST;
	if (m->ord_type != WIRE_ORD_LIMIT && m->ord_type != WIRE_ORD_MARKET)
		return WIRE_REASON_BAD_REQUEST;
	if (m->tif < WIRE_TIF_GTC || m->tif > WIRE_TIF_POST_ONLY || m->stp > WIRE_STP_EXPIRE_BOTH)
		return WIRE_REASON_BAD_REQUEST;
	uint32_t si = me_symbol_find(me, m->symbol);
	if (si == ME_NIL)
		return WIRE_REASON_UNKNOWN_SYMBOL;
	*si_out = si;
	const struct me_symbol *s = me_sym(me, si);
	/* Its book is on its way between two ME shards (me_move.c): frozen on the source,
	 * being installed on the target. The sender retries once the symbol's map entry names
	 * the new owner. */
	if (me_move_hold(me, si) != 0)
		return WIRE_REASON_SYMBOL_MOVING;
	/* Seed: shards reject orders for symbols they don't own rather than silently accept. */
	if (s->me_shard != me->limits.shard)
		return WIRE_REASON_SYMBOL_NOT_OWNED;
	if (s->killed || user_killed(me, m->oid.user))
		return WIRE_REASON_KILLED;
	if (s->status != WIRE_SYM_TRADING)
		return WIRE_REASON_HALTED;

	if (m->ord_type == WIRE_ORD_LIMIT) {
		if (m->quote_qty != 0 || m->px <= 0 || m->qty <= 0)
			return WIRE_REASON_BAD_REQUEST;
		if (m->tif == WIRE_TIF_GTD) {
			if (m->expire_ns == 0)
				return WIRE_REASON_BAD_REQUEST;
			if (m->expire_ns <= me->now_ns)
				return WIRE_REASON_TOO_LATE; /* expired before it arrived */
		} else if (m->expire_ns != 0) {
			return WIRE_REASON_BAD_REQUEST;
		}
		if (m->px % s->tick != 0)
			return WIRE_REASON_OFF_TICK;
		if (m->qty % s->lot != 0)
			return WIRE_REASON_OFF_LOT;
		if (m->qty < s->min_qty)
			return WIRE_REASON_BELOW_MIN_QTY;
		int64_t notional;
		if (me_notional(m->px, m->qty, s->base_unit, &notional) != 0)
			return WIRE_REASON_OVERFLOW;
		if (notional < s->min_notional)
			return WIRE_REASON_BELOW_MIN_NOTIONAL;
		/* Band: |px - ref| <= ref * band_bps / 10000, ref = last trade, else configured. */
		int64_t ref = s->last_px != 0 ? s->last_px : s->ref_px;
		if (s->band_bps != 0 && ref > 0) {
			/* px > 0 and ref > 0: their distance fits 64 bits. Both products
			 * nearly always do too; only when one does not is the exact 128-bit
			 * compare needed. */
			int64_t dist = m->px > ref ? m->px - ref : ref - m->px;
			int64_t lhs, rhs;
			if (__builtin_mul_overflow(dist, (int64_t)MONEY_BPS_DENOM, &lhs) ||
			    __builtin_mul_overflow(ref, (int64_t)s->band_bps, &rhs)) {
				if ((__int128)dist * MONEY_BPS_DENOM > (__int128)ref * s->band_bps)
					return WIRE_REASON_OUTSIDE_BAND;
			} else if (lhs > rhs) {
				return WIRE_REASON_OUTSIDE_BAND;
			}
		}
	} else {
		if (m->px != 0 || m->expire_ns != 0)
			return WIRE_REASON_BAD_REQUEST;
		/* A market order never rests: IOC, or FOK for a sell by quantity. */
		if (m->tif != WIRE_TIF_IOC && !(m->tif == WIRE_TIF_FOK && m->side == WIRE_SIDE_SELL))
			return WIRE_REASON_BAD_REQUEST;
		if (m->side == WIRE_SIDE_BUY) {
			if (m->quote_qty <= 0 || m->qty != 0)
				return WIRE_REASON_BAD_REQUEST;
			if (m->quote_qty < s->min_notional)
				return WIRE_REASON_BELOW_MIN_NOTIONAL;
		} else {
			if (m->qty <= 0 || m->quote_qty != 0)
				return WIRE_REASON_BAD_REQUEST;
			if (m->qty % s->lot != 0)
				return WIRE_REASON_OFF_LOT;
			if (m->qty < s->min_qty)
				return WIRE_REASON_BELOW_MIN_QTY;
		}
	}

	/* Contract: nearing the retention bound is a backpressure signal. */
	if ((flags & V_NO_BACKPRESSURE) == 0 && me_stream_free(me, st) < me->limits.events_reserve) {
		me_count(me, ME_C_BACKPRESSURE);
		return WIRE_REASON_BACKPRESSURE;
	}
	if (!records_room(me))
		return WIRE_REASON_CAPACITY;
	bool may_rest = m->ord_type == WIRE_ORD_LIMIT &&
			(m->tif == WIRE_TIF_GTC || m->tif == WIRE_TIF_GTD ||
			 m->tif == WIRE_TIF_POST_ONLY);
	if (may_rest) {
		if (!user_room(me, m->oid.user))
			return WIRE_REASON_CAPACITY;
		if (!me_book_can_rest(me, si, me_side_ix(m->side), m->px))
			return WIRE_REASON_CAPACITY;
		if (m->tif == WIRE_TIF_GTD && !me_gtd_fits(me, 1))
			return WIRE_REASON_CAPACITY;
	}
	if ((flags & V_BOOK) == 0)
		return WIRE_REASON_NONE;
	if (m->tif == WIRE_TIF_POST_ONLY) {
		uint32_t best = me_book_best(me, si, m->side == WIRE_SIDE_BUY ? 1u : 0u);
		if (best != ME_NIL && crosses(m->side, m->px, me_lvl(me, best)->px))
			return WIRE_REASON_POST_ONLY_WOULD_CROSS;
	}
	if (m->tif == WIRE_TIF_FOK && !fok_fillable(me, si, m))
		return WIRE_REASON_FOK_NOT_FILLABLE;
	return WIRE_REASON_NONE;
}

/* Refuse a request whose id is oid (tag: me_oid_tag(oid), from its dedup lookup) with a
 * sequenced event (REJECTED or CANCEL_REJECTED). */
static void
refuse(struct me *me, struct wire_oid oid, uint32_t tag, uint32_t st, uint32_t fp,
       enum me_kind kind, uint32_t symbol, uint8_t side, uint8_t event, uint16_t reason,
       const struct wire_oid *contra)
{
	/* With no record to keep for dedup, or no retention left at all, answer unsequenced
	 * (ME_RESULT known=0): nothing is recorded, nothing terminal is said, and the bridge
	 * keeps re-driving until acks free room. */
	if (me_stream_free(me, st) < 2 || me->order_free == ME_NIL) {
		me_result_emit(me, oid, ME_NIL, reason);
		return;
	}
	uint32_t oi = me_order_alloc_tag(me, oid, tag);
	CHECK(oi != ME_NIL);
	struct me_order *o = me_ord(me, oi);
	o->fp = fp;
	o->kind = (uint8_t)kind;
	o->symbol = symbol;
	/* An event's side must decode (1 or 2): a refusal whose side is unknown (invalid in the
	 * request, or a modify of an unknown order) reports BUY. */
	o->side = side == WIRE_SIDE_SELL ? WIRE_SIDE_SELL : WIRE_SIDE_BUY;
	o->stream = (uint16_t)st;
	o->reason = (uint8_t)reason;
	/* A fresh record: no price, quantity or leaves. */
	struct wire_me_event *ev = me_ev_begin(me, oi, event, 0, 0, o->leaves);
	ev->reason = reason;
	if (contra != NULL)
		ev->contra = *contra;
	me_ev_emit(me, ev);
	/* A sequenced refusal always keeps its dedup record (until acked), so a re-driven
	 * duplicate can never turn a REJECTED into an accepted order. */
	me_order_finish(me, oi);
}

static void
duplicate(struct me *me, struct wire_oid oid, uint32_t oi, uint32_t fp)
{
	me_count(me, ME_C_DUPLICATES);
	/* Contract: a known id changes nothing; answer with its current state. */
	const struct me_order *o = me_ord(me, oi);
	me_result_emit(me, oid, oi, o->fp != fp ? WIRE_REASON_DUPLICATE_ID_MISMATCH : WIRE_REASON_NONE);
}

/* ---- matching ---- */

/* One trade: taker t against maker mk at the maker's price. */
static void
trade(struct me *me, struct me_symbol *s, uint32_t ti, uint32_t mi, struct me_level *l, int64_t q,
      int64_t notional)
{
	struct me_order *t = me_ord(me, ti);
	struct me_order *mk = me_ord(me, mi);
	uint64_t trade_id = ++s->trade_seq;
	uint16_t flags = entry_flag(t); /* (a taker exists only inside enter()) */
	t->cum += q;
	if (t->ord_type == WIRE_ORD_LIMIT || t->side == WIRE_SIDE_SELL) {
		t->leaves -= q;
		if (t->leaves == 0)
			flags |= WIRE_EV_F_DONE; /* match() stops: STOP_FILLED */
	}
	mk->cum += q;
	mk->leaves -= q;
	l->qty -= q;
	s->last_px = mk->px;
	me_count(me, ME_C_TRADES);

	struct wire_me_event *ev = me_ev_begin(me, ti, WIRE_EV_FILL, mk->px, q, t->leaves);
	ev->hdr.flags = flags;
	ev->contra = mk->oid;
	ev->contra_user = mk->oid.user;
	ev->trade_id = trade_id;
	ev->liquidity = 2;
	ev->notional = notional;
	me_ev_emit(me, ev);

	ev = me_ev_begin(me, mi, WIRE_EV_FILL, mk->px, q, mk->leaves);
	ev->hdr.flags = mk->leaves == 0 ? WIRE_EV_F_DONE : 0; /* match() finishes it */
	ev->contra = t->oid;
	ev->contra_user = t->oid.user;
	ev->trade_id = trade_id;
	ev->liquidity = 1;
	ev->notional = notional;
	me_ev_emit(me, ev);
	/* A record is finished right after its final event, before any later one's (the
	 * stream's finished FIFO stays in last_seq order): the taker now, the maker next. */
	if (flags & WIRE_EV_F_DONE)
		me_order_finish(me, ti);
}

/* The quantity a market buy's remaining budget pays for at px: cumulative notional stays
 * within the budget, rounded down to the lot. */
static inline int64_t
lots_affordable(const struct me_symbol *s, int64_t budget, int64_t px)
{
	int64_t q;
	if (money_mul_div(budget, s->base_unit, px, false, &q) != 0)
		q = INT64_MAX;
	return q - q % s->lot;
}

enum stop {
	STOP_FILLED,   /* nothing left to fill */
	STOP_BOOK,     /* no (crossing) liquidity left */
	STOP_BUDGET,   /* market buy: budget buys no further lot */
	STOP_STP,      /* self-trade prevention expired the taker */
	STOP_RETAIN,   /* a stream has no retention left for another trade */
};

static enum stop
match(struct me *me, uint32_t si, uint32_t ti, int64_t budget)
{
	struct me_symbol *s = me_sym(me, si);
	struct me_order *t = me_ord(me, ti);
	uint32_t opp = t->side == WIRE_SIDE_BUY ? 1u : 0u;
	bool market_buy = t->ord_type == WIRE_ORD_MARKET && t->side == WIRE_SIDE_BUY;
	/* Limit price, or the band edge for a market order (fixed at entry). */
	int64_t bound = price_bound(s, t->side, t->ord_type, t->px);
	/* The opposite side's level array (me_book_best), found once: it does not move. */
	const struct me_lref *r = me_lrefs(me, si, opp);
	for (;;) {
		if (!market_buy && t->leaves == 0)
			return STOP_FILLED;
		uint32_t n = s->side_count[opp];
		if (n == 0)
			return STOP_BOOK;
		uint32_t li = r[n - 1].level;
		struct me_level *l = me_lvl(me, li);
		if (!crosses(t->side, bound, l->px))
			return STOP_BOOK;
		uint32_t mi = l->head;
		struct me_order *mk = me_ord(me, mi);
		DCHECK(mk->state == ME_ST_LIVE);
		/* A maker past its GTD time or of a user whose kill-switch job has not reached
		 * it yet (me_bulk.c: waiting for retention) is cancelled, never traded. */
		if (__builtin_expect((mk->tif == WIRE_TIF_GTD && mk->expire_ns <= me->now_ns) ||
				     me->bulk_count != 0, 0)) {
			uint8_t cause = me_bulk_doomed(me, mi);
			if (cause != 0) {
				if (me_stream_free(me, mk->stream) < 2) {
					me_count(me, ME_C_RETENTION_STOP);
					return STOP_RETAIN;
				}
				me_count(me, cause == WIRE_CAUSE_EXPIRED ? ME_C_EXPIRED
				       : cause == WIRE_CAUSE_HALT	  ? ME_C_HALT_CANCELLED
									  : ME_C_KILLED);
				if (cause != WIRE_CAUSE_EXPIRED)
					me_count(me, ME_C_BULK_CANCELLED);
				me_cancel_live(me, mi, cause, NULL);
				continue;
			}
		}
		/* STP and the retention stop act only where a trade would happen: a market buy
		 * whose remaining budget buys no lot at this level ends (DONE) instead. Both are
		 * rare, so each asks lots_affordable itself and the common step is unchanged. */
		if (t->stp != WIRE_STP_NONE && mk->oid.user == t->oid.user) {
			/* Self-trade prevention by user. */
			if (market_buy && lots_affordable(s, budget, l->px) <= 0)
				return STOP_BUDGET;
			if (me_stream_free(me, mk->stream) < ME_EV_MAKER_ROOM) {
				me_count(me, ME_C_RETENTION_STOP);
				return STOP_RETAIN;
			}
			if (t->stp == WIRE_STP_EXPIRE_MAKER || t->stp == WIRE_STP_EXPIRE_BOTH) {
				me_count(me, ME_C_STP);
				me_cancel_live(me, mi, WIRE_CAUSE_STP, NULL);
			}
			if (t->stp == WIRE_STP_EXPIRE_TAKER || t->stp == WIRE_STP_EXPIRE_BOTH)
				return STOP_STP;
			continue;
		}
		if (me_stream_free(me, t->stream) < ME_EV_MATCH_ROOM ||
		    me_stream_free(me, mk->stream) < ME_EV_MAKER_ROOM) {
			if (market_buy && lots_affordable(s, budget, l->px) <= 0)
				return STOP_BUDGET;
			me_count(me, ME_C_RETENTION_STOP);
			return STOP_RETAIN;
		}
		int64_t q;
		int64_t notional;
		if (market_buy) {
			int64_t afford = lots_affordable(s, budget, l->px);
			q = afford < mk->leaves ? afford : mk->leaves;
			if (q <= 0)
				return STOP_BUDGET;
		} else {
			q = t->leaves < mk->leaves ? t->leaves : mk->leaves;
		}
		int rc = me_notional(l->px, q, s->base_unit, &notional);
		CHECK(rc == 0); /* bounded by the maker's own validated notional */
		if (market_buy)
			budget -= notional;
		/* The maker's leaves and cum change in place (a watched book's hash, me_move.c). */
		me_move_change(me, si, mi, mk->leaves - q, mk->cum + q, mk->stream);
		trade(me, s, ti, mi, l, q, notional);
		if (mk->leaves == 0) {
			me_book_remove(me, si, mi);
			me_user_unlink(me, mi);
			me_order_finish(me, mi); /* (its FILL said done) */
		} else {
			me_move_touch(me, si, mi); /* a partial fill: leaves and cum changed */
		}
	}
}

/* Enter an order that passed validation: match, then rest or finish; the order's first
 * event says it was accepted (WIRE_EV_F_ENTERED, entry_flag). tag is me_oid_tag(m->oid),
 * computed for the request's dedup lookup. contra (a replacement's target) is not sent: the
 * target's CANCELLED(REPLACED) names the replacement. */
static void
enter(struct me *me, uint32_t si, const struct wire_submit *m, uint32_t tag, uint32_t st,
      uint32_t fp, enum me_kind kind)
{
	uint32_t oi = me_order_alloc_tag(me, m->oid, tag);
	CHECK(oi != ME_NIL);
	struct me_order *o = me_ord(me, oi);
	o->fp = fp;
	o->kind = (uint8_t)kind;
	o->symbol = m->symbol;
	o->side = m->side;
	o->ord_type = m->ord_type;
	o->tif = m->tif;
	o->stp = m->stp;
	o->px = m->px;
	o->leaves = m->qty;
	o->expire_ns = m->expire_ns;
	o->stream = (uint16_t)st;
	me_count(me, ME_C_ACCEPTED);

	enum stop why = match(me, si, oi, m->quote_qty);
	o = me_ord(me, oi);
	uint16_t entry = entry_flag(o);
	switch (why) {
	case STOP_FILLED:
		return; /* its last FILL said done, and trade() finished it */
	case STOP_STP:
		emit_cancelled(me, oi, WIRE_CAUSE_STP, NULL, entry);
		me_count(me, ME_C_STP);
		break;
	case STOP_BUDGET:
		/* The unused budget is the OMS's to release on DONE. */
		emit_done(me, oi, entry);
		break;
	case STOP_BOOK:
	case STOP_RETAIN:
		if (o->ord_type == WIRE_ORD_MARKET || why == STOP_RETAIN) {
			emit_cancelled(me, oi, WIRE_CAUSE_NO_LIQUIDITY, NULL, entry);
			break;
		}
		if (o->tif == WIRE_TIF_IOC || o->tif == WIRE_TIF_FOK) {
			emit_cancelled(me, oi,
				       o->tif == WIRE_TIF_IOC ? WIRE_CAUSE_IOC : WIRE_CAUSE_FOK, NULL,
				       entry);
			break;
		}
		/* GTC, GTD, POST_ONLY: the remainder rests. */
		me_book_rest(me, si, oi);
		me_user_link(me, oi);
		if (o->tif == WIRE_TIF_GTD) {
			bool ok = me_gtd_push(me, oi);
			CHECK(ok); /* validate checked me_gtd_fits */
		}
		struct wire_me_event *ev =
			me_ev_begin(me, oi, WIRE_EV_RESTED, o->px, o->leaves, o->leaves);
		ev->hdr.flags = entry;
		me_ev_emit(me, ev);
		return;
	}
	me_order_finish(me, oi);
}

void
me_submit(struct me *me, const struct wire_submit *m)
{
	me_count(me, ME_C_SUBMITS);
	uint32_t fp = fp_submit(m);
	uint32_t tag = me_oid_tag(m->oid);
	uint32_t oi = me_order_find_tag(me, m->oid, tag);
	if (oi != ME_NIL) {
		duplicate(me, m->oid, oi, fp);
		return;
	}
	uint32_t st = me_stream_get(me, wire_oid_shard(m->oid));
	if (st == ME_NIL) {
		/* No stream can be created for this OMS shard: answer unsequenced. */
		me_count(me, ME_C_REJECTED);
		me_result_emit(me, m->oid, ME_NIL, WIRE_REASON_CAPACITY);
		return;
	}
	uint32_t si = ME_NIL;
	uint16_t reason = validate(me, m, st, &si, V_BOOK);
	if (reason != WIRE_REASON_NONE) {
		me_count(me, ME_C_REJECTED);
		refuse(me, m->oid, tag, st, fp, ME_KIND_SUBMIT, m->symbol, m->side, WIRE_EV_REJECTED,
		       reason, NULL);
		return;
	}
	enter(me, si, m, tag, st, fp, ME_KIND_SUBMIT);
}

/* ---- modify requests ---- */

/* Record a successful modify request for dedup: its last event is the target's latest.
 * tag: me_oid_tag(m->req). */
static void
record_request(struct me *me, const struct wire_modify *m, uint32_t tag, uint32_t fp,
	       enum me_kind kind, uint32_t ti)
{
	const struct me_order *t = me_ord(me, ti);
	uint32_t ri = me_order_alloc_tag(me, m->req, tag);
	CHECK(ri != ME_NIL); /* validate_modify checked records_room */
	struct me_order *r = me_ord(me, ri);
	t = me_ord(me, ti);
	r->fp = fp;
	r->kind = (uint8_t)kind;
	r->symbol = m->symbol;
	r->side = t->side;
	r->stream = t->stream;
	r->last_seq = t->last_seq;
	r->cum = t->cum;
	me_order_finish(me, ri);
}

static uint16_t
validate_modify(struct me *me, const struct wire_modify *m, enum me_kind kind, uint32_t st,
		uint32_t *ti_out, uint32_t *si_out)
{
	if (m->reserved != 0 || m->req.user != m->target.user)
		return WIRE_REASON_BAD_REQUEST;
	uint32_t si = me_symbol_find(me, m->symbol);
	if (si == ME_NIL)
		return WIRE_REASON_UNKNOWN_SYMBOL;
	*si_out = si;
	const struct me_symbol *s = me_sym(me, si);
	if (me_move_hold(me, si) != 0) {
		/* A live order of a book a move holds (me_move.c) is no longer the source's to
		 * change, and not yet the target's: the sender retries at the new owner. */
		uint32_t hi = me_order_find(me, m->target);
		if (hi != ME_NIL && me_ord(me, hi)->state == ME_ST_LIVE &&
		    me_ord(me, hi)->symbol == m->symbol) {
			*ti_out = hi;
			return WIRE_REASON_SYMBOL_MOVING;
		}
	}
	if (s->me_shard != me->limits.shard)
		return WIRE_REASON_SYMBOL_NOT_OWNED;
	uint32_t ti = me_order_find(me, m->target);
	if (ti == ME_NIL)
		return WIRE_REASON_UNKNOWN_ORDER;
	const struct me_order *t = me_ord(me, ti);
	/* Only orders can be modified, not requests. */
	if (t->kind != ME_KIND_SUBMIT && t->kind != ME_KIND_REPLACE)
		return WIRE_REASON_UNKNOWN_ORDER;
	if (t->symbol != m->symbol)
		return WIRE_REASON_BAD_REQUEST;
	if (t->state != ME_ST_LIVE)
		return WIRE_REASON_TOO_LATE;
	*ti_out = ti;
	if (me_stream_free(me, st) < me->limits.events_reserve ||
	    me_stream_free(me, t->stream) < me->limits.events_reserve) {
		me_count(me, ME_C_BACKPRESSURE);
		return WIRE_REASON_BACKPRESSURE;
	}
	/* A cancel relieves the pool, so it may take the last record. */
	if (kind == ME_KIND_CANCEL ? me->order_free == ME_NIL : !records_room(me))
		return WIRE_REASON_CAPACITY;
	switch (kind) {
	case ME_KIND_CANCEL:
		/* Halted or killed: cancels are allowed. */
		if (m->px != 0 || m->qty != 0)
			return WIRE_REASON_BAD_REQUEST;
		return WIRE_REASON_NONE;
	case ME_KIND_AMEND:
		/* Amend reduces risk, so it is allowed while halted or killed. */
		if (m->px != 0 && m->px != t->px)
			return WIRE_REASON_BAD_REQUEST;
		if (m->qty <= 0)
			return WIRE_REASON_BAD_REQUEST;
		if (m->qty % s->lot != 0)
			return WIRE_REASON_OFF_LOT;
		if (m->qty >= t->cum + t->leaves)
			return WIRE_REASON_AMEND_NOT_DOWN;
		return WIRE_REASON_NONE;
	case ME_KIND_REPLACE: {
		/* The replacement is a new order: pre-validate it so a refused replace leaves the
		 * target untouched. Post-only and FOK are decided after the cancel, as a SUBMIT. */
		struct wire_submit sub;
		memset(&sub, 0, sizeof(sub));
		sub.oid = m->req;
		sub.symbol = m->symbol;
		sub.side = t->side;
		sub.ord_type = t->ord_type;
		sub.tif = t->tif;
		sub.stp = t->stp;
		sub.px = m->px;
		sub.qty = m->qty;
		sub.expire_ns = t->expire_ns;
		uint32_t si2;
		/* The target leaves the book first: when it is alone at its level, that level
		 * (and, for a GTD, its heap entry) frees up, so a CAPACITY verdict that counted the
		 * target is not final. The check after the cancel decides; in the rare case it
		 * still finds no room the new order is REJECTED(CAPACITY) with the target gone. */
		uint16_t r = validate(me, &sub, st, &si2, 0);
		if (r == WIRE_REASON_CAPACITY && me_lvl(me, t->level)->count == 1)
			r = WIRE_REASON_NONE;
		return r;
	}
	default:
		return WIRE_REASON_BAD_REQUEST;
	}
}

void
me_modify(struct me *me, const struct wire_modify *m)
{
	me_count(me, ME_C_MODIFIES);
	enum me_kind kind = m->hdr.type == WIRE_CANCEL_TO_ME  ? ME_KIND_CANCEL
			    : m->hdr.type == WIRE_AMEND_TO_ME ? ME_KIND_AMEND
							      : ME_KIND_REPLACE;
	uint32_t fp = fp_modify(m, kind);
	uint32_t tag = me_oid_tag(m->req);
	uint32_t ri = me_order_find_tag(me, m->req, tag);
	if (ri != ME_NIL) {
		duplicate(me, m->req, ri, fp);
		return;
	}
	uint32_t st = me_stream_get(me, wire_oid_shard(m->req));
	if (st == ME_NIL) {
		me_count(me, ME_C_MODIFY_REJECTED);
		me_result_emit(me, m->req, ME_NIL, WIRE_REASON_CAPACITY);
		return;
	}
	uint32_t ti = ME_NIL, si = ME_NIL;
	uint16_t reason = validate_modify(me, m, kind, st, &ti, &si);
	if (reason != WIRE_REASON_NONE) {
		me_count(me, ME_C_MODIFY_REJECTED);
		uint8_t side = ti != ME_NIL ? me_ord(me, ti)->side : 0;
		refuse(me, m->req, tag, st, fp, kind, m->symbol, side, WIRE_EV_CANCEL_REJECTED,
		       reason, &m->target);
		return;
	}
	struct me_order *t = me_ord(me, ti);
	switch (kind) {
	case ME_KIND_CANCEL:
		me_cancel_live(me, ti, WIRE_CAUSE_USER, &m->req);
		record_request(me, m, tag, fp, kind, ti);
		return;
	case ME_KIND_AMEND: {
		/* Amend-down in place keeps time priority: the order stays where it is in its
		 * level's FIFO; only its leaves and the level total shrink. */
		int64_t new_leaves = m->qty - t->cum;
		if (new_leaves < 0)
			new_leaves = 0;
		int64_t cut = t->leaves - new_leaves;
		me_move_change(me, si, ti, new_leaves, t->cum, t->stream);
		me_lvl(me, t->level)->qty -= cut;
		t->leaves = new_leaves;
		struct wire_me_event *ev =
			me_ev_begin(me, ti, WIRE_EV_AMENDED, t->px, new_leaves, new_leaves);
		ev->contra = m->req;
		/* Amended to what already filled or below: nothing is live any more. */
		ev->hdr.flags = new_leaves == 0 ? WIRE_EV_F_DONE : 0;
		me_ev_emit(me, ev);
		if (new_leaves == 0) {
			me_book_remove(me, si, ti);
			me_user_unlink(me, ti);
			me_order_finish(me, ti);
		} else {
			me_move_touch(me, si, ti);
		}
		record_request(me, m, tag, fp, kind, ti);
		return;
	}
	case ME_KIND_REPLACE: {
		struct wire_submit sub;
		memset(&sub, 0, sizeof(sub));
		wire_hdr_init(&sub.hdr, WIRE_SUBMIT, 0);
		sub.oid = m->req;
		sub.symbol = m->symbol;
		sub.side = t->side;
		sub.ord_type = t->ord_type;
		sub.tif = t->tif;
		sub.stp = t->stp;
		sub.px = m->px;
		sub.qty = m->qty;
		sub.expire_ns = t->expire_ns;
		/* Cancel-replace loses priority: the old order leaves, a new one enters. */
		me_cancel_live(me, ti, WIRE_CAUSE_REPLACED, &m->req);
		uint32_t si2 = ME_NIL;
		uint16_t r = validate(me, &sub, st, &si2, V_BOOK | V_NO_BACKPRESSURE);
		if (r != WIRE_REASON_NONE) {
			me_count(me, ME_C_REJECTED);
			refuse(me, m->req, tag, st, fp, ME_KIND_REPLACE, m->symbol, sub.side,
			       WIRE_EV_REJECTED, r, &m->target);
			return;
		}
		enter(me, si, &sub, tag, st, fp, ME_KIND_REPLACE);
		return;
	}
	default:
		CHECK(false);
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me book: price levels and their intrusive FIFOs.
 *
 * Each side of a book keeps a sorted array of (price, level) with the best price at the
 * highest index: bids ascending, asks descending. Best price is the last element (no scan);
 * the touch moves by pushing or popping at the end; a level deeper in the book is found where
 * the tick says it is when the side is dense there, else by an exponential walk back from the
 * touch (most activity is near it) and then binary search, and inserted or removed with one
 * memmove of the levels better than it. The array is bounded by
 * levels_side_max, so every operation is bounded.
 */
#include <string.h>

#include "me/me_int.h"

/* First index in [0, n) whose price is better than px (entries are sorted worst → best).
 * First a guess: the prices are distinct multiples of the tick, so when the side is dense
 * (a level at every tick, as near the touch of a busy book) the level at px sits exactly
 * GAP / tick entries below the touch; one division and two probes confirm it, and the
 * answer stands only if the probes show the boundary itself (r[g] not better, r[g + 1]
 * better), so a wrong guess (a gap in the side, a tick of 0) costs those probes and
 * nothing else. Otherwise exponential search back from the touch (most prices are a few
 * levels from it), then binary search inside the bracket: O(log distance-from-touch). */
#define BOOK_SEARCH(name, BETTER, GAP)                                                     \
	static inline uint32_t name(const struct me_lref *r, uint32_t n, int64_t px,       \
				    int64_t tick)                                          \
	{                                                                                  \
		if (n == 0 || !BETTER(r[n - 1].px, px))                                    \
			return n;                                                          \
		if (tick > 0) {                                                            \
			/* r[n - 1] is better: the gap is positive and fits uint64_t. */   \
			uint64_t k = GAP(r[n - 1].px, px) / (uint64_t)tick;                \
			if (k < n) {                                                       \
				uint32_t g = n - 1 - (uint32_t)k;                          \
				/* Not better means g < n - 1: r[g + 1] exists. */         \
				if (!BETTER(r[g].px, px) && BETTER(r[g + 1].px, px))       \
					return g + 1;                                      \
			}                                                                  \
		}                                                                          \
		/* r[hi] is better than px; find lo with r[lo] not better (or lo = 0). */  \
		uint32_t hi = n - 1, step = 1, lo;                                         \
		for (;;) {                                                                 \
			if (hi < step) {                                                   \
				lo = 0;                                                    \
				if (BETTER(r[0].px, px))                                   \
					return 0;                                          \
				break;                                                     \
			}                                                                  \
			lo = hi - step;                                                    \
			if (!BETTER(r[lo].px, px))                                         \
				break;                                                     \
			hi = lo;                                                           \
			step <<= 1;                                                        \
		}                                                                          \
		/* r[lo] not better, r[hi] better: the answer is in (lo, hi]. */           \
		while (hi - lo > 1) {                                                      \
			uint32_t mid = lo + (hi - lo) / 2;                                 \
			if (BETTER(r[mid].px, px))                                         \
				hi = mid;                                                  \
			else                                                               \
				lo = mid;                                                  \
		}                                                                          \
		return hi;                                                                 \
	}
#define BID_BETTER(a, b) ((a) > (b))
#define ASK_BETTER(a, b) ((a) < (b))
/* How far touch a is from px b on each side, when a is better (modulo 2^64: exact). */
#define BID_GAP(a, b) ((uint64_t)(a) - (uint64_t)(b))
#define ASK_GAP(a, b) ((uint64_t)(b) - (uint64_t)(a))
BOOK_SEARCH(search_bids, BID_BETTER, BID_GAP)
BOOK_SEARCH(search_asks, ASK_BETTER, ASK_GAP)

/* me_book_find, inlined into the hot callers of this file (rest, remove). */
static inline uint32_t
book_find(struct me *me, uint32_t si, uint32_t side, int64_t px, uint32_t *pos)
{
	const struct me_lref *r = me_lrefs(me, si, side);
	const struct me_symbol *s = me_sym(me, si);
	uint32_t n = s->side_count[side];
	uint32_t i = side == 0 ? search_bids(r, n, px, s->tick) : search_asks(r, n, px, s->tick);
	/* Entries [i, n) are better than px; entry i-1 (if any) is at or worse than px. */
	*pos = i;
	if (i > 0 && r[i - 1].px == px)
		return r[i - 1].level;
	return ME_NIL;
}

uint32_t
me_book_find(struct me *me, uint32_t si, uint32_t side, int64_t px, uint32_t *pos)
{
	return book_find(me, si, side, px, pos);
}

void
me_book_rest(struct me *me, uint32_t si, uint32_t oi)
{
	struct me_order *o = me_ord(me, oi);
	struct me_symbol *s = me_sym(me, si);
	uint32_t side = me_side_ix(o->side);
	uint32_t pos;
	uint32_t li = book_find(me, si, side, o->px, &pos);
	struct me_level *l;
	if (li == ME_NIL) {
		/* New level: the caller checked me_book_can_rest. */
		CHECK(me->level_free != ME_NIL);
		CHECK(s->side_count[side] < me->limits.levels_side_max);
		li = me->level_free;
		l = me_lvl(me, li);
		me->level_free = l->count;
		me->levels_used++;
		if (li >= me->levels_hwm)
			me->levels_hwm = li + 1;
		l->px = o->px;
		l->qty = 0;
		l->head = l->tail = ME_NIL;
		l->count = 0;
		l->symbol = si;
		struct me_lref *r = me_lrefs(me, si, side);
		uint32_t n = s->side_count[side];
		memmove(&r[pos + 1], &r[pos], (size_t)(n - pos) * sizeof(*r));
		r[pos].px = o->px;
		r[pos].level = li;
		r[pos].reserved = 0;
		s->side_count[side] = n + 1;
	} else {
		l = me_lvl(me, li);
	}
	/* Price-time priority: append at the tail of the level's FIFO. */
	o->level = li;
	o->next = ME_NIL;
	o->prev = l->tail;
	if (l->tail != ME_NIL)
		me_ord(me, l->tail)->next = oi;
	else
		l->head = oi;
	l->tail = oi;
	l->count++;
	l->qty += o->leaves;
	o->state = ME_ST_LIVE;
	s->resting++;
	me->resting++;
	me_move_rest(me, si, oi); /* journal, running hash: after the append */
	DCHECK(l->qty > 0);
}

void
me_book_remove(struct me *me, uint32_t si, uint32_t oi)
{
	struct me_order *o = me_ord(me, oi);
	struct me_symbol *s = me_sym(me, si);
	uint32_t li = o->level;
	CHECK(li != ME_NIL);
	me_move_leave(me, si, oi); /* journal, running hash: while it is still linked */
	struct me_level *l = me_lvl(me, li);
	if (o->prev != ME_NIL)
		me_ord(me, o->prev)->next = o->next;
	else
		l->head = o->next;
	if (o->next != ME_NIL)
		me_ord(me, o->next)->prev = o->prev;
	else
		l->tail = o->prev;
	o->prev = o->next = ME_NIL;
	o->level = ME_NIL;
	l->count--;
	l->qty -= o->leaves;
	CHECK(s->resting > 0);
	CHECK(me->resting > 0);
	s->resting--;
	me->resting--;
	if (l->count > 0)
		return;
	DCHECK(l->qty == 0);
	/* Empty level: drop it from the side array (usually the touch: no move at all). */
	uint32_t side = me_side_ix(o->side);
	uint32_t pos;
	uint32_t found = book_find(me, si, side, l->px, &pos);
	CHECK(found == li);
	struct me_lref *r = me_lrefs(me, si, side);
	uint32_t n = s->side_count[side];
	memmove(&r[pos - 1], &r[pos], (size_t)(n - pos) * sizeof(*r));
	memset(&r[n - 1], 0, sizeof(*r));
	s->side_count[side] = n - 1;
	memset(l, 0, sizeof(*l));
	l->count = me->level_free;
	me->level_free = li;
	me->levels_used--;
}

uint32_t
me_depth(const struct me *cme, uint32_t symbol, enum wire_side side, struct me_depth_level *out,
	 uint32_t n)
{
	/* Read-only walk; the accessors take a non-const engine. */
	struct me *me = (struct me *)(uintptr_t)cme;
	CHECK(me != NULL);
	CHECK(out != NULL || n == 0);
	uint32_t si = me_symbol_find(me, symbol);
	if (si == ME_NIL || (side != WIRE_SIDE_BUY && side != WIRE_SIDE_SELL))
		return 0;
	uint32_t sd = me_side_ix((uint8_t)side);
	uint32_t cnt = me_sym(me, si)->side_count[sd];
	const struct me_lref *r = me_lrefs(me, si, sd);
	uint32_t k = 0;
	for (; k < n && k < cnt; k++) {
		const struct me_level *l = me_lvl(me, r[cnt - 1 - k].level);
		out[k].px = l->px;
		out[k].qty = l->qty;
		out[k].count = l->count;
		out[k].reserved = 0;
	}
	return k;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me journal: the orderIds of a watched book's changes, for a live symbol move (me_move.c,
 * docs/me.md "Moving a symbol with its book").
 *
 * The move driver copies the source's book while it still trades, then freezes it (OUT) and
 * sends the target the difference between its copy and the frozen book. Reading and diffing
 * the whole frozen book is most of the trading pause on a deep book; WATCH, sent before the
 * copy is read, makes the source note here the oid of every order of that book that rests,
 * leaves the book (a fill, a cancel, an expiry, a bulk cancel, an amend to zero), or changes
 * a field the move carries while it rests (a maker's partial fill, an amend, a rebind to
 * another OMS stream). After OUT the driver reads only those orders
 * (me_move_journal_export).
 *
 * One journal per engine, in the engine's region (me->off_journal, ME_JOURNAL_MAX oids):
 * only one book is watched at a time. Duplicates are kept, in the order the changes happen,
 * so the first entry of each new order is its arrival on the book: appending the new ones
 * in that order keeps time priority. A change that finds the journal full marks it
 * overflowed and is lost; the driver then reads the whole book, as without a journal.
 *
 * Replicated state like the rest of the region: every replica journals the same oids, the
 * snapshot carries [0, journal_n) and the state hash covers them; the entries past
 * journal_n are all zero (a reset zeroes what it forgets), so a restored engine is the same
 * byte for byte.
 */
#include <errno.h>
#include <string.h>

#include "me/me_int.h"

static_assert(ME_JOURNAL_MAX <= UINT32_MAX / 2, "journal indices fit 32 bits");

static struct wire_oid *
journal(struct me *me)
{
	return ME_ARR(me, off_journal, struct wire_oid);
}

void
me_journal_append(struct me *me, uint32_t oi)
{
	DCHECK(me->watch_si != ME_NIL);
	DCHECK(me_ord(me, oi)->state == ME_ST_LIVE);
	if (me->journal_n == ME_JOURNAL_MAX) {
		me->journal_overflow = 1;
		return;
	}
	journal(me)[me->journal_n++] = me_ord(me, oi)->oid;
	DCHECK(me->journal_n <= ME_JOURNAL_MAX);
}

void
me_journal_reset(struct me *me)
{
	CHECK(me->journal_n <= ME_JOURNAL_MAX);
	/* Bounded by ME_JOURNAL_MAX entries (1 MiB), on the admin path only (a WATCH, the
	 * end of a move): the entries past journal_n stay zero, as init left them. */
	memset(journal(me), 0, (size_t)me->journal_n * sizeof(struct wire_oid));
	me->journal_n = 0;
	me->journal_overflow = 0;
	me->journal_slot = ME_NIL;
	me->watch_si = ME_NIL;
}

void
me_journal_start(struct me *me, uint32_t slot)
{
	CHECK(slot < ME_MOVES_MAX);
	const struct me_move *mv = &me->moves[slot];
	CHECK(mv->phase == ME_MOVE_WATCHING);
	me_journal_reset(me);
	me->journal_slot = slot;
	me->watch_si = mv->symbol;
	DCHECK(me->journal_n == 0);
}

int
me_move_journal_export(const struct me *cme, uint32_t symbol, uint64_t move_id, uint32_t from,
		       struct wire_book_order *out, uint32_t n)
{
	CHECK(cme != NULL);
	CHECK(out != NULL || n == 0);
	struct me *me = (struct me *)(uintptr_t)cme; /* read only, as me_move_export */
	uint32_t si = me_symbol_find(me, symbol);
	if (si == ME_NIL || move_id == 0)
		return -ENOENT;
	const struct me_move *mv = me_move_find(me, move_id, si);
	if (mv == NULL || mv->role != ME_MOVE_SOURCE || mv->phase != ME_MOVE_FROZEN)
		return -ENOENT;
	if (me->journal_slot != (uint32_t)(mv - me->moves) || me->journal_overflow != 0)
		return -EOVERFLOW;
	DCHECK(me->watch_si == ME_NIL); /* a frozen book is not watched: the journal is whole */
	if (from >= me->journal_n)
		return 0;
	uint32_t left = me->journal_n - from;
	uint32_t count = n < left ? n : left;
	const struct wire_oid *j = ME_CARR(me, off_journal, struct wire_oid);
	for (uint32_t k = 0; k < count; k++) {
		struct wire_oid oid = j[from + k];
		uint32_t oi = me_order_find(me, oid);
		const struct me_order *o = oi != ME_NIL ? me_ord(me, oi) : NULL;
		/* On this book: live, on a level of book si (an oid of a finished order may
		 * since name a record of another kind, or an order of another symbol). */
		if (o != NULL && o->state == ME_ST_LIVE && me_lvl(me, o->level)->symbol == si) {
			me_move_order_export(me, oi, &out[k]);
			out[k].op = WIRE_BOOK_UPDATE;
		} else {
			memset(&out[k], 0, sizeof(out[k]));
			out[k].oid = oid;
			out[k].op = WIRE_BOOK_REMOVE;
		}
	}
	CHECK(count <= n);
	return (int)count;
}

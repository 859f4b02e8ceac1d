/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me move: a symbol moves to another ME shard with its resting book while the venue trades
 * (docs/me.md "Moving a symbol with its book"; the seed's steps: quiesce, snapshot the book,
 * hand off, flip the map, resume). Source F owns the symbol, target M takes it over. Each
 * step is an admin entry in one shard's log, answered with an ADMIN_REPLY, and idempotent on
 * its move_id, so a driver that lost an answer sends the step again:
 *
 *   WATCH  (F) optional, before the driver reads its copy of the trading book: journal the
 *              orderId of every change to the book from here (me_journal.c). Nothing else
 *              changes: the book trades on.
 *   OUT    (F) freeze the book: count and hash it (the move hash, below). From here nothing of it
 *              enters, trades, expires, is modified or bulk-cancelled (SYMBOL_MOVING). A
 *              move that WATCHed keeps its journal: the driver reads the orders it names
 *              (me_move_journal_export), not the whole book, to make the difference.
 *   CHUNK  (M) install the next chunk, inert (M does not own the symbol yet); a chunk
 *              applies whole or not at all. Its orders are ADDs (to the tail of their
 *              level), or, for a copy made while the book still traded, the difference to
 *              the frozen book: REMOVEs and UPDATEs (leaves, cum, stream) of installed ones.
 *   IN     (M) M's book, hashed the same way, matches F's count and hash: M owns the
 *              symbol and opens the book with F's status, kill-switch, trade number and
 *              last price.
 *   DONE   (F) drop the frozen copy, silently; F no longer owns the symbol.
 *   ABORT  (F, M) before DONE / IN: F trades the book again (or stops watching it); M drops
 *              what it installed.
 *
 * One journal per engine, so one move WATCHes at a time: a WATCH of another move (a driver
 * that died after its WATCH) ends the watching one, or takes the journal from a frozen
 * move that kept one; an OUT of another move of the watched book ends the watch too (that
 * move freezes without a journal). A move that did not WATCH, or whose journal is gone or
 * overflowed, is moved by reading the whole frozen book (me_move_export), as before.
 *
 * Export order: bids best level first, then asks best level first, oldest first within a
 * level. M appends each added order at the tail of its level; a copy's orders come in export
 * order and the difference adds only orders newer than every copied one, so time priority
 * survives the move, and IN proves it with the move hash.
 *
 * The move hash of a book is H = Σ h(o) mod 2^64 over its orders, with
 *   h(o) = XXH3_64bits_withSeed(&rec, 64, me_move_hash_init(symbol) ^ XXH3_64bits(&pred, 16))
 * where rec is o's struct wire_book_order as me_move_order_export writes it (op 0, reserved
 * zero), symbol the symbol id, and pred the oid of the order just before o on its level (all
 * zero for a level's head): me_move_order_hash. A sum of terms that each name their
 * predecessor is the same for two books exactly when each level holds the same records in
 * the same sequence, so it proves time priority, and it changes by a few terms per change
 * of the book: both sides keep it running instead of walking the book inside the trading
 * pause. F keeps it in the WATCHING move from its WATCH (one walk then, while the book
 * trades) through every change (the me_move_rest/leave/change hooks, me_int.h) and takes it
 * at OUT; M keeps it in the INSTALLING move, chunk by chunk, and compares it at IN. A book
 * OUT freezes without a WATCH is walked (me_move_hash_walk, the reference computation).
 *
 * Everything is state in struct me (moves[], moves_active, gtd_held, the journal):
 * snapshotted, hashed, the same on every replica. A held book's GTD orders have no heap
 * entries (OUT takes them off on F, M pushes none while installing); the room they need in
 * the heap stays theirs (me->gtd_held, me_gtd_fits) until the move ends and pushes them. A
 * held book's orders are skipped by user kill-switch jobs; ending the move starts those
 * jobs again.
 */
#include <errno.h>
#include <string.h>
#include <xxhash.h>

#include "me/me_int.h"

#define MOVE_HASH_SEED UINT64_C(0x45564f4d4b4f4f42) /* "BOOKMOVE" */
/* Orders in one chunk: its tail is at most WIRE_TAIL_MAX (the duplicate checks are
 * quadratic in it). */
#define CHUNK_ORDERS_MAX (WIRE_TAIL_MAX / sizeof(struct wire_book_order))
static_assert(CHUNK_ORDERS_MAX <= 128, "a chunk's checks stay cheap");
static_assert(ME_MOVES_MAX <= ME_BULK_JOBS_MAX, "bounded tables");

/* ---- the hash both sides compute ---- */

uint64_t
me_move_hash_init(uint32_t symbol)
{
	return me_mix64(MOVE_HASH_SEED ^ symbol);
}

uint64_t
me_move_order_hash(uint32_t symbol, const struct wire_book_order *rec, struct wire_oid pred)
{
	CHECK(rec != NULL);
	CHECK(rec->op == WIRE_BOOK_ADD);
	uint64_t seed = me_move_hash_init(symbol) ^ XXH3_64bits(&pred, sizeof(pred));
	return XXH3_64bits_withSeed(rec, sizeof(*rec), seed);
}

/* ---- the book in export order ---- */

typedef bool(book_visit_fn)(struct me *me, uint32_t oi, void *ctx);

/* Visit book si's orders in export order until fn returns false; fn must not change the
 * book. Returns the orders visited. */
static uint32_t
book_walk(struct me *me, uint32_t si, book_visit_fn *fn, void *ctx)
{
	uint32_t n = 0;
	for (uint32_t side = 0; side < 2; side++) {
		const struct me_lref *r = me_lrefs(me, si, side);
		for (uint32_t k = me_sym(me, si)->side_count[side]; k-- > 0;) {
			uint32_t oi = me_lvl(me, r[k].level)->head;
			for (; oi != ME_NIL; oi = me_ord(me, oi)->next) {
				n++;
				if (!fn(me, oi, ctx))
					return n;
			}
		}
	}
	DCHECK(n <= me_sym(me, si)->resting);
	return n;
}

/* A live order as it travels (wire.h struct wire_book_order). */
void
me_move_order_export(struct me *me, uint32_t oi, struct wire_book_order *w)
{
	const struct me_order *o = me_ord(me, oi);
	DCHECK(o->state == ME_ST_LIVE);
	memset(w, 0, sizeof(*w));
	w->oid = o->oid;
	w->px = o->px;
	w->leaves = o->leaves;
	w->cum = o->cum;
	w->expire_ns = o->expire_ns;
	w->fp = o->fp;
	w->stream = me_stream_at(me, o->stream)->shard;
	w->side = o->side;
	w->ord_type = o->ord_type;
	w->tif = o->tif;
	w->stp = o->stp;
}

struct hash_ctx {
	uint64_t hash;
	uint32_t gtd;          /* GTD orders seen */
	uint32_t level;        /* level of the order visited last, ME_NIL before the first */
	struct wire_oid pred;  /* its oid: the predecessor of the next order on that level */
};

static bool
hash_visit(struct me *me, uint32_t oi, void *ctx)
{
	struct hash_ctx *c = ctx;
	const struct me_order *o = me_ord(me, oi);
	if (o->level != c->level) {
		/* The head of a level: no predecessor. */
		c->level = o->level;
		memset(&c->pred, 0, sizeof(c->pred));
	}
	struct wire_book_order w;
	me_move_order_export(me, oi, &w);
	c->hash += me_move_order_hash(o->symbol, &w, c->pred);
	c->gtd += w.tif == WIRE_TIF_GTD;
	c->pred = o->oid;
	return true;
}

uint64_t
me_move_hash_walk(struct me *me, uint32_t si, uint32_t *count, uint32_t *gtd)
{
	CHECK(si < me->symbols_used);
	struct hash_ctx c = {.hash = 0, .gtd = 0, .level = ME_NIL, .pred = {0, 0}};
	uint32_t n = book_walk(me, si, hash_visit, &c);
	CHECK(n == me_sym(me, si)->resting);
	if (count != NULL)
		*count = n;
	if (gtd != NULL)
		*gtd = c.gtd;
	return c.hash;
}

/* ---- the running hash: the same sum, kept as the book changes ----
 *
 * A term h(o, p) depends on o's record and on the oid of p, its predecessor on its level.
 * An order that rests goes to the tail: one new term. An order that changes in place
 * (leaves, cum, stream) changes its own term only. An order that leaves takes its term,
 * and its successor's term changes predecessor. The functions below take the terms as the
 * book is (before an unlink, after an append), so each site calls them at the point where
 * the prev/next links are the ones the term names. */

/* h of live order oi as it rests now, or with rec's fields if rec is not NULL. */
static uint64_t
term(struct me *me, uint32_t oi, const struct wire_book_order *rec, struct wire_oid pred)
{
	struct wire_book_order w;
	if (rec == NULL) {
		me_move_order_export(me, oi, &w);
		rec = &w;
	}
	return me_move_order_hash(me_ord(me, oi)->symbol, rec, pred);
}

/* The oid of order oi's predecessor on its level: zero for the head. */
static struct wire_oid
pred_oid(struct me *me, uint32_t oi)
{
	uint32_t p = me_ord(me, oi)->prev;
	if (p == ME_NIL)
		return (struct wire_oid){0, 0};
	return me_ord(me, p)->oid;
}

void
me_move_hash_rest(struct me *me, uint64_t *hash, uint32_t oi)
{
	const struct me_order *o = me_ord(me, oi);
	DCHECK(o->state == ME_ST_LIVE);
	DCHECK(o->next == ME_NIL); /* appended at the tail: nobody after it */
	*hash += term(me, oi, NULL, pred_oid(me, oi));
}

void
me_move_hash_leave(struct me *me, uint64_t *hash, uint32_t oi)
{
	const struct me_order *o = me_ord(me, oi);
	DCHECK(o->state == ME_ST_LIVE);
	struct wire_oid p = pred_oid(me, oi);
	*hash -= term(me, oi, NULL, p);
	if (o->next != ME_NIL) {
		/* Its successor follows its predecessor from now. */
		*hash -= term(me, o->next, NULL, o->oid);
		*hash += term(me, o->next, NULL, p);
	}
}

void
me_move_hash_change(struct me *me, uint64_t *hash, uint32_t oi, int64_t leaves, int64_t cum,
		    uint16_t stream)
{
	DCHECK(me_ord(me, oi)->state == ME_ST_LIVE);
	DCHECK(stream < me->streams_used);
	struct wire_oid p = pred_oid(me, oi);
	struct wire_book_order w;
	me_move_order_export(me, oi, &w);
	*hash -= me_move_order_hash(me_ord(me, oi)->symbol, &w, p);
	w.leaves = leaves;
	w.cum = cum;
	w.stream = me_stream_at(me, stream)->shard;
	*hash += me_move_order_hash(me_ord(me, oi)->symbol, &w, p);
}

/* ---- the watched book (WATCH to OUT): journal, running hash, GTD orders ---- */

/* The WATCHING move that owns the journal; its book is me->watch_si. */
static struct me_move *
watcher(struct me *me)
{
	DCHECK(me->journal_slot < ME_MOVES_MAX);
	struct me_move *mv = &me->moves[me->journal_slot];
	DCHECK(mv->phase == ME_MOVE_WATCHING);
	DCHECK(mv->symbol == me->watch_si);
	return mv;
}

void
me_watch_rested(struct me *me, uint32_t oi)
{
	struct me_move *mv = watcher(me);
	me_journal_append(me, oi);
	me_move_hash_rest(me, &mv->hash, oi);
	mv->gtd_held += me_ord(me, oi)->tif == WIRE_TIF_GTD;
}

void
me_watch_leaving(struct me *me, uint32_t oi)
{
	struct me_move *mv = watcher(me);
	me_journal_append(me, oi);
	me_move_hash_leave(me, &mv->hash, oi);
	if (me_ord(me, oi)->tif == WIRE_TIF_GTD) {
		CHECK(mv->gtd_held > 0);
		mv->gtd_held--;
	}
}

void
me_watch_changing(struct me *me, uint32_t oi, int64_t leaves, int64_t cum, uint16_t stream)
{
	struct me_move *mv = watcher(me);
	me_move_hash_change(me, &mv->hash, oi, leaves, cum, stream);
}

/* Drop every order of book si silently: no event, the records released (their oids are
 * unknown here afterwards), users and levels freed as they empty. */
static void
book_drop(struct me *me, uint32_t si)
{
	for (uint32_t side = 0; side < 2; side++) {
		uint32_t li;
		while ((li = me_book_best(me, si, side)) != ME_NIL) {
			uint32_t oi = me_lvl(me, li)->head;
			me_book_remove(me, si, oi);
			me_user_unlink(me, oi);
			me_order_release(me, oi);
		}
	}
	CHECK(me_sym(me, si)->resting == 0);
}

/* ---- move slots ---- */

struct me_move *
me_move_find(struct me *me, uint64_t move_id, uint32_t si)
{
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++) {
		struct me_move *mv = &me->moves[i];
		if (mv->move_id == move_id && mv->symbol == si)
			return mv;
	}
	return NULL;
}

/* The move holding book si here (FROZEN or INSTALLING), or NULL. */
static struct me_move *
move_holding(struct me *me, uint32_t si)
{
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++) {
		struct me_move *mv = &me->moves[i];
		if (mv->move_id != 0 && mv->symbol == si && me_move_holds(mv))
			return mv;
	}
	return NULL;
}

static uint32_t
slot_of(const struct me *me, const struct me_move *mv)
{
	DCHECK(mv >= me->moves && mv < me->moves + ME_MOVES_MAX);
	return (uint32_t)(mv - me->moves);
}

/* The WATCHING move (at most one: it owns the engine's journal), or NULL. */
static struct me_move *
move_watching(struct me *me)
{
	if (me->journal_slot == ME_NIL)
		return NULL;
	struct me_move *mv = &me->moves[me->journal_slot];
	return mv->phase == ME_MOVE_WATCHING ? mv : NULL;
}

/* The slot a new move takes: a free one, else the oldest FINISHED one; NULL when every
 * slot holds or watches a book. */
static struct me_move *
move_slot(struct me *me)
{
	struct me_move *oldest = NULL;
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++) {
		struct me_move *mv = &me->moves[i];
		if (mv->move_id == 0)
			return mv;
		if (mv->phase != ME_MOVE_FINISHED)
			continue;
		if (oldest == NULL || mv->created < oldest->created)
			oldest = mv;
	}
	return oldest;
}

/* Record a new move in slot mv: a source FROZEN or WATCHING, a target INSTALLING. */
static void
move_start(struct me *me, struct me_move *mv, uint64_t move_id, uint32_t si, uint16_t peer,
	   uint8_t role, uint8_t phase)
{
	DCHECK(move_holding(me, si) == NULL);
	CHECK((role == ME_MOVE_SOURCE) == (phase != ME_MOVE_INSTALLING));
	memset(mv, 0, sizeof(*mv));
	mv->move_id = move_id;
	mv->created = ++me->moves_created;
	mv->symbol = si;
	mv->peer = peer;
	mv->role = role;
	mv->phase = phase;
	if (me_move_holds(mv))
		me->moves_active++;
	CHECK(me->moves_active <= ME_MOVES_MAX);
}

/* A WATCHING move ends without freezing (ABORT, or replaced): its slot is freed, the
 * journal forgotten; the book traded all along, so nothing else changes. */
static void
watch_end(struct me *me, struct me_move *mv)
{
	CHECK(mv->phase == ME_MOVE_WATCHING);
	CHECK(me->journal_slot == slot_of(me, mv));
	me_journal_reset(me);
	memset(mv, 0, sizeof(*mv));
}

/* The move no longer holds its book: FINISHED (kept to answer repeats) or freed (ABORT).
 * The heap room its GTD orders were owed is released to the caller, who pushes them. Its
 * journal, if it kept one, is no longer anybody's. */
static void
move_end(struct me *me, struct me_move *mv, bool keep)
{
	CHECK(me_move_holds(mv));
	CHECK(me->moves_active > 0);
	CHECK(me->gtd_held >= mv->gtd_held);
	if (me->journal_slot == slot_of(me, mv))
		me_journal_reset(me);
	me->moves_active--;
	me->gtd_held -= mv->gtd_held;
	if (keep) {
		mv->phase = ME_MOVE_FINISHED;
		mv->gtd_held = 0;
	} else {
		memset(mv, 0, sizeof(*mv));
	}
}

/* ---- opening a book (IN on the target, ABORT on the source) ---- */

struct users_ctx {
	uint64_t user[ME_BULK_JOBS_MAX];
	uint32_t n;
	uint32_t room;  /* bulk job slots free */
	bool full;
};

static bool
users_visit(struct me *me, uint32_t oi, void *ctx)
{
	struct users_ctx *c = ctx;
	uint64_t user = me_ord(me, oi)->oid.user;
	const struct me_user *u = me_user_find(me, user);
	if (u == NULL || (u->count & ME_USER_KILLED) == 0)
		return true;
	if (me_bulk_pending(me, ME_BULK_USER, user))
		return true;
	for (uint32_t k = 0; k < c->n; k++)
		if (c->user[k] == user)
			return true;
	if (c->n == c->room) {
		c->full = true;
		return false;
	}
	c->user[c->n++] = user;
	return true;
}

/* The users with an engaged kill-switch and no pending job who hold orders of book si: their
 * job skipped those orders (me_bulk.c), one starts again when the book opens. False when the
 * bulk queue cannot take them all. */
static bool
killed_users(struct me *me, uint32_t si, struct users_ctx *c)
{
	memset(c, 0, sizeof(*c));
	c->room = ME_BULK_JOBS_MAX - me->bulk_count;
	if (me->users_killed == 0)
		return true;
	book_walk(me, si, users_visit, c);
	DCHECK(c->n <= c->room);
	return !c->full;
}

static bool
push_visit(struct me *me, uint32_t oi, void *ctx)
{
	if (me_ord(me, oi)->tif != WIRE_TIF_GTD)
		return true;
	bool ok = me_gtd_push(me, oi);
	CHECK(ok); /* the room was held for it (me->gtd_held) */
	(*(uint32_t *)ctx)++;
	return true;
}

/* Book si is no longer held (move_end ran): its GTD orders go on the heap (expiring at once
 * if they are past due), and kill-switch jobs start for the users in c. */
static void
book_open(struct me *me, uint32_t si, uint32_t gtd, const struct users_ctx *c)
{
	DCHECK(me_move_hold(me, si) == 0);
	/* A record reused by an installed order may have left a stale entry that now looks
	 * like one of the book's (the same expiry): drop them all, then push each once. */
	me_gtd_drop_book(me, si);
	uint32_t pushed = 0;
	if (gtd > 0) /* a book without GTD orders (the count is kept with the book) needs no walk */
		book_walk(me, si, push_visit, &pushed);
	CHECK(pushed == gtd);
	for (uint32_t k = 0; k < c->n; k++) {
		int rc = me_bulk_add(me, ME_BULK_USER, c->user[k], WIRE_CAUSE_KILL_SWITCH);
		CHECK(rc == 0); /* killed_users counted the room */
	}
	me_expire_due(me);
}

/* ---- the steps ---- */

static void
move_out(struct me *me, const struct wire_symbol_move *m, uint32_t si)
{
	if (m->peer == me->limits.shard) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
		return;
	}
	struct me_move *mv = me_move_find(me, m->move_id, si);
	if (mv != NULL && (mv->role != ME_MOVE_SOURCE || mv->peer != m->peer)) {
		/* The id of a move this shard was the target of, or the same move to another
		 * target: a move id names one move. */
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
		return;
	}
	if (mv != NULL && mv->phase != ME_MOVE_WATCHING) {
		/* A repeat: frozen (or already dropped) by this very move. */
		me_admin_reply(me, WIRE_REASON_NONE, mv->count);
		return;
	}
	struct me_move *h = move_holding(me, si);
	if (h != NULL && h->role == ME_MOVE_SOURCE) {
		/* Frozen by another move (a driver left it half-way): the driver resumes it. */
		me_admin_reply(me, WIRE_REASON_CONFLICT, h->move_id);
		return;
	}
	struct me_symbol *s = me_sym(me, si);
	if (s->me_shard != me->limits.shard) {
		me_admin_reply(me, WIRE_REASON_SYMBOL_NOT_OWNED, m->symbol);
		return;
	}
	DCHECK(h == NULL); /* an owned book is never being installed here */
	/* A halt or kill-switch is cancelling the book: the operator retries when it is done. */
	if (me_bulk_pending(me, ME_BULK_BOOK, si)) {
		me_admin_reply(me, WIRE_REASON_BACKPRESSURE, m->symbol);
		return;
	}
	/* Another move watching this book (its driver gave up after WATCH) ends: the book
	 * freezes for this one, without a journal. Its slot is free for this move then. */
	struct me_move *w = move_watching(me);
	bool drop = w != NULL && w != mv && w->symbol == si;
	if (mv == NULL && move_slot(me) == NULL && !drop) {
		me_admin_reply(me, WIRE_REASON_CAPACITY, m->symbol);
		return;
	}
	if (drop)
		watch_end(me, w);
	/* The hash and the GTD orders: kept running since this move's WATCH (no walk inside
	 * the pause), else counted by walking the book. */
	uint32_t count = s->resting;
	uint64_t hash;
	uint32_t gtd;
	if (mv != NULL) {
		CHECK(mv->phase == ME_MOVE_WATCHING);
		/* No walk here, not even under DCHECK: this is inside the pause, and e2e builds
		 * compile DCHECK in. The unit tests check running == walk after every change
		 * (fx_check_move_hashes), and IN compares it with M's, kept independently. */
		hash = mv->hash;
		gtd = mv->gtd_held;
	} else {
		uint32_t n;
		hash = me_move_hash_walk(me, si, &n, &gtd);
		CHECK(n == count);
	}
	/* Frozen orders never expire here: off the heap, their room held (me_gtd_fits). */
	me_gtd_drop_book(me, si);
	if (mv != NULL) {
		/* WATCHING → FROZEN: the journal stays this move's, complete up to here; nothing
		 * changes on a frozen book, so nothing more is journaled. */
		CHECK(me->journal_slot == slot_of(me, mv));
		mv->phase = ME_MOVE_FROZEN;
		me->watch_si = ME_NIL;
		me->moves_active++;
		CHECK(me->moves_active <= ME_MOVES_MAX);
	} else {
		mv = move_slot(me);
		CHECK(mv != NULL); /* checked above */
		move_start(me, mv, m->move_id, si, m->peer, ME_MOVE_SOURCE, ME_MOVE_FROZEN);
	}
	mv->count = count;
	mv->hash = hash;
	mv->gtd_held = gtd;
	me->gtd_held += gtd;
	me_admin_reply(me, WIRE_REASON_NONE, count);
}

/* WATCH: journal book si's changes for this move from here (me_journal.c); the book trades
 * on. Answered NONE with the entries journaled so far (0 for a new watch). */
static void
move_watch(struct me *me, const struct wire_symbol_move *m, uint32_t si)
{
	if (m->peer == me->limits.shard) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
		return;
	}
	struct me_move *mv = me_move_find(me, m->move_id, si);
	if (mv != NULL && (mv->role != ME_MOVE_SOURCE || mv->peer != m->peer)) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol); /* one id, one move */
		return;
	}
	if (mv != NULL && mv->phase == ME_MOVE_WATCHING) {
		/* A repeat: nothing changes. */
		me_admin_reply(me, WIRE_REASON_NONE, me->journal_n);
		return;
	}
	struct me_move *h = move_holding(me, si);
	if (h != NULL && h->role == ME_MOVE_SOURCE) {
		/* Frozen already, by this move (too late to watch) or by another. */
		me_admin_reply(me, WIRE_REASON_CONFLICT, h->move_id);
		return;
	}
	if (mv != NULL) {
		/* This move is over (FINISHED): its id is not started again. */
		me_admin_reply(me, WIRE_REASON_TOO_LATE, m->symbol);
		return;
	}
	if (me_sym(me, si)->me_shard != me->limits.shard) {
		me_admin_reply(me, WIRE_REASON_SYMBOL_NOT_OWNED, m->symbol);
		return;
	}
	DCHECK(h == NULL);
	/* One journal per engine: a move watching any book (its driver gave up) ends. A
	 * frozen move keeping its journal loses it to this one (it reads its whole book). */
	struct me_move *w = move_watching(me);
	if (w == NULL && move_slot(me) == NULL) {
		me_admin_reply(me, WIRE_REASON_CAPACITY, m->symbol);
		return;
	}
	if (w != NULL)
		watch_end(me, w);
	mv = move_slot(me);
	CHECK(mv != NULL); /* checked above, or the slot watch_end freed */
	move_start(me, mv, m->move_id, si, m->peer, ME_MOVE_SOURCE, ME_MOVE_WATCHING);
	me_journal_start(me, slot_of(me, mv));
	/* The running hash and GTD count start from one walk, here where the book trades
	 * (outside any pause); the hooks keep them from now to OUT. */
	mv->hash = me_move_hash_walk(me, si, NULL, &mv->gtd_held);
	me_admin_reply(me, WIRE_REASON_NONE, 0);
}

/* Refuse a step that names no move of ours: CONFLICT with the id of the move holding the
 * book here, if any. */
static void
refuse_unknown(struct me *me, uint32_t si)
{
	const struct me_move *h = move_holding(me, si);
	me_admin_reply(me, WIRE_REASON_CONFLICT, h != NULL ? h->move_id : 0);
}

static void
move_done(struct me *me, const struct wire_symbol_move *m, uint32_t si)
{
	struct me_move *mv = me_move_find(me, m->move_id, si);
	if (mv == NULL || mv->role != ME_MOVE_SOURCE || mv->phase == ME_MOVE_WATCHING) {
		/* No move of ours, or one that never froze the book. */
		refuse_unknown(me, si);
		return;
	}
	if (mv->phase == ME_MOVE_FINISHED) {
		me_admin_reply(me, WIRE_REASON_NONE, mv->count);
		return;
	}
	if (m->peer != mv->peer) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
		return;
	}
	/* The book lives on the target now (it answered IN): the frozen copy goes without an
	 * event, its orders' streams continue there. */
	book_drop(me, si);
	me_sym(me, si)->me_shard = mv->peer;
	move_end(me, mv, true);
	me_admin_reply(me, WIRE_REASON_NONE, mv->count);
}

static void
move_in(struct me *me, const struct wire_symbol_move *m, uint32_t si)
{
	struct me_move *mv = me_move_find(me, m->move_id, si);
	if (mv == NULL || mv->role != ME_MOVE_TARGET) {
		refuse_unknown(me, si);
		return;
	}
	if (mv->phase == ME_MOVE_FINISHED) {
		me_admin_reply(me, WIRE_REASON_NONE, mv->count);
		return;
	}
	if (m->peer != mv->peer ||
	    (m->status != WIRE_SYM_TRADING && m->status != WIRE_SYM_HALTED)) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
		return;
	}
	/* Not the book the source froze (a chunk lost or altered, time priority not kept):
	 * the driver aborts. The installed book's hash is kept running by chunk_install. */
	uint32_t count = me_sym(me, si)->resting;
	if (m->count != mv->count || count != mv->count || m->hash != mv->hash) {
		me_admin_reply(me, WIRE_REASON_CONFLICT, mv->count);
		return;
	}
	struct users_ctx c;
	if (!killed_users(me, si, &c) || !me_gtd_fits(me, 0)) {
		me_admin_reply(me, WIRE_REASON_CAPACITY, m->symbol);
		return;
	}
	struct me_symbol *s = me_sym(me, si);
	s->me_shard = me->limits.shard;
	s->status = m->status;
	s->killed = m->killed;
	s->trade_seq = m->trade_seq;
	s->last_px = m->last_px;
	uint32_t gtd = mv->gtd_held;
	move_end(me, mv, true);
	book_open(me, si, gtd, &c);
	me_admin_reply(me, WIRE_REASON_NONE, mv->count);
}

static void
move_abort(struct me *me, const struct wire_symbol_move *m, uint32_t si)
{
	struct me_move *mv = si != ME_NIL ? me_move_find(me, m->move_id, si) : NULL;
	if (mv == NULL) {
		/* Never started here, or aborted already. */
		me_admin_reply(me, WIRE_REASON_NONE, 0);
		return;
	}
	uint32_t count = mv->count;
	if (mv->phase == ME_MOVE_FINISHED) {
		me_admin_reply(me, WIRE_REASON_TOO_LATE, m->symbol);
		return;
	}
	if (mv->phase == ME_MOVE_WATCHING) {
		/* Never frozen: the book traded all along, only the journal goes. */
		watch_end(me, mv);
		me_admin_reply(me, WIRE_REASON_NONE, count);
		return;
	}
	if (mv->phase == ME_MOVE_INSTALLING) {
		book_drop(me, si);
		move_end(me, mv, false);
		me_admin_reply(me, WIRE_REASON_NONE, count);
		return;
	}
	struct users_ctx c;
	if (!killed_users(me, si, &c) || !me_gtd_fits(me, 0)) {
		me_admin_reply(me, WIRE_REASON_CAPACITY, m->symbol);
		return;
	}
	uint32_t gtd = mv->gtd_held;
	move_end(me, mv, false);
	book_open(me, si, gtd, &c);
	me_admin_reply(me, WIRE_REASON_NONE, count);
}

void
me_symbol_move(struct me *me, const struct wire_symbol_move *m)
{
	static const uint8_t zero[sizeof(m->reserved)];
	if (m->move_id == 0 || m->symbol == 0 || m->killed > 1 ||
	    memcmp(m->reserved, zero, sizeof(zero)) != 0) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
		return;
	}
	if (m->phase < WIRE_MOVE_OUT || m->phase > WIRE_MOVE_WATCH) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
		return;
	}
	uint32_t si = me_symbol_find(me, m->symbol);
	if (m->phase == WIRE_MOVE_ABORT) {
		move_abort(me, m, si);
		return;
	}
	if (si == ME_NIL) {
		me_admin_reply(me, WIRE_REASON_UNKNOWN_SYMBOL, m->symbol);
		return;
	}
	if (m->phase == WIRE_MOVE_OUT)
		move_out(me, m, si);
	else if (m->phase == WIRE_MOVE_WATCH)
		move_watch(me, m, si);
	else if (m->phase == WIRE_MOVE_IN)
		move_in(me, m, si);
	else
		move_done(me, m, si);
	DCHECK(me->moves_active <= ME_MOVES_MAX);
}

/* ---- BOOK_CHUNK on the target ---- */

/* One order of a chunk, as the source could have held it on this symbol's grid. */
static uint16_t
order_check(const struct me_symbol *s, const struct wire_book_order *w)
{
	static const uint8_t zero[sizeof(w->reserved)];
	if (memcmp(w->reserved, zero, sizeof(zero)) != 0 || w->op > WIRE_BOOK_REMOVE)
		return WIRE_REASON_BAD_REQUEST;
	if (w->side != WIRE_SIDE_BUY && w->side != WIRE_SIDE_SELL)
		return WIRE_REASON_BAD_REQUEST;
	/* Only limit orders rest, and only these time-in-force. */
	if (w->ord_type != WIRE_ORD_LIMIT || w->stp > WIRE_STP_EXPIRE_BOTH)
		return WIRE_REASON_BAD_REQUEST;
	if (w->tif != WIRE_TIF_GTC && w->tif != WIRE_TIF_GTD && w->tif != WIRE_TIF_POST_ONLY)
		return WIRE_REASON_BAD_REQUEST;
	if ((w->tif == WIRE_TIF_GTD) != (w->expire_ns != 0))
		return WIRE_REASON_BAD_REQUEST;
	if (w->oid.user == 0)
		return WIRE_REASON_BAD_REQUEST;
	if (w->px <= 0 || w->px % s->tick != 0)
		return WIRE_REASON_BAD_REQUEST;
	if (w->leaves <= 0 || w->leaves % s->lot != 0 || w->cum < 0)
		return WIRE_REASON_BAD_REQUEST;
	/* Its trades compute notionals that must not overflow (me_match.c trusts them). */
	int64_t qty;
	int64_t notional;
	if (__builtin_add_overflow(w->leaves, w->cum, &qty) ||
	    me_notional(w->px, qty, s->base_unit, &notional) != 0)
		return WIRE_REASON_BAD_REQUEST;
	return WIRE_REASON_NONE;
}

static void
chunk_order(const struct wire_book_chunk *m, uint32_t k, struct wire_book_order *w)
{
	DCHECK(k < m->count);
	/* The tail follows the fixed part; copied out, as it need not be 8-byte aligned. */
	memcpy(w, (const uint8_t *)(m + 1) + (size_t)k * sizeof(*w), sizeof(*w));
}

/* The installed order an UPDATE or REMOVE names: live on book si, same side and price. */
static uint32_t
installed(struct me *me, uint32_t si, const struct wire_book_order *w)
{
	uint32_t oi = me_order_find(me, w->oid);
	if (oi == ME_NIL)
		return ME_NIL;
	const struct me_order *o = me_ord(me, oi);
	if (o->state != ME_ST_LIVE || o->level == ME_NIL || me_lvl(me, o->level)->symbol != si ||
	    o->side != w->side || o->px != w->px)
		return ME_NIL;
	return oi;
}

/* Every order of the chunk valid: an ADD new here, an UPDATE or REMOVE naming an installed
 * order of this book, no order twice; and room for all of it: records, levels (per side
 * too), users, streams, GTD entries (counted as if nothing were removed). Nothing is
 * changed: a chunk applies whole or not at all. The order of the book is not checked here:
 * IN hashes the whole book in export order against the source's. */
static uint16_t
chunk_check(struct me *me, uint32_t si, const struct wire_book_chunk *m)
{
	const struct me_symbol *s = me_sym(me, si);
	uint32_t new_levels[2] = {0, 0};
	uint32_t new_users = 0;
	uint32_t new_streams = 0;
	uint32_t adds = 0;
	uint32_t gtd = 0;
	for (uint32_t k = 0; k < m->count; k++) {
		struct wire_book_order w;
		chunk_order(m, k, &w);
		uint16_t r = order_check(s, &w);
		if (r != WIRE_REASON_NONE)
			return r;
		bool is_add = w.op == WIRE_BOOK_ADD;
		if (is_add ? me_order_find(me, w.oid) != ME_NIL : installed(me, si, &w) == ME_NIL)
			return WIRE_REASON_BAD_REQUEST;
		bool new_user = is_add && me_user_find(me, w.oid.user) == NULL;
		bool new_stream = w.op != WIRE_BOOK_REMOVE && me_stream_find(me, w.stream) == ME_NIL;
		uint32_t side = me_side_ix(w.side), pos;
		bool new_level = is_add && me_book_find(me, si, side, w.px, &pos) == ME_NIL;
		for (uint32_t j = 0; j < k; j++) {
			struct wire_book_order p;
			chunk_order(m, j, &p);
			if (wire_oid_eq(p.oid, w.oid))
				return WIRE_REASON_BAD_REQUEST;
			if (p.op == WIRE_BOOK_ADD && p.oid.user == w.oid.user)
				new_user = false;
			if (p.op != WIRE_BOOK_REMOVE && p.stream == w.stream)
				new_stream = false;
			if (p.op == WIRE_BOOK_ADD && p.side == w.side && p.px == w.px)
				new_level = false;
		}
		new_users += new_user;
		new_streams += new_stream;
		new_levels[side] += new_level;
		adds += is_add;
		gtd += is_add && w.tif == WIRE_TIF_GTD;
	}
	const struct me_limits *l = &me->limits;
	/* Two records stay free, as for a submit (me_match.c records_room). */
	if ((uint64_t)me->records_used + adds + 2 > l->orders_max)
		return WIRE_REASON_CAPACITY;
	if ((uint64_t)me->levels_used + new_levels[0] + new_levels[1] > l->levels_max)
		return WIRE_REASON_CAPACITY;
	if ((uint64_t)s->side_count[0] + new_levels[0] > l->levels_side_max ||
	    (uint64_t)s->side_count[1] + new_levels[1] > l->levels_side_max)
		return WIRE_REASON_CAPACITY;
	if ((uint64_t)me->users_used + new_users > l->users_max)
		return WIRE_REASON_CAPACITY;
	if ((uint64_t)me->streams_used + new_streams > l->streams_max)
		return WIRE_REASON_CAPACITY;
	if (!me_gtd_fits(me, gtd))
		return WIRE_REASON_CAPACITY;
	return WIRE_REASON_NONE;
}

/* Install a checked chunk, inert: ADDs become live records, indexed, at the tail of their
 * levels and on their users' lists, but not on the GTD heap (their room is held) and not
 * owned; UPDATEs set an installed order's leaves, cum and stream; REMOVEs drop one. */
static void
chunk_install(struct me *me, struct me_move *mv, uint32_t si, const struct wire_book_chunk *m)
{
	/* Not a book this engine watches (WATCH needs an owned symbol): its UPDATEs below are
	 * no change to journal. */
	DCHECK(si != me->watch_si);
	for (uint32_t k = 0; k < m->count; k++) {
		struct wire_book_order w;
		chunk_order(m, k, &w);
		if (w.op == WIRE_BOOK_REMOVE) {
			uint32_t oi = installed(me, si, &w);
			CHECK(oi != ME_NIL); /* chunk_check found it */
			if (me_ord(me, oi)->tif == WIRE_TIF_GTD) {
				CHECK(mv->gtd_held > 0);
				CHECK(me->gtd_held > 0);
				mv->gtd_held--;
				me->gtd_held--;
			}
			me_move_hash_leave(me, &mv->hash, oi); /* linked still */
			me_book_remove(me, si, oi);
			me_user_unlink(me, oi);
			me_order_release(me, oi);
			continue;
		}
		uint32_t st = me_stream_get(me, w.stream);
		CHECK(st != ME_NIL); /* chunk_check counted the streams */
		if (w.op == WIRE_BOOK_UPDATE) {
			uint32_t oi = installed(me, si, &w);
			CHECK(oi != ME_NIL);
			me_move_hash_change(me, &mv->hash, oi, w.leaves, w.cum, (uint16_t)st);
			struct me_order *o = me_ord(me, oi);
			struct me_level *l = me_lvl(me, o->level);
			l->qty += w.leaves - o->leaves;
			o->leaves = w.leaves;
			o->cum = w.cum;
			o->stream = (uint16_t)st;
			DCHECK(l->qty > 0);
			continue;
		}
		uint32_t oi = me_order_alloc(me, w.oid);
		CHECK(oi != ME_NIL); /* and the records */
		struct me_order *o = me_ord(me, oi);
		o->fp = w.fp;
		o->kind = ME_KIND_SUBMIT;
		o->symbol = m->symbol;
		o->side = w.side;
		o->ord_type = w.ord_type;
		o->tif = w.tif;
		o->stp = w.stp;
		o->px = w.px;
		o->leaves = w.leaves;
		o->cum = w.cum;
		o->expire_ns = w.expire_ns;
		o->stream = (uint16_t)st;
		o->last_seq = 0; /* no event about it in this engine's streams yet */
		me_book_rest(me, si, oi);
		me_move_hash_rest(me, &mv->hash, oi); /* at the tail now */
		me_user_link(me, oi);
		if (w.tif == WIRE_TIF_GTD) {
			mv->gtd_held++;
			me->gtd_held++;
		}
	}
	mv->next_chunk++;
	mv->count = me_sym(me, si)->resting;
}

/* Chunk 0 opens the install: value is the id of a move in the way (CONFLICT), else 0. */
static uint16_t
open_check(struct me *me, const struct wire_book_chunk *m, uint32_t si, uint64_t *value)
{
	*value = 0;
	if (si == ME_NIL)
		return WIRE_REASON_UNKNOWN_SYMBOL; /* SYMBOL_CONFIG reaches every ME shard first */
	if (m->source == me->limits.shard)
		return WIRE_REASON_BAD_REQUEST;
	const struct me_move *h = move_holding(me, si);
	if (h != NULL) {
		*value = h->move_id;
		return WIRE_REASON_CONFLICT;
	}
	const struct me_symbol *s = me_sym(me, si);
	if (s->me_shard == me->limits.shard || s->resting != 0)
		return WIRE_REASON_BAD_REQUEST;
	if (me_bulk_pending(me, ME_BULK_BOOK, si))
		return WIRE_REASON_BACKPRESSURE;
	if (move_slot(me) == NULL)
		return WIRE_REASON_CAPACITY;
	return WIRE_REASON_NONE;
}

/*
 * Answers (ADMIN_REPLY value): NONE with the seq taken next, for the chunk taken and for a
 * repeat of one taken before; a gap is refused BAD_REQUEST with the seq taken next (lower
 * than the chunk's), so the driver resends from there; any other refusal carries a value
 * at or above the chunk's seq (or the id of a move in the way, CONFLICT on chunk 0).
 */
void
me_book_chunk(struct me *me, const struct wire_book_chunk *m)
{
	if (m->reserved != 0 || m->move_id == 0 || m->count > CHUNK_ORDERS_MAX ||
	    m->tail_len != m->count * sizeof(struct wire_book_order) ||
	    m->hdr.length != sizeof(*m) + m->tail_len) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->seq);
		return;
	}
	uint32_t si = me_symbol_find(me, m->symbol);
	struct me_move *mv = si != ME_NIL ? me_move_find(me, m->move_id, si) : NULL;
	if (mv != NULL && mv->role != ME_MOVE_TARGET) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->seq); /* we are its source */
		return;
	}
	if (mv == NULL) {
		if (m->seq != 0) {
			/* Nothing installed for this move: a gap from chunk 0. */
			me_admin_reply(me, WIRE_REASON_BAD_REQUEST, 0);
			return;
		}
		uint64_t value;
		uint16_t r = open_check(me, m, si, &value);
		if (r != WIRE_REASON_NONE) {
			me_admin_reply(me, r, value);
			return;
		}
	} else if (mv->phase == ME_MOVE_FINISHED || m->seq < mv->next_chunk) {
		me_admin_reply(me, WIRE_REASON_NONE, mv->next_chunk); /* a repeat */
		return;
	} else if (m->seq > mv->next_chunk) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, mv->next_chunk); /* a gap */
		return;
	}
	uint16_t r = chunk_check(me, si, m);
	if (r != WIRE_REASON_NONE) {
		me_admin_reply(me, r, m->seq);
		return;
	}
	if (mv == NULL) {
		mv = move_slot(me);
		CHECK(mv != NULL); /* open_check found one */
		move_start(me, mv, m->move_id, si, m->source, ME_MOVE_TARGET, ME_MOVE_INSTALLING);
		DCHECK(mv->hash == 0); /* the hash of the empty book; chunk_install keeps it */
	}
	DCHECK(m->seq == mv->next_chunk);
	chunk_install(me, mv, si, m);
	me_admin_reply(me, WIRE_REASON_NONE, mv->next_chunk);
}

/* ---- read-only views ---- */

static bool
ready_visit(struct me *me, uint32_t oi, void *ctx)
{
	const struct me_order *o = me_ord(me, oi);
	if (me_stream_at(me, o->stream)->acked >= o->last_seq)
		return true;
	*(bool *)ctx = false;
	return false;
}

static const struct me_move *
newest_move(const struct me *me, uint32_t si)
{
	const struct me_move *mv = NULL;
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++) {
		const struct me_move *c = &me->moves[i];
		if (c->move_id != 0 && c->symbol == si && (mv == NULL || c->created > mv->created))
			mv = c;
	}
	return mv;
}

int
me_move_ready(const struct me *cme, uint32_t symbol)
{
	CHECK(cme != NULL);
	struct me *me = (struct me *)(uintptr_t)cme; /* read only, as me_move_info */
	uint32_t si = me_symbol_find(me, symbol);
	if (si == ME_NIL)
		return -ENOENT;
	const struct me_move *mv = newest_move(me, si);
	if (mv == NULL || mv->role != ME_MOVE_SOURCE || mv->phase != ME_MOVE_FROZEN)
		return -ENOENT;
	bool ready = true;
	book_walk(me, si, ready_visit, &ready);
	return ready ? 1 : 0;
}

int
me_move_info(const struct me *cme, uint32_t symbol, struct me_move_info *out)
{
	CHECK(cme != NULL);
	CHECK(out != NULL);
	/* The accessors take a non-const engine; this view only reads it. */
	struct me *me = (struct me *)(uintptr_t)cme;
	uint32_t si = me_symbol_find(me, symbol);
	if (si == ME_NIL)
		return -ENOENT;
	const struct me_move *mv = newest_move(me, si);
	if (mv == NULL)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	out->move_id = mv->move_id;
	out->hash = mv->hash;
	out->count = mv->count;
	out->next_chunk = mv->next_chunk;
	out->peer = mv->peer;
	out->role = mv->role;
	out->phase = mv->phase;
	if (me->journal_slot == slot_of(me, mv)) {
		out->journal = me->journal_n;
		out->journal_ok = me->journal_overflow == 0;
	}
	if (mv->role == ME_MOVE_SOURCE && mv->phase == ME_MOVE_FROZEN) {
		/* What an OMS shard must hold before the target opens: every event this engine
		 * sent it so far (the frozen orders' are among them; nothing emits one about a
		 * frozen order). A few streams, not the book: no walk in the pause. */
		for (uint32_t st = 0; st < me->streams_used; st++) {
			const struct me_stream *s = me_stream_at(me, st);
			if (s->acked + 1 >= s->next_seq)
				continue;
			if (out->need_n == ME_MOVE_NEED_MAX) {
				out->need_over = 1;
				break;
			}
			out->need_shard[out->need_n] = s->shard;
			out->need_seq[out->need_n] = s->next_seq - 1;
			out->need_n++;
		}
		out->ready = out->need_n == 0 && out->need_over == 0;
	}
	DCHECK(out->move_id != 0);
	return 0;
}

struct export_ctx {
	struct wire_book_order *out;
	uint32_t from;    /* orders to skip */
	uint32_t n;       /* room in out */
	uint32_t seen;
	uint32_t written;
};

static bool
export_visit(struct me *me, uint32_t oi, void *ctx)
{
	struct export_ctx *c = ctx;
	if (c->seen++ < c->from)
		return true;
	me_move_order_export(me, oi, &c->out[c->written++]);
	return c->written < c->n;
}

int
me_move_export(const struct me *cme, uint32_t symbol, uint64_t move_id, uint32_t from,
	       struct wire_book_order *out, uint32_t n)
{
	CHECK(cme != NULL);
	CHECK(out != NULL || n == 0);
	struct me *me = (struct me *)(uintptr_t)cme;
	uint32_t si = me_symbol_find(me, symbol);
	if (si == ME_NIL)
		return -ENOENT;
	const struct me_move *mv = move_id != 0 ? me_move_find(me, move_id, si) : NULL;
	if (move_id != 0 &&
	    (mv == NULL || mv->role != ME_MOVE_SOURCE || mv->phase != ME_MOVE_FROZEN))
		return -ENOENT;
	/* move_id 0: the book as it is (a copy made while it trades). */
	uint32_t count = mv != NULL ? mv->count : me_sym(me, si)->resting;
	if (n == 0 || from >= count)
		return 0;
	struct export_ctx c = {.out = out, .from = from, .n = n, .seen = 0, .written = 0};
	book_walk(me, si, export_visit, &c);
	CHECK(c.written <= n);
	return (int)c.written;
}

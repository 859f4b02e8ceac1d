/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me storage: the region layout and init, the order-record slab and its oid index, the
 * symbol and user tables, and the GTD expiry heap. The bottom of the engine: it emits no
 * event and matches nothing, so matching, streams and admin all build on it and it calls
 * none of them.
 *
 * Hash tables are open addressing with linear probing and backward-shift deletion (no
 * tombstones), sized to a power of two at least twice their capacity, so a probe is short
 * and a delete leaves the table as if the key had never been inserted: table contents depend
 * only on the set of keys and their insertion order, which the log fixes.
 */
#include <errno.h>
#include <string.h>

#include "me/me_int.h"

/* ---- region layout and init ---- */

static uint32_t
pow2_at_least(uint64_t n)
{
	uint64_t p = 1;
	while (p < n)
		p <<= 1;
	return (uint32_t)p;
}

static uint64_t
align64(uint64_t n)
{
	return (n + 63) & ~UINT64_C(63);
}

static bool
limits_valid(const struct me_limits *l)
{
	if (l == NULL)
		return false;
	if (l->streams_max == 0 || l->symbols_max == 0 || l->orders_max == 0)
		return false;
	if (l->users_max == 0 || l->levels_max == 0 || l->levels_side_max == 0)
		return false;
	if (l->gtd_max == 0 || l->events_max < 16)
		return false;
	if ((l->events_max & (l->events_max - 1)) != 0)
		return false;
	/* A stream must keep room for the largest burst one request may produce. */
	if (l->events_reserve < 2 * ME_EV_MATCH_ROOM || l->events_reserve >= l->events_max)
		return false;
	/* Indices are 32-bit with ME_NIL reserved; hash tables at 2x must fit 32 bits. */
	if (l->orders_max >= (1u << 30) || l->users_max >= (1u << 30))
		return false;
	if (l->levels_max >= (1u << 30) || l->symbols_max >= (1u << 20))
		return false;
	if ((uint64_t)l->symbols_max * 2 * l->levels_side_max >= (UINT64_C(1) << 32))
		return false;
	return true;
}

/* Compute the layout into `me` (offsets and masks). Returns the footprint. */
static uint64_t
layout(struct me *me, const struct me_limits *l)
{
	uint64_t off = align64(sizeof(struct me));
	uint32_t index_size = pow2_at_least((uint64_t)l->orders_max * 2);
	uint32_t user_slots = pow2_at_least((uint64_t)l->users_max * 2);
	uint32_t sym_slots = pow2_at_least((uint64_t)l->symbols_max * 2);

	me->off_orders = off;
	off = align64(off + (uint64_t)l->orders_max * sizeof(struct me_order));
	me->off_index = off;
	off = align64(off + (uint64_t)index_size * sizeof(struct me_slot));
	me->off_users = off;
	off = align64(off + (uint64_t)user_slots * sizeof(struct me_user));
	me->off_levels = off;
	off = align64(off + (uint64_t)l->levels_max * sizeof(struct me_level));
	me->off_lrefs = off;
	off = align64(off + (uint64_t)l->symbols_max * 2 * l->levels_side_max *
				    sizeof(struct me_lref));
	me->off_gtd = off;
	off = align64(off + (uint64_t)l->gtd_max * sizeof(struct me_gtd));
	me->off_symbols = off;
	off = align64(off + (uint64_t)l->symbols_max * sizeof(struct me_symbol));
	me->off_symidx = off;
	off = align64(off + (uint64_t)sym_slots * sizeof(uint32_t));
	me->off_streams = off;
	off = align64(off + (uint64_t)l->streams_max * sizeof(struct me_stream));
	me->off_stream_map = off;
	off = align64(off + ME_STREAM_MAP_SIZE * sizeof(uint16_t));
	me->off_events = off;
	off = align64(off + (uint64_t)l->streams_max * l->events_max *
				    sizeof(struct wire_me_event));
	me->off_journal = off;
	off = align64(off + ME_JOURNAL_MAX * sizeof(struct wire_oid));
	me->index_mask = index_size - 1;
	me->user_mask = user_slots - 1;
	me->sym_mask = sym_slots - 1;
	me->events_mask = l->events_max - 1;
	return off;
}

size_t
me_footprint(const struct me_limits *limits)
{
	struct me tmp;
	if (!limits_valid(limits))
		return 0;
	return (size_t)layout(&tmp, limits);
}

size_t
me_bytes_per_order(const struct me_limits *limits)
{
	struct me tmp;
	if (!limits_valid(limits))
		return 0;
	layout(&tmp, limits);
	/* Everything from the record pool up to (not including) the symbol table: records, oid
	 * index, users, levels, sorted level arrays, GTD heap. Streams are per OMS shard, not
	 * per order, and are reported separately. */
	return (size_t)((tmp.off_symbols - tmp.off_orders + limits->orders_max - 1) /
			limits->orders_max);
}

int
me_init(struct me **out, void *memory, const struct me_limits *limits)
{
	if (out == NULL || memory == NULL || !limits_valid(limits))
		return -EINVAL;
	if (((uintptr_t)memory & 63) != 0)
		return -EINVAL;
	struct me *me = memory;
	memset(me, 0, sizeof(*me));
	uint64_t fp = layout(me, limits);
	memset((uint8_t *)me + sizeof(*me), 0, (size_t)(fp - sizeof(*me)));
	me->magic = ME_MAGIC;
	me->footprint = fp;
	me->limits = *limits;
	me_rt_bind(me);

	struct me_order *o = me_orders(me);
	for (uint32_t i = 0; i < limits->orders_max; i++) {
		o[i].next = i + 1 < limits->orders_max ? i + 1 : ME_NIL;
		o[i].prev = ME_NIL;
		o[i].level = ME_NIL;
	}
	me->order_free = 0;
	struct me_level *lv = ME_ARR(me, off_levels, struct me_level);
	for (uint32_t i = 0; i < limits->levels_max; i++)
		lv[i].count = i + 1 < limits->levels_max ? i + 1 : ME_NIL;
	me->level_free = 0;
	me->watch_si = ME_NIL;
	me->journal_slot = ME_NIL;
	*out = me;
	CHECK(me->footprint == me_footprint(limits));
	return 0;
}

/* ---- order records and the oid index ---- */

uint32_t
me_order_alloc(struct me *me, struct wire_oid oid)
{
	return me_order_alloc_tag(me, oid, me_oid_tag(oid));
}

uint32_t
me_order_alloc_tag(struct me *me, struct wire_oid oid, uint32_t tag)
{
	DCHECK(tag == me_oid_tag(oid));
	uint32_t oi = me->order_free;
	if (oi == ME_NIL)
		return ME_NIL;
	struct me_order *o = me_ord(me, oi);
	DCHECK(o->state == ME_ST_FREE);
	me->order_free = o->next;
	if (oi >= me->orders_hwm)
		me->orders_hwm = oi + 1; /* the free list hands out fresh slots in index order */
	memset(o, 0, sizeof(*o));
	o->oid = oid;
	o->prev = o->next = o->uprev = o->unext = o->level = ME_NIL;
	o->state = ME_ST_ACTIVE;
	me->records_used++;

	struct me_slot *ix = ME_ARR(me, off_index, struct me_slot);
	uint32_t mask = me->index_mask;
	uint32_t h = tag & mask;
	while (ix[h].order != 0)
		h = (h + 1) & mask;
	ix[h].order = oi + 1;
	ix[h].tag = tag;
	DCHECK(me->records_used <= me->limits.orders_max);
	return oi;
}

void
me_order_release(struct me *me, uint32_t oi)
{
	DCHECK(oi < me->limits.orders_max);
	DCHECK(me_ord(me, oi)->state != ME_ST_FREE);
	struct me_slot *ix = ME_ARR(me, off_index, struct me_slot);
	struct me_order *o = me_orders(me);
	uint32_t mask = me->index_mask;
	uint32_t i = (uint32_t)me_oid_hash(o[oi].oid) & mask;
	while (ix[i].order != oi + 1) {
		CHECK(ix[i].order != 0); /* a record being released is always indexed */
		i = (i + 1) & mask;
	}
	/* Backward-shift deletion (Knuth 6.4 Algorithm R). */
	for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
		if (ix[j].order == 0)
			break;
		uint32_t home = ix[j].tag & mask;
		/* Move j into the hole at i unless its home lies cyclically in (i, j]. */
		bool in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!in_range) {
			ix[i] = ix[j];
			i = j;
		}
	}
	ix[i].order = 0;
	ix[i].tag = 0;
	struct me_order *r = &o[oi];
	r->state = ME_ST_FREE;
	r->next = me->order_free;
	me->order_free = oi;
	CHECK(me->records_used > 0);
	me->records_used--;
}

/* ---- symbols ---- */

uint32_t
me_symbol_add(struct me *me, uint32_t symbol)
{
	DCHECK(me_symbol_find(me, symbol) == ME_NIL);
	if (me->symbols_used >= me->limits.symbols_max)
		return ME_NIL;
	uint32_t si = me->symbols_used++;
	uint32_t *ix = ME_ARR(me, off_symidx, uint32_t);
	uint32_t mask = me->sym_mask;
	uint32_t h = (uint32_t)me_mix64(symbol) & mask;
	while (ix[h] != 0)
		h = (h + 1) & mask;
	ix[h] = si + 1;
	me_sym(me, si)->symbol = symbol;
	DCHECK(me_symbol_find(me, symbol) == si);
	return si;
}

/* ---- users ---- */

static struct me_user *
users(struct me *me)
{
	return ME_ARR(me, off_users, struct me_user);
}

struct me_user *
me_user_get(struct me *me, uint64_t user)
{
	struct me_user *f = me_user_find(me, user);
	if (f != NULL)
		return f;
	if (me->users_used >= me->limits.users_max)
		return NULL;
	struct me_user *u = users(me);
	uint32_t mask = me->user_mask;
	uint32_t h = (uint32_t)me_mix64(user) & mask;
	while ((u[h].count & ME_USER_USED) != 0)
		h = (h + 1) & mask;
	u[h].user = user;
	u[h].head = ME_NIL;
	u[h].count = ME_USER_USED;
	me->users_used++;
	DCHECK(me->users_used <= me->limits.users_max);
	return &u[h];
}

/* Drop a user slot that has no live orders and no kill-switch (backward-shift deletion). */
void
me_user_put(struct me *me, struct me_user *e)
{
	DCHECK((e->count & ME_USER_USED) != 0);
	if ((e->count & ~ME_USER_USED) != 0)
		return;
	struct me_user *u = users(me);
	uint32_t mask = me->user_mask;
	uint32_t i = (uint32_t)(e - u);
	for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
		if ((u[j].count & ME_USER_USED) == 0)
			break;
		uint32_t home = (uint32_t)me_mix64(u[j].user) & mask;
		bool in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!in_range) {
			u[i] = u[j];
			i = j;
		}
	}
	memset(&u[i], 0, sizeof(u[i]));
	CHECK(me->users_used > 0);
	me->users_used--;
}

void
me_user_link(struct me *me, uint32_t oi)
{
	struct me_order *o = me_ord(me, oi);
	struct me_user *u = me_user_get(me, o->oid.user);
	CHECK(u != NULL); /* the caller reserved a slot (submit checks capacity first) */
	if ((u->count & ME_USER_COUNT) == 0) {
		u->head = oi;
		o->uprev = o->unext = oi;
	} else {
		struct me_order *h = me_ord(me, u->head);
		uint32_t ti = h->uprev;
		o->uprev = ti;
		o->unext = u->head;
		me_ord(me, ti)->unext = oi;
		h->uprev = oi;
	}
	u->count++;
}

void
me_user_unlink(struct me *me, uint32_t oi)
{
	struct me_order *o = me_ord(me, oi);
	struct me_user *u = me_user_find(me, o->oid.user);
	CHECK(u != NULL);
	CHECK((u->count & ME_USER_COUNT) > 0);
	if (o->unext == oi) {
		u->head = ME_NIL;
	} else {
		me_ord(me, o->uprev)->unext = o->unext;
		me_ord(me, o->unext)->uprev = o->uprev;
		if (u->head == oi)
			u->head = o->unext;
	}
	o->uprev = o->unext = ME_NIL;
	u->count--;
	me_user_put(me, u);
}

/* ---- GTD expiry heap (min-heap on expire_ns, then order index: a total order) ---- */

static bool
gtd_less(const struct me_gtd *a, const struct me_gtd *b)
{
	return a->expire_ns < b->expire_ns || (a->expire_ns == b->expire_ns && a->order < b->order);
}

static void
gtd_sift_up(struct me_gtd *g, uint32_t i)
{
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (!gtd_less(&g[i], &g[p]))
			break;
		struct me_gtd t = g[i];
		g[i] = g[p];
		g[p] = t;
		i = p;
	}
}

static void
gtd_sift_down(struct me_gtd *g, uint32_t n, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && gtd_less(&g[l], &g[m]))
			m = l;
		if (r < n && gtd_less(&g[r], &g[m]))
			m = r;
		if (m == i)
			return;
		struct me_gtd t = g[i];
		g[i] = g[m];
		g[m] = t;
		i = m;
	}
}

/* An entry is stale once its order left the book or was replaced by another GTD order. */
static bool
gtd_valid(struct me *me, const struct me_gtd *e)
{
	const struct me_order *o = me_ord(me, e->order);
	return o->state == ME_ST_LIVE && o->tif == WIRE_TIF_GTD && o->expire_ns == e->expire_ns;
}

/* Keep only the entries keep() accepts, then rebuild the heap (bounded by the heap). */
static void
gtd_filter(struct me *me, bool (*keep)(struct me *, const struct me_gtd *, uint32_t),
	   uint32_t arg)
{
	struct me_gtd *g = ME_ARR(me, off_gtd, struct me_gtd);
	uint32_t n = 0;
	for (uint32_t i = 0; i < me->gtd_count; i++)
		if (keep(me, &g[i], arg))
			g[n++] = g[i];
	for (uint32_t i = n; i < me->gtd_count; i++)
		memset(&g[i], 0, sizeof(g[i]));
	me->gtd_count = n;
	for (uint32_t i = n / 2; i-- > 0;)
		gtd_sift_down(g, n, i);
	DCHECK(me->gtd_count <= me->limits.gtd_max);
}

static bool
keep_valid(struct me *me, const struct me_gtd *e, uint32_t arg)
{
	(void)arg;
	return gtd_valid(me, e);
}

/* Room is owed to the GTD orders of books a move holds (me->gtd_held): their entries are
 * pushed when the move ends, and nothing else may take that room meanwhile. */
bool
me_gtd_fits(struct me *me, uint32_t n)
{
	uint64_t max = me->limits.gtd_max;
	if ((uint64_t)me->gtd_count + me->gtd_held + n <= max)
		return true;
	/* Full but for stale entries, which a push compacts away: count the valid ones. */
	const struct me_gtd *g = ME_ARR(me, off_gtd, struct me_gtd);
	uint64_t valid = 0;
	for (uint32_t i = 0; i < me->gtd_count; i++)
		valid += gtd_valid(me, &g[i]);
	return valid + me->gtd_held + n <= max;
}

bool
me_gtd_push(struct me *me, uint32_t oi)
{
	struct me_gtd *g = ME_ARR(me, off_gtd, struct me_gtd);
	if ((uint64_t)me->gtd_count + me->gtd_held >= me->limits.gtd_max) {
		/* Full: drop stale entries (bounded, rare), then rebuild the heap. */
		gtd_filter(me, keep_valid, 0);
		if ((uint64_t)me->gtd_count + me->gtd_held >= me->limits.gtd_max)
			return false;
	}
	uint32_t i = me->gtd_count++;
	g[i].expire_ns = me_ord(me, oi)->expire_ns;
	g[i].order = oi;
	g[i].reserved = 0;
	gtd_sift_up(g, i);
	DCHECK(me->gtd_count <= me->limits.gtd_max);
	return true;
}

static bool
keep_other_books(struct me *me, const struct me_gtd *e, uint32_t si)
{
	const struct me_order *o = me_ord(me, e->order);
	return o->state != ME_ST_LIVE || me_lvl(me, o->level)->symbol != si;
}

void
me_gtd_drop_book(struct me *me, uint32_t si)
{
	DCHECK(si < me->symbols_used);
	gtd_filter(me, keep_other_books, si);
}

/* Take the top entry off the heap. */
static struct me_gtd
gtd_pop_top(struct me *me)
{
	struct me_gtd *g = ME_ARR(me, off_gtd, struct me_gtd);
	CHECK(me->gtd_count > 0);
	struct me_gtd top = g[0];
	uint32_t n = --me->gtd_count;
	g[0] = g[n];
	memset(&g[n], 0, sizeof(g[n]));
	if (n > 0)
		gtd_sift_down(g, n, 0);
	return top;
}

/* The next GTD order due at now_ns, left on the heap, or ME_NIL when none is due. Stale
 * entries met on the way are dropped. Bounded by the entries that are due. */
uint32_t
me_gtd_peek_due(struct me *me)
{
	const struct me_gtd *g = ME_ARR(me, off_gtd, struct me_gtd);
	while (me->gtd_count > 0 && g[0].expire_ns <= me->now_ns) {
		if (gtd_valid(me, &g[0])) {
			DCHECK(g[0].order < me->limits.orders_max);
			return g[0].order;
		}
		gtd_pop_top(me);
	}
	return ME_NIL;
}

/* The next GTD order due at now_ns, taken off the heap, or ME_NIL when none is due. */
uint32_t
me_gtd_pop_due(struct me *me)
{
	uint32_t oi = me_gtd_peek_due(me);
	if (oi != ME_NIL) {
		struct me_gtd top = gtd_pop_top(me);
		CHECK(top.order == oi);
	}
	return oi;
}

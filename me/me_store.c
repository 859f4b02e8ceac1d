/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me storage: the region layout and init, the order-record slab and its oid index, the
 * symbol and user tables, and the GTD expiry heap. The bottom of the engine: it emits no
 * event and matches nothing, so matching, streams and admin all build on it and it calls
 * none of them.
 *
 * The oid index and the user table are chained hash tables under linear hashing (struct
 * me_lhash in me_int.h): the buckets in use follow the number of entries, one split per
 * insert and at most two merges per removal, so a small book's lookups stay within a few
 * cache lines' worth of buckets whatever the capacity, and no insert or removal does more
 * than walk a chain or two. Their entries are slab slots (records, users) handed out LIFO
 * from a free list, the most recently freed — the hottest — first. The symbol index is
 * open addressing (symbols are never removed). Every table's contents are a function of the
 * sequence of inserts and removals, which the log fixes.
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

void
me_lhash_derive(struct me_lhash *lh)
{
	lh->mask = 2 * lh->low - 1;
	lh->shrink_below = lh->buckets > lh->min ? (lh->buckets + 3) / 4 : 0;
}

/* A chained table with max buckets, holding nothing: its minimum in use. */
static struct me_lhash
lhash_empty(uint32_t max)
{
	uint32_t min = max < ME_LH_BUCKETS_MIN ? max : ME_LH_BUCKETS_MIN;
	struct me_lhash lh = {.low = min, .buckets = min, .max = max, .min = min};
	me_lhash_derive(&lh);
	return lh;
}

/* Compute the layout into `me` (offsets, masks, empty tables). Returns the footprint. */
static uint64_t
layout(struct me *me, const struct me_limits *l)
{
	uint64_t off = align64(sizeof(struct me));
	uint32_t index_buckets = pow2_at_least(l->orders_max);
	uint32_t user_buckets = pow2_at_least(l->users_max);
	uint32_t sym_slots = pow2_at_least((uint64_t)l->symbols_max * 2);

	me->off_orders = off;
	off = align64(off + (uint64_t)l->orders_max * sizeof(struct me_order));
	me->off_links = off;
	off = align64(off + (uint64_t)l->orders_max * sizeof(struct me_link));
	me->off_index = off;
	off = align64(off + (uint64_t)index_buckets * sizeof(uint32_t));
	me->off_users = off;
	off = align64(off + (uint64_t)l->users_max * sizeof(struct me_user));
	me->off_user_heads = off;
	off = align64(off + (uint64_t)user_buckets * sizeof(uint32_t));
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
	me->oid_lh = lhash_empty(index_buckets);
	me->user_lh = lhash_empty(user_buckets);
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
	/* Everything from the record pool up to (not including) the symbol table: records and
	 * their oid index links, the index's buckets, the user slab and its buckets, levels,
	 * sorted level arrays, GTD heap. Streams are per OMS shard, not
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

/* ---- chained tables (linear hashing) ---- */

/* The link of entry i of a slab whose links are stride bytes apart from base. */
static inline struct me_link *
lh_link(uint8_t *base, size_t stride, uint32_t i)
{
	return (struct me_link *)(void *)(base + (size_t)i * stride);
}

/* Split the next bucket of the round (buckets - low) into itself and its buddy + low: the
 * entries whose hash has the bit `low` move, in chain order (both chains keep their relative
 * order). Out of line, like lh_shrink_slow: inlined, they cost the insert and removal paths
 * that do not need them a stack frame. */
__attribute__((noinline)) static void
lh_split(struct me_lhash *lh, uint32_t *heads, uint8_t *base, size_t stride)
{
	uint32_t low = lh->low, hi = lh->buckets, lo = hi - low;
	CHECK(hi < lh->max);
	DCHECK(heads[hi] == 0);
	uint32_t *keep = &heads[lo], *move = &heads[hi];
	for (uint32_t v = heads[lo]; v != 0;) {
		struct me_link *l = lh_link(base, stride, v - 1);
		uint32_t next = l->next;
		if ((l->hash & low) != 0) {
			*move = v;
			move = &l->next;
		} else {
			*keep = v;
			keep = &l->next;
		}
		v = next;
	}
	*keep = 0;
	*move = 0;
	if (++lh->buckets == 2 * low)
		lh->low = 2 * low; /* a new round */
	me_lhash_derive(lh);
	DCHECK(lh->buckets <= lh->max);
}

/* Undo the last split: the last bucket's chain goes to the tail of its buddy's. */
static void
lh_merge(struct me_lhash *lh, uint32_t *heads, uint8_t *base, size_t stride)
{
	CHECK(lh->buckets > lh->min);
	if (lh->buckets == lh->low)
		lh->low /= 2; /* back into the previous round, every bucket split */
	uint32_t hi = --lh->buckets, lo = hi - lh->low;
	uint32_t *tail = &heads[lo];
	while (*tail != 0)
		tail = &lh_link(base, stride, *tail - 1)->next;
	*tail = heads[hi];
	heads[hi] = 0;
	me_lhash_derive(lh);
	DCHECK(lh->low >= lh->min);
}

/* Put entry i (hash h) at the head of its chain, bucket b = me_lh_bucket(lh, h); count: the
 * table's entries, i included. Keeps the load at most one entry per bucket by one split (the
 * table's capacity is at most max, so there is always a bucket left to split when it is
 * over). */
static inline void
lh_insert(struct me_lhash *lh, uint32_t *heads, uint8_t *base, size_t stride, uint32_t i,
	  uint32_t h, uint32_t b, uint32_t count)
{
	struct me_link *l = lh_link(base, stride, i);
	DCHECK(b == me_lh_bucket(lh, h));
	l->hash = h;
	l->next = heads[b];
	heads[b] = i + 1;
	if (count > lh->buckets)
		lh_split(lh, heads, base, stride);
	DCHECK(count <= lh->buckets);
}

/* Merge while fewer than a quarter of the buckets would be filled, two at most per removal
 * (count: the entries left), so a table that held a burst comes back to its book's size over
 * the removals that follow. The quarter (splits come at one entry per bucket) keeps a table
 * whose entries come and go in waves — dedup records released a stream ack at a time — from
 * splitting and merging every wave. */
__attribute__((noinline)) static void
lh_shrink_slow(struct me_lhash *lh, uint32_t *heads, uint8_t *base, size_t stride,
	       uint32_t count)
{
	for (uint32_t k = 0; k < 2 && count < lh->shrink_below; k++)
		lh_merge(lh, heads, base, stride);
}
static inline void
lh_shrink(struct me_lhash *lh, uint32_t *heads, uint8_t *base, size_t stride, uint32_t count)
{
	if (__builtin_expect(count < lh->shrink_below, 0))
		lh_shrink_slow(lh, heads, base, stride, count);
}

/* Unchain entry i, whose predecessor's link is *p (&heads[bucket] for the first), zero its
 * link and shrink the table; count: the entries left. */
static inline void
lh_unchain(struct me_lhash *lh, uint32_t *heads, uint8_t *base, size_t stride, uint32_t *p,
	   uint32_t i, uint32_t count)
{
	struct me_link *l = lh_link(base, stride, i);
	DCHECK(*p == i + 1);
	*p = l->next;
	l->hash = 0;
	l->next = 0;
	lh_shrink(lh, heads, base, stride, count);
}

/* Unchain entry i (its bucket from its hash) as lh_unchain does. */
static inline void
lh_remove(struct me_lhash *lh, uint32_t *heads, uint8_t *base, size_t stride, uint32_t i,
	  uint32_t count)
{
	uint32_t *p = &heads[me_lh_bucket(lh, lh_link(base, stride, i)->hash)];
	while (*p != i + 1) {
		CHECK(*p != 0); /* an entry being removed is always chained */
		p = &lh_link(base, stride, *p - 1)->next;
	}
	lh_unchain(lh, heads, base, stride, p, i, count);
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
	lh_insert(&me->oid_lh, ME_ARR(me, off_index, uint32_t), ME_ARR(me, off_links, uint8_t),
		  sizeof(struct me_link), oi, tag, me_lh_bucket(&me->oid_lh, tag), me->records_used);
	DCHECK(me->records_used <= me->limits.orders_max);
	return oi;
}

void
me_order_release(struct me *me, uint32_t oi)
{
	DCHECK(oi < me->limits.orders_max);
	struct me_order *r = me_ord(me, oi);
	DCHECK(r->state != ME_ST_FREE);
	CHECK(me->records_used > 0);
	me->records_used--;
	lh_remove(&me->oid_lh, ME_ARR(me, off_index, uint32_t), ME_ARR(me, off_links, uint8_t),
		  sizeof(struct me_link), oi, me->records_used);
	r->state = ME_ST_FREE;
	r->next = me->order_free;
	me->order_free = oi;
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

static uint8_t *
user_links(struct me *me)
{
	return (uint8_t *)users(me) + offsetof(struct me_user, link);
}

/* Create user `user` (hash h, bucket b, not in the table): the most recently freed slot
 * first (hot), else a fresh one; NULL when users_max are in use. */
static inline struct me_user *
user_add(struct me *me, uint64_t user, uint32_t h, uint32_t b)
{
	if (me->users_used >= me->limits.users_max)
		return NULL;
	struct me_user *u = users(me);
	uint32_t i = me->user_free;
	if (i != 0)
		me->user_free = u[--i].link.next;
	else
		i = me->users_hwm++;
	DCHECK(i < me->limits.users_max); /* users_used < users_max: a slot is free */
	struct me_user *e = &u[i];
	DCHECK(e->count == 0);
	e->user = user;
	e->head = ME_NIL;
	e->count = ME_USER_USED;
	me->users_used++;
	lh_insert(&me->user_lh, ME_ARR(me, off_user_heads, uint32_t), user_links(me),
		  sizeof(struct me_user), i, h, b, me->users_used);
	DCHECK(me->users_used <= me->users_hwm);
	return e;
}

/* Drop user slot i, whose predecessor's chain link is *p: unchained, zeroed, on the free
 * list. */
static inline void
user_drop(struct me *me, uint32_t i, uint32_t *p)
{
	struct me_user *e = &users(me)[i];
	DCHECK(e->count == ME_USER_USED);
	DCHECK(i < me->users_hwm);
	DCHECK(*p == i + 1);
	CHECK(me->users_used > 0);
	me->users_used--;
	*p = e->link.next;
	e->user = 0;
	e->head = 0;
	e->count = 0;
	e->link.hash = 0;
	e->link.next = me->user_free;
	me->user_free = i + 1;
	lh_shrink(&me->user_lh, ME_ARR(me, off_user_heads, uint32_t), user_links(me),
		  sizeof(struct me_user), me->users_used);
}

struct me_user *
me_user_get(struct me *me, uint64_t user)
{
	uint32_t h = me_user_hash(user);
	uint32_t b = me_lh_bucket(&me->user_lh, h);
	struct me_user *u = users(me);
	for (uint32_t v = ME_ARR(me, off_user_heads, uint32_t)[b]; v != 0; v = u[v - 1].link.next) {
		DCHECK(v <= me->users_hwm);
		if (u[v - 1].user == user)
			return &u[v - 1];
	}
	return user_add(me, user, h, b);
}

/* Drop a user slot that has no live orders and no kill-switch. */
void
me_user_put(struct me *me, struct me_user *e)
{
	DCHECK((e->count & ME_USER_USED) != 0);
	if (e->count != ME_USER_USED)
		return;
	uint32_t i = (uint32_t)(e - users(me));
	uint32_t *p = &ME_ARR(me, off_user_heads, uint32_t)[me_lh_bucket(&me->user_lh, e->link.hash)];
	while (*p != i + 1) {
		CHECK(*p != 0); /* a slot in use is always chained */
		p = &users(me)[*p - 1].link.next;
	}
	user_drop(me, i, p);
}

void
me_user_link(struct me *me, uint32_t oi)
{
	struct me_order *o = me_ord(me, oi);
	uint64_t user = o->oid.user;
	uint32_t h = me_user_hash(user);
	uint32_t b = me_lh_bucket(&me->user_lh, h);
	struct me_user *u = users(me), *e = NULL;
	for (uint32_t v = ME_ARR(me, off_user_heads, uint32_t)[b]; v != 0; v = u[v - 1].link.next) {
		DCHECK(v <= me->users_hwm);
		if (u[v - 1].user == user) {
			e = &u[v - 1];
			break;
		}
	}
	if (e == NULL || (e->count & ME_USER_COUNT) == 0) {
		if (e == NULL)
			e = user_add(me, user, h, b);
		CHECK(e != NULL); /* the caller reserved a slot (submit checks capacity first) */
		e->head = oi;
		o->uprev = o->unext = oi;
	} else {
		struct me_order *hd = me_ord(me, e->head);
		uint32_t ti = hd->uprev;
		o->uprev = ti;
		o->unext = e->head;
		me_ord(me, ti)->unext = oi;
		hd->uprev = oi;
	}
	e->count++;
}

void
me_user_unlink(struct me *me, uint32_t oi)
{
	struct me_order *o = me_ord(me, oi);
	uint64_t user = o->oid.user;
	struct me_user *u = users(me);
	/* Found with its predecessor's link, so that dropping it walks the chain once. */
	uint32_t *p = &ME_ARR(me, off_user_heads, uint32_t)[me_lh_bucket(&me->user_lh,
									 me_user_hash(user))];
	for (;;) {
		CHECK(*p != 0); /* a live order's user is in the table */
		if (u[*p - 1].user == user)
			break;
		p = &u[*p - 1].link.next;
	}
	struct me_user *e = &u[*p - 1];
	CHECK((e->count & ME_USER_COUNT) > 0);
	if (o->unext == oi) {
		e->head = ME_NIL;
	} else {
		me_ord(me, o->uprev)->unext = o->unext;
		me_ord(me, o->unext)->uprev = o->uprev;
		if (e->head == oi)
			e->head = o->unext;
	}
	o->uprev = o->unext = ME_NIL;
	if (--e->count == ME_USER_USED)
		user_drop(me, *p - 1, p);
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshot, restore and state hash: one serialiser writes (or only measures, or only
 * hashes) the whole state in a canonical, deterministic order.
 *
 * Seed: "the crash-snapshot serializes the full actor including sagas" — resident actors with
 * orders, reservations, parked messages, the dedup window, stream positions and held events,
 * routing and symbol config, fee accounts, counters and the slab free-lists (so slot
 * assignment after a restore is identical to that of a member that replayed the log).
 * Snapshot content ≠ flush content: BEGIN_DEHYDRATE carries only wire_user_state.
 * The hash table is not written; restore rebuilds it.
 */
#include "oms/oms_int.h"

#define SNAP_MAGIC UINT64_C(0x31504e5353534d4f) /* "OMSSSNP1" */
#define SNAP_VERSION UINT32_C(9) /* 2: write-back (dirty list, generations); 3: transfer
				  * lookups, pinned transfer outcomes; 4: oms_order.saga_ns;
				  * 5: oms_actor.cl_ord_floor; 6: moves with open orders
				  * (oms_order.oid_shard, target_shard, moving; oms_actor.owned_epoch;
				  * oms_core.moving); 7: admission waits (WAITING actors, oms_core.waiting,
				  * admit_due, limits wait_max, admit_wait_ns); 8: counter
				  * parked_copies; histograms wb_hist, evict_hist; oms_actor.since_ns;
				  * 9: live symbol moves (counter orders_repointed,
				  * oms_core.recon_floor_req; naks_by_reason grows with SYMBOL_MOVING) */

struct ser {
	uint8_t *buf;  /* NULL: measure / hash only */
	size_t cap;    /* buf size */
	size_t pos;    /* bytes produced */
	uint64_t hash; /* running hash of every byte (oms_state_hash only) */
	bool hashing;  /* compute it: the snapshot and its size need no hash */
	bool full;     /* cap was too small */
};

static void
put(struct ser *s, const void *p, size_t n)
{
	const uint8_t *b = p;
	if (s->buf != NULL) {
		if (s->pos + n > s->cap)
			s->full = true;
		else
			memcpy(s->buf + s->pos, p, n);
	}
	if (!s->hashing) {
		s->pos += n;
		return;
	}
	uint64_t h = s->hash;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = (h ^ w) * UINT64_C(0x100000001b3) + UINT64_C(0x9e3779b97f4a7c15);
		h ^= h >> 31;
	}
	for (; i < n; i++)
		h = (h ^ b[i]) * UINT64_C(0x100000001b3);
	s->hash = h;
	s->pos += n;
}

static void
put_u32(struct ser *s, uint32_t v)
{
	put(s, &v, sizeof(v));
}

static void
serialise(const struct oms *oms, struct ser *s)
{
	const struct oms_limits *l = &oms->c.limits;
	uint64_t magic = SNAP_MAGIC;
	put(s, &magic, sizeof(magic));
	put_u32(s, SNAP_VERSION);
	put_u32(s, (uint32_t)sizeof(oms->c));
	put(s, &oms->c, sizeof(oms->c));
	uint32_t n = oms_resident_count(oms) + oms->c.waiting.count;
	put_u32(s, n);
	for (uint32_t i = 0; i < oms->actor_slots; i++) {
		const struct oms_actor *a = &oms->actors[i];
		if (a->state == OMS_A_FREE)
			continue;
		put_u32(s, i);
		put(s, a, sizeof(*a));
		put(s, oms_actor_balances(oms, a), sizeof(struct oms_balance) * l->assets_per_user);
		put(s, oms_actor_dedup(oms, a), sizeof(struct oms_dedup) * l->dedup_per_user);
		put(s, oms_actor_dedup_ids(oms, a), sizeof(uint64_t) * l->dedup_per_user);
	}
	put(s, oms->actor_free, sizeof(uint32_t) * oms->c.actor_free_count);
	put_u32(s, oms->c.order_used);
	for (uint32_t i = 0; i < l->orders_max; i++) {
		if (oms->orders[i].state == OMS_O_FREE)
			continue;
		put_u32(s, i);
		put(s, &oms->orders[i], sizeof(oms->orders[i]));
	}
	put(s, oms->order_free, sizeof(uint32_t) * oms->c.order_free_count);
	put_u32(s, oms->c.parked_used);
	for (uint32_t i = 0; i < l->parked_max; i++) {
		if (oms->parked[i].len == 0)
			continue;
		put_u32(s, i);
		put(s, &oms->parked[i], sizeof(oms->parked[i]));
	}
	put(s, oms->parked_free, sizeof(uint32_t) * oms->c.parked_free_count);
	put(s, oms->symbols, sizeof(struct oms_symbol) * oms->c.symbol_count);
	put(s, oms->fees, sizeof(struct oms_fee) * l->fee_assets_max);
	put(s, oms->streams, sizeof(struct oms_stream) * l->me_shards_max);
	for (uint32_t m = 0; m < l->me_shards_max; m++)
		put(s, &oms->held[(size_t)m * l->held_max],
		    sizeof(struct wire_me_event) * oms->streams[m].held_count);
	put(s, oms->kills, sizeof(uint64_t) * oms->c.kill_count);
	put(s, oms->releases, sizeof(struct oms_release) * oms->c.release_count);
}

size_t
oms_snapshot_size(const struct oms *oms)
{
	struct ser s = { 0 };
	serialise(oms, &s);
	return s.pos;
}

size_t
oms_snapshot(const struct oms *oms, void *buf, size_t cap)
{
	struct ser s = { .buf = buf, .cap = cap };
	CHECK(oms != NULL);
	CHECK(buf != NULL);
	serialise(oms, &s);
	return s.full ? 0 : s.pos;
}

uint64_t
oms_state_hash(const struct oms *oms)
{
	struct ser s = { .hash = UINT64_C(0xcbf29ce484222325), .hashing = true };
	serialise(oms, &s);
	return s.hash ^ s.pos;
}

/* ---- restore ---- */

struct des {
	const uint8_t *buf;
	size_t len;
	size_t pos;
	bool bad;
};

static void
get(struct des *d, void *p, size_t n)
{
	if (d->bad || d->pos + n > d->len || d->pos + n < d->pos) {
		d->bad = true;
		memset(p, 0, n);
		return;
	}
	memcpy(p, d->buf + d->pos, n);
	d->pos += n;
}

static uint32_t
get_u32(struct des *d)
{
	uint32_t v;
	get(d, &v, sizeof(v));
	return v;
}

static bool
idx_ok(uint32_t idx, uint32_t n)
{
	return idx == OMS_NIL || idx < n;
}

/* Walk a state list: links in range, back-links consistent, states right, count right. */
static bool
list_ok(const struct oms *oms, const struct oms_list *l, uint8_t state)
{
	uint32_t prev = OMS_NIL, n = 0;
	for (uint32_t i = l->head; i != OMS_NIL; i = oms->actors[i].next) {
		if (i >= oms->actor_slots || n++ > oms->actor_slots)
			return false;
		if (oms->actors[i].state != state || oms->actors[i].prev != prev)
			return false;
		prev = i;
	}
	return prev == l->tail && n == l->count;
}

/* What oms_on_symbol_config accepts (oms_route.c): the order checks rely on it (a tick
 * times a lot that base_unit does not divide prices a minimal order at zero). */
static bool
symbol_ok(const struct oms_symbol *s)
{
	if (s->symbol == 0 || s->base_asset == 0 || s->quote_asset == 0 ||
	    s->base_asset == s->quote_asset || s->tick <= 0 || s->lot <= 0 || s->base_unit <= 0 ||
	    s->min_qty < 0 || s->min_notional < 0 ||
	    (s->status != WIRE_SYM_TRADING && s->status != WIRE_SYM_HALTED))
		return false;
	if (s->taker_fee_bps < 0 || s->taker_fee_bps > 1000 || s->maker_fee_bps < -1000 ||
	    s->maker_fee_bps > 1000 || s->maker_fee_bps < -s->taker_fee_bps)
		return false;
	return (__int128)s->tick * s->lot % s->base_unit == 0;
}

/* The slabs whose free stacks the snapshot carries. */
enum slab {
	SLAB_ACTORS,
	SLAB_ORDERS,
	SLAB_PARKED,
};

/* Slot i of the slab holds no record. */
static bool
slot_free(const struct oms *oms, enum slab slab, uint32_t i)
{
	switch (slab) {
	case SLAB_ACTORS:
		return oms->actors[i].state == OMS_A_FREE;
	case SLAB_ORDERS:
		return oms->orders[i].state == OMS_O_FREE;
	default:
		return oms->parked[i].len == 0;
	}
}

/* Mark a free slot as seen in a free stack (a value no record has), or clear the mark. */
static void
slot_mark(struct oms *oms, enum slab slab, uint32_t i, bool on)
{
	switch (slab) {
	case SLAB_ACTORS:
		oms->actors[i].state = on ? UINT8_MAX : OMS_A_FREE;
		break;
	case SLAB_ORDERS:
		oms->orders[i].state = on ? UINT8_MAX : OMS_O_FREE;
		break;
	default:
		oms->parked[i].len = on ? UINT16_MAX : 0;
		break;
	}
}

/* Read a slab's free stack of count entries and check that each names a free slot below
 * slots, each once: a slot listed twice would be handed out twice. */
static bool
get_free_stack(struct oms *oms, struct des *d, enum slab slab, uint32_t *stack,
	       uint32_t count, uint32_t slots)
{
	get(d, stack, sizeof(uint32_t) * count);
	uint32_t k;
	for (k = 0; k < count; k++) {
		if (stack[k] >= slots || !slot_free(oms, slab, stack[k]))
			break;
		slot_mark(oms, slab, stack[k], true);
	}
	for (uint32_t j = 0; j < k; j++)
		slot_mark(oms, slab, stack[j], false);
	return k == count;
}

/* The transfers waiting for lookups: in range, acyclic, as many as counted, each a
 * transfer of a kind the FIFO holds. */
static bool
lookups_ok(const struct oms *oms)
{
	const struct oms_core *c = &oms->c;
	if (c->lookup_count > oms_lookups_max(&c->limits) ||
	    !idx_ok(c->lookup_head, c->limits.parked_max) ||
	    !idx_ok(c->lookup_tail, c->limits.parked_max))
		return false;
	uint32_t cnt = 0, last = OMS_NIL;
	for (uint32_t p = c->lookup_head; p != OMS_NIL; p = oms->parked[p].next) {
		const struct oms_parked *e = &oms->parked[p];
		if (e->len != sizeof(struct wire_transfer) || ++cnt > c->lookup_count ||
		    (e->pad != OMS_PARK_LOOKUP && e->pad != OMS_PARK_LOOKUP_DUP))
			return false;
		last = p;
	}
	return cnt == c->lookup_count && last == c->lookup_tail;
}

static int
deserialise(struct oms *oms, struct des *d)
{
	const struct oms_limits mine = oms->c.limits;
	uint64_t magic;
	get(d, &magic, sizeof(magic));
	if (magic != SNAP_MAGIC || get_u32(d) != SNAP_VERSION || get_u32(d) != sizeof(oms->c))
		return -EINVAL;
	get(d, &oms->c, sizeof(oms->c));
	const struct oms_limits *l = &oms->c.limits;
	if (d->bad || memcmp(&mine, l, sizeof(mine)) != 0)
		return -EINVAL;
	const struct oms_core *c = &oms->c;
	if (c->actor_free_count > oms->actor_slots || c->order_free_count > l->orders_max ||
	    c->parked_free_count > l->parked_max || c->symbol_count > l->symbols_max ||
	    c->kill_count > l->kill_users_max || c->release_count > l->releases_max ||
	    c->route.active_count > WIRE_ROUTE_SHARDS_MAX ||
	    c->route.pin_count > WIRE_ROUTE_PINS_MAX || c->route.shard_count > WIRE_ROUTE_SHARDS_MAX)
		return -EINVAL;
	uint32_t n = get_u32(d);
	if (n > oms->actor_slots || n + c->actor_free_count != oms->actor_slots)
		return -EINVAL;
	for (uint32_t k = 0; k < n && !d->bad; k++) {
		uint32_t i = get_u32(d);
		if (i >= oms->actor_slots || oms->actors[i].state != OMS_A_FREE)
			return -EINVAL;
		struct oms_actor *a = &oms->actors[i];
		get(d, a, sizeof(*a));
		get(d, oms_actor_balances(oms, a), sizeof(struct oms_balance) * l->assets_per_user);
		get(d, oms_actor_dedup(oms, a), sizeof(struct oms_dedup) * l->dedup_per_user);
		get(d, oms_actor_dedup_ids(oms, a), sizeof(uint64_t) * l->dedup_per_user);
		if (a->dedup_count > l->dedup_per_user || a->dedup_head >= l->dedup_per_user)
			return -EINVAL;
		/* One slot per asset: lookups stop at the first match, so a second slot of the
		 * same asset would split its reservations. */
		const struct oms_balance *bal = oms_actor_balances(oms, a);
		for (uint32_t x = 0; x < l->assets_per_user; x++)
			for (uint32_t y = x + 1; y < l->assets_per_user && bal[x].asset != 0; y++)
				if (bal[y].asset == bal[x].asset)
					return -EINVAL;
		if (a->state < OMS_A_HYDRATING || a->state > OMS_A_WAITING || a->tier >= OMS_TIERS_MAX)
			return -EINVAL;
		if (!idx_ok(a->prev, oms->actor_slots) || !idx_ok(a->next, oms->actor_slots) ||
		    !idx_ok(a->order_head, l->orders_max) || !idx_ok(a->order_tail, l->orders_max) ||
		    !idx_ok(a->parked_head, l->parked_max) || !idx_ok(a->parked_tail, l->parked_max) ||
		    !idx_ok(a->wb_prev, oms->actor_slots) || !idx_ok(a->wb_next, oms->actor_slots))
			return -EINVAL;
		if (oms_tab_find(oms, OMS_TAG_USER, a->user, 0) != OMS_NIL)
			return -EINVAL;
		oms_tab_insert(oms, OMS_TAG_USER, a->user, 0, i);
		/* The cache's gauges are not in the snapshot: counted from the actors here, and
		 * their counters from the records by oms_check_invariants below. */
		oms->users_ordered += a->order_count > 0;
		oms->users_in_saga += a->sagas > 0;
	}
	if (!get_free_stack(oms, d, SLAB_ACTORS, oms->actor_free, c->actor_free_count,
			    oms->actor_slots))
		return -EINVAL;
	n = get_u32(d);
	if (n != c->order_used || n + c->order_free_count != l->orders_max)
		return -EINVAL;
	for (uint32_t k = 0; k < n && !d->bad; k++) {
		uint32_t i = get_u32(d);
		if (i >= l->orders_max || oms->orders[i].state != OMS_O_FREE)
			return -EINVAL;
		struct oms_order *o = &oms->orders[i];
		get(d, o, sizeof(*o));
		if (o->state == OMS_O_FREE || o->state > OMS_O_LIVE || o->actor >= oms->actor_slots ||
		    oms->actors[o->actor].state == OMS_A_FREE || !idx_ok(o->prev, l->orders_max) ||
		    !idx_ok(o->next, l->orders_max) || o->me_shard >= l->me_shards_max)
			return -EINVAL;
		uint64_t user = oms->actors[o->actor].user;
		if (oms_tab_find(oms, OMS_TAG_ORDER, user, o->user_seq) != OMS_NIL)
			return -EINVAL;
		oms_tab_insert(oms, OMS_TAG_ORDER, user, o->user_seq, i);
	}
	if (!get_free_stack(oms, d, SLAB_ORDERS, oms->order_free, c->order_free_count,
			    l->orders_max))
		return -EINVAL;
	n = get_u32(d);
	if (n != c->parked_used || n + c->parked_free_count != l->parked_max)
		return -EINVAL;
	for (uint32_t k = 0; k < n && !d->bad; k++) {
		uint32_t i = get_u32(d);
		if (i >= l->parked_max || oms->parked[i].len != 0)
			return -EINVAL;
		struct oms_parked *p = &oms->parked[i];
		get(d, p, sizeof(*p));
		if (p->len < sizeof(struct wire_msg_hdr) || p->len > sizeof(p->msg) ||
		    !idx_ok(p->next, l->parked_max))
			return -EINVAL;
	}
	if (!get_free_stack(oms, d, SLAB_PARKED, oms->parked_free, c->parked_free_count,
			    l->parked_max))
		return -EINVAL;
	get(d, oms->symbols, sizeof(struct oms_symbol) * c->symbol_count);
	for (uint32_t i = 0; i < c->symbol_count && !d->bad; i++) {
		const struct oms_symbol *s = &oms->symbols[i];
		if (s->me_shard >= l->me_shards_max || s->fee_slot >= l->fee_assets_max ||
		    !symbol_ok(s) || oms_symbol_find(oms, s->symbol) != NULL)
			return -EINVAL;
		oms_symbol_index_add(oms, s->symbol, i);
	}
	get(d, oms->fees, sizeof(struct oms_fee) * l->fee_assets_max);
	get(d, oms->streams, sizeof(struct oms_stream) * l->me_shards_max);
	for (uint32_t m = 0; m < l->me_shards_max && !d->bad; m++) {
		if (oms->streams[m].held_count > l->held_max || oms->streams[m].next_seq == 0)
			return -EINVAL;
		get(d, &oms->held[(size_t)m * l->held_max],
		    sizeof(struct wire_me_event) * oms->streams[m].held_count);
	}
	get(d, oms->kills, sizeof(uint64_t) * c->kill_count);
	for (uint32_t i = 0; i < c->kill_count && !d->bad; i++) {
		if (oms_tab_find(oms, OMS_TAG_KILL, oms->kills[i], 0) != OMS_NIL)
			return -EINVAL;
		oms_tab_insert(oms, OMS_TAG_KILL, oms->kills[i], 0, i);
	}
	get(d, oms->releases, sizeof(struct oms_release) * c->release_count);
	for (uint32_t i = 0; i < c->release_count && !d->bad; i++) {
		const struct oms_release *r = &oms->releases[i];
		if (oms_tab_find(oms, OMS_TAG_RELEASE, r->user, r->epoch) != OMS_NIL)
			return -EINVAL;
		oms_tab_insert(oms, OMS_TAG_RELEASE, r->user, r->epoch, i);
	}
	if (d->bad || d->pos != d->len)
		return -EINVAL;
	if (!list_ok(oms, &c->lru, OMS_A_RESIDENT) || !list_ok(oms, &c->flushing, OMS_A_FLUSHING) ||
	    !list_ok(oms, &c->hydrating, OMS_A_HYDRATING) || !list_ok(oms, &c->waiting, OMS_A_WAITING))
		return -EINVAL;
	/* Per-user order and parked lists must be in range and acyclic before anyone walks
	 * them; then the counters must agree with the records. */
	for (uint32_t i = 0; i < oms->actor_slots; i++) {
		const struct oms_actor *a = &oms->actors[i];
		if (a->state == OMS_A_FREE)
			continue;
		/* The tails and back-links too: appends start from the tail, unlinks use prev. */
		uint32_t cnt = 0, last = OMS_NIL;
		for (uint32_t o = a->order_head; o != OMS_NIL; last = o, o = oms->orders[o].next)
			if (oms->orders[o].state == OMS_O_FREE || oms->orders[o].actor != i ||
			    oms->orders[o].prev != last || ++cnt > a->order_count)
				return -EINVAL;
		if (last != a->order_tail)
			return -EINVAL;
		cnt = 0;
		last = OMS_NIL;
		for (uint32_t p = a->parked_head; p != OMS_NIL; last = p, p = oms->parked[p].next)
			if (oms->parked[p].len == 0 || ++cnt > a->parked_count)
				return -EINVAL;
		if (cnt != a->parked_count || last != a->parked_tail)
			return -EINVAL;
	}
	if (!lookups_ok(oms))
		return -EINVAL;
	if (oms_check_invariants(oms) != 0)
		return -EINVAL;
	return 0;
}

int
oms_restore(struct oms *oms, const void *buf, size_t len)
{
	CHECK(oms != NULL);
	struct oms_limits mine;
	memcpy(&mine, &oms->c.limits, sizeof(mine));
	oms_reset(oms);
	if (buf == NULL)
		return -EINVAL;
	struct des d = { .buf = buf, .len = len };
	int rc = deserialise(oms, &d);
	if (rc != 0) {
		/* A corrupt snapshot leaves an empty, consistent state with our own limits. */
		memcpy(&oms->c.limits, &mine, sizeof(mine));
		oms_reset(oms);
	}
	return rc;
}

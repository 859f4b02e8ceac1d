/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Read-only views of the state for tests, mgmt and the control socket: counters, users,
 * balances, fees, streams, routing and symbols, and the invariant check that recomputes the
 * actors' counters from their records.
 * Nothing here changes state.
 */
#include "oms/oms_int.h"

static const char *const counter_names[] = {
#define OMS_COUNTER_NAME(name, label) label,
	OMS_COUNTERS(OMS_COUNTER_NAME)
#undef OMS_COUNTER_NAME
};
static_assert(ARRAY_SIZE(counter_names) == OMS_C_COUNT, "counter names");

uint64_t
oms_counter_get(const struct oms *oms, enum oms_counter c)
{
	return (unsigned)c < OMS_C_COUNT ? oms->c.counters[c] : 0;
}

const char *
oms_counter_name(enum oms_counter c)
{
	return (unsigned)c < OMS_C_COUNT ? counter_names[c] : "?";
}

uint64_t
oms_nak_count(const struct oms *oms, uint16_t reason)
{
	return reason < WIRE_REASON_MAX ? oms->c.naks_by_reason[reason] : 0;
}

int
oms_user_get(const struct oms *oms, uint64_t user, struct oms_user_info *out)
{
	memset(out, 0, sizeof(*out));
	const struct oms_actor *a = oms_actor_find(oms, user);
	if (a == NULL)
		return -ENOENT;
	*out = (struct oms_user_info){
		.status = a->state, .orders = a->order_count, .sagas = a->sagas,
		.live = a->live, .reservations = a->reservations, .parked = a->parked_count,
		.dirty = a->change_gen != a->clean_gen, .writing = (a->flags & OMS_AF_WB) != 0,
		.epoch = a->epoch, .version = a->version, .user_seq = a->user_seq,
		.egress_seq = a->egress_seq, .last_active_ns = a->last_active_ns,
	};
	return 0;
}

uint32_t
oms_users_list(const struct oms *oms, uint32_t *cursor, uint64_t *users, uint32_t max)
{
	CHECK(oms != NULL);
	CHECK(cursor != NULL);
	CHECK(users != NULL || max == 0);
	uint32_t n = 0, seen = 0, budget = 4 * max + 64;
	uint32_t i = *cursor;
	for (; i < oms->actor_slots && n < max && seen < budget; i++, seen++)
		if (oms->actors[i].state != OMS_A_FREE)
			users[n++] = oms->actors[i].user;
	*cursor = i >= oms->actor_slots ? UINT32_MAX : i;
	DCHECK(n <= max);
	return n;
}

int
oms_balance_get(const struct oms *oms, uint64_t user, uint32_t asset, int64_t *total,
		int64_t *reserved)
{
	*total = 0;
	*reserved = 0;
	const struct oms_actor *a = oms_actor_find(oms, user);
	if (a == NULL || !oms_actor_serving(a))
		return -ENOENT;
	const struct oms_balance *b = oms_balance_find(oms, a, asset);
	if (b == NULL)
		return -ENOENT;
	*total = b->total;
	*reserved = b->reserved;
	return 0;
}

int64_t
oms_fees_get(const struct oms *oms, uint32_t asset)
{
	for (uint32_t i = 0; i < oms->c.limits.fee_assets_max; i++)
		if (oms->fees[i].asset == asset && asset != 0)
			return oms->fees[i].amount;
	return 0;
}

int64_t
oms_asset_sum(const struct oms *oms, uint32_t asset)
{
	int64_t sum = 0;
	oms_asset_sums_slice(oms, &asset, 1, 0, oms->actor_slots, &sum);
	return sum + oms_fees_get(oms, asset);
}

uint32_t
oms_asset_sums_slice(const struct oms *oms, const uint32_t *assets, uint32_t n, uint32_t from,
		     uint32_t count, int64_t *sums)
{
	CHECK(n == 0 || (assets != NULL && sums != NULL));
	uint32_t end = from < oms->actor_slots && count < oms->actor_slots - from
			       ? from + count
			       : oms->actor_slots;
	for (uint32_t i = from; i < end; i++) {
		const struct oms_actor *a = &oms->actors[i];
		if (a->state != OMS_A_RESIDENT && a->state != OMS_A_FLUSHING)
			continue; /* not holding the user's money here */
		for (uint32_t k = 0; k < n; k++) {
			const struct oms_balance *b = oms_balance_find(oms, a, assets[k]);
			if (b != NULL)
				sums[k] += b->total;
		}
	}
	return end;
}

uint32_t
oms_actor_slots(const struct oms *oms)
{
	return oms->actor_slots;
}

uint32_t
oms_resident_count(const struct oms *oms)
{
	return oms->c.lru.count + oms->c.flushing.count + oms->c.hydrating.count;
}

const struct hist *
oms_park_hist(const struct oms *oms)
{
	return &oms->c.park_hist;
}

const struct hist *
oms_hydrate_hist(const struct oms *oms)
{
	return &oms->c.hydrate_hist;
}

const struct hist *
oms_writeback_hist(const struct oms *oms)
{
	return &oms->c.wb_hist;
}

const struct hist *
oms_evict_hist(const struct oms *oms)
{
	return &oms->c.evict_hist;
}

uint32_t
oms_waiting_count(const struct oms *oms)
{
	return oms->c.waiting.count;
}

/* The gauges of struct oms_cache_info that are not list counts, by their rule: a walk of the
 * resident (LRU) list, each actor in the first class it fits — a saga in flight, else flat
 * (idle), else open. What oms_cache_info keeps without the walk; oms_check_invariants
 * compares the two. -EFAULT if the list is longer than its count. */
static int
cache_walk(const struct oms *oms, struct oms_cache_info *out)
{
	memset(out, 0, sizeof(*out));
	uint32_t n = 0;
	for (uint32_t i = oms->c.lru.head; i != OMS_NIL; i = oms->actors[i].next) {
		if (i >= oms->actor_slots || n++ == oms->c.lru.count)
			return -EFAULT;
		const struct oms_actor *a = &oms->actors[i];
		if (a->sagas > 0)
			out->inflight++;
		else if (oms_actor_flat(a))
			out->idle++;
		else
			out->open++;
	}
	return n == oms->c.lru.count ? 0 : -EFAULT;
}

/* O(1) (the host reads it every 200 ms on the shard lcore; a walk of a full cache of a
 * million residents stalled it for tens of milliseconds, docs/perf.md). Only a resident
 * actor holds order records, and one without a record is flat (its sagas, live orders and
 * reservations are counts of its records): so of the LRU list, those with a saga are
 * inflight, the others with a record open, the rest idle. Both counts change only where a
 * record or a saga begins or ends (oms_order_alloc, oms_saga_end, oms_order_free);
 * oms_check_invariants recounts them and compares this with cache_walk. */
void
oms_cache_info(const struct oms *oms, struct oms_cache_info *out)
{
	/* DCHECKs, not CHECKs: a gauge gone wrong must not stop the lcore that serves orders
	 * (the tests and simulators catch it, oms_check_invariants after every step); the
	 * figures are clamped instead of wrapping. */
	DCHECK(oms->users_in_saga <= oms->users_ordered);
	DCHECK(oms->users_ordered <= oms->c.lru.count);
	uint32_t in_saga = oms->users_in_saga, ordered = oms->users_ordered;
	ordered = ordered < oms->c.lru.count ? ordered : oms->c.lru.count;
	in_saga = in_saga < ordered ? in_saga : ordered;
	memset(out, 0, sizeof(*out));
	out->cap = oms->c.limits.users_max;
	out->flushing = oms->c.flushing.count;
	out->hydrating = oms->c.hydrating.count;
	out->waiting = oms->c.waiting.count;
	out->parked = oms->c.parked_used;
	out->inflight = in_saga;
	out->open = ordered - in_saga;
	out->idle = oms->c.lru.count - ordered;
	DCHECK(out->idle + out->open + out->inflight == oms->c.lru.count);
}

uint32_t
oms_parked_count(const struct oms *oms)
{
	return oms->c.parked_used;
}

uint32_t
oms_inflight_count(const struct oms *oms)
{
	return oms->c.inflight;
}

uint64_t
oms_stream_next_seq(const struct oms *oms, uint16_t me_shard)
{
	return me_shard < oms->c.limits.me_shards_max ? oms->streams[me_shard].next_seq : 0;
}

uint64_t
oms_route_epoch(const struct oms *oms)
{
	return oms->c.route.epoch;
}

uint16_t
oms_owner(const struct oms *oms, uint64_t user)
{
	return oms_route_owner(oms, user);
}

/* Walk every actor and order and check the counters the flat rule relies on. */
int
oms_check_invariants(const struct oms *oms)
{
	const struct oms_limits *l = &oms->c.limits;
	uint32_t inflight = 0, used = 0, parked = 0, moving = 0, ordered = 0, in_saga = 0;
	for (uint32_t i = 0; i < oms->actor_slots; i++) {
		const struct oms_actor *a = &oms->actors[i];
		if (a->state == OMS_A_FREE)
			continue;
		if (oms_tab_find(oms, OMS_TAG_USER, a->user, 0) != i)
			return -EFAULT;
		uint32_t sagas = 0, live = 0, res = 0, count = 0;
		int64_t sums[WIRE_BALANCES_MAX];
		memset(sums, 0, sizeof(sums));
		const struct oms_balance *bal = oms_actor_balances(oms, a);
		for (uint32_t o = a->order_head; o != OMS_NIL; o = oms->orders[o].next) {
			const struct oms_order *r = &oms->orders[o];
			if (r->state == OMS_O_FREE || r->actor != i)
				return -EFAULT;
			count++;
			sagas += r->state == OMS_O_PENDING;
			live += r->state == OMS_O_LIVE && r->kind == OMS_K_ORDER;
			/* Only a live order moves; and only its first owner's orderId is not ours. */
			if (r->moving > 1 || (r->moving && (r->state != OMS_O_LIVE || r->kind != OMS_K_ORDER)))
				return -EFAULT;
			moving += r->moving;
			if (r->reserved < 0)
				return -EFAULT;
			if (r->reserved > 0) {
				res++;
				uint32_t asset = r->res_asset;
				uint32_t k;
				for (k = 0; k < l->assets_per_user; k++)
					if (bal[k].asset == asset)
						break;
				if (k == l->assets_per_user)
					return -EFAULT;
				sums[k] += r->reserved;
			}
		}
		if (count != a->order_count || sagas != a->sagas || live != a->live ||
		    res != a->reservations)
			return -EFAULT;
		for (uint32_t k = 0; k < l->assets_per_user; k++) {
			if (bal[k].reserved != sums[k])
				return -EFAULT;
			if (bal[k].total < 0 || bal[k].reserved < 0 || bal[k].reserved > bal[k].total)
				return -EFAULT;
		}
		if (a->state == OMS_A_FLUSHING && !oms_actor_flat(a))
			return -EFAULT;
		/* Only a resident actor holds records (a flush starts flat; a hydrating or
		 * waiting user has run nothing yet): oms_cache_info counts them on the LRU list. */
		if (count != 0 && a->state != OMS_A_RESIDENT)
			return -EFAULT;
		ordered += count > 0;
		in_saga += sagas > 0;
		if (oms_dedup_pinned(oms, a) > oms_xfer_pinned_max(l))
			return -EFAULT;
		inflight += sagas;
		used += count;
		parked += a->parked_count;
	}
	/* Transfers waiting for a lookup hold parked slots too. */
	if (inflight != oms->c.inflight || used != oms->c.order_used ||
	    moving != oms->c.moving || parked + oms->c.lookup_count != oms->c.parked_used)
		return -EFAULT;
	if (oms_resident_count(oms) + oms->c.waiting.count + oms->c.actor_free_count !=
	    oms->actor_slots)
		return -EFAULT;
	/* The cache's gauges: the kept counts against the records (a change of a record or a
	 * saga that missed them), then oms_cache_info against a walk by the rule itself. */
	if (ordered != oms->users_ordered || in_saga != oms->users_in_saga)
		return -EFAULT;
	struct oms_cache_info walked, kept;
	if (cache_walk(oms, &walked) != 0)
		return -EFAULT;
	if (walked.inflight != in_saga || walked.open + walked.inflight != ordered)
		return -EFAULT;
	oms_cache_info(oms, &kept);
	if (kept.idle != walked.idle || kept.open != walked.open || kept.inflight != walked.inflight)
		return -EFAULT;
	/* A waiting user holds no orders, and waits only while the cap is full (the pump
	 * promotes it the moment there is room, or the queue is behind one that waits). */
	for (uint32_t i = oms->c.waiting.head; i != OMS_NIL; i = oms->actors[i].next)
		if (oms->actors[i].order_count != 0 || oms->actors[i].dedup_count != 0)
			return -EFAULT;
	return oms_wb_check(oms);
}

void
oms_route_get(const struct oms *oms, struct oms_route_info *out)
{
	CHECK(oms != NULL);
	CHECK(out != NULL);
	const struct oms_route *r = &oms->c.route;
	memset(out, 0, sizeof(*out));
	out->epoch = r->epoch;
	out->shard_count = r->shard_count;
	out->pin_count = r->pin_count;
	CHECK(r->shard_count <= WIRE_ROUTE_SHARDS_MAX);
	CHECK(r->pin_count <= WIRE_ROUTE_PINS_MAX);
	memcpy(out->shards, r->shards, sizeof(r->shards[0]) * r->shard_count);
	memcpy(out->pins, r->pins, sizeof(r->pins[0]) * r->pin_count);
	out->self = oms->c.limits.shard_id;
	out->active_count = (uint16_t)r->active_count;
	memcpy(out->active, r->active, sizeof(r->active[0]) * r->active_count);
}

uint16_t
oms_route_info_owner(const struct oms_route_info *ri, uint64_t user)
{
	return oms_route_pick(ri->epoch, ri->pins, ri->pin_count, ri->active, ri->active_count,
			      ri->self, user);
}

bool
oms_route_draining(const struct oms *oms)
{
	CHECK(oms != NULL);
	return oms->c.drain != OMS_DRAIN_IDLE;
}

uint32_t
oms_symbol_count(const struct oms *oms)
{
	CHECK(oms != NULL);
	return oms->c.symbol_count;
}

int
oms_symbol_at(const struct oms *oms, uint32_t i, struct oms_symbol_info *out)
{
	CHECK(oms != NULL);
	CHECK(out != NULL);
	if (i >= oms->c.symbol_count)
		return -ENOENT;
	const struct oms_symbol *s = &oms->symbols[i];
	memset(out, 0, sizeof(*out));
	out->symbol = s->symbol;
	out->me_shard = s->me_shard;
	out->status = s->status;
	out->killed = (s->flags & OMS_SYM_KILLED) != 0;
	out->base_asset = s->base_asset;
	out->quote_asset = s->quote_asset;
	out->maker_fee_bps = s->maker_fee_bps;
	out->taker_fee_bps = s->taker_fee_bps;
	DCHECK(out->symbol != 0);
	return 0;
}

int
oms_symbol_get(const struct oms *oms, uint32_t symbol, struct oms_symbol_info *out)
{
	CHECK(oms != NULL);
	CHECK(out != NULL);
	const struct oms_symbol *s = oms_symbol_find(oms, symbol);
	if (s == NULL)
		return -ENOENT;
	return oms_symbol_at(oms, (uint32_t)(s - oms->symbols), out);
}

bool
oms_user_killed(const struct oms *oms, uint64_t user)
{
	CHECK(oms != NULL);
	return oms_tab_find(oms, OMS_TAG_KILL, user, 0) != OMS_NIL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Limits, the memory layout in caller memory, init and reset.
 *
 * Everything is sized once from struct oms_limits (no allocation after start-up): the regions
 * are laid out one after another, 64-byte aligned, and every free stack hands out the lowest
 * index first, so slot assignment is the same on every member of the shard.
 */
#include "oms/oms_int.h"

/* Bound on the large region counts: far below OMS_NIL (UINT32_MAX), indices are uint32. */
#define LIMIT_BIG (UINT32_C(1) << 28)

void
oms_limits_default(struct oms_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->shard_id = 0;
	l->me_shards_max = 8;
	l->users_max = 1024;
	l->flush_headroom = 64;
	l->wait_max = 256;
	l->assets_per_user = 8;
	l->orders_max = 8192;
	l->orders_per_user = 64;
	l->inflight_max = 4096;
	l->parked_max = 1024;
	l->parked_per_user = 16;
	l->dedup_per_user = 16;
	l->symbols_max = 64;
	l->fee_assets_max = 64;
	l->kill_users_max = 64;
	l->held_max = 64;
	l->sweep_evict_max = 64;
	l->sweep_scan_max = 256;
	l->drain_max = 16;
	l->drain_scan_max = 256;
	l->reconcile_users_max = 8;
	l->reconcile_scan_max = 256;
	l->stream_ack_every = 64;
	l->hydrate_retries_max = 3;
	l->releases_max = 256;
	l->writeback_max = 64;
	l->ttl_ns = UINT64_C(60000000000);
	l->admit_wait_ns = UINT64_C(2000000000);
	l->sweep_interval_ns = UINT64_C(1000000000);
	l->reconcile_interval_ns = UINT64_C(10000000000);
	l->replay_interval_ns = UINT64_C(10000000);
	l->writeback_interval_ns = 0; /* off: the app turns it on ([timers] flush_ms) */
	l->tiers[0] = (struct oms_tier){ .rate_per_s = 1000, .burst = 1000 };
	l->tiers[1] = (struct oms_tier){ .rate_per_s = 100000, .burst = 100000 };
	l->tiers[2] = (struct oms_tier){ .rate_per_s = 0, .burst = 0 };
	l->tiers[3] = (struct oms_tier){ .rate_per_s = 10, .burst = 10 };
}

int
oms_limits_check(const struct oms_limits *l)
{
	if (l == NULL)
		return -EINVAL;
	if (l->me_shards_max == 0 || l->users_max == 0 || l->flush_headroom == 0)
		return -EINVAL;
	if (l->users_max > LIMIT_BIG || l->flush_headroom > LIMIT_BIG || l->wait_max > LIMIT_BIG)
		return -EINVAL;
	if (l->wait_pad != 0 || (l->wait_max != 0 && l->admit_wait_ns == 0))
		return -EINVAL;
	if (l->assets_per_user < 2 || l->assets_per_user > WIRE_BALANCES_MAX)
		return -EINVAL;
	if (l->orders_max == 0 || l->orders_max > LIMIT_BIG || l->orders_per_user == 0)
		return -EINVAL;
	if (l->inflight_max == 0 || l->parked_max == 0 || l->parked_max > LIMIT_BIG)
		return -EINVAL;
	/* Two at least: a window always keeps an unpinned entry beside a pinned transfer. */
	if (l->parked_per_user == 0 || l->dedup_per_user < 2 || l->dedup_per_user > 4096)
		return -EINVAL;
	if (l->symbols_max == 0 || l->symbols_max > LIMIT_BIG || l->fee_assets_max == 0)
		return -EINVAL;
	if (l->fee_assets_max > LIMIT_BIG || l->kill_users_max == 0 ||
	    l->kill_users_max > LIMIT_BIG || l->held_max > 4096)
		return -EINVAL;
	if (l->sweep_evict_max == 0 || l->sweep_scan_max < l->sweep_evict_max)
		return -EINVAL;
	if (l->drain_max == 0 || l->drain_scan_max == 0)
		return -EINVAL;
	if (l->reconcile_users_max == 0 || l->reconcile_scan_max == 0)
		return -EINVAL;
	if (l->stream_ack_every == 0 || l->hydrate_retries_max == 0 ||
	    l->hydrate_retries_max > 255)
		return -EINVAL;
	if (l->releases_max == 0 || l->releases_max > LIMIT_BIG)
		return -EINVAL;
	if (l->writeback_interval_ns != 0 && l->writeback_max == 0)
		return -EINVAL;
	if (l->ttl_ns == 0 || l->sweep_interval_ns == 0)
		return -EINVAL;
	for (uint32_t t = 0; t < OMS_TIERS_MAX; t++)
		if (l->tiers[t].rate_per_s != 0 && l->tiers[t].burst == 0)
			return -EINVAL;
	return 0;
}

static size_t
align_up(size_t x)
{
	return (x + 63) & ~(size_t)63;
}

/* Lay the regions out one after another; with oms != NULL also set the table bases. */
static size_t
layout(const struct oms_limits *l, struct oms *oms, uint8_t *base)
{
	size_t slots = (size_t)l->users_max + l->flush_headroom + l->wait_max;
	/* One table, at most half full: users, orders, kills, releases. The symbols have an
	 * index of their own, at most half full too. */
	size_t keys = slots + l->orders_max + l->kill_users_max + l->releases_max;
	size_t table = 16;
	while (table < 2 * keys)
		table <<= 1;
	uint32_t symbol_bits = 1;
	while (((size_t)1 << symbol_bits) < 2 * (size_t)l->symbols_max)
		symbol_bits++;
	size_t off = align_up(sizeof(struct oms));
#define REGION(field, type, n)                                                             \
	do {                                                                               \
		if (oms != NULL)                                                           \
			oms->field = (type *)(void *)(base + off);                         \
		off = align_up(off + sizeof(type) * (size_t)(n));                          \
	} while (0)
	REGION(actors, struct oms_actor, slots);
	REGION(balances, struct oms_balance, slots * l->assets_per_user);
	REGION(actor_free, uint32_t, slots);
	REGION(orders, struct oms_order, l->orders_max);
	REGION(order_free, uint32_t, l->orders_max);
	REGION(parked, struct oms_parked, l->parked_max);
	REGION(parked_free, uint32_t, l->parked_max);
	REGION(dedup, struct oms_dedup, slots * l->dedup_per_user);
	REGION(dedup_ids, uint64_t, slots * l->dedup_per_user);
	REGION(symbols, struct oms_symbol, l->symbols_max);
	REGION(fees, struct oms_fee, l->fee_assets_max);
	REGION(streams, struct oms_stream, l->me_shards_max);
	REGION(held, struct wire_me_event, (size_t)l->me_shards_max * l->held_max);
	REGION(kills, uint64_t, l->kill_users_max);
	REGION(releases, struct oms_release, l->releases_max);
	REGION(table, struct oms_entry, table);
	REGION(symbol_index, uint32_t, (size_t)1 << symbol_bits);
#undef REGION
	if (oms != NULL) {
		oms->actor_slots = (uint32_t)slots;
		oms->table_mask = (uint32_t)(table - 1);
		oms->symbol_index_mask = (UINT32_C(1) << symbol_bits) - 1;
		oms->symbol_index_shift = 32 - symbol_bits;
	}
	return off;
}

size_t
oms_footprint(const struct oms_limits *limits)
{
	if (oms_limits_check(limits) != 0)
		return 0;
	return layout(limits, NULL, NULL);
}

/* Empty state: every slab free, free stacks hand out the lowest index first. */
void
oms_reset(struct oms *oms)
{
	const struct oms_limits *l = &oms->c.limits;
	size_t total = layout(l, NULL, NULL);
	uint8_t *base = (uint8_t *)oms;
	struct oms_limits keep = *l;
	size_t head = align_up(sizeof(struct oms));
	memset(base + head, 0, total - head);
	memset(&oms->c, 0, sizeof(oms->c));
	oms->c.limits = keep;
	oms->users_ordered = 0; /* no actor, no record */
	oms->users_in_saga = 0;
	oms->order_hint = OMS_NIL; /* checked before use: any value would do */
	oms->pad_hint = 0;
	oms->timers_due_ns = 0; /* the next message looks at every timer */
	oms->c.lru = (struct oms_list){ OMS_NIL, OMS_NIL, 0, 0 };
	oms->c.flushing = oms->c.lru;
	oms->c.hydrating = oms->c.lru;
	oms->c.waiting = oms->c.lru;
	oms->c.dirty = oms->c.lru;
	hist_init(&oms->c.park_hist);
	hist_init(&oms->c.hydrate_hist);
	hist_init(&oms->c.wb_hist);
	hist_init(&oms->c.evict_hist);
	oms->c.lookup_head = oms->c.lookup_tail = OMS_NIL;
	for (uint32_t i = 0; i < oms->actor_slots; i++)
		oms->actor_free[i] = oms->actor_slots - 1 - i;
	oms->c.actor_free_count = oms->actor_slots;
	for (uint32_t i = 0; i < l->orders_max; i++)
		oms->order_free[i] = l->orders_max - 1 - i;
	oms->c.order_free_count = l->orders_max;
	for (uint32_t i = 0; i < l->parked_max; i++)
		oms->parked_free[i] = l->parked_max - 1 - i;
	oms->c.parked_free_count = l->parked_max;
	for (uint32_t i = 0; i < l->me_shards_max; i++)
		oms->streams[i].next_seq = 1;
}

int
oms_init(struct oms **out, void *memory, const struct oms_limits *limits)
{
	if (out == NULL || memory == NULL || oms_limits_check(limits) != 0)
		return -EINVAL;
	if (((uintptr_t)memory & 7) != 0)
		return -EINVAL;
	struct oms *oms = memory;
	memset(oms, 0, sizeof(*oms));
	layout(limits, oms, memory);
	memcpy(&oms->c.limits, limits, sizeof(*limits));
	oms_reset(oms);
	*out = oms;
	CHECK(oms->c.actor_free_count == oms->actor_slots);
	return 0;
}

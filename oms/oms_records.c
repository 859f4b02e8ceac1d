/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The records every handler shares and the lookups over them: an actor's balance slots, order
 * records (allocation, reservation, release), the per-user dedup window, the symbol table and
 * the routing owner of a user.
 *
 * They sit below the handlers (admission, streams, reconciliation, actors, routing) so that
 * no handler file calls another one: each handler changes state through these helpers, and
 * the dispatcher (oms_core.c) is the only file that knows every handler.
 */
#include "common/hrw.h"
#include "oms/oms_int.h"

struct oms_balance *
oms_balance_find(const struct oms *oms, const struct oms_actor *a, uint32_t asset)
{
	struct oms_balance *b = oms_actor_balances(oms, a);
	for (uint32_t k = 0; k < oms->c.limits.assets_per_user; k++)
		if (b[k].asset == asset)
			return asset != 0 ? &b[k] : NULL;
	return NULL;
}

struct oms_balance *
oms_balance_get_or_add(struct oms *oms, struct oms_actor *a, uint32_t asset)
{
	struct oms_balance *b = oms_actor_balances(oms, a);
	struct oms_balance *empty = NULL;
	if (asset == 0)
		return NULL;
	for (uint32_t k = 0; k < oms->c.limits.assets_per_user; k++) {
		if (b[k].asset == asset)
			return &b[k];
		if (b[k].asset == 0 && empty == NULL)
			empty = &b[k];
	}
	if (empty != NULL) {
		empty->asset = asset;
		empty->total = 0;
		empty->reserved = 0;
	}
	return empty;
}

struct oms_order *
oms_order_find(const struct oms *oms, uint64_t user, uint64_t user_seq)
{
	uint32_t i = oms_tab_find(oms, OMS_TAG_ORDER, user, user_seq);
	return i == OMS_NIL ? NULL : &oms->orders[i];
}

struct oms_order *
oms_order_alloc(struct oms *oms, struct oms_actor *a, uint64_t seq)
{
	CHECK(oms->c.order_free_count > 0);
	uint32_t idx = oms->order_free[--oms->c.order_free_count];
	struct oms_order *o = &oms->orders[idx];
	memset(o, 0, sizeof(*o));
	o->user_seq = seq;
	o->saga_ns = oms->c.now_ns; /* the saga's age (bridge counters) is cluster time */
	o->actor = oms_actor_index(oms, a);
	o->prev = a->order_tail;
	o->next = OMS_NIL;
	if (a->order_tail != OMS_NIL)
		oms->orders[a->order_tail].next = idx;
	else
		a->order_head = idx;
	a->order_tail = idx;
	a->order_count++;
	oms->c.order_used++;
	o->state = OMS_O_PENDING;
	a->sagas++;
	oms->c.inflight++;
	oms_tab_insert(oms, OMS_TAG_ORDER, a->user, seq, idx);
	return o;
}

void
oms_order_reserve_set(struct oms *oms, struct oms_actor *a, struct oms_order *o, int64_t reserved)
{
	DCHECK(reserved >= 0);
	if (reserved == o->reserved)
		return;
	struct oms_balance *b = oms_balance_find(oms, a, o->res_asset);
	CHECK(b != NULL);
	b->reserved += reserved - o->reserved;
	/* available = total − reserved is never negative. */
	CHECK(b->reserved >= 0);
	CHECK(b->reserved <= b->total);
	if (o->reserved == 0)
		a->reservations++;
	else if (reserved == 0)
		a->reservations--;
	o->reserved = reserved;
}

void
oms_order_free(struct oms *oms, struct oms_actor *a, struct oms_order *o)
{
	uint32_t idx = (uint32_t)(o - oms->orders);
	/* Release the remainder (seed: release on cancel/reject/expiry and at the end). */
	oms_order_reserve_set(oms, a, o, 0);
	if (o->state == OMS_O_PENDING) {
		a->sagas--;
		oms->c.inflight--;
	} else if (o->state == OMS_O_LIVE && o->kind == OMS_K_ORDER) {
		a->live--;
	}
	if (o->prev != OMS_NIL)
		oms->orders[o->prev].next = o->next;
	else
		a->order_head = o->next;
	if (o->next != OMS_NIL)
		oms->orders[o->next].prev = o->prev;
	else
		a->order_tail = o->prev;
	a->order_count--;
	oms->c.order_used--;
	oms_tab_remove(oms, OMS_TAG_ORDER, a->user, o->user_seq);
	memset(o, 0, sizeof(*o));
	oms->order_free[oms->c.order_free_count++] = idx;
}

const struct oms_dedup *
oms_dedup_find(const struct oms *oms, const struct oms_actor *a, uint32_t kind, uint64_t id)
{
	const uint64_t *ids = oms_actor_dedup_ids(oms, a);
	uint32_t max = oms->c.limits.dedup_per_user;
	/* Scan the dense id array; the full outcome is read only on a match. */
	for (uint32_t k = 0, i = a->dedup_head; k < a->dedup_count; k++) {
		if (ids[i] == id) {
			const struct oms_dedup *d = &oms_actor_dedup(oms, a)[i];
			if (d->kind == kind)
				return d;
		}
		if (++i == max)
			i = 0;
	}
	return NULL;
}

void
oms_dedup_add(struct oms *oms, struct oms_actor *a, uint32_t kind, uint64_t id, uint64_t user_seq,
	      uint64_t content, uint16_t reason)
{
	struct oms_dedup *ring = oms_actor_dedup(oms, a);
	uint32_t max = oms->c.limits.dedup_per_user;
	if (a->dedup_count == max) {
		/* The window is bounded: the oldest outcome is forgotten first. */
		a->dedup_head = a->dedup_head + 1 == max ? 0 : a->dedup_head + 1;
		a->dedup_count--;
	}
	uint32_t i = a->dedup_head + a->dedup_count;
	if (i >= max)
		i -= max;
	struct oms_dedup *d = &ring[i];
	oms_actor_dedup_ids(oms, a)[i] = id;
	memset(d, 0, sizeof(*d));
	d->id = id;
	d->user_seq = user_seq;
	d->time_ns = oms->c.now_ns;
	d->content = content;
	d->reason = reason;
	d->kind = (uint8_t)kind;
	a->dedup_count++;
}

struct oms_symbol *
oms_symbol_find(const struct oms *oms, uint32_t symbol)
{
	uint32_t idx = oms_tab_find(oms, OMS_TAG_SYMBOL, symbol, 0);
	return idx == OMS_NIL ? NULL : &oms->symbols[idx];
}

uint16_t
oms_route_owner(const struct oms *oms, uint64_t user)
{
	const struct oms_route *r = &oms->c.route;
	/* Before any routing config this shard serves every user (single-shard deployments,
	 * tests); a multi-shard venue configures routing before it opens. */
	for (uint32_t i = 0; i < r->pin_count; i++)
		if (r->pins[i].user == user)
			return r->pins[i].shard;
	if (r->epoch == 0 || r->active_count == 0)
		return oms->c.limits.shard_id;
	/* Seed: HRW over the epoch-versioned membership — never hash % N. Receiving shards
	 * get no new users until they turn active. */
	return hrw_pick(user, r->active, r->active_count);
}

bool
oms_route_owns(const struct oms *oms, uint64_t user, uint16_t *owner)
{
	*owner = oms_route_owner(oms, user);
	return *owner == oms->c.limits.shard_id;
}

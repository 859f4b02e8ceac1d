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
		oms_actor_changed(oms, a); /* a balance the row does not list yet */
	}
	return empty;
}

struct oms_order *
oms_order_alloc(struct oms *oms, struct oms_actor *a, uint64_t seq)
{
	struct oms_order *o = oms_order_slot(oms);
	/* A freed record keeps its old contents (oms_order_free): every field is written. The
	 * saga's age (bridge counters) is cluster time; adopt() sets the first owner's
	 * oid_shard. */
	oms_order_init(o, seq, oms_actor_index(oms, a), oms->c.limits.shard_id, oms->c.now_ns);
	oms_order_attach(oms, a, o);
	return o;
}

void
oms_order_reserve_set(struct oms *oms, struct oms_actor *a, struct oms_order *o, int64_t reserved)
{
	DCHECK(reserved >= 0);
	if (reserved == o->reserved)
		return;
	oms_order_reserve_set_in(a, o, oms_balance_find(oms, a, o->res_asset), reserved);
}

void
oms_order_free(struct oms *oms, struct oms_actor *a, struct oms_order *o)
{
	uint32_t idx = (uint32_t)(o - oms->orders);
	/* Release the remainder (seed: release on cancel/reject/expiry and at the end). */
	if (o->reserved != 0)
		oms_order_reserve_set(oms, a, o, 0);
	if (o->state == OMS_O_PENDING) {
		oms_saga_end(oms, a);
	} else if (o->state == OMS_O_LIVE && o->kind == OMS_K_ORDER) {
		a->live--;
	}
	if (o->moving) {
		DCHECK(oms->c.moving > 0);
		oms->c.moving--;
	}
	if (o->prev != OMS_NIL)
		oms->orders[o->prev].next = o->next;
	else
		a->order_head = o->next;
	if (o->next != OMS_NIL)
		oms->orders[o->next].prev = o->prev;
	else
		a->order_tail = o->prev;
	DCHECK(a->order_count > 0);
	a->order_count--;
	oms->c.order_used--;
	if (a->order_count == 0) {
		/* Its last record: flat again (oms_actor_flat; oms_cache_info counts it idle). */
		DCHECK(oms->users_ordered > 0);
		oms->users_ordered--;
	}
	oms_tab_remove_hinted(oms, OMS_TAG_ORDER, a->user, o->user_seq, oms->order_hint);
	/* Only the state marks a free slot (the snapshot, restore's free-stack check and every
	 * slab walk read nothing else of it), and oms_order_alloc zeroes the record it hands
	 * out: zeroing it here as well cost a second pass over it. */
	o->state = OMS_O_FREE;
	oms->order_free[oms->c.order_free_count++] = idx;
}

/* Append e to a's ring (oldest first). A full window first forgets its oldest entry that
 * is not pinned: the entries before it (pinned transfers not yet flushed) move up one place,
 * so the ring stays oldest first. There is always one, since at most oms_xfer_pinned_max
 * (< dedup_per_user) entries are pinned. */
static inline void
dedup_put(struct oms *oms, struct oms_actor *a, struct oms_dedup e)
{
	struct oms_dedup *ring = oms_actor_dedup(oms, a);
	uint64_t *ids = oms_actor_dedup_ids(oms, a);
	uint32_t max = oms->c.limits.dedup_per_user;
	if (a->dedup_count == max) {
		uint32_t k = 0, i = a->dedup_head;
		while (k < max && (ring[i].flags & OMS_DEDUP_F_PINNED) != 0) {
			k++;
			i = i + 1 == max ? 0 : i + 1;
		}
		CHECK(k < max);
		/* The victim's outcome is forgotten: a late re-send of it must not execute. Read
		 * before the shift below writes the pinned entries over its slot (the floor took
		 * the head's pinned transfer instead, and a forgotten order's re-send executed
		 * again: paced3.sh CHECK=1 at four times saturation, session 39). */
		if (ring[i].kind == OMS_DEDUP_ORDER && ring[i].id > a->cl_ord_floor)
			a->cl_ord_floor = ring[i].id;
		/* Shift the k pinned entries before the victim i up by one, newest first. */
		for (uint32_t n = 0; n < k; n++) {
			uint32_t from = i == 0 ? max - 1 : i - 1;
			ring[i] = ring[from];
			ids[i] = ids[from];
			i = from;
		}
		DCHECK(i == a->dedup_head);
		a->dedup_head = a->dedup_head + 1 == max ? 0 : a->dedup_head + 1;
		a->dedup_count--;
	}
	uint32_t i = a->dedup_head + a->dedup_count;
	if (i >= max)
		i -= max;
	a->dedup_count++;
	ids[i] = e.id;
	ring[i] = e;
}

void
oms_dedup_add(struct oms *oms, struct oms_actor *a, uint32_t kind, uint64_t id, uint64_t user_seq,
	      uint64_t content, uint16_t reason)
{
	dedup_put(oms, a,
		  (struct oms_dedup){
			  .id = id,
			  .user_seq = user_seq,
			  .time_ns = oms->c.now_ns,
			  .content = content,
			  .reason = reason,
			  .kind = (uint8_t)kind,
		  });
	oms_actor_changed(oms, a); /* the recent window travels in the row */
}

void
oms_dedup_add_xfer(struct oms *oms, struct oms_actor *a, uint64_t id, uint32_t asset,
		   int64_t amount, int64_t total, uint16_t reason, bool pinned)
{
	DCHECK(!pinned || oms_dedup_pinned(oms, a) < oms_xfer_pinned_max(&oms->c.limits));
	dedup_put(oms, a,
		  (struct oms_dedup){
			  .id = id,
			  .user_seq = (uint64_t)total,
			  /* A flush drawn after this (epoch > the counter now) carries it. */
			  .time_ns = oms->c.epoch_seq,
			  .content = (uint64_t)amount,
			  .reason = reason,
			  .kind = OMS_DEDUP_XFER,
			  .flags = pinned ? OMS_DEDUP_F_PINNED : 0,
			  .asset = asset,
		  });
	if (id > a->xfer_id_max)
		a->xfer_id_max = id;
	oms_actor_changed(oms, a); /* the window and xfer_id_max travel in the row */
}

uint32_t
oms_dedup_pinned(const struct oms *oms, const struct oms_actor *a)
{
	const struct oms_dedup *ring = oms_actor_dedup(oms, a);
	uint32_t max = oms->c.limits.dedup_per_user, n = 0;
	for (uint32_t k = 0, i = a->dedup_head; k < a->dedup_count; k++) {
		n += (ring[i].flags & OMS_DEDUP_F_PINNED) != 0;
		if (++i == max)
			i = 0;
	}
	return n;
}

void
oms_dedup_flushed(struct oms *oms, struct oms_actor *a, uint64_t epoch)
{
	struct oms_dedup *ring = oms_actor_dedup(oms, a);
	uint32_t max = oms->c.limits.dedup_per_user;
	/* The flush under epoch was built when it was drawn: it carried every pinned outcome
	 * recorded before (oms_build_user_state puts them all in recent[]), and the database
	 * wrote them to the transfers table in the same statement as the row. */
	for (uint32_t k = 0, i = a->dedup_head; k < a->dedup_count; k++) {
		if ((ring[i].flags & OMS_DEDUP_F_PINNED) != 0 && ring[i].time_ns < epoch)
			ring[i].flags &= (uint8_t)~OMS_DEDUP_F_PINNED;
		if (++i == max)
			i = 0;
	}
}

/* ---- transfers waiting for their lookup (a FIFO over the parked slab) ---- */

void
oms_lookup_push(struct oms *oms, const struct wire_transfer *m, uint8_t pad, uint64_t epoch)
{
	CHECK(oms->c.parked_free_count > 0);
	DCHECK(pad == OMS_PARK_LOOKUP || pad == OMS_PARK_LOOKUP_DUP);
	uint32_t pi = oms->parked_free[--oms->c.parked_free_count];
	struct oms_parked *p = &oms->parked[pi];
	memset(p, 0, sizeof(*p));
	p->next = OMS_NIL;
	p->len = sizeof(*m);
	p->pad = pad;
	memcpy(p->msg, m, sizeof(*m));
	p->msg[OMS_LOOKUP_EPOCH_WORD] = epoch;
	if (oms->c.lookup_tail != OMS_NIL)
		oms->parked[oms->c.lookup_tail].next = pi;
	else
		oms->c.lookup_head = pi;
	oms->c.lookup_tail = pi;
	oms->c.lookup_count++;
	oms->c.parked_used++;
}

void
oms_lookups_orphan(struct oms *oms, uint64_t user)
{
	for (uint32_t pi = oms->c.lookup_head; pi != OMS_NIL; pi = oms->parked[pi].next) {
		struct oms_parked *p = &oms->parked[pi];
		if (((const struct wire_transfer *)(const void *)p->msg)->user == user)
			p->msg[OMS_LOOKUP_ORPHAN_WORD] = 1;
	}
}

void
oms_lookup_emit(const struct oms *oms, uint64_t user, uint64_t transfer_id, uint64_t epoch,
		struct svc_sink *sink, oms_msg_fn *fn, void *ctx)
{
	struct wire_transfer_lookup m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_TRANSFER_LOOKUP, oms->c.limits.shard_id);
	m.user = user;
	m.transfer_id = transfer_id;
	m.epoch = epoch;
	oms_out(sink, fn, ctx, WIRE_DEST_PERSIST, &m.hdr);
}

uint32_t
oms_lookups_foreach(const struct oms *oms, oms_msg_fn *fn, void *ctx)
{
	uint32_t n = 0;
	for (uint32_t pi = oms->c.lookup_head; pi != OMS_NIL; pi = oms->parked[pi].next) {
		const struct oms_parked *p = &oms->parked[pi];
		if (p->pad != OMS_PARK_LOOKUP)
			continue;
		const struct wire_transfer *t = (const void *)p->msg;
		oms_lookup_emit(oms, t->user, t->transfer_id, p->msg[OMS_LOOKUP_EPOCH_WORD], NULL,
				fn, ctx);
		n++;
	}
	return n;
}

uint16_t
oms_route_owner(const struct oms *oms, uint64_t user)
{
	const struct oms_route *r = &oms->c.route;
	return oms_route_pick(r->epoch, r->pins, r->pin_count, r->active, r->active_count,
			      oms->c.limits.shard_id, user);
}

bool
oms_route_owns(const struct oms *oms, uint64_t user, uint16_t *owner)
{
	*owner = oms_route_owner(oms, user);
	return *owner == oms->c.limits.shard_id;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Routing authority, symbol configuration and kill-switches (transfers: oms_transfer.c).
 *
 * Seed invariants 4 and 5: the cluster is the routing authority (it NAKs orders for users it
 * does not own) and there is one atomically-versioned routing config (membership and whale
 * overrides move together under one epoch).
 */
#include "oms/oms_int.h"

static void
route_rebuild_active(struct oms_route *r)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->shard_count; i++)
		if (r->shards[i].state == WIRE_SHARD_ACTIVE)
			r->active[n++] = r->shards[i].shard;
	/* Sorted, so the config is canonical whatever order the admin listed shards in. */
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && r->active[j - 1] > r->active[j]; j--) {
			uint16_t t = r->active[j];
			r->active[j] = r->active[j - 1];
			r->active[j - 1] = t;
		}
	r->active_count = n;
}

static void
drain_request(struct oms *oms)
{
	/* Start a fresh full pass over the resident users. */
	oms->c.drain = OMS_DRAIN_REQUESTED;
	oms->c.drain_cursor = 0;
	oms->c.drain_found = 0;
}

void
oms_on_routing_config(struct oms *oms, const struct wire_routing_config *m, struct svc_sink *sink)
{
	struct oms_route *r = &oms->c.route;
	if (m->epoch <= r->epoch) {
		oms_admin_reply(oms, sink, m->epoch, WIRE_REASON_STALE_EPOCH, r->epoch);
		return;
	}
	if (m->shard_count == 0 || m->shard_count > WIRE_ROUTE_SHARDS_MAX ||
	    m->pin_count > WIRE_ROUTE_PINS_MAX) {
		oms_admin_reply(oms, sink, m->epoch, WIRE_REASON_BAD_REQUEST, r->epoch);
		return;
	}
	uint32_t active = 0;
	for (uint32_t i = 0; i < m->shard_count; i++) {
		const struct wire_route_shard *s = &m->shards[i];
		if (s->state != WIRE_SHARD_RECEIVING && s->state != WIRE_SHARD_ACTIVE) {
			oms_admin_reply(oms, sink, m->epoch, WIRE_REASON_BAD_REQUEST, r->epoch);
			return;
		}
		for (uint32_t j = 0; j < i; j++)
			if (m->shards[j].shard == s->shard) {
				oms_admin_reply(oms, sink, m->epoch, WIRE_REASON_BAD_REQUEST,
						r->epoch);
				return;
			}
		active += s->state == WIRE_SHARD_ACTIVE;
	}
	if (active == 0) {
		oms_admin_reply(oms, sink, m->epoch, WIRE_REASON_BAD_REQUEST, r->epoch);
		return;
	}
	/* Membership and pins replace the old config together, under one epoch. */
	memset(r, 0, sizeof(*r));
	r->epoch = m->epoch;
	r->shard_count = m->shard_count;
	r->pin_count = m->pin_count;
	memcpy(r->shards, m->shards, sizeof(m->shards[0]) * m->shard_count);
	memcpy(r->pins, m->pins, sizeof(m->pins[0]) * m->pin_count);
	for (uint32_t i = 0; i < r->shard_count; i++)
		r->shards[i].reserved = 0;
	for (uint32_t i = 0; i < r->pin_count; i++)
		memset(r->pins[i].reserved, 0, sizeof(r->pins[i].reserved));
	route_rebuild_active(r);
	drain_request(oms);
	oms_admin_reply(oms, sink, m->epoch, WIRE_REASON_NONE, r->epoch);
}

void
oms_on_whale_pin(struct oms *oms, const struct wire_whale_pin *m, struct svc_sink *sink)
{
	struct oms_route *r = &oms->c.route;
	uint32_t i;
	for (i = 0; i < r->pin_count; i++)
		if (r->pins[i].user == m->user)
			break;
	if (m->hdr.flags & 1) {
		if (i == r->pin_count) {
			oms_admin_reply(oms, sink, m->user, WIRE_REASON_NOT_FOUND, r->epoch);
			return;
		}
		r->pins[i] = r->pins[--r->pin_count];
		memset(&r->pins[r->pin_count], 0, sizeof(r->pins[0]));
	} else {
		if (i == r->pin_count) {
			if (r->pin_count == WIRE_ROUTE_PINS_MAX) {
				oms_admin_reply(oms, sink, m->user, WIRE_REASON_CAPACITY, r->epoch);
				return;
			}
			r->pin_count++;
		}
		memset(&r->pins[i], 0, sizeof(r->pins[i]));
		r->pins[i].user = m->user;
		r->pins[i].shard = m->shard;
	}
	/* Seed: a tier change is one fenced move under one epoch bump. */
	r->epoch++;
	drain_request(oms);
	oms_admin_reply(oms, sink, m->user, WIRE_REASON_NONE, r->epoch);
}

static uint32_t
fee_slot(struct oms *oms, uint32_t asset)
{
	uint32_t empty = OMS_NIL;
	for (uint32_t i = 0; i < oms->c.limits.fee_assets_max; i++) {
		if (oms->fees[i].asset == asset)
			return i;
		if (oms->fees[i].asset == 0 && empty == OMS_NIL)
			empty = i;
	}
	if (empty != OMS_NIL)
		oms->fees[empty].asset = asset;
	return empty;
}

/* The routing switch of a symbol moved from ME shard `from` to `to` with its book
 * (docs/oms.md "Moving a symbol between ME shards"): every live order of it bound to `from`
 * now lives on `to`, so its cancels, amends, replaces, REBIND_TO_ME re-sends and
 * reconciliation go there. A record still waiting for the answer to what it sent to `from`
 * (a pending submit or replacement, a cancel or amend in flight) keeps `from`: `from`
 * answers it exactly once (refused SYMBOL_MOVING while frozen, or answered before), and the
 * bridge re-drives it there until it does. Orders of users not in memory need nothing: a
 * user is dropped only flat (oms_actor_begin_dehydrate), the row holds no orders, and an
 * order that arrives later (ADOPTED) takes the symbol's ME shard at that time.
 *
 * One pass over the order slab, O(orders_max) (a rare admin entry, not a hot path); it
 * returns the orders re-pointed. */
static uint32_t
repoint(struct oms *oms, uint32_t symbol, uint16_t from, uint16_t to)
{
	DCHECK(from != to);
	DCHECK(to < oms->c.limits.me_shards_max);
	uint32_t n = 0;
	if (oms->c.order_used == 0)
		return 0;
	for (uint32_t i = 0; i < oms->c.limits.orders_max; i++) {
		struct oms_order *o = &oms->orders[i];
		if (o->state != OMS_O_LIVE || o->kind != OMS_K_ORDER || o->symbol != symbol ||
		    o->me_shard != from)
			continue;
		o->me_shard = to;
		/* last_seq was a seq of from's stream: no event of to's is applied to it yet.
		 * Reconciliation compares it with to's as_of_seq from now on (oms_recon.c). */
		o->last_seq = 0;
		n++;
	}
	DCHECK(n <= oms->c.order_used);
	if (n > 0) {
		/* A snapshot asked for before the switch may describe `to` before it opened the
		 * book: no phantom pass for it (oms_on_open_orders_snapshot). */
		oms->c.recon_floor_req = oms->c.recon_req_seq;
		oms->c.counters[OMS_C_ORDERS_REPOINTED] += n;
	}
	return n;
}

void
oms_on_symbol_config(struct oms *oms, const struct wire_symbol_config *m, struct svc_sink *sink)
{
	bool ok = m->symbol != 0 && m->base_asset != 0 && m->quote_asset != 0 &&
		  m->base_asset != m->quote_asset && m->tick > 0 && m->lot > 0 &&
		  m->base_unit > 0 && m->min_qty >= 0 && m->min_notional >= 0 &&
		  m->me_shard < oms->c.limits.me_shards_max &&
		  (m->status == WIRE_SYM_TRADING || m->status == WIRE_SYM_HALTED);
	/* Fees: at most 10% either way; the taker fee is never a rebate (market-buy budget). */
	ok = ok && m->taker_fee_bps >= 0 && m->taker_fee_bps <= 1000 &&
	     m->maker_fee_bps >= -1000 && m->maker_fee_bps <= 1000 &&
	     m->maker_fee_bps >= -m->taker_fee_bps;
	if (ok) {
		__int128 tl = (__int128)m->tick * m->lot;
		ok = tl % m->base_unit == 0;
	}
	if (!ok) {
		oms_admin_reply(oms, sink, m->symbol, WIRE_REASON_BAD_REQUEST, 0);
		return;
	}
	struct oms_symbol *s = oms_symbol_find(oms, m->symbol);
	if (s != NULL && (s->base_asset != m->base_asset || s->quote_asset != m->quote_asset)) {
		/* Open orders reserve in these assets: a symbol never changes them. */
		oms_admin_reply(oms, sink, m->symbol, WIRE_REASON_BAD_REQUEST, 0);
		return;
	}
	/* Both capacities are checked before anything changes: a refused config must not
	 * leave a zeroed symbol behind (tick 0 would reach the order checks). */
	if (s == NULL && oms->c.symbol_count == oms->c.limits.symbols_max) {
		oms_admin_reply(oms, sink, m->symbol, WIRE_REASON_CAPACITY, 0);
		return;
	}
	uint32_t fs = fee_slot(oms, m->quote_asset);
	if (fs == OMS_NIL) {
		oms_admin_reply(oms, sink, m->symbol, WIRE_REASON_CAPACITY, 0);
		return;
	}
	if (s == NULL) {
		s = &oms->symbols[oms->c.symbol_count];
		memset(s, 0, sizeof(*s));
		oms_symbol_index_add(oms, m->symbol, oms->c.symbol_count);
		oms->c.symbol_count++;
	} else if (s->me_shard != m->me_shard) {
		repoint(oms, m->symbol, s->me_shard, m->me_shard);
	}
	/* The config replaces the symbol whole; only the kill-switch flag stays. */
	*s = (struct oms_symbol){
		.symbol = m->symbol, .base_asset = m->base_asset, .quote_asset = m->quote_asset,
		.fee_slot = fs, .tick = m->tick, .lot = m->lot, .min_qty = m->min_qty,
		.min_notional = m->min_notional, .base_unit = m->base_unit,
		.me_shard = m->me_shard, .status = m->status, .flags = s->flags,
		.maker_fee_bps = m->maker_fee_bps, .taker_fee_bps = m->taker_fee_bps,
	};
	oms_admin_reply(oms, sink, m->symbol, WIRE_REASON_NONE, m->map_version);
}

void
oms_on_symbol_status(struct oms *oms, const struct wire_symbol_status_msg *m, struct svc_sink *sink)
{
	struct oms_symbol *s = oms_symbol_find(oms, m->symbol);
	if (s == NULL) {
		oms_admin_reply(oms, sink, m->symbol, WIRE_REASON_UNKNOWN_SYMBOL, 0);
		return;
	}
	if (m->status != WIRE_SYM_TRADING && m->status != WIRE_SYM_HALTED) {
		oms_admin_reply(oms, sink, m->symbol, WIRE_REASON_BAD_REQUEST, 0);
		return;
	}
	s->status = m->status;
	oms_admin_reply(oms, sink, m->symbol, WIRE_REASON_NONE, 0);
}

void
oms_on_kill_switch(struct oms *oms, const struct wire_kill_switch *m, struct svc_sink *sink)
{
	/* The ME cancels resting orders on its own kill-switch entry (contract: CANCELLED with
	 * cause KILL_SWITCH); the OMS blocks new orders with NAK KILLED. */
	if (m->scope == WIRE_KILL_SYMBOL) {
		struct oms_symbol *s = m->id <= UINT32_MAX ? oms_symbol_find(oms, (uint32_t)m->id)
							   : NULL;
		if (s == NULL) {
			oms_admin_reply(oms, sink, m->id, WIRE_REASON_UNKNOWN_SYMBOL, 0);
			return;
		}
		if (m->engage)
			s->flags |= OMS_SYM_KILLED;
		else
			s->flags &= (uint8_t)~OMS_SYM_KILLED;
		oms_admin_reply(oms, sink, m->id, WIRE_REASON_NONE, 0);
		return;
	}
	if (m->scope != WIRE_KILL_USER) {
		oms_admin_reply(oms, sink, m->id, WIRE_REASON_BAD_REQUEST, 0);
		return;
	}
	bool on = oms_tab_find(oms, OMS_TAG_KILL, m->id, 0) != OMS_NIL;
	if (m->engage && !on) {
		if (oms->c.kill_count == oms->c.limits.kill_users_max) {
			oms_admin_reply(oms, sink, m->id, WIRE_REASON_CAPACITY, 0);
			return;
		}
		oms_tab_insert(oms, OMS_TAG_KILL, m->id, 0, oms->c.kill_count);
		oms->kills[oms->c.kill_count++] = m->id;
	} else if (!m->engage && on) {
		uint32_t i = oms_tab_find(oms, OMS_TAG_KILL, m->id, 0);
		uint32_t last = --oms->c.kill_count;
		oms_tab_remove(oms, OMS_TAG_KILL, m->id, 0);
		if (i != last) {
			/* Swap-remove keeps the list dense; re-point the moved entry. */
			oms->kills[i] = oms->kills[last];
			oms_tab_insert(oms, OMS_TAG_KILL, oms->kills[i], 0, i);
		}
		oms->kills[last] = 0;
	}
	oms_admin_reply(oms, sink, m->id, WIRE_REASON_NONE, oms->c.kill_count);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Limits, memory layout, init, message dispatch, timers and inspection.
 *
 * Seed invariant 2: no external I/O inside the state machine. Time arrives only as the
 * cluster time of an applied entry (now_ns); every timer (TTL sweep, drain, reconciliation,
 * stream acks, replay requests) fires when an applied entry's time passes its deadline, so
 * every member of the shard fires it at the same log position.
 */
#include "oms/oms_int.h"

void
oms_limits_default(struct oms_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->shard_id = 0;
	l->me_shards_max = 8;
	l->users_max = 1024;
	l->flush_headroom = 64;
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
	l->ttl_ns = UINT64_C(60000000000);
	l->sweep_interval_ns = UINT64_C(1000000000);
	l->reconcile_interval_ns = UINT64_C(10000000000);
	l->replay_interval_ns = UINT64_C(10000000);
	l->tiers[0] = (struct oms_tier){ .rate_per_s = 1000, .burst = 1000 };
	l->tiers[1] = (struct oms_tier){ .rate_per_s = 100000, .burst = 100000 };
	l->tiers[2] = (struct oms_tier){ .rate_per_s = 0, .burst = 0 };
	l->tiers[3] = (struct oms_tier){ .rate_per_s = 10, .burst = 10 };
}

#define LIMIT_BIG (UINT32_C(1) << 28)

int
oms_limits_check(const struct oms_limits *l)
{
	if (l == NULL)
		return -EINVAL;
	if (l->me_shards_max == 0 || l->users_max == 0 || l->flush_headroom == 0)
		return -EINVAL;
	if (l->users_max > LIMIT_BIG || l->flush_headroom > LIMIT_BIG)
		return -EINVAL;
	if (l->assets_per_user < 2 || l->assets_per_user > WIRE_BALANCES_MAX)
		return -EINVAL;
	if (l->orders_max == 0 || l->orders_max > LIMIT_BIG || l->orders_per_user == 0)
		return -EINVAL;
	if (l->inflight_max == 0 || l->parked_max == 0 || l->parked_max > LIMIT_BIG)
		return -EINVAL;
	if (l->parked_per_user == 0 || l->dedup_per_user == 0 || l->dedup_per_user > 4096)
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
	size_t slots = (size_t)l->users_max + l->flush_headroom;
	/* One table, at most half full: users, orders, symbols, kills. */
	size_t keys = slots + l->orders_max + l->symbols_max + l->kill_users_max + l->releases_max;
	size_t table = 16;
	while (table < 2 * keys)
		table <<= 1;
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
#undef REGION
	if (oms != NULL) {
		oms->actor_slots = (uint32_t)slots;
		oms->table_mask = (uint32_t)(table - 1);
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
	oms->c.lru = (struct oms_list){ OMS_NIL, OMS_NIL, 0, 0 };
	oms->c.flushing = oms->c.lru;
	oms->c.hydrating = oms->c.lru;
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

void
oms_emit(struct svc_sink *sink, enum wire_dest dest, void *msg, enum wire_type type,
	 uint16_t shard, size_t size)
{
	struct wire_msg_hdr *h = msg;
	DCHECK(size <= UINT16_MAX);
	h->type = (uint16_t)type;
	h->length = (uint16_t)size;
	h->shard = shard;
	h->flags = 0;
	sink->emit(sink->ctx, dest, h);
}

void
oms_nak(struct oms *oms, struct svc_sink *sink, struct oms_actor *a, uint64_t user,
	uint64_t cl_ord_id, uint16_t reason, uint16_t owner)
{
	struct wire_nak m;
	memset(&m, 0, sizeof(m));
	DCHECK(reason > WIRE_REASON_NONE && reason < WIRE_REASON_MAX);
	m.user = user;
	m.cl_ord_id = cl_ord_id;
	m.reason = reason;
	m.owner_shard = owner;
	m.route_epoch = oms->c.route.epoch;
	m.seq = a != NULL ? ++a->egress_seq : 0;
	oms_count(oms, OMS_C_NAKS);
	oms->c.naks_by_reason[reason]++;
	OMS_EMIT(sink, WIRE_DEST_CLIENT, m, WIRE_NAK, 0);
}

void
oms_admin_reply(struct oms *oms, struct svc_sink *sink, uint64_t req_id, uint16_t reason,
		uint64_t value)
{
	struct wire_admin_reply m;
	memset(&m, 0, sizeof(m));
	m.req_id = req_id;
	m.reason = reason;
	m.value = value;
	oms_count(oms, OMS_C_ADMIN);
	OMS_EMIT(sink, WIRE_DEST_ADMIN, m, WIRE_ADMIN_REPLY, oms->c.limits.shard_id);
}

void
oms_run_timers(struct oms *oms, uint64_t now_ns, struct svc_sink *sink)
{
	/* Cluster time never goes backwards (consensus clamps it); keep it so if it did. */
	if (now_ns > oms->c.now_ns)
		oms->c.now_ns = now_ns;
	uint64_t now = oms->c.now_ns;
	if (now >= oms->c.next_sweep_ns) {
		oms->c.next_sweep_ns = now + oms->c.limits.sweep_interval_ns;
		oms_sweep(oms, sink);
		oms_drain_step(oms, sink);
	}
	if (oms->c.limits.reconcile_interval_ns != 0 && now >= oms->c.next_recon_ns) {
		oms->c.next_recon_ns = now + oms->c.limits.reconcile_interval_ns;
		oms_recon_sweep(oms, sink);
	}
}

/* Every fixed-size message we accept must be exactly its schema size. */
static bool
msg_ok(const struct wire_msg_hdr *msg)
{
	uint16_t want = wire_type_size(msg->type);
	return want != 0 && msg->length == want;
}

void
oms_dispatch(struct oms *oms, const struct wire_msg_hdr *msg, struct svc_sink *sink)
{
	if (!msg_ok(msg)) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return;
	}
	switch (msg->type) {
	case WIRE_NEW_ORDER:
		oms_on_new_order(oms, (const struct wire_new_order *)msg, sink);
		break;
	case WIRE_CANCEL:
		oms_on_cancel(oms, (const struct wire_cancel *)msg, sink);
		break;
	case WIRE_AMEND:
		oms_on_amend(oms, (const struct wire_amend *)msg, sink);
		break;
	case WIRE_CANCEL_REPLACE:
		oms_on_cancel_replace(oms, (const struct wire_cancel_replace *)msg, sink);
		break;
	case WIRE_ME_EVENT:
		oms_on_me_event(oms, (const struct wire_me_event *)msg, sink);
		break;
	case WIRE_ME_RESULT:
		oms_on_me_result(oms, (const struct wire_me_result *)msg, sink);
		break;
	case WIRE_OPEN_ORDERS_SNAPSHOT:
		oms_on_open_orders_snapshot(oms, (const struct wire_open_orders_snapshot *)msg,
					    sink);
		break;
	case WIRE_HYDRATE_USER:
		oms_on_hydrate_user(oms, (const struct wire_hydrate_user *)msg, sink);
		break;
	case WIRE_FLUSH_COMPLETE:
		oms_on_flush_complete(oms, (const struct wire_flush_complete *)msg, sink);
		break;
	case WIRE_ROUTING_CONFIG:
		oms_on_routing_config(oms, (const struct wire_routing_config *)msg, sink);
		break;
	case WIRE_SYMBOL_CONFIG:
		oms_on_symbol_config(oms, (const struct wire_symbol_config *)msg, sink);
		break;
	case WIRE_SYMBOL_STATUS:
		oms_on_symbol_status(oms, (const struct wire_symbol_status_msg *)msg, sink);
		break;
	case WIRE_KILL_SWITCH:
		oms_on_kill_switch(oms, (const struct wire_kill_switch *)msg, sink);
		break;
	case WIRE_TRANSFER:
		oms_on_transfer(oms, (const struct wire_transfer *)msg, sink);
		break;
	case WIRE_WHALE_PIN:
		oms_on_whale_pin(oms, (const struct wire_whale_pin *)msg, sink);
		break;
	case WIRE_USER_ADMIN:
		oms_on_user_admin(oms, (const struct wire_user_admin *)msg, sink);
		break;
	case WIRE_RELEASE_DONE:
		oms_on_release_done(oms, (const struct wire_release_claim *)msg, sink);
		break;
	case WIRE_TICK:
		oms_streams_tick(oms, sink);
		break;
	default:
		/* Not ours (e.g. SNAPSHOT_REQUEST is consensus business): counted, ignored. */
		oms_count(oms, OMS_C_BAD_MSGS);
		break;
	}
}

void
oms_apply(struct oms *oms, uint64_t now_ns, const struct wire_msg_hdr *msg, struct svc_sink *sink)
{
	CHECK(oms != NULL && sink != NULL);
	oms_run_timers(oms, now_ns, sink);
	oms_count(oms, OMS_C_MSGS);
	if (msg == NULL || msg->length < sizeof(*msg)) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return;
	}
	oms_dispatch(oms, msg, sink);
}

void
oms_tick(struct oms *oms, uint64_t now_ns, struct svc_sink *sink)
{
	CHECK(oms != NULL && sink != NULL);
	oms_run_timers(oms, now_ns, sink);
	oms_streams_tick(oms, sink);
}

/* ---- svc_ops adapter ---- */

/* The service table consensus hosts (common/service.h). */
SVC_OPS_DEFINE(oms, struct oms);

/* ---- inspection ---- */

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
	out->status = a->state;
	out->orders = a->order_count;
	out->sagas = a->sagas;
	out->live = a->live;
	out->reservations = a->reservations;
	out->parked = a->parked_count;
	out->epoch = a->epoch;
	out->version = a->version;
	out->user_seq = a->user_seq;
	out->egress_seq = a->egress_seq;
	out->last_active_ns = a->last_active_ns;
	return 0;
}

uint32_t
oms_users_list(const struct oms *oms, uint32_t *cursor, uint64_t *users, uint32_t max)
{
	CHECK(oms != NULL && cursor != NULL && (users != NULL || max == 0));
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
	if (a == NULL || a->state == OMS_A_HYDRATING)
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
	int64_t sum = oms_fees_get(oms, asset);
	for (uint32_t i = 0; i < oms->actor_slots; i++) {
		const struct oms_actor *a = &oms->actors[i];
		if (a->state != OMS_A_RESIDENT && a->state != OMS_A_FLUSHING)
			continue;
		const struct oms_balance *b = oms_balance_find(oms, a, asset);
		if (b != NULL)
			sum += b->total;
	}
	return sum;
}

uint32_t
oms_resident_count(const struct oms *oms)
{
	return oms->c.lru.count + oms->c.flushing.count + oms->c.hydrating.count;
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
	uint32_t inflight = 0, used = 0, parked = 0;
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
		inflight += sagas;
		used += count;
		parked += a->parked_count;
	}
	if (inflight != oms->c.inflight || used != oms->c.order_used || parked != oms->c.parked_used)
		return -EFAULT;
	if (oms_resident_count(oms) + oms->c.actor_free_count != oms->actor_slots)
		return -EFAULT;
	return 0;
}

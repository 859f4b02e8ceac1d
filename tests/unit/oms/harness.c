/* SPDX-License-Identifier: Apache-2.0 */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static void
capture(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct h *h = ctx;
	cr_assert(msg->length <= H_MSG_MAX);
	cr_assert(msg->length == wire_type_size(msg->type), "emitted %s with length %u",
		  wire_type_name(msg->type), msg->length);
	/* Everything the service emits must pass the receiving side's decoder. */
	uint16_t len = 0;
	enum wire_err err = wire_msg_check(msg, msg->length, &len);
	cr_assert(err == WIRE_E_OK, "emitted %s refused by the codec: %s", wire_type_name(msg->type),
		  wire_err_text(err));
	h->total++;
	if (h->n == H_OUT_MAX)
		return;
	h->out[h->n].dest = dest;
	memcpy(h->out[h->n].msg, msg, msg->length);
	h->n++;
}

void
h_limits(struct oms_limits *l)
{
	oms_limits_default(l);
	l->users_max = 64;
	l->flush_headroom = 8;
	l->wait_max = 8;
	l->orders_max = 1024;
	l->orders_per_user = 32;
	l->inflight_max = 512;
	l->parked_max = 64;
	l->parked_per_user = 4;
	l->dedup_per_user = 16;
	l->ttl_ns = 10 * SEC;
	l->sweep_interval_ns = SEC;
	l->reconcile_interval_ns = 0;
	l->stream_ack_every = 4;
	l->replay_interval_ns = SEC / 10;
	for (int t = 0; t < OMS_TIERS_MAX; t++)
		l->tiers[t] = (struct oms_tier){ 0, 0 };
}

void
h_init(struct h *h, const struct oms_limits *l)
{
	memset(h, 0, sizeof(*h));
	if (l != NULL)
		h->lim = *l;
	else
		h_limits(&h->lim);
	size_t fp = oms_footprint(&h->lim);
	cr_assert(fp > 0);
	h->mem = aligned_alloc(64, (fp + 63) & ~(size_t)63);
	cr_assert(h->mem != NULL);
	memset(h->mem, 0xa5, fp); /* init must not depend on zeroed memory */
	cr_assert(oms_init(&h->oms, h->mem, &h->lim) == 0);
	h->out = calloc(H_OUT_MAX, sizeof(*h->out));
	h->sink.ctx = h;
	h->sink.emit = capture;
	for (int i = 0; i < 16; i++)
		h->me_seq[i] = 1;
	h->now = SEC;
}

void
h_fini(struct h *h)
{
	free(h->mem);
	free(h->out);
	h->mem = NULL;
	h->out = NULL;
}

void
h_clear(struct h *h)
{
	h->n = 0;
}

void
h_apply(struct h *h, const void *msg)
{
	if (!h->keep)
		h->n = 0;
	oms_apply(h->oms, h->now, msg, &h->sink);
	cr_assert(oms_check_invariants(h->oms) == 0, "invariants after %s",
		  wire_type_name(((const struct wire_msg_hdr *)msg)->type));
}

void
h_tick(struct h *h)
{
	if (!h->keep)
		h->n = 0;
	oms_tick(h->oms, h->now, &h->sink);
	cr_assert(oms_check_invariants(h->oms) == 0);
}

uint32_t
h_count(const struct h *h, uint16_t type)
{
	uint32_t c = 0;
	for (uint32_t i = 0; i < h->n; i++)
		c += ((const struct wire_msg_hdr *)(const void *)h->out[i].msg)->type == type;
	return c;
}

static int
h_index(const struct h *h, uint16_t type, uint32_t nth)
{
	for (uint32_t i = 0; i < h->n; i++)
		if (((const struct wire_msg_hdr *)(const void *)h->out[i].msg)->type == type &&
		    nth-- == 0)
			return (int)i;
	return -1;
}

const void *
h_get(const struct h *h, uint16_t type, uint32_t nth)
{
	int i = h_index(h, type, nth);
	return i < 0 ? NULL : h->out[i].msg;
}

enum wire_dest
h_dest(const struct h *h, uint16_t type, uint32_t nth)
{
	int i = h_index(h, type, nth);
	return i < 0 ? 0 : h->out[i].dest;
}

static void
hdr(void *m, uint16_t type)
{
	struct wire_msg_hdr *x = m;
	x->type = type;
	x->length = wire_type_size(type);
	x->shard = 0;
	x->flags = 0;
}

void
h_symbol(struct h *h, uint32_t symbol, uint32_t base, uint32_t quote, uint16_t me_shard,
	 int64_t tick, int64_t lot, int64_t base_unit, int16_t maker, int16_t taker)
{
	struct wire_symbol_config m;
	memset(&m, 0, sizeof(m));
	hdr(&m, WIRE_SYMBOL_CONFIG);
	m.symbol = symbol;
	m.base_asset = base;
	m.quote_asset = quote;
	m.me_shard = me_shard;
	m.status = WIRE_SYM_TRADING;
	m.tick = tick;
	m.lot = lot;
	m.base_unit = base_unit;
	m.maker_fee_bps = maker;
	m.taker_fee_bps = taker;
	h_apply(h, &m);
	const struct wire_admin_reply *r = h_get(h, WIRE_ADMIN_REPLY, 0);
	cr_assert(r != NULL && r->reason == WIRE_REASON_NONE);
}

void
h_std_symbols(struct h *h)
{
	h_symbol(h, S_BTCUSD, A_BTC, A_USD, 0, 10, 10, 100, 2, 5);
	h_symbol(h, S_ETHUSD, A_ETH, A_USD, 1, 1, 1, 1, -1, 4);
}

void
h_hydrate(struct h *h, uint64_t user, uint64_t epoch, uint32_t a1, int64_t t1, uint32_t a2,
	  int64_t t2)
{
	struct wire_hydrate_user m;
	memset(&m, 0, sizeof(m));
	hdr(&m, WIRE_HYDRATE_USER);
	/* Without an actor this is a hydrate-ahead: it carries a fresh epoch (one the shard
	 * issued already would be a late answer to a hydration it gave up: released). */
	struct oms_user_info ui;
	if (oms_user_get(h->oms, user, &ui) != 0 && epoch <= h->oms->c.epoch_seq)
		epoch = h->oms->c.epoch_seq + 1;
	m.epoch = epoch;
	m.status = WIRE_HYD_OK;
	m.state.user = user;
	m.state.version = 1;
	uint32_t n = 0;
	if (a1) {
		m.state.balances[n].asset = a1;
		m.state.balances[n++].total = t1;
	}
	if (a2) {
		m.state.balances[n].asset = a2;
		m.state.balances[n++].total = t2;
	}
	m.state.balance_count = n;
	h_apply(h, &m);
}

void
h_hydrate_state(struct h *h, const struct wire_user_state *st)
{
	struct wire_hydrate_user m;
	memset(&m, 0, sizeof(m));
	hdr(&m, WIRE_HYDRATE_USER);
	m.epoch = h->oms->c.epoch_seq + 1; /* fresh: a hydrate-ahead */
	m.status = WIRE_HYD_OK;
	m.state = *st;
	h_apply(h, &m);
}

void
h_hydrate_status(struct h *h, uint64_t user, uint8_t status, uint16_t owner)
{
	struct wire_hydrate_user m;
	memset(&m, 0, sizeof(m));
	hdr(&m, WIRE_HYDRATE_USER);
	m.epoch = 1;
	m.status = status;
	m.owner_shard = owner;
	m.state.user = user;
	h_apply(h, &m);
}

void
h_user(struct h *h, uint64_t user, int64_t btc, int64_t usd)
{
	h_hydrate(h, user, 1, A_BTC, btc, A_USD, usd);
	cr_assert(h_status(h, user) == OMS_USER_RESIDENT);
}

void
h_new_order_msg(struct wire_new_order *m, uint64_t user, uint64_t cl, uint32_t symbol,
		uint8_t side, uint8_t type, uint8_t tif, int64_t px, int64_t qty, int64_t quote_qty)
{
	memset(m, 0, sizeof(*m));
	hdr(m, WIRE_NEW_ORDER);
	m->user = user;
	m->cl_ord_id = cl;
	m->symbol = symbol;
	m->side = side;
	m->ord_type = type;
	m->tif = tif;
	m->px = px;
	m->qty = qty;
	m->quote_qty = quote_qty;
}

void
h_limit(struct h *h, uint64_t user, uint64_t cl, uint32_t symbol, uint8_t side, int64_t px,
	int64_t qty)
{
	struct wire_new_order m;
	h_new_order_msg(&m, user, cl, symbol, side, WIRE_ORD_LIMIT, WIRE_TIF_GTC, px, qty, 0);
	h_apply(h, &m);
}

void
h_cancel(struct h *h, uint64_t user, uint64_t cl, uint64_t orig)
{
	struct wire_cancel m;
	memset(&m, 0, sizeof(m));
	hdr(&m, WIRE_CANCEL);
	m.user = user;
	m.cl_ord_id = cl;
	m.orig_cl_ord_id = orig;
	h_apply(h, &m);
}

void
h_amend(struct h *h, uint64_t user, uint64_t cl, uint64_t orig, int64_t qty)
{
	struct wire_amend m;
	memset(&m, 0, sizeof(m));
	hdr(&m, WIRE_AMEND);
	m.user = user;
	m.cl_ord_id = cl;
	m.orig_cl_ord_id = orig;
	m.qty = qty;
	h_apply(h, &m);
}

void
h_replace(struct h *h, uint64_t user, uint64_t cl, uint64_t orig, int64_t px, int64_t qty)
{
	struct wire_cancel_replace m;
	memset(&m, 0, sizeof(m));
	hdr(&m, WIRE_CANCEL_REPLACE);
	m.user = user;
	m.cl_ord_id = cl;
	m.orig_cl_ord_id = orig;
	m.px = px;
	m.qty = qty;
	h_apply(h, &m);
}

void
h_transfer(struct h *h, uint64_t user, uint64_t id, uint32_t asset, int64_t amount)
{
	struct wire_transfer m;
	memset(&m, 0, sizeof(m));
	hdr(&m, WIRE_TRANSFER);
	m.user = user;
	m.transfer_id = id;
	m.asset = asset;
	m.amount = amount;
	h_apply(h, &m);
}

void
h_flush(struct h *h, uint64_t user, uint64_t epoch, uint8_t status, uint64_t version)
{
	struct wire_flush_complete m;
	memset(&m, 0, sizeof(m));
	hdr(&m, WIRE_FLUSH_COMPLETE);
	m.user = user;
	m.epoch = epoch;
	m.status = status;
	m.version = version;
	h_apply(h, &m);
}

void
h_event_msg(struct h *h, struct wire_me_event *e, uint64_t seq, struct wire_oid oid,
	    uint32_t symbol, uint8_t event)
{
	memset(e, 0, sizeof(*e));
	hdr(e, WIRE_ME_EVENT);
	e->hdr.shard = h->lim.shard_id;
	e->seq = seq;
	e->time_ns = h->now;
	e->oid = oid;
	e->symbol = symbol;
	e->event = event;
	const struct oms_symbol *s = oms_symbol_find(h->oms, symbol);
	const struct oms_order *o = oms_order_find(h->oms, oid.user, wire_oid_seq(oid));
	e->side = o != NULL ? o->side : WIRE_SIDE_BUY;
	(void)s;
}

static uint16_t
ms_of(const struct h *h, uint32_t symbol)
{
	const struct oms_symbol *s = oms_symbol_find(h->oms, symbol);
	cr_assert(s != NULL);
	return s->me_shard;
}

void
h_ev(struct h *h, struct wire_oid oid, uint32_t symbol, uint8_t event, int64_t px, int64_t qty,
     int64_t leaves, uint8_t liquidity)
{
	struct wire_me_event e;
	uint16_t ms = ms_of(h, symbol);
	h_event_msg(h, &e, h->me_seq[ms]++, oid, symbol, event);
	e.px = px;
	e.qty = qty;
	e.leaves_qty = leaves;
	e.liquidity = liquidity;
	if (event == WIRE_EV_FILL) {
		const struct oms_symbol *s = oms_symbol_find(h->oms, symbol);
		e.notional = px * qty / s->base_unit;
	}
	h_apply(h, &e);
}

void
h_ev_contra(struct h *h, struct wire_oid oid, uint32_t symbol, uint8_t event,
	    struct wire_oid contra, uint8_t cause, uint16_t reason, int64_t qty, int64_t leaves)
{
	struct wire_me_event e;
	uint16_t ms = ms_of(h, symbol);
	h_event_msg(h, &e, h->me_seq[ms]++, oid, symbol, event);
	e.contra = contra;
	e.cause = cause;
	e.reason = reason;
	e.qty = qty;
	e.leaves_qty = leaves;
	h_apply(h, &e);
}

struct wire_oid
h_oid(const struct h *h, uint64_t user, uint64_t seq)
{
	return wire_oid_make(h->lim.shard_id, user, seq);
}

struct wire_oid
h_last_ack_oid(const struct h *h)
{
	const struct wire_ack *a = NULL;
	for (uint32_t i = 0; i < h->n; i++)
		if (((const struct wire_msg_hdr *)(const void *)h->out[i].msg)->type == WIRE_ACK)
			a = (const void *)h->out[i].msg;
	cr_assert(a != NULL, "no ACK");
	return a->oid;
}

uint16_t
h_last_nak(const struct h *h)
{
	const struct wire_nak *a = NULL;
	for (uint32_t i = 0; i < h->n; i++)
		if (((const struct wire_msg_hdr *)(const void *)h->out[i].msg)->type == WIRE_NAK)
			a = (const void *)h->out[i].msg;
	return a == NULL ? 0 : a->reason;
}

int64_t
h_total(const struct h *h, uint64_t user, uint32_t asset)
{
	int64_t t, r;
	oms_balance_get(h->oms, user, asset, &t, &r);
	return t;
}

int64_t
h_reserved(const struct h *h, uint64_t user, uint32_t asset)
{
	int64_t t, r;
	oms_balance_get(h->oms, user, asset, &t, &r);
	return r;
}

uint32_t
h_status(const struct h *h, uint64_t user)
{
	struct oms_user_info i;
	oms_user_get(h->oms, user, &i);
	return i.status;
}

uint64_t
h_epoch(const struct h *h, uint64_t user)
{
	struct oms_user_info i;
	oms_user_get(h->oms, user, &i);
	return i.epoch;
}

uint64_t
h_ctr(const struct h *h, enum oms_counter c)
{
	return oms_counter_get(h->oms, c);
}

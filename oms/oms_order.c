/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admission: session dedup, rate limit, filters, the exact debit into a per-order
 * reservation, the saga record and its egress (provisional Ack + SubmitToME), and cancel /
 * amend / cancel-replace requests.
 *
 * Seed invariant 9: debit-first, debit-exact, release-the-remainder. Seed anti-pattern
 * "final-acking an order before the ME confirms": the Ack is provisional (pending), the
 * client later sees open | rejected.
 */
#include "oms/oms_int.h"

#define NANO INT64_C(1000000000)

/* ---- session: content hashes, dedup outcomes, replies, rate limit ---- */

static uint64_t
mix(uint64_t h, uint64_t v)
{
	h ^= v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
	return h * UINT64_C(0xff51afd7ed558ccd);
}

/* Rejections that depend only on the request and static config are part of its outcome;
 * transient ones (backpressure, rate, funds, capacity, ownership) are not remembered, so a
 * retransmission is evaluated afresh and can succeed — it was never executed. */
static bool
reason_final(uint16_t reason)
{
	switch (reason) {
	case WIRE_REASON_BAD_REQUEST:
	case WIRE_REASON_UNKNOWN_SYMBOL:
	case WIRE_REASON_OFF_TICK:
	case WIRE_REASON_OFF_LOT:
	case WIRE_REASON_BELOW_MIN_QTY:
	case WIRE_REASON_BELOW_MIN_NOTIONAL:
	case WIRE_REASON_OVERFLOW:
	case WIRE_REASON_AMEND_NOT_DOWN:
		return true;
	default:
		return false;
	}
}

/* The orderId's second word (this shard << 48 | user_seq): what a dedup entry remembers, so
 * the original orderId can be repeated wherever the user lives later. */
static uint64_t
oid_word(const struct oms *oms, const struct oms_actor *a, uint64_t user_seq)
{
	return wire_oid_make(oms->c.limits.shard_id, a->user, user_seq).shard_seq;
}

/* The last steps of every admission (new order, modify, cancel-replace), in one order:
 * remember the outcome for duplicates, ACK the client with the orderId, count, and send the
 * saga's first message to the ME. */
static void
admitted(struct oms *oms, struct oms_actor *a, struct oms_order *o, uint64_t cl_ord_id,
	 uint64_t content, enum oms_counter counter, struct svc_sink *sink)
{
	DCHECK(o->state == OMS_O_PENDING);
	DCHECK(o->actor == oms_actor_index(oms, a));
	uint64_t word = oid_word(oms, a, o->user_seq);
	oms_dedup_add(oms, a, OMS_DEDUP_ORDER, cl_ord_id, word, content, WIRE_REASON_NONE);
	oms_ack(oms, a, cl_ord_id, word, oms->c.now_ns, sink);
	oms_count(oms, counter);
	oms_build_to_me(oms, a, o, sink, NULL, NULL);
	DCHECK(a->dedup_count > 0);
}

/* Refuse a request; remember the outcome when it is final. */
static void
refuse(struct oms *oms, struct svc_sink *sink, struct oms_actor *a, uint64_t cl_ord_id,
       uint64_t content, uint16_t reason)
{
	DCHECK(reason != WIRE_REASON_NONE);
	if (reason_final(reason))
		oms_dedup_add(oms, a, OMS_DEDUP_ORDER, cl_ord_id, 0, content, reason);
	oms_nak(oms, sink, a, a->user, cl_ord_id, reason, 0);
}

/* A duplicate (user, clientOrderId): answer with the original outcome. */
static void
answer_duplicate(struct oms *oms, struct oms_actor *a, const struct oms_dedup *d,
		 uint64_t content, struct svc_sink *sink)
{
	DCHECK(d->kind == OMS_DEDUP_ORDER);
	oms_count(oms, OMS_C_DUPLICATES);
	/* content 0: an outcome that arrived with the user's state (its content is unknown). */
	if (d->content != 0 && d->content != content)
		oms_nak(oms, sink, a, a->user, d->id, WIRE_REASON_DUPLICATE_REQUEST, 0);
	else if (d->reason == WIRE_REASON_NONE)
		oms_ack(oms, a, d->id, d->user_seq, d->time_ns, sink);
	else
		oms_nak(oms, sink, a, a->user, d->id, d->reason, 0);
}

/* A request the window does not hold, at or below the user's forgotten high-water mark
 * (oms_actor.cl_ord_floor): its original may have executed and that outcome is gone, so it
 * is refused, never executed. The refusal is not remembered (it would push another outcome
 * out). Clients keep a user's clientOrderIds increasing (docs/oms.md). */
static bool
stale(struct oms *oms, struct oms_actor *a, uint64_t cl_ord_id, struct svc_sink *sink)
{
	if (cl_ord_id > a->cl_ord_floor)
		return false;
	oms_count(oms, OMS_C_STALE_REQUESTS);
	oms_nak(oms, sink, a, a->user, cl_ord_id, WIRE_REASON_STALE_REQUEST, 0);
	return true;
}

/* The resident actor for a client request, or NULL after parking or refusing it. */
static inline struct oms_actor *
client_actor(struct oms *oms, uint64_t user, uint64_t cl_ord_id, const struct wire_msg_hdr *msg,
	     struct svc_sink *sink)
{
	oms_count(oms, OMS_C_ORDERS_IN);
	if (user == 0) {
		oms_nak(oms, sink, NULL, user, cl_ord_id, WIRE_REASON_BAD_REQUEST, 0);
		return NULL;
	}
	struct oms_actor *a = oms_actor_find(oms, user);
	uint16_t owner = 0;
	if (a != NULL && oms_actor_serving(a)) {
		if (oms_actor_owned(oms, a, &owner, sink))
			return a; /* resident (a flushing actor is still in RAM: serve it) */
		/* Moving to its new owner: refused here, before its final flush. */
		oms_nak(oms, sink, NULL, user, cl_ord_id, WIRE_REASON_NOT_OWNER, owner);
		return NULL;
	}
	int r = oms_actor_park(oms, user, msg, false, true, sink, &owner);
	if (r != 0)
		oms_nak(oms, sink, NULL, user, cl_ord_id, (uint16_t)r, owner);
	return NULL;
}

/* Token bucket refilled by cluster time (no per-user timer). The bucket travels in the
 * flushed state (wire_user_state.rl_tokens, restored clamped by bucket_restore), and a spent
 * token needs no oms_actor_changed of its own: every caller touched the actor first
 * (oms_actor_touch marks it changed), so the next write-back or the eviction flush carries
 * the spend to the row. */
static bool
rate_ok(struct oms *oms, struct oms_actor *a)
{
	DCHECK(a->tier < OMS_TIERS_MAX); /* clamped at install, checked at restore */
	DCHECK(a->change_gen != a->clean_gen); /* touched: a flush will carry what we spend */
	const struct oms_tier *t = &oms->c.limits.tiers[a->tier];
	if (t->rate_per_s == 0)
		return true;
	int64_t cap = (int64_t)t->burst * NANO;
	uint64_t elapsed = oms->c.now_ns - a->tokens_ns;
	a->tokens_ns = oms->c.now_ns;
	if (elapsed >= (uint64_t)cap / t->rate_per_s + 1)
		a->tokens = cap;
	else
		a->tokens += (int64_t)elapsed * t->rate_per_s;
	if (a->tokens > cap)
		a->tokens = cap;
	if (a->tokens < NANO)
		return false;
	a->tokens -= NANO;
	DCHECK(a->tokens < cap);
	return true;
}

/* ---- the saga's first message ---- */

void
oms_build_to_me(const struct oms *oms, const struct oms_actor *a, const struct oms_order *o,
		struct svc_sink *sink, oms_msg_fn *fn, void *ctx)
{
	DCHECK(o->state == OMS_O_PENDING);
	DCHECK(sink != NULL || fn != NULL);
	uint16_t shard = oms->c.limits.shard_id;
	if (o->kind == OMS_K_ORDER && o->target_seq == 0) {
		/* Every field named, so the literal needs no zeroing first. Routing to the ME is
		 * static config: the symbol's shard (seed). */
		struct wire_submit s = {
			.hdr = { .type = WIRE_SUBMIT, .length = sizeof(s), .shard = o->me_shard,
				 .flags = 0 },
			.oid = wire_oid_make(shard, a->user, o->user_seq),
			.symbol = o->symbol,
			.side = o->side,
			.ord_type = o->ord_type,
			.tif = o->tif,
			.stp = o->stp,
			.px = o->px,
			.qty = o->qty,
			.quote_qty = o->budget,
			.expire_ns = o->expire_ns,
			.sent_ns = oms->c.now_ns,
		};
		static_assert(sizeof(s) == 72, "every field of wire_submit is named above");
		oms_out(sink, fn, ctx, WIRE_DEST_ME, &s.hdr);
		return;
	}
	struct wire_modify m;
	memset(&m, 0, sizeof(m));
	m.hdr.type = o->kind == OMS_K_CANCEL  ? WIRE_CANCEL_TO_ME
		     : o->kind == OMS_K_AMEND ? WIRE_AMEND_TO_ME
					      : WIRE_REPLACE_TO_ME;
	m.hdr.length = sizeof(m);
	m.hdr.shard = o->me_shard;
	m.req = wire_oid_make(shard, a->user, o->user_seq);
	/* A target adopted in a move keeps the orderId its first owner gave it. */
	m.target = wire_oid_make(o->target_shard, a->user, o->target_seq);
	m.symbol = o->symbol;
	m.px = o->kind == OMS_K_ORDER ? o->px : 0;
	m.qty = o->kind == OMS_K_CANCEL ? 0 : o->qty;
	m.sent_ns = oms->c.now_ns;
	oms_out(sink, fn, ctx, WIRE_DEST_ME, &m.hdr);
}

struct saga_walk {
	oms_saga_fn *fn;   /* the caller's */
	void *ctx;
	uint64_t began_ns; /* of the record being built */
};

static void
saga_walk_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	const struct saga_walk *w = ctx;
	DCHECK(dest == WIRE_DEST_ME);
	w->fn(w->ctx, msg, w->began_ns);
}

uint32_t
oms_pending_foreach_saga(const struct oms *oms, oms_saga_fn *fn, void *ctx)
{
	CHECK(oms != NULL);
	CHECK(fn != NULL);
	struct saga_walk w = { .fn = fn, .ctx = ctx, .began_ns = 0 };
	uint32_t n = 0;
	for (uint32_t ai = oms->c.lru.head; ai != OMS_NIL; ai = oms->actors[ai].next) {
		const struct oms_actor *a = &oms->actors[ai];
		for (uint32_t oi = a->order_head; oi != OMS_NIL; oi = oms->orders[oi].next) {
			const struct oms_order *o = &oms->orders[oi];
			w.began_ns = o->saga_ns;
			if (o->moving) {
				/* A move's REBIND_TO_ME is re-sent like a saga until its MOVED. */
				oms_build_rebind(oms, a, o, NULL, saga_walk_emit, &w);
				n++;
				continue;
			}
			if (o->state != OMS_O_PENDING)
				continue;
			oms_build_to_me(oms, a, o, NULL, saga_walk_emit, &w);
			n++;
		}
	}
	DCHECK(n == oms->c.inflight + oms->c.moving);
	return n;
}

uint32_t
oms_pending_foreach(const struct oms *oms, oms_msg_fn *fn, void *ctx)
{
	CHECK(oms != NULL);
	CHECK(fn != NULL);
	uint32_t n = 0;
	/* Seed: "PENDING_RESERVE is the bridge's durable work queue ... rebuild from state and
	 * idempotently re-drive every pending order". */
	for (uint32_t ai = oms->c.lru.head; ai != OMS_NIL; ai = oms->actors[ai].next) {
		const struct oms_actor *a = &oms->actors[ai];
		for (uint32_t oi = a->order_head; oi != OMS_NIL; oi = oms->orders[oi].next) {
			const struct oms_order *o = &oms->orders[oi];
			if (o->moving) {
				oms_build_rebind(oms, a, o, NULL, fn, ctx);
				n++;
				continue;
			}
			if (o->state != OMS_O_PENDING)
				continue;
			oms_build_to_me(oms, a, o, NULL, fn, ctx);
			n++;
		}
	}
	/* Hydrating actors hold no orders and flushing ones are flat: every saga was seen. */
	DCHECK(n == oms->c.inflight + oms->c.moving);
	return n;
}

/* ---- reservations (exact debit) ---- */

/* The largest notional n with n + fee(n, taker) <= spend: the market-buy budget sent to the
 * ME, so the client's spend covers notional and fees exactly. */
static int64_t
market_budget(int64_t spend, int16_t taker_bps)
{
	DCHECK(spend > 0);
	DCHECK(taker_bps >= 0); /* SYMBOL_CONFIG refuses a taker rebate */
	int64_t n = 0, f = 0;
	if (money_mul_div(spend, MONEY_BPS_DENOM, MONEY_BPS_DENOM + taker_bps, false, &n) != 0)
		return -1;
	for (int i = 0; i < 8 && n > 0; i++) {
		if (oms_fee(n, taker_bps, &f) != 0)
			return -1;
		if (n + f <= spend)
			break;
		n--;
	}
	for (int i = 0; i < 8; i++) {
		if (oms_fee(n + 1, taker_bps, &f) != 0 || n + 1 + f > spend)
			break;
		n++;
	}
	DCHECK(n <= spend);
	return n;
}

/* Reservation a buy of notional n needs (n + the fee bound); n is what limit_check found
 * for its price and leaves qty. */
static int
buy_reserve(const struct oms_symbol *s, int64_t n, int64_t *out)
{
	DCHECK(n >= 0); /* limit_check passed */
	int64_t f;
	if (oms_fee(n, oms_fee_bps_max(s), &f) != 0)
		return -EOVERFLOW;
	return money_add(n, f, out);
}

/* Validate the limit-order part shared by new orders and replacements; when it passes,
 * *notional is the order's (buy_reserve prices the reservation from it). */
static inline __attribute__((always_inline)) uint16_t
limit_check(const struct oms_symbol *s, int64_t px, int64_t qty, int64_t *notional)
{
	DCHECK(s->tick > 0); /* SYMBOL_CONFIG and restore refuse anything else */
	DCHECK(s->lot > 0);
	int64_t n;
	if (px <= 0 || qty <= 0)
		return WIRE_REASON_BAD_REQUEST;
	if (px % s->tick != 0)
		return WIRE_REASON_OFF_TICK;
	if (qty % s->lot != 0)
		return WIRE_REASON_OFF_LOT;
	if (qty < s->min_qty)
		return WIRE_REASON_BELOW_MIN_QTY;
	if (oms_notional(px, qty, s->base_unit, &n) != 0)
		return WIRE_REASON_OVERFLOW;
	if (n < s->min_notional)
		return WIRE_REASON_BELOW_MIN_NOTIONAL;
	*notional = n;
	return WIRE_REASON_NONE;
}

struct admit {
	int64_t reserve;     /* exact debit */
	int64_t budget;      /* market buy: notional budget for the ME */
	uint32_t res_asset;  /* asset debited */
	uint32_t recv_asset; /* asset a fill credits */
	struct oms_balance *res_balance; /* funds_check: the user's balance of res_asset */
};

static uint16_t
new_order_check(const struct oms *oms, const struct oms_symbol *s, const struct wire_new_order *m,
		struct admit *ad)
{
	if (m->side != WIRE_SIDE_BUY && m->side != WIRE_SIDE_SELL)
		return WIRE_REASON_BAD_REQUEST;
	if (m->tif < WIRE_TIF_GTC || m->tif > WIRE_TIF_POST_ONLY || m->stp > WIRE_STP_EXPIRE_BOTH)
		return WIRE_REASON_BAD_REQUEST;
	if (m->tif == WIRE_TIF_GTD && m->expire_ns <= oms->c.now_ns)
		return WIRE_REASON_BAD_REQUEST;
	bool buy = m->side == WIRE_SIDE_BUY;
	ad->res_asset = buy ? s->quote_asset : s->base_asset;
	ad->recv_asset = buy ? s->base_asset : s->quote_asset;
	ad->budget = 0;
	if (m->ord_type == WIRE_ORD_LIMIT) {
		if (m->quote_qty != 0)
			return WIRE_REASON_BAD_REQUEST;
		int64_t n;
		uint16_t r = limit_check(s, m->px, m->qty, &n);
		if (r != WIRE_REASON_NONE)
			return r;
		/* Limit buy = price × qty + max fee; limit sell = base qty. */
		if (!buy) {
			ad->reserve = m->qty;
			return WIRE_REASON_NONE;
		}
		return buy_reserve(s, n, &ad->reserve) == 0 ? WIRE_REASON_NONE
							     : WIRE_REASON_OVERFLOW;
	}
	if (m->ord_type != WIRE_ORD_MARKET || m->px != 0)
		return WIRE_REASON_BAD_REQUEST;
	if (m->tif != WIRE_TIF_IOC && m->tif != WIRE_TIF_FOK)
		return WIRE_REASON_BAD_REQUEST;
	if (!buy) {
		/* Market sell = base qty. */
		if (m->qty <= 0 || m->quote_qty != 0)
			return WIRE_REASON_BAD_REQUEST;
		if (m->qty % s->lot != 0)
			return WIRE_REASON_OFF_LOT;
		if (m->qty < s->min_qty)
			return WIRE_REASON_BELOW_MIN_QTY;
		ad->reserve = m->qty;
		return WIRE_REASON_NONE;
	}
	/* Market buy = the quote spend (fees included): lock the spend, not the unknown
	 * receive (seed; Binance quoteOrderQty). */
	if (m->qty != 0 || m->quote_qty <= 0)
		return WIRE_REASON_BAD_REQUEST;
	ad->budget = market_budget(m->quote_qty, s->taker_fee_bps);
	if (ad->budget < 0)
		return WIRE_REASON_OVERFLOW;
	if (ad->budget == 0 || ad->budget < s->min_notional)
		return WIRE_REASON_BELOW_MIN_NOTIONAL;
	ad->reserve = m->quote_qty;
	return WIRE_REASON_NONE;
}

/* Funds and slots for a reservation; NONE or a reason. Inline: one caller a request. */
static inline __attribute__((always_inline)) uint16_t
funds_check(struct oms *oms, struct oms_actor *a, struct admit *ad)
{
	DCHECK(ad->reserve > 0);
	DCHECK(ad->res_asset != ad->recv_asset);
	/* The asset a fill credits must have a slot before money can arrive in it (adding one
	 * moves no other slot: b stays what oms_balance_find would return). */
	struct oms_balance *recv, *b;
	oms_balance_find2(oms, a, ad->recv_asset, ad->res_asset, &recv, &b);
	if (recv == NULL && oms_balance_get_or_add(oms, a, ad->recv_asset) == NULL)
		return WIRE_REASON_CAPACITY;
	if (b == NULL || b->total - b->reserved < ad->reserve)
		return WIRE_REASON_INSUFFICIENT_FUNDS;
	ad->res_balance = b; /* the slot order_open reserves in: no slot is added after this */
	if (a->user_seq >= WIRE_USER_SEQ_MAX)
		return WIRE_REASON_OVERFLOW;
	return WIRE_REASON_NONE;
}

static bool
killed(const struct oms *oms, uint64_t user)
{
	return oms->c.kill_count != 0 && oms_tab_find(oms, OMS_TAG_KILL, user, 0) != OMS_NIL;
}

static uint64_t
new_order_content(const struct wire_new_order *m)
{
	uint64_t h = mix(0, m->symbol);
	h = mix(h, (uint64_t)m->side << 24 | (uint64_t)m->ord_type << 16 | (uint64_t)m->tif << 8 |
			   m->stp);
	h = mix(h, (uint64_t)m->px);
	h = mix(h, (uint64_t)m->qty);
	h = mix(h, (uint64_t)m->quote_qty);
	return mix(h, m->expire_ns) | 1; /* never 0 (0 means unknown) */
}

/* A new order record holding its exact reservation: a new order (target_seq 0) or the
 * replacement of order target_seq. n carries the order's terms; ad passed funds_check. */
static inline struct oms_order *
order_open(struct oms *oms, struct oms_actor *a, const struct wire_new_order *n,
	   uint64_t target_seq, uint16_t me_shard, const struct admit *ad)
{
	DCHECK(ad->reserve > 0);
	/* Seed invariant 7: orderId = {omsShard, user, userSeq}, derivable on replay. */
	struct oms_order *o = oms_order_slot(oms);
	oms_order_init(o, ++a->user_seq, oms_actor_index(oms, a), oms->c.limits.shard_id,
		       oms->c.now_ns);
	o->kind = OMS_K_ORDER;
	o->cl_ord_id = n->cl_ord_id;
	o->target_seq = target_seq;
	o->symbol = n->symbol;
	o->side = n->side;
	o->ord_type = n->ord_type;
	o->tif = n->tif;
	o->stp = n->stp;
	o->px = n->px;
	o->qty = n->qty;
	o->leaves = n->qty;
	o->quote_qty = n->quote_qty;
	o->budget = ad->budget;
	o->expire_ns = n->tif == WIRE_TIF_GTD ? n->expire_ns : 0;
	o->me_shard = me_shard;
	o->res_asset = ad->res_asset;
	o->recv_asset = ad->recv_asset;
	oms_order_attach(oms, a, o);
	oms_order_reserve_set_in(a, o, ad->res_balance, ad->reserve);
	DCHECK(o->reserved == ad->reserve);
	return o;
}

void
oms_on_new_order(struct oms *oms, const struct wire_new_order *m, struct svc_sink *sink)
{
	struct oms_actor *a = client_actor(oms, m->user, m->cl_ord_id, &m->hdr, sink);
	if (a == NULL)
		return;
	uint64_t content = new_order_content(m);
	const struct oms_dedup *d = oms_dedup_find(oms, a, OMS_DEDUP_ORDER, m->cl_ord_id);
	oms_actor_touch(oms, a);
	if (d != NULL) {
		answer_duplicate(oms, a, d, content, sink);
		return;
	}
	if (stale(oms, a, m->cl_ord_id, sink))
		return;
	if (killed(oms, a->user)) {
		oms_nak(oms, sink, a, a->user, m->cl_ord_id, WIRE_REASON_KILLED, 0);
		return;
	}
	if (!rate_ok(oms, a)) {
		oms_nak(oms, sink, a, a->user, m->cl_ord_id, WIRE_REASON_RATE_LIMITED, 0);
		return;
	}
	const struct oms_symbol *s = oms_symbol_find(oms, m->symbol);
	if (s == NULL) {
		refuse(oms, sink, a, m->cl_ord_id, content, WIRE_REASON_UNKNOWN_SYMBOL);
		return;
	}
	struct admit ad;
	uint16_t r = new_order_check(oms, s, m, &ad);
	if (r == WIRE_REASON_NONE && s->status == WIRE_SYM_HALTED)
		r = WIRE_REASON_HALTED;
	if (r == WIRE_REASON_NONE && (s->flags & OMS_SYM_KILLED))
		r = WIRE_REASON_KILLED;
	/* Seed: "When the in-flight count crosses a threshold ... the OMS stops accepting new
	 * orders rather than debiting users for orders it can't deliver." */
	if (r == WIRE_REASON_NONE && oms->c.inflight >= oms->c.limits.inflight_max)
		r = WIRE_REASON_BACKPRESSURE;
	if (r == WIRE_REASON_NONE && (oms->c.order_free_count == 0 ||
				      a->order_count >= oms->c.limits.orders_per_user))
		r = WIRE_REASON_CAPACITY;
	if (r == WIRE_REASON_NONE)
		r = funds_check(oms, a, &ad);
	if (r != WIRE_REASON_NONE) {
		refuse(oms, sink, a, m->cl_ord_id, content, r);
		return;
	}
	struct oms_order *o = order_open(oms, a, m, 0, s->me_shard, &ad);
	admitted(oms, a, o, m->cl_ord_id, content, OMS_C_SUBMITS, sink);
	DCHECK(a->order_count <= oms->c.limits.orders_per_user);
}

/* The live order a modify names by its clientOrderId. */
static struct oms_order *
target_find(struct oms *oms, struct oms_actor *a, uint64_t orig_cl_ord_id)
{
	for (uint32_t i = a->order_head; i != OMS_NIL; i = oms->orders[i].next) {
		struct oms_order *o = &oms->orders[i];
		if (o->kind == OMS_K_ORDER && o->cl_ord_id == orig_cl_ord_id)
			return o;
	}
	return NULL;
}

/* Common front of cancel / amend / replace. Returns the target or NULL (answered). */
static struct oms_order *
modify_front(struct oms *oms, struct oms_actor *a, uint64_t cl_ord_id, uint64_t orig,
	     uint64_t content, struct svc_sink *sink)
{
	const struct oms_dedup *d = oms_dedup_find(oms, a, OMS_DEDUP_ORDER, cl_ord_id);
	oms_actor_touch(oms, a);
	if (d != NULL) {
		answer_duplicate(oms, a, d, content, sink);
		return NULL;
	}
	if (stale(oms, a, cl_ord_id, sink))
		return NULL;
	struct oms_order *t = target_find(oms, a, orig);
	uint16_t r = WIRE_REASON_NONE;
	if (t == NULL)
		r = WIRE_REASON_UNKNOWN_ORDER;
	else if (t->mod_seq != 0)
		r = WIRE_REASON_BACKPRESSURE; /* one modify in flight per order */
	else if (oms->c.order_free_count == 0)
		r = WIRE_REASON_CAPACITY;
	else if (a->user_seq >= WIRE_USER_SEQ_MAX)
		r = WIRE_REASON_OVERFLOW;
	if (r != WIRE_REASON_NONE) {
		refuse(oms, sink, a, cl_ord_id, content, r);
		return NULL;
	}
	DCHECK(t->kind == OMS_K_ORDER);
	DCHECK(t->mod_seq == 0);
	return t;
}

static void
modify_commit(struct oms *oms, struct oms_actor *a, struct oms_order *t, uint8_t kind,
	      uint64_t cl_ord_id, uint64_t content, int64_t qty, struct svc_sink *sink)
{
	DCHECK(kind != OMS_K_ORDER); /* cancel or amend: a replacement is order_open's */
	struct oms_order *o = oms_order_alloc(oms, a, ++a->user_seq);
	o->kind = kind;
	o->cl_ord_id = cl_ord_id;
	o->target_seq = t->user_seq;
	o->symbol = t->symbol;
	o->side = t->side;
	o->ord_type = t->ord_type;
	o->qty = qty;
	o->me_shard = t->me_shard;
	o->res_asset = t->res_asset;
	o->recv_asset = t->recv_asset;
	o->target_shard = t->oid_shard;
	t->mod_seq = o->user_seq;
	admitted(oms, a, o, cl_ord_id, content, OMS_C_MODIFIES, sink);
	DCHECK(o->reserved == 0); /* a cancel or amend reserves nothing */
}

void
oms_on_cancel(struct oms *oms, const struct wire_cancel *m, struct svc_sink *sink)
{
	struct oms_actor *a = client_actor(oms, m->user, m->cl_ord_id, &m->hdr, sink);
	if (a == NULL)
		return;
	/* Cancels reduce risk: no rate limit, no in-flight cap, no kill-switch block. */
	uint64_t content = mix(mix(2, m->orig_cl_ord_id), 0) | 1;
	struct oms_order *t = modify_front(oms, a, m->cl_ord_id, m->orig_cl_ord_id, content, sink);
	if (t != NULL)
		modify_commit(oms, a, t, OMS_K_CANCEL, m->cl_ord_id, content, 0, sink);
}

void
oms_on_amend(struct oms *oms, const struct wire_amend *m, struct svc_sink *sink)
{
	struct oms_actor *a = client_actor(oms, m->user, m->cl_ord_id, &m->hdr, sink);
	if (a == NULL)
		return;
	uint64_t content = mix(mix(3, m->orig_cl_ord_id), (uint64_t)m->qty) | 1;
	struct oms_order *t = modify_front(oms, a, m->cl_ord_id, m->orig_cl_ord_id, content, sink);
	if (t == NULL)
		return;
	const struct oms_symbol *s = oms_symbol_find(oms, t->symbol);
	uint16_t r = WIRE_REASON_NONE;
	if (t->ord_type != WIRE_ORD_LIMIT || s == NULL)
		r = WIRE_REASON_BAD_REQUEST;
	else if (m->qty >= t->qty)
		r = WIRE_REASON_AMEND_NOT_DOWN;
	else if (m->qty <= t->cum_qty || m->qty % s->lot != 0)
		r = WIRE_REASON_BAD_REQUEST;
	if (r != WIRE_REASON_NONE) {
		refuse(oms, sink, a, m->cl_ord_id, content, r);
		return;
	}
	modify_commit(oms, a, t, OMS_K_AMEND, m->cl_ord_id, content, m->qty, sink);
}

void
oms_on_cancel_replace(struct oms *oms, const struct wire_cancel_replace *m, struct svc_sink *sink)
{
	struct oms_actor *a = client_actor(oms, m->user, m->cl_ord_id, &m->hdr, sink);
	if (a == NULL)
		return;
	uint64_t content =
		mix(mix(mix(4, m->orig_cl_ord_id), (uint64_t)m->px), (uint64_t)m->qty) | 1;
	struct oms_order *t = modify_front(oms, a, m->cl_ord_id, m->orig_cl_ord_id, content, sink);
	if (t == NULL)
		return;
	const struct oms_symbol *s = oms_symbol_find(oms, t->symbol);
	uint16_t r = WIRE_REASON_NONE;
	struct admit ad;
	int64_t notional = 0;
	memset(&ad, 0, sizeof(ad));
	if (killed(oms, a->user))
		r = WIRE_REASON_KILLED;
	else if (!rate_ok(oms, a))
		r = WIRE_REASON_RATE_LIMITED;
	else if (t->ord_type != WIRE_ORD_LIMIT || s == NULL)
		r = WIRE_REASON_BAD_REQUEST;
	else
		r = limit_check(s, m->px, m->qty, &notional);
	if (r == WIRE_REASON_NONE && s->status == WIRE_SYM_HALTED)
		r = WIRE_REASON_HALTED;
	if (r == WIRE_REASON_NONE && oms->c.inflight >= oms->c.limits.inflight_max)
		r = WIRE_REASON_BACKPRESSURE;
	if (r == WIRE_REASON_NONE && a->order_count >= oms->c.limits.orders_per_user)
		r = WIRE_REASON_CAPACITY;
	if (r == WIRE_REASON_NONE) {
		/* The replacement is a new order with its own exact reservation; the old one
		 * is released when its DONE arrives (no credit is taken from it in advance). */
		ad.res_asset = t->res_asset;
		ad.recv_asset = t->recv_asset;
		if (t->side == WIRE_SIDE_SELL)
			ad.reserve = m->qty;
		else if (buy_reserve(s, notional, &ad.reserve) != 0)
			r = WIRE_REASON_OVERFLOW;
	}
	if (r == WIRE_REASON_NONE)
		r = funds_check(oms, a, &ad);
	if (r != WIRE_REASON_NONE) {
		refuse(oms, sink, a, m->cl_ord_id, content, r);
		return;
	}
	/* The replacement: a limit order on the target's terms at the new price and qty (a
	 * target that is not GTD has expire_ns 0, as order_open would set it). */
	const struct wire_new_order n = {
		.cl_ord_id = m->cl_ord_id, .symbol = t->symbol, .side = t->side,
		.ord_type = WIRE_ORD_LIMIT, .tif = t->tif, .stp = t->stp,
		.px = m->px, .qty = m->qty, .expire_ns = t->expire_ns,
	};
	struct oms_order *o = order_open(oms, a, &n, t->user_seq, t->me_shard, &ad);
	o->target_shard = t->oid_shard;
	t->mod_seq = o->user_seq;
	admitted(oms, a, o, m->cl_ord_id, content, OMS_C_MODIFIES, sink);
	DCHECK(t->mod_seq == o->user_seq);
}

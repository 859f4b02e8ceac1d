/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ME's event streams (one per ME shard for this OMS shard, docs/me-contract.md), applied
 * strictly in sequence; settlement of fills and release of reservations, and the client
 * execution reports each event causes.
 *
 * Seed: "Reserve / settle / release are four logged, idempotent transitions ... A dropped
 * settle/release event is a money bug." Idempotence comes from the sequence: an event is
 * applied exactly once, at seq == next expected; duplicates are ignored, gaps are held and
 * the bridge is asked to replay.
 */
#include "oms/oms_int.h"

/* PENDING → LIVE: the saga's first step is answered (the order's first event, which says it
 * was accepted: WIRE_EV_F_ENTERED, or an earlier release's ACCEPTED). */
static void
promote(struct oms *oms, struct oms_actor *a, struct oms_order *o)
{
	if (o->state != OMS_O_PENDING || o->kind != OMS_K_ORDER)
		return;
	o->state = OMS_O_LIVE;
	oms_saga_end(oms, a);
	a->live++;
	DCHECK(a->live <= a->order_count);
}

/* Shrink a limit order's reservation to what its leaves can still cost (after an amend or a
 * partial cancel); never grows it. */
static void
reserve_trim(struct oms *oms, struct oms_actor *a, struct oms_order *o, const struct oms_symbol *s)
{
	DCHECK(o->kind == OMS_K_ORDER);
	const int64_t before = o->reserved;
	int64_t need = o->reserved;
	if (o->leaves <= 0) {
		need = 0;
	} else if (o->side == WIRE_SIDE_SELL) {
		need = o->leaves;
	} else if (o->ord_type == WIRE_ORD_LIMIT && s != NULL) {
		int64_t n, f;
		if (oms_notional(o->px, o->leaves, s->base_unit, &n) == 0 &&
		    oms_fee(n, oms_fee_bps_max(s), &f) == 0 && n <= INT64_MAX - f)
			need = n + f;
	}
	if (need < o->reserved)
		oms_order_reserve_set(oms, a, o, need);
	DCHECK(o->reserved <= before);
}

/* a's balances of s's base and quote assets, a slot added for either that has none (NULL
 * when none is free): oms_balance_get_or_add of the base, then of the quote. One look at the
 * slots when both are there, as they are for every admitted order. */
static void
balances_of(struct oms *oms, struct oms_actor *a, const struct oms_symbol *s,
	    struct oms_balance **base, struct oms_balance **quote)
{
	struct oms_balance *pb, *pq;
	/* SYMBOL_CONFIG refuses a symbol whose assets are 0 or the same. */
	oms_balance_find2(oms, a, s->base_asset, s->quote_asset, &pb, &pq);
	if (pb == NULL || pq == NULL) {
		pb = oms_balance_get_or_add(oms, a, s->base_asset);
		pq = oms_balance_get_or_add(oms, a, s->quote_asset);
	}
	*base = pb;
	*quote = pq;
}

/* oms_order_reserve_set, given a balance of the settlement that may be the one o reserves
 * in (it is, for every order whose symbol is s: a symbol never changes its assets). */
static inline __attribute__((always_inline)) void
reserve_set(struct oms *oms, struct oms_actor *a, struct oms_order *o, struct oms_balance *b,
	    int64_t reserved)
{
	if (b->asset == o->res_asset)
		oms_order_reserve_set_in(a, o, b, reserved);
	else
		oms_order_reserve_set(oms, a, o, reserved);
}

/* Settle one fill leg at its real notional with the symbol's maker/taker fee, charged in
 * the quote asset as the growth of the order's fee (oms_order_fee: rounded once on the
 * order's cumulative maker and taker notional). Buyer pays notional + fee out of the
 * reservation, which covers it by construction; seller receives notional − fee. Returns
 * the fee charged. */
static int64_t
settle(struct oms *oms, struct oms_actor *a, struct oms_order *o, const struct oms_symbol *s,
       const struct wire_me_event *ev)
{
	DCHECK(s != NULL);
	DCHECK(o->side == WIRE_SIDE_BUY || o->side == WIRE_SIDE_SELL);
	int64_t qty = ev->qty, notional = ev->notional, check;
	if (qty <= 0 || notional < 0) {
		oms_count(oms, OMS_C_ALARM_BAD_STATE);
		return 0;
	}
	if (oms_notional(ev->px, qty, s->base_unit, &check) != 0 || check != notional)
		oms_count(oms, OMS_C_ALARM_RECON_MISMATCH);
	bool maker = ev->liquidity == 1;
	int64_t *cum = maker ? &o->notional_maker : &o->notional_taker;
	int64_t after, f0 = 0, f1, fee;
	bool first = o->notional_maker == 0 && o->notional_taker == 0; /* F(0, 0) = 0 */
	if (money_add(*cum, notional, &after) != 0 ||
	    (!first && oms_order_fee(o->notional_maker, o->notional_taker, s->maker_fee_bps,
				     s->taker_fee_bps, &f0) != 0) ||
	    oms_order_fee(maker ? after : o->notional_maker, maker ? o->notional_taker : after,
			  s->maker_fee_bps, s->taker_fee_bps, &f1) != 0) {
		oms_count(oms, OMS_C_ALARM_OVERFLOW);
		return 0;
	}
	fee = f1 - f0;
	struct oms_balance *base, *quote;
	balances_of(oms, a, s, &base, &quote);
	if (base == NULL || quote == NULL) {
		oms_count(oms, OMS_C_ALARM_SETTLE_SHORTFALL);
		return 0;
	}
	int64_t *fees = &oms->fees[s->fee_slot].amount;
	if (o->side == WIRE_SIDE_BUY) {
		int64_t need = notional + fee;
		int64_t from_res = need < o->reserved ? need : o->reserved;
		int64_t extra = need - from_res;
		if (extra > 0 && fee > 0) {
			/* Not reached by an admitted order while the ME keeps its contract (the
			 * reservation bounds every settlement); an orphan fill has none. The venue
			 * absorbs the fee rather than touch unreserved funds. */
			int64_t cut = extra < fee ? extra : fee;
			fee -= cut;
			extra -= cut;
			oms_count(oms, OMS_C_FEE_CAPPED);
		}
		if (extra > 0) {
			int64_t avail = quote->total - quote->reserved;
			oms_count(oms, OMS_C_ALARM_SETTLE_SHORTFALL);
			if (extra > avail)
				extra = avail; /* never a negative available balance */
		}
		if (base->total > INT64_MAX - qty) {
			oms_count(oms, OMS_C_ALARM_OVERFLOW);
			return 0;
		}
		reserve_set(oms, a, o, quote, o->reserved - from_res);
		quote->total -= from_res + extra;
		base->total += qty;
		*fees += fee;
	} else {
		int64_t from_res = qty < o->reserved ? qty : o->reserved;
		int64_t extra = qty - from_res;
		if (extra > 0) {
			int64_t avail = base->total - base->reserved;
			oms_count(oms, OMS_C_ALARM_SETTLE_SHORTFALL);
			if (extra > avail)
				extra = avail;
		}
		if (quote->total > INT64_MAX - (notional - fee)) {
			oms_count(oms, OMS_C_ALARM_OVERFLOW);
			return 0;
		}
		reserve_set(oms, a, o, base, o->reserved - from_res);
		base->total -= from_res + extra;
		quote->total += notional - fee;
		*fees += fee;
	}
	*cum = after;
	oms_actor_changed(oms, a); /* the totals moved: a write-back is due */
	o->cum_qty += qty;
	o->leaves = ev->leaves_qty;
	oms_count(oms, OMS_C_FILLS);
	/* Settlement never leaves a negative available balance (shortfalls are capped). */
	DCHECK(base->reserved <= base->total);
	DCHECK(quote->reserved <= quote->total);
	return fee;
}

/* An event about an order we do not know: an impossible state. A fill still moved money
 * at the ME, so settle it from available funds when they suffice. */
static void
event_unknown(struct oms *oms, struct oms_actor *a, const struct wire_me_event *ev)
{
	oms_count(oms, OMS_C_ALARM_UNKNOWN_ORDER);
	if (ev->event != WIRE_EV_FILL)
		return;
	const struct oms_symbol *s = oms_symbol_find(oms, ev->symbol);
	oms_count(oms, OMS_C_ALARM_ORPHAN_FILL);
	if (s == NULL || (ev->side != WIRE_SIDE_BUY && ev->side != WIRE_SIDE_SELL))
		return;
	struct oms_order tmp;
	memset(&tmp, 0, sizeof(tmp));
	tmp.side = ev->side;
	tmp.res_asset = ev->side == WIRE_SIDE_BUY ? s->quote_asset : s->base_asset;
	settle(oms, a, &tmp, s, ev);
}

/* ADOPTED: a live order of this user moves here from the shard that owned the user before
 * (docs/fencing.md "Moving a user with open orders"). The record is rebuilt from what the
 * ME and the old owner knew (wire.h, ADOPTED), and its reservation is taken again from the
 * balance total the old owner's final flush handed over. */
static void
adopt(struct oms *oms, struct oms_actor *a, const struct wire_me_event *ev,
      const struct oms_symbol *sym)
{
	const struct oms_symbol *s = sym != NULL && sym->symbol == ev->symbol
					     ? sym
					     : oms_symbol_find(oms, ev->symbol);
	uint64_t seq = wire_oid_seq(ev->oid);
	int64_t reserved = (int64_t)ev->contra_user;
	uint16_t from = wire_oid_shard(ev->oid);
	/* (from may be this shard: an order that comes back after two moves.) */
	if (s == NULL || oms_order_find(oms, a->user, seq) != NULL ||
	    seq > a->user_seq || reserved < 0 || oms->c.order_free_count == 0 ||
	    a->order_count >= oms->c.limits.orders_per_user) {
		/* Not an order this user could have had open elsewhere, or no room for it. */
		oms_count(oms, OMS_C_ALARM_BAD_STATE);
		return;
	}
	uint32_t res_asset = ev->side == WIRE_SIDE_BUY ? s->quote_asset : s->base_asset;
	uint32_t recv_asset = ev->side == WIRE_SIDE_BUY ? s->base_asset : s->quote_asset;
	struct oms_balance *rb = oms_balance_get_or_add(oms, a, res_asset);
	if (oms_balance_get_or_add(oms, a, recv_asset) == NULL || rb == NULL ||
	    reserved > rb->total - rb->reserved) {
		/* The handed-over total cannot hold the reservation: money went astray. */
		oms_count(oms, OMS_C_ALARM_BAD_STATE);
		return;
	}
	struct oms_order *o = oms_order_alloc(oms, a, seq);
	o->kind = OMS_K_ORDER;
	o->cl_ord_id = ev->contra.user;
	o->qty = (int64_t)ev->contra.shard_seq;
	o->px = ev->px;
	o->leaves = ev->leaves_qty;
	o->cum_qty = ev->qty;
	o->notional_maker = (int64_t)ev->trade_id;
	o->notional_taker = ev->notional;
	o->symbol = ev->symbol;
	o->side = ev->side;
	o->ord_type = ev->liquidity;
	o->tif = ev->cause;
	o->stp = (uint8_t)ev->reason;
	o->res_asset = res_asset;
	o->recv_asset = recv_asset;
	/* The symbol's ME shard as this shard knows it now, not the one that emitted the
	 * ADOPTED: one parked for a hydrating user may be applied after the symbol moved (the
	 * book, and the order, live on the target by then); one the target emitted before this
	 * shard's routing switch is re-pointed by that switch (oms_on_symbol_config). */
	o->me_shard = s->me_shard;
	o->oid_shard = from;
	o->last_seq = ev->seq;
	/* The saga ended long ago on the old owner: the record is live from the start. */
	o->state = OMS_O_LIVE;
	oms_saga_end(oms, a);
	a->live++;
	oms_order_reserve_set(oms, a, o, reserved);
	oms_count(oms, OMS_C_ORDERS_ADOPTED);
}

/* The modify record a target event names in contra, resolved. */
static void
modify_resolve(struct oms *oms, struct oms_actor *a, struct oms_order *t,
	       const struct wire_me_event *ev)
{
	DCHECK(t->kind == OMS_K_ORDER);
	if (t->mod_seq == 0 || ev->contra.user != a->user ||
	    wire_oid_seq(ev->contra) != t->mod_seq)
		return;
	struct oms_order *m = oms_order_find(oms, a->user, t->mod_seq);
	t->mod_seq = 0;
	if (m == NULL)
		return;
	DCHECK(m != t);
	if (m->kind == OMS_K_AMEND && ev->event == WIRE_EV_AMENDED)
		t->qty = m->qty;
	if (m->kind == OMS_K_CANCEL || m->kind == OMS_K_AMEND)
		oms_order_free(oms, a, m);
	/* A replacement order stays PENDING: its own first event follows (contract). */
}

/* A refused modify (or a refused replacement order): terminal for the request. */
static void
modify_refused(struct oms *oms, struct oms_actor *a, struct oms_order *m,
	       const struct wire_me_event *ev, struct svc_sink *sink)
{
	struct oms_order *t = oms_order_find(oms, a->user, m->target_seq);
	if (t != NULL && t->mod_seq == m->user_seq)
		t->mod_seq = 0;
	oms_exec_report(oms, a, m, WIRE_EXEC_CANCEL_REJECTED, 0, sink, 0, ev->reason, 0, 0, 0, 0);
	oms_order_free(oms, a, m); /* a replacement's reservation is released here */
}

/* The flags of the report of event ev: WIRE_REPORT_F_DONE when the event leaves nothing of
 * the order live (WIRE_EV_F_DONE), which ends the order with that report (order_end). */
static inline uint16_t
report_flags(struct oms_order *o, const struct wire_me_event *ev)
{
	if ((ev->hdr.flags & WIRE_EV_F_DONE) == 0)
		return 0;
	o->leaves = 0;
	return WIRE_REPORT_F_DONE;
}

/* The order is done: nothing of it is live, and its last report said so (flags, from
 * report_flags). Terminal: release whatever the fills did not use (market-buy budget, price
 * improvement, the unused fee bound). */
static inline void
order_end(struct oms *oms, struct oms_actor *a, struct oms_order *o, uint16_t flags)
{
	if (flags & WIRE_REPORT_F_DONE)
		oms_order_free(oms, a, o);
}

/* Apply event ev (not ADOPTED) to a, touched already, whose record for the event's user_seq
 * is o (NULL: none). */
static void
order_event(struct oms *oms, struct oms_actor *a, struct oms_order *o,
	    const struct wire_me_event *ev, const struct oms_symbol *sym, struct svc_sink *sink)
{
	DCHECK(a->state == OMS_A_RESIDENT);
	DCHECK(ev->event != WIRE_EV_ADOPTED);
	if (o == NULL || oms_order_oid_shard(oms, o) != wire_oid_shard(ev->oid)) {
		event_unknown(oms, a, ev);
		return;
	}
	/* The symbol is looked up only by the transitions that price something. */
	const struct oms_symbol *s = NULL;
	o->last_seq = ev->seq;
	if (ev->event == WIRE_EV_FILL || ev->event == WIRE_EV_CANCELLED ||
	    ev->event == WIRE_EV_AMENDED)
		s = ev->symbol == o->symbol && sym != NULL ? sym : oms_symbol_find(oms, o->symbol);
	bool is_order = o->kind == OMS_K_ORDER;
	/* The order's first event says the ME took it (docs/me-contract.md); a pending order's
	 * RESTED, FILL or DONE without it (or an ACCEPTED before) is out of order. */
	bool entered = (ev->hdr.flags & WIRE_EV_F_ENTERED) != 0;
	if (entered && (!is_order || o->state != OMS_O_PENDING))
		oms_count(oms, OMS_C_ALARM_EVENT_ORDER); /* taken twice, or not an order */
	bool unentered = !entered && o->state == OMS_O_PENDING;
	switch (ev->event) {
	case WIRE_EV_ACCEPTED: /* an ME of an earlier release: its own event */
		if (!is_order || o->state != OMS_O_PENDING)
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
		promote(oms, a, o);
		break;
	case WIRE_EV_REJECTED:
		if (!is_order) {
			modify_refused(oms, a, o, ev, sink);
			break;
		}
		if (o->state != OMS_O_PENDING)
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
		if (o->target_seq != 0) {
			struct oms_order *t = oms_order_find(oms, a->user, o->target_seq);
			if (t != NULL && t->mod_seq == o->user_seq)
				t->mod_seq = 0;
		}
		o->leaves = 0;
		oms_exec_report(oms, a, o, WIRE_EXEC_REJECTED, WIRE_REPORT_F_DONE, sink, 0,
				ev->reason, 0, 0, 0, 0);
		oms_order_free(oms, a, o); /* credit-back: release the whole reservation */
		break;
	case WIRE_EV_RESTED:
		if (!is_order) {
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
			break;
		}
		if (unentered)
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
		promote(oms, a, o);
		o->leaves = ev->qty;
		oms_exec_report(oms, a, o, WIRE_EXEC_OPEN, 0, sink, 0, 0, ev->px, 0, 0, 0);
		break;
	case WIRE_EV_FILL: {
		if (!is_order || s == NULL) {
			event_unknown(oms, a, ev);
			break;
		}
		if (unentered)
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
		promote(oms, a, o);
		int64_t fee = settle(oms, a, o, s, ev);
		uint16_t flags = report_flags(o, ev);
		oms_exec_report(oms, a, o, WIRE_EXEC_FILL, flags, sink, 0, 0, ev->px, ev->qty, fee,
				ev->liquidity);
		order_end(oms, a, o, flags);
		break;
	}
	case WIRE_EV_CANCELLED: {
		if (!is_order) {
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
			break;
		}
		promote(oms, a, o);
		o->leaves = ev->leaves_qty;
		modify_resolve(oms, a, o, ev);
		if (o->ord_type == WIRE_ORD_LIMIT || o->leaves == 0)
			reserve_trim(oms, a, o, s);
		uint16_t flags = report_flags(o, ev);
		oms_exec_report(oms, a, o, WIRE_EXEC_CANCELLED, flags, sink, ev->cause, 0, 0, ev->qty,
				0, 0);
		order_end(oms, a, o, flags);
		break;
	}
	case WIRE_EV_AMENDED: {
		if (!is_order) {
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
			break;
		}
		promote(oms, a, o);
		o->leaves = ev->qty;
		modify_resolve(oms, a, o, ev);
		reserve_trim(oms, a, o, s);
		uint16_t flags = report_flags(o, ev);
		oms_exec_report(oms, a, o, WIRE_EXEC_AMENDED, flags, sink, 0, 0, 0, 0, 0, 0);
		order_end(oms, a, o, flags);
		break;
	}
	case WIRE_EV_DONE:
		if (!is_order) {
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
			break;
		}
		if (unentered)
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
		/* A market buy whose budget buys no further lot (an earlier ME's DONE after
		 * every order's last event): its own report. */
		o->leaves = 0;
		oms_exec_report(oms, a, o, WIRE_EXEC_DONE, WIRE_REPORT_F_DONE, sink, 0, 0, 0, 0, 0,
				0);
		oms_order_free(oms, a, o);
		break;
	case WIRE_EV_CANCEL_REJECTED:
		if (o->state != OMS_O_PENDING)
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
		modify_refused(oms, a, o, ev, sink);
		break;
	case WIRE_EV_MOVED:
		/* The order reports to the user's new owner from here on (ADOPTED there, with
		 * its reservation): it leaves this shard without a report to the client, and
		 * its funds stay in the balance total the final flush hands over. */
		if (!is_order || o->state != OMS_O_LIVE || !o->moving)
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER);
		if (o->mod_seq != 0) {
			oms_count(oms, OMS_C_ALARM_EVENT_ORDER); /* quiesced: impossible */
			break;
		}
		oms_order_free(oms, a, o);
		oms_count(oms, OMS_C_ORDERS_MOVED_OUT);
		if (a->flags & OMS_AF_MOVING)
			a->flags |= OMS_AF_HANDED; /* the new owner adopts it: the claim follows */
		if (a->flags & OMS_AF_MOVING)
			oms_actor_move_out(oms, a, sink); /* after the last one: flush and drop */
		break;
	default:
		DCHECK(0 && "event type checked by oms_on_me_event");
		break;
	}
}

void
oms_event_apply(struct oms *oms, struct oms_actor *a, const struct wire_me_event *ev,
		const struct oms_symbol *sym, struct svc_sink *sink)
{
	DCHECK(a->state == OMS_A_RESIDENT || a->state == OMS_A_FLUSHING);
	/* oms_on_me_event refused any other event type before it was sequenced or parked. */
	DCHECK(ev->event >= WIRE_EV_ACCEPTED);
	DCHECK(ev->event < WIRE_EV_MAX);
	oms_actor_touch(oms, a);
	DCHECK(a->state == OMS_A_RESIDENT); /* activity cancels an in-window flush */
	if (ev->event == WIRE_EV_ADOPTED) {
		adopt(oms, a, ev, sym);
		return;
	}
	order_event(oms, a, oms_order_find(oms, a->user, wire_oid_seq(ev->oid)), ev, sym, sink);
}

/* ---- stream sequencing ---- */

static struct wire_me_event *
held_of(struct oms *oms, uint16_t ms)
{
	DCHECK(ms < oms->c.limits.me_shards_max);
	return &oms->held[(size_t)ms * oms->c.limits.held_max];
}

static void
maybe_replay(struct oms *oms, uint16_t ms, struct svc_sink *sink)
{
	DCHECK(ms < oms->c.limits.me_shards_max);
	struct oms_stream *st = &oms->streams[ms];
	if (oms->c.now_ns < st->replay_next_ns)
		return;
	/* Rate-limited: one request per stream per interval, not one per event. */
	st->replay_next_ns = oms->c.now_ns + oms->c.limits.replay_interval_ns;
	struct wire_replay_request m;
	memset(&m, 0, sizeof(m));
	m.from_seq = st->next_seq;
	m.stream = oms->c.limits.shard_id;
	oms_count(oms, OMS_C_REPLAY_REQUESTS);
	OMS_EMIT(sink, WIRE_DEST_ME, m, WIRE_REPLAY_REQUEST, ms);
}

static void
stream_ack(struct oms *oms, uint16_t ms, struct svc_sink *sink)
{
	DCHECK(ms < oms->c.limits.me_shards_max);
	struct oms_stream *st = &oms->streams[ms];
	struct wire_stream_ack m;
	DCHECK(st->next_seq > 0); /* streams start at 1 */
	memset(&m, 0, sizeof(m));
	st->acked_seq = st->next_seq - 1;
	m.seq = st->acked_seq;
	m.stream = oms->c.limits.shard_id;
	oms_count(oms, OMS_C_STREAM_ACKS);
	OMS_EMIT(sink, WIRE_DEST_ME, m, WIRE_STREAM_ACK, ms);
}

/* Hold an out-of-order event (sorted by seq, bounded; the replay re-sends what we drop). */
static void
hold(struct oms *oms, uint16_t ms, const struct wire_me_event *ev)
{
	struct oms_stream *st = &oms->streams[ms];
	struct wire_me_event *h = held_of(oms, ms);
	uint32_t n = st->held_count, i = 0;
	DCHECK(ev->seq > st->next_seq); /* only events beyond a gap are held */
	while (i < n && h[i].seq < ev->seq)
		i++;
	if (i < n && h[i].seq == ev->seq) {
		oms_count(oms, OMS_C_EVENTS_DUP);
		return;
	}
	if (n == oms->c.limits.held_max) {
		oms_count(oms, OMS_C_EVENTS_HELD_DROPPED);
		return;
	}
	memmove(&h[i + 1], &h[i], sizeof(h[0]) * (n - i));
	h[i] = *ev;
	st->held_count++;
	oms_count(oms, OMS_C_EVENTS_HELD);
	DCHECK(st->held_count <= oms->c.limits.held_max);
	DCHECK(i + 1 == st->held_count || h[i].seq < h[i + 1].seq); /* still sorted */
}

/* Consume one in-sequence event. False: it cannot be taken now (no slot to park it for a
 * hydrate-on-miss); the stream stays at this seq and the replay brings it again. */
static inline bool
consume(struct oms *oms, const struct wire_me_event *ev, const struct oms_symbol *s,
	struct svc_sink *sink)
{
	/* A sequenced event names a configured symbol (symbols are never removed). */
	DCHECK(s != NULL);
	/* The stream is ours (oms_on_me_event): its orders carry our orderIds, or those of the
	 * shard they were adopted from (oms_order.oid_shard). */
	if (ev->oid.user == 0) {
		oms_count(oms, OMS_C_EVENTS_FOREIGN);
		return true;
	}
	/* Most events are about an order we hold. Its record names its actor, which is resident
	 * (only a resident actor holds records: a flushing one is flat, a hydrating or waiting
	 * one has run nothing yet), so the user needs no lookup of its own. What oms_event_apply
	 * does then, in the same order: touch, find the record, apply. */
	if (ev->event != WIRE_EV_ADOPTED) {
		struct oms_order *o = oms_order_find_hinted(oms, ev->oid.user, wire_oid_seq(ev->oid));
		if (o != NULL) {
			struct oms_actor *a = &oms->actors[o->actor];
			DCHECK(a->user == ev->oid.user);
			DCHECK(a->state == OMS_A_RESIDENT);
			oms_actor_touch(oms, a);
			order_event(oms, a, o, ev, s, sink);
			return true;
		}
	}
	struct oms_actor *a = oms_actor_find(oms, ev->oid.user);
	if (a != NULL && oms_actor_serving(a)) {
		oms_event_apply(oms, a, ev, s, sink);
		return true;
	}
	/* Seed: "a fill for a non-resident user triggers hydrate-on-miss, so it is never
	 * dropped": park it (already sequenced) and apply it once HydrateUser lands. */
	uint16_t owner;
	return oms_actor_park(oms, ev->oid.user, &ev->hdr, true, false, sink, &owner) == 0;
}

void
oms_on_me_event(struct oms *oms, const struct wire_me_event *m, struct svc_sink *sink)
{
	if (m->hdr.shard != oms->c.limits.shard_id) {
		oms_count(oms, OMS_C_EVENTS_FOREIGN);
		return;
	}
	if (m->event < WIRE_EV_ACCEPTED || m->event >= WIRE_EV_MAX || m->seq == 0) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return;
	}
	/* The stream is the one of the ME shard that emitted the event (wire_me_event.me_shard),
	 * not the one that owns the symbol now: after a live symbol move (docs/oms.md "Moving a
	 * symbol between ME shards") the source shard's late events about it (rejects of
	 * submits it refused while frozen, duplicates, replays) count in the source's sequence,
	 * and would corrupt the target's. An event from a build before symbol moves carries 0:
	 * the symbol's map entry names its stream then, as it always did. */
	if (m->me_shard >= oms->c.limits.me_shards_max) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return;
	}
	const struct oms_symbol *s = oms_symbol_find(oms, m->symbol);
	if (s == NULL) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return;
	}
	uint16_t ms = m->me_shard != 0 ? m->me_shard : s->me_shard;
	DCHECK(ms < oms->c.limits.me_shards_max);
	struct oms_stream *st = &oms->streams[ms];
	oms_count(oms, OMS_C_EVENTS);
	if (m->seq < st->next_seq) {
		oms_count(oms, OMS_C_EVENTS_DUP);
		return;
	}
	if (m->seq > st->next_seq) {
		hold(oms, ms, m);
		maybe_replay(oms, ms, sink);
		return;
	}
	if (!consume(oms, m, s, sink)) {
		oms_count(oms, OMS_C_EVENTS_BLOCKED);
		maybe_replay(oms, ms, sink);
		return;
	}
	st->next_seq++;
	/* Later events held behind a gap now run in order. */
	while (st->held_count > 0) {
		struct wire_me_event *h = held_of(oms, ms);
		if (h[0].seq > st->next_seq)
			break;
		if (h[0].seq == st->next_seq) {
			if (!consume(oms, &h[0], oms_symbol_find(oms, h[0].symbol), sink)) {
				oms_count(oms, OMS_C_EVENTS_BLOCKED);
				break;
			}
			st->next_seq++;
		}
		st->held_count--;
		memmove(&h[0], &h[1], sizeof(h[0]) * st->held_count);
	}
	/* Whatever is still held lies beyond the next expected seq (or is blocked at it). */
	DCHECK(st->held_count == 0 || held_of(oms, ms)[0].seq >= st->next_seq);
	if (st->next_seq - 1 - st->acked_seq >= oms->c.limits.stream_ack_every)
		stream_ack(oms, ms, sink);
}

void
oms_streams_tick(struct oms *oms, struct svc_sink *sink)
{
	for (uint16_t ms = 0; ms < oms->c.limits.me_shards_max; ms++) {
		struct oms_stream *st = &oms->streams[ms];
		if (st->next_seq - 1 > st->acked_seq)
			stream_ack(oms, ms, sink);
		if (st->held_count > 0)
			maybe_replay(oms, ms, sink);
	}
}

void
oms_on_me_result(struct oms *oms, const struct wire_me_result *m, struct svc_sink *sink)
{
	/* Unsequenced: the bridge uses it to stop re-driving; the state itself arrives (or is
	 * replayed) through the stream, so it changes no money. But it names the last stream
	 * seq that concerns the order: if we have not applied that far, the tail of the stream
	 * was lost (no later event revealed the gap), so ask for a replay. */
	oms_count(oms, OMS_C_RESULTS);
	if (m->reason == WIRE_REASON_DUPLICATE_ID_MISMATCH)
		oms_count(oms, OMS_C_ALARM_BAD_STATE); /* we rebuild submits byte-identically */
	if (!m->known)
		return;
	/* An ME_RESULT names no ME shard: it comes from the one its request went to, which is
	 * the record's me_shard while we hold the record (a pending submit of a moved symbol
	 * stays on the source, a live order follows the book, oms_on_symbol_config), else the
	 * symbol's. */
	uint16_t ms;
	const struct oms_order *o = oms_order_find(oms, m->oid.user, wire_oid_seq(m->oid));
	if (o != NULL && oms_order_oid_shard(oms, o) == wire_oid_shard(m->oid)) {
		ms = o->me_shard;
	} else {
		const struct oms_symbol *s = oms_symbol_find(oms, m->symbol);
		if (s == NULL)
			return;
		ms = s->me_shard;
	}
	DCHECK(ms < oms->c.limits.me_shards_max);
	if (m->last_seq >= oms->streams[ms].next_seq)
		maybe_replay(oms, ms, sink);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include "fake_me.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
fme_init(struct fme *m, struct prng *p)
{
	memset(m, 0, sizeof(*m));
	m->orders = calloc(FME_ORDERS_MAX, sizeof(*m->orders));
	for (int i = 0; i < FME_SHARDS; i++)
		m->log[i] = calloc(FME_LOG_MAX, sizeof(struct wire_me_event));
	m->snaps = calloc(4096, sizeof(*m->snaps));
	m->prng = p;
}

void
fme_fini(struct fme *m)
{
	free(m->orders);
	for (int i = 0; i < FME_SHARDS; i++)
		free(m->log[i]);
	free(m->snaps);
}

void
fme_symbol(struct fme *m, uint32_t symbol, uint16_t me_shard, int64_t base_unit, int64_t lot)
{
	cr_assert(m->sym_count < FME_SYMS && me_shard < FME_SHARDS);
	m->syms[m->sym_count++] = (struct fme_sym){ symbol, me_shard, base_unit, lot };
}

static const struct fme_sym *
sym(const struct fme *m, uint32_t symbol)
{
	for (uint32_t i = 0; i < m->sym_count; i++)
		if (m->syms[i].symbol == symbol)
			return &m->syms[i];
	cr_assert(0, "fake ME: unknown symbol %u", symbol);
	return NULL;
}

static struct fme_order *
find(struct fme *m, struct wire_oid oid)
{
	for (uint32_t i = m->order_count; i-- > 0;)
		if (wire_oid_eq(m->orders[i].oid, oid))
			return &m->orders[i];
	return NULL;
}

static struct wire_me_event *
emit(struct fme *m, struct fme_order *o, uint8_t event)
{
	const struct fme_sym *s = sym(m, o->symbol);
	uint16_t ms = s->me_shard;
	cr_assert(m->log_count[ms] < FME_LOG_MAX);
	struct wire_me_event *e = &m->log[ms][m->log_count[ms]];
	memset(e, 0, sizeof(*e));
	e->hdr.type = WIRE_ME_EVENT;
	e->hdr.length = sizeof(*e);
	e->hdr.shard = wire_oid_shard(o->oid);
	e->seq = ++m->log_count[ms];
	e->time_ns = m->now;
	e->oid = o->oid;
	e->symbol = o->symbol;
	e->event = event;
	e->side = o->side;
	e->me_shard = ms; /* the emitter (0 is also what a build before symbol moves sends) */
	e->leaves_qty = o->leaves;
	if (o->entering) {
		e->hdr.flags = WIRE_EV_F_ENTERED;
		o->entering = 0;
	}
	return e;
}

/* As the ME: the event that leaves nothing of the order live says so (WIRE_EV_F_DONE) when
 * it is the last one emitted in this input, about o, of a kind that may; else a DONE of its
 * own (which the ME sends for a market buy's spent budget, and the OMS takes any time). */
static void
done(struct fme *m, struct fme_order *o)
{
	o->live = 0;
	o->leaves = 0;
	uint16_t ms = sym(m, o->symbol)->me_shard;
	uint32_t n = m->log_count[ms];
	struct wire_me_event *last = n > m->log_mark[ms] ? &m->log[ms][n - 1] : NULL;
	if (last != NULL && wire_oid_eq(last->oid, o->oid) &&
	    (last->event == WIRE_EV_FILL || last->event == WIRE_EV_CANCELLED) &&
	    !(o->type == WIRE_ORD_MARKET && o->side == WIRE_SIDE_BUY)) {
		last->hdr.flags |= WIRE_EV_F_DONE;
		return;
	}
	emit(m, o, WIRE_EV_DONE);
}

static void
mark(struct fme *m)
{
	for (uint32_t i = 0; i < FME_SHARDS; i++)
		m->log_mark[i] = m->log_count[i];
}

static bool
crosses(const struct fme_order *t, const struct fme_order *k)
{
	if (t->type == WIRE_ORD_MARKET)
		return true;
	return t->side == WIRE_SIDE_BUY ? k->px <= t->px : k->px >= t->px;
}

/* Best resting contra order: best price, then oldest. */
static struct fme_order *
best(struct fme *m, const struct fme_order *t)
{
	struct fme_order *b = NULL;
	for (uint32_t i = 0; i < m->order_count; i++) {
		struct fme_order *k = &m->orders[i];
		if (!k->live || k == t || k->symbol != t->symbol || k->side == t->side ||
		    k->type != WIRE_ORD_LIMIT || !crosses(t, k))
			continue;
		if (b == NULL || (t->side == WIRE_SIDE_BUY ? k->px < b->px : k->px > b->px))
			b = k;
	}
	return b;
}

/* As the ME: no ACCEPTED of its own, the order's first event says it was taken. */
static void
run(struct fme *m, struct fme_order *t)
{
	const struct fme_sym *s = sym(m, t->symbol);
	if (m->reject_pct && prng_below(m->prng, 100) < m->reject_pct) {
		struct wire_me_event *e = emit(m, t, WIRE_EV_REJECTED);
		e->reason = WIRE_REASON_OUTSIDE_BAND;
		e->leaves_qty = 0;
		t->leaves = 0;
		return;
	}
	t->entering = 1;
	t->live = 1;
	for (;;) {
		bool mbuy = t->type == WIRE_ORD_MARKET && t->side == WIRE_SIDE_BUY;
		if (!mbuy && t->leaves == 0)
			break;
		struct fme_order *k = best(m, t);
		if (k == NULL)
			break;
		int64_t q = k->leaves;
		if (mbuy) {
			int64_t qmax = t->budget * s->base_unit / k->px;
			qmax -= qmax % s->lot;
			if (qmax < q)
				q = qmax;
		} else if (t->leaves < q) {
			q = t->leaves;
		}
		if (q <= 0)
			break;
		int64_t notional = k->px * q / s->base_unit;
		if (mbuy)
			t->budget -= notional;
		else
			t->leaves -= q;
		k->leaves -= q;
		t->cum += q;
		k->cum += q;
		struct wire_me_event *e = emit(m, t, WIRE_EV_FILL);
		e->px = k->px;
		e->qty = q;
		e->notional = notional;
		e->liquidity = 2;
		e->contra = k->oid;
		e->contra_user = k->oid.user;
		e = emit(m, k, WIRE_EV_FILL);
		e->px = k->px;
		e->qty = q;
		e->notional = notional;
		e->liquidity = 1;
		e->contra = t->oid;
		e->contra_user = t->oid.user;
		if (k->leaves == 0)
			done(m, k);
	}
	if (t->type == WIRE_ORD_MARKET || t->tif == WIRE_TIF_IOC) {
		if (t->leaves > 0 || t->type == WIRE_ORD_MARKET) {
			int64_t q = t->leaves;
			t->leaves = 0;
			struct wire_me_event *e = emit(m, t, WIRE_EV_CANCELLED);
			e->cause = t->type == WIRE_ORD_MARKET ? WIRE_CAUSE_NO_LIQUIDITY : WIRE_CAUSE_IOC;
			e->qty = q;
		}
		done(m, t);
	} else if (t->leaves > 0) {
		struct wire_me_event *e = emit(m, t, WIRE_EV_RESTED);
		e->px = t->px;
		e->qty = t->leaves;
	} else {
		done(m, t);
	}
}

static struct fme_order *
add(struct fme *m, struct wire_oid oid, uint32_t symbol, uint8_t side, uint8_t type, uint8_t tif,
    int64_t px, int64_t qty, int64_t budget)
{
	cr_assert(m->order_count < FME_ORDERS_MAX);
	struct fme_order *o = &m->orders[m->order_count++];
	memset(o, 0, sizeof(*o));
	o->oid = oid;
	o->symbol = symbol;
	o->side = side;
	o->type = type;
	o->tif = tif;
	o->px = px;
	o->leaves = qty;
	o->budget = budget;
	return o;
}

static void
refuse_modify(struct fme *m, const struct wire_modify *r, const struct fme_order *t, uint16_t why)
{
	struct fme_order tmp;
	memset(&tmp, 0, sizeof(tmp));
	tmp.oid = r->req;
	tmp.symbol = r->symbol;
	tmp.side = t != NULL ? t->side : WIRE_SIDE_BUY;
	struct wire_me_event *e = emit(m, &tmp, WIRE_EV_CANCEL_REJECTED);
	e->contra = r->target;
	e->reason = why;
	e->leaves_qty = 0;
	add(m, r->req, r->symbol, tmp.side, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 0, 0, 0); /* dedup */
}

static void
snapshot(struct fme *m, const struct wire_open_orders_query *q)
{
	uint16_t ms = q->hdr.shard;
	struct wire_open_orders_snapshot *s = NULL;
	uint8_t part = 0;
	for (uint32_t i = 0; i < m->order_count; i++) {
		const struct fme_order *o = &m->orders[i];
		if (!o->live || o->oid.user != q->user || sym(m, o->symbol)->me_shard != ms)
			continue;
		if (s == NULL || s->count == WIRE_OPEN_ORDERS_MAX) {
			cr_assert(m->snap_count < 4096);
			s = &m->snaps[m->snap_count++];
			memset(s, 0, sizeof(*s));
			s->hdr.type = WIRE_OPEN_ORDERS_SNAPSHOT;
			s->hdr.length = sizeof(*s);
			s->hdr.shard = q->oms_shard;
			s->user = q->user;
			s->req_id = q->req_id;
			s->as_of_seq = m->log_count[ms];
			s->me_shard = ms;
			s->part = part++;
		}
		struct wire_open_order *e = &s->orders[s->count++];
		e->oid = o->oid;
		e->symbol = o->symbol;
		e->side = o->side;
		e->px = o->px;
		e->leaves_qty = o->leaves;
	}
	if (s == NULL) {
		cr_assert(m->snap_count < 4096);
		s = &m->snaps[m->snap_count++];
		memset(s, 0, sizeof(*s));
		s->hdr.type = WIRE_OPEN_ORDERS_SNAPSHOT;
		s->hdr.length = sizeof(*s);
		s->hdr.shard = q->oms_shard;
		s->user = q->user;
		s->req_id = q->req_id;
		s->as_of_seq = m->log_count[ms];
		s->me_shard = ms;
	}
	s->last = 1;
}

void
fme_input(struct fme *m, const struct wire_msg_hdr *msg)
{
	mark(m);
	switch (msg->type) {
	case WIRE_SUBMIT: {
		const struct wire_submit *s = (const void *)msg;
		if (find(m, s->oid) != NULL) {
			if (getenv("OMS_PROP_TRACE"))
				fprintf(stderr, "me: duplicate submit user %lu seq %lu\n",
					(unsigned long)s->oid.user, (unsigned long)wire_oid_seq(s->oid));
			return; /* dedup: the stream already carries its state */
		}
		struct fme_order *o = add(m, s->oid, s->symbol, s->side, s->ord_type, s->tif, s->px,
					  s->qty, s->quote_qty);
		run(m, o);
		break;
	}
	case WIRE_CANCEL_TO_ME:
	case WIRE_AMEND_TO_ME:
	case WIRE_REPLACE_TO_ME: {
		const struct wire_modify *r = (const void *)msg;
		if (find(m, r->req) != NULL)
			return;
		struct fme_order *t = find(m, r->target);
		if (t == NULL || !t->live) {
			refuse_modify(m, r, t, t == NULL ? WIRE_REASON_UNKNOWN_ORDER
							 : WIRE_REASON_TOO_LATE);
			return;
		}
		if (msg->type == WIRE_CANCEL_TO_ME) {
			int64_t q = t->leaves;
			t->leaves = 0;
			struct wire_me_event *e = emit(m, t, WIRE_EV_CANCELLED);
			e->cause = WIRE_CAUSE_USER;
			e->qty = q;
			e->contra = r->req;
			done(m, t);
			add(m, r->req, r->symbol, t->side, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 0, 0, 0);
		} else if (msg->type == WIRE_AMEND_TO_ME) {
			int64_t leaves = r->qty - t->cum;
			if (leaves <= 0 || leaves >= t->leaves) {
				refuse_modify(m, r, t, WIRE_REASON_AMEND_NOT_DOWN);
				return;
			}
			t->leaves = leaves;
			struct wire_me_event *e = emit(m, t, WIRE_EV_AMENDED);
			e->qty = leaves;
			e->contra = r->req;
			add(m, r->req, r->symbol, t->side, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 0, 0, 0);
		} else {
			int64_t q = t->leaves;
			t->leaves = 0;
			struct wire_me_event *e = emit(m, t, WIRE_EV_CANCELLED);
			e->cause = WIRE_CAUSE_REPLACED;
			e->qty = q;
			e->contra = r->req;
			done(m, t);
			struct fme_order *n = add(m, r->req, t->symbol, t->side, WIRE_ORD_LIMIT,
						  t->tif, r->px, r->qty, 0);
			run(m, n);
		}
		break;
	}
	case WIRE_OPEN_ORDERS_QUERY:
		snapshot(m, (const void *)msg);
		break;
	default:
		break;
	}
}

void
fme_expire_random(struct fme *m)
{
	mark(m);
	uint32_t live = fme_live_count(m);
	if (live == 0)
		return;
	uint32_t pick = (uint32_t)prng_below(m->prng, live);
	for (uint32_t i = 0; i < m->order_count; i++) {
		struct fme_order *o = &m->orders[i];
		if (!o->live || pick-- != 0)
			continue;
		int64_t q = o->leaves;
		o->leaves = 0;
		struct wire_me_event *e = emit(m, o, WIRE_EV_CANCELLED);
		e->cause = WIRE_CAUSE_EXPIRED;
		e->qty = q;
		done(m, o);
		return;
	}
}

uint32_t
fme_live_count(const struct fme *m)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->order_count; i++)
		n += m->orders[i].live;
	return n;
}

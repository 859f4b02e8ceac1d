/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reconciliation: the money-leak backstop (seed). A periodic, capped sweep on cluster time
 * asks the ME for chosen users' open orders; a snapshot as of stream seq S is applied only
 * once this shard has applied that ME shard's stream through S, so both sides describe the
 * same instant. Phantom orders are closed and their reservations released; reservations not
 * backed by an order are released; impossible states raise alarm counters.
 */
#include "oms/oms_int.h"

uint32_t
oms_recon_leaks(struct oms *oms, struct oms_actor *a)
{
	DCHECK(a->state != OMS_A_FREE);
	const uint32_t n = oms->c.limits.assets_per_user;
	struct oms_balance *bal = oms_actor_balances(oms, a);
	int64_t sums[WIRE_BALANCES_MAX];
	uint32_t healed = 0;
	memset(sums, 0, sizeof(sums));
	for (uint32_t i = a->order_head; i != OMS_NIL; i = oms->orders[i].next) {
		const struct oms_order *o = &oms->orders[i];
		for (uint32_t k = 0; k < n; k++)
			if (bal[k].asset == o->res_asset && o->reserved > 0)
				sums[k] += o->reserved;
	}
	for (uint32_t k = 0; k < n; k++) {
		if (bal[k].reserved != sums[k]) {
			/* A reservation no order explains: release it (never below what the
			 * orders hold, so available stays non-negative). */
			oms_count(oms, OMS_C_ALARM_RECON_LEAK);
			bal[k].reserved = sums[k];
			healed++;
		}
		if (bal[k].total < 0 || bal[k].reserved > bal[k].total)
			oms_count(oms, OMS_C_ALARM_BAD_STATE);
		DCHECK(bal[k].reserved == sums[k]);
	}
	DCHECK(healed <= n);
	return healed;
}

/* The parts of one snapshot travel as separate messages: the network may reorder, lose or
 * repeat them, and another snapshot's parts may come in between. Only an unbroken run
 * part 0, 1, ... of one req_id is applied; the phantom pass on its last part then knows
 * every listed order was marked. Anything else (a final part whose predecessors are
 * missing, an old part repeated after a newer query re-marked the orders) is dropped whole:
 * the next sweep asks again. */
static bool
parts_in_order(struct oms *oms, const struct wire_open_orders_snapshot *m)
{
	if (m->part == 0) {
		oms->c.recon_part_req = m->req_id;
		oms->c.recon_part_next = 0;
	}
	if (m->req_id != oms->c.recon_part_req || m->part != oms->c.recon_part_next) {
		oms->c.recon_part_req = 0;
		return false;
	}
	if (m->last) {
		oms->c.recon_part_req = 0;
		oms->c.recon_part_next = 0;
	} else {
		oms->c.recon_part_next++;
	}
	DCHECK(oms->c.recon_part_next <= UINT8_MAX + 1);
	return true;
}

void
oms_on_open_orders_snapshot(struct oms *oms, const struct wire_open_orders_snapshot *m,
			    struct svc_sink *sink)
{
	oms_count(oms, OMS_C_RECON_SNAPSHOTS);
	if (m->hdr.shard != oms->c.limits.shard_id || m->me_shard >= oms->c.limits.me_shards_max ||
	    m->count > WIRE_OPEN_ORDERS_MAX) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return;
	}
	struct oms_actor *a = oms_actor_find(oms, m->user);
	if (a == NULL || a->state != OMS_A_RESIDENT) {
		oms_count(oms, OMS_C_RECON_DEFERRED);
		return;
	}
	DCHECK(a->user == m->user);
	/* Only once our stream from that ME shard is applied through as_of_seq: otherwise an
	 * order the ME finished a moment ago would look like a phantom. */
	if (oms->streams[m->me_shard].next_seq - 1 < m->as_of_seq) {
		oms_count(oms, OMS_C_RECON_DEFERRED);
		return;
	}
	if (!parts_in_order(oms, m)) {
		oms_count(oms, OMS_C_RECON_DEFERRED);
		return;
	}
	for (uint32_t i = 0; i < m->count; i++) {
		const struct wire_open_order *e = &m->orders[i];
		struct oms_order *o = NULL;
		if (e->oid.user == m->user) {
			o = oms_order_find(oms, m->user, wire_oid_seq(e->oid));
			/* Ours, or adopted from the shard its orderId names. */
			if (o != NULL && oms_order_oid_shard(oms, o) != wire_oid_shard(e->oid))
				o = NULL;
		}
		if (o == NULL && e->oid.user == m->user && wire_oid_seq(e->oid) <= a->user_seq) {
			/* We applied its DONE after as_of_seq (or its MOVED, or it is bound to
			 * another shard's stream: the snapshot lists the user's orders whatever
			 * stream they report to): not comparable. */
			oms_count(oms, OMS_C_RECON_TRANSIENT);
			continue;
		}
		if (o == NULL || o->kind != OMS_K_ORDER) {
			/* The ME rests an order this shard never issued: impossible, flag it. */
			oms_count(oms, OMS_C_ALARM_RECON_UNKNOWN);
			continue;
		}
		if (o->me_shard != m->me_shard) {
			/* It lives on another ME shard now (its symbol moved, oms_route.c
			 * repoint): a frozen source's copy is not the order's state. */
			oms_count(oms, OMS_C_RECON_TRANSIENT);
			continue;
		}
		o->recon_req = m->req_id;
		if (o->last_seq > m->as_of_seq)
			oms_count(oms, OMS_C_RECON_TRANSIENT); /* changed since: not comparable */
		else if (o->leaves != e->leaves_qty)
			oms_count(oms, OMS_C_ALARM_RECON_MISMATCH);
		else
			oms_count(oms, OMS_C_RECON_MATCHED);
	}
	if (!m->last)
		return;
	if (m->req_id <= oms->c.recon_floor_req) {
		/* Asked before a symbol's routing switch: the target may have answered before
		 * it opened the moved book, so a re-pointed order it does not list is no phantom.
		 * The next sweep asks again. */
		oms_count(oms, OMS_C_RECON_TRANSIENT);
		oms_recon_leaks(oms, a);
		return;
	}
	uint32_t i = a->order_head;
	while (i != OMS_NIL) {
		struct oms_order *o = &oms->orders[i];
		i = o->next;
		if (o->kind != OMS_K_ORDER || o->state != OMS_O_LIVE || o->me_shard != m->me_shard)
			continue;
		if (o->recon_req == m->req_id)
			continue;
		if (o->last_seq > m->as_of_seq) {
			oms_count(oms, OMS_C_RECON_TRANSIENT); /* it became live after the snapshot */
			continue;
		}
		/* Phantom: we think it is live, the ME (as of the same seq) does not. Close it
		 * and release its reservation (a dropped expiry would otherwise freeze funds and
		 * keep the user from ever being flat). */
		oms_count(oms, OMS_C_ALARM_RECON_PHANTOM);
		if (o->mod_seq != 0) {
			struct oms_order *mod = oms_order_find(oms, a->user, o->mod_seq);
			o->mod_seq = 0;
			DCHECK(mod != o);
			if (mod != NULL && mod->kind != OMS_K_ORDER) {
				if (i != OMS_NIL && mod == &oms->orders[i])
					i = mod->next;
				oms_order_free(oms, a, mod);
			}
		}
		o->leaves = 0;
		oms_exec_report(oms, a, o, WIRE_EXEC_CANCELLED, WIRE_REPORT_F_DONE, sink,
				WIRE_CAUSE_RECONCILE, 0, 0, 0, 0, 0);
		oms_order_free(oms, a, o);
	}
	oms_recon_leaks(oms, a);
	DCHECK(a->live <= a->order_count);
}

static void
query(struct oms *oms, struct oms_actor *a, uint16_t ms, struct svc_sink *sink)
{
	DCHECK(ms < oms->c.limits.me_shards_max);
	DCHECK(a->live > 0); /* only users with live orders are queried */
	struct wire_open_orders_query q;
	memset(&q, 0, sizeof(q));
	q.user = a->user;
	q.req_id = ++oms->c.recon_req_seq;
	q.oms_shard = oms->c.limits.shard_id;
	oms_count(oms, OMS_C_RECON_QUERIES);
	OMS_EMIT(sink, WIRE_DEST_ME, q, WIRE_OPEN_ORDERS_QUERY, ms);
}

void
oms_recon_sweep(struct oms *oms, struct svc_sink *sink)
{
	const struct oms_limits *l = &oms->c.limits;
	uint32_t chosen = 0;
	DCHECK(l->reconcile_interval_ns != 0); /* the timer is off otherwise */
	for (uint32_t n = 0; n < l->reconcile_scan_max && chosen < l->reconcile_users_max; n++) {
		if (oms->c.recon_cursor >= oms->actor_slots)
			oms->c.recon_cursor = 0;
		struct oms_actor *a = &oms->actors[oms->c.recon_cursor++];
		if (a->state != OMS_A_RESIDENT)
			continue;
		oms_recon_leaks(oms, a);
		if (a->live == 0)
			continue;
		chosen++;
		/* One query per ME shard holding one of the user's live orders. */
		for (uint32_t i = a->order_head; i != OMS_NIL; i = oms->orders[i].next) {
			const struct oms_order *o = &oms->orders[i];
			if (o->kind != OMS_K_ORDER || o->state != OMS_O_LIVE)
				continue;
			bool seen = false;
			for (uint32_t j = a->order_head; j != i; j = oms->orders[j].next) {
				const struct oms_order *p = &oms->orders[j];
				if (p->kind == OMS_K_ORDER && p->state == OMS_O_LIVE &&
				    p->me_shard == o->me_shard)
					seen = true;
			}
			if (!seen)
				query(oms, a, o->me_shard, sink);
		}
	}
	DCHECK(chosen <= l->reconcile_users_max);
	DCHECK(oms->c.recon_cursor <= oms->actor_slots);
}

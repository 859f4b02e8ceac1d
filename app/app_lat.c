/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gateway latency of new orders (app.h, struct app_lat; docs/appliance.md "Benchmarks").
 *
 * What is measured: the TSC the io lcore read right after the rx burst that brought the
 * order's frame (dp_meta.rx_tsc), against the TSC read when the gateway hands the answer to
 * the client's outgoing frame (gw_client). So each figure covers io parse and route → the
 * gateway → the OMS shard (propose, commit, apply) → [for the final: bridge → ME shard →
 * results back into the OMS log → apply] → the gateway. It does not cover the NIC, the
 * frame's wait in the gateway's outbox until the end of that duty cycle, the tx queue, and
 * the io lcore's tx burst (at most one io cycle on an unloaded node).
 *
 *   lat_rx_ack_ns:   RX of a NEW_ORDER → its provisional ACK.
 *   lat_rx_final_ns: RX of a NEW_ORDER → the first report that settles it after the ME:
 *                    OPEN (rests), or its last report (WIRE_REPORT_F_DONE: the last FILL,
 *                    an IOC/market remainder's CANCELLED; a REJECTED by the ME).
 *
 * Orders are keyed by (user, cl_ord_id) in a fixed table (a cache: an entry that has to
 * make room is counted as lost and its answers go untimed). Single writer: the gateway
 * lcore. The main lcore reads the histograms and counters while it runs (slightly stale).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_malloc.h>

#include "app.h"
#include "app_reqtab.h"

#define MASK (APP_LAT_SLOTS - 1)

#define BUMP(x) __atomic_store_n(&(x), (x) + 1, __ATOMIC_RELAXED)

int
app_lat_init(struct app_lat **out, unsigned socket)
{
	struct app_lat *l = rte_zmalloc_socket("app_lat", sizeof(*l), RTE_CACHE_LINE_SIZE,
					       (int)socket);
	if (l == NULL)
		return -ENOMEM;
	l->ents = rte_zmalloc_socket("app_lat_ents", sizeof(*l->ents) * APP_LAT_SLOTS,
				     RTE_CACHE_LINE_SIZE, (int)socket);
	if (l->ents == NULL) {
		rte_free(l);
		return -ENOMEM;
	}
	l->tsc_hz = rte_get_tsc_hz();
	hist_init(&l->ack);
	hist_init(&l->final);
	*out = l;
	return 0;
}

void
app_lat_free(struct app_lat *l)
{
	if (l == NULL)
		return;
	rte_free(l->ents);
	rte_free(l);
}

static struct app_reqtab_ent *
find(struct app_lat *l, uint64_t user, uint64_t cl_ord_id, struct app_reqtab_ent **free_slot)
{
	return app_reqtab_find(l->ents, MASK, user, cl_ord_id, free_slot);
}

static uint64_t
tsc_to_ns(const struct app_lat *l, uint64_t tsc)
{
	/* Split so that the multiplication cannot overflow for any realistic delta. */
	return tsc / l->tsc_hz * 1000000000u + tsc % l->tsc_hz * 1000000000u / l->tsc_hz;
}

uint64_t
app_lat_since_ns(const struct app_lat *l, uint64_t tsc)
{
	uint64_t now = rte_rdtsc();
	return now > tsc ? tsc_to_ns(l, now - tsc) : 0;
}

void
app_lat_rx(struct app_lat *l, const struct wire_msg_hdr *msg, uint64_t rx_tsc, uint16_t shard)
{
	if (l == NULL || msg->type != WIRE_NEW_ORDER)
		return;
	const struct wire_new_order *o = (const void *)msg;
	if (o->user == 0)
		return;
	struct app_reqtab_ent *e;
	if (find(l, o->user, o->cl_ord_id, &e) != NULL)
		return; /* a retransmission: the client's first send is the one that counts */
	if (e == NULL) {
		/* The window is full: the claim at the key's home loses. */
		e = &l->ents[app_reqtab_home(o->user, o->cl_ord_id, MASK)];
		BUMP(l->lost);
	}
	*e = (struct app_reqtab_ent){ .user = o->user, .cl_ord_id = o->cl_ord_id, .t0 = rx_tsc,
				      .shard = shard };
	if (l->orders == 0)
		__atomic_store_n(&l->first_rx_tsc, rx_tsc, __ATOMIC_RELAXED);
	BUMP(l->orders);
}

bool
app_lat_tx(struct app_lat *l, const struct wire_msg_hdr *msg, uint64_t *answer_ns,
	   uint16_t *shard)
{
	uint64_t user, cl_ord_id;
	bool final;

	if (l == NULL)
		return false;
	switch (msg->type) {
	case WIRE_ACK: {
		const struct wire_ack *a = (const void *)msg;
		user = a->user;
		cl_ord_id = a->cl_ord_id;
		final = false;
		break;
	}
	case WIRE_NAK: {
		const struct wire_nak *n = (const void *)msg;
		if (n->user == 0)
			return false;
		struct app_reqtab_ent *e = find(l, n->user, n->cl_ord_id, NULL);
		if (e == NULL)
			return false;
		BUMP(l->naked);
		struct app_reqtab_ent was = *e;
		app_reqtab_remove(l->ents, MASK, e);
		if (was.acked != 0)
			return false;
		uint64_t now = rte_rdtsc();
		*answer_ns = now > was.t0 ? tsc_to_ns(l, now - was.t0) : 0;
		*shard = (uint16_t)was.shard;
		return true; /* an answer all the same: its time says how long the queue is */
	}
	case WIRE_EXEC_REPORT: {
		const struct wire_exec_report *r = (const void *)msg;
		if (r->exec != WIRE_EXEC_OPEN && !wire_report_final(r))
			return false;
		user = r->user;
		cl_ord_id = r->cl_ord_id;
		final = true;
		break;
	}
	default:
		return false;
	}
	if (user == 0)
		return false;
	struct app_reqtab_ent *e = find(l, user, cl_ord_id, NULL);
	if (e == NULL)
		return false;
	uint64_t now = rte_rdtsc();
	uint64_t ns = now > e->t0 ? tsc_to_ns(l, now - e->t0) : 0;
	if (!final) {
		if (e->acked != 0)
			return false;
		hist_record(&l->ack, ns);
		BUMP(l->acked);
		e->acked = 1;
		*answer_ns = ns;
		*shard = (uint16_t)e->shard;
		return true;
	}
	hist_record(&l->final, ns);
	BUMP(l->finals);
	__atomic_store_n(&l->last_final_tsc, now, __ATOMIC_RELAXED);
	app_reqtab_remove(l->ents, MASK, e);
	return false;
}

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static void
hist_write(const struct hist *h, const char *prefix, const char *name, FILE *out)
{
	static const struct {
		const char *label;
		double p;
	} qs[] = {{"p50", 50.0}, {"p90", 90.0}, {"p99", 99.0}, {"p999", 99.9}};
	uint64_t count = LOAD(h->count);
	fprintf(out, "%s.%s.count %" PRIu64 "\n", prefix, name, count);
	fprintf(out, "%s.%s.min %" PRIu64 "\n", prefix, name, count ? LOAD(h->min) : 0);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
		fprintf(out, "%s.%s.%s %" PRIu64 "\n", prefix, name, qs[i].label,
			hist_percentile(h, qs[i].p));
	fprintf(out, "%s.%s.max %" PRIu64 "\n", prefix, name, LOAD(h->max));
	fprintf(out, "%s.%s.mean %" PRIu64 "\n", prefix, name, count ? LOAD(h->sum) / count : 0);
}

void
app_hist_lines(FILE *out, const char *name, const struct hist *h)
{
	uint64_t n = LOAD(h->count);
	fprintf(out, "%s.count %" PRIu64 "\n", name, n);
	fprintf(out, "%s.p50_ns %" PRIu64 "\n", name, hist_percentile(h, 50));
	fprintf(out, "%s.p99_ns %" PRIu64 "\n", name, hist_percentile(h, 99));
	fprintf(out, "%s.max_ns %" PRIu64 "\n", name, n ? LOAD(h->max) : 0);
}

void
app_lat_stats_write(const struct app_lat *l, const char *prefix, FILE *out)
{
	if (l == NULL)
		return;
	uint64_t first = LOAD(l->first_rx_tsc), last = LOAD(l->last_final_tsc);
	fprintf(out, "%s.lat_orders %" PRIu64 "\n", prefix, LOAD(l->orders));
	fprintf(out, "%s.lat_acked %" PRIu64 "\n", prefix, LOAD(l->acked));
	fprintf(out, "%s.lat_naked %" PRIu64 "\n", prefix, LOAD(l->naked));
	fprintf(out, "%s.lat_finals %" PRIu64 "\n", prefix, LOAD(l->finals));
	fprintf(out, "%s.lat_lost %" PRIu64 "\n", prefix, LOAD(l->lost));
	fprintf(out, "%s.lat_span_ns %" PRIu64 "\n", prefix,
		last > first && first != 0 ? tsc_to_ns(l, last - first) : 0);
	hist_write(&l->ack, prefix, "lat_rx_ack_ns", out);
	hist_write(&l->final, prefix, "lat_rx_final_ns", out);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Request latency on the OMS leader: from a client request's proposal on this lcore to the
 * ACK, and for a request that opens an order (NEW_ORDER, CANCEL_REPLACE) on to the first
 * report that settles it after the ME: OPEN when it rests, else its last report (the
 * filling FILL, CANCELLED, REJECTED, DONE) — as the gateway's lat_rx_final_ns (app_lat.c).
 * Keyed by (user, clOrdId) in a fixed table (struct lat_table, app_reqtab.h: a cache). A
 * request that opens no order (a cancel, an amend, a transfer) leaves at its ACK, an order
 * when it is settled, and a NAK ends either: the table holds the requests in flight, not
 * the resting orders, so its windows stay sparse. The histograms are what mgmt reads as
 * shard.N.lat.ingress_ack and shard.N.lat.order_final.
 */
#include "app_shard_int.h"

#define LAT_STALE_NS (60ull * 1000000000) /* an entry this old is reused (never finished) */

/* A client request was proposed: start its clock (a retransmit keeps the first one). The
 * table is a cache: a full window takes the slot of an entry never finished within
 * LAT_STALE_NS, else the home slot (counted). */
void
app_reqlat_begin(struct app_shard *s, const struct wire_msg_hdr *in)
{
	struct lat_table *t = s->lat;
	if (t == NULL)
		return;
	uint64_t user = app_msg_user(in), cl;
	memcpy(&cl, (const uint8_t *)(in + 1) + 8, sizeof(cl)); /* user, then clOrdId */
	if (user == 0)
		return; /* (refused by the OMS: never answered with a seq) */
	struct app_reqtab_ent *e;
	if (app_reqtab_find(t->e, LAT_SLOTS - 1, user, cl, &e) != NULL)
		return;
	uint64_t now = dp_clock_ns();
	if (e == NULL) {
		uint32_t home = app_reqtab_home(user, cl, LAT_SLOTS - 1);
		for (uint32_t p = 0; p < APP_REQTAB_PROBE && e == NULL; p++) {
			struct app_reqtab_ent *x = &t->e[(home + p) & (LAT_SLOTS - 1)];
			if (now - x->t0 > LAT_STALE_NS)
				e = x;
		}
		if (e == NULL) {
			e = &t->e[home];
			t->overwritten++;
		}
	}
	*e = (struct app_reqtab_ent){
		.user = user,
		.cl_ord_id = cl,
		.t0 = now,
		.opens = in->type == WIRE_NEW_ORDER || in->type == WIRE_CANCEL_REPLACE,
	};
}

/* The leader emits an answer for a client: an ACK records ingress→ack (and ends the clock
 * of a request that opens no order), the report that settles an order records
 * order→final, a NAK ends the clock. */
void
app_reqlat_end(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	struct lat_table *t = s->lat;
	if (t == NULL)
		return;
	/* Most answers are reports that settle nothing: out before the lookup and the clock. */
	if (msg->type == WIRE_EXEC_REPORT) {
		const struct wire_exec_report *r = (const void *)msg;
		if (r->exec != WIRE_EXEC_OPEN && !wire_report_final(r))
			return;
	} else if (msg->type != WIRE_ACK && msg->type != WIRE_NAK) {
		return;
	}
	uint64_t user = app_msg_user(msg), cl;
	memcpy(&cl, (const uint8_t *)(msg + 1) + 8, sizeof(cl));
	if (user == 0)
		return;
	struct app_reqtab_ent *e = app_reqtab_find(t->e, LAT_SLOTS - 1, user, cl, NULL);
	if (e == NULL)
		return;
	if (msg->type == WIRE_ACK) {
		if (!e->acked)
			hist_record(&t->ack, dp_clock_ns() - e->t0);
		e->acked = 1;
		if (e->opens)
			return; /* its clock runs on to the ME's answer */
	} else if (msg->type == WIRE_EXEC_REPORT) {
		hist_record(&t->final, dp_clock_ns() - e->t0);
	}
	app_reqtab_remove(t->e, LAT_SLOTS - 1, e);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Request latency on the OMS leader: from a client request's proposal on this lcore to the
 * ACK and to the final EXEC_REPORT the leader emits, keyed by (user, clOrdId) in a fixed
 * table (struct lat_table, a cache). The histograms are what mgmt reads as
 * shard.N.lat.ingress_ack and shard.N.lat.order_final.
 */
#include "app_shard_int.h"

#define LAT_PROBE 8
#define LAT_STALE_NS (60ull * 1000000000) /* an entry this old is reused (never finished) */

static struct lat_ent *
lat_slot(struct lat_table *t, uint64_t user, uint64_t cl, bool insert, uint64_t now)
{
	uint32_t home = (uint32_t)(((user ^ (cl * UINT64_C(0xff51afd7ed558ccd))) *
				    UINT64_C(0x9E3779B97F4A7C15)) >> 52) & (LAT_SLOTS - 1);
	struct lat_ent *spare = NULL;
	for (uint32_t p = 0; p < LAT_PROBE; p++) {
		struct lat_ent *e = &t->e[(home + p) & (LAT_SLOTS - 1)];
		if (e->user == user && e->cl_ord_id == cl)
			return e;
		if (spare == NULL && (e->user == 0 || now - e->t0_ns > LAT_STALE_NS))
			spare = e;
	}
	if (!insert)
		return NULL;
	if (spare == NULL) {
		spare = &t->e[home];
		t->overwritten++;
	}
	*spare = (struct lat_ent){ .user = user, .cl_ord_id = cl, .t0_ns = now };
	return spare;
}

/* A client request was proposed: start its clock (a retransmit keeps the first one). */
void
app_reqlat_begin(struct app_shard *s, const struct wire_msg_hdr *in)
{
	uint64_t cl;
	memcpy(&cl, (const uint8_t *)(in + 1) + 8, sizeof(cl)); /* user, then clOrdId */
	if (s->lat != NULL)
		lat_slot(s->lat, app_msg_user(in), cl, true, dp_clock_ns());
}

/* The leader emits an answer for a client: ACK records ingress→ack, a final EXEC_REPORT
 * records order→final and frees the entry, a NAK frees it. */
void
app_reqlat_end(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	struct lat_table *t = s->lat;
	if (t == NULL)
		return;
	/* Most answers are reports that settle nothing: out before the lookup and the clock. */
	if (msg->type == WIRE_EXEC_REPORT) {
		if (!wire_report_final((const struct wire_exec_report *)msg))
			return;
	} else if (msg->type != WIRE_ACK && msg->type != WIRE_NAK) {
		return;
	}
	uint64_t cl;
	memcpy(&cl, (const uint8_t *)(msg + 1) + 8, sizeof(cl));
	/* (now only matters to an insert: a lookup takes no spare) */
	struct lat_ent *e = lat_slot(t, app_msg_user(msg), cl, false, 0);
	if (e == NULL)
		return;
	if (msg->type == WIRE_ACK) {
		if (!e->acked)
			hist_record(&t->ack, dp_clock_ns() - e->t0_ns);
		e->acked = 1;
		return;
	}
	if (msg->type == WIRE_EXEC_REPORT)
		hist_record(&t->final, dp_clock_ns() - e->t0_ns);
	e->user = 0;
}

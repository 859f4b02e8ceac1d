/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OMS service and wire minors (docs/wire.md, "Versions"): a replica of an older minor
 * applies log entries a newer one wrote, whose messages may carry fields appended after their
 * struct. The service reads only its struct, and what it keeps of a message (a parked order, a
 * parked or held ME event) is that struct, so its state and egress are the same byte for byte
 * whether the appended bytes are there or not.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define APPENDED 40 /* bytes a newer minor appended to each message: > a parked slot's room */

static_assert(sizeof(struct wire_me_event) + APPENDED > OMS_PARKED_WORDS * 8,
	      "an event with its appended bytes would not fit a parked slot");
static_assert(APPENDED <= WIRE_MSG_EXT_MAX, "what a minor may append");

/* Apply msg as it came, or with APPENDED non-zero bytes after its struct, as a log entry of a
 * newer minor holds it (the decoder takes it: wire_msg_check). */
static void
apply(struct h *h, const void *msg, bool longer)
{
	const struct wire_msg_hdr *m = msg;
	if (!longer) {
		h_apply(h, msg);
		return;
	}
	_Alignas(8) uint8_t buf[H_MSG_MAX];
	cr_assert(m->length + APPENDED <= (int)sizeof(buf));
	memcpy(buf, msg, m->length);
	memset(buf + m->length, 0x3c, APPENDED);
	((struct wire_msg_hdr *)(void *)buf)->length = (uint16_t)(m->length + APPENDED);
	uint16_t n = 0;
	cr_assert(eq(int, wire_msg_check(buf, sizeof(buf), &n), WIRE_E_OK));
	h_apply(h, buf);
}

static void
event(struct h *h, uint64_t seq, struct wire_oid oid, uint8_t ev, int64_t qty, int64_t leaves,
      bool longer)
{
	struct wire_me_event e;
	h_event_msg(h, &e, seq, oid, S_ETHUSD, ev);
	e.px = ev == WIRE_EV_FILL ? 10 : 0;
	e.qty = qty;
	e.leaves_qty = leaves;
	e.liquidity = ev == WIRE_EV_FILL ? 2 : 0;
	e.notional = e.px * qty;
	apply(h, &e, longer);
}

/* Orders park behind a hydration, run, are filled by events that arrive out of order (held),
 * one is cancelled; an event for a cold user parks until its hydration. */
static void
run(struct h *h, bool longer)
{
	h_init(h, NULL);
	h_std_symbols(h);
	h->keep = true;
	h_clear(h);
	struct wire_new_order o;
	h_new_order_msg(&o, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 10, 5, 0);
	apply(h, &o, longer);
	h_new_order_msg(&o, 50, 2, S_ETHUSD, WIRE_SIDE_BUY, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 11, 5, 0);
	apply(h, &o, longer);
	cr_assert(eq(u32, h_count(h, WIRE_HYDRATE_REQUEST), 1));
	h_hydrate(h, 50, 9, A_USD, 1000, 0, 0);
	cr_assert(eq(u32, h_count(h, WIRE_ACK), 2));
	struct wire_oid first = ((const struct wire_ack *)h_get(h, WIRE_ACK, 0))->oid;
	event(h, 2, first, WIRE_EV_FILL, 2, 3, longer); /* ahead of seq 1: held */
	event(h, 1, first, WIRE_EV_ACCEPTED, 0, 5, longer);
	struct wire_cancel c;
	memset(&c, 0, sizeof(c));
	wire_hdr_init(&c.hdr, WIRE_CANCEL, h->lim.shard_id);
	c.user = 50;
	c.cl_ord_id = 3;
	c.orig_cl_ord_id = 2;
	apply(h, &c, longer);
	/* A fill for a user not resident here: parked while it hydrates on miss. */
	event(h, 3, wire_oid_make(h->lim.shard_id, 60, 1), WIRE_EV_FILL, 1, 0, longer);
	h_hydrate(h, 60, 4, A_ETH, 10, A_USD, 1000);
}

/* Goal: the same log with and without a newer minor's appended fields gives the same state
 * (snapshot bytes, state hash) and the same egress. Method: one shard per variant. */
Test(oms_wire_minor, appended_fields_change_nothing)
{
	static struct h plain, longer;
	run(&plain, false);
	run(&longer, true);
	cr_assert(eq(u64, h_ctr(&plain, OMS_C_EVENTS_HELD), 1));
	cr_assert(eq(u64, h_ctr(&longer, OMS_C_BAD_MSGS), h_ctr(&plain, OMS_C_BAD_MSGS)));
	cr_assert(eq(u64, oms_state_hash(longer.oms), oms_state_hash(plain.oms)));
	size_t n = oms_snapshot_size(plain.oms);
	cr_assert(eq(sz, oms_snapshot_size(longer.oms), n));
	uint8_t *a = malloc(n), *b = malloc(n);
	cr_assert(eq(sz, oms_snapshot(plain.oms, a, n), n));
	cr_assert(eq(sz, oms_snapshot(longer.oms, b, n), n));
	cr_assert(eq(int, memcmp(a, b, n), 0));
	cr_assert(eq(u32, longer.n, plain.n));
	for (uint32_t i = 0; i < plain.n; i++) {
		const struct wire_msg_hdr *p = (const void *)plain.out[i].msg;
		const struct wire_msg_hdr *l = (const void *)longer.out[i].msg;
		cr_assert(eq(int, longer.out[i].dest, plain.out[i].dest));
		cr_assert(eq(u16, l->length, p->length));
		cr_assert(eq(int, memcmp(l, p, p->length), 0), "egress %u (%s) differs", i,
			  wire_type_name(p->type));
	}
	free(a);
	free(b);
	h_fini(&plain);
	h_fini(&longer);
}

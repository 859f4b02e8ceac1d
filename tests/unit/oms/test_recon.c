/* SPDX-License-Identifier: Apache-2.0 */
/* Reconciliation: phantom orders closed and released, snapshots applied only once the stream
 * is applied through as_of_seq, unknown orders and leaked reservations flagged and healed,
 * the periodic capped sweep. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct h H;

static void
setup(void)
{
	struct oms_limits l;
	h_limits(&l);
	l.reconcile_interval_ns = 5 * SEC;
	l.reconcile_users_max = 2;
	h_init(&H, &l);
	h_std_symbols(&H);
	h_user(&H, 7, 1000000, 1000000);
}

static void
teardown(void)
{
	h_fini(&H);
}

TestSuite(oms_recon, .init = setup, .fini = teardown);

static void
snap_part(uint64_t user, uint64_t req, uint64_t as_of, uint16_t ms, const struct wire_oid *oids,
	  uint32_t n, int64_t leaves, uint8_t part, uint8_t last)
{
	struct wire_open_orders_snapshot m;
	memset(&m, 0, sizeof(m));
	m.hdr.type = WIRE_OPEN_ORDERS_SNAPSHOT;
	m.hdr.length = sizeof(m);
	m.user = user;
	m.req_id = req;
	m.as_of_seq = as_of;
	m.me_shard = ms;
	m.part = part;
	m.last = last;
	m.count = n;
	for (uint32_t i = 0; i < n; i++) {
		m.orders[i].oid = oids[i];
		m.orders[i].symbol = S_ETHUSD;
		m.orders[i].leaves_qty = leaves;
	}
	h_apply(&H, &m);
}

static void
snap(uint64_t user, uint64_t req, uint64_t as_of, uint16_t ms, const struct wire_oid *oids,
     uint32_t n, int64_t leaves)
{
	snap_part(user, req, as_of, ms, oids, n, leaves, 0, 1);
}

/* Goal: an order the ME no longer has (as of a seq we applied) is a phantom: closed with
 * cause RECONCILE and its reservation released; the user becomes flat. */
Test(oms_recon, phantom_closed_and_released)
{
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid a = h_last_ack_oid(&H);
	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid b = h_last_ack_oid(&H);
	h_ev(&H, a, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&H, a, S_ETHUSD, WIRE_EV_RESTED, 10, 10, 10, 0);
	h_ev(&H, b, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&H, b, S_ETHUSD, WIRE_EV_RESTED, 10, 10, 10, 0);
	/* The ME lost b's expiry: its snapshot lists only a. */
	snap(7, 1, 4, 1, &a, 1, 10);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_PHANTOM), 1));
	const struct wire_exec_report *r = h_get(&H, WIRE_EXEC_REPORT, 0);
	cr_assert(eq(u8, r->exec, WIRE_EXEC_CANCELLED));
	cr_assert(eq(u8, r->cause, WIRE_CAUSE_RECONCILE));
	cr_assert(wire_oid_eq(r->oid, b));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 101));
	snap(7, 2, 4, 1, NULL, 0, 0);
	cr_assert(oms_actor_flat(oms_actor_find(H.oms, 7)));
}

/* Goal: a snapshot newer than the applied stream is deferred, not applied. */
Test(oms_recon, deferred_until_stream_applied)
{
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid a = h_last_ack_oid(&H);
	h_ev(&H, a, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	snap(7, 1, 5, 1, NULL, 0, 0);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_RECON_DEFERRED), 1));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_PHANTOM), 0));
	cr_assert(eq(u32, oms_actor_find(H.oms, 7)->live, 1));
	/* An order whose last event is after as_of_seq is not judged by that snapshot. */
	snap(7, 2, 0, 1, NULL, 0, 0);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_PHANTOM), 0));
}

/* Goal: an order the ME has but we do not know, and a reservation no order explains, are
 * impossible states: flagged; the leak is released. */
Test(oms_recon, unknown_order_and_leak)
{
	struct wire_oid ghost = h_oid(&H, 7, 99); /* a seq this shard never issued */
	snap(7, 1, 0, 1, &ghost, 1, 5);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_UNKNOWN), 1));
	struct oms_actor *a = oms_actor_find(H.oms, 7);
	oms_balance_find(H.oms, a, A_USD)->reserved = 77; /* a leaked reservation */
	cr_assert(eq(u32, oms_recon_leaks(H.oms, a), 1));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_LEAK), 1));
}

/* Goal: the periodic sweep (cluster time) queries at most reconcile_users_max users with
 * live orders, one query per ME shard holding them. */
Test(oms_recon, periodic_sweep_capped)
{
	for (uint64_t u = 20; u < 25; u++) {
		h_user(&H, u, 1000000, 1000000);
		h_limit(&H, u, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
		h_ev(&H, h_last_ack_oid(&H), S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
		h_limit(&H, u, 2, S_BTCUSD, WIRE_SIDE_BUY, 1000, 10);
		h_ev(&H, h_last_ack_oid(&H), S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	}
	H.now += 6 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_OPEN_ORDERS_QUERY), 4));
	const struct wire_open_orders_query *q = h_get(&H, WIRE_OPEN_ORDERS_QUERY, 0);
	cr_assert(eq(int, h_dest(&H, WIRE_OPEN_ORDERS_QUERY, 0), WIRE_DEST_ME));
	cr_assert(eq(u16, q->oms_shard, 0));
	H.now += 6 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_OPEN_ORDERS_QUERY), 4));
}

/* Rest n buy orders of user 7 on ETHUSD (ME shard 1); their orderIds in oids. */
static void
rest_many(struct wire_oid *oids, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		h_limit(&H, 7, 100 + i, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
		oids[i] = h_last_ack_oid(&H);
		h_ev(&H, oids[i], S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 1, 0);
		h_ev(&H, oids[i], S_ETHUSD, WIRE_EV_RESTED, 10, 1, 1, 0);
	}
}

/* Goal: a snapshot in parts whose final part is applied before an earlier one (the parts
 * travel as separate messages and may be reordered or lost) closes nothing: the orders of
 * the missing part are not phantoms. The whole snapshot, in order, matches.
 * Method: 17 resting orders (two parts); apply part 1 (last) before part 0, then both in
 * order; then an old final part again after a newer query listed the same orders. */
Test(oms_recon, parts_out_of_order_close_nothing)
{
	struct wire_oid oids[WIRE_OPEN_ORDERS_MAX + 1];
	rest_many(oids, WIRE_OPEN_ORDERS_MAX + 1);
	const uint64_t as_of = 2 * (WIRE_OPEN_ORDERS_MAX + 1);
	h_clear(&H);
	snap_part(7, 1, as_of, 1, &oids[WIRE_OPEN_ORDERS_MAX], 1, 1, 1, 1);
	snap_part(7, 1, as_of, 1, oids, WIRE_OPEN_ORDERS_MAX, 1, 0, 0);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_PHANTOM), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_EXEC_REPORT), 0));
	cr_assert(eq(u32, oms_actor_find(H.oms, 7)->live, WIRE_OPEN_ORDERS_MAX + 1));
	cr_assert(ge(u64, h_ctr(&H, OMS_C_RECON_DEFERRED), 1));
	/* In order: every order listed and matched. */
	uint64_t matched = h_ctr(&H, OMS_C_RECON_MATCHED);
	snap_part(7, 2, as_of, 1, oids, WIRE_OPEN_ORDERS_MAX, 1, 0, 0);
	snap_part(7, 2, as_of, 1, &oids[WIRE_OPEN_ORDERS_MAX], 1, 1, 1, 1);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_RECON_MATCHED) - matched, WIRE_OPEN_ORDERS_MAX + 1));
	/* A late duplicate of request 1's final part, after request 2 listed the orders. */
	snap_part(7, 1, as_of, 1, &oids[WIRE_OPEN_ORDERS_MAX], 1, 1, 1, 1);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_PHANTOM), 0));
	cr_assert(eq(u32, oms_actor_find(H.oms, 7)->live, WIRE_OPEN_ORDERS_MAX + 1));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_MISMATCH), 0));
}

/* Goal: differences explained by events after the snapshot are transient, not alarms: an
 * order the ME lists that we finished after as_of_seq, and a live order newer than it.
 * Method: two orders; the snapshot as of before b existed lists a, which we have since
 * finished. */
Test(oms_recon, newer_than_snapshot_is_transient)
{
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid a = h_last_ack_oid(&H);
	h_ev(&H, a, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&H, a, S_ETHUSD, WIRE_EV_RESTED, 10, 10, 10, 0);
	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid b = h_last_ack_oid(&H);
	h_ev(&H, b, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&H, a, S_ETHUSD, WIRE_EV_CANCELLED, 10, 0, 0, 0);
	h_ev(&H, a, S_ETHUSD, WIRE_EV_DONE, 10, 0, 0, 0);
	snap(7, 1, 2, 1, &a, 1, 10);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_RECON_TRANSIENT), 2));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_RECON_MATCHED), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_PHANTOM), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_RECON_UNKNOWN), 0));
	cr_assert(eq(u32, oms_actor_find(H.oms, 7)->live, 1));
}

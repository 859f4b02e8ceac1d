/* SPDX-License-Identifier: Apache-2.0 */
/* omsload's ledger (tools/omsload/ledger.h) fed ACKs and reports in the orders loss, late
 * ACKs and leader changes produce: a report before its ACK, fills and a final before the
 * OPEN, reports re-sent long after the client's 64-seq window, late reports. None of these
 * may count an order doubled, over-filled or unreported; a genuinely different orderId, a
 * second final report or fills beyond the quantity must. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "tools/omsload/ledger.h"

#define USER 100
#define USERS 4

static struct ledger g;

static void
setup(void)
{
	cr_assert(eq(int, ledger_init(&g, 1000, USER, USERS), 0));
}

static void
teardown(void)
{
	ledger_free(&g);
}

static struct wire_oid
oid_of(uint64_t n)
{
	return (struct wire_oid){.user = USER, .shard_seq = (UINT64_C(1) << 48) | n};
}

static bool
ack(uint64_t user, uint64_t id, uint64_t oid, uint64_t seq)
{
	struct wire_ack m = {.user = user, .cl_ord_id = id, .oid = oid_of(oid), .seq = seq};
	wire_hdr_init(&m.hdr, WIRE_ACK, 0);
	return ledger_on_ack(&g, &m);
}

static bool
report(uint64_t user, uint64_t id, uint64_t oid, uint64_t seq, uint8_t exec, int64_t qty)
{
	struct wire_exec_report m = {.user = user, .cl_ord_id = id, .oid = oid_of(oid),
				     .seq = seq, .exec = exec, .last_qty = qty};
	wire_hdr_init(&m.hdr, WIRE_EXEC_REPORT, 0);
	return ledger_on_exec(&g, &m);
}

static struct ledger_counts
counts(void)
{
	struct ledger_counts n;
	ledger_count(&g, &n);
	return n;
}

Test(ledger, report_before_ack_is_one_order, .init = setup, .fini = teardown)
{
	ledger_order_sent(&g, USER, 1, 10);
	cr_assert(report(USER, 1, 7, 2, WIRE_EXEC_OPEN, 0));
	cr_assert(ack(USER, 1, 7, 1));
	struct ledger_counts n = counts();
	cr_assert(eq(u64, n.acked, 1));
	cr_assert(eq(u64, n.resting, 1));
	cr_assert(eq(u64, n.doubled, 0));
	cr_assert(eq(u64, n.unreported, 0));
	cr_assert(eq(u64, g.seq_gaps, 0)); /* seq 1 came below the first seen: no hole */
}

Test(ledger, fills_and_final_before_open_and_ack, .init = setup, .fini = teardown)
{
	ledger_order_sent(&g, USER, 1, 10);
	cr_assert(report(USER, 1, 7, 4, WIRE_EXEC_DONE, 0));
	cr_assert(report(USER, 1, 7, 3, WIRE_EXEC_FILL, 6));
	cr_assert(report(USER, 1, 7, 2, WIRE_EXEC_FILL, 4));
	cr_assert(report(USER, 1, 7, 1, WIRE_EXEC_OPEN, 0));
	cr_assert(ack(USER, 1, 7, 5));
	struct ledger_counts n = counts();
	cr_assert(eq(u64, n.acked, 1));
	cr_assert(eq(u64, n.final, 1));
	cr_assert(eq(u64, n.resting, 0));
	cr_assert(eq(u64, n.doubled, 0));
	cr_assert(eq(u64, n.overfilled, 0));
	cr_assert(eq(i64, ledger_order(&g, USER, 1)->filled, 10));
	uint64_t cursor = 0;
	cr_assert(eq(ptr, (void *)ledger_next_resting(&g, &cursor), NULL));
}

/* A new leader re-sends its recent reports; after many other messages they are far below
 * the client's 64-seq window, and must still be recognised as repeats. */
Test(ledger, resent_reports_count_once_however_old, .init = setup, .fini = teardown)
{
	ledger_order_sent(&g, USER, 1, 5);
	cr_assert(ack(USER, 1, 7, 1));
	cr_assert(report(USER, 1, 7, 2, WIRE_EXEC_FILL, 5));
	cr_assert(report(USER, 1, 7, 3, WIRE_EXEC_DONE, 0));
	for (uint64_t i = 0; i < 200; i++) {
		ledger_order_sent(&g, USER, 1000 + i, 1);
		cr_assert(ack(USER, 1000 + i, 1000 + i, 4 + i));
	}
	cr_assert(not(ack(USER, 1, 7, 1)));
	cr_assert(not(report(USER, 1, 7, 2, WIRE_EXEC_FILL, 5)));
	cr_assert(not(report(USER, 1, 7, 3, WIRE_EXEC_DONE, 0)));
	struct ledger_counts n = counts();
	cr_assert(eq(u64, n.acked, 201));
	cr_assert(eq(u64, n.final, 1));
	cr_assert(eq(u64, n.doubled, 0));
	cr_assert(eq(u64, n.overfilled, 0));
	cr_assert(eq(u64, n.unreported, 200));
	cr_assert(eq(u64, g.seq_repeats, 3));
	cr_assert(eq(u64, g.seq_gaps, 0));
}

/* A report lost and filled in much later (beyond 64 seqs) is new: applied, and counted as a
 * filled gap. */
Test(ledger, late_report_beyond_the_window_is_applied, .init = setup, .fini = teardown)
{
	ledger_order_sent(&g, USER, 1, 5);
	cr_assert(ack(USER, 1, 7, 1));
	cr_assert(report(USER, 1, 7, 2, WIRE_EXEC_OPEN, 0));
	for (uint64_t i = 0; i < 100; i++)
		cr_assert(ack(USER, 1000 + i, 1000 + i, 4 + i)); /* seq 3 is lost */
	cr_assert(eq(u64, g.seq_gaps, 1));
	cr_assert(eq(u64, counts().resting, 1));
	cr_assert(report(USER, 1, 7, 3, WIRE_EXEC_DONE, 0));
	struct ledger_counts n = counts();
	cr_assert(eq(u64, n.final, 1));
	cr_assert(eq(u64, n.resting, 0));
	cr_assert(eq(u64, n.doubled, 0));
	cr_assert(eq(u64, g.seq_filled, 1));
	cr_assert(eq(u64, g.seq_repeats, 0));
}

/* The client's duplicate of one message, at once (same seq). */
Test(ledger, duplicate_message_is_a_repeat, .init = setup, .fini = teardown)
{
	ledger_order_sent(&g, USER, 1, 5);
	cr_assert(report(USER, 1, 7, 1, WIRE_EXEC_FILL, 3));
	cr_assert(not(report(USER, 1, 7, 1, WIRE_EXEC_FILL, 3)));
	cr_assert(eq(i64, ledger_order(&g, USER, 1)->filled, 3));
	cr_assert(eq(u64, counts().overfilled, 0));
}

Test(ledger, other_orderid_after_report_is_doubled, .init = setup, .fini = teardown)
{
	ledger_order_sent(&g, USER, 1, 10);
	cr_assert(report(USER, 1, 7, 1, WIRE_EXEC_OPEN, 0));
	cr_assert(ack(USER, 1, 8, 2));
	struct ledger_counts n = counts();
	cr_assert(eq(u64, n.acked, 1));
	cr_assert(eq(u64, n.doubled, 1));
}

Test(ledger, other_orderid_after_ack_is_doubled, .init = setup, .fini = teardown)
{
	ledger_order_sent(&g, USER, 1, 10);
	ledger_order_sent(&g, USER, 2, 10);
	cr_assert(ack(USER, 1, 7, 1));
	cr_assert(ack(USER, 1, 8, 2)); /* the same order admitted again */
	cr_assert(ack(USER, 2, 9, 3));
	cr_assert(report(USER, 2, 10, 4, WIRE_EXEC_FILL, 1)); /* a fill of another order */
	struct ledger_counts n = counts();
	cr_assert(eq(u64, n.acked, 2));
	cr_assert(eq(u64, n.doubled, 2));
}

Test(ledger, two_final_reports_and_overfill_count, .init = setup, .fini = teardown)
{
	ledger_order_sent(&g, USER, 1, 4);
	ledger_order_sent(&g, USER + 1, 1, 4);
	cr_assert(ack(USER, 1, 7, 1));
	cr_assert(report(USER, 1, 7, 2, WIRE_EXEC_DONE, 0));
	cr_assert(report(USER, 1, 7, 3, WIRE_EXEC_DONE, 0)); /* another seq: a second final */
	cr_assert(report(USER + 1, 1, 9, 1, WIRE_EXEC_FILL, 3));
	cr_assert(report(USER + 1, 1, 9, 2, WIRE_EXEC_FILL, 3));
	struct ledger_counts n = counts();
	cr_assert(eq(u64, n.doubled, 1));
	cr_assert(eq(u64, n.overfilled, 1));
	cr_assert(eq(u64, n.unreported, 1));
}

Test(ledger, seq_holes_seen_and_filled, .init = setup, .fini = teardown)
{
	cr_assert(ack(USER, 50, 1, 10));
	cr_assert(ack(USER, 51, 2, 14));     /* 11..13 missing */
	cr_assert(ack(USER, 52, 3, 12));     /* one filled */
	cr_assert(ack(USER, 53, 4, 5000));   /* 15..4999 missing: the set grows */
	cr_assert(ack(USER, 54, 5, 7));      /* below the first seen: 8, 9 missing */
	cr_assert(ack(USER + 3, 55, 6, 1));  /* another user's own numbering */
	cr_assert(ack(USER + 9, 56, 7, 1));  /* not a user of the run: always new */
	cr_assert(ack(USER + 9, 56, 7, 1));
	cr_assert(eq(u64, g.seq_gaps, 3 + 4985 + 2));
	cr_assert(eq(u64, g.seq_filled, 1));
	cr_assert(not(ack(USER, 51, 2, 14)));
	cr_assert(not(ack(USER, 54, 5, 7)));
	cr_assert(eq(u64, g.seq_repeats, 2));
	cr_assert(eq(u64, g.seq_untracked, 0));
}

Test(ledger, orders_beyond_room_are_counted, .init = setup, .fini = teardown)
{
	/* 1000 orders asked: 2048 slots, 3/4 of them usable. */
	for (uint64_t i = 1; i <= 2000; i++)
		ledger_order_sent(&g, USER, i, 1);
	cr_assert(eq(u64, g.used, 1536));
	cr_assert(eq(u64, g.full, 2000 - 1536));
	cr_assert(eq(ptr, (void *)ledger_order(&g, USER, 2000), NULL));
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bridge's re-drive schedule and queue (app/app_backoff.c): back-off per saga from
 * bridge_redrive_ms doubling to the ceiling, never given up, reset when a saga leaves the
 * queue and when the queue is rebuilt; the age figures; a queue too small for its sagas
 * degrades to re-sending every pass, never to dropping one.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "app/app_backoff.h"

#define MS UINT64_C(1000000)

static const struct app_backoff BO = { .base_ns = 100 * MS, .max_ns = 800 * MS };
static struct app_rdq q;
static void *mem;

static void
setup(void)
{
	mem = malloc(app_rdq_footprint(16));
	cr_assert(mem != NULL);
	cr_assert(app_rdq_init(&q, mem, 16, &BO, 1000 * MS) == 0);
}

static void
teardown(void)
{
	free(mem);
}

static struct wire_oid
oid(uint64_t user, uint64_t seq)
{
	return (struct wire_oid){ .user = user, .shard_seq = (UINT64_C(1) << 48) | seq };
}

/* One pass at now over sagas ids[0..n) (all began at 0); returns how many were re-sent. */
static uint32_t
pass(uint64_t now, const struct wire_oid *ids, uint32_t n, bool fresh)
{
	uint32_t sent = 0;
	app_rdq_begin(&q);
	for (uint32_t i = 0; i < n; i++)
		sent += app_rdq_visit(&q, &ids[i], now, 0, fresh);
	app_rdq_end(&q);
	return sent;
}

/* Goal: the wait doubles from the base to the ceiling and stays there.
 * Method: app_backoff_interval for 0..10 re-sends, and a ceiling equal to the base. */
Test(app_backoff, interval_doubles_to_ceiling)
{
	uint64_t want[] = { 100, 200, 400, 800, 800, 800 };
	for (uint32_t i = 0; i < 6; i++)
		cr_assert_eq(app_backoff_interval(&BO, i), want[i] * MS, "sends %u", i);
	cr_assert_eq(app_backoff_interval(&BO, UINT32_MAX), 800 * MS);
	struct app_backoff flat = { .base_ns = 5, .max_ns = 5 };
	cr_assert_eq(app_backoff_interval(&flat, 7), 5);
	struct app_backoff huge = { .base_ns = UINT64_MAX / 3, .max_ns = UINT64_MAX };
	cr_assert_eq(app_backoff_interval(&huge, 64), UINT64_MAX); /* no overflow */
}

/* Goal: the count bound the e2e test and the docs use.
 * Method: 100, 300, 700, 1500, 2300, 3100 ms are the re-send times after first sight. */
Test(app_backoff, sends_within)
{
	cr_assert_eq(app_backoff_sends_within(&BO, 99 * MS), 0);
	cr_assert_eq(app_backoff_sends_within(&BO, 100 * MS), 1);
	cr_assert_eq(app_backoff_sends_within(&BO, 700 * MS), 3);
	cr_assert_eq(app_backoff_sends_within(&BO, 1499 * MS), 3);
	cr_assert_eq(app_backoff_sends_within(&BO, 3100 * MS), 6);
	/* Logarithmic before the ceiling: 10 s at a 100 ms base and no ceiling is 6, not 100. */
	struct app_backoff open = { .base_ns = 100 * MS, .max_ns = UINT64_MAX };
	cr_assert_eq(app_backoff_sends_within(&open, 10000 * MS), 6);
}

/* Goal: a pass every base interval re-sends one saga on the schedule, never stops.
 * Method: a saga first seen at t=0, passes every 100 ms for 10 s: re-sent at 100, 300,
 * 700, 1500 ms and then every 800 ms; 10 s gives exactly sends_within(10 s). */
Test(app_backoff, schedule_by_passes, .init = setup, .fini = teardown)
{
	struct wire_oid id = oid(7, 1);
	uint64_t at[16];
	uint32_t n = 0;
	for (uint64_t t = 0; t <= 10000 * MS; t += 100 * MS)
		if (pass(t, &id, 1, false) == 1 && n < 16)
			at[n++] = t / MS;
	uint64_t want[] = { 100, 300, 700, 1500, 2300, 3100, 3900 };
	for (uint32_t i = 0; i < 7; i++)
		cr_assert_eq(at[i], want[i], "re-send %u at %lu ms", i, (unsigned long)at[i]);
	cr_assert_eq(n, app_backoff_sends_within(&BO, 10000 * MS));
	cr_assert_eq(n, 14); /* 4 ramp + 10 at the ceiling: the saga is never given up */
	cr_assert_eq(q.pending, 1);
}

/* Goal: the rebuild pass re-sends everything and starts every schedule over; a saga that
 * left the queue (answered) and comes back starts over too.
 * Method: ramp a saga up to the ceiling, rebuild (fresh): sent at once, then due after the
 * base again; drop it from one pass, see it again: it waits one base interval. */
Test(app_backoff, reset_on_rebuild_and_leave, .init = setup, .fini = teardown)
{
	struct wire_oid ids[2] = { oid(7, 1), oid(8, 1) };
	for (uint64_t t = 0; t <= 2000 * MS; t += 100 * MS)
		(void)pass(t, ids, 2, false);
	/* Leader change: the queue is rebuilt; every saga goes now. */
	app_rdq_reset(&q);
	cr_assert_eq(pass(2100 * MS, ids, 2, true), 2);
	cr_assert_eq(pass(2200 * MS, ids, 2, false), 2); /* base again, not the ceiling */
	cr_assert_eq(pass(2300 * MS, ids, 2, false), 0);
	cr_assert_eq(pass(2400 * MS, ids, 2, false), 2); /* then 200 ms */
	/* ids[1] answered: not in the next pass. ids[0] alone. */
	(void)pass(2500 * MS, ids, 1, false);
	cr_assert_eq(q.pending, 1);
	/* (Cannot happen with real orderIds, but shows it was forgotten.) */
	cr_assert_eq(pass(2600 * MS, ids, 2, false), 0);
	cr_assert_eq(pass(2700 * MS, &ids[1], 1, false), 1); /* first sight + base */
}

/* Goal: the age figures: pending, old (>= old_ns) and the oldest age, per pass.
 * Method: three sagas that began at 0, 500 and 1500 ms, a pass at 2000 ms. */
Test(app_backoff, ages, .init = setup, .fini = teardown)
{
	struct wire_oid ids[3] = { oid(1, 1), oid(2, 1), oid(3, 1) };
	uint64_t began[3] = { 0, 500 * MS, 1500 * MS };
	app_rdq_begin(&q);
	for (int i = 0; i < 3; i++)
		(void)app_rdq_visit(&q, &ids[i], 2000 * MS, began[i], false);
	app_rdq_end(&q);
	cr_assert_eq(q.pending, 3);
	cr_assert_eq(q.old, 2);
	cr_assert_eq(q.oldest_age_ns, 2000 * MS);
	app_rdq_begin(&q);
	app_rdq_end(&q);
	cr_assert_eq(q.pending, 0);
	cr_assert_eq(q.old, 0);
	cr_assert_eq(q.oldest_age_ns, 0);
}

/* Goal: more sagas than the queue was sized for are still re-driven (every pass), none
 * dropped. Method: a queue for 16 (64 slots per generation), 100 sagas over 10 passes. */
Test(app_backoff, overflow_resends_every_pass, .init = setup, .fini = teardown)
{
	struct wire_oid ids[100];
	for (uint32_t i = 0; i < 100; i++)
		ids[i] = oid(100 + i, i);
	(void)pass(0, ids, 100, false);
	cr_assert_eq(q.untracked, 100 - 64);
	for (uint64_t t = 100; t <= 1000; t += 100) {
		uint32_t sent = pass(t * MS, ids, 100, false);
		cr_assert_geq(sent, 100 - 64, "at %lu ms only %u", (unsigned long)t, sent);
		cr_assert_eq(q.pending, 100);
	}
}

Test(app_backoff, init_refuses_bad_limits)
{
	char buf[64];
	struct app_backoff low = { .base_ns = 10, .max_ns = 9 }, zero = { 0, 0 };
	cr_assert_eq(app_rdq_footprint(0), 0);
	cr_assert_eq(app_rdq_init(&q, buf, 0, &BO, 0), -EINVAL);
	cr_assert_eq(app_rdq_init(&q, buf, 1, &low, 0), -EINVAL);
	cr_assert_eq(app_rdq_init(&q, buf, 1, &zero, 0), -EINVAL);
}

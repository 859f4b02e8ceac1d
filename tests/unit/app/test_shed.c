/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's load shedding (app/app_shed.c): a window whose fastest ACK was slower than
 * the target, with enough ACKs in it, sheds the next window's new orders to that shard and
 * only that shard; a burst that leaves one fast ACK, a quiet shard with a few slow ones, or
 * a window with no ACKs at all shed nothing; an order that waited too long before the
 * gateway is refused at once; off means off.
 */
#include <criterion/criterion.h>

#include "app/app_shed.h"

#define US UINT64_C(1000)
#define MS UINT64_C(1000000)
#define T0 (1000 * MS) /* any non-zero start */

static const struct app_shed_conf CONF = {
	.target_ns = 3 * MS, .window_ns = 5 * MS, .wait_ns = 4 * MS, .min_samples = 8,
};

/* n ACKs for shard, spread over [at, at + 4 ms), each taking ack_ns. */
static void
acks(struct app_shed *s, uint16_t shard, uint64_t at, uint32_t n, uint64_t ack_ns)
{
	for (uint32_t i = 0; i < n; i++)
		app_shed_sample(s, shard, at + i * (4 * MS / n), ack_ns);
}

Test(app_shed, standing_queue_sheds_the_next_window_then_recovers)
{
	struct app_shed s;
	app_shed_init(&s, &CONF);
	cr_assert_eq(app_shed_admit(&s, 1, T0, 0), APP_SHED_ADMIT);
	acks(&s, 1, T0, 20, 8 * MS); /* every ACK of the window slow: a queue stands */
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 4 * MS, 0), APP_SHED_ADMIT,
		     "the window is not over: nothing decided yet");
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 5 * MS, 0), APP_SHED_QUEUE);
	cr_assert(app_shed_active(&s, 1));
	cr_assert_eq(app_shed_admit(&s, 2, T0 + 5 * MS, 0), APP_SHED_ADMIT,
		     "another shard's queue is not this one's");
	cr_assert_eq(s.windows_shed, 1);
	/* The orders still in flight drain: fast ACKs in the shed window, admitted after it. */
	acks(&s, 1, T0 + 5 * MS, 10, 1 * MS);
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 9 * MS, 0), APP_SHED_QUEUE, "still shedding");
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 10 * MS, 0), APP_SHED_ADMIT);
	cr_assert(!app_shed_active(&s, 1));
}

Test(app_shed, one_fast_ack_means_a_burst_not_a_queue)
{
	struct app_shed s;
	app_shed_init(&s, &CONF);
	app_shed_admit(&s, 1, T0, 0);
	acks(&s, 1, T0, 30, 9 * MS);
	app_shed_sample(&s, 1, T0 + 4 * MS, 2 * MS); /* the queue emptied within the window */
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 5 * MS, 0), APP_SHED_ADMIT);
}

Test(app_shed, a_quiet_shard_with_slow_acks_is_not_loaded)
{
	struct app_shed s;
	app_shed_init(&s, &CONF);
	app_shed_admit(&s, 1, T0, 0);
	acks(&s, 1, T0, 7, 50 * MS); /* min_samples - 1 */
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 5 * MS, 0), APP_SHED_ADMIT);
	acks(&s, 1, T0 + 5 * MS, 8, 50 * MS); /* min_samples: loaded, and slow */
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 10 * MS, 0), APP_SHED_QUEUE);
}

Test(app_shed, no_answers_for_a_window_is_no_evidence)
{
	struct app_shed s;
	app_shed_init(&s, &CONF);
	app_shed_admit(&s, 1, T0, 0);
	acks(&s, 1, T0, 20, 8 * MS);
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 5 * MS, 0), APP_SHED_QUEUE);
	/* Nothing comes back for the whole shed window (a leader lost, say): admit again. */
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 10 * MS, 0), APP_SHED_ADMIT);
	/* A long silence after a slow window decides nothing either. */
	acks(&s, 1, T0 + 10 * MS, 20, 8 * MS);
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 30 * MS, 0), APP_SHED_ADMIT);
}

Test(app_shed, waited_too_long_before_the_gateway)
{
	struct app_shed s;
	app_shed_init(&s, &CONF);
	cr_assert_eq(app_shed_admit(&s, 1, T0, 4 * MS), APP_SHED_ADMIT, "at the limit: admitted");
	cr_assert_eq(app_shed_admit(&s, 1, T0, 4 * MS + 1), APP_SHED_WAIT);
	cr_assert_eq(app_shed_admit(&s, 1, T0, 100 * US), APP_SHED_ADMIT);
	struct app_shed_conf no_wait = CONF;
	no_wait.wait_ns = 0;
	app_shed_init(&s, &no_wait);
	cr_assert_eq(app_shed_admit(&s, 1, T0, 1000 * MS), APP_SHED_ADMIT, "wait_ns 0: off");
}

Test(app_shed, off_and_out_of_range)
{
	struct app_shed s;
	struct app_shed_conf off = CONF;
	off.target_ns = 0; /* the queue signal off, the wait one on */
	app_shed_init(&s, &off);
	app_shed_admit(&s, 1, T0, 0);
	acks(&s, 1, T0, 50, 100 * MS);
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 5 * MS, 0), APP_SHED_ADMIT);
	cr_assert(!app_shed_active(&s, 1));
	cr_assert_eq(app_shed_admit(&s, 1, T0 + 5 * MS, 5 * MS), APP_SHED_WAIT);
	off.wait_ns = 0; /* both off */
	app_shed_init(&s, &off);
	cr_assert_eq(app_shed_admit(&s, 1, T0, 1000 * MS), APP_SHED_ADMIT);
	app_shed_init(&s, &CONF);
	acks(&s, APP_SHED_SHARDS, T0, 50, 100 * MS); /* ignored, no overrun */
	cr_assert_eq(app_shed_admit(&s, APP_SHED_SHARDS, T0 + 5 * MS, 0), APP_SHED_ADMIT);
	cr_assert(!app_shed_active(&s, APP_SHED_SHARDS));
}

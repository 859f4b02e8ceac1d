/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The idle back-off's bell (dataplane/dp_idle.c): an lcore armed before its last look at
 * its inputs sleeps on the bell, and a producer's ring ends that sleep — never lost, once
 * per sleep, and free when nobody sleeps. The waits in these tests are long (seconds): a
 * lost ring shows as a sleep that ran out (sleeps_rung 0), not as a time.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "dataplane/dp.h"

#define LONG_US 5000000 /* a wait no test should see the end of */

static void
bell_idle_us(struct dp_idle *idle, struct dp_bell *bell, enum dp_idle_mode mode,
	     uint32_t spins, uint32_t sleep_min, uint32_t sleep_max, uint32_t wait_max,
	     bool wake_on_all)
{
	struct dp_idle_policy pol = {.mode = mode, .spins = spins, .sleep_us_min = sleep_min,
				     .sleep_us_max = sleep_max, .wait_us_max = wait_max};
	dp_idle_init(idle, &pol);
	dp_idle_bell(idle, bell, wake_on_all);
}

static void
bell_idle(struct dp_idle *idle, struct dp_bell *bell, enum dp_idle_mode mode, uint32_t spins,
	  bool wake_on_all)
{
	bell_idle_us(idle, bell, mode, spins, 1, LONG_US, LONG_US, wake_on_all);
}

Test(dp_bell, enabled_only_for_sleeping_lcores)
{
	struct dp_idle idle;
	struct dp_bell bell;
	bell_idle(&idle, &bell, DP_IDLE_BUSY, 0, true);
	cr_assert(!bell.enabled);
	dp_idle_arm(&idle);
	cr_assert(!idle.armed, "a busy lcore never sleeps: nothing to arm");
	dp_bell_ring(&bell);
	cr_assert_eq(bell.wakes, 0);
	dp_bell_ring(NULL); /* no bell: nothing */
	bell_idle(&idle, &bell, DP_IDLE_SLEEP, 0, true);
	cr_assert(bell.enabled);
}

Test(dp_bell, armed_only_once_the_spins_are_over)
{
	struct dp_idle idle;
	struct dp_bell bell;
	bell_idle(&idle, &bell, DP_IDLE_SLEEP, 2, true);
	for (int i = 0; i < 2; i++) {
		dp_idle_arm(&idle);
		cr_assert(!idle.armed, "still spinning");
		dp_idle_run(&idle, 0);
	}
	dp_bell_ring(&bell);
	cr_assert_eq(bell.wakes, 0, "a ring with nobody armed is a load, not a wake");
	dp_idle_arm(&idle);
	cr_assert(idle.armed);
	cr_assert_eq(bell.waiting, 1);
	/* Work found in the armed cycle: no sleep, disarmed. */
	dp_idle_run(&idle, 1);
	cr_assert(!idle.armed);
	cr_assert_eq(bell.waiting, 0);
	cr_assert_eq(idle.sleeps, 0);
}

Test(dp_bell, a_ring_before_the_sleep_is_not_lost)
{
	/* Work handed over between the arm and the sleep (while the cycle looked, or just
	 * after): the sleep ends at once. */
	struct dp_idle idle;
	struct dp_bell bell;
	bell_idle(&idle, &bell, DP_IDLE_SLEEP, 0, true);
	dp_idle_arm(&idle);
	dp_bell_ring(&bell);
	cr_assert_eq(bell.wakes, 1);
	cr_assert_eq(bell.waiting, 0, "the ring disarms");
	dp_bell_ring(&bell);
	cr_assert_eq(bell.wakes, 1, "once per sleep");
	dp_idle_run(&idle, 0);
	cr_assert_eq(idle.sleeps, 1);
	cr_assert_eq(idle.rung, 1, "the sleep saw the ring, it did not run out");
	cr_assert(!idle.armed);
}

struct ringer {
	struct dp_bell *bell;
	atomic_int *go;
	int rings;
};

static void *
ringer_main(void *arg)
{
	struct ringer *r = arg;
	for (int i = 0; i < r->rings; i++) {
		while (atomic_load(r->go) <= i)
			usleep(100);
		usleep(2000); /* the other thread is asleep by now, most of the time */
		dp_bell_ring(r->bell);
	}
	return NULL;
}

Test(dp_bell, a_ring_wakes_a_sleeper_every_time)
{
	struct dp_idle idle;
	static struct dp_bell bell;
	atomic_int go = 0;
	bell_idle(&idle, &bell, DP_IDLE_SLEEP, 0, true);
	struct ringer r = {.bell = &bell, .go = &go, .rings = 20};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, ringer_main, &r), 0);
	for (int i = 0; i < r.rings; i++) {
		dp_idle_arm(&idle);
		atomic_store(&go, i + 1);
		dp_idle_run(&idle, 0); /* 5 s unless rung */
		cr_assert_eq(idle.rung, (uint64_t)i + 1, "sleep %d ran out: the ring was lost", i);
	}
	pthread_join(t, NULL);
	cr_assert_eq(bell.wakes, (uint64_t)r.rings);
}

Test(dp_bell, without_a_ring_the_sleep_runs_out)
{
	struct dp_idle idle;
	struct dp_bell bell;
	bell_idle_us(&idle, &bell, DP_IDLE_SLEEP, 0, 1, 100, 1000, true);
	dp_idle_arm(&idle);
	dp_idle_run(&idle, 0);
	cr_assert_eq(idle.sleeps, 1);
	cr_assert_eq(idle.rung, 0);
	cr_assert_eq(bell.waiting, 0, "disarmed after the sleep");
}

Test(dp_bell, wait_cap_follows_the_inputs)
{
	/* An lcore whose every input rings may sleep wait_us_max; one that polls something
	 * (the io lcore's port) no longer than sleep_us_max. */
	struct dp_idle idle;
	struct dp_bell bell;
	bell_idle_us(&idle, &bell, DP_IDLE_SLEEP, 0, 50, 200, 1000, true);
	cr_assert_eq(idle.policy.wait_us_max, 1000);
	cr_assert(idle.wake_on_all);
	bell_idle_us(&idle, &bell, DP_IDLE_SLEEP, 0, 50, 200, 1000, false);
	cr_assert_eq(idle.policy.wait_us_max, 200);
	struct dp_idle_policy pol = {.mode = DP_IDLE_SLEEP, .sleep_us_min = 50,
				     .sleep_us_max = 200};
	dp_idle_init(&idle, &pol);
	cr_assert_eq(idle.policy.wait_us_max, 200, "0: the sleep cap");
}

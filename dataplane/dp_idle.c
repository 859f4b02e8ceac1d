/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Idle back-off (Aeron's BackoffIdleStrategy, reduced): an lcore that found no work spins,
 * then pauses, then sleeps for doubling intervals up to a cap. Production pins each lcore to
 * an isolated core and uses BUSY; a development box with several lcores per core uses SLEEP
 * so idle lcores leave the core to the ones with work. An lcore with a bell (dp.h) sleeps on
 * it instead of in nanosleep: a producer that hands it work wakes it at once, so its sleeps
 * may be long without making anything wait for them.
 */
#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_pause.h>

#include "dp_int.h"

static const char *const mode_names[] = {
	[DP_IDLE_BUSY] = "busy",
	[DP_IDLE_PAUSE] = "pause",
	[DP_IDLE_SLEEP] = "sleep",
};

const char *
dp_idle_mode_name(enum dp_idle_mode mode)
{
	return (unsigned)mode < RTE_DIM(mode_names) ? mode_names[mode] : "?";
}

int
dp_idle_mode_parse(const char *s, enum dp_idle_mode *out)
{
	for (unsigned i = 0; i < RTE_DIM(mode_names); i++) {
		if (strcmp(s, mode_names[i]) == 0) {
			*out = (enum dp_idle_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

void
dp_idle_init(struct dp_idle *idle, const struct dp_idle_policy *policy)
{
	memset(idle, 0, sizeof(*idle));
	idle->policy = *policy;
	if (idle->policy.sleep_us_max == 0)
		idle->policy.sleep_us_max = 1;
	if (idle->policy.sleep_us_min == 0)
		idle->policy.sleep_us_min = 1;
	if (idle->policy.sleep_us_min > idle->policy.sleep_us_max)
		idle->policy.sleep_us_min = idle->policy.sleep_us_max;
	if (idle->policy.wait_us_max == 0)
		idle->policy.wait_us_max = idle->policy.sleep_us_max;
	if (idle->policy.wait_us_max < idle->policy.sleep_us_min)
		idle->policy.wait_us_max = idle->policy.sleep_us_min;
	idle->sleep_us = idle->policy.sleep_us_min;
}

void
dp_idle_bell(struct dp_idle *idle, struct dp_bell *bell, bool wake_on_all)
{
	memset(bell, 0, sizeof(*bell));
	idle->bell = bell;
	bell->enabled = idle->policy.mode == DP_IDLE_SLEEP;
	idle->wake_on_all = wake_on_all;
	if (!wake_on_all)
		idle->policy.wait_us_max = idle->policy.sleep_us_max;
}

void
dp_bell_wake(struct dp_bell *bell)
{
	/* One wake per sleep: the first producer to see the owner armed disarms it. */
	if (__atomic_exchange_n(&bell->waiting, 0, __ATOMIC_ACQ_REL) == 0)
		return;
	__atomic_fetch_add(&bell->seq, 1, __ATOMIC_RELEASE);
	__atomic_fetch_add(&bell->wakes, 1, __ATOMIC_RELAXED);
	syscall(SYS_futex, &bell->seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void
dp_idle_arm(struct dp_idle *idle)
{
	struct dp_bell *b = idle->bell;
	if (b == NULL || !b->enabled || idle->empty < idle->policy.spins)
		return;
	idle->armed_seq = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
	__atomic_store_n(&b->waiting, 1, __ATOMIC_RELAXED);
	/* waiting is visible before the cycle looks at its rings (dp_bell_ring's pair). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	idle->armed = true;
}

/* Sleep on the bell for up to us (the armed seq unchanged); true: rung before the end. */
static bool
bell_wait(struct dp_idle *idle, uint32_t us)
{
	struct dp_bell *b = idle->bell;
	struct timespec ts = {
		.tv_sec = us / 1000000,
		.tv_nsec = (long)(us % 1000000) * 1000,
	};
	long rc = syscall(SYS_futex, &b->seq, FUTEX_WAIT_PRIVATE, idle->armed_seq, &ts, NULL, 0);
	bool rung = rc == 0 || (rc < 0 && errno == EAGAIN);
	__atomic_store_n(&b->waiting, 0, __ATOMIC_RELAXED);
	idle->armed = false;
	return rung;
}

void
dp_idle_run(struct dp_idle *idle, uint32_t work)
{
	if (work > 0) {
		if (idle->armed) {
			__atomic_store_n(&idle->bell->waiting, 0, __ATOMIC_RELAXED);
			idle->armed = false;
		}
		idle->empty = 0;
		idle->sleep_us = idle->policy.sleep_us_min;
		return;
	}
	switch (idle->policy.mode) {
	case DP_IDLE_BUSY:
		return;
	case DP_IDLE_PAUSE:
		rte_pause();
		return;
	case DP_IDLE_SLEEP:
		if (idle->empty < idle->policy.spins) {
			idle->empty++;
			rte_pause();
			return;
		}
		if (idle->armed) {
			/* On the bell: what is handed over wakes us. An lcore whose every input
			 * rings sleeps the longest wait at once (only its timers are polled);
			 * the io lcore, whose port is not, doubles up to its cap as below. */
			uint32_t us = idle->wake_on_all ? idle->policy.wait_us_max : idle->sleep_us;
			if (bell_wait(idle, us))
				__atomic_store_n(&idle->rung, idle->rung + 1, __ATOMIC_RELAXED);
			__atomic_store_n(&idle->sleeps, idle->sleeps + 1, __ATOMIC_RELAXED);
			idle->sleep_us = RTE_MIN(idle->sleep_us * 2, idle->policy.sleep_us_max);
			return;
		}
		/* Sleep, doubling up to the cap: the first packet after a quiet period waits at
		 * most sleep_us_max, a busy period never sleeps at all. */
		struct timespec ts = {
			.tv_sec = idle->sleep_us / 1000000,
			.tv_nsec = (long)(idle->sleep_us % 1000000) * 1000,
		};
		nanosleep(&ts, NULL);
		__atomic_store_n(&idle->sleeps, idle->sleeps + 1, __ATOMIC_RELAXED); /* read by main */
		idle->sleep_us = RTE_MIN(idle->sleep_us * 2, idle->policy.sleep_us_max);
		return;
	}
}

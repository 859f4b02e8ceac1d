/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Idle back-off (Aeron's BackoffIdleStrategy, reduced): an lcore that found no work spins,
 * then pauses, then sleeps for doubling intervals up to a cap. Production pins each lcore to
 * an isolated core and uses BUSY; a development box with several lcores per core uses SLEEP
 * so idle lcores leave the core to the ones with work.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

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
	idle->sleep_us = idle->policy.sleep_us_min;
}

void
dp_idle_run(struct dp_idle *idle, uint32_t work)
{
	if (work > 0) {
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

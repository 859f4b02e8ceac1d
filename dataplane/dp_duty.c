/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Duty-cycle statistics and the clock. The clock is read once per cycle by the lcore loop;
 * the end of a working cycle is read again only to measure it (Aeron's duty cycle tracker).
 */
#include <string.h>

#include <rte_cycles.h>

#include "dp_int.h"

static uint64_t clock_mult; /* ns per TSC cycle as 32.32 fixed point */

static void
clock_init(void)
{
	uint64_t hz = rte_get_tsc_hz();
	clock_mult = (uint64_t)(((unsigned __int128)1000000000u << 32) / (hz ? hz : 1));
}

uint64_t
dp_clock_ns(void)
{
	if (unlikely(clock_mult == 0))
		clock_init();
	return (uint64_t)(((unsigned __int128)rte_get_tsc_cycles() * clock_mult) >> 32);
}

void
dp_duty_init(struct dp_duty *duty, uint64_t threshold_ns)
{
	memset(duty, 0, sizeof(*duty));
	duty->threshold_ns = threshold_ns;
}

void
dp_duty_record(struct dp_duty *duty, uint64_t start_ns, uint64_t end_ns, uint32_t work)
{
	/* Single writer; relaxed stores keep the main lcore's reads whole. */
	__atomic_store_n(&duty->cycles, duty->cycles + 1, __ATOMIC_RELAXED);
	if (work == 0)
		return;
	uint64_t ns = end_ns - start_ns;
	__atomic_store_n(&duty->work_cycles, duty->work_cycles + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&duty->work_items, duty->work_items + work, __ATOMIC_RELAXED);
	__atomic_store_n(&duty->busy_ns, duty->busy_ns + ns, __ATOMIC_RELAXED);
	if (ns > duty->max_ns)
		__atomic_store_n(&duty->max_ns, ns, __ATOMIC_RELAXED);
	if (ns > duty->threshold_ns)
		__atomic_store_n(&duty->over_count, duty->over_count + 1, __ATOMIC_RELAXED);
}

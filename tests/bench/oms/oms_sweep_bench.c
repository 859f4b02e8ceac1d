/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oms_sweep_bench: cost of one TTL sweep with 1k and with 1M resident users, the same number
 * (EXPIRE = 256) expiring each time. Users are hydrated in batches of EXPIRE, batch b at
 * cluster time b ms; round r runs the sweep at ttl + r ms + 0.5 ms, when exactly batch r is
 * past the TTL. The seed's sweep walks the LRU tail and stops at the first actor that is not
 * expired, so both figures should be close: O(expired), not O(resident).
 * Each figure is the median over ROUNDS sweeps of the oms_tick that runs it (EXPIRE
 * BeginDehydrates emitted into a no-op sink).
 * Before the sweeps, with the cache full (every user resident), it times oms_cache_info, the
 * host's gauges every 200 ms on the shard lcore: the median of CACHE_CALLS calls, after a
 * check that the call counts every resident idle.
 * Lines: bench: oms_cache_info residents=N ns=N (1k, then 1M), then
 *        bench: oms_sweep resident_1k_ns=N resident_1m_ns=N
 * --cache-info: only the 1M cache and its oms_cache_info figure, no sweeps (for callgrind:
 * valgrind --tool=callgrind --toggle-collect=oms_cache_info oms_sweep_bench --cache-info).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oms/oms_int.h"

#define EXPIRE 256u
#define ROUNDS 3u
#define CACHE_CALLS 5u
#define MS UINT64_C(1000000)
#define TTL (UINT64_C(3600) * 1000 * MS)

static uint64_t emitted;

static void
sink_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)dest;
	(void)msg;
	emitted++;
}

static uint64_t
clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* oms_cache_info with every user resident and idle: the median of CACHE_CALLS calls. */
static void
cache_info_time(const struct oms *oms, uint32_t residents)
{
	uint64_t t[CACHE_CALLS];
	for (uint32_t k = 0; k < CACHE_CALLS; k++) {
		struct oms_cache_info ci;
		uint64_t a = clock_ns();
		oms_cache_info(oms, &ci);
		t[k] = clock_ns() - a;
		if (ci.idle != residents || ci.open != 0 || ci.inflight != 0 ||
		    ci.cap != residents) {
			fprintf(stderr, "oms_sweep_bench: cache_info idle=%u open=%u inflight=%u "
					"cap=%u, want idle=cap=%u\n",
				ci.idle, ci.open, ci.inflight, ci.cap, residents);
			exit(1);
		}
	}
	qsort(t, CACHE_CALLS, sizeof(t[0]), cmp_u64);
	printf("bench: oms_cache_info residents=%u ns=%lu\n", residents,
	       (unsigned long)t[CACHE_CALLS / 2]);
}

/* rounds 0: build the cache and time oms_cache_info only. */
static uint64_t
run(uint32_t residents, int rounds)
{
	struct oms_limits l;
	oms_limits_default(&l);
	l.users_max = residents;
	l.flush_headroom = EXPIRE * (uint32_t)rounds + 16;
	l.assets_per_user = 2;
	l.orders_max = 1024;
	l.parked_max = 64;
	l.dedup_per_user = 2; /* the least oms_limits_check allows */
	l.me_shards_max = 1;
	l.sweep_evict_max = EXPIRE;
	l.releases_max = EXPIRE * (uint32_t)rounds + 16; /* flushes in flight count against it */
	l.sweep_scan_max = EXPIRE * 2;
	l.ttl_ns = TTL;
	l.sweep_interval_ns = MS / 4;
	l.reconcile_interval_ns = 0;
	size_t fp = oms_footprint(&l);
	void *mem = aligned_alloc(64, (fp + 63) & ~(size_t)63);
	if (mem == NULL) {
		fprintf(stderr, "oms_sweep_bench: no memory for %zu bytes\n", fp);
		exit(1);
	}
	memset(mem, 0, fp);
	struct oms *oms;
	if (oms_init(&oms, mem, &l) != 0)
		exit(1);
	struct svc_sink sink = { .ctx = NULL, .emit = sink_emit };
	struct wire_hydrate_user hu;
	memset(&hu, 0, sizeof(hu));
	hu.hdr.type = WIRE_HYDRATE_USER;
	hu.hdr.length = sizeof(hu);
	hu.status = WIRE_HYD_OK;
	hu.state.balance_count = 1;
	hu.state.balances[0] = (struct wire_balance){ 1, 0, 1000 };
	for (uint32_t u = 0; u < residents; u++) {
		hu.state.user = (uint64_t)u + 1;
		hu.epoch = (uint64_t)u + 1; /* a hydrate-ahead's epoch must be fresh */
		oms_apply(oms, (uint64_t)(u / EXPIRE) * MS + 1, &hu.hdr, &sink);
	}
	if (oms_resident_count(oms) != residents) {
		fprintf(stderr, "oms_sweep_bench: %u users resident after hydration, want %u\n",
			oms_resident_count(oms), residents);
		exit(1);
	}
	cache_info_time(oms, residents);
	if (rounds == 0) {
		free(mem);
		return 0;
	}
	uint64_t t[ROUNDS];
	for (int r = 0; r < rounds; r++) {
		uint64_t before = oms_counter_get(oms, OMS_C_DEHYDRATES);
		uint64_t now = TTL + (uint64_t)r * MS + MS / 2;
		uint64_t a = clock_ns();
		oms_tick(oms, now, &sink);
		t[r] = clock_ns() - a;
		uint64_t n = oms_counter_get(oms, OMS_C_DEHYDRATES) - before;
		if (n != EXPIRE) {
			fprintf(stderr, "oms_sweep_bench: round %d dehydrated %lu, want %u\n", r,
				(unsigned long)n, EXPIRE);
			exit(1);
		}
	}
	qsort(t, (size_t)rounds, sizeof(t[0]), cmp_u64);
	printf("oms_sweep_bench: residents=%u expiring=%u footprint_mb=%.1f sweep_ns=[%lu %lu %lu]\n",
	       residents, EXPIRE, (double)fp / 1048576.0, (unsigned long)t[0],
	       (unsigned long)t[rounds / 2], (unsigned long)t[rounds - 1]);
	free(mem);
	return t[rounds / 2];
}

int
main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--cache-info") == 0) {
		run(1000000, 0);
		return 0;
	}
	if (argc != 1) {
		fprintf(stderr, "usage: oms_sweep_bench [--cache-info]\n");
		return 2;
	}
	/* 1k residents hold 3 full batches of 256 (+ a partial one), so 3 rounds fit both. */
	uint64_t small = run(1000, ROUNDS);
	uint64_t big = run(1000000, ROUNDS);
	printf("bench: oms_sweep resident_1k_ns=%lu resident_1m_ns=%lu\n", (unsigned long)small,
	       (unsigned long)big);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oms_bench: the OMS hot path end to end, one order at a time:
 *   NEW_ORDER (admit: owner, dedup, rate limit, filters, exact debit) → provisional ACK +
 *   SUBMIT egress → one ME_EVENT FILL that enters and ends the order (WIRE_EV_F_ENTERED |
 *   WIRE_EV_F_DONE: settle at the fill's notional with the taker fee, release the remainder,
 *   free the saga) → its report, which says done (WIRE_REPORT_F_DONE).
 * 100k (--users) resident users chosen by a Zipf(0.99) law; buys and sells alternate. Each
 * "op" is one order through both applies (plus the batched STREAM_ACK they cause).
 *
 * Phase 1 measures throughput over the whole run (no clock inside the loop; ops_per_s is per
 * second of the thread's CPU time, the wall-clock figure is printed on the line above, as the
 * development VM is shared); phase 2 times
 * each order with clock_gettime (so the percentiles include ~20 ns of clock overhead).
 * --no-timing runs phase 1 only and prints no figures (for callgrind.sh).
 * Options: --ops N (orders per phase, 2,000,000), --users N (100,000), --seed N (the Zipf
 * draw's, 42), --no-timing, --digest.
 * --digest: an equivalence check for changes to the OMS hot path. Every message the service
 * emits (hydration and all) is folded, byte for byte and in order with its destination, into
 * a 64-bit FNV-1a digest, and each phase ends with a line
 *   oms_bench: digest <phase> messages=N digest=0x... state_hash=0x...
 * (state_hash: oms_state_hash() after the phase). Two builds that do the same thing print the
 * same lines for the same arguments. The fold sits in the sink, which the callgrind figures
 * subtract, and costs one test of a flag without --digest.
 * Last line: bench: oms ops_per_s=N p50_ns=N p99_ns=N p999_ns=N bytes_per_actor=N
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/hist.h"
#include "common/prng.h"
#include "tests/bench/bench_digest.h"
#include "oms/oms_int.h"
#include "oms_bench_msgs.h"

static uint32_t USERS = 100000; /* --users */
#define SYMBOL 1
#define A_BASE 1
#define A_QUOTE 2

struct bench {
	struct oms *oms;
	uint64_t now;
	uint64_t seq;        /* ME stream seq */
	struct wire_oid oid; /* the last SUBMIT's orderId */
	uint64_t emitted;
	uint64_t cl;
	uint64_t digest; /* --digest: FNV-1a of every emitted message, in order */
};

/* --digest: fold the service's output into the bench's digest (sink_emit). */
static bool digest_on;

static void
sink_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct bench *b = ctx;
	if (digest_on) {
		b->digest = bench_digest_add(b->digest, (uint32_t)dest, msg);
	}
	b->emitted++;
	if (msg->type == WIRE_SUBMIT)
		b->oid = ((const struct wire_submit *)(const void *)msg)->oid;
}

static uint64_t
clock_of(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t
clock_ns(void)
{
	return clock_of(CLOCK_MONOTONIC);
}

static void
setup(struct bench *b, struct svc_sink *sink)
{
	struct wire_symbol_config sc;
	oms_bench_symbol_init(&sc, SYMBOL, A_BASE, A_QUOTE);
	oms_apply(b->oms, b->now, &sc.hdr, sink);
	struct wire_hydrate_user hu;
	oms_bench_hydrate_init(&hu, A_BASE, A_QUOTE);
	/* Each is a hydrate-ahead, whose claim epoch must be fresh: an epoch at or below one the
	 * shard has seen is a late answer to a hydration it gave up, released, not installed
	 * (docs/fencing.md). */
	for (uint64_t u = 1; u <= USERS; u++) {
		hu.state.user = u;
		hu.epoch = u;
		oms_apply(b->oms, b->now, &hu.hdr, sink);
	}
}

/* Zipf(s) over 1..n by inverse CDF on a precomputed table. */
static uint64_t *
zipf_users(uint64_t count, double s, uint64_t seed)
{
	double *cdf = malloc(sizeof(double) * USERS);
	double sum = 0;
	for (uint32_t k = 0; k < USERS; k++) {
		sum += 1.0 / pow((double)(k + 1), s);
		cdf[k] = sum;
	}
	struct prng p;
	prng_seed(&p, seed);
	uint64_t *out = malloc(sizeof(uint64_t) * (count ? count : 1));
	/* A fixed permutation so the hot users are spread over the table. */
	for (uint64_t i = 0; i < count; i++) {
		double x = (double)(prng_next(&p) >> 11) * (1.0 / 9007199254740992.0) * sum;
		uint32_t lo = 0, hi = USERS - 1;
		while (lo < hi) {
			uint32_t mid = (lo + hi) / 2;
			if (cdf[mid] < x)
				lo = mid + 1;
			else
				hi = mid;
		}
		out[i] = 1 + ((uint64_t)lo * 48271u) % USERS;
	}
	free(cdf);
	return out;
}

/* --digest: what the service emitted so far and the state it is in. */
static void
bench_digest(const struct bench *b, const char *phase)
{
	if (!digest_on)
		return;
	printf("oms_bench: digest %s messages=%lu digest=0x%016lx state_hash=0x%016lx\n", phase,
	       (unsigned long)b->emitted, (unsigned long)b->digest,
	       (unsigned long)oms_state_hash(b->oms));
}

/* One order through the whole path. */
static inline void
one(struct bench *b, struct oms_bench_msgs *m, struct svc_sink *sink, uint64_t user, uint64_t i)
{
	b->now += 250;
	m->no.user = user;
	m->no.cl_ord_id = ++b->cl;
	m->no.side = (i & 1) ? WIRE_SIDE_SELL : WIRE_SIDE_BUY;
	oms_apply(b->oms, b->now, &m->no.hdr, sink);
	m->fill.oid = b->oid;
	m->fill.side = m->no.side;
	m->fill.seq = ++b->seq;
	oms_apply(b->oms, b->now, &m->fill.hdr, sink);
}

int
main(int argc, char **argv)
{
	uint64_t ops = 2000000;
	uint64_t seed = 42;
	int timing = 1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
			ops = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--users") == 0 && i + 1 < argc)
			USERS = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--no-timing") == 0)
			timing = 0;
		else if (strcmp(argv[i], "--digest") == 0)
			digest_on = true;
		else {
			fprintf(stderr, "usage: oms_bench [--ops N] [--users N] [--seed N] "
					"[--no-timing] [--digest]\n");
			return 2;
		}
	}
	struct oms_limits l;
	oms_limits_default(&l);
	l.users_max = USERS;
	l.flush_headroom = 1024;
	l.assets_per_user = 4;
	l.orders_max = 65536;
	l.orders_per_user = 64;
	l.inflight_max = 65536;
	l.dedup_per_user = 8;
	l.me_shards_max = 1;
	l.ttl_ns = UINT64_C(3600) * 1000000000u;
	l.reconcile_interval_ns = 0;
	l.stream_ack_every = 256;
	for (int t = 0; t < OMS_TIERS_MAX; t++)
		l.tiers[t] = (struct oms_tier){ 0, 0 };
	size_t fp = oms_footprint(&l);
	void *mem = aligned_alloc(64, (fp + 63) & ~(size_t)63);
	if (mem == NULL)
		return 1;
	memset(mem, 0, fp);
	struct bench b = { .now = 1000000000, .digest = BENCH_DIGEST_INIT };
	if (oms_init(&b.oms, mem, &l) != 0)
		return 1;
	struct svc_sink sink = { .ctx = &b, .emit = sink_emit };
	setup(&b, &sink);
	if (oms_resident_count(b.oms) != USERS) {
		fprintf(stderr, "oms_bench: %u users resident after hydration, want %u\n",
			oms_resident_count(b.oms), USERS);
		return 1;
	}
	struct oms_bench_msgs m;
	oms_bench_msgs_init(&m, SYMBOL);
	uint64_t *users = zipf_users(ops, 0.99, seed);

	/* Phase 1: throughput. */
	uint64_t t0 = timing ? clock_ns() : 0;
	uint64_t c0 = timing ? clock_of(CLOCK_THREAD_CPUTIME_ID) : 0;
	for (uint64_t i = 0; i < ops; i++)
		one(&b, &m, &sink, users[i], i);
	uint64_t t1 = timing ? clock_ns() : 0;
	uint64_t c1 = timing ? clock_of(CLOCK_THREAD_CPUTIME_ID) : 0;
	if (oms_check_invariants(b.oms) != 0 || oms_inflight_count(b.oms) != 0) {
		fprintf(stderr, "oms_bench: invariants broken\n");
		return 1;
	}
	if (oms_counter_get(b.oms, OMS_C_FILLS) != ops || oms_counter_get(b.oms, OMS_C_NAKS) != 0) {
		fprintf(stderr, "oms_bench: fills %lu naks %lu\n",
			(unsigned long)oms_counter_get(b.oms, OMS_C_FILLS),
			(unsigned long)oms_counter_get(b.oms, OMS_C_NAKS));
		return 1;
	}
	bench_digest(&b, "throughput");
	if (!timing) {
		printf("bench: oms ops=%lu\n", (unsigned long)ops);
		return 0;
	}
	/* On a shared machine the wall clock counts time other processes ran on our core;
	 * ops_per_s is per second of this thread's CPU time (wall figure printed above it). */
	uint64_t wall_ops_per_s = (uint64_t)((double)ops / ((double)(t1 - t0) / 1e9));
	uint64_t ops_per_s = (uint64_t)((double)ops / ((double)(c1 - c0) / 1e9));

	/* Phase 2: latency of each order (admit + its FILL). */
	struct hist *h = malloc(sizeof(*h));
	hist_init(h);
	for (uint64_t i = 0; i < ops; i++) {
		uint64_t a = clock_ns();
		one(&b, &m, &sink, users[i], i);
		hist_record(h, clock_ns() - a);
	}
	bench_digest(&b, "latency");
	/* Per resident user: the actor, its balance slots, its free-list slot, its dedup
	 * window (dedup_per_user outcomes) and its share
	 * of the hash table (kept at most half full: two entries per key). */
	size_t per_actor = sizeof(struct oms_actor) +
			   l.assets_per_user * sizeof(struct oms_balance) + sizeof(uint32_t) +
			   l.dedup_per_user * (sizeof(struct oms_dedup) + sizeof(uint64_t)) +
			   2 * sizeof(struct oms_entry);
	printf("oms_bench: users=%u ops=%lu footprint_mb=%.1f emitted=%lu fees=%ld "
	       "wall_ops_per_s=%lu cpu_ops_per_s=%lu\n",
	       USERS, (unsigned long)ops, (double)fp / 1048576.0, (unsigned long)b.emitted,
	       (long)oms_fees_get(b.oms, A_QUOTE), (unsigned long)wall_ops_per_s,
	       (unsigned long)ops_per_s);
	printf("bench: oms ops_per_s=%lu p50_ns=%lu p99_ns=%lu p999_ns=%lu bytes_per_actor=%zu\n",
	       (unsigned long)ops_per_s, (unsigned long)hist_percentile(h, 50),
	       (unsigned long)hist_percentile(h, 99), (unsigned long)hist_percentile(h, 99.9),
	       per_actor);
	free(h);
	free(users);
	free(mem);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me_bench: throughput and latency of one matching engine on one core.
 *
 * Standard mix (seeded, --seed): 16 symbols and 100k users, each drawn from a Zipf(1.0)
 * distribution; tick 1, lot 1, qty 1..10, a fixed mid per symbol.
 *   ~50%  passive limits near the touch (GTC; 1 in 10 GTD), 0..63 ticks behind, skewed to 0
 *   ~35%  cancels of a uniformly chosen live order
 *   ~10%  aggressive: limits crossing 0..3 ticks through the touch (7%), markets (3%: sells by
 *         qty, buys by quote)
 *    ~5%  IOC / FOK at the touch
 * The book is first warmed with passive limits to --warm resting orders (100k), and the
 * passive share is steered (50% below the target, 40% above) so it stays about there.
 * Every OMS shard (user % 8) acknowledges its stream after each batch of 1024 requests, so
 * dedup records and retention are released as in production; ack cost is inside the timing
 * but acks are not counted as ops.
 *
 * Requests are generated a batch at a time outside the timed region. Phase 1 times whole
 * batches (throughput); phase 2 times each request with clock_gettime (latency percentiles,
 * which therefore include ~20 ns of clock overhead). --no-timing runs phase 1 without clock
 * reads, for callgrind (tests/bench/me/callgrind.sh).
 *
 * Last line: bench: me ops_per_s=N p50_ns=N p99_ns=N p999_ns=N bytes_per_order=N
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
#include "me/me.h"

#define SYMBOLS 16
#define USERS 100000
#define OMS_SHARDS 8
#define BATCH 1024
#define MID INT64_C(1000000)

struct live {
	uint64_t user;
	uint64_t seq;
	uint32_t symbol;
	uint32_t pos_unused;
};

struct bench {
	struct prng prng;
	double zipf_sym[SYMBOLS];
	double *zipf_user;
	uint64_t next_seq;
	uint64_t now;
	struct live *live;       /* resting orders as seen from RESTED/DONE events */
	uint32_t live_count;
	uint32_t live_max;
	uint32_t *live_pos;      /* seq → index in live[] + 1 (0: not live) */
	uint64_t seq_cap;
	uint64_t last_seq[OMS_SHARDS];
	/* events captured by the sink during a batch */
	struct { uint64_t user, seq; uint32_t symbol; uint8_t event; } *ev;
	uint32_t ev_count;
	uint32_t ev_max;
	union {
		struct wire_submit submit;
		struct wire_modify modify;
	} *batch;
	struct me *me;
};

static struct bench B;

static void
sink_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)dest;
	if (msg->type != WIRE_ME_EVENT)
		return;
	const struct wire_me_event *e = (const struct wire_me_event *)msg;
	B.last_seq[e->hdr.shard] = e->seq;
	if (e->event != WIRE_EV_RESTED && e->event != WIRE_EV_DONE)
		return;
	if (B.ev_count < B.ev_max) {
		B.ev[B.ev_count].user = e->oid.user;
		B.ev[B.ev_count].seq = wire_oid_seq(e->oid);
		B.ev[B.ev_count].symbol = e->symbol;
		B.ev[B.ev_count].event = e->event;
		B.ev_count++;
	}
}

static struct svc_sink sink = {.ctx = NULL, .emit = sink_emit};

static void
zipf_init(double *cdf, uint32_t n, double s)
{
	double sum = 0;
	for (uint32_t i = 0; i < n; i++)
		sum += 1.0 / pow((double)(i + 1), s);
	double acc = 0;
	for (uint32_t i = 0; i < n; i++) {
		acc += 1.0 / pow((double)(i + 1), s) / sum;
		cdf[i] = acc;
	}
	cdf[n - 1] = 1.0;
}

static uint32_t
zipf_draw(const double *cdf, uint32_t n)
{
	double u = (double)(prng_next(&B.prng) >> 11) * 0x1.0p-53;
	uint32_t lo = 0, hi = n - 1;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void
live_add(uint64_t user, uint64_t seq, uint32_t symbol)
{
	if (seq >= B.seq_cap || B.live_pos[seq] != 0 || B.live_count >= B.live_max)
		return;
	B.live[B.live_count] = (struct live){.user = user, .seq = seq, .symbol = symbol};
	B.live_pos[seq] = ++B.live_count;
}

static void
live_del(uint64_t seq)
{
	if (seq >= B.seq_cap || B.live_pos[seq] == 0)
		return;
	uint32_t i = B.live_pos[seq] - 1;
	B.live_pos[seq] = 0;
	B.live_count--;
	if (i != B.live_count) {
		B.live[i] = B.live[B.live_count];
		B.live_pos[B.live[i].seq] = i + 1;
	}
}

static void
absorb_events(void)
{
	for (uint32_t i = 0; i < B.ev_count; i++) {
		if (B.ev[i].event == WIRE_EV_RESTED)
			live_add(B.ev[i].user, B.ev[i].seq, B.ev[i].symbol);
		else
			live_del(B.ev[i].seq);
	}
	B.ev_count = 0;
}

static void
ack_all(void)
{
	for (uint16_t sh = 0; sh < OMS_SHARDS; sh++) {
		struct wire_stream_ack a;
		memset(&a, 0, sizeof(a));
		wire_hdr_init(&a.hdr, WIRE_STREAM_ACK, 0);
		a.stream = sh;
		a.seq = B.last_seq[sh];
		me_apply(B.me, B.now, &a.hdr, &sink);
	}
}

static struct wire_submit *
new_submit(uint32_t sym, uint8_t side, uint8_t type, uint8_t tif, int64_t px, int64_t qty)
{
	static struct wire_submit s;
	uint64_t user = 1 + zipf_draw(B.zipf_user, USERS);
	memset(&s, 0, sizeof(s));
	wire_hdr_init(&s.hdr, WIRE_SUBMIT, 0);
	s.oid = wire_oid_make((uint16_t)(user % OMS_SHARDS), user, ++B.next_seq);
	s.symbol = sym;
	s.side = side;
	s.ord_type = type;
	s.tif = tif;
	s.px = px;
	s.qty = qty;
	return &s;
}

/* Distance behind the touch: 0..63 ticks, skewed to 0. */
static int64_t
behind(void)
{
	uint64_t r = prng_next(&B.prng);
	return (int64_t)(__builtin_ctzll(r | (UINT64_C(1) << 5)) * 8 + (int64_t)((r >> 58) & 7));
}

/* Build one request of the mix into slot i. Returns false if it had nothing to cancel. */
static void
gen(uint32_t i, bool warm_only, uint32_t warm_target)
{
	uint32_t sym = 1 + zipf_draw(B.zipf_sym, SYMBOLS);
	uint64_t r = prng_below(&B.prng, 100);
	uint32_t passive = B.live_count < warm_target ? 50 : 40;
	uint8_t side = prng_chance(&B.prng, 1, 2) ? WIRE_SIDE_BUY : WIRE_SIDE_SELL;
	int64_t qty = prng_range(&B.prng, 1, 10);
	int64_t sign = side == WIRE_SIDE_BUY ? 1 : -1;
	struct wire_submit *s;
	if (warm_only || r < passive) {
		int64_t px = MID - sign * (1 + behind());
		bool gtd = prng_chance(&B.prng, 1, 10);
		s = new_submit(sym, side, WIRE_ORD_LIMIT, gtd ? WIRE_TIF_GTD : WIRE_TIF_GTC, px, qty);
		if (gtd)
			s->expire_ns = B.now + 1000000 + prng_below(&B.prng, 100000000);
	} else if (r < 85 && B.live_count > 0) {
		const struct live *l = &B.live[prng_below(&B.prng, B.live_count)];
		struct wire_modify *m = &B.batch[i].modify;
		memset(m, 0, sizeof(*m));
		wire_hdr_init(&m->hdr, WIRE_CANCEL_TO_ME, 0);
		uint16_t sh = (uint16_t)(l->user % OMS_SHARDS);
		m->req = wire_oid_make(sh, l->user, ++B.next_seq);
		m->target = wire_oid_make(sh, l->user, l->seq);
		m->symbol = l->symbol;
		return;
	} else if (r < 92) {
		s = new_submit(sym, side, WIRE_ORD_LIMIT, WIRE_TIF_GTC,
			       MID + sign * (1 + prng_range(&B.prng, 0, 3)), qty);
	} else if (r < 95) {
		if (side == WIRE_SIDE_SELL) {
			s = new_submit(sym, side, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, qty);
		} else {
			s = new_submit(sym, side, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 0);
			s->quote_qty = MID * qty;
		}
	} else {
		s = new_submit(sym, side, WIRE_ORD_LIMIT,
			       prng_chance(&B.prng, 1, 2) ? WIRE_TIF_IOC : WIRE_TIF_FOK,
			       MID + sign * prng_range(&B.prng, 1, 2), qty);
	}
	B.batch[i].submit = *s;
}

static uint64_t
clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t
now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static void
usage(void)
{
	fprintf(stderr, "usage: me_bench [--ops N] [--warm N] [--seed N] [--no-timing]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	uint64_t ops = 2000000;
	uint32_t warm = 100000;
	uint64_t seed = 1;
	bool timing = true;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
			ops = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--warm") == 0 && i + 1 < argc)
			warm = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--no-timing") == 0)
			timing = false;
		else
			usage();
	}

	struct me_limits limits = {
		.shard = 0,
		.streams_max = OMS_SHARDS,
		.symbols_max = SYMBOLS,
		.orders_max = 262144,
		.users_max = 65536,
		.levels_max = 32768,
		.levels_side_max = 1024,
		.gtd_max = 16384,
		.events_max = 2048,    /* acks come every 1024 requests: ~330 events/stream */
		.events_reserve = 512,
	};
	size_t fp = me_footprint(&limits);
	void *mem = aligned_alloc(64, (fp + 63) & ~(size_t)63);
	if (mem == NULL || me_init(&B.me, mem, &limits) != 0) {
		fprintf(stderr, "me_bench: init failed\n");
		return 1;
	}
	memset(mem, 0, 0); /* pages are touched by me_init */
	prng_seed(&B.prng, seed);
	zipf_init(B.zipf_sym, SYMBOLS, 1.0);
	B.zipf_user = malloc(USERS * sizeof(double));
	zipf_init(B.zipf_user, USERS, 1.0);
	B.live_max = limits.orders_max;
	B.live = calloc(B.live_max, sizeof(*B.live));
	B.seq_cap = (uint64_t)warm * 4 + ops * 4 + 1024;
	B.live_pos = calloc(B.seq_cap, sizeof(*B.live_pos));
	B.ev_max = BATCH * 64;
	B.ev = calloc(B.ev_max, sizeof(*B.ev));
	B.batch = calloc(BATCH, sizeof(*B.batch));
	B.now = 1000000000;
	for (uint32_t s = 1; s <= SYMBOLS; s++) {
		struct wire_symbol_config c;
		memset(&c, 0, sizeof(c));
		wire_hdr_init(&c.hdr, WIRE_SYMBOL_CONFIG, 0);
		c.symbol = s;
		c.base_asset = s;
		c.quote_asset = 1000;
		c.status = WIRE_SYM_TRADING;
		c.tick = 1;
		c.lot = 1;
		c.min_qty = 1;
		c.base_unit = 1;
		c.ref_px = MID;
		c.band_bps = 1000;
		me_apply(B.me, B.now, &c.hdr, &sink);
	}

	/* Warm-up: passive limits until the book holds `warm` resting orders. */
	while (me_orders_resting(B.me) < warm) {
		for (uint32_t i = 0; i < BATCH; i++)
			gen(i, true, warm);
		for (uint32_t i = 0; i < BATCH; i++)
			me_apply(B.me, B.now, &B.batch[i].submit.hdr, &sink);
		B.now += 1000000;
		ack_all();
		absorb_events();
		if (B.next_seq > B.seq_cap / 2)
			break;
	}
	uint32_t resting_warm = me_orders_resting(B.me);

	/* Phase 1: throughput over whole batches. */
	uint64_t done = 0, t_total = 0, cpu_total = 0;
	while (done < ops) {
		uint32_t n = ops - done < BATCH ? (uint32_t)(ops - done) : BATCH;
		for (uint32_t i = 0; i < n; i++)
			gen(i, false, warm);
		uint64_t t0 = timing ? now_ns() : 0;
		uint64_t c0 = timing ? clock_ns(CLOCK_THREAD_CPUTIME_ID) : 0;
		for (uint32_t i = 0; i < n; i++) {
			B.now += 100;
			me_apply(B.me, B.now, &B.batch[i].submit.hdr, &sink);
		}
		ack_all();
		if (timing) {
			cpu_total += clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
			t_total += now_ns() - t0;
		}
		absorb_events();
		done += n;
	}

	/* Phase 2: per-request latency. */
	static struct hist h;
	hist_init(&h);
	if (timing) {
		done = 0;
		while (done < ops) {
			uint32_t n = ops - done < BATCH ? (uint32_t)(ops - done) : BATCH;
			for (uint32_t i = 0; i < n; i++)
				gen(i, false, warm);
			for (uint32_t i = 0; i < n; i++) {
				B.now += 100;
				uint64_t t0 = now_ns();
				me_apply(B.me, B.now, &B.batch[i].submit.hdr, &sink);
				hist_record(&h, now_ns() - t0);
			}
			ack_all();
			absorb_events();
			done += n;
		}
	}

	/* Sanity: the mix must be served, not refused. Streams are acknowledged every batch, so
	 * no retention bound is ever reached; every message is one the engine handles. */
	static const enum me_counter never[] = { ME_C_BACKPRESSURE, ME_C_RETENTION_STOP,
						 ME_C_EVENTS_OVERRUN, ME_C_CONFIG_REJECTED,
						 ME_C_IGNORED };
	int bad = 0;
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if (me_counter(B.me, never[i]) != 0) {
			fprintf(stderr, "me_bench: %s: %lu, want 0\n", me_counter_label(never[i]),
				(unsigned long)me_counter(B.me, never[i]));
			bad = 1;
		}
	if (ops >= BATCH && (me_counter(B.me, ME_C_TRADES) == 0 ||
			     me_counter(B.me, ME_C_MODIFIES) == 0 ||
			     me_counter(B.me, ME_C_ACCEPTED) < me_counter(B.me, ME_C_SUBMITS) / 2)) {
		fprintf(stderr, "me_bench: the mix did not trade, cancel and rest as it should\n");
		bad = 1;
	}
	if (bad)
		return 1;

	uint64_t ops_per_s = t_total ? (uint64_t)((double)ops * 1e9 / (double)t_total) : 0;
	printf("me_bench: seed=%lu warm_resting=%u resting=%u records=%u ops=%lu\n",
	       (unsigned long)seed, resting_warm, me_orders_resting(B.me), me_records_used(B.me),
	       (unsigned long)ops);
	for (uint32_t c = 0; c < ME_C_COUNT; c++)
		printf("me_bench: counter %-60s %lu\n", me_counter_label((enum me_counter)c),
		       (unsigned long)me_counter(B.me, (enum me_counter)c));
	printf("me_bench: footprint=%zu bytes (streams %u x %u events retained) snapshot=%zu bytes\n",
	       fp, limits.streams_max, limits.events_max, me_snapshot_size(B.me));
	/* Wall-clock throughput is the headline; CPU-time throughput says what one core does
	 * when the host is shared (it excludes time the thread was not scheduled). */
	printf("me_bench: wall ops_per_s=%lu cpu ops_per_s=%lu\n", (unsigned long)ops_per_s,
	       (unsigned long)(cpu_total ? (uint64_t)((double)ops * 1e9 / (double)cpu_total) : 0));
	printf("bench: me ops_per_s=%lu p50_ns=%lu p99_ns=%lu p999_ns=%lu bytes_per_order=%zu\n",
	       (unsigned long)ops_per_s, (unsigned long)hist_percentile(&h, 50.0),
	       (unsigned long)hist_percentile(&h, 99.0), (unsigned long)hist_percentile(&h, 99.9),
	       me_bytes_per_order(&limits));
	free(B.batch);
	free(B.ev);
	free(B.live_pos);
	free(B.live);
	free(B.zipf_user);
	free(mem);
	return 0;
}

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
 * reads, for callgrind (tests/bench/me/callgrind.sh); --no-latency skips phase 2 (its p*_ns
 * print 0; tests/bench/app/pipeline.sh wants the throughput only).
 *
 * Small-book phase (issue 18: what a big capacity costs a small book), run first: the same
 * mix on one symbol, the book steered to --book resting orders (1,000), in two engines of one
 * process, same seed and --ops requests each: one with the standard run's limits (262,144
 * order records, "default_cap") and one with the tables that grow with the book at 1/32 of
 * that and one symbol (8,192 records, "small_cap": limits_small). The two engines take
 * turns every 16 batches, so the host's load falls on both alike; time_ratio is
 * default_cap's time over small_cap's. Both must do the same work (every counter equal) and
 * keep the book about its target.
 * --no-timing skips the phase unless --small-book asks for it (the standard callgrind run
 * counts the standard mix only). me_bench_small_book (meson.build) is this file with the
 * small-book phase at the default capacity alone, for callgrind.sh's small-book figure.
 *
 * Options: --ops N (requests per run, 2,000,000), --warm N, --book N, --seed N, --no-timing,
 * --no-latency, --small-book / --no-small-book / --small-book-only, --caps default|small|both,
 * --digest.
 * --digest: an equivalence check for changes to the engine's hot path. Every message each
 * engine emits (warm-up, acks and all) is folded, byte for byte and in order with its
 * destination, into a 64-bit FNV-1a digest, and each run ends with a line
 *   me_bench: digest <run> messages=N digest=0x... state_hash=0x...
 * (state_hash: me_state_hash() after the run). Two engine builds that do the same thing
 * print the same lines for the same arguments. The fold sits in the sink, which the
 * callgrind figures subtract, and costs one test of a flag without --digest.
 * Lines: when the small-book phase ran,
 *   bench: me_small book=N ops_per_s_default_cap=N ops_per_s_small_cap=N time_ratio=N.NN
 *     cpu_time_ratio=N.NN p50_ns=N p99_ns=N small_cap_p50_ns=N small_cap_p99_ns=N
 *     orders_max_default=N orders_max_small=N
 * (p50_ns, p99_ns: default_cap's; a figure of an engine not run is 0), then, last unless
 * --small-book-only,
 *   bench: me ops_per_s=N p50_ns=N p99_ns=N p999_ns=N bytes_per_order=N
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
#include "me/me.h"
#include "me_bench_symbol.h"

#define SYMBOLS 16
#define USERS 100000
#define OMS_SHARDS 8
#define BATCH 1024
#define TURN_BATCHES 16 /* small-book engines take turns after this many batches each */
#define MID INT64_C(1000000)

/* The small-book phase's engines (--caps). */
enum { CAP_DEFAULT = 1, CAP_SMALL = 2 };

/* me_bench_small_book: the small-book phase alone, at the default capacity, timing or not. */
#ifdef ME_BENCH_SMALL_BOOK_ONLY
#define DEFAULT_STANDARD false
#define DEFAULT_CAPS CAP_DEFAULT
#else
#define DEFAULT_STANDARD true
#define DEFAULT_CAPS (CAP_DEFAULT | CAP_SMALL)
#endif

/* The standard run's limits, also the small-book phase's default capacity. */
static const struct me_limits limits_default = {
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

/* The small capacity: the tables that grow with the book at 1/32 of the default, one symbol.
 * A side keeps 128 levels: the mix rests 1..48 ticks behind the mid and 1..4 through it.
 * Stream retention stays as it is: it follows the ack cadence, not the book. */
static const struct me_limits limits_small = {
	.shard = 0,
	.streams_max = OMS_SHARDS,
	.symbols_max = 1,
	.orders_max = 8192,
	.users_max = 2048,
	.levels_max = 1024,
	.levels_side_max = 128,
	.gtd_max = 512,
	.events_max = 2048,
	.events_reserve = 512,
};

struct live {
	uint64_t user;        /* owner */
	uint64_t seq;         /* its orderId's sequence */
	uint32_t symbol;      /* book it rests on */
	uint32_t pos_unused;  /* padding */
};

/* Captured by the sink during a batch: what the bench must learn about live orders. */
struct ev {
	uint64_t user;        /* order owner */
	uint64_t seq;         /* order sequence */
	uint32_t symbol;      /* its book */
	uint8_t event;        /* WIRE_EV_RESTED or WIRE_EV_DONE (also: an event that says done) */
};

/* One engine and the request generator that drives it. */
struct bench {
	const char *name;            /* for messages */
	struct me_limits limits;     /* the engine's */
	size_t footprint;            /* me_footprint(limits) */
	void *mem;                   /* the engine's memory */
	struct me *me;               /* the engine */
	struct svc_sink sink;        /* emit: sink_emit, ctx: this bench */
	struct prng prng;            /* the mix's draws */
	uint32_t symbols;            /* symbols configured and traded (1..SYMBOLS) */
	uint32_t book_target;        /* resting orders the passive share steers to */
	double zipf_sym[SYMBOLS];    /* Zipf(1.0) CDF over the symbols */
	uint64_t next_seq;           /* last orderId sequence used */
	uint64_t now;                /* cluster time */
	struct live *live;           /* resting orders as seen from RESTED/DONE events */
	uint32_t live_count;         /* entries in live[] */
	uint32_t live_max;           /* capacity of live[] */
	uint32_t *live_pos;          /* seq → index in live[] + 1 (0: not live) */
	uint64_t seq_cap;            /* entries of live_pos[] */
	uint64_t last_seq[OMS_SHARDS]; /* last event seq per stream, acked after each batch */
	struct ev *ev;               /* events captured during a batch */
	uint32_t ev_count;           /* entries in ev[] */
	uint32_t ev_max;             /* capacity of ev[] */
	union {
		struct wire_submit submit;
		struct wire_modify modify;
	} *batch;                    /* the requests of one batch */
	uint64_t ops_done;           /* requests applied after the warm-up */
	uint64_t wall_ns;            /* wall time of the throughput batches */
	uint64_t cpu_ns;             /* thread CPU time of the throughput batches */
	uint32_t resting_warm;       /* resting orders after the warm-up */
	uint32_t resting_min;        /* fewest resting orders after a batch */
	uint32_t resting_max;        /* most resting orders after a batch */
	struct hist lat;             /* per-request latency (phase 2) */
	uint64_t digest;             /* --digest: FNV-1a of every emitted message, in order */
	uint64_t messages;           /* --digest: messages folded into it */
};

/* --digest: fold the engine's output into each bench's digest (sink_emit). */
static bool digest_on;

/* Zipf(1.0) CDF over the users, shared by every bench (read-only after main's start). */
static double zipf_user[USERS];

static void
sink_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct bench *b = ctx;
	if (digest_on) {
		b->digest = bench_digest_add(b->digest, (uint32_t)dest, msg);
		b->messages++;
	}
	if (msg->type != WIRE_ME_EVENT)
		return;
	const struct wire_me_event *e = (const struct wire_me_event *)msg;
	b->last_seq[e->hdr.shard] = e->seq;
	uint8_t kind = wire_ev_done(e) ? WIRE_EV_DONE : e->event;
	if (kind != WIRE_EV_RESTED && kind != WIRE_EV_DONE)
		return;
	if (b->ev_count < b->ev_max) {
		b->ev[b->ev_count].user = e->oid.user;
		b->ev[b->ev_count].seq = wire_oid_seq(e->oid);
		b->ev[b->ev_count].symbol = e->symbol;
		b->ev[b->ev_count].event = kind;
		b->ev_count++;
	}
}

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
zipf_draw(struct prng *prng, const double *cdf, uint32_t n)
{
	double u = (double)(prng_next(prng) >> 11) * 0x1.0p-53;
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
live_add(struct bench *b, uint64_t user, uint64_t seq, uint32_t symbol)
{
	if (seq >= b->seq_cap || b->live_pos[seq] != 0 || b->live_count >= b->live_max)
		return;
	b->live[b->live_count] = (struct live){.user = user, .seq = seq, .symbol = symbol};
	b->live_pos[seq] = ++b->live_count;
}

static void
live_del(struct bench *b, uint64_t seq)
{
	if (seq >= b->seq_cap || b->live_pos[seq] == 0)
		return;
	uint32_t i = b->live_pos[seq] - 1;
	b->live_pos[seq] = 0;
	b->live_count--;
	if (i != b->live_count) {
		b->live[i] = b->live[b->live_count];
		b->live_pos[b->live[i].seq] = i + 1;
	}
}

static void
absorb_events(struct bench *b)
{
	for (uint32_t i = 0; i < b->ev_count; i++) {
		if (b->ev[i].event == WIRE_EV_RESTED)
			live_add(b, b->ev[i].user, b->ev[i].seq, b->ev[i].symbol);
		else
			live_del(b, b->ev[i].seq);
	}
	b->ev_count = 0;
}

static void
ack_all(struct bench *b)
{
	for (uint16_t sh = 0; sh < OMS_SHARDS; sh++) {
		struct wire_stream_ack a;
		memset(&a, 0, sizeof(a));
		wire_hdr_init(&a.hdr, WIRE_STREAM_ACK, 0);
		a.stream = sh;
		a.seq = b->last_seq[sh];
		me_apply(b->me, b->now, &a.hdr, &b->sink);
	}
}

static struct wire_submit *
new_submit(struct bench *b, uint32_t sym, uint8_t side, uint8_t type, uint8_t tif, int64_t px,
	   int64_t qty)
{
	static struct wire_submit s;
	uint64_t user = 1 + zipf_draw(&b->prng, zipf_user, USERS);
	memset(&s, 0, sizeof(s));
	wire_hdr_init(&s.hdr, WIRE_SUBMIT, 0);
	s.oid = wire_oid_make((uint16_t)(user % OMS_SHARDS), user, ++b->next_seq);
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
behind(struct bench *b)
{
	uint64_t r = prng_next(&b->prng);
	return (int64_t)(__builtin_ctzll(r | (UINT64_C(1) << 5)) * 8 + (int64_t)((r >> 58) & 7));
}

/* Build one request of the mix into slot i: passive limits only while warming. */
static void
gen(struct bench *b, uint32_t i, bool warm_only)
{
	uint32_t sym = 1 + zipf_draw(&b->prng, b->zipf_sym, b->symbols);
	uint64_t r = prng_below(&b->prng, 100);
	uint32_t passive = b->live_count < b->book_target ? 50 : 40;
	uint8_t side = prng_chance(&b->prng, 1, 2) ? WIRE_SIDE_BUY : WIRE_SIDE_SELL;
	int64_t qty = prng_range(&b->prng, 1, 10);
	int64_t sign = side == WIRE_SIDE_BUY ? 1 : -1;
	struct wire_submit *s;
	if (warm_only || r < passive) {
		int64_t px = MID - sign * (1 + behind(b));
		bool gtd = prng_chance(&b->prng, 1, 10);
		s = new_submit(b, sym, side, WIRE_ORD_LIMIT, gtd ? WIRE_TIF_GTD : WIRE_TIF_GTC, px,
			       qty);
		if (gtd)
			s->expire_ns = b->now + 1000000 + prng_below(&b->prng, 100000000);
	} else if (r < 85 && b->live_count > 0) {
		const struct live *l = &b->live[prng_below(&b->prng, b->live_count)];
		struct wire_modify *m = &b->batch[i].modify;
		memset(m, 0, sizeof(*m));
		wire_hdr_init(&m->hdr, WIRE_CANCEL_TO_ME, 0);
		uint16_t sh = (uint16_t)(l->user % OMS_SHARDS);
		m->req = wire_oid_make(sh, l->user, ++b->next_seq);
		m->target = wire_oid_make(sh, l->user, l->seq);
		m->symbol = l->symbol;
		return;
	} else if (r < 92) {
		s = new_submit(b, sym, side, WIRE_ORD_LIMIT, WIRE_TIF_GTC,
			       MID + sign * (1 + prng_range(&b->prng, 0, 3)), qty);
	} else if (r < 95) {
		if (side == WIRE_SIDE_SELL) {
			s = new_submit(b, sym, side, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, qty);
		} else {
			s = new_submit(b, sym, side, WIRE_ORD_MARKET, WIRE_TIF_IOC, 0, 0);
			s->quote_qty = MID * qty;
		}
	} else {
		s = new_submit(b, sym, side, WIRE_ORD_LIMIT,
			       prng_chance(&b->prng, 1, 2) ? WIRE_TIF_IOC : WIRE_TIF_FOK,
			       MID + sign * prng_range(&b->prng, 1, 2), qty);
	}
	b->batch[i].submit = *s;
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

/* An engine with `limits` and `symbols` symbols configured, its generator seeded, room for
 * a book of book_target and 2 × ops requests after the warm-up. Returns 0 or -ENOMEM/-EINVAL. */
static int
bench_open(struct bench *b, const char *name, const struct me_limits *limits, uint32_t symbols,
	   uint32_t book_target, uint64_t ops, uint64_t seed)
{
	memset(b, 0, sizeof(*b));
	b->name = name;
	b->limits = *limits;
	b->footprint = me_footprint(limits);
	if (b->footprint == 0 || symbols == 0 || symbols > limits->symbols_max || symbols > SYMBOLS)
		return -EINVAL;
	b->mem = aligned_alloc(64, (b->footprint + 63) & ~(size_t)63);
	if (b->mem == NULL)
		return -ENOMEM;
	if (me_init(&b->me, b->mem, limits) != 0) /* touches every page */
		return -EINVAL;
	b->sink = (struct svc_sink){.ctx = b, .emit = sink_emit};
	prng_seed(&b->prng, seed);
	b->digest = BENCH_DIGEST_INIT;
	b->symbols = symbols;
	b->book_target = book_target;
	zipf_init(b->zipf_sym, symbols, 1.0);
	b->live_max = limits->orders_max;
	b->live = calloc(b->live_max, sizeof(*b->live));
	b->seq_cap = (uint64_t)book_target * 4 + ops * 4 + 1024;
	b->live_pos = calloc(b->seq_cap, sizeof(*b->live_pos));
	b->ev_max = BATCH * 64;
	b->ev = calloc(b->ev_max, sizeof(*b->ev));
	b->batch = calloc(BATCH, sizeof(*b->batch));
	if (b->live == NULL || b->live_pos == NULL || b->ev == NULL || b->batch == NULL)
		return -ENOMEM;
	b->now = 1000000000;
	b->resting_min = UINT32_MAX;
	hist_init(&b->lat);
	for (uint32_t s = 1; s <= symbols; s++) {
		struct wire_symbol_config c;
		me_bench_symbol_init(&c, s, MID);
		me_apply(b->me, b->now, &c.hdr, &b->sink);
	}
	return 0;
}

/* --digest: what the engine emitted and the state it ended in. */
static void
bench_digest(const struct bench *b)
{
	if (!digest_on)
		return;
	printf("me_bench: digest %s messages=%lu digest=0x%016lx state_hash=0x%016lx\n", b->name,
	       (unsigned long)b->messages, (unsigned long)b->digest,
	       (unsigned long)me_state_hash(b->me));
}

static void
bench_close(struct bench *b)
{
	free(b->batch);
	free(b->ev);
	free(b->live_pos);
	free(b->live);
	free(b->mem);
	memset(b, 0, sizeof(*b));
}

/* Warm-up: passive limits until the book holds book_target resting orders. */
static void
bench_warm(struct bench *b)
{
	while (me_orders_resting(b->me) < b->book_target) {
		for (uint32_t i = 0; i < BATCH; i++)
			gen(b, i, true);
		for (uint32_t i = 0; i < BATCH; i++)
			me_apply(b->me, b->now, &b->batch[i].submit.hdr, &b->sink);
		b->now += 1000000;
		ack_all(b);
		absorb_events(b);
		if (b->next_seq > b->seq_cap / 2)
			break;
	}
	b->resting_warm = me_orders_resting(b->me);
}

enum batch_timing {
	TIME_NONE,     /* no clock reads (callgrind) */
	TIME_BATCH,    /* wall and CPU time of the whole batch: throughput */
	TIME_REQUEST,  /* each request into the latency histogram */
};

/* Generate and apply one batch of n requests of the mix, then ack every stream. */
static void
bench_batch(struct bench *b, uint32_t n, enum batch_timing timing)
{
	for (uint32_t i = 0; i < n; i++)
		gen(b, i, false);
	uint64_t t0 = timing == TIME_BATCH ? now_ns() : 0;
	uint64_t c0 = timing == TIME_BATCH ? clock_ns(CLOCK_THREAD_CPUTIME_ID) : 0;
	for (uint32_t i = 0; i < n; i++) {
		b->now += 100;
		if (timing == TIME_REQUEST) {
			uint64_t r0 = now_ns();
			me_apply(b->me, b->now, &b->batch[i].submit.hdr, &b->sink);
			hist_record(&b->lat, now_ns() - r0);
		} else {
			me_apply(b->me, b->now, &b->batch[i].submit.hdr, &b->sink);
		}
	}
	ack_all(b);
	if (timing == TIME_BATCH) {
		b->cpu_ns += clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		b->wall_ns += now_ns() - t0;
	}
	absorb_events(b);
	b->ops_done += n;
	uint32_t resting = me_orders_resting(b->me);
	if (resting < b->resting_min)
		b->resting_min = resting;
	if (resting > b->resting_max)
		b->resting_max = resting;
}

/* The requests of the next batch of a run of `ops` requests that has done `done`. */
static uint32_t
batch_size(uint64_t ops, uint64_t done)
{
	return ops - done < BATCH ? (uint32_t)(ops - done) : BATCH;
}

/* Sanity: the mix must be served, not refused. Streams are acknowledged every batch, so
 * no retention bound is ever reached; every message is one the engine handles. Returns 0 or 1. */
static int
bench_check(const struct bench *b)
{
	static const enum me_counter never[] = { ME_C_BACKPRESSURE, ME_C_RETENTION_STOP,
						 ME_C_EVENTS_OVERRUN, ME_C_CONFIG_REJECTED,
						 ME_C_IGNORED };
	int bad = 0;
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if (me_counter(b->me, never[i]) != 0) {
			fprintf(stderr, "me_bench: %s: %s: %lu, want 0\n", b->name,
				me_counter_label(never[i]), (unsigned long)me_counter(b->me, never[i]));
			bad = 1;
		}
	if (b->ops_done >= BATCH && (me_counter(b->me, ME_C_TRADES) == 0 ||
				     me_counter(b->me, ME_C_MODIFIES) == 0 ||
				     me_counter(b->me, ME_C_ACCEPTED) <
					     me_counter(b->me, ME_C_SUBMITS) / 2)) {
		fprintf(stderr, "me_bench: %s: the mix did not trade, cancel and rest as it should\n",
			b->name);
		bad = 1;
	}
	return bad;
}

/* The small book must stay about its target once warm: within half and twice of it. */
static int
bench_check_book(const struct bench *b)
{
	if (b->ops_done == 0)
		return 0;
	if (b->resting_warm < b->book_target || b->resting_min < b->book_target / 2 ||
	    b->resting_max > b->book_target * 2) {
		fprintf(stderr, "me_bench: %s: book of %u resting orders (warm %u, min %u, max %u), "
			"want about %u\n", b->name, me_orders_resting(b->me), b->resting_warm,
			b->resting_min, b->resting_max, b->book_target);
		return 1;
	}
	return 0;
}

/* Same seed and requests: a capacity that never binds changes no outcome. Returns 0 or 1. */
static int
bench_check_same(const struct bench *a, const struct bench *b)
{
	int bad = 0;
	for (uint32_t c = 0; c < ME_C_COUNT; c++)
		if (me_counter(a->me, (enum me_counter)c) != me_counter(b->me, (enum me_counter)c)) {
			fprintf(stderr, "me_bench: %s %lu, %s %lu: %s\n", a->name,
				(unsigned long)me_counter(a->me, (enum me_counter)c), b->name,
				(unsigned long)me_counter(b->me, (enum me_counter)c),
				me_counter_label((enum me_counter)c));
			bad = 1;
		}
	if (me_orders_resting(a->me) != me_orders_resting(b->me) ||
	    me_records_used(a->me) != me_records_used(b->me)) {
		fprintf(stderr, "me_bench: %s and %s hold different books\n", a->name, b->name);
		bad = 1;
	}
	return bad;
}

static uint64_t
per_s(uint64_t ops, uint64_t ns)
{
	return ns ? (uint64_t)((double)ops * 1e9 / (double)ns) : 0;
}

/* The small-book phase: the runs of `caps` take turns, TURN_BATCHES batches at a time, first
 * through the throughput phase and then (timing and latency) the latency phase. Returns 0 or 1. */
static int
small_book_phase(unsigned caps, uint32_t book, uint64_t ops, uint64_t seed, bool timing,
		 bool latency)
{
	static struct bench runs[2];
	struct bench *def = NULL, *sml = NULL;
	uint32_t n = 0;
	int bad = 0;
	if (caps & CAP_DEFAULT) {
		def = &runs[n++];
		if (bench_open(def, "small_book default_cap", &limits_default, 1, book, ops, seed)) {
			fprintf(stderr, "me_bench: small book: default capacity: init failed\n");
			return 1;
		}
	}
	if (caps & CAP_SMALL) {
		sml = &runs[n++];
		if (bench_open(sml, "small_book small_cap", &limits_small, 1, book, ops, seed)) {
			fprintf(stderr, "me_bench: small book: small capacity: init failed\n");
			return 1;
		}
	}
	for (uint32_t r = 0; r < n; r++)
		bench_warm(&runs[r]);
	for (int phase = 0; phase < (timing && latency ? 2 : 1); phase++) {
		enum batch_timing t = !timing ? TIME_NONE : phase == 0 ? TIME_BATCH : TIME_REQUEST;
		uint64_t done = 0;
		while (done < ops) {
			uint64_t next = done;
			for (uint32_t r = 0; r < n; r++) {
				next = done;
				for (uint32_t k = 0; k < TURN_BATCHES && next < ops; k++) {
					uint32_t m = batch_size(ops, next);
					bench_batch(&runs[r], m, t);
					next += m;
				}
			}
			done = next;
		}
	}
	for (uint32_t r = 0; r < n; r++) {
		bad |= bench_check(&runs[r]);
		bad |= bench_check_book(&runs[r]);
	}
	if (def != NULL && sml != NULL)
		bad |= bench_check_same(def, sml);
	if (bad == 0) {
		for (uint32_t r = 0; r < n; r++) {
			const struct bench *b = &runs[r];
			printf("me_bench: %s orders_max=%u footprint=%zu warm_resting=%u "
			       "resting_min=%u resting_max=%u resting=%u ops=%lu wall ops_per_s=%lu "
			       "cpu ops_per_s=%lu trades=%lu\n",
			       b->name, b->limits.orders_max, b->footprint, b->resting_warm,
			       b->resting_min == UINT32_MAX ? 0 : b->resting_min, b->resting_max,
			       me_orders_resting(b->me), (unsigned long)ops,
			       (unsigned long)per_s(ops, b->wall_ns), (unsigned long)per_s(ops, b->cpu_ns),
			       (unsigned long)me_counter(b->me, ME_C_TRADES));
		}
		/* Same requests on both: the ratio of their times is the inverse of their rates. */
		double time_ratio = def && sml && sml->wall_ns ? (double)def->wall_ns / (double)sml->wall_ns
							       : 0;
		double cpu_ratio = def && sml && sml->cpu_ns ? (double)def->cpu_ns / (double)sml->cpu_ns
							     : 0;
		printf("bench: me_small book=%u ops_per_s_default_cap=%lu ops_per_s_small_cap=%lu "
		       "time_ratio=%.2f cpu_time_ratio=%.2f p50_ns=%lu p99_ns=%lu "
		       "small_cap_p50_ns=%lu small_cap_p99_ns=%lu orders_max_default=%u "
		       "orders_max_small=%u\n",
		       book, (unsigned long)(def ? per_s(ops, def->wall_ns) : 0),
		       (unsigned long)(sml ? per_s(ops, sml->wall_ns) : 0), time_ratio, cpu_ratio,
		       (unsigned long)(def ? hist_percentile(&def->lat, 50.0) : 0),
		       (unsigned long)(def ? hist_percentile(&def->lat, 99.0) : 0),
		       (unsigned long)(sml ? hist_percentile(&sml->lat, 50.0) : 0),
		       (unsigned long)(sml ? hist_percentile(&sml->lat, 99.0) : 0),
		       limits_default.orders_max, limits_small.orders_max);
	}
	for (uint32_t r = 0; r < n; r++) {
		bench_digest(&runs[r]);
		bench_close(&runs[r]);
	}
	return bad;
}

/* The standard run: 16 symbols, the book warmed to `warm`, ops requests per phase. */
static int
standard_run(uint32_t warm, uint64_t ops, uint64_t seed, bool timing, bool latency)
{
	static struct bench std;
	struct bench *b = &std;
	if (bench_open(b, "standard", &limits_default, SYMBOLS, warm, ops, seed) != 0) {
		fprintf(stderr, "me_bench: init failed\n");
		return 1;
	}
	bench_warm(b);

	/* Phase 1: throughput over whole batches. */
	for (uint64_t done = 0; done < ops;) {
		uint32_t n = batch_size(ops, done);
		bench_batch(b, n, timing ? TIME_BATCH : TIME_NONE);
		done += n;
	}
	/* Phase 2: per-request latency. */
	if (timing && latency)
		for (uint64_t done = 0; done < ops;) {
			uint32_t n = batch_size(ops, done);
			bench_batch(b, n, TIME_REQUEST);
			done += n;
		}
	if (bench_check(b)) {
		bench_close(b);
		return 1;
	}

	uint64_t ops_per_s = per_s(ops, b->wall_ns);
	printf("me_bench: seed=%lu warm_resting=%u resting=%u records=%u ops=%lu\n",
	       (unsigned long)seed, b->resting_warm, me_orders_resting(b->me),
	       me_records_used(b->me), (unsigned long)ops);
	for (uint32_t c = 0; c < ME_C_COUNT; c++)
		printf("me_bench: counter %-60s %lu\n", me_counter_label((enum me_counter)c),
		       (unsigned long)me_counter(b->me, (enum me_counter)c));
	printf("me_bench: footprint=%zu bytes (streams %u x %u events retained) snapshot=%zu bytes\n",
	       b->footprint, b->limits.streams_max, b->limits.events_max,
	       me_snapshot_size(b->me));
	/* Wall-clock throughput is the headline; CPU-time throughput says what one core does
	 * when the host is shared (it excludes time the thread was not scheduled). */
	printf("me_bench: wall ops_per_s=%lu cpu ops_per_s=%lu\n", (unsigned long)ops_per_s,
	       (unsigned long)per_s(ops, b->cpu_ns));
	printf("bench: me ops_per_s=%lu p50_ns=%lu p99_ns=%lu p999_ns=%lu bytes_per_order=%zu\n",
	       (unsigned long)ops_per_s, (unsigned long)hist_percentile(&b->lat, 50.0),
	       (unsigned long)hist_percentile(&b->lat, 99.0),
	       (unsigned long)hist_percentile(&b->lat, 99.9), me_bytes_per_order(&b->limits));
	bench_digest(b);
	bench_close(b);
	return 0;
}

static void
usage(void)
{
	fprintf(stderr, "usage: me_bench [--ops N] [--warm N] [--book N] [--seed N] [--no-timing]\n"
			"                [--no-latency]\n"
			"                [--small-book | --no-small-book | --small-book-only]\n"
			"                [--caps default|small|both] [--digest]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	uint64_t ops = 2000000;
	uint32_t warm = 100000;
	uint32_t book = 1000;
	uint64_t seed = 1;
	bool timing = true;
	bool latency = true;
	int small = -1; /* -1: with timing only; 0: no; 1: yes */
	bool standard = DEFAULT_STANDARD;
	unsigned caps = DEFAULT_CAPS;
#ifdef ME_BENCH_SMALL_BOOK_ONLY
	small = 1;
#endif
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
			ops = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--warm") == 0 && i + 1 < argc)
			warm = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--book") == 0 && i + 1 < argc)
			book = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--no-timing") == 0)
			timing = false;
		else if (strcmp(argv[i], "--no-latency") == 0)
			latency = false;
		else if (strcmp(argv[i], "--digest") == 0)
			digest_on = true;
		else if (strcmp(argv[i], "--small-book") == 0)
			small = 1;
		else if (strcmp(argv[i], "--no-small-book") == 0)
			small = 0;
		else if (strcmp(argv[i], "--small-book-only") == 0) {
			small = 1;
			standard = false;
		} else if (strcmp(argv[i], "--caps") == 0 && i + 1 < argc) {
			const char *c = argv[++i];
			caps = strcmp(c, "default") == 0 ? CAP_DEFAULT
			       : strcmp(c, "small") == 0 ? CAP_SMALL
			       : strcmp(c, "both") == 0	 ? CAP_DEFAULT | CAP_SMALL
							 : 0;
			if (caps == 0)
				usage();
		} else
			usage();
	}
	/* The small book must fit the small capacity with room for the unacked records. */
	if (book == 0 || book > limits_small.orders_max / 4) {
		fprintf(stderr, "me_bench: --book must be 1..%u\n", limits_small.orders_max / 4);
		return 2;
	}
	zipf_init(zipf_user, USERS, 1.0);
	if (small == 1 || (small == -1 && timing))
		if (small_book_phase(caps, book, ops, seed, timing, latency) != 0)
			return 1;
	if (standard && standard_run(warm, ops, seed, timing, latency) != 0)
		return 1;
	return 0;
}

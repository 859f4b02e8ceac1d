/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shadow copy (app/app_shadow.h) over the real matching engine: a primary engine applied
 * directly through me_svc_ops, as the shard lcore applies it, and a copy handed to the
 * shadow, fed every message and tick the primary took. A seeded generator drives a mixed load
 * over two symbols: passive limits that rest (some GTD), limits and IOCs that cross, cancels
 * of recent orders (some of them gone already: refused), and stream acknowledgements that
 * keep retention from filling. Every snapshot the shadow serialises is compared byte for byte
 * with the primary's own snapshot taken when the job was posted, and restored into a fresh
 * engine whose state hash must be the primary's at that point. Seeds are the primary's
 * snapshot bytes (as svc_ops.restore takes them) after the copy was made to diverge by
 * messages applied to the primary alone, so a seed that is not taken, taken late or taken
 * with the wrong records around it shows in the bytes.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/app_say.h"
#include "app/app_shadow.h"
#include "common/prng.h"
#include "common/wire.h"
#include "me/me.h"
#include "tests/bench/me/me_bench_symbol.h"

#define STREAMS 4u            /* OMS shards: a user's orders go to stream user % STREAMS */
#define SYMBOLS 2u            /* symbols traded, 1..SYMBOLS */
#define USERS 40u             /* users drawn from */
#define RECENT 256u           /* orders remembered for cancels */
#define MID INT64_C(100000)   /* every symbol's reference price */
#define WAIT_NS 10000000000ull /* the bound on any wait for the thread: 10 s */

static const struct me_limits limits = {
	.shard = 0,
	.streams_max = STREAMS,
	.symbols_max = 4,
	.orders_max = 8192,
	.users_max = 256,
	.levels_max = 2048,
	.levels_side_max = 512,
	.gtd_max = 4096,
	.events_max = 1024,
	.events_reserve = 64,
};

static void *mems[2];           /* the primary's and the copy's memory */
static struct me *primary;      /* the shard's service */
static struct me *copy;         /* the shadow's */
static struct app_shadow *sh;   /* the shadow under test */
static struct prng rng;         /* the load's draws */
static uint64_t now;            /* cluster time of the last record */
static uint64_t idx;            /* index of the last record (a running counter) */
static uint64_t next_seq;       /* last user_seq handed out */
static uint64_t pushed;         /* records the shadow queued since create */
static uint64_t pushed_bytes;   /* their ring bytes: header and message padded to 8 */
static uint64_t stream_seq[STREAMS]; /* last event seq seen per stream (acked now and then) */
static struct { struct wire_oid oid; uint32_t symbol; } recent[RECENT]; /* cancel targets */
static uint32_t recent_n;
static uint32_t says;           /* say callbacks (the thread may make them) */
static uint32_t says_crit;

/* A snapshot job and what it must give: the primary's bytes and hash when it was posted. */
struct job {
	uint8_t *got;      /* the shadow's buffer */
	size_t cap;
	uint8_t *want;     /* the primary's snapshot at the post */
	size_t want_len;
	uint64_t want_hash;
	uint64_t index;    /* the index it was posted at */
};

static void
say_rec(void *ctx, bool crit, const char *text)
{
	(void)ctx;
	(void)text;
	__atomic_add_fetch(&says, 1, __ATOMIC_RELAXED);
	if (crit)
		__atomic_add_fetch(&says_crit, 1, __ATOMIC_RELAXED);
}

/* The primary's egress: only the streams' last seqs matter (the load acknowledges them, so
 * retention never refuses a request and the mix stays what it is drawn to be). */
static void
primary_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)dest;
	if (msg->type != WIRE_ME_EVENT)
		return;
	const struct wire_me_event *e = (const struct wire_me_event *)msg;
	if (e->hdr.shard < STREAMS)
		stream_seq[e->hdr.shard] = e->seq;
}

static struct svc_sink primary_sink = { .ctx = NULL, .emit = primary_emit };

/* A fresh engine in *mem (the caller frees it). */
static struct me *
engine_new(void **mem)
{
	size_t fp = me_footprint(&limits);
	cr_assert(gt(sz, fp, 0));
	*mem = aligned_alloc(64, (fp + 63) & ~(size_t)63);
	cr_assert(ne(ptr, *mem, NULL));
	struct me *e = NULL;
	cr_assert(eq(int, me_init(&e, *mem, &limits), 0));
	return e;
}

static void
setup(void)
{
	sh = NULL;
	prng_seed(&rng, 0x5eed5ad0);
	now = 1000000000;
	idx = 0;
	next_seq = 0;
	pushed = 0;
	pushed_bytes = 0;
	memset(stream_seq, 0, sizeof(stream_seq));
	recent_n = 0;
	says = says_crit = 0;
	primary = engine_new(&mems[0]);
	copy = engine_new(&mems[1]);
}

static void
teardown(void)
{
	app_shadow_destroy(sh);
	free(mems[0]);
	free(mems[1]);
}

TestSuite(shadow, .init = setup, .fini = teardown, .timeout = 30);

/* The shadow over the copy; both engines are fresh (or equal), as create assumes. */
static void
shadow_new(size_t ring_bytes, bool thread)
{
	struct app_shadow_conf conf = {
		.ops = &me_svc_ops,
		.svc = copy,
		.ring_bytes = ring_bytes,
		.thread = thread,
		.idle_ns = 50000,
		.say = say_rec,
	};
	cr_assert(eq(int, app_shadow_create(&sh, &conf), 0));
}

static uint64_t
counter(enum app_shadow_counter c)
{
	return app_shadow_counter(sh, c);
}

/* Give msg to the primary at the next index, and to the shadow unless primary_only (the
 * copy then misses it: only a seed brings it back). */
static bool
deliver(const struct wire_msg_hdr *msg, bool primary_only)
{
	idx++;
	now += 1 + prng_below(&rng, 2000);
	me_svc_ops.apply(primary, idx, now, msg, &primary_sink);
	if (primary_only)
		return true;
	bool ok = app_shadow_push_apply(sh, idx, now, msg);
	pushed += ok;
	pushed_bytes += ok ? 24 + ((msg->length + 7u) & ~7u) : 0;
	return ok;
}

static bool
tick(uint64_t advance_ns)
{
	idx++;
	now += advance_ns;
	me_svc_ops.tick(primary, idx, now, &primary_sink);
	bool ok = app_shadow_push_tick(sh, idx, now);
	pushed += ok;
	pushed_bytes += ok ? 24 : 0;
	return ok;
}

/* The symbols, configured through the shadow like any message. */
static void
configure(void)
{
	for (uint32_t s = 1; s <= SYMBOLS; s++) {
		struct wire_symbol_config c;
		me_bench_symbol_init(&c, s, MID);
		cr_assert(deliver(&c.hdr, false));
	}
}

static struct wire_submit
submit(uint32_t sym, uint8_t side, uint8_t tif, int64_t px, int64_t qty)
{
	struct wire_submit s;
	memset(&s, 0, sizeof(s));
	wire_hdr_init(&s.hdr, WIRE_SUBMIT, 0);
	uint64_t user = 1 + prng_below(&rng, USERS);
	s.oid = wire_oid_make((uint16_t)(user % STREAMS), user, ++next_seq);
	s.symbol = sym;
	s.side = side;
	s.ord_type = WIRE_ORD_LIMIT;
	s.tif = tif;
	s.px = px;
	s.qty = qty;
	recent[recent_n % RECENT].oid = s.oid;
	recent[recent_n % RECENT].symbol = sym;
	recent_n++;
	return s;
}

/* One message of the mix. gtd_pct: the share of passive limits that are GTD, expiring within
 * gtd_ns of now. */
static bool
op_mix(bool primary_only, uint32_t gtd_pct, uint64_t gtd_ns)
{
	union {
		struct wire_msg_hdr hdr;
		struct wire_submit s;
		struct wire_modify m;
		struct wire_stream_ack a;
	} u;
	uint32_t sym = 1 + (uint32_t)prng_below(&rng, SYMBOLS);
	uint8_t side = prng_chance(&rng, 1, 2) ? WIRE_SIDE_BUY : WIRE_SIDE_SELL;
	int64_t sign = side == WIRE_SIDE_BUY ? 1 : -1;
	int64_t qty = prng_range(&rng, 1, 10);
	uint64_t r = prng_below(&rng, 100);
	if (r < 6) {
		/* Acknowledge one stream as far as it went: its finished orders' records go. */
		uint16_t st = (uint16_t)prng_below(&rng, STREAMS);
		memset(&u.a, 0, sizeof(u.a));
		wire_hdr_init(&u.a.hdr, WIRE_STREAM_ACK, 0);
		u.a.stream = st;
		u.a.seq = stream_seq[st];
	} else if (r < 50) {
		/* Passive: rests 1..20 ticks behind the mid. */
		bool gtd = prng_below(&rng, 100) < gtd_pct;
		u.s = submit(sym, side, gtd ? WIRE_TIF_GTD : WIRE_TIF_GTC,
			     MID - sign * prng_range(&rng, 1, 20), qty);
		if (gtd)
			u.s.expire_ns = now + 1 + prng_below(&rng, gtd_ns);
	} else if (r < 68) {
		/* Aggressive: up to 5 ticks through the mid, the rest rests. */
		u.s = submit(sym, side, WIRE_TIF_GTC, MID + sign * prng_range(&rng, 0, 5), qty);
	} else if (r < 75) {
		u.s = submit(sym, side, WIRE_TIF_IOC, MID + sign * prng_range(&rng, 1, 20), qty);
	} else if (recent_n > 0) {
		/* Cancel a recent order: live, filled or cancelled already (then refused). */
		uint32_t n = recent_n < RECENT ? recent_n : RECENT;
		uint32_t k = (uint32_t)prng_below(&rng, n);
		memset(&u.m, 0, sizeof(u.m));
		wire_hdr_init(&u.m.hdr, WIRE_CANCEL_TO_ME, 0);
		uint64_t user = recent[k].oid.user;
		u.m.req = wire_oid_make((uint16_t)(user % STREAMS), user, ++next_seq);
		u.m.target = recent[k].oid;
		u.m.symbol = recent[k].symbol;
	} else {
		u.s = submit(sym, side, WIRE_TIF_GTC, MID - sign, qty);
	}
	return deliver(&u.hdr, primary_only);
}

/* n messages of the mix, each taken by the shadow; publish_every 0: never publish. */
static void
ops(uint32_t n, uint32_t publish_every)
{
	for (uint32_t i = 0; i < n; i++) {
		cr_assert(op_mix(false, 10, 50000000), "push %" PRIu64 " refused", idx + 1);
		if (publish_every != 0 && (i + 1) % publish_every == 0)
			app_shadow_publish(sh);
	}
}

/* n messages the primary takes and the copy misses (a divergence only a seed mends). */
static void
primary_ops(uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		op_mix(true, 10, 50000000);
}

/* The primary's snapshot, allocated; *len its size. */
static uint8_t *
primary_snapshot(size_t *len)
{
	size_t need = me_svc_ops.snapshot_size(primary);
	uint8_t *b = malloc(need);
	cr_assert(ne(ptr, b, NULL));
	*len = me_svc_ops.snapshot(primary, b, need);
	cr_assert(eq(sz, *len, need));
	return b;
}

/* Post a job at the current index; the primary's snapshot now is what it must give. The
 * buffer has room to spare, so a copy serialised at another point is not refused for size
 * but compared. */
static void
job_post(struct job *j)
{
	j->want = primary_snapshot(&j->want_len);
	j->want_hash = me_svc_ops.state_hash(primary);
	j->index = idx;
	j->cap = j->want_len + 65536;
	j->got = malloc(j->cap);
	cr_assert(ne(ptr, j->got, NULL));
	memset(j->got, 0x5a, j->cap);
	cr_assert(eq(int, app_shadow_snap_post(sh, idx, j->got, j->cap), 0));
	cr_assert(app_shadow_snap_busy(sh));
}

static void
job_free(struct job *j)
{
	free(j->got);
	free(j->want);
	memset(j, 0, sizeof(*j));
}

/* Without a thread: work until the job is answered (bounded); its length. */
static size_t
job_work(void)
{
	size_t len = SIZE_MAX;
	for (uint32_t k = 0; k < 100000; k++) {
		app_shadow_work(sh);
		int rc = app_shadow_snap_poll(sh, &len);
		if (rc == 0)
			return len;
		cr_assert(eq(int, rc, -EINPROGRESS));
	}
	cr_fatal("the job was never answered");
	return 0;
}

/* With a thread: poll until the job is answered, at most WAIT_NS; its length. */
static size_t
job_wait(void)
{
	size_t len = SIZE_MAX;
	uint64_t end = app_mono_ns() + WAIT_NS;
	int rc;
	while ((rc = app_shadow_snap_poll(sh, &len)) == -EINPROGRESS) {
		cr_assert(lt(u64, app_mono_ns(), end), "the job was not answered in 10 s");
		sched_yield();
	}
	cr_assert(eq(int, rc, 0));
	return len;
}

/* The shadow's answer is the primary's state at the post: the same bytes, and restored into
 * a fresh engine, the same hash. */
static void
job_check(const struct job *j, size_t len)
{
	cr_assert(eq(sz, len, j->want_len), "job at %" PRIu64 ": %zu bytes, the primary's %zu",
		  j->index, len, j->want_len);
	cr_assert(eq(int, memcmp(j->got, j->want, len), 0), "job at %" PRIu64 ": bytes differ",
		  j->index);
	void *mem;
	struct me *check = engine_new(&mem);
	cr_assert(eq(int, me_svc_ops.restore(check, j->got, len), 0));
	cr_assert(eq(u64, me_svc_ops.state_hash(check), j->want_hash));
	free(mem);
}

/* Without a thread: work until nothing is left (bounded). */
static void
drain(void)
{
	app_shadow_publish(sh);
	for (uint32_t k = 0; k < 100000 && app_shadow_work(sh) != 0; k++)
		;
	cr_assert(eq(u64, app_shadow_queued(sh), 0));
}

/* Goal: the copy serialises exactly the state after the records pushed before the post, not
 * one more, while the producer goes on pushing; and the answer restores.
 * Method: no thread, a ring that wraps over the rounds. Each round pushes 3000 messages
 * (5000 in the first: more than APP_SHADOW_DRAIN_MAX before the job, so its records take
 * more than one work), posts, pushes 1500 more before any work, then works until answered.
 * The records behind the job stay queued until the round's end drains them. */
Test(shadow, snapshot_equals_primary)
{
	shadow_new(APP_SHADOW_RING_MIN * 4, false);
	configure();
	uint64_t resting_max = 0;
	for (uint32_t round = 0; round < 3; round++) {
		ops(round == 0 ? 5000 : 3000, 0);
		struct job j;
		job_post(&j);
		ops(1500, 0);
		app_shadow_publish(sh);
		cr_assert(eq(int, app_shadow_snap_post(sh, idx, j.got, j.cap), -EBUSY));
		job_check(&j, job_work());
		cr_assert(gt(u64, app_shadow_queued(sh), 0), "the records past the job are queued");
		job_free(&j);
		drain();
		uint64_t r = me_orders_resting(primary);
		resting_max = r > resting_max ? r : resting_max;
	}
	cr_assert(gt(u64, pushed_bytes, APP_SHADOW_RING_MIN * 4), "the ring wrapped");
	cr_assert(eq(u64, counter(APP_SHADOW_RECORDS), pushed));
	cr_assert(eq(u64, counter(APP_SHADOW_SNAPSHOTS), 3));
	cr_assert(eq(u64, counter(APP_SHADOW_FAILED), 0));
	cr_assert(eq(u64, me_svc_ops.state_hash(copy), me_svc_ops.state_hash(primary)));
	/* The load did what it is meant to: books that rest and trade, cancels that land. */
	cr_assert(gt(u64, resting_max, 100));
	cr_assert(gt(u64, me_counter(primary, ME_C_TRADES), 1000));
	cr_assert(gt(u64, me_counter(primary, ME_C_MODIFIES), 1000));
	cr_assert(gt(u64, me_counter(primary, ME_C_MODIFY_REJECTED), 100));
	cr_assert(eq(u64, me_counter(primary, ME_C_BACKPRESSURE), 0));
	cr_assert(eq(u32, says, 0));
}

/* Goal: the same with the thread: snapshots in a row while the producer never stops, each
 * equal to the primary at its post.
 * Method: publish every 16 messages, post whenever no job is out, compare each answer; the
 * producer waits (bounded) when the queue passes half the ring, so a descheduled thread
 * slows the test instead of losing the copy. */
Test(shadow, threaded_snapshot_equals_primary)
{
	const size_t ring = APP_SHADOW_RING_MIN;
	shadow_new(ring, true);
	configure();
	uint32_t done = 0;
	struct job j = { 0 };
	bool out = false;
	uint64_t end = app_mono_ns() + WAIT_NS;
	while (done < 8) {
		cr_assert(lt(u64, app_mono_ns(), end), "%u snapshots in 10 s", done);
		ops(16 + (uint32_t)prng_below(&rng, 600), 16);
		app_shadow_publish(sh);
		while (app_shadow_queued(sh) > ring / 2) {
			cr_assert(lt(u64, app_mono_ns(), end), "the thread does not drain: %" PRIu64
				  " bytes queued, a job out: %d", app_shadow_queued(sh), out);
			sched_yield();
		}
		size_t len = 0;
		if (!out) {
			job_post(&j);
			out = true;
		} else if (app_shadow_snap_poll(sh, &len) == 0) {
			job_check(&j, len);
			job_free(&j);
			out = false;
			done++;
		}
	}
	if (out)
		job_check(&j, job_wait());
	job_free(&j);
	cr_assert(not(app_shadow_lost(sh)));
	cr_assert(eq(u64, counter(APP_SHADOW_LOST), 0));
	cr_assert(eq(u64, counter(APP_SHADOW_FAILED), 0));
	cr_assert(ge(u64, counter(APP_SHADOW_SNAPSHOTS), 8));
	cr_assert(gt(u64, pushed_bytes, ring * 2), "the ring wrapped twice at least");
}

/* Goal: a full ring loses the copy (counted once) until a seed, which makes it equal again.
 * Method: the smallest ring, no work: push until refused; every later push (message or
 * tick) is refused, uncounted, and no job is taken. The primary goes on alone, then the
 * copy is seeded with its bytes: the records queued before the seed must not be applied
 * over them (the work that takes the seed frees the ring: the pushes after it fit). */
Test(shadow, ring_full_is_lost_then_seed)
{
	shadow_new(APP_SHADOW_RING_MIN, false);
	configure();
	uint32_t n = 0;
	while (op_mix(false, 10, 50000000)) {
		n++;
		cr_assert(lt(u32, n, 100000));
	}
	cr_assert(gt(u32, n, 1000));
	cr_assert(app_shadow_lost(sh));
	cr_assert(not(app_shadow_ready(sh)));
	cr_assert(eq(u64, counter(APP_SHADOW_LOST), 1));
	struct job j = { 0 };
	uint8_t dummy[64];
	cr_assert(eq(int, app_shadow_snap_post(sh, idx, dummy, sizeof(dummy)), -EAGAIN));
	cr_assert(not(app_shadow_snap_busy(sh)));
	for (uint32_t i = 0; i < 50; i++)
		cr_assert(not(op_mix(false, 10, 50000000)));
	cr_assert(not(tick(1000)));
	cr_assert(eq(u64, counter(APP_SHADOW_LOST), 1));
	primary_ops(200);
	size_t blen;
	uint8_t *base = primary_snapshot(&blen);
	app_shadow_seed(sh, base, blen);
	cr_assert(not(app_shadow_lost(sh)));
	app_shadow_work(sh); /* takes the seed: frees the ring */
	cr_assert(eq(u64, counter(APP_SHADOW_SEEDS), 1));
	cr_assert(eq(u64, counter(APP_SHADOW_RECORDS), 0),
		  "records queued before the seed were applied after it");
	cr_assert(app_shadow_ready(sh));
	cr_assert(eq(u64, app_shadow_queued(sh), 0));
	ops(1000, 0);
	job_post(&j);
	ops(100, 0);
	job_check(&j, job_work());
	job_free(&j);
	cr_assert(eq(u64, counter(APP_SHADOW_LOST), 1));
	free(base);
}

/* Goal: with the base to come, the records wait; the base comes, they follow it. A base
 * that never comes loses the copy (a seed all the same) until the next seed.
 * Method: no thread; the primary goes on alone (the copy diverges), seed later, push
 * and post; work applies nothing, the job waits; the base; the job equals the primary.
 * Then a seed later whose base is NULL, and a good seed after it. */
Test(shadow, seed_later_holds_records)
{
	shadow_new(APP_SHADOW_RING_MIN * 4, false);
	configure();
	ops(2000, 0);
	drain();
	uint64_t records = counter(APP_SHADOW_RECORDS);
	primary_ops(300);
	size_t blen;
	uint8_t *base = primary_snapshot(&blen); /* what the forked child will write */
	app_shadow_seed_later(sh);
	cr_assert(not(app_shadow_lost(sh)));
	ops(500, 0);
	struct job j;
	job_post(&j);
	ops(200, 0);
	app_shadow_publish(sh);
	for (uint32_t k = 0; k < 10; k++)
		app_shadow_work(sh);
	size_t len;
	cr_assert(eq(int, app_shadow_snap_poll(sh, &len), -EINPROGRESS));
	cr_assert(eq(u64, counter(APP_SHADOW_RECORDS), records), "applied before the base");
	cr_assert(eq(u64, counter(APP_SHADOW_SEEDS), 0));
	cr_assert(not(app_shadow_ready(sh)));
	cr_assert(gt(u64, app_shadow_queued(sh), 0));
	app_shadow_seed_base(sh, base, blen);
	job_check(&j, job_work());
	job_free(&j);
	cr_assert(eq(u64, counter(APP_SHADOW_SEEDS), 1));
	cr_assert(app_shadow_ready(sh));
	drain();
	cr_assert(eq(u64, counter(APP_SHADOW_RECORDS), records + 700));

	/* No base comes. */
	app_shadow_seed_later(sh);
	ops(100, 0);
	app_shadow_seed_base(sh, NULL, 0);
	drain();
	cr_assert(eq(u64, counter(APP_SHADOW_SEEDS), 2));
	cr_assert(app_shadow_lost(sh));
	cr_assert(not(app_shadow_ready(sh)));
	uint8_t dummy[64];
	cr_assert(eq(int, app_shadow_snap_post(sh, idx, dummy, sizeof(dummy)), -EAGAIN));
	cr_assert(eq(u64, counter(APP_SHADOW_BROKEN), 0), "no base is not a refused base");

	/* The next seed mends it. */
	free(base);
	base = primary_snapshot(&blen);
	app_shadow_seed(sh, base, blen);
	ops(300, 0);
	job_post(&j);
	ops(50, 0);
	job_check(&j, job_work());
	job_free(&j);
	cr_assert(eq(u64, counter(APP_SHADOW_SEEDS), 3));
	cr_assert(not(app_shadow_lost(sh)));
	free(base);
}

/* Post a job, let records (or none) follow it, then an install: the primary moves on alone
 * and the copy is seeded with its bytes. The job was asked of the state before the seed,
 * which the copy no longer has: it fails. The next job is good. */
static void
job_then_seed(uint32_t between)
{
	shadow_new(APP_SHADOW_RING_MIN * 4, false);
	configure();
	ops(1500, 0);
	drain();
	struct job j;
	job_post(&j);
	ops(between, 0);
	primary_ops(300);
	size_t blen;
	uint8_t *base = primary_snapshot(&blen);
	app_shadow_seed(sh, base, blen);
	cr_assert(app_shadow_snap_busy(sh));
	cr_assert(eq(sz, job_work(), 0), "a job posted before a seed was answered");
	cr_assert(eq(u64, counter(APP_SHADOW_FAILED), 1));
	cr_assert(eq(u64, counter(APP_SHADOW_SNAPSHOTS), 0));
	job_free(&j);
	ops(400, 0);
	job_post(&j);
	ops(30, 0);
	job_check(&j, job_work());
	job_free(&j);
	cr_assert(eq(u64, counter(APP_SHADOW_FAILED), 1));
	cr_assert(eq(u64, counter(APP_SHADOW_SNAPSHOTS), 1));
	free(base);
}

/* Goal: a seed fails the job posted before it. Method: job_then_seed with 200 records between
 * the post and the seed. */
Test(shadow, job_before_seed_fails) { job_then_seed(200); }

/* Goal: the same when no record comes between the post and the seed (the job's ring position
 * is the seed's: only the order of the two tells them apart). */
Test(shadow, job_right_before_seed_fails) { job_then_seed(0); }

/* Goal: a base the copy refuses loses it (counted, said) until the next seed, which mends it.
 * Method: no thread; seed with 64 bytes of 0xAB; records pushed after it are skipped; a good
 * seed of the primary's bytes, then a job. */
Test(shadow, refused_base_is_broken)
{
	shadow_new(APP_SHADOW_RING_MIN * 4, false);
	configure();
	ops(1000, 0);
	drain();
	uint8_t garbage[64];
	memset(garbage, 0xab, sizeof(garbage));
	app_shadow_seed(sh, garbage, sizeof(garbage));
	cr_assert(not(app_shadow_lost(sh)), "not refused before the thread read it");
	cr_assert(not(app_shadow_ready(sh)));
	ops(100, 0);
	drain();
	cr_assert(app_shadow_lost(sh));
	cr_assert(not(app_shadow_ready(sh)));
	cr_assert(eq(u64, counter(APP_SHADOW_BROKEN), 1));
	cr_assert(eq(u64, counter(APP_SHADOW_SEEDS), 1));
	cr_assert(eq(u32, says_crit, 1));
	uint8_t dummy[64];
	cr_assert(eq(int, app_shadow_snap_post(sh, idx, dummy, sizeof(dummy)), -EAGAIN));
	size_t blen;
	uint8_t *base = primary_snapshot(&blen);
	app_shadow_seed(sh, base, blen);
	ops(500, 0);
	struct job j;
	job_post(&j);
	ops(50, 0);
	job_check(&j, job_work());
	job_free(&j);
	cr_assert(not(app_shadow_lost(sh)));
	cr_assert(app_shadow_ready(sh));
	cr_assert(eq(u64, counter(APP_SHADOW_BROKEN), 1));
	cr_assert(eq(u64, counter(APP_SHADOW_SEEDS), 2));
	free(base);
}

/* Goal: ticks reach the copy at their times: GTD orders expire on the copy by ticks alone.
 * Method: GTD-heavy load with a tick after every few messages, then ticks only, 1 ms apart,
 * until every GTD order is due; the job is posted right after the last tick (no message
 * after it would expire them on the copy's next apply). */
Test(shadow, ticks_are_applied)
{
	shadow_new(APP_SHADOW_RING_MIN * 4, false);
	configure();
	uint64_t ticks = 0;
	for (uint32_t i = 0; i < 2000; i++) {
		cr_assert(op_mix(false, 60, 20000000));
		if (i % 8 == 7) {
			cr_assert(tick(1 + prng_below(&rng, 20000)));
			ticks++;
		}
	}
	uint64_t expired = me_counter(primary, ME_C_EXPIRED);
	uint32_t resting = me_orders_resting(primary);
	for (uint32_t i = 0; i < 25; i++, ticks++)
		cr_assert(tick(1000000));
	cr_assert(gt(u64, me_counter(primary, ME_C_EXPIRED), expired + 50), "ticks expire");
	cr_assert(lt(u32, me_orders_resting(primary), resting));
	struct job j;
	job_post(&j);
	job_check(&j, job_work());
	job_free(&j);
	drain();
	cr_assert(eq(u64, counter(APP_SHADOW_RECORDS), pushed));
	cr_assert(eq(u64, counter(APP_SHADOW_RECORDS), 2000 + SYMBOLS + ticks));
}

/* Goal: destroy returns while the thread has work queued and a job out.
 * Method: a thread, 20000 messages published at once, a job, destroy at once. */
Test(shadow, destroy_while_running, .timeout = 10)
{
	shadow_new(APP_SHADOW_RING_MIN * 16, true);
	configure();
	ops(20000, 0);
	struct job j;
	job_post(&j);
	ops(100, 0);
	app_shadow_publish(sh);
	uint64_t t0 = app_mono_ns();
	app_shadow_destroy(sh);
	sh = NULL;
	cr_assert(lt(u64, app_mono_ns() - t0, 5000000000ull));
	job_free(&j);
}

/* Goal: a job whose index is below a record it must include is refused (said), not
 * serialised as if that record were not in it; the next job is good.
 * Method: no thread; post with the last record's index minus one. */
Test(shadow, index_past_job_is_refused)
{
	shadow_new(APP_SHADOW_RING_MIN * 4, false);
	configure();
	ops(500, 0);
	uint8_t *buf = malloc(1 << 20);
	cr_assert(ne(ptr, buf, NULL));
	cr_assert(eq(int, app_shadow_snap_post(sh, idx - 1, buf, 1 << 20), 0));
	ops(10, 0);
	cr_assert(eq(sz, job_work(), 0));
	cr_assert(eq(u64, counter(APP_SHADOW_FAILED), 1));
	cr_assert(eq(u32, says_crit, 1));
	free(buf);
	struct job j;
	job_post(&j);
	ops(10, 0);
	job_check(&j, job_work());
	job_free(&j);
	cr_assert(eq(u64, counter(APP_SHADOW_SNAPSHOTS), 1));
}

static uint64_t
resting_digest(const void *svc)
{
	return me_orders_resting(svc);
}

/* Goal: with a digest, each answered job carries the digest of the copy it serialised (the
 * primary's at the post: omsd compares them in every build); a dropped copy is lost, as a
 * full ring makes it, until the next seed.
 * Method: no thread, a digest of the resting orders; a job, its digest against the
 * primary's at the post; drop: lost, counted, no job taken; a seed from the primary; a job
 * equal to the primary again. */
Test(shadow, digest_and_drop)
{
	struct app_shadow_conf conf = {
		.ops = &me_svc_ops,
		.svc = copy,
		.ring_bytes = APP_SHADOW_RING_MIN * 4,
		.digest = resting_digest,
		.idle_ns = 50000,
		.say = say_rec,
	};
	cr_assert(eq(int, app_shadow_create(&sh, &conf), 0));
	configure();
	ops(500, 0);
	struct job j;
	job_post(&j);
	uint64_t want = me_orders_resting(primary);
	cr_assert(gt(u64, want, 0), "the load rests orders");
	ops(50, 0);
	job_check(&j, job_work());
	job_free(&j);
	cr_assert(eq(u64, app_shadow_snap_digest(sh), want));
	app_shadow_drop(sh);
	app_shadow_drop(sh);
	cr_assert(app_shadow_lost(sh));
	cr_assert(not(app_shadow_ready(sh)));
	cr_assert(eq(u64, counter(APP_SHADOW_LOST), 1));
	uint8_t dummy[64];
	cr_assert(eq(int, app_shadow_snap_post(sh, idx, dummy, sizeof(dummy)), -EAGAIN));
	size_t blen;
	uint8_t *base = primary_snapshot(&blen);
	app_shadow_seed(sh, base, blen);
	app_shadow_work(sh);
	cr_assert(app_shadow_ready(sh));
	ops(200, 0);
	job_post(&j);
	job_check(&j, job_work());
	job_free(&j);
	cr_assert(eq(u64, app_shadow_snap_digest(sh), me_orders_resting(primary)));
	free(base);
}

/* Goal: a seed made while the thread works (an install while records stream in) never lets
 * the thread apply a record pushed after the seed to the state before it, nor read a base
 * after the seed that superseded it returned (ASan: each base is freed then).
 * Method: a thread, and a producer that seeds with the primary's bytes after every few
 * messages, publishing after each push (the thread is always starting a work), 150 seeds
 * (at most 3 s); then a job, which must equal the primary. Whatever the thread skipped or
 * applied wrongly would show there, and applying past a seed's position fails its CHECK. */
Test(shadow, seeds_while_streaming)
{
	shadow_new(APP_SHADOW_RING_MIN * 4, true);
	configure();
	ops(200, 1);
	uint64_t end = app_mono_ns() + 3000000000ull;
	uint32_t seeds = 0;
	uint8_t *base = NULL;
	while (seeds < 150 && app_mono_ns() < end) {
		primary_ops(1 + (uint32_t)prng_below(&rng, 3));
		uint8_t *old = base;
		size_t blen;
		base = primary_snapshot(&blen);
		app_shadow_seed(sh, base, blen);
		free(old); /* the seed waited until the thread no longer reads it */
		seeds++;
		ops(1 + (uint32_t)prng_below(&rng, 8), 1);
	}
	struct job j;
	job_post(&j);
	job_check(&j, job_wait());
	job_free(&j);
	free(base); /* no longer read: the job came after its seed was taken */
	cr_assert(ge(u32, seeds, 20), "%u seeds in 3 s", seeds);
	cr_assert(le(u64, counter(APP_SHADOW_SEEDS), seeds));
	cr_assert(eq(u64, counter(APP_SHADOW_BROKEN), 0));
	cr_assert(eq(u64, counter(APP_SHADOW_LOST), 0));
}

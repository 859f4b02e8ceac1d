/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file log's writer (app/app_logw.h) over a real pst_log in a fresh temp directory:
 * group commit, the APP_LOGW_BATCH_MAX split, a 64 KiB ring wrapping many times, truncation
 * and compaction in ring order, an inline writer draining itself for control records, one
 * producer and one writer thread, an append the file system refuses (RLIMIT_FSIZE, which
 * binds root too), and an fdatasync that fails (the linker's --wrap=fdatasync sends the
 * persist library's calls to __wrap_fdatasync below). Every test ends by closing the writer
 * and reading the directory back with pst_log_open / pst_log_read, comparing each entry
 * with what was pushed. Snapshot jobs (one APP_LOGW_SNAP_SLICE per drain beside the log
 * work, canceled inline and from a writer thread, failing at mkdir and mid-file) are read
 * back with pst_snap_load.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/app_logw.h"
#include "common/wire.h"
#include "persist/persist.h"
#include "tests/unit/persist/helpers.h"

#define DATA_MAX 8192u       /* the largest entry the tests push */
#define MODEL_MAX 100000u    /* the highest index a test pushes */
#define RING_MIN_BYTES 65536u
#define TIME_OF(index, term) ((index) * 1000 + (term)) /* an entry's time_ns */

static char dir[64];
static uint32_t sync_mode;   /* enum pst_sync of the log under test */
static struct app_logw *w;   /* the writer under test (owns its log) */
static struct pst_log *rlog; /* the log read back */
static struct { uint64_t term; uint32_t len; } model[MODEL_MAX + 1]; /* what index holds */
static uint32_t says;        /* say callbacks */
static bool say_crit;        /* the last one's crit */
static char say_text[256];   /* the last one's text */
static uint64_t rbuf[1 << 17]; /* 1 MiB read buffer, 8-byte aligned */
static uint32_t datasync_fail;   /* fdatasync calls still to fail with EIO */
static uint32_t datasync_failed; /* fdatasync calls failed */

int __real_fdatasync(int fd);
int __wrap_fdatasync(int fd);

/* Every fdatasync of the log under test: the real one unless a test armed a failure. */
int
__wrap_fdatasync(int fd)
{
	if (datasync_fail > 0) {
		datasync_fail--;
		datasync_failed++;
		errno = EIO;
		return -1;
	}
	return __real_fdatasync(fd);
}

static void
say_rec(void *ctx, bool crit, const char *text)
{
	(void)ctx;
	says++;
	say_crit = crit;
	snprintf(say_text, sizeof(say_text), "%s", text);
}

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/omsd-logw.XXXXXX");
	cr_assert(mkdtemp(dir) != NULL);
	sync_mode = PST_SYNC_DATA;
	w = NULL;
	rlog = NULL;
	says = 0;
	datasync_fail = 0;
	datasync_failed = 0;
}

static void
teardown(void)
{
	app_logw_destroy(w);
	pst_log_close(rlog);
	test_rmdir(dir);
}

TestSuite(logw, .init = setup, .fini = teardown, .timeout = 55);

static struct pst_log *
log_open(uint64_t segment_size)
{
	struct pst_log_config cfg = { .dir = dir, .segment_size = segment_size, .sync = sync_mode };
	struct pst_log *l = NULL;
	char err[PST_ERR_SIZE] = "";
	cr_assert(eq(int, pst_log_open(&l, &cfg, err, sizeof(err)), 0), "%s: %s", dir, err);
	return l;
}

static void
writer_new(uint64_t segment_size, size_t ring_bytes, bool inline_writer)
{
	struct pst_log *l = log_open(segment_size);
	cr_assert(eq(int, app_logw_create(&w, l, ring_bytes, inline_writer, say_rec, NULL), 0));
}

static void
fill(uint8_t *p, uint64_t index, uint64_t term, uint32_t len)
{
	for (uint32_t k = 0; k < len; k++)
		p[k] = (uint8_t)(index * 31 + term * 7 + k);
}

/* Push the entry at index; on success the model says the file will hold it (a push at
 * index replaces whatever the model held from index on). */
static bool
push(uint64_t index, uint64_t term, uint32_t len)
{
	uint8_t data[DATA_MAX];
	struct wire_entry_hdr h = { .term = term, .time_ns = TIME_OF(index, term),
				    .data_len = len, .kind = (uint16_t)(index % 4 + 1) };
	fill(data, index, term, len);
	if (!app_logw_push_entry(w, index, &h, data))
		return false;
	model[index].term = term;
	model[index].len = len;
	return true;
}

/* Push [from, to] of term, data lengths varied up to 200 bytes; each must fit. */
static void
push_range(uint64_t from, uint64_t to, uint64_t term)
{
	for (uint64_t i = from; i <= to; i++)
		cr_assert(push(i, term, (uint32_t)(i * 13 % 201)), "push %" PRIu64, i);
}

/* Publish and drain until nothing is queued. */
static void
publish_drain(void)
{
	app_logw_publish(w);
	for (uint32_t k = 0; k < 10000 && app_logw_queued(w) > 0; k++)
		app_logw_drain(w, test_now_ns());
	cr_assert(eq(u64, app_logw_queued(w), 0));
}

static void
assert_synced(uint64_t index, uint64_t term)
{
	uint64_t i = UINT64_MAX, t = UINT64_MAX;
	app_logw_synced(w, &i, &t);
	cr_assert(eq(u64, i, index));
	cr_assert(eq(u64, t, term));
}

static uint64_t
counter(enum app_logw_counter c)
{
	return app_logw_counter(w, c);
}

/* Close the writer, open the directory again and compare the log with the model: it must
 * hold exactly [first, last] (first 0: any first index, returned). */
static uint64_t
check_file(uint64_t first, uint64_t last)
{
	static uint8_t want[DATA_MAX];
	app_logw_destroy(w);
	w = NULL;
	rlog = log_open(0);
	uint64_t f = pst_log_first_index(rlog);
	if (first != 0)
		cr_assert(eq(u64, f, first));
	cr_assert(eq(u64, pst_log_last_index(rlog), last));
	struct pst_entry out[128];
	for (uint64_t i = f; i <= last;) {
		int n = pst_log_read(rlog, i, out, 128, rbuf, sizeof(rbuf));
		cr_assert(gt(int, n, 0), "read at %" PRIu64 ": %d", i, n);
		for (int k = 0; k < n; k++, i++) {
			const struct pst_entry *e = &out[k];
			cr_assert(eq(u64, e->index, i));
			cr_assert(eq(u64, e->term, model[i].term), "term at %" PRIu64, i);
			cr_assert(eq(u64, e->time_ns, TIME_OF(i, model[i].term)));
			cr_assert(eq(u32, e->kind, (uint32_t)(i % 4 + 1)));
			cr_assert(eq(u32, e->data_len, model[i].len), "length at %" PRIu64, i);
			fill(want, i, model[i].term, model[i].len);
			cr_assert(memcmp(e->data, want, e->data_len) == 0, "data at %" PRIu64, i);
		}
	}
	pst_log_close(rlog);
	rlog = NULL;
	return f;
}

/* Goal: what one publish shows is appended in one batch (one fdatasync), and nothing is
 * visible to the writer before the publish.
 * Method: push 100, drain before and after publishing, read the file back. */
static void
one_batch(uint32_t sync)
{
	sync_mode = sync;
	writer_new(0, 0, false);
	assert_synced(0, 0);
	push_range(1, 100, 3);
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 0));
	cr_assert(eq(u64, app_logw_queued(w), 0));
	app_logw_publish(w);
	cr_assert(gt(u64, app_logw_queued(w), 0));
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 100));
	cr_assert(eq(u64, counter(APP_LOGW_BATCHES), 1));
	cr_assert(eq(u64, counter(APP_LOGW_ENTRIES), 100));
	cr_assert(eq(u64, app_logw_queued(w), 0));
	assert_synced(100, 3);
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 0));
	check_file(1, 100);
}

Test(logw, one_batch_durable) { one_batch(PST_SYNC_DATA); }
Test(logw, one_batch_memory) { one_batch(PST_SYNC_NONE); }

/* Goal: a drain appends at most APP_LOGW_BATCH_MAX entries; the rest wait for the next.
 * Method: publish 2 * BATCH_MAX + 10 small entries, drain three times. */
Test(logw, batch_max_splits)
{
	const uint64_t n = 2 * APP_LOGW_BATCH_MAX + 10;
	writer_new(0, 1u << 20, false);
	for (uint64_t i = 1; i <= n; i++)
		cr_assert(push(i, 2, 16));
	app_logw_publish(w);
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), APP_LOGW_BATCH_MAX));
	assert_synced(APP_LOGW_BATCH_MAX, 2);
	cr_assert(gt(u64, app_logw_queued(w), 0));
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), APP_LOGW_BATCH_MAX));
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 10));
	cr_assert(eq(u64, app_logw_queued(w), 0));
	cr_assert(eq(u64, counter(APP_LOGW_BATCHES), 3));
	cr_assert(eq(u64, counter(APP_LOGW_ENTRIES), n));
	assert_synced(n, 2);
	check_file(1, n);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* Goal: records never tear across the ring's end; a refused push leaves nothing behind and
 * lands when pushed again.
 * Method: the minimum ring, 3000 entries of 0..8 KiB in random bursts between drains (the
 * ring fills and wraps many times), the refused entry pushed again after the drain. */
Test(logw, ring_wraps)
{
	const uint64_t n = 3000, seed = rng;
	writer_new(0, 1, false);
	uint64_t next = 1, fulls = 0, bytes = 0;
	uint32_t len = rnd() % 4 == 0 ? 0 : rnd() % (DATA_MAX + 1);
	while (next <= n) {
		uint32_t burst = 1 + rnd() % 40;
		for (uint32_t k = 0; k < burst && next <= n; k++) {
			if (!push(next, 1 + next / 700, len)) {
				fulls++;
				cr_assert(eq(u64, counter(APP_LOGW_FULL), fulls), "seed %" PRIx64, seed);
				break;
			}
			bytes += 40 + (len + 7) / 8 * 8;
			next++;
			len = rnd() % 4 == 0 ? 0 : rnd() % (DATA_MAX + 1);
		}
		app_logw_publish(w);
		app_logw_drain(w, test_now_ns());
	}
	publish_drain();
	cr_assert(gt(u64, fulls, 10), "seed %" PRIx64, seed);
	cr_assert(gt(u64, bytes, 50ull * RING_MIN_BYTES), "the ring wrapped too few times");
	cr_assert(eq(u64, counter(APP_LOGW_ENTRIES), n));
	assert_synced(n, 1 + n / 700);
	check_file(1, n);
}

/* Goal: Raft §5.3 conflicts reach the file in order: a truncation removes the entry at its
 * index and every later one, whether those were written already or still queued.
 * Method: 1..10 of term 1, then truncate(6) and 6..8 of term 2; once after a drain, once
 * all in one ring pass (the batch before the truncation is appended first). */
static void
truncate_case(bool drain_between)
{
	writer_new(0, 0, false);
	push_range(1, 10, 1);
	if (drain_between) {
		publish_drain();
		assert_synced(10, 1);
	}
	app_logw_push_truncate(w, 6);
	push_range(6, 8, 2);
	publish_drain();
	cr_assert(eq(u64, counter(APP_LOGW_TRUNCATES), 1));
	cr_assert(eq(u64, counter(APP_LOGW_ENTRIES), 13));
	assert_synced(8, 2);
	check_file(1, 8);
}

Test(logw, truncate_written) { truncate_case(true); }
Test(logw, truncate_queued) { truncate_case(false); }

/* Goal: a truncation at the first index empties the file log; the synced point says
 * nothing is held until the next append.
 * Method: 1..5 written, truncate(1), check synced (0, 0), then 1..3 of term 2. */
Test(logw, truncate_whole_log)
{
	writer_new(0, 0, false);
	push_range(1, 5, 1);
	publish_drain();
	app_logw_push_truncate(w, 1);
	publish_drain();
	assert_synced(0, 0);
	push_range(1, 3, 2);
	publish_drain();
	assert_synced(3, 2);
	check_file(1, 3);
}

/* Goal: a compaction below the last entry drops whole segments and keeps the synced point.
 * Method: 4 KiB segments, 1..100 written, compact(50); the file starts in (1, 51]. */
Test(logw, compact_below_last)
{
	writer_new(4096, 0, false);
	push_range(1, 100, 1);
	publish_drain();
	app_logw_push_compact(w, 50);
	app_logw_publish(w);
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 1));
	cr_assert(eq(u64, counter(APP_LOGW_COMPACTS), 1));
	cr_assert(eq(u64, counter(APP_LOGW_RESETS), 0));
	assert_synced(100, 1);
	uint64_t first = check_file(0, 100);
	cr_assert(gt(u64, first, 1));
	cr_assert(le(u64, first, 51));
}

/* Goal: a compaction at or past the last entry restarts the file log after it; the synced
 * point is (index, 0) — covered by the snapshot — until the next append.
 * Method: compact(20) with 1..20 written, then 21..25; compact(40), then 41..42. */
Test(logw, compact_at_last_resets)
{
	writer_new(0, 0, false);
	push_range(1, 20, 1);
	publish_drain();
	app_logw_push_compact(w, 20);
	publish_drain();
	cr_assert(eq(u64, counter(APP_LOGW_RESETS), 1));
	assert_synced(20, 0);
	cr_assert(push(21, 2, 7));
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 0)); /* not published */
	assert_synced(20, 0);
	push_range(22, 25, 2);
	publish_drain();
	assert_synced(25, 2);
	app_logw_push_compact(w, 40);
	publish_drain();
	cr_assert(eq(u64, counter(APP_LOGW_RESETS), 2));
	assert_synced(40, 0);
	push_range(41, 42, 3);
	publish_drain();
	assert_synced(42, 3);
	check_file(41, 42);
}

/* Push 1 KiB entries from next on until the ring refuses one; returns the last pushed. */
static uint64_t
fill_ring(uint64_t next, uint64_t term)
{
	while (push(next, term, 1000))
		next++;
	return next - 1;
}

/* Goal: control records fit in the reserve a full ring keeps; when even that is full, an
 * inline writer's control record drains the ring itself rather than spin.
 * Method: fill the ring with unpublished entries, push 50 no-op compactions (the reserve
 * holds them), then 150 more; the same with no-op truncations; then a real truncation. */
Test(logw, inline_writer_makes_room)
{
	writer_new(0, 1, true);
	uint64_t last = fill_ring(1, 1);
	cr_assert(gt(u64, last, 10));
	for (uint32_t k = 0; k < 200; k++) {
		app_logw_push_compact(w, 0); /* below the first index: nothing to do */
		if (k == 50)
			cr_assert(eq(u64, counter(APP_LOGW_ENTRIES), 0), "the reserve is missing");
	}
	cr_assert(gt(u64, counter(APP_LOGW_ENTRIES), 0), "the compactions never drained");
	publish_drain();
	last = fill_ring(last + 1, 1);
	uint64_t before = counter(APP_LOGW_ENTRIES);
	cr_assert(lt(u64, before, last));
	for (uint32_t k = 0; k < 200; k++)
		app_logw_push_truncate(w, last + 1); /* past the end when applied: nothing */
	cr_assert(gt(u64, counter(APP_LOGW_ENTRIES), before), "the truncations never drained");
	app_logw_push_truncate(w, last - 3);
	push_range(last - 3, last - 2, 2);
	publish_drain();
	cr_assert(eq(u64, counter(APP_LOGW_TRUNCATES), 1));
	cr_assert(eq(u64, counter(APP_LOGW_COMPACTS), 0));
	assert_synced(last - 2, 2);
	check_file(1, last - 2);
}

#define CONC_N 100000u
#define CONC_TERM(index) (1 + (index) / 10000)

static uint64_t conc_bad;      /* synced points the producer saw go back or mismatch */
static bool conc_timed_out;    /* the writer gave up waiting (read after the join) */

static void *
conc_producer(void *arg)
{
	(void)arg;
	uint64_t seen = 0;
	for (uint64_t i = 1; i <= CONC_N; i++) {
		while (!push(i, CONC_TERM(i), (uint32_t)(i % 61))) {
			app_logw_publish(w); /* a ring full of unpublished records never drains */
			sched_yield();
		}
		if (i % 64 == 0)
			app_logw_publish(w);
		uint64_t si, st;
		app_logw_synced(w, &si, &st);
		if (si < seen || si > i || (si > 0 && st != CONC_TERM(si)))
			__atomic_add_fetch(&conc_bad, 1, __ATOMIC_RELAXED);
		seen = si;
	}
	app_logw_publish(w);
	return NULL;
}

static void *
conc_writer(void *arg)
{
	(void)arg;
	uint64_t deadline = test_now_ns() + 45ull * 1000000000ull, now;
	while (app_logw_counter(w, APP_LOGW_ENTRIES) < CONC_N && (now = test_now_ns()) < deadline) {
		if (app_logw_drain(w, now) == 0)
			sched_yield();
	}
	conc_timed_out = app_logw_counter(w, APP_LOGW_ENTRIES) < CONC_N;
	return NULL;
}

/* Goal: one producer and one writer thread over the 64 KiB ring lose, repeat and reorder
 * nothing, and the synced point the producer reads only grows and pairs an index with its
 * own term (the sequence count).
 * Method: 100,000 entries of 0..60 bytes, terms changing every 10,000, published every 64. */
Test(logw, concurrent_threads)
{
	writer_new(0, 1, false);
	pthread_t p, c;
	cr_assert(eq(int, pthread_create(&c, NULL, conc_writer, NULL), 0));
	cr_assert(eq(int, pthread_create(&p, NULL, conc_producer, NULL), 0));
	pthread_join(p, NULL);
	pthread_join(c, NULL);
	cr_assert(not(conc_timed_out));
	cr_assert(eq(u64, conc_bad, 0));
	cr_assert(eq(u64, counter(APP_LOGW_ENTRIES), CONC_N));
	cr_assert(ge(u64, counter(APP_LOGW_BATCHES), CONC_N / APP_LOGW_BATCH_MAX));
	cr_assert(eq(u64, app_logw_queued(w), 0));
	assert_synced(CONC_N, CONC_TERM(CONC_N));
	check_file(1, CONC_N);
}

/* Goal: an append the file system refuses is counted, said once per failure streak, retried
 * only after APP_LOGW_RETRY_NS, reports nothing durable meanwhile, and lands once.
 * Method: RLIMIT_FSIZE of 64 KiB (durable mode grows a segment 1 MiB at a time, so the
 * append fails with EFBIG); retry early, on time, flush (-EIO); lift the limit, retry. */
Test(logw, failed_append_retried)
{
	writer_new(0, 0, false);
	push_range(1, 5, 4);
	app_logw_publish(w);
	struct rlimit old, lim;
	cr_assert(eq(int, getrlimit(RLIMIT_FSIZE, &old), 0));
	lim = old;
	lim.rlim_cur = 64 * 1024;
	signal(SIGXFSZ, SIG_IGN);
	cr_assert(eq(int, setrlimit(RLIMIT_FSIZE, &lim), 0));
	const uint64_t t0 = 1000000;
	cr_assert(eq(u32, app_logw_drain(w, t0), 0));
	cr_assert(eq(u64, counter(APP_LOGW_ERRORS), 1));
	cr_assert(eq(u32, says, 1));
	cr_assert(not(say_crit));
	cr_assert(strstr(say_text, "append at 1 failed") != NULL, "%s", say_text);
	assert_synced(0, 0);
	cr_assert(gt(u64, app_logw_queued(w), 0));
	cr_assert(eq(u32, app_logw_drain(w, t0 + APP_LOGW_RETRY_NS - 1), 0));
	cr_assert(eq(u64, counter(APP_LOGW_ERRORS), 1), "retried before its time");
	cr_assert(eq(u32, app_logw_drain(w, t0 + APP_LOGW_RETRY_NS), 0));
	cr_assert(eq(u64, counter(APP_LOGW_ERRORS), 2));
	cr_assert(eq(u32, says, 1), "said again in the same streak: %s", say_text);
	cr_assert(eq(int, app_logw_flush(w, t0 + APP_LOGW_RETRY_NS), -EIO));
	cr_assert(eq(u64, counter(APP_LOGW_ERRORS), 3));
	cr_assert(eq(int, setrlimit(RLIMIT_FSIZE, &old), 0));
	cr_assert(eq(u32, app_logw_drain(w, t0 + 2 * APP_LOGW_RETRY_NS), 5));
	cr_assert(strstr(say_text, "succeed again") != NULL, "%s", say_text);
	cr_assert(eq(u64, counter(APP_LOGW_ENTRIES), 5));
	cr_assert(eq(u64, counter(APP_LOGW_BATCHES), 1));
	assert_synced(5, 4);
	check_file(1, 5);
}

/* Goal: an append whose fdatasync fails leaves the file log where it was (pst_log_append
 * keeps its indices), so the writer keeps the batch, reports nothing new durable, retries
 * after APP_LOGW_RETRY_NS with the batch still following the file's last entry (the CHECK
 * in app_logw_drain), and the batch lands once; a failure after a synced point keeps it,
 * and the retry takes what was pushed meanwhile too.
 * Method: one failure on 1..3 (nothing synced yet), one on 4..6 (3 synced) with 7 pushed
 * before the retry; drains early and on time; read the file back. */
Test(logw, failed_sync_retried)
{
	writer_new(0, 0, false);
	push_range(1, 3, 5);
	app_logw_publish(w);
	datasync_fail = 1;
	const uint64_t t0 = 1000000;
	cr_assert(eq(u32, app_logw_drain(w, t0), 0));
	cr_assert(eq(u32, datasync_failed, 1), "the wrap never reached the persist library");
	cr_assert(eq(u64, counter(APP_LOGW_ERRORS), 1));
	cr_assert(eq(u64, counter(APP_LOGW_ENTRIES), 0));
	cr_assert(eq(u32, says, 1));
	cr_assert(strstr(say_text, "append at 1 failed") != NULL, "%s", say_text);
	assert_synced(0, 0);
	cr_assert(gt(u64, app_logw_queued(w), 0));
	cr_assert(eq(u32, app_logw_drain(w, t0 + APP_LOGW_RETRY_NS - 1), 0));
	cr_assert(eq(u64, counter(APP_LOGW_ERRORS), 1), "retried before its time");
	cr_assert(eq(u32, app_logw_drain(w, t0 + APP_LOGW_RETRY_NS), 3));
	cr_assert(eq(u64, counter(APP_LOGW_ERRORS), 1));
	cr_assert(eq(u64, counter(APP_LOGW_ENTRIES), 3));
	cr_assert(eq(u64, counter(APP_LOGW_BATCHES), 1));
	cr_assert(eq(u64, app_logw_queued(w), 0));
	assert_synced(3, 5);

	push_range(4, 6, 6);
	app_logw_publish(w);
	datasync_fail = 1;
	const uint64_t t1 = t0 + 5 * APP_LOGW_RETRY_NS;
	cr_assert(eq(u32, app_logw_drain(w, t1), 0));
	cr_assert(eq(u32, datasync_failed, 2));
	cr_assert(eq(u64, counter(APP_LOGW_ERRORS), 2));
	assert_synced(3, 5);
	push_range(7, 7, 6);
	app_logw_publish(w);
	cr_assert(eq(u32, app_logw_drain(w, t1 + APP_LOGW_RETRY_NS - 1), 0));
	cr_assert(eq(u32, app_logw_drain(w, t1 + APP_LOGW_RETRY_NS), 4));
	cr_assert(eq(u64, counter(APP_LOGW_ERRORS), 2));
	cr_assert(eq(u64, counter(APP_LOGW_ENTRIES), 7));
	cr_assert(eq(u64, counter(APP_LOGW_BATCHES), 2));
	cr_assert(eq(u32, datasync_fail, 0));
	assert_synced(7, 6);
	check_file(1, 7);
}

/* Goal: an entry that could never fit beside the reserve is a programmer error (CHECK).
 * Method: a 40,000-byte entry into the 64 KiB ring (memory mode leaves the directory empty,
 * so it is removed first: the abort skips the teardown). */
Test(logw, oversized_entry_aborts, .signal = SIGABRT)
{
	static uint8_t big[40000];
	sync_mode = PST_SYNC_NONE;
	writer_new(0, 0, false);
	cr_assert(eq(int, rmdir(dir), 0));
	struct wire_entry_hdr h = { .term = 1, .data_len = sizeof(big), .kind = 1 };
	app_logw_push_entry(w, 1, &h, big);
}

/* --- Snapshot jobs ---------------------------------------------------------------------- */

#define MIB (UINT64_C(1) << 20)

static char snapdir[96]; /* a snapshot directory under the test's temp dir */

static void
snap_setup(void)
{
	snprintf(snapdir, sizeof(snapdir), "%s/snap", dir);
}

static uint8_t *
snap_data(uint64_t len, uint64_t seed)
{
	uint8_t *p = malloc(len + 8);
	cr_assert(p != NULL);
	uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;
	for (uint64_t k = 0; k < len; k += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + k, &x, 8);
	}
	return p;
}

/* Entries in d other than . and .. (final snapshots and temp files alike). */
static int
dir_entries(const char *d)
{
	DIR *dd = opendir(d);
	if (dd == NULL && errno == ENOENT)
		return 0; /* no job ever began there */
	cr_assert(dd != NULL, "%s", d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(dd)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(dd);
	return n;
}


/* Drain until the posted job ends (at most `drains` drains); returns its rc. */
static int
snap_run(uint64_t index, uint32_t drains)
{
	uint64_t i = 0;
	int rc = 1;
	for (uint32_t k = 0; k < drains; k++) {
		app_logw_drain(w, test_now_ns());
		if (app_logw_snap_poll(w, &i, &rc)) {
			cr_assert(eq(u64, i, index));
			cr_assert(not(app_logw_snap_busy(w)));
			return rc;
		}
	}
	cr_assert(0, "the job did not end in %u drains", drains);
	return 1;
}

/* Goal: a snapshot job is written one APP_LOGW_SNAP_SLICE per drain beside the log work,
 * never holding the log back; busy until the result is collected, which poll gives once.
 * Method: 1..10 written; a 9 MiB job posted; each drain also appends five new entries: it
 * applies them (synced moves) plus one slice; the job ends at the third drain
 * (ceil(9 MiB / 4 MiB)); poll gives (index, 0) once; the file loads back; the log too. */
Test(logw, snap_job_in_slices_beside_the_log)
{
	snap_setup();
	writer_new(0, 0, false);
	push_range(1, 10, 1);
	publish_drain();
	const uint64_t len = 9 * MIB;
	uint8_t *data = snap_data(len, 1);
	struct pst_snap_meta meta = {.last_index = 10, .last_term = 1, .last_time_ns = 777,
				     .length = len};
	uint64_t idx = 0, next = 11;
	int rc = 1;
	cr_assert(not(app_logw_snap_busy(w)));
	cr_assert(not(app_logw_snap_poll(w, &idx, &rc)));
	app_logw_snap_post(w, snapdir, &meta, data);
	cr_assert(app_logw_snap_busy(w));
	uint32_t drains = 0;
	for (;;) {
		push_range(next, next + 4, 2);
		next += 5;
		app_logw_publish(w);
		cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 5 + 1));
		drains++;
		assert_synced(next - 1, 2);
		cr_assert(eq(u64, app_logw_queued(w), 0));
		cr_assert(eq(u64, counter(APP_LOGW_SNAP_SLICES), drains));
		if (app_logw_snap_poll(w, &idx, &rc))
			break;
		cr_assert(app_logw_snap_busy(w), "not busy at drain %u", drains);
		cr_assert(lt(u32, drains, 10), "the job never ended");
	}
	cr_assert(eq(u32, drains, (uint32_t)((len + APP_LOGW_SNAP_SLICE - 1) /
					     APP_LOGW_SNAP_SLICE)));
	cr_assert(eq(u64, idx, 10));
	cr_assert(eq(int, rc, 0));
	cr_assert(not(app_logw_snap_busy(w)));
	cr_assert(not(app_logw_snap_poll(w, &idx, &rc)), "the result was given twice");
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 0), "work after the job ended");
	cr_assert(eq(u64, counter(APP_LOGW_SNAP_SLICES), drains));
	cr_assert(gt(u64, counter(APP_LOGW_SNAP_NS), 0));
	cr_assert(eq(int, dir_entries(snapdir), 1));
	test_snap_equals(snapdir, &meta, data);
	free(data);
	check_file(1, next - 1);
}

/* Goal: an inline writer's cancel stops the job at once: the result is -ECANCELED, nothing
 * of it stays in the directory, the previous snapshot stands, and the writer is free for
 * the next job; a cancel with no job does nothing.
 * Method: a snapshot at 5; a 9 MiB job at 20, one drain (one slice), cancel, poll; drain
 * again (no slice); post the job again and run it to its end. */
Test(logw, snap_cancel_inline)
{
	snap_setup();
	writer_new(0, 0, true);
	uint8_t prev[100];
	memset(prev, 0x5a, sizeof(prev));
	struct pst_snap_meta old = {.last_index = 5, .last_term = 1, .length = sizeof(prev)};
	cr_assert(eq(int, pst_snap_write(snapdir, &old, prev, NULL), 0));
	app_logw_snap_cancel(w);
	cr_assert(not(app_logw_snap_busy(w)));
	const uint64_t len = 9 * MIB;
	uint8_t *data = snap_data(len, 2);
	struct pst_snap_meta meta = {.last_index = 20, .last_term = 2, .length = len};
	app_logw_snap_post(w, snapdir, &meta, data);
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 1));
	cr_assert(eq(u64, counter(APP_LOGW_SNAP_SLICES), 1));
	uint64_t idx = 0;
	int rc = 1;
	cr_assert(not(app_logw_snap_poll(w, &idx, &rc)));
	cr_assert(eq(int, dir_entries(snapdir), 2)); /* the old one and the temp file */
	app_logw_snap_cancel(w);
	cr_assert(app_logw_snap_poll(w, &idx, &rc), "an inline cancel did not end the job");
	cr_assert(eq(u64, idx, 20));
	cr_assert(eq(int, rc, -ECANCELED));
	cr_assert(not(app_logw_snap_busy(w)));
	cr_assert(eq(int, dir_entries(snapdir), 1), "the canceled job left a file");
	test_snap_equals(snapdir, &old, prev);
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 0));
	cr_assert(eq(u64, counter(APP_LOGW_SNAP_SLICES), 1));

	app_logw_snap_post(w, snapdir, &meta, data);
	cr_assert(eq(int, snap_run(20, 10), 0));
	cr_assert(eq(int, dir_entries(snapdir), 1));
	test_snap_equals(snapdir, &meta, data);
	free(data);
}

/* Goal: a cancel that comes after the job ended changes nothing: poll reports 0 and the
 * snapshot stands.
 * Method: a 1 MiB job ends at the first drain; cancel; poll gives (index, 0). */
Test(logw, snap_cancel_after_end_reports_success)
{
	snap_setup();
	writer_new(0, 0, true);
	const uint64_t len = MIB;
	uint8_t *data = snap_data(len, 3);
	struct pst_snap_meta meta = {.last_index = 7, .last_term = 1, .length = len};
	app_logw_snap_post(w, snapdir, &meta, data);
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 1));
	cr_assert(app_logw_snap_busy(w));
	app_logw_snap_cancel(w);
	uint64_t idx = 0;
	int rc = 1;
	cr_assert(app_logw_snap_poll(w, &idx, &rc));
	cr_assert(eq(u64, idx, 7));
	cr_assert(eq(int, rc, 0));
	test_snap_equals(snapdir, &meta, data);
	free(data);
}

static bool snap_thread_stop;    /* the drain thread's stop flag */
static pthread_t snap_thread;     /* the drain thread */
static bool snap_thread_running;  /* started and not yet joined */

static void *
snap_writer(void *arg)
{
	(void)arg;
	uint64_t deadline = test_now_ns() + 45ull * 1000000000ull;
	while (!__atomic_load_n(&snap_thread_stop, __ATOMIC_ACQUIRE) && test_now_ns() < deadline)
		if (app_logw_drain(w, test_now_ns()) == 0)
			sched_yield();
	return NULL;
}

static void
snap_thread_join(void)
{
	if (!snap_thread_running)
		return;
	__atomic_store_n(&snap_thread_stop, true, __ATOMIC_RELEASE);
	pthread_join(snap_thread, NULL);
	snap_thread_running = false;
}

/* Runs before the suite's teardown: a failed assertion comes here with the thread still
 * draining w. */
static void
snap_thread_fini(void)
{
	snap_thread_join();
}

/* Goal: with a writer thread, cancel returns only once the writer no longer reads the job's
 * data: poll has the result at once, -ECANCELED (nothing left in the directory) or 0 when
 * the job ended first (the file loads); the writer then takes the next job.
 * Method: a thread drains in a loop; 32 MiB jobs posted and canceled once the writer wrote
 * 0, 1, 3 and all 8 slices (the last must report 0); the data is overwritten right after
 * each cancel; then a 5 MiB job runs to its end. */
Test(logw, snap_cancel_with_writer_thread, .fini = snap_thread_fini)
{
	snap_setup();
	writer_new(0, 0, false);
	const uint64_t len = 32 * MIB;
	uint8_t *data = snap_data(len, 4);
	uint8_t *want = snap_data(len, 4);
	snap_thread_stop = false;
	cr_assert(eq(int, pthread_create(&snap_thread, NULL, snap_writer, NULL), 0));
	snap_thread_running = true;
	/* The last round waits for the job's last slice: it ends before the cancel. */
	const uint64_t after[] = {0, 1, 3, len / APP_LOGW_SNAP_SLICE};
	const uint32_t rounds = sizeof(after) / sizeof(after[0]);
	uint32_t canceled = 0;
	for (uint32_t k = 0; k < rounds; k++) {
		struct pst_snap_meta meta = {.last_index = 100 + k, .last_term = 3,
					     .last_time_ns = k, .length = len};
		uint64_t base = counter(APP_LOGW_SNAP_SLICES), t0 = test_now_ns();
		app_logw_snap_post(w, snapdir, &meta, data);
		while (counter(APP_LOGW_SNAP_SLICES) < base + after[k] &&
		       test_now_ns() - t0 < 20ull * 1000000000ull)
			sched_yield();
		app_logw_snap_cancel(w);
		memset(data, 0xee, len); /* the writer must no longer read it */
		uint64_t idx = 0;
		int rc = 1;
		cr_assert(app_logw_snap_poll(w, &idx, &rc), "cancel returned before the job ended");
		cr_assert(eq(u64, idx, meta.last_index));
		cr_assert(not(app_logw_snap_busy(w)));
		if (rc == -ECANCELED) {
			canceled++;
			/* A snapshot an earlier round completed is all there is. */
			cr_assert(eq(int, dir_entries(snapdir), canceled < k + 1 ? 1 : 0),
				  "the canceled job left a file");
		} else {
			cr_assert(eq(int, rc, 0));
			cr_assert(eq(u64, counter(APP_LOGW_SNAP_SLICES) - base,
				     len / APP_LOGW_SNAP_SLICE));
			cr_assert(eq(int, dir_entries(snapdir), 1));
			test_snap_equals(snapdir, &meta, want);
		}
		memcpy(data, want, len);
	}
	cr_log_info("%u of %u jobs canceled before their end", canceled, rounds);
	cr_assert(lt(u32, canceled, rounds), "a job that ended before its cancel said -ECANCELED");

	const uint64_t len2 = 5 * MIB;
	uint8_t *data2 = snap_data(len2, 5);
	struct pst_snap_meta meta2 = {.last_index = 200, .last_term = 4, .length = len2};
	app_logw_snap_post(w, snapdir, &meta2, data2);
	uint64_t idx = 0, t0 = test_now_ns();
	int rc = 1;
	while (!app_logw_snap_poll(w, &idx, &rc)) {
		cr_assert(lt(u64, test_now_ns() - t0, 30ull * 1000000000ull), "the job never ended");
		sched_yield();
	}
	snap_thread_join();
	cr_assert(eq(u64, idx, 200));
	cr_assert(eq(int, rc, 0));
	cr_assert(eq(int, dir_entries(snapdir), 1));
	test_snap_equals(snapdir, &meta2, data2);
	free(data);
	free(want);
	free(data2);
}

/* A plain file at <dir>/plain (its name in out): a directory under it cannot be made. */
static void
plain_file(char *out, size_t size)
{
	snprintf(out, size, "%s/plain", dir);
	FILE *f = fopen(out, "w");
	cr_assert(f != NULL);
	fclose(f);
}

/* Goal: a snapshot directory that cannot be made fails the job with -errno, reported by
 * poll; the writer is free afterwards and the log goes on.
 * Method: the directory under a regular file (mkdir: -ENOTDIR); one drain; poll. */
Test(logw, snap_dir_unusable_fails_job)
{
	writer_new(0, 0, false);
	char plain[sizeof(dir) + 8];
	plain_file(plain, sizeof(plain));
	snprintf(snapdir, sizeof(snapdir), "%s/snap", plain);
	uint8_t data[64] = {1, 2, 3};
	struct pst_snap_meta meta = {.last_index = 9, .last_term = 1, .length = sizeof(data)};
	app_logw_snap_post(w, snapdir, &meta, data);
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 1));
	cr_assert(app_logw_snap_busy(w), "busy until polled");
	uint64_t idx = 0;
	int rc = 1;
	cr_assert(app_logw_snap_poll(w, &idx, &rc));
	cr_assert(eq(u64, idx, 9));
	cr_assert(lt(int, rc, 0));
	cr_assert(eq(int, rc, -ENOTDIR));
	cr_assert(not(app_logw_snap_busy(w)));
	cr_assert(eq(u64, counter(APP_LOGW_SNAP_SLICES), 0));
	push_range(1, 3, 1);
	publish_drain();
	assert_synced(3, 1);
	check_file(1, 3);
}

/* Goal: a write that fails in the middle of a job ends it with -errno, removes the temp
 * file and keeps the previous snapshot.
 * Method: a snapshot at 5; RLIMIT_FSIZE of 6 MiB (SIGXFSZ ignored; the log's 1 MiB
 * preallocation stays below it); a 9 MiB job: the first slice lands, the second fails. */
Test(logw, snap_write_fails_midway)
{
	snap_setup();
	writer_new(0, 0, false);
	uint8_t prev[100];
	memset(prev, 0x33, sizeof(prev));
	struct pst_snap_meta old = {.last_index = 5, .last_term = 1, .length = sizeof(prev)};
	cr_assert(eq(int, pst_snap_write(snapdir, &old, prev, NULL), 0));
	const uint64_t len = 9 * MIB;
	uint8_t *data = snap_data(len, 6);
	struct rlimit saved, lim;
	cr_assert(eq(int, getrlimit(RLIMIT_FSIZE, &saved), 0));
	lim = saved;
	lim.rlim_cur = 6 * MIB;
	signal(SIGXFSZ, SIG_IGN);
	cr_assert(eq(int, setrlimit(RLIMIT_FSIZE, &lim), 0));
	struct pst_snap_meta meta = {.last_index = 20, .last_term = 2, .length = len};
	app_logw_snap_post(w, snapdir, &meta, data);
	int rc = snap_run(20, 10);
	cr_assert(eq(int, setrlimit(RLIMIT_FSIZE, &saved), 0));
	cr_assert(eq(int, rc, -EFBIG));
	cr_assert(eq(u64, counter(APP_LOGW_SNAP_SLICES), 2));
	cr_assert(eq(int, dir_entries(snapdir), 1), "the failed job left a file");
	test_snap_equals(snapdir, &old, prev);
	free(data);
}

/* Goal: destroying the writer in the middle of a job removes its temp file and keeps the
 * previous snapshot.
 * Method: a snapshot at 5; a 9 MiB job, one drain, destroy. */
Test(logw, snap_destroy_mid_job)
{
	snap_setup();
	writer_new(0, 0, false);
	uint8_t prev[100];
	memset(prev, 0x44, sizeof(prev));
	struct pst_snap_meta old = {.last_index = 5, .last_term = 1, .length = sizeof(prev)};
	cr_assert(eq(int, pst_snap_write(snapdir, &old, prev, NULL), 0));
	const uint64_t len = 9 * MIB;
	uint8_t *data = snap_data(len, 7);
	struct pst_snap_meta meta = {.last_index = 20, .last_term = 2, .length = len};
	app_logw_snap_post(w, snapdir, &meta, data);
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 1));
	cr_assert(eq(int, dir_entries(snapdir), 2));
	app_logw_destroy(w);
	w = NULL;
	cr_assert(eq(int, dir_entries(snapdir), 1), "the temp file outlived the writer");
	test_snap_equals(snapdir, &old, prev);
	free(data);
}

/* Goal: posting a job while one is posted is a programmer error (CHECK).
 * Method: two posts without a poll between (memory mode leaves the directory empty, so it
 * is removed first: the abort skips the teardown). */
Test(logw, snap_post_while_busy_aborts, .signal = SIGABRT)
{
	static uint8_t data[64];
	sync_mode = PST_SYNC_NONE;
	writer_new(0, 0, false);
	cr_assert(eq(int, rmdir(dir), 0));
	struct pst_snap_meta meta = {.last_index = 1, .last_term = 1, .length = sizeof(data)};
	app_logw_snap_post(w, "/nonexistent-omsd-snap", &meta, data);
	app_logw_snap_post(w, "/nonexistent-omsd-snap", &meta, data);
}

/* --- the Raft hard state (app_logw_push_vote) ---------------------------------------- */

static char votedir[sizeof(dir) + 16];

static void
vote_expect(uint64_t term, uint32_t vote)
{
	uint64_t t = 0;
	uint32_t v = 0;
	cr_assert(eq(int, pst_vote_load(votedir, &t, &v), 0), "%s", votedir);
	cr_assert(eq(u64, t, term));
	cr_assert(eq(u32, v, vote));
}

/* Goal: a vote is saved in the ring's order — after the entries pushed before it, before
 * those pushed after it — and its ticket counts as saved only then.
 * Method: 1..3 of term 1, a vote (term 2 for 7), 4..5 of term 2; the first drain appends
 * 1..3 alone (the batch stops at the control record); the second saves the vote and
 * appends 4..5; a second vote (term 3, none) saved by the next drain; files read back. */
Test(logw, vote_saved_in_ring_order)
{
	writer_new(0, 0, false);
	snprintf(votedir, sizeof(votedir), "%s/vote", dir);
	cr_assert(eq(int, mkdir(votedir, 0700), 0));
	app_logw_set_vote_dir(w, votedir);
	push_range(1, 3, 1);
	cr_assert(eq(u64, app_logw_push_vote(w, 2, 7), 1));
	push_range(4, 5, 2);
	cr_assert(eq(u64, app_logw_votes_saved(w), 0));
	app_logw_publish(w);
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 3));
	assert_synced(3, 1);
	cr_assert(eq(u64, app_logw_votes_saved(w), 0), "saved before the entries ahead of it");
	cr_assert(eq(int, pst_vote_load(votedir, &(uint64_t){0}, &(uint32_t){0}), -ENOENT));
	cr_assert(eq(u32, app_logw_drain(w, test_now_ns()), 1 + 2));
	cr_assert(eq(u64, app_logw_votes_saved(w), 1));
	vote_expect(2, 7);
	assert_synced(5, 2);
	cr_assert(eq(u64, app_logw_push_vote(w, 3, 0), 2));
	publish_drain();
	cr_assert(eq(u64, app_logw_votes_saved(w), 2));
	vote_expect(3, 0);
	cr_assert(eq(u64, counter(APP_LOGW_VOTES), 2));
	cr_assert(eq(u64, counter(APP_LOGW_VOTE_FAILED), 0));
	cr_assert(eq(int, app_logw_vote_error(w), 0));
	cr_assert(eq(u32, says, 0));
	check_file(1, 5);
}

/* The writer's vote directory under a plain file (its name in plain): saves fail ENOTDIR
 * until the test puts a directory there. */
static void
vote_dir_unusable(char *plain, size_t size)
{
	plain_file(plain, size);
	snprintf(votedir, sizeof(votedir), "%s/vote", plain);
	app_logw_set_vote_dir(w, votedir);
}

/* Goal: a vote the disk refuses stops the writer there: the entries pushed after it (of its
 * term) are not written, a posted snapshot file is not begun, the ticket stays unsaved and
 * the error is published; it is tried again after APP_LOGW_RETRY_NS and, once saved, the
 * rest follows in order. The writer says nothing itself (the shard does).
 * Method: the vote directory under a plain file (ENOTDIR); 1..2, a vote, 3..4, a snapshot
 * job; drains early and on time; the file replaced by a directory; read everything back. */
Test(logw, vote_failure_holds_what_follows)
{
	snap_setup();
	writer_new(0, 0, false);
	char plain[sizeof(dir) + 8];
	vote_dir_unusable(plain, sizeof(plain));
	push_range(1, 2, 1);
	cr_assert(eq(u64, app_logw_push_vote(w, 2, 3), 1));
	push_range(3, 4, 2);
	app_logw_publish(w);
	uint8_t data[64] = {9, 8, 7};
	struct pst_snap_meta meta = {.last_index = 2, .last_term = 1, .length = sizeof(data)};
	const uint64_t t0 = 1000000;
	app_logw_snap_post(w, snapdir, &meta, data);
	cr_assert(eq(u32, app_logw_drain(w, t0), 2 + 1), "1..2 and the job's one slice");
	uint64_t idx = 0;
	int rc = 1;
	cr_assert(app_logw_snap_poll(w, &idx, &rc));
	cr_assert(eq(int, rc, 0));
	/* The next job is posted behind the vote: not begun while the vote fails. */
	meta.last_index = 4;
	meta.last_term = 2;
	app_logw_snap_post(w, snapdir, &meta, data);
	cr_assert(eq(u32, app_logw_drain(w, t0), 0));
	cr_assert(eq(u64, counter(APP_LOGW_VOTE_FAILED), 1));
	cr_assert(eq(int, app_logw_vote_error(w), -ENOTDIR));
	cr_assert(eq(u64, app_logw_votes_saved(w), 0));
	assert_synced(2, 1);
	cr_assert(eq(u64, counter(APP_LOGW_SNAP_SLICES), 1), "a snapshot of the unsaved term");
	cr_assert(eq(u32, app_logw_drain(w, t0 + APP_LOGW_RETRY_NS - 1), 0));
	cr_assert(eq(u64, counter(APP_LOGW_VOTE_FAILED), 1), "retried before its time");
	cr_assert(eq(u32, app_logw_drain(w, t0 + APP_LOGW_RETRY_NS), 0));
	cr_assert(eq(u64, counter(APP_LOGW_VOTE_FAILED), 2));
	cr_assert(not(app_logw_snap_poll(w, &idx, &rc)));
	cr_assert(eq(int, unlink(plain), 0));
	cr_assert(eq(int, mkdir(plain, 0700), 0));
	cr_assert(eq(int, mkdir(votedir, 0700), 0));
	cr_assert(eq(u32, app_logw_drain(w, t0 + 2 * APP_LOGW_RETRY_NS), 1 + 2 + 1));
	cr_assert(eq(u64, app_logw_votes_saved(w), 1));
	cr_assert(eq(int, app_logw_vote_error(w), 0));
	vote_expect(2, 3);
	assert_synced(4, 2);
	cr_assert(app_logw_snap_poll(w, &idx, &rc));
	cr_assert(eq(u64, idx, 4));
	cr_assert(eq(int, rc, 0));
	test_snap_equals(snapdir, &meta, data);
	cr_assert(eq(u32, says, 0), "the writer said: %s", say_text);
	check_file(1, 4);
}

/* Goal: a vote that cannot be saved holds a snapshot job, not its cancel: a producer that
 * cancels (a snapshot installed from the leader) while the writer thread retries the vote
 * gets the job back (-ECANCELED) instead of waiting for a disk that may never have room.
 * Method: the vote directory under a plain file; a vote pushed, a job posted; a thread
 * drains in a loop (the vote fails every APP_LOGW_RETRY_NS); the cancel must return, the
 * job end canceled with no slice written, and the vote still unsaved. */
Test(logw, vote_failing_lets_a_cancel_through, .fini = snap_thread_fini)
{
	snap_setup();
	writer_new(0, 0, false);
	char plain[sizeof(dir) + 8];
	vote_dir_unusable(plain, sizeof(plain));
	cr_assert(eq(u64, app_logw_push_vote(w, 5, 1), 1));
	app_logw_publish(w);
	uint8_t data[64] = {4, 5, 6};
	struct pst_snap_meta meta = {.last_index = 7, .last_term = 5, .length = sizeof(data)};
	app_logw_snap_post(w, snapdir, &meta, data);
	snap_thread_stop = false;
	cr_assert(eq(int, pthread_create(&snap_thread, NULL, snap_writer, NULL), 0));
	snap_thread_running = true;
	uint64_t t0 = test_now_ns();
	while (counter(APP_LOGW_VOTE_FAILED) == 0) {
		cr_assert(lt(u64, test_now_ns() - t0, 10ull * 1000000000ull), "the vote never tried");
		sched_yield();
	}
	app_logw_snap_cancel(w); /* returns only once the writer let the job go */
	uint64_t idx = 0;
	int rc = 1;
	cr_assert(app_logw_snap_poll(w, &idx, &rc));
	cr_assert(eq(u64, idx, 7));
	cr_assert(eq(int, rc, -ECANCELED));
	cr_assert(eq(u64, counter(APP_LOGW_SNAP_SLICES), 0));
	snap_thread_join();
	cr_assert(eq(u64, app_logw_votes_saved(w), 0));
	cr_assert(eq(int, dir_entries(snapdir), 0));
}

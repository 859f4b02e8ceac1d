/* SPDX-License-Identifier: Apache-2.0 */
/*
 * logw_bench — the file logs' group commit with several shards on one node: one writer
 * draining every shard's log in turn (the [persister] lcore until session 42) against one
 * writer thread per shard (app_flog.c now), over real pst_logs with fdatasync.
 *
 *   logw_bench [--shards N] [--writers one|per_shard] [--seconds S] [--period-us P]
 *              [--entries E] [--bytes B] [--dir DIR]
 *
 * Each shard is a producer thread that, every P µs (a shard lcore's cycle under load),
 * pushes E entries of B bytes to its app_logw and publishes them, and notes when each
 * batch is reported synced (app_logw_synced): the latency of a batch is publish → synced,
 * what a leader waits before its own vote counts towards a commit. Writers poll their logs
 * and sleep 20 µs when there was nothing (both modes alike). At the end every log must
 * hold every entry pushed (synced index = last pushed, read back through pst_log_open).
 * Last line: bench: logw shards=N writers=MODE batches=N entries_per_s=N sync_p50_us=N
 *   sync_p99_us=N sync_max_us=N fdatasyncs=N
 * Exit 1 when a log is short of what was pushed. Never on a time. (No instructions-per-op
 * figure: the cost here is the disk's, not the CPU's.)
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/app_logw.h"
#include "app/app_say.h"
#include "common/hist.h"
#include "common/wire.h"
#include "persist/persist.h"

#define SHARDS_MAX 16
#define BATCHES_MAX (1u << 20)

#define now_ns app_mono_ns

static void
nap_us(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

struct shard {
	struct app_logw *w;
	char dir[320];
	pthread_t tid;
	uint64_t pushed;             /* last index pushed */
	uint64_t batches;
	uint64_t *batch_last;        /* per batch: its last index */
	uint64_t *batch_t0;          /* per batch: publish time */
	struct hist lat;             /* publish → synced, ns */
};

static struct {
	uint32_t shards, entries, bytes, period_us;
	double seconds;
	bool per_shard;
	const char *dir;
} opt = { .shards = 2, .entries = 16, .bytes = 128, .period_us = 200, .seconds = 5,
	  .per_shard = true };

static struct shard sh[SHARDS_MAX];
static volatile int producing = 1; /* producers run */
static volatile int writing = 1;   /* writers run */

/* Batches reported synced since the last look: their latency. */
static void
collect(struct shard *s, uint64_t *next)
{
	uint64_t idx, term;
	app_logw_synced(s->w, &idx, &term);
	uint64_t t = now_ns();
	while (*next < s->batches && s->batch_last[*next] <= idx) {
		hist_record(&s->lat, t - s->batch_t0[*next]);
		(*next)++;
	}
}

static void *
producer(void *arg)
{
	struct shard *s = arg;
	uint8_t *data = calloc(1, opt.bytes);
	uint64_t next = 0, due = now_ns();
	if (data == NULL)
		abort();
	while (producing && s->batches < BATCHES_MAX) {
		uint64_t t = now_ns();
		collect(s, &next);
		if (t < due) {
			nap_us(10);
			continue;
		}
		due += (uint64_t)opt.period_us * 1000;
		uint32_t k = 0;
		for (; k < opt.entries; k++) {
			struct wire_entry_hdr h = { .term = 1, .time_ns = t, .data_len = opt.bytes,
						    .kind = 1 };
			memcpy(data, &s->pushed, sizeof(s->pushed));
			if (!app_logw_push_entry(s->w, s->pushed + 1, &h, data))
				break; /* the ring is full: the writer is behind */
			s->pushed++;
		}
		if (k == 0)
			continue;
		app_logw_publish(s->w);
		s->batch_last[s->batches] = s->pushed;
		s->batch_t0[s->batches] = now_ns();
		s->batches++;
	}
	/* Until the writer has synced everything. */
	for (;;) {
		collect(s, &next);
		if (next == s->batches)
			break;
		nap_us(50);
	}
	free(data);
	return NULL;
}

static void *
writer_one(void *arg)
{
	(void)arg;
	while (writing) {
		uint32_t n = 0;
		for (uint32_t i = 0; i < opt.shards; i++)
			n += app_logw_drain(sh[i].w, now_ns());
		if (n == 0)
			nap_us(20);
	}
	return NULL;
}

static void *
writer_shard(void *arg)
{
	struct shard *s = arg;
	while (writing)
		if (app_logw_drain(s->w, now_ns()) == 0)
			nap_us(20);
	return NULL;
}

static int
rm_tree(const char *d)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	return system(cmd);
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "shards", required_argument, NULL, 's' },
		{ "writers", required_argument, NULL, 'w' },
		{ "seconds", required_argument, NULL, 't' },
		{ "period-us", required_argument, NULL, 'p' },
		{ "entries", required_argument, NULL, 'e' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "dir", required_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': opt.shards = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'w':
			if (strcmp(optarg, "one") == 0)
				opt.per_shard = false;
			else if (strcmp(optarg, "per_shard") == 0)
				opt.per_shard = true;
			else {
				fprintf(stderr, "logw_bench: --writers one|per_shard\n");
				return 2;
			}
			break;
		case 't': opt.seconds = strtod(optarg, NULL); break;
		case 'p': opt.period_us = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'e': opt.entries = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'b': opt.bytes = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'd': opt.dir = optarg; break;
		default:
			fprintf(stderr, "usage: logw_bench [--shards N] [--writers one|per_shard] "
				"[--seconds S] [--period-us P] [--entries E] [--bytes B] [--dir DIR]\n");
			return 2;
		}
	}
	if (opt.shards == 0 || opt.shards > SHARDS_MAX || opt.entries == 0 || opt.bytes < 8 ||
	    opt.bytes > 8192 || opt.period_us == 0 || opt.seconds <= 0) {
		fprintf(stderr, "logw_bench: bad arguments\n");
		return 2;
	}
	char base[256];
	snprintf(base, sizeof(base), "%s/omsd-logw-bench.XXXXXX", opt.dir ? opt.dir : "/tmp");
	if (mkdtemp(base) == NULL) {
		perror("logw_bench: mkdtemp");
		return 1;
	}
	int rc = 0;
	for (uint32_t i = 0; i < opt.shards; i++) {
		struct shard *s = &sh[i];
		snprintf(s->dir, sizeof(s->dir), "%s/shard%u", base, i + 1);
		mkdir(s->dir, 0700);
		struct pst_log_config lc = { .dir = s->dir, .sync = PST_SYNC_DATA };
		struct pst_log *l = NULL;
		char err[PST_ERR_SIZE] = "";
		if (pst_log_open(&l, &lc, err, sizeof(err)) != 0 ||
		    app_logw_create(&s->w, l, 8u << 20, false, NULL, NULL) != 0) {
			fprintf(stderr, "logw_bench: %s: %s\n", s->dir, err);
			return 1;
		}
		s->batch_last = calloc(BATCHES_MAX, sizeof(uint64_t));
		s->batch_t0 = calloc(BATCHES_MAX, sizeof(uint64_t));
		if (s->batch_last == NULL || s->batch_t0 == NULL)
			return 1;
		hist_init(&s->lat);
	}
	pthread_t wt[SHARDS_MAX];
	uint32_t nw = opt.per_shard ? opt.shards : 1;
	for (uint32_t i = 0; i < nw; i++)
		pthread_create(&wt[i], NULL, opt.per_shard ? writer_shard : writer_one,
			       opt.per_shard ? (void *)&sh[i] : NULL);
	uint64_t t0 = now_ns();
	for (uint32_t i = 0; i < opt.shards; i++)
		pthread_create(&sh[i].tid, NULL, producer, &sh[i]);
	nap_us((unsigned)(opt.seconds * 1e6));
	producing = 0;
	for (uint32_t i = 0; i < opt.shards; i++)
		pthread_join(sh[i].tid, NULL);
	double secs = (double)(now_ns() - t0) / 1e9;
	writing = 0;
	for (uint32_t i = 0; i < nw; i++)
		pthread_join(wt[i], NULL);

	struct hist all;
	hist_init(&all);
	uint64_t batches = 0, entries = 0, syncs = 0;
	for (uint32_t i = 0; i < opt.shards; i++) {
		struct shard *s = &sh[i];
		hist_merge(&all, &s->lat);
		batches += s->batches;
		entries += s->pushed;
		syncs += app_logw_counter(s->w, APP_LOGW_BATCHES);
		uint64_t idx, term;
		app_logw_synced(s->w, &idx, &term);
		app_logw_destroy(s->w);
		struct pst_log_config lc = { .dir = s->dir, .sync = PST_SYNC_DATA };
		struct pst_log *l = NULL;
		char err[PST_ERR_SIZE] = "";
		uint64_t last = 0;
		if (pst_log_open(&l, &lc, err, sizeof(err)) == 0) {
			last = pst_log_last_index(l);
			pst_log_close(l);
		}
		if (idx != s->pushed || last != s->pushed) {
			fprintf(stderr, "logw_bench: shard %u: pushed %" PRIu64 ", synced %" PRIu64
				", the file holds %" PRIu64 " (%s)\n", i + 1, s->pushed, idx, last, err);
			rc = 1;
		}
		printf("logw: shard %u batches=%" PRIu64 " entries=%" PRIu64 " sync_p50_us=%.1f "
		       "sync_p99_us=%.1f\n", i + 1, s->batches, s->pushed,
		       hist_percentile(&s->lat, 50) / 1e3, hist_percentile(&s->lat, 99) / 1e3);
		free(s->batch_last);
		free(s->batch_t0);
	}
	rm_tree(base);
	printf("bench: logw shards=%u writers=%s batches=%" PRIu64 " entries_per_s=%.0f "
	       "sync_p50_us=%.1f sync_p99_us=%.1f sync_max_us=%.1f fdatasyncs=%" PRIu64 "\n",
	       opt.shards, opt.per_shard ? "per_shard" : "one", batches, (double)entries / secs,
	       hist_percentile(&all, 50) / 1e3, hist_percentile(&all, 99) / 1e3,
	       hist_percentile(&all, 100) / 1e3, syncs);
	return rc;
}

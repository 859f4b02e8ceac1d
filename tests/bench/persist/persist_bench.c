/* SPDX-License-Identifier: Apache-2.0 */
/*
 * persist_bench — the persister's throughput on this machine.
 *
 *   persist_bench [--conninfo STR] [--users N] [--serial N] [--log-mb N] [--dir DIR]
 *                 [--batch N] [--inflight N]      (requests per Sync, Syncs in flight)
 *                 [--read-inflight N]             (the read lane's Syncs; 0: one connection)
 *                 [--churn-secs N [--churn-rate N]] (sustained churn with the defaults)
 *
 * Without --conninfo it starts a throwaway PostgreSQL with deploy/pg/pgctl (unix socket,
 * removed at exit). Measures, in one run:
 *   hydrations/s and flushes/s pipelined (pst_db_config_default's batches and Syncs in
 *   flight unless --batch / --inflight say otherwise; one transaction per batch, consecutive
 *   requests in multi-row statements)
 *   hydrations/s and flushes/s one at a time (submit, wait for the answer, next)
 *   log appends/s and MB/s in memory mode (no fdatasync) and durable mode (fdatasync per
 *   batch of 64 entries of 1 KiB)
 * Last line: bench: persist flush_per_s=N hydrate_per_s=N flush_serial_per_s=N
 *   hydrate_serial_per_s=N flush_speedup=X hydrate_speedup=X log_mb_per_s=N
 * (the speedups are pipelined over one at a time; log_mb_per_s is the durable mode: what a
 * shard commits with fdatasync on).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/hist.h"
#include "persist/persist.h"

#ifndef PST_BENCH_PGCTL
#define PST_BENCH_PGCTL "deploy/pg/pgctl"
#endif

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct counts {
	uint64_t answers; /* completions seen */
	uint64_t bad;     /* completions that were not OK/NEW */
	/* churn mode: submit time by user and kind (index user - churn_base), latencies */
	uint64_t churn_base;
	uint32_t churn_users;
	uint64_t *sent_ns;   /* 3 * churn_users: hydrate, flush, release */
	struct hist *lat;    /* submit to answer, ns: all kinds, then hydrate, flush, release */
};

static int
emit(void *arg, const struct wire_msg_hdr *m)
{
	struct counts *c = arg;
	c->answers++;
	if (c->sent_ns != NULL) {
		/* FLUSH_COMPLETE and RELEASE_DONE carry the user right after the header. */
		static_assert(offsetof(struct wire_flush_complete, user) ==
				      offsetof(struct wire_release_claim, user),
			      "user offsets");
		uint64_t user = m->type == WIRE_HYDRATE_USER
					? ((const struct wire_hydrate_user *)(const void *)m)->state.user
					: ((const struct wire_release_claim *)(const void *)m)->user;
		uint32_t kind = m->type == WIRE_HYDRATE_USER     ? 0
				: m->type == WIRE_FLUSH_COMPLETE ? 1
								 : 2;
		uint64_t i = user - c->churn_base;
		if (i < c->churn_users && c->sent_ns[kind * c->churn_users + i] != 0) {
			uint64_t ns = now_ns() - c->sent_ns[kind * c->churn_users + i];
			hist_record(&c->lat[0], ns);
			hist_record(&c->lat[1 + kind], ns);
		}
	}
	if (m->type == WIRE_HYDRATE_USER) {
		const struct wire_hydrate_user *h = (const void *)m;
		if (h->status != WIRE_HYD_OK && h->status != WIRE_HYD_NEW)
			c->bad++;
	} else if (m->type == WIRE_RELEASE_DONE) {
		const struct wire_release_claim *r = (const void *)m;
		if (r->status != WIRE_FLUSH_OK)
			c->bad++;
	} else {
		const struct wire_flush_complete *f = (const void *)m;
		if (f->status != WIRE_FLUSH_OK)
			c->bad++;
	}
	return 0;
}

union req_msg {
	struct wire_hydrate_request h;
	struct wire_begin_dehydrate b;
	struct wire_release_claim r;
};

static void
req_hydrate(union req_msg *m, uint64_t user)
{
	memset(m, 0, sizeof(*m));
	m->h.user = user;
	m->h.epoch = 1;
	wire_hdr_init(&m->h.hdr, WIRE_HYDRATE_REQUEST, 1);
}

static void
req_flush(union req_msg *m, uint64_t user)
{
	memset(m, 0, sizeof(*m));
	m->b.epoch = 1;
	m->b.state.user = user;
	m->b.state.version = 0;
	m->b.state.user_seq = user & 0xffff;
	m->b.state.tier = 1;
	m->b.state.balance_count = 3;
	for (uint32_t k = 0; k < 3; k++) {
		m->b.state.balances[k].asset = k + 1;
		m->b.state.balances[k].total = (int64_t)(user * (k + 1));
	}
	wire_hdr_init(&m->b.hdr, WIRE_BEGIN_DEHYDRATE, 1);
}

/* Run n requests for users [base, base + n); window = how many may be outstanding (1:
 * one at a time). Returns requests per second. */
static double
run(struct pst_db *db, struct counts *c, bool flush, uint64_t base, uint32_t n,
    uint32_t window)
{
	uint64_t start = now_ns(), want = c->answers + n, first = c->answers;
	uint32_t next = 0;
	while (c->answers < want) {
		uint64_t now = now_ns();
		while (next < n && (next - (c->answers - first)) < window) {
			union req_msg m;
			if (flush)
				req_flush(&m, base + next);
			else
				req_hydrate(&m, base + next);
			int rc = pst_db_submit(db, &m.h.hdr, now);
			if (rc == -ENOBUFS)
				break;
			if (rc < 0) {
				fprintf(stderr, "submit: %s\n", strerror(-rc));
				exit(1);
			}
			next++;
		}
		/* Idle back-off as the persister lcore does: spinning on recv() would take the
		 * core the database backend needs (2 cores here). */
		if (pst_db_poll(db, now) == 0)
			usleep(20);
		if (now - start > UINT64_C(300000000000)) {
			fprintf(stderr, "bench: stuck (%s)\n", pst_db_last_error(db));
			exit(1);
		}
	}
	return n / ((double)(now_ns() - start) / 1e9);
}

static void
submit(struct pst_db *db, union req_msg *m, uint64_t now)
{
	int rc = pst_db_submit(db, &m->h.hdr, now);
	if (rc < 0) {
		fprintf(stderr, "churn: submit: %s (pool full: the defaults do not keep up)\n",
			strerror(-rc));
		exit(1);
	}
}

/* Sustained churn from one OMS shard: every millisecond rate/1000 hydrations of new users,
 * as many evictions (the flush of a user hydrated 200 ms earlier, its release 100 ms after
 * the flush), for secs seconds, with the config's defaults. Prints the rate the answers kept,
 * the latency from submit to answer and the most requests the persister held. */
static void
churn(struct pst_db *db, struct counts *c, uint64_t base, uint32_t rate, uint32_t secs,
      uint32_t requests_max)
{
	uint32_t per_ms = rate / 1000, lag_ms = 200, rel_ms = 100;
	uint32_t total = per_ms * (secs * 1000 + lag_ms + rel_ms);
	c->churn_base = base;
	c->churn_users = total;
	c->sent_ns = calloc(3 * (size_t)total, sizeof(uint64_t));
	static struct hist lat[4];
	for (int j = 0; j < 4; j++)
		hist_init(&lat[j]);
	c->lat = lat;
	if (c->sent_ns == NULL)
		exit(1);
	uint64_t want = c->answers + 3 * (uint64_t)per_ms * secs * 1000;
	uint64_t start = now_ns(), pending_max = 0;
	uint32_t tick = 0, ticks = secs * 1000 + lag_ms + rel_ms;
	while (c->answers < want) {
		uint64_t now = now_ns();
		while (tick < ticks && now - start >= (uint64_t)tick * 1000000) {
			for (uint32_t k = 0; k < per_ms; k++) {
				union req_msg m;
				uint32_t h = tick * per_ms + k;
				if (tick < secs * 1000) {
					req_hydrate(&m, base + h);
					c->sent_ns[h] = now;
					submit(db, &m, now);
				}
				if (tick >= lag_ms && tick - lag_ms < secs * 1000) {
					uint32_t f = (tick - lag_ms) * per_ms + k;
					req_flush(&m, base + f);
					c->sent_ns[total + f] = now;
					submit(db, &m, now);
				}
				if (tick >= lag_ms + rel_ms && tick - lag_ms - rel_ms < secs * 1000) {
					uint32_t r = (tick - lag_ms - rel_ms) * per_ms + k;
					memset(&m, 0, sizeof(m));
					m.r.user = base + r;
					m.r.epoch = 1;
					wire_hdr_init(&m.r.hdr, WIRE_RELEASE_CLAIM, 1);
					c->sent_ns[2 * (size_t)total + r] = now;
					submit(db, &m, now);
				}
			}
			tick++;
		}
		if (pst_db_pending(db) > pending_max)
			pending_max = pst_db_pending(db);
		if (pst_db_poll(db, now) == 0)
			usleep(20);
		if (now - start > (uint64_t)(secs + 60) * 1000000000u) {
			fprintf(stderr, "churn: stuck (%s)\n", pst_db_last_error(db));
			exit(1);
		}
	}
	double elapsed = (double)(now_ns() - start) / 1e9;
	const uint64_t *k = pst_db_counters(db);
	printf("churn: %u hydrations/s + %u evictions/s (flush + release) for %u s: %.0f answers/s"
	       " over %.1f s; submit to answer p50 %.1f ms p99 %.1f ms max %.1f ms; most held %"
	       PRIu64 " (requests_max %u); batches %" PRIu64 " (read lane %" PRIu64
	       "), statements %" PRIu64 "\n",
	       rate, rate, secs, (double)(3 * (uint64_t)per_ms * secs * 1000) / elapsed, elapsed,
	       (double)hist_percentile(&lat[0], 50) / 1e6, (double)hist_percentile(&lat[0], 99) / 1e6,
	       (double)hist_percentile(&lat[0], 100) / 1e6, pending_max, requests_max,
	       k[PST_C_DB_BATCHES], k[PST_C_DB_READ_BATCHES], k[PST_C_DB_STATEMENTS]);
	static const char *const kinds[3] = {"hydrate", "flush", "release"};
	for (int j = 0; j < 3; j++)
		printf("churn: %-7s submit to answer p50 %.1f ms p99 %.1f ms max %.1f ms\n", kinds[j],
		       (double)hist_percentile(&lat[1 + j], 50) / 1e6,
		       (double)hist_percentile(&lat[1 + j], 99) / 1e6,
		       (double)hist_percentile(&lat[1 + j], 100) / 1e6);
	free(c->sent_ns);
	c->sent_ns = NULL;
}

struct log_result {
	double entries_per_s;
	double mb_per_s;
	uint64_t p50_ns; /* per batch append (+ fdatasync) */
	uint64_t p99_ns;
};

static struct log_result
log_bench(const char *dir, uint32_t sync, uint64_t bytes_total)
{
	enum { BATCH = 64, LEN = 1024 }; /* 64 KiB per write: a full consensus batch */
	char sub[512];
	snprintf(sub, sizeof(sub), "%s/log-%s", dir, sync == PST_SYNC_DATA ? "durable" : "memory");
	struct pst_log_config cfg = {.dir = sub, .sync = sync};
	struct pst_log *log;
	char err[PST_ERR_SIZE];
	int rc = pst_log_open(&log, &cfg, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "log open: %s\n", err);
		exit(1);
	}
	static uint8_t data[BATCH][LEN];
	struct pst_entry e[BATCH];
	static struct hist h;
	hist_init(&h);
	uint64_t idx = 1, bytes = 0, start = now_ns();
	while (bytes < bytes_total) {
		for (uint32_t k = 0; k < BATCH; k++) {
			memset(data[k], (int)(idx + k), LEN);
			e[k] = (struct pst_entry){.index = idx + k, .term = 1, .time_ns = idx + k,
						  .kind = 1, .data_len = LEN, .data = data[k]};
		}
		uint64_t t0 = now_ns();
		rc = pst_log_append(log, e, BATCH);
		hist_record(&h, now_ns() - t0);
		if (rc < 0) {
			fprintf(stderr, "append: %s\n", strerror(-rc));
			exit(1);
		}
		idx += BATCH;
		bytes += (uint64_t)BATCH * LEN;
	}
	double secs = (double)(now_ns() - start) / 1e9;
	struct log_result r = {
		.entries_per_s = (double)(idx - 1) / secs,
		.mb_per_s = (double)bytes / secs / 1e6,
		.p50_ns = hist_percentile(&h, 50),
		.p99_ns = hist_percentile(&h, 99),
	};
	pst_log_close(log);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sub);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", sub);
	return r;
}

/* Whatever happens (a failed start, a stuck run), the throwaway cluster and the scratch
 * directory go away at exit. */
static char cleanup_dir[512];
static char cleanup_pgdir[600];

static void
cleanup(void)
{
	char cmd[2048];
	if (cleanup_pgdir[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "'%s' stop '%s'", PST_BENCH_PGCTL, cleanup_pgdir);
		if (system(cmd) != 0)
			fprintf(stderr, "bench: pgctl stop failed\n");
	}
	if (cleanup_dir[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cleanup_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "bench: could not remove %s\n", cleanup_dir);
	}
}

int
main(int argc, char **argv)
{
	const char *conninfo = NULL;
	uint32_t users = 20000, serial = 2000;
	uint64_t log_mb = 64, log_mb_durable = 16;
	const char *tmp_base = "/tmp";
	static const struct option opts[] = {
		{"conninfo", required_argument, NULL, 'c'},
		{"users", required_argument, NULL, 'u'},
		{"serial", required_argument, NULL, 's'},
		{"log-mb", required_argument, NULL, 'l'},
		{"dir", required_argument, NULL, 'd'},
		{"batch", required_argument, NULL, 'b'},
		{"inflight", required_argument, NULL, 'i'},
		{"churn-secs", required_argument, NULL, 'C'},
		{"churn-rate", required_argument, NULL, 'R'},
		{"read-inflight", required_argument, NULL, 'r'},
		{NULL, 0, NULL, 0},
	};
	int o;
	uint32_t batch = 0, inflight = 0, churn_secs = 0, churn_rate = 5000;
	int64_t read_inflight = -1; /* the default */
	while ((o = getopt_long(argc, argv, "c:u:s:l:d:b:i:C:R:r:", opts, NULL)) != -1) {
		switch (o) {
		case 'c': conninfo = optarg; break;
		case 'u': users = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 's': serial = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'l': log_mb_durable = strtoull(optarg, NULL, 10); log_mb = 4 * log_mb_durable; break;
		case 'd': tmp_base = optarg; break;
		case 'b': batch = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'i': inflight = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'C': churn_secs = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'R': churn_rate = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'r': read_inflight = strtoll(optarg, NULL, 10); break;
		default:
			fprintf(stderr, "usage: persist_bench [--conninfo STR] [--users N] "
					"[--serial N] [--log-mb N] [--dir DIR] [--batch N] "
					"[--inflight N] [--read-inflight N] [--churn-secs N] "
					"[--churn-rate N]\n");
			return 2;
		}
	}

	char dir[512];
	snprintf(dir, sizeof(dir), "%s/omsd-pst-bench.XXXXXX", tmp_base);
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(cleanup_dir, sizeof(cleanup_dir), "%s", dir);
	atexit(cleanup);
	chmod(dir, 0711); /* the postgres user must reach the cluster directory inside */
	char pgdir[600], conn_buf[1024], cmd[2048];
	bool own_pg = conninfo == NULL;
	if (own_pg) {
		snprintf(pgdir, sizeof(pgdir), "%s/pg", dir);
		snprintf(cleanup_pgdir, sizeof(cleanup_pgdir), "%s", pgdir);
		snprintf(cmd, sizeof(cmd), "'%s' start '%s' 2>'%s/pgctl.log'", PST_BENCH_PGCTL, pgdir,
			 dir);
		FILE *p = popen(cmd, "r");
		if (p == NULL || fgets(conn_buf, sizeof(conn_buf), p) == NULL) {
			fprintf(stderr, "bench: could not start PostgreSQL with %s (see %s/pgctl.log)\n",
				PST_BENCH_PGCTL, dir);
			return 1;
		}
		pclose(p);
		conn_buf[strcspn(conn_buf, "\n")] = '\0';
		conninfo = conn_buf;
	}
	printf("persist_bench: conninfo '%s'\n", conninfo);

	struct counts c = {0};
	struct pst_db_config cfg;
	pst_db_config_default(&cfg, conninfo, emit, &c);
	cfg.requests_max = 16384;
	if (batch)
		cfg.batch_max = batch;
	if (inflight)
		cfg.batches_in_flight_max = inflight;
	if (read_inflight >= 0)
		cfg.read_batches_in_flight_max = (uint32_t)read_inflight;
	struct pst_db *db;
	if (pst_db_create(&db, &cfg) < 0)
		return 1;
	/* Users from a fresh range each run so a shared database works too. */
	uint64_t base = ((uint64_t)time(NULL) % 100000) * 1000000 + 1;
	if (own_pg) {
		/* The operator opens accounts (docs/security.md); omsd's role cannot. On a
		 * shared database (--conninfo) the range must have been opened already. */
		uint64_t last = base + users + serial + (uint64_t)churn_rate * (churn_secs + 1);
		snprintf(cmd, sizeof(cmd), "'%s' accounts '%s' %" PRIu64 " %" PRIu64 " >/dev/null",
			 PST_BENCH_PGCTL, pgdir, base, last);
		if (system(cmd) != 0) {
			fprintf(stderr, "bench: could not open the accounts (%s)\n", cmd);
			return 1;
		}
	}

	const uint64_t *k = pst_db_counters(db);
	double hyd = run(db, &c, false, base, users, UINT32_MAX);
	uint64_t hyd_batches = k[PST_C_DB_BATCHES], hyd_stmts = k[PST_C_DB_STATEMENTS];
	double fl = run(db, &c, true, base, users, UINT32_MAX);
	uint64_t fl_batches = k[PST_C_DB_BATCHES] - hyd_batches;
	uint64_t fl_stmts = k[PST_C_DB_STATEMENTS] - hyd_stmts;
	uint64_t sbase = base + users;
	double hyd_serial = run(db, &c, false, sbase, serial, 1);
	double fl_serial = run(db, &c, true, sbase, serial, 1);
	printf("db: hydrate pipelined %.0f/s (%u users), one at a time %.0f/s (%u users): %.1fx\n",
	       hyd, users, hyd_serial, serial, hyd / hyd_serial);
	printf("db: flush   pipelined %.0f/s (%u users), one at a time %.0f/s (%u users): %.1fx\n",
	       fl, users, fl_serial, serial, fl / fl_serial);
	printf("db: batch_max %u, batches in flight %u (read lane %u); pipelined hydrate %" PRIu64
	       " batches / %" PRIu64 " statements, flush %" PRIu64 " / %" PRIu64
	       "; answers %" PRIu64 ", not ok %" PRIu64 "\n",
	       cfg.batch_max, cfg.batches_in_flight_max, cfg.read_batches_in_flight_max, hyd_batches,
	       hyd_stmts, fl_batches,
	       fl_stmts, c.answers, c.bad);
	pst_db_destroy(db);

	if (churn_secs > 0) {
		/* The defaults as omsd runs them (app_persist.c takes pst_db_config_default), but
		 * for --read-inflight. */
		pst_db_config_default(&cfg, conninfo, emit, &c);
		if (read_inflight >= 0)
			cfg.read_batches_in_flight_max = (uint32_t)read_inflight;
		if (pst_db_create(&db, &cfg) < 0)
			return 1;
		churn(db, &c, sbase + serial, churn_rate, churn_secs, cfg.requests_max);
		pst_db_destroy(db);
	}

	struct log_result mem = log_bench(dir, PST_SYNC_NONE, log_mb << 20);
	struct log_result dur = log_bench(dir, PST_SYNC_DATA, log_mb_durable << 20);
	printf("log: memory  %.0f entries/s, %.1f MB/s, batch of 64 p50 %" PRIu64 " ns p99 %" PRIu64
	       " ns\n",
	       mem.entries_per_s, mem.mb_per_s, mem.p50_ns, mem.p99_ns);
	printf("log: durable %.0f entries/s, %.1f MB/s, batch of 64 + fdatasync p50 %" PRIu64
	       " ns p99 %" PRIu64 " ns\n",
	       dur.entries_per_s, dur.mb_per_s, dur.p50_ns, dur.p99_ns);

	if (c.bad != 0) {
		fprintf(stderr, "bench: %" PRIu64 " answers were not OK\n", c.bad);
		return 1;
	}
	printf("bench: persist flush_per_s=%.0f hydrate_per_s=%.0f flush_serial_per_s=%.0f "
	       "hydrate_serial_per_s=%.0f flush_speedup=%.1f hydrate_speedup=%.1f "
	       "log_mb_per_s=%.0f\n",
	       fl, hyd, fl_serial, hyd_serial, fl / fl_serial, hyd / hyd_serial, dur.mb_per_s);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * raft_bench: three members in one process over an ideal in-memory network (FIFO, no loss,
 * no delay), 64-byte ingress payloads, batching on (64 payloads per log entry). Measures
 * wall time per payload through the step functions: propose, seal, AppendEntries out,
 * follower step + reply, leader commit, commit pushed to followers, apply on all three.
 * Time inside the core is a synthetic clock; wall time is read only here.
 *
 *   raft_bench [--entries N] [--batch B]
 *
 * Last line: bench: raft entries_per_s=N p50_ns=N p99_ns=N
 * (entries = ingress payloads; p50/p99 = wall time of one payload's round, propose to
 * applied on every member, divided by the payloads in the round.)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/hist.h"
#include "consensus/cns.h"

#define NODES 3
#define QMAX 256
#define MSG_MAX (64 + WIRE_TAIL_MAX)

struct qmsg {
	uint32_t to;
	uint32_t len;
	uint64_t buf[MSG_MAX / 8];
};

static struct qmsg queue[QMAX];
static uint32_t q_head, q_len;
static struct cns *nodes[NODES];
static uint64_t now_ns = 1000000000;

static void
send(void *ctx, uint32_t to, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	CHECK(q_len < QMAX);
	struct qmsg *q = &queue[(q_head + q_len) % QMAX];
	q_len++;
	q->to = to;
	q->len = msg->length;
	memcpy(q->buf, msg, msg->length);
}

static void
deliver_all(void)
{
	while (q_len > 0) {
		struct qmsg *q = &queue[q_head];
		q_head = (q_head + 1) % QMAX;
		q_len--;
		int rc = cns_step(nodes[q->to - 1], now_ns, (const struct wire_msg_hdr *)q->buf);
		CHECK(rc == 0);
	}
}

/* A service that counts what it is given. */
struct counter {
	uint64_t msgs;
	uint64_t last_time;
};

static void
c_apply(void *svc, uint64_t index, uint64_t t, const struct wire_msg_hdr *msg,
	struct svc_sink *sink)
{
	struct counter *c = svc;
	(void)index;
	(void)msg;
	(void)sink;
	c->msgs++;
	c->last_time = t;
}

static void
c_tick(void *svc, uint64_t index, uint64_t t, struct svc_sink *sink)
{
	struct counter *c = svc;
	(void)index;
	(void)sink;
	c->last_time = t;
}

static size_t
c_size(const void *svc)
{
	(void)svc;
	return sizeof(struct counter);
}

static size_t
c_snapshot(const void *svc, void *buf, size_t cap)
{
	if (cap < sizeof(struct counter))
		return 0;
	memcpy(buf, svc, sizeof(struct counter));
	return sizeof(struct counter);
}

static int
c_restore(void *svc, const void *buf, size_t len)
{
	if (len != sizeof(struct counter))
		return -EINVAL;
	memcpy(svc, buf, len);
	return 0;
}

static uint64_t
c_hash(const void *svc)
{
	const struct counter *c = svc;
	return c->msgs * 31 + c->last_time;
}

static const struct svc_ops counter_ops = {
	.name = "counter",
	.apply = c_apply,
	.tick = c_tick,
	.snapshot_size = c_size,
	.snapshot = c_snapshot,
	.restore = c_restore,
	.state_hash = c_hash,
};

static void
emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)dest;
	(void)msg;
}

static uint64_t
wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *
xalloc(size_t size)
{
	void *p = aligned_alloc(64, (size + 63) & ~(size_t)63);
	CHECK(p != NULL);
	memset(p, 0, size);
	return p;
}

int
main(int argc, char **argv)
{
	uint64_t entries = 1000000;
	uint32_t batch = 64;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--entries") == 0 && i + 1 < argc)
			entries = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
			batch = (uint32_t)strtoul(argv[++i], NULL, 0);
		else {
			fprintf(stderr, "usage: raft_bench [--entries N] [--batch B]\n");
			return 2;
		}
	}
	CHECK(batch >= 1 && batch * 64 <= CNS_ENTRY_DATA_MAX);

	struct cns_limits lim = {.snapshot_bytes_max = 64};
	struct cns_memlog_limits ll = {.entries_max = 4096, .bytes_max = 16u << 20};
	static struct counter svcs[NODES];
	static struct svc_sink sink = {.ctx = NULL, .emit = emit};
	uint32_t members[NODES] = {1, 2, 3};
	for (uint32_t i = 0; i < NODES; i++) {
		struct cns_memlog *log;
		CHECK(cns_memlog_init(&log, xalloc(cns_memlog_footprint(&ll)), &ll) == 0);
		struct cns_config cfg;
		cns_config_default(&cfg, 1, i + 1, NODES, members);
		cfg.tick_entry_ns = 0;
		cfg.inflight_max = 8;
		struct cns_env env = {
			.log_ops = &cns_memlog_ops,
			.log = log,
			.svc_ops = &counter_ops,
			.svc = &svcs[i],
			.sink = &sink,
			.host = {.ctx = NULL, .send = send, .snapshot_saved = NULL},
		};
		struct cns_boot boot = {0};
		CHECK(cns_init(&nodes[i], xalloc(cns_footprint(&lim)), &lim, &cfg, &env, &boot) == 0);
		cns_tick(nodes[i], now_ns);
	}
	/* Node 1 times out first and wins. */
	now_ns += 400000000;
	cns_tick(nodes[0], now_ns);
	deliver_all();
	CHECK(cns_role(nodes[0]) == CNS_LEADER);
	deliver_all();

	/* A 64-byte payload: an INGRESS wrapping a transfer and a tick. */
	struct {
		struct wire_ingress in;
		struct wire_transfer t;
		struct wire_tick tick;
	} payload;
	static_assert(sizeof(payload) == 64, "64-byte payload");
	memset(&payload, 0, sizeof(payload));
	wire_hdr_init(&payload.in.hdr, WIRE_INGRESS, 1);
	payload.in.hdr.length = 64;
	payload.in.tail_len = 48;
	payload.in.origin = 9;
	wire_hdr_init(&payload.t.hdr, WIRE_TRANSFER, 1);
	payload.t.amount = 1;
	wire_hdr_init(&payload.tick.hdr, WIRE_TICK, 1);

	static struct hist h;
	hist_init(&h);
	uint64_t done = 0;
	uint64_t t_start = wall_ns();
	while (done < entries) {
		uint32_t n = entries - done < batch ? (uint32_t)(entries - done) : batch;
		uint64_t t0 = wall_ns();
		now_ns += 1000; /* 1 us of synthetic time per round */
		for (uint32_t k = 0; k < n; k++) {
			payload.t.transfer_id = done + k;
			int rc = cns_propose(nodes[0], now_ns, &payload.in.hdr);
			CHECK(rc == 0);
		}
		cns_flush(nodes[0], now_ns);
		deliver_all();          /* AppendEntries out, replies back: leader commits */
		cns_tick(nodes[0], now_ns); /* commit index pushed to the followers */
		deliver_all();
		for (uint32_t i = 0; i < NODES; i++) {
			cns_apply(nodes[i], UINT32_MAX);
			if (cns_applied_index(nodes[i]) >= cns_snapshot(nodes[i], NULL)->index + 1024)
				cns_snapshot_take(nodes[i]);
		}
		uint64_t t1 = wall_ns();
		uint64_t per = (t1 - t0) / n;
		for (uint32_t k = 0; k < n; k++)
			hist_record(&h, per);
		done += n;
	}
	uint64_t elapsed = wall_ns() - t_start;
	for (uint32_t i = 0; i < NODES; i++)
		CHECK(svcs[i].msgs == entries); /* one INGRESS message per payload */
	uint64_t eps = elapsed > 0 ? (uint64_t)((double)entries * 1e9 / (double)elapsed) : 0;
	printf("raft_bench: %" PRIu64 " payloads of 64 B, batch %u, %" PRIu64
	       " log entries, 3 members, %" PRIu64 " ms\n",
	       entries, batch, cns_last_index(nodes[0]), elapsed / 1000000);
	printf("bench: raft entries_per_s=%" PRIu64 " p50_ns=%" PRIu64 " p99_ns=%" PRIu64 "\n",
	       eps, hist_percentile(&h, 50), hist_percentile(&h, 99));
	return 0;
}

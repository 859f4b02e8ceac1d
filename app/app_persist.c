/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The persister lcore: PostgreSQL through persist/ (pst_db, libpq in non-blocking pipeline
 * mode, never blocks). OMS shard lcores send it HYDRATE_REQUEST, BEGIN_DEHYDRATE and
 * RELEASE_CLAIM as frames on its request ring (the leader's egress, and the leader's
 * re-drive from oms_persist_foreach); completions (HYDRATE_USER, FLUSH_COMPLETE,
 * RELEASE_DONE) go back as frames on the requesting shard's local ring, where the shard
 * proposes them into its log (ARCHITECTURE.md §3: results of I/O re-enter a shard only as
 * ingress appended to its log). Fencing is the database's (docs/fencing.md), so a request
 * from a deposed leader is harmless and its completion is refused by the shard (-EPERM).
 *
 * Both rings are the wiring's (app_wire.c): the persister takes its request ring and the
 * shards' local rings at set-up and looks up none. Without [database] conninfo OMS shards
 * answer inline (app_inline_persist.c).
 *
 * In durable mode the shards' file logs are written by one writer thread per shard on the
 * persister's CPU (app_flog.c), so one shard's fdatasync or snapshot slice never waits for
 * another's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_ring.h>

#include "app.h"
#include "common/hist.h"
#include "persist/persist.h"

#define PERSIST_DRAIN_MAX 32 /* request frames taken per cycle */

struct app_persister {
	struct app *app;
	struct pst_db *db;           /* NULL: no database (the file log writers only) */
	struct app_persist_wires w;  /* inbox rq (OMS shard lcores → us), outboxes reply[] */
	struct app_outbox ob;        /* completions → the shards' local rings */
	struct rte_mbuf *held[PERSIST_DRAIN_MAX]; /* request frames waiting for room in the
						    pool, in order (the first one partly in) */
	uint32_t held_first;         /* the first of them */
	uint32_t held_count;
	uint32_t held_pos;           /* where in held[held_first] the next message starts */
	uint64_t requests;           /* requests submitted */
	uint64_t refused_full;       /* submit refused: pool full (the frame is kept, offered
					again next cycle) */
	uint64_t refused_bad;        /* submit refused: not a persistence request */
	uint64_t completions;        /* completions handed to shards */
	uint64_t no_shard;           /* completion for a shard not hosted here */
	bool connected;              /* last known connection state (for the log) */
} __rte_cache_aligned;

#define BUMP(x) __atomic_store_n(&(x), (x) + 1, __ATOMIC_RELAXED)
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static int
emit(void *arg, const struct wire_msg_hdr *msg)
{
	struct app_persister *p = arg;
	struct rte_ring *ring = msg->shard < DP_SHARDS_MAX ? p->w.reply[msg->shard] : NULL;
	if (ring == NULL) {
		BUMP(p->no_shard);
		return 0;
	}
	int rc = app_outbox_add(&p->ob, ring, NULL, DP_CLASS_SHARD, msg->shard, msg, NULL, 0);
	if (rc == -ENOBUFS)
		return -ENOBUFS; /* offered again on the next poll */
	BUMP(p->completions);
	return 0;
}

/* Submit the messages of frame m from *pos. Returns false when the pool is full: the frame
 * is kept (pst_db_submit: "keep the message and try later") with *pos at the refused one,
 * so nothing is lost and the order of the requests is kept. */
static bool
submit_frame(struct app_persister *p, struct rte_mbuf *m, uint32_t *pos, uint64_t now_ns)
{
	const uint8_t *buf;
	uint32_t len;
	enum wire_err err;
	const struct wire_msg_hdr *msg;
	dp_rx_msgs(m, &buf, &len);
	for (;;) {
		uint32_t at = *pos;
		if ((msg = wire_msgs_next(buf, len, pos, &err)) == NULL)
			return true;
		int rc = pst_db_submit(p->db, msg, now_ns);
		if (rc == 0) {
			BUMP(p->requests);
		} else if (rc == -ENOBUFS) {
			BUMP(p->refused_full);
			*pos = at;
			return false;
		} else {
			BUMP(p->refused_bad);
		}
	}
}

static uint32_t
persist_do_work(void *arg, uint64_t now_ns)
{
	struct app_persister *p = arg;
	uint32_t work = 0;
	if (p->db == NULL)
		return work;

	/* Frames a full pool refused come first, in order; new ones are taken only once they
	 * are all in (the requests keep their order, and none waits for the shards'
	 * re-drive). */
	if (p->held_count == 0) {
		p->held_first = 0;
		p->held_pos = 0;
		p->held_count = rte_ring_sc_dequeue_burst(p->w.rq, (void **)p->held,
							  PERSIST_DRAIN_MAX, NULL);
		work += p->held_count;
	}
	while (p->held_count > 0) {
		struct rte_mbuf *m = p->held[p->held_first];
		if (!submit_frame(p, m, &p->held_pos, now_ns))
			break; /* the pool is full: again next cycle, from held_pos */
		rte_pktmbuf_free(m);
		p->held_first++;
		p->held_count--;
		p->held_pos = 0;
	}
	work += pst_db_poll(p->db, now_ns);
	app_outbox_flush(&p->ob);
	bool up = pst_db_connected(p->db);
	if (up != p->connected) {
		p->connected = up;
		if (up)
			APP_LOG(INFO, "persister: database connected");
		else
			APP_LOG(WARNING, "persister: database disconnected: %s",
				pst_db_last_error(p->db));
	}
	return work;
}

int
app_persist_init(struct app *app, struct app_agent *agent, uint32_t index)
{
	(void)index;
	struct app_persister *p = rte_zmalloc("app_persister", sizeof(*p), RTE_CACHE_LINE_SIZE);
	if (p == NULL)
		return -ENOMEM;
	p->app = app;
	app->persister = p;
	agent->do_work = persist_do_work;
	agent->state = p;
	if (app->cfg.db_conninfo[0] == '\0') {
		APP_LOG(INFO, "persister: no database configured: OMS shards answer persistence "
			"requests inline; the file logs' writer threads use this CPU (durable mode)");
		return 0;
	}
	app_wire_persist(app, &p->w);
	if (p->w.rq == NULL) {
		app->persister = NULL;
		rte_free(p);
		return -ENOMEM;
	}
	app_outbox_init(&p->ob, app, NULL);
	struct pst_db_config dc;
	pst_db_config_default(&dc, app->cfg.db_conninfo, emit, p);
	int ret = pst_db_create(&p->db, &dc);
	if (ret != 0) {
		APP_LOG(ERR, "persister: pst_db_create: %s", strerror(-ret));
		app->persister = NULL;
		rte_free(p);
		return ret;
	}
	return 0;
}

void
app_persist_fini(struct app *app, struct app_agent *agent)
{
	struct app_persister *p = agent->state;
	if (p == NULL)
		return;
	if (p->db == NULL)
		goto out;
	app_outbox_free(&p->ob);
	for (uint32_t i = 0; i < p->held_count; i++)
		rte_pktmbuf_free(p->held[p->held_first + i]);
	p->held_count = 0;
	struct rte_mbuf *m;
	while (rte_ring_sc_dequeue(p->w.rq, (void **)&m) == 0)
		rte_pktmbuf_free(m); /* the ring itself is the wiring's */
	pst_db_destroy(p->db);
out:
	rte_free(p);
	app->persister = NULL;
	agent->state = NULL;
}

const char *const app_persist_kind_names[5] = {NULL, "hydrate", "flush", "release", "lookup"};

int
app_persist_hist(const struct app *app, unsigned kind, unsigned part, struct hist *out)
{
	const struct app_persister *p = app->persister;
	if (p == NULL || p->db == NULL || kind < 1 || kind > 4 || part > 1) {
		hist_init(out);
		return -ENOENT;
	}
	/* Written by the persister lcore: a torn copy is off by an in-flight sample. */
	memcpy(out, part == 0 ? pst_db_lat_queue(p->db, kind) : pst_db_lat_db(p->db, kind),
	       sizeof(*out));
	return 0;
}

void
app_persist_stats_write(const struct app *app, FILE *out)
{
	const struct app_persister *p = app->persister;
	if (p == NULL || p->db == NULL)
		return;
	fprintf(out, "persister.connected %u\n", pst_db_connected(p->db) ? 1u : 0u);
	fprintf(out, "persister.requests %" PRIu64 "\n", LOAD(p->requests));
	fprintf(out, "persister.refused_full %" PRIu64 "\n", LOAD(p->refused_full));
	fprintf(out, "persister.held_frames %" PRIu32 "\n", LOAD(p->held_count));
	fprintf(out, "persister.refused_bad %" PRIu64 "\n", LOAD(p->refused_bad));
	fprintf(out, "persister.completions %" PRIu64 "\n", LOAD(p->completions));
	fprintf(out, "persister.no_shard %" PRIu64 "\n", LOAD(p->no_shard));
	app_outbox_stats_write(&p->ob, "persister", out);
	/* The request latency split (docs/persist.md): queue and database, by kind. */
	for (unsigned k = 1; k <= 4; k++) {
		const struct hist *hs[2] = {pst_db_lat_queue(p->db, k), pst_db_lat_db(p->db, k)};
		static const char *const part[2] = {"queue", "db"};
		for (int j = 0; j < 2; j++) {
			char name[64];
			snprintf(name, sizeof(name), "persister.lat.%s_%s", app_persist_kind_names[k], part[j]);
			app_hist_lines(out, name, hs[j]);
		}
	}
	/* pst counters are single-writer words of the persister lcore (slightly stale). */
	const uint64_t *c = pst_db_counters(p->db);
	for (int i = 0; i < PST_C_COUNT; i++)
		if (i >= PST_C_DB_CONNECTS)
			fprintf(out, "persister.pst.%s %" PRIu64 "\n",
				pst_counter_name((enum pst_counter)i), c[i]);
}

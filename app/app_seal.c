/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bridge lcore's sealer (ARCHITECTURE.md §3: cross-cluster egress leaves the OMS shard
 * lcore): the shard lcores build their frames to the network — clients' reports, other
 * nodes' Raft traffic, sagas, events — up to the header, and hand them to this lcore on one
 * MP/SC ring (bridge_seal); it writes each frame's MAC (SipHash-2-4 over the whole frame,
 * wire_frame_seal) and queues it to the io lcore on its own tx queue. The MAC is the
 * costliest part of a frame (about 4.4 instructions a byte, docs/perf.md), and it is the
 * part that needs nothing of the shard's state: the key travels in the mbuf's private
 * area (dp_meta.seal_key), wiped once used.
 *
 * Order: a shard lcore's frames reach the ring in the order it flushed them (an MP ring
 * keeps each producer's order) and leave in ring order; a frame the io lcore's queue
 * refuses waits here, and nothing behind it passes it. Frames without a MAC (a zero key:
 * a client address with no key configured) take the same way, so a destination's frames
 * never reorder. The shard lcore's outbox holds a frame the seal ring refuses, as it held
 * one its tx queue refused (app_out.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>
#include <rte_ring.h>

#include "app.h"

#define SEAL_BURST 32

struct app_seal {
	struct rte_ring *in;               /* bridge_seal: shard lcores → us (MP/SC) */
	struct dp_txq *txq;                /* us → io */
	struct rte_mbuf *pend[SEAL_BURST]; /* sealed, refused by txq: first out next cycle */
	uint32_t pend_pos, pend_count;
	/* Counters (this lcore writes, relaxed; the stats read them). */
	uint64_t sealed;                   /* frames MAC'd */
	uint64_t sealed_bytes;             /* bytes MAC'd */
	uint64_t plain;                    /* frames passed on without a MAC */
	uint64_t txq_waits;                /* cycles the io lcore's queue refused a frame */
	uint64_t dropped;                  /* frames freed at a stop the io lcore did not take */
};

#define BUMP(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static void
seal_one(struct app_seal *s, struct rte_mbuf *m)
{
	struct dp_meta *meta = dp_meta(m);
	if ((meta->seal_key.k0 | meta->seal_key.k1) == 0) {
		BUMP(s->plain, 1);
		return;
	}
	wire_frame_seal(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, &meta->seal_key);
	memset(&meta->seal_key, 0, sizeof(meta->seal_key));
	BUMP(s->sealed, 1);
	BUMP(s->sealed_bytes, m->data_len);
}

/* Queue what is pending to the io lcore; true when nothing is left. */
static bool
pend_send(struct app_seal *s)
{
	if (s->pend_count == 0)
		return true;
	uint32_t q = dp_tx_send_burst(s->txq, &s->pend[s->pend_pos], s->pend_count);
	s->pend_pos += q;
	s->pend_count -= q;
	if (s->pend_count == 0) {
		s->pend_pos = 0;
		return true;
	}
	BUMP(s->txq_waits, 1);
	return false;
}

static uint32_t
app_seal_do_work(void *arg, uint64_t now_ns)
{
	struct app_seal *s = arg;
	(void)now_ns;
	uint32_t had = s->pend_count;
	if (!pend_send(s))
		/* The io lcore's queue is full: stay awake (it does not ring us when it drains),
		 * and take nothing new until the refused frames are out. */
		return 1;
	uint32_t work = had;
	uint32_t n = rte_ring_sc_dequeue_burst(s->in, (void **)s->pend, SEAL_BURST, NULL);
	if (n == 0)
		return work;
	for (uint32_t i = 0; i < n; i++)
		seal_one(s, s->pend[i]);
	s->pend_pos = 0;
	s->pend_count = n;
	pend_send(s);
	return work + n;
}

static uint32_t
idle_do_work(void *arg, uint64_t now_ns)
{
	(void)arg;
	(void)now_ns;
	return 0;
}

int
app_seal_init(struct app *app, struct app_agent *agent, uint32_t index)
{
	(void)index;
	agent->state = NULL;
	agent->do_work = idle_do_work;
	if (app->rings.seal == NULL)
		return 0; /* [bridge] seal = off: a declared lcore with nothing to do */
	struct app_seal *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->in = app->rings.seal;
	s->txq = app->rings.seal_txq;
	app->seal = s;
	agent->state = s;
	agent->do_work = app_seal_do_work;
	return 0;
}

uint32_t
app_seal_drain(struct app *app)
{
	struct app_seal *s = app->seal;
	if (s == NULL)
		return 0;
	/* The io lcore still runs: give it a second for whatever the shard lcores left. */
	uint64_t until = dp_clock_ns() + UINT64_C(1000000000);
	uint32_t n = 0;
	while (dp_clock_ns() < until) {
		uint32_t w = app_seal_do_work(s, 0);
		if (w == 0 && s->pend_count == 0)
			break;
		n += w;
	}
	struct rte_mbuf *m;
	for (uint32_t i = 0; i < s->pend_count; i++)
		rte_pktmbuf_free(s->pend[s->pend_pos + i]);
	BUMP(s->dropped, s->pend_count);
	s->pend_count = 0;
	while (rte_ring_sc_dequeue(s->in, (void **)&m) == 0) {
		rte_pktmbuf_free(m);
		BUMP(s->dropped, 1);
	}
	if (LOAD(s->dropped) != 0)
		APP_LOG(WARNING, "bridge: %" PRIu64 " frame(s) not sent at stop: the io lcore's "
			"queue stayed full", LOAD(s->dropped));
	return n;
}

void
app_seal_fini(struct app *app, struct app_agent *agent)
{
	(void)agent;
	if (app->seal == NULL)
		return;
	/* app_seal_drain emptied it when the node stopped; a failed start may leave frames. */
	struct rte_mbuf *m;
	while (app->rings.seal != NULL && rte_ring_sc_dequeue(app->rings.seal, (void **)&m) == 0)
		rte_pktmbuf_free(m);
	for (uint32_t i = 0; i < app->seal->pend_count; i++)
		rte_pktmbuf_free(app->seal->pend[app->seal->pend_pos + i]);
	free(app->seal);
	app->seal = NULL;
}

void
app_seal_stats_write(const struct app *app, FILE *out)
{
	const struct app_seal *s = app->seal;
	if (s == NULL)
		return;
	fprintf(out, "bridge.sealed_frames %" PRIu64 "\n", LOAD(s->sealed));
	fprintf(out, "bridge.sealed_bytes %" PRIu64 "\n", LOAD(s->sealed_bytes));
	fprintf(out, "bridge.plain_frames %" PRIu64 "\n", LOAD(s->plain));
	fprintf(out, "bridge.txq_waits %" PRIu64 "\n", LOAD(s->txq_waits));
	fprintf(out, "bridge.seal_dropped %" PRIu64 "\n", LOAD(s->dropped));
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bridge lcore's sealer (ARCHITECTURE.md §3: cross-cluster egress leaves the OMS shard
 * lcore): the shard lcores build their frames to the network — clients' reports, other
 * nodes' Raft traffic, sagas, events — up to the header, and hand them to this lcore on one
 * MP/SC ring (bridge_seal); it writes each frame's MAC (SipHash-2-4 over the whole frame;
 * wire_frames_seal takes a burst's frames four at a time through the rounds) and queues it
 * to an io lcore on its own tx queues. The MAC is the costliest part of a frame (about 4.4
 * instructions a byte one frame at a time, docs/perf.md), and it is the part that needs
 * nothing of the shard's state: the key travels in the mbuf's private area
 * (dp_meta.seal_key), wiped once used.
 *
 * With several io lcores ([port] rx_queues) it has a tx queue to each and spreads the
 * frames over them by destination (address and port), so each io lcore encapsulates and
 * sends its share and a destination's frames keep one queue.
 *
 * Order: a shard lcore's frames reach the ring in the order it flushed them (an MP ring
 * keeps each producer's order) and leave in ring order; a frame an io lcore's queue
 * refuses waits here, and nothing behind it passes it (no new frame is taken until every
 * queue took what waits for it). Frames without a MAC (a zero key: a client address with
 * no key configured) take the same way, so a destination's frames never reorder. The shard lcore's outbox holds a frame the seal ring refuses, as it held
 * one its tx queue refused (app_out.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>
#include <rte_ring.h>

#include "app.h"
#include "common/check.h"

#define SEAL_BURST 32

/* Sealed frames for one io lcore's queue, refused so far: first out next cycle. */
struct seal_out {
	struct dp_txq *txq;                /* us → io lcore k */
	struct rte_mbuf *m[SEAL_BURST];
	uint32_t pos, count;
};

struct app_seal {
	struct rte_ring *in;               /* bridge_seal: shard lcores → us (MP/SC) */
	struct seal_out out[DP_IO_MAX];    /* one per io lcore */
	uint32_t outs;
	uint32_t pend_count;               /* frames waiting in out[], in all */
	/* Counters (this lcore writes, relaxed; the stats read them). */
	uint64_t sealed;                   /* frames MAC'd */
	uint64_t sealed_bytes;             /* bytes MAC'd */
	uint64_t plain;                    /* frames passed on without a MAC */
	uint64_t txq_waits;                /* cycles the io lcore's queue refused a frame */
	uint64_t dropped;                  /* frames freed at a stop the io lcore did not take */
};

#define BUMP(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* MAC a burst's frames, those with a key, all at once: wire_frames_seal runs four frames
 * through SipHash's rounds together (AVX2), about a third of the instructions a byte of one
 * at a time. The keys are wiped once used. */
static void
seal_burst(struct app_seal *s, struct rte_mbuf *const burst[], uint32_t n)
{
	uint8_t *frames[SEAL_BURST];
	uint32_t lens[SEAL_BURST];
	struct wire_key *keys[SEAL_BURST];
	uint32_t k = 0;
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rte_mbuf *m = burst[i];
		struct dp_meta *meta = dp_meta(m);
		if ((meta->seal_key.k0 | meta->seal_key.k1) == 0)
			continue;
		frames[k] = rte_pktmbuf_mtod(m, uint8_t *);
		lens[k] = m->data_len;
		keys[k] = &meta->seal_key;
		bytes += m->data_len;
		k++;
	}
	if (k > 0)
		wire_frames_seal(frames, lens, (const struct wire_key *const *)keys, k);
	for (uint32_t i = 0; i < k; i++)
		memset(keys[i], 0, sizeof(*keys[i]));
	BUMP(s->plain, n - k);
	BUMP(s->sealed, k);
	BUMP(s->sealed_bytes, bytes);
}

/* Queue what is pending to the io lcores; true when nothing is left. */
static bool
pend_send(struct app_seal *s)
{
	if (s->pend_count == 0)
		return true;
	for (uint32_t k = 0; k < s->outs; k++) {
		struct seal_out *o = &s->out[k];
		if (o->count == 0)
			continue;
		uint32_t q = dp_tx_send_burst(o->txq, &o->m[o->pos], o->count);
		o->pos += q;
		o->count -= q;
		s->pend_count -= q;
		if (o->count == 0)
			o->pos = 0;
	}
	if (s->pend_count == 0)
		return true;
	BUMP(s->txq_waits, 1);
	return false;
}

/* The io lcore's queue for a destination: one per address and port. */
static inline struct seal_out *
out_of(struct app_seal *s, struct rte_mbuf *m)
{
	if (s->outs == 1)
		return &s->out[0];
	const struct dp_addr *d = &dp_meta(m)->dst;
	uint32_t h = (d->ip_be ^ ((uint32_t)d->port_be << 16)) * UINT32_C(0x9E3779B1);
	return &s->out[(uint32_t)(((uint64_t)h * s->outs) >> 32)];
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
	struct rte_mbuf *burst[SEAL_BURST];
	uint32_t n = rte_ring_sc_dequeue_burst(s->in, (void **)burst, SEAL_BURST, NULL);
	if (n == 0)
		return work;
	seal_burst(s, burst, n);
	for (uint32_t i = 0; i < n; i++) {
		struct seal_out *o = out_of(s, burst[i]);
		o->m[o->count++] = burst[i]; /* every out[] was empty: pos 0 */
	}
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
	for (uint32_t k = 0; k < DP_IO_MAX && app->rings.seal_txq[k] != NULL; k++)
		s->out[s->outs++].txq = app->rings.seal_txq[k];
	CHECK(s->outs > 0);
	app->seal = s;
	agent->state = s;
	agent->do_work = app_seal_do_work;
	return 0;
}

static void
pend_free(struct app_seal *s)
{
	for (uint32_t k = 0; k < s->outs; k++) {
		struct seal_out *o = &s->out[k];
		rte_pktmbuf_free_bulk(&o->m[o->pos], o->count);
		o->pos = 0;
		o->count = 0;
	}
	s->pend_count = 0;
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
	BUMP(s->dropped, s->pend_count);
	pend_free(s);
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
	pend_free(app->seal);
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

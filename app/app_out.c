/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Outgoing frames of one lcore (app.h, struct app_outbox): one open frame per route,
 * flushed when full, when its slot is needed, and at the end of every duty cycle.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "app.h"

#define BUMP(x) __atomic_store_n(&(x), (x) + 1, __ATOMIC_RELAXED)

uint32_t
app_frame_cap(const struct app *app)
{
	/* The UDP payload of one IP packet at our MTU (no fragments). */
	uint32_t cap = (uint32_t)app->cfg.dp.mtu - 28u;
	return cap < WIRE_FRAME_MAX ? cap : WIRE_FRAME_MAX;
}

void
app_outbox_init(struct app_outbox *ob, struct app *app, struct dp_txq *txq)
{
	memset(ob, 0, sizeof(*ob));
	ob->app = app;
	ob->txq = txq;
	ob->self = app->cfg.dp.node_id;
	ob->frame_cap = app_frame_cap(app);
}

/* Offer one finished frame to its queue — a local ring, the bridge's seal ring, or the tx
 * queue; 0 or -ENOBUFS (the caller still owns it). */
static int
offer(struct app_outbox *ob, struct rte_mbuf *m, struct rte_ring *ring)
{
	if (ring != NULL) {
		if (rte_ring_mp_enqueue(ring, m) != 0)
			return -ENOBUFS;
		if (ring == ob->seal)
			BUMP(ob->tx_frames);
		else
			BUMP(ob->tx_local);
		dp_bell_ring(app_ring_bell(ob->app, ring));
		return 0;
	}
	if (dp_tx_send_burst(ob->txq, &m, 1) != 1)
		return -ENOBUFS;
	BUMP(ob->tx_frames);
	return 0;
}

/* Send a sealed frame, or hold it when its queue is full (dropped when the list is full). */
static void
send_or_hold(struct app_outbox *ob, struct rte_mbuf *m, struct rte_ring *ring)
{
	if (ob->held_count == 0 && offer(ob, m, ring) == 0)
		return;
	if (ob->held_count == APP_HELD_MAX) {
		rte_pktmbuf_free(m);
		BUMP(ob->tx_full);
		return;
	}
	ob->held[ob->held_count] = m;
	ob->held_ring[ob->held_count] = ring;
	ob->held_count++;
	BUMP(ob->tx_held);
}

/* Offer the held frames again, oldest first; stop at the first refusal (keeps order). */
static void
held_retry(struct app_outbox *ob)
{
	uint32_t done = 0;
	while (done < ob->held_count && offer(ob, ob->held[done], ob->held_ring[done]) == 0)
		done++;
	if (done == 0)
		return;
	ob->held_count -= done;
	memmove(ob->held, ob->held + done, ob->held_count * sizeof(ob->held[0]));
	memmove(ob->held_ring, ob->held_ring + done, ob->held_count * sizeof(ob->held_ring[0]));
}

static void
out_flush(struct app_outbox *ob, struct app_out *o)
{
	struct rte_mbuf *m = o->m;
	o->m = NULL;
	if (m == NULL)
		return;
	if (o->b.count == 0) {
		rte_pktmbuf_free(m);
		return;
	}
	if (o->ring != NULL) {
		uint32_t len = wire_builder_finish(&o->b, NULL);
		m->data_len = (uint16_t)len;
		m->pkt_len = len;
		struct dp_meta *meta = dp_meta(m);
		memset(meta, 0, sizeof(*meta));
		meta->src.ip_be = ob->app->cfg.dp.ip_be;
		meta->src.port_be = rte_cpu_to_be_16(ob->app->cfg.dp.udp_port);
		meta->msg_count = o->b.count;
		meta->sender_id = ob->self;
		meta->cls = o->cls;
		meta->shard = o->shard;
		send_or_hold(ob, m, o->ring);
		return;
	}
	const struct wire_key *key = o->keyed ? &o->key : dp_key_for(ob->app->dp, &o->dst);
	if (ob->seal != NULL) {
		/* The bridge lcore writes the MAC (app_seal.c). */
		bool mac = key != NULL && (key->k0 | key->k1) != 0;
		uint32_t len = wire_builder_finish_unsealed(&o->b, mac);
		dp_tx_prepare(m, len, &o->dst);
		struct dp_meta *meta = dp_meta(m);
		if (mac)
			meta->seal_key = *key;
		else
			memset(&meta->seal_key, 0, sizeof(meta->seal_key));
		send_or_hold(ob, m, ob->seal);
		return;
	}
	uint32_t len = wire_builder_finish(&o->b, key);
	dp_tx_prepare(m, len, &o->dst);
	send_or_hold(ob, m, NULL);
}

void
app_outbox_flush(struct app_outbox *ob)
{
	held_retry(ob);
	for (uint32_t i = 0; i < APP_OUT_MAX; i++)
		out_flush(ob, &ob->out[i]);
}

void
app_outbox_free(struct app_outbox *ob)
{
	for (uint32_t i = 0; i < APP_OUT_MAX; i++) {
		if (ob->out[i].m != NULL)
			rte_pktmbuf_free(ob->out[i].m);
		ob->out[i].m = NULL;
	}
	for (uint32_t i = 0; i < ob->held_count; i++)
		rte_pktmbuf_free(ob->held[i]);
	ob->held_count = 0;
}

static bool
same_key(const struct app_out *o, const struct wire_key *key)
{
	if (key == NULL)
		return !o->keyed;
	return o->keyed && o->key.k0 == key->k0 && o->key.k1 == key->k1;
}

/* Does open frame o take messages for this destination? */
static inline bool
out_is(const struct app_out *o, struct rte_ring *ring, const struct dp_addr *dst, uint16_t cls,
       uint16_t shard, const struct wire_key *key)
{
	if (o->ring != ring || o->cls != cls || o->shard != shard)
		return false;
	return ring != NULL || (o->dst.ip_be == dst->ip_be && o->dst.port_be == dst->port_be &&
				same_key(o, key));
}

static struct app_out *
out_get(struct app_outbox *ob, struct rte_ring *ring, const struct dp_addr *dst, uint16_t cls,
	uint16_t shard, const struct wire_key *key)
{
	struct app_out *slot = &ob->out[ob->last];
	if (slot->m != NULL && out_is(slot, ring, dst, cls, shard, key))
		return slot;
	slot = NULL;
	for (uint32_t i = 0; i < APP_OUT_MAX; i++) {
		struct app_out *o = &ob->out[i];
		if (o->m == NULL) {
			if (slot == NULL)
				slot = o;
			continue;
		}
		if (out_is(o, ring, dst, cls, shard, key)) {
			ob->last = i;
			return o;
		}
	}
	if (slot == NULL) {
		slot = &ob->out[0];
		out_flush(ob, slot);
	}
	ob->last = (uint32_t)(slot - ob->out);
	struct rte_mbuf *m = dp_tx_alloc(ob->app->dp);
	if (m == NULL) {
		BUMP(ob->tx_nombuf);
		return NULL;
	}
	uint32_t cap;
	void *buf = dp_tx_buf(m, &cap);
	if (cap > ob->frame_cap)
		cap = ob->frame_cap;
	wire_builder_init(&slot->b, buf, cap, ob->self);
	slot->m = m;
	slot->ring = ring;
	slot->cls = cls;
	slot->shard = shard;
	slot->keyed = key != NULL;
	if (key != NULL)
		slot->key = *key;
	if (ring == NULL)
		slot->dst = *dst;
	else
		memset(&slot->dst, 0, sizeof(slot->dst));
	return slot;
}

static __attribute__((noinline)) int
outbox_add_slow(struct app_outbox *ob, struct rte_ring *ring, const struct dp_addr *dst,
		uint16_t cls, uint16_t shard, const struct wire_key *key,
		const struct wire_msg_hdr *msg, const void *tail, uint16_t tail_len)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		struct app_out *o = out_get(ob, ring, dst, cls, shard, key);
		if (o == NULL)
			return -ENOBUFS;
		int rc = tail != NULL ? wire_builder_add_tail(&o->b, msg, tail, tail_len)
				      : wire_builder_add(&o->b, msg);
		if (rc == 0)
			return 0;
		if (o->b.count == 0)
			break; /* does not fit an empty frame */
		out_flush(ob, o);
	}
	BUMP(ob->tx_too_big);
	return -EMSGSIZE;
}

/* The common case first: the frame the last message went to takes this one too. A message
 * of a plain type (no tail: nearly all) is copied in line; a tailed one, with room to spare,
 * is a tail call of the builder's add, with nothing to keep for after it. */
static inline int
outbox_add(struct app_outbox *ob, struct rte_ring *ring, const struct dp_addr *dst,
	   uint16_t cls, uint16_t shard, const struct wire_key *key, const struct wire_msg_hdr *msg,
	   const void *tail, uint16_t tail_len)
{
	struct app_out *o = &ob->out[ob->last];
	if (o->m != NULL && out_is(o, ring, dst, cls, shard, key)) {
		if (tail == NULL) {
			if (wire_builder_add_plain(&o->b, msg))
				return 0;
		} else if (wire_builder_room(&o->b, msg, tail_len)) {
			return wire_builder_add_tail(&o->b, msg, tail, tail_len);
		}
	}
	return outbox_add_slow(ob, ring, dst, cls, shard, key, msg, tail, tail_len);
}

int
app_outbox_add(struct app_outbox *ob, struct rte_ring *ring, const struct dp_addr *dst,
	       uint16_t cls, uint16_t shard, const struct wire_msg_hdr *msg, const void *tail,
	       uint16_t tail_len)
{
	return outbox_add(ob, ring, dst, cls, shard, NULL, msg, tail, tail_len);
}

int
app_outbox_add_msg(struct app_outbox *ob, struct rte_ring *ring, const struct dp_addr *dst,
		   uint16_t cls, uint16_t shard, const struct wire_msg_hdr *msg)
{
	return outbox_add(ob, ring, dst, cls, shard, NULL, msg, NULL, 0);
}

int
app_outbox_add_keyed(struct app_outbox *ob, const struct dp_addr *dst,
		     const struct wire_key *key, const struct wire_msg_hdr *msg)
{
	return outbox_add(ob, NULL, dst, DP_CLASS_CLIENT, 0, key, msg, NULL, 0);
}

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

void
app_outbox_stats_write(const struct app_outbox *ob, const char *prefix, FILE *out)
{
	fprintf(out, "%s.tx_frames %" PRIu64 "\n", prefix, LOAD(ob->tx_frames));
	fprintf(out, "%s.tx_local %" PRIu64 "\n", prefix, LOAD(ob->tx_local));
	fprintf(out, "%s.tx_held %" PRIu64 "\n", prefix, LOAD(ob->tx_held));
	fprintf(out, "%s.tx_full %" PRIu64 "\n", prefix, LOAD(ob->tx_full));
	fprintf(out, "%s.tx_nombuf %" PRIu64 "\n", prefix, LOAD(ob->tx_nombuf));
	fprintf(out, "%s.tx_too_big %" PRIu64 "\n", prefix, LOAD(ob->tx_too_big));
}

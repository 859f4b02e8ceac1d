/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The io lcore: rx burst → parse → answer ARP/ICMP in place, or validate the wire frame and
 * enqueue it on its route's ring; then drain every tx queue, encapsulate, resolve the next
 * hop and tx burst. Bounded: one rx burst and at most one burst per tx queue per cycle.
 * Nothing here blocks: a full ring or port queue drops and counts.
 */
#include <errno.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_prefetch.h>

#include "common/check.h"
#include "dp_int.h"

static void
tx_flush(struct dp *dp)
{
	struct dp_io *io = &dp->io;
	uint16_t n = io->tx_count;
	uint64_t bytes = 0;

	if (n == 0)
		return;
	for (uint16_t i = 0; i < n; i++)
		bytes += io->tx[i]->pkt_len;
	uint16_t sent = rte_eth_tx_burst(dp->port_id, 0, io->tx, n);
	for (uint16_t i = sent; i < n; i++)
		bytes -= io->tx[i]->pkt_len;
	if (sent < n) {
		dp_count(dp, DP_C_TX_PORT_FULL, n - sent);
		rte_pktmbuf_free_bulk(&io->tx[sent], n - sent);
	}
	dp_count(dp, DP_C_TX_PKTS, sent);
	dp_count(dp, DP_C_TX_BYTES, bytes);
	io->tx_count = 0;
}

static inline void
tx_push(struct dp *dp, struct rte_mbuf *m)
{
	if (dp->io.tx_count == RTE_DIM(dp->io.tx))
		tx_flush(dp);
	dp->io.tx[dp->io.tx_count++] = m;
}

static bool
is_peer(const struct dp *dp, uint32_t ip_be)
{
	for (uint32_t i = 0; i < dp->conf.peer_count; i++)
		if (dp->conf.peers[i].ip_be == ip_be)
			return true;
	return false;
}

const struct wire_key *
dp_key_for(const struct dp *dp, const struct dp_addr *addr)
{
	return is_peer(dp, addr->ip_be) ? dp->peer_key : dp->client_key;
}

static void
arp_request(struct dp *dp, uint32_t ip_be)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(dp->pool);
	if (m == NULL) {
		dp_count(dp, DP_C_TX_NOMBUF, 1);
		return;
	}
	uint8_t *buf = (uint8_t *)rte_pktmbuf_append(m, DP_ARP_FRAME_LEN);
	CHECK(buf != NULL); /* a fresh mbuf always has 60 bytes of tailroom */
	dp_arp_request_build(buf, &dp->host, ip_be);
	dp_count(dp, DP_C_ARP_REQUESTED, 1);
	tx_push(dp, m);
}

/* A validated UDP payload: align it, decode the frame, route it. */
/* Note a bell to ring once the rx burst is routed (once per lcore and burst). */
static void
bell_note(struct dp_io *io, struct dp_bell *bell)
{
	for (uint32_t i = 0; i < io->rung_count; i++)
		if (io->rung[i] == bell)
			return;
	if (io->rung_count == DP_BELLS_PENDING) {
		dp_bell_ring(bell); /* more lcores than the list holds: this one now */
		return;
	}
	io->rung[io->rung_count++] = bell;
}

static void
frame_input(struct dp *dp, struct rte_mbuf *m, const struct dp_pkt *p, uint64_t tsc)
{
	struct dp_io *io = &dp->io;
	uint8_t *base = rte_pktmbuf_mtod(m, uint8_t *);
	uint8_t *payload = base + p->payload_off;
	uint8_t *frame = RTE_PTR_ALIGN_FLOOR(payload, 8);
	uint32_t count = 0, sender = 0;
	enum wire_err err;

	/* wire_frame_decode needs an 8-byte aligned frame. The payload sits 42 bytes into the
	 * packet (2 mod 8), so slide it down over the headers we have finished with. */
	DCHECK(frame >= base);
	if (frame != payload)
		memmove(frame, payload, p->payload_len);
	m->data_off = (uint16_t)(frame - (uint8_t *)m->buf_addr);
	m->data_len = p->payload_len;
	m->pkt_len = p->payload_len;

	/* A client session's frame is MAC'd under its session's key, which only the gateway
	 * holds: decoded here, proven there. A peer's never is (wire_frame_decode refuses it). */
	bool session = (wire_frame_flags(frame, p->payload_len) & WIRE_FRAME_F_SESSION) != 0 &&
		       !is_peer(dp, p->src.ip_be);
	if (session)
		err = wire_session_frame_decode(frame, p->payload_len, io->msgs,
						WIRE_FRAME_MSGS_MAX, &count, &sender);
	else
		err = wire_frame_decode(frame, p->payload_len, dp_key_for(dp, &p->src), io->msgs,
					WIRE_FRAME_MSGS_MAX, &count, &sender);
	if (err != WIRE_E_OK) {
		DCHECK((unsigned)err < WIRE_E_COUNT);
		__atomic_store_n(&io->frame_err[err], io->frame_err[err] + 1, __ATOMIC_RELAXED);
		dp_count(dp, DP_C_FRAME_BAD, 1);
		rte_pktmbuf_free(m);
		return;
	}
	DCHECK(count >= 1 && count <= WIRE_FRAME_MSGS_MAX);
	dp_count(dp, DP_C_FRAME_OK, 1);
	dp_count(dp, DP_C_FRAME_MSGS, count);
	/* A rolling upgrade in progress (docs/upgrade.md): peers one wire minor away, which the
	 * decoder took (a minor two away is frame_err.bad_version). */
	uint8_t minor = wire_frame_minor(frame, p->payload_len);
	if (minor != WIRE_VERSION_MINOR)
		dp_count(dp, minor == WIRE_VERSION_MINOR + 1 ? DP_C_FRAME_MINOR_NEWER
							     : DP_C_FRAME_MINOR_OLDER, 1);

	/* Route by the first message; every other message must route the same way. Classes
	 * without a shard (gateway, client) ignore hdr.shard. */
	enum dp_class cls = dp_class_of_msg(io->msgs[0]);
	bool sharded = cls == DP_CLASS_SHARD || cls == DP_CLASS_BRIDGE;
	uint16_t shard = sharded ? io->msgs[0]->shard : 0;
	/* A session frame goes whole to the gateway (SESSION_HDR first), which checks every
	 * message against the session's rights. */
	for (uint32_t i = 1; i < count && !session; i++) {
		if (dp_class_of_msg(io->msgs[i]) != cls ||
		    (sharded && io->msgs[i]->shard != shard)) {
			dp_count(dp, DP_C_FRAME_MIXED, 1);
			rte_pktmbuf_free(m);
			return;
		}
	}
	struct rte_ring *ring = NULL;
	struct dp_bell *bell = NULL;
	if (cls != DP_CLASS_NONE) {
		if (shard < DP_SHARDS_MAX) {
			ring = dp->route[cls][shard];
			bell = dp->route_bell[cls][shard];
		}
		if (ring == NULL) {
			ring = dp->route_any[cls];
			bell = dp->route_any_bell[cls];
		}
	}
	if (ring == NULL) {
		dp_count(dp, DP_C_FRAME_NO_ROUTE, 1);
		rte_pktmbuf_free(m);
		return;
	}

	struct dp_meta *meta = dp_meta(m);
	meta->src = p->src;
	memset(&meta->dst, 0, sizeof(meta->dst));
	rte_ether_addr_copy(&p->src_mac, &meta->src_mac);
	meta->msg_count = (uint16_t)count;
	meta->sender_id = sender;
	meta->cls = (uint16_t)cls;
	meta->shard = shard;
	meta->frame_flags = session ? WIRE_FRAME_F_SESSION : 0;
	meta->rx_tsc = tsc;
	if (rte_ring_sp_enqueue(ring, m) != 0) {
		dp_count(dp, DP_C_FRAME_RING_FULL, 1);
		rte_pktmbuf_free(m);
		return;
	}
	dp_count(dp, DP_C_FRAME_ROUTED, 1);
	if (bell != NULL)
		bell_note(&dp->io, bell);
}

static void
rx_one(struct dp *dp, struct rte_mbuf *m, uint64_t now_ns, uint64_t tsc)
{
	struct dp_pkt p;
	uint64_t ol = m->ol_flags;

	dp_count(dp, DP_C_RX_BYTES, m->pkt_len);
	if (m->nb_segs != 1) {
		dp_count(dp, DP_C_RX_MULTISEG, 1);
		rte_pktmbuf_free(m);
		return;
	}
	if ((ol & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD) {
		dp_count(dp, DP_C_IP_BAD_CSUM, 1);
		rte_pktmbuf_free(m);
		return;
	}
	if ((ol & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD) {
		dp_count(dp, DP_C_UDP_BAD_CSUM, 1);
		rte_pktmbuf_free(m);
		return;
	}
	dp_pkt_input(&dp->host, rte_pktmbuf_mtod(m, uint8_t *), m->data_len,
		     (ol & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD,
		     (ol & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD, &p);
	if (p.learn && dp_arp_learn(&dp->io.arp, p.learn_ip_be, &p.learn_mac, p.learn_create,
				    now_ns))
		dp_count(dp, DP_C_ARP_LEARNED, 1);
	if (p.counter < DP_C_COUNT)
		dp_count(dp, p.counter, 1);
	switch (p.action) {
	case DP_ACT_DROP:
		rte_pktmbuf_free(m);
		return;
	case DP_ACT_REPLY:
		tx_push(dp, m);
		return;
	case DP_ACT_FRAME:
		frame_input(dp, m, &p, tsc);
		return;
	}
}

static void
tx_frame(struct dp *dp, struct rte_mbuf *m, uint64_t now_ns)
{
	const struct dp_meta *meta = dp_meta(m);
	uint32_t len = m->data_len;
	uint32_t dst = meta->dst.ip_be;
	struct rte_ether_addr mac;
	bool request;

	if (m->nb_segs != 1 || len + (DP_HDRS_LEN - RTE_ETHER_HDR_LEN) > dp->conf.mtu) {
		dp_count(dp, DP_C_TX_TOO_BIG, 1);
		rte_pktmbuf_free(m);
		return;
	}
	uint32_t hop = dp_host_onlink(&dp->host, dst) ? dst : dp->conf.gateway_be;
	if (hop == 0 || dp_arp_resolve(&dp->io.arp, hop, now_ns, &mac, &request) != 0) {
		if (hop != 0 && request)
			arp_request(dp, hop);
		dp_count(dp, DP_C_TX_ARP_MISS, 1);
		rte_pktmbuf_free(m);
		return;
	}
	if (request)
		arp_request(dp, hop); /* refreshing a stale entry while still using it */
	uint8_t *hdr = (uint8_t *)rte_pktmbuf_prepend(m, DP_HDRS_LEN);
	if (hdr == NULL) {
		dp_count(dp, DP_C_TX_TOO_BIG, 1);
		rte_pktmbuf_free(m);
		return;
	}
	dp_udp_encap(hdr, &dp->host, &mac, dst, meta->dst.port_be, (uint16_t)len, dp->io.ip_id++);
	tx_push(dp, m);
}

static uint32_t
tx_drain(struct dp *dp, uint64_t now_ns)
{
	void *objs[DP_BURST_MAX];
	uint32_t work = 0;

	for (uint32_t q = 0; q < dp->txq_count; q++) {
		unsigned n = rte_ring_sc_dequeue_burst(dp->txq[q].ring, objs, dp->conf.burst, NULL);
		for (unsigned i = 0; i < n; i++)
			tx_frame(dp, (struct rte_mbuf *)objs[i], now_ns);
		dp_count(dp, DP_C_TX_FRAMES, n);
		work += n;
	}
	return work;
}

uint32_t
dp_io_do_work(void *arg, uint64_t now_ns)
{
	struct dp *dp = (struct dp *)arg;
	struct rte_mbuf *rx[DP_BURST_MAX];
	uint16_t n = 0;

	if (dp->rx_gate == NULL || dp->rx_gate(dp->rx_gate_arg))
		n = rte_eth_rx_burst(dp->port_id, 0, rx, dp->conf.burst);
	else
		dp_count(dp, DP_C_RX_GATED, 1);
	uint32_t work = n;

	if (n > 0) {
		uint64_t tsc = rte_rdtsc();
		dp_count(dp, DP_C_RX_PKTS, n);
		for (uint16_t i = 0; i < n; i++) {
			if (i + 1 < n)
				rte_prefetch0(rte_pktmbuf_mtod(rx[i + 1], void *));
			rx_one(dp, rx[i], now_ns, tsc);
		}
		/* The lcores that got frames: once per burst each, after every enqueue. */
		for (uint32_t i = 0; i < dp->io.rung_count; i++)
			dp_bell_ring(dp->io.rung[i]);
		dp->io.rung_count = 0;
	}
	work += tx_drain(dp, now_ns);
	tx_flush(dp);
	dp_count(dp, DP_C_IO_CYCLES, 1);
	return work;
}

uint32_t
dp_io_drain(struct dp *dp)
{
	uint32_t total = 0, work;

	/* Bounded: producers have stopped, so each queue empties within size/burst rounds. */
	for (uint32_t round = 0; round < DP_DRAIN_ROUNDS_MAX; round++) {
		work = tx_drain(dp, dp_clock_ns());
		tx_flush(dp);
		total += work;
		if (work == 0)
			break;
	}
	return total;
}

void
dp_rx_gate_set(struct dp *dp, dp_rx_gate_fn *gate, void *arg)
{
	CHECK(!dp->port_started); /* the io lcore reads these without synchronisation */
	dp->rx_gate = gate;
	dp->rx_gate_arg = arg;
}

struct rte_mbuf *
dp_tx_alloc(struct dp *dp)
{
	return rte_pktmbuf_alloc(dp->pool);
}

void
dp_tx_reset(struct rte_mbuf *m)
{
	rte_pktmbuf_reset_headroom(m);
	m->data_len = 0;
	m->pkt_len = 0;
}

void *
dp_tx_buf(struct rte_mbuf *m, uint32_t *cap)
{
	uint8_t *buf = rte_pktmbuf_mtod(m, uint8_t *);
	DCHECK(((uintptr_t)buf & 7) == 0);
	DCHECK(rte_pktmbuf_headroom(m) >= DP_HDRS_LEN);
	*cap = (uint32_t)(m->buf_len - m->data_off);
	return buf;
}

void
dp_tx_prepare(struct rte_mbuf *m, uint32_t len, const struct dp_addr *dst)
{
	CHECK(len <= (uint32_t)(m->buf_len - m->data_off));
	CHECK(dst->ip_be != 0 && dst->port_be != 0);
	m->data_len = (uint16_t)len;
	m->pkt_len = len;
	dp_meta(m)->dst = *dst;
}

uint32_t
dp_tx_send_burst(struct dp_txq *txq, struct rte_mbuf **ms, uint32_t n)
{
	uint32_t queued = rte_ring_sp_enqueue_burst(txq->ring, (void **)ms, n, NULL);
	if (queued < n)
		__atomic_store_n(&txq->full, txq->full + (n - queued), __ATOMIC_RELAXED);
	if (queued > 0)
		dp_bell_ring(txq->dp->io_bell);
	return queued;
}

int
dp_peer_addr(const struct dp *dp, uint32_t node_id, struct dp_addr *addr)
{
	for (uint32_t i = 0; i < dp->conf.peer_count; i++) {
		if (dp->conf.peers[i].node_id == node_id) {
			addr->ip_be = dp->conf.peers[i].ip_be;
			addr->port_be = dp->conf.peers[i].port_be;
			addr->reserved = 0;
			return 0;
		}
	}
	return -ENOENT;
}

int
dp_tx_send(struct dp_txq *txq, struct rte_mbuf *m, uint32_t len, const struct dp_addr *dst)
{
	dp_tx_prepare(m, len, dst);
	if (rte_ring_sp_enqueue(txq->ring, m) != 0) {
		__atomic_store_n(&txq->full, txq->full + 1, __ATOMIC_RELAXED);
		rte_pktmbuf_free(m);
		return -ENOBUFS;
	}
	dp_bell_ring(txq->dp->io_bell);
	return 0;
}

void
dp_rx_msgs(struct rte_mbuf *m, const uint8_t **msgs, uint32_t *len)
{
	const struct wire_frame_hdr *h = rte_pktmbuf_mtod(m, const struct wire_frame_hdr *);
	uint32_t mac = (h->flags & WIRE_FRAME_F_MAC) ? WIRE_MAC_SIZE : 0;

	*msgs = (const uint8_t *)(h + 1);
	*len = h->length - (uint32_t)sizeof(*h) - mac;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The io lcores: rx burst → parse → answer ARP/ICMP in place, or validate the wire frame and
 * enqueue it on its route's ring; then drain every tx queue, encapsulate, resolve the next
 * hop and tx burst. Bounded: one rx burst and at most one burst per tx queue per cycle.
 * Nothing here blocks: a full ring or port queue drops and counts.
 *
 * With [port] rx_queues = N there are N io lcores, one per rx queue and one per tx queue of
 * the port (the port spreads flows over the rx queues: RSS, or net_af_packet's fanout). Each
 * decodes, MAC-checks and routes the frames of its rx queue — the per-byte work, which grows
 * with the traffic — and drains its share of the producers' tx queues (dp_txq.io_k, round
 * robin) onto its tx queue: encapsulation, checksums, the burst. The first (k = 0) alone
 * writes the ARP table: the others read it entry by entry (dp_arp_peek, seqlocked) and hand
 * it a frame whose next hop is not resolved and fresh (dp_tx_slow; it resolves, asks, sends),
 * and the packets that are not frames for us (ARP, ICMP echo: answered in place, then sent
 * by it) on the MP/SC ring dp_slow. A sender's frames arrive on one queue, so they reach
 * their shard ring in order; the shard rings are multi-producer then. A producer's frames
 * leave through one io lcore, in order (but one handed to the first may pass them).
 */
#include <errno.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_prefetch.h>

#include "common/check.h"
#include "dp_int.h"

static void
tx_flush(struct dp_io *io)
{
	struct dp *dp = io->dp;
	uint16_t n = io->tx_count;
	uint64_t bytes = 0;

	if (n == 0)
		return;
	for (uint16_t i = 0; i < n; i++)
		bytes += io->tx[i]->pkt_len;
	uint16_t sent = rte_eth_tx_burst(dp->port_id, io->k, io->tx, n);
	for (uint16_t i = sent; i < n; i++)
		bytes -= io->tx[i]->pkt_len;
	if (sent < n) {
		dp_count(io, DP_C_TX_PORT_FULL, n - sent);
		rte_pktmbuf_free_bulk(&io->tx[sent], n - sent);
	}
	dp_count(io, DP_C_TX_PKTS, sent);
	dp_count(io, DP_C_TX_BYTES, bytes);
	io->tx_count = 0;
}

static inline void
tx_push(struct dp_io *io, struct rte_mbuf *m)
{
	if (io->tx_count == RTE_DIM(io->tx))
		tx_flush(io);
	io->tx[io->tx_count++] = m;
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
arp_request(struct dp_io *io, uint32_t ip_be)
{
	struct dp *dp = io->dp;
	struct rte_mbuf *m = rte_pktmbuf_alloc(dp->pool);
	if (m == NULL) {
		dp_count(io, DP_C_TX_NOMBUF, 1);
		return;
	}
	uint8_t *buf = (uint8_t *)rte_pktmbuf_append(m, DP_ARP_FRAME_LEN);
	CHECK(buf != NULL); /* a fresh mbuf always has 60 bytes of tailroom */
	dp_arp_request_build(buf, &dp->host, ip_be);
	dp_count(io, DP_C_ARP_REQUESTED, 1);
	tx_push(io, m);
}

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

/* A validated UDP payload of the rx burst: aligned now; its MAC is computed with the
 * burst's others (frames_mac), then it is decoded and routed (frame_input). */
struct rx_frame {
	struct rte_mbuf *m;
	struct dp_pkt p;
	const struct wire_key *key;  /* the MAC to check here under it (NULL: none) */
	struct wire_key sess_key;    /* a session frame's key, as the gateway published it */
	bool session;                /* a client session's frame */
	uint8_t tag[WIRE_MAC_SIZE];  /* the MAC computed under key */
};

static void
frame_prep(struct dp_io *io, struct rte_mbuf *m, const struct dp_pkt *p, struct rx_frame *f)
{
	struct dp *dp = io->dp;
	uint8_t *base = rte_pktmbuf_mtod(m, uint8_t *);
	uint8_t *payload = base + p->payload_off;
	uint8_t *frame = RTE_PTR_ALIGN_FLOOR(payload, 8);
	uint32_t len = p->payload_len;

	/* wire_frame_decode needs an 8-byte aligned frame. The payload sits 42 bytes into the
	 * packet (2 mod 8), so slide it down over the headers we have finished with. */
	DCHECK(frame >= base);
	if (frame != payload)
		memmove(frame, payload, len);
	m->data_off = (uint16_t)(frame - (uint8_t *)m->buf_addr);
	m->data_len = p->payload_len;
	m->pkt_len = p->payload_len;
	f->m = m;
	f->p = *p;
	f->key = NULL;
	/* A client session's frame is MAC'd under its session's key, which the gateway
	 * publishes (dp->sess_key). A peer's never is (wire_frame_decode refuses it). */
	uint8_t flags = wire_frame_flags(frame, len);
	f->session = (flags & WIRE_FRAME_F_SESSION) != 0 && !is_peer(dp, p->src.ip_be);
	/* A MAC to compute only for a frame that claims one, of its stated length and magic
	 * (what is refused before the MAC stays as cheap as it was). */
	struct wire_frame_hdr fh;
	if (len < sizeof(fh) + WIRE_MAC_SIZE || (flags & WIRE_FRAME_F_MAC) == 0)
		return;
	memcpy(&fh, frame, sizeof(fh));
	if (fh.magic != WIRE_MAGIC || fh.length != len)
		return;
	if (f->session) {
		/* The session id is the frame's sender (the decoder holds SESSION_HDR to it). */
		if (dp->sess_key != NULL && dp->sess_key(dp->sess_key_arg, fh.sender_id, &f->sess_key))
			f->key = &f->sess_key;
		return;
	}
	const struct wire_key *k = dp_key_for(dp, &p->src);
	if (k != NULL && (k->k0 | k->k1) != 0)
		f->key = k;
}

/* The burst's MACs, four frames at a time through SipHash's rounds (AVX2). */
static void
frames_mac(struct rx_frame *fr, uint32_t n)
{
	const struct wire_key *keys[DP_BURST_MAX];
	const void *data[DP_BURST_MAX];
	size_t lens[DP_BURST_MAX];
	uint8_t *out[DP_BURST_MAX];
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (fr[i].key == NULL)
			continue;
		keys[k] = fr[i].key;
		data[k] = rte_pktmbuf_mtod(fr[i].m, const uint8_t *);
		lens[k] = fr[i].p.payload_len - WIRE_MAC_SIZE;
		out[k] = fr[i].tag;
		k++;
	}
	if (k > 0)
		wire_siphash128_multi(keys, data, lens, out, k);
}

/* Decode the frame (its MAC, if it was computed, is fr->tag) and route it. */
static void
frame_input(struct dp_io *io, struct rx_frame *f, uint64_t tsc)
{
	struct dp *dp = io->dp;
	struct rte_mbuf *m = f->m;
	const struct dp_pkt *p = &f->p;
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);
	uint32_t count = 0, sender = 0;
	enum wire_err err;
	bool session = f->session;
	bool mac_ok = f->key != NULL && wire_frame_tag_ok(frame, p->payload_len, f->tag);
	if (session)
		err = wire_session_frame_decode(frame, p->payload_len, io->msgs,
						WIRE_FRAME_MSGS_MAX, &count, &sender);
	else if (f->key != NULL)
		err = wire_frame_decode_checked(frame, p->payload_len, f->key, mac_ok, io->msgs,
						WIRE_FRAME_MSGS_MAX, &count, &sender);
	else
		err = wire_frame_decode(frame, p->payload_len, dp_key_for(dp, &p->src), io->msgs,
					WIRE_FRAME_MSGS_MAX, &count, &sender);
	if (err != WIRE_E_OK) {
		DCHECK((unsigned)err < WIRE_E_COUNT);
		__atomic_store_n(&io->frame_err[err], io->frame_err[err] + 1, __ATOMIC_RELAXED);
		dp_count(io, DP_C_FRAME_BAD, 1);
		rte_pktmbuf_free(m);
		return;
	}
	DCHECK(count >= 1 && count <= WIRE_FRAME_MSGS_MAX);
	dp_count(io, DP_C_FRAME_OK, 1);
	dp_count(io, DP_C_FRAME_MSGS, count);
	/* A rolling upgrade in progress (docs/upgrade.md): peers one wire minor away, which the
	 * decoder took (a minor two away is frame_err.bad_version). */
	uint8_t minor = wire_frame_minor(frame, p->payload_len);
	if (minor != WIRE_VERSION_MINOR)
		dp_count(io, minor == WIRE_VERSION_MINOR + 1 ? DP_C_FRAME_MINOR_NEWER
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
			dp_count(io, DP_C_FRAME_MIXED, 1);
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
		dp_count(io, DP_C_FRAME_NO_ROUTE, 1);
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
	/* A session frame's MAC, checked here under the key the gateway published for its
	 * session (the per-byte work leaves the gateway's lcore; it compares the key and skips
	 * its own check when it is the session's). A frame that does not verify goes on
	 * unproven: the gateway checks it and counts the refusal as before. */
	meta->mac_proven = 0; /* seal_key is read only when set */
	if (session && f->key != NULL) {
		/* Its MAC was computed with the burst's (frames_mac), under the key published
		 * for the frame's sender, which the decoder held SESSION_HDR's session id to. */
		if (mac_ok) {
			meta->seal_key = f->sess_key;
			meta->mac_proven = 1;
			dp_count(io, DP_C_SESSION_MAC_PROVEN, 1);
		} else {
			dp_count(io, DP_C_SESSION_MAC_UNPROVEN, 1);
		}
	}
	/* Single- or multi-producer as the ring was made (dp_ring_create: MP with several io
	 * lcores). A sender's frames come in on one queue, so they stay in order. */
	if (rte_ring_enqueue(ring, m) != 0) {
		dp_count(io, DP_C_FRAME_RING_FULL, 1);
		rte_pktmbuf_free(m);
		return;
	}
	dp_count(io, DP_C_FRAME_ROUTED, 1);
	if (bell != NULL)
		bell_note(io, bell);
}

/* What a parse says to do with a packet that is not a frame for us, on io lcore 0: learn,
 * then answer (REPLY) or drop. */
static void
slow_act(struct dp_io *io, struct rte_mbuf *m, enum dp_action act, uint8_t learn,
	 uint32_t learn_ip_be, const struct rte_ether_addr *learn_mac, uint64_t now_ns)
{
	DCHECK(io->k == 0);
	if (learn != 0 && dp_arp_learn(&io->dp->arp, learn_ip_be, learn_mac, learn == 2, now_ns))
		dp_count(io, DP_C_ARP_LEARNED, 1);
	if (act == DP_ACT_REPLY)
		tx_push(io, m);
	else
		rte_pktmbuf_free(m);
}

/* One received packet: true when it is a frame, prepared in *f for the burst's MACs and
 * frame_input; anything else is done with here. */
static bool
rx_one(struct dp_io *io, struct rte_mbuf *m, uint64_t now_ns, struct rx_frame *f)
{
	struct dp_pkt p;
	uint64_t ol = m->ol_flags;

	dp_count(io, DP_C_RX_BYTES, m->pkt_len);
	if (m->nb_segs != 1) {
		dp_count(io, DP_C_RX_MULTISEG, 1);
		rte_pktmbuf_free(m);
		return false;
	}
	if ((ol & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD) {
		dp_count(io, DP_C_IP_BAD_CSUM, 1);
		rte_pktmbuf_free(m);
		return false;
	}
	if ((ol & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD) {
		dp_count(io, DP_C_UDP_BAD_CSUM, 1);
		rte_pktmbuf_free(m);
		return false;
	}
	dp_pkt_input(&io->dp->host, rte_pktmbuf_mtod(m, uint8_t *), m->data_len,
		     (ol & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD,
		     (ol & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD, &p);
	if (p.counter < DP_C_COUNT)
		dp_count(io, p.counter, 1);
	uint8_t learn = p.learn ? (p.learn_create ? 2 : 1) : 0;
	if (p.action == DP_ACT_FRAME) {
		/* The ARP table is io 0's: a frame on another queue refreshes nothing (its entry
		 * is re-resolved when it expires, the old MAC used meanwhile). */
		if (learn != 0 && io->k == 0 &&
		    dp_arp_learn(&io->dp->arp, p.learn_ip_be, &p.learn_mac, learn == 2, now_ns))
			dp_count(io, DP_C_ARP_LEARNED, 1);
		frame_prep(io, m, &p, f);
		return true;
	}
	if (io->k == 0) {
		slow_act(io, m, p.action, learn, p.learn_ip_be, &p.learn_mac, now_ns);
		return false;
	}
	if (p.action == DP_ACT_DROP && learn == 0) {
		rte_pktmbuf_free(m);
		return false;
	}
	/* ARP and ICMP answers and what they teach go through io 0, which owns the table and
	 * the port's tx queue. */
	struct dp_meta *meta = dp_meta(m);
	meta->slow_action = (uint8_t)p.action;
	meta->slow_learn = learn;
	meta->slow_learn_ip_be = p.learn_ip_be;
	rte_ether_addr_copy(&p.learn_mac, &meta->src_mac);
	if (rte_ring_mp_enqueue(io->dp->slow, m) != 0) {
		dp_count(io, DP_C_SLOW_RING_FULL, 1);
		rte_pktmbuf_free(m);
	}
	return false;
}

/* io 0: what the other io lcores handed over. */
static uint32_t
slow_drain(struct dp_io *io, uint64_t now_ns)
{
	void *objs[DP_BURST_MAX];
	if (io->dp->slow == NULL)
		return 0;
	unsigned n = rte_ring_sc_dequeue_burst(io->dp->slow, objs, io->dp->conf.burst, NULL);
	for (unsigned i = 0; i < n; i++) {
		struct rte_mbuf *m = objs[i];
		const struct dp_meta *meta = dp_meta(m);
		struct rte_ether_addr mac;
		rte_ether_addr_copy(&meta->src_mac, &mac);
		slow_act(io, m, (enum dp_action)meta->slow_action, meta->slow_learn,
			 meta->slow_learn_ip_be, &mac, now_ns);
	}
	return n;
}

static void
tx_frame(struct dp_io *io, struct rte_mbuf *m, uint64_t now_ns)
{
	struct dp *dp = io->dp;
	const struct dp_meta *meta = dp_meta(m);
	uint32_t len = m->data_len;
	uint32_t dst = meta->dst.ip_be;
	struct rte_ether_addr mac;
	bool request;

	if (m->nb_segs != 1 || len + (DP_HDRS_LEN - RTE_ETHER_HDR_LEN) > dp->conf.mtu) {
		dp_count(io, DP_C_TX_TOO_BIG, 1);
		rte_pktmbuf_free(m);
		return;
	}
	uint32_t hop = dp_host_onlink(&dp->host, dst) ? dst : dp->conf.gateway_be;
	if (io->k != 0) {
		/* The table is the first io lcore's: a hop it has not resolved (or that needs
		 * resolving again) is its business — the frame goes to it, not to the wire. */
		if (hop == 0 || dp_arp_peek(&dp->arp, hop, now_ns, &mac) != 0) {
			if (rte_ring_mp_enqueue(dp->tx_slow, m) != 0) {
				dp_count(io, DP_C_TX_SLOW_FULL, 1);
				rte_pktmbuf_free(m);
				return;
			}
			dp_count(io, DP_C_TX_HANDED, 1);
			dp_bell_ring(dp->io_bell[0]);
			return;
		}
		request = false;
	} else if (hop == 0 || dp_arp_resolve(&dp->arp, hop, now_ns, &mac, &request) != 0) {
		if (hop != 0 && request)
			arp_request(io, hop);
		dp_count(io, DP_C_TX_ARP_MISS, 1);
		rte_pktmbuf_free(m);
		return;
	}
	if (request)
		arp_request(io, hop); /* refreshing a stale entry while still using it */
	uint8_t *hdr = (uint8_t *)rte_pktmbuf_prepend(m, DP_HDRS_LEN);
	if (hdr == NULL) {
		dp_count(io, DP_C_TX_TOO_BIG, 1);
		rte_pktmbuf_free(m);
		return;
	}
	dp_udp_encap(hdr, &dp->host, &mac, dst, meta->dst.port_be, (uint16_t)len, io->ip_id++,
		     dp->tx_csum_offload);
	if (dp->tx_csum_offload) {
		m->l2_len = RTE_ETHER_HDR_LEN;
		m->l3_len = sizeof(struct rte_ipv4_hdr);
		m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM;
	}
	tx_push(io, m);
}

/* The tx queues io drains (all of them: at shutdown, from main), and on the first io lcore
 * the frames the others handed it. */
static uint32_t
tx_drain(struct dp_io *io, uint64_t now_ns, bool all)
{
	struct dp *dp = io->dp;
	void *objs[DP_BURST_MAX];
	uint32_t work = 0;

	for (uint32_t q = 0; q < dp->txq_count; q++) {
		if (dp->txq[q].io_k != io->k && !all)
			continue;
		unsigned n = rte_ring_sc_dequeue_burst(dp->txq[q].ring, objs, dp->conf.burst, NULL);
		for (unsigned i = 0; i < n; i++)
			tx_frame(io, (struct rte_mbuf *)objs[i], now_ns);
		dp_count(io, DP_C_TX_FRAMES, n);
		work += n;
	}
	if (io->k == 0 && dp->tx_slow != NULL) {
		unsigned n = rte_ring_sc_dequeue_burst(dp->tx_slow, objs, dp->conf.burst, NULL);
		for (unsigned i = 0; i < n; i++)
			tx_frame(io, (struct rte_mbuf *)objs[i], now_ns);
		work += n;
	}
	return work;
}

uint16_t
dp_io_count(const struct dp *dp)
{
	return dp->io_count;
}

struct dp_io *
dp_io_get(struct dp *dp, uint16_t k)
{
	CHECK(k < dp->io_count);
	return &dp->io[k];
}

uint32_t
dp_io_do_work(void *arg, uint64_t now_ns)
{
	struct dp_io *io = (struct dp_io *)arg;
	struct dp *dp = io->dp;
	struct rte_mbuf *rx[DP_BURST_MAX];
	uint16_t n = 0;

	if (dp->rx_gate == NULL || dp->rx_gate(dp->rx_gate_arg))
		n = rte_eth_rx_burst(dp->port_id, io->k, rx, dp->conf.burst);
	else
		dp_count(io, DP_C_RX_GATED, 1);
	uint32_t work = n;

	if (n > 0) {
		uint64_t tsc = rte_rdtsc();
		dp_count(io, DP_C_RX_PKTS, n);
		/* Three passes: parse every packet (frames aligned, others done with), the
		 * frames' MACs together, then each frame decoded and routed in arrival order. */
		struct rx_frame fr[DP_BURST_MAX];
		uint32_t nf = 0;
		for (uint16_t i = 0; i < n; i++) {
			if (i + 1 < n)
				rte_prefetch0(rte_pktmbuf_mtod(rx[i + 1], void *));
			if (rx_one(io, rx[i], now_ns, &fr[nf]))
				nf++;
		}
		frames_mac(fr, nf);
		for (uint32_t i = 0; i < nf; i++)
			frame_input(io, &fr[i], tsc);
		/* The lcores that got frames: once per burst each, after every enqueue. */
		for (uint32_t i = 0; i < io->rung_count; i++)
			dp_bell_ring(io->rung[i]);
		io->rung_count = 0;
	}
	if (io->k == 0)
		work += slow_drain(io, now_ns);
	work += tx_drain(io, now_ns, false);
	tx_flush(io);
	dp_count(io, DP_C_IO_CYCLES, 1);
	return work;
}

uint32_t
dp_io_drain(struct dp *dp)
{
	struct dp_io *io = &dp->io[0];
	uint32_t total = 0, work;

	/* Every io lcore has stopped: what the others still hold goes out on their queues, and
	 * every tx queue is drained here, through the first's path (it resolves). Bounded:
	 * producers have stopped, so each queue empties within size/burst rounds. */
	for (uint16_t k = 1; k < dp->io_count; k++)
		tx_flush(&dp->io[k]);
	for (uint32_t round = 0; round < DP_DRAIN_ROUNDS_MAX; round++) {
		work = tx_drain(io, dp_clock_ns(), true);
		tx_flush(io);
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
		dp_bell_ring(txq->dp->io_bell[txq->io_k]);
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
	dp_bell_ring(txq->dp->io_bell[txq->io_k]);
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

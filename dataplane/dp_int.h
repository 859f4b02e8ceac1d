/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Dataplane internals: the packet parsers (pure functions over byte buffers, so the unit
 * tests need no EAL), the ARP table, and struct dp.
 */
#ifndef OMSD_DATAPLANE_DP_INT_H
#define OMSD_DATAPLANE_DP_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_arp.h>
#include <rte_common.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_udp.h>

#include "dp.h"

#define DP_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, dp_logtype, "dp: " fmt "\n", ##__VA_ARGS__)

/* Ethernet + IPv4 (no options) + UDP: what dp_udp_encap prepends. */
#define DP_HDRS_LEN (RTE_ETHER_HDR_LEN + sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr))
#define DP_ARP_FRAME_LEN 60       /* ARP requests are padded to the Ethernet minimum */
#define DP_ARP_RETRY_NS (200ull * 1000 * 1000) /* at most one request per next hop per 200 ms */
#define DP_ARP_PROBE_MAX 16       /* linear-probe window of the ARP table */
#define DP_IP_TTL 64
#define DP_DRAIN_ROUNDS_MAX 1024  /* dp_io_drain: tx-queue rounds at shutdown */

/* ---------------------------------------------------------------------------------------
 * Parsers (dp_ip.c, dp_arp.c): pure over one contiguous packet.
 * ------------------------------------------------------------------------------------- */

/* What the host is, for the parsers. */
struct dp_host {
	uint32_t ip_be;               /* our address */
	uint32_t mask_be;             /* on-link subnet mask */
	struct rte_ether_addr mac;    /* our MAC */
	uint16_t udp_port_be;         /* the port we serve */
};

enum dp_action {
	DP_ACT_DROP = 0,  /* count `counter` and free */
	DP_ACT_REPLY = 1, /* the packet was rewritten in place into a reply of the same length */
	DP_ACT_FRAME = 2, /* a UDP datagram for us: payload at payload_off, payload_len bytes */
};

struct dp_pkt {
	enum dp_action action;        /* what to do with the packet */
	enum dp_counter counter;      /* the counter to bump for it */
	uint16_t payload_off;         /* FRAME: UDP payload offset */
	uint16_t payload_len;         /* FRAME: UDP payload length */
	struct dp_addr src;           /* FRAME: source IPv4/UDP */
	struct rte_ether_addr src_mac;/* FRAME: Ethernet source */
	bool learn;                   /* learn learn_ip → learn_mac in the ARP table */
	bool learn_create;            /* ...creating an entry (else refresh an existing one) */
	uint32_t learn_ip_be;
	struct rte_ether_addr learn_mac;
};

static inline bool
dp_host_onlink(const struct dp_host *h, uint32_t ip_be)
{
	return ((ip_be ^ h->ip_be) & h->mask_be) == 0;
}

/* Parse one Ethernet frame of len bytes: ARP and ICMP echo are answered in place (REPLY),
 * UDP to our port is returned as FRAME, everything else is a DROP with its cause.
 * Checksums are verified in software unless hw says they are good (l3_ok, l4_ok). */
void dp_pkt_input(const struct dp_host *h, uint8_t *pkt, uint32_t len, bool l3_ok, bool l4_ok,
		  struct dp_pkt *out);
/* ARP part of dp_pkt_input (arp points after the Ethernet header). */
void dp_arp_input(const struct dp_host *h, uint8_t *pkt, uint32_t len, struct dp_pkt *out);

/* Write Ethernet/IPv4/UDP headers in the DP_HDRS_LEN bytes at hdr; payload_len bytes of
 * payload follow them contiguously (the UDP checksum covers it). csum_offload: the port
 * computes both checksums (RTE_ETH_TX_OFFLOAD_IPV4_CKSUM and _UDP_CKSUM, the mbuf flagged
 * by the caller): the IP one is left 0 and the UDP field holds the pseudo-header sum. */
void dp_udp_encap(uint8_t *hdr, const struct dp_host *h, const struct rte_ether_addr *dst_mac,
		  uint32_t dst_ip_be, uint16_t dst_port_be, uint16_t payload_len, uint16_t ip_id,
		  bool csum_offload);
/* Write a broadcast ARP request for target_ip_be (DP_ARP_FRAME_LEN bytes). */
void dp_arp_request_build(uint8_t *buf, const struct dp_host *h, uint32_t target_ip_be);
/* One's-complement checksum helpers. */
uint16_t dp_ip_csum(const struct rte_ipv4_hdr *ip);

/* ---------------------------------------------------------------------------------------
 * ARP table (dp_arp.c): single writer (the first io lcore); the others read entries with
 * dp_arp_peek (each entry seqlocked).
 * ------------------------------------------------------------------------------------- */
enum dp_arp_state {
	DP_ARP_FREE = 0,
	DP_ARP_INCOMPLETE = 1, /* requested, no answer yet */
	DP_ARP_DYNAMIC = 2,    /* learned; expires */
	DP_ARP_STATIC = 3,     /* configured; never changes */
};

struct dp_arp_entry {
	uint32_t seq;                /* odd while the writer changes the entry (dp_arp_peek) */
	uint32_t ip_be;              /* key */
	uint8_t state;               /* enum dp_arp_state */
	struct rte_ether_addr mac;   /* resolved MAC (DYNAMIC, STATIC) */
	uint64_t updated_ns;         /* last learned */
	uint64_t requested_ns;       /* last request sent */
};

struct dp_arp_table {
	struct dp_arp_entry e[DP_ARP_MAX];
	uint64_t timeout_ns;         /* DYNAMIC entries older than this are re-resolved */
};

void dp_arp_table_init(struct dp_arp_table *t, uint64_t timeout_ns);
/* 0, or -ENOSPC when the probe window holds only static entries. */
int dp_arp_static_add(struct dp_arp_table *t, uint32_t ip_be, const struct rte_ether_addr *mac);
/* Learn ip → mac. create: make an entry if none exists. Returns true if an entry changed. */
bool dp_arp_learn(struct dp_arp_table *t, uint32_t ip_be, const struct rte_ether_addr *mac,
		  bool create, uint64_t now_ns);
/* Resolve ip_be. 0 with *mac set, or -ENOENT; then *request says whether to send an ARP
 * request now (rate limited per entry, the entry is marked as requested). */
int dp_arp_resolve(struct dp_arp_table *t, uint32_t ip_be, uint64_t now_ns,
		   struct rte_ether_addr *mac, bool *request);
/* Any thread, while the writer runs: ip_be's MAC when its entry is static or learnt within
 * the timeout (0), else -ENOENT (unknown, being resolved, stale: the writer's business).
 * Never changes the table. */
int dp_arp_peek(const struct dp_arp_table *t, uint32_t ip_be, uint64_t now_ns,
		struct rte_ether_addr *mac);

/* ---------------------------------------------------------------------------------------
 * struct dp.
 * ------------------------------------------------------------------------------------- */
struct dp_txq {
	struct rte_ring *ring;        /* SP (owner lcore) / SC (io lcore io_k) */
	struct dp *dp;                /* back pointer */
	uint16_t io_k;                /* the io lcore that drains it, onto its port tx queue */
	uint64_t full;                /* frames dropped on a full ring (owner writes) */
	char name[DP_NAME_MAX];
} __rte_cache_aligned;

/* Distinct bells one rx burst may ring (a node's shard lcores and its gateway's); a burst
 * that reaches more rings the rest at once. */
#define DP_BELLS_PENDING 16

/* One io lcore's state: written only by that lcore. Each drains its share of the tx queues
 * onto the port's tx queue k; the first (k = 0) also owns the ARP table and sends what the
 * others cannot resolve (dp->tx_slow). */
struct dp_io {
	struct dp *dp;                            /* back pointer */
	uint16_t k;                               /* its index, and its rx queue */
	uint64_t c[DP_C_COUNT];                   /* counters (summed over the io lcores) */
	uint64_t frame_err[WIRE_E_COUNT];         /* refused frames per cause */
	struct rte_mbuf *tx[DP_BURST_MAX * 2];    /* packets waiting for tx burst */
	uint16_t tx_count;                        /* in tx[] */
	uint16_t ip_id;                           /* IPv4 identification (its own) */
	const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX]; /* decode scratch */
	struct dp_bell *rung[DP_BELLS_PENDING];   /* bells to ring after this rx burst */
	uint32_t rung_count;
} __rte_cache_aligned;

#define DP_RINGS_MAX (DP_CLASS_COUNT * DP_SHARDS_MAX)

struct dp {
	struct dp_conf conf;                       /* as given */
	struct dp_host host;                       /* parser view */
	uint16_t port_id;                          /* the ethdev */
	bool port_configured;                      /* configured (close at destroy) */
	bool port_started;                         /* started (stop at dp_stop) */
	struct rte_mempool *pool;                  /* every mbuf */
	const struct wire_key *peer_key;           /* NULL when zero */
	const struct wire_key *client_key;         /* NULL when zero */
	struct rte_ring *route[DP_CLASS_COUNT][DP_SHARDS_MAX]; /* per-shard routes */
	struct rte_ring *route_any[DP_CLASS_COUNT];            /* class defaults */
	struct dp_bell *route_bell[DP_CLASS_COUNT][DP_SHARDS_MAX]; /* their consumers' bells */
	struct dp_bell *route_any_bell[DP_CLASS_COUNT];
	struct rte_ring *rings[DP_RINGS_MAX];      /* rings dp created (freed at destroy) */
	struct dp_bell *ring_bell[DP_RINGS_MAX];   /* each one's consumer's bell, or NULL */
	struct dp_bell *io_bell[DP_IO_MAX];        /* io lcore k's: rung by its tx producers */
	uint32_t ring_count;
	struct dp_txq txq[DP_TXQ_MAX];             /* producer queues */
	uint32_t txq_count;
	bool tx_csum_offload;                      /* the port sums IPv4 and UDP on tx */
	struct dp_arp_table arp;                   /* neighbours: written by io lcore 0 */
	struct dp_io io[DP_IO_MAX];                /* io lcore state, one per rx queue */
	uint16_t io_count;                         /* conf.rx_queues */
	struct rte_ring *slow;                     /* io lcores k > 0 → io 0: packets that are
						    * not frames for us (MP/SC); NULL: one */
	struct rte_ring *tx_slow;                  /* io lcores k > 0 → io 0: frames to send
						    * whose next hop they could not resolve
						    * (MP/SC); NULL: one io lcore */
	dp_session_key_fn *sess_key;               /* NULL: session MACs checked by the gateway */
	void *sess_key_arg;
	dp_rx_gate_fn *rx_gate;                    /* NULL: poll rx every cycle */
	void *rx_gate_arg;                         /* its argument */
};

static inline void
dp_count(struct dp_io *io, enum dp_counter c, uint64_t n)
{
	/* Single writer (the io lcore); relaxed so the main lcore's reads are not torn. */
	__atomic_store_n(&io->c[c], io->c[c] + n, __ATOMIC_RELAXED);
}

#endif

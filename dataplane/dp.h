/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The omsd dataplane: one DPDK port, Ethernet/ARP/IPv4/UDP/ICMP, wire frames, rings between
 * the io lcore and the lcores that consume and produce frames (ARCHITECTURE.md §3, §8).
 *
 *  NIC RX ─▶ io lcore: parse L2/L3/L4, answer ARP and ICMP echo, validate the wire frame
 *            (MAC included), classify it by (class of its messages, destination shard) and
 *            enqueue the mbuf on the ring registered for that route.
 *  NIC TX ◀─ io lcore: drain every registered tx queue (one SP/SC ring per producer lcore),
 *            prepend Ethernet/IPv4/UDP, resolve the next hop with ARP, tx burst.
 *
 * A received frame stays in its mbuf. The io lcore moves the UDP payload to an 8-byte
 * aligned address inside the same mbuf (wire_frame_decode needs aligned frames), so
 * rte_pktmbuf_mtod(m) points at the validated frame header and m->data_len is its length.
 * The source address, sender id and message count travel in the mbuf's private area
 * (dp_meta). The consumer owns the mbuf and frees it (rte_pktmbuf_free) or sends it back.
 *
 * Lifecycle (single-threaded, from the main lcore, before/after the lcores run):
 *   dp_eal_init → dp_create → dp_ring_create / dp_route_add / dp_txq_create → dp_start →
 *   [lcores run dp_io_do_work and their own loops] → dp_stop → dp_destroy.
 * Nothing allocates after dp_start.
 */
#ifndef OMSD_DATAPLANE_DP_H
#define OMSD_DATAPLANE_DP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "common/wire.h"

#define DP_SHARDS_MAX 64         /* routable shard ids are 0..DP_SHARDS_MAX-1 */
#define DP_SHARD_ANY UINT16_MAX  /* dp_route_add: the class's default ring */
#define DP_TXQ_MAX 20            /* producer lcores that send through the io lcores */
#define DP_IO_MAX 8              /* rx queues, one io lcore each ([port] rx_queues) */
#define DP_ARP_MAX 256           /* ARP table entries (power of two) */
#define DP_PEERS_MAX 32          /* configured peer nodes (static ARP, peer key) */
#define DP_NAME_MAX 64

/* ---------------------------------------------------------------------------------------
 * Counters (STYLE.md §7): one X-macro with labels; single writer (the io lcore), read by
 * the main lcore with relaxed loads.
 * ------------------------------------------------------------------------------------- */
#define DP_COUNTERS(X)                                                                     \
	X(RX_PKTS, "rx_pkts", "packets received from the port")                            \
	X(RX_BYTES, "rx_bytes", "bytes received from the port")                            \
	X(RX_RUNT, "rx_runt", "shorter than an Ethernet header")                           \
	X(RX_NOT_US, "rx_not_us", "destination MAC neither ours nor broadcast")            \
	X(RX_ETHERTYPE, "rx_ethertype", "ethertype other than ARP or IPv4")                \
	X(RX_MULTISEG, "rx_multiseg", "chained mbuf (frame larger than the data room)")    \
	X(ARP_BAD, "arp_bad", "malformed or unsupported ARP packet")                       \
	X(ARP_NOT_US, "arp_not_us", "ARP for another address")                             \
	X(ARP_REPLIED, "arp_replied", "ARP requests for our address answered")             \
	X(ARP_REPLY_RX, "arp_reply_rx", "ARP replies to us received")                      \
	X(ARP_LEARNED, "arp_learned", "ARP entries created or refreshed")                  \
	X(ARP_REQUESTED, "arp_requested", "ARP requests sent to resolve a next hop")       \
	X(IP_BAD_HDR, "ip_bad_hdr", "IPv4 header malformed (version, length)")             \
	X(IP_BAD_CSUM, "ip_bad_csum", "IPv4 header checksum wrong")                        \
	X(IP_NOT_US, "ip_not_us", "IPv4 destination not our address")                      \
	X(IP_FRAGMENT, "ip_fragment", "IPv4 fragment (not reassembled)")                   \
	X(IP_PROTO, "ip_proto", "IP protocol other than ICMP or UDP")                      \
	X(ICMP_BAD, "icmp_bad", "ICMP malformed or checksum wrong")                        \
	X(ICMP_OTHER, "icmp_other", "ICMP other than echo request")                        \
	X(ICMP_ECHO_REPLIED, "icmp_echo_replied", "ICMP echo requests answered")           \
	X(UDP_BAD_HDR, "udp_bad_hdr", "UDP length inconsistent with IPv4")                 \
	X(UDP_BAD_CSUM, "udp_bad_csum", "UDP checksum wrong")                              \
	X(UDP_NO_CSUM, "udp_no_csum", "UDP without checksum (accepted)")                   \
	X(UDP_PORT, "udp_port", "UDP to a port we do not serve")                           \
	X(FRAME_BAD, "frame_bad", "wire frames refused (sum of frame_err_*)")              \
	X(FRAME_OK, "frame_ok", "wire frames accepted")                                    \
	X(FRAME_MSGS, "frame_msgs", "messages in accepted frames")                         \
	X(FRAME_MINOR_OLDER, "frame_minor_older", "frames taken from a minor one older")   \
	X(FRAME_MINOR_NEWER, "frame_minor_newer", "frames taken from a minor one newer")   \
	X(FRAME_MIXED, "frame_mixed", "frame whose messages go to different routes")       \
	X(FRAME_NO_ROUTE, "frame_no_route", "no ring registered for the frame's route")    \
	X(FRAME_RING_FULL, "frame_ring_full", "route ring full: frame dropped")            \
	X(FRAME_ROUTED, "frame_routed", "frames enqueued to a route ring")                 \
	X(TX_FRAMES, "tx_frames", "frames taken from tx queues")                           \
	X(TX_TOO_BIG, "tx_too_big", "frame larger than MTU or headroom missing")           \
	X(TX_ARP_MISS, "tx_arp_miss", "next hop unresolved: frame dropped, ARP sent")      \
	X(TX_NOMBUF, "tx_nombuf", "mbuf pool empty for a reply or ARP request")            \
	X(TX_PKTS, "tx_pkts", "packets handed to the port")                                \
	X(TX_BYTES, "tx_bytes", "bytes handed to the port")                                \
	X(TX_PORT_FULL, "tx_port_full", "port tx queue full: packet dropped")               \
	X(IO_CYCLES, "io_cycles", "io lcore duty cycles")                                  \
	X(RX_GATED, "rx_gated", "io cycles that skipped the rx poll (rx gate closed)")     \
	X(SLOW_RING_FULL, "slow_ring_full",                                                \
	  "ARP/ICMP packets dropped: the first io lcore's hand-over ring was full")          \
	X(TX_HANDED, "tx_handed",                                                          \
	  "frames another io lcore handed the first: next hop not resolved and fresh")       \
	X(TX_SLOW_FULL, "tx_slow_full",                                                    \
	  "frames dropped: the first io lcore's tx hand-over ring was full")                 \
	X(SESSION_MAC_PROVEN, "session_mac_proven",                                        \
	  "client session frames whose MAC an io lcore checked")                              \
	X(SESSION_MAC_UNPROVEN, "session_mac_unproven",                                    \
	  "session frames that failed the io lcore's MAC check (left to the gateway)")

enum dp_counter {
#define DP_COUNTER_ENUM(name, label, help) DP_C_##name,
	DP_COUNTERS(DP_COUNTER_ENUM)
#undef DP_COUNTER_ENUM
	DP_C_COUNT,
};

const char *dp_counter_label(enum dp_counter c);
const char *dp_counter_help(enum dp_counter c);

/* ---------------------------------------------------------------------------------------
 * Addresses and frame metadata.
 * ------------------------------------------------------------------------------------- */

/* An IPv4/UDP endpoint; both fields in network byte order. */
struct dp_addr {
	uint32_t ip_be;   /* IPv4 address, network order */
	uint16_t port_be; /* UDP port, network order */
	uint16_t reserved;
};

/* Private area of every mbuf from the dataplane pool. */
struct dp_meta {
	struct dp_addr src;        /* rx: who sent the frame */
	struct dp_addr dst;        /* tx: where the frame goes */
	struct rte_ether_addr src_mac; /* rx: Ethernet source (the last hop) */
	uint16_t msg_count;        /* rx: messages in the validated frame */
	uint32_t sender_id;        /* rx: frame header sender (node or session id) */
	uint16_t cls;              /* rx: enum dp_class the frame was routed by */
	uint16_t shard;            /* rx: destination shard of its messages */
	uint16_t frame_flags;      /* rx: the frame header's WIRE_FRAME_F_* (SESSION: a client
				    * session's frame, its MAC still to be checked by the
				    * gateway under the session key) */
	uint64_t rx_tsc;           /* rx: TSC when the io lcore took it off the port */
	struct wire_key seal_key;  /* tx: the MAC key of a frame the bridge lcore seals
				    * (app_seal.c; zero: a frame without a MAC), wiped once
				    * sealed */
	/* rx on an io lcore other than the first: a packet that is not a frame for us (ARP,
	 * ICMP echo), handed to the first io lcore, which owns the ARP table and the port's tx
	 * queue (dp_io.c): what to do with it and what to learn. */
	uint8_t mac_proven;        /* rx: a session frame whose MAC the io lcore checked under
				    * seal_key, the session's key as dp_session_key_set's lookup
				    * gave it (the gateway compares it with its own, then wipes) */
	uint8_t slow_action;       /* enum dp_action (dp_int.h) */
	uint8_t slow_learn;        /* 0: nothing, 1: refresh, 2: create — slow_learn_ip_be →
				    * src_mac */
	uint32_t slow_learn_ip_be;
};

static inline struct dp_meta *
dp_meta(struct rte_mbuf *m)
{
	return (struct dp_meta *)rte_mbuf_to_priv(m);
}

/* ---------------------------------------------------------------------------------------
 * Classification. Every message type has a class; a frame is routed by the class and the
 * destination shard (hdr.shard) of its messages. All messages of one frame must route the
 * same way (senders batch per destination); a mixed frame is dropped and counted.
 * ------------------------------------------------------------------------------------- */
enum dp_class {
	DP_CLASS_NONE = 0,    /* not accepted from the network (dropped, no route) */
	DP_CLASS_SHARD = 1,   /* Raft, admin, ME-bound requests: to the shard's lcore */
	DP_CLASS_GATEWAY = 2, /* client order entry: to the gateway role */
	DP_CLASS_BRIDGE = 3,  /* ME results and events for an OMS shard: to its bridge */
	DP_CLASS_CLIENT = 4,  /* acks, NAKs, reports addressed to a client-side consumer */
	DP_CLASS_COUNT,
};

const char *dp_class_name(enum dp_class cls);
/* Default class of a message type (a pure function of the type). */
enum dp_class dp_class_of_type(uint16_t type);
/* Class of one message: its type's, except a TRANSFER flagged WIRE_TRANSFER_F_ROUTE, which a
 * client sends to a gateway to be routed like an order. */
enum dp_class dp_class_of_msg(const struct wire_msg_hdr *msg);

/* ---------------------------------------------------------------------------------------
 * Idle back-off and duty cycle (dp_idle.c, dp_duty.c).
 * ------------------------------------------------------------------------------------- */
enum dp_idle_mode {
	DP_IDLE_BUSY = 0,  /* spin; production on an isolated core */
	DP_IDLE_PAUSE = 1, /* rte_pause() on every empty poll; still one core per lcore */
	DP_IDLE_SLEEP = 2, /* pause for spins empty polls, then sleep (doubling up to max) */
};

struct dp_idle_policy {
	enum dp_idle_mode mode;
	uint32_t spins;        /* empty polls before sleeping (SLEEP mode) */
	uint32_t sleep_us_max; /* longest single sleep (SLEEP mode) */
	uint32_t sleep_us_min; /* first sleep after the spins (SLEEP mode; 0 = 1) */
	uint32_t wait_us_max;  /* longest sleep with a bell that every input rings (SLEEP mode;
				* 0 = sleep_us_max): work wakes the lcore, so this only bounds
				* how late its timers run */
};

/* A doorbell: the lcore that consumes some rings sleeps on it (a futex), and a producer that
 * handed it work rings it, so a sleeping lcore wakes when work arrives rather than at the
 * end of its sleep. The sleeper arms it before its cycle's last look at its inputs
 * (dp_idle_arm); a producer rings after publishing (dp_bell_ring: a fence and a load when
 * nobody sleeps, a system call only when the owner is armed). Rings of an lcore that never
 * sleeps (busy, pause) cost one load of `enabled`. */
struct dp_bell {
	uint32_t seq;          /* the futex word: bumped by each ring that found the owner armed */
	uint32_t waiting;      /* 1: the owner is armed (asleep, or about to look and sleep) */
	uint64_t wakes;        /* rings that found the owner armed (atomic; counter) */
	bool enabled;          /* the owner sleeps (set before the lcores start) */
} __rte_cache_aligned;

void dp_bell_wake(struct dp_bell *bell);

/* After publishing work for the bell's owner (a ring enqueue, a published index): wake it
 * if it sleeps. NULL: no bell. Any lcore, any number of producers. */
static inline void
dp_bell_ring(struct dp_bell *bell)
{
	if (bell == NULL || !bell->enabled)
		return;
	/* The work's stores before the load of waiting; the owner stores waiting before it
	 * looks at its inputs (Dekker): one of the two sees the other. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&bell->waiting, __ATOMIC_RELAXED) != 0)
		dp_bell_wake(bell);
}

struct dp_idle {
	struct dp_idle_policy policy;
	uint32_t empty;        /* consecutive empty polls */
	uint32_t sleep_us;     /* next sleep length */
	uint64_t sleeps;       /* sleeps taken (counter) */
	uint64_t rung;         /* sleeps a bell ended early (counter) */
	struct dp_bell *bell;  /* NULL: plain sleeps */
	uint32_t armed_seq;    /* the bell's seq when armed */
	bool armed;            /* this cycle's empty poll sleeps on the bell */
	bool wake_on_all;      /* every input rings the bell: sleep wait_us_max at once */
};

const char *dp_idle_mode_name(enum dp_idle_mode mode);
/* Parse "busy" | "pause" | "sleep". 0 or -EINVAL. */
int dp_idle_mode_parse(const char *s, enum dp_idle_mode *out);
void dp_idle_init(struct dp_idle *idle, const struct dp_idle_policy *policy);
/* The lcore sleeps on bell (it owns it; it is enabled when the policy sleeps). Before the
 * lcores start. wake_on_all: every input of the lcore rings it, so its sleeps may grow to
 * wait_us_max; else (the io lcore: its port is polled) to sleep_us_max. */
void dp_idle_bell(struct dp_idle *idle, struct dp_bell *bell, bool wake_on_all);
/* Called before each duty cycle's work: when an empty cycle would sleep next, arm the bell,
 * so that work handed over while the cycle looks at its inputs ends that sleep. */
void dp_idle_arm(struct dp_idle *idle);
/* Called once per duty cycle with the work done in it. */
void dp_idle_run(struct dp_idle *idle, uint32_t work);

/* Duty-cycle statistics (Aeron's duty cycle tracker): cycles, cycles with work, the longest
 * working cycle and how many exceeded the threshold. Single writer. */
struct dp_duty {
	uint64_t cycles;         /* all cycles */
	uint64_t work_cycles;    /* cycles that did work */
	uint64_t work_items;     /* sum of work */
	uint64_t max_ns;         /* longest working cycle */
	uint64_t busy_ns;        /* time spent in working cycles (busy % = Δbusy / Δwall) */
	uint64_t over_count;     /* working cycles longer than threshold_ns */
	uint64_t threshold_ns;   /* e.g. 100 µs */
};

void dp_duty_init(struct dp_duty *duty, uint64_t threshold_ns);
/* Record one cycle that started at start_ns and ended at end_ns with `work` items done. */
void dp_duty_record(struct dp_duty *duty, uint64_t start_ns, uint64_t end_ns, uint32_t work);

/* Monotonic nanoseconds from the TSC (after dp_eal_init). */
uint64_t dp_clock_ns(void);

/* ---------------------------------------------------------------------------------------
 * Configuration and lifecycle.
 * ------------------------------------------------------------------------------------- */

struct dp_peer {
	uint32_t node_id;               /* peer's node id */
	uint32_t ip_be;                 /* its address */
	uint16_t port_be;               /* its UDP port */
	bool has_mac;                   /* a static ARP entry is configured */
	struct rte_ether_addr mac;      /* that entry */
};

struct dp_conf {
	uint32_t node_id;            /* our node id (frame sender id) */
	uint32_t ip_be;              /* our IPv4 address */
	uint8_t prefix_len;          /* on-link subnet */
	uint32_t gateway_be;         /* next hop for off-link destinations; 0 = none */
	bool has_mac;                /* override the port's MAC */
	struct rte_ether_addr mac;   /* that override */
	uint16_t udp_port;           /* host order: the port we serve */
	char port_name[DP_NAME_MAX]; /* ethdev name: vdev name ("net_tap0") or PCI address */
	uint16_t rx_desc;            /* descriptors per rx queue */
	uint16_t rx_queues;          /* rx queues, one io lcore each, 1..DP_IO_MAX (0: 1); more
				      * than one spreads flows by RSS where the port has it
				      * (net_af_packet: its qpairs, the kernel's fanout) */
	uint16_t tx_desc;            /* descriptors per tx queue */
	uint16_t burst;              /* rx/tx burst size, <= DP_BURST_MAX */
	uint16_t mtu;                /* IP MTU (frames above it are refused on tx) */
	bool promiscuous;            /* put the port in promiscuous mode */
	uint32_t mbufs;              /* mbufs in the pool */
	uint32_t mbuf_cache;         /* per-lcore mempool cache */
	uint16_t mbuf_data_room;     /* data room per mbuf, headroom included */
	uint32_t arp_timeout_ms;     /* dynamic ARP entries expire after this */
	struct wire_key peer_key;    /* MAC key for frames from/to peers; zero = none */
	struct wire_key client_key;  /* MAC key for everything else; zero = none */
	uint32_t peer_count;
	struct dp_peer peers[DP_PEERS_MAX];
};

#define DP_BURST_MAX 64

struct dp;
struct dp_txq;

/* Build the EAL and initialise it. argv is the complete EAL argument vector (argv[0] is the
 * program name). Returns 0 or -errno; logs the EAL's reason. Registers the log type. */
int dp_eal_init(int argc, char **argv);
void dp_eal_cleanup(void);

/* Create the pool and configure (not start) the port. 0 or -errno. */
int dp_create(struct dp **out, const struct dp_conf *conf);
/* Start the port. Routes and tx queues must be registered before. 0 or -errno. */
int dp_start(struct dp *dp);
/* Stop and close the port. Rings are drained and freed by dp_destroy. */
void dp_stop(struct dp *dp);
void dp_destroy(struct dp *dp);

/* The port's (or configured) MAC. */
void dp_mac(const struct dp *dp, struct rte_ether_addr *mac);
uint32_t dp_node_id(const struct dp *dp);

/* A single-producer single-consumer ring of mbuf pointers, owned by dp (freed, with any
 * mbufs left in it, by dp_destroy); the io lcore rings bell (its consumer's; may be NULL)
 * after the rx bursts that put frames in it. NULL on failure. */
struct rte_ring *dp_ring_create(struct dp *dp, const char *name, uint32_t size,
				struct dp_bell *bell);

/* Route frames of class cls for shard (or DP_SHARD_ANY: every shard without its own route)
 * to ring. The io lcore is the ring's only producer. 0 or -EINVAL/-EEXIST. */
int dp_route_add(struct dp *dp, enum dp_class cls, uint16_t shard, struct rte_ring *ring);

/* RX gate: the io lcore polls the port only in cycles where gate(arg) returns true; tx
 * queues are drained every cycle regardless. For a port that can wait (net_pcap replays),
 * this holds input until the node is ready and makes the replay lossless (back-pressure);
 * on a NIC, unpolled packets are dropped by the NIC. gate runs on the io lcore once per
 * cycle and must be cheap and non-blocking. Set before dp_start; NULL (default): always. */
typedef bool(dp_rx_gate_fn)(void *arg);
void dp_rx_gate_set(struct dp *dp, dp_rx_gate_fn *gate, void *arg);

/* A tx queue for one producer lcore (single producer, the io lcore consumes). NULL on
 * failure. */
struct dp_txq *dp_txq_create(struct dp *dp, const char *name, uint32_t size);
/* ... drained by io lcore k (dp_txq_create spreads them round robin). */
struct dp_txq *dp_txq_create_on(struct dp *dp, const char *name, uint32_t size, uint16_t k);
/* The tx queues made so far, and queue i's ring and the io lcore that drains it (views). */
uint32_t dp_txq_count(const struct dp *dp);
struct rte_ring *dp_txq_ring(const struct dp *dp, uint32_t i, uint16_t *io_k);
/* io lcore k's bell, rung by the producers of the tx queues it drains after queueing. 0,
 * -EINVAL (no such io lcore) or -EBUSY after dp_start. */
int dp_io_bell_set(struct dp *dp, uint16_t k, struct dp_bell *bell);
/* Client session keys for the io lcores: fn(arg, session_id, &key) gives the frame key of
 * a session the gateway holds (true), so an io lcore checks a session frame's MAC before
 * the frame reaches the gateway's lcore (dp_meta.mac_proven). Any io lcore calls it while
 * the gateway changes its sessions: it must be safe for that (app_session.c: seqlocked
 * slots). Before dp_start; 0 or -EBUSY. */
typedef bool dp_session_key_fn(void *arg, uint32_t session_id, struct wire_key *key);
int dp_session_key_set(struct dp *dp, dp_session_key_fn *fn, void *arg);

/* ---------------------------------------------------------------------------------------
 * Hot path.
 * ------------------------------------------------------------------------------------- */

/* An io lcore's duty: rx burst from its queue → parse → route frames (every io lcore);
 * answer ARP/ICMP, drain the tx queues → port (the first; the others hand it what is not a
 * frame). Returns the work done (packets handled). arg is dp_io_get(dp, k), called only by
 * io lcore k. */
struct dp_io;
uint16_t dp_io_count(const struct dp *dp);
struct dp_io *dp_io_get(struct dp *dp, uint16_t k);
uint32_t dp_io_do_work(void *io, uint64_t now_ns);
/* Final drain of the tx queues at shutdown (io lcore or main after the io lcore stopped). */
uint32_t dp_io_drain(struct dp *dp);

/* Allocate an mbuf for an outgoing frame; NULL when the pool is empty. The frame goes at
 * dp_tx_buf(m) (8-byte aligned, headroom kept for the headers), at most *cap bytes. */
struct rte_mbuf *dp_tx_alloc(struct dp *dp);
void *dp_tx_buf(struct rte_mbuf *m, uint32_t *cap);
/* Reuse a received frame's mbuf for a reply: reset it so dp_tx_buf works again. The meta
 * src stays for the caller to copy into dst. */
void dp_tx_reset(struct rte_mbuf *m);

/* Queue a frame of len bytes at dp_tx_buf(m) to dst. Takes the mbuf in every case: on a full
 * queue it is freed and counted. Returns 0 or -ENOBUFS. Only the txq's owner lcore calls. */
int dp_tx_send(struct dp_txq *txq, struct rte_mbuf *m, uint32_t len, const struct dp_addr *dst);

/* Burst form (DPDK idiom): dp_tx_prepare each frame, then queue them together. Returns how
 * many were queued (a prefix of ms); the caller still owns the rest (retry or free them). */
void dp_tx_prepare(struct rte_mbuf *m, uint32_t len, const struct dp_addr *dst);
uint32_t dp_tx_send_burst(struct dp_txq *txq, struct rte_mbuf **ms, uint32_t n);

/* Address of configured peer node_id. 0, or -ENOENT when it is not a [peer.N]. */
int dp_peer_addr(const struct dp *dp, uint32_t node_id, struct dp_addr *addr);

/* The MAC key frames to/from addr use: the peer key for a configured peer's address, else
 * the client key. NULL when that key is zero (no MAC). */
const struct wire_key *dp_key_for(const struct dp *dp, const struct dp_addr *addr);

/* Validated frame body of a received mbuf: *msgs points after the frame header, *len covers
 * the messages (MAC excluded). Walk it with wire_msgs_next. */
void dp_rx_msgs(struct rte_mbuf *m, const uint8_t **msgs, uint32_t *len);

/* ---------------------------------------------------------------------------------------
 * Stats: counters, per-cause frame errors, tx queue drops, ARP table.
 * ------------------------------------------------------------------------------------- */
uint64_t dp_counter_get(const struct dp *dp, enum dp_counter c);
uint64_t dp_frame_err_get(const struct dp *dp, enum wire_err e);
/* Write "dp.<label> <value>" lines (counters, frame_err.<cause>, txq drops, ARP entries). */
void dp_stats_write(const struct dp *dp, FILE *out);

/* Log type of the dataplane (user.omsd.dp). */
extern int dp_logtype;

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The omsd process: its lcores (agents), their roles, and the wiring between them and the
 * dataplane (ARCHITECTURE.md §3). Private to app/.
 *
 * Every lcore other than main runs one agent: the duty cycle of STYLE.md §3 around the
 * do_work function of its role. The role table (app_roles[]) says how a role is set up and
 * what it runs. The wiring (app_wire.c) creates every ring before any role's init and hands
 * each stage its inboxes and outboxes (app_wire_shard, app_wire_persist), as DPDK's
 * examples/packet_ordering wires rx → worker → tx; no stage looks up another's ring:
 *
 *   role       lcore                 rings (created at start-up, before dp_start)
 *   io         [io] cpu              port rx/tx; routes frames to the rings below
 *   shard      [shard.N] cpu (each)  rx: io → shard N (class shard; class bridge for an oms
 *                                    shard; classes gateway and client → the gateway lcore,
 *                                    the first oms shard of the node)
 *                                    local: MP/SC ring, frames from other lcores of this
 *                                    node (same mbuf layout as received frames)
 *                                    mgmt: SP/SC ring, control-socket commands from main
 *                                    tx: dp_txq "shardN" → io; with a sealing bridge
 *                                    the frames to the network go to bridge_seal instead
 *   bridge     [bridge] cpu          seal: MP/SC ring bridge_seal from the shard lcores, their
 *                                    frames to the network, whose MAC it writes (app_seal.c);
 *                                    tx: dp_txq "bridge" → io. The saga re-drive runs inside
 *                                    the OMS shard lcore (the only lcore that may read the
 *                                    oms state; docs/appliance.md)
 *   persister  [persister] cpu       request ring persister_rq (MP/SC) from the OMS shards,
 *                                    completions to their local rings; idle without a
 *                                    database (OMS shards answer inline)
 *   main                             mgmt_done: MP/SC ring, answered commands from shards
 */
#ifndef OMSD_APP_APP_H
#define OMSD_APP_APP_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_log.h>

#include "app_config.h"
#include "app_fwd.h"
#include "app_route_pub.h"
#include "common/hist.h"
#include "dataplane/dp.h"

#define APP_AGENTS_MAX (3 + DP_IO_MAX + APP_SHARDS_MAX) /* io lcores, bridge, persister,
							     * gateway, shards */
#define APP_SHARD_DRAIN_MAX 32 /* frames a shard lcore takes from its ring per cycle */

extern int app_logtype;
#define APP_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, app_logtype, "omsd: " fmt "\n", ##__VA_ARGS__)

typedef uint32_t(app_do_work_fn)(void *state, uint64_t now_ns);

enum app_role {
	APP_ROLE_IO = 0,
	APP_ROLE_SHARD = 1,
	APP_ROLE_BRIDGE = 2,
	APP_ROLE_PERSISTER = 3,
	APP_ROLE_GATEWAY = 4,     /* [gateway]: the gateway on an lcore of its own */
	APP_ROLE_COUNT,
};

/* One lcore's loop. */
struct app_agent {
	char name[32];                /* "io", "shard1", ... (stats labels) */
	enum app_role role;
	unsigned lcore_id;            /* EAL lcore */
	uint16_t cpu;                 /* the CPU it is pinned to */
	app_do_work_fn *do_work;      /* the role's work, bounded per call */
	void *state;                  /* its argument */
	struct dp_idle idle;          /* back-off state (policy from config) */
	struct dp_bell bell;          /* rung by whoever hands this lcore work (dp.h) */
	struct dp_duty duty;          /* cycle statistics */
	int stop;                     /* set by main (atomic); the loop exits */
	bool launched;                /* remote-launched, must be waited for */
	bool rcu_reader;              /* reads RCU-published state (app_route_pub.h): a QSBR
				       * thread, quiescent after each cycle, offline idle */
} __rte_cache_aligned;

struct app_shard; /* app_shard_int.h: one shard lcore (consensus + service + roles) */
struct app_persister; /* app_persist.c: the persister lcore (PostgreSQL) */

/* app_out.c: frames being built by one lcore, one per destination (a route: a local ring,
 * or an address, plus class and shard), flushed when full and at the end of every cycle.
 * Never blocks: a frame the tx queue or local ring refuses is held (up to APP_HELD_MAX) and
 * offered again first at the next flush; beyond that it is dropped and counted (Raft
 * retransmits, the bridge re-drives, clients retransmit). Frames to a local ring carry the
 * same dp_meta as frames from the port. Single writer. */
#define APP_OUT_MAX 8
#define APP_HELD_MAX 256
struct app_out {
	struct rte_mbuf *m;          /* NULL: slot unused */
	struct wire_builder b;       /* over the mbuf's data */
	struct rte_ring *ring;       /* local: the lcore's ring; NULL: to dst through io */
	uint16_t cls;                /* enum dp_class of its messages */
	uint16_t shard;              /* their destination shard */
	struct dp_addr dst;          /* remote: where it goes */
	bool keyed;                  /* remote: MAC'd under key, not the dataplane's key for dst */
	struct wire_key key;         /* a client session's frame key (zero: no MAC) */
};

struct app_outbox {
	struct app *app;
	struct dp_txq *txq;          /* remote frames */
	struct rte_ring *seal;       /* remote frames, to the bridge that MACs them (app_seal.c);
				      * NULL: MAC'd here and queued on txq */
	uint32_t self;               /* frame sender id */
	uint32_t frame_cap;          /* bytes per frame (MTU) */
	struct app_out out[APP_OUT_MAX];
	uint32_t last;               /* the slot the last message went to: looked at first (a
				      * destination has one slot at most, and messages come in runs
				      * to one: a client's reports, an ME shard's SUBMITs) */
	struct rte_mbuf *held[APP_HELD_MAX];      /* refused frames, oldest first */
	struct rte_ring *held_ring[APP_HELD_MAX]; /* their local ring, NULL: the tx queue */
	uint32_t held_count;
	uint64_t tx_frames;          /* frames queued to the io lcore */
	uint64_t tx_held;            /* frames held once because a queue was full */
	uint64_t tx_local;           /* frames delivered to a lcore of this node */
	uint64_t tx_full;            /* frames dropped: queue full and the held list full */
	uint64_t tx_nombuf;          /* messages dropped: mbuf pool empty */
	uint64_t tx_too_big;         /* messages larger than a frame */
};

uint32_t app_frame_cap(const struct app *app);
void app_outbox_init(struct app_outbox *ob, struct app *app, struct dp_txq *txq);
/* Add msg (+ tail) for ring (local) or dst. 0, -ENOBUFS (no mbuf), -EMSGSIZE. */
/* A client-class message for dst in a frame MAC'd under key (a session's; a zero key: no
 * MAC), never sharing a frame with another key's messages. Same returns. */
int app_outbox_add_keyed(struct app_outbox *ob, const struct dp_addr *dst,
			 const struct wire_key *key, const struct wire_msg_hdr *msg);
int app_outbox_add(struct app_outbox *ob, struct rte_ring *ring, const struct dp_addr *dst,
		   uint16_t cls, uint16_t shard, const struct wire_msg_hdr *msg, const void *tail,
		   uint16_t tail_len);
/* app_outbox_add without a tail (six arguments: all in registers). */
int app_outbox_add_msg(struct app_outbox *ob, struct rte_ring *ring, const struct dp_addr *dst,
		       uint16_t cls, uint16_t shard, const struct wire_msg_hdr *msg);
void app_outbox_flush(struct app_outbox *ob);
void app_outbox_free(struct app_outbox *ob);
void app_outbox_stats_write(const struct app_outbox *ob, const char *prefix, FILE *out);

/* app_lat.c: RX → client egress latency of new orders, kept by the gateway (the lcore that
 * both receives the order and forwards its answers). Definitions in app_lat.c. */
#define APP_LAT_SLOTS (1u << 16)     /* orders timed at once (a cache) */
struct app_reqtab_ent;
struct app_lat {
	struct app_reqtab_ent *ents; /* [APP_LAT_SLOTS] (user, cl_ord_id) → t0: the rx burst's
				      * TSC; shard: the OMS shard it was sent to (app_reqtab.h) */
	uint64_t tsc_hz;             /* rte_get_tsc_hz() */
	struct hist ack;             /* lat_rx_ack_ns: RX → provisional ACK */
	struct hist final;           /* lat_rx_final_ns: RX → OPEN | DONE | REJECTED */
	uint64_t orders;             /* NEW_ORDERs timed */
	uint64_t acked;              /* ...whose ACK was timed */
	uint64_t naked;              /* ...answered with a NAK (not timed) */
	uint64_t finals;             /* ...whose final report was timed */
	uint64_t lost;               /* entries overwritten: the table was full */
	uint64_t first_rx_tsc;       /* RX of the first timed order */
	uint64_t last_final_tsc;     /* egress of the last final report */
};
int app_lat_init(struct app_lat **out, unsigned socket);
void app_lat_free(struct app_lat *l);
/* ns from tsc (an rx burst's dp_meta.rx_tsc) to now. */
uint64_t app_lat_since_ns(const struct app_lat *l, uint64_t tsc);
/* Gateway: a client message arrived (rx_tsc from its dp_meta); only NEW_ORDERs are timed. */
void app_lat_rx(struct app_lat *l, const struct wire_msg_hdr *msg, uint64_t rx_tsc,
		uint16_t shard);
/* Gateway: an answer is being queued to its client. True when it is a timed new order's
 * first answer (its ACK, or a NAK instead), with *answer_ns the time since its rx burst and
 * *shard the OMS shard app_lat_rx was told it went to. */
bool app_lat_tx(struct app_lat *l, const struct wire_msg_hdr *msg, uint64_t *answer_ns,
		uint16_t *shard);
/* "<prefix>.lat_* value" lines, percentiles of both histograms included. */
void app_lat_stats_write(const struct app_lat *l, const char *prefix, FILE *out);
/* "<name>.count", ".p50_ns", ".p99_ns", ".max_ns" of h (read while its owner may record:
 * single-writer words). */
struct hist;
void app_hist_lines(FILE *out, const char *name, const struct hist *h);

/* Echo shard (diagnostic service "echo"): counts what reaches it and echoes every frame to
 * its sender. The dataplane tests use it. */
struct app_echo {
	const struct app_shard_conf *conf;
	struct rte_ring *rx;          /* io → this shard (SP/SC) */
	struct dp_txq *txq;           /* this shard → io */
	uint64_t frames;              /* frames received */
	uint64_t msgs;                /* messages in them */
	uint64_t echoed;              /* frames sent back */
	uint64_t echo_dropped;        /* tx queue full */
} __rte_cache_aligned;

/* The control socket's commands to shard lcores (docs/appliance.md "Control socket").
 * The main lcore allocates a command, fills the request part and enqueues it on the shard's
 * mgmt ring (SP/SC, app_shard_mgmt_ring); from then on the shard lcore owns it until it puts
 * it, answered, on app->mgmt_done (MP/SC). Main never touches a command the shard holds and
 * the shard always gives every command back (at the latest at its deadline). */
#define APP_CMD_MSG_MAX 8192       /* largest admin message (a book chunk; WIRE_TAIL_MAX) */
#define APP_CMDS_MAX 64            /* commands out at the shard lcores, all shards */
#define APP_CMD_DRAIN_MAX 4        /* commands a shard lcore takes per cycle */
#define APP_CMD_PENDING_MAX 16     /* commands a shard lcore holds waiting for commit */

enum app_cmd_kind {
	APP_CMD_PROPOSE = 1,  /* msg into the shard's log; the answer is its ADMIN_REPLY */
	APP_CMD_SNAPSHOT = 2, /* cns_snapshot_take; value: the snapshot's index */
	APP_CMD_TRANSFER = 3, /* cns_transfer(target); answered once target leads (value: its
			       * term); msg holds it as a LEADER_TRANSFER, should it be
			       * forwarded */
	APP_CMD_VIEW = 4,     /* read-only: the view is written as JSON into out */
	APP_CMD_MEMBERS = 6,  /* cns_member_change(member_op, target); answered once the
			       * configuration entry commits (index: its log index); msg
			       * holds it as a MEMBER_CHANGE, should it be forwarded */
	APP_CMD_FORWARD = 5,  /* msg for shard `shard`, not led here: sent to its leader as
			       * FORWARDED_ADMIN and answered by its FORWARDED_REPLY
			       * (app_admin_fwd.c); taken by the shard's lcore when hosted
			       * here, else by any shard lcore of the node. msg is an admin
			       * message, a MEMBER_CHANGE (the leader makes the change) or a
			       * LEADER_TRANSFER (the leader hands leadership over) */
};

enum app_cmd_view {
	APP_VIEW_SYMBOLS = 1, /* the service's symbol table */
	APP_VIEW_ROUTES = 2,  /* OMS: the applied routing config */
	APP_VIEW_USER = 3,    /* OMS: one user's actor (user) */
	APP_VIEW_USERS = 4,   /* OMS: the resident set, a page (cursor, limit) */
	APP_VIEW_BOOK = 6,    /* ME: one symbol's depth (target: symbol; limit: levels a side) */
	APP_VIEW_MOVE = 5,    /* ME: a symbol's move (target: symbol; user: move_id) and up to
			       * limit orders of its frozen book from cursor, binary: struct
			       * app_move_view then wire_book_order[n] (app_mgmt_move.c);
			       * flags APP_VIEW_MOVE_LIVE, APP_VIEW_MOVE_JOURNAL */
	APP_VIEW_STREAM = 7,  /* OMS: how far this replica applied the event stream of ME
			       * shard `target` (binary: struct app_stream_view) */
};

/* APP_VIEW_STREAM's answer. */
struct app_stream_view {
	uint64_t applied; /* the replica's applied index */
	uint64_t seq;     /* the last event of the ME shard's stream it applied (0: none) */
};

/* APP_VIEW_MOVE's flags (app_cmd.flags). */
#define APP_VIEW_MOVE_LIVE 1u    /* the book as it is, trading or not (the copy) */
#define APP_VIEW_MOVE_JOURNAL 2u /* the frozen move's journal from cursor (me.h
				  * me_move_journal_export) instead of its whole book */
#define APP_VIEW_MOVE_READY 4u   /* ready answers for the frozen orders alone (me.h
				  * me_move_ready: a walk of the book), not for every stream */

enum app_cmd_status {
	APP_CMD_OK = 0,         /* committed and applied (value set) */
	APP_CMD_REJECTED = 1,   /* committed, and the service refused it (reason) */
	APP_CMD_NOT_LEADER = 2, /* this member does not lead (leader: the one it knows, or 0) */
	APP_CMD_LOST = 3,       /* proposed, but the entry was not committed in our term */
	APP_CMD_TIMEOUT = 4,    /* no outcome by the deadline (it may still commit) */
	APP_CMD_BUSY = 5,       /* backpressure or too many commands: nothing was proposed */
	APP_CMD_FAILED = 6,     /* could not be done (err: -errno) */
};

/* APP_VIEW_MOVE's answer: what a replica of the source ME shard knows of the move. */
#define APP_MOVE_NEED_MAX 8 /* me.h ME_MOVE_NEED_MAX */
struct app_move_view {
	uint64_t applied;             /* the replica's applied index */
	uint64_t move_id;             /* 0: no move of the symbol known here */
	uint64_t hash;                /* the frozen book's hash */
	uint64_t trade_seq;           /* the symbol's trade number */
	int64_t last_px;
	int64_t tick, lot, min_qty, min_notional, base_unit, ref_px;
	uint32_t base_asset, quote_asset, band_bps;
	uint32_t count;               /* frozen orders */
	uint32_t n;                   /* orders that follow */
	uint32_t journal;             /* orderIds journaled since WATCH (me.h) */
	uint16_t me_shard;            /* the symbol's owner as this replica holds it */
	uint16_t peer;                /* the move's other shard */
	uint8_t known;                /* the symbol is configured here */
	uint8_t role, phase, ready;   /* enum me_move_role, me_move_phase; ready: see me.h */
	uint8_t status, killed;
	uint8_t journal_ok;           /* the journal is the whole of the move's changes */
	uint8_t need_n, need_over;    /* not ready: what waits, per OMS shard (me.h) */
	uint8_t pad[3];
	uint16_t need_shard[APP_MOVE_NEED_MAX];
	uint64_t need_seq[APP_MOVE_NEED_MAX];
};

/* Admin entries with a flag the shard lcore completes from its state before proposing. */
#define APP_CMD_ROUTE_MERGE 1u /* ROUTING_CONFIG: epoch = applied + 1 (unless set), keep the
				* applied pins */
#define APP_CMD_SYMBOL_FILL 4u /* SYMBOL_CONFIG: an ME shard that owns the symbol fills the
				* book fields from its replica (else the message must be
				* complete); an OMS shard fills the fees from its replica.
				* Unknown to an owner or an OMS: REJECTED UNKNOWN_SYMBOL */
#define APP_CMD_ROUTE_SCALE 2u /* ROUTING_CONFIG: shards[0] joins (or changes state in) the
				* applied membership, which the shard lcore copies */
#define APP_CMD_MAY_FORWARD 8u /* PROPOSE, MEMBERS, TRANSFER: when this member no longer
				* leads, forward to the leader instead of answering
				* NOT_LEADER */

struct app_cmd {
	/* Request (main). */
	uint32_t kind;                /* enum app_cmd_kind */
	uint32_t view;                /* enum app_cmd_view */
	uint32_t flags;               /* APP_CMD_ROUTE_MERGE */
	uint16_t shard;               /* target shard id (hosted on this node) */
	uint32_t target;              /* TRANSFER: node to hand leadership to; MEMBERS: node */
	uint32_t member_op;           /* MEMBERS: enum cns_member_op */
	uint64_t user;                /* VIEW USER */
	uint32_t cursor;              /* VIEW USERS: first actor slot of the page */
	uint32_t limit;               /* VIEW USERS: users per page */
	uint64_t req_key;             /* PROPOSE: the req_id its ADMIN_REPLY will carry */
	uint64_t deadline_ns;         /* dp_clock_ns: answered TIMEOUT after this */
	_Alignas(8) uint8_t msg[APP_CMD_MSG_MAX]; /* PROPOSE: the admin message; MEMBERS:
						   * the MEMBER_CHANGE; TRANSFER: the
						   * LEADER_TRANSFER */
	char *out;                    /* VIEW: JSON buffer */
	size_t out_cap;
	/* Answer (shard lcore). */
	uint32_t status;              /* enum app_cmd_status */
	uint16_t reason;              /* REJECTED: enum wire_reason */
	uint32_t leader;              /* NOT_LEADER: known leader, 0 none */
	int err;                      /* FAILED: -errno */
	uint64_t value;               /* ADMIN_REPLY value, snapshot index, new term */
	uint64_t index;               /* PROPOSE: log index of the entry; snapshot index */
	uint64_t term;                /* the term it was proposed in */
	size_t out_len;               /* VIEW: bytes written to out */
	/* Main's bookkeeping. */
	void *req;                    /* the control request it belongs to */
	bool at_shard;                /* enqueued and not yet taken back from mgmt_done */
	uint8_t step;                 /* step of a two-step request (1 or 2) */
	/* Forwarding (FORWARD, or a PROPOSE that found itself not leading). */
	struct app_fwd_try fwd;       /* fwd.id set by main; the rest is the shard lcore's */
	uint32_t via;                 /* answer: the node whose leader proposed it (0: here) */
};

/* Every ring between the lcores of this node, created by app_wire_init before the roles'
 * init and freed by app_wire_fini after their fini. Indexed like cfg.shards. */
struct app_rings {
	struct rte_ring *shard_rx[APP_SHARDS_MAX];    /* io → shard lcore (dataplane ring) */
	struct dp_txq *shard_txq[APP_SHARDS_MAX];     /* shard lcore → io */
	struct rte_ring *shard_local[APP_SHARDS_MAX]; /* this node's lcores → shard (MP/SC);
						       * NULL: echo */
	struct rte_ring *shard_mgmt[APP_SHARDS_MAX];  /* main → shard: commands (SP/SC);
						       * NULL: echo */
	struct rte_ring *persist_rq;                  /* OMS shards → persister (MP/SC);
						       * NULL: no database */
	struct rte_ring *seal;                        /* shard lcores → bridge: frames to the
						       * network whose MAC it writes (MP/SC);
						       * NULL: no [bridge] or seal = off */
	struct dp_txq *seal_txq[DP_IO_MAX];           /* bridge → io lcore k: those frames,
						       * sealed (one per io lcore) */
};

/* What the wiring hands a shard lcore (app_wire_shard): its inboxes and the rings it sends
 * on. Echo shards use rx and txq only. */
struct app_shard_wires {
	struct rte_ring *rx;          /* inbox: io → us */
	struct rte_ring *local;       /* inbox: other lcores of this node → us (MP/SC) */
	struct rte_ring *mgmt_rx;     /* inbox: main → us, control-socket commands (SP/SC) */
	struct dp_txq *txq;           /* us → io */
	struct rte_ring *mgmt_done;   /* us → main: answered commands (MP/SC) */
	struct rte_ring *persist_rq;  /* us → the persister; NULL: no database, answer inline */
	struct rte_ring *gateway;     /* the gateway lcore's local ring; NULL: no gateway here */
	struct rte_ring *peer[DP_SHARDS_MAX]; /* shard id → its lcore's local ring; NULL: the
					       * shard is not hosted on this node */
	struct rte_ring *seal;        /* us → the bridge: frames for the network, to be MAC'd
				       * there (app_seal.c); NULL: MAC'd here, sent on txq */
};

/* What the wiring hands the persister (app_wire_persist). */
struct app_persist_wires {
	struct rte_ring *rq;          /* inbox: OMS shard lcores → us (MP/SC) */
	struct rte_ring *reply[DP_SHARDS_MAX]; /* shard id → that lcore's local ring; NULL:
						* not hosted here */
};

struct app {
	struct app_config cfg;        /* validated configuration */
	struct dp *dp;                /* the dataplane */
	struct app_agent agents[APP_AGENTS_MAX];
	uint32_t agent_count;
	struct app_shard *shards[APP_SHARDS_MAX]; /* parallel to cfg.shards (oms, me) */
	struct app_echo echoes[APP_SHARDS_MAX];  /* parallel to cfg.shards (echo) */
	int8_t shard_index[DP_SHARDS_MAX];       /* shard id → index in shards[], -1: not here */
	/* The lcore running the gateway, -1: none. Without [gateway] the node's first OMS shard
	 * lcore (else its first shard lcore); with it, the gateway lcore, which takes the
	 * place after the last shard in shards[], shard_bell[] and the rings (index
	 * cfg.shard_count; loops over cfg.shard_count do not see it). */
	int gateway_index;
	/* [gateway]: the routing the gateway lcore routes by, published by the node's first
	 * OMS shard lcore (route_src_index, -1: none; app_route_pub.h). */
	struct app_route_pub route;
	int route_src_index;
	/* Node-wide leader hints per shard id: written by the local member of a shard (from
	 * cns_leader) and by NOT_LEADER answers; read by every lcore that sends to a shard's
	 * leader. Relaxed atomics: a hint is only a hint, a wrong one costs one NAK. */
	uint32_t leader_hint[DP_SHARDS_MAX];
	int64_t clock_offset_ns;      /* cluster clock = dp_clock_ns + this (wall clock) */
	struct app_persister *persister; /* NULL: no [persister] lcore */
	/* The lcores' bells (agents_plan): each shard's (parallel to shards[]) and the
	 * persister's (NULL: none). Whoever hands one of them work rings it. */
	struct dp_bell *shard_bell[APP_SHARDS_MAX];
	struct dp_bell *persist_bell;
	struct dp_bell *bridge_bell;  /* NULL: no [bridge] lcore */
	struct app_seal *seal;        /* the bridge lcore's sealer (app_seal.c); NULL: none */
	/* The main lcore's, rung by a shard lcore giving a command back: while a symbol move
	 * runs, main sleeps on it between the steps (app_mgmt_poll). */
	struct dp_idle main_idle;
	struct dp_bell main_bell;
	uint64_t start_ns;            /* dp_clock_ns at start */
	/* Where a snapshot child runs ([limits] snapshot_by = fork): the CPUs the process was
	 * started on but those of the io, bridge, persister and shard lcores (all of them when
	 * that leaves none). Set before EAL pins the main thread. */
	cpu_set_t snap_cpus;
	bool snap_cpus_ok;
	bool rx_open;                 /* [port] rx_start = leader: the gate has opened (io) */
	struct rte_ring *mgmt_done;   /* shard lcores → main: answered commands (MP/SC) */
	struct app_rings rings;       /* every other ring between lcores (app_wire.c) */
	/* API keys ([sessions] keys_file): the main lcore publishes a set, the gateway adopts
	 * it and says so; the main lcore frees a set only after its successor was adopted. */
	struct app_keyset *keys_pub;
	const struct app_keyset *keys_adopted;
};

/* How a role is set up. init runs on the main lcore after app_wire_init and before
 * dp_start (take its rings from the wiring, allocate state, set agent->do_work/state);
 * fini after its lcore stopped. index: the shard's position in
 * cfg.shards for APP_ROLE_SHARD, else 0. */
struct app_role_ops {
	const char *name;
	int (*init)(struct app *app, struct app_agent *agent, uint32_t index);
	void (*fini)(struct app *app, struct app_agent *agent);
};

extern const struct app_role_ops app_roles[APP_ROLE_COUNT];

/* The agent loop (lcore entry point for rte_eal_remote_launch). */
int app_agent_main(void *agent);

/* Write every counter (dataplane, agents, shards) as "name value" lines. */
void app_stats_write(const struct app *app, FILE *out);
/* Lcore slots indexed like cfg.shards: the shards, plus the gateway lcore's with [gateway]. */
static inline uint32_t
app_slots(const struct app *app)
{
	return app->cfg.shard_count + (app->cfg.gateway.enabled ? 1u : 0u);
}
/* app_gateway.c: the gateway lcore ([gateway]; app_shard_setup.c makes it). */
int app_gateway_init(struct app *app, struct app_agent *agent, uint32_t index);
void app_gateway_fini(struct app *app, struct app_agent *agent);
void app_gateway_stats_write(const struct app *app, FILE *out);
/* app_session.c, main lcore: load [sessions] keys_file (0, -EINVAL logged), then reload it
 * when it changes (every keys_refresh_ms). */
int app_keys_start(struct app *app);
void app_keys_poll(struct app *app, uint64_t now_ns);
void app_keys_stop(void); /* keys_source = database: the key thread ends */
/* app_mgmt.c: the control socket on the main lcore ([paths] mgmt_socket; "" = none). */
int app_mgmt_open(const struct app *app, struct dp_idle *main_idle);
void app_mgmt_poll(int timeout_ms);
void app_mgmt_close(void);
/* The control socket's own counters as "mgmt.<name> value" lines (metrics omsd_mgmt_*):
 * requests, errors, clients accepted, closed idle, refused busy. Nothing without a socket. */
void app_mgmt_stats_write(FILE *out);

/* app_wire.c: the rings (struct app_rings) and their dataplane routes. init: 0 or -errno
 * (what was made is freed by fini, which may run after a failed init). */
int app_wire_init(struct app *app);
void app_wire_fini(struct app *app);
/* The rings of shard index (in cfg.shards) and of the persister, as their stages take them. */
void app_wire_shard(const struct app *app, uint32_t index, struct app_shard_wires *out);
void app_wire_persist(const struct app *app, struct app_persist_wires *out);
struct dp_bell *app_ring_bell(const struct app *app, const struct rte_ring *ring);

/* app_shard_setup.c: the shard role for oms and me shards (echo shards stay in
 * app_lcore.c); app_shard_stats.c: what other lcores read of it. */
int app_shard_init(struct app *app, struct app_agent *agent, uint32_t index);
void app_shard_fini(struct app *app, struct app_agent *agent);
/* Main lcore, each tick: put a shard's service memory back on huge pages after a snapshot
 * child, a slice at a time (docs/persist.md, "Snapshots without a stall"). */
void app_shard_collapse_tick(struct app *app);
void app_shard_stats_write(const struct app *app, uint32_t index, FILE *out);
/* The RX gate's view of a shard (io lcore): a leader is known, the local replica applied
 * everything committed in the current term and the bootstrap config (and, on the leader,
 * its roles are ready); and the frames waiting in its rx and local rings. */
bool app_shard_ready(const struct app *app, uint32_t index);
uint32_t app_shard_queued(const struct app *app, uint32_t index);
/* The gateway's latency record (histograms lat_rx_ack_ns, lat_rx_final_ns), NULL when the
 * node has no gateway. Read-only, from the main lcore (exporters). */
const struct app_lat *app_shard_lat(const struct app *app);
/* The shard's local ring (other lcores of this node → shard lcore, MP/SC; app_wire.c). */
struct rte_ring *app_shard_local_ring(const struct app *app, uint32_t index);
/* What the views read of a shard lcore: published values (relaxed loads), any thread. */
struct app_shard_pub {
	uint16_t id;                         /* shard id */
	bool is_oms;
	uint32_t role;                       /* enum cns_role */
	uint32_t leader;                     /* known leader node, 0: none */
	uint64_t term, commit, applied, last; /* Raft indexes (last: last log index) */
	uint32_t member_count;               /* the configuration in effect (voters, learners) */
	uint32_t members[APP_MEMBERS_MAX];   /* node ids */
	uint32_t learners;                   /* bit m: members[m] is a learner */
	uint64_t config_index;               /* the log index of that configuration */
	uint64_t match[APP_MEMBERS_MAX];     /* leader: match index; UINT64_MAX otherwise */
	uint64_t elections;                  /* elections started by this member */
	uint64_t leader_elected;             /* times it became leader */
	uint64_t route_epoch, inflight, resident; /* oms */
	uint64_t resting;                    /* me */
	uint32_t place_pref;                 /* placement: the preferred leader, 0: none */
	uint32_t place_verdict;              /* placement: enum app_place_verdict (leader: the
						last check's; followers: follower) */
};
int app_shard_pub_read(const struct app *app, uint32_t index, struct app_shard_pub *out);
const char *app_shard_role_name(uint32_t role);
/* Copies of an OMS shard's latency histograms (ns; either pointer may be NULL); -ENOENT
 * (and empty copies) for other shards. */
int app_shard_latency(const struct app *app, uint32_t index, struct hist *ack,
		      struct hist *final);
/* The hot-user cache's histograms of an OMS shard's state (cluster ns; docs/oms.md
 * "Observability"), copied: stage 0 park, 1 hydrate, 2 writeback, 3 evict. -ENOENT (and an
 * empty copy) for other shards. */
#define APP_CACHE_STAGES 4
extern const char *const app_cache_stage_names[APP_CACHE_STAGES];
int app_shard_cache_hist(const struct app *app, uint32_t index, unsigned stage,
			 struct hist *out);
/* The shard's command ring (main → shard lcore, SP/SC; app_wire.c). */
struct rte_ring *app_shard_mgmt_ring(const struct app *app, uint32_t index);
/* Role and leader the shard lcore last published (relaxed; a hint for the main lcore). */
bool app_shard_leads(const struct app *app, uint32_t index, uint32_t *leader);
uint64_t app_shard_route_epoch(const struct app *app, uint32_t index);
/* app_persist.c: the persister role; app_persist_ring (app_wire.c): its request ring
 * (NULL: no database). */
int app_persist_init(struct app *app, struct app_agent *agent, uint32_t index);
void app_persist_fini(struct app *app, struct app_agent *agent);
struct rte_ring *app_persist_ring(const struct app *app);
void app_persist_stats_write(const struct app *app, FILE *out);
/* A copy of the persister's latency histogram of a request kind (1 hydrate, 2 flush,
 * 3 release, 4 lookup), part 0 its queue, 1 PostgreSQL (ns); -ENOENT and an empty copy
 * without a database (requests answered inline). */
int app_persist_hist(const struct app *app, unsigned kind, unsigned part, struct hist *out);
/* The request kinds' names by kind (index 0 unused), as the stats and metrics print them. */
extern const char *const app_persist_kind_names[5];
/* app_lcore.c: the echo shard (diagnostic service of the dataplane tests). */
int app_echo_init(struct app *app, struct app_agent *agent, uint32_t index);
/* app_seal.c: the bridge lcore's sealer — it takes the shard lcores' frames to the network
 * (bridge_seal), writes their MAC and queues them to the io lcore, in the order each shard
 * lcore handed them over. Without a seal ring ([bridge] seal = off) the lcore idles.
 * app_seal_drain runs on main once the bridge lcore has stopped (the shard lcores first,
 * the io lcore after): what is still in the ring is sealed and queued, so a stop loses no
 * frame the shard lcores flushed. */
int app_seal_init(struct app *app, struct app_agent *agent, uint32_t index);
void app_seal_fini(struct app *app, struct app_agent *agent);
uint32_t app_seal_drain(struct app *app);
void app_seal_stats_write(const struct app *app, FILE *out);

#endif

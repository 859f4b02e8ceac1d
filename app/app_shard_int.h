/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shard lcore's private header: struct app_shard (one Raft member, its service and the
 * host roles that read that service's state), its counters, and the functions its files
 * share. Only the app_shard*.c, app_gateway.c, app_bridge.c, app_egress.c, app_ingress.c,
 * app_flog.c, app_inline_persist.c, app_reqlat.c, app_admin_fwd.c and app_placement.c files
 * include it.
 *
 * The files are layers; a file calls only files below it (farm-studio look app):
 *
 *   app_shard_setup.c    init and fini: allocates, boots the log, hands out the callbacks
 *   app_shard.c          the duty cycle and the service as consensus sees it
 *   app_ingress.c  app_bridge.c       frames in; bridge re-drives and bootstrap
 *   app_egress.c         the service's sink: applied entries out (leader only)
 *   app_gateway.c  app_shard_cmd.c  app_flog.c  app_inline_persist.c  app_reqlat.c
 *   app_placement.c      (leadership placement: reads consensus, starts transfers)
 *   app_admin_fwd.c      (beside app_shard_cmd.c: it takes the commands that cmd file
 *                        cannot answer here and gives them back through app_cmd_give)
 *   app_shard_send.c  app_shard_tables.c   sends, proposals and the caches under them
 *   app_shard_stats.c    what main reads (published values, counters)
 *
 * Everything between lcores of one node travels as frames in mbufs on the receiving
 * lcore's "local" ring (multi-producer), with the same layout and dp_meta as frames from
 * the port, so a shard cannot tell a local peer from a remote one. The rings are the
 * wiring's (app_wire.c); a shard keeps the ones it was handed in app_shard.w.
 */
#ifndef OMSD_APP_APP_SHARD_INT_H
#define OMSD_APP_APP_SHARD_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <rte_common.h>

#include "app.h"
#include "app_backoff.h"
#include "app_gw_route.h"
#include "app_logw.h"
#include "app_placement.h"
#include "app_reqtab.h"
#include "app_shadow.h"
#include "app_shed.h"
#include "consensus/cns.h"
#include "persist/persist.h"

/* Counters of a shard lcore (STYLE.md §7): single writer, read by main with relaxed loads. */
#define SHARD_COUNTERS(X)                                                                  \
	X(FRAMES, "frames", "frames taken from the rx and local rings")                    \
	X(MSGS, "msgs", "messages in them")                                                \
	X(RAFT_IN, "raft_in", "Raft messages stepped")                                     \
	X(RAFT_BAD, "raft_bad", "Raft messages refused by cns_step")                       \
	X(RAFT_OUT, "raft_out", "Raft messages sent")                                      \
	X(PROPOSED, "proposed", "ingress messages proposed")                               \
	X(NOT_LEADER, "not_leader", "proposals refused: not leader")                      \
	X(BACKPRESSURE, "backpressure", "proposals refused: backpressure")                 \
	X(PROPOSE_FAILED, "propose_failed", "proposals refused otherwise")                 \
	X(INGRESS_BAD, "ingress_bad", "INGRESS with a bad origin or inner type")           \
	X(NOT_FROM_NODE, "not_from_node", "node-to-node messages from a non-peer address")  \
	X(APPLIED, "applied_now", "entries applied by this lcore")                     \
	X(EGRESS, "egress", "egress messages routed (leader)")                            \
	X(EGRESS_FOLLOWER, "egress_follower", "egress discarded on a follower")            \
	X(EGRESS_NOT_READY, "egress_not_ready", "egress held for the bridge rebuild")      \
	X(EGRESS_ADMIN, "egress_admin", "admin replies")                                   \
	X(NO_ROUTE, "no_route", "messages with no known destination")                      \
	X(GW_IN, "gw_in", "client messages routed by the gateway")                         \
	X(GW_DIRECT, "gw_direct",                                                          \
	  "of them, proposed at once: the gateway's own OMS shard (no ring, no INGRESS frame)") \
	X(GW_OUT, "gw_out", "answers forwarded to clients")                               \
	X(GW_NO_CLIENT, "gw_no_client", "answers for a user this gateway does not know")   \
	X(GW_NO_SESSION, "gw_no_session", "client messages refused: outside a session")     \
	X(GW_SHED_QUEUE, "gw_shed_queue",                                                  \
	  "new orders refused BACKPRESSURE: a standing queue behind the gateway (app_shed.h)") \
	X(GW_SHED_WAIT, "gw_shed_wait",                                                    \
	  "new orders refused BACKPRESSURE: they waited too long before the gateway")       \
	X(GW_HELD, "gw_held",                                                              \
	  "gateway lcore cycles that took no client frame: a local OMS shard's backlog "    \
	  "([port] rx_hold_frames)")                                                        \
	X(GW_SESSION_GONE, "gw_session_gone",                                              \
	  "answers dropped: their session ended (the client replays them after a logon)")   \
	X(NO_SESSION_SHARD, "no_session_shard",                                            \
	  "client frames sent straight to a shard, refused: outside a session")            \
	X(GW_XFER_IN, "gw_xfer_in", "client transfers routed by the gateway")              \
	X(GW_XFER_RESENT, "gw_xfer_resent", "transfers re-routed (NOT_OWNER, NOT_LEADER)")  \
	X(GW_XFER_REPLIES, "gw_xfer_replies", "transfer answers forwarded to clients")      \
	X(LEADER_HINTS, "leader_hints", "NOT_LEADER answers taken as leader hints")        \
	X(BRIDGE_REBUILDS, "bridge_rebuilds", "bridge queues rebuilt (new leader term)")   \
	X(BRIDGE_REDRIVES, "bridge_redrives", "PENDING sagas re-sent to the ME (back-off)") \
	X(BRIDGE_RESENT, "bridge_resent", "messages re-sent by re-drives")                 \
	X(REPORTS_RESENT, "reports_resent", "recent client reports re-sent by a new leader") \
	X(REPLAY_REQUESTS, "replay_requests", "REPORT_REPLAY requests served from the ring") \
	X(REPLAY_ELSEWHERE, "replay_elsewhere",                                            \
	  "REPORT_REPLAY copies for a user another shard owns (answers from before a move)") \
	X(REPLAY_SENT, "replay_sent", "client answers re-sent for REPORT_REPLAY requests") \
	X(REPLAY_TRUNCATED, "replay_truncated",                                            \
	  "REPORT_REPLAY requests whose range started before the oldest answer kept (here: " \
	  "gone from the ring, or emitted by the user's owner before a move)")             \
	X(REPLAY_SCANS, "replay_scans",                                                    \
	  "REPORT_REPLAY requests served by a whole-ring pass (user not in the heads table)") \
	X(GW_REPLAYS, "gw_replays", "REPORT_REPLAY requests a gateway passed on")           \
	X(GW_REPLAY_COPIES, "gw_replay_copies",                                            \
	  "REPORT_REPLAY copies to OMS shards other than the owner (a moved user's answers)") \
	X(BOOTSTRAPS, "bootstraps", "bootstrap config proposals")                         \
	X(PERSIST_ANSWERED, "persist_answered", "persistence requests answered inline")    \
	X(PERSIST_DROPPED, "persist_dropped", "persistence answers dropped (queue full)")  \
	X(SNAPSHOTS, "snapshots", "snapshots taken")                                       \
	X(SNAPSHOT_FAILED, "snapshot_failed", "snapshots that failed")                   \
	X(SNAPSHOT_FORKS, "snapshot_forks", "snapshot children forked ([limits] snapshot_by " \
	  "= fork)")                                                                     \
	X(SNAPSHOT_STALE, "snapshot_stale", "snapshots a child wrote that a snapshot "      \
	  "installed from the leader meanwhile made useless")                            \
	X(SNAPSHOT_FORK_MAX_NS, "snapshot_fork_max_ns", "the longest fork() of a snapshot " \
	  "child, ns (the shard lcore's stall; a gauge)")                                \
	X(SNAPSHOT_CHILD_MAX_NS, "snapshot_child_max_ns", "the longest a snapshot child "   \
	  "took to serialise, ns (a gauge)")                                             \
	X(SNAPSHOT_SHADOWED, "snapshot_shadowed", "snapshots the shadow copy serialised "    \
	  "([limits] snapshot_by = shadow)")                                             \
	X(SNAPSHOT_SHADOW_LOST, "snapshot_shadow_lost", "times the shadow copy was lost "    \
	  "(its ring full, or a base refused): the next snapshot is taken without it and " \
	  "seeds it again")                                                              \
	X(SNAPSHOT_SHADOW_MAX_NS, "snapshot_shadow_max_ns", "the longest the shadow copy "  \
	  "took to serialise, ns (a gauge)")                                             \
	X(SHADOW_LAG_MAX_BYTES, "shadow_lag_max_bytes", "the most bytes of applied "        \
	  "messages queued behind the shadow copy (a gauge)")                            \
	X(SNAPSHOT_CORRUPT, "snapshot_corrupt", "corrupt snapshot files set aside at boot") \
	X(VOTE_SAVE_FAILED, "vote_save_failed", "Raft vote (term) saves that failed")       \
	X(RAFT_HELD, "raft_held", "Raft messages held until the vote was saved")            \
	X(RAFT_HELD_DROPPED, "raft_held_dropped",                                          \
	  "Raft messages dropped: the vote was not saved and the hold was full")           \
	X(FLOG_GAP, "flog_gap", "cycles the file log could not follow: entries compacted " \
	  "from memory with no snapshot file covering them")                             \
	X(FLOG_AWAIT, "flog_await", "cycles the file log waited for an installed "          \
	  "snapshot's file before taking new entries")                                   \
	X(FLOG_BOOT_ENTRIES, "flog_boot_entries", "entries recovered from the file log")    \
	X(FLOG_TORN_BYTES, "flog_torn_bytes", "torn bytes cut from the file log at boot")   \
	X(FLOG_TORN_REPAIRS, "flog_torn_repairs", "torn file log tails cut at boot")        \
	X(MGMT_CMDS, "mgmt_cmds", "control-socket commands taken")                       \
	X(MGMT_OK, "mgmt_ok", "control-socket commands answered ok")                      \
	X(MGMT_REFUSED, "mgmt_refused", "control-socket commands answered otherwise")       \
	X(BRIDGE_ROUNDS, "bridge_rounds", "re-drive passes (every bridge_redrive_ms)")      \
	X(BRIDGE_UNTRACKED, "bridge_untracked", "sagas re-sent at the base cadence: no slot") \
	X(BRIDGE_ROTATES, "bridge_rotates", "ME leader guesses moved on: no answer")         \
	X(GW_REROUTES_OWNER, "gw_reroutes_owner", "messages re-routed to a NOT_OWNER's owner") \
	X(GW_REROUTES_LEADER, "gw_reroutes_leader", "messages re-sent to a new leader hint") \
	X(GW_REROUTE_GIVEUPS, "gw_reroute_giveups", "refusals passed on after GW_HOPS_MAX")  \
	X(GW_OVERRIDES_DROPPED, "gw_overrides_dropped", "owner overrides dropped: new epoch") \
	X(FWD_SENT, "fwd_sent", "admin commands forwarded to another node's leader")       \
	X(FWD_RESENT, "fwd_resent", "forwarded commands sent again (no answer, a hint)")   \
	X(FWD_ANSWERED, "fwd_answered", "answers to commands forwarded from here")         \
	X(FWD_LATE, "fwd_late", "answers to forwarded commands no longer waiting")         \
	X(FWD_PROPOSED, "fwd_proposed", "forwarded commands proposed here as leader")      \
	X(FWD_DUP, "fwd_dup", "forwarded re-sends already in the log (answered, not proposed)") \
	X(FWD_REFUSED, "fwd_refused", "forwarded commands refused (not leader, busy, bad)") \
	X(FWD_APPLIED, "fwd_applied", "forwarded entries applied")                          \
	X(FWD_REPLIED, "fwd_replied", "forwarded entries answered to their origin (leader)") \
	X(ADMIN_NOT_FROM_NODE, "admin_not_from_node",                                      \
	  "admin or forwarded-admin messages from a non-peer address, dropped")             \
	X(PLACE_TRANSFERS, "placement_transfers",                                          \
	  "leadership transfers placement started (to a better node)")                     \
	X(PLACE_REFUSED, "placement_refused", "placement transfers cns_transfer refused")   \
	X(PLACE_SKIPPED_BEHIND, "placement_skipped_behind",                                \
	  "placement checks that passed over a better node: behind or not heard")          \
	X(PLACE_SKIPPED_SETTLING, "placement_skipped_settling",                            \
	  "placement checks that waited: a better node caught up for less than settle_ms") \
	X(PLACE_SKIPPED_NOT_VOTER, "placement_skipped_not_voter",                          \
	  "placement checks that passed over a better node: not a voter")                  \
	X(PLACE_SKIPPED_BUSY, "placement_skipped_busy",                                    \
	  "placement checks that waited: a membership change or transfer in progress")     \
	X(PLACE_SKIPPED_UNKNOWN, "placement_skipped_unknown",                              \
	  "placement checks with no preference: colocate and no ME leader known")

enum shard_counter {
#define SC_ENUM(name, label, help) SC_##name,
	SHARD_COUNTERS(SC_ENUM)
#undef SC_ENUM
	SC_COUNT,
};

#define USERS_SLOTS (1u << 16)    /* user tables: a cache, the home slot is overwritten */
#define PQ_MAX 256                /* inline persistence answers waiting to be proposed */
#define PQ_MSG_MAX 872            /* largest answer (wire_hydrate_user) */
#define ASSETS_WATCH 8            /* assets whose sums the stats show */
#define LAT_SLOTS 4096            /* latency tracker: client requests followed at once */

static_assert(sizeof(struct wire_hydrate_user) <= PQ_MSG_MAX, "PQ_MSG_MAX");

/* User table entry (a cache). */
struct user_ent {
	uint64_t user;               /* 0: free */
	uint32_t node;               /* OMS: gateway node that forwarded the user's last message */
	uint32_t session;            /* gateway: frame sender id of the client */
	struct dp_addr addr;         /* gateway: the client's address */
	uint16_t authed;             /* gateway: session is a logged-on session's id: answers
					go where it is, under its key */
	uint16_t reserved[3];
};

struct pq_ent {
	_Alignas(8) uint8_t msg[PQ_MSG_MAX];
};

/* Client reports lost with a leader: an ACK, NAK or EXEC_REPORT the old leader emitted but
 * had not put on the wire when it died is never emitted again (the new leader applied that
 * entry as a follower, with egress discarded). So every OMS replica keeps its newest
 * report_ring numbered client messages (a per-user seq: every ACK and EXEC_REPORT, a NAK to
 * a resident user), and a new leader re-sends those emitted within REPORT_RESEND_NS of
 * cluster time before the newest one. Clients tell a re-sent report they already have from
 * one that fills a hole by the per-user sequence (tools/client.c). The ring holds
 * [limits] report_ring entries (144 B each): the retention bound of REPORT_REPLAY is that many
 * numbered answers of the shard, whatever their age (docs/appliance.md, "Report replay").
 *
 * Each entry links to the previous one of its user (prev, an absolute position), and a
 * 4-way set-associative table of the users' newest positions (report_heads, as many slots as
 * the ring has entries) starts the walk, so a REPLAY costs the user's entries in the ring,
 * not the ring: a whole-ring pass per request (65,536 entries, on the shard lcore) made a
 * client that asked for every user's tail stall the shard for seconds. A user pushed out of
 * the table (four others in its set with newer entries) is found by the whole-ring pass. */
#define REPORT_NONE UINT64_MAX /* no previous entry */
#define REPORT_WAYS 4u

struct report_head {
	uint64_t user; /* 0: free */
	uint64_t last; /* its newest entry's absolute position */
};

struct report_ent {
	uint64_t time_ns; /* cluster time: the report's, the ACK's admission, else the last */
	uint64_t user;    /* its user and per-user seq (REPORT_REPLAY looks them up) */
	uint64_t seq;
	uint64_t prev;    /* the user's previous entry (absolute position) or REPORT_NONE */
	union {
		struct wire_msg_hdr hdr;
		struct wire_ack ack;
		struct wire_nak nak;
		struct wire_exec_report rep;
	} m;
};

/* Transfers a client sent through the gateway (WIRE_TRANSFER_F_ROUTE). ADMIN_REPLY names only
 * the transfer id, so both ends key on it: the OMS leader remembers which gateway forwarded a
 * transfer, the gateway which client sent it (and the message, to re-route it on NOT_OWNER or
 * NOT_LEADER without waiting for the client's retry). Both are caches like the user tables:
 * a lost entry costs the client one retransmission (the OMS is idempotent on the id). */
#define XFER_SLOTS (1u << 12)

struct xfer_ent {
	uint64_t id;                 /* transfer id; 0: free */
	uint64_t user;
	uint32_t node;               /* OMS: gateway node that forwarded it */
	uint32_t session;            /* gateway: the client's frame sender id */
	struct dp_addr addr;         /* gateway: the client's address */
	uint16_t tries;              /* gateway: routes so far */
	uint16_t authed;             /* gateway: session is a logged-on session's id */
	struct wire_transfer msg;    /* gateway: the request as the client sent it */
};

/* OMS leader: latency of client requests from their proposal on this lcore to the ACK and,
 * for an order, to the report that settles it after the ME (app_reqlat.c), keyed by (user,
 * clOrdId) in a fixed table (a cache: a full probe window overwrites an entry and counts
 * it). The histograms are single-writer; mgmt copies them whole (a torn copy is off by an
 * in-flight record). */
struct lat_table {
	struct app_reqtab_ent e[LAT_SLOTS]; /* t0: dp_clock_ns when proposed; acked: the ACK
					     * seen (its latency recorded); opens: an order */
	struct hist ack;             /* proposed → ACK emitted, ns */
	struct hist final;           /* order proposed → OPEN or its last report, ns */
	uint64_t overwritten;        /* entries lost to a full probe window */
};

/* Leadership placement on the shard lcore (app_placement.c): what the last check saw. */
struct app_place_state {
	uint64_t last_check_ns;      /* cluster time of the last check */
	uint64_t term;               /* the term track belongs to (leader) */
	uint64_t hold_until_ns;      /* no transfer before this: one was started (by us or
					another) and may still run */
	uint64_t transfers_seen;     /* cns TRANSFERS counter at the last check */
	struct app_place_rank rank;  /* the preferred leaders, best first */
	struct app_place_track track; /* leader: members caught up, since when */
};

/* The id of the gateway lcore's app_shard ([gateway]): no shard's (< DP_SHARDS_MAX). */
#define APP_GATEWAY_ID UINT16_MAX

struct app_shard {
	struct app *app;
	const struct app_shard_conf *conf; /* NULL: the gateway lcore */
	uint32_t index;              /* in app->shards */
	uint16_t id;                 /* shard id; APP_GATEWAY_ID: the gateway lcore */
	uint32_t self;               /* our node id */
	bool is_oms;
	bool is_gateway;             /* this lcore runs the node's gateway */
	bool gw_direct;              /* the gateway is proposing to its own shard (app_gateway.c) */
	bool route_reader;           /* the gateway lcore: routes by app->route (RCU) */
	bool route_pub;              /* the OMS lcore that publishes app->route */
	uint64_t route_pub_epoch;    /* route_pub: the routing epoch published last */
	struct app_shard_wires w;    /* inboxes and outboxes, handed over by the wiring */
	uint32_t frame_cap;          /* bytes of a frame we build */

	struct cns *cns;
	struct cns_memlog *log;
	void *svc;                   /* struct oms * or struct me * */
	void *cns_mem, *log_mem, *svc_mem;
	struct svc_sink sink;
	/* [durability] mode = durable: the file log (persist/) behind the memory log. */
	struct pst_log *plog;        /* at boot only; then the writer's (logw) */
	struct app_logw *logw;       /* the file log's writer; NULL: memory only */
	uint64_t flog_pushed;        /* the last index handed to the writer */
	bool flog_inline;            /* no persister here: this lcore drains the writer */
	char vote_dir[APP_STR_MAX + 32];
	char snap_dir[APP_STR_MAX + 32];
	uint64_t snap_file_index;    /* newest snapshot whose file is durable */
	uint64_t flog_compact_want;  /* the highest compaction consensus asked of the file log */
	uint64_t flog_compacted;     /* the highest compaction handed to the writer */
	uint64_t flog_await;         /* a snapshot replaced the log at this index: nothing is
					handed over until its file is durable (0: none) */
	bool flog_discard;           /* the log is being replaced (truncate, then compact) */
	bool snap_taking;            /* inside cns_snapshot_take/end (not an install) */
	/* [limits] snapshot_by = fork: the child serialising the state at the pending index
	 * (app_shard_cmd.c), and a control-socket snapshot waiting for it. */
	struct pst_fork snapfork;
	bool snapfork_ok;            /* snapfork was initialised */
	struct app_cmd *snap_cmd;
	size_t svc_size, cns_size;   /* svc_mem and cns_mem sizes (pst_mem_*) */
	/* [limits] snapshot_by = shadow: the copy of the service (app_shadow.h), fed by
	 * wrap_apply and wrap_tick, seeded by wrap_restore and by a snapshot taken without it. */
	struct app_shadow *shadow;
	void *shadow_mem;            /* the copy's memory (svc_size bytes) */
	void *shadow_svc;            /* the copy */
	void *shadow_base;           /* a snapshot taken without the copy: its service bytes,
					which seed the copy once it ends (shadow_seeding) */
	bool shadow_seeding;
	uint64_t shadow_hash;        /* DCHECK builds: the service's state hash at the post */
	uint64_t shadow_digest;      /* the service's app_shard_digest at the post */
	bool shadow_lost_seen;       /* the copy's loss is counted */
	/* After a snapshot child is reaped the service's pages the lcore wrote meanwhile are
	 * split into 4 KiB entries (copy-on-write), and the next fork copies each: main puts
	 * them back on huge pages (app_shard_collapse_tick), a slice per tick. */
	uint32_t collapse_req;       /* this lcore: children reaped (relaxed atomic) */
	uint32_t collapse_gen;       /* main: the last request it took */
	bool collapsing;             /* main: a pass is under way */
	size_t collapse_off;         /* main: where it is */
	bool snap_job_take;          /* the snapshot file being written was taken here */
	/* The Raft hard state goes to disk through the file log's writer (app_flog.c): until
	 * the writer has saved the last vote handed to it, this member's Raft messages wait
	 * in `held` and nothing is reported durable. */
	uint64_t vote_ticket;        /* the last vote handed to the writer */
	uint64_t vote_saved;         /* the writer's count of votes saved, last read */
	uint64_t vote_failed_seen;   /* the writer's vote_failed counter, last read */
	bool vote_failing;           /* a save failed (said CRIT) and none succeeded since */
	uint32_t held_len;           /* bytes of held in use */
	uint8_t *held;               /* Raft messages waiting for the vote (APP_RAFT_HOLD) */
	/* The file log's writer thread (a node with a [persister]: app_flog.c). */
	pthread_t wt_tid;
	bool wt_running;
	uint32_t wt_stop;            /* set at exit (atomic) */
	struct dp_idle wt_idle;      /* it sleeps on wt_bell between hand-overs */
	struct dp_bell wt_bell;      /* rung by what the shard hands over */

	uint64_t now;                /* cluster clock of this cycle */
	bool leader;                 /* leader during this cycle's apply */
	bool roles_ready;            /* OMS: bridge rebuilt in the current term */
	uint64_t durable_index;      /* last (index, term) reported durable */
	uint64_t durable_term;
	uint64_t snap_index;         /* applied index of the last snapshot */
	uint64_t bridge_term;        /* OMS: term the bridge was rebuilt in */
	uint64_t boot_term;          /* term the bootstrap config was proposed in */
	uint64_t redrive_ns;         /* bridge_redrive_ms */
	uint64_t last_redrive;       /* cluster time of the last re-drive pass */
	uint64_t last_persist_redrive; /* ... that re-sent the persister's requests */
	struct app_rdq rdq;          /* OMS leader: each saga's re-drive back-off */
	void *rdq_mem;
	struct app_gwr gwr;          /* gateway: owner overrides, requests in flight */
	struct app_gw_sess *sess;    /* gateway: client sessions (app_session.c) */
	void *gwr_mem;
	uint64_t last_agg;           /* cluster time of the last stats aggregate */
	/* OMS: the asset sums of the stats, an exact pass over the actor slots AGG_SLICE a
	 * cycle, kept only if nothing was applied meanwhile (app_shard.c asset_pass). */
	bool agg_pass;               /* a pass is under way */
	uint32_t agg_cursor;         /* its next actor slot */
	uint64_t agg_msgs;           /* the service's messages applied when it (re)started */
	uint64_t last_pass;          /* cluster time the last pass started */
	int64_t agg_sum[ASSETS_WATCH];
	uint64_t last_ready;         /* cluster time pub_ready was last computed */

	uint32_t oms_node[DP_SHARDS_MAX]; /* ME: node that last sent for OMS shard i */
	uint16_t me_shards[DP_SHARDS_MAX]; /* OMS: ME shards to ask for replays */
	uint32_t me_shard_count;
	uint64_t me_heard[DP_SHARDS_MAX]; /* OMS: when an ME shard's leader last sent us
					     something (its events, results, snapshots) */
	struct dp_addr admin_addr;   /* where admin replies go: the last admin sender */

	struct user_ent *users;      /* OMS: user → gateway node */
	struct user_ent *clients;    /* gateway: user → client address */
	struct xfer_ent *xfers;      /* gateway: transfer → client */
	struct xfer_ent *xorigin;    /* OMS: transfer → gateway node */
	struct report_ent *reports;  /* OMS: the newest report_ring numbered client messages */
	uint64_t report_count;       /* reports ever kept (ring position) */
	uint64_t report_last_ns;     /* the newest kept one's time_ns (0 before the first) */
	uint64_t report_ring;        /* entries in reports[] ([limits] report_ring, a power of
					two) */
	struct report_head *report_heads; /* [report_ring]: sets of REPORT_WAYS */
	struct app_lat *gwlat;       /* gateway: RX → answer latency of new orders */
	struct app_shed shed;        /* gateway: new orders refused past saturation */
	struct app_outbox ob;         /* frames being built */
	/* Control socket (docs/appliance.md): commands waiting for commit (from w.mgmt_rx). */
	struct app_cmd *cmd_wait[APP_CMD_PENDING_MAX];
	uint32_t cmd_wait_count;
	struct app_fwd_seen_table fwd_seen; /* forwarded commands seen (app_admin_fwd.c) */
	uint64_t apply_index;        /* log index of the entry being applied, 0: none */
	uint64_t apply_term;         /* its term */
	uint64_t clock_ns;           /* dp clock of this cycle (command deadlines) */
	struct pq_ent *pq;           /* no database: answers to propose */
	uint32_t pq_count;
	struct lat_table *lat;       /* OMS: request latency (leader) */
	struct app_place_state place; /* leadership placement (app_placement.c) */

	/* Published for the stats (written by this lcore only). */
	uint32_t pub_role;
	bool pub_ready;              /* the RX gate's readiness (app_shard_ready) */
	uint32_t pub_leader;
	uint64_t pub_term;
	uint64_t pub_commit;
	uint64_t pub_applied;
	uint64_t pub_last;           /* last log index */
	uint64_t pub_match[APP_MEMBERS_MAX]; /* leader: cns_match_index per pub_mem_ids[i] */
	/* The configuration in effect (cns_members), rewritten under a sequence count: odd
	 * while it is written (app_shard_pub_read retries). */
	uint32_t pub_mem_seq;
	uint32_t pub_mem_count;
	uint32_t pub_mem_learners;           /* bit i: pub_mem_ids[i] is a learner */
	uint32_t pub_mem_ids[APP_MEMBERS_MAX];
	uint64_t pub_mem_index;              /* its log index */
	struct cns_members mem_seen;         /* what was last published */
	uint64_t pub_route_epoch;
	uint64_t pub_inflight;
	uint64_t pub_resident;
	uint64_t pub_parked;         /* OMS: messages parked for a hydration now */
	uint64_t pub_cache[7];       /* OMS: oms_cache_info (idle, open, inflight, flushing,
					hydrating, waiting, cap) */
	uint64_t pub_resting;
	uint64_t pub_sagas_pending;  /* OMS leader: sagas in the re-drive queue (last pass) */
	uint64_t pub_sagas_old;      /* of which began [timers] saga_old_ms ago or more */
	uint64_t pub_saga_oldest_ns; /* age of the oldest, cluster time */
	uint32_t pub_place_pref;     /* placement: the preferred leader, 0: none */
	uint32_t pub_place_verdict;  /* placement: enum app_place_verdict of the last check */
	uint32_t assets[ASSETS_WATCH];
	uint32_t asset_count;
	int64_t pub_asset_sum[ASSETS_WATCH];
	int64_t pub_asset_fees[ASSETS_WATCH];
	uint64_t pub_asset_applied;  /* the applied index pub_asset_sum/fees are exact at */
	uint64_t c[SC_COUNT];
} __rte_cache_aligned;

#define PUB(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* Add n to counter c (single writer: this lcore). */
static inline void
sc_add(struct app_shard *s, enum shard_counter c, uint64_t n)
{
	__atomic_store_n(&s->c[c], s->c[c] + n, __ATOMIC_RELAXED);
}

/* What a gateway routes and an OMS shard accepts in INGRESS: order entry, REPORT_REPLAY,
 * and transfers a client asked the gateway to route (the session messages of the gateway
 * class stay at the gateway). */
static inline bool
app_is_routed_type(const struct wire_msg_hdr *msg)
{
	switch (msg->type) {
	case WIRE_NEW_ORDER:
	case WIRE_CANCEL:
	case WIRE_AMEND:
	case WIRE_CANCEL_REPLACE:
	case WIRE_REPORT_REPLAY:
		return true;
	case WIRE_TRANSFER:
		return (msg->flags & WIRE_TRANSFER_F_ROUTE) != 0;
	default:
		return false;
	}
}

/* The user of a client message (every client message starts with the user). */
static inline uint64_t
app_msg_user(const struct wire_msg_hdr *msg)
{
	uint64_t user;
	memcpy(&user, msg + 1, sizeof(user));
	return user;
}

/* app_shard_tables.c: user and transfer tables, open addressing over a fixed slab; a full
 * probe window overwrites the home slot (they are caches: a lost entry means a default
 * route, never a wrong one). NULL only when !insert and the key is absent. */
struct user_ent *app_user_slot(struct user_ent *t, uint64_t user, bool insert);
struct xfer_ent *app_xfer_slot(struct xfer_ent *t, uint64_t id, bool insert);

/* app_shard_send.c: nodes, leader hints, sends and proposals (counted). */
bool app_node_known(const struct app *app, uint32_t node);
uint32_t app_leader_guess(const struct app *app, uint16_t shard);
void app_leader_rotate(struct app *app, uint16_t shard, uint32_t bad);
void app_send_node(struct app_shard *s, uint32_t node, uint16_t cls, uint16_t shard,
		   const struct wire_msg_hdr *msg);
void app_send_node_tail(struct app_shard *s, uint32_t node, uint16_t cls, uint16_t shard,
			const struct wire_msg_hdr *msg, const void *tail, uint16_t tail_len);
int app_shard_propose(struct app_shard *s, const struct wire_msg_hdr *msg);
void app_shard_host_send(void *ctx, uint32_t to, const struct wire_msg_hdr *msg);

/* app_gateway.c: client order entry in, answers out to clients. session: the logged-on
 * session the message came in (its answers go there, under its key), 0 outside one.
 * app_gw_order returns 0 (routed) or the reason the client is answered with (a new order
 * shed past saturation: WIRE_REASON_BACKPRESSURE, app_shed.h). */
uint16_t app_gw_order(struct app_shard *s, const struct dp_meta *meta,
		      const struct wire_msg_hdr *msg, uint32_t session);
void app_gw_client(struct app_shard *s, const struct wire_msg_hdr *msg);
void app_gw_to_gateway(struct app_shard *s, uint32_t node, const struct wire_msg_hdr *msg);
size_t app_gw_footprint(void);                 /* bytes app_gw_init needs */

/* app_session.c: client sessions at the gateway (docs/security.md). */
int app_session_init(struct app_shard *s);      /* 0 or -ENOMEM */
void app_session_fini(struct app_shard *s);
/* A frame of the gateway class from a client: LOGON, session frames, and (with
 * allow_unauthenticated) order entry outside a session; everything else refused. */
void app_session_frame(struct app_shard *s, struct rte_mbuf *m, const struct dp_meta *meta);
/* Once a cycle: adopt a new key set (ending revoked sessions), end idle sessions. */
void app_session_duty(struct app_shard *s);
/* Where a session's answers go and under which key; false when it has ended. */
bool app_session_route(struct app_shard *s, uint32_t session, struct dp_addr *to,
		       const struct wire_key **key);
void app_session_stats_write(const struct app_shard *s, FILE *out);
int app_gw_init(struct app_shard *s, void *mem); /* 0 or -EINVAL */

/* app_reqlat.c: request latency on the OMS leader. */
void app_reqlat_begin(struct app_shard *s, const struct wire_msg_hdr *in);
void app_reqlat_end(struct app_shard *s, const struct wire_msg_hdr *msg);

/* app_inline_persist.c: persistence without a database. */
void app_inline_persist_answer(struct app_shard *s, const struct wire_msg_hdr *msg);
uint32_t app_inline_persist_drain(struct app_shard *s);

/* app_shard_cmd.c: control-socket commands. */
void app_cmd_admin_reply(struct app_shard *s, const struct wire_admin_reply *r);
uint32_t app_cmd_work(struct app_shard *s);
int app_shard_snapshot_take(struct app_shard *s);
/* A few counts of a service's state, read in O(1): the shadow copy's snapshots are checked
 * against the service's (app_shard_setup.c). */
uint64_t app_shard_digest(const struct app_shard *s, const void *svc);
/* Collect a snapshot child's or the shadow copy's result, count a lost copy (each
 * cycle; cheap while they run). */
void app_shard_snapshot_poll(struct app_shard *s);
/* Publish the configuration in effect and the leader's match indexes (app_shard_stats.c). */
void app_shard_pub_members(struct app_shard *s);
/* Give c back to main, answered st (counted). */
void app_cmd_give(struct app_shard *s, struct app_cmd *c, enum app_cmd_status st);
/* Take cmd_wait[i] out of the waiting commands. */
void app_cmd_unwait(struct app_shard *s, uint32_t i);
/* Complete admin message m from this replica as flags (APP_CMD_ROUTE_MERGE, _SCALE,
 * _SYMBOL_FILL) ask, before it is proposed. 0; -EINVAL: the flags do not fit the message
 * or the service; -ENOENT: a symbol this replica cannot fill (REJECTED UNKNOWN_SYMBOL). */
int app_cmd_fill(struct app_shard *s, struct wire_msg_hdr *m, uint32_t flags);

/* app_admin_fwd.c: admin commands forwarded between nodes. Origin: a command for a shard
 * not led here (start: into cmd_wait; settle: re-sends and the deadline, true when c is
 * done with *st). Leader and members: FORWARDED_ADMIN and FORWARDED_REPLY in (from a
 * node's address only), and the apply of a forwarded entry (wrap_apply hands the service
 * the wrapped message through fa's sink between begin and end; begin returns NULL for an
 * entry that is not the service's, which is then skipped). */
void app_fwd_cmd_start(struct app_shard *s, struct app_cmd *c);
bool app_fwd_cmd_settle(struct app_shard *s, struct app_cmd *c, enum app_cmd_status *st);
void app_fwd_msg_in(struct app_shard *s, const struct dp_meta *meta,
		    const struct wire_msg_hdr *msg);
/* Leader: answer the forwarded member changes whose configuration entry committed (one
 * pass over the table, only while one waits); the number answered. */
uint32_t app_fwd_members_settle(struct app_shard *s);
/* The member (leader, or the one it was) that started forwarded leadership transfers:
 * answer those whose target now leads (OK) or that consensus gave up (BUSY), forget those
 * another leader now decides (one pass over the table, only while one waits); the number
 * answered. */
uint32_t app_fwd_transfers_settle(struct app_shard *s);
struct app_fwd_apply {
	struct svc_sink sink;         /* what the service emits into */
	struct svc_sink *down;        /* the lcore's sink (app_egress_emit) */
	struct app_shard *s;
	const struct wire_fwd_admin *m; /* the entry's FORWARDED_ADMIN */
	bool replied;                 /* the service emitted its ADMIN_REPLY */
	struct wire_admin_reply reply;  /* that reply */
};
const struct wire_msg_hdr *app_fwd_apply_begin(struct app_shard *s, struct app_fwd_apply *fa,
					       const struct wire_msg_hdr *msg,
					       struct svc_sink *down);
void app_fwd_apply_end(struct app_fwd_apply *fa);

/* app_egress.c: the service's sink and the routes of applied entries. */
void app_egress_route(struct app_shard *s, enum wire_dest dest, const struct wire_msg_hdr *msg);
void app_egress_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg);
void app_egress_reports_resend(struct app_shard *s);
/* Re-send to node's gateway the kept answers a REPORT_REPLAY asks for (any member). */
void app_egress_replay(struct app_shard *s, uint32_t node, const struct wire_report_replay *r);

/* app_placement.c: leadership placement, once per cycle (a clock compare; a check every
 * [placement] check_ms). */
void app_placement_tick(struct app_shard *s);

/* app_bridge.c: bootstrap, bridge rebuild and re-drives, once per cycle. */
void app_bridge_tick(struct app_shard *s);

/* app_ingress.c: one frame from the rx or local ring (freed here). */
void app_ingress_frame(struct app_shard *s, struct rte_mbuf *m);
/* One client message from the gateway of node origin, as an INGRESS's inner message is
 * taken: remembered (the user's gateway node, a transfer's), proposed, NAKed to origin when
 * it cannot be. The gateway calls it for its own OMS shard (origin: this node). */
void app_ingress_client(struct app_shard *s, uint32_t origin, const struct wire_msg_hdr *in);

/* app_flog.c: durable mode's log store, and durability reports to consensus. */
extern const struct cns_log_ops app_flog_ops;
int app_flog_boot(struct app_shard *s, struct cns_boot *boot, struct cns_snapshot_meta *snap,
		  void **snap_data);
void app_flog_snapshot_saved(void *ctx, const struct cns_snapshot_meta *meta, const void *data);
void app_flog_host_send(void *ctx, uint32_t to, const struct wire_msg_hdr *msg);
void app_flog_durable_report(struct app_shard *s);
void app_flog_say(void *ctx, bool crit, const char *text); /* the writer's words (any lcore) */
void app_flog_stop(struct app_shard *s); /* join the writer thread (exit; idempotent) */
bool app_flog_snap_busy(struct app_shard *s); /* a snapshot file is still being written */

/* app_shard.c: the duty cycle and the service adapter. */
extern const struct svc_ops app_shard_svc_ops;
uint32_t app_shard_do_work(void *arg, uint64_t now_ns);
/* A burst of frames from ring (an inbox), each taken by app_ingress_frame; how many. */
uint32_t app_shard_take(struct app_shard *s, struct rte_ring *ring);
/* app_gateway.c: the gateway lcore's cycle ([gateway]). */
uint32_t app_gateway_do_work(void *arg, uint64_t now_ns);

#endif

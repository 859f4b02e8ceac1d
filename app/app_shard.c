/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shard lcore: one Raft member (consensus/) hosting one service (oms/ or me/), plus the
 * host roles that must read that service's state and therefore live on the same lcore
 * (docs/appliance.md):
 *
 *   - consensus: Raft messages → cns_step; service ingress → cns_propose; cns_tick every
 *     cycle; the in-memory log (cns_memlog) reports an entry durable as soon as it is
 *     appended; cns_apply, bounded; a snapshot every [limits] snapshot_entries entries.
 *   - egress: the service emits on every member; only the leader's egress leaves
 *     (ARCHITECTURE.md §3), batched per destination into frames, never blocking.
 *   - bridge (OMS shards): once the leader has committed an entry of its term and applied
 *     everything, it rebuilds its queue from the PENDING sagas and re-sends them, with a
 *     REPLAY_REQUEST per ME shard, and again every [timers] bridge_redrive_ms.
 *   - bootstrap: a leader with current state proposes the configured SYMBOL_CONFIGs (and,
 *     on an OMS shard behind the configured epoch, the ROUTING_CONFIG), once per term.
 *   - persistence without a database: HYDRATE_REQUEST → HYDRATE_USER NEW, BEGIN_DEHYDRATE
 *     → FLUSH_COMPLETE OK, RELEASE_CLAIM → RELEASE_DONE OK, proposed back into the log.
 *   - gateway (on the node's gateway lcore, the first OMS shard): client order entry is
 *     wrapped into INGRESS and sent to the owning OMS shard's leader; client-class answers
 *     are forwarded to the client address the user last came from.
 *
 * Everything between lcores of one node travels as frames in mbufs on the receiving
 * lcore's "local" ring (multi-producer), with the same layout and dp_meta as frames from
 * the port, so a shard cannot tell a local peer from a remote one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <rte_byteorder.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_ring.h>

#include "app.h"
#include "mgmt/mgmt.h"
#include "common/check.h"
#include "common/hrw.h"
#include "consensus/cns.h"
#include "me/me.h"
#include "oms/oms.h"
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
	X(GW_OUT, "gw_out", "answers forwarded to clients")                               \
	X(GW_NO_CLIENT, "gw_no_client", "answers for a user this gateway does not know")   \
	X(GW_XFER_IN, "gw_xfer_in", "client transfers routed by the gateway")              \
	X(GW_XFER_RESENT, "gw_xfer_resent", "transfers re-routed (NOT_OWNER, NOT_LEADER)")  \
	X(GW_XFER_REPLIES, "gw_xfer_replies", "transfer answers forwarded to clients")      \
	X(LEADER_HINTS, "leader_hints", "NOT_LEADER answers taken as leader hints")        \
	X(BRIDGE_REBUILDS, "bridge_rebuilds", "bridge queues rebuilt (new leader term)")   \
	X(BRIDGE_REDRIVES, "bridge_redrives", "re-drive rounds")                           \
	X(BRIDGE_RESENT, "bridge_resent", "messages re-sent by re-drives")                 \
	X(REPORTS_RESENT, "reports_resent", "recent client reports re-sent by a new leader") \
	X(BOOTSTRAPS, "bootstraps", "bootstrap config proposals")                         \
	X(PERSIST_ANSWERED, "persist_answered", "persistence requests answered inline")    \
	X(PERSIST_DROPPED, "persist_dropped", "persistence answers dropped (queue full)")  \
	X(SNAPSHOTS, "snapshots", "snapshots taken")                                       \
	X(SNAPSHOT_FAILED, "snapshot_failed", "snapshots that failed")                   \
	X(FLOG_ENTRIES, "flog_entries", "entries written to the file log")                \
	X(FLOG_ERRORS, "flog_errors", "file log writes that failed (retried)")            \
	X(FLOG_BOOT_ENTRIES, "flog_boot_entries", "entries recovered from the file log")    \
	X(MGMT_CMDS, "mgmt_cmds", "control-socket commands taken")                       \
	X(MGMT_OK, "mgmt_ok", "control-socket commands answered ok")                      \
	X(MGMT_REFUSED, "mgmt_refused", "control-socket commands answered otherwise")

enum shard_counter {
#define SC_ENUM(name, label, help) SC_##name,
	SHARD_COUNTERS(SC_ENUM)
#undef SC_ENUM
	SC_COUNT,
};

static const char *const sc_labels[SC_COUNT] = {
#define SC_LABEL(name, label, help) label,
	SHARD_COUNTERS(SC_LABEL)
#undef SC_LABEL
};

#define USERS_SLOTS (1u << 16)    /* user tables: a cache, the home slot is overwritten */
#define USERS_PROBE 8
#define PQ_MAX 256                /* inline persistence answers waiting to be proposed */
#define PQ_MSG_MAX 768            /* largest answer (wire_hydrate_user) */
#define ASSETS_WATCH 8            /* assets whose sums the stats show */
#define AGG_EVERY_NS (200 * 1000000ull) /* aggregate refresh for the stats */
#define READY_EVERY_NS (1000000ull)     /* pub_ready refresh (the RX gate's view) */
#define FLOG_BATCH_MAX 256        /* entries written to the file log per cycle */
#define FLOG_READ_BUF (1u << 20)  /* boot: bytes read from the file log at once */
#define LAT_SLOTS 4096            /* latency tracker: client requests followed at once */
#define LAT_PROBE 8
#define LAT_STALE_NS (60ull * 1000000000) /* an entry this old is reused (never finished) */

static_assert(sizeof(struct wire_hydrate_user) <= PQ_MSG_MAX, "PQ_MSG_MAX");

/* User table entry (a cache). */
struct user_ent {
	uint64_t user;               /* 0: free */
	uint32_t node;               /* OMS: gateway node that forwarded the user's last message */
	uint32_t session;            /* gateway: frame sender id of the client */
	struct dp_addr addr;         /* gateway: the client's address */
	uint16_t owner_hint;         /* gateway: NOT_OWNER answer, shard + 1; 0 = none */
	uint16_t reserved[3];
};

struct pq_ent {
	_Alignas(8) uint8_t msg[PQ_MSG_MAX];
};

/* Client reports lost with a leader: an EXEC_REPORT the old leader emitted but had not put
 * on the wire when it died is never emitted again (the new leader applied that entry as a
 * follower, with egress discarded). So every OMS replica keeps its newest REPORT_RING
 * reports, and a new leader re-sends those emitted within REPORT_RESEND_NS of cluster time
 * before the newest one. Clients tell a re-sent report they already have from one
 * that fills a hole by the per-user sequence (tools/client.c). */
#define REPORT_RING 1024u
#define REPORT_RESEND_NS (500ull * 1000000)

/* Transfers a client sent through the gateway (WIRE_TRANSFER_F_ROUTE). ADMIN_REPLY names only
 * the transfer id, so both ends key on it: the OMS leader remembers which gateway forwarded a
 * transfer, the gateway which client sent it (and the message, to re-route it on NOT_OWNER or
 * NOT_LEADER without waiting for the client's retry). Both are caches like the user tables:
 * a lost entry costs the client one retransmission (the OMS is idempotent on the id). */
#define XFER_SLOTS (1u << 12)
#define XFER_PROBE 4
#define XFER_TRIES 3              /* re-routes by the gateway before leaving it to the client */

struct xfer_ent {
	uint64_t id;                 /* transfer id; 0: free */
	uint64_t user;
	uint32_t node;               /* OMS: gateway node that forwarded it */
	uint32_t session;            /* gateway: the client's frame sender id */
	struct dp_addr addr;         /* gateway: the client's address */
	uint16_t tries;              /* gateway: routes so far */
	struct wire_transfer msg;    /* gateway: the request as the client sent it */
};

/* OMS leader: latency of client requests from their proposal on this lcore to the ACK and
 * to the final EXEC_REPORT it emits (issue 9), keyed by (user, clOrdId) in a fixed table
 * (a cache: a full probe window overwrites the home slot and counts it). The histograms
 * are single-writer; mgmt copies them whole (a torn copy is off by an in-flight record). */
struct lat_ent {
	uint64_t user;               /* 0: free */
	uint64_t cl_ord_id;
	uint64_t t0_ns;              /* dp_clock_ns when proposed */
	uint64_t acked;              /* ACK seen (its latency recorded) */
};

struct lat_table {
	struct lat_ent e[LAT_SLOTS];
	struct hist ack;             /* proposed → ACK emitted, ns */
	struct hist final;           /* proposed → final EXEC_REPORT emitted, ns */
	uint64_t overwritten;        /* entries lost to a full probe window */
};

struct app_shard {
	struct app *app;
	const struct app_shard_conf *conf;
	uint32_t index;              /* in app->shards */
	uint16_t id;                 /* shard id */
	uint32_t self;               /* our node id */
	bool is_oms;
	bool is_gateway;             /* this lcore runs the node's gateway */
	struct rte_ring *rx;         /* io → us */
	struct rte_ring *local;      /* other lcores of this node → us (MP/SC) */
	struct dp_txq *txq;          /* us → io */
	uint32_t frame_cap;          /* bytes of a frame we build */

	struct cns *cns;
	struct cns_memlog *log;
	void *svc;                   /* struct oms * or struct me * */
	void *cns_mem, *log_mem, *svc_mem;
	struct svc_sink sink;
	/* [durability] mode = durable: the file log (persist/) behind the memory log. */
	struct pst_log *plog;        /* NULL: memory only */
	char vote_dir[APP_STR_MAX + 32];
	char snap_dir[APP_STR_MAX + 32];
	struct pst_entry *pbatch;    /* FLOG_BATCH_MAX entries being written */

	uint64_t now;                /* cluster clock of this cycle */
	bool leader;                 /* leader during this cycle's apply */
	bool roles_ready;            /* OMS: bridge rebuilt in the current term */
	uint64_t durable_index;      /* last (index, term) reported durable */
	uint64_t durable_term;
	uint64_t snap_index;         /* applied index of the last snapshot */
	uint64_t bridge_term;        /* OMS: term the bridge was rebuilt in */
	uint64_t boot_term;          /* term the bootstrap config was proposed in */
	uint64_t redrive_ns;         /* bridge_redrive_ms */
	uint64_t last_redrive;       /* cluster time of the last re-drive */
	uint64_t last_agg;           /* cluster time of the last stats aggregate */
	uint64_t last_ready;         /* cluster time pub_ready was last computed */

	uint32_t oms_node[DP_SHARDS_MAX]; /* ME: node that last sent for OMS shard i */
	uint16_t me_shards[DP_SHARDS_MAX]; /* OMS: ME shards to ask for replays */
	uint32_t me_shard_count;
	struct dp_addr admin_addr;   /* where admin replies go: the last admin sender */

	struct user_ent *users;      /* OMS: user → gateway node */
	struct user_ent *clients;    /* gateway: user → client address */
	struct xfer_ent *xfers;      /* gateway: transfer → client */
	struct xfer_ent *xorigin;    /* OMS: transfer → gateway node */
	struct wire_exec_report *reports; /* OMS: the newest REPORT_RING client reports */
	uint64_t report_count;       /* reports ever kept (ring position) */
	struct app_lat *gwlat;       /* gateway: RX → answer latency of new orders */
	struct app_outbox ob;         /* frames being built */
	/* Control socket (docs/appliance.md): commands from main, those waiting for commit. */
	struct rte_ring *mgmt_rx;    /* main → us (SP/SC) */
	struct app_cmd *cmd_wait[APP_CMD_PENDING_MAX];
	uint32_t cmd_wait_count;
	uint64_t apply_index;        /* log index of the entry being applied, 0: none */
	uint64_t apply_term;         /* its term */
	uint64_t clock_ns;           /* dp clock of this cycle (command deadlines) */
	struct pq_ent *pq;           /* no database: answers to propose */
	uint32_t pq_count;
	struct lat_table *lat;       /* OMS: request latency (leader) */

	/* Published for the stats (written by this lcore only). */
	uint32_t pub_role;
	bool pub_ready;              /* the RX gate's readiness (app_shard_ready) */
	uint32_t pub_leader;
	uint64_t pub_term;
	uint64_t pub_commit;
	uint64_t pub_applied;
	uint64_t pub_last;           /* last log index */
	uint64_t pub_match[APP_MEMBERS_MAX]; /* leader: cns_match_index per conf->members[i] */
	uint64_t pub_route_epoch;
	uint64_t pub_inflight;
	uint64_t pub_resident;
	uint64_t pub_parked;         /* OMS: messages parked for a hydration now */
	uint64_t pub_resting;
	uint32_t assets[ASSETS_WATCH];
	uint32_t asset_count;
	int64_t pub_asset_sum[ASSETS_WATCH];
	int64_t pub_asset_fees[ASSETS_WATCH];
	uint64_t c[SC_COUNT];
} __rte_cache_aligned;

#define PUB(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static inline void
count(struct app_shard *s, enum shard_counter c, uint64_t n)
{
	__atomic_store_n(&s->c[c], s->c[c] + n, __ATOMIC_RELAXED);
}

static inline uint64_t
msg_user(const struct wire_msg_hdr *msg)
{
	uint64_t user;
	memcpy(&user, msg + 1, sizeof(user)); /* every client message starts with the user */
	return user;
}

static bool
is_client_type(uint16_t type)
{
	return type == WIRE_NEW_ORDER || type == WIRE_CANCEL || type == WIRE_AMEND ||
	       type == WIRE_CANCEL_REPLACE;
}

/* What a gateway routes and an OMS shard accepts in INGRESS: order entry, and transfers a
 * client asked the gateway to route. */
static bool
is_routed_type(const struct wire_msg_hdr *msg)
{
	return is_client_type(msg->type) ||
	       (msg->type == WIRE_TRANSFER && (msg->flags & WIRE_TRANSFER_F_ROUTE) != 0);
}

static bool
is_admin_type(uint16_t type)
{
	switch (type) {
	case WIRE_ROUTING_CONFIG:
	case WIRE_SYMBOL_CONFIG:
	case WIRE_SYMBOL_STATUS:
	case WIRE_KILL_SWITCH:
	case WIRE_TRANSFER:
	case WIRE_WHALE_PIN:
	case WIRE_USER_ADMIN:
	case WIRE_SNAPSHOT_REQUEST:
		return true;
	default:
		return false;
	}
}

/* ---------------------------------------------------------------------------------------
 * User tables: open addressing over a fixed slab; a full probe window overwrites the home
 * slot (they are caches: a lost entry means a default route, never a wrong one).
 * ------------------------------------------------------------------------------------- */

static struct user_ent *
user_slot(struct user_ent *t, uint64_t user, bool insert)
{
	uint32_t home = (uint32_t)((user * UINT64_C(0x9E3779B97F4A7C15)) >> 48) & (USERS_SLOTS - 1);
	for (uint32_t p = 0; p < USERS_PROBE; p++) {
		struct user_ent *e = &t[(home + p) & (USERS_SLOTS - 1)];
		if (e->user == user)
			return e;
		if (e->user == 0) {
			if (!insert)
				return NULL;
			memset(e, 0, sizeof(*e));
			e->user = user;
			return e;
		}
	}
	if (!insert)
		return NULL;
	struct user_ent *e = &t[home];
	memset(e, 0, sizeof(*e));
	e->user = user;
	return e;
}

static struct xfer_ent *
xfer_slot(struct xfer_ent *t, uint64_t id, bool insert)
{
	uint32_t home = (uint32_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 52) & (XFER_SLOTS - 1);
	for (uint32_t p = 0; p < XFER_PROBE; p++) {
		struct xfer_ent *e = &t[(home + p) & (XFER_SLOTS - 1)];
		if (e->id == id)
			return e;
		if (e->id == 0) {
			if (!insert)
				return NULL;
			memset(e, 0, sizeof(*e));
			e->id = id;
			return e;
		}
	}
	if (!insert)
		return NULL;
	struct xfer_ent *e = &t[home];
	memset(e, 0, sizeof(*e));
	e->id = id;
	return e;
}

/* ---------------------------------------------------------------------------------------
 * Nodes, members, leader hints.
 * ------------------------------------------------------------------------------------- */

static bool
node_known(const struct app *app, uint32_t node)
{
	struct dp_addr a;
	return node != 0 && (node == app->cfg.dp.node_id || dp_peer_addr(app->dp, node, &a) == 0);
}

/* Members of shard: from the configuration when we host it, else every node we know. */
static uint32_t
members_of(const struct app *app, uint16_t shard, uint32_t *out)
{
	int idx = app->shard_index[shard];
	if (idx >= 0) {
		const struct app_shard_conf *sc = &app->cfg.shards[idx];
		memcpy(out, sc->members, sc->member_count * sizeof(uint32_t));
		return sc->member_count;
	}
	uint32_t n = 0;
	out[n++] = app->cfg.dp.node_id;
	for (uint32_t i = 0; i < app->cfg.dp.peer_count && n < DP_PEERS_MAX + 1; i++)
		out[n++] = app->cfg.dp.peers[i].node_id;
	return n;
}

static uint32_t
leader_guess(const struct app *app, uint16_t shard)
{
	uint32_t h = LOAD(app->leader_hint[shard]);
	if (h != 0)
		return h;
	uint32_t members[DP_PEERS_MAX + 1];
	members_of(app, shard, members);
	return members[0];
}

/* No usable hint: try the member after the one that failed us. */
static void
leader_rotate(struct app *app, uint16_t shard, uint32_t bad)
{
	uint32_t members[DP_PEERS_MAX + 1];
	uint32_t n = members_of(app, shard, members);
	uint32_t i = 0;
	while (i < n && members[i] != bad)
		i++;
	PUB(app->leader_hint[shard], members[(i + 1) % n]);
}

/* The local ring of the lcore of this node that takes (cls, shard), or NULL. */
static struct rte_ring *
local_target(const struct app *app, uint16_t cls, uint16_t shard)
{
	int idx;
	if (cls == DP_CLASS_GATEWAY || cls == DP_CLASS_CLIENT)
		idx = app->gateway_index;
	else if (shard >= DP_SHARDS_MAX)
		return NULL;
	else
		idx = app->shard_index[shard];
	if (idx < 0 || app->shards[idx] == NULL)
		return NULL;
	return app->shards[idx]->local;
}

/* Send msg (plus tail) to node as class cls for shard: a local lcore when node is us. */
static void
send_node(struct app_shard *s, uint32_t node, uint16_t cls, uint16_t shard,
	  const struct wire_msg_hdr *msg, const void *tail, uint16_t tail_len)
{
	if (node == s->self) {
		struct rte_ring *r = local_target(s->app, cls, shard);
		if (r == NULL) {
			count(s, SC_NO_ROUTE, 1);
			return;
		}
		app_outbox_add(&s->ob, r, NULL, cls, shard, msg, tail, tail_len);
		return;
	}
	struct dp_addr dst;
	if (dp_peer_addr(s->app->dp, node, &dst) != 0) {
		count(s, SC_NO_ROUTE, 1);
		return;
	}
	app_outbox_add(&s->ob, NULL, &dst, cls, shard, msg, tail, tail_len);
}

/* ---------------------------------------------------------------------------------------
 * Gateway.
 * ------------------------------------------------------------------------------------- */

/* The owner of user: the routing this node's OMS replica applied (routes and pins change
 * at run time through the control socket), else the configured routing. The gateway runs
 * on an OMS shard lcore, the only reader of that replica. */
static uint16_t
gw_owner(const struct app_shard *s, uint64_t user)
{
	if (s->is_oms && oms_route_epoch(s->svc) > 0)
		return oms_owner(s->svc, user);
	const struct app_routing_conf *r = &s->app->cfg.routing;
	for (uint32_t i = 0; i < r->pin_count; i++)
		if (r->pins[i].user == user)
			return r->pins[i].shard;
	return hrw_pick(user, r->shards, r->shard_count);
}

/* Wrap a client message in INGRESS and send it to the leader (hint) of shard. */
static void
gw_forward(struct app_shard *s, uint16_t shard, const struct wire_msg_hdr *msg)
{
	struct wire_ingress ing;
	memset(&ing, 0, sizeof(ing));
	wire_hdr_init(&ing.hdr, WIRE_INGRESS, shard);
	ing.origin = s->self;
	ing.tail_len = msg->length;
	send_node(s, leader_guess(s->app, shard), DP_CLASS_SHARD, shard, &ing.hdr, msg,
		  msg->length);
}

/* Client order entry (and routed transfers): remember where the user is, wrap, send to the
 * owner's leader. */
static void
gw_order(struct app_shard *s, const struct dp_meta *meta, const struct wire_msg_hdr *msg)
{
	uint64_t user = msg_user(msg);
	struct user_ent *e = user_slot(s->clients, user, true);
	e->addr = meta->src;
	e->session = meta->sender_id;
	uint16_t shard = e->owner_hint != 0 ? (uint16_t)(e->owner_hint - 1) : gw_owner(s, user);
	e->owner_hint = 0;
	app_lat_rx(s->gwlat, msg, meta->rx_tsc);
	if (msg->type == WIRE_TRANSFER) {
		const struct wire_transfer *t = (const void *)msg;
		struct xfer_ent *x = xfer_slot(s->xfers, t->transfer_id, true);
		x->user = user;
		x->addr = meta->src;
		x->session = meta->sender_id;
		x->tries = 1;
		x->msg = *t;
		count(s, SC_GW_XFER_IN, 1);
	} else {
		count(s, SC_GW_IN, 1);
	}
	gw_forward(s, shard, msg);
}

/* A routed transfer was refused for a reason the gateway can act on: route it again (to
 * the named owner, or to the new leader hint) a few times before leaving it to the client. */
static bool
gw_xfer_retry(struct app_shard *s, struct xfer_ent *x, uint16_t shard)
{
	if (x->tries >= XFER_TRIES || shard >= DP_SHARDS_MAX)
		return false;
	x->tries++;
	count(s, SC_GW_XFER_RESENT, 1);
	gw_forward(s, shard, &x->msg.hdr);
	return true;
}

/* The OMS leader's answer to a routed transfer: to the client that sent it. */
static void
gw_xfer_reply(struct app_shard *s, const struct wire_admin_reply *r)
{
	struct xfer_ent *x = xfer_slot(s->xfers, r->req_id, false);
	if (x == NULL) {
		count(s, SC_GW_NO_CLIENT, 1);
		return;
	}
	if (r->reason == WIRE_REASON_NOT_OWNER && r->value < DP_SHARDS_MAX &&
	    gw_xfer_retry(s, x, (uint16_t)r->value))
		return;
	count(s, SC_GW_XFER_REPLIES, 1);
	app_outbox_add(&s->ob, NULL, &x->addr, DP_CLASS_CLIENT, 0, &r->hdr, NULL, 0);
	x->id = 0;
}

/* An answer for a client (ACK, NAK, EXEC_REPORT, ...). NOT_LEADER answers teach the leader
 * hint of hdr.shard; NAKs with user 0 are hints only (bridge traffic refused). */
static void
gw_client(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	if (msg->type == WIRE_ADMIN_REPLY) {
		if (s->is_gateway)
			gw_xfer_reply(s, (const void *)msg);
		return;
	}
	if (msg->type == WIRE_NAK) {
		const struct wire_nak *n = (const void *)msg;
		if (n->reason == WIRE_REASON_NOT_LEADER && msg->shard < DP_SHARDS_MAX) {
			if (n->leader_node != 0 && node_known(s->app, n->leader_node))
				PUB(s->app->leader_hint[msg->shard], n->leader_node);
			else
				leader_rotate(s->app, msg->shard, leader_guess(s->app, msg->shard));
			count(s, SC_LEADER_HINTS, 1);
		}
		if (n->user == 0)
			return;
		/* A routed transfer the shard could not propose (NAKed with the transfer id in
		 * cl_ord_id): route it again to the new leader hint. */
		struct xfer_ent *x = s->is_gateway ? xfer_slot(s->xfers, n->cl_ord_id, false) : NULL;
		if (x != NULL && x->user == n->user) {
			if (n->reason == WIRE_REASON_NOT_LEADER)
				(void)gw_xfer_retry(s, x, msg->shard);
			return; /* the client matches transfers by ADMIN_REPLY only; it retries */
		}
		if (n->reason == WIRE_REASON_NOT_OWNER && n->owner_shard < DP_SHARDS_MAX) {
			struct user_ent *e = user_slot(s->clients, n->user, false);
			if (e != NULL)
				e->owner_hint = (uint16_t)(n->owner_shard + 1);
		}
	}
	if (msg->type != WIRE_ACK && msg->type != WIRE_NAK && msg->type != WIRE_EXEC_REPORT)
		return;
	struct user_ent *e = user_slot(s->clients, msg_user(msg), false);
	if (e == NULL) {
		count(s, SC_GW_NO_CLIENT, 1);
		return;
	}
	count(s, SC_GW_OUT, 1);
	app_lat_tx(s->gwlat, msg);
	app_outbox_add(&s->ob, NULL, &e->addr, DP_CLASS_CLIENT, 0, msg, NULL, 0);
}

/* Send a client-class message to node's gateway (ours directly). */
static void
to_gateway(struct app_shard *s, uint32_t node, const struct wire_msg_hdr *msg)
{
	if (node == s->self && s->is_gateway) {
		gw_client(s, msg);
		return;
	}
	send_node(s, node, DP_CLASS_CLIENT, msg->shard, msg, NULL, 0);
}

/* NAK a client message we could not propose, to the gateway that forwarded it. */
static void
nak(struct app_shard *s, uint32_t origin, const struct wire_msg_hdr *in, uint16_t reason)
{
	struct wire_nak n;
	memset(&n, 0, sizeof(n));
	wire_hdr_init(&n.hdr, WIRE_NAK, s->id);
	n.user = msg_user(in);
	memcpy(&n.cl_ord_id, (const uint8_t *)(in + 1) + 8, sizeof(n.cl_ord_id));
	n.reason = reason;
	n.leader_node = reason == WIRE_REASON_NOT_LEADER ? cns_leader(s->cns) : 0;
	n.route_epoch = s->app->cfg.routing.epoch;
	to_gateway(s, origin, &n.hdr);
}

/* ---------------------------------------------------------------------------------------
 * Request latency (OMS leader).
 * ------------------------------------------------------------------------------------- */

static struct lat_ent *
lat_slot(struct lat_table *t, uint64_t user, uint64_t cl, bool insert, uint64_t now)
{
	uint32_t home = (uint32_t)(((user ^ (cl * UINT64_C(0xff51afd7ed558ccd))) *
				    UINT64_C(0x9E3779B97F4A7C15)) >> 52) & (LAT_SLOTS - 1);
	struct lat_ent *spare = NULL;
	for (uint32_t p = 0; p < LAT_PROBE; p++) {
		struct lat_ent *e = &t->e[(home + p) & (LAT_SLOTS - 1)];
		if (e->user == user && e->cl_ord_id == cl)
			return e;
		if (spare == NULL && (e->user == 0 || now - e->t0_ns > LAT_STALE_NS))
			spare = e;
	}
	if (!insert)
		return NULL;
	if (spare == NULL) {
		spare = &t->e[home];
		t->overwritten++;
	}
	*spare = (struct lat_ent){ .user = user, .cl_ord_id = cl, .t0_ns = now };
	return spare;
}

/* A client request was proposed: start its clock (a retransmit keeps the first one). */
static void
lat_begin(struct app_shard *s, const struct wire_msg_hdr *in)
{
	uint64_t cl;
	memcpy(&cl, (const uint8_t *)(in + 1) + 8, sizeof(cl)); /* user, then clOrdId */
	if (s->lat != NULL)
		lat_slot(s->lat, msg_user(in), cl, true, dp_clock_ns());
}

static bool
exec_final(const struct wire_exec_report *r)
{
	return r->exec == WIRE_EXEC_REJECTED || r->exec == WIRE_EXEC_CANCELLED ||
	       r->exec == WIRE_EXEC_DONE || (r->exec == WIRE_EXEC_FILL && r->leaves_qty == 0);
}

/* The leader emits an answer for a client: ACK records ingress→ack, a final EXEC_REPORT
 * records order→final and frees the entry, a NAK frees it. */
static void
lat_end(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	struct lat_table *t = s->lat;
	if (t == NULL || (msg->type != WIRE_ACK && msg->type != WIRE_NAK &&
			  msg->type != WIRE_EXEC_REPORT))
		return;
	uint64_t cl;
	memcpy(&cl, (const uint8_t *)(msg + 1) + 8, sizeof(cl));
	uint64_t now = dp_clock_ns();
	struct lat_ent *e = lat_slot(t, msg_user(msg), cl, false, now);
	if (e == NULL)
		return;
	if (msg->type == WIRE_ACK) {
		if (!e->acked)
			hist_record(&t->ack, now - e->t0_ns);
		e->acked = 1;
		return;
	}
	if (msg->type == WIRE_EXEC_REPORT) {
		if (!exec_final((const struct wire_exec_report *)msg))
			return;
		hist_record(&t->final, now - e->t0_ns);
	}
	e->user = 0;
}

/* ---------------------------------------------------------------------------------------
 * Egress of applied entries (leader only).
 * ------------------------------------------------------------------------------------- */

static void persist_inline(struct app_shard *s, const struct wire_msg_hdr *msg);

static void
egress_route(struct app_shard *s, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	count(s, SC_EGRESS, 1);
	switch (dest) {
	case WIRE_DEST_CLIENT: {
		const struct user_ent *e = user_slot(s->users, msg_user(msg), false);
		if (e != NULL) {
			to_gateway(s, e->node, msg);
			break;
		}
		/* No gateway known (a new leader, a restart): every gateway gets it and the one
		 * that knows the user's address forwards it. */
		to_gateway(s, s->self, msg);
		for (uint32_t i = 0; i < s->app->cfg.dp.peer_count; i++)
			to_gateway(s, s->app->cfg.dp.peers[i].node_id, msg);
		break;
	}
	case WIRE_DEST_ME:
		if (!s->roles_ready) {
			count(s, SC_EGRESS_NOT_READY, 1);
			break;
		}
		if (msg->shard >= DP_SHARDS_MAX) {
			count(s, SC_NO_ROUTE, 1);
			break;
		}
		send_node(s, leader_guess(s->app, msg->shard), DP_CLASS_SHARD, msg->shard, msg,
			  NULL, 0);
		break;
	case WIRE_DEST_OMS: {
		if (msg->shard >= DP_SHARDS_MAX) {
			count(s, SC_NO_ROUTE, 1);
			break;
		}
		uint32_t node = s->oms_node[msg->shard];
		if (node == 0)
			node = leader_guess(s->app, msg->shard);
		send_node(s, node, DP_CLASS_BRIDGE, msg->shard, msg, NULL, 0);
		break;
	}
	case WIRE_DEST_PERSIST: {
		if (!s->roles_ready) {
			count(s, SC_EGRESS_NOT_READY, 1);
			break;
		}
		struct rte_ring *pr = app_persist_ring(s->app);
		if (pr != NULL)
			app_outbox_add(&s->ob, pr, NULL, DP_CLASS_SHARD, s->id, msg, NULL, 0);
		else
			persist_inline(s, msg);
		break;
	}
	case WIRE_DEST_ADMIN: {
		count(s, SC_EGRESS_ADMIN, 1);
		/* The answer to a transfer a gateway routed goes back through that gateway. */
		struct xfer_ent *x = msg->type == WIRE_ADMIN_REPLY && s->xorigin != NULL
					     ? xfer_slot(s->xorigin,
							 ((const struct wire_admin_reply *)msg)->req_id,
							 false)
					     : NULL;
		if (x != NULL) {
			uint32_t node = x->node;
			x->id = 0;
			to_gateway(s, node, msg);
			break;
		}
		if (s->admin_addr.ip_be != 0)
			app_outbox_add(&s->ob, NULL, &s->admin_addr, DP_CLASS_CLIENT, 0, msg,
				       NULL, 0);
		break;
	}
	default:
		count(s, SC_NO_ROUTE, 1);
		break;
	}
}

static void cmd_admin_reply(struct app_shard *s, const struct wire_admin_reply *r);

static void
sink_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct app_shard *s = ctx;
	if (dest == WIRE_DEST_CLIENT && msg->type == WIRE_EXEC_REPORT && s->reports != NULL) {
		s->reports[s->report_count % REPORT_RING] = *(const struct wire_exec_report *)msg;
		s->report_count++;
	}
	if (msg->type == WIRE_ADMIN_REPLY && s->cmd_wait_count > 0)
		cmd_admin_reply(s, (const void *)msg); /* on every member: commit is what counts */
	if (!s->leader) {
		count(s, SC_EGRESS_FOLLOWER, 1); /* ARCHITECTURE.md §3: only the leader's leaves */
		return;
	}
	if (dest == WIRE_DEST_CLIENT)
		lat_end(s, msg);
	egress_route(s, dest, msg);
}

/* Leadership gained: re-send the reports emitted within REPORT_RESEND_NS before the newest
 * one kept (what the old leader emitted last, before the election's silence), in the order
 * they were emitted (per-user sequences ascend). */
static void
reports_resend(struct app_shard *s)
{
	if (s->report_count == 0)
		return;
	uint64_t newest = s->reports[(s->report_count - 1) % REPORT_RING].time_ns;
	uint64_t first = s->report_count > REPORT_RING ? s->report_count - REPORT_RING : 0;
	for (uint64_t i = first; i < s->report_count; i++) {
		const struct wire_exec_report *r = &s->reports[i % REPORT_RING];
		if (r->time_ns + REPORT_RESEND_NS < newest)
			continue;
		egress_route(s, WIRE_DEST_CLIENT, &r->hdr);
		count(s, SC_REPORTS_RESENT, 1);
	}
}

/* ---------------------------------------------------------------------------------------
 * Persistence without a database (docs/appliance.md): every request succeeds at once.
 * ------------------------------------------------------------------------------------- */

static void
persist_inline(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	if (s->pq_count == PQ_MAX) {
		count(s, SC_PERSIST_DROPPED, 1); /* the re-drive asks again */
		return;
	}
	uint8_t *b = s->pq[s->pq_count].msg;
	memset(b, 0, PQ_MSG_MAX);
	switch (msg->type) {
	case WIRE_HYDRATE_REQUEST: {
		const struct wire_hydrate_request *r = (const void *)msg;
		struct wire_hydrate_user *h = (void *)b;
		wire_hdr_init(&h->hdr, WIRE_HYDRATE_USER, s->id);
		h->epoch = r->epoch;
		h->status = WIRE_HYD_NEW;
		h->state.user = r->user;
		break;
	}
	case WIRE_BEGIN_DEHYDRATE: {
		const struct wire_begin_dehydrate *r = (const void *)msg;
		struct wire_flush_complete *f = (void *)b;
		wire_hdr_init(&f->hdr, WIRE_FLUSH_COMPLETE, s->id);
		f->user = r->state.user;
		f->epoch = r->epoch;
		f->version = r->state.version + 1;
		f->status = WIRE_FLUSH_OK;
		break;
	}
	case WIRE_RELEASE_CLAIM: {
		const struct wire_release_claim *r = (const void *)msg;
		struct wire_release_claim *d = (void *)b;
		wire_hdr_init(&d->hdr, WIRE_RELEASE_DONE, s->id);
		d->user = r->user;
		d->epoch = r->epoch;
		d->status = WIRE_FLUSH_OK;
		break;
	}
	default:
		count(s, SC_NO_ROUTE, 1);
		return;
	}
	s->pq_count++;
	count(s, SC_PERSIST_ANSWERED, 1);
}

static uint32_t
pq_drain(struct app_shard *s)
{
	uint32_t done = 0;
	while (done < s->pq_count) {
		int rc = cns_propose(s->cns, s->now, (const void *)s->pq[done].msg);
		if (rc == -EAGAIN)
			break; /* keep the rest for the next cycle */
		done++;
	}
	if (done > 0 && done < s->pq_count)
		memmove(s->pq, s->pq + done, (s->pq_count - done) * sizeof(*s->pq));
	s->pq_count -= done;
	return done;
}

/* ---------------------------------------------------------------------------------------
 * Bridge and bootstrap.
 * ------------------------------------------------------------------------------------- */

static void
redrive_cb(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct app_shard *s = ctx;
	count(s, SC_BRIDGE_RESENT, 1);
	egress_route(s, dest, msg);
}

/* Re-send everything in flight from the leader's state (seed: the PENDING sagas are the
 * bridge's durable work queue) and ask every ME shard to replay our stream. */
static void
bridge_redrive(struct app_shard *s)
{
	const struct oms *oms = s->svc;
	oms_pending_foreach(oms, redrive_cb, s);
	oms_persist_foreach(oms, redrive_cb, s);
	for (uint32_t i = 0; i < s->me_shard_count; i++) {
		struct wire_replay_request rr;
		memset(&rr, 0, sizeof(rr));
		wire_hdr_init(&rr.hdr, WIRE_REPLAY_REQUEST, s->me_shards[i]);
		rr.stream = s->id;
		rr.from_seq = oms_stream_next_seq(oms, s->me_shards[i]);
		egress_route(s, WIRE_DEST_ME, &rr.hdr);
	}
	s->last_redrive = s->now;
	count(s, SC_BRIDGE_REDRIVES, 1);
}

/* The leader's state is current: it committed an entry of its own term (so it knows the
 * whole committed log) and applied all of it. */
static bool
state_current(const struct app_shard *s)
{
	uint64_t commit = cns_commit_index(s->cns);
	return cns_role(s->cns) == CNS_LEADER &&
	       cns_term_at(s->cns, commit) == cns_term(s->cns) &&
	       cns_applied_index(s->cns) == commit;
}

static int
propose_symbols(struct app_shard *s)
{
	const struct app_config *cfg = &s->app->cfg;
	for (uint32_t i = 0; i < cfg->symbol_count; i++) {
		const struct app_symbol_conf *y = &cfg->symbols[i];
		/* Only what the replica does not know yet: after the bootstrap the control
		 * socket owns symbol state (a halt must survive a change of leader). */
		struct oms_symbol_info oy;
		struct me_symbol_info my;
		if (s->is_oms ? oms_symbol_get(s->svc, y->id, &oy) == 0
			      : me_symbol_get(s->svc, y->id, &my) == 0)
			continue;
		struct wire_symbol_config sc;
		memset(&sc, 0, sizeof(sc));
		wire_hdr_init(&sc.hdr, WIRE_SYMBOL_CONFIG, s->id);
		sc.symbol = y->id;
		sc.base_asset = y->base_asset;
		sc.quote_asset = y->quote_asset;
		sc.me_shard = y->me_shard;
		sc.status = WIRE_SYM_TRADING;
		sc.tick = y->tick;
		sc.lot = y->lot;
		sc.min_qty = y->min_qty;
		sc.min_notional = y->min_notional;
		sc.base_unit = y->base_unit;
		sc.ref_px = y->ref_px;
		sc.band_bps = y->band_bps;
		sc.maker_fee_bps = y->maker_fee_bps;
		sc.taker_fee_bps = y->taker_fee_bps;
		sc.map_version = 1;
		int rc = cns_propose(s->cns, s->now, &sc.hdr);
		if (rc != 0)
			return rc;
		count(s, SC_BOOTSTRAPS, 1);
	}
	return 0;
}

/* Bootstrap admin, once per term, same content on every node: idempotent. An OMS shard
 * gets the routing config only while it is behind the configured epoch; every shard gets
 * the configured symbols its replica does not know yet (so a halt, a kill or a config made
 * through the control socket is never undone by a new leader). */
static void
bootstrap(struct app_shard *s)
{
	uint64_t term = cns_term(s->cns);
	if (s->boot_term == term)
		return;
	int rc = 0;
	if (s->is_oms) {
		const struct app_routing_conf *r = &s->app->cfg.routing;
		if (oms_route_epoch(s->svc) < r->epoch) {
			struct wire_routing_config rc_msg;
			memset(&rc_msg, 0, sizeof(rc_msg));
			wire_hdr_init(&rc_msg.hdr, WIRE_ROUTING_CONFIG, s->id);
			rc_msg.epoch = r->epoch;
			rc_msg.shard_count = r->shard_count;
			for (uint32_t i = 0; i < r->shard_count; i++) {
				rc_msg.shards[i].shard = r->shards[i];
				rc_msg.shards[i].state = WIRE_SHARD_ACTIVE;
			}
			rc_msg.pin_count = r->pin_count;
			memcpy(rc_msg.pins, r->pins, r->pin_count * sizeof(r->pins[0]));
			rc = propose_symbols(s);
			if (rc == 0)
				rc = cns_propose(s->cns, s->now, &rc_msg.hdr);
			if (rc == 0)
				count(s, SC_BOOTSTRAPS, 1);
		} else {
			rc = propose_symbols(s);
		}
	} else {
		rc = propose_symbols(s);
	}
	if (rc == 0)
		s->boot_term = term;
}

static void
roles_tick(struct app_shard *s)
{
	if (cns_role(s->cns) != CNS_LEADER) {
		s->roles_ready = false;
		s->bridge_term = 0;
		return;
	}
	if (!state_current(s))
		return;
	bootstrap(s);
	if (!s->is_oms)
		return;
	uint64_t term = cns_term(s->cns);
	if (s->bridge_term != term) {
		/* Leadership gained: rebuild the bridge's and persister's queues from state. */
		s->bridge_term = term;
		s->roles_ready = true;
		count(s, SC_BRIDGE_REBUILDS, 1);
		APP_LOG(INFO, "shard %u: leader in term %" PRIu64 ", bridge rebuilt from state",
			s->id, term);
		bridge_redrive(s);
		reports_resend(s);
		return;
	}
	if (s->now - s->last_redrive >= s->redrive_ns)
		bridge_redrive(s);
}

/* ---------------------------------------------------------------------------------------
 * Ingress.
 * ------------------------------------------------------------------------------------- */

static int
propose(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	int rc = cns_propose(s->cns, s->now, msg);
	if (rc == 0)
		count(s, SC_PROPOSED, 1);
	else if (rc == -EPERM || rc == -EBUSY)
		count(s, SC_NOT_LEADER, 1);
	else if (rc == -EAGAIN)
		count(s, SC_BACKPRESSURE, 1);
	else
		count(s, SC_PROPOSE_FAILED, 1);
	return rc;
}

/* Client messages forwarded by a gateway (origin = its node). */
static void
ingress(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	const struct wire_ingress *ing = (const void *)msg;
	uint32_t origin = ing->origin;
	if (!s->is_oms || !node_known(s->app, origin)) {
		count(s, SC_INGRESS_BAD, 1);
		return;
	}
	const uint8_t *tail = (const uint8_t *)(ing + 1);
	uint32_t pos = 0;
	enum wire_err err;
	const struct wire_msg_hdr *in;
	while ((in = wire_msgs_next(tail, ing->tail_len, &pos, &err)) != NULL) {
		if (!is_routed_type(in)) {
			count(s, SC_INGRESS_BAD, 1);
			continue;
		}
		struct user_ent *e = user_slot(s->users, msg_user(in), true);
		e->node = origin;
		if (in->type == WIRE_TRANSFER) {
			const struct wire_transfer *t = (const void *)in;
			struct xfer_ent *x = xfer_slot(s->xorigin, t->transfer_id, true);
			x->user = t->user;
			x->node = origin;
		}
		int rc = propose(s, in);
		if (rc == 0)
			lat_begin(s, in);
		if (rc == -EPERM || rc == -EBUSY)
			nak(s, origin, in, WIRE_REASON_NOT_LEADER);
		else if (rc == -EAGAIN)
			nak(s, origin, in, WIRE_REASON_BACKPRESSURE);
		else if (rc != 0)
			nak(s, origin, in, WIRE_REASON_BAD_REQUEST);
	}
}

/* The OMS shard a request to an ME shard comes from (0xffff: none). */
static uint16_t
me_request_stream(const struct wire_msg_hdr *msg)
{
	switch (msg->type) {
	case WIRE_SUBMIT:
		return wire_oid_shard(((const struct wire_submit *)msg)->oid);
	case WIRE_CANCEL_TO_ME:
	case WIRE_AMEND_TO_ME:
	case WIRE_REPLACE_TO_ME:
		return wire_oid_shard(((const struct wire_modify *)msg)->req);
	case WIRE_STREAM_ACK:
		return ((const struct wire_stream_ack *)msg)->stream;
	case WIRE_REPLAY_REQUEST:
		return ((const struct wire_replay_request *)msg)->stream;
	case WIRE_ORDER_QUERY:
		return wire_oid_shard(((const struct wire_order_query *)msg)->oid);
	case WIRE_OPEN_ORDERS_QUERY:
		return ((const struct wire_open_orders_query *)msg)->oms_shard;
	default:
		return UINT16_MAX;
	}
}

static void
shard_msg(struct app_shard *s, const struct dp_meta *meta, const struct wire_msg_hdr *msg,
	  bool *hinted)
{
	if (msg->type >= WIRE_REQUEST_VOTE && msg->type <= WIRE_TIMEOUT_NOW) {
		if (cns_step(s->cns, s->now, msg) == 0)
			count(s, SC_RAFT_IN, 1);
		else
			count(s, SC_RAFT_BAD, 1);
		return;
	}
	if (msg->type == WIRE_INGRESS) {
		ingress(s, msg);
		return;
	}
	uint16_t stream = s->is_oms ? UINT16_MAX : me_request_stream(msg);
	bool from_node = node_known(s->app, meta->sender_id);
	if (stream < DP_SHARDS_MAX && from_node)
		s->oms_node[stream] = meta->sender_id; /* ME egress for that stream goes there */
	if (is_admin_type(msg->type) && meta->src.ip_be != s->app->cfg.dp.ip_be)
		s->admin_addr = meta->src;
	int rc = propose(s, msg);
	if ((rc == -EPERM || rc == -EBUSY) && stream != UINT16_MAX && from_node && !*hinted &&
	    meta->sender_id != s->self) {
		/* A bridge sent to a follower: tell its node who leads (one per frame). */
		struct wire_nak n;
		memset(&n, 0, sizeof(n));
		wire_hdr_init(&n.hdr, WIRE_NAK, s->id);
		n.reason = WIRE_REASON_NOT_LEADER;
		n.leader_node = cns_leader(s->cns);
		to_gateway(s, meta->sender_id, &n.hdr);
		*hinted = true;
	}
}

/* Frames between nodes (Raft, INGRESS, bridge, client answers for a gateway) must come
 * from this node or a configured peer's address (and carry the peer key when one is set):
 * a client must not be able to inject reports or votes. */
static bool
from_node(const struct app *app, const struct dp_addr *src)
{
	if (src->ip_be == app->cfg.dp.ip_be)
		return true;
	for (uint32_t i = 0; i < app->cfg.dp.peer_count; i++)
		if (app->cfg.dp.peers[i].ip_be == src->ip_be)
			return true;
	return false;
}

static void
frame_in(struct app_shard *s, struct rte_mbuf *m)
{
	const struct dp_meta *meta = dp_meta(m);
	const uint8_t *buf;
	uint32_t len, pos = 0;
	enum wire_err err;
	const struct wire_msg_hdr *msg;
	bool hinted = false;

	dp_rx_msgs(m, &buf, &len);
	count(s, SC_FRAMES, 1);
	bool node = from_node(s->app, &meta->src);
	if (!node && (meta->cls == DP_CLASS_BRIDGE || meta->cls == DP_CLASS_CLIENT)) {
		count(s, SC_NOT_FROM_NODE, 1);
		rte_pktmbuf_free(m);
		return;
	}
	while ((msg = wire_msgs_next(buf, len, &pos, &err)) != NULL) {
		count(s, SC_MSGS, 1);
		switch (meta->cls) {
		case DP_CLASS_SHARD:
			if (!node && (msg->type == WIRE_INGRESS ||
				      (msg->type >= WIRE_REQUEST_VOTE &&
				       msg->type <= WIRE_TIMEOUT_NOW))) {
				count(s, SC_NOT_FROM_NODE, 1);
				break;
			}
			shard_msg(s, meta, msg, &hinted);
			break;
		case DP_CLASS_BRIDGE:
			/* ME results and events for this OMS shard: into its log. Refused ones
			 * are dropped; the bridge's replay requests bring them back. */
			if (s->is_oms)
				propose(s, msg);
			break;
		case DP_CLASS_GATEWAY:
			if (s->is_gateway && is_routed_type(msg))
				gw_order(s, meta, msg);
			break;
		case DP_CLASS_CLIENT:
			gw_client(s, msg);
			break;
		default:
			break;
		}
	}
	rte_pktmbuf_free(m);
}

/* ---------------------------------------------------------------------------------------
 * Control-socket commands (docs/appliance.md "Control socket"). The main lcore hands this
 * lcore struct app_cmd pointers on mgmt_rx; each comes back on app->mgmt_done, answered.
 * A mutation is proposed alone in an entry of its own (the open batch is sealed before and
 * after), and answered by the ADMIN_REPLY the service emits when that entry - same index,
 * same term - is applied: the answer means committed and applied, on this member.
 * ------------------------------------------------------------------------------------- */

static void
cmd_give(struct app_shard *s, struct app_cmd *c, enum app_cmd_status st)
{
	c->status = st;
	count(s, st == APP_CMD_OK ? SC_MGMT_OK : SC_MGMT_REFUSED, 1);
	/* mgmt_done holds 2 * APP_CMDS_MAX and main never has more than APP_CMDS_MAX out. */
	CHECK(rte_ring_mp_enqueue(s->app->mgmt_done, c) == 0);
}

static void
cmd_not_leader(struct app_shard *s, struct app_cmd *c)
{
	uint32_t l = cns_leader(s->cns);
	c->leader = l == s->self ? 0 : l;
	cmd_give(s, c, APP_CMD_NOT_LEADER);
}

static void
cmd_unwait(struct app_shard *s, uint32_t i)
{
	CHECK(i < s->cmd_wait_count);
	s->cmd_wait[i] = s->cmd_wait[--s->cmd_wait_count];
	s->cmd_wait[s->cmd_wait_count] = NULL;
}

/* The ADMIN_REPLY of an entry being applied: the answer of the command that proposed it. */
static void
cmd_admin_reply(struct app_shard *s, const struct wire_admin_reply *r)
{
	for (uint32_t i = 0; i < s->cmd_wait_count; i++) {
		struct app_cmd *c = s->cmd_wait[i];
		/* The OMS echoes the key in req_id, the ME in value (me_admin.c). */
		uint64_t key = s->is_oms ? r->req_id : r->value;
		if (c->kind != APP_CMD_PROPOSE || c->index != s->apply_index || c->req_key != key)
			continue;
		cmd_unwait(s, i);
		if (s->apply_term != c->term) {
			cmd_give(s, c, APP_CMD_LOST); /* another leader's entry took the index */
			return;
		}
		c->reason = r->reason;
		c->value = r->value;
		cmd_give(s, c, r->reason == WIRE_REASON_NONE ? APP_CMD_OK : APP_CMD_REJECTED);
		return;
	}
}

/* routes set: the new membership under the applied epoch + 1, keeping the applied pins. */
static void
route_merge(struct app_shard *s, struct wire_routing_config *m, bool scale)
{
	struct oms_route_info ri;
	oms_route_get(s->svc, &ri);
	if (scale) {
		/* shards scale: the applied membership with shards[0] added or changed. */
		struct wire_route_shard add = m->shards[0];
		uint32_t n = 0;
		bool found = false;
		for (uint32_t i = 0; i < ri.shard_count; i++) {
			m->shards[n] = ri.shards[i];
			if (ri.shards[i].shard == add.shard) {
				m->shards[n].state = add.state;
				found = true;
			}
			n++;
		}
		if (!found && n < WIRE_ROUTE_SHARDS_MAX)
			m->shards[n++] = add;
		m->shard_count = n;
	}
	if (m->epoch == 0)
		m->epoch = ri.epoch + 1;
	m->pin_count = ri.pin_count;
	memcpy(m->pins, ri.pins, sizeof(ri.pins[0]) * ri.pin_count);
}

/* symbols move: the symbol's config as this replica holds it, me_shard as asked. 0, or
 * -ENOENT when this replica cannot fill it. */
static int
symbol_fill(struct app_shard *s, struct wire_symbol_config *m)
{
	if (s->is_oms) {
		struct oms_symbol_info y;
		if (oms_symbol_get(s->svc, m->symbol, &y) != 0)
			return -ENOENT;
		m->maker_fee_bps = y.maker_fee_bps;
		m->taker_fee_bps = y.taker_fee_bps;
		return 0;
	}
	struct me_symbol_info y;
	if (me_symbol_get(s->svc, m->symbol, &y) != 0 || y.me_shard != s->id)
		return m->tick > 0 ? 0 : -ENOENT; /* not ours: the message must be complete */
	m->base_asset = y.base_asset;
	m->quote_asset = y.quote_asset;
	m->status = y.status;
	m->tick = y.tick;
	m->lot = y.lot;
	m->min_qty = y.min_qty;
	m->min_notional = y.min_notional;
	m->base_unit = y.base_unit;
	m->ref_px = y.ref_px;
	m->band_bps = y.band_bps;
	return 0;
}

static void
cmd_propose(struct app_shard *s, struct app_cmd *c)
{
	struct wire_msg_hdr *m = (void *)c->msg;
	if (cns_role(s->cns) != CNS_LEADER) {
		cmd_not_leader(s, c);
		return;
	}
	if (s->cmd_wait_count == APP_CMD_PENDING_MAX) {
		cmd_give(s, c, APP_CMD_BUSY);
		return;
	}
	if (((c->flags & APP_CMD_ROUTE_MERGE) &&
	     (!s->is_oms || m->type != WIRE_ROUTING_CONFIG)) ||
	    ((c->flags & APP_CMD_SYMBOL_FILL) && m->type != WIRE_SYMBOL_CONFIG)) {
		c->err = -EINVAL; /* a routing config for an ME shard: the operator named one */
		cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	if (c->flags & APP_CMD_ROUTE_MERGE) {
		route_merge(s, (void *)m, (c->flags & APP_CMD_ROUTE_SCALE) != 0);
		c->req_key = ((struct wire_routing_config *)m)->epoch;
		c->value = c->req_key;
	}
	if (c->flags & APP_CMD_SYMBOL_FILL) {
		if (symbol_fill(s, (void *)m) != 0) {
			c->reason = WIRE_REASON_UNKNOWN_SYMBOL;
			cmd_give(s, c, APP_CMD_REJECTED); /* nothing proposed */
			return;
		}
	}
	/* Seal what is open, so the command's entry is the next one and holds only it. */
	cns_flush(s->cns, s->now);
	uint64_t last = cns_last_index(s->cns);
	int rc = propose(s, m);
	if (rc == -EPERM) {
		cmd_not_leader(s, c);
		return;
	}
	if (rc == -EAGAIN || rc == -EBUSY) {
		cmd_give(s, c, APP_CMD_BUSY); /* backpressure, or a leadership transfer */
		return;
	}
	if (rc != 0) {
		c->err = rc;
		cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	cns_flush(s->cns, s->now);
	/* If the log store was full the batch is sealed later, still as the next entry. */
	c->index = last + 1;
	c->term = cns_term(s->cns);
	s->cmd_wait[s->cmd_wait_count++] = c;
}

static void
cmd_snapshot(struct app_shard *s, struct app_cmd *c)
{
	uint64_t applied = cns_applied_index(s->cns);
	int rc = cns_snapshot_take(s->cns);
	if (rc == 0) {
		s->snap_index = applied;
		count(s, SC_SNAPSHOTS, 1);
	}
	if (rc != 0 && rc != -EALREADY) {
		count(s, SC_SNAPSHOT_FAILED, 1);
		c->err = rc;
		cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	const struct cns_snapshot_meta *meta = cns_snapshot(s->cns, NULL);
	c->index = meta != NULL ? meta->index : 0;
	c->value = c->index;
	c->term = meta != NULL ? meta->term : 0;
	cmd_give(s, c, APP_CMD_OK);
}

static void
cmd_transfer(struct app_shard *s, struct app_cmd *c)
{
	if (cns_role(s->cns) != CNS_LEADER) {
		cmd_not_leader(s, c);
		return;
	}
	if (c->target == s->self) {
		c->value = cns_term(s->cns);
		cmd_give(s, c, APP_CMD_OK);
		return;
	}
	if (s->cmd_wait_count == APP_CMD_PENDING_MAX) {
		cmd_give(s, c, APP_CMD_BUSY);
		return;
	}
	int rc = cns_transfer(s->cns, s->now, c->target);
	if (rc == -EPERM) {
		cmd_not_leader(s, c);
		return;
	}
	if (rc != 0) {
		c->err = rc; /* -EINVAL: not a member */
		cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	c->term = cns_term(s->cns);
	s->cmd_wait[s->cmd_wait_count++] = c;
}

static const char *
sym_status_name(uint8_t st)
{
	return st == WIRE_SYM_TRADING ? "trading" : st == WIRE_SYM_HALTED ? "halted" : "unknown";
}

static const char *
user_status_name(uint32_t st)
{
	switch (st) {
	case OMS_USER_HYDRATING:
		return "hydrating";
	case OMS_USER_RESIDENT:
		return "resident";
	case OMS_USER_FLUSHING:
		return "flushing";
	default:
		return "absent";
	}
}

/* One row per symbol, each naming this shard (main joins the rows of every shard). */
static void
row_begin(struct app_shard *s, struct mgmt_out *o, uint32_t symbol, uint8_t status, bool killed)
{
	mgmt_out_obj_begin(o);
	mgmt_out_kv_u64(o, "shard", s->id);
	mgmt_out_kv_str(o, "service", s->is_oms ? "oms" : "me");
	mgmt_out_kv_u64(o, "symbol", symbol);
	mgmt_out_kv_str(o, "status", sym_status_name(status));
	mgmt_out_kv_bool(o, "killed", killed);
}

static void
view_symbols(struct app_shard *s, struct mgmt_out *o)
{
	mgmt_out_arr_begin(o);
	if (s->is_oms) {
		struct oms_symbol_info y;
		for (uint32_t i = 0; oms_symbol_at(s->svc, i, &y) == 0; i++) {
			row_begin(s, o, y.symbol, y.status, y.killed != 0);
			mgmt_out_kv_u64(o, "me_shard", y.me_shard);
			mgmt_out_kv_u64(o, "base", y.base_asset);
			mgmt_out_kv_u64(o, "quote", y.quote_asset);
			mgmt_out_kv_i64(o, "maker_fee_bps", y.maker_fee_bps);
			mgmt_out_kv_i64(o, "taker_fee_bps", y.taker_fee_bps);
			mgmt_out_obj_end(o);
		}
	} else {
		struct me_symbol_info y;
		for (uint32_t i = 0; me_symbol_at(s->svc, i, &y) == 0; i++) {
			row_begin(s, o, y.symbol, y.status, y.killed != 0);
			mgmt_out_kv_u64(o, "me_shard", y.me_shard);
			mgmt_out_kv_u64(o, "resting", y.resting);
			mgmt_out_kv_i64(o, "tick", y.tick);
			mgmt_out_kv_i64(o, "lot", y.lot);
			mgmt_out_kv_i64(o, "last_px", y.last_px);
			mgmt_out_obj_end(o);
		}
	}
	mgmt_out_arr_end(o);
}

static void
view_routes(struct app_shard *s, struct mgmt_out *o)
{
	struct oms_route_info ri;
	oms_route_get(s->svc, &ri);
	mgmt_out_kv_u64(o, "epoch", ri.epoch);
	mgmt_out_kv_bool(o, "draining", oms_route_draining(s->svc));
	mgmt_out_key(o, "shards");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < ri.shard_count; i++) {
		mgmt_out_obj_begin(o);
		mgmt_out_kv_u64(o, "shard", ri.shards[i].shard);
		mgmt_out_kv_str(o, "state", ri.shards[i].state == WIRE_SHARD_ACTIVE ? "active"
										  : "receiving");
		mgmt_out_obj_end(o);
	}
	mgmt_out_arr_end(o);
	mgmt_out_key(o, "pins");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < ri.pin_count; i++) {
		mgmt_out_obj_begin(o);
		mgmt_out_kv_u64(o, "user", ri.pins[i].user);
		mgmt_out_kv_u64(o, "shard", ri.pins[i].shard);
		mgmt_out_obj_end(o);
	}
	mgmt_out_arr_end(o);
}

static void
view_user(struct app_shard *s, uint64_t user, struct mgmt_out *o)
{
	struct oms_user_info ui;
	int rc = oms_user_get(s->svc, user, &ui);
	mgmt_out_kv_u64(o, "user", user);
	mgmt_out_kv_u64(o, "owner", oms_owner(s->svc, user));
	mgmt_out_kv_bool(o, "killed", oms_user_killed(s->svc, user));
	mgmt_out_kv_str(o, "status", user_status_name(rc == 0 ? ui.status : OMS_USER_ABSENT));
	if (rc != 0)
		return;
	mgmt_out_kv_u64(o, "orders", ui.orders);
	mgmt_out_kv_u64(o, "sagas", ui.sagas);
	mgmt_out_kv_u64(o, "live", ui.live);
	mgmt_out_kv_u64(o, "parked", ui.parked);
	mgmt_out_kv_u64(o, "epoch", ui.epoch);
	mgmt_out_kv_u64(o, "version", ui.version);
	mgmt_out_key(o, "balances");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < s->asset_count; i++) {
		int64_t total, reserved;
		if (oms_balance_get(s->svc, user, s->assets[i], &total, &reserved) != 0)
			continue;
		mgmt_out_obj_begin(o);
		mgmt_out_kv_u64(o, "asset", s->assets[i]);
		mgmt_out_kv_i64(o, "total", total);
		mgmt_out_kv_i64(o, "reserved", reserved);
		mgmt_out_obj_end(o);
	}
	mgmt_out_arr_end(o);
}

/* A page of the resident set: users with their status, and where the next page starts. */
static void
view_users(struct app_shard *s, struct app_cmd *c, struct mgmt_out *o)
{
	uint64_t users[256];
	uint32_t cursor = c->cursor, limit = RTE_MIN(c->limit, (uint32_t)RTE_DIM(users));
	uint32_t n = oms_users_list(s->svc, &cursor, users, limit);
	mgmt_out_kv_u64(o, "resident", oms_resident_count(s->svc));
	mgmt_out_key(o, "users");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < n; i++) {
		struct oms_user_info ui;
		if (oms_user_get(s->svc, users[i], &ui) != 0)
			continue;
		mgmt_out_obj_begin(o);
		mgmt_out_kv_u64(o, "user", users[i]);
		mgmt_out_kv_str(o, "status", user_status_name(ui.status));
		mgmt_out_kv_u64(o, "sagas", ui.sagas);
		mgmt_out_kv_u64(o, "live", ui.live);
		mgmt_out_kv_u64(o, "owner", oms_owner(s->svc, users[i]));
		mgmt_out_obj_end(o);
	}
	mgmt_out_arr_end(o);
	if (cursor == UINT32_MAX)
		mgmt_out_kv_str(o, "next", "end");
	else
		mgmt_out_kv_u64(o, "next", cursor);
}

/* Read-only views: this lcore is the only reader of the service's state. */
static void
cmd_view(struct app_shard *s, struct app_cmd *c)
{
	if (c->view < APP_VIEW_SYMBOLS || c->view > APP_VIEW_USERS ||
	    (c->view != APP_VIEW_SYMBOLS && !s->is_oms)) {
		c->err = -ENOTSUP;
		cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	struct mgmt_out o;
	mgmt_out_init(&o, c->out, c->out_cap);
	if (c->view == APP_VIEW_SYMBOLS) {
		view_symbols(s, &o); /* an array of rows */
	} else {
		mgmt_out_obj_begin(&o);
		mgmt_out_kv_u64(&o, "shard", s->id);
		mgmt_out_kv_str(&o, "role",
				cns_role(s->cns) == CNS_LEADER ? "leader" : "follower");
		mgmt_out_kv_u64(&o, "applied", cns_applied_index(s->cns));
		if (c->view == APP_VIEW_ROUTES)
			view_routes(s, &o);
		else if (c->view == APP_VIEW_USERS)
			view_users(s, c, &o);
		else
			view_user(s, c->user, &o);
		mgmt_out_obj_end(&o);
	}
	if (o.overflow) {
		c->err = -E2BIG;
		cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	c->out_len = o.len;
	cmd_give(s, c, APP_CMD_OK);
}

/* Take new commands (bounded), then settle the waiting ones: committed entries were
 * answered during apply; here the lost, the transferred and the late. */
static uint32_t
mgmt_work(struct app_shard *s)
{
	struct app_cmd *cmds[APP_CMD_DRAIN_MAX];
	unsigned n = rte_ring_sc_dequeue_burst(s->mgmt_rx, (void **)cmds, APP_CMD_DRAIN_MAX, NULL);
	for (unsigned i = 0; i < n; i++) {
		struct app_cmd *c = cmds[i];
		count(s, SC_MGMT_CMDS, 1);
		CHECK(c->shard == s->id);
		switch (c->kind) {
		case APP_CMD_PROPOSE:
			cmd_propose(s, c);
			break;
		case APP_CMD_SNAPSHOT:
			cmd_snapshot(s, c);
			break;
		case APP_CMD_TRANSFER:
			cmd_transfer(s, c);
			break;
		case APP_CMD_VIEW:
			cmd_view(s, c);
			break;
		default:
			c->err = -EINVAL;
			cmd_give(s, c, APP_CMD_FAILED);
			break;
		}
	}
	for (uint32_t i = 0; i < s->cmd_wait_count;) {
		struct app_cmd *c = s->cmd_wait[i];
		enum app_cmd_status st = APP_CMD_OK;
		bool done = false;
		if (c->kind == APP_CMD_TRANSFER) {
			if (cns_leader(s->cns) == c->target) {
				c->value = cns_term(s->cns);
				done = true;
			}
		} else {
			uint64_t last = cns_last_index(s->cns);
			uint64_t t = c->index <= last ? cns_term_at(s->cns, c->index) : 0;
			/* Applied without its reply having matched: not our entry (or a snapshot
			 * jumped over it). Replaced by another term, or gone with our term. */
			if (cns_applied_index(s->cns) >= c->index ||
			    (t != c->term && (t != 0 || cns_term(s->cns) != c->term))) {
				st = APP_CMD_LOST;
				done = true;
			}
		}
		if (!done && s->clock_ns >= c->deadline_ns) {
			st = APP_CMD_TIMEOUT;
			done = true;
		}
		if (!done) {
			i++;
			continue;
		}
		cmd_unwait(s, i);
		cmd_give(s, c, st);
	}
	return n;
}

/* ---------------------------------------------------------------------------------------
 * The duty cycle.
 * ------------------------------------------------------------------------------------- */

static void
host_send(void *ctx, uint32_t to, const struct wire_msg_hdr *msg)
{
	struct app_shard *s = ctx;
	count(s, SC_RAFT_OUT, 1);
	send_node(s, to, DP_CLASS_SHARD, s->id, msg, NULL, 0);
}

/* Durable mode: write what the memory log holds beyond the file log, one batch and one
 * fdatasync per cycle (group commit), on this lcore (docs/appliance.md says why). */
static void
flog_write(struct app_shard *s)
{
	uint64_t flast = pst_log_last_index(s->plog);
	uint64_t mfirst = cns_memlog_ops.first_index(s->log);
	uint64_t mlast = cns_memlog_ops.last_index(s->log);
	if (mlast <= flast)
		return;
	if (mfirst > flast + 1) {
		/* Compacted behind a snapshot before we wrote it: the snapshot file covers it. */
		if (pst_log_reset(s->plog, mfirst) != 0) {
			count(s, SC_FLOG_ERRORS, 1);
			return;
		}
		flast = mfirst - 1;
	}
	uint32_t n = 0;
	for (uint64_t i = flast + 1; i <= mlast && n < FLOG_BATCH_MAX; i++, n++) {
		const struct wire_entry_hdr *e = cns_memlog_ops.entry(s->log, i);
		s->pbatch[n] = (struct pst_entry){
			.index = i,
			.term = e->term,
			.time_ns = e->time_ns,
			.kind = e->kind,
			.data_len = e->data_len,
			.data = e + 1,
		};
	}
	int rc = pst_log_append(s->plog, s->pbatch, n);
	if (rc != 0) {
		count(s, SC_FLOG_ERRORS, 1);
		return;
	}
	count(s, SC_FLOG_ENTRIES, n);
}

/* Memory mode: the in-memory log is durable as soon as an entry is in it. Durable mode:
 * what the file log has synced (docs/appliance.md). */
static void
durable_report(struct app_shard *s)
{
	uint64_t last, term;
	if (s->plog != NULL) {
		flog_write(s);
		last = pst_log_durable_index(s->plog);
		if (last > cns_last_index(s->cns))
			last = cns_last_index(s->cns);
		if (last == 0)
			return;
		term = cns_term_at(s->cns, last);
		if (term == UINT64_MAX)
			return;
		if (last == s->durable_index && term == s->durable_term)
			return;
		cns_durable(s->cns, last, term);
		s->durable_index = last;
		s->durable_term = term;
		return;
	}
	last = cns_last_index(s->cns);
	if (last == 0)
		return;
	term = cns_last_term(s->cns);
	if (last == s->durable_index && term == s->durable_term)
		return;
	cns_durable(s->cns, last, term);
	s->durable_index = last;
	s->durable_term = term;
}

static void
aggregates(struct app_shard *s)
{
	if (s->now - s->last_agg < AGG_EVERY_NS)
		return;
	s->last_agg = s->now;
	if (s->is_oms) {
		const struct oms *oms = s->svc;
		PUB(s->pub_route_epoch, oms_route_epoch(oms));
		PUB(s->pub_inflight, (uint64_t)oms_inflight_count(oms));
		PUB(s->pub_resident, (uint64_t)oms_resident_count(oms));
		PUB(s->pub_parked, (uint64_t)oms_parked_count(oms));
		for (uint32_t i = 0; i < s->asset_count; i++) {
			PUB(s->pub_asset_sum[i], oms_asset_sum(oms, s->assets[i]));
			PUB(s->pub_asset_fees[i], oms_fees_get(oms, s->assets[i]));
		}
	} else {
		PUB(s->pub_resting, (uint64_t)me_orders_resting(s->svc));
	}
}

/* Ready to take client load ([port] rx_start = leader): a leader is known; this replica has
 * applied everything committed and the commit point is in the current term (so the new
 * leader's bootstrap config, proposed the moment it had committed its first entry, precedes
 * anything the node forwards from now on); an OMS replica has applied the configured
 * routing epoch (proposed after the symbols); the leader has proposed its bootstrap and, on
 * an OMS shard, rebuilt its bridge. */
static bool
ready(const struct app_shard *s)
{
	uint64_t term = cns_term(s->cns), commit = cns_commit_index(s->cns);
	if (cns_leader(s->cns) == CNS_NODE_NONE || commit == 0)
		return false;
	if (cns_term_at(s->cns, commit) != term || cns_applied_index(s->cns) < commit)
		return false;
	if (s->is_oms && oms_route_epoch(s->svc) < s->app->cfg.routing.epoch)
		return false;
	if (cns_role(s->cns) == CNS_LEADER && (s->boot_term != term || (s->is_oms && !s->roles_ready)))
		return false;
	return true;
}

static uint32_t
shard_do_work(void *arg, uint64_t now_ns)
{
	struct app_shard *s = arg;
	struct rte_mbuf *ms[APP_SHARD_DRAIN_MAX];
	uint32_t work = 0;
	unsigned n;

	s->now = (uint64_t)((int64_t)now_ns + s->app->clock_offset_ns);
	s->clock_ns = now_ns;
	n = rte_ring_sc_dequeue_burst(s->rx, (void **)ms, APP_SHARD_DRAIN_MAX, NULL);
	for (unsigned i = 0; i < n; i++)
		frame_in(s, ms[i]);
	work += n;
	n = rte_ring_sc_dequeue_burst(s->local, (void **)ms, APP_SHARD_DRAIN_MAX, NULL);
	for (unsigned i = 0; i < n; i++)
		frame_in(s, ms[i]);
	work += n;

	cns_tick(s->cns, s->now);
	durable_report(s);
	s->leader = cns_role(s->cns) == CNS_LEADER;
	uint32_t applied = cns_apply(s->cns, CNS_APPLY_DRAIN_MAX);
	s->apply_index = 0;
	count(s, SC_APPLIED, applied);
	work += applied;

	uint32_t leader = cns_leader(s->cns);
	if (leader != CNS_NODE_NONE)
		PUB(s->app->leader_hint[s->id], leader);
	roles_tick(s);
	if (s->is_oms)
		work += pq_drain(s);
	work += mgmt_work(s);

	uint64_t idx = cns_applied_index(s->cns);
	if (idx - s->snap_index >= s->app->cfg.snapshot_entries) {
		int rc = cns_snapshot_take(s->cns);
		s->snap_index = idx;
		count(s, rc == 0 ? SC_SNAPSHOTS : SC_SNAPSHOT_FAILED, 1);
		if (rc != 0 && rc != -EALREADY)
			APP_LOG(ERR, "shard %u: snapshot at %" PRIu64 " failed: %s (raise [limits] "
				"snapshot_mb): the log is not compacted and will fill", s->id, idx,
				strerror(-rc));
	}
	app_outbox_flush(&s->ob);
	aggregates(s);

	PUB(s->pub_role, (uint32_t)cns_role(s->cns));
	if (s->now - s->last_ready >= READY_EVERY_NS) {
		s->last_ready = s->now; /* a few loads and a log lookup: not on every empty poll */
		PUB(s->pub_ready, ready(s));
	}
	PUB(s->pub_leader, leader);
	PUB(s->pub_term, cns_term(s->cns));
	PUB(s->pub_commit, cns_commit_index(s->cns));
	PUB(s->pub_applied, idx);
	PUB(s->pub_last, cns_last_index(s->cns));
	for (uint32_t i = 0; i < s->conf->member_count; i++)
		PUB(s->pub_match[i], cns_match_index(s->cns, s->conf->members[i]));
	return work;
}

/* ---------------------------------------------------------------------------------------
 * Durable mode: the log store is the memory log (reads, replication) with the file log
 * following it; truncation, compaction and votes go to the files at once.
 * ------------------------------------------------------------------------------------- */

static int
flog_append(void *st, uint64_t index, const struct wire_entry_hdr *hdr, const void *data)
{
	struct app_shard *s = st;
	return cns_memlog_ops.append(s->log, index, hdr, data);
}

static void
flog_truncate(void *st, uint64_t index)
{
	struct app_shard *s = st;
	cns_memlog_ops.truncate(s->log, index);
	if (index >= pst_log_first_index(s->plog) && index <= pst_log_last_index(s->plog) &&
	    pst_log_truncate(s->plog, index) != 0) {
		/* The file would keep entries Raft removed: a restart would replay them. */
		APP_LOG(CRIT, "shard %u: file log truncate at %" PRIu64 " failed", s->id, index);
		CHECK(0);
	}
	if (s->durable_index >= index) {
		s->durable_index = 0;
		s->durable_term = 0;
	}
}

static void
flog_compact(void *st, uint64_t index)
{
	struct app_shard *s = st;
	cns_memlog_ops.compact(s->log, index);
	int rc = index >= pst_log_last_index(s->plog) ? pst_log_reset(s->plog, index + 1)
						      : pst_log_compact(s->plog, index);
	if (rc < 0)
		count(s, SC_FLOG_ERRORS, 1);
}

static const struct wire_entry_hdr *
flog_entry(const void *st, uint64_t index)
{
	const struct app_shard *s = st;
	return cns_memlog_ops.entry(s->log, index);
}

static uint64_t
flog_first(const void *st)
{
	const struct app_shard *s = st;
	return cns_memlog_ops.first_index(s->log);
}

static uint64_t
flog_last(const void *st)
{
	const struct app_shard *s = st;
	return cns_memlog_ops.last_index(s->log);
}

static void
flog_save_vote(void *st, uint64_t term, uint32_t vote)
{
	struct app_shard *s = st;
	cns_memlog_ops.save_vote(s->log, term, vote);
	/* Raft Figure 2: persisted before answering. Blocks for a few fsyncs (rare). */
	int rc = pst_vote_save(s->vote_dir, term, vote);
	if (rc != 0) {
		APP_LOG(CRIT, "shard %u: saving the vote failed: %s", s->id, strerror(-rc));
		CHECK(0);
	}
}

static const struct cns_log_ops flog_ops = {
	.append = flog_append,
	.truncate = flog_truncate,
	.compact = flog_compact,
	.entry = flog_entry,
	.first_index = flog_first,
	.last_index = flog_last,
	.save_vote = flog_save_vote,
};

static void
host_snapshot_saved(void *ctx, const struct cns_snapshot_meta *meta, const void *data)
{
	struct app_shard *s = ctx;
	struct pst_snap_meta pm = {
		.last_index = meta->index,
		.last_term = meta->term,
		.last_time_ns = meta->time_ns,
		.length = meta->len,
	};
	int rc = pst_snap_write(s->snap_dir, &pm, data, s->plog);
	if (rc != 0)
		APP_LOG(ERR, "shard %u: writing the snapshot at %" PRIu64 " failed: %s", s->id,
			meta->index, strerror(-rc));
}

static int
mkdirs(const char *path)
{
	char buf[APP_STR_MAX + 64];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0750) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0750) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Open the files and load what survived into the memory log and the boot record. */
static int
flog_boot(struct app_shard *s, struct cns_boot *boot, struct cns_snapshot_meta *snap,
	  void **snap_data)
{
	const struct app_config *cfg = &s->app->cfg;
	char log_dir[APP_STR_MAX + 32], err[PST_ERR_SIZE];
	snprintf(log_dir, sizeof(log_dir), "%s/shard%u/log", cfg->data_dir, s->id);
	snprintf(s->vote_dir, sizeof(s->vote_dir), "%s/shard%u/vote", cfg->data_dir, s->id);
	snprintf(s->snap_dir, sizeof(s->snap_dir), "%s/shard%u/snap", cfg->data_dir, s->id);
	int rc = mkdirs(log_dir);
	if (rc == 0)
		rc = mkdirs(s->vote_dir);
	if (rc == 0)
		rc = mkdirs(s->snap_dir);
	if (rc != 0) {
		APP_LOG(ERR, "shard %u: %s: %s", s->id, cfg->data_dir, strerror(-rc));
		return rc;
	}
	rc = pst_vote_load(s->vote_dir, &boot->term, &boot->vote);
	if (rc != 0 && rc != -ENOENT) {
		APP_LOG(ERR, "shard %u: vote in %s: %s", s->id, s->vote_dir, strerror(-rc));
		return rc;
	}
	if (rc == 0)
		cns_memlog_ops.save_vote(s->log, boot->term, boot->vote);
	struct pst_snap_meta pm;
	uint32_t corrupt = 0;
	rc = pst_snap_load(s->snap_dir, &pm, snap_data, &corrupt, err, sizeof(err));
	if (corrupt > 0)
		APP_LOG(WARNING, "shard %u: %u corrupt snapshot(s) skipped: %s", s->id, corrupt,
			err);
	uint64_t start = 1;
	if (rc == 0) {
		*snap = (struct cns_snapshot_meta){
			.index = pm.last_index,
			.term = pm.last_term,
			.time_ns = pm.last_time_ns,
			.len = pm.length,
		};
		boot->snapshot = snap;
		boot->snapshot_data = *snap_data;
		start = pm.last_index + 1;
		cns_memlog_ops.compact(s->log, pm.last_index);
	} else if (rc != -ENOENT) {
		APP_LOG(ERR, "shard %u: snapshots in %s: %s", s->id, s->snap_dir, strerror(-rc));
		return rc;
	}
	struct pst_log_config lc = { .dir = log_dir, .sync = PST_SYNC_DATA };
	rc = pst_log_open(&s->plog, &lc, err, sizeof(err));
	if (rc != 0) {
		APP_LOG(ERR, "shard %u: file log: %s (%s)", s->id, strerror(-rc), err);
		return rc;
	}
	uint64_t first = pst_log_first_index(s->plog), last = pst_log_last_index(s->plog);
	if (last < start || first > start) {
		if (last >= first && first > start) {
			APP_LOG(ERR, "shard %u: file log starts at %" PRIu64 ", after the snapshot's "
				"next entry %" PRIu64, s->id, first, start);
			return -EBADMSG;
		}
		/* Nothing after the snapshot: start the file log right after it. */
		return last < start ? pst_log_reset(s->plog, start) : 0;
	}
	void *buf = malloc(FLOG_READ_BUF); /* start-up only */
	struct pst_entry ents[64];
	if (buf == NULL)
		return -ENOMEM;
	for (uint64_t i = start; i <= last;) {
		int n = pst_log_read(s->plog, i, ents, 64, buf, FLOG_READ_BUF);
		if (n <= 0) {
			APP_LOG(ERR, "shard %u: file log read at %" PRIu64 ": %s", s->id, i,
				strerror(-n));
			free(buf);
			return n < 0 ? n : -EIO;
		}
		for (int k = 0; k < n; k++, i++) {
			struct wire_entry_hdr h = {
				.term = ents[k].term,
				.time_ns = ents[k].time_ns,
				.data_len = ents[k].data_len,
				.kind = (uint16_t)ents[k].kind,
			};
			rc = cns_memlog_ops.append(s->log, i, &h, ents[k].data);
			if (rc != 0) {
				APP_LOG(ERR, "shard %u: the memory log is too small for the file "
					"log ([limits] log_entries, log_mb)", s->id);
				free(buf);
				return rc;
			}
			count(s, SC_FLOG_BOOT_ENTRIES, 1);
		}
	}
	free(buf);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * The service as consensus sees it: the real one (oms or me), with the index and term of
 * the entry being applied noted for the control-socket commands waiting for it.
 * ------------------------------------------------------------------------------------- */

static const struct svc_ops *
svc_real(const struct app_shard *s)
{
	return s->is_oms ? &oms_svc_ops : &me_svc_ops;
}

static void
wrap_apply(void *svc, uint64_t index, uint64_t now_ns, const struct wire_msg_hdr *msg,
	   struct svc_sink *sink)
{
	struct app_shard *s = svc;
	if (s->apply_index != index) {
		s->apply_index = index;
		s->apply_term = s->cns != NULL ? cns_term_at(s->cns, index) : 0;
	}
	svc_real(s)->apply(s->svc, index, now_ns, msg, sink);
}

static void
wrap_tick(void *svc, uint64_t index, uint64_t now_ns, struct svc_sink *sink)
{
	struct app_shard *s = svc;
	svc_real(s)->tick(s->svc, index, now_ns, sink);
}

static size_t
wrap_snapshot_size(const void *svc)
{
	const struct app_shard *s = svc;
	return svc_real(s)->snapshot_size(s->svc);
}

static size_t
wrap_snapshot(const void *svc, void *buf, size_t cap)
{
	const struct app_shard *s = svc;
	return svc_real(s)->snapshot(s->svc, buf, cap);
}

static int
wrap_restore(void *svc, const void *buf, size_t len)
{
	struct app_shard *s = svc;
	return svc_real(s)->restore(s->svc, buf, len);
}

static uint64_t
wrap_state_hash(const void *svc)
{
	const struct app_shard *s = svc;
	return svc_real(s)->state_hash(s->svc);
}

static const struct svc_ops wrap_svc_ops = {
	.name = "shard",
	.apply = wrap_apply,
	.tick = wrap_tick,
	.snapshot_size = wrap_snapshot_size,
	.snapshot = wrap_snapshot,
	.restore = wrap_restore,
	.state_hash = wrap_state_hash,
};

/* ---------------------------------------------------------------------------------------
 * Set-up.
 * ------------------------------------------------------------------------------------- */

static void
limits_oms(const struct app_config *cfg, uint16_t id, struct oms_limits *l)
{
	oms_limits_default(l);
	l->shard_id = id;
	l->me_shards_max = DP_SHARDS_MAX;
	l->users_max = (uint32_t)cfg->resident_users_max;
	l->orders_max = (uint32_t)cfg->orders_max;
	l->inflight_max = (uint32_t)RTE_MIN(cfg->inflight_sagas_max, cfg->orders_max);
	l->parked_max = (uint32_t)cfg->parked_orders_max;
	l->symbols_max = APP_SYMBOLS_MAX;
	l->ttl_ns = cfg->user_ttl_ms * 1000000;
	l->sweep_interval_ns = cfg->sweep_ms * 1000000;
	l->sweep_evict_max = (uint32_t)cfg->sweep_evict_max;
	l->sweep_scan_max = RTE_MAX(l->sweep_scan_max, 4 * l->sweep_evict_max);
}

static void
limits_me(const struct app_config *cfg, uint16_t id, struct me_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->shard = id;
	l->streams_max = 16;
	l->symbols_max = APP_SYMBOLS_MAX;
	l->orders_max = (uint32_t)cfg->orders_max;
	l->users_max = (uint32_t)RTE_MIN(cfg->orders_max, cfg->resident_users_max);
	l->levels_max = (uint32_t)RTE_MAX(UINT64_C(1024), cfg->orders_max / 4);
	l->levels_side_max = l->levels_max / 2;
	l->gtd_max = (uint32_t)RTE_MAX(UINT64_C(256), cfg->orders_max / 4);
	l->events_max = 8192;
	l->events_reserve = 256;
}

/* Frames must fit the MTU: AppendEntries carry one entry when a full tail does not fit, and
 * InstallSnapshot chunks are cut to the frame. */
static void
cns_conf(const struct app *app, const struct app_shard *s, uint32_t frame_cap,
	 struct cns_config *cc)
{
	const struct app_config *cfg = &app->cfg;
	cns_config_default(cc, s->id, s->self, s->conf->member_count, s->conf->members);
	cc->durability = CNS_DURABLE_MEMORY;
	cc->election_timeout_min_ns = cfg->election_ms * 1000000;
	cc->election_timeout_max_ns = cfg->election_ms * 2000000;
	cc->heartbeat_ns = cfg->heartbeat_ms * 1000000;
	cc->tick_entry_ns = cfg->tick_ms * 1000000;
	/* Entries kept behind a snapshot for a slightly lagging follower: at most one snapshot
	 * interval (and never so many that the log cannot hold them plus the next interval). */
	cc->log_keep_entries = (uint32_t)RTE_MIN(RTE_MIN(UINT64_C(4096), cfg->snapshot_entries),
						 cfg->log_entries_max - cfg->snapshot_entries);
	cc->seed = (uint64_t)s->self * 1000003 + s->id * 7919 + rte_rdtsc();
	uint32_t ae_budget = frame_cap - (uint32_t)sizeof(struct wire_frame_hdr) - WIRE_MAC_SIZE -
			     (uint32_t)sizeof(struct wire_append_entries);
	if (ae_budget < WIRE_TAIL_MAX) {
		uint32_t data = (ae_budget - (uint32_t)sizeof(struct wire_entry_hdr)) & ~7u;
		cc->append_entries_max = 1;
		cc->batch_bytes_max = RTE_MIN(data, CNS_ENTRY_DATA_MAX);
		cc->inflight_max = 64;
	}
	/* InstallSnapshot chunks: what one frame carries after the InstallSnapshot header (≈1.3
	 * KiB at MTU 1500), more of them in flight when they are small. */
	uint32_t is_budget = frame_cap - (uint32_t)sizeof(struct wire_frame_hdr) - WIRE_MAC_SIZE -
			     (uint32_t)sizeof(struct wire_install_snapshot);
	if (is_budget < CNS_SNAPSHOT_CHUNK_MAX) {
		cc->snapshot_chunk_bytes = is_budget & ~7u;
		cc->snapshot_inflight_max = 16;
	}
}

static void *
zalloc(const char *what, uint16_t id, size_t size)
{
	char name[64];
	snprintf(name, sizeof(name), "shard%u_%s", id, what);
	void *p = rte_zmalloc(name, RTE_ALIGN_CEIL(size, 64), 64);
	if (p == NULL)
		APP_LOG(ERR, "shard %u: cannot allocate %zu bytes for %s", id, size, what);
	return p;
}

static void
watch_asset(struct app_shard *s, uint32_t asset)
{
	for (uint32_t i = 0; i < s->asset_count; i++)
		if (s->assets[i] == asset)
			return;
	if (s->asset_count < ASSETS_WATCH)
		s->assets[s->asset_count++] = asset;
}

int
app_shard_init(struct app *app, struct app_agent *agent, uint32_t index)
{
	const struct app_config *cfg = &app->cfg;
	const struct app_shard_conf *sc = &cfg->shards[index];
	char name[RTE_RING_NAMESIZE];
	int ret;

	struct app_shard *s = rte_zmalloc("app_shard", sizeof(*s), RTE_CACHE_LINE_SIZE);
	if (s == NULL)
		return -ENOMEM;
	app->shards[index] = s;
	s->app = app;
	s->conf = sc;
	s->index = index;
	s->id = sc->id;
	s->self = cfg->dp.node_id;
	s->is_oms = sc->service == APP_SERVICE_OMS;
	s->is_gateway = app->gateway_index == (int)index;
	s->redrive_ns = cfg->bridge_redrive_ms * 1000000;
	s->frame_cap = app_frame_cap(app);

	snprintf(name, sizeof(name), "shard%u_rx", sc->id);
	s->rx = dp_ring_create(app->dp, name, cfg->ring_size);
	snprintf(name, sizeof(name), "shard%u", sc->id);
	s->txq = dp_txq_create(app->dp, name, cfg->ring_size);
	snprintf(name, sizeof(name), "shard%u_local", sc->id);
	s->local = rte_ring_create(name, cfg->ring_size, (int)rte_socket_id(), RING_F_SC_DEQ);
	snprintf(name, sizeof(name), "shard%u_mgmt", sc->id);
	s->mgmt_rx = rte_ring_create(name, APP_CMD_PENDING_MAX * 4, (int)rte_socket_id(),
				     RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (s->rx == NULL || s->txq == NULL || s->local == NULL || s->mgmt_rx == NULL)
		return -ENOMEM;
	app_outbox_init(&s->ob, app, s->txq);
	ret = dp_route_add(app->dp, DP_CLASS_SHARD, sc->id, s->rx);
	if (ret == 0 && s->is_oms)
		ret = dp_route_add(app->dp, DP_CLASS_BRIDGE, sc->id, s->rx);
	if (ret == 0 && s->is_gateway)
		ret = dp_route_add(app->dp, DP_CLASS_GATEWAY, DP_SHARD_ANY, s->rx);
	if (ret == 0 && s->is_gateway)
		ret = dp_route_add(app->dp, DP_CLASS_CLIENT, DP_SHARD_ANY, s->rx);
	if (ret != 0)
		return ret;

	/* The service, in memory sized by its footprint. */
	size_t svc_size;
	struct oms_limits ol;
	struct me_limits ml;
	if (s->is_oms) {
		limits_oms(cfg, s->id, &ol);
		if (oms_limits_check(&ol) != 0 || (svc_size = oms_footprint(&ol)) == 0) {
			APP_LOG(ERR, "shard %u: oms limits refused ([limits])", s->id);
			return -EINVAL;
		}
	} else {
		limits_me(cfg, s->id, &ml);
		if ((svc_size = me_footprint(&ml)) == 0) {
			APP_LOG(ERR, "shard %u: me limits refused ([limits])", s->id);
			return -EINVAL;
		}
	}
	struct cns_limits cl = { .snapshot_bytes_max = (uint32_t)(cfg->snapshot_mb << 20) };
	struct cns_memlog_limits ll = {
		.entries_max = (uint32_t)cfg->log_entries_max,
		.bytes_max = (uint32_t)(cfg->log_mb << 20),
	};
	size_t cns_size = cns_footprint(&cl), log_size = cns_memlog_footprint(&ll);
	APP_LOG(INFO, "shard %u (%s): service %zu MiB, consensus %zu MiB, log %zu MiB", s->id,
		app_service_name(sc->service), svc_size >> 20, cns_size >> 20, log_size >> 20);
	if (svc_size > cl.snapshot_bytes_max)
		APP_LOG(WARNING, "shard %u: snapshots are limited to %" PRIu64 " MiB, the service "
			"can grow to %zu MiB: a snapshot of a full shard would fail ([limits] "
			"snapshot_mb)", s->id, cfg->snapshot_mb, svc_size >> 20);
	s->svc_mem = zalloc("svc", s->id, svc_size);
	s->cns_mem = zalloc("cns", s->id, cns_size);
	s->log_mem = zalloc("log", s->id, log_size);
	s->pq = zalloc("pq", s->id, sizeof(struct pq_ent) * PQ_MAX);
	if (s->is_oms)
		s->users = zalloc("users", s->id, sizeof(struct user_ent) * USERS_SLOTS);
	if (s->is_gateway) {
		s->clients = zalloc("clients", s->id, sizeof(struct user_ent) * USERS_SLOTS);
		s->xfers = zalloc("xfers", s->id, sizeof(struct xfer_ent) * XFER_SLOTS);
		if (app_lat_init(&s->gwlat, rte_socket_id()) != 0)
			return -ENOMEM;
	}
	if (s->is_oms) {
		s->xorigin = zalloc("xorigin", s->id, sizeof(struct xfer_ent) * XFER_SLOTS);
		s->reports = zalloc("reports", s->id, sizeof(struct wire_exec_report) * REPORT_RING);
		s->lat = zalloc("lat", s->id, sizeof(struct lat_table));
		if (s->lat == NULL)
			return -ENOMEM;
		hist_init(&s->lat->ack);
		hist_init(&s->lat->final);
	}
	if (s->svc_mem == NULL || s->cns_mem == NULL || s->log_mem == NULL || s->pq == NULL ||
	    (s->is_oms && (s->users == NULL || s->xorigin == NULL || s->reports == NULL)) ||
	    (s->is_gateway && (s->clients == NULL || s->xfers == NULL)))
		return -ENOMEM;
	if (s->is_oms)
		ret = oms_init((struct oms **)&s->svc, s->svc_mem, &ol);
	else
		ret = me_init((struct me **)&s->svc, s->svc_mem, &ml);
	if (ret == 0)
		ret = cns_memlog_init(&s->log, s->log_mem, &ll);
	if (ret != 0) {
		APP_LOG(ERR, "shard %u: service or log init: %s", s->id, strerror(-ret));
		return ret;
	}

	s->sink.ctx = s;
	s->sink.emit = sink_emit;
	struct cns_config cc;
	cns_conf(app, s, s->frame_cap, &cc);
	bool durable = cfg->durability == APP_DURABILITY_DURABLE;
	struct cns_env env = {
		.log_ops = durable ? &flog_ops : &cns_memlog_ops,
		.log = durable ? (void *)s : (void *)s->log,
		.svc_ops = &wrap_svc_ops,
		.svc = s,
		.sink = &s->sink,
		.host = { .ctx = s, .send = host_send,
			  .snapshot_saved = durable ? host_snapshot_saved : NULL },
	};
	struct cns_boot boot;
	struct cns_snapshot_meta snap;
	void *snap_data = NULL;
	memset(&boot, 0, sizeof(boot));
	if (durable) {
		cc.durability = CNS_DURABLE_DISK;
		s->pbatch = zalloc("pbatch", s->id, sizeof(struct pst_entry) * FLOG_BATCH_MAX);
		if (s->pbatch == NULL)
			return -ENOMEM;
		ret = flog_boot(s, &boot, &snap, &snap_data);
		if (ret != 0) {
			free(snap_data);
			return ret;
		}
		APP_LOG(INFO, "shard %u: file log %s/shard%u: term %" PRIu64 " vote %u, "
			"snapshot at %" PRIu64 ", entries %" PRIu64 "..%" PRIu64, s->id,
			cfg->data_dir, s->id, boot.term, boot.vote,
			boot.snapshot != NULL ? boot.snapshot->index : 0,
			cns_memlog_ops.first_index(s->log), cns_memlog_ops.last_index(s->log));
	}
	ret = cns_init(&s->cns, s->cns_mem, &cl, &cc, &env, &boot);
	free(snap_data);
	if (ret != 0) {
		APP_LOG(ERR, "shard %u: consensus init: %s", s->id, strerror(-ret));
		return ret;
	}

	/* ME shards the bridge asks for replays: every symbol's, and those hosted here. */
	bool seen[DP_SHARDS_MAX] = { false };
	for (uint32_t i = 0; i < cfg->symbol_count; i++)
		seen[cfg->symbols[i].me_shard] = true;
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if (cfg->shards[i].service == APP_SERVICE_ME)
			seen[cfg->shards[i].id] = true;
	for (uint16_t i = 0; i < DP_SHARDS_MAX; i++)
		if (seen[i])
			s->me_shards[s->me_shard_count++] = i;
	for (uint32_t i = 0; i < cfg->symbol_count; i++) {
		watch_asset(s, cfg->symbols[i].base_asset);
		watch_asset(s, cfg->symbols[i].quote_asset);
	}
	if (s->is_oms && app->persister == NULL)
		APP_LOG(WARNING, "shard %u: no database configured: accounts are not persisted "
			"(hydration answers NEW, flushes succeed without a write)", s->id);

	agent->do_work = shard_do_work;
	agent->state = s;
	return 0;
}

void
app_shard_fini(struct app *app, struct app_agent *agent)
{
	(void)agent;
	for (uint32_t i = 0; i < app->cfg.shard_count; i++) {
		struct app_shard *s = app->shards[i];
		if (s == NULL || agent->state != s)
			continue;
		app_outbox_free(&s->ob);
		if (s->local != NULL) {
			struct rte_mbuf *m;
			while (rte_ring_sc_dequeue(s->local, (void **)&m) == 0)
				rte_pktmbuf_free(m);
			rte_ring_free(s->local);
		}
		/* The lcore has stopped: commands it held are ours to free (main allocated
		 * them with malloc and forgets them at close). */
		if (s->mgmt_rx != NULL) {
			struct app_cmd *c;
			while (rte_ring_sc_dequeue(s->mgmt_rx, (void **)&c) == 0)
				free(c);
			rte_ring_free(s->mgmt_rx);
		}
		for (uint32_t k = 0; k < s->cmd_wait_count; k++)
			free(s->cmd_wait[k]);
		s->cmd_wait_count = 0;
		rte_free(s->svc_mem);
		rte_free(s->cns_mem);
		rte_free(s->log_mem);
		rte_free(s->pq);
		rte_free(s->users);
		rte_free(s->clients);
		rte_free(s->xfers);
		rte_free(s->xorigin);
		rte_free(s->reports);
		rte_free(s->lat);
		app_lat_free(s->gwlat);
		rte_free(s->pbatch);
		if (s->plog != NULL)
			pst_log_close(s->plog);
		rte_free(s);
		app->shards[i] = NULL;
	}
}

struct rte_ring *
app_shard_local_ring(const struct app *app, uint32_t index)
{
	return app->shards[index] != NULL ? app->shards[index]->local : NULL;
}

struct rte_ring *
app_shard_mgmt_ring(const struct app *app, uint32_t index)
{
	return app->shards[index] != NULL ? app->shards[index]->mgmt_rx : NULL;
}

bool
app_shard_leads(const struct app *app, uint32_t index, uint32_t *leader)
{
	const struct app_shard *s = app->shards[index];
	if (s == NULL) {
		*leader = 0;
		return false;
	}
	*leader = LOAD(s->pub_leader);
	return LOAD(s->pub_role) == CNS_LEADER;
}

uint64_t
app_shard_route_epoch(const struct app *app, uint32_t index)
{
	const struct app_shard *s = app->shards[index];
	return s != NULL && s->is_oms ? LOAD(s->pub_route_epoch) : 0;
}

/* ---------------------------------------------------------------------------------------
 * Stats (main lcore). Published values are relaxed loads; service and consensus counters
 * are single-writer 64-bit words read while the shard runs (a slightly stale value).
 * ------------------------------------------------------------------------------------- */

static const char *
role_name(uint32_t role)
{
	switch (role) {
	case CNS_FOLLOWER:
		return "follower";
	case CNS_PRE_CANDIDATE:
		return "pre_candidate";
	case CNS_CANDIDATE:
		return "candidate";
	case CNS_LEADER:
		return "leader";
	default:
		return "none";
	}
}

void
app_shard_stats_write(const struct app *app, uint32_t index, FILE *out)
{
	struct app_shard *s = app->shards[index];
	if (s == NULL)
		return;
	unsigned id = s->id;
	uint32_t role = LOAD(s->pub_role);
	fprintf(out, "shard.%u.service %s\n", id, app_service_name(s->conf->service));
	fprintf(out, "shard.%u.role %s\n", id, role_name(role));
	fprintf(out, "shard.%u.is_leader %u\n", id, role == CNS_LEADER);
	fprintf(out, "shard.%u.ready %u\n", id, (unsigned)LOAD(s->pub_ready));
	fprintf(out, "shard.%u.leader %u\n", id, LOAD(s->pub_leader));
	fprintf(out, "shard.%u.term %" PRIu64 "\n", id, LOAD(s->pub_term));
	fprintf(out, "shard.%u.commit %" PRIu64 "\n", id, LOAD(s->pub_commit));
	fprintf(out, "shard.%u.applied %" PRIu64 "\n", id, LOAD(s->pub_applied));
	fprintf(out, "shard.%u.last_index %" PRIu64 "\n", id, LOAD(s->pub_last));
	for (uint32_t i = 0; i < s->conf->member_count; i++) {
		/* Leader only (UINT64_MAX otherwise): per-member match index and lag. */
		uint64_t match = LOAD(s->pub_match[i]), last = LOAD(s->pub_last);
		if (match == UINT64_MAX)
			continue;
		fprintf(out, "shard.%u.member.%u.match %" PRIu64 "\n", id, s->conf->members[i],
			match);
		fprintf(out, "shard.%u.member.%u.lag %" PRIu64 "\n", id, s->conf->members[i],
			last > match ? last - match : 0);
	}
	for (int c = 0; c < SC_COUNT; c++)
		fprintf(out, "shard.%u.%s %" PRIu64 "\n", id, sc_labels[c], LOAD(s->c[c]));
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "shard.%u", id);
	app_outbox_stats_write(&s->ob, prefix, out);
	app_lat_stats_write(s->gwlat, "gateway", out);
	for (int c = 0; c < CNS_C_COUNT; c++)
		fprintf(out, "shard.%u.cns.%s %" PRIu64 "\n", id,
			cns_counter_name((enum cns_counter)c),
			cns_counter(s->cns, (enum cns_counter)c));
	if (s->is_oms) {
		fprintf(out, "shard.%u.route_epoch %" PRIu64 "\n", id, LOAD(s->pub_route_epoch));
		fprintf(out, "shard.%u.inflight %" PRIu64 "\n", id, LOAD(s->pub_inflight));
		fprintf(out, "shard.%u.resident %" PRIu64 "\n", id, LOAD(s->pub_resident));
		fprintf(out, "shard.%u.parked_now %" PRIu64 "\n", id, LOAD(s->pub_parked));
		for (uint32_t i = 0; i < s->asset_count; i++) {
			fprintf(out, "shard.%u.asset.%u.sum %" PRId64 "\n", id, s->assets[i],
				LOAD(s->pub_asset_sum[i]));
			fprintf(out, "shard.%u.asset.%u.fees %" PRId64 "\n", id, s->assets[i],
				LOAD(s->pub_asset_fees[i]));
		}
		for (int c = 0; c < OMS_C_COUNT; c++)
			fprintf(out, "shard.%u.oms.%s %" PRIu64 "\n", id,
				oms_counter_name((enum oms_counter)c),
				oms_counter_get(s->svc, (enum oms_counter)c));
		for (uint16_t r = 1; r < WIRE_REASON_MAX; r++)
			fprintf(out, "shard.%u.nak.%s %" PRIu64 "\n", id, wire_reason_name(r),
				oms_nak_count(s->svc, r));
		struct hist h; /* 15 KiB on the stack: callers are control-plane threads */
		static const char *const lat_names[2] = {"ingress_ack", "order_final"};
		for (int k = 0; k < 2; k++) {
			app_shard_latency(app, index, k == 0 ? &h : NULL, k == 1 ? &h : NULL);
			fprintf(out, "shard.%u.lat.%s.count %" PRIu64 "\n", id, lat_names[k], h.count);
			fprintf(out, "shard.%u.lat.%s.p50_ns %" PRIu64 "\n", id, lat_names[k],
				hist_percentile(&h, 50));
			fprintf(out, "shard.%u.lat.%s.p99_ns %" PRIu64 "\n", id, lat_names[k],
				hist_percentile(&h, 99));
			fprintf(out, "shard.%u.lat.%s.max_ns %" PRIu64 "\n", id, lat_names[k],
				h.count ? h.max : 0);
		}
		fprintf(out, "shard.%u.lat_overwritten %" PRIu64 "\n", id, s->lat->overwritten);
	} else {
		static const char *const me_names[ME_C_COUNT] = {
#define ME_NAME(name, label) #name,
			ME_COUNTERS(ME_NAME)
#undef ME_NAME
		};
		fprintf(out, "shard.%u.resting %" PRIu64 "\n", id, LOAD(s->pub_resting));
		for (int c = 0; c < ME_C_COUNT; c++)
			fprintf(out, "shard.%u.me.%s %" PRIu64 "\n", id, me_names[c],
				me_counter(s->svc, (enum me_counter)c));
	}
}

/* Published state of shard index for the views (any thread: relaxed loads only). */
int
app_shard_pub_read(const struct app *app, uint32_t index, struct app_shard_pub *out)
{
	const struct app_shard *s = app->shards[index];
	if (s == NULL)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	out->id = s->id;
	out->role = LOAD(s->pub_role);
	out->leader = LOAD(s->pub_leader);
	out->term = LOAD(s->pub_term);
	out->commit = LOAD(s->pub_commit);
	out->applied = LOAD(s->pub_applied);
	out->last = LOAD(s->pub_last);
	out->member_count = s->conf->member_count;
	for (uint32_t i = 0; i < s->conf->member_count; i++) {
		out->members[i] = s->conf->members[i];
		out->match[i] = LOAD(s->pub_match[i]);
	}
	out->elections = cns_counter(s->cns, CNS_C_ELECTIONS_STARTED);
	out->leader_elected = cns_counter(s->cns, CNS_C_LEADER_ELECTED);
	out->route_epoch = LOAD(s->pub_route_epoch);
	out->inflight = LOAD(s->pub_inflight);
	out->resident = LOAD(s->pub_resident);
	out->resting = LOAD(s->pub_resting);
	out->is_oms = s->is_oms;
	return 0;
}

const char *
app_shard_role_name(uint32_t role)
{
	return role_name(role);
}

/* Copies of the latency histograms (either may be NULL). -ENOENT: not an OMS shard. */
int
app_shard_latency(const struct app *app, uint32_t index, struct hist *ack, struct hist *final)
{
	const struct app_shard *s = app->shards[index];
	if (s == NULL || s->lat == NULL) {
		if (ack != NULL)
			hist_init(ack);
		if (final != NULL)
			hist_init(final);
		return -ENOENT;
	}
	if (ack != NULL)
		memcpy(ack, &s->lat->ack, sizeof(*ack));
	if (final != NULL)
		memcpy(final, &s->lat->final, sizeof(*final));
	return 0;
}

bool
app_shard_ready(const struct app *app, uint32_t index)
{
	const struct app_shard *s = app->shards[index];
	return s != NULL && LOAD(s->pub_ready);
}

uint32_t
app_shard_queued(const struct app *app, uint32_t index)
{
	const struct app_shard *s = app->shards[index];
	if (s == NULL)
		return 0;
	uint32_t rx = rte_ring_count(s->rx), local = rte_ring_count(s->local);
	return rx > local ? rx : local;
}

const struct app_lat *
app_shard_lat(const struct app *app)
{
	if (app->gateway_index < 0 || app->shards[app->gateway_index] == NULL)
		return NULL;
	return app->shards[app->gateway_index]->gwlat;
}

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
	X(LEADER_HINTS, "leader_hints", "NOT_LEADER answers taken as leader hints")        \
	X(BRIDGE_REBUILDS, "bridge_rebuilds", "bridge queues rebuilt (new leader term)")   \
	X(BRIDGE_REDRIVES, "bridge_redrives", "re-drive rounds")                           \
	X(BRIDGE_RESENT, "bridge_resent", "messages re-sent by re-drives")                 \
	X(BOOTSTRAPS, "bootstraps", "bootstrap config proposals")                         \
	X(PERSIST_ANSWERED, "persist_answered", "persistence requests answered inline")    \
	X(PERSIST_DROPPED, "persist_dropped", "persistence answers dropped (queue full)")  \
	X(SNAPSHOTS, "snapshots", "snapshots taken")                                       \
	X(SNAPSHOT_FAILED, "snapshot_failed", "snapshots that failed")                   \
	X(FLOG_ENTRIES, "flog_entries", "entries written to the file log")                \
	X(FLOG_ERRORS, "flog_errors", "file log writes that failed (retried)")            \
	X(FLOG_BOOT_ENTRIES, "flog_boot_entries", "entries recovered from the file log")

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
#define FLOG_BATCH_MAX 256        /* entries written to the file log per cycle */
#define FLOG_READ_BUF (1u << 20)  /* boot: bytes read from the file log at once */

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

	uint32_t oms_node[DP_SHARDS_MAX]; /* ME: node that last sent for OMS shard i */
	uint16_t me_shards[DP_SHARDS_MAX]; /* OMS: ME shards to ask for replays */
	uint32_t me_shard_count;
	struct dp_addr admin_addr;   /* where admin replies go: the last admin sender */

	struct user_ent *users;      /* OMS: user → gateway node */
	struct user_ent *clients;    /* gateway: user → client address */
	struct app_outbox ob;         /* frames being built */
	struct pq_ent *pq;           /* no database: answers to propose */
	uint32_t pq_count;

	/* Published for the stats (written by this lcore only). */
	uint32_t pub_role;
	uint32_t pub_leader;
	uint64_t pub_term;
	uint64_t pub_commit;
	uint64_t pub_applied;
	uint64_t pub_route_epoch;
	uint64_t pub_inflight;
	uint64_t pub_resident;
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

static uint16_t
gw_owner(const struct app_shard *s, uint64_t user)
{
	const struct app_routing_conf *r = &s->app->cfg.routing;
	for (uint32_t i = 0; i < r->pin_count; i++)
		if (r->pins[i].user == user)
			return r->pins[i].shard;
	return hrw_pick(user, r->shards, r->shard_count);
}

/* Client order entry: remember where the user is, wrap, send to the owner's leader. */
static void
gw_order(struct app_shard *s, const struct dp_meta *meta, const struct wire_msg_hdr *msg)
{
	uint64_t user = msg_user(msg);
	struct user_ent *e = user_slot(s->clients, user, true);
	e->addr = meta->src;
	e->session = meta->sender_id;
	uint16_t shard = e->owner_hint != 0 ? (uint16_t)(e->owner_hint - 1) : gw_owner(s, user);
	e->owner_hint = 0;
	struct wire_ingress ing;
	memset(&ing, 0, sizeof(ing));
	wire_hdr_init(&ing.hdr, WIRE_INGRESS, shard);
	ing.origin = s->self;
	ing.tail_len = msg->length;
	count(s, SC_GW_IN, 1);
	send_node(s, leader_guess(s->app, shard), DP_CLASS_SHARD, shard, &ing.hdr, msg,
		  msg->length);
}

/* An answer for a client (ACK, NAK, EXEC_REPORT, ...). NOT_LEADER answers teach the leader
 * hint of hdr.shard; NAKs with user 0 are hints only (bridge traffic refused). */
static void
gw_client(struct app_shard *s, const struct wire_msg_hdr *msg)
{
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
	case WIRE_DEST_ADMIN:
		count(s, SC_EGRESS_ADMIN, 1);
		if (s->admin_addr.ip_be != 0)
			app_outbox_add(&s->ob, NULL, &s->admin_addr, DP_CLASS_CLIENT, 0, msg,
				       NULL, 0);
		break;
	default:
		count(s, SC_NO_ROUTE, 1);
		break;
	}
}

static void
sink_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct app_shard *s = ctx;
	if (!s->leader) {
		count(s, SC_EGRESS_FOLLOWER, 1); /* ARCHITECTURE.md §3: only the leader's leaves */
		return;
	}
	egress_route(s, dest, msg);
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
 * gets the routing config (and the symbols) only while it is behind the configured epoch;
 * an ME shard gets the symbols at every new term. */
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
		if (!is_client_type(in->type)) {
			count(s, SC_INGRESS_BAD, 1);
			continue;
		}
		struct user_ent *e = user_slot(s->users, msg_user(in), true);
		e->node = origin;
		int rc = propose(s, in);
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
			if (s->is_gateway && is_client_type(msg->type))
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
		for (uint32_t i = 0; i < s->asset_count; i++) {
			PUB(s->pub_asset_sum[i], oms_asset_sum(oms, s->assets[i]));
			PUB(s->pub_asset_fees[i], oms_fees_get(oms, s->assets[i]));
		}
	} else {
		PUB(s->pub_resting, (uint64_t)me_orders_resting(s->svc));
	}
}

static uint32_t
shard_do_work(void *arg, uint64_t now_ns)
{
	struct app_shard *s = arg;
	struct rte_mbuf *ms[APP_SHARD_DRAIN_MAX];
	uint32_t work = 0;
	unsigned n;

	s->now = (uint64_t)((int64_t)now_ns + s->app->clock_offset_ns);
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
	count(s, SC_APPLIED, applied);
	work += applied;

	uint32_t leader = cns_leader(s->cns);
	if (leader != CNS_NODE_NONE)
		PUB(s->app->leader_hint[s->id], leader);
	roles_tick(s);
	if (s->is_oms)
		work += pq_drain(s);

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
	PUB(s->pub_leader, leader);
	PUB(s->pub_term, cns_term(s->cns));
	PUB(s->pub_commit, cns_commit_index(s->cns));
	PUB(s->pub_applied, idx);
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
	if (s->rx == NULL || s->txq == NULL || s->local == NULL)
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
	if (s->is_gateway)
		s->clients = zalloc("clients", s->id, sizeof(struct user_ent) * USERS_SLOTS);
	if (s->svc_mem == NULL || s->cns_mem == NULL || s->log_mem == NULL || s->pq == NULL ||
	    (s->is_oms && s->users == NULL) || (s->is_gateway && s->clients == NULL))
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
		.svc_ops = s->is_oms ? &oms_svc_ops : &me_svc_ops,
		.svc = s->svc,
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
		rte_free(s->svc_mem);
		rte_free(s->cns_mem);
		rte_free(s->log_mem);
		rte_free(s->pq);
		rte_free(s->users);
		rte_free(s->clients);
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
	fprintf(out, "shard.%u.leader %u\n", id, LOAD(s->pub_leader));
	fprintf(out, "shard.%u.term %" PRIu64 "\n", id, LOAD(s->pub_term));
	fprintf(out, "shard.%u.commit %" PRIu64 "\n", id, LOAD(s->pub_commit));
	fprintf(out, "shard.%u.applied %" PRIu64 "\n", id, LOAD(s->pub_applied));
	for (int c = 0; c < SC_COUNT; c++)
		fprintf(out, "shard.%u.%s %" PRIu64 "\n", id, sc_labels[c], LOAD(s->c[c]));
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "shard.%u", id);
	app_outbox_stats_write(&s->ob, prefix, out);
	for (int c = 0; c < CNS_C_COUNT; c++)
		fprintf(out, "shard.%u.cns.%s %" PRIu64 "\n", id,
			cns_counter_name((enum cns_counter)c),
			cns_counter(s->cns, (enum cns_counter)c));
	if (s->is_oms) {
		fprintf(out, "shard.%u.route_epoch %" PRIu64 "\n", id, LOAD(s->pub_route_epoch));
		fprintf(out, "shard.%u.inflight %" PRIu64 "\n", id, LOAD(s->pub_inflight));
		fprintf(out, "shard.%u.resident %" PRIu64 "\n", id, LOAD(s->pub_resident));
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

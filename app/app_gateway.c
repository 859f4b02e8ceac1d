/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway (docs/appliance.md): client order entry is wrapped into INGRESS and sent to
 * the owning OMS shard's leader; client-class answers are forwarded to the address the user
 * last came from. The owner of a user is what the local OMS replica applied: without
 * [gateway] the gateway runs on that replica's lcore (the node's first OMS shard) and reads
 * it; with [gateway] it runs on an lcore of its own (app_gateway_do_work) and reads the copy
 * that lcore publishes (app_route_pub.h).
 *
 * The shard is the routing authority and the gateway's route a hint (seed), so the gateway
 * follows refusals itself and the client never sees them: a NOT_OWNER teaches an owner
 * override for the user (every later message goes straight to the named shard until the
 * gateway's routing epoch changes) and sends the message again to that shard; a NOT_LEADER
 * teaches the node-wide leader hint of the shard and sends it again to the new leader; at
 * most GW_HOPS_MAX forwards per message (shards naming each other, or no leader to be
 * found, end in the NAK passed to the client, counted). Routed transfers are re-routed the
 * same way a few times (XFER_TRIES). The tables are app_gw_route.c's.
 */
#include <rte_ring.h>

#include "app_shard_int.h"
#include "common/hrw.h"
#include "oms/oms.h"

#define XFER_TRIES 3              /* re-routes by the gateway before leaving it to the client */
#define GW_HOPS_MAX 4             /* forwards of one order-entry message, the first included */
#define GW_OVERRIDES_MAX 4096     /* users with an owner override */
#define GW_REQUESTS_MAX 4096      /* order-entry messages followed until their ACK or NAK */

static_assert(sizeof(struct wire_new_order) <= APP_GWR_MSG_MAX, "APP_GWR_MSG_MAX");
static_assert(sizeof(struct wire_cancel) <= APP_GWR_MSG_MAX, "APP_GWR_MSG_MAX");
static_assert(sizeof(struct wire_amend) <= APP_GWR_MSG_MAX, "APP_GWR_MSG_MAX");
static_assert(sizeof(struct wire_cancel_replace) <= APP_GWR_MSG_MAX, "APP_GWR_MSG_MAX");
static_assert(APP_SHED_SHARDS == DP_SHARDS_MAX, "app_shed.h covers every shard id");

/* The routing the gateway lcore routes by ([gateway]): the copy the node's first OMS shard
 * lcore published last (app_route_pub.h), valid until this cycle ends; NULL before its
 * first routing config, and on a gateway that runs on a shard lcore (which reads its own
 * replica, or routes by the file). */
static const struct oms_route_info *
gw_routing(const struct app_shard *s)
{
	if (!s->route_reader)
		return NULL;
	const struct oms_route_info *ri = app_route_read(&s->app->route);
	return ri != NULL && ri->epoch > 0 ? ri : NULL;
}

/* The owner of user: the routing this node's OMS replica applied (routes and pins change
 * at run time through the control socket) — read on the replica's lcore when the gateway
 * runs there, from the published copy ri (gw_routing's, read once per message) on the
 * gateway lcore — else the configured routing. */
static uint16_t
gw_owner(const struct app_shard *s, const struct oms_route_info *ri, uint64_t user)
{
	if (s->is_oms && oms_route_epoch(s->svc) > 0)
		return oms_owner(s->svc, user);
	if (ri != NULL)
		return oms_route_info_owner(ri, user);
	const struct app_routing_conf *r = &s->app->cfg.routing;
	for (uint32_t i = 0; i < r->pin_count; i++)
		if (r->pins[i].user == user)
			return r->pins[i].shard;
	return hrw_pick(user, r->shards, r->shard_count);
}

/* The routing epoch the gateway routes by (the one gw_owner reads). */
static uint64_t
gw_epoch(const struct app_shard *s, const struct oms_route_info *ri)
{
	if (s->is_oms && oms_route_epoch(s->svc) > 0)
		return oms_route_epoch(s->svc);
	return ri != NULL ? ri->epoch : s->app->cfg.routing.epoch;
}

/* Wrap a client message in INGRESS and send it to node's lcore of shard — or, when that is
 * this lcore (the gateway runs on the node's first OMS shard), take it as that lcore takes
 * an INGRESS at once: no frame, no ring, no second walk of the message. A NAK that comes of
 * it (this member does not lead, back-pressure) reaches app_gw_client at once too; what the
 * gateway sends again from there goes by the ring (gw_direct), so nothing recurses. */
static void
gw_forward_to(struct app_shard *s, uint32_t node, uint16_t shard, const struct wire_msg_hdr *msg)
{
	if (node == s->self && shard == s->id && s->is_oms && !s->gw_direct &&
	    msg->type != WIRE_REPORT_REPLAY) {
		s->gw_direct = true;
		sc_add(s, SC_GW_DIRECT, 1);
		app_ingress_client(s, s->self, msg);
		s->gw_direct = false;
		return;
	}
	struct wire_ingress ing;
	memset(&ing, 0, sizeof(ing));
	wire_hdr_init(&ing.hdr, WIRE_INGRESS, shard);
	ing.origin = s->self;
	ing.tail_len = msg->length;
	app_send_node_tail(s, node, DP_CLASS_SHARD, shard, &ing.hdr, msg, msg->length);
}

/* ... to the leader (hint) of shard. */
static void
gw_forward(struct app_shard *s, uint16_t shard, const struct wire_msg_hdr *msg)
{
	gw_forward_to(s, app_leader_guess(s->app, shard), shard, msg);
}

/* One OMS shard's copy of a REPORT_REPLAY: any member keeps the answers (every replica
 * fills its ring at apply), so a local one serves it without crossing the network the
 * answers were lost on: this lcore when it is that shard, else the local lcore of it, else
 * the leader (hint). */
static void
gw_replay_to(struct app_shard *s, uint16_t shard, const struct wire_msg_hdr *msg)
{
	if (shard == s->id && s->is_oms) {
		app_egress_replay(s, s->self, (const struct wire_report_replay *)(const void *)msg);
		return;
	}
	bool local = shard < DP_SHARDS_MAX && s->w.peer[shard] != NULL;
	gw_forward_to(s, local ? s->self : app_leader_guess(s->app, shard), shard, msg);
}

/* A client's REPORT_REPLAY goes to the user's owner and to every other OMS shard this node
 * knows of (the routing its OMS replica applied, the configured routing, the OMS shards of
 * its file): a user that moved (scale-out or in, a pin, a migration) keeps its report
 * sequence, but the answers the old owner emitted before the move are in the old owner's
 * ring, and only there. A shard that does not own the user answers from its ring only what
 * it finds through the user's chain (app_egress_replay), so the copies cost no ring scan.
 * Replays are rare (a client that lost answers) and the OMS shards few. Nothing is proposed
 * and nothing is followed. */
static void
gw_replay(struct app_shard *s, const struct oms_route_info *ri, uint16_t shard,
	  const struct wire_msg_hdr *msg)
{
	sc_add(s, SC_GW_REPLAYS, 1);
	gw_replay_to(s, shard, msg);
	static_assert(DP_SHARDS_MAX <= 64, "a shard set fits a uint64_t");
	uint64_t others = 0; /* shard ids, bit per id */
	struct oms_route_info own;
	if (s->is_oms && oms_route_epoch(s->svc) > 0) {
		oms_route_get(s->svc, &own);
		ri = &own;
	}
	for (uint32_t i = 0; ri != NULL && i < ri->shard_count; i++)
		if (ri->shards[i].shard < DP_SHARDS_MAX)
			others |= UINT64_C(1) << ri->shards[i].shard;
	const struct app_config *cfg = &s->app->cfg;
	for (uint32_t i = 0; i < cfg->routing.shard_count; i++)
		if (cfg->routing.shards[i] < DP_SHARDS_MAX)
			others |= UINT64_C(1) << cfg->routing.shards[i];
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if (cfg->shards[i].service == APP_SERVICE_OMS && cfg->shards[i].id < DP_SHARDS_MAX)
			others |= UINT64_C(1) << cfg->shards[i].id;
	if (shard < DP_SHARDS_MAX)
		others &= ~(UINT64_C(1) << shard);
	sc_add(s, SC_GW_REPLAY_COPIES, (uint64_t)__builtin_popcountll(others));
	for (; others != 0; others &= others - 1)
		gw_replay_to(s, (uint16_t)__builtin_ctzll(others), msg);
}

size_t
app_gw_footprint(void)
{
	return app_gwr_footprint(GW_OVERRIDES_MAX, GW_REQUESTS_MAX);
}

int
app_gw_init(struct app_shard *s, void *mem)
{
	return app_gwr_init(&s->gwr, mem, GW_OVERRIDES_MAX, GW_REQUESTS_MAX, GW_HOPS_MAX);
}

/* Past saturation a new order is refused rather than queued behind the others (app_shed.h);
 * every other message passes (a cancel is never shed). */
static uint16_t
gw_shed(struct app_shard *s, const struct dp_meta *meta, uint16_t shard)
{
	switch (app_shed_admit(&s->shed, shard, s->clock_ns,
			       app_lat_since_ns(s->gwlat, meta->rx_tsc))) {
	case APP_SHED_QUEUE:
		sc_add(s, SC_GW_SHED_QUEUE, 1);
		return WIRE_REASON_BACKPRESSURE;
	case APP_SHED_WAIT:
		sc_add(s, SC_GW_SHED_WAIT, 1);
		return WIRE_REASON_BACKPRESSURE;
	default:
		return 0;
	}
}

/* Client order entry (and routed transfers): remember where the user is, wrap, send to the
 * owner's leader: the override a NOT_OWNER taught, else the routing. */
uint16_t
app_gw_order(struct app_shard *s, const struct dp_meta *meta, const struct wire_msg_hdr *msg,
	     uint32_t session)
{
	uint64_t user = app_msg_user(msg);
	struct user_ent *e = app_user_slot(s->clients, user, true);
	e->addr = meta->src;
	e->session = meta->sender_id;
	e->authed = session != 0;
	const struct oms_route_info *ri = gw_routing(s);
	if (app_gwr_epoch(&s->gwr, gw_epoch(s, ri)))
		sc_add(s, SC_GW_OVERRIDES_DROPPED, 1);
	uint16_t shard;
	if (app_gwr_owner(&s->gwr, user, &shard) != 0)
		shard = gw_owner(s, ri, user);
	if (msg->type == WIRE_REPORT_REPLAY) {
		gw_replay(s, ri, shard, msg);
		return 0;
	}
	if (msg->type == WIRE_NEW_ORDER) {
		uint16_t why = gw_shed(s, meta, shard);
		if (why != 0)
			return why;
	}
	app_lat_rx(s->gwlat, msg, meta->rx_tsc, shard);
	if (msg->type == WIRE_TRANSFER) {
		const struct wire_transfer *t = (const void *)msg;
		struct xfer_ent *x = app_xfer_slot(s->xfers, t->transfer_id, true);
		x->user = user;
		x->addr = meta->src;
		x->session = meta->sender_id;
		x->authed = session != 0;
		x->tries = 1;
		x->msg = *t;
		sc_add(s, SC_GW_XFER_IN, 1);
	} else {
		(void)app_gwr_req_put(&s->gwr, msg, shard);
		sc_add(s, SC_GW_IN, 1);
	}
	gw_forward(s, shard, msg);
	return 0;
}

/* Send an answer to the client: a logged-on session's go where the session is now, under
 * its key (dropped, counted, when it has ended: the client asks for them again with
 * REPORT_REPLAY after its next logon); others to the address the request came from. */
static void
gw_send_client(struct app_shard *s, bool authed, uint32_t session, const struct dp_addr *addr,
	       const struct wire_msg_hdr *msg)
{
	if (!authed) {
		app_outbox_add(&s->ob, NULL, addr, DP_CLASS_CLIENT, 0, msg, NULL, 0);
		return;
	}
	struct dp_addr to;
	const struct wire_key *key;
	if (!app_session_route(s, session, &to, &key)) {
		sc_add(s, SC_GW_SESSION_GONE, 1);
		return;
	}
	app_outbox_add_keyed(&s->ob, &to, key, msg);
}

/* A routed transfer was refused for a reason the gateway can act on: route it again (to
 * the named owner, or to the new leader hint) a few times before leaving it to the client. */
static bool
gw_xfer_retry(struct app_shard *s, struct xfer_ent *x, uint16_t shard)
{
	if (x->tries >= XFER_TRIES || shard >= DP_SHARDS_MAX)
		return false;
	x->tries++;
	sc_add(s, SC_GW_XFER_RESENT, 1);
	gw_forward(s, shard, &x->msg.hdr);
	return true;
}

/* The OMS leader's answer to a routed transfer: to the client that sent it. */
static void
gw_xfer_reply(struct app_shard *s, const struct wire_admin_reply *r)
{
	struct xfer_ent *x = app_xfer_slot(s->xfers, r->req_id, false);
	if (x == NULL) {
		sc_add(s, SC_GW_NO_CLIENT, 1);
		return;
	}
	if (r->reason == WIRE_REASON_NOT_OWNER && r->value < DP_SHARDS_MAX) {
		app_gwr_learn(&s->gwr, x->user, (uint16_t)r->value);
		if (gw_xfer_retry(s, x, (uint16_t)r->value))
			return;
	}
	sc_add(s, SC_GW_XFER_REPLIES, 1);
	gw_send_client(s, x->authed, x->session, &x->addr, &r->hdr);
	x->id = 0;
}

/* A NOT_OWNER or NOT_LEADER for an order-entry message this gateway forwarded: send it
 * again (to the named owner, or to the shard's new leader hint) instead of the client.
 * Returns true when the NAK is consumed here. */
static bool
gw_follow(struct app_shard *s, const struct wire_nak *n)
{
	uint16_t to;
	enum shard_counter c;
	struct app_gwr_req *r = app_gwr_req_find(&s->gwr, n->user, n->cl_ord_id);
	if (n->reason == WIRE_REASON_NOT_OWNER) {
		/* (The OMS's NAK does not say which shard refused: the request does.) */
		if (n->owner_shard >= DP_SHARDS_MAX || (r != NULL && r->shard == n->owner_shard))
			return false;
		to = n->owner_shard;
		app_gwr_learn(&s->gwr, n->user, to);
		c = SC_GW_REROUTES_OWNER;
	} else if (n->reason == WIRE_REASON_NOT_LEADER) {
		/* ingress.c's NAK names the refusing shard; the hint is already learnt. */
		if (r == NULL || n->hdr.shard != r->shard)
			return false;
		to = n->hdr.shard;
		c = SC_GW_REROUTES_LEADER;
	} else {
		return false;
	}
	switch (app_gwr_refused(&s->gwr, r, to)) {
	case APP_GWR_REROUTE:
		sc_add(s, c, 1);
		gw_forward(s, to, (const struct wire_msg_hdr *)(const void *)r->msg);
		return true;
	case APP_GWR_GIVEUP:
		/* Shards naming each other: the override is no better than the routing. */
		if (n->reason == WIRE_REASON_NOT_OWNER)
			app_gwr_forget(&s->gwr, n->user);
		sc_add(s, SC_GW_REROUTE_GIVEUPS, 1);
		return false;
	default:
		return false;
	}
}

/* An answer for a client (ACK, NAK, EXEC_REPORT, ...). NOT_LEADER answers teach the leader
 * hint of hdr.shard; NAKs with user 0 are hints only (bridge traffic refused). */
void
app_gw_client(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	if (msg->type == WIRE_ADMIN_REPLY) {
		if (s->is_gateway)
			gw_xfer_reply(s, (const void *)msg);
		return;
	}
	if (msg->type == WIRE_NAK) {
		const struct wire_nak *n = (const void *)msg;
		if (n->reason == WIRE_REASON_NOT_LEADER && msg->shard < DP_SHARDS_MAX) {
			if (n->leader_node != 0 && app_node_known(s->app, n->leader_node))
				PUB(s->app->leader_hint[msg->shard], n->leader_node);
			else
				app_leader_rotate(s->app, msg->shard,
						  app_leader_guess(s->app, msg->shard));
			sc_add(s, SC_LEADER_HINTS, 1);
		}
		if (n->user == 0 || !s->is_gateway)
			return;
		/* A routed transfer the shard could not propose (NAKed with the transfer id in
		 * cl_ord_id): route it again to the new leader hint. */
		struct xfer_ent *x = app_xfer_slot(s->xfers, n->cl_ord_id, false);
		if (x != NULL && x->user == n->user) {
			if (n->reason == WIRE_REASON_NOT_LEADER)
				(void)gw_xfer_retry(s, x, msg->shard);
			return; /* the client matches transfers by ADMIN_REPLY only; it retries */
		}
		if (gw_follow(s, n))
			return;
	}
	if (msg->type != WIRE_ACK && msg->type != WIRE_NAK && msg->type != WIRE_EXEC_REPORT)
		return;
	if (!s->is_gateway)
		return; /* answers reach the gateway lcore only (app_gw_to_gateway) */
	uint64_t user = app_msg_user(msg);
	if (msg->type != WIRE_EXEC_REPORT) {
		/* The request's answer: it is no longer ours to follow. */
		uint64_t cl;
		memcpy(&cl, (const uint8_t *)(msg + 1) + 8, sizeof(cl));
		app_gwr_req_done(app_gwr_req_find(&s->gwr, user, cl));
	}
	struct user_ent *e = app_user_slot(s->clients, user, false);
	if (e == NULL) {
		sc_add(s, SC_GW_NO_CLIENT, 1);
		return;
	}
	sc_add(s, SC_GW_OUT, 1);
	uint64_t answer_ns;
	uint16_t to;
	if (app_lat_tx(s->gwlat, msg, &answer_ns, &to))
		app_shed_sample(&s->shed, to, s->clock_ns, answer_ns);
	gw_send_client(s, e->authed, e->session, &e->addr, msg);
}

/* Send a client-class message to node's gateway (ours directly). */
void
app_gw_to_gateway(struct app_shard *s, uint32_t node, const struct wire_msg_hdr *msg)
{
	if (node == s->self && s->is_gateway) {
		app_gw_client(s, msg);
		return;
	}
	app_send_node(s, node, DP_CLASS_CLIENT, msg->shard, msg);
}

#define GW_HOLD_FRAMES 2 /* INGRESS frames waiting at a local OMS shard that hold the intake */

/* [port] rx_hold_frames (a node that paces its clients rather than refuse them, the pcap
 * benches): the io lcores stop reading the port while a ring holds that many frames, but
 * the gateway lcore empties its own at once and packs a cycle's orders into a few INGRESS
 * frames — a local OMS shard would take in one cycle what the port gave in many, more of a
 * cold user's messages than it parks (parked_per_user). So the gateway takes no client
 * frame while a local OMS shard has not yet taken what it was sent (its ring then fills,
 * and the io lcores' gate sees it): a shard's intake per cycle is what it was when the
 * gateway ran on its lcore. Answers (the local ring) are always taken. */
static bool
gw_held(const struct app_shard *s)
{
	const struct app *app = s->app;
	if (app->cfg.rx_hold_frames == 0)
		return false;
	for (uint32_t i = 0; i < app->cfg.shard_count; i++)
		if (app->cfg.shards[i].service == APP_SERVICE_OMS &&
		    rte_ring_count(app_shard_local_ring(app, i)) >= GW_HOLD_FRAMES)
			return true;
	return false;
}

/* [gateway]: the gateway lcore's cycle — the client classes from the port and from this
 * node's lcores (answers for clients, NOT_LEADER hints), the sessions' duty, the outbox.
 * Nothing here is replicated: a restart loses the sessions (clients log on again) and the
 * requests followed (the clients' retransmits and REPORT_REPLAY cover them). */
uint32_t
app_gateway_do_work(void *arg, uint64_t now_ns)
{
	struct app_shard *s = arg;
	uint32_t work = 0;

	s->now = (uint64_t)((int64_t)now_ns + s->app->clock_offset_ns);
	s->clock_ns = now_ns;
	if (!gw_held(s))
		work += app_shard_take(s, s->w.rx);
	else
		sc_add(s, SC_GW_HELD, 1);
	work += app_shard_take(s, s->w.local);
	app_session_duty(s);
	app_outbox_flush(&s->ob);
	return work;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway (docs/appliance.md), on the node's gateway lcore (the first OMS shard): client
 * order entry is wrapped into INGRESS and sent to the owning OMS shard's leader; client-class
 * answers are forwarded to the address the user last came from; transfers a client asked
 * the gateway to route are re-routed on NOT_OWNER or NOT_LEADER a few times. It lives on a
 * shard lcore because the owner of a user is what the local OMS replica applied, and only
 * that lcore reads the replica. NOT_LEADER answers passing through teach the node-wide
 * leader hints.
 */
#include "app_shard_int.h"
#include "common/hrw.h"
#include "oms/oms.h"

#define XFER_TRIES 3              /* re-routes by the gateway before leaving it to the client */

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
	app_send_node(s, app_leader_guess(s->app, shard), DP_CLASS_SHARD, shard, &ing.hdr, msg,
		      msg->length);
}

/* Client order entry (and routed transfers): remember where the user is, wrap, send to the
 * owner's leader. */
void
app_gw_order(struct app_shard *s, const struct dp_meta *meta, const struct wire_msg_hdr *msg)
{
	uint64_t user = app_msg_user(msg);
	struct user_ent *e = app_user_slot(s->clients, user, true);
	e->addr = meta->src;
	e->session = meta->sender_id;
	uint16_t shard = e->owner_hint != 0 ? (uint16_t)(e->owner_hint - 1) : gw_owner(s, user);
	e->owner_hint = 0;
	app_lat_rx(s->gwlat, msg, meta->rx_tsc);
	if (msg->type == WIRE_TRANSFER) {
		const struct wire_transfer *t = (const void *)msg;
		struct xfer_ent *x = app_xfer_slot(s->xfers, t->transfer_id, true);
		x->user = user;
		x->addr = meta->src;
		x->session = meta->sender_id;
		x->tries = 1;
		x->msg = *t;
		sc_add(s, SC_GW_XFER_IN, 1);
	} else {
		sc_add(s, SC_GW_IN, 1);
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
	if (r->reason == WIRE_REASON_NOT_OWNER && r->value < DP_SHARDS_MAX &&
	    gw_xfer_retry(s, x, (uint16_t)r->value))
		return;
	sc_add(s, SC_GW_XFER_REPLIES, 1);
	app_outbox_add(&s->ob, NULL, &x->addr, DP_CLASS_CLIENT, 0, &r->hdr, NULL, 0);
	x->id = 0;
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
		if (n->user == 0)
			return;
		/* A routed transfer the shard could not propose (NAKed with the transfer id in
		 * cl_ord_id): route it again to the new leader hint. */
		struct xfer_ent *x =
			s->is_gateway ? app_xfer_slot(s->xfers, n->cl_ord_id, false) : NULL;
		if (x != NULL && x->user == n->user) {
			if (n->reason == WIRE_REASON_NOT_LEADER)
				(void)gw_xfer_retry(s, x, msg->shard);
			return; /* the client matches transfers by ADMIN_REPLY only; it retries */
		}
		if (n->reason == WIRE_REASON_NOT_OWNER && n->owner_shard < DP_SHARDS_MAX) {
			struct user_ent *e = app_user_slot(s->clients, n->user, false);
			if (e != NULL)
				e->owner_hint = (uint16_t)(n->owner_shard + 1);
		}
	}
	if (msg->type != WIRE_ACK && msg->type != WIRE_NAK && msg->type != WIRE_EXEC_REPORT)
		return;
	struct user_ent *e = app_user_slot(s->clients, app_msg_user(msg), false);
	if (e == NULL) {
		sc_add(s, SC_GW_NO_CLIENT, 1);
		return;
	}
	sc_add(s, SC_GW_OUT, 1);
	app_lat_tx(s->gwlat, msg);
	app_outbox_add(&s->ob, NULL, &e->addr, DP_CLASS_CLIENT, 0, msg, NULL, 0);
}

/* Send a client-class message to node's gateway (ours directly). */
void
app_gw_to_gateway(struct app_shard *s, uint32_t node, const struct wire_msg_hdr *msg)
{
	if (node == s->self && s->is_gateway) {
		app_gw_client(s, msg);
		return;
	}
	app_send_node(s, node, DP_CLASS_CLIENT, msg->shard, msg, NULL, 0);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ingress of the shard lcore: every frame from the rx ring (the port) and the local ring
 * (other lcores of this node), message by message. Raft messages go to cns_step; INGRESS
 * from a gateway, bridge results and admin messages are proposed into the log (NAKed to the
 * gateway when they cannot be); forwarded admin commands and their answers go to
 * app_admin_fwd.c; gateway and client classes go to the gateway. Frames between nodes must
 * come from a node's address: a client must not inject votes, reports or admin commands.
 */
#include <errno.h>

#include "app_shard_int.h"
#include "common/check.h"
#include "oms/oms.h"


/* NAK a client message we could not propose, to the gateway that forwarded it. */
static void
nak(struct app_shard *s, uint32_t origin, const struct wire_msg_hdr *in, uint16_t reason)
{
	struct wire_nak n;
	memset(&n, 0, sizeof(n));
	wire_hdr_init(&n.hdr, WIRE_NAK, s->id);
	n.user = app_msg_user(in);
	memcpy(&n.cl_ord_id, (const uint8_t *)(in + 1) + 8, sizeof(n.cl_ord_id));
	n.reason = reason;
	n.leader_node = reason == WIRE_REASON_NOT_LEADER ? cns_leader(s->cns) : 0;
	n.route_epoch = s->app->cfg.routing.epoch;
	app_gw_to_gateway(s, origin, &n.hdr);
}

/* The symbol bridge_heard last marked in this frame (one sender, one cycle: marking the
 * same symbol's ME shard again changes nothing). */
struct heard {
	uint32_t sym;
	bool valid;
};

/* An ME shard's egress comes from its leader: the node that sent it is the one to send
 * that shard's requests to (the bridge's guess for a shard this node does not host is
 * otherwise only corrected by rotating, app_bridge.c), and the shard is alive. */
static void
bridge_heard(struct app_shard *s, uint32_t sender, const struct wire_msg_hdr *msg,
	     struct heard *h)
{
	uint32_t sym;
	if (msg->type == WIRE_ME_EVENT && msg->length >= sizeof(struct wire_me_event))
		sym = ((const struct wire_me_event *)msg)->symbol;
	else if (msg->type == WIRE_ME_RESULT && msg->length >= sizeof(struct wire_me_result))
		sym = ((const struct wire_me_result *)msg)->symbol;
	else
		return;
	if (h->valid && h->sym == sym)
		return;
	h->sym = sym;
	h->valid = true;
	struct oms_symbol_info y;
	if (oms_symbol_get(s->svc, sym, &y) != 0 || y.me_shard >= DP_SHARDS_MAX ||
	    !app_node_known(s->app, sender))
		return;
	s->me_heard[y.me_shard] = s->now;
	if (s->app->shard_index[y.me_shard] < 0 && LOAD(s->app->leader_hint[y.me_shard]) != sender)
		PUB(s->app->leader_hint[y.me_shard], sender);
}

/* Client messages forwarded by a gateway (origin = its node). */
static void
ingress(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	const struct wire_ingress *ing = (const void *)msg;
	uint32_t origin = ing->origin;
	if (!s->is_oms || !app_node_known(s->app, origin)) {
		sc_add(s, SC_INGRESS_BAD, 1);
		return;
	}
	const uint8_t *tail = (const uint8_t *)(ing + 1);
	uint32_t pos = 0;
	enum wire_err err;
	const struct wire_msg_hdr *in;
	while ((in = wire_msgs_next(tail, ing->tail_len, &pos, &err)) != NULL) {
		if (!app_is_routed_type(in)) {
			sc_add(s, SC_INGRESS_BAD, 1);
			continue;
		}
		if (in->type == WIRE_REPORT_REPLAY) {
			/* Served by any member from its ring, never proposed. */
			app_egress_replay(s, origin, (const struct wire_report_replay *)(const void *)in);
			continue;
		}
		app_ingress_client(s, origin, in);
	}
}

void
app_ingress_client(struct app_shard *s, uint32_t origin, const struct wire_msg_hdr *in)
{
	DCHECK(s->is_oms);
	DCHECK(app_is_routed_type(in) && in->type != WIRE_REPORT_REPLAY);
	struct user_ent *e = app_user_slot(s->users, app_msg_user(in), true);
	e->node = origin;
	if (in->type == WIRE_TRANSFER) {
		const struct wire_transfer *t = (const void *)in;
		struct xfer_ent *x = app_xfer_slot(s->xorigin, t->transfer_id, true);
		x->user = t->user;
		x->node = origin;
	}
	int rc = app_shard_propose(s, in);
	if (rc == 0)
		app_reqlat_begin(s, in);
	if (rc == -EPERM || rc == -EBUSY)
		nak(s, origin, in, WIRE_REASON_NOT_LEADER);
	else if (rc == -EAGAIN)
		nak(s, origin, in, WIRE_REASON_BACKPRESSURE);
	else if (rc != 0)
		nak(s, origin, in, WIRE_REASON_BAD_REQUEST);
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
	case WIRE_REBIND_TO_ME:
		return ((const struct wire_rebind *)msg)->from_shard;
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
			sc_add(s, SC_RAFT_IN, 1);
		else
			sc_add(s, SC_RAFT_BAD, 1);
		return;
	}
	if (msg->type == WIRE_INGRESS) {
		ingress(s, msg);
		return;
	}
	if (msg->type == WIRE_FORWARDED_ADMIN || msg->type == WIRE_FORWARDED_REPLY) {
		app_fwd_msg_in(s, meta, msg);
		return;
	}
	uint16_t stream = s->is_oms ? UINT16_MAX : me_request_stream(msg);
	bool from_node = app_node_known(s->app, meta->sender_id);
	if (stream < DP_SHARDS_MAX && from_node)
		s->oms_node[stream] = meta->sender_id; /* ME egress for that stream goes there */
	if (wire_type_is_admin(msg->type) && meta->src.ip_be != s->app->cfg.dp.ip_be)
		s->admin_addr = meta->src;
	int rc = app_shard_propose(s, msg);
	if ((rc == -EPERM || rc == -EBUSY) && stream != UINT16_MAX && from_node && !*hinted &&
	    meta->sender_id != s->self) {
		/* A bridge sent to a follower: tell its node who leads (one per frame). */
		struct wire_nak n;
		memset(&n, 0, sizeof(n));
		wire_hdr_init(&n.hdr, WIRE_NAK, s->id);
		n.reason = WIRE_REASON_NOT_LEADER;
		n.leader_node = cns_leader(s->cns);
		app_gw_to_gateway(s, meta->sender_id, &n.hdr);
		*hinted = true;
	}
}

/* What only another node may send to a shard: the operator's commands reach a shard
 * through a node's control socket (forwarded, or proposed by the node that leads it). A
 * client may send a TRANSFER straight to an OMS shard (the treasury path, docs/appliance.md)
 * and nothing else of the admin column. */
static bool
is_node_admin(const struct wire_msg_hdr *msg)
{
	return msg->type == WIRE_FORWARDED_ADMIN || msg->type == WIRE_FORWARDED_REPLY ||
	       (wire_type_is_admin(msg->type) && msg->type != WIRE_TRANSFER);
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

void
app_ingress_frame(struct app_shard *s, struct rte_mbuf *m)
{
	const struct dp_meta *meta = dp_meta(m);
	const uint8_t *buf;
	uint32_t len, pos = 0;
	const struct wire_msg_hdr *msg;
	bool hinted = false;
	struct heard heard = { 0, false };

	dp_rx_msgs(m, &buf, &len);
	sc_add(s, SC_FRAMES, 1);
	if (s->cns == NULL && meta->cls != DP_CLASS_GATEWAY && meta->cls != DP_CLASS_CLIENT) {
		/* The gateway lcore ([gateway]) is routed the client classes only. */
		sc_add(s, SC_NO_ROUTE, 1);
		rte_pktmbuf_free(m);
		return;
	}
	bool node = from_node(s->app, &meta->src);
	if (!node && (meta->cls == DP_CLASS_BRIDGE || meta->cls == DP_CLASS_CLIENT)) {
		sc_add(s, SC_NOT_FROM_NODE, 1);
		rte_pktmbuf_free(m);
		return;
	}
	if (meta->cls == DP_CLASS_GATEWAY) {
		/* Client order entry: logons, sessions and their rights first (app_session.c). */
		if (s->is_gateway)
			app_session_frame(s, m, meta);
		rte_pktmbuf_free(m);
		return;
	}
	if (!node && meta->cls == DP_CLASS_SHARD && !s->app->cfg.allow_unauthenticated) {
		/* A client may only reach the gateway, in a session (docs/security.md). */
		sc_add(s, SC_NO_SESSION_SHARD, 1);
		rte_pktmbuf_free(m);
		return;
	}
	/* Decoded by the io lcore, or built by a local lcore: the framing is walked, not every
	 * field again (wire_msgs_next_decoded). An INGRESS's inner messages are checked. */
	while ((msg = wire_msgs_next_decoded(buf, len, &pos)) != NULL) {
		sc_add(s, SC_MSGS, 1);
		switch (meta->cls) {
		case DP_CLASS_SHARD:
			if (!node && (msg->type == WIRE_INGRESS ||
				      (msg->type >= WIRE_REQUEST_VOTE &&
				       msg->type <= WIRE_TIMEOUT_NOW))) {
				sc_add(s, SC_NOT_FROM_NODE, 1);
				break;
			}
			if (!node && is_node_admin(msg)) {
				sc_add(s, SC_ADMIN_NOT_FROM_NODE, 1);
				break;
			}
			shard_msg(s, meta, msg, &hinted);
			break;
		case DP_CLASS_BRIDGE:
			/* ME results and events for this OMS shard: into its log. Refused ones
			 * are dropped; the bridge's replay requests bring them back. */
			if (s->is_oms) {
				bridge_heard(s, meta->sender_id, msg, &heard);
				app_shard_propose(s, msg);
			}
			break;
		case DP_CLASS_CLIENT:
			app_gw_client(s, msg);
			break;
		default:
			break;
		}
	}
	rte_pktmbuf_free(m);
}

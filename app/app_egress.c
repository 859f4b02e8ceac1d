/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Egress of applied entries: the service's sink. The service emits on every member; only
 * the leader's egress leaves (ARCHITECTURE.md §3), routed by destination (a client's
 * gateway, an ME or OMS shard's leader, the persister or the inline answers, the admin)
 * into the outbox, never blocking. Every member also keeps the newest numbered client
 * messages (ACK, NAK, EXEC_REPORT), for a new leader to re-send and for REPORT_REPLAY, and
 * hands ADMIN_REPLYs to the control-socket commands waiting.
 */
#include "app_shard_int.h"
#include "common/check.h"
#include "oms/oms.h"

/* Client messages lost with a leader: re-sent by a new leader when emitted within this much
 * cluster time before the newest one kept (struct app_shard.reports, REPORT_RING). */
#define REPORT_RESEND_NS (500ull * 1000000)

void
app_egress_route(struct app_shard *s, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	sc_add(s, SC_EGRESS, 1);
	switch (dest) {
	case WIRE_DEST_CLIENT: {
		const struct user_ent *e = app_user_slot(s->users, app_msg_user(msg), false);
		if (e != NULL) {
			app_gw_to_gateway(s, e->node, msg);
			break;
		}
		/* No gateway known (a new leader, a restart): every gateway gets it and the one
		 * that knows the user's address forwards it. */
		app_gw_to_gateway(s, s->self, msg);
		for (uint32_t i = 0; i < s->app->cfg.dp.peer_count; i++)
			app_gw_to_gateway(s, s->app->cfg.dp.peers[i].node_id, msg);
		break;
	}
	case WIRE_DEST_ME:
		if (!s->roles_ready) {
			sc_add(s, SC_EGRESS_NOT_READY, 1);
			break;
		}
		if (msg->shard >= DP_SHARDS_MAX) {
			sc_add(s, SC_NO_ROUTE, 1);
			break;
		}
		app_send_node(s, app_leader_guess(s->app, msg->shard), DP_CLASS_SHARD, msg->shard,
			      msg, NULL, 0);
		break;
	case WIRE_DEST_OMS: {
		if (msg->shard >= DP_SHARDS_MAX) {
			sc_add(s, SC_NO_ROUTE, 1);
			break;
		}
		uint32_t node = s->oms_node[msg->shard];
		if (node == 0)
			node = app_leader_guess(s->app, msg->shard);
		app_send_node(s, node, DP_CLASS_BRIDGE, msg->shard, msg, NULL, 0);
		break;
	}
	case WIRE_DEST_PERSIST: {
		if (!s->roles_ready) {
			sc_add(s, SC_EGRESS_NOT_READY, 1);
			break;
		}
		if (s->w.persist_rq != NULL)
			app_outbox_add(&s->ob, s->w.persist_rq, NULL, DP_CLASS_SHARD, s->id, msg,
				       NULL, 0);
		else
			app_inline_persist_answer(s, msg);
		break;
	}
	case WIRE_DEST_ADMIN: {
		sc_add(s, SC_EGRESS_ADMIN, 1);
		/* The answer to a transfer a gateway routed goes back through that gateway. */
		const struct wire_admin_reply *r = (const void *)msg;
		struct xfer_ent *x = msg->type == WIRE_ADMIN_REPLY && s->xorigin != NULL
					     ? app_xfer_slot(s->xorigin, r->req_id, false)
					     : NULL;
		if (x != NULL) {
			uint32_t node = x->node;
			x->id = 0;
			app_gw_to_gateway(s, node, msg);
			break;
		}
		if (s->admin_addr.ip_be != 0)
			app_outbox_add(&s->ob, NULL, &s->admin_addr, DP_CLASS_CLIENT, 0, msg,
				       NULL, 0);
		break;
	}
	default:
		sc_add(s, SC_NO_ROUTE, 1);
		break;
	}
}

/* Keep a numbered client message (one that carries a per-user seq) for a new leader. */
static void
report_keep(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	uint64_t last = s->report_count > 0
				? s->reports[(s->report_count - 1) % REPORT_RING].time_ns
				: 0;
	uint64_t seq, t;
	switch (msg->type) {
	case WIRE_EXEC_REPORT:
		seq = ((const struct wire_exec_report *)msg)->seq;
		t = ((const struct wire_exec_report *)msg)->time_ns;
		break;
	case WIRE_ACK:
		seq = ((const struct wire_ack *)msg)->seq;
		t = ((const struct wire_ack *)msg)->time_ns; /* a duplicate's: the original's */
		break;
	case WIRE_NAK:
		seq = ((const struct wire_nak *)msg)->seq;
		t = 0; /* no time of its own: the last one's */
		break;
	default:
		return;
	}
	if (seq == 0)
		return; /* not numbered (a NAK to a user not resident): a hole in nothing */
	struct report_ent *e = &s->reports[s->report_count % REPORT_RING];
	DCHECK(msg->length <= sizeof(e->m));
	memcpy(&e->m, msg, msg->length);
	e->user = app_msg_user(msg);
	e->seq = seq;
	e->time_ns = t > last ? t : last;
	s->report_count++;
}

void
app_egress_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct app_shard *s = ctx;
	if (dest == WIRE_DEST_CLIENT && s->reports != NULL)
		report_keep(s, msg);
	if (msg->type == WIRE_ADMIN_REPLY && s->cmd_wait_count > 0)
		/* On every member: commit is what counts. */
		app_cmd_admin_reply(s, (const void *)msg);
	if (!s->leader) {
		sc_add(s, SC_EGRESS_FOLLOWER, 1); /* ARCHITECTURE.md §3: only the leader's leaves */
		return;
	}
	if (dest == WIRE_DEST_CLIENT)
		app_reqlat_end(s, msg);
	app_egress_route(s, dest, msg);
}

/* Leadership gained: re-send the reports emitted within REPORT_RESEND_NS before the newest
 * one kept (what the old leader emitted last, before the election's silence), in the order
 * they were emitted (per-user sequences ascend). */
void
app_egress_reports_resend(struct app_shard *s)
{
	if (s->report_count == 0)
		return;
	uint64_t newest = s->reports[(s->report_count - 1) % REPORT_RING].time_ns;
	uint64_t first = s->report_count > REPORT_RING ? s->report_count - REPORT_RING : 0;
	for (uint64_t i = first; i < s->report_count; i++) {
		const struct report_ent *r = &s->reports[i % REPORT_RING];
		if (r->time_ns + REPORT_RESEND_NS < newest)
			continue;
		app_egress_route(s, WIRE_DEST_CLIENT, &r->m.hdr);
		sc_add(s, SC_REPORTS_RESENT, 1);
	}
}

/* A client's REPORT_REPLAY (through a gateway, origin node): the kept answers of its user
 * with seq in [from, to] (to 0: all), oldest first, at most WIRE_REPLAY_MAX; the client asks
 * again from the first still missing. One pass over the ring (REPORT_RING entries, a few
 * tens of microseconds): requests come from clients that saw a hole, at their pace. */
void
app_egress_replay(struct app_shard *s, uint32_t node, const struct wire_report_replay *r)
{
	if (s->reports == NULL || r->user == 0 || r->from_seq == 0 ||
	    (r->to_seq != 0 && r->to_seq < r->from_seq)) {
		sc_add(s, SC_INGRESS_BAD, 1);
		return;
	}
	sc_add(s, SC_REPLAY_REQUESTS, 1);
	uint64_t first = s->report_count > REPORT_RING ? s->report_count - REPORT_RING : 0;
	uint64_t to = r->to_seq != 0 ? r->to_seq : UINT64_MAX;
	uint32_t sent = 0;
	uint64_t oldest = 0;
	for (uint64_t i = first; i < s->report_count && sent < WIRE_REPLAY_MAX; i++) {
		const struct report_ent *e = &s->reports[i % REPORT_RING];
		if (e->user != r->user)
			continue;
		if (oldest == 0)
			oldest = e->seq;
		if (e->seq < r->from_seq || e->seq > to)
			continue;
		app_gw_to_gateway(s, node, &e->m.hdr);
		sent++;
	}
	if (oldest > r->from_seq)
		sc_add(s, SC_REPLAY_TRUNCATED, 1); /* gone from the ring: lost for good */
	sc_add(s, SC_REPLAY_SENT, sent);
}

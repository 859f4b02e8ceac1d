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
 * cluster time before the newest one kept (struct app_shard.reports, report_ring). */
#define REPORT_RESEND_NS (500ull * 1000000)

/* A client's message to its gateway. */
static void
route_client(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	const struct user_ent *e = app_user_slot(s->users, app_msg_user(msg), false);
	if (e != NULL) {
		app_gw_to_gateway(s, e->node, msg);
		return;
	}
	/* No gateway known (a new leader, a restart): every gateway gets it and the one that
	 * knows the user's address forwards it. */
	app_gw_to_gateway(s, s->self, msg);
	for (uint32_t i = 0; i < s->app->cfg.dp.peer_count; i++)
		app_gw_to_gateway(s, s->app->cfg.dp.peers[i].node_id, msg);
}

/* The destinations other than a client's, an ME's and an OMS shard's; and those three's
 * refusals. Out of line: the common routes are then each a jump to the send, with no
 * registers to save. */
static __attribute__((noinline)) void
route_rest(struct app_shard *s, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	switch (dest) {
	case WIRE_DEST_CLIENT:
		route_client(s, msg);
		break;
	case WIRE_DEST_ME:
		if (!s->roles_ready)
			sc_add(s, SC_EGRESS_NOT_READY, 1);
		else
			sc_add(s, SC_NO_ROUTE, 1); /* (shard out of range) */
		break;
	case WIRE_DEST_OMS:
		sc_add(s, SC_NO_ROUTE, 1); /* (shard out of range) */
		break;
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

void
app_egress_route(struct app_shard *s, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	sc_add(s, SC_EGRESS, 1);
	uint16_t shard = msg->shard;
	if (dest == WIRE_DEST_ME && s->roles_ready && shard < DP_SHARDS_MAX) {
		app_send_node(s, app_leader_guess(s->app, shard), DP_CLASS_SHARD, shard, msg);
		return;
	}
	if (dest == WIRE_DEST_OMS && shard < DP_SHARDS_MAX) {
		uint32_t node = s->oms_node[shard];
		if (node == 0)
			node = app_leader_guess(s->app, shard);
		app_send_node(s, node, DP_CLASS_BRIDGE, shard, msg);
		return;
	}
	route_rest(s, dest, msg);
}

static inline struct report_ent *
report_at(const struct app_shard *s, uint64_t pos)
{
	return &s->reports[pos & (s->report_ring - 1)];
}

/* The oldest position still in the ring. */
static inline uint64_t
report_first(const struct app_shard *s)
{
	return s->report_count > s->report_ring ? s->report_count - s->report_ring : 0;
}

/* The set of user's newest-position slots. */
static inline struct report_head *
report_set(const struct app_shard *s, uint64_t user)
{
	uint64_t sets = s->report_ring / REPORT_WAYS;
	uint64_t h = (user * UINT64_C(0x9E3779B97F4A7C15)) >> 20;
	return &s->report_heads[(h & (sets - 1)) * REPORT_WAYS];
}

/* user's slot in its set, or NULL (never had an entry, or pushed out). */
static struct report_head *
report_head_find(const struct app_shard *s, uint64_t user)
{
	struct report_head *set = report_set(s, user);
	for (uint32_t w = 0; w < REPORT_WAYS; w++)
		if (set[w].user == user)
			return &set[w];
	return NULL;
}

/* user's slot, taking a free one or the one whose newest entry is oldest (most likely gone
 * from the ring already). */
static struct report_head *
report_head_take(const struct app_shard *s, uint64_t user)
{
	struct report_head *set = report_set(s, user), *victim = &set[0];
	for (uint32_t w = 0; w < REPORT_WAYS; w++) {
		if (set[w].user == user || set[w].user == 0)
			return &set[w];
		if (set[w].last < victim->last)
			victim = &set[w];
	}
	victim->user = 0;
	return victim;
}

/* Keep a numbered client message (one that carries a per-user seq) for a new leader. */
static void
report_keep(struct app_shard *s, const struct wire_msg_hdr *msg)
{
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
	uint64_t user = app_msg_user(msg);
	uint64_t pos = s->report_count;
	struct report_ent *e = report_at(s, pos);
	DCHECK(msg->length <= sizeof(e->m));
	memcpy(&e->m, msg, msg->length);
	e->user = user;
	e->seq = seq;
	if (t > s->report_last_ns)
		s->report_last_ns = t;
	e->time_ns = s->report_last_ns;
	struct report_head *h = report_head_take(s, user);
	e->prev = h->user == user && pos - h->last <= s->report_ring - 1 ? h->last : REPORT_NONE;
	h->user = user;
	h->last = pos;
	s->report_count = pos + 1;
}

/* app_egress_emit's part for a client's message or an ADMIN_REPLY: kept (reports) or
 * handed to a waiting command on every member first. */
static __attribute__((noinline)) void
emit_kept(struct app_shard *s, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	if (dest == WIRE_DEST_CLIENT && s->reports != NULL)
		report_keep(s, msg);
	if (msg->type == WIRE_ADMIN_REPLY && s->cmd_wait_count > 0)
		/* On every member: commit is what counts. */
		app_cmd_admin_reply(s, (const void *)msg);
	if (!s->leader) {
		sc_add(s, SC_EGRESS_FOLLOWER, 1); /* ARCHITECTURE.md §3: only the leader's leaves */
		return;
	}
	if (dest == WIRE_DEST_CLIENT) {
		app_reqlat_end(s, msg);
		sc_add(s, SC_EGRESS, 1);
		route_client(s, msg);
		return;
	}
	app_egress_route(s, dest, msg);
}

void
app_egress_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct app_shard *s = ctx;
	if (dest == WIRE_DEST_CLIENT || msg->type == WIRE_ADMIN_REPLY) {
		emit_kept(s, dest, msg);
		return;
	}
	if (!s->leader) {
		sc_add(s, SC_EGRESS_FOLLOWER, 1); /* ARCHITECTURE.md §3: only the leader's leaves */
		return;
	}
	app_egress_route(s, dest, msg); /* a jump: nothing saved here */
}

/* Leadership gained: re-send the reports emitted within REPORT_RESEND_NS before the newest
 * one kept (what the old leader emitted last, before the election's silence), in the order
 * they were emitted (per-user sequences ascend). */
void
app_egress_reports_resend(struct app_shard *s)
{
	if (s->report_count == 0)
		return;
	uint64_t newest = s->report_last_ns;
	/* Entries are in time order: find the first one in the window from the end. */
	uint64_t i = s->report_count;
	while (i > report_first(s) && report_at(s, i - 1)->time_ns + REPORT_RESEND_NS >= newest)
		i--;
	for (; i < s->report_count; i++) {
		app_egress_route(s, WIRE_DEST_CLIENT, &report_at(s, i)->m.hdr);
		sc_add(s, SC_REPORTS_RESENT, 1);
	}
}

/* A client's REPORT_REPLAY (through a gateway, origin node): the kept answers of its user
 * with seq in [from, to] (to 0: all), oldest first, at most WIRE_REPLAY_MAX; the client asks
 * again from the first still missing. The user's entries are walked newest first through
 * their links (the lowest WIRE_REPLAY_MAX wanted ones kept), so a request costs the user's
 * entries in the ring; a user not in the heads table falls back to one pass over the ring.
 * The gateway also asks every OMS shard that does not own the user (a user that moved left
 * its earlier answers in the old owner's ring, app_gateway.c): such a shard answers only
 * what the user's chain finds, without the pass (most users were never here), and counts
 * nothing as truncated (the user's seqs go on elsewhere). */
void
app_egress_replay(struct app_shard *s, uint32_t node, const struct wire_report_replay *r)
{
	if (s->reports == NULL || r->user == 0 || r->from_seq == 0 ||
	    (r->to_seq != 0 && r->to_seq < r->from_seq)) {
		sc_add(s, SC_INGRESS_BAD, 1);
		return;
	}
	bool owner = !s->is_oms || oms_owner(s->svc, r->user) == s->id;
	sc_add(s, owner ? SC_REPLAY_REQUESTS : SC_REPLAY_ELSEWHERE, 1);
	uint64_t first = report_first(s);
	uint64_t to = r->to_seq != 0 ? r->to_seq : UINT64_MAX;
	uint64_t pick[WIRE_REPLAY_MAX]; /* positions, a ring of the lowest seqs seen */
	uint32_t picked = 0;
	uint64_t oldest = 0;
	const struct report_head *h = report_head_find(s, r->user);
	if (!owner && (h == NULL || h->last < first))
		return; /* never here, or gone from the ring */
	if (h != NULL && h->last >= first) {
		/* The whole chain: a user's seqs are not monotonic in the ring (a duplicate's
		 * answer repeats the original's seq later), so no early stop on from_seq. */
		for (uint64_t pos = h->last; pos != REPORT_NONE && pos >= first;) {
			const struct report_ent *e = report_at(s, pos);
			if (e->user != r->user)
				break; /* (cannot happen: a position >= first is not reused) */
			oldest = e->seq; /* ends as the oldest position's, as the ring pass sees it */
			if (e->seq >= r->from_seq && e->seq <= to)
				pick[picked++ % WIRE_REPLAY_MAX] = pos;
			pos = e->prev;
		}
		/* Newest first into the ring: the lowest ones are the last picked. */
		uint32_t n = picked < WIRE_REPLAY_MAX ? picked : WIRE_REPLAY_MAX;
		for (uint32_t k = 0; k < n; k++) {
			uint32_t at = (picked - 1 - k) % WIRE_REPLAY_MAX;
			app_gw_to_gateway(s, node, &report_at(s, pick[at])->m.hdr);
		}
		picked = n;
	} else {
		for (uint64_t i = first; i < s->report_count && picked < WIRE_REPLAY_MAX; i++) {
			const struct report_ent *e = report_at(s, i);
			if (e->user != r->user)
				continue;
			if (oldest == 0)
				oldest = e->seq;
			if (e->seq < r->from_seq || e->seq > to)
				continue;
			app_gw_to_gateway(s, node, &e->m.hdr);
			picked++;
		}
		sc_add(s, SC_REPLAY_SCANS, 1);
	}
	if (owner && oldest > r->from_seq)
		sc_add(s, SC_REPLAY_TRUNCATED, 1); /* gone from the ring: lost for good */
	sc_add(s, SC_REPLAY_SENT, picked);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shard lcore's sends and proposals, the layer every role of the lcore stands on
 * (app_shard_int.h): which nodes we know, the node-wide leader hints (app.leader_hint),
 * sending one message to a node (a local lcore's ring when the node is us, else the port),
 * and proposing into our log with the outcome counted. It calls nothing above it.
 */
#include <errno.h>

#include "app_shard_int.h"
#include "common/check.h"

bool
app_node_known(const struct app *app, uint32_t node)
{
	struct dp_addr a;
	return node != 0 && (node == app->cfg.dp.node_id || dp_peer_addr(app->dp, node, &a) == 0);
}

/* Members of shard: the configuration in effect on our member when we host it (voters
 * and learners: membership changes while the node runs), else every peer (a shard this
 * node does not host is not led here: guessing ourselves would send it nowhere, and no
 * NOT_LEADER would ever come back to correct the guess). A node with no peers: itself. */
static uint32_t
members_of(const struct app *app, uint16_t shard, uint32_t *out)
{
	int idx = app->shard_index[shard];
	struct app_shard_pub p;
	if (idx >= 0 && app_shard_pub_read(app, (uint32_t)idx, &p) == 0 && p.member_count > 0) {
		uint32_t n = 0;
		for (uint32_t i = 0; i < p.member_count; i++)
			if (!(p.learners & (1u << i)))
				out[n++] = p.members[i]; /* voters: only they lead */
		return n;
	}
	uint32_t n = 0;
	for (uint32_t i = 0; i < app->cfg.dp.peer_count && n < DP_PEERS_MAX + 1; i++)
		out[n++] = app->cfg.dp.peers[i].node_id;
	if (n == 0)
		out[n++] = app->cfg.dp.node_id;
	return n;
}

/* No hint yet: the first member. Out of line: its array gives the common case a stack
 * frame (and its guard) otherwise. */
static __attribute__((noinline)) uint32_t
leader_first_member(const struct app *app, uint16_t shard)
{
	uint32_t members[DP_PEERS_MAX + 1];
	members_of(app, shard, members);
	return members[0];
}

uint32_t
app_leader_guess(const struct app *app, uint16_t shard)
{
	uint32_t h = LOAD(app->leader_hint[shard]);
	return h != 0 ? h : leader_first_member(app, shard);
}

/* No usable hint: try the member after the one that failed us. */
void
app_leader_rotate(struct app *app, uint16_t shard, uint32_t bad)
{
	uint32_t members[DP_PEERS_MAX + 1];
	uint32_t n = members_of(app, shard, members);
	uint32_t i = 0;
	while (i < n && members[i] != bad)
		i++;
	PUB(app->leader_hint[shard], members[(i + 1) % n]);
}

/* The local ring of the lcore of this node that takes (cls, shard), or NULL: one of the
 * outboxes the wiring handed us. */
static struct rte_ring *
local_target(const struct app_shard *s, uint16_t cls, uint16_t shard)
{
	if (cls == DP_CLASS_GATEWAY || cls == DP_CLASS_CLIENT)
		return s->w.gateway;
	return shard < DP_SHARDS_MAX ? s->w.peer[shard] : NULL;
}

/* Send msg (plus tail) to node as class cls for shard: a local lcore when node is us. */
void
app_send_node_tail(struct app_shard *s, uint32_t node, uint16_t cls, uint16_t shard,
		   const struct wire_msg_hdr *msg, const void *tail, uint16_t tail_len)
{
	if (node == s->self) {
		struct rte_ring *r = local_target(s, cls, shard);
		if (r == NULL) {
			sc_add(s, SC_NO_ROUTE, 1);
			return;
		}
		app_outbox_add(&s->ob, r, NULL, cls, shard, msg, tail, tail_len);
		return;
	}
	struct dp_addr dst;
	if (dp_peer_addr(s->app->dp, node, &dst) != 0) {
		sc_add(s, SC_NO_ROUTE, 1);
		return;
	}
	app_outbox_add(&s->ob, NULL, &dst, cls, shard, msg, tail, tail_len);
}

/* app_send_node_tail without a tail: every message the egress routes. Its five arguments all
 * go in registers, so the egress's last step is a jump here, and the outbox's a jump on. */
void
app_send_node(struct app_shard *s, uint32_t node, uint16_t cls, uint16_t shard,
	      const struct wire_msg_hdr *msg)
{
	if (node == s->self) {
		struct rte_ring *r = local_target(s, cls, shard);
		if (r == NULL) {
			sc_add(s, SC_NO_ROUTE, 1);
			return;
		}
		app_outbox_add_msg(&s->ob, r, NULL, cls, shard, msg);
		return;
	}
	struct dp_addr dst;
	if (dp_peer_addr(s->app->dp, node, &dst) != 0) {
		sc_add(s, SC_NO_ROUTE, 1);
		return;
	}
	app_outbox_add_msg(&s->ob, NULL, &dst, cls, shard, msg);
}

int
app_shard_propose(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	int rc = cns_propose(s->cns, s->now, msg);
	if (rc == 0)
		sc_add(s, SC_PROPOSED, 1);
	else if (rc == -EPERM || rc == -EBUSY)
		sc_add(s, SC_NOT_LEADER, 1);
	else if (rc == -EAGAIN)
		sc_add(s, SC_BACKPRESSURE, 1);
	else
		sc_add(s, SC_PROPOSE_FAILED, 1);
	return rc;
}


void
app_shard_host_send(void *ctx, uint32_t to, const struct wire_msg_hdr *msg)
{
	struct app_shard *s = ctx;
	sc_add(s, SC_RAFT_OUT, 1);
	app_send_node(s, to, DP_CLASS_SHARD, s->id, msg);
}


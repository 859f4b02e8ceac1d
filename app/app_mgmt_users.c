/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control socket's commands on users and shards: users show, evict and migrate;
 * shards scale; snapshot and transfer-leader, which act on one shard's consensus rather
 * than on a service's state. Users live in the OMS shards, so their commands go to every
 * OMS shard (the user's owner answers, the others answer not_found); a shard joins the
 * routing in two steps, receiving and then active (docs/fencing.md). The request itself
 * runs in app_mgmt_req.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_mgmt_int.h"
#include "consensus/cns.h"
#include "common/wire.h"

#define USER_ADMIN_EVICT 1   /* USER_ADMIN op: evict when flat */
#define USER_ADMIN_MIGRATE 2 /* USER_ADMIN op: quiesce, flush, evict */

int
app_mgmt_users_show(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	static const char *const names[] = {"user", "limit", "from", "shard", NULL};
	uint64_t user = 0, limit = 100, from = 0, shard = UINT64_MAX;
	if (app_mgmt_arg_present(a, "cl_id")) {
		snprintf(a->err, a->cap, "bad_argument: one order by --cl-id is not shown yet; "
			 "users show --user U shows the user's actor");
		return -EINVAL;
	}
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "user", false, 1, UINT64_MAX, &user) != 0 ||
	    app_mgmt_arg_u64(a, "limit", false, 1, 256, &limit) != 0 ||
	    app_mgmt_arg_u64(a, "from", false, 0, UINT32_MAX - 1, &from) != 0 ||
	    app_mgmt_arg_u64(a, "shard", false, 0, DP_SHARDS_MAX - 1, &shard) != 0)
		return -EINVAL;
	if (user != 0 && (app_mgmt_arg_present(a, "limit") || app_mgmt_arg_present(a, "from"))) {
		snprintf(a->err, a->cap,
			 "bad_argument: --limit/--from page the resident set (no --user)");
		return -EINVAL;
	}
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_hosted(a->mgmt->app, &t, APP_SERVICE_OMS);
	if (t.n == 0) {
		snprintf(a->err, a->cap, "not_hosted: no OMS shard on this node");
		return -ENOENT;
	}
	if (shard != UINT64_MAX) {
		/* One OMS shard: a page's `next` is that shard's cursor. */
		bool hosted = false;
		for (uint32_t i = 0; i < t.n; i++)
			hosted = hosted || t.shard[i] == shard;
		if (!hosted) {
			snprintf(a->err, a->cap, "not_hosted: OMS shard %" PRIu64 " is not on this node",
				 shard);
			return -ENOENT;
		}
		memset(&t, 0, sizeof(t));
		app_mgmt_targets_add(&t, (uint16_t)shard);
	}
	struct app_mgmt_view_query q = {.view = user != 0 ? APP_VIEW_USER : APP_VIEW_USERS,
					.user = user, .cursor = (uint32_t)from,
					.limit = (uint32_t)limit};
	return app_mgmt_view(a, &t, &q, app_mgmt_render_views);
}

/* USER_ADMIN op (evict when flat, or quiesce, flush, evict) into every OMS shard: ok where
 * the user is resident, not_found elsewhere. */
static int
user_admin(struct app_mgmt_call *a, uint8_t op)
{
	static const char *const names[] = {"user", NULL};
	uint64_t user;
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "user", true, 1, UINT64_MAX, &user) != 0)
		return -EINVAL;
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_oms(a->mgmt->app, &t);
	struct wire_user_admin m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_USER_ADMIN, 0);
	m.user = user;
	m.op = op;
	struct app_mgmt_proposal p = {.msg = &m, .len = sizeof(m), .key = user};
	return app_mgmt_propose(a, &t, &p, APP_MGMT_NEED_ANY);
}

int
app_mgmt_users_evict(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	return user_admin(a, USER_ADMIN_EVICT);
}

/* users migrate --user U: quiesce, flush, evict (the user re-hydrates on its owner by the
 * routing). users migrate --user U --to S: a fenced move to OMS shard S — the user is pinned
 * to S (WHALE_PIN into every OMS shard, a new routing epoch); the old owner stops admitting
 * the user, drains it (flush, claim released in the database) and S hydrates it on its next
 * message: the move of docs/fencing.md, for one user. Unpin with routes unpin. */
int
app_mgmt_users_migrate(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	uint64_t to = UINT64_MAX;
	if (mgmt_json_get_u64(a->req->json, a->req->args, "to", &to) == -ENOENT)
		return user_admin(a, USER_ADMIN_MIGRATE);
	static const char *const names[] = {"user", "to", NULL};
	uint64_t user;
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "user", true, 1, UINT64_MAX, &user) != 0 ||
	    app_mgmt_arg_u64(a, "to", true, 0, DP_SHARDS_MAX - 1, &to) != 0)
		return -EINVAL;
	if (!app_mgmt_is_oms_shard(a->mgmt->app, (uint16_t)to)) {
		snprintf(a->err, a->cap, "bad_argument: shard %" PRIu64 " is not an OMS shard", to);
		return -EINVAL;
	}
	return app_mgmt_pin_propose(a, user, (uint16_t)to, false);
}

/* ---- shards scale ---- */

/* shards scale --shard N [--state receiving|active]: N joins the membership every OMS
 * shard applied (RECEIVING: HRW gives it no users yet; ACTIVE: new users hash to it and
 * the others drain theirs, docs/fencing.md), under the applied epoch + 1. Without --state:
 * receiving on every OMS shard, then active once all committed that. */
int
app_mgmt_shards_scale(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	static const char *const names[] = {"shard", "state", NULL};
	uint64_t shard;
	char state[16] = "both";
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "shard", true, 0, DP_SHARDS_MAX - 1, &shard))
		return -EINVAL;
	int rc = mgmt_json_get_str(a->req->json, a->req->args, "state", state, sizeof(state));
	if ((rc != 0 && rc != -ENOENT) ||
	    (rc == 0 && strcmp(state, "receiving") != 0 && strcmp(state, "active") != 0)) {
		snprintf(a->err, a->cap, "bad_argument: --state must be receiving or active");
		return -EINVAL;
	}
	uint16_t id = (uint16_t)shard;
	if (app_mgmt_shards_check(a, &id, 1, APP_SERVICE_OMS) != 0)
		return -EINVAL;
	static struct wire_routing_config m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_ROUTING_CONFIG, 0);
	m.shard_count = 1;
	m.shards[0] = (struct wire_route_shard){(uint16_t)shard,
		strcmp(state, "active") == 0 ? WIRE_SHARD_ACTIVE : WIRE_SHARD_RECEIVING, 0};
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_oms(a->mgmt->app, &t);
	app_mgmt_targets_add(&t, (uint16_t)shard);
	struct app_mgmt_proposal p = {.msg = &m, .len = sizeof(m),
				      .flags = APP_CMD_ROUTE_MERGE | APP_CMD_ROUTE_SCALE};
	if (strcmp(state, "both") != 0)
		return app_mgmt_propose(a, &t, &p, APP_MGMT_NEED_ALL);
	/* Receiving everywhere first; active once every OMS shard committed that. */
	struct app_mgmt_next_step *n = calloc(1, sizeof(*n));
	if (n == NULL) {
		snprintf(a->err, a->cap, "internal: out of memory");
		return -ENOMEM;
	}
	n->t = t;
	memcpy(n->msg, &m, sizeof(m));
	((struct wire_routing_config *)n->msg)->shards[0].state = WIRE_SHARD_ACTIVE;
	n->len = sizeof(m);
	n->flags = p.flags;
	return app_mgmt_propose_two_steps(a, &t, &p, n);
}

/* ---- snapshot, transfer-leader ---- */

/* Hosted here and not an echo shard (which has no log). */
static bool
shard_hosted(const struct app *app, uint64_t shard)
{
	int idx = app->shard_index[shard];
	return idx >= 0 && app->cfg.shards[idx].service != APP_SERVICE_ECHO;
}

int
app_mgmt_snapshot(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	static const char *const names[] = {"shard", NULL};
	uint64_t shard = UINT64_MAX;
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "shard", false, 0, DP_SHARDS_MAX - 1, &shard) != 0)
		return -EINVAL;
	struct app_mgmt_targets t = {0};
	if (shard != UINT64_MAX) {
		if (!shard_hosted(a->mgmt->app, shard)) {
			snprintf(a->err, a->cap, "not_hosted: shard %" PRIu64 " is not on this node",
				 shard);
			return -ENOENT;
		}
		app_mgmt_targets_add(&t, (uint16_t)shard);
	} else {
		app_mgmt_targets_hosted(a->mgmt->app, &t, -1);
	}
	return app_mgmt_command(a, &t, APP_CMD_SNAPSHOT, 0, app_mgmt_render_results);
}

/* The answer of a transfer: the shard, its new leader, the term it leads in, and `via` the
 * node whose leader answered a forwarded one. */
static void
render_transfer(struct mgmt_out *o, const struct app_mgmt_req *r)
{
	const struct app_cmd *c = r->cmds[0];
	mgmt_out_kv_u64(o, "shard", c->shard);
	mgmt_out_kv_u64(o, "leader", c->target);
	mgmt_out_kv_u64(o, "term", c->value);
	if (c->via != 0)
		mgmt_out_kv_u64(o, "via", c->via);
}

/* One shard, hosted here or known to the cluster; `to` a voter of its configuration in
 * effect (checked here when hosted here, else by its leader). Its leader hands leadership
 * over: here where this node leads, else forwarded to it (--local: only where led here,
 * else not_hosted / not_leader as before forwarding). */
int
app_mgmt_transfer_leader(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	const struct app *app = a->mgmt->app;
	static const char *const names[] = {"shard", "to", NULL};
	uint64_t shard, to;
	bool local;
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "shard", true, 0, DP_SHARDS_MAX - 1, &shard) != 0 ||
	    app_mgmt_arg_u64(a, "to", true, 1, UINT32_MAX, &to) != 0 ||
	    app_mgmt_arg_bool(a, "local", &local) != 0)
		return -EINVAL;
	bool hosted = shard_hosted(app, shard);
	if (!hosted && (local || app->shard_index[shard] >= 0)) { /* (or an echo shard here) */
		snprintf(a->err, a->cap, "not_hosted: shard %" PRIu64 " is not on this node", shard);
		return -ENOENT;
	}
	/* A voter of the configuration in effect (membership changes while the node runs). */
	struct app_shard_pub p;
	if (hosted) {
		bool member = false;
		int read = app_shard_pub_read(app, (uint32_t)app->shard_index[shard], &p);
		for (uint32_t i = 0; read == 0 && i < p.member_count; i++)
			member = member || (p.members[i] == to && !(p.learners & (1u << i)));
		if (!member) {
			snprintf(a->err, a->cap, "bad_argument: node %" PRIu64 " is not a voter of "
				 "shard %" PRIu64, to, shard);
			return -EINVAL;
		}
	}
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_add(&t, (uint16_t)shard); /* unknown: not_leader, nothing done */
	return app_mgmt_transfer(a, &t, (uint32_t)to, render_transfer);
}

/* ---- members add|promote|remove ---- */

/* The answer of a membership change: per shard, the configuration entry's index once it
 * committed, and `via` the node whose leader made a forwarded one. */
static void
render_members(struct mgmt_out *o, const struct app_mgmt_req *r)
{
	app_mgmt_render_results(o, r);
}

/* variant: enum cns_member_op. One shard (--shard N, hosted here or known to the cluster)
 * or every shard hosted here that is not an echo shard. The change is made by each shard's
 * leader: here where this node leads, else forwarded to it (--local: only where led here,
 * else not_leader). */
int
app_mgmt_members_change(struct app_mgmt_call *a, uint32_t variant)
{
	const struct app *app = a->mgmt->app;
	static const char *const names[] = {"shard", "node", NULL};
	uint64_t shard = UINT64_MAX, node;
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "shard", false, 0, DP_SHARDS_MAX - 1, &shard) != 0 ||
	    app_mgmt_arg_u64(a, "node", true, 1, UINT32_MAX, &node) != 0)
		return -EINVAL;
	struct app_mgmt_targets t = {0};
	if (shard != UINT64_MAX)
		app_mgmt_targets_add(&t, (uint16_t)shard); /* unknown: not_leader, nothing done */
	else
		app_mgmt_targets_hosted(app, &t, -1);
	if (variant == CNS_MEMBER_ADD) {
		/* Its frames must reach it: a node with no [peer.N] section has no address. */
		struct dp_addr addr;
		if (node != app->cfg.dp.node_id && dp_peer_addr(app->dp, (uint32_t)node, &addr) != 0) {
			snprintf(a->err, a->cap, "bad_argument: node %" PRIu64 " has no [peer.%" PRIu64
				 "] section on this node (every member's configuration lists every "
				 "host that may join)", node, node);
			return -EINVAL;
		}
	}
	return app_mgmt_member_change(a, &t, variant, (uint32_t)node, render_members);
}

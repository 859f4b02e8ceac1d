/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's control socket: served by the main lcore between its ticks, never by a hot
 * lcore. This file owns the socket, the command table and the read-only views that render
 * here, from the same counters the stats dump writes (app_stats_write), which the lcores
 * publish with single-writer atomics, so reading them never stops or locks a hot lcore.
 *
 *   status   node, and per shard: service, role, leader, term, commit, applied and the
 *            service's own state (route epoch, in-flight sagas, residents, resting orders)
 *   stats    every counter as a JSON object {"name": value}
 *   metrics  Prometheus text ({"text": "..."}), rendered by app_views.c
 *   members, lcores  registered by app_views.c; status gets the lag per member from it
 *
 * Commands that read or change a shard's service state (symbols, routes, users, kill,
 * snapshot, transfer-leader) are handled one noun family per file (app_mgmt_symbols.c,
 * app_mgmt_routes.c, app_mgmt_users.c) and run as requests (app_mgmt_req.c) whose commands
 * the shard lcores answer; app_mgmt_int.h says how these files share the work.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>

#include "app.h"
#include "app_mgmt_int.h"
#include "consensus/cns.h"
#include "app_views.h"
#include "common/wire.h"
#include "mgmt/mgmt.h"

#define APP_MGMT_METRICS_MAX (320 * 1024) /* the Prometheus text of a node */

static struct app_mgmt mgmt;

static void
put_value(struct mgmt_out *o, const char *value)
{
	if (app_view_is_integer(value))
		mgmt_out_i64(o, strtoll(value, NULL, 10));
	else
		mgmt_out_str(o, value);
}

static void
each_stat(void *ctx, const char *name, const char *value)
{
	struct mgmt_out *o = ctx;
	mgmt_out_key(o, name);
	put_value(o, value);
}

static int
h_stats(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)req;
	struct app_view_ctx *vc = app_views_main_ctx();
	int rc = app_view_read(vc, mgmt.app, false);
	if (rc < 0) {
		snprintf(err, cap, "internal: counters unavailable");
		return rc;
	}
	mgmt_out_obj_begin(out);
	app_view_each(vc, each_stat, out);
	mgmt_out_obj_end(out);
	return 0;
}

/* status: the shard.N.<field> counters grouped per shard, for the fields an operator reads
 * first. */
static const char *const status_fields[] = {
	"service", "role", "leader", "term", "commit", "applied",
	"route_epoch", "inflight", "resident", "resting",
};

struct status_ctx {
	struct mgmt_out *o;
	uint32_t shard;     /* the shard being written */
};

static void
each_status(void *ctx, const char *name, const char *value)
{
	struct status_ctx *s = ctx;
	unsigned id;
	int n = 0;
	if (sscanf(name, "shard.%u.%n", &id, &n) != 1 || n == 0 || id != s->shard)
		return;
	const char *field = name + n;
	for (size_t i = 0; i < sizeof(status_fields) / sizeof(status_fields[0]); i++) {
		if (strcmp(field, status_fields[i]) == 0) {
			mgmt_out_key(s->o, field);
			put_value(s->o, value);
			return;
		}
	}
}

static int
h_status(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)req;
	const struct app_config *cfg = &mgmt.app->cfg;
	struct app_view_ctx *vc = app_views_main_ctx();
	int rc = app_view_read(vc, mgmt.app, false);
	if (rc < 0) {
		snprintf(err, cap, "internal: counters unavailable");
		return rc;
	}
	mgmt_out_obj_begin(out);
	mgmt_out_kv_u64(out, "node", cfg->dp.node_id);
	mgmt_out_kv_u64(out, "lcores", mgmt.app->agent_count + 1);
	mgmt_out_key(out, "shards");
	mgmt_out_arr_begin(out);
	for (uint32_t i = 0; i < cfg->shard_count; i++) {
		struct status_ctx s = {.o = out, .shard = cfg->shards[i].id};
		mgmt_out_obj_begin(out);
		mgmt_out_kv_u64(out, "shard", cfg->shards[i].id);
		app_view_each(vc, each_status, &s);
		app_views_status_shard(out, cfg->shards[i].id); /* last index, elections, lag */
		mgmt_out_obj_end(out);
	}
	mgmt_out_arr_end(out);
	mgmt_out_obj_end(out);
	return 0;
}

static int
h_metrics(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)req;
	/* The Prometheus text (app_views.c reads the counters itself) goes into a side buffer,
	 * then out as one JSON string. */
	static char text[APP_MGMT_METRICS_MAX];
	struct mgmt_out t;
	mgmt_out_init(&t, text, sizeof(text));
	if (app_metrics_write(app_views_main_ctx(), mgmt.app, &t) < 0 || t.overflow) {
		snprintf(err, cap, "too_large: metrics do not fit the buffer");
		return -E2BIG;
	}
	mgmt_out_obj_begin(out);
	mgmt_out_kv_str(out, "text", text);
	mgmt_out_obj_end(out);
	return 0;
}


/* The command table: one row per shard command (the views above and app_views.c's are
 * registered in app_mgmt_open). A row's variant tells a handler that serves two commands
 * which one it runs. */
struct shard_cmd {
	const char *name;             /* the command on the socket */
	app_mgmt_handler_fn *fn;      /* its handler */
	uint32_t variant;             /* handed to fn: which of its commands */
	const char *help;             /* the line help prints */
};

static const struct shard_cmd shard_cmds[] = {
	{"symbols.list", app_mgmt_symbols_list, 0,
	 "symbols of every shard here, with status and kill"},
	{"symbols.halt", app_mgmt_symbols_status, WIRE_SYM_HALTED,
	 "--symbol S [--cancel-resting] [--me-shard M]: halt (ME + OMS logs)"},
	{"symbols.resume", app_mgmt_symbols_status, WIRE_SYM_TRADING,
	 "--symbol S [--me-shard M]: resume trading"},
	{"symbols.add", app_mgmt_symbols_add, 0,
	 "--symbol S --base B --quote Q --me-shard M --tick T --lot L --base-unit U [...]: add "
	 "or update a symbol"},
	{"symbols.move", app_mgmt_symbols_move, 0,
	 "--symbol S --to M [--from F]: move a symbol and its resting book to ME shard M "
	 "while trading (a pause of milliseconds); run again to finish an interrupted move"},
	{"symbols.book", app_mgmt_symbols_book, 0,
	 "--symbol S [--levels N]: the symbol's depth (price, qty, orders) on each ME shard here"},
	{"kill.user", app_mgmt_kill, WIRE_KILL_USER,
	 "--user U [--release]: kill-switch for one user"},
	{"kill.symbol", app_mgmt_kill, WIRE_KILL_SYMBOL,
	 "--symbol S [--release]: kill-switch for one symbol"},
	{"routes.show", app_mgmt_routes_show, 0,
	 "the routing config each OMS shard here applied"},
	{"routes.set", app_mgmt_routes_set, 0,
	 "--active 1,2 [--receiving 3] [--epoch N]: membership"},
	{"routes.pin", app_mgmt_routes_pin, 0,
	 "--user U --shard N: pin a whale to an OMS shard"},
	{"routes.unpin", app_mgmt_routes_pin, 1,
	 "--user U: remove a whale pin"},
	{"users.show", app_mgmt_users_show, 0,
	 "[--user U | --limit N --from C]: one user's actor, or a page of the resident set, "
	 "per OMS shard here"},
	{"users.evict", app_mgmt_users_evict, 0,
	 "--user U: flush and evict when flat"},
	{"users.migrate", app_mgmt_users_migrate, 0,
	 "--user U [--to N]: quiesce, flush, evict (re-hydrates on its owner); with --to, a "
	 "fenced move to OMS shard N (a pin)"},
	{"shards.scale", app_mgmt_shards_scale, 0,
	 "--shard N [--state receiving|active]: add an OMS shard (receiving, then active)"},
	{"snapshot", app_mgmt_snapshot, 0,
	 "[--shard N]: take a snapshot now; answers its index"},
	{"transfer-leader", app_mgmt_transfer_leader, 0,
	 "--shard N --to NODE: hand over leadership"},
	{"members.add", app_mgmt_members_change, CNS_MEMBER_ADD,
	 "--node NODE [--shard N]: add NODE as a learner (it catches up, never votes)"},
	{"members.promote", app_mgmt_members_change, CNS_MEMBER_PROMOTE,
	 "--node NODE [--shard N]: a caught-up learner becomes a voter"},
	{"members.remove", app_mgmt_members_change, CNS_MEMBER_REMOVE,
	 "--node NODE [--shard N]: remove a learner or a voter (the leader too)"},
};

/* Every shard command enters here, its row as ctx. It answers later (out stays unused):
 * its request runs in app_mgmt_req.c. */
static int
shard_cmd_run(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
	      size_t cap)
{
	(void)out;
	const struct shard_cmd *cmd = ctx;
	struct app_mgmt_call a = {.mgmt = &mgmt, .req = req, .err = err, .cap = cap};
	return cmd->fn(&a, cmd->variant);
}

int
app_mgmt_open(const struct app *app, struct dp_idle *main_idle)
{
	const char *path = app->cfg.mgmt_socket;
	if (path[0] == '\0')
		return 0;
	mgmt.app = app;
	mgmt.idle = main_idle;
	if (app_mgmt_req_init(&mgmt) != 0) {
		app_mgmt_close();
		return -ENOMEM;
	}
	int rc = mgmt_server_open(&mgmt.srv, path, app->cfg.mgmt_group, 0660);
	if (rc < 0) {
		app_mgmt_close();
		return rc;
	}
	mgmt_register(mgmt.srv, "status", h_status, NULL, "node and per-shard Raft/service state");
	mgmt_register(mgmt.srv, "stats", h_stats, NULL, "every counter as a JSON object");
	mgmt_register(mgmt.srv, "metrics", h_metrics, NULL, "every counter as Prometheus text");
	app_views_register(mgmt.srv); /* members, lcores */
	for (size_t i = 0; i < sizeof(shard_cmds) / sizeof(shard_cmds[0]); i++)
		mgmt_register(mgmt.srv, shard_cmds[i].name, shard_cmd_run,
			      (void *)&shard_cmds[i], shard_cmds[i].help);
	APP_LOG(INFO, "control socket %s", path);
	return 0;
}

void
app_mgmt_stats_write(FILE *out)
{
	if (mgmt.srv == NULL)
		return;
	struct mgmt_stats st;
	mgmt_stats_get(mgmt.srv, &st);
	fprintf(out, "mgmt.requests %" PRIu64 "\n", st.requests);
	fprintf(out, "mgmt.errors %" PRIu64 "\n", st.errors);
	fprintf(out, "mgmt.bad_json %" PRIu64 "\n", st.bad_json);
	fprintf(out, "mgmt.overlong %" PRIu64 "\n", st.overlong);
	fprintf(out, "mgmt.clients %" PRIu64 "\n", st.clients);
	fprintf(out, "mgmt.idle_closed %" PRIu64 "\n", st.idle_closed);
	fprintf(out, "mgmt.busy_refused %" PRIu64 "\n", st.busy_refused);
}

/* Serve the socket for at most timeout_ms; returns at once when there is nothing to do
 * and no socket. */
void
app_mgmt_poll(int timeout_ms)
{
	if (mgmt.srv == NULL)
		return;
	/* Answers that came back while we waited go out before new requests are read. */
	app_mgmt_req_collect(&mgmt);
	app_mgmt_move_poll(&mgmt);
	if (app_mgmt_move_active(&mgmt)) {
		/* A symbol move pauses its symbol's trading until it is done: its steps follow
		 * each other at the pace answers come back, not at the socket's. Main sleeps
		 * on its bell, which a shard lcore giving a command back rings (a main lcore
		 * that only yields, or slept 20 µs a time, took CPU from the shard lcores on a
		 * shared host and made the pause longer). */
		struct dp_idle *idle = mgmt.idle;
		uint64_t end = dp_clock_ns() + (uint64_t)timeout_ms * 1000000;
		while (app_mgmt_move_active(&mgmt) && dp_clock_ns() < end) {
			dp_idle_arm(idle); /* before looking at the answers */
			mgmt_poll(mgmt.srv, 0);
			uint32_t taken = app_mgmt_req_collect(&mgmt);
			app_mgmt_move_poll(&mgmt);
			dp_idle_run(idle, taken);
		}
		return;
	}
	mgmt_poll(mgmt.srv, mgmt.cmds_out > 0 ? RTE_MIN(timeout_ms, 2) : timeout_ms);
	app_mgmt_req_collect(&mgmt);
	app_mgmt_move_poll(&mgmt);
}

void
app_mgmt_close(void)
{
	/* Called once the shard lcores stopped: take back what they answered; what they still
	 * hold is freed by app_shard_fini (at_shard). */
	app_mgmt_req_fini(&mgmt);
	app_mgmt_move_fini(&mgmt);
	mgmt_server_close(mgmt.srv);
	mgmt.srv = NULL;
}

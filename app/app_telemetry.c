/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's read-only views as DPDK telemetry commands, so dpdk-telemetry.py
 * works against omsd (`dpdk-telemetry.py -f <file-prefix>`):
 *
 *   /omsd/status            node, uptime, per shard: service, role, leader, term, commit,
 *                           applied, last index, elections, preferred leader, placed and
 *                           the placement verdict, lag per member (leader), state
 *   /omsd/members           per shard: leader, term, per member match index and lag
 *   /omsd/lcores            per lcore: role, CPU, idle mode, busy %, rings, duty cycle
 *   /omsd/stats[,PREFIX]    the counters whose name starts with PREFIX ("shard.1.oms",
 *                           "dp", "agent.io"); without one, the prefixes there are
 *
 * The callbacks run on DPDK's telemetry threads (one per connected client), never on an
 * lcore: they read only what the lcores publish (the same relaxed atomics and counters as
 * the control socket), under one mutex so their shared buffers are used by one at a time.
 * Telemetry dictionaries hold RTE_TEL_MAX_DICT_ENTRIES values and names of [A-Za-z0-9_/]:
 * counter names are written with '_' for '.', and a longer list says how many it left out.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_telemetry.h>

#include "app_views.h"
#include "consensus/cns.h"

static pthread_mutex_t tel_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct app *tel_app;        /* NULL: closed (commands answer an error) */
static struct app_view_ctx *tel_ctx;     /* the telemetry threads' buffers */

/* A telemetry name from a counter name: '.' and anything outside [A-Za-z0-9_/] → '_'. */
static void
tel_name(char *out, size_t cap, const char *name)
{
	size_t i = 0;
	for (; name[i] != '\0' && i + 1 < cap; i++) {
		char c = name[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '/';
		out[i] = ok ? c : '_';
	}
	out[i] = '\0';
}

static const char *
service_of(const struct app *app, uint32_t index)
{
	return app_service_name(app->cfg.shards[index].service);
}

static void
shard_status(const struct app *app, uint32_t index, struct rte_tel_data *d)
{
	struct app_shard_pub p;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "service", service_of(app, index));
	if (app_shard_pub_read(app, index, &p) != 0)
		return; /* echo shards publish no Raft state */
	rte_tel_data_add_dict_string(d, "role", app_shard_role_name(p.role));
	rte_tel_data_add_dict_u64(d, "leader", p.leader);
	rte_tel_data_add_dict_u64(d, "term", p.term);
	rte_tel_data_add_dict_u64(d, "commit", p.commit);
	rte_tel_data_add_dict_u64(d, "applied", p.applied);
	rte_tel_data_add_dict_u64(d, "last_index", p.last);
	rte_tel_data_add_dict_u64(d, "elections", p.elections);
	rte_tel_data_add_dict_u64(d, "preferred_leader", p.place_pref); /* 0: none */
	rte_tel_data_add_dict_u64(d, "placed", p.place_pref != 0 && p.place_pref == p.leader);
	rte_tel_data_add_dict_string(d, "placement",
				     app_place_verdict_name((enum app_place_verdict)p.place_verdict));
	if (p.is_oms) {
		rte_tel_data_add_dict_u64(d, "route_epoch", p.route_epoch);
		rte_tel_data_add_dict_u64(d, "inflight", p.inflight);
		rte_tel_data_add_dict_u64(d, "resident", p.resident);
	} else {
		rte_tel_data_add_dict_u64(d, "resting", p.resting);
	}
	for (uint32_t m = 0; m < p.member_count && p.role == CNS_LEADER; m++) {
		char key[32];
		if (p.match[m] == UINT64_MAX)
			continue;
		snprintf(key, sizeof(key), "lag_node_%u", p.members[m]);
		rte_tel_data_add_dict_u64(d, key, p.last > p.match[m] ? p.last - p.match[m] : 0);
	}
}

static int
cmd_status(const struct app *app, const char *params, struct rte_tel_data *d)
{
	(void)params;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "node", app->cfg.dp.node_id);
	rte_tel_data_add_dict_u64(d, "lcores", app->agent_count + 1);
	rte_tel_data_add_dict_u64(d, "uptime_ms", (dp_clock_ns() - app->start_ns) / 1000000);
	for (uint32_t i = 0; i < app->cfg.shard_count; i++) {
		struct rte_tel_data *s = rte_tel_data_alloc();
		if (s == NULL)
			return -ENOMEM;
		shard_status(app, i, s);
		char key[32];
		snprintf(key, sizeof(key), "shard_%u", app->cfg.shards[i].id);
		rte_tel_data_add_dict_container(d, key, s, 0);
	}
	return 0;
}

static int
cmd_members(const struct app *app, const char *params, struct rte_tel_data *d)
{
	(void)params;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "node", app->cfg.dp.node_id);
	for (uint32_t i = 0; i < app->cfg.shard_count; i++) {
		struct app_shard_pub p;
		if (app_shard_pub_read(app, i, &p) != 0)
			continue;
		struct rte_tel_data *s = rte_tel_data_alloc();
		if (s == NULL)
			return -ENOMEM;
		rte_tel_data_start_dict(s);
		rte_tel_data_add_dict_u64(s, "leader", p.leader);
		rte_tel_data_add_dict_u64(s, "term", p.term);
		rte_tel_data_add_dict_u64(s, "last_index", p.last);
		rte_tel_data_add_dict_int(s, "is_leader", p.role == CNS_LEADER);
		for (uint32_t m = 0; m < p.member_count; m++) {
			char key[48];
			snprintf(key, sizeof(key), "node_%u_is_leader", p.members[m]);
			rte_tel_data_add_dict_int(s, key, p.members[m] == p.leader);
			if (p.role != CNS_LEADER || p.match[m] == UINT64_MAX)
				continue; /* known on the leader only */
			snprintf(key, sizeof(key), "node_%u_match", p.members[m]);
			rte_tel_data_add_dict_u64(s, key, p.match[m]);
			snprintf(key, sizeof(key), "node_%u_lag", p.members[m]);
			rte_tel_data_add_dict_u64(s, key,
						  p.last > p.match[m] ? p.last - p.match[m] : 0);
		}
		char key[32];
		snprintf(key, sizeof(key), "shard_%u", p.id);
		rte_tel_data_add_dict_container(d, key, s, 0);
	}
	return 0;
}

static int
cmd_lcores(const struct app *app, const char *params, struct rte_tel_data *d)
{
	(void)params;
	struct app_view_lcore ls[APP_AGENTS_MAX];
	uint32_t n = app_views_lcores(app, ls, APP_AGENTS_MAX);
	rte_tel_data_start_dict(d);
	for (uint32_t i = 0; i < n; i++) {
		const struct app_view_lcore *l = &ls[i];
		struct rte_tel_data *s = rte_tel_data_alloc();
		if (s == NULL)
			return -ENOMEM;
		rte_tel_data_start_dict(s);
#define TEL_U64(f) rte_tel_data_add_dict_u64(s, #f, l->f);
#define TEL_STR(f) rte_tel_data_add_dict_string(s, #f, l->f);
		APP_VIEW_LCORE_HEAD(TEL_U64, TEL_STR)
		TEL_U64(busy_permille)
		TEL_U64(busy_ns)
		APP_VIEW_LCORE_COUNTS(TEL_U64)
#undef TEL_STR
#undef TEL_U64
		char key[40];
		tel_name(key, sizeof(key), l->name);
		rte_tel_data_add_dict_container(d, key, s, 0);
	}
	return 0;
}

struct stats_walk {
	struct rte_tel_data *d;
	const char *prefix;      /* NULL: list the groups */
	size_t prefix_len;
	uint32_t added;
	uint32_t left_out;       /* matches beyond the dictionary's capacity */
	char groups[64][40];     /* no prefix: the distinct groups */
	uint32_t group_count;
};

/* The group of a counter: its first token, and the second for shard.N / agent.X. */
static void
group_of(const char *name, char *out, size_t cap)
{
	const char *dot = strchr(name, '.');
	size_t len = dot != NULL ? (size_t)(dot - name) : strlen(name);
	if (dot != NULL && (strncmp(name, "shard.", 6) == 0 || strncmp(name, "agent.", 6) == 0)) {
		const char *dot2 = strchr(dot + 1, '.');
		if (dot2 != NULL)
			len = (size_t)(dot2 - name);
	}
	if (len >= cap)
		len = cap - 1;
	memcpy(out, name, len);
	out[len] = '\0';
}

static void
stats_one(void *arg, const char *name, const char *value)
{
	struct stats_walk *w = arg;
	if (w->prefix == NULL) {
		char g[40];
		group_of(name, g, sizeof(g));
		for (uint32_t i = 0; i < w->group_count; i++)
			if (strcmp(w->groups[i], g) == 0)
				return;
		if (w->group_count < 64)
			snprintf(w->groups[w->group_count++], sizeof(w->groups[0]), "%s", g);
		return;
	}
	if (strncmp(name, w->prefix, w->prefix_len) != 0)
		return;
	if (w->added + 1 >= RTE_TEL_MAX_DICT_ENTRIES) {
		w->left_out++;
		return;
	}
	char key[RTE_TEL_MAX_STRING_LEN];
	tel_name(key, sizeof(key), name);
	char *end;
	errno = 0;
	unsigned long long v = strtoull(value, &end, 10);
	if (value[0] != '-' && *end == '\0' && errno == 0 && end != value)
		rte_tel_data_add_dict_u64(w->d, key, v);
	else
		rte_tel_data_add_dict_string(w->d, key, value);
	w->added++;
}

static int
cmd_stats(const struct app *app, const char *params, struct rte_tel_data *d)
{
	static struct stats_walk w; /* under tel_lock */
	memset(&w, 0, sizeof(w));
	w.d = d;
	if (params != NULL && params[0] != '\0') {
		w.prefix = params;
		w.prefix_len = strlen(params);
	}
	int rc = app_view_read(tel_ctx, app, true);
	if (rc < 0)
		return rc;
	rte_tel_data_start_dict(d);
	app_view_each(tel_ctx, stats_one, &w);
	if (w.prefix == NULL) {
		struct rte_tel_data *a = rte_tel_data_alloc();
		if (a == NULL)
			return -ENOMEM;
		rte_tel_data_start_array(a, RTE_TEL_STRING_VAL);
		for (uint32_t i = 0; i < w.group_count; i++)
			rte_tel_data_add_array_string(a, w.groups[i]);
		rte_tel_data_add_dict_container(d, "groups", a, 0);
		rte_tel_data_add_dict_string(d, "usage", "/omsd/stats,<prefix> e.g. shard.1.oms");
	} else if (w.left_out > 0) {
		rte_tel_data_add_dict_u64(d, "left_out", w.left_out);
	}
	return 0;
}

typedef int(tel_view_fn)(const struct app *app, const char *params, struct rte_tel_data *d);

static int
run(tel_view_fn *fn, const char *params, struct rte_tel_data *d)
{
	pthread_mutex_lock(&tel_lock);
	int rc = -ENODEV;
	if (tel_app != NULL)
		rc = fn(tel_app, params, d);
	pthread_mutex_unlock(&tel_lock);
	return rc;
}

static int
tel_status(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return run(cmd_status, params, d);
}

static int
tel_members(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return run(cmd_members, params, d);
}

static int
tel_lcores(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return run(cmd_lcores, params, d);
}

static int
tel_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	return run(cmd_stats, params, d);
}

int
app_telemetry_register(const struct app *app)
{
	struct app_view_ctx *ctx = app_view_ctx_new();
	if (ctx == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&tel_lock);
	tel_ctx = ctx;
	tel_app = app;
	pthread_mutex_unlock(&tel_lock);
	/* Registering twice (a restart of the views in one process) is refused by DPDK with
	 * -EINVAL for a known name; the callbacks are the same, so that is fine. */
	int rc = rte_telemetry_register_cmd("/omsd/status", tel_status,
					    "Node and shards: role, leader, term, indexes, lag. No parameters");
	if (rc == 0)
		rc = rte_telemetry_register_cmd("/omsd/members", tel_members,
						"Raft members per shard: leader, match, lag. No parameters");
	if (rc == 0)
		rc = rte_telemetry_register_cmd("/omsd/lcores", tel_lcores,
						"lcores: busy %, idle back-off, rings, duty cycle. No parameters");
	if (rc == 0)
		rc = rte_telemetry_register_cmd("/omsd/stats", tel_stats,
						"Counters. Parameter: a name prefix (shard.1.oms); none: the groups");
	return rc;
}

void
app_telemetry_close(void)
{
	pthread_mutex_lock(&tel_lock);
	tel_app = NULL;
	app_view_ctx_free(tel_ctx);
	tel_ctx = NULL;
	pthread_mutex_unlock(&tel_lock);
}

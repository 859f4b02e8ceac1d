/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's control socket (issue 9): served by the main lcore between its ticks, never by
 * a hot lcore. Read-only views for now: every command renders from the same counters the
 * stats dump writes (app_stats_write), which the lcores publish with single-writer atomics,
 * so reading them here never stops or locks a hot lcore.
 *
 *   status   node, and per shard: service, role, leader, term, commit, applied and the
 *            service's own state (route epoch, in-flight sagas, residents, resting orders)
 *   stats    every counter as a JSON object {"name": value}
 *   metrics  Prometheus text ({"text": "..."}), rendered by app_views.c
 *   members, lcores  registered by app_views.c; status gets the lag per member from it
 *
 * Commands that change shard state (routes, symbols, kill, users, snapshot, transfer-leader)
 * are not served yet: they answer unknown_command, and omsctl says so.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "app_views.h"
#include "mgmt/mgmt.h"

#define STATS_MAX (256 * 1024) /* the counters as text */

struct app_mgmt {
	struct mgmt_server *srv;
	const struct app *app;
	char *text;               /* counters as "name value" lines */
	size_t len;
};

static struct app_mgmt mgmt;

/* Refresh the counters text (one read per request: a consistent-enough view of each
 * single-writer counter). */
static int
stats_read(void)
{
	FILE *f = fmemopen(mgmt.text, STATS_MAX - 1, "w");
	if (f == NULL)
		return -errno;
	app_stats_write(mgmt.app, f);
	long n = ftell(f);
	fclose(f);
	if (n < 0)
		return -EIO;
	mgmt.len = (size_t)n;
	mgmt.text[mgmt.len] = '\0';
	return 0;
}

/* Walk "name value" lines; fn gets each pair (value as text). */
static void
stats_each(void (*fn)(void *ctx, const char *name, const char *value), void *ctx)
{
	char *p = mgmt.text, *end = mgmt.text + mgmt.len;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		*nl = '\0';
		char *sp = strchr(p, ' ');
		if (p[0] != '#' && sp != NULL) {
			*sp = '\0';
			fn(ctx, p, sp + 1);
			*sp = ' ';
		}
		*nl = '\n';
		p = nl + 1;
	}
}

static bool
is_number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

static void
put_value(struct mgmt_out *o, const char *value)
{
	if (is_number(value))
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
	int rc = stats_read();
	if (rc < 0) {
		snprintf(err, cap, "internal: counters unavailable");
		return rc;
	}
	mgmt_out_obj_begin(out);
	stats_each(each_stat, out);
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
	int rc = stats_read();
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
		stats_each(each_status, &s);
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
	static char text[STATS_MAX + 64 * 1024];
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

int
app_mgmt_open(const struct app *app)
{
	const char *path = app->cfg.mgmt_socket;
	if (path[0] == '\0')
		return 0;
	mgmt.app = app;
	mgmt.text = malloc(STATS_MAX);
	if (mgmt.text == NULL)
		return -ENOMEM;
	int rc = mgmt_server_open(&mgmt.srv, path, "omsd", 0660);
	if (rc < 0) {
		free(mgmt.text);
		mgmt.text = NULL;
		return rc;
	}
	mgmt_register(mgmt.srv, "status", h_status, NULL, "node and per-shard Raft/service state");
	mgmt_register(mgmt.srv, "stats", h_stats, NULL, "every counter as a JSON object");
	mgmt_register(mgmt.srv, "metrics", h_metrics, NULL, "every counter as Prometheus text");
	app_views_register(mgmt.srv); /* members, lcores */
	APP_LOG(INFO, "control socket %s", path);
	return 0;
}

/* Serve the socket for at most timeout_ms; returns at once when there is nothing to do
 * and no socket. */
void
app_mgmt_poll(int timeout_ms)
{
	if (mgmt.srv != NULL)
		mgmt_poll(mgmt.srv, timeout_ms);
}

void
app_mgmt_close(void)
{
	mgmt_server_close(mgmt.srv);
	mgmt.srv = NULL;
	free(mgmt.text);
	mgmt.text = NULL;
}

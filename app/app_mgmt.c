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
 * Commands that read or change a shard's service state (symbols, routes, users, kill,
 * snapshot, transfer-leader) are struct app_cmd handed to the shard lcores (the only
 * readers and proposers of that state) on their mgmt rings; the answers come back on
 * app->mgmt_done and are collected here, between socket polls. A mutation is an admin entry
 * in each target shard's log, answered once it is committed and applied (its ADMIN_REPLY),
 * or with why not. This node proposes only to shards it leads: before anything is proposed
 * every target shard must be led here, else the answer is not_leader naming the leader of
 * each shard that is not (docs/appliance.md "Control socket" says why).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ring.h>

#include "app.h"
#include "app_views.h"
#include "common/check.h"
#include "common/wire.h"
#include "mgmt/mgmt.h"

#define APP_MGMT_METRICS_MAX (320 * 1024) /* the Prometheus text of a node */

struct mreq;

struct app_mgmt {
	struct mgmt_server *srv;
	const struct app *app;
	struct mreq *reqs;        /* requests waiting for shard lcores [APP_CMDS_MAX] */
	uint32_t cmds_out;        /* commands held by shard lcores or on their rings */
	char *result;             /* a deferred answer being rendered */
	struct mreq *last;        /* the request dispatch() made last */
};

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

/* ---------------------------------------------------------------------------------------
 * Commands run by the shard lcores.
 * ------------------------------------------------------------------------------------- */

#define RESULT_MAX (1u << 20)        /* a deferred answer */
#define VIEW_MAX (256u * 1024)       /* one shard's view */
#define TARGETS_MAX APP_SHARDS_MAX   /* shards one request goes to */
#define TIMEOUT_MS_DEFAULT 3000      /* commit deadline unless args.timeout_ms */
#define TIMEOUT_MS_MAX 60000
#define GRACE_NS (1000ull * 1000000) /* main answers timeout itself this long after */

enum render {
	R_MUTATION = 1, /* every target must answer ok */
	R_ANY_OK,       /* users evict/migrate: ok where the user is, not_found elsewhere */
	R_SYMBOLS,      /* rows of every shard joined */
	R_VIEWS,        /* one object per shard */
	R_SNAPSHOT,
	R_TRANSFER,
};

struct targets {
	uint16_t shard[TARGETS_MAX];
	uint32_t n;
};

/* A second step, proposed once every command of the first is ok (all-or-nothing per
 * step): shards scale (receiving, then active), symbols add and move (the ME shard that
 * validates or gives the symbol up first, then the others). */
struct step2 {
	struct targets t;
	_Alignas(8) uint8_t msg[APP_CMD_MSG_MAX];
	uint16_t len;
	uint64_t key;
	uint32_t flags;
	bool copy_first;              /* start from step 1's first command's message */
};

struct mreq {
	bool used;
	bool answered;                /* the client got its answer (main's timeout) */
	enum render render;
	uint32_t token;               /* mgmt deferred answer */
	uint32_t cmd_count;
	uint32_t done_count;          /* commands back from the shard lcores */
	uint64_t deadline_ns;         /* main answers timeout after this */
	char name[32];
	uint64_t timeout_ns;          /* per step: the shard lcores' deadline */
	uint8_t step;                 /* 1, or 2 while the second step runs */
	int failed;                   /* -errno: building a step failed */
	struct step2 *next;           /* the second step, or NULL */
	struct app_cmd *cmds[2 * TARGETS_MAX];
};

/* Parsed request arguments: names the handler accepts, checked before anything runs. */
struct margs {
	const struct mgmt_req *req;
	char *err;
	size_t cap;
};

static bool
arg_present(const struct margs *a, const char *key)
{
	return mgmt_json_get(a->req->json, a->req->args, key) >= 0;
}

/* Every argument must be one of names (NULL-terminated); timeout_ms is always allowed. */
static int
args_known(struct margs *a, const char *const *names)
{
	const struct mgmt_json *j = a->req->json;
	if (a->req->args < 0)
		return 0;
	int t = a->req->args + 1;
	for (uint32_t i = 0; i < j->toks[a->req->args].size; i++) {
		char key[48];
		if (mgmt_json_str(j, t, key, sizeof(key)) != 0) {
			snprintf(a->err, a->cap, "bad_argument: an argument name is too long");
			return -EINVAL;
		}
		bool ok = strcmp(key, "timeout_ms") == 0;
		for (int k = 0; !ok && names[k] != NULL; k++)
			ok = strcmp(key, names[k]) == 0;
		if (!ok) {
			snprintf(a->err, a->cap, "bad_argument: unknown argument '%s'", key);
			return -EINVAL;
		}
		t = (int)j->toks[t + 1].next;
	}
	return 0;
}

static int
arg_u64(struct margs *a, const char *key, bool required, uint64_t min, uint64_t max,
	uint64_t *out)
{
	int rc = mgmt_json_get_u64(a->req->json, a->req->args, key, out);
	if (rc == -ENOENT && !required)
		return 0;
	if (rc == -ENOENT) {
		snprintf(a->err, a->cap, "bad_argument: --%s is required", key);
		return -EINVAL;
	}
	if (rc != 0 || *out < min || *out > max) {
		snprintf(a->err, a->cap, "bad_argument: --%s must be an integer in [%" PRIu64
			 ", %" PRIu64 "]", key, min, max);
		return -EINVAL;
	}
	return 0;
}

static int
arg_bool(struct margs *a, const char *key, bool *out)
{
	*out = false;
	int rc = mgmt_json_get_bool(a->req->json, a->req->args, key, out);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0) {
		snprintf(a->err, a->cap, "bad_argument: --%s must be true or false", key);
		return -EINVAL;
	}
	return 0;
}

/* A list of shard ids: "1,2,3" (or one number). */
static int
arg_shards(struct margs *a, const char *key, bool required, uint16_t *out, uint32_t *n)
{
	*n = 0;
	uint64_t one;
	if (mgmt_json_get_u64(a->req->json, a->req->args, key, &one) == 0) {
		if (one >= DP_SHARDS_MAX)
			goto bad;
		out[(*n)++] = (uint16_t)one;
		return 0;
	}
	char list[256];
	int rc = mgmt_json_get_str(a->req->json, a->req->args, key, list, sizeof(list));
	if (rc == -ENOENT && !required)
		return 0;
	if (rc != 0)
		goto bad;
	for (char *p = list; *p != '\0';) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || v >= DP_SHARDS_MAX || *n == WIRE_ROUTE_SHARDS_MAX)
			goto bad;
		for (uint32_t i = 0; i < *n; i++)
			if (out[i] == v)
				goto bad;
		out[(*n)++] = (uint16_t)v;
		p = end;
		if (*p == ',')
			p++;
		else if (*p != '\0')
			goto bad;
	}
	if (*n > 0 || !required)
		return 0;
bad:
	snprintf(a->err, a->cap, "bad_argument: --%s must be a list of distinct shard ids "
		 "below %d, like 1,2", key, DP_SHARDS_MAX);
	return -EINVAL;
}

/* ---- targets ---- */

static void
targets_add(struct targets *t, uint16_t shard)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (t->shard[i] == shard)
			return;
	if (t->n < TARGETS_MAX)
		t->shard[t->n++] = shard;
}

/* Every OMS shard: those of the configured routing and those hosted here. */
static void
targets_oms(struct targets *t)
{
	const struct app_config *cfg = &mgmt.app->cfg;
	for (uint32_t i = 0; i < cfg->routing.shard_count; i++)
		targets_add(t, cfg->routing.shards[i]);
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if (cfg->shards[i].service == APP_SERVICE_OMS)
			targets_add(t, cfg->shards[i].id);
}

/* Every ME shard: those of the configured symbols and those hosted here. */
static void
targets_me(struct targets *t)
{
	const struct app_config *cfg = &mgmt.app->cfg;
	for (uint32_t i = 0; i < cfg->symbol_count; i++)
		targets_add(t, cfg->symbols[i].me_shard);
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if (cfg->shards[i].service == APP_SERVICE_ME)
			targets_add(t, cfg->shards[i].id);
}

/* Hosted shards of a service (APP_SERVICE_COUNT: all). */
static void
targets_hosted(struct targets *t, int service)
{
	const struct app_config *cfg = &mgmt.app->cfg;
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if ((service < 0 || (int)cfg->shards[i].service == service) &&
		    cfg->shards[i].service != APP_SERVICE_ECHO)
			targets_add(t, cfg->shards[i].id);
}

/* A shard id the operator named is not one of this node's shards of another service. */
static bool
shard_may_be(uint16_t shard, int service)
{
	int idx = mgmt.app->shard_index[shard];
	return idx < 0 || (int)mgmt.app->cfg.shards[idx].service == service;
}

static int
shards_check(struct margs *a, const uint16_t *ids, uint32_t n, int service)
{
	for (uint32_t i = 0; i < n; i++) {
		if (!shard_may_be(ids[i], service)) {
			snprintf(a->err, a->cap, "bad_argument: shard %u is not an %s shard", ids[i],
				 service == APP_SERVICE_OMS ? "OMS" : "ME");
			return -EINVAL;
		}
	}
	return 0;
}

/* The symbol's ME shard: args.me_shard (a symbol added or moved at run time), else the
 * node's [symbol.N] config. */
static int
symbol_me_shard(struct margs *a, uint64_t symbol, uint16_t *shard)
{
	const struct app_config *cfg = &mgmt.app->cfg;
	uint64_t v;
	if (arg_present(a, "me_shard")) {
		if (arg_u64(a, "me_shard", true, 0, DP_SHARDS_MAX - 1, &v) != 0)
			return -EINVAL;
		*shard = (uint16_t)v;
		return shards_check(a, shard, 1, APP_SERVICE_ME);
	}
	for (uint32_t i = 0; i < cfg->symbol_count; i++) {
		if (cfg->symbols[i].id == symbol) {
			*shard = cfg->symbols[i].me_shard;
			return 0;
		}
	}
	snprintf(a->err, a->cap, "unknown_symbol: symbol %" PRIu64 " is not configured on this "
		 "node ([symbol.N]); name its ME shard with --me-shard", symbol);
	return -ENOENT;
}

/* ---- requests ---- */

static struct mreq *
mreq_get(void)
{
	for (uint32_t i = 0; i < APP_CMDS_MAX; i++)
		if (!mgmt.reqs[i].used)
			return &mgmt.reqs[i];
	return NULL;
}

static uint32_t
mgmt_cmds_at_shard(const struct mreq *r)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->cmd_count; i++)
		n += r->cmds[i] != NULL && r->cmds[i]->at_shard;
	return n;
}

static void
mreq_free(struct mreq *r)
{
	free(r->next);
	for (uint32_t i = 0; i < r->cmd_count; i++) {
		if (r->cmds[i] != NULL && !r->cmds[i]->at_shard) {
			free(r->cmds[i]->out);
			free(r->cmds[i]);
		}
	}
	memset(r, 0, sizeof(*r));
}

static uint64_t
timeout_ns(const struct mgmt_req *req)
{
	uint64_t ms = TIMEOUT_MS_DEFAULT;
	if (mgmt_json_get_u64(req->json, req->args, "timeout_ms", &ms) != 0 || ms == 0 ||
	    ms > TIMEOUT_MS_MAX)
		ms = TIMEOUT_MS_DEFAULT;
	return ms * 1000000;
}

/* Answer a request whose shards are not all led here (nothing was proposed). */
static int
reply_not_leader(const struct mgmt_req *req, const struct targets *t)
{
	const struct app *app = mgmt.app;
	char extra[2048], msg[256] = "";
	struct mgmt_out o;
	mgmt_out_init(&o, extra, sizeof(extra));
	uint32_t first = 0;
	mgmt_out_key(&o, "leaders");
	mgmt_out_arr_begin(&o);
	for (uint32_t i = 0; i < t->n; i++) {
		uint16_t id = t->shard[i];
		int idx = app->shard_index[id];
		uint32_t leader = 0;
		bool leads = idx >= 0 && app_shard_leads(app, (uint32_t)idx, &leader);
		if (leads)
			continue;
		if (idx < 0)
			leader = __atomic_load_n(&app->leader_hint[id], __ATOMIC_RELAXED);
		if (leader == app->cfg.dp.node_id)
			leader = 0;
		if (first == 0)
			first = leader;
		mgmt_out_obj_begin(&o);
		mgmt_out_kv_u64(&o, "shard", id);
		mgmt_out_kv_u64(&o, "leader", leader);
		mgmt_out_kv_bool(&o, "hosted", idx >= 0);
		mgmt_out_obj_end(&o);
		size_t l = strlen(msg);
		if (leader != 0)
			snprintf(msg + l, sizeof(msg) - l, "%sshard %u: leader is node %u",
				 l ? "; " : "", id, leader);
		else
			snprintf(msg + l, sizeof(msg) - l, "%sshard %u: leader unknown%s",
				 l ? "; " : "", id, idx < 0 ? " (not hosted here)" : "");
	}
	mgmt_out_arr_end(&o);
	char head[64];
	snprintf(head, sizeof(head), "\"leader\":%u,", first);
	char members[2200];
	snprintf(members, sizeof(members), "%s%s", head, extra);
	mgmt_reply_err_extra(mgmt.srv, req->token, "not_leader", msg, members);
	return MGMT_PENDING;
}

/* Every target shard is hosted and led here (as last published: a hint, the shard lcore
 * decides). */
static bool
all_led(const struct targets *t)
{
	for (uint32_t i = 0; i < t->n; i++) {
		int idx = mgmt.app->shard_index[t->shard[i]];
		uint32_t leader;
		if (idx < 0 || !app_shard_leads(mgmt.app, (uint32_t)idx, &leader))
			return false;
	}
	return true;
}

/* Hand one command per target to the shard lcores; fill(cmd, shard, ctx) writes each. */
typedef int(cmd_fill_fn)(struct app_cmd *c, uint16_t shard, void *ctx);

/* Add one step's commands to r and enqueue them. Targets not led here (led: checked before)
 * are answered here with NOT_LEADER and the hint, never enqueued. 0 or -ENOMEM. */
static int
step_enqueue(struct mreq *r, const struct targets *t, uint32_t kind, cmd_fill_fn *fill,
	     void *ctx, bool led)
{
	uint64_t now = dp_clock_ns();
	uint32_t first = r->cmd_count;
	int rc = 0;
	for (uint32_t i = 0; i < t->n && rc == 0; i++) {
		CHECK(r->cmd_count < sizeof(r->cmds) / sizeof(r->cmds[0]));
		struct app_cmd *c = calloc(1, sizeof(*c));
		if (c == NULL) {
			rc = -ENOMEM;
			break;
		}
		r->cmds[r->cmd_count++] = c;
		c->kind = kind;
		c->shard = t->shard[i];
		c->deadline_ns = now + r->timeout_ns;
		c->req = r;
		c->step = r->step;
		if (kind == APP_CMD_VIEW) {
			c->out = malloc(VIEW_MAX);
			c->out_cap = VIEW_MAX;
			if (c->out == NULL) {
				rc = -ENOMEM;
				break;
			}
		}
		rc = fill(c, t->shard[i], ctx);
	}
	if (rc != 0) {
		/* Nothing of this step was enqueued: its commands are answered here. */
		for (uint32_t i = first; i < r->cmd_count; i++) {
			r->cmds[i]->status = APP_CMD_FAILED;
			r->cmds[i]->err = rc;
			r->done_count++;
		}
		return rc;
	}
	for (uint32_t i = first; i < r->cmd_count; i++) {
		struct app_cmd *c = r->cmds[i];
		int idx = mgmt.app->shard_index[c->shard];
		struct rte_ring *ring = idx >= 0 ? app_shard_mgmt_ring(mgmt.app, (uint32_t)idx)
						 : NULL;
		uint32_t leader = 0;
		if (!led && (idx < 0 || !app_shard_leads(mgmt.app, (uint32_t)idx, &leader))) {
			if (idx < 0)
				leader = __atomic_load_n(&mgmt.app->leader_hint[c->shard],
							 __ATOMIC_RELAXED);
			c->leader = leader == mgmt.app->cfg.dp.node_id ? 0 : leader;
			c->status = APP_CMD_NOT_LEADER;
			r->done_count++;
			continue;
		}
		c->at_shard = true;
		if (ring == NULL || rte_ring_sp_enqueue(ring, c) != 0) {
			c->at_shard = false;
			/* Never reached the shard: answered here, still ours. */
			c->status = ring == NULL ? APP_CMD_NOT_LEADER : APP_CMD_BUSY;
			r->done_count++;
			continue;
		}
		mgmt.cmds_out++;
	}
	return 0;
}

static int
dispatch(const struct mgmt_req *req, const struct targets *t, enum render render,
	 uint32_t kind, cmd_fill_fn *fill, void *ctx, char *err, size_t cap)
{
	if (req->token == 0)
		return MGMT_PENDING; /* the server's pending table is full: it answers busy */
	if (t->n == 0) {
		snprintf(err, cap, "not_hosted: no shard on this node serves this");
		return -ENOENT;
	}
	struct mreq *r = mreq_get();
	if (r == NULL || mgmt.cmds_out + 2 * t->n > APP_CMDS_MAX) {
		snprintf(err, cap, "busy: too many control commands in flight");
		return -EBUSY;
	}
	uint64_t now = dp_clock_ns();
	memset(r, 0, sizeof(*r));
	r->render = render;
	r->token = req->token;
	r->timeout_ns = timeout_ns(req);
	r->deadline_ns = now + r->timeout_ns + GRACE_NS;
	r->step = 1;
	snprintf(r->name, sizeof(r->name), "%s", req->cmd);
	r->used = true;
	int rc = step_enqueue(r, t, kind, fill, ctx, true);
	if (rc != 0) {
		CHECK(mgmt_cmds_at_shard(r) == 0);
		mreq_free(r);
		snprintf(err, cap, "internal: command not built (%s)", strerror(-rc));
		return rc;
	}
	mgmt.last = r;
	return MGMT_PENDING;
}

static const char *
status_code(uint32_t st)
{
	switch (st) {
	case APP_CMD_OK:
		return "ok";
	case APP_CMD_REJECTED:
		return "rejected";
	case APP_CMD_NOT_LEADER:
		return "not_leader";
	case APP_CMD_LOST:
		return "lost";
	case APP_CMD_TIMEOUT:
		return "timeout";
	case APP_CMD_BUSY:
		return "busy";
	default:
		return "failed";
	}
}

static void
result_row(struct mgmt_out *o, const struct app_cmd *c)
{
	mgmt_out_obj_begin(o);
	mgmt_out_kv_u64(o, "shard", c->shard);
	if (c->step > 1 || ((const struct mreq *)c->req)->next != NULL)
		mgmt_out_kv_u64(o, "step", c->step);
	mgmt_out_kv_str(o, "status", status_code(c->status));
	if (c->status == APP_CMD_REJECTED)
		mgmt_out_kv_str(o, "reason", wire_reason_name(c->reason));
	if (c->status == APP_CMD_NOT_LEADER)
		mgmt_out_kv_u64(o, "leader", c->leader);
	if (c->status == APP_CMD_FAILED)
		mgmt_out_kv_str(o, "error", strerror(-c->err));
	if (c->kind == APP_CMD_PROPOSE || c->kind == APP_CMD_SNAPSHOT) {
		mgmt_out_kv_u64(o, "index", c->index);
		mgmt_out_kv_u64(o, "term", c->term);
	}
	if (c->status == APP_CMD_OK || c->status == APP_CMD_REJECTED)
		mgmt_out_kv_u64(o, "value", c->value);
	mgmt_out_obj_end(o);
}

/* The request's answer once every command is back. */
static void
mreq_finish(struct mreq *r)
{
	struct mgmt_out o;
	mgmt_out_init(&o, mgmt.result, RESULT_MAX);
	const struct app_cmd *bad = NULL;
	uint32_t ok = 0;
	for (uint32_t i = 0; i < r->cmd_count; i++) {
		const struct app_cmd *c = r->cmds[i];
		bool fine = c->status == APP_CMD_OK ||
			    (r->render == R_ANY_OK && c->status == APP_CMD_REJECTED &&
			     c->reason == WIRE_REASON_NOT_FOUND);
		ok += c->status == APP_CMD_OK;
		if (!fine && bad == NULL)
			bad = c;
	}
	if (r->render == R_ANY_OK && bad == NULL && ok == 0)
		bad = r->cmds[0]; /* not_found everywhere */
	if (bad == NULL && r->failed != 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "step %u not started: %s (step 1 applied)", r->step,
			 strerror(-r->failed));
		mgmt_reply_err(mgmt.srv, r->token, r->failed == -EBUSY ? "busy" : "internal",
			       msg);
		return;
	}
	if (bad != NULL) {
		char msg[256];
		if (bad->status == APP_CMD_REJECTED)
			snprintf(msg, sizeof(msg), "shard %u refused it: %s", bad->shard,
				 wire_reason_name(bad->reason));
		else if (bad->status == APP_CMD_NOT_LEADER)
			snprintf(msg, sizeof(msg), "shard %u is not led here; leader: node %u%s",
				 bad->shard, bad->leader, bad->leader == 0 ? " (unknown)" : "");
		else if (bad->status == APP_CMD_LOST)
			snprintf(msg, sizeof(msg), "shard %u: the entry was not committed "
				 "(leadership changed); nothing was applied by it", bad->shard);
		else if (bad->status == APP_CMD_TIMEOUT)
			snprintf(msg, sizeof(msg), "shard %u: no outcome before the deadline; it "
				 "may still be applied", bad->shard);
		else if (bad->status == APP_CMD_BUSY)
			snprintf(msg, sizeof(msg), "shard %u: busy (backpressure or a leadership "
				 "transfer); nothing was proposed", bad->shard);
		else
			snprintf(msg, sizeof(msg), "shard %u: %s", bad->shard,
				 strerror(-bad->err));
		if (bad->status == APP_CMD_NOT_LEADER) {
			mgmt_out_kv_u64(&o, "leader", bad->leader);
		}
		mgmt_out_key(&o, "results");
		mgmt_out_arr_begin(&o);
		for (uint32_t i = 0; i < r->cmd_count; i++)
			result_row(&o, r->cmds[i]);
		mgmt_out_arr_end(&o);
		const char *code = status_code(bad->status);
		if (bad->status == APP_CMD_REJECTED && bad->reason == WIRE_REASON_UNKNOWN_SYMBOL)
			code = "unknown_symbol";
		mgmt_reply_err_extra(mgmt.srv, r->token, code, msg,
				     o.overflow ? NULL : mgmt.result);
		return;
	}
	mgmt_out_obj_begin(&o);
	switch (r->render) {
	case R_SYMBOLS:
		mgmt_out_key(&o, "symbols");
		mgmt_out_arr_begin(&o);
		for (uint32_t i = 0; i < r->cmd_count; i++) {
			const struct app_cmd *c = r->cmds[i];
			/* Each is "[row,row]": join the rows. */
			if (c->out_len < 2 || c->out[0] != '[' || c->out[c->out_len - 1] != ']')
				continue;
			if (c->out_len == 2)
				continue;
			c->out[c->out_len - 1] = '\0';
			if (o.need_comma)
				mgmt_out_raw(&o, ",");
			mgmt_out_raw(&o, c->out + 1);
			o.need_comma = true;
		}
		mgmt_out_arr_end(&o);
		break;
	case R_VIEWS:
		mgmt_out_key(&o, "shards");
		mgmt_out_arr_begin(&o);
		for (uint32_t i = 0; i < r->cmd_count; i++) {
			const struct app_cmd *c = r->cmds[i];
			c->out[c->out_len < VIEW_MAX ? c->out_len : VIEW_MAX - 1] = '\0';
			if (o.need_comma)
				mgmt_out_raw(&o, ",");
			mgmt_out_raw(&o, c->out);
			o.need_comma = true;
		}
		mgmt_out_arr_end(&o);
		break;
	case R_TRANSFER:
		mgmt_out_kv_u64(&o, "shard", r->cmds[0]->shard);
		mgmt_out_kv_u64(&o, "leader", r->cmds[0]->target);
		mgmt_out_kv_u64(&o, "term", r->cmds[0]->value);
		break;
	default:
		mgmt_out_key(&o, "results");
		mgmt_out_arr_begin(&o);
		for (uint32_t i = 0; i < r->cmd_count; i++)
			result_row(&o, r->cmds[i]);
		mgmt_out_arr_end(&o);
		break;
	}
	mgmt_out_obj_end(&o);
	if (o.overflow) {
		mgmt_reply_err(mgmt.srv, r->token, "too_large", "result does not fit");
		return;
	}
	mgmt_reply_ok(mgmt.srv, r->token, mgmt.result);
}

static int fill_propose(struct app_cmd *c, uint16_t shard, void *ctx);

struct propose_ctx {
	const void *msg;              /* the admin message, same for every target */
	uint16_t len;
	uint64_t key;                 /* req_id of its ADMIN_REPLY */
	uint32_t flags;
};

static bool
step_ok(const struct mreq *r)
{
	for (uint32_t i = 0; i < r->cmd_count; i++)
		if (r->cmds[i]->status != APP_CMD_OK)
			return false;
	return true;
}

/* Step 1 is committed everywhere: propose step 2 (its shards must be led here too, else
 * they are answered not_leader and the answer says step 1 applied). */
static void
step2_start(struct mreq *r)
{
	struct step2 *n = r->next;
	if (n->copy_first) {
		const struct wire_msg_hdr *h = (const void *)r->cmds[0]->msg;
		CHECK(h->length <= APP_CMD_MSG_MAX);
		memcpy(n->msg, r->cmds[0]->msg, h->length);
	}
	r->step = 2;
	uint64_t now = dp_clock_ns();
	r->deadline_ns = now + r->timeout_ns + GRACE_NS;
	if (mgmt.cmds_out + n->t.n > APP_CMDS_MAX) {
		r->failed = -EBUSY;
		return;
	}
	struct propose_ctx p = {.msg = n->msg, .len = n->len, .key = n->key, .flags = n->flags};
	int rc = step_enqueue(r, &n->t, APP_CMD_PROPOSE, fill_propose, &p, false);
	if (rc != 0)
		r->failed = rc;
}

/* Collect answered commands; answer requests that are complete or overdue. */
static void
collect(void)
{
	if (mgmt.app->mgmt_done == NULL)
		return;
	struct app_cmd *cs[32];
	unsigned n;
	while ((n = rte_ring_sc_dequeue_burst(mgmt.app->mgmt_done, (void **)cs, 32, NULL)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			struct mreq *r = cs[i]->req;
			CHECK(mgmt.cmds_out > 0 && r != NULL && r->used && cs[i]->at_shard);
			cs[i]->at_shard = false;
			mgmt.cmds_out--;
			r->done_count++;
		}
	}
	uint64_t now = dp_clock_ns();
	for (uint32_t i = 0; i < APP_CMDS_MAX; i++) {
		struct mreq *r = &mgmt.reqs[i];
		if (!r->used)
			continue;
		if (r->done_count == r->cmd_count && !r->answered && r->step == 1 &&
		    r->next != NULL && r->failed == 0 && step_ok(r)) {
			step2_start(r);
			if (r->done_count != r->cmd_count)
				continue;
		}
		if (r->done_count == r->cmd_count) {
			if (!r->answered)
				mreq_finish(r);
			mreq_free(r);
			continue;
		}
		if (!r->answered && now > r->deadline_ns) {
			/* A shard lcore did not give its commands back in time (it always does at
			 * their deadline unless it is stuck): answer, keep them until they return. */
			mgmt_reply_err(mgmt.srv, r->token, "timeout",
				       "no answer from the shard lcore; the command may still apply");
			r->answered = true;
		}
	}
}

/* ---- command builders ---- */

static int
fill_propose(struct app_cmd *c, uint16_t shard, void *ctx)
{
	const struct propose_ctx *p = ctx;
	CHECK(p->len <= APP_CMD_MSG_MAX);
	memcpy(c->msg, p->msg, p->len);
	((struct wire_msg_hdr *)c->msg)->shard = shard;
	c->req_key = p->key;
	c->flags = p->flags;
	return 0;
}

/* A mutation: every target must be led here, then one admin entry per target. */
static int
mutate(const struct mgmt_req *req, const struct targets *t, enum render render,
       struct propose_ctx *p, char *err, size_t cap)
{
	if (!all_led(t))
		return reply_not_leader(req, t);
	return dispatch(req, t, render, APP_CMD_PROPOSE, fill_propose, p, err, cap);
}

/* A two-step mutation: t1 first; once all ok, n (freed with the request). Every shard of
 * both steps must be led here before anything is proposed. */
static int
mutate2(const struct mgmt_req *req, const struct targets *t1, struct propose_ctx *p,
	struct step2 *n, char *err, size_t cap)
{
	struct targets all = *t1;
	for (uint32_t i = 0; i < n->t.n; i++)
		targets_add(&all, n->t.shard[i]);
	if (!all_led(&all)) {
		free(n);
		return reply_not_leader(req, &all);
	}
	mgmt.last = NULL;
	int rc = dispatch(req, t1, R_MUTATION, APP_CMD_PROPOSE, fill_propose, p, err, cap);
	if (rc != MGMT_PENDING || mgmt.last == NULL) {
		free(n);
		return rc;
	}
	mgmt.last->next = n;
	return rc;
}

struct view_ctx {
	uint32_t view;
	uint64_t user;
	uint32_t cursor;
	uint32_t limit;
};

static int
fill_view(struct app_cmd *c, uint16_t shard, void *ctx)
{
	(void)shard;
	const struct view_ctx *v = ctx;
	c->view = v->view;
	c->user = v->user;
	c->cursor = v->cursor;
	c->limit = v->limit;
	return 0;
}

static int
fill_plain(struct app_cmd *c, uint16_t shard, void *ctx)
{
	(void)shard;
	if (ctx != NULL)
		c->target = *(const uint32_t *)ctx;
	return 0;
}

#define MARGS(req, err, cap) { .req = (req), .err = (err), .cap = (cap) }

/* ---- symbols ---- */

static int
h_symbols_list(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
	       size_t cap)
{
	(void)ctx, (void)out;
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {NULL};
	if (args_known(&a, names) != 0)
		return -EINVAL;
	struct targets t = {0};
	targets_hosted(&t, -1);
	struct view_ctx v = {.view = APP_VIEW_SYMBOLS};
	return dispatch(req, &t, R_SYMBOLS, APP_CMD_VIEW, fill_view, &v, err, cap);
}

static int
symbol_status(const struct mgmt_req *req, char *err, size_t cap, uint8_t status)
{
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {"symbol", "cancel_resting", "me_shard", NULL};
	uint64_t sym;
	bool cancel = false;
	uint16_t me;
	if (args_known(&a, names) != 0 || arg_u64(&a, "symbol", true, 1, UINT32_MAX, &sym) != 0 ||
	    arg_bool(&a, "cancel_resting", &cancel) != 0)
		return -EINVAL;
	if (status == WIRE_SYM_TRADING && arg_present(&a, "cancel_resting")) {
		snprintf(err, cap, "bad_argument: --cancel-resting applies to halt only");
		return -EINVAL;
	}
	int rc = symbol_me_shard(&a, sym, &me);
	if (rc != 0)
		return rc;
	struct targets t = {0};
	targets_add(&t, me);
	targets_oms(&t);
	struct wire_symbol_status_msg m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_SYMBOL_STATUS, 0);
	m.symbol = (uint32_t)sym;
	m.status = status;
	m.cancel_resting = cancel;
	struct propose_ctx p = {.msg = &m, .len = sizeof(m), .key = sym};
	return mutate(req, &t, R_MUTATION, &p, err, cap);
}

static int
h_symbols_halt(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
	       size_t cap)
{
	(void)ctx, (void)out;
	return symbol_status(req, err, cap, WIRE_SYM_HALTED);
}

static int
h_symbols_resume(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
		 size_t cap)
{
	(void)ctx, (void)out;
	return symbol_status(req, err, cap, WIRE_SYM_TRADING);
}


/* symbols add --symbol S --base B --quote Q --me-shard M --tick T --lot L --base-unit U
 * [--min-qty --min-notional --ref-px --band-bps --maker-fee-bps --taker-fee-bps --halted]:
 * SYMBOL_CONFIG into the ME shard M first (it validates the grid), then every OMS shard. An
 * existing symbol is updated (the services refuse changes resting orders forbid). */
static int
h_symbols_add(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)out;
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {
		"symbol", "base", "quote", "me_shard", "tick", "lot", "base_unit", "min_qty",
		"min_notional", "ref_px", "band_bps", "maker_fee_bps", "taker_fee_bps", "halted",
		NULL};
	uint64_t sym, base, quote, me, tick, lot, unit, min_qty = 0, min_notional = 0,
		ref_px = 0, band = 0;
	int64_t maker = 0, taker = 0;
	bool halted = false;
	if (args_known(&a, names) != 0 || arg_u64(&a, "symbol", true, 1, UINT32_MAX, &sym) ||
	    arg_u64(&a, "base", true, 1, UINT32_MAX, &base) ||
	    arg_u64(&a, "quote", true, 1, UINT32_MAX, &quote) ||
	    arg_u64(&a, "me_shard", true, 0, DP_SHARDS_MAX - 1, &me) ||
	    arg_u64(&a, "tick", true, 1, INT64_MAX, &tick) ||
	    arg_u64(&a, "lot", true, 1, INT64_MAX, &lot) ||
	    arg_u64(&a, "base_unit", true, 1, INT64_MAX, &unit) ||
	    arg_u64(&a, "min_qty", false, 0, INT64_MAX, &min_qty) ||
	    arg_u64(&a, "min_notional", false, 0, INT64_MAX, &min_notional) ||
	    arg_u64(&a, "ref_px", false, 0, INT64_MAX, &ref_px) ||
	    arg_u64(&a, "band_bps", false, 0, 10000, &band) || arg_bool(&a, "halted", &halted))
		return -EINVAL;
	int rc1 = mgmt_json_get_i64(req->json, req->args, "maker_fee_bps", &maker);
	int rc2 = mgmt_json_get_i64(req->json, req->args, "taker_fee_bps", &taker);
	if ((rc1 != 0 && rc1 != -ENOENT) || (rc2 != 0 && rc2 != -ENOENT) || maker < -1000 ||
	    maker > 1000 || taker < 0 || taker > 1000) {
		snprintf(err, cap, "bad_argument: fees are basis points in [-1000, 1000] (taker "
			 ">= 0)");
		return -EINVAL;
	}
	uint16_t me_id = (uint16_t)me;
	if (shards_check(&a, &me_id, 1, APP_SERVICE_ME) != 0)
		return -EINVAL;
	struct wire_symbol_config m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_SYMBOL_CONFIG, 0);
	m.symbol = (uint32_t)sym;
	m.base_asset = (uint32_t)base;
	m.quote_asset = (uint32_t)quote;
	m.me_shard = (uint16_t)me;
	m.status = halted ? WIRE_SYM_HALTED : WIRE_SYM_TRADING;
	m.tick = (int64_t)tick;
	m.lot = (int64_t)lot;
	m.min_qty = (int64_t)min_qty;
	m.min_notional = (int64_t)min_notional;
	m.base_unit = (int64_t)unit;
	m.ref_px = (int64_t)ref_px;
	m.band_bps = (uint32_t)band;
	m.maker_fee_bps = (int16_t)maker;
	m.taker_fee_bps = (int16_t)taker;
	m.map_version = 1;
	struct targets t1 = {0};
	targets_add(&t1, (uint16_t)me);
	struct step2 *n = calloc(1, sizeof(*n));
	if (n == NULL) {
		snprintf(err, cap, "internal: out of memory");
		return -ENOMEM;
	}
	targets_oms(&n->t);
	memcpy(n->msg, &m, sizeof(m));
	n->len = sizeof(m);
	n->key = sym;
	struct propose_ctx p = {.msg = &m, .len = sizeof(m), .key = sym};
	return mutate2(req, &t1, &p, n, err, cap);
}

/* symbols move --symbol S --to M [--from F]: the owning ME shard F (the node's config, or
 * --from) gives the symbol up (SYMBOL_CONFIG with me_shard M, filled from its replica; it
 * refuses while orders rest: halt with --cancel-resting first), then M takes it and every
 * OMS shard routes it there (fees kept from each OMS replica). Status and grid move as
 * they are. */
static int
h_symbols_move(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
	       size_t cap)
{
	(void)ctx, (void)out;
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {"symbol", "to", "from", NULL};
	uint64_t sym, to, from;
	if (args_known(&a, names) != 0 || arg_u64(&a, "symbol", true, 1, UINT32_MAX, &sym) ||
	    arg_u64(&a, "to", true, 0, DP_SHARDS_MAX - 1, &to))
		return -EINVAL;
	uint16_t old;
	if (arg_present(&a, "from")) {
		if (arg_u64(&a, "from", true, 0, DP_SHARDS_MAX - 1, &from) != 0)
			return -EINVAL;
		old = (uint16_t)from;
	} else {
		int rc = symbol_me_shard(&a, sym, &old);
		if (rc != 0)
			return rc;
	}
	uint16_t ids[2] = {old, (uint16_t)to};
	if (shards_check(&a, ids, 2, APP_SERVICE_ME) != 0)
		return -EINVAL;
	if (old == to) {
		snprintf(err, cap, "bad_argument: symbol %" PRIu64 " is already on ME shard %u", sym,
			 old);
		return -EINVAL;
	}
	struct wire_symbol_config m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_SYMBOL_CONFIG, 0);
	m.symbol = (uint32_t)sym;
	m.me_shard = (uint16_t)to;
	m.map_version = 1;
	struct targets t1 = {0};
	targets_add(&t1, old);
	struct step2 *n = calloc(1, sizeof(*n));
	if (n == NULL) {
		snprintf(err, cap, "internal: out of memory");
		return -ENOMEM;
	}
	targets_add(&n->t, (uint16_t)to);
	targets_oms(&n->t);
	n->len = sizeof(m);
	n->key = sym;
	n->flags = APP_CMD_SYMBOL_FILL;
	n->copy_first = true;
	struct propose_ctx p = {.msg = &m, .len = sizeof(m), .key = sym,
				.flags = APP_CMD_SYMBOL_FILL};
	return mutate2(req, &t1, &p, n, err, cap);
}

/* ---- kill ---- */

static int
kill_switch(const struct mgmt_req *req, char *err, size_t cap, uint8_t scope)
{
	struct margs a = MARGS(req, err, cap);
	static const char *const user_names[] = {"user", "release", NULL};
	static const char *const sym_names[] = {"symbol", "release", "me_shard", NULL};
	const char *key = scope == WIRE_KILL_USER ? "user" : "symbol";
	uint64_t id;
	bool release = false;
	if (args_known(&a, scope == WIRE_KILL_USER ? user_names : sym_names) != 0 ||
	    arg_u64(&a, key, true, 1, scope == WIRE_KILL_USER ? UINT64_MAX : UINT32_MAX, &id) != 0 ||
	    arg_bool(&a, "release", &release) != 0)
		return -EINVAL;
	struct targets t = {0};
	if (scope == WIRE_KILL_SYMBOL) {
		uint16_t me;
		int rc = symbol_me_shard(&a, id, &me);
		if (rc != 0)
			return rc;
		targets_add(&t, me);
	} else {
		targets_me(&t); /* cancels the user's resting orders on every book */
	}
	targets_oms(&t);        /* blocks new orders */
	struct wire_kill_switch m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_KILL_SWITCH, 0);
	m.id = id;
	m.scope = scope;
	m.engage = !release;
	struct propose_ctx p = {.msg = &m, .len = sizeof(m), .key = id};
	return mutate(req, &t, R_MUTATION, &p, err, cap);
}

static int
h_kill_user(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)out;
	return kill_switch(req, err, cap, WIRE_KILL_USER);
}

static int
h_kill_symbol(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
	      size_t cap)
{
	(void)ctx, (void)out;
	return kill_switch(req, err, cap, WIRE_KILL_SYMBOL);
}

/* ---- routes ---- */

static int
h_routes_show(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
	      size_t cap)
{
	(void)ctx, (void)out;
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {NULL};
	if (args_known(&a, names) != 0)
		return -EINVAL;
	struct targets t = {0};
	targets_hosted(&t, APP_SERVICE_OMS);
	if (t.n == 0) {
		snprintf(err, cap, "not_hosted: no OMS shard on this node; its routing is "
			 "shown by a node that hosts one");
		return -ENOENT;
	}
	struct view_ctx v = {.view = APP_VIEW_ROUTES};
	return dispatch(req, &t, R_VIEWS, APP_CMD_VIEW, fill_view, &v, err, cap);
}

static bool
is_oms_shard(uint16_t shard)
{
	struct targets t = {0};
	targets_oms(&t);
	for (uint32_t i = 0; i < t.n; i++)
		if (t.shard[i] == shard)
			return true;
	return false;
}

/* WHALE_PIN (or unpin) of one user into every OMS shard: a new routing epoch. */
static int
pin_propose(const struct mgmt_req *req, uint64_t user, uint16_t shard, bool unpin, char *err,
	    size_t cap)
{
	struct targets t = {0};
	targets_oms(&t);
	struct wire_whale_pin m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_WHALE_PIN, 0);
	m.hdr.flags = unpin ? 1 : 0;
	m.user = user;
	m.shard = shard;
	struct propose_ctx p = {.msg = &m, .len = sizeof(m), .key = user};
	return mutate(req, &t, R_MUTATION, &p, err, cap);
}

static int
route_pin(const struct mgmt_req *req, char *err, size_t cap, bool unpin)
{
	struct margs a = MARGS(req, err, cap);
	static const char *const pin_names[] = {"user", "shard", NULL};
	static const char *const unpin_names[] = {"user", NULL};
	uint64_t user, shard = 0;
	if (args_known(&a, unpin ? unpin_names : pin_names) != 0 ||
	    arg_u64(&a, "user", true, 1, UINT64_MAX, &user) != 0 ||
	    (!unpin && arg_u64(&a, "shard", true, 0, DP_SHARDS_MAX - 1, &shard) != 0))
		return -EINVAL;
	if (!unpin && !is_oms_shard((uint16_t)shard)) {
		snprintf(err, cap, "bad_argument: shard %" PRIu64 " is not an OMS shard", shard);
		return -EINVAL;
	}
	return pin_propose(req, user, (uint16_t)shard, unpin, err, cap);
}

static int
h_routes_pin(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)out;
	return route_pin(req, err, cap, false);
}

static int
h_routes_unpin(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
	       size_t cap)
{
	(void)ctx, (void)out;
	return route_pin(req, err, cap, true);
}

/* routes set --active 1,2 [--receiving 3] [--epoch N]: the whole membership under a new
 * epoch (default: the applied one + 1, chosen by each shard lcore), pins kept. */
static int
h_routes_set(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)out;
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {"active", "receiving", "epoch", NULL};
	uint16_t act[WIRE_ROUTE_SHARDS_MAX], rcv[WIRE_ROUTE_SHARDS_MAX];
	uint32_t na, nr;
	uint64_t epoch = 0;
	if (args_known(&a, names) != 0 || arg_shards(&a, "active", true, act, &na) != 0 ||
	    arg_shards(&a, "receiving", false, rcv, &nr) != 0 ||
	    arg_u64(&a, "epoch", false, 1, UINT64_MAX, &epoch) != 0)
		return -EINVAL;
	if (shards_check(&a, act, na, APP_SERVICE_OMS) != 0 ||
	    shards_check(&a, rcv, nr, APP_SERVICE_OMS) != 0)
		return -EINVAL;
	if (na + nr > WIRE_ROUTE_SHARDS_MAX) {
		snprintf(err, cap, "bad_argument: at most %d shards", WIRE_ROUTE_SHARDS_MAX);
		return -EINVAL;
	}
	static struct wire_routing_config m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_ROUTING_CONFIG, 0);
	m.epoch = epoch;
	for (uint32_t i = 0; i < na; i++)
		m.shards[m.shard_count++] = (struct wire_route_shard){act[i], WIRE_SHARD_ACTIVE, 0};
	for (uint32_t i = 0; i < nr; i++) {
		for (uint32_t k = 0; k < na; k++) {
			if (act[k] == rcv[i]) {
				snprintf(err, cap, "bad_argument: shard %u is both active and "
					 "receiving", rcv[i]);
				return -EINVAL;
			}
		}
		m.shards[m.shard_count++] =
			(struct wire_route_shard){rcv[i], WIRE_SHARD_RECEIVING, 0};
	}
	struct targets t = {0};
	targets_oms(&t);
	for (uint32_t i = 0; i < m.shard_count; i++)
		targets_add(&t, m.shards[i].shard); /* a joining shard learns the config too */
	struct propose_ctx p = {.msg = &m, .len = sizeof(m), .key = epoch,
				.flags = APP_CMD_ROUTE_MERGE};
	return mutate(req, &t, R_MUTATION, &p, err, cap);
}

/* ---- users ---- */

static int
h_users_show(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)out;
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {"user", "limit", "from", NULL};
	uint64_t user = 0, limit = 100, from = 0;
	if (arg_present(&a, "cl_id")) {
		snprintf(err, cap, "bad_argument: one order by --cl-id is not shown yet; users show "
			 "--user U shows the user's actor");
		return -EINVAL;
	}
	if (args_known(&a, names) != 0 || arg_u64(&a, "user", false, 1, UINT64_MAX, &user) != 0 ||
	    arg_u64(&a, "limit", false, 1, 256, &limit) != 0 ||
	    arg_u64(&a, "from", false, 0, UINT32_MAX - 1, &from) != 0)
		return -EINVAL;
	if (user != 0 && (arg_present(&a, "limit") || arg_present(&a, "from"))) {
		snprintf(err, cap, "bad_argument: --limit/--from page the resident set (no --user)");
		return -EINVAL;
	}
	struct targets t = {0};
	targets_hosted(&t, APP_SERVICE_OMS);
	if (t.n == 0) {
		snprintf(err, cap, "not_hosted: no OMS shard on this node");
		return -ENOENT;
	}
	struct view_ctx v = {.view = user != 0 ? APP_VIEW_USER : APP_VIEW_USERS, .user = user,
			     .cursor = (uint32_t)from, .limit = (uint32_t)limit};
	return dispatch(req, &t, R_VIEWS, APP_CMD_VIEW, fill_view, &v, err, cap);
}

static int
user_admin(const struct mgmt_req *req, char *err, size_t cap, uint8_t op)
{
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {"user", NULL};
	uint64_t user;
	if (args_known(&a, names) != 0 || arg_u64(&a, "user", true, 1, UINT64_MAX, &user) != 0)
		return -EINVAL;
	struct targets t = {0};
	targets_oms(&t);
	struct wire_user_admin m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_USER_ADMIN, 0);
	m.user = user;
	m.op = op;
	struct propose_ctx p = {.msg = &m, .len = sizeof(m), .key = user};
	return mutate(req, &t, R_ANY_OK, &p, err, cap);
}

static int
h_users_evict(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
	      size_t cap)
{
	(void)ctx, (void)out;
	return user_admin(req, err, cap, 1);
}

/* users migrate --user U: quiesce, flush, evict (the user re-hydrates on its owner by the
 * routing). users migrate --user U --to S: a fenced move to OMS shard S — the user is pinned
 * to S (WHALE_PIN into every OMS shard, a new routing epoch); the old owner stops admitting
 * the user, drains it (flush, claim released in the database) and S hydrates it on its next
 * message: the move of docs/fencing.md, for one user. Unpin with routes unpin. */
static int
h_users_migrate(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
		size_t cap)
{
	(void)ctx, (void)out;
	uint64_t to = UINT64_MAX;
	if (mgmt_json_get_u64(req->json, req->args, "to", &to) == -ENOENT)
		return user_admin(req, err, cap, 2);
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {"user", "to", NULL};
	uint64_t user;
	if (args_known(&a, names) != 0 || arg_u64(&a, "user", true, 1, UINT64_MAX, &user) != 0 ||
	    arg_u64(&a, "to", true, 0, DP_SHARDS_MAX - 1, &to) != 0)
		return -EINVAL;
	if (!is_oms_shard((uint16_t)to)) {
		snprintf(err, cap, "bad_argument: shard %" PRIu64 " is not an OMS shard", to);
		return -EINVAL;
	}
	return pin_propose(req, user, (uint16_t)to, false, err, cap);
}

/* ---- shards scale ---- */

/* shards scale --shard N [--state receiving|active]: N joins the membership every OMS
 * shard applied (RECEIVING: HRW gives it no users yet; ACTIVE: new users hash to it and
 * the others drain theirs, docs/fencing.md), under the applied epoch + 1. Without --state:
 * receiving on every OMS shard, then active once all committed that. */
static int
h_shards_scale(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
	       size_t cap)
{
	(void)ctx, (void)out;
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {"shard", "state", NULL};
	uint64_t shard;
	char state[16] = "both";
	if (args_known(&a, names) != 0 || arg_u64(&a, "shard", true, 0, DP_SHARDS_MAX - 1, &shard))
		return -EINVAL;
	int rc = mgmt_json_get_str(req->json, req->args, "state", state, sizeof(state));
	if ((rc != 0 && rc != -ENOENT) ||
	    (rc == 0 && strcmp(state, "receiving") != 0 && strcmp(state, "active") != 0)) {
		snprintf(err, cap, "bad_argument: --state must be receiving or active");
		return -EINVAL;
	}
	uint16_t id = (uint16_t)shard;
	if (shards_check(&a, &id, 1, APP_SERVICE_OMS) != 0)
		return -EINVAL;
	static struct wire_routing_config m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_ROUTING_CONFIG, 0);
	m.shard_count = 1;
	m.shards[0] = (struct wire_route_shard){(uint16_t)shard,
		strcmp(state, "active") == 0 ? WIRE_SHARD_ACTIVE : WIRE_SHARD_RECEIVING, 0};
	struct targets t = {0};
	targets_oms(&t);
	targets_add(&t, (uint16_t)shard);
	struct propose_ctx p = {.msg = &m, .len = sizeof(m),
				.flags = APP_CMD_ROUTE_MERGE | APP_CMD_ROUTE_SCALE};
	if (strcmp(state, "both") != 0)
		return mutate(req, &t, R_MUTATION, &p, err, cap);
	/* Receiving everywhere first; active once every OMS shard committed that. */
	struct step2 *n = calloc(1, sizeof(*n));
	if (n == NULL) {
		snprintf(err, cap, "internal: out of memory");
		return -ENOMEM;
	}
	n->t = t;
	memcpy(n->msg, &m, sizeof(m));
	((struct wire_routing_config *)n->msg)->shards[0].state = WIRE_SHARD_ACTIVE;
	n->len = sizeof(m);
	n->flags = p.flags;
	return mutate2(req, &t, &p, n, err, cap);
}

/* ---- snapshot, transfer-leader ---- */

static int
h_snapshot(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)out;
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {"shard", NULL};
	uint64_t shard = UINT64_MAX;
	if (args_known(&a, names) != 0 ||
	    arg_u64(&a, "shard", false, 0, DP_SHARDS_MAX - 1, &shard) != 0)
		return -EINVAL;
	struct targets t = {0};
	if (shard != UINT64_MAX) {
		if (mgmt.app->shard_index[shard] < 0 ||
		    mgmt.app->cfg.shards[mgmt.app->shard_index[shard]].service == APP_SERVICE_ECHO) {
			snprintf(err, cap, "not_hosted: shard %" PRIu64 " is not on this node",
				 shard);
			return -ENOENT;
		}
		targets_add(&t, (uint16_t)shard);
	} else {
		targets_hosted(&t, -1);
	}
	return dispatch(req, &t, R_SNAPSHOT, APP_CMD_SNAPSHOT, fill_plain, NULL, err, cap);
}

static int
h_transfer_leader(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err,
		  size_t cap)
{
	(void)ctx, (void)out;
	struct margs a = MARGS(req, err, cap);
	static const char *const names[] = {"shard", "to", NULL};
	uint64_t shard, to;
	if (args_known(&a, names) != 0 ||
	    arg_u64(&a, "shard", true, 0, DP_SHARDS_MAX - 1, &shard) != 0 ||
	    arg_u64(&a, "to", true, 1, UINT32_MAX, &to) != 0)
		return -EINVAL;
	int idx = mgmt.app->shard_index[shard];
	if (idx < 0 || mgmt.app->cfg.shards[idx].service == APP_SERVICE_ECHO) {
		snprintf(err, cap, "not_hosted: shard %" PRIu64 " is not on this node", shard);
		return -ENOENT;
	}
	const struct app_shard_conf *sc = &mgmt.app->cfg.shards[idx];
	bool member = false;
	for (uint32_t i = 0; i < sc->member_count; i++)
		member = member || sc->members[i] == to;
	if (!member) {
		snprintf(err, cap, "bad_argument: node %" PRIu64 " is not a member of shard %" PRIu64,
			 to, shard);
		return -EINVAL;
	}
	struct targets t = {0};
	targets_add(&t, (uint16_t)shard);
	if (!all_led(&t))
		return reply_not_leader(req, &t);
	uint32_t target = (uint32_t)to;
	return dispatch(req, &t, R_TRANSFER, APP_CMD_TRANSFER, fill_plain, &target, err, cap);
}

/* The command table: one row per command (other views register theirs in app_mgmt_open). */
static const struct {
	const char *name;
	mgmt_handler_fn *fn;
	const char *help;
} shard_cmds[] = {
	{"symbols.list", h_symbols_list, "symbols of every shard here, with status and kill"},
	{"symbols.halt", h_symbols_halt, "--symbol S [--cancel-resting] [--me-shard M]: halt "
					 "(ME + OMS logs)"},
	{"symbols.resume", h_symbols_resume, "--symbol S [--me-shard M]: resume trading"},
	{"symbols.add", h_symbols_add, "--symbol S --base B --quote Q --me-shard M --tick T --lot "
				       "L --base-unit U [...]: add or update a symbol"},
	{"symbols.move", h_symbols_move, "--symbol S --to M [--from F]: move a symbol with an "
					 "empty book to ME shard M"},
	{"kill.user", h_kill_user, "--user U [--release]: kill-switch for one user"},
	{"kill.symbol", h_kill_symbol, "--symbol S [--release]: kill-switch for one symbol"},
	{"routes.show", h_routes_show, "the routing config each OMS shard here applied"},
	{"routes.set", h_routes_set, "--active 1,2 [--receiving 3] [--epoch N]: membership"},
	{"routes.pin", h_routes_pin, "--user U --shard N: pin a whale to an OMS shard"},
	{"routes.unpin", h_routes_unpin, "--user U: remove a whale pin"},
	{"users.show", h_users_show, "[--user U | --limit N --from C]: one user's actor, or "
				     "a page of the resident set, per OMS shard here"},
	{"users.evict", h_users_evict, "--user U: flush and evict when flat"},
	{"users.migrate", h_users_migrate, "--user U [--to N]: quiesce, flush, evict (re-hydrates "
					   "on its owner); with --to, a fenced move to OMS shard N (a pin)"},
	{"shards.scale", h_shards_scale, "--shard N [--state receiving|active]: add an OMS "
					 "shard (receiving, then active)"},
	{"snapshot", h_snapshot, "[--shard N]: take a snapshot now; answers its index"},
	{"transfer-leader", h_transfer_leader, "--shard N --to NODE: hand over leadership"},
};

int
app_mgmt_open(const struct app *app)
{
	const char *path = app->cfg.mgmt_socket;
	if (path[0] == '\0')
		return 0;
	mgmt.app = app;
	mgmt.result = malloc(RESULT_MAX);
	mgmt.reqs = calloc(APP_CMDS_MAX, sizeof(*mgmt.reqs));
	if (mgmt.result == NULL || mgmt.reqs == NULL) {
		app_mgmt_close();
		return -ENOMEM;
	}
	int rc = mgmt_server_open(&mgmt.srv, path, "omsd", 0660);
	if (rc < 0) {
		app_mgmt_close();
		return rc;
	}
	mgmt_register(mgmt.srv, "status", h_status, NULL, "node and per-shard Raft/service state");
	mgmt_register(mgmt.srv, "stats", h_stats, NULL, "every counter as a JSON object");
	mgmt_register(mgmt.srv, "metrics", h_metrics, NULL, "every counter as Prometheus text");
	app_views_register(mgmt.srv); /* members, lcores */
	for (size_t i = 0; i < sizeof(shard_cmds) / sizeof(shard_cmds[0]); i++)
		mgmt_register(mgmt.srv, shard_cmds[i].name, shard_cmds[i].fn, NULL,
			      shard_cmds[i].help);
	APP_LOG(INFO, "control socket %s", path);
	return 0;
}

/* Serve the socket for at most timeout_ms; returns at once when there is nothing to do
 * and no socket. */
void
app_mgmt_poll(int timeout_ms)
{
	if (mgmt.srv == NULL)
		return;
	/* Answers that came back while we waited go out before new requests are read. */
	collect();
	mgmt_poll(mgmt.srv, mgmt.cmds_out > 0 ? RTE_MIN(timeout_ms, 2) : timeout_ms);
	collect();
}

void
app_mgmt_close(void)
{
	/* Called once the shard lcores stopped: take back what they answered; what they still
	 * hold is freed by app_shard_fini (at_shard). */
	if (mgmt.reqs != NULL && mgmt.app != NULL && mgmt.app->mgmt_done != NULL) {
		struct app_cmd *c;
		while (rte_ring_sc_dequeue(mgmt.app->mgmt_done, (void **)&c) == 0)
			c->at_shard = false;
	}
	if (mgmt.reqs != NULL)
		for (uint32_t i = 0; i < APP_CMDS_MAX; i++)
			if (mgmt.reqs[i].used)
				mreq_free(&mgmt.reqs[i]);
	free(mgmt.reqs);
	mgmt.reqs = NULL;
	free(mgmt.result);
	mgmt.result = NULL;
	mgmt_server_close(mgmt.srv);
	mgmt.srv = NULL;
}

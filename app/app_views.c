/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Read-only views of a running node: lcores, members and lag, and the metrics as
 * Prometheus text. The control socket (app_mgmt.c), the DPDK telemetry commands
 * (app_telemetry.c) and the HTTP listener (app_http.c) all render from here.
 *
 * Everything is read from what the lcores publish (relaxed single-writer atomics, the
 * counters app_stats_write prints, the shard lcores' app_shard_pub, rte_ring_count): no view
 * ever touches hot-lcore state or stops an lcore. A view context (buffers) belongs to one
 * thread at a time: the main lcore has its own, the telemetry thread another.
 *
 * Busy % and sleep rates need two samples: the main lcore takes one per agent every
 * VIEW_WINDOW_NS (app_views_tick) and publishes the window's figures as relaxed atomics.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ring.h>

#include "app_views.h"
#include "consensus/cns.h"
#include "mgmt/mgmt.h"

#define VIEW_TEXT_MAX (512 * 1024)      /* the counters as "name value" lines */
#define VIEW_SAMPLES_MAX 8192            /* counters of a node */
#define VIEW_WINDOW_NS (1000ull * 1000000) /* busy % window */
#define VIEW_RINGS_MAX 20                /* rings one lcore reads */
#define VIEW_NS_PER_S 1000000000ull      /* the histograms count ns; metrics are in s */

struct view_sample {
	char family[96];   /* Prometheus metric name (mgmt_prom_conventions applied) */
	char labels[256];  /* node="1",shard="1" */
	char value[48];    /* as printed, in the base unit */
	uint32_t order;    /* position in the dump (stable sort) */
	uint32_t name_off; /* the stats name: offset in app_view_ctx.text */
	uint16_t name_len; /* and its length */
	uint8_t type;      /* enum mgmt_prom_type */
	uint64_t per_unit; /* raw values per base unit (1: none) */
};

struct app_view_ctx {
	char *text;                     /* VIEW_TEXT_MAX */
	size_t len;
	struct view_sample *samples;    /* VIEW_SAMPLES_MAX */
	uint32_t count;
};

/* Per agent: the rings it takes work from, and the last window. */
struct view_agent {
	struct rte_ring *rings[VIEW_RINGS_MAX];
	uint32_t ring_count;
	uint64_t prev_busy_ns;          /* main lcore only */
	uint64_t prev_sleeps;
	uint64_t busy_permille;         /* published: busy time / wall time, last window */
	uint64_t sleeps_per_s;          /* published */
};

static struct {
	const struct app *app;
	struct view_agent agents[APP_AGENTS_MAX];
	uint64_t window_start_ns;       /* main lcore */
	struct app_view_ctx *main_ctx;  /* the main lcore's */
	app_views_extra_fn *extra;      /* more "name value" lines (HTTP listener stats) */
} views;

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define PUB(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* Stats names → Prometheus labels: the token after each key becomes a label. */
static const char *const label_keys[] = {
	"shard", "shard", "agent", "lcore", "member", "member", "asset", "asset",
	"nak", "reason", "frame_err", "cause", "txq", "txq", "http", "code", "rxq", "queue", "txport", "queue", NULL,
};

/* The stats that are gauges (a value now, which may go down), by their family as
 * mgmt_prom_name makes it (the stats name with ids lifted into labels, before the naming
 * conventions); every other numeric stat is a counter (only goes up from 0 at start). */
static const char *const gauges[] = {
	"omsd_node_id", "omsd_uptime_ms",
	/* Raft, as the shard lcore published it. */
	"omsd_shard_is_leader", "omsd_shard_ready", "omsd_shard_leader", "omsd_shard_term",
	"omsd_shard_commit", "omsd_shard_applied", "omsd_shard_last_index",
	"omsd_shard_member_match", "omsd_shard_member_lag",
	/* Leadership placement: the preferred leader now, and whether it leads. */
	"omsd_shard_preferred_leader", "omsd_shard_placed",
	/* OMS and ME state now. */
	"omsd_shard_route_epoch", "omsd_shard_inflight", "omsd_shard_resident",
	"omsd_shard_resting", "omsd_shard_asset_sum", "omsd_shard_asset_fees",
	"omsd_shard_sagas_pending", "omsd_shard_sagas_old", "omsd_shard_saga_oldest_age_ms",
	"omsd_shard_parked_now", "omsd_shard_cache_idle", "omsd_shard_cache_open",
	"omsd_shard_cache_inflight", "omsd_shard_cache_flushing", "omsd_shard_cache_hydrating",
	"omsd_shard_cache_waiting", "omsd_shard_cache_cap", "omsd_shard_me_bulk_pending",
	/* The file log's writer: where it runs, the bytes waiting, its longest append. */
	"omsd_shard_flog_on_persister", "omsd_shard_flog_queued_bytes",
	"omsd_shard_flog_sync_max_ns",
	/* Snapshot children: the longest fork (the shard lcore's stall) and serialisation;
	 * the shadow copy's longest serialisation and the most it fell behind. */
	"omsd_shard_snapshot_fork_max_ns", "omsd_shard_snapshot_child_max_ns",
	"omsd_shard_snapshot_shadow_max_ns", "omsd_shard_shadow_lag_max_bytes",
	/* lcores: the longest cycle and the last window's figures. */
	"omsd_agent_max_cycle_ns", "omsd_agent_busy_permille", "omsd_agent_ring_used",
	"omsd_agent_ring_size", "omsd_agent_sleeps_per_s",
	/* The gateway's sessions open now, and the span its latency record covers. */
	"omsd_gateway_sessions_active", "omsd_gateway_lat_span_ns",
	/* [gateway]: it runs on an lcore of its own, and the routing epoch of its copy. */
	"omsd_gateway_lcore", "omsd_gateway_route_epoch",
	/* The port computes the checksums of what it sends (1) or the io lcore does (0). */
	"omsd_dp_tx_csum_offload",
	/* The persister's connection and the frames it holds back now. */
	"omsd_persister_connected", "omsd_persister_held_frames",
};

/* Latency histogram bounds, ns (rendered in seconds): 1-2-5 from 1 µs to 10 s. */
static const uint64_t lat_bounds[] = {
	1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000, 2000000,
	5000000, 10000000, 20000000, 50000000, 100000000, 200000000, 500000000, 1000000000,
	2000000000, 5000000000, 10000000000,
};

static void
ring_add(struct view_agent *va, const char *fmt, unsigned id)
{
	char name[RTE_RING_NAMESIZE];
	snprintf(name, sizeof(name), fmt, id);
	struct rte_ring *r = rte_ring_lookup(name);
	if (r != NULL && va->ring_count < VIEW_RINGS_MAX)
		va->rings[va->ring_count++] = r;
}

struct app_view_ctx *
app_view_ctx_new(void)
{
	struct app_view_ctx *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->text = malloc(VIEW_TEXT_MAX);
	c->samples = malloc(sizeof(*c->samples) * VIEW_SAMPLES_MAX);
	if (c->text == NULL || c->samples == NULL) {
		app_view_ctx_free(c);
		return NULL;
	}
	return c;
}

void
app_view_ctx_free(struct app_view_ctx *c)
{
	if (c == NULL)
		return;
	free(c->text);
	free(c->samples);
	free(c);
}

int
app_views_open(const struct app *app, app_views_extra_fn *extra)
{
	views.app = app;
	views.extra = extra;
	views.main_ctx = app_view_ctx_new();
	if (views.main_ctx == NULL)
		return -ENOMEM;
	/* The rings each lcore drains: named at creation, looked up once here. */
	for (uint32_t i = 0; i < app->agent_count; i++) {
		const struct app_agent *a = &app->agents[i];
		struct view_agent *va = &views.agents[i];
		if (a->role == APP_ROLE_IO) {
			/* Each io lcore drains its share of the tx queues (frames the other lcores
			 * want sent; dataplane/dp_io.c), io lcore k being agent k. */
			for (uint32_t q = 0; q < dp_txq_count(app->dp); q++) {
				uint16_t k;
				struct rte_ring *r = dp_txq_ring(app->dp, q, &k);
				if (k == i && va->ring_count < VIEW_RINGS_MAX)
					va->rings[va->ring_count++] = r;
			}
		} else if (a->role == APP_ROLE_GATEWAY) {
			ring_add(va, "gateway_rx", 0);
			ring_add(va, "gateway_local", 0);
		} else if (a->role == APP_ROLE_BRIDGE) {
			ring_add(va, "bridge_seal", 0); /* the frames it seals */
		} else if (a->role == APP_ROLE_SHARD) {
			unsigned id;
			if (sscanf(a->name, "shard%u", &id) == 1) {
				ring_add(va, "shard%u_rx", id);
				ring_add(va, "shard%u_local", id);
			}
		} else if (a->role == APP_ROLE_PERSISTER) {
			struct rte_ring *r = app_persist_ring(app);
			if (r != NULL)
				va->rings[va->ring_count++] = r;
		}
	}
	views.window_start_ns = 0;
	return 0;
}

void
app_views_close(void)
{
	app_view_ctx_free(views.main_ctx);
	views.main_ctx = NULL;
	views.app = NULL;
}

struct app_view_ctx *
app_views_main_ctx(void)
{
	return views.main_ctx;
}

void
app_views_tick(uint64_t now_ns)
{
	const struct app *app = views.app;
	if (app == NULL)
		return;
	if (views.window_start_ns == 0) {
		views.window_start_ns = now_ns;
		for (uint32_t i = 0; i < app->agent_count; i++) {
			views.agents[i].prev_busy_ns = LOAD(app->agents[i].duty.busy_ns);
			views.agents[i].prev_sleeps = LOAD(app->agents[i].idle.sleeps);
		}
		return;
	}
	uint64_t wall = now_ns - views.window_start_ns;
	if (wall < VIEW_WINDOW_NS)
		return;
	for (uint32_t i = 0; i < app->agent_count; i++) {
		struct view_agent *va = &views.agents[i];
		uint64_t busy = LOAD(app->agents[i].duty.busy_ns);
		uint64_t sleeps = LOAD(app->agents[i].idle.sleeps);
		uint64_t pm = (busy - va->prev_busy_ns) * 1000 / wall;
		PUB(va->busy_permille, pm > 1000 ? 1000 : pm);
		PUB(va->sleeps_per_s, (sleeps - va->prev_sleeps) * 1000000000ull / wall);
		va->prev_busy_ns = busy;
		va->prev_sleeps = sleeps;
	}
	views.window_start_ns = now_ns;
}

uint32_t
app_views_lcores(const struct app *app, struct app_view_lcore *out, uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < app->agent_count && n < max; i++, n++) {
		const struct app_agent *a = &app->agents[i];
		const struct view_agent *va = &views.agents[i];
		struct app_view_lcore *l = &out[n];
		memset(l, 0, sizeof(*l));
		snprintf(l->name, sizeof(l->name), "%s", a->name);
		l->lcore = a->lcore_id;
		l->cpu = a->cpu;
		l->role = app_roles[a->role].name;
		l->idle = dp_idle_mode_name(a->idle.policy.mode);
		l->busy_permille = LOAD(va->busy_permille);
		l->cycles = LOAD(a->duty.cycles);
		l->work_cycles = LOAD(a->duty.work_cycles);
		l->work_items = LOAD(a->duty.work_items);
		l->busy_ns = LOAD(a->duty.busy_ns);
		l->max_cycle_ns = LOAD(a->duty.max_ns);
		l->over_threshold = LOAD(a->duty.over_count);
		l->sleeps = LOAD(a->idle.sleeps);
		l->sleeps_per_s = LOAD(va->sleeps_per_s);
		for (uint32_t k = 0; k < va->ring_count; k++) {
			l->ring_used += rte_ring_count(va->rings[k]);
			l->ring_size += rte_ring_get_capacity(va->rings[k]);
		}
	}
	return n;
}

/* ---------------------------------------------------------------------------------------
 * Control-socket commands.
 * ------------------------------------------------------------------------------------- */

/* key + an already formatted JSON number. */
static void
kv_raw(struct mgmt_out *o, const char *key, const char *number)
{
	mgmt_out_key(o, key);
	mgmt_out_raw(o, number);
	o->need_comma = true;
}

static void
kv_pct(struct mgmt_out *o, const char *key, uint64_t permille)
{
	char b[32];
	snprintf(b, sizeof(b), "%" PRIu64 ".%" PRIu64, permille / 10, permille % 10);
	kv_raw(o, key, b);
}

static int
h_lcores(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)req, (void)err, (void)cap;
	struct app_view_lcore ls[APP_AGENTS_MAX];
	uint32_t n = app_views_lcores(views.app, ls, APP_AGENTS_MAX);
	mgmt_out_obj_begin(out);
	mgmt_out_key(out, "lcores");
	mgmt_out_arr_begin(out);
	for (uint32_t i = 0; i < n; i++) {
		const struct app_view_lcore *l = &ls[i];
		mgmt_out_obj_begin(out);
		mgmt_out_kv_str(out, "name", l->name);
#define KV_U64(f) mgmt_out_kv_u64(out, #f, l->f);
#define KV_STR(f) mgmt_out_kv_str(out, #f, l->f);
		APP_VIEW_LCORE_HEAD(KV_U64, KV_STR)
		kv_pct(out, "busy_pct", l->busy_permille);
		APP_VIEW_LCORE_COUNTS(KV_U64)
#undef KV_STR
#undef KV_U64
		mgmt_out_obj_end(out);
	}
	mgmt_out_arr_end(out);
	mgmt_out_obj_end(out);
	return 0;
}

static int
h_members(void *ctx, const struct mgmt_req *req, struct mgmt_out *out, char *err, size_t cap)
{
	(void)ctx, (void)req, (void)err, (void)cap;
	const struct app *app = views.app;
	mgmt_out_obj_begin(out);
	mgmt_out_kv_u64(out, "node", app->cfg.dp.node_id);
	mgmt_out_key(out, "members");
	mgmt_out_arr_begin(out);
	for (uint32_t i = 0; i < app->cfg.shard_count; i++) {
		struct app_shard_pub p;
		if (app_shard_pub_read(app, i, &p) != 0)
			continue;
		bool leader = p.role == CNS_LEADER;
		for (uint32_t m = 0; m < p.member_count; m++) {
			mgmt_out_obj_begin(out);
			mgmt_out_kv_u64(out, "shard", p.id);
			mgmt_out_kv_u64(out, "node", p.members[m]);
			mgmt_out_kv_bool(out, "self", p.members[m] == app->cfg.dp.node_id);
			mgmt_out_kv_bool(out, "leader", p.members[m] == p.leader);
			mgmt_out_kv_u64(out, "term", p.term);
			/* Match and lag are known on the leader only. */
			if (leader && p.match[m] != UINT64_MAX) {
				mgmt_out_kv_u64(out, "match", p.match[m]);
				mgmt_out_kv_u64(out, "lag", p.last > p.match[m] ? p.last - p.match[m] : 0);
			} else {
				mgmt_out_key(out, "match");
				mgmt_out_null(out);
				mgmt_out_key(out, "lag");
				mgmt_out_null(out);
			}
			/* The configuration in effect: voters and learners (omsctl members add,
			 * promote, remove), its entry and whether that committed. */
			mgmt_out_kv_str(out, "role", (p.learners & (1u << m)) ? "learner" : "voter");
			mgmt_out_kv_u64(out, "config_index", p.config_index);
			mgmt_out_kv_bool(out, "config_committed", p.commit >= p.config_index);
			/* Leadership placement: the member that should lead. */
			mgmt_out_kv_bool(out, "preferred", p.members[m] == p.place_pref);
			mgmt_out_obj_end(out);
		}
	}
	mgmt_out_arr_end(out);
	mgmt_out_obj_end(out);
	return 0;
}

void
app_views_status_shard(struct mgmt_out *o, uint16_t shard_id)
{
	const struct app *app = views.app;
	if (app == NULL || app->shard_index[shard_id] < 0)
		return;
	struct app_shard_pub p;
	if (app_shard_pub_read(app, (uint32_t)app->shard_index[shard_id], &p) != 0)
		return;
	mgmt_out_kv_u64(o, "last_index", p.last);
	mgmt_out_kv_u64(o, "elections", p.elections);
	/* Leadership placement: the preferred leader (null: none), whether it leads, and the
	 * last check's verdict (docs/appliance.md "Leadership placement"). */
	mgmt_out_key(o, "preferred_leader");
	if (p.place_pref == 0)
		mgmt_out_null(o);
	else
		mgmt_out_u64(o, p.place_pref);
	mgmt_out_key(o, "placed");
	if (p.place_pref == 0)
		mgmt_out_null(o);
	else
		mgmt_out_bool(o, p.place_pref == p.leader);
	mgmt_out_kv_str(o, "placement",
			app_place_verdict_name((enum app_place_verdict)p.place_verdict));
	/* Lag per member (leader only; null elsewhere): {"node": entries behind}. */
	mgmt_out_key(o, "lag");
	if (p.role != CNS_LEADER) {
		mgmt_out_null(o);
		return;
	}
	mgmt_out_obj_begin(o);
	for (uint32_t m = 0; m < p.member_count; m++) {
		char node[16];
		snprintf(node, sizeof(node), "%u", p.members[m]);
		if (p.match[m] == UINT64_MAX)
			continue;
		mgmt_out_kv_u64(o, node, p.last > p.match[m] ? p.last - p.match[m] : 0);
	}
	mgmt_out_obj_end(o);
}

void
app_views_register(struct mgmt_server *srv)
{
	mgmt_register(srv, "members", h_members, NULL,
		      "Raft members of every hosted shard: leader, match index and lag");
	mgmt_register(srv, "lcores", h_lcores, NULL,
		      "lcores: role, CPU, busy %, idle back-off, ring occupancy, duty cycle");
}

/* ---------------------------------------------------------------------------------------
 * Metrics.
 * ------------------------------------------------------------------------------------- */

/* Lines the stats dump does not have: window figures and ring occupancy per lcore. */
static void
extra_write(const struct app *app, FILE *f)
{
	struct app_view_lcore ls[APP_AGENTS_MAX];
	uint32_t n = app_views_lcores(app, ls, APP_AGENTS_MAX);
	for (uint32_t i = 0; i < n; i++) {
		fprintf(f, "agent.%s.busy_permille %" PRIu64 "\n", ls[i].name, ls[i].busy_permille);
		fprintf(f, "agent.%s.sleeps_per_s %" PRIu64 "\n", ls[i].name, ls[i].sleeps_per_s);
		fprintf(f, "agent.%s.ring_used %" PRIu64 "\n", ls[i].name, ls[i].ring_used);
		fprintf(f, "agent.%s.ring_size %" PRIu64 "\n", ls[i].name, ls[i].ring_size);
	}
	if (views.extra != NULL)
		views.extra(f);
	app_mgmt_stats_write(f);
}

int
app_view_read(struct app_view_ctx *c, const struct app *app, bool extra)
{
	if (c == NULL)
		return -ENOMEM; /* app_views_open failed: no buffers */
	FILE *f = fmemopen(c->text, VIEW_TEXT_MAX - 1, "w");
	if (f == NULL)
		return -errno;
	app_stats_write(app, f);
	if (extra)
		extra_write(app, f);
	long n = ftell(f);
	fclose(f);
	if (n < 0)
		return -EIO;
	c->len = (size_t)n;
	c->text[c->len] = '\0';
	return 0;
}

void
app_view_each(struct app_view_ctx *c, app_view_each_fn *fn, void *arg)
{
	char *p = c->text, *end = c->text + c->len;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		*nl = '\0';
		char *sp = strchr(p, ' ');
		if (p[0] != '#' && sp != NULL) {
			*sp = '\0';
			fn(arg, p, sp + 1);
			*sp = ' ';
		}
		*nl = '\n';
		p = nl + 1;
	}
}

bool
app_view_is_integer(const char *s)
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

struct collect {
	struct app_view_ctx *c;
	const char *node_label;
	uint32_t dropped;        /* names that did not map */
};

/* A line that is one field of a histogram (app_hist_lines: shard.1.lat.ingress_ack.p99_ns;
 * hist_write: gateway.lat_rx_ack_ns.p50): the histograms go out whole as summaries, below. */
static bool
hist_field(const char *name)
{
	return strstr(name, ".lat.") != NULL || strstr(name, "_ns.") != NULL;
}

static enum mgmt_prom_type
stat_type(const char *family)
{
	for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++)
		if (strcmp(family, gauges[i]) == 0)
			return MGMT_PROM_GAUGE;
	return MGMT_PROM_COUNTER;
}

/* A decimal integer of the stats text in the metric's base unit: "12345" ns → "0.000012345"
 * s. 0 or -ENOSPC. */
static int
value_scaled(char *out, size_t cap, const char *value, uint64_t per_unit)
{
	if (per_unit == 1) {
		int n = snprintf(out, cap, "%s", value);
		return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
	}
	size_t neg = value[0] == '-' ? 1 : 0; /* a negative value keeps its sign */
	if (neg)
		out[0] = '-';
	uint64_t v = strtoull(value + neg, NULL, 10);
	return mgmt_prom_decimal(out + neg, cap - neg, v, per_unit) < 0 ? -ENOSPC : 0;
}

static void
collect_one(void *arg, const char *name, const char *value)
{
	struct collect *k = arg;
	struct app_view_ctx *c = k->c;
	if (strncmp(name, "dp.arp.", 7) == 0 || hist_field(name))
		return; /* the ARP table is not a metric */
	if (c->count == VIEW_SAMPLES_MAX) {
		k->dropped++;
		return;
	}
	struct view_sample *s = &c->samples[c->count];
	char labels[128];
	/* Room for what the conventions add (_total, seconds for ns, _not_ours, _info). */
	if (mgmt_prom_name(name, label_keys, s->family, sizeof(s->family) - 24, labels,
			   sizeof(labels)) != 0) {
		k->dropped++;
		return;
	}
	bool number = app_view_is_integer(value);
	enum mgmt_prom_type type = number ? stat_type(s->family) : MGMT_PROM_INFO;
	if (mgmt_prom_conventions(s->family, sizeof(s->family), type, &s->per_unit) != 0) {
		k->dropped++;
		return;
	}
	int n;
	if (number) {
		if (value_scaled(s->value, sizeof(s->value), value, s->per_unit) != 0) {
			k->dropped++;
			return;
		}
		n = snprintf(s->labels, sizeof(s->labels), "%s%s%s", k->node_label,
			     labels[0] ? "," : "", labels);
	} else {
		/* A text value (role, service): an info metric with the text as a label. */
		char v[64];
		size_t j = 0;
		for (const char *q = value; *q != '\0' && j + 2 < sizeof(v); q++)
			if (*q != '"' && *q != '\\' && *q != ' ')
				v[j++] = *q;
		v[j] = '\0';
		snprintf(s->value, sizeof(s->value), "1");
		n = snprintf(s->labels, sizeof(s->labels), "%s%s%s,value=\"%s\"", k->node_label,
			     labels[0] ? "," : "", labels, v);
	}
	if (n < 0 || (size_t)n >= sizeof(s->labels)) {
		k->dropped++;
		return;
	}
	s->type = (uint8_t)type;
	s->name_off = (uint32_t)(name - c->text);
	s->name_len = (uint16_t)strlen(name);
	s->order = c->count;
	c->count++;
}

static int
sample_cmp(const void *a, const void *b)
{
	const struct view_sample *x = a, *y = b;
	int r = strcmp(x->family, y->family);
	if (r != 0)
		return r;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* HELP and TYPE of the family of sample s: the stats line it comes from, with its ids as
 * <label>, and the divisor that took it to the base unit. */
static void
family_write(struct mgmt_out *o, const struct app_view_ctx *c, const struct view_sample *s)
{
	static const char *const types[] = {
		[MGMT_PROM_COUNTER] = "counter", [MGMT_PROM_GAUGE] = "gauge",
		[MGMT_PROM_INFO] = "gauge",
	};
	char stat[160], help[256];
	if (mgmt_prom_pattern(c->text + s->name_off, s->name_len, label_keys, stat,
			      sizeof(stat)) != 0)
		snprintf(stat, sizeof(stat), "%.*s", (int)s->name_len, c->text + s->name_off);
	const char *where = "(omsctl stats; docs/appliance.md)";
	if (s->type == MGMT_PROM_INFO)
		snprintf(help, sizeof(help), "omsd stat %s, a text, as its label value %s", stat,
			 where);
	else if (s->per_unit != 1)
		snprintf(help, sizeof(help), "omsd stat %s / %" PRIu64 " %s", stat, s->per_unit,
			 where);
	else
		snprintf(help, sizeof(help), "omsd stat %s %s", stat, where);
	mgmt_prom_family(o, s->family, types[s->type], help);
}

/* One family's samples: per OMS shard and path, a summary or (hist) a histogram; h is the
 * caller's scratch histogram. */
static void
latency_samples(struct mgmt_out *o, const struct app *app, const char *node_label,
		struct hist *h, bool hist)
{
	static const char *const paths[2] = {"ingress_ack", "order_final"};
	const char *family = hist ? "omsd_latency_hist_seconds" : "omsd_latency_seconds";
	for (int pi = 0; pi < 2; pi++) {
		for (uint32_t i = 0; i < app->cfg.shard_count; i++) {
			if (app->cfg.shards[i].service != APP_SERVICE_OMS)
				continue;
			app_shard_latency(app, i, pi == 0 ? h : NULL, pi == 1 ? h : NULL);
			char labels[96];
			snprintf(labels, sizeof(labels), "%s,shard=\"%u\",path=\"%s\"", node_label,
				 app->cfg.shards[i].id, paths[pi]);
			if (hist)
				mgmt_prom_histogram(o, family, labels, h, lat_bounds,
						    (uint32_t)(sizeof(lat_bounds) / sizeof(lat_bounds[0])),
						    VIEW_NS_PER_S);
			else
				mgmt_prom_summary(o, family, labels, h, VIEW_NS_PER_S);
		}
	}
}

int
app_metrics_write(struct app_view_ctx *c, const struct app *app, struct mgmt_out *o)
{
	int rc = app_view_read(c, app, true);
	if (rc < 0)
		return rc;
	char node_label[32];
	snprintf(node_label, sizeof(node_label), "node=\"%u\"", app->cfg.dp.node_id);
	struct collect k = {.c = c, .node_label = node_label};
	c->count = 0;
	app_view_each(c, collect_one, &k);
	qsort(c->samples, c->count, sizeof(c->samples[0]), sample_cmp);
	/* One HELP/TYPE per family, its samples together (text format 0.0.4). */
	for (uint32_t i = 0; i < c->count; i++) {
		const struct view_sample *s = &c->samples[i];
		if (i == 0 || strcmp(s->family, c->samples[i - 1].family) != 0)
			family_write(o, c, s);
		char line[420];
		snprintf(line, sizeof(line), "%s{%s} %s\n", s->family, s->labels, s->value);
		mgmt_out_raw(o, line);
	}
	/* Latency of client requests on each OMS shard this node leads (or led). */
	struct hist *h = malloc(sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	mgmt_prom_family(o, "omsd_latency_seconds", "summary",
			 "client request latency on the OMS shard leader, seconds: "
			 "path=ingress_ack (proposed to ACK emitted), path=order_final (an order "
			 "proposed to the report that settles it after the ME: OPEN, or its last)");
	latency_samples(o, app, node_label, h, false);
	mgmt_prom_family(o, "omsd_latency_hist_seconds", "histogram",
			 "the same latencies as cumulative buckets, seconds");
	latency_samples(o, app, node_label, h, true);
	/* The gateway's RX → client egress latency of new orders (app_lat.c), on the node
	 * that has the gateway. */
	const struct app_lat *gw = app_shard_lat(app);
	if (gw != NULL) {
		mgmt_prom_family(o, "omsd_gateway_latency_seconds", "summary",
				 "new orders from the io lcore's RX to the gateway handing the "
				 "answer to the client's frame, seconds: path=rx_ack (the "
				 "provisional ACK), path=rx_final (OPEN, DONE or REJECTED after "
				 "the ME)");
		for (int pi = 0; pi < 2; pi++) {
			memcpy(h, pi == 0 ? &gw->ack : &gw->final, sizeof(*h));
			char labels[96];
			snprintf(labels, sizeof(labels), "%s,path=\"%s\"", node_label,
				 pi == 0 ? "rx_ack" : "rx_final");
			mgmt_prom_summary(o, "omsd_gateway_latency_seconds", labels, h,
					  VIEW_NS_PER_S);
		}
	}
	/* The hot-user cache (docs/oms.md "Observability"): its stages in the OMS state, and
	 * the persister's split of each request kind into its queue and PostgreSQL. */
	mgmt_prom_family(o, "omsd_cache_latency_seconds", "summary",
			 "hot-user cache, cluster time in seconds, per OMS shard: stage=park "
			 "(first parked message to install), hydrate (HYDRATE_REQUEST to "
			 "install), writeback, evict (BEGIN_DEHYDRATE to the answer / the drop)");
	for (uint32_t i = 0; i < app->cfg.shard_count; i++) {
		if (app->cfg.shards[i].service != APP_SERVICE_OMS)
			continue;
		for (unsigned st = 0; st < APP_CACHE_STAGES; st++) {
			(void)app_shard_cache_hist(app, i, st, h);
			char labels[96];
			snprintf(labels, sizeof(labels), "%s,shard=\"%u\",stage=\"%s\"", node_label,
				 app->cfg.shards[i].id, app_cache_stage_names[st]);
			mgmt_prom_summary(o, "omsd_cache_latency_seconds", labels, h,
					  VIEW_NS_PER_S);
		}
	}
	/* Without a database the family is there, empty (count 0): requests are answered
	 * inline, and a dashboard's query finds its series either way. */
	mgmt_prom_family(o, "omsd_persister_latency_seconds", "summary",
			 "persister requests, seconds: kind=hydrate|flush|release|lookup, "
			 "part=queue (submitted to sent) or db (sent to PostgreSQL's answer)");
	for (unsigned k = 1; k <= 4; k++) {
		for (unsigned part = 0; part < 2; part++) {
			(void)app_persist_hist(app, k, part, h);
			char labels[96];
			snprintf(labels, sizeof(labels), "%s,kind=\"%s\",part=\"%s\"", node_label,
				 app_persist_kind_names[k], part == 0 ? "queue" : "db");
			mgmt_prom_summary(o, "omsd_persister_latency_seconds", labels, h,
					  VIEW_NS_PER_S);
		}
	}
	free(h);
	if (k.dropped > 0) {
		mgmt_prom_family(o, "omsd_metrics_unmapped", "gauge",
				 "stats left out of this rendering (name too long, too many, or no "
				 "Prometheus name under the conventions)");
		mgmt_prom_sample(o, "omsd_metrics_unmapped", node_label, k.dropped);
	}
	return o->overflow ? -E2BIG : 0;
}

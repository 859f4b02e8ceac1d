/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Set-up and tear-down of a shard lcore (app_shard_int.h), on the main lcore before the
 * lcores start and after they stop: the rings the wiring hands it, the service, consensus
 * and log in memory sized from [limits] (nothing is allocated after start), the durable file
 * log loaded back in durable mode, and the callbacks consensus calls (log store, service
 * adapter, sink, host). Everything else the lcore does is in the files this one wires.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_ring.h>

#include "app_shard_int.h"
#include "common/check.h"
#include "me/me.h"
#include "oms/oms.h"

static void
limits_oms(const struct app_config *cfg, uint16_t id, struct oms_limits *l)
{
	oms_limits_default(l);
	l->shard_id = id;
	l->me_shards_max = DP_SHARDS_MAX;
	l->users_max = (uint32_t)cfg->resident_users_max;
	l->orders_max = (uint32_t)cfg->orders_max;
	l->inflight_max = (uint32_t)RTE_MIN(cfg->inflight_sagas_max, cfg->orders_max);
	l->parked_max = (uint32_t)cfg->parked_orders_max;
	/* Admission (docs/oms.md "Admission"): cold users beyond the cap wait, the idle tail is
	 * evicted for them, evictions_in_flight flushes at a time (each holds a headroom slot
	 * and a place among the answers awaited, releases_max). */
	l->wait_max = (uint32_t)cfg->waiting_users_max;
	l->admit_wait_ns = cfg->admit_wait_ms * 1000000;
	l->flush_headroom = (uint32_t)cfg->evictions_max;
	/* The drain visits actor slots, resident or not: its pass over the slab must not grow
	 * with the headroom and the waiting places, or users routing moved away stay on the
	 * old shard for tens of sweeps (a pass takes at most four sweeps). */
	l->drain_scan_max = RTE_MAX(l->drain_scan_max,
				    (uint32_t)((l->users_max + l->flush_headroom + l->wait_max) / 4));
	l->dedup_per_user = (uint32_t)cfg->dedup_per_user; /* [limits] dedup_per_user */
	l->symbols_max = APP_SYMBOLS_MAX;
	l->ttl_ns = cfg->user_ttl_ms * 1000000;
	l->sweep_interval_ns = cfg->sweep_ms * 1000000;
	l->sweep_evict_max = (uint32_t)cfg->sweep_evict_max;
	l->sweep_scan_max = RTE_MAX(l->sweep_scan_max, 4 * l->sweep_evict_max);
	l->reconcile_interval_ns = cfg->reconcile_ms * 1000000;
	/* Write-back of dirty resident users ([timers] flush_ms, docs/oms.md): a pass starts
	 * at most writeback_max flushes, within the room releases_max leaves for answers. */
	l->writeback_interval_ns = cfg->flush_ms * 1000000;
	l->writeback_max = (uint32_t)cfg->writeback_max;
	l->releases_max = RTE_MAX(l->releases_max,
				  l->writeback_max + l->sweep_evict_max + l->flush_headroom);
}

static void
limits_me(const struct app_config *cfg, uint16_t id, struct me_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->shard = id;
	l->streams_max = 16;
	l->symbols_max = APP_SYMBOLS_MAX;
	l->orders_max = (uint32_t)cfg->orders_max;
	l->users_max = (uint32_t)RTE_MIN(cfg->orders_max, cfg->resident_users_max);
	l->levels_max = (uint32_t)RTE_MAX(UINT64_C(1024), cfg->orders_max / 4);
	l->levels_side_max = l->levels_max / 2;
	l->gtd_max = (uint32_t)RTE_MAX(UINT64_C(256), cfg->orders_max / 4);
	/* [limits] me_events; the reserve left to client requests scales with it, within the
	 * bounds me_init asks (more than two match steps, less than the ring). */
	l->events_max = (uint32_t)cfg->me_events_max;
	l->events_reserve = (uint32_t)RTE_MIN(UINT64_C(256), RTE_MAX(UINT64_C(16),
								cfg->me_events_max / 32));
	/* The ME contract's dedup window ([limits] dedup_window_ms, checked against the
	 * re-drive and election timers by the loader). */
	l->dedup_ttl_ns = cfg->dedup_window_ms * 1000000;
}

/* Frames must fit the MTU: AppendEntries carry one entry when a full tail does not fit, and
 * InstallSnapshot chunks are cut to the frame. */
static void
cns_conf(const struct app *app, const struct app_shard *s, uint32_t frame_cap,
	 struct cns_config *cc)
{
	const struct app_config *cfg = &app->cfg;
	cns_config_default(cc, s->id, s->self, s->conf->member_count, s->conf->members);
	if (s->conf->joining)
		cc->flags |= CNS_CFG_JOIN; /* a leader adds it; the log says who the members are */
	cc->durability = CNS_DURABLE_MEMORY;
	cc->election_timeout_min_ns = cfg->election_ms * 1000000;
	cc->election_timeout_max_ns = cfg->election_ms * 2000000;
	cc->heartbeat_ns = cfg->heartbeat_ms * 1000000;
	cc->tick_entry_ns = cfg->tick_ms * 1000000;
	/* Entries kept behind a snapshot for a slightly lagging follower: at most one snapshot
	 * interval (and never so many that the log cannot hold them plus the next interval). */
	cc->log_keep_entries = (uint32_t)RTE_MIN(RTE_MIN(UINT64_C(4096), cfg->snapshot_entries),
						 cfg->log_entries_max - cfg->snapshot_entries);
	cc->seed = (uint64_t)s->self * 1000003 + s->id * 7919 + rte_rdtsc();
	uint32_t ae_budget = frame_cap - (uint32_t)sizeof(struct wire_frame_hdr) - WIRE_MAC_SIZE -
			     (uint32_t)sizeof(struct wire_append_entries);
	if (ae_budget < WIRE_TAIL_MAX) {
		uint32_t data = (ae_budget - (uint32_t)sizeof(struct wire_entry_hdr)) & ~7u;
		cc->append_entries_max = 1;
		cc->batch_bytes_max = RTE_MIN(data, CNS_ENTRY_DATA_MAX);
		cc->inflight_max = 64;
	}
	/* InstallSnapshot chunks: what one frame carries after the InstallSnapshot header (≈1.3
	 * KiB at MTU 1500), more of them in flight when they are small. */
	uint32_t is_budget = frame_cap - (uint32_t)sizeof(struct wire_frame_hdr) - WIRE_MAC_SIZE -
			     (uint32_t)sizeof(struct wire_install_snapshot);
	if (is_budget < CNS_SNAPSHOT_CHUNK_MAX) {
		cc->snapshot_chunk_bytes = is_budget & ~7u;
		cc->snapshot_inflight_max = 16;
	}
}

static void *
zalloc(const char *what, uint16_t id, size_t size)
{
	char name[64];
	if (id == APP_GATEWAY_ID)
		snprintf(name, sizeof(name), "gateway_%s", what);
	else
		snprintf(name, sizeof(name), "shard%u_%s", id, what);
	void *p = rte_zmalloc(name, RTE_ALIGN_CEIL(size, 64), 64);
	if (p == NULL)
		APP_LOG(ERR, "%s: cannot allocate %zu bytes", name, size);
	return p;
}

static void
watch_asset(struct app_shard *s, uint32_t asset)
{
	for (uint32_t i = 0; i < s->asset_count; i++)
		if (s->assets[i] == asset)
			return;
	if (s->asset_count < ASSETS_WATCH)
		s->assets[s->asset_count++] = asset;
}

#define SHADOW_IDLE_NS (50 * 1000) /* the shadow's first sleep when idle (up to 0.8 ms) */

/* Counts of a service's state that cost nothing to read: every build checks the shadow
 * copy's against the service's with each snapshot (app_shard_cmd.c). */
static uint64_t
digest_me(const void *svc)
{
	return me_orders_resting(svc);
}

static uint64_t
digest_oms(const void *svc)
{
	return (uint64_t)oms_resident_count(svc) << 40 ^ (uint64_t)oms_inflight_count(svc) << 20 ^
	       oms_parked_count(svc);
}

uint64_t
app_shard_digest(const struct app_shard *s, const void *svc)
{
	return s->is_oms ? digest_oms(svc) : digest_me(svc);
}

/* [limits] snapshot_by = shadow: a second instance of the service, made as the first, on a
 * thread of its own (the CPUs a snapshot child would take). Equal to the first as both stand
 * now: consensus has not restored or applied anything yet, and what it does from here
 * reaches the copy through wrap_restore, wrap_apply and wrap_tick (app_shard.c). */
static int
shadow_init(struct app_shard *s, const struct oms_limits *ol, const struct me_limits *ml,
	    size_t svc_size)
{
	const struct app *app = s->app;
	s->shadow_mem = pst_mem_private(svc_size);
	if (s->shadow_mem == NULL) {
		APP_LOG(ERR, "shard %u: cannot map %zu bytes for the shadow copy ([limits] "
			"snapshot_by = shadow doubles the service's memory): %s", s->id, svc_size,
			strerror(errno));
		return -ENOMEM;
	}
	int ret = s->is_oms ? oms_init((struct oms **)&s->shadow_svc, s->shadow_mem, ol)
			    : me_init((struct me **)&s->shadow_svc, s->shadow_mem, ml);
	if (ret != 0)
		return ret;
	const struct app_shadow_conf conf = {
		.ops = s->is_oms ? &oms_svc_ops : &me_svc_ops,
		.svc = s->shadow_svc,
		.ring_bytes = (size_t)(app->cfg.shadow_ring_mb << 20),
		.thread = true,
#ifdef OMSD_DCHECK
		.hash = true, /* every test's build: each snapshot checked (app_shard_cmd.c) */
#endif
		.digest = s->is_oms ? digest_oms : digest_me,
		.idle_ns = SHADOW_IDLE_NS,
		.cpus = app->snap_cpus_ok ? &app->snap_cpus : NULL,
		.cpus_size = sizeof(app->snap_cpus),
		.say = app_flog_say,
		.say_ctx = s,
	};
	ret = app_shadow_create(&s->shadow, &conf);
	if (ret != 0) {
		APP_LOG(ERR, "shard %u: shadow copy: %s", s->id, strerror(-ret));
		return ret;
	}
	APP_LOG(INFO, "shard %u: snapshots serialised by a shadow copy (%zu MiB, ring %" PRIu64
		" MiB)", s->id, svc_size >> 20, app->cfg.shadow_ring_mb);
	return 0;
}

/* The gateway's tables (app_gateway.c, app_session.c), on whichever lcore runs it. */
static int
gateway_parts_init(struct app_shard *s)
{
	const struct app *app = s->app;
	s->clients = zalloc("clients", s->id, sizeof(struct user_ent) * USERS_SLOTS);
	s->xfers = zalloc("xfers", s->id, sizeof(struct xfer_ent) * XFER_SLOTS);
	if (s->clients == NULL || s->xfers == NULL || app_lat_init(&s->gwlat, rte_socket_id()) != 0)
		return -ENOMEM;
	const struct app_shed_conf shed = {
		.target_ns = app->cfg.shed_ack_us * 1000,
		.window_ns = app->cfg.shed_window_us * 1000,
		.wait_ns = app->cfg.shed_wait_us * 1000,
		.min_samples = APP_SHED_MIN_SAMPLES,
	};
	app_shed_init(&s->shed, &shed);
	s->gwr_mem = zalloc("gwroute", s->id, app_gw_footprint());
	if (s->gwr_mem == NULL || app_gw_init(s, s->gwr_mem) != 0)
		return -ENOMEM;
	if (app_session_init(s) != 0)
		return -ENOMEM;
	return 0;
}

static void
gateway_parts_fini(struct app_shard *s)
{
	rte_free(s->clients);
	rte_free(s->xfers);
	rte_free(s->gwr_mem);
	app_session_fini(s);
	app_lat_free(s->gwlat);
	s->clients = NULL;
	s->xfers = NULL;
	s->gwr_mem = NULL;
	s->gwlat = NULL;
}

/* [gateway]: the gateway on an lcore of its own — an app_shard without consensus or
 * service (cns and svc NULL, is_oms false), in the place after the last shard's
 * (app->gateway_index). It takes the client classes from the port and its local ring and
 * routes by the routing the node's first OMS shard lcore publishes (app_route_pub.h). */
int
app_gateway_init(struct app *app, struct app_agent *agent, uint32_t index)
{
	(void)index;
	uint32_t slot = (uint32_t)app->gateway_index;
	CHECK(app->cfg.gateway.enabled && slot == app->cfg.shard_count);
	struct app_shard *s = rte_zmalloc("app_gateway", sizeof(*s), RTE_CACHE_LINE_SIZE);
	if (s == NULL)
		return -ENOMEM;
	app->shards[slot] = s;
	agent->state = s; /* a failed init's parts are freed by app_gateway_fini */
	s->app = app;
	s->index = slot;
	s->id = APP_GATEWAY_ID;
	s->self = app->cfg.dp.node_id;
	s->is_gateway = true;
	s->route_reader = true;
	s->frame_cap = app_frame_cap(app);
	app_wire_shard(app, slot, &s->w);
	CHECK(s->w.rx != NULL);
	CHECK(s->w.txq != NULL);
	CHECK(s->w.local != NULL);
	app_outbox_init(&s->ob, app, s->w.txq);
	s->ob.seal = s->w.seal;
	int ret = gateway_parts_init(s);
	if (ret != 0)
		return ret;
	agent->do_work = app_gateway_do_work;
	agent->rcu_reader = true;
	APP_LOG(INFO, "gateway: on an lcore of its own (cpu %u), routing by the routing %s",
		app->cfg.gateway.cpu, app->route_src_index >= 0
		? "the node's first OMS shard publishes" : "of the file (no OMS shard here)");
	return 0;
}

void
app_gateway_fini(struct app *app, struct app_agent *agent)
{
	struct app_shard *s = agent->state;
	if (s == NULL)
		return;
	app_outbox_free(&s->ob);
	struct rte_mbuf *m;
	while (rte_ring_sc_dequeue(s->w.local, (void **)&m) == 0)
		rte_pktmbuf_free(m);
	gateway_parts_fini(s);
	app->shards[s->index] = NULL;
	rte_free(s);
	agent->state = NULL;
}

int
app_shard_init(struct app *app, struct app_agent *agent, uint32_t index)
{
	const struct app_config *cfg = &app->cfg;
	const struct app_shard_conf *sc = &cfg->shards[index];
	int ret;

	struct app_shard *s = rte_zmalloc("app_shard", sizeof(*s), RTE_CACHE_LINE_SIZE);
	if (s == NULL)
		return -ENOMEM;
	app->shards[index] = s;
	s->app = app;
	s->conf = sc;
	s->index = index;
	s->id = sc->id;
	s->self = cfg->dp.node_id;
	s->is_oms = sc->service == APP_SERVICE_OMS;
	s->is_gateway = app->gateway_index == (int)index;
	s->redrive_ns = cfg->bridge_redrive_ms * 1000000;
	s->frame_cap = app_frame_cap(app);

	/* Inboxes and outboxes, made by the wiring with their dataplane routes. */
	app_wire_shard(app, index, &s->w);
	CHECK(s->w.rx != NULL);
	CHECK(s->w.txq != NULL);
	CHECK(s->w.local != NULL);
	CHECK(s->w.mgmt_rx != NULL);
	app_outbox_init(&s->ob, app, s->w.txq);
	s->ob.seal = s->w.seal;

	/* The service, in memory sized by its footprint. */
	size_t svc_size;
	struct oms_limits ol;
	struct me_limits ml;
	if (s->is_oms) {
		limits_oms(cfg, s->id, &ol);
		if (oms_limits_check(&ol) != 0 || (svc_size = oms_footprint(&ol)) == 0) {
			APP_LOG(ERR, "shard %u: oms limits refused ([limits])", s->id);
			return -EINVAL;
		}
	} else {
		limits_me(cfg, s->id, &ml);
		if ((svc_size = me_footprint(&ml)) == 0) {
			APP_LOG(ERR, "shard %u: me limits refused ([limits])", s->id);
			return -EINVAL;
		}
	}
	struct cns_limits cl = { .snapshot_bytes_max = (uint32_t)(cfg->snapshot_mb << 20),
				 .flags = cfg->snapshot_fork ? CNS_LIM_SNAP_ASYNC : 0 };
	struct cns_memlog_limits ll = {
		.entries_max = (uint32_t)cfg->log_entries_max,
		.bytes_max = (uint32_t)(cfg->log_mb << 20),
	};
	size_t cns_size = cns_footprint(&cl), log_size = cns_memlog_footprint(&ll);
	APP_LOG(INFO, "shard %u (%s): service %zu MiB, consensus %zu MiB, log %zu MiB", s->id,
		app_service_name(sc->service), svc_size >> 20, cns_size >> 20, log_size >> 20);
	if (svc_size > cl.snapshot_bytes_max)
		APP_LOG(WARNING, "shard %u: snapshots are limited to %" PRIu64 " MiB, the service "
			"can grow to %zu MiB: a snapshot of a full shard would fail ([limits] "
			"snapshot_mb)", s->id, cfg->snapshot_mb, svc_size >> 20);
	/* Outside DPDK's memory, which is shared (hugetlbfs) on a production host: a snapshot
	 * child's copy-on-write image of the service must be private memory, and the buffer
	 * it writes consensus's snapshot into must be shared with it (persist/pst_fork.c). */
	s->svc_size = svc_size;
	s->cns_size = cns_size;
	s->svc_mem = pst_mem_private(svc_size);
	if (s->svc_mem == NULL)
		APP_LOG(ERR, "shard %u: cannot map %zu bytes for the service: %s", s->id,
			svc_size, strerror(errno));
	s->cns_mem = pst_mem_shared(cns_size);
	if (s->cns_mem == NULL)
		APP_LOG(ERR, "shard %u: cannot map %zu bytes for consensus: %s", s->id, cns_size,
			strerror(errno));
	if (cfg->snapshot_fork) {
		ret = pst_fork_init(&s->snapfork);
		if (ret != 0) {
			APP_LOG(ERR, "shard %u: snapshot child slot: %s", s->id, strerror(-ret));
			return ret;
		}
		s->snapfork_ok = true;
	}
	s->log_mem = zalloc("log", s->id, log_size);
	s->pq = zalloc("pq", s->id, sizeof(struct pq_ent) * PQ_MAX);
	if (s->is_oms)
		s->users = zalloc("users", s->id, sizeof(struct user_ent) * USERS_SLOTS);
	if (s->is_gateway && (ret = gateway_parts_init(s)) != 0)
		return ret;
	s->route_pub = (int)index == app->route_src_index;
	if (s->is_oms) {
		s->xorigin = zalloc("xorigin", s->id, sizeof(struct xfer_ent) * XFER_SLOTS);
		s->report_ring = app->cfg.report_ring;
		s->reports = zalloc("reports", s->id, sizeof(struct report_ent) * s->report_ring);
		s->report_heads = zalloc("report_heads", s->id,
					 sizeof(struct report_head) * s->report_ring);
		s->lat = zalloc("lat", s->id, sizeof(struct lat_table));
		if (s->lat == NULL)
			return -ENOMEM;
		/* The re-drive queue's schedule: one slot per saga the shard can hold. */
		struct app_backoff bo = { .base_ns = cfg->bridge_redrive_ms * 1000000,
					  .max_ns = cfg->bridge_redrive_max_ms * 1000000 };
		s->rdq_mem = zalloc("rdq", s->id, app_rdq_footprint(ol.inflight_max));
		if (s->rdq_mem == NULL ||
		    app_rdq_init(&s->rdq, s->rdq_mem, ol.inflight_max, &bo,
				 cfg->saga_old_ms * 1000000) != 0)
			return -ENOMEM;
		hist_init(&s->lat->ack);
		hist_init(&s->lat->final);
	}
	if (s->svc_mem == NULL || s->cns_mem == NULL || s->log_mem == NULL || s->pq == NULL ||
	    (s->is_oms && (s->users == NULL || s->xorigin == NULL || s->reports == NULL ||
			   s->report_heads == NULL)))
		return -ENOMEM;
	if (s->is_oms)
		ret = oms_init((struct oms **)&s->svc, s->svc_mem, &ol);
	else
		ret = me_init((struct me **)&s->svc, s->svc_mem, &ml);
	if (ret == 0)
		ret = cns_memlog_init(&s->log, s->log_mem, &ll);
	if (ret != 0) {
		APP_LOG(ERR, "shard %u: service or log init: %s", s->id, strerror(-ret));
		return ret;
	}
	if (cfg->snapshot_shadow && (ret = shadow_init(s, &ol, &ml, svc_size)) != 0)
		return ret;

	s->sink.ctx = s;
	s->sink.emit = app_egress_emit;
	struct cns_config cc;
	cns_conf(app, s, s->frame_cap, &cc);
	bool durable = cfg->durability == APP_DURABILITY_DURABLE;
	struct cns_env env = {
		.log_ops = durable ? &app_flog_ops : &cns_memlog_ops,
		.log = durable ? (void *)s : (void *)s->log,
		.svc_ops = &app_shard_svc_ops,
		.svc = s,
		.sink = &s->sink,
		.host = { .ctx = s, .send = durable ? app_flog_host_send : app_shard_host_send,
			  .snapshot_saved = durable ? app_flog_snapshot_saved : NULL },
	};
	struct cns_boot boot;
	struct cns_snapshot_meta snap;
	void *snap_data = NULL;
	memset(&boot, 0, sizeof(boot));
	if (durable) {
		cc.durability = CNS_DURABLE_DISK;
		ret = app_flog_boot(s, &boot, &snap, &snap_data);
		if (ret != 0) {
			free(snap_data);
			return ret;
		}
		APP_LOG(INFO, "shard %u: file log %s/shard%u: term %" PRIu64 " vote %u, "
			"snapshot at %" PRIu64 ", entries %" PRIu64 "..%" PRIu64, s->id,
			cfg->data_dir, s->id, boot.term, boot.vote,
			boot.snapshot != NULL ? boot.snapshot->index : 0,
			cns_memlog_ops.first_index(s->log), cns_memlog_ops.last_index(s->log));
	}
	ret = cns_init(&s->cns, s->cns_mem, &cl, &cc, &env, &boot);
	free(snap_data);
	if (ret != 0) {
		APP_LOG(ERR, "shard %u: consensus init: %s", s->id, strerror(-ret));
		return ret;
	}
	/* The boot snapshot is the last one taken: the next is due snapshot_entries after it. */
	s->snap_index = boot.snapshot != NULL ? boot.snapshot->index : 0;

	/* ME shards the bridge asks for replays: every symbol's, and those hosted here. */
	bool seen[DP_SHARDS_MAX] = { false };
	for (uint32_t i = 0; i < cfg->symbol_count; i++)
		seen[cfg->symbols[i].me_shard] = true;
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if (cfg->shards[i].service == APP_SERVICE_ME)
			seen[cfg->shards[i].id] = true;
	for (uint16_t i = 0; i < DP_SHARDS_MAX; i++)
		if (seen[i])
			s->me_shards[s->me_shard_count++] = i;
	for (uint32_t i = 0; i < cfg->symbol_count; i++) {
		watch_asset(s, cfg->symbols[i].base_asset);
		watch_asset(s, cfg->symbols[i].quote_asset);
	}
	if (!durable)
		APP_LOG(WARNING, "shard %u: [durability] mode = memory: the Raft log and snapshots "
			"live in RAM only; a power loss of a majority of its members loses every "
			"order, fill, balance and transfer it committed (since the last database "
			"flush, for an OMS shard)", s->id);
	if (s->is_oms && durable && s->w.persist_rq != NULL && cfg->flush_ms == 0)
		APP_LOG(WARNING, "shard %u: [timers] flush_ms = 0: write-back is off, the database "
			"holds a user's state only from its last eviction; a user who stays resident "
			"is not written until it goes idle", s->id);
	if (s->is_oms && s->w.persist_rq == NULL)
		APP_LOG(WARNING, "shard %u: no database configured: accounts are not persisted "
			"(hydration answers NEW, flushes succeed without a write)", s->id);

	agent->do_work = app_shard_do_work;
	agent->state = s;
	return 0;
}

#define COLLAPSE_SLICE (32u << 20) /* bytes a main tick collapses: a few ms of copying */

void
app_shard_collapse_tick(struct app *app)
{
	static bool unsupported; /* a kernel before 6.1: nothing to do, ever */
	if (unsupported)
		return;
	for (uint32_t i = 0; i < app->cfg.shard_count; i++) {
		struct app_shard *s = app->shards[i];
		if (s == NULL || !s->snapfork_ok)
			continue;
		uint32_t req = __atomic_load_n(&s->collapse_req, __ATOMIC_RELAXED);
		if (req != s->collapse_gen) {
			s->collapse_gen = req; /* another child since: start over */
			s->collapse_off = 0;
			s->collapsing = true;
		}
		if (!s->collapsing)
			continue;
		size_t n = RTE_MIN((size_t)COLLAPSE_SLICE, s->svc_size - s->collapse_off);
		int rc = pst_mem_collapse((uint8_t *)s->svc_mem + s->collapse_off, n);
		if (rc == -EINVAL) {
			unsupported = true;
			APP_LOG(INFO, "no MADV_COLLAPSE (Linux 6.1): a snapshot's fork copies the "
				"4 KiB page entries its predecessors split");
			return;
		}
		s->collapse_off += n;
		if (s->collapse_off >= s->svc_size)
			s->collapsing = false;
		return; /* one slice per tick, over all shards */
	}
}

void
app_shard_fini(struct app *app, struct app_agent *agent)
{
	(void)agent;
	for (uint32_t i = 0; i < app->cfg.shard_count; i++) {
		struct app_shard *s = app->shards[i];
		if (s == NULL || agent->state != s)
			continue;
		app_outbox_free(&s->ob);
		/* Our inboxes are drained here (we know what they carry); the rings are
		 * the wiring's and freed by app_wire_fini. */
		struct rte_mbuf *m;
		while (rte_ring_sc_dequeue(s->w.local, (void **)&m) == 0)
			rte_pktmbuf_free(m);
		/* The lcore has stopped: commands it held are ours to free (main allocated
		 * them with malloc and forgets them at close). */
		struct app_cmd *c;
		while (rte_ring_sc_dequeue(s->w.mgmt_rx, (void **)&c) == 0)
			free(c);
		for (uint32_t k = 0; k < s->cmd_wait_count; k++)
			free(s->cmd_wait[k]);
		s->cmd_wait_count = 0;
		if (s->snapfork_ok)
			pst_fork_fini(&s->snapfork); /* a child still serialising is killed */
		app_shadow_destroy(s->shadow); /* its thread ends what it is in */
		s->shadow = NULL;
		if (s->shadow_mem != NULL)
			pst_mem_free(s->shadow_mem, s->svc_size);
		free(s->snap_cmd);
		s->snap_cmd = NULL;
		pst_mem_free(s->svc_mem, s->svc_size);
		pst_mem_free(s->cns_mem, s->cns_size);
		rte_free(s->log_mem);
		rte_free(s->pq);
		rte_free(s->users);
		rte_free(s->xorigin);
		rte_free(s->reports);
		rte_free(s->report_heads);
		rte_free(s->lat);
		rte_free(s->rdq_mem);
		gateway_parts_fini(s);
		if (s->logw != NULL) {
			app_flog_stop(s);
			/* Every lcore has stopped: what is queued is written here. */
			if (app_logw_flush(s->logw, 0) != 0)
				APP_LOG(WARNING, "shard %u: %" PRIu64 " bytes of the file log were "
					"not written at exit (never reported durable)", s->id,
					app_logw_queued(s->logw));
			app_logw_destroy(s->logw);
		}
		free(s->held);
		rte_free(s);
		app->shards[i] = NULL;
	}
}

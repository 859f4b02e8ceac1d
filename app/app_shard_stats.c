/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What other lcores read of a shard lcore (app_shard_int.h): the stats lines of
 * app_stats_write, the published state the views and telemetry read, the RX gate's view
 * (ready, queued) and the latency histograms. Any thread may call these: published values
 * are relaxed loads; service and consensus counters are single-writer 64-bit words read
 * while the shard runs (a slightly stale value). Nothing here writes the shard's state.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_ring.h>

#include "app_shard_int.h"
#include "me/me.h"
#include "oms/oms.h"

static const char *const sc_labels[SC_COUNT] = {
#define SC_LABEL(name, label, help) label,
	SHARD_COUNTERS(SC_LABEL)
#undef SC_LABEL
};


bool
app_shard_leads(const struct app *app, uint32_t index, uint32_t *leader)
{
	const struct app_shard *s = app->shards[index];
	if (s == NULL) {
		*leader = 0;
		return false;
	}
	*leader = LOAD(s->pub_leader);
	return LOAD(s->pub_role) == CNS_LEADER;
}

uint64_t
app_shard_route_epoch(const struct app *app, uint32_t index)
{
	const struct app_shard *s = app->shards[index];
	return s != NULL && s->is_oms ? LOAD(s->pub_route_epoch) : 0;
}

static const char *
role_name(uint32_t role)
{
	switch (role) {
	case CNS_FOLLOWER:
		return "follower";
	case CNS_PRE_CANDIDATE:
		return "pre_candidate";
	case CNS_CANDIDATE:
		return "candidate";
	case CNS_LEADER:
		return "leader";
	default:
		return "none";
	}
}

void
app_shard_pub_members(struct app_shard *s)
{
	/* The configuration in effect, rewritten only when it changed (a copy and a compare
	 * per cycle); the match indexes every cycle (leader: UINT64_MAX elsewhere). */
	struct cns_members m;
	uint64_t index = cns_members(s->cns, &m);
	if (memcmp(&m, &s->mem_seen, sizeof(m)) != 0 || LOAD(s->pub_mem_index) != index) {
		s->mem_seen = m;
		__atomic_store_n(&s->pub_mem_seq, s->pub_mem_seq + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		PUB(s->pub_mem_count, m.count);
		PUB(s->pub_mem_learners, m.learners);
		PUB(s->pub_mem_index, index);
		for (uint32_t i = 0; i < APP_MEMBERS_MAX; i++)
			PUB(s->pub_mem_ids[i], i < m.count ? m.ids[i] : 0);
		__atomic_store_n(&s->pub_mem_seq, s->pub_mem_seq + 1, __ATOMIC_RELEASE);
	}
	for (uint32_t i = 0; i < m.count; i++)
		PUB(s->pub_match[i], cns_match_index(s->cns, m.ids[i]));
}

void
app_shard_stats_write(const struct app *app, uint32_t index, FILE *out)
{
	struct app_shard *s = app->shards[index];
	if (s == NULL)
		return;
	unsigned id = s->id;
	uint32_t role = LOAD(s->pub_role);
	fprintf(out, "shard.%u.service %s\n", id, app_service_name(s->conf->service));
	fprintf(out, "shard.%u.role %s\n", id, role_name(role));
	fprintf(out, "shard.%u.is_leader %u\n", id, role == CNS_LEADER);
	fprintf(out, "shard.%u.ready %u\n", id, (unsigned)LOAD(s->pub_ready));
	fprintf(out, "shard.%u.leader %u\n", id, LOAD(s->pub_leader));
	fprintf(out, "shard.%u.term %" PRIu64 "\n", id, LOAD(s->pub_term));
	fprintf(out, "shard.%u.commit %" PRIu64 "\n", id, LOAD(s->pub_commit));
	fprintf(out, "shard.%u.applied %" PRIu64 "\n", id, LOAD(s->pub_applied));
	fprintf(out, "shard.%u.last_index %" PRIu64 "\n", id, LOAD(s->pub_last));
	/* Leadership placement (app_placement.c): the preferred leader (0: none), whether it
	 * leads, and the last check's verdict. */
	uint32_t pref = LOAD(s->pub_place_pref);
	fprintf(out, "shard.%u.preferred_leader %u\n", id, pref);
	fprintf(out, "shard.%u.placed %u\n", id, pref != 0 && pref == LOAD(s->pub_leader));
	fprintf(out, "shard.%u.placement %s\n", id,
		app_place_verdict_name((enum app_place_verdict)LOAD(s->pub_place_verdict)));
	struct app_shard_pub p = {0};
	if (app_shard_pub_read(app, index, &p) == 0) {
		fprintf(out, "shard.%u.config_index %" PRIu64 "\n", id, p.config_index);
		fprintf(out, "shard.%u.voters %u\n", id,
			p.member_count - (uint32_t)__builtin_popcount(p.learners));
		fprintf(out, "shard.%u.learners %u\n", id, (uint32_t)__builtin_popcount(p.learners));
	}
	for (uint32_t i = 0; i < p.member_count; i++) {
		/* Leader only (UINT64_MAX otherwise): per-member match index and lag. */
		uint64_t match = p.match[i], last = LOAD(s->pub_last);
		if (match == UINT64_MAX)
			continue;
		fprintf(out, "shard.%u.member.%u.match %" PRIu64 "\n", id, p.members[i], match);
		fprintf(out, "shard.%u.member.%u.lag %" PRIu64 "\n", id, p.members[i],
			last > match ? last - match : 0);
	}
	for (int c = 0; c < SC_COUNT; c++)
		fprintf(out, "shard.%u.%s %" PRIu64 "\n", id, sc_labels[c], LOAD(s->c[c]));
	if (s->logw != NULL) {
		/* The file log's writer (durable mode): who writes, what waits, what it cost. */
		fprintf(out, "shard.%u.flog_on_persister %u\n", id, s->flog_inline ? 0u : 1u);
		fprintf(out, "shard.%u.flog_queued_bytes %" PRIu64 "\n", id,
			app_logw_queued(s->logw));
		static const enum app_logw_counter more[] = {
			APP_LOGW_ENTRIES, APP_LOGW_ERRORS, APP_LOGW_BATCHES, APP_LOGW_SYNC_NS, APP_LOGW_SYNC_MAX_NS,
			APP_LOGW_TRUNCATES, APP_LOGW_COMPACTS, APP_LOGW_RESETS, APP_LOGW_FULL,
			APP_LOGW_SNAP_SLICES, APP_LOGW_SNAP_NS, APP_LOGW_VOTES, APP_LOGW_VOTE_FAILED,
			APP_LOGW_VOTE_NS,
		};
		for (size_t k = 0; k < sizeof(more) / sizeof(more[0]); k++)
			fprintf(out, "shard.%u.flog_%s %" PRIu64 "\n", id,
				app_logw_counter_names[more[k]], app_logw_counter(s->logw, more[k]));
	}
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "shard.%u", id);
	app_outbox_stats_write(&s->ob, prefix, out);
	app_lat_stats_write(s->gwlat, "gateway", out);
	app_session_stats_write(s, out);
	for (int c = 0; c < CNS_C_COUNT; c++)
		fprintf(out, "shard.%u.cns.%s %" PRIu64 "\n", id,
			cns_counter_name((enum cns_counter)c),
			cns_counter(s->cns, (enum cns_counter)c));
	if (s->is_oms) {
		fprintf(out, "shard.%u.route_epoch %" PRIu64 "\n", id, LOAD(s->pub_route_epoch));
		fprintf(out, "shard.%u.inflight %" PRIu64 "\n", id, LOAD(s->pub_inflight));
		fprintf(out, "shard.%u.resident %" PRIu64 "\n", id, LOAD(s->pub_resident));
		fprintf(out, "shard.%u.parked_now %" PRIu64 "\n", id, LOAD(s->pub_parked));
		/* The hot-user cache by state (docs/oms.md "Admission"). */
		static const char *const cache[7] = { "idle",	   "open",    "inflight", "flushing",
						      "hydrating", "waiting", "cap" };
		for (int i = 0; i < 7; i++)
			fprintf(out, "shard.%u.cache_%s %" PRIu64 "\n", id, cache[i],
				LOAD(s->pub_cache[i]));
		/* The re-drive queue (leader; 0 on a follower), as of the last pass. */
		fprintf(out, "shard.%u.sagas_pending %" PRIu64 "\n", id,
			LOAD(s->pub_sagas_pending));
		fprintf(out, "shard.%u.sagas_old %" PRIu64 "\n", id, LOAD(s->pub_sagas_old));
		fprintf(out, "shard.%u.saga_oldest_age_ms %" PRIu64 "\n", id,
			LOAD(s->pub_saga_oldest_ns) / 1000000);
		/* The sums below are exact at this applied index (app_shard.c asset_pass). */
		fprintf(out, "shard.%u.asset_applied %" PRIu64 "\n", id,
			LOAD(s->pub_asset_applied));
		for (uint32_t i = 0; i < s->asset_count; i++) {
			fprintf(out, "shard.%u.asset.%u.sum %" PRId64 "\n", id, s->assets[i],
				LOAD(s->pub_asset_sum[i]));
			fprintf(out, "shard.%u.asset.%u.fees %" PRId64 "\n", id, s->assets[i],
				LOAD(s->pub_asset_fees[i]));
		}
		for (int c = 0; c < OMS_C_COUNT; c++)
			fprintf(out, "shard.%u.oms.%s %" PRIu64 "\n", id,
				oms_counter_name((enum oms_counter)c),
				oms_counter_get(s->svc, (enum oms_counter)c));
		for (uint16_t r = 1; r < WIRE_REASON_MAX; r++)
			fprintf(out, "shard.%u.nak.%s %" PRIu64 "\n", id, wire_reason_name(r),
				oms_nak_count(s->svc, r));
		/* The hot-user cache's latencies (cluster time, the service's own histograms:
		 * read while the shard lcore may record, like the counters). */
		char name[64];
		snprintf(name, sizeof(name), "shard.%u.lat.cache_park", id);
		app_hist_lines(out, name, oms_park_hist(s->svc));
		snprintf(name, sizeof(name), "shard.%u.lat.cache_hydrate", id);
		app_hist_lines(out, name, oms_hydrate_hist(s->svc));
		snprintf(name, sizeof(name), "shard.%u.lat.cache_writeback", id);
		app_hist_lines(out, name, oms_writeback_hist(s->svc));
		snprintf(name, sizeof(name), "shard.%u.lat.cache_evict", id);
		app_hist_lines(out, name, oms_evict_hist(s->svc));
		struct hist h; /* 15 KiB on the stack: callers are control-plane threads */
		static const char *const lat_names[2] = {"ingress_ack", "order_final"};
		for (int k = 0; k < 2; k++) {
			app_shard_latency(app, index, k == 0 ? &h : NULL, k == 1 ? &h : NULL);
			snprintf(name, sizeof(name), "shard.%u.lat.%s", id, lat_names[k]);
			app_hist_lines(out, name, &h);
		}
		fprintf(out, "shard.%u.lat_overwritten %" PRIu64 "\n", id, s->lat->overwritten);
	} else {
		static const char *const me_names[ME_C_COUNT] = {
#define ME_NAME(name, label) #name,
			ME_COUNTERS(ME_NAME)
#undef ME_NAME
		};
		fprintf(out, "shard.%u.resting %" PRIu64 "\n", id, LOAD(s->pub_resting));
		for (int c = 0; c < ME_C_COUNT; c++)
			fprintf(out, "shard.%u.me.%s %" PRIu64 "\n", id, me_names[c],
				me_counter(s->svc, (enum me_counter)c));
	}
}

/* Published state of shard index for the views (any thread: relaxed loads only). */
int
app_shard_pub_read(const struct app *app, uint32_t index, struct app_shard_pub *out)
{
	const struct app_shard *s = app->shards[index];
	if (s == NULL)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	out->id = s->id;
	out->role = LOAD(s->pub_role);
	out->leader = LOAD(s->pub_leader);
	out->term = LOAD(s->pub_term);
	out->commit = LOAD(s->pub_commit);
	out->applied = LOAD(s->pub_applied);
	out->last = LOAD(s->pub_last);
	/* The members under their sequence count: a consistent set, or the last one after a
	 * few tries (the shard lcore rewrites it only when the configuration changes). */
	for (int tries = 0; tries < 64; tries++) {
		uint32_t seq = __atomic_load_n(&s->pub_mem_seq, __ATOMIC_ACQUIRE);
		if (seq & 1u)
			continue;
		out->member_count = RTE_MIN(LOAD(s->pub_mem_count), (uint32_t)APP_MEMBERS_MAX);
		out->learners = LOAD(s->pub_mem_learners);
		out->config_index = LOAD(s->pub_mem_index);
		for (uint32_t i = 0; i < out->member_count; i++) {
			out->members[i] = LOAD(s->pub_mem_ids[i]);
			out->match[i] = LOAD(s->pub_match[i]);
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&s->pub_mem_seq, __ATOMIC_RELAXED) == seq)
			break;
	}
	out->elections = cns_counter(s->cns, CNS_C_ELECTIONS_STARTED);
	out->leader_elected = cns_counter(s->cns, CNS_C_LEADER_ELECTED);
	out->route_epoch = LOAD(s->pub_route_epoch);
	out->inflight = LOAD(s->pub_inflight);
	out->resident = LOAD(s->pub_resident);
	out->resting = LOAD(s->pub_resting);
	out->place_pref = LOAD(s->pub_place_pref);
	out->place_verdict = LOAD(s->pub_place_verdict);
	out->is_oms = s->is_oms;
	return 0;
}

const char *
app_shard_role_name(uint32_t role)
{
	return role_name(role);
}

/* Copies of the latency histograms (either may be NULL). -ENOENT: not an OMS shard. */
int
app_shard_latency(const struct app *app, uint32_t index, struct hist *ack, struct hist *final)
{
	const struct app_shard *s = app->shards[index];
	if (s == NULL || s->lat == NULL) {
		if (ack != NULL)
			hist_init(ack);
		if (final != NULL)
			hist_init(final);
		return -ENOENT;
	}
	if (ack != NULL)
		memcpy(ack, &s->lat->ack, sizeof(*ack));
	if (final != NULL)
		memcpy(final, &s->lat->final, sizeof(*final));
	return 0;
}

const char *const app_cache_stage_names[APP_CACHE_STAGES] = {"park", "hydrate", "writeback",
								 "evict"};

int
app_shard_cache_hist(const struct app *app, uint32_t index, unsigned stage, struct hist *out)
{
	const struct app_shard *s = app->shards[index];
	if (s == NULL || !s->is_oms || s->svc == NULL || stage >= APP_CACHE_STAGES) {
		hist_init(out);
		return -ENOENT;
	}
	const struct hist *h = stage == 0 ? oms_park_hist(s->svc)
			       : stage == 1 ? oms_hydrate_hist(s->svc)
			       : stage == 2 ? oms_writeback_hist(s->svc)
					    : oms_evict_hist(s->svc);
	/* Written by the shard lcore as it applies: a torn copy is off by an in-flight sample,
	 * as the counters are. */
	memcpy(out, h, sizeof(*out));
	return 0;
}

bool
app_shard_ready(const struct app *app, uint32_t index)
{
	const struct app_shard *s = app->shards[index];
	return s != NULL && LOAD(s->pub_ready);
}

uint32_t
app_shard_queued(const struct app *app, uint32_t index)
{
	const struct app_shard *s = app->shards[index];
	if (s == NULL)
		return 0;
	uint32_t rx = rte_ring_count(s->w.rx), local = rte_ring_count(s->w.local);
	return rx > local ? rx : local;
}

const struct app_lat *
app_shard_lat(const struct app *app)
{
	if (app->gateway_index < 0 || app->shards[app->gateway_index] == NULL)
		return NULL;
	return app->shards[app->gateway_index]->gwlat;
}

/* [gateway]: the gateway lcore's counters, under gateway. (the shard lcores' gw_ ones stay
 * 0), and the routing it routes by: the epoch of the published copy (0: the file's) and
 * the publication's own counters. */
void
app_gateway_stats_write(const struct app *app, FILE *out)
{
	if (!app->cfg.gateway.enabled || app->gateway_index < 0)
		return;
	const struct app_shard *s = app->shards[app->gateway_index];
	if (s == NULL)
		return;
	fprintf(out, "gateway.lcore 1\n");
	for (int c = 0; c < SC_COUNT; c++)
		fprintf(out, "gateway.%s %" PRIu64 "\n", sc_labels[c], LOAD(s->c[c]));
	const struct oms_route_info *ri = app_route_peek(&app->route);
	fprintf(out, "gateway.route_epoch %" PRIu64 "\n", ri != NULL ? ri->epoch : 0);
	fprintf(out, "gateway.route_publishes %" PRIu64 "\n", LOAD(app->route.publishes));
	fprintf(out, "gateway.route_pool_waits %" PRIu64 "\n", LOAD(app->route.pool_waits));
	fprintf(out, "gateway.route_reclaims %" PRIu64 "\n", LOAD(app->route.reclaims));
	fprintf(out, "gateway.route_grace_ns %" PRIu64 "\n", LOAD(app->route.grace_ns));
	app_outbox_stats_write(&s->ob, "gateway", out);
	app_lat_stats_write(s->gwlat, "gateway", out);
	app_session_stats_write(s, out);
}

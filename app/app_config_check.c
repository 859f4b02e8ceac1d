/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration's checks that span sections (app_config_int.h), run once every section
 * has been read: the windows the exactly-once and durability argument relies on (timers and
 * sizes against each other, the table in docs/me-contract.md), what one section says about
 * another (a symbol's ME shard and the routed OMS shards against [shard.N], rx_start
 * against the shards' members, the database against [persister]), the CPUs against this
 * process's affinity, and at last every key or section nobody read, which is a typo or a
 * key this version does not have.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <rte_common.h>

#include "app_config_int.h"

/* Every lcore's CPU must be one this process may run on. */
void
cfg_check_cpus(struct cfg_ctx *c, const struct app_config *cfg)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	struct {
		const char *sec;
		const struct app_lcore_conf *l;
		uint16_t cpu;
	} all[3 + DP_IO_MAX + APP_SHARDS_MAX];
	unsigned n = 0;
	for (uint32_t k = 0; k < cfg->dp.rx_queues || k == 0; k++)
		all[n++] = (typeof(all[0])){ "io", &cfg->io, cfg->io_cpus[k] };
	if (cfg->bridge.enabled)
		all[n++] = (typeof(all[0])){ "bridge", &cfg->bridge, cfg->bridge.cpu };
	if (cfg->persister.enabled)
		all[n++] = (typeof(all[0])){ "persister", &cfg->persister, cfg->persister.cpu };
	if (cfg->gateway.enabled)
		all[n++] = (typeof(all[0])){ "gateway", &cfg->gateway, cfg->gateway.cpu };
	if (!CPU_ISSET(cfg->main_cpu, &set))
		cfg_report(c, "eal", "main_cpu", "CPU %u is not available to this process",
			   cfg->main_cpu);
	for (unsigned i = 0; i < n; i++)
		if (!CPU_ISSET(all[i].cpu, &set))
			cfg_report(c, all[i].sec, "cpu", "CPU %u is not available to this "
				   "process", all[i].cpu);
	for (uint32_t i = 0; i < cfg->shard_count; i++) {
		if (!CPU_ISSET(cfg->shards[i].lcore.cpu, &set)) {
			char sec[32];
			snprintf(sec, sizeof(sec), "shard.%u", cfg->shards[i].id);
			cfg_report(c, sec, "cpu", "CPU %u is not available to this process",
				   cfg->shards[i].lcore.cpu);
		}
	}
}

uint64_t
app_dedup_window_min_ms(const struct app_config *cfg)
{
	return cfg->bridge_redrive_ms + 2 * cfg->election_ms;
}

uint64_t
app_dedup_window_default_ms(const struct app_config *cfg)
{
	return RTE_MAX(UINT64_C(1000), 2 * app_dedup_window_min_ms(cfg));
}

uint64_t
app_redrive_max_default_ms(const struct app_config *cfg)
{
	return RTE_MIN(UINT64_C(3600000), 8 * cfg->bridge_redrive_ms);
}

/*
 * The windows table of docs/me-contract.md, one check per row that has a key. Each message
 * says what would break, so an operator reading --check knows why the bound is there. The
 * ME's dedup window, when not given, is derived here from the timers it must outlast.
 */
void
cfg_check_windows(struct cfg_ctx *c, struct app_config *cfg)
{
	/* Raft §5.2: a follower must hear a heartbeat before its election timer fires. */
	if (cfg->heartbeat_ms * 2 > cfg->election_ms)
		cfg_report(c, "timers", "heartbeat_ms", "%" PRIu64 " is more than half of "
			   "election_ms (%" PRIu64 "): followers would time out between "
			   "heartbeats",
			   cfg->heartbeat_ms, cfg->election_ms);
	if (cfg->snapshot_entries >= cfg->log_entries_max)
		cfg_report(c, "limits", "snapshot_entries", "%" PRIu64 " must be below log_entries "
			   "(%" PRIu64 "): the log would fill before the first snapshot",
			   cfg->snapshot_entries, cfg->log_entries_max);
	if (cfg->sweep_ms > cfg->user_ttl_ms)
		cfg_report(c, "timers", "sweep_ms", "%" PRIu64 " is longer than user_ttl_ms "
			   "(%" PRIu64 "): users would outlive their TTL by more than a TTL",
			   cfg->sweep_ms, cfg->user_ttl_ms);
	/* ME contract: a SUBMIT re-sent for an order the ME has finished must still find its
	 * dedup record. The latest such re-send is a re-drive round already on its way, or one
	 * from a deposed OMS leader's bridge, which re-drives until check-quorum steps it down
	 * (election_max = 2 x election_ms, docs/consensus.md). */
	uint64_t min_ms = app_dedup_window_min_ms(cfg);
	if (cfg_scan_find(c, "limits", "dedup_window_ms") == NULL)
		cfg->dedup_window_ms = app_dedup_window_default_ms(cfg);
	else if (cfg->dedup_window_ms < min_ms)
		cfg_report(c, "limits", "dedup_window_ms", "%" PRIu64 " is below [timers] "
			   "bridge_redrive_ms + 2 x election_ms (%" PRIu64 "): a SUBMIT re-driven "
			   "late, or by a deposed OMS leader, could reach the ME after the order's "
			   "dedup record is gone and execute twice",
			   cfg->dedup_window_ms, min_ms);
	/* Re-drive back-off (app_backoff.c): bridge_redrive_ms doubling to this ceiling. It
	 * is not in the dedup bound above: a bridge stops re-sending a saga when it applies
	 * the order's first event, which replay requests at the base cadence bring within
	 * bridge_redrive_ms of the order finishing, or when check-quorum deposes it; back-off
	 * only takes re-sends away from that interval (docs/me-contract.md "Windows"). */
	if (cfg_scan_find(c, "timers", "bridge_redrive_max_ms") == NULL)
		cfg->bridge_redrive_max_ms = app_redrive_max_default_ms(cfg);
	else if (cfg->bridge_redrive_max_ms < cfg->bridge_redrive_ms)
		cfg_report(c, "timers", "bridge_redrive_max_ms", "%" PRIu64 " is below "
			   "bridge_redrive_ms (%" PRIu64 "): the back-off ceiling must not be "
			   "shorter than its first step",
			   cfg->bridge_redrive_max_ms, cfg->bridge_redrive_ms);
}

/* The shard [shard.N] configures on this node, or NULL. */
static const struct app_shard_conf *
shard_hosted(const struct app_config *cfg, uint16_t id)
{
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if (cfg->shards[i].id == id)
			return &cfg->shards[i];
	return NULL;
}

/*
 * A shard another section names (a symbol's ME shard, an active or pinned OMS shard) must
 * run service want. A shard this node hosts says its service in [shard.N]. A shard it does
 * not host may live on a peer (frames for it go to every node it knows, app_shard.c
 * members_of), but a node without peers has nowhere to send it: its frames would find no
 * route and be dropped, so the file is refused.
 */
static void
shard_named(struct cfg_ctx *c, const struct app_config *cfg, const char *sec, const char *key,
	    uint16_t id, enum app_service want)
{
	const struct app_shard_conf *sh = shard_hosted(cfg, id);

	if (sh != NULL && sh->service != want)
		cfg_report(c, sec, key, "shard %u is an %s shard ([shard.%u] service), not %s", id,
			   app_service_name(sh->service), id, app_service_name(want));
	else if (sh == NULL && cfg->dp.peer_count == 0)
		cfg_report(c, sec, key, "shard %u is not configured: this node has no [shard.%u] "
			   "and no [peer.N] that could host it", id, id);
}

/* Every symbol's ME shard, every active and every pinned OMS shard, is one that exists. */
static void
check_shards_named(struct cfg_ctx *c, const struct app_config *cfg)
{
	char sec[32];

	for (uint32_t i = 0; i < cfg->symbol_count; i++) {
		snprintf(sec, sizeof(sec), "symbol.%u", cfg->symbols[i].id);
		shard_named(c, cfg, sec, "me_shard", cfg->symbols[i].me_shard, APP_SERVICE_ME);
	}
	/* Without oms_shards the active set is the hosted OMS shards: right by construction. */
	if (cfg_scan_find(c, "routing", "oms_shards") != NULL) {
		for (uint32_t i = 0; i < cfg->routing.shard_count; i++) {
			uint16_t id = cfg->routing.shards[i];
			shard_named(c, cfg, "routing", "oms_shards", id, APP_SERVICE_OMS);
			for (uint32_t j = 0; j < i; j++)
				if (cfg->routing.shards[j] == id)
					cfg_report(c, "routing", "oms_shards",
						   "shard %u listed twice", id);
		}
	}
	for (uint32_t i = 0; i < cfg->routing.pin_count; i++)
		shard_named(c, cfg, "routing", "pins", cfg->routing.pins[i].shard,
			    APP_SERVICE_OMS);
}

void
cfg_check_cross(struct cfg_ctx *c, const struct app_config *cfg)
{
	if (cfg->db_conninfo[0] != '\0' && !cfg->persister.enabled)
		cfg_report(c, "database", "conninfo", "needs a [persister] lcore to run on");
	/* Holding RX holds Raft traffic too: a member of a replicated shard could never elect. */
	for (uint32_t i = 0; cfg->rx_start_leader && i < cfg->shard_count; i++) {
		if (cfg->shards[i].member_count > 1) {
			cfg_report(c, "port", "rx_start", "leader needs single-member shards (shard "
				   "%u has %u members and elects over this port)",
				   cfg->shards[i].id, cfg->shards[i].member_count);
			break;
		}
	}
	if (cfg->rx_hold_frames >= cfg->ring_size)
		cfg_report(c, "port", "rx_hold_frames", "%u must be below [memory] ring_size (%u)",
			   cfg->rx_hold_frames, cfg->ring_size);
	if (cfg->shard_count == 0)
		cfg_report(c, NULL, NULL, "no [shard.N] section: a node hosts at least one shard");
	/* The gateway lcore takes the place after the last shard's (app.h, app->gateway_index). */
	if (cfg->gateway.enabled && cfg->shard_count >= APP_SHARDS_MAX)
		cfg_report(c, "gateway", NULL, "a node with [gateway] hosts at most %d shards "
			   "(it has %u)", APP_SHARDS_MAX - 1, cfg->shard_count);
	check_shards_named(c, cfg);
}

static const char *const known_sections[] = {
	"node", "eal", "port", "memory", "io", "bridge", "persister", "gateway", "limits", "timers",
	"durability", "database", "paths", "keys", "routing", "mgmt", "sessions", "placement",
};

/* Whatever nobody asked for is a typo or a key this version does not have. An unknown
 * section is reported once, not once per key in it. */
void
cfg_check_unknown(struct cfg_ctx *c)
{
	for (uint32_t i = 0; i < c->count; i++) {
		const struct cfg_scan_ent *e = &c->ents[i];
		const struct cfg_scan_ent *hdr = cfg_scan_find(c, e->sec, "");
		bool sec_known = hdr != NULL && hdr->used;
		for (unsigned k = 0; k < RTE_DIM(known_sections) && !sec_known; k++)
			sec_known = strcmp(e->sec, known_sections[k]) == 0;
		if (e->key[0] == '\0' && !sec_known)
			cfg_report(c, e->sec, NULL, "unknown section");
		else if (e->key[0] != '\0' && !e->used && sec_known)
			cfg_report(c, e->sec, e->key, "unknown key");
	}
}

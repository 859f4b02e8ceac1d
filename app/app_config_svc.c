/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The services' sections of the configuration (app_config_int.h): [limits], [timers],
 * [durability], [database], [paths], [keys], [mgmt], [routing] and [symbol.N]. What one
 * section says about another (a symbol's ME shard, the routed OMS shards) and the windows
 * the exactly-once argument relies on (timers and sizes against each other) are checked
 * after every section is read, in app_config_check.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "app_config_int.h"

void
cfg_sec_rest(struct cfg_ctx *c, struct app_config *cfg)
{
	const char *v;

	cfg_get_u64(c, "limits", "resident_users", false, 1, 1u << 30, &cfg->resident_users_max);
	cfg_get_u64(c, "limits", "parked_orders", false, 1, 1u << 30, &cfg->parked_orders_max);
	cfg_get_u64(c, "limits", "inflight_sagas", false, 1, 1u << 30, &cfg->inflight_sagas_max);
	cfg_get_u64(c, "limits", "waiting_users", false, 1, 1u << 24, &cfg->waiting_users_max);
	cfg_get_u64(c, "limits", "report_ring", false, 1024, 1u << 26, &cfg->report_ring);
	if ((cfg->report_ring & (cfg->report_ring - 1)) != 0)
		cfg_report(c, "limits", "report_ring", "%" PRIu64 " is not a power of two",
			   cfg->report_ring);
	cfg_get_u64(c, "limits", "evictions_in_flight", false, 1, 1u << 20, &cfg->evictions_max);
	cfg_get_u64(c, "timers", "admit_wait_ms", false, 1, 600000, &cfg->admit_wait_ms);
	cfg_get_u64(c, "timers", "shed_ack_us", false, 0, 10000000, &cfg->shed_ack_us);
	cfg_get_u64(c, "timers", "shed_window_us", false, 100, 10000000, &cfg->shed_window_us);
	cfg_get_u64(c, "timers", "shed_wait_us", false, 0, 10000000, &cfg->shed_wait_us);

	cfg_get_u64(c, "timers", "user_ttl_ms", false, 1, UINT32_MAX, &cfg->user_ttl_ms);
	cfg_get_u64(c, "timers", "sweep_ms", false, 1, UINT32_MAX, &cfg->sweep_ms);
	cfg_get_u64(c, "timers", "sweep_evict_max", false, 1, 1u << 24, &cfg->sweep_evict_max);
	cfg_get_u64(c, "timers", "tick_ms", false, 1, 60000, &cfg->tick_ms);
	cfg_get_u64(c, "timers", "bridge_redrive_ms", false, 1, 600000, &cfg->bridge_redrive_ms);
	cfg_get_u64(c, "timers", "election_ms", false, 10, 60000, &cfg->election_ms);
	cfg_get_u64(c, "timers", "heartbeat_ms", false, 1, 60000, &cfg->heartbeat_ms);
	cfg_get_u64(c, "limits", "orders", false, 64, 1u << 26, &cfg->orders_max);
	cfg_get_u64(c, "limits", "log_entries", false, 1024, 1u << 26, &cfg->log_entries_max);
	cfg_get_u64(c, "limits", "log_mb", false, 1, 4095, &cfg->log_mb);
	cfg_get_u64(c, "limits", "snapshot_mb", false, 1, 2047, &cfg->snapshot_mb);
	cfg_get_u64(c, "limits", "snapshot_entries", false, 16, 1u << 30, &cfg->snapshot_entries);
	cfg_get_u64(c, "limits", "dedup_window_ms", false, 1, 3600000, &cfg->dedup_window_ms);
	/* 0 turns the money-leak backstop off: allowed, never the default (docs/oms.md). */
	cfg_get_u64(c, "timers", "reconcile_ms", false, 0, UINT32_MAX, &cfg->reconcile_ms);
	cfg_get_u64(c, "limits", "me_events", false, 64, 1u << 20, &cfg->me_events_max);
	if ((cfg->me_events_max & (cfg->me_events_max - 1)) != 0)
		cfg_report(c, "limits", "me_events", "%" PRIu64 " is not a power of two",
			   cfg->me_events_max);
	cfg_get_u64(c, "limits", "writeback_max", false, 1, 1u << 20, &cfg->writeback_max);
	cfg_get_u64(c, "timers", "flush_ms", false, 0, 3600000, &cfg->flush_ms);
	/* The OMS clientOrderId / transfer_id window (docs/me-contract.md, "Windows"): at least
	 * 2 (a pinned transfer outcome beside an order's), at most what oms_limits_check takes. */
	cfg_get_u64(c, "limits", "dedup_per_user", false, 2, 4096, &cfg->dedup_per_user);
	cfg_get_u64(c, "timers", "bridge_redrive_max_ms", false, 1, 3600000,
		    &cfg->bridge_redrive_max_ms);
	cfg_get_u64(c, "timers", "saga_old_ms", false, 1, UINT32_MAX, &cfg->saga_old_ms);

	cfg_get_u64(c, "limits", "snapshot_fork_min_mb", false, 0, 2047, &cfg->snapshot_fork_min_mb);
	cfg_get_u64(c, "limits", "shadow_ring_mb", false, 1, 65536, &cfg->shadow_ring_mb);
	v = cfg_get(c, "limits", "snapshot_by");
	if (v != NULL) {
		cfg->snapshot_shadow = strcmp(v, "shadow") == 0;
		if (strcmp(v, "fork") == 0 || strcmp(v, "shadow") == 0)
			cfg->snapshot_fork = true; /* shadow: how a lost copy's snapshot is taken */
		else if (strcmp(v, "lcore") == 0)
			cfg->snapshot_fork = false;
		else
			cfg_report(c, "limits", "snapshot_by", "'%s' is not one of "
				   "shadow|fork|lcore", v);
	}
	v = cfg_get(c, "durability", "mode");
	if (v != NULL) {
		if (strcmp(v, "memory") == 0)
			cfg->durability = APP_DURABILITY_MEMORY;
		else if (strcmp(v, "durable") == 0)
			cfg->durability = APP_DURABILITY_DURABLE;
		else
			cfg_report(c, "durability", "mode", "'%s' is not one of memory|durable", v);
	}
	cfg_get_str(c, "database", "conninfo", cfg->db_conninfo, sizeof(cfg->db_conninfo));
	cfg_get_str(c, "paths", "data_dir", cfg->data_dir, sizeof(cfg->data_dir));
	cfg_get_str(c, "paths", "mgmt_socket", cfg->mgmt_socket, sizeof(cfg->mgmt_socket));
	cfg_get_str(c, "paths", "mgmt_group", cfg->mgmt_group, sizeof(cfg->mgmt_group));
	cfg_get_str(c, "paths", "stats_file", cfg->stats_file, sizeof(cfg->stats_file));
	if (cfg->data_dir[0] == '\0')
		cfg_report(c, "paths", "data_dir", "empty");
	cfg_get_key(c, "keys", "peer", &cfg->dp.peer_key);
	cfg_get_key(c, "keys", "client", &cfg->dp.client_key);

	const char *s = "sessions";
	cfg_get_str(c, s, "keys_file", cfg->keys_file, sizeof(cfg->keys_file));
	const char *src = cfg_get(c, s, "keys_source");
	if (src != NULL) {
		if (strcmp(src, "database") == 0)
			cfg->keys_from_db = true;
		else if (strcmp(src, "file") != 0)
			cfg_report(c, s, "keys_source", "'%s' is not one of file|database", src);
	}
	if (cfg->keys_from_db && cfg->db_conninfo[0] == '\0')
		cfg_report(c, s, "keys_source", "database needs [database] conninfo");
	if (cfg->keys_from_db && cfg->keys_file[0] != '\0')
		cfg_report(c, s, "keys_file", "not with keys_source = database (one source of keys)");
	cfg_get_bool(c, s, "allow_unauthenticated", &cfg->allow_unauthenticated);
	cfg_get_u64(c, s, "logon_window_ms", false, 100, 600000, &cfg->logon_window_ms);
	cfg_get_u64(c, s, "heartbeat_ms", false, AUTH_HEARTBEAT_MIN_MS, AUTH_HEARTBEAT_MAX_MS,
		    &cfg->session_heartbeat_ms);
	cfg_get_u64(c, s, "sessions_max", false, 1, 1u << 20, &cfg->sessions_max);
	cfg_get_u64(c, s, "msgs_per_sec", false, 0, 1u << 30, &cfg->session_msgs_per_sec);
	cfg_get_u64(c, s, "warn_pct", false, 0, 100, &cfg->session_warn_pct);
	cfg_get_u64(c, s, "logons_per_sec", false, 0, 1u << 20, &cfg->logons_per_sec);
	cfg_get_u64(c, s, "keys_refresh_ms", false, 100, 3600000, &cfg->keys_refresh_ms);
	if (cfg->allow_unauthenticated)
		return;
	/* Safe by default: clients trade only through sessions, so there must be keys, and
	 * the shared client key (which any holder could use for any user) has no place. */
	if (cfg->keys_file[0] == '\0' && !cfg->keys_from_db)
		cfg_report(c, s, "keys_file",
			   "required: clients log on with API keys (or keys_source = database, or "
			   "allow_unauthenticated = true, for development only)");
	if ((cfg->dp.client_key.k0 | cfg->dp.client_key.k1) != 0)
		cfg_report(c, "keys", "client",
			   "the shared client key is for [sessions] allow_unauthenticated = true "
			   "only; clients log on with their own API keys");
	if (cfg->keys_file[0] != '\0') {
		char why[512];
		struct app_keyset *ks = NULL;
		if (app_keyset_load(cfg->keys_file, &ks, why, sizeof(why)) != 0)
			cfg_report(c, s, "keys_file", "%s", why);
		app_keyset_free(ks);
	}
}

/* [routing] epoch, oms_shards = 1,2, pins = user:shard,... Without oms_shards, the OMS
 * shards this node hosts are the active set. */
void
cfg_sec_routing(struct cfg_ctx *c, struct app_config *cfg)
{
	const char *s = "routing";
	struct app_routing_conf *r = &cfg->routing;
	char buf[APP_STR_MAX];
	const char *v;

	cfg_get_u64(c, s, "epoch", false, 1, UINT32_MAX, &r->epoch);
	v = cfg_get(c, s, "oms_shards");
	if (v != NULL) {
		snprintf(buf, sizeof(buf), "%s", v);
		for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
		     tok = strtok_r(NULL, ",", &save)) {
			uint64_t id;
			tok = cfg_trim(tok);
			if (!cfg_parse_u64(tok, &id) || id >= DP_SHARDS_MAX) {
				cfg_report(c, s, "oms_shards", "'%s' is not a shard id (0..%d)", tok,
					   DP_SHARDS_MAX - 1);
				continue;
			}
			if (r->shard_count == WIRE_ROUTE_SHARDS_MAX) {
				cfg_report(c, s, "oms_shards", "more than %d shards",
					   WIRE_ROUTE_SHARDS_MAX);
				break;
			}
			r->shards[r->shard_count++] = (uint16_t)id;
		}
	} else {
		for (uint32_t i = 0; i < cfg->shard_count; i++)
			if (cfg->shards[i].service == APP_SERVICE_OMS &&
			    r->shard_count < WIRE_ROUTE_SHARDS_MAX)
				r->shards[r->shard_count++] = cfg->shards[i].id;
	}
	v = cfg_get(c, s, "pins");
	if (v != NULL && *v != '\0') {
		snprintf(buf, sizeof(buf), "%s", v);
		for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
		     tok = strtok_r(NULL, ",", &save)) {
			uint64_t user, shard;
			tok = cfg_trim(tok);
			char *colon = strchr(tok, ':');
			if (colon == NULL) {
				cfg_report(c, s, "pins", "'%s' is not user:shard", tok);
				continue;
			}
			*colon = '\0';
			if (!cfg_parse_u64(tok, &user) || user == 0 ||
			    !cfg_parse_u64(colon + 1, &shard) || shard >= DP_SHARDS_MAX) {
				cfg_report(c, s, "pins", "'%s:%s' is not user:shard", tok,
					   colon + 1);
				continue;
			}
			if (r->pin_count == WIRE_ROUTE_PINS_MAX) {
				cfg_report(c, s, "pins", "more than %d pins", WIRE_ROUTE_PINS_MAX);
				break;
			}
			r->pins[r->pin_count].user = user;
			r->pins[r->pin_count].shard = (uint16_t)shard;
			r->pin_count++;
		}
	}
	bool any_oms = false;
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		any_oms |= cfg->shards[i].service == APP_SERVICE_OMS;
	if (any_oms && r->shard_count == 0)
		cfg_report(c, s, "oms_shards", "no active OMS shard");
}

void
cfg_sec_symbols(struct cfg_ctx *c, struct app_config *cfg)
{
	for (uint32_t i = 0; i < c->count; i++) {
		const struct cfg_scan_ent *e = &c->ents[i];
		if (e->key[0] != '\0' || strncmp(e->sec, "symbol.", 7) != 0)
			continue;
		const char *s = e->sec;
		c->ents[i].used = true;
		long long id = cfg_section_index(s, "symbol.", UINT32_MAX);
		if (id <= 0) {
			cfg_report(c, s, NULL,
				   "symbol sections are named symbol.<id>, id 1..4294967295");
			continue;
		}
		if (cfg->symbol_count == APP_SYMBOLS_MAX) {
			cfg_report(c, s, NULL, "more than %d symbols", APP_SYMBOLS_MAX);
			continue;
		}
		struct app_symbol_conf *y = &cfg->symbols[cfg->symbol_count++];
		int64_t v;
		memset(y, 0, sizeof(*y));
		y->id = (uint32_t)id;
		y->tick = y->lot = y->min_qty = y->min_notional = y->base_unit = 1;
		y->ref_px = 0;
		CFG_GET_UINT(c, s, "base", true, 1, UINT32_MAX, y->base_asset);
		CFG_GET_UINT(c, s, "quote", true, 1, UINT32_MAX, y->quote_asset);
		CFG_GET_UINT(c, s, "me_shard", true, 0, DP_SHARDS_MAX - 1, y->me_shard);
		cfg_get_i64(c, s, "tick", false, 1, INT64_MAX, &y->tick);
		cfg_get_i64(c, s, "lot", false, 1, INT64_MAX, &y->lot);
		cfg_get_i64(c, s, "min_qty", false, 1, INT64_MAX, &y->min_qty);
		cfg_get_i64(c, s, "min_notional", false, 0, INT64_MAX, &y->min_notional);
		cfg_get_i64(c, s, "base_unit", false, 1, INT64_MAX, &y->base_unit);
		cfg_get_i64(c, s, "ref_px", false, 0, INT64_MAX, &y->ref_px);
		CFG_GET_UINT(c, s, "band_bps", false, 0, 1000000, y->band_bps);
		if (cfg_get_i64(c, s, "maker_fee_bps", false, -10000, 10000, &v))
			y->maker_fee_bps = (int16_t)v;
		if (cfg_get_i64(c, s, "taker_fee_bps", false, -10000, 10000, &v))
			y->taker_fee_bps = (int16_t)v;
		if (y->base_asset == y->quote_asset && y->base_asset != 0)
			cfg_report(c, s, "quote", "same asset as base");
	}
}

/* [mgmt] metrics_listen = A.B.C.D:PORT, loopback only: the listener has no authentication
 * and serves every counter, so it is never reachable from another host. */
void
cfg_sec_mgmt(struct cfg_ctx *c, struct app_config *cfg)
{
	const char *v = cfg_get(c, "mgmt", "metrics_listen");
	if (v == NULL || v[0] == '\0')
		return;
	char host[32];
	const char *colon = strrchr(v, ':');
	size_t hl = colon != NULL ? (size_t)(colon - v) : 0;
	if (colon == NULL || hl == 0 || hl >= sizeof(host) || colon[1] == '\0') {
		cfg_report(c, "mgmt", "metrics_listen",
			   "'%s' is not ADDRESS:PORT (e.g. 127.0.0.1:9464)", v);
		return;
	}
	memcpy(host, v, hl);
	host[hl] = '\0';
	struct in_addr a;
	if (inet_pton(AF_INET, host, &a) != 1) {
		cfg_report(c, "mgmt", "metrics_listen", "'%s' is not an IPv4 address", host);
		return;
	}
	if ((ntohl(a.s_addr) >> 24) != 127) {
		cfg_report(c, "mgmt", "metrics_listen", "%s is not a loopback address "
			   "(127.0.0.0/8): the metrics listener has no authentication", host);
		return;
	}
	char *end;
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || port == 0 || port > 65535 || colon[1] == '-') {
		cfg_report(c, "mgmt", "metrics_listen", "port '%s' is not 1..65535", colon + 1);
		return;
	}
	snprintf(cfg->metrics_listen, sizeof(cfg->metrics_listen), "%s", v);
	cfg->metrics_ip_be = a.s_addr;
	cfg->metrics_port = (uint16_t)port;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration loader: app_config_load runs the two passes (app_config_int.h says what
 * each file of the loader owns) and collects every error, not just the first, each as
 * FILE:LINE: [section] key: reason; app_config_dump prints what was loaded.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cfgfile.h>

#include "app_config_int.h"

static int config_load(struct cfg_ctx *cp, struct app_config *cfg);

int
app_config_load(const char *path, struct app_config *cfg, FILE *err)
{
	struct cfg_ctx c = { .file = path, .err = err };
	return config_load(&c, cfg);
}

int
app_config_load_join(const char *path, struct app_config *cfg, FILE *err)
{
	struct cfg_ctx c = { .file = path, .err = err, .join = true };
	return config_load(&c, cfg);
}

static int
config_load(struct cfg_ctx *cp, struct app_config *cfg)
{
	struct cfg_ctx c = *cp;
	const char *path = c.file;
	FILE *err = c.err;
	struct rte_cfgfile_parameters params = { .comment_character = CFG_COMMENT };

	cfg_defaults(cfg);
	snprintf(cfg->path, sizeof(cfg->path), "%s", path);
	if (cfg_scan_file(&c, path) != 0 || c.errors > 0)
		goto out;
	c.cfg = rte_cfgfile_load_with_params(path, CFG_FLAG_EMPTY_VALUES, &params);
	if (c.cfg == NULL) {
		fprintf(err, "%s: rte_cfgfile could not parse the file\n", path);
		c.errors++;
		goto out;
	}

	cfg_sec_node(&c, cfg);
	cfg_sec_eal(&c, cfg);
	cfg_sec_port(&c, cfg);
	cfg_sec_memory(&c, cfg);
	cfg_get_lcore(&c, "io", &cfg->io);
	cfg_get_io_cpus(&c, cfg); /* after [port] (rx_queues) */
	if (rte_cfgfile_has_section(c.cfg, "bridge")) {
		cfg_get_lcore(&c, "bridge", &cfg->bridge);
		cfg->bridge_seal = true;
		cfg_get_bool(&c, "bridge", "seal", &cfg->bridge_seal);
	}
	if (rte_cfgfile_has_section(c.cfg, "persister"))
		cfg_get_lcore(&c, "persister", &cfg->persister);
	if (rte_cfgfile_has_section(c.cfg, "gateway"))
		cfg_get_lcore(&c, "gateway", &cfg->gateway);
	cfg_sec_peers(&c, cfg);
	cfg_sec_shards(&c, cfg);
	cfg_sec_rest(&c, cfg);
	cfg_sec_mgmt(&c, cfg);
	cfg_sec_routing(&c, cfg);
	cfg_sec_symbols(&c, cfg);
	cfg_sec_placement(&c, cfg);
	cfg_check_windows(&c, cfg);
	cfg_check_cross(&c, cfg);
	cfg_check_cpus(&c, cfg);
	cfg_check_unknown(&c);
	rte_cfgfile_close(c.cfg);
out:
	free(c.ents);
	return c.errors;
}

static void
ip_str(uint32_t ip_be, char *buf, size_t size)
{
	struct in_addr a = { .s_addr = ip_be };
	if (inet_ntop(AF_INET, &a, buf, (socklen_t)size) == NULL)
		snprintf(buf, size, "?");
}

void
app_config_dump(const struct app_config *cfg, FILE *out)
{
	char ip[INET_ADDRSTRLEN];

	fprintf(out, "config %s\n", cfg->path);
	ip_str(cfg->dp.ip_be, ip, sizeof(ip));
	fprintf(out, "node.id = %u\nnode.ip = %s/%u\nnode.udp_port = %u\nnode.mtu = %u\n",
		cfg->dp.node_id, ip, cfg->dp.prefix_len, cfg->dp.udp_port, cfg->dp.mtu);
	fprintf(out, "port.dev = %s (%s, ethdev %s)\n", cfg->port_dev,
		cfg->port_is_vdev ? "vdev" : "pci", cfg->dp.port_name);
	fprintf(out, "port.rx_start = %s\nport.rx_hold_frames = %u\n",
		cfg->rx_start_leader ? "leader" : "now", cfg->rx_hold_frames);
	fprintf(out, "memory.mbufs = %u\nmemory.ring_size = %u\n", cfg->dp.mbufs, cfg->ring_size);
	fprintf(out, "io.cpu = %u\nio.idle = %s\n", cfg->io.cpu,
		dp_idle_mode_name(cfg->io.idle.mode));
	if (cfg->bridge.enabled)
		fprintf(out, "bridge.cpu = %u\nbridge.seal = %s\n", cfg->bridge.cpu,
			cfg->bridge_seal ? "on" : "off");
	if (cfg->gateway.enabled)
		fprintf(out, "gateway.cpu = %u\ngateway.idle = %s\n", cfg->gateway.cpu,
			dp_idle_mode_name(cfg->gateway.idle.mode));
	if (cfg->dp.rx_queues > 1) {
		fprintf(out, "port.rx_queues = %u\nio.cpus =", cfg->dp.rx_queues);
		for (uint32_t k = 0; k < cfg->dp.rx_queues; k++)
			fprintf(out, "%s%u", k ? "," : " ", cfg->io_cpus[k]);
		fprintf(out, "\n");
	}
	for (uint32_t i = 0; i < cfg->shard_count; i++) {
		const struct app_shard_conf *s = &cfg->shards[i];
		fprintf(out, "shard.%u = %s, %u member(s), cpu %u, idle %s", s->id,
			app_service_name(s->service), s->member_count, s->lcore.cpu,
			dp_idle_mode_name(s->lcore.idle.mode));
		for (uint32_t p = 0; p < s->leader_pref_count; p++)
			fprintf(out, "%s%u", p == 0 ? ", leader_preference " : ",",
				s->leader_pref[p]);
		fputc('\n', out);
	}
	for (uint32_t i = 0; i < cfg->dp.peer_count; i++) {
		ip_str(cfg->dp.peers[i].ip_be, ip, sizeof(ip));
		fprintf(out, "peer.%u = %s:%u\n", cfg->dp.peers[i].node_id, ip,
			rte_be_to_cpu_16(cfg->dp.peers[i].port_be));
	}
	fprintf(out, "routing.epoch = %" PRIu64 "\nrouting.oms_shards =", cfg->routing.epoch);
	for (uint32_t i = 0; i < cfg->routing.shard_count; i++)
		fprintf(out, "%s%u", i ? "," : " ", cfg->routing.shards[i]);
	fprintf(out, "\nrouting.pins = %u\n", cfg->routing.pin_count);
	for (uint32_t i = 0; i < cfg->symbol_count; i++) {
		const struct app_symbol_conf *y = &cfg->symbols[i];
		fprintf(out, "symbol.%u = base %u quote %u me_shard %u tick %" PRId64 " lot %" PRId64
			"\n", y->id, y->base_asset, y->quote_asset, y->me_shard, y->tick, y->lot);
	}
	fprintf(out, "limits.dedup_window_ms = %" PRIu64 "\n", cfg->dedup_window_ms);
	fprintf(out, "timers.reconcile_ms = %" PRIu64 "\n", cfg->reconcile_ms);
	fprintf(out, "limits.me_events = %" PRIu64 "\n", cfg->me_events_max);
	fprintf(out, "timers.flush_ms = %" PRIu64 "%s\nlimits.writeback_max = %" PRIu64 "\n",
		cfg->flush_ms, cfg->flush_ms == 0 ? " (write-back off)" : "", cfg->writeback_max);
	fprintf(out, "limits.dedup_per_user = %" PRIu64 "\n", cfg->dedup_per_user);
	fprintf(out, "placement.policy = %s\nplacement.check_ms = %" PRIu64
		"\nplacement.settle_ms = %" PRIu64 "\n", app_place_policy_name(cfg->place_policy),
		cfg->place_check_ms, cfg->place_settle_ms);
	fprintf(out, "mgmt.metrics_listen = %s\n",
		cfg->metrics_listen[0] ? cfg->metrics_listen : "off");
	fprintf(out, "database = %s\n", cfg->db_conninfo[0] ? "configured" : "none");
	fprintf(out, "sessions.keys_file = %s\nsessions.allow_unauthenticated = %s\n",
		cfg->keys_file[0] ? cfg->keys_file : "none",
		cfg->allow_unauthenticated ? "true (development only)" : "false");
	fprintf(out, "sessions.logon_window_ms = %" PRIu64 "\nsessions.heartbeat_ms = %" PRIu64
		"\nsessions.sessions_max = %" PRIu64 "\nsessions.msgs_per_sec = %" PRIu64 "\n",
		cfg->logon_window_ms, cfg->session_heartbeat_ms, cfg->sessions_max,
		cfg->session_msgs_per_sec);
	fprintf(out, "durability.mode = %s\nkeys.peer = %s\nkeys.client = %s\n",
		cfg->durability == APP_DURABILITY_DURABLE ? "durable" : "memory",
		(cfg->dp.peer_key.k0 | cfg->dp.peer_key.k1) ? "set" : "none",
		(cfg->dp.client_key.k0 | cfg->dp.client_key.k1) ? "set" : "none");
}

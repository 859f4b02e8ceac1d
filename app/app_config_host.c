/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration's defaults and the node's own sections (app_config_int.h): [node],
 * [eal], [port], [memory], [peer.N] and [shard.N]. They describe the host this process runs
 * on and the Raft groups it is a member of; app_config_svc.c reads what the services do.
 * The service names [shard.N] service parses are printed by app_service_name, here too.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <rte_common.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "app_config_int.h"

/* Safe on a shared development box; production configs say idle = busy. */
static const struct dp_idle_policy idle_default = {
	.mode = DP_IDLE_SLEEP,
	.spins = 200,
	.sleep_us_max = 200,
	.sleep_us_min = 50,
	.wait_us_max = 1000,
};

void
cfg_defaults(struct app_config *cfg)
{
	const struct dp_idle_policy idle = idle_default;

	memset(cfg, 0, sizeof(*cfg));
	cfg->dp.prefix_len = 24;
	cfg->dp.udp_port = 7400;
	cfg->dp.mtu = 1500;
	cfg->dp.rx_desc = 1024;
	cfg->dp.rx_queues = 1;
	cfg->dp.tx_desc = 1024;
	cfg->dp.burst = 32;
	cfg->dp.mbufs = 8191;
	cfg->dp.mbuf_cache = 256;
	cfg->dp.mbuf_data_room = RTE_MBUF_DEFAULT_BUF_SIZE;
	cfg->dp.arp_timeout_ms = 60000;
	cfg->ring_size = 1024;
	cfg->io.idle = idle;
	cfg->io.cpu = 0;
	cfg->bridge.idle = idle;
	cfg->persister.idle = idle;
	cfg->gateway.idle = idle;
	cfg->duty_threshold_ns = 100000;
	cfg->resident_users_max = 100000;
	cfg->parked_orders_max = 10000;
	cfg->waiting_users_max = 4096;
	cfg->report_ring = 65536;
	cfg->evictions_max = 1024;
	cfg->admit_wait_ms = 1000;
	cfg->shed_ack_us = 0; /* off unless the file sets it: see docs/appliance.md "Overload" */
	cfg->shed_window_us = 5000;
	cfg->shed_wait_us = 0;
	cfg->inflight_sagas_max = 10000;
	cfg->user_ttl_ms = 600000;
	cfg->sweep_ms = 1000;
	cfg->sweep_evict_max = 1000;
	cfg->tick_ms = 10;
	cfg->bridge_redrive_ms = 200;
	cfg->election_ms = 150;
	cfg->heartbeat_ms = 25;
	cfg->reconcile_ms = 10000;
	cfg->orders_max = 65536;
	cfg->log_entries_max = 65536;
	cfg->log_mb = 64;
	cfg->snapshot_mb = 16;
	cfg->snapshot_entries = 20000;
	cfg->snapshot_fork = true; /* the shard never stalls for a whole serialisation */
	cfg->snapshot_fork_min_mb = 16;
	cfg->shadow_ring_mb = 64;
	cfg->dedup_window_ms = 0; /* derived from the timers (app_config_check.c) */
	cfg->me_events_max = 8192;
	cfg->flush_ms = 1000;
	cfg->writeback_max = 1024;
	cfg->dedup_per_user = 16;
	cfg->bridge_redrive_max_ms = 0; /* derived from bridge_redrive_ms (app_config_check.c) */
	cfg->saga_old_ms = 5000;
	cfg->routing.epoch = 1;
	cfg->place_policy = APP_PLACE_NONE; /* leaders move only when the file asks for it */
	cfg->place_check_ms = 500;
	cfg->place_settle_ms = 5000;
	cfg->durability = APP_DURABILITY_DURABLE; /* memory mode is an explicit choice */
	snprintf(cfg->data_dir, sizeof(cfg->data_dir), "/var/lib/omsd");
	snprintf(cfg->mgmt_socket, sizeof(cfg->mgmt_socket), "/run/omsd/omsd.sock");
	snprintf(cfg->mgmt_group, sizeof(cfg->mgmt_group), "omsd");
	cfg->logon_window_ms = 5000;
	cfg->session_heartbeat_ms = 1000;
	cfg->sessions_max = 1024;
	cfg->session_msgs_per_sec = 50000;
	cfg->session_warn_pct = 80;
	cfg->logons_per_sec = 2000;
	cfg->keys_refresh_ms = 1000;
}

void
cfg_sec_node(struct cfg_ctx *c, struct app_config *cfg)
{
	const char *s = "node";
	const char *v;
	uint64_t id = 0;

	if (cfg_get_u64(c, s, "id", true, 1, UINT32_MAX, &id))
		cfg->dp.node_id = (uint32_t)id;
	v = cfg_get(c, s, "ip");
	if (cfg_need(c, s, "ip", v)) {
		char buf[64];
		snprintf(buf, sizeof(buf), "%s", v);
		char *slash = strchr(buf, '/');
		uint64_t plen = 24;
		if (slash != NULL) {
			*slash = '\0';
			if (!cfg_parse_u64(slash + 1, &plen) || plen < 1 || plen > 32) {
				cfg_report(c, s, "ip", "prefix length '%s' is not 1..32", slash + 1);
				plen = 24;
			}
		}
		if (!cfg_parse_ipv4(buf, &cfg->dp.ip_be) || cfg->dp.ip_be == 0 ||
		    cfg->dp.ip_be == UINT32_MAX)
			cfg_report(c, s, "ip", "'%s' is not a unicast IPv4 address (a.b.c.d[/len])",
				   v);
		cfg->dp.prefix_len = (uint8_t)plen;
	}
	cfg_get_ipv4(c, s, "gateway", false, &cfg->dp.gateway_be);
	if (cfg_get_mac(c, s, "mac", &cfg->dp.mac))
		cfg->dp.has_mac = true;
	CFG_GET_UINT(c, s, "udp_port", false, 1, 65535, cfg->dp.udp_port);
	CFG_GET_UINT(c, s, "mtu", false, 576, WIRE_FRAME_MAX + 28, cfg->dp.mtu);
}

static bool
is_pci_addr(const char *v)
{
	/* [DDDD:]BB:DD.F */
	int n = 0;
	unsigned d, b, dev, fn;
	if (sscanf(v, "%x:%x:%x.%x%n", &d, &b, &dev, &fn, &n) == 4 && (v[n] == '\0' || v[n] == ','))
		return strchr(v, ':') - v == 4;
	n = 0;
	if (sscanf(v, "%x:%x.%x%n", &b, &dev, &fn, &n) == 3 && (v[n] == '\0' || v[n] == ','))
		return strchr(v, ':') - v == 2;
	return false;
}

void
cfg_sec_port(struct cfg_ctx *c, struct app_config *cfg)
{
	const char *s = "port";
	const char *v = cfg_get(c, s, "dev");

	if (cfg_need(c, s, "dev", v)) {
		size_t name_len = strcspn(v, ",");
		if (strncmp(v, "net_", 4) == 0) {
			cfg->port_is_vdev = true;
		} else if (is_pci_addr(v)) {
			cfg->port_is_vdev = false;
		} else {
			cfg_report(c, s, "dev",
				   "'%s' is neither a vdev (net_tap0,iface=x | "
				   "net_af_packet0,iface=x | net_pcap0,... | net_ring0 | net_null0) "
				   "nor a PCI address", v);
			name_len = 0;
		}
		if (name_len >= sizeof(cfg->dp.port_name)) {
			cfg_report(c, s, "dev", "device name longer than %zu bytes",
				   sizeof(cfg->dp.port_name) - 1);
		} else if (name_len > 0) {
			snprintf(cfg->port_dev, sizeof(cfg->port_dev), "%s", v);
			memcpy(cfg->dp.port_name, v, name_len);
			cfg->dp.port_name[name_len] = '\0';
			/* A short PCI address is named with its domain by the EAL. */
			if (!cfg->port_is_vdev && strchr(v, ':') - v == 2)
				snprintf(cfg->dp.port_name, sizeof(cfg->dp.port_name), "0000:%.*s",
					 (int)name_len, v);
		}
	}
	CFG_GET_UINT(c, s, "rx_desc", false, 64, 16384, cfg->dp.rx_desc);
	CFG_GET_UINT(c, s, "tx_desc", false, 64, 16384, cfg->dp.tx_desc);
	CFG_GET_UINT(c, s, "burst", false, 1, DP_BURST_MAX, cfg->dp.burst);
	CFG_GET_UINT(c, s, "rx_queues", false, 1, DP_IO_MAX, cfg->dp.rx_queues);
	cfg_get_bool(c, s, "promiscuous", &cfg->dp.promiscuous);
	CFG_GET_UINT(c, s, "arp_timeout_ms", false, 1000, 3600000, cfg->dp.arp_timeout_ms);
	v = cfg_get(c, s, "rx_start");
	if (v != NULL) {
		if (strcmp(v, "leader") == 0)
			cfg->rx_start_leader = true;
		else if (strcmp(v, "now") == 0)
			cfg->rx_start_leader = false;
		else
			cfg_report(c, s, "rx_start", "'%s' is not one of now|leader", v);
	}
	CFG_GET_UINT(c, s, "rx_hold_frames", false, 0, 1u << 20, cfg->rx_hold_frames);
}

void
cfg_sec_memory(struct cfg_ctx *c, struct app_config *cfg)
{
	const char *s = "memory";
	uint64_t ring = cfg->ring_size;

	CFG_GET_UINT(c, s, "mbufs", false, 1023, 1u << 24, cfg->dp.mbufs);
	CFG_GET_UINT(c, s, "mbuf_cache", false, 0, RTE_MEMPOOL_CACHE_MAX_SIZE, cfg->dp.mbuf_cache);
	CFG_GET_UINT(c, s, "mbuf_size", false, RTE_PKTMBUF_HEADROOM + 1518, UINT16_MAX,
		     cfg->dp.mbuf_data_room);
	if (cfg_get_u64(c, s, "ring_size", false, 64, 1u << 20, &ring)) {
		if (!rte_is_power_of_2((uint32_t)ring))
			cfg_report(c, s, "ring_size", "%" PRIu64 " is not a power of two", ring);
		else
			cfg->ring_size = (uint32_t)ring;
	}
	if (cfg->dp.mbuf_cache * 1.5 > cfg->dp.mbufs)
		cfg_report(c, s, "mbuf_cache", "%u is too large for %u mbufs (at most mbufs/1.5)",
			   cfg->dp.mbuf_cache, cfg->dp.mbufs);
	uint64_t us;
	if (cfg_get_u64(c, s, "duty_threshold_us", false, 1, 10000000, &us))
		cfg->duty_threshold_ns = us * 1000;
}

void
cfg_sec_eal(struct cfg_ctx *c, struct app_config *cfg)
{
	const char *s = "eal";
	static const char *const reserved[] = { "-l", "-c", "--lcores", "--main-lcore",
						"--master-lcore" };

	CFG_GET_UINT(c, s, "main_cpu", false, 0, CPU_SETSIZE - 1, cfg->main_cpu);
	if (!cfg_get_str(c, s, "args", cfg->eal_buf, sizeof(cfg->eal_buf)))
		return;
	char *save = NULL;
	for (char *tok = strtok_r(cfg->eal_buf, " \t", &save); tok != NULL;
	     tok = strtok_r(NULL, " \t", &save)) {
		for (unsigned i = 0; i < RTE_DIM(reserved); i++) {
			size_t n = strlen(reserved[i]);
			if (strncmp(tok, reserved[i], n) == 0 && (tok[n] == '\0' || tok[n] == '=' ||
								  reserved[i][1] != '-'))
				cfg_report(c, s, "args",
					   "'%s' is not allowed: omsd builds the lcore map from "
					   "the cpu keys of [io], [shard.N], [bridge], [persister], [gateway]",
					   tok);
		}
		if (cfg->eal_arg_count == APP_EAL_ARGS_MAX) {
			cfg_report(c, s, "args", "more than %d arguments", APP_EAL_ARGS_MAX);
			return;
		}
		cfg->eal_args[cfg->eal_arg_count++] = tok;
	}
}

void
cfg_sec_peers(struct cfg_ctx *c, struct app_config *cfg)
{
	for (uint32_t i = 0; i < c->count; i++) {
		const struct cfg_scan_ent *e = &c->ents[i];
		long long id;
		if (e->key[0] != '\0' || strncmp(e->sec, "peer.", 5) != 0)
			continue;
		const char *s = e->sec;
		c->ents[i].used = true;
		id = cfg_section_index(s, "peer.", UINT32_MAX);
		if (id <= 0) {
			cfg_report(c, s, NULL,
				   "peer sections are named peer.<node id>, id 1..4294967295");
			continue;
		}
		if (cfg->dp.peer_count == DP_PEERS_MAX) {
			cfg_report(c, s, NULL, "more than %d peers", DP_PEERS_MAX);
			continue;
		}
		struct dp_peer *p = &cfg->dp.peers[cfg->dp.peer_count++];
		p->node_id = (uint32_t)id;
		if ((uint32_t)id == cfg->dp.node_id)
			cfg_report(c, s, NULL, "node %lld is this node ([node] id), not a peer", id);
		cfg_get_ipv4(c, s, "ip", true, &p->ip_be);
		uint64_t port = cfg->dp.udp_port;
		cfg_get_u64(c, s, "udp_port", false, 1, 65535, &port);
		p->port_be = rte_cpu_to_be_16((uint16_t)port);
		p->has_mac = cfg_get_mac(c, s, "mac", &p->mac);
		if (p->ip_be == cfg->dp.ip_be && p->ip_be != 0)
			cfg_report(c, s, "ip", "same address as this node");
		for (uint32_t j = 0; j + 1 < cfg->dp.peer_count; j++)
			if (p->ip_be != 0 && cfg->dp.peers[j].ip_be == p->ip_be)
				cfg_report(c, s, "ip", "same address as [peer.%u]",
					   cfg->dp.peers[j].node_id);
	}
}

static bool
member_known(const struct app_config *cfg, uint32_t id)
{
	if (id == cfg->dp.node_id)
		return true;
	for (uint32_t i = 0; i < cfg->dp.peer_count; i++)
		if (cfg->dp.peers[i].node_id == id)
			return true;
	return false;
}

void
cfg_sec_shards(struct cfg_ctx *c, struct app_config *cfg)
{
	for (uint32_t i = 0; i < c->count; i++) {
		const struct cfg_scan_ent *e = &c->ents[i];
		if (e->key[0] != '\0' || strncmp(e->sec, "shard.", 6) != 0)
			continue;
		const char *s = e->sec;
		c->ents[i].used = true;
		long long id = cfg_section_index(s, "shard.", DP_SHARDS_MAX - 1);
		if (id < 0 || id >= DP_SHARDS_MAX) {
			cfg_report(c, s, NULL, "shard sections are named shard.<id>, id 0..%d",
				   DP_SHARDS_MAX - 1);
			continue;
		}
		if (cfg->shard_count == APP_SHARDS_MAX) {
			cfg_report(c, s, NULL, "more than %d shards on one host", APP_SHARDS_MAX);
			continue;
		}
		struct app_shard_conf *sh = &cfg->shards[cfg->shard_count++];
		sh->id = (uint16_t)id;
		sh->lcore.idle = idle_default;
		const char *v = cfg_get(c, s, "service");
		if (cfg_need(c, s, "service", v)) {
			if (strcmp(v, "me") == 0)
				sh->service = APP_SERVICE_ME;
			else if (strcmp(v, "oms") == 0)
				sh->service = APP_SERVICE_OMS;
			else if (strcmp(v, "echo") == 0)
				sh->service = APP_SERVICE_ECHO;
			else
				cfg_report(c, s, "service", "'%s' is not one of me|oms|echo", v);
		}
		int n = cfg_get_id_list(c, s, "members", sh->members, APP_MEMBERS_MAX);
		if (n > 0) {
			sh->member_count = (uint32_t)n;
			bool self = false;
			if (n != 1 && n != 3 && n != 5)
				cfg_report(c, s, "members",
					   "a Raft group has 1, 3 or 5 members, not %d", n);
			for (int m = 0; m < n; m++) {
				self |= sh->members[m] == cfg->dp.node_id;
				if (!member_known(cfg, sh->members[m]))
					cfg_report(c, s, "members", "node %u has no [peer.%u] "
						   "section", sh->members[m], sh->members[m]);
			}
			if (!self && c->join)
				sh->joining = true;
			else if (!self)
				cfg_report(c, s, "members", "this node (%u) is not a member: "
					   "list only shards it hosts, or start it with --join to "
					   "join them as a learner", cfg->dp.node_id);
		}
		cfg_get_lcore(c, s, &sh->lcore);
	}
}

const char *
app_service_name(enum app_service s)
{
	return s == APP_SERVICE_ME ? "me" : s == APP_SERVICE_OMS ? "oms" :
	       s == APP_SERVICE_ECHO ? "echo" : "?";
}

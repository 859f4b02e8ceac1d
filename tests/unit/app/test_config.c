/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration loader (app/app_config.h) without an EAL: defaults of a minimal file,
 * every key's bad value, unknown and duplicate names, and the checks that span sections.
 * Each case writes a file into a fresh directory, loads it with the errors going to a memory
 * stream, and looks for the FILE:LINE: [section] key: prefix the operator would read.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/app_config.h"

static char dir[64];
static char path[128];
static unsigned cpu;           /* a CPU this process may run on */
static struct app_config cfg;
static char *errs;             /* what the loader reported */
static size_t errs_len;

static void
setup(void)
{
	cpu_set_t set;
	snprintf(dir, sizeof(dir), "/tmp/omsd-test-config.XXXXXX");
	cr_assert(not(eq(ptr, mkdtemp(dir), NULL)));
	snprintf(path, sizeof(path), "%s/omsd.ini", dir);
	cr_assert(eq(int, sched_getaffinity(0, sizeof(set), &set), 0));
	for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set); cpu++)
		;
	errs = NULL;
}

static void
teardown(void)
{
	free(errs);
	unlink(path);
	rmdir(dir);
}

/* Write text as the config file and load it; returns the loader's error count. */
static int
load(const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert(not(eq(ptr, f, NULL)));
	fputs(text, f);
	fclose(f);
	free(errs);
	errs = NULL;
	FILE *err = open_memstream(&errs, &errs_len);
	int n = app_config_load(path, &cfg, err);
	fclose(err);
	return n;
}

/* The minimal good file: one OMS and one ME shard on a single node, every lcore on cpu. */
static void
minimal(char *buf, size_t size, const char *extra)
{
	snprintf(buf, size,
		 "[node]\nid = 1\nip = 10.9.0.2/24\n"
		 "[eal]\nmain_cpu = %u\n"
		 "[port]\ndev = net_null0\n"
		 "[io]\ncpu = %u\n"
		 "[shard.1]\nservice = oms\nmembers = 1\ncpu = %u\n"
		 "[shard.2]\nservice = me\nmembers = 1\ncpu = %u\n"
		 "[sessions]\nallow_unauthenticated = true\n"
		 "%s",
		 cpu, cpu, cpu, cpu, extra);
}

static int
load_minimal(const char *extra)
{
	char buf[4096];
	minimal(buf, sizeof(buf), extra);
	return load(buf);
}

/* The loader said want (a substring) somewhere. */
static void
said(const char *want)
{
	cr_assert(not(eq(ptr, strstr(errs ? errs : "", want), NULL)), "want '%s' in:\n%s", want,
		  errs ? errs : "");
}

/* Goal: a minimal file loads and every key it leaves out has its documented default.
 * Method: load the minimal file, compare fields with docs/dataplane.md's defaults. */
Test(app_config, minimal_defaults, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, load_minimal(""), 0), "%s", errs);
	cr_assert(eq(u32, cfg.dp.node_id, 1));
	cr_assert(eq(u8, cfg.dp.prefix_len, 24));
	cr_assert(eq(u16, cfg.dp.udp_port, 7400));
	cr_assert(eq(u16, cfg.dp.mtu, 1500));
	cr_assert(eq(u16, cfg.dp.rx_desc, 1024));
	cr_assert(eq(u16, cfg.dp.burst, 32));
	cr_assert(eq(u32, cfg.dp.mbufs, 8191));
	cr_assert(eq(u32, cfg.dp.arp_timeout_ms, 60000));
	cr_assert(eq(str, cfg.dp.port_name, "net_null0"));
	cr_assert(cfg.port_is_vdev);
	cr_assert(not(cfg.rx_start_leader));
	cr_assert(eq(u32, cfg.ring_size, 1024));
	cr_assert(eq(int, cfg.io.idle.mode, DP_IDLE_SLEEP));
	cr_assert(eq(u32, cfg.io.idle.spins, 200));
	cr_assert(eq(u32, cfg.io.idle.sleep_us_min, 50));
	cr_assert(not(cfg.bridge.enabled));
	cr_assert(not(cfg.persister.enabled));
	cr_assert(eq(u64, cfg.duty_threshold_ns, 100000));
	cr_assert(eq(u32, cfg.shard_count, 2));
	cr_assert(eq(int, cfg.shards[0].service, APP_SERVICE_OMS));
	cr_assert(eq(int, cfg.shards[1].service, APP_SERVICE_ME));
	cr_assert(eq(u64, cfg.resident_users_max, 100000));
	cr_assert(eq(u64, cfg.orders_max, 65536));
	cr_assert(eq(u64, cfg.log_entries_max, 65536));
	cr_assert(eq(u64, cfg.snapshot_entries, 20000));
	cr_assert(eq(u64, cfg.user_ttl_ms, 600000));
	cr_assert(eq(u64, cfg.election_ms, 150));
	cr_assert(eq(u64, cfg.heartbeat_ms, 25));
	cr_assert(eq(u64, cfg.routing.epoch, 1));
	cr_assert(eq(u32, cfg.routing.shard_count, 1)); /* the hosted OMS shards */
	cr_assert(eq(u16, cfg.routing.shards[0], 1));
	cr_assert(eq(u32, cfg.symbol_count, 0));
	cr_assert(eq(int, cfg.durability, APP_DURABILITY_DURABLE));
	cr_assert(eq(u64, cfg.dedup_window_ms, 1000)); /* 2 x (200 + 2 x 150), at least 1 s */
	cr_assert(eq(u64, cfg.reconcile_ms, 10000));  /* reconciliation on unless turned off */
	cr_assert(eq(u64, cfg.flush_ms, 1000));
	cr_assert(eq(u64, cfg.writeback_max, 1024));
	cr_assert(eq(u64, cfg.dedup_per_user, 16));
	cr_assert(eq(str, cfg.data_dir, "/var/lib/omsd"));
	cr_assert(eq(str, cfg.mgmt_socket, "/run/omsd/omsd.sock"));
	cr_assert(eq(str, cfg.db_conninfo, ""));
	cr_assert(eq(u16, cfg.metrics_port, 0));
	cr_assert(eq(u64, cfg.dp.client_key.k0 | cfg.dp.client_key.k1, 0));
}

/* Goal: a key in hex loads as the bytes in order (the shared parser, common/wire.h). */
Test(app_config, key_loads, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, load_minimal("[keys]\nclient = 000102030405060708090a0b0c0d0e0f\n"), 0),
		  "%s", errs);
	cr_assert(eq(u64, cfg.dp.client_key.k0, UINT64_C(0x0706050403020100)));
	cr_assert(eq(u64, cfg.dp.client_key.k1, UINT64_C(0x0f0e0d0c0b0a0908)));
}

/* Goal: a [bridge] lcore seals the shard lcores' frames unless told not to (app_seal.c);
 * without the section there is no lcore to do it. */
Test(app_config, bridge_seals_by_default, .init = setup, .fini = teardown)
{
	char extra[64];
	cr_assert(eq(int, load_minimal(""), 0), "%s", errs);
	cr_assert(not(cfg.bridge.enabled));
	cr_assert(not(cfg.bridge_seal));
	snprintf(extra, sizeof(extra), "[bridge]\ncpu = %u\n", cpu);
	cr_assert(eq(int, load_minimal(extra), 0), "%s", errs);
	cr_assert(cfg.bridge.enabled);
	cr_assert(cfg.bridge_seal);
	snprintf(extra, sizeof(extra), "[bridge]\ncpu = %u\nseal = off\n", cpu);
	cr_assert(eq(int, load_minimal(extra), 0), "%s", errs);
	cr_assert(cfg.bridge.enabled);
	cr_assert(not(cfg.bridge_seal));
}

/* Goal: [gateway] puts the gateway on an lcore of its own (app_gateway.c), with its CPU and
 * idle policy; without the section it runs on the first OMS shard lcore. */
Test(app_config, gateway_lcore, .init = setup, .fini = teardown)
{
	char extra[96];
	cr_assert(eq(int, load_minimal(""), 0), "%s", errs);
	cr_assert(not(cfg.gateway.enabled));
	snprintf(extra, sizeof(extra), "[gateway]\ncpu = %u\nidle = busy\n", cpu);
	cr_assert(eq(int, load_minimal(extra), 0), "%s", errs);
	cr_assert(cfg.gateway.enabled);
	cr_assert(eq(u16, cfg.gateway.cpu, cpu));
	cr_assert(eq(int, cfg.gateway.idle.mode, DP_IDLE_BUSY));
}

/* Goal: [port] rx_queues = N gives N io lcores, on [io] cpus one each or all on [io] cpu; a
 * list of the wrong length, or one whose first differs from [io] cpu, names the key. */
static int
load_queues(unsigned queues, const char *cpus)
{
	/* The minimal file with rx_queues in its [port] and cpus (if any) in its [io]. */
	char text[4096], port[64], io[96];
	snprintf(port, sizeof(port), "[port]\ndev = net_null0\nrx_queues = %u\n", queues);
	snprintf(io, sizeof(io), "[io]\ncpu = %u\n%s%s%s", cpu, cpus ? "cpus = " : "",
		 cpus ? cpus : "", cpus ? "\n" : "");
	snprintf(text, sizeof(text),
		 "[node]\nid = 1\nip = 10.9.0.2/24\n[eal]\nmain_cpu = %u\n%s%s"
		 "[shard.1]\nservice = oms\nmembers = 1\ncpu = %u\n"
		 "[shard.2]\nservice = me\nmembers = 1\ncpu = %u\n"
		 "[sessions]\nallow_unauthenticated = true\n",
		 cpu, port, io, cpu, cpu);
	return load(text);
}

Test(app_config, rx_queues_and_io_cpus, .init = setup, .fini = teardown)
{
	char list[32];
	cr_assert(eq(int, load_minimal(""), 0), "%s", errs);
	cr_assert(eq(u16, cfg.dp.rx_queues, 1));
	cr_assert(eq(u16, cfg.io_cpus[0], cfg.io.cpu));
	cr_assert(eq(int, load_queues(2, NULL), 0), "%s", errs);
	cr_assert(eq(u16, cfg.dp.rx_queues, 2));
	cr_assert(eq(u16, cfg.io_cpus[0], cpu));
	cr_assert(eq(u16, cfg.io_cpus[1], cpu));
	snprintf(list, sizeof(list), "%u,%u", cpu, cpu);
	cr_assert(eq(int, load_queues(2, list), 0), "%s", errs);
	cr_assert(gt(int, load_queues(3, list), 0));
	said("[io] cpus: 2 CPU(s) for 3 io lcore(s)");
	snprintf(list, sizeof(list), "%u,%u", cpu + 1, cpu);
	cr_assert(gt(int, load_queues(2, list), 0));
	said("[io] cpus: the first");
}

/* One bad value: section, key, value, and the sections the key needs besides. */
struct bad {
	const char *sec;
	const char *key;
	const char *value;
	const char *reason;  /* a substring of the message */
};

/* Every key the loader reads, each with a value it must refuse. */
static const struct bad bads[] = {
	{ "node", "id", "0", "out of range" },
	{ "node", "ip", "10.9.0.300", "not a unicast IPv4" },
	{ "node", "gateway", "1.2.3", "not a unicast IPv4" },
	{ "node", "mac", "01:00:00:00:00:03", "not a unicast MAC" },
	{ "node", "udp_port", "70000", "out of range" },
	{ "node", "mtu", "100", "out of range" },
	{ "eal", "main_cpu", "1024", "out of range" },
	{ "eal", "args", "--no-huge -l 0-1", "'-l' is not allowed" },
	{ "port", "dev", "eth0", "neither a vdev" },
	{ "port", "rx_desc", "10", "out of range" },
	{ "port", "tx_desc", "10", "out of range" },
	{ "port", "burst", "0", "out of range" },
	{ "port", "promiscuous", "maybe", "not a boolean" },
	{ "port", "arp_timeout_ms", "5", "out of range" },
	{ "port", "rx_start", "later", "not one of now|leader" },
	{ "port", "rx_hold_frames", "2000000", "out of range" },
	{ "memory", "mbufs", "5", "out of range" },
	{ "memory", "mbuf_cache", "100000", "out of range" },
	{ "memory", "mbuf_size", "10", "out of range" },
	{ "memory", "ring_size", "1000", "not a power of two" },
	{ "memory", "duty_threshold_us", "0", "out of range" },
	{ "io", "cpu", "5000", "out of range" },
	{ "io", "idle", "nap", "not one of busy|pause|sleep" },
	{ "io", "idle_spins", "-1", "not a non-negative decimal integer" },
	{ "io", "idle_sleep_us", "0", "out of range" },
	{ "io", "idle_sleep_min_us", "0", "out of range" },
	{ "bridge", "cpu", "x", "not a non-negative decimal integer" },
	{ "bridge", "seal", "maybe", "not a boolean" },
	{ "gateway", "cpu", "x", "not a non-negative decimal integer" },
	{ "gateway", "idle", "nap", "not one of busy|pause|sleep" },
	{ "port", "rx_queues", "9", "out of range" },
	{ "port", "rx_queues", "0", "out of range" },
	{ "io", "cpus", "0,x", "not a CPU number" },
	{ "persister", "idle", "spin", "not one of busy|pause|sleep" },
	{ "peer.2", "ip", "10.9.0", "not a unicast IPv4" },
	{ "peer.2", "udp_port", "0", "out of range" },
	{ "peer.2", "mac", "zz", "not a unicast MAC" },
	{ "shard.1", "service", "bank", "not one of me|oms|echo" },
	{ "shard.1", "members", "1,1", "listed twice" },
	{ "shard.2", "cpu", "5000", "out of range" },
	{ "shard.2", "idle_sleep_us", "2000000", "out of range" },
	{ "limits", "resident_users", "0", "out of range" },
	{ "limits", "parked_orders", "0", "out of range" },
	{ "limits", "inflight_sagas", "0", "out of range" },
	{ "limits", "orders", "1", "out of range" },
	{ "limits", "log_entries", "10", "out of range" },
	{ "limits", "log_mb", "4096", "out of range" },
	{ "limits", "snapshot_mb", "0", "out of range" },
	{ "limits", "snapshot_entries", "1", "out of range" },
	{ "limits", "snapshot_by", "thread", "not one of shadow|fork|lcore" },
	{ "limits", "snapshot_fork_min_mb", "2048", "out of range" },
	{ "limits", "shadow_ring_mb", "0", "out of range" },
	{ "limits", "shadow_ring_mb", "65537", "out of range" },
	{ "limits", "dedup_window_ms", "0", "out of range" },
	{ "limits", "writeback_max", "0", "out of range" },
	{ "timers", "flush_ms", "3600001", "out of range" },
	{ "limits", "dedup_per_user", "1", "out of range" },
	{ "limits", "dedup_per_user", "4097", "out of range" },
	{ "timers", "user_ttl_ms", "0", "out of range" },
	{ "timers", "sweep_ms", "0", "out of range" },
	{ "timers", "sweep_evict_max", "0", "out of range" },
	{ "timers", "tick_ms", "0", "out of range" },
	{ "timers", "bridge_redrive_ms", "0", "out of range" },
	{ "timers", "election_ms", "1", "out of range" },
	{ "timers", "heartbeat_ms", "0", "out of range" },
	{ "timers", "reconcile_ms", "4294967296", "out of range" },
	{ "timers", "shed_ack_us", "10000001", "out of range" },
	{ "timers", "shed_window_us", "99", "out of range" },
	{ "timers", "shed_wait_us", "-1", "not a non-negative decimal integer" },
	{ "durability", "mode", "maybe", "not one of memory|durable" },
	{ "paths", "data_dir", "", "empty" },
	{ "paths", "mgmt_socket",
	  "/run/a/very/long/path/that/does/not/fit/in/the/sun_path/field/of/a/unix/socket/address/"
	  "because/it/is/longer/than/107/bytes",
	  "longer than 107 bytes" },
	{ "keys", "peer", "1234", "must be 32 hex digits" },
	{ "keys", "client", "zz0102030405060708090a0b0c0d0e0f", "not hexadecimal" },
	{ "keys", "client", "00000000000000000000000000000000", "all-zero key" },
	{ "routing", "epoch", "0", "out of range" },
	{ "routing", "oms_shards", "1,99", "'99' is not a shard id" },
	{ "routing", "pins", "5:1,7", "'7' is not user:shard" },
	{ "symbol.1", "base", "0", "out of range" },
	{ "symbol.1", "quote", "x", "not a non-negative decimal integer" },
	{ "symbol.1", "me_shard", "64", "out of range" },
	{ "symbol.1", "tick", "0", "out of range" },
	{ "symbol.1", "lot", "0", "out of range" },
	{ "symbol.1", "min_qty", "0", "out of range" },
	{ "symbol.1", "min_notional", "-1", "out of range" },
	{ "symbol.1", "base_unit", "0", "out of range" },
	{ "symbol.1", "ref_px", "1x", "not a decimal integer" },
	{ "symbol.1", "band_bps", "2000000", "out of range" },
	{ "symbol.1", "maker_fee_bps", "-20000", "out of range" },
	{ "symbol.1", "taker_fee_bps", "20000", "out of range" },
	{ "mgmt", "metrics_listen", "localhost", "not ADDRESS:PORT" },
	{ "placement", "policy", "balance", "not one of none|spread|colocate|prefer" },
	{ "placement", "check_ms", "5", "out of range" },
	{ "placement", "settle_ms", "3600001", "out of range" },
	{ "shard.1", "leader_preference", "0", "'0' is not a node id" },
};

/* What a section needs besides the key under test (the key itself is left out). */
static void
section_body(char *out, size_t size, const char *sec, const char *key)
{
	static const struct {
		const char *sec;
		const char *key;
		const char *line;
	} needs[] = {
		{ "peer.2", "ip", "ip = 10.9.0.3\n" },
		{ "symbol.1", "base", "base = 1\n" },
		{ "symbol.1", "quote", "quote = 2\n" },
		{ "symbol.1", "me_shard", "me_shard = 2\n" },
	};
	out[0] = '\0';
	for (unsigned i = 0; i < sizeof(needs) / sizeof(needs[0]); i++)
		if (strcmp(needs[i].sec, sec) == 0 && strcmp(needs[i].key, key) != 0)
			strncat(out, needs[i].line, size - strlen(out) - 1);
}

/* Goal: every key's bad value is refused with an error naming the file, the key's line,
 * the section and the key. Method: for each key of the table, a good file where the key
 * is the first line of its section (added after the minimal file's ones, or in a section
 * of its own), loaded; the message must carry FILE:LINE: [section] key: and the reason. */
Test(app_config, every_key_bad_value, .init = setup, .fini = teardown)
{
	for (unsigned i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		const struct bad *b = &bads[i];
		char base[4096], body[256], text[8192], want[256];
		minimal(base, sizeof(base), "");
		section_body(body, sizeof(body), b->sec, b->key);
		/* A second header of a minimal section would be a duplicate: put the key first
		 * in the existing one instead. */
		char hdr[80];
		snprintf(hdr, sizeof(hdr), "[%s]\n", b->sec);
		char *at = strstr(base, hdr);
		int line = 1;
		if (at != NULL) {
			at += strlen(hdr);
			for (const char *p = base; p < at; p++)
				line += *p == '\n';
			/* Drop the minimal file's own line for the key, if any. */
			char own[80];
			snprintf(own, sizeof(own), "\n%s = ", b->key);
			char *dup = strstr(at - 1, own);
			char *next_sec = strchr(at, '[');
			if (dup != NULL && (next_sec == NULL || dup < next_sec)) {
				char *eol = strchr(dup + 1, '\n');
				memmove(dup, eol, strlen(eol) + 1);
			}
			snprintf(text, sizeof(text), "%.*s%s = %s\n%s", (int)(at - base), base,
				 b->key, b->value, at);
		} else {
			for (const char *p = base; *p; p++)
				line += *p == '\n';
			line++; /* the header */
			snprintf(text, sizeof(text), "%s[%s]\n%s = %s\n%s", base, b->sec, b->key,
				 b->value, body);
		}
		int n = load(text);
		cr_assert(gt(int, n, 0), "[%s] %s = %s accepted", b->sec, b->key, b->value);
		snprintf(want, sizeof(want), "%s:%d: [%s] %s: ", path, line, b->sec, b->key);
		said(want);
		said(b->reason);
	}
}

/* Goal: a typo never falls back to a default: unknown sections and keys are errors, an
 * unknown section once, not once per key in it. */
Test(app_config, unknown_names, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, load_minimal("[frobnicate]\nx = 1\ny = 2\n"), 1), "%s", errs);
	said("[frobnicate] unknown section");
	cr_assert(eq(int, load_minimal("[timers]\ncolour = blue\n"), 1), "%s", errs);
	said(":21: [timers] colour: unknown key");
	cr_assert(gt(int, load_minimal("[symbol.x]\nbase = 1\n"), 0));
	said("[symbol.x] symbol sections are named symbol.<id>");
	cr_assert(gt(int, load_minimal("[shard.64]\nservice = me\nmembers = 1\n"), 0));
	said("[shard.64] shard sections are named shard.<id>, id 0..63");
}

/* Goal: a name given twice is refused with both lines, before anything is parsed. */
Test(app_config, duplicates, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, load("[node]\nid = 1\nid = 2\n"), 1), "%s", errs);
	said(":3: [node] id: duplicate key (first at line 2)");
	cr_assert(gt(int, load_minimal("[node]\n"), 0));
	said(":20: [node]: duplicate section (first at line 1)");
	cr_assert(gt(int, load("[node]\nthis is not ini\n"), 0));
	said(":2: neither a [section] nor key = value");
	cr_assert(gt(int, load("id = 1\n"), 0));
	said(":1: key before the first [section]");
}

/* One check that spans sections: the extra lines and the message they must produce. */
struct cross {
	const char *extra;
	const char *want;
};

/* Goal: what one section says about another is checked once every section is read.
 * Method: the minimal file plus lines that break one relation; each must be refused. */
Test(app_config, cross_checks, .init = setup, .fini = teardown)
{
	static const struct cross cases[] = {
		/* A symbol's ME shard: hosted here with another service, or nowhere at all. */
		{ "[symbol.1]\nbase = 1\nquote = 2\nme_shard = 5\n",
		  "[symbol.1] me_shard: shard 5 is not configured: this node has no [shard.5]" },
		{ "[symbol.1]\nbase = 1\nquote = 2\nme_shard = 1\n",
		  "[symbol.1] me_shard: shard 1 is an oms shard ([shard.1] service), not me" },
		{ "[symbol.1]\nbase = 1\nquote = 1\nme_shard = 2\n", "[symbol.1] quote: same asset" },
		/* The routed OMS shards and the pins. */
		{ "[routing]\noms_shards = 1,7\n", "[routing] oms_shards: shard 7 is not configured" },
		{ "[routing]\noms_shards = 2\n",
		  "[routing] oms_shards: shard 2 is an me shard ([shard.2] service), not oms" },
		{ "[routing]\noms_shards = 1,1\n", "[routing] oms_shards: shard 1 listed twice" },
		{ "[routing]\npins = 5:9\n", "[routing] pins: shard 9 is not configured" },
		{ "[routing]\npins = 5:2\n", "[routing] pins: shard 2 is an me shard" },
		{ "[database]\nconninfo = host=/tmp\n",
		  "[database] conninfo: needs a [persister] lcore" },
		{ "[peer.2]\nip = 10.9.0.2\n", "[peer.2] ip: same address as this node" },
		{ "[peer.1]\nip = 10.9.0.3\n", "[peer.1] node 1 is this node" },
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert(gt(int, load_minimal(cases[i].extra), 0), "accepted:\n%s",
			  cases[i].extra);
		said(cases[i].want);
	}
}

/* Goal: the relations hold in the other direction too: a shard not hosted here is fine
 * when a peer may host it; rx_start = leader with replicated shards, an RX hold as large
 * as the rings, and a node with no shard at all are refused. */
Test(app_config, cross_checks_more, .init = setup, .fini = teardown)
{
	/* With a peer, the ME shard and the OMS shard may live elsewhere. */
	cr_assert(eq(int, load_minimal("[peer.2]\nip = 10.9.0.3\n"
				       "[routing]\noms_shards = 1,7\npins = 5:7\n"
				       "[symbol.1]\nbase = 1\nquote = 2\nme_shard = 5\n"), 0),
		  "%s", errs);
	cr_assert(eq(u32, cfg.routing.shard_count, 2));
	cr_assert(eq(u16, cfg.symbols[0].me_shard, 5));

	char buf[1024];
	snprintf(buf, sizeof(buf),
		 "[node]\nid = 1\nip = 10.9.0.2/24\n[eal]\nmain_cpu = %u\n[port]\ndev = net_null0\n"
		 "rx_start = leader\n[io]\ncpu = %u\n[peer.2]\nip = 10.9.0.3\n[peer.3]\n"
		 "ip = 10.9.0.4\n[shard.1]\nservice = oms\nmembers = 1,2,3\ncpu = %u\n",
		 cpu, cpu, cpu);
	cr_assert(gt(int, load(buf), 0));
	said("[port] rx_start: leader needs single-member shards (shard 1 has 3 members");

	snprintf(buf, sizeof(buf),
		 "[node]\nid = 1\nip = 10.9.0.2/24\n[eal]\nmain_cpu = %u\n[port]\ndev = net_null0\n"
		 "rx_hold_frames = 64\n[memory]\nring_size = 64\n[io]\ncpu = %u\n"
		 "[shard.1]\nservice = oms\nmembers = 1\ncpu = %u\n", cpu, cpu, cpu);
	cr_assert(gt(int, load(buf), 0));
	said(":8: [port] rx_hold_frames: 64 must be below [memory] ring_size (64)");

	snprintf(buf, sizeof(buf), "[node]\nid = 1\nip = 10.9.0.2/24\n[eal]\nmain_cpu = %u\n"
		 "[port]\ndev = net_null0\n[io]\ncpu = %u\n", cpu, cpu);
	cr_assert(gt(int, load(buf), 0));
	said(": no [shard.N] section: a node hosts at least one shard");
}

/* One window of docs/me-contract.md's table: lines that put the key exactly at its bound,
 * the same lines one below it, and the message the refusal must carry. */
struct window {
	const char *at_bound;
	const char *below;
	const char *want;
};

/* Goal: every window the exactly-once argument relies on is checked at start: accepted at
 * its bound, refused one below it with FILE:LINE, the key and the reason.
 * Method: the minimal file plus each case's lines; the refused line number is the key's
 * (the minimal file has 17 lines, so the first added section header is line 18). */
Test(app_config, windows_at_and_below_bound, .init = setup, .fini = teardown)
{
	static const struct window cases[] = {
		/* The ME dedup window: bridge_redrive_ms + 2 x election_ms. */
		{ "[limits]\ndedup_window_ms = 500\n", "[limits]\ndedup_window_ms = 499\n",
		  ":21: [limits] dedup_window_ms: 499 is below [timers] bridge_redrive_ms + "
		  "2 x election_ms (500): a SUBMIT re-driven late" },
		{ "[timers]\nbridge_redrive_ms = 1000\nelection_ms = 400\nheartbeat_ms = 50\n"
		  "[limits]\ndedup_window_ms = 1800\n",
		  "[timers]\nbridge_redrive_ms = 1000\nelection_ms = 400\nheartbeat_ms = 50\n"
		  "[limits]\ndedup_window_ms = 1799\n",
		  ":25: [limits] dedup_window_ms: 1799 is below [timers] bridge_redrive_ms + "
		  "2 x election_ms (1800)" },
		/* Raft: a heartbeat within half the election timeout. */
		{ "[timers]\nelection_ms = 100\nheartbeat_ms = 50\n",
		  "[timers]\nelection_ms = 99\nheartbeat_ms = 50\n",
		  ":22: [timers] heartbeat_ms: 50 is more than half of election_ms (99)" },
		/* The log holds a snapshot interval and more. */
		{ "[limits]\nlog_entries = 2048\nsnapshot_entries = 2047\n",
		  "[limits]\nlog_entries = 2047\nsnapshot_entries = 2047\n",
		  ":22: [limits] snapshot_entries: 2047 must be below log_entries (2047)" },
		/* The TTL sweep runs at least once per TTL. */
		{ "[timers]\nuser_ttl_ms = 1000\nsweep_ms = 1000\n",
		  "[timers]\nuser_ttl_ms = 999\nsweep_ms = 1000\n",
		  ":22: [timers] sweep_ms: 1000 is longer than user_ttl_ms (999)" },
		/* The re-drive back-off's ceiling is at least its first step. */
		{ "[timers]\nbridge_redrive_ms = 300\nbridge_redrive_max_ms = 300\n",
		  "[timers]\nbridge_redrive_ms = 300\nbridge_redrive_max_ms = 299\n",
		  ":22: [timers] bridge_redrive_max_ms: 299 is below bridge_redrive_ms (300)" },
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert(eq(int, load_minimal(cases[i].at_bound), 0), "refused at the bound:\n%s",
			  errs);
		cr_assert(eq(int, load_minimal(cases[i].below), 1), "accepted below the bound:\n%s",
			  cases[i].below);
		said(path);
		said(cases[i].want);
	}
}

/* Goal: an unset dedup window follows the timers it must outlast (twice the bound, at
 * least a second), and a given one is used as it is. */
Test(app_config, dedup_window_derived, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, load_minimal("[timers]\nbridge_redrive_ms = 1000\nelection_ms = 400\n"
				       "heartbeat_ms = 50\n"), 0), "%s", errs);
	cr_assert(eq(u64, app_dedup_window_min_ms(&cfg), 1800));
	cr_assert(eq(u64, cfg.dedup_window_ms, 3600));
	cr_assert(eq(int, load_minimal("[timers]\nbridge_redrive_ms = 10\nelection_ms = 40\n"
				       "heartbeat_ms = 10\n"), 0), "%s", errs);
	cr_assert(eq(u64, cfg.dedup_window_ms, 1000));
	cr_assert(eq(int, load_minimal("[limits]\ndedup_window_ms = 60000\n"), 0), "%s", errs);
	cr_assert(eq(u64, cfg.dedup_window_ms, 60000));
}

/* Goal: write-back is on by default (docs/oms.md, "Write-back"); flush_ms = 0 turns it off and
 * is accepted (omsd warns at start in durable mode), and both keys load as given. */
Test(app_config, flush_ms_and_writeback_max, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, load_minimal("[timers]\nflush_ms = 250\n[limits]\nwriteback_max = 16\n"),
		     0), "%s", errs);
	cr_assert(eq(u64, cfg.flush_ms, 250));
	cr_assert(eq(u64, cfg.writeback_max, 16));
	cr_assert(eq(int, load_minimal("[timers]\nflush_ms = 0\n"), 0), "%s", errs);
	cr_assert(eq(u64, cfg.flush_ms, 0));
}

/* Goal: durable is the default; memory mode is loaded only when the file says so. */
Test(app_config, durability_mode, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, load_minimal(""), 0), "%s", errs);
	cr_assert(eq(int, cfg.durability, APP_DURABILITY_DURABLE));
	cr_assert(eq(int, load_minimal("[durability]\nmode = memory\n"), 0), "%s", errs);
	cr_assert(eq(int, cfg.durability, APP_DURABILITY_MEMORY));
}

/* Goal: snapshots are serialised by a forked child unless the file says lcore or shadow
 * (a copy of the service, forking only when the copy is lost).
 * Method: the minimal file, then each value. */
Test(app_config, snapshot_by, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, load_minimal(""), 0), "%s", errs);
	cr_assert(cfg.snapshot_fork);
	cr_assert(eq(u64, cfg.snapshot_fork_min_mb, 16));
	cr_assert(eq(int, load_minimal("[limits]\nsnapshot_fork_min_mb = 0\n"), 0), "%s", errs);
	cr_assert(eq(u64, cfg.snapshot_fork_min_mb, 0));
	cr_assert(eq(int, load_minimal("[limits]\nsnapshot_by = lcore\n"), 0), "%s", errs);
	cr_assert(not(cfg.snapshot_fork));
	cr_assert(eq(int, load_minimal("[limits]\nsnapshot_by = fork\n"), 0), "%s", errs);
	cr_assert(cfg.snapshot_fork);
	cr_assert(not(cfg.snapshot_shadow));
	cr_assert(eq(u64, cfg.shadow_ring_mb, 64));
	cr_assert(eq(int, load_minimal("[limits]\nsnapshot_by = shadow\nshadow_ring_mb = 256\n"), 0),
		  "%s", errs);
	cr_assert(cfg.snapshot_shadow);
	cr_assert(cfg.snapshot_fork);
	cr_assert(eq(u64, cfg.shadow_ring_mb, 256));
	cr_assert(eq(int, load_minimal("[limits]\nsnapshot_by = lcore\n"), 0), "%s", errs);
	cr_assert(not(cfg.snapshot_shadow));
}

/* Goal: [placement] loads with its documented defaults and every value it names.
 * Method: the minimal file alone (none, 500, 5000), then each policy with its keys. */
Test(app_config, placement_loads, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, load_minimal(""), 0), "%s", errs);
	cr_assert(eq(int, cfg.place_policy, APP_PLACE_NONE));
	cr_assert(eq(u64, cfg.place_check_ms, 500));
	cr_assert(eq(u64, cfg.place_settle_ms, 5000));
	cr_assert(eq(u32, cfg.shards[0].leader_pref_count, 0));
	static const struct {
		const char *name;
		enum app_place_policy p;
	} policies[] = {
		{ "none", APP_PLACE_NONE },
		{ "spread", APP_PLACE_SPREAD },
		{ "colocate", APP_PLACE_COLOCATE },
	};
	for (unsigned i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		char extra[128];
		snprintf(extra, sizeof(extra), "[placement]\npolicy = %s\ncheck_ms = 100\n"
			 "settle_ms = 100\n", policies[i].name);
		cr_assert(eq(int, load_minimal(extra), 0), "%s: %s", policies[i].name, errs);
		cr_assert(eq(int, cfg.place_policy, policies[i].p));
		cr_assert(eq(u64, cfg.place_check_ms, 100));
		cr_assert(eq(u64, cfg.place_settle_ms, 100));
	}
}

/* A three-member cluster file (node 1 of 1,2,3) for the preference lists, plus extra. */
static int
load_cluster(const char *shard1, const char *shard2, const char *extra)
{
	char buf[4096];
	snprintf(buf, sizeof(buf),
		 "[node]\nid = 1\nip = 10.9.0.2/24\n[eal]\nmain_cpu = %u\n[port]\ndev = net_null0\n"
		 "[io]\ncpu = %u\n[peer.2]\nip = 10.9.0.3\n[peer.3]\nip = 10.9.0.4\n"
		 "[shard.1]\nservice = oms\nmembers = 1,2,3\ncpu = %u\n%s"
		 "[shard.2]\nservice = me\nmembers = 3,2,1\ncpu = %u\n%s"
		 "[sessions]\nallow_unauthenticated = true\n%s",
		 cpu, cpu, cpu, shard1, cpu, shard2, extra);
	return load(buf);
}

/* Goal: leader_preference lists load in order under prefer (and on ME shards under
 * colocate), and a shard may leave it out. */
Test(app_config, placement_preference_loads, .init = setup, .fini = teardown)
{
	cr_assert(eq(int, load_cluster("leader_preference = 2, 1,3\n", "",
				       "[placement]\npolicy = prefer\n"), 0), "%s", errs);
	cr_assert(eq(int, cfg.place_policy, APP_PLACE_PREFER));
	cr_assert(eq(u32, cfg.shards[0].leader_pref_count, 3));
	cr_assert(eq(u32, cfg.shards[0].leader_pref[0], 2));
	cr_assert(eq(u32, cfg.shards[0].leader_pref[1], 1));
	cr_assert(eq(u32, cfg.shards[0].leader_pref[2], 3));
	cr_assert(eq(u32, cfg.shards[1].leader_pref_count, 0));

	cr_assert(eq(int, load_cluster("", "leader_preference = 3\n",
				       "[placement]\npolicy = colocate\n"), 0), "%s", errs);
	cr_assert(eq(u32, cfg.shards[1].leader_pref_count, 1));
	cr_assert(eq(u32, cfg.shards[1].leader_pref[0], 3));
}

/* Goal: every relation [placement] has with other keys is refused with FILE:LINE, the key
 * and the reason: a list naming a non-member, a list the policy does not use, prefer with
 * no list, check_ms not above tick_ms, settle_ms below check_ms; the windows are not
 * looked at when placement is off. */
Test(app_config, placement_refused, .init = setup, .fini = teardown)
{
	cr_assert(gt(int, load_cluster("leader_preference = 2,4\n", "",
				       "[placement]\npolicy = prefer\n"), 0));
	said(":18: [shard.1] leader_preference: node 4 is not one of the shard's members");
	cr_assert(gt(int, load_cluster("leader_preference = 2,2\n", "",
				       "[placement]\npolicy = prefer\n"), 0));
	said("[shard.1] leader_preference: node 2 listed twice");
	cr_assert(gt(int, load_cluster("leader_preference = 2\n", "", ""), 0));
	said(":18: [shard.1] leader_preference: used only with [placement] policy = prefer (or "
	     "colocate, for ME shards); the policy is none");
	cr_assert(gt(int, load_cluster("leader_preference = 2\n", "",
				       "[placement]\npolicy = spread\n"), 0));
	said("the policy is spread");
	cr_assert(gt(int, load_cluster("leader_preference = 2\n", "",
				       "[placement]\npolicy = colocate\n"), 0));
	said("[shard.1] leader_preference: used only with");
	cr_assert(gt(int, load_cluster("", "", "[placement]\npolicy = prefer\n"), 0));
	said("[placement] policy: prefer needs a leader_preference in some [shard.N]");
	cr_assert(gt(int, load_minimal("[timers]\ntick_ms = 10\n[placement]\npolicy = spread\n"
				       "check_ms = 10\nsettle_ms = 10\n"), 0));
	said(":24: [placement] check_ms: 10 is not more than [timers] tick_ms (10)");
	cr_assert(gt(int, load_minimal("[placement]\npolicy = spread\ncheck_ms = 100\n"
				       "settle_ms = 99\n"), 0));
	said(":23: [placement] settle_ms: 99 is less than check_ms (100)");
	/* Off: a slow tick and a short settle are nobody's business. */
	cr_assert(eq(int, load_minimal("[timers]\ntick_ms = 1000\n[placement]\nsettle_ms = 10\n"),
		     0), "%s", errs);
	char echo[1024];
	snprintf(echo, sizeof(echo),
		 "[node]\nid = 1\nip = 10.9.0.2/24\n[eal]\nmain_cpu = %u\n[port]\ndev = net_null0\n"
		 "[io]\ncpu = %u\n[shard.1]\nservice = echo\nmembers = 1\ncpu = %u\n"
		 "leader_preference = 1\n[placement]\npolicy = prefer\n", cpu, cpu, cpu);
	cr_assert(gt(int, load(echo), 0));
	said("[shard.1] leader_preference: an echo shard has no leader to place");
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration loader. Two passes over the file:
 *
 *  1. A scan of our own that mirrors rte_cfgfile's grammar and records the line of every
 *     section and key (rte_cfgfile keeps no line numbers). It also catches what rte_cfgfile
 *     silently accepts: lines that are neither a section nor key = value, duplicate
 *     sections and keys, names or values it would truncate.
 *  2. rte_cfgfile_load, then every known key is read through rte_cfgfile_get_entry and
 *     validated; the scan marks it used. Whatever the scan saw that nobody read is an
 *     unknown key or section.
 *
 * All errors are collected (not just the first), each as FILE:LINE: [section] key: reason.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cfgfile.h>
#include <rte_common.h>
#include <rte_ether.h>

#include "app_config.h"

#define SCAN_LINE_MAX (CFG_NAME_LEN + CFG_VALUE_LEN + 4) /* rte_cfgfile's line buffer */
#define COMMENT ';'

/* ---------------------------------------------------------------------------------------
 * Pass 1: the scan.
 * ------------------------------------------------------------------------------------- */

struct scan_ent {
	char sec[CFG_NAME_LEN];  /* section name */
	char key[CFG_NAME_LEN];  /* key, "" for the section header itself */
	int line;                /* 1-based line number */
	bool used;               /* read by pass 2 */
};

struct ctx {
	const char *file;        /* for messages */
	FILE *err;               /* where messages go */
	struct rte_cfgfile *cfg; /* pass 2 */
	struct scan_ent *ents;   /* pass 1 result */
	uint32_t count;
	uint32_t cap;
	int errors;              /* reported so far */
};

static struct scan_ent *
scan_find(struct ctx *c, const char *sec, const char *key)
{
	for (uint32_t i = 0; i < c->count; i++)
		if (strcmp(c->ents[i].sec, sec) == 0 && strcmp(c->ents[i].key, key) == 0)
			return &c->ents[i];
	return NULL;
}

__attribute__((format(printf, 4, 5))) static void
report(struct ctx *c, const char *sec, const char *key, const char *fmt, ...)
{
	const struct scan_ent *e = scan_find(c, sec ? sec : "", key ? key : "");
	if (e == NULL && key != NULL)
		e = scan_find(c, sec ? sec : "", ""); /* a missing key: point at its section */
	va_list ap;

	if (e != NULL)
		fprintf(c->err, "%s:%d: ", c->file, e->line);
	else
		fprintf(c->err, "%s: ", c->file);
	if (sec != NULL)
		fprintf(c->err, "[%s] ", sec);
	if (key != NULL)
		fprintf(c->err, "%s: ", key);
	va_start(ap, fmt);
	vfprintf(c->err, fmt, ap);
	va_end(ap);
	fputc('\n', c->err);
	c->errors++;
}

/* Trim leading and trailing white space in place; returns the new start. */
static char *
trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

static void
scan_add(struct ctx *c, const char *sec, const char *key, int line)
{
	if (c->count == c->cap) {
		uint32_t cap = c->cap ? c->cap * 2 : 64;
		struct scan_ent *n = realloc(c->ents, cap * sizeof(*n));
		if (n == NULL) {
			fprintf(c->err, "%s: out of memory\n", c->file);
			c->errors++;
			return;
		}
		c->ents = n;
		c->cap = cap;
	}
	struct scan_ent *e = &c->ents[c->count++];
	snprintf(e->sec, sizeof(e->sec), "%s", sec);
	snprintf(e->key, sizeof(e->key), "%s", key);
	e->line = line;
	e->used = false;
}

static void
line_error(struct ctx *c, int line, const char *what)
{
	fprintf(c->err, "%s:%d: %s\n", c->file, line, what);
	c->errors++;
}

static int
scan_file(struct ctx *c, const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[SCAN_LINE_MAX * 4];
	char sec[CFG_NAME_LEN] = "";
	int line = 0;

	if (f == NULL) {
		fprintf(c->err, "%s: cannot open: %s\n", path, strerror(errno));
		c->errors++;
		return -errno;
	}
	while (fgets(buf, sizeof(buf), f) != NULL) {
		size_t len = strlen(buf);
		line++;
		if (len >= SCAN_LINE_MAX - 1 && buf[len - 1] != '\n') {
			line_error(c, line, "line too long (rte_cfgfile reads at most 323 bytes)");
			/* Skip the rest of this physical line. */
			while (len > 0 && buf[len - 1] != '\n' && fgets(buf, sizeof(buf), f) != NULL)
				len = strlen(buf);
			continue;
		}
		char *cmt = strchr(buf, COMMENT);
		if (cmt != NULL)
			*cmt = '\0';
		char *s = trim(buf);
		if (*s == '\0')
			continue;
		if (*s == '[') {
			char *end = strchr(s, ']');
			if (end == NULL) {
				line_error(c, line, "section header without ']'");
				continue;
			}
			if (*trim(end + 1) != '\0') {
				line_error(c, line, "text after the section header");
				continue;
			}
			*end = '\0';
			char *name = trim(s + 1);
			if (*name == '\0' || strlen(name) >= CFG_NAME_LEN) {
				line_error(c, line, "section name empty or longer than 63 bytes");
				continue;
			}
			if (scan_find(c, name, "") != NULL) {
				fprintf(c->err, "%s:%d: [%s]: duplicate section (first at line %d)\n",
					c->file, line, name, scan_find(c, name, "")->line);
				c->errors++;
			}
			snprintf(sec, sizeof(sec), "%s", name);
			scan_add(c, sec, "", line);
			continue;
		}
		char *eq = strchr(s, '=');
		if (eq == NULL) {
			line_error(c, line, "neither a [section] nor key = value");
			continue;
		}
		*eq = '\0';
		char *key = trim(s);
		char *value = trim(eq + 1);
		if (sec[0] == '\0') {
			line_error(c, line, "key before the first [section]");
			continue;
		}
		if (*key == '\0' || strlen(key) >= CFG_NAME_LEN) {
			line_error(c, line, "key empty or longer than 63 bytes");
			continue;
		}
		if (strlen(value) >= CFG_VALUE_LEN) {
			fprintf(c->err, "%s:%d: [%s] %s: value longer than 255 bytes\n", c->file,
				line, sec, key);
			c->errors++;
			continue;
		}
		const struct scan_ent *dup = scan_find(c, sec, key);
		if (dup != NULL) {
			fprintf(c->err, "%s:%d: [%s] %s: duplicate key (first at line %d)\n",
				c->file, line, sec, key, dup->line);
			c->errors++;
			continue;
		}
		scan_add(c, sec, key, line);
	}
	fclose(f);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Pass 2: typed getters. Each returns true when the key was present (and valid), false
 * when absent (the default stays) or invalid (an error was reported).
 * ------------------------------------------------------------------------------------- */

static const char *
get(struct ctx *c, const char *sec, const char *key)
{
	struct scan_ent *e = scan_find(c, sec, key);
	if (e != NULL)
		e->used = true;
	return rte_cfgfile_get_entry(c->cfg, sec, key);
}

static bool
need(struct ctx *c, const char *sec, const char *key, const char *v)
{
	if (v == NULL) {
		report(c, sec, key, "missing (required)");
		return false;
	}
	return true;
}

static bool
parse_u64(const char *v, uint64_t *out)
{
	char *end;
	if (*v == '\0' || !isdigit((unsigned char)*v))
		return false;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = x;
	return true;
}

static bool
get_u64(struct ctx *c, const char *sec, const char *key, bool required, uint64_t min,
	uint64_t max, uint64_t *out)
{
	const char *v = get(c, sec, key);
	uint64_t x;

	if (v == NULL) {
		if (required)
			need(c, sec, key, v);
		return false;
	}
	if (!parse_u64(v, &x)) {
		report(c, sec, key, "'%s' is not a non-negative decimal integer", v);
		return false;
	}
	if (x < min || x > max) {
		report(c, sec, key, "%" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64 "]", x,
		       min, max);
		return false;
	}
	*out = x;
	return true;
}

/* Unsigned fields narrower than 64 bits. */
#define GET_UINT(c, sec, key, req, min, max, field)                                        \
	do {                                                                               \
		uint64_t v_ = (field);                                                     \
		if (get_u64(c, sec, key, req, min, max, &v_))                              \
			(field) = (__typeof__(field))v_;                                   \
	} while (0)

static bool
get_bool(struct ctx *c, const char *sec, const char *key, bool *out)
{
	const char *v = get(c, sec, key);
	if (v == NULL)
		return false;
	if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "on") || !strcmp(v, "1")) {
		*out = true;
		return true;
	}
	if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "off") || !strcmp(v, "0")) {
		*out = false;
		return true;
	}
	report(c, sec, key, "'%s' is not a boolean (yes|no|true|false|on|off|1|0)", v);
	return false;
}

static bool
get_str(struct ctx *c, const char *sec, const char *key, char *out, size_t size)
{
	const char *v = get(c, sec, key);
	if (v == NULL)
		return false;
	if (strlen(v) >= size) {
		report(c, sec, key, "longer than %zu bytes", size - 1);
		return false;
	}
	snprintf(out, size, "%s", v);
	return true;
}

static bool
parse_ipv4(const char *v, uint32_t *ip_be)
{
	struct in_addr a;
	if (inet_pton(AF_INET, v, &a) != 1)
		return false;
	*ip_be = a.s_addr;
	return true;
}

static bool
get_ipv4(struct ctx *c, const char *sec, const char *key, bool required, uint32_t *ip_be)
{
	const char *v = get(c, sec, key);
	if (v == NULL || *v == '\0') {
		if (required)
			report(c, sec, key, "missing (required)");
		return false;
	}
	if (!parse_ipv4(v, ip_be) || *ip_be == 0 || *ip_be == UINT32_MAX) {
		report(c, sec, key, "'%s' is not a unicast IPv4 address (a.b.c.d)", v);
		return false;
	}
	return true;
}

static bool
get_mac(struct ctx *c, const char *sec, const char *key, struct rte_ether_addr *mac)
{
	const char *v = get(c, sec, key);
	if (v == NULL || *v == '\0')
		return false;
	if (rte_ether_unformat_addr(v, mac) != 0 || !rte_is_unicast_ether_addr(mac) ||
	    rte_is_zero_ether_addr(mac)) {
		report(c, sec, key, "'%s' is not a unicast MAC address (aa:bb:cc:dd:ee:ff)", v);
		return false;
	}
	return true;
}

static bool
get_key(struct ctx *c, const char *sec, const char *key, struct wire_key *out)
{
	const char *v = get(c, sec, key);
	uint8_t b[16];

	if (v == NULL || *v == '\0')
		return false;
	if (strlen(v) != 32) {
		report(c, sec, key, "must be 32 hex digits (a 128-bit SipHash key), got %zu chars",
		       strlen(v));
		return false;
	}
	for (int i = 0; i < 16; i++) {
		char h[3] = { v[2 * i], v[2 * i + 1], '\0' };
		char *end;
		if (!isxdigit((unsigned char)h[0]) || !isxdigit((unsigned char)h[1])) {
			report(c, sec, key, "'%s' is not hexadecimal", v);
			return false;
		}
		b[i] = (uint8_t)strtoul(h, &end, 16);
	}
	/* The key's 16 bytes in order; k0/k1 are their little-endian halves (SipHash). */
	memcpy(&out->k0, b, 8);
	memcpy(&out->k1, b + 8, 8);
	if ((out->k0 | out->k1) == 0) {
		report(c, sec, key, "an all-zero key means no MAC; leave the key empty instead");
		return false;
	}
	return true;
}

static void
get_lcore(struct ctx *c, const char *sec, struct app_lcore_conf *l)
{
	const char *v;

	l->enabled = true;
	GET_UINT(c, sec, "cpu", false, 0, CPU_SETSIZE - 1, l->cpu);
	v = get(c, sec, "idle");
	if (v != NULL && dp_idle_mode_parse(v, &l->idle.mode) != 0)
		report(c, sec, "idle", "'%s' is not one of busy|pause|sleep", v);
	GET_UINT(c, sec, "idle_spins", false, 0, UINT32_MAX, l->idle.spins);
	GET_UINT(c, sec, "idle_sleep_us", false, 1, 1000000, l->idle.sleep_us_max);
}

/* Parse "1,2,3" into ids. Returns the count, or -1 (reported). */
static int
get_id_list(struct ctx *c, const char *sec, const char *key, uint32_t *ids, int max)
{
	const char *v = get(c, sec, key);
	char buf[APP_STR_MAX];
	int n = 0;

	if (!need(c, sec, key, v))
		return -1;
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		uint64_t id;
		tok = trim(tok);
		if (!parse_u64(tok, &id) || id == 0 || id > UINT32_MAX) {
			report(c, sec, key, "'%s' is not a node id (1..4294967295)", tok);
			return -1;
		}
		if (n == max) {
			report(c, sec, key, "more than %d members", max);
			return -1;
		}
		for (int i = 0; i < n; i++) {
			if (ids[i] == id) {
				report(c, sec, key, "node %" PRIu64 " listed twice", id);
				return -1;
			}
		}
		ids[n++] = (uint32_t)id;
	}
	if (n == 0) {
		report(c, sec, key, "empty member list");
		return -1;
	}
	return n;
}

/* "name.N" → N (at most max), or -1. */
static long long
section_index(const char *sec, const char *prefix, uint64_t max)
{
	size_t p = strlen(prefix);
	uint64_t x;
	if (strncmp(sec, prefix, p) != 0 || !parse_u64(sec + p, &x) || x > max)
		return -1;
	return (long long)x;
}

/* ---------------------------------------------------------------------------------------
 * Sections.
 * ------------------------------------------------------------------------------------- */

/* Safe on a shared development box; production configs say idle = busy. */
static const struct dp_idle_policy idle_default = {
	.mode = DP_IDLE_SLEEP,
	.spins = 200,
	.sleep_us_max = 200,
};

static void
defaults(struct app_config *cfg)
{
	const struct dp_idle_policy idle = idle_default;

	memset(cfg, 0, sizeof(*cfg));
	cfg->dp.prefix_len = 24;
	cfg->dp.udp_port = 7400;
	cfg->dp.mtu = 1500;
	cfg->dp.rx_desc = 1024;
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
	cfg->duty_threshold_ns = 100000;
	cfg->resident_users_max = 100000;
	cfg->parked_orders_max = 10000;
	cfg->inflight_sagas_max = 10000;
	cfg->user_ttl_ms = 600000;
	cfg->sweep_ms = 1000;
	cfg->sweep_evict_max = 1000;
	cfg->tick_ms = 10;
	cfg->bridge_redrive_ms = 200;
	cfg->election_ms = 150;
	cfg->heartbeat_ms = 25;
	cfg->orders_max = 65536;
	cfg->log_entries_max = 65536;
	cfg->log_mb = 64;
	cfg->snapshot_mb = 16;
	cfg->snapshot_entries = 20000;
	cfg->routing.epoch = 1;
	cfg->durability = APP_DURABILITY_MEMORY;
	snprintf(cfg->data_dir, sizeof(cfg->data_dir), "/var/lib/omsd");
	snprintf(cfg->mgmt_socket, sizeof(cfg->mgmt_socket), "/run/omsd/omsd.sock");
}

static void
sec_node(struct ctx *c, struct app_config *cfg)
{
	const char *s = "node";
	const char *v;
	uint64_t id = 0;

	if (get_u64(c, s, "id", true, 1, UINT32_MAX, &id))
		cfg->dp.node_id = (uint32_t)id;
	v = get(c, s, "ip");
	if (need(c, s, "ip", v)) {
		char buf[64];
		snprintf(buf, sizeof(buf), "%s", v);
		char *slash = strchr(buf, '/');
		uint64_t plen = 24;
		if (slash != NULL) {
			*slash = '\0';
			if (!parse_u64(slash + 1, &plen) || plen < 1 || plen > 32) {
				report(c, s, "ip", "prefix length '%s' is not 1..32", slash + 1);
				plen = 24;
			}
		}
		if (!parse_ipv4(buf, &cfg->dp.ip_be) || cfg->dp.ip_be == 0 ||
		    cfg->dp.ip_be == UINT32_MAX)
			report(c, s, "ip", "'%s' is not a unicast IPv4 address (a.b.c.d[/len])", v);
		cfg->dp.prefix_len = (uint8_t)plen;
	}
	get_ipv4(c, s, "gateway", false, &cfg->dp.gateway_be);
	if (get_mac(c, s, "mac", &cfg->dp.mac))
		cfg->dp.has_mac = true;
	GET_UINT(c, s, "udp_port", false, 1, 65535, cfg->dp.udp_port);
	GET_UINT(c, s, "mtu", false, 576, WIRE_FRAME_MAX + 28, cfg->dp.mtu);
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

static void
sec_port(struct ctx *c, struct app_config *cfg)
{
	const char *s = "port";
	const char *v = get(c, s, "dev");

	if (need(c, s, "dev", v)) {
		size_t name_len = strcspn(v, ",");
		if (strncmp(v, "net_", 4) == 0) {
			cfg->port_is_vdev = true;
		} else if (is_pci_addr(v)) {
			cfg->port_is_vdev = false;
		} else {
			report(c, s, "dev",
			       "'%s' is neither a vdev (net_tap0,iface=x | net_af_packet0,iface=x | "
			       "net_pcap0,... | net_ring0 | net_null0) nor a PCI address", v);
			name_len = 0;
		}
		if (name_len >= sizeof(cfg->dp.port_name)) {
			report(c, s, "dev", "device name longer than %zu bytes",
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
	GET_UINT(c, s, "rx_desc", false, 64, 16384, cfg->dp.rx_desc);
	GET_UINT(c, s, "tx_desc", false, 64, 16384, cfg->dp.tx_desc);
	GET_UINT(c, s, "burst", false, 1, DP_BURST_MAX, cfg->dp.burst);
	get_bool(c, s, "promiscuous", &cfg->dp.promiscuous);
	GET_UINT(c, s, "arp_timeout_ms", false, 1000, 3600000, cfg->dp.arp_timeout_ms);
	v = get(c, s, "rx_start");
	if (v != NULL) {
		if (strcmp(v, "leader") == 0)
			cfg->rx_start_leader = true;
		else if (strcmp(v, "now") == 0)
			cfg->rx_start_leader = false;
		else
			report(c, s, "rx_start", "'%s' is not one of now|leader", v);
	}
	GET_UINT(c, s, "rx_hold_frames", false, 0, 1u << 20, cfg->rx_hold_frames);
}

static void
sec_memory(struct ctx *c, struct app_config *cfg)
{
	const char *s = "memory";
	uint64_t ring = cfg->ring_size;

	GET_UINT(c, s, "mbufs", false, 1023, 1u << 24, cfg->dp.mbufs);
	GET_UINT(c, s, "mbuf_cache", false, 0, RTE_MEMPOOL_CACHE_MAX_SIZE, cfg->dp.mbuf_cache);
	GET_UINT(c, s, "mbuf_size", false, RTE_PKTMBUF_HEADROOM + 1518, UINT16_MAX,
		 cfg->dp.mbuf_data_room);
	if (get_u64(c, s, "ring_size", false, 64, 1u << 20, &ring)) {
		if (!rte_is_power_of_2((uint32_t)ring))
			report(c, s, "ring_size", "%" PRIu64 " is not a power of two", ring);
		else
			cfg->ring_size = (uint32_t)ring;
	}
	if (cfg->dp.mbuf_cache * 1.5 > cfg->dp.mbufs)
		report(c, s, "mbuf_cache", "%u is too large for %u mbufs (at most mbufs/1.5)",
		       cfg->dp.mbuf_cache, cfg->dp.mbufs);
	uint64_t us;
	if (get_u64(c, s, "duty_threshold_us", false, 1, 10000000, &us))
		cfg->duty_threshold_ns = us * 1000;
}

static void
sec_eal(struct ctx *c, struct app_config *cfg)
{
	const char *s = "eal";
	static const char *const reserved[] = { "-l", "-c", "--lcores", "--main-lcore",
						"--master-lcore" };

	GET_UINT(c, s, "main_cpu", false, 0, CPU_SETSIZE - 1, cfg->main_cpu);
	if (!get_str(c, s, "args", cfg->eal_buf, sizeof(cfg->eal_buf)))
		return;
	char *save = NULL;
	for (char *tok = strtok_r(cfg->eal_buf, " \t", &save); tok != NULL;
	     tok = strtok_r(NULL, " \t", &save)) {
		for (unsigned i = 0; i < RTE_DIM(reserved); i++) {
			size_t n = strlen(reserved[i]);
			if (strncmp(tok, reserved[i], n) == 0 && (tok[n] == '\0' || tok[n] == '=' ||
								  reserved[i][1] != '-'))
				report(c, s, "args",
				       "'%s' is not allowed: omsd builds the lcore map from the cpu "
				       "keys of [io], [shard.N], [bridge], [persister]", tok);
		}
		if (cfg->eal_arg_count == APP_EAL_ARGS_MAX) {
			report(c, s, "args", "more than %d arguments", APP_EAL_ARGS_MAX);
			return;
		}
		cfg->eal_args[cfg->eal_arg_count++] = tok;
	}
}

static void
sec_peers(struct ctx *c, struct app_config *cfg)
{
	for (uint32_t i = 0; i < c->count; i++) {
		const struct scan_ent *e = &c->ents[i];
		long long id;
		if (e->key[0] != '\0' || strncmp(e->sec, "peer.", 5) != 0)
			continue;
		const char *s = e->sec;
		c->ents[i].used = true;
		id = section_index(s, "peer.", UINT32_MAX);
		if (id <= 0) {
			report(c, s, NULL, "peer sections are named peer.<node id>, id 1..4294967295");
			continue;
		}
		if (cfg->dp.peer_count == DP_PEERS_MAX) {
			report(c, s, NULL, "more than %d peers", DP_PEERS_MAX);
			continue;
		}
		struct dp_peer *p = &cfg->dp.peers[cfg->dp.peer_count++];
		p->node_id = (uint32_t)id;
		if ((uint32_t)id == cfg->dp.node_id)
			report(c, s, NULL, "node %lld is this node ([node] id), not a peer", id);
		get_ipv4(c, s, "ip", true, &p->ip_be);
		uint64_t port = cfg->dp.udp_port;
		get_u64(c, s, "udp_port", false, 1, 65535, &port);
		p->port_be = rte_cpu_to_be_16((uint16_t)port);
		p->has_mac = get_mac(c, s, "mac", &p->mac);
		if (p->ip_be == cfg->dp.ip_be && p->ip_be != 0)
			report(c, s, "ip", "same address as this node");
		for (uint32_t j = 0; j + 1 < cfg->dp.peer_count; j++)
			if (p->ip_be != 0 && cfg->dp.peers[j].ip_be == p->ip_be)
				report(c, s, "ip", "same address as [peer.%u]",
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

static void
sec_shards(struct ctx *c, struct app_config *cfg)
{
	for (uint32_t i = 0; i < c->count; i++) {
		const struct scan_ent *e = &c->ents[i];
		if (e->key[0] != '\0' || strncmp(e->sec, "shard.", 6) != 0)
			continue;
		const char *s = e->sec;
		c->ents[i].used = true;
		long long id = section_index(s, "shard.", DP_SHARDS_MAX - 1);
		if (id < 0 || id >= DP_SHARDS_MAX) {
			report(c, s, NULL, "shard sections are named shard.<id>, id 0..%d",
			       DP_SHARDS_MAX - 1);
			continue;
		}
		if (cfg->shard_count == APP_SHARDS_MAX) {
			report(c, s, NULL, "more than %d shards on one host", APP_SHARDS_MAX);
			continue;
		}
		struct app_shard_conf *sh = &cfg->shards[cfg->shard_count++];
		sh->id = (uint16_t)id;
		sh->lcore.idle = idle_default;
		const char *v = get(c, s, "service");
		if (need(c, s, "service", v)) {
			if (strcmp(v, "me") == 0)
				sh->service = APP_SERVICE_ME;
			else if (strcmp(v, "oms") == 0)
				sh->service = APP_SERVICE_OMS;
			else if (strcmp(v, "echo") == 0)
				sh->service = APP_SERVICE_ECHO;
			else
				report(c, s, "service", "'%s' is not one of me|oms|echo", v);
		}
		int n = get_id_list(c, s, "members", sh->members, APP_MEMBERS_MAX);
		if (n > 0) {
			sh->member_count = (uint32_t)n;
			bool self = false;
			if (n != 1 && n != 3 && n != 5)
				report(c, s, "members", "a Raft group has 1, 3 or 5 members, not %d", n);
			for (int m = 0; m < n; m++) {
				self |= sh->members[m] == cfg->dp.node_id;
				if (!member_known(cfg, sh->members[m]))
					report(c, s, "members", "node %u has no [peer.%u] section",
					       sh->members[m], sh->members[m]);
			}
			if (!self)
				report(c, s, "members",
				       "this node (%u) is not a member: list only shards it hosts",
				       cfg->dp.node_id);
		}
		get_lcore(c, s, &sh->lcore);
	}
}

static void
sec_rest(struct ctx *c, struct app_config *cfg)
{
	const char *v;

	get_u64(c, "limits", "resident_users", false, 1, 1u << 30, &cfg->resident_users_max);
	get_u64(c, "limits", "parked_orders", false, 1, 1u << 30, &cfg->parked_orders_max);
	get_u64(c, "limits", "inflight_sagas", false, 1, 1u << 30, &cfg->inflight_sagas_max);

	get_u64(c, "timers", "user_ttl_ms", false, 1, UINT32_MAX, &cfg->user_ttl_ms);
	get_u64(c, "timers", "sweep_ms", false, 1, UINT32_MAX, &cfg->sweep_ms);
	get_u64(c, "timers", "sweep_evict_max", false, 1, 1u << 24, &cfg->sweep_evict_max);
	get_u64(c, "timers", "tick_ms", false, 1, 60000, &cfg->tick_ms);
	get_u64(c, "timers", "bridge_redrive_ms", false, 1, 600000, &cfg->bridge_redrive_ms);
	get_u64(c, "timers", "election_ms", false, 10, 60000, &cfg->election_ms);
	get_u64(c, "timers", "heartbeat_ms", false, 1, 60000, &cfg->heartbeat_ms);
	if (cfg->heartbeat_ms * 2 > cfg->election_ms)
		report(c, "timers", "heartbeat_ms", "%" PRIu64 " is more than half of election_ms "
		       "(%" PRIu64 "): followers would time out between heartbeats",
		       cfg->heartbeat_ms, cfg->election_ms);
	get_u64(c, "limits", "orders", false, 64, 1u << 26, &cfg->orders_max);
	get_u64(c, "limits", "log_entries", false, 1024, 1u << 26, &cfg->log_entries_max);
	get_u64(c, "limits", "log_mb", false, 1, 4095, &cfg->log_mb);
	get_u64(c, "limits", "snapshot_mb", false, 1, 2047, &cfg->snapshot_mb);
	get_u64(c, "limits", "snapshot_entries", false, 16, 1u << 30, &cfg->snapshot_entries);
	if (cfg->snapshot_entries >= cfg->log_entries_max)
		report(c, "limits", "snapshot_entries", "%" PRIu64 " must be below log_entries "
		       "(%" PRIu64 "): the log would fill before the first snapshot",
		       cfg->snapshot_entries, cfg->log_entries_max);
	if (cfg->sweep_ms > cfg->user_ttl_ms)
		report(c, "timers", "sweep_ms", "%" PRIu64 " is longer than user_ttl_ms (%" PRIu64
		       "): users would outlive their TTL by more than a TTL",
		       cfg->sweep_ms, cfg->user_ttl_ms);

	v = get(c, "durability", "mode");
	if (v != NULL) {
		if (strcmp(v, "memory") == 0)
			cfg->durability = APP_DURABILITY_MEMORY;
		else if (strcmp(v, "durable") == 0)
			cfg->durability = APP_DURABILITY_DURABLE;
		else
			report(c, "durability", "mode", "'%s' is not one of memory|durable", v);
	}
	get_str(c, "database", "conninfo", cfg->db_conninfo, sizeof(cfg->db_conninfo));
	get_str(c, "paths", "data_dir", cfg->data_dir, sizeof(cfg->data_dir));
	get_str(c, "paths", "mgmt_socket", cfg->mgmt_socket, sizeof(cfg->mgmt_socket));
	get_str(c, "paths", "stats_file", cfg->stats_file, sizeof(cfg->stats_file));
	if (cfg->data_dir[0] == '\0')
		report(c, "paths", "data_dir", "empty");
	get_key(c, "keys", "peer", &cfg->dp.peer_key);
	get_key(c, "keys", "client", &cfg->dp.client_key);
}

static bool
get_i64(struct ctx *c, const char *sec, const char *key, bool required, int64_t min,
	int64_t max, int64_t *out)
{
	const char *v = get(c, sec, key);
	char *end;

	if (v == NULL) {
		if (required)
			need(c, sec, key, v);
		return false;
	}
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (*v == '\0' || errno != 0 || *end != '\0') {
		report(c, sec, key, "'%s' is not a decimal integer", v);
		return false;
	}
	if (x < min || x > max) {
		report(c, sec, key, "%lld is out of range [%" PRId64 ", %" PRId64 "]", x, min, max);
		return false;
	}
	*out = x;
	return true;
}

/* [routing] epoch, oms_shards = 1,2, pins = user:shard,... Without oms_shards, the OMS
 * shards this node hosts are the active set. */
static void
sec_routing(struct ctx *c, struct app_config *cfg)
{
	const char *s = "routing";
	struct app_routing_conf *r = &cfg->routing;
	char buf[APP_STR_MAX];
	const char *v;

	get_u64(c, s, "epoch", false, 1, UINT32_MAX, &r->epoch);
	v = get(c, s, "oms_shards");
	if (v != NULL) {
		snprintf(buf, sizeof(buf), "%s", v);
		for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
		     tok = strtok_r(NULL, ",", &save)) {
			uint64_t id;
			tok = trim(tok);
			if (!parse_u64(tok, &id) || id >= DP_SHARDS_MAX) {
				report(c, s, "oms_shards", "'%s' is not a shard id (0..%d)", tok,
				       DP_SHARDS_MAX - 1);
				continue;
			}
			if (r->shard_count == WIRE_ROUTE_SHARDS_MAX) {
				report(c, s, "oms_shards", "more than %d shards",
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
	v = get(c, s, "pins");
	if (v != NULL && *v != '\0') {
		snprintf(buf, sizeof(buf), "%s", v);
		for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
		     tok = strtok_r(NULL, ",", &save)) {
			uint64_t user, shard;
			tok = trim(tok);
			char *colon = strchr(tok, ':');
			if (colon == NULL) {
				report(c, s, "pins", "'%s' is not user:shard", tok);
				continue;
			}
			*colon = '\0';
			if (!parse_u64(tok, &user) || user == 0 || !parse_u64(colon + 1, &shard) ||
			    shard >= DP_SHARDS_MAX) {
				report(c, s, "pins", "'%s:%s' is not user:shard", tok, colon + 1);
				continue;
			}
			if (r->pin_count == WIRE_ROUTE_PINS_MAX) {
				report(c, s, "pins", "more than %d pins", WIRE_ROUTE_PINS_MAX);
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
		report(c, s, "oms_shards", "no active OMS shard");
}

static void
sec_symbols(struct ctx *c, struct app_config *cfg)
{
	for (uint32_t i = 0; i < c->count; i++) {
		const struct scan_ent *e = &c->ents[i];
		if (e->key[0] != '\0' || strncmp(e->sec, "symbol.", 7) != 0)
			continue;
		const char *s = e->sec;
		c->ents[i].used = true;
		long long id = section_index(s, "symbol.", UINT32_MAX);
		if (id <= 0) {
			report(c, s, NULL, "symbol sections are named symbol.<id>, id 1..4294967295");
			continue;
		}
		if (cfg->symbol_count == APP_SYMBOLS_MAX) {
			report(c, s, NULL, "more than %d symbols", APP_SYMBOLS_MAX);
			continue;
		}
		struct app_symbol_conf *y = &cfg->symbols[cfg->symbol_count++];
		int64_t v;
		memset(y, 0, sizeof(*y));
		y->id = (uint32_t)id;
		y->tick = y->lot = y->min_qty = y->min_notional = y->base_unit = 1;
		y->ref_px = 0;
		GET_UINT(c, s, "base", true, 1, UINT32_MAX, y->base_asset);
		GET_UINT(c, s, "quote", true, 1, UINT32_MAX, y->quote_asset);
		GET_UINT(c, s, "me_shard", true, 0, DP_SHARDS_MAX - 1, y->me_shard);
		get_i64(c, s, "tick", false, 1, INT64_MAX, &y->tick);
		get_i64(c, s, "lot", false, 1, INT64_MAX, &y->lot);
		get_i64(c, s, "min_qty", false, 1, INT64_MAX, &y->min_qty);
		get_i64(c, s, "min_notional", false, 0, INT64_MAX, &y->min_notional);
		get_i64(c, s, "base_unit", false, 1, INT64_MAX, &y->base_unit);
		get_i64(c, s, "ref_px", false, 0, INT64_MAX, &y->ref_px);
		GET_UINT(c, s, "band_bps", false, 0, 1000000, y->band_bps);
		if (get_i64(c, s, "maker_fee_bps", false, -10000, 10000, &v))
			y->maker_fee_bps = (int16_t)v;
		if (get_i64(c, s, "taker_fee_bps", false, -10000, 10000, &v))
			y->taker_fee_bps = (int16_t)v;
		if (y->base_asset == y->quote_asset && y->base_asset != 0)
			report(c, s, "quote", "same asset as base");
	}
}

/* Every lcore's CPU must be one this process may run on. */
static void
check_cpus(struct ctx *c, struct app_config *cfg)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	struct {
		const char *sec;
		const struct app_lcore_conf *l;
		uint16_t cpu;
	} all[3 + APP_SHARDS_MAX];
	unsigned n = 0;
	all[n++] = (typeof(all[0])){ "io", &cfg->io, cfg->io.cpu };
	if (cfg->bridge.enabled)
		all[n++] = (typeof(all[0])){ "bridge", &cfg->bridge, cfg->bridge.cpu };
	if (cfg->persister.enabled)
		all[n++] = (typeof(all[0])){ "persister", &cfg->persister, cfg->persister.cpu };
	if (!CPU_ISSET(cfg->main_cpu, &set))
		report(c, "eal", "main_cpu", "CPU %u is not available to this process",
		       cfg->main_cpu);
	for (unsigned i = 0; i < n; i++)
		if (!CPU_ISSET(all[i].cpu, &set))
			report(c, all[i].sec, "cpu", "CPU %u is not available to this process",
			       all[i].cpu);
	for (uint32_t i = 0; i < cfg->shard_count; i++) {
		if (!CPU_ISSET(cfg->shards[i].lcore.cpu, &set)) {
			char sec[32];
			snprintf(sec, sizeof(sec), "shard.%u", cfg->shards[i].id);
			report(c, sec, "cpu", "CPU %u is not available to this process",
			       cfg->shards[i].lcore.cpu);
		}
	}
}

static const char *const known_sections[] = {
	"node", "eal", "port", "memory", "io", "bridge", "persister", "limits", "timers",
	"durability", "database", "paths", "keys", "routing", "mgmt",
};

/* [mgmt] metrics_listen = A.B.C.D:PORT, loopback only: the listener has no authentication
 * and serves every counter, so it is never reachable from another host. */
static void
sec_mgmt(struct ctx *c, struct app_config *cfg)
{
	const char *v = get(c, "mgmt", "metrics_listen");
	if (v == NULL || v[0] == '\0')
		return;
	char host[32];
	const char *colon = strrchr(v, ':');
	size_t hl = colon != NULL ? (size_t)(colon - v) : 0;
	if (colon == NULL || hl == 0 || hl >= sizeof(host) || colon[1] == '\0') {
		report(c, "mgmt", "metrics_listen", "'%s' is not ADDRESS:PORT (e.g. 127.0.0.1:9464)",
		       v);
		return;
	}
	memcpy(host, v, hl);
	host[hl] = '\0';
	struct in_addr a;
	if (inet_pton(AF_INET, host, &a) != 1) {
		report(c, "mgmt", "metrics_listen", "'%s' is not an IPv4 address", host);
		return;
	}
	if ((ntohl(a.s_addr) >> 24) != 127) {
		report(c, "mgmt", "metrics_listen", "%s is not a loopback address (127.0.0.0/8): "
		       "the metrics listener has no authentication", host);
		return;
	}
	char *end;
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || port == 0 || port > 65535 || colon[1] == '-') {
		report(c, "mgmt", "metrics_listen", "port '%s' is not 1..65535", colon + 1);
		return;
	}
	snprintf(cfg->metrics_listen, sizeof(cfg->metrics_listen), "%s", v);
	cfg->metrics_ip_be = a.s_addr;
	cfg->metrics_port = (uint16_t)port;
}

int
app_config_load(const char *path, struct app_config *cfg, FILE *err)
{
	struct ctx c = { .file = path, .err = err };
	struct rte_cfgfile_parameters params = { .comment_character = COMMENT };

	defaults(cfg);
	snprintf(cfg->path, sizeof(cfg->path), "%s", path);
	if (scan_file(&c, path) != 0 || c.errors > 0)
		goto out;
	c.cfg = rte_cfgfile_load_with_params(path, CFG_FLAG_EMPTY_VALUES, &params);
	if (c.cfg == NULL) {
		fprintf(err, "%s: rte_cfgfile could not parse the file\n", path);
		c.errors++;
		goto out;
	}

	sec_node(&c, cfg);
	sec_eal(&c, cfg);
	sec_port(&c, cfg);
	sec_memory(&c, cfg);
	get_lcore(&c, "io", &cfg->io);
	if (rte_cfgfile_has_section(c.cfg, "bridge"))
		get_lcore(&c, "bridge", &cfg->bridge);
	if (rte_cfgfile_has_section(c.cfg, "persister"))
		get_lcore(&c, "persister", &cfg->persister);
	sec_peers(&c, cfg);
	sec_shards(&c, cfg);
	sec_rest(&c, cfg);
	sec_mgmt(&c, cfg);
	sec_routing(&c, cfg);
	sec_symbols(&c, cfg);
	if (cfg->db_conninfo[0] != '\0' && !cfg->persister.enabled)
		report(&c, "database", "conninfo", "needs a [persister] lcore to run on");
	/* Holding RX holds Raft traffic too: a member of a replicated shard could never elect. */
	for (uint32_t i = 0; cfg->rx_start_leader && i < cfg->shard_count; i++) {
		if (cfg->shards[i].member_count > 1) {
			report(&c, "port", "rx_start", "leader needs single-member shards (shard %u "
			       "has %u members and elects over this port)", cfg->shards[i].id,
			       cfg->shards[i].member_count);
			break;
		}
	}
	if (cfg->rx_hold_frames >= cfg->ring_size)
		report(&c, "port", "rx_hold_frames", "%u must be below [memory] ring_size (%u)",
		       cfg->rx_hold_frames, cfg->ring_size);
	if (cfg->shard_count == 0)
		report(&c, NULL, NULL, "no [shard.N] section: a node hosts at least one shard");
	check_cpus(&c, cfg);

	/* Whatever nobody asked for is a typo or a key this version does not have. An unknown
	 * section is reported once, not once per key in it. */
	for (uint32_t i = 0; i < c.count; i++) {
		struct scan_ent *e = &c.ents[i];
		const struct scan_ent *hdr = scan_find(&c, e->sec, "");
		bool sec_known = hdr != NULL && hdr->used;
		for (unsigned k = 0; k < RTE_DIM(known_sections) && !sec_known; k++)
			sec_known = strcmp(e->sec, known_sections[k]) == 0;
		if (e->key[0] == '\0' && !sec_known)
			report(&c, e->sec, NULL, "unknown section");
		else if (e->key[0] != '\0' && !e->used && sec_known)
			report(&c, e->sec, e->key, "unknown key");
	}
	rte_cfgfile_close(c.cfg);
out:
	free(c.ents);
	return c.errors;
}

const char *
app_service_name(enum app_service s)
{
	return s == APP_SERVICE_ME ? "me" : s == APP_SERVICE_OMS ? "oms" :
	       s == APP_SERVICE_ECHO ? "echo" : "?";
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
	for (uint32_t i = 0; i < cfg->shard_count; i++) {
		const struct app_shard_conf *s = &cfg->shards[i];
		fprintf(out, "shard.%u = %s, %u member(s), cpu %u, idle %s\n", s->id,
			app_service_name(s->service), s->member_count, s->lcore.cpu,
			dp_idle_mode_name(s->lcore.idle.mode));
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
	fprintf(out, "mgmt.metrics_listen = %s\n",
		cfg->metrics_listen[0] ? cfg->metrics_listen : "off");
	fprintf(out, "database = %s\n", cfg->db_conninfo[0] ? "configured" : "none");
	fprintf(out, "durability.mode = %s\nkeys.peer = %s\nkeys.client = %s\n",
		cfg->durability == APP_DURABILITY_DURABLE ? "durable" : "memory",
		(cfg->dp.peer_key.k0 | cfg->dp.peer_key.k1) ? "set" : "none",
		(cfg->dp.client_key.k0 | cfg->dp.client_key.k1) ? "set" : "none");
}

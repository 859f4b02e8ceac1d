/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration loader's typed getters (app_config_int.h): one key read through
 * rte_cfgfile, its scan entry marked used, its value checked against its type and range.
 * Each getter reports its own error as FILE:LINE: [section] key: reason, so the section
 * readers say only which key, which range and where the value goes.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "app_config_int.h"

const char *
cfg_get(struct cfg_ctx *c, const char *sec, const char *key)
{
	struct cfg_scan_ent *e = cfg_scan_find(c, sec, key);
	if (e != NULL)
		e->used = true;
	return rte_cfgfile_get_entry(c->cfg, sec, key);
}

bool
cfg_need(struct cfg_ctx *c, const char *sec, const char *key, const char *v)
{
	if (v == NULL) {
		cfg_report(c, sec, key, "missing (required)");
		return false;
	}
	return true;
}

bool
cfg_parse_u64(const char *v, uint64_t *out)
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

bool
cfg_get_u64(struct cfg_ctx *c, const char *sec, const char *key, bool required, uint64_t min,
	uint64_t max, uint64_t *out)
{
	const char *v = cfg_get(c, sec, key);
	uint64_t x;

	if (v == NULL) {
		if (required)
			cfg_need(c, sec, key, v);
		return false;
	}
	if (!cfg_parse_u64(v, &x)) {
		cfg_report(c, sec, key, "'%s' is not a non-negative decimal integer", v);
		return false;
	}
	if (x < min || x > max) {
		cfg_report(c, sec, key, "%" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64 "]", x,
			   min, max);
		return false;
	}
	*out = x;
	return true;
}

bool
cfg_get_bool(struct cfg_ctx *c, const char *sec, const char *key, bool *out)
{
	const char *v = cfg_get(c, sec, key);
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
	cfg_report(c, sec, key, "'%s' is not a boolean (yes|no|true|false|on|off|1|0)", v);
	return false;
}

bool
cfg_get_str(struct cfg_ctx *c, const char *sec, const char *key, char *out, size_t size)
{
	const char *v = cfg_get(c, sec, key);
	if (v == NULL)
		return false;
	if (strlen(v) >= size) {
		cfg_report(c, sec, key, "longer than %zu bytes", size - 1);
		return false;
	}
	snprintf(out, size, "%s", v);
	return true;
}

bool
cfg_parse_ipv4(const char *v, uint32_t *ip_be)
{
	struct in_addr a;
	if (inet_pton(AF_INET, v, &a) != 1)
		return false;
	*ip_be = a.s_addr;
	return true;
}

bool
cfg_get_ipv4(struct cfg_ctx *c, const char *sec, const char *key, bool required, uint32_t *ip_be)
{
	const char *v = cfg_get(c, sec, key);
	if (v == NULL || *v == '\0') {
		if (required)
			cfg_report(c, sec, key, "missing (required)");
		return false;
	}
	if (!cfg_parse_ipv4(v, ip_be) || *ip_be == 0 || *ip_be == UINT32_MAX) {
		cfg_report(c, sec, key, "'%s' is not a unicast IPv4 address (a.b.c.d)", v);
		return false;
	}
	return true;
}

bool
cfg_get_mac(struct cfg_ctx *c, const char *sec, const char *key, struct rte_ether_addr *mac)
{
	const char *v = cfg_get(c, sec, key);
	if (v == NULL || *v == '\0')
		return false;
	if (rte_ether_unformat_addr(v, mac) != 0 || !rte_is_unicast_ether_addr(mac) ||
	    rte_is_zero_ether_addr(mac)) {
		cfg_report(c, sec, key, "'%s' is not a unicast MAC address (aa:bb:cc:dd:ee:ff)", v);
		return false;
	}
	return true;
}

bool
cfg_get_key(struct cfg_ctx *c, const char *sec, const char *key, struct wire_key *out)
{
	const char *v = cfg_get(c, sec, key);
	struct wire_key k;

	if (v == NULL || *v == '\0')
		return false;
	if (strlen(v) != 32) {
		cfg_report(c, sec, key, "must be 32 hex digits (a 128-bit SipHash key), got %zu "
			   "chars", strlen(v));
		return false;
	}
	if (wire_key_parse_hex(v, &k) != 0) {
		cfg_report(c, sec, key, "'%s' is not hexadecimal", v);
		return false;
	}
	if ((k.k0 | k.k1) == 0) {
		cfg_report(c, sec, key, "an all-zero key means no MAC; leave the key empty instead");
		return false;
	}
	*out = k;
	return true;
}

bool
cfg_get_i64(struct cfg_ctx *c, const char *sec, const char *key, bool required, int64_t min,
	int64_t max, int64_t *out)
{
	const char *v = cfg_get(c, sec, key);
	char *end;

	if (v == NULL) {
		if (required)
			cfg_need(c, sec, key, v);
		return false;
	}
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (*v == '\0' || errno != 0 || *end != '\0') {
		cfg_report(c, sec, key, "'%s' is not a decimal integer", v);
		return false;
	}
	if (x < min || x > max) {
		cfg_report(c, sec, key, "%lld is out of range [%" PRId64 ", %" PRId64 "]", x, min,
			   max);
		return false;
	}
	*out = x;
	return true;
}

void
cfg_get_lcore(struct cfg_ctx *c, const char *sec, struct app_lcore_conf *l)
{
	const char *v;

	l->enabled = true;
	CFG_GET_UINT(c, sec, "cpu", false, 0, CPU_SETSIZE - 1, l->cpu);
	v = cfg_get(c, sec, "idle");
	if (v != NULL && dp_idle_mode_parse(v, &l->idle.mode) != 0)
		cfg_report(c, sec, "idle", "'%s' is not one of busy|pause|sleep", v);
	CFG_GET_UINT(c, sec, "idle_spins", false, 0, UINT32_MAX, l->idle.spins);
	CFG_GET_UINT(c, sec, "idle_sleep_us", false, 1, 1000000, l->idle.sleep_us_max);
	CFG_GET_UINT(c, sec, "idle_sleep_min_us", false, 1, 1000000, l->idle.sleep_us_min);
	CFG_GET_UINT(c, sec, "idle_wait_us", false, 1, 1000000, l->idle.wait_us_max);
}

/* [io] cpus: "1,3" — one CPU per io lcore, as many as [port] rx_queues. Without it every io
 * lcore runs on [io] cpu. Reported here: a bad list, the wrong count, a cpu that differs. */
void
cfg_get_io_cpus(struct cfg_ctx *c, struct app_config *cfg)
{
	const uint32_t n = cfg->dp.rx_queues == 0 ? 1 : cfg->dp.rx_queues;
	const char *v = cfg_get(c, "io", "cpus");
	for (uint32_t k = 0; k < DP_IO_MAX; k++)
		cfg->io_cpus[k] = cfg->io.cpu;
	if (v == NULL)
		return;
	char buf[APP_STR_MAX];
	uint32_t got = 0;
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		uint64_t cpu;
		tok = cfg_trim(tok);
		if (!cfg_parse_u64(tok, &cpu) || cpu >= CPU_SETSIZE) {
			cfg_report(c, "io", "cpus", "'%s' is not a CPU number (0..%d)", tok,
				   CPU_SETSIZE - 1);
			return;
		}
		if (got == DP_IO_MAX) {
			cfg_report(c, "io", "cpus", "more than %d io lcores", DP_IO_MAX);
			return;
		}
		cfg->io_cpus[got++] = (uint16_t)cpu;
	}
	if (got != n) {
		cfg_report(c, "io", "cpus", "%u CPU(s) for %u io lcore(s): list one per [port] "
			   "rx_queues", got, n);
		return;
	}
	if (cfg_get(c, "io", "cpu") != NULL && cfg->io.cpu != cfg->io_cpus[0]) {
		cfg_report(c, "io", "cpus", "the first (%u) is not [io] cpu (%u): give one of them",
			   cfg->io_cpus[0], cfg->io.cpu);
		return;
	}
	cfg->io.cpu = cfg->io_cpus[0];
}

/* Parse "1,2,3" into ids. Returns the count, or -1 (reported). */
int
cfg_get_id_list(struct cfg_ctx *c, const char *sec, const char *key, uint32_t *ids, int max)
{
	const char *v = cfg_get(c, sec, key);
	char buf[APP_STR_MAX];
	int n = 0;

	if (!cfg_need(c, sec, key, v))
		return -1;
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		uint64_t id;
		tok = cfg_trim(tok);
		if (!cfg_parse_u64(tok, &id) || id == 0 || id > UINT32_MAX) {
			cfg_report(c, sec, key, "'%s' is not a node id (1..4294967295)", tok);
			return -1;
		}
		if (n == max) {
			cfg_report(c, sec, key, "more than %d members", max);
			return -1;
		}
		for (int i = 0; i < n; i++) {
			if (ids[i] == id) {
				cfg_report(c, sec, key, "node %" PRIu64 " listed twice", id);
				return -1;
			}
		}
		ids[n++] = (uint32_t)id;
	}
	if (n == 0) {
		cfg_report(c, sec, key, "empty member list");
		return -1;
	}
	return n;
}

/* "name.N" → N (at most max), or -1. */
long long
cfg_section_index(const char *sec, const char *prefix, uint64_t max)
{
	size_t p = strlen(prefix);
	uint64_t x;
	if (strncmp(sec, prefix, p) != 0 || !cfg_parse_u64(sec + p, &x) || x > max)
		return -1;
	return (long long)x;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration loader's private header, shared by its files and its unit test only.
 * The loader reads one INI file in two passes (app_config.c runs them):
 *
 *  1. app_config_ini.c: a scan of our own that mirrors rte_cfgfile's grammar and records
 *     the line of every section and key (rte_cfgfile keeps no line numbers). It also
 *     catches what rte_cfgfile silently accepts: lines that are neither a section nor
 *     key = value, duplicate sections and keys, names or values it would truncate.
 *  2. rte_cfgfile_load, then every known key is read through the typed getters of
 *     app_config_get.c and validated; the getter marks the scan entry used. The sections
 *     are read by app_config_host.c (the node, its port, memory, lcores, peers and shards),
 *     app_config_svc.c (limits, timers, paths, keys, routing, symbols, mgmt) and
 *     app_config_place.c (leadership placement).
 *     app_config_check.c then checks what spans sections, and reports whatever the scan
 *     saw that nobody read as an unknown key or section.
 *
 * All errors are collected (not just the first), each as FILE:LINE: [section] key: reason,
 * through cfg_report, which finds the line in the scan.
 */
#ifndef OMSD_APP_APP_CONFIG_INT_H
#define OMSD_APP_APP_CONFIG_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_cfgfile.h>
#include <rte_ether.h>

#include "app_config.h"
#include "app_keys.h"

#define CFG_SCAN_LINE_MAX (CFG_NAME_LEN + CFG_VALUE_LEN + 4) /* rte_cfgfile's line buffer */
#define CFG_COMMENT ';'

/* One section header or key the scan saw. */
struct cfg_scan_ent {
	char sec[CFG_NAME_LEN];  /* section name */
	char key[CFG_NAME_LEN];  /* key, "" for the section header itself */
	int line;                /* 1-based line number */
	bool used;               /* read by pass 2 */
};

/* One load: where messages go, the scan, the parsed file and the error count. */
struct cfg_ctx {
	const char *file;            /* for messages */
	FILE *err;                   /* where messages go */
	struct rte_cfgfile *cfg;     /* pass 2 */
	struct cfg_scan_ent *ents;   /* pass 1 result */
	uint32_t count;              /* ents in use */
	uint32_t cap;                /* ents allocated */
	int errors;                  /* reported so far */
	bool join;                   /* omsd --join: shards not listing us are joined */
};

/* app_config_ini.c: pass 1 and the error reports. */
int cfg_scan_file(struct cfg_ctx *c, const char *path); /* 0 or -errno (reported) */
struct cfg_scan_ent *cfg_scan_find(struct cfg_ctx *c, const char *sec, const char *key);
/* FILE:LINE: [sec] key: text. sec and key may be NULL; a missing key points at its section. */
__attribute__((format(printf, 4, 5))) void cfg_report(struct cfg_ctx *c, const char *sec,
						      const char *key, const char *fmt, ...);
char *cfg_trim(char *s); /* trims s in place; returns the new start */

/* app_config_get.c: typed getters. Each returns true when the key was present (and valid),
 * false when absent (the default stays) or invalid (an error was reported). */
const char *cfg_get(struct cfg_ctx *c, const char *sec, const char *key);
bool cfg_need(struct cfg_ctx *c, const char *sec, const char *key, const char *v);
bool cfg_parse_u64(const char *v, uint64_t *out);
bool cfg_parse_ipv4(const char *v, uint32_t *ip_be);
bool cfg_get_u64(struct cfg_ctx *c, const char *sec, const char *key, bool required,
		 uint64_t min, uint64_t max, uint64_t *out);
bool cfg_get_i64(struct cfg_ctx *c, const char *sec, const char *key, bool required,
		 int64_t min, int64_t max, int64_t *out);
bool cfg_get_bool(struct cfg_ctx *c, const char *sec, const char *key, bool *out);
bool cfg_get_str(struct cfg_ctx *c, const char *sec, const char *key, char *out, size_t size);
bool cfg_get_ipv4(struct cfg_ctx *c, const char *sec, const char *key, bool required,
		  uint32_t *ip_be);
bool cfg_get_mac(struct cfg_ctx *c, const char *sec, const char *key,
		 struct rte_ether_addr *mac);
bool cfg_get_key(struct cfg_ctx *c, const char *sec, const char *key, struct wire_key *out);
void cfg_get_lcore(struct cfg_ctx *c, const char *sec, struct app_lcore_conf *l);
/* "1,2,3" into node ids: the count, or -1 (reported). */
void cfg_get_io_cpus(struct cfg_ctx *c, struct app_config *cfg);
int cfg_get_id_list(struct cfg_ctx *c, const char *sec, const char *key, uint32_t *ids,
		    int max);
/* "name.N" → N (at most max), or -1. */
long long cfg_section_index(const char *sec, const char *prefix, uint64_t max);

/* Unsigned fields narrower than 64 bits. */
#define CFG_GET_UINT(c, sec, key, req, min, max, field)                                    \
	do {                                                                               \
		uint64_t v_ = (field);                                                     \
		if (cfg_get_u64(c, sec, key, req, min, max, &v_))                          \
			(field) = (__typeof__(field))v_;                                   \
	} while (0)

/* app_config_host.c: defaults and the node's own sections. */
void cfg_defaults(struct app_config *cfg);
void cfg_sec_node(struct cfg_ctx *c, struct app_config *cfg);
void cfg_sec_eal(struct cfg_ctx *c, struct app_config *cfg);
void cfg_sec_port(struct cfg_ctx *c, struct app_config *cfg);
void cfg_sec_memory(struct cfg_ctx *c, struct app_config *cfg);
void cfg_sec_peers(struct cfg_ctx *c, struct app_config *cfg);
void cfg_sec_shards(struct cfg_ctx *c, struct app_config *cfg);

/* app_config_svc.c: the services' sections. */
void cfg_sec_rest(struct cfg_ctx *c, struct app_config *cfg);
void cfg_sec_mgmt(struct cfg_ctx *c, struct app_config *cfg);
void cfg_sec_routing(struct cfg_ctx *c, struct app_config *cfg);
void cfg_sec_symbols(struct cfg_ctx *c, struct app_config *cfg);

/* app_config_place.c: [placement] and [shard.N] leader_preference (after the shards, the
 * timers and the symbols are read). */
void cfg_sec_placement(struct cfg_ctx *c, struct app_config *cfg);

/* app_config_check.c: the windows (fills the derived dedup window), what spans sections,
 * CPUs, and what nobody read. */
void cfg_check_windows(struct cfg_ctx *c, struct app_config *cfg);
void cfg_check_cross(struct cfg_ctx *c, const struct app_config *cfg);
void cfg_check_cpus(struct cfg_ctx *c, const struct app_config *cfg);
void cfg_check_unknown(struct cfg_ctx *c);

#endif

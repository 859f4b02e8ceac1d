/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Read-only views of a running node (app_views.c), served by the control socket, the DPDK
 * telemetry commands (app_telemetry.c) and the metrics HTTP listener (app_http.c).
 * Private to app/.
 */
#ifndef OMSD_APP_APP_VIEWS_H
#define OMSD_APP_APP_VIEWS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "app.h"

struct mgmt_out;
struct mgmt_server;

/* One lcore as the views show it (published values only). */
struct app_view_lcore {
	char name[32];             /* "io", "shard1", ... */
	unsigned lcore;            /* EAL lcore id */
	uint16_t cpu;              /* pinned CPU */
	const char *role;          /* io | shard | bridge | persister */
	const char *idle;          /* idle back-off mode: busy | pause | sleep */
	uint64_t busy_permille;    /* busy time / wall time over the last window */
	uint64_t sleeps_per_s;     /* idle sleeps per second over the last window */
	uint64_t ring_used;        /* entries waiting in the rings it drains */
	uint64_t ring_size;        /* their capacity */
	uint64_t cycles, work_cycles, work_items, busy_ns, max_cycle_ns, over_threshold, sleeps;
};
/* The fields every rendering of a lcore shows under their own names, in order (the telemetry
 * and the control socket walk these lists): U an integer, S a string; the busy figures,
 * rendered differently by each, stand between the two lists. */
#define APP_VIEW_LCORE_HEAD(U, S) U(lcore) U(cpu) S(role) S(idle)
#define APP_VIEW_LCORE_COUNTS(X)                                                         \
	X(sleeps_per_s) X(ring_used) X(ring_size) X(cycles) X(work_cycles) X(work_items)  \
	X(max_cycle_ns) X(over_threshold) X(sleeps)

/* A thread's buffers for reading the counters (not shared between threads). */
struct app_view_ctx;
struct app_view_ctx *app_view_ctx_new(void);
void app_view_ctx_free(struct app_view_ctx *c);

/* More "name value" lines for the metrics (e.g. the HTTP listener's own counters). */
typedef void(app_views_extra_fn)(FILE *out);

/* Main lcore: set up (after the roles are wired), sample every main tick, tear down. */
int app_views_open(const struct app *app, app_views_extra_fn *extra);
void app_views_tick(uint64_t now_ns);
void app_views_close(void);
struct app_view_ctx *app_views_main_ctx(void);

/* The lcores, up to max. Any thread. */
uint32_t app_views_lcores(const struct app *app, struct app_view_lcore *out, uint32_t max);

/* Read every counter (app_stats_write, plus the views' own lines when extra) into c, then
 * walk "name value" pairs. */
int app_view_read(struct app_view_ctx *c, const struct app *app, bool extra);
typedef void(app_view_each_fn)(void *arg, const char *name, const char *value);
void app_view_each(struct app_view_ctx *c, app_view_each_fn *fn, void *arg);
/* A counter value that is a (signed) decimal integer, not text. */
bool app_view_is_integer(const char *s);

/* Every counter, the lcore figures and the latency histograms as Prometheus text 0.0.4
 * (one HELP/TYPE per family, samples grouped). 0, or -E2BIG when o is too small. */
int app_metrics_write(struct app_view_ctx *c, const struct app *app, struct mgmt_out *o);

/* Control socket: register `members` and `lcores`; add last_index, elections and the lag
 * per member to one shard's `status` object. */
void app_views_register(struct mgmt_server *srv);
void app_views_status_shard(struct mgmt_out *o, uint16_t shard_id);

/* app_telemetry.c: /omsd/status, /omsd/members, /omsd/lcores, /omsd/stats. */
int app_telemetry_register(const struct app *app);
void app_telemetry_close(void);

/* app_http.c: [mgmt] metrics_listen. */
int app_http_open(const struct app *app);
void app_http_poll(void);
void app_http_close(void);
void app_http_stats_write(FILE *out);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsd under a service manager (app_notify.c; docs/install.md, omsd(8)): readiness, status,
 * stopping and the watchdog over the sd_notify protocol (systemd Type=notify), the log
 * routed to the journal once with its priorities, and the guard that keeps a node that ran
 * in memory mode from being restarted without the operator. Main lcore only. Private to
 * app/.
 */
#ifndef OMSD_APP_APP_NOTIFY_H
#define OMSD_APP_APP_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "app.h"

/* Exit status of a start refused by the memory-mode guard; the units list it in
 * RestartPreventExitStatus= so the service manager does not try again. */
#define APP_EXIT_MEMORY_RAN 3

/* The file a node in memory mode leaves in [paths] data_dir when started with --service. */
#define APP_MEMORY_MARK "memory-run"

/* Before the EAL: when stderr is the journal ($JOURNAL_STREAM names it), every rte_log line
 * goes to stderr only, with its syslog priority as a "<N>" prefix (the EAL would also copy
 * it to syslog, which is the journal again). Otherwise nothing changes. */
void app_notify_log_init(void);

/* Memory-mode guard, before the EAL. service: omsd --service (the units pass it). In
 * [durability] mode = memory, a previous start on this data_dir left APP_MEMORY_MARK: its
 * Raft logs and votes are gone, so refuse (-EEXIST, the reason written to err). 0 when the
 * guard does not apply or there is no mark; -errno when the mark cannot be read. */
int app_service_guard_check(const struct app_config *cfg, bool service, FILE *err);
/* Once the lcores run (they may vote from now on): write the mark, synced. 0, or -errno
 * (logged): the caller stops, since a restart could not be refused. */
int app_service_guard_mark(const struct app_config *cfg, bool service);

/* STATUS=text (no-op without a service manager). */
void app_notify_status(const char *text);
/* After the lcores launched: read WATCHDOG_USEC, announce "waiting for leaders". */
void app_notify_open(const struct app *app, uint64_t now_ns);
/* Every main tick: at most every 100 ms, READY=1 once every hosted shard has a leader and
 * has applied what it committed in the leader's term (app_shard_ready; echo shards count as
 * ready), STATUS= whenever the summary changes, WATCHDOG=1 while every lcore keeps cycling. */
void app_notify_tick(const struct app *app, uint64_t now_ns);
/* STOPPING=1 at the start of shutdown. */
void app_notify_stopping(void);

#endif

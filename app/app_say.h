/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the worker threads beside the lcores (the file log's writer, app_logw.h; the shadow
 * copy, app_shadow.h) share: a way to say something through their host's log, and the
 * clock they time their work with. No DPDK here: they are unit-tested alone.
 */
#ifndef OMSD_APP_SAY_H
#define OMSD_APP_SAY_H

#include <stdbool.h>
#include <stdint.h>

/* What a worker says (from its thread): crit for what will not mend itself. */
typedef void app_say_fn(void *ctx, bool crit, const char *text);

/* Format into a line of at most 255 bytes and hand it to say (nothing when say is NULL). */
void app_sayf(app_say_fn *say, void *ctx, bool crit, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* CLOCK_MONOTONIC, ns. */
uint64_t app_mono_ns(void);

#endif /* OMSD_APP_SAY_H */

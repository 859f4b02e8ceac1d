/* SPDX-License-Identifier: Apache-2.0 */
/* The worker threads' shared helpers (app_say.h). */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "app/app_say.h"

void
app_sayf(app_say_fn *say, void *ctx, bool crit, const char *fmt, ...)
{
	if (say == NULL)
		return;
	char text[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	say(ctx, crit, text);
}

uint64_t
app_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

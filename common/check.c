/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one place a pure module may write: a failed CHECK prints its location to stderr and
 * aborts. This is the crash path, not service I/O; it never runs on a healthy node.
 */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>

static check_hook_fn *check_hook;

void
check_hook_set(check_hook_fn *hook)
{
	check_hook = hook;
}

void
check_fail(const char *file, int line, const char *expr)
{
	if (check_hook != NULL)
		check_hook(file, line, expr);
	fprintf(stderr, "CHECK failed: %s:%d: %s\n", file, line, expr);
	fflush(stderr);
	abort();
}

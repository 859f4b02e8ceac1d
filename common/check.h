/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Assertions that stay on in release builds (TigerBeetle, RTE_VERIFY, Redis assert).
 *
 * CHECK(cond)  — always compiled; a false condition is a programmer error and aborts with
 *                file, line and the expression text.
 * DCHECK(cond) — for per-message inner loops; compiled in when OMSD_DCHECK is defined (tests,
 *                debug builds), otherwise the expression is type-checked but not evaluated.
 *
 * Operating errors (bad input from the wire, a full ring) never reach a CHECK: they return
 * -errno or a reason code. CHECK guards the other side of those boundaries.
 */
#ifndef OMSD_COMMON_CHECK_H
#define OMSD_COMMON_CHECK_H

#include <stdbool.h>

/* Report a failed check and abort (SIGABRT). Never returns. */
__attribute__((noreturn, cold)) void check_fail(const char *file, int line, const char *expr);

/* Hook a host may set to log the failure somewhere better than stderr before the abort. */
typedef void(check_hook_fn)(const char *file, int line, const char *expr);
void check_hook_set(check_hook_fn *hook);

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (__builtin_expect(!(cond), 0))                                          \
			check_fail(__FILE__, __LINE__, #cond);                             \
	} while (0)

#ifdef OMSD_DCHECK
#define DCHECK(cond) CHECK(cond)
#else
#define DCHECK(cond)                                                                       \
	do {                                                                               \
		(void)sizeof(!(cond));                                                     \
	} while (0)
#endif

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif

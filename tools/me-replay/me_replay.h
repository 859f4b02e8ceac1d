/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsd-me-replay as a function (me_replay.c): the tool's main is these two calls, and the
 * fuzzer (tests/fuzz/fuzz_me_replay.c) builds me_replay.c with -DME_REPLAY_NO_MAIN to feed
 * the same JSON-lines reader and engine driver many inputs in one process.
 */
#ifndef OMSD_TOOLS_ME_REPLAY_H
#define OMSD_TOOLS_ME_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "me/me.h"

/* The tool's engine limits. */
void me_replay_limits_default(struct me_limits *limits);
/* Replay every line of in through a fresh engine of these limits; events to stdout, bad
 * lines reported on stderr and counted in *bad_lines (may be NULL). 0, or 1 when the engine
 * cannot be set up. Leaves no state behind: runs may follow each other. */
int me_replay_run(FILE *in, const struct me_limits *limits, bool dump, uint64_t *bad_lines);

#endif

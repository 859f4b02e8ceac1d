/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for omsd-me-replay (tools/me-replay/me_replay.c, built here with
 * -DME_REPLAY_NO_MAIN): its JSON-lines reader and the engine driver behind it, from a
 * memory stream, through an engine of small limits (so the fuzzer reaches full books,
 * full streams and unknown orders quickly).
 *
 * Properties: no line, however long, malformed or hostile (unterminated strings, bad
 * escapes, numbers out of range, too many fields, unknown ops, negative times, orders of
 * unknown symbols or users) crashes the tool or the engine (no CHECK or DCHECK trips), and
 * the run leaves nothing allocated (LeakSanitizer).
 */
#include <stdio.h>
#include <string.h>

#include "common/check.h"
#include "fuzz_util.h"
#include "tools/me-replay/me_replay.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65536)
		return 0;
	fz_quiet_stdout();
	struct me_limits l;
	me_replay_limits_default(&l);
	l.orders_max = 512;
	l.users_max = 64;
	l.levels_max = 256;
	l.levels_side_max = 64;
	l.gtd_max = 64;
	l.events_max = 256;
	l.events_reserve = 16;
	FILE *in = fmemopen((void *)(uintptr_t)data, size, "r");
	if (in == NULL)
		return 0; /* fmemopen refuses size 0 on some libcs */
	uint64_t bad = 0;
	CHECK(me_replay_run(in, &l, size & 1, &bad) == 0);
	fclose(in);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --digest of the service benches (me_bench, oms_bench): every message a service emits, with
 * its destination, folded in order into a 64-bit FNV-1a. Two builds of a service that emit
 * the same messages print the same digest — the check that a change to a hot path changed
 * nothing it does (docs/perf.md). Not a hash for anything else.
 */
#ifndef OMSD_TESTS_BENCH_DIGEST_H
#define OMSD_TESTS_BENCH_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"

#define BENCH_DIGEST_INIT UINT64_C(0xcbf29ce484222325) /* FNV-1a's offset basis */

static inline uint64_t
bench_fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *c = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * UINT64_C(0x100000001b3);
	return h;
}

/* The digest h with one more message, sent to dest. */
static inline uint64_t
bench_digest_add(uint64_t h, uint32_t dest, const struct wire_msg_hdr *msg)
{
	h = bench_fnv1a(h, &dest, sizeof(dest));
	return bench_fnv1a(h, msg, msg->length);
}

#endif

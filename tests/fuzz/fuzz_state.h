/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The small matching engine and OMS shard the snapshot targets restore into, and the market
 * the seed writer runs through them (fuzz-seeds): the seeds are real snapshots of these very
 * limits, since a snapshot only restores into an instance of the limits that wrote it.
 */
#ifndef OMSD_TESTS_FUZZ_STATE_H
#define OMSD_TESTS_FUZZ_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "me/me.h"
#include "oms/oms.h"

#define FZ_SYM_A 1   /* base 1 / quote 2, tick 10, lot 1, ME shard 0 */
#define FZ_SYM_B 2   /* base 3 / quote 2, tick 1, lot 5, ME shard 0, GTD orders */

void fz_me_limits(struct me_limits *l);
void fz_oms_limits(struct oms_limits *l);
/* A fresh engine / shard in memory kept across calls (slot 0 or 1: two of each). */
struct me *fz_me_new(int slot);
struct oms *fz_oms_new(int slot);
/* The engine fz_me_new(slot) made last, as it is now. */
struct me *fz_me_last(int slot);

/* Run `steps` rounds of a seeded market through one OMS shard and one engine wired
 * together: symbols, hydrated and funded users, limit orders both ways (fills, resting
 * orders), cancels, amends, market and GTD orders, stream acks. Time ends at *now_ns. */
void fz_market(struct oms *oms, struct me *me, uint32_t steps, uint64_t seed, uint64_t *now_ns);

/* Make the checksum of an ME snapshot right again after a mutation (the fuzzer cannot
 * forge XXH3), so the checks behind it are reached. No-op on a buffer too short. */
void fz_me_snapshot_fix(uint8_t *buf, size_t len);

/* A sink that drops everything. */
extern struct svc_sink fz_null_sink;

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rendezvous (highest random weight) hashing of users over OMS shards.
 *
 * Seed: "HRW(userId, membershipList) over the epoch-versioned cluster-membership list. No
 * per-user directory: every gateway computes the same answer." Weight of (user, shard) is
 * xxh3-64 of the user id with the shard id as seed; the owner is the shard of highest weight
 * (ties broken by the lower shard id). Adding or removing one of N shards moves ~1/N users.
 */
#ifndef OMSD_COMMON_HRW_H
#define OMSD_COMMON_HRW_H

#include <stdint.h>

/* Weight of user on shard. Pure function of its arguments, identical on every host. */
uint64_t hrw_weight(uint64_t user, uint16_t shard);

/* The owner of user among shards[0..count). count must be > 0. */
uint16_t hrw_pick(uint64_t user, const uint16_t *shards, uint32_t count);

#endif

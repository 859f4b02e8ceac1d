/* SPDX-License-Identifier: Apache-2.0 */
#include "hrw.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "check.h"

uint64_t
hrw_weight(uint64_t user, uint16_t shard)
{
	/* Hash the little-endian bytes of the id so every host computes the same weight. */
	uint8_t bytes[8];
	for (int i = 0; i < 8; i++)
		bytes[i] = (uint8_t)(user >> (8 * i));
	return XXH3_64bits_withSeed(bytes, sizeof(bytes), shard);
}

uint16_t
hrw_pick(uint64_t user, const uint16_t *shards, uint32_t count)
{
	CHECK(count > 0);
	if (count == 1)
		return shards[0]; /* one candidate: its weight decides nothing */
	uint16_t best = shards[0];
	uint64_t best_w = hrw_weight(user, best);
	for (uint32_t i = 1; i < count; i++) {
		uint64_t w = hrw_weight(user, shards[i]);
		/* Ties (astronomically rare) go to the lower shard id, independent of order. */
		if (w > best_w || (w == best_w && shards[i] < best)) {
			best = shards[i];
			best_w = w;
		}
	}
	return best;
}

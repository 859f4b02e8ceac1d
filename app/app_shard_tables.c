/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shard lcore's user and transfer tables (app_shard_int.h): open addressing over a
 * fixed slab allocated at set-up, a bounded probe window, and a full window overwrites the
 * home slot. They are caches (where a user's gateway is, which client sent a transfer), so
 * a lost entry costs a default route or a client's retransmission, never a wrong answer;
 * that is why they may forget instead of refusing.
 */
#include <stddef.h>

#include "app_shard_int.h"

#define USERS_PROBE 8
#define XFER_PROBE 4

/* Both tables key on their first field, a uint64_t that is 0 in a free slot. */
static_assert(offsetof(struct user_ent, user) == 0, "user_ent key");
static_assert(offsetof(struct xfer_ent, id) == 0, "xfer_ent key");

/* Probe slots entries of size bytes from home for key; insert takes the first free slot,
 * else overwrites home. */
static void *
slot_probe(void *table, size_t size, uint32_t slots, uint32_t probe, uint32_t home,
	   uint64_t key, bool insert)
{
	uint8_t *base = table;
	for (uint32_t p = 0; p < probe; p++) {
		uint8_t *e = base + (size_t)((home + p) & (slots - 1)) * size;
		uint64_t k;
		memcpy(&k, e, sizeof(k));
		if (k == key)
			return e;
		if (k == 0) {
			if (!insert)
				return NULL;
			memset(e, 0, size);
			memcpy(e, &key, sizeof(key));
			return e;
		}
	}
	if (!insert)
		return NULL;
	uint8_t *e = base + (size_t)home * size;
	memset(e, 0, size);
	memcpy(e, &key, sizeof(key));
	return e;
}

struct user_ent *
app_user_slot(struct user_ent *t, uint64_t user, bool insert)
{
	uint32_t home = (uint32_t)((user * UINT64_C(0x9E3779B97F4A7C15)) >> 48) & (USERS_SLOTS - 1);
	return slot_probe(t, sizeof(*t), USERS_SLOTS, USERS_PROBE, home, user, insert);
}

struct xfer_ent *
app_xfer_slot(struct xfer_ent *t, uint64_t id, bool insert)
{
	uint32_t home = (uint32_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 52) & (XFER_SLOTS - 1);
	return slot_probe(t, sizeof(*t), XFER_SLOTS, XFER_PROBE, home, id, insert);
}

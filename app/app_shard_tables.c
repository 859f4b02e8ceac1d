/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shard lcore's user and transfer tables (app_shard_int.h): open addressing over a
 * fixed slab allocated at set-up, a bounded probe window, and a full window overwrites the
 * home slot. They are caches (where a user's gateway is, which client sent a transfer), so
 * a lost entry costs a default route or a client's retransmission, never a wrong answer;
 * that is why they may forget instead of refusing.
 */
#include "app_shard_int.h"

#define USERS_PROBE 8
#define XFER_PROBE 4

struct user_ent *
app_user_slot(struct user_ent *t, uint64_t user, bool insert)
{
	uint32_t home = (uint32_t)((user * UINT64_C(0x9E3779B97F4A7C15)) >> 48) & (USERS_SLOTS - 1);
	for (uint32_t p = 0; p < USERS_PROBE; p++) {
		struct user_ent *e = &t[(home + p) & (USERS_SLOTS - 1)];
		if (e->user == user)
			return e;
		if (e->user == 0) {
			if (!insert)
				return NULL;
			memset(e, 0, sizeof(*e));
			e->user = user;
			return e;
		}
	}
	if (!insert)
		return NULL;
	struct user_ent *e = &t[home];
	memset(e, 0, sizeof(*e));
	e->user = user;
	return e;
}

struct xfer_ent *
app_xfer_slot(struct xfer_ent *t, uint64_t id, bool insert)
{
	uint32_t home = (uint32_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 52) & (XFER_SLOTS - 1);
	for (uint32_t p = 0; p < XFER_PROBE; p++) {
		struct xfer_ent *e = &t[(home + p) & (XFER_SLOTS - 1)];
		if (e->id == id)
			return e;
		if (e->id == 0) {
			if (!insert)
				return NULL;
			memset(e, 0, sizeof(*e));
			e->id = id;
			return e;
		}
	}
	if (!insert)
		return NULL;
	struct xfer_ent *e = &t[home];
	memset(e, 0, sizeof(*e));
	e->id = id;
	return e;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One open-addressing hash table (linear probing, backward-shift deletion) indexes users,
 * orders, the dedup window, symbols and kill-switches. It is sized at init to at most half
 * full, so a probe sequence is short; deletion moves entries back instead of leaving
 * tombstones, so lookups never degrade over a long run (Knuth 6.4, Algorithm R).
 *
 * The table is not part of the snapshot: restore rebuilds it from the records. Nothing
 * iterates the table, so its layout never influences behaviour.
 */
#include "oms/oms_int.h"

static inline uint64_t
tab_hash(uint32_t tag, uint64_t a, uint64_t b)
{
	uint64_t h = a * UINT64_C(0x9e3779b97f4a7c15) ^ b * UINT64_C(0xc2b2ae3d27d4eb4f) ^
		     (uint64_t)tag * UINT64_C(0x165667b19e3779f9);
	h ^= h >> 29;
	h *= UINT64_C(0xbf58476d1ce4e5b9);
	h ^= h >> 32;
	return h;
}

uint32_t
oms_tab_find(const struct oms *oms, uint32_t tag, uint64_t a, uint64_t b)
{
	uint32_t mask = oms->table_mask;
	uint32_t i = (uint32_t)tab_hash(tag, a, b) & mask;
	/* The table is at most half full, so an empty entry ends every probe sequence. */
	for (uint32_t n = 0; n <= mask; n++) {
		const struct oms_entry *e = &oms->table[i];
		if (e->tag == OMS_TAG_EMPTY)
			return OMS_NIL;
		if (e->tag == tag && e->a == a && e->b == b)
			return e->val;
		i = (i + 1) & mask;
	}
	return OMS_NIL;
}

void
oms_tab_insert(struct oms *oms, uint32_t tag, uint64_t a, uint64_t b, uint32_t val)
{
	uint32_t mask = oms->table_mask;
	uint32_t i = (uint32_t)tab_hash(tag, a, b) & mask;
	DCHECK(tag != OMS_TAG_EMPTY);
	for (uint32_t n = 0; n <= mask; n++) {
		struct oms_entry *e = &oms->table[i];
		if (e->tag == OMS_TAG_EMPTY || (e->tag == tag && e->a == a && e->b == b)) {
			e->a = a;
			e->b = b;
			e->val = val;
			e->tag = tag;
			return;
		}
		i = (i + 1) & mask;
	}
	/* Sized at init for every record that can exist at once: a full table is a bug. */
	CHECK(0 && "oms table full");
}

void
oms_tab_remove(struct oms *oms, uint32_t tag, uint64_t a, uint64_t b)
{
	uint32_t mask = oms->table_mask;
	uint32_t i = (uint32_t)tab_hash(tag, a, b) & mask;
	for (uint32_t n = 0; n <= mask; n++) {
		struct oms_entry *e = &oms->table[i];
		if (e->tag == OMS_TAG_EMPTY)
			return;
		if (e->tag == tag && e->a == a && e->b == b)
			break;
		i = (i + 1) & mask;
	}
	if (oms->table[i].tag == OMS_TAG_EMPTY)
		return;
	/* Backward-shift: pull later entries of the cluster into the hole when their home
	 * position does not lie cyclically in (hole, j]. */
	uint32_t hole = i;
	uint32_t j = i;
	for (uint32_t n = 0; n <= mask; n++) {
		j = (j + 1) & mask;
		struct oms_entry *e = &oms->table[j];
		if (e->tag == OMS_TAG_EMPTY)
			break;
		uint32_t home = (uint32_t)tab_hash(e->tag, e->a, e->b) & mask;
		bool stays = (hole <= j) ? (hole < home && home <= j) : (hole < home || home <= j);
		if (!stays) {
			oms->table[hole] = *e;
			hole = j;
		}
	}
	memset(&oms->table[hole], 0, sizeof(oms->table[hole]));
}

void
oms_tab_clear(struct oms *oms)
{
	memset(oms->table, 0, ((size_t)oms->table_mask + 1) * sizeof(oms->table[0]));
}

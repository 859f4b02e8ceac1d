/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One open-addressing hash table (linear probing, backward-shift deletion) indexes users,
 * orders, symbols, kill-switches and pending claim releases. It is sized at init to at most
 * half full, so a probe sequence is short; deletion moves entries back instead of leaving
 * tombstones, so lookups never degrade over a long run (Knuth 6.4, Algorithm R).
 *
 * The table is not part of the snapshot: restore rebuilds it from the records. Nothing
 * iterates the table, so its layout never influences behaviour.
 */
#include "oms/oms_int.h"

void
oms_tab_insert(struct oms *oms, uint32_t tag, uint64_t a, uint64_t b, uint32_t val)
{
	uint32_t mask;
	struct oms_entry *t = oms_tab_of(oms, tag, &mask);
	uint32_t i = (uint32_t)oms_tab_hash(tag, a, b) & mask;
	DCHECK(tag != OMS_TAG_EMPTY);
	for (uint32_t n = 0; n <= mask; n++) {
		struct oms_entry *e = &t[i];
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
	uint32_t mask;
	struct oms_entry *t = oms_tab_of(oms, tag, &mask);
	uint32_t i = (uint32_t)oms_tab_hash(tag, a, b) & mask;
	for (uint32_t n = 0; n <= mask; n++) {
		struct oms_entry *e = &t[i];
		if (e->tag == OMS_TAG_EMPTY)
			return;
		if (e->tag == tag && e->a == a && e->b == b)
			break;
		i = (i + 1) & mask;
	}
	if (t[i].tag == OMS_TAG_EMPTY)
		return;
	/* Backward-shift: pull later entries of the cluster into the hole when their home
	 * position does not lie cyclically in (hole, j]. */
	uint32_t hole = i;
	uint32_t j = i;
	for (uint32_t n = 0; n <= mask; n++) {
		j = (j + 1) & mask;
		struct oms_entry *e = &t[j];
		if (e->tag == OMS_TAG_EMPTY)
			break;
		uint32_t home = (uint32_t)oms_tab_hash(e->tag, e->a, e->b) & mask;
		bool stays = (hole <= j) ? (hole < home && home <= j) : (hole < home || home <= j);
		if (!stays) {
			t[hole] = *e;
			hole = j;
		}
	}
	memset(&t[hole], 0, sizeof(t[hole]));
}

void
oms_tab_clear(struct oms *oms)
{
	memset(oms->table, 0, ((size_t)oms->table_mask + 1) * sizeof(struct oms_entry));
}

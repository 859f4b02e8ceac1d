/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One open-addressing hash table (linear probing, backward-shift deletion) indexes users,
 * orders, kill-switches and pending claim releases. It is sized at init to at most
 * half full, so a probe sequence is short; deletion moves entries back instead of leaving
 * tombstones, so lookups never degrade over a long run (Knuth 6.4, Algorithm R). Symbols,
 * which are only ever added, have a smaller index of their own (oms_symbol_find).
 *
 * Neither is part of the snapshot: restore rebuilds them from the records. Nothing
 * iterates them, so their layout never influences behaviour.
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

/* Backward-shift deletion of t[i] (Knuth 6.4, Algorithm R): pull later entries of the
 * cluster into the hole when their home position does not lie cyclically in (hole, j].
 * Out of line: most removals end a cluster and need none of its registers. */
static __attribute__((noinline)) void
tab_close(struct oms_entry *t, uint32_t mask, uint32_t i)
{
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

/* Remove entry i (in use). */
static inline void
tab_remove_at(struct oms_entry *t, uint32_t mask, uint32_t i)
{
	DCHECK(t[i].tag != OMS_TAG_EMPTY);
	/* The common case at half load and below: the entry ends its cluster. */
	if (t[(i + 1) & mask].tag == OMS_TAG_EMPTY) {
		memset(&t[i], 0, sizeof(t[i]));
		return;
	}
	tab_close(t, mask, i);
}

void
oms_tab_remove(struct oms *oms, uint32_t tag, uint64_t a, uint64_t b)
{
	uint32_t i = oms_tab_find_at(oms, tag, a, b);
	if (i != OMS_NIL)
		tab_remove_at(oms->table, oms->table_mask, i);
}

void
oms_tab_remove_hinted(struct oms *oms, uint32_t tag, uint64_t a, uint64_t b, uint32_t hint)
{
	struct oms_entry *t = oms->table;
	if (hint <= oms->table_mask && t[hint].tag == tag && t[hint].a == a && t[hint].b == b) {
		tab_remove_at(t, oms->table_mask, hint);
		return;
	}
	oms_tab_remove(oms, tag, a, b);
}

void
oms_tab_clear(struct oms *oms)
{
	memset(oms->table, 0, ((size_t)oms->table_mask + 1) * sizeof(struct oms_entry));
	memset(oms->symbol_index, 0, ((size_t)oms->symbol_index_mask + 1) * sizeof(uint32_t));
}

void
oms_symbol_index_add(struct oms *oms, uint32_t symbol, uint32_t slot)
{
	DCHECK(slot <= oms->c.symbol_count);
	DCHECK(oms_symbol_find(oms, symbol) == NULL);
	uint32_t mask = oms->symbol_index_mask;
	uint32_t i = (uint32_t)(symbol * UINT32_C(0x9e3779b1)) >> oms->symbol_index_shift;
	for (uint32_t n = 0; n <= mask; n++) {
		if (oms->symbol_index[i] == 0) {
			oms->symbol_index[i] = slot + 1;
			return;
		}
		i = (i + 1) & mask;
	}
	/* Sized at init for symbols_max at half load: a full index is a bug. */
	CHECK(0 && "oms symbol index full");
}

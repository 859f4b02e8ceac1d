/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-memory log store: a ring of entry slots and a byte ring over caller memory.
 * Entries are appended at the tail and removed at the head by compaction; a truncation
 * gives the tail bytes back. Every entry is stored contiguously (wire_entry_hdr + data,
 * 8-byte aligned); when it does not fit before the end of the byte ring it starts again
 * at offset 0 and the end is left unused until the head passes it.
 */
#include "cns_int.h"

struct memlog_slot {
	uint32_t off;  /* byte offset of the entry in the byte ring */
	uint32_t size; /* header + data bytes */
};

struct cns_memlog {
	struct cns_memlog_limits lim; /* capacities */
	uint64_t first_index;         /* index of the head slot (last + 1 when empty) */
	uint32_t head;                /* head slot position */
	uint32_t count;               /* entries held */
	uint32_t head_off;            /* byte offset of the head entry */
	uint32_t tail_off;            /* byte offset where the next entry goes */
	uint32_t bytes_used;          /* bytes between head and tail, wrap waste included */
	uint32_t vote;                /* hard state: votedFor */
	uint64_t term;                /* hard state: currentTerm */
	struct memlog_slot *slots;    /* entries_max slots */
	uint8_t *bytes;               /* bytes_max bytes */
};

static size_t
align64(size_t n)
{
	return (n + 63u) & ~(size_t)63u;
}

size_t
cns_memlog_footprint(const struct cns_memlog_limits *limits)
{
	CHECK(limits != NULL);
	return align64(sizeof(struct cns_memlog)) +
	       align64((size_t)limits->entries_max * sizeof(struct memlog_slot)) +
	       align64(limits->bytes_max);
}

int
cns_memlog_init(struct cns_memlog **out, void *memory, const struct cns_memlog_limits *limits)
{
	CHECK(out != NULL);
	CHECK(memory != NULL);
	CHECK(limits != NULL);
	CHECK(((uintptr_t)memory & 63u) == 0);
	if (limits->entries_max == 0 || limits->bytes_max < WIRE_TAIL_MAX ||
	    limits->bytes_max % 8 != 0)
		return -EINVAL;
	struct cns_memlog *m = memory;
	memset(m, 0, sizeof(*m));
	m->lim = *limits;
	uint8_t *p = (uint8_t *)memory + align64(sizeof(*m));
	m->slots = (struct memlog_slot *)p;
	p += align64((size_t)limits->entries_max * sizeof(struct memlog_slot));
	m->bytes = p;
	m->first_index = 1;
	*out = m;
	return 0;
}

static struct memlog_slot *
slot_at(const struct cns_memlog *m, uint64_t index)
{
	DCHECK(index >= m->first_index);
	DCHECK(index < m->first_index + m->count);
	uint64_t pos = (m->head + (index - m->first_index)) % m->lim.entries_max;
	return &m->slots[pos];
}

static void
recompute_used(struct cns_memlog *m)
{
	if (m->count == 0) {
		m->head_off = 0;
		m->tail_off = 0;
		m->bytes_used = 0;
		return;
	}
	m->head_off = slot_at(m, m->first_index)->off;
	const struct memlog_slot *last = slot_at(m, m->first_index + m->count - 1);
	m->tail_off = last->off + last->size;
	m->bytes_used = m->tail_off > m->head_off ? m->tail_off - m->head_off
						  : m->lim.bytes_max - m->head_off + m->tail_off;
}

static int
memlog_append(void *store, uint64_t index, const struct wire_entry_hdr *hdr, const void *data)
{
	struct cns_memlog *m = store;
	CHECK(index == m->first_index + m->count);
	uint32_t size = (uint32_t)sizeof(*hdr) + hdr->data_len;
	CHECK(size % 8 == 0);
	CHECK(size <= m->lim.bytes_max);
	if (m->count == m->lim.entries_max)
		return -ENOSPC;
	uint32_t off;
	if (m->count == 0) {
		off = 0;
	} else if (m->tail_off > m->head_off) {
		/* Not wrapped: room before the end, or start again at 0 before the head. */
		if (m->tail_off + size <= m->lim.bytes_max)
			off = m->tail_off;
		else if (size <= m->head_off)
			off = 0;
		else
			return -ENOSPC;
	} else {
		/* Wrapped (or exactly full: tail == head): the free space lies between tail and
		 * head. The entry count tells a full ring from an empty one. */
		if (m->tail_off + size <= m->head_off)
			off = m->tail_off;
		else
			return -ENOSPC;
	}
	memcpy(m->bytes + off, hdr, sizeof(*hdr));
	if (hdr->data_len != 0)
		memcpy(m->bytes + off + sizeof(*hdr), data, hdr->data_len);
	if (m->count == 0)
		m->head = 0;
	m->count++;
	struct memlog_slot *s = slot_at(m, index);
	s->off = off;
	s->size = size;
	recompute_used(m);
	return 0;
}

static void
memlog_truncate(void *store, uint64_t index)
{
	struct cns_memlog *m = store;
	CHECK(index >= m->first_index);
	CHECK(index <= m->first_index + m->count);
	m->count = (uint32_t)(index - m->first_index);
	recompute_used(m);
}

static void
memlog_compact(void *store, uint64_t index)
{
	struct cns_memlog *m = store;
	uint64_t last = m->first_index + m->count - 1;
	if (index < m->first_index)
		return;
	if (index >= last) {
		m->count = 0;
		m->head = 0;
		m->first_index = index + 1;
		recompute_used(m);
		return;
	}
	uint32_t drop = (uint32_t)(index - m->first_index + 1);
	m->head = (m->head + drop) % m->lim.entries_max;
	m->count -= drop;
	m->first_index = index + 1;
	recompute_used(m);
}

static const struct wire_entry_hdr *
memlog_entry(const void *store, uint64_t index)
{
	const struct cns_memlog *m = store;
	CHECK(index >= m->first_index);
	CHECK(index < m->first_index + m->count);
	return (const struct wire_entry_hdr *)(m->bytes + slot_at(m, index)->off);
}

static uint64_t
memlog_first_index(const void *store)
{
	const struct cns_memlog *m = store;
	return m->first_index;
}

static uint64_t
memlog_last_index(const void *store)
{
	const struct cns_memlog *m = store;
	return m->first_index + m->count - 1;
}

static void
memlog_save_vote(void *store, uint64_t term, uint32_t vote)
{
	struct cns_memlog *m = store;
	m->term = term;
	m->vote = vote;
}

const struct cns_log_ops cns_memlog_ops = {
	.append = memlog_append,
	.truncate = memlog_truncate,
	.compact = memlog_compact,
	.entry = memlog_entry,
	.first_index = memlog_first_index,
	.last_index = memlog_last_index,
	.save_vote = memlog_save_vote,
};

uint64_t
cns_memlog_term(const struct cns_memlog *m)
{
	return m->term;
}

uint32_t
cns_memlog_vote(const struct cns_memlog *m)
{
	return m->vote;
}

uint32_t
cns_memlog_count(const struct cns_memlog *m)
{
	return m->count;
}

uint32_t
cns_memlog_bytes(const struct cns_memlog *m)
{
	return m->bytes_used;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <signal.h>
#include <stdlib.h>

#include "consensus/cns_int.h"

static struct cns_memlog *M;
static void *mem;
static const struct cns_log_ops *ops = &cns_memlog_ops;

static void
setup_small(void)
{
	struct cns_memlog_limits ll = {.entries_max = 8, .bytes_max = WIRE_TAIL_MAX};
	mem = aligned_alloc(64, cns_memlog_footprint(&ll));
	cr_assert(cns_memlog_init(&M, mem, &ll) == 0);
}

static void
teardown(void)
{
	free(mem);
}

static int
append(uint64_t index, uint64_t term, uint32_t data_len)
{
	static uint64_t data[CNS_ENTRY_DATA_MAX / 8];
	for (uint32_t i = 0; i < data_len / 8; i++)
		data[i] = index * 1000 + i;
	struct wire_entry_hdr h = {.term = term, .time_ns = index, .data_len = data_len,
				   .kind = CNS_ENTRY_NORMAL};
	return ops->append(M, index, &h, data);
}

static void
check_entry(uint64_t index, uint64_t term, uint32_t data_len)
{
	const struct wire_entry_hdr *e = ops->entry(M, index);
	cr_assert(eq(u64, e->term, term));
	cr_assert(eq(u32, e->data_len, data_len));
	const uint64_t *d = (const void *)(e + 1);
	for (uint32_t i = 0; i < data_len / 8; i++)
		cr_assert(eq(u64, d[i], index * 1000 + i));
}

/* Goal: append, read back, truncate and compact keep indices and contents right.
 * Method: 5 entries; truncate the last two; compact the first two; read the rest. */
Test(cns_memlog, append_truncate_compact, .init = setup_small, .fini = teardown)
{
	cr_assert(eq(u64, ops->first_index(M), 1));
	cr_assert(eq(u64, ops->last_index(M), 0));
	for (uint64_t i = 1; i <= 5; i++)
		cr_assert(eq(int, append(i, 1, 64), 0));
	ops->truncate(M, 4);
	cr_assert(eq(u64, ops->last_index(M), 3));
	cr_assert(eq(int, append(4, 2, 16), 0));
	ops->compact(M, 2);
	cr_assert(eq(u64, ops->first_index(M), 3));
	check_entry(3, 1, 64);
	check_entry(4, 2, 16);
	ops->compact(M, 10);
	cr_assert(eq(u64, ops->first_index(M), 11));
	cr_assert(eq(u64, ops->last_index(M), 10));
	cr_assert(eq(int, append(11, 3, 8), 0));
	check_entry(11, 3, 8);
}

/* Goal: the byte ring wraps and refuses (-ENOSPC) when full; compaction frees space.
 * Method: 1 KB entries in an 8 KB ring: fill, refuse, compact, wrap, read back. */
Test(cns_memlog, wraps_and_refuses_when_full, .init = setup_small, .fini = teardown)
{
	uint32_t sz = 1024 - (uint32_t)sizeof(struct wire_entry_hdr);
	uint64_t i = 1;
	while (append(i, 1, sz) == 0)
		i++;
	cr_assert(i > 4 && i <= 9, "held %lu", (unsigned long)(i - 1));
	cr_assert(eq(int, append(i, 1, sz), -ENOSPC));
	ops->compact(M, 3);
	for (uint32_t k = 0; k < 3; k++, i++)
		cr_assert(eq(int, append(i, 1, sz), 0), "append %lu after compaction",
			  (unsigned long)i);
	for (uint64_t k = ops->first_index(M); k <= ops->last_index(M); k++)
		check_entry(k, 1, sz);
}

/* Goal: the slot ring refuses at entries_max. Method: 8 empty entries fit, the 9th not. */
Test(cns_memlog, slot_limit, .init = setup_small, .fini = teardown)
{
	for (uint64_t i = 1; i <= 8; i++)
		cr_assert(eq(int, append(i, 1, 0), 0));
	cr_assert(eq(int, append(9, 1, 0), -ENOSPC));
	ops->compact(M, 1);
	cr_assert(eq(int, append(9, 1, 0), 0));
}

/* Goal: appending at a wrong index is a programmer error. Method: index 3 on an empty log. */
Test(cns_memlog, gap_aborts, .init = setup_small, .fini = teardown, .signal = SIGABRT)
{
	append(3, 1, 0);
}

/* Goal: the hard state round-trips. Method: save_vote then read. */
Test(cns_memlog, hard_state, .init = setup_small, .fini = teardown)
{
	ops->save_vote(M, 7, 3);
	cr_assert(eq(u64, cns_memlog_term(M), 7));
	cr_assert(eq(u32, cns_memlog_vote(M), 3));
}

/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "persist/persist.h"
#include "persist/pst_int.h"
#include "helpers.h"

/* Goal: the CRC is CRC32C, not some other CRC32.
 * Method: the standard check value, and an incremental computation equal to a whole one. */
Test(pst_crc, castagnoli_check_value)
{
	cr_assert(eq(u32, pst_crc32c(0, "123456789", 9), 0xE3069283u));
	cr_assert(eq(u32, pst_crc32c(0, "", 0), 0u));
	uint8_t buf[1000];
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	for (size_t cut = 0; cut < sizeof(buf); cut += 37) {
		uint32_t c = pst_crc32c(0, buf, cut);
		cr_assert(eq(u32, pst_crc32c(c, buf + cut, sizeof(buf) - cut),
			     pst_crc32c(0, buf, sizeof(buf))));
	}
}

/* Goal: the counter table and labels cannot drift.
 * Method: every counter has a name and a label; out of range is "?". */
Test(pst_counters, names)
{
	for (int i = 0; i < PST_C_COUNT; i++) {
		cr_assert(strcmp(pst_counter_name((enum pst_counter)i), "?") != 0);
		cr_assert(strlen(pst_counter_text((enum pst_counter)i)) > 0);
	}
	cr_assert(strcmp(pst_counter_name(PST_C_COUNT), "?") == 0);
	cr_assert(strcmp(pst_counter_name(PST_C_LOG_BATCHES), "LOG_BATCHES") == 0);
}

/* Goal: the Raft hard state survives and a damaged record is refused.
 * Method: save twice, load the last; flip a byte, load refuses with -EBADMSG. */
Test(pst_vote, save_load_corrupt)
{
	char dir[64], path[128];
	test_tmpdir(dir, sizeof(dir));
	uint64_t term;
	uint32_t vote;
	cr_assert(eq(int, pst_vote_load(dir, &term, &vote), -ENOENT));
	cr_assert(eq(int, pst_vote_save(dir, 3, 2), 0));
	cr_assert(eq(int, pst_vote_save(dir, 4, 5), 0));
	cr_assert(eq(int, pst_vote_load(dir, &term, &vote), 0));
	cr_assert(eq(u64, term, 4));
	cr_assert(eq(u32, vote, 5));
	snprintf(path, sizeof(path), "%s/vote", dir);
	file_flip(path, 9, 0x40);
	cr_assert(eq(int, pst_vote_load(dir, &term, &vote), -EBADMSG));
	test_rmdir(dir);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the Raft hard-state file (persist/pst_vote.c): the input is written as
 * <dir>/vote and read back with pst_vote_load, the way omsd reads it at boot.
 *
 * Each input is tried twice: as is (bit flips, truncation, a wrong magic and a bad CRC are
 * refused) and with its CRC made right (so the fuzzer reaches what lies behind the checksum:
 * any term and vote, a file of the wrong size).
 * Properties: pst_vote_load answers 0 or -EBADMSG, never anything else and never a crash; it
 * accepts only a whole 24-byte record with the magic and a matching CRC32C; an accepted value
 * saved again (pst_vote_save) loads back unchanged.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/check.h"
#include "fuzz_util.h"
#include "persist/pst_int.h"

#define VOTE_MAGIC UINT64_C(0x31544f5644534d4f) /* pst_vote.c's record, as documented */
#define VOTE_SIZE 24

static void
one(const uint8_t *data, size_t size)
{
	const char *dir = fz_dir();
	char path[512];
	fz_dir_clear(dir);
	fz_write(dir, "vote", data, size, path, sizeof(path));
	uint64_t term = 1;
	uint32_t vote = 1;
	int rc = pst_vote_load(dir, &term, &vote);
	CHECK(rc == 0 || rc == -EBADMSG);
	if (rc != 0) {
		CHECK(term == 0 && vote == 0);
		return;
	}
	uint64_t magic;
	uint32_t crc;
	CHECK(size == VOTE_SIZE);
	memcpy(&magic, data, 8);
	memcpy(&crc, data + 20, 4);
	CHECK(magic == VOTE_MAGIC && crc == pst_crc32c(0, data, 20));
	CHECK(memcmp(&term, data + 8, 8) == 0 && memcmp(&vote, data + 16, 4) == 0);
	/* The writer and the reader agree. */
	CHECK(pst_vote_save(dir, term, vote) == 0);
	uint64_t t2;
	uint32_t v2;
	CHECK(pst_vote_load(dir, &t2, &v2) == 0 && t2 == term && v2 == vote);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 256)
		return 0;
	one(data, size);
	if (size >= VOTE_SIZE) {
		uint8_t fixed[256];
		memcpy(fixed, data, size);
		uint32_t crc = pst_crc32c(0, fixed, 20);
		memcpy(fixed + 20, &crc, 4);
		one(fixed, size);
	}
	return 0;
}

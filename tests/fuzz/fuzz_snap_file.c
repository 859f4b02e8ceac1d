/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the snapshot file reader (pst_snap_load, persist/pst_snap.c): the
 * input is written as a snapshot file, named after the index and term its header claims, in
 * an otherwise empty directory, and loaded the way omsd loads it at boot.
 *
 * Byte 0 is a mode: bit 0 makes both CRCs right and bit 1 the length field right (so the
 * fuzzer reaches what lies behind them), bit 2 puts a valid older snapshot next to it (so a
 * refused newer one must fall back to it), bit 3 names the file from the wrong index.
 * Properties: the load answers 0 or -ENOENT; when it loads the input file, the meta is the
 * header's and the data the bytes after it, exactly; when it refuses it, the file is counted
 * corrupt, kept as <name>.corrupt and named in the error text, and the older snapshot (when
 * present) is what loads; whatever loads writes back (pst_snap_write) and loads again
 * unchanged.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "fuzz_util.h"
#include "persist/pst_int.h"

#define HDR sizeof(struct pst_snap_hdr)

static const char older_data[16] = "older snapshot!";

static void
write_older(const char *dir)
{
	struct pst_snap_meta m = {.last_index = 1, .last_term = 1, .last_time_ns = 7,
				  .length = sizeof(older_data)};
	CHECK(pst_snap_write(dir, &m, older_data, NULL) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	uint8_t mode = data[0];
	size_t len = size - 1;
	uint8_t *f = malloc(len ? len : 1);
	CHECK(f != NULL);
	memcpy(f, data + 1, len);
	struct pst_snap_hdr h = {0};
	if (len >= HDR) {
		memcpy(&h, f, HDR);
		if (mode & 2)
			h.length = len - HDR;
		if (mode & 1) {
			h.data_crc = pst_crc32c(0, f + HDR, len - HDR);
			h.hdr_crc = pst_crc32c(0, &h, offsetof(struct pst_snap_hdr, hdr_crc));
		}
		memcpy(f, &h, HDR);
	}
	/* The older one must stay the older one: the file under test is at index >= 2. */
	uint64_t index = h.last_index < 2 ? 2 : h.last_index, term = h.last_term;
	bool older = mode & 4;
	const char *dir = fz_dir();
	fz_dir_clear(dir);
	if (older)
		write_older(dir);
	char name[128], path[512];
	/* Bit 3: a name one off the header's index (still newer than the older one). */
	uint64_t named = (mode & 8) ? (index < UINT64_MAX ? index + 1 : index - 1) : index;
	snprintf(name, sizeof(name), PST_SNAP_NAME_FMT, named, term);
	fz_write(dir, name, f, len, path, sizeof(path));

	struct pst_snap_meta meta;
	void *got = NULL;
	uint32_t corrupt = 99;
	char err[1024];
	int rc = pst_snap_load(dir, &meta, &got, &corrupt, err, sizeof(err));
	CHECK(rc == 0 || rc == -ENOENT);
	bool mine = rc == 0 && meta.last_index != 1; /* the older one is at index 1 */
	if (mine) {
		/* The file under test loaded: everything it says is what we get. */
		CHECK(corrupt == 0 && len >= HDR);
		CHECK(h.last_index == index && h.last_term == term && !(mode & 8));
		CHECK(meta.last_term == h.last_term && meta.last_time_ns == h.last_time_ns);
		CHECK(meta.length == len - HDR && memcmp(got, f + HDR, meta.length) == 0);
		CHECK(access(path, F_OK) == 0);
	} else {
		CHECK(corrupt == 1);
		char aside[600];
		snprintf(aside, sizeof(aside), "%s.corrupt", path);
		CHECK(access(aside, F_OK) == 0 && access(path, F_OK) != 0);
		CHECK(strstr(err, name) != NULL);
		if (older) {
			CHECK(rc == 0 && meta.last_index == 1 && meta.length == sizeof(older_data));
			CHECK(memcmp(got, older_data, sizeof(older_data)) == 0);
		} else {
			CHECK(rc == -ENOENT);
		}
	}
	if (rc == 0) {
		/* Writer and reader agree on whatever loaded. */
		fz_dir_clear(dir);
		CHECK(pst_snap_write(dir, &meta, got, NULL) == 0);
		struct pst_snap_meta again;
		void *d2 = NULL;
		CHECK(pst_snap_load(dir, &again, &d2, NULL, NULL, 0) == 0);
		CHECK(memcmp(&again, &meta, sizeof(meta)) == 0);
		CHECK(memcmp(d2, got, meta.length) == 0);
		free(d2);
	}
	free(got);
	free(f);
	return 0;
}

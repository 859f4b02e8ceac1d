/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the persist suites (and app_logw's): temp directories, a clock, file pokes, a
 * snapshot read back. */
#ifndef OMSD_TESTS_PERSIST_HELPERS_H
#define OMSD_TESTS_PERSIST_HELPERS_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "persist/persist.h"

static inline uint64_t
test_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void
test_tmpdir(char *out, size_t size)
{
	snprintf(out, size, "/tmp/omsd-pst-test.XXXXXX");
	cr_assert(mkdtemp(out) != NULL);
}

static inline int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static inline void
test_rmdir(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline uint64_t
file_size(const char *path)
{
	struct stat st;
	cr_assert(stat(path, &st) == 0, "stat %s", path);
	return (uint64_t)st.st_size;
}

/* XOR one byte of a file with mask. */
static inline void
file_flip(const char *path, uint64_t off, uint8_t mask)
{
	int fd = open(path, O_RDWR);
	cr_assert(fd >= 0);
	uint8_t b;
	cr_assert(pread(fd, &b, 1, (off_t)off) == 1);
	b ^= mask;
	cr_assert(pwrite(fd, &b, 1, (off_t)off) == 1);
	close(fd);
}

static inline void
file_cut(const char *path, uint64_t size)
{
	cr_assert(truncate(path, (off_t)size) == 0);
}

/* The newest snapshot in dir is (meta, data): it loads, whole, with nothing corrupt. */
static inline void
test_snap_equals(const char *dir, const struct pst_snap_meta *meta, const uint8_t *data)
{
	struct pst_snap_meta got;
	void *buf = NULL;
	uint32_t corrupt = 99;
	char err[PST_ERR_SIZE];
	cr_assert(eq(int, pst_snap_load(dir, &got, &buf, &corrupt, err, sizeof(err)), 0),
		  "%s", err);
	cr_assert(eq(u32, corrupt, 0), "%s", err);
	cr_assert(eq(u64, got.last_index, meta->last_index));
	cr_assert(eq(u64, got.last_term, meta->last_term));
	cr_assert(eq(u64, got.last_time_ns, meta->last_time_ns));
	cr_assert(eq(u64, got.length, meta->length));
	cr_assert(meta->length == 0 || memcmp(buf, data, meta->length) == 0, "data differs");
	free(buf);
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the fuzz targets that read files: a private scratch directory (tmpfs /dev/shm,
 * else /tmp; removed at exit), writing an input into it, and emptying it between inputs.
 */
#ifndef OMSD_TESTS_FUZZ_UTIL_H
#define OMSD_TESTS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The process's scratch directory (created on first use, removed with its files at exit). */
const char *fz_dir(void);
/* Remove every file in dir (not recursive: the targets write flat directories). */
void fz_dir_clear(const char *dir);
/* Write len bytes to dir/name (created or truncated); the full path goes to path. */
void fz_write(const char *dir, const char *name, const void *data, size_t len, char *path,
	      size_t path_size);
/* Point stdout at /dev/null: readers that print their findings must not flood the log. */
void fz_quiet_stdout(void);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "persist/persist.h"
#include "persist/pst_int.h"
#include "helpers.h"

static char dir[64], logdir[96], snapdir[96];

static void
setup(void)
{
	test_tmpdir(dir, sizeof(dir));
	snprintf(logdir, sizeof(logdir), "%s/log", dir);
	snprintf(snapdir, sizeof(snapdir), "%s/snap", dir);
}

static void
teardown(void)
{
	test_rmdir(dir);
}

TestSuite(pst_snap, .init = setup, .fini = teardown);

/* The toy service: its state is a running hash over every applied entry. */
struct toy {
	uint64_t applied; /* last applied index */
	uint64_t hash;    /* FNV-1a over (index, term, data) */
};

static void
toy_apply(struct toy *t, const struct pst_entry *e)
{
	cr_assert(eq(u64, e->index, t->applied + 1));
	uint64_t h = t->hash ? t->hash : UINT64_C(1469598103934665603);
	const uint8_t *p = e->data;
	uint64_t words[2] = {e->index, e->term};
	for (int w = 0; w < 2; w++)
		for (int k = 0; k < 8; k++)
			h = (h ^ ((words[w] >> (8 * k)) & 0xff)) * UINT64_C(1099511628211);
	for (uint32_t k = 0; k < e->data_len; k++)
		h = (h ^ p[k]) * UINT64_C(1099511628211);
	t->hash = h;
	t->applied = e->index;
}

static void
append_apply(struct pst_log *log, struct toy *t, uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i <= to; i++) {
		char data[32];
		int n = snprintf(data, sizeof(data), "entry-%" PRIu64, i * 7919);
		struct pst_entry e = {.index = i, .term = 1 + i / 400, .time_ns = i,
				      .kind = 1, .data_len = (uint32_t)n, .data = data};
		cr_assert(eq(int, pst_log_append(log, &e, 1), 0));
		toy_apply(t, &e);
	}
}

static uint64_t read_buf[1 << 14];

/* Recovery = newest valid snapshot + log replay, no other input. */
static struct toy
recover(struct pst_log **log, const struct pst_log_config *cfg)
{
	struct toy t = {0};
	struct pst_snap_meta meta;
	void *data = NULL;
	uint32_t corrupt;
	char err[PST_ERR_SIZE];
	int rc = pst_snap_load(snapdir, &meta, &data, &corrupt, err, sizeof(err));
	if (rc == 0) {
		cr_assert(eq(u64, meta.length, sizeof(t)));
		memcpy(&t, data, sizeof(t));
		cr_assert(eq(u64, t.applied, meta.last_index));
		free(data);
	} else {
		cr_assert(eq(int, rc, -ENOENT));
	}
	cr_assert(eq(int, pst_log_open(log, cfg, err, sizeof(err)), 0), "%s", err);
	cr_assert(le(u64, pst_log_first_index(*log), t.applied + 1));
	struct pst_entry out[64];
	for (uint64_t i = t.applied + 1; i <= pst_log_last_index(*log);) {
		int n = pst_log_read(*log, i, out, 64, read_buf, sizeof(read_buf));
		cr_assert(gt(int, n, 0));
		for (int k = 0; k < n; k++, i++)
			toy_apply(&t, &out[k]);
	}
	return t;
}

static void
snapshot(struct pst_log *log, const struct toy *t)
{
	struct pst_snap_meta meta = {.last_index = t->applied, .last_term = 1 + t->applied / 400,
				     .last_time_ns = t->applied, .length = sizeof(*t)};
	cr_assert(eq(int, pst_snap_write(snapdir, &meta, t, log), 0));
}

static int
count_files(const char *d, const char *suffix)
{
	DIR *dd = opendir(d);
	cr_assert(dd != NULL);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(dd)) != NULL) {
		size_t l = strlen(de->d_name), s = strlen(suffix);
		if (l >= s && strcmp(de->d_name + l - s, suffix) == 0)
			n++;
	}
	closedir(dd);
	return n;
}

/* Goal: snapshot + log replay reproduces the pre-crash state hash, with the log compacted
 * behind the snapshot and older snapshots removed.
 * Method: apply 3000 entries with snapshots at 1000 and 2000 (small segments), "crash"
 * (close without anything else), recover, compare the hash; a torn tail at the end costs
 * exactly the torn entry. */
Test(pst_snap, snapshot_plus_replay_equals_pre_crash_state)
{
	struct pst_log_config cfg = {.dir = logdir, .segment_size = 8192, .sync = PST_SYNC_DATA};
	struct pst_log *log;
	char err[PST_ERR_SIZE];
	cr_assert(eq(int, pst_log_open(&log, &cfg, err, sizeof(err)), 0));
	struct toy t = {0};
	append_apply(log, &t, 1, 1000);
	snapshot(log, &t);
	append_apply(log, &t, 1001, 2000);
	snapshot(log, &t);
	cr_assert(eq(int, count_files(snapdir, ".snap"), 1));
	cr_assert(gt(u64, pst_log_first_index(log), 1000));
	cr_assert(le(u64, pst_log_first_index(log), 2001));
	append_apply(log, &t, 2001, 3000);
	struct toy before = t;
	pst_log_close(log);

	struct toy after = recover(&log, &cfg);
	cr_assert(eq(u64, after.applied, 3000));
	cr_assert(eq(u64, after.hash, before.hash));
	pst_log_close(log);
}

/* Goal: a crash while writing a snapshot leaves the previous one valid and in use.
 * Method: a valid snapshot at 1000; then a temp file with half a newer snapshot (crash
 * before rename) and a newer final file with a bad CRC (a disk fault): load returns the
 * old one, reports the corrupt one, removes the temp file; recovery still gives the hash. */
Test(pst_snap, crash_during_write_keeps_old_snapshot)
{
	struct pst_log_config cfg = {.dir = logdir, .segment_size = 8192, .sync = PST_SYNC_NONE};
	struct pst_log *log;
	char err[PST_ERR_SIZE], path[256];
	cr_assert(eq(int, pst_log_open(&log, &cfg, err, sizeof(err)), 0));
	struct toy t = {0};
	append_apply(log, &t, 1, 1000);
	snapshot(log, &t);
	append_apply(log, &t, 1001, 1500);
	struct toy before = t;

	/* The crash: a temp file cut in the middle. */
	snprintf(path, sizeof(path), "%s/" PST_SNAP_TMP_PREFIX "00000000000000001500-1", snapdir);
	FILE *f = fopen(path, "w");
	cr_assert(f != NULL);
	fwrite("OMSDSNP1 half", 1, 13, f);
	fclose(f);
	/* A newer final snapshot whose data no longer checks. */
	struct pst_snap_meta meta = {.last_index = 1400, .last_term = 4, .length = sizeof(t)};
	struct toy junk = {.applied = 1400, .hash = 1};
	char newer[256];
	snprintf(newer, sizeof(newer), "%s/" PST_SNAP_NAME_FMT, snapdir, (uint64_t)1400,
		 (uint64_t)4);
	{
		struct pst_snap_hdr h = {.magic = PST_SNAP_MAGIC, .version = PST_SNAP_VERSION,
					 .last_index = 1400, .last_term = 4,
					 .length = sizeof(junk)};
		h.data_crc = pst_crc32c(0, &junk, sizeof(junk)) ^ 1u;
		h.hdr_crc = pst_crc32c(0, &h, offsetof(struct pst_snap_hdr, hdr_crc));
		FILE *g = fopen(newer, "w");
		cr_assert(g != NULL);
		fwrite(&h, sizeof(h), 1, g);
		fwrite(&junk, sizeof(junk), 1, g);
		fclose(g);
	}
	(void)meta;
	pst_log_close(log);

	void *data = NULL;
	uint32_t corrupt = 0;
	struct pst_snap_meta got;
	cr_assert(eq(int, pst_snap_load(snapdir, &got, &data, &corrupt, err, sizeof(err)), 0));
	cr_assert(eq(u64, got.last_index, 1000));
	cr_assert(eq(u32, corrupt, 1));
	cr_assert(strstr(err, newer) != NULL, "%s", err);
	cr_assert(strstr(err, "kept as") != NULL, "%s", err);
	cr_assert(access(path, F_OK) != 0, "temp file left behind");
	free(data);

	struct toy after = recover(&log, &cfg);
	cr_assert(eq(u64, after.applied, 1500));
	cr_assert(eq(u64, after.hash, before.hash));

	/* The next snapshot prunes older snapshots, never the corrupt one set aside. */
	snapshot(log, &after);
	char aside[300];
	snprintf(aside, sizeof(aside), "%s.corrupt", newer);
	cr_assert(access(aside, F_OK) == 0, "the corrupt snapshot was not kept as evidence");
	cr_assert(access(newer, F_OK) != 0, "the corrupt snapshot is still under its name");
	cr_assert(eq(int, count_files(snapdir, ".snap"), 1));
	cr_assert(eq(int, pst_snap_load(snapdir, &got, &data, &corrupt, err, sizeof(err)), 0));
	cr_assert(eq(u64, got.last_index, 1500));
	cr_assert(eq(u32, corrupt, 0), "a set-aside snapshot was tried again: %s", err);
	free(data);
	pst_log_close(log);
}

/* Goal: a second corrupt snapshot under a name already set aside does not overwrite the
 * first piece of evidence.
 * Method: the same corrupt file name twice, loaded twice: .corrupt and .corrupt-1 exist. */
Test(pst_snap, corrupt_snapshots_set_aside_without_overwriting)
{
	char name[256], err[PST_ERR_SIZE];
	snprintf(name, sizeof(name), "%s/" PST_SNAP_NAME_FMT, snapdir, (uint64_t)7, (uint64_t)2);
	cr_assert(eq(int, pst_snap_write(snapdir, &(struct pst_snap_meta){.last_index = 5,
									   .last_term = 1},
					 NULL, NULL),
		     0));
	for (int k = 0; k < 2; k++) {
		FILE *f = fopen(name, "w");
		cr_assert(f != NULL);
		fwrite("garbage", 1, 7, f);
		fclose(f);
		void *data = NULL;
		uint32_t corrupt = 0;
		struct pst_snap_meta m;
		cr_assert(eq(int, pst_snap_load(snapdir, &m, &data, &corrupt, err, sizeof(err)), 0));
		cr_assert(eq(u64, m.last_index, 5));
		cr_assert(eq(u32, corrupt, 1));
		cr_assert(strstr(err, "header truncated") != NULL, "%s", err);
		free(data);
	}
	char aside[300];
	snprintf(aside, sizeof(aside), "%s.corrupt", name);
	cr_assert(access(aside, F_OK) == 0);
	snprintf(aside, sizeof(aside), "%s.corrupt-1", name);
	cr_assert(access(aside, F_OK) == 0);
	cr_assert(access(name, F_OK) != 0);
}

/* Goal: no snapshot at all is -ENOENT, and recovery is the whole log.
 * Method: load from an empty directory. */
Test(pst_snap, none_is_enoent)
{
	void *data = NULL;
	struct pst_snap_meta m;
	cr_assert(eq(int, pst_snap_load(snapdir, &m, &data, NULL, NULL, 0), -ENOENT));
	cr_assert(eq(int, pst_snap_write(snapdir, &(struct pst_snap_meta){.last_index = 5,
									   .last_term = 1},
					 NULL, NULL),
		     0));
	cr_assert(eq(int, pst_snap_load(snapdir, &m, &data, NULL, NULL, 0), 0));
	cr_assert(eq(u64, m.last_index, 5));
	cr_assert(eq(u64, m.length, 0));
	free(data);
}

/* --- Snapshots written in slices (pst_snap_begin / step / abort) ------------------------ */

#define MIB (UINT64_C(1) << 20)

static void
bytes_fill(uint8_t *p, uint64_t len, uint64_t seed)
{
	uint64_t x = seed * UINT64_C(0x9e3779b97f4a7c15) | 1;
	for (uint64_t k = 0; k < len; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[k] = (uint8_t)x;
	}
}

/* Files in d whose name starts with prefix ("" counts every entry but . and ..). */
static int
count_prefix(const char *d, const char *prefix)
{
	DIR *dd = opendir(d);
	cr_assert(dd != NULL, "%s", d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(dd)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n++;
	}
	closedir(dd);
	return n;
}

static void
snap_name(char *out, size_t size, uint64_t index, uint64_t term)
{
	snprintf(out, size, "%s/" PST_SNAP_NAME_FMT, snapdir, index, term);
}


/* Write (meta, data) in steps of max; returns how many steps said "more" (1) before the
 * one that finished (0). While the job runs: the temp file exists, the final name does not,
 * and done counts whole slices. */
static uint32_t
write_sliced(const struct pst_snap_meta *meta, const uint8_t *data, size_t max)
{
	struct pst_snap_job job;
	char final[256];
	snap_name(final, sizeof(final), meta->last_index, meta->last_term);
	cr_assert(eq(int, pst_snap_begin(&job, snapdir, meta, data), 0));
	cr_assert(ge(int, job.fd, 0));
	uint32_t more = 0;
	int rc;
	while ((rc = pst_snap_step(&job, max)) == 1) {
		more++;
		cr_assert(eq(u64, job.done, (uint64_t)more * max));
		cr_assert(access(job.tmp, F_OK) == 0, "no temp file after step %u", more);
		cr_assert(access(final, F_OK) != 0, "final name before the last step");
		cr_assert(lt(u32, more, 100000));
	}
	cr_assert(eq(int, rc, 0));
	cr_assert(eq(int, job.fd, -1));
	cr_assert(eq(u64, job.done, meta->length));
	cr_assert(access(final, F_OK) == 0, "no final name after the last step");
	cr_assert(eq(u64, file_size(final), sizeof(struct pst_snap_hdr) + meta->length));
	return more;
}

/* Goal: a snapshot written in slices is the same file pst_snap_write makes; the step that
 * writes the last data slice also finishes the file (header, fsync, rename), so a job of
 * length L in slices of max says "more" ceil(L / max) - 1 times; older snapshots and temp
 * files are pruned, a newer snapshot is kept.
 * Method: a newer snapshot (2000) and an older one (5) in the directory; 10 MiB + 7 bytes at
 * 1000 in 1 MiB steps (10 "more", then done); load it (the newer one removed first: load
 * takes the newest); then a length that is a multiple of max (2 MiB in 1 MiB: 1 "more") and
 * one step of SIZE_MAX (none). */
Test(pst_snap, sliced_write_steps_and_prunes)
{
	const uint64_t len = 10 * MIB + 7;
	uint8_t *data = malloc(len);
	cr_assert(data != NULL);
	bytes_fill(data, len, 1);
	uint8_t small[64];
	bytes_fill(small, sizeof(small), 2);
	struct pst_snap_meta newer = {.last_index = 2000, .last_term = 9, .last_time_ns = 1,
				      .length = sizeof(small)};
	struct pst_snap_meta older = {.last_index = 5, .last_term = 1, .last_time_ns = 2,
				      .length = sizeof(small)};
	cr_assert(eq(int, pst_snap_write(snapdir, &newer, small, NULL), 0));
	cr_assert(eq(int, pst_snap_write(snapdir, &older, small, NULL), 0));
	cr_assert(eq(int, count_files(snapdir, ".snap"), 2));
	/* A temp file a crashed writer left: pruned by the next snapshot. */
	char stale[256];
	snprintf(stale, sizeof(stale), "%s/" PST_SNAP_TMP_PREFIX "00000000000000000777-1", snapdir);
	FILE *f = fopen(stale, "w");
	cr_assert(f != NULL);
	fclose(f);

	struct pst_snap_meta meta = {.last_index = 1000, .last_term = 4, .last_time_ns = 123456,
				     .length = len};
	cr_assert(eq(u32, write_sliced(&meta, data, MIB), 10));
	char name[256];
	snap_name(name, sizeof(name), older.last_index, older.last_term);
	cr_assert(access(name, F_OK) != 0, "the older snapshot was not pruned");
	snap_name(name, sizeof(name), newer.last_index, newer.last_term);
	cr_assert(access(name, F_OK) == 0, "the newer snapshot was pruned");
	cr_assert(access(stale, F_OK) != 0, "the stale temp file was not pruned");
	cr_assert(eq(int, count_prefix(snapdir, PST_SNAP_TMP_PREFIX), 0));
	cr_assert(eq(int, count_prefix(snapdir, ""), 2));
	test_snap_equals(snapdir, &newer, small);
	cr_assert(eq(int, unlink(name), 0));
	test_snap_equals(snapdir, &meta, data);

	meta = (struct pst_snap_meta){.last_index = 1001, .last_term = 4, .length = 2 * MIB};
	cr_assert(eq(u32, write_sliced(&meta, data, MIB), 1));
	test_snap_equals(snapdir, &meta, data);
	meta = (struct pst_snap_meta){.last_index = 1002, .last_term = 4, .length = 3 * MIB + 1};
	cr_assert(eq(u32, write_sliced(&meta, data, SIZE_MAX), 0));
	test_snap_equals(snapdir, &meta, data);
	cr_assert(eq(int, count_prefix(snapdir, ""), 1));
	free(data);
}

/* Goal: an empty snapshot is one step: begin, then a step that finishes at once.
 * Method: length 0 with data NULL, step of 1 MiB returns 0; it loads back empty. */
Test(pst_snap, sliced_write_empty)
{
	struct pst_snap_meta meta = {.last_index = 3, .last_term = 2, .last_time_ns = 9};
	struct pst_snap_job job;
	cr_assert(eq(int, pst_snap_begin(&job, snapdir, &meta, NULL), 0));
	cr_assert(eq(int, pst_snap_step(&job, MIB), 0));
	cr_assert(eq(int, job.fd, -1));
	test_snap_equals(snapdir, &meta, NULL);
	cr_assert(eq(int, count_prefix(snapdir, ""), 1));
}

/* The snapshot a sliced job must leave in use: len bytes of prev (filled from seed) at
 * index 100, term 2, written whole. */
static struct pst_snap_meta
previous_written(uint8_t *prev, uint64_t len, uint64_t seed)
{
	bytes_fill(prev, len, seed);
	struct pst_snap_meta old = {.last_index = 100, .last_term = 2, .last_time_ns = 5,
				    .length = len};
	cr_assert(eq(int, pst_snap_write(snapdir, &old, prev, NULL), 0));
	return old;
}

/* len bytes filled from seed (free them). */
static uint8_t *
data_new(uint64_t len, uint64_t seed)
{
	uint8_t *data = malloc(len);
	cr_assert(data != NULL);
	bytes_fill(data, len, seed);
	return data;
}

/* Goal: an aborted job leaves nothing behind and the previous snapshot in use.
 * Method: a snapshot at 100; a 3 MiB job at 200, one 1 MiB step, abort (twice: the second
 * is a no-op); no temp file, no file for 200, 100 loads. */
Test(pst_snap, abort_after_one_slice_keeps_previous)
{
	uint8_t prev[100];
	struct pst_snap_meta old = previous_written(prev, sizeof(prev), 3);
	const uint64_t len = 3 * MIB;
	uint8_t *data = data_new(len, 4);
	struct pst_snap_meta meta = {.last_index = 200, .last_term = 3, .length = len};
	struct pst_snap_job job;
	cr_assert(eq(int, pst_snap_begin(&job, snapdir, &meta, data), 0));
	cr_assert(eq(int, pst_snap_step(&job, MIB), 1));
	cr_assert(eq(int, count_prefix(snapdir, PST_SNAP_TMP_PREFIX), 1));
	pst_snap_abort(&job);
	cr_assert(eq(int, job.fd, -1));
	pst_snap_abort(&job);
	cr_assert(eq(int, count_prefix(snapdir, PST_SNAP_TMP_PREFIX), 0), "temp file left");
	char name[256];
	snap_name(name, sizeof(name), meta.last_index, meta.last_term);
	cr_assert(access(name, F_OK) != 0, "a final name for the aborted job");
	cr_assert(eq(int, count_prefix(snapdir, ""), 1));
	test_snap_equals(snapdir, &old, prev);
	free(data);
}

/* Goal: a crash in the middle of a sliced write leaves the old snapshot whole and only a
 * temp file beside it; loading takes the old one and removes the temp file.
 * Method: a snapshot at 100; an 8 MiB job at 200, three 1 MiB steps, then the process
 * "dies" (the fd closed, no abort); the directory holds the old snapshot and one temp
 * file; load returns 100 and the temp file is gone. */
Test(pst_snap, crash_mid_sliced_write_keeps_old_snapshot)
{
	uint8_t prev[100];
	struct pst_snap_meta old = previous_written(prev, sizeof(prev), 5);
	const uint64_t len = 8 * MIB;
	uint8_t *data = data_new(len, 6);
	struct pst_snap_meta meta = {.last_index = 200, .last_term = 3, .length = len};
	struct pst_snap_job job;
	cr_assert(eq(int, pst_snap_begin(&job, snapdir, &meta, data), 0));
	for (int k = 0; k < 3; k++)
		cr_assert(eq(int, pst_snap_step(&job, MIB), 1));
	cr_assert(eq(int, close(job.fd), 0)); /* the crash: nothing else runs */
	cr_assert(eq(int, count_prefix(snapdir, ""), 2));
	cr_assert(eq(int, count_prefix(snapdir, PST_SNAP_TMP_PREFIX), 1));
	cr_assert(eq(int, count_files(snapdir, ".snap"), 1));
	char name[256];
	snap_name(name, sizeof(name), old.last_index, old.last_term);
	cr_assert(access(name, F_OK) == 0);
	cr_assert(access(job.tmp, F_OK) == 0);
	test_snap_equals(snapdir, &old, prev);
	cr_assert(access(job.tmp, F_OK) != 0, "load left the temp file");
	cr_assert(eq(int, count_prefix(snapdir, ""), 1));
	free(data);
}

/* Goal: a step the file system refuses fails the job with -errno, removes the temp file and
 * leaves the previous snapshot in use.
 * Method: a snapshot at 100; RLIMIT_FSIZE of 2 MiB (binds root too; SIGXFSZ ignored); a
 * 4 MiB job in 1 MiB steps: the first step passes, one of the next fails with -EFBIG. */
Test(pst_snap, failed_step_removes_temp)
{
	uint8_t prev[100];
	struct pst_snap_meta old = previous_written(prev, sizeof(prev), 7);
	const uint64_t len = 4 * MIB;
	uint8_t *data = data_new(len, 8);
	struct rlimit saved, lim;
	cr_assert(eq(int, getrlimit(RLIMIT_FSIZE, &saved), 0));
	lim = saved;
	lim.rlim_cur = 2 * MIB;
	signal(SIGXFSZ, SIG_IGN);
	cr_assert(eq(int, setrlimit(RLIMIT_FSIZE, &lim), 0));
	struct pst_snap_meta meta = {.last_index = 200, .last_term = 3, .length = len};
	struct pst_snap_job job;
	cr_assert(eq(int, pst_snap_begin(&job, snapdir, &meta, data), 0));
	cr_assert(eq(int, pst_snap_step(&job, MIB), 1));
	int rc;
	uint32_t steps = 1;
	while ((rc = pst_snap_step(&job, MIB)) == 1)
		cr_assert(lt(u32, ++steps, 4));
	cr_assert(eq(int, setrlimit(RLIMIT_FSIZE, &saved), 0));
	cr_assert(eq(int, rc, -EFBIG));
	cr_assert(eq(int, job.fd, -1));
	cr_assert(eq(int, count_prefix(snapdir, PST_SNAP_TMP_PREFIX), 0), "temp file left");
	cr_assert(eq(int, count_prefix(snapdir, ""), 1));
	test_snap_equals(snapdir, &old, prev);
	free(data);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Goal: a batch whose fdatasync (or the directory sync after a new segment) fails does not
 * count: pst_log_append returns -errno with the log's indices, term and offsets unchanged,
 * counts LOG_SYNC_FAILED, and the next append writes the batch over the same bytes and
 * syncs again (docs/persist.md; the contract app_logw.c relies on).
 * Method: the linker sends pst_log.c's fdatasync and pst_file.c's fsync here
 * (-Wl,--wrap=fdatasync,--wrap=fsync on this executable reaches the static persist
 * library's objects too); each call passes through to the real one unless a test armed a
 * failure. Every test uses its own temp directory, durable mode, and ends by reopening the
 * directory and comparing every entry with what was last written at its index.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "persist/persist.h"
#include "persist/pst_int.h"
#include "helpers.h"

int __real_fdatasync(int fd);
int __real_fsync(int fd);
int __wrap_fdatasync(int fd);
int __wrap_fsync(int fd);

/* The sync calls the library made, and the failures a test armed. */
static struct {
	uint32_t data_fail;       /* fdatasync calls still to fail with EIO */
	char data_name[64];       /* ... only on the file of this name ("": any file) */
	uint32_t data_failed;     /* fdatasync calls failed */
	uint32_t dir_fail;        /* directory fsyncs still to fail with EIO */
	uint32_t dir_failed;      /* directory fsyncs failed */
	uint32_t dir_calls;       /* directory fsyncs, failed ones included */
} sf;

/* Is fd open on a file whose last path component is name? */
static bool
fd_named(int fd, const char *name)
{
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return false;
	path[n] = '\0';
	const char *base = strrchr(path, '/');
	return strcmp(base != NULL ? base + 1 : path, name) == 0;
}

int
__wrap_fdatasync(int fd)
{
	if (sf.data_fail > 0 && (sf.data_name[0] == '\0' || fd_named(fd, sf.data_name))) {
		sf.data_fail--;
		sf.data_failed++;
		errno = EIO;
		return -1;
	}
	return __real_fdatasync(fd);
}

int
__wrap_fsync(int fd)
{
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		sf.dir_calls++;
		if (sf.dir_fail > 0) {
			sf.dir_fail--;
			sf.dir_failed++;
			errno = EIO;
			return -1;
		}
	}
	return __real_fsync(fd);
}

/* Fail the next fdatasync on the segment that starts at first (0: on any file). */
static void
arm_data_fail(uint64_t first)
{
	sf.data_fail = 1;
	sf.data_name[0] = '\0';
	if (first != 0)
		snprintf(sf.data_name, sizeof(sf.data_name), PST_SEG_NAME_FMT, first);
}

#define INDEX_MAX 64u

static char dir[64];
static struct pst_log *log_;
static struct { uint64_t term; uint32_t variant; } model[INDEX_MAX + 1]; /* last written */
static uint64_t read_buf[1 << 14]; /* 128 KiB, 8-byte aligned */

/* Variant 0 and 2 have the same lengths (2: other bytes); variant 1 is shorter. */
static uint32_t
len_of(uint64_t index, uint32_t variant)
{
	return variant == 1 ? (uint32_t)(index * 5 % 40 + 1) : (uint32_t)(index * 13 % 200 + 1);
}

static void
fill(uint8_t *p, uint64_t index, uint32_t variant)
{
	for (uint32_t k = 0; k < len_of(index, variant); k++)
		p[k] = (uint8_t)(index * 31 + variant * 101 + k);
}

static void
setup(void)
{
	memset(&sf, 0, sizeof(sf));
	memset(model, 0, sizeof(model));
	test_tmpdir(dir, sizeof(dir));
	log_ = NULL;
}

static void
teardown(void)
{
	pst_log_close(log_);
	test_rmdir(dir);
}

TestSuite(pst_log_syncfail, .init = setup, .fini = teardown, .timeout = 55);

static void
open_log(uint64_t segment_size)
{
	struct pst_log_config cfg = { .dir = dir, .segment_size = segment_size,
				      .sync = PST_SYNC_DATA };
	char err[PST_ERR_SIZE] = "";
	pst_log_close(log_);
	log_ = NULL;
	cr_assert(eq(int, pst_log_open(&log_, &cfg, err, sizeof(err)), 0), "%s", err);
}

/* Append [from, to] of term as one batch; the model holds what was written at each index,
 * whether the append then succeeds or not (a failed batch's bytes may survive a crash). */
static int
append(uint64_t from, uint64_t to, uint64_t term, uint32_t variant)
{
	static uint8_t bufs[INDEX_MAX][256];
	struct pst_entry e[INDEX_MAX];
	cr_assert(le(u64, to, INDEX_MAX));
	uint32_t n = 0;
	for (uint64_t i = from; i <= to; i++, n++) {
		fill(bufs[n], i, variant);
		e[n] = (struct pst_entry){ .index = i, .term = term, .time_ns = i * 1000 + term,
					   .kind = (uint32_t)(i % 3 + 1),
					   .data_len = len_of(i, variant), .data = bufs[n] };
		model[i].term = term;
		model[i].variant = variant;
	}
	return pst_log_append(log_, e, n);
}

/* The log holds exactly [first, last], each entry as the model says. */
static void
check_log(uint64_t first, uint64_t last)
{
	uint8_t want[256];
	struct pst_entry out[INDEX_MAX];
	cr_assert(eq(u64, pst_log_first_index(log_), first), "first index");
	cr_assert(eq(u64, pst_log_last_index(log_), last), "last index");
	cr_assert(eq(u64, pst_log_last_term(log_), model[last].term), "last term");
	for (uint64_t i = first; i <= last;) {
		int n = pst_log_read(log_, i, out, INDEX_MAX, read_buf, sizeof(read_buf));
		cr_assert(gt(int, n, 0), "read at %" PRIu64 ": %d", i, n);
		for (int k = 0; k < n; k++, i++) {
			const struct pst_entry *e = &out[k];
			uint32_t v = model[i].variant;
			cr_assert(eq(u64, e->index, i));
			cr_assert(eq(u64, e->term, model[i].term), "term at %" PRIu64, i);
			cr_assert(eq(u64, e->time_ns, i * 1000 + model[i].term));
			cr_assert(eq(u32, e->kind, (uint32_t)(i % 3 + 1)));
			cr_assert(eq(u32, e->data_len, len_of(i, v)), "length at %" PRIu64, i);
			fill(want, i, v);
			cr_assert(memcmp(e->data, want, e->data_len) == 0, "data at %" PRIu64, i);
		}
	}
}

/* Close, open the directory again (it must open and repair nothing), check [first, last]. */
static void
reopen_check(uint64_t segment_size, uint64_t first, uint64_t last)
{
	open_log(segment_size);
	cr_assert(eq(u64, pst_log_repair_info(log_)->repairs, 0), "%s",
		  pst_log_repair_info(log_)->text);
	check_log(first, last);
}

static uint64_t
counter(enum pst_counter c)
{
	return pst_log_counters(log_)[c];
}

/* Bytes of the records [from, to] as variant writes them (no segment header). */
static uint64_t
records_size(uint64_t from, uint64_t to, uint32_t variant)
{
	uint64_t size = 0;
	for (uint64_t i = from; i <= to; i++)
		size += pst_rec_size(len_of(i, variant));
	return size;
}

static const char *
seg_path(char *out, size_t size, uint64_t first)
{
	snprintf(out, size, "%s/" PST_SEG_NAME_FMT, dir, first);
	return out;
}

/* The segment that starts at first holds nothing but zeros from off to its end. */
static void
assert_zeros_after(uint64_t first, uint64_t off)
{
	char path[PATH_MAX];
	seg_path(path, sizeof(path), first);
	FILE *f = fopen(path, "rb");
	cr_assert(f != NULL, "%s", path);
	cr_assert(eq(int, fseeko(f, (off_t)off, SEEK_SET), 0));
	uint64_t at = off;
	int ch;
	while ((ch = fgetc(f)) != EOF) {
		if (ch != 0)
			break;
		at++;
	}
	fclose(f);
	cr_assert(eq(int, ch, EOF), "%s: byte at offset %" PRIu64 " is not zero", path, at);
}

/* Goal: a failed fdatasync leaves the log as it was before the append (indices, term,
 * durable index, nothing readable past the end) and counts LOG_SYNC_FAILED once; the same
 * batch appended again lands at the same indices, once.
 * Method: 1..5 of term 1, one failure armed, 6..8 of term 2 twice, reopen. */
Test(pst_log_syncfail, sync_failure_keeps_indices)
{
	open_log(0);
	cr_assert(eq(int, append(1, 5, 1, 0), 0));
	uint64_t batches = counter(PST_C_LOG_BATCHES), entries = counter(PST_C_LOG_ENTRIES);
	uint64_t syncs = counter(PST_C_LOG_SYNCS), bytes = counter(PST_C_LOG_BYTES);
	arm_data_fail(0);
	cr_assert(eq(int, append(6, 8, 2, 0), -EIO));
	cr_assert(eq(u32, sf.data_failed, 1), "the wrap never reached pst_log.c");
	cr_assert(eq(u64, pst_log_first_index(log_), 1));
	cr_assert(eq(u64, pst_log_last_index(log_), 5));
	cr_assert(eq(u64, pst_log_durable_index(log_), 5));
	cr_assert(eq(u64, pst_log_last_term(log_), 1));
	cr_assert(eq(u64, counter(PST_C_LOG_SYNC_FAILED), 1));
	cr_assert(eq(u64, counter(PST_C_LOG_BATCHES), batches));
	cr_assert(eq(u64, counter(PST_C_LOG_ENTRIES), entries));
	cr_assert(eq(u64, counter(PST_C_LOG_BYTES), bytes));
	cr_assert(eq(u64, counter(PST_C_LOG_SYNCS), syncs));
	struct pst_entry e;
	uint64_t term = 0;
	cr_assert(eq(int, pst_log_read(log_, 6, &e, 1, read_buf, sizeof(read_buf)), -ENOENT));
	cr_assert(eq(int, pst_log_term(log_, 6, &term), -ENOENT));
	cr_assert(eq(int, pst_log_sync(log_), 0)); /* nothing unsynced that counts */
	cr_assert(eq(u64, pst_log_durable_index(log_), 5));

	cr_assert(eq(int, append(6, 8, 2, 0), 0));
	cr_assert(eq(u64, pst_log_last_index(log_), 8));
	cr_assert(eq(u64, pst_log_durable_index(log_), 8));
	cr_assert(eq(u64, pst_log_last_term(log_), 2));
	cr_assert(eq(u64, counter(PST_C_LOG_SYNC_FAILED), 1));
	cr_assert(eq(u64, counter(PST_C_LOG_BATCHES), batches + 1));
	cr_assert(eq(u64, counter(PST_C_LOG_ENTRIES), entries + 3));
	cr_assert(eq(u64, counter(PST_C_LOG_SYNCS), syncs + 1));
	check_log(1, 8);
	reopen_check(0, 1, 8);
	assert_zeros_after(1, sizeof(struct pst_seg_hdr) + records_size(1, 8, 0));
}

/* Goal: after a failed sync the next append writes over the failed batch's bytes: a batch
 * of other data at the same indices (what Raft may send once the unsynced entries are
 * replaced) is what the log holds, nothing of the failed one is left behind it.
 * Method: 6..8 of term 2 fail; 6..8 of term 3 with other bytes of the same lengths, then
 * 9; reopen, check every entry and that only zeros follow the last record. */
Test(pst_log_syncfail, failed_batch_overwritten)
{
	open_log(0);
	cr_assert(eq(int, append(1, 5, 1, 0), 0));
	arm_data_fail(0);
	cr_assert(eq(int, append(6, 8, 2, 0), -EIO));
	cr_assert(eq(int, append(6, 8, 3, 2), 0));
	cr_assert(eq(int, append(9, 9, 3, 2), 0));
	check_log(1, 9);
	reopen_check(0, 1, 9);
	assert_zeros_after(1, sizeof(struct pst_seg_hdr) + records_size(1, 5, 0) +
				      records_size(6, 9, 2));
}

/* Goal: as above with a shorter batch: the failed batch's records past the new end must
 * not be left whole where an open would find them.
 * Method: 6..8 of term 2 (408 bytes of records) fail; 6..8 of term 3 with shorter data
 * (200 bytes), then 9; reopen must hold 1..9 as last written. */
Test(pst_log_syncfail, failed_batch_overwritten_shorter)
{
	open_log(0);
	cr_assert(eq(int, append(1, 5, 1, 0), 0));
	arm_data_fail(0);
	cr_assert(eq(int, append(6, 8, 2, 0), -EIO));
	cr_assert(lt(u64, records_size(6, 8, 1), records_size(6, 8, 0)));
	cr_assert(eq(int, append(6, 8, 3, 1), 0));
	cr_assert(eq(int, append(9, 9, 3, 1), 0));
	check_log(1, 9);
	reopen_check(0, 1, 9);
}

/* Goal: a failed batch's records past what the log holds never come back: after a shorter
 * append over them and a truncation past the end (a no-op: nothing held there), the
 * reopened log ends where the open one did.
 * Method: 6..8 fail; 6..7 with the same bytes land; truncate(8); reopen must hold 1..7. */
Test(pst_log_syncfail, failed_batch_not_resurrected)
{
	open_log(0);
	cr_assert(eq(int, append(1, 5, 1, 0), 0));
	arm_data_fail(0);
	cr_assert(eq(int, append(6, 8, 2, 0), -EIO));
	cr_assert(eq(int, append(6, 7, 2, 0), 0));
	cr_assert(eq(int, pst_log_truncate(log_, 8), 0));
	check_log(1, 7);
	reopen_check(0, 1, 7);
}

/* The segment size at which 1..5 of variant 0 fill the first segment: the next batch rolls. */
static uint64_t
five_entry_segment(void)
{
	return sizeof(struct pst_seg_hdr) + records_size(1, 5, 0);
}

/* Goal: a failed sync on the append that created a segment leaves that segment to the next
 * append (which creates none), and that append syncs the batch and then the directory;
 * later appends to the segment do not sync the directory again.
 * Method: segments of five entries; the new segment's fdatasync fails on 6..8; the retry,
 * then 9 alone; directory fsyncs counted through the wrap; reopen. */
Test(pst_log_syncfail, failure_on_new_segment)
{
	const uint64_t seg_size = five_entry_segment();
	open_log(seg_size);
	cr_assert(eq(int, append(1, 5, 1, 0), 0));
	cr_assert(eq(u64, counter(PST_C_LOG_SEGMENTS_CREATED), 1));
	sf.dir_calls = 0;
	arm_data_fail(6);
	cr_assert(eq(int, append(6, 8, 2, 0), -EIO));
	cr_assert(eq(u32, sf.data_failed, 1), "the new segment's sync was not the one failed");
	cr_assert(eq(u64, counter(PST_C_LOG_SEGMENTS_CREATED), 2));
	cr_assert(eq(u32, sf.dir_calls, 0), "the directory was synced after a failed batch");
	cr_assert(eq(u64, pst_log_last_index(log_), 5));
	cr_assert(eq(u64, pst_log_durable_index(log_), 5));
	cr_assert(eq(u64, pst_log_last_term(log_), 1));
	cr_assert(eq(u64, counter(PST_C_LOG_SYNC_FAILED), 1));

	cr_assert(eq(int, append(6, 8, 2, 0), 0));
	cr_assert(eq(u64, counter(PST_C_LOG_SEGMENTS_CREATED), 2), "the retry made a segment");
	cr_assert(eq(u32, sf.dir_calls, 1), "the directory sync was not retried");
	cr_assert(eq(u64, pst_log_durable_index(log_), 8));
	uint64_t created = counter(PST_C_LOG_SEGMENTS_CREATED);
	cr_assert(eq(int, append(9, 9, 2, 0), 0));
	uint32_t rolled = (uint32_t)(counter(PST_C_LOG_SEGMENTS_CREATED) - created);
	cr_assert(eq(u32, sf.dir_calls, 1 + rolled), "a directory sync without a new segment");
	char path[PATH_MAX];
	cr_assert(eq(u64, file_size(seg_path(path, sizeof(path), 1)), seg_size)); /* tail cut */
	check_log(1, 9);
	reopen_check(seg_size, 1, 9);
}

/* Goal: a failed directory sync after a new segment's batch fails the append like a failed
 * fdatasync (the segment's name may not be durable), and the next append syncs it again.
 * Method: segments of five entries; the directory fsync fails on 6..8; the retry, then 9. */
Test(pst_log_syncfail, dir_sync_failure_retried)
{
	const uint64_t seg_size = five_entry_segment();
	open_log(seg_size);
	cr_assert(eq(int, append(1, 5, 1, 0), 0));
	sf.dir_calls = 0;
	sf.dir_fail = 1;
	cr_assert(eq(int, append(6, 8, 2, 0), -EIO));
	cr_assert(eq(u32, sf.dir_failed, 1), "the wrap never reached pst_file.c");
	cr_assert(eq(u32, sf.data_failed, 0));
	cr_assert(eq(u64, pst_log_last_index(log_), 5));
	cr_assert(eq(u64, pst_log_durable_index(log_), 5));
	cr_assert(eq(u64, pst_log_last_term(log_), 1));
	cr_assert(eq(u64, counter(PST_C_LOG_SYNC_FAILED), 1));

	cr_assert(eq(int, append(6, 8, 2, 0), 0));
	cr_assert(eq(u32, sf.dir_calls, 2), "the directory sync was not retried");
	cr_assert(eq(u64, counter(PST_C_LOG_SEGMENTS_CREATED), 2));
	cr_assert(eq(u64, pst_log_durable_index(log_), 8));
	uint64_t created = counter(PST_C_LOG_SEGMENTS_CREATED);
	cr_assert(eq(int, append(9, 9, 2, 0), 0));
	uint32_t rolled = (uint32_t)(counter(PST_C_LOG_SEGMENTS_CREATED) - created);
	cr_assert(eq(u32, sf.dir_calls, 2 + rolled), "a directory sync without a new segment");
	check_log(1, 9);
	reopen_check(seg_size, 1, 9);
}

/* Goal: failures in a row are each counted and leave the log unchanged; the batch lands
 * once when a sync finally succeeds.
 * Method: two failures armed, 6..8 three times. */
Test(pst_log_syncfail, repeated_failures)
{
	open_log(0);
	cr_assert(eq(int, append(1, 5, 1, 0), 0));
	arm_data_fail(0);
	sf.data_fail = 2;
	cr_assert(eq(int, append(6, 8, 2, 0), -EIO));
	cr_assert(eq(int, append(6, 8, 2, 0), -EIO));
	cr_assert(eq(u64, pst_log_last_index(log_), 5));
	cr_assert(eq(u64, counter(PST_C_LOG_SYNC_FAILED), 2));
	cr_assert(eq(int, append(6, 8, 2, 0), 0));
	cr_assert(eq(u32, sf.data_failed, 2));
	cr_assert(eq(u64, counter(PST_C_LOG_SYNC_FAILED), 2));
	cr_assert(eq(u64, counter(PST_C_LOG_ENTRIES), 8));
	reopen_check(0, 1, 8);
}

/* Zero the bytes [off, off + len) of the segment that starts at first. */
static void
seg_zero(uint64_t first, uint64_t off, uint64_t len)
{
	static const uint8_t zeros[4096];
	char path[PATH_MAX];
	int fd = open(seg_path(path, sizeof(path), first), O_WRONLY);
	cr_assert(ge(int, fd, 0), "%s", path);
	cr_assert(le(u64, len, sizeof(zeros)));
	cr_assert(eq(i64, (int64_t)pwrite(fd, zeros, len, (off_t)off), (int64_t)len));
	close(fd);
}

/* Goal: a process that stops after a failed sync, without retrying, leaves a log that opens
 * with every entry the checkpoint names (the failed batch never reached the checkpoint),
 * and without the failed batch: pst_log_append cut it from the file when the sync failed.
 * Method: 6..8 fail, close, read the checkpoint, open again; once as the file is, once with
 * zeros written where the batch was (what a disk that lost the cut but also the pages
 * holds); in a new segment (cut to nothing: a torn last segment, removed) or the first. */
static void
crash_case(uint64_t segment_size, bool lost)
{
	open_log(segment_size);
	cr_assert(eq(int, append(1, 5, 1, 0), 0));
	bool rolls = segment_size != 0;
	arm_data_fail(rolls ? 6 : 0);
	cr_assert(eq(int, append(6, 8, 2, 0), -EIO));
	cr_assert(eq(u32, sf.data_failed, 1));
	pst_log_close(log_);
	log_ = NULL;

	struct pst_ckpt_rec rec;
	char err[PST_ERR_SIZE] = "";
	cr_assert(eq(int, pst_ckpt_load(dir, &rec, err, sizeof(err)), 0), "%s", err);
	cr_assert(eq(u64, rec.index, 5));
	cr_assert(eq(u64, rec.term, 1));
	if (lost && rolls)
		seg_zero(6, 0, sizeof(struct pst_seg_hdr) + records_size(6, 8, 0));
	else if (lost)
		seg_zero(1, sizeof(struct pst_seg_hdr) + records_size(1, 5, 0),
			 records_size(6, 8, 0));

	open_log(segment_size);
	uint64_t last = 5;
	/* A new segment cut to nothing or zeroed is a torn last segment (removed); zeros in
	 * the first one are a preallocated tail. */
	uint64_t repairs = rolls ? 1 : 0;
	cr_assert(eq(u64, pst_log_repair_info(log_)->repairs, repairs), "%s",
		  pst_log_repair_info(log_)->text);
	check_log(1, last);
	cr_assert(eq(u64, pst_log_durable_index(log_), last));
	cr_assert(eq(int, append(last + 1, last + 2, 3, 0), 0));
	reopen_check(segment_size, 1, last + 2);
}

Test(pst_log_syncfail, crash_after_failure_kept) { crash_case(0, false); }
Test(pst_log_syncfail, crash_after_failure_lost) { crash_case(0, true); }
Test(pst_log_syncfail, crash_after_failure_new_segment_kept)
{
	crash_case(five_entry_segment(), false);
}
Test(pst_log_syncfail, crash_after_failure_new_segment_lost)
{
	crash_case(five_entry_segment(), true);
}

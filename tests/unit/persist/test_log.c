/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "persist/persist.h"
#include "persist/pst_int.h"
#include "helpers.h"

static char dir[64];
static struct pst_log *log_;
static uint8_t data_buf[256];
static uint64_t read_buf[1 << 16]; /* 512 KiB, 8-byte aligned */

static uint32_t
len_of(uint64_t index)
{
	return (uint32_t)((index * 13) % 200 + 1);
}

static const void *
data_of(uint64_t index)
{
	for (uint32_t k = 0; k < len_of(index); k++)
		data_buf[k] = (uint8_t)(index * 31 + k);
	return data_buf;
}

static void
setup(void)
{
	test_tmpdir(dir, sizeof(dir));
	log_ = NULL;
}

static void
teardown(void)
{
	pst_log_close(log_);
	test_rmdir(dir);
}

static int
open_log(uint64_t segment_size, uint32_t sync, char *err)
{
	struct pst_log_config cfg = {.dir = dir, .segment_size = segment_size, .sync = sync};
	pst_log_close(log_);
	log_ = NULL;
	return pst_log_open(&log_, &cfg, err, PST_ERR_SIZE);
}

/* Append [from, to] in batches of batch entries, term = term. */
static void
append_range(uint64_t from, uint64_t to, uint32_t batch, uint64_t term)
{
	static uint8_t bufs[64][256];
	struct pst_entry e[64];
	cr_assert(batch <= 64);
	for (uint64_t i = from; i <= to;) {
		uint32_t n = 0;
		for (; n < batch && i <= to; n++, i++) {
			memcpy(bufs[n], data_of(i), len_of(i));
			e[n] = (struct pst_entry){.index = i, .term = term, .time_ns = i * 1000,
						  .kind = 1, .data_len = len_of(i), .data = bufs[n]};
		}
		cr_assert(eq(int, pst_log_append(log_, e, n), 0));
	}
}

/* Read [from, to] back and compare every field; expect term for all. */
static void
check_range(uint64_t from, uint64_t to, uint64_t term)
{
	struct pst_entry out[128];
	for (uint64_t i = from; i <= to;) {
		uint32_t max = to - i + 1 < 128 ? (uint32_t)(to - i + 1) : 128;
		int n = pst_log_read(log_, i, out, max, read_buf, sizeof(read_buf));
		cr_assert(gt(int, n, 0), "read %" PRIu64 ": %d", i, n);
		for (int k = 0; k < n; k++, i++) {
			cr_assert(eq(u64, out[k].index, i));
			cr_assert(eq(u64, out[k].term, term), "index %" PRIu64, i);
			cr_assert(eq(u64, out[k].time_ns, i * 1000));
			cr_assert(eq(u32, out[k].data_len, len_of(i)));
			cr_assert(memcmp(out[k].data, data_of(i), len_of(i)) == 0);
		}
	}
}

static void
seg_path(char *out, size_t size, uint64_t first)
{
	snprintf(out, size, "%s/" PST_SEG_NAME_FMT, dir, first);
}

/* Offset of record index within the segment that starts at first. */
static uint64_t
rec_offset(uint64_t first, uint64_t index)
{
	uint64_t off = sizeof(struct pst_seg_hdr);
	for (uint64_t i = first; i < index; i++)
		off += pst_rec_size(len_of(i));
	return off;
}

/* The checkpoint file's bytes, to put an older one back: what a crash leaves when the
 * batches after it were written but never synced (the checkpoint names only synced ones). */
static uint8_t ckpt_copy[2 * PST_CKPT_SLOT_STRIDE];
static size_t ckpt_copy_len;

static void
ckpt_save(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/" PST_CKPT_NAME, dir);
	FILE *f = fopen(path, "rb");
	cr_assert(f != NULL, "no checkpoint file");
	ckpt_copy_len = fread(ckpt_copy, 1, sizeof(ckpt_copy), f);
	fclose(f);
	cr_assert(gt(sz, ckpt_copy_len, 0));
}

static void
ckpt_restore(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/" PST_CKPT_NAME, dir);
	FILE *f = fopen(path, "wb");
	cr_assert(f != NULL);
	cr_assert(eq(sz, fwrite(ckpt_copy, 1, ckpt_copy_len, f), ckpt_copy_len));
	fclose(f);
}

/* Append [1, to] in durable mode, the last batch [from, to] never synced as far as the
 * checkpoint knows (it names from - 1), and close. */
static void
append_unsynced_tail(uint64_t from, uint64_t to, uint32_t batch)
{
	char err[PST_ERR_SIZE];
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0), "%s", err);
	append_range(1, from - 1, batch, 1);
	pst_log_close(log_);
	log_ = NULL;
	ckpt_save();
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0), "%s", err);
	append_range(from, to, batch, 1);
	pst_log_close(log_);
	log_ = NULL;
	ckpt_restore();
}

TestSuite(pst_log, .init = setup, .fini = teardown);

/* Goal: what is appended is read back, across a restart, with fdatasync per batch.
 * Method: 1000 entries in batches of 10 in durable mode; read all; reopen; read all. */
Test(pst_log, round_trip_durable)
{
	char err[PST_ERR_SIZE];
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0));
	cr_assert(eq(u64, pst_log_first_index(log_), 1));
	cr_assert(eq(u64, pst_log_last_index(log_), 0));
	append_range(1, 1000, 10, 3);
	cr_assert(eq(u64, pst_log_last_index(log_), 1000));
	cr_assert(eq(u64, pst_log_durable_index(log_), 1000));
	cr_assert(eq(u64, pst_log_counters(log_)[PST_C_LOG_BATCHES], 100));
	cr_assert(eq(u64, pst_log_counters(log_)[PST_C_LOG_SYNCS], 100));
	check_range(1, 1000, 3);
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(log_), 1000));
	cr_assert(eq(u64, pst_log_last_term(log_), 3));
	check_range(1, 1000, 3);
	/* The preallocated zero tail is the end of the log, not a torn tail. */
	cr_assert(eq(u64, pst_log_counters(log_)[PST_C_LOG_TORN_TAIL_BYTES], 0));
	append_range(1001, 1100, 10, 4);
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(log_), 1100));
	check_range(1, 1000, 3);
	check_range(1001, 1100, 4);
	uint64_t term = 0;
	cr_assert(eq(int, pst_log_term(log_, 500, &term), 0));
	cr_assert(eq(u64, term, 3));
	cr_assert(eq(int, pst_log_term(log_, 1101, &term), -ENOENT));
	cr_assert(eq(int, pst_log_read(log_, 1101, (struct pst_entry[1]){}, 1, read_buf, 64),
		     -ENOENT));
	/* A buffer too small for the first entry says so. */
	cr_assert(eq(int, pst_log_read(log_, 1, (struct pst_entry[1]){}, 1, read_buf, 16),
		     -ENOBUFS));
}

/* Goal: memory mode writes without fdatasync and still reads back.
 * Method: append, no syncs counted, durable index follows the writes. */
Test(pst_log, memory_mode_no_sync)
{
	char err[PST_ERR_SIZE];
	cr_assert(eq(int, open_log(0, PST_SYNC_NONE, err), 0));
	append_range(1, 300, 30, 1);
	cr_assert(eq(u64, pst_log_counters(log_)[PST_C_LOG_SYNCS], 0));
	cr_assert(eq(u64, pst_log_durable_index(log_), 300));
	cr_assert(eq(int, pst_log_sync(log_), 0));
	check_range(1, 300, 1);
}

/* Goal: segments roll at the size limit, reads cross them, compaction drops whole segments
 * behind an index and never the active one.
 * Method: 4 KiB segments, 1000 entries, compact at 500, reopen. */
Test(pst_log, segments_and_compaction)
{
	char err[PST_ERR_SIZE];
	cr_assert(eq(int, open_log(4096, PST_SYNC_NONE, err), 0));
	append_range(1, 1000, 7, 2);
	cr_assert(gt(u64, pst_log_counters(log_)[PST_C_LOG_SEGMENTS_CREATED], 10));
	check_range(1, 1000, 2);
	int removed = pst_log_compact(log_, 500);
	cr_assert(gt(int, removed, 0));
	uint64_t first = pst_log_first_index(log_);
	cr_assert(gt(u64, first, 400));
	cr_assert(le(u64, first, 501));
	check_range(first, 1000, 2);
	cr_assert(eq(int, pst_log_read(log_, first - 1, (struct pst_entry[1]){}, 1, read_buf,
				       sizeof(read_buf)),
		     -ENOENT));
	cr_assert(eq(int, open_log(4096, PST_SYNC_NONE, err), 0), "%s", err);
	cr_assert(eq(u64, pst_log_first_index(log_), first));
	cr_assert(eq(u64, pst_log_last_index(log_), 1000));
	check_range(first, 1000, 2);
	/* Compacting past the end keeps the active segment: last index stays known. */
	pst_log_compact(log_, 5000);
	cr_assert(eq(u64, pst_log_last_index(log_), 1000));
}

/* Goal: a torn tail (a partial last record, past the synced checkpoint) is cut off on open,
 * and the log goes on.
 * Method: 100 entries, the checkpoint at 90 (91..100 written, never synced), cut 5 bytes
 * off the file, reopen: 99 entries; append 100 again. */
Test(pst_log, torn_tail_partial_record)
{
	char err[PST_ERR_SIZE], path[128];
	append_unsynced_tail(91, 100, 10);
	seg_path(path, sizeof(path), 1);
	/* The file ends in preallocated zeros (durable mode): cut inside the last record. */
	cr_assert(ge(u64, file_size(path), rec_offset(1, 101)));
	file_cut(path, rec_offset(1, 101) - 5);
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(log_), 99));
	cr_assert(gt(u64, pst_log_counters(log_)[PST_C_LOG_TORN_TAIL_BYTES], 0));
	cr_assert(le(u64, pst_log_counters(log_)[PST_C_LOG_TORN_TAIL_BYTES],
		     pst_rec_size(len_of(100)) - 5));
	cr_assert(eq(u64, file_size(path), rec_offset(1, 100)));
	append_range(100, 120, 5, 1);
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(log_), 120));
	check_range(1, 120, 1);
}

/* Goal: a CRC-bad last record past the synced checkpoint (a torn write that reached full
 * length) is a torn tail too, counted and described.
 * Method: the checkpoint at 90; flip a data byte of record 100; reopen: it is gone, the
 * rest stays, the repair names the bytes and the entries. */
Test(pst_log, torn_tail_bad_crc)
{
	char err[PST_ERR_SIZE], path[128];
	append_unsynced_tail(91, 100, 10);
	seg_path(path, sizeof(path), 1);
	file_flip(path, rec_offset(1, 100) + sizeof(struct pst_rec_hdr), 0x01);
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(log_), 99));
	check_range(1, 99, 1);
	const struct pst_log_repair *r = pst_log_repair_info(log_);
	cr_assert(eq(u64, r->repairs, 1));
	cr_assert(gt(u64, r->bytes, 0));
	cr_assert(le(u64, r->bytes, pst_rec_size(len_of(100)))); /* its zero padding is not */
	cr_assert(eq(u64, r->first_index, 100));
	cr_assert(eq(u64, r->last_index, 100));
	cr_assert(eq(u64, r->synced_index, 90));
	cr_assert(strstr(r->text, "entries 100..100") != NULL, "%s", r->text);
	cr_assert(eq(u64, pst_log_counters(log_)[PST_C_LOG_TORN_REPAIRS], 1));
}

/* Goal: a bad record followed by valid data is corruption, never a torn tail: open fails
 * with -EBADMSG naming the file and the offset.
 * Method: flip a byte in record 50 of 100; open; check error and message. */
Test(pst_log, mid_log_corruption_is_hard_error)
{
	char err[PST_ERR_SIZE], path[128], want[200];
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0));
	append_range(1, 100, 10, 1);
	pst_log_close(log_);
	log_ = NULL;
	seg_path(path, sizeof(path), 1);
	uint64_t off = rec_offset(1, 50);
	file_flip(path, off + 20, 0x80); /* inside the term field */
	err[0] = '\0';
	uint64_t size_before = file_size(path);
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), -EBADMSG));
	cr_assert(log_ == NULL);
	snprintf(want, sizeof(want), "%s: offset %" PRIu64 ":", path, off);
	cr_assert(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
	/* Nothing was repaired behind the operator's back. */
	cr_assert(eq(u64, file_size(path), size_before));
}

/* Goal: a bad record at the end of a segment that is not the last is corruption too.
 * Method: small segments; damage the last record of the first segment; open fails naming it. */
Test(pst_log, corruption_in_earlier_segment)
{
	char err[PST_ERR_SIZE], path[128];
	cr_assert(eq(int, open_log(4096, PST_SYNC_NONE, err), 0));
	append_range(1, 200, 4, 1);
	cr_assert(gt(u64, pst_log_counters(log_)[PST_C_LOG_SEGMENTS_CREATED], 2));
	pst_log_close(log_);
	log_ = NULL;
	seg_path(path, sizeof(path), 1);
	file_cut(path, file_size(path) - 3);
	cr_assert(eq(int, open_log(4096, PST_SYNC_NONE, err), -EBADMSG));
	cr_assert(strstr(err, path) != NULL, "%s", err);
	cr_assert(strstr(err, "offset") != NULL, "%s", err);
}

/* Goal: a segment created but torn before its header was whole is dropped on open.
 * Method: a 10-byte file named after the next index; open ignores and removes it. */
Test(pst_log, torn_segment_header)
{
	char err[PST_ERR_SIZE], path[128];
	cr_assert(eq(int, open_log(0, PST_SYNC_NONE, err), 0));
	append_range(1, 50, 10, 1);
	pst_log_close(log_);
	log_ = NULL;
	seg_path(path, sizeof(path), 51);
	FILE *f = fopen(path, "w");
	cr_assert(f != NULL);
	fwrite("OMSDLOG", 1, 7, f);
	fclose(f);
	cr_assert(eq(int, open_log(0, PST_SYNC_NONE, err), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(log_), 50));
	cr_assert(access(path, F_OK) != 0);
	append_range(51, 60, 10, 1);
	check_range(1, 60, 1);
}

/* Goal: in durable mode a segment is extended with zeros; a crash that tears a new
 * segment's first write (header bad, zeros after) is dropped too, and rolling trims the
 * zeros off the finished segment.
 * Method: 4 KiB segments in durable mode; check sizes; damage the last segment's header
 * after zeroing its records; reopen. */
Test(pst_log, durable_prealloc_and_roll)
{
	char err[PST_ERR_SIZE], path[128];
	cr_assert(eq(int, open_log(4096, PST_SYNC_DATA, err), 0));
	append_range(1, 100, 5, 1);
	cr_assert(gt(u64, pst_log_counters(log_)[PST_C_LOG_SEGMENTS_CREATED], 2));
	seg_path(path, sizeof(path), 1);
	cr_assert(le(u64, file_size(path), 4096), "a finished segment keeps no zero tail");
	uint64_t last_first = pst_log_last_index(log_) + 1;
	pst_log_close(log_);
	log_ = NULL;
	ckpt_save(); /* the first write of the next segment is never synced */
	cr_assert(eq(int, open_log(4096, PST_SYNC_DATA, err), 0), "%s", err);
	append_range(101, 105, 5, 1); /* roll into a segment of its own */
	(void)last_first;
	pst_log_close(log_);
	log_ = NULL;
	ckpt_restore();
	seg_path(path, sizeof(path), 101);
	uint64_t size = file_size(path);
	if (size < 4096) {
		/* It did not roll at 101: nothing to tear here. */
		return;
	}
	/* Tear the whole first write: header and records never reached the disk. */
	int fd = open(path, O_WRONLY);
	cr_assert(fd >= 0);
	static uint8_t z[8192];
	cr_assert(eq(int, (int)pwrite(fd, z, sizeof(z), 0), (int)sizeof(z)));
	close(fd);
	cr_assert(eq(int, open_log(4096, PST_SYNC_DATA, err), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(log_), 100));
	append_range(101, 110, 5, 2);
	check_range(1, 100, 1);
	check_range(101, 110, 2);
}

/* Goal: Raft §5.3 conflict — truncating a suffix, across segments, then appending a new
 * term; survives a reopen.
 * Method: 300 entries in small segments, truncate at 120, append 120..150 in term 2. */
Test(pst_log, truncate_suffix)
{
	char err[PST_ERR_SIZE];
	cr_assert(eq(int, open_log(4096, PST_SYNC_DATA, err), 0));
	append_range(1, 300, 10, 1);
	cr_assert(eq(int, pst_log_truncate(log_, 120), 0));
	cr_assert(eq(u64, pst_log_last_index(log_), 119));
	cr_assert(eq(u64, pst_log_last_term(log_), 1));
	cr_assert(eq(u64, pst_log_durable_index(log_), 119));
	append_range(120, 150, 10, 2);
	cr_assert(eq(int, open_log(4096, PST_SYNC_DATA, err), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(log_), 150));
	cr_assert(eq(u64, pst_log_last_term(log_), 2));
	check_range(1, 119, 1);
	check_range(120, 150, 2);
	/* Truncating everything keeps an empty log that starts at the same index. */
	cr_assert(eq(int, pst_log_truncate(log_, 1), 0));
	cr_assert(eq(u64, pst_log_last_index(log_), 0));
	cr_assert(eq(u64, pst_log_first_index(log_), 1));
	append_range(1, 5, 5, 4);
	cr_assert(eq(int, open_log(4096, PST_SYNC_DATA, err), 0), "%s", err);
	check_range(1, 5, 4);
}

/* Goal: a follower that installed a snapshot beyond its log restarts the log there.
 * Method: reset to 1000, append, reopen: the log starts at 1000. */
Test(pst_log, reset_to_index)
{
	char err[PST_ERR_SIZE];
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0));
	append_range(1, 10, 10, 1);
	cr_assert(eq(int, pst_log_reset(log_, 1000), 0));
	cr_assert(eq(u64, pst_log_first_index(log_), 1000));
	cr_assert(eq(u64, pst_log_last_index(log_), 999));
	append_range(1000, 1010, 4, 5);
	cr_assert(eq(int, open_log(0, PST_SYNC_DATA, err), 0), "%s", err);
	cr_assert(eq(u64, pst_log_first_index(log_), 1000));
	cr_assert(eq(u64, pst_log_last_index(log_), 1010));
	check_range(1000, 1010, 5);
}

/* Goal: appending out of order is a programmer error (CHECK aborts).
 * Method: append index 5 to an empty log. */
Test(pst_log, append_gap_aborts, .signal = SIGABRT)
{
	char err[PST_ERR_SIZE];
	cr_assert(eq(int, open_log(0, PST_SYNC_NONE, err), 0));
	test_rmdir(dir); /* .fini does not run after the abort */
	struct pst_entry e = {.index = 5, .term = 1};
	pst_log_append(log_, &e, 1);
}

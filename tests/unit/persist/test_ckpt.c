/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The log's synced checkpoint (docs/persist.md "The synced checkpoint"): damage at or below
 * the last synced index refuses to open, naming file, offset, index and what was found;
 * a torn tail past it is cut and reported; a missing or corrupt checkpoint is refused
 * unless the operator adopts the log.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "persist/persist.h"
#include "persist/pst_int.h"
#include "helpers.h"

static char dir[64];
static struct pst_log *lg;
static char err[PST_ERR_SIZE];

#define DATA_LEN 100u /* every entry: 144-byte records (40 + 100 + 4 padding) */

static void
setup(void)
{
	test_tmpdir(dir, sizeof(dir));
	lg = NULL;
	err[0] = '\0';
}

static void
teardown(void)
{
	pst_log_close(lg);
	test_rmdir(dir);
}

static int
reopen(uint32_t sync)
{
	struct pst_log_config cfg = {.dir = dir, .sync = sync};
	pst_log_close(lg);
	lg = NULL;
	err[0] = '\0';
	return pst_log_open(&lg, &cfg, err, sizeof(err));
}

static void
shut(void)
{
	pst_log_close(lg);
	lg = NULL;
}

/* Append [from, to] in batches of 10, term. */
static void
append(uint64_t from, uint64_t to, uint64_t term)
{
	static uint8_t data[10][DATA_LEN];
	struct pst_entry e[10];
	for (uint64_t i = from; i <= to;) {
		uint32_t n = 0;
		for (; n < 10 && i <= to; n++, i++) {
			memset(data[n], (int)(i & 0xff), DATA_LEN);
			e[n] = (struct pst_entry){.index = i, .term = term, .time_ns = i,
						  .kind = 1, .data_len = DATA_LEN, .data = data[n]};
		}
		cr_assert(eq(int, pst_log_append(lg, e, n), 0));
	}
}

static uint64_t
off_of(uint64_t index) /* in the first segment */
{
	return sizeof(struct pst_seg_hdr) + (index - 1) * pst_rec_size(DATA_LEN);
}

static void
seg1(char *out, size_t size)
{
	snprintf(out, size, "%s/" PST_SEG_NAME_FMT, dir, (uint64_t)1);
}

static void
ckpt_file(char *out, size_t size)
{
	snprintf(out, size, "%s/" PST_CKPT_NAME, dir);
}

/* A durable log of 100 entries in term 1, closed (the checkpoint says 100). */
static void
log_of_100(void)
{
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	append(1, 100, 1);
	shut();
}

static void
want_in_err(const char *what)
{
	cr_assert(strstr(err, what) != NULL, "error '%s' lacks '%s'", err, what);
}

TestSuite(pst_ckpt, .init = setup, .fini = teardown);

/* Goal: the checkpoint follows what is synced: after every batch it names the last synced
 * index and its term, never more; a truncation lowers it (synced) before entries go, a
 * reset clears it; memory mode keeps none.
 * Method: append, load the file after each step. */
Test(pst_ckpt, follows_the_synced_index)
{
	struct pst_ckpt_rec r;
	char path[128];
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	cr_assert(eq(int, pst_ckpt_load(dir, &r, err, sizeof(err)), 0), "%s", err);
	cr_assert(eq(u64, r.index, 0));
	append(1, 35, 2);
	cr_assert(eq(int, pst_ckpt_load(dir, &r, err, sizeof(err)), 0), "%s", err);
	cr_assert(eq(u64, r.index, 35));
	cr_assert(eq(u64, r.index, pst_log_durable_index(lg)));
	cr_assert(eq(u64, r.term, 2));
	cr_assert(eq(int, pst_log_truncate(lg, 20), 0));
	cr_assert(eq(int, pst_ckpt_load(dir, &r, err, sizeof(err)), 0), "%s", err);
	cr_assert(eq(u64, r.index, 19));
	cr_assert(eq(u64, r.term, 2));
	append(20, 30, 3);
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(lg), 30));
	cr_assert(eq(u64, pst_log_last_term(lg), 3));
	cr_assert(eq(int, pst_log_reset(lg, 500), 0));
	cr_assert(eq(int, pst_ckpt_load(dir, &r, err, sizeof(err)), 0), "%s", err);
	cr_assert(eq(u64, r.index, 0));
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err); /* no segment: fine */
	cr_assert(eq(u64, pst_log_last_index(lg), 0));
	shut();
	test_rmdir(dir);
	cr_assert(eq(int, mkdir(dir, 0700), 0));
	cr_assert(eq(int, reopen(PST_SYNC_NONE), 0), "%s", err);
	append(1, 10, 1);
	ckpt_file(path, sizeof(path));
	cr_assert(access(path, F_OK) != 0, "memory mode wrote a checkpoint");
}

/* Goal: the checkpoint costs no fdatasync per batch: its updates are written after each
 * batch's sync and synced at most once per PST_CKPT_SYNC_NS.
 * Method: 200 batches in well under a second: the log syncs 200 times, the checkpoint at
 * most twice (open, and one when a slow machine crossed the second). */
Test(pst_ckpt, no_fsync_per_batch)
{
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	uint64_t t0 = test_now_ns();
	append(1, 2000, 1);
	uint64_t ms = (test_now_ns() - t0) / 1000000u;
	const uint64_t *c = pst_log_counters(lg);
	cr_assert(eq(u64, c[PST_C_LOG_SYNCS], 200));
	cr_assert(le(u64, c[PST_C_LOG_CKPT_SYNCS], 2 + ms / 1000), "%" PRIu64 " checkpoint "
		  "syncs in %" PRIu64 " ms", c[PST_C_LOG_CKPT_SYNCS], ms);
	cr_assert(eq(u64, c[PST_C_LOG_CKPT_ERRORS], 0));
}

/* Goal: one flipped byte in the last record, which was synced, refuses to open: the error
 * names the segment, the offset, the index, what was found and the checkpoint; nothing is
 * cut. (Before the checkpoint this was repaired as a torn tail: the entry was gone.)
 * Method: 100 entries; flip a data byte of record 100; open. */
Test(pst_ckpt, synced_bit_flip_refused)
{
	char path[128], want[400];
	log_of_100();
	seg1(path, sizeof(path));
	uint64_t size = file_size(path);
	file_flip(path, off_of(100) + sizeof(struct pst_rec_hdr) + 7, 0x10);
	cr_assert(eq(int, reopen(PST_SYNC_DATA), -EBADMSG));
	cr_assert(lg == NULL);
	snprintf(want, sizeof(want), "%s: offset %" PRIu64 ": entry 100: the record of index "
		 "100 (term 1) fails its CRC", path, off_of(100));
	want_in_err(want);
	want_in_err("entries through 100 (term 1) were synced: damage, not a torn tail");
	want_in_err("/" PST_CKPT_NAME " says");
	cr_assert(eq(u64, file_size(path), size), "the file was changed");
	file_flip(path, off_of(100) + sizeof(struct pst_rec_hdr) + 7, 0x10);
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(lg), 100));
}

/* Goal: a torn cut through the last synced record refuses too, and so does a cut (or zeros)
 * exactly at a record boundary, which leaves no bad record at all, only fewer entries.
 * Method: 100 entries; cut inside record 100; then at its start; then zero it. */
Test(pst_ckpt, synced_cut_refused)
{
	char path[128];
	log_of_100();
	seg1(path, sizeof(path));
	file_cut(path, off_of(100) + 60);
	cr_assert(eq(int, reopen(PST_SYNC_DATA), -EBADMSG));
	want_in_err("entry 100: the record of index 100 (term 1) cut short: 60 of 144 bytes");
	file_cut(path, off_of(100));
	cr_assert(eq(int, reopen(PST_SYNC_DATA), -EBADMSG));
	want_in_err("the log ends at index 99");
	want_in_err("entries 100..100 are missing");
	/* The last record zeroed where the file was preallocated: zeros are the end of the
	 * records, so again fewer entries than synced. */
	shut();
	test_rmdir(dir);
	cr_assert(eq(int, mkdir(dir, 0700), 0));
	log_of_100();
	int fd = open(path, O_WRONLY);
	static const uint8_t z[256];
	cr_assert(eq(int, (int)pwrite(fd, z, pst_rec_size(DATA_LEN), (off_t)off_of(100)),
		     (int)pst_rec_size(DATA_LEN)));
	close(fd);
	cr_assert(eq(int, reopen(PST_SYNC_DATA), -EBADMSG));
	want_in_err("entries 100..100 are missing");
}

/* Goal: a torn write past the last sync (a batch written, never synced) is cut, counted
 * and described: bytes, offset and the entries it held.
 * Method: 100 entries synced; a partial record for 101 and 102 after them (header of 101,
 * 60 bytes, then a whole header of 102 with garbage): open; 100 entries, the repair says
 * 101..102 past checkpoint 100; the log goes on at 101. */
Test(pst_ckpt, torn_past_checkpoint_repaired)
{
	char path[128];
	log_of_100();
	seg1(path, sizeof(path));
	uint8_t junk[2 * 144];
	memset(junk, 0x5a, sizeof(junk));
	cr_assert(eq(u64, pst_rec_size(DATA_LEN), 144));
	struct pst_rec_hdr h = {.crc = 1, .magic = PST_REC_MAGIC, .index = 101, .term = 1,
				.data_len = DATA_LEN};
	memcpy(junk, &h, sizeof(h));
	h.index = 102;
	memcpy(junk + 144, &h, sizeof(h));
	int fd = open(path, O_WRONLY);
	cr_assert(eq(int, (int)pwrite(fd, junk, sizeof(junk), (off_t)off_of(101)),
		     (int)sizeof(junk)));
	close(fd);
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(lg), 100));
	const struct pst_log_repair *r = pst_log_repair_info(lg);
	cr_assert(eq(u64, r->repairs, 1));
	cr_assert(eq(u64, r->bytes, sizeof(junk)));
	cr_assert(eq(u64, r->first_index, 101));
	cr_assert(eq(u64, r->last_index, 102));
	cr_assert(eq(u64, r->synced_index, 100));
	char want[400];
	snprintf(want, sizeof(want), "torn tail repaired: %zu bytes cut from %s at offset "
		 "%" PRIu64 ", entries 101..102 (never synced: the checkpoint is at 100)",
		 sizeof(junk), path, off_of(101));
	cr_assert(strstr(r->text, want) != NULL, "'%s' lacks '%s'", r->text, want);
	cr_assert(eq(u64, pst_log_counters(lg)[PST_C_LOG_TORN_TAIL_BYTES], sizeof(junk)));
	cr_assert(eq(u64, pst_log_counters(lg)[PST_C_LOG_TORN_REPAIRS], 1));
	append(101, 110, 2);
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(lg), 110));
	cr_assert(eq(u64, pst_log_repair_info(lg)->repairs, 0));
	cr_assert(eq(str, (char *)pst_log_repair_info(lg)->text, ""));
}

/* Goal: without its checkpoint a log with segments does not open (which entries were
 * synced is unknown), naming the file and the way out; an empty ckpt.adopt takes the log
 * as it is once (a damaged tail is then cut as torn), and a checkpoint is written.
 * Method: 100 entries; delete the checkpoint; open; adopt; reopen. */
Test(pst_ckpt, missing_refused_unless_adopted)
{
	char path[128], adopt[128];
	struct pst_ckpt_rec r;
	log_of_100();
	ckpt_file(path, sizeof(path));
	cr_assert(eq(int, unlink(path), 0));
	cr_assert(eq(int, reopen(PST_SYNC_DATA), -EBADMSG));
	want_in_err(path);
	want_in_err("missing beside 1 segment file(s)");
	want_in_err("create an empty");
	snprintf(adopt, sizeof(adopt), "%s/" PST_CKPT_ADOPT_NAME, dir);
	FILE *f = fopen(adopt, "w");
	cr_assert(f != NULL);
	fclose(f);
	char seg[128];
	seg1(seg, sizeof(seg));
	file_flip(seg, off_of(100) + 50, 0x01); /* adopted: the damaged tail is cut as torn */
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(lg), 99));
	cr_assert(pst_log_repair_info(lg)->adopted);
	cr_assert(strstr(pst_log_repair_info(lg)->text, "adopted") != NULL);
	cr_assert(access(adopt, F_OK) != 0, "ckpt.adopt left behind");
	cr_assert(eq(int, pst_ckpt_load(dir, &r, err, sizeof(err)), 0), "%s", err);
	cr_assert(eq(u64, r.index, 99));
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	cr_assert(not(pst_log_repair_info(lg)->adopted));
}

/* Goal: a checkpoint whose newest slot is bad falls back to the other (an update torn by
 * a crash); one where neither slot checks is refused with the file named; a checkpoint
 * that names another term for the synced index is refused (not this log's checkpoint).
 * Method: damage slots of a closed 100-entry log; an old checkpoint over a log whose last
 * entry was replaced in a new term. */
Test(pst_ckpt, corrupt_slots_and_wrong_term)
{
	char path[128];
	struct pst_ckpt_rec r0, r1;
	log_of_100();
	ckpt_file(path, sizeof(path));
	int fd = open(path, O_RDONLY);
	cr_assert(eq(int, (int)pread(fd, &r0, sizeof(r0), 0), (int)sizeof(r0)));
	cr_assert(eq(int, (int)pread(fd, &r1, sizeof(r1), PST_CKPT_SLOT_STRIDE), (int)sizeof(r1)));
	close(fd);
	uint64_t newest = r1.seq > r0.seq ? PST_CKPT_SLOT_STRIDE : 0;
	file_flip(path, newest + 24, 0x01); /* its index */
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	cr_assert(eq(u64, pst_log_last_index(lg), 100));
	shut();
	file_flip(path, 24, 0x01);
	file_flip(path, PST_CKPT_SLOT_STRIDE + 24, 0x01);
	cr_assert(eq(int, reopen(PST_SYNC_DATA), -EBADMSG));
	want_in_err(path);
	want_in_err("corrupt checkpoint: neither slot checks");
	want_in_err(PST_CKPT_ADOPT_NAME);

	shut();
	test_rmdir(dir);
	cr_assert(eq(int, mkdir(dir, 0700), 0));
	log_of_100();
	uint8_t copy[2 * PST_CKPT_SLOT_STRIDE];
	FILE *f = fopen(path, "rb");
	size_t n = fread(copy, 1, sizeof(copy), f);
	fclose(f);
	cr_assert(eq(int, reopen(PST_SYNC_DATA), 0), "%s", err);
	cr_assert(eq(int, pst_log_truncate(lg, 100), 0));
	append(100, 100, 7);
	shut();
	f = fopen(path, "wb");
	cr_assert(eq(sz, fwrite(copy, 1, n, f), n));
	fclose(f);
	cr_assert(eq(int, reopen(PST_SYNC_DATA), -EBADMSG));
	want_in_err("entry 100 is in term 7");
	want_in_err("says it was synced in term 1");
}

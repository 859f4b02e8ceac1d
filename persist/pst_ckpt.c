/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The log's checkpoint file (docs/persist.md "The synced checkpoint"): the last index the
 * log has synced and that entry's term, so that open can tell a torn write past the last
 * fdatasync (repaired) from damage to an entry that was once reported durable (refused).
 *
 * Two 64-byte slots, in different 4 KiB pages, each with its own sequence number and CRC;
 * an update overwrites the older slot in place and the newest slot that checks wins. A torn
 * or lost update of one slot leaves the other whole, so one write never loses both.
 *
 * Updates are written after the segment's fdatasync returned and are synced at most once
 * per PST_CKPT_SYNC_NS (and on close, truncate, reset): the checkpoint is never ahead of
 * what is on stable storage, and behind it by at most that interval after a power loss
 * (not at all after a process crash: the page cache keeps the write).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"
#include "persist/pst_int.h"

static uint32_t
rec_crc(const struct pst_ckpt_rec *r)
{
	return pst_crc32c(0, r, offsetof(struct pst_ckpt_rec, crc));
}

static bool
rec_ok(const struct pst_ckpt_rec *r)
{
	return r->magic == PST_CKPT_MAGIC && r->version == PST_CKPT_VERSION &&
	       r->crc == rec_crc(r);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
path_of(char *out, size_t size, const char *dir, const char *name)
{
	snprintf(out, size, "%s/%s", dir, name);
}

int
pst_ckpt_load(const char *dir, struct pst_ckpt_rec *out, char *err, size_t err_size)
{
	char path[PATH_MAX];
	path_of(path, sizeof(path), dir, PST_CKPT_NAME);
	memset(out, 0, sizeof(*out));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;
		if (rc != -ENOENT)
			pst_errf(err, err_size, "%s: open: %s", path, strerror(errno));
		return rc;
	}
	struct pst_ckpt_rec r[2];
	bool ok[2];
	for (int i = 0; i < 2; i++) {
		int rc = pst_read_full(fd, &r[i], sizeof(r[i]), (uint64_t)i * PST_CKPT_SLOT_STRIDE);
		if (rc < 0 && rc != -EIO) {
			close(fd);
			pst_errf(err, err_size, "%s: read: %s", path, strerror(-rc));
			return rc;
		}
		ok[i] = rc == 0 && rec_ok(&r[i]);
	}
	close(fd);
	if (!ok[0] && !ok[1]) {
		pst_errf(err, err_size, "%s: corrupt checkpoint: neither slot checks", path);
		return -EBADMSG;
	}
	int pick = !ok[0] ? 1 : !ok[1] ? 0 : r[1].seq > r[0].seq;
	*out = r[pick];
	return 0;
}

static int
slot_write(int fd, uint64_t seq, uint64_t index, uint64_t term)
{
	struct pst_ckpt_rec r = {
		.magic = PST_CKPT_MAGIC,
		.version = PST_CKPT_VERSION,
		.seq = seq,
		.index = index,
		.term = term,
	};
	r.crc = rec_crc(&r);
	return pst_write_full(fd, &r, sizeof(r), (seq & 1) * PST_CKPT_SLOT_STRIDE);
}

int
pst_ckpt_create(struct pst_ckpt *c, const char *dir, uint64_t index, uint64_t term)
{
	char tmp[PATH_MAX], final[PATH_MAX];
	path_of(tmp, sizeof(tmp), dir, "." PST_CKPT_NAME ".tmp");
	path_of(final, sizeof(final), dir, PST_CKPT_NAME);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	/* Both slots the same: either one alone is the whole truth. */
	int rc = slot_write(fd, 2, index, term);
	if (rc == 0)
		rc = slot_write(fd, 1, index, term);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, final) < 0)
		rc = -errno;
	if (rc == 0)
		rc = pst_dir_sync(dir);
	if (rc < 0) {
		close(fd);
		unlink(tmp);
		return rc;
	}
	c->fd = fd;
	c->seq = 2;
	c->index = index;
	c->term = term;
	c->synced_ns = now_ns();
	return 0;
}

int
pst_ckpt_open(struct pst_ckpt *c, const char *dir, const struct pst_ckpt_rec *r)
{
	char path[PATH_MAX];
	path_of(path, sizeof(path), dir, PST_CKPT_NAME);
	memset(c, 0, sizeof(*c));
	c->fd = open(path, O_RDWR | O_CLOEXEC);
	if (c->fd < 0)
		return -errno;
	c->seq = r->seq;
	c->index = r->index;
	c->term = r->term;
	c->synced_ns = now_ns();
	return 0;
}

int
pst_ckpt_sync(struct pst_ckpt *c)
{
	if (c->fd < 0 || !c->dirty)
		return 0;
	if (fdatasync(c->fd) < 0)
		return -errno;
	c->dirty = false;
	c->synced_ns = now_ns();
	c->syncs++;
	return 0;
}

int
pst_ckpt_note(struct pst_ckpt *c, uint64_t index, uint64_t term, bool sync)
{
	CHECK(c->fd >= 0);
	if (index == c->index && term == c->term) {
		if (sync || (c->dirty && now_ns() - c->synced_ns >= PST_CKPT_SYNC_NS))
			return pst_ckpt_sync(c);
		return 0;
	}
	int rc = slot_write(c->fd, c->seq + 1, index, term);
	if (rc < 0)
		return rc;
	c->seq++;
	c->index = index;
	c->term = term;
	c->dirty = true;
	if (sync || now_ns() - c->synced_ns >= PST_CKPT_SYNC_NS)
		return pst_ckpt_sync(c);
	return 0;
}

void
pst_ckpt_close(struct pst_ckpt *c)
{
	if (c->fd < 0)
		return;
	(void)pst_ckpt_sync(c);
	close(c->fd);
	c->fd = -1;
}

int
pst_ckpt_prepare(const char *dir, uint32_t segments, struct pst_ckpt_rec *rec, bool *adopted,
		 char *err, size_t err_size)
{
	char path[PATH_MAX], adopt[PATH_MAX];
	path_of(path, sizeof(path), dir, PST_CKPT_NAME);
	path_of(adopt, sizeof(adopt), dir, PST_CKPT_ADOPT_NAME);
	memset(rec, 0, sizeof(*rec));
	if (access(adopt, F_OK) == 0) {
		*adopted = true; /* the operator's word: claim nothing */
		return 0;
	}
	int rc = pst_ckpt_load(dir, rec, err, err_size);
	if (rc == 0)
		return 0;
	memset(rec, 0, sizeof(*rec));
	if (segments == 0 && (rc == -ENOENT || rc == -EBADMSG))
		return 0; /* nothing to protect: a new log (or one emptied by a reset) */
	if (rc == -ENOENT) {
		pst_errf(err, err_size, "%s: missing beside %" PRIu32 " segment file(s): which "
			 "entries were synced is unknown; to take the log as it is, create an "
			 "empty %s (docs/persist.md \"The synced checkpoint\")", path, segments,
			 adopt);
		return -EBADMSG;
	}
	if (rc == -EBADMSG) {
		size_t len = err != NULL ? strlen(err) : 0;
		if (err != NULL && len < err_size)
			pst_errf(err + len, err_size - len, "; to take the log as it is, create an "
				 "empty %s (docs/persist.md \"The synced checkpoint\")", adopt);
	}
	return rc;
}

static bool
all_zero(const uint8_t *p, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/* What the bad record at off looks like, for the operator. */
void
pst_rec_describe(const uint8_t *map, uint64_t size, uint64_t off, char *out, size_t out_size)
{
	struct pst_rec_hdr h;
	uint64_t left = size - off;
	if (left < sizeof(h)) {
		snprintf(out, out_size, "%" PRIu64 " bytes where a 40-byte record header belongs",
			 left);
		return;
	}
	memcpy(&h, map + off, sizeof(h));
	if (h.magic != PST_REC_MAGIC) {
		if (all_zero(map + off, sizeof(h)))
			snprintf(out, out_size, "zeros where a record belongs");
		else
			snprintf(out, out_size, "no record (magic 0x%08" PRIx32 ")", h.magic);
		return;
	}
	if (h.data_len > PST_LOG_ENTRY_DATA_MAX) {
		snprintf(out, out_size, "a header (index %" PRIu64 ") with data_len %" PRIu32
			 " over the limit", h.index, h.data_len);
		return;
	}
	uint64_t rs = pst_rec_size(h.data_len);
	if (rs > left) {
		snprintf(out, out_size, "the record of index %" PRIu64 " (term %" PRIu64 ") cut "
			 "short: %" PRIu64 " of %" PRIu64 " bytes", h.index, h.term, left, rs);
		return;
	}
	snprintf(out, out_size, "the record of index %" PRIu64 " (term %" PRIu64 ") fails its "
		 "CRC (stored %08" PRIx32 ", computed %08" PRIx32 ")", h.index, h.term, h.crc,
		 pst_crc32c(0, map + off + 4, rs - 4));
}

/* The highest index a record header names in [off, size), at least first (a torn tail's
 * range for the operator: a partial record still names its index). */
uint64_t
pst_rec_cut_last(const uint8_t *map, uint64_t size, uint64_t off, uint64_t first)
{
	uint64_t last = first;
	for (uint64_t o = off; o + sizeof(struct pst_rec_hdr) <= size; o += 8) {
		struct pst_rec_hdr h;
		memcpy(&h, map + o, sizeof(h));
		if (h.magic == PST_REC_MAGIC && h.index > last && h.index - first < (1u << 24))
			last = h.index;
	}
	return last;
}


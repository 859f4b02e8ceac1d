/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Segmented append-only Raft log files (docs/persist.md "Log format").
 *
 * A segment is a 32-byte header followed by records (pst_rec_hdr, data, zero padding to 8),
 * each with its own CRC32C. Segments are named by their first index, so the directory listing
 * is the index of the log. The in-memory view is one offset per record, so reads by index are
 * one pread.
 *
 * Crash rules (the only ones a careful operator accepts):
 *  - A crash can tear only what was being written: the end of the last segment. On open a
 *    partial or CRC-bad record there, with no valid record after it, is cut off.
 *  - Anything else that does not check — a bad record followed by valid data, a bad record in
 *    a segment that is not the last, a gap or a step back in indices or terms — is corruption
 *    of data that was once acknowledged. Opening fails with -EBADMSG naming file and offset;
 *    nothing is silently dropped.
 *  - Durable mode: the checkpoint (pst_ckpt.c) names the last index synced. A tail that
 *    reaches down to it is not torn by a crash: it was synced, so it is damage and refused
 *    like the rest. Only what lies past it is cut as a torn tail.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/check.h"
#include "persist/pst_int.h"

/* Durable mode extends a segment with written zeros this much at a time, so an fdatasync
 * after an append within the extended part flushes data only, not the inode size (the
 * journal commit that otherwise doubles the cost of every sync; PostgreSQL pre-fills WAL
 * segments for the same reason). */
#define PREALLOC_SIZE (UINT64_C(1) << 20)

static const uint8_t zeros[1 << 16];

static bool
all_zero(const uint8_t *p, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != 0)
			return false;
	return true;
}

struct seg {
	uint64_t first_index; /* index of its first record (its name) */
	uint64_t last_index;  /* first_index - 1 when it holds no record */
	uint64_t size;        /* bytes of header and records (the logical end) */
	uint64_t file_size;   /* bytes in the file: size plus a zero-filled preallocated tail */
	uint64_t *offsets;    /* offset of each record, last - first + 1 of them */
	uint64_t offsets_cap; /* slots in offsets */
	int fd;               /* open read-write */
	char path[PATH_MAX];  /* full path */
};

struct pst_log {
	char dir[PST_DIR_MAX];     /* segment directory */
	uint64_t segment_size;     /* roll threshold */
	uint32_t sync;             /* enum pst_sync */
	struct seg *segs;          /* sorted by first_index, contiguous */
	uint32_t seg_count;        /* segments held */
	uint32_t seg_cap;          /* slots in segs */
	uint64_t next_index;       /* index of the next append */
	uint64_t last_term;        /* term of the last entry, 0 when empty */
	uint64_t durable_index;    /* last index known durable */
	uint8_t *wbuf;             /* batch assembly buffer */
	size_t wbuf_cap;           /* its size */
	bool ckpt_on;              /* durable mode: the checkpoint is kept */
	bool dir_unsynced;         /* a segment was created and the directory not synced since */
	int failed;                /* -errno: a failed batch could not be cut off; no appends */
	struct pst_ckpt ckpt;      /* the synced checkpoint */
	uint64_t synced;           /* open: the checkpoint's index (0: nothing claimed) */
	uint64_t synced_term;      /* ... and its term */
	char ckpt_path[PATH_MAX];  /* for messages */
	struct pst_log_repair repair; /* what open repaired */
	uint64_t counters[PST_C_COUNT];
};

static struct seg *
active(struct pst_log *log)
{
	return log->seg_count > 0 ? &log->segs[log->seg_count - 1] : NULL;
}

/* Room for `more` offsets after the ones held. 0 or -ENOMEM. */
static int
offsets_reserve(struct seg *s, uint64_t more)
{
	uint64_t need = s->last_index + 1 - s->first_index + more;
	if (need <= s->offsets_cap)
		return 0;
	uint64_t cap = s->offsets_cap ? s->offsets_cap : 1024;
	while (cap < need)
		cap *= 2;
	uint64_t *o = realloc(s->offsets, cap * sizeof(*o));
	if (o == NULL)
		return -ENOMEM;
	s->offsets = o;
	s->offsets_cap = cap;
	return 0;
}

static int
offsets_push(struct seg *s, uint64_t off)
{
	int rc = offsets_reserve(s, 1);
	if (rc < 0)
		return rc;
	s->offsets[s->last_index + 1 - s->first_index] = off;
	s->last_index++;
	return 0;
}

static void
seg_release(struct seg *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	free(s->offsets);
	s->offsets = NULL;
	s->offsets_cap = 0;
}

static int
segs_reserve(struct pst_log *log)
{
	if (log->seg_count < log->seg_cap)
		return 0;
	uint32_t cap = log->seg_cap ? log->seg_cap * 2 : 16;
	struct seg *s = realloc(log->segs, cap * sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	log->segs = s;
	log->seg_cap = cap;
	return 0;
}

static void
seg_hdr_fill(struct pst_seg_hdr *h, uint64_t first_index)
{
	memset(h, 0, sizeof(*h));
	h->magic = PST_SEG_MAGIC;
	h->version = PST_SEG_VERSION;
	h->first_index = first_index;
	h->crc = pst_crc32c(0, h, offsetof(struct pst_seg_hdr, crc));
}

static bool
seg_hdr_ok(const struct pst_seg_hdr *h, uint64_t first_index)
{
	return h->magic == PST_SEG_MAGIC && h->version == PST_SEG_VERSION &&
	       h->first_index == first_index &&
	       h->crc == pst_crc32c(0, h, offsetof(struct pst_seg_hdr, crc));
}

/* A record at off in map[0..size) that checks completely; its size in *rec_size. */
static bool
rec_ok(const uint8_t *map, uint64_t size, uint64_t off, struct pst_rec_hdr *h,
       uint64_t *rec_size)
{
	if (size - off < sizeof(*h))
		return false;
	memcpy(h, map + off, sizeof(*h));
	if (h->magic != PST_REC_MAGIC || h->data_len > PST_LOG_ENTRY_DATA_MAX)
		return false;
	uint64_t rs = pst_rec_size(h->data_len);
	if (rs > size - off)
		return false;
	if (h->crc != pst_crc32c(0, map + off + 4, rs - 4))
		return false;
	*rec_size = rs;
	return true;
}

/* Scan a mapped segment: record offsets, check continuity. On a bad record returns its
 * offset in *bad_off and 1; 0 when every byte checks; -errno / -EBADMSG otherwise. */
static int
seg_scan(struct pst_log *log, struct seg *s, const uint8_t *map, uint64_t *prev_term,
	 uint64_t *bad_off, char *err, size_t err_size)
{
	uint64_t off = sizeof(struct pst_seg_hdr);
	while (off < s->size) {
		struct pst_rec_hdr h;
		uint64_t rs;
		if (!rec_ok(map, s->size, off, &h, &rs)) {
			if (all_zero(map + off, s->size - off)) {
				s->size = off; /* the preallocated tail: the end of the records */
				return 0;
			}
			*bad_off = off;
			return 1;
		}
		if (h.index != s->last_index + 1) {
			pst_errf(err, err_size, "%s: offset %" PRIu64 ": index %" PRIu64
				 " where %" PRIu64 " was expected", s->path, off, h.index,
				 s->last_index + 1);
			return -EBADMSG;
		}
		if (h.term < *prev_term) {
			pst_errf(err, err_size, "%s: offset %" PRIu64 ": term %" PRIu64
				 " after term %" PRIu64 " (terms never go back)", s->path, off,
				 h.term, *prev_term);
			return -EBADMSG;
		}
		int rc = offsets_push(s, off);
		if (rc < 0)
			return rc;
		*prev_term = h.term;
		off += rs;
	}
	(void)log;
	return 0;
}

/* Is there a record that checks anywhere after off (8-byte steps)? */
static bool
valid_after(const uint8_t *map, uint64_t size, uint64_t off, uint64_t *found)
{
	for (uint64_t o = off + 8; o + sizeof(struct pst_rec_hdr) <= size; o += 8) {
		struct pst_rec_hdr h;
		uint64_t rs;
		if (rec_ok(map, size, o, &h, &rs)) {
			*found = o;
			return true;
		}
	}
	return false;
}

/* A torn tail (or a torn last segment) about to be cut: past the checkpoint, or refused
 * (-EBADMSG) since an entry at or below it was synced once. */
static int
torn_check(struct pst_log *log, const char *path, uint64_t off, uint64_t first_cut,
	   const char *what, char *err, size_t err_size)
{
	if (first_cut > log->synced)
		return 0;
	pst_errf(err, err_size, "%s: offset %" PRIu64 ": entry %" PRIu64 ": %s, but %s says "
		 "entries through %" PRIu64 " (term %" PRIu64 ") were synced: damage, not a "
		 "torn tail (docs/persist.md \"A damaged log\")", path, off, first_cut, what,
		 log->ckpt_path, log->synced, log->synced_term);
	return -EBADMSG;
}

/* Count a cut and say what it was, once per open (only the last segment is ever cut). */
static void
torn_note(struct pst_log *log, const char *path, uint64_t off, uint64_t bytes,
	  uint64_t first, uint64_t last)
{
	struct pst_log_repair *r = &log->repair;
	log->counters[PST_C_LOG_TORN_TAIL_BYTES] += bytes;
	log->counters[PST_C_LOG_TORN_REPAIRS]++;
	r->bytes += bytes;
	r->repairs++;
	r->first_index = first;
	r->last_index = last;
	r->synced_index = log->synced;
	pst_errf(r->text, sizeof(r->text), "torn tail repaired: %" PRIu64 " bytes cut from %s "
		 "at offset %" PRIu64 ", entries %" PRIu64 "..%" PRIu64 " (never synced: the "
		 "checkpoint is at %" PRIu64 ")%s", bytes, path, off, first, last, log->synced,
		 r->adopted ? "; the log had no checkpoint and was adopted" : "");
}

static int
name_parse(const char *name, uint64_t *first)
{
	size_t len = strlen(name);
	if (len != 24 || strcmp(name + 20, ".log") != 0)
		return -1;
	uint64_t v = 0;
	for (int i = 0; i < 20; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(name[i] - '0');
	}
	*first = v;
	return 0;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Open and validate one segment (i of n). */
static int
seg_load(struct pst_log *log, uint64_t first, bool last, uint64_t *prev_term, bool *drop,
	 char *err, size_t err_size)
{
	struct seg *s = &log->segs[log->seg_count];
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->first_index = first;
	s->last_index = first - 1;
	snprintf(s->path, sizeof(s->path), "%s/" PST_SEG_NAME_FMT, log->dir, first);
	*drop = false;

	s->fd = open(s->path, O_RDWR | O_CLOEXEC);
	if (s->fd < 0) {
		int rc = -errno;
		pst_errf(err, err_size, "%s: open: %s", s->path, strerror(errno));
		return rc;
	}
	struct stat st;
	if (fstat(s->fd, &st) < 0) {
		int rc = -errno;
		seg_release(s);
		return rc;
	}
	s->size = (uint64_t)st.st_size;
	s->file_size = s->size;
	if (s->size < sizeof(struct pst_seg_hdr)) {
		/* Torn while being created: only the last segment may be in this state. */
		if (last) {
			char what[64];
			snprintf(what, sizeof(what), "the segment header cut short (%" PRIu64
				 " bytes)", s->size);
			int rc = torn_check(log, s->path, 0, first, what, err, err_size);
			if (rc == 0) {
				*drop = true;
				torn_note(log, s->path, 0, s->size, first, first);
			}
			seg_release(s);
			return rc;
		}
		pst_errf(err, err_size, "%s: offset 0: segment header truncated (%" PRIu64
			 " bytes) in a segment that is not the last", s->path, s->size);
		seg_release(s);
		return -EBADMSG;
	}
	uint8_t *map = mmap(NULL, s->size, PROT_READ, MAP_PRIVATE, s->fd, 0);
	if (map == MAP_FAILED) {
		int rc = -errno;
		seg_release(s);
		return rc;
	}
	int rc = 0;
	struct pst_seg_hdr h;
	memcpy(&h, map, sizeof(h));
	uint64_t found_any = 0;
	if (!seg_hdr_ok(&h, first)) {
		/* The header goes out with the segment's first batch and is synced with it, so a
		 * bad header with no record that checks anywhere is a creation torn by a crash
		 * before anything was acknowledged. */
		if (last && !valid_after(map, s->size, 0, &found_any)) {
			rc = torn_check(log, s->path, 0, first, "a bad segment header", err,
					err_size);
			if (rc == 0) {
				uint64_t torn = s->size;
				while (torn > 0 && map[torn - 1] == 0)
					torn--;
				*drop = true;
				torn_note(log, s->path, 0, torn, first,
					  pst_rec_cut_last(map, s->size, sizeof(h), first));
			}
		} else {
			pst_errf(err, err_size, "%s: offset 0: bad segment header", s->path);
			rc = -EBADMSG;
		}
		goto out;
	}
	uint64_t bad = 0;
	rc = seg_scan(log, s, map, prev_term, &bad, err, err_size);
	if (rc == 1) {
		uint64_t found = 0;
		if (!last) {
			pst_errf(err, err_size, "%s: offset %" PRIu64 ": corrupt record in a "
				 "segment that is not the last", s->path, bad);
			rc = -EBADMSG;
		} else if (valid_after(map, s->size, bad, &found)) {
			pst_errf(err, err_size, "%s: offset %" PRIu64 ": corrupt record followed "
				 "by a valid one at offset %" PRIu64, s->path, bad, found);
			rc = -EBADMSG;
		} else {
			/* Torn tail: what a crash during the last write leaves. Cut it off, unless
			 * the checkpoint says it was synced. The preallocated zeros behind it are
			 * not torn data (counted before the cut: the mapping ends with the file). */
			char what[160];
			uint64_t cut_first = s->last_index + 1;
			pst_rec_describe(map, s->size, bad, what, sizeof(what));
			rc = torn_check(log, s->path, bad, cut_first, what, err, err_size);
			if (rc < 0)
				goto out;
			uint64_t torn = s->size - bad;
			while (torn > 0 && map[bad + torn - 1] == 0)
				torn--;
			uint64_t cut_last = pst_rec_cut_last(map, s->size, bad, cut_first);
			if (ftruncate(s->fd, (off_t)bad) < 0 || fdatasync(s->fd) < 0) {
				rc = -errno;
				pst_errf(err, err_size, "%s: truncate torn tail at %" PRIu64 ": %s",
					 s->path, bad, strerror(errno));
			} else {
				torn_note(log, s->path, bad, torn, cut_first, cut_last);
				s->size = bad;
				s->file_size = bad;
				rc = 0;
			}
		}
	}
out:
	munmap(map, st.st_size);
	if (rc < 0 || *drop) {
		seg_release(s);
		return rc;
	}
	log->seg_count++;
	return 0;
}

/* Durable mode, before any segment is read: what the checkpoint says was synced
 * (pst_ckpt_prepare). Nothing is touched when it refuses. */
static int
ckpt_prepare(struct pst_log *log, uint32_t segments, struct pst_ckpt_rec *rec, char *err,
	     size_t err_size)
{
	snprintf(log->ckpt_path, sizeof(log->ckpt_path), "%s/" PST_CKPT_NAME, log->dir);
	log->ckpt_on = true;
	log->ckpt.fd = -1;
	return pst_ckpt_prepare(log->dir, segments, rec, &log->repair.adopted, err, err_size);
}

/* Durable mode, after the scan: every entry the checkpoint says was synced is there, in
 * its term; then what survived is synced (a process crash can leave written, unsynced
 * records in the page cache) and the checkpoint says so. */
static int
ckpt_finish(struct pst_log *log, uint64_t first_named, bool segments, bool loaded,
	    const struct pst_ckpt_rec *rec, char *err, size_t err_size)
{
	uint64_t last = log->next_index - 1;
	uint64_t first = pst_log_first_index(log);
	uint64_t s = log->synced;
	if (s > 0 && (!segments || (s >= first_named && s > last))) {
		pst_errf(err, err_size, "%s: the log ends at index %" PRIu64 "%s, but %s says "
			 "entries through %" PRIu64 " (term %" PRIu64 ") were synced: entries "
			 "%" PRIu64 "..%" PRIu64 " are missing (docs/persist.md \"A damaged log\")",
			 log->dir, last, segments ? "" : " (no segment file)", log->ckpt_path, s,
			 log->synced_term, last + 1, s);
		return -EBADMSG;
	}
	if (s > 0 && s >= first && s <= last) {
		uint64_t term = 0;
		int rc = pst_log_term(log, s, &term);
		if (rc < 0)
			return rc;
		if (term != log->synced_term) {
			pst_errf(err, err_size, "%s: entry %" PRIu64 " is in term %" PRIu64 ", but %s "
				 "says it was synced in term %" PRIu64 ": the log is not the one the "
				 "checkpoint was written for (docs/persist.md \"A damaged log\")",
				 log->dir, s, term, log->ckpt_path, log->synced_term);
			return -EBADMSG;
		}
	}
	struct seg *a = active(log);
	if (a != NULL) {
		if (fdatasync(a->fd) < 0)
			return -errno;
		log->counters[PST_C_LOG_SYNCS]++;
	}
	int rc = loaded && !log->repair.adopted ? pst_ckpt_open(&log->ckpt, log->dir, rec)
						: pst_ckpt_create(&log->ckpt, log->dir, last,
								  log->last_term);
	if (rc == 0)
		rc = pst_ckpt_note(&log->ckpt, last, log->last_term, true);
	if (rc < 0) {
		pst_errf(err, err_size, "%s: %s", log->ckpt_path, strerror(-rc));
		return rc;
	}
	log->counters[PST_C_LOG_CKPT_SYNCS] = log->ckpt.syncs;
	if (log->repair.adopted) {
		char adopt[PATH_MAX];
		snprintf(adopt, sizeof(adopt), "%s/" PST_CKPT_ADOPT_NAME, log->dir);
		if (unlink(adopt) < 0 && errno != ENOENT)
			return -errno;
		(void)pst_dir_sync(log->dir);
		if (log->repair.text[0] == '\0')
			pst_errf(log->repair.text, sizeof(log->repair.text), "%s: no checkpoint: "
				 "the log (entries %" PRIu64 "..%" PRIu64 ") adopted as it is (%s)",
				 log->dir, first, last, PST_CKPT_ADOPT_NAME);
	}
	return 0;
}

int
pst_log_open(struct pst_log **out, const struct pst_log_config *cfg, char *err,
	     size_t err_size)
{
	CHECK(out != NULL && cfg != NULL && cfg->dir != NULL);
	if (cfg->sync != PST_SYNC_NONE && cfg->sync != PST_SYNC_DATA)
		return -EINVAL;
	if (strlen(cfg->dir) >= PST_DIR_MAX)
		return -ENAMETOOLONG;
	int rc;
	uint64_t *firsts = NULL;
	uint32_t n = 0, cap = 0;
	DIR *d = NULL;

	struct pst_log *log = calloc(1, sizeof(*log));
	if (log == NULL)
		return -ENOMEM;
	snprintf(log->dir, sizeof(log->dir), "%s", cfg->dir);
	log->segment_size = cfg->segment_size ? cfg->segment_size : PST_LOG_SEGMENT_SIZE_DEFAULT;
	log->sync = cfg->sync;
	log->next_index = 1;

	rc = pst_dir_make(log->dir);
	if (rc < 0) {
		pst_errf(err, err_size, "%s: mkdir: %s", log->dir, strerror(-rc));
		goto fail_dir;
	}
	d = opendir(log->dir);
	if (d == NULL) {
		rc = -errno;
		pst_errf(err, err_size, "%s: opendir: %s", log->dir, strerror(errno));
		goto fail_dir;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		uint64_t first;
		if (name_parse(de->d_name, &first) < 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			uint64_t *f = realloc(firsts, cap * sizeof(*f));
			if (f == NULL) {
				rc = -ENOMEM;
				goto fail_list;
			}
			firsts = f;
		}
		firsts[n++] = first;
	}
	closedir(d);
	d = NULL;
	if (n > 0)
		qsort(firsts, n, sizeof(*firsts), cmp_u64);
	struct pst_ckpt_rec rec = { 0 };
	bool loaded = false;
	if (log->sync == PST_SYNC_DATA) {
		rc = ckpt_prepare(log, n, &rec, err, err_size);
		if (rc < 0)
			goto fail_segs;
		loaded = rec.magic == PST_CKPT_MAGIC;
		log->synced = rec.index;
		log->synced_term = rec.term;
	}

	uint64_t prev_term = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (firsts[i] == 0) {
			pst_errf(err, err_size, "%s: segment named index 0", log->dir);
			rc = -EBADMSG;
			goto fail_segs;
		}
		rc = segs_reserve(log);
		if (rc < 0)
			goto fail_segs;
		if (log->seg_count > 0) {
			struct seg *p = active(log);
			if (firsts[i] != p->last_index + 1) {
				pst_errf(err, err_size, "%s/" PST_SEG_NAME_FMT ": offset 0: starts at "
					 "%" PRIu64 " but the previous segment ends at %" PRIu64,
					 log->dir, firsts[i], firsts[i], p->last_index);
				rc = -EBADMSG;
				goto fail_segs;
			}
		}
		bool drop;
		rc = seg_load(log, firsts[i], i + 1 == n, &prev_term, &drop, err, err_size);
		if (rc < 0)
			goto fail_segs;
		if (drop) {
			char path[PATH_MAX];
			snprintf(path, sizeof(path), "%s/" PST_SEG_NAME_FMT, log->dir, firsts[i]);
			if (unlink(path) < 0) {
				rc = -errno;
				goto fail_segs;
			}
			pst_dir_sync(log->dir);
		}
	}
	if (log->seg_count > 0) {
		struct seg *a = active(log);
		log->next_index = a->last_index + 1;
		log->last_term = prev_term;
	}
	if (log->ckpt_on) {
		rc = ckpt_finish(log, n > 0 ? firsts[0] : 0, n > 0, loaded, &rec, err, err_size);
		if (rc < 0)
			goto fail_segs;
	}
	log->durable_index = log->next_index - 1;
	free(firsts);
	*out = log;
	return 0;

fail_segs:
	for (uint32_t i = 0; i < log->seg_count; i++)
		seg_release(&log->segs[i]);
	free(log->segs);
	if (log->ckpt_on && log->ckpt.fd >= 0)
		close(log->ckpt.fd);
fail_list:
	if (d != NULL)
		closedir(d);
	free(firsts);
fail_dir:
	free(log);
	return rc;
}

void
pst_log_close(struct pst_log *log)
{
	if (log == NULL)
		return;
	for (uint32_t i = 0; i < log->seg_count; i++)
		seg_release(&log->segs[i]);
	if (log->ckpt_on)
		pst_ckpt_close(&log->ckpt);
	free(log->segs);
	free(log->wbuf);
	free(log);
}

const struct pst_log_repair *
pst_log_repair_info(const struct pst_log *log)
{
	return &log->repair;
}

/* The batch up to durable_index is synced: say so in the checkpoint (no fdatasync of its
 * own but once a second: docs/persist.md "The synced checkpoint"). A failed update leaves
 * it behind, which is safe; it is counted. */
static void
ckpt_synced(struct pst_log *log)
{
	if (!log->ckpt_on)
		return;
	if (pst_ckpt_note(&log->ckpt, log->durable_index, log->last_term, false) < 0)
		log->counters[PST_C_LOG_CKPT_ERRORS]++;
	log->counters[PST_C_LOG_CKPT_SYNCS] = log->ckpt.syncs;
}

/* Entries are about to leave the log: the checkpoint must not name one of them, synced
 * before anything is removed (else a crash in between reads as lost synced entries). */
static int
ckpt_lower(struct pst_log *log, uint64_t index, uint64_t term)
{
	if (!log->ckpt_on || log->ckpt.index <= index)
		return 0;
	int rc = pst_ckpt_note(&log->ckpt, index, term, true);
	log->counters[PST_C_LOG_CKPT_SYNCS] = log->ckpt.syncs;
	return rc;
}

uint64_t
pst_log_first_index(const struct pst_log *log)
{
	return log->seg_count > 0 ? log->segs[0].first_index : log->next_index;
}

uint64_t
pst_log_last_index(const struct pst_log *log)
{
	return log->next_index - 1;
}

uint64_t
pst_log_last_term(const struct pst_log *log)
{
	return log->last_term;
}

uint64_t
pst_log_durable_index(const struct pst_log *log)
{
	return log->durable_index;
}

const uint64_t *
pst_log_counters(const struct pst_log *log)
{
	return log->counters;
}

/* Create the segment that starts at first_index; its header goes out with the first batch. */
static int
seg_create(struct pst_log *log, uint64_t first_index)
{
	int rc = segs_reserve(log);
	if (rc < 0)
		return rc;
	struct seg *s = &log->segs[log->seg_count];
	memset(s, 0, sizeof(*s));
	s->first_index = first_index;
	s->last_index = first_index - 1;
	s->size = 0;
	snprintf(s->path, sizeof(s->path), "%s/" PST_SEG_NAME_FMT, log->dir, first_index);
	s->fd = open(s->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (s->fd < 0)
		return -errno;
	log->seg_count++;
	log->counters[PST_C_LOG_SEGMENTS_CREATED]++;
	return 0;
}

static int
wbuf_reserve(struct pst_log *log, size_t need)
{
	if (need <= log->wbuf_cap)
		return 0;
	size_t cap = log->wbuf_cap ? log->wbuf_cap : 1u << 16;
	while (cap < need)
		cap *= 2;
	uint8_t *b = realloc(log->wbuf, cap);
	if (b == NULL)
		return -ENOMEM;
	log->wbuf = b;
	log->wbuf_cap = cap;
	return 0;
}

int
pst_log_append(struct pst_log *log, const struct pst_entry *entries, uint32_t count)
{
	CHECK(log != NULL && entries != NULL);
	CHECK(count > 0);
	if (log->failed != 0)
		return log->failed;
	uint64_t total = 0;
	for (uint32_t i = 0; i < count; i++) {
		/* Raft appends are contiguous; anything else is a caller bug. */
		CHECK(entries[i].index == log->next_index + i);
		CHECK(entries[i].data_len <= PST_LOG_ENTRY_DATA_MAX);
		CHECK(entries[i].data_len == 0 || entries[i].data != NULL);
		total += pst_rec_size(entries[i].data_len);
	}

	struct seg *s = active(log);
	if (s == NULL || (s->last_index >= s->first_index &&
			  s->size + total > log->segment_size)) {
		/* Roll: the previous segment is complete (synced already in durable mode); its
		 * preallocated tail goes first, so only the last segment ever has one. */
		if (s != NULL && s->file_size > s->size) {
			if (ftruncate(s->fd, (off_t)s->size) < 0 ||
			    (log->sync == PST_SYNC_DATA && fdatasync(s->fd) < 0))
				return -errno;
			s->file_size = s->size;
		}
		int rc = seg_create(log, log->next_index);
		if (rc < 0)
			return rc;
		s = active(log);
		/* Its name is durable once the directory is synced: after the batch's sync,
		 * in this append or (if that fails) the next. */
		log->dir_unsynced = log->sync == PST_SYNC_DATA;
	}
	size_t hdr_len = s->size == 0 ? sizeof(struct pst_seg_hdr) : 0;
	int rc = wbuf_reserve(log, hdr_len + total);
	if (rc == 0)
		rc = offsets_reserve(s, count); /* after the write nothing may fail but the sync */
	if (rc < 0)
		return rc;
	uint8_t *p = log->wbuf;
	if (hdr_len) {
		seg_hdr_fill((struct pst_seg_hdr *)(void *)p, s->first_index);
		p += hdr_len;
	}
	for (uint32_t i = 0; i < count; i++) {
		const struct pst_entry *e = &entries[i];
		struct pst_rec_hdr h = {
			.magic = PST_REC_MAGIC,
			.index = e->index,
			.term = e->term,
			.time_ns = e->time_ns,
			.kind = e->kind,
			.data_len = e->data_len,
		};
		uint64_t rs = pst_rec_size(e->data_len);
		memcpy(p, &h, sizeof(h));
		if (e->data_len)
			memcpy(p + sizeof(h), e->data, e->data_len);
		memset(p + sizeof(h) + e->data_len, 0, rs - sizeof(h) - e->data_len);
		h.crc = pst_crc32c(0, p + 4, rs - 4);
		memcpy(p, &h.crc, 4);
		p += rs;
	}
	uint64_t base = s->size;
	uint64_t end = base + hdr_len + total;
	rc = pst_write_full(s->fd, log->wbuf, hdr_len + total, base);
	if (rc == 0 && log->sync == PST_SYNC_DATA && end > s->file_size) {
		/* Extend with written zeros; this batch's fdatasync makes the new size durable
		 * once, the next batches up to it sync data only. */
		uint64_t grown = (end + PREALLOC_SIZE - 1) / PREALLOC_SIZE * PREALLOC_SIZE;
		for (uint64_t at = end; rc == 0 && at < grown;) {
			uint64_t n = grown - at < sizeof(zeros) ? grown - at : sizeof(zeros);
			rc = pst_write_full(s->fd, zeros, n, at);
			at += n;
		}
		if (rc == 0)
			s->file_size = grown;
	}
	if (rc < 0) {
		/* Cut whatever part reached the file so the next batch starts clean. */
		if (ftruncate(s->fd, (off_t)base) < 0) {
			/* The torn tail is repaired on the next open. */
		}
		s->file_size = base;
		return rc;
	}
	if (end > s->file_size)
		s->file_size = end;
	if (log->sync == PST_SYNC_DATA) {
		rc = fdatasync(s->fd) < 0 ? -errno : 0;
		if (rc == 0 && log->dir_unsynced) {
			rc = pst_dir_sync(log->dir);
			log->dir_unsynced = rc < 0;
		}
		if (rc < 0) {
			/* What reached the disk is unknown (after a failed fdatasync the kernel
			 * may have dropped the pages and will not say so again): none of the batch
			 * counts, and its records leave the file, so no shorter batch written
			 * later can leave one of them behind it. The caller writes again from
			 * its own copy and the next sync covers it. A file that cannot even be
			 * cut takes no more appends (log->failed) until it is opened again. */
			log->counters[PST_C_LOG_SYNC_FAILED]++;
			if (ftruncate(s->fd, (off_t)base) == 0)
				s->file_size = base;
			else
				log->failed = -errno;
			return rc;
		}
		log->counters[PST_C_LOG_SYNCS]++;
	}
	/* Every record is in the file: remember where (the room was reserved above). */
	uint64_t off = base + hdr_len;
	for (uint32_t i = 0; i < count; i++) {
		s->offsets[s->last_index + 1 - s->first_index] = off;
		s->last_index++;
		off += pst_rec_size(entries[i].data_len);
	}
	s->size = off;
	log->next_index += count;
	log->last_term = entries[count - 1].term;
	log->counters[PST_C_LOG_BATCHES]++;
	log->counters[PST_C_LOG_ENTRIES] += count;
	log->counters[PST_C_LOG_BYTES] += hdr_len + total;
	log->durable_index = log->next_index - 1;
	ckpt_synced(log);
	return 0;
}

int
pst_log_sync(struct pst_log *log)
{
	CHECK(log != NULL);
	struct seg *s = active(log);
	if (log->sync != PST_SYNC_DATA || s == NULL || log->durable_index == log->next_index - 1)
		return 0;
	if (fdatasync(s->fd) < 0)
		return -errno;
	log->counters[PST_C_LOG_SYNCS]++;
	log->durable_index = log->next_index - 1;
	ckpt_synced(log);
	return 0;
}

/* The segment holding index, or NULL. */
static struct seg *
seg_find(struct pst_log *log, uint64_t index)
{
	uint32_t lo = 0, hi = log->seg_count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		struct seg *s = &log->segs[mid];
		if (index < s->first_index)
			hi = mid;
		else if (index > s->last_index)
			lo = mid + 1;
		else
			return s;
	}
	return NULL;
}

static uint64_t
rec_end(const struct seg *s, uint64_t index)
{
	return index == s->last_index ? s->size : s->offsets[index + 1 - s->first_index];
}

int
pst_log_read(struct pst_log *log, uint64_t index, struct pst_entry *out, uint32_t max,
	     void *buf, size_t buf_size)
{
	CHECK(log != NULL && out != NULL && buf != NULL);
	CHECK(((uintptr_t)buf & 7u) == 0);
	if (max == 0)
		return 0;
	struct seg *s = seg_find(log, index);
	if (s == NULL)
		return -ENOENT;
	uint64_t start = s->offsets[index - s->first_index];
	uint64_t end = start;
	uint32_t n = 0;
	for (uint64_t i = index; i <= s->last_index && n < max; i++, n++) {
		uint64_t e = rec_end(s, i);
		if (e - start > buf_size)
			break;
		end = e;
	}
	if (n == 0)
		return -ENOBUFS;
	int rc = pst_read_full(s->fd, buf, end - start, start);
	if (rc < 0)
		return rc;
	const uint8_t *p = buf;
	for (uint32_t i = 0; i < n; i++) {
		struct pst_rec_hdr h;
		uint64_t rs;
		uint64_t off = s->offsets[index + i - s->first_index] - start;
		if (!rec_ok(p, end - start, off, &h, &rs) || h.index != index + i)
			return -EBADMSG;
		out[i] = (struct pst_entry){
			.index = h.index,
			.term = h.term,
			.time_ns = h.time_ns,
			.kind = h.kind,
			.data_len = h.data_len,
			.data = p + off + sizeof(h),
		};
	}
	log->counters[PST_C_LOG_READ_ENTRIES] += n;
	return (int)n;
}

int
pst_log_term(struct pst_log *log, uint64_t index, uint64_t *term)
{
	CHECK(log != NULL && term != NULL);
	struct seg *s = seg_find(log, index);
	if (s == NULL)
		return -ENOENT;
	struct pst_rec_hdr h;
	int rc = pst_read_full(s->fd, &h, sizeof(h), s->offsets[index - s->first_index]);
	if (rc < 0)
		return rc;
	if (h.magic != PST_REC_MAGIC || h.index != index)
		return -EBADMSG;
	*term = h.term;
	return 0;
}

static int
seg_unlink_last(struct pst_log *log)
{
	struct seg *s = active(log);
	if (unlink(s->path) < 0)
		return -errno;
	seg_release(s);
	log->seg_count--;
	log->counters[PST_C_LOG_SEGMENTS_REMOVED]++;
	return 0;
}

int
pst_log_truncate(struct pst_log *log, uint64_t index)
{
	CHECK(log != NULL);
	CHECK(index >= pst_log_first_index(log));
	if (index >= log->next_index)
		return 0;
	uint64_t removed = log->next_index - index;
	bool unlinked = false;
	int rc;
	if (log->ckpt_on && log->ckpt.index >= index) {
		uint64_t term = 0;
		if (index - 1 >= pst_log_first_index(log) && index > 1 &&
		    pst_log_term(log, index - 1, &term) == 0)
			rc = ckpt_lower(log, index - 1, term);
		else
			rc = ckpt_lower(log, 0, 0); /* nothing held below index: claim nothing */
		if (rc < 0)
			return rc;
	}
	/* Whole segments at or after index go; the first segment is kept (header only). */
	while (log->seg_count > 1 && active(log)->first_index >= index) {
		rc = seg_unlink_last(log);
		if (rc < 0)
			return rc;
		unlinked = true;
	}
	struct seg *s = active(log);
	uint64_t cut = index > s->last_index ? s->size
		     : index == s->first_index ? sizeof(struct pst_seg_hdr)
					       : s->offsets[index - s->first_index];
	if (cut < s->file_size) {
		if (ftruncate(s->fd, (off_t)cut) < 0 || fdatasync(s->fd) < 0)
			return -errno;
		s->size = cut < s->size ? cut : s->size;
		s->file_size = cut;
		s->last_index = index - 1 < s->last_index ? index - 1 : s->last_index;
	}
	if (unlinked) {
		rc = pst_dir_sync(log->dir);
		if (rc < 0)
			return rc;
	}
	log->next_index = index;
	if (log->durable_index > index - 1)
		log->durable_index = index - 1;
	log->last_term = 0;
	if (index - 1 >= pst_log_first_index(log) && index > 1) {
		rc = pst_log_term(log, index - 1, &log->last_term);
		if (rc < 0)
			return rc;
	}
	log->counters[PST_C_LOG_TRUNCATED_ENTRIES] += removed;
	return 0;
}

int
pst_log_compact(struct pst_log *log, uint64_t index)
{
	CHECK(log != NULL);
	uint32_t drop = 0;
	while (drop + 1 < log->seg_count && log->segs[drop].last_index <= index)
		drop++;
	for (uint32_t i = 0; i < drop; i++) {
		if (unlink(log->segs[i].path) < 0 && errno != ENOENT) {
			int rc = -errno;
			/* Keep the ones not yet removed; the log stays consistent. */
			for (uint32_t j = 0; j < i; j++)
				seg_release(&log->segs[j]);
			memmove(log->segs, log->segs + i, (log->seg_count - i) * sizeof(*log->segs));
			log->seg_count -= i;
			return rc;
		}
		seg_release(&log->segs[i]);
		log->counters[PST_C_LOG_SEGMENTS_REMOVED]++;
	}
	if (drop > 0) {
		memmove(log->segs, log->segs + drop, (log->seg_count - drop) * sizeof(*log->segs));
		log->seg_count -= drop;
		int rc = pst_dir_sync(log->dir);
		if (rc < 0)
			return rc;
	}
	return (int)drop;
}

int
pst_log_reset(struct pst_log *log, uint64_t next_index)
{
	CHECK(log != NULL);
	CHECK(next_index >= 1);
	int rc0 = ckpt_lower(log, 0, 0);
	if (rc0 < 0)
		return rc0;
	while (log->seg_count > 0) {
		int rc = seg_unlink_last(log);
		if (rc < 0)
			return rc;
	}
	int rc = pst_dir_sync(log->dir);
	if (rc < 0)
		return rc;
	log->next_index = next_index;
	log->durable_index = next_index - 1;
	log->last_term = 0;
	return 0;
}

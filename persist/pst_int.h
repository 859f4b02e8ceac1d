/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to persist/ and its tests: on-disk layouts and file helpers.
 */
#ifndef OMSD_PERSIST_PST_INT_H
#define OMSD_PERSIST_PST_INT_H

#include <assert.h>
#include <stdbool.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "persist/persist.h"

/* ---- log segment layout (docs/persist.md) ---- */

#define PST_SEG_MAGIC UINT64_C(0x31474f4c44534d4f) /* "OMSDLOG1" little-endian */
#define PST_SEG_VERSION 1u
#define PST_REC_MAGIC UINT32_C(0x45545350)         /* "PSTE" */
#define PST_SEG_NAME_FMT "%020" PRIu64 ".log"      /* named by its first index */

/* The first 32 bytes of a segment. */
struct pst_seg_hdr {
	uint64_t magic;       /* PST_SEG_MAGIC */
	uint32_t version;     /* PST_SEG_VERSION */
	uint32_t reserved;    /* zero */
	uint64_t first_index; /* index of its first record (= the name) */
	uint32_t reserved2;   /* zero */
	uint32_t crc;         /* CRC32C of the 28 bytes before */
};
static_assert(sizeof(struct pst_seg_hdr) == 32, "pst_seg_hdr");

/* Each record: this header, data_len bytes, zero padding to a multiple of 8. */
struct pst_rec_hdr {
	uint32_t crc;      /* CRC32C of everything after this field up to the padding end */
	uint32_t magic;    /* PST_REC_MAGIC */
	uint64_t index;
	uint64_t term;
	uint64_t time_ns;
	uint32_t kind;
	uint32_t data_len;
};
static_assert(sizeof(struct pst_rec_hdr) == 40, "pst_rec_hdr");

static inline uint64_t
pst_rec_size(uint32_t data_len)
{
	return sizeof(struct pst_rec_hdr) + (((uint64_t)data_len + 7u) & ~UINT64_C(7));
}

/* ---- the log's synced checkpoint (pst_ckpt.c, docs/persist.md) ---- */

#define PST_CKPT_NAME "ckpt"                       /* in the log directory */
#define PST_CKPT_ADOPT_NAME "ckpt.adopt"           /* operator: adopt a log without one */
#define PST_CKPT_MAGIC UINT64_C(0x31504b4344534d4f) /* "OMSDCKP1" */
#define PST_CKPT_VERSION 1u
#define PST_CKPT_SLOT_STRIDE 4096u                 /* slot k at k * 4096: its own page */
#define PST_CKPT_SYNC_NS (UINT64_C(1000) * 1000000u) /* an update is synced this soon */

/* One slot: the last index the log had synced when it was written, and that entry's term
 * (index 0: nothing claimed). The slot with the higher seq that checks is the checkpoint. */
struct pst_ckpt_rec {
	uint64_t magic;    /* PST_CKPT_MAGIC */
	uint32_t version;  /* PST_CKPT_VERSION */
	uint32_t reserved; /* zero */
	uint64_t seq;      /* update number; slot seq & 1 */
	uint64_t index;    /* synced through this index */
	uint64_t term;     /* the term of that entry */
	uint32_t reserved2;/* zero */
	uint32_t crc;      /* CRC32C of the 44 bytes before */
};
static_assert(sizeof(struct pst_ckpt_rec) == 48, "pst_ckpt_rec");

struct pst_ckpt {
	int fd;               /* open read-write; -1: none */
	bool dirty;           /* written since the last sync */
	uint64_t seq;         /* of the newest slot */
	uint64_t index, term; /* what the newest slot says */
	uint64_t synced_ns;   /* CLOCK_MONOTONIC of the last sync */
	uint64_t syncs;       /* fdatasync calls */
};

/* Read dir/ckpt: 0 and the newest slot that checks, -ENOENT (no file), -EBADMSG (neither
 * slot checks; err names the file), or -errno. */
int pst_ckpt_load(const char *dir, struct pst_ckpt_rec *out, char *err, size_t err_size);
/* Create dir/ckpt atomically (temp, fsync, rename, directory fsync) and keep it open. */
int pst_ckpt_create(struct pst_ckpt *c, const char *dir, uint64_t index, uint64_t term);
/* Open the existing dir/ckpt for updates, r being what pst_ckpt_load returned. */
int pst_ckpt_open(struct pst_ckpt *c, const char *dir, const struct pst_ckpt_rec *r);
/* Record that index (term) is synced: overwrite the older slot; fdatasync when sync is set
 * or the last sync is PST_CKPT_SYNC_NS old. Call only after the entries are synced. */
int pst_ckpt_note(struct pst_ckpt *c, uint64_t index, uint64_t term, bool sync);
int pst_ckpt_sync(struct pst_ckpt *c); /* fdatasync if written since the last one */
void pst_ckpt_close(struct pst_ckpt *c); /* sync and close */
/* Open: the checkpoint beside `segments` segment files, in rec (zeroed when none counts).
 * An empty file ckpt.adopt there sets *adopted (claim nothing). -EBADMSG with err when
 * it is missing or corrupt beside segment files; 0 when there are none (a new log). */
int pst_ckpt_prepare(const char *dir, uint32_t segments, struct pst_ckpt_rec *rec, bool *adopted,
		     char *err, size_t err_size);
/* For messages: what the bad record at off in map[0..size) looks like. */
void pst_rec_describe(const uint8_t *map, uint64_t size, uint64_t off, char *out,
		      size_t out_size);
/* The highest index a record header names in map[off..size), at least first. */
uint64_t pst_rec_cut_last(const uint8_t *map, uint64_t size, uint64_t off, uint64_t first);

/* ---- snapshot layout ---- */

#define PST_SNAP_MAGIC UINT64_C(0x31504e5344534d4f) /* "OMSDSNP1" */
#define PST_SNAP_VERSION 1u
#define PST_SNAP_NAME_FMT "snap-%020" PRIu64 "-%020" PRIu64 ".snap" /* index, term */
#define PST_SNAP_TMP_PREFIX ".tmp-snap-"

struct pst_snap_hdr {
	uint64_t magic;        /* PST_SNAP_MAGIC */
	uint32_t version;      /* PST_SNAP_VERSION */
	uint32_t reserved;     /* zero */
	uint64_t last_index;
	uint64_t last_term;
	uint64_t last_time_ns;
	uint64_t length;       /* data bytes after the header */
	uint32_t data_crc;     /* CRC32C of the data */
	uint32_t hdr_crc;      /* CRC32C of the 52 bytes before */
};
static_assert(sizeof(struct pst_snap_hdr) == 56, "pst_snap_hdr");

/* ---- file helpers (pst_file.c) ---- */

#define PST_DIR_MAX (PATH_MAX - 128) /* a directory name leaves room for a file name */

/* fsync a directory so a create, rename or unlink in it is durable. 0 or -errno. */
int pst_dir_sync(const char *dir);
/* mkdir -p for one level (the parent must exist); EEXIST is fine. 0 or -errno. */
int pst_dir_make(const char *dir);
/* write()/pwrite() the whole buffer, retrying short writes and EINTR. 0 or -errno. */
int pst_write_full(int fd, const void *buf, size_t len, uint64_t offset);
/* pread() the whole buffer. 0, -EIO on a short read (EOF), or -errno. */
int pst_read_full(int fd, void *buf, size_t len, uint64_t offset);
/* Format into err when it is non-NULL. */
void pst_errf(char *err, size_t err_size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file log's writer (docs/appliance.md "Durability"): a shard lcore hands what its file
 * log must do — entries to append, a truncation, a compaction, a reset behind an installed
 * snapshot — to the writer through a single-producer single-consumer byte ring of copies,
 * in the order consensus did them to the memory log. The writer (the [persister] lcore, or
 * the shard lcore itself when the node has none) applies them to the pst_log, one append
 * and one fdatasync per drain (group commit), and publishes the synced (index, term) back,
 * which the shard reports to consensus. The Raft hard state (term, vote) goes the same way,
 * in order with the entries, so an entry of a term is never on disk before that term is
 * (app_logw_push_vote). The shard lcore never waits for the disk when a persister writes.
 *
 * No DPDK here (unit-tested alone): the ring is plain memory and C11 atomics; the shard
 * lcore is the one producer, one writer the one consumer.
 */
#ifndef OMSD_APP_LOGW_H
#define OMSD_APP_LOGW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app/app_say.h"

struct pst_log;
struct wire_entry_hdr;

#define APP_LOGW_BATCH_MAX 1024u          /* entries per append (one fdatasync) */
#define APP_LOGW_RESERVE 4096u            /* ring bytes kept for control records */
#define APP_LOGW_RETRY_NS (10 * 1000000ull) /* a failed write is tried again this often */

enum app_logw_counter {
	APP_LOGW_ENTRIES,   /* entries appended to the file log */
	APP_LOGW_BATCHES,   /* appends (each one fdatasync) */
	APP_LOGW_ERRORS,    /* appends, resets or compactions that failed (retried) */
	APP_LOGW_TRUNCATES, /* truncations applied */
	APP_LOGW_COMPACTS,  /* compactions applied */
	APP_LOGW_RESETS,    /* resets applied (the log restarted behind a snapshot) */
	APP_LOGW_SYNC_NS,   /* wall time in appends (write + fdatasync), summed */
	APP_LOGW_SYNC_MAX_NS, /* the longest append */
	APP_LOGW_FULL,      /* pushes refused: the ring was full (pushed again later) */
	APP_LOGW_SNAP_SLICES, /* snapshot slices written */
	APP_LOGW_SNAP_NS,   /* wall time writing snapshot files (slices, fsync, rename) */
	APP_LOGW_VOTES,     /* votes (term, votedFor) saved */
	APP_LOGW_VOTE_FAILED, /* vote saves that failed (retried) */
	APP_LOGW_VOTE_NS,   /* wall time saving votes, summed */
	APP_LOGW_COUNT
};

struct app_logw;

/* What the writer says (from the writer's thread): crit for what will stop the process. */
typedef app_say_fn app_logw_say_fn;

/* A writer for plog (which it now owns: app_logw_destroy closes it) with a ring of `bytes`
 * (rounded up to 8, at least 64 KiB). inline_writer: the producer is the writer too (it
 * drains itself when a control record finds no room). say may be NULL. 0 or -ENOMEM. */
int app_logw_create(struct app_logw **out, struct pst_log *plog, size_t bytes,
		    bool inline_writer, app_logw_say_fn *say, void *say_ctx);
/* Close the log and free the ring. Apply what is queued first with app_logw_drain. */
void app_logw_destroy(struct app_logw *w);

/* A writer on another thread that sleeps when idle: fn(arg) wakes it, called by the
 * producer after it publishes something new and after it posts or cancels a snapshot job.
 * Set before the writer runs. */
typedef void app_logw_wake_fn(void *arg);
void app_logw_set_wake(struct app_logw *w, app_logw_wake_fn *fn, void *arg);

/* --- The producer (the shard lcore) ------------------------------------------------------
 * Pushes are seen by the writer at the next app_logw_publish. */

/* Queue the entry at index (the next after the last entry pushed, or after a TRUNCATE /
 * RESET's index - 1). false: no room (nothing queued; push it again later). */
bool app_logw_push_entry(struct app_logw *w, uint64_t index, const struct wire_entry_hdr *hdr,
			 const void *data);
/* Remove the entry at index and every later one (Raft §5.3). Uses the reserve; waits for
 * the writer when even that is full (a pathological burst of truncations). */
void app_logw_push_truncate(struct app_logw *w, uint64_t index);
/* Drop what a snapshot file up to index covers; a compaction at or past the file's last
 * entry resets the file log to start at index + 1. Uses the reserve (waits as above). */
void app_logw_push_compact(struct app_logw *w, uint64_t index);
/* The directory of the vote file (pst_vote_save): set before the first app_logw_push_vote;
 * it must outlive the writer. */
void app_logw_set_vote_dir(struct app_logw *w, const char *dir);
/* Queue the hard state (term, vote): the writer saves it after everything pushed before it
 * and before anything pushed after it (Raft Figure 2: nothing of a term is written before
 * the term is). Uses the reserve (waits as above). Returns the vote's ticket: it is on disk
 * once app_logw_votes_saved() reaches it. A failed save stops the writer there (later
 * records wait; no snapshot file is written either) and is tried again every
 * APP_LOGW_RETRY_NS. */
uint64_t app_logw_push_vote(struct app_logw *w, uint64_t term, uint32_t vote);
/* The tickets saved so far (a count: every vote pushed up to it is on disk). */
uint64_t app_logw_votes_saved(const struct app_logw *w);
/* The last vote save's error (-errno), 0 when it succeeded (or none failed yet). */
int app_logw_vote_error(const struct app_logw *w);
/* Make everything pushed so far visible to the writer (and wake it, when there is something
 * new and a wake is set). */
void app_logw_publish(struct app_logw *w);
/* The writer's last synced point: *index (0: nothing) and its *term (0: the entry is
 * covered by a snapshot file, take the memory log's term). */
void app_logw_synced(const struct app_logw *w, uint64_t *index, uint64_t *term);
/* Bytes queued and not yet written. */
uint64_t app_logw_queued(const struct app_logw *w);

/* --- The consumer (the writer) -----------------------------------------------------------
 * Apply what is queued: control records in order, and up to APP_LOGW_BATCH_MAX entries in
 * one append. Returns the records applied (0: nothing to do, or waiting out a failure).
 * A truncation the files refuse aborts the process: they would keep entries Raft removed. */
uint32_t app_logw_drain(struct app_logw *w, uint64_t now_ns);
/* Drain until nothing is queued or a write fails (shutdown, tests). 0 or -EIO. */
int app_logw_flush(struct app_logw *w, uint64_t now_ns);

/* --- Snapshot files (one at a time) ----------------------------------------------------
 * The shard hands the writer a snapshot that consensus keeps unchanged until the next one
 * (take or install); the writer writes it in APP_LOGW_SNAP_SLICE slices between its log
 * work (pst_snap_begin/step: temp file, fsync, rename, directory fsync) and reports the
 * result. The shard takes no snapshot while one is being written; a snapshot installed
 * from the leader in the meantime supersedes it (app_logw_snap_cancel). */
#define APP_LOGW_SNAP_SLICE (4u << 20)

struct pst_snap_meta;
/* A job posted and not yet collected with app_logw_snap_poll. */
bool app_logw_snap_busy(const struct app_logw *w);
/* Post a job (not busy: CHECK). dir and data must stay unchanged until it is collected. */
void app_logw_snap_post(struct app_logw *w, const char *dir, const struct pst_snap_meta *meta,
			const void *data);
/* The posted job ended: true with its snapshot index and result (0: durable under its name;
 * -ECANCELED: superseded; -errno: the write failed); the writer is free again. */
bool app_logw_snap_poll(struct app_logw *w, uint64_t *index, int *rc);
/* Stop the posted job and wait until the writer no longer reads its data: the step it is in
 * (a slice, or the last one: header, fsync, rename, directory fsync). A job that completed
 * meanwhile reports 0 at the next poll. */
void app_logw_snap_cancel(struct app_logw *w);

/* Counters (single writer each; read them relaxed from anywhere). */
uint64_t app_logw_counter(const struct app_logw *w, enum app_logw_counter c);
extern const char *const app_logw_counter_names[APP_LOGW_COUNT];

#endif /* OMSD_APP_LOGW_H */

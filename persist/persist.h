/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pst — persistence (ARCHITECTURE.md §4 durability and snapshots, §6 fencing in the database).
 *
 * Everything the shards need from disks and from PostgreSQL, done outside consensus on the
 * persister lcore. Four concerns, each in its own files (pst_db_* in pst_db*.c):
 *
 *   pst_log_*   segmented append-only Raft log files, one CRC32C per entry, one write() and
 *               (durable mode) one fdatasync() per batch, torn-tail repair on open, hard
 *               error naming file and offset for corruption anywhere else.
 *   pst_snap_*  snapshot files: temp name, fsync, rename, directory fsync; the newest valid
 *               one is loaded, corrupt ones are skipped and reported.
 *   pst_vote_*  the Raft hard state (currentTerm, votedFor), durable before it returns.
 *   pst_db_*    PostgreSQL through libpq in non-blocking pipeline mode, driven by
 *               pst_db_poll(), which never blocks: HYDRATE_REQUEST / BEGIN_DEHYDRATE /
 *               RELEASE_CLAIM in, HYDRATE_USER / FLUSH_COMPLETE / RELEASE_DONE out
 *               (fencing protocol: docs/fencing.md, docs/persist.md).
 *
 * Not a pure module: it uses stdio, unistd, fcntl and libpq. It never includes a DPDK
 * header; the host wraps it in an lcore with rings. Operating errors return -errno.
 */
#ifndef OMSD_PERSIST_PERSIST_H
#define OMSD_PERSIST_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"

/* ---------------------------------------------------------------------------------------
 * Counters (single writer: the persister; read by mgmt). One list for every object; each
 * object counts what concerns it and leaves the rest at zero.
 * ------------------------------------------------------------------------------------- */
#define PST_COUNTERS(X)                                                                    \
	X(LOG_BATCHES, "log batches written (one write each)")                            \
	X(LOG_ENTRIES, "log entries appended")                                            \
	X(LOG_BYTES, "log bytes written")                                                 \
	X(LOG_SYNCS, "fdatasync calls on log segments")                                   \
	X(LOG_SYNC_FAILED, "appends whose fdatasync (or directory sync) failed: not kept")   \
	X(LOG_SEGMENTS_CREATED, "log segments created")                                   \
	X(LOG_SEGMENTS_REMOVED, "log segments removed by compaction or truncation")       \
	X(LOG_TORN_TAIL_BYTES, "bytes cut from a torn tail on open")                      \
	X(LOG_TRUNCATED_ENTRIES, "entries removed by a suffix truncation")                \
	X(LOG_READ_ENTRIES, "entries read back")                                          \
	X(LOG_TORN_REPAIRS, "torn tails cut (or torn last segments removed) on open")     \
	X(LOG_CKPT_SYNCS, "fdatasync calls on the synced checkpoint")                     \
	X(LOG_CKPT_ERRORS, "checkpoint updates that failed (it lags, never leads)")       \
	X(DB_CONNECTS, "connections established")                                         \
	X(DB_DISCONNECTS, "connections lost or dropped")                                  \
	X(DB_CONNECT_FAILURES, "connection attempts that failed")                         \
	X(DB_SCHEMA_REFUSED, "connections dropped: the schema is not the one this build needs")\
	X(DB_TIMEOUTS, "connections dropped because a batch took too long")               \
	X(DB_BATCHES, "pipeline batches sent (one transaction each)")                     \
	X(DB_BATCH_FAILURES, "batches that failed and were re-run one request each")      \
	X(DB_RESENT, "requests sent again after a connection loss or batch failure")      \
	X(DB_STATEMENTS, "statements sent (a multi-row statement counts once)")           \
	X(DB_GROUPED, "requests sent inside multi-row statements")                        \
	X(DB_READ_BATCHES, "batches sent on the read lane (its own connection)")          \
	X(DB_LANE_FOLLOWS, "requests sent on their user's lane, not their kind's")        \
	X(DB_HYDRATES, "hydrate requests accepted")                                       \
	X(DB_HYDRATES_MERGED, "hydrate requests merged into one in flight")               \
	X(DB_HYDRATES_NEG_CACHE, "hydrates answered OWNED from the negative cache")       \
	X(DB_HYDRATE_OK, "HYDRATE_USER OK sent")                                          \
	X(DB_HYDRATE_NEW, "HYDRATE_USER NEW sent")                                        \
	X(DB_HYDRATE_UNKNOWN, "HYDRATE_USER UNKNOWN sent (no such account)")              \
	X(DB_HYDRATE_OWNED, "HYDRATE_USER OWNED sent")                                    \
	X(DB_HYDRATE_ERROR, "HYDRATE_USER ERROR sent")                                    \
	X(DB_FLUSHES, "flush requests accepted")                                          \
	X(DB_FLUSHES_MERGED, "flush requests merged into an identical one in flight")     \
	X(DB_FLUSH_OK, "FLUSH_COMPLETE OK sent (written now)")                            \
	X(DB_FLUSH_REPEAT, "FLUSH_COMPLETE OK sent (our own write found already there)")  \
	X(DB_FLUSH_CONFLICT, "FLUSH_COMPLETE CONFLICT sent (alarm)")                      \
	X(DB_FLUSH_RECHECKS, "conflicts checked again by a second statement")             \
	X(DB_FLUSH_ERROR, "FLUSH_COMPLETE ERROR sent")                                    \
	X(DB_RELEASES, "release requests accepted")                                       \
	X(DB_RELEASES_MERGED, "release requests merged into an identical one in flight")  \
	X(DB_RELEASE_OK, "RELEASE_DONE OK sent (claim released now)")                     \
	X(DB_RELEASE_NOOP, "RELEASE_DONE OK sent (nothing held: released or re-hydrated)")\
	X(DB_RELEASE_ERROR, "RELEASE_DONE ERROR sent")                                    \
	X(DB_LOOKUPS, "transfer lookups accepted")                                        \
	X(DB_LOOKUPS_MERGED, "transfer lookups merged into an identical one in flight")   \
	X(DB_LOOKUP_FOUND, "TRANSFER_FOUND FOUND sent")                                   \
	X(DB_LOOKUP_NOT_FOUND, "TRANSFER_FOUND NOT_FOUND sent")                           \
	X(DB_LOOKUP_ERROR, "TRANSFER_FOUND ERROR sent")                                   \
	X(DB_FULL, "requests refused: request pool full")                                 \
	X(DB_EMIT_BLOCKED, "completions held back: the output refused them")

enum pst_counter {
#define PST_COUNTER_ENUM(name, text) PST_C_##name,
	PST_COUNTERS(PST_COUNTER_ENUM)
#undef PST_COUNTER_ENUM
	PST_C_COUNT,
};

const char *pst_counter_name(enum pst_counter counter); /* "LOG_BATCHES", or "?" */
const char *pst_counter_text(enum pst_counter counter); /* the label */

/* CRC32C (Castagnoli), SSE4.2 when compiled in, else a table. crc = 0 to start. */
uint32_t pst_crc32c(uint32_t crc, const void *data, size_t len);

/* ---------------------------------------------------------------------------------------
 * Log files.
 * ------------------------------------------------------------------------------------- */

#define PST_LOG_SEGMENT_SIZE_DEFAULT (UINT64_C(64) << 20)
#define PST_LOG_ENTRY_DATA_MAX (UINT32_C(1) << 24) /* one entry's data, bytes */
#define PST_ERR_SIZE 512                          /* error text buffers */

enum pst_sync {
	PST_SYNC_NONE = 1, /* memory mode: write(), no fdatasync (durable = written) */
	PST_SYNC_DATA = 2, /* durable mode: fdatasync after every batch */
};

struct pst_log_config {
	const char *dir;       /* directory of the segments (created if missing) */
	uint64_t segment_size; /* a segment is rolled when a batch would pass this; 0: 64 MiB */
	uint32_t sync;         /* enum pst_sync */
	uint32_t reserved;
};

/* One log entry, as Raft sees it (the same fields as wire_entry_hdr plus its index). */
struct pst_entry {
	uint64_t index;    /* Raft log index, >= 1 */
	uint64_t term;
	uint64_t time_ns;  /* cluster time stamped by the leader */
	uint32_t kind;     /* consensus entry kind, opaque here */
	uint32_t data_len; /* <= PST_LOG_ENTRY_DATA_MAX */
	const void *data;  /* data_len bytes (for reads: points into the caller's buffer) */
};

struct pst_log;

/*
 * Open (or create) the log in cfg->dir. Validates every segment: a torn tail at the end of
 * the last segment (a partial or CRC-bad record with no valid record after it) is cut off
 * and counted; anything else — a bad record followed by valid data, a bad record in a
 * segment that is not the last, a gap in the indices — fails with -EBADMSG and err (at
 * least PST_ERR_SIZE bytes, may be NULL) naming the file and offset. Other failures -errno.
 *
 * Durable mode (PST_SYNC_DATA) also keeps a checkpoint file in the directory: the last
 * index synced and its term (docs/persist.md "The synced checkpoint"). A bad or missing
 * record at or below that index is damage to an entry once reported durable, not a torn
 * tail: -EBADMSG naming the file, offset, index and what was found, nothing repaired. So
 * is a checkpoint that does not check, or none beside segment files (unless the operator
 * put an empty file ckpt.adopt there: the log is then taken as it is).
 */
int pst_log_open(struct pst_log **out, const struct pst_log_config *cfg, char *err,
		 size_t err_size);
void pst_log_close(struct pst_log *log);

/* What the last open repaired: a torn tail past the synced checkpoint (bytes > 0), or a log
 * adopted without a checkpoint. text is one line for the operator ("" when nothing). */
struct pst_log_repair {
	uint64_t bytes;        /* torn bytes cut off (preallocated zeros not counted) */
	uint64_t repairs;      /* torn tails cut or torn last segments removed */
	uint64_t first_index;  /* the first entry cut */
	uint64_t last_index;   /* the highest index a cut record's header named (>= first) */
	uint64_t synced_index; /* the checkpoint at open: the cut entries were never synced */
	bool adopted;          /* opened without a checkpoint (ckpt.adopt) */
	char text[PST_ERR_SIZE];
};
const struct pst_log_repair *pst_log_repair_info(const struct pst_log *log);

/* First held index (last + 1 when empty), last held index (first - 1 when empty), the term
 * of the last entry (0 when empty), and the last index known durable (synced in durable
 * mode, written in memory mode). */
uint64_t pst_log_first_index(const struct pst_log *log);
uint64_t pst_log_last_index(const struct pst_log *log);
uint64_t pst_log_last_term(const struct pst_log *log);
uint64_t pst_log_durable_index(const struct pst_log *log);

/*
 * Append a batch: entries[i].index must be last_index + 1 + i (CHECK). The batch goes into
 * one segment (the log rolls to a new one first when the batch would pass segment_size) with
 * one pwrite(); in durable mode one fdatasync() follows and the batch is durable when this
 * returns (durable mode also extends the segment with written zeros 1 MiB at a time, so the
 * sync flushes data, not the file size). It blocks for the sync: call it on the persister,
 * never on a shard lcore. Returns 0 or -errno; after an error the log's indices are
 * unchanged (a partial write is cut off; after a failed sync the batch does not count and
 * the next append writes over its bytes — write it again from your own copy, never trust
 * a retried fsync alone).
 */
int pst_log_append(struct pst_log *log, const struct pst_entry *entries, uint32_t count);
/* fdatasync the active segment if it has unsynced writes (memory mode: no-op). 0/-errno. */
int pst_log_sync(struct pst_log *log);

/*
 * Read up to max entries starting at index (first <= index <= last) into out[], their data
 * copied into buf (8-byte aligned, buf_size bytes; it holds the raw records, 40 bytes of
 * header each, so each entry's data is 8-byte aligned). Stops at the end of a
 * segment, of the log, or of buf. Every record's CRC is checked again. Returns the count
 * read (>= 1), -ENOENT (index not held), -ENOBUFS (the first entry does not fit buf),
 * -EBADMSG (a record no longer checks: bit rot), or -errno.
 */
int pst_log_read(struct pst_log *log, uint64_t index, struct pst_entry *out, uint32_t max,
		 void *buf, size_t buf_size);
/* The term of the entry at index (first <= index <= last). 0 or -errno / -ENOENT. */
int pst_log_term(struct pst_log *log, uint64_t index, uint64_t *term);

/* Raft conflict (§5.3): remove the entry at index and every later one (first <= index).
 * Later segments are deleted, the one holding index is cut; synced. 0 or -errno. */
int pst_log_truncate(struct pst_log *log, uint64_t index);
/* Compaction: delete every segment whose entries are all <= index (the active segment is
 * kept unless the log is reset). Returns segments removed or -errno. */
int pst_log_compact(struct pst_log *log, uint64_t index);
/* Drop every segment; the next append is at next_index (a snapshot from the leader was
 * installed beyond our log). 0 or -errno. */
int pst_log_reset(struct pst_log *log, uint64_t next_index);

const uint64_t *pst_log_counters(const struct pst_log *log); /* PST_C_COUNT values */

/* ---------------------------------------------------------------------------------------
 * Snapshot files.
 * ------------------------------------------------------------------------------------- */

struct pst_snap_meta {
	uint64_t last_index;   /* last log entry the snapshot covers */
	uint64_t last_term;    /* its term */
	uint64_t last_time_ns; /* its cluster time */
	uint64_t length;       /* data bytes */
};

/*
 * Write a snapshot into dir: a temp file, fsync, rename to its final name, fsync the
 * directory; then remove older snapshots and, when log is non-NULL, compact the log behind
 * it (segments whose entries are all <= last_index). 0 or -errno (the previous snapshot is
 * untouched on any failure).
 */
int pst_snap_write(const char *dir, const struct pst_snap_meta *meta, const void *data,
		   struct pst_log *log);

/*
 * The same write cut in slices, for a writer that must not be held for a whole file (the
 * persister lcore also writes every shard's log): begin opens the temp file; each step
 * writes up to max data bytes (computing the data CRC as it goes) and starts their
 * write-back (sync_file_range), so the last step's fsync has little left to flush; the last
 * step writes the header, fsyncs, renames, syncs the directory and prunes older snapshots.
 * data must stay unchanged until the job ends. Not thread-safe; one job per directory.
 */
#define PST_SNAP_PATH_MAX 4096 /* PATH_MAX on Linux */
struct pst_snap_job {
	int fd;                  /* the temp file; -1: no job */
	const uint8_t *data;
	uint64_t done;           /* data bytes written */
	uint32_t crc;            /* running data CRC */
	struct pst_snap_meta meta;
	char dir[PST_SNAP_PATH_MAX];
	char tmp[PST_SNAP_PATH_MAX];
};
/* 0 or -errno (nothing left behind). */
int pst_snap_begin(struct pst_snap_job *job, const char *dir, const struct pst_snap_meta *meta,
		   const void *data);
/* 1: more to write; 0: the snapshot is durable under its name; -errno: failed, the temp file
 * removed, the previous snapshot untouched (but for a failed directory sync after the
 * rename: the new file then stands, whole, under its name and may not survive a crash). */
int pst_snap_step(struct pst_snap_job *job, size_t max);
/* Drop an unfinished job (its temp file is removed). */
void pst_snap_abort(struct pst_snap_job *job);
/* ---------------------------------------------------------------------------------------
 * Snapshots serialised by a forked child (pst_fork.c, docs/persist.md "Snapshots without a
 * stall"): fork() gives the child a copy-on-write image of the state as it is at that
 * instant, the child serialises it into memory both share and exits, and the parent goes on
 * at once; the parent's stall is the fork itself (copying page tables).
 * ------------------------------------------------------------------------------------- */

/* Memory for state a child serialises: private (fork copies it on write), zeroed, every
 * page touched now, transparent huge pages asked for (madvise: fewer page-table entries for
 * fork to copy). NULL and errno on failure. */
void *pst_mem_private(size_t size);
/* Memory the child writes and the parent reads (the snapshot buffers): shared, zeroed,
 * populated. NULL and errno on failure. */
void *pst_mem_shared(size_t size);
/* Either of them, with the size it was made with. */
void pst_mem_free(void *p, size_t size);
/* Put private memory back on transparent huge pages (MADV_COLLAPSE, Linux 6.1): after a
 * fork the pages the parent wrote were split into 4 KiB entries, which the next fork copies
 * one by one. Copies up to `size` bytes from p into fresh huge pages, synchronously: call it
 * from a thread that may wait (not an lcore), a slice at a time. 0 or -errno (-EINVAL: the
 * kernel has no MADV_COLLAPSE; -EAGAIN/-ENOMEM: not now). */
int pst_mem_collapse(void *p, size_t size);

/* The service's serialiser (svc_ops.snapshot): bytes written, 0 when cap is too small. */
typedef size_t(pst_serialize_fn)(const void *svc, void *buf, size_t cap);

struct pst_fork_slot; /* a shared page: the child's result */
struct pst_fork {
	int pid;                     /* the child; 0: none (running or not yet reaped) */
	bool result;                 /* its result was collected; the child is not reaped yet */
	struct pst_fork_slot *slot;
	uint64_t started_ns;         /* CLOCK_MONOTONIC at fork */
	uint64_t fork_ns;            /* how long the last fork() held the caller */
	uint64_t fork_ns_max;        /* the longest */
	uint64_t child_ns;           /* the last child's serialisation time */
	uint64_t next_wait_ns;       /* next waitpid while the child runs */
	uint64_t forks, failures;    /* children started; failed (fork, crash, no result) */
	/* Set by the caller: bytes of buf the child maps in one madvise before it serialises
	 * (the length expected; 0: none). fork copies no page-table entry of shared memory, so
	 * without it the child faults once per page it writes, and while it runs every page the
	 * parent writes costs the parent a copy-on-write fault: the shorter its life the
	 * better. */
	size_t populate;
};

/* 0 or -errno (the slot could not be mapped). */
int pst_fork_init(struct pst_fork *f);
/* Kill a child still running, reap it, unmap the slot. */
void pst_fork_fini(struct pst_fork *f);
/*
 * Fork a child that runs fn(svc, buf, cap) on its image and reports the length. buf must be
 * shared memory (pst_mem_shared) and svc's state private (pst_mem_private or the heap). In
 * the child: PR_SET_PDEATHSIG, the CPU set cpus (a cpu_set_t of cpus_size bytes; NULL: the
 * caller's), nice `nice`, then
 * only fn and _exit (no allocation, no lock: other threads' locks are not the child's).
 * 0; -EBUSY (a child is running or not reaped yet); -errno of fork (nothing started).
 */
int pst_fork_start(struct pst_fork *f, pst_serialize_fn *fn, const void *svc, void *buf,
		   size_t cap, const void *cpus, size_t cpus_size, int nice);
enum pst_fork_state {
	PST_FORK_IDLE,    /* nothing to collect (none running, or it was collected) */
	PST_FORK_RUNNING, /* the child is still serialising */
	PST_FORK_DONE,    /* *len bytes are in buf (0: they did not fit in cap) */
	PST_FORK_FAILED,  /* the child died without a result (*status: waitpid's status) */
};
/* Cheap when nothing changed (a load of the slot's flag and a coarse clock; waitpid at most
 * every 10 ms while the child runs); never blocks. Reaps a child whose result was collected
 * (asking at most every millisecond). */
enum pst_fork_state pst_fork_poll(struct pst_fork *f, size_t *len, int *status);
/* Kill the child (SIGKILL) and reap it: its result is dropped. Blocks until it is gone. */
void pst_fork_kill(struct pst_fork *f);

/*
 * Load the newest valid snapshot from dir. Corrupt or truncated ones are skipped, counted in
 * *corrupt (may be NULL), renamed aside to <name>.corrupt (kept as evidence: no later load
 * or pruning touches them) and named in err with their new name; leftover temp files are
 * removed. On success *data
 * is malloc'ed (free it) and meta filled. Returns 0, -ENOENT (no valid snapshot) or -errno.
 */
int pst_snap_load(const char *dir, struct pst_snap_meta *meta, void **data,
		  uint32_t *corrupt, char *err, size_t err_size);

/* ---------------------------------------------------------------------------------------
 * Raft hard state (Figure 2: currentTerm, votedFor).
 * ------------------------------------------------------------------------------------- */

/* Durable when it returns (temp, fsync, rename, directory fsync). 0 or -errno. */
int pst_vote_save(const char *dir, uint64_t term, uint32_t vote);
/* 0 and the values, -ENOENT when never saved (term 0, vote 0), -EBADMSG when corrupt. */
int pst_vote_load(const char *dir, uint64_t *term, uint32_t *vote);

/* ---------------------------------------------------------------------------------------
 * PostgreSQL: hydration and fenced flush.
 * ------------------------------------------------------------------------------------- */

/* Receives one completion (HYDRATE_USER, FLUSH_COMPLETE or RELEASE_DONE; hdr.shard = the
 * requesting OMS shard, hdr.length bytes; copy it). Return 0 to take it, -ENOBUFS to refuse (full ring):
 * it is offered again on the next poll, in order. */
typedef int(pst_db_emit_fn)(void *arg, const struct wire_msg_hdr *msg);

#define PST_DB_BATCH_MAX_LIMIT 1024 /* batch_max above this is refused (-EINVAL) */
#define PST_DB_READ_BATCHES_LIMIT 64 /* read_batches_in_flight_max above this: -EINVAL */

/* The newest of deploy/pg/migrations this build reads and writes, and how many there are up
 * to it (tests/unit/persist checks both against the directory). A database with another
 * newest migration, or missing one, is refused (pst_db_schema_check, docs/persist.md). */
#define PST_SCHEMA_VERSION "0010_api_keys"
#define PST_SCHEMA_COUNT 10

struct pst_db_config {
	const char *conninfo;          /* libpq conninfo; use a socket path or hostaddr: a
					* host name would be resolved with a blocking call */
	uint32_t requests_max;         /* queued + in flight + awaiting output */
	uint32_t batch_max;            /* requests per pipeline sync (one transaction), and
					* rows of one multi-row statement; <= 1024 */
	uint32_t batches_in_flight_max;/* syncs outstanding on the (write) connection */
	uint32_t read_batches_in_flight_max; /* syncs outstanding on a second connection for
					* hydrates and lookups (the read lane); 0: none, one
					* connection carries everything */
	uint32_t neg_cache_size;       /* "owned elsewhere" entries (power of two) */
	uint64_t neg_ttl_ns;           /* how long an OWNED answer is reused */
	uint64_t backoff_min_ns;       /* first reconnect delay, doubled up to max */
	uint64_t backoff_max_ns;
	uint64_t batch_timeout_ns;     /* oldest batch in flight longer: drop the connection */
	uint64_t hydrate_deadline_ns;  /* unsent hydrate older than this while disconnected:
					* answer ERROR; 0: wait for the database forever */
	pst_db_emit_fn *emit;          /* completion output */
	void *emit_arg;
};

/* Fill workable defaults (16384 requests, batches of 256, 4 in flight on the write lane and 2
 * on the read lane, 1024-entry negative
 * cache of 50 ms, back-off 10 ms .. 1 s, 5 s batch timeout, hydrate deadline 2 s): sized for
 * 5,000 hydrations and 5,000 evictions a second from one OMS shard (docs/persist.md). */
void pst_db_config_default(struct pst_db_config *cfg, const char *conninfo,
			   pst_db_emit_fn *emit, void *emit_arg);

struct pst_db;

/* Allocate everything from the config (no allocation afterwards except inside libpq).
 * Does not connect: the first pst_db_poll() starts the connection. 0, -EINVAL or -ENOMEM. */
int pst_db_create(struct pst_db **out, const struct pst_db_config *cfg);
void pst_db_destroy(struct pst_db *db);

/*
 * Accept one request: HYDRATE_REQUEST {user, epoch}, BEGIN_DEHYDRATE {epoch, state} or
 * RELEASE_CLAIM {user, epoch}; the requesting OMS shard is msg->shard. Idempotent: a
 * hydrate for a (user, shard) not yet sent is merged (one answer, carrying the highest
 * epoch; once sent, only an ask with an epoch no higher joins it, since the database holds
 * the sent epoch); an identical flush or release in flight is merged; anything already completed is
 * simply done again, and the database makes the repeat harmless (a claim we hold is
 * re-claimed; our own flush is recognised in the ledger; a release is a no-op the second
 * time). So a new
 * leader's persister is rebuilt by submitting the service's outstanding hydrations and
 * flushes again (see pst_db_clear for the old one). Returns 0, -ENOBUFS (pool full: keep
 * the message and try later), or -EINVAL (wrong type, length or content).
 */
int pst_db_submit(struct pst_db *db, const struct wire_msg_hdr *msg, uint64_t now_ns);

/*
 * Do bounded work without blocking: connect / reconnect with back-off, flush output, read
 * results, send the next batches, emit completions. Call it every duty cycle. Returns the
 * amount of work done (0 when idle).
 */
uint32_t pst_db_poll(struct pst_db *db, uint64_t now_ns);

/* Forget every request (leadership lost: the new leader's persister takes over). In-flight
 * statements still run to completion in the database but their answers are dropped. */
void pst_db_clear(struct pst_db *db);

bool pst_db_connected(const struct pst_db *db);
uint32_t pst_db_pending(const struct pst_db *db); /* requests not yet answered */
/* A lane's socket (0 the write lane, 1 the read lane), for epoll; -1 when not connected. */
int pst_db_socket(const struct pst_db *db, unsigned lane);
const uint64_t *pst_db_counters(const struct pst_db *db); /* PST_C_COUNT values */
/* Latency of answered requests of one kind (1 hydrate, 2 flush, 3 release, 4 lookup; NULL
 * for others), ns of the caller's clock: queue (submitted → first sent) and db (first sent
 * → its answer final at the batch's Sync, retries included). Read while the persister
 * records: single-writer words. */
struct hist;
const struct hist *pst_db_lat_queue(const struct pst_db *db, unsigned kind);
const struct hist *pst_db_lat_db(const struct pst_db *db, unsigned kind);
const char *pst_db_last_error(const struct pst_db *db);   /* "" when none yet */

/* At start, before any lcore runs (it blocks up to timeout_s): connect once and check the
 * schema version. 0: it matches; -EPROTO: it does not (the reason, naming both versions,
 * in why: refuse to start); -EHOSTUNREACH: no answer (why says so; the persister keeps
 * trying and checks again on every connection). */
int pst_db_schema_check(const char *conninfo, int timeout_s, char *why, size_t cap);

#endif

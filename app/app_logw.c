/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file log's writer (app_logw.h). The ring holds records of a 40-byte header and the
 * entry's data padded to 8 bytes; a record never wraps (a WRAP record fills the end of the
 * ring). head and tail count bytes from the start and only grow: the producer writes
 * records past head and publishes head (release); the writer reads up to head (acquire),
 * applies the records and publishes tail (release) once the file log no longer needs their
 * bytes. The synced point is published under a sequence count, so a reader never sees an
 * index with another entry's term. A VOTE record (the Raft hard state) is applied in the
 * ring's order like a truncation; the writer publishes how many it has saved.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/app_logw.h"
#include "app/app_say.h"
#include "common/check.h"
#include "common/wire.h"
#include "persist/persist.h"

enum snap_state {
	SNAP_IDLE = 0,   /* no job */
	SNAP_POSTED = 1, /* the producer posted one; the writer works on it */
	SNAP_CANCEL = 2, /* the producer wants it stopped */
	SNAP_DONE = 3,   /* the writer ended it; the result waits for the producer */
};

enum rec_type {
	REC_ENTRY = 1,
	REC_TRUNCATE = 2,
	REC_COMPACT = 3,
	REC_WRAP = 4,
	REC_VOTE = 5, /* index: the term; term: the vote */
};

struct rec {
	uint32_t type;
	uint32_t data_len;
	uint64_t index;
	uint64_t term;
	uint64_t time_ns;
	uint32_t kind;
	uint32_t pad;
};
_Static_assert(sizeof(struct rec) == 40, "logw record header");

#define RING_MIN (UINT64_C(1) << 16)

struct app_logw {
	/* Set at create, read by both sides. */
	uint8_t *buf;
	uint64_t size;
	struct pst_log *plog;
	bool inline_writer;
	app_logw_say_fn *say;
	void *say_ctx;
	app_logw_wake_fn *wake;      /* wakes a sleeping writer (app_logw_set_wake) */
	void *wake_arg;
	const char *vote_dir;        /* app_logw_set_vote_dir */

	/* The producer's line. */
	_Alignas(64) uint64_t head;  /* published: the writer may read below it */
	uint64_t phead;              /* pushed, not yet published */
	uint64_t tail_seen;          /* the producer's copy of tail */
	uint64_t votes_pushed;       /* the last vote ticket handed out */

	/* The writer's line. */
	_Alignas(64) uint64_t tail;  /* published: the producer may reuse below it */
	uint64_t retry_ns;           /* after a failure: nothing tried before this time */
	uint64_t last_term;          /* term of the file log's last entry written here */
	uint64_t last_index;
	uint64_t votes_saved;        /* published (release): tickets saved */
	int vote_err;                /* published (relaxed): the last vote save's error */
	bool vote_failing;           /* a vote save failed and is not saved yet */
	struct pst_entry batch[APP_LOGW_BATCH_MAX];

	/* The snapshot job: state is the handshake (SNAP_*); the producer fills the request
	 * before POSTED, the writer the result before DONE. */
	_Alignas(64) uint32_t snap_state;
	const char *snap_dir;
	struct pst_snap_meta snap_meta;
	const void *snap_data;
	uint64_t snap_done_index;
	int snap_done_rc;
	bool snap_running;           /* the writer's: job below is open */
	struct pst_snap_job snap_job;

	/* The synced point (seq odd while it changes). */
	_Alignas(64) uint32_t seq;
	uint64_t synced_index;
	uint64_t synced_term;

	uint64_t c[APP_LOGW_COUNT];
};

const char *const app_logw_counter_names[APP_LOGW_COUNT] = {
	[APP_LOGW_ENTRIES] = "entries",
	[APP_LOGW_BATCHES] = "batches",
	[APP_LOGW_ERRORS] = "errors",
	[APP_LOGW_TRUNCATES] = "truncates",
	[APP_LOGW_COMPACTS] = "compacts",
	[APP_LOGW_RESETS] = "resets",
	[APP_LOGW_SYNC_NS] = "sync_ns",
	[APP_LOGW_SYNC_MAX_NS] = "sync_max_ns",
	[APP_LOGW_FULL] = "full",
	[APP_LOGW_SNAP_SLICES] = "snap_slices",
	[APP_LOGW_SNAP_NS] = "snap_ns",
	[APP_LOGW_VOTES] = "votes",
	[APP_LOGW_VOTE_FAILED] = "vote_failed",
	[APP_LOGW_VOTE_NS] = "vote_ns",
};

static inline void
cset(struct app_logw *w, enum app_logw_counter c, uint64_t v)
{
	__atomic_store_n(&w->c[c], v, __ATOMIC_RELAXED);
}

static inline void
cadd(struct app_logw *w, enum app_logw_counter c, uint64_t n)
{
	cset(w, c, w->c[c] + n);
}

uint64_t
app_logw_counter(const struct app_logw *w, enum app_logw_counter c)
{
	CHECK(c < APP_LOGW_COUNT);
	return __atomic_load_n(&w->c[c], __ATOMIC_RELAXED);
}

#define say(w, crit, ...) app_sayf((w)->say, (w)->say_ctx, (crit), __VA_ARGS__)
#define mono_ns app_mono_ns

/* The file log's synced point as the writer publishes it. */
static void
publish_synced(struct app_logw *w)
{
	uint64_t idx = pst_log_durable_index(w->plog), term = 0;
	if (idx >= pst_log_first_index(w->plog) && idx > 0) {
		if (idx == w->last_index)
			term = w->last_term;
		else if (pst_log_term(w->plog, idx, &term) != 0)
			return; /* not readable now: the next write publishes */
	}
	if (idx == w->synced_index && term == w->synced_term)
		return;
	__atomic_store_n(&w->seq, w->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&w->synced_index, idx, __ATOMIC_RELAXED);
	__atomic_store_n(&w->synced_term, term, __ATOMIC_RELAXED);
	__atomic_store_n(&w->seq, w->seq + 1, __ATOMIC_RELEASE);
}

void
app_logw_synced(const struct app_logw *w, uint64_t *index, uint64_t *term)
{
	for (;;) {
		uint32_t s0 = __atomic_load_n(&w->seq, __ATOMIC_ACQUIRE);
		uint64_t i = __atomic_load_n(&w->synced_index, __ATOMIC_RELAXED);
		uint64_t t = __atomic_load_n(&w->synced_term, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if ((s0 & 1) == 0 && __atomic_load_n(&w->seq, __ATOMIC_RELAXED) == s0) {
			*index = i;
			*term = t;
			return;
		}
	}
}

int
app_logw_create(struct app_logw **out, struct pst_log *plog, size_t bytes, bool inline_writer,
		app_logw_say_fn *say_fn, void *say_ctx)
{
	CHECK(out != NULL);
	CHECK(plog != NULL);
	uint64_t size = ((uint64_t)bytes + 7) & ~UINT64_C(7);
	if (size < RING_MIN)
		size = RING_MIN;
	struct app_logw *w = aligned_alloc(64, (sizeof(*w) + 63) & ~(size_t)63);
	if (w == NULL)
		return -ENOMEM;
	memset(w, 0, sizeof(*w));
	w->buf = aligned_alloc(64, (size_t)((size + 63) & ~UINT64_C(63)));
	if (w->buf == NULL) {
		free(w);
		return -ENOMEM;
	}
	w->size = size;
	w->plog = plog;
	w->inline_writer = inline_writer;
	w->say = say_fn;
	w->say_ctx = say_ctx;
	w->last_index = pst_log_last_index(plog);
	w->last_term = pst_log_last_term(plog);
	publish_synced(w);
	*out = w;
	return 0;
}

void
app_logw_destroy(struct app_logw *w)
{
	if (w == NULL)
		return;
	if (w->snap_running)
		pst_snap_abort(&w->snap_job); /* the previous snapshot file stands */
	pst_log_close(w->plog);
	free(w->buf);
	free(w);
}

uint64_t
app_logw_queued(const struct app_logw *w)
{
	return __atomic_load_n(&w->head, __ATOMIC_RELAXED) -
	       __atomic_load_n(&w->tail, __ATOMIC_RELAXED);
}

/* --- producer --------------------------------------------------------------------------- */

static inline uint64_t
rec_len(uint32_t data_len)
{
	return sizeof(struct rec) + (((uint64_t)data_len + 7) & ~UINT64_C(7));
}

/* Room for a record of len bytes at phead, leaving `keep` bytes free: the record's ring
 * offset, or UINT64_MAX. Writes the WRAP record when the record does not fit before the
 * end of the ring. */
static uint64_t
reserve(struct app_logw *w, uint64_t len, uint64_t keep)
{
	uint64_t off = w->phead % w->size, skip = 0;
	if (w->size - off < len)
		skip = w->size - off;
	uint64_t need = skip + len + keep;
	if (w->size - (w->phead - w->tail_seen) < need) {
		w->tail_seen = __atomic_load_n(&w->tail, __ATOMIC_ACQUIRE);
		if (w->size - (w->phead - w->tail_seen) < need)
			return UINT64_MAX;
	}
	if (skip > 0) {
		struct rec *r = (struct rec *)(w->buf + off);
		r->type = REC_WRAP; /* at least 8 bytes remain: records are 8-aligned */
		w->phead += skip;
		off = 0;
	}
	return off;
}

bool
app_logw_push_entry(struct app_logw *w, uint64_t index, const struct wire_entry_hdr *hdr,
		    const void *data)
{
	uint64_t len = rec_len(hdr->data_len);
	CHECK(len <= (w->size - APP_LOGW_RESERVE) / 2); /* entries are <= WIRE_TAIL_MAX */
	uint64_t off = reserve(w, len, APP_LOGW_RESERVE);
	if (off == UINT64_MAX) {
		cadd(w, APP_LOGW_FULL, 1);
		return false;
	}
	struct rec *r = (struct rec *)(w->buf + off);
	*r = (struct rec){
		.type = REC_ENTRY,
		.data_len = hdr->data_len,
		.index = index,
		.term = hdr->term,
		.time_ns = hdr->time_ns,
		.kind = hdr->kind,
	};
	if (hdr->data_len > 0)
		memcpy(r + 1, data, hdr->data_len);
	w->phead += len;
	return true;
}

static void
push_ctl(struct app_logw *w, uint32_t type, uint64_t index, uint64_t term)
{
	uint64_t off;
	while ((off = reserve(w, sizeof(struct rec), 0)) == UINT64_MAX) {
		/* Even the reserve is full: let the writer make room. */
		app_logw_publish(w);
		if (w->inline_writer) {
			/* Now, whatever the retry time (the clock's zero: a failure here leaves a
			 * retry time long past, so the next cycle's drain tries again). */
			w->retry_ns = 0;
			app_logw_drain(w, 0);
		} else
			sched_yield();
	}
	struct rec *r = (struct rec *)(w->buf + off);
	*r = (struct rec){ .type = type, .index = index, .term = term };
	w->phead += sizeof(struct rec);
}

void
app_logw_push_truncate(struct app_logw *w, uint64_t index)
{
	CHECK(index >= 1);
	push_ctl(w, REC_TRUNCATE, index, 0);
}

void
app_logw_push_compact(struct app_logw *w, uint64_t index)
{
	push_ctl(w, REC_COMPACT, index, 0);
}

void
app_logw_set_vote_dir(struct app_logw *w, const char *dir)
{
	w->vote_dir = dir;
}

uint64_t
app_logw_push_vote(struct app_logw *w, uint64_t term, uint32_t vote)
{
	CHECK(w->vote_dir != NULL);
	push_ctl(w, REC_VOTE, term, vote);
	return ++w->votes_pushed;
}

uint64_t
app_logw_votes_saved(const struct app_logw *w)
{
	return __atomic_load_n(&w->votes_saved, __ATOMIC_ACQUIRE);
}

int
app_logw_vote_error(const struct app_logw *w)
{
	return __atomic_load_n(&w->vote_err, __ATOMIC_RELAXED);
}

void
app_logw_set_wake(struct app_logw *w, app_logw_wake_fn *fn, void *arg)
{
	w->wake = fn;
	w->wake_arg = arg;
}

static void
wake_writer(struct app_logw *w)
{
	if (w->wake != NULL)
		w->wake(w->wake_arg);
}

void
app_logw_publish(struct app_logw *w)
{
	if (w->phead == w->head)
		return; /* nothing new: a sleeping writer sleeps on */
	__atomic_store_n(&w->head, w->phead, __ATOMIC_RELEASE);
	wake_writer(w);
}

/* --- writer ----------------------------------------------------------------------------- */

static void
fail(struct app_logw *w, uint64_t now_ns, const char *what, uint64_t index, int rc)
{
	cadd(w, APP_LOGW_ERRORS, 1);
	/* Said once per failure streak, not at every retry. */
	if (w->retry_ns == 0)
		say(w, false, "file log %s at %" PRIu64 " failed: %s; retried every %llu ms, "
		    "nothing past it is reported durable", what, index, strerror(-rc),
		    APP_LOGW_RETRY_NS / 1000000);
	w->retry_ns = now_ns + APP_LOGW_RETRY_NS;
}

/* Save the hard state of a VOTE record. true: on disk (published); false: failed, kept. */
static bool
apply_vote(struct app_logw *w, const struct rec *r, uint64_t now_ns)
{
	uint64_t t0 = mono_ns();
	int rc = pst_vote_save(w->vote_dir, r->index, (uint32_t)r->term);
	cadd(w, APP_LOGW_VOTE_NS, mono_ns() - t0);
	__atomic_store_n(&w->vote_err, rc, __ATOMIC_RELAXED);
	if (rc != 0) {
		/* Said by the shard (it knows the term's meaning); the failure stops the writer
		 * here: nothing written after it may be of the unsaved term. */
		cadd(w, APP_LOGW_VOTE_FAILED, 1);
		w->vote_failing = true;
		w->retry_ns = now_ns + APP_LOGW_RETRY_NS;
		return false;
	}
	if (w->vote_failing) {
		w->vote_failing = false;
		w->retry_ns = 0; /* the streak was this vote's: the shard says it is saved */
	}
	cadd(w, APP_LOGW_VOTES, 1);
	__atomic_store_n(&w->votes_saved, w->votes_saved + 1, __ATOMIC_RELEASE);
	return true;
}

/* Apply the control record r. true: done (its bytes may go); false: failed, kept. */
static bool
apply_ctl(struct app_logw *w, const struct rec *r, uint64_t now_ns)
{
	if (r->type == REC_VOTE)
		return apply_vote(w, r, now_ns);
	uint64_t first = pst_log_first_index(w->plog), last = pst_log_last_index(w->plog);
	int rc;
	if (r->type == REC_TRUNCATE) {
		if (r->index > last)
			return true; /* nothing held there */
		/* Below the file's first entry lies a snapshot: committed, never truncated. */
		CHECK(r->index >= first);
		rc = pst_log_truncate(w->plog, r->index);
		if (rc != 0) {
			/* The file would keep entries Raft removed: a restart would replay them. */
			say(w, true, "file log truncate at %" PRIu64 " failed: %s", r->index,
			    strerror(-rc));
			CHECK(0);
		}
		w->last_index = r->index - 1;
		w->last_term = pst_log_last_term(w->plog);
		cadd(w, APP_LOGW_TRUNCATES, 1);
		return true;
	}
	/* REC_COMPACT: at or past the file's end the log restarts after the snapshot. */
	if (r->index < first)
		return true;
	if (r->index >= last) {
		rc = pst_log_reset(w->plog, r->index + 1);
		if (rc != 0) {
			fail(w, now_ns, "reset", r->index + 1, rc);
			return false; /* appends after it need it: tried again */
		}
		w->last_index = r->index;
		w->last_term = 0;
		cadd(w, APP_LOGW_RESETS, 1);
		return true;
	}
	rc = pst_log_compact(w->plog, r->index);
	if (rc < 0)
		cadd(w, APP_LOGW_ERRORS, 1); /* the segments stay; the next compaction takes them */
	else
		cadd(w, APP_LOGW_COMPACTS, 1);
	return true;
}

static void
snap_finish(struct app_logw *w, int rc)
{
	w->snap_running = false;
	w->snap_done_index = w->snap_meta.last_index;
	w->snap_done_rc = rc;
	__atomic_store_n(&w->snap_state, SNAP_DONE, __ATOMIC_RELEASE);
}

/* One slice of the posted snapshot job, or its end. */
static uint32_t
snap_work(struct app_logw *w)
{
	uint32_t st = __atomic_load_n(&w->snap_state, __ATOMIC_ACQUIRE);
	if (st != SNAP_POSTED && st != SNAP_CANCEL)
		return 0;
	if (st == SNAP_CANCEL) {
		if (w->snap_running)
			pst_snap_abort(&w->snap_job);
		snap_finish(w, -ECANCELED);
		return 1;
	}
	uint64_t t0 = mono_ns();
	int rc = 0;
	if (!w->snap_running) {
		rc = pst_snap_begin(&w->snap_job, w->snap_dir, &w->snap_meta, w->snap_data);
		w->snap_running = rc == 0;
	}
	if (rc == 0) {
		rc = pst_snap_step(&w->snap_job, APP_LOGW_SNAP_SLICE);
		cadd(w, APP_LOGW_SNAP_SLICES, 1);
	}
	cadd(w, APP_LOGW_SNAP_NS, mono_ns() - t0);
	if (rc != 1)
		snap_finish(w, rc); /* 0: durable; < 0: failed, the temp file removed */
	return 1;
}

static uint32_t
drain_ring(struct app_logw *w, uint64_t now_ns)
{
	if (w->retry_ns != 0) {
		if (now_ns < w->retry_ns)
			return 0;
	}
	uint64_t head = __atomic_load_n(&w->head, __ATOMIC_ACQUIRE);
	uint64_t pos = w->tail, done = w->tail;
	uint32_t n = 0, applied = 0;
	while (pos < head) {
		const struct rec *r = (const struct rec *)(w->buf + pos % w->size);
		if (r->type == REC_WRAP) {
			pos += w->size - pos % w->size;
			if (n == 0)
				done = pos;
			continue;
		}
		if (r->type != REC_ENTRY) {
			if (n > 0)
				break; /* the batch first, in order */
			if (!apply_ctl(w, r, now_ns))
				goto out;
			pos += sizeof(*r);
			done = pos;
			applied++;
			continue;
		}
		if (n == APP_LOGW_BATCH_MAX)
			break;
		w->batch[n++] = (struct pst_entry){
			.index = r->index,
			.term = r->term,
			.time_ns = r->time_ns,
			.kind = r->kind,
			.data_len = r->data_len,
			.data = r + 1,
		};
		pos += rec_len(r->data_len);
	}
	if (n > 0) {
		/* The producer keeps the order: the batch follows the file's last entry (a failed
		 * append leaves the file as it was, and the same batch is tried again). */
		CHECK(w->batch[0].index == pst_log_last_index(w->plog) + 1);
		uint64_t t0 = mono_ns();
		int rc = pst_log_append(w->plog, w->batch, n);
		uint64_t dt = mono_ns() - t0;
		if (rc != 0) {
			fail(w, now_ns, "append", w->batch[0].index, rc);
			goto out;
		}
		cadd(w, APP_LOGW_SYNC_NS, dt);
		if (dt > w->c[APP_LOGW_SYNC_MAX_NS])
			cset(w, APP_LOGW_SYNC_MAX_NS, dt);
		cadd(w, APP_LOGW_ENTRIES, n);
		cadd(w, APP_LOGW_BATCHES, 1);
		w->last_index = w->batch[n - 1].index;
		w->last_term = w->batch[n - 1].term;
		done = pos;
		applied += n;
	}
	if (w->retry_ns != 0 && applied > 0) {
		say(w, false, "file log writes succeed again at %" PRIu64, w->last_index);
		w->retry_ns = 0;
	}
out:
	if (done != w->tail) {
		__atomic_store_n(&w->tail, done, __ATOMIC_RELEASE);
		publish_synced(w);
	}
	return applied;
}

/* The ring first, then a slice of the snapshot job: a snapshot's term is never on disk
 * before a vote queued ahead of it, and a vote that cannot be saved holds the job too —
 * but not its cancel, which a producer waits for (app_logw_snap_cancel). */
uint32_t
app_logw_drain(struct app_logw *w, uint64_t now_ns)
{
	uint32_t n = drain_ring(w, now_ns);
	if (!w->vote_failing ||
	    __atomic_load_n(&w->snap_state, __ATOMIC_ACQUIRE) == SNAP_CANCEL)
		n += snap_work(w);
	return n;
}

/* --- snapshot jobs, the producer's side ------------------------------------------------- */

bool
app_logw_snap_busy(const struct app_logw *w)
{
	return __atomic_load_n(&w->snap_state, __ATOMIC_ACQUIRE) != SNAP_IDLE;
}

void
app_logw_snap_post(struct app_logw *w, const char *dir, const struct pst_snap_meta *meta,
		   const void *data)
{
	CHECK(!app_logw_snap_busy(w));
	w->snap_dir = dir;
	w->snap_meta = *meta;
	w->snap_data = data;
	__atomic_store_n(&w->snap_state, SNAP_POSTED, __ATOMIC_RELEASE);
	wake_writer(w);
}

bool
app_logw_snap_poll(struct app_logw *w, uint64_t *index, int *rc)
{
	if (__atomic_load_n(&w->snap_state, __ATOMIC_ACQUIRE) != SNAP_DONE)
		return false;
	*index = w->snap_done_index;
	*rc = w->snap_done_rc;
	__atomic_store_n(&w->snap_state, SNAP_IDLE, __ATOMIC_RELEASE);
	return true;
}

void
app_logw_snap_cancel(struct app_logw *w)
{
	uint32_t st = SNAP_POSTED;
	if (!__atomic_compare_exchange_n(&w->snap_state, &st, SNAP_CANCEL, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return; /* idle, or ended already (DONE: collected by the next poll) */
	if (w->inline_writer) {
		snap_work(w); /* this lcore is the writer: it stops here */
		return;
	}
	wake_writer(w);
	while (__atomic_load_n(&w->snap_state, __ATOMIC_ACQUIRE) != SNAP_DONE)
		sched_yield(); /* the writer ends the slice it is in, then sees CANCEL */
}

int
app_logw_flush(struct app_logw *w, uint64_t now_ns)
{
	while (app_logw_queued(w) > 0) {
		uint64_t before = w->tail;
		w->retry_ns = 0;
		app_logw_drain(w, now_ns);
		if (w->tail == before)
			return -EIO;
	}
	return 0;
}

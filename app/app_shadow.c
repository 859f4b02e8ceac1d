/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shadow copy (app_shadow.h). The ring holds records of a 24-byte header and the
 * message padded to 8 bytes; a record never wraps (a WRAP record fills the end of the ring).
 * head and tail count bytes from the start and only grow: the producer writes records past
 * head and publishes head (release); the thread reads up to head (acquire), applies and
 * publishes tail (release).
 *
 * Seeds and snapshot jobs are numbered (seed_gen, job_gen): the producer fills a request and
 * then stores its number; the thread answers by storing the number it took (seed_taken,
 * job_done). A seed's base is read under `reading`, which the thread sets and then checks
 * the seed is still the latest (both sequentially consistent), and which a new seed waits
 * out: so a base is never read after the producer has gone past the seed that superseded it.
 * The seed's fields are written after seed_wr, which the thread checks after reading them (a
 * seqlock): so a base is never taken with another seed's length. A job carries the seed it
 * was posted after (job_seed): a seed fails the jobs posted before it, even at its position.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "app/app_say.h"
#include "app/app_shadow.h"
#include "common/check.h"
#include "common/service.h"
#include "common/wire.h"

enum rec_type {
	REC_APPLY = 1,
	REC_TICK = 2,
	REC_WRAP = 3,
};

struct rec {
	uint32_t type;
	uint32_t len;    /* the message's bytes (REC_APPLY) */
	uint64_t index;  /* the log entry it came in */
	uint64_t now_ns; /* the entry's cluster time */
};
_Static_assert(sizeof(struct rec) == 24, "shadow record header");

#define BASE_NONE SIZE_MAX /* seed_base_len: no base will come (the copy is lost) */
#define IDLE_BACKOFF_MAX 16 /* the longest idle sleep, in idle_ns */

struct app_shadow {
	/* Set at create, read by both sides. */
	uint8_t *buf;
	uint64_t size;
	const struct svc_ops *ops;
	void *svc;
	uint64_t idle_ns;
	app_shadow_say_fn *say;
	void *say_ctx;
	bool threaded;
	bool hash;
	uint64_t (*digest)(const void *svc);
	pthread_t tid;

	/* The producer's line. */
	_Alignas(64) uint64_t head;   /* published: the thread may read below it */
	uint64_t phead;               /* pushed, not yet published */
	uint64_t tail_seen;           /* the producer's copy of tail */
	bool lost;                    /* a push found no room since the last seed */
	bool job_out;                 /* a job posted and not collected */
	uint32_t stop;                /* the thread ends */

	/* The seed (the producer fills it, then stores seed_gen; the base may come later:
	 * seed_base_gen == seed_gen once base and len hold it). seed_wr is stored before the
	 * fields: the thread, which may still read them for an older seed, checks it after. */
	_Alignas(64) uint32_t seed_gen;
	uint32_t seed_wr;
	uint64_t seed_pos;
	const void *seed_base;
	size_t seed_len;
	uint32_t seed_base_gen;

	/* The snapshot job (the producer fills it, then stores job_gen). */
	_Alignas(64) uint32_t job_gen;
	uint32_t job_seed;            /* the seed it was posted after (seed_gen then) */
	uint64_t job_pos;
	uint64_t job_index;
	void *job_buf;
	size_t job_cap;

	/* The thread's line. */
	_Alignas(64) uint64_t tail;   /* published: the producer may reuse below it */
	uint32_t reading;             /* the seed whose base is being read, 0: none */
	uint32_t seed_taken;          /* the last seed whose base was taken (or refused) */
	bool broken;                  /* that base was refused, or none came */
	uint32_t job_done;            /* the last job answered */
	size_t job_len;               /* its answer */
	uint64_t job_hash;            /* the copy's state hash then (conf.hash) */
	uint64_t job_digest;          /* conf.digest of the copy then */
	/* The thread's own. */
	uint32_t my_gen;              /* the seed followed */
	uint64_t my_pos;              /* its position */
	bool wait_base;               /* its base has not come yet */
	uint64_t last_index;          /* index of the last record applied since the seed */

	uint64_t c[APP_SHADOW_COUNT];
};

const char *const app_shadow_counter_names[APP_SHADOW_COUNT] = {
	[APP_SHADOW_RECORDS] = "records",
	[APP_SHADOW_SEEDS] = "seeds",
	[APP_SHADOW_SNAPSHOTS] = "snapshots",
	[APP_SHADOW_FAILED] = "failed",
	[APP_SHADOW_BROKEN] = "broken",
	[APP_SHADOW_LOST] = "lost",
	[APP_SHADOW_LAG_MAX] = "lag_max",
	[APP_SHADOW_SERIALIZE_MAX_NS] = "serialize_max_ns",
};

static inline void
cset(struct app_shadow *sh, enum app_shadow_counter c, uint64_t v)
{
	__atomic_store_n(&sh->c[c], v, __ATOMIC_RELAXED);
}

static inline void
cadd(struct app_shadow *sh, enum app_shadow_counter c, uint64_t n)
{
	cset(sh, c, sh->c[c] + n);
}

uint64_t
app_shadow_counter(const struct app_shadow *sh, enum app_shadow_counter c)
{
	CHECK(c < APP_SHADOW_COUNT);
	return __atomic_load_n(&sh->c[c], __ATOMIC_RELAXED);
}

uint64_t
app_shadow_queued(const struct app_shadow *sh)
{
	return __atomic_load_n(&sh->head, __ATOMIC_RELAXED) -
	       __atomic_load_n(&sh->tail, __ATOMIC_RELAXED);
}

#define say(sh, crit, ...) app_sayf((sh)->say, (sh)->say_ctx, (crit), __VA_ARGS__)
#define mono_ns app_mono_ns

/* --- producer --------------------------------------------------------------------------- */

static inline uint64_t
rec_len(uint32_t len)
{
	return sizeof(struct rec) + (((uint64_t)len + 7) & ~UINT64_C(7));
}

/* Room for a record of len bytes at phead: its ring offset, or UINT64_MAX. Writes the WRAP
 * record when it does not fit before the end of the ring. */
static uint64_t
reserve(struct app_shadow *sh, uint64_t len)
{
	uint64_t off = sh->phead & (sh->size - 1), skip = 0;
	if (sh->size - off < len)
		skip = sh->size - off;
	uint64_t need = skip + len;
	if (sh->size - (sh->phead - sh->tail_seen) < need) {
		sh->tail_seen = __atomic_load_n(&sh->tail, __ATOMIC_ACQUIRE);
		if (sh->size - (sh->phead - sh->tail_seen) < need)
			return UINT64_MAX;
	}
	if (skip > 0) {
		struct rec *r = (struct rec *)(sh->buf + off);
		r->type = REC_WRAP; /* at least 8 bytes remain: records are 8-aligned */
		sh->phead += skip;
		off = 0;
	}
	return off;
}

static bool
push(struct app_shadow *sh, uint32_t type, uint64_t index, uint64_t now_ns,
     const struct wire_msg_hdr *msg)
{
	if (sh->lost)
		return false;
	uint32_t mlen = msg != NULL ? msg->length : 0;
	uint64_t len = rec_len(mlen);
	CHECK(len <= sh->size / 2); /* a message is < 64 KiB, the ring >= 256 KiB */
	uint64_t off = reserve(sh, len);
	if (off == UINT64_MAX) {
		sh->lost = true;
		cadd(sh, APP_SHADOW_LOST, 1);
		return false;
	}
	struct rec *r = (struct rec *)(sh->buf + off);
	*r = (struct rec){ .type = type, .len = mlen, .index = index, .now_ns = now_ns };
	if (mlen > 0)
		memcpy(r + 1, msg, mlen);
	sh->phead += len;
	return true;
}

bool
app_shadow_push_apply(struct app_shadow *sh, uint64_t index, uint64_t now_ns,
		      const struct wire_msg_hdr *msg)
{
	return push(sh, REC_APPLY, index, now_ns, msg);
}

bool
app_shadow_push_tick(struct app_shadow *sh, uint64_t index, uint64_t now_ns)
{
	return push(sh, REC_TICK, index, now_ns, NULL);
}

void
app_shadow_publish(struct app_shadow *sh)
{
	if (sh->phead == sh->head)
		return;
	__atomic_store_n(&sh->head, sh->phead, __ATOMIC_RELEASE);
	/* The thread's tail now (one load a publish): tail_seen is otherwise refreshed only
	 * when the ring looks full, and phead - tail_seen would grow to the ring's size. */
	sh->tail_seen = __atomic_load_n(&sh->tail, __ATOMIC_ACQUIRE);
	uint64_t lag = sh->phead - sh->tail_seen; /* at most this much queued */
	if (lag > sh->c[APP_SHADOW_LAG_MAX])
		cset(sh, APP_SHADOW_LAG_MAX, lag);
}

static bool
refused(const struct app_shadow *sh)
{
	return __atomic_load_n(&sh->seed_taken, __ATOMIC_ACQUIRE) == sh->seed_gen &&
	       __atomic_load_n(&sh->broken, __ATOMIC_RELAXED);
}

bool
app_shadow_lost(const struct app_shadow *sh)
{
	return sh->lost || refused(sh);
}

bool
app_shadow_reading(const struct app_shadow *sh)
{
	return __atomic_load_n(&sh->reading, __ATOMIC_SEQ_CST) != 0;
}

bool
app_shadow_ready(const struct app_shadow *sh)
{
	return !sh->lost && __atomic_load_n(&sh->seed_taken, __ATOMIC_ACQUIRE) == sh->seed_gen &&
	       !__atomic_load_n(&sh->broken, __ATOMIC_RELAXED);
}

/* A new seed at the records pushed from now on; base_gen: whether the base is in it. */
static void
seed(struct app_shadow *sh, const void *base, size_t len, bool with_base)
{
	app_shadow_publish(sh);
	uint32_t gen = sh->seed_gen + 1;
	if (gen == 0)
		gen = 1; /* 0 means "none" in `reading` */
	__atomic_store_n(&sh->seed_wr, gen, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&sh->seed_pos, sh->phead, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->seed_base, base, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->seed_len, len, __ATOMIC_RELAXED);
	if (with_base)
		__atomic_store_n(&sh->seed_base_gen, gen, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->seed_gen, gen, __ATOMIC_SEQ_CST);
	/* The thread may still read an older seed's base, which the caller is about to let
	 * go (an install swaps it out): wait until it is done. It sees this seed when it next
	 * looks, and reads no older base after it has (app_shadow_work). */
	uint32_t r;
	while ((r = __atomic_load_n(&sh->reading, __ATOMIC_SEQ_CST)) != 0 && r != gen)
		sched_yield();
	sh->lost = false;
}

void
app_shadow_seed(struct app_shadow *sh, const void *base, size_t len)
{
	CHECK(base != NULL || len == 0);
	seed(sh, base, len, true);
}

void
app_shadow_seed_later(struct app_shadow *sh)
{
	seed(sh, NULL, 0, false);
}

void
app_shadow_seed_base(struct app_shadow *sh, const void *base, size_t len)
{
	CHECK(__atomic_load_n(&sh->seed_base_gen, __ATOMIC_RELAXED) != sh->seed_gen);
	__atomic_store_n(&sh->seed_base, base, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->seed_len, base != NULL ? len : BASE_NONE, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->seed_base_gen, sh->seed_gen, __ATOMIC_RELEASE);
}

int
app_shadow_snap_post(struct app_shadow *sh, uint64_t index, void *buf, size_t cap)
{
	CHECK(buf != NULL);
	if (sh->job_out)
		return -EBUSY;
	if (app_shadow_lost(sh))
		return -EAGAIN;
	app_shadow_publish(sh);
	sh->job_pos = sh->phead;
	sh->job_seed = sh->seed_gen;
	sh->job_index = index;
	sh->job_buf = buf;
	sh->job_cap = cap;
	sh->job_out = true;
	__atomic_store_n(&sh->job_gen, sh->job_gen + 1, __ATOMIC_RELEASE);
	return 0;
}

bool
app_shadow_snap_busy(const struct app_shadow *sh)
{
	return sh->job_out;
}

int
app_shadow_snap_poll(struct app_shadow *sh, size_t *len)
{
	CHECK(sh->job_out);
	if (__atomic_load_n(&sh->job_done, __ATOMIC_ACQUIRE) != sh->job_gen)
		return -EINPROGRESS;
	*len = sh->job_len;
	sh->job_out = false;
	return 0;
}

uint64_t
app_shadow_snap_hash(const struct app_shadow *sh)
{
	CHECK(sh->hash && !sh->job_out);
	return sh->job_hash;
}

uint64_t
app_shadow_snap_digest(const struct app_shadow *sh)
{
	CHECK(sh->digest != NULL && !sh->job_out);
	return sh->job_digest;
}

void
app_shadow_drop(struct app_shadow *sh)
{
	if (!sh->lost)
		cadd(sh, APP_SHADOW_LOST, 1);
	sh->lost = true;
}

/* --- the thread --------------------------------------------------------------------------- */

static void
null_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)dest;
	(void)msg;
}

static void
answer(struct app_shadow *sh, uint32_t gen, size_t len)
{
	sh->job_len = len;
	cadd(sh, len != 0 ? APP_SHADOW_SNAPSHOTS : APP_SHADOW_FAILED, 1);
	__atomic_store_n(&sh->job_done, gen, __ATOMIC_RELEASE);
}

/* A job posted and not answered: its number, else 0. */
static uint32_t
job_open(struct app_shadow *sh)
{
	uint32_t g = __atomic_load_n(&sh->job_gen, __ATOMIC_ACQUIRE);
	return g != sh->job_done ? g : 0;
}

/* Seed a came before seed b (numbers wrap, and skip 0). */
static inline bool
seed_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* Follow a new seed: skip what was queued before it; take its base if it is there. */
static uint32_t
take_seed(struct app_shadow *sh)
{
	uint32_t g = __atomic_load_n(&sh->seed_gen, __ATOMIC_SEQ_CST);
	if (g != sh->my_gen) {
		sh->my_gen = g;
		sh->my_pos = __atomic_load_n(&sh->seed_pos, __ATOMIC_RELAXED);
		sh->wait_base = true;
		sh->last_index = 0;
		CHECK(sh->my_pos >= sh->tail);
		__atomic_store_n(&sh->tail, sh->my_pos, __ATOMIC_RELEASE);
		/* A job posted before this seed was asked of the state before it. Its ring
		 * position does not tell: with no record between the post and the seed, it is
		 * the seed's own, and the copy is about to take the seed's base. */
		uint32_t j = job_open(sh);
		if (j != 0 && seed_before(sh->job_seed, g))
			answer(sh, j, 0);
	}
	if (!sh->wait_base || __atomic_load_n(&sh->seed_base_gen, __ATOMIC_ACQUIRE) != g)
		return 0;
	const void *base = __atomic_load_n(&sh->seed_base, __ATOMIC_RELAXED);
	size_t len = __atomic_load_n(&sh->seed_len, __ATOMIC_RELAXED);
	bool broken = false;
	if (len == BASE_NONE) {
		broken = true; /* none came: the copy is lost until the next seed */
	} else if (base != NULL) {
		__atomic_store_n(&sh->reading, g, __ATOMIC_SEQ_CST);
		/* A newer seed's fields may be read already, half written (one seed's base with
		 * another's length): seed_wr, stored before them, says so once they are read. */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&sh->seed_gen, __ATOMIC_SEQ_CST) != g ||
		    __atomic_load_n(&sh->seed_wr, __ATOMIC_SEQ_CST) != g) {
			/* Superseded: this base may be gone already. */
			__atomic_store_n(&sh->reading, 0, __ATOMIC_SEQ_CST);
			return 1;
		}
		if (sh->ops->restore(sh->svc, base, len) != 0) {
			broken = true;
			cadd(sh, APP_SHADOW_BROKEN, 1);
			say(sh, true, "the shadow copy refused a base the service took (%zu bytes): "
			    "snapshots are taken without it until the next seed", len);
		}
	}
	sh->wait_base = false;
	cadd(sh, APP_SHADOW_SEEDS, 1);
	__atomic_store_n(&sh->broken, broken, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->seed_taken, g, __ATOMIC_RELEASE);
	__atomic_store_n(&sh->reading, 0, __ATOMIC_SEQ_CST);
	return 1;
}

uint32_t
app_shadow_work(struct app_shadow *sh)
{
	uint32_t work = take_seed(sh);
	if (sh->wait_base)
		return work;
	/* head before the job: a job posted after this look is at or past it (the post
	 * publishes first), so the records up to head precede any job this call does not see.
	 * Read the other way round, a job posted between the two looks and followed by more
	 * records would be overtaken: its records applied past it, and it never answered. */
	uint64_t head = __atomic_load_n(&sh->head, __ATOMIC_ACQUIRE);
	uint32_t j = job_open(sh);
	if (j != 0 && seed_before(sh->job_seed, sh->my_gen)) {
		answer(sh, j, 0); /* asked of the state before the seed */
		j = 0;
		work++;
	}
	uint64_t limit = j != 0 ? sh->job_pos : head;
	/* The producer may have seeded since take_seed looked, and pushed and published (or
	 * posted a job) after the seed: the records past the seed's position follow its base,
	 * not the state this copy holds. The seed's number was stored before that head (or job)
	 * was published, so having read them, a look at it now sees it: take it first (next
	 * call; not idle). Else limit is at or before any later seed's position. */
	if (__atomic_load_n(&sh->seed_gen, __ATOMIC_ACQUIRE) != sh->my_gen)
		return work + 1;
	DCHECK(sh->tail <= limit);
	uint64_t tail = sh->tail;
	struct svc_sink sink = { .ctx = NULL, .emit = null_emit };
	uint32_t n = 0;
	while (tail < limit && n < APP_SHADOW_DRAIN_MAX) {
		uint64_t off = tail & (sh->size - 1);
		const struct rec *r = (const struct rec *)(sh->buf + off);
		if (r->type == REC_WRAP) {
			tail += sh->size - off;
			continue;
		}
		CHECK(r->type == REC_APPLY || r->type == REC_TICK);
		if (!sh->broken) {
			if (r->type == REC_APPLY)
				sh->ops->apply(sh->svc, r->index, r->now_ns,
					       (const struct wire_msg_hdr *)(r + 1), &sink);
			else
				sh->ops->tick(sh->svc, r->index, r->now_ns, &sink);
			sh->last_index = r->index;
		}
		tail += rec_len(r->len);
		n++;
	}
	if (n > 0 || tail != sh->tail) {
		__atomic_store_n(&sh->tail, tail, __ATOMIC_RELEASE);
		cadd(sh, APP_SHADOW_RECORDS, n);
		work += n + 1;
	}
	if (j != 0 && tail == sh->job_pos) {
		size_t len = 0;
		if (sh->broken) {
			len = 0;
		} else if (sh->last_index > sh->job_index) {
			say(sh, true, "the shadow copy applied index %llu, past the snapshot's %llu: "
			    "not serialised", (unsigned long long)sh->last_index,
			    (unsigned long long)sh->job_index);
		} else {
			uint64_t t0 = mono_ns();
			len = sh->ops->snapshot(sh->svc, sh->job_buf, sh->job_cap);
			uint64_t ns = mono_ns() - t0;
			if (sh->hash)
				sh->job_hash = sh->ops->state_hash(sh->svc);
			if (sh->digest != NULL)
				sh->job_digest = sh->digest(sh->svc);
			if (ns > sh->c[APP_SHADOW_SERIALIZE_MAX_NS])
				cset(sh, APP_SHADOW_SERIALIZE_MAX_NS, ns);
		}
		answer(sh, j, len);
		work++;
	}
	return work;
}

static void *
thread_main(void *arg)
{
	struct app_shadow *sh = arg;
	uint64_t sleep_ns = sh->idle_ns;
	while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		if (app_shadow_work(sh) != 0) {
			sleep_ns = sh->idle_ns;
			continue;
		}
		/* Idle: sleep, longer each time up to IDLE_BACKOFF_MAX × idle_ns. The copy's
		 * delay costs nothing but ring (what arrives meanwhile waits in it), and a
		 * thread that wakes 20,000 times a second costs a shared CPU a lot. */
		struct timespec ts = { .tv_sec = (time_t)(sleep_ns / 1000000000u),
				       .tv_nsec = (long)(sleep_ns % 1000000000u) };
		nanosleep(&ts, NULL);
		if (sleep_ns < sh->idle_ns * IDLE_BACKOFF_MAX)
			sleep_ns *= 2;
	}
	return NULL;
}

int
app_shadow_create(struct app_shadow **out, const struct app_shadow_conf *conf)
{
	CHECK(out != NULL && conf != NULL && conf->ops != NULL && conf->svc != NULL);
	struct app_shadow *sh = aligned_alloc(64, (sizeof(*sh) + 63) & ~(size_t)63);
	if (sh == NULL)
		return -ENOMEM;
	memset(sh, 0, sizeof(*sh));
	uint64_t size = APP_SHADOW_RING_MIN; /* a power of two: offsets are masks */
	while (size < conf->ring_bytes && size < (UINT64_C(1) << 40))
		size <<= 1;
	/* Mapped and populated now: a page fault on the shard lcore's first pass through the
	 * ring would be a stall (tens of µs each on a VM). Huge pages where the host gives them. */
	void *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		free(sh);
		return -ENOMEM;
	}
	(void)madvise(buf, size, MADV_HUGEPAGE);
	memset(buf, 0, size);
	sh->buf = buf;
	sh->size = size;
	sh->ops = conf->ops;
	sh->svc = conf->svc;
	sh->idle_ns = conf->idle_ns > 0 ? conf->idle_ns : 1;
	sh->hash = conf->hash;
	sh->digest = conf->digest;
	sh->say = conf->say;
	sh->say_ctx = conf->say_ctx;
	/* Seed 1: the copy equals the service as both stand now. */
	sh->seed_gen = sh->seed_wr = sh->seed_base_gen = sh->seed_taken = sh->my_gen = 1;
	if (conf->thread) {
		pthread_attr_t attr;
		int rc = pthread_attr_init(&attr);
		if (rc == 0 && conf->cpus != NULL)
			rc = pthread_attr_setaffinity_np(&attr, conf->cpus_size, conf->cpus);
		if (rc == 0)
			rc = pthread_create(&sh->tid, &attr, thread_main, sh);
		pthread_attr_destroy(&attr);
		if (rc != 0) {
			munmap(sh->buf, sh->size);
			free(sh);
			return -rc;
		}
		pthread_setname_np(sh->tid, "omsd-shadow");
		sh->threaded = true;
	}
	*out = sh;
	return 0;
}

void
app_shadow_destroy(struct app_shadow *sh)
{
	if (sh == NULL)
		return;
	if (sh->threaded) {
		__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
		pthread_join(sh->tid, NULL);
	}
	munmap(sh->buf, sh->size);
	free(sh);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * snapshot_stall: how long a shard lcore stalls when it snapshots a big state (issue 18).
 *
 * Three takers (--taker):
 *   fork   (the default: the shard's way, persist/pst_fork.c) the snapshot cycle only forks
 *          (pst_fork_start): the child serialises a copy-on-write image of the state
 *          (svc_ops.snapshot) into shared memory while the parent goes on; every later cycle
 *          polls it (pst_fork_poll), as the shard will. The parent's cost is the fork (page
 *          tables copied) and, in the cycles after it, a copy-on-write fault on the first
 *          write to each page it still shares with the child (the notes count them).
 *   lcore  the cycle serialises: cns_snapshot_take asks the service for snapshot_size and
 *          serialises the whole state into consensus's snapshot buffer (svc_ops.snapshot).
 *   shadow (app/app_shadow.c) a second engine of the same limits and memory kind is kept on a
 *          thread of its own: every operation a cycle applies to the engine (the ME's stream
 *          acks too) is pushed right after into the shadow's ring (app_shadow_push_apply,
 *          index: the operations applied since the seed, at the cluster time applied), and
 *          the cycle publishes once (app_shadow_publish): the copies are the cycle's cost,
 *          timed with it. The snapshot cycle only posts the job at the index it has applied
 *          (app_shadow_snap_post); the thread serialises the copy there while the cycles go
 *          on, and every later cycle polls it (app_shadow_snap_poll). The copy is seeded
 *          before the cycles from the engine as built, serialised into the snapshot buffer
 *          (app_shadow_seed; the buffer is used again once the thread has restored it). With
 *          two CPUs or more the main thread is pinned to the one it runs on and the thread
 *          to another (the notes say which; --pin off leaves both to the scheduler); the
 *          ring is --shadow-ring-mb (256) MiB.
 * Every way the host's snapshot_saved (app_flog_snapshot_saved) writes it with
 * pst_snap_write: temp file, fsync, rename, directory fsync, older snapshots removed. Since
 * the file log's writer (app_logw.c) the [persister] lcore writes the file in slices, so it
 * is written and timed here after the cycle's clock stops (--writer persister, the default);
 * --writer lcore counts the write in the cycle (the one that serialised, or with fork and
 * shadow the one that collected the child's or the thread's result), as a node without a
 * [persister] does (slice by slice there).
 *
 * Method, per service, without DPDK (the pure cores and persist only); the engines' memory
 * is pst_mem_private (private, populated, transparent huge pages asked for: --thp off
 * refuses them to the process), the snapshot buffer pst_mem_shared, in every taker:
 *   me   --orders N (1,000,000) resting limits over 16 symbols, 64 price levels a side, 64k
 *        users spread over 8 OMS streams; nothing crosses (bids below the mid, asks above),
 *        so everything rests. The load is pairs of a cancel of a random resting order and a
 *        new resting order in its place, so the book stays at N; every stream is
 *        acknowledged after each cycle, as the OMS shards do.
 *   oms  --residents N (1,000,000) hydrated users, each with two balances and --open (2)
 *        open orders (NEW_ORDER, then the ME's ACCEPTED: a live order with a reservation).
 *        The load is oms_bench's order: NEW_ORDER, ACCEPTED, FILL, DONE for a Zipf(0.99)
 *        user.
 * Then --cycles (10,000) cycles, each applying --batch (64) operations, timed with
 * CLOCK_MONOTONIC (the batch is generated before the clock is read). After --warmup cycles
 * (half of --snapshot-every unless given; not recorded) and then every --snapshot-every
 * (2,000) cycles, the cycle also takes a snapshot as the shard does, into a buffer mapped
 * once at start-up (as consensus's is); the file goes into a directory made with mkdtemp
 * under --dir (/tmp) and removed at exit. The service's snapshot is written without
 * consensus's small prefix (its members), which is a few hundred bytes. With fork, a
 * snapshot due while the last child is still running or not reaped (with shadow: while the
 * last job is out or was collected in that cycle) waits for the first cycle after
 * (delayed_cycles counts those waits; merged, due snapshots folded into one still waiting),
 * and the last child or job is waited for after the cycles.
 *
 * Checks (exit 1, never on a time): every snapshot is as long as snapshot_size said of the
 * state it holds (fork: asked right after the fork, shadow: right after the post, before
 * the next apply); the child neither failed nor found the buffer too small; the shadow
 * answered every job with bytes; the file pst_snap_load reads back has the meta written and
 * the same bytes; the first snapshot restored (svc_ops.restore) into a fresh engine of the
 * same limits has the resting orders (me) or residents (oms) and the state hash the source
 * had when it was taken (recorded after that cycle: fork, right after pst_fork_start,
 * shadow, right after app_shadow_snap_post, before the next apply); the load was served
 * (me: no reject, nothing refused; oms: no NAK, no alarm, invariants). Shadow also: the
 * seeded copy hashes as the source; the copy was never lost (app_shadow_lost false,
 * APP_SHADOW_LOST 0: a ring too small for the lag is a failure, not a figure), failed no
 * job, refused no base, serialised every snapshot posted, applied every operation pushed,
 * and ends hashing as the source.
 *
 * Last lines, one per service:
 *   bench: snapshot_stall service=me orders=N cycles=N snapshots=N snapshot_mb=N
 *          serialize_ms=N write_ms=N max_cycle_us=N p99_cycle_us=N p99_plain_cycle_us=N
 *          writer=persister|lcore taker=fork|lcore|shadow fork_us=N child_ms=N
 *          collapse_ms=N [shadow_ms=N lag_mb=N]
 *   bench: snapshot_stall service=oms residents=N ... (the same fields)
 * serialize_ms and write_ms are the largest over the snapshots (lcore: serialize includes
 * snapshot_size, as cns_snapshot_take calls it; fork: the child's time, which also asks
 * snapshot_size, = child_ms; shadow: the thread's longest svc_ops.snapshot,
 * APP_SHADOW_SERIALIZE_MAX_NS, without snapshot_size, = shadow_ms); fork_us is the longest
 * fork (0 with lcore and shadow), child_ms 0 but with fork; shadow_ms and lag_mb (the
 * shadow's APP_SHADOW_LAG_MAX: the producer's head minus the thread's tail, read at each
 * publish: the most bytes queued behind the thread; the notes' queued_max_mb,
 * app_shadow_queued after each cycle, is the same seen from the cycles)
 * end the shadow's line only, so the other takers' lines are as they were; p99_cycle_us is
 * over every recorded cycle, p99_plain_cycle_us over those that took no snapshot (with fork
 * they include the cycles after a fork, and their copy-on-write faults; common/hist.h:
 * within 3.1 %). Per-snapshot notes (not with --quiet) give each fork's time, the minor
 * faults of the cycles after it and the memory still mapped by huge pages; with shadow, the
 * seed, each post's index and each job's time from post to collection. The notes also count
 * the recorded cycles that had an involuntary context switch (the thread lost its CPU to
 * another: the noise of a shared host), give the longest cycle without one, the most CPU
 * time the main thread spent in one cycle (CLOCK_THREAD_CPUTIME_ID: its own work, without
 * the time it did not run), the cycles while a child or job was out against the others, and
 * the slowest cycles with what happened in them.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "app/app_shadow.h"
#include "common/check.h"
#include "common/hist.h"
#include "common/prng.h"
#include "me/me.h"
#include "oms/oms.h"
#include "persist/persist.h"
#include "tests/bench/me/me_bench_symbol.h"
#include "tests/bench/oms/oms_bench_msgs.h"

#define ME_SYMBOLS 16          /* books the resting orders are spread over */
#define ME_LEVELS 64           /* price levels a side they rest on */
#define ME_USERS 65536         /* users owning them */
#define ME_STREAMS 8           /* OMS shards (user % ME_STREAMS), acked after each cycle */
#define ME_MID INT64_C(1000000) /* every book's reference price: bids below, asks above */
#define BUILD_BATCH 1024       /* requests between stream acks while the ME is built */
#define OMS_SYMBOL 1
#define OMS_BASE 1             /* the symbol's base asset */
#define OMS_QUOTE 2            /* its quote asset */
#define OMS_OPEN_PX 900        /* open orders' price: the load's fills are at 1000 */
#define BATCH_MAX 65536        /* --batch bound */
#define SNAP_TERM 1            /* the term written in every snapshot's meta */
#define CHILD_WAIT_NS (UINT64_C(600) * 1000000000u) /* the last child's bound, after the cycles */
#define SHADOW_IDLE_NS 20000u  /* the shadow thread's sleep when it finds nothing to do */
#define GROWTH_PER_OP 256u     /* bound on what an operation adds to a snapshot, bytes */

/* ---- options and the run around both services ---- */

struct opts {
	bool me;                 /* run the ME */
	bool oms;                /* run the OMS */
	uint32_t orders;         /* ME: resting orders */
	uint32_t residents;      /* OMS: resident users */
	uint32_t open_per_user;  /* OMS: open orders per resident */
	uint32_t batch;          /* operations per cycle */
	uint32_t cycles;         /* cycles in all, warm-up included */
	uint32_t snapshot_every; /* cycles between snapshots */
	uint32_t warmup;         /* cycles before the first snapshot, not recorded */
	uint64_t seed;           /* prng seed of the load */
	const char *dir_parent;  /* where the snapshot directory is made */
	bool write_on_lcore;     /* --writer lcore: the file write counts in the cycle */
	enum taker {
		TAKER_FORK,      /* a forked child serialises (pst_fork) */
		TAKER_LCORE,     /* the cycle serialises */
		TAKER_SHADOW,    /* the shadow copy's thread serialises (app_shadow) */
	} taker;
	uint32_t shadow_ring_mb; /* --shadow-ring-mb: the shadow's ring */
	bool shadow_unpinned;    /* --pin off: with shadow, neither thread is pinned */
	bool thp_off;            /* --thp off: no transparent huge pages for this process */
	bool populate;           /* --populate on: the child maps the buffer in one madvise */
	bool collapse;           /* --collapse on: huge pages back after each child */
	bool quiet;              /* only the bench: lines */
};

static struct opts O;
static const char *const TAKER_NAMES[] = {
	[TAKER_FORK] = "fork",
	[TAKER_LCORE] = "lcore",
	[TAKER_SHADOW] = "shadow",
};
static char snap_root[PATH_MAX]; /* mkdtemp'ed; removed at exit */

/* Remove the files in dir, then dir. */
static void
dir_drop(const char *dir)
{
	DIR *d = opendir(dir);
	if (d != NULL) {
		struct dirent *de;
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			char path[PATH_MAX + 256];
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
}

/* Each service's snapshots go to their own directory under the root, as each shard's do
 * (pst_snap_write keeps only the newest snapshot of a directory). */
static const char *const SERVICE_DIRS[] = { "me", "oms" };

static void
root_remove(void)
{
	if (snap_root[0] == '\0')
		return;
	for (size_t i = 0; i < sizeof(SERVICE_DIRS) / sizeof(SERVICE_DIRS[0]); i++) {
		char dir[PATH_MAX + 16];
		snprintf(dir, sizeof(dir), "%s/%s", snap_root, SERVICE_DIRS[i]);
		dir_drop(dir);
	}
	dir_drop(snap_root);
	snap_root[0] = '\0';
}

/* A failed check: say which, exit 1 (the temp directory goes through atexit). */
__attribute__((noreturn, format(printf, 1, 2))) static void
fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "snapshot_stall: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static void
note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
note(const char *fmt, ...)
{
	if (O.quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static uint64_t
clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's CPU time: a cycle's, against its wall time, tells the cycle's own
 * work from the time the thread did not run (preempted, interrupts, the hypervisor). */
static uint64_t
thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The engines' memory, as the app keeps service state: private (a forked child gets a
 * copy-on-write image of it), zeroed, populated, transparent huge pages asked for. Free it
 * with pst_mem_free and the same size. */
static void *
region_alloc(size_t size)
{
	void *p = pst_mem_private(size);
	if (p == NULL)
		fail("no memory for %zu bytes: %s", size, strerror(errno));
	return p;
}

/* The calling thread's minor page faults so far: after a fork, the parent's first write to
 * each page it shares with the child is one (a copy-on-write copy). *nivcsw: its involuntary
 * context switches so far (a cycle with one lost its CPU to another thread for a while: on a
 * shared host, the noise in the longest cycles); *nvcsw: its voluntary ones (it slept). */
static uint64_t
minflt_now(uint64_t *nivcsw, uint64_t *nvcsw)
{
	struct rusage ru;
	*nivcsw = *nvcsw = 0;
	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		return 0;
	*nivcsw = (uint64_t)ru.ru_nivcsw;
	*nvcsw = (uint64_t)ru.ru_nvcsw; /* it blocked: a lock, I/O */
	return (uint64_t)ru.ru_minflt;
}

/* The reaped children's minor faults so far: fork does not copy the page-table entries of
 * shared mappings, so a child faults on each page of the snapshot buffer it writes. */
static uint64_t
minflt_children(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_CHILDREN, &ru) != 0)
		return 0;
	return (uint64_t)ru.ru_minflt;
}

/* Anonymous memory mapped by PMD-sized transparent huge pages (kB): a copy-on-write fault
 * on one splits it into 4 KiB entries, which the next fork then copies one by one. */
static uint64_t
anon_huge_kb(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	if (f == NULL)
		return 0;
	char line[256];
	unsigned long long kb = 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "AnonHugePages: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb;
}

/* --taker shadow: the shadow the drivers feed. Every message they apply to the engine in a
 * cycle is pushed right after it is applied, with the cluster time it was applied at, as the
 * shard lcore will push what it applies (NULL while they build, and with the other takers).
 * index counts the operations applied since the seed: the records' log index. */
static struct {
	struct app_shadow *sh;
	uint64_t index;
} F;

static inline void
shadow_feed(uint64_t now_ns, const struct wire_msg_hdr *msg)
{
	/* false: the copy is lost (the ring was full); the post and the end of the run fail. */
	if (F.sh != NULL)
		(void)app_shadow_push_apply(F.sh, ++F.index, now_ns, msg);
}

/* --taker shadow on a host where the process may use two CPUs or more: the main thread (the
 * shard lcore) is pinned to the CPU it runs on, and the shadow's thread to another one, so
 * the copy has a core of its own, as omsd will place it. The other takers are not pinned (a
 * forked child would inherit the main thread's CPU). */
static cpu_set_t shadow_cpus;
static bool shadow_pinned;
static int main_cpu = -1;
static int shadow_cpu = -1;

static void
shadow_place(void)
{
	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2)
		return;
	int here = sched_getcpu();
	if (here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, &allowed))
		for (here = 0; here < CPU_SETSIZE && !CPU_ISSET(here, &allowed); here++)
			;
	int other = here;
	for (int k = 1; k < CPU_SETSIZE; k++) {
		int cpu = (here + k) % CPU_SETSIZE;
		if (CPU_ISSET(cpu, &allowed)) {
			other = cpu;
			break;
		}
	}
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(here, &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0)
		fail("sched_setaffinity(%d): %s", here, strerror(errno));
	CPU_ZERO(&shadow_cpus);
	CPU_SET(other, &shadow_cpus);
	shadow_pinned = true;
	main_cpu = here;
	shadow_cpu = other;
}

/*
 * One service under test. The driver behind ctx builds the state, generates a batch (not
 * timed) and applies it (timed); the snapshot goes through svc_ops like the shard's.
 */
typedef void(gen_fn)(void *ctx);
typedef void(apply_fn)(void *ctx);
typedef uint32_t(count_fn)(const void *svc);
/* A fresh engine with the source's limits: the engine, its region_alloc memory in *memory and
 * its size in *size (pst_mem_free them). */
typedef void *(twin_fn)(void *ctx, void **memory, size_t *size);
typedef uint64_t(now_fn)(const void *ctx);

struct target {
	const char *name;          /* "me" or "oms" */
	const char *count_label;   /* "orders" or "residents" */
	const struct svc_ops *ops; /* the service's table, as consensus holds it */
	void *svc;                 /* the engine */
	void *ctx;                 /* its driver */
	gen_fn *gen;               /* build the next batch */
	apply_fn *apply;           /* apply it */
	count_fn *count;           /* resting orders / residents */
	twin_fn *twin;             /* an empty engine for the restore check */
	now_fn *now;               /* the driver's cluster time */
	void *memory;              /* the engine's memory, for --collapse */
	size_t memory_size;
	char dir[PATH_MAX + 16];   /* its snapshot directory: <root>/<name> */
};

/* One of the longest cycles, and what happened in it. */
struct slow {
	uint32_t cycle;
	uint64_t ns;
	uint64_t cpu_ns;           /* the thread's CPU time in it */
	uint64_t minflt;           /* minor faults */
	uint64_t nivcsw;           /* involuntary context switches: preempted */
	uint64_t nvcsw;            /* voluntary ones: it slept */
	bool busy;                 /* a child or job was out */
	bool snap;                 /* it forked or posted (or serialised) */
};
#define SLOWEST 6

struct result {
	uint32_t cycles;           /* recorded (after the warm-up) */
	uint32_t snapshots;        /* taken and checked */
	uint32_t delayed_cycles;   /* fork, shadow: cycles a due snapshot waited for the last
				    * child / job */
	uint32_t merged;           /* fork, shadow: due snapshots folded into one still waiting */
	uint64_t children_minflt;  /* fork: the children's minor faults, all together */
	size_t snapshot_bytes;     /* the largest */
	uint64_t size_ns_max;      /* snapshot_size alone */
	uint64_t serialize_ns_max; /* lcore: snapshot_size + snapshot; fork: the child's */
	uint64_t write_ns_max;     /* pst_snap_write */
	uint64_t collapse_ns_max;  /* --collapse: pst_mem_collapse of the engine, untimed */
	uint64_t fork_ns_max;      /* fork: pst_fork_start, the shard's stall */
	uint64_t shadow_ns_max;    /* shadow: the thread's longest serialisation */
	uint64_t lag_max;          /* shadow: APP_SHADOW_LAG_MAX (the producer's view) */
	uint64_t queued_max;       /* shadow: app_shadow_queued after a cycle, the largest */
	uint32_t preempted;        /* recorded cycles with an involuntary context switch */
	uint64_t max_nivcsw;       /* those in the longest recorded cycle */
	uint64_t quiet_max_ns;     /* the longest recorded cycle without one */
	uint64_t cpu_max_ns;       /* the most CPU time the thread spent in a recorded cycle */
	struct hist busy;          /* those while a child or job was out */
	struct hist idle;          /* the others */
	struct slow slowest[SLOWEST]; /* the longest recorded cycles, longest first */
	struct hist all;           /* every recorded cycle, ns */
	struct hist plain;         /* those without a snapshot, ns */
};

/* One snapshot, from the cycle that took it to its checks. */
struct snap {
	uint32_t number;           /* 1, 2, ... */
	uint32_t cycle;            /* the cycle that took it */
	struct pst_snap_meta meta; /* that cycle's index, term and cluster time; the length */
	size_t size;               /* snapshot_size of the state it holds */
	uint32_t count;            /* the source's orders / residents then */
	uint64_t hash;             /* its state hash then */
	uint64_t size_ns;          /* snapshot_size alone */
	uint64_t serialize_ns;     /* lcore: snapshot_size + snapshot; fork: the child's time */
	uint64_t write_ns;         /* pst_snap_write */
	bool written;              /* --writer lcore, --taker lcore: written inside the cycle */
	int write_rc;              /* its result */
	uint64_t fork_ns;          /* fork: pst_fork_start */
	uint64_t cycle_ns;         /* the cycle that took it */
	uint64_t cycle_minflt;     /* the parent's minor faults in it */
	uint32_t child_cycles;     /* fork: cycles the child's life spanned; shadow: the job's */
	uint64_t job_ns;           /* shadow: from the end of the posting cycle to the collection */
};

/* The cycles from one snapshot to the next (the next one's cycle excluded): where the
 * copy-on-write faults of a fork land. */
struct epoch {
	uint32_t cycles;           /* cycles after the snapshot's */
	uint64_t first_ns;         /* the first of them */
	uint64_t first_minflt;     /* its minor faults */
	uint64_t max_ns;           /* the longest */
	uint32_t max_at;           /* how many cycles after the snapshot's */
	uint64_t max_minflt;       /* its minor faults */
	uint64_t max_nivcsw;       /* its involuntary context switches */
	uint64_t minflt;           /* minor faults in all of them */
};

/* Outside the timing, after a snapshot is serialised: restored into a fresh engine it has the
 * count and hash the source had when it was taken. */
static void
check_restore(const struct target *t, const struct snap *s, const void *buf)
{
	void *memory;
	size_t memory_size;
	void *fresh = t->twin(t->ctx, &memory, &memory_size);
	int rc = t->ops->restore(fresh, buf, (size_t)s->meta.length);
	if (rc != 0)
		fail("%s: restoring snapshot %u failed: %d", t->name, s->number, rc);
	uint32_t got = t->count(fresh);
	if (got != s->count)
		fail("%s: restored %s %u, the source held %u", t->name, t->count_label, got,
		     s->count);
	uint64_t hash_got = t->ops->state_hash(fresh);
	if (hash_got != s->hash)
		fail("%s: restored state hash %016lx, the source's %016lx at cycle %u", t->name,
		     (unsigned long)hash_got, (unsigned long)s->hash, s->cycle);
	pst_mem_free(memory, memory_size);
}

/* Outside the timing: the newest file in the directory is this snapshot, whole. */
static void
check_file(const struct target *t, const struct pst_snap_meta *meta, const void *buf)
{
	struct pst_snap_meta got;
	void *data = NULL;
	uint32_t corrupt = 0;
	char err[256];
	int rc = pst_snap_load(t->dir, &got, &data, &corrupt, err, sizeof(err));
	if (rc != 0)
		fail("%s: pst_snap_load: %s (%s)", t->name, strerror(-rc), err);
	if (corrupt != 0)
		fail("%s: pst_snap_load found %u corrupt snapshots: %s", t->name, corrupt, err);
	if (got.length != meta->length)
		fail("%s: the file holds %lu bytes, %lu were written", t->name,
		     (unsigned long)got.length, (unsigned long)meta->length);
	if (got.last_index != meta->last_index || got.last_term != meta->last_term ||
	    got.last_time_ns != meta->last_time_ns)
		fail("%s: the file's meta (%lu, %lu, %lu) is not the one written (%lu, %lu, %lu)",
		     t->name, (unsigned long)got.last_index, (unsigned long)got.last_term,
		     (unsigned long)got.last_time_ns, (unsigned long)meta->last_index,
		     (unsigned long)meta->last_term, (unsigned long)meta->last_time_ns);
	if (memcmp(data, buf, (size_t)meta->length) != 0)
		fail("%s: the file's bytes differ from the snapshot's", t->name);
	free(data);
}

static bool
snapshot_due(uint32_t cycle)
{
	return cycle >= O.warmup && (cycle - O.warmup) % O.snapshot_every == 0;
}

/* Outside the timing, right after the cycle that took the snapshot (the state is still the
 * one it holds, whichever the taker): what the checks compare with. */
static void
snap_record(const struct target *t, struct snap *s, uint32_t number, uint32_t cycle)
{
	s->number = number;
	s->cycle = cycle;
	s->count = t->count(t->svc);
	s->hash = t->ops->state_hash(t->svc);
}

/* Outside the timing: the snapshot's len bytes are in buf; write the file unless the cycle
 * did, check it, restore the first one, count it. */
static void
snap_finish(const struct target *t, struct result *r, struct snap *s, const uint8_t *buf,
	    size_t cap, size_t len)
{
	if (s->size > cap)
		fail("%s: snapshot_size %zu outgrew the %zu-byte buffer", t->name, s->size, cap);
	if (len != s->size)
		fail("%s: snapshot %u wrote %zu bytes, snapshot_size said %zu", t->name, s->number,
		     len, s->size);
	s->meta.length = len;
	if (!s->written) {
		uint64_t a = clock_ns();
		s->write_rc = pst_snap_write(t->dir, &s->meta, buf, NULL);
		s->write_ns = clock_ns() - a;
	}
	if (s->write_rc != 0)
		fail("%s: pst_snap_write into %s: %s", t->name, t->dir, strerror(-s->write_rc));
	r->snapshots++;
	if (len > r->snapshot_bytes)
		r->snapshot_bytes = len;
	if (s->size_ns > r->size_ns_max)
		r->size_ns_max = s->size_ns;
	if (s->serialize_ns > r->serialize_ns_max)
		r->serialize_ns_max = s->serialize_ns;
	if (s->write_ns > r->write_ns_max)
		r->write_ns_max = s->write_ns;
	if (s->fork_ns > r->fork_ns_max)
		r->fork_ns_max = s->fork_ns;
	note("snapshot_stall: %s: snapshot %u at cycle %u: bytes=%zu size_ms=%.1f "
	     "serialize_ms=%.1f write_ms=%.1f cycle_us=%lu minflt=%lu fork_us=%.1f "
	     "child_cycles=%u\n",
	     t->name, s->number, s->cycle, len, (double)s->size_ns / 1e6,
	     (double)s->serialize_ns / 1e6, (double)s->write_ns / 1e6,
	     (unsigned long)(s->cycle_ns / 1000), (unsigned long)s->cycle_minflt,
	     (double)s->fork_ns / 1e3, s->child_cycles);
	check_file(t, &s->meta, buf);
	if (s->number == 1)
		check_restore(t, s, buf);
}

static void
epoch_note(const struct target *t, uint32_t number, const struct epoch *e)
{
	note("snapshot_stall: %s: after snapshot %u: cycles=%u first_cycle_us=%.1f "
	     "first_minflt=%lu max_cycle_us=%.1f at=+%u max_minflt=%lu max_nivcsw=%lu "
	     "minflt=%lu\n",
	     t->name, number, e->cycles, (double)e->first_ns / 1e3,
	     (unsigned long)e->first_minflt, (double)e->max_ns / 1e3, e->max_at,
	     (unsigned long)e->max_minflt, (unsigned long)e->max_nivcsw,
	     (unsigned long)e->minflt);
}

/* Fork: the child's result for s, outside the timing; FAILED ends the run. */
static void
child_collected(const struct target *t, struct result *r, struct snap *s,
		const struct pst_fork *f, enum pst_fork_state st, int status, const uint8_t *buf,
		size_t cap, size_t len)
{
	if (st == PST_FORK_FAILED)
		fail("%s: the child serialising snapshot %u failed (waitpid status %#x, %lu "
		     "failures)",
		     t->name, s->number, (unsigned)status, (unsigned long)f->failures);
	CHECK(st == PST_FORK_DONE);
	if (len == 0)
		fail("%s: snapshot %u did not fit the %zu-byte buffer (snapshot_size %zu)", t->name,
		     s->number, cap, s->size);
	s->serialize_ns = f->child_ns;
	snap_finish(t, r, s, buf, cap, len);
}

/* --taker shadow: the copy, its engine and its thread. */
struct shadow_copy {
	struct app_shadow *sh;
	void *svc;                 /* the second engine: the source's limits, region_alloc'ed */
	void *memory;
	size_t memory_size;
};

static void
shadow_say(void *ctx, bool crit, const char *text)
{
	const struct target *t = ctx;
	fprintf(stderr, "snapshot_stall: %s: shadow%s: %s\n", t->name, crit ? " (crit)" : "",
		text);
}

/* Outside the timing, before the cycles: a second engine of the source's limits, its shadow
 * and thread, seeded from the source as built. The seed's base is the source serialised into
 * the snapshot buffer (free until the first snapshot is posted): the thread restores it, and
 * the buffer is used again only once it has (app_shadow_ready, not reading). */
static void
shadow_start(const struct target *t, struct shadow_copy *c, uint8_t *buf, size_t cap)
{
	c->svc = t->twin(t->ctx, &c->memory, &c->memory_size);
	struct app_shadow_conf conf = {
		.ops = t->ops,
		.svc = c->svc,
		.ring_bytes = (size_t)O.shadow_ring_mb << 20,
		.thread = true,
		.idle_ns = SHADOW_IDLE_NS,
		.cpus = shadow_pinned ? &shadow_cpus : NULL,
		.cpus_size = sizeof(shadow_cpus),
		.say = shadow_say,
		.say_ctx = (void *)t,
	};
	int rc = app_shadow_create(&c->sh, &conf);
	if (rc != 0)
		fail("%s: app_shadow_create: %s", t->name, strerror(-rc));
	uint64_t a = clock_ns();
	size_t want = t->ops->snapshot_size(t->svc);
	size_t len = want <= cap ? t->ops->snapshot(t->svc, buf, cap) : 0;
	if (len == 0 || len != want)
		fail("%s: the seed serialised %zu bytes, snapshot_size said %zu (buffer %zu)",
		     t->name, len, want, cap);
	uint64_t b = clock_ns();
	app_shadow_seed(c->sh, buf, len);
	uint64_t end = b + CHILD_WAIT_NS;
	while (!app_shadow_ready(c->sh) || app_shadow_reading(c->sh)) {
		if (app_shadow_lost(c->sh))
			fail("%s: the shadow copy refused its seed (%zu bytes)", t->name, len);
		if (clock_ns() > end)
			fail("%s: the shadow has not taken its seed after %u s", t->name,
			     (unsigned)(CHILD_WAIT_NS / 1000000000u));
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 1000000 };
		nanosleep(&ts, NULL);
	}
	uint64_t ready = clock_ns();
	/* The thread has nothing to apply: the copy can be read from here. */
	uint64_t h = t->ops->state_hash(t->svc), hc = t->ops->state_hash(c->svc);
	if (h != hc)
		fail("%s: the seeded copy hashes %016lx, the source %016lx", t->name,
		     (unsigned long)hc, (unsigned long)h);
	note("snapshot_stall: %s: shadow seeded: bytes=%zu serialize_ms=%.1f restore_ms=%.1f "
	     "ring_mb=%u cpu=%d main_cpu=%d\n",
	     t->name, len, (double)(b - a) / 1e6, (double)(ready - b) / 1e6, O.shadow_ring_mb,
	     shadow_cpu, main_cpu);
	F.sh = c->sh;
	F.index = 0;
}

/* Outside the timing, after the cycles and the last job: the copy was never lost, answered
 * every job, applied every operation and ends equal to the source; its counters. */
static void
shadow_stop(const struct target *t, struct shadow_copy *c, struct result *r, uint32_t taken)
{
	/* The thread counts the records it applied after it frees their room: wait for both. */
	uint64_t end = clock_ns() + CHILD_WAIT_NS;
	while (!app_shadow_lost(c->sh) &&
	       (app_shadow_queued(c->sh) != 0 ||
		app_shadow_counter(c->sh, APP_SHADOW_RECORDS) != F.index)) {
		if (clock_ns() > end)
			fail("%s: the shadow still has %lu bytes to apply after %u s", t->name,
			     (unsigned long)app_shadow_queued(c->sh),
			     (unsigned)(CHILD_WAIT_NS / 1000000000u));
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 1000000 };
		nanosleep(&ts, NULL);
	}
	bool lost = app_shadow_lost(c->sh);
	uint64_t v[APP_SHADOW_COUNT];
	for (int k = 0; k < APP_SHADOW_COUNT; k++)
		v[k] = app_shadow_counter(c->sh, (enum app_shadow_counter)k);
	app_shadow_destroy(c->sh); /* joins the thread: the copy is still from here */
	F.sh = NULL;
	c->sh = NULL;
	r->shadow_ns_max = v[APP_SHADOW_SERIALIZE_MAX_NS];
	r->serialize_ns_max = r->shadow_ns_max;
	r->lag_max = v[APP_SHADOW_LAG_MAX];
	note("snapshot_stall: %s: shadow: records=%lu seeds=%lu snapshots=%lu failed=%lu "
	     "broken=%lu lost=%lu lag_max_mb=%.1f queued_max_mb=%.1f serialize_max_ms=%.1f\n",
	     t->name, (unsigned long)v[APP_SHADOW_RECORDS], (unsigned long)v[APP_SHADOW_SEEDS],
	     (unsigned long)v[APP_SHADOW_SNAPSHOTS], (unsigned long)v[APP_SHADOW_FAILED],
	     (unsigned long)v[APP_SHADOW_BROKEN], (unsigned long)v[APP_SHADOW_LOST],
	     (double)v[APP_SHADOW_LAG_MAX] / 1048576.0, (double)r->queued_max / 1048576.0,
	     (double)v[APP_SHADOW_SERIALIZE_MAX_NS] / 1e6);
	if (lost || v[APP_SHADOW_LOST] != 0)
		fail("%s: the shadow copy was lost (its %u MiB ring filled %lu times; "
		     "--shadow-ring-mb)", t->name, O.shadow_ring_mb,
		     (unsigned long)v[APP_SHADOW_LOST]);
	if (v[APP_SHADOW_FAILED] != 0 || v[APP_SHADOW_BROKEN] != 0)
		fail("%s: the shadow failed %lu jobs, refused %lu bases", t->name,
		     (unsigned long)v[APP_SHADOW_FAILED], (unsigned long)v[APP_SHADOW_BROKEN]);
	if (v[APP_SHADOW_SNAPSHOTS] != taken)
		fail("%s: the shadow serialised %lu snapshots, %u were posted", t->name,
		     (unsigned long)v[APP_SHADOW_SNAPSHOTS], taken);
	if (v[APP_SHADOW_RECORDS] != F.index)
		fail("%s: the shadow applied %lu records, %lu were pushed", t->name,
		     (unsigned long)v[APP_SHADOW_RECORDS], (unsigned long)F.index);
	uint64_t h = t->ops->state_hash(t->svc), hc = t->ops->state_hash(c->svc);
	if (h != hc)
		fail("%s: the copy ends hashing %016lx, the source %016lx", t->name,
		     (unsigned long)hc, (unsigned long)h);
	pst_mem_free(c->memory, c->memory_size);
}

/* Shadow: the job's answer for s, outside the timing; nothing (0 bytes) ends the run. */
static void
shadow_collected(const struct target *t, struct result *r, struct snap *s, const uint8_t *buf,
		 size_t cap, size_t len, uint64_t job_ns)
{
	if (len == 0)
		fail("%s: the shadow answered snapshot %u with nothing (superseded by a seed, the "
		     "%zu-byte buffer too small for %zu, or the copy broken or ahead)",
		     t->name, s->number, cap, s->size);
	s->job_ns = job_ns;
	note("snapshot_stall: %s: shadow job %u: job_ms=%.1f job_cycles=%u "
	     "serialize_max_ms=%.1f lag_mb=%.1f\n",
	     t->name, s->number, (double)job_ns / 1e6, s->child_cycles,
	     (double)app_shadow_counter(F.sh, APP_SHADOW_SERIALIZE_MAX_NS) / 1e6,
	     (double)app_shadow_counter(F.sh, APP_SHADOW_LAG_MAX) / 1048576.0);
	snap_finish(t, r, s, buf, cap, len);
}

static void
slow_record(struct result *r, const struct slow *x)
{
	int k = SLOWEST;
	while (k > 0 && r->slowest[k - 1].ns < x->ns)
		k--;
	if (k == SLOWEST)
		return;
	memmove(&r->slowest[k + 1], &r->slowest[k], (SLOWEST - 1 - (size_t)k) * sizeof(*x));
	r->slowest[k] = *x;
}

/* A snapshot of the state as it is now, at index: its meta and snapshot_size (timed). */
static struct snap
snap_at(struct target *t, uint64_t index)
{
	struct snap s = { 0 };
	s.meta.last_index = index;
	s.meta.last_term = SNAP_TERM;
	s.meta.last_time_ns = t->now(t->ctx);
	uint64_t a = clock_ns();
	s.size = t->ops->snapshot_size(t->svc);
	s.size_ns = clock_ns() - a;
	return s;
}

static void
run(struct target *t, struct result *r)
{
	/* Consensus's snapshot buffer is sized once at start-up (snapshot_mb); this one holds
	 * the state as built plus a quarter, plus what the load may add: up to GROWTH_PER_OP
	 * bytes an operation (a small book grows by its dedup records and retained events
	 * faster than a quarter of itself: --orders 5000 did not fit). It is shared memory, as
	 * the child writes it, and populated now so the snapshots do not count its first
	 * faults. */
	snprintf(t->dir, sizeof(t->dir), "%s/%s", snap_root, t->name);
	size_t size0 = t->ops->snapshot_size(t->svc);
	size_t cap = size0 + size0 / 4 + (size_t)O.cycles * O.batch * GROWTH_PER_OP + (1u << 20);
	uint8_t *buf = pst_mem_shared(cap);
	if (buf == NULL)
		fail("no memory for a %zu-byte snapshot buffer: %s", cap, strerror(errno));
	memset(r, 0, sizeof(*r));
	hist_init(&r->all);
	hist_init(&r->plain);
	hist_init(&r->busy);
	hist_init(&r->idle);
	uint64_t children_minflt0 = minflt_children();
	struct pst_fork f;
	int rc = pst_fork_init(&f);
	if (rc != 0)
		fail("pst_fork_init: %s", strerror(-rc));
	f.populate = O.populate ? cap : 0; /* as the shard: the child maps the buffer at once */
	note("snapshot_stall: %s: snapshot_bytes=%zu at start, buffer %zu\n", t->name, size0,
	     cap);

	struct shadow_copy sc = { 0 };
	if (O.taker == TAKER_SHADOW)
		shadow_start(t, &sc, buf, cap);

	struct snap s = { 0 };   /* the last snapshot taken */
	struct epoch e = { 0 };  /* the cycles since */
	bool child = false;      /* fork: s's child has not been collected yet */
	bool job = false;        /* shadow: s's job has not been collected yet */
	uint64_t job_t0 = 0;     /* shadow: the end of the cycle that posted it */
	bool collapse_want = false; /* fork: a child ran since the last collapse */
	bool want = false;       /* a snapshot is due and not taken yet */
	uint32_t taken = 0;
	for (uint32_t c = 0; c < O.cycles; c++) {
		if (snapshot_due(c)) {
			if (want)
				r->merged++;
			want = true;
		}
		t->gen(t->ctx);
		uint64_t sw0, vsw0;
		uint64_t flt0 = minflt_now(&sw0, &vsw0);
		uint64_t cpu0 = thread_cpu_ns();
		uint64_t t0 = clock_ns();
		t->apply(t->ctx);
		enum pst_fork_state st = PST_FORK_IDLE;
		size_t len = 0;
		int status = 0;
		bool snap = false;
		bool done = false; /* shadow: s's job collected in this cycle */
		if (O.taker == TAKER_FORK) {
			/* As the shard: collect the last child's result; a new child only once
			 * that one is reaped and its buffer written (after this cycle). */
			st = pst_fork_poll(&f, &len, &status);
			CHECK(!child || st != PST_FORK_IDLE); /* a result is never lost */
			if (st == PST_FORK_DONE && O.write_on_lcore && len == s.size) {
				/* A node without a [persister] writes on the lcore (app_logw). */
				s.meta.length = len;
				uint64_t a = clock_ns();
				s.write_rc = pst_snap_write(t->dir, &s.meta, buf, NULL);
				s.write_ns = clock_ns() - a;
				s.written = true;
			}
			snap = want && f.pid == 0 && st != PST_FORK_DONE && st != PST_FORK_FAILED;
			if (snap)
				rc = pst_fork_start(&f, t->ops->snapshot, t->svc, buf, cap, NULL, 0, 0);
		} else if (O.taker == TAKER_SHADOW) {
			/* As the shard will: the cycle's records go to the thread; collect the
			 * job out; a new one only once that one is collected and its buffer
			 * written (after this cycle). The post fixes the index (every operation
			 * applied so far); the thread serialises the copy there. */
			app_shadow_publish(sc.sh);
			if (job) {
				done = app_shadow_snap_poll(sc.sh, &len) == 0;
				if (done && O.write_on_lcore && len == s.size) {
					s.meta.length = len;
					uint64_t a = clock_ns();
					s.write_rc = pst_snap_write(t->dir, &s.meta, buf, NULL);
					s.write_ns = clock_ns() - a;
					s.written = true;
				}
			}
			snap = want && !job;
			if (snap)
				rc = app_shadow_snap_post(sc.sh, F.index, buf, cap);
		} else if (want) {
			/* cns_snapshot_take, then app_flog_snapshot_saved. */
			snap = true;
			struct snap n = snap_at(t, (uint64_t)c + 1);
			uint64_t b = clock_ns();
			len = n.size <= cap ? t->ops->snapshot(t->svc, buf, cap) : 0;
			uint64_t c2 = clock_ns();
			n.serialize_ns = n.size_ns + (c2 - b); /* snapshot_size + snapshot */
			n.meta.length = len;
			if (O.write_on_lcore && len != 0) {
				n.write_rc = pst_snap_write(t->dir, &n.meta, buf, NULL);
				n.write_ns = clock_ns() - c2;
				n.written = true;
			}
			s = n;
		}
		uint64_t cycle_ns = clock_ns() - t0;
		uint64_t cycle_cpu_ns = thread_cpu_ns() - cpu0;
		uint64_t sw1, vsw1;
		uint64_t cycle_minflt = minflt_now(&sw1, &vsw1) - flt0;
		uint64_t cycle_nivcsw = sw1 - sw0;
		uint64_t cycle_nvcsw = vsw1 - vsw0;
		if (O.taker == TAKER_SHADOW) {
			uint64_t q = app_shadow_queued(sc.sh);
			if (q > r->queued_max)
				r->queued_max = q;
		}

		if (c >= O.warmup) {
			r->cycles++;
			hist_record(&r->all, cycle_ns);
			if (cycle_ns >= r->all.max)
				r->max_nivcsw = cycle_nivcsw;
			if (cycle_nivcsw != 0)
				r->preempted++;
			else if (cycle_ns > r->quiet_max_ns)
				r->quiet_max_ns = cycle_ns;
			/* While a child or job is out (from the cycle after the one that forked or
			 * posted to the one that collected it), or not. */
			hist_record(child || job ? &r->busy : &r->idle, cycle_ns);
			if (cycle_cpu_ns > r->cpu_max_ns)
				r->cpu_max_ns = cycle_cpu_ns;
			struct slow x = {
				.cycle = c,
				.ns = cycle_ns,
				.cpu_ns = cycle_cpu_ns,
				.minflt = cycle_minflt,
				.nivcsw = cycle_nivcsw,
				.nvcsw = cycle_nvcsw,
				.busy = child || job,
				.snap = snap,
			};
			slow_record(r, &x);
			if (!snap)
				hist_record(&r->plain, cycle_ns);
		}
		if (want && !snap)
			r->delayed_cycles++;
		if (!snap && taken > 0) {
			if (e.cycles == 0) {
				e.first_ns = cycle_ns;
				e.first_minflt = cycle_minflt;
			}
			e.cycles++;
			e.minflt += cycle_minflt;
			if (cycle_ns > e.max_ns) {
				e.max_ns = cycle_ns;
				e.max_at = e.cycles;
				e.max_minflt = cycle_minflt;
				e.max_nivcsw = cycle_nivcsw;
			}
		}
		if (child) {
			s.child_cycles++;
			if (st == PST_FORK_DONE || st == PST_FORK_FAILED) {
				child = false;
				child_collected(t, r, &s, &f, st, status, buf, cap, len);
			}
		}
		if (job) {
			s.child_cycles++;
			if (done) {
				job = false;
				shadow_collected(t, r, &s, buf, cap, len, t0 + cycle_ns - job_t0);
			}
		}
		if (O.taker == TAKER_FORK && O.collapse && collapse_want && f.pid == 0) {
			/* The child is reaped: put the engine back on huge pages, as omsd's main
			 * lcore does (app_shard_collapse_tick) on a thread of its own; here,
			 * outside the cycle's clock. */
			collapse_want = false;
			uint64_t a = clock_ns();
			int crc = pst_mem_collapse(t->memory, t->memory_size);
			uint64_t ns = clock_ns() - a;
			if (ns > r->collapse_ns_max)
				r->collapse_ns_max = ns;
			note("snapshot_stall: %s: collapse after snapshot %u: rc=%d ms=%.1f "
			     "anon_huge_mb=%lu\n", t->name, taken, crc, (double)ns / 1e6,
			     (unsigned long)(anon_huge_kb() / 1024));
		}
		if (!snap)
			continue;
		if (taken > 0)
			epoch_note(t, taken, &e);
		e = (struct epoch){ 0 };
		want = false;
		taken++;
		if (O.taker == TAKER_SHADOW) {
			if (rc != 0)
				fail("%s: app_shadow_snap_post: %s%s", t->name, strerror(-rc),
				     rc == -EAGAIN ? " (the shadow copy was lost: --shadow-ring-mb)"
						   : "");
			/* Before the next apply: the state the job's index holds. */
			s = snap_at(t, F.index);
			job = true;
			job_t0 = t0 + cycle_ns;
		}
		if (O.taker == TAKER_FORK) {
			if (rc != 0)
				fail("%s: pst_fork_start: %s", t->name, strerror(-rc));
			/* Before the next apply: the state the child's image holds. */
			s = snap_at(t, (uint64_t)c + 1);
			s.fork_ns = f.fork_ns;
			child = true;
			collapse_want = true;
		}
		s.cycle_ns = cycle_ns;
		s.cycle_minflt = cycle_minflt;
		snap_record(t, &s, taken, c);
		if (O.taker == TAKER_SHADOW)
			note("snapshot_stall: %s: post %u at cycle %u: index=%lu cycle_us=%.1f "
			     "minflt=%lu queued_kb=%lu\n",
			     t->name, taken, c, (unsigned long)F.index, (double)cycle_ns / 1e3,
			     (unsigned long)cycle_minflt,
			     (unsigned long)(app_shadow_queued(sc.sh) / 1024));
		else if (O.taker == TAKER_FORK)
			note("snapshot_stall: %s: fork %u at cycle %u: fork_us=%.1f cycle_us=%.1f "
			     "minflt=%lu anon_huge_mb=%lu\n",
			     t->name, taken, c, (double)s.fork_ns / 1e3, (double)cycle_ns / 1e3,
			     (unsigned long)cycle_minflt,
			     (unsigned long)(O.quiet ? 0 : anon_huge_kb() / 1024));
		else
			snap_finish(t, r, &s, buf, cap, len);
	}
	/* The last child may still be serialising: its snapshot is checked like the others. */
	uint64_t end = clock_ns() + CHILD_WAIT_NS;
	while (child) {
		size_t len = 0;
		int status = 0;
		enum pst_fork_state st = pst_fork_poll(&f, &len, &status);
		if (st == PST_FORK_DONE || st == PST_FORK_FAILED) {
			child = false;
			child_collected(t, r, &s, &f, st, status, buf, cap, len);
		} else {
			if (clock_ns() > end)
				fail("%s: the child serialising snapshot %u still runs after %u s",
				     t->name, s.number, (unsigned)(CHILD_WAIT_NS / 1000000000u));
			struct timespec ts = { .tv_sec = 0, .tv_nsec = 1000000 };
			nanosleep(&ts, NULL);
		}
	}
	/* And the last job. */
	end = clock_ns() + CHILD_WAIT_NS;
	while (job) {
		size_t len = 0;
		if (app_shadow_snap_poll(sc.sh, &len) == 0) {
			job = false;
			shadow_collected(t, r, &s, buf, cap, len, clock_ns() - job_t0);
		} else {
			if (clock_ns() > end)
				fail("%s: the shadow still serialises snapshot %u after %u s",
				     t->name, s.number, (unsigned)(CHILD_WAIT_NS / 1000000000u));
			struct timespec ts = { .tv_sec = 0, .tv_nsec = 1000000 };
			nanosleep(&ts, NULL);
		}
	}
	if (O.taker == TAKER_SHADOW)
		shadow_stop(t, &sc, r, taken);
	if (taken > 0)
		epoch_note(t, taken, &e);
	if (f.failures != 0)
		fail("%s: %lu children failed", t->name, (unsigned long)f.failures);
	pst_fork_fini(&f); /* reaps the last child */
	r->children_minflt = minflt_children() - children_minflt0;
	pst_mem_free(buf, cap);
	if (r->snapshots == 0)
		fail("%s: no snapshot was taken (--warmup %u, --cycles %u)", t->name, O.warmup,
		     O.cycles);
	if (r->snapshots != taken)
		fail("%s: %u snapshots taken, %u checked", t->name, taken, r->snapshots);
}

static void
report(const struct target *t, const struct result *r, uint32_t count, double build_s)
{
	note("snapshot_stall: %s: %s=%u build_s=%.1f cycles=%u snapshots=%u snapshot_bytes=%zu "
	     "size_ms=%.1f serialize_ms=%.1f write_ms=%.1f p50_plain_cycle_us=%.1f "
	     "max_plain_cycle_us=%.1f delayed_cycles=%u merged=%u children_minflt=%lu "
	     "preempted_cycles=%u max_cycle_nivcsw=%lu max_quiet_cycle_us=%.1f "
	     "max_cycle_cpu_us=%.1f dir=%s\n",
	     t->name, t->count_label, count, build_s, r->cycles, r->snapshots, r->snapshot_bytes,
	     (double)r->size_ns_max / 1e6, (double)r->serialize_ns_max / 1e6,
	     (double)r->write_ns_max / 1e6, (double)hist_percentile(&r->plain, 50) / 1e3,
	     (double)r->plain.max / 1e3, r->delayed_cycles, r->merged,
	     (unsigned long)r->children_minflt, r->preempted, (unsigned long)r->max_nivcsw,
	     (double)r->quiet_max_ns / 1e3, (double)r->cpu_max_ns / 1e3, O.dir_parent);
	note("snapshot_stall: %s: cycles while a child or job was out: %lu p50_us=%.1f "
	     "p99_us=%.1f max_us=%.1f; the others: %lu p50_us=%.1f p99_us=%.1f max_us=%.1f\n",
	     t->name, (unsigned long)r->busy.count, (double)hist_percentile(&r->busy, 50) / 1e3,
	     (double)hist_percentile(&r->busy, 99) / 1e3, (double)r->busy.max / 1e3,
	     (unsigned long)r->idle.count, (double)hist_percentile(&r->idle, 50) / 1e3,
	     (double)hist_percentile(&r->idle, 99) / 1e3, (double)r->idle.max / 1e3);
	for (int k = 0; k < SLOWEST && r->slowest[k].ns != 0; k++) {
		const struct slow *x = &r->slowest[k];
		note("snapshot_stall: %s: slow cycle %u: us=%.1f cpu_us=%.1f minflt=%lu nivcsw=%lu "
		     "nvcsw=%lu %s%s\n",
		     t->name, x->cycle, (double)x->ns / 1e3, (double)x->cpu_ns / 1e3,
		     (unsigned long)x->minflt,
		     (unsigned long)x->nivcsw, (unsigned long)x->nvcsw,
		     x->busy ? "out" : "none out", x->snap ? " snapshot" : "");
	}
	printf("bench: snapshot_stall service=%s %s=%u cycles=%u snapshots=%u snapshot_mb=%.1f "
	       "serialize_ms=%.1f write_ms=%.1f max_cycle_us=%lu p99_cycle_us=%lu "
	       "p99_plain_cycle_us=%lu writer=%s taker=%s fork_us=%lu child_ms=%.1f "
	       "collapse_ms=%.1f",
	       t->name, t->count_label, count, r->cycles, r->snapshots,
	       (double)r->snapshot_bytes / 1048576.0, (double)r->serialize_ns_max / 1e6,
	       (double)r->write_ns_max / 1e6, (unsigned long)(r->all.max / 1000),
	       (unsigned long)(hist_percentile(&r->all, 99) / 1000),
	       (unsigned long)(hist_percentile(&r->plain, 99) / 1000),
	       O.write_on_lcore ? "lcore" : "persister", TAKER_NAMES[O.taker],
	       (unsigned long)(r->fork_ns_max / 1000),
	       O.taker == TAKER_FORK ? (double)r->serialize_ns_max / 1e6 : 0.0,
	       (double)r->collapse_ns_max / 1e6);
	/* Only the shadow's line has these: the other takers' lines stay as they were. */
	if (O.taker == TAKER_SHADOW)
		printf(" shadow_ms=%.1f lag_mb=%.1f", (double)r->shadow_ns_max / 1e6,
		       (double)r->lag_max / 1048576.0);
	printf("\n");
	fflush(stdout);
}

/* ---- the matching engine ---- */

struct live_order {
	uint64_t user;   /* owner */
	uint64_t seq;    /* its orderId's user_seq */
	uint32_t symbol; /* book */
	uint32_t reserved;
};

union book_req {
	struct wire_submit submit; /* a new resting order */
	struct wire_modify modify; /* a cancel */
};

struct book_driver {
	struct me *me;
	void *memory;                     /* region_alloc'ed */
	size_t memory_size;               /* me_footprint bytes */
	struct me_limits limits;
	struct prng prng;
	uint64_t now_ns;                  /* cluster time */
	uint64_t next_seq;                /* orderId user_seq, one counter for every user */
	uint64_t last_seq[ME_STREAMS];    /* newest event seq per stream, acked each cycle */
	struct live_order *live;             /* the resting orders, O.orders of them */
	union book_req *batch;              /* the next cycle's requests */
	struct svc_sink sink;
};

static void
book_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct book_driver *d = ctx;
	(void)dest;
	if (msg->type != WIRE_ME_EVENT)
		return;
	const struct wire_me_event *e = (const struct wire_me_event *)(const void *)msg;
	CHECK(e->hdr.shard < ME_STREAMS);
	d->last_seq[e->hdr.shard] = e->seq;
}

/* A new resting order in live slot i: bids 1..ME_LEVELS ticks below the mid, asks above. */
static void
rest_gen(struct book_driver *d, struct wire_submit *s, uint32_t i)
{
	uint64_t user = 1 + prng_below(&d->prng, ME_USERS);
	uint32_t symbol = 1 + (uint32_t)prng_below(&d->prng, ME_SYMBOLS);
	bool buy = prng_chance(&d->prng, 1, 2);
	int64_t away = 1 + (int64_t)prng_below(&d->prng, ME_LEVELS);
	memset(s, 0, sizeof(*s));
	wire_hdr_init(&s->hdr, WIRE_SUBMIT, 0);
	s->oid = wire_oid_make((uint16_t)(user % ME_STREAMS), user, ++d->next_seq);
	s->symbol = symbol;
	s->side = buy ? WIRE_SIDE_BUY : WIRE_SIDE_SELL;
	s->ord_type = WIRE_ORD_LIMIT;
	s->tif = WIRE_TIF_GTC;
	s->px = buy ? ME_MID - away : ME_MID + away;
	s->qty = 1 + (int64_t)prng_below(&d->prng, 10);
	d->live[i] = (struct live_order){ .user = user, .seq = d->next_seq, .symbol = symbol };
}

static void
cancel_gen(struct book_driver *d, struct wire_modify *m, uint32_t i)
{
	const struct live_order *l = &d->live[i];
	uint16_t stream = (uint16_t)(l->user % ME_STREAMS);
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_CANCEL_TO_ME, 0);
	m->req = wire_oid_make(stream, l->user, ++d->next_seq);
	m->target = wire_oid_make(stream, l->user, l->seq);
	m->symbol = l->symbol;
}

static void
acks_send(struct book_driver *d)
{
	for (uint16_t s = 0; s < ME_STREAMS; s++) {
		struct wire_stream_ack a;
		memset(&a, 0, sizeof(a));
		wire_hdr_init(&a.hdr, WIRE_STREAM_ACK, 0);
		a.stream = s;
		a.seq = d->last_seq[s];
		me_apply(d->me, d->now_ns, &a.hdr, &d->sink);
		shadow_feed(d->now_ns, &a.hdr);
	}
}

/* Pairs: cancel a random resting order, rest a new one in its slot (the book stays at N). */
static void
book_gen(void *ctx)
{
	struct book_driver *d = ctx;
	for (uint32_t k = 0; k + 1 < O.batch; k += 2) {
		uint32_t i = (uint32_t)prng_below(&d->prng, O.orders);
		cancel_gen(d, &d->batch[k].modify, i);
		rest_gen(d, &d->batch[k + 1].submit, i);
	}
}

static void
book_apply(void *ctx)
{
	struct book_driver *d = ctx;
	for (uint32_t k = 0; k < O.batch; k++) {
		d->now_ns += 100;
		me_apply(d->me, d->now_ns, &d->batch[k].submit.hdr, &d->sink);
		shadow_feed(d->now_ns, &d->batch[k].submit.hdr);
	}
	acks_send(d);
}

static uint32_t
book_count(const void *svc)
{
	return me_orders_resting(svc);
}

static void *
book_twin(void *ctx, void **memory, size_t *size)
{
	struct book_driver *d = ctx;
	struct me *me;
	*size = me_footprint(&d->limits);
	*memory = region_alloc(*size);
	if (me_init(&me, *memory, &d->limits) != 0)
		fail("me: me_init of the restore twin failed");
	return me;
}

static uint64_t
book_now(const void *ctx)
{
	return ((const struct book_driver *)ctx)->now_ns;
}

static void
book_build(struct book_driver *d)
{
	memset(d, 0, sizeof(*d));
	d->limits = (struct me_limits){
		.shard = 0,
		.streams_max = ME_STREAMS,
		.symbols_max = ME_SYMBOLS,
		/* Resting orders, plus the finished orders and cancel requests of one build
		 * batch or cycle until the ack that follows releases them. */
		.orders_max = O.orders + 2 * BUILD_BATCH + 2 * O.batch + 1024,
		.users_max = ME_USERS,
		.levels_max = ME_SYMBOLS * 2 * ME_LEVELS,
		.levels_side_max = ME_LEVELS,
		.gtd_max = 16,
		.events_max = 4096,   /* a build batch makes ~2 events a request over 8 streams */
		.events_reserve = 512,
	};
	size_t fp = me_footprint(&d->limits);
	if (fp == 0)
		fail("me: limits refused for %u orders", O.orders);
	d->memory_size = fp;
	d->memory = region_alloc(fp);
	if (me_init(&d->me, d->memory, &d->limits) != 0)
		fail("me: me_init failed");
	prng_seed(&d->prng, O.seed);
	d->sink = (struct svc_sink){ .ctx = d, .emit = book_emit };
	d->now_ns = 1000000000;
	d->live = calloc(O.orders, sizeof(*d->live));
	d->batch = calloc(BUILD_BATCH > O.batch ? BUILD_BATCH : O.batch, sizeof(*d->batch));
	if (d->live == NULL || d->batch == NULL)
		fail("me: no memory for the driver");
	for (uint32_t s = 1; s <= ME_SYMBOLS; s++) {
		struct wire_symbol_config c;
		me_bench_symbol_init(&c, s, ME_MID);
		me_apply(d->me, d->now_ns, &c.hdr, &d->sink);
	}
	for (uint32_t done = 0; done < O.orders;) {
		uint32_t n = O.orders - done < BUILD_BATCH ? O.orders - done : BUILD_BATCH;
		for (uint32_t k = 0; k < n; k++)
			rest_gen(d, &d->batch[k].submit, done + k);
		for (uint32_t k = 0; k < n; k++) {
			d->now_ns += 100;
			me_apply(d->me, d->now_ns, &d->batch[k].submit.hdr, &d->sink);
		}
		acks_send(d);
		done += n;
	}
	if (me_orders_resting(d->me) != O.orders)
		fail("me: %u orders resting after the build, want %u", me_orders_resting(d->me),
		     O.orders);
	note("snapshot_stall: me: footprint_mb=%.1f records=%u\n", (double)fp / 1048576.0,
	     me_records_used(d->me));
}

/* The load was served: nothing refused, rejected or dropped, and the book is still N. */
static void
book_check(const struct book_driver *d)
{
	static const enum me_counter never[] = {
		ME_C_REJECTED,     ME_C_MODIFY_REJECTED, ME_C_BACKPRESSURE,
		ME_C_RETENTION_STOP, ME_C_EVENTS_OVERRUN, ME_C_CONFIG_REJECTED,
		ME_C_IGNORED,      ME_C_STALE_REQUESTS,  ME_C_TRADES,
	};
	for (size_t i = 0; i < ARRAY_SIZE(never); i++)
		if (me_counter(d->me, never[i]) != 0)
			fail("me: %s: %lu, want 0", me_counter_label(never[i]),
			     (unsigned long)me_counter(d->me, never[i]));
	uint64_t cancels = (uint64_t)O.cycles * (O.batch / 2);
	if (me_counter(d->me, ME_C_MODIFIES) != cancels)
		fail("me: %lu cancels applied, want %lu",
		     (unsigned long)me_counter(d->me, ME_C_MODIFIES), (unsigned long)cancels);
	if (me_orders_resting(d->me) != O.orders)
		fail("me: %u orders resting after the load, want %u", me_orders_resting(d->me),
		     O.orders);
}

static void
bench_me(void)
{
	static struct book_driver d;
	static struct result r;
	uint64_t a = clock_ns();
	book_build(&d);
	double build_s = (double)(clock_ns() - a) / 1e9;
	struct target t = {
		.name = "me",
		.count_label = "orders",
		.ops = &me_svc_ops,
		.svc = d.me,
		.ctx = &d,
		.gen = book_gen,
		.apply = book_apply,
		.count = book_count,
		.twin = book_twin,
		.now = book_now,
		.memory = d.memory,
		.memory_size = d.memory_size,
	};
	run(&t, &r);
	book_check(&d);
	report(&t, &r, O.orders, build_s);
	free(d.batch);
	free(d.live);
	pst_mem_free(d.memory, d.memory_size);
}

/* ---- the OMS ---- */


struct users_driver {
	struct oms *oms;
	void *memory;              /* region_alloc'ed */
	size_t memory_size;        /* oms_footprint bytes */
	struct oms_limits limits;
	struct prng prng;
	double *zipf_cdf;          /* Zipf(0.99) over the residents, cumulative, unnormalised */
	uint64_t now_ns;           /* cluster time */
	uint64_t me_seq;           /* ME stream seq of the events we feed */
	uint64_t cl_ord_id;        /* client order ids, one counter for every user */
	uint64_t orders;           /* load orders applied */
	struct wire_oid oid;       /* the last SUBMIT's orderId */
	uint64_t *users;           /* the next cycle's users */
	struct oms_bench_msgs m;
	struct svc_sink sink;
};

static void
users_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct users_driver *d = ctx;
	(void)dest;
	if (msg->type == WIRE_SUBMIT)
		d->oid = ((const struct wire_submit *)(const void *)msg)->oid;
}


/* NEW_ORDER: the reservation held, the SUBMIT out; the caller applies the ME's answer. */
static void
order_open(struct users_driver *d, uint64_t user, uint8_t side, int64_t px)
{
	struct oms_bench_msgs *m = &d->m;
	d->now_ns += 250;
	m->no.user = user;
	m->no.cl_ord_id = ++d->cl_ord_id;
	m->no.side = side;
	m->no.px = px;
	oms_apply(d->oms, d->now_ns, &m->no.hdr, &d->sink);
	shadow_feed(d->now_ns, &m->no.hdr);
	m->fill.oid = m->rest.oid = d->oid;
	m->fill.side = m->rest.side = side;
}

/* An order left open: it rests at px. */
static void
order_rest(struct users_driver *d, uint64_t user, uint8_t side, int64_t px)
{
	order_open(d, user, side, px);
	d->m.rest.px = px;
	d->m.rest.seq = ++d->me_seq;
	oms_apply(d->oms, d->now_ns, &d->m.rest.hdr, &d->sink);
	shadow_feed(d->now_ns, &d->m.rest.hdr);
}

/* oms_bench's order: filled whole at 1000 as taker (entered and done in one event). */
static void
order_one(struct users_driver *d, uint64_t user, uint8_t side)
{
	order_open(d, user, side, 1000);
	d->m.fill.seq = ++d->me_seq;
	oms_apply(d->oms, d->now_ns, &d->m.fill.hdr, &d->sink);
	shadow_feed(d->now_ns, &d->m.fill.hdr);
}

static uint64_t
zipf_user(struct users_driver *d)
{
	uint32_t n = O.residents;
	double x = (double)(prng_next(&d->prng) >> 11) * 0x1.0p-53 * d->zipf_cdf[n - 1];
	uint32_t lo = 0, hi = n - 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (d->zipf_cdf[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* oms_bench's fixed permutation, so the hot users are spread over the table. */
	return 1 + ((uint64_t)lo * 48271u) % n;
}

static void
users_gen(void *ctx)
{
	struct users_driver *d = ctx;
	for (uint32_t k = 0; k < O.batch; k++)
		d->users[k] = zipf_user(d);
}

static void
users_apply(void *ctx)
{
	struct users_driver *d = ctx;
	for (uint32_t k = 0; k < O.batch; k++) {
		order_one(d, d->users[k], (d->orders & 1) ? WIRE_SIDE_SELL : WIRE_SIDE_BUY);
		d->orders++;
	}
}

static uint32_t
users_count(const void *svc)
{
	return oms_resident_count(svc);
}

static void *
users_twin(void *ctx, void **memory, size_t *size)
{
	struct users_driver *d = ctx;
	struct oms *oms;
	*size = oms_footprint(&d->limits);
	*memory = region_alloc(*size); /* zeroed */
	if (oms_init(&oms, *memory, &d->limits) != 0)
		fail("oms: oms_init of the restore twin failed");
	return oms;
}

static uint64_t
users_now(const void *ctx)
{
	return ((const struct users_driver *)ctx)->now_ns;
}

static void
users_build(struct users_driver *d)
{
	memset(d, 0, sizeof(*d));
	struct oms_limits *l = &d->limits;
	oms_limits_default(l);
	l->users_max = O.residents;
	l->flush_headroom = 1024;
	l->assets_per_user = 2;
	l->orders_max = O.residents * O.open_per_user + 65536;
	l->orders_per_user = O.open_per_user + 64;
	l->inflight_max = 65536;
	l->dedup_per_user = 8;
	l->me_shards_max = 1;
	l->ttl_ns = UINT64_C(3600) * 1000000000u; /* nobody is evicted during the run */
	l->reconcile_interval_ns = 0;
	l->writeback_interval_ns = 0;
	l->stream_ack_every = 256;
	for (int t = 0; t < OMS_TIERS_MAX; t++)
		l->tiers[t] = (struct oms_tier){ 0, 0 };
	size_t fp = oms_footprint(l);
	if (fp == 0)
		fail("oms: limits refused for %u residents", O.residents);
	d->memory_size = fp;
	d->memory = region_alloc(fp); /* zeroed */
	if (oms_init(&d->oms, d->memory, l) != 0)
		fail("oms: oms_init failed");
	prng_seed(&d->prng, O.seed);
	d->sink = (struct svc_sink){ .ctx = d, .emit = users_emit };
	d->now_ns = 1000000000;
	d->users = calloc(O.batch, sizeof(*d->users));
	d->zipf_cdf = malloc(sizeof(double) * O.residents);
	if (d->users == NULL || d->zipf_cdf == NULL)
		fail("oms: no memory for the driver");
	double sum = 0;
	for (uint32_t k = 0; k < O.residents; k++) {
		sum += 1.0 / pow((double)(k + 1), 0.99);
		d->zipf_cdf[k] = sum;
	}
	oms_bench_msgs_init(&d->m, OMS_SYMBOL);

	struct wire_symbol_config sc;
	oms_bench_symbol_init(&sc, OMS_SYMBOL, OMS_BASE, OMS_QUOTE);
	oms_apply(d->oms, d->now_ns, &sc.hdr, &d->sink);
	struct wire_hydrate_user hu;
	oms_bench_hydrate_init(&hu, OMS_BASE, OMS_QUOTE);
	/* Each is a hydrate-ahead, whose claim epoch must be fresh (docs/fencing.md). */
	for (uint64_t u = 1; u <= O.residents; u++) {
		hu.state.user = u;
		hu.epoch = u;
		oms_apply(d->oms, d->now_ns, &hu.hdr, &d->sink);
		for (uint32_t k = 0; k < O.open_per_user; k++)
			order_rest(d, u, (k & 1) ? WIRE_SIDE_SELL : WIRE_SIDE_BUY, OMS_OPEN_PX);
	}
	if (oms_resident_count(d->oms) != O.residents)
		fail("oms: %u users resident after hydration, want %u",
		     oms_resident_count(d->oms), O.residents);
	if (oms_counter_get(d->oms, OMS_C_NAKS) != 0 || oms_inflight_count(d->oms) != 0)
		fail("oms: the open orders were not all accepted (naks %lu, in flight %u)",
		     (unsigned long)oms_counter_get(d->oms, OMS_C_NAKS),
		     oms_inflight_count(d->oms));
	note("snapshot_stall: oms: footprint_mb=%.1f open_orders=%lu\n", (double)fp / 1048576.0,
	     (unsigned long)O.residents * O.open_per_user);
}

/* The load was served: every order filled, no NAK, no alarm, residents and invariants. */
static void
users_check(const struct users_driver *d)
{
	if (oms_check_invariants(d->oms) != 0)
		fail("oms: invariants broken");
	if (oms_inflight_count(d->oms) != 0)
		fail("oms: %u sagas still in flight", oms_inflight_count(d->oms));
	if (oms_counter_get(d->oms, OMS_C_NAKS) != 0)
		fail("oms: %lu NAKs", (unsigned long)oms_counter_get(d->oms, OMS_C_NAKS));
	if (oms_counter_get(d->oms, OMS_C_FILLS) != d->orders)
		fail("oms: %lu fills, want %lu",
		     (unsigned long)oms_counter_get(d->oms, OMS_C_FILLS), (unsigned long)d->orders);
	for (uint32_t c = 0; c < OMS_C_COUNT; c++) {
		const char *name = oms_counter_name((enum oms_counter)c);
		uint64_t v = oms_counter_get(d->oms, (enum oms_counter)c);
		if (strncmp(name, "alarm_", 6) == 0 && v != 0)
			fail("oms: %s: %lu, want 0", name, (unsigned long)v);
	}
	if (oms_resident_count(d->oms) != O.residents)
		fail("oms: %u residents after the load, want %u", oms_resident_count(d->oms),
		     O.residents);
}

static void
bench_oms(void)
{
	static struct users_driver d;
	static struct result r;
	uint64_t a = clock_ns();
	users_build(&d);
	double build_s = (double)(clock_ns() - a) / 1e9;
	struct target t = {
		.name = "oms",
		.count_label = "residents",
		.ops = &oms_svc_ops,
		.svc = d.oms,
		.ctx = &d,
		.gen = users_gen,
		.apply = users_apply,
		.count = users_count,
		.twin = users_twin,
		.now = users_now,
		.memory = d.memory,
		.memory_size = d.memory_size,
	};
	run(&t, &r);
	users_check(&d);
	report(&t, &r, O.residents, build_s);
	free(d.zipf_cdf);
	free(d.users);
	pst_mem_free(d.memory, d.memory_size);
}

/* ---- main ---- */

static void
usage(void)
{
	fprintf(stderr,
		"usage: snapshot_stall [--service me|oms|both] [--orders N] [--residents N]\n"
		"                      [--open N] [--batch N (even)] [--cycles N]\n"
		"                      [--snapshot-every N] [--warmup N] [--seed N] [--dir DIR]\n"
		"                      [--writer persister|lcore] [--taker fork|lcore|shadow]\n"
		"                      [--thp on|off] [--populate on|off] [--collapse on|off]\n"
		"                      [--shadow-ring-mb N] [--pin on|off]\n"
		"                      [--quiet]\n");
	exit(2);
}

static uint32_t
arg_u32(const char *s, uint32_t lo, uint32_t hi)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		usage();
	return (uint32_t)v;
}

int
main(int argc, char **argv)
{
	O = (struct opts){
		.me = true,
		.oms = true,
		.orders = 1000000,
		.residents = 1000000,
		.open_per_user = 2,
		.batch = 64,
		.cycles = 10000,
		.snapshot_every = 2000,
		.warmup = UINT32_MAX, /* half of snapshot_every unless given */
		.seed = 1,
		.dir_parent = "/tmp",
		.taker = TAKER_FORK, /* the shard's way (pst_fork) */
		.shadow_ring_mb = 256,
		.populate = true, /* the shard's way too */
		.collapse = true, /* and this (main does it there, on its own thread) */
	};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--quiet") == 0) {
			O.quiet = true;
			continue;
		}
		if (v == NULL)
			usage();
		i++;
		if (strcmp(a, "--service") == 0) {
			O.me = strcmp(v, "me") == 0 || strcmp(v, "both") == 0;
			O.oms = strcmp(v, "oms") == 0 || strcmp(v, "both") == 0;
			if (!O.me && !O.oms)
				usage();
		} else if (strcmp(a, "--orders") == 0) {
			O.orders = arg_u32(v, 1, 1u << 28);
		} else if (strcmp(a, "--residents") == 0) {
			O.residents = arg_u32(v, 1, 1u << 26);
		} else if (strcmp(a, "--open") == 0) {
			O.open_per_user = arg_u32(v, 0, 32);
		} else if (strcmp(a, "--batch") == 0) {
			O.batch = arg_u32(v, 2, BATCH_MAX);
		} else if (strcmp(a, "--cycles") == 0) {
			O.cycles = arg_u32(v, 1, UINT32_MAX - 1);
		} else if (strcmp(a, "--snapshot-every") == 0) {
			O.snapshot_every = arg_u32(v, 1, UINT32_MAX - 1);
		} else if (strcmp(a, "--warmup") == 0) {
			O.warmup = arg_u32(v, 0, UINT32_MAX - 1);
		} else if (strcmp(a, "--seed") == 0) {
			O.seed = arg_u32(v, 0, UINT32_MAX);
		} else if (strcmp(a, "--dir") == 0) {
			O.dir_parent = v;
		} else if (strcmp(a, "--writer") == 0) {
			if (strcmp(v, "lcore") != 0 && strcmp(v, "persister") != 0)
				usage();
			O.write_on_lcore = strcmp(v, "lcore") == 0;
		} else if (strcmp(a, "--taker") == 0) {
			if (strcmp(v, "fork") == 0)
				O.taker = TAKER_FORK;
			else if (strcmp(v, "lcore") == 0)
				O.taker = TAKER_LCORE;
			else if (strcmp(v, "shadow") == 0)
				O.taker = TAKER_SHADOW;
			else
				usage();
		} else if (strcmp(a, "--pin") == 0) {
			if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
				usage();
			O.shadow_unpinned = strcmp(v, "off") == 0;
		} else if (strcmp(a, "--shadow-ring-mb") == 0) {
			O.shadow_ring_mb = arg_u32(v, 1, 1u << 20);
		} else if (strcmp(a, "--thp") == 0) {
			if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
				usage();
			O.thp_off = strcmp(v, "off") == 0;
		} else if (strcmp(a, "--populate") == 0) {
			if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
				usage();
			O.populate = strcmp(v, "on") == 0;
		} else if (strcmp(a, "--collapse") == 0) {
			if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
				usage();
			O.collapse = strcmp(v, "on") == 0;
		} else {
			usage();
		}
	}
	if (O.warmup == UINT32_MAX)
		O.warmup = O.snapshot_every / 2;
	/* The ME's load is pairs (cancel, rest); at least one snapshot must be taken. */
	if (O.batch % 2 != 0 || O.warmup >= O.cycles)
		usage();
	if ((uint64_t)O.residents * O.open_per_user + 65536 > (UINT64_C(1) << 28))
		usage();

	int w = snprintf(snap_root, sizeof(snap_root), "%s/snapshot_stall.XXXXXX", O.dir_parent);
	if (w < 0 || (size_t)w >= sizeof(snap_root))
		usage();
	if (mkdtemp(snap_root) == NULL) {
		fprintf(stderr, "snapshot_stall: mkdtemp %s: %s\n", snap_root, strerror(errno));
		return 1;
	}
	atexit(root_remove);
	/* Before any region is mapped: pst_mem_private's MADV_HUGEPAGE is then ignored, as on
	 * a host whose transparent huge pages are off (fork copies 4 KiB entries). */
	if (O.thp_off && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
		fail("prctl(PR_SET_THP_DISABLE): %s", strerror(errno));
	if (O.taker == TAKER_SHADOW && !O.shadow_unpinned)
		shadow_place();
	note("snapshot_stall: batch=%u cycles=%u warmup=%u snapshot_every=%u taker=%s thp=%s "
	     "dir=%s\n",
	     O.batch, O.cycles, O.warmup, O.snapshot_every, TAKER_NAMES[O.taker],
	     O.thp_off ? "off" : "on", snap_root);
	if (O.taker == TAKER_SHADOW)
		note("snapshot_stall: shadow: main thread on cpu %d, the shadow's thread on cpu %d "
		     "(-1: not pinned: --pin off, or fewer than 2 CPUs)\n", main_cpu, shadow_cpu);
	if (O.me)
		bench_me();
	if (O.oms)
		bench_oms();
	return 0;
}

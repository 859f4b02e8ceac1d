/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim-raft: a deterministic simulator for the consensus core (TigerBeetle's VOPR,
 * canonical/raft's fixture). One process, one thread, one seed:
 *
 *   - 3 or 5 members hosting the bank service over cns + an in-memory log store whose
 *     writes become durable after a simulated, sometimes slow, disk latency;
 *   - a network with delay, loss, duplication, reordering, full and asymmetric partitions;
 *   - crashes and restarts (durable mode: what was not durable is lost, the write in
 *     progress is torn and discarded; memory mode: a process crash keeps the page cache);
 *   - per-node clock offset and drift; leadership transfers; snapshots and compaction;
 *   - asynchronous snapshots (CNS_LIM_SNAP_ASYNC): a share of the host's snapshots, drawn
 *     per seed, go through cns_snapshot_begin, the service written into the buffer at once
 *     (the forked child's copy-on-write image of that moment) and cns_snapshot_end called a
 *     drawn number of drive steps later while the node applies, replicates and installs
 *     snapshots meanwhile; a crash drops the one pending (the process and its child die);
 *   - with --members, spare hosts (7 in all) and membership changes drawn by the seed:
 *     learners added (fresh spares, removed hosts wiped and re-joined, or re-added with
 *     their old state), promoted once caught up, voters removed (the leader itself too),
 *     learners removed, dead members replaced, interleaved with all the faults above.
 *
 * After every event it checks election safety, log matching, leader completeness, state
 * machine safety, cluster time monotonic in every log, equal state hashes at equal applied
 * index and money conservation, and for membership: every commit of a leader is backed by
 * acknowledgements of a majority of the voters of its configuration (learners never
 * count), the configuration in effect on each member is the latest one in its log (or its
 * snapshot's), the applied configuration and every snapshot's configuration are the
 * committed ones at that index, candidates are voters, and a node whose removal committed
 * never becomes leader. After the faults heal: a leader of the final configuration exists,
 * commits progress and every live member of that configuration applies everything.
 *
 * Every snapshot saved restores to the state hash recorded at its index; end returns 0 (the
 * base is then the image written at begin, byte for byte) or -ESTALE (only when a snapshot
 * installed meanwhile covers its index); begin and take are refused while one is pending.
 *
 *   sim-raft --seed N [--steps M] [--members] [--async PM] [--trace]   one seed, reproducible
 *   sim-raft --seeds A-B [--steps M] [--members] [--async PM]  a range (stops at the first failure)
 *
 * --async PM forces the share of asynchronous snapshots (per mille) for every seed; --async 0
 * runs each seed exactly as before asynchronous snapshots existed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bank.h"
#include "common/check.h"
#include "common/prng.h"
#include "consensus/cns.h"
#include "consensus/cns_int.h" /* the applied configuration, for the agreement check */

#define NODES_MAX 7                /* simulated hosts: the bootstrap members and spares */
#define CFGS_MAX 4096              /* committed configuration entries remembered */
#define ACK_TERMS 1024             /* acknowledgements remembered per term (a ring) */
#define SLOTS 4096                 /* messages in flight */
#define SLOT_BYTES (64 + WIRE_TAIL_MAX + 8)
#define HEAP_MAX (SLOTS + 1024)
#define DISKQ_MAX 4096             /* pending writes per node */
#define TERMS_MAX 65536
#define TRACE_LINES 48
#define TRACE_LINE 200
#define SNAP_MAX 4096
#define MS UINT64_C(1000000)
#define US UINT64_C(1000)

enum ev_kind {
	EV_DELIVER = 1,
	EV_TICK = 2,
	EV_CLIENT = 3,
	EV_FAULT = 4,
	EV_RESTART = 5,
	EV_LINKS_HEAL = 6,
	EV_DISK_HEAL = 7,
	EV_MEMBER = 8,
};

struct ev {
	uint64_t t;    /* simulated time */
	uint64_t seq;  /* tie-break: insertion order */
	uint8_t kind;  /* enum ev_kind */
	uint8_t node;  /* target node */
	uint16_t reserved;
	uint32_t arg;  /* slot or generation */
};

struct slot {
	uint32_t from;
	uint32_t to;
	int32_t next_free;
	uint32_t reserved;
	uint64_t buf[SLOT_BYTES / 8];
};

struct disk_write {
	uint64_t index;
	uint64_t term;
	uint64_t done_at;
};

struct node {
	uint32_t id;                   /* node id (slot + 1) */
	uint32_t idx;                  /* slot */
	bool up;
	uint32_t gen;                  /* restarts, so stale tick events are ignored */
	struct cns *c;
	void *cmem;
	struct cns_memlog *log;
	void *logmem;
	struct bank bank;
	int64_t clock_off_ns;          /* local clock = now * (1 + drift) + offset */
	int64_t drift_ppm;
	uint64_t local_last;           /* local clocks never go backwards */
	struct disk_write dq[DISKQ_MAX];
	uint32_t dq_head, dq_count;
	uint64_t disk_lat_ns;          /* per-write latency */
	uint64_t disk_slow_ns;         /* extra latency while a disk is slow */
	struct cns_snapshot_meta snap; /* last saved snapshot (the durable one) */
	uint8_t snap_data[SNAP_MAX];
	bool has_snap;
	uint64_t *chain;               /* chain hash of the entry at each index in its log */
	uint64_t *time_at;             /* cluster time of the entry at each index */
	uint64_t seen_commit;
	uint64_t seen_applied;
	uint64_t seen_term;
	uint8_t seen_role;
	uint64_t snap_every;           /* take a snapshot every this many applied entries */
	uint64_t removed_leader_since; /* leads outside its committed configuration since */
	bool booted;                   /* has been booted (spares start unbooted) */
	bool join;                     /* boots with CNS_CFG_JOIN: a spare, or a wiped host */
	uint64_t log_cfg;              /* latest CONFIG entry in its log store (0: none) */
	/* The asynchronous snapshot being written (cns_snapshot_begin .. end). */
	uint64_t async_index;          /* its index; 0: none pending */
	uint32_t async_left;           /* drive steps until the host calls end */
	uint32_t async_len;            /* service bytes written at begin */
	uint8_t async_img[SNAP_MAX];   /* those bytes, to compare with the base after end */
};

/* A committed configuration entry (the checker's record). */
struct ccfg {
	uint64_t index;
	struct cns_members m;
};

/* The highest index a node acknowledged as replicated in a term (APPEND_REPLY success or
 * SNAPSHOT_REPLY done, as sent). */
struct ack {
	uint64_t term;
	uint64_t match;
};

/* A membership change in progress: one or more calls of cns_member_change, each retried on
 * the current leader until it is taken or the plan times out. */
enum plan_kind {
	PLAN_NONE = 0,
	PLAN_ADD = 1,     /* add node as a learner (then promote it, sometimes) */
	PLAN_PROMOTE = 2, /* promote learner node */
	PLAN_REMOVE = 3,  /* remove node (voter, learner, or the leader itself) */
	PLAN_REPLACE = 4, /* add node, promote it, remove the dead member `dead` */
};

struct plan {
	uint8_t kind;          /* enum plan_kind */
	uint8_t step;          /* add/replace: 0 add, 1 promote, 2 remove */
	bool then_promote;     /* add: promote once caught up */
	uint32_t node;         /* the node added, promoted or removed */
	uint32_t dead;         /* replace: the member removed at the end */
	uint64_t deadline;     /* given up after this (simulated time) */
};

struct lm_slot {
	uint64_t index;
	uint64_t term;
	uint64_t chain;
};

static struct {
	uint64_t seed;
	uint64_t steps;
	bool trace;
	bool verbose;
	uint32_t chunk_opt;   /* --chunk: InstallSnapshot chunk bytes for every seed (0: per seed) */
	bool members_mode;    /* --members: spare hosts and membership changes */
	int32_t async_opt;    /* --async: per mille of asynchronous snapshots (-1: per seed) */
	struct prng rng;
	uint64_t now;
	uint64_t seq;
	uint32_t n;           /* hosts */
	uint32_t n_boot;      /* the bootstrap members: hosts 1..n_boot */
	uint32_t durability;
	struct node nodes[NODES_MAX];
	struct cns_limits limits;
	struct cns_memlog_limits log_limits;
	struct cns_config cfg;
	/* network */
	struct slot *slots;
	int32_t free_slot;
	struct ev heap[HEAP_MAX];
	uint32_t heap_len;
	bool cut[NODES_MAX][NODES_MAX]; /* cut[a][b]: a's messages to b are dropped */
	uint32_t loss_pm;               /* per mille */
	uint32_t dup_pm;
	uint64_t delay_min_ns, delay_max_ns;
	uint64_t msgs_sent, msgs_dropped;
	/* client */
	uint32_t client_guess;
	uint64_t transfer_id;
	bool clients_on;
	uint64_t proposals_ok;
	/* checks */
	uint64_t idx_max;
	uint64_t *committed_chain;  /* per index */
	uint64_t *committed_term;   /* term of the node that first committed it */
	uint64_t *hash_at;          /* service state hash at each applied index */
	uint64_t global_commit;
	uint32_t leader_of_term[TERMS_MAX];
	struct lm_slot *lm;
	uint64_t lm_cap;
	bool chaos;
	uint64_t fault_min_ns, fault_max_ns; /* time between faults */
	uint64_t events;
	uint64_t crashes, torn, transfers, partitions, snapshots;
	/* asynchronous snapshots: draws from their own generator, so a seed without them runs
	 * exactly as before they existed */
	struct prng arng;
	uint32_t async_pm;                  /* per mille of host snapshots begun asynchronously */
	uint32_t async_steps_max;           /* drive steps between begin and end, at most */
	uint64_t async_begun, async_based, async_stale, async_dropped;
	/* membership */
	struct ccfg ccfg[CFGS_MAX];         /* committed configurations, by index */
	uint32_t ccfg_count;
	struct ack acks[ACK_TERMS][NODES_MAX];
	uint64_t idx_hi;                    /* highest index appended anywhere */
	uint64_t member_min_ns, member_max_ns; /* time between membership plans */
	struct plan plan;
	uint64_t adds, promotes, removes, self_removes, wipes, readds;
	uint64_t joins_snapshot, joins_log; /* learners promoted: caught up by snapshot / log */
	uint64_t plans_abandoned;
	/* trace ring */
	char trace_ring[TRACE_LINES][TRACE_LINE];
	uint32_t trace_pos;
	uint64_t trace_count;
} S;

/* ---------------------------------------------------------------------------------------
 * Trace and failure.
 * ------------------------------------------------------------------------------------- */

__attribute__((format(printf, 1, 2))) static void
trace(const char *fmt, ...)
{
	char *line = S.trace_ring[S.trace_pos];
	int n = snprintf(line, TRACE_LINE, "t=%" PRIu64 ".%03" PRIu64 "ms ", S.now / MS,
			 (S.now % MS) / US);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && n < TRACE_LINE)
		vsnprintf(line + n, (size_t)(TRACE_LINE - n), fmt, ap);
	va_end(ap);
	if (S.trace)
		printf("%s\n", line);
	S.trace_pos = (S.trace_pos + 1) % TRACE_LINES;
	S.trace_count++;
}

static void
trace_dump(void)
{
	uint64_t lines = S.trace_count < TRACE_LINES ? S.trace_count : TRACE_LINES;
	fprintf(stderr, "--- trace tail (%" PRIu64 " lines) ---\n", lines);
	for (uint64_t i = 0; i < lines; i++) {
		uint32_t at = (uint32_t)((S.trace_pos + TRACE_LINES - lines + i) % TRACE_LINES);
		fprintf(stderr, "%s\n", S.trace_ring[at]);
	}
	char chunk[32] = "";
	if (S.chunk_opt != 0)
		snprintf(chunk, sizeof(chunk), " --chunk %u", S.chunk_opt);
	char async[32] = "";
	if (S.async_opt >= 0)
		snprintf(async, sizeof(async), " --async %d", S.async_opt);
	fprintf(stderr,
		"--- replay: sim-raft --seed %" PRIu64 " --steps %" PRIu64 "%s%s%s --trace\n",
		S.seed, S.steps, chunk, S.members_mode ? " --members" : "", async);
}

__attribute__((format(printf, 2, 3), noreturn)) static void
fail(const char *invariant, const char *fmt, ...)
{
	fprintf(stderr, "FAIL seed=%" PRIu64 " event=%" PRIu64 " t=%" PRIu64 "ns invariant=%s: ",
		S.seed, S.events, S.now, invariant);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	trace_dump();
	exit(1);
}

static void
on_check_fail(const char *file, int line, const char *expr)
{
	fprintf(stderr, "FAIL seed=%" PRIu64 " event=%" PRIu64 " invariant=CHECK %s:%d %s\n",
		S.seed, S.events, file, line, expr);
	trace_dump();
}

#define SIM_ASSERT(inv, cond, ...)                                                         \
	do {                                                                               \
		if (!(cond))                                                               \
			fail(inv, __VA_ARGS__);                                            \
	} while (0)

/* ---------------------------------------------------------------------------------------
 * Event heap.
 * ------------------------------------------------------------------------------------- */

static bool
ev_less(const struct ev *a, const struct ev *b)
{
	return a->t != b->t ? a->t < b->t : a->seq < b->seq;
}

static void
ev_push(uint64_t t, uint8_t kind, uint32_t node, uint32_t arg)
{
	SIM_ASSERT("sim", S.heap_len < HEAP_MAX, "event heap full");
	struct ev e = {.t = t, .seq = S.seq++, .kind = kind, .node = (uint8_t)node, .arg = arg};
	uint32_t i = S.heap_len++;
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (!ev_less(&e, &S.heap[p]))
			break;
		S.heap[i] = S.heap[p];
		i = p;
	}
	S.heap[i] = e;
}

static struct ev
ev_pop(void)
{
	struct ev top = S.heap[0];
	struct ev last = S.heap[--S.heap_len];
	uint32_t i = 0;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		const struct ev *best = &last;
		if (l < S.heap_len && ev_less(&S.heap[l], best)) {
			m = l;
			best = &S.heap[l];
		}
		if (r < S.heap_len && ev_less(&S.heap[r], best))
			m = r;
		if (m == i)
			break;
		S.heap[i] = S.heap[m];
		i = m;
	}
	if (S.heap_len > 0)
		S.heap[i] = last;
	return top;
}

/* ---------------------------------------------------------------------------------------
 * Helpers.
 * ------------------------------------------------------------------------------------- */

static uint64_t
rnd(uint64_t lo, uint64_t hi)
{
	return (uint64_t)prng_range(&S.rng, (int64_t)lo, (int64_t)hi);
}

static bool
chance(uint32_t per_mille)
{
	return prng_chance(&S.rng, per_mille, 1000);
}

static uint64_t
local_clock(struct node *n)
{
	int64_t t = (int64_t)S.now + (int64_t)S.now / 1000000 * n->drift_ppm + n->clock_off_ns;
	uint64_t u = (uint64_t)t;
	if (u < n->local_last)
		u = n->local_last;
	n->local_last = u;
	return u;
}

static uint64_t
mix(uint64_t h, uint64_t v)
{
	h ^= v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
	h *= UINT64_C(0xff51afd7ed558ccd);
	return h ^ (h >> 33);
}

static uint64_t
base_of(const struct node *n)
{
	return cns_memlog_ops.first_index(n->log) - 1;
}

/* The checker's own reading of a CONFIG entry's data (the public layout, cns.h). */
static bool
cfg_decode(const void *data, uint32_t len, struct cns_members *out)
{
	struct cns_config_entry ce;
	if (len != sizeof(ce))
		return false;
	memcpy(&ce, data, sizeof(ce));
	if (ce.member_count == 0 || ce.member_count > CNS_MEMBERS_MAX || ce.reserved != 0)
		return false;
	memset(out, 0, sizeof(*out));
	out->count = ce.member_count;
	out->learners = ce.learners;
	for (uint32_t i = 0; i < ce.member_count; i++)
		out->ids[i] = ce.members[i];
	return true;
}

static bool
cfg_equal(const struct cns_members *a, const struct cns_members *b)
{
	if (a->count != b->count || a->learners != b->learners)
		return false;
	for (uint32_t i = 0; i < a->count; i++)
		if (a->ids[i] != b->ids[i])
			return false;
	return true;
}

/* -1: not a member; 0: learner; 1: voter. */
static int
cfg_role(const struct cns_members *m, uint32_t id)
{
	for (uint32_t i = 0; i < m->count; i++)
		if (m->ids[i] == id)
			return (m->learners >> i) & 1u ? 0 : 1;
	return -1;
}

static uint32_t
cfg_voters(const struct cns_members *m)
{
	uint32_t v = 0;
	for (uint32_t i = 0; i < m->count; i++)
		v += cfg_role(m, m->ids[i]) == 1;
	return v;
}

static const char *
cfg_text(const struct cns_members *m)
{
	static char buf[4][96];
	static uint32_t at;
	char *b = buf[at++ % 4];
	int pos = snprintf(b, 96, "{");
	for (uint32_t i = 0; i < m->count && pos > 0 && pos < 80; i++)
		pos += snprintf(b + pos, (size_t)(96 - pos), "%s%u%s", i ? " " : "", m->ids[i],
				(m->learners >> i) & 1u ? "L" : "");
	if (pos > 0 && pos < 94)
		snprintf(b + pos, (size_t)(96 - pos), "}");
	return b;
}

static const char *
role_name(enum cns_role r)
{
	switch (r) {
	case CNS_FOLLOWER:
		return "follower";
	case CNS_PRE_CANDIDATE:
		return "pre-candidate";
	case CNS_CANDIDATE:
		return "candidate";
	case CNS_LEADER:
		return "leader";
	}
	return "?";
}

/* ---------------------------------------------------------------------------------------
 * The log store seen by the core: the memlog plus a simulated disk and the checker's
 * per-entry chain hashes.
 * ------------------------------------------------------------------------------------- */

/* Log Matching (Raft §5.3): every (index, term) ever appended anywhere has one chain hash,
 * i.e. one entry and one prefix. */
static void
lm_check(uint64_t index, uint64_t term, uint64_t chain)
{
	uint64_t h = mix(index, term) & (S.lm_cap - 1);
	for (uint64_t probe = 0; probe < S.lm_cap; probe++) {
		struct lm_slot *s = &S.lm[(h + probe) & (S.lm_cap - 1)];
		if (s->index == 0) {
			s->index = index;
			s->term = term;
			s->chain = chain;
			return;
		}
		if (s->index == index && s->term == term) {
			SIM_ASSERT("log matching", s->chain == chain,
				   "two different entries (or prefixes) at index %" PRIu64
				   " term %" PRIu64,
				   index, term);
			return;
		}
	}
	fail("sim", "log matching table full");
}

static int
st_append(void *store, uint64_t index, const struct wire_entry_hdr *hdr, const void *data)
{
	struct node *n = store;
	int rc = cns_memlog_ops.append(n->log, index, hdr, data);
	if (rc != 0)
		return rc;
	SIM_ASSERT("sim", index < S.idx_max, "index %" PRIu64 " beyond the checker's tables",
		   index);
	uint64_t h = mix(n->chain[index - 1], hdr->term);
	h = mix(h, hdr->time_ns);
	h = mix(h, hdr->kind);
	const uint64_t *w = data;
	for (uint32_t i = 0; i < hdr->data_len / 8; i++)
		h = mix(h, w[i]);
	n->chain[index] = h;
	lm_check(index, hdr->term, h);
	if (index > S.idx_hi)
		S.idx_hi = index;
	if (hdr->kind == CNS_ENTRY_CONFIG)
		n->log_cfg = index;
	/* Cluster time is monotonic along every log. */
	if (index >= 2)
		SIM_ASSERT("cluster time monotonic", hdr->time_ns >= n->time_at[index - 1],
			   "node %u index %" PRIu64 " time %" PRIu64 " < previous %" PRIu64, n->id,
			   index, hdr->time_ns, n->time_at[index - 1]);
	n->time_at[index] = hdr->time_ns;
	/* The disk writes in order; a write completes after its latency. */
	uint64_t done = S.now + n->disk_lat_ns + n->disk_slow_ns;
	if (n->dq_count > 0) {
		struct disk_write *tail = &n->dq[(n->dq_head + n->dq_count - 1) % DISKQ_MAX];
		if (done < tail->done_at)
			done = tail->done_at;
		if (n->dq_count == DISKQ_MAX) {
			tail->index = index; /* coalesce: a later report covers the earlier */
			tail->term = hdr->term;
			tail->done_at = done;
			return 0;
		}
	}
	struct disk_write *d = &n->dq[(n->dq_head + n->dq_count) % DISKQ_MAX];
	d->index = index;
	d->term = hdr->term;
	d->done_at = done;
	n->dq_count++;
	return 0;
}

/* The latest CONFIG entry left in n's store after a cut (a backward scan, bounded by the
 * store's capacity). */
static void
log_cfg_rescan(struct node *n)
{
	uint64_t first = cns_memlog_ops.first_index(n->log);
	uint64_t last = cns_memlog_ops.last_index(n->log);
	if (n->log_cfg <= last)
		return;
	n->log_cfg = 0;
	for (uint64_t i = last; i >= first && i > 0; i--) {
		if (cns_memlog_ops.entry(n->log, i)->kind == CNS_ENTRY_CONFIG) {
			n->log_cfg = i;
			return;
		}
	}
}

static void
st_truncate(void *store, uint64_t index)
{
	struct node *n = store;
	cns_memlog_ops.truncate(n->log, index);
	log_cfg_rescan(n);
}

static void
st_compact(void *store, uint64_t index)
{
	struct node *n = store;
	cns_memlog_ops.compact(n->log, index);
	if (n->log_cfg <= index)
		n->log_cfg = 0; /* compacted: the snapshot carries it now */
}

static const struct wire_entry_hdr *
st_entry(const void *store, uint64_t index)
{
	const struct node *n = store;
	return cns_memlog_ops.entry(n->log, index);
}

static uint64_t
st_first(const void *store)
{
	const struct node *n = store;
	return cns_memlog_ops.first_index(n->log);
}

static uint64_t
st_last(const void *store)
{
	const struct node *n = store;
	return cns_memlog_ops.last_index(n->log);
}

static void
st_save_vote(void *store, uint64_t term, uint32_t vote)
{
	struct node *n = store;
	cns_memlog_ops.save_vote(n->log, term, vote); /* a small synchronous record */
}

static const struct cns_log_ops sim_store_ops = {
	.append = st_append,
	.truncate = st_truncate,
	.compact = st_compact,
	.entry = st_entry,
	.first_index = st_first,
	.last_index = st_last,
	.save_vote = st_save_vote,
};

/* ---------------------------------------------------------------------------------------
 * The checker's record of membership: committed configurations and acknowledgements.
 * ------------------------------------------------------------------------------------- */

/* The configuration committed at index: the latest committed CONFIG entry at or before
 * it (NULL before the first). */
static const struct ccfg *
ccfg_at(uint64_t index)
{
	const struct ccfg *best = NULL;
	uint32_t lo = 0, hi = S.ccfg_count;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (S.ccfg[mid].index <= index) {
			best = &S.ccfg[mid];
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return best;
}

static const struct ccfg *
ccfg_latest(void)
{
	return S.ccfg_count > 0 ? &S.ccfg[S.ccfg_count - 1] : NULL;
}

static void
ccfg_record(uint64_t index, const struct cns_members *m)
{
	SIM_ASSERT("sim", S.ccfg_count < CFGS_MAX, "too many configuration entries");
	uint32_t at = S.ccfg_count;
	while (at > 0 && S.ccfg[at - 1].index > index) {
		S.ccfg[at] = S.ccfg[at - 1];
		at--;
	}
	S.ccfg[at].index = index;
	S.ccfg[at].m = *m;
	S.ccfg_count++;
	trace("committed configuration %s at %" PRIu64, cfg_text(m), index);
}

static void
ack_note(uint32_t from, uint64_t term, uint64_t match)
{
	struct ack *a = &S.acks[term % ACK_TERMS][from - 1];
	if (a->term != term) {
		a->term = term;
		a->match = 0;
	}
	if (match > a->match)
		a->match = match;
}

static uint64_t
ack_of(uint32_t node, uint64_t term)
{
	const struct ack *a = &S.acks[term % ACK_TERMS][node - 1];
	return a->term == term ? a->match : 0;
}

/* ---------------------------------------------------------------------------------------
 * Host callbacks.
 * ------------------------------------------------------------------------------------- */

static void
host_send(void *ctx, uint32_t to, const struct wire_msg_hdr *msg)
{
	struct node *from = ctx;
	uint32_t ti = to - 1;
	uint16_t len = 0;
	enum wire_err err = wire_msg_check(msg, msg->length, &len);
	SIM_ASSERT("wire", err == WIRE_E_OK && len == msg->length && msg->shard == S.cfg.shard,
		   "n%u emitted an invalid %s: %s", from->id, wire_type_name(msg->type),
		   wire_err_text(err));
	S.msgs_sent++;
	/* What each follower claimed to hold, per term: a leader may count no more. */
	if (msg->type == WIRE_APPEND_REPLY) {
		const struct wire_append_reply *r = (const void *)msg;
		if (r->success)
			ack_note(from->id, r->term, r->match_index);
	} else if (msg->type == WIRE_SNAPSHOT_REPLY) {
		const struct wire_snapshot_reply *r = (const void *)msg;
		if (r->done)
			ack_note(from->id, r->term, r->last_index);
	}
	if (ti >= S.n || S.cut[from->idx][ti] || chance(S.loss_pm) || S.free_slot < 0) {
		S.msgs_dropped++;
		return;
	}
	uint32_t copies = chance(S.dup_pm) ? 2 : 1;
	for (uint32_t k = 0; k < copies && S.free_slot >= 0; k++) {
		int32_t si = S.free_slot;
		struct slot *s = &S.slots[si];
		S.free_slot = s->next_free;
		s->from = from->id;
		s->to = to;
		SIM_ASSERT("sim", msg->length <= SLOT_BYTES, "message too big");
		memcpy(s->buf, msg, msg->length);
		uint64_t delay = rnd(S.delay_min_ns, S.delay_max_ns);
		if (chance(10))
			delay += rnd(5 * MS, 40 * MS); /* a delay spike reorders */
		ev_push(S.now + delay, EV_DELIVER, ti, (uint32_t)si);
	}
}

static void
host_snapshot_saved(void *ctx, const struct cns_snapshot_meta *meta, const void *data)
{
	struct node *n = ctx;
	SIM_ASSERT("sim", meta->len <= SNAP_MAX, "snapshot too big");
	/* Written synchronously: it is this node's durable base from now on. */
	n->snap = *meta;
	memcpy(n->snap_data, data, meta->len);
	n->has_snap = true;
	SIM_ASSERT("state machine safety", S.committed_chain[meta->index] != 0,
		   "snapshot at %" PRIu64 " of an entry never committed", meta->index);
	/* Raft §7: a snapshot carries the configuration committed at its index. */
	struct cns_snap_prefix pre;
	SIM_ASSERT("snapshot configuration", meta->len >= sizeof(pre),
		   "n%u snapshot at %" PRIu64 " without the configuration prefix", n->id,
		   meta->index);
	memcpy(&pre, data, sizeof(pre));
	struct cns_members pm;
	const struct ccfg *want = ccfg_at(meta->index);
	SIM_ASSERT("snapshot configuration",
		   pre.magic == CNS_SNAP_MAGIC && cfg_decode(&pre.config, sizeof(pre.config), &pm),
		   "n%u snapshot at %" PRIu64 ": bad configuration prefix", n->id, meta->index);
	SIM_ASSERT("snapshot configuration", want != NULL && cfg_equal(&pm, &want->m),
		   "n%u snapshot at %" PRIu64 " carries %s, committed there: %s", n->id,
		   meta->index, cfg_text(&pm), want ? cfg_text(&want->m) : "none");
	/* The service bytes are the state at its index, whoever wrote them and when (an
	 * asynchronous one is written at begin and saved at end, entries later): restored, they
	 * hash as every member's state did when it had applied that index. */
	static struct bank img;
	uint64_t want_hash = S.hash_at[meta->index];
	SIM_ASSERT("snapshot content", want_hash != 0,
		   "n%u snapshot at %" PRIu64 ": no member was seen at that applied index", n->id,
		   meta->index);
	const uint8_t *svc_bytes = (const uint8_t *)data + sizeof(pre);
	int rc = bank_ops.restore(&img, svc_bytes, meta->len - sizeof(pre));
	SIM_ASSERT("snapshot content", rc == 0, "n%u snapshot at %" PRIu64 " does not restore: %d",
		   n->id, meta->index, rc);
	SIM_ASSERT("snapshot content", bank_ops.state_hash(&img) == want_hash,
		   "n%u snapshot at %" PRIu64 " holds another state than the one applied there",
		   n->id, meta->index);
	if (n->chain[meta->index] != S.committed_chain[meta->index]) {
		/* Installed from the leader: this node's base is the committed entry. */
		n->chain[meta->index] = S.committed_chain[meta->index];
		n->time_at[meta->index] = meta->time_ns;
	}
	trace("n%u snapshot saved index=%" PRIu64 " term=%" PRIu64 " len=%" PRIu64, n->id,
	      meta->index, meta->term, meta->len);
}

static struct svc_sink null_sink;

static void
sink_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)dest;
	(void)msg;
}

/* ---------------------------------------------------------------------------------------
 * Nodes.
 * ------------------------------------------------------------------------------------- */

static void
node_boot(struct node *n)
{
	bank_init(&n->bank);
	struct cns_config cfg = S.cfg;
	cfg.self = n->id;
	cfg.seed = S.seed * 31 + n->id * 7 + n->gen;
	if (n->join) {
		/* A new host: no configuration of its own; a leader that adds it sends the log
		 * or a snapshot, and the configuration with it. */
		cfg.flags |= CNS_CFG_JOIN;
		cfg.member_count = 0;
		memset(cfg.members, 0, sizeof(cfg.members));
	}
	struct cns_env env = {
		.log_ops = &sim_store_ops,
		.log = n,
		.svc_ops = &bank_ops,
		.svc = &n->bank,
		.sink = &null_sink,
		.host = {.ctx = n, .send = host_send, .snapshot_saved = host_snapshot_saved},
	};
	struct cns_boot boot = {
		.term = cns_memlog_term(n->log),
		.vote = cns_memlog_vote(n->log),
		.snapshot = n->has_snap ? &n->snap : NULL,
		.snapshot_data = n->snap_data,
	};
	int rc = cns_init(&n->c, n->cmem, &S.limits, &cfg, &env, &boot);
	SIM_ASSERT("sim", rc == 0, "cns_init node %u: %d", n->id, rc);
	SIM_ASSERT("async snapshot", n->async_index == 0, "n%u's host kept a pending snapshot",
		   n->id);
	SIM_ASSERT("async snapshot", cns_snapshot_pending(n->c) == 0,
		   "n%u boots with a snapshot pending", n->id);
	n->up = true;
	n->booted = true;
	n->seen_commit = cns_commit_index(n->c);
	n->seen_applied = cns_applied_index(n->c);
	n->seen_role = CNS_FOLLOWER;
	n->removed_leader_since = 0;
	n->seen_term = cns_term(n->c);
	ev_push(S.now + rnd(0, 3 * MS), EV_TICK, n->idx, n->gen);
}

/* The host process died: its child writing an asynchronous snapshot dies with it (the
 * snapshot never becomes a base; the core's record of it goes with the process memory). */
static void
async_drop(struct node *n)
{
	if (n->async_index == 0)
		return;
	trace("n%u async snapshot at %" PRIu64 " dropped", n->id, n->async_index);
	n->async_index = 0;
	n->async_left = 0;
	S.async_dropped++;
}

static void
node_crash(struct node *n)
{
	n->up = false;
	n->gen++;
	S.crashes++;
	async_drop(n);
	if (S.durability == CNS_DURABLE_DISK) {
		/* A host crash: only what the disk completed survives. The write in progress (if
		 * any) is torn; the store's recovery discards a torn record, which leaves the log
		 * at the last completed write. */
		uint64_t d = cns_durable_index(n->c);
		uint64_t last = cns_memlog_ops.last_index(n->log);
		uint64_t first = cns_memlog_ops.first_index(n->log);
		/* Some pending writes may have reached the disk without their report: a prefix
		 * of the queue survives (while it still names entries of this log), the next
		 * write is torn. Such entries were never acknowledged in disk mode. */
		uint32_t k = n->dq_count > 0 ? (uint32_t)rnd(0, n->dq_count) : 0;
		for (uint32_t q = 0; q < k; q++) {
			const struct disk_write *w = &n->dq[(n->dq_head + q) % DISKQ_MAX];
			if (w->index < first || w->index > last ||
			    cns_memlog_ops.entry(n->log, w->index)->term != w->term)
				break;
			if (w->index > d)
				d = w->index;
		}
		if (k < n->dq_count)
			S.torn++;
		if (d < last) {
			SIM_ASSERT("sim", d + 1 >= first, "durable index behind the log start");
			cns_memlog_ops.truncate(n->log, d + 1);
			log_cfg_rescan(n);
		}
		trace("n%u crash (host): kept=%" PRIu64 " (durable %" PRIu64 ") lost=%" PRIu64
		      " torn=%u",
		      n->id, d, cns_durable_index(n->c), last - d, k < n->dq_count);
	} else {
		trace("n%u crash (process): log kept through %" PRIu64, n->id,
		      cns_memlog_ops.last_index(n->log));
	}
	n->dq_count = 0;
	n->dq_head = 0;
}

static void
node_restart(struct node *n)
{
	trace("n%u restart term=%" PRIu64 " snap=%" PRIu64, n->id, cns_memlog_term(n->log),
	      n->has_snap ? n->snap.index : 0);
	node_boot(n);
}

/* Decommission a host and provision it again empty (log, snapshot and hard state gone),
 * booted as a joining node: "a removed node wiped and re-joined". */
static void
node_wipe(struct node *n)
{
	if (n->up) {
		n->up = false;
		n->gen++;
	}
	async_drop(n);
	int rc = cns_memlog_init(&n->log, n->logmem, &S.log_limits);
	SIM_ASSERT("sim", rc == 0, "memlog init");
	n->has_snap = false;
	memset(&n->snap, 0, sizeof(n->snap));
	n->dq_count = 0;
	n->dq_head = 0;
	n->log_cfg = 0;
	uint64_t clear = S.idx_hi + 2 < S.idx_max ? S.idx_hi + 2 : S.idx_max;
	memset(n->chain, 0, clear * sizeof(uint64_t));
	memset(n->time_at, 0, clear * sizeof(uint64_t));
	n->join = true;
	S.wipes++;
	trace("n%u wiped: provisioned again as a joining node", n->id);
	node_boot(n);
}

/* ---------------------------------------------------------------------------------------
 * Invariants.
 * ------------------------------------------------------------------------------------- */

static void
record_commit(struct node *n, uint64_t i)
{
	uint64_t ch = n->chain[i];
	if (S.committed_chain[i] == 0) {
		S.committed_chain[i] = ch;
		S.committed_term[i] = cns_term(n->c);
		if (i > S.global_commit)
			S.global_commit = i;
		/* The first node to commit an index holds it (it is above its base). */
		const struct wire_entry_hdr *e = cns_memlog_ops.entry(n->log, i);
		if (e->kind == CNS_ENTRY_CONFIG) {
			struct cns_members m;
			SIM_ASSERT("configuration", cfg_decode(e + 1, e->data_len, &m),
				   "n%u committed a malformed configuration at %" PRIu64, n->id, i);
			ccfg_record(i, &m);
		}
		return;
	}
	SIM_ASSERT("state machine safety", S.committed_chain[i] == ch,
		   "node %u committed a different entry at index %" PRIu64, n->id, i);
}

static void
check_leader_completeness(struct node *n)
{
	/* Raft §5.4: a leader of term T holds every entry committed in a term before T. */
	uint64_t t = cns_term(n->c);
	uint64_t i = S.global_commit;
	while (i > 0 && S.committed_term[i] >= t)
		i--;
	if (i == 0 || i <= base_of(n))
		return;
	SIM_ASSERT("leader completeness", cns_last_index(n->c) >= i && n->chain[i] == S.committed_chain[i],
		   "leader n%u of term %" PRIu64 " lacks committed index %" PRIu64, n->id, t, i);
}

/* The bootstrap set host n boots with (none for a joining host). */
static void
boot_members(const struct node *n, struct cns_members *m)
{
	memset(m, 0, sizeof(*m));
	if (n->join)
		return;
	m->count = S.n_boot;
	for (uint32_t i = 0; i < S.n_boot; i++)
		m->ids[i] = i + 1;
}

/* Thesis §4.1: the configuration in effect is the latest one in the member's log, from
 * when it is appended (so a truncation of it restores the one before); with none after
 * the log's base, the snapshot's (or, with no snapshot, the bootstrap set). */
static void
check_config_in_effect(struct node *n)
{
	struct cns_members m;
	uint64_t mi = cns_members(n->c, &m);
	uint64_t base = base_of(n);
	if (n->log_cfg > base) {
		SIM_ASSERT("configuration in effect", mi == n->log_cfg,
			   "n%u has the configuration of index %" PRIu64 " in effect (%s), its log's "
			   "latest is at %" PRIu64,
			   n->id, mi, cfg_text(&m), n->log_cfg);
		const struct wire_entry_hdr *e = cns_memlog_ops.entry(n->log, mi);
		struct cns_members want;
		SIM_ASSERT("configuration in effect",
			   cfg_decode(e + 1, e->data_len, &want) && cfg_equal(&m, &want),
			   "n%u: in effect %s, its log's entry %" PRIu64 " says %s", n->id,
			   cfg_text(&m), mi, cfg_text(&want));
		return;
	}
	SIM_ASSERT("configuration in effect", mi <= base,
		   "n%u has the configuration of index %" PRIu64 " in effect (%s), but its log "
		   "(base %" PRIu64 ", last %" PRIu64 ") holds no configuration entry after its base",
		   n->id, mi, cfg_text(&m), base, cns_last_index(n->c));
	const void *data;
	const struct cns_snapshot_meta *sm = cns_snapshot(n->c, &data);
	struct cns_members want;
	if (sm->index > 0) {
		struct cns_snap_prefix pre;
		memcpy(&pre, data, sizeof(pre));
		SIM_ASSERT("configuration in effect",
			   cfg_decode(&pre.config, sizeof(pre.config), &want) && cfg_equal(&m, &want),
			   "n%u: in effect %s (index %" PRIu64 "), its snapshot at %" PRIu64 " says %s",
			   n->id, cfg_text(&m), mi, sm->index, cfg_text(&want));
	} else {
		boot_members(n, &want);
		SIM_ASSERT("configuration in effect", mi == 0 && cfg_equal(&m, &want),
			   "n%u: in effect %s (index %" PRIu64 ") with no configuration logged", n->id,
			   cfg_text(&m), mi);
	}
}

/* Configuration agreement: what a member applied through index A includes the
 * configuration committed at A, so members that applied the same index agree on it. */
static void
check_config_applied(struct node *n)
{
	uint64_t applied = cns_applied_index(n->c);
	if (applied == 0)
		return;
	const struct ccfg *want = ccfg_at(applied);
	const struct cns_members *have = &n->c->mem_applied;
	SIM_ASSERT("configuration agreement", want != NULL && cfg_equal(have, &want->m),
		   "n%u applied through %" PRIu64 " with configuration %s, committed there: %s",
		   n->id, applied, cfg_text(have), want ? cfg_text(&want->m) : "none");
}

/* A learner is never counted: every index a leader commits was acknowledged in its term by
 * a majority of the voters of its configuration in effect (itself counting when it holds
 * the entry: in memory, or durably in disk mode). The acknowledgements are the ones the
 * followers sent, not the leader's bookkeeping. */
static void
check_commit_quorum(struct node *n, uint64_t commit)
{
	struct cns_members m;
	cns_members(n->c, &m);
	uint64_t term = cns_term(n->c);
	uint64_t own = S.durability == CNS_DURABLE_DISK ? cns_durable_index(n->c)
							: cns_last_index(n->c);
	uint32_t voters = 0, held = 0;
	for (uint32_t i = 0; i < m.count; i++) {
		if ((m.learners >> i) & 1u)
			continue;
		voters++;
		uint32_t id = m.ids[i];
		if (id == n->id ? own >= commit : ack_of(id, term) >= commit)
			held++;
	}
	SIM_ASSERT("commit quorum", held >= voters / 2 + 1,
		   "leader n%u term %" PRIu64 " committed %" PRIu64 " held by %u of %u voters of %s",
		   n->id, term, commit, held, voters, cfg_text(&m));
}

static void
observe(struct node *n)
{
	if (!n->up)
		return;
	struct cns *c = n->c;
	enum cns_role role = cns_role(c);
	uint64_t term = cns_term(c);
	if (role != n->seen_role || term != n->seen_term) {
		trace("n%u %s term=%" PRIu64 " last=%" PRIu64 "/%" PRIu64 " commit=%" PRIu64, n->id,
		      role_name(role), term, cns_last_index(c), cns_last_term(c),
		      cns_commit_index(c));
		if (role == CNS_LEADER) {
			SIM_ASSERT("sim", term < TERMS_MAX, "term overflow");
			/* Election Safety (Raft §5.2): at most one leader per term. */
			if (S.leader_of_term[term] == 0)
				S.leader_of_term[term] = n->id;
			SIM_ASSERT("election safety", S.leader_of_term[term] == n->id,
				   "two leaders in term %" PRIu64 ": n%u and n%u", term,
				   S.leader_of_term[term], n->id);
			check_leader_completeness(n);
			/* A node whose removal committed never leads again (until re-added). */
			const struct ccfg *g = ccfg_latest();
			SIM_ASSERT("removed never leads", g == NULL || cfg_role(&g->m, n->id) >= 0,
				   "n%u leads term %" PRIu64 " but the committed configuration %s "
				   "(index %" PRIu64 ") removed it",
				   n->id, term, cfg_text(&g->m), g->index);
		}
		n->seen_role = (uint8_t)role;
		n->seen_term = term;
	}
	/* Learners, removed and joining nodes never stand. */
	if (role == CNS_PRE_CANDIDATE || role == CNS_CANDIDATE)
		SIM_ASSERT("only voters stand", cns_is_voter(c, n->id),
			   "n%u is a %s but not a voter of its configuration", n->id, role_name(role));
	uint64_t commit = cns_commit_index(c);
	if (role == CNS_LEADER && commit > n->seen_commit)
		check_commit_quorum(n, commit);
	/* Thesis §4.2.2: a leader whose removal committed steps down (at its next tick). */
	if (role == CNS_LEADER && !cns_is_voter(c, n->id) && cns_members(c, NULL) <= commit) {
		if (n->removed_leader_since == 0)
			n->removed_leader_since = S.now;
		SIM_ASSERT("removed leader steps down", S.now - n->removed_leader_since < 20 * MS,
			   "n%u still leads %" PRIu64 " ms after its removal committed", n->id,
			   (S.now - n->removed_leader_since) / MS);
	} else {
		n->removed_leader_since = 0;
	}
	uint64_t from = n->seen_commit > base_of(n) ? n->seen_commit : base_of(n);
	for (uint64_t i = from + 1; i <= commit; i++)
		record_commit(n, i);
	n->seen_commit = commit;

	uint64_t applied = cns_applied_index(c);
	from = n->seen_applied > base_of(n) ? n->seen_applied : base_of(n);
	for (uint64_t i = from + 1; i <= applied; i++)
		SIM_ASSERT("state machine safety", n->chain[i] == S.committed_chain[i],
			   "node %u applied index %" PRIu64 " that differs from the committed one",
			   n->id, i);
	n->seen_applied = applied;
	if (applied > 0) {
		uint64_t h = bank_ops.state_hash(&n->bank);
		if (S.hash_at[applied] == 0)
			S.hash_at[applied] = h;
		SIM_ASSERT("state hash", S.hash_at[applied] == h,
			   "node %u state hash differs at applied index %" PRIu64, n->id, applied);
	}
	check_config_in_effect(n);
	check_config_applied(n);
	SIM_ASSERT("well-formed replication", cns_counter(c, CNS_C_MALFORMED) == 0,
		   "node %u refused entries from a leader as malformed", n->id);
	SIM_ASSERT("bank conservation", n->bank.violations == 0 &&
			   bank_total(&n->bank) == (int64_t)BANK_ACCOUNTS * BANK_INITIAL,
		   "node %u: money or time broken", n->id);
	/* The service sees the time of every entry applied to it; CONFIG entries are the
	 * core's own and do not reach it, so after one the service's time may be behind. */
	if (applied > 0 && n->bank.last_index != 0) {
		const struct ccfg *cc = ccfg_at(applied);
		bool config_last = cc != NULL && cc->index == applied;
		uint64_t at = cns_applied_time(c);
		SIM_ASSERT("cluster time",
			   config_last ? n->bank.last_time_ns <= at : n->bank.last_time_ns == at,
			   "node %u service time %" PRIu64 " differs from applied entry time %" PRIu64,
			   n->id, n->bank.last_time_ns, at);
	}
}

/* Begin an asynchronous snapshot on n and write the service into the buffer at once: the
 * forked child's image is the state at this moment, whatever the node applies after. */
static void
async_begin(struct node *n)
{
	void *buf = NULL;
	size_t cap = 0;
	int rc = cns_snapshot_begin(n->c, &buf, &cap);
	if (rc == -EALREADY)
		return; /* nothing applied since the base, as take would say */
	SIM_ASSERT("async snapshot", rc == 0, "n%u cns_snapshot_begin: %d", n->id, rc);
	uint64_t index = cns_snapshot_pending(n->c);
	SIM_ASSERT("async snapshot", index == cns_applied_index(n->c),
		   "n%u begun at %" PRIu64 ", applied %" PRIu64, n->id, index,
		   cns_applied_index(n->c));
	SIM_ASSERT("async snapshot", cap >= SNAP_MAX, "n%u buffer of %zu bytes", n->id, cap);
	size_t len = bank_ops.snapshot(&n->bank, buf, cap);
	SIM_ASSERT("async snapshot", len > 0, "n%u image did not fit %zu bytes", n->id, cap);
	SIM_ASSERT("async snapshot", len <= SNAP_MAX, "n%u image of %zu bytes", n->id, len);
	memcpy(n->async_img, buf, len);
	n->async_len = (uint32_t)len;
	n->async_index = index;
	n->async_left = (uint32_t)prng_range(&S.arng, 1, S.async_steps_max);
	S.async_begun++;
	trace("n%u async snapshot begun index=%" PRIu64 ", end in %u steps", n->id, index,
	      n->async_left);
}

/* One drive step of n's pending asynchronous snapshot; at the last one the host calls end.
 * end is 0 (the image is the base now) or -ESTALE, and -ESTALE only when a snapshot
 * installed meanwhile covers the index (only an install moves the base while one is
 * pending). */
static void
async_step(struct node *n)
{
	if (n->async_index == 0)
		return;
	SIM_ASSERT("async snapshot", cns_snapshot_pending(n->c) == n->async_index,
		   "n%u pending %" PRIu64 ", the host began %" PRIu64, n->id,
		   cns_snapshot_pending(n->c), n->async_index);
	if (--n->async_left > 0)
		return;
	uint64_t index = n->async_index;
	n->async_index = 0;
	int rc = cns_snapshot_end(n->c, n->async_len);
	const void *data;
	const struct cns_snapshot_meta *m = cns_snapshot(n->c, &data);
	SIM_ASSERT("async snapshot", cns_snapshot_pending(n->c) == 0,
		   "n%u still pending after end: %d", n->id, rc);
	trace("n%u async snapshot end index=%" PRIu64 ": %d (base %" PRIu64 ")", n->id, index, rc,
	      m->index);
	if (rc == -ESTALE) {
		SIM_ASSERT("async snapshot", m->index >= index,
			   "n%u end at %" PRIu64 " stale, but its base is %" PRIu64, n->id, index,
			   m->index);
		S.async_stale++;
		return;
	}
	SIM_ASSERT("async snapshot", rc == 0, "n%u cns_snapshot_end: %d", n->id, rc);
	SIM_ASSERT("async snapshot", m->index == index, "n%u ended %" PRIu64 ", base %" PRIu64,
		   n->id, index, m->index);
	SIM_ASSERT("async snapshot", m->len == sizeof(struct cns_snap_prefix) + n->async_len,
		   "n%u base of %" PRIu64 " bytes, %u written", n->id, m->len, n->async_len);
	SIM_ASSERT("async snapshot",
		   memcmp((const uint8_t *)data + sizeof(struct cns_snap_prefix), n->async_img,
			  n->async_len) == 0,
		   "n%u base at %" PRIu64 " is not the image written at begin", n->id, index);
	SIM_ASSERT("async snapshot", n->has_snap, "n%u base not handed to snapshot_saved", n->id);
	SIM_ASSERT("async snapshot", n->snap.index == index,
		   "n%u base at %" PRIu64 ", snapshot_saved was handed %" PRIu64, n->id, index,
		   n->snap.index);
	S.async_based++;
}

/* Host policy: snapshot every snap_every entries, or when the log store fills up; a share
 * of them asynchronously. While one is being written the core refuses another of either
 * kind, and the host waits for it. */
static void
host_snapshot(struct node *n)
{
	if (n->async_index != 0) {
		void *buf = NULL;
		size_t cap = 0;
		int rc = cns_snapshot_take(n->c);
		SIM_ASSERT("async snapshot", rc == -EBUSY, "n%u take while pending: %d", n->id, rc);
		rc = cns_snapshot_begin(n->c, &buf, &cap);
		SIM_ASSERT("async snapshot", rc == -EBUSY, "n%u begin while pending: %d", n->id,
			   rc);
		return;
	}
	if (S.async_pm > 0 && prng_chance(&S.arng, S.async_pm, 1000)) {
		async_begin(n);
		return;
	}
	if (cns_snapshot_take(n->c) == 0)
		S.snapshots++;
}

static void
drive(struct node *n)
{
	if (!n->up)
		return;
	observe(n);
	cns_apply(n->c, 64);
	observe(n);
	async_step(n);
	if (cns_applied_index(n->c) >= cns_snapshot(n->c, NULL)->index + n->snap_every ||
	    cns_memlog_count(n->log) > S.log_limits.entries_max / 4 * 3)
		host_snapshot(n);
	observe(n);
}

/* ---------------------------------------------------------------------------------------
 * Events.
 * ------------------------------------------------------------------------------------- */

static const char *
msg_name(const struct wire_msg_hdr *m)
{
	return wire_type_name(m->type);
}

static void
ev_deliver(struct ev *e)
{
	struct slot *s = &S.slots[e->arg];
	struct node *n = &S.nodes[e->node];
	const struct wire_msg_hdr *m = (const void *)s->buf;
	if (n->up) {
		if (S.trace) {
			uint64_t term;
			memcpy(&term, m + 1, 8);
			trace("n%u <- n%u %s term=%" PRIu64 " len=%u", n->id, s->from, msg_name(m),
			      term, m->length);
		}
		int rc = cns_step(n->c, local_clock(n), m);
		SIM_ASSERT("sim", rc == 0, "cns_step refused a message: %d", rc);
		drive(n);
	}
	s->next_free = S.free_slot;
	S.free_slot = (int32_t)e->arg;
}

static void
ev_tick(struct ev *e)
{
	struct node *n = &S.nodes[e->node];
	if (!n->up || e->arg != n->gen)
		return;
	cns_tick(n->c, local_clock(n));
	drive(n);
	ev_push(S.now + rnd(1 * MS, 4 * MS), EV_TICK, n->idx, n->gen);
}

static void
ev_client(void)
{
	if (!S.clients_on)
		return;
	ev_push(S.now + rnd(200 * US, 4 * MS), EV_CLIENT, 0, 0);
	uint32_t burst = (uint32_t)rnd(1, 6);
	for (uint32_t b = 0; b < burst; b++) {
		struct node *n = &S.nodes[S.client_guess % S.n];
		if (!n->up) {
			S.client_guess = (uint32_t)rnd(0, S.n - 1);
			return;
		}
		struct wire_transfer t;
		bank_transfer_msg(&t, S.cfg.shard, rnd(0, BANK_ACCOUNTS - 1),
				  rnd(0, BANK_ACCOUNTS - 1), (int64_t)rnd(1, 50000), ++S.transfer_id);
		int rc = cns_propose(n->c, local_clock(n), &t.hdr);
		if (rc == -EPERM) {
			uint32_t hint = cns_leader(n->c);
			S.client_guess = hint != CNS_NODE_NONE ? hint - 1 : (uint32_t)rnd(0, S.n - 1);
			return;
		}
		if (rc != 0)
			return;
		S.proposals_ok++;
	}
	if (chance(300))
		cns_flush(S.nodes[S.client_guess % S.n].c, local_clock(&S.nodes[S.client_guess % S.n]));
	drive(&S.nodes[S.client_guess % S.n]);
}

static uint32_t
up_count(void)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < S.n; i++)
		k += S.nodes[i].up;
	return k;
}

static struct node *leader_node(void);

static void
heal_links(void)
{
	memset(S.cut, 0, sizeof(S.cut));
}

static void
ev_fault(void)
{
	if (!S.chaos)
		return;
	ev_push(S.now + rnd(S.fault_min_ns, S.fault_max_ns), EV_FAULT, 0, 0);
	uint32_t a = (uint32_t)rnd(0, S.n - 1);
	uint32_t b = (uint32_t)rnd(0, S.n - 1);
	struct node *l = leader_node();
	switch (rnd(0, 12)) {
	case 0: { /* full partition: a random side against the rest */
		uint32_t side = (uint32_t)rnd(1, (1u << S.n) - 2);
		for (uint32_t i = 0; i < S.n; i++)
			for (uint32_t j = 0; j < S.n; j++)
				S.cut[i][j] = ((side >> i) & 1) != ((side >> j) & 1);
		S.partitions++;
		trace("fault: partition side mask %#x", side);
		ev_push(S.now + rnd(50 * MS, 2000 * MS), EV_LINKS_HEAL, 0, 0);
		break;
	}
	case 1: /* asymmetric: a's messages to b are lost, b's reach a */
		if (a != b) {
			S.cut[a][b] = true;
			trace("fault: asymmetric cut n%u -> n%u", a + 1, b + 1);
			ev_push(S.now + rnd(50 * MS, 2000 * MS), EV_LINKS_HEAL, 0, 0);
		}
		break;
	case 2: /* isolate one node both ways */
		for (uint32_t j = 0; j < S.n; j++) {
			S.cut[a][j] = j != a;
			S.cut[j][a] = j != a;
		}
		trace("fault: isolate n%u", a + 1);
		ev_push(S.now + rnd(50 * MS, 1500 * MS), EV_LINKS_HEAL, 0, 0);
		break;
	case 3:
	case 4: /* crash */
		if (S.nodes[a].up && up_count() > 1) {
			node_crash(&S.nodes[a]);
			ev_push(S.now + rnd(10 * MS, 1500 * MS), EV_RESTART, a, S.nodes[a].gen);
		}
		break;
	case 5: /* slow disk */
		S.nodes[a].disk_slow_ns = rnd(1 * MS, 80 * MS);
		trace("fault: slow disk n%u +%" PRIu64 "us", a + 1, S.nodes[a].disk_slow_ns / US);
		ev_push(S.now + rnd(50 * MS, 1000 * MS), EV_DISK_HEAL, a, 0);
		break;
	case 6: /* network quality */
		S.loss_pm = (uint32_t)rnd(0, 200);
		S.dup_pm = (uint32_t)rnd(0, 50);
		S.delay_max_ns = rnd(S.delay_min_ns, 15 * MS);
		trace("fault: loss=%u/1000 dup=%u/1000 delay<=%" PRIu64 "us", S.loss_pm, S.dup_pm,
		      S.delay_max_ns / US);
		break;
	case 7: { /* leadership transfer */
		for (uint32_t i = 0; i < S.n; i++) {
			struct node *n = &S.nodes[i];
			if (n->up && cns_role(n->c) == CNS_LEADER && i != b) {
				int rc = cns_transfer(n->c, local_clock(n), b + 1);
				trace("fault: transfer n%u -> n%u rc=%d", n->id, b + 1, rc);
				S.transfers++;
				drive(n);
				break;
			}
		}
		break;
	}
	case 8: /* heal links */
		heal_links();
		trace("fault: links healed");
		break;
	case 10: /* crash the leader right after it appended */
		if (l != NULL && up_count() > 1) {
			node_crash(l);
			ev_push(S.now + rnd(10 * MS, 800 * MS), EV_RESTART, l->idx, l->gen);
		}
		break;
	case 11: /* cut the leader off, briefly */
		if (l != NULL) {
			for (uint32_t j = 0; j < S.n; j++) {
				S.cut[l->idx][j] = j != l->idx;
				S.cut[j][l->idx] = j != l->idx;
			}
			trace("fault: isolate leader n%u", l->id);
			ev_push(S.now + rnd(5 * MS, 700 * MS), EV_LINKS_HEAL, 0, 0);
		}
		break;
	default: /* clock jump forward on one node */
		S.nodes[a].clock_off_ns += (int64_t)rnd(0, 500 * MS);
		trace("fault: clock of n%u jumps", a + 1);
		break;
	}
}

/* ---------------------------------------------------------------------------------------
 * Membership changes: plans drawn by the seed, carried out on whoever leads.
 * ------------------------------------------------------------------------------------- */

static const char *
op_name(enum cns_member_op op)
{
	switch (op) {
	case CNS_MEMBER_ADD:
		return "add";
	case CNS_MEMBER_PROMOTE:
		return "promote";
	case CNS_MEMBER_REMOVE:
		return "remove";
	}
	return "?";
}

/* A random member of m: voters (want 1), learners (want 0); 0 when there is none. */
static uint32_t
pick_member(const struct cns_members *m, int want, uint32_t except)
{
	uint32_t ids[CNS_MEMBERS_MAX], k = 0;
	for (uint32_t i = 0; i < m->count; i++)
		if (cfg_role(m, m->ids[i]) == want && m->ids[i] != except)
			ids[k++] = m->ids[i];
	return k > 0 ? ids[rnd(0, k - 1)] : 0;
}

/* The configuration host h would have after a restart: the latest CONFIG entry in its
 * store, else its snapshot's, else its bootstrap set. */
static void
stored_members(const struct node *h, struct cns_members *m)
{
	if (h->log_cfg > base_of(h)) {
		const struct wire_entry_hdr *e = cns_memlog_ops.entry(h->log, h->log_cfg);
		SIM_ASSERT("sim", cfg_decode(e + 1, e->data_len, m), "bad stored configuration");
	} else if (h->has_snap) {
		struct cns_snap_prefix pre;
		memcpy(&pre, h->snap_data, sizeof(pre));
		SIM_ASSERT("sim", cfg_decode(&pre.config, sizeof(pre.config), m),
			   "bad snapshot configuration");
	} else {
		boot_members(h, m);
	}
}

/* The operator's rule for re-using a node id with an empty disk: only once the leader's
 * snapshot covers the latest committed configuration, which leaves the node out (the
 * simulator takes one first when it can). The new incarnation then catches up from that
 * snapshot and never holds a configuration in which its predecessor voted. Without the
 * rule, seed 1123 (all else as now): wiped n2 installed an old snapshot (index 248) whose
 * configuration counted n2 as a voter, and its vote elected n1, removed long before,
 * without the committed entries. The core's share is that a joining node with no
 * configuration grants no vote (cns_elect.c, seed 12). Removed nodes may keep running with
 * their old state; they must not disturb the cluster. */

static bool
wipe_ok(const struct node *x)
{
	struct node *l = leader_node();
	const struct ccfg *g = ccfg_latest();
	if (l == NULL || g == NULL || cfg_role(&g->m, x->id) >= 0)
		return false;
	if (cns_snapshot(l->c, NULL)->index < g->index && cns_snapshot_take(l->c) == 0)
		S.snapshots++;
	return cns_snapshot(l->c, NULL)->index >= g->index;
}

/* A host outside configuration m to add: a spare never booted, a host provisioned again
 * empty, or a removed host still holding its old state (re-added as it is, or wiped
 * first). 0 when every host is a member. */
static uint32_t
pick_outsider(const struct cns_members *m, bool wipe_ok_now)
{
	uint32_t ids[NODES_MAX], k = 0;
	for (uint32_t i = 0; i < S.n; i++)
		if (cfg_role(m, i + 1) < 0)
			ids[k++] = i + 1;
	if (k == 0)
		return 0;
	struct node *x = &S.nodes[ids[rnd(0, k - 1)] - 1];
	if (!x->booted) {
		x->join = true;
		trace("n%u provisioned: boots as a joining node", x->id);
		node_boot(x);
	} else if (wipe_ok_now && chance(500) && wipe_ok(x)) {
		node_wipe(x);
	} else {
		S.readds++;
	}
	return x->id;
}

static void
plan_done(const char *why)
{
	if (why != NULL) {
		trace("member plan %u on n%u abandoned: %s", S.plan.kind, S.plan.node, why);
		S.plans_abandoned++;
	}
	memset(&S.plan, 0, sizeof(S.plan));
}

/* Draw the next plan from the leader's configuration. */
static void
plan_new(struct node *l)
{
	struct cns_members m;
	uint64_t mi = cns_members(l->c, &m);
	/* Hosts are wiped only while the leader's configuration is committed (and under the
	 * id-reuse rule of wipe_ok). */
	bool committed = mi <= cns_commit_index(l->c);
	uint32_t voters = cfg_voters(&m), learners = m.count - voters;
	struct plan p = {.deadline = S.now + rnd(1000, 4000) * MS};
	uint32_t r = (uint32_t)rnd(0, 99);
	if (r < 45 && learners > 0) {
		p.kind = chance(750) ? PLAN_PROMOTE : PLAN_REMOVE;
		p.node = pick_member(&m, 0, 0);
	} else if (r < 70 && voters >= 3) {
		p.kind = PLAN_REMOVE;
		p.node = chance(300) ? l->id : pick_member(&m, 1, l->id);
	} else if (r < 85 && m.count < CNS_MEMBERS_MAX && voters >= 2) {
		/* Replace a dead member: one that is down, or one we crash for a long while. */
		uint32_t dead = 0;
		for (uint32_t i = 0; i < m.count && dead == 0; i++) {
			uint32_t id = m.ids[i];
			if (id != l->id && cfg_role(&m, id) == 1 && !S.nodes[id - 1].up)
				dead = id;
		}
		if (dead == 0) {
			dead = pick_member(&m, 1, l->id);
			if (dead != 0 && up_count() > 1) {
				struct node *d = &S.nodes[dead - 1];
				node_crash(d);
				ev_push(S.now + rnd(1500 * MS, 5000 * MS), EV_RESTART, d->idx, d->gen);
			}
		}
		if (dead != 0) {
			p.kind = PLAN_REPLACE;
			p.dead = dead;
			p.node = pick_outsider(&m, committed);
		}
	} else if (m.count < CNS_MEMBERS_MAX) {
		p.kind = PLAN_ADD;
		p.then_promote = chance(700);
		p.node = pick_outsider(&m, committed);
		/* Half the time compact first, so the learner is caught up by a snapshot. */
		if (chance(500) && cns_snapshot_take(l->c) == 0)
			S.snapshots++;
	}
	if (p.kind == PLAN_NONE && committed) {
		/* Nothing to change (or every slot taken): decommission a removed host. */
		for (uint32_t i = 0; i < S.n; i++) {
			struct node *x = &S.nodes[i];
			if (!x->booted || cfg_role(&m, x->id) >= 0)
				continue;
			struct cns_members xm;
			stored_members(x, &xm);
			if (xm.count > 0 && wipe_ok(x)) { /* it holds an old membership */
				node_wipe(x);
				break;
			}
		}
	}
	if (p.kind == PLAN_NONE || p.node == 0)
		return;
	S.plan = p;
	trace("member plan %u: node n%u dead n%u in %s (leader n%u)", p.kind, p.node, p.dead,
	      cfg_text(&m), l->id);
}

/* One call of the current plan on leader l. */
static void
plan_step(struct node *l)
{
	struct plan *p = &S.plan;
	enum cns_member_op op;
	uint32_t node = p->node;
	switch (p->kind) {
	case PLAN_ADD:
	case PLAN_REPLACE:
		op = p->step == 0 ? CNS_MEMBER_ADD
				  : p->step == 1 ? CNS_MEMBER_PROMOTE : CNS_MEMBER_REMOVE;
		if (p->step == 2)
			node = p->dead;
		break;
	case PLAN_PROMOTE:
		op = CNS_MEMBER_PROMOTE;
		break;
	default:
		op = CNS_MEMBER_REMOVE;
		break;
	}
	/* What the learner caught up with, for the counters. */
	uint64_t installed = 0;
	if (op == CNS_MEMBER_PROMOTE && S.nodes[node - 1].up)
		installed = cns_counter(S.nodes[node - 1].c, CNS_C_SNAPSHOTS_INSTALLED);
	drive(l);
	if (!l->up || cns_role(l->c) != CNS_LEADER)
		return;
	int rc = cns_member_change(l->c, local_clock(l), op, node);
	trace("member %s n%u on leader n%u term %" PRIu64 ": rc=%d", op_name(op), node, l->id,
	      cns_term(l->c), rc);
	drive(l);
	if (rc == -EBUSY || rc == -EAGAIN || rc == -EPERM)
		return; /* retried on whoever leads next time */
	if (rc != 0) {
		plan_done("refused"); /* stale: a change of another leader was lost or won */
		return;
	}
	switch (op) {
	case CNS_MEMBER_ADD:
		S.adds++;
		break;
	case CNS_MEMBER_PROMOTE:
		S.promotes++;
		if (installed > 0)
			S.joins_snapshot++;
		else
			S.joins_log++;
		break;
	case CNS_MEMBER_REMOVE:
		S.removes++;
		S.self_removes += node == l->id;
		break;
	}
	bool more = (p->kind == PLAN_ADD && p->step == 0 && p->then_promote) ||
		    (p->kind == PLAN_REPLACE && p->step < 2);
	if (more)
		p->step++;
	else
		plan_done(NULL);
	/* The change is appended, not committed: now and then crash or cut off the leader that
	 * made it (the entry then commits under a new leader, or is truncated and reverted). */
	uint32_t r = (uint32_t)rnd(0, 999);
	if (r < 120 && up_count() > 1) {
		node_crash(l);
		ev_push(S.now + rnd(10 * MS, 800 * MS), EV_RESTART, l->idx, l->gen);
	} else if (r < 240) {
		for (uint32_t j = 0; j < S.n; j++) {
			S.cut[l->idx][j] = j != l->idx;
			S.cut[j][l->idx] = j != l->idx;
		}
		trace("fault: isolate changing leader n%u", l->id);
		ev_push(S.now + rnd(5 * MS, 700 * MS), EV_LINKS_HEAL, 0, 0);
	}
}

static void
ev_member(void)
{
	if (!S.chaos)
		return;
	struct node *l = leader_node();
	if (S.plan.kind == PLAN_NONE && l != NULL)
		plan_new(l);
	if (S.plan.kind != PLAN_NONE) {
		if (S.now >= S.plan.deadline)
			plan_done("timed out");
		else if (l != NULL)
			plan_step(l);
	}
	/* A plan under way is retried soon; the next one comes on the membership clock. */
	if (S.plan.kind != PLAN_NONE)
		ev_push(S.now + rnd(5 * MS, 40 * MS), EV_MEMBER, 0, 0);
	else
		ev_push(S.now + rnd(S.member_min_ns, S.member_max_ns), EV_MEMBER, 0, 0);
}

static void
disk_complete(struct node *n)
{
	struct disk_write *d = &n->dq[n->dq_head];
	n->dq_head = (n->dq_head + 1) % DISKQ_MAX;
	n->dq_count--;
	if (!n->up)
		return;
	cns_durable(n->c, d->index, d->term);
	drive(n);
}

/* The next disk completion over all nodes, or UINT64_MAX. */
static int
next_disk(uint64_t *t)
{
	int best = -1;
	*t = UINT64_MAX;
	for (uint32_t i = 0; i < S.n; i++) {
		struct node *n = &S.nodes[i];
		if (n->dq_count > 0 && n->dq[n->dq_head].done_at < *t) {
			*t = n->dq[n->dq_head].done_at;
			best = (int)i;
		}
	}
	return best;
}

static void
step_one(void)
{
	uint64_t td;
	int dn = next_disk(&td);
	S.events++;
	if (dn >= 0 && (S.heap_len == 0 || td <= S.heap[0].t)) {
		S.now = td;
		disk_complete(&S.nodes[dn]);
		return;
	}
	SIM_ASSERT("sim", S.heap_len > 0, "no events");
	struct ev e = ev_pop();
	S.now = e.t;
	switch (e.kind) {
	case EV_DELIVER:
		ev_deliver(&e);
		break;
	case EV_TICK:
		ev_tick(&e);
		break;
	case EV_CLIENT:
		ev_client();
		break;
	case EV_FAULT:
		ev_fault();
		break;
	case EV_RESTART:
		if (!S.nodes[e.node].up && S.nodes[e.node].gen == e.arg)
			node_restart(&S.nodes[e.node]);
		break;
	case EV_LINKS_HEAL:
		heal_links();
		trace("links healed");
		break;
	case EV_DISK_HEAL:
		S.nodes[e.node].disk_slow_ns = 0;
		break;
	case EV_MEMBER:
		ev_member();
		break;
	default:
		fail("sim", "bad event kind %u", e.kind);
	}
}

/* ---------------------------------------------------------------------------------------
 * One run.
 * ------------------------------------------------------------------------------------- */

/* Totals over a range of seeds. */
static struct {
	uint64_t adds, promotes, removes, self_removes, wipes, readds;
	uint64_t joins_snapshot, joins_log, reverted;
	uint64_t async_begun, async_based, async_stale, async_dropped;
} T;

static void *
xalloc(size_t size)
{
	void *p = aligned_alloc(64, (size + 63) & ~(size_t)63);
	if (p == NULL) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	memset(p, 0, size);
	return p;
}

static struct node *
leader_node(void)
{
	struct node *best = NULL;
	for (uint32_t i = 0; i < S.n; i++) {
		struct node *n = &S.nodes[i];
		if (n->up && cns_role(n->c) == CNS_LEADER &&
		    (best == NULL || cns_term(n->c) > cns_term(best->c)))
			best = n;
	}
	return best;
}

static void
run_until(uint64_t t)
{
	while (S.now < t)
		step_one();
}

static int
run(uint64_t seed, uint64_t steps)
{
	/* Reset everything but the allocations. */
	struct slot *slots = S.slots;
	struct lm_slot *lm = S.lm;
	uint64_t *cc = S.committed_chain, *ct = S.committed_term, *ha = S.hash_at;
	uint64_t idx_max = S.idx_max, lm_cap = S.lm_cap;
	void *cmem[NODES_MAX], *lmem[NODES_MAX];
	uint64_t *chains[NODES_MAX], *times[NODES_MAX];
	for (uint32_t i = 0; i < NODES_MAX; i++) {
		cmem[i] = S.nodes[i].cmem;
		lmem[i] = S.nodes[i].logmem;
		chains[i] = S.nodes[i].chain;
		times[i] = S.nodes[i].time_at;
	}
	bool tr = S.trace, verbose = S.verbose, members_mode = S.members_mode;
	uint32_t chunk_opt = S.chunk_opt;
	int32_t async_opt = S.async_opt;
	memset(&S, 0, sizeof(S));
	S.trace = tr;
	S.verbose = verbose;
	S.members_mode = members_mode;
	S.chunk_opt = chunk_opt;
	S.async_opt = async_opt;
	S.slots = slots;
	S.lm = lm;
	S.committed_chain = cc;
	S.committed_term = ct;
	S.hash_at = ha;
	S.idx_max = idx_max;
	S.lm_cap = lm_cap;
	for (uint32_t i = 0; i < NODES_MAX; i++) {
		S.nodes[i].cmem = cmem[i];
		S.nodes[i].logmem = lmem[i];
		S.nodes[i].chain = chains[i];
		S.nodes[i].time_at = times[i];
	}
	memset(cc, 0, idx_max * sizeof(uint64_t));
	memset(ct, 0, idx_max * sizeof(uint64_t));
	memset(ha, 0, idx_max * sizeof(uint64_t));
	memset(lm, 0, lm_cap * sizeof(*lm));
	S.seed = seed;
	S.steps = steps;
	prng_seed(&S.rng, seed);

	S.n = chance(500) ? 3 : 5;
	S.n_boot = S.n;
	S.durability = chance(500) ? CNS_DURABLE_DISK : CNS_DURABLE_MEMORY;
	S.limits.snapshot_bytes_max = SNAP_MAX;
	S.limits.flags = CNS_LIM_SNAP_ASYNC;
	S.log_limits.entries_max = (uint32_t)rnd(256, 2048);
	S.log_limits.bytes_max = 1u << 20;
	uint32_t members[NODES_MAX];
	for (uint32_t i = 0; i < S.n; i++)
		members[i] = i + 1;
	cns_config_default(&S.cfg, 7, 1, S.n_boot, members);
	S.cfg.durability = S.durability;
	S.cfg.election_timeout_min_ns = 150 * MS;
	S.cfg.election_timeout_max_ns = 300 * MS;
	S.cfg.heartbeat_ns = 30 * MS;
	S.cfg.tick_entry_ns = rnd(20, 100) * MS;
	S.cfg.batch_bytes_max = ((uint32_t)rnd(1, 60) * 40 + 7) & ~7u;
	S.cfg.append_entries_max = (uint32_t)rnd(1, 32);
	S.cfg.inflight_max = (uint32_t)rnd(1, 8);
	S.cfg.uncommitted_max = (uint32_t)rnd(16, 128);
	S.cfg.log_keep_entries = (uint32_t)rnd(0, 32);
	/* Snapshot transfer: half the seeds send the bank's ~200-byte image in chunks of 8 to
	 * 64 bytes (4 to 25 chunks, as a 1500-byte MTU cuts a real snapshot), 1 to 4 in flight.
	 * Its own generator, so the chaos of a seed is the same either way. */
	struct prng crng;
	prng_seed(&crng, seed ^ UINT64_C(0x6368756e6b73));
	S.cfg.snapshot_chunk_bytes = CNS_SNAPSHOT_CHUNK_MAX;
	S.cfg.snapshot_inflight_max = (uint32_t)prng_range(&crng, 1, 4);
	if (prng_chance(&crng, 1, 2))
		S.cfg.snapshot_chunk_bytes = (uint32_t)prng_range(&crng, 1, 8) * 8;
	if (S.chunk_opt != 0)
		S.cfg.snapshot_chunk_bytes = S.chunk_opt;
	S.delay_min_ns = 100 * US;
	S.delay_max_ns = rnd(300 * US, 5 * MS);
	S.loss_pm = (uint32_t)rnd(0, 50);
	/* Some seeds are calm, some are storms of leader changes. */
	S.fault_min_ns = rnd(2, 20) * MS;
	S.fault_max_ns = S.fault_min_ns + rnd(20, 600) * MS;
	S.dup_pm = (uint32_t)rnd(0, 20);
	/* Membership: spare hosts up to NODES_MAX, a plan every 50 ms to 1.5 s (some seeds
	 * change membership constantly, some rarely); a third of the seeds snapshot only when
	 * the log fills, so early joiners catch up from the log rather than a snapshot. Its
	 * own generator, so the network and fault draws of a seed stay as they are. */
	struct prng mrng;
	prng_seed(&mrng, seed ^ UINT64_C(0x6d656d62657273));
	/* Asynchronous snapshots: a quarter of the seeds take every snapshot synchronously, the
	 * others begin a quarter to all of them asynchronously and end each 1 to 2..512 drive
	 * steps later (long ones see installs, leader changes and a filling log meanwhile). */
	prng_seed(&S.arng, seed ^ UINT64_C(0x6173796e63));
	S.async_pm = prng_chance(&S.arng, 1, 4) ? 0 : (uint32_t)prng_range(&S.arng, 250, 1000);
	S.async_steps_max = 1u << prng_range(&S.arng, 1, 9);
	if (S.async_opt >= 0)
		S.async_pm = (uint32_t)S.async_opt;
	bool rare_snapshots = false;
	if (S.members_mode) {
		S.n = NODES_MAX;
		S.member_min_ns = (uint64_t)prng_range(&mrng, 50, 400) * MS;
		S.member_max_ns = S.member_min_ns + (uint64_t)prng_range(&mrng, 50, 1100) * MS;
		rare_snapshots = prng_chance(&mrng, 1, 3);
	}

	S.free_slot = -1;
	for (int32_t i = SLOTS - 1; i >= 0; i--) {
		S.slots[i].next_free = S.free_slot;
		S.free_slot = i;
	}
	null_sink.ctx = NULL;
	null_sink.emit = sink_emit;
	for (uint32_t i = 0; i < S.n; i++) {
		struct node *n = &S.nodes[i];
		n->id = i + 1;
		n->idx = i;
		memset(n->chain, 0, idx_max * sizeof(uint64_t));
		memset(n->time_at, 0, idx_max * sizeof(uint64_t));
		int rc = cns_memlog_init(&n->log, n->logmem, &S.log_limits);
		SIM_ASSERT("sim", rc == 0, "memlog init");
		n->clock_off_ns = (int64_t)rnd(1000 * MS, 3000 * MS);
		n->drift_ppm = (int64_t)rnd(0, 400) - 200;
		n->disk_lat_ns = rnd(20 * US, 2 * MS);
		n->snap_every = rnd(20, 400);
		if (rare_snapshots)
			n->snap_every = UINT64_C(1) << 40;
	}
	trace("seed %" PRIu64 ": %u nodes (%u hosts), %s durability, log %u entries, batch %u B, "
	      "window %u, snapshot chunks %u B x %u, async snapshots %u/1000 within %u steps",
	      seed, S.n_boot, S.n, S.durability == CNS_DURABLE_DISK ? "disk" : "memory",
	      S.log_limits.entries_max, S.cfg.batch_bytes_max, S.cfg.inflight_max,
	      S.cfg.snapshot_chunk_bytes, S.cfg.snapshot_inflight_max, S.async_pm,
	      S.async_steps_max);
	for (uint32_t i = 0; i < S.n_boot; i++)
		node_boot(&S.nodes[i]);
	S.clients_on = true;
	S.chaos = true;
	ev_push(rnd(100 * MS, 400 * MS), EV_CLIENT, 0, 0);
	ev_push(rnd(300 * MS, 1000 * MS), EV_FAULT, 0, 0);
	if (S.members_mode)
		ev_push((uint64_t)prng_range(&mrng, 100, 1000) * MS, EV_MEMBER, 0, 0);

	/* Chaos. */
	for (uint64_t i = 0; i < steps; i++)
		step_one();

	/* Heal: links, disks, network, every node back up. */
	S.chaos = false;
	heal_links();
	S.loss_pm = 0;
	S.dup_pm = 0;
	S.delay_max_ns = 2 * MS;
	for (uint32_t i = 0; i < S.n; i++) {
		struct node *n = &S.nodes[i];
		n->disk_slow_ns = 0;
		if (n->booted && !n->up)
			node_restart(n);
	}
	uint64_t healed_at = S.now;
	uint64_t commit_at_heal = S.global_commit;
	trace("healed: global commit %" PRIu64, commit_at_heal);

	/* Liveness: within bounded simulated time a leader exists and commits new entries. */
	const uint64_t bound = 5000 * MS;
	while (S.now < healed_at + bound &&
	       (leader_node() == NULL || S.global_commit <= commit_at_heal + 5))
		step_one();
	SIM_ASSERT("liveness", leader_node() != NULL && S.global_commit > commit_at_heal + 5,
		   "no leader or no committed progress %" PRIu64 "ms after healing",
		   bound / MS);

	/* Quiesce: clients stop; every live member must apply everything committed. */
	run_until(S.now + 1000 * MS);
	S.clients_on = false;
	run_until(S.now + 500 * MS);
	uint64_t target = S.global_commit;
	run_until(S.now + 500 * MS);
	/* The final configuration: its leader is a voter of it and has committed it; every
	 * member of it (learners too) applied everything. Removed hosts are not looked at. */
	struct node *l = leader_node();
	SIM_ASSERT("liveness", l != NULL, "no leader after the quiet period");
	struct cns_members fin;
	uint64_t fin_index = cns_members(l->c, &fin);
	SIM_ASSERT("liveness", cns_is_voter(l->c, l->id) && fin_index <= cns_commit_index(l->c),
		   "leader n%u of %s (index %" PRIu64 ", commit %" PRIu64 ") is not a voter of a "
		   "committed configuration",
		   l->id, cfg_text(&fin), fin_index, cns_commit_index(l->c));
	for (uint32_t i = 0; i < S.n; i++) {
		struct node *n = &S.nodes[i];
		if (cfg_role(&fin, n->id) < 0)
			continue;
		SIM_ASSERT("eventually applied", n->up && cns_applied_index(n->c) >= target,
			   "n%u applied %" PRIu64 " of committed %" PRIu64 " (member of %s)", n->id,
			   n->up ? cns_applied_index(n->c) : 0, target, cfg_text(&fin));
	}
	uint64_t installed = 0, truncated = 0, rejected = 0, lease = 0, tnow = 0, cq = 0;
	uint64_t reverted = 0;
	for (uint32_t i = 0; i < S.n; i++) {
		if (!S.nodes[i].booted)
			continue;
		const struct cns *c = S.nodes[i].c;
		reverted += cns_counter(c, CNS_C_CONFIG_REVERTED);
		installed += cns_counter(c, CNS_C_SNAPSHOTS_INSTALLED);
		truncated += cns_counter(c, CNS_C_ENTRIES_TRUNCATED);
		rejected += cns_counter(c, CNS_C_APPEND_REJECTED);
		lease += cns_counter(c, CNS_C_VOTES_IGNORED_LEASE);
		tnow += cns_counter(c, CNS_C_TIMEOUT_NOW_SENT);
		cq += cns_counter(c, CNS_C_CHECK_QUORUM_LOST);
	}
	if (S.trace || S.verbose)
		printf("seed %" PRIu64 ": counters (since last restart) installed=%" PRIu64
		       " truncated=%" PRIu64 " rejected=%" PRIu64 " lease_ignored=%" PRIu64
		       " timeout_now=%" PRIu64 " check_quorum_lost=%" PRIu64
		       " config_reverted=%" PRIu64 "; membership: self_removes=%" PRIu64
		       " wipes=%" PRIu64 " readds=%" PRIu64 " joins_snapshot=%" PRIu64
		       " joins_log=%" PRIu64 " abandoned=%" PRIu64 " final=%s\n",
		       seed, installed, truncated, rejected, lease, tnow, cq, reverted,
		       S.self_removes, S.wipes, S.readds, S.joins_snapshot, S.joins_log,
		       S.plans_abandoned, cfg_text(&fin));
	printf("seed %" PRIu64 ": ok nodes=%u %s events=%" PRIu64 " commit=%" PRIu64
	       " proposals=%" PRIu64 " crashes=%" PRIu64 " torn=%" PRIu64 " partitions=%" PRIu64
	       " transfers=%" PRIu64 " snapshots=%" PRIu64 " async=%" PRIu64 " async_stale=%" PRIu64
	       " adds=%" PRIu64 " promotes=%" PRIu64 " removes=%" PRIu64 " msgs=%" PRIu64
	       " dropped=%" PRIu64 " sim_ms=%" PRIu64 "\n",
	       seed, S.n_boot, S.durability == CNS_DURABLE_DISK ? "disk" : "memory", S.events,
	       S.global_commit, S.proposals_ok, S.crashes, S.torn, S.partitions, S.transfers,
	       S.snapshots, S.async_begun, S.async_stale, S.adds, S.promotes, S.removes,
	       S.msgs_sent, S.msgs_dropped, S.now / MS);
	T.adds += S.adds;
	T.promotes += S.promotes;
	T.removes += S.removes;
	T.self_removes += S.self_removes;
	T.wipes += S.wipes;
	T.readds += S.readds;
	T.joins_snapshot += S.joins_snapshot;
	T.joins_log += S.joins_log;
	T.reverted += reverted;
	T.async_begun += S.async_begun;
	T.async_based += S.async_based;
	T.async_stale += S.async_stale;
	T.async_dropped += S.async_dropped;
	return 0;
}

static void
usage(void)
{
	fprintf(stderr, "usage: sim-raft (--seed N | --seeds A-B) [--steps M] [--chunk BYTES] "
		"[--members] [--async PER_MILLE] [--trace] [--verbose]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	uint64_t first = 1, last = 1, steps = 20000;
	int32_t async_opt = -1;
	bool have_seed = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			first = last = strtoull(argv[++i], NULL, 0);
			have_seed = true;
		} else if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
			char *dash;
			first = strtoull(argv[++i], &dash, 0);
			if (*dash != '-')
				usage();
			last = strtoull(dash + 1, NULL, 0);
			have_seed = true;
		} else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
			steps = strtoull(argv[++i], NULL, 0);
		} else if (strcmp(argv[i], "--trace") == 0) {
			S.trace = true;
		} else if (strcmp(argv[i], "--verbose") == 0) {
			S.verbose = true;
		} else if (strcmp(argv[i], "--members") == 0) {
			S.members_mode = true;
		} else if (strcmp(argv[i], "--async") == 0 && i + 1 < argc) {
			unsigned long v = strtoul(argv[++i], NULL, 0);
			if (v > 1000)
				usage();
			async_opt = (int32_t)v;
		} else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc) {
			unsigned long v = strtoul(argv[++i], NULL, 0);
			if (v < 8 || v > CNS_SNAPSHOT_CHUNK_MAX || v % 8 != 0)
				usage();
			S.chunk_opt = (uint32_t)v;
		} else {
			usage();
		}
	}
	if (!have_seed || last < first)
		usage();
	S.async_opt = async_opt;
	check_hook_set(on_check_fail);

	/* All memory up front; runs reuse it. */
	S.idx_max = steps * 2 + 200000;
	S.lm_cap = 1;
	while (S.lm_cap < S.idx_max * 2)
		S.lm_cap <<= 1;
	S.slots = xalloc(sizeof(struct slot) * SLOTS);
	S.lm = xalloc(sizeof(struct lm_slot) * S.lm_cap);
	S.committed_chain = xalloc(S.idx_max * sizeof(uint64_t));
	S.committed_term = xalloc(S.idx_max * sizeof(uint64_t));
	S.hash_at = xalloc(S.idx_max * sizeof(uint64_t));
	struct cns_limits limits = {.snapshot_bytes_max = SNAP_MAX, .flags = CNS_LIM_SNAP_ASYNC};
	struct cns_memlog_limits ll = {.entries_max = 2048, .bytes_max = 1u << 20};
	for (uint32_t i = 0; i < NODES_MAX; i++) {
		S.nodes[i].cmem = xalloc(cns_footprint(&limits));
		S.nodes[i].logmem = xalloc(cns_memlog_footprint(&ll));
		S.nodes[i].chain = xalloc(S.idx_max * sizeof(uint64_t));
		S.nodes[i].time_at = xalloc(S.idx_max * sizeof(uint64_t));
	}
	for (uint64_t seed = first; seed <= last; seed++)
		run(seed, steps);
	printf("sim-raft: %" PRIu64 " seeds ok", last - first + 1);
	if (S.members_mode)
		printf(" (membership: adds=%" PRIu64 " promotes=%" PRIu64 " removes=%" PRIu64
		       " self_removes=%" PRIu64 " wipes=%" PRIu64 " readds=%" PRIu64
		       " joins_snapshot=%" PRIu64 " joins_log=%" PRIu64 " config_reverted=%" PRIu64
		       ")",
		       T.adds, T.promotes, T.removes, T.self_removes, T.wipes, T.readds,
		       T.joins_snapshot, T.joins_log, T.reverted);
	printf(" (async snapshots: begun=%" PRIu64 " based=%" PRIu64 " stale=%" PRIu64
	       " dropped=%" PRIu64 ")\n",
	       T.async_begun, T.async_based, T.async_stale, T.async_dropped);
	return 0;
}

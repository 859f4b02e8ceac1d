/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim-system: the whole saga under faults, deterministically.
 *
 * The real `oms` and `me` services run on the real Raft core (consensus/), several shards of
 * three members each spread over three simulated hosts. Everything outside consensus is
 * simulated here with the semantics ARCHITECTURE.md gives it:
 *
 *   - a network between hosts (delay, loss, duplication, reordering, partitions);
 *   - a bridge per OMS shard, living on that shard's leader host, rebuilt from the
 *     service's PENDING sagas after every leader change and re-driving them to the ME;
 *   - a persister per OMS shard (leader only, rebuilt from state after failover) over a
 *     model database with version-checked CAS flush, owner claim on hydration, idempotent
 *     repeat of an own write, conflict on a foreign one; slow, failing and restarting;
 *   - gateways routing by whale pin, else HRW over active shards, under an epoch (one of
 *     them always late with config changes), following NOT_LEADER and NOT_OWNER NAKs;
 *   - clients that deposit and trade, retransmit on silence, and keep their own ledger.
 *
 * One process, one thread, one seed: `sim-system --seed N [--steps M] [--trace]` replays a
 * run exactly. Invariants (ARCHITECTURE.md §9) are checked continuously and, after every
 * chaos phase, at a quiescent point where the faults are healed and the system drained.
 * A failure prints the seed, the violated invariant and the tail of the trace.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/hrw.h"
#include "common/prng.h"
#include "common/service.h"
#include "common/wire.h"
#include "consensus/cns.h"
#include "me/me.h"
#include "oms/oms.h"

/* ---------------------------------------------------------------------------------------
 * Topology and workload constants.
 * ------------------------------------------------------------------------------------- */

#define HOSTS 3
#define MEMBERS 3
#define OMS_GROUPS 2
#define ME_GROUPS 2
#define GROUPS (OMS_GROUPS + ME_GROUPS)
#define GATEWAYS 3
#define STALE_GW 2          /* this gateway learns routing changes late */
#define USERS 600
#define WHALES 4            /* users 1..WHALES are whales, pinned */
#define SYMBOLS 4           /* 1,2 on ME shard 8; 3,4 on ME shard 9 */
#define QUOTE 100           /* quote asset; symbol s has base asset s */
#define ASSETS_TRACKED 5    /* assets 1..4 and QUOTE */

static const uint16_t oms_ids[OMS_GROUPS] = {1, 2};
static const uint16_t me_ids[ME_GROUPS] = {8, 9};

#define MS UINT64_C(1000000)
#define US UINT64_C(1000)

/* ---------------------------------------------------------------------------------------
 * Run state.
 * ------------------------------------------------------------------------------------- */

static struct prng rng;
static uint64_t seed;
static uint64_t now;             /* simulated time, ns */
static bool trace_on;
static uint64_t events_run;

/* Trace ring: the tail is printed on failure. */
#define TRACE_LINES 256
static char trace_ring[TRACE_LINES][200];
static uint32_t trace_pos;

static void __attribute__((format(printf, 1, 2)))
trace(const char *fmt, ...)
{
	char *line = trace_ring[trace_pos++ % TRACE_LINES];
	int n = snprintf(line, 200, "%10.3fms ", (double)now / 1e6);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, (size_t)(200 - n), fmt, ap);
	va_end(ap);
	if (trace_on)
		printf("%s\n", line);
}

static void __attribute__((noreturn, format(printf, 1, 2)))
violation(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	printf("sim-system: seed %" PRIu64 ": INVARIANT VIOLATED after %" PRIu64
	       " events at %.3f ms: %s\n",
	       seed, events_run, (double)now / 1e6, msg);
	printf("trace tail:\n");
	uint32_t n = trace_pos < TRACE_LINES ? trace_pos : TRACE_LINES;
	for (uint32_t i = trace_pos - n; i < trace_pos; i++)
		printf("  %s\n", trace_ring[i % TRACE_LINES]);
	printf("replay: sim-system --seed %" PRIu64 " --trace\n", seed);
	fflush(stdout);
	exit(1);
}

/* ---------------------------------------------------------------------------------------
 * Event queue: a binary heap ordered by (time, insertion sequence).
 * ------------------------------------------------------------------------------------- */

enum ev_kind {
	EV_TICK = 1,        /* a = host */
	EV_RAFT,            /* a = group, b = to member index, msg */
	EV_DURABLE,         /* a = group, b = member, x = index, y = term, z = incarnation */
	EV_INGRESS,         /* a = group, b = host, c = origin kind, msg: propose if leader */
	EV_NOT_LEADER,      /* a = origin kind, b = origin id, c = group, x = hint host */
	EV_GW_REPLY,        /* a = gateway, msg: client egress through its gateway */
	EV_DB_DONE,         /* a = oms group, x = db incarnation, msg: completion */
	EV_ADMIN_REPLY,     /* msg */
	EV_WORKLOAD,        /* one client action */
	EV_FAULT,           /* pick and apply a fault */
	EV_RESTART,         /* a = host */
	EV_HEAL,            /* a = fault id to undo */
	EV_GW_CONFIG,       /* a = gateway: take the newest routing config */
	EV_ADMIN,           /* a = to_oms, b = to_me, c = resends left, msg */
};

enum origin { ORIGIN_GATEWAY = 1, ORIGIN_BRIDGE = 2, ORIGIN_PERSISTER = 3, ORIGIN_ADMIN = 4 };

struct ev {
	uint64_t t;
	uint64_t seq;
	uint32_t kind;
	uint32_t a, b, c;
	uint64_t x, y, z;
	uint32_t len;
	_Alignas(8) uint8_t *msg;
};

static struct ev **heap;
static uint32_t heap_len, heap_cap;
static uint64_t ev_seq;

static bool
ev_less(const struct ev *l, const struct ev *r)
{
	return l->t < r->t || (l->t == r->t && l->seq < r->seq);
}

static struct ev *
ev_new(uint64_t delay, uint32_t kind)
{
	struct ev *e = calloc(1, sizeof(*e));
	CHECK(e != NULL);
	e->t = now + delay;
	e->seq = ev_seq++;
	e->kind = kind;
	return e;
}

static void
ev_attach(struct ev *e, const void *msg, uint32_t len)
{
	e->msg = aligned_alloc(8, (len + 7u) & ~7u);
	CHECK(e->msg != NULL);
	memcpy(e->msg, msg, len);
	e->len = len;
}

static void
ev_push(struct ev *e)
{
	if (heap_len == heap_cap) {
		heap_cap = heap_cap ? heap_cap * 2 : 4096;
		heap = realloc(heap, heap_cap * sizeof(*heap));
		CHECK(heap != NULL);
	}
	uint32_t i = heap_len++;
	while (i > 0 && ev_less(e, heap[(i - 1) / 2])) {
		heap[i] = heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	heap[i] = e;
}

static struct ev *
ev_pop(void)
{
	if (heap_len == 0)
		return NULL;
	struct ev *top = heap[0];
	struct ev *last = heap[--heap_len];
	uint32_t i = 0;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		const struct ev *best = last;
		if (l < heap_len && ev_less(heap[l], best)) {
			m = l;
			best = heap[l];
		}
		if (r < heap_len && ev_less(heap[r], best))
			m = r;
		if (m == i)
			break;
		heap[i] = heap[m];
		i = m;
	}
	if (heap_len > 0)
		heap[i] = last;
	return top;
}

static void
ev_free(struct ev *e)
{
	free(e->msg);
	free(e);
}

/* ---------------------------------------------------------------------------------------
 * Faults: the network between hosts, disks, the database.
 * ------------------------------------------------------------------------------------- */

struct faults {
	uint32_t loss_pct;       /* message loss between hosts */
	uint32_t dup_pct;        /* duplication */
	uint64_t delay_min_ns;
	uint64_t delay_max_ns;   /* reordering comes from the spread */
	bool cut[HOSTS][HOSTS];  /* cut[a][b]: a cannot send to b */
	uint64_t disk_min_ns;    /* fsync latency range */
	uint64_t disk_max_ns;
	uint32_t db_fail_pct;    /* database requests failing */
	uint64_t db_min_ns;
	uint64_t db_max_ns;
	bool chaos;              /* faults being injected */
};

static struct faults f;

/* Planted bugs (--plant NAME): each reopens a hole the system closed, to prove the simulator
 * sees it (tests/sim/system/meson.build runs each over seeds; it passes only if one fails). */
enum plant {
	PLANT_NONE = 0,
	PLANT_DEDUP0,
	PLANT_ACK_AHEAD,
	PLANT_REBUILD_EARLY,
	PLANT_SNAPSHOT_SHORT,
};
static enum plant plant;

static void
faults_calm(void)
{
	f.loss_pct = 0;
	f.dup_pct = 0;
	f.delay_min_ns = 20 * US;
	f.delay_max_ns = 200 * US;
	memset(f.cut, 0, sizeof(f.cut));
	f.disk_min_ns = 200 * US;
	f.disk_max_ns = 300 * US;
	f.db_fail_pct = 0;
	f.db_min_ns = 300 * US;
	f.db_max_ns = 2 * MS;
}

/* Schedule e as a message from host `from` to host `to`; maybe lose or duplicate it. */
static void
net_send(uint32_t from, uint32_t to, struct ev *e)
{
	if (from != to) {
		if (f.cut[from][to] || prng_chance(&rng, f.loss_pct, 100)) {
			ev_free(e);
			return;
		}
		e->t = now + (uint64_t)prng_range(&rng, (int64_t)f.delay_min_ns,
						    (int64_t)f.delay_max_ns);
	} else {
		e->t = now + 5 * US;
	}
	if (from != to && prng_chance(&rng, f.dup_pct, 100)) {
		struct ev *d = ev_new(0, e->kind);
		uint64_t s = d->seq;
		*d = *e;
		d->seq = s;
		d->msg = NULL;
		if (e->msg != NULL)
			ev_attach(d, e->msg, e->len);
		d->t = now + (uint64_t)prng_range(&rng, (int64_t)f.delay_min_ns,
						    (int64_t)f.delay_max_ns * 2);
		ev_push(d);
	}
	ev_push(e);
}

/* ---------------------------------------------------------------------------------------
 * Hosts, groups, members.
 * ------------------------------------------------------------------------------------- */

struct host {
	bool up;
	uint32_t incarnation;   /* bumped at every crash: stale disk completions are ignored */
	int64_t skew_ns;        /* clock offset */
	int32_t drift_ppm;      /* clock rate error */
};

static struct host hosts[HOSTS];

static uint64_t
host_clock(uint32_t h)
{
	int64_t drift = (int64_t)(now / 1000000) * hosts[h].drift_ppm;
	return (uint64_t)((int64_t)now + hosts[h].skew_ns + drift) + 1000 * MS;
}

struct egress {
	uint32_t dest;
	_Alignas(8) uint8_t msg[1024];
};

#define EGRESS_MAX 4096

struct member {
	uint32_t group;
	uint32_t idx;             /* member index = host index */
	struct cns *cns;
	void *cns_mem;
	struct cns_memlog *log;
	void *log_mem;
	void *svc;                /* struct oms * or struct me * */
	void *svc_mem;
	struct svc_sink sink;
	struct egress *egress;    /* captured by the sink during apply */
	uint32_t egress_count;
	uint64_t written;         /* highest index handed to the disk */
	uint64_t written_term;    /* its term: a rewrite of that index means it is unwritten */
	/* The last snapshot handed to host.snapshot_saved: survives a crash. */
	struct cns_snapshot_meta snap_meta;
	uint8_t *snap_data;
	size_t snap_cap;
	bool has_snap;
};

struct group {
	bool is_oms;
	uint16_t shard;
	struct member m[MEMBERS];
	size_t svc_size;
	size_t cns_size;
	size_t log_size;
	/* Role instances live on the leader's host. */
	uint32_t bridge_host;     /* OMS: where bridge + persister run; HOSTS = none */
	uint64_t bridge_term;
	uint64_t last_redrive;
	uint32_t me_leader_guess[ME_GROUPS]; /* bridge's idea of each ME leader */
};

static struct group groups[GROUPS];

static struct oms_limits oms_lim;
static struct me_limits me_lim;
static struct cns_limits cns_lim;
static struct cns_memlog_limits log_lim;

static const struct svc_ops *svc_of(const struct group *g);

static struct group *
group_of_shard(uint16_t shard)
{
	for (uint32_t i = 0; i < GROUPS; i++)
		if (groups[i].shard == shard)
			return &groups[i];
	return NULL;
}

static struct member *
leader_of(struct group *g)
{
	struct member *best = NULL;
	for (uint32_t i = 0; i < MEMBERS; i++) {
		struct member *m = &g->m[i];
		if (!hosts[i].up || cns_role(m->cns) != CNS_LEADER)
			continue;
		if (best == NULL || cns_term(m->cns) > cns_term(best->cns))
			best = m;
	}
	return best;
}

/* ---------------------------------------------------------------------------------------
 * Observation: wrappers around the services record effects keyed by log index, so each
 * committed effect is counted once however many members apply it.
 * ------------------------------------------------------------------------------------- */

/* A small open-addressing set/map of 128-bit keys. */
struct kv {
	uint64_t k1, k2;   /* k1 == 0 && k2 == 0: empty */
	uint64_t v;
};

struct map {
	struct kv *slots;
	uint64_t cap;      /* power of two */
	uint64_t len;
};

static uint64_t
mix(uint64_t a, uint64_t b)
{
	uint64_t x = a * UINT64_C(0x9e3779b97f4a7c15) ^ (b + UINT64_C(0x632be59bd9b4e019));
	x ^= x >> 31;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	return x ^ (x >> 29);
}

static struct kv *
map_slot(struct map *m, uint64_t k1, uint64_t k2, bool insert)
{
	if (insert && (m->len + 1) * 2 > m->cap) {
		struct map n = {.cap = m->cap ? m->cap * 2 : 1024};
		n.slots = calloc(n.cap, sizeof(struct kv));
		CHECK(n.slots != NULL);
		for (uint64_t i = 0; i < m->cap; i++) {
			struct kv *s = &m->slots[i];
			if (s->k1 == 0 && s->k2 == 0)
				continue;
			struct kv *d = map_slot(&n, s->k1, s->k2, true);
			*d = *s;
			n.len++;
		}
		free(m->slots);
		*m = n;
	}
	if (m->cap == 0)
		return NULL;
	for (uint64_t i = mix(k1, k2) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct kv *s = &m->slots[i];
		if (s->k1 == k1 && s->k2 == k2)
			return s;
		if (s->k1 == 0 && s->k2 == 0)
			return insert ? s : NULL;
	}
}

static uint64_t *
map_get(struct map *m, uint64_t k1, uint64_t k2)
{
	struct kv *s = map_slot(m, k1, k2, false);
	return s != NULL ? &s->v : NULL;
}

static uint64_t *
map_put(struct map *m, uint64_t k1, uint64_t k2)
{
	CHECK(k1 != 0 || k2 != 0);
	struct kv *s = map_slot(m, k1, k2, true);
	if (s->k1 == 0 && s->k2 == 0) {
		s->k1 = k1;
		s->k2 = k2;
		s->v = 0;
		m->len++;
	}
	return &s->v;
}

/* Facts the wrappers record. */
static uint64_t watch_user;      /* SIM_WATCH_USER: trace this user's messages */
static struct map me_accepted;   /* oid → 1 + (group << 56 | index) of its ACCEPTED event */
static struct map me_rejected;   /* oid → rejected by the ME */
static struct map me_done;       /* oid → its DONE event was emitted (out of every book) */
static struct map me_refused;    /* oid → refused by an unsequenced ME_RESULT (reason + 1) */
static struct map oms_acked;     /* oid → clientOrderId of an ACK emitted by an OMS shard */
static struct map order_cls;     /* (user, clientOrderId) of new orders (not cancels) */
static struct map oms_nak_seen;  /* (user, cl) → a NAK was emitted */

/* The entry the group's observer is at: effects of (index, ordinal) seen once. */
struct observe {
	uint64_t index;         /* last index recorded */
	uint32_t ordinal;       /* messages recorded at that index */
	uint32_t cur_ordinal;   /* messages seen at the index being applied by this member */
	uint64_t cur_index;
	struct member *cur_member; /* who is applying cur_index */
	bool recording;         /* the current apply is the first at its position */
};

static struct observe observe[GROUPS];
static struct member *applying;  /* the member whose service is being called */

/* --halt-burst scenario (halt_burst_run): an OMS shard cut off from the ME streams, and the
 * events the ME emits about the burst's orders. */
static int32_t hb_muted = -1;     /* OMS group whose ME events are dropped; -1 none */
static void hb_observe(uint32_t group, const struct wire_me_event *e);

static void
observe_begin(struct member *m, uint64_t index)
{
	struct observe *o = &observe[m->group];
	if (index != o->cur_index || o->cur_member != m) {
		o->cur_index = index;
		o->cur_member = m;
		o->cur_ordinal = 0;
	}
	o->cur_ordinal++;
	o->recording = index > o->index || (index == o->index && o->cur_ordinal > o->ordinal);
	if (o->recording) {
		o->index = index;
		o->ordinal = o->cur_ordinal;
	}
}

static void
sink_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct member *m = ctx;
	CHECK(msg->length <= sizeof(m->egress[0].msg));
	CHECK(m->egress_count < EGRESS_MAX);
	struct egress *e = &m->egress[m->egress_count++];
	e->dest = (uint32_t)dest;
	memcpy(e->msg, msg, msg->length);

	struct observe *o = &observe[m->group];
	if (!o->recording)
		return;
	if (watch_user != 0) {
		uint64_t u = 0;
		if (msg->type == WIRE_ACK || msg->type == WIRE_NAK || msg->type == WIRE_EXEC_REPORT)
			memcpy(&u, msg + 1, sizeof(u));
		else if (msg->type == WIRE_SUBMIT || msg->type == WIRE_ME_EVENT ||
			 msg->type == WIRE_ME_RESULT)
			memcpy(&u, (const uint8_t *)msg + (msg->type == WIRE_ME_EVENT ? 24 : 8), 8);
		else if (msg->type == WIRE_CANCEL_TO_ME || msg->type == WIRE_AMEND_TO_ME ||
			 msg->type == WIRE_REPLACE_TO_ME || msg->type == WIRE_HYDRATE_REQUEST ||
			 msg->type == WIRE_RELEASE_CLAIM)
			memcpy(&u, msg + 1, sizeof(u));
		else if (msg->type == WIRE_BEGIN_DEHYDRATE)
			u = ((const struct wire_begin_dehydrate *)msg)->state.user;
		if (u == watch_user)
			trace("watch: shard %u index %" PRIu64 " emits %s (%u bytes)",
			      groups[m->group].shard, o->index, wire_type_name(msg->type), msg->length);
	}
	if (msg->type == WIRE_ACK) {
		const struct wire_ack *a = (const void *)msg;
		*map_put(&oms_acked, a->oid.user, a->oid.shard_seq) = a->cl_ord_id;
	} else if (msg->type == WIRE_NAK) {
		const struct wire_nak *n = (const void *)msg;
		*map_put(&oms_nak_seen, n->user, n->cl_ord_id) = n->reason;
	} else if (msg->type == WIRE_ME_EVENT) {
		const struct wire_me_event *e = (const void *)msg;
		hb_observe(m->group, e);
		if (wire_ev_entered(e)) {
			/* The order's first event says it entered a book (WIRE_EV_F_ENTERED). A
			 * replay re-emits the same event (same stream seq); a second entry into a
			 * book would be a second such event with another seq. */
			uint64_t where = 1 + ((uint64_t)m->group << 56 | e->seq);
			uint64_t *v = map_put(&me_accepted, e->oid.user, e->oid.shard_seq);
			if (*v != 0 && *v != where)
				violation("orderId %" PRIu64 ":%" PRIx64 " entered a book twice "
					  "(group %u stream seq %" PRIu64 " and %" PRIu64 ")",
					  e->oid.user, e->oid.shard_seq, m->group,
					  (*v - 1) & ((UINT64_C(1) << 56) - 1), e->seq);
			*v = where;
		}
		if (e->event == WIRE_EV_REJECTED) {
			*map_put(&me_rejected, e->oid.user, e->oid.shard_seq) = 1;
		} else if (wire_ev_done(e)) {
			*map_put(&me_done, e->oid.user, e->oid.shard_seq) = 1;
		}
	} else if (msg->type == WIRE_ME_RESULT) {
		/* The ME's unsequenced refusal (no record or stream slot free): it reached the ME,
		 * which said no without a stream event. */
		const struct wire_me_result *r = (const void *)msg;
		if (r->known == 0 && r->reason != WIRE_REASON_NONE)
			*map_put(&me_refused, r->oid.user, r->oid.shard_seq) = 1 + r->reason;
	} else if (msg->type == WIRE_BEGIN_DEHYDRATE) {
		/* Seed: evict only when flat — no resting orders, no saga, no reservation. */
		const struct wire_begin_dehydrate *b = (const void *)msg;
		struct oms_user_info info;
		if (oms_user_get(m->svc, b->state.user, &info) == 0 &&
		    info.status == OMS_USER_FLUSHING && /* not a write-back: it keeps the actor */
		    (info.sagas != 0 || info.live != 0 || info.reservations != 0))
			violation("user %" PRIu64 " dehydrated on shard %u while not flat "
				  "(sagas %u live %u reservations %u)",
				  b->state.user, groups[m->group].shard, info.sagas, info.live,
				  info.reservations);
	}
}

/* Reconciliation's findings that must stay 0 in a correct run: the ME and the OMS, compared
 * at the same stream position, disagree (docs/oms.md, "Reconciliation"). Its legitimate
 * findings are recon_deferred (a snapshot ahead of the applied stream, or parts out of
 * order: asked again) and recon_transient (an order changed after the snapshot's position);
 * they are reported, not checked. */
static const enum oms_counter recon_alarms[] = {
	OMS_C_ALARM_RECON_PHANTOM,
	OMS_C_ALARM_RECON_UNKNOWN,
	OMS_C_ALARM_RECON_LEAK,
	OMS_C_ALARM_RECON_MISMATCH,
	OMS_C_ALARM_BAD_STATE,
};

/* After every OMS apply or tick, on every replica: the internal invariants hold, no fill
 * has settled beyond its order's reservation (docs/oms.md, "How the reservation bounds
 * settlement") and reconciliation raised no alarm. */
static void
oms_replica_check(void *svc, const char *at, uint64_t index)
{
	if (oms_check_invariants(svc) != 0)
		violation("oms shard %u member %u: internal invariants broken at %s %" PRIu64,
			  groups[applying->group].shard, applying->idx, at, index);
	uint64_t shortfall = oms_counter_get(svc, OMS_C_ALARM_SETTLE_SHORTFALL);
	if (shortfall != 0)
		violation("oms shard %u member %u: alarm_settle_shortfall %" PRIu64 " at %s %" PRIu64,
			  groups[applying->group].shard, applying->idx, shortfall, at, index);
	for (uint32_t i = 0; i < sizeof(recon_alarms) / sizeof(recon_alarms[0]); i++) {
		uint64_t n = oms_counter_get(svc, recon_alarms[i]);
		if (n != 0)
			violation("oms shard %u member %u: reconciliation: %s %" PRIu64 " at %s %" PRIu64,
				  groups[applying->group].shard, applying->idx,
				  oms_counter_name(recon_alarms[i]), n, at, index);
	}
}

/* OMS wrapper: no actor is dropped except by an applied FlushComplete (OK). */
static void
oms_apply_observed(void *svc, uint64_t index, uint64_t now_ns, const struct wire_msg_hdr *msg,
		   struct svc_sink *sink)
{
	observe_begin(applying, index);
	if (watch_user != 0 && observe[applying->group].recording) {
		uint64_t u = 0;
		if (msg->type == WIRE_HYDRATE_USER)
			u = ((const struct wire_hydrate_user *)msg)->state.user;
		else if (msg->type == WIRE_FLUSH_COMPLETE || msg->type == WIRE_RELEASE_DONE ||
			 msg->type == WIRE_TRANSFER || msg->type == WIRE_USER_ADMIN ||
			 msg->type == WIRE_NEW_ORDER || msg->type == WIRE_CANCEL)
			memcpy(&u, msg + 1, sizeof(u));
		else if (msg->type == WIRE_ME_EVENT)
			u = ((const struct wire_me_event *)msg)->oid.user;
		else if (msg->type == WIRE_ME_RESULT)
			u = ((const struct wire_me_result *)msg)->oid.user;
		if (u == watch_user && (msg->type == WIRE_ME_EVENT || msg->type == WIRE_ME_RESULT)) {
			/* The order's side of the story: what the ME said, and what the actor held
			 * before applying it. */
			struct oms_user_info wi;
			int st = oms_user_get(svc, u, &wi);
			if (msg->type == WIRE_ME_EVENT) {
				const struct wire_me_event *e = (const void *)msg;
				trace("watch: shard %u index %" PRIu64 " applies ME_EVENT %u of %" PRIx64
				      " stream %u seq %" PRIu64 " cause %u reason %u; actor %s state %u "
				      "live %u sagas %u",
				      groups[applying->group].shard, index, e->event, e->oid.shard_seq,
				      e->hdr.shard, e->seq, e->cause, e->reason,
				      st == 0 ? "present" : "absent", st == 0 ? wi.status : 0,
				      st == 0 ? wi.live : 0, st == 0 ? wi.sagas : 0);
			} else {
				const struct wire_me_result *r = (const void *)msg;
				trace("watch: shard %u index %" PRIu64 " applies ME_RESULT of %" PRIx64
				      " known %u reason %u; actor %s state %u live %u sagas %u",
				      groups[applying->group].shard, index, r->oid.shard_seq, r->known,
				      r->reason, st == 0 ? "present" : "absent", st == 0 ? wi.status : 0,
				      st == 0 ? wi.live : 0, st == 0 ? wi.sagas : 0);
			}
			u = 0;
		}
		if (u == watch_user) {
			struct oms_user_info wi;
			int st = oms_user_get(svc, u, &wi);
			uint64_t ep = msg->type == WIRE_HYDRATE_USER
					      ? ((const struct wire_hydrate_user *)msg)->epoch
				      : msg->type == WIRE_FLUSH_COMPLETE
					      ? ((const struct wire_flush_complete *)msg)->epoch
				      : msg->type == WIRE_RELEASE_DONE
					      ? ((const struct wire_release_claim *)msg)->epoch
					      : 0;
			uint32_t status = msg->type == WIRE_HYDRATE_USER
						  ? ((const struct wire_hydrate_user *)msg)->status
						  : 0;
			trace("watch: shard %u index %" PRIu64 " applies %s (epoch %" PRIu64
			      " status %u; actor %s state %u epoch %" PRIu64 ")",
			      groups[applying->group].shard, index, wire_type_name(msg->type), ep,
			      status, st == 0 ? "present" : "absent", st == 0 ? wi.status : 0,
			      st == 0 ? wi.epoch : 0);
		}
	}
	uint32_t before = oms_resident_count(svc);
	struct oms_user_info info_before = {0};
	uint64_t flush_user = 0;
	if (msg->type == WIRE_FLUSH_COMPLETE) {
		flush_user = ((const struct wire_flush_complete *)msg)->user;
		if (oms_user_get(svc, flush_user, &info_before) != 0)
			info_before.status = OMS_USER_ABSENT;
	}
	oms_svc_ops.apply(svc, index, now_ns, msg, sink);
	oms_replica_check(svc, "index", index);
	uint32_t after = oms_resident_count(svc);
	if (msg->type == WIRE_FLUSH_COMPLETE) {
		const struct wire_flush_complete *fc = (const void *)msg;
		struct oms_user_info info;
		bool gone = oms_user_get(svc, flush_user, &info) != 0;
		/* (A waiting user may be refused and dropped by the sweep this entry's time
		 * ran: it holds no money.) */
		if (gone && info_before.status != OMS_USER_ABSENT &&
		    info_before.status != OMS_USER_WAITING &&
		    (info_before.status != OMS_USER_FLUSHING || fc->status != WIRE_FLUSH_OK))
			violation("user %" PRIu64 " dropped by a FlushComplete that does not "
				  "confirm its flush (status %u, state %u)",
				  flush_user, fc->status, info_before.status);
	} else if (msg->type != WIRE_HYDRATE_USER && after < before) {
		violation("shard %u dropped an actor on a %s, not on FlushComplete",
			  groups[applying->group].shard, wire_type_name(msg->type));
	}
}

static void
oms_tick_observed(void *svc, uint64_t index, uint64_t now_ns, struct svc_sink *sink)
{
	observe_begin(applying, index);
	oms_svc_ops.tick(svc, index, now_ns, sink);
	oms_replica_check(svc, "tick", index);
}

static void
me_tick_observed(void *svc, uint64_t index, uint64_t now_ns, struct svc_sink *sink)
{
	observe_begin(applying, index);
	me_svc_ops.tick(svc, index, now_ns, sink);
}

static void
me_apply_observed(void *svc, uint64_t index, uint64_t now_ns, const struct wire_msg_hdr *msg,
		  struct svc_sink *sink)
{
	observe_begin(applying, index);
	if (watch_user != 0 && observe[applying->group].recording && msg->type == WIRE_SUBMIT) {
		const struct wire_submit *sm = (const void *)msg;
		if (sm->oid.user == watch_user)
			trace("watch: shard %u index %" PRIu64 " applies SUBMIT %" PRIu64 ":%" PRIx64,
			      groups[applying->group].shard, index, sm->oid.user, sm->oid.shard_seq);
	}
	me_svc_ops.apply(svc, index, now_ns, msg, sink);
}

static struct svc_ops oms_ops_observed;
static struct svc_ops me_ops_observed;

static const struct svc_ops *
svc_of(const struct group *g)
{
	return g->is_oms ? &oms_ops_observed : &me_ops_observed;
}

/* ---------------------------------------------------------------------------------------
 * The model database (ARCHITECTURE.md §6 semantics).
 * ------------------------------------------------------------------------------------- */

struct db_row {
	bool exists;
	uint64_t version;
	uint16_t owner;          /* 0: unclaimed */
	uint64_t owner_epoch;
	uint16_t last_shard;     /* who wrote the current version, with which epoch */
	uint64_t last_epoch;
	struct wire_user_state state;
};

static struct db_row db[USERS + 1];
static uint32_t db_incarnation;
/* The transfers table (docs/persist.md): (user, transfer_id) → 1 + index in db_xfers,
 * written by a flush with the row, first outcome kept. */
static struct map db_xfer_index;
static struct wire_recent *db_xfers;
static size_t db_xfer_count, db_xfer_cap;

static void
db_xfers_record(const struct wire_user_state *st)
{
	for (uint32_t i = 0; i < st->recent_count; i++) {
		const struct wire_recent *e = &st->recent[i];
		if (e->kind != WIRE_RECENT_TRANSFER)
			continue;
		uint64_t *v = map_put(&db_xfer_index, st->user, e->id);
		if (*v != 0)
			continue; /* ON CONFLICT DO NOTHING */
		if (db_xfer_count == db_xfer_cap) {
			db_xfer_cap = db_xfer_cap ? 2 * db_xfer_cap : 1024;
			db_xfers = realloc(db_xfers, db_xfer_cap * sizeof(*db_xfers));
			CHECK(db_xfers != NULL);
		}
		db_xfers[db_xfer_count++] = *e;
		*v = db_xfer_count;
	}
}

static void
db_lookup(uint16_t shard, const struct wire_transfer_lookup *req, struct wire_transfer_found *out)
{
	memset(out, 0, sizeof(*out));
	wire_hdr_init(&out->hdr, WIRE_TRANSFER_FOUND, shard);
	out->user = req->user;
	out->transfer_id = req->transfer_id;
	out->epoch = req->epoch;
	if (prng_chance(&rng, f.db_fail_pct, 100)) {
		out->status = WIRE_XFER_ERROR;
		return;
	}
	uint64_t *v = map_get(&db_xfer_index, req->user, req->transfer_id);
	if (v == NULL || *v == 0) {
		out->status = WIRE_XFER_NOT_FOUND;
		return;
	}
	out->status = WIRE_XFER_FOUND;
	out->rec = db_xfers[*v - 1];
}
static uint64_t db_stats_conflicts, db_stats_owned, db_stats_ok;

static void
db_hydrate(uint16_t shard, const struct wire_hydrate_request *req, struct wire_hydrate_user *out)
{
	memset(out, 0, sizeof(*out));
	wire_hdr_init(&out->hdr, WIRE_HYDRATE_USER, shard);
	out->epoch = req->epoch;
	out->state.user = req->user;
	CHECK(req->user >= 1 && req->user <= USERS);
	struct db_row *r = &db[req->user];
	if (prng_chance(&rng, f.db_fail_pct, 100)) {
		out->status = WIRE_HYD_ERROR;
		return;
	}
	if (!r->exists) {
		memset(r, 0, sizeof(*r));
		r->exists = true;
		r->state.user = req->user;
		r->owner = shard;
		r->owner_epoch = req->epoch;
		out->status = WIRE_HYD_NEW;
		out->state = r->state;
		trace("db: user %" PRIu64 " created and claimed by shard %u epoch %" PRIu64, req->user,
		      shard, req->epoch);
		return;
	}
	if (r->owner != 0 && r->owner != shard) {
		trace("db: user %" PRIu64 " hydrate by shard %u refused: owned by %u", req->user, shard,
		      r->owner);
		db_stats_owned++;
		out->status = WIRE_HYD_OWNED;
		out->owner_shard = r->owner;
		return;
	}
	/* A re-claim by the holder never lowers the stamp: a stale request re-driven late must
	 * not make the claim look older than one a newer incarnation took (the release takes
	 * every claim at or below its epoch). */
	if (r->owner != shard || req->epoch > r->owner_epoch)
		r->owner_epoch = req->epoch;
	r->owner = shard;
	trace("db: user %" PRIu64 " hydrated by shard %u epoch %" PRIu64 " (version %" PRIu64 ")",
	      req->user, shard, req->epoch, r->version);
	out->status = WIRE_HYD_OK;
	out->state = r->state;
	out->state.version = r->version;
}

static void
db_flush(uint16_t shard, const struct wire_begin_dehydrate *req, struct wire_flush_complete *out)
{
	memset(out, 0, sizeof(*out));
	wire_hdr_init(&out->hdr, WIRE_FLUSH_COMPLETE, shard);
	out->user = req->state.user;
	out->epoch = req->epoch;
	CHECK(req->state.user >= 1 && req->state.user <= USERS);
	struct db_row *r = &db[req->state.user];
	if (prng_chance(&rng, f.db_fail_pct, 100)) {
		out->status = WIRE_FLUSH_ERROR;
		return;
	}
	/* Fenced by the claim and the epoch (docs/fencing.md): only the claim holder writes,
	 * and only a flush newer than the claim's stamp (epochs are unique and increasing per
	 * shard, so a stale flush of an older incarnation is refused). Under our claim a
	 * version ahead of what we expect can only be our own earlier flush (overtaken by
	 * cancel-on-activity), so it is overwritten with our newer state. The flush keeps the
	 * claim; the drop releases it. */
	if (r->exists && r->owner == shard && r->last_shard == shard &&
	    r->last_epoch == req->epoch) {
		/* The same flush again (re-driven after failover): its write is there. */
		out->status = WIRE_FLUSH_OK;
		out->version = r->version;
		return;
	}
	if (r->exists && r->owner == shard && req->epoch > r->owner_epoch &&
	    (r->version == req->state.version || r->last_shard == shard)) {
		r->state = req->state;
		db_xfers_record(&req->state);
		r->version++;
		r->state.version = r->version;
		r->owner_epoch = req->epoch;
		r->last_shard = shard;
		r->last_epoch = req->epoch;
		out->status = WIRE_FLUSH_OK;
		out->version = r->version;
		db_stats_ok++;
		trace("db: user %" PRIu64 " flushed by shard %u epoch %" PRIu64 " → version %" PRIu64
		      ", claim kept", req->state.user, shard, req->epoch, r->version);
		return;
	}
	db_stats_conflicts++;
	trace("db: user %" PRIu64 " flush by shard %u epoch %" PRIu64 " (expects version %" PRIu64
	      ") CONFLICT: row version %" PRIu64 " owner %u last writer %u", req->state.user, shard,
	      req->epoch, req->state.version, r->version, r->owner, r->last_shard);
	out->status = WIRE_FLUSH_CONFLICT;
	out->version = r->version;
}

/* The drop's release: idempotent, and a no-op once the claim has moved on (re-hydrated,
 * another epoch). A move's handoff gives the claim to the shard that adopted the orders,
 * unstamped (docs/fencing.md, "Moving a user with open orders"). */
static void
db_release(uint16_t shard, const struct wire_release_claim *req, struct wire_release_claim *out)
{
	*out = *req;
	out->handoff = 0;
	out->to_shard = 0;
	wire_hdr_init(&out->hdr, WIRE_RELEASE_DONE, shard);
	CHECK(req->user >= 1 && req->user <= USERS);
	struct db_row *r = &db[req->user];
	if (prng_chance(&rng, f.db_fail_pct, 100)) {
		out->status = WIRE_FLUSH_ERROR;
		return;
	}
	if (r->exists && r->owner == shard && r->owner_epoch <= req->epoch) {
		r->owner = req->handoff ? req->to_shard : 0;
		r->owner_epoch = 0;
		trace("db: user %" PRIu64 " claim of shard %u %s (epoch %" PRIu64 ")", req->user,
		      shard, req->handoff ? "handed over" : "released", req->epoch);
	}
	out->status = WIRE_FLUSH_OK;
}

/* ---------------------------------------------------------------------------------------
 * Persister and bridge (per OMS shard, on the leader's host).
 * ------------------------------------------------------------------------------------- */

static void propose_at(uint32_t from_host, struct group *g, uint32_t to_host,
		       const struct wire_msg_hdr *msg, enum origin origin, uint32_t origin_id);

static void
persister_submit(struct group *g, const struct wire_msg_hdr *msg)
{
	if (!hosts[g->bridge_host].up)
		return;
	struct ev *e = ev_new((uint64_t)prng_range(&rng, (int64_t)f.db_min_ns,
						   (int64_t)f.db_max_ns),
			      EV_DB_DONE);
	e->a = (uint32_t)(g - groups);
	e->b = g->bridge_host;
	e->x = db_incarnation;
	if (msg->type == WIRE_HYDRATE_REQUEST) {
		struct wire_hydrate_user out;
		db_hydrate(g->shard, (const void *)msg, &out);
		ev_attach(e, &out, sizeof(out));
	} else if (msg->type == WIRE_RELEASE_CLAIM) {
		struct wire_release_claim out;
		db_release(g->shard, (const void *)msg, &out);
		ev_attach(e, &out, sizeof(out));
	} else if (msg->type == WIRE_TRANSFER_LOOKUP) {
		struct wire_transfer_found out;
		db_lookup(g->shard, (const void *)msg, &out);
		ev_attach(e, &out, sizeof(out));
	} else {
		CHECK(msg->type == WIRE_BEGIN_DEHYDRATE);
		struct wire_flush_complete out;
		db_flush(g->shard, (const void *)msg, &out);
		ev_attach(e, &out, sizeof(out));
	}
	/* The database applied the request now; its answer arrives later, or never when
	 * the database restarts or the persister's host dies in between. */
	ev_push(e);
}

struct rebuild_ctx {
	struct group *g;
	uint32_t count;
};

static void
bridge_send(struct group *g, const struct wire_msg_hdr *msg)
{
	struct wire_stream_ack ack;
	if (plant == PLANT_ACK_AHEAD && msg->type == WIRE_STREAM_ACK) {
		/* Acknowledge everything the ME has emitted (it clamps), applied here or not. */
		memcpy(&ack, msg, sizeof(ack));
		ack.seq = UINT64_MAX;
		msg = &ack.hdr;
	}
	struct group *me = group_of_shard(msg->shard);
	if (me == NULL || me->is_oms)
		return;
	uint32_t mi = (uint32_t)(me - groups) - OMS_GROUPS;
	propose_at(g->bridge_host, me, g->me_leader_guess[mi], msg, ORIGIN_BRIDGE,
		   (uint32_t)(g - groups));
}

static void
rebuild_cb(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct rebuild_ctx *r = ctx;
	r->count++;
	if (dest == WIRE_DEST_ME)
		bridge_send(r->g, msg);
	else if (dest == WIRE_DEST_PERSIST)
		persister_submit(r->g, msg);
}

/* Re-drive everything in flight from the leader's state: the bridge's and the persister's
 * queues are caches of it (seed: "PENDING_RESERVE is the bridge's durable work queue"). */
static void
roles_redrive(struct group *g, struct member *leader)
{
	struct rebuild_ctx r = {.g = g};
	oms_pending_foreach(leader->svc, rebuild_cb, &r);
	oms_persist_foreach(leader->svc, rebuild_cb, &r);
	/* Ask each ME shard to replay from where we are: a lost last event leaves no gap to
	 * notice, so the bridge asks whenever it re-drives. */
	for (uint32_t i = 0; i < ME_GROUPS; i++) {
		struct wire_replay_request rr = {0};
		wire_hdr_init(&rr.hdr, WIRE_REPLAY_REQUEST, me_ids[i]);
		rr.stream = g->shard;
		rr.from_seq = oms_stream_next_seq(leader->svc, me_ids[i]);
		bridge_send(g, &rr.hdr);
	}
	g->last_redrive = now;
}

#define REDRIVE_NS (50 * MS)

static void
roles_tick(struct group *g)
{
	struct member *leader = leader_of(g);
	if (leader == NULL)
		return;
	/* Rebuild from state only once the state is current: the leader has committed an
	 * entry of its own term (so it knows the whole committed log) and applied it all. */
	if ((cns_term_at(leader->cns, cns_commit_index(leader->cns)) != cns_term(leader->cns) ||
	     cns_applied_index(leader->cns) != cns_commit_index(leader->cns)) &&
	    plant != PLANT_REBUILD_EARLY)
		return;
	uint32_t h = leader->idx;
	if (g->bridge_host != h || g->bridge_term != cns_term(leader->cns)) {
		/* Leadership moved (or a new term): rebuild both queues from state. */
		trace("bridge+persister of oms %u rebuilt on host %u term %" PRIu64, g->shard, h,
		      cns_term(leader->cns));
		g->bridge_host = h;
		g->bridge_term = cns_term(leader->cns);
		roles_redrive(g, leader);
		return;
	}
	if (now - g->last_redrive >= REDRIVE_NS && cns_applied_index(leader->cns) ==
							   cns_commit_index(leader->cns))
		roles_redrive(g, leader);
}

/* ---------------------------------------------------------------------------------------
 * Gateways and clients.
 * ------------------------------------------------------------------------------------- */

static struct wire_routing_config route_truth;   /* the newest config (admin's view) */

struct gateway {
	struct wire_routing_config cfg;
	uint32_t leader_guess[OMS_GROUPS];
	uint64_t reroutes;
};

static struct gateway gws[GATEWAYS];

static uint16_t
route_owner(const struct wire_routing_config *cfg, uint64_t user)
{
	for (uint32_t i = 0; i < cfg->pin_count; i++)
		if (cfg->pins[i].user == user)
			return cfg->pins[i].shard;
	uint16_t active[WIRE_ROUTE_SHARDS_MAX];
	uint32_t n = 0;
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if (cfg->shards[i].state == WIRE_SHARD_ACTIVE)
			active[n++] = cfg->shards[i].shard;
	CHECK(n > 0);
	return hrw_pick(user, active, n);
}

enum req_kind { REQ_NONE = 0, REQ_ORDER, REQ_CANCEL, REQ_AMEND, REQ_DEPOSIT };

struct client {
	uint64_t next_cl;             /* next clientOrderId */
	uint16_t owner_hint;          /* from a NOT_OWNER NAK; 0 none */
	/* One outstanding request at a time: retransmitted until answered. */
	uint32_t kind;
	uint64_t cl;                  /* its id (transfer_id for deposits) */
	uint64_t sent_at;
	uint32_t tries;
	_Alignas(8) uint8_t req[128];
	/* Acknowledged orders that may still be live (cancel / amend targets). */
	uint64_t live_cl[8];
	uint32_t live_count;
	int64_t deposited[ASSETS_TRACKED]; /* confirmed deposits */
	int64_t pending_amount;
	uint32_t pending_asset;
};

static struct client clients[USERS + 1];
static struct map transfer_owner;  /* transfer_id → user */
/* Transfer ids far from any admin request id, so replies cannot be confused. */
static uint64_t next_transfer = UINT64_C(1) << 40;

static uint32_t
asset_index(uint32_t asset)
{
	return asset == QUOTE ? 0 : asset;
}

static uint32_t
gw_of(uint64_t user)
{
	return (uint32_t)(user % GATEWAYS);
}

static void
gateway_send(uint32_t gi, uint64_t user, const struct wire_msg_hdr *msg)
{
	struct gateway *gw = &gws[gi];
	struct client *c = &clients[user];
	uint16_t shard = c->owner_hint != 0 ? c->owner_hint : route_owner(&gw->cfg, user);
	c->owner_hint = 0;
	struct group *g = group_of_shard(shard);
	CHECK(g != NULL && g->is_oms);
	uint32_t gidx = (uint32_t)(g - groups);
	/* Gateways sit on the hosts too: gateway i on host i. */
	propose_at(gi % HOSTS, g, gw->leader_guess[gidx], msg, ORIGIN_GATEWAY, gi);
}

static void
client_transmit(uint64_t user)
{
	struct client *c = &clients[user];
	c->sent_at = now;
	c->tries++;
	gateway_send(gw_of(user), user, (const struct wire_msg_hdr *)c->req);
}

/* ---------------------------------------------------------------------------------------
 * Proposals and egress.
 * ------------------------------------------------------------------------------------- */

static void
propose_at(uint32_t from_host, struct group *g, uint32_t to_host, const struct wire_msg_hdr *msg,
	   enum origin origin, uint32_t origin_id)
{
	if (watch_user != 0 && msg->type == WIRE_SUBMIT &&
	    ((const struct wire_submit *)msg)->oid.user == watch_user)
		trace("watch: SUBMIT %" PRIx64 " sent to shard %u host %u from host %u (origin %u/%u)",
		      ((const struct wire_submit *)msg)->oid.shard_seq, g->shard, to_host, from_host,
		      (unsigned)origin, origin_id);
	struct ev *e = ev_new(0, EV_INGRESS);
	e->a = (uint32_t)(g - groups);
	e->b = to_host;
	e->c = (uint32_t)origin << 16 | origin_id;
	ev_attach(e, msg, msg->length);
	net_send(from_host, to_host, e);
}

static void
route_egress(struct group *g, struct member *m)
{
	bool leader = hosts[m->idx].up && cns_role(m->cns) == CNS_LEADER;
	uint32_t count = m->egress_count;
	m->egress_count = 0;
	if (!leader)
		return; /* followers' egress never leaves the host (ARCHITECTURE.md §3) */
	for (uint32_t i = 0; i < count; i++) {
		const struct wire_msg_hdr *msg = (const void *)m->egress[i].msg;
		uint32_t dest = m->egress[i].dest;
		if (g->is_oms) {
			/* Roles not yet rebuilt here, or rebuilt in an earlier term (a restarted
			 * member re-applying its log as the new leader, state not current yet):
			 * held, like the app's egress_not_ready; the rebuild re-drives. */
			if (g->bridge_host != m->idx || g->bridge_term != cns_term(m->cns))
				continue;
			switch (dest) {
			case WIRE_DEST_ME:
				bridge_send(g, msg);
				break;
			case WIRE_DEST_PERSIST:
				persister_submit(g, msg);
				break;
			case WIRE_DEST_CLIENT: {
				uint64_t user;
				memcpy(&user, msg + 1, sizeof(user));
				if (user < 1 || user > USERS)
					break;
				struct ev *e = ev_new(0, EV_GW_REPLY);
				e->a = gw_of(user);
				ev_attach(e, msg, msg->length);
				net_send(m->idx, e->a % HOSTS, e);
				break;
			}
			case WIRE_DEST_ADMIN: {
				struct ev *e = ev_new(0, EV_ADMIN_REPLY);
				ev_attach(e, msg, msg->length);
				net_send(m->idx, m->idx, e);
				break;
			}
			default:
				break;
			}
		} else if (dest == WIRE_DEST_OMS) {
			/* ME egress to the bridge of the OMS shard named by hdr.shard. */
			struct group *og = group_of_shard(msg->shard);
			if (og == NULL || !og->is_oms || og->bridge_host >= HOSTS)
				continue;
			if (plant == PLANT_SNAPSHOT_SHORT && msg->type == WIRE_OPEN_ORDERS_SNAPSHOT) {
				struct wire_open_orders_snapshot *snap = (void *)m->egress[i].msg;
				if (snap->count > 0)
					snap->count--;
			}
			if (hb_muted >= 0 && og == &groups[hb_muted])
				continue; /* --halt-burst: this OMS shard is cut off */
			propose_at(m->idx, og, og->bridge_host, msg, ORIGIN_BRIDGE,
				   (uint32_t)(og - groups));
		}
	}
}

/* State machine safety (ARCHITECTURE.md §9.5): every member reaches the same state hash at
 * the same applied index. Compared at every HASH_EVERY-th index as members pass it. */
#define HASH_EVERY 128
static struct map hash_at;  /* (group, index) → state hash + 1 */
static uint64_t hashes_compared;

static void
hash_check(struct group *g, struct member *m)
{
	uint64_t idx = cns_applied_index(m->cns);
	if (idx == 0 || idx % HASH_EVERY != 0)
		return;
	const struct svc_ops *ops = g->is_oms ? &oms_svc_ops : &me_svc_ops;
	uint64_t h = ops->state_hash(m->svc) + 1;
	uint64_t *v = map_put(&hash_at, (uint64_t)m->group + 1, idx);
	if (*v == 0) {
		*v = h;
	} else {
		hashes_compared++;
		if (*v != h)
			violation("shard %u member %u: state hash differs from another member's at "
				  "applied index %" PRIu64, g->shard, m->idx, idx);
	}
}

static void
member_apply(struct group *g, struct member *m)
{
	for (int round = 0; round < 2048; round++) {
		applying = m;
		uint32_t n = cns_apply(m->cns, 1);
		applying = NULL;
		route_egress(g, m);
		if (n == 0)
			break;
		hash_check(g, m);
	}
}

/* ---------------------------------------------------------------------------------------
 * Consensus host side: send, snapshots, disks.
 * ------------------------------------------------------------------------------------- */

static void
host_send(void *ctx, uint32_t to, const struct wire_msg_hdr *msg)
{
	struct member *m = ctx;
	CHECK(to >= 1 && to <= MEMBERS);
	struct ev *e = ev_new(0, EV_RAFT);
	e->a = m->group;
	e->b = to - 1;
	ev_attach(e, msg, msg->length);
	net_send(m->idx, to - 1, e);
}

static void
host_snapshot_saved(void *ctx, const struct cns_snapshot_meta *meta, const void *data)
{
	struct member *m = ctx;
	if (meta->len > m->snap_cap) {
		free(m->snap_data);
		m->snap_cap = meta->len * 2;
		m->snap_data = malloc(m->snap_cap);
		CHECK(m->snap_data != NULL);
	}
	memcpy(m->snap_data, data, meta->len);
	m->snap_meta = *meta;
	m->has_snap = true;
}

/* Hand newly appended entries to the disk; each write completes after a latency, in order. */
static void
disk_schedule(struct member *m)
{
	uint64_t last = cns_last_index(m->cns);
	if (last < m->written)
		m->written = last; /* truncated behind us */
	if (m->written != 0 && cns_term_at(m->cns, m->written) != m->written_term)
		m->written = 0;   /* truncated and rewritten within one step: write it again */
	if (last == m->written)
		return;
	struct ev *e = ev_new((uint64_t)prng_range(&rng, (int64_t)f.disk_min_ns,
						   (int64_t)f.disk_max_ns),
			      EV_DURABLE);
	e->a = m->group;
	e->b = m->idx;
	e->x = last;
	e->y = cns_term_at(m->cns, last);
	e->z = hosts[m->idx].incarnation;
	m->written = last;
	m->written_term = e->y;
	ev_push(e);
}

static void
member_boot(struct group *g, struct member *m, bool fresh)
{
	struct cns_config cfg;
	uint32_t members[MEMBERS] = {1, 2, 3};
	cns_config_default(&cfg, g->shard, m->idx + 1, MEMBERS, members);
	cfg.durability = CNS_DURABLE_DISK;
	cfg.seed = seed * 131 + (uint64_t)m->group * 7 + m->idx + hosts[m->idx].incarnation * 1009;
	cfg.tick_entry_ns = 5 * MS;

	/* Services must define their whole state at init: boot over junk, never over zeroes,
	 * so a restart (which reuses the memory) can be compared with a fresh member. */
	memset(m->svc_mem, 0xa5 + 7 * (int)m->idx + (int)hosts[m->idx].incarnation, g->svc_size);
	if (g->is_oms) {
		oms_lim.shard_id = g->shard;
		CHECK(oms_init((struct oms **)&m->svc, m->svc_mem, &oms_lim) == 0);
	} else {
		me_lim.shard = g->shard;
		CHECK(me_init((struct me **)&m->svc, m->svc_mem, &me_lim) == 0);
	}
	if (fresh)
		CHECK(cns_memlog_init(&m->log, m->log_mem, &log_lim) == 0);
	m->sink.ctx = m;
	m->sink.emit = sink_emit;
	struct cns_env env = {
		.log_ops = &cns_memlog_ops,
		.log = m->log,
		.svc_ops = svc_of(g),
		.svc = m->svc,
		.sink = &m->sink,
		.host = {.ctx = m, .send = host_send, .snapshot_saved = host_snapshot_saved},
	};
	struct cns_boot boot = {0};
	if (!fresh) {
		boot.term = cns_memlog_term(m->log);
		boot.vote = cns_memlog_vote(m->log);
		if (m->has_snap) {
			boot.snapshot = &m->snap_meta;
			boot.snapshot_data = m->snap_data;
		}
	}
	applying = m;
	int rc = cns_init(&m->cns, m->cns_mem, &cns_lim, &cfg, &env, &boot);
	applying = NULL;
	CHECK(rc == 0);
	m->written = cns_last_index(m->cns);
	m->written_term = cns_term_at(m->cns, m->written);
	m->egress_count = 0;
}

/* A crash loses what the disk had not made durable (ARCHITECTURE.md §4). */
static void
host_crash(uint32_t h)
{
	trace("host %u crashes", h);
	hosts[h].up = false;
	hosts[h].incarnation++;
	for (uint32_t gi = 0; gi < GROUPS; gi++) {
		struct member *m = &groups[gi].m[h];
		uint64_t durable = cns_durable_index(m->cns);
		uint64_t first = cns_memlog_ops.first_index(m->log);
		uint64_t last = cns_memlog_ops.last_index(m->log);
		if (durable < last && durable + 1 >= first)
			cns_memlog_ops.truncate(m->log, durable + 1);
	}
	for (uint32_t gi = 0; gi < OMS_GROUPS; gi++)
		if (groups[gi].bridge_host == h)
			groups[gi].bridge_host = HOSTS; /* roles die with the host */
}

static void
host_restart(uint32_t h)
{
	trace("host %u restarts", h);
	hosts[h].up = true;
	for (uint32_t gi = 0; gi < GROUPS; gi++) {
		struct member *m = &groups[gi].m[h];
		/* The boot snapshot covers everything up to its index (it may be ahead of the
		 * durable log: a follower applies what a majority holds). */
		if (m->has_snap && cns_memlog_ops.first_index(m->log) <= m->snap_meta.index)
			cns_memlog_ops.compact(m->log, m->snap_meta.index);
		member_boot(&groups[gi], m, false);
	}
}

/* ---------------------------------------------------------------------------------------
 * Event handlers.
 * ------------------------------------------------------------------------------------- */

#define TICK_NS (1 * MS)
#define SNAPSHOT_EVERY 2000 /* applied entries between snapshots */

static void
on_tick(uint32_t h)
{
	struct ev *next = ev_new(TICK_NS + (uint64_t)prng_below(&rng, 100 * US), EV_TICK);
	next->a = h;
	ev_push(next);
	if (!hosts[h].up)
		return;
	uint64_t clock = host_clock(h);
	for (uint32_t gi = 0; gi < GROUPS; gi++) {
		struct group *g = &groups[gi];
		struct member *m = &g->m[h];
		applying = m;
		cns_tick(m->cns, clock);
		applying = NULL;
		disk_schedule(m);
		member_apply(g, m);
		if (cns_applied_index(m->cns) >= (m->has_snap ? m->snap_meta.index : 0) +
							   SNAPSHOT_EVERY &&
		    prng_chance(&rng, 1, 4)) {
			applying = m;
			int rc = cns_snapshot_take(m->cns);
			applying = NULL;
			if (rc != 0 && rc != -EALREADY)
				violation("snapshot of shard %u failed: %d (size %zu)", g->shard, rc, svc_of(g)->snapshot_size(m->svc));
		}
	}
	for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
		struct member *l = leader_of(&groups[gi]);
		if (l != NULL && l->idx == h)
			roles_tick(&groups[gi]);
	}
}

static uint64_t raft_type_count[WIRE_TYPE_LIMIT][GROUPS];

static void
on_raft(struct ev *e)
{
	uint32_t h = e->b;
	raft_type_count[((const struct wire_msg_hdr *)e->msg)->type % WIRE_TYPE_LIMIT][e->a]++;
	if (!hosts[h].up)
		return;
	struct group *g = &groups[e->a];
	struct member *m = &g->m[h];
	applying = m;
	int rc = cns_step(m->cns, host_clock(h), (const struct wire_msg_hdr *)e->msg);
	applying = NULL;
	CHECK(rc == 0 || rc == -EINVAL);
	disk_schedule(m);
	member_apply(g, m);
}

static void
on_durable(struct ev *e)
{
	uint32_t h = e->b;
	if (!hosts[h].up || e->z != hosts[h].incarnation)
		return; /* the write never finished: the host crashed under it */
	struct member *m = &groups[e->a].m[h];
	if (cns_term_at(m->cns, e->x) != e->y)
		return; /* truncated and rewritten since */
	applying = m;
	cns_durable(m->cns, e->x, e->y);
	applying = NULL;
	member_apply(&groups[e->a], m);
}

static void
on_ingress(struct ev *e)
{
	uint32_t h = e->b;
	struct group *g = &groups[e->a];
	if (!hosts[h].up)
		return;
	struct member *m = &g->m[h];
	applying = m;
	int rc = cns_propose(m->cns, host_clock(h), (const struct wire_msg_hdr *)e->msg);
	applying = NULL;
	if (rc == -EAGAIN && (e->c >> 16) != ORIGIN_GATEWAY && e->z < 50) {
		/* Backpressure: the bridge and persister keep the message and try again (a
		 * gateway NAKs instead, and the client retransmits). */
		struct ev *r = ev_new(1 * MS, EV_INGRESS);
		r->a = e->a;
		r->b = e->b;
		r->c = e->c;
		r->z = e->z + 1;
		ev_attach(r, e->msg, e->len);
		ev_push(r);
		return;
	}
	if (rc == -EPERM || rc == -EBUSY) {
		/* NAK NOT_LEADER with the leader hint (the sender retries there). */
		uint32_t hint = cns_leader(m->cns);
		struct ev *r = ev_new(0, EV_NOT_LEADER);
		r->a = e->c >> 16;
		r->b = e->c & 0xffff;
		r->c = e->a;
		r->x = hint != CNS_NODE_NONE ? hint - 1 : (h + 1) % HOSTS;
		net_send(h, h, r);
	}
	disk_schedule(m);
}

static void
on_not_leader(struct ev *e)
{
	uint32_t hint = (uint32_t)e->x;
	if (e->a == ORIGIN_GATEWAY) {
		gws[e->b].leader_guess[e->c] = hint;
	} else if (e->a == ORIGIN_BRIDGE) {
		struct group *target = &groups[e->c];
		if (!target->is_oms)
			groups[e->b].me_leader_guess[e->c - OMS_GROUPS] = hint;
	} else if (e->a == ORIGIN_ADMIN || e->a == ORIGIN_PERSISTER) {
		/* Admin and persister re-drive on their own. */
	}
}

static void client_answered(uint64_t user);

static void
on_gw_reply(struct ev *e)
{
	const struct wire_msg_hdr *msg = (const void *)e->msg;
	uint64_t user;
	uint64_t cl;
	memcpy(&user, msg + 1, sizeof(user));
	memcpy(&cl, (const uint8_t *)(msg + 1) + 8, sizeof(cl));
	if (user < 1 || user > USERS)
		return;
	struct client *c = &clients[user];
	if (msg->type == WIRE_NAK) {
		const struct wire_nak *n = (const void *)msg;
		if (n->reason == WIRE_REASON_NOT_OWNER && n->owner_shard != 0) {
			/* The gateway follows the shard's answer (the cluster is the routing
			 * authority); the client retries with a fresh id. */
			gws[e->a].reroutes++;
			c->owner_hint = n->owner_shard;
		}
		if (c->kind != REQ_NONE && c->kind != REQ_DEPOSIT && c->cl == n->cl_ord_id)
			client_answered(user);
		return;
	}
	if (msg->type == WIRE_ACK) {
		const struct wire_ack *a = (const void *)msg;
		if (c->kind == REQ_ORDER && c->cl == a->cl_ord_id) {
			if (c->live_count < 8)
				c->live_cl[c->live_count++] = a->cl_ord_id;
			client_answered(user);
		}
		return;
	}
	if (msg->type == WIRE_EXEC_REPORT) {
		const struct wire_exec_report *r = (const void *)msg;
		if ((c->kind == REQ_CANCEL || c->kind == REQ_AMEND) && c->cl == r->cl_ord_id)
			client_answered(user);
		if (wire_report_final(r)) {
			for (uint32_t i = 0; i < c->live_count; i++) {
				if (c->live_cl[i] == r->cl_ord_id) {
					c->live_cl[i] = c->live_cl[--c->live_count];
					break;
				}
			}
		}
	}
}

static void
on_admin_reply(struct ev *e)
{
	const struct wire_admin_reply *r = (const void *)e->msg;
	uint64_t *owner = map_get(&transfer_owner, r->req_id, 1);
	if (owner == NULL)
		return;
	struct client *c = &clients[*owner];
	if (c->kind != REQ_DEPOSIT || c->cl != r->req_id)
		return;
	if (r->reason == WIRE_REASON_NONE) {
		c->deposited[asset_index(c->pending_asset)] += c->pending_amount;
		trace("user %" PRIu64 " deposit %" PRIu64 " of %" PRId64 " asset %u confirmed",
		      *owner, r->req_id, c->pending_amount, c->pending_asset);
		client_answered(*owner);
	} else if (r->reason == WIRE_REASON_NOT_OWNER) {
		c->owner_hint = (uint16_t)r->value;
		/* Same transfer id: idempotent wherever it lands. */
	} else if (r->reason != WIRE_REASON_PARKED_FULL && r->reason != WIRE_REASON_CAPACITY &&
		   r->reason != WIRE_REASON_DB_ERROR && r->reason != WIRE_REASON_BACKPRESSURE) {
		/* (BACKPRESSURE: a cold user found the admission queue full, docs/oms.md
		 * "Admission" — transient like CAPACITY: a copy of the same transfer id still on
		 * its way may land later, so the client keeps asking under that id.) */
		client_answered(*owner); /* refused for good: not deposited */
	}
}

static void
on_db_done(struct ev *e)
{
	struct group *g = &groups[e->a];
	if (e->x != db_incarnation || g->bridge_host != e->b || !hosts[e->b].up)
		return; /* the answer was lost; the persister re-drives from state */
	propose_at(e->b, g, e->b, (const struct wire_msg_hdr *)e->msg, ORIGIN_PERSISTER, e->a);
}

/* ---------------------------------------------------------------------------------------
 * Workload.
 * ------------------------------------------------------------------------------------- */

static bool workload_on;
static uint64_t orders_sent, cancels_sent, deposits_sent;

static uint64_t
pick_user(void)
{
	/* Skewed: whales and a hot set trade most. */
	uint64_t r = prng_below(&rng, 100);
	if (r < 20)
		return 1 + prng_below(&rng, WHALES);
	if (r < 60)
		return 1 + prng_below(&rng, USERS / 10);
	return 1 + prng_below(&rng, USERS);
}

static void
client_answered(uint64_t user)
{
	clients[user].kind = REQ_NONE;
	clients[user].tries = 0;
}

static void
make_deposit(uint64_t user, struct client *c)
{
	struct wire_transfer t = {0};
	wire_hdr_init(&t.hdr, WIRE_TRANSFER, 0);
	t.user = user;
	t.transfer_id = next_transfer++;
	t.asset = prng_chance(&rng, 1, 2) ? QUOTE : (uint32_t)(1 + prng_below(&rng, SYMBOLS));
	t.amount = t.asset == QUOTE ? 100000 : 1000;
	*map_put(&transfer_owner, t.transfer_id, 1) = user;
	c->kind = REQ_DEPOSIT;
	c->cl = t.transfer_id;
	c->pending_amount = t.amount;
	c->pending_asset = t.asset;
	memcpy(c->req, &t, sizeof(t));
	deposits_sent++;
}

static void
make_order(uint64_t user, struct client *c)
{
	struct wire_new_order o = {0};
	wire_hdr_init(&o.hdr, WIRE_NEW_ORDER, 0);
	o.user = user;
	o.cl_ord_id = ++c->next_cl;
	o.symbol = (uint32_t)(1 + prng_below(&rng, SYMBOLS));
	o.side = prng_chance(&rng, 1, 2) ? WIRE_SIDE_BUY : WIRE_SIDE_SELL;
	uint64_t kind = prng_below(&rng, 100);
	o.ord_type = WIRE_ORD_LIMIT;
	o.tif = WIRE_TIF_GTC;
	o.px = 100 + prng_range(&rng, -5, 5);
	o.qty = prng_range(&rng, 1, 10);
	o.stp = (uint8_t)prng_below(&rng, 4);
	if (kind < 10) {
		o.ord_type = WIRE_ORD_MARKET;
		o.tif = WIRE_TIF_IOC;
		o.px = 0;
		if (o.side == WIRE_SIDE_BUY) {
			o.qty = 0;
			o.quote_qty = prng_range(&rng, 100, 1500);
		}
	} else if (kind < 20) {
		o.tif = WIRE_TIF_IOC;
	} else if (kind < 25) {
		o.tif = WIRE_TIF_FOK;
	} else if (kind < 32) {
		o.tif = WIRE_TIF_POST_ONLY;
	} else if (kind < 37) {
		o.tif = WIRE_TIF_GTD;
		o.expire_ns = host_clock(0) + (uint64_t)prng_range(&rng, 5, 200) * MS;
	}
	o.route_epoch = gws[gw_of(user)].cfg.epoch;
	*map_put(&order_cls, user, o.cl_ord_id) = 1;
	c->kind = REQ_ORDER;
	c->cl = o.cl_ord_id;
	memcpy(c->req, &o, sizeof(o));
	orders_sent++;
}

static void
make_cancel(uint64_t user, struct client *c, bool amend)
{
	uint64_t target = c->live_cl[prng_below(&rng, c->live_count)];
	if (amend) {
		struct wire_amend a = {0};
		wire_hdr_init(&a.hdr, WIRE_AMEND, 0);
		a.user = user;
		a.cl_ord_id = ++c->next_cl;
		a.orig_cl_ord_id = target;
		a.qty = 1;
		memcpy(c->req, &a, sizeof(a));
		c->kind = REQ_AMEND;
		c->cl = a.cl_ord_id;
	} else {
		struct wire_cancel k = {0};
		wire_hdr_init(&k.hdr, WIRE_CANCEL, 0);
		k.user = user;
		k.cl_ord_id = ++c->next_cl;
		k.orig_cl_ord_id = target;
		memcpy(c->req, &k, sizeof(k));
		c->kind = REQ_CANCEL;
		c->cl = k.cl_ord_id;
	}
	cancels_sent++;
}

#define CLIENT_RETX_NS (15 * MS)

static void
on_workload(void)
{
	struct ev *next = ev_new(50 * US + prng_below(&rng, 150 * US), EV_WORKLOAD);
	ev_push(next);
	/* Retransmit requests that got no answer; give up on ones that never will. */
	for (int i = 0; i < 4; i++) {
		uint64_t u = 1 + prng_below(&rng, USERS);
		struct client *c = &clients[u];
		if (c->kind != REQ_NONE && now - c->sent_at > CLIENT_RETX_NS) {
			if (c->tries > 40 && c->kind != REQ_DEPOSIT)
				client_answered(u);
			else
				client_transmit(u);
		}
	}
	if (!workload_on)
		return;
	uint64_t user = pick_user();
	struct client *c = &clients[user];
	if (c->kind != REQ_NONE)
		return;
	c->tries = 0;
	bool poor = c->deposited[0] < 20000 || c->deposited[1] + c->deposited[2] +
							c->deposited[3] + c->deposited[4] < 100;
	uint64_t r = prng_below(&rng, 100);
	if (poor || r < 5)
		make_deposit(user, c);
	else if (c->live_count > 0 && r < 30)
		make_cancel(user, c, r < 10);
	else
		make_order(user, c);
	client_transmit(user);
}

/* ---------------------------------------------------------------------------------------
 * Admin: symbols, routing changes, halts, kill-switches.
 * ------------------------------------------------------------------------------------- */

/* Admin messages go into every relevant shard's log; re-sent until applied (idempotent
 * configs), here simply sent to every member of every relevant group a few times. */
static void
admin_send(bool to_oms, bool to_me, const struct wire_msg_hdr *msg)
{
	for (uint32_t gi = 0; gi < GROUPS; gi++) {
		struct group *g = &groups[gi];
		if ((g->is_oms && !to_oms) || (!g->is_oms && !to_me))
			continue;
		for (uint32_t h = 0; h < HOSTS; h++) {
			_Alignas(8) uint8_t copy[2048];
			memcpy(copy, msg, msg->length);
			((struct wire_msg_hdr *)copy)->shard = g->shard;
			propose_at(h, g, h, (const void *)copy, ORIGIN_ADMIN, 0);
		}
	}
}

/* Admin commands are idempotent; re-sent a few times so a leaderless moment loses none. */
static void
admin_broadcast(bool to_oms, bool to_me, const struct wire_msg_hdr *msg)
{
	admin_send(to_oms, to_me, msg);
	struct ev *e = ev_new(40 * MS, EV_ADMIN);
	e->a = to_oms;
	e->b = to_me;
	e->c = 4;
	ev_attach(e, msg, msg->length);
	ev_push(e);
}

static void
on_admin(struct ev *e)
{
	admin_send(e->a, e->b, (const struct wire_msg_hdr *)e->msg);
	if (e->c > 1) {
		struct ev *n = ev_new(60 * MS, EV_ADMIN);
		n->a = e->a;
		n->b = e->b;
		n->c = e->c - 1;
		ev_attach(n, e->msg, e->len);
		ev_push(n);
	}
}

static void
admin_symbols(void)
{
	for (uint32_t s = 1; s <= SYMBOLS; s++) {
		struct wire_symbol_config sc = {0};
		wire_hdr_init(&sc.hdr, WIRE_SYMBOL_CONFIG, 0);
		sc.symbol = s;
		sc.base_asset = s;
		sc.quote_asset = QUOTE;
		sc.me_shard = s <= 2 ? me_ids[0] : me_ids[1];
		sc.status = WIRE_SYM_TRADING;
		sc.tick = 1;
		sc.lot = 1;
		sc.min_qty = 1;
		sc.min_notional = 1;
		sc.base_unit = 1;
		sc.ref_px = 100;
		sc.band_bps = 5000;
		sc.maker_fee_bps = 2;
		sc.taker_fee_bps = 7;
		sc.map_version = 1;
		admin_broadcast(true, true, &sc.hdr);
	}
}

static void
admin_routing(void)
{
	route_truth.hdr.shard = 0;
	admin_broadcast(true, false, &route_truth.hdr);
	/* Gateways pick it up with delays; the stale one much later. */
	for (uint32_t i = 0; i < GATEWAYS; i++) {
		struct ev *e = ev_new(i == STALE_GW ? 400 * MS : (uint64_t)prng_below(&rng, 20 * MS),
				      EV_GW_CONFIG);
		e->a = i;
		ev_push(e);
	}
}

static void
routing_init(void)
{
	memset(&route_truth, 0, sizeof(route_truth));
	wire_hdr_init(&route_truth.hdr, WIRE_ROUTING_CONFIG, 0);
	route_truth.epoch = 1;
	route_truth.shard_count = OMS_GROUPS;
	for (uint32_t i = 0; i < OMS_GROUPS; i++) {
		route_truth.shards[i].shard = oms_ids[i];
		/* Shard 2 joins as receiving: HRW routes no users to it until active. */
		route_truth.shards[i].state = i == 0 ? WIRE_SHARD_ACTIVE : WIRE_SHARD_RECEIVING;
	}
	route_truth.pin_count = WHALES;
	for (uint32_t w = 0; w < WHALES; w++) {
		route_truth.pins[w].user = w + 1;
		route_truth.pins[w].shard = oms_ids[w % OMS_GROUPS];
	}
	for (uint32_t i = 0; i < GATEWAYS; i++)
		gws[i].cfg = route_truth;
}

/* A routing change: activate shard 2 (≈ half the users move) or move a whale's pin. */
static void
admin_route_change(void)
{
	route_truth.epoch++;
	if (route_truth.shards[1].state == WIRE_SHARD_RECEIVING) {
		route_truth.shards[1].state = WIRE_SHARD_ACTIVE;
		trace("routing epoch %" PRIu64 ": shard %u active", route_truth.epoch, oms_ids[1]);
	} else {
		uint32_t w = (uint32_t)prng_below(&rng, WHALES);
		route_truth.pins[w].shard = route_truth.pins[w].shard == oms_ids[0] ? oms_ids[1]
										    : oms_ids[0];
		trace("routing epoch %" PRIu64 ": whale %u pinned to %u", route_truth.epoch, w + 1,
		      route_truth.pins[w].shard);
	}
	admin_routing();
}

static void
admin_halt(bool halt, uint32_t symbol)
{
	struct wire_symbol_status_msg m = {0};
	wire_hdr_init(&m.hdr, WIRE_SYMBOL_STATUS, 0);
	m.symbol = symbol;
	m.status = halt ? WIRE_SYM_HALTED : WIRE_SYM_TRADING;
	m.cancel_resting = halt;
	trace("symbol %u %s", symbol, halt ? "halted" : "resumed");
	admin_broadcast(true, true, &m.hdr);
}

static void
admin_kill(uint64_t user, bool engage)
{
	struct wire_kill_switch k = {0};
	wire_hdr_init(&k.hdr, WIRE_KILL_SWITCH, 0);
	k.id = user;
	k.scope = WIRE_KILL_USER;
	k.engage = engage;
	trace("kill-switch user %" PRIu64 " %s", user, engage ? "engaged" : "released");
	admin_broadcast(true, true, &k.hdr);
}

/* ---------------------------------------------------------------------------------------
 * Faults.
 * ------------------------------------------------------------------------------------- */

/* The operator's tooling re-sends the routing config until every OMS shard has applied it
 * (a config that reached one shard and not the other leaves them disagreeing about owners:
 * NOT_OWNER ping-pong). Halts and kill-switches are not re-sent: a late copy could undo a
 * later resume. */
static void
routing_ensure(void)
{
	for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
		struct member *l = leader_of(&groups[gi]);
		if (l == NULL || oms_route_epoch(l->svc) >= route_truth.epoch)
			continue;
		_Alignas(8) uint8_t copy[sizeof(route_truth)];
		memcpy(copy, &route_truth, sizeof(route_truth));
		((struct wire_msg_hdr *)copy)->shard = groups[gi].shard;
		propose_at(l->idx, &groups[gi], l->idx, (const void *)copy, ORIGIN_ADMIN, 0);
	}
}

static void
on_fault(void)
{
	routing_ensure();
	struct ev *next = ev_new((uint64_t)prng_range(&rng, 20, 120) * MS, EV_FAULT);
	ev_push(next);
	if (!f.chaos)
		return;
	uint32_t up = 0;
	for (uint32_t h = 0; h < HOSTS; h++)
		up += hosts[h].up;
	switch (prng_below(&rng, 9)) {
	case 0: { /* crash a host (keep a majority up) */
		uint32_t h = (uint32_t)prng_below(&rng, HOSTS);
		if (hosts[h].up && up == HOSTS) {
			host_crash(h);
			struct ev *r = ev_new((uint64_t)prng_range(&rng, 30, 300) * MS, EV_RESTART);
			r->a = h;
			ev_push(r);
		}
		break;
	}
	case 1: { /* partition one host from the others, maybe one way only */
		uint32_t h = (uint32_t)prng_below(&rng, HOSTS);
		bool oneway = prng_chance(&rng, 1, 2);
		for (uint32_t o = 0; o < HOSTS; o++) {
			if (o == h)
				continue;
			f.cut[h][o] = true;
			if (!oneway)
				f.cut[o][h] = true;
		}
		trace("partition host %u%s", h, oneway ? " (outbound only)" : "");
		struct ev *e = ev_new((uint64_t)prng_range(&rng, 20, 200) * MS, EV_HEAL);
		e->a = 1;
		ev_push(e);
		break;
	}
	case 2:
		f.loss_pct = (uint32_t)prng_range(&rng, 1, 15);
		f.dup_pct = (uint32_t)prng_range(&rng, 0, 10);
		trace("lossy network: loss %u%% dup %u%%", f.loss_pct, f.dup_pct);
		break;
	case 3:
		f.delay_max_ns = (uint64_t)prng_range(&rng, 1, 20) * MS;
		trace("slow, reordering network: up to %" PRIu64 " ms", f.delay_max_ns / MS);
		break;
	case 4:
		f.disk_max_ns = (uint64_t)prng_range(&rng, 1, 30) * MS;
		trace("slow disks: up to %" PRIu64 " ms", f.disk_max_ns / MS);
		break;
	case 5:
		f.db_fail_pct = (uint32_t)prng_range(&rng, 5, 50);
		f.db_max_ns = (uint64_t)prng_range(&rng, 2, 50) * MS;
		trace("database failing %u%%, slow up to %" PRIu64 " ms", f.db_fail_pct,
		      f.db_max_ns / MS);
		break;
	case 6:
		db_incarnation++;
		trace("database restarts: in-flight requests lost");
		break;
	case 7: { /* bridge/persister crash: roles rebuilt from state on the next tick */
		uint32_t gi = (uint32_t)prng_below(&rng, OMS_GROUPS);
		groups[gi].bridge_host = HOSTS;
		trace("bridge and persister of oms %u crash", groups[gi].shard);
		break;
	}
	case 8: { /* leadership transfer, as in a rolling upgrade */
		struct group *g = &groups[prng_below(&rng, GROUPS)];
		struct member *l = leader_of(g);
		if (l != NULL) {
			uint32_t to = (l->idx + 1) % HOSTS + 1;
			applying = l;
			(void)cns_transfer(l->cns, host_clock(l->idx), to);
			applying = NULL;
			trace("transfer leadership of shard %u to node %u", g->shard, to);
		}
		break;
	}
	}
}

static void
on_heal(void)
{
	memset(f.cut, 0, sizeof(f.cut));
	trace("partition healed");
}

/* ---------------------------------------------------------------------------------------
 * Checks.
 * ------------------------------------------------------------------------------------- */

/* A leader's state is the shard's current state once it has committed an entry of its own
 * term (before that its commit index can be a stale prefix: Raft §5.4.2) and applied all it
 * committed. */
static bool
leader_current(const struct member *l)
{
	return cns_term_at(l->cns, cns_commit_index(l->cns)) == cns_term(l->cns) &&
	       cns_applied_index(l->cns) == cns_commit_index(l->cns);
}

/* A user is resident in at most one OMS shard (checked on leaders that have applied all
 * they committed, so a lagging view is not mistaken for a second residence). */
static void
check_residency(void)
{
	struct member *l[OMS_GROUPS];
	for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
		l[gi] = leader_of(&groups[gi]);
		if (l[gi] == NULL || !leader_current(l[gi]))
			return;
	}
	for (uint64_t u = 1; u <= USERS; u++) {
		uint32_t where = 0;
		for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
			struct oms_user_info info;
			if (oms_user_get(l[gi]->svc, u, &info) == 0 &&
			    (info.status == OMS_USER_RESIDENT || info.status == OMS_USER_FLUSHING))
				where |= 1u << gi;
		}
		if (where == 3) {
			for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
				struct oms_user_info info;
				oms_user_get(l[gi]->svc, u, &info);
				printf("  shard %u leader host %u term %" PRIu64 " applied %" PRIu64
				       ": status %u epoch %" PRIu64 " version %" PRIu64 " sagas %u live %u\n",
				       groups[gi].shard, l[gi]->idx, cns_term(l[gi]->cns),
				       cns_applied_index(l[gi]->cns), info.status, info.epoch,
				       info.version, info.sagas, info.live);
			}
			violation("user %" PRIu64 " resident in both OMS shards", u);
		}
	}
}

/* Money is conserved per asset: users' totals (resident ones from their shard, the rest
 * from the database) plus fees collected equal the confirmed deposits. */
static void
check_money(void)
{
	static const uint32_t assets[ASSETS_TRACKED] = {QUOTE, 1, 2, 3, 4};
	struct member *l[OMS_GROUPS];
	for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
		l[gi] = leader_of(&groups[gi]);
		CHECK(l[gi] != NULL);
	}
	for (uint32_t ai = 0; ai < ASSETS_TRACKED; ai++) {
		uint32_t asset = assets[ai];
		int64_t want = 0, have = 0;
		for (uint64_t u = 1; u <= USERS; u++)
			want += clients[u].deposited[asset_index(asset)];
		for (uint32_t gi = 0; gi < OMS_GROUPS; gi++)
			have += oms_asset_sum(l[gi]->svc, asset); /* resident users + fees */
		for (uint64_t u = 1; u <= USERS; u++) {
			bool resident = false;
			for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
				struct oms_user_info info;
				if (oms_user_get(l[gi]->svc, u, &info) == 0 &&
				    (info.status == OMS_USER_RESIDENT ||
				     info.status == OMS_USER_FLUSHING))
					resident = true;
			}
			if (resident || !db[u].exists)
				continue;
			for (uint32_t b = 0; b < db[u].state.balance_count; b++)
				if (db[u].state.balances[b].asset == asset)
					have += db[u].state.balances[b].total;
		}
		if (have != want) {
			for (uint64_t u = 1; u <= USERS; u++)
				for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
					struct oms_user_info info;
					if (oms_user_get(l[gi]->svc, u, &info) == 0 &&
					    info.status != OMS_USER_RESIDENT)
						trace("money: user %" PRIu64 " state %u on group %u; db owner %u epoch %" PRIu64 " version %" PRIu64,
						      u, info.status, gi, db[u].owner, db[u].owner_epoch, db[u].version);
				}
			violation("money not conserved in asset %u: have %" PRId64 ", deposited %" PRId64,
				  asset, have, want);
		}
	}
}

/* Write-back (docs/oms.md): a resident user that is clean — no change since the row was last
 * known to hold its state, no write-back in flight — has exactly its RAM balances and user_seq
 * in the database. A change that does not mark the actor dirty shows up here. */
static void
check_writeback(void)
{
	for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
		struct member *l = leader_of(&groups[gi]);
		for (uint64_t u = 1; u <= USERS; u++) {
			struct oms_user_info info;
			if (oms_user_get(l->svc, u, &info) != 0 || info.status != OMS_USER_RESIDENT ||
			    info.dirty || info.writing || !db[u].exists)
				continue;
			const struct wire_user_state *st = &db[u].state;
			bool same = st->user_seq == info.user_seq && db[u].version == info.version;
			for (uint32_t b = 0; b < st->balance_count; b++) {
				int64_t total = 0, reserved;
				oms_balance_get(l->svc, u, st->balances[b].asset, &total, &reserved);
				same = same && total == st->balances[b].total;
			}
			if (!same)
				violation("user %" PRIu64 " is clean on shard %u but its row differs "
					  "(version %" PRIu64 " row %" PRIu64 ", user_seq %" PRIu64
					  " row %" PRIu64 ")", u, groups[gi].shard, info.version,
					  db[u].version, info.user_seq, st->user_seq);
		}
	}
}

/* Every acknowledged order reached the ME (accepted or rejected there). */
static void
check_acked_reached_me(void)
{
	for (uint64_t i = 0; i < oms_acked.cap; i++) {
		struct kv *s = &oms_acked.slots[i];
		if (s->k1 == 0 && s->k2 == 0)
			continue;
		if (map_get(&order_cls, s->k1, s->v) == NULL)
			continue; /* the ACK of a cancel or amend request */
		if (map_get(&me_accepted, s->k1, s->k2) == NULL &&
		    map_get(&me_rejected, s->k1, s->k2) == NULL &&
		    map_get(&me_refused, s->k1, s->k2) == NULL)
			violation("acknowledged order %" PRIu64 ":%" PRIx64 " never reached the ME",
				  s->k1, s->k2);
	}
}

static uint64_t resting_total(void);

/* The users whose live orders the OMS and the ME see differently, traced before the drained
 * check fails (rerun with --watch USER for the user's story): per user, the orders the ME
 * accepted and never ended (by its emitted events) against the owner's open-orders count. */
static void
drained_diff(void)
{
	uint32_t shown = 0;
	for (uint64_t u = 1; u <= USERS && shown < 8; u++) {
		uint64_t oms_live = 0, me_live = 0;
		for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
			struct oms_user_info info;
			if (oms_user_get(leader_of(&groups[gi])->svc, u, &info) == 0)
				oms_live += info.live;
		}
		for (uint64_t i = 0; i < me_accepted.cap; i++) {
			const struct kv *s = &me_accepted.slots[i];
			if (s->k1 == u && map_get(&me_done, s->k1, s->k2) == NULL)
				me_live++;
		}
		if (oms_live == me_live)
			continue;
		shown++;
		trace("drained: user %" PRIu64 ": the OMS holds %" PRIu64 " live, the ME %" PRIu64, u,
		      oms_live, me_live);
		for (uint64_t i = 0; i < me_accepted.cap; i++) {
			const struct kv *s = &me_accepted.slots[i];
			if (s->k1 == u && map_get(&me_done, s->k1, s->k2) == NULL)
				trace("drained:   ME live %" PRIu64 ":%" PRIx64, s->k1, s->k2);
		}
	}
}

/* After draining: no saga in flight, every OMS live order rests on an ME book. */
static void
check_drained(void)
{
	uint64_t live = 0;
	for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
		struct member *l = leader_of(&groups[gi]);
		if (oms_inflight_count(l->svc) != 0)
			violation("oms %u: %u sagas still in flight after draining", groups[gi].shard,
				  oms_inflight_count(l->svc));
		for (uint64_t u = 1; u <= USERS; u++) {
			struct oms_user_info info;
			if (oms_user_get(l->svc, u, &info) == 0)
				live += info.live;
		}
	}
	uint64_t resting = resting_total();
	if (live != resting)
		drained_diff();
	if (live != resting)
		violation("OMS open-orders index holds %" PRIu64 " live orders, ME books hold %" PRIu64,
			  live, resting);
}

static uint64_t
resting_total(void)
{
	uint64_t n = 0;
	for (uint32_t gi = OMS_GROUPS; gi < GROUPS; gi++)
		n += me_orders_resting(leader_of(&groups[gi])->svc);
	return n;
}

/* ---------------------------------------------------------------------------------------
 * Driver.
 * ------------------------------------------------------------------------------------- */

static uint64_t ev_kind_count[32];

static void
run_one(struct ev *e)
{
	now = e->t;
	events_run++;
	ev_kind_count[e->kind & 31]++;
	switch (e->kind) {
	case EV_TICK: on_tick(e->a); break;
	case EV_RAFT: on_raft(e); break;
	case EV_DURABLE: on_durable(e); break;
	case EV_INGRESS: on_ingress(e); break;
	case EV_NOT_LEADER: on_not_leader(e); break;
	case EV_GW_REPLY: on_gw_reply(e); break;
	case EV_DB_DONE: on_db_done(e); break;
	case EV_ADMIN_REPLY: on_admin_reply(e); break;
	case EV_WORKLOAD: on_workload(); break;
	case EV_FAULT: on_fault(); break;
	case EV_RESTART: host_restart(e->a); break;
	case EV_HEAL: on_heal(); break;
	case EV_GW_CONFIG: gws[e->a].cfg = route_truth; break;
	case EV_ADMIN: on_admin(e); break;
	default: CHECK(0);
	}
	ev_free(e);
	if (events_run % 512 == 0)
		check_residency();
}

static void
run_until(uint64_t t)
{
	while (heap_len > 0 && heap[0]->t <= t)
		run_one(ev_pop());
	now = t;
}

static bool
all_up_with_leaders(void)
{
	for (uint32_t h = 0; h < HOSTS; h++)
		if (!hosts[h].up)
			return false;
	for (uint32_t gi = 0; gi < GROUPS; gi++)
		if (leader_of(&groups[gi]) == NULL)
			return false;
	return true;
}

/* Quiet: no client waiting, a leader everywhere that has applied all it committed, no saga
 * in flight, nothing parked (a message or an ME event waiting for its user's hydration: a
 * moved order's ADOPTED waits there for the new owner, and until it is applied neither
 * shard counts the order live), no routing drain running. */
static bool
drained(void)
{
	if (!all_up_with_leaders())
		return false;
	for (uint64_t u = 1; u <= USERS; u++)
		if (clients[u].kind != REQ_NONE)
			return false;
	for (uint32_t gi = 0; gi < GROUPS; gi++) {
		struct member *l = leader_of(&groups[gi]);
		if (!leader_current(l))
			return false;
		if (gi < OMS_GROUPS && (oms_inflight_count(l->svc) != 0 ||
					oms_parked_count(l->svc) != 0 || oms_route_draining(l->svc)))
			return false;
	}
	return true;
}

/* Every member has applied at least what the leaders had committed at the call. */
static bool
caught_up(const uint64_t *target)
{
	for (uint32_t gi = 0; gi < GROUPS; gi++)
		for (uint32_t i = 0; i < MEMBERS; i++)
			if (cns_applied_index(groups[gi].m[i].cns) < target[gi])
				return false;
	return true;
}

/* Heal every fault, stop new work, and run until the system is quiet; then check. */
static void
quiesce_and_check(const char *why)
{
	f.chaos = false;
	workload_on = false;
	faults_calm();
	for (uint32_t h = 0; h < HOSTS; h++)
		if (!hosts[h].up)
			host_restart(h);
	uint64_t deadline = now + 3000 * MS;
	/* Liveness: after faults heal, leaders exist and everything drains in bounded time. */
	while (!drained()) {
		if (now > deadline) {
			/* Who is still waiting, and where its user stands on each OMS shard. */
			uint32_t shown = 0;
			for (uint64_t u = 1; u <= USERS && shown < 8; u++) {
				if (clients[u].kind == REQ_NONE)
					continue;
				shown++;
				printf("  client %" PRIu64 " waits (request kind %u)", u,
				       (unsigned)clients[u].kind);
				for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
					struct member *l = leader_of(&groups[gi]);
					struct oms_user_info ui;
					if (l != NULL && oms_user_get(l->svc, u, &ui) == 0)
						printf("; oms %u: status %u parked %u live %u sagas %u "
						       "dirty %u writing %u",
						       groups[gi].shard, ui.status, ui.parked, ui.live,
						       ui.sagas, ui.dirty, ui.writing);
				}
				printf("\n");
			}
			for (uint32_t gi = 0; gi < GROUPS; gi++) {
				struct member *l = leader_of(&groups[gi]);
				if (gi < OMS_GROUPS && l != NULL)
					printf("  shard %u parked %u draining %d waiting %u\n",
					       groups[gi].shard, oms_parked_count(l->svc),
					       (int)oms_route_draining(l->svc), oms_waiting_count(l->svc));
				printf("  shard %u leader %d commit %" PRIu64 " inflight %u\n",
				       groups[gi].shard, l ? (int)l->idx : -1,
				       l ? cns_commit_index(l->cns) : 0,
				       (l && gi < OMS_GROUPS) ? oms_inflight_count(l->svc) : 0);
			}
			for (uint32_t gi = 0; gi < GROUPS; gi++) {
				struct member *l = leader_of(&groups[gi]);
				if (l == NULL)
					continue;
				printf("  shard %u counters:", groups[gi].shard);
				if (gi < OMS_GROUPS) {
					for (int c = 0; c < OMS_C_COUNT; c++)
						if (oms_counter_get(l->svc, c))
							printf(" %s=%" PRIu64, oms_counter_name(c),
							       oms_counter_get(l->svc, c));
					for (uint32_t mi = 0; mi < ME_GROUPS; mi++)
						printf(" next_seq[%u]=%" PRIu64, me_ids[mi],
						       oms_stream_next_seq(l->svc, me_ids[mi]));
				} else {
					const struct me *me = l->svc;
					struct me_stream_info st;
					for (uint32_t si = 0; me_stream_info_at(me, si, &st) == 0; si++)
						printf(" stream[%u]: next %" PRIu64 " acked %" PRIu64 " oldest %" PRIu64, st.shard,
						       st.next_seq, st.acked, st.oldest);
					for (int c = 0; c < ME_C_COUNT; c++)
						if (me_counter(l->svc, c))
							printf(" %s=%" PRIu64, me_counter_label(c),
							       me_counter(l->svc, c));
				}
				printf("\n");
			}
			violation("%s: the system did not drain within 20 s of healing", why);
		}
		routing_ensure();
		run_until(now + 5 * MS);
	}
	/* Every member catches up with what was committed (liveness of apply). */
	uint64_t target[GROUPS];
	for (uint32_t gi = 0; gi < GROUPS; gi++)
		target[gi] = cns_commit_index(leader_of(&groups[gi])->cns);
	while (!caught_up(target)) {
		if (now > deadline)
			violation("%s: a live member did not catch up with the commit index", why);
		run_until(now + 5 * MS);
	}
	while (!drained())
		run_until(now + 1 * MS);
	check_residency();
	check_money();
	check_writeback();
	check_acked_reached_me();
	check_drained();
	if (getenv("SIM_STATS") != NULL) {
		for (uint32_t t = 0; t < WIRE_TYPE_LIMIT; t++)
			for (uint32_t gi = 0; gi < GROUPS; gi++)
				if (raft_type_count[t][gi] > 0)
					printf("  %s: raft %s to shard %u: %" PRIu64 "\n", why,
					       wire_type_name((uint16_t)t), groups[gi].shard,
					       raft_type_count[t][gi]);
		memset(raft_type_count, 0, sizeof(raft_type_count));
		for (uint32_t gi = 0; gi < GROUPS; gi++)
			for (uint32_t i = 0; i < MEMBERS; i++) {
				struct member *m = &groups[gi].m[i];
				printf("  %s: shard %u member %u role %d log %u entries %u bytes"
				       " first %" PRIu64 " last %" PRIu64 " commit %" PRIu64 " |",
				       why, groups[gi].shard, i, cns_role(m->cns),
				       cns_memlog_count(m->log), cns_memlog_bytes(m->log),
				       cns_memlog_ops.first_index(m->log), cns_last_index(m->cns),
				       cns_commit_index(m->cns));
				for (int c = 0; c < CNS_C_COUNT; c++)
					if (cns_counter(m->cns, c))
						printf(" %s=%" PRIu64, cns_counter_name(c), cns_counter(m->cns, c));
				printf("\n");
			}
	}
	trace("%s: quiescent and consistent", why);
}

static const char *const plant_names[] = {
	[PLANT_DEDUP0] = "dedup0",             /* the ME dedup window 0, as the app had it */
	[PLANT_ACK_AHEAD] = "ack-ahead",       /* STREAM_ACK covers events not yet applied */
	[PLANT_REBUILD_EARLY] = "rebuild-early", /* bridge and persister rebuilt from a
						  * leader that has not applied all it committed */
	[PLANT_SNAPSHOT_SHORT] = "snapshot-short", /* the ME's open-orders snapshot leaves
						    * out an order it holds */
};

static void
plant_parse(const char *name)
{
	for (uint32_t i = 1; i < sizeof(plant_names) / sizeof(plant_names[0]); i++)
		if (strcmp(name, plant_names[i]) == 0) {
			plant = (enum plant)i;
			return;
		}
	fprintf(stderr, "sim-system: unknown plant '%s'\n", name);
	exit(2);
}

static void
plant_apply(void)
{
	if (plant == PLANT_DEDUP0)
		me_lim.dedup_ttl_ns = 0;
}

/* ---------------------------------------------------------------------------------------
 * Scenario --halt-burst (issue 15): halt with cancel of a symbol holding 3 x events_max
 * resting orders from both OMS shards while one OMS shard is cut off from the ME, so its
 * stream acknowledges nothing. The ME must not write over retention that shard has not
 * acknowledged (me_bulk.c): the halt goes on in chunks as acks free room, and once the cut
 * heals every order of the burst reaches its OMS as exactly one CANCELLED(HALT) + DONE.
 * ------------------------------------------------------------------------------------- */

#define HB_EVENTS_MAX 256           /* me_limits.events_max in this scenario */
#define HB_ORDERS (3 * HB_EVENTS_MAX)
#define HB_USERS 256                /* users 5..260 rest 3 sells each */
#define HB_SYM 1                    /* on ME shard 8 */
static bool halt_burst;
/* --cap N: the OMS resident cap below the user count, so admission waits, pressure
 * evictions and refusals after admit_wait_ns run under the faults (docs/oms.md,
 * "Admission"). 0: the cap holds every user. */
static uint32_t cap_users;
static struct map hb_seen;          /* (ME group << 16 | stream, seq) → first emission seen */
static struct map hb_orders;        /* oid → RESTED | CANCELLED count << 8 | DONE count << 16 */

/* Events about the burst symbol, each stream position counted once (replays re-emit it). */
static void
hb_observe(uint32_t group, const struct wire_me_event *e)
{
	if (!halt_burst || e->symbol != HB_SYM)
		return;
	uint64_t *seen = map_put(&hb_seen, (uint64_t)group << 16 | e->hdr.shard, e->seq);
	if (*seen != 0)
		return;
	*seen = 1;
	uint64_t *v = map_put(&hb_orders, e->oid.user, e->oid.shard_seq);
	switch (e->event) {
	case WIRE_EV_RESTED:
		*v |= 1;
		break;
	case WIRE_EV_FILL:
		violation("halt burst: order %" PRIu64 ":%" PRIx64 " traded", e->oid.user,
			  e->oid.shard_seq);
	case WIRE_EV_CANCELLED:
		if (e->cause != WIRE_CAUSE_HALT)
			violation("halt burst: order %" PRIu64 ":%" PRIx64 " cancelled with cause %u",
				  e->oid.user, e->oid.shard_seq, e->cause);
		*v += 1u << 8;
		if (e->hdr.flags & WIRE_EV_F_DONE)
			*v += 1u << 16; /* the CANCELLED that says done: no DONE follows */
		break;
	case WIRE_EV_DONE:
		if (((*v >> 8) & 0xff) != 1)
			violation("halt burst: DONE of %" PRIu64 ":%" PRIx64 " without its CANCELLED",
				  e->oid.user, e->oid.shard_seq);
		*v += 1u << 16;
		break;
	default:
		break;
	}
}

static void
hb_wait_clients(const char *what)
{
	uint64_t deadline = now + 5000 * MS;
	for (;;) {
		bool busy = false;
		for (uint64_t u = 1; u <= USERS && !busy; u++)
			busy = clients[u].kind != REQ_NONE;
		if (!busy)
			return;
		if (now > deadline)
			violation("halt burst: clients still waiting after %s", what);
		run_until(now + 1 * MS);
	}
}

static struct member *
hb_me_leader(void)
{
	struct member *l = leader_of(&groups[OMS_GROUPS]);
	CHECK(l != NULL);
	return l;
}

/* No ME replica ever wrote over unacknowledged retention. */
static void
hb_check_no_overrun(void)
{
	for (uint32_t gi = OMS_GROUPS; gi < GROUPS; gi++)
		for (uint32_t i = 0; i < MEMBERS; i++) {
			struct member *m = &groups[gi].m[i];
			if (me_counter(m->svc, ME_C_EVENTS_OVERRUN) != 0)
				violation("halt burst: ME %u member %u overran retention %" PRIu64
					  " times", groups[gi].shard, i,
					  me_counter(m->svc, ME_C_EVENTS_OVERRUN));
		}
}

/* Every OMS shard's leader has applied its ME stream (of the burst's ME shard) to the end. */
static bool
hb_streams_consumed(void)
{
	struct member *ml = leader_of(&groups[OMS_GROUPS]);
	if (ml == NULL)
		return false;
	struct me_stream_info st;
	for (uint32_t i = 0; me_stream_info_at(ml->svc, i, &st) == 0; i++) {
		struct group *og = group_of_shard(st.shard);
		CHECK(og != NULL);
		struct member *ol = leader_of(og);
		if (ol == NULL || oms_stream_next_seq(ol->svc, groups[OMS_GROUPS].shard) != st.next_seq)
			return false;
	}
	return true;
}

static void
halt_burst_run(void)
{
	/* Both OMS shards active, so the burst's users are spread over them. */
	admin_route_change();
	run_until(now + 200 * MS);
	quiesce_and_check("halt burst: shard 2 active");
	/* Balances: base asset of the symbol for the sells. */
	for (uint64_t u = 5; u < 5 + HB_USERS; u++) {
		struct client *c = &clients[u];
		make_deposit(u, c);
		struct wire_transfer *t = (struct wire_transfer *)c->req;
		t->asset = HB_SYM;
		t->amount = 1000;
		c->pending_asset = HB_SYM;
		c->pending_amount = 1000;
		client_transmit(u);
	}
	hb_wait_clients("deposits");
	/* Rest sells above the market until the book holds 3 x events_max orders, 32 at a time
	 * (the ring holds only 256 events); a request refused (BACKPRESSURE while acks catch
	 * up) is simply followed by another. */
	struct me_symbol_info si;
	uint64_t cursor = 0;
	for (int round = 0; round < 400; round++) {
		CHECK(me_symbol_get(hb_me_leader()->svc, HB_SYM, &si) == 0);
		if (si.resting >= HB_ORDERS)
			break;
		uint32_t want = HB_ORDERS - si.resting < 32 ? HB_ORDERS - si.resting : 32;
		for (; want > 0; want--) {
			uint64_t u = 5 + cursor++ % HB_USERS;
			struct client *c = &clients[u];
			struct wire_new_order o = {0};
			wire_hdr_init(&o.hdr, WIRE_NEW_ORDER, 0);
			o.user = u;
			o.cl_ord_id = ++c->next_cl;
			o.symbol = HB_SYM;
			o.side = WIRE_SIDE_SELL;
			o.ord_type = WIRE_ORD_LIMIT;
			o.tif = WIRE_TIF_GTC;
			o.px = 110 + (int64_t)((u + c->next_cl) % 30);
			o.qty = 1;
			o.route_epoch = gws[gw_of(u)].cfg.epoch;
			*map_put(&order_cls, u, o.cl_ord_id) = 1;
			c->kind = REQ_ORDER;
			c->cl = o.cl_ord_id;
			c->tries = 0;
			memcpy(c->req, &o, sizeof(o));
			orders_sent++;
			client_transmit(u);
		}
		hb_wait_clients("orders");
		run_until(now + 20 * MS);
	}
	CHECK(me_symbol_get(hb_me_leader()->svc, HB_SYM, &si) == 0);
	if (si.resting != HB_ORDERS) {
		for (uint32_t gi = 0; gi < OMS_GROUPS; gi++)
			for (uint16_t r = 0; r < WIRE_REASON_MAX; r++)
				if (oms_nak_count(leader_of(&groups[gi])->svc, r) != 0)
					printf("  oms %u: NAK %s x %" PRIu64 "\n", groups[gi].shard,
					       wire_reason_name(r),
					       oms_nak_count(leader_of(&groups[gi])->svc, r));
		for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
			const struct oms *o = leader_of(&groups[gi])->svc;
			for (int c = 0; c < OMS_C_COUNT; c++)
				if (oms_counter_get(o, c))
					printf("  oms %u: %s=%" PRIu64 "\n", groups[gi].shard,
					       oms_counter_name(c), oms_counter_get(o, c));
			printf("  oms %u: next_seq %" PRIu64 "\n", groups[gi].shard,
			       oms_stream_next_seq(o, me_ids[0]));
		}
		struct me_stream_info st;
		for (uint32_t i = 0; me_stream_info_at(hb_me_leader()->svc, i, &st) == 0; i++)
			printf("  me stream %u: next %" PRIu64 " acked %" PRIu64 " oldest %" PRIu64 "\n",
			       st.shard, st.next_seq, st.acked, st.oldest);
		for (int c = 0; c < ME_C_COUNT; c++)
			if (me_counter(hb_me_leader()->svc, c))
				printf("  me: %s=%" PRIu64 "\n", me_counter_label(c),
				       me_counter(hb_me_leader()->svc, c));
	}
	if (si.resting != HB_ORDERS)
		violation("halt burst: %u orders rest, want %u", si.resting, HB_ORDERS);
	uint64_t burst = 0, per_shard[OMS_GROUPS] = {0};
	for (uint64_t i = 0; i < hb_orders.cap; i++) {
		const struct kv *s = &hb_orders.slots[i];
		if ((s->k1 != 0 || s->k2 != 0) && s->v == 1) {
			burst++;
			per_shard[wire_oid_shard((struct wire_oid){s->k1, s->k2}) == oms_ids[0] ? 0 : 1]++;
		}
	}
	if (burst != HB_ORDERS || per_shard[0] == 0 || per_shard[1] == 0)
		violation("halt burst: %" PRIu64 " resting orders observed (shards %" PRIu64
			  "/%" PRIu64 "), want %u from both", burst, per_shard[0], per_shard[1],
			  HB_ORDERS);

	/* Cut OMS shard 2 off the ME streams, halt with cancel, let the halt run. */
	hb_muted = 1;
	trace("halt burst: OMS shard %u cut off; halting symbol %u (%u orders)", oms_ids[1],
	      HB_SYM, HB_ORDERS);
	admin_halt(true, HB_SYM);
	run_until(now + 500 * MS);
	hb_check_no_overrun();
	struct member *ml = hb_me_leader();
	if (me_counter(ml->svc, ME_C_BULK_PENDING) != 1 ||
	    me_counter(ml->svc, ME_C_BULK_DEFERRED) == 0)
		violation("halt burst: the halt did not wait for the cut-off shard (pending %" PRIu64
			  ", deferred %" PRIu64 ")", me_counter(ml->svc, ME_C_BULK_PENDING),
			  me_counter(ml->svc, ME_C_BULK_DEFERRED));
	CHECK(me_symbol_get(ml->svc, HB_SYM, &si) == 0);
	trace("halt burst: %u orders still resting while shard %u is cut off", si.resting,
	      oms_ids[1]);

	/* Heal: the shard's OMS replays what it missed; acks let the job finish. */
	hb_muted = -1;
	trace("halt burst: OMS shard %u reconnected", oms_ids[1]);
	uint64_t deadline = now + 5000 * MS;
	for (;;) {
		ml = hb_me_leader();
		CHECK(me_symbol_get(ml->svc, HB_SYM, &si) == 0);
		if (si.resting == 0 && me_counter(ml->svc, ME_C_BULK_PENDING) == 0)
			break;
		if (now > deadline)
			violation("halt burst: %u orders still resting 5 s after the heal", si.resting);
		run_until(now + 10 * MS);
	}
	/* The reconnected shard catches up on its stream (replays from the ME's retention). */
	while (!hb_streams_consumed()) {
		if (now > deadline)
			violation("halt burst: an OMS shard did not catch up with its ME stream");
		run_until(now + 10 * MS);
	}
	quiesce_and_check("halt burst");
	hb_check_no_overrun();

	/* Every order: one CANCELLED(HALT), done, in its stream; every OMS shard consumed its
	 * stream to the end (so it applied them); every client saw its orders end. */
	uint64_t finished = 0;
	for (uint64_t i = 0; i < hb_orders.cap; i++) {
		const struct kv *s = &hb_orders.slots[i];
		if ((s->k1 == 0 && s->k2 == 0) || (s->v & 1) == 0)
			continue;
		if (s->v != (1 | 1u << 8 | 1u << 16))
			violation("halt burst: order %" PRIu64 ":%" PRIx64 " ended with %" PRIu64
				  " CANCELLED and %" PRIu64 " DONE", s->k1, s->k2, (s->v >> 8) & 0xff,
				  s->v >> 16);
		finished++;
	}
	if (finished != HB_ORDERS)
		violation("halt burst: %" PRIu64 " orders finished, want %u", finished, HB_ORDERS);
	ml = hb_me_leader();
	if (!hb_streams_consumed())
		violation("halt burst: an OMS shard has not consumed its ME stream");
	for (uint64_t u = 5; u < 5 + HB_USERS; u++)
		if (clients[u].live_count != 0)
			violation("halt burst: client %" PRIu64 " still has %u live orders", u,
				  clients[u].live_count);
	printf("sim-system: seed %" PRIu64 " halt burst ok: %u orders over both OMS shards "
	       "(%" PRIu64 "/%" PRIu64 "), events_max %u, deferred steps %" PRIu64 ", overruns 0\n",
	       seed, HB_ORDERS, per_shard[0], per_shard[1], HB_EVENTS_MAX,
	       me_counter(ml->svc, ME_C_BULK_DEFERRED));
}

static void
setup(void)
{
	prng_seed(&rng, seed);
	faults_calm();
	oms_limits_default(&oms_lim);
	oms_lim.users_max = USERS + 16;
	if (cap_users != 0) {
		oms_lim.users_max = cap_users;
		oms_lim.wait_max = 64;
		oms_lim.admit_wait_ns = 200 * MS;
	}
	oms_lim.me_shards_max = 16;
	oms_lim.ttl_ns = 300 * MS;
	oms_lim.sweep_interval_ns = 20 * MS;
	/* Reconciliation on: every 40 ms of cluster time a sweep visits 256 actor slots and
	 * compares up to 8 users with live orders against the ME, so each user holding orders
	 * is compared several times a phase; its alarms are checked after every apply. */
	oms_lim.reconcile_interval_ns = 40 * MS;
	oms_lim.writeback_interval_ns = 50 * MS; /* write-back of dirty resident users */
	oms_lim.replay_interval_ns = 10 * MS;
	memset(&me_lim, 0, sizeof(me_lim));
	me_lim.streams_max = 4;
	me_lim.symbols_max = 8;
	me_lim.orders_max = 1 << 14;
	me_lim.users_max = USERS + 16;
	me_lim.levels_max = 1024;
	me_lim.levels_side_max = 256;
	me_lim.gtd_max = 1 << 12;
	me_lim.events_max = 1 << 12;
	me_lim.events_reserve = 256;
	if (halt_burst) {
		me_lim.events_max = HB_EVENTS_MAX;
		me_lim.events_reserve = 32;
	}
	me_lim.dedup_ttl_ns = 1000 * MS; /* far above every re-drive and retry interval here */
	plant_apply();
	cns_lim.snapshot_bytes_max = 16u << 20;
	log_lim.entries_max = 1 << 15;
	log_lim.bytes_max = 64u << 20;

	oms_ops_observed = oms_svc_ops;
	oms_ops_observed.apply = oms_apply_observed;
	oms_ops_observed.tick = oms_tick_observed;
	me_ops_observed = me_svc_ops;
	me_ops_observed.apply = me_apply_observed;
	me_ops_observed.tick = me_tick_observed;

	for (uint32_t h = 0; h < HOSTS; h++) {
		hosts[h].up = true;
		hosts[h].skew_ns = prng_range(&rng, -5, 5) * (int64_t)MS;
		hosts[h].drift_ppm = (int32_t)prng_range(&rng, -200, 200);
	}
	for (uint32_t gi = 0; gi < GROUPS; gi++) {
		struct group *g = &groups[gi];
		g->is_oms = gi < OMS_GROUPS;
		g->shard = g->is_oms ? oms_ids[gi] : me_ids[gi - OMS_GROUPS];
		g->bridge_host = HOSTS;
		if (g->is_oms) {
			oms_lim.shard_id = g->shard;
			g->svc_size = oms_footprint(&oms_lim);
		} else {
			me_lim.shard = g->shard;
			g->svc_size = me_footprint(&me_lim);
		}
		CHECK(g->svc_size > 0);
		g->cns_size = cns_footprint(&cns_lim);
		g->log_size = cns_memlog_footprint(&log_lim);
		for (uint32_t i = 0; i < MEMBERS; i++) {
			struct member *m = &g->m[i];
			m->group = gi;
			m->idx = i;
			m->svc_mem = aligned_alloc(64, (g->svc_size + 63) & ~(size_t)63);
			m->cns_mem = aligned_alloc(64, (g->cns_size + 63) & ~(size_t)63);
			m->log_mem = aligned_alloc(64, (g->log_size + 63) & ~(size_t)63);
			m->egress = malloc(sizeof(struct egress) * EGRESS_MAX);
			CHECK(m->svc_mem && m->cns_mem && m->log_mem && m->egress);
			if (g->is_oms)
				oms_lim.shard_id = g->shard;
			else
				me_lim.shard = g->shard;
			member_boot(g, m, true);
		}
		for (uint32_t i = 0; i < ME_GROUPS; i++)
			g->me_leader_guess[i] = i % HOSTS;
	}
	routing_init();
	for (uint32_t h = 0; h < HOSTS; h++) {
		struct ev *e = ev_new(prng_below(&rng, TICK_NS), EV_TICK);
		e->a = h;
		ev_push(e);
	}
	ev_push(ev_new(1 * MS, EV_WORKLOAD));
	ev_push(ev_new(50 * MS, EV_FAULT));
}

static void
usage(void)
{
	fprintf(stderr, "usage: sim-system [--seed N] [--steps M] [--trace] [--plant NAME]\n"
			"  --steps M     chaos phases of 500 ms simulated each (default 4)\n"
			"  --plant NAME  reopen a closed hole (self-test): dedup0, ack-ahead,\n"
			"                rebuild-early, snapshot-short\n");
	fprintf(stderr, "       sim-system ... --cap N: an OMS resident cap of N users (of %d):\n"
			"                cold users wait for room, idle ones are evicted for them\n",
		USERS);
	fprintf(stderr, "usage: sim-system [--seed N] [--steps M] [--trace] [--halt-burst]\n"
			"  --steps M     chaos phases of 500 ms simulated each (default 4)\n"
			"  --halt-burst  halt a symbol holding 3 x events_max resting orders while\n"
			"                one OMS shard is cut off from the ME (instead of the phases)\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	uint64_t phases = 4;
	seed = 1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
			phases = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--trace") == 0)
			trace_on = true;
		else if (strcmp(argv[i], "--plant") == 0 && i + 1 < argc)
			plant_parse(argv[++i]);
		else if (strcmp(argv[i], "--halt-burst") == 0)
			halt_burst = true;
		else if (strcmp(argv[i], "--cap") == 0 && i + 1 < argc)
			cap_users = (uint32_t)strtoul(argv[++i], NULL, 0);
		else
			usage();
	}
	if (getenv("SIM_WATCH_USER") != NULL)
		watch_user = strtoull(getenv("SIM_WATCH_USER"), NULL, 0);
	setup();

	/* Warm-up: elect leaders, configure symbols and routing, calm. */
	run_until(now + 600 * MS);
	admin_symbols();
	admin_routing();
	run_until(now + 200 * MS);
	quiesce_and_check("setup");
	if (halt_burst) {
		halt_burst_run();
		return 0;
	}

	for (uint64_t p = 0; p < phases; p++) {
		workload_on = true;
		f.chaos = true;
		uint64_t end = now + 500 * MS;
		/* Operations during the phase: a routing change, a halt, a kill-switch. */
		run_until(now + 100 * MS);
		if (p % 2 == 0)
			admin_route_change();
		run_until(now + 100 * MS);
		uint32_t sym = (uint32_t)(1 + prng_below(&rng, SYMBOLS));
		if (p % 3 == 1)
			admin_halt(true, sym);
		uint64_t victim = 1 + prng_below(&rng, USERS);
		if (p % 3 == 2)
			admin_kill(victim, true);
		run_until(now + 150 * MS);
		if (p % 3 == 1)
			admin_halt(false, sym);
		if (p % 3 == 2)
			admin_kill(victim, false);
		run_until(end);
		/* Idle long enough for TTL evictions, then check at a quiet point. */
		workload_on = false;
		run_until(now + 400 * MS);
		char why[64];
		snprintf(why, sizeof(why), "phase %" PRIu64, p + 1);
		quiesce_and_check(why);
	}

	uint64_t evictions = 0, hydrations = 0, fills = 0, writebacks = 0;
	uint64_t recon_matched = 0, recon_transient = 0, recon_deferred = 0;
	uint64_t moved_out = 0, adopted = 0;
	for (uint32_t gi = 0; gi < OMS_GROUPS; gi++) {
		struct member *l = leader_of(&groups[gi]);
		moved_out += oms_counter_get(l->svc, OMS_C_ORDERS_MOVED_OUT);
		adopted += oms_counter_get(l->svc, OMS_C_ORDERS_ADOPTED);
		evictions += oms_counter_get(l->svc, OMS_C_EVICTIONS);
		hydrations += oms_counter_get(l->svc, OMS_C_HYDRATIONS);
		fills += oms_counter_get(l->svc, OMS_C_FILLS);
		recon_matched += oms_counter_get(l->svc, OMS_C_RECON_MATCHED);
		recon_transient += oms_counter_get(l->svc, OMS_C_RECON_TRANSIENT);
		recon_deferred += oms_counter_get(l->svc, OMS_C_RECON_DEFERRED);
		writebacks += oms_counter_get(l->svc, OMS_C_WRITEBACKS_OK);
	}
	/* Reconciliation is on: it must have compared orders, or its silence proves nothing. */
	if (recon_matched == 0)
		violation("reconciliation never matched an order with the ME");
	printf("sim-system: seed %" PRIu64 " ok: %" PRIu64 " events, %.1f s simulated, orders %" PRIu64
	       " cancels %" PRIu64 " deposits %" PRIu64 " accepted %" PRIu64 " fills %" PRIu64
	       " hydrations %" PRIu64 " evictions %" PRIu64 " write-backs %" PRIu64
	       " flush conflicts %" PRIu64 " hash checks %" PRIu64 " recon matched %" PRIu64
	       " transient %" PRIu64 " deferred %" PRIu64 " orders moved %" PRIu64 "/%" PRIu64 "\n",
	       seed, events_run, (double)now / 1e9, orders_sent, cancels_sent, deposits_sent,
	       me_accepted.len, fills, hydrations, evictions, writebacks, db_stats_conflicts,
	       hashes_compared, recon_matched, recon_transient, recon_deferred, moved_out, adopted);
	if (getenv("SIM_STATS") != NULL)
		for (uint32_t gi = 0; gi < OMS_GROUPS; gi++)
			for (int c = 0; c < OMS_C_COUNT; c++)
				if (oms_counter_get(leader_of(&groups[gi])->svc, c) != 0)
					printf("  oms %u %s %" PRIu64 "\n", groups[gi].shard,
					       oms_counter_name(c),
					       oms_counter_get(leader_of(&groups[gi])->svc, c));
	if (getenv("SIM_STATS") != NULL) {
		static const char *const names[] = {
			[EV_TICK] = "tick", [EV_RAFT] = "raft", [EV_DURABLE] = "durable",
			[EV_INGRESS] = "ingress", [EV_NOT_LEADER] = "not_leader",
			[EV_GW_REPLY] = "gw_reply", [EV_DB_DONE] = "db_done",
			[EV_ADMIN_REPLY] = "admin_reply", [EV_WORKLOAD] = "workload",
			[EV_FAULT] = "fault", [EV_RESTART] = "restart", [EV_HEAL] = "heal",
			[EV_GW_CONFIG] = "gw_config", [EV_ADMIN] = "admin"};
		for (uint32_t k = 1; k <= EV_ADMIN; k++)
			printf("  events %-12s %" PRIu64 "\n", names[k], ev_kind_count[k]);
	}
	return 0;
}

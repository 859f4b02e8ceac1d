/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shadow copy (docs/persist.md "Snapshots from a shadow copy"): a second instance of a
 * shard's service, kept on a thread of its own by applying the same committed messages, at
 * the same cluster times, that the shard lcore applies to the first. The services are
 * deterministic (ARCHITECTURE.md §3), so the copy is the state consensus's snapshot at an
 * index must hold, and a snapshot is serialised from it while the shard lcore goes on. The
 * lcore's share of a snapshot is fixing its index (cns_snapshot_begin) and, for every
 * message it applies, one copy into a single-producer single-consumer byte ring.
 *
 * Seeds. The copy equals the shard's service only from a seed on: at start (both fresh, or
 * both restored from the same snapshot), after the service restored a snapshot (an install
 * from the leader, the reload of the node's own base after a refused one), and after a
 * snapshot taken without the shadow because the copy was lost (a push found the ring full:
 * the thread fell behind by the whole ring). A seed is a ring position — every record pushed
 * after it follows the seed's base — and the base: the service bytes the service was
 * restored from, which the thread reads (they must stay unchanged while app_shadow_reading),
 * none (the copy already equals the service: both fresh), or one to come
 * (app_shadow_seed_base: a forked child still writes it).
 *
 * No DPDK here (unit-tested alone): the ring is plain memory and C11 atomics; the shard lcore
 * is the one producer, the shadow's thread the one consumer.
 */
#ifndef OMSD_APP_SHADOW_H
#define OMSD_APP_SHADOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app/app_say.h"

struct svc_ops;
struct wire_msg_hdr;

#define APP_SHADOW_RING_MIN (UINT64_C(1) << 18) /* smallest ring: twice the largest record */
#define APP_SHADOW_DRAIN_MAX 4096u /* records applied between looks at the jobs */

enum app_shadow_counter {
	APP_SHADOW_RECORDS,   /* messages and ticks taken from the ring (applied, unless the
				* copy is broken: then only skipped) */
	APP_SHADOW_SEEDS,     /* seeds taken (a base restored, or the copy kept as it was) */
	APP_SHADOW_SNAPSHOTS, /* snapshots serialised from the copy */
	APP_SHADOW_FAILED,    /* snapshot jobs answered with nothing: superseded by a seed,
				* the buffer too small, the copy broken */
	APP_SHADOW_BROKEN,    /* bases the copy refused (it waits for the next seed) */
	APP_SHADOW_LOST,      /* times the ring was full (or app_shadow_drop): the copy was
				* lost until a seed */
	APP_SHADOW_LAG_MAX,   /* the most bytes queued behind the thread (producer's view) */
	APP_SHADOW_SERIALIZE_MAX_NS, /* the longest serialisation on the thread */
	APP_SHADOW_COUNT
};

struct app_shadow;

/* What the thread says (from the thread): crit for what will not mend itself. */
typedef app_say_fn app_shadow_say_fn;

struct app_shadow_conf {
	const struct svc_ops *ops; /* the service's operations */
	void *svc;                 /* the copy: initialised with the service's limits; the
				    * shadow applies to it and serialises it, nothing else may */
	size_t ring_bytes;         /* rounded up to a power of two, at least
				    * APP_SHADOW_RING_MIN */
	bool thread;               /* run a thread (else the caller calls app_shadow_work) */
	bool hash;                 /* with each snapshot, the copy's state hash (a check) */
	/* With each snapshot, a few counts of the copy's state that cost nothing to read (a
	 * check in every build; NULL: none). */
	uint64_t (*digest)(const void *svc);
	uint64_t idle_ns;          /* the thread's first sleep when it finds nothing to do
				    * (>= 1), doubled while idle up to 16 times it */
	const void *cpus;          /* the thread's CPU set (a cpu_set_t), NULL: inherited */
	size_t cpus_size;          /* its size */
	app_shadow_say_fn *say;    /* may be NULL */
	void *say_ctx;
};

/* A shadow over conf->svc, equal to the service as both stand now (a seed with no base at
 * ring position 0). 0, -ENOMEM, or the error of starting the thread. */
int app_shadow_create(struct app_shadow **out, const struct app_shadow_conf *conf);
/* Stop the thread (the serialisation or restore it is in ends first) and free the ring. */
void app_shadow_destroy(struct app_shadow *sh);

/* --- The producer (the shard lcore) ------------------------------------------------------
 * Pushes are seen by the thread at the next app_shadow_publish (a job posted publishes). */

/* Queue the message the service was just given at (index, now_ns) / the tick. false: the
 * copy is lost (the ring is full now, or was since the last seed); nothing is queued. */
bool app_shadow_push_apply(struct app_shadow *sh, uint64_t index, uint64_t now_ns,
			   const struct wire_msg_hdr *msg);
bool app_shadow_push_tick(struct app_shadow *sh, uint64_t index, uint64_t now_ns);
void app_shadow_publish(struct app_shadow *sh);
/* Lost since the last seed (pushes dropped), or the copy refused its base. */
bool app_shadow_lost(const struct app_shadow *sh);
/* The thread reads a seed's base now: it must stay unchanged. */
bool app_shadow_reading(const struct app_shadow *sh);
/* The copy follows the last seed and can serialise: not lost, its base taken. */
bool app_shadow_ready(const struct app_shadow *sh);

/* Seed: the records pushed from now on follow base (len service bytes, as svc_ops.restore
 * takes them; NULL with len 0: the copy equals the service as it stands). Waits while the
 * thread still reads the previous seed's base (a seed right after another: installs). */
void app_shadow_seed(struct app_shadow *sh, const void *base, size_t len);
/* Seed with the base to come: the thread holds the records until app_shadow_seed_base. */
void app_shadow_seed_later(struct app_shadow *sh);
/* The base of the last app_shadow_seed_later; NULL: there will be none (the copy is lost
 * until the next seed). */
void app_shadow_seed_base(struct app_shadow *sh, const void *base, size_t len);

/* Serialise the copy as it is after every record pushed so far (the applied state at
 * index) into buf (cap bytes; unchanged by anyone else until the job is collected).
 * -EBUSY: a job is out. */
int app_shadow_snap_post(struct app_shadow *sh, uint64_t index, void *buf, size_t cap);
/* A job is out and not collected. */
bool app_shadow_snap_busy(const struct app_shadow *sh);
/* Collect the job: -EINPROGRESS, or 0 with *len the bytes written (0: failed — a seed came
 * first, the buffer was too small, the copy was broken or ahead of index). */
int app_shadow_snap_poll(struct app_shadow *sh, size_t *len);
/* With conf.hash: svc_ops.state_hash of the copy the last collected snapshot holds. */
uint64_t app_shadow_snap_hash(const struct app_shadow *sh);
/* With conf.digest: its value for the copy the last collected snapshot holds. */
uint64_t app_shadow_snap_digest(const struct app_shadow *sh);
/* The copy is wrong (its snapshot does not check out): lost until the next seed. */
void app_shadow_drop(struct app_shadow *sh);

/* --- The consumer -------------------------------------------------------------------------
 * Take a new seed, apply up to APP_SHADOW_DRAIN_MAX records, serialise a due job. Returns
 * the work done (0: nothing). The thread calls it; without one, the caller. */
uint32_t app_shadow_work(struct app_shadow *sh);

/* Counters (single writer each; read them relaxed from anywhere). */
uint64_t app_shadow_counter(const struct app_shadow *sh, enum app_shadow_counter c);
/* Bytes queued and not yet applied. */
uint64_t app_shadow_queued(const struct app_shadow *sh);
extern const char *const app_shadow_counter_names[APP_SHADOW_COUNT];

#endif /* OMSD_APP_SHADOW_H */

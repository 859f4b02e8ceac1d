/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oms — the user-shard service: hot-user actors with eviction, balances and reservations,
 * the OMS side of the credit-reservation saga, and routing authority (ARCHITECTURE.md §5–7,
 * seed "Sharding the OMS by User").
 *
 * A pure deterministic state machine. It never reads a clock, never allocates, never does
 * I/O: it is initialised in caller memory from a limits struct, it is given committed
 * messages with the cluster time of their log entry, and it writes egress messages to a
 * sink (common/service.h). Every member of an OMS shard produces the same egress; the host
 * drops it on followers.
 *
 * Ingress: NEW_ORDER, CANCEL, AMEND, CANCEL_REPLACE (clients); ME_EVENT, ME_RESULT,
 * OPEN_ORDERS_SNAPSHOT (bridge); HYDRATE_USER, FLUSH_COMPLETE (persister); ROUTING_CONFIG,
 * SYMBOL_CONFIG, SYMBOL_STATUS, KILL_SWITCH, TRANSFER, WHALE_PIN, USER_ADMIN, TICK (admin).
 * Egress: ACK, NAK, EXEC_REPORT → WIRE_DEST_CLIENT; SUBMIT, CANCEL_TO_ME, AMEND_TO_ME,
 * REPLACE_TO_ME, STREAM_ACK, REPLAY_REQUEST, OPEN_ORDERS_QUERY → WIRE_DEST_ME;
 * HYDRATE_REQUEST, BEGIN_DEHYDRATE → WIRE_DEST_PERSIST; ADMIN_REPLY → WIRE_DEST_ADMIN.
 */
#ifndef OMSD_OMS_OMS_H
#define OMSD_OMS_OMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/service.h"
#include "common/wire.h"

#define OMS_TIERS_MAX 4 /* rate-limit tiers (wire_user_state.tier) */

/* Token bucket of one tier: rate_per_s tokens per second of cluster time, at most burst.
 * rate_per_s == 0 means unlimited. */
struct oms_tier {
	uint32_t rate_per_s; /* refill, requests per second */
	uint32_t burst;      /* bucket size, requests */
};

/* Everything the shard preallocates. Sizes are fixed at init; nothing grows later. */
struct oms_limits {
	uint16_t shard_id;              /* this OMS shard (orderId prefix, stream id) */
	uint16_t me_shards_max;         /* ME shard ids are 0..me_shards_max-1 */
	uint32_t users_max;             /* resident cap (resident + hydrating actors) */
	uint32_t flush_headroom;        /* extra slots for actors whose flush is in flight */
	uint32_t wait_max;              /* cold users whose messages wait for room in the cap
					   (WAITING actors, docs/oms.md "Admission") */
	uint32_t wait_pad;              /* zero */
	uint32_t assets_per_user;       /* balance slots per actor, <= WIRE_BALANCES_MAX */
	uint32_t orders_max;            /* order + modify-request records over all users */
	uint32_t orders_per_user;       /* records per user (open-orders index bound) */
	uint32_t inflight_max;          /* PENDING sagas; over it new orders NAK BACKPRESSURE */
	uint32_t parked_max;            /* messages parked for hydration, all users */
	uint32_t parked_per_user;       /* client messages parked per user */
	uint32_t dedup_per_user;        /* (user, clientOrderId) window: outcomes kept per user */
	uint32_t symbols_max;           /* symbol configs */
	uint32_t fee_assets_max;        /* assets with a fee account */
	uint32_t kill_users_max;        /* users with an engaged kill-switch */
	uint32_t held_max;              /* out-of-order events held per stream */
	uint32_t sweep_evict_max;       /* K: evictions per TTL sweep */
	uint32_t sweep_scan_max;        /* actors looked at per sweep (and by the cap valve) */
	uint32_t drain_max;             /* non-owned users flushed per sweep */
	uint32_t drain_scan_max;        /* slots the drain cursor visits per sweep */
	uint32_t reconcile_users_max;   /* users queried per reconciliation sweep */
	uint32_t reconcile_scan_max;    /* slots the reconciliation cursor visits per sweep */
	uint32_t stream_ack_every;      /* events applied per STREAM_ACK (also sent on tick) */
	uint32_t hydrate_retries_max;   /* HYDRATE_REQUEST attempts (on ERROR, or OWNED while the
					   routing says we own the user), one per sweep, then NAK */
	uint32_t releases_max;          /* RELEASE_CLAIMs awaiting RELEASE_DONE (docs/fencing.md) */
	uint32_t writeback_max;         /* write-backs started per pass (docs/oms.md, Write-back) */
	uint64_t ttl_ns;                /* idle time before a flat user is dehydrated */
	uint64_t admit_wait_ns;         /* longest a WAITING user's client messages wait for room
					   before they are refused CAPACITY */
	uint64_t sweep_interval_ns;     /* eviction/drain sweep cadence, cluster time */
	uint64_t reconcile_interval_ns; /* reconciliation sweep cadence; 0 = off */
	uint64_t replay_interval_ns;    /* at most one REPLAY_REQUEST per stream per interval */
	uint64_t writeback_interval_ns; /* write-back pass cadence (dirty resident users flushed,
					   the actor kept); 0 = off */
	struct oms_tier tiers[OMS_TIERS_MAX]; /* rate limits by user tier */
};

struct oms;

/* Fill limits with working defaults for a small shard (tests, demo). */
void oms_limits_default(struct oms_limits *limits);
/* 0 if limits are usable, -EINVAL otherwise. */
int oms_limits_check(const struct oms_limits *limits);
/* Bytes of caller memory oms_init needs (8-byte aligned), 0 for unusable limits. */
size_t oms_footprint(const struct oms_limits *limits);
/* Initialise an empty shard in memory (oms_footprint bytes, 8-byte aligned). 0 or -EINVAL. */
int oms_init(struct oms **out, void *memory, const struct oms_limits *limits);

/* Apply one committed message at cluster time now_ns (non-decreasing). Refusals are NAKs
 * with a reason; malformed input is counted and never crashes. Due timers run first. */
void oms_apply(struct oms *oms, uint64_t now_ns, const struct wire_msg_hdr *msg,
	       struct svc_sink *sink);
/* Cluster time moved with no message: run due timers, batch stream acks, replay requests. */
void oms_tick(struct oms *oms, uint64_t now_ns, struct svc_sink *sink);

/* Snapshot: the whole state (resident actors with sagas and reservations, parked messages,
 * dedup window, stream positions and held events, routing and symbol config, fee accounts,
 * counters), byte-exact and deterministic. */
size_t oms_snapshot_size(const struct oms *oms);
size_t oms_snapshot(const struct oms *oms, void *buf, size_t cap); /* bytes, 0 if cap small */
int oms_restore(struct oms *oms, const void *buf, size_t len);     /* 0 or -EINVAL (reset) */
uint64_t oms_state_hash(const struct oms *oms);

extern const struct svc_ops oms_svc_ops;

/* Work-queue rebuild after failover. Each callback gets a freshly built message, identical
 * to the one emitted when the work started. Return the number of messages produced. */
typedef void(oms_msg_fn)(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg);
/* The bridge's queue: every PENDING saga (SUBMIT, REPLACE_TO_ME, CANCEL_TO_ME, AMEND_TO_ME),
 * users in recency order, each user's records in admission order. */
uint32_t oms_pending_foreach(const struct oms *oms, oms_msg_fn *fn, void *ctx);
/* The same walk, each message with the cluster time its saga began (the record's admission):
 * the bridge backs off per saga and reports the age of the oldest. */
typedef void(oms_saga_fn)(void *ctx, const struct wire_msg_hdr *msg, uint64_t began_ns);
uint32_t oms_pending_foreach_saga(const struct oms *oms, oms_saga_fn *fn, void *ctx);
/* The persister's queue: outstanding HYDRATE_REQUESTs and BEGIN_DEHYDRATEs (write-backs in
 * flight among them) and pending RELEASE_CLAIMs. */
uint32_t oms_persist_foreach(const struct oms *oms, oms_msg_fn *fn, void *ctx);

/* Inspection (tests, mgmt). */
enum oms_user_status {
	OMS_USER_ABSENT = 0,    /* not resident */
	OMS_USER_HYDRATING = 1, /* HydrateRequest outstanding, messages parked */
	OMS_USER_RESIDENT = 2,
	OMS_USER_FLUSHING = 3,  /* BeginDehydrate sent, waiting for FlushComplete */
	OMS_USER_WAITING = 4,   /* cold, messages parked until the cap has room */
};

struct oms_user_info {
	uint32_t status;        /* enum oms_user_status */
	uint32_t orders;        /* order + modify records */
	uint32_t sagas;         /* in flight: PENDING orders and modify requests */
	uint32_t live;          /* orders the ME accepted and not yet DONE */
	uint32_t reservations;  /* orders holding a reservation */
	uint32_t parked;        /* parked messages */
	uint32_t dirty;         /* 1: flushed state changed since the row was last known to hold it */
	uint32_t writing;       /* 1: a write-back is in flight */
	uint64_t epoch;         /* fencing epoch */
	uint64_t version;       /* database row version */
	uint64_t user_seq;      /* last orderId sequence */
	uint64_t egress_seq;    /* last per-user egress sequence */
	uint64_t last_active_ns;
};

int oms_user_get(const struct oms *oms, uint64_t user, struct oms_user_info *out); /* 0/-ENOENT */
/* Balance of a resident user: 0, or -ENOENT (not resident or asset absent: zeros). */
int oms_balance_get(const struct oms *oms, uint64_t user, uint32_t asset, int64_t *total,
		    int64_t *reserved);
/* Fees collected in asset (may be negative with rebates). */
int64_t oms_fees_get(const struct oms *oms, uint32_t asset);
/* Σ total of asset over resident users plus the fee account (conservation checks). A walk of
 * every actor slot: in tests and tools, not on an lcore with a large cache. */
int64_t oms_asset_sum(const struct oms *oms, uint32_t asset);
/* The same in slices, for a host that must bound each step: adds to sums[k] the total of
 * assets[k] (k < n) over the resident actors in slots [from, from + count), and returns the
 * next slot (oms_actor_slots() once past the last). The fee account is not included
 * (oms_fees_get). A whole pass equals oms_asset_sum less the fees only if nothing was
 * applied in between: the caller checks. */
uint32_t oms_asset_sums_slice(const struct oms *oms, const uint32_t *assets, uint32_t n,
			      uint32_t from, uint32_t count, int64_t *sums);
uint32_t oms_actor_slots(const struct oms *oms);
uint32_t oms_resident_count(const struct oms *oms); /* resident + flushing + hydrating */
uint32_t oms_waiting_count(const struct oms *oms);  /* cold users waiting for room */

/* The cache by state (gauges). O(1): idle, open and inflight are kept as actors change, not
 * counted by a walk of the resident list (the host reads them every 200 ms on the lcore that
 * serves orders, with up to a million residents). */
struct oms_cache_info {
	uint32_t idle;       /* resident, flat: evictable once idle for the TTL or under pressure */
	uint32_t open;       /* resident with open orders or reservations, nothing in flight */
	uint32_t inflight;   /* resident with a saga in flight */
	uint32_t flushing;   /* their eviction flush is in flight */
	uint32_t hydrating;  /* a HydrateRequest is out */
	uint32_t waiting;    /* waiting for room (no request out yet) */
	uint32_t parked;     /* messages parked (hydrating and waiting users) */
	uint32_t cap;        /* users_max */
};
void oms_cache_info(const struct oms *oms, struct oms_cache_info *out);
/* The cache's latency histograms (common/hist.h), cluster ns: park (a cold user's first
 * parked message to its install, waiting included), hydrate (its HYDRATE_REQUEST to its
 * install), writeback (a write-back's BEGIN_DEHYDRATE to its OK answer) and evict (an
 * eviction's BEGIN_DEHYDRATE to the drop; one cancelled by activity is not counted). */
struct hist;
const struct hist *oms_park_hist(const struct oms *oms);
const struct hist *oms_hydrate_hist(const struct oms *oms);
const struct hist *oms_writeback_hist(const struct oms *oms);
const struct hist *oms_evict_hist(const struct oms *oms);
uint32_t oms_inflight_count(const struct oms *oms);
uint32_t oms_parked_count(const struct oms *oms); /* messages parked now (hydrations pending) */
uint64_t oms_stream_next_seq(const struct oms *oms, uint16_t me_shard);
uint64_t oms_route_epoch(const struct oms *oms);
/* The owner this shard computes for user (pin, else HRW over ACTIVE shards). */
uint16_t oms_owner(const struct oms *oms, uint64_t user);
/* Read-only views for mgmt (routes show, symbols list, users show), and the copy a gateway
 * on another lcore routes by (app/app_route_pub.c). */
struct oms_route_info {
	uint64_t epoch;                                   /* 0: no routing config applied */
	uint32_t shard_count;
	uint32_t pin_count;
	struct wire_route_shard shards[WIRE_ROUTE_SHARDS_MAX]; /* as configured (state per shard) */
	struct wire_route_pin pins[WIRE_ROUTE_PINS_MAX];      /* whale pins */
	uint16_t self;                                    /* the shard the copy is of */
	uint16_t active_count;
	uint16_t active[WIRE_ROUTE_SHARDS_MAX];           /* ACTIVE shards, sorted */
};
void oms_route_get(const struct oms *oms, struct oms_route_info *out);
/* The owner of user by a copy oms_route_get made: what oms_owner answered when it was made
 * (one function computes both). */
uint16_t oms_route_info_owner(const struct oms_route_info *ri, uint64_t user);
/* The routing drain (users moving away after a config change) is still running. */
bool oms_route_draining(const struct oms *oms);

struct oms_symbol_info {
	uint32_t symbol;
	uint16_t me_shard;
	uint8_t status;         /* enum wire_symbol_status */
	uint8_t killed;         /* symbol kill-switch engaged on this OMS shard */
	uint32_t base_asset;
	uint32_t quote_asset;
	int16_t maker_fee_bps;
	int16_t taker_fee_bps;
	uint32_t reserved;
};
/* Symbols configured, numbered 0..count-1 in configuration order. */
uint32_t oms_symbol_count(const struct oms *oms);
int oms_symbol_at(const struct oms *oms, uint32_t i, struct oms_symbol_info *out); /* 0/-ENOENT */
int oms_symbol_get(const struct oms *oms, uint32_t symbol, struct oms_symbol_info *out);
/* Users with an actor here (hydrating, resident or flushing), in slot order from *cursor
 * (start at 0): up to max written to users, *cursor advanced past the last slot looked at
 * (UINT32_MAX once every slot was seen). Returns users written. Visits at most 4 * max + 64
 * slots per call (bounded work on the shard lcore). */
uint32_t oms_users_list(const struct oms *oms, uint32_t *cursor, uint64_t *users, uint32_t max);
/* A user kill-switch is engaged on this shard. */
bool oms_user_killed(const struct oms *oms, uint64_t user);

/* Check the internal invariants (flat counters, Σ reservations, lists, the cache's gauges
 * against a walk). A walk of every slot: tests and tools. 0 or -EFAULT. */
int oms_check_invariants(const struct oms *oms);

/* Counters: single-writer, part of the state (hence the snapshot). ALARM_* are impossible
 * states an operator must look at. */
#define OMS_COUNTERS(X)                                                                    \
	X(MSGS, "msgs")                                                                    \
	X(BAD_MSGS, "bad_msgs")                                                            \
	X(ORDERS_IN, "orders_in")                                                          \
	X(ACKS, "acks")                                                                    \
	X(NAKS, "naks")                                                                    \
	X(DUPLICATES, "duplicates")                                                        \
	X(STALE_REQUESTS, "stale_requests")                                                \
	X(EXEC_REPORTS, "exec_reports")                                                    \
	X(SUBMITS, "submits")                                                              \
	X(MODIFIES, "modifies")                                                            \
	X(PARKED, "parked")                                                                \
	X(PARKED_COPIES, "parked_copies") /* retransmits of a parked request: dropped */   \
	X(HYDRATE_REQUESTS, "hydrate_requests")                                            \
	X(HYDRATIONS, "hydrations")                                                        \
	X(HYDRATE_AHEAD, "hydrate_ahead")                                                  \
	X(HYDRATE_DUP, "hydrate_dup")                                                      \
	X(HYDRATE_LATE, "hydrate_late")                                                    \
	X(ALARM_HYDRATE_LATE_UNRELEASED, "alarm_hydrate_late_unreleased")                  \
	X(HYDRATE_OWNED, "hydrate_owned")                                                  \
	X(HYDRATE_UNKNOWN, "hydrate_unknown")                                              \
	X(HYDRATE_ERRORS, "hydrate_errors")                                                \
	X(DEHYDRATES, "dehydrates")                                                        \
	X(VALVE_DEHYDRATES, "valve_dehydrates")                                            \
	X(TTL_DEHYDRATES, "ttl_dehydrates")                                                \
	X(ADMIT_WAITS, "admit_waits")                                                      \
	X(ADMIT_PROMOTED, "admit_promoted")                                                \
	X(ADMIT_TIMEOUTS, "admit_timeouts")                                                \
	X(ADMIT_QUEUE_FULL, "admit_queue_full")                                            \
	X(ADMIT_WAIT_NS, "admit_wait_ns")                                                  \
	X(EVICTIONS, "evictions")                                                          \
	X(FLUSH_CANCELLED, "flush_cancelled")                                              \
	X(FLUSH_STALE, "flush_stale")                                                      \
	X(FLUSH_ERRORS, "flush_errors")                                                    \
	X(RELEASES, "releases")                                                            \
	X(RELEASES_DONE, "releases_done")                                                  \
	X(RELEASE_RETRIES, "release_retries")                                              \
	X(HYDRATE_RETRIES, "hydrate_retries")                                              \
	X(SWEEPS, "sweeps")                                                                \
	X(SWEEP_TOUCHED, "sweep_touched")                                                  \
	X(DRAINED, "drained")                                                              \
	X(NOT_OWNER_RESIDENT, "not_owner_resident")                                        \
	X(REBINDS_SENT, "rebinds_sent")                                                    \
	X(ORDERS_MOVED_OUT, "orders_moved_out")                                            \
	X(ORDERS_ADOPTED, "orders_adopted")                                                \
	X(ORDERS_REPOINTED, "orders_repointed") /* live, to a moved symbol's new ME */     \
	X(WRITEBACKS, "writebacks")                                                        \
	X(WRITEBACKS_OK, "writebacks_ok")                                                  \
	X(EVENTS, "events")                                                                \
	X(EVENTS_DUP, "events_dup")                                                        \
	X(EVENTS_HELD, "events_held")                                                      \
	X(EVENTS_HELD_DROPPED, "events_held_dropped")                                      \
	X(EVENTS_BLOCKED, "events_blocked")                                                \
	X(EVENTS_PARKED, "events_parked")                                                  \
	X(EVENTS_FOREIGN, "events_foreign")                                                \
	X(REPLAY_REQUESTS, "replay_requests")                                              \
	X(STREAM_ACKS, "stream_acks")                                                      \
	X(RESULTS, "results")                                                              \
	X(FILLS, "fills")                                                                  \
	X(FEE_CAPPED, "fee_capped")                                                        \
	X(RECON_QUERIES, "recon_queries")                                                  \
	X(RECON_SNAPSHOTS, "recon_snapshots")                                              \
	X(RECON_DEFERRED, "recon_deferred")                                                \
	X(RECON_MATCHED, "recon_matched")                                                  \
	X(RECON_TRANSIENT, "recon_transient")                                              \
	X(TRANSFERS, "transfers")                                                          \
	X(XFER_LOOKUPS, "xfer_lookups")                                                    \
	X(XFER_FOUND, "xfer_found")                                                        \
	X(XFER_LOOKUP_STALE, "xfer_lookup_stale")                                          \
	X(XFER_PIN_FULL, "xfer_pin_full")                                                  \
	X(ADMIN, "admin")                                                                  \
	X(ALARM_FLUSH_CONFLICT, "alarm_flush_conflict")                                    \
	X(ALARM_UNKNOWN_ORDER, "alarm_unknown_order")                                      \
	X(ALARM_EVENT_ORDER, "alarm_event_order")                                          \
	X(ALARM_ORPHAN_FILL, "alarm_orphan_fill")                                          \
	X(ALARM_SETTLE_SHORTFALL, "alarm_settle_shortfall")                                \
	X(ALARM_OVERFLOW, "alarm_overflow")                                                \
	X(ALARM_FOREIGN_USER, "alarm_foreign_user")                                        \
	X(ALARM_RECON_PHANTOM, "alarm_recon_phantom")                                      \
	X(ALARM_RECON_UNKNOWN, "alarm_recon_unknown")                                      \
	X(ALARM_RECON_LEAK, "alarm_recon_leak")                                            \
	X(ALARM_RECON_MISMATCH, "alarm_recon_mismatch")                                    \
	X(ALARM_BAD_STATE, "alarm_bad_state")

enum oms_counter {
#define OMS_COUNTER_ENUM(name, label) OMS_C_##name,
	OMS_COUNTERS(OMS_COUNTER_ENUM)
#undef OMS_COUNTER_ENUM
	OMS_C_COUNT,
};

uint64_t oms_counter_get(const struct oms *oms, enum oms_counter c);
const char *oms_counter_name(enum oms_counter c);
/* NAKs sent with a given reason (enum wire_reason). */
uint64_t oms_nak_count(const struct oms *oms, uint16_t reason);

#endif

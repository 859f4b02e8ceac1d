/* SPDX-License-Identifier: Apache-2.0 */
/*
 * oms private header: the state layout, shared by oms_*.c and the unit tests.
 *
 * Every record lives in a slab allocated from caller memory and is named by a uint32 index;
 * there are no pointers inside the state (only in struct oms's table bases, which init and
 * restore recompute). Records have no implicit padding (static_asserts below) and are
 * zeroed on allocation, so the snapshot is byte-exact.
 */
#ifndef OMSD_OMS_OMS_INT_H
#define OMSD_OMS_OMS_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/check.h"
#include "common/hist.h"
#include "common/hrw.h"
#include "common/money.h"
#include "oms/oms.h"

#define OMS_NIL UINT32_MAX   /* no index */
#define OMS_PARKED_WORDS 15  /* 120 bytes: the largest message we park (wire_me_event) */
static_assert(sizeof(struct wire_me_event) == OMS_PARKED_WORDS * 8, "parked slot size");
static_assert(sizeof(struct wire_new_order) <= OMS_PARKED_WORDS * 8, "parked new order");
static_assert(sizeof(struct wire_transfer) <= OMS_PARKED_WORDS * 8, "parked transfer");

/* Hash-table key kinds (one open-addressing table serves every index). */
enum oms_tag {
	OMS_TAG_EMPTY = 0,
	OMS_TAG_USER = 1,   /* a = user → actor slot */
	OMS_TAG_ORDER = 2,  /* a = user, b = user_seq → order slot */
	OMS_TAG_RELEASE = 3,   /* a = user, b = epoch → pending release index */
	OMS_TAG_RESERVED4 = 4,
	OMS_TAG_RESERVED5 = 5, /* was SYMBOL: symbols have an index of their own (symbol_index) */
	OMS_TAG_KILL = 6,   /* a = user: kill-switch engaged */
};

struct oms_entry {
	uint64_t a;   /* key part 1 */
	uint64_t b;   /* key part 2 */
	uint32_t val; /* slot / index */
	uint32_t tag; /* enum oms_tag; EMPTY marks a free entry */
};

enum oms_actor_state {
	OMS_A_FREE = 0,
	OMS_A_HYDRATING = 1, /* HydrateRequest outstanding; messages parked */
	OMS_A_RESIDENT = 2,  /* on the LRU list */
	OMS_A_FLUSHING = 3,  /* BeginDehydrate sent; still in RAM until FlushComplete */
	OMS_A_WAITING = 4,   /* cold, its messages parked until the cap has room (no request
				out yet); last_active_ns is when it began to wait */
};


#define OMS_AF_CONFLICT 0x01  /* last flush lost a CAS: keep resident until an operator acts */
#define OMS_AF_EVICT_REQ 0x02 /* USER_ADMIN asked to evict/migrate once flat */
#define OMS_AF_RETRY 0x04     /* HYDRATING: ask again at the next sweep */
#define OMS_AF_WB 0x08        /* RESIDENT: the outstanding flush (flush_epoch) is a write-back */
#define OMS_AF_DIRTY 0x10     /* on the dirty list (oms_wb_wanted): wb_prev/wb_next are links */
#define OMS_AF_MOVING 0x20    /* RESIDENT: moving to move_to with its open orders; not served
				 here until it is flushed and dropped, whatever routing says
				 meanwhile (oms_actor_move_out, docs/fencing.md) */
#define OMS_AF_HANDED 0x40    /* MOVING: an order was adopted by move_to (a MOVED is in): the
				 drop hands the claim to move_to instead of freeing it */

/* A hot-user actor: the per-user cache over the database row (seed: "What a user-actor
 * owns"). Balances live in a parallel array (assets_per_user slots per actor). */
struct oms_actor {
	uint64_t user;           /* account id */
	uint64_t epoch;          /* fencing epoch: from HydrateUser, bumped per flush attempt
				    and on cancel-on-activity */
	uint64_t version;        /* database row version (CAS expectation of the next flush) */
	uint64_t user_seq;       /* last orderId sequence used (persisted) */
	uint64_t egress_seq;     /* last per-user egress sequence */
	uint64_t last_active_ns; /* cluster time of the last activity (LRU stamp) */
	int64_t tokens;          /* rate-limit bucket, nano-requests */
	uint64_t tokens_ns;      /* cluster time of the last refill */
	uint64_t flush_epoch;    /* epoch of a BeginDehydrate whose FlushComplete is not in
				    yet (0: none); no new flush starts until it is */
	uint64_t change_gen;     /* bumped by every change of the flushed state (balances,
				    user_seq, recent window): oms_actor_changed */
	uint64_t clean_gen;      /* the change_gen the database row is known to hold */
	uint64_t wb_gen;         /* change_gen when the outstanding flush was built */
	uint64_t xfer_id_max;    /* highest transfer_id recorded for the user (persisted): a
				    larger id was never applied and needs no lookup */
	uint64_t cl_ord_floor;   /* highest clientOrderId the window forgot (persisted): a
				    request at or below it that the window does not hold is
				    refused STALE_REQUEST (docs/oms.md, "Sessions, rate limits") */
	uint64_t owned_epoch;    /* the routing epoch under which this shard was last found to
				    own the user (oms_actor_owned; 0 with the epoch 0 owns all) */
	uint64_t since_ns;       /* HYDRATING / WAITING: cluster time its first message parked
				    (oms_core.park_hist); RESIDENT with a write-back out or
				    FLUSHING: when that flush began (wb_hist, evict_hist) */
	uint32_t prev;           /* state-list links (LRU, flushing or hydrating list) */
	uint32_t next;
	uint32_t order_head;     /* this user's order records, oldest first */
	uint32_t order_tail;
	uint32_t parked_head;    /* parked messages, log order */
	uint32_t parked_tail;
	uint32_t parked_count;   /* parked messages (client + ME) */
	uint32_t order_count;    /* order + modify records */
	uint32_t sagas;          /* in flight: PENDING orders and modify requests */
	uint32_t live;           /* ME-accepted orders not yet DONE (resting or filling) */
	uint32_t reservations;   /* orders holding reserved > 0 */
	uint32_t dedup_head;     /* oldest entry of this user's dedup ring */
	uint32_t dedup_count;    /* entries in it */
	uint32_t wb_prev;        /* dirty-list links (valid while OMS_AF_DIRTY) */
	uint32_t wb_next;
	uint8_t state;           /* enum oms_actor_state */
	uint8_t tier;            /* rate-limit tier */
	uint8_t flags;           /* OMS_AF_* */
	uint8_t hydrate_tries;   /* HydrateRequests sent for the current miss */
	uint16_t move_to;        /* OMS_AF_MOVING: the shard its orders are re-bound to */
	uint16_t pad16;
	uint32_t pad32;
};
static_assert(sizeof(struct oms_actor) == 17 * 8 + 15 * 4 + 4, "oms_actor has no padding");

/* Serving: RESIDENT or FLUSHING (a flushing actor is still in RAM, and activity cancels the
 * flush). The others only park. */
static inline bool
oms_actor_serving(const struct oms_actor *a)
{
	return a->state == OMS_A_RESIDENT || a->state == OMS_A_FLUSHING;
}

struct oms_balance {
	uint32_t asset;   /* 0 marks an unused slot */
	uint32_t pad;     /* zero */
	int64_t total;    /* owned, minor units, >= 0 */
	int64_t reserved; /* Σ reservations of open orders in this asset, 0 <= reserved <= total */
};

enum oms_order_kind {
	OMS_K_ORDER = 1,  /* an order (a replacement is an order with target_seq != 0) */
	OMS_K_CANCEL = 2, /* a cancel request in flight */
	OMS_K_AMEND = 3,  /* an amend-down request in flight */
};

enum oms_order_state {
	OMS_O_FREE = 0,
	OMS_O_PENDING = 1, /* saga in flight: sent to the ME, no first event or REJECTED yet */
	OMS_O_LIVE = 2,    /* accepted by the ME: resting or filling, until DONE */
};

/* One record of the open-orders index and the saga (seed: credit-reservation saga). */
struct oms_order {
	uint64_t user_seq;        /* orderId = {shard, user, user_seq} */
	uint64_t cl_ord_id;       /* client's id of this order / request */
	uint64_t target_seq;      /* modify / replacement: the target order's user_seq */
	uint64_t mod_seq;         /* order: user_seq of its modify request in flight, or 0 */
	int64_t px;               /* limit price (0 market) */
	int64_t qty;              /* order qty; amend: new total qty */
	int64_t budget;           /* market buy: notional budget sent to the ME */
	int64_t quote_qty;        /* market buy: the client's spend (the reservation) */
	int64_t leaves;           /* live qty as last reported by the ME */
	int64_t cum_qty;          /* filled qty */
	int64_t reserved;         /* remaining reservation (quote for buys, base for sells) */
	int64_t notional_maker;   /* cumulative maker notional (fee is charged cumulatively) */
	int64_t notional_taker;   /* cumulative taker notional */
	uint64_t expire_ns;       /* GTD */
	uint64_t last_seq;        /* stream seq of the last event applied to it */
	uint64_t recon_req;       /* reconciliation request that last listed it */
	uint64_t saga_ns;         /* cluster time the record was admitted (its saga began), or
				     its move began (moving) */
	uint32_t actor;           /* owning actor slot */
	uint32_t symbol;          /* instrument */
	uint32_t res_asset;       /* asset reserved (quote for buys, base for sells) */
	uint32_t recv_asset;      /* asset a fill credits */
	uint32_t prev;            /* per-user list */
	uint32_t next;
	uint8_t kind;             /* enum oms_order_kind */
	uint8_t state;            /* enum oms_order_state */
	uint8_t side;             /* enum wire_side */
	uint8_t ord_type;         /* enum wire_ord_type */
	uint8_t tif;              /* enum wire_tif */
	uint8_t stp;              /* enum wire_stp */
	uint16_t me_shard;        /* ME shard it was sent to */
	uint16_t oid_shard;       /* the OMS shard its orderId names: this one, or the shard it
				     was adopted from (a user's move, oms_actor_move_out) */
	uint16_t target_shard;    /* a modify or replacement: its target's oid_shard */
	uint8_t moving;           /* a live order whose REBIND_TO_ME is out: its MOVED ends it
				     here (re-sent by the bridge until then) */
	uint8_t pad[3];
};
static_assert(sizeof(struct oms_order) == 18 * 8 + 6 * 4 + 8, "oms_order has no padding");

/* The OMS shard an order's orderId names. */
static inline uint16_t
oms_order_oid_shard(const struct oms *oms, const struct oms_order *o);

/* A message parked for a user being hydrated. */
struct oms_parked {
	uint32_t next;                    /* FIFO link */
	uint16_t len;                     /* message bytes; 0 marks a free slot */
	uint16_t pad;                     /* zero */
	uint64_t msg[OMS_PARKED_WORDS];   /* the message, verbatim */
};

#define OMS_DEDUP_ORDER 1 /* new order / cancel / amend / replace */
#define OMS_DEDUP_XFER 2  /* transfer */

#define OMS_DEDUP_F_PINNED 0x01 /* a transfer outcome not yet known to be in the database: it
				   never leaves the window (docs/oms.md, "Transfers") */

/* One entry of a user's (clientOrderId | transfer_id) dedup window: the original outcome.
 * The window lives with the actor (session state, seed: "what a user-actor owns"), so the
 * check touches no cache line the order does not already need. */
struct oms_dedup {
	uint64_t id;        /* cl_ord_id or transfer_id */
	uint64_t user_seq;  /* orders: ACKed: the orderId's second word (shard << 48 | seq), 0:
			       NAK. transfers: the balance total the original reply carried */
	uint64_t time_ns;   /* orders: cluster time of the original outcome. transfers: the
			       shard's epoch counter when it was recorded, so a flush drawn
			       later (a larger epoch) is known to carry it */
	uint64_t content;   /* orders: hash of the request (a reused id with other content is
			       refused), 0 unknown. transfers: the amount, 0 unknown */
	uint16_t reason;    /* NAK reason, NONE for an ACK */
	uint8_t kind;       /* OMS_DEDUP_*; 0 marks a free slot */
	uint8_t flags;      /* OMS_DEDUP_F_* */
	uint32_t asset;     /* transfers: the asset, 0 unknown; orders: 0 */
};
static_assert(sizeof(struct oms_dedup) == 40, "oms_dedup has no padding");

/* Unflushed (pinned) transfer outcomes one user may hold: a flush carries them all in
 * wire_user_state.recent[] with room left for the newest order outcomes, and the window
 * always keeps an unpinned entry for a new order outcome to replace. */
static inline uint32_t
oms_xfer_pinned_max(const struct oms_limits *l)
{
	uint32_t half = l->dedup_per_user / 2;
	return half < WIRE_RECENT_MAX / 2 ? half : WIRE_RECENT_MAX / 2;
}

/* What a parked slot holds (struct oms_parked.pad). */
#define OMS_PARK_CLIENT 0      /* a client message waiting for its user's hydration */
#define OMS_PARK_EVENT 1       /* an ME event consumed in stream order, waiting likewise */
#define OMS_PARK_LOOKUP 2      /* a transfer that sent TRANSFER_LOOKUP and waits for it */
#define OMS_PARK_LOOKUP_DUP 3  /* a transfer with the same id waiting behind that lookup */
#define OMS_LOOKUP_EPOCH_WORD 5 /* msg[5]: the lookup's epoch (after the 40-byte transfer) */
#define OMS_LOOKUP_ORPHAN_WORD 6 /* msg[6]: 1 once the asking actor was dropped */
static_assert(sizeof(struct wire_transfer) == OMS_LOOKUP_EPOCH_WORD * 8, "lookup epoch word");

/* Transfers waiting for lookups, at most: a quarter of the parked slab, so hydration
 * parking (and parked ME events) keeps most of it. */
static inline uint32_t
oms_lookups_max(const struct oms_limits *l)
{
	return l->parked_max / 4 > 0 ? l->parked_max / 4 : 1;
}

#define OMS_SYM_KILLED 0x01

struct oms_symbol {
	uint32_t symbol;        /* instrument id */
	uint32_t base_asset;
	uint32_t quote_asset;
	uint32_t fee_slot;      /* index of the quote asset's fee account */
	int64_t tick;
	int64_t lot;
	int64_t min_qty;
	int64_t min_notional;
	int64_t base_unit;
	uint16_t me_shard;      /* owning ME shard: identifies its event stream */
	uint8_t status;         /* enum wire_symbol_status */
	uint8_t flags;          /* OMS_SYM_* */
	int16_t maker_fee_bps;
	int16_t taker_fee_bps;
};
static_assert(sizeof(struct oms_symbol) == 16 + 5 * 8 + 8, "oms_symbol has no padding");

/* A claim release sent after a drop, awaiting RELEASE_DONE (docs/fencing.md). */
struct oms_release {
	uint64_t user;     /* account */
	uint64_t epoch;    /* epoch of the flush that dropped the actor */
	uint32_t retry;    /* 1: the last answer was an error; re-sent by the sweep */
	uint8_t handoff;   /* 1: the claim goes to to_shard (a move with adopted orders) */
	uint8_t pad;
	uint16_t to_shard;
};

struct oms_fee {
	uint32_t asset;  /* 0 marks an unused slot */
	uint32_t pad;
	int64_t amount;  /* fees collected (rebates paid are negative) */
};

/* The event stream of this OMS shard kept by one ME shard. */
struct oms_stream {
	uint64_t next_seq;       /* next expected seq (streams start at 1) */
	uint64_t acked_seq;      /* last seq covered by a STREAM_ACK we sent */
	uint64_t replay_next_ns; /* no REPLAY_REQUEST before this cluster time */
	uint32_t held_count;     /* out-of-order events held, sorted by seq */
	uint32_t pad;
};

struct oms_list {
	uint32_t head;  /* most recent */
	uint32_t tail;  /* least recent */
	uint32_t count;
	uint32_t pad;
};

struct oms_route {
	uint64_t epoch;                                 /* routing epoch; 0 = unconfigured */
	uint32_t shard_count;                           /* entries in shards[] */
	uint32_t pin_count;                             /* entries in pins[] */
	uint32_t active_count;                          /* entries in active[] */
	uint32_t pad;
	uint16_t active[WIRE_ROUTE_SHARDS_MAX];         /* ACTIVE shards, sorted */
	struct wire_route_shard shards[WIRE_ROUTE_SHARDS_MAX];
	struct wire_route_pin pins[WIRE_ROUTE_PINS_MAX];
};

/* The drain of resident users this shard no longer owns or was asked to evict
 * (oms_drain_step); a uint32 in struct oms_core. */
enum oms_drain {
	OMS_DRAIN_IDLE = 0,      /* no such user is known to remain */
	OMS_DRAIN_REQUESTED = 1, /* some may remain: the next pass from slot 0 does not end it */
	OMS_DRAIN_SCANNING = 2,  /* a pass is running: one that finds none ends the drain */
};

/* All scalar state: one POD, serialised whole. */
struct oms_core {
	struct oms_limits limits;      /* as initialised (a snapshot must match them) */
	struct oms_list lru;           /* RESIDENT actors, MRU at head */
	struct oms_list flushing;      /* FLUSHING actors, oldest flush at tail */
	struct oms_list hydrating;     /* HYDRATING actors, oldest request at tail */
	struct oms_list waiting;       /* WAITING actors, the first to wait at tail */
	struct oms_list dirty;         /* actors a write-back may start for (oms_wb_wanted),
					  oldest change at tail; linked by wb_prev/wb_next */
	struct oms_route route;        /* routing authority */
	uint64_t now_ns;               /* last cluster time seen */
	uint64_t next_sweep_ns;        /* eviction/drain timer */
	uint64_t next_recon_ns;        /* reconciliation timer */
	uint64_t next_wb_ns;           /* write-back timer */
	uint64_t recon_req_seq;        /* last OPEN_ORDERS_QUERY req_id */
	uint64_t recon_part_req;       /* snapshot whose parts are being applied (0: none) */
	uint64_t recon_floor_req;      /* the last req_id asked before a symbol's routing switch
					  re-pointed live orders: no phantom pass for a snapshot
					  at or below it (oms_route.c repoint) */
	uint64_t epoch_seq;            /* last fencing epoch drawn (one counter per shard) */
	uint64_t counters[OMS_C_COUNT];
	uint64_t naks_by_reason[WIRE_REASON_MAX];
	uint32_t actor_free_count;     /* entries in actor_free[] */
	uint32_t order_free_count;
	uint32_t parked_free_count;
	uint32_t order_used;           /* records in use */
	uint32_t parked_used;          /* parked messages */
	uint32_t inflight;             /* PENDING sagas over all users */
	uint32_t moving;               /* live orders with a REBIND_TO_ME out (oms_order.moving) */
	uint32_t admit_due;            /* something that may make room happened: the pump runs
					  (oms_admit_pump) after the message if a user waits */
	uint32_t symbol_count;
	uint32_t kill_count;
	uint32_t drain_cursor;         /* next actor slot the drain scan visits */
	uint32_t drain;                /* enum oms_drain: the drain of users we do not keep */
	uint32_t drain_found;          /* such users seen in the current pass */
	uint32_t recon_cursor;         /* next actor slot the reconciliation scan visits */
	uint32_t release_count;        /* pending releases in releases[] */
	uint32_t recon_part_next;      /* the part of recon_part_req expected next */
	uint32_t wb_inflight;          /* write-backs whose FLUSH_COMPLETE is not in yet */
	uint32_t lookup_count;         /* parked transfers waiting for TRANSFER_FOUND */
	uint32_t lookup_head;          /* their FIFO through oms_parked.next, log order */
	uint32_t lookup_tail;
	/* The cache's latencies in cluster time (docs/oms.md "Admission"): a cold user's first
	 * parked message to its install (waiting included), and its HYDRATE_REQUEST to its
	 * install (the persister's queue, PostgreSQL and two log commits); a write-back's
	 * BEGIN_DEHYDRATE to its OK answer, and an eviction's to the drop (not counted when
	 * activity cancels it). */
	struct hist park_hist;
	struct hist hydrate_hist;
	struct hist wb_hist;
	struct hist evict_hist;
};
static_assert(sizeof(struct oms_limits) == 184, "oms_limits has no padding");

static_assert(sizeof(struct oms_route) == 984, "oms_route has no padding");

struct oms {
	struct oms_core c;            /* scalar state */
	uint32_t actor_slots;         /* users_max + flush_headroom + wait_max */
	uint32_t table_mask;          /* index table size - 1 (users, orders, symbols, kills) */
	/* The cache's gauges kept as the actors change (oms_cache_info: idle, open, inflight
	 * without a walk of the resident list). Derived, not state: outside oms_core, so not
	 * in the snapshot or the hash; oms_reset zeroes them, restore recounts them, and
	 * oms_check_invariants recounts them from the records. */
	uint32_t users_ordered;       /* actors holding an order record (order_count > 0) */
	uint32_t users_in_saga;       /* actors with a saga in flight (sagas > 0) */
	uint32_t order_hint;          /* the table entry oms_order_find_hinted last found an
					 order at: oms_order_free's removal looks there first and
					 checks the key, so a stale hint costs a compare. Scratch:
					 never state, never read for anything else */
	uint32_t pad_hint;            /* zero */
	uint64_t timers_due_ns;       /* the earliest deadline of the timers that are on
					 (next_sweep_ns, next_recon_ns, next_wb_ns): run_timers
					 looks at them only from then on. Derived, like the two
					 above: oms_reset sets 0, so the next message recomputes it */
	struct oms_actor *actors;     /* [actor_slots] */
	struct oms_balance *balances; /* [actor_slots * assets_per_user] */
	uint32_t *actor_free;         /* free-slot stack [actor_slots] */
	struct oms_order *orders;     /* [orders_max] */
	uint32_t *order_free;         /* [orders_max] */
	struct oms_parked *parked;    /* [parked_max] */
	uint32_t *parked_free;        /* [parked_max] */
	struct oms_dedup *dedup;      /* [actor_slots * dedup_per_user]: per-user rings */
	uint64_t *dedup_ids;          /* the same rings' ids only: one cache line to scan */
	struct oms_symbol *symbols;   /* [symbols_max] */
	uint32_t *symbol_index;       /* [symbol_index_mask + 1]: symbol id → slot + 1 (0: empty),
					 at most half full; rebuilt by restore like the table */
	uint32_t symbol_index_mask;
	uint32_t symbol_index_shift;  /* 32 - log2(symbol_index_mask + 1) */
	struct oms_fee *fees;         /* [fee_assets_max] */
	struct oms_stream *streams;   /* [me_shards_max] */
	struct wire_me_event *held;   /* [me_shards_max * held_max] */
	uint64_t *kills;              /* users with a kill-switch, [kill_count] in log order */
	struct oms_release *releases; /* pending claim releases, [release_count] */
	struct oms_entry *table;      /* [table_mask + 1]: the hot index, kept small */
};

/* docs/fencing.md: epochs come from one counter per shard, so they are unique and increasing
 * across every incarnation of every actor on this shard. */
static inline uint64_t
oms_epoch_next(struct oms *oms)
{
	return ++oms->c.epoch_seq;
}

/* ---- oms_table.c: one open-addressing (linear probing) table for every index ---- */
static inline uint64_t
oms_tab_hash(uint32_t tag, uint64_t a, uint64_t b)
{
	uint64_t h = a * UINT64_C(0x9e3779b97f4a7c15) ^ b * UINT64_C(0xc2b2ae3d27d4eb4f) ^
		     (uint64_t)tag * UINT64_C(0x165667b19e3779f9);
	h ^= h >> 29;
	h *= UINT64_C(0xbf58476d1ce4e5b9);
	h ^= h >> 32;
	return h;
}

static inline struct oms_entry *
oms_tab_of(const struct oms *oms, uint32_t tag, uint32_t *mask)
{
	(void)tag;
	*mask = oms->table_mask;
	return oms->table;
}

/* The entry holding (tag, a, b), or OMS_NIL. */
static inline uint32_t
oms_tab_find_at(const struct oms *oms, uint32_t tag, uint64_t a, uint64_t b)
{
	uint32_t mask;
	const struct oms_entry *t = oms_tab_of(oms, tag, &mask);
	uint32_t i = (uint32_t)oms_tab_hash(tag, a, b) & mask;
	/* The table is at most half full, so an empty entry ends every probe sequence. */
	for (uint32_t n = 0; n <= mask; n++) {
		const struct oms_entry *e = &t[i];
		if (e->tag == OMS_TAG_EMPTY)
			return OMS_NIL;
		if (e->tag == tag && e->a == a && e->b == b)
			return i;
		i = (i + 1) & mask;
	}
	return OMS_NIL;
}

static inline uint32_t
oms_tab_find(const struct oms *oms, uint32_t tag, uint64_t a, uint64_t b)
{
	uint32_t i = oms_tab_find_at(oms, tag, a, b);
	return i == OMS_NIL ? OMS_NIL : oms->table[i].val;
}

void oms_tab_insert(struct oms *oms, uint32_t tag, uint64_t a, uint64_t b, uint32_t val);
void oms_tab_remove(struct oms *oms, uint32_t tag, uint64_t a, uint64_t b);
/* oms_tab_remove, looking first at entry hint (any value: it is checked). */
void oms_tab_remove_hinted(struct oms *oms, uint32_t tag, uint64_t a, uint64_t b, uint32_t hint);
void oms_tab_clear(struct oms *oms);
/* Index symbol (not indexed yet) at slot of oms->symbols. Symbols are never removed. */
void oms_symbol_index_add(struct oms *oms, uint32_t symbol, uint32_t slot);

/* The part's files stand in layers, each calling only the ones below it (docs/oms.md):
 *   oms_core.c                      dispatch, timers, parked-message replay, svc_ops
 *   oms_snapshot.c                  snapshot, restore, state hash
 *   oms_view.c                      read-only views, invariant check
 *   oms_order.c oms_stream.c        handlers of client, ME and admin messages
 *   oms_recon.c oms_route.c oms_transfer.c
 *   oms_actor.c oms_writeback.c     actors: lists, parking, hydration, dehydration, sweep, drain,
 *                                   write-back
 *   oms_records.c oms_reply.c       shared records and lookups; replies to clients and operators
 *   oms_table.c oms_state.c         the index; limits, layout, init
 */

static inline void
oms_count(struct oms *oms, enum oms_counter c)
{
	oms->c.counters[c]++;
}

/* Emit msg to the sink, or to fn when fn != NULL (the rebuild and re-drive walks). */
static inline void
oms_out(struct svc_sink *sink, oms_msg_fn *fn, void *ctx, enum wire_dest dest,
	const struct wire_msg_hdr *msg)
{
	if (fn != NULL)
		fn(ctx, dest, msg);
	else
		sink->emit(sink->ctx, dest, msg);
}

/* ---- oms_state.c: limits, layout, init ---- */
/* Empty state: every slab free, free stacks hand out the lowest index first. */
void oms_reset(struct oms *oms);

/* ---- inline accessors of an actor's slabs ---- */
static inline uint32_t
oms_actor_index(const struct oms *oms, const struct oms_actor *a)
{
	DCHECK(a >= oms->actors);
	DCHECK(a < oms->actors + oms->actor_slots);
	return (uint32_t)(a - oms->actors);
}

static inline struct oms_actor *
oms_actor_find(const struct oms *oms, uint64_t user)
{
	uint32_t idx = oms_tab_find(oms, OMS_TAG_USER, user, 0);
	return idx == OMS_NIL ? NULL : &oms->actors[idx];
}

static inline struct oms_balance *
oms_actor_balances(const struct oms *oms, const struct oms_actor *a)
{
	return &oms->balances[(size_t)oms_actor_index(oms, a) * oms->c.limits.assets_per_user];
}

/* a's balances of assets x and y (different, not 0) as oms_balance_find returns each (the
 * first slot holding it, or NULL), in one look at the slots. */
static inline void
oms_balance_find2(const struct oms *oms, const struct oms_actor *a, uint32_t x, uint32_t y,
		  struct oms_balance **bx, struct oms_balance **by)
{
	struct oms_balance *b = oms_actor_balances(oms, a);
	struct oms_balance *px = NULL, *py = NULL;
	DCHECK(x != y);
	DCHECK(x != 0);
	DCHECK(y != 0);
	for (uint32_t k = 0; k < oms->c.limits.assets_per_user; k++) {
		if (b[k].asset == x) {
			if (px == NULL)
				px = &b[k];
		} else if (b[k].asset == y) {
			if (py == NULL)
				py = &b[k];
		} else {
			continue;
		}
		if (px != NULL && py != NULL)
			break;
	}
	*bx = px;
	*by = py;
}

static inline struct oms_dedup *
oms_actor_dedup(const struct oms *oms, const struct oms_actor *a)
{
	return &oms->dedup[(size_t)oms_actor_index(oms, a) * oms->c.limits.dedup_per_user];
}

static inline uint16_t
oms_order_oid_shard(const struct oms *oms, const struct oms_order *o)
{
	(void)oms;
	return o->oid_shard;
}

static inline uint64_t *
oms_actor_dedup_ids(const struct oms *oms, const struct oms_actor *a)
{
	return &oms->dedup_ids[(size_t)oms_actor_index(oms, a) * oms->c.limits.dedup_per_user];
}

/* ---- the dirty list: write-back bookkeeping (docs/oms.md, "Write-back") ----
 * An actor is on the dirty list exactly when a write-back may start for it: resident, its
 * flushed state changed since the row was last known to hold it, no flush answer
 * outstanding, no conflict alarm. Every transition that can change one of those calls
 * oms_wb_relink; the list is in the state (snapshot), so every member keeps the same one. */
static inline bool
oms_wb_wanted(const struct oms_actor *a)
{
	return a->state == OMS_A_RESIDENT && a->change_gen != a->clean_gen && a->flush_epoch == 0 &&
	       (a->flags & OMS_AF_CONFLICT) == 0;
}

static inline void
oms_wb_unlink(struct oms *oms, struct oms_actor *a)
{
	if ((a->flags & OMS_AF_DIRTY) == 0)
		return;
	struct oms_list *l = &oms->c.dirty;
	if (a->wb_prev != OMS_NIL)
		oms->actors[a->wb_prev].wb_next = a->wb_next;
	else
		l->head = a->wb_next;
	if (a->wb_next != OMS_NIL)
		oms->actors[a->wb_next].wb_prev = a->wb_prev;
	else
		l->tail = a->wb_prev;
	a->wb_prev = a->wb_next = OMS_NIL;
	a->flags &= (uint8_t)~OMS_AF_DIRTY;
	DCHECK(l->count > 0);
	l->count--;
}

/* Put a on the dirty list (at the head: the pass takes the oldest change from the tail) or
 * take it off, as oms_wb_wanted says. An actor already listed keeps its place. */
static inline void
oms_wb_relink(struct oms *oms, struct oms_actor *a)
{
	bool listed = (a->flags & OMS_AF_DIRTY) != 0;
	if (!oms_wb_wanted(a)) {
		oms_wb_unlink(oms, a);
		return;
	}
	if (listed)
		return;
	struct oms_list *l = &oms->c.dirty;
	uint32_t idx = oms_actor_index(oms, a);
	a->wb_prev = OMS_NIL;
	a->wb_next = l->head;
	if (l->head != OMS_NIL)
		oms->actors[l->head].wb_prev = idx;
	else
		l->tail = idx;
	l->head = idx;
	l->count++;
	a->flags |= OMS_AF_DIRTY;
}

/* The flushed state of a (balances, user_seq, tier, recent window) changed: a write-back is
 * due. A generation, not a bool: a write-back in flight that captured an older generation
 * cannot mark a newer change clean. */
static inline void
oms_actor_changed(struct oms *oms, struct oms_actor *a)
{
	a->change_gen++;
	/* Listed means oms_wb_wanted held, and of its terms the increment can turn only
	 * change_gen != clean_gen: an admission changes its actor four or five times, and all
	 * but the first find it listed. */
	if ((a->flags & OMS_AF_DIRTY) != 0 && a->change_gen != a->clean_gen)
		return;
	oms_wb_relink(oms, a);
}

/* a * b / d (d > 0) rounded like money_mul_div, in 64 bits when the product fits (the
 * common case), else in 128 bits. */
static inline int
oms_mul_div(int64_t a, int64_t b, int64_t d, bool round_up, int64_t *out)
{
	int64_t p;
	if (d > 0 && !__builtin_mul_overflow(a, b, &p)) {
		int64_t q = p / d, r = p % d;
		if (round_up && r != 0)
			q += p > 0 ? 1 : -1;
		*out = q;
		return 0;
	}
	return money_mul_div(a, b, d, round_up, out);
}

static inline int
oms_fee(int64_t amount, int32_t bps, int64_t *out)
{
	return oms_mul_div(amount, bps, MONEY_BPS_DENOM, bps > 0, out);
}

/* The fee an order owes once it has filled maker notional m and taker notional t: the exact
 * fee (m × maker_bps + t × taker_bps) / 10^4, rounded up once on the whole order (a rebate
 * total rounds toward zero, so the venue never pays out a fraction). Each fill is charged
 * the growth of this value; for one liquidity it equals oms_fee on the cumulative notional.
 * Rounding once, not once per liquidity, is what keeps the total within the fee bound a buy
 * reserves (docs/oms.md, "How the reservation bounds settlement"). */
static inline int
oms_order_fee(int64_t m, int64_t t, int16_t maker_bps, int16_t taker_bps, int64_t *out)
{
	int64_t pm, pt, p;
	if (!__builtin_mul_overflow(m, (int64_t)maker_bps, &pm) &&
	    !__builtin_mul_overflow(t, (int64_t)taker_bps, &pt) &&
	    !__builtin_add_overflow(pm, pt, &p)) {
		/* C division truncates toward zero: that is already up for a negative total. */
		int64_t q = p / MONEY_BPS_DENOM;
		*out = q + (p % MONEY_BPS_DENOM > 0);
		return 0;
	}
	__int128 w = (__int128)m * maker_bps + (__int128)t * taker_bps;
	__int128 q = w / MONEY_BPS_DENOM + (w % MONEY_BPS_DENOM > 0);
	if (q > INT64_MAX || q < INT64_MIN)
		return -EOVERFLOW;
	*out = (int64_t)q;
	return 0;
}

/* The larger of a symbol's maker and taker fee: the fee bound a buy reserves. */
static inline int16_t
oms_fee_bps_max(const struct oms_symbol *s)
{
	return s->maker_fee_bps > s->taker_fee_bps ? s->maker_fee_bps : s->taker_fee_bps;
}

static inline int
oms_notional(int64_t px, int64_t qty, int64_t base_unit, int64_t *out)
{
	return oms_mul_div(px, qty, base_unit, false, out);
}

/* ---- oms_reply.c: replies to clients and operators ---- */
/* Set msg's header (type, size, destination shard) and hand it to the sink. Inline: every
 * reply and egress message ends here, and the header's stores fold into its builder's. */
static inline void
oms_emit(struct svc_sink *sink, enum wire_dest dest, void *msg, enum wire_type type,
	 uint16_t shard, size_t size, uint16_t flags)
{
	struct wire_msg_hdr *h = msg;
	DCHECK(size <= UINT16_MAX);
	h->type = (uint16_t)type;
	h->length = (uint16_t)size;
	h->shard = shard;
	h->flags = flags;
	sink->emit(sink->ctx, dest, h);
}
#define OMS_EMIT(sink, dest, m, type, shard) oms_emit(sink, dest, &(m), type, shard, sizeof(m), 0)
/* NAK to the client; a (may be NULL) supplies the per-user egress sequence. owner is set
 * for NOT_OWNER. */
void oms_nak(struct oms *oms, struct svc_sink *sink, struct oms_actor *a, uint64_t user,
	     uint64_t cl_ord_id, uint16_t reason, uint16_t owner);
void oms_admin_reply(struct oms *oms, struct svc_sink *sink, uint64_t req_id, uint16_t reason,
		     uint64_t value);
/* ACK an admission: the orderId's second word as first given (shard_seq) and its time. */
void oms_ack(struct oms *oms, struct oms_actor *a, uint64_t cl_ord_id, uint64_t shard_seq,
	     uint64_t time_ns, struct svc_sink *sink);
/* The execution report of o; flags WIRE_REPORT_F_DONE on the order's last one. Inline:
 * every order sends one at least, and with the constants each call site passes (zeros,
 * mostly) the builder folds into the caller; the call and its twelve arguments cost as
 * much as the report. */
static inline void
oms_exec_report(struct oms *oms, struct oms_actor *a, const struct oms_order *o, uint8_t exec,
		uint16_t flags, struct svc_sink *sink, uint8_t cause, uint16_t reason,
		int64_t last_px, int64_t last_qty, int64_t fee, uint8_t liquidity)
{
	struct wire_exec_report m = {
		.user = a->user,
		.cl_ord_id = o->cl_ord_id,
		.oid = wire_oid_make(oms_order_oid_shard(oms, o), a->user, o->user_seq),
		.seq = ++a->egress_seq,
		.time_ns = oms->c.now_ns,
		.symbol = o->symbol,
		.exec = exec,
		.side = o->side,
		.liquidity = liquidity,
		.cause = cause,
		.reason = reason,
		.last_px = last_px,
		.last_qty = last_qty,
		.cum_qty = o->cum_qty,
		.leaves_qty = o->leaves,
		.fee = fee,
	};
	DCHECK(flags == 0 || o->leaves == 0);
	oms_count(oms, OMS_C_EXEC_REPORTS);
	oms_emit(sink, WIRE_DEST_CLIENT, &m, WIRE_EXEC_REPORT, 0, sizeof(m), flags);
}

/* ---- oms_records.c: balances, order records, dedup window, symbol and owner lookups ---- */
struct oms_balance *oms_balance_find(const struct oms *oms, const struct oms_actor *a,
				     uint32_t asset);
struct oms_balance *oms_balance_get_or_add(struct oms *oms, struct oms_actor *a, uint32_t asset);
/* Inline, like oms_actor_find: every ME event looks its order up (and its symbol). */
static inline struct oms_order *
oms_order_find(const struct oms *oms, uint64_t user, uint64_t user_seq)
{
	uint32_t i = oms_tab_find(oms, OMS_TAG_ORDER, user, user_seq);
	return i == OMS_NIL ? NULL : &oms->orders[i];
}
/* oms_order_find for an event, which may end the order: its entry is remembered
 * (oms.order_hint), so the record's removal finds it without a second look. */
static inline struct oms_order *
oms_order_find_hinted(struct oms *oms, uint64_t user, uint64_t user_seq)
{
	uint32_t i = oms_tab_find_at(oms, OMS_TAG_ORDER, user, user_seq);
	if (i == OMS_NIL)
		return NULL;
	oms->order_hint = i;
	return &oms->orders[oms->table[i].val];
}
/* A zeroed PENDING record for a's order user_seq, at the end of a's list (a slot must be
 * free: callers check order_free_count). */
struct oms_order *oms_order_alloc(struct oms *oms, struct oms_actor *a, uint64_t user_seq);
/* oms_order_alloc in two steps, for a caller that writes the whole record itself (one
 * literal, not zeroes and then its fields): take a free slot, write every field but the
 * list links (state PENDING, actor, user_seq, oid_shard, saga_ns as oms_order_alloc sets
 * them), then attach it to a (its list, the counts, the index). */
static inline struct oms_order *
oms_order_slot(struct oms *oms)
{
	CHECK(oms->c.order_free_count > 0);
	return &oms->orders[oms->order_free[--oms->c.order_free_count]];
}
static inline void
oms_order_attach(struct oms *oms, struct oms_actor *a, struct oms_order *o)
{
	uint32_t idx = (uint32_t)(o - oms->orders);
	DCHECK(idx < oms->c.limits.orders_max);
	DCHECK(o->state == OMS_O_PENDING);
	DCHECK(o->actor == oms_actor_index(oms, a));
	uint64_t seq = o->user_seq;
	o->prev = a->order_tail;
	o->next = OMS_NIL;
	if (a->order_tail != OMS_NIL)
		oms->orders[a->order_tail].next = idx;
	else
		a->order_head = idx;
	a->order_tail = idx;
	/* The cache's gauges (oms_cache_info): a user's first record makes it not flat, its
	 * first saga in flight. */
	if (a->order_count == 0)
		oms->users_ordered++;
	if (a->sagas == 0)
		oms->users_in_saga++;
	a->order_count++;
	oms->c.order_used++;
	a->sagas++;
	oms->c.inflight++;
	oms_tab_insert(oms, OMS_TAG_ORDER, a->user, seq, idx);
	oms_actor_changed(oms, a); /* the caller took user_seq for it */
}
/* A PENDING record of actor slot actor for its order user_seq, every other field zero.
 * Field by field, not a literal or memset: the compiler drops the stores a caller writes
 * again (order_open writes most), where a literal becomes a rep stos of the whole record. */
static inline void
oms_order_init(struct oms_order *o, uint64_t user_seq, uint32_t actor, uint16_t oid_shard,
	       uint64_t saga_ns)
{
	static_assert(sizeof(struct oms_order) == 176, "oms_order_init writes every field");
	o->user_seq = user_seq;
	o->cl_ord_id = 0;
	o->target_seq = 0;
	o->mod_seq = 0;
	o->px = 0;
	o->qty = 0;
	o->budget = 0;
	o->quote_qty = 0;
	o->leaves = 0;
	o->cum_qty = 0;
	o->reserved = 0;
	o->notional_maker = 0;
	o->notional_taker = 0;
	o->expire_ns = 0;
	o->last_seq = 0;
	o->recon_req = 0;
	o->saga_ns = saga_ns;
	o->actor = actor;
	o->symbol = 0;
	o->res_asset = 0;
	o->recv_asset = 0;
	o->prev = OMS_NIL;
	o->next = OMS_NIL;
	o->kind = 0;
	o->state = OMS_O_PENDING;
	o->side = 0;
	o->ord_type = 0;
	o->tif = 0;
	o->stp = 0;
	o->me_shard = 0;
	o->oid_shard = oid_shard;
	o->target_shard = 0;
	o->moving = 0;
	memset(o->pad, 0, sizeof(o->pad));
}
/* One of a's sagas ended (its record left PENDING: promoted to LIVE, or freed). With
 * oms_order_alloc, which begins one, this is every change of an actor's sagas: the actor's
 * and the shard's in-flight counts and the cache's users with a saga (oms_cache_info). */
static inline void
oms_saga_end(struct oms *oms, struct oms_actor *a)
{
	DCHECK(a->sagas > 0);
	DCHECK(oms->c.inflight > 0);
	a->sagas--;
	oms->c.inflight--;
	if (a->sagas == 0) {
		DCHECK(oms->users_in_saga > 0);
		oms->users_in_saga--;
	}
}
/* Set an order's remaining reservation (adjusting the balance and the actor's count). */
void oms_order_reserve_set(struct oms *oms, struct oms_actor *a, struct oms_order *o,
			   int64_t reserved);
/* The same where the caller holds b, a's balance of o->res_asset (oms_balance_find's). */
static inline void
oms_order_reserve_set_in(struct oms_actor *a, struct oms_order *o, struct oms_balance *b,
			 int64_t reserved)
{
	DCHECK(reserved >= 0);
	if (reserved == o->reserved)
		return;
	CHECK(b != NULL);
	DCHECK(b->asset == o->res_asset);
	b->reserved += reserved - o->reserved;
	/* available = total − reserved is never negative. */
	CHECK(b->reserved >= 0);
	CHECK(b->reserved <= b->total);
	if (o->reserved == 0)
		a->reservations++;
	else if (reserved == 0)
		a->reservations--;
	o->reserved = reserved;
}
/* Release the order's reservation and free its record. */
void oms_order_free(struct oms *oms, struct oms_actor *a, struct oms_order *o);
/* The first of the n entries of a's ring from index i on (no wrap) that remembers (kind, id). */
static inline const struct oms_dedup *
oms_dedup_scan(const struct oms *oms, const struct oms_actor *a, const uint64_t *ids, uint32_t i,
	       uint32_t n, uint32_t kind, uint64_t id)
{
	for (const uint64_t *p = ids + i, *end = ids + i + n; p != end; p++) {
		if (*p == id) {
			const struct oms_dedup *d = &oms_actor_dedup(oms, a)[p - ids];
			if (d->kind == kind)
				return d;
		}
	}
	return NULL;
}

/* a's remembered outcome of request (kind, id), or NULL. Inline: every client request asks
 * it first. */
static inline const struct oms_dedup *
oms_dedup_find(const struct oms *oms, const struct oms_actor *a, uint32_t kind, uint64_t id)
{
	const uint64_t *ids = oms_actor_dedup_ids(oms, a);
	uint32_t max = oms->c.limits.dedup_per_user;
	uint32_t head = a->dedup_head, count = a->dedup_count;
	DCHECK(head < max);
	DCHECK(count <= max);
	/* Scan the dense id array, oldest first: the ring is at most two runs of it, from the
	 * head to the end and from 0 on. The full outcome is read only on a match. */
	uint32_t first = count < max - head ? count : max - head;
	const struct oms_dedup *d = oms_dedup_scan(oms, a, ids, head, first, kind, id);
	return d != NULL ? d : oms_dedup_scan(oms, a, ids, 0, count - first, kind, id);
}
void oms_dedup_add(struct oms *oms, struct oms_actor *a, uint32_t kind, uint64_t id,
		   uint64_t user_seq, uint64_t content, uint16_t reason);
/* Record a transfer's outcome (total: what its reply carried); pinned until a flush that
 * carries it is answered OK. The caller checks oms_dedup_pinned < oms_xfer_pinned_max. */
void oms_dedup_add_xfer(struct oms *oms, struct oms_actor *a, uint64_t id, uint32_t asset,
			int64_t amount, int64_t total, uint16_t reason, bool pinned);
/* Pinned transfer outcomes in a's window. */
uint32_t oms_dedup_pinned(const struct oms *oms, const struct oms_actor *a);
/* FLUSH_COMPLETE OK for a's flush under epoch: every transfer outcome recorded before that
 * flush was drawn is in the database now; unpin them. */
void oms_dedup_flushed(struct oms *oms, struct oms_actor *a, uint64_t epoch);
/* Append a transfer to the lookup FIFO (pad: OMS_PARK_LOOKUP or _DUP; a parked slot must
 * be free). */
void oms_lookup_push(struct oms *oms, const struct wire_transfer *m, uint8_t pad,
		     uint64_t epoch);
/* The outstanding lookups (one TRANSFER_LOOKUP per OMS_PARK_LOOKUP entry), for the
 * persister's re-drive. Returns how many. */
uint32_t oms_lookups_foreach(const struct oms *oms, oms_msg_fn *fn, void *ctx);
/* user's actor is dropped: a NOT_FOUND answer to a lookup it sent no longer proves the
 * transfer unapplied for a later incarnation; such transfers look again (msg word 6). */
void oms_lookups_orphan(struct oms *oms, uint64_t user);
void oms_lookup_emit(const struct oms *oms, uint64_t user, uint64_t transfer_id, uint64_t epoch,
		     struct svc_sink *sink, oms_msg_fn *fn, void *ctx);
/* Every event and every new order looks its symbol up: an index of its own, keyed by the
 * 32-bit id alone (Fibonacci hashing, Knuth 6.4) and holding slots only, costs less than
 * half of a look in the shared table (oms_table.c). */
static inline struct oms_symbol *
oms_symbol_find(const struct oms *oms, uint32_t symbol)
{
	uint32_t mask = oms->symbol_index_mask;
	uint32_t i = (uint32_t)(symbol * UINT32_C(0x9e3779b1)) >> oms->symbol_index_shift;
	/* At most half full, so an empty entry ends every probe sequence. */
	for (uint32_t n = 0; n <= mask; n++) {
		uint32_t k = oms->symbol_index[i];
		if (k == 0)
			return NULL;
		if (oms->symbols[k - 1].symbol == symbol)
			return &oms->symbols[k - 1];
		i = (i + 1) & mask;
	}
	return NULL;
}
/* The owner of user under a routing: its pin, else HRW over the ACTIVE shards (seed: never
 * hash % N; receiving shards get no new users until they turn active); before any routing
 * config (epoch 0, or no active shard) the shard that asks serves every user (single-shard
 * deployments, tests: a multi-shard venue configures routing before it opens). The service
 * and the copies gateways route by (oms_route_info_owner) both answer with this. */
static inline uint16_t
oms_route_pick(uint64_t epoch, const struct wire_route_pin *pins, uint32_t pin_count,
	       const uint16_t *active, uint32_t active_count, uint16_t self, uint64_t user)
{
	for (uint32_t i = 0; i < pin_count; i++)
		if (pins[i].user == user)
			return pins[i].shard;
	if (epoch == 0 || active_count == 0)
		return self;
	return hrw_pick(user, active, active_count);
}
uint16_t oms_route_owner(const struct oms *oms, uint64_t user);
bool oms_route_owns(const struct oms *oms, uint64_t user, uint16_t *owner);

/* ---- oms_actor.c: lists, hydration, parking, dehydration, sweep, drain ---- */
bool oms_actor_flat(const struct oms_actor *a);
/* Activity on a resident actor: cancel an in-window flush (epoch bump), splice to MRU.
 * oms_actor_touch_slow does all of it; oms_actor_touch inlines the common case. */
void oms_actor_touch_slow(struct oms *oms, struct oms_actor *a);

/* The common case of oms_actor_touch: a resident actor already at the MRU end (every ME
 * event of an order follows its admission's touch) and already on the dirty list, so all
 * that changes is its stamp and change generation — what the slow path does for it
 * (actor_restamp, then oms_actor_changed finding it listed and still oms_wb_wanted). */
static inline void
oms_actor_touch(struct oms *oms, struct oms_actor *a)
{
	if (a->state == OMS_A_RESIDENT && a->prev == OMS_NIL && (a->flags & OMS_AF_DIRTY) != 0 &&
	    a->flush_epoch == 0 && (a->flags & OMS_AF_CONFLICT) == 0 &&
	    a->change_gen + 1 != a->clean_gen) {
		a->last_active_ns = oms->c.now_ns;
		a->change_gen++;
		return;
	}
	oms_actor_touch_slow(oms, a);
}
/* A message for user who is not RESIDENT/FLUSHING: park it (hydrating on a miss).
 * Returns 0 (parked), or a NAK reason (client messages) / -1 (an event that cannot be
 * parked now: the caller must not consume it). */
int oms_actor_park(struct oms *oms, uint64_t user, const struct wire_msg_hdr *msg, bool is_event,
		   bool check_owner, struct svc_sink *sink, uint16_t *owner_out);
/* Admission (docs/oms.md "Admission"): promote WAITING users while the cap has room, and
 * make room under pressure by evicting the least recently active idle users at once. Cheap
 * when nobody waits. */
void oms_admit_pump(struct oms *oms, struct svc_sink *sink);
/* Detach a's oldest parked message into buf; false when none is left. */
bool oms_actor_park_pop(struct oms *oms, struct oms_actor *a, struct oms_parked *buf);
void oms_actor_begin_dehydrate(struct oms *oms, struct oms_actor *a, struct svc_sink *sink);
/* Apply HYDRATE_USER. Returns the actor it installed, whose parked messages the caller
 * must now run in order, or NULL. */
struct oms_actor *oms_on_hydrate_user(struct oms *oms, const struct wire_hydrate_user *m,
				      struct svc_sink *sink);
void oms_on_flush_complete(struct oms *oms, const struct wire_flush_complete *m,
			   struct svc_sink *sink);
void oms_on_user_admin(struct oms *oms, const struct wire_user_admin *m, struct svc_sink *sink);
void oms_on_release_done(struct oms *oms, const struct wire_release_claim *m,
			 struct svc_sink *sink);
/* A flush may start: flat, resident, no flush answer outstanding, room to record its
 * release. */
bool oms_actor_evictable(const struct oms *oms, const struct oms_actor *a);
/* Does this shard still own resident user a (cached per routing epoch)? When it does not,
 * *owner is the owner and the user's move is started or continued (oms_actor_move_out).
 * oms_actor_owned_slow does all of it; oms_actor_owned inlines the common case. */
bool oms_actor_owned_slow(struct oms *oms, struct oms_actor *a, uint16_t *owner,
			  struct svc_sink *sink);

/* The common case of oms_actor_owned: not moving, and found ours under the current routing
 * epoch already — where the slow path returns true and changes nothing. */
static inline bool
oms_actor_owned(struct oms *oms, struct oms_actor *a, uint16_t *owner, struct svc_sink *sink)
{
	if ((a->flags & OMS_AF_MOVING) == 0 && a->owned_epoch == oms->c.route.epoch)
		return true;
	return oms_actor_owned_slow(oms, a, owner, sink);
}
/* The move of a resident user this shard no longer owns (docs/fencing.md "Moving a user
 * with open orders"): flat, it is flushed and dropped; with open orders and no saga in
 * flight, each live order gets its REBIND_TO_ME (the user is flushed once the last MOVED
 * is in). Returns the REBIND_TO_MEs sent. */
uint32_t oms_actor_move_out(struct oms *oms, struct oms_actor *a, struct svc_sink *sink);
/* Build the REBIND_TO_ME of moving order o of a (OMS_AF_MOVING) to a->move_to (sink or fn). */
void oms_build_rebind(const struct oms *oms, const struct oms_actor *a, const struct oms_order *o,
		      struct svc_sink *sink, oms_msg_fn *fn, void *ctx);
void oms_sweep(struct oms *oms, struct svc_sink *sink);
void oms_drain_step(struct oms *oms, struct svc_sink *sink);
void oms_build_user_state(const struct oms *oms, const struct oms_actor *a,
			  struct wire_user_state *st);

/* Emit BEGIN_DEHYDRATE{epoch, a's state} to the sink, or to fn when fn != NULL (rebuild). */
void oms_emit_begin_dehydrate(const struct oms *oms, const struct oms_actor *a, uint64_t epoch,
			      struct svc_sink *sink, oms_msg_fn *fn, void *ctx);

/* ---- oms_writeback.c: periodic write-back of dirty resident users ---- */
/* One pass: BEGIN_DEHYDRATE for the oldest dirty actors, at most writeback_max and never more
 * than the room for flush answers; each keeps its actor (RESIDENT) and its claim. */
void oms_writeback_pass(struct oms *oms, struct svc_sink *sink);
/* FLUSH_COMPLETE for a's outstanding write-back (OMS_AF_WB, m->epoch == flush_epoch). */
void oms_wb_on_flush_complete(struct oms *oms, struct oms_actor *a,
			      const struct wire_flush_complete *m);
/* The dirty list, the write-back flags and the in-flight count agree. 0 or -EFAULT. */
int oms_wb_check(const struct oms *oms);

/* ---- oms_order.c: admission, cancel / amend / replace ---- */
void oms_on_new_order(struct oms *oms, const struct wire_new_order *m, struct svc_sink *sink);
void oms_on_cancel(struct oms *oms, const struct wire_cancel *m, struct svc_sink *sink);
void oms_on_amend(struct oms *oms, const struct wire_amend *m, struct svc_sink *sink);
void oms_on_cancel_replace(struct oms *oms, const struct wire_cancel_replace *m,
			   struct svc_sink *sink);
void oms_build_to_me(const struct oms *oms, const struct oms_actor *a, const struct oms_order *o,
		     struct svc_sink *sink, oms_msg_fn *fn, void *ctx);

/* ---- oms_stream.c: ME events, results, settlement ---- */
void oms_on_me_event(struct oms *oms, const struct wire_me_event *m, struct svc_sink *sink);
/* Apply one in-sequence event to a resident actor (also used for parked events). */
void oms_event_apply(struct oms *oms, struct oms_actor *a, const struct wire_me_event *ev,
		     const struct oms_symbol *sym, struct svc_sink *sink);
void oms_on_me_result(struct oms *oms, const struct wire_me_result *m, struct svc_sink *sink);
void oms_streams_tick(struct oms *oms, struct svc_sink *sink);

/* ---- oms_recon.c: reconciliation ---- */
void oms_on_open_orders_snapshot(struct oms *oms, const struct wire_open_orders_snapshot *m,
				 struct svc_sink *sink);
void oms_recon_sweep(struct oms *oms, struct svc_sink *sink);
/* Recompute an actor's reservations from its orders; heal and count drift. */
uint32_t oms_recon_leaks(struct oms *oms, struct oms_actor *a);

/* ---- oms_route.c: routing config, whale pins, symbols, kill-switches, transfers ---- */
void oms_on_routing_config(struct oms *oms, const struct wire_routing_config *m,
			   struct svc_sink *sink);
void oms_on_whale_pin(struct oms *oms, const struct wire_whale_pin *m, struct svc_sink *sink);
void oms_on_symbol_config(struct oms *oms, const struct wire_symbol_config *m,
			  struct svc_sink *sink);
void oms_on_symbol_status(struct oms *oms, const struct wire_symbol_status_msg *m,
			  struct svc_sink *sink);
void oms_on_kill_switch(struct oms *oms, const struct wire_kill_switch *m, struct svc_sink *sink);

/* ---- oms_transfer.c: deposits and withdrawals, idempotent for their lifetime ---- */
void oms_on_transfer(struct oms *oms, const struct wire_transfer *m, struct svc_sink *sink);
void oms_on_transfer_found(struct oms *oms, const struct wire_transfer_found *m,
			   struct svc_sink *sink);

#endif

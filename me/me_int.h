/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me internals: shared by me_*.c and the unit tests, never by other modules.
 *
 * Memory: the whole engine is one region of caller memory, [struct me | arrays...]. Its state
 * holds no pointers — every reference is an index, every array is found by an offset from the
 * start of the region (the runtime header caches those offsets resolved to pointers and is
 * not state). So the state is position independent: the state hash is XXH3 over the region
 * after the runtime header, and a snapshot carries the parts of it that init did not leave
 * as they are (me_snapshot.c). Free lists hand out indices LIFO from a list built in index
 * order, so which slot an order gets — and therefore every byte of the region — is a
 * function of the applied messages only, never of addresses (STYLE.md §6).
 */
#ifndef OMSD_ME_ME_INT_H
#define OMSD_ME_ME_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/check.h"
#include "common/hash.h"
#include "common/money.h"
#include "me/me.h"

#define ME_NIL UINT32_MAX          /* no record / no level */
#define ME_MAGIC UINT64_C(0x315f454d5f44534f) /* "OSD_ME_1" */
#define ME_SNAP_MAGIC UINT64_C(0x50414e53454d4f4d) /* "MOMESNAP" */
#define ME_SNAP_VERSION 7          /* 4: live symbol moves (struct me_move); 5: the move
				    * journal (WATCH); 6: the move hash is a sum kept running
				    * (a WATCHING move's hash and gtd_held, an INSTALLING one's
				    * hash); 7: the oid index and the user table are chained
				    * hash tables that grow and shrink with their entries
				    * (struct me_lhash), a user slab with a free list */
#define ME_RT_SIZE 128             /* runtime header, excluded from snapshot and hash */
#define ME_STREAM_MAP_SIZE 65536   /* one entry per possible OMS shard id */
#define ME_EV_MATCH_ROOM 6         /* taker-stream slots a match step may need */
#define ME_EV_MAKER_ROOM 3         /* maker-stream slots a match step may need */
#define ME_BULK_JOBS_MAX 32        /* bulk cancel jobs waiting for retention (me_bulk.c) */
#define ME_BULK_STEP_MAX 256       /* orders one bulk step cancels (bounded apply time) */
#define ME_MOVES_MAX 8             /* symbol moves remembered (me_move.c) */
#define ME_LH_BUCKETS_MIN 64       /* a chained hash table never shrinks below this */

enum me_state {
	ME_ST_FREE = 0,   /* on the free list */
	ME_ST_ACTIVE = 1, /* accepted, being matched (inside one apply) */
	ME_ST_LIVE = 2,   /* resting on a book */
	ME_ST_FINAL = 3,  /* terminal; dedup record kept until its stream ack covers last_seq */
};

/* Record kinds, folded into the dedup fingerprint so a SUBMIT and a CANCEL with one id
 * never look alike. */
enum me_kind {
	ME_KIND_SUBMIT = 1,
	ME_KIND_CANCEL = 2,
	ME_KIND_AMEND = 3,
	ME_KIND_REPLACE = 4,
};

/*
 * One order record: a resting order, a finished order's dedup record, or a modify request's
 * dedup record. 96 bytes, no implicit padding (snapshot bytes are all written).
 */
struct me_order {
	struct wire_oid oid;   /* caller's orderId (request id for modify records) */
	int64_t px;            /* limit price; 0 for market */
	int64_t leaves;        /* live qty (base units) */
	int64_t cum;           /* filled qty */
	uint64_t expire_ns;    /* live: GTD expiry, cluster time, else 0; final: the cluster
				* time it finished (start of its dedup window) */
	uint64_t last_seq;     /* last stream seq about this record (in stream `stream`) */
	uint32_t fp;           /* fingerprint of the request content (dedup mismatch check) */
	uint32_t prev;         /* level FIFO (live) or finished FIFO (final) */
	uint32_t next;         /* ditto; free list link when free */
	uint32_t uprev;        /* per-user circular list of live orders */
	uint32_t unext;
	uint32_t level;        /* price level while live, else ME_NIL */
	uint32_t symbol;       /* symbol id as the caller sent it */
	uint16_t stream;       /* index of the stream holding last_seq */
	uint8_t reason;        /* reject reason of a refused request (enum wire_reason) */
	uint8_t side;          /* enum wire_side */
	uint8_t ord_type;      /* enum wire_ord_type */
	uint8_t tif;           /* enum wire_tif */
	uint8_t stp;           /* enum wire_stp */
	uint8_t state;         /* enum me_state */
	uint8_t kind;          /* enum me_kind */
	uint8_t reserved[3];
};
static_assert(WIRE_REASON_MAX <= UINT8_MAX, "reasons fit a byte");
static_assert(sizeof(struct me_order) == 96, "me_order is 96 bytes");

/*
 * The chained hash tables (the oid index, the user table) are linear hashing (Litwin 1980):
 * an array of bucket heads of which only [0, low + split) is in use, grown one bucket per
 * insert and shrunk one or two per removal, so the buckets a lookup can touch are about as
 * many as there are entries — not as many as the capacity. A table sized for 262,144 orders
 * that holds 3,000 keeps them in ~3,000 buckets (12 KB), where a table sized by capacity
 * spread them over all of it and every lookup of a new id missed the cache. Each entry
 * carries its link: its hash (the key's bucket in any round, and a tag compared before the
 * key) and the next entry of its chain. Entries are slab slots (records, users) handed out
 * LIFO, so the links a small table touches are few and hot too.
 */
struct me_link {
	uint32_t hash;     /* low 32 bits of the key's hash (zeroed with a freed entry) */
	uint32_t next;     /* next entry of its bucket's chain, index + 1; 0 ends it */
};
static_assert(sizeof(struct me_link) == 8, "me_link");

/* Linear hashing state of one chained table. A round starts with low buckets (a power of
 * two) and splits buckets 0, 1, ... in turn (split = buckets - low of them so far), each into
 * itself and its buddy + low; so the bucket of hash h is h mod 2 low, unless that bucket is
 * not in use yet, then h mod low (me_lh_bucket). shrink_below is derived from buckets
 * (me_lhash_derive), kept so that a removal decides with one compare. */
struct me_lhash {
	uint32_t mask;         /* 2 low - 1 */
	uint32_t low;          /* buckets at the start of this round: a power of two >= min */
	uint32_t buckets;      /* in use, [low, 2 low): more entries than buckets split one */
	uint32_t shrink_below; /* fewer entries merge one: ceil(buckets / 4); 0 at min */
	uint32_t max;          /* bucket array length: a power of two >= the table's capacity */
	uint32_t min;          /* never fewer buckets: min(ME_LH_BUCKETS_MIN, max) */
};
static_assert(sizeof(struct me_lhash) == 24, "me_lhash");

/* One price level: an intrusive FIFO of live orders at one price. */
struct me_level {
	int64_t px;        /* price */
	int64_t qty;       /* sum of leaves */
	uint32_t head;     /* oldest order (first to fill) */
	uint32_t tail;     /* newest order */
	uint32_t count;    /* orders at this level; free-list link when free */
	uint32_t symbol;   /* symbol index of its book */
};
static_assert(sizeof(struct me_level) == 32, "me_level");

/* Entry of a book side's sorted level array: best price at the highest index. */
struct me_lref {
	int64_t px;        /* copy of the level's price, for cache-friendly search */
	uint32_t level;    /* level index */
	uint32_t reserved;
};
static_assert(sizeof(struct me_lref) == 16, "me_lref");

/* Symbol config and book state. */
struct me_symbol {
	ME_SYMBOL_SHARED_FIELDS /* me.h: the same fields as struct me_symbol_info starts with */
	uint64_t trade_seq;     /* per-symbol trade number */
	uint32_t band_bps;      /* 0 = no band */
	uint32_t side_count[2]; /* levels on [0] bids, [1] asks */
	uint32_t resting;       /* live orders on this book */
};
static_assert(sizeof(struct me_symbol) == 96, "me_symbol");
static_assert(offsetof(struct me_symbol, trade_seq) == offsetof(struct me_symbol_info, band_bps),
	      "the shared fields end at the same offset in the record and its view");

/* A user with live orders on this shard, or an engaged kill-switch: a slot of the user slab
 * (free list LIFO, fresh slots from users_hwm), chained in the user table by link. */
struct me_user {
	uint64_t user;     /* account id; 0 in a free slot */
	uint32_t head;     /* oldest live order (circular list via uprev/unext), ME_NIL if none */
	uint32_t count;    /* live orders (low 30 bits); ME_USER_KILLED; ME_USER_USED */
	struct me_link link; /* chain in the user table (hash: me_user_hash); free: next is
			      * the free list's next slot + 1 */
};
static_assert(sizeof(struct me_user) == 24, "me_user");
#define ME_USER_KILLED 0x80000000u /* kill-switch engaged */
#define ME_USER_USED 0x40000000u   /* slot occupied */
#define ME_USER_COUNT 0x3fffffffu  /* live orders */

/* GTD expiry min-heap entry (lazily deleted: stale entries are skipped when popped). */
struct me_gtd {
	uint64_t expire_ns;
	uint32_t order;
	uint32_t reserved;
};
static_assert(sizeof(struct me_gtd) == 16, "me_gtd");

/* Kinds of bulk cancel job (me_bulk.c). */
enum me_bulk_kind {
	ME_BULK_NONE = 0, /* unused slot */
	ME_BULK_BOOK = 1, /* cancel every order of one book: halt with cancel, symbol kill */
	ME_BULK_USER = 2, /* cancel every order of one user: user kill-switch */
};

/* One ME-initiated bulk cancel that goes on in chunks as stream acks free retention. */
struct me_bulk_job {
	uint64_t id;       /* symbol index (BOOK) or user id (USER) */
	uint8_t kind;      /* enum me_bulk_kind */
	uint8_t cause;     /* WIRE_CAUSE_HALT or WIRE_CAUSE_KILL_SWITCH */
	uint16_t reserved0;
	uint32_t reserved1;
};
static_assert(sizeof(struct me_bulk_job) == 16, "me_bulk_job");

/* The event stream of one OMS shard. */
struct me_stream {
	uint64_t next_seq;   /* seq the next event gets (first is 1) */
	uint64_t acked;      /* highest seq the OMS shard acknowledged */
	uint64_t oldest;     /* lowest seq still retained (> acked only after an overrun) */
	uint32_t fin_head;   /* finished records awaiting ack, in last_seq order */
	uint32_t fin_tail;
	uint16_t shard;      /* the OMS shard id */
	uint16_t reserved0;
	uint32_t reserved1;
};
static_assert(sizeof(struct me_stream) == 40, "me_stream");

/* One live symbol move as this engine takes part in it (me_move.c; docs/me.md "Moving a
 * symbol with its book"). A FROZEN (source) or INSTALLING (target) move holds its book: no
 * order of it enters, trades, expires, is modified or bulk-cancelled here. A WATCHING
 * (source) one holds nothing: the book trades, its changes are journaled (me_journal.c).
 * A FINISHED one is kept only to answer a repeated step; its slot is recycled oldest
 * first. */
struct me_move {
	uint64_t move_id;    /* the driver's id, the same in every step; 0: free (all zero) */
	uint64_t hash;       /* the move hash (me_move.c) of the book: source WATCHING, kept
			      * running; FROZEN, at OUT; target, of what is installed, kept
			      * running (0 for the empty book) */
	uint64_t created;    /* me->moves_created when recorded (1, 2, ...): recycling order */
	uint32_t symbol;     /* symbol index */
	uint32_t count;      /* source: frozen orders; target: orders installed so far */
	uint32_t next_chunk; /* target: the BOOK_CHUNK seq it takes next */
	uint32_t gtd_held;   /* the book's GTD orders kept off the heap (part of me->gtd_held);
			      * WATCHING: the book's GTD orders (on the heap until OUT) */
	uint16_t peer;       /* source: the target ME shard; target: the source */
	uint8_t role;        /* enum me_move_role */
	uint8_t phase;       /* enum me_move_phase */
	uint32_t reserved;
};
static_assert(sizeof(struct me_move) == 48, "me_move");

/* Runtime header: host pointers, never snapshotted or hashed. The array pointers are the
 * region offsets below resolved against this instance's address (me_rt_bind), so the hot
 * paths do not add an offset on every access; the state itself stays position independent. */
struct me_rt {
	struct svc_sink *sink;   /* sink of the current call */
	void *p_off_orders;
	void *p_off_links;
	void *p_off_index;
	void *p_off_users;
	void *p_off_user_heads;
	void *p_off_levels;
	void *p_off_lrefs;
	void *p_off_symbols;
	void *p_off_symidx;
	void *p_off_gtd;
	void *p_off_streams;
	void *p_off_stream_map;
	void *p_off_events;
	void *p_off_journal;
	/* No stream's finished record can be released before this cluster time (0: unknown,
	 * look): me_streams_release_aged skips its walk until then. Set by that walk; lowered by
	 * a finish, cleared by an ack (each can make a record releasable sooner) and by
	 * me_rt_bind (init, restore). A cache, not state: the walk it skips releases nothing. */
	uint64_t release_due_ns;
	uint8_t pad[ME_RT_SIZE - 15 * sizeof(void *) - sizeof(uint64_t)];
};
static_assert(sizeof(struct me_rt) == ME_RT_SIZE, "me_rt");

struct me {
	struct me_rt rt;             /* not state */
	/* --- state: everything from here on is snapshotted and hashed --- */
	uint64_t magic;              /* ME_MAGIC */
	uint64_t footprint;          /* region size */
	struct me_limits limits;     /* as given to me_init */
	uint64_t now_ns;             /* cluster time of the last call */
	/* Region layout: byte offsets from the start of struct me. */
	uint64_t off_orders;         /* struct me_order[orders_max] */
	uint64_t off_links;          /* struct me_link[orders_max]: record i's oid index chain */
	uint64_t off_index;          /* uint32_t[oid_lh.max]: oid index bucket → record + 1 */
	uint64_t off_users;          /* struct me_user[users_max]: the user slab */
	uint64_t off_user_heads;     /* uint32_t[user_lh.max]: user bucket → slab slot + 1 */
	uint64_t off_levels;         /* struct me_level[levels_max] */
	uint64_t off_lrefs;          /* struct me_lref[symbols_max * 2 * levels_side_max] */
	uint64_t off_symbols;        /* struct me_symbol[symbols_max] */
	uint64_t off_symidx;         /* uint32_t[sym_slots]: symbol id hash → symbol index + 1 */
	uint64_t off_gtd;            /* struct me_gtd[gtd_max] */
	uint64_t off_streams;        /* struct me_stream[streams_max] */
	uint64_t off_stream_map;     /* uint16_t[65536]: OMS shard → stream index + 1 */
	uint64_t off_events;         /* struct wire_me_event[streams_max * events_max] */
	uint64_t off_journal;        /* struct wire_oid[ME_JOURNAL_MAX]: the move journal */
	uint32_t user_free;          /* free user slot list head, slot + 1; 0 none */
	uint32_t users_hwm;          /* user slots ever used: [hwm, max) are as init left them */
	uint32_t sym_mask;           /* sym_slots - 1 */
	uint32_t events_mask;        /* events_max - 1 */
	uint32_t order_free;         /* free record list head */
	uint32_t level_free;         /* free level list head */
	uint32_t records_used;       /* records not free */
	uint32_t resting;            /* live orders on all books */
	uint32_t users_used;         /* occupied user slots */
	uint32_t symbols_used;       /* configured symbols */
	uint32_t gtd_count;          /* heap entries */
	uint32_t streams_used;       /* streams created */
	uint32_t levels_used;        /* levels not free */
	uint32_t users_killed;       /* users with an engaged kill-switch */
	uint32_t orders_hwm;         /* records ever allocated: [hwm, max) are as init left them */
	uint32_t levels_hwm;         /* levels ever allocated: likewise */
	uint32_t bulk_count;         /* bulk jobs pending: bulk[0, bulk_count), oldest first */
	uint32_t bulk_reserved;
	struct me_lhash oid_lh;      /* the oid index's buckets (off_index, off_links) */
	struct me_lhash user_lh;     /* the user table's buckets (off_user_heads, users' links) */
	struct me_bulk_job bulk[ME_BULK_JOBS_MAX]; /* unused slots all zero */
	uint64_t counters[ME_C_COUNT];
	uint64_t moves_created;      /* moves ever recorded: the creation number of the last */
	uint32_t moves_active;       /* moves FROZEN or INSTALLING (hot paths test it first) */
	uint32_t gtd_held;           /* GTD orders of held books kept off the heap: room in it
				      * stays theirs until their move ends (me_move.c) */
	/* The move journal (me_journal.c): one per engine, so one book watched at a time. */
	uint32_t watch_si;           /* symbol index whose book changes are journaled and hashed, ME_NIL
				      * none: the symbol of the WATCHING move */
	uint32_t journal_slot;       /* index in moves[] of the move the journal belongs to (a
				      * WATCHING or FROZEN source), ME_NIL none */
	uint32_t journal_n;          /* entries journaled: [journal_n, ME_JOURNAL_MAX) all zero */
	uint32_t journal_overflow;   /* 1: a change found the journal full and was lost */
	struct me_move moves[ME_MOVES_MAX]; /* free slots all zero */
};
/* The state is hashed byte for byte: no implicit padding may sit between its fields. */
static_assert(sizeof(struct me_limits) % 8 == 0, "me_limits packs into struct me");
static_assert(offsetof(struct me, now_ns) ==
		      offsetof(struct me, limits) + sizeof(struct me_limits),
	      "no padding after limits");
static_assert(offsetof(struct me, moves_created) ==
		      offsetof(struct me, counters) + sizeof(((struct me *)0)->counters),
	      "no padding after counters");
static_assert(sizeof(struct me) ==
		      offsetof(struct me, moves) + ME_MOVES_MAX * sizeof(struct me_move),
	      "no padding after moves");

/* ---- region accessors ---- */
#define ME_ARR(me, off, type) ((type *)(me)->rt.p_##off)
#define ME_CARR(me, off, type) ((const type *)(me)->rt.p_##off)

/* Resolve the region offsets into the runtime header (init, restore). */
static inline void
me_rt_bind(struct me *me)
{
	uint8_t *b = (uint8_t *)me;
	me->rt.release_due_ns = 0;
	me->rt.p_off_orders = b + me->off_orders;
	me->rt.p_off_links = b + me->off_links;
	me->rt.p_off_index = b + me->off_index;
	me->rt.p_off_users = b + me->off_users;
	me->rt.p_off_user_heads = b + me->off_user_heads;
	me->rt.p_off_levels = b + me->off_levels;
	me->rt.p_off_lrefs = b + me->off_lrefs;
	me->rt.p_off_symbols = b + me->off_symbols;
	me->rt.p_off_symidx = b + me->off_symidx;
	me->rt.p_off_gtd = b + me->off_gtd;
	me->rt.p_off_streams = b + me->off_streams;
	me->rt.p_off_stream_map = b + me->off_stream_map;
	me->rt.p_off_events = b + me->off_events;
	me->rt.p_off_journal = b + me->off_journal;
}

static inline struct me_order *
me_orders(struct me *me)
{
	return ME_ARR(me, off_orders, struct me_order);
}
static inline struct me_order *
me_ord(struct me *me, uint32_t i)
{
	DCHECK(i < me->limits.orders_max);
	return &me_orders(me)[i];
}
static inline struct me_level *
me_lvl(struct me *me, uint32_t i)
{
	DCHECK(i < me->limits.levels_max);
	return &ME_ARR(me, off_levels, struct me_level)[i];
}
static inline struct me_symbol *
me_sym(struct me *me, uint32_t i)
{
	DCHECK(i < me->limits.symbols_max);
	return &ME_ARR(me, off_symbols, struct me_symbol)[i];
}
static inline struct me_stream *
me_stream_at(struct me *me, uint32_t i)
{
	DCHECK(i < me->limits.streams_max);
	return &ME_ARR(me, off_streams, struct me_stream)[i];
}
/* The sorted level array of one side (side 0 bids, 1 asks) of symbol index si. */
static inline struct me_lref *
me_lrefs(struct me *me, uint32_t si, uint32_t side)
{
	return ME_ARR(me, off_lrefs, struct me_lref) +
	       ((size_t)si * 2 + side) * me->limits.levels_side_max;
}
static inline uint32_t
me_side_ix(uint8_t side)
{
	return side == WIRE_SIDE_BUY ? 0u : 1u;
}
static inline void
me_count(struct me *me, enum me_counter c)
{
	me->counters[c]++;
}

/* Exact notional px * qty / base_unit (money_notional), without the 128-bit division when the
 * product fits 64 bits, and without any division for base_unit 1. Same truncation. */
static inline int
me_notional(int64_t px, int64_t qty, int64_t base_unit, int64_t *out)
{
	int64_t p;
	if (__builtin_mul_overflow(px, qty, &p))
		return money_notional(px, qty, base_unit, out);
	*out = base_unit == 1 ? p : p / base_unit;
	return 0;
}

/* 64-bit finaliser (MurmurHash3 fmix64, common/hash.h): spreads ids over the hash tables. */
static inline uint64_t
me_mix64(uint64_t k)
{
	return hash_fmix64(k);
}
/* 32 bits of a 64-bit key for the chained tables: one multiply by an odd constant, the
 * product's halves folded. The low bits that pick a bucket get the key's low bits spread by
 * the multiply (consecutive ids land in distinct buckets) and every higher key bit through
 * the high half. A chained table needs spread, not avalanche (me_mix64 costs twice the
 * instructions, and every request hashes an id or two). */
static inline uint32_t
me_fold32(uint64_t k)
{
	uint64_t p = k * UINT64_C(0x9e3779b97f4a7c15);
	return (uint32_t)(p ^ (p >> 32));
}

/* The oid index's tag of an oid (struct me_link's hash): both halves of the id through
 * me_fold32. A request looks its id up and then records it: the tag is computed once for
 * both. */
static inline uint32_t
me_oid_tag(struct wire_oid oid)
{
	return me_fold32(oid.user * UINT64_C(0xd6e8feb86659fd93) ^ oid.shard_seq);
}

/* ---- me_store.c: layout, records, tables, the GTD heap ---- */
uint32_t me_order_alloc(struct me *me, struct wire_oid oid);     /* indexed; ME_NIL if full */
/* The same, given tag = me_oid_tag(oid). */
uint32_t me_order_alloc_tag(struct me *me, struct wire_oid oid, uint32_t tag);
void me_order_release(struct me *me, uint32_t oi);              /* unindex and free */
void me_lhash_derive(struct me_lhash *lh);        /* mask, shrink_below from low, buckets */
uint32_t me_symbol_add(struct me *me, uint32_t symbol);           /* ME_NIL if full */
struct me_user *me_user_get(struct me *me, uint64_t user);        /* create; NULL if full */
void me_user_put(struct me *me, struct me_user *u);               /* drop if empty */
/* Order oi became live: on its user's list (the user created, the caller checked room). */
void me_user_link(struct me *me, uint32_t oi);
/* Order oi stopped being live: off its user's list (the user dropped if empty). */
void me_user_unlink(struct me *me, uint32_t oi);
bool me_gtd_push(struct me *me, uint32_t oi);                     /* false if full */
uint32_t me_gtd_pop_due(struct me *me);          /* next valid order due at now_ns, or ME_NIL */

uint32_t me_gtd_peek_due(struct me *me);        /* same, left on the heap (stale dropped) */
/* Can the heap take n more entries, besides the room owed to held books (me->gtd_held)? */
bool me_gtd_fits(struct me *me, uint32_t n);
/* Drop every entry of book si's live orders from the heap (a move freezes it). */
void me_gtd_drop_book(struct me *me, uint32_t si);

/* ---- me_core.c: dispatch ---- */
void me_expire_due(struct me *me);                                /* GTD expiries at now_ns */

/* ---- me_bulk.c: ME-initiated bulk cancels, in chunks bounded by stream retention ---- */
/* Room in stream st for one more ME-initiated cancel (CANCELLED + DONE) while leaving the
 * events_reserve headroom to client requests. */
static inline bool me_bulk_room(const struct me *me, uint32_t st);
/* Queue a job (or find the same one queued) and run a step. 0, or -ENOSPC (queue full). */
int me_bulk_add(struct me *me, uint8_t kind, uint64_t id, uint8_t cause);
/* Is a job of this kind and id pending? */
bool me_bulk_pending(const struct me *me, uint8_t kind, uint64_t id);
/* Resume: due GTD expiries and pending jobs, each as far as retention and the step cap let
 * them (STREAM_ACK and tick). */
void me_bulk_resume(struct me *me);
/* A live maker that a pending bulk job or a deferred expiry is due to cancel: the cause to
 * cancel it with now, before it can trade, or 0. */
uint8_t me_bulk_doomed(struct me *me, uint32_t oi);

/* ---- me_move.c: live symbol moves ---- */
void me_symbol_move(struct me *me, const struct wire_symbol_move *m);  /* SYMBOL_MOVE */
void me_book_chunk(struct me *me, const struct wire_book_chunk *m);    /* BOOK_CHUNK */
/* The move (move_id, symbol index si) this engine knows, in any phase, or NULL. */
struct me_move *me_move_find(struct me *me, uint64_t move_id, uint32_t si);
/* Live order oi as a move carries it (op WIRE_BOOK_ADD). */
void me_move_order_export(struct me *me, uint32_t oi, struct wire_book_order *w);
/* Does move mv hold its book (FROZEN or INSTALLING)? A WATCHING move does not. */
static inline bool
me_move_holds(const struct me_move *mv)
{
	return mv->phase == ME_MOVE_FROZEN || mv->phase == ME_MOVE_INSTALLING;
}
/* The phase (ME_MOVE_FROZEN or ME_MOVE_INSTALLING) of the move that holds book si here, or
 * 0. A held book's orders are neither traded, modified, expired nor bulk-cancelled. One
 * load when no move is active, the common case. */
static inline uint8_t
me_move_hold(const struct me *me, uint32_t si)
{
	if (__builtin_expect(me->moves_active == 0, 1))
		return 0;
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++) {
		const struct me_move *mv = &me->moves[i];
		if (mv->move_id != 0 && mv->symbol == si && me_move_holds(mv))
			return mv->phase;
	}
	return 0;
}
/* The same for the book of live order oi. */
static inline uint8_t
me_move_hold_order(struct me *me, uint32_t oi)
{
	if (__builtin_expect(me->moves_active == 0, 1))
		return 0;
	const struct me_order *o = me_ord(me, oi);
	DCHECK(o->state == ME_ST_LIVE);
	return me_move_hold(me, me_lvl(me, o->level)->symbol);
}

/* ---- me_journal.c: the orderIds of a watched book's changes (WATCH) ---- */
/* Append live order oi's oid (its book is the watched one); on a full journal, mark it
 * overflowed instead. */
void me_journal_append(struct me *me, uint32_t oi);
/* The journal belongs to moves[slot] from now, empty; slot's symbol is watched. */
void me_journal_start(struct me *me, uint32_t slot);
/* Forget the journal: no book watched, no entries (zeroed), no owner. */
void me_journal_reset(struct me *me);
/* Order oi of book si changed a field a wire_book_order carries (leaves, cum, stream) while
 * resting, and stays: journal it when si is the watched book (me_move_change took care of
 * the hash before the change). The whole cost on the matching path is this one compare,
 * false but for a moving symbol. */
static inline void
me_move_touch(struct me *me, uint32_t si, uint32_t oi)
{
	if (__builtin_expect(si == me->watch_si, 0))
		me_journal_append(me, oi);
}

/* ---- me_move.c: the move hash, kept running (WATCHING source, INSTALLING target) ---- */
/* Book si's move hash by walking it in export order (the reference computation); its
 * orders and GTD orders to *count and *gtd when not NULL. */
uint64_t me_move_hash_walk(struct me *me, uint32_t si, uint32_t *count, uint32_t *gtd);
/* *hash of a book whose order oi was just appended at the tail of its level. */
void me_move_hash_rest(struct me *me, uint64_t *hash, uint32_t oi);
/* *hash of a book whose order oi is about to be unlinked (its links still in place). */
void me_move_hash_leave(struct me *me, uint64_t *hash, uint32_t oi);
/* *hash of a book whose order oi is about to take leaves, cum and stream (index) in place;
 * if it leaves the book afterwards, me_move_hash_leave hashes it with those. */
void me_move_hash_change(struct me *me, uint64_t *hash, uint32_t oi, int64_t leaves, int64_t cum,
			 uint16_t stream);
/* The watched book's journal, hash and GTD count (the WATCHING move's), for the hooks. */
void me_watch_rested(struct me *me, uint32_t oi);
void me_watch_leaving(struct me *me, uint32_t oi);
void me_watch_changing(struct me *me, uint32_t oi, int64_t leaves, int64_t cum, uint16_t stream);
/* Order oi was just appended at the tail of its level on book si (me_book_rest). */
static inline void
me_move_rest(struct me *me, uint32_t si, uint32_t oi)
{
	if (__builtin_expect(si == me->watch_si, 0))
		me_watch_rested(me, oi);
}
/* Order oi of book si is about to leave it, still linked (me_book_remove). */
static inline void
me_move_leave(struct me *me, uint32_t si, uint32_t oi)
{
	if (__builtin_expect(si == me->watch_si, 0))
		me_watch_leaving(me, oi);
}
/* Order oi of book si is about to take leaves, cum and stream (index) in place — whether it
 * stays (me_move_touch follows) or leaves after (me_book_remove follows): the watched
 * book's running hash takes the change now, while the old fields are there to subtract. */
static inline void
me_move_change(struct me *me, uint32_t si, uint32_t oi, int64_t leaves, int64_t cum,
	       uint16_t stream)
{
	if (__builtin_expect(si == me->watch_si, 0))
		me_watch_changing(me, oi, leaves, cum, stream);
}

/* ---- me_book.c: levels ---- */
/* Level at px on one side, or ME_NIL; *pos gets its (or its insertion) position. */
uint32_t me_book_find(struct me *me, uint32_t si, uint32_t side, int64_t px, uint32_t *pos);
void me_book_rest(struct me *me, uint32_t si, uint32_t oi);        /* append to its level */
void me_book_remove(struct me *me, uint32_t si, uint32_t oi);      /* unlink from its level */
/* Can an order rest at px on one side: a level there, or room for a new one? Room for a
 * new level means room for any price, so only a full side needs the search. Inline: every
 * order that may rest asks, and the answer is nearly always the first test's. */
static inline bool
me_book_can_rest(struct me *me, uint32_t si, uint32_t side, int64_t px)
{
	if (me->level_free != ME_NIL && me_sym(me, si)->side_count[side] < me->limits.levels_side_max)
		return true;
	uint32_t pos;
	return me_book_find(me, si, side, px, &pos) != ME_NIL;
}
/* Best level of one side (ME_NIL if empty). */
static inline uint32_t
me_book_best(struct me *me, uint32_t si, uint32_t side)
{
	uint32_t n = me_sym(me, si)->side_count[side];
	return n ? me_lrefs(me, si, side)[n - 1].level : ME_NIL;
}

/* ---- me_stream.c: events ---- */
/* me_stream_get (below) when the shard has no stream yet: create it; ME_NIL if full. */
uint32_t me_stream_add(struct me *me, uint16_t shard);
/* Move a record to FINAL and queue it for release once its stream ack covers it. */
void me_order_finish(struct me *me, uint32_t oi);
void me_result_emit(struct me *me, struct wire_oid oid, uint32_t oi, uint16_t reason);
void me_stream_ack(struct me *me, const struct wire_stream_ack *m);
/* Release acknowledged records whose dedup window has passed (every apply and tick). */
void me_streams_release_aged(struct me *me);
void me_stream_replay(struct me *me, const struct wire_replay_request *m);
void me_open_orders(struct me *me, const struct wire_open_orders_query *m);
void me_rebind(struct me *me, const struct wire_rebind *m);

/* ---- me_match.c: orders ---- */
void me_submit(struct me *me, const struct wire_submit *m);
void me_modify(struct me *me, const struct wire_modify *m);
/* Cancel a live order (ME- or user-initiated): CANCELLED(cause, contra) + DONE. */
void me_cancel_live(struct me *me, uint32_t oi, uint8_t cause, const struct wire_oid *contra);

/* ---- me_admin.c: symbols, halts, kill-switches ---- */
void me_symbol_config(struct me *me, const struct wire_symbol_config *m);
void me_symbol_status(struct me *me, const struct wire_symbol_status_msg *m);
void me_kill_switch(struct me *me, const struct wire_kill_switch *m);
void me_admin_reply(struct me *me, uint16_t reason, uint64_t value); /* ADMIN_REPLY */

/* ---- hot lookups and event emission, inline (no LTO across the part's files) ---- */

/* The bucket of hash h in a chained table (struct me_lhash): h mod 2 low when that bucket
 * is in use (split this round, or its buddy was), else h mod low. */
static inline uint32_t
me_lh_bucket(const struct me_lhash *lh, uint32_t h)
{
	uint32_t b = h & lh->mask;
	if (b >= lh->buckets)
		b -= lh->low;
	DCHECK(b < lh->buckets);
	return b;
}

/* Order record by oid: index or ME_NIL. */
/* The oid index chains records through their links (off_links, parallel to the records),
 * each with the low 32 bits of its oid's hash: a probe compares that tag before it touches a
 * record (one cache miss saved per collision), and a split or a removal finds an entry's
 * bucket from its tag alone. */
static inline uint32_t
me_order_find_tag(struct me *me, struct wire_oid oid, uint32_t tag)
{
	const uint32_t *heads = ME_ARR(me, off_index, uint32_t);
	const struct me_link *lk = ME_ARR(me, off_links, struct me_link);
	const struct me_order *o = me_orders(me);
	DCHECK(tag == me_oid_tag(oid));
	for (uint32_t v = heads[me_lh_bucket(&me->oid_lh, tag)]; v != 0; v = lk[v - 1].next) {
		DCHECK(v <= me->orders_hwm);
		if (lk[v - 1].hash == tag && wire_oid_eq(o[v - 1].oid, oid))
			return v - 1;
	}
	return ME_NIL;
}
static inline uint32_t
me_order_find(struct me *me, struct wire_oid oid)
{
	return me_order_find_tag(me, oid, me_oid_tag(oid));
}

/* Symbol index by id, or ME_NIL. */
static inline uint32_t
me_symbol_find(struct me *me, uint32_t symbol)
{
	uint32_t *ix = ME_ARR(me, off_symidx, uint32_t);
	uint32_t mask = me->sym_mask;
	for (uint32_t h = (uint32_t)me_mix64(symbol) & mask;; h = (h + 1) & mask) {
		uint32_t v = ix[h];
		if (v == 0)
			return ME_NIL;
		if (me_sym(me, v - 1)->symbol == symbol)
			return v - 1;
	}
}

/* The user table's hash of an account id. */
static inline uint32_t
me_user_hash(uint64_t user)
{
	return me_fold32(user);
}

/* User slot, or NULL if absent; h = me_user_hash(user). */
static inline struct me_user *
me_user_find_hash(struct me *me, uint64_t user, uint32_t h)
{
	struct me_user *u = ME_ARR(me, off_users, struct me_user);
	const uint32_t *heads = ME_ARR(me, off_user_heads, uint32_t);
	DCHECK(h == me_user_hash(user));
	for (uint32_t v = heads[me_lh_bucket(&me->user_lh, h)]; v != 0; v = u[v - 1].link.next) {
		DCHECK(v <= me->users_hwm);
		if (u[v - 1].user == user)
			return &u[v - 1];
	}
	return NULL;
}
static inline struct me_user *
me_user_find(struct me *me, uint64_t user)
{
	return me_user_find_hash(me, user, me_user_hash(user));
}

/* Stream index of an OMS shard, or ME_NIL. */
static inline uint32_t
me_stream_find(const struct me *me, uint16_t shard)
{
	uint16_t v = ME_CARR(me, off_stream_map, uint16_t)[shard];
	return v == 0 ? ME_NIL : (uint32_t)v - 1;
}

/* Stream index of an OMS shard, created if need be; ME_NIL if full. Inline: every request
 * asks, and all but the first of a shard find it in the map. */
static inline uint32_t
me_stream_get(struct me *me, uint16_t shard)
{
	DCHECK(me->streams_used <= me->limits.streams_max);
	uint32_t st = me_stream_find(me, shard);
	if (__builtin_expect(st == ME_NIL, 0))
		return me_stream_add(me, shard);
	DCHECK(st < me->streams_used);
	DCHECK(me_stream_at(me, st)->shard == shard);
	return st;
}

/* Retention slots left in a stream. */
static inline uint32_t
me_stream_free(const struct me *me, uint32_t st)
{
	const struct me_stream *s = &ME_CARR(me, off_streams, struct me_stream)[st];
	uint64_t used = s->next_seq - s->oldest;
	DCHECK(used <= me->limits.events_max);
	return me->limits.events_max - (uint32_t)used;
}

static inline bool
me_bulk_room(const struct me *me, uint32_t st)
{
	return me_stream_free(me, st) >= me->limits.events_reserve + 2;
}

/* Start an event about record oi in its stream, with its price, quantity and leaves; the
 * caller sets any other field of its own, then calls me_ev_emit. The stream's seq and the
 * record's last_seq advance here: between the two calls the caller only fills the event. */
static inline struct wire_me_event *
me_ev_begin(struct me *me, uint32_t oi, uint8_t event, int64_t px, int64_t qty, int64_t leaves)
{
	struct me_order *o = me_ord(me, oi);
	uint32_t st = o->stream;
	struct me_stream *s = me_stream_at(me, st);
	uint64_t seq = s->next_seq;
	if (seq - s->oldest >= me->limits.events_max) {
		/* Retention exhausted by an ME-initiated burst (requests are refused with
		 * BACKPRESSURE long before this): the oldest unacknowledged event is overwritten
		 * and can no longer be replayed. Counted; sized away by events_reserve. */
		s->oldest++;
		me_count(me, ME_C_EVENTS_OVERRUN);
	}
	struct wire_me_event *ev = &(ME_ARR(me, off_events, struct wire_me_event) + (size_t)st * me->limits.events_max)[(seq - 1) & me->events_mask];
	/* The record's fields are read before the event is written: the stores cannot alias
	 * them then, and none is loaded twice. */
	struct wire_oid oid = o->oid;
	uint32_t symbol = o->symbol;
	uint8_t side = o->side;
	/* Every byte written, field by field (no padding in wire structs, and no rep-stos
	 * zeroing on the hot path): replays and snapshots are exact. */
	ev->hdr.type = WIRE_ME_EVENT;
	ev->hdr.length = (uint16_t)sizeof(*ev);
	ev->hdr.shard = s->shard;
	ev->hdr.flags = 0;
	ev->seq = seq;
	ev->time_ns = me->now_ns;
	ev->oid = oid;
	ev->contra.user = 0;
	ev->contra.shard_seq = 0;
	ev->contra_user = 0;
	ev->trade_id = 0;
	ev->symbol = symbol;
	ev->event = event;
	ev->side = side;
	ev->liquidity = 0;
	ev->cause = 0;
	ev->reason = 0;
	ev->me_shard = me->limits.shard;
	ev->reserved1 = 0;
	ev->px = px;
	ev->qty = qty;
	ev->leaves_qty = leaves;
	ev->notional = 0;
	s->next_seq = seq + 1;
	o->last_seq = seq;
	me_count(me, ME_C_EVENTS);
	return ev;
}

/* Hand the event me_ev_begin started to the sink. */
static inline void
me_ev_emit(struct me *me, const struct wire_me_event *ev)
{
	svc_emit(me->rt.sink, WIRE_DEST_OMS, ev);
}

#endif

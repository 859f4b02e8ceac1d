/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me — the matching engine service: a pure, deterministic state machine that owns the order
 * books of the symbols mapped to one ME shard (seed: "sharding by the actor pattern", Option B:
 * one instance multiplexes many books, each a single writer).
 *
 * It is also a protocol participant (user-sharding seed, "Crossing to the matching engine"):
 * caller-chosen orderIds, dedup on them, idempotent re-query, exactly-once ordered lifecycle
 * events per OMS shard stream, and a per-user open-orders snapshot. docs/me-contract.md is the
 * contract; docs/me.md the operator page.
 *
 * Purity (ARCHITECTURE.md §2): no clock, no allocation, no I/O. Memory comes from the caller
 * (me_footprint, then me_init), time arrives with every call as now_ns, egress leaves through
 * the svc_sink given to each call.
 */
#ifndef OMSD_ME_ME_H
#define OMSD_ME_ME_H

#include <stddef.h>
#include <stdint.h>

#include "common/service.h"
#include "common/wire.h"

struct me;

/* Everything is sized from these at init; nothing grows afterwards. */
struct me_limits {
	uint16_t shard;           /* this ME shard: a symbol is ours iff its me_shard equals it */
	uint16_t streams_max;     /* OMS shards we keep event streams for */
	uint32_t symbols_max;     /* symbol configs (owned or not) */
	uint32_t orders_max;      /* order records: live orders + finished, unacked dedup records */
	uint32_t users_max;       /* users with live orders or an engaged kill-switch */
	uint32_t levels_max;      /* price levels over all books */
	uint32_t levels_side_max; /* price levels on one side of one book */
	uint32_t gtd_max;         /* pending GTD expiry entries */
	uint32_t events_max;      /* retained events per stream; a power of two */
	uint32_t events_reserve;  /* free slots below which new requests get BACKPRESSURE */
	uint32_t replay_max;      /* events re-emitted per REPLAY_REQUEST; 0 = 128 */
	uint64_t dedup_ttl_ns;    /* cluster time a finished order's dedup record outlives its
				   * ack (the idempotency window for late re-sends); 0 = none */
};

/* One aggregated price level of an L2 depth answer. */
struct me_depth_level {
	int64_t px;      /* level price */
	int64_t qty;     /* sum of leaves at that price */
	uint32_t count;  /* resting orders at that price */
	uint32_t reserved;
};

/* Counters: single writer (the shard lcore), read by mgmt. X(name, label). */
#define ME_COUNTERS(X)                                                                     \
	X(SUBMITS, "submits applied (duplicates included)")                               \
	X(ACCEPTED, "orders accepted")                                                     \
	X(REJECTED, "orders rejected")                                                     \
	X(DUPLICATES, "submits or modifies answered from the dedup table")                \
	X(MODIFIES, "cancel/amend/replace requests applied")                              \
	X(MODIFY_REJECTED, "cancel/amend/replace requests refused")                       \
	X(TRADES, "trades (one per maker/taker pair)")                                    \
	X(EXPIRED, "GTD orders expired")                                                   \
	X(STP, "orders cancelled by self-trade prevention")                               \
	X(KILLED, "orders cancelled by a kill-switch")                                    \
	X(HALT_CANCELLED, "orders cancelled by a halt")                                   \
	X(EVENTS, "sequenced events emitted")                                              \
	X(REPLAYED, "events re-emitted by replay requests")                                \
	X(BACKPRESSURE, "requests refused because a stream is near its retention bound")  \
	X(RETENTION_STOP, "matches stopped early because a stream had no retention left") \
	X(EVENTS_OVERRUN, "ME-initiated events written over unacknowledged retention")    \
	X(CONFIG_REJECTED, "admin messages refused")                                       \
	X(IGNORED, "messages of a type the ME does not handle, or malformed")             \
	X(STALE_REQUESTS, "requests older than half the dedup window, dropped unexecuted") \
	X(BULK_JOBS, "bulk cancel jobs started (halt or kill-switch with resting orders)") \
	X(BULK_PENDING, "bulk cancel jobs not finished yet (a gauge, not a count)")      \
	X(BULK_CANCELLED, "orders cancelled by bulk cancel jobs")                         \
	X(BULK_DEFERRED, "bulk steps stopped for lack of stream retention (resume on ack)")  \
	X(REBINDS, "live orders moved to another OMS shard's stream (REBIND_TO_ME)")          \
	X(REBIND_IGNORED, "REBIND_TO_ME for an order not live on the sender's stream")

enum me_counter {
#define ME_COUNTER_ENUM(name, label) ME_C_##name,
	ME_COUNTERS(ME_COUNTER_ENUM)
#undef ME_COUNTER_ENUM
	ME_C_COUNT,
};

/* Bytes of caller memory for these limits (64-byte aligned), or 0 if they are invalid. */
size_t me_footprint(const struct me_limits *limits);

/* Bytes of that footprint that scale with orders_max (records, oid index, GTD heap, users,
 * levels), divided by orders_max: the per-order memory cost reported by the benchmark. */
size_t me_bytes_per_order(const struct me_limits *limits);

/*
 * Initialise an empty engine in `memory` (at least me_footprint(limits) bytes, 64-byte
 * aligned). Returns 0 and sets *out, or -EINVAL for invalid limits or memory. The engine must
 * not be moved by copying its memory (a runtime header caches pointers into it); move state
 * with me_snapshot / me_restore.
 */
int me_init(struct me **out, void *memory, const struct me_limits *limits);

/*
 * Apply one committed message at cluster time now_ns (non-decreasing). Due GTD expiries run
 * first, as far as their streams have retention (me_bulk.c); a STREAM_ACK or TICK also
 * resumes pending bulk cancels (halt with cancel, kill-switches). Egress (ME_EVENT, ME_RESULT, OPEN_ORDERS_SNAPSHOT, ADMIN_REPLY) goes to sink.
 * Handles SUBMIT, CANCEL_TO_ME, AMEND_TO_ME, REPLACE_TO_ME, STREAM_ACK, REPLAY_REQUEST,
 * ORDER_QUERY, OPEN_ORDERS_QUERY, SYMBOL_CONFIG, SYMBOL_STATUS, KILL_SWITCH and TICK; other
 * types are counted and ignored. msg must be readable for hdr.length bytes.
 */
void me_apply(struct me *me, uint64_t now_ns, const struct wire_msg_hdr *msg,
	      struct svc_sink *sink);

/* Cluster time moved to now_ns: run due GTD expiries and pending bulk cancels, as far as
 * stream retention lets them (me_bulk.c). */
void me_tick(struct me *me, uint64_t now_ns, struct svc_sink *sink);

/* L2 depth: up to n levels of one side of `symbol`, best first. Returns levels written
 * (0 for an unknown symbol). */
uint32_t me_depth(const struct me *me, uint32_t symbol, enum wire_side side,
		  struct me_depth_level *out, uint32_t n);

/* The fields a symbol's record in the engine (struct me_symbol, me_int.h) and its public
 * view below share, in this order: one list, so the two cannot drift, and the view copies
 * them as one block. */
#define ME_SYMBOL_SHARED_FIELDS                                                              \
	uint32_t symbol;        /* symbol id */                                              \
	uint16_t me_shard;      /* owning ME shard */                                        \
	uint8_t status;         /* enum wire_symbol_status */                                \
	uint8_t killed;         /* symbol kill-switch engaged */                             \
	uint32_t base_asset;    /* asset bought and sold */                                  \
	uint32_t quote_asset;   /* asset prices are in */                                    \
	int64_t tick;           /* price grid */                                             \
	int64_t lot;            /* quantity grid */                                          \
	int64_t min_qty;        /* smallest order quantity */                                \
	int64_t min_notional;   /* smallest order notional */                                \
	int64_t base_unit;      /* notional = px * qty / base_unit */                        \
	int64_t ref_px;         /* configured band reference */                              \
	int64_t last_px;        /* last trade price, 0 before the first trade */

/* One configured symbol as this engine holds it (mgmt: symbols list; bootstrap: does the
 * replica already know it). */
struct me_symbol_info {
	ME_SYMBOL_SHARED_FIELDS
	uint32_t band_bps;
	uint32_t resting;       /* live orders on this book */
	uint64_t trade_seq;     /* trades so far (the last trade's number) */
};

/* Symbols configured (owned or not); they are numbered 0..count-1 in configuration order. */
uint32_t me_symbol_count(const struct me *me);
/* The i-th configured symbol: 0, or -ENOENT when i >= me_symbol_count. */
int me_symbol_at(const struct me *me, uint32_t i, struct me_symbol_info *out);
/* Symbol by id: 0, or -ENOENT. */
int me_symbol_get(const struct me *me, uint32_t symbol, struct me_symbol_info *out);

/* One OMS shard's event stream as this engine holds it (read-only: tests, debugging). */
struct me_stream_info {
	uint64_t next_seq;      /* seq the next event gets (first is 1) */
	uint64_t acked;         /* highest seq the OMS shard acknowledged */
	uint64_t oldest;        /* lowest seq still retained */
	uint16_t shard;         /* the OMS shard id */
	uint16_t reserved[3];
};

/* The i-th stream created (0 first): 0, or -ENOENT past the last one. */
int me_stream_info_at(const struct me *me, uint32_t i, struct me_stream_info *out);

/* Orders resting on all books. */
uint32_t me_orders_resting(const struct me *me);
/* Order records in use (resting + finished-but-unacknowledged + modify requests). */
uint32_t me_records_used(const struct me *me);
uint64_t me_counter(const struct me *me, enum me_counter c);
const char *me_counter_label(enum me_counter c);

/* ---- live symbol moves (me_move.c; docs/me.md "Moving a symbol with its book") ----
 * SYMBOL_MOVE OUT freezes a book on its source shard: no order enters, trades, expires or
 * is modified there (SYMBOL_MOVING), and the book is counted and hashed (me_move_order_hash).
 * BOOK_CHUNKs carry it into the target's log, which installs it inert (the target does not
 * own the symbol yet); IN checks count and hash and opens it there; DONE drops the frozen
 * copy on the source and gives the symbol up; ABORT undoes either side before IN.
 * WATCH, before a copy of the trading book is read, makes the source journal the orderId of
 * every change to that book (an order rests, leaves, fills, is amended or rebound) until
 * OUT, so that after the freeze only the journaled orders need reading
 * (me_move_journal_export) instead of the whole book. */

/* Journal entries one WATCH holds (the engine's region has room for them, 16 bytes each);
 * a move with more changes between its WATCH and OUT loses its journal (journal_ok 0). */
#define ME_JOURNAL_MAX 65536

enum me_move_role {
	ME_MOVE_SOURCE = 1,
	ME_MOVE_TARGET = 2,
};

enum me_move_phase {
	ME_MOVE_FROZEN = 1,     /* source: the book is frozen, waiting to be dropped (DONE) */
	ME_MOVE_INSTALLING = 2, /* target: chunks are being installed, the symbol not owned */
	ME_MOVE_FINISHED = 3,   /* either: done (kept so a repeated step is answered again) */
	ME_MOVE_WATCHING = 4,   /* source: trading, the book's changes journaled (WATCH) */
};

/* The move of one symbol as this engine knows it. */
#define ME_MOVE_NEED_MAX 8

struct me_move_info {
	uint64_t move_id;
	uint64_t hash;          /* source: the frozen book's (watching: the book's as it trades);
				 * target: what is installed so far */
	uint32_t count;         /* source: frozen orders; target: orders installed so far */
	uint32_t next_chunk;    /* target: the chunk seq it takes next */
	uint32_t journal;       /* source, watching or frozen: entries journaled for this move
				 * (duplicates included) */
	uint16_t peer;          /* source: the target shard; target: the source shard */
	uint8_t role;           /* enum me_move_role */
	uint8_t phase;          /* enum me_move_phase */
	uint8_t ready;          /* source, frozen: every event of this engine's streams is
				 * acknowledged (so every one about the frozen orders: the
				 * target may open it); me_move_ready answers the exact
				 * question, walking the book */
	uint8_t journal_ok;     /* 1: the journal of this move is complete (it belongs to this
				 * move_id since its WATCH and never overflowed) */
	/* Source, frozen and not ready: per OMS shard whose stream has events not acknowledged,
	 * the stream's last seq. An OMS replica that applied its stream of this engine that
	 * far holds every event about the frozen orders (none is emitted while they are
	 * frozen), committed: what ready stands for, without waiting for the acknowledgement
	 * and its commit in this log. Read off the streams, not the book. */
	uint8_t need_n;         /* entries in need_shard / need_seq */
	uint8_t need_over;      /* 1: more OMS shards than ME_MOVE_NEED_MAX wait */
	uint8_t reserved[4];
	uint16_t need_shard[ME_MOVE_NEED_MAX];
	uint64_t need_seq[ME_MOVE_NEED_MAX];
};

/* The newest move of `symbol` this engine knows: 0, or -ENOENT. */
int me_move_info(const struct me *me, uint32_t symbol, struct me_move_info *out);
/* Source, frozen: 1 when every event about a frozen order is acknowledged by its OMS shard,
 * else 0 (walks the frozen book); -ENOENT when the newest move of the symbol is not one. */
int me_move_ready(const struct me *me, uint32_t symbol);

/* Source: up to n orders of the frozen book of move_id, from the from-th in export order
 * (best level first, time priority within a level; bids, then asks). Returns the orders
 * written (0 past the end), or -ENOENT when the book is not frozen here by move_id.
 * move_id 0: the book as it is, frozen or not (the copy a move makes while it trades). */
int me_move_export(const struct me *me, uint32_t symbol, uint64_t move_id, uint32_t from,
		   struct wire_book_order *out, uint32_t n);

/* Source: the journal of the move frozen on `symbol` by move_id, entries [from, from + n)
 * in the order the changes happened (an order may appear more than once). Each entry is
 * what me_move_export writes for that order with op WIRE_BOOK_UPDATE when the order rests
 * on the frozen book, else only its oid with op WIRE_BOOK_REMOVE (every other field zero).
 * Starting from a copy of the book read after WATCH, REMOVEs delete, UPDATEs replace in
 * place or, for orders not in the copy, append at the tail of their level in the order of
 * their first entries: that gives the frozen book in export order. Read-only. Returns the
 * entries written (0 past the end), -ENOENT when the book is not frozen here by move_id,
 * -EOVERFLOW when its journal is not complete (no WATCH of this move_id before OUT, another
 * move's WATCH replaced it, or it overflowed ME_JOURNAL_MAX): read the whole book with
 * me_move_export then. */
int me_move_journal_export(const struct me *me, uint32_t symbol, uint64_t move_id,
			   uint32_t from, struct wire_book_order *out, uint32_t n);

/* The move hash both sides compute over a book: H = sum of me_move_order_hash(symbol, rec,
 * pred) over its orders, mod 2^64, where rec is the order as me_move_export writes it (op
 * WIRE_BOOK_ADD, i.e. 0) and pred the oid of the order before it on its level (all zero for
 * the oldest order of a level). The term of one order is
 *   XXH3_64bits_withSeed(rec, sizeof *rec, me_move_hash_init(symbol) ^ XXH3_64bits(&pred, 16))
 * with me_move_hash_init(symbol) = fmix64(0x45564f4d4b4f4f42 ^ symbol) (MurmurHash3's
 * finaliser). Since each term names its predecessor, two books with the same sum hold the
 * same records in the same sequence on every level (time priority kept); the sum lets both
 * sides keep it up to date change by change instead of walking the book. An empty book
 * hashes 0. */
uint64_t me_move_hash_init(uint32_t symbol);
uint64_t me_move_order_hash(uint32_t symbol, const struct wire_book_order *rec,
			    struct wire_oid pred);

/* Snapshot/restore: the whole state, byte-exact and deterministic (svc_ops semantics). */
size_t me_snapshot_size(const struct me *me);
size_t me_snapshot(const struct me *me, void *buf, size_t cap);
int me_restore(struct me *me, const void *buf, size_t len);
uint64_t me_state_hash(const struct me *me);

/* The service table consensus hosts (svc is the struct me *). */
extern const struct svc_ops me_svc_ops;

#endif

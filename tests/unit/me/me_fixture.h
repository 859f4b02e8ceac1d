/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test fixture for the me suites: one engine in heap memory, a sink that captures every
 * egress message, builders for each request, lookups over the captured events, and an
 * invariant checker that walks the books (never crossed at rest, level sums exact, FIFO
 * links consistent, counts agree).
 */
#ifndef OMSD_TESTS_ME_FIXTURE_H
#define OMSD_TESTS_ME_FIXTURE_H

#include <stdint.h>

#include "me/me.h"
#include "me/me_int.h"

#define FX_SYM 1          /* the default symbol: tick 10, lot 1, base_unit 1 */
#define FX_CAP_MAX 16384  /* captured messages between resets */
#define FX_MSG_MAX 704    /* largest captured message */

struct fx_cap {
	enum wire_dest dest;
	union {
		struct wire_msg_hdr hdr;
		struct wire_me_event ev;
		struct wire_me_result res;
		struct wire_open_orders_snapshot snap;
		struct wire_admin_reply admin;
		uint8_t bytes[FX_MSG_MAX];
	} u;
};

extern struct me *fx_me;
extern struct me_limits fx_limits;
extern uint64_t fx_now;
extern struct fx_cap *fx_caps;
extern uint32_t fx_cap_count;
extern struct svc_sink fx_sink;

void fx_setup(void);                 /* default limits, FX_SYM configured, trading */
void fx_setup_limits(const struct me_limits *l);
void fx_teardown(void);
void fx_check_invariants(void);
void fx_check_move_hashes(struct me *e); /* running move hashes == a walk (in invariants) */
/* The oid index and the user table of e as linear hashing keeps them (in invariants): every
 * entry in use chained once, in its bucket, no bucket past those in use, free slots zeroed
 * and on their free lists, one entry per bucket at most, each user's count its orders. */
void fx_check_tables(struct me *e);
void fx_fini(void);                  /* .fini of every test: invariants, then teardown */
struct me *fx_new_engine(const struct me_limits *l); /* a second engine (freed at teardown) */

void fx_reset(void);                 /* forget captured messages */
void fx_apply(const void *msg);      /* apply at fx_now */
void fx_tick(uint64_t now_ns);

/* Admin. */
uint16_t fx_config(uint32_t sym, int64_t tick, int64_t lot, int64_t min_qty, int64_t min_notional,
		   int64_t base_unit, int64_t ref_px, uint32_t band_bps, uint16_t shard);
uint16_t fx_status(uint32_t sym, uint8_t status, uint8_t cancel_resting);
uint16_t fx_kill(uint8_t scope, uint64_t id, uint8_t engage);

/* Orders; user u, user_seq seq, OMS shard 0 unless fx_oms_shard is set. */
extern uint16_t fx_oms_shard;
struct wire_oid fx_oid(uint64_t user, uint64_t seq);
struct wire_submit fx_order(uint64_t user, uint64_t seq, uint8_t side, uint8_t type, uint8_t tif,
			    int64_t px, int64_t qty);
void fx_submit(const struct wire_submit *s);
void fx_limit(uint64_t user, uint64_t seq, uint8_t side, int64_t px, int64_t qty, uint8_t tif);
void fx_gtc(uint64_t user, uint64_t seq, uint8_t side, int64_t px, int64_t qty);
void fx_market_sell(uint64_t user, uint64_t seq, int64_t qty);
void fx_market_buy(uint64_t user, uint64_t seq, int64_t quote);
void fx_modify(uint16_t type, uint64_t user, uint64_t req, uint64_t target, int64_t px, int64_t qty);
void fx_cancel(uint64_t user, uint64_t req, uint64_t target);
void fx_rebind(uint64_t user, uint64_t seq, uint16_t from, uint16_t to); /* REBIND_TO_ME */
void fx_amend(uint64_t user, uint64_t req, uint64_t target, int64_t qty);
void fx_replace(uint64_t user, uint64_t req, uint64_t target, int64_t px, int64_t qty);
void fx_ack(uint16_t stream, uint64_t seq);
void fx_replay(uint16_t stream, uint64_t from_seq);
void fx_query(uint64_t user, uint64_t seq);

/* Captured events. */
uint32_t fx_events(void);                               /* ME_EVENTs captured */
const struct wire_me_event *fx_ev(uint32_t i);          /* i-th ME_EVENT */
/* n-th (0-based) event of type `event` about order (user, seq); NULL if none. */
const struct wire_me_event *fx_find(uint64_t user, uint64_t seq, uint8_t event, uint32_t n);
uint32_t fx_count(uint64_t user, uint64_t seq, uint8_t event);
/* Events about (user, seq) that say the ME took the order (WIRE_EV_F_ENTERED): 1 for an
 * order entered once, 0 for one refused. */
uint32_t fx_entered(uint64_t user, uint64_t seq);
/* Events about (user, seq) that end it: a DONE (a market buy's spent budget) or the event
 * that says so (WIRE_EV_F_DONE: the FILL of its last leaves, a CANCELLED, an AMENDED to 0);
 * and the first of them, or NULL. */
uint32_t fx_done(uint64_t user, uint64_t seq);
const struct wire_me_event *fx_done_ev(uint64_t user, uint64_t seq);
const struct wire_me_result *fx_result(void);          /* last ME_RESULT, or NULL */
const struct wire_admin_reply *fx_admin(void);         /* last ADMIN_REPLY, or NULL */
/* Reason of the REJECTED / CANCEL_REJECTED event about (user, seq), or -1 if none. */
int fx_reject_reason(uint64_t user, uint64_t seq);

/* Symbol moves: the move journal (me_journal.c). */
/* Apply journal entries jr[0, nj) (me_move_journal_export) to book[0, n), a copy in export
 * order: a REMOVE deletes its order if present, an UPDATE replaces it in place, or, for an
 * order not in the book, appends it at the tail of its level (levels in export order).
 * Returns the new count; the book has room for cap orders. */
uint32_t fx_journal_apply(struct wire_book_order *book, uint32_t n, uint32_t cap,
			  const struct wire_book_order *jr, uint32_t nj);
/* Engine e's move move_id is FROZEN on `sym` with a complete journal, and copy[0, nc) (the
 * book exported any time after its WATCH, before the next apply) with the journal applied
 * is exactly the frozen book's export, order by order. Returns the journal's length. */
uint32_t fx_check_journal(struct me *e, uint32_t sym, uint64_t move_id,
			  const struct wire_book_order *copy, uint32_t nc);

/* Book. */
int64_t fx_best(uint8_t side);                          /* 0 if empty */
int64_t fx_depth_qty(uint8_t side, int64_t px);         /* qty at px */
/* State of order (user, seq): its record, or NULL if unknown. */
const struct me_order *fx_rec(uint64_t user, uint64_t seq);

#endif

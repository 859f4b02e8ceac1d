/* SPDX-License-Identifier: Apache-2.0 */
#include "me_fixture.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

struct me *fx_me;
struct me_limits fx_limits;
uint64_t fx_now;
struct fx_cap *fx_caps;
uint32_t fx_cap_count;
uint16_t fx_oms_shard;
static void *fx_mem;
static void *fx_extra[4];
static uint32_t fx_extra_count;

static void
capture(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	cr_assert(msg->length <= FX_MSG_MAX);
	/* Everything the ME emits must pass the wire codec the bridge and the OMS use. */
	uint16_t len = 0;
	enum wire_err err = wire_msg_check(msg, msg->length, &len);
	cr_assert_eq(err, WIRE_E_OK, "egress %s fails the codec: %s", wire_type_name(msg->type),
		     wire_err_text(err));
	cr_assert_eq(len, msg->length);
	cr_assert(fx_cap_count < FX_CAP_MAX, "fixture capture overflow");
	struct fx_cap *c = &fx_caps[fx_cap_count++];
	c->dest = dest;
	memcpy(c->u.bytes, msg, msg->length);
}

struct svc_sink fx_sink = {.ctx = NULL, .emit = capture};

static const struct me_limits default_limits = {
	.shard = 0,
	.streams_max = 4,
	.symbols_max = 8,
	.orders_max = 4096,
	.users_max = 1024,
	.levels_max = 1024,
	.levels_side_max = 256,
	.gtd_max = 256,
	.events_max = 8192,
	.events_reserve = 64,
};

struct me *
fx_new_engine(const struct me_limits *l)
{
	size_t fp = me_footprint(l);
	cr_assert(fp > 0);
	cr_assert(fx_extra_count < 4);
	void *mem = aligned_alloc(64, (fp + 63) & ~(size_t)63);
	cr_assert(mem != NULL);
	fx_extra[fx_extra_count++] = mem;
	struct me *e;
	cr_assert(me_init(&e, mem, l) == 0);
	return e;
}

void
fx_setup_limits(const struct me_limits *l)
{
	fx_limits = *l;
	size_t fp = me_footprint(l);
	cr_assert(fp > 0);
	fx_mem = aligned_alloc(64, (fp + 63) & ~(size_t)63);
	cr_assert(fx_mem != NULL);
	cr_assert(me_init(&fx_me, fx_mem, l) == 0);
	fx_caps = calloc(FX_CAP_MAX, sizeof(*fx_caps));
	cr_assert(fx_caps != NULL);
	fx_cap_count = 0;
	fx_now = 1000;
	fx_oms_shard = 0;
	cr_assert(fx_config(FX_SYM, 10, 1, 1, 0, 1, 0, 0, l->shard) == WIRE_REASON_NONE);
	fx_reset();
}

void
fx_setup(void)
{
	fx_setup_limits(&default_limits);
}

void
fx_teardown(void)
{
	free(fx_mem);
	free(fx_caps);
	for (uint32_t i = 0; i < fx_extra_count; i++)
		free(fx_extra[i]);
	fx_extra_count = 0;
	fx_mem = NULL;
	fx_caps = NULL;
	fx_me = NULL;
}

/* Walk every book: sorted sides, uncrossed, level sums and FIFO links exact. */
void
fx_check_invariants(void)
{
	struct me *me = fx_me;
	uint32_t resting = 0;
	for (uint32_t si = 0; si < me->symbols_used; si++) {
		struct me_symbol *s = me_sym(me, si);
		uint32_t sym_resting = 0;
		for (uint32_t side = 0; side < 2; side++) {
			struct me_lref *r = me_lrefs(me, si, side);
			for (uint32_t k = 0; k < s->side_count[side]; k++) {
				if (k > 0) {
					/* worst → best: bids ascending, asks descending */
					if (side == 0)
						cr_assert(r[k - 1].px < r[k].px);
					else
						cr_assert(r[k - 1].px > r[k].px);
				}
				struct me_level *l = me_lvl(me, r[k].level);
				cr_assert(l->px == r[k].px);
				int64_t sum = 0;
				uint32_t n = 0;
				uint32_t prev = ME_NIL;
				for (uint32_t oi = l->head; oi != ME_NIL; oi = me_ord(me, oi)->next) {
					struct me_order *o = me_ord(me, oi);
					cr_assert(o->state == ME_ST_LIVE);
					cr_assert(o->level == r[k].level);
					cr_assert(o->prev == prev);
					cr_assert(o->leaves > 0);
					cr_assert(o->px == l->px);
					cr_assert(o->symbol == s->symbol);
					cr_assert(me_side_ix(o->side) == side);
					sum += o->leaves;
					n++;
					prev = oi;
				}
				cr_assert(l->tail == prev);
				cr_assert(l->qty == sum, "level qty %ld != %ld", (long)l->qty, (long)sum);
				cr_assert(l->count == n);
				sym_resting += n;
			}
		}
		/* Never crossed at rest. */
		uint32_t b = me_book_best(me, si, 0), a = me_book_best(me, si, 1);
		if (b != ME_NIL && a != ME_NIL)
			cr_assert(me_lvl(me, b)->px < me_lvl(me, a)->px, "book crossed");
		cr_assert(s->resting == sym_resting);
		resting += sym_resting;
	}
	cr_assert(me->resting == resting);
	/* Every record in use is indexed; every free one is not. */
	uint32_t used = 0;
	for (uint32_t i = 0; i < me->limits.orders_max; i++) {
		struct me_order *o = me_ord(me, i);
		if (o->state == ME_ST_FREE)
			continue;
		used++;
		cr_assert(me_order_find(me, o->oid) == i);
		cr_assert(o->state != ME_ST_ACTIVE);
	}
	cr_assert(used == me->records_used);
	fx_check_tables(me);
	/* The move journal: owned by a WATCHING source (its book the watched one) or by a
	 * FROZEN one (nothing watched), else empty; every WATCHING move owns it; the entries
	 * past its length are zero (a look at the next few). */
	cr_assert(me->journal_n <= ME_JOURNAL_MAX);
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++)
		if (me->moves[i].move_id != 0 && me->moves[i].phase == ME_MOVE_WATCHING)
			cr_assert_eq(me->journal_slot, i);
	if (me->journal_slot == ME_NIL) {
		cr_assert_eq(me->watch_si, ME_NIL);
		cr_assert_eq(me->journal_n, 0);
		cr_assert_eq(me->journal_overflow, 0);
	} else {
		cr_assert(me->journal_slot < ME_MOVES_MAX);
		const struct me_move *mv = &me->moves[me->journal_slot];
		cr_assert_eq(mv->role, ME_MOVE_SOURCE);
		if (mv->phase == ME_MOVE_WATCHING)
			cr_assert_eq(me->watch_si, mv->symbol);
		else
			cr_assert(mv->phase == ME_MOVE_FROZEN && me->watch_si == ME_NIL);
	}
	const struct wire_oid *j = ME_CARR(me, off_journal, struct wire_oid);
	for (uint32_t k = me->journal_n; k < ME_JOURNAL_MAX && k < me->journal_n + 256; k++)
		cr_assert(j[k].user == 0 && j[k].shard_seq == 0, "journal entry %u past the end", k);
	fx_check_move_hashes(me);
}

/* A chained table's linear hashing state (struct me_lhash) is one a round can be in. */
static void
check_lhash(const struct me_lhash *lh, uint32_t entries)
{
	cr_assert(lh->low >= lh->min);
	cr_assert_eq(lh->low & (lh->low - 1), 0);
	cr_assert(lh->buckets >= lh->low && lh->buckets < 2 * lh->low);
	cr_assert(lh->buckets <= lh->max);
	cr_assert_eq(lh->mask, 2 * lh->low - 1);
	cr_assert_eq(lh->shrink_below, lh->buckets > lh->min ? (lh->buckets + 3) / 4 : 0);
	/* Splits keep at most one entry per bucket. */
	cr_assert(entries <= lh->buckets, "%u entries in %u buckets", entries, lh->buckets);
}

void
fx_check_tables(struct me *e)
{
	const struct me_lhash *lh = &e->oid_lh;
	check_lhash(lh, e->records_used);
	const uint32_t *heads = ME_CARR(e, off_index, uint32_t);
	const struct me_link *lk = ME_CARR(e, off_links, struct me_link);
	uint32_t chained = 0;
	for (uint32_t b = 0; b < lh->buckets; b++) {
		for (uint32_t v = heads[b]; v != 0; v = lk[v - 1].next) {
			cr_assert(v <= e->orders_hwm, "bucket %u: record %u past the high-water mark", b,
				  v - 1);
			cr_assert(++chained <= e->records_used, "bucket %u: more entries than records", b);
			const struct me_order *o = me_ord(e, v - 1);
			cr_assert(o->state != ME_ST_FREE);
			cr_assert_eq(lk[v - 1].hash, me_oid_tag(o->oid));
			cr_assert_eq(me_lh_bucket(lh, lk[v - 1].hash), b, "record %u chained in bucket %u",
				     v - 1, b);
		}
	}
	cr_assert_eq(chained, e->records_used);
	for (uint32_t b = lh->buckets; b < lh->max; b++)
		cr_assert_eq(heads[b], 0, "bucket %u past the %u in use", b, lh->buckets);
	for (uint32_t i = 0; i < e->limits.orders_max; i++)
		if (i >= e->orders_hwm || me_ord(e, i)->state == ME_ST_FREE)
			cr_assert(lk[i].hash == 0 && lk[i].next == 0, "free record %u keeps a link", i);

	/* Users: the chained ones in use, the rest zero and on the free list. */
	lh = &e->user_lh;
	check_lhash(lh, e->users_used);
	heads = ME_CARR(e, off_user_heads, uint32_t);
	const struct me_user *u = ME_CARR(e, off_users, struct me_user);
	chained = 0;
	for (uint32_t b = 0; b < lh->buckets; b++) {
		for (uint32_t v = heads[b]; v != 0; v = u[v - 1].link.next) {
			cr_assert(v <= e->users_hwm);
			cr_assert(++chained <= e->users_used);
			const struct me_user *x = &u[v - 1];
			cr_assert((x->count & ME_USER_USED) != 0);
			cr_assert((x->count & ~ME_USER_USED) != 0, "user %lu: no orders, no kill, kept",
				  (unsigned long)x->user);
			cr_assert_eq(x->link.hash, me_user_hash(x->user));
			cr_assert_eq(me_lh_bucket(lh, x->link.hash), b);
			cr_assert_eq(me_user_find(e, x->user), x);
			/* Its count is its live orders, on its circular list. */
			uint32_t n = 0;
			if (x->head != ME_NIL) {
				uint32_t oi = x->head;
				do {
					const struct me_order *o = me_ord(e, oi);
					cr_assert_eq(o->state, ME_ST_LIVE);
					cr_assert_eq(o->oid.user, x->user);
					cr_assert(++n <= e->records_used);
					oi = o->unext;
				} while (oi != x->head);
			}
			cr_assert_eq(n, x->count & ME_USER_COUNT);
		}
	}
	cr_assert_eq(chained, e->users_used);
	for (uint32_t b = lh->buckets; b < lh->max; b++)
		cr_assert_eq(heads[b], 0);
	uint32_t free_n = 0;
	for (uint32_t v = e->user_free; v != 0; v = u[v - 1].link.next) {
		cr_assert(v <= e->users_hwm);
		cr_assert(++free_n <= e->users_hwm);
		cr_assert(u[v - 1].user == 0 && u[v - 1].count == 0 && u[v - 1].link.hash == 0);
	}
	cr_assert_eq(free_n + e->users_used, e->users_hwm);
	for (uint32_t i = e->users_hwm; i < e->limits.users_max; i++)
		cr_assert(u[i].user == 0 && u[i].count == 0 && u[i].link.next == 0);
}

/* The running move hashes (me_move.c): a WATCHING move's hash and GTD count, an
 * INSTALLING move's hash and count, are what walking the book gives. */
void
fx_check_move_hashes(struct me *e)
{
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++) {
		const struct me_move *mv = &e->moves[i];
		if (mv->move_id == 0)
			continue;
		if (mv->phase != ME_MOVE_WATCHING && mv->phase != ME_MOVE_INSTALLING)
			continue;
		uint32_t count, gtd;
		uint64_t walk = me_move_hash_walk(e, mv->symbol, &count, &gtd);
		cr_assert_eq(mv->hash, walk, "move %lu (phase %u): running hash %016lx, walk %016lx",
			     (unsigned long)mv->move_id, mv->phase, (unsigned long)mv->hash,
			     (unsigned long)walk);
		if (mv->phase == ME_MOVE_WATCHING)
			cr_assert_eq(mv->gtd_held, gtd, "watched GTD orders %u, walk %u", mv->gtd_held,
				     gtd);
		else
			cr_assert_eq(mv->count, count);
	}
}

void
fx_fini(void)
{
	fx_check_invariants();
	fx_teardown();
}

void
fx_reset(void)
{
	fx_cap_count = 0;
}

void
fx_apply(const void *msg)
{
	me_apply(fx_me, fx_now, msg, &fx_sink);
}

void
fx_tick(uint64_t now_ns)
{
	fx_now = now_ns;
	me_tick(fx_me, now_ns, &fx_sink);
}

uint16_t
fx_config(uint32_t sym, int64_t tick, int64_t lot, int64_t min_qty, int64_t min_notional,
	  int64_t base_unit, int64_t ref_px, uint32_t band_bps, uint16_t shard)
{
	struct wire_symbol_config c;
	memset(&c, 0, sizeof(c));
	wire_hdr_init(&c.hdr, WIRE_SYMBOL_CONFIG, 0);
	c.symbol = sym;
	c.base_asset = 1;
	c.quote_asset = 2;
	c.me_shard = shard;
	c.status = WIRE_SYM_TRADING;
	c.tick = tick;
	c.lot = lot;
	c.min_qty = min_qty;
	c.min_notional = min_notional;
	c.base_unit = base_unit;
	c.ref_px = ref_px;
	c.band_bps = band_bps;
	fx_apply(&c);
	const struct wire_admin_reply *r = fx_admin();
	cr_assert(r != NULL);
	return r->reason;
}

uint16_t
fx_status(uint32_t sym, uint8_t status, uint8_t cancel_resting)
{
	struct wire_symbol_status_msg m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_SYMBOL_STATUS, 0);
	m.symbol = sym;
	m.status = status;
	m.cancel_resting = cancel_resting;
	fx_apply(&m);
	return fx_admin()->reason;
}

uint16_t
fx_kill(uint8_t scope, uint64_t id, uint8_t engage)
{
	struct wire_kill_switch m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_KILL_SWITCH, 0);
	m.id = id;
	m.scope = scope;
	m.engage = engage;
	fx_apply(&m);
	return fx_admin()->reason;
}

struct wire_oid
fx_oid(uint64_t user, uint64_t seq)
{
	return wire_oid_make(fx_oms_shard, user, seq);
}

struct wire_submit
fx_order(uint64_t user, uint64_t seq, uint8_t side, uint8_t type, uint8_t tif, int64_t px,
	 int64_t qty)
{
	struct wire_submit s;
	memset(&s, 0, sizeof(s));
	wire_hdr_init(&s.hdr, WIRE_SUBMIT, 0);
	s.oid = fx_oid(user, seq);
	s.symbol = FX_SYM;
	s.side = side;
	s.ord_type = type;
	s.tif = tif;
	s.px = px;
	s.qty = qty;
	return s;
}

void
fx_submit(const struct wire_submit *s)
{
	fx_apply(s);
}

void
fx_limit(uint64_t user, uint64_t seq, uint8_t side, int64_t px, int64_t qty, uint8_t tif)
{
	struct wire_submit s = fx_order(user, seq, side, WIRE_ORD_LIMIT, tif, px, qty);
	fx_submit(&s);
}

void
fx_gtc(uint64_t user, uint64_t seq, uint8_t side, int64_t px, int64_t qty)
{
	fx_limit(user, seq, side, px, qty, WIRE_TIF_GTC);
}

void
fx_market_sell(uint64_t user, uint64_t seq, int64_t qty)
{
	struct wire_submit s = fx_order(user, seq, WIRE_SIDE_SELL, WIRE_ORD_MARKET, WIRE_TIF_IOC,
					0, qty);
	fx_submit(&s);
}

void
fx_market_buy(uint64_t user, uint64_t seq, int64_t quote)
{
	struct wire_submit s = fx_order(user, seq, WIRE_SIDE_BUY, WIRE_ORD_MARKET, WIRE_TIF_IOC,
					0, 0);
	s.quote_qty = quote;
	fx_submit(&s);
}

void
fx_modify(uint16_t type, uint64_t user, uint64_t req, uint64_t target, int64_t px, int64_t qty)
{
	struct wire_modify m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, (enum wire_type)type, 0);
	m.req = fx_oid(user, req);
	m.target = fx_oid(user, target);
	m.symbol = FX_SYM;
	m.px = px;
	m.qty = qty;
	fx_apply(&m);
}

/* A REBIND_TO_ME of order (user, seq) of OMS shard `from` to `to` (the adoption's fields
 * filled as an OMS would). */
void
fx_rebind(uint64_t user, uint64_t seq, uint16_t from, uint16_t to)
{
	struct wire_rebind m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_REBIND_TO_ME, 0);
	m.oid = wire_oid_make(from, user, seq);
	m.from_shard = from;
	m.to_shard = to;
	m.symbol = FX_SYM;
	m.cl_ord_id = 700 + seq;
	m.qty = 5;
	m.reserved = 503;
	m.notional_maker = 200;
	m.notional_taker = 0;
	fx_apply(&m);
}

void
fx_cancel(uint64_t user, uint64_t req, uint64_t target)
{
	fx_modify(WIRE_CANCEL_TO_ME, user, req, target, 0, 0);
}

void
fx_amend(uint64_t user, uint64_t req, uint64_t target, int64_t qty)
{
	fx_modify(WIRE_AMEND_TO_ME, user, req, target, 0, qty);
}

void
fx_replace(uint64_t user, uint64_t req, uint64_t target, int64_t px, int64_t qty)
{
	fx_modify(WIRE_REPLACE_TO_ME, user, req, target, px, qty);
}

void
fx_ack(uint16_t stream, uint64_t seq)
{
	struct wire_stream_ack a;
	memset(&a, 0, sizeof(a));
	wire_hdr_init(&a.hdr, WIRE_STREAM_ACK, 0);
	a.stream = stream;
	a.seq = seq;
	fx_apply(&a);
}

void
fx_replay(uint16_t stream, uint64_t from_seq)
{
	struct wire_replay_request r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_REPLAY_REQUEST, 0);
	r.stream = stream;
	r.from_seq = from_seq;
	fx_apply(&r);
}

void
fx_query(uint64_t user, uint64_t seq)
{
	struct wire_order_query q;
	memset(&q, 0, sizeof(q));
	wire_hdr_init(&q.hdr, WIRE_ORDER_QUERY, 0);
	q.oid = fx_oid(user, seq);
	fx_apply(&q);
}

uint32_t
fx_events(void)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < fx_cap_count; i++)
		n += fx_caps[i].u.hdr.type == WIRE_ME_EVENT;
	return n;
}

const struct wire_me_event *
fx_ev(uint32_t i)
{
	for (uint32_t k = 0; k < fx_cap_count; k++) {
		if (fx_caps[k].u.hdr.type != WIRE_ME_EVENT)
			continue;
		if (i-- == 0)
			return &fx_caps[k].u.ev;
	}
	return NULL;
}

const struct wire_me_event *
fx_find(uint64_t user, uint64_t seq, uint8_t event, uint32_t n)
{
	struct wire_oid oid = fx_oid(user, seq);
	for (uint32_t k = 0; k < fx_cap_count; k++) {
		const struct wire_me_event *e = &fx_caps[k].u.ev;
		if (e->hdr.type != WIRE_ME_EVENT || e->event != event || !wire_oid_eq(e->oid, oid))
			continue;
		if (n-- == 0)
			return e;
	}
	return NULL;
}

uint32_t
fx_count(uint64_t user, uint64_t seq, uint8_t event)
{
	uint32_t n = 0;
	while (fx_find(user, seq, event, n) != NULL)
		n++;
	return n;
}

/* The captured events about (user, seq) that pass pred: how many, and the first (NULL). */
static uint32_t
events_where(uint64_t user, uint64_t seq, bool (*pred)(const struct wire_me_event *),
	     const struct wire_me_event **first)
{
	struct wire_oid oid = fx_oid(user, seq);
	uint32_t n = 0;
	*first = NULL;
	for (uint32_t k = 0; k < fx_cap_count; k++) {
		const struct wire_me_event *e = &fx_caps[k].u.ev;
		if (e->hdr.type != WIRE_ME_EVENT || !wire_oid_eq(e->oid, oid) || !pred(e))
			continue;
		if (n++ == 0)
			*first = e;
	}
	return n;
}

uint32_t
fx_entered(uint64_t user, uint64_t seq)
{
	const struct wire_me_event *e;
	return events_where(user, seq, wire_ev_entered, &e);
}

uint32_t
fx_done(uint64_t user, uint64_t seq)
{
	const struct wire_me_event *e;
	return events_where(user, seq, wire_ev_done, &e);
}

const struct wire_me_event *
fx_done_ev(uint64_t user, uint64_t seq)
{
	const struct wire_me_event *e;
	(void)events_where(user, seq, wire_ev_done, &e);
	return e;
}

const struct wire_me_result *
fx_result(void)
{
	for (uint32_t k = fx_cap_count; k-- > 0;)
		if (fx_caps[k].u.hdr.type == WIRE_ME_RESULT)
			return &fx_caps[k].u.res;
	return NULL;
}

const struct wire_admin_reply *
fx_admin(void)
{
	for (uint32_t k = fx_cap_count; k-- > 0;)
		if (fx_caps[k].u.hdr.type == WIRE_ADMIN_REPLY)
			return &fx_caps[k].u.admin;
	return NULL;
}

int
fx_reject_reason(uint64_t user, uint64_t seq)
{
	const struct wire_me_event *e = fx_find(user, seq, WIRE_EV_REJECTED, 0);
	if (e == NULL)
		e = fx_find(user, seq, WIRE_EV_CANCEL_REJECTED, 0);
	return e == NULL ? -1 : (int)e->reason;
}

int64_t
fx_best(uint8_t side)
{
	struct me_depth_level d;
	return me_depth(fx_me, FX_SYM, (enum wire_side)side, &d, 1) ? d.px : 0;
}

int64_t
fx_depth_qty(uint8_t side, int64_t px)
{
	struct me_depth_level d[256];
	uint32_t n = me_depth(fx_me, FX_SYM, (enum wire_side)side, d, 256);
	for (uint32_t i = 0; i < n; i++)
		if (d[i].px == px)
			return d[i].qty;
	return 0;
}

const struct me_order *
fx_rec(uint64_t user, uint64_t seq)
{
	uint32_t oi = me_order_find(fx_me, fx_oid(user, seq));
	return oi == ME_NIL ? NULL : me_ord(fx_me, oi);
}

/* Does book entry a come before b's level in export order (bids best first, then asks best
 * first)? */
static bool
level_before(const struct wire_book_order *a, const struct wire_book_order *b)
{
	if (a->side != b->side)
		return a->side == WIRE_SIDE_BUY;
	return a->side == WIRE_SIDE_BUY ? a->px > b->px : a->px < b->px;
}

uint32_t
fx_journal_apply(struct wire_book_order *book, uint32_t n, uint32_t cap,
		 const struct wire_book_order *jr, uint32_t nj)
{
	for (uint32_t i = 0; i < nj; i++) {
		const struct wire_book_order *r = &jr[i];
		uint32_t k = 0;
		while (k < n && !wire_oid_eq(book[k].oid, r->oid))
			k++;
		if (r->op == WIRE_BOOK_REMOVE) {
			struct wire_book_order z;
			memset(&z, 0, sizeof(z));
			z.oid = r->oid;
			z.op = WIRE_BOOK_REMOVE;
			cr_assert(memcmp(r, &z, sizeof(z)) == 0, "entry %u: a REMOVE is its oid only", i);
			if (k < n) {
				memmove(&book[k], &book[k + 1], (size_t)(n - k - 1) * sizeof(*book));
				n--;
			}
			continue;
		}
		cr_assert_eq(r->op, WIRE_BOOK_UPDATE, "entry %u: op %u", i, r->op);
		struct wire_book_order w = *r;
		w.op = WIRE_BOOK_ADD; /* as me_move_export writes every order */
		if (k < n) {
			cr_assert_eq(book[k].side, w.side);
			cr_assert_eq(book[k].px, w.px);
			book[k] = w;
			continue;
		}
		/* New here: behind every order of its level, ahead of the levels after it. */
		uint32_t at = 0;
		while (at < n && !level_before(&w, &book[at]))
			at++;
		cr_assert_lt(n, cap);
		memmove(&book[at + 1], &book[at], (size_t)(n - at) * sizeof(*book));
		book[at] = w;
		n++;
	}
	return n;
}

uint32_t
fx_check_journal(struct me *e, uint32_t sym, uint64_t move_id,
		 const struct wire_book_order *copy, uint32_t nc)
{
	struct me_move_info mi;
	cr_assert_eq(me_move_info(e, sym, &mi), 0);
	cr_assert_eq(mi.move_id, move_id);
	cr_assert_eq(mi.role, ME_MOVE_SOURCE);
	cr_assert_eq(mi.phase, ME_MOVE_FROZEN);
	cr_assert_eq(mi.journal_ok, 1);
	uint32_t nj = mi.journal;
	struct wire_book_order *jr = calloc((size_t)nj + 1, sizeof(*jr));
	struct wire_book_order *book = calloc((size_t)nc + nj + 1, sizeof(*book));
	struct wire_book_order *frozen = calloc((size_t)mi.count + 1, sizeof(*frozen));
	cr_assert(jr != NULL && book != NULL && frozen != NULL);
	/* Read in uneven pieces, as a driver limited by its frame would. */
	for (uint32_t from = 0; from < nj;) {
		uint32_t want = nj - from < 97 ? nj - from : 97;
		int got = me_move_journal_export(e, sym, move_id, from, jr + from, want);
		cr_assert_eq(got, (int)want, "journal from %u: %d", from, got);
		from += want;
	}
	cr_assert_eq(me_move_journal_export(e, sym, move_id, nj, jr + nj, 1), 0, "past the end");
	memcpy(book, copy, (size_t)nc * sizeof(*book));
	uint32_t n = fx_journal_apply(book, nc, nc + nj + 1, jr, nj);
	cr_assert_eq(me_move_export(e, sym, move_id, 0, frozen, mi.count), (int)mi.count);
	cr_assert_eq(n, mi.count, "copy and journal give %u orders, the frozen book %u", n,
		     mi.count);
	for (uint32_t k = 0; k < n; k++)
		cr_assert(memcmp(&book[k], &frozen[k], sizeof(book[k])) == 0,
			  "order %u of the frozen book differs (oid %lu/%lu)", k,
			  (unsigned long)frozen[k].oid.user, (unsigned long)frozen[k].oid.shard_seq);
	free(jr);
	free(book);
	free(frozen);
	return nj;
}

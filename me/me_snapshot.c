/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me snapshot: snapshot/restore, state hash, and the svc_ops table consensus hosts.
 *
 * The engine's region holds no pointers in its state (me_int.h), and every byte of it is
 * written only by init and by applied messages, so the state hash is XXH3 over the region
 * after the runtime header, and equal histories hash equal.
 *
 * A snapshot carries the same state, compactly: the parts of each array that init did not
 * leave as they are. Records and levels are handed out in index order from fresh free lists,
 * so everything at or above their high-water marks is still as init wrote it; sorted level
 * arrays, the GTD heap, symbols and streams are used from the front; a stream's ring is
 * written from slot 0; the user slab is used below its high-water mark, and the chained
 * tables (oid index, users) below their buckets in use (the rest stay zero). The symbol
 * index and the stream map are copied whole.
 * Restore initialises a fresh engine and copies the parts back, which rebuilds the region
 * byte for byte: restore(snapshot(x)) hashes equal to x.
 *
 * Format: struct me_snap_hdr | state header | records[0, orders_hwm) |
 * record links[0, orders_hwm) | oid index buckets[0, buckets) | users[0, users_hwm) |
 * user buckets[0, buckets) |
 * levels[0, levels_hwm) | symbols[0, symbols_used) | per book side: lrefs[0, side_count) |
 * gtd[0, gtd_count) | symbol index | streams[0, streams_used) | stream map |
 * per stream: events[0, min(next_seq - 1, events_max)) | move journal[0, journal_n).
 * Pending bulk cancel jobs (me_bulk.c), symbol moves (me_move.c) and the journal's owner
 * and length (me_journal.c) are part of the state header, so a replica restored in the
 * middle of a halt or of a move goes on with it exactly where the log says. The journal's
 * entries past journal_n are zero, as init leaves them. A move's running hash (me_move.c)
 * is in its slot, so it is carried as it is, byte for byte like the book it sums: the
 * restored engine goes on keeping it where the snapshotted one was.
 * The header carries the limits and an XXH3 checksum of everything after it; restore refuses
 * (-EINVAL, leaving an empty engine) a snapshot whose checksum, limits, layout or counts do
 * not match this instance.
 */
#include <errno.h>
#include <string.h>
#include <xxhash.h>

#include "me/me_int.h"

struct me_snap_hdr {
	uint64_t magic;          /* ME_SNAP_MAGIC */
	uint32_t version;        /* ME_SNAP_VERSION */
	uint32_t reserved0;
	uint64_t body_len;       /* bytes that follow */
	uint64_t checksum;       /* XXH3-64 of those bytes */
	struct me_limits limits; /* of the engine that wrote it */
	uint64_t reserved1;
};
static_assert(sizeof(struct me_snap_hdr) == 88, "me_snap_hdr");

#define STATE_HDR_LEN (sizeof(struct me) - ME_RT_SIZE)

static const uint8_t *
state_bytes(const struct me *me)
{
	return (const uint8_t *)me + ME_RT_SIZE;
}

static size_t
state_len(const struct me *me)
{
	return (size_t)me->footprint - ME_RT_SIZE;
}

/* A section list walker shared by sizing, writing and reading: `fn` is called with each
 * section's address in the region and its length. */
typedef bool(section_fn)(void *ctx, uint8_t *region_part, size_t len);

static size_t
ring_written(const struct me *me, const struct me_stream *st)
{
	uint64_t n = st->next_seq - 1;
	return (size_t)(n < me->limits.events_max ? n : me->limits.events_max);
}

/* Visit the sections of engine `me` whose counts are already valid. */
static bool
sections(struct me *me, section_fn *fn, void *ctx)
{
	uint8_t *b = (uint8_t *)me;
	const struct me_limits *l = &me->limits;
	if (!fn(ctx, b + ME_RT_SIZE, STATE_HDR_LEN))
		return false;
	if (!fn(ctx, b + me->off_orders, (size_t)me->orders_hwm * sizeof(struct me_order)))
		return false;
	if (!fn(ctx, b + me->off_links, (size_t)me->orders_hwm * sizeof(struct me_link)))
		return false;
	if (!fn(ctx, b + me->off_index,
		(size_t)me->oid_lh.buckets * sizeof(uint32_t)))
		return false;
	if (!fn(ctx, b + me->off_users, (size_t)me->users_hwm * sizeof(struct me_user)))
		return false;
	if (!fn(ctx, b + me->off_user_heads,
		(size_t)me->user_lh.buckets * sizeof(uint32_t)))
		return false;
	if (!fn(ctx, b + me->off_levels, (size_t)me->levels_hwm * sizeof(struct me_level)))
		return false;
	if (!fn(ctx, b + me->off_symbols, (size_t)me->symbols_used * sizeof(struct me_symbol)))
		return false;
	for (uint32_t si = 0; si < me->symbols_used; si++) {
		for (uint32_t side = 0; side < 2; side++) {
			uint32_t n = me_sym(me, si)->side_count[side];
			if (n > l->levels_side_max)
				return false;
			if (!fn(ctx, (uint8_t *)me_lrefs(me, si, side), (size_t)n * sizeof(struct me_lref)))
				return false;
		}
	}
	if (!fn(ctx, b + me->off_gtd, (size_t)me->gtd_count * sizeof(struct me_gtd)))
		return false;
	if (!fn(ctx, b + me->off_symidx, ((size_t)me->sym_mask + 1) * sizeof(uint32_t)))
		return false;
	if (!fn(ctx, b + me->off_streams, (size_t)me->streams_used * sizeof(struct me_stream)))
		return false;
	if (!fn(ctx, b + me->off_stream_map, ME_STREAM_MAP_SIZE * sizeof(uint16_t)))
		return false;
	for (uint32_t st = 0; st < me->streams_used; st++) {
		const struct me_stream *s = me_stream_at(me, st);
		if (s->next_seq == 0)
			return false;
		uint8_t *ring = b + me->off_events + (size_t)st * l->events_max * sizeof(struct wire_me_event);
		if (!fn(ctx, ring, ring_written(me, s) * sizeof(struct wire_me_event)))
			return false;
	}
	if (me->journal_n > ME_JOURNAL_MAX)
		return false;
	if (!fn(ctx, b + me->off_journal, (size_t)me->journal_n * sizeof(struct wire_oid)))
		return false;
	return true;
}

struct cursor {
	uint8_t *p;       /* snapshot bytes (write: destination; read: source); NULL: size only */
	size_t left;      /* bytes left */
	size_t total;     /* bytes visited */
};

static bool
visit_size(void *ctx, uint8_t *part, size_t len)
{
	(void)part;
	((struct cursor *)ctx)->total += len;
	return true;
}

static bool
visit_write(void *ctx, uint8_t *part, size_t len)
{
	struct cursor *c = ctx;
	if (len > c->left)
		return false;
	memcpy(c->p, part, len);
	c->p += len;
	c->left -= len;
	return true;
}

static bool
visit_read(void *ctx, uint8_t *part, size_t len)
{
	struct cursor *c = ctx;
	if (len > c->left)
		return false;
	memcpy(part, c->p, len);
	c->p += len;
	c->left -= len;
	return true;
}

size_t
me_snapshot_size(const struct me *cme)
{
	CHECK(cme != NULL);
	CHECK(cme->magic == ME_MAGIC);
	struct me *me = (struct me *)(uintptr_t)cme; /* sections() only reads through visit_size */
	struct cursor c = {0};
	bool ok = sections(me, visit_size, &c);
	CHECK(ok);
	return sizeof(struct me_snap_hdr) + c.total;
}

size_t
me_snapshot(const struct me *cme, void *buf, size_t cap)
{
	CHECK(cme != NULL);
	CHECK(cme->magic == ME_MAGIC);
	struct me *me = (struct me *)(uintptr_t)cme; /* visit_write only reads the region */
	size_t need = me_snapshot_size(me);
	if (buf == NULL || cap < need)
		return 0;
	struct me_snap_hdr h;
	memset(&h, 0, sizeof(h));
	h.magic = ME_SNAP_MAGIC;
	h.version = ME_SNAP_VERSION;
	h.body_len = need - sizeof(h);
	h.limits = me->limits;
	struct cursor c = {.p = (uint8_t *)buf + sizeof(h), .left = (size_t)h.body_len};
	bool ok = sections(me, visit_write, &c);
	CHECK(ok);
	CHECK(c.left == 0);
	h.checksum = XXH3_64bits((const uint8_t *)buf + sizeof(h), (size_t)h.body_len);
	memcpy(buf, &h, sizeof(h));
	return need;
}

/* Pending bulk jobs (me_bulk.c) are read as indices and kinds: each must be one a running
 * engine could hold, and the unused slots zero as they always are. */
static bool
bulk_ok(const struct me *probe)
{
	static const struct me_bulk_job zero;
	if (probe->bulk_count > ME_BULK_JOBS_MAX || probe->bulk_reserved != 0)
		return false;
	for (uint32_t i = 0; i < ME_BULK_JOBS_MAX; i++) {
		const struct me_bulk_job *j = &probe->bulk[i];
		if (i >= probe->bulk_count) {
			if (memcmp(j, &zero, sizeof(zero)) != 0)
				return false;
			continue;
		}
		if (j->reserved0 != 0 || j->reserved1 != 0)
			return false;
		if (j->cause != WIRE_CAUSE_HALT && j->cause != WIRE_CAUSE_KILL_SWITCH)
			return false;
		if (j->kind == ME_BULK_BOOK ? j->id >= probe->symbols_used : j->kind != ME_BULK_USER)
			return false;
	}
	return true;
}

/* Symbol moves (me_move.c) are read as indices and phases: each slot must be one a running
 * engine could hold (free ones all zero, at most one move holding or watching a book, a
 * WATCHING one holding nothing yet), and the counts the hot paths trust must agree with the
 * slots. */
static bool
moves_ok(const struct me *probe)
{
	static const struct me_move zero;
	uint32_t active = 0;
	uint64_t held = 0;
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++) {
		const struct me_move *mv = &probe->moves[i];
		if (mv->move_id == 0) {
			if (memcmp(mv, &zero, sizeof(zero)) != 0)
				return false;
			continue;
		}
		if (mv->reserved != 0 || mv->symbol >= probe->symbols_used)
			return false;
		if (mv->created == 0 || mv->created > probe->moves_created)
			return false;
		if (mv->role != ME_MOVE_SOURCE && mv->role != ME_MOVE_TARGET)
			return false;
		if (mv->phase == ME_MOVE_FINISHED) {
			if (mv->gtd_held != 0)
				return false;
			continue;
		}
		if (mv->role == ME_MOVE_SOURCE ? mv->phase != ME_MOVE_FROZEN &&
							 mv->phase != ME_MOVE_WATCHING
					       : mv->phase != ME_MOVE_INSTALLING)
			return false;
		for (uint32_t k = 0; k < i; k++) {
			const struct me_move *o = &probe->moves[k];
			if (o->move_id != 0 && o->phase != ME_MOVE_FINISHED && o->symbol == mv->symbol)
				return false;
		}
		if (mv->phase == ME_MOVE_WATCHING) {
			/* Its hash and GTD count are the book's, kept running: carried as they
			 * are, like the book (the checksum guards both; OUT DCHECKs the hash). */
			if (mv->count != 0 || mv->next_chunk != 0 || mv->gtd_held > probe->limits.gtd_max)
				return false;
			continue;
		}
		active++;
		held += mv->gtd_held;
	}
	return active == probe->moves_active && held == probe->gtd_held &&
	       held <= probe->limits.gtd_max;
}

/* The move journal (me_journal.c): no owner and empty, or owned by a source move WATCHING
 * (whose book is the watched one) or FROZEN (nothing watched); every WATCHING move owns it;
 * its length within the region (restore reads that many entries). */
static bool
journal_ok(const struct me *probe)
{
	if (probe->journal_n > ME_JOURNAL_MAX || probe->journal_overflow > 1)
		return false;
	if (probe->journal_overflow != 0 && probe->journal_n != ME_JOURNAL_MAX)
		return false;
	for (uint32_t i = 0; i < ME_MOVES_MAX; i++)
		if (probe->moves[i].move_id != 0 && probe->moves[i].phase == ME_MOVE_WATCHING &&
		    probe->journal_slot != i)
			return false;
	if (probe->journal_slot == ME_NIL)
		return probe->watch_si == ME_NIL && probe->journal_n == 0 &&
		       probe->journal_overflow == 0;
	if (probe->journal_slot >= ME_MOVES_MAX)
		return false;
	const struct me_move *mv = &probe->moves[probe->journal_slot];
	if (mv->move_id == 0 || mv->role != ME_MOVE_SOURCE)
		return false;
	if (mv->phase == ME_MOVE_WATCHING)
		return probe->watch_si == mv->symbol;
	return mv->phase == ME_MOVE_FROZEN && probe->watch_si == ME_NIL;
}

/* A chained table's state as linear hashing leaves it (struct me_lhash), with this engine's
 * size and floor (the layout's, the same in any state): its buckets in use are a length. */
static bool
lhash_ok(const struct me_lhash *probe, const struct me_lhash *fresh)
{
	if (probe->max != fresh->max || probe->min != fresh->min)
		return false;
	uint32_t low = probe->low;
	if (low == 0 || (low & (low - 1)) != 0 || low < probe->min)
		return false;
	if (probe->buckets < low || probe->buckets - low >= low || probe->buckets > probe->max)
		return false;
	struct me_lhash derived = *probe;
	me_lhash_derive(&derived);
	return derived.mask == probe->mask && derived.shrink_below == probe->shrink_below;
}

/* The snapshot's state header must describe an engine laid out exactly like this one, with
 * every count within its limit: they are used as lengths while reading the rest. */
static bool
state_hdr_ok(const struct me *me, const struct me *probe)
{
	const struct me_limits *l = &me->limits;
	if (probe->magic != ME_MAGIC || probe->footprint != me->footprint)
		return false;
	if (memcmp(&probe->limits, l, sizeof(*l)) != 0)
		return false;
	if (probe->off_orders != me->off_orders || probe->off_links != me->off_links ||
	    probe->off_index != me->off_index || probe->off_users != me->off_users ||
	    probe->off_user_heads != me->off_user_heads || probe->off_levels != me->off_levels ||
	    probe->off_lrefs != me->off_lrefs || probe->off_symbols != me->off_symbols ||
	    probe->off_symidx != me->off_symidx || probe->off_gtd != me->off_gtd ||
	    probe->off_streams != me->off_streams || probe->off_stream_map != me->off_stream_map ||
	    probe->off_events != me->off_events || probe->off_journal != me->off_journal)
		return false;
	if (probe->sym_mask != me->sym_mask || probe->events_mask != me->events_mask)
		return false;
	if (!lhash_ok(&probe->oid_lh, &me->oid_lh) || !lhash_ok(&probe->user_lh, &me->user_lh))
		return false;
	if (!bulk_ok(probe))
		return false;
	if (!moves_ok(probe))
		return false;
	if (!journal_ok(probe))
		return false;
	return probe->orders_hwm <= l->orders_max && probe->levels_hwm <= l->levels_max &&
	       probe->symbols_used <= l->symbols_max && probe->streams_used <= l->streams_max &&
	       probe->gtd_count <= l->gtd_max && probe->records_used <= probe->orders_hwm &&
	       probe->levels_used <= probe->levels_hwm && probe->users_hwm <= l->users_max &&
	       probe->users_used <= probe->users_hwm && probe->user_free <= probe->users_hwm;
}

int
me_restore(struct me *me, const void *buf, size_t len)
{
	CHECK(me != NULL);
	CHECK(me->magic == ME_MAGIC);
	struct me_limits limits = me->limits;
	struct me *fresh;
	struct me_snap_hdr h;
	if (buf == NULL || len < sizeof(h) + STATE_HDR_LEN)
		goto fail;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != ME_SNAP_MAGIC || h.version != ME_SNAP_VERSION)
		goto fail;
	if (h.body_len != len - sizeof(h))
		goto fail;
	if (memcmp(&h.limits, &limits, sizeof(limits)) != 0)
		goto fail;
	const uint8_t *body = (const uint8_t *)buf + sizeof(h);
	if (XXH3_64bits(body, (size_t)h.body_len) != h.checksum)
		goto fail;
	struct me probe;
	memcpy((uint8_t *)&probe + ME_RT_SIZE, body, STATE_HDR_LEN);
	if (!state_hdr_ok(me, &probe))
		goto fail;
	/* Start from exactly what init leaves, then lay the sections over it. */
	if (me_init(&fresh, me, &limits) != 0 || fresh != me)
		goto fail;
	struct cursor c = {.p = (uint8_t *)(uintptr_t)body, .left = (size_t)h.body_len};
	if (!sections(me, visit_read, &c) || c.left != 0)
		goto fail;
	me_rt_bind(me);
	return 0;
fail: {
	int rc = me_init(&fresh, me, &limits);
	CHECK(rc == 0);
	CHECK(fresh == me);
	return -EINVAL;
}
}

uint64_t
me_state_hash(const struct me *me)
{
	CHECK(me != NULL);
	CHECK(me->magic == ME_MAGIC);
	return XXH3_64bits(state_bytes(me), state_len(me));
}

/* ---- svc_ops ---- */

/* The service table consensus hosts (common/service.h). */
SVC_OPS_DEFINE(me, struct me);

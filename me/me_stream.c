/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me streams: the exactly-once event streams, one per OMS shard (docs/me-contract.md).
 *
 * Seed (user sharding, "The ME is a protocol participant"): emit exactly-once, ordered
 * lifecycle events for every transition, including the ME's own expiries and cancels. An
 * event is written once, into its stream's retention ring at slot (seq - 1) mod events_max,
 * and the same bytes are handed to the sink; a replay re-emits those bytes, so a replayed
 * event is identical to the first emission. Retention ends when STREAM_ACK covers an event;
 * dedup records of finished orders are released by the same ack (they wait in a per-stream
 * FIFO in the order of their final event).
 */
#include <errno.h>
#include <string.h>

#include "me/me_int.h"

static uint16_t *
stream_map(struct me *me)
{
	return ME_ARR(me, off_stream_map, uint16_t);
}

static struct wire_me_event *
ring(struct me *me, uint32_t st)
{
	return ME_ARR(me, off_events, struct wire_me_event) + (size_t)st * me->limits.events_max;
}

uint32_t
me_stream_add(struct me *me, uint16_t shard)
{
	DCHECK(me->streams_used <= me->limits.streams_max);
	uint16_t *map = stream_map(me);
	DCHECK(map[shard] == 0);
	if (me->streams_used >= me->limits.streams_max)
		return ME_NIL;
	uint32_t st = me->streams_used++;
	struct me_stream *s = me_stream_at(me, st);
	s->next_seq = 1;
	s->acked = 0;
	s->oldest = 1;
	s->fin_head = s->fin_tail = ME_NIL;
	s->shard = shard;
	map[shard] = (uint16_t)(st + 1);
	CHECK(me_stream_find(me, shard) == st);
	return st;
}

/* When finished record o's dedup window ends (me_limits.dedup_ttl_ns from its expire_ns). */
static inline uint64_t
release_due(const struct me *me, const struct me_order *o)
{
	uint64_t due;
	if (__builtin_add_overflow(o->expire_ns, me->limits.dedup_ttl_ns, &due))
		return UINT64_MAX;
	return due;
}

void
me_order_finish(struct me *me, uint32_t oi)
{
	struct me_order *o = me_ord(me, oi);
	DCHECK(o->state != ME_ST_FINAL);
	DCHECK(o->level == ME_NIL);
	DCHECK(o->stream < me->streams_used);
	o->state = ME_ST_FINAL;
	o->leaves = 0;
	/* Its dedup window starts now (me_limits.dedup_ttl_ns). */
	o->expire_ns = me->now_ns;
	struct me_stream *s = me_stream_at(me, o->stream);
	o->next = ME_NIL;
	o->prev = s->fin_tail;
	if (s->fin_tail != ME_NIL)
		me_ord(me, s->fin_tail)->next = oi;
	else
		s->fin_head = oi;
	s->fin_tail = oi;
	/* A record an ack already covers (none today: each is finished right after its fresh
	 * final event) may head its FIFO, releasable a window on; one not covered waits for an
	 * ack, which clears the due time. */
	if (__builtin_expect(o->last_seq <= s->acked, 0)) {
		uint64_t due = release_due(me, o);
		if (due < me->rt.release_due_ns)
			me->rt.release_due_ns = due;
	}
	/* Already covered by an ack (possible only for records whose last event came earlier):
	 * release at the next ack. Ordering of the FIFO by last_seq holds because a record is
	 * finished right after its final event, and events of one stream are emitted in seq
	 * order. */
	DCHECK(o->prev == ME_NIL || me_ord(me, o->prev)->last_seq <= o->last_seq);
	DCHECK(s->fin_tail == oi);
}

void
me_result_emit(struct me *me, struct wire_oid oid, uint32_t oi, uint16_t reason)
{
	/* The reason comes from this engine or from a record it stored: valid on the wire. */
	DCHECK(reason < WIRE_REASON_MAX);
	DCHECK(oi == ME_NIL || oi < me->limits.orders_max);
	struct wire_me_result r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_ME_RESULT, wire_oid_shard(oid));
	r.oid = oid;
	if (oi != ME_NIL) {
		const struct me_order *o = me_ord(me, oi);
		r.known = 1;
		r.final = o->state == ME_ST_FINAL;
		r.reason = reason != WIRE_REASON_NONE ? reason : o->reason;
		r.symbol = o->symbol;
		r.cum_qty = o->cum;
		r.leaves_qty = o->leaves;
		r.last_seq = o->last_seq;
	} else {
		r.reason = reason;
	}
	DCHECK(r.reason < WIRE_REASON_MAX);
	svc_emit(me->rt.sink, WIRE_DEST_OMS, &r);
}

static void stream_release(struct me *me, struct me_stream *s);

void
me_stream_ack(struct me *me, const struct wire_stream_ack *m)
{
	uint32_t st = me_stream_find(me, m->stream);
	if (st == ME_NIL) {
		me_count(me, ME_C_IGNORED);
		return;
	}
	struct me_stream *s = me_stream_at(me, st);
	/* An ack beyond what was emitted is clamped: it cannot cover events not yet written. */
	uint64_t seq = m->seq < s->next_seq - 1 ? m->seq : s->next_seq - 1;
	if (seq <= s->acked)
		return;
	/* The records this ack covers newly live at least half a dedup window from now:
	 * the sender may have re-sent one just before it applied the final event and acked,
	 * and that re-send is executable for half a window (me_core.c, stale). The FIFO is in
	 * last_seq order: walk back from its tail over the records not covered yet. */
	uint64_t half = me->limits.dedup_ttl_ns / 2;
	if (half != 0 && me->now_ns > me->limits.dedup_ttl_ns) {
		uint64_t hold = me->now_ns - me->limits.dedup_ttl_ns + half;
		for (uint32_t oi = s->fin_tail; oi != ME_NIL;) {
			struct me_order *o = me_ord(me, oi);
			if (o->last_seq <= s->acked)
				break;
			if (o->last_seq <= seq && o->expire_ns < hold)
				o->expire_ns = hold;
			oi = o->prev;
		}
	}
	s->acked = seq;
	if (s->oldest <= seq)
		s->oldest = seq + 1;
	me->rt.release_due_ns = 0; /* records newly covered: look at every stream again */
	stream_release(me, s);
	CHECK(s->acked < s->next_seq);
	CHECK(s->oldest > s->acked);
}

/* Is a record of some stream releasable now (stream_release would release one)? */
static bool
any_releasable(struct me *me)
{
	for (uint32_t st = 0; st < me->streams_used; st++) {
		const struct me_stream *s = me_stream_at(me, st);
		if (s->fin_head == ME_NIL)
			continue;
		const struct me_order *o = me_ord(me, s->fin_head);
		if (o->last_seq <= s->acked && me->now_ns - o->expire_ns >= me->limits.dedup_ttl_ns)
			return true;
	}
	return false;
}

/* Acknowledged records whose dedup window has passed, on every stream. Nothing to do before
 * rt.release_due_ns (one compare a call); else bounded by the streams and the records
 * released. The walk leaves each stream's head either uncovered by its ack (an ack clears
 * the cache) or due at the end of its window: the earliest of those is the next due. */
void
me_streams_release_aged(struct me *me)
{
	CHECK(me->streams_used <= me->limits.streams_max);
	if (me->now_ns < me->rt.release_due_ns) {
		DCHECK(!any_releasable(me));
		return;
	}
	uint64_t due = UINT64_MAX;
	for (uint32_t st = 0; st < me->streams_used; st++) {
		struct me_stream *s = me_stream_at(me, st);
		stream_release(me, s);
		if (s->fin_head == ME_NIL)
			continue;
		const struct me_order *o = me_ord(me, s->fin_head);
		if (o->last_seq <= s->acked) {
			uint64_t d = release_due(me, o);
			if (d < due)
				due = d;
		}
	}
	me->rt.release_due_ns = due;
}

/* Contract: a finished order's dedup record is kept until the ack covers its final event
 * AND its dedup window (dedup_ttl_ns of cluster time since it finished) has passed: a
 * re-driven SUBMIT still in flight when the ack lands must find the record, not a fresh
 * book (found by sim-system). The FIFO is in finish order, so both conditions stop at the
 * first record that does not meet them. */
static void
stream_release(struct me *me, struct me_stream *s)
{
	while (s->fin_head != ME_NIL) {
		uint32_t oi = s->fin_head;
		struct me_order *o = me_ord(me, oi);
		if (o->last_seq > s->acked)
			break;
		if (me->now_ns - o->expire_ns < me->limits.dedup_ttl_ns)
			break;
		s->fin_head = o->next;
		if (s->fin_head != ME_NIL)
			me_ord(me, s->fin_head)->prev = ME_NIL;
		else
			s->fin_tail = ME_NIL;
		me_order_release(me, oi);
	}
	DCHECK((s->fin_head == ME_NIL) == (s->fin_tail == ME_NIL));
}

void
me_stream_replay(struct me *me, const struct wire_replay_request *m)
{
	uint32_t st = me_stream_find(me, m->stream);
	if (st == ME_NIL) {
		me_count(me, ME_C_IGNORED);
		return;
	}
	struct me_stream *s = me_stream_at(me, st);
	/* Contract: a seq already acknowledged replays from the oldest retained one. */
	uint64_t from = m->from_seq > s->oldest ? m->from_seq : s->oldest;
	/* Bounded work per request: replaying the whole retention in one apply floods the OMS
	 * log and starves the very event it waits for (found by sim-system). The OMS asks
	 * again as it advances. */
	if (from >= s->next_seq)
		return; /* nothing at or after from_seq yet */
	uint64_t max = me->limits.replay_max != 0 ? me->limits.replay_max : 128;
	uint64_t end = s->next_seq - from > max ? from + max : s->next_seq;
	DCHECK(from >= s->oldest);
	CHECK(end <= s->next_seq);
	struct wire_me_event *r = ring(me, st);
	for (uint64_t q = from; q < end; q++) {
		me_count(me, ME_C_REPLAYED);
		svc_emit(me->rt.sink, WIRE_DEST_OMS, &r[(q - 1) & me->events_mask]);
	}
}

void
me_open_orders(struct me *me, const struct wire_open_orders_query *m)
{
	struct wire_open_orders_snapshot snap;
	memset(&snap, 0, sizeof(snap));
	wire_hdr_init(&snap.hdr, WIRE_OPEN_ORDERS_SNAPSHOT, m->oms_shard);
	snap.user = m->user;
	snap.req_id = m->req_id;
	uint32_t st = me_stream_find(me, m->oms_shard);
	/* as_of_seq: the last seq of the asking shard's stream at this log position. */
	snap.as_of_seq = st == ME_NIL ? 0 : me_stream_at(me, st)->next_seq - 1;
	snap.me_shard = me->limits.shard;
	struct me_user *u = me_user_find(me, m->user);
	uint32_t total = u == NULL ? 0 : (u->count & ME_USER_COUNT);
	uint32_t oi = total ? u->head : ME_NIL;
	uint32_t part = 0;
	uint32_t sent = 0; /* orders of the user's list visited */
	/* The user's orders in the order they became live; parts of WIRE_OPEN_ORDERS_MAX.
	 * Orders of a book being installed here by a symbol move (me_move.c) are not listed:
	 * this shard does not own them yet (the source still lists them, frozen). */
	do {
		snap.count = 0;
		snap.part = (uint8_t)part;
		while (snap.count < WIRE_OPEN_ORDERS_MAX && sent < total) {
			if (me_move_hold_order(me, oi) == ME_MOVE_INSTALLING) {
				oi = me_ord(me, oi)->unext;
				sent++;
				continue;
			}
			const struct me_order *o = me_ord(me, oi);
			struct wire_open_order *w = &snap.orders[snap.count++];
			w->oid = o->oid;
			w->symbol = o->symbol;
			w->side = o->side;
			w->px = o->px;
			w->leaves_qty = o->leaves;
			oi = o->unext;
			sent++;
		}
		snap.last = sent == total;
		for (uint32_t i = snap.count; i < WIRE_OPEN_ORDERS_MAX; i++)
			memset(&snap.orders[i], 0, sizeof(snap.orders[i]));
		svc_emit(me->rt.sink, WIRE_DEST_OMS, &snap);
		part++;
	} while (sent < total);
	CHECK(sent == total);
}

/* REBIND_TO_ME (docs/me-contract.md "Moving a user's orders"): a live order bound to the
 * sender's stream moves to to_shard's. MOVED closes it on the old stream, after every event
 * about it there, and ADOPTED opens it on the new one with what the old owner knew of it
 * (wire.h), so the new owner takes it over exactly where the old one left it. Anything else
 * is a re-send of a move already made, or one overtaken by the order's end (its DONE is in
 * the old stream), and changes nothing. Idempotent, so it needs no dedup record. */
void
me_rebind(struct me *me, const struct wire_rebind *m)
{
	uint32_t oi = me_order_find(me, m->oid);
	uint32_t from = me_stream_find(me, m->from_shard);
	if (oi == ME_NIL || from == ME_NIL || m->to_shard == m->from_shard) {
		me_count(me, ME_C_REBIND_IGNORED);
		return;
	}
	struct me_order *o = me_ord(me, oi);
	if (o->state != ME_ST_LIVE || o->stream != from) {
		me_count(me, ME_C_REBIND_IGNORED);
		return;
	}
	/* A book a symbol move holds (me_move.c) changes nothing, not even an order's stream:
	 * the source has counted and hashed it, the target has not opened it. Ignored like a
	 * rebind of an order not live here; the sender's re-drive tries again. */
	if (me_move_hold_order(me, oi) != 0) {
		me_count(me, ME_C_REBIND_IGNORED);
		return;
	}
	uint32_t to = me_stream_get(me, m->to_shard);
	if (to == ME_NIL || me_stream_free(me, from) < me->limits.events_reserve ||
	    me_stream_free(me, to) < me->limits.events_reserve) {
		/* No stream for the new owner, or one near its retention bound: the old owner
		 * re-sends it (the bridge's re-drive). */
		me_count(me, ME_C_BACKPRESSURE);
		return;
	}
	struct wire_me_event *ev = me_ev_begin(me, oi, WIRE_EV_MOVED, o->px, o->cum, o->leaves);
	me_ev_emit(me, ev);
	uint32_t si = me_lvl(me, o->level)->symbol;
	me_move_change(me, si, oi, o->leaves, o->cum, (uint16_t)to); /* a field the move carries */
	o->stream = (uint16_t)to;
	me_move_touch(me, si, oi);
	ev = me_ev_begin(me, oi, WIRE_EV_ADOPTED, o->px, o->cum, o->leaves);
	ev->liquidity = o->ord_type;
	ev->cause = o->tif;
	ev->reason = o->stp;
	ev->contra.user = m->cl_ord_id;
	ev->contra.shard_seq = (uint64_t)m->qty;
	ev->contra_user = (uint64_t)m->reserved;
	ev->trade_id = (uint64_t)m->notional_maker;
	ev->notional = m->notional_taker;
	me_ev_emit(me, ev);
	me_count(me, ME_C_REBINDS);
}

/* ---- read-only views ---- */

int
me_stream_info_at(const struct me *me, uint32_t i, struct me_stream_info *out)
{
	CHECK(me != NULL);
	CHECK(out != NULL);
	if (i >= me->streams_used)
		return -ENOENT;
	const struct me_stream *s = &ME_CARR(me, off_streams, struct me_stream)[i];
	memset(out, 0, sizeof(*out));
	out->next_seq = s->next_seq;
	out->acked = s->acked;
	out->oldest = s->oldest;
	out->shard = s->shard;
	DCHECK(out->oldest > out->acked);
	return 0;
}

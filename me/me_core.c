/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me core: the top of the engine. me_apply routes each committed message to its handler
 * (matching, streams, admin), me_tick runs what cluster time makes due (GTD expiries, aged
 * dedup records), and the counters are read here. Storage is in me_store.c; nothing below
 * calls back up into this file.
 */
#include <errno.h>
#include <string.h>

#include "me/me_int.h"

/* ---- GTD expiries ---- */

void
me_expire_due(struct me *me)
{
	/* Seed: GTD/GTT timers fire on the one cluster's replicated time. An order expires when
	 * cluster time reaches its expire_ns, and its CANCELLED + DONE go out as soon as its
	 * stream has room for them (me_bulk.c): a mass expiry waits for acks instead of
	 * overwriting retention, at most ME_BULK_STEP_MAX per step, in heap order. */
	uint32_t oi;
	uint32_t n = 0;
	while ((oi = me_gtd_peek_due(me)) != ME_NIL && n < ME_BULK_STEP_MAX) {
		if (me_move_hold_order(me, oi) != 0) {
			/* Never a frozen book's order: OUT took their entries off the heap. An
			 * order being installed on a target has none either, but a stale entry
			 * of the record it reuses, due at the same time, looks valid: drop it.
			 * The held book's entries are pushed when its move ends (me_move.c). */
			uint32_t got = me_gtd_pop_due(me);
			CHECK(got == oi);
			DCHECK(me_move_hold_order(me, oi) == ME_MOVE_INSTALLING);
			n++;
			continue;
		}
		if (!me_bulk_room(me, me_ord(me, oi)->stream)) {
			me_count(me, ME_C_BULK_DEFERRED);
			return;
		}
		uint32_t got = me_gtd_pop_due(me);
		CHECK(got == oi);
		me_count(me, ME_C_EXPIRED);
		me_cancel_live(me, oi, WIRE_CAUSE_EXPIRED, NULL);
		n++;
	}
	DCHECK(n <= ME_BULK_STEP_MAX);
}

/* ---- dispatch ---- */

/* Contract (docs/me-contract.md, "Streams"): a request is executed only within half the
 * dedup window of cluster time after its sender built it. A finished order's record lives
 * at least that long after the ack that covers it (me_stream_ack), and a sender stops
 * re-sending before it acks, so any request that could duplicate a finished order finds
 * its record. Without this a leader paused past the window (SIGSTOP, a long GC-like stall)
 * sends its queued re-drives on waking and the ME executes them again (chaos
 * pause-leader: a cancel for a request long finished). Dropped silently: a sender whose
 * saga is still pending re-sends it with a fresh stamp. */
static bool
stale(struct me *me, uint64_t sent_ns)
{
	uint64_t half = me->limits.dedup_ttl_ns / 2;
	if (half == 0 || sent_ns == 0 || sent_ns + half >= me->now_ns)
		return false;
	me_count(me, ME_C_STALE_REQUESTS);
	return true;
}

void
me_apply(struct me *me, uint64_t now_ns, const struct wire_msg_hdr *msg, struct svc_sink *sink)
{
	CHECK(me != NULL);
	CHECK(me->magic == ME_MAGIC);
	CHECK(msg != NULL);
	CHECK(sink != NULL);
	/* Fields a newer wire minor appended are not ours to read: the book is the same with or
	 * without them, on a replica of either minor (docs/wire.md, "Versions"). */
	union wire_msg_any known;
	/* wire_msg_known returns a message no longer than its type's struct as it is: only a
	 * longer one (a newer minor's) needs the call and its copy. The same size is the short
	 * message test below (a copied message is exactly that long). */
	uint16_t size = wire_type_size(msg->type);
	if (__builtin_expect(msg->length > size, 0)) {
		msg = wire_msg_known(msg, &known);
		size = wire_type_size(msg->type);
	}
	me->rt.sink = sink;
	/* Cluster time never goes backwards (consensus clamps it); tolerate it anyway. */
	if (now_ns > me->now_ns)
		me->now_ns = now_ns;
	if (me->gtd_count > 0 && ME_ARR(me, off_gtd, struct me_gtd)[0].expire_ns <= me->now_ns)
		me_expire_due(me);
	if (me->limits.dedup_ttl_ns != 0)
		me_streams_release_aged(me);

	/* Every type handled below is read as its fixed struct: a shorter message (the decoder
	 * refuses them, so only a broken log holds one) is counted and ignored, not read. The
	 * size is wire.h's table, the same sizeof as the struct each case reads. */
	if (__builtin_expect(msg->length < size, 0) && msg->type != WIRE_TICK) {
		me_count(me, ME_C_IGNORED);
		return;
	}
	switch (msg->type) {
	case WIRE_SUBMIT:
		if (stale(me, ((const struct wire_submit *)msg)->sent_ns))
			return;
		me_submit(me, (const struct wire_submit *)msg);
		return;
	case WIRE_CANCEL_TO_ME:
	case WIRE_AMEND_TO_ME:
	case WIRE_REPLACE_TO_ME:
		if (stale(me, ((const struct wire_modify *)msg)->sent_ns))
			return;
		me_modify(me, (const struct wire_modify *)msg);
		return;
	case WIRE_REBIND_TO_ME:
		if (stale(me, ((const struct wire_rebind *)msg)->sent_ns))
			return;
		me_rebind(me, (const struct wire_rebind *)msg);
		return;
	case WIRE_STREAM_ACK:
		me_stream_ack(me, (const struct wire_stream_ack *)msg);
		/* Retention freed: deferred bulk work goes on at this log position. */
		me_bulk_resume(me);
		return;
	case WIRE_REPLAY_REQUEST:
		me_stream_replay(me, (const struct wire_replay_request *)msg);
		return;
	case WIRE_ORDER_QUERY: {
		const struct wire_order_query *q = (const struct wire_order_query *)msg;
		me_result_emit(me, q->oid, me_order_find(me, q->oid), WIRE_REASON_NONE);
		return;
	}
	case WIRE_OPEN_ORDERS_QUERY:
		me_open_orders(me, (const struct wire_open_orders_query *)msg);
		return;
	case WIRE_SYMBOL_CONFIG:
		me_symbol_config(me, (const struct wire_symbol_config *)msg);
		return;
	case WIRE_SYMBOL_STATUS:
		me_symbol_status(me, (const struct wire_symbol_status_msg *)msg);
		return;
	case WIRE_KILL_SWITCH:
		me_kill_switch(me, (const struct wire_kill_switch *)msg);
		return;
	case WIRE_SYMBOL_MOVE:
		me_symbol_move(me, (const struct wire_symbol_move *)msg);
		return;
	case WIRE_BOOK_CHUNK:
		me_book_chunk(me, (const struct wire_book_chunk *)msg);
		return;
	case WIRE_TICK:
		me_bulk_resume(me);
		return;
	default:
		break;
	}
	me_count(me, ME_C_IGNORED);
}

void
me_tick(struct me *me, uint64_t now_ns, struct svc_sink *sink)
{
	CHECK(me != NULL);
	CHECK(me->magic == ME_MAGIC);
	CHECK(sink != NULL);
	me->rt.sink = sink;
	if (now_ns > me->now_ns)
		me->now_ns = now_ns;
	me_bulk_resume(me);
	me_streams_release_aged(me);
}

uint32_t
me_orders_resting(const struct me *me)
{
	return me->resting;
}

uint32_t
me_records_used(const struct me *me)
{
	return me->records_used;
}

uint64_t
me_counter(const struct me *me, enum me_counter c)
{
	CHECK((unsigned)c < ME_C_COUNT);
	return me->counters[c];
}

const char *
me_counter_label(enum me_counter c)
{
	static const char *const labels[] = {
#define ME_COUNTER_LABEL(name, label) label,
		ME_COUNTERS(ME_COUNTER_LABEL)
#undef ME_COUNTER_LABEL
	};
	return (unsigned)c < ME_C_COUNT ? labels[c] : "?";
}

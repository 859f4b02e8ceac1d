/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Deposits and withdrawals (TRANSFER), idempotent on (user, transfer_id) for the transfer's
 * lifetime, not for a window (docs/oms.md, "Transfers for their lifetime"):
 *
 *  - an id in the resident window is answered with its original outcome (reason and the
 *    total the first reply carried);
 *  - an id not in the window may still have been applied long ago: the transfer waits while
 *    the persister looks it up in the transfers table (TRANSFER_LOOKUP; the answer,
 *    TRANSFER_FOUND, re-enters through the log, so every member decides alike). Found: the
 *    original outcome joins the window and answers it. Not found: it is applied now;
 *  - an applied transfer's outcome is pinned in the window until a flush that carries it is
 *    answered OK (the flush writes it to the transfers table in the same statement as the
 *    row), so "not in the window and not in the table" proves it was never applied.
 *
 * Every member of the shard holds the same waiting transfers (they are state, in the parked
 * slab and the snapshot); a new leader re-sends their lookups (oms_persist_foreach).
 */
#include "oms/oms_int.h"

/* The transfer matches what the window remembers (unknown content matches anything: an
 * entry stored before the asset and amount were kept). */
static bool
same_content(const struct oms_dedup *d, const struct wire_transfer *m)
{
	if (d->asset == 0 && d->content == 0)
		return true;
	return d->asset == m->asset && (int64_t)d->content == m->amount;
}

/* Answer from the window if the id is there. */
static bool
answer_from_window(struct oms *oms, struct oms_actor *a, const struct wire_transfer *m,
		   struct svc_sink *sink)
{
	const struct oms_dedup *d = oms_dedup_find(oms, a, OMS_DEDUP_XFER, m->transfer_id);
	if (d == NULL)
		return false;
	oms_count(oms, OMS_C_DUPLICATES);
	if (same_content(d, m))
		oms_admin_reply(oms, sink, m->transfer_id, d->reason, d->user_seq);
	else
		oms_admin_reply(oms, sink, m->transfer_id, WIRE_REASON_DUPLICATE_REQUEST, 0);
	return true;
}

/* The lookup FIFO entry that sent the lookup for (user, id), or OMS_NIL. */
static uint32_t
lookup_find(const struct oms *oms, uint64_t user, uint64_t transfer_id)
{
	for (uint32_t pi = oms->c.lookup_head; pi != OMS_NIL; pi = oms->parked[pi].next) {
		const struct oms_parked *p = &oms->parked[pi];
		const struct wire_transfer *t = (const void *)p->msg;
		if (p->pad == OMS_PARK_LOOKUP && t->user == user && t->transfer_id == transfer_id)
			return pi;
	}
	return OMS_NIL;
}

/* Not in the window: wait for the durable record. A repeat of an id being looked up waits
 * behind that lookup (single-flight) and is answered once it is settled. */
static void
lookup_wait(struct oms *oms, const struct wire_transfer *m, struct svc_sink *sink)
{
	if (oms->c.lookup_count >= oms_lookups_max(&oms->c.limits) ||
	    oms->c.parked_free_count == 0) {
		/* Nothing was applied: a retry is evaluated afresh. */
		oms_admin_reply(oms, sink, m->transfer_id, WIRE_REASON_BACKPRESSURE, 0);
		return;
	}
	uint32_t head = lookup_find(oms, m->user, m->transfer_id);
	if (head != OMS_NIL) {
		oms_lookup_push(oms, m, OMS_PARK_LOOKUP_DUP, oms->parked[head].msg[OMS_LOOKUP_EPOCH_WORD]);
		oms_count(oms, OMS_C_PARKED);
		return;
	}
	/* A fresh epoch names the lookup: a late answer to an earlier one never settles it. */
	uint64_t epoch = oms_epoch_next(oms);
	oms_lookup_push(oms, m, OMS_PARK_LOOKUP, epoch);
	oms_count(oms, OMS_C_XFER_LOOKUPS);
	oms_lookup_emit(oms, m->user, m->transfer_id, epoch, sink, NULL, NULL);
}

/* Apply a transfer known never to have been applied. */
static void
apply(struct oms *oms, struct oms_actor *a, const struct wire_transfer *m, struct svc_sink *sink)
{
	const struct oms_limits *l = &oms->c.limits;
	if (oms_dedup_pinned(oms, a) >= oms_xfer_pinned_max(l)) {
		/* Its outcome could not be pinned until flushed: refuse, nothing applied; the
		 * flush asked for when the pins filled up (or the write-back) frees them. */
		oms_count(oms, OMS_C_XFER_PIN_FULL);
		oms_admin_reply(oms, sink, m->transfer_id, WIRE_REASON_BACKPRESSURE, 0);
		return;
	}
	uint16_t reason = WIRE_REASON_NONE;
	struct oms_balance *b = oms_balance_get_or_add(oms, a, m->asset);
	int64_t total = 0;
	if (b == NULL) {
		reason = WIRE_REASON_CAPACITY;
	} else if (m->amount > 0) {
		if (money_add(b->total, m->amount, &total) != 0)
			reason = WIRE_REASON_OVERFLOW;
	} else {
		/* A withdrawal takes available funds only: never a negative available. */
		if (m->amount == INT64_MIN || b->total - b->reserved < -m->amount)
			reason = WIRE_REASON_INSUFFICIENT_FUNDS;
		else
			total = b->total + m->amount;
	}
	if (reason == WIRE_REASON_NONE) {
		b->total = total;
		oms_count(oms, OMS_C_TRANSFERS);
	}
	int64_t value = b != NULL ? b->total : 0;
	oms_dedup_add_xfer(oms, a, m->transfer_id, m->asset, m->amount, value, reason, true);
	oms_admin_reply(oms, sink, m->transfer_id, reason, (uint64_t)value);
	/* The pins are full: ask for a flush now (a flat user only, as every flush), so they
	 * are freed when its answer is in, whether or not activity cancels the eviction. */
	if (oms_dedup_pinned(oms, a) >= oms_xfer_pinned_max(l) && oms_actor_evictable(oms, a))
		oms_actor_begin_dehydrate(oms, a, sink);
}

/* A valid transfer: answer, wait for its lookup, or apply (looked_up: its lookup said it
 * was never applied). */
static void
transfer_run(struct oms *oms, const struct wire_transfer *m, bool looked_up,
	     struct svc_sink *sink)
{
	struct oms_actor *a = oms_actor_find(oms, m->user);
	uint16_t owner = 0;
	if (a == NULL || !oms_actor_serving(a)) {
		/* Deposits and withdrawals hydrate a cold user first. */
		int r = oms_actor_park(oms, m->user, &m->hdr, false, true, sink, &owner);
		if (r != 0)
			oms_admin_reply(oms, sink, m->transfer_id, (uint16_t)r, owner);
		return;
	}
	if (!oms_actor_owned(oms, a, &owner, sink)) {
		/* Moving to its new owner (oms_actor_move_out): refused here. */
		oms_admin_reply(oms, sink, m->transfer_id, WIRE_REASON_NOT_OWNER, owner);
		return;
	}
	oms_actor_touch(oms, a);
	if (answer_from_window(oms, a, m, sink))
		return;
	/* Above every id ever recorded for the user: never applied, no lookup needed. */
	if (!looked_up && m->transfer_id <= a->xfer_id_max) {
		lookup_wait(oms, m, sink);
		return;
	}
	apply(oms, a, m, sink);
}

void
oms_on_transfer(struct oms *oms, const struct wire_transfer *m, struct svc_sink *sink)
{
	/* An asset id the database holds (integer): a balance it cannot flush would pin the
	 * user resident for ever. */
	if (m->amount == 0 || m->asset == 0 || m->asset > INT32_MAX || m->user == 0) {
		oms_admin_reply(oms, sink, m->transfer_id, WIRE_REASON_BAD_REQUEST, 0);
		return;
	}
	transfer_run(oms, m, false, sink);
}

/* Move every waiting entry of (user, id, epoch) from the lookup FIFO to a chain of their
 * own, in order. Returns the chain's head (OMS_NIL: no such lookup). */
static uint32_t
lookup_detach(struct oms *oms, uint64_t user, uint64_t transfer_id, uint64_t epoch)
{
	uint32_t head = OMS_NIL, tail = OMS_NIL, prev = OMS_NIL;
	uint32_t pi = oms->c.lookup_head;
	while (pi != OMS_NIL) {
		struct oms_parked *p = &oms->parked[pi];
		const struct wire_transfer *t = (const void *)p->msg;
		uint32_t next = p->next;
		if (t->user != user || t->transfer_id != transfer_id ||
		    p->msg[OMS_LOOKUP_EPOCH_WORD] != epoch) {
			prev = pi;
			pi = next;
			continue;
		}
		if (prev != OMS_NIL)
			oms->parked[prev].next = next;
		else
			oms->c.lookup_head = next;
		if (oms->c.lookup_tail == pi)
			oms->c.lookup_tail = prev;
		oms->c.lookup_count--;
		p->next = OMS_NIL;
		if (tail != OMS_NIL)
			oms->parked[tail].next = pi;
		else
			head = pi;
		tail = pi;
		pi = next;
	}
	return head;
}

void
oms_on_transfer_found(struct oms *oms, const struct wire_transfer_found *m,
		      struct svc_sink *sink)
{
	if (m->status < WIRE_XFER_FOUND || m->status > WIRE_XFER_ERROR ||
	    (m->status == WIRE_XFER_FOUND &&
	     (m->rec.kind != WIRE_RECENT_TRANSFER || m->rec.id != m->transfer_id ||
	      m->rec.reason >= WIRE_REASON_MAX))) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return;
	}
	uint32_t pi = lookup_detach(oms, m->user, m->transfer_id, m->epoch);
	if (pi == OMS_NIL) {
		/* A repeat (a new leader asked again) of an answer already applied. */
		oms_count(oms, OMS_C_XFER_LOOKUP_STALE);
		return;
	}
	struct oms_actor *a = oms_actor_find(oms, m->user);
	/* The answer speaks for the incarnation that asked: if that actor was dropped since,
	 * the group (its head was there from the start) looks again. */
	bool here = a != NULL && oms_actor_serving(a);
	bool trusted = here && oms->parked[pi].msg[OMS_LOOKUP_ORPHAN_WORD] == 0;
	if (m->status == WIRE_XFER_FOUND) {
		/* Found is true for every incarnation: a recorded transfer stays recorded. */
		oms_count(oms, OMS_C_XFER_FOUND);
		if (here && oms_dedup_find(oms, a, OMS_DEDUP_XFER, m->transfer_id) == NULL)
			oms_dedup_add_xfer(oms, a, m->transfer_id, m->rec.asset, m->rec.amount,
					   (int64_t)m->rec.user_seq, m->rec.reason, false);
	}
	/* Settle the waiting transfers in log order: the first of a NOT_FOUND is applied
	 * (if its actor is still here), the rest are then answered from the window. A user
	 * evicted meanwhile hydrates again and looks again. */
	while (pi != OMS_NIL) {
		struct oms_parked p = oms->parked[pi];
		memset(&oms->parked[pi], 0, sizeof(oms->parked[pi]));
		oms->parked_free[oms->c.parked_free_count++] = pi;
		oms->c.parked_used--;
		pi = p.next;
		const struct wire_transfer *t = (const void *)p.msg;
		if (m->status == WIRE_XFER_ERROR)
			oms_admin_reply(oms, sink, t->transfer_id, WIRE_REASON_DB_ERROR, 0);
		else
			transfer_run(oms, t, trusted, sink);
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Periodic write-back of dirty resident users (docs/oms.md, "Write-back"; docs/fencing.md).
 *
 * Seed: "the user-actor is a write-back cache over a durable DB". Eviction alone writes a
 * user only when it goes cold, so a user who trades all day would reach the database only at
 * night. Every writeback_interval_ns of cluster time a pass sends BEGIN_DEHYDRATE for the
 * users whose flushed state (balance totals, user_seq, tier, recent window) changed since
 * the row was last known to hold it, oldest change first, and keeps each actor resident:
 * the flush keeps the claim (docs/fencing.md), so nothing about ownership moves. The
 * persister cannot tell a write-back from an eviction's flush, and needs not: both write
 * under our claim and keep it; what the answer means is decided here, from the actor.
 *
 * Dirty tracking is a generation (oms_actor_changed bumps change_gen): a write-back records
 * the generation it was built from (wb_gen) and its OK answer marks only that generation
 * clean (clean_gen), so a change made while it was in flight stays dirty and the next pass
 * writes the user again. The dirty list (oms_int.h) holds exactly the actors a write-back may
 * start for, so a pass costs O(written), not O(resident).
 */
#include "oms/oms_int.h"

/* Flush answers this shard may still wait for: releases_max bounds the persister work in
 * flight (pending releases, eviction flushes, write-backs). A write-back takes only the room
 * evictions leave free, so it never holds one up (oms_actor_evictable does not count it). */
static uint32_t
wb_room(const struct oms *oms)
{
	uint64_t used = (uint64_t)oms->c.release_count + oms->c.flushing.count + oms->c.wb_inflight;
	uint64_t max = oms->c.limits.releases_max;
	return used >= max ? 0 : (uint32_t)(max - used);
}

/* Start a's write-back: a fresh epoch, newer than the claim's stamp (docs/fencing.md), and
 * the state as it is now. The actor stays RESIDENT and keeps serving; no other flush starts
 * for it until the answer is in (flush_epoch). */
static void
wb_begin(struct oms *oms, struct oms_actor *a, struct svc_sink *sink)
{
	DCHECK(oms_wb_wanted(a));
	a->epoch = oms_epoch_next(oms);
	a->flush_epoch = a->epoch;
	a->wb_gen = a->change_gen;
	a->since_ns = oms->c.now_ns;
	a->flags |= OMS_AF_WB;
	oms->c.wb_inflight++;
	oms_wb_relink(oms, a); /* off the dirty list: an answer is outstanding */
	oms_count(oms, OMS_C_WRITEBACKS);
	oms_emit_begin_dehydrate(oms, a, a->epoch, sink, NULL, NULL);
}

void
oms_writeback_pass(struct oms *oms, struct svc_sink *sink)
{
	uint32_t room = wb_room(oms);
	uint32_t max = oms->c.limits.writeback_max < room ? oms->c.limits.writeback_max : room;
	/* While cold users wait for room (docs/oms.md "Admission") a flat user is left to the
	 * pump: its eviction writes it, and a write-back in flight would keep it from being
	 * evicted until the answer is in — under churn the oldest changes are the idle users the
	 * pump wants. The look past them is bounded. */
	bool pressure = oms->c.waiting.count > 0;
	uint32_t looked = 0, look_max = 4 * max + 64;
	for (uint32_t n = 0, idx = oms->c.dirty.tail; n < max && idx != OMS_NIL && looked < look_max;
	     looked++) {
		struct oms_actor *a = &oms->actors[idx];
		idx = a->wb_prev;
		if (pressure && oms_actor_flat(a))
			continue;
		wb_begin(oms, a, sink);
		n++;
	}
}

void
oms_wb_on_flush_complete(struct oms *oms, struct oms_actor *a, const struct wire_flush_complete *m)
{
	DCHECK((a->flags & OMS_AF_WB) != 0);
	DCHECK(a->flush_epoch == m->epoch);
	/* Nothing moves a write-back's actor off RESIDENT or bumps its epoch while the answer is
	 * outstanding: no eviction starts (flush_epoch), and activity only bumps a FLUSHING one. */
	DCHECK(a->state == OMS_A_RESIDENT);
	DCHECK(a->epoch == m->epoch);
	a->flags &= (uint8_t)~OMS_AF_WB;
	a->flush_epoch = 0;
	DCHECK(oms->c.wb_inflight > 0);
	oms->c.wb_inflight--;
	switch (m->status) {
	case WIRE_FLUSH_OK:
		/* The row holds the state of wb_gen (or newer: a re-drive sends the current state
		 * under the same epoch). The next CAS expects the version this write produced. */
		oms_count(oms, OMS_C_WRITEBACKS_OK);
		hist_record(&oms->c.wb_hist, oms->c.now_ns - a->since_ns);
		if (m->version > a->version)
			a->version = m->version;
		a->clean_gen = a->wb_gen;
		break;
	case WIRE_FLUSH_CONFLICT:
		/* As for an eviction's flush: a foreign write moved the row. Keep the actor, raise
		 * the alarm, no automatic flush of this user until an operator acts. */
		oms_count(oms, OMS_C_ALARM_FLUSH_CONFLICT);
		a->flags |= OMS_AF_CONFLICT;
		a->epoch = oms_epoch_next(oms);
		break;
	default:
		/* Transient: still dirty, so the next pass tries again. */
		oms_count(oms, OMS_C_FLUSH_ERRORS);
		a->epoch = oms_epoch_next(oms);
		break;
	}
	oms_wb_relink(oms, a);
}

/* Walk the dirty list with bounds (it may come from a snapshot): links in range, back-links
 * right, every member wanted. Returns the members, or UINT32_MAX when broken. */
static uint32_t
dirty_walk(const struct oms *oms)
{
	const struct oms_list *l = &oms->c.dirty;
	uint32_t prev = OMS_NIL, n = 0;
	for (uint32_t i = l->head; i != OMS_NIL; i = oms->actors[i].wb_next) {
		if (i >= oms->actor_slots || n++ >= oms->actor_slots)
			return UINT32_MAX;
		const struct oms_actor *a = &oms->actors[i];
		if ((a->flags & OMS_AF_DIRTY) == 0 || a->wb_prev != prev || !oms_wb_wanted(a))
			return UINT32_MAX;
		prev = i;
	}
	return prev == l->tail ? n : UINT32_MAX;
}

int
oms_wb_check(const struct oms *oms)
{
	uint32_t listed = dirty_walk(oms);
	if (listed == UINT32_MAX || listed != oms->c.dirty.count)
		return -EFAULT;
	uint32_t wanted = 0, inflight = 0;
	for (uint32_t i = 0; i < oms->actor_slots; i++) {
		const struct oms_actor *a = &oms->actors[i];
		if (a->state == OMS_A_FREE)
			continue;
		wanted += oms_wb_wanted(a);
		if (((a->flags & OMS_AF_DIRTY) != 0) != oms_wb_wanted(a))
			return -EFAULT;
		if (a->clean_gen > a->change_gen)
			return -EFAULT;
		if ((a->flags & OMS_AF_WB) != 0) {
			if (a->state != OMS_A_RESIDENT || a->flush_epoch == 0 ||
			    a->flush_epoch != a->epoch)
				return -EFAULT;
			inflight++;
		}
		if (a->flush_epoch != 0 && (a->wb_gen < a->clean_gen || a->wb_gen > a->change_gen))
			return -EFAULT;
	}
	if (wanted != listed || inflight != oms->c.wb_inflight)
		return -EFAULT;
	return 0;
}

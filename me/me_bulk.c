/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me bulk: ME-initiated cancels of many orders (halt with cancel, symbol and user
 * kill-switches, GTD expiries) that never write over retention an OMS has not acknowledged.
 *
 * A client request is refused with BACKPRESSURE when its stream is short of retention; the
 * ME's own bulk work cannot be refused, so it waits instead. A halt or kill-switch becomes a
 * job in the engine's state (struct me, bulk[]): each step cancels orders in the job's order
 * (a book best level first and FIFO within a level, bids then asks; a user's orders oldest
 * first) as long as the stream of the next order has room for its CANCELLED + DONE above the
 * events_reserve headroom left to client requests, and at most ME_BULK_STEP_MAX orders per
 * step. A job whose next order has no room waits there (the following jobs still run); it
 * resumes when a STREAM_ACK frees retention and on every tick. GTD expiries follow the same
 * rule, the heap itself being their queue.
 *
 * Everything happens inside message application, so every replica cancels the same orders
 * at the same log position; the jobs are state, so snapshots carry them and the state hash
 * covers them, and a new leader or a restarted replica goes on where the log left off.
 *
 * While a job waits, its orders stay LIVE on their book: queries, open-orders snapshots and
 * depth show them (the symbol already says HALTED or killed, and no order can trade on it).
 * A killed user's order on a trading book and a GTD order past its time could still be met
 * by a taker: match() asks me_bulk_doomed() and cancels such a maker on the spot instead of
 * trading with it (its stream needs only the two slots of that cancel).
 */
#include <errno.h>
#include <string.h>

#include "me/me_int.h"

enum step {
	STEP_DONE,     /* nothing left to cancel */
	STEP_STALLED,  /* the next order's stream has no room: wait for an ack */
	STEP_BUDGET,   /* the step cap is spent */
};

static void
gauge(struct me *me)
{
	DCHECK(me->bulk_count <= ME_BULK_JOBS_MAX);
	me->counters[ME_C_BULK_PENDING] = me->bulk_count;
}

/* Cancel one order for job j, if its stream has room. */
static enum step
cancel_one(struct me *me, const struct me_bulk_job *j, uint32_t oi, uint32_t *budget)
{
	if (*budget == 0)
		return STEP_BUDGET;
	if (!me_bulk_room(me, me_ord(me, oi)->stream))
		return STEP_STALLED;
	me_count(me, j->cause == WIRE_CAUSE_HALT ? ME_C_HALT_CANCELLED : ME_C_KILLED);
	me_count(me, ME_C_BULK_CANCELLED);
	me_cancel_live(me, oi, j->cause, NULL);
	(*budget)--;
	return STEP_DONE;
}

static enum step
book_step(struct me *me, const struct me_bulk_job *j, uint32_t *budget)
{
	CHECK(j->id < me->symbols_used);
	uint32_t si = (uint32_t)j->id;
	/* Never a book a move holds: OUT and chunk 0 wait for the job, and a held book's
	 * halt or kill-switch waits for the move (me_move.c). */
	DCHECK(me_move_hold(me, si) == 0);
	for (uint32_t side = 0; side < 2; side++) {
		uint32_t li;
		while ((li = me_book_best(me, si, side)) != ME_NIL) {
			enum step r = cancel_one(me, j, me_lvl(me, li)->head, budget);
			if (r != STEP_DONE)
				return r;
		}
	}
	DCHECK(me_sym(me, si)->resting == 0);
	return STEP_DONE;
}

static enum step
user_step(struct me *me, const struct me_bulk_job *j, uint32_t *budget)
{
	/* The slot stays while the job runs: it carries the kill flag, which cannot be released
	 * before the job ends (me_kill_switch), so u stays valid while orders are unlinked. */
	struct me_user *u = me_user_find(me, j->id);
	if (u == NULL)
		return STEP_DONE;
	/* Orders of a book a move holds (me_move.c) are skipped: frozen ones are leaving, or
	 * stay and get a job again when the move is aborted; installed ones are not here yet
	 * and get one when the target opens the book. Each order is visited at most once. */
	uint32_t left = u->count & ME_USER_COUNT;
	uint32_t oi = u->head;
	while (left > 0) {
		left--;
		uint32_t next = me_ord(me, oi)->unext;
		if (me_move_hold_order(me, oi) == 0) {
			enum step r = cancel_one(me, j, oi, budget);
			if (r != STEP_DONE)
				return r;
		}
		oi = next;
	}
	return STEP_DONE;
}

/* Drop job i, keeping the others in their order; the freed slot is zeroed (hashed state). */
static void
job_remove(struct me *me, uint32_t i)
{
	CHECK(i < me->bulk_count);
	uint32_t n = --me->bulk_count;
	memmove(&me->bulk[i], &me->bulk[i + 1], (size_t)(n - i) * sizeof(me->bulk[0]));
	memset(&me->bulk[n], 0, sizeof(me->bulk[n]));
	gauge(me);
}

/* One step over the pending jobs, oldest first. */
static void
jobs_run(struct me *me)
{
	uint32_t budget = ME_BULK_STEP_MAX;
	bool stalled = false;
	uint32_t i = 0;
	while (i < me->bulk_count) {
		const struct me_bulk_job *j = &me->bulk[i];
		enum step r = j->kind == ME_BULK_BOOK ? book_step(me, j, &budget)
						      : user_step(me, j, &budget);
		if (r == STEP_DONE) {
			job_remove(me, i);
			continue;
		}
		if (r == STEP_BUDGET)
			break;
		stalled = true;
		i++;
	}
	if (stalled)
		me_count(me, ME_C_BULK_DEFERRED);
	DCHECK(budget <= ME_BULK_STEP_MAX);
}

static int
job_find(const struct me *me, uint8_t kind, uint64_t id)
{
	for (uint32_t i = 0; i < me->bulk_count; i++)
		if (me->bulk[i].kind == kind && me->bulk[i].id == id)
			return (int)i;
	return -1;
}

bool
me_bulk_pending(const struct me *me, uint8_t kind, uint64_t id)
{
	DCHECK(kind == ME_BULK_BOOK || kind == ME_BULK_USER);
	return job_find(me, kind, id) >= 0;
}

int
me_bulk_add(struct me *me, uint8_t kind, uint64_t id, uint8_t cause)
{
	CHECK(kind == ME_BULK_BOOK || kind == ME_BULK_USER);
	CHECK(cause == WIRE_CAUSE_HALT || cause == WIRE_CAUSE_KILL_SWITCH);
	if (job_find(me, kind, id) < 0) {
		if (me->bulk_count == ME_BULK_JOBS_MAX)
			return -ENOSPC;
		struct me_bulk_job *j = &me->bulk[me->bulk_count++];
		memset(j, 0, sizeof(*j));
		j->id = id;
		j->kind = kind;
		j->cause = cause;
		me_count(me, ME_C_BULK_JOBS);
		gauge(me);
	}
	/* Small jobs end here, in the same apply, exactly as an unbounded loop would. */
	jobs_run(me);
	return 0;
}

void
me_bulk_resume(struct me *me)
{
	CHECK(me->bulk_count <= ME_BULK_JOBS_MAX);
	me_expire_due(me);
	if (me->bulk_count > 0)
		jobs_run(me);
}

uint8_t
me_bulk_doomed(struct me *me, uint32_t oi)
{
	const struct me_order *o = me_ord(me, oi);
	DCHECK(o->state == ME_ST_LIVE);
	if (o->tif == WIRE_TIF_GTD && o->expire_ns <= me->now_ns)
		return WIRE_CAUSE_EXPIRED;
	for (uint32_t i = 0; i < me->bulk_count; i++) {
		const struct me_bulk_job *j = &me->bulk[i];
		if (j->kind == ME_BULK_USER && j->id == o->oid.user)
			return j->cause;
		if (j->kind == ME_BULK_BOOK && j->id == me_lvl(me, o->level)->symbol)
			return j->cause;
	}
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me admin: symbol configuration, halt/resume, kill-switches. Each arrives as an entry in the
 * shard's log and is answered with an ADMIN_REPLY (reason NONE on success, value = the symbol
 * or user it concerns).
 */
#include <errno.h>
#include <string.h>

#include "me/me_int.h"

/* Answer an admin entry: reason NONE on success, value = the symbol or user it concerns. */
void
me_admin_reply(struct me *me, uint16_t reason, uint64_t value)
{
	DCHECK(reason < WIRE_REASON_MAX);
	struct wire_admin_reply r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_ADMIN_REPLY, me->limits.shard);
	r.reason = reason;
	r.value = value;
	if (reason != WIRE_REASON_NONE)
		me_count(me, ME_C_CONFIG_REJECTED);
	svc_emit(me->rt.sink, WIRE_DEST_ADMIN, &r);
}

static bool
config_valid(const struct wire_symbol_config *m)
{
	if (m->symbol == 0 || m->reserved0 != 0)
		return false;
	if (m->status != WIRE_SYM_TRADING && m->status != WIRE_SYM_HALTED)
		return false;
	if (m->tick <= 0 || m->lot <= 0 || m->base_unit <= 0)
		return false;
	if (m->min_qty < 0 || m->min_notional < 0 || m->ref_px < 0)
		return false;
	if (m->ref_px % m->tick != 0)
		return false;
	/* A band beyond 100% is not a band. */
	if (m->band_bps > MONEY_BPS_DENOM)
		return false;
	/* money.h: tick * lot must be a multiple of base_unit, so every on-tick, on-lot trade
	 * has an exact notional. */
	int64_t tl;
	if (money_mul(m->tick, m->lot, &tl) != 0)
		return false;
	if (tl % m->base_unit != 0)
		return false;
	return true;
}

/* Can book si's orders be handed to a bulk job (or are there none, or is it queued)? */
static bool
book_job_room(const struct me *me, uint32_t si)
{
	const struct me_symbol *s = &ME_CARR(me, off_symbols, struct me_symbol)[si];
	return s->resting == 0 || me->bulk_count < ME_BULK_JOBS_MAX ||
	       me_bulk_pending(me, ME_BULK_BOOK, si);
}

/* Cancel every live order of book si (its status already forbids trading) as a bulk job
 * (me_bulk.c): in chunks as the streams have room, best levels first, FIFO within a
 * level. The caller checked book_job_room. */
static void
cancel_book(struct me *me, uint32_t si, uint8_t cause)
{
	DCHECK(book_job_room(me, si));
	if (me_sym(me, si)->resting == 0)
		return;
	int rc = me_bulk_add(me, ME_BULK_BOOK, si, cause);
	CHECK(rc == 0);
}

void
me_symbol_config(struct me *me, const struct wire_symbol_config *m)
{
	if (!config_valid(m)) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
		return;
	}
	uint32_t si = me_symbol_find(me, m->symbol);
	if (si == ME_NIL) {
		si = me_symbol_add(me, m->symbol);
		if (si == ME_NIL) {
			me_admin_reply(me, WIRE_REASON_CAPACITY, m->symbol);
			return;
		}
	} else {
		const struct me_symbol *s = me_sym(me, si);
		/* A move holds the book (me_move.c): its config is what the book was counted,
		 * hashed and validated against. The operator retries once the move is over. */
		if (me_move_hold(me, si) != 0) {
			me_admin_reply(me, WIRE_REASON_BACKPRESSURE, m->symbol);
			return;
		}
		/* Resting orders were validated against the old grid: changing it needs an empty
		 * book first. This shard gains or loses the symbol only by a move (SYMBOL_MOVE,
		 * me_move.c), which hands its book over: a config making it the owner, or naming
		 * another while it owns it, would strand a book (or, re-sent late, take a moved
		 * symbol back). A shard that owns it neither way just notes the owner. */
		bool owns = s->me_shard == me->limits.shard;
		if (owns != (m->me_shard == me->limits.shard) ||
		    (s->resting > 0 && (s->tick != m->tick || s->lot != m->lot ||
					s->base_unit != m->base_unit))) {
			me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
			return;
		}
	}
	/* A book still being cancelled stays untradable until its job ends (me_bulk.c): the
	 * operator is told to retry. */
	if (m->status == WIRE_SYM_TRADING && me_bulk_pending(me, ME_BULK_BOOK, si)) {
		me_admin_reply(me, WIRE_REASON_BACKPRESSURE, m->symbol);
		return;
	}
	struct me_symbol *s = me_sym(me, si);
	s->me_shard = m->me_shard;
	s->status = m->status;
	s->base_asset = m->base_asset;
	s->quote_asset = m->quote_asset;
	s->tick = m->tick;
	s->lot = m->lot;
	s->min_qty = m->min_qty;
	s->min_notional = m->min_notional;
	s->base_unit = m->base_unit;
	s->ref_px = m->ref_px;
	s->band_bps = m->band_bps;
	me_admin_reply(me, WIRE_REASON_NONE, m->symbol);
}

void
me_symbol_status(struct me *me, const struct wire_symbol_status_msg *m)
{
	if ((m->status != WIRE_SYM_TRADING && m->status != WIRE_SYM_HALTED) || m->reserved != 0 ||
	    m->cancel_resting > 1) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
		return;
	}
	uint32_t si = me_symbol_find(me, m->symbol);
	if (si == ME_NIL) {
		me_admin_reply(me, WIRE_REASON_UNKNOWN_SYMBOL, m->symbol);
		return;
	}
	struct me_symbol *s = me_sym(me, si);
	/* A held book (me_move.c) neither halts nor resumes, nor is it cancelled: retry once
	 * the move is over (on the new owner if it went through). */
	if (me_move_hold(me, si) != 0) {
		me_admin_reply(me, WIRE_REASON_BACKPRESSURE, m->symbol);
		return;
	}
	if (s->me_shard != me->limits.shard) {
		me_admin_reply(me, WIRE_REASON_SYMBOL_NOT_OWNED, m->symbol);
		return;
	}
	if (m->status == WIRE_SYM_TRADING && me_bulk_pending(me, ME_BULK_BOOK, si)) {
		me_admin_reply(me, WIRE_REASON_BACKPRESSURE, m->symbol);
		return;
	}
	bool cancel = m->status == WIRE_SYM_HALTED && m->cancel_resting;
	if (cancel && !book_job_room(me, si)) {
		me_admin_reply(me, WIRE_REASON_CAPACITY, m->symbol);
		return;
	}
	/* Halted first: no order enters or trades while the job cancels the book. */
	s->status = m->status;
	if (cancel)
		cancel_book(me, si, WIRE_CAUSE_HALT);
	me_admin_reply(me, WIRE_REASON_NONE, m->symbol);
}

void
me_kill_switch(struct me *me, const struct wire_kill_switch *m)
{
	static const uint8_t zero[6];
	if ((m->scope != WIRE_KILL_USER && m->scope != WIRE_KILL_SYMBOL) || m->engage > 1 ||
	    memcmp(m->reserved, zero, sizeof(zero)) != 0) {
		me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->id);
		return;
	}
	if (m->scope == WIRE_KILL_SYMBOL) {
		uint32_t si = m->id <= UINT32_MAX ? me_symbol_find(me, (uint32_t)m->id) : ME_NIL;
		if (si == ME_NIL) {
			me_admin_reply(me, WIRE_REASON_UNKNOWN_SYMBOL, m->id);
			return;
		}
		struct me_symbol *s = me_sym(me, si);
		/* Likewise for the symbol's kill-switch while a move holds its book. */
		if (me_move_hold(me, si) != 0) {
			me_admin_reply(me, WIRE_REASON_BACKPRESSURE, m->id);
			return;
		}
		if (!m->engage && me_bulk_pending(me, ME_BULK_BOOK, si)) {
			me_admin_reply(me, WIRE_REASON_BACKPRESSURE, m->id);
			return;
		}
		if (m->engage && !book_job_room(me, si)) {
			me_admin_reply(me, WIRE_REASON_CAPACITY, m->id);
			return;
		}
		s->killed = m->engage;
		if (m->engage)
			cancel_book(me, si, WIRE_CAUSE_KILL_SWITCH);
		me_admin_reply(me, WIRE_REASON_NONE, m->id);
		return;
	}
	if (!m->engage) {
		/* Released only once its job has cancelled every order it had (me_bulk.c). */
		if (me_bulk_pending(me, ME_BULK_USER, m->id)) {
			me_admin_reply(me, WIRE_REASON_BACKPRESSURE, m->id);
			return;
		}
		struct me_user *u = me_user_find(me, m->id);
		if (u != NULL && (u->count & ME_USER_KILLED) != 0) {
			CHECK(me->users_killed > 0);
			me->users_killed--;
			u->count &= ~ME_USER_KILLED;
			me_user_put(me, u);
		}
		me_admin_reply(me, WIRE_REASON_NONE, m->id);
		return;
	}
	struct me_user *u = me_user_get(me, m->id);
	if (u == NULL) {
		me_admin_reply(me, WIRE_REASON_CAPACITY, m->id);
		return;
	}
	bool has_orders = (u->count & ME_USER_COUNT) != 0;
	if (has_orders && !me_bulk_pending(me, ME_BULK_USER, m->id) &&
	    me->bulk_count == ME_BULK_JOBS_MAX) {
		me_admin_reply(me, WIRE_REASON_CAPACITY, m->id);
		return;
	}
	if ((u->count & ME_USER_KILLED) == 0)
		me->users_killed++;
	u->count |= ME_USER_KILLED;
	/* Cancel the user's live orders, oldest first, as a bulk job (me_bulk.c). The slot
	 * stays (it carries the kill flag), so the job finds it until it ends. */
	if (has_orders) {
		int rc = me_bulk_add(me, ME_BULK_USER, m->id, WIRE_CAUSE_KILL_SWITCH);
		CHECK(rc == 0);
	}
	me_admin_reply(me, WIRE_REASON_NONE, m->id);
}

/* ---- read-only views (mgmt) ---- */

uint32_t
me_symbol_count(const struct me *me)
{
	CHECK(me != NULL);
	return me->symbols_used;
}

int
me_symbol_at(const struct me *me, uint32_t i, struct me_symbol_info *out)
{
	CHECK(me != NULL);
	CHECK(out != NULL);
	if (i >= me->symbols_used)
		return -ENOENT;
	/* me_sym is an accessor of mutable state; this view only reads it. */
	const struct me_symbol *s = me_sym((struct me *)(uintptr_t)me, i);
	memset(out, 0, sizeof(*out));
	/* The shared fields (ME_SYMBOL_SHARED_FIELDS) are laid out alike in both: one block. */
	memcpy(out, s, offsetof(struct me_symbol_info, band_bps));
	out->band_bps = s->band_bps;
	out->resting = s->resting;
	out->trade_seq = s->trade_seq;
	DCHECK(out->symbol != 0);
	return 0;
}

int
me_symbol_get(const struct me *me, uint32_t symbol, struct me_symbol_info *out)
{
	CHECK(me != NULL);
	CHECK(out != NULL);
	uint32_t si = me_symbol_find((struct me *)(uintptr_t)me, symbol);
	if (si == ME_NIL)
		return -ENOENT;
	return me_symbol_at(me, si, out);
}

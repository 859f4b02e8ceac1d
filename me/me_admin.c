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

/* Cancel every live order of one book (best levels first, FIFO within a level). */
static uint32_t
cancel_book(struct me *me, uint32_t si, uint8_t cause)
{
	uint32_t n = 0;
	for (uint32_t side = 0; side < 2; side++) {
		uint32_t li;
		while ((li = me_book_best(me, si, side)) != ME_NIL) {
			me_cancel_live(me, me_lvl(me, li)->head, cause, NULL);
			n++;
		}
	}
	return n;
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
		/* Resting orders were validated against the old grid and belong to this shard:
		 * changing the grid or moving the symbol away needs an empty book first (seed:
		 * resharding quiesces the symbol before the map flips). */
		if (s->resting > 0 &&
		    (s->tick != m->tick || s->lot != m->lot || s->base_unit != m->base_unit ||
		     s->me_shard != m->me_shard)) {
			me_admin_reply(me, WIRE_REASON_BAD_REQUEST, m->symbol);
			return;
		}
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
	if (s->me_shard != me->limits.shard) {
		me_admin_reply(me, WIRE_REASON_SYMBOL_NOT_OWNED, m->symbol);
		return;
	}
	s->status = m->status;
	if (m->status == WIRE_SYM_HALTED && m->cancel_resting) {
		uint32_t n = cancel_book(me, si, WIRE_CAUSE_HALT);
		me->counters[ME_C_HALT_CANCELLED] += n;
	}
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
		s->killed = m->engage;
		if (m->engage) {
			uint32_t n = cancel_book(me, si, WIRE_CAUSE_KILL_SWITCH);
			me->counters[ME_C_KILLED] += n;
		}
		me_admin_reply(me, WIRE_REASON_NONE, m->id);
		return;
	}
	if (!m->engage) {
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
	if ((u->count & ME_USER_KILLED) == 0)
		me->users_killed++;
	u->count |= ME_USER_KILLED;
	/* Cancel the user's live orders, oldest first. The slot stays (it carries the kill
	 * flag), so u remains valid while orders are unlinked. */
	while ((u->count & ME_USER_COUNT) != 0) {
		me->counters[ME_C_KILLED]++;
		me_cancel_live(me, u->head, WIRE_CAUSE_KILL_SWITCH, NULL);
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

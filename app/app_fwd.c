/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admin forwarding's pure parts (app_fwd.h): the dedup table of forwarded commands, the
 * origin's re-send policy and a request's verdict. No DPDK call, no clock, no allocation.
 */
#include <string.h>

#include "app.h"
#include "app_fwd.h"
#include "common/check.h"
#include "common/wire.h"

static_assert(sizeof(struct wire_symbol_config) == APP_FWD_MSG_MAX, "APP_FWD_MSG_MAX");

struct app_fwd_seen *
app_fwd_seen_find(struct app_fwd_seen_table *t, uint32_t origin, uint64_t fwd_id)
{
	if (origin == 0)
		return NULL;
	for (uint32_t i = 0; i < APP_FWD_SEEN_MAX; i++) {
		struct app_fwd_seen *e = &t->e[i];
		if (e->state != APP_FWD_FREE && e->origin == origin && e->fwd_id == fwd_id)
			return e;
	}
	return NULL;
}

struct app_fwd_seen *
app_fwd_seen_get(struct app_fwd_seen_table *t, uint32_t origin, uint64_t fwd_id)
{
	CHECK(origin != 0);
	struct app_fwd_seen *e = app_fwd_seen_find(t, origin, fwd_id);
	if (e != NULL)
		return e;
	/* A ring: the oldest command is forgotten. Its origin gave up on it long ago (a
	 * request lives at most 60 s; the ring holds more commands than all nodes can have
	 * in flight, APP_CMDS_MAX each). */
	e = &t->e[t->next];
	t->next = (t->next + 1) % APP_FWD_SEEN_MAX;
	memset(e, 0, sizeof(*e));
	e->origin = origin;
	e->fwd_id = fwd_id;
	CHECK(e->state == APP_FWD_FREE);
	return e;
}

enum app_fwd_verdict
app_fwd_seen_verdict(const struct app_fwd_seen *e, uint64_t term)
{
	if (e == NULL || e->state == APP_FWD_FREE)
		return APP_FWD_PROPOSE;
	if (e->state == APP_FWD_DONE)
		return APP_FWD_ANSWER;
	/* Pending in an earlier term and not applied although this leader's state is
	 * current: that entry was never committed (Raft §5.4: a leader's log holds every
	 * committed entry), so the command was not applied. */
	return e->term == term ? APP_FWD_WAIT : APP_FWD_PROPOSE;
}

bool
app_fwd_member_effected(uint32_t op, bool voter, bool learner)
{
	switch (op) {
	case WIRE_MEMBER_ADD:
		return voter || learner;
	case WIRE_MEMBER_PROMOTE:
		return voter;
	case WIRE_MEMBER_REMOVE:
		return !voter && !learner;
	default:
		return false; /* not a change: cns_member_change refuses it */
	}
}

enum app_fwd_transfer
app_fwd_transfer_state(const struct app_fwd_transfer_view *v)
{
	CHECK(v->to != 0);
	CHECK(v->abandon_ns <= v->forget_ns);
	if (v->leader == v->to)
		return APP_FWD_TRANSFER_DONE;
	if (v->leads) {
		/* Consensus gave up (an election timeout without `to` taking over), or this
		 * member lost the lead and won it back: `to` did not win. */
		if (!v->same_term || v->now_ns >= v->abandon_ns)
			return APP_FWD_TRANSFER_FAILED;
		return APP_FWD_TRANSFER_WAIT;
	}
	if (v->leader != 0)
		return APP_FWD_TRANSFER_FORGET; /* another node won: it decides a re-send */
	/* No leader known: the election `to` was told to start may still be running. */
	return v->now_ns >= v->forget_ns ? APP_FWD_TRANSFER_FORGET : APP_FWD_TRANSFER_WAIT;
}

enum app_fwd_act
app_fwd_due(struct app_fwd_try *t, uint64_t now_ns, uint32_t guess, bool *rotate)
{
	*rotate = false;
	if (t->next_ns != 0 && now_ns < t->next_ns)
		return APP_FWD_ACT_WAIT;
	t->next_ns = now_ns + APP_FWD_RESEND_NS;
	if (guess == 0)
		return APP_FWD_ACT_WAIT; /* an election: ask again at the next resend */
	if (guess == t->node && t->silent >= APP_FWD_SILENT_MAX) {
		/* That node does not answer (dead, or not hosting the shard): the caller moves
		 * its hint to another member, and the resend after this one goes there. */
		*rotate = true;
		t->silent = 0;
	}
	if (guess != t->node)
		t->silent = 0;
	t->node = guess;
	t->sends++;
	t->silent++;
	return APP_FWD_ACT_SEND;
}

enum app_fwd_act
app_fwd_not_leader(struct app_fwd_try *t, uint64_t now_ns, uint32_t from, uint32_t hint)
{
	t->silent = 0;
	if (hint == 0 || hint == from) {
		t->next_ns = now_ns + APP_FWD_RESEND_NS;
		return APP_FWD_ACT_WAIT;
	}
	if (t->hops >= APP_FWD_HOPS_MAX)
		return APP_FWD_ACT_GIVE_UP; /* leadership keeps moving: let the operator see it */
	t->hops++;
	t->node = hint;
	t->sends++;
	t->silent = 1;
	t->next_ns = now_ns + APP_FWD_RESEND_NS;
	return APP_FWD_ACT_SEND;
}

void
app_fwd_busy(struct app_fwd_try *t, uint64_t now_ns)
{
	t->silent = 0;
	t->next_ns = now_ns + APP_FWD_RESEND_NS;
}

int
app_fwd_verdict(const struct app_fwd_outcome *o, uint32_t n, bool need_any, uint16_t *applied,
		uint32_t cap, uint32_t *applied_count)
{
	int bad = -1;
	uint32_t ok = 0;
	*applied_count = 0;
	for (uint32_t i = 0; i < n; i++) {
		bool is_ok = o[i].status == APP_CMD_OK;
		bool fine = is_ok || (need_any && o[i].status == APP_CMD_REJECTED &&
				      o[i].reason == WIRE_REASON_NOT_FOUND);
		if (!fine && bad < 0)
			bad = (int)i;
		if (!is_ok)
			continue;
		ok++;
		bool seen = false;
		for (uint32_t k = 0; k < *applied_count; k++)
			seen = seen || applied[k] == o[i].shard;
		if (!seen && *applied_count < cap)
			applied[(*applied_count)++] = o[i].shard;
	}
	if (need_any && bad < 0 && ok == 0 && n > 0)
		bad = 0; /* not found anywhere */
	CHECK(bad < (int)n);
	return bad;
}

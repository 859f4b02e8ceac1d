/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hot-user actors: the table (user → slot over a preallocated slab), the intrusive recency
 * list, hydration with parked messages, the dehydration handshake with fencing epochs, the
 * TTL sweep, the size-bound safety valve and the drain of users this shard no longer owns.
 *
 * Seed: "the user-actor is a write-back cache over a durable DB, living inside an Aeron
 * Cluster that must remain a deterministic state machine."
 */
#include "oms/oms_int.h"

/* ---- intrusive lists (LRU / flushing / hydrating) ---- */

static void
list_remove(struct oms *oms, struct oms_list *l, uint32_t idx)
{
	struct oms_actor *a = &oms->actors[idx];
	if (a->prev != OMS_NIL)
		oms->actors[a->prev].next = a->next;
	else
		l->head = a->next;
	if (a->next != OMS_NIL)
		oms->actors[a->next].prev = a->prev;
	else
		l->tail = a->prev;
	a->prev = OMS_NIL;
	a->next = OMS_NIL;
	DCHECK(l->count > 0);
	l->count--;
}

static void
list_push_head(struct oms *oms, struct oms_list *l, uint32_t idx)
{
	struct oms_actor *a = &oms->actors[idx];
	a->prev = OMS_NIL;
	a->next = l->head;
	if (l->head != OMS_NIL)
		oms->actors[l->head].prev = idx;
	else
		l->tail = idx;
	l->head = idx;
	l->count++;
}

static struct oms_list *
state_list(struct oms *oms, uint8_t state)
{
	switch (state) {
	case OMS_A_HYDRATING:
		return &oms->c.hydrating;
	case OMS_A_RESIDENT:
		return &oms->c.lru;
	case OMS_A_FLUSHING:
		return &oms->c.flushing;
	case OMS_A_WAITING:
		return &oms->c.waiting;
	default:
		CHECK(0 && "actor state has no list");
		return NULL;
	}
}

static void
move_to(struct oms *oms, struct oms_actor *a, uint8_t state)
{
	uint32_t idx = oms_actor_index(oms, a);
	list_remove(oms, state_list(oms, a->state), idx);
	a->state = state;
	list_push_head(oms, state_list(oms, state), idx);
	oms_wb_relink(oms, a);
}

/* ---- table ---- */

/* A user the drain should look at appeared. A running pass keeps its cursor, but may already
 * have passed the user's slot: REQUESTED keeps the pass that ends at the next wrap from ending
 * the drain, so one more full pass from slot 0 sees the user. */
static void
drain_wake(struct oms *oms)
{
	oms->c.drain = OMS_DRAIN_REQUESTED;
}

/* Seed invariant 10: "Flat" = no resting orders AND no in-flight saga AND no outstanding
 * reservation. O(1) counters the actor maintains on every transition. */
bool
oms_actor_flat(const struct oms_actor *a)
{
	return a->live == 0 && a->sagas == 0 && a->reservations == 0 && a->order_count == 0;
}

static void
actor_release(struct oms *oms, struct oms_actor *a)
{
	uint32_t idx = oms_actor_index(oms, a);
	DCHECK(a->order_count == 0);
	DCHECK(a->parked_count == 0);
	list_remove(oms, state_list(oms, a->state), idx);
	oms_wb_unlink(oms, a);
	if ((a->flags & OMS_AF_WB) != 0)
		oms->c.wb_inflight--;
	oms_tab_remove(oms, OMS_TAG_USER, a->user, 0);
	oms_lookups_orphan(oms, a->user);
	memset(oms_actor_balances(oms, a), 0,
	       sizeof(struct oms_balance) * oms->c.limits.assets_per_user);
	memset(oms_actor_dedup(oms, a), 0, sizeof(struct oms_dedup) * oms->c.limits.dedup_per_user);
	memset(oms_actor_dedup_ids(oms, a), 0, sizeof(uint64_t) * oms->c.limits.dedup_per_user);
	memset(a, 0, sizeof(*a));
	oms->actor_free[oms->c.actor_free_count++] = idx;
	CHECK(oms->c.actor_free_count <= oms->actor_slots);
	oms->c.admit_due = 1; /* a slot and maybe a place in the cap came free */
}

bool
oms_actor_evictable(const struct oms *oms, const struct oms_actor *a)
{
	/* docs/fencing.md: a new dehydration waits until the outstanding flush's answer is in,
	 * and every drop must be able to record its claim release. */
	return a->state == OMS_A_RESIDENT && oms_actor_flat(a) &&
	       (a->flags & OMS_AF_CONFLICT) == 0 && a->flush_epoch == 0 &&
	       oms->c.release_count + oms->c.flushing.count < oms->c.limits.releases_max;
}

static void actor_restamp(struct oms *oms, struct oms_actor *a);

/* The least recently active evictable actor, looked for from the LRU tail within *budget
 * actors, or NULL. An actor that cannot go — it holds orders or a saga ("cold ≠ no
 * orders"), or waits for a write-back's answer — is re-stamped to the MRU end on the way,
 * as the TTL sweep does, so the next look starts past it (a bounded look that met the
 * same unevictable tail every time would never get past it). */
static struct oms_actor *
lru_victim(struct oms *oms, uint32_t *budget)
{
	if (oms->c.release_count + oms->c.flushing.count >= oms->c.limits.releases_max)
		return NULL; /* no room to record another release: nothing is evictable now */
	uint32_t idx = oms->c.lru.tail;
	while (idx != OMS_NIL && *budget > 0) {
		struct oms_actor *a = &oms->actors[idx];
		uint32_t prev = a->prev;
		(*budget)--;
		if (oms_actor_evictable(oms, a))
			return a;
		actor_restamp(oms, a);
		oms_count(oms, OMS_C_SWEEP_TOUCHED);
		idx = prev;
	}
	return NULL;
}

/* Every hydration attempt draws a fresh epoch (the claim stamp it asks for). */
static void
emit_hydrate_request(struct oms *oms, struct oms_actor *a, struct svc_sink *sink)
{
	a->epoch = oms_epoch_next(oms);
	struct wire_hydrate_request m;
	memset(&m, 0, sizeof(m));
	m.user = a->user;
	m.epoch = a->epoch;
	oms_count(oms, OMS_C_HYDRATE_REQUESTS);
	OMS_EMIT(sink, WIRE_DEST_PERSIST, m, WIRE_HYDRATE_REQUEST, oms->c.limits.shard_id);
}

/* Room in the cap for one more hydration (docs/oms.md "Admission"). */
static bool
cap_room(const struct oms *oms)
{
	return oms->c.lru.count + oms->c.hydrating.count < oms->c.limits.users_max;
}

/* A fresh slot for user in state (HYDRATING or WAITING), or NULL when none is free. */
static struct oms_actor *
actor_new(struct oms *oms, uint64_t user, uint8_t state)
{
	if (oms->c.actor_free_count == 0)
		return NULL;
	uint32_t idx = oms->actor_free[--oms->c.actor_free_count];
	struct oms_actor *a = &oms->actors[idx];
	DCHECK(a->state == OMS_A_FREE);
	memset(a, 0, sizeof(*a));
	a->user = user;
	a->prev = a->next = OMS_NIL;
	a->wb_prev = a->wb_next = OMS_NIL;
	a->order_head = a->order_tail = OMS_NIL;
	a->parked_head = a->parked_tail = OMS_NIL;
	a->state = state;
	a->last_active_ns = oms->c.now_ns;
	a->since_ns = oms->c.now_ns;
	list_push_head(oms, state_list(oms, state), idx);
	oms_tab_insert(oms, OMS_TAG_USER, user, 0, idx);
	return a;
}

/* A WAITING user's turn: the cap has room, its HydrateRequest goes out. */
static void
admit_promote(struct oms *oms, struct oms_actor *a, struct svc_sink *sink)
{
	DCHECK(a->state == OMS_A_WAITING);
	uint64_t waited = oms->c.now_ns - a->last_active_ns;
	oms->c.counters[OMS_C_ADMIT_WAIT_NS] += waited;
	oms_count(oms, OMS_C_ADMIT_PROMOTED);
	move_to(oms, a, OMS_A_HYDRATING);
	a->last_active_ns = oms->c.now_ns;
	a->hydrate_tries = 1;
	emit_hydrate_request(oms, a, sink);
}

/* Actors the pump looks at from the LRU tail per call: it runs after most messages under
 * pressure, so the look must stay short (a full look over a cap of residents that all hold
 * orders or a write-back per message is what made the shard lcore stall). */
#define ADMIT_LOOK_MAX 64u

void
oms_admit_pump(struct oms *oms, struct svc_sink *sink)
{
	uint32_t budget = oms->c.limits.sweep_scan_max < ADMIT_LOOK_MAX ? oms->c.limits.sweep_scan_max
									 : ADMIT_LOOK_MAX;
	while (oms->c.waiting.count > 0) {
		if (cap_room(oms)) {
			admit_promote(oms, &oms->actors[oms->c.waiting.tail], sink);
			continue;
		}
		/* Seed: "Size-bound safety valve: if resident count hits the memory cap, evict
		 * the LRU tail immediately, before TTL". Each eviction started here makes room
		 * for one waiting user at once (a flushing actor holds a headroom slot, not a
		 * place in the cap). */
		struct oms_actor *victim = lru_victim(oms, &budget);
		if (victim == NULL)
			return; /* again when a flush answer, a release or the sweep comes */
		oms_count(oms, OMS_C_VALVE_DEHYDRATES);
		oms_actor_begin_dehydrate(oms, victim, sink);
	}
}

/* A cold user's first message (docs/oms.md "Admission"): a HYDRATING actor when the cap has
 * room and nobody waits before it, else a WAITING one whose messages park until the pump
 * gives it its turn. NULL with the NAK reason in *reason when neither can be had: every
 * slot is held (flushes in flight fill the headroom) or the waiting queue is full — both
 * pass once the evictions under way complete, so BACKPRESSURE. */
static struct oms_actor *
actor_obtain(struct oms *oms, uint64_t user, struct svc_sink *sink, uint16_t *reason)
{
	if (oms->c.waiting.count == 0 && cap_room(oms)) {
		struct oms_actor *a = actor_new(oms, user, OMS_A_HYDRATING);
		if (a != NULL) {
			/* Seed: single-flight — one HydrateRequest per miss, later messages park. */
			a->hydrate_tries = 1;
			emit_hydrate_request(oms, a, sink);
			return a;
		}
	} else if (oms->c.waiting.count < oms->c.limits.wait_max) {
		struct oms_actor *a = actor_new(oms, user, OMS_A_WAITING);
		if (a != NULL) {
			oms_count(oms, OMS_C_ADMIT_WAITS);
			oms->c.admit_due = 1;
			return a;
		}
	}
	oms_count(oms, OMS_C_ADMIT_QUEUE_FULL);
	*reason = WIRE_REASON_BACKPRESSURE;
	return NULL;
}

/* The sweep's side of admission: a user that waited admit_wait_ns is refused (its client
 * messages; a parked event is never refused, so such a user waits on). CAPACITY when no
 * flush is in flight — nothing in the cap could be evicted, every resident holds orders, a
 * saga or a flush answer — else BACKPRESSURE (room is coming, the database is slow). */
static void park_refuse(struct oms *oms, struct oms_actor *a, uint16_t reason, uint16_t owner,
			struct svc_sink *sink);

/* Does a hold a parked ME event (never refused: the ME sent it to this shard's stream)? */
static bool
parked_event(const struct oms *oms, const struct oms_actor *a)
{
	for (uint32_t pi = a->parked_head; pi != OMS_NIL; pi = oms->parked[pi].next)
		if (oms->parked[pi].pad == 1)
			return true;
	return false;
}

static void
admit_expire(struct oms *oms, struct svc_sink *sink)
{
	uint32_t idx = oms->c.waiting.tail;
	for (uint32_t n = 0; idx != OMS_NIL && n < oms->c.limits.sweep_scan_max; n++) {
		struct oms_actor *a = &oms->actors[idx];
		idx = a->prev;
		if (oms->c.now_ns - a->last_active_ns < oms->c.limits.admit_wait_ns)
			break; /* the queue is in order of arrival */
		if (parked_event(oms, a))
			continue;
		oms_count(oms, OMS_C_ADMIT_TIMEOUTS);
		uint16_t reason = oms->c.flushing.count == 0 ? WIRE_REASON_CAPACITY
							     : WIRE_REASON_BACKPRESSURE;
		park_refuse(oms, a, reason, 0, sink);
		actor_release(oms, a);
	}
}

/* Seed: "Per order: O(1) — splice the actor to the MRU end", and stamp it. */
static void
actor_restamp(struct oms *oms, struct oms_actor *a)
{
	if (a->state == OMS_A_RESIDENT && a->prev != OMS_NIL) {
		/* list_remove then list_push_head, knowing a has a predecessor (so the list's
		 * head is another actor) and the count stays. */
		struct oms_list *l = &oms->c.lru;
		uint32_t idx = oms_actor_index(oms, a);
		DCHECK(l->head != OMS_NIL && l->head != idx);
		oms->actors[a->prev].next = a->next;
		if (a->next != OMS_NIL)
			oms->actors[a->next].prev = a->prev;
		else
			l->tail = a->prev;
		a->prev = OMS_NIL;
		a->next = l->head;
		oms->actors[l->head].prev = idx;
		l->head = idx;
	}
	a->last_active_ns = oms->c.now_ns;
}

/* Activity: every caller goes on to change the flushed state, or may (an order takes a
 * user_seq, an event settles, a transfer moves money), so the actor is dirty from here. */
void
oms_actor_touch_slow(struct oms *oms, struct oms_actor *a)
{
	if (a->state == OMS_A_FLUSHING) {
		/* Seed: "Order arrives during the flush window → cancel-on-activity ... The actor
		 * bumps its epoch; a stale in-flight FlushComplete is then dropped." The claim
		 * was never released (the flush keeps it), so serving on is safe (fencing.md). */
		a->epoch = oms_epoch_next(oms);
		move_to(oms, a, OMS_A_RESIDENT);
		oms_count(oms, OMS_C_FLUSH_CANCELLED);
	}
	actor_restamp(oms, a);
	oms_actor_changed(oms, a);
}

/* A client's retransmission of a request already parked for a: the same bytes, except the
 * route_epoch the gateway stamps last on every order request (a retransmit can cross a
 * routing change). O(parked_per_user). */
static bool
parked_copy(const struct oms *oms, const struct oms_actor *a, const struct wire_msg_hdr *msg)
{
	size_t n = msg->length;
	if (msg->type != WIRE_TRANSFER) {
		static_assert(offsetof(struct wire_new_order, route_epoch) + 8 ==
				      sizeof(struct wire_new_order) &&
			      offsetof(struct wire_cancel, route_epoch) + 8 ==
				      sizeof(struct wire_cancel) &&
			      offsetof(struct wire_amend, route_epoch) + 8 ==
				      sizeof(struct wire_amend) &&
			      offsetof(struct wire_cancel_replace, route_epoch) + 8 ==
				      sizeof(struct wire_cancel_replace),
			      "route_epoch ends every order request");
		DCHECK(n > 8);
		n -= 8;
	}
	for (uint32_t pi = a->parked_head; pi != OMS_NIL; pi = oms->parked[pi].next) {
		const struct oms_parked *p = &oms->parked[pi];
		if (p->pad == 0 && p->len == msg->length && memcmp(p->msg, msg, n) == 0)
			return true;
	}
	return false;
}

int
oms_actor_park(struct oms *oms, uint64_t user, const struct wire_msg_hdr *msg, bool is_event,
	       bool check_owner, struct svc_sink *sink, uint16_t *owner_out)
{
	struct oms_actor *a = oms_actor_find(oms, user);
	DCHECK(a == NULL || !oms_actor_serving(a));
	DCHECK(msg->length <= sizeof(oms->parked[0].msg));
	bool full = oms->c.parked_free_count == 0 ||
		    (a != NULL && a->parked_count >= oms->c.limits.parked_per_user);
	if (full && a != NULL && !is_event && parked_copy(oms, a, msg)) {
		/* No place for a client's retransmission of a request that is parked: refusing
		 * it PARKED_FULL would tell the client "not done" of a request its original is
		 * about to do. No answer: the client's retransmit timer keeps asking until the
		 * original's answer arrives. (With room, a copy parks like any message and the
		 * dedup window answers it with the original's outcome at install.) */
		oms_count(oms, OMS_C_PARKED_COPIES);
		return 0;
	}
	if (oms->c.parked_free_count == 0)
		return is_event ? -1 : WIRE_REASON_PARKED_FULL;
	if (a == NULL) {
		if (check_owner && !oms_route_owns(oms, user, owner_out))
			return WIRE_REASON_NOT_OWNER;
		uint16_t reason = WIRE_REASON_CAPACITY;
		a = actor_obtain(oms, user, sink, &reason);
		if (a == NULL)
			return is_event ? -1 : reason;
	} else if (!is_event && a->parked_count >= oms->c.limits.parked_per_user) {
		return WIRE_REASON_PARKED_FULL;
	}
	uint32_t pi = oms->parked_free[--oms->c.parked_free_count];
	struct oms_parked *p = &oms->parked[pi];
	memset(p, 0, sizeof(*p));
	p->next = OMS_NIL;
	p->len = msg->length;
	p->pad = is_event ? 1 : 0; /* 1: an event already consumed in stream order */
	memcpy(p->msg, msg, msg->length);
	if (a->parked_tail != OMS_NIL)
		oms->parked[a->parked_tail].next = pi;
	else
		a->parked_head = pi;
	a->parked_tail = pi;
	a->parked_count++;
	oms->c.parked_used++;
	oms_count(oms, is_event ? OMS_C_EVENTS_PARKED : OMS_C_PARKED);
	return 0;
}

/* Detach the first parked message into buf; false when none. */
bool
oms_actor_park_pop(struct oms *oms, struct oms_actor *a, struct oms_parked *buf)
{
	uint32_t pi = a->parked_head;
	if (pi == OMS_NIL)
		return false;
	struct oms_parked *p = &oms->parked[pi];
	*buf = *p;
	a->parked_head = p->next;
	if (a->parked_head == OMS_NIL)
		a->parked_tail = OMS_NIL;
	a->parked_count--;
	oms->c.parked_used--;
	memset(p, 0, sizeof(*p));
	oms->parked_free[oms->c.parked_free_count++] = pi;
	return true;
}

/* Refuse every parked client message with reason; parked events cannot be refused. */
static void
park_refuse(struct oms *oms, struct oms_actor *a, uint16_t reason, uint16_t owner,
	    struct svc_sink *sink)
{
	struct oms_parked p;
	while (oms_actor_park_pop(oms, a, &p)) {
		const struct wire_msg_hdr *h = (const struct wire_msg_hdr *)(const void *)p.msg;
		if (p.pad == 1) {
			/* An event for a user another shard owns breaks single-writer. */
			oms_count(oms, OMS_C_ALARM_FOREIGN_USER);
		} else if (h->type == WIRE_TRANSFER) {
			const struct wire_transfer *t = (const void *)p.msg;
			oms_admin_reply(oms, sink, t->transfer_id, reason, owner);
		} else {
			/* NEW_ORDER, CANCEL, AMEND, CANCEL_REPLACE: user and cl_ord_id lead. */
			const struct wire_cancel *c = (const void *)p.msg;
			oms_nak(oms, sink, NULL, c->user, c->cl_ord_id, reason, owner);
		}
	}
}

static bool
user_state_ok(const struct oms *oms, const struct wire_user_state *st)
{
	if (st->balance_count > WIRE_BALANCES_MAX || st->user_seq > WIRE_USER_SEQ_MAX ||
	    st->recent_count > WIRE_RECENT_MAX)
		return false;
	for (uint32_t i = 0; i < st->recent_count; i++)
		if (st->recent[i].kind != WIRE_RECENT_ORDER && st->recent[i].kind != WIRE_RECENT_TRANSFER)
			return false;
	uint32_t used = 0;
	for (uint32_t i = 0; i < st->balance_count; i++) {
		const struct wire_balance *b = &st->balances[i];
		if (b->asset == 0)
			continue;
		if (b->total < 0)
			return false;
		for (uint32_t j = 0; j < i; j++)
			if (st->balances[j].asset == b->asset)
				return false;
		used++;
	}
	return used <= oms->c.limits.assets_per_user;
}

/* The rate-limit bucket from the saved state (issue 17: everything a client-visible answer
 * depends on is part of the user's saved state), so an eviction or a move does not hand the
 * user a full bucket. The row holds the bucket as of the flush that wrote it, refilled from
 * then on. A token spent after that flush is in an actor marked changed (every request
 * touches its actor before rate_ok), so the next write-back or the eviction flush carries
 * it, and the claim keeps any other shard from reading the row before that; a spend that
 * never reached the row (a flush that never came) makes the restored bucket fuller than the
 * truth, never emptier (docs/oms.md, "Sessions, rate limits"). Nothing the row says is
 * trusted: the tier may have changed (at most its burst), the figure may be anything
 * (clamped to [0, burst]), and a shard whose cluster clock ran ahead may have saved it (no
 * later than now: rate_ok's now - tokens_ns must not wrap). rl_tokens_ns 0 saved nothing: a
 * full bucket, as for a new user or a row written before migration 0007. */
static void
bucket_restore(const struct oms *oms, struct oms_actor *a, const struct wire_user_state *st)
{
	DCHECK(a->tier < OMS_TIERS_MAX);
	int64_t cap = (int64_t)oms->c.limits.tiers[a->tier].burst * 1000000000;
	static_assert((int64_t)UINT32_MAX * 1000000000 <= INT64_MAX, "a burst's nano-requests fit");
	uint64_t now = oms->c.now_ns;
	a->tokens = cap;
	a->tokens_ns = now;
	if (st->rl_tokens_ns == 0)
		return;
	a->tokens = st->rl_tokens < 0 ? 0 : st->rl_tokens > cap ? cap : st->rl_tokens;
	a->tokens_ns = st->rl_tokens_ns < now ? st->rl_tokens_ns : now;
	DCHECK(a->tokens >= 0);
	DCHECK(a->tokens <= cap);
	DCHECK(a->tokens_ns <= now);
}

static void
install(struct oms *oms, struct oms_actor *a, const struct wire_hydrate_user *m)
{
	const struct wire_user_state *st = &m->state;
	struct oms_balance *bal = oms_actor_balances(oms, a);
	uint32_t k = 0;
	for (uint32_t i = 0; i < st->balance_count; i++) {
		if (st->balances[i].asset == 0)
			continue;
		bal[k].asset = st->balances[i].asset;
		bal[k].total = st->balances[i].total;
		bal[k].reserved = 0;
		k++;
	}
	/* The claim's stamp: the epoch the database stored for this hydration. */
	a->epoch = m->epoch;
	if (m->epoch > oms->c.epoch_seq)
		oms->c.epoch_seq = m->epoch;
	a->flush_epoch = 0;
	a->flags &= (uint8_t)~OMS_AF_RETRY;
	/* The idempotency window moves with the user (wire_recent): re-sends that reach this
	 * shard after a move are answered with their original outcome. */
	uint32_t keep = st->recent_count;
	uint32_t first = keep > oms->c.limits.dedup_per_user ? keep - oms->c.limits.dedup_per_user : 0;
	for (uint32_t i = first; i < keep; i++) {
		const struct wire_recent *r = &st->recent[i];
		if (r->kind == WIRE_RECENT_TRANSFER)
			oms_dedup_add_xfer(oms, a, r->id, r->asset, r->amount, (int64_t)r->user_seq,
					   r->reason, false); /* from the row: durable already */
		else
			oms_dedup_add(oms, a, OMS_DEDUP_ORDER, r->id, r->user_seq, 0, r->reason);
	}
	a->version = st->version;
	a->user_seq = st->user_seq;
	if (st->xfer_id_max > a->xfer_id_max)
		a->xfer_id_max = st->xfer_id_max; /* (the recent[] transfers raised it too) */
	if (st->cl_ord_floor > a->cl_ord_floor)
		a->cl_ord_floor = st->cl_ord_floor; /* (a window smaller than recent[] too) */
	/* The report sequence continues where the last owner left it (clients drop a repeated
	 * sequence number as a duplicate). */
	if (st->egress_seq > a->egress_seq)
		a->egress_seq = st->egress_seq;
	a->tier = st->tier < OMS_TIERS_MAX ? st->tier : 0;
	if (a->state == OMS_A_HYDRATING) {
		/* (last_active_ns of a hydrating actor: when its request went out) */
		hist_record(&oms->c.park_hist, oms->c.now_ns - a->since_ns);
		hist_record(&oms->c.hydrate_hist, oms->c.now_ns - a->last_active_ns);
	}
	a->since_ns = 0;
	a->hydrate_tries = 0;
	a->last_active_ns = oms->c.now_ns;
	bucket_restore(oms, a, st);
	/* The row holds what was just installed (the recent entries it re-added included). */
	a->clean_gen = a->change_gen;
	move_to(oms, a, OMS_A_RESIDENT);
	oms_count(oms, OMS_C_HYDRATIONS);
}

static void release_add(struct oms *oms, uint64_t user, uint64_t epoch, struct svc_sink *sink);

/* Room for n more pending releases (flushes in flight hold one each, docs/fencing.md). */
static bool
release_room(const struct oms *oms, uint32_t n)
{
	return oms->c.release_count + oms->c.flushing.count + n <= oms->c.limits.releases_max;
}

struct oms_actor *
oms_on_hydrate_user(struct oms *oms, const struct wire_hydrate_user *m, struct svc_sink *sink)
{
	uint64_t user = m->state.user;
	struct oms_actor *a = oms_actor_find(oms, user);
	if (m->status < WIRE_HYD_OK || m->status > WIRE_HYD_UNKNOWN) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return NULL;
	}
	if (a != NULL && oms_actor_serving(a)) {
		/* Already resident: RAM is newer than any row read (write-back cache). */
		oms_count(oms, OMS_C_HYDRATE_DUP);
		return NULL;
	}
	uint8_t status = m->status;
	if ((status == WIRE_HYD_OK || status == WIRE_HYD_NEW) && !user_state_ok(oms, &m->state)) {
		oms_count(oms, OMS_C_ALARM_BAD_STATE);
		status = WIRE_HYD_ERROR;
	}
	/* A WAITING actor has no request out: an answer for its user is not for it. */
	bool waiting = a != NULL && a->state == OMS_A_WAITING;
	if (status == WIRE_HYD_OK || status == WIRE_HYD_NEW) {
		if (m->epoch <= oms->c.epoch_seq && (a == NULL || waiting || m->epoch != a->epoch)) {
			/* An epoch this shard issued, and no actor waits for this answer: a late
			 * answer to a hydration it gave up, or to an earlier request of the user
			 * while an actor (a new incarnation) waits for its own (a->epoch). The
			 * database claimed the row for us under m->epoch, possibly after our release
			 * of that claim went through: installing would make a resident actor without
			 * a claim (another shard may hold the user by now; sim-system seed 81: a
			 * flush CONFLICT, automatic flushing off, the user's deposits refused for
			 * good once its transfer pins filled). Let the claim go instead, fenced by
			 * the epoch — a release at m->epoch cannot free a claim a newer request
			 * stamps — and let any waiting actor have its own answer. */
			oms_count(oms, OMS_C_HYDRATE_LATE);
			if (release_room(oms, 1))
				release_add(oms, user, m->epoch, sink);
			else
				oms_count(oms, OMS_C_ALARM_HYDRATE_LATE_UNRELEASED);
			return NULL;
		}
		if (waiting) {
			/* Hydrated ahead for a user waiting its turn: it takes it now. */
			move_to(oms, a, OMS_A_HYDRATING);
			oms_count(oms, OMS_C_HYDRATE_AHEAD);
		} else if (a == NULL) {
			/* Seed: the gateway hydrates ahead, injecting HydrateUser before the order. */
			a = cap_room(oms) ? actor_new(oms, user, OMS_A_HYDRATING) : NULL;
			if (a == NULL) {
				oms_count(oms, OMS_C_HYDRATE_DUP);
				return NULL;
			}
			oms_count(oms, OMS_C_HYDRATE_AHEAD);
			uint16_t owner;
			if (!oms_route_owns(oms, user, &owner))
				drain_wake(oms);
		}
		install(oms, a, m);
		/* Hydrated for a parked event (an adopted order) while routing points elsewhere:
		 * the drain moves it on. */
		uint16_t owner;
		if (!oms_route_owns(oms, user, &owner))
			drain_wake(oms);
		return a; /* the dispatcher runs what was parked for it */
	}
	if (a == NULL || waiting)
		return NULL; /* nothing waits for it */
	bool events = parked_event(oms, a);
	bool more = a->hydrate_tries < oms->c.limits.hydrate_retries_max;
	if (status == WIRE_HYD_OWNED) {
		/* Database fencing (docs/fencing.md): another shard holds the claim. If routing
		 * says the user is ours, the old owner has not released yet: ask again (at the
		 * next sweep) with the parked orders waiting; only then refuse. */
		oms_count(oms, OMS_C_HYDRATE_OWNED);
		uint16_t owner;
		if ((more && oms_route_owns(oms, user, &owner)) || events) {
			/* A parked event is never refused: the ME sent it to this shard's stream
			 * (an order adopted in a move, whose old owner releases the claim once
			 * its final flush is in), so the user is coming here. */
			a->flags |= OMS_AF_RETRY;
			return NULL;
		}
		park_refuse(oms, a, WIRE_REASON_NOT_OWNER, m->owner_shard, sink);
		actor_release(oms, a);
		return NULL;
	}
	if (status == WIRE_HYD_UNKNOWN) {
		/* No account (docs/security.md, "No account from nowhere"): nothing was claimed
		 * and nothing is created; the user's requests are refused. An event for the
		 * user (the ME knows an order of it) keeps the hydration asking: the account
		 * exists somewhere the answer did not see. */
		oms_count(oms, OMS_C_HYDRATE_UNKNOWN);
		if (events) {
			a->flags |= OMS_AF_RETRY;
			return NULL;
		}
		park_refuse(oms, a, WIRE_REASON_UNKNOWN_USER, 0, sink);
		actor_release(oms, a);
		return NULL;
	}
	oms_count(oms, OMS_C_HYDRATE_ERRORS);
	/* A parked event must never be dropped: keep asking while one waits. */
	if (more || events || !release_room(oms, 1)) {
		a->flags |= OMS_AF_RETRY;
		return NULL;
	}
	/* Giving up. An ERROR answer does not prove the row was left alone: an earlier request
	 * the database committed (read and claimed) may have lost its answer while the repeats
	 * failed. Let any claim this hydration took go — the release takes any claim of ours
	 * at or below the newest epoch it used (a no-op where none was taken) — or the row
	 * would stay claimed by a shard that holds no actor, and every other shard's hydration
	 * would be refused OWNED for ever (sim-system seed 64). A late OK answer to it finds no
	 * actor and releases its claim too (above). */
	uint64_t newest = m->epoch > a->epoch ? m->epoch : a->epoch;
	release_add(oms, user, newest, sink);
	park_refuse(oms, a, WIRE_REASON_DB_ERROR, 0, sink);
	actor_release(oms, a);
	return NULL;
}

void
oms_build_user_state(const struct oms *oms, const struct oms_actor *a, struct wire_user_state *st)
{
	memset(st, 0, sizeof(*st));
	st->user = a->user;
	st->version = a->version;
	st->user_seq = a->user_seq;
	st->xfer_id_max = a->xfer_id_max;
	st->cl_ord_floor = a->cl_ord_floor;
	st->egress_seq = a->egress_seq;
	/* The bucket as of this flush (bucket_restore says what that promises). Cluster time
	 * is the hosts' clock, so tokens_ns is not 0, which would read back as a full bucket. */
	st->rl_tokens = a->tokens;
	st->rl_tokens_ns = a->tokens_ns;
	st->tier = a->tier;
	const struct oms_balance *bal = oms_actor_balances(oms, a);
	uint32_t n = 0;
	for (uint32_t k = 0; k < oms->c.limits.assets_per_user; k++) {
		if (bal[k].asset == 0)
			continue;
		st->balances[n].asset = bal[k].asset;
		st->balances[n].total = bal[k].total;
		n++;
	}
	st->balance_count = n;
	/* The idempotency window travels with the state (wire_recent), oldest first: every
	 * pinned transfer outcome (the flush writes them to the transfers table) and the
	 * newest of the others in the room left. */
	const struct oms_dedup *ring = oms_actor_dedup(oms, a);
	uint32_t max = oms->c.limits.dedup_per_user;
	uint32_t pinned = oms_dedup_pinned(oms, a);
	CHECK(pinned <= WIRE_RECENT_MAX);
	uint32_t others = a->dedup_count - pinned;
	uint32_t skip = others > WIRE_RECENT_MAX - pinned ? others - (WIRE_RECENT_MAX - pinned) : 0;
	uint32_t r = 0;
	for (uint32_t k = 0, i = a->dedup_head; k < a->dedup_count; k++, i = i + 1 == max ? 0 : i + 1) {
		const struct oms_dedup *d = &ring[i];
		if ((d->flags & OMS_DEDUP_F_PINNED) == 0 && skip > 0) {
			skip--;
			/* Left behind: the next incarnation knows it only as below the floor. */
			if (d->kind == OMS_DEDUP_ORDER && d->id > st->cl_ord_floor)
				st->cl_ord_floor = d->id;
			continue;
		}
		st->recent[r].id = d->id;
		st->recent[r].user_seq = d->user_seq;
		st->recent[r].reason = d->reason;
		if (d->kind == OMS_DEDUP_XFER) {
			st->recent[r].kind = WIRE_RECENT_TRANSFER;
			st->recent[r].asset = d->asset;
			st->recent[r].amount = (int64_t)d->content;
		} else {
			st->recent[r].kind = WIRE_RECENT_ORDER;
		}
		r++;
	}
	CHECK(r <= WIRE_RECENT_MAX);
	st->recent_count = r;
}

void
oms_emit_begin_dehydrate(const struct oms *oms, const struct oms_actor *a, uint64_t epoch,
			 struct svc_sink *sink, oms_msg_fn *fn, void *ctx)
{
	struct wire_begin_dehydrate m;
	memset(&m, 0, sizeof(m));
	m.epoch = epoch;
	/* Seed: snapshot-content ≠ flush-content. The flush carries only the quiescent state
	 * (balances, user_seq, tier, recent window); a flushing user is flat, so there is
	 * nothing else. A write-back's user need not be flat: the row holds totals, and what
	 * is reserved is re-derived from the open orders (docs/fencing.md, "Write-back"). */
	oms_build_user_state(oms, a, &m.state);
	m.hdr.type = WIRE_BEGIN_DEHYDRATE;
	m.hdr.length = sizeof(m);
	m.hdr.shard = oms->c.limits.shard_id;
	oms_out(sink, fn, ctx, WIRE_DEST_PERSIST, &m.hdr);
}

void
oms_actor_begin_dehydrate(struct oms *oms, struct oms_actor *a, struct svc_sink *sink)
{
	/* Seed invariant 10 / anti-pattern "evicting a user with live resting orders" and
	 * "with funds committed to the market": a flush starts only for a flat actor. */
	CHECK(a->state == OMS_A_RESIDENT);
	CHECK(oms_actor_flat(a));
	CHECK(a->flush_epoch == 0);
	CHECK(oms->c.release_count + oms->c.flushing.count < oms->c.limits.releases_max);
	/* Every flush attempt draws a fresh epoch: newer than the claim's stamp (fencing.md). */
	a->epoch = oms_epoch_next(oms);
	a->flush_epoch = a->epoch;
	a->wb_gen = a->change_gen;
	a->since_ns = oms->c.now_ns;
	move_to(oms, a, OMS_A_FLUSHING);
	oms_count(oms, OMS_C_DEHYDRATES);
	oms_emit_begin_dehydrate(oms, a, a->epoch, sink, NULL, NULL);
}

static void
emit_release(const struct oms *oms, const struct oms_release *r, struct svc_sink *sink,
	     oms_msg_fn *fn, void *ctx)
{
	struct wire_release_claim m;
	memset(&m, 0, sizeof(m));
	m.hdr.type = WIRE_RELEASE_CLAIM;
	m.hdr.length = sizeof(m);
	m.hdr.shard = oms->c.limits.shard_id;
	m.user = r->user;
	m.epoch = r->epoch;
	m.handoff = r->handoff;
	m.to_shard = r->handoff ? r->to_shard : 0;
	oms_out(sink, fn, ctx, WIRE_DEST_PERSIST, &m.hdr);
}

/* Record a pending release (in the state, so a new leader re-drives it) and send it. */
static void
release_to(struct oms *oms, uint64_t user, uint64_t epoch, bool handoff, uint16_t to,
	   struct svc_sink *sink)
{
	if (oms_tab_find(oms, OMS_TAG_RELEASE, user, epoch) != OMS_NIL)
		return; /* already pending (a repeated answer of the same hydration) */
	CHECK(oms->c.release_count < oms->c.limits.releases_max);
	struct oms_release *r = &oms->releases[oms->c.release_count];
	memset(r, 0, sizeof(*r));
	r->user = user;
	r->epoch = epoch;
	r->handoff = handoff;
	r->to_shard = handoff ? to : 0;
	oms_tab_insert(oms, OMS_TAG_RELEASE, user, epoch, oms->c.release_count);
	oms->c.release_count++;
	oms_count(oms, OMS_C_RELEASES);
	emit_release(oms, r, sink, NULL, NULL);
}

static void
release_add(struct oms *oms, uint64_t user, uint64_t epoch, struct svc_sink *sink)
{
	release_to(oms, user, epoch, false, 0, sink);
}

void
oms_on_release_done(struct oms *oms, const struct wire_release_claim *m, struct svc_sink *sink)
{
	(void)sink;
	oms->c.admit_due = 1; /* room to record a release: an eviction may start */
	uint32_t i = oms_tab_find(oms, OMS_TAG_RELEASE, m->user, m->epoch);
	if (i == OMS_NIL) {
		oms_count(oms, OMS_C_FLUSH_STALE); /* a repeat of an answer already applied */
		return;
	}
	if (m->status == WIRE_FLUSH_ERROR) {
		oms->releases[i].retry = 1; /* the sweep sends it again */
		return;
	}
	/* OK (released now, or already / no longer ours): done. Swap-remove keeps it dense. */
	uint32_t last = --oms->c.release_count;
	oms_tab_remove(oms, OMS_TAG_RELEASE, m->user, m->epoch);
	if (i != last) {
		oms->releases[i] = oms->releases[last];
		oms_tab_insert(oms, OMS_TAG_RELEASE, oms->releases[i].user, oms->releases[i].epoch, i);
	}
	memset(&oms->releases[last], 0, sizeof(oms->releases[last]));
	oms_count(oms, OMS_C_RELEASES_DONE);
}

/* Deferred retries on the sweep's cadence: hydrations refused OWNED/ERROR, releases that
 * failed. Bounded by sweep_scan_max each. */
static void
retries(struct oms *oms, struct svc_sink *sink)
{
	uint32_t n = 0;
	for (uint32_t idx = oms->c.hydrating.tail; idx != OMS_NIL && n < oms->c.limits.sweep_scan_max;
	     n++) {
		struct oms_actor *a = &oms->actors[idx];
		idx = a->prev;
		if ((a->flags & OMS_AF_RETRY) == 0)
			continue;
		a->flags &= (uint8_t)~OMS_AF_RETRY;
		if (a->hydrate_tries < UINT8_MAX)
			a->hydrate_tries++;
		oms_count(oms, OMS_C_HYDRATE_RETRIES);
		emit_hydrate_request(oms, a, sink);
	}
	for (uint32_t i = 0, k = 0; i < oms->c.release_count && k < oms->c.limits.sweep_scan_max; i++) {
		if (oms->releases[i].retry == 0)
			continue;
		oms->releases[i].retry = 0;
		oms_count(oms, OMS_C_RELEASE_RETRIES);
		emit_release(oms, &oms->releases[i], sink, NULL, NULL);
		k++;
	}
}

void
oms_on_flush_complete(struct oms *oms, const struct wire_flush_complete *m, struct svc_sink *sink)
{
	(void)sink;
	oms->c.admit_due = 1; /* a flush answer frees room for another */
	struct oms_actor *a = oms_actor_find(oms, m->user);
	if (m->status < WIRE_FLUSH_OK || m->status > WIRE_FLUSH_ERROR) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return;
	}
	bool outstanding = a != NULL && a->flush_epoch != 0 && a->flush_epoch == m->epoch;
	/* Any OK flush (eviction or write-back) wrote the transfers recorded before it. */
	if (a != NULL && oms_actor_serving(a) && m->status == WIRE_FLUSH_OK)
		oms_dedup_flushed(oms, a, m->epoch); /* its transfers are in the table now */
	if (outstanding && (a->flags & OMS_AF_WB) != 0) {
		/* The answer of the write-back in flight: the actor stays either way. */
		oms_wb_on_flush_complete(oms, a, m);
		return;
	}
	if (outstanding) {
		a->flush_epoch = 0; /* the outstanding flush's answer is in */
		/* The row holds at least the state that flush was built from (a re-drive sends
		 * the newer current state under the same epoch). */
		if (m->status == WIRE_FLUSH_OK)
			a->clean_gen = a->wb_gen;
	}
	if (a == NULL || a->state != OMS_A_FLUSHING || a->epoch != m->epoch) {
		/* A stale completion (the flush was cancelled by activity, which bumped the
		 * epoch) never evicts. Our own write did land, though: the next flush's CAS
		 * must expect the version it produced. */
		oms_count(oms, OMS_C_FLUSH_STALE);
		if (a != NULL && oms_actor_serving(a) && m->status == WIRE_FLUSH_OK &&
		    m->epoch < a->epoch && m->version > a->version)
			a->version = m->version;
		if (a != NULL && oms_actor_serving(a))
			oms_wb_relink(oms, a); /* its flush answer is in: a write-back may start */
		return;
	}
	DCHECK(oms_actor_flat(a));
	switch (m->status) {
	case WIRE_FLUSH_OK:
		/* Seed invariant 3: U is dropped only on FlushComplete. The flush kept the
		 * owner claim; the drop lets it go (docs/fencing.md). */
		oms_count(oms, OMS_C_EVICTIONS);
		hist_record(&oms->c.evict_hist, oms->c.now_ns - a->since_ns);
		/* The last step of a move whose orders the new owner adopted: the claim goes to
		 * it, so only it can hydrate the user next (its parked ADOPTED events need the
		 * user; a request routed back here meanwhile must not take the user first). */
		if ((a->flags & (OMS_AF_MOVING | OMS_AF_HANDED)) == (OMS_AF_MOVING | OMS_AF_HANDED))
			release_to(oms, a->user, a->epoch, true, a->move_to, sink);
		else
			release_add(oms, a->user, a->epoch, sink);
		actor_release(oms, a);
		break;
	case WIRE_FLUSH_CONFLICT:
		/* A foreign write moved the row: keep the actor (its money is the newest we
		 * know), raise the alarm, and do not auto-flush it again. */
		oms_count(oms, OMS_C_ALARM_FLUSH_CONFLICT);
		a->flags |= OMS_AF_CONFLICT;
		a->epoch = oms_epoch_next(oms);
		move_to(oms, a, OMS_A_RESIDENT);
		a->last_active_ns = oms->c.now_ns;
		break;
	default:
		/* Transient: stay resident, the sweep retries after another TTL. */
		oms_count(oms, OMS_C_FLUSH_ERRORS);
		a->epoch = oms_epoch_next(oms);
		move_to(oms, a, OMS_A_RESIDENT);
		a->last_active_ns = oms->c.now_ns;
		break;
	}
}

void
oms_on_user_admin(struct oms *oms, const struct wire_user_admin *m, struct svc_sink *sink)
{
	if (m->op != 1 && m->op != 2) {
		oms_admin_reply(oms, sink, m->user, WIRE_REASON_BAD_REQUEST, 0);
		return;
	}
	struct oms_actor *a = oms_actor_find(oms, m->user);
	if (a == NULL) {
		oms_admin_reply(oms, sink, m->user, WIRE_REASON_NOT_FOUND, 0);
		return;
	}
	/* An operator decision resolves a conflict alarm. */
	a->flags &= (uint8_t)~OMS_AF_CONFLICT;
	oms_wb_relink(oms, a);
	if (oms_actor_evictable(oms, a)) {
		oms_actor_begin_dehydrate(oms, a, sink);
	} else if (a->state != OMS_A_FLUSHING) {
		/* Quiesce: flush as soon as it is flat (drain scan). */
		a->flags |= OMS_AF_EVICT_REQ;
		drain_wake(oms);
	}
	oms_admin_reply(oms, sink, m->user, WIRE_REASON_NONE, a->epoch);
}

void
oms_sweep(struct oms *oms, struct svc_sink *sink)
{
	const struct oms_limits *l = &oms->c.limits;
	uint64_t now = oms->c.now_ns;
	uint32_t evicted = 0;
	uint32_t idx = oms->c.lru.tail;
	oms_count(oms, OMS_C_SWEEPS);
	retries(oms, sink);
	/* Seed: "walk the cold tail only, stopping at the first non-expired actor — so the
	 * sweep is O(expired), not O(resident) ... Cap evictions per sweep". */
	for (uint32_t n = 0; idx != OMS_NIL && n < l->sweep_scan_max && evicted < l->sweep_evict_max;
	     n++) {
		struct oms_actor *a = &oms->actors[idx];
		uint32_t prev = a->prev;
		if (now - a->last_active_ns < l->ttl_ns)
			break;
		if (oms_actor_evictable(oms, a)) {
			oms_actor_begin_dehydrate(oms, a, sink);
			oms_count(oms, OMS_C_TTL_DEHYDRATES);
			evicted++;
		} else {
			/* "Cold ≠ no orders": capital committed to the market keeps the user hot.
			 * Re-stamp it so the next sweep does not walk it again for a TTL (not
			 * activity: nothing changed, so no write-back is due). */
			actor_restamp(oms, a);
			oms_count(oms, OMS_C_SWEEP_TOUCHED);
		}
		idx = prev;
	}
	admit_expire(oms, sink);
	oms->c.admit_due = 1;
}

void
oms_drain_step(struct oms *oms, struct svc_sink *sink)
{
	const struct oms_limits *l = &oms->c.limits;
	uint32_t flushed = 0;
	if (oms->c.drain == OMS_DRAIN_IDLE)
		return;
	/* No actor in memory, nobody to drain: a routing change on an empty shard (bootstrap)
	 * ends its drain at once rather than after a full scan of empty slots. */
	if (oms_resident_count(oms) == 0) {
		oms->c.drain = OMS_DRAIN_IDLE;
		return;
	}
	/* Routing authority (ARCHITECTURE §7): drain resident users we no longer own, in
	 * capped waves, each once it is flat. A full pass that finds none ends the drain. */
	for (uint32_t n = 0; n < l->drain_scan_max && flushed < l->drain_max; n++) {
		if (oms->c.drain_cursor >= oms->actor_slots)
			oms->c.drain_cursor = 0;
		if (oms->c.drain_cursor == 0) {
			if (oms->c.drain == OMS_DRAIN_SCANNING && oms->c.drain_found == 0) {
				oms->c.drain = OMS_DRAIN_IDLE;
				return;
			}
			oms->c.drain = OMS_DRAIN_SCANNING;
			oms->c.drain_found = 0;
		}
		struct oms_actor *a = &oms->actors[oms->c.drain_cursor++];
		if (a->state == OMS_A_FREE)
			continue;
		uint16_t owner;
		bool moved = (a->flags & OMS_AF_MOVING) != 0 || !oms_route_owns(oms, a->user, &owner);
		bool want = (a->flags & OMS_AF_EVICT_REQ) != 0 || moved;
		if (!want)
			continue;
		oms->c.drain_found++;
		if (a->state == OMS_A_RESIDENT && oms_actor_flat(a) &&
		    (a->flags & OMS_AF_CONFLICT) != 0) {
			a->flags &= (uint8_t)~OMS_AF_CONFLICT; /* a move is an operator's decision */
			oms_wb_relink(oms, a);
		}
		if (oms_actor_evictable(oms, a)) {
			a->flags &= (uint8_t)~OMS_AF_EVICT_REQ;
			oms_actor_begin_dehydrate(oms, a, sink);
			oms_count(oms, OMS_C_DRAINED);
			flushed++;
		} else if (moved && oms_actor_move_out(oms, a, sink) > 0) {
			flushed++; /* a move started: one of this wave */
		}
	}
}

bool
oms_actor_owned_slow(struct oms *oms, struct oms_actor *a, uint16_t *owner, struct svc_sink *sink)
{
	if (a->flags & OMS_AF_MOVING) {
		/* A move under way goes to its end, wherever routing points meanwhile: some
		 * orders may report to move_to already. */
		*owner = a->move_to;
		oms_count(oms, OMS_C_NOT_OWNER_RESIDENT);
		oms_actor_move_out(oms, a, sink);
		return false;
	}
	if (a->owned_epoch == oms->c.route.epoch)
		return true;
	if (oms_route_owns(oms, a->user, owner)) {
		a->owned_epoch = oms->c.route.epoch;
		return true;
	}
	/* Routing moved the user: it is not served here any more (ARCHITECTURE §7: quiesce,
	 * flush, evict, flip, hydrate on the new owner), and its move starts now rather than
	 * when the drain's cursor reaches it. */
	oms_count(oms, OMS_C_NOT_OWNER_RESIDENT);
	oms_actor_move_out(oms, a, sink);
	return false;
}

void
oms_build_rebind(const struct oms *oms, const struct oms_actor *a, const struct oms_order *o,
		 struct svc_sink *sink, oms_msg_fn *fn, void *ctx)
{
	DCHECK(o->moving);
	DCHECK(o->kind == OMS_K_ORDER && o->state == OMS_O_LIVE);
	DCHECK(a->flags & OMS_AF_MOVING);
	uint16_t self = oms->c.limits.shard_id;
	uint16_t to = a->move_to;
	struct wire_rebind m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_REBIND_TO_ME, o->me_shard);
	m.oid = wire_oid_make(oms_order_oid_shard(oms, o), a->user, o->user_seq);
	m.sent_ns = oms->c.now_ns;
	m.from_shard = self;
	m.to_shard = to;
	m.symbol = o->symbol;
	m.cl_ord_id = o->cl_ord_id;
	m.qty = o->qty;
	m.reserved = o->reserved;
	m.notional_maker = o->notional_maker;
	m.notional_taker = o->notional_taker;
	oms_out(sink, fn, ctx, WIRE_DEST_ME, &m.hdr);
}

uint32_t
oms_actor_move_out(struct oms *oms, struct oms_actor *a, struct svc_sink *sink)
{
	if (a->state != OMS_A_RESIDENT)
		return 0; /* flushing: the move's last step is under way */
	if (oms_actor_evictable(oms, a)) {
		a->flags &= (uint8_t)~OMS_AF_EVICT_REQ;
		oms_actor_begin_dehydrate(oms, a, sink);
		oms_count(oms, OMS_C_DRAINED);
		return 0;
	}
	/* Quiesce: requests are refused NOT_OWNER from now on; the sagas in flight finish
	 * first (a modify's target must not move under it), then the open orders move. */
	if (a->sagas > 0 || a->live == 0)
		return 0;
	if ((a->flags & OMS_AF_MOVING) == 0) {
		/* The destination is fixed from the first re-bind on: a routing change during
		 * the move starts another move once this one is over (fencing.md). */
		uint16_t to = oms_route_owner(oms, a->user);
		if (to == oms->c.limits.shard_id)
			return 0; /* owned (an evict request waits for the user to be flat) */
		a->flags |= OMS_AF_MOVING;
		a->move_to = to;
	}
	uint32_t sent = 0;
	for (uint32_t oi = a->order_head; oi != OMS_NIL; oi = oms->orders[oi].next) {
		struct oms_order *o = &oms->orders[oi];
		/* A live market order never rests: its DONE is on the way, nothing to move. */
		if (o->kind != OMS_K_ORDER || o->state != OMS_O_LIVE || o->moving ||
		    o->ord_type != WIRE_ORD_LIMIT)
			continue;
		o->moving = 1;
		oms_build_rebind(oms, a, o, sink, NULL, NULL);
		o->saga_ns = oms->c.now_ns; /* the move is the record's saga now (its age) */
		oms->c.moving++;
		sent++;
	}
	oms->c.counters[OMS_C_REBINDS_SENT] += sent;
	return sent;
}

uint32_t
oms_persist_foreach(const struct oms *oms, oms_msg_fn *fn, void *ctx)
{
	uint32_t n = 0;
	for (uint32_t idx = oms->c.hydrating.tail; idx != OMS_NIL; idx = oms->actors[idx].prev) {
		const struct oms_actor *a = &oms->actors[idx];
		struct wire_hydrate_request m;
		memset(&m, 0, sizeof(m));
		m.hdr.type = WIRE_HYDRATE_REQUEST;
		m.hdr.length = sizeof(m);
		m.hdr.shard = oms->c.limits.shard_id;
		m.user = a->user;
		m.epoch = a->epoch;
		fn(ctx, WIRE_DEST_PERSIST, &m.hdr);
		n++;
	}
	for (uint32_t idx = oms->c.flushing.tail; idx != OMS_NIL; idx = oms->actors[idx].prev) {
		oms_emit_begin_dehydrate(oms, &oms->actors[idx], oms->actors[idx].epoch, NULL, fn,
					 ctx);
		n++;
	}
	/* A flush cancelled by activity, or a write-back, whose answer is not in yet: re-drive
	 * it under its own epoch with the current state (newer money, still under our claim; a
	 * repeat that finds its write there is a success), so its answer arrives and eviction
	 * and write-back can resume. The actor marks clean only what the flush was built from
	 * (wb_gen), which the row holds either way. */
	for (uint32_t idx = oms->c.lru.head; idx != OMS_NIL; idx = oms->actors[idx].next) {
		const struct oms_actor *a = &oms->actors[idx];
		if (a->flush_epoch == 0)
			continue;
		oms_emit_begin_dehydrate(oms, a, a->flush_epoch, NULL, fn, ctx);
		n++;
	}
	for (uint32_t i = 0; i < oms->c.release_count; i++) {
		emit_release(oms, &oms->releases[i], NULL, fn, ctx);
		n++;
	}
	n += oms_lookups_foreach(oms, fn, ctx);
	return n;
}

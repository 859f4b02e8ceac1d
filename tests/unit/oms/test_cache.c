/* SPDX-License-Identifier: Apache-2.0 */
/* The hot-user cache's gauges (oms_cache_info): idle, open and inflight are kept as the
 * actors change, not counted by a walk of the resident list; every figure must equal the
 * walk by the rule itself (a saga in flight, else flat = idle, else open) after every step
 * of an actor's life, across eviction, hydration and a snapshot restore. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct h H;

static void
setup(void)
{
	h_init(&H, NULL);
	h_std_symbols(&H);
}

static void
teardown(void)
{
	h_fini(&H);
}

TestSuite(oms_cache, .init = setup, .fini = teardown);

/* The gauges by a walk of the lists, written here from the rule, not from the service. */
static struct oms_cache_info
walk(const struct oms *oms)
{
	struct oms_cache_info w;
	memset(&w, 0, sizeof(w));
	w.cap = oms->c.limits.users_max;
	for (uint32_t i = oms->c.lru.head; i != OMS_NIL; i = oms->actors[i].next) {
		const struct oms_actor *a = &oms->actors[i];
		cr_assert(eq(u8, a->state, OMS_A_RESIDENT));
		if (a->sagas > 0)
			w.inflight++;
		else if (oms_actor_flat(a))
			w.idle++;
		else
			w.open++;
	}
	for (uint32_t i = oms->c.flushing.head; i != OMS_NIL; i = oms->actors[i].next)
		w.flushing++;
	for (uint32_t i = oms->c.hydrating.head; i != OMS_NIL; i = oms->actors[i].next) {
		w.hydrating++;
		w.parked += oms->actors[i].parked_count;
	}
	for (uint32_t i = oms->c.waiting.head; i != OMS_NIL; i = oms->actors[i].next) {
		w.waiting++;
		w.parked += oms->actors[i].parked_count;
	}
	return w;
}

/* oms_cache_info equals the walk and the expected figures (idle, open, inflight, flushing,
 * hydrating), and the invariant check (which compares them too) holds. */
static void
expect_on(const struct oms *oms, uint32_t idle, uint32_t open, uint32_t inflight,
	  uint32_t flushing, uint32_t hydrating)
{
	struct oms_cache_info got, w = walk(oms);
	memset(&got, 0xff, sizeof(got));
	oms_cache_info(oms, &got);
	cr_assert(eq(u32, got.idle, w.idle));
	cr_assert(eq(u32, got.open, w.open));
	cr_assert(eq(u32, got.inflight, w.inflight));
	cr_assert(eq(u32, got.flushing, w.flushing));
	cr_assert(eq(u32, got.hydrating, w.hydrating));
	cr_assert(eq(u32, got.waiting, w.waiting));
	cr_assert(eq(u32, got.parked, w.parked));
	cr_assert(eq(u32, got.cap, w.cap));
	cr_assert(eq(u32, got.idle, idle));
	cr_assert(eq(u32, got.open, open));
	cr_assert(eq(u32, got.inflight, inflight));
	cr_assert(eq(u32, got.flushing, flushing));
	cr_assert(eq(u32, got.hydrating, hydrating));
	cr_assert(eq(int, oms_check_invariants(oms), 0));
}

static void
expect(uint32_t idle, uint32_t open, uint32_t inflight, uint32_t flushing, uint32_t hydrating)
{
	expect_on(H.oms, idle, open, inflight, flushing, hydrating);
}

/* The ADOPTED event of a move (docs/fencing.md): user's live buy seq (cl_ord_id cl) of
 * qty at px on S_BTCUSD, first admitted by OMS shard 1, reserving reserved. */
static struct wire_oid
adopted(uint64_t user, uint64_t seq, uint64_t cl, int64_t px, int64_t qty, int64_t reserved)
{
	struct wire_me_event e;
	struct wire_oid oid = wire_oid_make(1, user, seq);
	h_event_msg(&H, &e, H.me_seq[0]++, oid, S_BTCUSD, WIRE_EV_ADOPTED);
	e.side = WIRE_SIDE_BUY;
	e.px = px;
	e.leaves_qty = qty;
	e.liquidity = WIRE_ORD_LIMIT;
	e.cause = WIRE_TIF_GTC;
	e.reason = WIRE_STP_NONE;
	e.contra.user = cl;
	e.contra.shard_seq = (uint64_t)qty;
	e.contra_user = (uint64_t)reserved;
	h_apply(&H, &e);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ORDERS_ADOPTED), 1));
	return oid;
}

/* Goal: the gauges follow one user through its whole life while two others stay put (8
 * idle, 9 with an open order): idle → open (an order adopted in a move) → inflight (amend)
 * → open → inflight (cancel) → open (cancelled, not done) → idle (DONE) → inflight (a new
 * order) → open (accepted) → idle (filled, DONE) → flushing → resident again (activity in
 * the flush window) → flushing → evicted → hydrating (a parked order) → hydrated with that
 * order in flight → idle (rejected).
 * Method: drive user 7 with ME events, orders, amend and cancel, the TTL sweep and the flush
 * handshake; after each step compare oms_cache_info with a walk of the lists and with the
 * figures expected. (Every h_apply and h_tick of every suite also runs oms_check_invariants,
 * which compares the kept counts with the records and with the walk.) */
Test(oms_cache, follows_an_actor_through_its_life)
{
	h_user(&H, 8, 1000, 100000);
	h_user(&H, 9, 1000, 100000);
	h_limit(&H, 9, 1, S_BTCUSD, WIRE_SIDE_SELL, 20000, 100);
	h_ev(&H, h_last_ack_oid(&H), S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	expect(1, 1, 0, 0, 0);

	struct wire_user_state st;
	memset(&st, 0, sizeof(st));
	st.user = 7;
	st.version = 1;
	st.user_seq = 5;
	st.balance_count = 2;
	st.balances[0] = (struct wire_balance){ A_BTC, 0, 1000 };
	st.balances[1] = (struct wire_balance){ A_USD, 0, 1000000 };
	h_hydrate_state(&H, &st);
	expect(2, 1, 0, 0, 0); /* 7 idle */
	/* Buy 100 @ 20000 (notional 20000, taker fee 10): live at once, nothing in flight. */
	struct wire_oid o = adopted(7, 5, 1, 20000, 100, 20010);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 20010));
	expect(1, 2, 0, 0, 0);
	h_amend(&H, 7, 2, 1, 50);
	const struct wire_modify *am = h_get(&H, WIRE_AMEND_TO_ME, 0);
	cr_assert(am != NULL);
	struct wire_oid am_req = am->req;
	expect(1, 1, 1, 0, 0); /* the amend in flight */
	h_ev_contra(&H, o, S_BTCUSD, WIRE_EV_AMENDED, am_req, 0, 0, 50, 50);
	expect(1, 2, 0, 0, 0);
	h_cancel(&H, 7, 3, 1);
	const struct wire_modify *cx = h_get(&H, WIRE_CANCEL_TO_ME, 0);
	cr_assert(cx != NULL);
	struct wire_oid cx_req = cx->req;
	expect(1, 1, 1, 0, 0); /* the cancel in flight */
	h_ev_contra(&H, o, S_BTCUSD, WIRE_EV_CANCELLED, cx_req, WIRE_CAUSE_USER, 0, 50, 0);
	expect(1, 2, 0, 0, 0); /* cancelled, not DONE yet: still open */
	h_ev(&H, o, S_BTCUSD, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), 0));
	expect(2, 1, 0, 0, 0); /* flat again */

	h_limit(&H, 7, 4, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	o = h_last_ack_oid(&H);
	expect(1, 1, 1, 0, 0); /* its saga in flight */
	h_ev(&H, o, S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	expect(1, 2, 0, 0, 0); /* open: a live order */
	h_ev(&H, o, S_BTCUSD, WIRE_EV_FILL, 20000, 100, 0, 2);
	expect(1, 2, 0, 0, 0); /* filled, not DONE yet */
	h_ev(&H, o, S_BTCUSD, WIRE_EV_DONE, 0, 0, 0, 0);
	expect(2, 1, 0, 0, 0);

	/* Past the TTL: the sweep flushes the flat users (7 and 8) and keeps 9 (orders). */
	H.now += 11 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 2));
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_FLUSHING));
	expect(0, 1, 0, 2, 0);
	/* A deposit for 8 in its flush window cancels its eviction: resident and idle. */
	h_transfer(&H, 8, 1, A_USD, 5);
	cr_assert(eq(u32, h_status(&H, 8), OMS_USER_RESIDENT));
	expect(1, 1, 0, 1, 0);
	/* 7's flush answered OK: dropped. */
	h_flush(&H, 7, h_epoch(&H, 7), WIRE_FLUSH_OK, 2);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_ABSENT));
	expect(1, 1, 0, 0, 0);

	/* An order for the cold user parks behind a hydration; the install runs it. */
	h_limit(&H, 7, 5, S_BTCUSD, WIRE_SIDE_BUY, 20000, 10);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_HYDRATING));
	expect(1, 1, 0, 0, 1);
	h_hydrate(&H, 7, h_epoch(&H, 7), A_BTC, 1000, A_USD, 1000000);
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 1));
	expect(1, 1, 1, 0, 0);
	h_ev(&H, h_last_ack_oid(&H), S_BTCUSD, WIRE_EV_REJECTED, 0, 0, 0, 0);
	expect(2, 1, 0, 0, 0);
}

/* Goal: the gauges are not in the snapshot (its format and hash are unchanged) and a restore
 * rebuilds them. Method: a state with every class (idle, open, in flight, flushing); snapshot
 * it, restore into a second shard, compare both with their walks and with each other. */
Test(oms_cache, restore_recounts)
{
	h_user(&H, 7, 1000, 1000000);
	h_user(&H, 8, 1000, 1000000);
	h_user(&H, 9, 1000, 1000000);
	H.now += 11 * SEC;
	h_tick(&H); /* all three flushing */
	h_transfer(&H, 7, 1, A_USD, 5);
	h_transfer(&H, 8, 1, A_USD, 5);
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	h_limit(&H, 8, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	h_ev(&H, h_last_ack_oid(&H), S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	h_user(&H, 10, 1000, 1000000);
	expect(1, 1, 1, 1, 0);
	size_t n = oms_snapshot_size(H.oms);
	void *buf = malloc(n);
	cr_assert(buf != NULL);
	cr_assert(eq(sz, oms_snapshot(H.oms, buf, n), n));
	struct h R;
	h_init(&R, &H.lim);
	cr_assert(eq(int, oms_restore(R.oms, buf, n), 0));
	cr_assert(eq(u64, oms_state_hash(R.oms), oms_state_hash(H.oms)));
	expect_on(R.oms, 1, 1, 1, 1, 0);
	/* A corrupt snapshot leaves an empty state: nothing counted. */
	((uint8_t *)buf)[n / 2] ^= 0x5a;
	if (oms_restore(R.oms, buf, n) != 0)
		expect_on(R.oms, 0, 0, 0, 0, 0);
	free(buf);
	h_fini(&R);
}

/* Goal: a change of a record or a saga that missed the kept counts is caught by the
 * invariant check (which every test step, the property test and the system simulator run),
 * not only by this suite. Method: put each kept count off by one, as a missed mutation
 * point would, and see oms_check_invariants refuse the state; put it back. */
Test(oms_cache, check_catches_a_count_not_maintained)
{
	h_user(&H, 7, 1000, 1000000);
	h_user(&H, 8, 1000, 1000000);
	h_limit(&H, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	h_limit(&H, 8, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	h_ev(&H, h_last_ack_oid(&H), S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	expect(0, 1, 1, 0, 0);
	H.oms->users_ordered--;
	cr_assert(eq(int, oms_check_invariants(H.oms), -EFAULT));
	H.oms->users_ordered++;
	H.oms->users_in_saga--;
	cr_assert(eq(int, oms_check_invariants(H.oms), -EFAULT));
	H.oms->users_in_saga += 2;
	cr_assert(eq(int, oms_check_invariants(H.oms), -EFAULT));
	H.oms->users_in_saga--;
	expect(0, 1, 1, 0, 0);
}

/* Goal: eviction under pressure (the valve, for a waiting user) and a waiting user's
 * admission keep the gauges exact. Method: a cap of 3 full with an idle, an open and an
 * in-flight resident; a cold user's order waits, the valve flushes the idle one, the cold
 * user is promoted and hydrated; compare after each step. */
Test(oms_cache, valve_and_waiting)
{
	struct oms_limits l;
	h_limits(&l);
	l.users_max = 3;
	h_fini(&H);
	h_init(&H, &l);
	h_std_symbols(&H);
	h_user(&H, 1, 1000, 1000000);
	h_user(&H, 2, 1000, 1000000);
	h_user(&H, 3, 1000, 1000000);
	h_limit(&H, 2, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	h_ev(&H, h_last_ack_oid(&H), S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
	h_limit(&H, 3, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100);
	expect(1, 1, 1, 0, 0);
	h_limit(&H, 4, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 10);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_VALVE_DEHYDRATES), 1));
	cr_assert(eq(u32, h_status(&H, 1), OMS_USER_FLUSHING));
	cr_assert(eq(u32, h_status(&H, 4), OMS_USER_HYDRATING));
	expect(0, 1, 1, 1, 1);
	h_flush(&H, 1, h_epoch(&H, 1), WIRE_FLUSH_OK, 2);
	h_hydrate(&H, 4, h_epoch(&H, 4), A_BTC, 1000, A_USD, 1000000);
	expect(0, 1, 2, 0, 0);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Hot-user actors: hydration with parked orders, the dehydration handshake with fencing
 * epochs, the TTL sweep, the size-bound valve, and each eviction anti-pattern of the seed
 * shown impossible. */
#include <stdio.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <signal.h>
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

TestSuite(oms_actor, .init = setup, .fini = teardown);

static struct oms_user_info
info(uint64_t user)
{
	struct oms_user_info i;
	oms_user_get(H.oms, user, &i);
	return i;
}

struct seen {
	uint32_t hyd, deh;
};

static void
seen_fn(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct seen *s = ctx;
	cr_assert(eq(int, dest, WIRE_DEST_PERSIST));
	s->hyd += msg->type == WIRE_HYDRATE_REQUEST;
	s->deh += msg->type == WIRE_BEGIN_DEHYDRATE;
}

/* Goal: orders for a cold user park in log order behind one HydrateRequest and run, in
 * order, when HydrateUser lands. */
Test(oms_actor, cold_orders_park_then_run_in_order)
{
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 5);
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
	cr_assert(eq(int, h_dest(&H, WIRE_HYDRATE_REQUEST, 0), WIRE_DEST_PERSIST));
	cr_assert(eq(u32, h_count(&H, WIRE_ACK) + h_count(&H, WIRE_NAK), 0));
	h_limit(&H, 50, 2, S_ETHUSD, WIRE_SIDE_BUY, 11, 5);
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 0)); /* single-flight */
	cr_assert(eq(u32, info(50).status, OMS_USER_HYDRATING));
	cr_assert(eq(u32, info(50).parked, 2));
	h_hydrate(&H, 50, 9, A_USD, 1000, 0, 0);
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 2));
	const struct wire_ack *a0 = h_get(&H, WIRE_ACK, 0), *a1 = h_get(&H, WIRE_ACK, 1);
	cr_assert(eq(u64, a0->cl_ord_id, 1));
	cr_assert(eq(u64, a1->cl_ord_id, 2));
	cr_assert(eq(u64, wire_oid_seq(a1->oid), 2));
	cr_assert(eq(u32, info(50).status, OMS_USER_RESIDENT));
	cr_assert(eq(u64, info(50).epoch, 9));
	cr_assert(eq(i64, h_reserved(&H, 50, A_USD), 50 + 1 + 55 + 1));
}

/* Goal: parking is bounded per user and in total; over the bound the order is NAKed
 * PARKED_FULL (nothing parked, nothing debited). */
Test(oms_actor, parked_bounds)
{
	for (uint64_t i = 0; i < H.lim.parked_per_user; i++)
		h_limit(&H, 50, 1 + i, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 50, 99, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_PARKED_FULL));
	cr_assert(eq(u32, info(50).parked, H.lim.parked_per_user));
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.parked_max = 3;
	h_init(&H, &l);
	h_std_symbols(&H);
	h_limit(&H, 51, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 52, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 53, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 54, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_PARKED_FULL));
	cr_assert(eq(u32, h_status(&H, 54), OMS_USER_ABSENT));
}

/* Goal (issue 17): a client's retransmission of a request that waits parked (its user
 * hydrating or waiting for room) is not refused when the user's places are full. PARKED_FULL
 * would tell the client "not done" of a request its parked original is about to do
 * (e2e_migrate_load's phantom orders: a retransmit refused, the original executed, the
 * client holding it as refused). The original's answer is the answer. A request that only
 * shares the id (different content) is not a copy. */
Test(oms_actor, retransmit_of_a_parked_request_is_not_refused_when_full)
{
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_cancel(&H, 50, 2, 1);
	/* The user's places fill with other requests; the next one is refused, copies not. */
	for (uint64_t i = 2; i < H.lim.parked_per_user; i++)
		h_limit(&H, 50, 10 + i, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, info(50).parked, H.lim.parked_per_user));
	for (int i = 0; i < 5; i++) {
		h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
		cr_assert(eq(u32, h_count(&H, WIRE_NAK), 0));
		h_cancel(&H, 50, 2, 1);
		cr_assert(eq(u32, h_count(&H, WIRE_NAK), 0));
	}
	cr_assert(eq(u32, info(50).parked, H.lim.parked_per_user));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_PARKED_COPIES), 10));
	h_limit(&H, 50, 99, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_PARKED_FULL));
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_NAK), 0));
	/* Same id, other content: not a copy (refused here, as any request over the bound). */
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 11, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_PARKED_FULL));
	h_hydrate(&H, 50, 9, A_USD, 1000, 0, 0);
	/* One SUBMIT per parked order (1, 12, 13), the cancel answered once: nothing twice. */
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), H.lim.parked_per_user - 1));
	cr_assert(eq(u64, ((const struct wire_ack *)h_get(&H, WIRE_ACK, 0))->cl_ord_id, 1));
	cr_assert(eq(u64, ((const struct wire_ack *)h_get(&H, WIRE_ACK, 1))->cl_ord_id, 2));
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), H.lim.parked_per_user));

	/* The same when the shard's whole parking pool is full. */
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.parked_max = 2;
	h_init(&H, &l);
	h_std_symbols(&H);
	h_limit(&H, 51, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 52, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 51, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_NAK), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_PARKED_COPIES), 1));
	h_limit(&H, 51, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_PARKED_FULL));
}

/* Goal (docs/fencing.md): a hydrating actor installs only the answer to its own request.
 * An OK for an earlier epoch of the user (an attempt that failed, or an incarnation that
 * gave up and released its claim at that epoch) is late: its claim is let go, fenced by
 * that epoch, and the actor waits for its own answer. Installing it made a resident actor
 * whose claim the database may no longer hold (sim-system seed 81: a flush CONFLICT, the
 * user's auto-flush off, its deposits refused for good). */
Test(oms_actor, late_ok_for_an_earlier_request_is_released_not_installed)
{
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	uint64_t e1 = ((const struct wire_hydrate_request *)h_get(&H, WIRE_HYDRATE_REQUEST, 0))->epoch;
	h_hydrate_status(&H, 50, WIRE_HYD_ERROR, 0);
	H.now += SEC;
	h_tick(&H); /* the retry, under a fresh epoch */
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
	uint64_t e2 = ((const struct wire_hydrate_request *)h_get(&H, WIRE_HYDRATE_REQUEST, 0))->epoch;
	cr_assert(gt(u64, e2, e1));
	/* The first request's OK arrives late: not installed, its claim released at e1. */
	h_hydrate(&H, 50, e1, A_USD, 1000, 0, 0);
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_HYDRATING));
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_RELEASE_CLAIM), 1));
	cr_assert(eq(u64, ((const struct wire_release_claim *)h_get(&H, WIRE_RELEASE_CLAIM, 0))->epoch,
		     e1));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_HYDRATE_LATE), 1));
	/* Its own answer installs it and runs the parked order. */
	h_hydrate(&H, 50, e2, A_USD, 1000, 0, 0);
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_RESIDENT));
	cr_assert(eq(u64, info(50).epoch, e2));
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 1));
}

/* Goal (docs/fencing.md): HydrateUser OWNED while routing says the user is ours means the
 * old owner has not released yet: ask again, once per sweep, with the parked orders
 * waiting; after hydrate_retries_max refuse them NOT_OWNER naming the claim holder. */
Test(oms_actor, hydrate_owned_retries_then_not_owner)
{
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	uint64_t e0 = ((const struct wire_hydrate_request *)h_get(&H, WIRE_HYDRATE_REQUEST, 0))->epoch;
	h_limit(&H, 50, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	for (uint32_t i = 1; i < H.lim.hydrate_retries_max; i++) {
		h_hydrate_status(&H, 50, WIRE_HYD_OWNED, 3);
		cr_assert(eq(u32, h_count(&H, WIRE_NAK), 0));
		cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 0)); /* not at once */
		H.now += SEC;
		h_tick(&H);
		cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
		const struct wire_hydrate_request *r = h_get(&H, WIRE_HYDRATE_REQUEST, 0);
		cr_assert(gt(u64, r->epoch, e0)); /* a fresh epoch per attempt */
		e0 = r->epoch;
	}
	h_hydrate_status(&H, 50, WIRE_HYD_OWNED, 3);
	cr_assert(eq(u32, h_count(&H, WIRE_NAK), 2));
	const struct wire_nak *n = h_get(&H, WIRE_NAK, 1);
	cr_assert(eq(u16, n->reason, WIRE_REASON_NOT_OWNER));
	cr_assert(eq(u16, n->owner_shard, 3));
	cr_assert(eq(u64, n->cl_ord_id, 2));
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_ABSENT));
	cr_assert(eq(u32, oms_resident_count(H.oms), 0));
}

/* Goal: HydrateUser OWNED for a user routing gives to another shard is refused at once. */
Test(oms_actor, hydrate_owned_not_ours_refused_at_once)
{
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	struct wire_whale_pin p;
	memset(&p, 0, sizeof(p));
	p.hdr.type = WIRE_WHALE_PIN;
	p.hdr.length = sizeof(p);
	p.user = 50;
	p.shard = 3;
	h_apply(&H, &p);
	h_hydrate_status(&H, 50, WIRE_HYD_OWNED, 3);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_NOT_OWNER));
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_ABSENT));
}

/* Goal (docs/security.md, "No account from nowhere"): HydrateUser UNKNOWN (the database has
 * no account for the user) refuses every parked request UNKNOWN_USER at once — orders with
 * a NAK, a deposit with an ADMIN_REPLY — releases nothing (no claim was taken) and leaves
 * no actor; the next request asks the database again (the operator may open it meanwhile). */
Test(oms_actor, hydrate_unknown_refuses_and_creates_nothing)
{
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_transfer(&H, 50, 9, A_USD, 1000);
	h_hydrate_status(&H, 50, WIRE_HYD_UNKNOWN, 0);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_UNKNOWN_USER));
	cr_assert(eq(u32, h_count(&H, WIRE_ADMIN_REPLY), 1));
	const struct wire_admin_reply *r = h_get(&H, WIRE_ADMIN_REPLY, 0);
	cr_assert(eq(u64, r->req_id, 9));
	cr_assert(eq(u16, r->reason, WIRE_REASON_UNKNOWN_USER));
	cr_assert(eq(u32, h_count(&H, WIRE_RELEASE_CLAIM), 0));
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_ABSENT));
	cr_assert(eq(u32, oms_resident_count(H.oms), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_HYDRATE_UNKNOWN), 1));
	h_limit(&H, 50, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
	h_hydrate(&H, 50, ((const struct wire_hydrate_request *)h_get(&H, WIRE_HYDRATE_REQUEST, 0))
				  ->epoch, A_USD, 1000, 0, 0);
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_RESIDENT));
}

/* Goal: HydrateUser ERROR asks again at the next sweeps (bounded), then refuses the parked
 * orders DB_ERROR. */
Test(oms_actor, hydrate_error_retries_then_db_error)
{
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	for (uint32_t i = 1; i < H.lim.hydrate_retries_max; i++) {
		h_hydrate_status(&H, 50, WIRE_HYD_ERROR, 0);
		H.now += SEC;
		h_tick(&H);
		cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
	}
	h_hydrate_status(&H, 50, WIRE_HYD_ERROR, 0);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_DB_ERROR));
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_ABSENT));
	H.now += SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 0));
}

/* Goal (docs/fencing.md): the drop releases the owner claim: RELEASE_CLAIM{user, epoch of the
 * dropping flush}, kept in state (snapshot, persister rebuild) until RELEASE_DONE; an error
 * answer is retried by the sweep. */
Test(oms_actor, drop_releases_claim_until_done)
{
	h_user(&H, 7, 100, 200);
	H.now += 11 * SEC;
	h_tick(&H);
	uint64_t e = ((const struct wire_begin_dehydrate *)h_get(&H, WIRE_BEGIN_DEHYDRATE, 0))->epoch;
	h_flush(&H, 7, e, WIRE_FLUSH_OK, 2);
	const struct wire_release_claim *r = h_get(&H, WIRE_RELEASE_CLAIM, 0);
	cr_assert(r != NULL);
	cr_assert(eq(int, h_dest(&H, WIRE_RELEASE_CLAIM, 0), WIRE_DEST_PERSIST));
	cr_assert(eq(u64, r->user, 7));
	cr_assert(eq(u64, r->epoch, e));
	cr_assert(eq(u32, H.oms->c.release_count, 1));
	struct wire_release_claim d;
	memset(&d, 0, sizeof(d));
	d.hdr.type = WIRE_RELEASE_DONE;
	d.hdr.length = sizeof(d);
	d.user = 7;
	d.epoch = e;
	d.status = WIRE_FLUSH_ERROR;
	h_apply(&H, &d);
	cr_assert(eq(u32, H.oms->c.release_count, 1));
	H.now += SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_RELEASE_CLAIM), 1)); /* retried */
	d.status = WIRE_FLUSH_OK;
	h_apply(&H, &d);
	cr_assert(eq(u32, H.oms->c.release_count, 0));
	h_apply(&H, &d); /* a repeat answer is harmless */
	cr_assert(eq(u32, H.oms->c.release_count, 0));
}

/* Goal (docs/fencing.md): after cancel-on-activity no new flush starts until the stale
 * flush's answer is in; epochs are unique and increasing across incarnations. */
Test(oms_actor, no_new_flush_until_stale_answer)
{
	h_user(&H, 7, 100, 200);
	H.now += 11 * SEC;
	h_tick(&H);
	uint64_t e1 = ((const struct wire_begin_dehydrate *)h_get(&H, WIRE_BEGIN_DEHYDRATE, 0))->epoch;
	h_transfer(&H, 7, 1, A_USD, 5); /* activity: the flush is cancelled */
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	uint64_t e2 = h_epoch(&H, 7);
	cr_assert(gt(u64, e2, e1));
	H.now += 30 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0)); /* the answer is not in */
	struct seen sn = { 0 };
	cr_assert(eq(u32, oms_persist_foreach(H.oms, seen_fn, &sn), 1)); /* re-driven on failover */
	cr_assert(eq(u32, sn.deh, 1));
	h_flush(&H, 7, e1, WIRE_FLUSH_OK, 2);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	H.now += 11 * SEC;
	h_tick(&H);
	const struct wire_begin_dehydrate *b = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(b != NULL);
	cr_assert(gt(u64, b->epoch, e2));
	cr_assert(eq(u64, b->state.version, 2)); /* expects the row our stale flush wrote */
	cr_assert(eq(i64, b->state.balances[1].total, 205));
}

/* Goal: the idempotency window travels with the user's state: the flush carries the recent
 * request ids and outcomes, and a re-send after re-hydration gets the original outcome. */
Test(oms_actor, recent_ids_move_with_the_user)
{
	h_user(&H, 7, 1000, 100000);
	h_transfer(&H, 7, 42, A_USD, 5);
	h_limit(&H, 7, 9, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 1, 0);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_REJECTED, 0, 0, 0, 0);
	H.now += 11 * SEC;
	h_tick(&H);
	const struct wire_begin_dehydrate *b = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(b != NULL);
	cr_assert(eq(u32, b->state.recent_count, 2));
	cr_assert(eq(u64, b->state.recent[0].id, 42));
	cr_assert(eq(u8, b->state.recent[0].kind, WIRE_RECENT_TRANSFER));
	cr_assert(eq(u64, b->state.recent[1].id, 9));
	cr_assert(eq(u64, b->state.recent[1].user_seq, wire_oid_seq(o)));
	struct wire_hydrate_user hu;
	memset(&hu, 0, sizeof(hu));
	hu.hdr.type = WIRE_HYDRATE_USER;
	hu.hdr.length = sizeof(hu);
	hu.epoch = 100;
	hu.status = WIRE_HYD_OK;
	hu.state = b->state;
	h_flush(&H, 7, b->epoch, WIRE_FLUSH_OK, 2);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_ABSENT));
	h_apply(&H, &hu);
	h_transfer(&H, 7, 42, A_USD, 5); /* re-sent: not applied again */
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 100005));
	h_limit(&H, 7, 9, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 0));
	cr_assert(wire_oid_eq(h_last_ack_oid(&H), o));
}

/* Goal: a hydration given up after ERRORs lets go of any claim it may have taken (an ERROR
 * does not prove the database left the row alone), and a late OK answer to it is not
 * installed but released (sim-system seed 64: a claim held by a shard with no actor kept
 * the user out of every other shard).
 * Method: a parked order; ERROR answers until the retries are spent; the give-up must emit
 * RELEASE_CLAIM with the newest epoch used, and the user is absent. Then an OK answer with
 * the first request's epoch: no actor, a RELEASE_CLAIM for that epoch, hydrate_late. */
Test(oms_actor, hydrate_given_up_releases_claim)
{
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, oms_parked_count(H.oms), 1)); /* the order waits for the hydration */
	const struct wire_hydrate_request *rq = h_get(&H, WIRE_HYDRATE_REQUEST, 0);
	cr_assert_not_null(rq);
	uint64_t first = rq->epoch;
	for (uint32_t i = 1; i < H.lim.hydrate_retries_max; i++) {
		h_hydrate_status(&H, 50, WIRE_HYD_ERROR, 0);
		H.now += SEC;
		h_tick(&H);
	}
	uint64_t newest = h_epoch(&H, 50);
	cr_assert(gt(u64, newest, first));
	h_hydrate_status(&H, 50, WIRE_HYD_ERROR, 0);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_DB_ERROR));
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_ABSENT));
	cr_assert(eq(u32, oms_parked_count(H.oms), 0));
	const struct wire_release_claim *rc = h_get(&H, WIRE_RELEASE_CLAIM, 0);
	cr_assert_not_null(rc);
	cr_assert(eq(u64, rc->user, 50));
	cr_assert(eq(u64, rc->epoch, newest));
	h_clear(&H);
	struct wire_hydrate_user late; /* the late answer to the first request (raw: h_hydrate
					* would give a user without an actor a fresh epoch) */
	memset(&late, 0, sizeof(late));
	late.hdr.type = WIRE_HYDRATE_USER;
	late.hdr.length = sizeof(late);
	late.epoch = first;
	late.status = WIRE_HYD_NEW;
	late.state.user = 50;
	h_apply(&H, &late);
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_ABSENT));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_HYDRATE_LATE), 1));
	rc = h_get(&H, WIRE_RELEASE_CLAIM, 0);
	cr_assert_not_null(rc);
	cr_assert(eq(u64, rc->epoch, first));
}

/* The HYDRATE_REQUESTs oms_persist_foreach re-emits (the leader's persister re-drive,
 * app_bridge.c: on every change of leader and every PERSIST_REDRIVE_NS). */
struct redrive {
	uint32_t n;
	uint64_t user, epoch;
};

static void
redrive_fn(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct redrive *r = ctx;
	cr_assert(eq(int, dest, WIRE_DEST_PERSIST));
	if (msg->type != WIRE_HYDRATE_REQUEST)
		return;
	const struct wire_hydrate_request *q = (const void *)msg;
	r->n++;
	r->user = q->user;
	r->epoch = q->epoch;
}

/* Goal: a hydrating actor waits on one answer, its own request's (a->epoch), and that
 * answer cannot be lost for good. Answers that race its retries are harmless: an OK for an
 * earlier request that arrives after the retry went out is late (its claim released at
 * its epoch, which a release fenced by epoch cannot take from the retry's newer claim);
 * the actor keeps waiting, and no answer, nor the sweep, sends anything again. The
 * persister's queue is rebuilt from state (oms_persist_foreach, re-driven by the leader)
 * with the request under its own epoch, so a lost answer comes again and installs it: a
 * repeat of a claim the shard holds is granted again (GREATEST keeps the stamp). */
Test(oms_actor, hydration_racing_retries_and_lost_answers_is_not_stranded)
{
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	uint64_t e1 = ((const struct wire_hydrate_request *)h_get(&H, WIRE_HYDRATE_REQUEST, 0))->epoch;
	h_hydrate_status(&H, 50, WIRE_HYD_OWNED, 3); /* the old owner has not released yet */
	H.now += SEC;
	h_tick(&H);
	uint64_t e2 = ((const struct wire_hydrate_request *)h_get(&H, WIRE_HYDRATE_REQUEST, 0))->epoch;
	cr_assert(gt(u64, e2, e1));
	/* A re-driven copy of the first request claimed the row once it was free: late. */
	h_hydrate(&H, 50, e1, A_USD, 1000, 0, 0);
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_HYDRATING));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_HYDRATE_LATE), 1));
	const struct wire_release_claim *rc = h_get(&H, WIRE_RELEASE_CLAIM, 0);
	cr_assert(rc != NULL && rc->epoch == e1);
	/* The retry's answer is lost (a leader change, a dropped proposal): the service asks
	 * nothing again by itself, the actor waits for e2. */
	for (int i = 0; i < 5; i++) {
		H.now += SEC;
		h_tick(&H);
		cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 0));
	}
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_HYDRATING));
	cr_assert(eq(u64, h_epoch(&H, 50), e2));
	/* The re-drive asks again under e2, and that answer installs it. */
	struct redrive r = { 0 };
	oms_persist_foreach(H.oms, redrive_fn, &r);
	cr_assert(eq(u32, r.n, 1));
	cr_assert(eq(u64, r.user, 50));
	cr_assert(eq(u64, r.epoch, e2));
	h_hydrate(&H, 50, r.epoch, A_USD, 1000, 0, 0);
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_RESIDENT));
	cr_assert(eq(u64, h_epoch(&H, 50), e2));
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 1), "the parked order runs");
	/* The lost answer turning up after all is a repeat for a resident user: ignored. */
	h_hydrate(&H, 50, e2, A_USD, 1000, 0, 0);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_HYDRATE_DUP), 1));
	cr_assert(eq(u32, h_count(&H, WIRE_RELEASE_CLAIM), 0));
	cr_assert(eq(int, oms_check_invariants(H.oms), 0));
}

/* Goal: a hydrate-ahead (HydrateUser before any order) installs the actor; a second
 * HydrateUser for a resident user is ignored (RAM is newer than the row). */
Test(oms_actor, hydrate_ahead_and_duplicate)
{
	h_hydrate(&H, 60, 4, A_USD, 500, 0, 0);
	cr_assert(eq(u32, h_status(&H, 60), OMS_USER_RESIDENT));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_HYDRATE_AHEAD), 1));
	h_limit(&H, 60, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	h_hydrate(&H, 60, 5, A_USD, 999999, 0, 0);
	cr_assert(eq(i64, h_total(&H, 60, A_USD), 500));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_HYDRATE_DUP), 1));
}

/* Goal: the sweep dehydrates a flat user idle past TTL (not before); BeginDehydrate carries
 * only the quiescent state; the actor stays in RAM until FlushComplete. */
Test(oms_actor, ttl_sweep_and_handshake)
{
	h_user(&H, 7, 100, 200);
	H.now += 9 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	H.now += 2 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
	const struct wire_begin_dehydrate *b = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(eq(int, h_dest(&H, WIRE_BEGIN_DEHYDRATE, 0), WIRE_DEST_PERSIST));
	cr_assert(eq(u64, b->state.user, 7));
	cr_assert(eq(u32, b->state.balance_count, 2));
	cr_assert(eq(i64, b->state.balances[1].total, 200));
	cr_assert(eq(u64, b->epoch, 2));
	/* Not dropped before FlushComplete: still readable, still counted resident. */
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_FLUSHING));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 200));
	h_flush(&H, 7, b->epoch, WIRE_FLUSH_OK, 2);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_ABSENT));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_EVICTIONS), 1));
}

/* Anti-pattern: evicting a user with live resting orders. */
Test(oms_actor, never_evicts_with_resting_order)
{
	h_user(&H, 7, 1000, 100000);
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 5);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 5, 0);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_RESTED, 10, 5, 5, 0);
	for (int i = 0; i < 100; i++) {
		H.now += 5 * SEC;
		h_tick(&H);
		cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	}
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(gt(u64, h_ctr(&H, OMS_C_SWEEP_TOUCHED), 0));
	/* A fill 500 s later lands on the live actor: the fill path is never cold. */
	h_ev(&H, o, S_ETHUSD, WIRE_EV_FILL, 10, 5, 0, 1);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_DONE, 0, 0, 0, 0);
	cr_assert(eq(i64, h_total(&H, 7, A_ETH), 5));
	H.now += 11 * SEC;
	h_tick(&H);
	H.now += 11 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_FLUSHING));
}

/* Anti-pattern: evicting a user with an in-flight saga (sent, no result yet). */
Test(oms_actor, never_evicts_with_inflight_saga)
{
	h_user(&H, 7, 1000, 100000);
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 5);
	for (int i = 0; i < 50; i++) {
		H.now += 5 * SEC;
		h_tick(&H);
	}
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u32, info(7).sagas, 1));
	/* White box: a saga alone (no reservation, no live order) still blocks eviction. */
	struct oms_actor *a = oms_actor_find(H.oms, 7);
	a->live = 0;
	a->reservations = 0;
	a->order_count = 0;
	cr_assert(not(oms_actor_flat(a)));
}

/* Anti-pattern: evicting a user with funds committed (an outstanding reservation). */
Test(oms_actor, never_evicts_with_reservation)
{
	h_user(&H, 7, 1000, 100000);
	struct oms_actor *a = oms_actor_find(H.oms, 7);
	cr_assert(oms_actor_flat(a));
	a->reservations = 1; /* white box: the reservation counter alone */
	cr_assert(not(oms_actor_flat(a)));
	H.now += 30 * SEC;
	oms_tick(H.oms, H.now, &H.sink);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	a->reservations = 0;
	a->live = 1; /* and the resting-order counter alone */
	cr_assert(not(oms_actor_flat(a)));
	H.now += 30 * SEC;
	oms_tick(H.oms, H.now, &H.sink);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	a->live = 0;
}

/* Goal: starting a flush for a non-flat actor is a programmer error caught by CHECK. */
Test(oms_actor, begin_dehydrate_non_flat_aborts, .signal = SIGABRT)
{
	h_user(&H, 7, 1000, 100000);
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 5);
	oms_actor_begin_dehydrate(H.oms, oms_actor_find(H.oms, 7), &H.sink);
}

/* Goal: an order in the flush window cancels the eviction (served from RAM, epoch bump);
 * the stale FlushComplete that follows never evicts the re-activated user. */
Test(oms_actor, order_in_flush_window_and_stale_flush_complete)
{
	h_user(&H, 7, 1000, 100000);
	H.now += 11 * SEC;
	h_tick(&H);
	const struct wire_begin_dehydrate *b = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(b != NULL);
	uint64_t e = b->epoch;
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 5);
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 1));
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 0)); /* no DB read */
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(gt(u64, h_epoch(&H, 7), e));
	h_flush(&H, 7, e, WIRE_FLUSH_OK, 2);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_FLUSH_STALE), 1));
	cr_assert(eq(u64, info(7).version, 2)); /* the next CAS expects our own write */
	cr_assert(eq(u32, info(7).sagas, 1));
}

/* Goal: dropping happens only on FlushComplete with the current epoch; nothing else
 * (a HydrateUser, a completion with another epoch) drops or overwrites the actor. */
Test(oms_actor, no_drop_before_flush_complete)
{
	h_user(&H, 7, 1000, 100000);
	H.now += 11 * SEC;
	h_tick(&H);
	uint64_t e = ((const struct wire_begin_dehydrate *)h_get(&H, WIRE_BEGIN_DEHYDRATE, 0))->epoch;
	h_hydrate(&H, 7, 77, A_USD, 1, 0, 0);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_FLUSHING));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 100000));
	h_flush(&H, 7, e + 1, WIRE_FLUSH_OK, 2);
	h_flush(&H, 8, e, WIRE_FLUSH_OK, 2);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_FLUSHING));
	for (int i = 0; i < 10; i++) {
		H.now += 20 * SEC;
		h_tick(&H);
	}
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_FLUSHING)); /* crash-safe: waits */
	h_flush(&H, 7, e, WIRE_FLUSH_OK, 2);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_ABSENT));
}

/* Goal: a CONFLICT flush keeps the actor, raises the alarm and is not retried by the sweep;
 * an operator USER_ADMIN evict flushes it again. A transient ERROR is retried after TTL. */
Test(oms_actor, flush_conflict_and_error)
{
	h_user(&H, 7, 1000, 100000);
	H.now += 11 * SEC;
	h_tick(&H);
	uint64_t e = ((const struct wire_begin_dehydrate *)h_get(&H, WIRE_BEGIN_DEHYDRATE, 0))->epoch;
	h_flush(&H, 7, e, WIRE_FLUSH_CONFLICT, 0);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_FLUSH_CONFLICT), 1));
	H.now += 30 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	struct wire_user_admin ua;
	memset(&ua, 0, sizeof(ua));
	ua.hdr.type = WIRE_USER_ADMIN;
	ua.hdr.length = sizeof(ua);
	ua.user = 7;
	ua.op = 1;
	h_apply(&H, &ua);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
	e = ((const struct wire_begin_dehydrate *)h_get(&H, WIRE_BEGIN_DEHYDRATE, 0))->epoch;
	h_flush(&H, 7, e, WIRE_FLUSH_ERROR, 0);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	H.now += 11 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
}

/* A shard whose cap holds four users (1..4 resident, funded, one 10 ms apart), one flush in
 * flight at most beyond it, and two users waiting for room. */
static void
cap_setup(uint32_t wait_max)
{
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.users_max = 4;
	l.flush_headroom = 1;
	l.wait_max = wait_max;
	l.admit_wait_ns = 3 * SEC / 2;
	h_init(&H, &l);
	h_std_symbols(&H);
	for (uint64_t u = 1; u <= 4; u++) {
		h_user(&H, u, 1000, 100000);
		H.now += SEC / 100;
	}
}

/* Goal (issue 17, docs/oms.md "Admission"): at the resident cap a cold user waits instead of
 * being refused: the least recently active idle user is evicted at once (before its TTL)
 * and the waiting user hydrates in the room it leaves, in order of arrival. */
Test(oms_actor, cold_users_wait_and_evict_the_idle_tail)
{
	cap_setup(2);
	h_limit(&H, 2, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1); /* 2 holds a saga; LRU tail is 1 */
	h_limit(&H, 9, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_NAK), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
	cr_assert(eq(u64, ((const struct wire_begin_dehydrate *)h_get(&H, WIRE_BEGIN_DEHYDRATE, 0))
				  ->state.user,
		     1));
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_HYDRATING));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_VALVE_DEHYDRATES), 1));
	/* The headroom is held by 1's flush, the cap by 2, 3, 4 and 9: the next cold user
	 * waits, and 3 (the idle tail now; 2 is skipped, it holds a saga) makes room for it. */
	h_limit(&H, 10, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_NAK), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
	cr_assert(eq(u64, ((const struct wire_begin_dehydrate *)h_get(&H, WIRE_BEGIN_DEHYDRATE, 0))
				  ->state.user,
		     3));
	cr_assert(eq(u32, h_status(&H, 10), OMS_USER_HYDRATING));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ADMIT_WAITS), 2)); /* 9 waited too, for 1's flush */
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ADMIT_PROMOTED), 2));
	/* Both orders run once their users are in. */
	h_hydrate(&H, 9, h_epoch(&H, 9), A_USD, 100000, 0, 0);
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 1));
	h_hydrate(&H, 10, h_epoch(&H, 10), A_USD, 100000, 0, 0);
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 1));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_NAKS), 0));
}

/* Goal: with every resident holding orders nothing can be evicted: a cold user waits (no
 * request out, no answer), and once it has waited admit_wait_ns its order is refused
 * CAPACITY — the reason says the cap is held, not that the database failed. */
Test(oms_actor, capacity_only_when_nothing_can_go)
{
	cap_setup(2);
	for (uint64_t u = 1; u <= 4; u++)
		h_limit(&H, u, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 9, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_NAK), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_WAITING));
	cr_assert(eq(u32, oms_waiting_count(H.oms), 1));
	H.now += SEC;
	h_tick(&H); /* a sweep before the deadline: still waiting */
	cr_assert(eq(u64, h_ctr(&H, OMS_C_SWEEPS), 2));
	cr_assert(eq(u32, h_count(&H, WIRE_NAK), 0));
	H.now += SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_NAK), 1));
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_CAPACITY));
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_ABSENT));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ADMIT_TIMEOUTS), 1));
	cr_assert(eq(u32, oms_waiting_count(H.oms), 0));
}

/* Goal: a waiting user is admitted as soon as a resident can go — here when one's order is
 * refused by the ME and it turns flat — without waiting for that user's TTL. */
Test(oms_actor, waiting_user_admitted_when_a_resident_turns_flat)
{
	cap_setup(2);
	for (uint64_t u = 1; u <= 4; u++)
		h_limit(&H, u, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 9, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_WAITING));
	h_ev(&H, h_oid(&H, 3, 1), S_ETHUSD, WIRE_EV_REJECTED, 0, 0, 0, 0);
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_WAITING)); /* until the next sweep */
	H.now += SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
	cr_assert(eq(u64, ((const struct wire_begin_dehydrate *)h_get(&H, WIRE_BEGIN_DEHYDRATE, 0))
				  ->state.user,
		     3));
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_HYDRATING));
	h_hydrate(&H, 9, h_epoch(&H, 9), A_USD, 100000, 0, 0);
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 1));
}

/* Goal: the waiting queue is bounded (wait_max): beyond it a cold user is refused
 * BACKPRESSURE (transient: nothing was applied), and a full queue does not disturb the
 * users already in it. */
Test(oms_actor, waiting_queue_full_is_backpressure)
{
	cap_setup(1);
	for (uint64_t u = 1; u <= 4; u++)
		h_limit(&H, u, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 9, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 10, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_BACKPRESSURE));
	cr_assert(eq(u32, h_status(&H, 10), OMS_USER_ABSENT));
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_WAITING));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ADMIT_QUEUE_FULL), 1));
	/* A second message of the waiting user parks behind its first. */
	h_limit(&H, 9, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_NAK), 0));
}

/* Goal (issue 17): a deposit retried while its user waits for room is answered with its
 * original outcome once the user is in, and credits nothing twice. */
Test(oms_actor, retried_deposit_waits_and_gets_its_original_answer)
{
	cap_setup(2);
	h_transfer(&H, 1, 77, A_USD, 500);
	cr_assert(eq(i64, h_total(&H, 1, A_USD), 100500));
	/* Everybody goes cold: 1 is evicted with the transfer in its window. */
	H.now += 11 * SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 4));
	struct wire_begin_dehydrate bd[4];
	for (uint32_t i = 0; i < 4; i++)
		bd[i] = *(const struct wire_begin_dehydrate *)h_get(&H, WIRE_BEGIN_DEHYDRATE, i);
	struct wire_user_state row;
	for (uint32_t i = 0; i < 4; i++) {
		h_flush(&H, bd[i].state.user, bd[i].epoch, WIRE_FLUSH_OK, bd[i].state.version + 1);
		if (bd[i].state.user == 1)
			row = bd[i].state;
	}
	cr_assert(eq(u32, h_status(&H, 1), OMS_USER_ABSENT));
	cr_assert(eq(u32, row.recent_count, 1));
	row.version++;
	/* The cap fills with users holding orders; 1's retry waits. */
	for (uint64_t u = 11; u <= 14; u++) {
		h_transfer(&H, u, 1, A_USD, 100000);
		struct wire_user_state st;
		memset(&st, 0, sizeof(st));
		st.user = u;
		st.balance_count = 1;
		st.balances[0].asset = A_USD;
		st.balances[0].total = 0;
		h_hydrate_state(&H, &st);
		h_limit(&H, u, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	}
	h_transfer(&H, 1, 77, A_USD, 500);
	cr_assert(eq(u32, h_status(&H, 1), OMS_USER_WAITING));
	cr_assert(eq(u32, h_count(&H, WIRE_ADMIN_REPLY), 0));
	/* Room comes (14's order is refused, it turns flat, the sweep evicts it). */
	h_ev(&H, h_oid(&H, 14, 1), S_ETHUSD, WIRE_EV_REJECTED, 0, 0, 0, 0);
	H.now += SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_status(&H, 1), OMS_USER_HYDRATING));
	h_hydrate_state(&H, &row);
	cr_assert(eq(u32, h_count(&H, WIRE_ADMIN_REPLY), 1));
	const struct wire_admin_reply *r = h_get(&H, WIRE_ADMIN_REPLY, 0);
	cr_assert(eq(u16, r->reason, WIRE_REASON_NONE));
	cr_assert(eq(u64, r->value, 100500)); /* the original answer: the total it made */
	cr_assert(eq(i64, h_total(&H, 1, A_USD), 100500));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ADMIT_WAITS), 1));
	/* 1 parked at the retry and was installed SEC later (it waited for the sweep); its
	 * request went out at the sweep, so the hydration itself took no cluster time. */
	const struct hist *park = oms_park_hist(H.oms), *hyd = oms_hydrate_hist(H.oms);
	cr_assert(ge(u64, park->count, 5)); /* 11..14 and 1 */
	cr_assert(eq(u64, park->max >= SEC, true));
	cr_assert(eq(u64, hyd->count, park->count));
	cr_assert(lt(u64, hyd->max, SEC));
}

/* Goal: the sweep is O(expired): it stops at the first non-expired actor and evicts at
 * most K per sweep. */
Test(oms_actor, sweep_bounded_and_stops_early)
{
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.sweep_evict_max = 3;
	l.sweep_scan_max = 100;
	h_init(&H, &l);
	h_std_symbols(&H);
	for (uint64_t u = 1; u <= 10; u++)
		h_user(&H, u, 1, 1);
	H.now += 5 * SEC;
	for (uint64_t u = 11; u <= 40; u++)
		h_user(&H, u, 1, 1);
	H.now += 6 * SEC; /* users 1..10 expired, 11..40 not */
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 3));
	H.now += SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 3));
	H.now += SEC;
	h_tick(&H);
	H.now += SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
	H.now += SEC / 10;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	cr_assert(eq(u32, H.oms->c.flushing.count, 10));
}

/* Goal: a fill for a non-resident user is never dropped: it hydrates on miss, the stream
 * moves on, and the event is applied after HydrateUser. */
Test(oms_actor, event_for_cold_user_hydrates_on_miss)
{
	struct wire_me_event e;
	h_event_msg(&H, &e, 1, h_oid(&H, 70, 5), S_ETHUSD, WIRE_EV_FILL);
	e.side = WIRE_SIDE_SELL;
	e.px = 10;
	e.qty = 3;
	e.notional = 30;
	e.liquidity = 1;
	h_apply(&H, &e);
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
	cr_assert(eq(u64, oms_stream_next_seq(H.oms, 1), 2));
	cr_assert(eq(u32, info(70).parked, 1));
	h_hydrate(&H, 70, 1, A_ETH, 10, A_USD, 0);
	/* Applied: it names an order this state does not know (alarm), and the trade's money
	 * still moves (sold 3 ETH for 30 USD + 0.003 rebate rounded to 0). */
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_UNKNOWN_ORDER), 1));
	cr_assert(eq(i64, h_total(&H, 70, A_ETH), 7));
	cr_assert(eq(i64, h_total(&H, 70, A_USD), 30));
}

/* Goal: outstanding hydrations and flushes are enumerable (the persister's work queue). */
Test(oms_actor, persist_foreach)
{
	h_user(&H, 7, 1, 1);
	h_limit(&H, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	h_limit(&H, 51, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	H.now += 11 * SEC;
	h_tick(&H);
	struct seen s = { 0 };
	cr_assert(eq(u32, oms_persist_foreach(H.oms, seen_fn, &s), 3));
	cr_assert(eq(u32, s.hyd, 2));
	cr_assert(eq(u32, s.deh, 1));
}

/* Goal: deposits/withdrawals are idempotent, hydrate a cold user first, and never make an
 * available balance negative. */
Test(oms_actor, transfers)
{
	h_transfer(&H, 80, 1, A_USD, 500);
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
	struct wire_hydrate_user hu;
	memset(&hu, 0, sizeof(hu));
	hu.hdr.type = WIRE_HYDRATE_USER;
	hu.hdr.length = sizeof(hu);
	hu.epoch = 1;
	hu.status = WIRE_HYD_NEW;
	hu.state.user = 80;
	h_apply(&H, &hu);
	cr_assert(eq(i64, h_total(&H, 80, A_USD), 500));
	h_transfer(&H, 80, 1, A_USD, 500);
	cr_assert(eq(i64, h_total(&H, 80, A_USD), 500));
	h_limit(&H, 80, 1, S_ETHUSD, WIRE_SIDE_BUY, 100, 4); /* reserves 400 + 1 */
	h_transfer(&H, 80, 2, A_USD, -100);
	const struct wire_admin_reply *r = h_get(&H, WIRE_ADMIN_REPLY, 0);
	cr_assert(eq(u16, r->reason, WIRE_REASON_INSUFFICIENT_FUNDS));
	h_transfer(&H, 80, 3, A_USD, -99);
	cr_assert(eq(i64, h_total(&H, 80, A_USD), 401));
	cr_assert(eq(i64, h_reserved(&H, 80, A_USD), 401));
}

/* Goal: the index's removal at a hinted entry (oms_tab_remove_hinted) checks the hint: a
 * stale one (another key's entry, an empty one, out of range) removes the named key and no
 * other, as oms_tab_remove would. Method: 200 order keys of one user in the index, removed
 * in a seeded order with hints right, stale or wild, every other key looked up after each. */
Test(oms_actor, index_removal_checks_its_hint)
{
	struct oms *oms = H.oms;
	enum { N = 200 };
	static bool live[N];
	for (uint32_t k = 0; k < N; k++) {
		oms_tab_insert(oms, OMS_TAG_ORDER, 77, k + 1, 1000 + k);
		live[k] = true;
	}
	uint64_t x = 7;
	for (uint32_t round = 0; round < N; round++) {
		uint32_t k;
		do {
			x = x * UINT64_C(6364136223846793005) + 1442695040888963407u;
			k = (uint32_t)(x >> 33) % N;
		} while (!live[k]);
		uint32_t at = oms_tab_find_at(oms, OMS_TAG_ORDER, 77, k + 1);
		cr_assert(ne(u32, at, OMS_NIL));
		/* Right, a neighbour, out of range, anywhere. */
		uint32_t hint = round % 4 == 0	 ? at
				: round % 4 == 1 ? (at + 1) & oms->table_mask
				: round % 4 == 2 ? oms->table_mask + 1 + (uint32_t)(x & 0xff)
						 : (uint32_t)(x >> 40) & oms->table_mask;
		oms_tab_remove_hinted(oms, OMS_TAG_ORDER, 77, k + 1, hint);
		live[k] = false;
		for (uint32_t j = 0; j < N; j++)
			cr_assert(eq(u32, oms_tab_find(oms, OMS_TAG_ORDER, 77, j + 1),
				     live[j] ? 1000 + j : OMS_NIL),
				  "round %u key %u", round, j);
	}
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Periodic write-back of dirty resident users (docs/oms.md, "Write-back"): a dirty user is
 * written and stays resident, flat or not; a change made while its write-back is in flight is
 * written by a later pass; a clean user is never re-written; the batch and room bounds hold;
 * a snapshot taken mid-write-back restores to the same state and behaviour; the versions
 * chain from write-back to eviction. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct h H, G;

static void
wb_limits(struct oms_limits *l)
{
	h_limits(l);
	l->writeback_interval_ns = SEC;
	l->writeback_max = 64;
}

static void
setup(void)
{
	struct oms_limits l;
	wb_limits(&l);
	h_init(&H, &l);
	h_std_symbols(&H);
}

static void
teardown(void)
{
	h_fini(&H);
}

TestSuite(oms_writeback, .init = setup, .fini = teardown);

/* One write-back period later (the sweep runs at the same cadence, TTL is 10 s). */
static void
pass(struct h *h)
{
	h->now += SEC;
	h_tick(h);
}

static const struct wire_begin_dehydrate *
wb_of(const struct h *h, uint64_t user)
{
	for (uint32_t i = 0; i < h_count(h, WIRE_BEGIN_DEHYDRATE); i++) {
		const struct wire_begin_dehydrate *b = h_get(h, WIRE_BEGIN_DEHYDRATE, i);
		if (b->state.user == user)
			return b;
	}
	return NULL;
}

static int64_t
state_total(const struct wire_user_state *st, uint32_t asset)
{
	for (uint32_t i = 0; i < st->balance_count; i++)
		if (st->balances[i].asset == asset)
			return st->balances[i].total;
	return -1;
}

static uint64_t
version_of(const struct h *h, uint64_t user)
{
	struct oms_user_info ui;
	cr_assert(eq(int, oms_user_get(h->oms, user, &ui), 0));
	return ui.version;
}

/* Goal: a user whose money changed is written back at the next pass with its totals, even
 * with an order resting (not flat); it stays RESIDENT and keeps its claim (no RELEASE_CLAIM),
 * adopts the version the write produced, and trades on with no database read. */
Test(oms_writeback, dirty_user_written_and_stays_resident)
{
	h_user(&H, 7, 1000, 100000);
	h_user(&H, 8, 1000, 100000);
	h_transfer(&H, 7, 1, A_USD, 5);
	h_limit(&H, 7, 2, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_RESTED, 10, 10, 10, 0);
	cr_assert(not(oms_actor_flat(oms_actor_find(H.oms, 7))));
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1)); /* user 8 is clean */
	const struct wire_begin_dehydrate *b = wb_of(&H, 7);
	cr_assert(b != NULL);
	cr_assert(eq(int, h_dest(&H, WIRE_BEGIN_DEHYDRATE, 0), WIRE_DEST_PERSIST));
	cr_assert(eq(u64, b->state.version, 1));
	cr_assert(eq(i64, state_total(&b->state, A_USD), 100005)); /* totals, reserved inside */
	cr_assert(eq(u64, b->state.user_seq, 1));
	cr_assert(eq(u32, b->state.recent_count, 2));
	cr_assert(eq(u64, b->epoch, h_epoch(&H, 7)));
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_WRITEBACKS), 1));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_DEHYDRATES), 0));
	uint64_t e = b->epoch;
	h_flush(&H, 7, e, WIRE_FLUSH_OK, 2);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u32, h_count(&H, WIRE_RELEASE_CLAIM), 0));
	cr_assert(eq(u32, H.oms->c.release_count, 0));
	cr_assert(eq(u64, version_of(&H, 7), 2));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_WRITEBACKS_OK), 1));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_EVICTIONS), 0));
	cr_assert(gt(i64, h_reserved(&H, 7, A_USD), 0)); /* the order still holds its funds */
	/* Clean now: the next pass writes nobody. */
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	/* Served from RAM: the fill settles, and makes the user dirty again. */
	h_ev(&H, o, S_ETHUSD, WIRE_EV_FILL, 10, 10, 0, 1);
	cr_assert(eq(i64, h_total(&H, 7, A_ETH), 10));
	pass(&H);
	b = wb_of(&H, 7);
	cr_assert(b != NULL);
	cr_assert(eq(u64, b->state.version, 2));
	cr_assert(eq(i64, state_total(&b->state, A_ETH), 10));
	cr_assert(gt(u64, b->epoch, e));
}

/* Goal: a change made while the user's write-back is in flight is not lost when the answer
 * marks the user clean: the OK covers only the generation the write carried, so a later pass
 * writes the user again (with the version the first write produced as its CAS). No second
 * write-back starts while the first is unanswered. */
Test(oms_writeback, change_during_flight_written_next_pass)
{
	h_user(&H, 7, 1000, 100000);
	h_transfer(&H, 7, 1, A_USD, 5);
	pass(&H);
	const struct wire_begin_dehydrate *b = wb_of(&H, 7);
	cr_assert(b != NULL);
	uint64_t e1 = b->epoch;
	h_transfer(&H, 7, 2, A_USD, 7); /* in flight: the write carries 100005 */
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u64, h_epoch(&H, 7), e1)); /* a write-back is not cancelled by activity */
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0)); /* the answer is not in */
	h_flush(&H, 7, e1, WIRE_FLUSH_OK, 2);
	pass(&H);
	b = wb_of(&H, 7);
	cr_assert(b != NULL, "the change made in flight must be written");
	cr_assert(eq(i64, state_total(&b->state, A_USD), 100012));
	cr_assert(eq(u64, b->state.version, 2));
	cr_assert(gt(u64, b->epoch, e1));
	h_flush(&H, 7, b->epoch, WIRE_FLUSH_OK, 3);
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_WRITEBACKS), 2));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_WRITEBACKS_OK), 2));
}

/* Goal: what did not change is not written: freshly hydrated users are clean, and a user
 * written back is clean until it changes again. A cold user with capital committed is
 * re-stamped by the sweep every TTL, which is not activity: no write-back for it. */
Test(oms_writeback, clean_user_not_rewritten)
{
	for (uint64_t u = 10; u < 20; u++)
		h_user(&H, u, 1000, 100000);
	pass(&H);
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_WRITEBACKS), 0));
	h_limit(&H, 10, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid o = h_last_ack_oid(&H);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(&H, o, S_ETHUSD, WIRE_EV_RESTED, 10, 10, 10, 0);
	pass(&H);
	const struct wire_begin_dehydrate *b = wb_of(&H, 10);
	cr_assert(b != NULL);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
	h_flush(&H, 10, b->epoch, WIRE_FLUSH_OK, 2);
	/* 30 s with no activity: the sweep dehydrates the flat users 11..19 and re-stamps 10
	 * (resting order) every TTL; 10 is never written again. */
	uint64_t wb = h_ctr(&H, OMS_C_WRITEBACKS);
	for (int i = 0; i < 30; i++) {
		pass(&H);
		for (uint32_t k = 0; k < h_count(&H, WIRE_BEGIN_DEHYDRATE); k++) {
			b = h_get(&H, WIRE_BEGIN_DEHYDRATE, k);
			cr_assert(ne(u64, b->state.user, 10));
			h_flush(&H, b->state.user, b->epoch, WIRE_FLUSH_OK, 2);
		}
	}
	cr_assert(eq(u64, h_ctr(&H, OMS_C_WRITEBACKS), wb));
	cr_assert(gt(u64, h_ctr(&H, OMS_C_SWEEP_TOUCHED), 0));
	cr_assert(eq(u32, h_status(&H, 10), OMS_USER_RESIDENT));
	cr_assert(eq(u32, h_status(&H, 11), OMS_USER_ABSENT));
}

/* Goal: a pass starts at most writeback_max write-backs, oldest change first, and never more
 * than the room left for flush answers (releases_max less pending releases, flushes and
 * write-backs in flight); answers free room for the next pass. */
Test(oms_writeback, batch_and_room_bounds)
{
	h_fini(&H);
	struct oms_limits l;
	wb_limits(&l);
	l.writeback_max = 3;
	l.releases_max = 5;
	h_init(&H, &l);
	h_std_symbols(&H);
	for (uint64_t u = 1; u <= 10; u++)
		h_user(&H, u, 1000, 100000);
	for (uint64_t u = 1; u <= 10; u++)
		h_transfer(&H, u, 1, A_USD, (int64_t)u);
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 3));
	for (uint64_t u = 1; u <= 3; u++)
		cr_assert(wb_of(&H, u) != NULL, "oldest change first: user %lu", (unsigned long)u);
	uint64_t e1 = wb_of(&H, 1)->epoch;
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 2)); /* room: 5 - 3 in flight */
	cr_assert(wb_of(&H, 4) != NULL);
	cr_assert(wb_of(&H, 5) != NULL);
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0)); /* no room at all */
	cr_assert(eq(u32, H.oms->c.wb_inflight, 5));
	h_flush(&H, 1, e1, WIRE_FLUSH_OK, 2);
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
	cr_assert(wb_of(&H, 6) != NULL);
	cr_assert(eq(u32, H.oms->c.dirty.count, 4)); /* 7..10 wait their turn */
}

/* Goal: transient and conflict answers are handled as for an eviction's flush: ERROR counts
 * flush_errors and the user stays dirty (the next pass writes it again); CONFLICT raises
 * alarm_flush_conflict and the user is not written back again until an operator acts. */
Test(oms_writeback, error_and_conflict)
{
	h_user(&H, 7, 1000, 100000);
	h_user(&H, 8, 1000, 100000);
	h_transfer(&H, 7, 1, A_USD, 5);
	h_transfer(&H, 8, 1, A_USD, 5);
	pass(&H);
	uint64_t e7 = wb_of(&H, 7)->epoch, e8 = wb_of(&H, 8)->epoch;
	h_flush(&H, 7, e7, WIRE_FLUSH_ERROR, 0);
	h_flush(&H, 8, e8, WIRE_FLUSH_CONFLICT, 5);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_FLUSH_ERRORS), 1));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_ALARM_FLUSH_CONFLICT), 1));
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u32, h_status(&H, 8), OMS_USER_RESIDENT));
	cr_assert(eq(u64, version_of(&H, 8), 1)); /* a conflict's version is not ours */
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
	cr_assert(wb_of(&H, 7) != NULL);
	h_transfer(&H, 8, 2, A_USD, 5);
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_WRITEBACKS_OK), 0));
}

static void
collect(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct h *h = ctx;
	cr_assert(eq(int, dest, WIRE_DEST_PERSIST));
	cr_assert(lt(u32, h->n, H_OUT_MAX));
	memcpy(h->out[h->n].msg, msg, msg->length);
	h->out[h->n++].dest = dest;
}

/* Goal: a snapshot taken while write-backs are in flight (and other users wait on the dirty
 * list) restores to the same state hash; the restored member rebuilds the persister's queue
 * with the write-back in it, applies the answer and the next pass exactly as the original. */
Test(oms_writeback, snapshot_mid_writeback)
{
	struct oms_limits l;
	wb_limits(&l);
	l.writeback_max = 2;
	h_init(&G, &l);
	for (uint64_t u = 1; u <= 5; u++)
		h_user(&H, u, 1000, 100000);
	for (uint64_t u = 1; u <= 5; u++)
		h_transfer(&H, u, 1, A_USD, (int64_t)u);
	pass(&H); /* 1..5 written, writeback_max 64 */
	uint64_t e2 = wb_of(&H, 2)->epoch;
	h_transfer(&H, 2, 2, A_USD, 1); /* in flight and dirty again */
	h_transfer(&H, 3, 2, A_USD, 1);
	size_t len = oms_snapshot_size(H.oms);
	void *buf = malloc(len);
	cr_assert(eq(sz, oms_snapshot(H.oms, buf, len), len));
	/* G has other limits: refused. */
	cr_assert(eq(int, oms_restore(G.oms, buf, len), -EINVAL));
	h_fini(&G);
	h_init(&G, &H.lim);
	cr_assert(eq(int, oms_restore(G.oms, buf, len), 0));
	G.now = H.now;
	cr_assert(eq(u64, oms_state_hash(G.oms), oms_state_hash(H.oms)));
	cr_assert(eq(int, oms_check_invariants(G.oms), 0));
	cr_assert(eq(u32, G.oms->c.wb_inflight, 5));
	/* The new leader's persister queue: every write-back in flight, under its own epoch. */
	G.n = 0;
	cr_assert(eq(u32, oms_persist_foreach(G.oms, collect, &G), 5));
	const struct wire_begin_dehydrate *b = wb_of(&G, 2);
	cr_assert(b != NULL);
	cr_assert(eq(u64, b->epoch, e2));
	cr_assert(eq(i64, state_total(&b->state, A_USD), 100003)); /* the current state */
	/* Same answers, same passes: same egress and state. */
	for (uint64_t u = 1; u <= 5; u++) {
		uint64_t e = oms_actor_find(H.oms, u)->flush_epoch;
		h_flush(&H, u, e, WIRE_FLUSH_OK, 2);
		h_flush(&G, u, e, WIRE_FLUSH_OK, 2);
	}
	pass(&H);
	pass(&G);
	cr_assert(eq(u32, H.n, G.n));
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 2)); /* 2 and 3 again */
	for (uint32_t i = 0; i < H.n; i++)
		cr_assert(eq(int, memcmp(H.out[i].msg, G.out[i].msg,
					 ((const struct wire_msg_hdr *)(const void *)H.out[i].msg)->length),
			     0));
	cr_assert(eq(u64, oms_state_hash(G.oms), oms_state_hash(H.oms)));
	free(buf);
	h_fini(&G);
}

/* Goal: the versions chain: an eviction after a write-back expects the version the write-back
 * produced, under a newer epoch; an eviction waits while a write-back is unanswered; and a
 * late duplicate answer of an old write-back is stale (it neither ends the newer flush nor
 * drops the actor). */
Test(oms_writeback, writeback_then_evict_right_version)
{
	h_user(&H, 7, 1000, 100000);
	h_transfer(&H, 7, 1, A_USD, 5);
	pass(&H);
	uint64_t e1 = wb_of(&H, 7)->epoch;
	/* Idle past TTL with the write-back unanswered: no eviction starts. */
	for (int i = 0; i < 11; i++)
		pass(&H);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_DEHYDRATES), 0));
	h_flush(&H, 7, e1, WIRE_FLUSH_OK, 2);
	/* The write-back's time, BEGIN_DEHYDRATE to its answer: twelve passes. */
	const struct hist *wbh = oms_writeback_hist(H.oms), *evh = oms_evict_hist(H.oms);
	cr_assert(eq(u64, wbh->count, 1));
	cr_assert(eq(u64, wbh->max, 11 * SEC));
	/* The sweep re-stamped it (not evictable then): evicted one TTL later, not written. */
	const struct wire_begin_dehydrate *b = NULL;
	for (int i = 0; i < 11 && b == NULL; i++) {
		pass(&H);
		b = wb_of(&H, 7);
	}
	cr_assert(b != NULL);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_FLUSHING)); /* the eviction */
	cr_assert(eq(u64, h_ctr(&H, OMS_C_WRITEBACKS), 1));
	cr_assert(eq(u64, b->state.version, 2));
	cr_assert(gt(u64, b->epoch, e1));
	uint64_t e2 = b->epoch;
	h_flush(&H, 7, e1, WIRE_FLUSH_OK, 2); /* a re-driven duplicate of the write-back */
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_FLUSHING));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_FLUSH_STALE), 1));
	cr_assert(eq(u64, evh->count, 0)); /* not before its own answer */
	H.now += SEC / 4;
	h_flush(&H, 7, e2, WIRE_FLUSH_OK, 3);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_ABSENT));
	cr_assert(eq(u64, evh->count, 1));
	cr_assert(eq(u64, evh->max, SEC / 4));
	cr_assert(eq(u64, wbh->count, 1)); /* an eviction's flush is not a write-back */
	const struct wire_release_claim *r = h_get(&H, WIRE_RELEASE_CLAIM, 0);
	cr_assert(r != NULL);
	cr_assert(eq(u64, r->epoch, e2));
}

/* Goal: an eviction cancelled by activity leaves the user dirty after its stale answer: the
 * answer covers only the state the eviction carried, so the change that cancelled it is
 * written back by the next pass. */
Test(oms_writeback, cancelled_eviction_then_writeback)
{
	h_user(&H, 7, 1000, 100000);
	for (int i = 0; i < 10; i++)
		pass(&H);
	const struct wire_begin_dehydrate *b = wb_of(&H, 7);
	cr_assert(b != NULL);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_FLUSHING));
	uint64_t e1 = b->epoch;
	h_transfer(&H, 7, 1, A_USD, 5); /* cancels the eviction */
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0)); /* its answer is not in */
	h_flush(&H, 7, e1, WIRE_FLUSH_OK, 2);
	pass(&H);
	b = wb_of(&H, 7);
	cr_assert(b != NULL);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u64, b->state.version, 2));
	cr_assert(eq(i64, state_total(&b->state, A_USD), 100005));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_WRITEBACKS), 1));
}

/* Goal: with writeback_interval_ns 0 nothing is written back; the limits refuse a pass
 * cadence with writeback_max 0. */
Test(oms_writeback, off_and_limits)
{
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	cr_assert(eq(u64, l.writeback_interval_ns, 0));
	h_init(&H, &l);
	h_std_symbols(&H);
	h_user(&H, 7, 1000, 100000);
	h_transfer(&H, 7, 1, A_USD, 5);
	pass(&H);
	pass(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	l.writeback_interval_ns = SEC;
	l.writeback_max = 0;
	cr_assert(eq(int, oms_limits_check(&l), -EINVAL));
}

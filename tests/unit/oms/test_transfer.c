/* SPDX-License-Identifier: Apache-2.0 */
/* Transfers idempotent for their lifetime (docs/oms.md, "Transfers for their lifetime"): the
 * original answer repeated (with its total), unflushed outcomes pinned in the window, the
 * durable lookup for ids that left it, duplicates parked behind an outstanding lookup, and
 * lookups in the snapshot and the persister's re-drive. */
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

TestSuite(oms_transfer, .init = setup, .fini = teardown);

static const struct wire_admin_reply *
reply(uint32_t nth)
{
	const struct wire_admin_reply *r = h_get(&H, WIRE_ADMIN_REPLY, nth);
	cr_assert(r != NULL, "admin reply %u missing", nth);
	return r;
}

static uint32_t
pinned(uint64_t user)
{
	return oms_dedup_pinned(H.oms, oms_actor_find(H.oms, user));
}

/* A hydration from a row that says transfers up to xmax were recorded in an earlier life. */
static void
hydrate_with_history(uint64_t user, uint64_t xmax, int64_t usd)
{
	struct wire_user_state row = {.user = user, .version = 3, .xfer_id_max = xmax,
				      .balance_count = 1,
				      .balances[0] = {.asset = A_USD, .total = usd}};
	h_hydrate_state(&H, &row);
	cr_assert(eq(u32, h_status(&H, user), OMS_USER_RESIDENT));
}

static void
found(const struct wire_transfer_lookup *l, uint8_t status, uint16_t reason, uint32_t asset,
      int64_t amount, int64_t total)
{
	struct wire_transfer_found f;
	memset(&f, 0, sizeof(f));
	f.hdr.type = WIRE_TRANSFER_FOUND;
	f.hdr.length = sizeof(f);
	f.user = l->user;
	f.transfer_id = l->transfer_id;
	f.epoch = l->epoch;
	f.status = status;
	if (status == WIRE_XFER_FOUND)
		f.rec = (struct wire_recent){ .id = l->transfer_id, .user_seq = (uint64_t)total,
					      .reason = reason, .kind = WIRE_RECENT_TRANSFER,
					      .asset = asset, .amount = amount };
	h_apply(&H, &f);
}

/* Remembered order outcomes that push older entries out of the window (OFF_TICK: refused by
 * static config, remembered). */
static void
orders_off_tick(uint64_t user, uint64_t cl_first, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		h_limit(&H, user, cl_first + i, S_BTCUSD, WIRE_SIDE_BUY, 15, 10);
		cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_OFF_TICK));
	}
}

/* Goal (issue 15): a duplicate inside the window repeats the original answer, total included
 * (it answered "ok, total 0"); other content under the same id is refused. */
Test(oms_transfer, duplicate_repeats_the_original_total)
{
	h_user(&H, 7, 0, 1000);
	h_transfer(&H, 7, 1, A_USD, 5);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_NONE));
	cr_assert(eq(u64, reply(0)->value, 1005));
	h_transfer(&H, 7, 2, A_USD, 10);
	h_transfer(&H, 7, 1, A_USD, 5);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_NONE));
	cr_assert(eq(u64, reply(0)->value, 1005));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1015));
	h_transfer(&H, 7, 1, A_USD, 6);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_DUPLICATE_REQUEST));
	h_transfer(&H, 7, 3, A_USD, -5000); /* refused: the refusal and the total it saw */
	h_transfer(&H, 7, 3, A_USD, -5000);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_INSUFFICIENT_FUNDS));
	cr_assert(eq(u64, reply(0)->value, 1015));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_XFER_LOOKUPS), 0)); /* ids above every earlier one */
}

/* Goal: an applied transfer's outcome is pinned in the window until a flush that carries it
 * is answered OK: newer requests push order outcomes out, never it; the flush carries it
 * even when it is the oldest entry; once flushed it may leave, and a re-send is then looked
 * up (not applied), a repeat waits behind that lookup, and FOUND answers both with the
 * original outcome.
 * Method: deposit, 40 remembered order NAKs (window 16), re-send; TTL flush, activity
 * cancels it, the stale OK unpins; 20 more NAKs; re-send twice; answer FOUND. */
Test(oms_transfer, pinned_until_flushed_then_looked_up)
{
	h_user(&H, 7, 0, 1000);
	h_transfer(&H, 7, 100, A_USD, 5);
	cr_assert(eq(u32, pinned(7), 1));
	orders_off_tick(7, 1, 40);
	h_transfer(&H, 7, 100, A_USD, 5);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_NONE));
	cr_assert(eq(u64, reply(0)->value, 1005));
	cr_assert(eq(u32, h_count(&H, WIRE_TRANSFER_LOOKUP), 0));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1005));

	H.now += 11 * SEC;
	h_tick(&H);
	const struct wire_begin_dehydrate *b = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(b != NULL);
	uint64_t e = b->epoch;
	cr_assert(eq(u32, b->state.recent_count, WIRE_RECENT_MAX));
	cr_assert(eq(u64, b->state.recent[0].id, 100)); /* the oldest, carried first */
	cr_assert(eq(u8, b->state.recent[0].kind, WIRE_RECENT_TRANSFER));
	cr_assert(eq(u32, b->state.recent[0].asset, A_USD));
	cr_assert(eq(i64, b->state.recent[0].amount, 5));
	cr_assert(eq(u64, b->state.recent[0].user_seq, 1005));
	cr_assert(eq(u64, b->state.recent[1].id, 26)); /* then the newest 15 orders */
	cr_assert(eq(u64, b->state.xfer_id_max, 100));
	orders_off_tick(7, 41, 1); /* activity: the eviction is cancelled, the write goes on */
	cr_assert(eq(u32, pinned(7), 1));
	h_flush(&H, 7, e, WIRE_FLUSH_OK, 2);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u32, pinned(7), 0));

	orders_off_tick(7, 42, 20);
	h_transfer(&H, 7, 100, A_USD, 5);
	cr_assert(eq(u32, h_count(&H, WIRE_ADMIN_REPLY), 0)); /* waits */
	const struct wire_transfer_lookup *l = h_get(&H, WIRE_TRANSFER_LOOKUP, 0);
	cr_assert(l != NULL);
	cr_assert(eq(int, h_dest(&H, WIRE_TRANSFER_LOOKUP, 0), WIRE_DEST_PERSIST));
	struct wire_transfer_lookup lk = *l;
	h_transfer(&H, 7, 100, A_USD, 5); /* a repeat parks behind the lookup */
	cr_assert(eq(u32, h_count(&H, WIRE_TRANSFER_LOOKUP), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_ADMIN_REPLY), 0));
	found(&lk, WIRE_XFER_FOUND, WIRE_REASON_NONE, A_USD, 5, 1005);
	cr_assert(eq(u32, h_count(&H, WIRE_ADMIN_REPLY), 2));
	for (uint32_t i = 0; i < 2; i++) {
		cr_assert(eq(u16, reply(i)->reason, WIRE_REASON_NONE));
		cr_assert(eq(u64, reply(i)->value, 1005));
	}
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1005));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_XFER_FOUND), 1));
	cr_assert(eq(u32, oms_parked_count(H.oms), 0));
}

/* Goal: an id at or below what the row says was recorded, and not in the window, is looked
 * up; NOT_FOUND applies it once (a repeat that waited is answered from the window), and a
 * late repeat of that answer settles nothing. An ERROR answer refuses with DB_ERROR and
 * applies nothing. */
Test(oms_transfer, not_found_applies_once)
{
	hydrate_with_history(9, 1000, 50);
	h_transfer(&H, 9, 500, A_USD, 7);
	struct wire_transfer_lookup lk = *(const struct wire_transfer_lookup *)h_get(
		&H, WIRE_TRANSFER_LOOKUP, 0);
	h_transfer(&H, 9, 500, A_USD, 7);
	found(&lk, WIRE_XFER_NOT_FOUND, 0, 0, 0, 0);
	cr_assert(eq(u32, h_count(&H, WIRE_ADMIN_REPLY), 2));
	cr_assert(eq(u64, reply(0)->value, 57));
	cr_assert(eq(u64, reply(1)->value, 57));
	cr_assert(eq(i64, h_total(&H, 9, A_USD), 57));
	found(&lk, WIRE_XFER_NOT_FOUND, 0, 0, 0, 0); /* a re-driven lookup's second answer */
	cr_assert(eq(u32, h_count(&H, WIRE_ADMIN_REPLY), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_XFER_LOOKUP_STALE), 1));
	cr_assert(eq(i64, h_total(&H, 9, A_USD), 57));

	h_transfer(&H, 9, 600, A_USD, 1);
	lk = *(const struct wire_transfer_lookup *)h_get(&H, WIRE_TRANSFER_LOOKUP, 0);
	found(&lk, WIRE_XFER_ERROR, 0, 0, 0, 0);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_DB_ERROR));
	cr_assert(eq(i64, h_total(&H, 9, A_USD), 57));
	h_transfer(&H, 9, 1001, A_USD, 1); /* above the recorded max: applied at once */
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_NONE));
	cr_assert(eq(i64, h_total(&H, 9, A_USD), 58));
}

/* Goal: a user cannot hold more unflushed transfer outcomes than a flush carries: when the
 * pins fill up a flush is asked for (flat user), and while they are full a new transfer is
 * refused BACKPRESSURE with nothing applied; the flush's OK frees them. */
Test(oms_transfer, pins_full_flush_then_refuse)
{
	uint32_t max = oms_xfer_pinned_max(&H.oms->c.limits);
	cr_assert(eq(u32, max, 8));
	h_user(&H, 7, 0, 1000);
	for (uint32_t i = 1; i < max; i++)
		h_transfer(&H, 7, i, A_USD, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	h_transfer(&H, 7, max, A_USD, 1);
	const struct wire_begin_dehydrate *b = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(b != NULL, "the full pins ask for a flush");
	uint64_t e = b->epoch;
	h_transfer(&H, 7, 50, A_USD, 1);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_BACKPRESSURE));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1000 + max));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_XFER_PIN_FULL), 1));
	h_flush(&H, 7, e, WIRE_FLUSH_OK, 2); /* activity cancelled the eviction: stays */
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_RESIDENT));
	cr_assert(eq(u32, pinned(7), 0));
	h_transfer(&H, 7, 50, A_USD, 1);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_NONE));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1001 + max));
}

/* Goal: a user with capital committed cannot be flushed, so with the pins full transfers
 * are refused (never applied unpinned) until a flush is possible; an error answer to a flush
 * frees nothing. */
Test(oms_transfer, pins_full_not_flat_refuses)
{
	uint32_t max = oms_xfer_pinned_max(&H.oms->c.limits);
	h_user(&H, 7, 0, 100000);
	h_limit(&H, 7, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1); /* a saga in flight: not flat */
	for (uint32_t i = 1; i <= max; i++)
		h_transfer(&H, 7, i, A_USD, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 0));
	h_transfer(&H, 7, max + 1, A_USD, 1);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_BACKPRESSURE));
	h_flush(&H, 7, 999, WIRE_FLUSH_ERROR, 2);
	cr_assert(eq(u32, pinned(7), max));
	cr_assert(eq(int, oms_check_invariants(H.oms), 0));
}

static uint32_t lookups_seen;
static struct wire_transfer_lookup lookup_seen;

static void
lookup_fn(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	cr_assert(eq(int, dest, WIRE_DEST_PERSIST));
	if (msg->type == WIRE_TRANSFER_LOOKUP) {
		lookups_seen++;
		memcpy(&lookup_seen, msg, sizeof(lookup_seen));
	}
}

/* Goal: outstanding lookups and the transfers parked behind them are state: a member
 * restored from a snapshot holds them byte for byte (same hash), a new leader re-sends each
 * lookup once (oms_persist_foreach, with its epoch), and its answer settles them there. */
Test(oms_transfer, lookup_in_snapshot_and_redrive)
{
	hydrate_with_history(9, 1000, 50);
	h_transfer(&H, 9, 500, A_USD, 7);
	h_transfer(&H, 9, 500, A_USD, 7);
	h_transfer(&H, 9, 501, A_USD, -1);
	cr_assert(eq(u32, oms_parked_count(H.oms), 3));
	size_t cap = oms_snapshot_size(H.oms);
	void *buf = malloc(cap);
	size_t len = oms_snapshot(H.oms, buf, cap);
	cr_assert(gt(sz, len, 0));
	struct h R;
	h_init(&R, &H.lim);
	cr_assert(eq(int, oms_restore(R.oms, buf, len), 0));
	cr_assert(eq(u64, oms_state_hash(R.oms), oms_state_hash(H.oms)));
	lookups_seen = 0;
	cr_assert(eq(u32, oms_persist_foreach(R.oms, lookup_fn, NULL), 2));
	cr_assert(eq(u32, lookups_seen, 2));
	cr_assert(eq(u64, lookup_seen.transfer_id, 501));
	struct wire_transfer_found f;
	memset(&f, 0, sizeof(f));
	f.hdr.type = WIRE_TRANSFER_FOUND;
	f.hdr.length = sizeof(f);
	f.user = 9;
	f.transfer_id = 501;
	f.epoch = lookup_seen.epoch;
	f.status = WIRE_XFER_FOUND;
	f.rec = (struct wire_recent){ .id = 501, .user_seq = 43, .kind = WIRE_RECENT_TRANSFER,
				      .asset = A_USD, .amount = -1 };
	R.now = H.now;
	h_apply(&R, &f);
	const struct wire_admin_reply *r = h_get(&R, WIRE_ADMIN_REPLY, 0);
	cr_assert(r != NULL);
	cr_assert(eq(u64, r->req_id, 501));
	cr_assert(eq(u64, r->value, 43));
	cr_assert(eq(i64, h_total(&R, 9, A_USD), 50)); /* found: not applied again */
	cr_assert(eq(u32, oms_parked_count(R.oms), 2));
	/* A corrupt lookup list is refused. */
	((struct oms *)H.oms)->c.lookup_count++;
	len = oms_snapshot(H.oms, buf, cap);
	cr_assert(eq(int, oms_restore(R.oms, buf, len), -EINVAL));
	H.oms->c.lookup_count--;
	free(buf);
	h_fini(&R);
}

/* Goal: a NOT_FOUND answer speaks for the incarnation that asked: if the user was dropped
 * meanwhile, the waiting transfer is not applied on its word but hydrates and looks again,
 * also when the user is resident again (a new incarnation) by the time the answer lands. */
Test(oms_transfer, answer_after_drop_and_return_looks_again)
{
	hydrate_with_history(9, 1000, 50);
	h_transfer(&H, 9, 500, A_USD, 7);
	struct wire_transfer_lookup lk = *(const struct wire_transfer_lookup *)h_get(
		&H, WIRE_TRANSFER_LOOKUP, 0);
	struct wire_user_admin ua;
	memset(&ua, 0, sizeof(ua));
	ua.hdr.type = WIRE_USER_ADMIN;
	ua.hdr.length = sizeof(ua);
	ua.user = 9;
	ua.op = 1;
	h_apply(&H, &ua);
	const struct wire_begin_dehydrate *b = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(b != NULL);
	h_flush(&H, 9, b->epoch, WIRE_FLUSH_OK, 4);
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_ABSENT));
	hydrate_with_history(9, 1000, 50); /* back (hydrate-ahead) before the answer */
	found(&lk, WIRE_XFER_NOT_FOUND, 0, 0, 0, 0);
	cr_assert(eq(u32, h_count(&H, WIRE_ADMIN_REPLY), 0));
	cr_assert(eq(i64, h_total(&H, 9, A_USD), 50));
	const struct wire_transfer_lookup *again = h_get(&H, WIRE_TRANSFER_LOOKUP, 0);
	cr_assert(again != NULL, "looks again for the new incarnation");
	cr_assert(gt(u64, again->epoch, lk.epoch));
}

Test(oms_transfer, answer_after_drop_looks_again)
{
	hydrate_with_history(9, 1000, 50);
	h_transfer(&H, 9, 500, A_USD, 7);
	struct wire_transfer_lookup lk = *(const struct wire_transfer_lookup *)h_get(
		&H, WIRE_TRANSFER_LOOKUP, 0);
	struct wire_user_admin ua;
	memset(&ua, 0, sizeof(ua));
	ua.hdr.type = WIRE_USER_ADMIN;
	ua.hdr.length = sizeof(ua);
	ua.user = 9;
	ua.op = 1;
	h_apply(&H, &ua);
	const struct wire_begin_dehydrate *b = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(b != NULL);
	h_flush(&H, 9, b->epoch, WIRE_FLUSH_OK, 4);
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_ABSENT));
	found(&lk, WIRE_XFER_NOT_FOUND, 0, 0, 0, 0);
	cr_assert(eq(u32, h_count(&H, WIRE_ADMIN_REPLY), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
	hydrate_with_history(9, 1000, 50);
	lk = *(const struct wire_transfer_lookup *)h_get(&H, WIRE_TRANSFER_LOOKUP, 0);
	found(&lk, WIRE_XFER_FOUND, WIRE_REASON_NONE, A_USD, 7, 57);
	cr_assert(eq(u64, reply(0)->value, 57));
	cr_assert(eq(i64, h_total(&H, 9, A_USD), 50));
}

/* Goal: transfer outcomes arrive with the state (asset, amount, total) and are answered
 * whole after re-hydration; xfer_id_max comes back too. */
Test(oms_transfer, outcomes_travel_with_the_state)
{
	h_user(&H, 7, 0, 1000);
	h_transfer(&H, 7, 42, A_USD, 5);
	H.now += 11 * SEC;
	h_tick(&H);
	const struct wire_begin_dehydrate *b = h_get(&H, WIRE_BEGIN_DEHYDRATE, 0);
	cr_assert(b != NULL);
	struct wire_hydrate_user hu;
	memset(&hu, 0, sizeof(hu));
	hu.hdr.type = WIRE_HYDRATE_USER;
	hu.hdr.length = sizeof(hu);
	hu.epoch = b->epoch + 10;
	hu.status = WIRE_HYD_OK;
	hu.state = b->state;
	h_flush(&H, 7, b->epoch, WIRE_FLUSH_OK, 2);
	cr_assert(eq(u32, h_status(&H, 7), OMS_USER_ABSENT));
	h_apply(&H, &hu);
	cr_assert(eq(u32, pinned(7), 0)); /* from the row: durable */
	h_transfer(&H, 7, 42, A_USD, 5);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_NONE));
	cr_assert(eq(u64, reply(0)->value, 1005));
	h_transfer(&H, 7, 42, A_USD, 4);
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_DUPLICATE_REQUEST));
	h_transfer(&H, 7, 41, A_USD, 4); /* below the max, not in the window: looked up */
	cr_assert(eq(u32, h_count(&H, WIRE_TRANSFER_LOOKUP), 1));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1005));
}

/* Goal: an order outcome the window forgets raises the user's clientOrderId floor even when
 * a pinned transfer sits before it, so a late re-send of that order is refused, never
 * executed again. The floor was read from the slot after the pinned entries had been
 * shifted over the victim: it took the transfer's entry, stayed where it was, and the
 * re-send became a second order (paced3.sh CHECK=1 at 20k requests/s: "2 orderIds, filled
 * 8 of 4"; the deposits of omsload's users are pinned until a flush).
 * Method: a deposit (pinned), then as many admitted orders as the window holds (16): the
 * last pushes the first order out. Re-send the first: STALE_REQUEST, no SUBMIT, nothing
 * more reserved, and the floor is its id; the transfer is still pinned and answered. */
Test(oms_transfer, forgotten_order_behind_pinned_transfer_is_stale)
{
	h_user(&H, 7, 0, 1000);
	h_transfer(&H, 7, 100, A_USD, 5);
	cr_assert(eq(u32, pinned(7), 1));
	uint32_t w = H.lim.dedup_per_user;
	for (uint64_t i = 0; i < w; i++)
		h_limit(&H, 7, 1000 + i, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u64, h_ctr(&H, OMS_C_SUBMITS), w));
	cr_assert(eq(u64, oms_actor_find(H.oms, 7)->cl_ord_floor, 1000));
	int64_t r = h_reserved(&H, 7, A_USD);
	h_clear(&H);
	h_limit(&H, 7, 1000, S_ETHUSD, WIRE_SIDE_BUY, 10, 1); /* executed, forgotten */
	cr_assert(eq(u16, h_last_nak(&H), WIRE_REASON_STALE_REQUEST));
	cr_assert(eq(u32, h_count(&H, WIRE_SUBMIT), 0));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_SUBMITS), w));
	cr_assert(eq(i64, h_reserved(&H, 7, A_USD), r));
	cr_assert(eq(u32, pinned(7), 1));
	h_transfer(&H, 7, 100, A_USD, 5); /* the pinned outcome is still answered */
	cr_assert(eq(u16, reply(0)->reason, WIRE_REASON_NONE));
	cr_assert(eq(i64, h_total(&H, 7, A_USD), 1005));
}

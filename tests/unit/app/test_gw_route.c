/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's re-routing tables (app/app_gw_route.c): owner overrides learnt from
 * NOT_OWNER live for one routing epoch; requests in flight are followed at most hops_max
 * forwards (no ping-pong between shards naming each other); answers end them; both tables
 * are bounded caches.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "app/app_gw_route.h"

static struct app_gwr g;
static void *mem;

static void
setup(void)
{
	mem = malloc(app_gwr_footprint(64, 64));
	cr_assert(mem != NULL);
	cr_assert(app_gwr_init(&g, mem, 64, 64, 4) == 0);
	(void)app_gwr_epoch(&g, 1);
}

static void
teardown(void)
{
	free(mem);
}

static struct wire_new_order
order(uint64_t user, uint64_t cl)
{
	struct wire_new_order m;
	memset(&m, 0, sizeof(m));
	m.hdr.type = WIRE_NEW_ORDER;
	m.hdr.length = sizeof(m);
	m.user = user;
	m.cl_ord_id = cl;
	m.px = 100;
	m.qty = 1;
	return m;
}

/* Goal: an override is used until the routing epoch changes, then dropped.
 * Method: learn 42 -> 3 at epoch 1, look it up, move to epoch 2: gone; learn again. */
Test(app_gw_route, override_until_epoch_changes, .init = setup, .fini = teardown)
{
	uint16_t sh = 0;
	cr_assert_eq(app_gwr_owner(&g, 42, &sh), -ENOENT);
	app_gwr_learn(&g, 42, 3);
	cr_assert_eq(app_gwr_owner(&g, 42, &sh), 0);
	cr_assert_eq(sh, 3);
	cr_assert_not(app_gwr_epoch(&g, 1)); /* same epoch: kept */
	cr_assert_eq(app_gwr_owner(&g, 42, &sh), 0);
	app_gwr_learn(&g, 42, 5); /* a newer NOT_OWNER wins */
	cr_assert_eq(app_gwr_owner(&g, 42, &sh), 0);
	cr_assert_eq(sh, 5);
	cr_assert(app_gwr_epoch(&g, 2));
	cr_assert_eq(app_gwr_owner(&g, 42, &sh), -ENOENT);
	app_gwr_learn(&g, 42, 3);
	cr_assert_eq(app_gwr_owner(&g, 42, &sh), 0);
	app_gwr_forget(&g, 42);
	cr_assert_eq(app_gwr_owner(&g, 42, &sh), -ENOENT);
	app_gwr_learn(&g, 0, 3); /* user 0 is never a user */
	cr_assert_eq(app_gwr_owner(&g, 0, &sh), -ENOENT);
}

/* Goal: the override table is bounded and keeps the newest. Method: learn 10000 users into
 * a table of 64: the count never exceeds 64 and the last one learnt is there. */
Test(app_gw_route, overrides_bounded, .init = setup, .fini = teardown)
{
	uint16_t sh;
	for (uint64_t u = 1; u <= 10000; u++)
		app_gwr_learn(&g, u, (uint16_t)(u % 7));
	cr_assert_leq(g.ovr_count, 64);
	cr_assert_eq(app_gwr_owner(&g, 10000, &sh), 0);
	cr_assert_eq(sh, 10000 % 7);
}

/* Goal: a request is followed to the named shard, and two shards naming each other stop
 * after hops_max forwards (ping-pong) with a give-up.
 * Method: put (hops 1, shard 1); refused to 3, to 1, to 3: reroutes (hops 4); the next
 * refusal gives up and forgets it; a refusal of an unknown request passes. */
Test(app_gw_route, bounded_hops, .init = setup, .fini = teardown)
{
	struct wire_new_order m = order(42, 9);
	struct app_gwr_req *r = app_gwr_req_put(&g, &m.hdr, 1);
	cr_assert(r != NULL);
	cr_assert_eq(r->hops, 1);
	uint16_t to[3] = { 3, 1, 3 };
	for (int i = 0; i < 3; i++) {
		r = app_gwr_req_find(&g, 42, 9);
		cr_assert(r != NULL);
		cr_assert_eq(app_gwr_refused(&g, r, to[i]), APP_GWR_REROUTE);
		cr_assert_eq(r->shard, to[i]);
		cr_assert_eq(r->len, sizeof(m));
		cr_assert(memcmp(r->msg, &m, sizeof(m)) == 0);
	}
	cr_assert_eq(r->hops, 4);
	cr_assert_eq(app_gwr_refused(&g, r, 1), APP_GWR_GIVEUP);
	cr_assert_null(app_gwr_req_find(&g, 42, 9));
	cr_assert_eq(app_gwr_refused(&g, NULL, 1), APP_GWR_PASS);
}

/* Goal: an answer ends a request; a client's retransmit starts it over.
 * Method: put, refuse once (hops 2), put again: hops 1; done: not found. */
Test(app_gw_route, answer_and_retransmit, .init = setup, .fini = teardown)
{
	struct wire_new_order m = order(42, 9);
	struct app_gwr_req *r = app_gwr_req_put(&g, &m.hdr, 1);
	cr_assert_eq(app_gwr_refused(&g, r, 3), APP_GWR_REROUTE);
	cr_assert_eq(r->hops, 2);
	r = app_gwr_req_put(&g, &m.hdr, 3);
	cr_assert_eq(r->hops, 1);
	cr_assert_eq(r, app_gwr_req_find(&g, 42, 9)); /* one entry, not two */
	app_gwr_req_done(r);
	cr_assert_null(app_gwr_req_find(&g, 42, 9));
	cr_assert_eq(app_gwr_refused(&g, app_gwr_req_find(&g, 42, 9), 3), APP_GWR_PASS);
}

/* Goal: what cannot be kept is not: user 0, a message longer than the slot.
 * Method: put both: NULL. And a full table overwrites, never grows: 10000 requests into 64
 * slots, the newest is found. */
Test(app_gw_route, requests_bounded, .init = setup, .fini = teardown)
{
	struct wire_new_order m = order(0, 1);
	cr_assert_null(app_gwr_req_put(&g, &m.hdr, 1));
	uint8_t big[APP_GWR_MSG_MAX + 8];
	memset(big, 0, sizeof(big));
	struct wire_msg_hdr *h = (void *)big;
	h->length = sizeof(big);
	big[sizeof(*h)] = 1; /* user 1 */
	cr_assert_null(app_gwr_req_put(&g, h, 1));
	for (uint64_t cl = 1; cl <= 10000; cl++) {
		m = order(7, cl);
		cr_assert_not_null(app_gwr_req_put(&g, &m.hdr, 1));
	}
	cr_assert_not_null(app_gwr_req_find(&g, 7, 10000));
	uint32_t held = 0;
	for (uint64_t cl = 1; cl <= 10000; cl++)
		held += app_gwr_req_find(&g, 7, cl) != NULL;
	cr_assert_leq(held, 64);
}

Test(app_gw_route, init_refuses_zero)
{
	char buf[8];
	cr_assert_eq(app_gwr_footprint(0, 1), 0);
	cr_assert_eq(app_gwr_init(&g, buf, 1, 1, 0), -EINVAL);
	cr_assert_eq(app_gwr_init(&g, buf, 0, 1, 4), -EINVAL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Routing authority: NOT_OWNER with the owner, resident users served until drained, the
 * drain after a config change (capped, flat only), whale pins, stale epochs. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/hrw.h"
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

TestSuite(oms_route, .init = setup, .fini = teardown);

static void
route(uint64_t epoch, const uint16_t *active, uint32_t na, const uint16_t *recv, uint32_t nr,
      uint64_t pin_user, uint16_t pin_shard)
{
	struct wire_routing_config m;
	memset(&m, 0, sizeof(m));
	m.hdr.type = WIRE_ROUTING_CONFIG;
	m.hdr.length = sizeof(m);
	m.epoch = epoch;
	for (uint32_t i = 0; i < na; i++)
		m.shards[m.shard_count++] = (struct wire_route_shard){ active[i], WIRE_SHARD_ACTIVE, 0 };
	for (uint32_t i = 0; i < nr; i++)
		m.shards[m.shard_count++] =
			(struct wire_route_shard){ recv[i], WIRE_SHARD_RECEIVING, 0 };
	if (pin_user != 0) {
		m.pins[0].user = pin_user;
		m.pins[0].shard = pin_shard;
		m.pin_count = 1;
	}
	h_apply(&H, &m);
}

/* A user HRW places on shard `want` among shards[]. */
static uint64_t
user_on(const uint16_t *shards, uint32_t n, uint16_t want, uint64_t from)
{
	for (uint64_t u = from;; u++)
		if (hrw_pick(u, shards, n) == want)
			return u;
}

/* Goal: a cold user owned elsewhere is refused NOT_OWNER naming the owner, with our epoch. */
Test(oms_route, not_owner_names_owner)
{
	uint16_t act[] = { 0, 1, 2 };
	route(5, act, 3, NULL, 0, 0, 0);
	uint64_t u = user_on(act, 3, 2, 100);
	h_limit(&H, u, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	const struct wire_nak *n = h_get(&H, WIRE_NAK, 0);
	cr_assert(n != NULL);
	cr_assert(eq(u16, n->reason, WIRE_REASON_NOT_OWNER));
	cr_assert(eq(u16, n->owner_shard, 2));
	cr_assert(eq(u64, n->route_epoch, 5));
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 0));
	uint64_t mine = user_on(act, 3, 0, 100);
	h_limit(&H, mine, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u32, h_count(&H, WIRE_HYDRATE_REQUEST), 1));
}

/* Goal: receiving shards get no new users; a whale pin overrides HRW. */
Test(oms_route, receiving_and_pins)
{
	uint16_t act[] = { 0, 1 }, rcv[] = { 2 };
	route(1, act, 2, rcv, 1, 0, 0);
	for (uint64_t u = 1; u < 200; u++)
		cr_assert(oms_owner(H.oms, u) != 2);
	uint64_t u = user_on(act, 2, 1, 1);
	route(2, act, 2, rcv, 1, u, 0);
	cr_assert(eq(u16, oms_owner(H.oms, u), 0));
	struct wire_whale_pin p;
	memset(&p, 0, sizeof(p));
	p.hdr.type = WIRE_WHALE_PIN;
	p.hdr.length = sizeof(p);
	p.user = u;
	p.hdr.flags = 1; /* unpin */
	h_apply(&H, &p);
	cr_assert(eq(u16, oms_owner(H.oms, u), 1));
	cr_assert(eq(u64, oms_route_epoch(H.oms), 3));
}

/* Goal: an older or equal epoch is refused; membership and pins move only together. */
Test(oms_route, stale_epoch_refused)
{
	uint16_t act[] = { 0, 1 };
	route(5, act, 2, NULL, 0, 0, 0);
	uint16_t only0[] = { 0 };
	route(5, only0, 1, NULL, 0, 0, 0);
	const struct wire_admin_reply *r = h_get(&H, WIRE_ADMIN_REPLY, 0);
	cr_assert(eq(u16, r->reason, WIRE_REASON_STALE_EPOCH));
	cr_assert(eq(u32, H.oms->c.route.active_count, 2));
	route(6, NULL, 0, only0, 1, 0, 0); /* no active shard: refused */
	r = h_get(&H, WIRE_ADMIN_REPLY, 0);
	cr_assert(eq(u16, r->reason, WIRE_REASON_BAD_REQUEST));
}

/* Goal (docs/fencing.md "Moving a user with open orders"): after a config change a resident
 * user no longer owned is not served here any more: a request is refused NOT_OWNER naming
 * the new owner, and a flat one is flushed at once; the drain flushes the other flat ones,
 * at most drain_max per sweep, and one with a saga in flight once it is over. */
Test(oms_route, drain_non_owned_when_flat)
{
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.drain_max = 2;
	h_init(&H, &l);
	h_std_symbols(&H);
	uint16_t two[] = { 0, 1 };
	uint64_t users[6];
	uint64_t from = 1;
	for (int i = 0; i < 6; i++) {
		users[i] = user_on(two, 2, 1, from);
		from = users[i] + 1;
		h_user(&H, users[i], 1000, 100000);
	}
	h_limit(&H, users[0], 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1); /* a saga in flight */
	struct wire_oid o0 = h_last_ack_oid(&H);
	h_clear(&H);
	route(7, two, 2, NULL, 0, 0, 0);
	h_clear(&H);
	h_limit(&H, users[1], 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
	const struct wire_nak *n = h_get(&H, WIRE_NAK, 0);
	cr_assert(n != NULL, "not served while resident: it is moving");
	cr_assert(eq(u16, n->reason, WIRE_REASON_NOT_OWNER));
	cr_assert(eq(u16, n->owner_shard, 1));
	cr_assert(eq(u32, h_count(&H, WIRE_ACK), 0));
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1), "flat: flushed at once");
	cr_assert(eq(u32, h_status(&H, users[1]), OMS_USER_FLUSHING));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_NOT_OWNER_RESIDENT), 1));
	uint32_t flushed = 0;
	for (int s = 0; s < 6; s++) {
		H.now += SEC;
		h_tick(&H);
		cr_assert(le(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 2));
		flushed += h_count(&H, WIRE_BEGIN_DEHYDRATE);
	}
	cr_assert(eq(u32, flushed, 4));
	cr_assert(eq(u32, h_status(&H, users[0]), OMS_USER_RESIDENT));
	h_ev(&H, o0, S_ETHUSD, WIRE_EV_REJECTED, 0, 0, 0, 0);
	H.now += SEC;
	h_tick(&H);
	cr_assert(eq(u32, h_count(&H, WIRE_BEGIN_DEHYDRATE), 1));
	cr_assert(eq(u32, h_status(&H, users[0]), OMS_USER_FLUSHING));
	cr_assert(eq(u64, h_ctr(&H, OMS_C_DRAINED), 6));
}

/* Goal: a symbol config refused for want of a fee slot leaves no symbol behind.
 * Method: one fee account (USD, taken by the standard symbols); configure ETH/BTC, which needs
 * a second; it is refused CAPACITY, and an order for it is refused UNKNOWN_SYMBOL (a zeroed
 * symbol left in the table would reach the order checks with tick 0). */
Test(oms_symbol, fee_capacity_leaves_no_symbol)
{
	struct h h;
	struct oms_limits l;
	h_limits(&l);
	l.fee_assets_max = 1;
	h_init(&h, &l);
	h_std_symbols(&h);
	struct wire_symbol_config m;
	memset(&m, 0, sizeof(m));
	m.hdr.type = WIRE_SYMBOL_CONFIG;
	m.hdr.length = sizeof(m);
	m.symbol = 77;
	m.base_asset = A_ETH;
	m.quote_asset = A_BTC;
	m.status = WIRE_SYM_TRADING;
	m.tick = 1;
	m.lot = 1;
	m.base_unit = 1;
	h_apply(&h, &m);
	const struct wire_admin_reply *r = h_get(&h, WIRE_ADMIN_REPLY, 0);
	cr_assert(r != NULL);
	cr_assert(eq(u16, r->reason, WIRE_REASON_CAPACITY));
	struct oms_symbol_info si;
	cr_assert(eq(int, oms_symbol_get(h.oms, 77, &si), -ENOENT));
	h_user(&h, 7, 1000000, 1000000);
	h_limit(&h, 7, 1, 77, WIRE_SIDE_BUY, 10, 1);
	cr_assert(eq(u16, h_last_nak(&h), WIRE_REASON_UNKNOWN_SYMBOL));
	h_fini(&h);
}

/* Goal: a user asked to leave while a drain pass runs is drained even when it sits behind the
 * pass's cursor and the pass finds nobody else.
 * Method: drain scans 4 slots per sweep; a routing change starts a pass that wants nobody;
 * after its first step an operator evicts a user in slot 1 that holds an order (so it only
 * gets the evict flag); the pass ends having found none; the order is rejected (the user is
 * flat): the next sweeps must flush it (before the fix the drain had gone idle). */
Test(oms_route, drain_wake_behind_cursor)
{
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.drain_scan_max = 4;
	l.ttl_ns = 1000 * SEC; /* no TTL eviction in this test */
	h_init(&H, &l);
	h_std_symbols(&H);
	uint64_t users[6];
	for (int i = 0; i < 6; i++) {
		users[i] = 100 + (uint64_t)i;
		h_user(&H, users[i], 1000, 100000);
	}
	h_limit(&H, users[1], 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1); /* not flat */
	struct wire_oid o1 = h_last_ack_oid(&H);
	uint16_t only0[] = { 0 };
	route(9, only0, 1, NULL, 0, 0, 0); /* a fresh drain pass; every user stays ours */
	cr_assert(eq(u16, ((const struct wire_admin_reply *)h_get(&H, WIRE_ADMIN_REPLY, 0))->reason,
		     WIRE_REASON_NONE));
	H.now += SEC;
	h_tick(&H); /* the pass has visited slots 0..3 */
	struct wire_user_admin ua;
	memset(&ua, 0, sizeof(ua));
	ua.hdr.type = WIRE_USER_ADMIN;
	ua.hdr.length = sizeof(ua);
	ua.user = users[1];
	ua.op = 1; /* evict */
	h_apply(&H, &ua);
	cr_assert(eq(u32, h_status(&H, users[1]), OMS_USER_RESIDENT));
	for (int s = 0; s < 20; s++) { /* past the end of the pass (64 slots, 4 a sweep) */
		H.now += SEC;
		h_tick(&H);
	}
	h_ev(&H, o1, S_ETHUSD, WIRE_EV_REJECTED, 0, 0, 0, 0);
	uint32_t flushed = 0;
	for (int s = 0; s < 20; s++) {
		H.now += SEC;
		h_tick(&H);
		flushed += h_count(&H, WIRE_BEGIN_DEHYDRATE);
	}
	cr_assert(eq(u32, flushed, 1));
	cr_assert(eq(u32, h_status(&H, users[1]), OMS_USER_FLUSHING));
}

/* Goal: a routing change on a shard with nobody in memory (bootstrap) does not leave the
 * shard "draining" for a full scan of empty slots.
 * Method: no user; apply a routing config; one sweep later the drain is over. */
Test(oms_route, drain_empty_shard_ends_at_once)
{
	h_fini(&H);
	struct oms_limits l;
	h_limits(&l);
	l.drain_scan_max = 4; /* a full scan of the 64 slots would take 16 sweeps */
	h_init(&H, &l);
	h_std_symbols(&H);
	uint16_t only0[] = { 0 };
	route(9, only0, 1, NULL, 0, 0, 0);
	cr_assert(oms_route_draining(H.oms));
	H.now += SEC;
	h_tick(&H);
	cr_assert(not(oms_route_draining(H.oms)));
}

/* The owners oms_owner answers for users 1..n agree with a copy's (oms_route_info_owner). */
static void
copy_agrees(uint64_t n)
{
	struct oms_route_info ri;
	oms_route_get(H.oms, &ri);
	cr_assert(eq(u64, ri.epoch, oms_route_epoch(H.oms)));
	for (uint64_t u = 1; u <= n; u++)
		cr_assert(eq(u16, oms_route_info_owner(&ri, u), oms_owner(H.oms, u)), "user %lu",
			  (unsigned long)u);
}

/* Goal: a gateway routing by a copy of the routing (app_route_pub.c) names the owner the
 * service names, before any routing, with receiving shards, with a pin and after an unpin. */
Test(oms_route, copy_routes_as_the_service)
{
	copy_agrees(50); /* epoch 0: this shard owns everyone */
	uint16_t act[] = { 2, 0, 1 }, rcv[] = { 3 };
	route(4, act, 3, rcv, 1, 0, 0);
	copy_agrees(2000);
	struct oms_route_info ri;
	oms_route_get(H.oms, &ri);
	cr_assert(eq(u16, ri.active_count, 3));
	cr_assert(eq(u16, ri.active[0], 0)); /* sorted, as the service keeps them */
	cr_assert(eq(u16, ri.active[2], 2));
	route(5, act, 3, rcv, 1, 77, 3);
	copy_agrees(2000);
	oms_route_get(H.oms, &ri);
	cr_assert(eq(u16, oms_route_info_owner(&ri, 77), 3));
	struct wire_whale_pin p;
	memset(&p, 0, sizeof(p));
	p.hdr.type = WIRE_WHALE_PIN;
	p.hdr.length = sizeof(p);
	p.user = 77;
	p.hdr.flags = 1; /* unpin */
	h_apply(&H, &p);
	copy_agrees(2000);
}

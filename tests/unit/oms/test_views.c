/* SPDX-License-Identifier: Apache-2.0 */
/* Read-only views for mgmt: routing config (shards with states, pins, epoch, drain), the
 * symbol table with halt and kill state, user kill-switches. */
#include <criterion/criterion.h>
#include <errno.h>
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

TestSuite(oms_views, .init = setup, .fini = teardown);

/* Goal: before any config the view is empty (epoch 0); after one it is the config as applied,
 * and a pin then bumps the epoch and appears. */
Test(oms_views, route_follows_config_and_pins)
{
	struct oms_route_info r;
	oms_route_get(H.oms, &r);
	cr_assert_eq(r.epoch, 0);
	cr_assert_eq(r.shard_count, 0);
	struct wire_routing_config m;
	memset(&m, 0, sizeof(m));
	m.hdr.type = WIRE_ROUTING_CONFIG;
	m.hdr.length = sizeof(m);
	m.epoch = 4;
	m.shards[m.shard_count++] = (struct wire_route_shard){ 0, WIRE_SHARD_ACTIVE, 0 };
	m.shards[m.shard_count++] = (struct wire_route_shard){ 5, WIRE_SHARD_RECEIVING, 0 };
	h_apply(&H, &m);
	oms_route_get(H.oms, &r);
	cr_assert_eq(r.epoch, 4);
	cr_assert_eq(r.shard_count, 2);
	cr_assert_eq(r.shards[1].shard, 5);
	cr_assert_eq(r.shards[1].state, WIRE_SHARD_RECEIVING);
	cr_assert_eq(r.pin_count, 0);
	cr_assert(oms_route_draining(H.oms));

	struct wire_whale_pin p;
	memset(&p, 0, sizeof(p));
	p.hdr.type = WIRE_WHALE_PIN;
	p.hdr.length = sizeof(p);
	p.user = 42;
	p.shard = 5;
	h_apply(&H, &p);
	oms_route_get(H.oms, &r);
	cr_assert_eq(r.epoch, 5);
	cr_assert_eq(r.pin_count, 1);
	cr_assert_eq(r.pins[0].user, 42);
	cr_assert_eq(r.pins[0].shard, 5);
	cr_assert_eq(oms_owner(H.oms, 42), 5);
}

/* Goal: symbols are listed in config order with status and kill state as admin entries
 * left them; unknown ids are -ENOENT. */
Test(oms_views, symbols_with_status_and_kill)
{
	cr_assert_eq(oms_symbol_count(H.oms), 2);
	struct oms_symbol_info s;
	cr_assert_eq(oms_symbol_at(H.oms, 1, &s), 0);
	cr_assert_eq(s.symbol, S_ETHUSD);
	cr_assert_eq(s.me_shard, 1);
	cr_assert_eq(s.status, WIRE_SYM_TRADING);
	cr_assert_eq(s.maker_fee_bps, -1);
	cr_assert_eq(oms_symbol_at(H.oms, 2, &s), -ENOENT);
	cr_assert_eq(oms_symbol_get(H.oms, 999, &s), -ENOENT);

	struct wire_symbol_status_msg st;
	memset(&st, 0, sizeof(st));
	st.hdr.type = WIRE_SYMBOL_STATUS;
	st.hdr.length = sizeof(st);
	st.symbol = S_BTCUSD;
	st.status = WIRE_SYM_HALTED;
	h_apply(&H, &st);
	struct wire_kill_switch k;
	memset(&k, 0, sizeof(k));
	k.hdr.type = WIRE_KILL_SWITCH;
	k.hdr.length = sizeof(k);
	k.id = S_BTCUSD;
	k.scope = WIRE_KILL_SYMBOL;
	k.engage = 1;
	h_apply(&H, &k);
	cr_assert_eq(oms_symbol_get(H.oms, S_BTCUSD, &s), 0);
	cr_assert_eq(s.status, WIRE_SYM_HALTED);
	cr_assert_eq(s.killed, 1);
	cr_assert_eq(oms_symbol_get(H.oms, S_ETHUSD, &s), 0);
	cr_assert_eq(s.status, WIRE_SYM_TRADING);
	cr_assert_eq(s.killed, 0);
}

/* Goal: a user kill-switch shows while engaged and not after release. */
Test(oms_views, user_kill)
{
	cr_assert(!oms_user_killed(H.oms, 7));
	struct wire_kill_switch k;
	memset(&k, 0, sizeof(k));
	k.hdr.type = WIRE_KILL_SWITCH;
	k.hdr.length = sizeof(k);
	k.id = 7;
	k.scope = WIRE_KILL_USER;
	k.engage = 1;
	h_apply(&H, &k);
	cr_assert(oms_user_killed(H.oms, 7));
	cr_assert(!oms_user_killed(H.oms, 8));
	k.engage = 0;
	h_apply(&H, &k);
	cr_assert(!oms_user_killed(H.oms, 7));
}

/* Goal: the resident set is listed, bounded per call, and the cursor resumes where it
 * stopped until every slot was seen. Method: three users, lists of at most 2. */
Test(oms_views, users_list_resumes)
{
	h_user(&H, 11, 0, 100);
	h_user(&H, 12, 0, 100);
	h_user(&H, 13, 0, 100);
	uint64_t got[8], all[8];
	uint32_t n_all = 0, cursor = 0;
	for (int round = 0; round < 100 && cursor != UINT32_MAX; round++) {
		uint32_t n = oms_users_list(H.oms, &cursor, got, 2);
		cr_assert(n <= 2);
		for (uint32_t i = 0; i < n; i++)
			all[n_all++] = got[i];
	}
	cr_assert_eq(cursor, UINT32_MAX);
	cr_assert_eq(n_all, 3);
	uint64_t sum = all[0] + all[1] + all[2];
	cr_assert_eq(sum, 11 + 12 + 13);
	cr_assert_eq(oms_users_list(H.oms, &cursor, got, 2), 0, "past the end: nothing");
}

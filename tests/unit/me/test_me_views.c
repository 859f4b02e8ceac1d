/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me read-only views (mgmt symbols list, bootstrap): the symbol table as admin entries left
 * it — status, kill-switch, grid, resting count — by position and by id.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "me_fixture.h"

TestSuite(me_views, .init = fx_setup, .fini = fx_fini);

/* Goal: the fixture's symbol is listed with its grid and TRADING; an unknown id and a
 * position past the end are -ENOENT. */
Test(me_views, lists_configured_symbols)
{
	cr_assert_eq(me_symbol_count(fx_me), 1);
	struct me_symbol_info a, b;
	cr_assert_eq(me_symbol_at(fx_me, 0, &a), 0);
	cr_assert_eq(a.symbol, FX_SYM);
	cr_assert_eq(a.status, WIRE_SYM_TRADING);
	cr_assert_eq(a.tick, 10);
	cr_assert_eq(a.lot, 1);
	cr_assert_eq(a.killed, 0);
	cr_assert_eq(me_symbol_get(fx_me, FX_SYM, &b), 0);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0);
	cr_assert_eq(me_symbol_at(fx_me, 1, &a), -ENOENT);
	cr_assert_eq(me_symbol_get(fx_me, 77, &a), -ENOENT);
}

/* Goal: halt, kill and resting orders show in the view. Method: rest two orders, halt
 * without cancelling, engage the symbol kill-switch (cancels the book), resume. */
Test(me_views, follows_halt_kill_and_resting)
{
	fx_gtc(1, 1, WIRE_SIDE_BUY, 100, 1);
	fx_gtc(2, 1, WIRE_SIDE_SELL, 200, 1);
	struct me_symbol_info v;
	cr_assert_eq(me_symbol_get(fx_me, FX_SYM, &v), 0);
	cr_assert_eq(v.resting, 2);
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_HALTED, 0), WIRE_REASON_NONE);
	cr_assert_eq(me_symbol_get(fx_me, FX_SYM, &v), 0);
	cr_assert_eq(v.status, WIRE_SYM_HALTED);
	cr_assert_eq(v.resting, 2);
	cr_assert_eq(fx_kill(WIRE_KILL_SYMBOL, FX_SYM, 1), WIRE_REASON_NONE);
	cr_assert_eq(me_symbol_get(fx_me, FX_SYM, &v), 0);
	cr_assert_eq(v.killed, 1);
	cr_assert_eq(v.resting, 0);
	cr_assert_eq(fx_status(FX_SYM, WIRE_SYM_TRADING, 0), WIRE_REASON_NONE);
	cr_assert_eq(fx_kill(WIRE_KILL_SYMBOL, FX_SYM, 0), WIRE_REASON_NONE);
	cr_assert_eq(me_symbol_get(fx_me, FX_SYM, &v), 0);
	cr_assert_eq(v.status, WIRE_SYM_TRADING);
	cr_assert_eq(v.killed, 0);
}

/* Goal: a second symbol, mapped to another shard, is listed second with that shard. */
Test(me_views, second_symbol_in_config_order)
{
	cr_assert_eq(fx_config(9, 5, 2, 2, 0, 1, 0, 0, 3), WIRE_REASON_NONE);
	cr_assert_eq(me_symbol_count(fx_me), 2);
	struct me_symbol_info v;
	cr_assert_eq(me_symbol_at(fx_me, 1, &v), 0);
	cr_assert_eq(v.symbol, 9);
	cr_assert_eq(v.me_shard, 3);
	cr_assert_eq(v.tick, 5);
	cr_assert_eq(v.lot, 2);
}

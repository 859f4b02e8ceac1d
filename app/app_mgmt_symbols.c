/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control socket's symbol commands and the kill-switches: symbols list, halt, resume
 * and add (move: app_mgmt_move.c); kill user and kill symbol. Each checks its arguments,
 * builds the admin message (SYMBOL_STATUS, SYMBOL_CONFIG, KILL_SWITCH) and names the shards
 * that must apply it: the symbol's ME shard, which is the authority on its book, and every
 * OMS shard, which refuses orders at admission. The request itself runs in app_mgmt_req.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_mgmt_int.h"
#include "common/wire.h"

/* Every shard's view is "[row,row]": the answer joins the rows into one array. */
static void
render_symbols(struct mgmt_out *o, const struct app_mgmt_req *r)
{
	mgmt_out_key(o, "symbols");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < r->cmd_count; i++) {
		const struct app_cmd *c = r->cmds[i];
		if (c->out_len < 2 || c->out[0] != '[' || c->out[c->out_len - 1] != ']')
			continue;
		if (c->out_len == 2)
			continue;
		c->out[c->out_len - 1] = '\0';
		if (o->need_comma)
			mgmt_out_raw(o, ",");
		mgmt_out_raw(o, c->out + 1);
		o->need_comma = true;
	}
	mgmt_out_arr_end(o);
}

int
app_mgmt_symbols_list(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	static const char *const names[] = {NULL};
	if (app_mgmt_args_known(a, names) != 0)
		return -EINVAL;
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_hosted(a->mgmt->app, &t, -1);
	struct app_mgmt_view_query q = {.view = APP_VIEW_SYMBOLS};
	return app_mgmt_view(a, &t, &q, render_symbols);
}

/* symbols book --symbol S [--levels N]: the symbol's depth on every ME shard here (the
 * owner's book; a shard that does not own it shows an empty one). */
int
app_mgmt_symbols_book(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	static const char *const names[] = {"symbol", "levels", NULL};
	uint64_t sym, levels = 1000;
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "symbol", true, 1, UINT32_MAX, &sym) != 0 ||
	    app_mgmt_arg_u64(a, "levels", false, 1, 4096, &levels) != 0)
		return -EINVAL;
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_hosted(a->mgmt->app, &t, APP_SERVICE_ME);
	struct app_mgmt_view_query q = {.view = APP_VIEW_BOOK, .target = (uint32_t)sym,
					.limit = (uint32_t)levels};
	return app_mgmt_view(a, &t, &q, app_mgmt_render_views);
}

/* symbols halt | resume: SYMBOL_STATUS (the row's variant: halted or trading) into the
 * symbol's ME shard and every OMS shard. */
int
app_mgmt_symbols_status(struct app_mgmt_call *a, uint32_t status)
{
	static const char *const names[] = {"symbol", "cancel_resting", "me_shard", NULL};
	uint64_t sym;
	bool cancel = false;
	uint16_t me;
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "symbol", true, 1, UINT32_MAX, &sym) != 0 ||
	    app_mgmt_arg_bool(a, "cancel_resting", &cancel) != 0)
		return -EINVAL;
	if (status == WIRE_SYM_TRADING && app_mgmt_arg_present(a, "cancel_resting")) {
		snprintf(a->err, a->cap, "bad_argument: --cancel-resting applies to halt only");
		return -EINVAL;
	}
	int rc = app_mgmt_symbol_me_shard(a, sym, &me);
	if (rc != 0)
		return rc;
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_add(&t, me);
	app_mgmt_targets_oms(a->mgmt->app, &t);
	struct wire_symbol_status_msg m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_SYMBOL_STATUS, 0);
	m.symbol = (uint32_t)sym;
	m.status = (uint8_t)status;
	m.cancel_resting = cancel;
	struct app_mgmt_proposal p = {.msg = &m, .len = sizeof(m), .key = sym};
	return app_mgmt_propose(a, &t, &p, APP_MGMT_NEED_ALL);
}

/* symbols add --symbol S --base B --quote Q --me-shard M --tick T --lot L --base-unit U
 * [--min-qty --min-notional --ref-px --band-bps --maker-fee-bps --taker-fee-bps --halted]:
 * SYMBOL_CONFIG into the ME shard M first (it validates the grid), then every OMS shard. An
 * existing symbol is updated (the services refuse changes resting orders forbid). */
int
app_mgmt_symbols_add(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	static const char *const names[] = {
		"symbol", "base", "quote", "me_shard", "tick", "lot", "base_unit", "min_qty",
		"min_notional", "ref_px", "band_bps", "maker_fee_bps", "taker_fee_bps", "halted",
		NULL};
	uint64_t sym, base, quote, me, tick, lot, unit, min_qty = 0, min_notional = 0,
		ref_px = 0, band = 0;
	int64_t maker = 0, taker = 0;
	bool halted = false;
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "symbol", true, 1, UINT32_MAX, &sym) ||
	    app_mgmt_arg_u64(a, "base", true, 1, UINT32_MAX, &base) ||
	    app_mgmt_arg_u64(a, "quote", true, 1, UINT32_MAX, &quote) ||
	    app_mgmt_arg_u64(a, "me_shard", true, 0, DP_SHARDS_MAX - 1, &me) ||
	    app_mgmt_arg_u64(a, "tick", true, 1, INT64_MAX, &tick) ||
	    app_mgmt_arg_u64(a, "lot", true, 1, INT64_MAX, &lot) ||
	    app_mgmt_arg_u64(a, "base_unit", true, 1, INT64_MAX, &unit) ||
	    app_mgmt_arg_u64(a, "min_qty", false, 0, INT64_MAX, &min_qty) ||
	    app_mgmt_arg_u64(a, "min_notional", false, 0, INT64_MAX, &min_notional) ||
	    app_mgmt_arg_u64(a, "ref_px", false, 0, INT64_MAX, &ref_px) ||
	    app_mgmt_arg_u64(a, "band_bps", false, 0, 10000, &band) ||
	    app_mgmt_arg_bool(a, "halted", &halted))
		return -EINVAL;
	int rc1 = mgmt_json_get_i64(a->req->json, a->req->args, "maker_fee_bps", &maker);
	int rc2 = mgmt_json_get_i64(a->req->json, a->req->args, "taker_fee_bps", &taker);
	if ((rc1 != 0 && rc1 != -ENOENT) || (rc2 != 0 && rc2 != -ENOENT) || maker < -1000 ||
	    maker > 1000 || taker < 0 || taker > 1000) {
		snprintf(a->err, a->cap, "bad_argument: fees are basis points in [-1000, 1000] (taker "
			 ">= 0)");
		return -EINVAL;
	}
	uint16_t me_id = (uint16_t)me;
	if (app_mgmt_shards_check(a, &me_id, 1, APP_SERVICE_ME) != 0)
		return -EINVAL;
	struct wire_symbol_config m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_SYMBOL_CONFIG, 0);
	m.symbol = (uint32_t)sym;
	m.base_asset = (uint32_t)base;
	m.quote_asset = (uint32_t)quote;
	m.me_shard = (uint16_t)me;
	m.status = halted ? WIRE_SYM_HALTED : WIRE_SYM_TRADING;
	m.tick = (int64_t)tick;
	m.lot = (int64_t)lot;
	m.min_qty = (int64_t)min_qty;
	m.min_notional = (int64_t)min_notional;
	m.base_unit = (int64_t)unit;
	m.ref_px = (int64_t)ref_px;
	m.band_bps = (uint32_t)band;
	m.maker_fee_bps = (int16_t)maker;
	m.taker_fee_bps = (int16_t)taker;
	m.map_version = 1;
	struct app_mgmt_targets t1 = {0};
	app_mgmt_targets_add(&t1, (uint16_t)me);
	struct app_mgmt_next_step *n = calloc(1, sizeof(*n));
	if (n == NULL) {
		snprintf(a->err, a->cap, "internal: out of memory");
		return -ENOMEM;
	}
	app_mgmt_targets_oms(a->mgmt->app, &n->t);
	memcpy(n->msg, &m, sizeof(m));
	n->len = sizeof(m);
	n->key = sym;
	struct app_mgmt_proposal p = {.msg = &m, .len = sizeof(m), .key = sym};
	return app_mgmt_propose_two_steps(a, &t1, &p, n);
}

/* ---- kill ---- */

/* kill user | symbol: KILL_SWITCH (engage, or release) of one user or one symbol (the
 * row's variant: the scope) into every OMS shard, which blocks new orders, and the ME
 * shards whose books hold the resting orders it cancels. */
int
app_mgmt_kill(struct app_mgmt_call *a, uint32_t scope)
{
	static const char *const user_names[] = {"user", "release", NULL};
	static const char *const sym_names[] = {"symbol", "release", "me_shard", NULL};
	const char *key = scope == WIRE_KILL_USER ? "user" : "symbol";
	uint64_t id;
	bool release = false;
	if (app_mgmt_args_known(a, scope == WIRE_KILL_USER ? user_names : sym_names) != 0 ||
	    app_mgmt_arg_u64(a, key, true, 1, scope == WIRE_KILL_USER ? UINT64_MAX : UINT32_MAX,
			     &id) != 0 ||
	    app_mgmt_arg_bool(a, "release", &release) != 0)
		return -EINVAL;
	const struct app *app = a->mgmt->app;
	struct app_mgmt_targets t = {0};
	if (scope == WIRE_KILL_SYMBOL) {
		uint16_t me;
		int rc = app_mgmt_symbol_me_shard(a, id, &me);
		if (rc != 0)
			return rc;
		app_mgmt_targets_add(&t, me);
	} else {
		app_mgmt_targets_me(app, &t); /* cancels the user's resting orders on every book */
	}
	app_mgmt_targets_oms(app, &t);        /* blocks new orders */
	struct wire_kill_switch m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_KILL_SWITCH, 0);
	m.id = id;
	m.scope = (uint8_t)scope;
	m.engage = !release;
	struct app_mgmt_proposal p = {.msg = &m, .len = sizeof(m), .key = id};
	return app_mgmt_propose(a, &t, &p, APP_MGMT_NEED_ALL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control socket's routing commands: routes show, set, pin and unpin. Routing is the
 * OMS shards' replicated state (which shards are active or receiving, under which epoch,
 * and the whale pins), so every change is one admin entry (ROUTING_CONFIG or WHALE_PIN)
 * into every OMS shard's log, and each shard lcore completes the epoch from what it
 * applied (APP_CMD_ROUTE_MERGE). The request itself runs in app_mgmt_req.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "app_mgmt_int.h"
#include "common/wire.h"

int
app_mgmt_routes_show(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	static const char *const names[] = {NULL};
	if (app_mgmt_args_known(a, names) != 0)
		return -EINVAL;
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_hosted(a->mgmt->app, &t, APP_SERVICE_OMS);
	if (t.n == 0) {
		snprintf(a->err, a->cap, "not_hosted: no OMS shard on this node; its routing is "
			 "shown by a node that hosts one");
		return -ENOENT;
	}
	struct app_mgmt_view_query q = {.view = APP_VIEW_ROUTES};
	return app_mgmt_view(a, &t, &q, app_mgmt_render_views);
}

int
app_mgmt_pin_propose(struct app_mgmt_call *a, uint64_t user, uint16_t shard, bool unpin)
{
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_oms(a->mgmt->app, &t);
	struct wire_whale_pin m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_WHALE_PIN, 0);
	m.hdr.flags = unpin ? 1 : 0;
	m.user = user;
	m.shard = shard;
	struct app_mgmt_proposal p = {.msg = &m, .len = sizeof(m), .key = user};
	return app_mgmt_propose(a, &t, &p, APP_MGMT_NEED_ALL);
}

/* routes pin | unpin (the row's variant: 1 unpins): a whale pinned to an OMS shard, or
 * given back to HRW. */
int
app_mgmt_routes_pin(struct app_mgmt_call *a, uint32_t unpin)
{
	static const char *const pin_names[] = {"user", "shard", NULL};
	static const char *const unpin_names[] = {"user", NULL};
	uint64_t user, shard = 0;
	if (app_mgmt_args_known(a, unpin ? unpin_names : pin_names) != 0 ||
	    app_mgmt_arg_u64(a, "user", true, 1, UINT64_MAX, &user) != 0 ||
	    (!unpin && app_mgmt_arg_u64(a, "shard", true, 0, DP_SHARDS_MAX - 1, &shard) != 0))
		return -EINVAL;
	if (!unpin && !app_mgmt_is_oms_shard(a->mgmt->app, (uint16_t)shard)) {
		snprintf(a->err, a->cap, "bad_argument: shard %" PRIu64 " is not an OMS shard",
			 shard);
		return -EINVAL;
	}
	return app_mgmt_pin_propose(a, user, (uint16_t)shard, unpin != 0);
}

/* routes set --active 1,2 [--receiving 3] [--epoch N]: the whole membership under a new
 * epoch (default: the applied one + 1, chosen by each shard lcore), pins kept. */
int
app_mgmt_routes_set(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	static const char *const names[] = {"active", "receiving", "epoch", NULL};
	uint16_t act[WIRE_ROUTE_SHARDS_MAX], rcv[WIRE_ROUTE_SHARDS_MAX];
	uint32_t na, nr;
	uint64_t epoch = 0;
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_shards(a, "active", true, act, &na) != 0 ||
	    app_mgmt_arg_shards(a, "receiving", false, rcv, &nr) != 0 ||
	    app_mgmt_arg_u64(a, "epoch", false, 1, UINT64_MAX, &epoch) != 0)
		return -EINVAL;
	if (app_mgmt_shards_check(a, act, na, APP_SERVICE_OMS) != 0 ||
	    app_mgmt_shards_check(a, rcv, nr, APP_SERVICE_OMS) != 0)
		return -EINVAL;
	if (na + nr > WIRE_ROUTE_SHARDS_MAX) {
		snprintf(a->err, a->cap, "bad_argument: at most %d shards", WIRE_ROUTE_SHARDS_MAX);
		return -EINVAL;
	}
	static struct wire_routing_config m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_ROUTING_CONFIG, 0);
	m.epoch = epoch;
	for (uint32_t i = 0; i < na; i++)
		m.shards[m.shard_count++] = (struct wire_route_shard){act[i], WIRE_SHARD_ACTIVE, 0};
	for (uint32_t i = 0; i < nr; i++) {
		for (uint32_t k = 0; k < na; k++) {
			if (act[k] == rcv[i]) {
				snprintf(a->err, a->cap, "bad_argument: shard %u is both active and "
					 "receiving", rcv[i]);
				return -EINVAL;
			}
		}
		m.shards[m.shard_count++] =
			(struct wire_route_shard){rcv[i], WIRE_SHARD_RECEIVING, 0};
	}
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_oms(a->mgmt->app, &t);
	for (uint32_t i = 0; i < m.shard_count; i++)
		app_mgmt_targets_add(&t, m.shards[i].shard); /* a joining shard learns it too */
	struct app_mgmt_proposal p = {.msg = &m, .len = sizeof(m), .key = epoch,
				      .flags = APP_CMD_ROUTE_MERGE};
	return app_mgmt_propose(a, &t, &p, APP_MGMT_NEED_ALL);
}

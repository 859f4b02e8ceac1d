/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control socket's argument checks, and the shard sets the arguments name. A handler
 * checks every argument here before anything runs, so a command that would be refused for
 * its arguments reaches no shard; each refusal is written as "bad_argument: ..." (or
 * "unknown_symbol: ...") into the call's err. The target sets are read from the node's
 * configuration: the OMS shards of the routing, the ME shards of the symbols, and the
 * shards hosted here. Nothing here starts a request.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_mgmt_int.h"
#include "common/wire.h"

bool
app_mgmt_arg_present(const struct app_mgmt_call *a, const char *key)
{
	return mgmt_json_get(a->req->json, a->req->args, key) >= 0;
}

int
app_mgmt_args_known(struct app_mgmt_call *a, const char *const *names)
{
	const struct mgmt_json *j = a->req->json;
	if (a->req->args < 0)
		return 0;
	int t = a->req->args + 1;
	for (uint32_t i = 0; i < j->toks[a->req->args].size; i++) {
		char key[48];
		if (mgmt_json_str(j, t, key, sizeof(key)) != 0) {
			snprintf(a->err, a->cap, "bad_argument: an argument name is too long");
			return -EINVAL;
		}
		bool ok = strcmp(key, "timeout_ms") == 0 || strcmp(key, "local") == 0;
		for (int k = 0; !ok && names[k] != NULL; k++)
			ok = strcmp(key, names[k]) == 0;
		if (!ok) {
			snprintf(a->err, a->cap, "bad_argument: unknown argument '%s'", key);
			return -EINVAL;
		}
		t = (int)j->toks[t + 1].next;
	}
	return 0;
}

int
app_mgmt_arg_u64(struct app_mgmt_call *a, const char *key, bool required, uint64_t min,
		 uint64_t max, uint64_t *out)
{
	int rc = mgmt_json_get_u64(a->req->json, a->req->args, key, out);
	if (rc == -ENOENT && !required)
		return 0;
	if (rc == -ENOENT) {
		snprintf(a->err, a->cap, "bad_argument: --%s is required", key);
		return -EINVAL;
	}
	if (rc != 0 || *out < min || *out > max) {
		snprintf(a->err, a->cap, "bad_argument: --%s must be an integer in [%" PRIu64
			 ", %" PRIu64 "]", key, min, max);
		return -EINVAL;
	}
	return 0;
}

int
app_mgmt_arg_bool(struct app_mgmt_call *a, const char *key, bool *out)
{
	*out = false;
	int rc = mgmt_json_get_bool(a->req->json, a->req->args, key, out);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0) {
		snprintf(a->err, a->cap, "bad_argument: --%s must be true or false", key);
		return -EINVAL;
	}
	return 0;
}

int
app_mgmt_arg_shards(struct app_mgmt_call *a, const char *key, bool required, uint16_t *out,
		    uint32_t *n)
{
	*n = 0;
	uint64_t one;
	if (mgmt_json_get_u64(a->req->json, a->req->args, key, &one) == 0) {
		if (one >= DP_SHARDS_MAX)
			goto bad;
		out[(*n)++] = (uint16_t)one;
		return 0;
	}
	char list[256];
	int rc = mgmt_json_get_str(a->req->json, a->req->args, key, list, sizeof(list));
	if (rc == -ENOENT && !required)
		return 0;
	if (rc != 0)
		goto bad;
	for (char *p = list; *p != '\0';) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || v >= DP_SHARDS_MAX || *n == WIRE_ROUTE_SHARDS_MAX)
			goto bad;
		for (uint32_t i = 0; i < *n; i++)
			if (out[i] == v)
				goto bad;
		out[(*n)++] = (uint16_t)v;
		p = end;
		if (*p == ',')
			p++;
		else if (*p != '\0')
			goto bad;
	}
	if (*n > 0 || !required)
		return 0;
bad:
	snprintf(a->err, a->cap, "bad_argument: --%s must be a list of distinct shard ids "
		 "below %d, like 1,2", key, DP_SHARDS_MAX);
	return -EINVAL;
}

/* A shard id the operator named is not one of this node's shards of another service. */
static bool
shard_may_be(const struct app *app, uint16_t shard, int service)
{
	int idx = app->shard_index[shard];
	return idx < 0 || (int)app->cfg.shards[idx].service == service;
}

int
app_mgmt_shards_check(struct app_mgmt_call *a, const uint16_t *ids, uint32_t n, int service)
{
	for (uint32_t i = 0; i < n; i++) {
		if (!shard_may_be(a->mgmt->app, ids[i], service)) {
			snprintf(a->err, a->cap, "bad_argument: shard %u is not an %s shard", ids[i],
				 service == APP_SERVICE_OMS ? "OMS" : "ME");
			return -EINVAL;
		}
	}
	return 0;
}

/* args.me_shard names the ME shard of a symbol added or moved at run time. */
int
app_mgmt_symbol_me_shard(struct app_mgmt_call *a, uint64_t symbol, uint16_t *shard)
{
	const struct app_config *cfg = &a->mgmt->app->cfg;
	uint64_t v;
	if (app_mgmt_arg_present(a, "me_shard")) {
		if (app_mgmt_arg_u64(a, "me_shard", true, 0, DP_SHARDS_MAX - 1, &v) != 0)
			return -EINVAL;
		*shard = (uint16_t)v;
		return app_mgmt_shards_check(a, shard, 1, APP_SERVICE_ME);
	}
	for (uint32_t i = 0; i < cfg->symbol_count; i++) {
		if (cfg->symbols[i].id == symbol) {
			*shard = cfg->symbols[i].me_shard;
			return 0;
		}
	}
	snprintf(a->err, a->cap, "unknown_symbol: symbol %" PRIu64 " is not configured on this "
		 "node ([symbol.N]); name its ME shard with --me-shard", symbol);
	return -ENOENT;
}

/* ---- target sets ---- */

void
app_mgmt_targets_add(struct app_mgmt_targets *t, uint16_t shard)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (t->shard[i] == shard)
			return;
	if (t->n < APP_MGMT_TARGETS_MAX)
		t->shard[t->n++] = shard;
}

void
app_mgmt_targets_oms(const struct app *app, struct app_mgmt_targets *t)
{
	const struct app_config *cfg = &app->cfg;
	for (uint32_t i = 0; i < cfg->routing.shard_count; i++)
		app_mgmt_targets_add(t, cfg->routing.shards[i]);
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if (cfg->shards[i].service == APP_SERVICE_OMS)
			app_mgmt_targets_add(t, cfg->shards[i].id);
}

void
app_mgmt_targets_me(const struct app *app, struct app_mgmt_targets *t)
{
	const struct app_config *cfg = &app->cfg;
	for (uint32_t i = 0; i < cfg->symbol_count; i++)
		app_mgmt_targets_add(t, cfg->symbols[i].me_shard);
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if (cfg->shards[i].service == APP_SERVICE_ME)
			app_mgmt_targets_add(t, cfg->shards[i].id);
}

void
app_mgmt_targets_hosted(const struct app *app, struct app_mgmt_targets *t, int service)
{
	const struct app_config *cfg = &app->cfg;
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		if ((service < 0 || (int)cfg->shards[i].service == service) &&
		    cfg->shards[i].service != APP_SERVICE_ECHO)
			app_mgmt_targets_add(t, cfg->shards[i].id);
}

bool
app_mgmt_is_oms_shard(const struct app *app, uint16_t shard)
{
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_oms(app, &t);
	for (uint32_t i = 0; i < t.n; i++)
		if (t.shard[i] == shard)
			return true;
	return false;
}

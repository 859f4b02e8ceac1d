/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leadership placement's keys (app_config_int.h; docs/appliance.md "Leadership placement"):
 *
 *   [placement] policy = none | spread | colocate | prefer   (none)
 *               check_ms = 500      a leader looks at its placement this often
 *               settle_ms = 5000    a better node caught up and heard this long first
 *   [shard.N]   leader_preference = 2,1,3   (prefer; colocate: ME shards only)
 *
 * Read after the shards (the members a preference must name), the timers (check_ms must
 * exceed tick_ms: the leader tells a live follower from a dead one by its match index
 * moving between two checks, which an idle leader's tick entries guarantee) and the
 * symbols.
 */
#include <inttypes.h>
#include <stdio.h>

#include "app_config_int.h"

static void
shard_preference(struct cfg_ctx *c, const struct app_config *cfg, struct app_shard_conf *sh)
{
	char sec[16];
	snprintf(sec, sizeof(sec), "shard.%u", sh->id);
	const char *key = "leader_preference";
	if (cfg_get(c, sec, key) == NULL)
		return;
	uint32_t ids[APP_MEMBERS_MAX];
	int n = cfg_get_id_list(c, sec, key, ids, APP_MEMBERS_MAX); /* marks it read */
	if (n <= 0)
		return;
	if (sh->service == APP_SERVICE_ECHO) {
		cfg_report(c, sec, key, "an echo shard has no leader to place");
		return;
	}
	bool used = cfg->place_policy == APP_PLACE_PREFER ||
		    (cfg->place_policy == APP_PLACE_COLOCATE && sh->service == APP_SERVICE_ME);
	if (!used) {
		cfg_report(c, sec, key, "used only with [placement] policy = prefer (or colocate, "
			   "for ME shards); the policy is %s",
			   app_place_policy_name(cfg->place_policy));
		return;
	}
	bool bad = false;
	for (int i = 0; i < n; i++) {
		bool member = false;
		for (uint32_t m = 0; m < sh->member_count; m++)
			member |= sh->members[m] == ids[i];
		if (!member) {
			cfg_report(c, sec, key, "node %u is not one of the shard's members", ids[i]);
			bad = true;
		}
	}
	if (bad)
		return;
	for (int i = 0; i < n; i++)
		sh->leader_pref[i] = ids[i];
	sh->leader_pref_count = (uint32_t)n;
}

void
cfg_sec_placement(struct cfg_ctx *c, struct app_config *cfg)
{
	const char *s = "placement";
	const char *v = cfg_get(c, s, "policy");
	if (v != NULL && app_place_policy_parse(v, &cfg->place_policy) != 0)
		cfg_report(c, s, "policy", "'%s' is not one of none|spread|colocate|prefer", v);
	cfg_get_u64(c, s, "check_ms", false, 10, 60000, &cfg->place_check_ms);
	cfg_get_u64(c, s, "settle_ms", false, 0, 3600000, &cfg->place_settle_ms);
	/* The windows matter only when something moves (a tick_ms above the default check_ms
	 * stays valid without placement). */
	bool on = cfg->place_policy != APP_PLACE_NONE;
	if (on && cfg->place_check_ms <= cfg->tick_ms)
		cfg_report(c, s, "check_ms", "%" PRIu64 " is not more than [timers] tick_ms (%" PRIu64
			   "): a live follower's match index must move between two checks",
			   cfg->place_check_ms, cfg->tick_ms);
	if (on && cfg->place_settle_ms < cfg->place_check_ms)
		cfg_report(c, s, "settle_ms", "%" PRIu64 " is less than check_ms (%" PRIu64 ")",
			   cfg->place_settle_ms, cfg->place_check_ms);
	uint32_t listed = 0;
	for (uint32_t i = 0; i < cfg->shard_count; i++) {
		shard_preference(c, cfg, &cfg->shards[i]);
		listed += cfg->shards[i].leader_pref_count > 0;
	}
	if (cfg->place_policy == APP_PLACE_PREFER && listed == 0)
		cfg_report(c, s, "policy", "prefer needs a leader_preference in some [shard.N]");
}

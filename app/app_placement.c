/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leadership placement on the shard lcore (docs/appliance.md "Leadership placement"). Once
 * per duty cycle a clock compare; every [placement] check_ms a check:
 *
 *   1. the shard's preferred leaders, best first (app_placement_pick.c: spread and prefer
 *      from the configuration, colocate from the ME leaders as this node knows them), are
 *      published for the views on every member;
 *   2. on the leader only: each member of the configuration in effect is observed (a voter,
 *      at most APP_PLACE_LAG_MAX entries behind, its match index moved since the last
 *      check), and when a better node has been so for settle_ms, and no membership change
 *      or other transfer is under way, leadership is handed to it with cns_transfer
 *      (thesis §3.10: the target is brought up to date, then told to time out now).
 *
 * Nothing here is on the hot path: a check reads a few consensus getters and at most
 * starts one transfer. Outcomes are counted (placement_*), a transfer is logged.
 */
#include <errno.h>
#include <inttypes.h>

#include "app_shard_int.h"
#include "common/check.h"

static_assert(CNS_MEMBERS_MAX <= APP_PLACE_RANK_MAX, "a member set fits a ranking");
static_assert(APP_MEMBERS_MAX <= APP_PLACE_RANK_MAX, "a leader_preference fits a ranking");

/* Colocate, an OMS shard: the node leading the ME shards it talks to, weighed by the
 * [symbol.N] sections each owns (every ME shard this node knows of once, when no symbol
 * names any), with the leaders as known on this node (the node-wide leader hints). */
static uint32_t
colocate_node(const struct app_shard *s)
{
	const struct app_config *cfg = &s->app->cfg;
	struct app_place_me me[APP_PLACE_ME_MAX];
	uint32_t n = 0, total = 0;
	static_assert(DP_SHARDS_MAX <= APP_PLACE_ME_MAX, "APP_PLACE_ME_MAX");
	for (uint32_t i = 0; i < s->me_shard_count && n < APP_PLACE_ME_MAX; i++) {
		uint16_t id = s->me_shards[i];
		uint32_t w = 0;
		for (uint32_t y = 0; y < cfg->symbol_count; y++)
			w += cfg->symbols[y].me_shard == id;
		me[n].leader = LOAD(s->app->leader_hint[id]);
		me[n++].weight = w;
		total += w;
	}
	if (total == 0)
		for (uint32_t i = 0; i < n; i++)
			me[i].weight = 1;
	return app_place_colocate(me, n, cns_leader(s->cns));
}

static void
rank_refresh(struct app_shard *s)
{
	const struct app_config *cfg = &s->app->cfg;
	struct app_place_in in = {
		.policy = cfg->place_policy,
		.shard = s->id,
		.is_oms = s->is_oms,
		.members = s->conf->members,
		.member_count = s->conf->member_count,
		.pref = s->conf->leader_pref,
		.pref_count = s->conf->leader_pref_count,
		.colocate_node = 0,
	};
	if (cfg->place_policy == APP_PLACE_COLOCATE && s->is_oms)
		in.colocate_node = colocate_node(s);
	app_place_rank_build(&in, &s->place.rank);
}

/* A transfer started since the last check (by us or by `omsctl transfer-leader`) runs for
 * at most an election timeout, after which consensus abandons it: hold until then. */
static void
note_transfers(struct app_shard *s)
{
	struct app_place_state *p = &s->place;
	uint64_t transfers = cns_counter(s->cns, CNS_C_TRANSFERS);
	if (transfers == p->transfers_seen)
		return;
	p->transfers_seen = transfers;
	p->hold_until_ns = s->now + s->app->cfg.election_ms * 2000000;
}

/* A membership change not committed yet, or a leadership transfer that may still be
 * running (an operator's, made here or forwarded here from another node, or our own):
 * cns_transfer would override the transfer, and one change at a time (thesis §3.10, §4.1)
 * keeps the two from racing. */
static bool
busy(const struct app_shard *s)
{
	struct cns_members m;
	if (cns_members(s->cns, &m) > cns_commit_index(s->cns))
		return true;
	for (uint32_t i = 0; i < s->cmd_wait_count; i++)
		if (s->cmd_wait[i]->kind == APP_CMD_TRANSFER)
			return true;
	if (s->fwd_seen.transfer_waits > 0)
		return true; /* forwarded: app_fwd_transfers_settle keeps the count */
	return s->now < s->place.hold_until_ns;
}

/* Observe the configuration in effect: voters, learners and their match indexes. */
static void
observe(struct app_shard *s)
{
	struct cns_members m;
	struct app_place_member pm[APP_PLACE_RANK_MAX];
	uint32_t n = 0;
	cns_members(s->cns, &m);
	for (uint32_t i = 0; i < m.count && n < APP_PLACE_RANK_MAX; i++) {
		if (m.ids[i] == s->self)
			continue;
		pm[n].node = m.ids[i];
		pm[n].voter = cns_is_voter(s->cns, m.ids[i]);
		pm[n++].match = cns_match_index(s->cns, m.ids[i]);
	}
	app_place_observe(&s->place.track, pm, n, cns_last_index(s->cns), APP_PLACE_LAG_MAX,
			  s->now);
}

static void
count_verdict(struct app_shard *s, enum app_place_verdict v)
{
	switch (v) {
	case APP_PLACE_V_SETTLING:
		sc_add(s, SC_PLACE_SKIPPED_SETTLING, 1);
		break;
	case APP_PLACE_V_BEHIND:
		sc_add(s, SC_PLACE_SKIPPED_BEHIND, 1);
		break;
	case APP_PLACE_V_NOT_VOTER:
		sc_add(s, SC_PLACE_SKIPPED_NOT_VOTER, 1);
		break;
	case APP_PLACE_V_BUSY:
		sc_add(s, SC_PLACE_SKIPPED_BUSY, 1);
		break;
	case APP_PLACE_V_UNKNOWN:
		sc_add(s, SC_PLACE_SKIPPED_UNKNOWN, 1);
		break;
	default:
		break;
	}
}

static enum app_place_verdict
check(struct app_shard *s)
{
	struct app_place_state *p = &s->place;
	const struct app_config *cfg = &s->app->cfg;
	rank_refresh(s);
	if (cns_role(s->cns) != CNS_LEADER) {
		app_place_track_reset(&p->track);
		p->term = 0;
		return APP_PLACE_V_FOLLOWER;
	}
	if (p->term != cns_term(s->cns)) {
		/* A new leader watches its members for settle_ms before moving anything. */
		app_place_track_reset(&p->track);
		p->term = cns_term(s->cns);
		p->transfers_seen = cns_counter(s->cns, CNS_C_TRANSFERS);
		p->hold_until_ns = 0;
	}
	note_transfers(s);
	observe(s);
	if (p->rank.count == 0)
		return cfg->place_policy == APP_PLACE_COLOCATE && s->is_oms ? APP_PLACE_V_UNKNOWN
									   : APP_PLACE_V_OFF;
	uint32_t target = 0;
	enum app_place_verdict v = app_place_decide(&p->track, &p->rank, s->self, s->now,
						    cfg->place_settle_ms * 1000000, &target);
	if (v != APP_PLACE_V_MOVE)
		return v;
	if (busy(s))
		return APP_PLACE_V_BUSY;
	CHECK(target != 0);
	CHECK(target != s->self);
	int rc = cns_transfer(s->cns, s->now, target);
	app_place_forget(&p->track, target); /* seen ok for settle_ms again before a retry */
	if (rc != 0) {
		/* -EPERM: no longer leader; -EINVAL: the target is no longer a voter. */
		sc_add(s, SC_PLACE_REFUSED, 1);
		return rc == -EPERM ? APP_PLACE_V_FOLLOWER : APP_PLACE_V_NOT_VOTER;
	}
	sc_add(s, SC_PLACE_TRANSFERS, 1);
	note_transfers(s); /* holds the next one until this one has run its course */
	APP_LOG(INFO, "shard %u: placement (%s): leadership to node %u, term %" PRIu64, s->id,
		app_place_policy_name(cfg->place_policy), target, cns_term(s->cns));
	return v;
}

void
app_placement_tick(struct app_shard *s)
{
	const struct app_config *cfg = &s->app->cfg;
	if (cfg->place_policy == APP_PLACE_NONE ||
	    s->now - s->place.last_check_ns < cfg->place_check_ms * 1000000)
		return;
	s->place.last_check_ns = s->now;
	enum app_place_verdict v = check(s);
	count_verdict(s, v);
	PUB(s->pub_place_pref, s->place.rank.count > 0 ? s->place.rank.nodes[0] : 0);
	PUB(s->pub_place_verdict, (uint32_t)v);
}

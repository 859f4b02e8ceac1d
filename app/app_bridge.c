/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bridge and bootstrap, on the leader of a shard (docs/appliance.md):
 *   - bridge (OMS shards): once the leader has committed an entry of its term and applied
 *     everything, it rebuilds its queue from the PENDING sagas and re-sends them, with a
 *     REPLAY_REQUEST per ME shard; then a pass every [timers] bridge_redrive_ms re-sends
 *     each saga on its own back-off (bridge_redrive_ms doubling to bridge_redrive_max_ms,
 *     app_backoff.c), the persister's requests and the replay requests;
 *   - bootstrap: a leader with current state proposes the configured SYMBOL_CONFIGs (and,
 *     on an OMS shard behind the configured epoch, the ROUTING_CONFIG), once per term.
 * They live on the shard lcore because they read the service's state.
 */
#include <inttypes.h>

#include "app_shard_int.h"
#include "common/check.h"
#include "me/me.h"
#include "oms/oms.h"

/* The persister's requests are re-sent on the rebuild after a change of leader and then at
 * most this often: a request is lost only with a leader or a persister restart, and one
 * re-sent while its answer is on its way through the log runs again in the database (a
 * flush repeat, a hydration answered twice) and comes back as one more entry — under cache
 * churn, with thousands of hydrations and flushes outstanding, a re-send every pass
 * (bridge_redrive_ms) multiplied the database's work and the log's four times over. */
#define PERSIST_REDRIVE_NS (2000ull * 1000000)

static void
persist_cb(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct app_shard *s = ctx;
	sc_add(s, SC_BRIDGE_RESENT, 1);
	app_egress_route(s, dest, msg);
}

/* The saga id of a message to the ME: the orderId of a SUBMIT or of a moving order's
 * REBIND_TO_ME, the request id of a modify. */
static struct wire_oid
saga_id(const struct wire_msg_hdr *msg)
{
	if (msg->type == WIRE_SUBMIT)
		return ((const struct wire_submit *)msg)->oid;
	if (msg->type == WIRE_REBIND_TO_ME)
		return ((const struct wire_rebind *)msg)->oid;
	CHECK(msg->type >= WIRE_CANCEL_TO_ME); /* the modifies, oms_build_to_me */
	CHECK(msg->type <= WIRE_REPLACE_TO_ME);
	return ((const struct wire_modify *)msg)->req;
}

struct redrive_pass {
	struct app_shard *s;
	bool fresh;            /* the rebuild after a change of leader: re-send every saga */
	bool resent[DP_SHARDS_MAX]; /* ME shards a saga was re-sent to in this pass */
};

static void
saga_cb(void *ctx, const struct wire_msg_hdr *msg, uint64_t began_ns)
{
	struct redrive_pass *p = ctx;
	struct app_shard *s = p->s;
	struct wire_oid id = saga_id(msg);
	if (!app_rdq_visit(&s->rdq, &id, s->now, began_ns, p->fresh))
		return;
	sc_add(s, SC_BRIDGE_REDRIVES, 1);
	sc_add(s, SC_BRIDGE_RESENT, 1);
	if (msg->shard < DP_SHARDS_MAX)
		p->resent[msg->shard] = true;
	app_egress_route(s, WIRE_DEST_ME, msg);
}

/* A saga re-sent (not the rebuild) to an ME shard this node does not host, while that
 * shard sent us nothing since the last pass, means the node we guessed as its leader did
 * not answer for an interval. A member that is not the leader answers NOT_LEADER with a
 * hint; a node that does not host the shard says nothing, so the guess would stay wrong
 * forever: try the next node. A shard that answered is not rotated away from: rotating on
 * every pass with a re-send made the guess cycle through the nodes, and a saga whose
 * back-off period was a multiple of the cycle always met a wrong node (e2e_reroute: 4 of
 * 10 sagas never reached the ME after it resumed). Its egress also sets the guess
 * (app_ingress.c, bridge_heard). */
static void
rotate_silent(struct app_shard *s, const struct redrive_pass *p)
{
	for (uint32_t i = 0; i < s->me_shard_count; i++) {
		uint16_t me = s->me_shards[i];
		if (!p->resent[me] || s->app->shard_index[me] >= 0 ||
		    s->me_heard[me] >= s->last_redrive)
			continue;
		app_leader_rotate(s->app, me, app_leader_guess(s->app, me));
		sc_add(s, SC_BRIDGE_ROTATES, 1);
	}
}

/* A pass over everything in flight in the leader's state (seed: the PENDING sagas are the
 * bridge's durable work queue): each saga re-sent when its back-off says so (every one on
 * the rebuild, fresh), the persister's requests and a REPLAY_REQUEST per ME shard every
 * pass. The replay requests stay at the base cadence on purpose: they are how the OMS
 * learns an order finished when its events were lost, and the ME dedup window is sized
 * on that cadence (docs/me-contract.md "Windows"). */
static void
bridge_redrive(struct app_shard *s, bool fresh)
{
	const struct oms *oms = s->svc;
	struct redrive_pass p = { .s = s, .fresh = fresh, .resent = { false } };
	if (fresh)
		app_rdq_reset(&s->rdq);
	app_rdq_begin(&s->rdq);
	oms_pending_foreach_saga(oms, saga_cb, &p);
	app_rdq_end(&s->rdq);
	if (!fresh)
		rotate_silent(s, &p);
	PUB(s->pub_sagas_pending, s->rdq.pending);
	PUB(s->pub_sagas_old, s->rdq.old);
	PUB(s->pub_saga_oldest_ns, s->rdq.oldest_age_ns);
	if (s->rdq.untracked > 0)
		sc_add(s, SC_BRIDGE_UNTRACKED, s->rdq.untracked);
	if (fresh || s->now - s->last_persist_redrive >= PERSIST_REDRIVE_NS) {
		oms_persist_foreach(oms, persist_cb, s);
		s->last_persist_redrive = s->now;
	}
	for (uint32_t i = 0; i < s->me_shard_count; i++) {
		struct wire_replay_request rr;
		memset(&rr, 0, sizeof(rr));
		wire_hdr_init(&rr.hdr, WIRE_REPLAY_REQUEST, s->me_shards[i]);
		rr.stream = s->id;
		rr.from_seq = oms_stream_next_seq(oms, s->me_shards[i]);
		app_egress_route(s, WIRE_DEST_ME, &rr.hdr);
	}
	s->last_redrive = s->now;
	sc_add(s, SC_BRIDGE_ROUNDS, 1);
}

/* Not leading: no queue here; the figures are the leader's. */
static void
bridge_idle(struct app_shard *s)
{
	PUB(s->pub_sagas_pending, 0);
	PUB(s->pub_sagas_old, 0);
	PUB(s->pub_saga_oldest_ns, 0);
}

/* The leader's state is current: it committed an entry of its own term (so it knows the
 * whole committed log) and applied all of it. */
static bool
state_current(const struct app_shard *s)
{
	uint64_t commit = cns_commit_index(s->cns);
	return cns_role(s->cns) == CNS_LEADER &&
	       cns_term_at(s->cns, commit) == cns_term(s->cns) &&
	       cns_applied_index(s->cns) == commit;
}

static int
propose_symbols(struct app_shard *s)
{
	const struct app_config *cfg = &s->app->cfg;
	for (uint32_t i = 0; i < cfg->symbol_count; i++) {
		const struct app_symbol_conf *y = &cfg->symbols[i];
		/* Only what the replica does not know yet: after the bootstrap the control
		 * socket owns symbol state (a halt must survive a change of leader). */
		struct oms_symbol_info oy;
		struct me_symbol_info my;
		if (s->is_oms ? oms_symbol_get(s->svc, y->id, &oy) == 0
			      : me_symbol_get(s->svc, y->id, &my) == 0)
			continue;
		struct wire_symbol_config sc;
		memset(&sc, 0, sizeof(sc));
		wire_hdr_init(&sc.hdr, WIRE_SYMBOL_CONFIG, s->id);
		sc.symbol = y->id;
		sc.base_asset = y->base_asset;
		sc.quote_asset = y->quote_asset;
		sc.me_shard = y->me_shard;
		sc.status = WIRE_SYM_TRADING;
		sc.tick = y->tick;
		sc.lot = y->lot;
		sc.min_qty = y->min_qty;
		sc.min_notional = y->min_notional;
		sc.base_unit = y->base_unit;
		sc.ref_px = y->ref_px;
		sc.band_bps = y->band_bps;
		sc.maker_fee_bps = y->maker_fee_bps;
		sc.taker_fee_bps = y->taker_fee_bps;
		sc.map_version = 1;
		int rc = cns_propose(s->cns, s->now, &sc.hdr);
		if (rc != 0)
			return rc;
		sc_add(s, SC_BOOTSTRAPS, 1);
	}
	return 0;
}

/* Bootstrap admin, once per term, same content on every node: idempotent. An OMS shard
 * gets the routing config only while it is behind the configured epoch; every shard gets
 * the configured symbols its replica does not know yet (so a halt, a kill or a config made
 * through the control socket is never undone by a new leader). */
static void
bootstrap(struct app_shard *s)
{
	uint64_t term = cns_term(s->cns);
	if (s->boot_term == term)
		return;
	int rc = 0;
	if (s->is_oms) {
		const struct app_routing_conf *r = &s->app->cfg.routing;
		if (oms_route_epoch(s->svc) < r->epoch) {
			struct wire_routing_config rc_msg;
			memset(&rc_msg, 0, sizeof(rc_msg));
			wire_hdr_init(&rc_msg.hdr, WIRE_ROUTING_CONFIG, s->id);
			rc_msg.epoch = r->epoch;
			rc_msg.shard_count = r->shard_count;
			for (uint32_t i = 0; i < r->shard_count; i++) {
				rc_msg.shards[i].shard = r->shards[i];
				rc_msg.shards[i].state = WIRE_SHARD_ACTIVE;
			}
			rc_msg.pin_count = r->pin_count;
			memcpy(rc_msg.pins, r->pins, r->pin_count * sizeof(r->pins[0]));
			rc = propose_symbols(s);
			if (rc == 0)
				rc = cns_propose(s->cns, s->now, &rc_msg.hdr);
			if (rc == 0)
				sc_add(s, SC_BOOTSTRAPS, 1);
		} else {
			rc = propose_symbols(s);
		}
	} else {
		rc = propose_symbols(s);
	}
	if (rc == 0)
		s->boot_term = term;
}

void
app_bridge_tick(struct app_shard *s)
{
	if (cns_role(s->cns) != CNS_LEADER) {
		s->roles_ready = false;
		s->bridge_term = 0;
		if (s->is_oms)
			bridge_idle(s);
		return;
	}
	if (!state_current(s))
		return;
	bootstrap(s);
	if (!s->is_oms)
		return;
	uint64_t term = cns_term(s->cns);
	if (s->bridge_term != term) {
		/* Leadership gained: rebuild the bridge's and persister's queues from state. */
		s->bridge_term = term;
		s->roles_ready = true;
		sc_add(s, SC_BRIDGE_REBUILDS, 1);
		APP_LOG(INFO, "shard %u: leader in term %" PRIu64 ", bridge rebuilt from state",
			s->id, term);
		bridge_redrive(s, true);
		app_egress_reports_resend(s);
		return;
	}
	if (s->now - s->last_redrive >= s->redrive_ns)
		bridge_redrive(s, false);
}

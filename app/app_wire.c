/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wiring: every ring between the lcores of this node (struct app_rings), and the
 * dataplane routes that feed them. It runs on the main lcore before any role's init, so a
 * stage never creates, and never looks up, another stage's ring: it is handed its inboxes
 * and outboxes at set-up (app_wire_shard, app_wire_persist), the way DPDK's
 * examples/packet_ordering gives each worker its ring_in and ring_out. Knowing which ring
 * leads where (the gateway, a shard's peers, the persister's answers) is this file's alone.
 *
 * Ring names, sizes and flags: shardN_rx (dataplane ring, io → shard), shardN (tx queue,
 * shard → io), shardN_local (MP/SC, [lcores] ring_size), shardN_mgmt (SP/SC,
 * 4 × APP_CMD_PENDING_MAX), gateway_rx, gateway and gateway_local (the same, for the
 * gateway lcore with [gateway]; no command ring), persister_rq (MP/SC, ring_size; only with a database),
 * bridge_seal (MP/SC, ring_size) and bridge (tx queue, bridge → io) with a [bridge] lcore
 * that seals, mgmt_done (MP/SC, 2 × APP_CMDS_MAX).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "app.h"

static struct rte_ring *
ring_make(const char *name, uint32_t size, unsigned flags)
{
	struct rte_ring *r = rte_ring_create(name, size, (int)rte_socket_id(), flags);
	if (r == NULL)
		APP_LOG(ERR, "ring %s: %s", name, rte_strerror(rte_errno));
	return r;
}

/* The dataplane routes to shard index's rx ring. An echo shard takes every class it can
 * (the dataplane tests send them all); an oms or me shard its own, plus the gateway's
 * classes on the gateway lcore. */
static int
routes_add(struct app *app, uint32_t index)
{
	const struct app_shard_conf *sc = &app->cfg.shards[index];
	struct rte_ring *rx = app->rings.shard_rx[index];
	bool echo = sc->service == APP_SERVICE_ECHO;
	bool gateway = !echo && app->gateway_index == (int)index;
	int ret = dp_route_add(app->dp, DP_CLASS_SHARD, sc->id, rx);
	if (ret == 0 && (echo || sc->service == APP_SERVICE_OMS))
		ret = dp_route_add(app->dp, DP_CLASS_BRIDGE, sc->id, rx);
	if (ret == 0 && echo) {
		ret = dp_route_add(app->dp, DP_CLASS_GATEWAY, DP_SHARD_ANY, rx);
		if (ret == -EEXIST)
			ret = 0;
	}
	if (ret == 0 && gateway)
		ret = dp_route_add(app->dp, DP_CLASS_GATEWAY, DP_SHARD_ANY, rx);
	if (ret == 0 && gateway)
		ret = dp_route_add(app->dp, DP_CLASS_CLIENT, DP_SHARD_ANY, rx);
	return ret;
}

static int
shard_rings_make(struct app *app, uint32_t index)
{
	const struct app_config *cfg = &app->cfg;
	const struct app_shard_conf *sc = &cfg->shards[index];
	struct app_rings *r = &app->rings;
	char name[RTE_RING_NAMESIZE];

	snprintf(name, sizeof(name), "shard%u_rx", sc->id);
	r->shard_rx[index] = dp_ring_create(app->dp, name, cfg->ring_size, app->shard_bell[index]);
	snprintf(name, sizeof(name), "shard%u", sc->id);
	r->shard_txq[index] = dp_txq_create(app->dp, name, cfg->ring_size);
	if (r->shard_rx[index] == NULL || r->shard_txq[index] == NULL)
		return -ENOMEM;
	if (sc->service != APP_SERVICE_ECHO) {
		snprintf(name, sizeof(name), "shard%u_local", sc->id);
		r->shard_local[index] = ring_make(name, cfg->ring_size, RING_F_SC_DEQ);
		snprintf(name, sizeof(name), "shard%u_mgmt", sc->id);
		r->shard_mgmt[index] = ring_make(name, APP_CMD_PENDING_MAX * 4,
						 RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (r->shard_local[index] == NULL || r->shard_mgmt[index] == NULL)
			return -ENOMEM;
	}
	return routes_add(app, index);
}

/* [gateway]: the gateway lcore's rings, in the place after the last shard's (app.h), and
 * the client classes routed to it. Made before the shards' (an echo shard takes whatever
 * client class nobody took). */
static int
gateway_rings_make(struct app *app)
{
	const struct app_config *cfg = &app->cfg;
	struct app_rings *r = &app->rings;
	uint32_t index = (uint32_t)app->gateway_index;
	r->shard_rx[index] = dp_ring_create(app->dp, "gateway_rx", cfg->ring_size,
					    app->shard_bell[index]);
	r->shard_txq[index] = dp_txq_create(app->dp, "gateway", cfg->ring_size);
	r->shard_local[index] = ring_make("gateway_local", cfg->ring_size, RING_F_SC_DEQ);
	if (r->shard_rx[index] == NULL || r->shard_txq[index] == NULL ||
	    r->shard_local[index] == NULL)
		return -ENOMEM;
	int ret = dp_route_add(app->dp, DP_CLASS_GATEWAY, DP_SHARD_ANY, r->shard_rx[index]);
	if (ret == 0)
		ret = dp_route_add(app->dp, DP_CLASS_CLIENT, DP_SHARD_ANY, r->shard_rx[index]);
	return ret;
}

int
app_wire_init(struct app *app)
{
	const struct app_config *cfg = &app->cfg;
	int ret;

	memset(&app->rings, 0, sizeof(app->rings));
	/* Answered control-socket commands, shard lcores → main (docs/appliance.md). */
	app->mgmt_done = ring_make("mgmt_done", 2 * APP_CMDS_MAX, RING_F_SC_DEQ);
	if (app->mgmt_done == NULL)
		return -ENOMEM;
	if (cfg->gateway.enabled && (ret = gateway_rings_make(app)) != 0)
		return ret;
	for (uint32_t i = 0; i < cfg->shard_count; i++) {
		ret = shard_rings_make(app, i);
		if (ret != 0)
			return ret;
	}
	/* The bridge lcore MACs the shard lcores' network frames (app_seal.c). */
	if (cfg->bridge.enabled && cfg->bridge_seal) {
		app->rings.seal = ring_make("bridge_seal", cfg->ring_size, RING_F_SC_DEQ);
		if (app->rings.seal == NULL)
			return -ENOMEM;
		/* One to each io lcore: it spreads the frames by destination (app_seal.c). */
		for (uint16_t k = 0; k < dp_io_count(app->dp); k++) {
			char name[16];
			snprintf(name, sizeof(name), k == 0 ? "bridge" : "bridge%u", (unsigned)k);
			app->rings.seal_txq[k] = dp_txq_create_on(app->dp, name, cfg->ring_size, k);
			if (app->rings.seal_txq[k] == NULL)
				return -ENOMEM;
		}
	}
	/* The persister exists only with a database (app_config refuses one without it). */
	if (cfg->persister.enabled && cfg->db_conninfo[0] != '\0') {
		app->rings.persist_rq = ring_make("persister_rq", cfg->ring_size, RING_F_SC_DEQ);
		if (app->rings.persist_rq == NULL)
			return -ENOMEM;
	}
	return 0;
}

/* After every lcore stopped and every role's fini: the stages have drained their inboxes
 * (each knows what its ring carries). The dataplane rings go with dp_destroy. */
void
app_wire_fini(struct app *app)
{
	struct app_rings *r = &app->rings;
	for (uint32_t i = 0; i < APP_SHARDS_MAX; i++) {
		rte_ring_free(r->shard_local[i]);
		rte_ring_free(r->shard_mgmt[i]);
		r->shard_local[i] = NULL;
		r->shard_mgmt[i] = NULL;
	}
	rte_ring_free(r->persist_rq);
	r->persist_rq = NULL;
	rte_ring_free(r->seal); /* drained by app_seal_drain; the txq goes with dp_destroy */
	r->seal = NULL;
	rte_ring_free(app->mgmt_done);
	app->mgmt_done = NULL;
}

/* shard id → the local ring of the lcore hosting it on this node, NULL when none does. */
static struct rte_ring *
local_of(const struct app *app, uint16_t shard)
{
	int idx = app->shard_index[shard];
	return idx >= 0 ? app->rings.shard_local[idx] : NULL;
}

void
app_wire_shard(const struct app *app, uint32_t index, struct app_shard_wires *out)
{
	const struct app_rings *r = &app->rings;
	memset(out, 0, sizeof(*out));
	out->rx = r->shard_rx[index];
	out->txq = r->shard_txq[index];
	out->local = r->shard_local[index];
	out->mgmt_rx = r->shard_mgmt[index];
	out->mgmt_done = app->mgmt_done;
	out->persist_rq = r->persist_rq;
	out->gateway = app->gateway_index >= 0 ? r->shard_local[app->gateway_index] : NULL;
	for (uint16_t id = 0; id < DP_SHARDS_MAX; id++)
		out->peer[id] = local_of(app, id);
	out->seal = r->seal;
}

void
app_wire_persist(const struct app *app, struct app_persist_wires *out)
{
	memset(out, 0, sizeof(*out));
	out->rq = app->rings.persist_rq;
	for (uint16_t id = 0; id < DP_SHARDS_MAX; id++)
		out->reply[id] = local_of(app, id);
}

/* The bell of the lcore that takes from ring (a shard's local ring, the persister's
 * requests), NULL for another. Rung by whoever puts something in it (app_out; the control
 * socket's commands ring their shard's bell by index, app_mgmt_req.c). */
struct dp_bell *
app_ring_bell(const struct app *app, const struct rte_ring *ring)
{
	const struct app_rings *r = &app->rings;
	if (ring == NULL)
		return NULL;
	if (ring == r->seal)
		return app->bridge_bell; /* every network frame with a sealing bridge */
	for (uint32_t i = 0; i < app_slots(app); i++)
		if (r->shard_local[i] == ring)
			return app->shard_bell[i];
	return ring == r->persist_rq ? app->persist_bell : NULL;
}

struct rte_ring *
app_shard_local_ring(const struct app *app, uint32_t index)
{
	return app->rings.shard_local[index];
}

struct rte_ring *
app_shard_mgmt_ring(const struct app *app, uint32_t index)
{
	return app->rings.shard_mgmt[index];
}

struct rte_ring *
app_persist_ring(const struct app *app)
{
	return app->rings.persist_rq;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The routing a gateway on an lcore of its own routes by ([gateway], docs/appliance.md
 * "The gateway lcore"): the routing the node's first OMS replica applied (ROUTING_CONFIG,
 * WHALE_PIN, a snapshot), published by that shard lcore as an immutable copy behind one
 * pointer and read lock-free by the gateway lcore — liburcu's QSBR flavour, as
 * ARCHITECTURE.md §3 has it ("RCU-published read-only config").
 *
 *   - publisher (one: the OMS shard lcore, after its cycle's apply, when the epoch moved —
 *     every change of the routing moves it): fills a free copy of a fixed pool (nothing is
 *     allocated after start), swaps the pointer, marks the old copy retired. No free copy
 *     (main has not reclaimed yet): it tries again the next cycle, and the gateway routes
 *     by the older copy meanwhile — a hint the shard corrects (NOT_OWNER), never a wrong
 *     answer;
 *   - reader (the gateway lcore, a registered QSBR thread): app_route_read's copy is valid
 *     until the thread's next quiescent state, which the agent loop announces after every
 *     cycle; the thread is offline while it sleeps (app_rcu_*);
 *   - reclaim (main, every tick): the retired copies go back to the pool after a grace
 *     period (synchronize_rcu: every reader has finished the cycle it may have read them
 *     in; a cycle is microseconds, a sleeping reader is offline).
 */
#ifndef OMSD_APP_APP_ROUTE_PUB_H
#define OMSD_APP_APP_ROUTE_PUB_H

#include <stdbool.h>
#include <stdint.h>

#include "oms/oms.h"

#define APP_ROUTE_COPIES 4

struct app_route_copy {
	struct oms_route_info ri;
	uint32_t state;           /* enum in app_route_pub.c (atomic) */
};

struct app_route_pub {
	struct app_route_copy copies[APP_ROUTE_COPIES];
	struct app_route_copy *live;  /* the RCU-published copy; NULL: none yet */
	uint64_t publishes;           /* publisher's counters (relaxed stores) */
	uint64_t pool_waits;          /* a change waited a cycle for a free copy */
	uint64_t reclaims;            /* main's: copies back in the pool */
	uint64_t grace_ns;            /* main's: time spent in grace periods, in all */
};

/* Publisher: a copy of ri (oms_route_get's), published. false: no free copy (try again
 * next cycle). */
bool app_route_publish(struct app_route_pub *p, const struct oms_route_info *ri);
/* Reader (a registered thread, online): the routing published last, NULL before the
 * first. Valid until the caller's next quiescent state. */
const struct oms_route_info *app_route_read(struct app_route_pub *p);
/* Main lcore, never a reader: retired copies back into the pool after a grace period. The
 * main lcore may also read the live copy (it is the only one that frees). */
void app_route_reclaim(struct app_route_pub *p);
const struct oms_route_info *app_route_peek(const struct app_route_pub *p);

/* The agent loop of a reader lcore: register at start, quiescent after each cycle,
 * offline while idle, unregister at the end. */
void app_rcu_reader_begin(void);
void app_rcu_quiescent(void);
void app_rcu_offline(void);
void app_rcu_online(void);
void app_rcu_reader_end(void);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's own re-routing (docs/appliance.md "Gateway"): the shard is the routing
 * authority and the gateway's route a correctable hint (seed), so the gateway corrects it
 * itself instead of passing NOT_OWNER or NOT_LEADER to the client:
 *   - owner overrides: user -> the shard a NOT_OWNER named, used for every later message
 *     of that user while the gateway's routing epoch stays the one they were learned in;
 *   - requests in flight: each client order-entry message the gateway forwarded, kept
 *     until its ACK or NAK, so a refusal the gateway can act on sends it again to the
 *     named owner (or to the shard's new leader hint), at most hops_max forwards in all.
 * Both are caches of fixed size (4-way buckets, the oldest way overwritten): a lost entry
 * costs a default route or a NAK passed to the client, never a wrong answer.
 *
 * Pure: no DPDK, no clock, no allocation after init. Unit-tested in tests/unit/app.
 */
#ifndef OMSD_APP_APP_GW_ROUTE_H
#define OMSD_APP_APP_GW_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"

#define APP_GWR_WAYS 4            /* slots per bucket */
#define APP_GWR_MSG_MAX 80        /* bytes of the largest order-entry message kept */

struct app_gwr_ovr {
	uint64_t user;            /* 0: free */
	uint16_t shard;           /* owner named by the last NOT_OWNER */
	uint16_t reserved[3];
};

struct app_gwr_req {
	uint64_t user;            /* 0: free */
	uint64_t cl_ord_id;       /* the message's client id (NAKs and ACKs carry both) */
	uint16_t hops;            /* forwards so far, the first included */
	uint16_t shard;           /* shard it was forwarded to last */
	uint16_t len;             /* bytes of msg */
	uint16_t reserved;
	uint64_t msg[APP_GWR_MSG_MAX / 8]; /* the message as the client sent it */
};

struct app_gwr {
	struct app_gwr_ovr *ovr;  /* ovr_buckets x APP_GWR_WAYS */
	struct app_gwr_req *req;  /* req_buckets x APP_GWR_WAYS */
	uint32_t ovr_buckets;     /* powers of two */
	uint32_t req_buckets;
	uint32_t ovr_count;       /* overrides held */
	uint16_t hops_max;        /* forwards per message, the first included (>= 1) */
	uint16_t reserved;
	uint64_t epoch;           /* routing epoch the overrides belong to */
};

/* What to do with a refusal (NOT_OWNER, NOT_LEADER) of a forwarded message. */
enum app_gwr_act {
	APP_GWR_PASS = 0,         /* not ours to follow (unknown request): to the client */
	APP_GWR_REROUTE = 1,      /* forward the kept message again (hops counted) */
	APP_GWR_GIVEUP = 2,       /* hops exhausted: NAK the client, request forgotten */
};

/* Bytes for ovr_max overrides and req_max requests (rounded up to whole buckets). */
size_t app_gwr_footprint(uint32_t ovr_max, uint32_t req_max);
/* 0 or -EINVAL (a zero size, hops_max 0). mem (8-byte aligned) is zeroed here. */
int app_gwr_init(struct app_gwr *g, void *mem, uint32_t ovr_max, uint32_t req_max,
		 uint16_t hops_max);

/* The routing epoch the gateway routes by now: a different one drops every override
 * (the new routing is the better hint). Returns true when overrides were dropped. */
bool app_gwr_epoch(struct app_gwr *g, uint64_t epoch);
/* The override for user: 0 and *shard, or -ENOENT. */
int app_gwr_owner(const struct app_gwr *g, uint64_t user, uint16_t *shard);
/* A NOT_OWNER named shard as the owner of user. */
void app_gwr_learn(struct app_gwr *g, uint64_t user, uint16_t shard);
void app_gwr_forget(struct app_gwr *g, uint64_t user);

/* Keep a message forwarded to shard (its first forward: hops = 1; a client's retransmit
 * starts over). NULL when it is too long to keep or its user is 0. */
struct app_gwr_req *app_gwr_req_put(struct app_gwr *g, const struct wire_msg_hdr *msg,
				    uint16_t shard);
struct app_gwr_req *app_gwr_req_find(struct app_gwr *g, uint64_t user, uint64_t cl_ord_id);
void app_gwr_req_done(struct app_gwr_req *r);
/* A refusal of request r (NULL: not kept) that the gateway could follow to shard: reroute
 * (r->hops and r->shard updated), give up after hops_max forwards (r forgotten), or pass. */
enum app_gwr_act app_gwr_refused(struct app_gwr *g, struct app_gwr_req *r, uint16_t shard);

#endif

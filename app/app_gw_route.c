/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's owner overrides and requests in flight (app_gw_route.h).
 */
#include <errno.h>
#include <string.h>

#include "app_gw_route.h"
#include "common/check.h"

static uint32_t
buckets_for(uint32_t max)
{
	uint32_t b = 1;
	while ((uint64_t)b * APP_GWR_WAYS < max && b < (UINT32_C(1) << 24))
		b <<= 1;
	return b;
}

size_t
app_gwr_footprint(uint32_t ovr_max, uint32_t req_max)
{
	if (ovr_max == 0 || req_max == 0)
		return 0;
	return (size_t)buckets_for(ovr_max) * APP_GWR_WAYS * sizeof(struct app_gwr_ovr) +
	       (size_t)buckets_for(req_max) * APP_GWR_WAYS * sizeof(struct app_gwr_req);
}

int
app_gwr_init(struct app_gwr *g, void *mem, uint32_t ovr_max, uint32_t req_max, uint16_t hops_max)
{
	if (ovr_max == 0 || req_max == 0 || hops_max == 0)
		return -EINVAL;
	memset(g, 0, sizeof(*g));
	memset(mem, 0, app_gwr_footprint(ovr_max, req_max));
	g->ovr_buckets = buckets_for(ovr_max);
	g->req_buckets = buckets_for(req_max);
	g->ovr = mem;
	g->req = (struct app_gwr_req *)(void *)(g->ovr + (size_t)g->ovr_buckets * APP_GWR_WAYS);
	g->hops_max = hops_max;
	return 0;
}

static uint64_t
mix(uint64_t a, uint64_t b)
{
	uint64_t x = a * UINT64_C(0x9e3779b97f4a7c15) ^ b;
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

bool
app_gwr_epoch(struct app_gwr *g, uint64_t epoch)
{
	if (epoch == g->epoch)
		return false;
	g->epoch = epoch;
	if (g->ovr_count == 0)
		return false;
	memset(g->ovr, 0, (size_t)g->ovr_buckets * APP_GWR_WAYS * sizeof(g->ovr[0]));
	g->ovr_count = 0;
	return true;
}

static struct app_gwr_ovr *
ovr_bucket(const struct app_gwr *g, uint64_t user)
{
	return &g->ovr[(mix(user, 0) & (g->ovr_buckets - 1)) * APP_GWR_WAYS];
}

int
app_gwr_owner(const struct app_gwr *g, uint64_t user, uint16_t *shard)
{
	if (g->ovr_count == 0)
		return -ENOENT; /* nothing learnt under this routing: no hash, no bucket */
	const struct app_gwr_ovr *b = ovr_bucket(g, user);
	for (int w = 0; w < APP_GWR_WAYS && user != 0; w++) {
		if (b[w].user == user) {
			*shard = b[w].shard;
			return 0;
		}
	}
	return -ENOENT;
}

void
app_gwr_learn(struct app_gwr *g, uint64_t user, uint16_t shard)
{
	if (user == 0)
		return;
	struct app_gwr_ovr *b = ovr_bucket(g, user);
	struct app_gwr_ovr *free_way = NULL;
	for (int w = 0; w < APP_GWR_WAYS; w++) {
		if (b[w].user == user) {
			b[w].shard = shard;
			return;
		}
		if (b[w].user == 0 && free_way == NULL)
			free_way = &b[w];
	}
	if (free_way == NULL) {
		/* Full bucket: the oldest way goes, the others move down (newest last). */
		memmove(&b[0], &b[1], (APP_GWR_WAYS - 1) * sizeof(b[0]));
		free_way = &b[APP_GWR_WAYS - 1];
	} else {
		g->ovr_count++;
	}
	free_way->user = user;
	free_way->shard = shard;
	DCHECK(g->ovr_count <= g->ovr_buckets * APP_GWR_WAYS);
}

void
app_gwr_forget(struct app_gwr *g, uint64_t user)
{
	struct app_gwr_ovr *b = ovr_bucket(g, user);
	for (int w = 0; w < APP_GWR_WAYS && user != 0; w++) {
		if (b[w].user == user) {
			memset(&b[w], 0, sizeof(b[w]));
			g->ovr_count--;
			return;
		}
	}
}

static struct app_gwr_req *
req_bucket(const struct app_gwr *g, uint64_t user, uint64_t cl)
{
	return &g->req[(mix(user, cl) & (g->req_buckets - 1)) * APP_GWR_WAYS];
}

struct app_gwr_req *
app_gwr_req_find(struct app_gwr *g, uint64_t user, uint64_t cl_ord_id)
{
	struct app_gwr_req *b = req_bucket(g, user, cl_ord_id);
	for (int w = 0; w < APP_GWR_WAYS && user != 0; w++)
		if (b[w].user == user && b[w].cl_ord_id == cl_ord_id)
			return &b[w];
	return NULL;
}

struct app_gwr_req *
app_gwr_req_put(struct app_gwr *g, const struct wire_msg_hdr *msg, uint16_t shard)
{
	uint64_t user, cl;
	if (msg->length > APP_GWR_MSG_MAX || msg->length < sizeof(*msg) + 16)
		return NULL;
	memcpy(&user, msg + 1, sizeof(user));
	memcpy(&cl, (const uint8_t *)(msg + 1) + 8, sizeof(cl));
	if (user == 0)
		return NULL;
	/* One pass over the bucket: the request's own way (a retransmit), else the first free. */
	struct app_gwr_req *b = req_bucket(g, user, cl), *r = NULL, *free_way = NULL;
	for (int w = 0; w < APP_GWR_WAYS; w++) {
		if (b[w].user == user && b[w].cl_ord_id == cl) {
			r = &b[w];
			break;
		}
		if (b[w].user == 0 && free_way == NULL)
			free_way = &b[w];
	}
	if (r == NULL) {
		r = free_way;
		if (r == NULL) {
			/* Full: the oldest way goes (a lost request passes its NAK on). */
			memmove(&b[0], &b[1], (APP_GWR_WAYS - 1) * sizeof(b[0]));
			r = &b[APP_GWR_WAYS - 1];
		}
	}
	/* Every field written (the bytes of msg past len are never read). */
	r->user = user;
	r->cl_ord_id = cl;
	r->hops = 1;
	r->shard = shard;
	r->len = msg->length;
	r->reserved = 0;
	memcpy(r->msg, msg, msg->length);
	return r;
}

void
app_gwr_req_done(struct app_gwr_req *r)
{
	if (r != NULL)
		r->user = 0; /* free (a free entry's other fields are never read) */
}

enum app_gwr_act
app_gwr_refused(struct app_gwr *g, struct app_gwr_req *r, uint16_t shard)
{
	if (r == NULL || r->user == 0)
		return APP_GWR_PASS;
	DCHECK(r->hops >= 1);
	if (r->hops >= g->hops_max) {
		/* Shards that name each other, or a leader that cannot be found: stop here
		 * rather than bounce the message between them. */
		app_gwr_req_done(r);
		return APP_GWR_GIVEUP;
	}
	r->hops++;
	r->shard = shard;
	return APP_GWR_REROUTE;
}

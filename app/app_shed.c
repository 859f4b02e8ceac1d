/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's load shedding (app_shed.h).
 */
#include <string.h>

#include "app_shed.h"

void
app_shed_init(struct app_shed *s, const struct app_shed_conf *conf)
{
	memset(s, 0, sizeof(*s));
	s->conf = *conf;
	if (s->conf.min_samples == 0)
		s->conf.min_samples = 1;
}

/* Close the windows that ended by now: the one with ACKs decides the next; a window with
 * none after it (nothing in flight came back for a whole window) leaves no evidence of a
 * queue, so the gateway admits again. */
static void
roll(struct app_shed *s, struct app_shed_shard *h, uint64_t now_ns)
{
	if (h->win_start != 0 && now_ns - h->win_start < s->conf.window_ns)
		return;
	bool ended_now = h->win_start != 0 && now_ns - h->win_start < 2 * s->conf.window_ns;
	h->shedding = ended_now && h->win_n >= s->conf.min_samples &&
		      h->win_min > s->conf.target_ns;
	if (h->shedding)
		s->windows_shed++;
	h->win_start = now_ns != 0 ? now_ns : 1;
	h->win_min = UINT64_MAX;
	h->win_n = 0;
}

void
app_shed_sample(struct app_shed *s, uint16_t shard, uint64_t now_ns, uint64_t ack_ns)
{
	if (s->conf.target_ns == 0 || shard >= APP_SHED_SHARDS)
		return;
	struct app_shed_shard *h = &s->sh[shard];
	roll(s, h, now_ns);
	h->win_n++;
	if (ack_ns < h->win_min)
		h->win_min = ack_ns;
}

enum app_shed_verdict
app_shed_admit(struct app_shed *s, uint16_t shard, uint64_t now_ns, uint64_t waited_ns)
{
	if (shard >= APP_SHED_SHARDS)
		return APP_SHED_ADMIT;
	if (s->conf.target_ns != 0) {
		struct app_shed_shard *h = &s->sh[shard];
		roll(s, h, now_ns);
		if (h->shedding)
			return APP_SHED_QUEUE;
	}
	if (s->conf.wait_ns != 0 && waited_ns > s->conf.wait_ns)
		return APP_SHED_WAIT;
	return APP_SHED_ADMIT;
}

bool
app_shed_active(const struct app_shed *s, uint16_t shard)
{
	return shard < APP_SHED_SHARDS && s->sh[shard].shedding;
}

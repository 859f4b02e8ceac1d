/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leadership placement, the pure part (app_placement.h): the policies' preferred nodes, the
 * leader's record of which members are caught up and since when, and one check's verdict.
 * Every node computes the same ranking from the same configuration (spread and prefer read
 * only [shard.N]; colocate reads the ME leaders as this node knows them), so leadership,
 * once placed, stays put. docs/appliance.md "Leadership placement".
 */
#include <errno.h>
#include <string.h>

#include "app_placement.h"
#include "common/check.h"

static const char *const policy_names[] = {
	[APP_PLACE_NONE] = "none",
	[APP_PLACE_SPREAD] = "spread",
	[APP_PLACE_COLOCATE] = "colocate",
	[APP_PLACE_PREFER] = "prefer",
};

const char *
app_place_policy_name(enum app_place_policy p)
{
	if ((unsigned)p >= sizeof(policy_names) / sizeof(policy_names[0]))
		return "?";
	return policy_names[p];
}

int
app_place_policy_parse(const char *name, enum app_place_policy *out)
{
	for (unsigned i = 0; i < sizeof(policy_names) / sizeof(policy_names[0]); i++) {
		if (strcmp(name, policy_names[i]) == 0) {
			*out = (enum app_place_policy)i;
			return 0;
		}
	}
	return -EINVAL;
}

uint32_t
app_place_spread(uint16_t shard, const uint32_t *members, uint32_t count)
{
	CHECK(count >= 1);
	CHECK(count <= APP_PLACE_RANK_MAX);
	uint32_t sorted[APP_PLACE_RANK_MAX];
	memcpy(sorted, members, count * sizeof(sorted[0]));
	for (uint32_t i = 1; i < count; i++) { /* insertion sort: at most 5 ids */
		uint32_t v = sorted[i], j = i;
		for (; j > 0 && sorted[j - 1] > v; j--)
			sorted[j] = sorted[j - 1];
		sorted[j] = v;
	}
	uint32_t node = sorted[shard % count];
	CHECK(node != 0);
	return node;
}

uint32_t
app_place_colocate(const struct app_place_me *me, uint32_t count, uint32_t current)
{
	/* Sum the weight per distinct leader: at most `count` of them. */
	uint32_t nodes[APP_PLACE_ME_MAX], sums[APP_PLACE_ME_MAX], n = 0;
	CHECK(count <= APP_PLACE_ME_MAX);
	for (uint32_t i = 0; i < count; i++) {
		if (me[i].leader == 0 || me[i].weight == 0)
			continue;
		uint32_t k = 0;
		while (k < n && nodes[k] != me[i].leader)
			k++;
		if (k == n) {
			nodes[n] = me[i].leader;
			sums[n++] = 0;
		}
		sums[k] += me[i].weight;
	}
	uint32_t best = 0, best_sum = 0;
	for (uint32_t k = 0; k < n; k++) {
		bool better = sums[k] > best_sum ||
			      (sums[k] == best_sum && nodes[k] == current) ||
			      (sums[k] == best_sum && best != current && nodes[k] < best);
		if (better) {
			best = nodes[k];
			best_sum = sums[k];
		}
	}
	return best;
}

static void
rank_copy(struct app_place_rank *out, const uint32_t *nodes, uint32_t count)
{
	CHECK(count <= APP_PLACE_RANK_MAX);
	for (uint32_t i = 0; i < count; i++) {
		CHECK(nodes[i] != 0);
		out->nodes[out->count++] = nodes[i];
	}
}

void
app_place_rank_build(const struct app_place_in *in, struct app_place_rank *out)
{
	CHECK(in != NULL);
	CHECK(out != NULL);
	memset(out, 0, sizeof(*out));
	switch (in->policy) {
	case APP_PLACE_SPREAD:
		if (in->member_count > 0)
			out->nodes[out->count++] =
				app_place_spread(in->shard, in->members, in->member_count);
		break;
	case APP_PLACE_COLOCATE:
		if (!in->is_oms)
			rank_copy(out, in->pref, in->pref_count);
		else if (in->colocate_node != 0)
			out->nodes[out->count++] = in->colocate_node;
		break;
	case APP_PLACE_PREFER:
		rank_copy(out, in->pref, in->pref_count);
		break;
	case APP_PLACE_NONE:
	default:
		break;
	}
	CHECK(out->count <= APP_PLACE_RANK_MAX);
}

void
app_place_track_reset(struct app_place_track *t)
{
	memset(t, 0, sizeof(*t));
}

static int
track_find(const struct app_place_track *t, uint32_t node)
{
	for (uint32_t i = 0; i < t->count; i++)
		if (t->node[i] == node)
			return (int)i;
	return -1;
}

void
app_place_observe(struct app_place_track *t, const struct app_place_member *m, uint32_t count,
		  uint64_t last, uint64_t lag_max, uint64_t now_ns)
{
	CHECK(count <= APP_PLACE_RANK_MAX);
	CHECK(now_ns > 0);
	struct app_place_track next;
	memset(&next, 0, sizeof(next));
	for (uint32_t i = 0; i < count; i++) {
		int k = track_find(t, m[i].node);
		uint64_t match = m[i].match;
		/* UINT64_MAX: not known (not a member as the leader sees it). */
		bool known = match != UINT64_MAX;
		bool near = known && match <= last && last - match <= lag_max;
		bool heard = known && k >= 0 && t->match[k] != UINT64_MAX && match > t->match[k];
		bool ok = m[i].voter && near && heard;
		next.node[i] = m[i].node;
		next.voter[i] = m[i].voter;
		next.match[i] = match;
		if (ok)
			next.ok_since_ns[i] = k >= 0 && t->ok_since_ns[k] != 0 ? t->ok_since_ns[k]
									   : now_ns;
	}
	next.count = count;
	*t = next;
}

void
app_place_forget(struct app_place_track *t, uint32_t node)
{
	int k = track_find(t, node);
	if (k >= 0)
		t->ok_since_ns[k] = 0;
}

static const char *const verdict_names[APP_PLACE_V_COUNT] = {
	[APP_PLACE_V_OFF] = "off",
	[APP_PLACE_V_PLACED] = "placed",
	[APP_PLACE_V_MOVE] = "moving",
	[APP_PLACE_V_SETTLING] = "settling",
	[APP_PLACE_V_BEHIND] = "behind",
	[APP_PLACE_V_NOT_VOTER] = "not_voter",
	[APP_PLACE_V_BUSY] = "busy",
	[APP_PLACE_V_UNKNOWN] = "unknown",
	[APP_PLACE_V_FOLLOWER] = "follower",
};

const char *
app_place_verdict_name(enum app_place_verdict v)
{
	return (unsigned)v < APP_PLACE_V_COUNT ? verdict_names[v] : "?";
}

enum app_place_verdict
app_place_decide(const struct app_place_track *t, const struct app_place_rank *r,
		 uint32_t self, uint64_t now_ns, uint64_t settle_ns, uint32_t *target)
{
	CHECK(r->count <= APP_PLACE_RANK_MAX);
	CHECK(target != NULL);
	*target = 0;
	if (r->count == 0)
		return APP_PLACE_V_OFF;
	enum app_place_verdict passed = APP_PLACE_V_PLACED; /* why the best was passed over */
	for (uint32_t i = 0; i < r->count && r->nodes[i] != self; i++) {
		int k = track_find(t, r->nodes[i]);
		if (k < 0 || !t->voter[k]) {
			/* Not in the configuration in effect, or a learner: never a target. */
			if (passed == APP_PLACE_V_PLACED)
				passed = APP_PLACE_V_NOT_VOTER;
			continue;
		}
		if (t->ok_since_ns[k] == 0) {
			if (passed == APP_PLACE_V_PLACED)
				passed = APP_PLACE_V_BEHIND;
			continue;
		}
		CHECK(now_ns >= t->ok_since_ns[k]);
		if (now_ns - t->ok_since_ns[k] < settle_ns)
			return APP_PLACE_V_SETTLING;
		*target = r->nodes[i];
		return APP_PLACE_V_MOVE;
	}
	return passed;
}

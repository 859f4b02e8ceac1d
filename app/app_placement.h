/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leadership placement (docs/appliance.md "Leadership placement"): which node should lead a
 * shard, and when its leader hands leadership over to it. This header is the pure part:
 * the policies' choice of the preferred node(s), the leader's record of which members are
 * caught up and since when, and the verdict of one check. No DPDK, no clock (times are the
 * caller's), no allocation. The shard lcore's side (app_placement.c) gathers the inputs
 * from consensus every [placement] check_ms and acts on the verdict with cns_transfer.
 * Unit-tested in tests/unit/app/test_placement.c.
 */
#ifndef OMSD_APP_APP_PLACEMENT_H
#define OMSD_APP_APP_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#define APP_PLACE_RANK_MAX 5   /* a Raft group has at most 5 members (APP_MEMBERS_MAX) */
/* A member counts as caught up while it is at most this many entries behind the leader's
 * last index: one pipelining window at MTU 1500 (cns inflight_max 64 x 1 entry per
 * AppendEntries), what a healthy follower has in flight under load. */
#define APP_PLACE_LAG_MAX 64
#define APP_PLACE_ME_MAX 64    /* ME shards app_place_colocate weighs (DP_SHARDS_MAX) */

/* [placement] policy. */
enum app_place_policy {
	APP_PLACE_NONE = 0,     /* leaders stay where elections and operators put them */
	APP_PLACE_SPREAD = 1,   /* shard N prefers sorted(members)[N mod member_count] */
	APP_PLACE_COLOCATE = 2, /* an OMS shard prefers the node leading its ME shards; an ME
				 * shard its leader_preference, if any */
	APP_PLACE_PREFER = 3,   /* each shard its [shard.N] leader_preference list */
};

/* "none", "spread", "colocate", "prefer"; "?" for anything else. */
const char *app_place_policy_name(enum app_place_policy p);
/* The policy named name: 0, or -EINVAL. */
int app_place_policy_parse(const char *name, enum app_place_policy *out);

/* The preferred leaders of one shard, best first (empty: no preference). */
struct app_place_rank {
	uint32_t count;                       /* 0..APP_PLACE_RANK_MAX */
	uint32_t nodes[APP_PLACE_RANK_MAX];   /* node ids, distinct, non-zero */
};

/* spread: the (shard mod count)-th of members sorted by node id, so every node that has the
 * same [shard.N] members computes the same node. members: count >= 1 distinct ids. */
uint32_t app_place_spread(uint16_t shard, const uint32_t *members, uint32_t count);

/* colocate: one ME shard the OMS shard talks to, its leader as known here and its weight
 * (the [symbol.N] sections it owns). */
struct app_place_me {
	uint32_t leader;   /* 0: not known */
	uint32_t weight;   /* 0: ignored */
};
/* count <= APP_PLACE_ME_MAX. The node whose known ME leaderships weigh most; on a tie current (the OMS shard's leader
 * now) when it is among the tied, else the lowest node id, so leadership does not move
 * between equals. 0 when no ME leader with weight is known. */
uint32_t app_place_colocate(const struct app_place_me *me, uint32_t count, uint32_t current);

/* What a shard's ranking is built from (its configuration, and for colocate the node
 * app_place_colocate chose). */
struct app_place_in {
	enum app_place_policy policy;
	uint16_t shard;                 /* shard id */
	bool is_oms;                    /* an OMS shard (colocate follows the ME leaders) */
	const uint32_t *members;        /* [shard.N] members: the bootstrap set */
	uint32_t member_count;
	const uint32_t *pref;           /* [shard.N] leader_preference, best first */
	uint32_t pref_count;
	uint32_t colocate_node;         /* colocate, OMS shard: app_place_colocate's node */
};
void app_place_rank_build(const struct app_place_in *in, struct app_place_rank *out);

/* One member as the leader sees it at a check. */
struct app_place_member {
	uint32_t node;
	bool voter;                     /* a voter of the configuration in effect */
	uint64_t match;                 /* cns_match_index */
};

/* The leader's record of its members between checks (reset when it is not leader, or in a
 * new term: a new leader watches its members for settle_ns before it moves anything). */
struct app_place_track {
	uint32_t count;                             /* members recorded */
	uint32_t node[APP_PLACE_RANK_MAX];
	bool voter[APP_PLACE_RANK_MAX];             /* a voter at the last check */
	uint64_t match[APP_PLACE_RANK_MAX];         /* match index at the last check */
	uint64_t ok_since_ns[APP_PLACE_RANK_MAX];   /* caught up and heard at every check since
						       then; 0: not at the last check */
};

/* Forget everything (not leader, new term). */
void app_place_track_reset(struct app_place_track *t);
/* One check: each member is ok when it is a voter, at most lag_max entries behind last and
 * its match index moved since the previous check (it was heard: a live follower's match
 * moves between checks because an idle leader appends a tick entry every tick_ms <
 * check_ms; a dead one's stays). A member ok at this check keeps its ok_since_ns, or starts
 * it at now_ns (> 0); any other member's is cleared. Members not given are forgotten. */
void app_place_observe(struct app_place_track *t, const struct app_place_member *m,
		       uint32_t count, uint64_t last, uint64_t lag_max, uint64_t now_ns);
/* Forget that node was ok (after a transfer to it was started or refused): it must be
 * seen ok for settle_ns again before the next attempt. */
void app_place_forget(struct app_place_track *t, uint32_t node);

/* The verdict of one check on the leader. */
enum app_place_verdict {
	APP_PLACE_V_OFF = 0,        /* no preference for this shard */
	APP_PLACE_V_PLACED = 1,     /* the leader is the best node available */
	APP_PLACE_V_MOVE = 2,       /* transfer to *target */
	APP_PLACE_V_SETTLING = 3,   /* a better node is ok, for less than settle_ns */
	APP_PLACE_V_BEHIND = 4,     /* the better nodes are behind or not heard */
	APP_PLACE_V_NOT_VOTER = 5,  /* the best node is not a voter of the configuration */
	APP_PLACE_V_BUSY = 6,       /* (lcore) a membership change or transfer in progress */
	APP_PLACE_V_UNKNOWN = 7,    /* (lcore) colocate: no ME leader known */
	APP_PLACE_V_FOLLOWER = 8,   /* (lcore) this member does not lead: nothing to decide */
	APP_PLACE_V_COUNT,
};
const char *app_place_verdict_name(enum app_place_verdict v);

/* The leader self decides from the last app_place_observe: walk the rank best first, up to
 * self; the first node ok for settle_ns → MOVE (*target); one ok for less → SETTLING (wait
 * for it rather than move twice); nodes behind, not heard or not voters are passed over.
 * Reaching self (or the end) without a move: the reason the best node was passed over
 * (NOT_VOTER, else BEHIND), or PLACED when self is the best. Empty rank → OFF. */
enum app_place_verdict app_place_decide(const struct app_place_track *t,
					const struct app_place_rank *r, uint32_t self,
					uint64_t now_ns, uint64_t settle_ns, uint32_t *target);

#endif

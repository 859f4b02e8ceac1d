/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Role transitions and the member's persistent state: saving term and vote, the election
 * timer, the leader lease, stepping down to follower and taking office as leader.
 *
 * Every handler (elections, replication, snapshots, the dispatcher) changes role through
 * here, so the rules that go with a change of role (Raft §5.1: a newer term resets the vote;
 * Figure 2: a new leader's nextIndex and matchIndex) live in one place, below all of them.
 */
#include "cns_int.h"

void
cns_save_term_vote(struct cns *c, uint64_t term, uint32_t vote)
{
	/* Raft Figure 2: currentTerm and votedFor are persisted before answering. */
	CHECK(term >= c->term);
	if (term == c->term && vote == c->vote)
		return;
	c->term = term;
	c->vote = vote;
	c->env.log_ops->save_vote(c->env.log, term, vote);
}

void
cns_reset_election_timer(struct cns *c)
{
	uint64_t lo = c->cfg.election_timeout_min_ns;
	uint64_t hi = c->cfg.election_timeout_max_ns;
	/* Raft §5.2: randomized timeouts so split votes are rare and resolve quickly. */
	c->election_deadline_ns = c->now_ns + lo + prng_below(&c->prng, hi - lo + 1);
}

bool
cns_lease_active(const struct cns *c)
{
	/* Thesis §4.2.3: a server that heard from a current leader within the minimum election
	 * timeout does not grant votes or bump its term for a disruptive candidate. A leader is
	 * its own leader; check-quorum (cns_leader_tick) removes a leader that lost its
	 * majority, so the lease cannot outlive the majority. */
	if (c->role == CNS_LEADER)
		return true;
	if (c->leader == CNS_NODE_NONE)
		return false;
	return c->now_ns - c->leader_heard_ns < c->cfg.election_timeout_min_ns;
}

void
cns_become_follower(struct cns *c, uint64_t term, uint32_t leader)
{
	CHECK(term >= c->term);
	if (c->role == CNS_LEADER || c->role == CNS_CANDIDATE || c->role == CNS_PRE_CANDIDATE)
		CNS_COUNT(c, STEP_DOWNS);
	if (term > c->term) {
		/* Raft §5.1: a newer term resets the vote. */
		cns_save_term_vote(c, term, CNS_NODE_NONE);
		c->leader_match = c->base_index;
		c->match_acked = 0;
	}
	if (c->role == CNS_LEADER) {
		/* Proposals not yet sealed are dropped: the host NAKs them (not leader). */
		c->batch_len = 0;
		c->batch_msgs = 0;
	}
	c->role = CNS_FOLLOWER;
	c->transfer_target = CNS_NODE_NONE;
	c->transfer_vote = 0;
	if (leader != c->leader) {
		c->leader = leader;
		c->leader_match = c->base_index;
		c->match_acked = 0;
	}
	if (leader != CNS_NODE_NONE)
		c->leader_heard_ns = c->now_ns;
	cns_reset_election_timer(c);
}

void
cns_become_leader(struct cns *c)
{
	CHECK(c->role == CNS_CANDIDATE);
	c->role = CNS_LEADER;
	c->leader = c->cfg.self;
	c->leader_since_ns = c->now_ns;
	c->transfer_target = CNS_NODE_NONE;
	c->batch_len = 0;
	c->batch_msgs = 0;
	CNS_COUNT(c, LEADER_ELECTED);
	for (uint32_t i = 0; i < c->mem.count; i++)
		cns_peer_init(c, &c->peers[i], c->mem.ids[i]);
	c->term_first_index = UINT64_MAX;
	cns_append_first_entry(c);
	cns_replicate_all(c);
	CHECK(c->role == CNS_LEADER);
}

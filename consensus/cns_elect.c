/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election: pre-vote (thesis §9.6), RequestVote (Raft §5.2, §5.4.1), leader
 * stickiness (thesis §4.2.3) and TimeoutNow (thesis §3.10).
 */
#include "cns_int.h"

static uint32_t
votes_count(const struct cns *c)
{
	/* Votes count by the candidate's configuration in effect; learners' never do. */
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->mem.count; i++)
		if (cns_slot_votes(c, i))
			n += c->peers[i].vote_granted;
	return n;
}

static void
votes_reset(struct cns *c)
{
	for (uint32_t i = 0; i < c->mem.count; i++)
		c->peers[i].vote_granted = 0;
	CHECK(cns_self_votes(c));
	c->peers[c->self_slot].vote_granted = 1;
}

static void
send_request_vote(struct cns *c, uint64_t term, uint16_t flags)
{
	struct wire_request_vote m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_REQUEST_VOTE, c->cfg.shard);
	m.hdr.flags = flags;
	m.term = term;
	m.last_index = c->last_index;
	m.last_term = c->last_term;
	m.candidate = c->cfg.self;
	for (uint32_t i = 0; i < c->mem.count; i++)
		if (i != c->self_slot && cns_slot_votes(c, i))
			cns_send(c, c->mem.ids[i], &m);
}

void
cns_start_pre_vote(struct cns *c)
{
	CHECK(c->role != CNS_LEADER);
	if (!cns_self_votes(c)) {
		/* A learner, a removed member or a node still joining never stands. */
		cns_reset_election_timer(c);
		return;
	}
	/* Thesis §9.6: ask for votes at term+1 without bumping our term; only a node that
	 * could win disturbs the cluster. */
	c->role = CNS_PRE_CANDIDATE;
	c->leader = CNS_NODE_NONE;
	c->transfer_vote = 0;
	votes_reset(c);
	cns_reset_election_timer(c);
	CNS_COUNT(c, PRE_VOTES_STARTED);
	if (votes_count(c) >= c->majority) {
		cns_start_election(c, false);
		return;
	}
	send_request_vote(c, c->term + 1, WIRE_VOTE_F_PRE);
	CHECK(c->role == CNS_PRE_CANDIDATE);
}

void
cns_start_election(struct cns *c, bool transfer)
{
	CHECK(c->role != CNS_LEADER);
	CHECK(cns_self_votes(c));
	/* Raft §5.2: increment the term, vote for ourselves, ask everyone. */
	cns_save_term_vote(c, c->term + 1, c->cfg.self);
	c->role = CNS_CANDIDATE;
	c->leader = CNS_NODE_NONE;
	c->leader_match = c->base_index;
	c->transfer_vote = transfer;
	votes_reset(c);
	cns_reset_election_timer(c);
	CNS_COUNT(c, ELECTIONS_STARTED);
	if (votes_count(c) >= c->majority) {
		cns_become_leader(c);
		return;
	}
	send_request_vote(c, c->term, transfer ? WIRE_VOTE_F_TRANSFER : 0);
	CHECK(c->role == CNS_CANDIDATE);
}

static void
send_vote_reply(struct cns *c, uint32_t to, uint64_t term, bool granted, bool pre)
{
	struct wire_vote_reply r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_VOTE_REPLY, c->cfg.shard);
	r.hdr.flags = pre ? WIRE_VOTE_F_PRE : 0;
	r.term = term;
	r.voter = c->cfg.self;
	r.granted = granted;
	cns_send(c, to, &r);
}

void
cns_on_request_vote(struct cns *c, const struct wire_request_vote *m)
{
	bool pre = (m->hdr.flags & WIRE_VOTE_F_PRE) != 0;
	bool transfer = (m->hdr.flags & WIRE_VOTE_F_TRANSFER) != 0;
	/* A joining node that holds no configuration yet grants nothing: no configuration in
	 * which it may vote exists before it has caught up, so a candidate that counts it
	 * holds one from before its id was re-used (sim-raft --members seed 12: n3, wiped and
	 * re-joined with an empty log, completed a majority of {1 2 3} for n1, a node removed
	 * long before, which then led without the committed entries). */
	bool log_ok = c->mem.count > 0 && cns_log_up_to_date(c, m->last_index, m->last_term);

	if (pre) {
		/* Grant a pre-vote when a real vote at that term could be granted: the term is
		 * newer, the log is at least as up to date, and no leader is alive for us. The
		 * reply carries the asked term, so it never bumps the candidate's. */
		bool granted = m->term > c->term && log_ok && !cns_lease_active(c);
		if (granted)
			CNS_COUNT(c, VOTES_GRANTED);
		send_vote_reply(c, m->candidate, granted ? m->term : c->term, granted, true);
		return;
	}
	if (m->term > c->term) {
		if (cns_lease_active(c) && !transfer) {
			/* Thesis §4.2.3: ignore a disruptive candidate while a leader is alive. */
			CNS_COUNT(c, VOTES_IGNORED_LEASE);
			return;
		}
		cns_become_follower(c, m->term, CNS_NODE_NONE);
	}
	bool granted = false;
	if (m->term == c->term && log_ok &&
	    (c->vote == CNS_NODE_NONE || c->vote == m->candidate)) {
		/* Raft §5.2: one vote per term, first come first served; §5.4.1: only for a log
		 * at least as up to date as ours. Saved before the reply leaves. */
		CHECK(c->role != CNS_LEADER);
		CHECK(c->role != CNS_CANDIDATE);
		if (c->role != CNS_FOLLOWER)
			cns_become_follower(c, c->term, CNS_NODE_NONE);
		cns_save_term_vote(c, c->term, m->candidate);
		cns_reset_election_timer(c);
		granted = true;
		CNS_COUNT(c, VOTES_GRANTED);
	}
	send_vote_reply(c, m->candidate, c->term, granted, false);
}

void
cns_on_vote_reply(struct cns *c, const struct wire_vote_reply *m)
{
	bool pre = (m->hdr.flags & WIRE_VOTE_F_PRE) != 0;
	int slot = cns_slot_of(c, m->voter);
	if (slot < 0) {
		/* Not a member of the configuration we count by (removed since it was asked). */
		CNS_COUNT(c, STALE_MSGS);
		return;
	}

	if (pre) {
		if (m->granted) {
			if (c->role == CNS_PRE_CANDIDATE && m->term == c->term + 1) {
				c->peers[slot].vote_granted = 1;
				if (votes_count(c) >= c->majority)
					cns_start_election(c, false);
			}
		} else if (m->term > c->term) {
			/* Refused by a node in a newer term: join it. */
			cns_become_follower(c, m->term, CNS_NODE_NONE);
		}
		return;
	}
	if (m->term > c->term) {
		cns_become_follower(c, m->term, CNS_NODE_NONE);
		return;
	}
	if (c->role != CNS_CANDIDATE || m->term < c->term || !m->granted)
		return;
	c->peers[slot].vote_granted = 1;
	/* Raft §5.2: a majority of votes in this term makes us leader. */
	if (votes_count(c) >= c->majority)
		cns_become_leader(c);
}

void
cns_on_timeout_now(struct cns *c, const struct wire_timeout_now *m)
{
	/* Thesis §3.10: the leader brought us up to date and asks us to start an election at
	 * once, skipping pre-vote; our RequestVotes carry the transfer flag so the lease does
	 * not hold them back. */
	if (m->term != c->term || c->role == CNS_LEADER || !cns_self_votes(c))
		return;
	cns_start_election(c, true);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Membership changes, one server at a time (thesis §4.1-4.3): the configuration in effect
 * and the entries that change it, learners that catch up before they vote, a leader that
 * removes itself, and the configuration a snapshot carries at its index.
 *
 * The rules, each in one place:
 *  - a configuration is in effect on a member from when the member appends its entry, not
 *    from its commit; a truncation of that entry restores the one before (cns_log.c calls
 *    cns_members_appended and cns_members_truncated for every append and cut);
 *  - a leader appends a change only when the previous one and an entry of its own term are
 *    committed (the single-server bug of the thesis' errata: a leader of a new term must
 *    not stack a change on one a predecessor may have left uncommitted);
 *  - learners never count: not for votes, not for commit, not for check-quorum, and they
 *    never stand for election.
 */
#include "cns_int.h"

static uint32_t
voters_of(const struct cns_members *m)
{
	uint32_t mask = m->count >= 32 ? UINT32_MAX : (1u << m->count) - 1u;
	return m->count - (uint32_t)__builtin_popcount(m->learners & mask);
}

bool
cns_members_decode(const void *data, uint32_t len, struct cns_members *out)
{
	struct cns_config_entry ce;
	if (len != sizeof(ce))
		return false;
	memcpy(&ce, data, sizeof(ce));
	if (ce.member_count == 0 || ce.member_count > CNS_MEMBERS_MAX || ce.reserved != 0)
		return false;
	if ((ce.learners >> ce.member_count) != 0)
		return false;
	for (uint32_t i = 0; i < CNS_MEMBERS_MAX; i++) {
		if (i >= ce.member_count) {
			if (ce.members[i] != CNS_NODE_NONE)
				return false;
			continue;
		}
		if (ce.members[i] == CNS_NODE_NONE)
			return false;
		for (uint32_t j = 0; j < i; j++)
			if (ce.members[j] == ce.members[i])
				return false;
	}
	memset(out, 0, sizeof(*out));
	out->count = ce.member_count;
	out->learners = ce.learners;
	for (uint32_t i = 0; i < ce.member_count; i++)
		out->ids[i] = ce.members[i];
	/* A configuration without a voter could never elect a leader again. */
	return voters_of(out) > 0;
}

void
cns_members_encode(const struct cns_members *m, struct cns_config_entry *ce)
{
	CHECK(m->count <= CNS_MEMBERS_MAX);
	memset(ce, 0, sizeof(*ce));
	ce->member_count = m->count;
	ce->learners = m->learners;
	for (uint32_t i = 0; i < m->count; i++)
		ce->members[i] = m->ids[i];
}

void
cns_members_bootstrap(const struct cns *c, struct cns_members *out)
{
	/* The configured set, all voters; a joining node has none of its own. */
	memset(out, 0, sizeof(*out));
	if (c->cfg.flags & CNS_CFG_JOIN)
		return;
	out->count = c->cfg.member_count;
	for (uint32_t i = 0; i < c->cfg.member_count; i++)
		out->ids[i] = c->cfg.members[i];
}

void
cns_members_set(struct cns *c, const struct cns_members *m, uint64_t index)
{
	CHECK(m->count <= CNS_MEMBERS_MAX);
	/* Progress records follow their node to its new slot; a new member starts probing
	 * from our last entry (Raft Figure 2, as for every follower of a new leader). */
	struct cns_peer old[CNS_MEMBERS_MAX];
	uint32_t old_count = c->mem.count;
	memcpy(old, c->peers, sizeof(old));
	memset(c->peers, 0, sizeof(c->peers));
	c->self_slot = CNS_SLOT_NONE;
	for (uint32_t i = 0; i < m->count; i++) {
		uint32_t id = m->ids[i];
		if (id == c->cfg.self)
			c->self_slot = i;
		bool kept = false;
		for (uint32_t j = 0; j < old_count && !kept; j++) {
			if (old[j].id == id) {
				c->peers[i] = old[j];
				kept = true;
			}
		}
		if (!kept)
			cns_peer_init(c, &c->peers[i], id);
	}
	c->mem = *m;
	c->mem_index = index;
	c->majority = voters_of(m) / 2 + 1;
	if (c->transfer_target != CNS_NODE_NONE) {
		int slot = cns_slot_of(c, c->transfer_target);
		if (slot < 0 || !cns_slot_votes(c, (uint32_t)slot))
			c->transfer_target = CNS_NODE_NONE;
	}
	CHECK(c->self_slot == CNS_SLOT_NONE || c->peers[c->self_slot].id == c->cfg.self);
}

void
cns_members_appended(struct cns *c, uint64_t index, const struct wire_entry_hdr *e,
		     const void *data)
{
	if (e->kind != CNS_ENTRY_CONFIG)
		return;
	struct cns_members m;
	/* The leader builds them, a follower's entry_ok and the boot scan check them first. */
	CHECK(cns_members_decode(data, e->data_len, &m));
	CHECK(index > c->mem_index);
	c->mem_prev = c->mem;
	c->mem_prev_index = c->mem_index;
	c->mem_prev_known = 1;
	cns_members_set(c, &m, index);
}

void
cns_members_truncated(struct cns *c, uint64_t index)
{
	/* The entries at index and after are gone. */
	if (c->mem_index < index)
		return;
	/* Only the latest configuration entry can be uncommitted, so only it can be cut, and
	 * the one before it is known (it was in effect when this one was appended). */
	CHECK(c->mem_prev_known);
	CHECK(c->mem_prev_index < index);
	struct cns_members prev = c->mem_prev;
	c->mem_prev_known = 0;
	cns_members_set(c, &prev, c->mem_prev_index);
	CNS_COUNT(c, CONFIG_REVERTED);
}

bool
cns_members_leader_removed(struct cns *c)
{
	/* Thesis §4.2.2: a leader outside the configuration manages the cluster until the
	 * configuration that removed it commits, then steps down, handing over to the voter
	 * that holds everything so the cluster does not wait out an election timeout. */
	if (c->role != CNS_LEADER || cns_self_votes(c) || c->commit < c->mem_index)
		return false;
	uint32_t best = CNS_NODE_NONE;
	for (uint32_t i = 0; i < c->mem.count; i++) {
		if (i == c->self_slot || !cns_slot_votes(c, i))
			continue;
		if (c->peers[i].match_index == c->last_index) {
			best = c->peers[i].id;
			break;
		}
	}
	if (best != CNS_NODE_NONE) {
		struct wire_timeout_now m;
		memset(&m, 0, sizeof(m));
		wire_hdr_init(&m.hdr, WIRE_TIMEOUT_NOW, c->cfg.shard);
		m.term = c->term;
		m.leader = c->cfg.self;
		cns_send(c, best, &m);
		CNS_COUNT(c, TIMEOUT_NOW_SENT);
	}
	cns_become_follower(c, c->term, CNS_NODE_NONE);
	return true;
}

int
cns_snap_split(const struct cns *c, const uint8_t *blob, uint64_t len,
	       struct cns_members *members, uint64_t *svc_off)
{
	/* A snapshot starts with its configuration; one without the prefix was written before
	 * membership changes existed, and its configuration is the bootstrap set. */
	uint64_t magic = 0;
	if (len >= sizeof(magic))
		memcpy(&magic, blob, sizeof(magic));
	if (magic != CNS_SNAP_MAGIC) {
		cns_members_bootstrap(c, members);
		*svc_off = 0;
		return members->count > 0 ? 0 : -EINVAL;
	}
	if (len < sizeof(struct cns_snap_prefix))
		return -EINVAL;
	if (!cns_members_decode(blob + sizeof(magic), sizeof(struct cns_config_entry), members))
		return -EINVAL;
	*svc_off = sizeof(struct cns_snap_prefix);
	return 0;
}

int
cns_member_change(struct cns *c, uint64_t now_ns, enum cns_member_op op, uint32_t node)
{
	CHECK(c != NULL);
	if (now_ns > c->now_ns)
		c->now_ns = now_ns;
	if (c->role != CNS_LEADER)
		return -EPERM;
	if (c->transfer_target != CNS_NODE_NONE)
		return -EBUSY;
	/* One change at a time, and only once this term has committed an entry of its own. */
	if (c->term_first_index == UINT64_MAX || c->commit < c->term_first_index ||
	    c->commit < c->mem_index)
		return -EBUSY;
	if (node == CNS_NODE_NONE)
		return -EINVAL;
	int slot = cns_slot_of(c, node);
	struct cns_members m = c->mem;
	switch (op) {
	case CNS_MEMBER_ADD:
		if (slot >= 0)
			return -EINVAL;
		if (m.count == CNS_MEMBERS_MAX)
			return -ENOSPC;
		m.ids[m.count] = node;
		m.learners |= 1u << m.count;
		m.count++;
		break;
	case CNS_MEMBER_PROMOTE: {
		if (slot < 0 || cns_slot_votes(c, (uint32_t)slot))
			return -EINVAL;
		/* Thesis §4.2.1: a new voter that is far behind would stall commits while it
		 * catches up; promote only one within a batch of the leader's log. */
		const struct cns_peer *p = &c->peers[slot];
		if (p->match_index + c->cfg.append_entries_max < c->last_index)
			return -EAGAIN;
		m.learners &= ~(1u << (uint32_t)slot);
		break;
	}
	case CNS_MEMBER_REMOVE: {
		if (slot < 0)
			return -EINVAL;
		if (cns_slot_votes(c, (uint32_t)slot) && voters_of(&m) == 1)
			return -EINVAL;
		uint32_t learners = 0;
		uint32_t n = 0;
		for (uint32_t i = 0; i < m.count; i++) {
			if (i == (uint32_t)slot)
				continue;
			if (m.learners & (1u << i))
				learners |= 1u << n;
			m.ids[n++] = m.ids[i];
		}
		m.ids[n] = CNS_NODE_NONE;
		m.count = n;
		m.learners = learners;
		break;
	}
	default:
		return -EINVAL;
	}
	/* Entries proposed before the change stay before it. */
	cns_seal_batch(c);
	if (c->batch_len != 0)
		return -EAGAIN;
	struct cns_config_entry ce;
	cns_members_encode(&m, &ce);
	if (cns_leader_append(c, CNS_ENTRY_CONFIG, &ce, sizeof(ce)) != 0)
		return -EAGAIN;
	CNS_COUNT(c, CONFIG_CHANGES);
	cns_replicate_all(c);
	CHECK(c->mem_index == c->last_index);
	return 0;
}

uint64_t
cns_members(const struct cns *c, struct cns_members *out)
{
	CHECK(c != NULL);
	if (out != NULL)
		*out = c->mem;
	return c->mem_index;
}

bool
cns_is_voter(const struct cns *c, uint32_t node)
{
	int slot = cns_slot_of(c, node);
	return slot >= 0 && cns_slot_votes(c, (uint32_t)slot);
}

bool
cns_is_learner(const struct cns *c, uint32_t node)
{
	int slot = cns_slot_of(c, node);
	return slot >= 0 && !cns_slot_votes(c, (uint32_t)slot);
}

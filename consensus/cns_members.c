/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration in effect (thesis §4.1-4.3): decoding and encoding CONFIG entries, the
 * configuration that follows every append and cut of the log, the progress records that
 * follow their members, and the configuration a snapshot carries at its index. Below every
 * other file but the log store: it calls none of them. The host's call that changes
 * membership is cns_change.c; a leader that removed itself steps down in cns_replicate.c.
 *
 * The rules:
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

uint32_t
cns_members_voters(const struct cns_members *m)
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
	return cns_members_voters(out) > 0;
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
cns_peer_init(struct cns *c, struct cns_peer *p, uint32_t id)
{
	/* Raft Figure 2: nextIndex = leader last + 1, matchIndex = 0. */
	memset(p, 0, sizeof(*p));
	p->id = id;
	p->next_index = c->last_index + 1;
	p->state = CNS_PEER_PROBE;
	p->last_send_ns = c->now_ns;
	p->last_ack_ns = c->now_ns;
	p->progress_ns = c->now_ns;
	p->seq_next = 1;
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
	c->majority = cns_members_voters(m) / 2 + 1;
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

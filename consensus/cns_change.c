/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host's membership call (thesis §4.1-4.2): one server at a time, on the leader. The
 * change is an entry; it is in effect from its append (cns_members.c follows the log).
 */
#include "cns_int.h"

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
		if (cns_slot_votes(c, (uint32_t)slot) && cns_members_voters(&m) == 1)
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

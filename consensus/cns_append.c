/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The leader's side of its own log: cluster time stamped on each entry, appending an entry,
 * the first entry of a term, sealing the open batch of proposals and the TICK entries of an
 * idle leader. Nothing here sends: replication picks the entries up from the log.
 */
#include "cns_int.h"

uint64_t
cns_stamp(const struct cns *c)
{
	/* Cluster time (ARCHITECTURE.md §4): the leader's clock, clamped so it never goes
	 * backwards along the log, also across terms: a new leader holds every committed entry
	 * (Leader Completeness, Raft §5.4) and stamps at least its last entry's time. */
	return c->now_ns > c->last_time_ns ? c->now_ns : c->last_time_ns;
}

int
cns_leader_append(struct cns *c, uint16_t kind, const void *data, uint32_t len)
{
	CHECK(c->role == CNS_LEADER);
	struct wire_entry_hdr h;
	memset(&h, 0, sizeof(h));
	h.term = c->term;
	h.time_ns = cns_stamp(c);
	h.data_len = len;
	h.kind = kind;
	return cns_log_append(c, &h, data);
}

void
cns_append_first_entry(struct cns *c)
{
	/* Thesis §6.4 / Raft §8: a new leader commits an entry of its own term at once, which
	 * commits everything before it. The very first entry of a log is the configuration,
	 * so membership lives in the log and can grow into joint consensus (thesis §4.3). */
	int rc;
	if (c->last_index == 0) {
		struct cns_config_entry ce;
		cns_members_encode(&c->mem, &ce);
		rc = cns_leader_append(c, CNS_ENTRY_CONFIG, &ce, sizeof(ce));
	} else {
		rc = cns_leader_append(c, CNS_ENTRY_NOOP, NULL, 0);
	}
	c->need_first_entry = rc != 0;
	if (rc == 0)
		c->term_first_index = c->last_index;
	CHECK(c->last_index > 0 || c->need_first_entry);
}

void
cns_seal_batch(struct cns *c)
{
	if (c->role != CNS_LEADER || c->batch_len == 0)
		return;
	if (cns_leader_append(c, CNS_ENTRY_NORMAL, c->batch, c->batch_len) != 0)
		return; /* log store full: the batch waits for compaction */
	c->batch_len = 0;
	c->batch_msgs = 0;
	CNS_COUNT(c, BATCHES_SEALED);
}

void
cns_maybe_tick_entry(struct cns *c)
{
	/* An idle leader moves cluster time with a TICK entry, so service timers fire. */
	if (c->role != CNS_LEADER || c->cfg.tick_entry_ns == 0 || c->batch_len != 0)
		return;
	if (c->transfer_target != CNS_NODE_NONE || c->need_first_entry)
		return;
	if (c->now_ns < c->last_time_ns + c->cfg.tick_entry_ns)
		return;
	if (c->last_index - c->commit >= c->cfg.uncommitted_max)
		return;
	if (cns_leader_append(c, CNS_ENTRY_TICK, NULL, 0) == 0)
		CNS_COUNT(c, TICK_ENTRIES);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The core's view of its log: the log store plus the compaction base (the entry before the
 * first held one, whose term and time the core remembers, Raft §7), with the last entry's
 * index, term and time cached.
 */
#include "cns_int.h"

uint64_t
cns_log_term(const struct cns *c, uint64_t index)
{
	if (index == c->base_index)
		return c->base_term;
	if (index == c->snap.index && index != 0)
		return c->snap.term;
	if (index < c->base_index || index > c->last_index)
		return CNS_TERM_UNKNOWN;
	return c->env.log_ops->entry(c->env.log, index)->term;
}

const struct wire_entry_hdr *
cns_log_entry(const struct cns *c, uint64_t index)
{
	DCHECK(index > c->base_index);
	DCHECK(index <= c->last_index);
	return c->env.log_ops->entry(c->env.log, index);
}

void
cns_log_refresh(struct cns *c)
{
	const struct cns_log_ops *ops = c->env.log_ops;
	c->last_index = ops->last_index(c->env.log);
	CHECK(c->last_index >= c->base_index);
	if (c->last_index == c->base_index) {
		c->last_term = c->base_term;
		c->last_time_ns = c->base_time_ns;
	} else {
		const struct wire_entry_hdr *e = ops->entry(c->env.log, c->last_index);
		c->last_term = e->term;
		c->last_time_ns = e->time_ns;
	}
}

int
cns_log_append(struct cns *c, const struct wire_entry_hdr *hdr, const void *data)
{
	DCHECK(hdr->data_len % 8 == 0);
	DCHECK(hdr->data_len <= CNS_ENTRY_DATA_MAX);
	/* Cluster time never goes backwards along a log (ARCHITECTURE.md §4). */
	CHECK(hdr->time_ns >= c->last_time_ns);
	CHECK(hdr->term >= c->last_term);
	int rc = c->env.log_ops->append(c->env.log, c->last_index + 1, hdr, data);
	if (rc != 0) {
		CNS_COUNT(c, LOG_FULL);
		return rc;
	}
	c->last_index++;
	c->last_term = hdr->term;
	c->last_time_ns = hdr->time_ns;
	CNS_COUNT(c, ENTRIES_APPENDED);
	cns_members_appended(c, c->last_index, hdr, data);
	DCHECK(c->env.log_ops->last_index(c->env.log) == c->last_index);
	return 0;
}

void
cns_log_truncate(struct cns *c, uint64_t index)
{
	/* Raft §5.3: only uncommitted entries are ever removed (Leader Completeness). */
	CHECK(index > c->commit);
	CHECK(index > c->base_index);
	CHECK(index <= c->last_index);
	CNS_ADD(c, ENTRIES_TRUNCATED, c->last_index - index + 1);
	c->env.log_ops->truncate(c->env.log, index);
	cns_log_refresh(c);
	cns_members_truncated(c, index);
	if (c->durable > c->last_index)
		c->durable = c->last_index;
	if (c->leader_match > c->last_index)
		c->leader_match = c->last_index;
	CHECK(c->last_index == index - 1);
}

void
cns_log_compact(struct cns *c, uint64_t index)
{
	/* Raft §7: entries covered by the snapshot may be discarded. */
	CHECK(index <= c->snap.index);
	CHECK(index <= c->applied);
	if (index <= c->base_index)
		return;
	CHECK(index <= c->last_index);
	const struct wire_entry_hdr *e = cns_log_entry(c, index);
	uint64_t term = e->term;
	uint64_t time_ns = e->time_ns;
	c->env.log_ops->compact(c->env.log, index);
	c->base_index = index;
	c->base_term = term;
	c->base_time_ns = time_ns;
	cns_log_refresh(c);
	CHECK(c->env.log_ops->first_index(c->env.log) == index + 1);
}

void
cns_log_reset_to(struct cns *c, uint64_t index, uint64_t term, uint64_t time_ns)
{
	/* Discard the whole log; the next entry is index + 1 (snapshot install, Raft §7). The
	 * snapshot covers every committed entry we drop. */
	CHECK(index > c->base_index);
	const struct cns_log_ops *ops = c->env.log_ops;
	uint64_t first = ops->first_index(c->env.log);
	uint64_t last = ops->last_index(c->env.log);
	if (last >= first)
		ops->truncate(c->env.log, first);
	ops->compact(c->env.log, index);
	CHECK(ops->last_index(c->env.log) == index);
	CHECK(ops->first_index(c->env.log) == index + 1);
	c->base_index = index;
	c->base_term = term;
	c->base_time_ns = time_ns;
	cns_log_refresh(c);
}

bool
cns_log_up_to_date(const struct cns *c, uint64_t last_index, uint64_t last_term)
{
	/* Raft §5.4.1: compare the last terms, then the lengths. */
	if (last_term != c->last_term)
		return last_term > c->last_term;
	return last_index >= c->last_index;
}

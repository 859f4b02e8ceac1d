/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Proposals into the leader's open batch (sealed by cns_append.c); applying committed
 * entries to the hosted service on every member.
 */
#include "cns_int.h"

static bool
wire_msg_valid(const struct wire_msg_hdr *msg, uint32_t len)
{
	uint16_t checked = 0;
	return wire_msg_check(msg, len, &checked) == WIRE_E_OK && checked == len;
}

int
cns_propose(struct cns *c, uint64_t now_ns, const struct wire_msg_hdr *msg)
{
	CHECK(c != NULL);
	CHECK(msg != NULL);
	if (now_ns > c->now_ns)
		c->now_ns = now_ns;
	if (c->role != CNS_LEADER) {
		/* Followers redirect: the host NAKs NOT_LEADER with cns_leader() as the hint. */
		CNS_COUNT(c, PROPOSALS_NOT_LEADER);
		return -EPERM;
	}
	if (c->transfer_target != CNS_NODE_NONE)
		return -EBUSY;
	uint32_t len = msg->length;
	if (len > c->cfg.batch_bytes_max)
		return -EMSGSIZE;
	if (len < sizeof(*msg) || len % 8 != 0)
		return -EINVAL;
	/* Precondition: the host decoded it (wire_frame_decode validates every message). */
	DCHECK(wire_msg_valid(msg, len));
	if (c->last_index - c->commit >= c->cfg.uncommitted_max) {
		CNS_COUNT(c, PROPOSALS_BACKPRESSURE);
		return -EAGAIN;
	}
	if (c->batch_len + len > c->cfg.batch_bytes_max) {
		cns_seal_batch(c);
		if (c->batch_len != 0) {
			CNS_COUNT(c, PROPOSALS_BACKPRESSURE);
			return -EAGAIN;
		}
		cns_replicate_all(c);
	}
	memcpy(c->batch + c->batch_len, msg, len);
	c->batch_len += len;
	c->batch_msgs++;
	CNS_COUNT(c, PROPOSALS);
	DCHECK(c->batch_len <= c->cfg.batch_bytes_max);
	return 0;
}

static void
apply_config(struct cns *c, const struct wire_entry_hdr *e)
{
	/* In effect since it was appended; applied, it is what a snapshot here carries. */
	CHECK(cns_members_decode(e + 1, e->data_len, &c->mem_applied));
}

uint32_t
cns_apply(struct cns *c, uint32_t max)
{
	CHECK(c != NULL);
	const struct svc_ops *ops = c->env.svc_ops;
	uint32_t n = 0;
	uint64_t msgs = 0;
	while (n < max && c->applied < c->commit) {
		uint64_t index = c->applied + 1;
		const struct wire_entry_hdr *e = cns_log_entry(c, index);
		/* The service sees time only through entries, and never backwards. */
		CHECK(e->time_ns >= c->applied_time_ns);
		switch (e->kind) {
		case CNS_ENTRY_NORMAL: {
			/* The leader's host validated every message before it was batched; here
			 * the walk checks the framing and DCHECK repeats the full validation. */
			const uint8_t *data = (const uint8_t *)(e + 1);
			uint32_t pos = 0;
			while (pos < e->data_len) {
				const struct wire_msg_hdr *msg = (const void *)(data + pos);
				CHECK(e->data_len - pos >= sizeof(*msg));
				CHECK(msg->length >= sizeof(*msg));
				CHECK(msg->length % 8 == 0);
				CHECK(msg->length <= e->data_len - pos);
				DCHECK(wire_msg_valid(msg, msg->length));
				ops->apply(c->env.svc, index, e->time_ns, msg, c->env.sink);
				pos += msg->length;
				msgs++;
			}
			break;
		}
		case CNS_ENTRY_TICK:
		case CNS_ENTRY_NOOP:
			ops->tick(c->env.svc, index, e->time_ns, c->env.sink);
			break;
		case CNS_ENTRY_CONFIG:
			apply_config(c, e);
			break;
		default:
			CHECK(false);
		}
		c->applied = index;
		c->applied_time_ns = e->time_ns;
		n++;
	}
	CNS_ADD(c, ENTRIES_APPLIED, n);
	CNS_ADD(c, MSGS_APPLIED, msgs);
	CHECK(c->applied <= c->commit);
	return n;
}

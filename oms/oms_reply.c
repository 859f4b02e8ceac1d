/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replies to clients and operators: the header every emitted message gets, NAK, ADMIN_REPLY,
 * the provisional ACK and the execution report (the last inline in oms_int.h: every order
 * sends two at least).
 *
 * They sit at the bottom of the part so that every handler (admission, streams,
 * reconciliation, actors, routing) answers the same way without calling another handler's
 * file. Every reply to a resident user carries the next per-user egress seq; a NAK for a
 * user who is not resident carries 0.
 */
#include "oms/oms_int.h"

void
oms_nak(struct oms *oms, struct svc_sink *sink, struct oms_actor *a, uint64_t user,
	uint64_t cl_ord_id, uint16_t reason, uint16_t owner)
{
	struct wire_nak m;
	memset(&m, 0, sizeof(m));
	DCHECK(reason > WIRE_REASON_NONE);
	DCHECK(reason < WIRE_REASON_MAX);
	m.user = user;
	m.cl_ord_id = cl_ord_id;
	m.reason = reason;
	m.owner_shard = owner;
	m.route_epoch = oms->c.route.epoch;
	m.seq = a != NULL ? ++a->egress_seq : 0;
	oms_count(oms, OMS_C_NAKS);
	oms->c.naks_by_reason[reason]++;
	OMS_EMIT(sink, WIRE_DEST_CLIENT, m, WIRE_NAK, 0);
}

void
oms_admin_reply(struct oms *oms, struct svc_sink *sink, uint64_t req_id, uint16_t reason,
		uint64_t value)
{
	struct wire_admin_reply m;
	memset(&m, 0, sizeof(m));
	m.req_id = req_id;
	m.reason = reason;
	m.value = value;
	oms_count(oms, OMS_C_ADMIN);
	OMS_EMIT(sink, WIRE_DEST_ADMIN, m, WIRE_ADMIN_REPLY, oms->c.limits.shard_id);
}

void
oms_ack(struct oms *oms, struct oms_actor *a, uint64_t cl_ord_id, uint64_t shard_seq,
	uint64_t time_ns, struct svc_sink *sink)
{
	struct wire_ack m;
	memset(&m, 0, sizeof(m));
	m.user = a->user;
	m.cl_ord_id = cl_ord_id;
	/* The whole orderId as first given: a duplicate answered after the user moved between
	 * shards names the shard that admitted it, not this one (found by sim-system). */
	m.oid.user = a->user;
	m.oid.shard_seq = shard_seq;
	m.seq = ++a->egress_seq;
	m.time_ns = time_ns;
	oms_count(oms, OMS_C_ACKS);
	OMS_EMIT(sink, WIRE_DEST_CLIENT, m, WIRE_ACK, 0);
}

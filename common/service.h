/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The interface between a shard's consensus and the deterministic service it hosts (`me` or
 * `oms`), and between a service and its host's egress.
 *
 * A service is a pure state machine: it is given committed messages one at a time with the
 * cluster time of their log entry, and it writes egress messages to a sink. It never asks
 * whether it is the leader: every member produces the same egress, and the host discards it
 * on followers (ARCHITECTURE.md §3).
 */
#ifndef OMSD_COMMON_SERVICE_H
#define OMSD_COMMON_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* Egress sink. emit() copies the message (hdr.length bytes) before it returns; the service
 * may reuse its buffer at once. dest says where the host sends it. emit never fails from
 * the service's point of view: a host that cannot keep up counts and applies backpressure
 * upstream, it does not push the failure into the state machine. */
struct svc_sink {
	void *ctx;
	void (*emit)(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg);
};

static inline void
svc_emit(struct svc_sink *sink, enum wire_dest dest, const void *msg)
{
	sink->emit(sink->ctx, dest, (const struct wire_msg_hdr *)msg);
}

/* The operations consensus needs from a hosted service. */
struct svc_ops {
	const char *name;
	/* Apply one committed, already validated message at cluster time now_ns (non-decreasing
	 * across calls). index is the log index of the entry it came in. */
	void (*apply)(void *svc, uint64_t index, uint64_t now_ns, const struct wire_msg_hdr *msg,
		      struct svc_sink *sink);
	/* Cluster time moved to now_ns with no message (tick entry): run due timers. */
	void (*tick)(void *svc, uint64_t index, uint64_t now_ns, struct svc_sink *sink);
	/* Exact size snapshot() will write for the current state. */
	size_t (*snapshot_size)(const void *svc);
	/* Serialise the whole state, byte-exact and deterministic. Returns bytes written, or 0
	 * if cap is too small. */
	size_t (*snapshot)(const void *svc, void *buf, size_t cap);
	/* Replace the state with a snapshot. 0, or -EINVAL for a malformed/corrupt snapshot
	 * (the state is then reset to empty). */
	int (*restore)(void *svc, const void *buf, size_t len);
	/* Hash of the whole state; equal states hash equal on every member. */
	uint64_t (*state_hash)(const void *svc);
};

/*
 * Define `const struct svc_ops PREFIX_svc_ops` for a service whose typed entry points follow
 * the house shape (me, oms):
 *   void   PREFIX_apply(TYPE *, uint64_t now_ns, const struct wire_msg_hdr *, struct svc_sink *)
 *   void   PREFIX_tick(TYPE *, uint64_t now_ns, struct svc_sink *)
 *   size_t PREFIX_snapshot_size(const TYPE *)
 *   size_t PREFIX_snapshot(const TYPE *, void *buf, size_t cap)
 *   int    PREFIX_restore(TYPE *, const void *buf, size_t len)
 *   uint64_t PREFIX_state_hash(const TYPE *)
 * The adapters only convert `void *` to TYPE * and drop the log index (a service needs time,
 * not positions); one definition keeps them identical for every service.
 */
#define SVC_OPS_DEFINE(prefix, type)                                                       \
	static void prefix##_svc_apply(void *svc, uint64_t index, uint64_t now_ns,         \
				       const struct wire_msg_hdr *msg, struct svc_sink *sink) \
	{                                                                                  \
		(void)index;                                                               \
		prefix##_apply((type *)svc, now_ns, msg, sink);                            \
	}                                                                                  \
	static void prefix##_svc_tick(void *svc, uint64_t index, uint64_t now_ns,          \
				      struct svc_sink *sink)                               \
	{                                                                                  \
		(void)index;                                                               \
		prefix##_tick((type *)svc, now_ns, sink);                                  \
	}                                                                                  \
	static size_t prefix##_svc_snapshot_size(const void *svc)                          \
	{                                                                                  \
		return prefix##_snapshot_size((const type *)svc);                          \
	}                                                                                  \
	static size_t prefix##_svc_snapshot(const void *svc, void *buf, size_t cap)        \
	{                                                                                  \
		return prefix##_snapshot((const type *)svc, buf, cap);                     \
	}                                                                                  \
	static int prefix##_svc_restore(void *svc, const void *buf, size_t len)            \
	{                                                                                  \
		return prefix##_restore((type *)svc, buf, len);                            \
	}                                                                                  \
	static uint64_t prefix##_svc_state_hash(const void *svc)                           \
	{                                                                                  \
		return prefix##_state_hash((const type *)svc);                             \
	}                                                                                  \
	const struct svc_ops prefix##_svc_ops = {                                          \
		.name = #prefix,                                                           \
		.apply = prefix##_svc_apply,                                               \
		.tick = prefix##_svc_tick,                                                 \
		.snapshot_size = prefix##_svc_snapshot_size,                               \
		.snapshot = prefix##_svc_snapshot,                                         \
		.restore = prefix##_svc_restore,                                           \
		.state_hash = prefix##_svc_state_hash,                                     \
	}

#endif

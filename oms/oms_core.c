/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The dispatcher: apply one committed message (timers first, then the message's handler),
 * tick, and the svc_ops table consensus hosts. It is the top of the part: it knows every
 * handler, and no handler calls it (docs/oms.md, "Files and layers").
 *
 * Seed invariant 2: no external I/O inside the state machine. Time arrives only as the
 * cluster time of an applied entry (now_ns); every timer (TTL sweep, drain, reconciliation,
 * write-back, stream acks, replay requests) fires when an applied entry's time passes its deadline, so
 * every member of the shard fires it at the same log position.
 */
#include "oms/oms_int.h"

static void
run_timers(struct oms *oms, uint64_t now_ns, struct svc_sink *sink)
{
	/* Cluster time never goes backwards (consensus clamps it); keep it so if it did. */
	if (now_ns > oms->c.now_ns)
		oms->c.now_ns = now_ns;
	uint64_t now = oms->c.now_ns;
	if (now < oms->timers_due_ns)
		return; /* no deadline passed: one test for the three timers */
	if (now >= oms->c.next_sweep_ns) {
		oms->c.next_sweep_ns = now + oms->c.limits.sweep_interval_ns;
		oms_sweep(oms, sink);
		oms_drain_step(oms, sink);
	}
	if (oms->c.limits.reconcile_interval_ns != 0 && now >= oms->c.next_recon_ns) {
		oms->c.next_recon_ns = now + oms->c.limits.reconcile_interval_ns;
		oms_recon_sweep(oms, sink);
	}
	/* After the sweep: evictions take their room first (oms_writeback.c). */
	if (oms->c.limits.writeback_interval_ns != 0 && now >= oms->c.next_wb_ns) {
		oms->c.next_wb_ns = now + oms->c.limits.writeback_interval_ns;
		oms_writeback_pass(oms, sink);
	}
	uint64_t due = oms->c.next_sweep_ns;
	if (oms->c.limits.reconcile_interval_ns != 0 && oms->c.next_recon_ns < due)
		due = oms->c.next_recon_ns;
	if (oms->c.limits.writeback_interval_ns != 0 && oms->c.next_wb_ns < due)
		due = oms->c.next_wb_ns;
	oms->timers_due_ns = due;
}

/* Every fixed-size message we accept must be exactly its schema size (oms_apply took off
 * what a newer wire minor appended). */
static bool
msg_ok(const struct wire_msg_hdr *msg)
{
	uint16_t want = wire_type_size(msg->type);
	return want != 0 && msg->length == want;
}

static void dispatch(struct oms *oms, const struct wire_msg_hdr *msg, struct svc_sink *sink);

/* Seed: "The order is parked and applied at a deterministic log position once HydrateUser
 * lands." The parked messages of a freshly installed actor run in log order. ME events were
 * sequenced when they were parked, so they go straight to oms_event_apply; client messages
 * go through the dispatcher again (the one re-entry of the part, docs/oms.md). */
static void
parked_run(struct oms *oms, struct oms_actor *a, struct svc_sink *sink)
{
	struct oms_parked p;
	while (oms_actor_serving(a) && oms_actor_park_pop(oms, a, &p)) {
		const struct wire_msg_hdr *h = (const void *)p.msg;
		if (p.pad == 1)
			oms_event_apply(oms, a, (const struct wire_me_event *)(const void *)p.msg, NULL,
					sink);
		else
			dispatch(oms, h, sink);
	}
}

/* HYDRATE_USER installs the actor, then its parked messages run. Out of line: the buffer
 * parked_run pops into would otherwise give dispatch a stack frame, and every message its
 * register saves, where each other case is a tail call. */
static __attribute__((noinline)) void
hydrate_user(struct oms *oms, const struct wire_hydrate_user *m, struct svc_sink *sink)
{
	struct oms_actor *a = oms_on_hydrate_user(oms, m, sink);
	if (a != NULL)
		parked_run(oms, a, sink);
}

static void
dispatch(struct oms *oms, const struct wire_msg_hdr *msg, struct svc_sink *sink)
{
	if (!msg_ok(msg)) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return;
	}
	switch (msg->type) {
	case WIRE_NEW_ORDER:
		oms_on_new_order(oms, (const struct wire_new_order *)msg, sink);
		break;
	case WIRE_CANCEL:
		oms_on_cancel(oms, (const struct wire_cancel *)msg, sink);
		break;
	case WIRE_AMEND:
		oms_on_amend(oms, (const struct wire_amend *)msg, sink);
		break;
	case WIRE_CANCEL_REPLACE:
		oms_on_cancel_replace(oms, (const struct wire_cancel_replace *)msg, sink);
		break;
	case WIRE_ME_EVENT:
		oms_on_me_event(oms, (const struct wire_me_event *)msg, sink);
		break;
	case WIRE_ME_RESULT:
		oms_on_me_result(oms, (const struct wire_me_result *)msg, sink);
		break;
	case WIRE_OPEN_ORDERS_SNAPSHOT:
		oms_on_open_orders_snapshot(oms, (const struct wire_open_orders_snapshot *)msg,
					    sink);
		break;
	case WIRE_HYDRATE_USER:
		hydrate_user(oms, (const struct wire_hydrate_user *)msg, sink);
		break;
	case WIRE_FLUSH_COMPLETE:
		oms_on_flush_complete(oms, (const struct wire_flush_complete *)msg, sink);
		break;
	case WIRE_ROUTING_CONFIG:
		oms_on_routing_config(oms, (const struct wire_routing_config *)msg, sink);
		break;
	case WIRE_SYMBOL_CONFIG:
		oms_on_symbol_config(oms, (const struct wire_symbol_config *)msg, sink);
		break;
	case WIRE_SYMBOL_STATUS:
		oms_on_symbol_status(oms, (const struct wire_symbol_status_msg *)msg, sink);
		break;
	case WIRE_KILL_SWITCH:
		oms_on_kill_switch(oms, (const struct wire_kill_switch *)msg, sink);
		break;
	case WIRE_TRANSFER:
		oms_on_transfer(oms, (const struct wire_transfer *)msg, sink);
		break;
	case WIRE_TRANSFER_FOUND:
		oms_on_transfer_found(oms, (const struct wire_transfer_found *)msg, sink);
		break;
	case WIRE_WHALE_PIN:
		oms_on_whale_pin(oms, (const struct wire_whale_pin *)msg, sink);
		break;
	case WIRE_USER_ADMIN:
		oms_on_user_admin(oms, (const struct wire_user_admin *)msg, sink);
		break;
	case WIRE_RELEASE_DONE:
		oms_on_release_done(oms, (const struct wire_release_claim *)msg, sink);
		break;
	case WIRE_TICK:
		oms_streams_tick(oms, sink);
		break;
	default:
		/* Not ours (e.g. SNAPSHOT_REQUEST is consensus business): counted, ignored. */
		oms_count(oms, OMS_C_BAD_MSGS);
		break;
	}
}

/* After every message and tick: users waiting for room get it if something that may have
 * made some happened (oms_core.admit_due). One test when nobody waits. */
static inline void
admit(struct oms *oms, struct svc_sink *sink)
{
	if (oms->c.waiting.count > 0 && oms->c.admit_due) {
		oms->c.admit_due = 0;
		oms_admit_pump(oms, sink);
	}
}

void
oms_apply(struct oms *oms, uint64_t now_ns, const struct wire_msg_hdr *msg, struct svc_sink *sink)
{
	CHECK(oms != NULL);
	CHECK(sink != NULL);
	run_timers(oms, now_ns, sink);
	oms_count(oms, OMS_C_MSGS);
	if (msg == NULL || msg->length < sizeof(*msg)) {
		oms_count(oms, OMS_C_BAD_MSGS);
		return;
	}
	/* Fields a newer wire minor appended are not ours to read: the state (parked copies,
	 * held events included) is the same with or without them, on a replica of either minor
	 * (docs/wire.md, "Versions"). */
	union wire_msg_any known;
	uint16_t size = wire_type_size(msg->type);
	/* wire_msg_known copies only a message longer than its type's struct; the test here
	 * spares every other message the call (the copy's result is the same either way). */
	if (size != 0 && msg->length > size)
		msg = wire_msg_known(msg, &known);
	dispatch(oms, msg, sink);
	admit(oms, sink);
}

void
oms_tick(struct oms *oms, uint64_t now_ns, struct svc_sink *sink)
{
	CHECK(oms != NULL);
	CHECK(sink != NULL);
	run_timers(oms, now_ns, sink);
	admit(oms, sink);
	oms_streams_tick(oms, sink);
}

/* The service table consensus hosts (common/service.h). */
SVC_OPS_DEFINE(oms, struct oms);

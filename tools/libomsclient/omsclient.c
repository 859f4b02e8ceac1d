/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libomsclient: the public API (omsclient.h) over the order-entry engine of the tools
 * (tools/client.h), which does the work: frames, the request table, retransmits, answer
 * numbers and replays, sessions. This file only translates: the caller's plain structs
 * into wire messages (checked with the node's own decoder predicates, wire_msg_check),
 * the engine's events (wire messages) into struct omsc_event, and it settles requests
 * (client_release) when their answer is final for them, so the table holds only what is
 * still live. Nothing here allocates after omsc_open.
 */
#include "tools/libomsclient/omsclient.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth.h"
#include "common/check.h"
#include "common/wire.h"
#include "tools/client.h"

#ifndef OMSC_VERSION_STRING
#error "OMSC_VERSION_STRING: the build passes the project's version"
#endif

/* The public values are the wire's: one list each, and these make a drift a build error
 * (compared as int: the enums are different types). */
#define SAME(a, b, what) static_assert((int)(a) == (int)(b), what)
#define SAME_REASON(name, value) SAME(OMSC_REASON_##name, WIRE_REASON_##name, "reason " #name);
OMSC_REASONS(SAME_REASON)
#undef SAME_REASON
SAME(OMSC_REASON_COUNT, WIRE_REASON_MAX, "a reason is missing from OMSC_REASONS");
SAME(OMSC_SIDE_BUY, WIRE_SIDE_BUY, "side");
SAME(OMSC_SIDE_SELL, WIRE_SIDE_SELL, "side");
SAME(OMSC_ORD_LIMIT, WIRE_ORD_LIMIT, "ord_type");
SAME(OMSC_ORD_MARKET, WIRE_ORD_MARKET, "ord_type");
SAME(OMSC_TIF_GTC, WIRE_TIF_GTC, "tif");
SAME(OMSC_TIF_IOC, WIRE_TIF_IOC, "tif");
SAME(OMSC_TIF_FOK, WIRE_TIF_FOK, "tif");
SAME(OMSC_TIF_GTD, WIRE_TIF_GTD, "tif");
SAME(OMSC_TIF_POST_ONLY, WIRE_TIF_POST_ONLY, "tif");
SAME(OMSC_STP_NONE, WIRE_STP_NONE, "stp");
SAME(OMSC_STP_EXPIRE_TAKER, WIRE_STP_EXPIRE_TAKER, "stp");
SAME(OMSC_STP_EXPIRE_MAKER, WIRE_STP_EXPIRE_MAKER, "stp");
SAME(OMSC_STP_EXPIRE_BOTH, WIRE_STP_EXPIRE_BOTH, "stp");
SAME(OMSC_EXEC_PENDING, WIRE_EXEC_PENDING, "exec");
SAME(OMSC_EXEC_OPEN, WIRE_EXEC_OPEN, "exec");
SAME(OMSC_EXEC_REJECTED, WIRE_EXEC_REJECTED, "exec");
SAME(OMSC_EXEC_FILL, WIRE_EXEC_FILL, "exec");
SAME(OMSC_EXEC_CANCELLED, WIRE_EXEC_CANCELLED, "exec");
SAME(OMSC_EXEC_DONE, WIRE_EXEC_DONE, "exec");
SAME(OMSC_EXEC_AMENDED, WIRE_EXEC_AMENDED, "exec");
SAME(OMSC_EXEC_CANCEL_REJECTED, WIRE_EXEC_CANCEL_REJECTED, "exec");
SAME(OMSC_EXEC_CANCEL_REJECTED + 1, WIRE_EXEC_MAX, "an exec kind is missing");
SAME(OMSC_CAUSE_USER, WIRE_CAUSE_USER, "cause");
SAME(OMSC_CAUSE_IOC, WIRE_CAUSE_IOC, "cause");
SAME(OMSC_CAUSE_FOK, WIRE_CAUSE_FOK, "cause");
SAME(OMSC_CAUSE_STP, WIRE_CAUSE_STP, "cause");
SAME(OMSC_CAUSE_EXPIRED, WIRE_CAUSE_EXPIRED, "cause");
SAME(OMSC_CAUSE_HALT, WIRE_CAUSE_HALT, "cause");
SAME(OMSC_CAUSE_KILL_SWITCH, WIRE_CAUSE_KILL_SWITCH, "cause");
SAME(OMSC_CAUSE_NO_LIQUIDITY, WIRE_CAUSE_NO_LIQUIDITY, "cause");
SAME(OMSC_CAUSE_REPLACED, WIRE_CAUSE_REPLACED, "cause");
SAME(OMSC_CAUSE_RECONCILE, WIRE_CAUSE_RECONCILE, "cause");
SAME(OMSC_CAUSE_RECONCILE + 1, WIRE_CAUSE_MAX, "a cause is missing");
static_assert(OMSC_SECRET_SIZE == AUTH_SECRET_SIZE, "secret size");
static_assert(OMSC_MAC_KEY_SIZE == sizeof(struct wire_key), "MAC key size");
static_assert(sizeof(struct wire_new_order) <= CLIENT_MSG_MAX, "the largest request");
static_assert(OMSC_DEFAULT_PORT == CLIENT_DEFAULT_PORT, "default port");

struct omsc {
	struct client *c;      /* the engine */
	omsc_event_fn *fn;     /* the running omsc_poll / omsc_tick's callback (may be NULL) */
	void *ctx;             /* ... and its context */
	uint32_t delivered;    /* events delivered by the running call */
	int status_seen;       /* client_logon_status as the caller was last told of it: by a
				* call's end, a session event, a logon call (the engine moves
				* without a message when a pending logon times out) */
	bool own_logon;        /* the pending logon is omsc_logon_start's, not a relogon */
	bool running;          /* inside omsc_poll / omsc_tick / omsc_logon: no re-entry */
};

/* ---------------------------------------------------------------------------------------
 * Library.
 * ------------------------------------------------------------------------------------- */

const char *
omsc_version(void)
{
	return OMSC_VERSION_STRING;
}

int
omsc_abi(void)
{
	return OMSC_ABI;
}

uint64_t
omsc_now_ns(void)
{
	return client_now_ns();
}

const char *
omsc_reason_name(uint16_t reason)
{
	return reason < WIRE_REASON_MAX ? wire_reason_name(reason) : "?";
}

const char *
omsc_exec_name(uint8_t exec)
{
	return client_exec_name(exec);
}

const char *
omsc_cause_name(uint8_t cause)
{
	return client_cause_name(cause);
}

const char *
omsc_side_name(uint8_t side)
{
	return side == OMSC_SIDE_BUY ? "buy" : side == OMSC_SIDE_SELL ? "sell" : "?";
}

int
omsc_key_parse_hex(const char *hex, uint8_t key[OMSC_MAC_KEY_SIZE])
{
	struct wire_key k;
	if (key == NULL || wire_key_parse_hex(hex, &k) < 0)
		return -EINVAL;
	/* wire_key_parse_hex: the 16 bytes in order, k0 and k1 their little-endian halves. */
	for (uint32_t i = 0; i < 8; i++) {
		key[i] = (uint8_t)(k.k0 >> (8 * i));
		key[8 + i] = (uint8_t)(k.k1 >> (8 * i));
	}
	return 0;
}

static struct wire_key
mac_key_of(const uint8_t bytes[OMSC_MAC_KEY_SIZE])
{
	struct wire_key k = {0, 0};
	for (uint32_t i = 0; i < 8; i++) {
		k.k0 |= (uint64_t)bytes[i] << (8 * i);
		k.k1 |= (uint64_t)bytes[8 + i] << (8 * i);
	}
	return k;
}

int
omsc_key_file_load(const char *path, struct omsc_config *cfg, char *err, size_t cap)
{
	char none[1];
	if (err == NULL || cap == 0) {
		err = none;
		cap = sizeof(none);
	}
	if (path == NULL || cfg == NULL) {
		err[0] = '\0';
		return -EINVAL;
	}
	struct client_config k;
	memset(&k, 0, sizeof(k));
	int rc = client_key_file_load(path, &k, err, cap);
	if (rc == 0) {
		cfg->key_id = k.key_id;
		memcpy(cfg->secret, k.secret, sizeof(cfg->secret));
	}
	explicit_bzero(k.secret, sizeof(k.secret));
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * A client.
 * ------------------------------------------------------------------------------------- */

void
omsc_config_init(struct omsc_config *cfg)
{
	CHECK(cfg != NULL);
	memset(cfg, 0, sizeof(*cfg));
}

/* The reserved room of the config: zero, so a later field's zero default is what an older
 * program gets. */
static bool
config_reserved_zero(const struct omsc_config *cfg)
{
	if (cfg->reserved0 != 0 || cfg->reserved1 != 0)
		return false;
	for (uint32_t i = 0; i < sizeof(cfg->reserved) / sizeof(cfg->reserved[0]); i++)
		if (cfg->reserved[i] != 0)
			return false;
	return true;
}

int
omsc_open(struct omsc **out, const struct omsc_config *cfg)
{
	if (out == NULL || cfg == NULL || !config_reserved_zero(cfg))
		return -EINVAL;
	if (cfg->key_file != NULL && cfg->key_id != 0)
		return -EINVAL;
	struct client_config k = {
		.host = cfg->host,
		.port = cfg->port,
		.bind_host = cfg->bind_host,
		.bind_port = cfg->bind_port,
		.session_id = cfg->session_id,
		.key = mac_key_of(cfg->mac_key),
		.frame_max = cfg->frame_max,
		.requests_max = cfg->requests_max,
		.users_max = cfg->users_max,
		.retry_first_ms = cfg->retry_first_ms,
		.retry_cap_ms = cfg->retry_cap_ms,
		.retries_max = cfg->retries_max,
		.give_up_ms = cfg->give_up_ms,
		.replay_after_ms = cfg->replay_after_ms,
		.replay_every_ms = cfg->replay_every_ms,
		.replay_off = cfg->replay_off,
		.seq_from_one = cfg->seq_from_one,
		.relogon = cfg->relogon,
		.heartbeat_ms = cfg->heartbeat_ms,
		.logon_retry_ms = cfg->logon_retry_ms,
	};
	int rc = 0;
	if (cfg->key_file != NULL) {
		char why[8];
		rc = client_key_file_load(cfg->key_file, &k, why, sizeof(why));
	} else if (cfg->key_id != 0) {
		k.logon = true;
		k.key_id = cfg->key_id;
		memcpy(k.secret, cfg->secret, sizeof(k.secret));
	}
	struct omsc *o = NULL;
	if (rc == 0) {
		o = calloc(1, sizeof(*o));
		rc = o != NULL ? client_open(&o->c, &k) : -ENOMEM;
	}
	explicit_bzero(k.secret, sizeof(k.secret)); /* the engine keeps its own copy */
	if (rc < 0) {
		free(o);
		return rc;
	}
	o->status_seen = client_logon_status(o->c);
	*out = o;
	return 0;
}

void
omsc_close(struct omsc *o)
{
	if (o == NULL)
		return;
	CHECK(!o->running); /* not from a callback: the caller's loop still holds o */
	client_close(o->c);
	free(o);
}

int
omsc_fd(const struct omsc *o)
{
	return client_fd(o->c);
}

uint16_t
omsc_local_port(const struct omsc *o)
{
	return client_local_port(o->c);
}

uint32_t
omsc_session_id(const struct omsc *o)
{
	return client_session_id(o->c);
}

/* ---------------------------------------------------------------------------------------
 * Events: the engine's, translated; requests settled.
 * ------------------------------------------------------------------------------------- */

static uint8_t
request_of(uint16_t type)
{
	switch (type) {
	case WIRE_NEW_ORDER:
		return OMSC_REQ_NEW_ORDER;
	case WIRE_CANCEL:
		return OMSC_REQ_CANCEL;
	case WIRE_AMEND:
		return OMSC_REQ_AMEND;
	case WIRE_CANCEL_REPLACE:
		return OMSC_REQ_CANCEL_REPLACE;
	case WIRE_TRANSFER:
		return OMSC_REQ_TRANSFER;
	default:
		CHECK(false); /* the engine tracks only these (client_submit) */
		return 0;
	}
}

/* What a matched event tells about its request. */
static void
matched_fill(struct omsc_event *e, const struct client_req *r)
{
	e->matched = true;
	e->request = request_of(r->type);
	e->tries = r->tries;
	e->tag = r->tag;
	e->first_send_ns = r->first_ns;
}

/* The request's own (user, id) from the message it keeps: a transfer's user is not its
 * table key (CLIENT_TRANSFER_USER). */
static void
request_ids(struct omsc_event *e, const struct client_req *r)
{
	if (r->type == WIRE_TRANSFER) {
		const struct wire_transfer *t = (const void *)r->msg;
		e->user = t->user;
		e->transfer_id = t->transfer_id;
	} else {
		const struct wire_cancel *m = (const void *)r->msg; /* user, cl_ord_id lead */
		e->user = m->user;
		e->cl_ord_id = m->cl_ord_id;
	}
}

static void
order_id_fill(struct omsc_event *e, struct wire_oid oid)
{
	e->order_id = oid.shard_seq;
	e->order_shard = wire_oid_shard(oid);
	e->order_seq = wire_oid_seq(oid);
}

/* Whether an execution report is the last word about the request it matched. */
static bool
exec_settles(const struct client_req *r, const struct wire_exec_report *m)
{
	if (m->exec == WIRE_EXEC_CANCEL_REJECTED)
		return true; /* the cancel, amend or replace was refused */
	if (r->type != WIRE_NEW_ORDER && r->type != WIRE_CANCEL_REPLACE)
		return false;
	return wire_report_final(m);
}

static void
deliver(struct omsc *o, const struct omsc_event *e)
{
	o->delivered++;
	if (o->fn != NULL)
		o->fn(o->ctx, e);
}

/* A session message (the engine acted on it already). Returns whether to deliver it. */
static bool
session_event(struct omsc *o, const struct client_event *ev, struct omsc_event *e)
{
	const struct wire_msg_hdr *h = ev->msg;
	int status = client_logon_status(o->c);
	e->kind = OMSC_EV_SESSION;
	switch (h->type) {
	case WIRE_LOGON_REPLY: {
		const struct wire_logon_reply *m = (const void *)h;
		/* Only the answer that settled a pending logon: a late or duplicate one (or
		 * NONCE_REUSED to our own resend) changed nothing. */
		bool settled = m->reason == WIRE_REASON_NONE ? status == 0 : status == -EACCES;
		if (o->status_seen != -EINPROGRESS || !settled)
			return false;
		e->session = OMSC_SESSION_LOGON;
		e->reason = m->reason;
		e->session_id = m->session_id;
		o->own_logon = false;
		o->status_seen = status;
		return true;
	}
	case WIRE_SESSION_REJECT: {
		const struct wire_session_reject *m = (const void *)h;
		if (m->session_id != client_session_id(o->c))
			return false; /* not ours: the engine ignored it too */
		e->session = OMSC_SESSION_REJECT;
		e->reason = m->reason;
		e->warning = (m->hdr.flags & WIRE_SESSION_REJECT_F_WARN) != 0;
		e->session_seq = m->seq;
		e->expected_seq = m->expected_seq;
		e->session_id = m->session_id;
		if (status != o->status_seen)
			o->own_logon = false; /* the session is gone: a relogon, or nothing */
		o->status_seen = status;
		return true;
	}
	case WIRE_LOGOUT: {
		const struct wire_logout *m = (const void *)h;
		if (m->session_id != client_session_id(o->c))
			return false;
		e->session = OMSC_SESSION_LOGOUT;
		e->reason = m->reason;
		e->session_id = m->session_id;
		if (status != o->status_seen)
			o->own_logon = false;
		o->status_seen = status;
		return true;
	}
	default:
		return false; /* another type the node has no business sending: counted only */
	}
}

/* The engine's callback. A request is released before its settling event is delivered, so
 * the caller's callback finds it settled (and may reuse the slot). */
static void
on_engine(void *ctx, const struct client_event *ev)
{
	struct omsc *o = ctx;
	struct client_req *r = ev->req;
	struct omsc_event e;
	memset(&e, 0, sizeof(e));
	e.now_ns = ev->now_ns;
	e.seq_gap = ev->seq_gap;
	e.seq_fill = ev->seq_fill;
	e.seq_repeat = ev->seq_repeat;
	e.session_ended = ev->session_ended;
	bool settle = false;
	switch (ev->kind) {
	case CLIENT_EV_ACK: {
		const struct wire_ack *m = (const void *)ev->msg;
		e.kind = OMSC_EV_ACK;
		e.user = m->user;
		e.cl_ord_id = m->cl_ord_id;
		order_id_fill(&e, m->oid);
		e.seq = m->seq;
		e.time_ns = m->time_ns;
		settle = r != NULL && (r->type == WIRE_CANCEL || r->type == WIRE_AMEND);
		break;
	}
	case CLIENT_EV_NAK: {
		const struct wire_nak *m = (const void *)ev->msg;
		e.kind = OMSC_EV_NAK;
		e.user = m->user;
		e.cl_ord_id = m->cl_ord_id;
		e.reason = m->reason;
		e.owner_shard = m->owner_shard;
		e.leader_node = m->leader_node;
		e.route_epoch = m->route_epoch;
		e.seq = m->seq;
		settle = r != NULL;
		break;
	}
	case CLIENT_EV_EXEC: {
		const struct wire_exec_report *m = (const void *)ev->msg;
		e.kind = OMSC_EV_EXEC;
		e.user = m->user;
		e.cl_ord_id = m->cl_ord_id;
		order_id_fill(&e, m->oid);
		e.seq = m->seq;
		e.time_ns = m->time_ns;
		e.symbol = m->symbol;
		e.exec = m->exec;
		e.side = m->side;
		e.liquidity = m->liquidity;
		e.cause = m->cause;
		e.reason = m->reason;
		e.last_px = m->last_px;
		e.last_qty = m->last_qty;
		e.cum_qty = m->cum_qty;
		e.leaves_qty = m->leaves_qty;
		e.fee = m->fee;
		e.done = wire_report_final(m);
		settle = r != NULL && exec_settles(r, m);
		break;
	}
	case CLIENT_EV_ADMIN_REPLY: {
		const struct wire_admin_reply *m = (const void *)ev->msg;
		e.kind = OMSC_EV_ADMIN_REPLY;
		if (r != NULL)
			request_ids(&e, r);
		e.transfer_id = m->req_id;
		e.reason = m->reason;
		e.leader_node = m->leader_node;
		e.value = m->value;
		settle = r != NULL;
		break;
	}
	case CLIENT_EV_GAVE_UP:
		CHECK(r != NULL);
		e.kind = OMSC_EV_GAVE_UP;
		request_ids(&e, r);
		settle = true;
		break;
	case CLIENT_EV_OTHER:
		if (ev->msg == NULL || !session_event(o, ev, &e))
			return;
		break;
	default:
		CHECK(false); /* enum client_ev_kind */
	}
	if (r != NULL) {
		matched_fill(&e, r);
		if (e.kind == OMSC_EV_GAVE_UP)
			e.matched = false; /* no answer matched it: the request is named, though */
		if (settle)
			client_release(o->c, r);
	}
	deliver(o, &e);
}

/* Start a call that may deliver events. */
static void
call_begin(struct omsc *o, omsc_event_fn *fn, void *ctx)
{
	o->running = true;
	o->fn = fn;
	o->ctx = ctx;
	o->delivered = 0;
}

/* End it: a pending logon the engine gave up on is an event too (the engine has no
 * message to deliver for it). Returns the events delivered. */
static int
call_end(struct omsc *o)
{
	int status = client_logon_status(o->c);
	if (status == -ETIMEDOUT && o->status_seen == -EINPROGRESS) {
		struct omsc_event e;
		memset(&e, 0, sizeof(e));
		e.kind = OMSC_EV_SESSION;
		e.session = OMSC_SESSION_LOGON_TIMEOUT;
		e.session_id = client_session_id(o->c);
		e.session_ended = !o->own_logon; /* a relogon: the session is over */
		e.now_ns = client_now_ns();
		o->own_logon = false;
		o->status_seen = status;
		deliver(o, &e);
	}
	o->status_seen = status;
	o->running = false;
	o->fn = NULL;
	o->ctx = NULL;
	return (int)o->delivered;
}

int
omsc_poll(struct omsc *o, int timeout_ms, omsc_event_fn *fn, void *ctx)
{
	CHECK(o != NULL);
	if (timeout_ms < 0)
		return -EINVAL;
	if (o->running)
		return -EBUSY;
	call_begin(o, fn, ctx);
	(void)client_poll(o->c, timeout_ms, on_engine, o);
	return call_end(o);
}

int
omsc_tick(struct omsc *o, omsc_event_fn *fn, void *ctx)
{
	CHECK(o != NULL);
	if (o->running)
		return -EBUSY;
	call_begin(o, fn, ctx);
	(void)client_tick(o->c, client_now_ns(), on_engine, o);
	return call_end(o);
}

int
omsc_timeout_ms(const struct omsc *o)
{
	uint64_t wake = client_wake_ns(o->c);
	if (wake == UINT64_MAX)
		return -1;
	uint64_t now = client_now_ns();
	if (wake <= now)
		return 0;
	uint64_t ms = (wake - now + 999999) / 1000000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* ---------------------------------------------------------------------------------------
 * Sessions.
 * ------------------------------------------------------------------------------------- */

int
omsc_logon(struct omsc *o, int timeout_ms)
{
	CHECK(o != NULL);
	if (o->running)
		return -EBUSY;
	o->running = true;
	int rc = client_logon(o->c, timeout_ms);
	o->running = false;
	o->own_logon = false;
	o->status_seen = client_logon_status(o->c);
	return rc;
}

int
omsc_logon_start(struct omsc *o, int timeout_ms)
{
	CHECK(o != NULL);
	if (o->running)
		return -EBUSY;
	bool was_down = client_logon_status(o->c) != 0 &&
			client_logon_status(o->c) != -EINPROGRESS;
	int rc = client_logon_start(o->c, timeout_ms);
	if (rc == 0 && was_down)
		o->own_logon = true;
	o->status_seen = client_logon_status(o->c);
	return rc;
}

int
omsc_logon_status(const struct omsc *o)
{
	return client_logon_status(o->c);
}

uint16_t
omsc_logon_reason(const struct omsc *o)
{
	return client_logon_reason(o->c);
}

int
omsc_logout(struct omsc *o)
{
	int rc = client_logout(o->c);
	o->own_logon = false;
	o->status_seen = client_logon_status(o->c);
	return rc;
}

bool
omsc_session_up(const struct omsc *o)
{
	return client_session_up(o->c);
}

uint32_t
omsc_heartbeat_ms(const struct omsc *o)
{
	return client_heartbeat_ms(o->c);
}

/* ---------------------------------------------------------------------------------------
 * Order entry.
 * ------------------------------------------------------------------------------------- */

/* Track and queue a built request. It must pass the node's own checks: a message the
 * decoder refuses would poison the whole frame it travels in. */
static int
submit(struct omsc *o, const void *msg, uint64_t user, uint64_t tag)
{
	CHECK(o != NULL);
	const struct wire_msg_hdr *h = msg;
	uint16_t len = 0;
	if (user == UINT64_MAX || wire_msg_check(msg, h->length, &len) != WIRE_E_OK)
		return -EINVAL;
	int err = 0;
	struct client_req *r = client_submit(o->c, msg, tag, client_now_ns(), &err);
	/* Tracked, the request is the retransmits' business whatever happened to its first
	 * send (a socket error, a session not up yet). Every request fits the smallest
	 * frame_max (client.c), so none is too large to ever go. */
	return r != NULL ? 0 : err;
}

int
omsc_new_order(struct omsc *o, const struct omsc_order *ord, uint64_t tag)
{
	if (ord == NULL)
		return -EINVAL;
	struct wire_new_order m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_NEW_ORDER, 0);
	m.user = ord->user;
	m.cl_ord_id = ord->cl_ord_id;
	m.symbol = ord->symbol;
	m.side = ord->side;
	m.ord_type = ord->type;
	m.tif = ord->tif;
	if (m.tif == 0)
		m.tif = ord->type == OMSC_ORD_MARKET ? OMSC_TIF_IOC : OMSC_TIF_GTC;
	m.stp = ord->stp;
	m.px = ord->px;
	m.qty = ord->qty;
	m.quote_qty = ord->quote_qty;
	m.expire_ns = ord->expire_ns;
	return submit(o, &m, m.user, tag);
}

int
omsc_cancel(struct omsc *o, uint64_t user, uint64_t cl_ord_id, uint64_t orig_cl_ord_id,
	    uint64_t tag)
{
	struct wire_cancel m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_CANCEL, 0);
	m.user = user;
	m.cl_ord_id = cl_ord_id;
	m.orig_cl_ord_id = orig_cl_ord_id;
	return submit(o, &m, user, tag);
}

int
omsc_amend(struct omsc *o, uint64_t user, uint64_t cl_ord_id, uint64_t orig_cl_ord_id,
	   int64_t qty, uint64_t tag)
{
	struct wire_amend m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_AMEND, 0);
	m.user = user;
	m.cl_ord_id = cl_ord_id;
	m.orig_cl_ord_id = orig_cl_ord_id;
	m.qty = qty;
	return submit(o, &m, user, tag);
}

int
omsc_cancel_replace(struct omsc *o, uint64_t user, uint64_t cl_ord_id, uint64_t orig_cl_ord_id,
		    int64_t px, int64_t qty, uint64_t tag)
{
	struct wire_cancel_replace m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_CANCEL_REPLACE, 0);
	m.user = user;
	m.cl_ord_id = cl_ord_id;
	m.orig_cl_ord_id = orig_cl_ord_id;
	m.px = px;
	m.qty = qty;
	return submit(o, &m, user, tag);
}

int
omsc_transfer(struct omsc *o, const struct omsc_transfer *t, uint64_t tag)
{
	if (t == NULL || (t->flags & ~(uint16_t)OMSC_TRANSFER_DIRECT) != 0)
		return -EINVAL;
	bool direct = (t->flags & OMSC_TRANSFER_DIRECT) != 0;
	if (!direct && t->shard != 0)
		return -EINVAL; /* a shard only means something sent straight to it */
	struct wire_transfer m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_TRANSFER, direct ? t->shard : 0);
	if (!direct)
		m.hdr.flags = WIRE_TRANSFER_F_ROUTE; /* the gateway routes it like an order */
	m.user = t->user;
	m.transfer_id = t->transfer_id;
	m.asset = t->asset;
	m.amount = t->amount;
	return submit(o, &m, t->user, tag);
}

int
omsc_flush(struct omsc *o)
{
	return client_flush(o->c);
}

int
omsc_replay(struct omsc *o, uint64_t user, uint64_t from_seq, uint64_t to_seq)
{
	return client_replay(o->c, user, from_seq, to_seq);
}

int
omsc_replay_tail(struct omsc *o)
{
	return (int)client_replay_tail(o->c);
}

/* ---------------------------------------------------------------------------------------
 * The request table and the numbers.
 * ------------------------------------------------------------------------------------- */

static struct client_req *
request_find(struct omsc *o, uint64_t user, uint64_t id, bool transfer)
{
	return client_find(o->c, transfer ? CLIENT_TRANSFER_USER : user, id);
}

int
omsc_request_get(struct omsc *o, uint64_t user, uint64_t id, bool transfer,
		 struct omsc_request_info *out)
{
	const struct client_req *r = request_find(o, user, id, transfer);
	if (r == NULL)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	out->tag = r->tag;
	out->first_send_ns = r->first_ns;
	out->answer_ns = r->answer_ns;
	out->tries = r->tries;
	out->request = request_of(r->type);
	out->answered = r->state == CLIENT_REQ_ANSWERED || r->state == CLIENT_REQ_NAKED;
	out->reason = r->reason;
	return 0;
}

int
omsc_release(struct omsc *o, uint64_t user, uint64_t id, bool transfer)
{
	struct client_req *r = request_find(o, user, id, transfer);
	if (r == NULL)
		return -ENOENT;
	client_release(o->c, r);
	return 0;
}

uint32_t
omsc_tracked(const struct omsc *o)
{
	return client_tracked(o->c);
}

uint32_t
omsc_unanswered(const struct omsc *o)
{
	return client_unanswered(o->c);
}

uint64_t
omsc_user_seq(const struct omsc *o, uint64_t user)
{
	return client_user_seq(o->c, user);
}

uint64_t
omsc_user_contig(const struct omsc *o, uint64_t user)
{
	return client_user_contig(o->c, user);
}

size_t
omsc_stats(const struct omsc *o, struct omsc_stats *out, size_t out_size)
{
	const struct client_stats *s = client_stats(o->c);
	struct omsc_stats v = {
		.frames_tx = s->frames_tx,
		.msgs_tx = s->msgs_tx,
		.retransmits = s->retransmits,
		.send_errors = s->send_errors,
		.frames_rx = s->frames_rx,
		.msgs_rx = s->msgs_rx,
		.decode_errors = s->decode_errors,
		.acks = s->acks,
		.naks = s->naks,
		.execs = s->execs,
		.admin_replies = s->admin_replies,
		.other = s->other,
		.unmatched = s->unmatched,
		.seq_gaps = s->seq_gaps,
		.seq_filled = s->seq_filled,
		.seq_repeats = s->seq_repeats,
		.seq_abandoned = s->seq_abandoned,
		.replay_requests = s->replay_requests,
		.gave_up = s->gave_up,
		.table_full = s->table_full,
		.logons_sent = s->logons_sent,
		.logons = s->logons,
		.logons_refused = s->logons_refused,
		.relogons = s->relogons,
		.session_ended = s->session_ended,
		.seq_resyncs = s->seq_resyncs,
		.rate_refused = s->rate_refused,
		.rate_warnings = s->rate_warnings,
		.heartbeats_tx = s->heartbeats_tx,
		.heartbeats_rx = s->heartbeats_rx,
		.tracked = client_tracked(o->c),
		.unanswered = client_unanswered(o->c),
	};
	if (out != NULL)
		memcpy(out, &v, out_size < sizeof(v) ? out_size : sizeof(v));
	return sizeof(v);
}

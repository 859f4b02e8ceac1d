/* SPDX-License-Identifier: Apache-2.0 */
#include "fake_node.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct out {
	struct wire_builder b;
	uint64_t buf[WIRE_FRAME_MAX / 8];
	int fd;                      /* the node's socket */
	struct sockaddr_in to;       /* the client that sent the frame being answered */
	socklen_t to_len;
	const struct wire_key *key;
};

#define OUT_FRAME 1472
#define FAKE_NONCES_MAX 1024 /* LOGON nonces remembered */

static void
out_flush(struct out *o)
{
	if (o->b.count > 0) {
		uint32_t len = wire_builder_finish(&o->b, o->key);
		sendto(o->fd, o->buf, len, 0, (struct sockaddr *)&o->to, o->to_len);
	}
	wire_builder_init(&o->b, o->buf, OUT_FRAME, 1);
}

/* Append m, sending the frame first when it is full (a replay answers with many). */
static void
out_add(struct out *o, const void *m)
{
	if (wire_builder_add(&o->b, m) != 0) {
		out_flush(o);
		wire_builder_add(&o->b, m);
	}
}

/* A numbered answer: kept for REPORT_REPLAY, then sent unless drop_answers loses it. */
static void
emit(struct fake_node *n, struct out *o, const void *m)
{
	const struct wire_msg_hdr *h = m;
	memset(n->ring[n->ring_count % FAKE_RING], 0, sizeof(n->ring[0]));
	memcpy(n->ring[n->ring_count % FAKE_RING], m, h->length);
	n->ring_count++;
	unsigned drop = atomic_load(&n->drop_answers);
	if (drop > 0) {
		atomic_store(&n->drop_answers, drop - 1);
		return;
	}
	drop = atomic_load(&n->drop_execs);
	if (drop > 0 && h->type == WIRE_EXEC_REPORT) {
		atomic_store(&n->drop_execs, drop - 1);
		return;
	}
	out_add(o, m);
}

static void
replay(struct fake_node *n, struct out *o, const struct wire_report_replay *r)
{
	atomic_fetch_add(&n->replays_rx, 1);
	uint64_t first = n->ring_count > FAKE_RING ? n->ring_count - FAKE_RING : 0;
	uint32_t sent = 0;
	/* The ring holds each user's answers in seq order, so walking it oldest first
	 * re-sends them in seq order. */
	for (uint64_t k = first; k < n->ring_count && sent < WIRE_REPLAY_MAX; k++) {
		const struct wire_ack *m = (const void *)n->ring[k % FAKE_RING];
		uint64_t seq = m->hdr.type == WIRE_NAK ? ((const struct wire_nak *)m)->seq
		       : m->hdr.type == WIRE_ACK ? m->seq
						   : ((const struct wire_exec_report *)m)->seq;
		if (m->user != r->user || seq < r->from_seq || (r->to_seq != 0 && seq > r->to_seq))
			continue;
		out_add(o, m);
		sent++;
	}
	atomic_fetch_add(&n->replayed, sent);
}

static uint64_t
next_seq(struct fake_node *n, uint64_t user)
{
	uint32_t i = 0;
	while (i < n->user_count && n->users[i] != user)
		i++;
	if (i == n->user_count) {
		if (n->user_count == FAKE_USERS_MAX)
			return 0;
		n->users[n->user_count] = user;
		n->seqs[n->user_count++] = 0;
	}
	if (atomic_exchange(&n->skip_seq_once, 0))
		n->seqs[i]++;
	return ++n->seqs[i];
}

static int
order_find(const struct fake_node *n, uint64_t user, uint64_t id)
{
	for (uint32_t i = 0; i < n->ord_count; i++)
		if (n->ord_user[i] == user && n->ord_id[i] == id)
			return (int)i;
	return -1;
}

static void
order_add(struct fake_node *n, uint64_t user, uint64_t id)
{
	if (n->ord_count < FAKE_ORDERS_MAX) {
		n->ord_user[n->ord_count] = user;
		n->ord_id[n->ord_count++] = id;
	}
}

static void
ack(struct fake_node *n, struct out *o, uint64_t user, uint64_t id)
{
	struct wire_ack m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_ACK, 0);
	m.user = user;
	m.cl_ord_id = id;
	m.oid = wire_oid_make(1, user, id & 0xffff);
	m.seq = next_seq(n, user);
	m.time_ns = 1;
	emit(n, o, &m);
}

static void
nak(struct fake_node *n, struct out *o, uint64_t user, uint64_t id, uint16_t reason)
{
	struct wire_nak m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_NAK, 0);
	m.user = user;
	m.cl_ord_id = id;
	m.reason = reason;
	m.seq = next_seq(n, user);
	emit(n, o, &m);
}

static void
exec(struct fake_node *n, struct out *o, uint64_t user, uint64_t id, uint8_t kind,
     int64_t px, int64_t qty, uint8_t cause, uint16_t reason, bool last)
{
	struct wire_exec_report m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_EXEC_REPORT, 0);
	/* The order's last report says so; a node of the earlier release sent a DONE instead
	 * (after it, below). */
	bool legacy = atomic_load(&n->legacy_done) != 0;
	if (last && !legacy)
		m.hdr.flags = WIRE_REPORT_F_DONE;
	m.user = user;
	m.cl_ord_id = id;
	m.oid = wire_oid_make(1, user, id & 0xffff);
	m.seq = next_seq(n, user);
	m.time_ns = 2;
	m.symbol = 1;
	m.exec = kind;
	m.side = WIRE_SIDE_BUY;
	m.cause = cause;
	m.reason = reason;
	if (kind == WIRE_EXEC_FILL) {
		m.liquidity = 2;
		m.last_px = px;
		m.last_qty = qty;
		m.cum_qty = qty;
		m.fee = 1;
	} else if (kind == WIRE_EXEC_OPEN) {
		m.last_px = px;
		m.leaves_qty = qty;
	} else if (kind == WIRE_EXEC_CANCELLED) {
		m.last_qty = qty;
	}
	emit(n, o, &m);
	if (last && legacy && kind != WIRE_EXEC_REJECTED)
		exec(n, o, user, id, WIRE_EXEC_DONE, 0, 0, 0, 0, false);
}

static void
answer(struct fake_node *n, const struct wire_msg_hdr *h, struct out *o)
{
	switch (h->type) {
	case WIRE_NEW_ORDER: {
		const struct wire_new_order *m = (const void *)h;
		if (order_find(n, m->user, m->cl_ord_id) >= 0) {
			atomic_fetch_add(&n->duplicates, 1);
			ack(n, o, m->user, m->cl_ord_id);
			break;
		}
		order_add(n, m->user, m->cl_ord_id);
		if (m->user == 666) {
			nak(n, o, m->user, m->cl_ord_id, WIRE_REASON_INSUFFICIENT_FUNDS);
			break;
		}
		ack(n, o, m->user, m->cl_ord_id);
		if (m->px == 13) {
			exec(n, o, m->user, m->cl_ord_id, WIRE_EXEC_REJECTED, 0, 0, 0,
			     WIRE_REASON_OUTSIDE_BAND, true);
		} else if (m->tif == WIRE_TIF_IOC || m->ord_type == WIRE_ORD_MARKET) {
			exec(n, o, m->user, m->cl_ord_id, WIRE_EXEC_FILL, m->px ? m->px : 100,
			     m->qty ? m->qty : 1, 0, 0, true);
		} else {
			exec(n, o, m->user, m->cl_ord_id, WIRE_EXEC_OPEN, m->px, m->qty, 0, 0, false);
		}
		break;
	}
	case WIRE_CANCEL:
	case WIRE_AMEND:
	case WIRE_CANCEL_REPLACE: {
		const struct wire_cancel *m = (const void *)h; /* user, cl, orig lead all three */
		if (order_find(n, m->user, m->cl_ord_id) >= 0) {
			atomic_fetch_add(&n->duplicates, 1);
			ack(n, o, m->user, m->cl_ord_id);
			break;
		}
		order_add(n, m->user, m->cl_ord_id);
		if (order_find(n, m->user, m->orig_cl_ord_id) < 0) {
			nak(n, o, m->user, m->cl_ord_id, WIRE_REASON_UNKNOWN_ORDER);
			break;
		}
		ack(n, o, m->user, m->cl_ord_id);
		if (h->type == WIRE_AMEND) {
			exec(n, o, m->user, m->orig_cl_ord_id, WIRE_EXEC_AMENDED, 0, 0, 0, 0,
			     false);
			break;
		}
		exec(n, o, m->user, m->orig_cl_ord_id, WIRE_EXEC_CANCELLED, 0, 5,
		     h->type == WIRE_CANCEL ? WIRE_CAUSE_USER : WIRE_CAUSE_REPLACED, 0, true);
		if (h->type == WIRE_CANCEL_REPLACE) {
			const struct wire_cancel_replace *r = (const void *)h;
			exec(n, o, m->user, m->cl_ord_id, WIRE_EXEC_OPEN, r->px, r->qty, 0, 0,
			     false);
		}
		break;
	}
	case WIRE_TRANSFER: {
		const struct wire_transfer *t = (const void *)h;
		struct wire_admin_reply m;
		memset(&m, 0, sizeof(m));
		wire_hdr_init(&m.hdr, WIRE_ADMIN_REPLY, 0);
		m.req_id = t->transfer_id;
		m.value = (uint64_t)(t->amount < 0 ? -t->amount : t->amount);
		out_add(o, &m);
		break;
	}
	case WIRE_REPORT_REPLAY:
		replay(n, o, (const void *)h);
		break;
	default:
		break;
	}
}

/* ---------------------------------------------------------------------------------------
 * The gateway's session side (fake_node_sessions).
 * ------------------------------------------------------------------------------------- */

static uint64_t
clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* auth_session.peer: where a session's answers go, as the gateway keeps it. */
static uint64_t
peer_of(const struct sockaddr_in *a)
{
	return (uint64_t)ntohl(a->sin_addr.s_addr) << 16 | ntohs(a->sin_port);
}

static struct sockaddr_in
addr_of(uint64_t peer)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)(peer & 0xffff)),
				.sin_addr.s_addr = htonl((uint32_t)(peer >> 16))};
	return a;
}

/* One message in a frame of its own, MAC'd under key (NULL: none), to o->to. */
static void
send_alone(struct out *o, const void *m, const struct wire_key *key)
{
	o->key = key;
	wire_builder_init(&o->b, o->buf, OUT_FRAME, 1);
	out_add(o, m);
	out_flush(o);
}

static void
send_logout(struct out *o, uint32_t session_id, uint16_t reason, const struct wire_key *key)
{
	struct wire_logout m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_LOGOUT, 0);
	m.session_id = session_id;
	m.reason = reason;
	send_alone(o, &m, key);
}

/* A frame refused whole; without a session there is no key to MAC it with. */
static void
reject(struct fake_node *n, struct out *o, const struct wire_session_hdr *sh, uint16_t reason,
       const struct auth_session *s)
{
	struct wire_session_reject m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_SESSION_REJECT, 0);
	m.session_id = sh->session_id;
	m.reason = reason;
	m.seq = sh->seq;
	m.expected_seq = s != NULL ? s->next_seq : 0;
	atomic_fetch_add(&n->session_rejects, 1);
	atomic_fetch_add(&n->rejects[reason < WIRE_REASON_MAX ? reason : 0], 1);
	atomic_store(&n->last_reject, reason);
	send_alone(o, &m, s != NULL ? &s->frame_key : NULL);
}

static void
gateway_logon(struct fake_node *n, struct out *o, const struct wire_logon *m)
{
	struct auth_session *s;
	uint16_t reason = auth_logon(&n->sessions, m, clock_ns(CLOCK_REALTIME),
				     clock_ns(CLOCK_MONOTONIC), peer_of(&o->to), &s);
	struct wire_logon_reply r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_LOGON_REPLY, 0);
	r.key_id = m->key_id;
	r.session_id = m->session_id;
	r.reason = reason;
	r.ts_ns = clock_ns(CLOCK_REALTIME);
	if (reason != WIRE_REASON_NONE) {
		atomic_fetch_add(&n->logons_refused, 1);
		send_alone(o, &r, NULL);
		return;
	}
	r.next_seq = s->next_seq;
	r.heartbeat_ms = s->heartbeat_ms;
	atomic_fetch_add(&n->logons, 1);
	unsigned drop = atomic_load(&n->drop_logon_replies);
	if (drop > 0) {
		atomic_store(&n->drop_logon_replies, drop - 1);
		return;
	}
	send_alone(o, &r, &s->frame_key);
}

/* A session's messages, after auth_frame accepted the frame. */
static void
gateway_msgs(struct fake_node *n, struct out *o, struct auth_session *s,
	     const struct wire_msg_hdr *const *msgs, uint32_t count)
{
	struct wire_key key = s->frame_key; /* s goes when a LOGOUT ends the session */
	uint32_t id = s->id;
	o->key = &key;
	wire_builder_init(&o->b, o->buf, OUT_FRAME, 1);
	for (uint32_t i = 1; i < count; i++) {
		if (msgs[i]->type == WIRE_HEARTBEAT) {
			atomic_fetch_add(&n->heartbeats_rx, 1);
			struct wire_heartbeat h;
			memset(&h, 0, sizeof(h));
			wire_hdr_init(&h.hdr, WIRE_HEARTBEAT, 0);
			h.session_id = id;
			h.ts_ns = clock_ns(CLOCK_REALTIME);
			out_add(o, &h);
		} else if (msgs[i]->type == WIRE_LOGOUT) {
			atomic_fetch_add(&n->logouts_rx, 1);
			struct auth_session *x = auth_session_find(&n->sessions, id);
			if (x != NULL)
				auth_session_end(&n->sessions, x);
		} else {
			answer(n, msgs[i], o);
		}
	}
	out_flush(o);
}

static void
gateway_frame(struct fake_node *n, struct out *o, const void *in, size_t len)
{
	const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];
	uint32_t count = 0, sender = 0;
	enum wire_err e;
	if ((wire_frame_flags(in, len) & WIRE_FRAME_F_SESSION) == 0) {
		/* Outside a session only a LOGON, alone and without a MAC, is taken. */
		e = wire_frame_decode(in, len, NULL, msgs, WIRE_FRAME_MSGS_MAX, &count, &sender);
		if (e == WIRE_E_OK && count == 1 && msgs[0]->type == WIRE_LOGON) {
			n->last_sender = sender;
			gateway_logon(n, o, (const void *)msgs[0]);
			return;
		}
		n->last_error = e != WIRE_E_OK ? e : WIRE_E_BAD_TYPE;
		atomic_fetch_add(&n->decode_errors, 1);
		return;
	}
	e = wire_session_frame_decode(in, len, msgs, WIRE_FRAME_MSGS_MAX, &count, &sender);
	if (e != WIRE_E_OK) {
		n->last_error = e;
		atomic_fetch_add(&n->decode_errors, 1);
		return;
	}
	n->last_sender = sender;
	const struct wire_session_hdr *sh = (const void *)msgs[0];
	struct auth_session *s = auth_session_find(&n->sessions, sh->session_id);
	if (s != NULL && atomic_exchange(&n->forget_sessions, 0) != 0)
		auth_session_end(&n->sessions, s); /* as after a restart: no such session */
	bool warn;
	uint16_t reason = auth_frame(&n->sessions, in, len, sh, count - 1,
				     clock_ns(CLOCK_MONOTONIC), peer_of(&o->to), &s, &warn);
	if (reason == WIRE_REASON_BAD_SIGNATURE) {
		n->last_error = WIRE_E_BAD_MAC; /* not answered: the sender is not proven */
		atomic_fetch_add(&n->decode_errors, 1);
		return;
	}
	if (reason != WIRE_REASON_NONE) {
		reject(n, o, sh, reason, s);
		return;
	}
	uint64_t k = atomic_load(&n->seq_count);
	if (k < FAKE_SEQS_MAX) {
		n->frame_seqs[k] = sh->seq;
		atomic_store(&n->seq_count, k + 1);
	}
	atomic_fetch_add(&n->session_frames, 1);
	atomic_fetch_add(&n->msgs_rx, count - 1);
	unsigned ended = atomic_exchange(&n->logout_reason, 0);
	if (ended != 0) {
		send_logout(o, s->id, (uint16_t)ended, &s->frame_key);
		auth_session_end(&n->sessions, s);
		return;
	}
	gateway_msgs(n, o, s, msgs, count);
}

/* auth_expire's callback: tell the session's client why it ended. */
static void
idle_end(void *ctx, const struct auth_session *s, uint16_t reason)
{
	struct out *o = ctx;
	o->to = addr_of(s->peer);
	o->to_len = sizeof(o->to);
	send_logout(o, s->id, reason, &s->frame_key);
}

static void *
run(void *arg)
{
	struct fake_node *n = arg;
	static _Thread_local uint64_t in[WIRE_FRAME_MAX / 8 + 1];
	static _Thread_local struct out o;
	o.fd = n->fd;
	while (!atomic_load(&n->stop)) {
		if (n->gateway)
			atomic_fetch_add(&n->idle_ended,
					 auth_expire(&n->sessions, clock_ns(CLOCK_MONOTONIC),
						     idle_end, &o));
		struct pollfd p = {.fd = n->fd, .events = POLLIN};
		if (poll(&p, 1, 10) <= 0)
			continue;
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t r = recvfrom(n->fd, in, WIRE_FRAME_MAX, 0, (struct sockaddr *)&from, &flen);
		if (r <= 0)
			continue;
		atomic_fetch_add(&n->frames_rx, 1);
		unsigned drop = atomic_load(&n->drop_frames);
		if (drop > 0) {
			atomic_store(&n->drop_frames, drop - 1);
			continue;
		}
		if (n->gateway) {
			if (atomic_load(&n->silent))
				continue;
			o.to = from;
			o.to_len = flen;
			gateway_frame(n, &o, in, (size_t)r);
			continue;
		}
		const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];
		uint32_t count = 0, sender = 0;
		enum wire_err e = wire_frame_decode(in, (size_t)r, &n->key, msgs,
						    WIRE_FRAME_MSGS_MAX, &count, &sender);
		if (e != WIRE_E_OK) {
			n->last_error = e;
			atomic_fetch_add(&n->decode_errors, 1);
			continue;
		}
		n->last_sender = sender;
		atomic_fetch_add(&n->msgs_rx, count);
		if (atomic_load(&n->silent))
			continue;
		o.fd = n->fd;
		o.to = from;
		o.to_len = flen;
		o.key = &n->key;
		wire_builder_init(&o.b, o.buf, OUT_FRAME, 1);
		for (uint32_t i = 0; i < count; i++)
			answer(n, msgs[i], &o); /* out_add sends each full frame */
		out_flush(&o);
	}
	return NULL;
}

int
fake_node_start(struct fake_node *n)
{
	n->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0)
		return -errno;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (bind(n->fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(n->fd, (struct sockaddr *)&a, &len) < 0) {
		int err = -errno;
		close(n->fd);
		return err;
	}
	n->port = ntohs(a.sin_port);
	atomic_store(&n->stop, false);
	if (pthread_create(&n->thread, NULL, run, n) != 0) {
		close(n->fd);
		return -EAGAIN;
	}
	return 0;
}

int
fake_node_sessions(struct fake_node *n, const struct auth_keys *keys, uint32_t heartbeat_ms,
		   uint32_t msgs_per_window, uint32_t rate_window_ms)
{
	struct auth_config cfg = {
		.sessions_max = FAKE_SESSIONS_MAX,
		.nonces_max = FAKE_NONCES_MAX,
		.logon_window_ns = FAKE_LOGON_WINDOW_NS,
		.heartbeat_ms = heartbeat_ms,
		.msgs_per_window = msgs_per_window,
		.rate_window_ns = (uint64_t)rate_window_ms * 1000000u,
	};
	int rc = auth_sessions_init(&n->sessions, &cfg, keys);
	n->gateway = rc == 0;
	return rc;
}

void
fake_node_stop(struct fake_node *n)
{
	atomic_store(&n->stop, true);
	pthread_join(n->thread, NULL);
	close(n->fd);
	if (n->gateway)
		auth_sessions_free(&n->sessions);
	n->gateway = false;
}

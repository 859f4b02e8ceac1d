/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsclient — the order-entry engine under libomsclient (libomsclient/omsclient.h, the
 * public API), shared by omsctl, omsload and the tool tests.
 *
 * It speaks the omsd wire protocol (common/wire.h, docs/wire.md) over an ordinary kernel UDP
 * socket: frames of several messages, sender_id = the session id, hdr.shard = 0 (the node's
 * gateway routes them), an optional SipHash MAC.
 *
 * A frame never mixes order entry (routed by the node's gateway) with messages routed by
 * hdr.shard (TRANSFER), nor two destination shards: the node refuses mixed frames.
 *
 * Every request (NEW_ORDER, CANCEL, AMEND, CANCEL_REPLACE, TRANSFER) is kept in a bounded
 * table until the caller releases it. Until an answer arrives (ACK, NAK, an EXEC_REPORT or
 * ADMIN_REPLY naming it) it is retransmitted with exponential back-off, byte for byte with
 * the same cl_ord_id / transfer_id: the node dedups by (user, clientOrderId) and
 * (user, transfer_id), ARCHITECTURE.md §8. Retransmission is bounded in count and in time;
 * a request that exhausts both is reported once as CLIENT_EV_GAVE_UP.
 *
 * The node numbers everything it sends about one user (ACK, NAK, EXEC_REPORT) with a per-user
 * egress `seq`. Per user the client keeps `contig` (every seq up to it seen), the newest seq
 * and which of the CLIENT_SEQ_WINDOW seqs above contig were seen, so it reports gaps, fills
 * and repeats. A hole (contig < newest) open for replay_after_ms is asked for again with
 * REPORT_REPLAY {user, contig + 1, newest}, then every replay_every_ms while it stays:
 * the node re-sends the answers it still keeps as ordinary ACK / NAK / EXEC_REPORT with
 * their original seq. client_replay_tail asks for the answers never seen at all.
 *
 * Sessions (docs/security.md, common/wire.h "Client sessions"). With an API key
 * (cfg.logon, key_id, secret: client_key_file_load) the client logs on before it sends:
 * client_logon sends LOGON (no MAC, sender_id = the session id, a fresh nonce and the wall
 * clock, signed last with auth_logon_sign) in a frame of its own, again with a fresh nonce
 * every logon_retry_ms, and waits for LOGON_REPLY. Accepted, the reply comes MAC'd under
 * the session key (auth_session_key: both ends derive it from the secret and the LOGON);
 * refused, un-MAC'd with the reason (client_logon_reason). client_logon_start does the same
 * without waiting (client_tick resends and times it out; client_logon_status tells how it
 * ended: libomsclient's non-blocking logon). From then on every frame is a
 * session frame: WIRE_FRAME_F_SESSION, SESSION_HDR {session id, seq} first, MAC under the
 * session key; seq starts at the reply's next_seq (1) and is stamped as each frame leaves,
 * so a retransmitted request goes in a new frame with a new seq (the node dedups requests,
 * not frames). Frames from the node are decoded under the session key; un-MAC'd, only a
 * refused LOGON_REPLY or SESSION_REJECT UNKNOWN_SESSION is taken (the node knows no key for
 * those), anything else is a decode error.
 *  - SESSION_REJECT SEQ_GAP / SEQ_REPEAT (nothing in the frame was acted on): the next seq
 *    becomes the expected one (stats.seq_resyncs) and every unanswered request is due at
 *    once. MSG_RATE: the seq is taken as well, the requests wait for their back-off
 *    (stats.rate_refused). hdr.flags bit 0: a warning only (stats.rate_warnings).
 *  - SESSION_REJECT UNKNOWN_SESSION or a LOGOUT from the node: the session is gone. With
 *    cfg.relogon client_tick logs on again (same session id, fresh nonce; stats.relogons)
 *    and then sends every unanswered request again; a relogon unanswered for give_up_ms,
 *    or refused (delivered with session_ended), ends it. Without relogon the message is
 *    delivered with session_ended set. Either end counts in stats.session_ended.
 *  - Idle for the agreed heartbeat_ms, client_tick sends a HEARTBEAT (the node ends a
 *    session silent for AUTH_IDLE_BEATS of them); the node's HEARTBEATs are counted
 *    (stats.heartbeats_rx), not delivered. client_logout ends the session.
 * While not logged on, requests are tracked but not sent (client_submit's err -ENOTCONN),
 * and REPORT_REPLAYs are refused (-ENOTCONN).
 * Without a key the client speaks exactly as above: plain frames, the optional MAC.
 *
 * Time is injected (now_ns arguments, CLOCK_MONOTONIC from client_now_ns()) so the
 * bookkeeping can be tested without sleeping; a session client must use client_now_ns()
 * (client_logon does), since its heartbeats compare the times handed in. Not thread-safe:
 * one thread per client.
 */
#ifndef OMSD_TOOLS_CLIENT_H
#define OMSD_TOOLS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/auth.h"
#include "common/wire.h"

#define CLIENT_DEFAULT_HOST "10.77.0.2" /* deploy/omsd.ini [node] ip */
#define CLIENT_DEFAULT_PORT 7400        /* deploy/omsd.ini [node] udp_port */
#define CLIENT_FRAME_DEFAULT 1472       /* UDP payload of a 1500-byte MTU */
#define CLIENT_RX_BURST 64              /* datagrams drained per client_poll */
#define CLIENT_TICK_MAX 256             /* retransmits/give-ups handled per client_tick */
#define CLIENT_MSG_MAX 72               /* largest request we track (wire_new_order) */
#define CLIENT_TRANSFER_USER UINT64_MAX /* key space of transfers: ADMIN_REPLY has no user */
#define CLIENT_SEQ_WINDOW 1024          /* seqs above contig tracked per user (128 B bitmap) */
#define CLIENT_REPLAY_TICK_MAX 64       /* automatic REPORT_REPLAYs sent per client_tick */
#define CLIENT_REPLAY_SCAN_MAX 4096     /* users visited per client_tick looking for holes */
#define CLIENT_LOGON_RETRY_MS 500       /* default: a LOGON unanswered this long goes again */
#define CLIENT_HEARTBEAT_MS 1000        /* heartbeat when the node's reply names none */
#define CLIENT_KEY_FILE_MAX 65536       /* bytes of a key file client_key_file_load reads */

struct client_config {
	const char *host;        /* node IPv4 address (dotted quad) */
	uint16_t port;           /* node UDP port */
	const char *bind_host;   /* local address, NULL: any */
	uint16_t bind_port;      /* local port, 0: ephemeral */
	uint32_t session_id;     /* frame sender_id */
	struct wire_key key;     /* zero: frames carry no MAC */
	uint32_t frame_max;      /* bytes per datagram, 0: CLIENT_FRAME_DEFAULT */
	uint32_t requests_max;   /* requests tracked at once, 0: 1024 */
	uint32_t users_max;      /* users whose egress seq is tracked, 0: 1024 */
	uint32_t retry_first_ms; /* first retransmit after this, 0: 200 */
	uint32_t retry_cap_ms;   /* back-off doubles up to this, 0: 2000 */
	uint32_t retries_max;    /* retransmits per request, 0: 8 */
	uint32_t give_up_ms;     /* unanswered this long after the first send: give up, 0: 10000 */
	uint32_t replay_after_ms; /* a seq hole open this long is asked for again, 0: 100 */
	uint32_t replay_every_ms; /* ... and again this often while it stays, 0: 300 */
	bool replay_off;         /* no automatic REPORT_REPLAY (client_replay* still work) */
	bool seq_from_one;       /* every user's answers are numbered from 1 in this run (new
				    users, or rows seeded with egress_seq 0): a first seq seen above
				    1 leaves a hole 1..seq-1 to ask for, instead of being the
				    baseline */
	uint32_t drop_rx_permille; /* tests: throw away this many of every 1000 datagrams
				      received (seeded by drop_seed), to show lost answers come
				      back through REPORT_REPLAY; 0 in real use */
	uint64_t drop_seed;
	bool logon;              /* log on with an API key (client_logon): session frames; key
				    must then be zero */
	bool relogon;            /* log on again when the node ends the session */
	uint64_t key_id;         /* API key id, non-zero with logon */
	uint8_t secret[AUTH_SECRET_SIZE]; /* API secret (wiped by client_close) */
	uint32_t heartbeat_ms;   /* asked for in the LOGON, 0: the node's default */
	uint32_t logon_retry_ms; /* a LOGON unanswered this long is sent again with a fresh
				    nonce, 0: CLIENT_LOGON_RETRY_MS */
};

enum client_req_state {
	CLIENT_REQ_SENT = 1,    /* sent, no answer yet: retransmitted when due */
	CLIENT_REQ_ANSWERED,    /* ACK, EXEC_REPORT or ADMIN_REPLY seen (no more retransmits) */
	CLIENT_REQ_NAKED,       /* NAK seen (answered too) */
	CLIENT_REQ_GAVE_UP,     /* retransmits and time exhausted without an answer */
};

/* One tracked request. Fields are read-only for the caller except `tag`. */
struct client_req {
	uint64_t user;        /* account, CLIENT_TRANSFER_USER for transfers */
	uint64_t id;          /* cl_ord_id, or transfer_id for transfers */
	uint64_t tag;         /* the caller's */
	uint64_t first_ns;    /* first send */
	uint64_t next_ns;     /* next retransmit (state SENT) */
	uint64_t answer_ns;   /* first answer */
	uint32_t tries;       /* sends, the first included */
	uint32_t heap_index;  /* position in the retransmit heap, UINT32_MAX when not in it */
	uint16_t type;        /* enum wire_type of the request */
	uint16_t msg_len;     /* bytes in msg */
	uint8_t state;        /* enum client_req_state */
	uint8_t reserved;
	uint16_t reason;      /* NAK / reject / ADMIN_REPLY reason */
	uint64_t msg[CLIENT_MSG_MAX / 8]; /* the request, resent byte for byte */
};

enum client_ev_kind {
	CLIENT_EV_ACK = 1,     /* msg is a wire_ack */
	CLIENT_EV_NAK,         /* msg is a wire_nak */
	CLIENT_EV_EXEC,        /* msg is a wire_exec_report */
	CLIENT_EV_ADMIN_REPLY, /* msg is a wire_admin_reply */
	CLIENT_EV_OTHER,       /* another message type (msg set) */
	CLIENT_EV_GAVE_UP,     /* req gave up; msg is NULL */
};

struct client_event {
	uint8_t kind;                   /* enum client_ev_kind */
	const struct wire_msg_hdr *msg; /* the received message, valid during the callback */
	struct client_req *req;         /* the matched request, or NULL */
	uint64_t now_ns;                /* when it was handled */
	uint64_t seq_gap;               /* egress seqs missing just before this message */
	bool seq_repeat;                /* seq already seen (a duplicate or a re-sent report),
					 * or at or below contig after the window moved past
					 * it (abandoned): a report that late is taken for a
					 * repeat */
	bool seq_fill;                  /* seq below the newest, never seen: fills a gap */
	bool session_ended;             /* this LOGOUT, SESSION_REJECT or refused relogon ended
					 * the session for good (no relogon) */
};

typedef void(client_event_fn)(void *ctx, const struct client_event *ev);

struct client_stats {
	uint64_t frames_tx;           /* datagrams sent */
	uint64_t msgs_tx;             /* messages sent, retransmits included */
	uint64_t retransmits;         /* messages sent again */
	uint64_t send_errors;         /* sendto failures */
	uint64_t frames_rx;           /* datagrams received */
	uint64_t msgs_rx;             /* messages decoded */
	uint64_t decode_errors;       /* frames refused by wire_frame_decode */
	uint64_t decode_err[WIRE_E_COUNT]; /* ... per cause */
	uint64_t acks;
	uint64_t naks;
	uint64_t nak_reason[WIRE_REASON_MAX + 1]; /* NAKs per reason (MAX: out of range) */
	uint64_t execs;
	uint64_t exec_kind[WIRE_EXEC_MAX];        /* exec reports per kind */
	uint64_t admin_replies;
	uint64_t other;               /* messages of other types */
	uint64_t unmatched;           /* answers naming no tracked request */
	uint64_t seq_gaps;            /* egress seqs never seen (sum of gaps) */
	uint64_t seq_repeats;         /* egress seqs seen again */
	uint64_t seq_filled;          /* gaps filled later (a re-sent or late report);
				       * seq_gaps - seq_filled are still missing */
	uint64_t seq_abandoned;       /* missing seqs that fell out of the window below a
				       * seq more than CLIENT_SEQ_WINDOW above contig (still
				       * in seq_gaps - seq_filled; never asked for again) */
	uint64_t replay_requests;     /* REPORT_REPLAYs sent: automatic, tail and explicit */
	uint64_t gave_up;             /* requests given up */
	uint64_t table_full;          /* submits refused: request table full */
	uint64_t logons_sent;         /* LOGONs sent, retries included */
	uint64_t logons;              /* logons accepted, relogons included */
	uint64_t logons_refused;      /* LOGON_REPLYs with a reason */
	uint64_t relogons;            /* logons accepted after the node ended the session */
	uint64_t session_ended;       /* sessions ended for good: refused or no relogon */
	uint64_t seq_resyncs;         /* next seqs taken from SEQ_GAP / SEQ_REPEAT rejects */
	uint64_t rate_refused;        /* frames refused MSG_RATE */
	uint64_t rate_warnings;       /* SESSION_REJECT warnings (hdr.flags bit 0) */
	uint64_t heartbeats_tx;       /* HEARTBEATs sent */
	uint64_t heartbeats_rx;       /* HEARTBEATs received */
	uint64_t rx_dropped;          /* datagrams thrown away on purpose (drop_rx_permille) */
};

struct client;

uint64_t client_now_ns(void); /* CLOCK_MONOTONIC */

/* Short names for printing: "pending", "open", ... and "buy"/"sell". */
const char *client_exec_name(uint8_t exec);
const char *client_cause_name(uint8_t cause);

/* Open the socket (connected to host:port) and size the tables. 0 or -errno (-EINVAL also
 * for logon without a key_id, or with a MAC key as well). With logon and session_id 0 the
 * session id is random, non-zero. */
int client_open(struct client **out, const struct client_config *cfg);
void client_close(struct client *c);
int client_fd(const struct client *c);
uint16_t client_local_port(const struct client *c);

/*
 * Track a request and append it to the frame being built (sent by client_flush, or at once
 * when the frame is full). msg is a NEW_ORDER, CANCEL, AMEND, CANCEL_REPLACE or TRANSFER with
 * its header set (wire_hdr_init). Returns the tracked request, or NULL with *err set:
 * -EEXIST (that (user, id) is already tracked), -ENOSPC (table full), -EINVAL (not a request).
 */
struct client_req *client_submit(struct client *c, const void *msg, uint64_t tag,
				 uint64_t now_ns, int *err);
/* Append any message without tracking it (tests, raw senders). 0 or -errno. */
int client_send_untracked(struct client *c, const void *msg);
/* Send the frame being built, if any. 0 or -errno. */
int client_flush(struct client *c);

/*
 * Wait up to timeout_ms for datagrams, drain at most CLIENT_RX_BURST, call fn for every
 * message, then run client_tick. Returns messages handled (events delivered).
 */
uint32_t client_poll(struct client *c, int timeout_ms, client_event_fn *fn, void *ctx);
/* Handle one received datagram (exposed for tests). Returns messages handled. */
uint32_t client_rx(struct client *c, const void *buf, size_t len, uint64_t now_ns,
		   client_event_fn *fn, void *ctx);
/* Retransmit due requests and give up on exhausted ones (at most CLIENT_TICK_MAX), send the
 * due automatic REPORT_REPLAYs (at most CLIENT_REPLAY_TICK_MAX, visiting at most
 * CLIENT_REPLAY_SCAN_MAX users round-robin), then flush. Returns requests handled
 * (retransmits and give-ups; replays count in stats.replay_requests). */
uint32_t client_tick(struct client *c, uint64_t now_ns, client_event_fn *fn, void *ctx);
/* Earliest pending retransmit deadline, or UINT64_MAX. */
uint64_t client_next_due_ns(const struct client *c);
/* Earliest time client_tick has work: a retransmit, a heartbeat, a LOGON resend or its
 * deadline, an automatic REPORT_REPLAY; UINT64_MAX when none is pending. */
uint64_t client_wake_ns(const struct client *c);

struct client_req *client_find(struct client *c, uint64_t user, uint64_t id);
/* Forget a request (after its final report). */
void client_release(struct client *c, struct client_req *req);
/* Requests tracked; of those, not yet answered. */
uint32_t client_tracked(const struct client *c);
uint32_t client_unanswered(const struct client *c);
const struct client_stats *client_stats(const struct client *c);
/* The newest egress seq seen for user, 0 if none. */
uint64_t client_user_seq(const struct client *c, uint64_t user);
/* The seq up to which every one was seen (or abandoned) for user, 0 if none. */
uint64_t client_user_contig(const struct client *c, uint64_t user);

/*
 * Read an API key file into cfg (key_id, secret, logon = true): the first key line of
 * "<key_id> <secret: 64 hex digits> [perms users ...]" (auth_client_key_parse), so one line
 * of the node's key file serves. At most CLIENT_KEY_FILE_MAX bytes. 0, or -errno with
 * "path: what" in err (-EINVAL: no valid key line, -EFBIG: too large).
 */
int client_key_file_load(const char *path, struct client_config *cfg, char *err, size_t cap);
/*
 * Log on (cfg.logon): send LOGON and wait up to timeout_ms for the LOGON_REPLY, sending it
 * again with a fresh nonce every logon_retry_ms. Messages other than the reply that arrive
 * meanwhile are not delivered. Returns 0 (logged on; requests already submitted become due),
 * -EACCES (refused: client_logon_reason), -ETIMEDOUT (no reply), -EINVAL (no key
 * configured). Already logged on: 0 at once.
 */
int client_logon(struct client *c, int timeout_ms);
/*
 * Start a logon without waiting (cfg.logon): send LOGON now; client_tick sends it again
 * with a fresh nonce every logon_retry_ms and ends the attempt timeout_ms from now; the
 * LOGON_REPLY is taken by client_rx (so client_poll) and delivered as CLIENT_EV_OTHER.
 * client_logon_status tells how it stands. 0 (sent; or already logged on, or a logon
 * already pending), -EINVAL (no key configured, timeout_ms < 1).
 */
int client_logon_start(struct client *c, int timeout_ms);
/*
 * Where the session stands: 0 logged on; -EINPROGRESS a logon or relogon waits for its
 * reply; -EACCES the last one was refused (client_logon_reason); -ETIMEDOUT the last one
 * went unanswered; -ENOTCONN otherwise (never logged on, logged out, ended by the node);
 * -EINVAL no key configured.
 */
int client_logon_status(const struct client *c);
/* The reason of the last LOGON refusal (0: none). */
uint16_t client_logon_reason(const struct client *c);
/* Send what is being built, then LOGOUT {session id, reason 0}; the session is over (no
 * relogon). 0, -ENOTCONN (not logged on) or -errno. */
int client_logout(struct client *c);
bool client_session_up(const struct client *c);
uint32_t client_session_id(const struct client *c);
/* The seq the next session frame will carry (0 before the first logon). */
uint64_t client_session_seq(const struct client *c);
/* The heartbeat interval the node agreed to (0 before the first logon). */
uint32_t client_heartbeat_ms(const struct client *c);

/*
 * Ask the node again for user's numbered answers with seq in [from, to] (to 0: up to the
 * newest it keeps): one REPORT_REPLAY, appended to the frame being built like order entry
 * (sent by client_flush or client_tick). No answer of its own: the re-sent ACK / NAK /
 * EXEC_REPORT arrive as usual, at most WIRE_REPLAY_MAX per request. from >= 1, to 0 or
 * >= from. 0 or -errno (-EINVAL on a bad range, -ENOTCONN when a session client is not
 * logged on).
 */
int client_replay(struct client *c, uint64_t user, uint64_t from, uint64_t to);
/*
 * For every tracked user, REPORT_REPLAY {contig + 1, 0}: the answers never seen, e.g. a
 * final report lost with no later seq to reveal the hole. Flushes. Returns requests sent.
 */
uint32_t client_replay_tail(struct client *c);

#endif

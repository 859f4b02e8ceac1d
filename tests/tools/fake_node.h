/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test double of a node's client-facing *messages* on 127.0.0.1 (not of its logic): it
 * answers each request the way the OMS does on the wire (ARCHITECTURE.md §5), so the client
 * library and the tools can be tested without DPDK.
 *
 *   NEW_ORDER       ACK, then: user 666 → NAK INSUFFICIENT_FUNDS instead of the ACK;
 *                   px 13 → REJECTED OUTSIDE_BAND (done); IOC/market → FILL (done);
 *                   else OPEN. A repeated (user, cl_ord_id) gets the ACK again and nothing
 *                   else.
 *   CANCEL          ACK, CANCELLED (cause user, done) on the target; unknown target → NAK.
 *   AMEND           ACK, AMENDED on the target.
 *   CANCEL_REPLACE  ACK, CANCELLED (replaced, done) on the target, OPEN on the new id.
 * "done": WIRE_REPORT_F_DONE, the order's last report; with legacy_done, as a node of the
 * earlier release, no flag and a DONE report after every last FILL and CANCELLED.
 *   TRANSFER        ADMIN_REPLY with value = amount.
 *   REPORT_REPLAY   re-sends, in seq order, the kept numbered answers of the user with seq
 *                   in [from_seq, to_seq] (to_seq 0: all), at most WIRE_REPLAY_MAX.
 * Every client message carries the per-user egress seq; the last FAKE_RING numbered answers
 * are kept for REPORT_REPLAY (drop_answers loses some of them on the way out).
 *
 * With fake_node_sessions it plays the gateway's session side instead of taking plain
 * frames, with the real session table (auth.h), as the node's gateway does:
 *   LOGON           auth_logon: LOGON_REPLY MAC'd under the session key, or a refusal
 *                   without a MAC.
 *   session frame   wire_session_frame_decode + auth_frame: refused whole with a
 *                   SESSION_REJECT (UNKNOWN_SESSION without a MAC, expected_seq 0; the
 *                   others MAC'd), a bad MAC unanswered; accepted, its messages are answered
 *                   as above under the session key, a HEARTBEAT with a HEARTBEAT, a LOGOUT
 *                   ends the session.
 *   idle            auth_expire: a LOGOUT SESSION_IDLE to a session silent for
 *                   AUTH_IDLE_BEATS heartbeats.
 * forget_sessions and logout_reason end sessions on the next session frame, as a node
 * restart or a revoked key would; silent answers nothing, not even a LOGON.
 */
#ifndef OMSD_TESTS_TOOLS_FAKE_NODE_H
#define OMSD_TESTS_TOOLS_FAKE_NODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth/auth.h"
#include "common/wire.h"

#define FAKE_USERS_MAX 64
#define FAKE_ORDERS_MAX 8192
#define FAKE_RING 1024        /* numbered answers kept for REPORT_REPLAY */
#define FAKE_MSG_WORDS (sizeof(struct wire_exec_report) / 8) /* the largest answer */
#define FAKE_SEQS_MAX 256     /* seqs of accepted session frames kept, in order */
#define FAKE_SESSIONS_MAX 16  /* sessions the gateway side holds */
#define FAKE_LOGON_WINDOW_NS UINT64_C(5000000000) /* LOGON timestamp skew allowed */

struct fake_node {
	int fd;                    /* UDP socket on 127.0.0.1 */
	uint16_t port;             /* its port */
	struct wire_key key;       /* frames must carry this MAC (zero: none) */
	atomic_bool stop;
	pthread_t thread;
	atomic_uint drop_frames;   /* drop this many incoming frames first (retransmit tests) */
	atomic_uint skip_seq_once; /* 1: skip one egress seq once (gap tests) */
	atomic_uint silent;        /* 1: receive but never answer */
	atomic_uint drop_answers;  /* lose this many numbered answers (kept for replay) */
	atomic_uint drop_execs;    /* lose this many EXEC_REPORTs (kept for replay) */
	atomic_uint legacy_done;   /* 1: a DONE report after an order's last report, no flag */
	atomic_ulong replays_rx;   /* REPORT_REPLAY messages received */
	atomic_ulong replayed;     /* answers re-sent for them */
	atomic_ulong frames_rx;    /* frames received (dropped ones included) */
	atomic_ulong msgs_rx;      /* messages decoded */
	atomic_ulong decode_errors;
	atomic_ulong duplicates;   /* repeated (user, cl_ord_id) */
	uint32_t last_sender;      /* sender_id of the last frame */
	uint32_t last_error;       /* enum wire_err of the last refused frame */
	uint64_t users[FAKE_USERS_MAX];   /* users seen */
	uint64_t seqs[FAKE_USERS_MAX];    /* their egress seq */
	uint32_t user_count;
	uint64_t ord_user[FAKE_ORDERS_MAX]; /* (user, cl_ord_id) seen */
	uint64_t ord_id[FAKE_ORDERS_MAX];
	uint32_t ord_count;
	uint64_t ring[FAKE_RING][FAKE_MSG_WORDS]; /* numbered answers, slot = count % FAKE_RING */
	uint64_t ring_count;       /* numbered answers ever kept */

	/* The gateway's session side (fake_node_sessions); the table is the node thread's. */
	bool gateway;              /* sessions on: plain client frames are refused */
	struct auth_sessions sessions;
	atomic_uint forget_sessions; /* 1: the next session frame finds no session (restart) */
	atomic_uint logout_reason; /* non-zero: the next session frame is answered with a LOGOUT
				    * of this reason and ends the session (a revoked key) */
	atomic_uint drop_logon_replies; /* lose this many LOGON_REPLYs (the logon is done) */
	atomic_ulong logons;       /* LOGONs accepted */
	atomic_ulong logons_refused;
	atomic_ulong logouts_rx;   /* LOGOUTs from clients */
	atomic_ulong session_frames; /* session frames accepted */
	atomic_ulong session_rejects; /* SESSION_REJECTs sent */
	atomic_ulong rejects[WIRE_REASON_MAX]; /* ... by reason */
	atomic_ulong heartbeats_rx;
	atomic_ulong idle_ended;   /* sessions ended by auth_expire */
	atomic_uint last_reject;   /* reason of the last SESSION_REJECT */
	atomic_ulong seq_count;    /* accepted session frames whose seq is in frame_seqs[] */
	uint64_t frame_seqs[FAKE_SEQS_MAX]; /* their seqs, in order (written before seq_count) */
};

/* Bind 127.0.0.1:0 and start the thread. 0 or -errno. */
int fake_node_start(struct fake_node *n);
/* Before fake_node_start: play the gateway's session side with keys (kept by the caller)
 * and the auth config's heartbeat_ms and msgs_per_window (0: 1000 ms, no limit) with a
 * rate window of rate_window_ms. Freed by fake_node_stop. 0 or -ENOMEM. */
int fake_node_sessions(struct fake_node *n, const struct auth_keys *keys, uint32_t heartbeat_ms,
		       uint32_t msgs_per_window, uint32_t rate_window_ms);
void fake_node_stop(struct fake_node *n);

#endif

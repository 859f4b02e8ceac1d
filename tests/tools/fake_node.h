/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test double of a node's client-facing *messages* on 127.0.0.1 (not of its logic): it
 * answers each request the way the OMS does on the wire (ARCHITECTURE.md §5), so the client
 * library and the tools can be tested without DPDK.
 *
 *   NEW_ORDER       ACK, then: user 666 → NAK INSUFFICIENT_FUNDS instead of the ACK;
 *                   px 13 → REJECTED OUTSIDE_BAND; IOC/market → FILL + DONE; else OPEN.
 *                   A repeated (user, cl_ord_id) gets the ACK again and nothing else.
 *   CANCEL          ACK, CANCELLED (cause user) + DONE on the target; unknown target → NAK.
 *   AMEND           ACK, AMENDED on the target.
 *   CANCEL_REPLACE  ACK, CANCELLED (replaced) + DONE on the target, OPEN on the new id.
 *   TRANSFER        ADMIN_REPLY with value = amount.
 *   REPORT_REPLAY   re-sends, in seq order, the kept numbered answers of the user with seq
 *                   in [from_seq, to_seq] (to_seq 0: all), at most WIRE_REPLAY_MAX.
 * Every client message carries the per-user egress seq; the last FAKE_RING numbered answers
 * are kept for REPORT_REPLAY (drop_answers loses some of them on the way out).
 */
#ifndef OMSD_TESTS_TOOLS_FAKE_NODE_H
#define OMSD_TESTS_TOOLS_FAKE_NODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/wire.h"

#define FAKE_USERS_MAX 64
#define FAKE_ORDERS_MAX 8192
#define FAKE_RING 1024        /* numbered answers kept for REPORT_REPLAY */
#define FAKE_MSG_WORDS (sizeof(struct wire_exec_report) / 8) /* the largest answer */

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
};

/* Bind 127.0.0.1:0 and start the thread. 0 or -errno. */
int fake_node_start(struct fake_node *n);
void fake_node_stop(struct fake_node *n);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsload's history (--history FILE): every request sent and every message received, one
 * tab-separated line each, so that a checker that does not trust omsload's own bookkeeping
 * (tests/chaos/checker.py) can rebuild what the client saw and compare it with the state of
 * the cluster. Lines (times in microseconds of CLOCK_MONOTONIC; ids and seqs in decimal):
 *
 *   dep   T user transfer_id asset amount        a deposit sent (first send only)
 *   new   T user cl_ord_id symbol side type tif qty px quote_qty
 *   cxl   T user cl_ord_id orig_cl_ord_id
 *   ack   T user cl_ord_id oid_shard_seq seq
 *   nak   T user cl_ord_id reason seq
 *   exec  T user cl_ord_id oid_shard_seq seq exec last_qty last_px cum_qty leaves_qty fee flags
 *                                                flags: the report's hdr.flags (1: done,
 *                                                WIRE_REPORT_F_DONE)
 *   admin T transfer_id reason value             an ADMIN_REPLY (a deposit's answer)
 *   gave  T user id tag                          a request that gave up retransmitting
 *   end   T                                      the run ended (drain over)
 *
 * Every received message is written as it arrived, repeats included: the checker applies
 * the (user, seq) rule itself. Lines are buffered; history_close flushes them.
 */
#ifndef OMSD_TOOLS_OMSLOAD_HISTORY_H
#define OMSD_TOOLS_OMSLOAD_HISTORY_H

#include <stdint.h>
#include <stdio.h>

#include "common/wire.h"

struct history {
	FILE *f;       /* NULL: no history */
	char *buf;     /* stdio buffer */
};

/* Open path for writing; 0 or -errno. With path NULL the history is off (every call a no-op). */
int history_open(struct history *h, const char *path);
/* Flush and close; 0 or -EIO when a write failed. */
int history_close(struct history *h);

/* A request about to be sent for the first time (NEW_ORDER, CANCEL or TRANSFER). */
void history_sent(struct history *h, uint64_t now_ns, const struct wire_msg_hdr *msg);
/* A message received (ACK, NAK, EXEC_REPORT or ADMIN_REPLY); other types are ignored. */
void history_received(struct history *h, uint64_t now_ns, const struct wire_msg_hdr *msg);
void history_gave_up(struct history *h, uint64_t now_ns, uint64_t user, uint64_t id,
		     uint64_t tag);
void history_end(struct history *h, uint64_t now_ns);

#endif

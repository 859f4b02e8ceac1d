/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsload's ledger: every NEW_ORDER a run sent and what the node said about it, so that
 * after the drain it can tell whether an acknowledged order went missing, was executed
 * twice or was filled beyond its quantity (docs/tools.md, "The ledger").
 *
 * It assumes no arrival order, because under loss, retransmits and leader changes every
 * order is possible. An order is known by (user, clientOrderId) and by the orderId the OMS
 * assigned: whichever of its ACK and its first EXEC_REPORT arrives first records the
 * orderId; a later ACK or report naming the same orderId agrees with it, and only another
 * orderId for the same (user, clientOrderId) counts the order as doubled.
 *
 * Every message the node numbers (ACK, NAK and EXEC_REPORT carry a per-user egress seq) is
 * applied once. The ledger keeps the whole set of seqs seen per user of the run, not a
 * window: a report a new leader re-sends is a repeat however old it is, and a late report
 * is new however late (the client library's window can tell neither beyond
 * CLIENT_SEQ_WINDOW). The same set gives the exact sequence holes: seen, and filled later.
 *
 * Sized at ledger_init; the per-user seq sets grow with the run (1 bit per seq). Not
 * thread-safe.
 */
#ifndef OMSD_TOOLS_OMSLOAD_LEDGER_H
#define OMSD_TOOLS_OMSLOAD_LEDGER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/wire.h"

#define LEDGER_SLOTS_MIN 1024
#define LEDGER_SLOTS_MAX (UINT64_C(1) << 24)
#define LEDGER_SEQ_WORDS_MAX (UINT32_C(1) << 20) /* per user: 2^26 seqs, 8 MiB */

/* One NEW_ORDER sent. */
struct ledger_ord {
	uint64_t user;           /* 0: free slot */
	uint64_t id;             /* cl_ord_id */
	struct wire_oid oid;     /* from the first ACK or report naming the order */
	int64_t qty;             /* 0 for a market buy by quote budget */
	int64_t filled;          /* sum of last_qty over distinct FILL reports */
	uint8_t admitted;        /* an ACK or a report seen: the node has the order */
	uint8_t oid_known;       /* oid holds the orderId the node assigned */
	uint8_t oid_changed;     /* an ACK or report named another orderId */
	uint8_t opened;          /* an OPEN report seen */
	uint8_t finals;          /* distinct last reports (wire_report_final; saturates at 255) */
	uint8_t reserved[3];
};

/* The egress seqs seen for one user: a bitmap from base, and the span [lo, hi] seen. */
struct ledger_seqs {
	uint64_t *bits;          /* bit k of word j: seq base + 64 j + k seen; NULL: none yet */
	uint64_t base;           /* a multiple of 64 */
	uint32_t words;          /* words in bits */
	uint32_t reserved;
	uint64_t lo, hi;         /* lowest and highest seq seen */
};

struct ledger {
	struct ledger_ord *t;    /* open-addressed by (user, id), at most 3/4 full */
	uint64_t mask;           /* slots - 1 */
	uint64_t used;           /* slots in use */
	uint64_t full;           /* orders not recorded: no room */
	struct ledger_seqs *users; /* per user of the run, first_user first */
	uint64_t first_user;
	uint32_t user_count;
	uint32_t reserved;
	uint64_t seq_gaps;       /* seqs found missing between two seen (sum of holes) */
	uint64_t seq_filled;     /* ... of those, seen later */
	uint64_t seq_repeats;    /* messages seen again */
	uint64_t seq_untracked;  /* messages whose seq the sets had no room for */
};

/* What ledger_count adds up after the drain (docs/tools.md). */
struct ledger_counts {
	uint64_t acked;          /* orders admitted: an ACK or a report seen */
	uint64_t resting;        /* ... OPEN, no final report */
	uint64_t final;          /* ... exactly one final report */
	uint64_t unreported;     /* ... neither OPEN nor final */
	uint64_t doubled;        /* ... two final reports, or two orderIds */
	uint64_t overfilled;     /* ... filled beyond the quantity */
};

/* Room for orders_max orders (at most LEDGER_SLOTS_MAX * 3/4) of users
 * [first_user, first_user + user_count). 0 or -ENOMEM. */
int ledger_init(struct ledger *g, uint64_t orders_max, uint64_t first_user, uint32_t user_count);
void ledger_free(struct ledger *g);

/* A NEW_ORDER sent (user != 0). Counted in `full` when there is no room. */
void ledger_order_sent(struct ledger *g, uint64_t user, uint64_t id, int64_t qty);
/* The order, or NULL when it was not recorded. */
const struct ledger_ord *ledger_order(const struct ledger *g, uint64_t user, uint64_t id);

/* A message received. Each returns true when it is new, false when its (user, seq) was seen
 * already (a duplicate or a re-sent report), in which case nothing is applied. Messages of
 * users outside the run, or unsequenced (seq 0), are always new. */
bool ledger_on_ack(struct ledger *g, const struct wire_ack *m);
bool ledger_on_nak(struct ledger *g, const struct wire_nak *m);
bool ledger_on_exec(struct ledger *g, const struct wire_exec_report *m);

/* After the drain. */
void ledger_count(const struct ledger *g, struct ledger_counts *out);
/* The next order at or after *cursor that rests (OPEN, no final report), advancing
 * *cursor past it; NULL at the end. Start with *cursor = 0. */
const struct ledger_ord *ledger_next_resting(const struct ledger *g, uint64_t *cursor);

#endif

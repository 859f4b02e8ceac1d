/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test double of the ME's *messages* (docs/me-contract.md): it takes SUBMIT / CANCEL_TO_ME /
 * AMEND_TO_ME / REPLACE_TO_ME / OPEN_ORDERS_QUERY from the OMS's egress, keeps tiny books
 * with price-time matching, and appends contract-conformant ME_EVENTs to one stream per ME
 * shard (seq 1, 2, ...). The property test delivers those streams to the OMS with
 * duplicates, reordering and replays. It is not the ME: the real one is combined with the
 * OMS in the system simulator.
 */
#ifndef OMSD_TESTS_UNIT_OMS_FAKE_ME_H
#define OMSD_TESTS_UNIT_OMS_FAKE_ME_H

#include <stdbool.h>
#include <stdint.h>

#include "common/prng.h"
#include "common/wire.h"

#define FME_ORDERS_MAX 65536
#define FME_LOG_MAX 262144
#define FME_SHARDS 2
#define FME_SYMS 4

struct fme_order {
	struct wire_oid oid;
	uint32_t symbol;
	uint8_t side, type, tif, live;
	uint8_t entering; /* taken: its next event says so (WIRE_EV_F_ENTERED) */
	int64_t px, leaves, cum;
	int64_t budget; /* market buy: notional budget left */
};

struct fme_sym {
	uint32_t symbol;
	uint16_t me_shard;
	int64_t base_unit, lot;
};

struct fme {
	struct fme_sym syms[FME_SYMS];
	uint32_t sym_count;
	struct fme_order *orders; /* every id ever seen (dedup) */
	uint32_t order_count;
	struct wire_me_event *log[FME_SHARDS]; /* retained streams */
	uint32_t log_count[FME_SHARDS];
	uint32_t log_mark[FME_SHARDS]; /* log_count when this input began: events at or past it
					* are not delivered yet, so DONE may fold into one */
	struct prng *prng;
	uint32_t reject_pct; /* random REJECTED(OUTSIDE_BAND) share */
	uint64_t now;
	/* Answers to OPEN_ORDERS_QUERY, delivered by the driver. */
	struct wire_open_orders_snapshot *snaps;
	uint32_t snap_count;
};

void fme_init(struct fme *m, struct prng *p);
void fme_fini(struct fme *m);
void fme_symbol(struct fme *m, uint32_t symbol, uint16_t me_shard, int64_t base_unit, int64_t lot);
/* Process one OMS → ME message. */
void fme_input(struct fme *m, const struct wire_msg_hdr *msg);
/* ME-initiated: expire one random live order (GTD/halt style CANCELLED + DONE). */
void fme_expire_random(struct fme *m);
uint32_t fme_live_count(const struct fme *m);

#endif

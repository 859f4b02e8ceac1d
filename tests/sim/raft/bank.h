/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small deterministic service for exercising consensus before the real services plug in:
 * a bank of accounts with transfers between them (wire_transfer: user = from account,
 * asset = to account, amount > 0). Money is conserved; time and index never go backwards;
 * the service counts any violation so the simulator can fail on it.
 */
#ifndef OMSD_SIM_RAFT_BANK_H
#define OMSD_SIM_RAFT_BANK_H

#include <stdint.h>

#include "common/service.h"

#define BANK_ACCOUNTS 16
#define BANK_INITIAL 1000000 /* each account starts with this much */

struct bank {
	int64_t balance[BANK_ACCOUNTS]; /* per account */
	uint64_t transfers_ok;          /* applied transfers */
	uint64_t transfers_refused;     /* insufficient funds */
	uint64_t msgs;                  /* messages applied */
	uint64_t ticks;                 /* tick/noop entries seen */
	uint64_t last_index;            /* index of the last entry seen */
	uint64_t last_time_ns;          /* cluster time of the last entry seen */
	uint64_t digest;                /* order-sensitive hash of everything applied */
	uint64_t violations;            /* time/index went backwards, money not conserved */
};

extern const struct svc_ops bank_ops;

void bank_init(struct bank *b);
/* Sum of balances (must equal BANK_ACCOUNTS * BANK_INITIAL). */
int64_t bank_total(const struct bank *b);
void bank_transfer_msg(struct wire_transfer *m, uint16_t shard, uint64_t from, uint64_t to,
		       int64_t amount, uint64_t id);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>

#include "fixture.h"

static struct fx F;

static void
fini(void)
{
	fx_check(&F);
	fx_fini(&F);
}

/* Goal: the leader stamps each entry with its own clock; services see exactly that time.
 * Method: skew n1's clock by +5 s; an entry proposed there carries n1's local time and
 * every member's service reports it as the applied time. */
Test(cns_time, leader_stamps_its_clock, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.nodes[0].skew_ns = 5000000000;
	fx_campaign(&F, 0);
	uint64_t before = fx_local(&F, 0);
	cr_assert(eq(int, fx_propose(&F, 0, 1), 0));
	cns_flush(F.nodes[0].c, fx_local(&F, 0));
	uint64_t idx = cns_last_index(F.nodes[0].c);
	cr_assert(eq(u64, cns_log_entry(F.nodes[0].c, idx)->time_ns, before));
	fx_run_ms(&F, 10);
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert(eq(u64, F.nodes[i].svc.last_time_ns, before));
		cr_assert(eq(u64, cns_applied_time(F.nodes[i].c), before));
	}
}

/* Goal: cluster time never goes backwards across terms: a new leader whose clock is behind
 * stamps at least the last entry's time.
 * Method: n1 (clock +10 s) leads and commits; n2 (clock +0) takes over by transfer and
 * proposes: its entries carry n1's last time, not its own earlier clock. */
Test(cns_time, new_leader_never_goes_back, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.nodes[0].skew_ns = 10000000000;
	fx_campaign(&F, 0);
	cr_assert(eq(int, fx_propose(&F, 0, 1), 0));
	cns_flush(F.nodes[0].c, fx_local(&F, 0));
	fx_run_ms(&F, 10);
	uint64_t t1 = cns_applied_time(F.nodes[1].c);
	cr_assert(t1 >= 10000000000);
	cr_assert(eq(int, cns_transfer(F.nodes[0].c, fx_local(&F, 0), 2), 0));
	fx_run_ms(&F, 50);
	cr_assert(eq(int, fx_leader(&F), 1));
	cr_assert(eq(int, fx_propose(&F, 1, 2), 0));
	cns_flush(F.nodes[1].c, fx_local(&F, 1));
	uint64_t idx = cns_last_index(F.nodes[1].c);
	cr_assert(cns_log_entry(F.nodes[1].c, idx)->time_ns >= t1);
	cr_assert(fx_local(&F, 1) < t1, "the new leader's clock is behind");
	fx_run_ms(&F, 10);
	for (uint32_t i = 0; i < 3; i++)
		cr_assert(eq(u64, F.nodes[i].svc.time_back, 0));
}

/* Goal: an idle leader appends a tick entry at the configured cadence so service timers
 * see time move; a busy leader does not.
 * Method: tick_entry_ns 50 ms; 500 ms idle gives about 10 ticks applied on every member. */
Test(cns_time, idle_leader_ticks, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.tick_entry_ns = 50000000;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_run_ms(&F, 500);
	uint64_t ticks = cns_counter(F.nodes[0].c, CNS_C_TICK_ENTRIES);
	cr_assert(ticks >= 9 && ticks <= 11, "ticks %lu", (unsigned long)ticks);
	for (uint32_t i = 0; i < 3; i++)
		cr_assert(F.nodes[i].svc.ticks + 1 >= ticks, "n%u saw %lu ticks", i + 1,
			  (unsigned long)F.nodes[i].svc.ticks);
	uint64_t t = cns_applied_time(F.nodes[2].c);
	cr_assert(t + 100000000 >= fx_local(&F, 0), "cluster time follows the leader's clock");
}

/* Goal: leadership transfer (thesis §3.10): proposals pause, the target is brought up to
 * date, gets TimeoutNow, wins the next term at once despite the followers' leases.
 * Method: n1 leads; transfer to n3 with an entry still unreplicated to n3; propose during
 * the transfer gives -EBUSY; after delivery n3 leads term+1 and holds the entry. */
Test(cns_time, leadership_transfer, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	uint64_t term = cns_term(F.nodes[0].c);
	cr_assert(eq(int, fx_propose(&F, 0, 7), 0));
	cr_assert(eq(int, cns_transfer(F.nodes[0].c, fx_local(&F, 0), 3), 0));
	cr_assert(eq(int, fx_propose(&F, 0, 8), -EBUSY));
	fx_deliver_all(&F);
	cr_assert(eq(int, fx_leader(&F), 2));
	cr_assert(eq(u64, cns_term(F.nodes[2].c), term + 1));
	cr_assert(eq(u64, cns_counter(F.nodes[0].c, CNS_C_TIMEOUT_NOW_SENT), 1));
	fx_run_ms(&F, 20);
	for (uint32_t i = 0; i < 3; i++)
		cr_assert(eq(u64, F.nodes[i].svc.sum, 7));
	cr_assert(eq(int, cns_transfer(F.nodes[0].c, fx_local(&F, 0), 1), -EPERM));
	cr_assert(eq(int, cns_transfer(F.nodes[2].c, fx_local(&F, 2), 9), -EINVAL));
}

/* Goal: a transfer to an unreachable target is abandoned after an election timeout and
 * the leader takes proposals again.
 * Method: isolate n3, transfer to it, run 400 ms: n1 still leads and accepts proposals. */
Test(cns_time, transfer_times_out, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	fx_isolate(&F, 2, true);
	cr_assert(eq(int, cns_transfer(F.nodes[0].c, fx_local(&F, 0), 3), 0));
	fx_run_ms(&F, 400);
	cr_assert(eq(int, fx_leader(&F), 0));
	cr_assert(eq(int, fx_propose(&F, 0, 1), 0));
	fx_heal(&F);
}

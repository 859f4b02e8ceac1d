/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <signal.h>
#include <stdlib.h>

#include "fixture.h"

static struct fx F;

static void
fini(void)
{
	fx_check(&F);
	fx_fini(&F);
}

/* Goal: a 3-member cluster elects exactly one leader that everyone follows.
 * Method: run 2 s of ticks with randomized timeouts; check one leader, one term, and the
 * config entry committed everywhere. */
Test(cns_election, elects_one_leader, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_run_ms(&F, 2000);
	int l = fx_leader(&F);
	cr_assert(l >= 0);
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert(eq(u32, cns_leader(F.nodes[i].c), (uint32_t)l + 1));
		cr_assert(eq(u64, cns_term(F.nodes[i].c), cns_term(F.nodes[l].c)));
		cr_assert(cns_commit_index(F.nodes[i].c) >= 1);
	}
	/* The first entry of the log is the configuration. */
	cr_assert(eq(u16, cns_log_entry(F.nodes[l].c, 1)->kind, CNS_ENTRY_CONFIG));
}

/* Goal: a single member elects itself and commits alone.
 * Method: one node, tick past the election timeout, propose, flush, apply. */
Test(cns_election, single_member_commits_alone, .fini = fini)
{
	fx_init(&F, 1, CNS_DURABLE_MEMORY);
	fx_run_ms(&F, 400);
	cr_assert(eq(int, fx_leader(&F), 0));
	cr_assert(eq(int, fx_propose(&F, 0, 5), 0));
	cns_flush(F.nodes[0].c, fx_local(&F, 0));
	fx_apply_all(&F);
	cr_assert(eq(u64, F.nodes[0].svc.sum, 5));
}

/* Goal: split votes resolve.
 * Method: five members; two campaign at the same instant and their vote requests race;
 * randomized timeouts then produce one leader within a few election timeouts. */
Test(cns_election, split_vote_resolves, .fini = fini)
{
	fx_init(&F, 5, CNS_DURABLE_MEMORY);
	F.nodes[0].c->election_deadline_ns = 1;
	F.nodes[1].c->election_deadline_ns = 1;
	cns_tick(F.nodes[0].c, fx_local(&F, 0));
	cns_tick(F.nodes[1].c, fx_local(&F, 1));
	/* Both pre-candidates get pre-votes, both bump to term 1 and split the voters. */
	fx_deliver_all(&F);
	uint32_t candidates = 0;
	for (uint32_t i = 0; i < 5; i++)
		candidates += cns_role(F.nodes[i].c) != CNS_FOLLOWER;
	cr_assert(candidates >= 1);
	fx_run_ms(&F, 3000);
	int l = fx_leader(&F);
	cr_assert(l >= 0);
	for (uint32_t i = 0; i < 5; i++)
		cr_assert(eq(u32, cns_leader(F.nodes[i].c), (uint32_t)l + 1));
}

/* Goal: pre-vote stops a partitioned node from disrupting a healthy majority (thesis §9.6).
 * Method: elect a leader, isolate a follower for 3 s (many election timeouts), heal; the
 * isolated node never bumped its term and the leader and term are unchanged. */
Test(cns_election, prevote_partitioned_node_does_not_disrupt, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	cr_assert(eq(int, fx_leader(&F), 0));
	uint64_t term = cns_term(F.nodes[0].c);
	fx_isolate(&F, 2, true);
	fx_run_ms(&F, 3000);
	cr_assert(eq(u64, cns_term(F.nodes[2].c), term), "isolated node bumped its term");
	cr_assert(cns_counter(F.nodes[2].c, CNS_C_PRE_VOTES_STARTED) > 5);
	cr_assert(eq(u64, cns_counter(F.nodes[2].c, CNS_C_ELECTIONS_STARTED), 0));
	fx_heal(&F);
	fx_run_ms(&F, 1000);
	cr_assert(eq(int, fx_leader(&F), 0));
	cr_assert(eq(u64, cns_term(F.nodes[0].c), term));
	cr_assert(eq(u32, cns_leader(F.nodes[2].c), 1));
}

/* Goal: a live leader's followers ignore a disruptive RequestVote (thesis §4.2.3).
 * Method: elect n1, hand n2 a RequestVote from n3 at a higher term; n2 keeps its term and
 * does not answer. */
Test(cns_election, lease_ignores_disruptive_candidate, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	uint64_t term = cns_term(F.nodes[1].c);
	struct wire_request_vote rv;
	memset(&rv, 0, sizeof(rv));
	wire_hdr_init(&rv.hdr, WIRE_REQUEST_VOTE, F.cfg.shard);
	rv.term = term + 5;
	rv.last_index = 100;
	rv.last_term = term + 4;
	rv.candidate = 3;
	cr_assert(eq(int, cns_step(F.nodes[1].c, fx_local(&F, 1), &rv.hdr), 0));
	cr_assert(eq(u64, cns_term(F.nodes[1].c), term));
	cr_assert(eq(u64, cns_counter(F.nodes[1].c, CNS_C_VOTES_IGNORED_LEASE), 1));
	cr_assert(eq(u32, F.q_len, 0), "no reply while the lease holds");
}

/* Goal: a vote is refused to a candidate whose log is behind (Raft §5.4.1).
 * Method: commit entries on n1+n2 while n3 is isolated, then let n3 campaign after the
 * others lost their leader; n3 cannot win, n1 or n2 does. */
Test(cns_election, stale_log_cannot_win, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	fx_isolate(&F, 2, true);
	for (uint64_t v = 1; v <= 10; v++)
		cr_assert(eq(int, fx_propose(&F, 0, v), 0));
	cns_flush(F.nodes[0].c, fx_local(&F, 0));
	fx_deliver_all(&F);
	fx_isolate(&F, 0, true); /* the leader goes away */
	fx_isolate(&F, 2, false);
	fx_isolate(&F, 0, true);
	F.now += 400000000; /* leases expire */
	fx_campaign(&F, 2);
	cr_assert(cns_role(F.nodes[2].c) != CNS_LEADER);
	fx_run_ms(&F, 2000);
	int l = fx_leader(&F);
	cr_assert(l == 0 || l == 1, "leader %d", l);
	cr_assert(l == 1 || cns_term(F.nodes[0].c) > 1);
	(void)l;
}

/* Goal: a follower answers a proposal with a redirect to the leader.
 * Method: elect n1; propose on n2: -EPERM and cns_leader names n1. */
Test(cns_election, follower_redirects_to_leader, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	cr_assert(eq(int, fx_propose(&F, 1, 7), -EPERM));
	cr_assert(eq(u32, cns_leader(F.nodes[1].c), 1));
	cr_assert(eq(u64, cns_counter(F.nodes[1].c, CNS_C_PROPOSALS_NOT_LEADER), 1));
}

/* Goal: configuration is validated (1, 3 or 5 distinct members including self).
 * Method: cns_init with 2 members and with self missing returns -EINVAL. */
Test(cns_election, bad_config_refused)
{
	struct cns_limits lim = {.snapshot_bytes_max = 1024};
	void *mem = aligned_alloc(64, cns_footprint(&lim));
	struct cns_memlog_limits ll = {.entries_max = 16, .bytes_max = 1 << 16};
	void *lmem = aligned_alloc(64, cns_memlog_footprint(&ll));
	struct cns_memlog *log;
	cr_assert(cns_memlog_init(&log, lmem, &ll) == 0);
	uint32_t members[] = {1, 2, 3};
	struct cns_config cfg;
	cns_config_default(&cfg, 1, 1, 2, members);
	struct cns_env env = {.log_ops = &cns_memlog_ops, .log = log, .svc_ops = NULL};
	struct cns_boot boot = {0};
	struct cns *c;
	cr_assert(eq(int, cns_init(&c, mem, &lim, &cfg, &env, &boot), -EINVAL));
	cns_config_default(&cfg, 1, 9, 3, members);
	cr_assert(eq(int, cns_init(&c, mem, &lim, &cfg, &env, &boot), -EINVAL));
	free(mem);
	free(lmem);
}

/* Goal: the core's assertions guard its boundary (a NULL message is a programmer error).
 * Method: cns_step with a NULL message aborts. */
Test(cns_election, null_message_aborts, .signal = SIGABRT)
{
	fx_init(&F, 1, CNS_DURABLE_MEMORY);
	cns_step(F.nodes[0].c, 0, NULL);
}

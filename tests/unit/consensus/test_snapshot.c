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

static void
propose_entries(uint32_t node, uint64_t first, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		cr_assert(eq(int, fx_propose(&F, node, first + k), 0));
		cns_flush(F.nodes[node].c, fx_local(&F, node));
	}
}

/* Goal: snapshot at the applied index compacts the log behind it, keeping the configured
 * tail for laggards.
 * Method: 50 entries applied, log_keep_entries 10, take: the snapshot index is the applied
 * index and the store starts 10 entries before it. */
Test(cns_snapshot, take_compacts_behind, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.log_keep_entries = 10;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	propose_entries(0, 1, 50);
	fx_run_ms(&F, 20);
	struct cns *c = F.nodes[0].c;
	uint64_t applied = cns_applied_index(c);
	cr_assert(applied >= 51);
	cr_assert(eq(int, cns_snapshot_take(c), 0));
	cr_assert(eq(u64, cns_snapshot(c, NULL)->index, applied));
	cr_assert(eq(u64, cns_memlog_ops.first_index(F.nodes[0].log), applied - 10 + 1));
	cr_assert(eq(int, cns_snapshot_take(c), -EALREADY));
}

/* Goal: a follower whose entries were compacted away on the leader receives the snapshot
 * in chunks (<= WIRE_TAIL_MAX), installs it through svc_ops.restore and resumes with
 * AppendEntries.
 * Method: isolate n3, commit 100 entries, snapshot n1 and n2 with no kept tail, heal, add
 * more entries: n3 installs (3 chunks of a 20 KB state), its state hash matches and it
 * applies the later entries. */
Test(cns_snapshot, lagging_follower_installs_in_chunks, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.log_keep_entries = 0;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_isolate(&F, 2, true);
	propose_entries(0, 1, 100);
	fx_run_ms(&F, 20);
	cr_assert(eq(int, cns_snapshot_take(F.nodes[0].c), 0));
	cr_assert(eq(int, cns_snapshot_take(F.nodes[1].c), 0));
	fx_heal(&F);
	fx_run_ms(&F, 200);
	propose_entries(0, 1000, 3);
	fx_run_ms(&F, 100);
	struct cns *c3 = F.nodes[2].c;
	cr_assert(eq(u64, cns_counter(c3, CNS_C_SNAPSHOTS_INSTALLED), 1));
	cr_assert(cns_counter(F.nodes[0].c, CNS_C_SNAPSHOT_CHUNKS_SENT) >= 3);
	cr_assert(eq(u64, cns_applied_index(c3), cns_applied_index(F.nodes[0].c)));
	cr_assert(eq(u64, F.nodes[2].svc.sum, F.nodes[0].svc.sum));
	cr_assert(eq(u64, F.nodes[2].svc.sum, 5050 + 3003));
}

/* Goal: a lost chunk is resent and the transfer completes.
 * Method: as above, but drop the second InstallSnapshot once. */
static uint32_t chunks_seen;

static bool
drop_second_chunk(struct fx *f, uint32_t from, uint32_t to, const struct wire_msg_hdr *msg)
{
	(void)f;
	(void)from;
	(void)to;
	return msg->type == WIRE_INSTALL_SNAPSHOT && ++chunks_seen == 2;
}

Test(cns_snapshot, lost_chunk_is_resent, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.log_keep_entries = 0;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_isolate(&F, 2, true);
	propose_entries(0, 1, 20);
	fx_run_ms(&F, 20);
	cr_assert(eq(int, cns_snapshot_take(F.nodes[0].c), 0));
	chunks_seen = 0;
	F.drop = drop_second_chunk;
	fx_heal(&F);
	fx_run_ms(&F, 300);
	cr_assert(eq(u64, cns_counter(F.nodes[2].c, CNS_C_SNAPSHOTS_INSTALLED), 1));
	cr_assert(eq(u64, F.nodes[2].svc.sum, 210));
	F.drop = NULL;
}

/* Goal: a restart restores the saved snapshot through svc_ops.restore and replays the log
 * after it.
 * Method: take a snapshot on n2 mid-way, keep its log store, re-init n2 with the snapshot
 * as boot: its service equals the leader's after catching up. */
Test(cns_snapshot, restart_restores_and_replays, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.log_keep_entries = 0;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	propose_entries(0, 1, 30);
	fx_run_ms(&F, 20);
	struct fx_node *n2 = &F.nodes[1];
	cr_assert(eq(int, cns_snapshot_take(n2->c), 0));
	static uint8_t saved[sizeof(struct fx_svc) + 64];
	const void *data;
	struct cns_snapshot_meta meta = *cns_snapshot(n2->c, &data);
	memcpy(saved, data, meta.len);
	propose_entries(0, 100, 5);
	fx_run_ms(&F, 20);
	/* Restart n2: memory (volatile state) is gone, the log store and snapshot survive. */
	memset(&n2->svc, 0, sizeof(n2->svc));
	struct cns_config cfg = F.cfg;
	cfg.self = 2;
	struct cns_env env = n2->c->env;
	struct cns_boot boot = {.term = cns_memlog_term(n2->log),
				.vote = cns_memlog_vote(n2->log),
				.snapshot = &meta,
				.snapshot_data = saved};
	cr_assert(eq(int, cns_init(&n2->c, n2->mem, &F.lim, &cfg, &env, &boot), 0));
	cr_assert(eq(u64, cns_applied_index(n2->c), meta.index));
	cr_assert(eq(u64, cns_applied_time(n2->c), meta.time_ns));
	fx_run_ms(&F, 100);
	cr_assert(eq(u64, n2->svc.sum, F.nodes[0].svc.sum));
	cr_assert(eq(u64, cns_applied_index(n2->c), cns_applied_index(F.nodes[0].c)));
}

/* Goal: a snapshot too large for the configured buffer is refused, nothing changes.
 * Method: snapshot_bytes_max below the service size: -ENOSPC. */
Test(cns_snapshot, too_large_refused, .fini = fini)
{
	fx_init(&F, 1, CNS_DURABLE_MEMORY);
	F.lim.snapshot_bytes_max = 1024;
	/* Memory for the larger limits was allocated already; smaller limits fit in it. */
	fx_reconfigure(&F);
	fx_run_ms(&F, 400);
	propose_entries(0, 1, 2);
	fx_apply_all(&F);
	cr_assert(eq(int, cns_snapshot_take(F.nodes[0].c), -ENOSPC));
	cr_assert(eq(u64, cns_snapshot(F.nodes[0].c, NULL)->index, 0));
}

/* Goal: a snapshot the service refuses (svc_ops.restore fails) is not a crash: the member
 * goes back to its own base, replays its log and asks for the snapshot again.
 * Method: hand a follower a one-chunk InstallSnapshot of 16 garbage bytes beyond its
 * commit; it is refused (MALFORMED), the follower's service state and applied index are
 * what they were, and it keeps replicating. */
Test(cns_snapshot, refused_snapshot_reloads_own_state, .fini = fini)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	fx_campaign(&F, 0);
	propose_entries(0, 1, 5);
	fx_run_ms(&F, 10);
	struct cns *c2 = F.nodes[1].c;
	uint64_t applied = cns_applied_index(c2);
	uint64_t sum = F.nodes[1].svc.sum;
	struct {
		struct wire_install_snapshot is;
		uint8_t data[16];
	} m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.is.hdr, WIRE_INSTALL_SNAPSHOT, F.cfg.shard);
	m.is.hdr.length = sizeof(m);
	m.is.term = cns_term(c2);
	m.is.last_index = cns_commit_index(c2) + 100;
	m.is.last_term = cns_term(c2);
	m.is.total_len = 16;
	m.is.leader = 1;
	m.is.done = 1;
	m.is.tail_len = 16;
	memset(m.data, 0xab, sizeof(m.data));
	cr_assert(eq(int, cns_step(c2, fx_local(&F, 1), &m.is.hdr), 0));
	cr_assert(eq(u64, cns_counter(c2, CNS_C_MALFORMED), 1));
	cr_assert(eq(u64, cns_counter(c2, CNS_C_SNAPSHOTS_INSTALLED), 0));
	cr_assert(cns_applied_index(c2) <= applied);
	F.q_len = 0;
	fx_run_ms(&F, 20);
	cr_assert(eq(u64, cns_applied_index(c2), cns_applied_index(F.nodes[0].c)));
	cr_assert(eq(u64, F.nodes[1].svc.sum, sum));
	propose_entries(0, 100, 1);
	fx_run_ms(&F, 10);
	cr_assert(eq(u64, F.nodes[1].svc.sum, sum + 100));
}

/* A follower (n3) left behind the leader's compaction point: n1 leads, n3 is isolated
 * while 100 entries commit, n1 and n2 snapshot with no kept tail. */
static void
leave_n3_behind(uint32_t chunk, uint32_t inflight)
{
	fx_init(&F, 3, CNS_DURABLE_MEMORY);
	F.cfg.log_keep_entries = 0;
	F.cfg.snapshot_chunk_bytes = chunk;
	F.cfg.snapshot_inflight_max = inflight;
	fx_reconfigure(&F);
	fx_campaign(&F, 0);
	fx_isolate(&F, 2, true);
	propose_entries(0, 1, 100);
	fx_run_ms(&F, 20);
	cr_assert(eq(int, cns_snapshot_take(F.nodes[0].c), 0));
	cr_assert(eq(int, cns_snapshot_take(F.nodes[1].c), 0));
}

/* n3 installed the leader's snapshot byte for byte and caught up. */
static void
check_n3_installed(void)
{
	const void *d1, *d3;
	const struct cns_snapshot_meta *s1 = cns_snapshot(F.nodes[0].c, &d1);
	const struct cns_snapshot_meta *s3 = cns_snapshot(F.nodes[2].c, &d3);
	cr_assert(eq(u64, cns_counter(F.nodes[2].c, CNS_C_SNAPSHOTS_INSTALLED), 1));
	cr_assert(eq(u64, s3->index, s1->index));
	cr_assert(eq(u64, s3->term, s1->term));
	cr_assert(eq(u64, s3->len, s1->len));
	cr_assert(memcmp(d3, d1, s1->len) == 0, "installed snapshot differs from the leader's");
	cr_assert(eq(u64, cns_applied_index(F.nodes[2].c), cns_applied_index(F.nodes[0].c)));
	cr_assert(eq(u64, F.nodes[2].svc.sum, F.nodes[0].svc.sum));
}

/* Goal: a snapshot cut in many small chunks (as for a 1500-byte MTU) is transferred with a
 * window of chunks in flight and restored byte-exact; with nothing lost, each chunk is
 * sent exactly once.
 * Method: 64-byte chunks, 4 in flight, a ~20 KB service state: ~315 chunks; n3 installs,
 * its snapshot bytes equal the leader's, the leader sent ceil(len / 64) chunks. */
Test(cns_snapshot, many_small_chunks_byte_exact, .fini = fini)
{
	leave_n3_behind(64, 4);
	uint64_t len = cns_snapshot(F.nodes[0].c, NULL)->len;
	fx_heal(&F);
	fx_run_ms(&F, 100);
	check_n3_installed();
	cr_assert(eq(u64, cns_counter(F.nodes[0].c, CNS_C_SNAPSHOT_CHUNKS_SENT), (len + 63) / 64));
	propose_entries(0, 1000, 3);
	fx_run_ms(&F, 20);
	cr_assert(eq(u64, F.nodes[2].svc.sum, 5050 + 3003));
}

/* Goal: lost, overtaken and duplicated chunks (and the replies they cause) are handled:
 * the transfer completes byte-exact and the extra chunks stay within a window per fault.
 * Method: 64-byte chunks, 4 in flight. Of the chunks to n3: the 3rd is lost, the 6th is
 * held back and delivered after the 9th (reordered), the 12th is delivered twice (again
 * after the 15th). */
static uint32_t n3_chunks;
static struct fx_msg held, dup;

static bool
chunk_faults(struct fx *f, uint32_t from, uint32_t to, const struct wire_msg_hdr *msg)
{
	if (msg->type != WIRE_INSTALL_SNAPSHOT || to != 3)
		return false;
	n3_chunks++;
	if (n3_chunks == 3)
		return true;
	if (n3_chunks == 6) {
		memcpy(held.buf, msg, msg->length);
		return true;
	}
	if (n3_chunks == 9)
		fx_inject(f, from, to, (const void *)held.buf);
	if (n3_chunks == 12)
		memcpy(dup.buf, msg, msg->length);
	if (n3_chunks == 15)
		fx_inject(f, from, to, (const void *)dup.buf);
	return false;
}

Test(cns_snapshot, lost_reordered_duplicated_chunks, .fini = fini)
{
	leave_n3_behind(64, 4);
	uint64_t len = cns_snapshot(F.nodes[0].c, NULL)->len;
	n3_chunks = 0;
	F.drop = chunk_faults;
	fx_heal(&F);
	fx_run_ms(&F, 300);
	F.drop = NULL;
	cr_assert(n3_chunks > 15);
	check_n3_installed();
	uint64_t sent = cns_counter(F.nodes[0].c, CNS_C_SNAPSHOT_CHUNKS_SENT);
	cr_assert(sent <= (len + 63) / 64 + 3 * (4 + 1), "chunks sent %lu for %lu",
		  (unsigned long)sent, (unsigned long)((len + 63) / 64));
}

/* Goal: when every reply is lost the retransmit timer (one heartbeat without sending)
 * drives the transfer; one chunk in flight works too.
 * Method: 1024-byte chunks, 1 in flight, every second SNAPSHOT_REPLY dropped. */
static uint32_t replies_seen;

static bool
drop_every_second_reply(struct fx *f, uint32_t from, uint32_t to, const struct wire_msg_hdr *msg)
{
	(void)f;
	(void)to;
	return msg->type == WIRE_SNAPSHOT_REPLY && from == 3 && ++replies_seen % 2 == 0;
}

Test(cns_snapshot, lost_replies_retransmit_timer, .fini = fini)
{
	leave_n3_behind(1024, 1);
	replies_seen = 0;
	F.drop = drop_every_second_reply;
	fx_heal(&F);
	fx_run_ms(&F, 2000);
	F.drop = NULL;
	check_n3_installed();
}

/* Goal: chunk size and window are validated. Method: cns_init refuses 0, 12 (not a
 * multiple of 8), CNS_SNAPSHOT_CHUNK_MAX + 8, a window of 0 and of 65. */
Test(cns_snapshot, chunk_config_validated, .fini = fini)
{
	fx_init(&F, 1, CNS_DURABLE_MEMORY);
	const uint32_t chunks[] = {0, 12, CNS_SNAPSHOT_CHUNK_MAX + 8};
	const uint32_t windows[] = {0, CNS_SNAPSHOT_INFLIGHT_MAX + 1};
	struct fx_node *nd = &F.nodes[0];
	struct cns_env env = nd->c->env;
	struct cns_boot boot = {0};
	struct cns *c;
	for (uint32_t i = 0; i < 3; i++) {
		struct cns_config cfg = F.cfg;
		cfg.snapshot_chunk_bytes = chunks[i];
		cr_assert(eq(int, cns_init(&c, nd->mem, &F.lim, &cfg, &env, &boot), -EINVAL));
	}
	for (uint32_t i = 0; i < 2; i++) {
		struct cns_config cfg = F.cfg;
		cfg.snapshot_inflight_max = windows[i];
		cr_assert(eq(int, cns_init(&c, nd->mem, &F.lim, &cfg, &env, &boot), -EINVAL));
	}
	struct cns_config cfg = F.cfg;
	cfg.snapshot_chunk_bytes = 8;
	cfg.snapshot_inflight_max = CNS_SNAPSHOT_INFLIGHT_MAX;
	cr_assert(eq(int, cns_init(&nd->c, nd->mem, &F.lim, &cfg, &env, &boot), 0));
}

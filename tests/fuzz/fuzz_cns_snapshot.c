/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for consensus's two ways in for a snapshot (consensus/cns_snapshot.c):
 * the boot snapshot a restarting member restores in cns_init (from its snapshot file), and
 * the chunks of an InstallSnapshot from a leader, reassembled and installed by cns_step. The
 * hosted service is a matching engine, so the service's own loader sits behind both.
 *
 * Input: byte 0 the mode (bit 0: make the ME checksum right; bits 1-7: chunk size in 8-byte
 * units - 1), bytes 1-24 the snapshot's index, term and cluster time, the rest its data.
 * Properties: neither path crashes, whatever the meta (index 0, a huge index or term, a
 * length over the limit) or the data; a boot that succeeds leaves applied = commit = last =
 * the snapshot's index, the last term its term, and the snapshot held byte for byte; the
 * same snapshot sent in chunks to a fresh follower is installed exactly when the boot
 * accepted it, and both leave the service in the same state (same hash). A booted member
 * then becomes leader of its one-member group, commits and applies a new entry, and takes a
 * snapshot of its own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "consensus/cns.h"
#include "fuzz_state.h"
#include "fuzz_util.h"

#define SNAP_MAX (1u << 20)
#define MS UINT64_C(1000000)

static struct cns_limits lim = {.snapshot_bytes_max = SNAP_MAX};
static void *cns_mem[2], *log_mem[2];
static const struct cns_memlog_limits log_lim = {.entries_max = 256, .bytes_max = 1u << 20};
static uint8_t *data_copy;
static _Alignas(8) uint8_t msg_buf[sizeof(struct wire_install_snapshot) + WIRE_TAIL_MAX];

static void
send_drop(void *ctx, uint32_t to, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)to;
	(void)msg;
}

/* A member over a fresh memory log and a fresh engine (slot 0 or 1). */
static int
member(int slot, uint32_t count, const struct cns_boot *boot, struct cns **out)
{
	static const uint32_t ids[3] = {1, 2, 3};
	struct cns_memlog *log;
	if (cns_mem[slot] == NULL) {
		cns_mem[slot] = aligned_alloc(64, cns_footprint(&lim));
		log_mem[slot] = aligned_alloc(64, cns_memlog_footprint(&log_lim));
		CHECK(cns_mem[slot] != NULL && log_mem[slot] != NULL);
	}
	CHECK(cns_memlog_init(&log, log_mem[slot], &log_lim) == 0);
	struct cns_config cfg;
	cns_config_default(&cfg, 0, 1, count, ids);
	struct cns_env env = {
		.log_ops = &cns_memlog_ops,
		.log = log,
		.svc_ops = &me_svc_ops,
		.svc = fz_me_new(slot),
		.sink = &fz_null_sink,
		.host = {.ctx = NULL, .send = send_drop, .snapshot_saved = NULL},
	};
	return cns_init(out, cns_mem[slot], &lim, &cfg, &env, boot);
}

/* Send the snapshot to a fresh follower in chunks from leader 2; true when installed. */
static bool
install(const struct cns_snapshot_meta *meta, const uint8_t *data, uint32_t chunk,
	uint64_t *hash)
{
	struct cns *c;
	struct cns_boot boot = {0};
	CHECK(member(1, 3, &boot, &c) == 0);
	uint64_t now = MS, off = 0;
	struct wire_install_snapshot *m = (void *)msg_buf;
	do {
		uint32_t n = meta->len - off < chunk ? (uint32_t)(meta->len - off) : chunk;
		memset(m, 0, sizeof(*m));
		wire_hdr_init(&m->hdr, WIRE_INSTALL_SNAPSHOT, 0);
		m->term = meta->term > 0 ? meta->term : 1;
		m->last_index = meta->index;
		m->last_term = meta->term;
		m->last_time_ns = meta->time_ns;
		m->offset = off;
		m->total_len = meta->len;
		m->leader = 2;
		m->tail_len = (uint16_t)n;
		m->done = off + n == meta->len;
		memcpy(m + 1, data + off, n);
		m->hdr.length = (uint16_t)((sizeof(*m) + n + 7) & ~(size_t)7);
		uint16_t mlen;
		if (wire_msg_check(m, m->hdr.length, &mlen) != WIRE_E_OK)
			return false; /* the host's decoder would have dropped it */
		CHECK(cns_step(c, now, &m->hdr) == 0);
		off += n;
		now += MS;
	} while (off < meta->len);
	bool done = cns_counter(c, CNS_C_SNAPSHOTS_INSTALLED) == 1;
	if (done) {
		CHECK(cns_applied_index(c) == meta->index && cns_commit_index(c) >= meta->index);
		*hash = me_svc_ops.state_hash(fz_me_last(1));
	}
	return done;
}

static void
lead(struct cns *c)
{
	/* One member: it elects itself once its timer runs out, then appends and commits. */
	uint64_t now = 0;
	for (int i = 0; i < 20 && cns_role(c) != CNS_LEADER; i++) {
		now += 100 * MS;
		cns_tick(c, now);
	}
	CHECK(cns_role(c) == CNS_LEADER);
	uint64_t last = cns_last_index(c);
	struct wire_stream_ack a;
	memset(&a, 0, sizeof(a));
	wire_hdr_init(&a.hdr, WIRE_STREAM_ACK, 0);
	a.seq = 1;
	int rc = cns_propose(c, now, &a.hdr);
	CHECK(rc == 0 || rc == -EAGAIN);
	cns_flush(c, now);
	cns_tick(c, now + MS);
	while (cns_apply(c, 64) > 0)
		;
	CHECK(cns_last_index(c) > last);
	CHECK(cns_applied_index(c) == cns_commit_index(c));
	rc = cns_snapshot_take(c);
	CHECK(rc == 0 || rc == -EALREADY);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 25 || size - 25 > SNAP_MAX)
		return 0;
	if (data_copy == NULL)
		data_copy = malloc(SNAP_MAX);
	struct cns_snapshot_meta meta;
	memcpy(&meta.index, data + 1, 8);
	memcpy(&meta.term, data + 9, 8);
	memcpy(&meta.time_ns, data + 17, 8);
	meta.len = size - 25;
	memcpy(data_copy, data + 25, meta.len);
	if (data[0] & 1)
		fz_me_snapshot_fix(data_copy, meta.len);
	uint32_t chunk = 8u * (1u + (data[0] >> 1));

	struct cns *c;
	struct cns_boot boot = {.term = meta.term, .vote = 0, .snapshot = &meta,
				.snapshot_data = data_copy};
	int rc = member(0, 1, &boot, &c);
	CHECK(rc == 0 || rc == -EINVAL);
	uint64_t booted = 0, installed = 0;
	if (rc == 0) {
		CHECK(cns_applied_index(c) == meta.index && cns_commit_index(c) == meta.index);
		CHECK(cns_last_index(c) == meta.index && cns_last_term(c) == meta.term);
		const void *held;
		const struct cns_snapshot_meta *s = cns_snapshot(c, &held);
		CHECK(s->index == meta.index && s->len == meta.len);
		CHECK(memcmp(held, data_copy, meta.len) == 0);
		booted = me_svc_ops.state_hash(fz_me_last(0));
	}
	bool ok = install(&meta, data_copy, chunk, &installed);
	CHECK(ok == (rc == 0));
	if (ok)
		CHECK(installed == booted);
	if (rc == 0)
		lead(c);
	return 0;
}

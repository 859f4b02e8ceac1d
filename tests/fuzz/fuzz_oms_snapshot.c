/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the OMS shard's snapshot loader (oms_restore, oms/oms_snapshot.c).
 * The OMS snapshot carries no checksum of its own (the file's CRC and the peers' keys guard
 * it), so every byte the fuzzer changes reaches the validator: magic, version, sizes, limits,
 * slab indices and free stacks, list links, table keys, counts.
 *
 * Properties: restore answers 0 or -EINVAL and never reads past its input (ASan); a refused
 * snapshot leaves an empty shard (same hash as a fresh one) whose invariants hold; an
 * accepted one passes oms_check_invariants, snapshots again to exactly the same bytes,
 * restores into a second shard with the same state hash, and then takes traffic (time moving
 * past every TTL and sweep, a new order and a cancel for each resident user) without
 * tripping a CHECK or DCHECK, its invariants still holding.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "fuzz_state.h"
#include "fuzz_util.h"

#define SNAP_MAX (4u << 20)

static uint8_t *out;

static void
traffic(struct oms *oms)
{
	uint64_t now = UINT64_C(1) << 40;
	uint64_t users[64];
	uint32_t cursor = 0, n = oms_users_list(oms, &cursor, users, 64);
	for (uint32_t i = 0; i < n; i++) {
		struct wire_new_order o;
		memset(&o, 0, sizeof(o));
		wire_hdr_init(&o.hdr, WIRE_NEW_ORDER, 0);
		o.user = users[i];
		o.cl_ord_id = UINT64_C(1) << 40;
		o.symbol = FZ_SYM_A;
		o.side = WIRE_SIDE_BUY;
		o.ord_type = WIRE_ORD_LIMIT;
		o.tif = WIRE_TIF_GTC;
		o.px = 1000;
		o.qty = 1;
		oms_apply(oms, now, &o.hdr, &fz_null_sink);
		struct wire_cancel c;
		memset(&c, 0, sizeof(c));
		wire_hdr_init(&c.hdr, WIRE_CANCEL, 0);
		c.user = users[i];
		c.cl_ord_id = o.cl_ord_id + 1;
		c.orig_cl_ord_id = o.cl_ord_id;
		oms_apply(oms, now, &c.hdr, &fz_null_sink);
	}
	for (int k = 0; k < 4; k++) {
		now += UINT64_C(1) << 36;
		oms_tick(oms, now, &fz_null_sink);
	}
	CHECK(oms_check_invariants(oms) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > SNAP_MAX)
		return 0;
	if (out == NULL) {
		out = malloc(SNAP_MAX);
		CHECK(out != NULL);
	}
	struct oms *a = fz_oms_new(0);
	const uint64_t empty = oms_state_hash(a);
	uint8_t *exact = malloc(size ? size : 1); /* ASan sees any read past size */
	CHECK(exact != NULL);
	memcpy(exact, data, size);
	int rc = oms_restore(a, exact, size);
	free(exact);
	if (rc != 0) {
		CHECK(rc == -EINVAL);
		CHECK(oms_state_hash(a) == empty);
		CHECK(oms_check_invariants(a) == 0);
		return 0;
	}
	CHECK(oms_check_invariants(a) == 0);
	size_t n = oms_snapshot_size(a);
	CHECK(n == size);
	CHECK(oms_snapshot(a, out, SNAP_MAX) == n);
	CHECK(memcmp(out, data, n) == 0);
	struct oms *b = fz_oms_new(1);
	CHECK(oms_restore(b, out, n) == 0);
	CHECK(oms_state_hash(b) == oms_state_hash(a));
	traffic(a);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the matching engine's snapshot loader (me_restore, me/me_snapshot.c),
 * the bytes a node restores from its snapshot file or from a leader's InstallSnapshot.
 *
 * The first byte is a mode, the rest the snapshot. Mode bit 0 clear: the bytes as they are —
 * a flipped bit anywhere, a cut, a wrong magic, version or limits, a wrong body length are
 * all refused (the XXH3 checksum covers the body). Bit 0 set: the checksum is made right
 * first, so the checks behind it (the state header's layout and counts, which restore uses
 * as lengths) are reached with forged values.
 *
 * Properties: restore answers 0 or -EINVAL and never reads past its input (ASan); a refused
 * snapshot leaves an empty engine (same hash as a fresh one); an accepted one snapshots
 * again to exactly the same bytes (the header's reserved fields aside) and restores into a
 * second engine with the same state hash. An untouched (checksum-valid) snapshot then
 * takes traffic: time moving past every GTD, stream acks and replays, a market sell and buy
 * on each symbol, without tripping any DCHECK. (What a forged-but-checksummed state does under traffic is not claimed: the
 * checksum is the guard there; docs/testing.md.)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "fuzz_state.h"
#include "fuzz_util.h"

#define SNAP_MAX (4u << 20)

static uint8_t *in, *out;

static void
traffic(struct me *me)
{
	const uint64_t now = UINT64_C(1) << 62;
	me_tick(me, now, &fz_null_sink);
	struct me_stream_info si;
	for (uint32_t i = 0; me_stream_info_at(me, i, &si) == 0; i++) {
		struct wire_replay_request r;
		memset(&r, 0, sizeof(r));
		wire_hdr_init(&r.hdr, WIRE_REPLAY_REQUEST, 0);
		r.stream = si.shard;
		r.from_seq = si.oldest;
		me_apply(me, now, &r.hdr, &fz_null_sink);
		struct wire_stream_ack a;
		memset(&a, 0, sizeof(a));
		wire_hdr_init(&a.hdr, WIRE_STREAM_ACK, 0);
		a.stream = si.shard;
		a.seq = si.next_seq - 1;
		me_apply(me, now, &a.hdr, &fz_null_sink);
	}
	struct me_symbol_info y;
	for (uint32_t i = 0; me_symbol_at(me, i, &y) == 0; i++) {
		for (int side = WIRE_SIDE_BUY; side <= WIRE_SIDE_SELL; side++) {
			struct wire_submit s;
			memset(&s, 0, sizeof(s));
			wire_hdr_init(&s.hdr, WIRE_SUBMIT, 0);
			s.oid = wire_oid_make(0, 999, 1000 + i * 2 + (uint32_t)side);
			s.symbol = y.symbol;
			s.side = (uint8_t)side;
			s.ord_type = WIRE_ORD_MARKET;
			s.tif = WIRE_TIF_IOC;
			if (side == WIRE_SIDE_BUY)
				s.quote_qty = INT64_C(1) << 40;
			else
				s.qty = y.lot > 0 ? y.lot * 1000 : 1;
			me_apply(me, now, &s.hdr, &fz_null_sink);
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size - 1 > SNAP_MAX)
		return 0;
	if (in == NULL) {
		in = malloc(SNAP_MAX);
		out = malloc(SNAP_MAX);
		CHECK(in != NULL && out != NULL);
	}
	bool fix = data[0] & 1;
	size_t len = size - 1;
	memcpy(in, data + 1, len);
	if (fix)
		fz_me_snapshot_fix(in, len);

	struct me *a = fz_me_new(0);
	const uint64_t empty = me_state_hash(a);
	/* An exact-size heap copy: ASan sees any read past len. */
	uint8_t *exact = malloc(len ? len : 1);
	CHECK(exact != NULL);
	memcpy(exact, in, len);
	int rc = me_restore(a, exact, len);
	free(exact);
	if (rc != 0) {
		CHECK(rc == -EINVAL);
		CHECK(me_state_hash(a) == empty);
		return 0;
	}
	size_t n = me_snapshot_size(a);
	CHECK(n == len);
	CHECK(me_snapshot(a, out, SNAP_MAX) == n);
	/* Byte for byte, but for the header's two reserved fields (restore ignores them). */
	memset(in + 12, 0, 4);
	memset(in + 80, 0, 8);
	CHECK(memcmp(out, in, n) == 0);
	struct me *b = fz_me_new(1);
	CHECK(me_restore(b, out, n) == 0);
	CHECK(me_state_hash(b) == me_state_hash(a));
	if (!fix)
		traffic(a);
	return 0;
}

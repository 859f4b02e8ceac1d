/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine and wire minors (docs/wire.md, "Versions"): a replica of an older minor applies
 * log entries a newer one wrote, whose messages may carry fields appended after their struct.
 * The engine reads only its struct, so its state and egress must be the same byte for byte
 * whether those bytes are there or not (exactly-once and replay rest on it).
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "me_fixture.h"

#define B WIRE_SIDE_BUY
#define S WIRE_SIDE_SELL
#define APPENDED 24 /* bytes a newer minor appended to each request */

TestSuite(me_wire_minor, .init = fx_setup, .fini = fx_fini);

/* Apply msg as it came, or with APPENDED non-zero bytes after its struct (hdr.length grown),
 * as a log entry of a newer minor holds it. */
static void
apply_maybe_longer(const void *msg, bool longer)
{
	const struct wire_msg_hdr *h = msg;
	if (!longer) {
		fx_apply(msg);
		return;
	}
	_Alignas(8) uint8_t buf[512];
	cr_assert(h->length + APPENDED <= (int)sizeof(buf));
	memcpy(buf, msg, h->length);
	memset(buf + h->length, 0xa7, APPENDED);
	((struct wire_msg_hdr *)(void *)buf)->length = (uint16_t)(h->length + APPENDED);
	uint16_t n = 0;
	cr_assert(eq(int, wire_msg_check(buf, sizeof(buf), &n), WIRE_E_OK));
	cr_assert(eq(int, n, h->length + APPENDED));
	fx_apply(buf);
}

static struct wire_modify
modify(uint16_t type, uint64_t user, uint64_t req, uint64_t target, int64_t qty)
{
	struct wire_modify m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, (enum wire_type)type, 0);
	m.req = fx_oid(user, req);
	m.target = fx_oid(user, target);
	m.symbol = FX_SYM;
	m.qty = qty;
	return m;
}

/* Rest, cross, amend, cancel, ack and replay: every request type a session sends. Returns the
 * captured egress (caller frees) and its count; *snap, *snap_len: the snapshot after it. */
static struct fx_cap *
run(bool longer, uint32_t *count, uint8_t **snap, size_t *snap_len)
{
	struct wire_submit s1 = fx_order(1, 1, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 100, 5);
	struct wire_submit s2 = fx_order(2, 1, S, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 110, 4);
	struct wire_submit s3 = fx_order(3, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_IOC, 110, 7);
	struct wire_submit s4 = fx_order(4, 1, B, WIRE_ORD_LIMIT, WIRE_TIF_GTC, 90, 9);
	struct wire_modify a = modify(WIRE_AMEND_TO_ME, 4, 2, 1, 6);
	struct wire_modify c = modify(WIRE_CANCEL_TO_ME, 2, 2, 1, 0);
	struct wire_stream_ack ack;
	memset(&ack, 0, sizeof(ack));
	wire_hdr_init(&ack.hdr, WIRE_STREAM_ACK, 0);
	ack.stream = 0;
	ack.seq = 3;
	struct wire_replay_request rr;
	memset(&rr, 0, sizeof(rr));
	wire_hdr_init(&rr.hdr, WIRE_REPLAY_REQUEST, 0);
	rr.stream = 0;
	rr.from_seq = 4;
	const void *seq[] = {&s1, &s2, &s3, &s4, &a, &c, &ack, &rr, &s1 /* a re-send */};
	fx_reset();
	for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		apply_maybe_longer(seq[i], longer);
		fx_now += 1000;
	}
	*count = fx_cap_count;
	struct fx_cap *out = calloc(fx_cap_count + 1, sizeof(*out));
	memcpy(out, fx_caps, fx_cap_count * sizeof(*out));
	*snap_len = me_snapshot_size(fx_me);
	*snap = malloc(*snap_len);
	cr_assert(eq(sz, me_snapshot(fx_me, *snap, *snap_len), *snap_len));
	return out;
}

/* Goal: the same log with and without a newer minor's appended fields gives the same state
 * and the same egress. Method: one engine per variant, every request type, snapshots and
 * captured messages compared byte for byte. */
Test(me_wire_minor, appended_fields_change_nothing)
{
	uint32_t n_plain, n_longer;
	uint8_t *snap_plain, *snap_longer;
	size_t len_plain, len_longer;
	struct fx_cap *plain = run(false, &n_plain, &snap_plain, &len_plain);
	uint64_t hash_plain = me_state_hash(fx_me);
	cr_assert(gt(u32, fx_count(3, 1, WIRE_EV_FILL), 0)); /* it traded */
	fx_teardown();
	fx_setup();
	struct fx_cap *longer = run(true, &n_longer, &snap_longer, &len_longer);
	cr_assert(eq(u64, me_state_hash(fx_me), hash_plain));
	cr_assert(eq(u32, n_longer, n_plain));
	for (uint32_t i = 0; i < n_plain; i++) {
		cr_assert(eq(int, longer[i].dest, plain[i].dest));
		cr_assert(eq(u16, longer[i].u.hdr.length, plain[i].u.hdr.length));
		cr_assert(eq(int, memcmp(&longer[i].u, &plain[i].u, plain[i].u.hdr.length), 0),
			  "egress %u differs", i);
	}
	cr_assert(eq(sz, len_longer, len_plain));
	cr_assert(eq(int, memcmp(snap_longer, snap_plain, len_plain), 0));
	free(plain);
	free(longer);
	free(snap_plain);
	free(snap_longer);
}

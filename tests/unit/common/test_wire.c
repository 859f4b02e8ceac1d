/* SPDX-License-Identifier: Apache-2.0 */
/* Codec: round trips, the MAC, and every class of malformed input. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <string.h>

#include "common/wire.h"
#include "wire_test_msgs.h"

static _Alignas(8) uint8_t frame[WIRE_FRAME_MAX];
static const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];

/* The two messages of build_two, added to a builder over frame. */
static void
add_two(struct wire_builder *b)
{
	wire_builder_init(b, frame, sizeof(frame), 42);
	struct wire_new_order o = new_order(9, 1);
	struct wire_cancel c = {0};
	wire_hdr_init(&c.hdr, WIRE_CANCEL, 3);
	c.user = 9;
	c.cl_ord_id = 2;
	c.orig_cl_ord_id = 1;
	cr_assert(eq(int, wire_builder_add(b, &o), 0));
	cr_assert(eq(int, wire_builder_add(b, &c), 0));
}

/* A valid two-message frame; returns its length. */
static uint32_t
build_two(const struct wire_key *key)
{
	struct wire_builder b;
	add_two(&b);
	return wire_builder_finish(&b, key);
}

static enum wire_err
decode(uint32_t len, const struct wire_key *key, uint32_t *count)
{
	uint32_t sender = 0;
	return wire_frame_decode(frame, len, key, msgs, WIRE_FRAME_MSGS_MAX, count, &sender);
}

/* Goal: the tables generated from the X-macro agree. Method: every type has a name and a
 * size that is a multiple of 8 and at least a header. */
Test(wire, tables_consistent)
{
	unsigned types = 0;
	for (uint16_t t = 0; t < WIRE_TYPE_LIMIT; t++) {
		uint16_t size = wire_type_size(t);
		if (size == 0) {
			cr_assert(eq(str, (char *)wire_type_name(t), "?"));
			continue;
		}
		types++;
		cr_assert(size >= sizeof(struct wire_msg_hdr));
		cr_assert(eq(u16, size % 8, 0));
		cr_assert(ne(str, (char *)wire_type_name(t), "?"));
	}
	cr_assert(eq(u32, types, 58)); /* + TRANSFER_LOOKUP/FOUND, FORWARDED_ADMIN/REPLY,
					* REPORT_REPLAY, REBIND_TO_ME, MEMBER_CHANGE,
					* LEADER_TRANSFER, SYMBOL_MOVE, BOOK_CHUNK */
	cr_assert(eq(str, (char *)wire_reason_name(WIRE_REASON_NOT_OWNER), "NOT_OWNER"));
	cr_assert(eq(str, (char *)wire_reason_name(WIRE_REASON_MAX), "?"));
	cr_assert(eq(str, (char *)wire_err_text(WIRE_E_BAD_MAC), "MAC missing or wrong"));
}

/* Goal: a frame round-trips. Method: build two messages, decode, compare bytes and sender. */
Test(wire, round_trip)
{
	uint32_t len = build_two(NULL);
	uint32_t count = 0, sender = 0;
	cr_assert(eq(u32, len, 16 + 72 + 40));
	cr_assert(eq(int, wire_frame_decode(frame, len, NULL, msgs, 8, &count, &sender),
		     WIRE_E_OK));
	cr_assert(eq(u32, count, 2));
	cr_assert(eq(u32, sender, 42));
	const struct wire_new_order *o = (const void *)msgs[0];
	struct wire_new_order want = new_order(9, 1);
	cr_assert(eq(int, memcmp(o, &want, sizeof(want)), 0));
	cr_assert(eq(u16, msgs[1]->type, WIRE_CANCEL));
}

/* Goal: messages with tails (AppendEntries) round-trip and stay 8-byte aligned.
 * Method: an AppendEntries with two entries of 72 and 0 bytes, then a NewOrder after it. */
Test(wire, tail_round_trip)
{
	_Alignas(8) uint8_t tail[2 * sizeof(struct wire_entry_hdr) + 72];
	struct wire_entry_hdr e1 = {.term = 2, .time_ns = 100, .data_len = 72, .kind = 1};
	struct wire_entry_hdr e2 = {.term = 2, .time_ns = 101, .data_len = 0, .kind = 2};
	struct wire_new_order o = new_order(1, 1);
	memcpy(tail, &e1, sizeof(e1));
	memcpy(tail + sizeof(e1), &o, sizeof(o));
	memcpy(tail + sizeof(e1) + 72, &e2, sizeof(e2));

	struct wire_append_entries ae = {0};
	wire_hdr_init(&ae.hdr, WIRE_APPEND_ENTRIES, 1);
	ae.term = 2;
	ae.entry_count = 2;
	ae.tail_len = sizeof(tail);

	struct wire_builder b;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	cr_assert(eq(int, wire_builder_add_tail(&b, &ae, tail, sizeof(tail)), 0));
	cr_assert(eq(int, wire_builder_add(&b, &o), 0));
	uint32_t len = wire_builder_finish(&b, NULL);
	uint32_t count;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_OK));
	cr_assert(eq(u32, count, 2));
	cr_assert(eq(u16, msgs[0]->length, sizeof(struct wire_append_entries) + 120));
	cr_assert(eq(u64, (uintptr_t)msgs[1] % 8, 0));
	const struct wire_append_entries *got = (const void *)msgs[0];
	cr_assert(eq(int, memcmp(got + 1, tail, sizeof(tail)), 0));

	/* The entry data walks as messages. */
	uint32_t pos = 0;
	enum wire_err err;
	const uint8_t *data = (const uint8_t *)(got + 1) + sizeof(e1);
	const struct wire_msg_hdr *m = wire_msgs_next(data, 72, &pos, &err);
	cr_assert(not(eq(ptr, (void *)m, NULL)));
	cr_assert(eq(u16, m->type, WIRE_NEW_ORDER));
	cr_assert(eq(ptr, (void *)wire_msgs_next(data, 72, &pos, &err), NULL));
	cr_assert(eq(int, err, WIRE_E_OK));
}

/* Goal: AppendEntries whose entries do not add up to tail_len are refused. */
Test(wire, entries_must_add_up)
{
	_Alignas(8) uint8_t tail[sizeof(struct wire_entry_hdr) + 8] = {0};
	struct wire_entry_hdr e = {.term = 1, .data_len = 16}; /* claims more than there is */
	memcpy(tail, &e, sizeof(e));
	struct wire_append_entries ae = {0};
	wire_hdr_init(&ae.hdr, WIRE_APPEND_ENTRIES, 1);
	ae.entry_count = 1;
	ae.tail_len = sizeof(tail);
	struct wire_builder b;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	cr_assert(eq(int, wire_builder_add_tail(&b, &ae, tail, sizeof(tail)), 0));
	uint32_t len = wire_builder_finish(&b, NULL);
	uint32_t count;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_LENGTH));

	e.data_len = 4; /* not a multiple of 8 */
	memcpy(frame + 16 + sizeof(struct wire_append_entries), &e, sizeof(e));
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_LENGTH));
}

/* Goal: every truncation of a valid frame is refused, never read past. Method: decode each
 * prefix (ASan would flag an over-read of the exact-size copy). */
Test(wire, every_truncation_refused)
{
	uint32_t len = build_two(NULL);
	for (uint32_t cut = 0; cut < len; cut++) {
		_Alignas(8) uint8_t copy[256];
		memcpy(copy, frame, cut);
		uint32_t count = 99;
		enum wire_err err =
			wire_frame_decode(copy, cut, NULL, msgs, WIRE_FRAME_MSGS_MAX, &count, NULL);
		cr_assert(ne(int, err, WIRE_E_OK), "prefix %u accepted", cut);
		cr_assert(eq(u32, count, 0));
	}
}

Test(wire, bad_header_fields)
{
	uint32_t len = build_two(NULL), count;
	struct wire_frame_hdr *fh = (struct wire_frame_hdr *)frame;

	fh->magic ^= 1;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_MAGIC));
	fh->magic ^= 1;

	fh->version_major = WIRE_VERSION_MAJOR + 1;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_VERSION));
	fh->version_major = WIRE_VERSION_MAJOR;

	fh->flags = 0x80;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_FLAGS));
	fh->flags = 0;

	fh->length = (uint16_t)(len + 8);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_LENGTH));
	fh->length = (uint16_t)len;

	fh->msg_count = 0;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_COUNT));
	fh->msg_count = WIRE_FRAME_MSGS_MAX + 1;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_COUNT));
	fh->msg_count = 3; /* more messages claimed than there are */
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_COUNT));
	fh->msg_count = 1; /* fewer: bytes left over */
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_TRAILING));
	fh->msg_count = 2;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_OK));
}

Test(wire, bad_message_fields)
{
	uint32_t len = build_two(NULL), count;
	struct wire_new_order *o = (struct wire_new_order *)(frame + 16);

	o->hdr.type = 15; /* a hole in the type space */
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_TYPE));
	o->hdr.type = 0xffff;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_TYPE));
	o->hdr.type = WIRE_NEW_ORDER;

	o->hdr.length = 64;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_MSG_LENGTH));
	o->hdr.length = 80;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_MSG_LENGTH));
	o->hdr.length = 72;

	o->side = 3;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_ENUM));
	o->side = 0; /* zero is never a valid enum */
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_ENUM));
	o->side = WIRE_SIDE_SELL;
	o->tif = WIRE_TIF_POST_ONLY + 1;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_ENUM));
	o->tif = WIRE_TIF_IOC;
	o->stp = 4;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_ENUM));
	o->stp = 0;
	o->hdr.flags = 1; /* no flags defined for NEW_ORDER */
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_RESERVED));
	o->hdr.flags = 0;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_OK));
}

/* Goal: reserved bytes must be zero, in every struct that has them. Method: one of each. */
Test(wire, reserved_must_be_zero)
{
	struct wire_builder b;
	struct wire_me_event ev = {0};
	wire_hdr_init(&ev.hdr, WIRE_ME_EVENT, 1);
	ev.event = WIRE_EV_FILL;
	ev.side = WIRE_SIDE_BUY;
	ev.reserved1 = 1;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &ev);
	uint32_t len = wire_builder_finish(&b, NULL), count;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_RESERVED));

	struct wire_hydrate_user hu = {0};
	wire_hdr_init(&hu.hdr, WIRE_HYDRATE_USER, 1);
	hu.status = WIRE_HYD_OK;
	hu.state.balances[15].reserved = 7;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &hu);
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_RESERVED));
	hu.state.balances[15].reserved = 0;
	hu.state.balance_count = WIRE_BALANCES_MAX + 1;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &hu);
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_COUNT));
}

/* Goal: oversize counts inside messages are refused. */
Test(wire, oversize_inner_counts)
{
	struct wire_builder b;
	struct wire_routing_config rc = {0};
	wire_hdr_init(&rc.hdr, WIRE_ROUTING_CONFIG, 1);
	rc.epoch = 1;
	rc.shard_count = WIRE_ROUTE_SHARDS_MAX + 1;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &rc);
	uint32_t len = wire_builder_finish(&b, NULL), count;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_COUNT));

	struct wire_open_orders_snapshot s = {0};
	wire_hdr_init(&s.hdr, WIRE_OPEN_ORDERS_SNAPSHOT, 1);
	s.count = WIRE_OPEN_ORDERS_MAX + 1;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &s);
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_COUNT));
}

/* Goal: the MAC authenticates. Method: keyed round trip; flip each byte; key mismatches. */
Test(wire, mac)
{
	struct wire_key key = {.k0 = 0x0706050403020100, .k1 = 0x0f0e0d0c0b0a0908};
	struct wire_key other = {.k0 = 1, .k1 = 2};
	uint32_t len = build_two(&key), count;
	cr_assert(eq(u32, len, 16 + 72 + 40 + WIRE_MAC_SIZE));
	cr_assert(eq(int, decode(len, &key, &count), WIRE_E_OK));
	cr_assert(eq(int, decode(len, &other, &count), WIRE_E_BAD_MAC));
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_MAC));
	for (uint32_t i = 16; i < len; i++) {
		frame[i] ^= 0x10;
		cr_assert(ne(int, decode(len, &key, &count), WIRE_E_OK), "byte %u", i);
		frame[i] ^= 0x10;
	}
	/* An unauthenticated frame is refused where a key is configured. */
	len = build_two(NULL);
	cr_assert(eq(int, decode(len, &key, &count), WIRE_E_BAD_MAC));
}

/* Goal: a frame finished in two steps — header by the shard lcore, MAC by the bridge lcore
 * (app_seal.c) — is byte for byte the frame wire_builder_finish makes, with and without a
 * MAC, and decodes; a frame whose MAC was never written does not. Method: build the same
 * messages both ways, compare the bytes. */
Test(wire, finish_unsealed_then_seal)
{
	struct wire_key key = {.k0 = 0x0706050403020100, .k1 = 0x0f0e0d0c0b0a0908};
	static _Alignas(8) uint8_t whole[WIRE_FRAME_MAX];
	for (int mac = 0; mac < 2; mac++) {
		uint32_t len = build_two(mac ? &key : NULL), count;
		memcpy(whole, frame, len);
		memset(frame, 0xa5, sizeof(frame));
		struct wire_builder b;
		add_two(&b);
		uint32_t ulen = wire_builder_finish_unsealed(&b, mac);
		cr_assert(eq(u32, ulen, len));
		if (mac) {
			/* Not sealed yet: the tag's room holds whatever was there. */
			cr_assert(eq(int, decode(ulen, &key, &count), WIRE_E_BAD_MAC));
			wire_frame_seal(frame, ulen, &key);
		}
		cr_assert(eq(int, memcmp(frame, whole, len), 0), "mac %d", mac);
		cr_assert(eq(int, decode(len, mac ? &key : NULL, &count), WIRE_E_OK));
		cr_assert(eq(u32, count, 2));
	}
}

/* Goal: SipHash-2-4-128 matches the reference vectors (key 00..0f, message 00..n-1). */
Test(wire, siphash_reference_vectors)
{
	static const uint8_t v0[16] = {0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6,
				       0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93};
	static const uint8_t v3[16] = {0x9c, 0x70, 0xb6, 0x0c, 0x52, 0x67, 0xa9, 0x4e,
				       0x5f, 0x33, 0xb6, 0xb0, 0x29, 0x85, 0xed, 0x51};
	static const uint8_t v63[16] = {0x51, 0x50, 0xd1, 0x77, 0x2f, 0x50, 0x83, 0x4a,
					0x50, 0x3e, 0x06, 0x9a, 0x97, 0x3f, 0xbd, 0x7c};
	struct wire_key key = {.k0 = 0x0706050403020100, .k1 = 0x0f0e0d0c0b0a0908};
	uint8_t in[64], out[16];
	for (int i = 0; i < 64; i++)
		in[i] = (uint8_t)i;
	wire_siphash128(&key, in, 0, out);
	cr_assert(eq(int, memcmp(out, v0, 16), 0));
	wire_siphash128(&key, in, 3, out);
	cr_assert(eq(int, memcmp(out, v3, 16), 0));
	wire_siphash128(&key, in, 63, out);
	cr_assert(eq(int, memcmp(out, v63, 16), 0));
}

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Goal: wire_siphash128_multi gives every buffer the bytes wire_siphash128 gives it — the
 * four-lane path (AVX2 builds: this tree's -march) for groups of 4, a last group of 2 or 3
 * with idle lanes, and 1 alone — over unequal lengths (the lanes share only the shortest's
 * full blocks: 0, 1..7 bytes, a block boundary, a multiple of 32, longer ones), distinct
 * keys per buffer and the reference vectors among them. Fails when a lane's state, its
 * transposed block, a rotation or the hand-over to the scalar finish is wrong. */
Test(wire, siphash_multi_matches_one_by_one)
{
	enum { N = 9, MAXLEN = 1500 };
	static uint8_t buf[N][MAXLEN];
	uint64_t seed = 0x9e3779b97f4a7c15;
	for (int i = 0; i < N; i++)
		for (int j = 0; j < MAXLEN; j++)
			buf[i][j] = (uint8_t)xorshift(&seed);
	static const size_t shapes[][N] = {
		{0, 3, 63, 63, 8, 7, 1, 32, 33},
		{1400, 1400, 1400, 1400, 1399, 1401, 1392, 1408, 1},
		{96, 64, 128, 32, 40, 48, 56, 72, 80},
		{1500, 17, 1200, 900, 31, 32, 33, 0, 1499},
	};
	for (size_t sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++) {
		for (uint32_t n = 1; n <= N; n++) {
			struct wire_key keys[N];
			const struct wire_key *kp[N];
			const void *data[N];
			size_t lens[N];
			uint8_t got[N][16], want[N][16];
			uint8_t *out[N];
			for (uint32_t i = 0; i < n; i++) {
				keys[i].k0 = xorshift(&seed);
				keys[i].k1 = xorshift(&seed);
				kp[i] = &keys[i];
				data[i] = buf[i];
				lens[i] = shapes[sh][i];
				out[i] = got[i];
				wire_siphash128(&keys[i], buf[i], lens[i], want[i]);
			}
			wire_siphash128_multi(kp, data, lens, out, n);
			for (uint32_t i = 0; i < n; i++)
				cr_assert(eq(int, memcmp(got[i], want[i], 16), 0),
					  "shape %zu n %u buffer %u len %zu", sh, n, i, lens[i]);
		}
	}
	/* More buffers than one sorted batch (64), lengths all over, the same keys reused. */
	{
		enum { M = 150 };
		static size_t lens[M];
		const void *data[M];
		const struct wire_key *kp[M];
		struct wire_key keys[3] = {{1, 2}, {3, 4}, {5, 6}};
		static uint8_t got[M][16], want[M][16];
		uint8_t *out[M];
		for (uint32_t i = 0; i < M; i++) {
			lens[i] = (size_t)(xorshift(&seed) % MAXLEN);
			data[i] = buf[i % N];
			kp[i] = &keys[i % 3];
			out[i] = got[i];
			wire_siphash128(kp[i], data[i], lens[i], want[i]);
		}
		wire_siphash128_multi(kp, data, lens, out, M);
		for (uint32_t i = 0; i < M; i++)
			cr_assert(eq(int, memcmp(got[i], want[i], 16), 0), "buffer %u of %u", i, M);
	}
	/* The reference vectors (key 00..0f, message 00..n-1) through the lanes. */
	static const uint8_t v0[16] = {0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6,
				       0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93};
	static const uint8_t v63[16] = {0x51, 0x50, 0xd1, 0x77, 0x2f, 0x50, 0x83, 0x4a,
					0x50, 0x3e, 0x06, 0x9a, 0x97, 0x3f, 0xbd, 0x7c};
	struct wire_key key = {.k0 = 0x0706050403020100, .k1 = 0x0f0e0d0c0b0a0908};
	uint8_t in[64], o[4][16];
	for (int i = 0; i < 64; i++)
		in[i] = (uint8_t)i;
	const struct wire_key *kp[4] = {&key, &key, &key, &key};
	const void *data[4] = {in, in, in, in};
	size_t lens[4] = {63, 0, 63, 63};
	uint8_t *out[4] = {o[0], o[1], o[2], o[3]};
	wire_siphash128_multi(kp, data, lens, out, 4);
	cr_assert(eq(int, memcmp(o[0], v63, 16), 0));
	cr_assert(eq(int, memcmp(o[1], v0, 16), 0));
	cr_assert(eq(int, memcmp(o[3], v63, 16), 0));
}

/* Goal: wire_frames_seal writes the MAC wire_frame_seal writes, frame by frame, each under
 * its own key. */
Test(wire, frames_seal_matches_seal)
{
	enum { N = 7 };
	_Alignas(8) static uint8_t a[N][1024], b[N][1024];
	uint8_t *fa[N];
	uint32_t lens[N];
	struct wire_key keys[N];
	const struct wire_key *kp[N];
	uint64_t seed = 77;
	for (int i = 0; i < N; i++) {
		struct wire_builder wb;
		wire_builder_init(&wb, a[i], sizeof(a[i]), 3);
		for (int m = 0; m <= i; m++) {
			struct wire_new_order o = new_order((uint64_t)(i + 1), (uint64_t)(m + 1));
			cr_assert(eq(int, wire_builder_add(&wb, &o), 0));
		}
		lens[i] = wire_builder_finish_unsealed(&wb, true);
		memcpy(b[i], a[i], sizeof(a[i]));
		keys[i] = (struct wire_key){.k0 = xorshift(&seed), .k1 = xorshift(&seed)};
		kp[i] = &keys[i];
		fa[i] = a[i];
		wire_frame_seal(b[i], lens[i], &keys[i]);
	}
	wire_frames_seal(fa, lens, kp, N);
	for (int i = 0; i < N; i++)
		cr_assert(eq(int, memcmp(a[i], b[i], lens[i]), 0), "frame %d", i);
}

/* Goal: wire_frame_decode_checked takes the caller's MAC verdict (the io lcore computes a
 * burst's MACs together): a sealed frame whose tag wire_frame_tag_ok matched decodes as
 * wire_frame_decode decodes it, a refused verdict is BAD_MAC, and a frame without the MAC
 * flag under a key is BAD_MAC whatever the verdict (no MAC to trust). */
Test(wire, decode_checked_takes_the_verdict)
{
	_Alignas(8) uint8_t frame[512];
	struct wire_key key = {.k0 = 11, .k1 = 12}, other = {.k0 = 13, .k1 = 14};
	struct wire_builder b;
	wire_builder_init(&b, frame, sizeof(frame), 9);
	struct wire_new_order o = new_order(5, 6);
	cr_assert(eq(int, wire_builder_add(&b, &o), 0));
	uint32_t len = wire_builder_finish(&b, &key);
	const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];
	uint32_t count = 0, sender = 0;
	uint8_t tag[WIRE_MAC_SIZE];
	wire_siphash128(&key, frame, len - WIRE_MAC_SIZE, tag);
	cr_assert(wire_frame_tag_ok(frame, len, tag));
	cr_assert(eq(int, wire_frame_decode_checked(frame, len, &key, true, msgs,
						    WIRE_FRAME_MSGS_MAX, &count, &sender),
		     WIRE_E_OK));
	cr_assert(eq(u32, count, 1));
	cr_assert(eq(u32, sender, 9));
	wire_siphash128(&other, frame, len - WIRE_MAC_SIZE, tag);
	cr_assert(not(wire_frame_tag_ok(frame, len, tag)));
	cr_assert(not(wire_frame_tag_ok(frame, sizeof(struct wire_frame_hdr), tag)));
	cr_assert(eq(int, wire_frame_decode_checked(frame, len, &key, false, msgs,
						    WIRE_FRAME_MSGS_MAX, &count, &sender),
		     WIRE_E_BAD_MAC));
	wire_builder_init(&b, frame, sizeof(frame), 9);
	cr_assert(eq(int, wire_builder_add(&b, &o), 0));
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, wire_frame_decode_checked(frame, len, &key, true, msgs,
						    WIRE_FRAME_MSGS_MAX, &count, &sender),
		     WIRE_E_BAD_MAC));
}

/* Goal: the builder refuses what does not fit and keeps room for the MAC. */
Test(wire, builder_full)
{
	_Alignas(8) uint8_t small[16 + 72 + WIRE_MAC_SIZE];
	struct wire_builder b;
	struct wire_new_order o = new_order(1, 1);
	wire_builder_init(&b, small, sizeof(small), 1);
	cr_assert(eq(int, wire_builder_add(&b, &o), 0));
	cr_assert(eq(int, wire_builder_add(&b, &o), -ENOSPC));
	cr_assert(eq(u32, wire_builder_finish(&b, &(struct wire_key){1, 1}), sizeof(small)));
}

/* Goal: wire_builder_room never says there is room when the add would refuse the message:
 * frames of every size from too small to roomy, filled with orders and tailed INGRESSes
 * until the add refuses; and it does say so while an empty roomy frame is far from full. */
Test(wire, builder_room_never_wrong)
{
	struct wire_new_order o = new_order(1, 1);
	struct wire_ingress in = {0};
	wire_hdr_init(&in.hdr, WIRE_INGRESS, 2);
	in.tail_len = sizeof(o);
	uint32_t said = 0;
	for (uint32_t cap = sizeof(struct wire_frame_hdr) + WIRE_MAC_SIZE; cap <= 1500; cap += 8) {
		struct wire_builder b;
		wire_builder_init(&b, frame, cap, 1);
		for (uint32_t k = 0;; k++) {
			bool tailed = k % 3 == 2;
			bool room = tailed ? wire_builder_room(&b, &in.hdr, sizeof(o))
					   : wire_builder_room(&b, &o.hdr, 0);
			int rc = tailed ? wire_builder_add_tail(&b, &in, &o, sizeof(o))
					: wire_builder_add(&b, &o);
			if (room)
				cr_assert(eq(int, rc, 0), "cap %u message %u", cap, k);
			said += room;
			if (rc != 0)
				break;
		}
	}
	cr_assert(gt(u32, said, 1000));
	struct wire_builder b;
	wire_builder_init(&b, frame, 1400, 1);
	cr_assert(wire_builder_room(&b, &o.hdr, 0));
}

/* Goal: the egress's in-line add (wire_builder_add_plain) writes exactly what the builder's
 * own add writes, for every type it takes, and refuses where that add would: every type with
 * a tail, an unknown type, a frame without room (tried at every fill of a small frame). */
Test(wire, builder_add_plain_same_bytes)
{
	static _Alignas(8) uint8_t other[WIRE_FRAME_MAX];
	static _Alignas(8) uint8_t msg[sizeof(union wire_msg_any) + 64];
	uint32_t plain = 0;
	for (uint32_t t = 0; t < WIRE_TYPE_LIMIT; t++) {
		uint16_t size = wire_type_size((uint16_t)t);
		uint16_t want = size == 0 || wire_type_size_sent((uint16_t)t) != size ? 0 : size;
		struct wire_builder b;
		wire_builder_init(&b, frame, sizeof(frame), 1);
		if (size != 0) {
			for (uint32_t i = 0; i < sizeof(msg); i++)
				msg[i] = (uint8_t)(i * 7 + t);
			wire_hdr_init((struct wire_msg_hdr *)msg, (uint16_t)t, 0);
			/* A newer minor's longer message: its extra bytes are not copied. */
			((struct wire_msg_hdr *)msg)->length = (uint16_t)(size + 16);
		}
		bool added = size != 0 && wire_builder_add_plain(&b, (const void *)msg);
		if (wire_type_plain_sizes[t] == 0) {
			cr_assert(not(added), "type %u", t);
			cr_assert(eq(u32, b.len, sizeof(struct wire_frame_hdr)));
			continue;
		}
		cr_assert(eq(u16, wire_type_plain_sizes[t], want), "type %u", t);
		cr_assert(added, "type %u", t);
		plain++;
		/* The same message, small frames filled by both adds side by side. */
		for (uint32_t cap = sizeof(struct wire_frame_hdr) + WIRE_MAC_SIZE; cap <= 600;
		     cap += 8) {
			struct wire_builder x, y;
			wire_builder_init(&x, frame, cap, 9);
			wire_builder_init(&y, other, cap, 9);
			for (;;) {
				bool ok = wire_builder_add_plain(&x, (const void *)msg);
				int rc = wire_builder_add_tail(&y, msg, NULL, 0);
				cr_assert(eq(int, rc, ok ? 0 : -ENOSPC), "type %u cap %u", t, cap);
				cr_assert(eq(u32, x.len, y.len));
				cr_assert(eq(u16, x.count, y.count));
				cr_assert(eq(int, memcmp(frame, other, x.len), 0), "type %u", t);
				if (!ok)
					break;
			}
		}
	}
	cr_assert(gt(u32, plain, 20));
	cr_assert(eq(u16, wire_type_plain_sizes[WIRE_INGRESS], 0)); /* a tail */
	cr_assert(eq(u16, wire_type_plain_sizes[WIRE_SUBMIT], wire_type_size_sent(WIRE_SUBMIT)));
}

/* Goal: INGRESS wraps valid messages only, and never another INGRESS. */
Test(wire, ingress_inner_checked)
{
	struct wire_new_order o = new_order(5, 5);
	struct wire_ingress in = {0};
	wire_hdr_init(&in.hdr, WIRE_INGRESS, 2);
	in.origin = 77;
	in.tail_len = sizeof(o);
	struct wire_builder b;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	cr_assert(eq(int, wire_builder_add_tail(&b, &in, &o, sizeof(o)), 0));
	uint32_t len = wire_builder_finish(&b, NULL), count;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_OK));

	o.side = 9;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add_tail(&b, &in, &o, sizeof(o));
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_ENUM));

	_Alignas(8) uint8_t nested[sizeof(in) + sizeof(o)];
	o.side = WIRE_SIDE_BUY;
	struct wire_ingress inner = in;
	inner.hdr.length = (uint16_t)sizeof(nested);
	memcpy(nested, &inner, sizeof(inner));
	memcpy(nested + sizeof(inner), &o, sizeof(o));
	in.tail_len = sizeof(nested);
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add_tail(&b, &in, nested, sizeof(nested));
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_TYPE));
}

/* Decode one FORWARDED_ADMIN (origin, flags) wrapping tail. */
static enum wire_err
fwd_decode(uint32_t origin, uint16_t flags, const void *tail, uint16_t tail_len)
{
	struct wire_fwd_admin f = {0};
	wire_hdr_init(&f.hdr, WIRE_FORWARDED_ADMIN, 4);
	f.hdr.flags = flags;
	f.fwd_id = 99;
	f.origin = origin;
	f.reply_shard = 1;
	f.tail_len = tail_len;
	struct wire_builder b;
	uint32_t count;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	cr_assert(eq(int, wire_builder_add_tail(&b, &f, tail, tail_len), 0));
	return decode(wire_builder_finish(&b, NULL), NULL, &count);
}

/* Goal: FORWARDED_ADMIN carries exactly one valid admin message from a named origin, with
 * only the completion flags; FORWARDED_REPLY a known status and at most that message.
 * Method: one good message, then one wrong field at a time. */
Test(wire, forwarded_admin_checked)
{
	struct wire_symbol_status_msg h = {0};
	wire_hdr_init(&h.hdr, WIRE_SYMBOL_STATUS, 4);
	h.symbol = 1;
	h.status = WIRE_SYM_HALTED;
	cr_assert(eq(int, fwd_decode(2, 0, &h, sizeof(h)), WIRE_E_OK));
	cr_assert(eq(int, fwd_decode(2, WIRE_FWD_F_SYMBOL_FILL, &h, sizeof(h)), WIRE_E_OK));
	cr_assert(eq(int, fwd_decode(2, 0x8, &h, sizeof(h)), WIRE_E_BAD_RESERVED));
	cr_assert(eq(int, fwd_decode(0, 0, &h, sizeof(h)), WIRE_E_BAD_VALUE), "no origin");
	cr_assert(eq(int, fwd_decode(2, 0, NULL, 0), WIRE_E_BAD_COUNT), "nothing wrapped");
	struct wire_new_order o = new_order(5, 5);
	cr_assert(eq(int, fwd_decode(2, 0, &o, sizeof(o)), WIRE_E_BAD_TYPE), "not admin");
	struct wire_symbol_status_msg two[2] = {h, h};
	cr_assert(eq(int, fwd_decode(2, 0, two, sizeof(two)), WIRE_E_BAD_COUNT), "two");
	h.status = 7;
	cr_assert(eq(int, fwd_decode(2, 0, &h, sizeof(h)), WIRE_E_BAD_ENUM), "inner checked");

	struct wire_fwd_reply r = {0};
	wire_hdr_init(&r.hdr, WIRE_FORWARDED_REPLY, 1);
	r.status = WIRE_FWD_OK;
	struct wire_builder b;
	uint32_t count;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add_tail(&b, &r, NULL, 0);
	cr_assert(eq(int, decode(wire_builder_finish(&b, NULL), NULL, &count), WIRE_E_OK));
	r.status = WIRE_FWD_MAX;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add_tail(&b, &r, NULL, 0);
	cr_assert(eq(int, decode(wire_builder_finish(&b, NULL), NULL, &count), WIRE_E_BAD_ENUM));
	cr_assert(eq(int, wire_type_class(WIRE_FORWARDED_ADMIN), WIRE_CLS_SHARD));
	cr_assert(not(wire_type_is_admin(WIRE_FORWARDED_ADMIN)), "never proposed as is");
}

static struct wire_member_change
member_change(uint8_t op, uint32_t node)
{
	struct wire_member_change m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_MEMBER_CHANGE, 4);
	m.node = node;
	m.op = op;
	return m;
}

/* Goal: MEMBER_CHANGE round-trips, is checked like every message (op in range, a node,
 * reserved zero, no flags), travels only as the tail of FORWARDED_ADMIN (never in an
 * answer), and is neither an admin message (never proposed as is) nor taken off the wire
 * alone (class NONE). Method: encode and decode each op, then one wrong field at a time,
 * alone and wrapped. */
Test(wire, member_change_checked)
{
	cr_assert(eq(u16, wire_type_size(WIRE_MEMBER_CHANGE), 16));
	cr_assert(eq(int, wire_type_class(WIRE_MEMBER_CHANGE), WIRE_CLS_NONE));
	cr_assert(not(wire_type_is_admin(WIRE_MEMBER_CHANGE)), "never proposed as is");
	cr_assert(eq(str, (char *)wire_type_name(WIRE_MEMBER_CHANGE), "MEMBER_CHANGE"));
	for (uint8_t op = WIRE_MEMBER_ADD; op <= WIRE_MEMBER_REMOVE; op++) {
		struct wire_member_change m = member_change(op, 7);
		struct wire_builder b;
		uint32_t count;
		wire_builder_init(&b, frame, sizeof(frame), 1);
		cr_assert(eq(int, wire_builder_add(&b, &m), 0));
		cr_assert(eq(int, decode(wire_builder_finish(&b, NULL), NULL, &count), WIRE_E_OK));
		cr_assert(eq(u32, count, 1));
		const struct wire_member_change *d = (const void *)msgs[0];
		cr_assert(eq(u16, d->hdr.type, WIRE_MEMBER_CHANGE));
		cr_assert(eq(u16, d->hdr.shard, 4));
		cr_assert(eq(u32, d->node, 7));
		cr_assert(eq(u8, d->op, op));
		cr_assert(eq(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_OK), "op %u wrapped", op);
	}
	struct wire_member_change m = member_change(0, 7);
	cr_assert(eq(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_BAD_ENUM), "op 0");
	m = member_change(WIRE_MEMBER_REMOVE + 1, 7);
	cr_assert(eq(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_BAD_ENUM), "op past REMOVE");
	m = member_change(WIRE_MEMBER_ADD, 0);
	cr_assert(eq(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_BAD_VALUE), "node 0");
	m = member_change(WIRE_MEMBER_ADD, 7);
	m.reserved[2] = 1;
	cr_assert(eq(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_BAD_RESERVED), "reserved");
	m = member_change(WIRE_MEMBER_ADD, 7);
	m.hdr.flags = 1;
	cr_assert(eq(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_BAD_RESERVED), "flags");
	struct wire_member_change two[2] = {member_change(WIRE_MEMBER_ADD, 7),
					    member_change(WIRE_MEMBER_ADD, 8)};
	cr_assert(eq(int, fwd_decode(2, 0, two, sizeof(two)), WIRE_E_BAD_COUNT), "two");

	/* An answer never carries one back: a leader makes the change, it proposes nothing. */
	struct {
		struct wire_fwd_reply r;
		struct wire_member_change m;
	} rep;
	memset(&rep, 0, sizeof(rep));
	wire_hdr_init(&rep.r.hdr, WIRE_FORWARDED_REPLY, 1);
	rep.r.status = WIRE_FWD_OK;
	rep.m = member_change(WIRE_MEMBER_ADD, 7);
	struct wire_builder b;
	uint32_t count;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	rep.r.tail_len = sizeof(rep.m);
	wire_builder_add_tail(&b, &rep.r, &rep.m, sizeof(rep.m));
	cr_assert(eq(int, decode(wire_builder_finish(&b, NULL), NULL, &count), WIRE_E_BAD_TYPE));
}

static struct wire_leader_transfer
leader_transfer(uint32_t node)
{
	struct wire_leader_transfer m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_LEADER_TRANSFER, 4);
	m.node = node;
	return m;
}

/* Goal: LEADER_TRANSFER round-trips, is checked like every message (a node, reserved zero,
 * no flags), travels only as the tail of FORWARDED_ADMIN (never in an answer: the leader
 * proposes nothing), and is neither an admin message (never proposed as is) nor taken off
 * the wire alone (class NONE). Method: encode and decode one, then one wrong field at a
 * time, alone and wrapped. */
Test(wire, leader_transfer_checked)
{
	cr_assert(eq(u16, wire_type_size(WIRE_LEADER_TRANSFER), 16));
	cr_assert(eq(u16, WIRE_LEADER_TRANSFER, 75));
	cr_assert(eq(int, wire_type_class(WIRE_LEADER_TRANSFER), WIRE_CLS_NONE));
	cr_assert(not(wire_type_is_admin(WIRE_LEADER_TRANSFER)), "never proposed as is");
	cr_assert(eq(str, (char *)wire_type_name(WIRE_LEADER_TRANSFER), "LEADER_TRANSFER"));
	struct wire_leader_transfer m = leader_transfer(3);
	struct wire_builder b;
	uint32_t count;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	cr_assert(eq(int, wire_builder_add(&b, &m), 0));
	cr_assert(eq(int, decode(wire_builder_finish(&b, NULL), NULL, &count), WIRE_E_OK));
	cr_assert(eq(u32, count, 1));
	const struct wire_leader_transfer *d = (const void *)msgs[0];
	cr_assert(eq(u16, d->hdr.type, WIRE_LEADER_TRANSFER));
	cr_assert(eq(u16, d->hdr.shard, 4));
	cr_assert(eq(u32, d->node, 3));
	cr_assert(eq(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_OK), "wrapped");

	m = leader_transfer(0);
	cr_assert(eq(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_BAD_VALUE), "node 0");
	m = leader_transfer(3);
	m.reserved = 1;
	cr_assert(eq(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_BAD_RESERVED), "reserved");
	m = leader_transfer(3);
	m.hdr.flags = 1;
	cr_assert(eq(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_BAD_RESERVED), "flags");
	m = leader_transfer(3);
	m.hdr.length = 8;
	cr_assert(ne(int, fwd_decode(2, 0, &m, sizeof(m)), WIRE_E_OK), "short");
	struct wire_leader_transfer two[2] = {leader_transfer(3), leader_transfer(2)};
	cr_assert(eq(int, fwd_decode(2, 0, two, sizeof(two)), WIRE_E_BAD_COUNT), "two");
	struct {
		struct wire_leader_transfer t;
		struct wire_member_change m;
	} mixed;
	mixed.t = leader_transfer(3);
	mixed.m = member_change(WIRE_MEMBER_ADD, 7);
	cr_assert(eq(int, fwd_decode(2, 0, &mixed, sizeof(mixed)), WIRE_E_BAD_COUNT),
		  "a transfer and a change");

	/* An answer never carries one back: a leader hands leadership over, it proposes
	 * nothing. */
	struct {
		struct wire_fwd_reply r;
		struct wire_leader_transfer t;
	} rep;
	memset(&rep, 0, sizeof(rep));
	wire_hdr_init(&rep.r.hdr, WIRE_FORWARDED_REPLY, 1);
	rep.r.status = WIRE_FWD_OK;
	rep.t = leader_transfer(3);
	rep.r.tail_len = sizeof(rep.t);
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add_tail(&b, &rep.r, &rep.t, sizeof(rep.t));
	cr_assert(eq(int, decode(wire_builder_finish(&b, NULL), NULL, &count), WIRE_E_BAD_TYPE));
}

/* Goal: the orderId packs and unpacks. */
Test(wire, oid_packing)
{
	struct wire_oid oid = wire_oid_make(513, 0xdeadbeef, WIRE_USER_SEQ_MAX);
	cr_assert(eq(u16, wire_oid_shard(oid), 513));
	cr_assert(eq(u64, wire_oid_seq(oid), WIRE_USER_SEQ_MAX));
	cr_assert(eq(u64, oid.user, 0xdeadbeef));
	cr_assert(wire_oid_eq(oid, wire_oid_make(513, 0xdeadbeef, WIRE_USER_SEQ_MAX)));
	cr_assert(not(wire_oid_eq(oid, wire_oid_make(512, 0xdeadbeef, WIRE_USER_SEQ_MAX))));
}

/* Goal: claim releases carry a status only in the answer. */
Test(wire, release_claim_status)
{
	struct wire_release_claim r = {0};
	wire_hdr_init(&r.hdr, WIRE_RELEASE_CLAIM, 1);
	r.user = 5;
	r.epoch = 3;
	struct wire_builder b;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &r);
	uint32_t len = wire_builder_finish(&b, NULL), count;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_OK));
	r.status = WIRE_FLUSH_OK; /* a request carries no status */
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &r);
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_ENUM));
	wire_hdr_init(&r.hdr, WIRE_RELEASE_DONE, 1);
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &r);
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_OK));
	r.status = 0; /* an answer must */
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &r);
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_ENUM));
}

/* Goal: a refused modify of an order the ME no longer knows may carry no side; nothing else
 * may. (The simulator found the ME emitting exactly this, and a decoder that refused it
 * stalled the OMS stream behind it.) */
Test(wire, cancel_rejected_without_side)
{
	struct wire_me_event ev = {0};
	wire_hdr_init(&ev.hdr, WIRE_ME_EVENT, 1);
	ev.seq = 1;
	ev.event = WIRE_EV_CANCEL_REJECTED;
	ev.reason = WIRE_REASON_TOO_LATE;
	struct wire_builder b;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &ev);
	uint32_t len = wire_builder_finish(&b, NULL), count;
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_OK));
	ev.event = WIRE_EV_FILL;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	wire_builder_add(&b, &ev);
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_ENUM));
}

/* Goal: an ME event may say the order was taken (WIRE_EV_F_ENTERED) only on the kinds an
 * accepted order's first event can be (RESTED, FILL, CANCELLED, DONE), and that it is done
 * (WIRE_EV_F_DONE) only on those that can leave nothing live (FILL, CANCELLED, AMENDED); no
 * other flag is defined. */
Test(wire, me_event_flags)
{
	static const struct {
		uint8_t event;
		uint16_t allowed;
	} cases[] = {
		{WIRE_EV_RESTED, WIRE_EV_F_ENTERED},
		{WIRE_EV_FILL, WIRE_EV_F_ENTERED | WIRE_EV_F_DONE},
		{WIRE_EV_CANCELLED, WIRE_EV_F_ENTERED | WIRE_EV_F_DONE},
		{WIRE_EV_DONE, WIRE_EV_F_ENTERED},
		{WIRE_EV_AMENDED, WIRE_EV_F_DONE},
		{WIRE_EV_ACCEPTED, 0},
		{WIRE_EV_REJECTED, 0},
		{WIRE_EV_MOVED, 0},
		{WIRE_EV_ADOPTED, 0},
		{WIRE_EV_CANCEL_REJECTED, 0},
	};
	static const uint16_t flags[] = {WIRE_EV_F_ENTERED, WIRE_EV_F_DONE,
					 WIRE_EV_F_ENTERED | WIRE_EV_F_DONE, 0x0004, 0x8000};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct wire_me_event ev = {0};
		wire_hdr_init(&ev.hdr, WIRE_ME_EVENT, 1);
		ev.seq = 1;
		ev.event = cases[i].event;
		ev.side = WIRE_SIDE_BUY;
		ev.liquidity = cases[i].event == WIRE_EV_ADOPTED ? WIRE_ORD_LIMIT : 0;
		ev.cause = cases[i].event == WIRE_EV_ADOPTED ? WIRE_TIF_GTC : 0;
		ev.reason = cases[i].event == WIRE_EV_REJECTED ||
					    cases[i].event == WIRE_EV_CANCEL_REJECTED
				    ? WIRE_REASON_OFF_TICK
				    : 0;
		struct wire_builder b;
		uint32_t len, count;
		wire_builder_init(&b, frame, sizeof(frame), 1);
		wire_builder_add(&b, &ev);
		len = wire_builder_finish(&b, NULL);
		cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_OK), "event %u unflagged",
			  cases[i].event);
		for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
			ev.hdr.flags = flags[f];
			wire_builder_init(&b, frame, sizeof(frame), 1);
			wire_builder_add(&b, &ev);
			len = wire_builder_finish(&b, NULL);
			bool ok = (flags[f] & ~cases[i].allowed) == 0;
			cr_assert(eq(int, decode(len, NULL, &count),
				     ok ? WIRE_E_OK : WIRE_E_BAD_RESERVED),
				  "event %u flags 0x%x", cases[i].event, flags[f]);
		}
	}
}

/* Goal: an AppendEntries reply cannot claim to hold less than it counts (recv_index is the
 * in-memory prefix, match_index the counted one, so recv >= match).
 * Method: recv == match and recv > match decode; recv < match is BAD_ENUM. */
Test(wire, append_reply_recv_not_below_match)
{
	struct wire_append_reply r = {0};
	wire_hdr_init(&r.hdr, WIRE_APPEND_REPLY, 1);
	r.term = 2;
	r.follower = 3;
	r.success = 1;
	const uint64_t recv[] = {10, 12, 9};
	const enum wire_err want[] = {WIRE_E_OK, WIRE_E_OK, WIRE_E_BAD_ENUM};
	for (uint32_t i = 0; i < 3; i++) {
		r.match_index = 10;
		r.recv_index = recv[i];
		struct wire_builder b;
		wire_builder_init(&b, frame, sizeof(frame), 1);
		wire_builder_add(&b, &r);
		uint32_t len = wire_builder_finish(&b, NULL), count;
		cr_assert(eq(int, decode(len, NULL, &count), want[i]), "recv %lu",
			  (unsigned long)recv[i]);
	}
}

/* Goal: the admin column names exactly the operator's commands a leader proposes as they
 * are (the set app_shard's is_admin_type tested by hand), and every admin type is routed to
 * a shard. Method: compare every value 0..WIRE_TYPE_LIMIT with a hand-written set. */
Test(wire, admin_column)
{
	static const uint16_t admin[] = {
		WIRE_ROUTING_CONFIG, WIRE_SYMBOL_CONFIG, WIRE_SYMBOL_STATUS, WIRE_KILL_SWITCH,
		WIRE_TRANSFER,       WIRE_WHALE_PIN,     WIRE_USER_ADMIN,    WIRE_SNAPSHOT_REQUEST,
		WIRE_SYMBOL_MOVE,    WIRE_BOOK_CHUNK,
	};
	for (uint16_t t = 0; t <= WIRE_TYPE_LIMIT; t++) {
		bool want = false;
		for (unsigned i = 0; i < sizeof(admin) / sizeof(admin[0]); i++)
			want |= admin[i] == t;
		cr_assert(eq(int, wire_type_is_admin(t), want), "type %u", t);
		if (want)
			cr_assert(eq(int, wire_type_class(t), WIRE_CLS_SHARD), "type %u", t);
	}
	cr_assert(eq(int, wire_type_class(UINT16_MAX), WIRE_CLS_NONE));
	cr_assert(eq(int, wire_type_class(WIRE_TICK), WIRE_CLS_NONE));
	cr_assert(eq(int, wire_type_class(WIRE_NEW_ORDER), WIRE_CLS_GATEWAY));
	cr_assert(not(wire_type_is_admin(UINT16_MAX)));
}

/* Goal: a SYMBOL_MOVE's phase is one of OUT..WATCH; anything else is refused before it could
 * reach a log. Method: every phase value 0..7 through wire_msg_check. */
Test(wire, symbol_move_phases)
{
	for (uint8_t ph = 0; ph <= 7; ph++) {
		struct wire_symbol_move m;
		memset(&m, 0, sizeof(m));
		wire_hdr_init(&m.hdr, WIRE_SYMBOL_MOVE, 3);
		m.move_id = 9;
		m.symbol = 1;
		m.peer = 4;
		m.phase = ph;
		uint16_t len = 0;
		bool want = ph >= WIRE_MOVE_OUT && ph <= WIRE_MOVE_WATCH;
		cr_assert(eq(int, wire_msg_check(&m, sizeof(m), &len) == WIRE_E_OK, want), "phase %u",
			  ph);
	}
}

/* Goal: one hex key parser for the config, the client library and the tools: 32 hex digits
 * in either case, bytes in order, k0/k1 their little-endian halves; anything else refused
 * with -EINVAL and the key untouched. Method: a known key, then one bad input per rule. */
Test(wire, key_parse_hex)
{
	struct wire_key key = {0};
	cr_assert(eq(int, wire_key_parse_hex("000102030405060708090a0b0c0d0e0f", &key), 0));
	cr_assert(eq(u64, key.k0, UINT64_C(0x0706050403020100)));
	cr_assert(eq(u64, key.k1, UINT64_C(0x0f0e0d0c0b0a0908)));
	cr_assert(eq(int, wire_key_parse_hex("FFEEDDCCBBAA99887766554433221100", &key), 0));
	cr_assert(eq(u64, key.k0, UINT64_C(0x8899aabbccddeeff)));
	cr_assert(eq(u64, key.k1, UINT64_C(0x0011223344556677)));
	cr_assert(eq(int, wire_key_parse_hex("00000000000000000000000000000000", &key), 0));
	cr_assert(eq(u64, key.k0 | key.k1, 0));

	static const char *const bad[] = {
		"",
		"00010203",                          /* short */
		"000102030405060708090a0b0c0d0e0f00", /* long */
		"zz0102030405060708090a0b0c0d0e0f",   /* not hex */
		"000102030405060708090a0b0c0d0e0g",   /* the last digit */
		" 00102030405060708090a0b0c0d0e0f",   /* a space sscanf would skip */
		"+00102030405060708090a0b0c0d0e0f",   /* a sign strtoul would take */
		"0x0102030405060708090a0b0c0d0e0f",   /* a prefix */
	};
	key.k0 = 1;
	key.k1 = 2;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert(eq(int, wire_key_parse_hex(bad[i], &key), -EINVAL), "'%s'", bad[i]);
		cr_assert(eq(u64, key.k0, 1));
		cr_assert(eq(u64, key.k1, 2));
	}
	cr_assert(eq(int, wire_key_parse_hex(NULL, &key), -EINVAL));
}

static enum wire_err
check_one(const void *msg)
{
	struct wire_builder b;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	cr_assert(eq(int, wire_builder_add(&b, msg), 0));
	uint32_t len = wire_builder_finish(&b, NULL), count;
	return decode(len, NULL, &count);
}

/* Goal: the transfer lookup's answer is checked like every message: a FOUND carries a
 * transfer outcome for the id asked, the others carry nothing; an order entry of a user's
 * window names no asset or amount. */
Test(wire, transfer_found_and_recent)
{
	struct wire_transfer_found f = {0};
	wire_hdr_init(&f.hdr, WIRE_TRANSFER_FOUND, 1);
	f.user = 7;
	f.transfer_id = 9;
	f.status = WIRE_XFER_NOT_FOUND;
	cr_assert(eq(int, check_one(&f), WIRE_E_OK));
	f.rec.id = 9;
	cr_assert(eq(int, check_one(&f), WIRE_E_BAD_RESERVED));
	f.status = WIRE_XFER_FOUND;
	cr_assert(eq(int, check_one(&f), WIRE_E_BAD_ENUM)); /* kind 0 */
	f.rec.kind = WIRE_RECENT_TRANSFER;
	f.rec.asset = 2;
	f.rec.amount = -5;
	cr_assert(eq(int, check_one(&f), WIRE_E_OK));
	f.rec.id = 10;
	cr_assert(eq(int, check_one(&f), WIRE_E_BAD_VALUE)); /* another id */
	f.rec.id = 9;
	f.rec.kind = WIRE_RECENT_ORDER;
	cr_assert(eq(int, check_one(&f), WIRE_E_BAD_VALUE)); /* an order with an amount */
	f.rec.kind = WIRE_RECENT_TRANSFER;
	f.status = 4;
	cr_assert(eq(int, check_one(&f), WIRE_E_BAD_ENUM));
	f.status = WIRE_XFER_FOUND;
	f.reserved[3] = 1;
	cr_assert(eq(int, check_one(&f), WIRE_E_BAD_RESERVED));

	struct wire_transfer_lookup l = {0};
	wire_hdr_init(&l.hdr, WIRE_TRANSFER_LOOKUP, 1);
	l.user = 7;
	cr_assert(eq(int, check_one(&l), WIRE_E_OK));
	cr_assert(eq(int, wire_type_class(WIRE_TRANSFER_FOUND), WIRE_CLS_NONE));

	struct wire_begin_dehydrate bd = {0};
	wire_hdr_init(&bd.hdr, WIRE_BEGIN_DEHYDRATE, 1);
	bd.state.recent_count = 1;
	bd.state.recent[0] = (struct wire_recent){ .id = 1, .kind = WIRE_RECENT_ORDER, .asset = 1 };
	cr_assert(eq(int, check_one(&bd), WIRE_E_BAD_VALUE));
	bd.state.recent[0].kind = WIRE_RECENT_TRANSFER;
	cr_assert(eq(int, check_one(&bd), WIRE_E_OK));
	bd.state.recent[0].reserved = 1;
	cr_assert(eq(int, check_one(&bd), WIRE_E_BAD_RESERVED));
}

/* A session frame: SESSION_HDR {session, seq} then one NEW_ORDER, under key. */
static uint32_t
build_session(const struct wire_key *key, uint32_t sender, uint32_t session, bool hdr_first)
{
	struct wire_builder b;
	struct wire_session_hdr sh = {0};
	wire_hdr_init(&sh.hdr, WIRE_SESSION_HDR, 0);
	sh.session_id = session;
	sh.seq = 1;
	struct wire_new_order o = new_order(9, 1);
	wire_builder_init(&b, frame, sizeof(frame), sender);
	wire_builder_session(&b);
	cr_assert(eq(int, wire_builder_add(&b, hdr_first ? (const void *)&sh : (const void *)&o), 0));
	cr_assert(eq(int, wire_builder_add(&b, hdr_first ? (const void *)&o : (const void *)&sh), 0));
	return wire_builder_finish(&b, key);
}

/* Goal: session frames (docs/security.md) are their own decoder's: the ordinary decoder
 * refuses them whatever key it holds (a peer key never vouches for a session frame), the
 * session decoder wants MAC|SESSION exactly, SESSION_HDR first and nowhere else, naming the
 * frame's sender; it leaves the MAC to wire_frame_mac_ok under the session's key. */
Test(wire, session_frames)
{
	struct wire_key key = {.k0 = 11, .k1 = 12}, other = {.k0 = 1, .k1 = 2};
	uint32_t len = build_session(&key, 5, 5, true), count, sender;
	cr_assert(eq(int, decode(len, &key, &count), WIRE_E_BAD_FLAGS));
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_FLAGS));
	cr_assert(eq(int, wire_session_frame_decode(frame, len, msgs, WIRE_FRAME_MSGS_MAX, &count,
						    &sender), WIRE_E_OK));
	cr_assert(eq(u32, count, 2));
	cr_assert(eq(u32, sender, 5));
	cr_assert(eq(u8, wire_frame_flags(frame, len), WIRE_FRAME_F_MAC | WIRE_FRAME_F_SESSION));
	cr_assert(wire_frame_mac_ok(frame, len, &key));
	cr_assert(not(wire_frame_mac_ok(frame, len, &other)));
	cr_assert(not(wire_frame_mac_ok(frame, len, NULL)));
	/* Without a MAC, with the header elsewhere or naming another session: refused. */
	len = build_session(NULL, 5, 5, true);
	cr_assert(eq(int, wire_session_frame_decode(frame, len, msgs, WIRE_FRAME_MSGS_MAX, &count,
						    &sender), WIRE_E_BAD_FLAGS));
	len = build_session(&key, 5, 5, false);
	cr_assert(eq(int, wire_session_frame_decode(frame, len, msgs, WIRE_FRAME_MSGS_MAX, &count,
						    &sender), WIRE_E_BAD_TYPE));
	len = build_session(&key, 5, 6, true);
	cr_assert(eq(int, wire_session_frame_decode(frame, len, msgs, WIRE_FRAME_MSGS_MAX, &count,
						    &sender), WIRE_E_BAD_VALUE));
	/* A SESSION_HDR in an ordinary frame, or an ordinary frame to the session decoder. */
	len = build_two(&key);
	cr_assert(eq(int, wire_session_frame_decode(frame, len, msgs, WIRE_FRAME_MSGS_MAX, &count,
						    &sender), WIRE_E_BAD_FLAGS));
	struct wire_builder b;
	struct wire_session_hdr sh = {0};
	wire_hdr_init(&sh.hdr, WIRE_SESSION_HDR, 0);
	sh.session_id = 5;
	sh.seq = 1;
	wire_builder_init(&b, frame, sizeof(frame), 5);
	cr_assert(eq(int, wire_builder_add(&b, &sh), 0));
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(int, decode(len, NULL, &count), WIRE_E_BAD_TYPE));
}

/* Goal: the session messages' own field rules. */
Test(wire, session_message_fields)
{
	struct wire_logon l = {0};
	wire_hdr_init(&l.hdr, WIRE_LOGON, 0);
	l.key_id = 1;
	l.session_id = 2;
	uint16_t n;
	cr_assert(eq(int, wire_msg_check(&l, sizeof(l), &n), WIRE_E_OK));
	l.session_id = 0;
	cr_assert(eq(int, wire_msg_check(&l, sizeof(l), &n), WIRE_E_BAD_VALUE));
	l.session_id = 2;
	l.key_id = 0;
	cr_assert(eq(int, wire_msg_check(&l, sizeof(l), &n), WIRE_E_BAD_VALUE));
	/* A truncated LOGON, and an oversize one. */
	l.key_id = 1;
	cr_assert(eq(int, wire_msg_check(&l, sizeof(l) - 8, &n), WIRE_E_TRUNCATED));
	l.hdr.length = sizeof(l) + 8;
	cr_assert(eq(int, wire_msg_check(&l, sizeof(l), &n), WIRE_E_TRUNCATED));
	struct {
		struct wire_logon l;
		uint64_t extra;
	} big = {l, 0};
	/* Alone, its writer's minor is unknown: a newer one may have appended a field
	 * (docs/wire.md, "Versions"); in a frame of our own minor it is refused
	 * (test_wire_version.c). Not a whole number of words it never is. */
	cr_assert(eq(int, wire_msg_check(&big, sizeof(big), &n), WIRE_E_OK));
	cr_assert(eq(u16, n, sizeof(big)));
	big.l.hdr.length = sizeof(l) + 4;
	cr_assert(eq(int, wire_msg_check(&big, sizeof(big), &n), WIRE_E_BAD_MSG_LENGTH));

	struct wire_session_hdr sh = {0};
	wire_hdr_init(&sh.hdr, WIRE_SESSION_HDR, 0);
	sh.session_id = 1;
	cr_assert(eq(int, wire_msg_check(&sh, sizeof(sh), &n), WIRE_E_BAD_VALUE)); /* seq 0 */
	sh.seq = 1;
	sh.reserved = 1;
	cr_assert(eq(int, wire_msg_check(&sh, sizeof(sh), &n), WIRE_E_BAD_RESERVED));
	struct wire_session_reject r = {0};
	wire_hdr_init(&r.hdr, WIRE_SESSION_REJECT, 0);
	cr_assert(eq(int, wire_msg_check(&r, sizeof(r), &n), WIRE_E_BAD_ENUM)); /* reason 0 */
	r.reason = WIRE_REASON_SEQ_GAP;
	cr_assert(eq(int, wire_msg_check(&r, sizeof(r), &n), WIRE_E_OK));
	r.reason = WIRE_REASON_MAX;
	cr_assert(eq(int, wire_msg_check(&r, sizeof(r), &n), WIRE_E_BAD_ENUM));
	cr_assert(eq(str, (char *)wire_reason_name(WIRE_REASON_NOT_ENTITLED), "NOT_ENTITLED"));
}

/* Goal: the walk over messages already decoded (wire_msgs_next_decoded) yields what the
 * builder put in and stops where the framing breaks — a length of 0, under a header, not a
 * multiple of 8, or past the buffer — never reading beyond the buffer. */
Test(wire, decoded_walk_follows_the_framing_only)
{
	struct wire_new_order a = new_order(1, 1), b2 = new_order(2, 7);
	_Alignas(8) uint8_t buf[2 * sizeof(a)];
	memcpy(buf, &a, sizeof(a));
	memcpy(buf + sizeof(a), &b2, sizeof(b2));
	uint32_t pos = 0, len = sizeof(buf);
	const struct wire_msg_hdr *m = wire_msgs_next_decoded(buf, len, &pos);
	cr_assert(m != NULL && m->type == WIRE_NEW_ORDER && pos == sizeof(a));
	m = wire_msgs_next_decoded(buf, len, &pos);
	cr_assert(m != NULL && ((const struct wire_new_order *)m)->user == 2 && pos == len);
	cr_assert(wire_msgs_next_decoded(buf, len, &pos) == NULL, "the end");
	/* A buffer cut inside the second message: its length runs past the end. */
	pos = sizeof(a);
	cr_assert(wire_msgs_next_decoded(buf, len - 8, &pos) == NULL);
	cr_assert(pos == sizeof(a), "nothing consumed");
	/* Fewer bytes left than a header. */
	pos = 0;
	cr_assert(wire_msgs_next_decoded(buf, 4, &pos) == NULL);
	/* Lengths that are no framing: 0 (would never advance), under a header, not 8-aligned. */
	static const uint16_t bad[] = { 0, 4, sizeof(a) - 4 };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct wire_new_order c = a;
		c.hdr.length = bad[i];
		memcpy(buf, &c, sizeof(c));
		pos = 0;
		cr_assert(wire_msgs_next_decoded(buf, len, &pos) == NULL, "length %u", bad[i]);
		cr_assert(pos == 0);
	}
}

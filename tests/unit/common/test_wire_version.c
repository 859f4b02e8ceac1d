/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Wire versions, major.minor (docs/wire.md, "Versions"): which peers' frames are taken, and
 * how a message a newer minor made longer is accepted and its tail skipped.
 *
 * Built three times (tests/unit/common/meson.build): with this tree's minor (test_common),
 * and with wire.c compiled one and two minors newer (test_wire_minor1, test_wire_minor2,
 * -DWIRE_MINOR_BUMP), so the rules are checked from both sides of each boundary: a decoder
 * of minor 0 has no older peer, one of minor 2 has one two minors below.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "common/wire.h"
#include "wire_test_msgs.h"

static _Alignas(8) uint8_t frame[WIRE_FRAME_MAX];
static const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];

/* The largest minor a frame can carry (one byte). */
#define MINOR_MAX 255

static struct wire_submit
submit(uint64_t user, uint64_t seq)
{
	struct wire_submit m = {0};
	wire_hdr_init(&m.hdr, WIRE_SUBMIT, 2);
	m.oid = wire_oid_make(1, user, seq);
	m.symbol = 7;
	m.side = WIRE_SIDE_SELL;
	m.ord_type = WIRE_ORD_LIMIT;
	m.tif = WIRE_TIF_GTC;
	m.px = 100;
	m.qty = 3;
	return m;
}

static struct wire_cancel
cancel(uint64_t user, uint64_t cl, uint64_t orig)
{
	struct wire_cancel c = {0};
	wire_hdr_init(&c.hdr, WIRE_CANCEL, 3);
	c.user = user;
	c.cl_ord_id = cl;
	c.orig_cl_ord_id = orig;
	return c;
}

static enum wire_err
decode(uint32_t len, uint32_t *count)
{
	uint32_t sender = 0;
	*count = 0;
	return wire_frame_decode(frame, len, NULL, msgs, WIRE_FRAME_MSGS_MAX, count, &sender);
}

static struct wire_frame_hdr *
hdr(void)
{
	return (struct wire_frame_hdr *)(void *)frame;
}

/*
 * A frame as a node of minor `minor` writes it, by hand: header, then each message of
 * msg_lens[i] bytes, its first sizes[i] from msgv[i] and the rest `fill` (the fields that
 * minor appends). Returns the frame length.
 */
static uint32_t
frame_by_hand(uint8_t minor, const void *const *msgv, const uint16_t *sizes,
	      const uint16_t *msg_lens, uint32_t n, uint8_t fill)
{
	uint32_t pos = sizeof(struct wire_frame_hdr);
	for (uint32_t i = 0; i < n; i++) {
		memset(frame + pos, fill, msg_lens[i]);
		memcpy(frame + pos, msgv[i], sizes[i] < msg_lens[i] ? sizes[i] : msg_lens[i]);
		((struct wire_msg_hdr *)(void *)(frame + pos))->length = msg_lens[i];
		pos += msg_lens[i];
	}
	struct wire_frame_hdr fh = {
		.magic = WIRE_MAGIC,
		.version_major = WIRE_VERSION_MAJOR,
		.msg_count = (uint16_t)n,
		.sender_id = 5,
		.length = (uint16_t)pos,
		.version_minor = minor,
	};
	memcpy(frame, &fh, sizeof(fh));
	return pos;
}

/* Goal: the header still has 16 bytes, little-endian, naturally aligned, and the minor sits
 * in what was the zero high half of the 32-bit length: a frame of minor 0 is byte for byte
 * the frame of the releases before minors (so they can talk to it). Method: build, read the
 * bytes. */
Test(wire_version, header_layout)
{
	struct wire_builder b;
	struct wire_new_order o = new_order(1, 1);
	wire_builder_init(&b, frame, sizeof(frame), 0x01020304);
	cr_assert(eq(int, wire_builder_add(&b, &o), 0));
	uint32_t len = wire_builder_finish(&b, NULL);
	cr_assert(eq(u32, len, 16 + 72));
	cr_assert(eq(u8, frame[4], WIRE_VERSION_MAJOR));
	cr_assert(eq(u8, frame[4], 7));
	cr_assert(eq(u8, frame[12], (uint8_t)len));
	cr_assert(eq(u8, frame[13], (uint8_t)(len >> 8)));
	cr_assert(eq(u8, frame[14], WIRE_VERSION_MINOR));
	cr_assert(eq(u8, frame[15], 0));
	cr_assert(eq(u8, wire_frame_minor(frame, len), WIRE_VERSION_MINOR));
	cr_assert(eq(u8, wire_frame_minor(frame, 15), 0));
	uint32_t old_length;
	memcpy(&old_length, frame + 12, 4);
	if (WIRE_VERSION_MINOR == 0)
		cr_assert(eq(u32, old_length, len), "minor 0 reads as the old 32-bit length");
	cr_assert(eq(int, WIRE_VERSION_MINOR, WIRE_VERSION_MINOR_RELEASE + WIRE_MINOR_BUMP));
}

/* Goal: the same major and a minor at most one away are accepted; two away, or another
 * major, are refused as BAD_VERSION (what the dataplane counts). Method: one frame of
 * fixed-size messages no minor appends to, its header's minor and major edited. */
Test(wire_version, minor_window)
{
	struct wire_builder b;
	struct wire_new_order o = new_order(9, 1);
	struct wire_cancel c = cancel(9, 2, 1);
	wire_builder_init(&b, frame, sizeof(frame), 42);
	cr_assert(eq(int, wire_builder_add(&b, &o), 0));
	cr_assert(eq(int, wire_builder_add(&b, &c), 0));
	uint32_t len = wire_builder_finish(&b, NULL), count;
	cr_assert(eq(int, decode(len, &count), WIRE_E_OK));

	unsigned tried = 0;
	for (int d = -3; d <= 3; d++) {
		int minor = WIRE_VERSION_MINOR + d;
		if (minor < 0 || minor > MINOR_MAX)
			continue;
		hdr()->version_minor = (uint8_t)minor;
		enum wire_err want = (d >= -1 && d <= 1) ? WIRE_E_OK : WIRE_E_BAD_VERSION;
		cr_assert(eq(int, decode(len, &count), want), "minor %d against ours %d", minor,
			  WIRE_VERSION_MINOR);
		cr_assert(eq(u32, count, want == WIRE_E_OK ? 2u : 0u));
		tried++;
	}
	cr_assert(ge(u32, tried, 4)); /* ours 0: minors 0..3; 1: 0..4; 2: 0..5 */
	/* A minor below zero does not wrap: 255 is not "one below 0". */
	hdr()->version_minor = MINOR_MAX;
	cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_VERSION));

	hdr()->version_minor = WIRE_VERSION_MINOR;
	for (int d = -1; d <= 1; d += 2) {
		hdr()->version_major = (uint8_t)(WIRE_VERSION_MAJOR + d);
		cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_VERSION));
		hdr()->version_minor = WIRE_VERSION_MINOR + 1; /* a newer minor is no excuse */
		cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_VERSION));
		hdr()->version_minor = WIRE_VERSION_MINOR;
	}
	hdr()->version_major = WIRE_VERSION_MAJOR;
	hdr()->reserved = 1;
	cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_RESERVED));
	hdr()->reserved = 0;
	cr_assert(eq(int, decode(len, &count), WIRE_E_OK));
}

/* Goal: a frame of the next minor may carry longer fixed-size messages: accepted, each
 * message's pointer covers its whole length, the next message is found after it, and
 * nothing past the frame is read. Method: NEW_ORDER and SUBMIT with 8, 16 and 64 bytes of
 * unknown (non-zero) fields after what we write, then a CANCEL, in a frame of minor + 1. */
Test(wire_version, newer_minor_longer_message_skipped)
{
	struct wire_new_order o = new_order(9, 1);
	struct wire_submit s = submit(9, 4);
	struct wire_cancel c = cancel(9, 2, 1);
	const void *msgv[] = {&o, &s, &c};
	uint16_t sizes[] = {sizeof(o), sizeof(s), sizeof(c)};
	for (uint16_t more = 8; more <= WIRE_MSG_EXT_MAX; more = (uint16_t)(more * 2)) {
		uint16_t own_o = wire_type_size_sent(WIRE_NEW_ORDER);
		uint16_t own_s = wire_type_size_sent(WIRE_SUBMIT);
		if (own_o + more - sizeof(o) > WIRE_MSG_EXT_MAX ||
		    own_s + more - sizeof(s) > WIRE_MSG_EXT_MAX)
			continue;
		uint16_t lens[] = {(uint16_t)(own_o + more), (uint16_t)(own_s + more), sizeof(c)};
		/* What we append is ours to check (zero-valued); what the newer minor appends
		 * after it is not: 0xa5 there. */
		uint32_t len = frame_by_hand(WIRE_VERSION_MINOR + 1, msgv, sizes, lens, 3, 0);
		memset((uint8_t *)frame + 16 + own_o, 0xa5, more);
		memset((uint8_t *)frame + 16 + lens[0] + own_s, 0xa5, more);
		uint32_t count;
		cr_assert(eq(int, decode(len, &count), WIRE_E_OK), "%u more bytes", more);
		cr_assert(eq(u32, count, 3));
		cr_assert(eq(u16, msgs[0]->length, lens[0]));
		cr_assert(eq(int, memcmp((const uint8_t *)msgs[0] + 8, (const uint8_t *)&o + 8,
				     sizeof(o) - 8), 0));
		cr_assert(eq(ptr, (void *)msgs[1], (void *)(frame + 16 + lens[0])));
		cr_assert(eq(u16, msgs[1]->type, WIRE_SUBMIT));
		cr_assert(eq(ptr, (void *)msgs[2], (void *)(frame + 16 + lens[0] + lens[1])));
		cr_assert(eq(u16, msgs[2]->type, WIRE_CANCEL));

		/* The same bytes from a peer of our minor, or of the one before, are refused: a
		 * decoder of the same minor checks exact sizes. */
		hdr()->version_minor = WIRE_VERSION_MINOR;
		cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_MSG_LENGTH));
		if (WIRE_VERSION_MINOR > 0) {
			hdr()->version_minor = WIRE_VERSION_MINOR - 1;
			cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_MSG_LENGTH));
		}
	}
}

/* Goal: what even a newer minor may not do: append beyond WIRE_MSG_EXT_MAX, append in
 * steps other than 8, grow a type with a tail, or send a message shorter than its struct
 * (also than what we write). Method: each in a frame of minor + 1. */
Test(wire_version, newer_minor_limits)
{
	struct wire_new_order o = new_order(9, 1);
	const void *msgv[] = {&o};
	uint16_t sizes[] = {sizeof(o)};
	uint32_t count;
	uint8_t newer = WIRE_VERSION_MINOR + 1;

	uint16_t lens[] = {(uint16_t)(sizeof(o) + WIRE_MSG_EXT_MAX)};
	uint32_t len = frame_by_hand(newer, msgv, sizes, lens, 1, 0);
	cr_assert(eq(int, decode(len, &count), WIRE_E_OK));
	lens[0] = (uint16_t)(sizeof(o) + WIRE_MSG_EXT_MAX + 8);
	len = frame_by_hand(newer, msgv, sizes, lens, 1, 0);
	cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_MSG_LENGTH));
	lens[0] = (uint16_t)(sizeof(o) + 4);
	len = frame_by_hand(newer, msgv, sizes, lens, 1, 0);
	len = (len + 7u) & ~7u; /* keep the frame a whole number of words */
	hdr()->length = (uint16_t)len;
	cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_MSG_LENGTH));
	lens[0] = (uint16_t)(sizeof(o) - 8);
	len = frame_by_hand(newer, msgv, sizes, lens, 1, 0);
	cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_MSG_LENGTH));

	/* A SUBMIT shorter than what we write, from a newer minor: refused (a minor only
	 * appends, so the next one writes at least what we do). */
	if (wire_type_size_sent(WIRE_SUBMIT) > sizeof(struct wire_submit)) {
		struct wire_submit s = submit(1, 1);
		const void *sv[] = {&s};
		uint16_t ss[] = {sizeof(s)};
		uint16_t sl[] = {sizeof(s)};
		len = frame_by_hand(newer, sv, ss, sl, 1, 0);
		cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_MSG_LENGTH));
	}

	/* AppendEntries with 8 bytes after its padded tail. */
	_Alignas(8) uint8_t tail[sizeof(struct wire_entry_hdr) + 8] = {0};
	struct wire_entry_hdr e = {.term = 1, .data_len = 8};
	memcpy(tail, &e, sizeof(e));
	struct wire_append_entries ae = {0};
	wire_hdr_init(&ae.hdr, WIRE_APPEND_ENTRIES, 1);
	ae.entry_count = 1;
	ae.tail_len = sizeof(tail);
	_Alignas(8) uint8_t whole[sizeof(ae) + sizeof(tail)];
	memcpy(whole, &ae, sizeof(ae));
	memcpy(whole + sizeof(ae), tail, sizeof(tail));
	const void *av[] = {whole};
	uint16_t as[] = {sizeof(whole)};
	uint16_t al[] = {sizeof(whole)};
	len = frame_by_hand(newer, av, as, al, 1, 0);
	cr_assert(eq(int, decode(len, &count), WIRE_E_OK));
	al[0] = sizeof(whole) + 8;
	len = frame_by_hand(newer, av, as, al, 1, 0);
	cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_MSG_LENGTH));
}

/* Goal: a frame of the minor before ours holds exactly what that minor writes: our struct
 * plus what it appended (so far only the test builds' WIRE_EXTS). Method: only a decoder
 * of minor 1 or 2 has an older peer: SUBMIT at that minor's size is taken, at ours (when we
 * append to it) or shorter it is refused. */
Test(wire_version, older_minor_exact)
{
	if (WIRE_VERSION_MINOR == 0)
		cr_skip_test("minor 0 has no older peer (test_wire_minor1 and _minor2 run it)");
	struct wire_submit s = submit(3, 9);
	const void *msgv[] = {&s};
	uint16_t sizes[] = {sizeof(s)};
	/* What the minor before writes: minor 1 (bump 1's peer is 0) appends nothing, minor 1
	 * as bump 2's peer appends what WIRE_EXTS says since minor 1. */
	uint16_t prev = WIRE_MINOR_BUMP >= 2 ? wire_type_size_sent(WIRE_SUBMIT) : sizeof(s);
	uint16_t lens[] = {prev};
	uint32_t count, len = frame_by_hand(WIRE_VERSION_MINOR - 1, msgv, sizes, lens, 1, 0);
	cr_assert(eq(int, decode(len, &count), WIRE_E_OK));
	cr_assert(eq(u16, msgs[0]->length, prev));
	lens[0] = (uint16_t)(prev + 8);
	len = frame_by_hand(WIRE_VERSION_MINOR - 1, msgv, sizes, lens, 1, 0);
	cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_MSG_LENGTH));
	if (prev > sizeof(s)) {
		lens[0] = sizeof(s);
		len = frame_by_hand(WIRE_VERSION_MINOR - 1, msgv, sizes, lens, 1, 0);
		cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_MSG_LENGTH));
	}
}

/* Goal: the builder writes what this minor sends: every type's struct plus the zeroes of
 * what WIRE_EXTS appends (nothing in a release), and its own decoder takes it back; the
 * appended bytes are held to zero like reserved fields. Method: SUBMIT and ME_EVENT (the
 * test builds append to both) round-trip; a non-zero appended byte is refused. */
Test(wire_version, builder_writes_own_minor)
{
	for (uint16_t t = 0; t < WIRE_TYPE_LIMIT; t++) {
		uint16_t size = wire_type_size(t), sent = wire_type_size_sent(t);
		cr_assert(ge(u16, sent, size));
		cr_assert(eq(u16, (uint16_t)(sent - size) % 8, 0));
		cr_assert(le(u16, (uint16_t)(sent - size), WIRE_MSG_EXT_MAX));
	}
	cr_assert(eq(u16, wire_type_size_sent(WIRE_APPEND_ENTRIES),
		     sizeof(struct wire_append_entries)));
	cr_assert(eq(u16, wire_type_size_sent(WIRE_INGRESS), sizeof(struct wire_ingress)));
	cr_assert(eq(u16, wire_type_size_sent(0), 0));
	uint16_t ext = WIRE_MINOR_BUMP > 0 ? 8 : 0;
	cr_assert(eq(u16, wire_type_size_sent(WIRE_SUBMIT), sizeof(struct wire_submit) + ext));
	cr_assert(eq(u16, wire_type_size_sent(WIRE_ME_EVENT), sizeof(struct wire_me_event) + ext));
	cr_assert(eq(u16, wire_type_size_sent(WIRE_NEW_ORDER), sizeof(struct wire_new_order)));

	struct wire_submit s = submit(4, 4);
	struct wire_me_event ev = {0};
	wire_hdr_init(&ev.hdr, WIRE_ME_EVENT, 1);
	ev.event = WIRE_EV_FILL;
	ev.side = WIRE_SIDE_BUY;
	ev.liquidity = 1;
	struct wire_builder b;
	wire_builder_init(&b, frame, sizeof(frame), 1);
	cr_assert(eq(int, wire_builder_add(&b, &s), 0));
	cr_assert(eq(int, wire_builder_add(&b, &ev), 0));
	uint32_t len = wire_builder_finish(&b, NULL), count;
	cr_assert(eq(u32, len, 16 + wire_type_size_sent(WIRE_SUBMIT) +
				   wire_type_size_sent(WIRE_ME_EVENT)));
	cr_assert(eq(int, decode(len, &count), WIRE_E_OK));
	cr_assert(eq(u16, msgs[0]->length, wire_type_size_sent(WIRE_SUBMIT)));
	cr_assert(eq(u16, msgs[1]->length, wire_type_size_sent(WIRE_ME_EVENT)));
	if (ext > 0) {
		uint8_t *appended = frame + 16 + sizeof(struct wire_submit);
		cr_assert(eq(int, appended[0] | appended[7], 0));
		appended[3] = 1;
		cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_RESERVED));
		/* Also from a newer minor, which appends all we append. */
		hdr()->version_minor = WIRE_VERSION_MINOR + 1;
		cr_assert(eq(int, decode(len, &count), WIRE_E_BAD_RESERVED));
		appended[3] = 0;
		cr_assert(eq(int, decode(len, &count), WIRE_E_OK));
	}

	/* Re-encoding a newer minor's message writes ours: its extra bytes are not copied. */
	struct wire_new_order o = new_order(1, 2);
	const void *msgv[] = {&o};
	uint16_t sizes[] = {sizeof(o)};
	uint16_t lens[] = {sizeof(o) + 16};
	len = frame_by_hand(WIRE_VERSION_MINOR + 1, msgv, sizes, lens, 1, 0x5a);
	cr_assert(eq(int, decode(len, &count), WIRE_E_OK));
	_Alignas(8) uint8_t out[256];
	wire_builder_init(&b, out, sizeof(out), 1);
	cr_assert(eq(int, wire_builder_add(&b, msgs[0]), 0));
	cr_assert(eq(u32, wire_builder_finish(&b, NULL), 16 + sizeof(o)));
	cr_assert(eq(u16, ((const struct wire_msg_hdr *)(out + 16))->length, sizeof(o)));
}

/* Goal: the walk over a log entry's data (and over INGRESS tails) takes messages of any
 * minor of the major: longer ones are skipped to their end, never read past; a message
 * shorter than its struct, longer than WIRE_MSG_EXT_MAX allows, or not a whole number of
 * words stops the walk. Method: NEW_ORDER + 24 bytes, CANCEL; then each broken variant. */
Test(wire_version, entry_walk_skips_appended)
{
	_Alignas(8) uint8_t data[256] = {0};
	struct wire_new_order o = new_order(7, 7);
	struct wire_cancel c = cancel(7, 8, 7);
	memcpy(data, &o, sizeof(o));
	memset(data + sizeof(o), 0xee, 24); /* a newer minor's fields */
	((struct wire_msg_hdr *)(void *)data)->length = sizeof(o) + 24;
	memcpy(data + sizeof(o) + 24, &c, sizeof(c));
	uint32_t len = sizeof(o) + 24 + sizeof(c), pos = 0;
	enum wire_err err;
	const struct wire_msg_hdr *m = wire_msgs_next(data, len, &pos, &err);
	cr_assert(not(eq(ptr, (void *)m, NULL)));
	cr_assert(eq(u32, pos, sizeof(o) + 24));
	m = wire_msgs_next(data, len, &pos, &err);
	cr_assert(not(eq(ptr, (void *)m, NULL)));
	cr_assert(eq(u16, m->type, WIRE_CANCEL));
	cr_assert(eq(ptr, (void *)wire_msgs_next(data, len, &pos, &err), NULL));
	cr_assert(eq(int, err, WIRE_E_OK));
	uint16_t mlen = 0;
	cr_assert(eq(int, wire_msg_check(data, len, &mlen), WIRE_E_OK));
	cr_assert(eq(u16, mlen, sizeof(o) + 24));
	/* Declared longer than the entry holds: never read past it. */
	cr_assert(eq(int, wire_msg_check(data, sizeof(o) + 16, &mlen), WIRE_E_TRUNCATED));

	struct wire_msg_hdr *h = (struct wire_msg_hdr *)(void *)data;
	h->length = sizeof(o) + 20;
	cr_assert(eq(int, wire_msg_check(data, len, &mlen), WIRE_E_BAD_MSG_LENGTH));
	h->length = sizeof(o) - 8;
	cr_assert(eq(int, wire_msg_check(data, len, &mlen), WIRE_E_BAD_MSG_LENGTH));
	h->length = sizeof(o) + WIRE_MSG_EXT_MAX + 8;
	cr_assert(eq(int, wire_msg_check(data, sizeof(data), &mlen), WIRE_E_BAD_MSG_LENGTH));
	h->length = sizeof(o) + 24;
	pos = 0;
	h->length = sizeof(o) - 8;
	cr_assert(eq(ptr, (void *)wire_msgs_next(data, len, &pos, &err), NULL));
	cr_assert(eq(int, err, WIRE_E_BAD_MSG_LENGTH));
	cr_assert(eq(u32, pos, 0));

	/* An INGRESS from a gateway of any minor relays the client's message as it came. */
	h->length = sizeof(o) + 24;
	struct wire_ingress ing = {0};
	wire_hdr_init(&ing.hdr, WIRE_INGRESS, 1);
	ing.origin = 2;
	ing.tail_len = (uint16_t)(sizeof(o) + 24);
	struct wire_builder b;
	wire_builder_init(&b, frame, sizeof(frame), 2);
	cr_assert(eq(int, wire_builder_add_tail(&b, &ing, data, ing.tail_len), 0));
	uint32_t flen = wire_builder_finish(&b, NULL), count;
	cr_assert(eq(int, decode(flen, &count), WIRE_E_OK));
}

/* Goal: a deterministic service reads only its own struct: wire_msg_known gives a longer
 * message as the struct alone (hdr.length its size, every other byte the same) and any
 * other message as it is. Method: NEW_ORDER + 16 bytes; exact NEW_ORDER; an INGRESS. */
Test(wire_version, known_part_only)
{
	_Alignas(8) uint8_t buf[sizeof(struct wire_new_order) + 16];
	struct wire_new_order o = new_order(5, 6);
	memcpy(buf, &o, sizeof(o));
	memset(buf + sizeof(o), 0x77, 16);
	((struct wire_msg_hdr *)(void *)buf)->length = sizeof(buf);
	union wire_msg_any scratch;
	memset(&scratch, 0xcc, sizeof(scratch));
	const struct wire_msg_hdr *k = wire_msg_known((const void *)buf, &scratch);
	cr_assert(eq(ptr, (void *)k, (void *)&scratch));
	cr_assert(eq(int, memcmp(k, &o, sizeof(o)), 0));

	const struct wire_msg_hdr *same = wire_msg_known(&o.hdr, &scratch);
	cr_assert(eq(ptr, (void *)same, (void *)&o));

	struct {
		struct wire_ingress ing;
		struct wire_new_order o;
	} w;
	memset(&w, 0, sizeof(w));
	w.o = o;
	wire_hdr_init(&w.ing.hdr, WIRE_INGRESS, 1);
	w.ing.tail_len = sizeof(o);
	w.ing.hdr.length = sizeof(w);
	cr_assert(eq(ptr, (void *)wire_msg_known(&w.ing.hdr, &scratch), (void *)&w));
	cr_assert(ge(u64, sizeof(scratch), sizeof(struct wire_routing_config)));
}

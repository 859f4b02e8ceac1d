/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the frame decoder (common/wire.c).
 *
 * Properties: the decoder never crashes or reads past its input (ASan), whatever the bytes;
 * a frame of our own minor it accepts re-encodes to exactly the same bytes through the
 * builder (so decode and encode agree on every field and length); a frame of a neighbouring
 * minor re-encodes as ours, the same messages with what a newer minor appended left out
 * (docs/wire.md, "Versions"); entry data inside AppendEntries walks cleanly.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static _Alignas(8) uint8_t in[WIRE_FRAME_MAX + 64];
static _Alignas(8) uint8_t out[WIRE_FRAME_MAX + 64];

static void
walk_entries(const struct wire_append_entries *ae)
{
	const uint8_t *tail = (const uint8_t *)(ae + 1);
	uint32_t pos = 0;
	for (uint32_t i = 0; i < ae->entry_count; i++) {
		struct wire_entry_hdr e;
		CHECK(pos + sizeof(e) <= ae->tail_len);
		memcpy(&e, tail + pos, sizeof(e));
		pos += (uint32_t)sizeof(e);
		CHECK(pos + e.data_len <= ae->tail_len);
		/* Entry data may legitimately be non-message bytes for the fuzzer; walk it as
		 * messages and require only that the walker stops cleanly. */
		uint32_t mpos = 0;
		enum wire_err err;
		while (wire_msgs_next(tail + pos, e.data_len, &mpos, &err) != NULL)
			CHECK(mpos <= e.data_len);
		pos += e.data_len;
	}
	CHECK(pos == ae->tail_len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct wire_key key = {.k0 = 0x0706050403020100, .k1 = 0x0f0e0d0c0b0a0908};
	const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];
	uint32_t count = 0, sender = 0;

	if (size > WIRE_FRAME_MAX)
		return 0;
	memcpy(in, data, size);

	/* Keyed decode must never crash either. */
	(void)wire_frame_decode(in, size, &key, msgs, WIRE_FRAME_MSGS_MAX, &count, &sender);

	enum wire_err err =
		wire_frame_decode(in, size, NULL, msgs, WIRE_FRAME_MSGS_MAX, &count, &sender);
	if (err != WIRE_E_OK) {
		CHECK(count == 0);
		return 0;
	}
	CHECK(count >= 1 && count <= WIRE_FRAME_MSGS_MAX);

	struct wire_builder b;
	wire_builder_init(&b, out, sizeof(out), sender);
	for (uint32_t i = 0; i < count; i++) {
		CHECK(wire_type_size(msgs[i]->type) != 0);
		if (msgs[i]->type == WIRE_APPEND_ENTRIES)
			walk_entries((const struct wire_append_entries *)msgs[i]);
		CHECK(wire_builder_add(&b, msgs[i]) == 0);
	}
	uint32_t len = wire_builder_finish(&b, NULL);
	if (wire_frame_minor(in, size) == WIRE_VERSION_MINOR) {
		CHECK(len == size);
		CHECK(memcmp(in, out, size) == 0);
		return 0;
	}
	/* Another minor: ours decodes again, message by message the same up to the struct. */
	const struct wire_msg_hdr *again[WIRE_FRAME_MSGS_MAX];
	uint32_t count2 = 0, sender2 = 0;
	CHECK(wire_frame_decode(out, len, NULL, again, WIRE_FRAME_MSGS_MAX, &count2, &sender2) ==
	      WIRE_E_OK);
	CHECK(count2 == count);
	CHECK(sender2 == sender);
	for (uint32_t i = 0; i < count; i++) {
		uint16_t fixed = wire_type_size(msgs[i]->type);
		CHECK(again[i]->type == msgs[i]->type);
		CHECK(again[i]->length <= msgs[i]->length);
		CHECK(memcmp((const uint8_t *)again[i] + sizeof(struct wire_msg_hdr),
			     (const uint8_t *)msgs[i] + sizeof(struct wire_msg_hdr),
			     fixed - sizeof(struct wire_msg_hdr)) == 0);
	}
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * e2e_frame: print one wire frame as hex, built with the real codec (common/wire.h), for the
 * end-to-end tests to send. The tests derive the malformed variants from these bytes.
 *
 *   e2e_frame KIND [--key HEX32] [--sender N] [--seq N] [--shard N]
 *   KIND: order   one NEW_ORDER (class gateway)
 *         raft    one TIMEOUT_NOW for --shard (class shard)
 *         mixed   NEW_ORDER + TIMEOUT_NOW (two routes: refused as mixed)
 *         orders  --seq NEW_ORDERs in one frame
 *         badtype a NEW_ORDER whose type is patched to an unknown one before sealing, so
 *                 the MAC is right and the decoder must refuse the message itself
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"

static void
order(struct wire_new_order *o, uint64_t seq)
{
	memset(o, 0, sizeof(*o));
	wire_hdr_init(&o->hdr, WIRE_NEW_ORDER, 0);
	o->user = 1000 + seq % 7;
	o->cl_ord_id = seq;
	o->symbol = 1;
	o->side = WIRE_SIDE_BUY;
	o->ord_type = WIRE_ORD_LIMIT;
	o->tif = WIRE_TIF_GTC;
	o->px = 100;
	o->qty = 10;
}

int
main(int argc, char **argv)
{
	static uint64_t buf[WIRE_FRAME_MAX / 8];
	struct wire_key key = { 0, 0 };
	uint32_t sender = 77;
	uint64_t seq = 1;
	uint16_t shard = 1;

	if (argc < 2) {
		fprintf(stderr, "usage: e2e_frame order|raft|mixed|orders [--key HEX32] "
				"[--sender N] [--seq N] [--shard N]\n");
		return 2;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--key") && wire_key_parse_hex(argv[i + 1], &key) == 0)
			continue;
		if (!strcmp(argv[i], "--sender"))
			sender = (uint32_t)strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--seq"))
			seq = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--shard"))
			shard = (uint16_t)strtoul(argv[i + 1], NULL, 0);
		else {
			fprintf(stderr, "e2e_frame: bad option %s\n", argv[i]);
			return 2;
		}
	}

	struct wire_builder b;
	struct wire_new_order o;
	struct wire_timeout_now t;
	memset(&t, 0, sizeof(t));
	wire_hdr_init(&t.hdr, WIRE_TIMEOUT_NOW, shard);
	t.term = 5;
	t.leader = 2;

	wire_builder_init(&b, buf, sizeof(buf), sender);
	if (!strcmp(argv[1], "order")) {
		order(&o, seq);
		wire_builder_add(&b, &o);
	} else if (!strcmp(argv[1], "raft")) {
		wire_builder_add(&b, &t);
	} else if (!strcmp(argv[1], "mixed")) {
		order(&o, seq);
		wire_builder_add(&b, &o);
		wire_builder_add(&b, &t);
	} else if (!strcmp(argv[1], "orders")) {
		for (uint64_t i = 0; i < seq; i++) {
			order(&o, i + 1);
			if (wire_builder_add(&b, &o) != 0)
				break;
		}
	} else if (!strcmp(argv[1], "badtype")) {
		order(&o, seq);
		wire_builder_add(&b, &o);
	} else {
		fprintf(stderr, "e2e_frame: unknown kind %s\n", argv[1]);
		return 2;
	}
	uint32_t len;
	if (!strcmp(argv[1], "badtype")) {
		/* Seal by hand after the patch: the builder refuses unknown types. */
		len = wire_builder_finish(&b, NULL);
		struct wire_frame_hdr *fh = (struct wire_frame_hdr *)buf;
		struct wire_msg_hdr *mh = (struct wire_msg_hdr *)(fh + 1);
		mh->type = 200;
		if (key.k0 | key.k1) {
			fh->flags |= WIRE_FRAME_F_MAC;
			fh->length = len + WIRE_MAC_SIZE;
			wire_siphash128(&key, buf, len, (uint8_t *)buf + len);
			len += WIRE_MAC_SIZE;
		}
	} else {
		len = wire_builder_finish(&b, (key.k0 | key.k1) ? &key : NULL);
	}
	const uint8_t *p = (const uint8_t *)buf;
	for (uint32_t i = 0; i < len; i++)
		printf("%02x", p[i]);
	printf("\n");
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Writes the seed corpus for fuzz_wire: one valid frame per message family, so the fuzzer
 * starts from inputs that pass the header checks. Usage: fuzz-seeds DIR */
#include <stdio.h>
#include <string.h>

#include "common/wire.h"

static _Alignas(8) uint8_t buf[WIRE_FRAME_MAX];

static void
save(const char *dir, const char *name, uint32_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (f == NULL || fwrite(buf, 1, len, f) != len) {
		perror(path);
		return;
	}
	fclose(f);
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	struct wire_builder b;

	struct wire_new_order o = {0};
	wire_hdr_init(&o.hdr, WIRE_NEW_ORDER, 1);
	o.user = 7, o.cl_ord_id = 1, o.symbol = 1, o.side = WIRE_SIDE_BUY;
	o.ord_type = WIRE_ORD_LIMIT, o.tif = WIRE_TIF_GTC, o.px = 100, o.qty = 5;
	struct wire_cancel c = {0};
	wire_hdr_init(&c.hdr, WIRE_CANCEL, 1);
	c.user = 7, c.cl_ord_id = 2, c.orig_cl_ord_id = 1;
	wire_builder_init(&b, buf, sizeof(buf), 9);
	wire_builder_add(&b, &o);
	wire_builder_add(&b, &c);
	save(argv[1], "orders", wire_builder_finish(&b, NULL));

	struct wire_me_event ev = {0};
	wire_hdr_init(&ev.hdr, WIRE_ME_EVENT, 1);
	ev.seq = 1, ev.event = WIRE_EV_FILL, ev.side = WIRE_SIDE_SELL, ev.liquidity = 1;
	struct wire_submit s = {0};
	wire_hdr_init(&s.hdr, WIRE_SUBMIT, 2);
	s.oid = wire_oid_make(1, 7, 1), s.side = WIRE_SIDE_BUY, s.ord_type = WIRE_ORD_MARKET;
	s.tif = WIRE_TIF_IOC, s.quote_qty = 1000;
	wire_builder_init(&b, buf, sizeof(buf), 2);
	wire_builder_add(&b, &s);
	wire_builder_add(&b, &ev);
	save(argv[1], "me", wire_builder_finish(&b, NULL));

	_Alignas(8) uint8_t tail[sizeof(struct wire_entry_hdr) + sizeof(o)];
	struct wire_entry_hdr e = {.term = 1, .time_ns = 5, .data_len = sizeof(o), .kind = 1};
	memcpy(tail, &e, sizeof(e));
	memcpy(tail + sizeof(e), &o, sizeof(o));
	struct wire_append_entries ae = {0};
	wire_hdr_init(&ae.hdr, WIRE_APPEND_ENTRIES, 1);
	ae.term = 1, ae.entry_count = 1, ae.tail_len = sizeof(tail);
	struct wire_request_vote rv = {0};
	wire_hdr_init(&rv.hdr, WIRE_REQUEST_VOTE, 1);
	rv.hdr.flags = WIRE_VOTE_F_PRE, rv.term = 2;
	wire_builder_init(&b, buf, sizeof(buf), 3);
	wire_builder_add_tail(&b, &ae, tail, sizeof(tail));
	wire_builder_add(&b, &rv);
	save(argv[1], "raft", wire_builder_finish(&b, NULL));

	struct wire_hydrate_user hu = {0};
	wire_hdr_init(&hu.hdr, WIRE_HYDRATE_USER, 1);
	hu.status = WIRE_HYD_OK, hu.state.user = 7, hu.state.balance_count = 1;
	hu.state.balances[0].asset = 1, hu.state.balances[0].total = 100;
	struct wire_routing_config rc = {0};
	wire_hdr_init(&rc.hdr, WIRE_ROUTING_CONFIG, 1);
	rc.epoch = 1, rc.shard_count = 1, rc.shards[0].shard = 1;
	rc.shards[0].state = WIRE_SHARD_ACTIVE;
	wire_builder_init(&b, buf, sizeof(buf), 4);
	wire_builder_add(&b, &hu);
	wire_builder_add(&b, &rc);
	save(argv[1], "admin", wire_builder_finish(&b, NULL));
	return 0;
}

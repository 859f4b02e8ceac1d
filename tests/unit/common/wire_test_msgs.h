/* SPDX-License-Identifier: Apache-2.0 */
/* Messages the wire unit tests build (test_wire.c, test_wire_version.c). */
#ifndef OMSD_TESTS_UNIT_COMMON_WIRE_TEST_MSGS_H
#define OMSD_TESTS_UNIT_COMMON_WIRE_TEST_MSGS_H

#include "common/wire.h"

/* A valid limit buy of user for symbol 7, clientOrderId cl, to OMS shard 3. */
static inline struct wire_new_order
new_order(uint64_t user, uint64_t cl)
{
	struct wire_new_order m = {0};
	wire_hdr_init(&m.hdr, WIRE_NEW_ORDER, 3);
	m.user = user;
	m.cl_ord_id = cl;
	m.symbol = 7;
	m.side = WIRE_SIDE_BUY;
	m.ord_type = WIRE_ORD_LIMIT;
	m.tif = WIRE_TIF_GTC;
	m.px = 10000;
	m.qty = 5;
	return m;
}

#endif

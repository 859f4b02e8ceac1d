/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One order's life as the OMS benches drive it (oms_bench, app/snapshot_stall): the
 * client's NEW_ORDER (a GTC limit of 10 at 1000) and the ME's ACCEPTED, FILL (all of it,
 * maker side) and DONE. The caller sets user, clientOrderId and orderId per order.
 */
#ifndef OMSD_BENCH_OMS_MSGS_H
#define OMSD_BENCH_OMS_MSGS_H

#include <stdint.h>
#include <string.h>

#include "common/wire.h"

struct oms_bench_msgs {
	struct wire_new_order no;  /* the client's order */
	struct wire_me_event acc;  /* the ME's answers to it */
	struct wire_me_event fill;
	struct wire_me_event done;
};

static inline void
oms_bench_msgs_init(struct oms_bench_msgs *m, uint32_t symbol)
{
	memset(m, 0, sizeof(*m));
	m->no.hdr.type = WIRE_NEW_ORDER;
	m->no.hdr.length = sizeof(m->no);
	m->no.symbol = symbol;
	m->no.ord_type = WIRE_ORD_LIMIT;
	m->no.tif = WIRE_TIF_GTC;
	m->no.px = 1000;
	m->no.qty = 10;
	struct wire_me_event *evs[3] = { &m->acc, &m->fill, &m->done };
	static const uint8_t kinds[3] = { WIRE_EV_ACCEPTED, WIRE_EV_FILL, WIRE_EV_DONE };
	for (int i = 0; i < 3; i++) {
		evs[i]->hdr.type = WIRE_ME_EVENT;
		evs[i]->hdr.length = sizeof(*evs[i]);
		evs[i]->symbol = symbol;
		evs[i]->event = kinds[i];
	}
	m->fill.px = 1000;
	m->fill.qty = 10;
	m->fill.notional = 10000;
	m->fill.liquidity = 2;
}

#endif /* OMSD_BENCH_OMS_MSGS_H */

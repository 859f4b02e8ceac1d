/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The messages the OMS benches drive (oms_bench, app/snapshot_stall): the symbol they
 * trade (base, quote, fees 2 and 5 bps), a user's hydration with both assets funded, and
 * one order's life: the client's NEW_ORDER (a GTC limit of 10 at 1000) and the ME's FILL
 * (all of it, as the taker: the order's first event and its last, so it says the ME took it,
 * WIRE_EV_F_ENTERED, and that it is done, WIRE_EV_F_DONE) — or, for an order left open, its
 * RESTED (entered, all 10 at the order's price). The caller sets the user (and for a
 * hydrate-ahead a fresh claim epoch: docs/fencing.md), clientOrderId and orderId.
 */
#ifndef OMSD_BENCH_OMS_MSGS_H
#define OMSD_BENCH_OMS_MSGS_H

#include <stdint.h>
#include <string.h>

#include "common/wire.h"

struct oms_bench_msgs {
	struct wire_new_order no;  /* the client's order */
	struct wire_me_event fill; /* the ME's answer to it: filled at once */
	struct wire_me_event rest; /* or: it rests */
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
	struct wire_me_event *evs[2] = { &m->fill, &m->rest };
	static const uint8_t kinds[2] = { WIRE_EV_FILL, WIRE_EV_RESTED };
	for (int i = 0; i < 2; i++) {
		evs[i]->hdr.type = WIRE_ME_EVENT;
		evs[i]->hdr.length = sizeof(*evs[i]);
		evs[i]->symbol = symbol;
		evs[i]->event = kinds[i];
	}
	m->fill.hdr.flags = WIRE_EV_F_ENTERED | WIRE_EV_F_DONE;
	m->fill.px = 1000;
	m->fill.qty = 10;
	m->fill.notional = 10000;
	m->fill.liquidity = 2;
	m->rest.hdr.flags = WIRE_EV_F_ENTERED;
	m->rest.px = m->no.px;
	m->rest.qty = m->rest.leaves_qty = m->no.qty;
}

static inline void
oms_bench_symbol_init(struct wire_symbol_config *sc, uint32_t symbol, uint32_t base,
		      uint32_t quote)
{
	memset(sc, 0, sizeof(*sc));
	sc->hdr.type = WIRE_SYMBOL_CONFIG;
	sc->hdr.length = sizeof(*sc);
	sc->symbol = symbol;
	sc->base_asset = base;
	sc->quote_asset = quote;
	sc->status = WIRE_SYM_TRADING;
	sc->tick = 1;
	sc->lot = 1;
	sc->base_unit = 1;
	sc->maker_fee_bps = 2;
	sc->taker_fee_bps = 5;
}

static inline void
oms_bench_hydrate_init(struct wire_hydrate_user *hu, uint32_t base, uint32_t quote)
{
	memset(hu, 0, sizeof(*hu));
	hu->hdr.type = WIRE_HYDRATE_USER;
	hu->hdr.length = sizeof(*hu);
	hu->status = WIRE_HYD_OK;
	hu->state.version = 1;
	hu->state.balance_count = 2;
	hu->state.balances[0] = (struct wire_balance){ base, 0, INT64_C(1) << 50 };
	hu->state.balances[1] = (struct wire_balance){ quote, 0, INT64_C(1) << 50 };
}

#endif /* OMSD_BENCH_OMS_MSGS_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The symbols the ME benches trade (me_bench, app/snapshot_stall): symbol s has base asset
 * s and quote asset 1000, tick, lot, min_qty and base unit 1, a reference price and a 10 %
 * price band around it, trading.
 */
#ifndef OMSD_BENCH_ME_SYMBOL_H
#define OMSD_BENCH_ME_SYMBOL_H

#include <stdint.h>
#include <string.h>

#include "common/wire.h"

static inline void
me_bench_symbol_init(struct wire_symbol_config *c, uint32_t symbol, int64_t ref_px)
{
	memset(c, 0, sizeof(*c));
	wire_hdr_init(&c->hdr, WIRE_SYMBOL_CONFIG, 0);
	c->symbol = symbol;
	c->base_asset = symbol;
	c->quote_asset = 1000;
	c->status = WIRE_SYM_TRADING;
	c->tick = 1;
	c->lot = 1;
	c->min_qty = 1;
	c->base_unit = 1;
	c->ref_px = ref_px;
	c->band_bps = 1000;
}

#endif /* OMSD_BENCH_ME_SYMBOL_H */

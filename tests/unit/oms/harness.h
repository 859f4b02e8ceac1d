/* SPDX-License-Identifier: Apache-2.0 */
/* Test harness for oms: one shard in malloc'd memory, a capturing sink, message builders. */
#ifndef OMSD_TESTS_UNIT_OMS_HARNESS_H
#define OMSD_TESTS_UNIT_OMS_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/prng.h"
#include "oms/oms_int.h"

#define H_OUT_MAX 8192
#define H_MSG_MAX 1024

struct h_out {
	_Alignas(8) uint8_t msg[H_MSG_MAX];
	enum wire_dest dest;
};

struct h {
	struct oms *oms;
	void *mem;
	struct oms_limits lim;
	uint64_t now;             /* cluster time used by h_apply */
	struct h_out *out;        /* egress of the last h_apply/h_tick */
	uint32_t n;               /* messages in out */
	uint64_t total;           /* messages ever emitted */
	struct svc_sink sink;
	uint64_t me_seq[16];      /* next seq of hand-made events, per ME shard */
	bool keep;                /* don't clear out between applies */
};

/* Symbols used by most tests. */
#define A_BTC 1
#define A_USD 2
#define A_ETH 3
#define S_BTCUSD 1 /* base_unit 100, tick 10, lot 10, maker 2 taker 5, ME shard 0 */
#define S_ETHUSD 2 /* base_unit 1, tick 1, lot 1, maker -1 taker 4, ME shard 1 */

void h_limits(struct oms_limits *l);
void h_init(struct h *h, const struct oms_limits *l);
void h_fini(struct h *h);
void h_apply(struct h *h, const void *msg);
void h_tick(struct h *h);
void h_clear(struct h *h);
uint32_t h_count(const struct h *h, uint16_t type);
const void *h_get(const struct h *h, uint16_t type, uint32_t nth); /* NULL if absent */
enum wire_dest h_dest(const struct h *h, uint16_t type, uint32_t nth);

void h_symbol(struct h *h, uint32_t symbol, uint32_t base, uint32_t quote, uint16_t me_shard,
	      int64_t tick, int64_t lot, int64_t base_unit, int16_t maker, int16_t taker);
void h_std_symbols(struct h *h);
/* HydrateUser OK with up to two balances (asset 0 = none). */
void h_hydrate(struct h *h, uint64_t user, uint64_t epoch, uint32_t a1, int64_t t1, uint32_t a2,
	       int64_t t2);
void h_hydrate_status(struct h *h, uint64_t user, uint8_t status, uint16_t owner);
/* HydrateUser OK with this state (a row's: floors, windows, versions), a fresh epoch. */
void h_hydrate_state(struct h *h, const struct wire_user_state *st);
/* A resident user with funds in BTC, USD and ETH. */
void h_user(struct h *h, uint64_t user, int64_t btc, int64_t usd);
void h_new_order_msg(struct wire_new_order *m, uint64_t user, uint64_t cl, uint32_t symbol,
		     uint8_t side, uint8_t type, uint8_t tif, int64_t px, int64_t qty,
		     int64_t quote_qty);
void h_limit(struct h *h, uint64_t user, uint64_t cl, uint32_t symbol, uint8_t side, int64_t px,
	     int64_t qty);
void h_cancel(struct h *h, uint64_t user, uint64_t cl, uint64_t orig);
void h_amend(struct h *h, uint64_t user, uint64_t cl, uint64_t orig, int64_t qty);
void h_replace(struct h *h, uint64_t user, uint64_t cl, uint64_t orig, int64_t px, int64_t qty);
void h_transfer(struct h *h, uint64_t user, uint64_t id, uint32_t asset, int64_t amount);
void h_flush(struct h *h, uint64_t user, uint64_t epoch, uint8_t status, uint64_t version);
/* An ME event with the next seq of the symbol's ME shard. */
void h_event_msg(struct h *h, struct wire_me_event *e, uint64_t seq, struct wire_oid oid,
		 uint32_t symbol, uint8_t event);
void h_ev(struct h *h, struct wire_oid oid, uint32_t symbol, uint8_t event, int64_t px,
	  int64_t qty, int64_t leaves, uint8_t liquidity);
void h_ev_contra(struct h *h, struct wire_oid oid, uint32_t symbol, uint8_t event,
		 struct wire_oid contra, uint8_t cause, uint16_t reason, int64_t qty,
		 int64_t leaves);
struct wire_oid h_oid(const struct h *h, uint64_t user, uint64_t seq);
struct wire_oid h_last_ack_oid(const struct h *h);
uint16_t h_last_nak(const struct h *h);
int64_t h_total(const struct h *h, uint64_t user, uint32_t asset);
int64_t h_reserved(const struct h *h, uint64_t user, uint32_t asset);
uint32_t h_status(const struct h *h, uint64_t user);
uint64_t h_epoch(const struct h *h, uint64_t user);
uint64_t h_ctr(const struct h *h, enum oms_counter c);

#define SEC UINT64_C(1000000000)

#endif

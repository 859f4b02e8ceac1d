/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/check.h"
#include "common/prng.h"
#include "fuzz_state.h"

#define SEC UINT64_C(1000000000)
#define QUEUE_MAX 4096
#define MSG_MAX 1024

void
fz_me_limits(struct me_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->shard = 0;
	l->streams_max = 4;
	l->symbols_max = 8;
	l->orders_max = 256;
	l->users_max = 64;
	l->levels_max = 128;
	l->levels_side_max = 32;
	l->gtd_max = 64;
	l->events_max = 64;
	l->events_reserve = 16;
	l->dedup_ttl_ns = SEC;
}

void
fz_oms_limits(struct oms_limits *l)
{
	oms_limits_default(l);
	l->me_shards_max = 2;
	l->users_max = 32;
	l->flush_headroom = 8;
	l->assets_per_user = 4;
	l->orders_max = 256;
	l->orders_per_user = 16;
	l->inflight_max = 128;
	l->parked_max = 32;
	l->parked_per_user = 4;
	l->dedup_per_user = 4;
	l->symbols_max = 8;
	l->fee_assets_max = 8;
	l->kill_users_max = 8;
	l->held_max = 8;
	l->releases_max = 16;
	l->ttl_ns = 5 * SEC;
	l->stream_ack_every = 8;
}

static void *
mem_for(void **slot, size_t fp)
{
	if (*slot == NULL) {
		*slot = aligned_alloc(64, (fp + 63) & ~(size_t)63);
		CHECK(*slot != NULL);
	}
	return *slot;
}

static struct me *me_slot[2];

struct me *
fz_me_new(int slot)
{
	static void *mem[2];
	struct me_limits l;
	fz_me_limits(&l);
	CHECK(slot == 0 || slot == 1);
	CHECK(me_init(&me_slot[slot], mem_for(&mem[slot], me_footprint(&l)), &l) == 0);
	return me_slot[slot];
}

struct me *
fz_me_last(int slot)
{
	CHECK((slot == 0 || slot == 1) && me_slot[slot] != NULL);
	return me_slot[slot];
}

struct oms *
fz_oms_new(int slot)
{
	static void *mem[2];
	struct oms_limits l;
	struct oms *oms;
	fz_oms_limits(&l);
	CHECK(slot == 0 || slot == 1);
	CHECK(oms_init(&oms, mem_for(&mem[slot], oms_footprint(&l)), &l) == 0);
	return oms;
}

static void
null_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)dest;
	(void)msg;
}

struct svc_sink fz_null_sink = {.ctx = NULL, .emit = null_emit};

void
fz_me_snapshot_fix(uint8_t *buf, size_t len)
{
	/* me_snapshot.c: magic 8, version 4, reserved 4, body_len 8, checksum 8, ..., 88 bytes */
	if (len < 88)
		return;
	uint64_t sum = XXH3_64bits(buf + 88, len - 88);
	memcpy(buf + 24, &sum, sizeof(sum));
}

/* ---- the seed market: OMS egress to the ME and ME events back, through one queue ---- */

struct queue {
	_Alignas(8) uint8_t msg[QUEUE_MAX][MSG_MAX];
	enum wire_dest dest[QUEUE_MAX];
	uint32_t head, tail;
};

static struct queue *q;

static void
enqueue(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	if (dest != WIRE_DEST_ME && dest != WIRE_DEST_OMS)
		return; /* clients, persister and admin replies go nowhere here */
	CHECK(q->tail - q->head < QUEUE_MAX && msg->length <= MSG_MAX);
	memcpy(q->msg[q->tail % QUEUE_MAX], msg, msg->length);
	q->dest[q->tail % QUEUE_MAX] = dest;
	q->tail++;
}

static struct svc_sink queue_sink = {.ctx = NULL, .emit = enqueue};

static void
pump(struct oms *oms, struct me *me, uint64_t now)
{
	while (q->head != q->tail) {
		const struct wire_msg_hdr *m = (const void *)q->msg[q->head % QUEUE_MAX];
		enum wire_dest d = q->dest[q->head % QUEUE_MAX];
		q->head++;
		if (d == WIRE_DEST_ME)
			me_apply(me, now, m, &queue_sink);
		else
			oms_apply(oms, now, m, &queue_sink);
	}
}

static void
symbol(struct oms *oms, struct me *me, uint64_t now, uint32_t sym, uint32_t base, int64_t tick,
       int64_t lot)
{
	struct wire_symbol_config m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_SYMBOL_CONFIG, 0);
	m.symbol = sym;
	m.base_asset = base;
	m.quote_asset = 2;
	m.me_shard = 0;
	m.status = WIRE_SYM_TRADING;
	m.tick = tick;
	m.lot = lot;
	m.base_unit = 1;
	m.maker_fee_bps = 2;
	m.taker_fee_bps = 5;
	m.map_version = 1;
	oms_apply(oms, now, &m.hdr, &queue_sink);
	me_apply(me, now, &m.hdr, &queue_sink);
}

static void
hydrate(struct oms *oms, uint64_t now, uint64_t user, uint64_t epoch)
{
	struct wire_hydrate_user m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_HYDRATE_USER, 0);
	m.epoch = epoch;
	m.status = WIRE_HYD_OK;
	m.state.user = user;
	m.state.version = 1;
	m.state.balance_count = 3;
	m.state.balances[0] = (struct wire_balance){.asset = 1, .total = 1000000};
	m.state.balances[1] = (struct wire_balance){.asset = 2, .total = 100000000};
	m.state.balances[2] = (struct wire_balance){.asset = 3, .total = 1000000};
	oms_apply(oms, now, &m.hdr, &queue_sink);
}

void
fz_market(struct oms *oms, struct me *me, uint32_t steps, uint64_t seed, uint64_t *now_ns)
{
	static struct queue queue;
	q = &queue;
	q->head = q->tail = 0;
	struct prng p;
	prng_seed(&p, seed);
	uint64_t now = SEC;
	symbol(oms, me, now, FZ_SYM_A, 1, 10, 1);
	symbol(oms, me, now, FZ_SYM_B, 3, 1, 5);
	for (uint64_t u = 1; u <= 6; u++)
		hydrate(oms, now, u, u);
	uint64_t cl = 1;
	for (uint32_t i = 0; i < steps; i++) {
		now += SEC / 100;
		uint64_t user = 1 + prng_below(&p, 6);
		uint32_t r = (uint32_t)prng_below(&p, 100);
		if (r < 60) {
			struct wire_new_order o;
			memset(&o, 0, sizeof(o));
			wire_hdr_init(&o.hdr, WIRE_NEW_ORDER, 0);
			o.user = user;
			o.cl_ord_id = cl++;
			o.symbol = r < 40 ? FZ_SYM_A : FZ_SYM_B;
			o.side = prng_below(&p, 2) ? WIRE_SIDE_BUY : WIRE_SIDE_SELL;
			o.ord_type = WIRE_ORD_LIMIT;
			o.tif = r % 7 == 0 ? WIRE_TIF_IOC : WIRE_TIF_GTC;
			if (o.symbol == FZ_SYM_B && r % 5 == 0) {
				o.tif = WIRE_TIF_GTD;
				o.expire_ns = now + SEC;
			}
			o.px = o.symbol == FZ_SYM_A ? 1000 + 10 * (int64_t)prng_below(&p, 5) :
						      100 + (int64_t)prng_below(&p, 5);
			o.qty = o.symbol == FZ_SYM_A ? 1 + (int64_t)prng_below(&p, 5) :
						       5 * (1 + (int64_t)prng_below(&p, 3));
			oms_apply(oms, now, &o.hdr, &queue_sink);
		} else if (r < 80 && cl > 1) {
			struct wire_cancel c;
			memset(&c, 0, sizeof(c));
			wire_hdr_init(&c.hdr, WIRE_CANCEL, 0);
			c.user = user;
			c.cl_ord_id = cl++;
			c.orig_cl_ord_id = 1 + prng_below(&p, cl - 1);
			oms_apply(oms, now, &c.hdr, &queue_sink);
		} else if (r < 90) {
			struct wire_new_order o;
			memset(&o, 0, sizeof(o));
			wire_hdr_init(&o.hdr, WIRE_NEW_ORDER, 0);
			o.user = user;
			o.cl_ord_id = cl++;
			o.symbol = FZ_SYM_A;
			o.side = WIRE_SIDE_SELL;
			o.ord_type = WIRE_ORD_MARKET;
			o.tif = WIRE_TIF_IOC;
			o.qty = 2;
			oms_apply(oms, now, &o.hdr, &queue_sink);
		} else {
			oms_tick(oms, now, &queue_sink);
			me_tick(me, now, &queue_sink);
		}
		pump(oms, me, now);
	}
	*now_ns = now;
}

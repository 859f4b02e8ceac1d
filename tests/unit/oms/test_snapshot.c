/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot / restore / state hash: byte-exact, deterministic, full state (sagas,
 * reservations, parked messages, held events, routing), and a restored shard behaves
 * exactly like the original. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct h H, G;

static void
setup(void)
{
	h_init(&H, NULL);
	h_init(&G, NULL);
}

static void
teardown(void)
{
	h_fini(&H);
	h_fini(&G);
}

TestSuite(oms_snapshot, .init = setup, .fini = teardown);

/* A state with every kind of record in it. */
static void
rich_state(struct h *h)
{
	h_std_symbols(h);
	h_user(h, 7, 1000000, 1000000);
	h_user(h, 8, 1000000, 1000000);
	h_user(h, 9, 5, 5);
	h_limit(h, 7, 1, S_BTCUSD, WIRE_SIDE_BUY, 20000, 100); /* pending */
	h_limit(h, 8, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 10);
	struct wire_oid o = h_last_ack_oid(h);
	h_ev(h, o, S_ETHUSD, WIRE_EV_ACCEPTED, 0, 0, 10, 0);
	h_ev(h, o, S_ETHUSD, WIRE_EV_RESTED, 10, 10, 10, 0); /* live */
	h_cancel(h, 8, 2, 1);                               /* modify in flight */
	struct wire_me_event e;
	h_event_msg(h, &e, h->me_seq[1] + 3, o, S_ETHUSD, WIRE_EV_FILL); /* held */
	e.qty = 1;
	e.px = 10;
	e.notional = 10;
	e.leaves_qty = 9;
	h_apply(h, &e);
	h_limit(h, 50, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1); /* parked, hydrating */
	h->now += 11 * SEC;
	h_tick(h); /* user 9 flushing */
	struct wire_kill_switch k;
	memset(&k, 0, sizeof(k));
	k.hdr.type = WIRE_KILL_SWITCH;
	k.hdr.length = sizeof(k);
	k.id = 1234;
	k.scope = WIRE_KILL_USER;
	k.engage = 1;
	h_apply(h, &k);
	struct wire_routing_config r;
	memset(&r, 0, sizeof(r));
	r.hdr.type = WIRE_ROUTING_CONFIG;
	r.hdr.length = sizeof(r);
	r.epoch = 3;
	r.shard_count = 1;
	r.shards[0] = (struct wire_route_shard){ 0, WIRE_SHARD_ACTIVE, 0 };
	r.pin_count = 1;
	r.pins[0].user = 555;
	r.pins[0].shard = 0;
	h_apply(h, &r);
}

static void *
take(const struct h *h, size_t *len)
{
	*len = oms_snapshot_size(h->oms);
	void *buf = malloc(*len);
	cr_assert(eq(sz, oms_snapshot(h->oms, buf, *len), *len));
	return buf;
}

/* Goal: snapshot → restore → snapshot is byte-identical and the hashes agree, with sagas,
 * reservations, parked messages, held events, flushes and routing in the state. */
Test(oms_snapshot, roundtrip_byte_exact)
{
	rich_state(&H);
	cr_assert(eq(u32, h_status(&H, 9), OMS_USER_FLUSHING));
	cr_assert(eq(u32, h_status(&H, 50), OMS_USER_HYDRATING));
	size_t len, len2;
	void *a = take(&H, &len);
	cr_assert(eq(int, oms_restore(G.oms, a, len), 0));
	void *b = take(&G, &len2);
	cr_assert(eq(sz, len, len2));
	cr_assert(memcmp(a, b, len) == 0);
	cr_assert(eq(u64, oms_state_hash(H.oms), oms_state_hash(G.oms)));
	cr_assert(eq(i64, h_reserved(&G, 7, A_USD), 20010));
	cr_assert(eq(u32, oms_inflight_count(G.oms), 2));
	cr_assert(eq(u64, oms_route_epoch(G.oms), 3));
	free(a);
	free(b);
}

/* Goal: a restored shard and the original, fed the same entries, emit identical egress and
 * reach identical state hashes (invariant 5). */
Test(oms_snapshot, restored_behaves_identically)
{
	rich_state(&H);
	size_t len;
	void *a = take(&H, &len);
	cr_assert(eq(int, oms_restore(G.oms, a, len), 0));
	free(a);
	G.now = H.now;
	memcpy(G.me_seq, H.me_seq, sizeof(G.me_seq));
	struct h *both[2] = { &H, &G };
	uint64_t hashes[2];
	uint32_t n[2];
	static uint8_t outs[2][64][H_MSG_MAX];
	for (int i = 0; i < 2; i++) {
		struct h *h = both[i];
		h->keep = true;
		h_clear(h);
		h_hydrate(h, 50, 2, A_USD, 100, 0, 0);
		h_limit(h, 7, 3, S_BTCUSD, WIRE_SIDE_SELL, 20000, 10);
		h_ev(h, h_oid(h, 7, 1), S_BTCUSD, WIRE_EV_ACCEPTED, 0, 0, 100, 0);
		h_ev(h, h_oid(h, 7, 1), S_BTCUSD, WIRE_EV_FILL, 20000, 100, 0, 2);
		h_ev(h, h_oid(h, 7, 1), S_BTCUSD, WIRE_EV_DONE, 0, 0, 0, 0);
		h_flush(h, 9, h_epoch(h, 9), WIRE_FLUSH_OK, 2);
		h_limit(h, 60, 1, S_ETHUSD, WIRE_SIDE_BUY, 10, 1);
		h->now += 20 * SEC;
		h_tick(h);
		hashes[i] = oms_state_hash(h->oms);
		n[i] = h->n;
		cr_assert(h->n <= 64);
		for (uint32_t k = 0; k < h->n; k++)
			memcpy(outs[i][k], h->out[k].msg, H_MSG_MAX);
	}
	cr_assert(eq(u32, n[0], n[1]));
	cr_assert(gt(u32, n[0], 5));
	for (uint32_t k = 0; k < n[0]; k++)
		cr_assert(memcmp(outs[0][k], outs[1][k],
				 ((const struct wire_msg_hdr *)(const void *)outs[0][k])->length) == 0,
			  "egress %u (%s) differs", k,
			  wire_type_name(((const struct wire_msg_hdr *)(const void *)outs[0][k])->type));
	cr_assert(eq(u64, hashes[0], hashes[1]));
}

/* Goal: a corrupt or truncated snapshot is refused -EINVAL and leaves an empty, consistent
 * state; a too-small buffer yields 0. */
Test(oms_snapshot, corrupt_refused)
{
	rich_state(&H);
	size_t len;
	uint8_t *a = take(&H, &len);
	cr_assert(eq(sz, oms_snapshot(H.oms, a, len - 1), 0));
	cr_assert(eq(int, oms_restore(G.oms, a, len - 1), -EINVAL));
	cr_assert(eq(u32, oms_resident_count(G.oms), 0));
	cr_assert(eq(int, oms_check_invariants(G.oms), 0));
	struct prng p;
	prng_seed(&p, 99);
	uint32_t refused = 0;
	for (int i = 0; i < 300; i++) {
		uint8_t *c = malloc(len);
		memcpy(c, a, len);
		size_t at = prng_below(&p, len);
		c[at] ^= (uint8_t)(1u << prng_below(&p, 8));
		int rc = oms_restore(G.oms, c, len);
		refused += rc != 0;
		cr_assert(eq(int, oms_check_invariants(G.oms), 0));
		free(c);
	}
	cr_assert(gt(u32, refused, 0));
	/* Different limits: refused. */
	struct h X;
	struct oms_limits l;
	h_limits(&l);
	l.users_max = 65;
	h_init(&X, &l);
	cr_assert(eq(int, oms_restore(X.oms, a, len), -EINVAL));
	h_fini(&X);
	free(a);
}

/* Goal: the hash moves with the state and is the same for the same history. */
Test(oms_snapshot, hash_tracks_state)
{
	rich_state(&H);
	rich_state(&G);
	cr_assert(eq(u64, oms_state_hash(H.oms), oms_state_hash(G.oms)));
	h_transfer(&H, 7, 1, A_USD, 1);
	cr_assert(oms_state_hash(H.oms) != oms_state_hash(G.oms));
}

/* Goal: the svc_ops adapter exposes the same service. */
Test(oms_snapshot, svc_ops)
{
	cr_assert_str_eq(oms_svc_ops.name, "oms");
	rich_state(&H);
	cr_assert(eq(u64, oms_svc_ops.state_hash(H.oms), oms_state_hash(H.oms)));
	cr_assert(eq(sz, oms_svc_ops.snapshot_size(H.oms), oms_snapshot_size(H.oms)));
	struct wire_tick t;
	t.hdr.type = WIRE_TICK;
	t.hdr.length = sizeof(t);
	t.hdr.shard = 0;
	t.hdr.flags = 0;
	oms_svc_ops.apply(H.oms, 1, H.now, &t.hdr, &H.sink);
	oms_svc_ops.tick(H.oms, 2, H.now + SEC, &H.sink);
}

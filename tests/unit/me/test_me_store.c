/* SPDX-License-Identifier: Apache-2.0 */
/*
 * me storage: the record and user slabs' free lists, and the chained tables (oid index, user
 * table) under linear hashing — the buckets in use follow the entries, not the capacity, so
 * a small book stays in a few cache lines of them in an engine of any size (me_int.h,
 * struct me_lhash). fx_check_tables walks both tables after each step that matters.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "me_fixture.h"

TestSuite(me_store, .init = fx_setup, .fini = fx_fini);

/* An engine with room for `orders` records and as many users. */
static struct me *
engine(uint32_t orders)
{
	struct me_limits l = fx_limits;
	l.orders_max = orders;
	l.users_max = orders;
	return fx_new_engine(&l);
}

static uint32_t
alloc(struct me *e, uint64_t user, uint64_t seq)
{
	uint32_t oi = me_order_alloc(e, fx_oid(user, seq));
	cr_assert_neq(oi, ME_NIL);
	return oi;
}

/* Goal: a freed record is the next one handed out (LIFO: the hottest first), and fresh slots
 * come only when no freed one is left. Method: take three, free the second then the first:
 * the next takes the first's slot, then the second's, then a fresh one. */
Test(me_store, records_reused_most_recent_first)
{
	struct me *e = engine(64);
	uint32_t a = alloc(e, 1, 1), b = alloc(e, 1, 2), c = alloc(e, 1, 3);
	cr_assert(a == 0 && b == 1 && c == 2);
	me_order_release(e, b);
	me_order_release(e, a);
	cr_assert_eq(alloc(e, 2, 1), a);
	cr_assert_eq(alloc(e, 2, 2), b);
	cr_assert_eq(alloc(e, 2, 3), 3);
	cr_assert_eq(e->orders_hwm, 4);
	cr_assert_eq(me_order_find(e, fx_oid(1, 1)), ME_NIL);
	cr_assert_eq(me_order_find(e, fx_oid(1, 3)), c);
	cr_assert_eq(me_order_find(e, fx_oid(2, 2)), b);
	fx_check_tables(e);
}

/* Goal: a user slot freed when its last order leaves is the next one taken (LIFO), fresh
 * slots come from users_hwm only when none is free. Method: three users rest an order each;
 * user 2 then user 1 cancel (their slots freed); users 4, 5, 6 rest: 1's slot, 2's, fresh. */
Test(me_store, user_slots_reused_most_recent_first)
{
	const struct me_user *u0 = ME_CARR(fx_me, off_users, struct me_user);
	for (uint64_t user = 1; user <= 3; user++)
		fx_gtc(user, 1, WIRE_SIDE_BUY, 100, 1);
	cr_assert_eq(me_user_find(fx_me, 1) - u0, 0);
	cr_assert_eq(me_user_find(fx_me, 2) - u0, 1);
	cr_assert_eq(me_user_find(fx_me, 3) - u0, 2);
	fx_cancel(2, 2, 1);
	fx_cancel(1, 2, 1);
	cr_assert_null(me_user_find(fx_me, 1));
	cr_assert_null(me_user_find(fx_me, 2));
	fx_check_tables(fx_me);
	for (uint64_t user = 4; user <= 6; user++)
		fx_gtc(user, 1, WIRE_SIDE_BUY, 100, 1);
	cr_assert_eq(me_user_find(fx_me, 4) - u0, 0);
	cr_assert_eq(me_user_find(fx_me, 5) - u0, 1);
	cr_assert_eq(me_user_find(fx_me, 6) - u0, 3);
	cr_assert_eq(fx_me->users_hwm, 4);
	cr_assert_eq(me_user_find(fx_me, 3) - u0, 2);
}

/* Goal: the oid index grows one bucket per entry past one per bucket, and shrinks back when
 * the entries fall, whatever its capacity. Method: an engine for 65,536 records: 20,000
 * entries take exactly 20,000 buckets; down to 1,000 and 20,000 more replacements later, the
 * buckets are at most four per entry; every entry is found all along, none of the removed. */
Test(me_store, index_follows_entries, .timeout = 60)
{
	struct me *e = engine(65536);
	cr_assert_eq(e->oid_lh.max, 65536);
	cr_assert_eq(e->oid_lh.buckets, ME_LH_BUCKETS_MIN);
	static uint32_t live[20000];
	static uint64_t seq_of[20000];
	uint64_t seq = 0;
	for (uint32_t i = 0; i < 20000; i++) {
		seq_of[i] = ++seq;
		live[i] = alloc(e, 1 + seq % 97, seq);
		uint32_t want = i + 1 > ME_LH_BUCKETS_MIN ? i + 1 : ME_LH_BUCKETS_MIN;
		cr_assert_eq(e->oid_lh.buckets, want, "after %u inserts", i + 1);
	}
	fx_check_tables(e);
	/* Remove all but the last 1,000: the buckets shrink, two merges per removal. */
	for (uint32_t i = 0; i < 19000; i++)
		me_order_release(e, live[i]);
	cr_assert(e->oid_lh.buckets < 20000);
	fx_check_tables(e);
	for (uint32_t i = 0; i < 19000; i++)
		cr_assert_eq(me_order_find(e, fx_oid(1 + seq_of[i] % 97, seq_of[i])), ME_NIL);
	/* Churn at 1,000 entries: a removal, then an insert, 20,000 times. */
	uint32_t n = 1000;
	memmove(live, live + 19000, n * sizeof(live[0]));
	memmove(seq_of, seq_of + 19000, n * sizeof(seq_of[0]));
	uint64_t x = 12345;
	for (uint32_t k = 0; k < 20000; k++) {
		x = x * 6364136223846793005u + 1442695040888963407u;
		uint32_t j = (uint32_t)(x >> 33) % n;
		me_order_release(e, live[j]);
		seq_of[j] = ++seq;
		live[j] = alloc(e, 1 + seq % 97, seq);
	}
	cr_assert_eq(e->records_used, n);
	cr_assert(e->oid_lh.buckets >= n && e->oid_lh.buckets <= 4 * n, "%u buckets for %u entries",
		  e->oid_lh.buckets, n);
	for (uint32_t j = 0; j < n; j++)
		cr_assert_eq(me_order_find(e, fx_oid(1 + seq_of[j] % 97, seq_of[j])), live[j]);
	fx_check_tables(e);
}

/* Goal: the user table follows its users too: the fixture's engine (1,024 users) with 600
 * users resting one order each, then all but 50 gone, and churn. Method: rest, cancel, rest
 * again through the engine's API: 600 users take 600 buckets; the churn brings the buckets
 * down to about four per user (each removal below a quarter merges two, so the excess over
 * that halves every round). */
Test(me_store, user_table_follows_users)
{
	for (uint64_t user = 1; user <= 600; user++)
		fx_gtc(user, 1, WIRE_SIDE_BUY, 1000 - 10 * (int64_t)(user % 10), 1);
	cr_assert_eq(fx_me->users_used, 600);
	cr_assert_eq(fx_me->user_lh.buckets, 600);
	fx_check_tables(fx_me);
	for (uint64_t user = 1; user <= 550; user++)
		fx_cancel(user, 2, 1);
	fx_check_tables(fx_me);
	for (uint32_t round = 0; round < 10; round++) {
		for (uint64_t user = 1000; user < 1100; user++)
			fx_gtc(user, 10 + round, WIRE_SIDE_SELL, 2000, 1);
		for (uint64_t user = 1000; user < 1100; user++)
			fx_cancel(user, 20 + round, 10 + round);
	}
	cr_assert_eq(fx_me->users_used, 50);
	cr_assert(fx_me->user_lh.buckets <= 4 * 50 + 8, "%u buckets for 50 users",
		  fx_me->user_lh.buckets);
	for (uint64_t user = 551; user <= 600; user++)
		cr_assert_not_null(me_user_find(fx_me, user));
	cr_assert_null(me_user_find(fx_me, 1));
}

struct tagged {
	uint32_t tag;
	uint32_t user;
};

static int
by_tag(const void *a, const void *b)
{
	const struct tagged *x = a, *y = b;
	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	return x->user < y->user ? -1 : x->user > y->user;
}

/* Goal: two ids with the same 32-bit tag are told apart by the record's id, both found, and
 * removing either leaves the other. Method: search 400,000 ids for a tag collision (one is
 * all but certain past 77,000), index both among others of their bucket. */
Test(me_store, index_tag_collision)
{
	enum { N = 400000 };
	struct tagged *t = malloc(N * sizeof(*t));
	cr_assert_not_null(t);
	for (uint32_t i = 0; i < N; i++)
		t[i] = (struct tagged){.tag = me_oid_tag(fx_oid(i + 1, 7)), .user = i + 1};
	qsort(t, N, sizeof(*t), by_tag);
	uint32_t k = 0;
	while (k + 1 < N && t[k].tag != t[k + 1].tag)
		k++;
	cr_assert(k + 1 < N, "no tag collision among %u ids", N);
	struct wire_oid a = fx_oid(t[k].user, 7), b = fx_oid(t[k + 1].user, 7);
	free(t);
	cr_assert_eq(me_oid_tag(a), me_oid_tag(b));
	struct me *e = engine(1024);
	alloc(e, 99, 1);
	uint32_t ra = me_order_alloc(e, a);
	alloc(e, 99, 2);
	uint32_t rb = me_order_alloc(e, b);
	cr_assert_eq(me_order_find(e, a), ra);
	cr_assert_eq(me_order_find(e, b), rb);
	me_order_release(e, rb);
	cr_assert_eq(me_order_find(e, b), ME_NIL);
	cr_assert_eq(me_order_find(e, a), ra);
	rb = me_order_alloc(e, b);
	me_order_release(e, ra);
	cr_assert_eq(me_order_find(e, a), ME_NIL);
	cr_assert_eq(me_order_find(e, b), rb);
	fx_check_tables(e);
}

/* Goal: removal from the head, the middle and the tail of one chain keeps the rest found.
 * Method: five ids of one bucket (the same low six tag bits, the table at its 64 buckets),
 * removed middle, head, tail; the others found after each step. */
Test(me_store, index_chain_removals)
{
	struct me *e = engine(1024);
	struct wire_oid ids[5];
	uint32_t n = 0, want = ME_NIL;
	for (uint64_t seq = 1; n < 5; seq++) {
		uint32_t tag = me_oid_tag(fx_oid(5, seq));
		if (want == ME_NIL)
			want = tag & (ME_LH_BUCKETS_MIN - 1);
		if ((tag & (ME_LH_BUCKETS_MIN - 1)) == want)
			ids[n++] = fx_oid(5, seq);
	}
	uint32_t rec[5];
	for (uint32_t i = 0; i < 5; i++)
		rec[i] = me_order_alloc(e, ids[i]);
	cr_assert_eq(e->oid_lh.buckets, ME_LH_BUCKETS_MIN);
	/* The chain is newest first: 4 3 2 1 0. */
	static const uint32_t order[] = {2, 4, 0, 3, 1};
	bool gone[5] = {false};
	for (uint32_t s = 0; s < 5; s++) {
		me_order_release(e, rec[order[s]]);
		gone[order[s]] = true;
		for (uint32_t i = 0; i < 5; i++)
			cr_assert_eq(me_order_find(e, ids[i]), gone[i] ? ME_NIL : rec[i],
				     "step %u, id %u", s, i);
		fx_check_tables(e);
	}
}

/* Restore buf (altered by a test) with its checksum made right, so that restore judges the
 * content. */
static int
restore_resealed(struct me *e, uint8_t *buf, size_t len)
{
	uint64_t sum = XXH3_64bits(buf + 88, len - 88);
	memcpy(buf + 24, &sum, sizeof(sum)); /* me_snap_hdr.checksum */
	return me_restore(e, buf, len);
}

/* Goal: a snapshot carries the chained tables as far as they are in use and restores them
 * byte for byte; a table state no round of linear hashing leaves is refused. Method: grow the
 * index to 3,000 and back to 500, snapshot, restore into a second engine (equal state hash,
 * tables walk clean, lookups work); then bend oid_lh in the state header three ways. */
Test(me_store, snapshot_carries_tables)
{
	struct me *e = engine(8192), *r = engine(8192);
	uint32_t recs[3000];
	for (uint32_t i = 0; i < 3000; i++)
		recs[i] = alloc(e, 3, i + 1);
	for (uint32_t i = 0; i < 2500; i++)
		me_order_release(e, recs[i]);
	size_t len = me_snapshot_size(e);
	uint8_t *buf = malloc(len);
	cr_assert_not_null(buf);
	cr_assert_eq(me_snapshot(e, buf, len), len);
	cr_assert_eq(me_restore(r, buf, len), 0);
	cr_assert_eq(me_state_hash(r), me_state_hash(e));
	fx_check_tables(r);
	cr_assert_eq(me_order_find(r, fx_oid(3, 3000)), recs[2999]);
	cr_assert_eq(me_order_find(r, fx_oid(3, 1)), ME_NIL);
	size_t off = 88 + offsetof(struct me, oid_lh) - ME_RT_SIZE;
	struct me_lhash lh;
	memcpy(&lh, buf + off, sizeof(lh));
	for (int bad = 0; bad < 3; bad++) {
		struct me_lhash f = lh;
		if (bad == 0)
			f.low = 3 * lh.low / 2; /* not a power of two */
		else if (bad == 1)
			f.buckets = 2 * lh.low; /* a round that should have begun */
		else
			f.shrink_below = 0; /* not derived from buckets */
		memcpy(buf + off, &f, sizeof(f));
		cr_assert_eq(restore_resealed(r, buf, len), -EINVAL, "bad table %d", bad);
	}
	memcpy(buf + off, &lh, sizeof(lh));
	cr_assert_eq(restore_resealed(r, buf, len), 0);
	cr_assert_eq(me_state_hash(r), me_state_hash(e));
	free(buf);
}

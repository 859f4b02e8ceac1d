/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fixed-point money. Every amount is an int64 count of an asset's minor units (per-asset
 * scale, e.g. satoshi). Arithmetic is overflow-checked: an overflow is an error the caller
 * must handle (returned, never undefined behaviour, never silently wrapped).
 *
 * Notional of a trade: px * qty / base_unit, where symbol config guarantees that
 * tick * lot is a multiple of base_unit, so the division is exact for on-tick, on-lot orders.
 */
#ifndef OMSD_COMMON_MONEY_H
#define OMSD_COMMON_MONEY_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#define MONEY_BPS_DENOM 10000

/* *out = a + b. Returns 0, or -EOVERFLOW (and leaves *out alone). */
static inline int
money_add(int64_t a, int64_t b, int64_t *out)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return -EOVERFLOW;
	*out = r;
	return 0;
}

/* *out = a - b. Returns 0, or -EOVERFLOW. */
static inline int
money_sub(int64_t a, int64_t b, int64_t *out)
{
	int64_t r;
	if (__builtin_sub_overflow(a, b, &r))
		return -EOVERFLOW;
	*out = r;
	return 0;
}

/* *out = a * b. Returns 0, or -EOVERFLOW. */
static inline int
money_mul(int64_t a, int64_t b, int64_t *out)
{
	int64_t r;
	if (__builtin_mul_overflow(a, b, &r))
		return -EOVERFLOW;
	*out = r;
	return 0;
}

/*
 * *out = a * b / d, rounded toward zero (round_up false) or away from zero (round_up true),
 * computed in 128 bits so the intermediate product cannot overflow. d must be > 0.
 * Returns 0, -EOVERFLOW if the result does not fit in int64, -EINVAL if d <= 0.
 */
static inline int
money_mul_div(int64_t a, int64_t b, int64_t d, bool round_up, int64_t *out)
{
	if (d <= 0)
		return -EINVAL;
	__int128 p = (__int128)a * (__int128)b;
	__int128 q = p / d;
	__int128 r = p % d;
	if (round_up && r != 0)
		q += (p > 0) ? 1 : -1;
	if (q > INT64_MAX || q < INT64_MIN)
		return -EOVERFLOW;
	*out = (int64_t)q;
	return 0;
}

/* Exact notional px * qty / base_unit (truncating); -EOVERFLOW or -EINVAL as above. */
static inline int
money_notional(int64_t px, int64_t qty, int64_t base_unit, int64_t *out)
{
	return money_mul_div(px, qty, base_unit, false, out);
}

/* Fee on an amount at bps basis points, rounded up in the venue's favour for positive fees
 * and toward zero for rebates (negative bps), so the venue never pays out a fraction. */
static inline int
money_fee(int64_t amount, int32_t bps, int64_t *out)
{
	return money_mul_div(amount, bps, MONEY_BPS_DENOM, bps > 0, out);
}

#endif

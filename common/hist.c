/* SPDX-License-Identifier: Apache-2.0 */
#include "hist.h"

#include <string.h>

#include "check.h"

void
hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

uint32_t
hist_bucket(uint64_t value)
{
	if (value < HIST_SUB_COUNT)
		return (uint32_t)value;
	uint32_t e = 63u - (uint32_t)__builtin_clzll(value); /* e >= HIST_SUB_BITS */
	uint32_t sub = (uint32_t)(value >> (e - HIST_SUB_BITS)) & (HIST_SUB_COUNT - 1);
	uint32_t b = (e - HIST_SUB_BITS + 1) * HIST_SUB_COUNT + sub;
	DCHECK(b < HIST_BUCKETS);
	return b;
}

uint64_t
hist_bucket_high(uint32_t bucket)
{
	CHECK(bucket < HIST_BUCKETS);
	if (bucket < HIST_SUB_COUNT)
		return bucket;
	uint32_t e = bucket / HIST_SUB_COUNT + HIST_SUB_BITS - 1;
	uint64_t sub = bucket % HIST_SUB_COUNT;
	uint64_t low = (UINT64_C(1) << e) | (sub << (e - HIST_SUB_BITS));
	return low + ((UINT64_C(1) << (e - HIST_SUB_BITS)) - 1);
}

void
hist_record(struct hist *h, uint64_t value)
{
	h->buckets[hist_bucket(value)]++;
	h->count++;
	h->sum = (h->sum + value < h->sum) ? UINT64_MAX : h->sum + value;
	if (value < h->min)
		h->min = value;
	if (value > h->max)
		h->max = value;
}

void
hist_merge(struct hist *dst, const struct hist *src)
{
	for (uint32_t i = 0; i < HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
	dst->count += src->count;
	dst->sum = (dst->sum + src->sum < dst->sum) ? UINT64_MAX : dst->sum + src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t
hist_percentile(const struct hist *h, double p)
{
	CHECK(p > 0.0 && p <= 100.0);
	if (h->count == 0)
		return 0;
	/* Rank of the value at p: ceil(p% of count), at least 1. */
	double want = (p / 100.0) * (double)h->count;
	uint64_t rank = (uint64_t)want;
	if ((double)rank < want)
		rank++;
	if (rank == 0)
		rank = 1;
	uint64_t seen = 0;
	for (uint32_t i = 0; i < HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank) {
			uint64_t high = hist_bucket_high(i);
			return high > h->max ? h->max : high;
		}
	}
	return h->max;
}

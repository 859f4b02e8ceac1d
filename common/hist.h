/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Log-linear latency histogram (HdrHistogram-like): values below 2^HIST_SUB_BITS are exact,
 * above that each power of two is split into 2^HIST_SUB_BITS buckets, so a percentile is
 * within 1/2^HIST_SUB_BITS (3.1%) of the true value. Fixed size, no allocation, mergeable.
 * Single writer; a reader on another lcore copies it whole.
 */
#ifndef OMSD_COMMON_HIST_H
#define OMSD_COMMON_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 5
#define HIST_SUB_COUNT (1u << HIST_SUB_BITS)
#define HIST_BUCKETS ((64u - HIST_SUB_BITS + 1u) * HIST_SUB_COUNT)

struct hist {
	uint64_t count;                 /* values recorded */
	uint64_t sum;                   /* their sum (saturating) */
	uint64_t min;                   /* smallest value, UINT64_MAX when empty */
	uint64_t max;                   /* largest value */
	uint64_t buckets[HIST_BUCKETS]; /* counts per bucket */
};

void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t value);
/* Add every count of src into dst. */
void hist_merge(struct hist *dst, const struct hist *src);
/* Value at percentile p (0 < p <= 100): the upper bound of the bucket holding it, clamped to
 * max. 0 when empty. */
uint64_t hist_percentile(const struct hist *h, double p);
/* Bucket index of a value, and the largest value that bucket holds (exposed for tests). */
uint32_t hist_bucket(uint64_t value);
uint64_t hist_bucket_high(uint32_t bucket);

#endif

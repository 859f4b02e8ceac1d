/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A seeded, deterministic pseudo-random generator (xoshiro256** seeded by splitmix64).
 * Not for secrets. Pure cores never seed it from the environment: a seed arrives with
 * configuration or a simulator run, so every run can be replayed from its seed.
 */
#ifndef OMSD_COMMON_PRNG_H
#define OMSD_COMMON_PRNG_H

#include <stdint.h>

struct prng {
	uint64_t s[4]; /* xoshiro256** state; never all zero */
};

static inline uint64_t
prng_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static inline void
prng_seed(struct prng *p, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		p->s[i] = prng_splitmix64(&seed);
}

static inline uint64_t
prng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t
prng_next(struct prng *p)
{
	uint64_t *s = p->s;
	uint64_t result = prng_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = prng_rotl(s[3], 45);
	return result;
}

/* Uniform in [0, n), n > 0 (Lemire's multiply-shift; bias below 2^-32 for n < 2^32). */
static inline uint64_t
prng_below(struct prng *p, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)prng_next(p) * n) >> 64);
}

/* Uniform in [lo, hi]. */
static inline int64_t
prng_range(struct prng *p, int64_t lo, int64_t hi)
{
	return lo + (int64_t)prng_below(p, (uint64_t)(hi - lo) + 1);
}

/* True with probability num/den. */
static inline int
prng_chance(struct prng *p, uint64_t num, uint64_t den)
{
	return prng_below(p, den) < num;
}

#endif

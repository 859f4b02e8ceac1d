/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The 64-bit finaliser of MurmurHash3 (fmix64): full avalanche of a 64-bit key, for the
 * open-addressed tables that need their keys spread (the ME's symbol index, the gateway's
 * session table, the client library's indexes). Pure, header only.
 */
#ifndef COMMON_HASH_H
#define COMMON_HASH_H

#include <stdint.h>

static inline uint64_t
hash_fmix64(uint64_t k)
{
	k ^= k >> 33;
	k *= UINT64_C(0xff51afd7ed558ccd);
	k ^= k >> 33;
	k *= UINT64_C(0xc4ceb9fe1a85ec53);
	k ^= k >> 33;
	return k;
}

#endif

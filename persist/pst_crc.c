/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the SSE4.2 crc32 instruction when the
 * build targets it, else a slicing-by-one table built on first use. Both give the standard
 * check value 0xE3069283 for "123456789".
 */
#include <stdint.h>
#include <string.h>

#include "persist/persist.h"

#ifdef __SSE4_2__
#include <nmmintrin.h>

uint32_t
pst_crc32c(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t c = ~crc;

	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
		p += 8;
		len -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	while (len > 0) {
		c32 = _mm_crc32_u8(c32, *p);
		p++;
		len--;
	}
	return ~c32;
}

#else

static uint32_t table[256];
static int table_ready;

static void
table_build(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		table[i] = c;
	}
	table_ready = 1;
}

uint32_t
pst_crc32c(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t c = ~crc;

	if (!table_ready)
		table_build();
	for (size_t i = 0; i < len; i++)
		c = table[(c ^ p[i]) & 0xffu] ^ (c >> 8);
	return ~c;
}

#endif

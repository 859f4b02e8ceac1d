/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wire_bench: the frame codec every packet goes through (io lcore classify, shard lcores,
 * clients): wire_frame_decode with and without the SipHash-2-4-128 MAC, and
 * the checks of every message in it.
 *
 * Frames are built once, outside the timed region, from a seeded mix like a gateway's
 * ingress: 1..8 NEW_ORDER/CANCEL messages per frame (70% one message), a few INGRESS frames
 * carrying 1..4 orders in their tail (built with wire_builder_add / _add_tail / _finish, not
 * timed). Phase 1 decodes the whole set --rounds times (whole
 * batches timed: throughput); phase 2 times each decode with clock_gettime (percentiles,
 * which include ~20 ns of clock overhead). --no-timing runs only the decodes, for callgrind
 * (tests/bench/common/callgrind.sh counts wire_frame_decode per frame).
 *
 * Last line: bench: wire decode_frames_per_s=N decode_mac_frames_per_s=N msgs_per_s=N
 *            p50_ns=N p99_ns=N mac_p50_ns=N mac_p99_ns=N
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/hist.h"
#include "common/prng.h"
#include "common/wire.h"

#define FRAMES 4096
#define FRAME_CAP 1400 /* what fits an MTU-1500 packet after the headers */

struct frame {
	_Alignas(8) uint8_t buf[FRAME_CAP];
	uint32_t len;
};

static struct frame plain[FRAMES], keyed[FRAMES];
static uint64_t sink_count; /* decoded messages, so nothing is optimised away */

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
order_msg(struct prng *p, struct wire_new_order *m, uint64_t user, uint64_t id)
{
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_NEW_ORDER, 0);
	m->user = user;
	m->cl_ord_id = id;
	m->symbol = 1 + (uint32_t)prng_below(p, 16);
	m->side = prng_chance(p, 1, 2) ? WIRE_SIDE_BUY : WIRE_SIDE_SELL;
	m->ord_type = WIRE_ORD_LIMIT;
	m->tif = WIRE_TIF_GTC;
	m->px = 10000 + prng_range(p, -50, 50);
	m->qty = prng_range(p, 1, 10);
}

/* Build one frame of the mix into f (key: MAC it). */
static void
build(struct prng *p, struct frame *f, const struct wire_key *key, uint64_t *id)
{
	struct wire_builder b;
	wire_builder_init(&b, f->buf, FRAME_CAP, 77);
	uint64_t user = 1 + prng_below(p, 100000);
	if (prng_chance(p, 1, 20)) {
		/* A gateway's INGRESS: orders in its tail. */
		uint8_t tail[4 * sizeof(struct wire_new_order)];
		uint32_t n = 1 + (uint32_t)prng_below(p, 4), len = 0;
		for (uint32_t i = 0; i < n; i++) {
			order_msg(p, (struct wire_new_order *)(void *)(tail + len), user, (*id)++);
			len += (uint32_t)sizeof(struct wire_new_order);
		}
		struct wire_ingress ing;
		memset(&ing, 0, sizeof(ing));
		wire_hdr_init(&ing.hdr, WIRE_INGRESS, 1);
		ing.origin = 2;
		ing.tail_len = (uint16_t)len;
		if (wire_builder_add_tail(&b, &ing, tail, (uint16_t)len) != 0)
			abort();
	} else {
		uint32_t n = prng_chance(p, 7, 10) ? 1 : 2 + (uint32_t)prng_below(p, 7);
		for (uint32_t i = 0; i < n; i++) {
			if (prng_chance(p, 1, 3)) {
				struct wire_cancel c;
				memset(&c, 0, sizeof(c));
				wire_hdr_init(&c.hdr, WIRE_CANCEL, 0);
				c.user = user;
				c.cl_ord_id = (*id)++;
				c.orig_cl_ord_id = c.cl_ord_id - 1;
				if (wire_builder_add(&b, &c) != 0)
					abort();
			} else {
				struct wire_new_order o;
				order_msg(p, &o, user, (*id)++);
				if (wire_builder_add(&b, &o) != 0)
					abort();
			}
		}
	}
	f->len = wire_builder_finish(&b, key);
}

static uint32_t
decode(const struct frame *f, const struct wire_key *key)
{
	const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];
	uint32_t count = 0, sender = 0;
	if (wire_frame_decode(f->buf, f->len, key, msgs, WIRE_FRAME_MSGS_MAX, &count,
			      &sender) != WIRE_E_OK)
		abort(); /* every frame of the set is valid */
	return count;
}

int
main(int argc, char **argv)
{
	uint64_t rounds = 200, seed = 1;
	bool timing = true;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--no-timing") == 0) {
			timing = false;
		} else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0) {
			rounds = strtoull(argv[++i], NULL, 0);
		} else if (i + 1 < argc && strcmp(argv[i], "--ops") == 0) {
			/* callgrind-per-op: frames to decode, in whole rounds of FRAMES */
			rounds = strtoull(argv[++i], NULL, 0) / FRAMES;
		} else if (i + 1 < argc && strcmp(argv[i], "--seed") == 0) {
			seed = strtoull(argv[++i], NULL, 0);
		} else {
			fprintf(stderr, "usage: wire_bench [--rounds N | --ops FRAMES] [--seed S] "
					"[--no-timing]\n");
			return 2;
		}
	}
	const struct wire_key key = {.k0 = UINT64_C(0x0706050403020100),
				     .k1 = UINT64_C(0x0f0e0d0c0b0a0908)};
	struct prng p;
	prng_seed(&p, seed);
	uint64_t id = 1, msgs = 0, bytes = 0;
	for (uint32_t i = 0; i < FRAMES; i++)
		build(&p, &plain[i], NULL, &id);
	prng_seed(&p, seed);
	id = 1;
	for (uint32_t i = 0; i < FRAMES; i++)
		build(&p, &keyed[i], &key, &id);
	for (uint32_t i = 0; i < FRAMES; i++) {
		msgs += decode(&plain[i], NULL);
		bytes += plain[i].len;
	}

	if (!timing) {
		for (uint64_t r = 0; r < rounds; r++)
			for (uint32_t i = 0; i < FRAMES; i++)
				sink_count += decode(&keyed[i], &key);
		printf("wire_bench: decoded %" PRIu64 " keyed frames (%" PRIu64 " msgs)\n",
		       rounds * FRAMES, sink_count);
		return 0;
	}

	/* Phase 1: throughput. */
	uint64_t t0 = now_ns();
	for (uint64_t r = 0; r < rounds; r++)
		for (uint32_t i = 0; i < FRAMES; i++)
			sink_count += decode(&plain[i], NULL);
	uint64_t plain_ns = now_ns() - t0;
	t0 = now_ns();
	for (uint64_t r = 0; r < rounds; r++)
		for (uint32_t i = 0; i < FRAMES; i++)
			sink_count += decode(&keyed[i], &key);
	uint64_t keyed_ns = now_ns() - t0;

	/* Phase 2: latency per frame. */
	static struct hist hp, hk;
	hist_init(&hp);
	hist_init(&hk);
	for (uint32_t i = 0; i < FRAMES * 16; i++) {
		const struct frame *f = &plain[i % FRAMES];
		uint64_t a = now_ns();
		sink_count += decode(f, NULL);
		uint64_t b = now_ns();
		hist_record(&hp, b - a);
		f = &keyed[i % FRAMES];
		a = now_ns();
		sink_count += decode(f, &key);
		b = now_ns();
		hist_record(&hk, b - a);
	}

	double frames = (double)rounds * FRAMES;
	uint64_t fps = plain_ns ? (uint64_t)(frames * 1e9 / (double)plain_ns) : 0;
	uint64_t kps = keyed_ns ? (uint64_t)(frames * 1e9 / (double)keyed_ns) : 0;
	uint64_t mps = plain_ns ? (uint64_t)((double)msgs * rounds * 1e9 / (double)plain_ns) : 0;
	printf("wire_bench: frames=%u msgs_per_frame=%.2f bytes_per_frame=%.0f rounds=%" PRIu64
	       " (checksum %" PRIu64 ")\n",
	       FRAMES, (double)msgs / FRAMES, (double)bytes / FRAMES, rounds, sink_count);
	printf("bench: wire decode_frames_per_s=%" PRIu64 " decode_mac_frames_per_s=%" PRIu64
	       " msgs_per_s=%" PRIu64 " p50_ns=%" PRIu64 " p99_ns=%" PRIu64 " mac_p50_ns=%" PRIu64
	       " mac_p99_ns=%" PRIu64 "\n",
	       fps, kps, mps, hist_percentile(&hp, 50), hist_percentile(&hp, 99),
	       hist_percentile(&hk, 50), hist_percentile(&hk, 99));
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The request clocks' table: app_reqlat.c (the OMS leader, proposal → ACK and → final) and
 * app_lat.c (the gateway, RX → ACK and → OPEN or final) each follow the client requests in
 * flight in one, keyed by (user, clOrdId). A power-of-two array, linear probing in a
 * window of APP_REQTAB_PROBE slots from the key's home; a cache, so when the window is full
 * the caller picks the entry that makes room (and counts it).
 *
 * Removal shifts back the entries after the hole that may move into it (Knuth's Algorithm
 * R, bounded by the window): no free slot ever lies between an entry's home and the entry.
 * So a lookup or a claim stops at the first free slot, and a request not yet in the table
 * (every new one) costs a probe or two at the tables' load, not the whole window.
 *
 * Pure (no DPDK, no clock): tests/unit/app/test_reqtab.c.
 */
#ifndef APP_REQTAB_H
#define APP_REQTAB_H

#include <stdbool.h>
#include <stdint.h>

#define APP_REQTAB_PROBE 8u /* slots from a key's home that may hold it */

struct app_reqtab_ent {
	uint64_t user;      /* 0: free */
	uint64_t cl_ord_id;
	uint64_t t0;        /* when the request was seen: ns (OMS) or TSC (gateway) */
	uint32_t acked;     /* its ACK was timed */
	uint16_t shard;     /* gateway: the OMS shard it was sent to */
	uint16_t opens;     /* OMS: a request that opens an order (its clock ends when the ME
			     * settled it); 0: one whose clock ends at its ACK */
};

static inline uint32_t
app_reqtab_home(uint64_t user, uint64_t cl_ord_id, uint32_t mask)
{
	uint64_t h = (user * UINT64_C(0x9E3779B97F4A7C15)) ^
		     (cl_ord_id * UINT64_C(0xC2B2AE3D27D4EB4F));
	return (uint32_t)(h >> 40) & mask;
}

/* The entry of (user, cl_ord_id) in t (mask + 1 slots, more than APP_REQTAB_PROBE; user not
 * 0), or NULL. Then *free_slot (when not NULL) is the window's first free slot, the one a
 * claim takes, or NULL when the window is full. */
static inline struct app_reqtab_ent *
app_reqtab_find(struct app_reqtab_ent *t, uint32_t mask, uint64_t user, uint64_t cl_ord_id,
		struct app_reqtab_ent **free_slot)
{
	uint32_t home = app_reqtab_home(user, cl_ord_id, mask);
	struct app_reqtab_ent *fr = NULL;
	for (uint32_t p = 0; p < APP_REQTAB_PROBE; p++) {
		struct app_reqtab_ent *e = &t[(home + p) & mask];
		if (e->user == user && e->cl_ord_id == cl_ord_id)
			return e;
		if (e->user == 0) {
			fr = e;
			break;
		}
	}
	if (free_slot != NULL)
		*free_slot = fr;
	return NULL;
}

/* Free entry e of t: the entries after it that may move back (their home at or before the
 * hole, within their window) do, so that no probe run has a hole. */
static inline void
app_reqtab_remove(struct app_reqtab_ent *t, uint32_t mask, struct app_reqtab_ent *e)
{
	uint32_t hole = (uint32_t)(e - t);
	for (uint32_t j = (hole + 1) & mask; ((j - hole) & mask) < APP_REQTAB_PROBE;
	     j = (j + 1) & mask) {
		const struct app_reqtab_ent *x = &t[j];
		if (x->user == 0)
			break;
		/* x is (j - home) past its home; it may move when the hole is no further back. */
		uint32_t past = (j - app_reqtab_home(x->user, x->cl_ord_id, mask)) & mask;
		if (past >= ((j - hole) & mask)) {
			t[hole] = *x;
			hole = j;
		}
	}
	t[hole] = (struct app_reqtab_ent){ .user = 0 };
}

#endif

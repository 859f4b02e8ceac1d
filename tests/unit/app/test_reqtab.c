/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Goal: the request clocks' table (app/app_reqtab.h) finds every key it holds with its
 * payload and no other, whatever order claims and removals come in, and keeps the shape
 * its early stops rely on: each entry within APP_REQTAB_PROBE of its home with no free slot
 * between. Method: seeded random claims (a full window overwrites the home slot, as
 * app_lat.c does), removals and lookups on tables of 64 slots — small enough that runs
 * collide, wrap past the end and fill windows — checked against a plain list after every
 * step; and removals at a run's head, middle and tail around the wrap.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "app/app_reqtab.h"
#include "common/prng.h"

#define SLOTS 64u
#define MASK (SLOTS - 1)
#define KEYS_MAX 4096u

static struct app_reqtab_ent tab[SLOTS];
static struct {
	uint64_t user, cl, t0;
	bool in;
} keys[KEYS_MAX];
static uint32_t nkeys;

static struct prng rng;
static uint64_t
next(void)
{
	return prng_next(&rng);
}

/* Every entry sits within the window of its home, with every slot from home to it taken;
 * every key the list holds is found with its payload, and no key it does not. */
static void
check(void)
{
	uint32_t held = 0;
	for (uint32_t i = 0; i < SLOTS; i++) {
		if (tab[i].user == 0)
			continue;
		held++;
		uint32_t home = app_reqtab_home(tab[i].user, tab[i].cl_ord_id, MASK);
		uint32_t past = (i - home) & MASK;
		cr_assert(lt(u32, past, APP_REQTAB_PROBE), "slot %u is %u past its home", i, past);
		for (uint32_t p = 0; p < past; p++)
			cr_assert(ne(u64, tab[(home + p) & MASK].user, 0), "a hole before slot %u", i);
	}
	uint32_t in = 0;
	for (uint32_t k = 0; k < nkeys; k++) {
		const struct app_reqtab_ent *e =
			app_reqtab_find(tab, MASK, keys[k].user, keys[k].cl, NULL);
		if (!keys[k].in) {
			cr_assert(eq(ptr, (void *)e, NULL), "key %u found after it left", k);
			continue;
		}
		in++;
		cr_assert(ne(ptr, (void *)e, NULL), "key %u lost", k);
		cr_assert(eq(u64, e->t0, keys[k].t0));
	}
	cr_assert(eq(u32, held, in));
}

static uint32_t
key_at(const struct app_reqtab_ent *e)
{
	for (uint32_t k = 0; k < nkeys; k++)
		if (keys[k].in && keys[k].user == e->user && keys[k].cl == e->cl_ord_id)
			return k;
	cr_assert(false, "an entry no key owns");
	return 0;
}

/* Claim key k as app_lat_rx does: a held key stays; a full window loses its home. */
static void
claim(uint32_t k)
{
	struct app_reqtab_ent *fr;
	if (app_reqtab_find(tab, MASK, keys[k].user, keys[k].cl, &fr) != NULL)
		return;
	if (fr == NULL) {
		fr = &tab[app_reqtab_home(keys[k].user, keys[k].cl, MASK)];
		keys[key_at(fr)].in = false;
	}
	*fr = (struct app_reqtab_ent){ .user = keys[k].user, .cl_ord_id = keys[k].cl,
				       .t0 = keys[k].t0 };
	keys[k].in = true;
}

static void
drop(uint32_t k)
{
	struct app_reqtab_ent *e = app_reqtab_find(tab, MASK, keys[k].user, keys[k].cl, NULL);
	cr_assert(ne(ptr, (void *)e, NULL));
	app_reqtab_remove(tab, MASK, e);
	keys[k].in = false;
}

static void
reset(uint32_t n)
{
	memset(tab, 0, sizeof(tab));
	memset(keys, 0, sizeof(keys));
	nkeys = n;
	for (uint32_t k = 0; k < n; k++) {
		keys[k].user = 1 + next() % 5;     /* few users: their keys differ by clOrdId */
		keys[k].cl = 1 + k;
		keys[k].t0 = next();
	}
}

Test(reqtab, random_claims_and_removals)
{
	prng_seed(&rng, 48);
	for (uint32_t round = 0; round < 40; round++) {
		reset(40 + round * 3); /* from under the slots to twice them */
		for (uint32_t step = 0; step < 3000; step++) {
			uint32_t k = (uint32_t)(next() % nkeys);
			if (keys[k].in && next() % 2 == 0)
				drop(k);
			else
				claim(k);
			check();
		}
	}
}

/* Keys whose home is the given slot (searched among fresh clOrdIds). */
static uint32_t
key_homed(uint32_t home)
{
	for (uint64_t cl = 1;; cl++) {
		if (app_reqtab_home(7, cl, MASK) != home)
			continue;
		bool used = false;
		for (uint32_t k = 0; k < nkeys; k++)
			used |= keys[k].user == 7 && keys[k].cl == cl;
		if (used)
			continue;
		keys[nkeys] = (typeof(keys[0])){ .user = 7, .cl = cl, .t0 = cl * 3 };
		return nkeys++;
	}
}

/* A run that wraps past the last slot: homes 62, 62, 63, 0, 62 fill slots 62, 63, 0, 1, 2.
 * Removing any one of them leaves every other found, the run closed up behind it. */
Test(reqtab, removal_anywhere_in_a_wrapping_run)
{
	static const uint32_t homes[] = { 62, 62, 63, 0, 62 };
	for (uint32_t victim = 0; victim < 5; victim++) {
		memset(tab, 0, sizeof(tab));
		memset(keys, 0, sizeof(keys));
		nkeys = 0;
		uint32_t ks[5];
		for (uint32_t i = 0; i < 5; i++) {
			ks[i] = key_homed(homes[i]);
			claim(ks[i]);
		}
		check();
		cr_assert(ne(u64, tab[2].user, 0), "the run reaches slot 2");
		drop(ks[victim]);
		check();
		cr_assert(eq(u64, tab[2].user, 0), "the run closed up (victim %u)", victim);
		/* A new key homed at 63 now takes the first free slot of its window. */
		uint32_t k = key_homed(63);
		claim(k);
		check();
	}
}

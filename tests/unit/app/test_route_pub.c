/* SPDX-License-Identifier: Apache-2.0 */
/* The routing copies published to the gateway lcore (app/app_route_pub.c, liburcu QSBR):
 * the pool, the pointer, reclaim after a grace period — with real reader threads that hold
 * a copy across a busy stretch and check it never changes under them. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <string.h>

#include "app/app_route_pub.h"

/* A copy whose every field is a function of its epoch: a copy rewritten while a reader
 * holds it shows a mismatch. */
static void
fill(struct oms_route_info *ri, uint64_t epoch)
{
	memset(ri, 0, sizeof(*ri));
	ri->epoch = epoch;
	ri->shard_count = (uint32_t)(epoch % WIRE_ROUTE_SHARDS_MAX) + 1;
	ri->pin_count = 1;
	ri->pins[0].user = epoch * 7 + 1;
	ri->pins[0].shard = (uint16_t)(epoch % 64);
	ri->active_count = 1;
	ri->active[0] = (uint16_t)(epoch & 0xffff);
	ri->self = (uint16_t)(epoch >> 3);
}

static bool
intact(const struct oms_route_info *ri)
{
	uint64_t e = ri->epoch;
	return ri->shard_count == (uint32_t)(e % WIRE_ROUTE_SHARDS_MAX) + 1 && ri->pin_count == 1 &&
	       ri->pins[0].user == e * 7 + 1 && ri->pins[0].shard == (uint16_t)(e % 64) &&
	       ri->active_count == 1 && ri->active[0] == (uint16_t)(e & 0xffff) &&
	       ri->self == (uint16_t)(e >> 3);
}

/* Goal: nothing before the first publication; each publication is what a reader sees; a
 * pool of four copies takes four publications without a reclaim (one live, three retired),
 * refuses the fifth (counted), and takes more once main reclaimed the retired ones. */
Test(app_route_pub, pool_and_reclaim)
{
	static struct app_route_pub p;
	struct oms_route_info ri;
	app_rcu_reader_begin();
	cr_assert(app_route_read(&p) == NULL);
	cr_assert(app_route_peek(&p) == NULL);
	for (uint64_t e = 1; e <= APP_ROUTE_COPIES; e++) {
		fill(&ri, e);
		cr_assert(app_route_publish(&p, &ri));
		cr_assert(eq(u64, app_route_read(&p)->epoch, e));
	}
	fill(&ri, 99);
	cr_assert(not(app_route_publish(&p, &ri)));
	cr_assert(eq(u64, p.pool_waits, 1));
	cr_assert(eq(u64, app_route_read(&p)->epoch, APP_ROUTE_COPIES)); /* still the last */
	app_rcu_offline(); /* main reclaims while this reader is idle */
	app_route_reclaim(&p);
	app_rcu_online();
	cr_assert(eq(u64, p.reclaims, APP_ROUTE_COPIES - 1));
	cr_assert(app_route_publish(&p, &ri));
	cr_assert(eq(u64, app_route_read(&p)->epoch, 99));
	cr_assert(intact(app_route_peek(&p)));
	cr_assert(eq(u64, p.publishes, APP_ROUTE_COPIES + 1));
	app_rcu_reader_end();
}

#define EPOCHS 2000

static struct app_route_pub shared;
static int publisher_done;

struct reader {
	uint64_t reads, last, torn, backwards, held;
};

static void *
reader_main(void *arg)
{
	struct reader *r = arg;
	app_rcu_reader_begin();
	while (!__atomic_load_n(&publisher_done, __ATOMIC_ACQUIRE)) {
		const struct oms_route_info *ri = app_route_read(&shared);
		if (ri != NULL) {
			r->reads++;
			if (!intact(ri))
				r->torn++;
			if (ri->epoch < r->last)
				r->backwards++;
			r->last = ri->epoch;
			/* Hold it a while, as a gateway cycle holds the copy it routes by: it
			 * must not be reused meanwhile. */
			uint64_t e = ri->epoch;
			for (int k = 0; k < 200; k++) {
				__atomic_thread_fence(__ATOMIC_SEQ_CST);
				if (ri->epoch != e || !intact(ri)) {
					r->torn++;
					break;
				}
			}
			r->held++;
		}
		app_rcu_quiescent();
		if ((r->reads & 63) == 0) {
			app_rcu_offline(); /* an idle gateway sleeps offline */
			app_rcu_online();
		}
	}
	app_rcu_reader_end();
	return NULL;
}

static void *
publisher_main(void *arg)
{
	(void)arg;
	struct oms_route_info ri;
	for (uint64_t e = 1; e <= EPOCHS; e++) {
		fill(&ri, e);
		while (!app_route_publish(&shared, &ri))
			sched_yield(); /* the pool is empty until main reclaims */
	}
	__atomic_store_n(&publisher_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Goal: two readers that hold each copy across a busy stretch, a publisher that replaces
 * it 2,000 times and a reclaimer that returns retired copies after each grace period: no
 * reader ever sees a copy change under it or an older epoch after a newer one, and every
 * copy but the live one goes back to the pool. */
Test(app_route_pub, readers_never_see_a_reused_copy, .timeout = 60)
{
	struct reader rd[2];
	memset(rd, 0, sizeof(rd));
	pthread_t t[3];
	for (int i = 0; i < 2; i++)
		cr_assert(eq(int, pthread_create(&t[i], NULL, reader_main, &rd[i]), 0));
	cr_assert(eq(int, pthread_create(&t[2], NULL, publisher_main, NULL), 0));
	while (!__atomic_load_n(&publisher_done, __ATOMIC_ACQUIRE))
		app_route_reclaim(&shared);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	app_route_reclaim(&shared);
	for (int i = 0; i < 2; i++) {
		cr_assert(eq(u64, rd[i].torn, 0), "reader %d saw %lu torn copies", i,
			  (unsigned long)rd[i].torn);
		cr_assert(eq(u64, rd[i].backwards, 0));
		cr_assert(rd[i].reads > 0);
	}
	cr_assert(eq(u64, shared.publishes, EPOCHS));
	cr_assert(eq(u64, shared.reclaims, EPOCHS - 1));
	cr_assert(eq(u64, app_route_peek(&shared)->epoch, EPOCHS));
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The routing published to the gateway lcore with liburcu's QSBR flavour
 * (app_route_pub.h). The only file that includes liburcu; no DPDK (unit-tested with
 * threads in tests/unit/app/test_route_pub.c).
 */
#include <string.h>
#include <time.h>

#include <urcu-qsbr.h>

#include "app_route_pub.h"

enum {
	COPY_FREE = 0,            /* in the pool */
	COPY_LIVE = 1,            /* published (at most one) */
	COPY_RETIRED = 2,         /* replaced: readers may still hold it until a grace period */
};

static uint64_t
mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool
app_route_publish(struct app_route_pub *p, const struct oms_route_info *ri)
{
	struct app_route_copy *c = NULL;
	for (uint32_t i = 0; i < APP_ROUTE_COPIES && c == NULL; i++)
		if (__atomic_load_n(&p->copies[i].state, __ATOMIC_ACQUIRE) == COPY_FREE)
			c = &p->copies[i];
	if (c == NULL) {
		__atomic_store_n(&p->pool_waits, p->pool_waits + 1, __ATOMIC_RELAXED);
		return false;
	}
	memcpy(&c->ri, ri, sizeof(c->ri));
	__atomic_store_n(&c->state, COPY_LIVE, __ATOMIC_RELAXED);
	struct app_route_copy *old = rcu_xchg_pointer(&p->live, c); /* a full barrier */
	if (old != NULL)
		__atomic_store_n(&old->state, COPY_RETIRED, __ATOMIC_RELEASE);
	__atomic_store_n(&p->publishes, p->publishes + 1, __ATOMIC_RELAXED);
	return true;
}

const struct oms_route_info *
app_route_read(struct app_route_pub *p)
{
	struct app_route_copy *c = rcu_dereference(p->live);
	return c != NULL ? &c->ri : NULL;
}

const struct oms_route_info *
app_route_peek(const struct app_route_pub *p)
{
	const struct app_route_copy *c = __atomic_load_n(&p->live, __ATOMIC_ACQUIRE);
	return c != NULL ? &c->ri : NULL;
}

void
app_route_reclaim(struct app_route_pub *p)
{
	uint32_t retired = 0;
	for (uint32_t i = 0; i < APP_ROUTE_COPIES; i++)
		if (__atomic_load_n(&p->copies[i].state, __ATOMIC_ACQUIRE) == COPY_RETIRED)
			retired |= 1u << i;
	if (retired == 0)
		return;
	/* Retired after the pointer moved off them: a reader that can still hold one read it
	 * before, in a cycle this grace period waits out. */
	uint64_t t0 = mono_ns();
	synchronize_rcu();
	__atomic_store_n(&p->grace_ns, p->grace_ns + (mono_ns() - t0), __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < APP_ROUTE_COPIES; i++)
		if (retired & (1u << i)) {
			__atomic_store_n(&p->copies[i].state, COPY_FREE, __ATOMIC_RELEASE);
			__atomic_store_n(&p->reclaims, p->reclaims + 1, __ATOMIC_RELAXED);
		}
}

void
app_rcu_reader_begin(void)
{
	rcu_register_thread();
}

void
app_rcu_quiescent(void)
{
	rcu_quiescent_state();
}

void
app_rcu_offline(void)
{
	rcu_thread_offline();
}

void
app_rcu_online(void)
{
	rcu_thread_online();
}

void
app_rcu_reader_end(void)
{
	rcu_unregister_thread();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Goal: the ARP table, the message classification and the idle/duty helpers behave as the
 * io lcore relies on.
 * Method: drive them directly with an injected clock.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <rte_byteorder.h>

#include "dataplane/dp_int.h"

#define MS (1000ull * 1000)

static struct dp_arp_table t;
static const struct rte_ether_addr m1 = { { 0x02, 0, 0, 0, 0, 0x11 } };
static const struct rte_ether_addr m2 = { { 0x02, 0, 0, 0, 0, 0x22 } };

static void
setup(void)
{
	dp_arp_table_init(&t, 1000 * MS);
}

TestSuite(dp_arp, .init = setup);

static uint32_t
ip(uint8_t last)
{
	return rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, last));
}

/* Goal: a miss asks once per retry interval; the answer resolves it. */
Test(dp_arp, resolve_miss_then_learn)
{
	struct rte_ether_addr mac;
	bool req;

	cr_assert_eq(dp_arp_resolve(&t, ip(5), 1 * MS, &mac, &req), -ENOENT);
	cr_assert(req);
	cr_assert_eq(dp_arp_resolve(&t, ip(5), 50 * MS, &mac, &req), -ENOENT);
	cr_assert(!req, "rate limited within DP_ARP_RETRY_NS");
	cr_assert_eq(dp_arp_resolve(&t, ip(5), 300 * MS, &mac, &req), -ENOENT);
	cr_assert(req);
	cr_assert(dp_arp_learn(&t, ip(5), &m1, false, 310 * MS), "an incomplete entry is refreshed");
	cr_assert_eq(dp_arp_resolve(&t, ip(5), 320 * MS, &mac, &req), 0);
	cr_assert(!req);
	cr_assert(rte_is_same_ether_addr(&mac, &m1));
}

/* Goal: a stale entry keeps working while it is re-resolved. */
Test(dp_arp, stale_entry_still_used)
{
	struct rte_ether_addr mac;
	bool req;

	dp_arp_learn(&t, ip(6), &m1, true, 1 * MS);
	cr_assert_eq(dp_arp_resolve(&t, ip(6), 2000 * MS, &mac, &req), 0);
	cr_assert(req);
	cr_assert(rte_is_same_ether_addr(&mac, &m1));
}

Test(dp_arp, static_never_changes)
{
	struct rte_ether_addr mac;
	bool req;

	cr_assert_eq(dp_arp_static_add(&t, ip(7), &m1), 0);
	cr_assert(!dp_arp_learn(&t, ip(7), &m2, true, 5 * MS));
	cr_assert_eq(dp_arp_resolve(&t, ip(7), 999999 * MS, &mac, &req), 0);
	cr_assert(!req);
	cr_assert(rte_is_same_ether_addr(&mac, &m1));
}

Test(dp_arp, refresh_only_does_not_create)
{
	struct rte_ether_addr mac;
	bool req;

	cr_assert(!dp_arp_learn(&t, ip(8), &m1, false, 1 * MS));
	cr_assert_eq(dp_arp_resolve(&t, ip(8), 2 * MS, &mac, &req), -ENOENT);
}

/* Goal: a full table still learns by replacing the oldest dynamic entry in the window. */
Test(dp_arp, full_table_replaces_oldest)
{
	struct rte_ether_addr mac;
	bool req;

	for (uint32_t i = 0; i < 4 * DP_ARP_MAX; i++)
		dp_arp_learn(&t, rte_cpu_to_be_32(RTE_IPV4(10, 1, i >> 8, i & 255)), &m1, true,
			     i * MS / 1000);
	cr_assert(dp_arp_learn(&t, ip(9), &m2, true, 999 * MS));
	cr_assert_eq(dp_arp_resolve(&t, ip(9), 999 * MS, &mac, &req), 0);
	cr_assert(rte_is_same_ether_addr(&mac, &m2));
}

/* Goal: another io lcore's read (dp_arp_peek) gives a static or fresh entry's MAC and
 * nothing else — not an unknown hop, not one being resolved, not a stale one (those are the
 * first io lcore's to resolve) — and never changes the table. */
Test(dp_arp, peek_fresh_and_static_only)
{
	struct rte_ether_addr mac;
	bool req;

	cr_assert_eq(dp_arp_peek(&t, ip(20), 1 * MS, &mac), -ENOENT);
	cr_assert_eq(dp_arp_resolve(&t, ip(20), 1 * MS, &mac, &req), -ENOENT); /* incomplete */
	cr_assert_eq(dp_arp_peek(&t, ip(20), 2 * MS, &mac), -ENOENT);
	cr_assert(dp_arp_learn(&t, ip(20), &m1, false, 3 * MS));
	cr_assert_eq(dp_arp_peek(&t, ip(20), 4 * MS, &mac), 0);
	cr_assert(rte_is_same_ether_addr(&mac, &m1));
	cr_assert_eq(dp_arp_peek(&t, ip(20), 3 * MS + 1000 * MS, &mac), -ENOENT, "stale");
	cr_assert_eq(dp_arp_static_add(&t, ip(21), &m2), 0);
	cr_assert_eq(dp_arp_peek(&t, ip(21), 999999 * MS, &mac), 0);
	cr_assert(rte_is_same_ether_addr(&mac, &m2));
	/* Peeking a miss made no entry: the writer's resolve still asks. */
	cr_assert_eq(dp_arp_peek(&t, ip(22), 5 * MS, &mac), -ENOENT);
	cr_assert_eq(dp_arp_resolve(&t, ip(22), 5 * MS, &mac, &req), -ENOENT);
	cr_assert(req);
}

static int peek_stop;

/* The writer: relearns ip(30) with MACs whose six bytes are all one value, 1 then 2 ... */
static void *
arp_writer(void *arg)
{
	(void)arg;
	for (uint32_t i = 0; !__atomic_load_n(&peek_stop, __ATOMIC_ACQUIRE); i++) {
		uint8_t b = (uint8_t)(1 + i % 250);
		struct rte_ether_addr m = { { b, b, b, b, b, b } };
		dp_arp_learn(&t, ip(30), &m, true, i); /* a new MAC each time: always written */
	}
	return NULL;
}

/* Goal: a reader racing the writer never sees a MAC torn between two learns. */
Test(dp_arp, peek_never_torn, .timeout = 30)
{
	t.timeout_ns = UINT64_MAX; /* every learnt entry stays fresh for the reader */
	pthread_t w;
	cr_assert_eq(pthread_create(&w, NULL, arp_writer, NULL), 0);
	uint64_t seen = 0, torn = 0;
	for (uint32_t n = 0; n < 2000000; n++) {
		struct rte_ether_addr mac;
		if (dp_arp_peek(&t, ip(30), 0, &mac) != 0)
			continue;
		seen++;
		for (int k = 1; k < 6; k++)
			torn += mac.addr_bytes[k] != mac.addr_bytes[0];
	}
	__atomic_store_n(&peek_stop, 1, __ATOMIC_RELEASE);
	pthread_join(w, NULL);
	cr_assert_gt(seen, 0);
	cr_assert_eq(torn, 0, "%lu torn MACs in %lu reads", (unsigned long)torn, (unsigned long)seen);
}

/* Goal: every message type that may come off the wire has a route class; host-internal
 * ones have none; the lookup through the message list's class column gives, type by type,
 * the classes the dataplane routed by before that column existed.
 * Method: a hand-written table of the expected class of every value 0..WIRE_TYPE_LIMIT. */
Test(dp_class, every_type_classified)
{
#define CHECK_TYPE(name, value, st, tail, cls, admin)                                      \
	cr_assert_lt((unsigned)dp_class_of_type(WIRE_##name), (unsigned)DP_CLASS_COUNT);
	WIRE_TYPES(CHECK_TYPE)
#undef CHECK_TYPE
	static const struct {
		uint16_t type;
		enum dp_class cls;
	} want[] = {
		{ WIRE_NEW_ORDER, DP_CLASS_GATEWAY }, { WIRE_CANCEL, DP_CLASS_GATEWAY },
		{ WIRE_AMEND, DP_CLASS_GATEWAY }, { WIRE_CANCEL_REPLACE, DP_CLASS_GATEWAY },
		{ WIRE_REPORT_REPLAY, DP_CLASS_GATEWAY },
		{ WIRE_LOGON, DP_CLASS_GATEWAY }, { WIRE_SESSION_HDR, DP_CLASS_GATEWAY },
		{ WIRE_LOGOUT, DP_CLASS_GATEWAY }, { WIRE_HEARTBEAT, DP_CLASS_GATEWAY },
		{ WIRE_LOGON_REPLY, DP_CLASS_CLIENT }, { WIRE_SESSION_REJECT, DP_CLASS_CLIENT },
		{ WIRE_ACK, DP_CLASS_CLIENT }, { WIRE_NAK, DP_CLASS_CLIENT },
		{ WIRE_EXEC_REPORT, DP_CLASS_CLIENT }, { WIRE_ADMIN_REPLY, DP_CLASS_CLIENT },
		{ WIRE_ME_EVENT, DP_CLASS_BRIDGE }, { WIRE_ME_RESULT, DP_CLASS_BRIDGE },
		{ WIRE_OPEN_ORDERS_SNAPSHOT, DP_CLASS_BRIDGE },
		{ WIRE_SUBMIT, DP_CLASS_SHARD }, { WIRE_CANCEL_TO_ME, DP_CLASS_SHARD },
		{ WIRE_AMEND_TO_ME, DP_CLASS_SHARD }, { WIRE_REPLACE_TO_ME, DP_CLASS_SHARD },
		{ WIRE_REBIND_TO_ME, DP_CLASS_SHARD }, { WIRE_STREAM_ACK, DP_CLASS_SHARD }, { WIRE_REPLAY_REQUEST, DP_CLASS_SHARD },
		{ WIRE_ORDER_QUERY, DP_CLASS_SHARD }, { WIRE_OPEN_ORDERS_QUERY, DP_CLASS_SHARD },
		{ WIRE_ROUTING_CONFIG, DP_CLASS_SHARD }, { WIRE_SYMBOL_CONFIG, DP_CLASS_SHARD },
		{ WIRE_SYMBOL_STATUS, DP_CLASS_SHARD }, { WIRE_KILL_SWITCH, DP_CLASS_SHARD },
		{ WIRE_TRANSFER, DP_CLASS_SHARD }, { WIRE_WHALE_PIN, DP_CLASS_SHARD },
		{ WIRE_USER_ADMIN, DP_CLASS_SHARD }, { WIRE_SNAPSHOT_REQUEST, DP_CLASS_SHARD },
		{ WIRE_SYMBOL_MOVE, DP_CLASS_SHARD }, { WIRE_BOOK_CHUNK, DP_CLASS_SHARD },
		{ WIRE_REQUEST_VOTE, DP_CLASS_SHARD }, { WIRE_VOTE_REPLY, DP_CLASS_SHARD },
		{ WIRE_APPEND_ENTRIES, DP_CLASS_SHARD }, { WIRE_APPEND_REPLY, DP_CLASS_SHARD },
		{ WIRE_INSTALL_SNAPSHOT, DP_CLASS_SHARD }, { WIRE_SNAPSHOT_REPLY, DP_CLASS_SHARD },
		{ WIRE_TIMEOUT_NOW, DP_CLASS_SHARD }, { WIRE_INGRESS, DP_CLASS_SHARD },
		{ WIRE_FORWARDED_ADMIN, DP_CLASS_SHARD }, { WIRE_FORWARDED_REPLY, DP_CLASS_SHARD },
	};
	for (uint16_t t = 0; t <= WIRE_TYPE_LIMIT; t++) {
		enum dp_class expect = DP_CLASS_NONE; /* unknown and host-internal types */
		for (unsigned i = 0; i < RTE_DIM(want); i++)
			if (want[i].type == t)
				expect = want[i].cls;
		cr_assert_eq(dp_class_of_type(t), expect, "type %u (%s)", t, wire_type_name(t));
	}
	cr_assert_eq(dp_class_of_type(WIRE_NEW_ORDER), DP_CLASS_GATEWAY);
	cr_assert_eq(dp_class_of_type(WIRE_APPEND_ENTRIES), DP_CLASS_SHARD);
	cr_assert_eq(dp_class_of_type(WIRE_SUBMIT), DP_CLASS_SHARD);
	cr_assert_eq(dp_class_of_type(WIRE_ME_EVENT), DP_CLASS_BRIDGE);
	cr_assert_eq(dp_class_of_type(WIRE_EXEC_REPORT), DP_CLASS_CLIENT);
	cr_assert_eq(dp_class_of_type(WIRE_HYDRATE_USER), DP_CLASS_NONE);
	cr_assert_eq(dp_class_of_type(WIRE_TICK), DP_CLASS_NONE);
	cr_assert_eq(dp_class_of_type(999), DP_CLASS_NONE);
	cr_assert_eq(dp_class_of_type(WIRE_ADMIN_REPLY), DP_CLASS_CLIENT);
}

/* Goal: a client's routed transfer goes to the gateway; an addressed one to its shard. */
Test(dp_class, routed_transfer_goes_to_the_gateway)
{
	struct wire_transfer t;
	memset(&t, 0, sizeof(t));
	wire_hdr_init(&t.hdr, WIRE_TRANSFER, 3);
	cr_assert_eq(dp_class_of_msg(&t.hdr), DP_CLASS_SHARD);
	t.hdr.flags = WIRE_TRANSFER_F_ROUTE;
	cr_assert_eq(dp_class_of_msg(&t.hdr), DP_CLASS_GATEWAY);
	struct wire_new_order o;
	memset(&o, 0, sizeof(o));
	wire_hdr_init(&o.hdr, WIRE_NEW_ORDER, 0);
	cr_assert_eq(dp_class_of_msg(&o.hdr), DP_CLASS_GATEWAY);
}

Test(dp_idle, modes_parse_and_back_off)
{
	enum dp_idle_mode m;
	cr_assert_eq(dp_idle_mode_parse("busy", &m), 0);
	cr_assert_eq(m, DP_IDLE_BUSY);
	cr_assert_eq(dp_idle_mode_parse("sleep", &m), 0);
	cr_assert_eq(m, DP_IDLE_SLEEP);
	cr_assert_eq(dp_idle_mode_parse("nap", &m), -EINVAL);

	struct dp_idle_policy pol = { .mode = DP_IDLE_SLEEP, .spins = 3, .sleep_us_max = 4 };
	struct dp_idle idle;
	dp_idle_init(&idle, &pol);
	for (int i = 0; i < 3; i++)
		dp_idle_run(&idle, 0);
	cr_assert_eq(idle.sleeps, 0, "spins first");
	for (int i = 0; i < 5; i++)
		dp_idle_run(&idle, 0);
	cr_assert_eq(idle.sleeps, 5);
	cr_assert_eq(idle.sleep_us, 4, "doubling stops at the cap");
	dp_idle_run(&idle, 1);
	cr_assert_eq(idle.empty, 0);
	cr_assert_eq(idle.sleep_us, 1, "work resets the back-off");

	/* A first sleep: the back-off starts there and doubles to the cap; above the cap it is
	 * the cap. */
	struct dp_idle_policy floor = {
		.mode = DP_IDLE_SLEEP, .spins = 0, .sleep_us_max = 200, .sleep_us_min = 50};
	dp_idle_init(&idle, &floor);
	cr_assert_eq(idle.sleep_us, 50);
	dp_idle_run(&idle, 0);
	cr_assert_eq(idle.sleep_us, 100);
	dp_idle_run(&idle, 0);
	dp_idle_run(&idle, 0);
	cr_assert_eq(idle.sleep_us, 200, "the cap still holds");
	dp_idle_run(&idle, 1);
	cr_assert_eq(idle.sleep_us, 50, "work resets it to the first sleep");
	floor.sleep_us_min = 500;
	dp_idle_init(&idle, &floor);
	cr_assert_eq(idle.sleep_us, 200, "a first sleep above the cap is the cap");
}

Test(dp_duty, records_max_and_over)
{
	struct dp_duty d;
	dp_duty_init(&d, 100);
	dp_duty_record(&d, 0, 50, 1);
	dp_duty_record(&d, 100, 350, 2);
	dp_duty_record(&d, 400, 400, 0);
	cr_assert_eq(d.cycles, 3);
	cr_assert_eq(d.work_cycles, 2);
	cr_assert_eq(d.work_items, 3);
	cr_assert_eq(d.max_ns, 250);
	cr_assert_eq(d.over_count, 1);
}

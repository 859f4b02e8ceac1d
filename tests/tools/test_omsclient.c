/* SPDX-License-Identifier: Apache-2.0 */
/* libomsclient's public API (tools/libomsclient/omsclient.h), as a program outside the tree
 * uses it: everything through omsc_* and struct omsc_event, nothing of the wire. The node
 * is the fake node on 127.0.0.1 (fake_node.h): plain, or the gateway's session side with
 * the real session table. The test links the static library the tools link. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_node.h"
#include "tools/libomsclient/omsclient.h"

#define MS UINT64_C(1000000)
#define EVENTS_MAX 128
#define KEY_ID 7
#define KEY_ID_UNKNOWN 99

static struct fake_node node;
static struct omsc *oc;
static struct omsc_event events[EVENTS_MAX];
static uint32_t event_count;

static void
record(void *ctx, const struct omsc_event *ev)
{
	(void)ctx;
	if (event_count < EVENTS_MAX)
		events[event_count++] = *ev;
}

static void
config_plain(struct omsc_config *cfg, uint16_t port)
{
	omsc_config_init(cfg);
	cfg->host = "127.0.0.1";
	cfg->port = port;
	cfg->session_id = 4242;
	cfg->requests_max = 64;
	cfg->retry_first_ms = 20;
	cfg->retry_cap_ms = 40;
	cfg->retries_max = 6;
	cfg->give_up_ms = 2000;
	cfg->replay_after_ms = 20;
	cfg->replay_every_ms = 50;
}

static void
setup_node(void)
{
	memset(&node, 0, sizeof(node));
	cr_assert(eq(int, fake_node_start(&node), 0));
	struct omsc_config cfg;
	config_plain(&cfg, node.port);
	cr_assert(eq(int, omsc_open(&oc, &cfg), 0));
	event_count = 0;
}

static void
teardown(void)
{
	omsc_close(oc);
	oc = NULL;
	if (node.port != 0)
		fake_node_stop(&node);
	memset(&node, 0, sizeof(node));
}

/* Poll until pred holds or ms pass. */
static bool
poll_for(bool (*pred)(void), uint64_t ms)
{
	uint64_t end = omsc_now_ns() + ms * MS;
	while (!pred() && omsc_now_ns() < end)
		cr_assert(omsc_poll(oc, 10, record, NULL) >= 0);
	return pred();
}

static bool
none_tracked(void)
{
	return omsc_tracked(oc) == 0;
}

static bool
none_unanswered(void)
{
	return omsc_unanswered(oc) == 0;
}

/* The index of the first event of kind (and exec, when kind is EXEC) about cl_ord_id, or
 * -1. */
static int
find(uint8_t kind, uint8_t exec, uint64_t cl_ord_id)
{
	for (uint32_t i = 0; i < event_count; i++) {
		const struct omsc_event *e = &events[i];
		if (e->kind == kind && (kind != OMSC_EV_EXEC || e->exec == exec) &&
		    e->cl_ord_id == cl_ord_id)
			return (int)i;
	}
	return -1;
}

static struct omsc_order
limit(uint64_t user, uint64_t id, uint8_t tif, int64_t px, int64_t qty)
{
	struct omsc_order o = {
		.user = user,
		.cl_ord_id = id,
		.symbol = 1,
		.side = OMSC_SIDE_BUY,
		.type = OMSC_ORD_LIMIT,
		.tif = tif,
		.px = px,
		.qty = qty,
	};
	return o;
}

static void
new_order(uint64_t user, uint64_t id, uint8_t tif, int64_t px, int64_t qty, uint64_t tag)
{
	struct omsc_order o = limit(user, id, tif, px, qty);
	cr_assert(eq(int, omsc_new_order(oc, &o, tag), 0));
}

/* ---------------------------------------------------------------------------------------
 * The library without a node.
 * ------------------------------------------------------------------------------------- */

/* Goal: the version and ABI queries answer what the build says; the names are the wire's.
 * Method: compare with the project version meson passes in, and a few names. */
Test(omsclient, version_abi_and_names)
{
	cr_assert(eq(str, (char *)omsc_version(), OMSC_TEST_VERSION));
	cr_assert(eq(int, omsc_abi(), OMSC_ABI));
	cr_assert(eq(str, (char *)omsc_reason_name(OMSC_REASON_INSUFFICIENT_FUNDS),
		     "INSUFFICIENT_FUNDS"));
	cr_assert(eq(str, (char *)omsc_reason_name(OMSC_REASON_NONE), "NONE"));
	cr_assert(eq(str, (char *)omsc_reason_name(OMSC_REASON_SESSION_IDLE), "SESSION_IDLE"));
	cr_assert(eq(str, (char *)omsc_reason_name(OMSC_REASON_COUNT), "?"));
	cr_assert(eq(str, (char *)omsc_exec_name(OMSC_EXEC_CANCEL_REJECTED), "cancel_rejected"));
	cr_assert(eq(str, (char *)omsc_exec_name(0), "?"));
	cr_assert(eq(str, (char *)omsc_cause_name(OMSC_CAUSE_REPLACED), "replaced"));
	cr_assert(eq(str, (char *)omsc_side_name(OMSC_SIDE_SELL), "sell"));
	uint64_t t0 = omsc_now_ns();
	cr_assert(omsc_now_ns() >= t0);
}

/* Goal: a MAC key reads as its bytes in order; bad text is refused and leaves it alone. */
Test(omsclient, key_parse_hex)
{
	uint8_t key[OMSC_MAC_KEY_SIZE];
	cr_assert(eq(int, omsc_key_parse_hex("000102030405060708090A0b0c0d0e0f", key), 0));
	for (uint32_t i = 0; i < OMSC_MAC_KEY_SIZE; i++)
		cr_assert(eq(u8, key[i], (uint8_t)i));
	cr_assert(eq(int, omsc_key_parse_hex("0001", key), -EINVAL));
	cr_assert(eq(int, omsc_key_parse_hex("zz0102030405060708090a0b0c0d0e0f", key), -EINVAL));
	cr_assert(eq(int, omsc_key_parse_hex(NULL, key), -EINVAL));
	cr_assert(eq(u8, key[15], 15));
}

/* Goal: omsc_open refuses what cannot work, with the errno the header names, and a client
 * without a key has no session to log on to. */
Test(omsclient, open_refusals, .fini = teardown)
{
	struct omsc_config cfg;
	config_plain(&cfg, 7400);
	cfg.host = "not-an-address";
	cr_assert(eq(int, omsc_open(&oc, &cfg), -EINVAL));
	config_plain(&cfg, 7400);
	cfg.reserved[3] = 1;
	cr_assert(eq(int, omsc_open(&oc, &cfg), -EINVAL));
	config_plain(&cfg, 7400);
	cfg.frame_max = 64;
	cr_assert(eq(int, omsc_open(&oc, &cfg), -EINVAL));
	config_plain(&cfg, 7400);
	cfg.key_id = KEY_ID;
	cfg.key_file = "/nonexistent";
	cr_assert(eq(int, omsc_open(&oc, &cfg), -EINVAL)); /* not both */
	cfg.key_id = 0;
	cr_assert(eq(int, omsc_open(&oc, &cfg), -ENOENT));
	config_plain(&cfg, 7400);
	cfg.key_id = KEY_ID;
	cfg.mac_key[0] = 1; /* a session has its own MAC key */
	cr_assert(eq(int, omsc_open(&oc, &cfg), -EINVAL));

	config_plain(&cfg, 7400);
	cr_assert(eq(int, omsc_open(&oc, &cfg), 0));
	cr_assert(omsc_fd(oc) >= 0);
	cr_assert(omsc_local_port(oc) != 0);
	cr_assert(eq(u32, omsc_session_id(oc), 4242));
	cr_assert(eq(int, omsc_logon(oc, 10), -EINVAL));
	cr_assert(eq(int, omsc_logon_start(oc, 10), -EINVAL));
	cr_assert(eq(int, omsc_logon_status(oc), -EINVAL));
	cr_assert(eq(int, omsc_logout(oc), -ENOTCONN));
	cr_assert(not(omsc_session_up(oc)));
	cr_assert(eq(int, omsc_timeout_ms(oc), -1)); /* nothing pending */
	cr_assert(eq(int, omsc_poll(oc, -1, NULL, NULL), -EINVAL));
}

/* Goal: requests the node's decoder would refuse never leave (they would poison the whole
 * frame), duplicates and a full table are refused, and a refused request is not tracked.
 * Method: a silent port; bad enums, a reserved user, a duplicate id, a table of 2. */
Test(omsclient, submit_refusals, .fini = teardown)
{
	struct omsc_config cfg;
	config_plain(&cfg, 9); /* discard: nothing answers */
	cfg.requests_max = 2;
	cr_assert(eq(int, omsc_open(&oc, &cfg), 0));
	struct omsc_order o = limit(1, 1, OMSC_TIF_GTC, 100, 1);
	o.side = 3;
	cr_assert(eq(int, omsc_new_order(oc, &o, 0), -EINVAL));
	o = limit(1, 1, 9, 100, 1);
	cr_assert(eq(int, omsc_new_order(oc, &o, 0), -EINVAL));
	o = limit(1, 1, OMSC_TIF_GTC, 100, 1);
	o.stp = 4;
	cr_assert(eq(int, omsc_new_order(oc, &o, 0), -EINVAL));
	o = limit(UINT64_MAX, 1, OMSC_TIF_GTC, 100, 1);
	cr_assert(eq(int, omsc_new_order(oc, &o, 0), -EINVAL));
	cr_assert(eq(int, omsc_new_order(oc, NULL, 0), -EINVAL));
	struct omsc_transfer t = {.user = 1, .transfer_id = 1, .asset = 1, .amount = 5,
				  .shard = 2};
	cr_assert(eq(int, omsc_transfer(oc, &t, 0), -EINVAL)); /* a shard, not DIRECT */
	t.flags = 0x8;
	cr_assert(eq(int, omsc_transfer(oc, &t, 0), -EINVAL));
	cr_assert(eq(u32, omsc_tracked(oc), 0));

	o = limit(1, 1, 0, 100, 1); /* tif 0: GTC */
	cr_assert(eq(int, omsc_new_order(oc, &o, 11), 0));
	cr_assert(eq(int, omsc_new_order(oc, &o, 11), -EEXIST));
	cr_assert(eq(int, omsc_cancel(oc, 1, 2, 1, 12), 0));
	cr_assert(eq(int, omsc_amend(oc, 1, 3, 1, 1, 13), -ENOSPC));
	struct omsc_stats st;
	cr_assert(eq(sz, omsc_stats(oc, &st, sizeof(st)), sizeof(st)));
	cr_assert(eq(u64, st.table_full, 1));
	cr_assert(eq(u64, st.tracked, 2));
	cr_assert(eq(u64, st.unanswered, 2));

	struct omsc_request_info info;
	cr_assert(eq(int, omsc_request_get(oc, 1, 1, false, &info), 0));
	cr_assert(eq(u64, info.tag, 11));
	cr_assert(eq(u8, info.request, OMSC_REQ_NEW_ORDER));
	cr_assert(eq(u32, info.tries, 1));
	cr_assert(not(info.answered));
	cr_assert(eq(int, omsc_request_get(oc, 1, 1, true, &info), -ENOENT));
	cr_assert(eq(int, omsc_release(oc, 1, 2, false), 0));
	cr_assert(eq(int, omsc_release(oc, 1, 2, false), -ENOENT));
	cr_assert(eq(u32, omsc_tracked(oc), 1));

	/* A retransmit is due within retry_first_ms: the timeout says so. */
	cr_assert(eq(int, omsc_flush(oc), 0));
	int t_ms = omsc_timeout_ms(oc);
	cr_assert(t_ms >= 0 && t_ms <= 20, "%d", t_ms);
}

/* Goal: omsc_stats copies no more than the caller's size (an older program's struct). */
Test(omsclient, stats_copy_by_size, .fini = teardown)
{
	struct omsc_config cfg;
	config_plain(&cfg, 9);
	cr_assert(eq(int, omsc_open(&oc, &cfg), 0));
	struct omsc_order o = limit(1, 1, OMSC_TIF_GTC, 100, 1);
	cr_assert(eq(int, omsc_new_order(oc, &o, 0), 0));
	cr_assert(eq(int, omsc_flush(oc), 0));
	struct omsc_stats st;
	memset(&st, 0xaa, sizeof(st));
	cr_assert(eq(sz, omsc_stats(oc, &st, 2 * sizeof(uint64_t)), sizeof(struct omsc_stats)));
	cr_assert(eq(u64, st.frames_tx, 1));
	cr_assert(eq(u64, st.msgs_tx, 1));
	const uint8_t *bytes = (const uint8_t *)&st;
	for (size_t i = 2 * sizeof(uint64_t); i < sizeof(st); i++)
		cr_assert(eq(u8, bytes[i], 0xaa), "byte %zu", i);
}

/* ---------------------------------------------------------------------------------------
 * Order entry against the fake node.
 * ------------------------------------------------------------------------------------- */

/* Goal: an order's ACK and execution reports arrive as events with every field the node
 * sent, carry the order's tag while it is tracked, and a final report settles it.
 * Method: a GTC that rests (ACK, OPEN), then an IOC that fills (ACK, FILL done). */
Test(omsclient, order_ack_and_exec_fields, .init = setup_node, .fini = teardown)
{
	new_order(1, 5, OMSC_TIF_GTC, 100, 10, 77);
	cr_assert(poll_for(none_unanswered, 2000));
	int a = find(OMSC_EV_ACK, 0, 5);
	cr_assert(a >= 0);
	const struct omsc_event *e = &events[a];
	cr_assert(e->matched);
	cr_assert(eq(u8, e->request, OMSC_REQ_NEW_ORDER));
	cr_assert(eq(u64, e->tag, 77));
	cr_assert(eq(u32, e->tries, 1));
	cr_assert(e->first_send_ns != 0 && e->first_send_ns <= e->now_ns);
	cr_assert(eq(u64, e->user, 1));
	cr_assert(eq(u16, e->order_shard, 1));
	cr_assert(eq(u64, e->order_seq, 5));
	cr_assert(eq(u64, e->order_id, UINT64_C(1) << 48 | 5));
	cr_assert(eq(u64, e->seq, 1));
	cr_assert(eq(u64, e->time_ns, 1));
	int op = find(OMSC_EV_EXEC, OMSC_EXEC_OPEN, 5);
	cr_assert(op > a);
	e = &events[op];
	cr_assert(e->matched);
	cr_assert(eq(u64, e->tag, 77));
	cr_assert(eq(u64, e->seq, 2));
	cr_assert(eq(u32, e->symbol, 1));
	cr_assert(eq(u8, e->side, OMSC_SIDE_BUY));
	cr_assert(eq(i64, e->last_px, 100));
	cr_assert(eq(i64, e->leaves_qty, 10));
	cr_assert(eq(u64, e->seq_gap, 0));
	cr_assert(eq(u32, omsc_tracked(oc), 1)); /* resting: still tracked */
	cr_assert(eq(u64, omsc_user_seq(oc, 1), 2));

	new_order(1, 6, OMSC_TIF_IOC, 101, 3, 78);
	cr_assert(poll_for(none_unanswered, 2000));
	uint64_t end = omsc_now_ns() + 2000 * MS;
	while (find(OMSC_EV_EXEC, OMSC_EXEC_FILL, 6) < 0 && omsc_now_ns() < end)
		omsc_poll(oc, 10, record, NULL);
	int f = find(OMSC_EV_EXEC, OMSC_EXEC_FILL, 6);
	cr_assert(f >= 0);
	cr_assert(eq(int, find(OMSC_EV_EXEC, OMSC_EXEC_DONE, 6), -1));
	cr_assert(not(events[op].done)); /* resting */
	e = &events[f];
	cr_assert(e->done);
	cr_assert(eq(i64, e->last_px, 101));
	cr_assert(eq(i64, e->last_qty, 3));
	cr_assert(eq(i64, e->cum_qty, 3));
	cr_assert(eq(i64, e->fee, 1));
	cr_assert(eq(u8, e->liquidity, 2));
	cr_assert(eq(u64, e->tag, 78));
	cr_assert(e->matched);
	cr_assert(eq(u32, omsc_tracked(oc), 1)); /* the IOC settled by its last FILL */
	struct omsc_request_info info;
	cr_assert(eq(int, omsc_request_get(oc, 1, 6, false, &info), -ENOENT));
	cr_assert(eq(int, omsc_request_get(oc, 1, 5, false, &info), 0));
	cr_assert(info.answered);
	cr_assert(info.answer_ns >= info.first_send_ns);
	struct omsc_stats st;
	omsc_stats(oc, &st, sizeof(st));
	cr_assert(eq(u64, st.acks, 2));
	cr_assert(eq(u64, st.execs, 2));
	cr_assert(eq(u64, st.decode_errors, 0));
	cr_assert(eq(u64, st.unmatched, 0));
}

/* Goal: against a node of the earlier release (no done flag: a DONE report after an order's
 * last report) an order is settled by its DONE, not before. Method: the fake node's
 * legacy_done; an IOC that fills (ACK, FILL, DONE). */
Test(omsclient, earlier_node_done_report_settles, .init = setup_node, .fini = teardown)
{
	atomic_store(&node.legacy_done, 1);
	new_order(1, 6, OMSC_TIF_IOC, 101, 3, 78);
	cr_assert(poll_for(none_unanswered, 2000));
	uint64_t end = omsc_now_ns() + 2000 * MS;
	while (find(OMSC_EV_EXEC, OMSC_EXEC_DONE, 6) < 0 && omsc_now_ns() < end)
		omsc_poll(oc, 10, record, NULL);
	int f = find(OMSC_EV_EXEC, OMSC_EXEC_FILL, 6);
	int d = find(OMSC_EV_EXEC, OMSC_EXEC_DONE, 6);
	cr_assert(f >= 0 && d > f);
	cr_assert(not(events[f].done));
	cr_assert(events[f].matched); /* still tracked at its FILL ... */
	cr_assert(events[d].done);
	cr_assert(events[d].matched); /* ... settled by the DONE */
	cr_assert(eq(u64, events[d].tag, 78));
	cr_assert(eq(u32, omsc_tracked(oc), 0));
	cr_assert(eq(u64, events[d].seq, 3));
}

/* Goal: a NAK and a rejected order are events with their reason, and settle the request.
 * Method: user 666 is NAKed INSUFFICIENT_FUNDS, px 13 is REJECTED OUTSIDE_BAND. */
Test(omsclient, nak_and_reject, .init = setup_node, .fini = teardown)
{
	new_order(666, 1, OMSC_TIF_GTC, 100, 1, 1);
	new_order(2, 2, OMSC_TIF_GTC, 13, 1, 2);
	cr_assert(poll_for(none_tracked, 2000));
	int n = find(OMSC_EV_NAK, 0, 1);
	cr_assert(n >= 0);
	cr_assert(eq(u16, events[n].reason, OMSC_REASON_INSUFFICIENT_FUNDS));
	cr_assert(eq(u64, events[n].user, 666));
	cr_assert(events[n].matched);
	cr_assert(eq(u64, events[n].seq, 1));
	int r = find(OMSC_EV_EXEC, OMSC_EXEC_REJECTED, 2);
	cr_assert(r >= 0);
	cr_assert(eq(u16, events[r].reason, OMSC_REASON_OUTSIDE_BAND));
	cr_assert(eq(str, (char *)omsc_reason_name(events[r].reason), "OUTSIDE_BAND"));
	cr_assert(events[r].matched);
	cr_assert(eq(u64, events[r].tag, 2));
}

/* Goal: amend, cancel-replace and cancel are each answered (ACK settles a cancel or an
 * amend), their effect arrives as reports on the target order under its tag, and an
 * unknown target is NAKed. Method: rest order 1, amend it (2), replace it by 3, cancel 3
 * (4), cancel an order that does not exist (5). */
Test(omsclient, cancel_amend_replace, .init = setup_node, .fini = teardown)
{
	new_order(4, 1, OMSC_TIF_GTC, 100, 10, 100);
	cr_assert(poll_for(none_unanswered, 2000));
	cr_assert(eq(int, omsc_amend(oc, 4, 2, 1, 5, 200), 0));
	cr_assert(poll_for(none_unanswered, 2000));
	uint64_t end = omsc_now_ns() + 2000 * MS;
	while (find(OMSC_EV_EXEC, OMSC_EXEC_AMENDED, 1) < 0 && omsc_now_ns() < end)
		omsc_poll(oc, 10, record, NULL);
	int a = find(OMSC_EV_ACK, 0, 2);
	cr_assert(a >= 0);
	cr_assert(eq(u8, events[a].request, OMSC_REQ_AMEND));
	cr_assert(eq(u64, events[a].tag, 200));
	int am = find(OMSC_EV_EXEC, OMSC_EXEC_AMENDED, 1);
	cr_assert(am >= 0);
	cr_assert(eq(u64, events[am].tag, 100)); /* the target's */
	cr_assert(eq(u32, omsc_tracked(oc), 1)); /* the amend settled by its ACK */

	cr_assert(eq(int, omsc_cancel_replace(oc, 4, 3, 1, 99, 5, 300), 0));
	end = omsc_now_ns() + 2000 * MS;
	while (find(OMSC_EV_EXEC, OMSC_EXEC_OPEN, 3) < 0 && omsc_now_ns() < end)
		omsc_poll(oc, 10, record, NULL);
	int c = find(OMSC_EV_EXEC, OMSC_EXEC_CANCELLED, 1);
	cr_assert(c >= 0);
	cr_assert(eq(u8, events[c].cause, OMSC_CAUSE_REPLACED));
	cr_assert(eq(i64, events[c].last_qty, 5));
	cr_assert(events[c].done);
	cr_assert(eq(u64, events[c].tag, 100));
	int o = find(OMSC_EV_EXEC, OMSC_EXEC_OPEN, 3);
	cr_assert(o >= 0);
	cr_assert(eq(u64, events[o].tag, 300));
	cr_assert(eq(u8, events[o].request, OMSC_REQ_CANCEL_REPLACE));
	cr_assert(eq(i64, events[o].last_px, 99));
	/* Order 1 settled by its CANCELLED (done); the replacement rests. */
	cr_assert(eq(u32, omsc_tracked(oc), 1));

	cr_assert(eq(int, omsc_cancel(oc, 4, 4, 3, 400), 0));
	end = omsc_now_ns() + 2000 * MS;
	while (find(OMSC_EV_EXEC, OMSC_EXEC_CANCELLED, 3) < 0 && omsc_now_ns() < end)
		omsc_poll(oc, 10, record, NULL);
	cr_assert(find(OMSC_EV_ACK, 0, 4) >= 0);
	int cc = find(OMSC_EV_EXEC, OMSC_EXEC_CANCELLED, 3);
	cr_assert(cc >= 0);
	cr_assert(eq(u8, events[cc].cause, OMSC_CAUSE_USER));
	cr_assert(events[cc].done);
	cr_assert(eq(u32, omsc_tracked(oc), 0));

	cr_assert(eq(int, omsc_cancel(oc, 4, 5, 999, 500), 0));
	cr_assert(poll_for(none_tracked, 2000));
	int n = find(OMSC_EV_NAK, 0, 5);
	cr_assert(n >= 0);
	cr_assert(eq(u16, events[n].reason, OMSC_REASON_UNKNOWN_ORDER));
	cr_assert(eq(u8, events[n].request, OMSC_REQ_CANCEL));
	/* Every numbered answer of user 4 arrived, in order. */
	cr_assert(eq(u64, omsc_user_contig(oc, 4), omsc_user_seq(oc, 4)));
}

/* Goal: a deposit and a withdrawal, routed and addressed, are answered by ADMIN_REPLY
 * events that name the transfer and its user. */
Test(omsclient, transfers, .init = setup_node, .fini = teardown)
{
	struct omsc_transfer dep = {.user = 3, .transfer_id = 31, .asset = 2, .amount = 5000};
	struct omsc_transfer wd = {.user = 3, .transfer_id = 32, .asset = 2, .amount = -700,
				   .shard = 1, .flags = OMSC_TRANSFER_DIRECT};
	cr_assert(eq(int, omsc_transfer(oc, &dep, 9), 0));
	cr_assert(eq(int, omsc_transfer(oc, &wd, 10), 0));
	cr_assert(eq(int, omsc_transfer(oc, &wd, 10), -EEXIST));
	struct omsc_request_info info;
	cr_assert(eq(int, omsc_request_get(oc, 0, 32, true, &info), 0));
	cr_assert(eq(u8, info.request, OMSC_REQ_TRANSFER));
	cr_assert(poll_for(none_tracked, 2000));
	cr_assert(eq(u32, event_count, 2));
	for (uint32_t i = 0; i < 2; i++) {
		const struct omsc_event *e = &events[i];
		cr_assert(eq(u8, e->kind, OMSC_EV_ADMIN_REPLY));
		cr_assert(e->matched);
		cr_assert(eq(u8, e->request, OMSC_REQ_TRANSFER));
		cr_assert(eq(u64, e->user, 3));
		cr_assert(eq(u16, e->reason, OMSC_REASON_NONE));
		if (e->transfer_id == 31) {
			cr_assert(eq(u64, e->value, 5000));
			cr_assert(eq(u64, e->tag, 9));
		} else {
			cr_assert(eq(u64, e->transfer_id, 32));
			cr_assert(eq(u64, e->value, 700));
			cr_assert(eq(u64, e->tag, 10));
		}
	}
}

/* Goal: a lost request, and lost answers, are recovered by retransmitting the request
 * byte for byte: the node deduplicates it and answers again. Method: the node drops the
 * first frame; then it loses both answers (ACK, OPEN) of the next order. */
Test(omsclient, retransmit_recovers_lost_frames, .init = setup_node, .fini = teardown)
{
	atomic_store(&node.drop_frames, 1);
	new_order(1, 1, OMSC_TIF_GTC, 100, 1, 0);
	cr_assert(poll_for(none_unanswered, 2000));
	int a = find(OMSC_EV_ACK, 0, 1);
	cr_assert(a >= 0);
	cr_assert(events[a].tries >= 2, "tries %u", events[a].tries);
	struct omsc_stats st;
	omsc_stats(oc, &st, sizeof(st));
	cr_assert(st.retransmits >= 1);
	cr_assert(eq(u64, atomic_load(&node.duplicates), 0));

	event_count = 0;
	atomic_store(&node.drop_answers, 2);
	new_order(1, 2, OMSC_TIF_GTC, 100, 1, 0);
	cr_assert(poll_for(none_unanswered, 2000));
	a = find(OMSC_EV_ACK, 0, 2);
	cr_assert(a >= 0);
	cr_assert(events[a].tries >= 2, "tries %u", events[a].tries);
	cr_assert(atomic_load(&node.duplicates) >= 1);
	/* The lost OPEN is brought back by the replay of the hole the resent ACK showed. */
	uint64_t end = omsc_now_ns() + 2000 * MS;
	while (find(OMSC_EV_EXEC, OMSC_EXEC_OPEN, 2) < 0 && omsc_now_ns() < end)
		omsc_poll(oc, 10, record, NULL);
	cr_assert(find(OMSC_EV_EXEC, OMSC_EXEC_OPEN, 2) >= 0);
}

static bool
fill_seen(void)
{
	return find(OMSC_EV_EXEC, OMSC_EXEC_FILL, 1) >= 0;
}

/* Goal: a hole in a user's answer numbers is seen (seq_gap) and filled by the automatic
 * report replay (seq_fill), without the caller asking. Method: the node (of the earlier
 * release: a report after the FILL to reveal the hole) loses the FILL of an IOC; its DONE
 * shows a gap of 1; after replay_after_ms the library asks, the node re-sends the FILL. */
Test(omsclient, seq_gap_recovered_by_replay, .init = setup_node, .fini = teardown)
{
	atomic_store(&node.legacy_done, 1);
	atomic_store(&node.drop_execs, 1);
	new_order(1, 1, OMSC_TIF_IOC, 100, 2, 5);
	cr_assert(poll_for(fill_seen, 2000));
	int d = find(OMSC_EV_EXEC, OMSC_EXEC_DONE, 1);
	int f = find(OMSC_EV_EXEC, OMSC_EXEC_FILL, 1);
	cr_assert(d >= 0 && f > d);
	cr_assert(eq(u64, events[d].seq_gap, 1));
	cr_assert(events[d].matched); /* the DONE settles the IOC ... */
	cr_assert(events[f].seq_fill);
	cr_assert(not(events[f].matched)); /* ... so the late FILL is no request's any more */
	cr_assert(eq(u64, events[f].seq, 2));
	cr_assert(eq(i64, events[f].last_qty, 2));
	struct omsc_stats st;
	omsc_stats(oc, &st, sizeof(st));
	cr_assert(st.replay_requests >= 1);
	cr_assert(eq(u64, st.seq_gaps, 1));
	cr_assert(eq(u64, st.seq_filled, 1));
	cr_assert(eq(u64, omsc_user_contig(oc, 1), 3));
	cr_assert(atomic_load(&node.replays_rx) >= 1);

	/* An explicit replay of what was seen: repeats. */
	event_count = 0;
	cr_assert(eq(int, omsc_replay(oc, 1, 1, 3), 0));
	cr_assert(eq(int, omsc_replay(oc, 1, 0, 3), -EINVAL));
	cr_assert(eq(int, omsc_replay(oc, 1, 3, 2), -EINVAL));
	uint64_t end = omsc_now_ns() + 1000 * MS;
	while (event_count < 3 && omsc_now_ns() < end)
		omsc_poll(oc, 10, record, NULL);
	cr_assert(eq(u32, event_count, 3));
	for (uint32_t i = 0; i < 3; i++)
		cr_assert(events[i].seq_repeat);
	cr_assert(eq(int, omsc_replay_tail(oc), 1)); /* one user seen */
}

static bool
gave_up_seen(void)
{
	for (uint32_t i = 0; i < event_count; i++)
		if (events[i].kind == OMSC_EV_GAVE_UP && events[i].request == OMSC_REQ_TRANSFER)
			return true;
	return false;
}

/* Goal: a request nobody answers is retransmitted retries_max times, then given up with
 * one GAVE_UP event naming it, and forgotten. Method: a silent node, an order and a
 * transfer. */
Test(omsclient, give_up, .init = setup_node, .fini = teardown)
{
	atomic_store(&node.silent, 1);
	new_order(8, 81, OMSC_TIF_GTC, 100, 1, 808);
	struct omsc_transfer t = {.user = 8, .transfer_id = 82, .asset = 1, .amount = 1};
	cr_assert(eq(int, omsc_transfer(oc, &t, 909), 0));
	cr_assert(poll_for(none_tracked, 3000));
	cr_assert(poll_for(gave_up_seen, 10));
	cr_assert(eq(u32, event_count, 2));
	for (uint32_t i = 0; i < 2; i++) {
		const struct omsc_event *e = &events[i];
		cr_assert(eq(u8, e->kind, OMSC_EV_GAVE_UP));
		cr_assert(not(e->matched));
		cr_assert(eq(u64, e->user, 8));
		cr_assert(eq(u32, e->tries, 7)); /* the first send and retries_max = 6 */
		if (e->request == OMSC_REQ_NEW_ORDER) {
			cr_assert(eq(u64, e->cl_ord_id, 81));
			cr_assert(eq(u64, e->tag, 808));
		} else {
			cr_assert(eq(u64, e->transfer_id, 82));
			cr_assert(eq(u64, e->tag, 909));
		}
	}
	struct omsc_stats st;
	omsc_stats(oc, &st, sizeof(st));
	cr_assert(eq(u64, st.gave_up, 2));
	cr_assert(eq(u64, st.retransmits, 12));
	cr_assert(eq(int, omsc_timeout_ms(oc), -1));
}

struct reentry {
	int poll_rc;    /* omsc_poll from inside the callback */
	int logon_rc;   /* omsc_logon from inside the callback */
	int submit_rc;  /* omsc_new_order from inside the callback */
	bool done;      /* the order submitted from the callback was answered */
};

static void
reenter(void *ctx, const struct omsc_event *ev)
{
	struct reentry *r = ctx;
	record(NULL, ev);
	if (ev->kind == OMSC_EV_ACK && ev->cl_ord_id == 1) {
		r->poll_rc = omsc_poll(oc, 0, NULL, NULL);
		r->logon_rc = omsc_logon(oc, 10);
		struct omsc_order o = limit(1, 2, OMSC_TIF_GTC, 100, 1);
		r->submit_rc = omsc_new_order(oc, &o, 0);
	}
	if (ev->kind == OMSC_EV_ACK && ev->cl_ord_id == 2)
		r->done = true;
}

/* Goal: a callback may queue requests but not re-enter the loop. Method: on the first
 * ACK, poll and logon are refused -EBUSY and a new order is taken and answered. */
Test(omsclient, callback_reentry, .init = setup_node, .fini = teardown)
{
	struct reentry r = {0};
	new_order(1, 1, OMSC_TIF_GTC, 100, 1, 0);
	uint64_t end = omsc_now_ns() + 2000 * MS;
	while (!r.done && omsc_now_ns() < end)
		omsc_poll(oc, 10, reenter, &r);
	cr_assert(eq(int, r.poll_rc, -EBUSY));
	cr_assert(eq(int, r.logon_rc, -EBUSY));
	cr_assert(eq(int, r.submit_rc, 0));
	cr_assert(r.done);
}

/* Goal: the fd and omsc_timeout_ms drive an external poll loop: the fd turns readable
 * when an answer is queued and omsc_tick runs the timers. */
Test(omsclient, external_poll_loop, .init = setup_node, .fini = teardown)
{
	new_order(1, 1, OMSC_TIF_GTC, 100, 1, 0);
	cr_assert(eq(int, omsc_tick(oc, record, NULL), 0)); /* flushes */
	uint64_t end = omsc_now_ns() + 2000 * MS;
	while (find(OMSC_EV_EXEC, OMSC_EXEC_OPEN, 1) < 0 && omsc_now_ns() < end) {
		struct pollfd p = {.fd = omsc_fd(oc), .events = POLLIN};
		int t = omsc_timeout_ms(oc);
		cr_assert(t >= -1);
		if (poll(&p, 1, t < 0 || t > 50 ? 50 : t) > 0)
			cr_assert(omsc_poll(oc, 0, record, NULL) >= 1);
		else
			cr_assert(omsc_tick(oc, record, NULL) >= 0);
	}
	cr_assert(find(OMSC_EV_ACK, 0, 1) >= 0);
	cr_assert(find(OMSC_EV_EXEC, OMSC_EXEC_OPEN, 1) >= 0);
}

/* ---------------------------------------------------------------------------------------
 * Sessions: the fake node plays the gateway with the real session table.
 * ------------------------------------------------------------------------------------- */

static struct auth_key gw_key;
static struct auth_keys gw_keys = {.keys = &gw_key, .count = 1, .cap = 1};
static char key_path[64];

static void key_file_write(void);

static void
secret_fill(uint8_t out[OMSC_SECRET_SIZE])
{
	for (uint32_t i = 0; i < OMSC_SECRET_SIZE; i++)
		out[i] = (uint8_t)(0xa0 + i);
}

static void
setup_gateway(void)
{
	memset(&node, 0, sizeof(node));
	memset(&gw_key, 0, sizeof(gw_key));
	gw_key.key_id = KEY_ID;
	secret_fill(gw_key.secret);
	gw_key.perms = AUTH_P_ALL;
	gw_key.all_users = true;
	cr_assert(eq(int, fake_node_sessions(&node, &gw_keys, 0, 0, 0), 0));
	cr_assert(eq(int, fake_node_start(&node), 0));
	event_count = 0;
	key_path[0] = '\0';
}

static void
teardown_gateway(void)
{
	teardown();
	if (key_path[0] != '\0')
		unlink(key_path);
}

static void
open_session(uint64_t key_id, bool relogon, uint32_t give_up_ms)
{
	struct omsc_config cfg;
	config_plain(&cfg, node.port);
	cfg.key_id = key_id;
	secret_fill(cfg.secret);
	cfg.relogon = relogon;
	cfg.logon_retry_ms = 100;
	cfg.retry_first_ms = 200;
	cfg.retry_cap_ms = 400;
	cfg.give_up_ms = give_up_ms;
	cr_assert(eq(int, omsc_open(&oc, &cfg), 0));
	memset(cfg.secret, 0, sizeof(cfg.secret));
}

static int
find_session(uint8_t what)
{
	for (uint32_t i = 0; i < event_count; i++)
		if (events[i].kind == OMSC_EV_SESSION && events[i].session == what)
			return (int)i;
	return -1;
}

/* Goal: a blocking logon is accepted with the right key and refused with an unknown one
 * (BAD_KEY, as the status and the reason say); logged on, orders are answered in the
 * session; a logout ends it. A key file serves as well. */
Test(omsclient_session, logon_accepted_and_refused, .init = setup_gateway,
     .fini = teardown_gateway)
{
	open_session(KEY_ID, false, 3000);
	cr_assert(eq(int, omsc_logon_status(oc), -ENOTCONN));
	cr_assert(eq(int, omsc_logon(oc, 2000), 0));
	cr_assert(omsc_session_up(oc));
	cr_assert(eq(int, omsc_logon_status(oc), 0));
	cr_assert(eq(u32, omsc_heartbeat_ms(oc), 1000));
	cr_assert(eq(int, omsc_logon(oc, 2000), 0)); /* already */
	new_order(5, 1, OMSC_TIF_GTC, 100, 1, 0);
	cr_assert(poll_for(none_unanswered, 2000));
	cr_assert(find(OMSC_EV_ACK, 0, 1) >= 0);
	cr_assert(atomic_load(&node.session_frames) >= 1);
	cr_assert(eq(int, omsc_logout(oc), 0));
	cr_assert(eq(int, omsc_logon_status(oc), -ENOTCONN));
	cr_assert(eq(int, omsc_logout(oc), -ENOTCONN));
	omsc_close(oc);

	open_session(KEY_ID_UNKNOWN, false, 3000);
	cr_assert(eq(int, omsc_logon(oc, 2000), -EACCES));
	cr_assert(eq(int, omsc_logon_status(oc), -EACCES));
	cr_assert(eq(u16, omsc_logon_reason(oc), OMSC_REASON_BAD_KEY));
	cr_assert(not(omsc_session_up(oc)));
	omsc_close(oc);

	/* The key file: one line of the node's key file. */
	key_file_write();
	uint8_t secret[OMSC_SECRET_SIZE];
	secret_fill(secret);
	struct omsc_config cfg;
	config_plain(&cfg, node.port);
	char why[128];
	cr_assert(eq(int, omsc_key_file_load(key_path, &cfg, why, sizeof(why)), 0));
	cr_assert(eq(u64, cfg.key_id, KEY_ID));
	cr_assert(eq(int, memcmp(cfg.secret, secret, sizeof(secret)), 0));
	cr_assert(eq(int, omsc_key_file_load("/dev/null", &cfg, why, sizeof(why)), -EINVAL));
	cr_assert(not(eq(ptr, strstr(why, "/dev/null"), NULL)), "%s", why);
	omsc_config_init(&cfg);
	config_plain(&cfg, node.port);
	cfg.key_file = key_path;
	cr_assert(eq(int, omsc_open(&oc, &cfg), 0));
	cr_assert(eq(int, omsc_logon(oc, 2000), 0));
	cr_assert(eq(u64, atomic_load(&node.logons), 2));
}

/* Write the test key as a key file (a line of the node's), at key_path. */
static void
key_file_write(void)
{
	snprintf(key_path, sizeof(key_path), "/tmp/omsc-test-key-%d", (int)getpid());
	FILE *f = fopen(key_path, "w");
	cr_assert(not(eq(ptr, f, NULL)));
	uint8_t secret[OMSC_SECRET_SIZE];
	secret_fill(secret);
	fprintf(f, "# a comment\n%d ", KEY_ID);
	for (uint32_t i = 0; i < OMSC_SECRET_SIZE; i++)
		fprintf(f, "%02x", secret[i]);
	fputs(" all *\n", f);
	fclose(f);
}

/* Goal: the documented example (tools/libomsclient/example.c), a program built like one
 * outside the tree against the shared library, does what docs/tools.md says: logs on with
 * a key file, funds the user, sends an IOC that fills, and exits 0 once it is done. */
Test(omsclient_session, example_program, .init = setup_gateway, .fini = teardown_gateway)
{
	const char *prog = getenv("OMSC_EXAMPLE");
	cr_assert(not(eq(ptr, (void *)prog, NULL)), "OMSC_EXAMPLE is not set");
	key_file_write();
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s 127.0.0.1 %u %s 42 2>&1", prog, node.port, key_path);
	FILE *p = popen(cmd, "r");
	cr_assert(not(eq(ptr, p, NULL)));
	char out[4096];
	size_t len = fread(out, 1, sizeof(out) - 1, p);
	out[len] = '\0';
	int status = pclose(p);
	cr_assert(eq(int, status, 0), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, ": NONE, balance 100000\n"), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, "fill "), NULL)), "%s", out);
	cr_assert(not(eq(ptr, strstr(out, " leaves 0 done\n"), NULL)), "%s", out);
	cr_assert(eq(u64, atomic_load(&node.logons), 1));
	/* The program's LOGOUT is a datagram the fake node's thread takes in its own time:
	 * on a loaded host the program can exit before it has. */
	uint64_t end = omsc_now_ns() + 2000 * MS;
	while (atomic_load(&node.logouts_rx) == 0 && omsc_now_ns() < end)
		sched_yield();
	cr_assert(eq(u64, atomic_load(&node.logouts_rx), 1));
}

static bool
logon_settled(void)
{
	return omsc_logon_status(oc) != -EINPROGRESS;
}

/* Goal: the non-blocking logon: started, polled, its answer delivered once as an event;
 * an order queued before it goes once the session is up. Refused and unanswered logons
 * end with their status and event. */
Test(omsclient_session, logon_non_blocking, .init = setup_gateway, .fini = teardown_gateway)
{
	open_session(KEY_ID, false, 3000);
	cr_assert(eq(int, omsc_logon_start(oc, 0), -EINVAL));
	cr_assert(eq(int, omsc_logon_start(oc, 2000), 0));
	cr_assert(eq(int, omsc_logon_status(oc), -EINPROGRESS));
	cr_assert(eq(int, omsc_logon_start(oc, 2000), 0)); /* pending already */
	new_order(5, 1, OMSC_TIF_GTC, 100, 1, 0); /* tracked, sent once logged on */
	cr_assert(poll_for(logon_settled, 2000));
	cr_assert(eq(int, omsc_logon_status(oc), 0));
	cr_assert(poll_for(none_unanswered, 2000));
	int l = find_session(OMSC_SESSION_LOGON);
	cr_assert(l >= 0);
	cr_assert(eq(u16, events[l].reason, OMSC_REASON_NONE));
	cr_assert(eq(u32, events[l].session_id, 4242));
	cr_assert(not(events[l].session_ended));
	uint32_t logons = 0;
	for (uint32_t i = 0; i < event_count; i++)
		logons += events[i].kind == OMSC_EV_SESSION;
	cr_assert(eq(u32, logons, 1));
	cr_assert(find(OMSC_EV_ACK, 0, 1) > l);
	omsc_close(oc);

	event_count = 0;
	open_session(KEY_ID_UNKNOWN, false, 3000);
	cr_assert(eq(int, omsc_logon_start(oc, 2000), 0));
	cr_assert(poll_for(logon_settled, 2000));
	cr_assert(eq(int, omsc_logon_status(oc), -EACCES));
	l = find_session(OMSC_SESSION_LOGON);
	cr_assert(l >= 0);
	cr_assert(eq(u16, events[l].reason, OMSC_REASON_BAD_KEY));
	cr_assert(not(events[l].session_ended));
	omsc_close(oc);

	event_count = 0;
	atomic_store(&node.silent, 1);
	open_session(KEY_ID, false, 3000);
	cr_assert(eq(int, omsc_logon_start(oc, 300), 0));
	cr_assert(poll_for(logon_settled, 2000));
	cr_assert(eq(int, omsc_logon_status(oc), -ETIMEDOUT));
	l = find_session(OMSC_SESSION_LOGON_TIMEOUT);
	cr_assert(l >= 0);
	cr_assert(not(events[l].session_ended)); /* it never began */
	struct omsc_stats st;
	omsc_stats(oc, &st, sizeof(st));
	cr_assert(st.logons_sent >= 3, "%lu", (unsigned long)st.logons_sent); /* resent */
	cr_assert(eq(u64, st.session_ended, 0));
}

static bool
session_down(void)
{
	return !omsc_session_up(oc);
}

/* Goal: the node ending the session without relogon is one SESSION LOGOUT event with
 * session_ended and the node's reason. Method: the node answers the next frame with
 * LOGOUT KEY_REVOKED. */
Test(omsclient_session, node_ends_session, .init = setup_gateway, .fini = teardown_gateway)
{
	open_session(KEY_ID, false, 3000);
	cr_assert(eq(int, omsc_logon(oc, 2000), 0));
	atomic_store(&node.logout_reason, OMSC_REASON_KEY_REVOKED);
	new_order(5, 1, OMSC_TIF_GTC, 100, 1, 0);
	cr_assert(poll_for(session_down, 2000));
	cr_assert(eq(u32, event_count, 1));
	cr_assert(eq(u8, events[0].kind, OMSC_EV_SESSION));
	cr_assert(eq(u8, events[0].session, OMSC_SESSION_LOGOUT));
	cr_assert(eq(u16, events[0].reason, OMSC_REASON_KEY_REVOKED));
	cr_assert(events[0].session_ended);
	cr_assert(eq(int, omsc_logon_status(oc), -ENOTCONN));
	cr_assert(eq(u32, omsc_unanswered(oc), 1)); /* tracked: a new logon would send it */
}

static bool
answered_and_up(void)
{
	return omsc_unanswered(oc) == 0 && omsc_session_up(oc);
}

/* Goal: with relogon, the node losing the session (UNKNOWN_SESSION) is followed by a new
 * logon and the unanswered order is answered; the events say so, and nothing ended. */
Test(omsclient_session, relogon_after_unknown_session, .init = setup_gateway,
     .fini = teardown_gateway)
{
	open_session(KEY_ID, true, 3000);
	cr_assert(eq(int, omsc_logon(oc, 2000), 0));
	atomic_store(&node.forget_sessions, 1);
	new_order(5, 1, OMSC_TIF_GTC, 100, 1, 0);
	cr_assert(poll_for(answered_and_up, 3000));
	int r = find_session(OMSC_SESSION_REJECT);
	cr_assert(r >= 0);
	cr_assert(eq(u16, events[r].reason, OMSC_REASON_UNKNOWN_SESSION));
	cr_assert(not(events[r].session_ended));
	int l = find_session(OMSC_SESSION_LOGON);
	cr_assert(l > r);
	cr_assert(eq(u16, events[l].reason, OMSC_REASON_NONE));
	cr_assert(find(OMSC_EV_ACK, 0, 1) > l);
	struct omsc_stats st;
	omsc_stats(oc, &st, sizeof(st));
	cr_assert(eq(u64, st.relogons, 1));
	cr_assert(eq(u64, st.session_ended, 0));
}

static bool
timeout_seen(void)
{
	return find_session(OMSC_SESSION_LOGON_TIMEOUT) >= 0;
}

/* Goal: a relogon that never gets its answer ends the session after give_up_ms: a
 * LOGON_TIMEOUT event with session_ended. Method: the node loses every LOGON_REPLY after
 * it forgot the session. */
Test(omsclient_session, relogon_unanswered_ends_session, .init = setup_gateway,
     .fini = teardown_gateway)
{
	open_session(KEY_ID, true, 500);
	cr_assert(eq(int, omsc_logon(oc, 2000), 0));
	atomic_store(&node.drop_logon_replies, 1000);
	atomic_store(&node.forget_sessions, 1);
	new_order(5, 1, OMSC_TIF_GTC, 100, 1, 0);
	cr_assert(poll_for(timeout_seen, 3000));
	int t = find_session(OMSC_SESSION_LOGON_TIMEOUT);
	cr_assert(events[t].session_ended);
	cr_assert(eq(int, omsc_logon_status(oc), -ETIMEDOUT));
	struct omsc_stats st;
	omsc_stats(oc, &st, sizeof(st));
	cr_assert(eq(u64, st.session_ended, 1));
	cr_assert(st.logons_sent >= 3);
}

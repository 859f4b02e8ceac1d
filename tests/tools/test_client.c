/* SPDX-License-Identifier: Apache-2.0 */
/* The order-entry client (tools/client.h): frame building, matching answers to requests,
 * retransmit and give-up bookkeeping, egress seq gaps, sessions (logon, session frames,
 * rejects, relogon, heartbeats, key files). Over real UDP sockets on 127.0.0.1; the node
 * side is a silent socket or the fake node (fake_node.h), as the gateway with the real
 * session table for the session tests. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/prng.h"
#include "fake_node.h"
#include "tools/client.h"

#define MS UINT64_C(1000000)

static struct fake_node node;
static struct client *cl;
static int silent_fd = -1;
static uint16_t silent_port;

/* Events seen by the callback. */
#define EVENTS_MAX 64
static struct {
	uint8_t kind;
	uint16_t type;
	uint8_t exec;
	uint16_t flags;
	uint64_t id;
	uint64_t seq_gap;
	bool repeat;
	bool fill;
	bool matched;
	bool session_ended;
} events[EVENTS_MAX];
static uint32_t event_count;

static void
record(void *ctx, const struct client_event *ev)
{
	(void)ctx;
	if (event_count == EVENTS_MAX)
		return;
	events[event_count].kind = ev->kind;
	events[event_count].matched = ev->req != NULL;
	events[event_count].seq_gap = ev->seq_gap;
	events[event_count].repeat = ev->seq_repeat;
	events[event_count].fill = ev->seq_fill;
	events[event_count].session_ended = ev->session_ended;
	if (ev->msg != NULL) {
		events[event_count].type = ev->msg->type;
		if (ev->msg->type == WIRE_EXEC_REPORT) {
			const struct wire_exec_report *m = (const void *)ev->msg;
			events[event_count].exec = m->exec;
			events[event_count].flags = m->hdr.flags;
			events[event_count].id = m->cl_ord_id;
		}
	}
	event_count++;
}

static void
new_order(uint64_t *msg, uint64_t user, uint64_t id, uint8_t tif)
{
	memset(msg, 0, CLIENT_MSG_MAX);
	struct wire_new_order *m = (void *)msg;
	wire_hdr_init(&m->hdr, WIRE_NEW_ORDER, 0);
	m->user = user;
	m->cl_ord_id = id;
	m->symbol = 1;
	m->side = WIRE_SIDE_BUY;
	m->ord_type = WIRE_ORD_LIMIT;
	m->tif = tif;
	m->px = 100;
	m->qty = 10;
}

/* A bound UDP socket that never answers: the "node" for send-side tests. */
static void
silent_open(void)
{
	silent_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert(silent_fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	cr_assert(eq(int, bind(silent_fd, (struct sockaddr *)&a, sizeof(a)), 0));
	cr_assert(eq(int, getsockname(silent_fd, (struct sockaddr *)&a, &len), 0));
	silent_port = ntohs(a.sin_port);
}

static void
open_client(uint16_t port, uint32_t requests_max, uint32_t retry_first_ms,
	    uint32_t retries_max, uint32_t give_up_ms, const struct wire_key *key)
{
	struct client_config cfg = {
		.host = "127.0.0.1",
		.port = port,
		.session_id = 4242,
		.requests_max = requests_max,
		.retry_first_ms = retry_first_ms,
		.retry_cap_ms = retry_first_ms * 2,
		.retries_max = retries_max,
		.give_up_ms = give_up_ms,
	};
	if (key != NULL)
		cfg.key = *key;
	cr_assert(eq(int, client_open(&cl, &cfg), 0));
	event_count = 0;
}

static void
setup_silent(void)
{
	silent_open();
	open_client(silent_port, 1024, 10, 3, 1000, NULL);
}

static void
setup_node(void)
{
	memset(&node, 0, sizeof(node));
	cr_assert(eq(int, fake_node_start(&node), 0));
	open_client(node.port, 64, 20, 6, 2000, NULL);
}

static void
teardown(void)
{
	client_close(cl);
	cl = NULL;
	if (silent_fd >= 0)
		close(silent_fd);
	silent_fd = -1;
	if (node.port != 0)
		fake_node_stop(&node);
	memset(&node, 0, sizeof(node));
}

/* Poll until pred holds or 2 s pass. */
static bool
poll_until(bool (*pred)(void))
{
	uint64_t end = client_now_ns() + 2000 * MS;
	while (!pred() && client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	return pred();
}

static bool
none_unanswered(void)
{
	return client_unanswered(cl) == 0;
}

/* Goal: requests queued together leave in one frame, addressed as the node expects.
 * Method: submit three orders, flush, read the datagram at the silent node and decode it:
 * three messages, sender_id = session, hdr.shard = 0; the client tracks all three. */
Test(client, batches_messages_in_one_frame, .init = setup_silent, .fini = teardown)
{
	uint64_t msg[CLIENT_MSG_MAX / 8];
	for (uint64_t id = 1; id <= 3; id++) {
		new_order(msg, 7, id, WIRE_TIF_GTC);
		int err = 1;
		cr_assert(not(eq(ptr, client_submit(cl, msg, id, 0, &err), NULL)));
		cr_assert(eq(int, err, 0));
	}
	cr_assert(eq(int, client_flush(cl), 0));
	static uint64_t buf[WIRE_FRAME_MAX / 8];
	ssize_t r = recv(silent_fd, buf, sizeof(buf), 0);
	cr_assert(r > 0);
	const struct wire_msg_hdr *msgs[8];
	uint32_t count = 0, sender = 0;
	cr_assert(eq(int, wire_frame_decode(buf, (size_t)r, NULL, msgs, 8, &count, &sender),
		     WIRE_E_OK));
	cr_assert(eq(u32, count, 3));
	cr_assert(eq(u32, sender, 4242));
	for (uint32_t i = 0; i < count; i++) {
		cr_assert(eq(u16, msgs[i]->type, WIRE_NEW_ORDER));
		cr_assert(eq(u16, msgs[i]->shard, 0));
		cr_assert(eq(u64, ((const struct wire_new_order *)msgs[i])->cl_ord_id, i + 1));
	}
	cr_assert(eq(u32, client_tracked(cl), 3));
	cr_assert(eq(u32, client_unanswered(cl), 3));
	cr_assert(eq(u64, client_stats(cl)->frames_tx, 1));
	cr_assert(eq(u64, client_stats(cl)->msgs_tx, 3));
}

/* Goal: a frame never mixes order entry with TRANSFER, nor two transfer shards (the node
 * refuses mixed frames). Method: order, transfer to shard 1, transfer to shard 1, transfer
 * to shard 2, order; flush; expect four datagrams of 1, 2, 1 and 1 messages. */
Test(client, frames_never_mix_routes, .init = setup_silent, .fini = teardown)
{
	uint64_t msg[CLIENT_MSG_MAX / 8];
	new_order(msg, 7, 1, WIRE_TIF_GTC);
	cr_assert(not(eq(ptr, client_submit(cl, msg, 0, 0, NULL), NULL)));
	for (uint64_t i = 0; i < 3; i++) {
		struct wire_transfer t;
		memset(&t, 0, sizeof(t));
		wire_hdr_init(&t.hdr, WIRE_TRANSFER, i < 2 ? 1 : 2);
		t.user = 7;
		t.transfer_id = 100 + i;
		t.asset = 1;
		t.amount = 10;
		cr_assert(not(eq(ptr, client_submit(cl, &t, 0, 0, NULL), NULL)));
	}
	new_order(msg, 7, 2, WIRE_TIF_GTC);
	cr_assert(not(eq(ptr, client_submit(cl, msg, 0, 0, NULL), NULL)));
	cr_assert(eq(int, client_flush(cl), 0));
	uint32_t want[] = {1, 2, 1, 1};
	uint16_t types[] = {WIRE_NEW_ORDER, WIRE_TRANSFER, WIRE_TRANSFER, WIRE_NEW_ORDER};
	static uint64_t buf[WIRE_FRAME_MAX / 8];
	for (int f = 0; f < 4; f++) {
		ssize_t r = recv(silent_fd, buf, sizeof(buf), MSG_DONTWAIT);
		cr_assert(r > 0, "frame %d missing", f);
		const struct wire_msg_hdr *msgs[8];
		uint32_t count = 0, sender = 0;
		cr_assert(eq(int, wire_frame_decode(buf, (size_t)r, NULL, msgs, 8, &count, &sender),
			     WIRE_E_OK));
		cr_assert(eq(u32, count, want[f]), "frame %d", f);
		for (uint32_t i = 0; i < count; i++) {
			cr_assert(eq(u16, msgs[i]->type, types[f]));
			cr_assert(eq(u16, msgs[i]->shard, msgs[0]->shard));
		}
	}
	cr_assert(eq(u64, client_stats(cl)->frames_tx, 4));
}

/* Goal: with a key, frames carry a MAC the node verifies; a node without the key refuses.
 * Method: submit with a key, decode at the node with the key (ok) and without (refused). */
Test(client, frames_carry_the_mac, .fini = teardown)
{
	silent_open();
	struct wire_key key;
	cr_assert(eq(int, wire_key_parse_hex("000102030405060708090a0b0c0d0e0f", &key), 0));
	cr_assert(eq(u64, key.k0, UINT64_C(0x0706050403020100)));
	cr_assert(eq(int, wire_key_parse_hex("00010203", &key), -EINVAL));
	cr_assert(eq(int, wire_key_parse_hex("zz0102030405060708090a0b0c0d0e0f", &key), -EINVAL));
	cr_assert(eq(int, wire_key_parse_hex("000102030405060708090a0b0c0d0e0f", &key), 0));
	open_client(silent_port, 16, 10, 3, 1000, &key);
	uint64_t msg[CLIENT_MSG_MAX / 8];
	new_order(msg, 7, 1, WIRE_TIF_GTC);
	cr_assert(not(eq(ptr, client_submit(cl, msg, 0, 0, NULL), NULL)));
	cr_assert(eq(int, client_flush(cl), 0));
	static uint64_t buf[WIRE_FRAME_MAX / 8];
	ssize_t r = recv(silent_fd, buf, sizeof(buf), 0);
	const struct wire_msg_hdr *msgs[8];
	uint32_t count = 0, sender = 0;
	cr_assert(eq(int, wire_frame_decode(buf, (size_t)r, &key, msgs, 8, &count, &sender),
		     WIRE_E_OK));
	cr_assert(not(eq(int, wire_frame_decode(buf, (size_t)r, NULL, msgs, 8, &count, &sender),
			 WIRE_E_OK)));
}

/* Goal: refusals of submit are clear and change nothing.
 * Method: the same (user, id) twice → -EEXIST; a full table → -ENOSPC; a non-request →
 * -EINVAL. */
Test(client, submit_refusals, .fini = teardown)
{
	silent_open();
	open_client(silent_port, 4, 10, 3, 1000, NULL);
	uint64_t msg[CLIENT_MSG_MAX / 8];
	int err;
	for (uint64_t id = 1; id <= 4; id++) {
		new_order(msg, 1, id, WIRE_TIF_GTC);
		cr_assert(not(eq(ptr, client_submit(cl, msg, 0, 0, &err), NULL)));
	}
	new_order(msg, 1, 2, WIRE_TIF_GTC);
	cr_assert(eq(ptr, client_submit(cl, msg, 0, 0, &err), NULL));
	cr_assert(eq(int, err, -EEXIST));
	new_order(msg, 1, 5, WIRE_TIF_GTC);
	cr_assert(eq(ptr, client_submit(cl, msg, 0, 0, &err), NULL));
	cr_assert(eq(int, err, -ENOSPC));
	cr_assert(eq(u64, client_stats(cl)->table_full, 1));
	struct wire_tick t;
	wire_hdr_init(&t.hdr, WIRE_TICK, 0);
	client_release(cl, client_find(cl, 1, 1));
	cr_assert(eq(ptr, client_submit(cl, &t, 0, 0, &err), NULL));
	cr_assert(eq(int, err, -EINVAL));
	cr_assert(eq(u32, client_tracked(cl), 3));
}

/* Goal: retransmission follows the back-off schedule, is bounded in count, and gives up
 * exactly once. Method: injected time against a silent node: first retry after 10 ms, then
 * 20 ms (the cap), 3 retransmits at most, then one GAVE_UP event. */
Test(client, retransmit_backoff_and_give_up, .init = setup_silent, .fini = teardown)
{
	uint64_t msg[CLIENT_MSG_MAX / 8];
	new_order(msg, 9, 77, WIRE_TIF_GTC);
	struct client_req *r = client_submit(cl, msg, 0, 0, NULL);
	cr_assert(not(eq(ptr, r, NULL)));
	cr_assert(eq(u64, client_next_due_ns(cl), 10 * MS));
	cr_assert(eq(u32, client_tick(cl, 9 * MS, record, NULL), 0));
	cr_assert(eq(u32, client_tick(cl, 10 * MS, record, NULL), 1));
	cr_assert(eq(u32, r->tries, 2));
	cr_assert(eq(u64, r->next_ns, 30 * MS)); /* 10 + min(20, cap 20) */
	cr_assert(eq(u32, client_tick(cl, 30 * MS, record, NULL), 1));
	cr_assert(eq(u64, r->next_ns, 50 * MS)); /* capped at 20 */
	cr_assert(eq(u32, client_tick(cl, 50 * MS, record, NULL), 1));
	cr_assert(eq(u32, r->tries, 4));
	cr_assert(eq(u64, client_stats(cl)->retransmits, 3));
	cr_assert(eq(u32, event_count, 0));
	/* Retries exhausted: the next deadline gives up, once. */
	cr_assert(eq(u32, client_tick(cl, 70 * MS, record, NULL), 1));
	cr_assert(eq(u32, event_count, 1));
	cr_assert(eq(u8, events[0].kind, CLIENT_EV_GAVE_UP));
	cr_assert(eq(u8, r->state, CLIENT_REQ_GAVE_UP));
	cr_assert(eq(u32, client_unanswered(cl), 0));
	cr_assert(eq(u64, client_next_due_ns(cl), UINT64_MAX));
	cr_assert(eq(u32, client_tick(cl, 10000 * MS, record, NULL), 0));
	cr_assert(eq(u32, event_count, 1));
	/* Every send reached the node, byte for byte the same request. */
	static uint64_t buf[WIRE_FRAME_MAX / 8];
	for (int i = 0; i < 4; i++) {
		ssize_t n = recv(silent_fd, buf, sizeof(buf), MSG_DONTWAIT);
		cr_assert(n > 0, "send %d missing", i);
		const struct wire_msg_hdr *m[4];
		uint32_t count, sender;
		cr_assert(eq(int, wire_frame_decode(buf, (size_t)n, NULL, m, 4, &count, &sender),
			     WIRE_E_OK));
		cr_assert(eq(int, memcmp(m[0], msg, sizeof(struct wire_new_order)), 0));
	}
}

/* Goal: the time bound holds even when the count bound is far away.
 * Method: give_up_ms 25 with many retries allowed: no deadline lies past first + 25 ms. */
Test(client, give_up_on_time, .fini = teardown)
{
	silent_open();
	open_client(silent_port, 16, 10, 100, 25, NULL);
	uint64_t msg[CLIENT_MSG_MAX / 8];
	new_order(msg, 9, 1, WIRE_TIF_GTC);
	struct client_req *r = client_submit(cl, msg, 0, 0, NULL);
	uint64_t now = 0;
	for (int i = 0; i < 10 && r->state == CLIENT_REQ_SENT; i++) {
		now = client_next_due_ns(cl);
		cr_assert(now <= 25 * MS);
		client_tick(cl, now, record, NULL);
	}
	cr_assert(eq(u8, r->state, CLIENT_REQ_GAVE_UP));
	cr_assert(eq(u64, now, 25 * MS));
}

/* Goal: ACK and EXEC_REPORT are matched to their request by (user, cl_ord_id); answered
 * requests are not retransmitted. Method: a GTC and an IOC to the fake node; expect ACK then
 * OPEN, and ACK, FILL (done), all matched, nothing unanswered, no retransmits. */
Test(client, matches_answers, .init = setup_node, .fini = teardown)
{
	uint64_t msg[CLIENT_MSG_MAX / 8];
	new_order(msg, 5, 100, WIRE_TIF_GTC);
	struct client_req *a = client_submit(cl, msg, 1, client_now_ns(), NULL);
	new_order(msg, 5, 101, WIRE_TIF_IOC);
	struct client_req *b = client_submit(cl, msg, 2, client_now_ns(), NULL);
	cr_assert(poll_until(none_unanswered));
	uint64_t end = client_now_ns() + 200 * MS;
	while (event_count < 4 && client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	end = client_now_ns() + 50 * MS; /* nothing more comes */
	while (client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	cr_assert(eq(u32, event_count, 4));
	cr_assert(eq(u8, events[0].kind, CLIENT_EV_ACK));
	cr_assert(eq(u8, events[1].exec, WIRE_EXEC_OPEN));
	cr_assert(eq(u16, events[1].flags, 0));
	cr_assert(eq(u64, events[1].id, 100));
	cr_assert(eq(u8, events[2].kind, CLIENT_EV_ACK));
	cr_assert(eq(u8, events[3].exec, WIRE_EXEC_FILL));
	cr_assert(eq(u16, events[3].flags, WIRE_REPORT_F_DONE));
	for (uint32_t i = 0; i < 4; i++)
		cr_assert(events[i].matched, "event %u unmatched", i);
	cr_assert(eq(u8, a->state, CLIENT_REQ_ANSWERED));
	cr_assert(eq(u8, b->state, CLIENT_REQ_ANSWERED));
	cr_assert(eq(u64, client_stats(cl)->retransmits, 0));
	cr_assert(eq(u64, client_stats(cl)->seq_gaps, 0));
	cr_assert(eq(u64, client_user_seq(cl, 5), 4));
	/* A NAK ends the request too, with its reason. */
	new_order(msg, 666, 1, WIRE_TIF_GTC);
	struct client_req *c = client_submit(cl, msg, 3, client_now_ns(), NULL);
	cr_assert(poll_until(none_unanswered));
	cr_assert(eq(u8, c->state, CLIENT_REQ_NAKED));
	cr_assert(eq(u16, c->reason, WIRE_REASON_INSUFFICIENT_FUNDS));
	cr_assert(eq(u64, client_stats(cl)->nak_reason[WIRE_REASON_INSUFFICIENT_FUNDS], 1));
	/* A transfer is answered by ADMIN_REPLY on its transfer_id. */
	struct wire_transfer t;
	memset(&t, 0, sizeof(t));
	wire_hdr_init(&t.hdr, WIRE_TRANSFER, 0);
	t.user = 5;
	t.transfer_id = 9;
	t.asset = 1;
	t.amount = 500;
	struct client_req *d = client_submit(cl, &t, 4, client_now_ns(), NULL);
	cr_assert(poll_until(none_unanswered));
	cr_assert(eq(u8, d->state, CLIENT_REQ_ANSWERED));
	cr_assert(eq(ptr, client_find(cl, CLIENT_TRANSFER_USER, 9), d));
}

/* Goal: a lost request is retransmitted with the same cl_ord_id until answered, and the
 * node sees one order, not two. Method: the fake node drops the first two frames. */
Test(client, retransmits_lost_requests, .init = setup_node, .fini = teardown)
{
	atomic_store(&node.drop_frames, 2);
	uint64_t msg[CLIENT_MSG_MAX / 8];
	new_order(msg, 3, 55, WIRE_TIF_GTC);
	struct client_req *r = client_submit(cl, msg, 0, client_now_ns(), NULL);
	cr_assert(poll_until(none_unanswered));
	cr_assert(eq(u8, r->state, CLIENT_REQ_ANSWERED));
	cr_assert(eq(u32, r->tries, 3));
	cr_assert(eq(u64, client_stats(cl)->retransmits, 2));
	cr_assert(eq(u64, atomic_load(&node.frames_rx), 3));
	cr_assert(eq(u64, atomic_load(&node.duplicates), 0));
	cr_assert(eq(u32, node.last_sender, 4242));
}

/* Goal: per-user egress seq gaps, gap fills and repeats are told apart.
 * Method: hand-built frames through client_rx: seqs 1, 2, 5 (gap 2), 4 (late: fills one of
 * the gap), 4 again and 2 again (repeats), 3 (fills the rest), and a garbage frame counted as
 * a decode error. */
Test(client, egress_seq_gaps, .init = setup_silent, .fini = teardown)
{
	static uint64_t buf[256];
	uint64_t seqs[] = {1, 2, 5, 4, 4, 2, 3};
	for (int i = 0; i < 7; i++) {
		struct wire_builder b;
		wire_builder_init(&b, buf, sizeof(buf), 1);
		struct wire_ack m;
		memset(&m, 0, sizeof(m));
		wire_hdr_init(&m.hdr, WIRE_ACK, 0);
		m.user = 11;
		m.cl_ord_id = (uint64_t)i;
		m.oid = wire_oid_make(1, 11, 1);
		m.seq = seqs[i];
		wire_builder_add(&b, &m);
		uint32_t len = wire_builder_finish(&b, NULL);
		cr_assert(eq(u32, client_rx(cl, buf, len, 0, record, NULL), 1));
	}
	cr_assert(eq(u32, event_count, 7));
	cr_assert(eq(u64, events[2].seq_gap, 2));
	cr_assert(events[3].fill);
	cr_assert(not(events[3].repeat));
	cr_assert(events[4].repeat);
	cr_assert(events[5].repeat);
	cr_assert(events[6].fill);
	cr_assert(not(events[1].repeat));
	cr_assert(not(events[1].fill));
	cr_assert(eq(u64, client_stats(cl)->seq_gaps, 2));
	cr_assert(eq(u64, client_stats(cl)->seq_filled, 2));
	cr_assert(eq(u64, client_stats(cl)->seq_repeats, 2));
	cr_assert(eq(u64, client_stats(cl)->unmatched, 7));
	cr_assert(eq(u64, client_user_seq(cl, 11), 5));
	memset(buf, 0xab, 64);
	cr_assert(eq(u32, client_rx(cl, buf, 64, 0, record, NULL), 0));
	cr_assert(eq(u64, client_stats(cl)->decode_errors, 1));
	cr_assert(eq(u64, client_stats(cl)->decode_err[WIRE_E_BAD_MAGIC], 1));
}

/* Goal: the fake node's gap shows through the real socket path as well.
 * Method: the node skips one seq; the second order's ACK reports a gap of one. */
Test(client, egress_gap_over_udp, .init = setup_node, .fini = teardown)
{
	uint64_t msg[CLIENT_MSG_MAX / 8];
	new_order(msg, 8, 1, WIRE_TIF_GTC);
	client_submit(cl, msg, 0, client_now_ns(), NULL);
	cr_assert(poll_until(none_unanswered));
	atomic_store(&node.skip_seq_once, 1);
	new_order(msg, 8, 2, WIRE_TIF_GTC);
	client_submit(cl, msg, 0, client_now_ns(), NULL);
	cr_assert(poll_until(none_unanswered));
	uint64_t end = client_now_ns() + 100 * MS;
	while (client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	cr_assert(eq(u64, client_stats(cl)->seq_gaps, 1));
}

/* Goal: the request index stays correct under many inserts and removals in any order
 * (backward-shift deletion). Method: 1000 requests, release a seeded random half, check
 * every remaining one is found and every released one is not, then refill. */
Test(client, index_survives_churn, .fini = teardown)
{
	silent_open();
	open_client(silent_port, 1024, 1000, 3, 10000, NULL);
	uint64_t msg[CLIENT_MSG_MAX / 8];
	static bool released[1000];
	memset(released, 0, sizeof(released));
	for (uint64_t i = 0; i < 1000; i++) {
		new_order(msg, i % 13, i * 7919, WIRE_TIF_GTC);
		cr_assert(not(eq(ptr, client_submit(cl, msg, i, 0, NULL), NULL)));
	}
	struct prng p;
	prng_seed(&p, 42);
	for (int k = 0; k < 500; k++) {
		uint64_t i = prng_below(&p, 1000);
		if (released[i])
			continue;
		struct client_req *r = client_find(cl, i % 13, i * 7919);
		cr_assert(not(eq(ptr, r, NULL)));
		cr_assert(eq(u64, r->tag, i));
		client_release(cl, r);
		released[i] = true;
	}
	uint32_t live = 0;
	for (uint64_t i = 0; i < 1000; i++) {
		struct client_req *r = client_find(cl, i % 13, i * 7919);
		if (released[i]) {
			cr_assert(eq(ptr, r, NULL));
		} else {
			cr_assert(not(eq(ptr, r, NULL)), "lost %lu", (unsigned long)i);
			live++;
		}
	}
	cr_assert(eq(u32, client_tracked(cl), live));
	cr_assert(eq(u32, client_unanswered(cl), live));
	/* The retransmit heap holds exactly the unanswered ones. */
	uint32_t handled = client_tick(cl, UINT64_MAX / 2, NULL, NULL);
	cr_assert(eq(u32, handled, live < CLIENT_TICK_MAX ? live : CLIENT_TICK_MAX));
}

/* ---------------------------------------------------------------------------------------
 * Seq holes and REPORT_REPLAY.
 * ------------------------------------------------------------------------------------- */

/* A client on the silent socket with the replay defaults (0: 100 ms, 300 ms) or off. */
static void
open_replay_client(uint32_t users_max, bool off)
{
	silent_open();
	struct client_config cfg = {
		.host = "127.0.0.1",
		.port = silent_port,
		.session_id = 4242,
		.users_max = users_max,
		.replay_off = off,
	};
	cr_assert(eq(int, client_open(&cl, &cfg), 0));
	event_count = 0;
}

/* One numbered ACK of user with seq through client_rx at now. */
static void
rx_seq(uint64_t user, uint64_t seq, uint64_t now)
{
	static uint64_t buf[64];
	struct wire_builder b;
	wire_builder_init(&b, buf, sizeof(buf), 1);
	struct wire_ack m;
	memset(&m, 0, sizeof(m));
	wire_hdr_init(&m.hdr, WIRE_ACK, 0);
	m.user = user;
	m.cl_ord_id = seq;
	m.oid = wire_oid_make(1, user, 1);
	m.seq = seq;
	cr_assert(eq(int, wire_builder_add(&b, &m), 0));
	uint32_t len = wire_builder_finish(&b, NULL);
	cr_assert(eq(u32, client_rx(cl, buf, len, now, record, NULL), 1));
}

/* Every REPORT_REPLAY that reached the silent node since the last call (at most max);
 * each must be alone in order-entry frames (hdr.shard 0), nothing else is expected. */
static uint32_t
read_replays(struct wire_report_replay *out, uint32_t max)
{
	static uint64_t buf[WIRE_FRAME_MAX / 8];
	uint32_t n = 0;
	ssize_t r;
	while ((r = recv(silent_fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		const struct wire_msg_hdr *msgs[WIRE_FRAME_MSGS_MAX];
		uint32_t count = 0, sender = 0;
		cr_assert(eq(int, wire_frame_decode(buf, (size_t)r, NULL, msgs,
						    WIRE_FRAME_MSGS_MAX, &count, &sender),
			     WIRE_E_OK));
		cr_assert(eq(u32, sender, 4242));
		for (uint32_t i = 0; i < count; i++) {
			cr_assert(eq(u16, msgs[i]->type, WIRE_REPORT_REPLAY));
			cr_assert(eq(u16, msgs[i]->shard, 0));
			cr_assert(eq(u16, msgs[i]->length, sizeof(struct wire_report_replay)));
			cr_assert(n < max, "more than %u replays", max);
			memcpy(&out[n++], msgs[i], sizeof(*out));
		}
	}
	return n;
}

static void
expect_replay(const struct wire_report_replay *m, uint64_t user, uint64_t from, uint64_t to)
{
	cr_assert(eq(u64, m->user, user));
	cr_assert(eq(u64, m->from_seq, from));
	cr_assert(eq(u64, m->to_seq, to));
}

/* Goal: holes are tracked until filled: contig advances over every seq seen in a row, a
 * seq at or below contig or seen inside the window is a repeat, a late one a fill.
 * Method: seqs 10 (baseline), 11, 14, 16, 13, 12, 12, 9, 15 with contig after each. */
Test(client, seq_holes_fill_and_contig_advances, .fini = teardown)
{
	open_replay_client(0, true);
	struct {
		uint64_t seq, contig, newest, gap;
		bool fill, repeat;
	} steps[] = {
		{10, 10, 10, 0, false, false}, /* baseline */
		{11, 11, 11, 0, false, false},
		{14, 11, 14, 2, false, false}, /* holes 12, 13 */
		{16, 11, 16, 1, false, false}, /* hole 15 */
		{13, 11, 16, 0, true, false},
		{12, 14, 16, 0, true, false},  /* 12..14 in a row: contig jumps to 14 */
		{12, 14, 16, 0, false, true},  /* at or below contig */
		{9, 14, 16, 0, false, true},   /* below the baseline */
		{16, 14, 16, 0, false, true},  /* seen inside the window */
		{15, 16, 16, 0, true, false},  /* the last hole: contig = newest */
	};
	for (uint32_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		rx_seq(3, steps[i].seq, 0);
		cr_assert(eq(u64, client_user_contig(cl, 3), steps[i].contig), "step %u", i);
		cr_assert(eq(u64, client_user_seq(cl, 3), steps[i].newest), "step %u", i);
		cr_assert(eq(u64, events[i].seq_gap, steps[i].gap), "step %u", i);
		cr_assert(eq(int, events[i].fill, steps[i].fill), "step %u", i);
		cr_assert(eq(int, events[i].repeat, steps[i].repeat), "step %u", i);
	}
	const struct client_stats *st = client_stats(cl);
	cr_assert(eq(u64, st->seq_gaps, 3));
	cr_assert(eq(u64, st->seq_filled, 3));
	cr_assert(eq(u64, st->seq_repeats, 3));
	cr_assert(eq(u64, st->seq_abandoned, 0));
	cr_assert(eq(u64, client_user_contig(cl, 99), 0));
}

/* Goal: a hole is asked for again with REPORT_REPLAY {user, contig + 1, newest} only once
 * it has been open replay_after_ms (default 100), then every replay_every_ms (default 300)
 * while it stays; progress on the hole restarts the wait; a filled hole stops it.
 * Method: injected time against the silent node; read what it received after each tick. */
Test(client, replay_after_delay_then_every, .fini = teardown)
{
	open_replay_client(0, false);
	struct wire_report_replay got[8];
	rx_seq(7, 1, 0);
	rx_seq(7, 2, 0);
	rx_seq(7, 5, 0 * MS); /* holes 3, 4 open at 0 */
	client_tick(cl, 99 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 0));
	cr_assert(eq(u64, client_stats(cl)->replay_requests, 0));
	client_tick(cl, 100 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 1));
	expect_replay(&got[0], 7, 3, 5);
	cr_assert(eq(u64, client_stats(cl)->replay_requests, 1));
	client_tick(cl, 101 * MS, record, NULL);
	client_tick(cl, 399 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 0));
	client_tick(cl, 400 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 1));
	expect_replay(&got[0], 7, 3, 5);
	/* A newer seq widens the range of the next request. */
	rx_seq(7, 7, 450 * MS);
	client_tick(cl, 700 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 1));
	expect_replay(&got[0], 7, 3, 7);
	/* 3 and 4 arrive: contig 5, hole 6 is the oldest now and waits its own 100 ms. */
	rx_seq(7, 4, 710 * MS);
	rx_seq(7, 3, 710 * MS);
	cr_assert(eq(u64, client_user_contig(cl, 7), 5));
	client_tick(cl, 809 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 0));
	client_tick(cl, 810 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 1));
	expect_replay(&got[0], 7, 6, 7);
	/* Filled: no more requests, however long we wait. */
	rx_seq(7, 6, 820 * MS);
	cr_assert(eq(u64, client_user_contig(cl, 7), 7));
	client_tick(cl, 10000 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 0));
	cr_assert(eq(u64, client_stats(cl)->replay_requests, 4));
	/* The request is not tracked: nothing to retransmit. */
	cr_assert(eq(u32, client_tracked(cl), 0));
	cr_assert(eq(u64, client_stats(cl)->msgs_tx, 4));
}

/* Goal: no request without a hole, nor with replay_after_ms / replay_every_ms configured
 * otherwise than asked, nor when replay is off. Method: in-order seqs tick by tick; custom
 * delays; replay_off with a hole; a full user table (the untracked user never asks). */
Test(client, replay_only_for_holes_and_when_on, .fini = teardown)
{
	open_replay_client(2, false);
	struct wire_report_replay got[8];
	for (uint64_t s = 1; s <= 50; s++) {
		rx_seq(1, s, s * 10 * MS);
		client_tick(cl, s * 10 * MS, record, NULL);
	}
	rx_seq(2, 7, 0);
	rx_seq(3, 1, 0); /* the table holds 2 users: 3 is not tracked */
	rx_seq(3, 5, 0);
	client_tick(cl, 100000 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 0));
	cr_assert(eq(u64, client_stats(cl)->replay_requests, 0));
	cr_assert(eq(u64, client_stats(cl)->seq_gaps, 0));
	client_close(cl);
	close(silent_fd);

	/* Off: the hole is tracked but never asked for. */
	open_replay_client(0, true);
	rx_seq(1, 1, 0);
	rx_seq(1, 3, 0);
	client_tick(cl, 100000 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 0));
	cr_assert(eq(u64, client_user_contig(cl, 1), 1));
	client_close(cl);
	close(silent_fd);

	/* Custom delays: 20 ms, then every 50 ms. */
	silent_open();
	struct client_config cfg = {.host = "127.0.0.1", .port = silent_port, .session_id = 4242,
				    .replay_after_ms = 20, .replay_every_ms = 50};
	cr_assert(eq(int, client_open(&cl, &cfg), 0));
	rx_seq(1, 1, 0);
	rx_seq(1, 3, 0);
	client_tick(cl, 19 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 0));
	client_tick(cl, 20 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 1));
	client_tick(cl, 69 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 0));
	client_tick(cl, 70 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 8), 1));
	expect_replay(&got[0], 1, 2, 3);
}

/* Goal: the tail request asks every tracked user for what follows contig, and an explicit
 * request carries the given range. Method: three users (one with a hole), tail; then
 * client_replay with good and bad ranges. */
Test(client, replay_tail_and_explicit, .fini = teardown)
{
	open_replay_client(0, true);
	struct wire_report_replay got[8];
	cr_assert(eq(u32, client_replay_tail(cl), 0)); /* nobody tracked yet */
	rx_seq(21, 4, 0);
	rx_seq(22, 9, 0);
	rx_seq(22, 10, 0);
	rx_seq(23, 1, 0);
	rx_seq(23, 3, 0); /* contig 1 */
	cr_assert(eq(u32, client_replay_tail(cl), 3));
	cr_assert(eq(u32, read_replays(got, 8), 3)); /* flushed by client_replay_tail */
	bool seen[3] = {false, false, false};
	for (uint32_t i = 0; i < 3; i++) {
		uint64_t u = got[i].user;
		cr_assert(u >= 21 && u <= 23);
		seen[u - 21] = true;
		uint64_t from = u == 21 ? 5 : u == 22 ? 11 : 2;
		expect_replay(&got[i], u, from, 0);
	}
	cr_assert(seen[0] && seen[1] && seen[2]);
	cr_assert(eq(int, client_replay(cl, 22, 3, 8), 0));
	cr_assert(eq(int, client_replay(cl, 22, 5, 0), 0));
	cr_assert(eq(int, client_replay(cl, 22, 0, 8), -EINVAL));
	cr_assert(eq(int, client_replay(cl, 22, 9, 8), -EINVAL));
	cr_assert(eq(int, client_flush(cl), 0));
	cr_assert(eq(u32, read_replays(got, 8), 2));
	expect_replay(&got[0], 22, 3, 8);
	expect_replay(&got[1], 22, 5, 0);
	cr_assert(eq(u64, client_stats(cl)->replay_requests, 5));
}

/* Goal: a seq more than the window above contig moves the window; the never-seen seqs it
 * passes are counted as abandoned (not asked for, taken for repeats if they come), seen
 * ones are not. Method: 1, then 2000 (partial slide: 2..976 out, 975 abandoned), 500
 * (repeat), 977 (fill), 1000000 (the whole ring out), then the replay asks for the rest. */
Test(client, seq_window_overflow_abandons, .fini = teardown)
{
	open_replay_client(0, false);
	rx_seq(5, 1, 0);
	rx_seq(5, 2000, 0);
	const struct client_stats *st = client_stats(cl);
	cr_assert(eq(u64, events[1].seq_gap, 1998));
	cr_assert(eq(u64, client_user_contig(cl, 5), 2000 - CLIENT_SEQ_WINDOW));
	cr_assert(eq(u64, st->seq_abandoned, 975));
	rx_seq(5, 500, 0);
	cr_assert(events[2].repeat);
	rx_seq(5, 977, 0);
	cr_assert(events[3].fill);
	cr_assert(eq(u64, client_user_contig(cl, 5), 977));
	rx_seq(5, 1000000, 0);
	/* 978..998976 leave; of them only 2000 was seen. */
	cr_assert(eq(u64, client_user_contig(cl, 5), 1000000 - CLIENT_SEQ_WINDOW));
	cr_assert(eq(u64, st->seq_abandoned, 975 + (998976 - 977) - 1));
	cr_assert(eq(u64, client_user_seq(cl, 5), 1000000));
	/* Still missing = abandoned + the holes left in the window. */
	cr_assert(eq(u64, st->seq_gaps - st->seq_filled,
		     st->seq_abandoned + (1000000 - 1 - (1000000 - CLIENT_SEQ_WINDOW))));
	client_tick(cl, 100 * MS, record, NULL);
	struct wire_report_replay got[2];
	cr_assert(eq(u32, read_replays(got, 2), 1));
	expect_replay(&got[0], 5, 1000000 - CLIENT_SEQ_WINDOW + 1, 1000000);
	/* A partial slide over seen and unseen seqs: user 6 sees 1 and 5, then 1030 moves
	 * contig to 6 (2, 3, 4 and 6 abandoned, 5 seen); 5's ring bit is 1029's, which must
	 * then read as never seen (a fill, not a repeat). */
	uint64_t abandoned = st->seq_abandoned;
	rx_seq(6, 1, 0);
	rx_seq(6, 5, 0);
	rx_seq(6, 1030, 0);
	cr_assert(eq(u64, st->seq_abandoned - abandoned, 4));
	cr_assert(eq(u64, client_user_contig(cl, 6), 6));
	rx_seq(6, 1029, 0);
	cr_assert(events[event_count - 1].fill);
	cr_assert(not(events[event_count - 1].repeat));
	/* The ring is consistent after the slide: filling the window advances contig to it. */
	for (uint64_t s = 1000000 - CLIENT_SEQ_WINDOW + 1; s < 1000000; s++)
		rx_seq(5, s, 200 * MS);
	cr_assert(eq(u64, client_user_contig(cl, 5), 1000000));
}

/* Goal: the automatic replay is bounded per client_tick and round-robin, so every user
 * with a hole is asked for in turn. Method: 100 users with a hole, due together; the first
 * tick sends CLIENT_REPLAY_TICK_MAX, the next the other 36 (not the first ones again);
 * then all are due at every tick, and two ticks still reach every user. */
Test(client, replay_bounded_per_tick_round_robin, .fini = teardown)
{
	open_replay_client(200, false);
	static struct wire_report_replay got[256];
	for (uint64_t u = 1; u <= 100; u++) {
		rx_seq(u, 1, 0);
		rx_seq(u, 3, 0);
	}
	client_tick(cl, 100 * MS, record, NULL);
	uint32_t n1 = read_replays(got, 256);
	cr_assert(eq(u32, n1, CLIENT_REPLAY_TICK_MAX));
	client_tick(cl, 101 * MS, record, NULL);
	uint32_t n2 = read_replays(got + n1, 256 - n1);
	cr_assert(eq(u32, n2, 100 - CLIENT_REPLAY_TICK_MAX));
	bool asked[101];
	memset(asked, 0, sizeof(asked));
	for (uint32_t i = 0; i < n1 + n2; i++) {
		cr_assert(got[i].user >= 1 && got[i].user <= 100);
		cr_assert(not(asked[got[i].user]), "user %lu asked twice",
			  (unsigned long)got[i].user);
		asked[got[i].user] = true;
		expect_replay(&got[i], got[i].user, 2, 3);
	}
	client_tick(cl, 102 * MS, record, NULL);
	cr_assert(eq(u32, read_replays(got, 256), 0));
	cr_assert(eq(u64, client_stats(cl)->replay_requests, 100));
	/* From 400 ms on everyone is due at every tick (300 ms apart): the bound holds, and
	 * two ticks reach all 100, where restarting from the first user would starve the
	 * last 36. */
	client_tick(cl, 400 * MS, record, NULL);
	n1 = read_replays(got, 256);
	cr_assert(eq(u32, n1, CLIENT_REPLAY_TICK_MAX));
	client_tick(cl, 700 * MS, record, NULL);
	n2 = read_replays(got + n1, 256 - n1);
	cr_assert(eq(u32, n2, CLIENT_REPLAY_TICK_MAX));
	memset(asked, 0, sizeof(asked));
	uint32_t distinct = 0;
	for (uint32_t i = 0; i < n1 + n2; i++) {
		distinct += !asked[got[i].user];
		asked[got[i].user] = true;
	}
	cr_assert(eq(u32, distinct, 100));
}

/* Goal: end to end over UDP, a lost answer is recovered by the automatic replay, and a
 * lost final answer (no later seq reveals it) by the tail request. Method: the fake node
 * keeps its answers and loses some on the way out; poll with real time. */
Test(client, replay_recovers_lost_answers_over_udp, .init = setup_node, .fini = teardown)
{
	uint64_t msg[CLIENT_MSG_MAX / 8];
	new_order(msg, 4, 1, WIRE_TIF_GTC); /* ACK 1, OPEN 2 */
	client_submit(cl, msg, 0, client_now_ns(), NULL);
	cr_assert(poll_until(none_unanswered));
	uint64_t end = client_now_ns() + 50 * MS;
	while (client_user_seq(cl, 4) < 2 && client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	cr_assert(eq(u64, client_user_contig(cl, 4), 2));
	/* IOC: ACK 3 (lost), FILL 4 (done): the hole at 3 is asked for after 100 ms. */
	atomic_store(&node.drop_answers, 1);
	new_order(msg, 4, 2, WIRE_TIF_IOC);
	client_submit(cl, msg, 0, client_now_ns(), NULL);
	end = client_now_ns() + 2000 * MS;
	while (client_user_contig(cl, 4) < 4 && client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	cr_assert(eq(u64, client_user_contig(cl, 4), 4));
	cr_assert(eq(u64, client_stats(cl)->seq_filled, 1));
	cr_assert(atomic_load(&node.replays_rx) >= 1);
	cr_assert(eq(u64, client_stats(cl)->replay_requests, atomic_load(&node.replays_rx)));
	/* IOC again, its FILL 6 lost after the ACK 5: no later seq reveals it. */
	atomic_store(&node.drop_execs, 1);
	new_order(msg, 4, 3, WIRE_TIF_IOC);
	client_submit(cl, msg, 0, client_now_ns(), NULL);
	cr_assert(poll_until(none_unanswered));
	end = client_now_ns() + 300 * MS;
	while (client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	uint64_t newest = client_user_seq(cl, 4);
	cr_assert(eq(u64, client_user_contig(cl, 4), newest)); /* no hole seen */
	cr_assert(eq(u32, client_replay_tail(cl), 1));
	end = client_now_ns() + 2000 * MS;
	while (client_user_seq(cl, 4) < newest + 1 && client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	cr_assert(eq(u64, client_user_seq(cl, 4), newest + 1));
	cr_assert(eq(u64, client_user_contig(cl, 4), newest + 1));
}

/* ---------------------------------------------------------------------------------------
 * Sessions: the fake node plays the gateway with the real session table (auth.h).
 * ------------------------------------------------------------------------------------- */

#define KEY_ID 7
#define KEY_ID_UNKNOWN 99
#define LOGON_WAIT_MS 2000
#define SESSION_RETRY_MS 200 /* retry_first_ms of a session client */
#define LOGON_RETRY_MS 100
#define HEARTBEAT_MIN_MS 100 /* AUTH_HEARTBEAT_MIN_MS: the shortest the node agrees to */

static struct auth_key gw_key;
static struct auth_keys gw_keys = {.keys = &gw_key, .count = 1, .cap = 1};

/* The test key's secret: not all zero, every byte different. */
static void
secret_fill(uint8_t out[AUTH_SECRET_SIZE])
{
	for (uint32_t i = 0; i < AUTH_SECRET_SIZE; i++)
		out[i] = (uint8_t)(0xa0 + i);
}

/* The fake node as the gateway, one key (KEY_ID, all permissions, any user). */
static void
start_gateway(uint32_t heartbeat_ms, uint32_t msgs_per_window, uint32_t rate_window_ms)
{
	memset(&node, 0, sizeof(node));
	memset(&gw_key, 0, sizeof(gw_key));
	gw_key.key_id = KEY_ID;
	secret_fill(gw_key.secret);
	gw_key.perms = AUTH_P_ALL;
	gw_key.all_users = true;
	cr_assert(eq(int, fake_node_sessions(&node, &gw_keys, heartbeat_ms, msgs_per_window,
					     rate_window_ms), 0));
	cr_assert(eq(int, fake_node_start(&node), 0));
	event_count = 0;
}

static void
setup_gateway(void)
{
	start_gateway(0, 0, 0);
}

/* A session client of the gateway; bad_secret flips one bit of the key's secret. */
static void
open_session(uint64_t key_id, bool bad_secret, bool relogon, uint32_t heartbeat_ms,
	     uint32_t retry_first_ms)
{
	struct client_config cfg = {
		.host = "127.0.0.1",
		.port = node.port,
		.session_id = 4242,
		.requests_max = 64,
		.retry_first_ms = retry_first_ms,
		.retry_cap_ms = retry_first_ms * 2,
		.retries_max = 8,
		.give_up_ms = 3000,
		.logon = true,
		.key_id = key_id,
		.relogon = relogon,
		.heartbeat_ms = heartbeat_ms,
		.logon_retry_ms = LOGON_RETRY_MS,
	};
	secret_fill(cfg.secret);
	if (bad_secret)
		cfg.secret[0] ^= 1;
	cr_assert(eq(int, client_open(&cl, &cfg), 0));
	event_count = 0;
}

static void
logged_on(bool relogon, uint32_t heartbeat_ms, uint32_t retry_first_ms)
{
	open_session(KEY_ID, false, relogon, heartbeat_ms, retry_first_ms);
	cr_assert(eq(int, client_logon(cl, LOGON_WAIT_MS), 0));
	cr_assert(client_session_up(cl));
}

/* Poll until pred holds or ms pass. */
static bool
poll_for(bool (*pred)(void), uint64_t ms)
{
	uint64_t end = client_now_ns() + ms * MS;
	while (!pred() && client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	return pred();
}

/* Poll for ms whatever happens. */
static void
poll_idle(uint64_t ms)
{
	uint64_t end = client_now_ns() + ms * MS;
	while (client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
}

static struct client_req *
order(uint64_t user, uint64_t id)
{
	uint64_t msg[CLIENT_MSG_MAX / 8];
	new_order(msg, user, id, WIRE_TIF_GTC);
	int err = 1;
	struct client_req *r = client_submit(cl, msg, 0, client_now_ns(), &err);
	cr_assert(not(eq(ptr, r, NULL)), "submit: %d", err);
	return r;
}

/* Goal: after a logon every frame is a session frame, numbered 1, 2, 3, ... from the seq
 * the reply named, MAC'd under the session key the node derived (it acts on them); a
 * logout ends the session on both sides and nothing is sent outside it afterwards.
 * Method: log on, three orders in three frames, each answered; check the seqs the node
 * accepted, then log out. */
Test(session, logon_then_session_frames, .init = setup_gateway, .fini = teardown)
{
	open_session(KEY_ID, false, false, 0, SESSION_RETRY_MS);
	cr_assert(not(client_session_up(cl)));
	cr_assert(eq(u64, client_session_seq(cl), 0));
	cr_assert(eq(int, client_logon(cl, LOGON_WAIT_MS), 0));
	cr_assert(client_session_up(cl));
	cr_assert(eq(u64, client_session_seq(cl), 1));
	cr_assert(eq(u32, client_heartbeat_ms(cl), 1000)); /* the node's default */
	cr_assert(eq(u16, client_logon_reason(cl), 0));
	cr_assert(eq(int, client_logon(cl, LOGON_WAIT_MS), 0)); /* already on: nothing sent */
	const struct client_stats *st = client_stats(cl);
	cr_assert(eq(u64, st->logons_sent, 1));
	cr_assert(eq(u64, st->logons, 1));
	cr_assert(eq(u64, atomic_load(&node.logons), 1));
	for (uint64_t id = 1; id <= 3; id++) {
		struct client_req *r = order(5, id);
		cr_assert(eq(int, client_flush(cl), 0));
		cr_assert(poll_until(none_unanswered));
		cr_assert(eq(u8, r->state, CLIENT_REQ_ANSWERED));
	}
	uint64_t frames = atomic_load(&node.seq_count);
	cr_assert(frames >= 3); /* a heartbeat may have gone too, on a slow machine */
	for (uint64_t i = 0; i < frames; i++)
		cr_assert(eq(u64, node.frame_seqs[i], i + 1), "frame %lu", (unsigned long)i);
	cr_assert(eq(u64, client_session_seq(cl), frames + 1));
	cr_assert(eq(u64, atomic_load(&node.session_frames), frames));
	cr_assert(eq(u64, atomic_load(&node.decode_errors), 0));
	cr_assert(eq(u64, atomic_load(&node.session_rejects), 0));
	cr_assert(eq(u32, node.last_sender, 4242));
	cr_assert(eq(u64, st->decode_errors, 0));
	cr_assert(eq(u64, st->acks, 3));
	cr_assert(eq(u64, client_user_seq(cl, 5), 6)); /* ACK and OPEN per order */

	cr_assert(eq(int, client_logout(cl), 0));
	cr_assert(not(client_session_up(cl)));
	uint64_t end = client_now_ns() + 1000 * MS;
	while (atomic_load(&node.logouts_rx) == 0 && client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	cr_assert(eq(u64, atomic_load(&node.logouts_rx), 1));
	cr_assert(eq(int, client_logout(cl), -ENOTCONN));
	uint64_t sent = st->frames_tx;
	uint64_t msg[CLIENT_MSG_MAX / 8];
	new_order(msg, 5, 4, WIRE_TIF_GTC);
	int err = 0;
	cr_assert(not(eq(ptr, client_submit(cl, msg, 0, client_now_ns(), &err), NULL)));
	cr_assert(eq(int, err, -ENOTCONN)); /* tracked, not sent */
	uint64_t replays = st->replay_requests;
	cr_assert(eq(int, client_replay(cl, 5, 1, 0), -ENOTCONN));
	cr_assert(eq(u32, client_replay_tail(cl), 0));
	cr_assert(eq(u64, st->replay_requests, replays));
	cr_assert(eq(int, client_flush(cl), 0));
	client_tick(cl, client_now_ns() + 500 * MS, record, NULL);
	cr_assert(eq(u64, st->frames_tx, sent));
}

/* Goal: a session client takes from the node, without a MAC, only what the node cannot key
 * (a refused LOGON_REPLY, SESSION_REJECT UNKNOWN_SESSION); anything else un-MAC'd, or MAC'd
 * under another key, is a decode error and is not acted on. Method: hand-built frames
 * through client_rx, before any logon. */
Test(session, unkeyed_frames_refused, .fini = teardown)
{
	silent_open();
	struct client_config cfg = {.host = "127.0.0.1", .port = silent_port, .session_id = 4242,
				    .logon = true, .key_id = KEY_ID};
	secret_fill(cfg.secret);
	cr_assert(eq(int, client_open(&cl, &cfg), 0));
	static uint64_t buf[64];
	struct wire_builder b;
	const struct client_stats *st = client_stats(cl);

	struct wire_ack ack;
	memset(&ack, 0, sizeof(ack));
	wire_hdr_init(&ack.hdr, WIRE_ACK, 0);
	ack.user = 3;
	ack.cl_ord_id = 1;
	ack.oid = wire_oid_make(1, 3, 1);
	ack.seq = 1;
	wire_builder_init(&b, buf, sizeof(buf), 1);
	cr_assert(eq(int, wire_builder_add(&b, &ack), 0));
	uint32_t len = wire_builder_finish(&b, NULL);
	cr_assert(eq(u32, client_rx(cl, buf, len, 0, record, NULL), 0));
	cr_assert(eq(u64, st->decode_err[WIRE_E_BAD_MAC], 1));

	struct wire_key other = {.k0 = 1, .k1 = 2};
	wire_builder_init(&b, buf, sizeof(buf), 1);
	cr_assert(eq(int, wire_builder_add(&b, &ack), 0));
	len = wire_builder_finish(&b, &other);
	cr_assert(eq(u32, client_rx(cl, buf, len, 0, record, NULL), 0));
	cr_assert(eq(u64, st->decode_err[WIRE_E_BAD_MAC], 2));

	struct wire_logon_reply lr;
	memset(&lr, 0, sizeof(lr));
	wire_hdr_init(&lr.hdr, WIRE_LOGON_REPLY, 0);
	lr.key_id = KEY_ID;
	lr.session_id = 4242;
	lr.next_seq = 1;
	wire_builder_init(&b, buf, sizeof(buf), 1);
	cr_assert(eq(int, wire_builder_add(&b, &lr), 0)); /* an accepting reply, forged */
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(u32, client_rx(cl, buf, len, 0, record, NULL), 0));
	cr_assert(eq(u64, st->decode_err[WIRE_E_BAD_MAC], 3));
	cr_assert(not(client_session_up(cl)));

	lr.reason = WIRE_REASON_BAD_KEY;
	wire_builder_init(&b, buf, sizeof(buf), 1);
	cr_assert(eq(int, wire_builder_add(&b, &lr), 0));
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(u32, client_rx(cl, buf, len, 0, record, NULL), 1));
	struct wire_session_reject rj;
	memset(&rj, 0, sizeof(rj));
	wire_hdr_init(&rj.hdr, WIRE_SESSION_REJECT, 0);
	rj.session_id = 4242;
	rj.reason = WIRE_REASON_UNKNOWN_SESSION;
	wire_builder_init(&b, buf, sizeof(buf), 1);
	cr_assert(eq(int, wire_builder_add(&b, &rj), 0));
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(u32, client_rx(cl, buf, len, 0, record, NULL), 1));
	rj.reason = WIRE_REASON_SEQ_GAP; /* the node keys those: un-MAC'd it is not the node */
	wire_builder_init(&b, buf, sizeof(buf), 1);
	cr_assert(eq(int, wire_builder_add(&b, &rj), 0));
	len = wire_builder_finish(&b, NULL);
	cr_assert(eq(u32, client_rx(cl, buf, len, 0, record, NULL), 0));
	/* The two taken arrive as events but change nothing: no logon was pending, no
	 * session was up. */
	cr_assert(eq(u32, event_count, 2));
	cr_assert(eq(u8, events[0].kind, CLIENT_EV_OTHER));
	cr_assert(eq(u16, events[0].type, WIRE_LOGON_REPLY));
	cr_assert(eq(u16, events[1].type, WIRE_SESSION_REJECT));
	cr_assert(not(events[1].session_ended));
	cr_assert(eq(u64, st->decode_errors, 4));
	cr_assert(eq(u64, st->logons_refused, 0));
	cr_assert(eq(u64, st->seq_resyncs, 0));
	cr_assert(eq(u16, client_logon_reason(cl), 0));
	/* A key and logon together, or logon without a key id, is a configuration error. */
	struct client *c2;
	cfg.key = other;
	cr_assert(eq(int, client_open(&c2, &cfg), -EINVAL));
	cfg.key = (struct wire_key){0, 0};
	cfg.key_id = 0;
	cr_assert(eq(int, client_open(&c2, &cfg), -EINVAL));
	/* Without a key the client does not log on. */
	client_close(cl);
	open_client(silent_port, 16, 10, 3, 1000, NULL);
	cr_assert(eq(int, client_logon(cl, 10), -EINVAL));
}

/* Goal: a refused logon returns -EACCES with the node's reason, and the client stays off.
 * Method: an unknown key id (BAD_KEY), then the right id with a wrong secret
 * (BAD_SIGNATURE). */
Test(session, logon_refused, .init = setup_gateway, .fini = teardown)
{
	open_session(KEY_ID_UNKNOWN, false, false, 0, SESSION_RETRY_MS);
	cr_assert(eq(int, client_logon(cl, LOGON_WAIT_MS), -EACCES));
	cr_assert(eq(u16, client_logon_reason(cl), WIRE_REASON_BAD_KEY));
	cr_assert(not(client_session_up(cl)));
	cr_assert(eq(u64, client_stats(cl)->logons_refused, 1));
	cr_assert(eq(u64, client_stats(cl)->logons_sent, 1));
	client_close(cl);
	open_session(KEY_ID, true, false, 0, SESSION_RETRY_MS);
	cr_assert(eq(int, client_logon(cl, LOGON_WAIT_MS), -EACCES));
	cr_assert(eq(u16, client_logon_reason(cl), WIRE_REASON_BAD_SIGNATURE));
	cr_assert(eq(u64, atomic_load(&node.logons_refused), 2));
	cr_assert(eq(u64, atomic_load(&node.logons), 0));
}

/* Goal: a lost LOGON or a lost reply is made good by a resend with a fresh nonce within
 * the timeout, and no reply at all ends in -ETIMEDOUT. Method: the node drops the first
 * LOGON; then it accepts one but its reply is lost (a resend with the same nonce would be
 * refused NONCE_REUSED, and the logon would time out); then it is silent. */
Test(session, lost_logon_is_resent, .init = setup_gateway, .fini = teardown)
{
	atomic_store(&node.drop_frames, 1);
	open_session(KEY_ID, false, false, 0, SESSION_RETRY_MS);
	cr_assert(eq(int, client_logon(cl, LOGON_WAIT_MS), 0));
	cr_assert(eq(u64, client_stats(cl)->logons_sent, 2));
	cr_assert(eq(u64, atomic_load(&node.logons), 1));
	client_close(cl);

	atomic_store(&node.drop_logon_replies, 1);
	open_session(KEY_ID, false, false, 0, SESSION_RETRY_MS);
	cr_assert(eq(int, client_logon(cl, LOGON_WAIT_MS), 0));
	cr_assert(eq(u64, client_stats(cl)->logons_sent, 2));
	cr_assert(eq(u64, atomic_load(&node.logons), 3)); /* the lost one, and its resend */
	cr_assert(eq(u64, atomic_load(&node.logons_refused), 0));
	/* The session is the resend's: the node acts on its frames. */
	struct client_req *r = order(5, 1);
	cr_assert(poll_until(none_unanswered));
	cr_assert(eq(u8, r->state, CLIENT_REQ_ANSWERED));
	client_close(cl);

	atomic_store(&node.silent, 1);
	open_session(KEY_ID, false, false, 0, SESSION_RETRY_MS);
	uint64_t rx = atomic_load(&node.frames_rx);
	cr_assert(eq(int, client_logon(cl, 3 * LOGON_RETRY_MS + LOGON_RETRY_MS / 2), -ETIMEDOUT));
	/* At 0, 100, 200 and 300 ms, the last one late on a loaded machine. */
	uint64_t sent = client_stats(cl)->logons_sent;
	cr_assert(sent >= 3 && sent <= 4, "%lu LOGONs", (unsigned long)sent);
	uint64_t end = client_now_ns() + 100 * MS;
	while (atomic_load(&node.frames_rx) - rx < sent && client_now_ns() < end)
		usleep(1000);
	cr_assert(eq(u64, atomic_load(&node.frames_rx) - rx, sent));
	cr_assert(not(client_session_up(cl)));
}

static struct client_req *req_a, *req_b;

static bool
both_answered(void)
{
	return req_a->state == CLIENT_REQ_ANSWERED && req_b->state == CLIENT_REQ_ANSWERED;
}

/* Goal: SEQ_GAP makes the client take the node's expected seq and send the unanswered
 * requests again at once, not after their back-off. Method: the node loses the frame of
 * order A (seq 1); order B's frame (seq 2) is refused SEQ_GAP expecting 1; both must be
 * answered well before retry_first_ms (1 s), in a frame with seq 1. */
Test(session, seq_gap_resyncs, .init = setup_gateway, .fini = teardown)
{
	logged_on(false, 0, 1000);
	uint64_t start = client_now_ns();
	atomic_store(&node.drop_frames, 1);
	req_a = order(5, 1);
	cr_assert(eq(int, client_flush(cl), 0));
	req_b = order(5, 2);
	cr_assert(eq(int, client_flush(cl), 0));
	cr_assert(poll_for(both_answered, 500));
	cr_assert(client_now_ns() - start < 1000 * MS);
	const struct client_stats *st = client_stats(cl);
	cr_assert(eq(u64, st->seq_resyncs, 1));
	cr_assert(eq(u64, st->retransmits, 2));
	cr_assert(eq(u64, atomic_load(&node.rejects[WIRE_REASON_SEQ_GAP]), 1));
	cr_assert(eq(u64, atomic_load(&node.session_rejects), 1));
	cr_assert(eq(u64, atomic_load(&node.seq_count), 1));
	cr_assert(eq(u64, node.frame_seqs[0], 1)); /* the resent frame carried seq 1 again */
	cr_assert(eq(u64, client_session_seq(cl), 2));
	cr_assert(eq(u64, atomic_load(&node.duplicates), 0)); /* B was never acted on twice */
}

static bool
a_answered(void)
{
	return req_a->state == CLIENT_REQ_ANSWERED;
}

/* Goal: a frame refused MSG_RATE leaves its requests to their back-off, and the next frame
 * carries the refused frame's seq (the node still waits for it): no SEQ_GAP follows.
 * Method: two messages per 200 ms window; two orders in one frame pass, a third in the
 * next frame is refused; it is answered once a later window takes its resend. */
Test(session, rate_refused_waits_for_backoff, .fini = teardown)
{
	start_gateway(0, 2, 200);
	logged_on(false, 0, 100);
	order(5, 1);
	order(5, 2);
	cr_assert(eq(int, client_flush(cl), 0));
	req_a = order(5, 3);
	cr_assert(eq(int, client_flush(cl), 0));
	cr_assert(poll_for(a_answered, 2000));
	const struct client_stats *st = client_stats(cl);
	cr_assert(st->rate_refused >= 1);
	cr_assert(eq(u64, st->rate_refused, atomic_load(&node.rejects[WIRE_REASON_MSG_RATE])));
	cr_assert(eq(u64, atomic_load(&node.rejects[WIRE_REASON_SEQ_GAP]), 0));
	cr_assert(eq(u64, st->seq_resyncs, 0));
	cr_assert(req_a->tries >= 2);
	cr_assert(req_a->answer_ns - req_a->first_ns >= 100 * MS); /* not before its back-off */
}

/* Goal: when the node has lost the session (UNKNOWN_SESSION, as after a restart), a client
 * with relogon logs on again, same session id, and the request the node refused is
 * answered after all. Method: log on, one order answered; the node forgets the session;
 * a second order is refused whole; poll until it is answered. */
Test(session, unknown_session_relogs_on, .init = setup_gateway, .fini = teardown)
{
	logged_on(true, 0, SESSION_RETRY_MS);
	req_a = order(5, 1);
	cr_assert(poll_until(none_unanswered));
	atomic_store(&node.forget_sessions, 1);
	req_b = order(5, 2);
	cr_assert(eq(int, client_flush(cl), 0));
	cr_assert(poll_for(both_answered, 2000));
	const struct client_stats *st = client_stats(cl);
	cr_assert(eq(u64, st->relogons, 1));
	cr_assert(eq(u64, st->logons, 2));
	cr_assert(eq(u64, st->session_ended, 0));
	cr_assert(client_session_up(cl));
	cr_assert(eq(u64, atomic_load(&node.logons), 2));
	cr_assert(eq(u64, atomic_load(&node.rejects[WIRE_REASON_UNKNOWN_SESSION]), 1));
	cr_assert(eq(u64, atomic_load(&node.duplicates), 0));
	/* The new session numbers its frames from 1 again. */
	uint64_t frames = atomic_load(&node.seq_count);
	cr_assert(eq(u64, node.frame_seqs[frames - 1], 1));
	for (uint32_t i = 0; i < event_count; i++)
		cr_assert(not(events[i].session_ended));
}

/* Goal: a LOGOUT from the node ends the session; without relogon the client says so
 * (CLIENT_EV_OTHER with session_ended) and sends nothing more. Method: the node answers the
 * next frame with LOGOUT KEY_REVOKED. */
Test(session, node_logout_ends_session, .init = setup_gateway, .fini = teardown)
{
	logged_on(false, 0, SESSION_RETRY_MS);
	atomic_store(&node.logout_reason, WIRE_REASON_KEY_REVOKED);
	req_a = order(5, 1);
	cr_assert(eq(int, client_flush(cl), 0));
	uint64_t end = client_now_ns() + 1000 * MS;
	while (client_session_up(cl) && client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	cr_assert(not(client_session_up(cl)));
	const struct client_stats *st = client_stats(cl);
	cr_assert(eq(u64, st->session_ended, 1));
	cr_assert(eq(u64, st->relogons, 0));
	cr_assert(eq(u32, event_count, 1));
	cr_assert(eq(u8, events[0].kind, CLIENT_EV_OTHER));
	cr_assert(eq(u16, events[0].type, WIRE_LOGOUT));
	cr_assert(events[0].session_ended);
	cr_assert(eq(u8, req_a->state, CLIENT_REQ_SENT));
	uint64_t sent = st->frames_tx;
	poll_idle(3 * SESSION_RETRY_MS);
	cr_assert(eq(u64, st->frames_tx, sent)); /* no retransmit, no heartbeat, no LOGON */
	cr_assert(eq(u64, atomic_load(&node.logons), 1));
}

/* Goal: an idle client keeps its session with HEARTBEATs at the agreed interval, and the
 * node really ends a session that goes quiet (so the first half means something).
 * Method: heartbeat 100 ms; poll idle for 600 ms (twice the node's three-beat limit); then
 * stop polling for 500 ms and poll again. */
Test(session, heartbeats_keep_idle_session, .init = setup_gateway, .fini = teardown)
{
	logged_on(false, HEARTBEAT_MIN_MS, SESSION_RETRY_MS);
	cr_assert(eq(u32, client_heartbeat_ms(cl), HEARTBEAT_MIN_MS));
	poll_idle(6 * HEARTBEAT_MIN_MS);
	const struct client_stats *st = client_stats(cl);
	cr_assert(st->heartbeats_tx >= 4, "%lu heartbeats", (unsigned long)st->heartbeats_tx);
	cr_assert(st->heartbeats_tx <= 7, "%lu heartbeats", (unsigned long)st->heartbeats_tx);
	cr_assert(st->heartbeats_rx >= 3);
	/* The last one may still be on its way; not polling sends no other meanwhile. */
	for (int i = 0; i < 50 && atomic_load(&node.heartbeats_rx) != st->heartbeats_tx; i++)
		usleep(1000);
	cr_assert(eq(u64, atomic_load(&node.heartbeats_rx), st->heartbeats_tx));
	cr_assert(eq(u64, atomic_load(&node.idle_ended), 0));
	cr_assert(client_session_up(cl));
	cr_assert(eq(u64, st->session_ended, 0));
	cr_assert(eq(u32, event_count, 0)); /* heartbeats are counted, not delivered */
	/* Traffic counts as life: no heartbeat while orders go. */
	uint64_t beats = st->heartbeats_tx;
	for (uint64_t id = 1; id <= 4; id++) {
		order(5, id);
		cr_assert(eq(int, client_flush(cl), 0));
		poll_idle(HEARTBEAT_MIN_MS / 2);
	}
	cr_assert(eq(u64, st->heartbeats_tx, beats));
	/* Silent: the node ends the session (LOGOUT SESSION_IDLE). */
	usleep(5 * HEARTBEAT_MIN_MS * 1000);
	uint64_t end = client_now_ns() + 1000 * MS;
	while (client_session_up(cl) && client_now_ns() < end)
		client_poll(cl, 10, record, NULL);
	cr_assert(eq(u64, atomic_load(&node.idle_ended), 1));
	cr_assert(not(client_session_up(cl)));
	cr_assert(eq(u64, st->session_ended, 1));
}

/* Write text to a fresh temporary file; its path in path. */
static void
temp_file(char *path, size_t cap, const char *text, size_t len)
{
	snprintf(path, cap, "/tmp/omsd-keyfile-XXXXXX");
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert(eq(i64, write(fd, text, len), (int64_t)len));
	close(fd);
}

/* Goal: a key file is read as auth_client_key_parse reads it (a line of the node's key
 * file serves), and a bad one is refused with its path and the reason. Method: a node key
 * line with a comment before it, then logon with it; a short secret, a file with no key
 * line, a missing file, a file over CLIENT_KEY_FILE_MAX. */
Test(session, key_file_load, .init = setup_gateway, .fini = teardown)
{
	uint8_t secret[AUTH_SECRET_SIZE];
	secret_fill(secret);
	char text[256], path[64], err[256];
	int n = snprintf(text, sizeof(text), "# trading desk 3\n\n%d ", KEY_ID);
	for (uint32_t i = 0; i < AUTH_SECRET_SIZE; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%02x", secret[i]);
	n += snprintf(text + n, sizeof(text) - (size_t)n, " trade,transfer 1-1000,5000\n");
	temp_file(path, sizeof(path), text, (size_t)n);
	struct client_config cfg = {.host = "127.0.0.1", .port = node.port, .session_id = 4242};
	cr_assert(eq(int, client_key_file_load(path, &cfg, err, sizeof(err)), 0), "%s", err);
	unlink(path);
	cr_assert(cfg.logon);
	cr_assert(eq(u64, cfg.key_id, KEY_ID));
	cr_assert(eq(int, memcmp(cfg.secret, secret, sizeof(secret)), 0));
	cr_assert(eq(int, client_open(&cl, &cfg), 0));
	cr_assert(eq(int, client_logon(cl, LOGON_WAIT_MS), 0));

	struct client_config bad = {.host = "127.0.0.1"};
	temp_file(path, sizeof(path), "7 a0a1a2\n", 9);
	cr_assert(eq(int, client_key_file_load(path, &bad, err, sizeof(err)), -EINVAL));
	cr_assert(eq(int, strncmp(err, path, strlen(path)), 0), "%s", err);
	cr_assert(not(eq(ptr, strstr(err, "line 1"), NULL)), "%s", err);
	unlink(path);
	temp_file(path, sizeof(path), "# nothing here\n", 15);
	cr_assert(eq(int, client_key_file_load(path, &bad, err, sizeof(err)), -EINVAL));
	cr_assert(not(eq(ptr, strstr(err, "no key line"), NULL)), "%s", err);
	unlink(path);
	cr_assert(eq(int, client_key_file_load(path, &bad, err, sizeof(err)), -ENOENT));
	cr_assert(eq(int, strncmp(err, path, strlen(path)), 0), "%s", err);
	static char big[CLIENT_KEY_FILE_MAX + 1];
	memset(big, '#', sizeof(big));
	temp_file(path, sizeof(path), big, sizeof(big));
	cr_assert(eq(int, client_key_file_load(path, &bad, err, sizeof(err)), -EFBIG));
	unlink(path);
	cr_assert(not(bad.logon));
	cr_assert(eq(u64, bad.key_id, 0));
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libomsclient example (docs/tools.md, "libomsclient"): log on with an API key file, fund
 * a user and wait for the answer, send one IOC order, print every event until it is done.
 *
 *   cc example.c $(pkg-config --cflags --libs omsclient) -o example
 *   ./example 10.77.0.2 7400 trader.key 42
 *
 * The build compiles it against the in-tree shared library and test tools_omsclient runs
 * it against the fake node, so it cannot rot.
 */
#include <errno.h>
#include <inttypes.h>
#include <omsclient.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct run {
	uint64_t cl_ord_id; /* the order we wait for */
	int funded;         /* the deposit was answered: 1 accepted, 2 refused */
	int done;           /* 1: finished, 2: failed */
};

static void
on_event(void *ctx, const struct omsc_event *ev)
{
	struct run *r = ctx;
	switch (ev->kind) {
	case OMSC_EV_ADMIN_REPLY:
		printf("transfer %" PRIu64 ": %s, balance %" PRIu64 "\n", ev->transfer_id,
		       omsc_reason_name(ev->reason), ev->value);
		r->funded = ev->reason == OMSC_REASON_NONE ? 1 : 2;
		break;
	case OMSC_EV_ACK:
		printf("ack  %" PRIu64 " order %u:%" PRIu64 " seq %" PRIu64 "\n", ev->cl_ord_id,
		       ev->order_shard, ev->order_seq, ev->seq);
		break;
	case OMSC_EV_NAK:
		printf("nak  %" PRIu64 " %s\n", ev->cl_ord_id, omsc_reason_name(ev->reason));
		if (ev->cl_ord_id == r->cl_ord_id)
			r->done = 2;
		break;
	case OMSC_EV_EXEC:
		printf("%-9s %" PRIu64 " px %" PRId64 " qty %" PRId64 " cum %" PRId64
		       " leaves %" PRId64 "%s%s\n",
		       omsc_exec_name(ev->exec), ev->cl_ord_id, ev->last_px, ev->last_qty,
		       ev->cum_qty, ev->leaves_qty, ev->done ? " done" : "",
		       ev->seq_fill ? " (recovered)" : "");
		if (ev->cl_ord_id == r->cl_ord_id && ev->done)
			r->done = ev->exec == OMSC_EXEC_REJECTED ? 2 : 1;
		break;
	case OMSC_EV_GAVE_UP:
		printf("no answer to %" PRIu64 " after %u sends\n",
		       ev->request == OMSC_REQ_TRANSFER ? ev->transfer_id : ev->cl_ord_id,
		       ev->tries);
		r->done = 2;
		break;
	case OMSC_EV_SESSION:
		printf("session: %u %s%s\n", ev->session, omsc_reason_name(ev->reason),
		       ev->session_ended ? " (ended)" : "");
		if (ev->session_ended)
			r->done = 2;
		break;
	default:
		break;
	}
}

int
main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s HOST PORT KEY_FILE USER\n", argv[0]);
		return 2;
	}
	if (omsc_abi() != OMSC_ABI) {
		fprintf(stderr, "libomsclient ABI %d, built for %d\n", omsc_abi(), OMSC_ABI);
		return 1;
	}
	struct omsc_config cfg;
	omsc_config_init(&cfg);
	cfg.host = argv[1];
	cfg.port = (uint16_t)strtoul(argv[2], NULL, 10);
	cfg.key_file = argv[3];
	cfg.relogon = true; /* a node restart costs a relogon, not the run */
	struct omsc *o;
	int rc = omsc_open(&o, &cfg);
	if (rc < 0) {
		fprintf(stderr, "open: %s\n", strerror(-rc));
		return 1;
	}
	rc = omsc_logon(o, 5000);
	if (rc < 0) {
		fprintf(stderr, "logon: %s\n", rc == -EACCES ? omsc_reason_name(omsc_logon_reason(o))
							 : strerror(-rc));
		omsc_close(o);
		return 1;
	}
	uint64_t user = strtoull(argv[4], NULL, 10);
	uint64_t id = omsc_now_ns() / 1000; /* increasing per user, as the node requires */
	struct omsc_transfer dep = {.user = user, .transfer_id = id, .asset = 2, .amount = 100000};
	struct omsc_order ord = {.user = user, .cl_ord_id = id + 1, .symbol = 1,
				 .side = OMSC_SIDE_BUY, .type = OMSC_ORD_LIMIT,
				 .tif = OMSC_TIF_IOC, .px = 100, .qty = 3};
	struct run r = {.cl_ord_id = ord.cl_ord_id};
	/* The money first: an order sent with its deposit could reach the shard before it. */
	if (omsc_transfer(o, &dep, 0) < 0)
		r.done = 2;
	/* Bounded: the library gives up on an unanswered request (give_up_ms). */
	while (r.done == 0 && r.funded == 0)
		if (omsc_poll(o, 100, on_event, &r) < 0)
			r.done = 2;
	if (r.done == 0 && (r.funded != 1 || omsc_new_order(o, &ord, 0) < 0))
		r.done = 2;
	while (r.done == 0)
		if (omsc_poll(o, 100, on_event, &r) < 0)
			r.done = 2;
	struct omsc_stats st;
	omsc_stats(o, &st, sizeof(st));
	printf("sent %" PRIu64 " frames, %" PRIu64 " retransmits, %" PRIu64 " answers recovered\n",
	       st.frames_tx, st.retransmits, st.seq_filled);
	omsc_logout(o);
	omsc_close(o);
	return r.done == 1 ? 0 : 1;
}

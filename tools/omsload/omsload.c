/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsload — a load generator over UDP (docs/tools.md).
 *
 *   omsload [--host A] [--port N] [--bind A] [--session N] [--key HEX32 | --key-file PATH]
 *           [--users N] [--rate R] [--seconds S] [--seed S] [--symbols N] [--mid P]
 *           [--first-user U] [--drain-ms N] [--inflight N] [--transfer-shard N] [--flatten]
 *           [--history FILE] [--no-fund] [--cold-ms N] [--ioc] [--seq-from-one]
 *           [--first-symbol S] [--rest] [--hist] [--quiet-ms N] [--drop-rx-permille N]
 *
 * 0. With --key-file (an API key: client_key_file_load) it logs on first, within
 *    LOGON_WAIT_MS, and speaks session frames; relogon is on, so a node that loses the
 *    session (a restart, an idle end) is logged on to again and the unanswered requests
 *    go again. A refused logon prints its reason and exits 1.
 * 1. Funding: one deposit per user and asset (base 1, quote 2); waits for the answers (or
 *    --drain-ms) so orders do not race their money. By default the gateway routes each
 *    deposit to the user's owner shard like an order (WIRE_TRANSFER_F_ROUTE);
 *    --transfer-shard N sends them straight to OMS shard N instead. --no-fund skips it: the
 *    caller funded the users another way (tests/bench/app/churn.sh seeds the accounts rows
 *    in PostgreSQL before the nodes start).
 * 2. Load: --rate requests/s for --seconds from a seeded mix (common/prng.h): limit orders
 *    near --mid (some crossing), cancels of the user's own open orders (always once a user
 *    rests 3/4 of LIVE_MAX, so the book stays bounded), some IOC limits and market orders.
 *    With --ioc every limit order is IOC: nothing rests, so a user is flat (evictable) once
 *    its order is done (tests/bench/app/churn.sh MIX=ioc: the hot-user cache when no more
 *    users than the cap hold open orders). With --rest every order is a GTC limit 1..40
 *    ticks off the mid that never crosses, and nothing is cancelled: a book that only
 *    grows (tests/e2e/test_symbol_move_live.sh seeds 10,000 resting orders so). Orders go
 *    to symbols --first-symbol .. --first-symbol + --symbols - 1 (default 1..). --seq-from-one: every user's answers are numbered
 *    from 1 in this run (users new to the cluster, or seeded rows): an answer lost before the
 *    first one seen is asked for too, not taken as the start of the sequence.
 *    At most --inflight requests are unanswered at once; beyond that the generator waits
 *    (counted as throttled) rather than queueing without bound.
 * 3. Drain: waits up to --drain-ms for the outstanding answers and then for the reports
 *    that follow them, asking every TAIL_REPLAY_MS for the answers never seen
 *    (client_replay_tail: a final report lost with no later seq to reveal it), until nothing
 *    new has come for QUIET_MS (--quiet-ms: longer, for a backlog whose re-drives back off
 *    for longer than that) and TAIL_FRUITLESS tail requests in a row brought nothing
 *    new. With --flatten it then cancels every order still resting and drains again. It prints the report, including the
 *    replay line (REPORT_REPLAYs sent, holes filled and still missing), the ledger line
 *    (ledger.h: every order sent: acked, resting, final, unreported, doubled,
 *    overfilled — what a failover test checks), and the last line is
 *      load: sent=N acked=N naked=N final=N ack_p50_us=N ack_p99_us=N
 *    and, only when logged on (so parsers of runs without a key see the line unchanged),
 *    the session's counters after those: seq_resyncs relogons rate_refused rate_warnings
 *    session_ended.
 *    With --history FILE every request sent and every message received is also written to
 *    FILE (history.h), for a checker that does not trust this bookkeeping.
 *    where acked counts requests first answered by an ACK or (the ACK late or lost) a report,
 *    final counts DONE and REJECTED reports, and latency is first send → ACK.
 *    With --cold-ms N each new order is also classed, on the client side, as cold (its user
 *    sent nothing for more than N ms, or never) or hot, and two more lines before the last
 *    one give each class's count, answers and ACK latency (the hot-user cache's cost seen by
 *    the client: a cold order may wait for a hydration from the database):
 *      latency_cold: orders=N acked=N naked=N capacity=N ack_p50_us=N ack_p90_us=N ...
 *      latency_hot: (the same fields)
 *    With --hist a line after the latency line gives the ACK latencies in power-of-two bins:
 *      latency_hist: ack_us: le_1=N le_2=N le_4=N ... (values at most 1, 2, 4, ... µs)
 * Exit: 0 after a run with answers, 1 logon refused, 3 when nothing at all was answered
 * (or the logon was not), 2 usage (a bad key file too), 4 I/O.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/hist.h"
#include "common/prng.h"
#include "tools/client.h"
#include "tools/omsload/history.h"
#include "tools/omsload/ledger.h"

#define USERS_MAX 100000
#define LIVE_MAX 32           /* open orders remembered per user (cancel targets) */
#define SEND_BURST 256        /* requests generated per loop turn */
#define QUIET_MS 300          /* drain: nothing new for this long ends it ... */
#define TAIL_REPLAY_MS 500    /* ... after tail replays this far apart ... */
#define TAIL_FRUITLESS 2      /* ... this many in a row brought nothing new (one may be lost) */
#define ASSET_BASE 1
#define ASSET_QUOTE 2
#define LOGON_WAIT_MS 5000    /* --key-file: the LOGON_REPLY is awaited this long */

enum tag {
	TAG_DEPOSIT = 1,
	TAG_ORDER,
	TAG_CANCEL,
};
#define TAG_KIND_MASK 0xffu   /* the enum tag part of a request's tag */
#define TAG_F_COLD 0x100u     /* --cold-ms: a new order whose user was idle (or new) */

#define ID_SEQ_BITS 22     /* per-user request counter below the run's start time */

struct user_state {
	uint64_t live[LIVE_MAX]; /* cl_ord_ids the node reported open */
	uint32_t live_count;
	uint32_t id_next;        /* next per-user request number (wraps at 2^ID_SEQ_BITS) */
	uint64_t last_sent_ns;   /* the user's last request sent (0: none yet) */
};

/* --cold-ms: one class of new orders (cold or hot) and how the node answered them. */
struct order_class {
	struct hist ack_us;      /* first send → ACK */
	uint64_t orders;         /* new orders sent in this class */
	uint64_t acked;          /* first answered by an ACK (or a report) */
	uint64_t naked;          /* first answered by a NAK */
	uint64_t capacity;       /* ... of which CAPACITY */
};

struct load {
	struct client *c;
	struct ledger led;
	struct history hist;
	struct prng prng;
	struct user_state *users;
	uint32_t user_count;
	uint64_t first_user;
	uint32_t symbols;
	uint32_t first_symbol;   /* symbols first_symbol .. first_symbol + symbols - 1 */
	bool rest_only;          /* --rest: GTC limits that never cross, no cancels */
	int64_t mid;
	uint64_t id_base;        /* run-unique high bits of every cl_ord_id / transfer_id */
	struct hist ack_us;      /* first send → ACK */
	uint64_t sent, acked, naked, final, gave_up, throttled;
	uint64_t orders, cancels, markets, iocs;
	uint64_t deposits_sent, deposits_ok, deposits_refused, deposits_lost;
	uint64_t fills, opens;
	uint64_t naks_by_reason[WIRE_REASON_MAX + 1];
	uint64_t flattened;      /* --flatten: cancels sent at the end */
	uint64_t fresh;          /* messages received that were not seq repeats */
	uint64_t tail_requests;  /* REPORT_REPLAYs sent by client_replay_tail in the drains */
	uint64_t cold_ns;        /* --cold-ms in ns; 0: orders are not classed */
	uint64_t quiet_ms;       /* --quiet-ms: the drain's quiet that ends it (QUIET_MS) */
	bool ioc_only;           /* --ioc: every limit order IOC (nothing rests) */
	struct order_class cold; /* new orders whose user sent nothing for cold_ns (or never) */
	struct order_class hot;  /* the other new orders */
};

/* --hist: a histogram in power-of-two bins, "le_N=count" (values at most N) from 1 up to
 * the largest bin used, on one line. */
static void
hist_print_log2(const char *name, const struct hist *h)
{
	uint64_t bins[65] = { 0 };
	int top = 0;
	for (uint32_t b = 0; b < HIST_BUCKETS; b++) {
		if (h->buckets[b] == 0)
			continue;
		uint64_t hi = hist_bucket_high(b);
		int k = hi <= 1 ? 0 : 64 - __builtin_clzll(hi - 1); /* 2^k >= hi */
		bins[k] += h->buckets[b];
		if (k > top)
			top = k;
	}
	printf("%s:", name);
	for (int k = 0; k <= top && k < 64; k++)
		printf(" le_%" PRIu64 "=%" PRIu64, (uint64_t)1 << k, bins[k]);
	printf("\n");
}

static int
usage(void)
{
	fputs("usage: omsload [--host A] [--port N] [--bind A] [--session N]\n"
	      "               [--key HEX32 | --key-file PATH] [--users N]\n"
	      "               [--rate R] [--seconds S] [--seed S] [--symbols N] [--mid P]\n"
	      "               [--first-user U] [--drain-ms N] [--inflight N]\n"
	      "               [--transfer-shard N] [--flatten] [--history FILE]\n"
	      "               [--no-fund] [--cold-ms N] [--ioc] [--seq-from-one]\n"
	      "               [--first-symbol S] [--rest] [--hist] [--quiet-ms N]\n"
	      "               [--drop-rx-permille N]  (tests: lose N/1000 of the answers)\n",
	      stderr);
	return 2;
}

/* After the drain: what the ledger concludes (ledger.h, docs/tools.md). */
static void
ledger_print(const struct load *l)
{
	const struct ledger *g = &l->led;
	struct ledger_counts n;
	ledger_count(g, &n);
	printf("ledger: acked=%" PRIu64 " resting=%" PRIu64 " final=%" PRIu64
	       " unreported=%" PRIu64 " doubled=%" PRIu64 " overfilled=%" PRIu64
	       " seq_gaps=%" PRIu64 " seq_filled=%" PRIu64 " untracked=%" PRIu64
	       " flattened=%" PRIu64 "\n",
	       n.acked, n.resting, n.final, n.unreported, n.doubled, n.overfilled, g->seq_gaps,
	       g->seq_filled, g->full + g->seq_untracked, l->flattened);
}

static struct user_state *
user_of(struct load *l, uint64_t user)
{
	if (user < l->first_user || user - l->first_user >= l->user_count)
		return NULL;
	return &l->users[user - l->first_user];
}

static void
live_remove(struct user_state *u, uint64_t id)
{
	for (uint32_t i = 0; i < u->live_count; i++) {
		if (u->live[i] == id) {
			u->live[i] = u->live[--u->live_count];
			return;
		}
	}
}

/* Whether the node has settled the order: a late OPEN must not make it a cancel target. */
static bool
order_final(const struct load *l, uint64_t user, uint64_t id)
{
	const struct ledger_ord *o = ledger_order(&l->led, user, id);
	return o != NULL && o->finals > 0;
}

static void
on_event(void *ctx, const struct client_event *ev)
{
	struct load *l = ctx;
	struct client_req *r = ev->req;
	struct order_class *cls = NULL; /* --cold-ms: the class of the order r answers */
	if (r != NULL && l->cold_ns != 0 && (r->tag & TAG_KIND_MASK) == TAG_ORDER)
		cls = (r->tag & TAG_F_COLD) != 0 ? &l->cold : &l->hot;
	if (ev->kind == CLIENT_EV_GAVE_UP)
		history_gave_up(&l->hist, ev->now_ns, r->user, r->id, r->tag & TAG_KIND_MASK);
	else if (ev->msg != NULL)
		history_received(&l->hist, ev->now_ns, ev->msg); /* repeats too: the checker dedups */
	if (ev->msg != NULL && !ev->seq_repeat)
		l->fresh++; /* what keeps a drain going: a replay of answers seen does not */
	/* The ledger applies each numbered message once, by its (user, seq): a message seen
	 * already (a new leader re-sends its recent reports) is not counted again, however
	 * old; a late one is, however late. r is set only for a request's first answer. */
	switch (ev->kind) {
	case CLIENT_EV_ACK: {
		const struct wire_ack *m = (const void *)ev->msg;
		(void)ledger_on_ack(&l->led, m);
		if (r != NULL) {
			l->acked++;
			hist_record(&l->ack_us, (ev->now_ns - r->first_ns) / 1000u);
		}
		if (cls != NULL) {
			cls->acked++;
			hist_record(&cls->ack_us, (ev->now_ns - r->first_ns) / 1000u);
		}
		break;
	}
	case CLIENT_EV_NAK: {
		const struct wire_nak *m = (const void *)ev->msg;
		if (!ledger_on_nak(&l->led, m) && r == NULL)
			break;
		if (r != NULL)
			l->naked++;
		if (cls != NULL) {
			cls->naked++;
			cls->capacity += m->reason == WIRE_REASON_CAPACITY;
		}
		l->naks_by_reason[m->reason < WIRE_REASON_MAX ? m->reason : WIRE_REASON_MAX]++;
		break;
	}
	case CLIENT_EV_EXEC: {
		const struct wire_exec_report *m = (const void *)ev->msg;
		/* A report that answers the request first (its ACK late or lost) admits it as
		 * an ACK would; the ACK that follows finds no request and is not counted. */
		if (r != NULL)
			l->acked++;
		if (cls != NULL)
			cls->acked++;
		if (!ledger_on_exec(&l->led, m))
			break;
		struct user_state *u = user_of(l, m->user);
		if (m->exec == WIRE_EXEC_OPEN) {
			l->opens++;
			if (u != NULL && u->live_count < LIVE_MAX &&
			    !order_final(l, m->user, m->cl_ord_id)) {
				live_remove(u, m->cl_ord_id);
				u->live[u->live_count++] = m->cl_ord_id;
			}
		} else if (m->exec == WIRE_EXEC_FILL) {
			l->fills++;
		}
		if (wire_report_final(m)) {
			l->final++;
			if (u != NULL)
				live_remove(u, m->cl_ord_id);
		}
		break;
	}
	case CLIENT_EV_ADMIN_REPLY:
		if (r != NULL && r->state == CLIENT_REQ_ANSWERED)
			l->deposits_ok++;
		else if (r != NULL)
			l->deposits_refused++;
		break;
	case CLIENT_EV_GAVE_UP:
		if ((r->tag & TAG_KIND_MASK) == TAG_DEPOSIT)
			l->deposits_lost++;
		else
			l->gave_up++;
		break;
	default:
		break;
	}
	/* The table only has to hold a request until its first answer (retransmits stop
	 * there); what follows is matched by user and cl_ord_id above. */
	if (r != NULL)
		client_release(l->c, r);
}

static void
send_one(struct load *l, uint64_t now_ns)
{
	uint64_t msg[CLIENT_MSG_MAX / 8];
	memset(msg, 0, sizeof(msg));
	uint32_t ui = (uint32_t)prng_below(&l->prng, l->user_count);
	struct user_state *u = &l->users[ui];
	uint64_t user = l->first_user + ui;
	uint64_t id = l->id_base | (u->id_next++ & ((1u << ID_SEQ_BITS) - 1));
	uint64_t roll = prng_below(&l->prng, 100);
	uint64_t tag;
	/* Cancels of own open orders: ~15% of the mix, and always once the user rests 3/4 of
	 * LIVE_MAX, so the book (and the node's order pool) stays bounded over a long run. */
	if (!l->rest_only && u->live_count > 0 &&
	    (roll < 15 || u->live_count >= LIVE_MAX * 3 / 4)) {
		uint32_t k = (uint32_t)prng_below(&l->prng, u->live_count);
		struct wire_cancel *m = (void *)msg;
		wire_hdr_init(&m->hdr, WIRE_CANCEL, 0);
		m->user = user;
		m->cl_ord_id = id;
		m->orig_cl_ord_id = u->live[k];
		u->live[k] = u->live[--u->live_count]; /* one cancel per order */
		tag = TAG_CANCEL;
		l->cancels++;
	} else {
		struct wire_new_order *m = (void *)msg;
		wire_hdr_init(&m->hdr, WIRE_NEW_ORDER, 0);
		m->user = user;
		m->cl_ord_id = id;
		m->symbol = l->first_symbol + (uint32_t)prng_below(&l->prng, l->symbols);
		m->side = prng_chance(&l->prng, 1, 2) ? WIRE_SIDE_BUY : WIRE_SIDE_SELL;
		if (l->rest_only) {
			/* --rest: a deep book that only grows (bids 1..40 ticks below the mid,
			 * asks above it). */
			m->ord_type = WIRE_ORD_LIMIT;
			m->tif = WIRE_TIF_GTC;
			int64_t off = prng_range(&l->prng, 1, 40);
			m->px = m->side == WIRE_SIDE_BUY ? l->mid - off : l->mid + off;
			m->qty = prng_range(&l->prng, 1, 10);
		} else if (roll >= 95) {
			m->ord_type = WIRE_ORD_MARKET;
			m->tif = WIRE_TIF_IOC;
			if (m->side == WIRE_SIDE_BUY)
				m->quote_qty = l->mid * prng_range(&l->prng, 1, 5);
			else
				m->qty = prng_range(&l->prng, 1, 5);
			l->markets++;
		} else {
			m->ord_type = WIRE_ORD_LIMIT;
			m->tif = roll >= 85 || l->ioc_only ? WIRE_TIF_IOC : WIRE_TIF_GTC;
			l->iocs += m->tif == WIRE_TIF_IOC;
			/* Bids below the mid and asks above it, a few crossing so trades happen. */
			int64_t off = prng_range(&l->prng, -2, 20);
			m->px = m->side == WIRE_SIDE_BUY ? l->mid - off : l->mid + off;
			m->qty = prng_range(&l->prng, 1, 10);
		}
		tag = TAG_ORDER;
		l->orders++;
		ledger_order_sent(&l->led, user, id, m->qty);
		if (l->cold_ns != 0) {
			/* Cold: the user sent nothing for longer than the node's TTL (or never),
			 * so the node has likely evicted it and must hydrate it first. */
			bool cold = u->last_sent_ns == 0 || now_ns - u->last_sent_ns > l->cold_ns;
			tag |= cold ? TAG_F_COLD : 0;
			(cold ? &l->cold : &l->hot)->orders++;
		}
	}
	int err = 0;
	if (client_submit(l->c, msg, tag, now_ns, &err) != NULL) {
		l->sent++;
		u->last_sent_ns = now_ns;
		history_sent(&l->hist, now_ns, (const void *)msg);
	}
}

/* --cold-ms: one class's line (latency_cold: / latency_hot:). */
static void
class_print(const char *name, const struct order_class *c)
{
	printf("latency_%s: orders=%" PRIu64 " acked=%" PRIu64 " naked=%" PRIu64
	       " capacity=%" PRIu64 " ack_p50_us=%" PRIu64 " ack_p90_us=%" PRIu64
	       " ack_p99_us=%" PRIu64 " ack_max_us=%" PRIu64 "\n",
	       name, c->orders, c->acked, c->naked, c->capacity, hist_percentile(&c->ack_us, 50),
	       hist_percentile(&c->ack_us, 90), hist_percentile(&c->ack_us, 99),
	       c->ack_us.count ? c->ack_us.max : 0);
}

static void
sleep_until_answers(struct load *l, uint64_t drain_ms)
{
	uint64_t end = client_now_ns() + drain_ms * 1000000u;
	while (client_unanswered(l->c) > 0 && client_now_ns() < end)
		client_poll(l->c, 10, on_event, l);
}

/*
 * Drain: every request answered, then the reports that follow the answers (a cancel's DONE
 * comes after its ACK, from the ME), within drain_ms. Holes between seqs are asked for by the
 * client's automatic replay; the answers after the newest seq seen (a lost final report
 * leaves no hole) only by a tail replay, sent every TAIL_REPLAY_MS. The drain ends once
 * nothing new has come for QUIET_MS and the last TAIL_FRUITLESS tail replays brought
 * nothing new: one request, or its answers, may itself be lost.
 */
static void
drain(struct load *l, uint64_t drain_ms)
{
	uint64_t end = client_now_ns() + drain_ms * 1000000u, now;
	sleep_until_answers(l, drain_ms);
	uint64_t quiet_from = client_now_ns(), tail_next = quiet_from, tail_last = 0;
	uint64_t fresh = l->fresh;
	uint32_t fruitless = 0; /* tail replays sent since something new came */
	while ((now = client_now_ns()) < end) {
		/* Quiet since the last news and since the last tail replay had its chance. */
		if (fruitless >= TAIL_FRUITLESS && now - quiet_from >= l->quiet_ms * 1000000u &&
		    now - tail_last >= QUIET_MS * 1000000u)
			break;
		if (now >= tail_next) {
			l->tail_requests += client_replay_tail(l->c);
			tail_last = now;
			tail_next = now + TAIL_REPLAY_MS * 1000000u;
			fruitless++;
		}
		client_poll(l->c, 10, on_event, l);
		if (l->fresh != fresh) {
			fresh = l->fresh;
			quiet_from = client_now_ns();
			fruitless = 0;
		}
	}
}

/* --flatten: cancel every order the ledger says rests, then drain again, so the run leaves
 * nothing in the book (and a caller can check the book is empty). */
static void
flatten(struct load *l, uint32_t requests_max, uint64_t drain_ms)
{
	uint64_t n = 0, cursor = 0;
	const struct ledger_ord *o;
	while ((o = ledger_next_resting(&l->led, &cursor)) != NULL) {
		struct user_state *u = user_of(l, o->user);
		if (u == NULL)
			continue;
		uint64_t msg[CLIENT_MSG_MAX / 8];
		memset(msg, 0, sizeof(msg));
		struct wire_cancel *m = (void *)msg;
		wire_hdr_init(&m->hdr, WIRE_CANCEL, 0);
		m->user = o->user;
		m->cl_ord_id = l->id_base | (u->id_next++ & ((1u << ID_SEQ_BITS) - 1));
		m->orig_cl_ord_id = o->id;
		if (client_tracked(l->c) >= requests_max / 2) {
			client_flush(l->c);
			sleep_until_answers(l, drain_ms);
		}
		int err = 0;
		uint64_t now = client_now_ns();
		if (client_submit(l->c, msg, TAG_CANCEL, now, &err) != NULL) {
			n++;
			l->sent++;
			history_sent(&l->hist, now, (const void *)msg);
		}
	}
	client_flush(l->c);
	l->flattened = n;
	drain(l, drain_ms);
}

int
main(int argc, char **argv)
{
	struct client_config cfg = {.requests_max = 4096, .users_max = 0};
	uint64_t users = 10, rate = 1000, seconds = 5, seed = 1, symbols = 1, mid = 10000;
	uint64_t first_user = 1000, drain_ms = 2000, inflight = 4096, transfer_shard = 0, v;
	uint64_t cold_ms = 0;
	int rc;
	uint64_t first_symbol = 1;
	bool do_flatten = false, do_fund = true, ioc_only = false, rest_only = false;
	bool print_hist = false;
	uint64_t quiet_ms = QUIET_MS;
	const char *history_path = NULL, *key_file = NULL, *key_hex = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage();
			return 0;
		}
		if (strcmp(a, "--flatten") == 0) {
			do_flatten = true;
			continue;
		}
		if (strcmp(a, "--no-fund") == 0) {
			do_fund = false;
			continue;
		}
		if (strcmp(a, "--ioc") == 0) {
			ioc_only = true;
			continue;
		}
		if (strcmp(a, "--rest") == 0) {
			rest_only = true;
			continue;
		}
		if (strcmp(a, "--hist") == 0) {
			print_hist = true;
			continue;
		}
		if (strcmp(a, "--seq-from-one") == 0) {
			cfg.seq_from_one = true;
			continue;
		}
		if (val == NULL || strncmp(a, "--", 2) != 0)
			return usage();
		i++;
		char *end;
		errno = 0;
		v = strtoull(val, &end, 0);
		bool num = errno == 0 && end != val && *end == '\0' && val[0] != '-';
		if (strcmp(a, "--host") == 0)
			cfg.host = val;
		else if (strcmp(a, "--history") == 0)
			history_path = val;
		else if (strcmp(a, "--bind") == 0)
			cfg.bind_host = val;
		else if (strcmp(a, "--key") == 0 && wire_key_parse_hex(val, &cfg.key) == 0)
			key_hex = val;
		else if (strcmp(a, "--key-file") == 0)
			key_file = val;
		else if (strcmp(a, "--port") == 0 && num && v > 0 && v <= UINT16_MAX)
			cfg.port = (uint16_t)v;
		else if (strcmp(a, "--session") == 0 && num && v <= UINT32_MAX)
			cfg.session_id = (uint32_t)v;
		else if (strcmp(a, "--users") == 0 && num && v > 0 && v <= USERS_MAX)
			users = v;
		else if (strcmp(a, "--rate") == 0 && num && v > 0 && v <= 10000000)
			rate = v;
		else if (strcmp(a, "--seconds") == 0 && num && v > 0 && v <= 3600)
			seconds = v;
		else if (strcmp(a, "--seed") == 0 && num)
			seed = v;
		else if (strcmp(a, "--symbols") == 0 && num && v > 0 && v <= 1000000)
			symbols = v;
		else if (strcmp(a, "--first-symbol") == 0 && num && v > 0 && v <= 1000000)
			first_symbol = v;
		else if (strcmp(a, "--mid") == 0 && num && v >= 100 && v <= INT32_MAX)
			mid = v;
		else if (strcmp(a, "--first-user") == 0 && num && v > 0 && v < UINT64_MAX / 2)
			first_user = v;
		else if (strcmp(a, "--drain-ms") == 0 && num && v <= 600000)
			drain_ms = v;
		else if (strcmp(a, "--inflight") == 0 && num && v > 0 && v <= (1u << 20))
			inflight = v;
		else if (strcmp(a, "--transfer-shard") == 0 && num && v <= UINT16_MAX)
			transfer_shard = v;
		else if (strcmp(a, "--cold-ms") == 0 && num && v > 0 && v <= 86400000)
			cold_ms = v;
		else if (strcmp(a, "--quiet-ms") == 0 && num && v >= QUIET_MS && v <= 600000)
			quiet_ms = v;
		else if (strcmp(a, "--drop-rx-permille") == 0 && num && v < 1000)
			cfg.drop_rx_permille = (uint32_t)v;
		else {
			fprintf(stderr, "omsload: bad option %s %s\n", a, val);
			return usage();
		}
	}
	if (key_hex != NULL && key_file != NULL) {
		fprintf(stderr, "omsload: --key and --key-file exclude each other (a session has "
				"its own MAC key)\n");
		return usage();
	}
	if (key_file != NULL) {
		char why[256];
		rc = client_key_file_load(key_file, &cfg, why, sizeof(why));
		if (rc < 0) {
			fprintf(stderr, "omsload: %s\n", why);
			return rc == -EINVAL || rc == -EFBIG ? 2 : 4;
		}
		cfg.relogon = true; /* a long run outlives a node restart */
	}
	if (cfg.session_id == 0)
		cfg.session_id = (uint32_t)getpid();
	cfg.drop_seed = seed ^ UINT64_C(0x5eed0d20b);
	cfg.requests_max = (uint32_t)(inflight + users * 2);
	cfg.users_max = (uint32_t)users;

	static struct load l;
	l.user_count = (uint32_t)users;
	l.first_user = first_user;
	l.symbols = (uint32_t)symbols;
	l.first_symbol = (uint32_t)first_symbol;
	l.rest_only = rest_only;
	l.mid = (int64_t)mid;
	l.users = calloc(users, sizeof(*l.users));
	if (l.users == NULL)
		return 4;
	/* The ledger: room for every order the run can send, at most 3/4 full. */
	if (ledger_init(&l.led, rate * seconds, first_user, (uint32_t)users) < 0)
		return 4;
	prng_seed(&l.prng, seed);
	rc = history_open(&l.hist, history_path);
	if (rc < 0) {
		fprintf(stderr, "omsload: cannot write %s: %s\n", history_path, strerror(-rc));
		return 4;
	}
	hist_init(&l.ack_us);
	hist_init(&l.cold.ack_us);
	hist_init(&l.hot.ack_us);
	l.cold_ns = cold_ms * 1000000u;
	l.quiet_ms = quiet_ms;
	l.ioc_only = ioc_only;
	/* Ids must not repeat across runs (the node dedups by (user, id)): the run's start in
	 * wall-clock milliseconds (41 bits until 2039) above a per-user counter of 22 bits. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t start_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	l.id_base = start_ms << ID_SEQ_BITS;
	for (uint32_t i = 0; i < l.user_count; i++)
		l.users[i].id_next = 1;
	rc = client_open(&l.c, &cfg);
	explicit_bzero(cfg.secret, sizeof(cfg.secret)); /* the client keeps its own copy */
	if (rc < 0) {
		fprintf(stderr, "omsload: cannot open the UDP socket: %s\n", strerror(-rc));
		free(l.users);
		ledger_free(&l.led);
		return rc == -EINVAL ? 2 : 4;
	}
	if (cfg.logon) {
		rc = client_logon(l.c, LOGON_WAIT_MS);
		if (rc < 0) {
			if (rc == -EACCES)
				fprintf(stderr, "omsload: logon refused: %s\n",
					wire_reason_name(client_logon_reason(l.c)));
			else
				fprintf(stderr, "omsload: no answer to the logon within %d ms\n",
					LOGON_WAIT_MS);
			client_close(l.c);
			free(l.users);
			ledger_free(&l.led);
			return rc == -EACCES ? 1 : 3;
		}
		fprintf(stderr, "omsload: logged on, session %u, heartbeat %u ms\n",
			client_session_id(l.c), client_heartbeat_ms(l.c));
	}

	/* 1. Funding (unless the caller funded the users already). */
	uint64_t now = client_now_ns();
	for (uint32_t i = 0; do_fund && i < l.user_count; i++) {
		for (uint32_t asset = ASSET_BASE; asset <= ASSET_QUOTE; asset++) {
			uint64_t msg[CLIENT_MSG_MAX / 8] = {0};
			struct wire_transfer *t = (void *)msg;
			wire_hdr_init(&t->hdr, WIRE_TRANSFER, (uint16_t)transfer_shard);
			if (transfer_shard == 0)
				t->hdr.flags = WIRE_TRANSFER_F_ROUTE; /* the gateway finds the owner */
			t->user = first_user + i;
			/* Unique over all users: ADMIN_REPLY names only the transfer id. */
			t->transfer_id = l.id_base | (2u * i + asset - ASSET_BASE + 1u);
			t->asset = asset;
			t->amount = asset == ASSET_BASE ? INT64_C(1000000000) : INT64_C(1000000000000);
			int err;
			if (client_submit(l.c, msg, TAG_DEPOSIT, now, &err) != NULL) {
				l.deposits_sent++;
				l.users[i].last_sent_ns = now;
				history_sent(&l.hist, now, (const void *)msg);
			}
			if (client_tracked(l.c) >= cfg.requests_max / 2)
				sleep_until_answers(&l, drain_ms);
		}
	}
	client_flush(l.c);
	sleep_until_answers(&l, drain_ms);
	fprintf(stderr, "omsload: deposits sent=%" PRIu64 " ok=%" PRIu64 " refused=%" PRIu64
			" unanswered=%u\n",
		l.deposits_sent, l.deposits_ok, l.deposits_refused, client_unanswered(l.c));
	/* Deposits still unanswered keep being retransmitted during the load until they give
	 * up; they are counted apart from the orders. */

	/* 2. Load, paced: the number due grows with elapsed time. */
	uint64_t start = client_now_ns(), end = start + seconds * 1000000000u;
	uint64_t due_sent = 0;
	while ((now = client_now_ns()) < end) {
		uint64_t due = (uint64_t)((unsigned __int128)(now - start) * rate / 1000000000u);
		uint32_t burst = 0;
		while (due_sent < due && burst < SEND_BURST) {
			if (client_unanswered(l.c) >= inflight ||
			    client_tracked(l.c) >= cfg.requests_max) {
				l.throttled++;
				break;
			}
			send_one(&l, now);
			due_sent++;
			burst++;
		}
		client_flush(l.c);
		client_poll(l.c, burst == SEND_BURST ? 0 : 1, on_event, &l);
	}
	uint64_t load_ns = client_now_ns() - start;

	/* 3. Drain (and with --flatten, cancel what rests and drain again). */
	drain(&l, drain_ms);
	if (do_flatten)
		flatten(&l, cfg.requests_max, drain_ms);

	history_end(&l.hist, client_now_ns());
	if (history_close(&l.hist) < 0) {
		fprintf(stderr, "omsload: writing %s failed\n", history_path);
		return 4;
	}
	const struct client_stats *st = client_stats(l.c);
	double secs = (double)load_ns / 1e9;
	printf("load: users=%" PRIu64 " rate=%" PRIu64 " seconds=%.2f orders=%" PRIu64
	       " cancels=%" PRIu64 " markets=%" PRIu64 " iocs=%" PRIu64 " throttled=%" PRIu64 "\n",
	       users, rate, secs, l.orders, l.cancels, l.markets, l.iocs, l.throttled);
	printf("throughput: sent_per_s=%.0f acked_per_s=%.0f frames_tx=%" PRIu64
	       " retransmits=%" PRIu64 " gave_up=%" PRIu64 " unanswered=%u\n",
	       (double)l.sent / secs, (double)l.acked / secs, st->frames_tx, st->retransmits,
	       l.gave_up, client_unanswered(l.c));
	printf("reports: opens=%" PRIu64 " fills=%" PRIu64 " final=%" PRIu64
	       " seq_gaps=%" PRIu64 " seq_filled=%" PRIu64 " seq_repeats=%" PRIu64
	       " decode_errors=%" PRIu64 "\n",
	       l.opens, l.fills, l.final, st->seq_gaps, st->seq_filled, st->seq_repeats,
	       st->decode_errors);
	/* Holes by the ledger's exact seq sets (the client's window takes seqs it abandoned
	 * for repeats); requests count automatic and tail replays. */
	printf("replay: requests=%" PRIu64 " tail=%" PRIu64 " filled=%" PRIu64
	       " still_missing=%" PRIu64 " abandoned=%" PRIu64 "\n",
	       st->replay_requests, l.tail_requests, l.led.seq_filled,
	       l.led.seq_gaps - l.led.seq_filled, st->seq_abandoned);
	if (cfg.drop_rx_permille != 0)
		printf("drop: rx_permille=%u rx_dropped=%" PRIu64 "\n", cfg.drop_rx_permille,
		       st->rx_dropped);
	printf("deposits: sent=%" PRIu64 " ok=%" PRIu64 " refused=%" PRIu64 " lost=%" PRIu64 "\n",
	       l.deposits_sent, l.deposits_ok, l.deposits_refused, l.deposits_lost);
	printf("naks:");
	bool any = false;
	for (int r = 0; r <= WIRE_REASON_MAX; r++) {
		if (l.naks_by_reason[r] != 0) {
			printf(" %s=%" PRIu64, wire_reason_name((uint16_t)r), l.naks_by_reason[r]);
			any = true;
		}
	}
	printf("%s\n", any ? "" : " none");
	printf("latency: ack_p50_us=%" PRIu64 " ack_p90_us=%" PRIu64 " ack_p99_us=%" PRIu64
	       " ack_p999_us=%" PRIu64 " ack_max_us=%" PRIu64 "\n",
	       hist_percentile(&l.ack_us, 50), hist_percentile(&l.ack_us, 90),
	       hist_percentile(&l.ack_us, 99), hist_percentile(&l.ack_us, 99.9),
	       l.ack_us.count ? l.ack_us.max : 0);
	if (print_hist)
		hist_print_log2("latency_hist: ack_us", &l.ack_us);
	if (l.cold_ns != 0) {
		class_print("cold", &l.cold);
		class_print("hot", &l.hot);
	}
	ledger_print(&l);
	printf("load: sent=%" PRIu64 " acked=%" PRIu64 " naked=%" PRIu64 " final=%" PRIu64
	       " ack_p50_us=%" PRIu64 " ack_p99_us=%" PRIu64,
	       l.sent, l.acked, l.naked, l.final, hist_percentile(&l.ack_us, 50),
	       hist_percentile(&l.ack_us, 99));
	if (cfg.logon)
		printf(" seq_resyncs=%" PRIu64 " relogons=%" PRIu64 " rate_refused=%" PRIu64
		       " rate_warnings=%" PRIu64 " session_ended=%" PRIu64,
		       st->seq_resyncs, st->relogons, st->rate_refused, st->rate_warnings,
		       st->session_ended);
	printf("\n");
	if (client_session_up(l.c))
		(void)client_logout(l.c); /* frees the node's slot now, not after three beats */
	client_close(l.c);
	free(l.users);
	ledger_free(&l.led);
	return l.sent > 0 && l.acked + l.naked == 0 ? 3 : 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsctl order entry: one request over UDP, then the transitions as they arrive
 * (ARCHITECTURE.md §5: ack, pending → open | rejected, fills, cancelled; the last report
 * of an order says done) until a final state or --wait-ms. It is a client of libomsclient's public API (omsclient.h), like any
 * program outside the tree.
 *
 * What ends the wait (request R with id cl-id, target T with id --orig):
 *   order new      NAK(R) → 1; REJECTED(R) → 1; OPEN(R) → 0 (resting; --follow waits for
 *                  its end); done(R) → 0
 *   order cancel   NAK(R) → 1; CANCEL_REJECTED(R) → 1; done(T) → 0 (CANCELLED(T) → 0 at
 *                  the deadline)
 *   order amend    NAK(R) → 1; CANCEL_REJECTED(R) → 1; AMENDED(T) or done(T) → 0
 *   order replace  NAK(R) → 1; CANCEL_REJECTED(R) or REJECTED(R) → 1; OPEN(R)/done(R) → 0
 * done(X): X's last report (omsc_event.done: its last FILL, CANCELLED or AMENDED; a DONE).
 *   deposit etc.   ADMIN_REPLY(R): reason NONE → 0, else 1
 * With --wait ack the first ACK (or ADMIN_REPLY) ends it with 0.
 * Nothing at all before the deadline → 3; an ACK but no final state → 3 as well (said so).
 *
 * With --key-file the client logs on first (omsc_logon, within --wait-ms): a refusal
 * prints its reason and exits 1, no reply exits 3; the node ending the session while we
 * wait (LOGOUT, UNKNOWN_SESSION; no relogon for one request) exits 3. A session that is
 * still up is logged out before exit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/libomsclient/omsclient.h"
#include "tools/omsctl/omsctl.h"

enum op {
	OP_NEW = 1,
	OP_CANCEL,
	OP_AMEND,
	OP_REPLACE,
	OP_TRANSFER,
};

struct run {
	struct ctl *ctl;
	enum op op;
	uint64_t user;
	uint64_t id;          /* cl_ord_id of the request (transfer_id for transfers) */
	uint64_t orig;        /* target of cancel/amend/replace */
	bool follow;          /* new: wait for DONE even when the order rests */
	bool wait_ack;        /* stop at the first ACK */
	bool acked;           /* an ACK for the request arrived */
	bool target_cancelled;/* cancel: CANCELLED(T) seen */
	bool done;            /* a final state was reached */
	int exit_code;        /* when done */
	uint32_t tries;       /* sends of the request, as the last event about it said */
};

/* The request omsctl sends, built from the options before anything is opened. */
struct request {
	struct omsc_order order;       /* OP_NEW */
	struct omsc_transfer transfer; /* OP_TRANSFER */
	int64_t px;                    /* OP_REPLACE */
	int64_t qty;                   /* OP_AMEND, OP_REPLACE */
};

struct name_value {
	const char *name;
	uint8_t value;
};

static int
lookup(struct ctl *ctl, const char *opt, const struct name_value *t, size_t n, uint8_t *out,
       bool required)
{
	const char *v = ctl_opt(ctl, opt);
	if (v == NULL) {
		if (required) {
			ctl_usage(ctl, "--%s is required", opt);
			return -EINVAL;
		}
		return -ENOENT;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(t[i].name, v) == 0) {
			*out = t[i].value;
			return 0;
		}
	}
	ctl_usage(ctl, "--%s: unknown value '%s'", opt, v);
	return -EINVAL;
}

static int
need_u64(struct ctl *ctl, const char *name, uint64_t *out)
{
	int rc = ctl_opt_u64(ctl, name, out);
	if (rc == -ENOENT)
		ctl_usage(ctl, "--%s is required", name);
	return rc;
}

static int
need_i64(struct ctl *ctl, const char *name, int64_t *out)
{
	int rc = ctl_opt_i64(ctl, name, out);
	if (rc == -ENOENT)
		ctl_usage(ctl, "--%s is required", name);
	return rc;
}

static uint64_t
wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A fresh client id: wall-clock microseconds, unique per user for one operator. */
static uint64_t
fresh_id(void)
{
	return wall_ns() / 1000u;
}

/* The order id as shard:user:seq. */
static void
print_oid(FILE *f, const struct omsc_event *ev)
{
	fprintf(f, "%u:%" PRIu64 ":%" PRIu64, ev->order_shard, ev->user, ev->order_seq);
}

/* The wire's name of the message an event came from (docs/wire.md), for --json. */
static const char *
event_type_name(const struct omsc_event *ev)
{
	switch (ev->kind) {
	case OMSC_EV_ACK:
		return "ACK";
	case OMSC_EV_NAK:
		return "NAK";
	case OMSC_EV_EXEC:
		return "EXEC_REPORT";
	case OMSC_EV_ADMIN_REPLY:
		return "ADMIN_REPLY";
	case OMSC_EV_GAVE_UP:
		return "GAVE_UP";
	default:
		break;
	}
	switch (ev->session) {
	case OMSC_SESSION_LOGON:
		return "LOGON_REPLY";
	case OMSC_SESSION_LOGON_TIMEOUT:
		return "LOGON_TIMEOUT";
	case OMSC_SESSION_REJECT:
		return "SESSION_REJECT";
	case OMSC_SESSION_LOGOUT:
		return "LOGOUT";
	default:
		return "?";
	}
}

/* --json: one object per received message. */
static void
print_json(FILE *f, const struct omsc_event *ev)
{
	if (ev->kind == OMSC_EV_GAVE_UP) {
		fprintf(f, "{\"type\":\"GAVE_UP\",\"user\":%" PRIu64 ",\"id\":%" PRIu64
			   ",\"tries\":%u}\n",
			ev->user, ev->request == OMSC_REQ_TRANSFER ? ev->transfer_id : ev->cl_ord_id,
			ev->tries);
		return;
	}
	fprintf(f, "{\"type\":\"%s\"", event_type_name(ev));
	switch (ev->kind) {
	case OMSC_EV_ACK:
		fprintf(f, ",\"user\":%" PRIu64 ",\"cl_ord_id\":%" PRIu64 ",\"oid\":\"", ev->user,
			ev->cl_ord_id);
		print_oid(f, ev);
		fprintf(f, "\",\"seq\":%" PRIu64 ",\"time_ns\":%" PRIu64, ev->seq, ev->time_ns);
		break;
	case OMSC_EV_NAK:
		fprintf(f, ",\"user\":%" PRIu64 ",\"cl_ord_id\":%" PRIu64 ",\"reason\":\"%s\""
			   ",\"owner_shard\":%u,\"leader_node\":%u,\"route_epoch\":%" PRIu64
			   ",\"seq\":%" PRIu64,
			ev->user, ev->cl_ord_id, omsc_reason_name(ev->reason), ev->owner_shard,
			ev->leader_node, ev->route_epoch, ev->seq);
		break;
	case OMSC_EV_EXEC:
		fprintf(f, ",\"user\":%" PRIu64 ",\"cl_ord_id\":%" PRIu64 ",\"oid\":\"", ev->user,
			ev->cl_ord_id);
		print_oid(f, ev);
		fprintf(f, "\",\"seq\":%" PRIu64 ",\"time_ns\":%" PRIu64 ",\"exec\":\"%s\""
			   ",\"symbol\":%u,\"side\":\"%s\",\"liquidity\":%u,\"cause\":\"%s\""
			   ",\"reason\":\"%s\",\"last_px\":%" PRId64 ",\"last_qty\":%" PRId64
			   ",\"cum_qty\":%" PRId64 ",\"leaves_qty\":%" PRId64 ",\"fee\":%" PRId64
			   ",\"done\":%s",
			ev->seq, ev->time_ns, omsc_exec_name(ev->exec), ev->symbol,
			omsc_side_name(ev->side), ev->liquidity, omsc_cause_name(ev->cause),
			omsc_reason_name(ev->reason), ev->last_px, ev->last_qty, ev->cum_qty,
			ev->leaves_qty, ev->fee, ev->done ? "true" : "false");
		break;
	case OMSC_EV_ADMIN_REPLY:
		fprintf(f, ",\"req_id\":%" PRIu64 ",\"reason\":\"%s\",\"leader_node\":%u"
			   ",\"value\":%" PRIu64,
			ev->transfer_id, omsc_reason_name(ev->reason), ev->leader_node, ev->value);
		break;
	case OMSC_EV_SESSION:
		fprintf(f, ",\"session_id\":%u,\"reason\":\"%s\"", ev->session_id,
			omsc_reason_name(ev->reason));
		if (ev->session == OMSC_SESSION_REJECT)
			fprintf(f, ",\"seq\":%" PRIu64 ",\"expected_seq\":%" PRIu64,
				ev->session_seq, ev->expected_seq);
		break;
	default:
		break;
	}
	if (ev->session_ended)
		fputs(",\"session_ended\":true", f);
	if (ev->seq_gap != 0)
		fprintf(f, ",\"seq_gap\":%" PRIu64, ev->seq_gap);
	if (ev->seq_repeat)
		fputs(",\"seq_repeat\":true", f);
	fputs("}\n", f);
}

static void
print_human(FILE *f, const struct omsc_event *ev)
{
	if (ev->seq_gap != 0)
		fprintf(f, "warning: %" PRIu64 " egress message(s) missing before this one\n",
			ev->seq_gap);
	switch (ev->kind) {
	case OMSC_EV_GAVE_UP:
		fprintf(f, "no answer: gave up after %u send(s)\n", ev->tries);
		break;
	case OMSC_EV_ACK:
		fprintf(f, "ack        user=%" PRIu64 " cl_id=%" PRIu64 " oid=", ev->user,
			ev->cl_ord_id);
		print_oid(f, ev);
		fprintf(f, " seq=%" PRIu64 "\n", ev->seq);
		break;
	case OMSC_EV_NAK:
		fprintf(f, "nak        user=%" PRIu64 " cl_id=%" PRIu64 " reason=%s", ev->user,
			ev->cl_ord_id, omsc_reason_name(ev->reason));
		if (ev->reason == OMSC_REASON_NOT_OWNER)
			fprintf(f, " owner_shard=%u", ev->owner_shard);
		if (ev->reason == OMSC_REASON_NOT_LEADER)
			fprintf(f, " leader_node=%u", ev->leader_node);
		fputc('\n', f);
		break;
	case OMSC_EV_EXEC:
		fprintf(f, "%-10s user=%" PRIu64 " cl_id=%" PRIu64 " %s", omsc_exec_name(ev->exec),
			ev->user, ev->cl_ord_id, omsc_side_name(ev->side));
		switch (ev->exec) {
		case OMSC_EXEC_FILL:
			fprintf(f, " px=%" PRId64 " qty=%" PRId64 " fee=%" PRId64 " %s",
				ev->last_px, ev->last_qty, ev->fee,
				ev->liquidity == 1 ? "maker" : ev->liquidity == 2 ? "taker" : "");
			break;
		case OMSC_EXEC_OPEN:
			if (ev->last_px != 0)
				fprintf(f, " px=%" PRId64, ev->last_px);
			break;
		case OMSC_EXEC_REJECTED:
		case OMSC_EXEC_CANCEL_REJECTED:
			fprintf(f, " reason=%s", omsc_reason_name(ev->reason));
			break;
		case OMSC_EXEC_CANCELLED:
			fprintf(f, " qty=%" PRId64 " cause=%s", ev->last_qty,
				omsc_cause_name(ev->cause));
			break;
		default:
			break;
		}
		fprintf(f, " cum=%" PRId64 " leaves=%" PRId64 " seq=%" PRIu64 "%s\n", ev->cum_qty,
			ev->leaves_qty, ev->seq, ev->done ? " done" : "");
		break;
	case OMSC_EV_ADMIN_REPLY:
		if (ev->reason == OMSC_REASON_NONE)
			fprintf(f, "ok         transfer_id=%" PRIu64 " total=%" PRIu64 "\n",
				ev->transfer_id, ev->value);
		else
			fprintf(f, "refused    transfer_id=%" PRIu64 " reason=%s\n", ev->transfer_id,
				omsc_reason_name(ev->reason));
		break;
	case OMSC_EV_SESSION:
		switch (ev->session) {
		case OMSC_SESSION_LOGON:
			fprintf(f, "session    logon refused reason=%s\n",
				omsc_reason_name(ev->reason));
			break;
		case OMSC_SESSION_LOGON_TIMEOUT:
			fputs("session    logon unanswered\n", f);
			break;
		case OMSC_SESSION_REJECT:
			fprintf(f, "session    frame refused reason=%s\n",
				omsc_reason_name(ev->reason));
			break;
		default:
			fprintf(f, "session    ended by the node reason=%s\n",
				omsc_reason_name(ev->reason));
			break;
		}
		break;
	default:
		break;
	}
}

static void
finish(struct run *r, int code)
{
	if (!r->done) {
		r->done = true;
		r->exit_code = code;
	}
}

static void
on_event(void *ctx, const struct omsc_event *ev)
{
	struct run *r = ctx;
	FILE *f = r->ctl->out;
	if (ev->matched || ev->kind == OMSC_EV_GAVE_UP)
		r->tries = ev->tries; /* the one request this run tracks */
	if (ev->session_ended) {
		/* Whatever the request became, no answer can reach us any more. */
		if (r->ctl->json)
			print_json(f, ev);
		else
			print_human(f, ev);
		fflush(f);
		finish(r, CTL_EXIT_NO_ANSWER);
		return;
	}
	/* Show only what concerns this run (a shared session may carry other traffic). */
	bool mine = ev->matched || ev->kind == OMSC_EV_GAVE_UP;
	uint64_t user = 0, id = 0;
	if (ev->kind == OMSC_EV_ACK || ev->kind == OMSC_EV_NAK || ev->kind == OMSC_EV_EXEC) {
		user = ev->user;
		id = ev->cl_ord_id;
		mine = mine || (user == r->user && (id == r->id || id == r->orig));
	}
	if (!mine)
		return;
	if (ev->seq_repeat && !ev->matched)
		return; /* a report shown already (a new leader re-sends its recent ones) */
	if (r->ctl->json)
		print_json(f, ev);
	else
		print_human(f, ev);
	fflush(f);

	if (ev->kind == OMSC_EV_GAVE_UP) {
		finish(r, CTL_EXIT_NO_ANSWER);
		return;
	}
	if (ev->kind == OMSC_EV_ADMIN_REPLY) {
		finish(r, ev->reason == OMSC_REASON_NONE ? CTL_EXIT_OK : CTL_EXIT_REFUSED);
		return;
	}
	bool is_req = user == r->user && id == r->id;
	bool is_target = r->orig != 0 && user == r->user && id == r->orig;
	if (ev->kind == OMSC_EV_NAK && is_req) {
		finish(r, CTL_EXIT_REFUSED);
		return;
	}
	if (ev->kind == OMSC_EV_ACK && is_req) {
		r->acked = true;
		if (r->wait_ack)
			finish(r, CTL_EXIT_OK);
		return;
	}
	if (ev->kind != OMSC_EV_EXEC)
		return;
	if (is_req && ev->exec == OMSC_EXEC_CANCEL_REJECTED) {
		finish(r, CTL_EXIT_REFUSED);
		return;
	}
	switch (r->op) {
	case OP_NEW:
	case OP_REPLACE:
		if (!is_req)
			break;
		if (ev->exec == OMSC_EXEC_REJECTED)
			finish(r, CTL_EXIT_REFUSED);
		else if (ev->done || (ev->exec == OMSC_EXEC_OPEN && !r->follow))
			finish(r, CTL_EXIT_OK);
		break;
	case OP_CANCEL:
		if (is_target && ev->exec == OMSC_EXEC_CANCELLED)
			r->target_cancelled = true;
		if (is_target && ev->done)
			finish(r, CTL_EXIT_OK);
		break;
	case OP_AMEND:
		if (is_target && (ev->exec == OMSC_EXEC_AMENDED || ev->done))
			finish(r, CTL_EXIT_OK);
		break;
	default:
		break;
	}
}

/* Build the request from the options. 0, or an exit code. */
static int
build(struct ctl *ctl, struct run *r, struct request *q)
{
	static const struct name_value sides[] = {{"buy", OMSC_SIDE_BUY},
						  {"sell", OMSC_SIDE_SELL}};
	static const struct name_value types[] = {{"limit", OMSC_ORD_LIMIT},
						  {"market", OMSC_ORD_MARKET}};
	static const struct name_value tifs[] = {
		{"gtc", OMSC_TIF_GTC}, {"ioc", OMSC_TIF_IOC}, {"fok", OMSC_TIF_FOK},
		{"gtd", OMSC_TIF_GTD}, {"post_only", OMSC_TIF_POST_ONLY},
	};
	static const struct name_value stps[] = {
		{"none", OMSC_STP_NONE},
		{"expire_taker", OMSC_STP_EXPIRE_TAKER},
		{"expire_maker", OMSC_STP_EXPIRE_MAKER},
		{"expire_both", OMSC_STP_EXPIRE_BOTH},
	};
	if (need_u64(ctl, "user", &r->user) < 0)
		return CTL_EXIT_USAGE;
	int rc = ctl_opt_u64(ctl, r->op == OP_TRANSFER ? "transfer-id" : "cl-id", &r->id);
	if (rc == -EINVAL)
		return CTL_EXIT_USAGE;
	if (rc == -ENOENT)
		r->id = fresh_id();
	if (r->op == OP_CANCEL || r->op == OP_AMEND || r->op == OP_REPLACE) {
		if (need_u64(ctl, "orig", &r->orig) < 0)
			return CTL_EXIT_USAGE;
		if (r->orig == r->id)
			return ctl_usage(ctl, "--cl-id must differ from --orig");
	}
	switch (r->op) {
	case OP_NEW: {
		struct omsc_order *m = &q->order;
		m->user = r->user;
		m->cl_ord_id = r->id;
		uint64_t sym;
		int64_t px = 0, qty = 0, quote = 0, expire_ms = 0;
		uint64_t expire_ns = 0;
		if (need_u64(ctl, "symbol", &sym) < 0 || sym > UINT32_MAX)
			return CTL_EXIT_USAGE;
		m->symbol = (uint32_t)sym;
		if (lookup(ctl, "side", sides, 2, &m->side, true) < 0 ||
		    lookup(ctl, "type", types, 2, &m->type, true) < 0)
			return CTL_EXIT_USAGE;
		m->tif = m->type == OMSC_ORD_MARKET ? OMSC_TIF_IOC : OMSC_TIF_GTC;
		if (lookup(ctl, "tif", tifs, 5, &m->tif, false) == -EINVAL ||
		    lookup(ctl, "stp", stps, 4, &m->stp, false) == -EINVAL)
			return CTL_EXIT_USAGE;
		if (ctl_opt_i64(ctl, "px", &px) == -EINVAL || ctl_opt_i64(ctl, "qty", &qty) == -EINVAL ||
		    ctl_opt_i64(ctl, "quote", &quote) == -EINVAL ||
		    ctl_opt_i64(ctl, "expire-ms", &expire_ms) == -EINVAL ||
		    ctl_opt_u64(ctl, "expire-ns", &expire_ns) == -EINVAL)
			return CTL_EXIT_USAGE;
		if (m->type == OMSC_ORD_LIMIT && (px <= 0 || qty <= 0))
			return ctl_usage(ctl, "a limit order needs --px and --qty above zero");
		if (m->type == OMSC_ORD_MARKET && m->side == OMSC_SIDE_BUY && quote <= 0)
			return ctl_usage(ctl, "a market buy needs --quote (the quote budget)");
		if (m->type == OMSC_ORD_MARKET && m->side == OMSC_SIDE_SELL && qty <= 0)
			return ctl_usage(ctl, "a market sell needs --qty");
		if (m->tif == OMSC_TIF_GTD && expire_ms <= 0 && expire_ns == 0)
			return ctl_usage(ctl, "--tif gtd needs --expire-ms or --expire-ns");
		m->px = px;
		m->qty = qty;
		m->quote_qty = quote;
		/* Cluster time is stamped by the leader from its clock (ARCHITECTURE.md §4); we
		 * assume that clock is CLOCK_REALTIME. --expire-ns gives the exact value. */
		if (m->tif == OMSC_TIF_GTD)
			m->expire_ns = expire_ns != 0 ? expire_ns
						      : wall_ns() + (uint64_t)expire_ms * 1000000u;
		break;
	}
	case OP_CANCEL:
		break;
	case OP_AMEND:
		if (need_i64(ctl, "qty", &q->qty) < 0)
			return CTL_EXIT_USAGE;
		break;
	case OP_REPLACE:
		if (need_i64(ctl, "px", &q->px) < 0 || need_i64(ctl, "qty", &q->qty) < 0)
			return CTL_EXIT_USAGE;
		break;
	case OP_TRANSFER: {
		struct omsc_transfer *m = &q->transfer;
		/* Without --shard the gateway routes it to the user's owner shard like an order;
		 * with --shard it goes straight to that OMS shard. */
		uint64_t shard = 0;
		int src = ctl_opt_u64(ctl, "shard", &shard);
		if (src == -EINVAL || shard > UINT16_MAX)
			return CTL_EXIT_USAGE;
		if (src == 0) {
			m->flags = OMSC_TRANSFER_DIRECT;
			m->shard = (uint16_t)shard;
		}
		m->user = r->user;
		m->transfer_id = r->id;
		uint64_t asset;
		if (need_u64(ctl, "asset", &asset) < 0 || asset > UINT32_MAX)
			return CTL_EXIT_USAGE;
		m->asset = (uint32_t)asset;
		if (need_i64(ctl, "amount", &m->amount) < 0)
			return CTL_EXIT_USAGE;
		if (m->amount <= 0)
			return ctl_usage(ctl, "--amount must be above zero");
		if (strcmp(ctl->words[0], "withdraw") == 0)
			m->amount = -m->amount;
		break;
	}
	}
	return 0;
}

/* Hand the request to the library (tracked and queued). 0 or -errno. */
static int
submit(struct omsc *c, const struct run *r, const struct request *q)
{
	switch (r->op) {
	case OP_NEW:
		return omsc_new_order(c, &q->order, 0);
	case OP_CANCEL:
		return omsc_cancel(c, r->user, r->id, r->orig, 0);
	case OP_AMEND:
		return omsc_amend(c, r->user, r->id, r->orig, q->qty, 0);
	case OP_REPLACE:
		return omsc_cancel_replace(c, r->user, r->id, r->orig, q->px, q->qty, 0);
	case OP_TRANSFER:
		return omsc_transfer(c, &q->transfer, 0);
	}
	return -EINVAL;
}

static const char *
request_name(enum op op)
{
	static const char *const names[] = {
		[OP_NEW] = "NEW_ORDER", [OP_CANCEL] = "CANCEL", [OP_AMEND] = "AMEND",
		[OP_REPLACE] = "CANCEL_REPLACE", [OP_TRANSFER] = "TRANSFER",
	};
	return names[op];
}

/* --key-file: log on before the request. CTL_EXIT_OK, or the exit code (said why). */
static int
logon(struct ctl *ctl, struct omsc *c, uint64_t wait_ms)
{
	int rc = omsc_logon(c, wait_ms > INT32_MAX ? INT32_MAX : (int)wait_ms);
	if (rc == 0)
		return CTL_EXIT_OK;
	if (rc == -EACCES) {
		const char *reason = omsc_reason_name(omsc_logon_reason(c));
		if (ctl->json)
			fprintf(ctl->out, "{\"type\":\"LOGON_REPLY\",\"session_id\":%u"
					  ",\"reason\":\"%s\"}\n",
				omsc_session_id(c), reason);
		fprintf(ctl->err, "omsctl: logon refused: %s\n", reason);
		return CTL_EXIT_REFUSED;
	}
	fprintf(ctl->err, "omsctl: no answer to the logon within %" PRIu64 " ms\n", wait_ms);
	return CTL_EXIT_NO_ANSWER;
}

int
ctl_order_main(struct ctl *ctl)
{
	struct run r = {.ctl = ctl};
	const char *w0 = ctl->words[0];
	const char *w1 = ctl->word_count > 1 ? ctl->words[1] : "";
	uint32_t words = 1;
	if (strcmp(w0, "deposit") == 0 || strcmp(w0, "withdraw") == 0) {
		r.op = OP_TRANSFER;
	} else {
		words = 2;
		if (strcmp(w1, "new") == 0)
			r.op = OP_NEW;
		else if (strcmp(w1, "cancel") == 0)
			r.op = OP_CANCEL;
		else if (strcmp(w1, "amend") == 0)
			r.op = OP_AMEND;
		else if (strcmp(w1, "replace") == 0)
			r.op = OP_REPLACE;
		else
			return ctl_usage(ctl, "order: expected new|cancel|amend|replace");
	}
	if (ctl->word_count != words)
		return ctl_usage(ctl, "unexpected word '%s'", ctl->words[words]);

	struct omsc_config cfg;
	omsc_config_init(&cfg);
	cfg.host = ctl_opt(ctl, "host");
	cfg.bind_host = ctl_opt(ctl, "bind");
	cfg.requests_max = 16;
	cfg.users_max = 16;
	uint64_t v;
	if (ctl_opt_u64(ctl, "port", &v) == 0)
		cfg.port = (uint16_t)v;
	if (ctl_opt_u64(ctl, "session", &v) == 0)
		cfg.session_id = (uint32_t)v;
	else
		cfg.session_id = (uint32_t)getpid() ^ (uint32_t)(wall_ns() >> 20);
	uint64_t wait_ms = 5000;
	if (ctl_opt_u64(ctl, "wait-ms", &wait_ms) == -EINVAL)
		return CTL_EXIT_USAGE;
	if (ctl_opt_u64(ctl, "retry-ms", &v) == 0)
		cfg.retry_first_ms = (uint32_t)v;
	if (ctl_opt_u64(ctl, "retries", &v) == 0)
		cfg.retries_max = (uint32_t)v;
	cfg.give_up_ms = (uint32_t)wait_ms;
	const char *key = ctl_opt(ctl, "key");
	if (key != NULL && omsc_key_parse_hex(key, cfg.mac_key) < 0)
		return ctl_usage(ctl, "--key must be 32 hex digits");
	const char *key_file = ctl_opt(ctl, "key-file");
	if (key != NULL && key_file != NULL)
		return ctl_usage(ctl, "--key and --key-file exclude each other (a session has "
				      "its own MAC key)");
	if (key_file != NULL) {
		char why[256];
		int kr = omsc_key_file_load(key_file, &cfg, why, sizeof(why));
		if (kr < 0) {
			fprintf(ctl->err, "omsctl: %s\n", why);
			return kr == -EINVAL || kr == -EFBIG ? CTL_EXIT_USAGE : CTL_EXIT_IO;
		}
	}
	const char *wait = ctl_opt(ctl, "wait");
	if (wait != NULL && strcmp(wait, "ack") != 0 && strcmp(wait, "final") != 0)
		return ctl_usage(ctl, "--wait must be ack or final");
	r.wait_ack = wait != NULL && strcmp(wait, "ack") == 0;
	r.follow = ctl_flag(ctl, "follow");

	struct request q;
	memset(&q, 0, sizeof(q));
	int rc = build(ctl, &r, &q);
	if (rc != 0) {
		explicit_bzero(cfg.secret, sizeof(cfg.secret));
		return rc;
	}
	for (uint32_t i = 0; i < ctl->opt_count; i++) {
		if (!ctl->opts[i].used) {
			explicit_bzero(cfg.secret, sizeof(cfg.secret));
			return ctl_usage(ctl, "unknown option --%s", ctl->opts[i].name);
		}
	}

	struct omsc *c;
	rc = omsc_open(&c, &cfg);
	explicit_bzero(cfg.secret, sizeof(cfg.secret)); /* the library keeps its own copy */
	if (rc < 0) {
		fprintf(ctl->err, "omsctl: cannot open the UDP socket to %s:%u: %s\n",
			cfg.host ? cfg.host : OMSC_DEFAULT_HOST,
			cfg.port ? cfg.port : OMSC_DEFAULT_PORT, strerror(-rc));
		return rc == -EINVAL ? CTL_EXIT_USAGE : CTL_EXIT_IO;
	}
	if (cfg.key_id != 0) {
		rc = logon(ctl, c, wait_ms);
		if (rc != CTL_EXIT_OK) {
			omsc_close(c);
			return rc;
		}
	}
	uint64_t start = omsc_now_ns();
	int err = submit(c, &r, &q);
	if (err < 0) {
		fprintf(ctl->err, "omsctl: %s\n", strerror(-err));
		omsc_close(c);
		return CTL_EXIT_IO;
	}
	if (!ctl->json)
		fprintf(ctl->out, "sent %s user=%" PRIu64 " %s=%" PRIu64 "\n", request_name(r.op),
			r.user, r.op == OP_TRANSFER ? "transfer_id" : "cl_id", r.id);
	err = omsc_flush(c);
	if (err < 0 && err != -ECONNREFUSED) {
		fprintf(ctl->err, "omsctl: send: %s\n", strerror(-err));
		omsc_close(c);
		return CTL_EXIT_IO;
	}
	r.tries = 1;
	uint64_t deadline = start + wait_ms * 1000000u;
	/* Bounded: the deadline, and the library gives up on its own before it. */
	while (!r.done) {
		uint64_t now = omsc_now_ns();
		if (now >= deadline)
			break;
		uint64_t left_ms = (deadline - now + 999999) / 1000000;
		omsc_poll(c, (int)(left_ms < 100 ? left_ms : 100), on_event, &r);
	}
	if (!r.done) {
		if (r.op == OP_CANCEL && r.target_cancelled) {
			finish(&r, CTL_EXIT_OK);
		} else {
			struct omsc_request_info info;
			if (omsc_request_get(c, r.user, r.id, r.op == OP_TRANSFER, &info) == 0)
				r.tries = info.tries;
			if (!ctl->json)
				fprintf(ctl->err, "omsctl: %s within %" PRIu64 " ms (%u send(s))\n",
					r.acked ? "acknowledged, but no final state" : "no answer",
					wait_ms, r.tries);
			finish(&r, CTL_EXIT_NO_ANSWER);
		}
	}
	struct omsc_stats st;
	omsc_stats(c, &st, sizeof(st));
	if (st.decode_errors != 0)
		fprintf(ctl->err, "omsctl: %" PRIu64 " frame(s) refused by the decoder\n",
			st.decode_errors);
	if (omsc_session_up(c))
		(void)omsc_logout(c); /* frees the node's slot now, not after three heartbeats */
	omsc_close(c);
	return r.exit_code;
}

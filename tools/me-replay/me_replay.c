/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsd-me-replay: drive one matching engine from a JSONL file and print its events as JSONL
 * (operators: "what would the book have done"; tests: differential and golden checks).
 *
 *   omsd-me-replay [--dump-book] < orders.jsonl > events.jsonl
 *
 * Input, one flat JSON object per line (docs/me.md has the full list):
 *   {"op":"new","t":1000,"oid":1,"user":7,"sym":1,"side":"buy","type":"limit","tif":"gtc",
 *    "px":10000,"qty":5}
 * ops: new, cancel, amend, replace, tick, symbol, halt, resume, kill, query. `oid` is a u64
 * mapped to the orderId's user_seq (below 2^48); `shard` picks the OMS shard (default 0).
 * Output, one event per line: accepted, rejected, rested, fill (one line per trade), cancelled,
 * done, amended, cancel_rejected, result; with --dump-book a final `book` line per symbol.
 * Bad lines are reported on stderr with their line number and skipped.
 *
 * This is a host of the pure engine, not part of it: it reads stdin, writes stdout and
 * allocates.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"
#include "me/me.h"
#include "tools/me-replay/me_replay.h"

#define LINE_MAX_LEN 4096
#define KV_MAX 32
#define SYMS_MAX 64
#define SHARDS_MAX 16
#define AUTO_REQ_BASE (UINT64_C(1) << 47) /* request ids the tool makes up */

/* ---- a small JSON line parser: one flat object of string/number/bool values ---- */

enum kv_type { KV_NUM, KV_STR, KV_BOOL, KV_NULL };

struct kv {
	char key[32];
	enum kv_type type;
	int64_t num;
	bool b;
	char str[64];
};

static const char *
skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	return p;
}

/* Parse a JSON string at p (after the opening quote) into out[cap]. */
static const char *
parse_str(const char *p, char *out, size_t cap, const char **err)
{
	size_t n = 0;
	while (*p != '"') {
		char c = *p;
		if (c == '\0') {
			*err = "unterminated string";
			return NULL;
		}
		if (c == '\\') {
			p++;
			switch (*p) {
			case '"': c = '"'; break;
			case '\\': c = '\\'; break;
			case '/': c = '/'; break;
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			default:
				*err = "unsupported escape";
				return NULL;
			}
		}
		if (n + 1 >= cap) {
			*err = "string too long";
			return NULL;
		}
		out[n++] = c;
		p++;
	}
	out[n] = '\0';
	return p + 1;
}

static int
parse_line(const char *p, struct kv *kvs, int max, const char **err)
{
	int n = 0;
	p = skip_ws(p);
	if (*p != '{') {
		*err = "expected '{'";
		return -1;
	}
	p = skip_ws(p + 1);
	if (*p == '}')
		return *skip_ws(p + 1) == '\0' ? 0 : (*err = "trailing characters", -1);
	for (;;) {
		if (n == max) {
			*err = "too many fields";
			return -1;
		}
		struct kv *kv = &kvs[n];
		memset(kv, 0, sizeof(*kv));
		if (*p != '"') {
			*err = "expected a key";
			return -1;
		}
		p = parse_str(p + 1, kv->key, sizeof(kv->key), err);
		if (p == NULL)
			return -1;
		p = skip_ws(p);
		if (*p != ':') {
			*err = "expected ':'";
			return -1;
		}
		p = skip_ws(p + 1);
		if (*p == '"') {
			kv->type = KV_STR;
			p = parse_str(p + 1, kv->str, sizeof(kv->str), err);
			if (p == NULL)
				return -1;
		} else if (*p == '-' || (*p >= '0' && *p <= '9')) {
			char *end;
			errno = 0;
			long long v = strtoll(p, &end, 10);
			if (errno != 0 || end == p) {
				*err = "bad number";
				return -1;
			}
			if (*end == '.' || *end == 'e' || *end == 'E') {
				*err = "numbers must be integers";
				return -1;
			}
			kv->type = KV_NUM;
			kv->num = v;
			p = end;
		} else if (strncmp(p, "true", 4) == 0) {
			kv->type = KV_BOOL;
			kv->b = true;
			p += 4;
		} else if (strncmp(p, "false", 5) == 0) {
			kv->type = KV_BOOL;
			p += 5;
		} else if (strncmp(p, "null", 4) == 0) {
			kv->type = KV_NULL;
			p += 4;
		} else {
			*err = "unsupported value (flat objects of strings, integers, booleans)";
			return -1;
		}
		n++;
		p = skip_ws(p);
		if (*p == ',') {
			p = skip_ws(p + 1);
			continue;
		}
		if (*p == '}') {
			p = skip_ws(p + 1);
			if (*p != '\0') {
				*err = "trailing characters";
				return -1;
			}
			return n;
		}
		*err = "expected ',' or '}'";
		return -1;
	}
}

struct line {
	struct kv kv[KV_MAX];
	int n;
	const char *err;   /* first field error */
};

static const struct kv *
field(struct line *l, const char *key)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->kv[i].key, key) == 0)
			return &l->kv[i];
	return NULL;
}

/* Integer field; def when absent; sets l->err when of the wrong type. */
static int64_t
num(struct line *l, const char *key, int64_t def)
{
	const struct kv *kv = field(l, key);
	if (kv == NULL)
		return def;
	if (kv->type != KV_NUM) {
		if (l->err == NULL)
			l->err = "a numeric field is not an integer";
		return def;
	}
	return kv->num;
}

static bool
has(struct line *l, const char *key)
{
	return field(l, key) != NULL;
}

static const char *
str(struct line *l, const char *key, const char *def)
{
	const struct kv *kv = field(l, key);
	if (kv == NULL)
		return def;
	if (kv->type != KV_STR) {
		if (l->err == NULL)
			l->err = "a text field is not a string";
		return def;
	}
	return kv->str;
}

static bool
boolean(struct line *l, const char *key, bool def)
{
	const struct kv *kv = field(l, key);
	if (kv == NULL)
		return def;
	if (kv->type == KV_BOOL)
		return kv->b;
	if (kv->type == KV_NUM)
		return kv->num != 0;
	if (l->err == NULL)
		l->err = "a flag is not a boolean";
	return def;
}

/* Map a name to a code from a table; -1 if unknown. */
struct name { const char *name; int code; };

static int
lookup(const struct name *t, const char *s)
{
	for (; t->name != NULL; t++)
		if (strcmp(t->name, s) == 0)
			return t->code;
	return -1;
}

static const struct name sides[] = {{"buy", WIRE_SIDE_BUY}, {"sell", WIRE_SIDE_SELL}, {NULL, 0}};
static const struct name types[] = {{"limit", WIRE_ORD_LIMIT}, {"market", WIRE_ORD_MARKET},
				    {NULL, 0}};
static const struct name tifs[] = {{"gtc", WIRE_TIF_GTC}, {"ioc", WIRE_TIF_IOC},
				   {"fok", WIRE_TIF_FOK}, {"gtd", WIRE_TIF_GTD},
				   {"post_only", WIRE_TIF_POST_ONLY}, {NULL, 0}};
static const struct name stps[] = {{"none", WIRE_STP_NONE}, {"expire_taker", WIRE_STP_EXPIRE_TAKER},
				   {"expire_maker", WIRE_STP_EXPIRE_MAKER},
				   {"expire_both", WIRE_STP_EXPIRE_BOTH}, {NULL, 0}};
static const char *const causes[WIRE_CAUSE_MAX] = {
	[WIRE_CAUSE_USER] = "user", [WIRE_CAUSE_IOC] = "ioc", [WIRE_CAUSE_FOK] = "fok",
	[WIRE_CAUSE_STP] = "stp", [WIRE_CAUSE_EXPIRED] = "expired", [WIRE_CAUSE_HALT] = "halt",
	[WIRE_CAUSE_KILL_SWITCH] = "kill_switch", [WIRE_CAUSE_NO_LIQUIDITY] = "no_liquidity",
	[WIRE_CAUSE_REPLACED] = "replaced", [WIRE_CAUSE_RECONCILE] = "reconcile",
};

/* ---- orderId → (user, symbol, shard) memory, so cancel lines need only the oid ---- */

struct known {
	uint64_t oid;   /* user_seq + 1; 0 = empty */
	uint64_t user;
	uint32_t sym;
	uint16_t shard;
};

static struct known *known;
static size_t known_cap, known_count;

static size_t
known_slot(uint64_t oid)
{
	uint64_t h = (oid + 1) * UINT64_C(0x9e3779b97f4a7c15);
	size_t i = (size_t)(h >> 20) & (known_cap - 1);
	while (known[i].oid != 0 && known[i].oid != oid + 1)
		i = (i + 1) & (known_cap - 1);
	return i;
}

static void
known_put(uint64_t oid, uint64_t user, uint32_t sym, uint16_t shard)
{
	if ((known_count + 1) * 10 > known_cap * 7) {
		struct known *old = known;
		size_t old_cap = known_cap;
		known_cap = known_cap ? known_cap * 2 : 4096;
		known = calloc(known_cap, sizeof(*known));
		if (known == NULL) {
			fprintf(stderr, "omsd-me-replay: out of memory\n");
			exit(1);
		}
		for (size_t i = 0; i < old_cap; i++)
			if (old[i].oid != 0)
				known[known_slot(old[i].oid - 1)] = old[i];
		free(old);
	}
	size_t i = known_slot(oid);
	if (known[i].oid == 0)
		known_count++;
	known[i] = (struct known){.oid = oid + 1, .user = user, .sym = sym, .shard = shard};
}

static const struct known *
known_get(uint64_t oid)
{
	if (known_cap == 0)
		return NULL;
	size_t i = known_slot(oid);
	return known[i].oid == 0 ? NULL : &known[i];
}

/* ---- the engine and its output ---- */

static struct me *me;
static uint64_t now_ns;
static uint64_t auto_req = AUTO_REQ_BASE;
static uint32_t syms[SYMS_MAX];
static uint32_t sym_count;
static uint64_t stream_last[SHARDS_MAX];
static const char *admin_op = "?";
static uint64_t acked[SHARDS_MAX]; /* last STREAM_ACK sent, per stream (maybe_ack) */

static void
note_symbol(uint32_t s)
{
	for (uint32_t i = 0; i < sym_count; i++)
		if (syms[i] == s)
			return;
	if (sym_count < SYMS_MAX)
		syms[sym_count++] = s;
}

static void
emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)dest;
	if (msg->type == WIRE_ME_RESULT) {
		const struct wire_me_result *r = (const struct wire_me_result *)msg;
		printf("{\"ev\":\"result\",\"oid\":%" PRIu64 ",\"user\":%" PRIu64
		       ",\"known\":%u,\"final\":%u,\"cum\":%" PRId64 ",\"leaves\":%" PRId64
		       ",\"reason\":\"%s\"}\n",
		       wire_oid_seq(r->oid), r->oid.user, r->known, r->final, r->cum_qty,
		       r->leaves_qty, wire_reason_name(r->reason));
		return;
	}
	if (msg->type == WIRE_ADMIN_REPLY) {
		const struct wire_admin_reply *a = (const struct wire_admin_reply *)msg;
		if (a->reason == WIRE_REASON_NONE && strcmp(admin_op, "symbol") == 0)
			note_symbol((uint32_t)a->value);
		if (a->reason != WIRE_REASON_NONE)
			printf("{\"ev\":\"admin_rejected\",\"op\":\"%s\",\"id\":%" PRIu64
			       ",\"reason\":\"%s\"}\n",
			       admin_op, a->value, wire_reason_name(a->reason));
		return;
	}
	if (msg->type != WIRE_ME_EVENT)
		return;
	const struct wire_me_event *e = (const struct wire_me_event *)msg;
	if (e->hdr.shard < SHARDS_MAX)
		stream_last[e->hdr.shard] = e->seq;
	uint64_t oid = wire_oid_seq(e->oid);
	/* The order's first event says the engine took it (an engine of an earlier release sent
	 * ACCEPTED of its own): an "accepted" line first, as before. */
	if (wire_ev_entered(e))
		printf("{\"ev\":\"accepted\",\"oid\":%" PRIu64 ",\"user\":%" PRIu64 "}\n", oid,
		       e->oid.user);
	switch (e->event) {
	case WIRE_EV_ACCEPTED:
		break;
	case WIRE_EV_REJECTED:
		printf("{\"ev\":\"rejected\",\"oid\":%" PRIu64 ",\"user\":%" PRIu64
		       ",\"reason\":\"%s\"}\n",
		       oid, e->oid.user, wire_reason_name(e->reason));
		break;
	case WIRE_EV_RESTED:
		printf("{\"ev\":\"rested\",\"oid\":%" PRIu64 ",\"px\":%" PRId64 ",\"qty\":%" PRId64
		       "}\n",
		       oid, e->px, e->qty);
		break;
	case WIRE_EV_FILL:
		/* One line per trade, written from the taker's leg. */
		if (e->liquidity != 2)
			break;
		printf("{\"ev\":\"fill\",\"sym\":%u,\"taker\":%" PRIu64 ",\"maker\":%" PRIu64
		       ",\"taker_user\":%" PRIu64 ",\"maker_user\":%" PRIu64 ",\"px\":%" PRId64
		       ",\"qty\":%" PRId64 "}\n",
		       e->symbol, oid, wire_oid_seq(e->contra), e->oid.user, e->contra_user, e->px,
		       e->qty);
		break;
	case WIRE_EV_CANCELLED:
		printf("{\"ev\":\"cancelled\",\"oid\":%" PRIu64 ",\"qty\":%" PRId64
		       ",\"cause\":\"%s\"}\n",
		       oid, e->qty, e->cause < WIRE_CAUSE_MAX && causes[e->cause] ? causes[e->cause] : "?");
		break;
	case WIRE_EV_DONE:
		printf("{\"ev\":\"done\",\"oid\":%" PRIu64 "}\n", oid);
		break;
	case WIRE_EV_AMENDED:
		printf("{\"ev\":\"amended\",\"oid\":%" PRIu64 ",\"qty\":%" PRId64 "}\n", oid, e->qty);
		break;
	case WIRE_EV_CANCEL_REJECTED:
		printf("{\"ev\":\"cancel_rejected\",\"oid\":%" PRIu64 ",\"target\":%" PRIu64
		       ",\"reason\":\"%s\"}\n",
		       oid, wire_oid_seq(e->contra), wire_reason_name(e->reason));
		break;
	default:
		break;
	}
	/* The event that leaves nothing of the order live says so (an engine of an earlier
	 * release sent DONE of its own after it): a "done" line after its own, as before. */
	if (e->hdr.flags & WIRE_EV_F_DONE)
		printf("{\"ev\":\"done\",\"oid\":%" PRIu64 "}\n", oid);
}

static struct svc_sink sink = {.ctx = NULL, .emit = emit};

static void
apply(const void *msg)
{
	me_apply(me, now_ns, msg, &sink);
}

/* Keep retention from filling: acknowledge a stream once it is half full. Dedup records of
 * finished orders are released by the ack (docs/me.md). */
static void
maybe_ack(const struct me_limits *l)
{
	for (uint16_t sh = 0; sh < SHARDS_MAX; sh++) {
		if (stream_last[sh] - acked[sh] < l->events_max / 2)
			continue;
		struct wire_stream_ack a;
		memset(&a, 0, sizeof(a));
		wire_hdr_init(&a.hdr, WIRE_STREAM_ACK, 0);
		a.stream = sh;
		a.seq = stream_last[sh];
		acked[sh] = a.seq;
		apply(&a);
	}
}

/* Resolve the user/symbol/shard of an existing order from the line or from memory. */
static bool
resolve(struct line *l, uint64_t oid, uint64_t *user, uint32_t *sym, uint16_t *shard)
{
	const struct known *k = known_get(oid);
	if (!has(l, "user") && k == NULL)
		return false;
	*user = has(l, "user") ? (uint64_t)num(l, "user", 0) : k->user;
	*sym = has(l, "sym") ? (uint32_t)num(l, "sym", 0) : (k ? k->sym : 0);
	*shard = has(l, "shard") ? (uint16_t)num(l, "shard", 0) : (k ? k->shard : 0);
	return true;
}

static const char *
do_line(struct line *l)
{
	const char *op = str(l, "op", NULL);
	if (op == NULL)
		return "missing \"op\"";
	if (has(l, "t")) {
		int64_t t = num(l, "t", 0);
		if (t < 0)
			return "negative time";
		if ((uint64_t)t > now_ns)
			now_ns = (uint64_t)t;
	}
	if (l->err)
		return l->err;

	if (strcmp(op, "new") == 0) {
		if (!has(l, "oid") || !has(l, "user") || !has(l, "sym") || !has(l, "side"))
			return "new needs oid, user, sym, side";
		struct wire_submit s;
		memset(&s, 0, sizeof(s));
		wire_hdr_init(&s.hdr, WIRE_SUBMIT, 0);
		int64_t oid = num(l, "oid", 0);
		if (oid < 0 || (uint64_t)oid > WIRE_USER_SEQ_MAX)
			return "oid out of range (0..2^48-1)";
		int64_t shard = num(l, "shard", 0);
		if (shard < 0 || shard >= SHARDS_MAX)
			return "shard out of range";
		uint64_t user = (uint64_t)num(l, "user", 0);
		s.oid = wire_oid_make((uint16_t)shard, user, (uint64_t)oid);
		s.symbol = (uint32_t)num(l, "sym", 0);
		int side = lookup(sides, str(l, "side", ""));
		int type = lookup(types, str(l, "type", "limit"));
		int tif = lookup(tifs, str(l, "tif", type == WIRE_ORD_MARKET ? "ioc" : "gtc"));
		int stp = lookup(stps, str(l, "stp", "none"));
		if (side < 0 || type < 0 || tif < 0 || stp < 0)
			return "unknown side, type, tif or stp";
		s.side = (uint8_t)side;
		s.ord_type = (uint8_t)type;
		s.tif = (uint8_t)tif;
		s.stp = (uint8_t)stp;
		s.px = num(l, "px", 0);
		s.qty = num(l, "qty", 0);
		s.quote_qty = num(l, "quote", 0);
		s.expire_ns = (uint64_t)num(l, "expire", 0);
		if (l->err)
			return l->err;
		known_put((uint64_t)oid, user, s.symbol, (uint16_t)shard);
		apply(&s);
		return NULL;
	}
	if (strcmp(op, "cancel") == 0 || strcmp(op, "amend") == 0 || strcmp(op, "replace") == 0) {
		if (!has(l, "oid"))
			return "cancel/amend/replace need oid";
		uint64_t oid = (uint64_t)num(l, "oid", 0);
		uint64_t user;
		uint32_t sym;
		uint16_t shard;
		if (!resolve(l, oid, &user, &sym, &shard))
			return "unknown oid: give user (and sym)";
		uint64_t req = has(l, "req") ? (uint64_t)num(l, "req", 0) : auto_req++;
		if (req > WIRE_USER_SEQ_MAX || shard >= SHARDS_MAX)
			return "req or shard out of range";
		struct wire_modify m;
		memset(&m, 0, sizeof(m));
		uint16_t type = op[0] == 'c' ? WIRE_CANCEL_TO_ME
					     : op[0] == 'a' ? WIRE_AMEND_TO_ME : WIRE_REPLACE_TO_ME;
		wire_hdr_init(&m.hdr, (enum wire_type)type, 0);
		m.req = wire_oid_make(shard, user, req);
		m.target = wire_oid_make(shard, user, oid);
		m.symbol = sym;
		m.px = num(l, "px", 0);
		m.qty = num(l, "qty", 0);
		if (l->err)
			return l->err;
		if (type == WIRE_REPLACE_TO_ME)
			known_put(req, user, sym, shard);
		apply(&m);
		return NULL;
	}
	if (strcmp(op, "tick") == 0) {
		struct wire_tick t;
		wire_hdr_init(&t.hdr, WIRE_TICK, 0);
		apply(&t);
		return NULL;
	}
	if (strcmp(op, "query") == 0) {
		uint64_t oid = (uint64_t)num(l, "oid", 0);
		uint64_t user;
		uint32_t sym;
		uint16_t shard;
		if (!has(l, "oid") || !resolve(l, oid, &user, &sym, &shard))
			return "query needs oid (and user if unknown)";
		struct wire_order_query q;
		memset(&q, 0, sizeof(q));
		wire_hdr_init(&q.hdr, WIRE_ORDER_QUERY, 0);
		q.oid = wire_oid_make(shard, user, oid);
		apply(&q);
		return NULL;
	}
	if (strcmp(op, "symbol") == 0) {
		if (!has(l, "sym"))
			return "symbol needs sym";
		struct wire_symbol_config c;
		memset(&c, 0, sizeof(c));
		wire_hdr_init(&c.hdr, WIRE_SYMBOL_CONFIG, 0);
		c.symbol = (uint32_t)num(l, "sym", 0);
		c.base_asset = (uint32_t)num(l, "base", 1);
		c.quote_asset = (uint32_t)num(l, "quote_asset", 2);
		c.me_shard = (uint16_t)num(l, "me_shard", 0);
		c.status = strcmp(str(l, "status", "trading"), "halted") == 0 ? WIRE_SYM_HALTED
									    : WIRE_SYM_TRADING;
		c.tick = num(l, "tick", 1);
		c.lot = num(l, "lot", 1);
		c.min_qty = num(l, "min_qty", 0);
		c.min_notional = num(l, "min_notional", 0);
		c.base_unit = num(l, "base_unit", 1);
		c.ref_px = num(l, "ref_px", 0);
		int64_t band = num(l, "band_bps", 0);
		if (band < 0 || band > UINT32_MAX)
			return "band_bps out of range";
		c.band_bps = (uint32_t)band;
		if (l->err)
			return l->err;
		admin_op = "symbol";
		apply(&c);
		return NULL;
	}
	if (strcmp(op, "halt") == 0 || strcmp(op, "resume") == 0) {
		if (!has(l, "sym"))
			return "halt/resume need sym";
		struct wire_symbol_status_msg m;
		memset(&m, 0, sizeof(m));
		wire_hdr_init(&m.hdr, WIRE_SYMBOL_STATUS, 0);
		m.symbol = (uint32_t)num(l, "sym", 0);
		m.status = op[0] == 'h' ? WIRE_SYM_HALTED : WIRE_SYM_TRADING;
		m.cancel_resting = boolean(l, "cancel", false);
		if (l->err)
			return l->err;
		admin_op = op;
		apply(&m);
		return NULL;
	}
	if (strcmp(op, "kill") == 0) {
		struct wire_kill_switch k;
		memset(&k, 0, sizeof(k));
		wire_hdr_init(&k.hdr, WIRE_KILL_SWITCH, 0);
		if (has(l, "user") == has(l, "sym"))
			return "kill needs exactly one of user, sym";
		k.scope = has(l, "user") ? WIRE_KILL_USER : WIRE_KILL_SYMBOL;
		k.id = (uint64_t)num(l, has(l, "user") ? "user" : "sym", 0);
		k.engage = !boolean(l, "release", false);
		if (l->err)
			return l->err;
		admin_op = "kill";
		apply(&k);
		return NULL;
	}
	return "unknown op";
}

static void
dump_book(void)
{
	static struct me_depth_level d[4096];
	for (uint32_t i = 0; i < sym_count; i++) {
		printf("{\"ev\":\"book\",\"sym\":%u", syms[i]);
		for (int side = WIRE_SIDE_BUY; side <= WIRE_SIDE_SELL; side++) {
			uint32_t n = me_depth(me, syms[i], (enum wire_side)side, d, 4096);
			printf(",\"%s\":[", side == WIRE_SIDE_BUY ? "bids" : "asks");
			for (uint32_t k = 0; k < n; k++)
				printf("%s[%" PRId64 ",%" PRId64 ",%u]", k ? "," : "", d[k].px, d[k].qty,
				       d[k].count);
			printf("]");
		}
		printf("}\n");
	}
}

/* The default limits of the tool (one engine, room for long replays). */
void
me_replay_limits_default(struct me_limits *l)
{
	*l = (struct me_limits){
		.shard = 0,
		.streams_max = SHARDS_MAX,
		.symbols_max = SYMS_MAX,
		.orders_max = 1u << 18,
		.users_max = 1u << 16,
		.levels_max = 1u << 16,
		.levels_side_max = 4096,
		.gtd_max = 1u << 16,
		.events_max = 1u << 14,
		.events_reserve = 1024,
	};
}

/* Forget everything a previous run left in the file-scope state (the fuzzer runs many). */
static void
reset(void)
{
	free(known);
	known = NULL;
	known_cap = known_count = 0;
	me = NULL;
	now_ns = 0;
	auto_req = AUTO_REQ_BASE;
	sym_count = 0;
	memset(stream_last, 0, sizeof(stream_last));
	memset(acked, 0, sizeof(acked));
	admin_op = "?";
}

int
me_replay_run(FILE *in, const struct me_limits *limits, bool dump, uint64_t *bad_lines)
{
	reset();
	size_t fp = me_footprint(limits);
	void *mem = fp != 0 ? aligned_alloc(64, (fp + 63) & ~(size_t)63) : NULL;
	if (mem == NULL || me_init(&me, mem, limits) != 0) {
		fprintf(stderr, "omsd-me-replay: cannot initialise the engine\n");
		free(mem);
		return 1;
	}
	static char buf[LINE_MAX_LEN + 2];
	static struct line l;
	uint64_t lineno = 0, bad = 0;
	while (fgets(buf, sizeof(buf), in) != NULL) {
		lineno++;
		size_t len = strlen(buf);
		if (len == sizeof(buf) - 1 && buf[len - 1] != '\n') {
			fprintf(stderr, "line %" PRIu64 ": too long (max %d bytes)\n", lineno,
				LINE_MAX_LEN);
			bad++;
			int c;
			while ((c = getc(in)) != EOF && c != '\n')
				;
			continue;
		}
		const char *p = buf;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\n' || *p == '\0' || *p == '#')
			continue; /* blank lines and comments */
		memset(&l, 0, sizeof(l));
		const char *err = NULL;
		l.n = parse_line(buf, l.kv, KV_MAX, &err);
		if (l.n < 0 || (err = do_line(&l)) != NULL) {
			fprintf(stderr, "line %" PRIu64 ": %s\n", lineno, err);
			bad++;
			continue;
		}
		maybe_ack(limits);
	}
	if (dump)
		dump_book();
	fflush(stdout);
	reset();
	free(mem);
	if (bad_lines != NULL)
		*bad_lines = bad; /* bad lines were reported and skipped */
	return 0;
}

#ifndef ME_REPLAY_NO_MAIN
int
main(int argc, char **argv)
{
	bool dump = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--dump-book") == 0) {
			dump = true;
		} else {
			fprintf(stderr, "usage: omsd-me-replay [--dump-book] < orders.jsonl > events.jsonl\n");
			return 2;
		}
	}
	struct me_limits limits;
	me_replay_limits_default(&limits);
	return me_replay_run(stdin, &limits, dump, NULL);
}
#endif

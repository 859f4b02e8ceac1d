/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small validating JSON reader (RFC 8259) that tokenizes the caller's text in place, and
 * an appending writer. Control-plane only: clarity over speed, but bounded in tokens and
 * nesting so a hostile request cannot make the main lcore work without limit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "mgmt.h"

#define DEPTH_MAX 32

struct parser {
	struct mgmt_json *j;
	const char *s;
	size_t len;
	size_t pos;
	int err;
};

static void
skip_ws(struct parser *p)
{
	while (p->pos < p->len) {
		char c = p->s[p->pos];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		p->pos++;
	}
}

static int
new_tok(struct parser *p, enum mgmt_json_type type)
{
	if (p->j->count >= MGMT_JSON_TOKENS_MAX) {
		p->err = -E2BIG;
		return -1;
	}
	int t = (int)p->j->count++;
	struct mgmt_json_tok *tok = &p->j->toks[t];
	memset(tok, 0, sizeof(*tok));
	tok->type = (uint8_t)type;
	tok->start = (uint32_t)p->pos;
	return t;
}

static int parse_value(struct parser *p, int depth);

static int
fail(struct parser *p)
{
	if (p->err == 0)
		p->err = -EINVAL;
	return -1;
}

static int
parse_string(struct parser *p)
{
	p->pos++; /* opening quote */
	int t = new_tok(p, MGMT_JSON_STRING);
	if (t < 0)
		return -1;
	while (p->pos < p->len) {
		unsigned char c = (unsigned char)p->s[p->pos];
		if (c == '"') {
			p->j->toks[t].len = (uint32_t)(p->pos - p->j->toks[t].start);
			p->pos++;
			return t;
		}
		if (c < 0x20)
			return fail(p);
		if (c == '\\') {
			p->pos++;
			if (p->pos >= p->len)
				return fail(p);
			char e = p->s[p->pos];
			if (e == 'u') {
				for (int i = 1; i <= 4; i++) {
					if (p->pos + (size_t)i >= p->len)
						return fail(p);
					char h = p->s[p->pos + (size_t)i];
					bool hex = (h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
						   (h >= 'A' && h <= 'F');
					if (!hex)
						return fail(p);
				}
				p->pos += 4;
			} else if (strchr("\"\\/bfnrt", e) == NULL || e == '\0') {
				return fail(p);
			}
		}
		p->pos++;
	}
	return fail(p);
}

static int
parse_number(struct parser *p)
{
	int t = new_tok(p, MGMT_JSON_NUMBER);
	if (t < 0)
		return -1;
	size_t start = p->pos;
	if (p->pos < p->len && p->s[p->pos] == '-')
		p->pos++;
	if (p->pos >= p->len)
		return fail(p);
	if (p->s[p->pos] == '0') {
		p->pos++;
	} else if (p->s[p->pos] >= '1' && p->s[p->pos] <= '9') {
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
	} else {
		return fail(p);
	}
	if (p->pos < p->len && p->s[p->pos] == '.') {
		p->pos++;
		size_t digits = p->pos;
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
		if (p->pos == digits)
			return fail(p);
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		size_t digits = p->pos;
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
		if (p->pos == digits)
			return fail(p);
	}
	p->j->toks[t].len = (uint32_t)(p->pos - start);
	return t;
}

static int
parse_literal(struct parser *p, const char *word, enum mgmt_json_type type)
{
	size_t n = strlen(word);
	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
		return fail(p);
	int t = new_tok(p, type);
	if (t < 0)
		return -1;
	p->j->toks[t].len = (uint32_t)n;
	p->pos += n;
	return t;
}

static int
parse_container(struct parser *p, int depth, bool object)
{
	if (depth >= DEPTH_MAX)
		return fail(p);
	int t = new_tok(p, object ? MGMT_JSON_OBJECT : MGMT_JSON_ARRAY);
	if (t < 0)
		return -1;
	char close = object ? '}' : ']';
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		p->j->toks[t].len = (uint32_t)(p->pos - p->j->toks[t].start);
		return t;
	}
	for (;;) {
		skip_ws(p);
		if (object) {
			if (p->pos >= p->len || p->s[p->pos] != '"')
				return fail(p);
			int key = parse_string(p);
			if (key < 0)
				return -1;
			p->j->toks[key].next = (uint32_t)key + 1; /* a key is a value of its own */
			skip_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':')
				return fail(p);
			p->pos++;
			skip_ws(p);
		}
		if (parse_value(p, depth + 1) < 0)
			return -1;
		p->j->toks[t].size++;
		skip_ws(p);
		if (p->pos >= p->len)
			return fail(p);
		if (p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->s[p->pos] == close) {
			p->pos++;
			p->j->toks[t].len = (uint32_t)(p->pos - p->j->toks[t].start);
			return t;
		}
		return fail(p);
	}
}

static int
parse_value(struct parser *p, int depth)
{
	skip_ws(p);
	if (p->pos >= p->len)
		return fail(p);
	int t;
	switch (p->s[p->pos]) {
	case '{':
		t = parse_container(p, depth, true);
		break;
	case '[':
		t = parse_container(p, depth, false);
		break;
	case '"':
		t = parse_string(p);
		break;
	case 't':
		t = parse_literal(p, "true", MGMT_JSON_BOOL);
		break;
	case 'f':
		t = parse_literal(p, "false", MGMT_JSON_BOOL);
		break;
	case 'n':
		t = parse_literal(p, "null", MGMT_JSON_NULL);
		break;
	default:
		t = parse_number(p);
		break;
	}
	if (t >= 0)
		p->j->toks[t].next = p->j->count;
	return t;
}

int
mgmt_json_parse(struct mgmt_json *j, const char *text, size_t len, size_t *err_at)
{
	struct parser p = {.j = j, .s = text, .len = len};
	j->text = text;
	j->count = 0;
	if (parse_value(&p, 0) < 0) {
		if (err_at != NULL)
			*err_at = p.pos;
		return p.err;
	}
	skip_ws(&p);
	if (p.pos != len) {
		if (err_at != NULL)
			*err_at = p.pos;
		return -EINVAL;
	}
	return 0;
}

/* Does string token t decode to s? (Keys compare decoded: "us\u0065r" is "user".) */
static bool
tok_is(const struct mgmt_json *j, int t, const char *s)
{
	const struct mgmt_json_tok *k = &j->toks[t];
	size_t n = strlen(s);
	if (k->type != MGMT_JSON_STRING)
		return false;
	if (memchr(j->text + k->start, '\\', k->len) == NULL)
		return k->len == n && memcmp(j->text + k->start, s, n) == 0;
	char buf[256];
	return n < sizeof(buf) && mgmt_json_str(j, t, buf, sizeof(buf)) == 0 && strcmp(buf, s) == 0;
}

int
mgmt_json_get(const struct mgmt_json *j, int obj, const char *key)
{
	if (obj < 0 || (uint32_t)obj >= j->count || j->toks[obj].type != MGMT_JSON_OBJECT)
		return -1;
	int t = obj + 1;
	for (uint32_t i = 0; i < j->toks[obj].size; i++) {
		int value = t + 1;
		if (tok_is(j, t, key))
			return value;
		t = (int)j->toks[value].next;
	}
	return -1;
}

int
mgmt_json_str(const struct mgmt_json *j, int tok, char *out, size_t cap)
{
	if (tok < 0)
		return -ENOENT;
	const struct mgmt_json_tok *k = &j->toks[tok];
	if (k->type != MGMT_JSON_STRING)
		return -EINVAL;
	size_t o = 0;
	for (uint32_t i = 0; i < k->len; i++) {
		char c = j->text[k->start + i];
		if (c == '\\') {
			char e = j->text[k->start + ++i];
			switch (e) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'u': {
				/* Control-plane strings are ASCII; anything else is refused. */
				unsigned v = 0;
				for (int d = 0; d < 4; d++) {
					char h = j->text[k->start + i + 1 + (uint32_t)d];
					v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
				}
				if (v == 0 || v > 0x7f)
					return -EINVAL;
				c = (char)v;
				i += 4;
				break;
			}
			default: c = e; break;
			}
		}
		if (o + 1 >= cap)
			return -EINVAL;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

int
mgmt_json_i64(const struct mgmt_json *j, int tok, int64_t *out)
{
	if (tok < 0)
		return -ENOENT;
	const struct mgmt_json_tok *k = &j->toks[tok];
	if (k->type != MGMT_JSON_NUMBER)
		return -EINVAL;
	/* Integers only: a fraction or exponent is refused rather than truncated. */
	const char *s = j->text + k->start;
	bool neg = s[0] == '-';
	uint64_t v = 0;
	for (uint32_t i = neg ? 1 : 0; i < k->len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		uint64_t d = (uint64_t)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (neg) {
		if (v > (uint64_t)INT64_MAX + 1)
			return -EINVAL;
		*out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
	} else {
		if (v > (uint64_t)INT64_MAX)
			return -EINVAL;
		*out = (int64_t)v;
	}
	return 0;
}

int
mgmt_json_u64(const struct mgmt_json *j, int tok, uint64_t *out)
{
	if (tok < 0)
		return -ENOENT;
	const struct mgmt_json_tok *k = &j->toks[tok];
	if (k->type != MGMT_JSON_NUMBER)
		return -EINVAL;
	const char *s = j->text + k->start;
	uint64_t v = 0;
	for (uint32_t i = 0; i < k->len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		uint64_t d = (uint64_t)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int
mgmt_json_bool(const struct mgmt_json *j, int tok, bool *out)
{
	if (tok < 0)
		return -ENOENT;
	const struct mgmt_json_tok *k = &j->toks[tok];
	if (k->type != MGMT_JSON_BOOL)
		return -EINVAL;
	*out = j->text[k->start] == 't';
	return 0;
}

int
mgmt_json_get_str(const struct mgmt_json *j, int obj, const char *key, char *out, size_t cap)
{
	return mgmt_json_str(j, mgmt_json_get(j, obj, key), out, cap);
}

int
mgmt_json_get_u64(const struct mgmt_json *j, int obj, const char *key, uint64_t *out)
{
	return mgmt_json_u64(j, mgmt_json_get(j, obj, key), out);
}

int
mgmt_json_get_i64(const struct mgmt_json *j, int obj, const char *key, int64_t *out)
{
	return mgmt_json_i64(j, mgmt_json_get(j, obj, key), out);
}

int
mgmt_json_get_bool(const struct mgmt_json *j, int obj, const char *key, bool *out)
{
	return mgmt_json_bool(j, mgmt_json_get(j, obj, key), out);
}

/* ---------------------------------------------------------------------------------------
 * Writer.
 * ------------------------------------------------------------------------------------- */

void
mgmt_out_init(struct mgmt_out *o, char *buf, size_t cap)
{
	o->buf = buf;
	o->cap = cap;
	o->len = 0;
	o->overflow = false;
	o->need_comma = false;
	if (cap > 0)
		buf[0] = '\0';
}

static void
put(struct mgmt_out *o, const char *s, size_t n)
{
	if (o->overflow)
		return;
	if (o->len + n + 1 > o->cap) {
		o->overflow = true;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

void
mgmt_out_raw(struct mgmt_out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void
sep(struct mgmt_out *o)
{
	if (o->need_comma)
		put(o, ",", 1);
	o->need_comma = true;
}

/* Containers: a separator before, the opening bracket, no comma before the first member;
 * after the closing bracket the next value needs one. */
static void
open_container(struct mgmt_out *o, const char *bracket)
{
	sep(o);
	put(o, bracket, 1);
	o->need_comma = false;
}

static void
close_container(struct mgmt_out *o, const char *bracket)
{
	put(o, bracket, 1);
	o->need_comma = true;
}

void
mgmt_out_obj_begin(struct mgmt_out *o)
{
	open_container(o, "{");
}

void
mgmt_out_obj_end(struct mgmt_out *o)
{
	close_container(o, "}");
}

void
mgmt_out_arr_begin(struct mgmt_out *o)
{
	open_container(o, "[");
}

void
mgmt_out_arr_end(struct mgmt_out *o)
{
	close_container(o, "]");
}

static void
put_escaped(struct mgmt_out *o, const char *s)
{
	put(o, "\"", 1);
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			put(o, esc, 2);
		} else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			put(o, esc, 6);
		} else {
			put(o, (const char *)&c, 1);
		}
	}
	put(o, "\"", 1);
}

void
mgmt_out_key(struct mgmt_out *o, const char *key)
{
	sep(o);
	put_escaped(o, key);
	put(o, ":", 1);
	o->need_comma = false;
}

void
mgmt_out_str(struct mgmt_out *o, const char *s)
{
	sep(o);
	put_escaped(o, s);
}

void
mgmt_out_u64(struct mgmt_out *o, uint64_t v)
{
	char b[24];
	sep(o);
	put(o, b, (size_t)snprintf(b, sizeof(b), "%" PRIu64, v));
}

void
mgmt_out_i64(struct mgmt_out *o, int64_t v)
{
	char b[24];
	sep(o);
	put(o, b, (size_t)snprintf(b, sizeof(b), "%" PRId64, v));
}

void
mgmt_out_bool(struct mgmt_out *o, bool v)
{
	sep(o);
	mgmt_out_raw(o, v ? "true" : "false");
}

void
mgmt_out_null(struct mgmt_out *o)
{
	sep(o);
	mgmt_out_raw(o, "null");
}

void
mgmt_out_kv_str(struct mgmt_out *o, const char *key, const char *v)
{
	mgmt_out_key(o, key);
	mgmt_out_str(o, v);
}

void
mgmt_out_kv_u64(struct mgmt_out *o, const char *key, uint64_t v)
{
	mgmt_out_key(o, key);
	mgmt_out_u64(o, v);
}

void
mgmt_out_kv_i64(struct mgmt_out *o, const char *key, int64_t v)
{
	mgmt_out_key(o, key);
	mgmt_out_i64(o, v);
}

void
mgmt_out_kv_bool(struct mgmt_out *o, const char *key, bool v)
{
	mgmt_out_key(o, key);
	mgmt_out_bool(o, v);
}

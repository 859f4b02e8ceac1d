/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small JSON tree for omsctl's output side and the generic renderer. The control socket's
 * own reader (mgmt_json) is bounded at MGMT_JSON_TOKENS_MAX tokens on purpose (it parses
 * requests on the node); a CLI printing a table of thousands of users needs no such bound
 * beyond the response buffer, so it builds a tree on the heap.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tools/omsctl/omsctl.h"

#define DEPTH_MAX 64

struct parser {
	const char *p;  /* next byte */
	int depth;
	bool failed;
};

static void
skip_ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
		ps->p++;
}

static struct ctl_json *
node_new(uint8_t type)
{
	struct ctl_json *j = calloc(1, sizeof(*j));
	if (j != NULL)
		j->type = type;
	return j;
}

static void
put_utf8(char **o, uint32_t cp)
{
	char *d = *o;
	if (cp < 0x80) {
		*d++ = (char)cp;
	} else if (cp < 0x800) {
		*d++ = (char)(0xc0 | cp >> 6);
		*d++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*d++ = (char)(0xe0 | cp >> 12);
		*d++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*d++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*d++ = (char)(0xf0 | cp >> 18);
		*d++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*d++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*d++ = (char)(0x80 | (cp & 0x3f));
	}
	*o = d;
}

static int
hex4(const char *s, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* A string literal at ps->p (the opening quote); returns the decoded copy. */
static char *
parse_string(struct parser *ps)
{
	const char *s = ps->p + 1;
	size_t n = 0;
	while (s[n] != '"') {
		if (s[n] == '\0' || (unsigned char)s[n] < 0x20)
			return NULL;
		if (s[n] == '\\' && s[n + 1] != '\0')
			n++;
		n++;
	}
	char *out = malloc(n + 1), *o = out;
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '\\') {
			*o++ = s[i];
			continue;
		}
		char e = s[++i];
		uint32_t cp;
		switch (e) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (i + 4 >= n + 1 || hex4(s + i + 1, &cp) < 0) {
				free(out);
				return NULL;
			}
			i += 4;
			put_utf8(&o, cp); /* surrogate pairs are passed through as two code points */
			break;
		default:
			free(out);
			return NULL;
		}
	}
	*o = '\0';
	ps->p = s + n + 1;
	return out;
}

static struct ctl_json *parse_value(struct parser *ps);

static struct ctl_json *
parse_container(struct parser *ps, bool object)
{
	struct ctl_json *j = node_new(object ? CJ_OBJECT : CJ_ARRAY);
	if (j == NULL || ++ps->depth > DEPTH_MAX)
		goto fail;
	ps->p++;
	skip_ws(ps);
	char close = object ? '}' : ']';
	struct ctl_json **tail = &j->child;
	if (*ps->p == close) {
		ps->p++;
		ps->depth--;
		return j;
	}
	for (;;) {
		char *key = NULL;
		skip_ws(ps);
		if (object) {
			if (*ps->p != '"' || (key = parse_string(ps)) == NULL)
				goto fail;
			skip_ws(ps);
			if (*ps->p != ':') {
				free(key);
				goto fail;
			}
			ps->p++;
		}
		struct ctl_json *v = parse_value(ps);
		if (v == NULL) {
			free(key);
			goto fail;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		j->count++;
		skip_ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == close) {
			ps->p++;
			ps->depth--;
			return j;
		}
		goto fail;
	}
fail:
	ctl_json_free(j);
	return NULL;
}

static struct ctl_json *
parse_value(struct parser *ps)
{
	skip_ws(ps);
	const char *p = ps->p;
	if (*p == '{' || *p == '[')
		return parse_container(ps, *p == '{');
	if (*p == '"') {
		char *s = parse_string(ps);
		struct ctl_json *j = s != NULL ? node_new(CJ_STRING) : NULL;
		if (j == NULL) {
			free(s);
			return NULL;
		}
		j->text = s;
		return j;
	}
	uint8_t type;
	size_t n = 0;
	if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
		type = CJ_BOOL;
		n = p[0] == 't' ? 4 : 5;
	} else if (strncmp(p, "null", 4) == 0) {
		type = CJ_NULL;
		n = 4;
	} else if (*p == '-' || isdigit((unsigned char)*p)) {
		type = CJ_NUMBER;
		while (p[n] == '-' || p[n] == '+' || p[n] == '.' || p[n] == 'e' || p[n] == 'E' ||
		       isdigit((unsigned char)p[n]))
			n++;
	} else {
		return NULL;
	}
	struct ctl_json *j = node_new(type);
	if (j == NULL)
		return NULL;
	j->text = strndup(p, n);
	ps->p = p + n;
	return j;
}

struct ctl_json *
ctl_json_parse(const char *text)
{
	struct parser ps = {.p = text};
	struct ctl_json *j = parse_value(&ps);
	if (j == NULL)
		return NULL;
	skip_ws(&ps);
	if (*ps.p != '\0') {
		ctl_json_free(j);
		return NULL;
	}
	return j;
}

void
ctl_json_free(struct ctl_json *j)
{
	while (j != NULL) {
		struct ctl_json *next = j->next;
		ctl_json_free(j->child);
		free(j->key);
		free(j->text);
		free(j);
		j = next;
	}
}

struct ctl_json *
ctl_json_member(const struct ctl_json *obj, const char *key)
{
	if (obj == NULL || obj->type != CJ_OBJECT)
		return NULL;
	for (struct ctl_json *c = obj->child; c != NULL; c = c->next)
		if (strcmp(c->key, key) == 0)
			return c;
	return NULL;
}

void
ctl_json_write_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch == '\n')
			fputs("\\n", f);
		else if (ch == '\t')
			fputs("\\t", f);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

void
ctl_json_write(FILE *f, const struct ctl_json *j)
{
	switch (j->type) {
	case CJ_STRING:
		ctl_json_write_str(f, j->text);
		break;
	case CJ_ARRAY:
	case CJ_OBJECT:
		fputc(j->type == CJ_OBJECT ? '{' : '[', f);
		for (const struct ctl_json *c = j->child; c != NULL; c = c->next) {
			if (c != j->child)
				fputc(',', f);
			if (j->type == CJ_OBJECT) {
				ctl_json_write_str(f, c->key);
				fputc(':', f);
			}
			ctl_json_write(f, c);
		}
		fputc(j->type == CJ_OBJECT ? '}' : ']', f);
		break;
	default:
		fputs(j->text, f);
		break;
	}
}

/* ---------------------------------------------------------------------------------------
 * Rendering.
 * ------------------------------------------------------------------------------------- */

static bool
is_scalar(const struct ctl_json *j)
{
	return j->type != CJ_ARRAY && j->type != CJ_OBJECT;
}

/* A cell: scalars as text, containers as compact JSON, into buf. */
static const char *
cell(const struct ctl_json *j, char *buf, size_t cap)
{
	if (j == NULL)
		return "-";
	if (j->type == CJ_STRING || j->type == CJ_NUMBER || j->type == CJ_BOOL)
		return j->text;
	if (j->type == CJ_NULL)
		return "-";
	FILE *m = fmemopen(buf, cap, "w");
	if (m == NULL)
		return "?";
	ctl_json_write(m, j);
	fclose(m);
	buf[cap - 1] = '\0';
	return buf;
}

static bool
array_of_objects(const struct ctl_json *j)
{
	if (j->type != CJ_ARRAY || j->count == 0)
		return false;
	for (const struct ctl_json *c = j->child; c != NULL; c = c->next)
		if (c->type != CJ_OBJECT)
			return false;
	return true;
}

static bool
array_of_scalars(const struct ctl_json *j)
{
	for (const struct ctl_json *c = j->child; c != NULL; c = c->next)
		if (!is_scalar(c))
			return false;
	return true;
}

#define COLS_MAX 32

static void
render_table(FILE *f, const struct ctl_json *arr, int indent)
{
	const char *cols[COLS_MAX];
	size_t width[COLS_MAX];
	uint32_t ncols = 0;
	char buf[256];
	/* Columns: the union of keys, in order of first appearance. */
	for (const struct ctl_json *row = arr->child; row != NULL; row = row->next) {
		for (const struct ctl_json *c = row->child; c != NULL; c = c->next) {
			uint32_t k = 0;
			while (k < ncols && strcmp(cols[k], c->key) != 0)
				k++;
			if (k == ncols && ncols < COLS_MAX) {
				cols[ncols] = c->key;
				width[ncols] = strlen(c->key);
				ncols++;
			}
		}
	}
	for (const struct ctl_json *row = arr->child; row != NULL; row = row->next) {
		for (uint32_t k = 0; k < ncols; k++) {
			size_t w = strlen(cell(ctl_json_member(row, cols[k]), buf, sizeof(buf)));
			if (w > width[k])
				width[k] = w;
		}
	}
	fprintf(f, "%*s", indent, "");
	for (uint32_t k = 0; k < ncols; k++)
		fprintf(f, "%-*s%s", k + 1 < ncols ? (int)width[k] : 0, cols[k],
			k + 1 < ncols ? "  " : "");
	fputc('\n', f);
	for (const struct ctl_json *row = arr->child; row != NULL; row = row->next) {
		fprintf(f, "%*s", indent, "");
		for (uint32_t k = 0; k < ncols; k++) {
			const struct ctl_json *v = ctl_json_member(row, cols[k]);
			const char *s = cell(v, buf, sizeof(buf));
			if (k + 1 == ncols)
				fprintf(f, "%s", s);
			else if (v != NULL && v->type == CJ_NUMBER)
				fprintf(f, "%*s  ", (int)width[k], s); /* numbers right-aligned */
			else
				fprintf(f, "%-*s  ", (int)width[k], s);
		}
		fputc('\n', f);
	}
}

static void render_at(FILE *f, const struct ctl_json *j, int indent);

static void
render_object(FILE *f, const struct ctl_json *obj, int indent)
{
	size_t kw = 0;
	char buf[256];
	for (const struct ctl_json *c = obj->child; c != NULL; c = c->next)
		if (is_scalar(c) && strlen(c->key) > kw)
			kw = strlen(c->key);
	if (obj->count == 0)
		fprintf(f, "%*s(empty)\n", indent, "");
	for (const struct ctl_json *c = obj->child; c != NULL; c = c->next) {
		if (is_scalar(c)) {
			fprintf(f, "%*s%s:%*s %s\n", indent, "", c->key,
				(int)(kw - strlen(c->key)), "", cell(c, buf, sizeof(buf)));
		} else if (c->type == CJ_ARRAY && c->count == 0) {
			fprintf(f, "%*s%s: (none)\n", indent, "", c->key);
		} else if (c->type == CJ_ARRAY && array_of_scalars(c)) {
			fprintf(f, "%*s%s: ", indent, "", c->key);
			for (const struct ctl_json *e = c->child; e != NULL; e = e->next)
				fprintf(f, "%s%s", e == c->child ? "" : ", ", cell(e, buf, sizeof(buf)));
			fputc('\n', f);
		} else {
			fprintf(f, "%*s%s:\n", indent, "", c->key);
			render_at(f, c, indent + 2);
		}
	}
}

static void
render_at(FILE *f, const struct ctl_json *j, int indent)
{
	char buf[256];
	if (j->type == CJ_OBJECT) {
		render_object(f, j, indent);
	} else if (array_of_objects(j)) {
		render_table(f, j, indent);
	} else if (j->type == CJ_ARRAY) {
		if (j->count == 0)
			fprintf(f, "%*s(none)\n", indent, "");
		for (const struct ctl_json *e = j->child; e != NULL; e = e->next) {
			if (is_scalar(e)) {
				fprintf(f, "%*s- %s\n", indent, "", cell(e, buf, sizeof(buf)));
			} else {
				fprintf(f, "%*s-\n", indent, "");
				render_at(f, e, indent + 2);
			}
		}
	} else {
		fprintf(f, "%*s%s\n", indent, "", cell(j, buf, sizeof(buf)));
	}
}

void
ctl_render(FILE *f, const struct ctl_json *j)
{
	render_at(f, j, 0);
}

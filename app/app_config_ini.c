/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration loader's pass 1 and its error reports (app_config_int.h). rte_cfgfile
 * keeps no line numbers and silently accepts lines it cannot read, so this scan mirrors its
 * grammar and records the line of every section and key: every later error can then name
 * FILE:LINE, and what rte_cfgfile would drop or truncate is refused here.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "app_config_int.h"

struct cfg_scan_ent *
cfg_scan_find(struct cfg_ctx *c, const char *sec, const char *key)
{
	for (uint32_t i = 0; i < c->count; i++)
		if (strcmp(c->ents[i].sec, sec) == 0 && strcmp(c->ents[i].key, key) == 0)
			return &c->ents[i];
	return NULL;
}

__attribute__((format(printf, 4, 5))) void
cfg_report(struct cfg_ctx *c, const char *sec, const char *key, const char *fmt, ...)
{
	const struct cfg_scan_ent *e = cfg_scan_find(c, sec ? sec : "", key ? key : "");
	if (e == NULL && key != NULL)
		e = cfg_scan_find(c, sec ? sec : "", ""); /* a missing key: point at its section */
	va_list ap;

	if (e != NULL)
		fprintf(c->err, "%s:%d: ", c->file, e->line);
	else
		fprintf(c->err, "%s: ", c->file);
	if (sec != NULL)
		fprintf(c->err, "[%s] ", sec);
	if (key != NULL)
		fprintf(c->err, "%s: ", key);
	va_start(ap, fmt);
	vfprintf(c->err, fmt, ap);
	va_end(ap);
	fputc('\n', c->err);
	c->errors++;
}

/* Trim leading and trailing white space in place; returns the new start. */
char *
cfg_trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

static void
scan_add(struct cfg_ctx *c, const char *sec, const char *key, int line)
{
	if (c->count == c->cap) {
		uint32_t cap = c->cap ? c->cap * 2 : 64;
		struct cfg_scan_ent *n = realloc(c->ents, cap * sizeof(*n));
		if (n == NULL) {
			fprintf(c->err, "%s: out of memory\n", c->file);
			c->errors++;
			return;
		}
		c->ents = n;
		c->cap = cap;
	}
	struct cfg_scan_ent *e = &c->ents[c->count++];
	snprintf(e->sec, sizeof(e->sec), "%s", sec);
	snprintf(e->key, sizeof(e->key), "%s", key);
	e->line = line;
	e->used = false;
}

static void
line_error(struct cfg_ctx *c, int line, const char *what)
{
	fprintf(c->err, "%s:%d: %s\n", c->file, line, what);
	c->errors++;
}

int
cfg_scan_file(struct cfg_ctx *c, const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[CFG_SCAN_LINE_MAX * 4];
	char sec[CFG_NAME_LEN] = "";
	int line = 0;

	if (f == NULL) {
		fprintf(c->err, "%s: cannot open: %s\n", path, strerror(errno));
		c->errors++;
		return -errno;
	}
	while (fgets(buf, sizeof(buf), f) != NULL) {
		size_t len = strlen(buf);
		line++;
		if (len >= CFG_SCAN_LINE_MAX - 1 && buf[len - 1] != '\n') {
			line_error(c, line, "line too long (rte_cfgfile reads at most 323 bytes)");
			/* Skip the rest of this physical line. */
			while (len > 0 && buf[len - 1] != '\n' && fgets(buf, sizeof(buf), f) != NULL)
				len = strlen(buf);
			continue;
		}
		char *cmt = strchr(buf, CFG_COMMENT);
		if (cmt != NULL)
			*cmt = '\0';
		char *s = cfg_trim(buf);
		if (*s == '\0')
			continue;
		if (*s == '[') {
			char *end = strchr(s, ']');
			if (end == NULL) {
				line_error(c, line, "section header without ']'");
				continue;
			}
			if (*cfg_trim(end + 1) != '\0') {
				line_error(c, line, "text after the section header");
				continue;
			}
			*end = '\0';
			char *name = cfg_trim(s + 1);
			if (*name == '\0' || strlen(name) >= CFG_NAME_LEN) {
				line_error(c, line, "section name empty or longer than 63 bytes");
				continue;
			}
			if (cfg_scan_find(c, name, "") != NULL) {
				fprintf(c->err, "%s:%d: [%s]: duplicate section (first at line %d)\n",
					c->file, line, name, cfg_scan_find(c, name, "")->line);
				c->errors++;
			}
			snprintf(sec, sizeof(sec), "%s", name);
			scan_add(c, sec, "", line);
			continue;
		}
		char *eq = strchr(s, '=');
		if (eq == NULL) {
			line_error(c, line, "neither a [section] nor key = value");
			continue;
		}
		*eq = '\0';
		char *key = cfg_trim(s);
		char *value = cfg_trim(eq + 1);
		if (sec[0] == '\0') {
			line_error(c, line, "key before the first [section]");
			continue;
		}
		if (*key == '\0' || strlen(key) >= CFG_NAME_LEN) {
			line_error(c, line, "key empty or longer than 63 bytes");
			continue;
		}
		if (strlen(value) >= CFG_VALUE_LEN) {
			fprintf(c->err, "%s:%d: [%s] %s: value longer than 255 bytes\n", c->file,
				line, sec, key);
			c->errors++;
			continue;
		}
		const struct cfg_scan_ent *dup = cfg_scan_find(c, sec, key);
		if (dup != NULL) {
			fprintf(c->err, "%s:%d: [%s] %s: duplicate key (first at line %d)\n",
				c->file, line, sec, key, dup->line);
			c->errors++;
			continue;
		}
		scan_add(c, sec, key, line);
	}
	fclose(f);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* omsctl internals: options, exit codes, the JSON tree and renderer (docs/tools.md). */
#ifndef OMSD_TOOLS_OMSCTL_H
#define OMSD_TOOLS_OMSCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes: scripts branch on these. */
enum ctl_exit {
	CTL_EXIT_OK = 0,        /* accepted, or a final state that is not a refusal */
	CTL_EXIT_REFUSED = 1,   /* NAK, reject, or an error response (reason printed) */
	CTL_EXIT_USAGE = 2,     /* bad command line */
	CTL_EXIT_NO_ANSWER = 3, /* no answer or no final state in time; socket unreachable */
	CTL_EXIT_IO = 4,        /* local I/O error (socket, memory) */
};

#define CTL_WORDS_MAX 8
#define CTL_OPTS_MAX 48

struct ctl_opt {
	const char *name;  /* without the leading "--" */
	const char *value; /* NULL for a flag */
	bool used;         /* consumed by the command (the rest are reported or sent as args) */
};

struct ctl {
	const char *words[CTL_WORDS_MAX]; /* positional words: the command */
	uint32_t word_count;
	struct ctl_opt opts[CTL_OPTS_MAX]; /* --name value options in command-line order */
	uint32_t opt_count;
	bool json;                        /* --json */
	FILE *out;                        /* stdout */
	FILE *err;                        /* stderr */
};

/* ctl_args.c: split argv into ctl->words and ctl->opts. CTL_EXIT_OK, else the exit code
 * (a usage error is printed). */
int ctl_args_parse(struct ctl *ctl, int argc, char **argv);
/* The value of --name (marked used), or NULL. */
const char *ctl_opt(struct ctl *ctl, const char *name);
bool ctl_flag(struct ctl *ctl, const char *name);
/* Integer options: 0, -ENOENT (absent), or -EINVAL (printed as a usage error). */
int ctl_opt_u64(struct ctl *ctl, const char *name, uint64_t *out);
int ctl_opt_i64(struct ctl *ctl, const char *name, int64_t *out);
int ctl_usage(struct ctl *ctl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Free what ctl_args_parse allocated (the option names) and empty ctl's words and options. */
void ctl_args_free(struct ctl *ctl);

int ctl_order_main(struct ctl *ctl);   /* order new|cancel|amend|replace, deposit, withdraw */
int ctl_mgmt_main(struct ctl *ctl);    /* everything on the control socket */
int ctl_keys_main(struct ctl *ctl);    /* keys add|list|revoke|rotate, in PostgreSQL */
int ctl_users_add_main(struct ctl *ctl); /* users add: open accounts, in PostgreSQL */
/* ctl_mgmt.c: the request line for cmd, {"id":N,"cmd":...,"args":{...}} and a newline, with
 * the options that are not omsctl's own as args (malloc'd; NULL when out of memory). */
char *ctl_mgmt_request(struct ctl *ctl, const char *cmd, uint64_t id);

/* ---------------------------------------------------------------------------------------
 * JSON tree (no token limit, unlike mgmt_json: results can be large tables).
 * ------------------------------------------------------------------------------------- */

enum ctl_json_type {
	CJ_NULL = 1,
	CJ_BOOL,
	CJ_NUMBER,
	CJ_STRING,
	CJ_ARRAY,
	CJ_OBJECT,
};

struct ctl_json {
	uint8_t type;        /* enum ctl_json_type */
	char *key;           /* member name inside an object (decoded), else NULL */
	char *text;          /* strings: decoded; numbers and bools: as written */
	uint32_t count;      /* arrays and objects: children */
	struct ctl_json *child; /* first child */
	struct ctl_json *next;  /* next sibling */
};

/* Parse text into a tree (malloc'd). NULL on malformed JSON. */
struct ctl_json *ctl_json_parse(const char *text);
void ctl_json_free(struct ctl_json *j);
struct ctl_json *ctl_json_member(const struct ctl_json *obj, const char *key);
/* Print a value as compact JSON. */
void ctl_json_write(FILE *f, const struct ctl_json *j);
/* Human-readable rendering: objects as aligned "key: value" lines, arrays of objects as
 * aligned tables, nested values indented. */
void ctl_render(FILE *f, const struct ctl_json *j);
/* Append s to f as a JSON string literal. */
void ctl_json_write_str(FILE *f, const char *s);

#endif

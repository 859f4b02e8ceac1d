/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsctl control-plane commands: one JSON-lines request on the node's unix socket
 * (mgmt/mgmt.h), {"id":N,"cmd":"routes.show","args":{...}}, the answer rendered as a table or
 * printed raw with --json.
 *
 * The command name is the words joined with dots; args are the remaining --key value options
 * (integers as numbers, true/false as booleans, anything else as a string). Families with
 * subcommands are checked here so a typo is a usage error, not a round trip; a command omsctl
 * does not know is still sent, so a newer node's commands work with an older omsctl.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mgmt/mgmt.h"
#include "tools/omsctl/omsctl.h"

#define RESP_MAX (4u << 20)           /* largest response accepted */
#define DEFAULT_SOCKET "/run/omsd/omsd.sock"
#define TOP_COUNT_DEFAULT 3600        /* top without --count stops after an hour */
#define TOP_SAMPLES_MAX 4096          /* metric samples compared between refreshes */

struct family {
	const char *name;
	const char *subs[8]; /* NULL-terminated; empty: no subcommand */
	bool bare;           /* the name alone is a command too (`members` = `members list`) */
};

static const struct family families[] = {
	{"status", {NULL}, false},
	{"members", {"list", "add", "promote", "remove", NULL}, true},
	{"lcores", {NULL}, false},
	{"routes", {"show", "set", "pin", "unpin", NULL}, false},
	{"users", {"show", "evict", "migrate", NULL}, false},
	{"shards", {"scale", NULL}, false},
	{"symbols", {"list", "add", "halt", "resume", "move", "book", NULL}, false},
	{"kill", {"user", "symbol", NULL}, false},
	{"snapshot", {NULL}, false},
	{"transfer-leader", {NULL}, false},
	{"metrics", {NULL}, false},
	{"top", {NULL}, false},
	{"help", {NULL}, false},
};

/* Global options that are omsctl's own, never request args. */
static const char *const own_opts[] = {"socket", "timeout-ms", "json", "count", "interval-ms"};

static bool
is_own(const char *name)
{
	for (size_t i = 0; i < sizeof(own_opts) / sizeof(own_opts[0]); i++)
		if (strcmp(own_opts[i], name) == 0)
			return true;
	return false;
}

static bool
looks_integer(const char *s)
{
	const char *p = s + (*s == '-');
	if (*p == '\0' || (p[0] == '0' && p[1] != '\0'))
		return false;
	for (; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return false;
	errno = 0;
	if (*s == '-')
		(void)strtoll(s, NULL, 10);
	else
		(void)strtoull(s, NULL, 10);
	return errno == 0;
}

char *
ctl_mgmt_request(struct ctl *ctl, const char *cmd, uint64_t id)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL)
		return NULL;
	fprintf(f, "{\"id\":%" PRIu64 ",\"cmd\":", id);
	ctl_json_write_str(f, cmd);
	fputs(",\"args\":{", f);
	bool first = true;
	for (uint32_t i = 0; i < ctl->opt_count; i++) {
		const struct ctl_opt *o = &ctl->opts[i];
		if (is_own(o->name))
			continue;
		if (!first)
			fputc(',', f);
		first = false;
		/* --some-key becomes "some_key": the server's argument names use underscores. */
		char name[64];
		snprintf(name, sizeof(name), "%s", o->name);
		for (char *p = name; *p != '\0'; p++)
			if (*p == '-')
				*p = '_';
		ctl_json_write_str(f, name);
		fputc(':', f);
		if (o->value == NULL || strcmp(o->value, "true") == 0)
			fputs("true", f);
		else if (strcmp(o->value, "false") == 0)
			fputs("false", f);
		else if (looks_integer(o->value))
			fputs(o->value, f);
		else
			ctl_json_write_str(f, o->value);
	}
	fputs("}}\n", f);
	fclose(f);
	return buf;
}

struct answer {
	struct ctl_json *root;   /* the whole response */
	struct ctl_json *result; /* its "result" when ok */
	bool ok;
};

/* One round trip. 0 with the parsed answer, or an exit code after printing why. */
static int
call(struct ctl *ctl, const char *path, const char *cmd, int timeout_ms, char *resp,
     struct answer *a, bool print_json)
{
	static uint64_t next_id = 1;
	char *req = ctl_mgmt_request(ctl, cmd, next_id++);
	if (req == NULL) {
		fprintf(ctl->err, "omsctl: out of memory\n");
		return CTL_EXIT_IO;
	}
	int rc = mgmt_call(path, req, resp, RESP_MAX, timeout_ms);
	free(req);
	if (rc < 0) {
		if (rc == -ETIMEDOUT)
			fprintf(ctl->err, "omsctl: no answer from %s within %d ms\n", path,
				timeout_ms);
		else
			fprintf(ctl->err, "omsctl: cannot reach %s: %s\n", path, strerror(-rc));
		return rc == -E2BIG || rc == -EINVAL ? CTL_EXIT_IO : CTL_EXIT_NO_ANSWER;
	}
	if (print_json) {
		fputs(resp, ctl->out);
		fputc('\n', ctl->out);
	}
	a->root = ctl_json_parse(resp);
	if (a->root == NULL || a->root->type != CJ_OBJECT) {
		fprintf(ctl->err, "omsctl: malformed response: %.200s\n", resp);
		ctl_json_free(a->root);
		return CTL_EXIT_IO;
	}
	struct ctl_json *ok = ctl_json_member(a->root, "ok");
	a->ok = ok != NULL && ok->type == CJ_BOOL && strcmp(ok->text, "true") == 0;
	a->result = ctl_json_member(a->root, "result");
	if (!a->ok) {
		struct ctl_json *e = ctl_json_member(a->root, "error");
		struct ctl_json *m = ctl_json_member(a->root, "message");
		const char *code = e != NULL && e->type == CJ_STRING ? e->text : "error";
		fprintf(ctl->err, "error: %s: %s\n", code,
			m != NULL && m->type == CJ_STRING ? m->text : "(no message)");
		if (strcmp(code, "unknown_command") == 0)
			fprintf(ctl->err, "omsctl: this node does not implement '%s' "
					  "(omsctl help lists what it does)\n",
				cmd);
		/* Extra members (e.g. "leader" for not_leader) are shown as hints. */
		for (struct ctl_json *c = a->root->child; c != NULL; c = c->next) {
			if (strcmp(c->key, "id") == 0 || strcmp(c->key, "ok") == 0 ||
			    strcmp(c->key, "error") == 0 || strcmp(c->key, "message") == 0)
				continue;
			fprintf(ctl->err, "  %s: ", c->key);
			ctl_json_write(ctl->err, c);
			fputc('\n', ctl->err);
		}
		/* The node gave up waiting for a commit: no final state, like no answer. */
		int exit_code = strcmp(code, "timeout") == 0 ? CTL_EXIT_NO_ANSWER : CTL_EXIT_REFUSED;
		ctl_json_free(a->root);
		a->root = NULL;
		return exit_code;
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * top: status, then the metrics whose values moved, as rates.
 * ------------------------------------------------------------------------------------- */

struct sample {
	char *name;   /* series name with labels */
	double value;
};

struct samples {
	struct sample s[TOP_SAMPLES_MAX];
	uint32_t count;
};

static void
samples_clear(struct samples *ss)
{
	for (uint32_t i = 0; i < ss->count; i++)
		free(ss->s[i].name);
	ss->count = 0;
}

static void
samples_parse(struct samples *ss, const char *text)
{
	samples_clear(ss);
	const char *p = text;
	while (*p != '\0' && ss->count < TOP_SAMPLES_MAX) {
		const char *eol = strchr(p, '\n');
		size_t n = eol != NULL ? (size_t)(eol - p) : strlen(p);
		if (n > 0 && p[0] != '#') {
			const char *sp = memrchr(p, ' ', n);
			if (sp != NULL) {
				ss->s[ss->count].name = strndup(p, (size_t)(sp - p));
				ss->s[ss->count].value = strtod(sp + 1, NULL);
				ss->count++;
			}
		}
		p += n + (eol != NULL);
	}
}

static const struct sample *
samples_find(const struct samples *ss, const char *name)
{
	for (uint32_t i = 0; i < ss->count; i++)
		if (strcmp(ss->s[i].name, name) == 0)
			return &ss->s[i];
	return NULL;
}

/* top: the lcores table (busy %, idle back-off, rings) under the status. A node without the
 * command (older omsd) shows nothing here. */
static void
top_lcores(struct ctl *ctl, const char *path, int timeout_ms, char *resp)
{
	struct answer a = {0};
	if (call(ctl, path, "lcores", timeout_ms, resp, &a, ctl->json) != 0)
		return;
	if (!ctl->json && a.result != NULL) {
		fputc('\n', ctl->out);
		ctl_render(ctl->out, a.result);
	}
	ctl_json_free(a.root);
}

static int
top(struct ctl *ctl, const char *path, int timeout_ms, char *resp)
{
	uint64_t count = TOP_COUNT_DEFAULT, interval_ms = 1000;
	if (ctl_opt_u64(ctl, "count", &count) == -EINVAL ||
	    ctl_opt_u64(ctl, "interval-ms", &interval_ms) == -EINVAL)
		return CTL_EXIT_USAGE;
	static struct samples prev, cur;
	bool tty = isatty(STDOUT_FILENO) && !ctl->json;
	int rc = CTL_EXIT_OK;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t i = 0; i < count; i++) {
		if (i > 0) {
			struct timespec d = {.tv_sec = (time_t)(interval_ms / 1000),
					     .tv_nsec = (long)(interval_ms % 1000) * 1000000};
			nanosleep(&d, NULL);
		}
		struct answer st = {0}, me = {0};
		rc = call(ctl, path, "status", timeout_ms, resp, &st, ctl->json);
		if (rc == CTL_EXIT_NO_ANSWER || rc == CTL_EXIT_IO)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		t0 = t1;
		if (tty)
			fputs("\033[H\033[2J", ctl->out);
		if (!ctl->json) {
			fprintf(ctl->out, "omsctl top — %s (refresh %" PRIu64 " of %" PRIu64 ")\n\n",
				path, i + 1, count);
			if (st.root != NULL)
				ctl_render(ctl->out, st.result != NULL ? st.result : st.root);
		}
		ctl_json_free(st.root);
		top_lcores(ctl, path, timeout_ms, resp);
		int mrc = call(ctl, path, "metrics", timeout_ms, resp, &me, ctl->json);
		if (mrc == CTL_EXIT_NO_ANSWER || mrc == CTL_EXIT_IO) {
			rc = mrc;
			break;
		}
		if (rc == CTL_EXIT_OK)
			rc = mrc;
		struct ctl_json *text = ctl_json_member(me.result, "text");
		if (!ctl->json && text != NULL && text->type == CJ_STRING) {
			samples_parse(&cur, text->text);
			fprintf(ctl->out, "\n%-64s %16s %14s\n", "series", "value", "per_s");
			for (uint32_t k = 0; k < cur.count; k++) {
				const struct sample *s = &cur.s[k];
				const struct sample *o = samples_find(&prev, s->name);
				bool quantile = strstr(s->name, "quantile=") != NULL;
				double rate = o != NULL && dt > 0 ? (s->value - o->value) / dt : 0;
				/* Latency quantiles always; counters once they move. */
				if (!quantile && (o == NULL || rate == 0))
					continue;
				/* %g: values in seconds are fractions (docs/appliance.md,
				 * "Metric names"), counts print as integers. */
				if (quantile)
					fprintf(ctl->out, "%-64s %16.10g %14s\n", s->name, s->value, "");
				else
					fprintf(ctl->out, "%-64s %16.10g %14.6g\n", s->name, s->value,
						rate);
			}
			struct samples tmp = prev;
			prev = cur;
			cur = tmp;
		}
		ctl_json_free(me.root);
		fflush(ctl->out);
	}
	samples_clear(&prev);
	samples_clear(&cur);
	return rc;
}

int
ctl_mgmt_main(struct ctl *ctl)
{
	/* Find the family and check its subcommand. */
	const struct family *fam = NULL;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		if (strcmp(families[i].name, ctl->words[0]) == 0)
			fam = &families[i];
	if (fam != NULL && fam->bare && ctl->word_count == 2 && strcmp(ctl->words[1], "list") == 0)
		ctl->word_count = 1; /* `members list` is the command `members` */
	if (fam != NULL && fam->subs[0] != NULL && !(fam->bare && ctl->word_count == 1)) {
		if (ctl->word_count < 2) {
			char list[128] = "";
			for (int k = 0; fam->subs[k] != NULL; k++)
				snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
					 k ? "|" : "", fam->subs[k]);
			return ctl_usage(ctl, "%s: expected %s", fam->name, list);
		}
		bool known = false;
		for (int k = 0; fam->subs[k] != NULL; k++)
			known = known || strcmp(fam->subs[k], ctl->words[1]) == 0;
		if (!known)
			return ctl_usage(ctl, "%s: unknown subcommand '%s'", fam->name, ctl->words[1]);
		if (ctl->word_count > 2)
			return ctl_usage(ctl, "unexpected word '%s'", ctl->words[2]);
	} else if (fam != NULL && ctl->word_count > 1) {
		return ctl_usage(ctl, "unexpected word '%s'", ctl->words[1]);
	}
	char cmd[128] = "";
	for (uint32_t i = 0; i < ctl->word_count; i++) {
		if (strlen(cmd) + strlen(ctl->words[i]) + 2 > sizeof(cmd))
			return ctl_usage(ctl, "command too long");
		if (i > 0)
			strcat(cmd, ".");
		strcat(cmd, ctl->words[i]);
	}

	const char *path = ctl_opt(ctl, "socket");
	if (path == NULL)
		path = getenv("OMSD_SOCKET");
	if (path == NULL)
		path = DEFAULT_SOCKET;
	uint64_t timeout_ms = 5000;
	if (ctl_opt_u64(ctl, "timeout-ms", &timeout_ms) == -EINVAL)
		return CTL_EXIT_USAGE;
	if (timeout_ms > 600000)
		timeout_ms = 600000;

	char *resp = malloc(RESP_MAX);
	if (resp == NULL)
		return CTL_EXIT_IO;
	int rc;
	if (strcmp(cmd, "top") == 0) {
		rc = top(ctl, path, (int)timeout_ms, resp);
		free(resp);
		return rc;
	}
	struct answer a = {0};
	rc = call(ctl, path, cmd, (int)timeout_ms, resp, &a, ctl->json);
	if (rc != 0 || ctl->json) {
		ctl_json_free(a.root);
		free(resp);
		return rc;
	}
	struct ctl_json *text = ctl_json_member(a.result, "text");
	if (strcmp(cmd, "metrics") == 0 && text != NULL && text->type == CJ_STRING) {
		fputs(text->text, ctl->out); /* Prometheus text as-is */
	} else if (a.result != NULL) {
		ctl_render(ctl->out, a.result);
	} else {
		fputs("ok\n", ctl->out);
	}
	ctl_json_free(a.root);
	free(resp);
	return CTL_EXIT_OK;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsctl — the operator's and client's command line (docs/tools.md).
 *
 *   omsctl [--json] order new|cancel|amend|replace ...   order entry over UDP
 *   omsctl [--json] deposit|withdraw ...                 transfers over UDP
 *   omsctl [--json] [--socket PATH] <command> ...        the node's control socket
 *
 * Options may appear anywhere; every one but a few flags takes a value ("--key value" or
 * "--key=value"). Exit codes: enum ctl_exit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tools/omsctl/omsctl.h"

/* Options that never take a value. */
static const char *const flags[] = {"json", "help", "follow", "quiet", "release", "halted",
				     "cancel-resting"};

static bool
is_flag(const char *name)
{
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (strcmp(flags[i], name) == 0)
			return true;
	return false;
}

const char *
ctl_opt(struct ctl *ctl, const char *name)
{
	const char *v = NULL;
	for (uint32_t i = 0; i < ctl->opt_count; i++) {
		if (strcmp(ctl->opts[i].name, name) == 0) {
			ctl->opts[i].used = true;
			v = ctl->opts[i].value; /* the last one wins */
		}
	}
	return v;
}

bool
ctl_flag(struct ctl *ctl, const char *name)
{
	bool set = false;
	for (uint32_t i = 0; i < ctl->opt_count; i++) {
		if (strcmp(ctl->opts[i].name, name) == 0) {
			ctl->opts[i].used = true;
			set = true;
		}
	}
	return set;
}

int
ctl_usage(struct ctl *ctl, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("omsctl: ", ctl->err);
	vfprintf(ctl->err, fmt, ap);
	fputs(" (omsctl --help)\n", ctl->err);
	va_end(ap);
	return CTL_EXIT_USAGE;
}

int
ctl_opt_i64(struct ctl *ctl, const char *name, int64_t *out)
{
	const char *v = ctl_opt(ctl, name);
	if (v == NULL)
		return -ENOENT;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0') {
		ctl_usage(ctl, "--%s: '%s' is not an integer", name, v);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

int
ctl_opt_u64(struct ctl *ctl, const char *name, uint64_t *out)
{
	const char *v = ctl_opt(ctl, name);
	if (v == NULL)
		return -ENOENT;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	if (errno != 0 || end == v || *end != '\0' || v[0] == '-') {
		ctl_usage(ctl, "--%s: '%s' is not a non-negative integer", name, v);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

static void
help(FILE *f)
{
	fputs("usage: omsctl [--json] <command> [--option value ...]\n"
	      "\n"
	      "Order entry over UDP (--host A.B.C.D, default 10.77.0.2; --port N, default 7400;\n"
	      "--bind A.B.C.D; --session N; --key HEX32; --wait-ms N, default 5000;\n"
	      "--wait ack|final; --retry-ms N, default 200; --retries N, default 8):\n"
	      "  order new     --user U --symbol S --side buy|sell --type limit|market\n"
	      "                --tif gtc|ioc|fok|gtd|post_only --px P --qty Q [--quote Q]\n"
	      "                [--expire-ms N | --expire-ns T]\n"
	      "                [--stp none|expire_taker|expire_maker|expire_both]\n"
	      "                [--cl-id N] [--follow]\n"
	      "  order cancel  --user U --orig N [--cl-id N]\n"
	      "  order amend   --user U --orig N --qty Q [--cl-id N]\n"
	      "  order replace --user U --orig N --px P --qty Q [--cl-id N]\n"
	      "  order status  --user U               (control socket: users.show)\n"
	      "  deposit       --user U --asset A --amount N [--transfer-id N] [--shard N]\n"
	      "  withdraw      --user U --asset A --amount N [--transfer-id N] [--shard N]\n"
	      "\n"
	      "Control socket (--socket PATH, else $OMSD_SOCKET, else /run/omsd/omsd.sock;\n"
	      "--timeout-ms N, default 5000):\n"
	      "  status | members | lcores | snapshot | transfer-leader | metrics | help\n"
	      "  routes show|set|pin|unpin     users show|evict|migrate     shards scale\n"
	      "  symbols list|add|halt|resume|move     kill user|symbol\n"
	      "  top [--count N] [--interval-ms N]\n"
	      "  Other --key value options become the request's args (integers, true/false,\n"
	      "  else strings); the command name joins its words with dots (routes.show).\n"
	      "\n"
	      "Exit codes: 0 ok, 1 refused (NAK, reject, error response), 2 usage,\n"
	      "3 no answer / timeout / socket unreachable, 4 local I/O error.\n",
	      f);
}

int
main(int argc, char **argv)
{
	static struct ctl ctl;
	ctl.out = stdout;
	ctl.err = stderr;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0)
			a = "--help";
		if (strncmp(a, "--", 2) == 0 && a[2] != '\0') {
			if (ctl.opt_count == CTL_OPTS_MAX)
				return ctl_usage(&ctl, "too many options");
			struct ctl_opt *o = &ctl.opts[ctl.opt_count++];
			char *name = strdup(a + 2);
			if (name == NULL)
				return CTL_EXIT_IO;
			char *eq = strchr(name, '=');
			o->name = name;
			if (eq != NULL) {
				*eq = '\0';
				o->value = eq + 1;
			} else if (!is_flag(name)) {
				if (i + 1 >= argc)
					return ctl_usage(&ctl, "--%s needs a value", name);
				o->value = argv[++i];
			}
			continue;
		}
		if (ctl.word_count == CTL_WORDS_MAX)
			return ctl_usage(&ctl, "too many words in the command");
		ctl.words[ctl.word_count++] = a;
	}
	ctl.json = ctl_flag(&ctl, "json");
	if (ctl_flag(&ctl, "help") || ctl.word_count == 0) {
		help(ctl.word_count == 0 && !ctl_flag(&ctl, "help") ? stderr : stdout);
		return ctl.word_count == 0 && !ctl_flag(&ctl, "help") ? CTL_EXIT_USAGE : CTL_EXIT_OK;
	}
	const char *w = ctl.words[0];
	int rc;
	/* There is no client status message on the wire: an order's state is the OMS actor's,
	 * so `order status` asks the control socket for the user (users.show). */
	if (strcmp(w, "order") == 0 && ctl.word_count == 2 && strcmp(ctl.words[1], "status") == 0) {
		ctl.words[0] = "users";
		ctl.words[1] = "show";
		w = ctl.words[0];
	}
	if (strcmp(w, "order") == 0 || strcmp(w, "deposit") == 0 || strcmp(w, "withdraw") == 0)
		rc = ctl_order_main(&ctl);
	else
		rc = ctl_mgmt_main(&ctl);
	fflush(stdout);
	return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsctl's command line (omsctl.h): argv split into the command's words and its --options,
 * and the accessors every command uses to read an option, report a usage error or parse an
 * integer. They live apart from main so the order and control-socket commands depend on
 * them, not on the file that dispatches to those commands.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tools/omsctl/omsctl.h"

/* Options that never take a value. */
static const char *const flags[] = {"json", "help", "follow", "quiet", "release", "halted",
				     "cancel-resting", "local"};

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

int
ctl_args_parse(struct ctl *ctl, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0)
			a = "--help";
		if (strncmp(a, "--", 2) == 0 && a[2] != '\0') {
			if (ctl->opt_count == CTL_OPTS_MAX)
				return ctl_usage(ctl, "too many options");
			struct ctl_opt *o = &ctl->opts[ctl->opt_count++];
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
					return ctl_usage(ctl, "--%s needs a value", name);
				o->value = argv[++i];
			}
			continue;
		}
		if (ctl->word_count == CTL_WORDS_MAX)
			return ctl_usage(ctl, "too many words in the command");
		ctl->words[ctl->word_count++] = a;
	}
	return CTL_EXIT_OK;
}

void
ctl_args_free(struct ctl *ctl)
{
	for (uint32_t i = 0; i < ctl->opt_count; i++)
		free((char *)ctl->opts[i].name); /* strdup'ed by ctl_args_parse */
	memset(ctl->opts, 0, sizeof(ctl->opts));
	memset(ctl->words, 0, sizeof(ctl->words));
	ctl->opt_count = 0;
	ctl->word_count = 0;
}

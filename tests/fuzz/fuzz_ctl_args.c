/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for omsctl's command line (ctl_args_parse and the integer options,
 * tools/omsctl/ctl_args.c) and the control-socket request it turns into
 * (ctl_mgmt_request, tools/omsctl/ctl_mgmt.c), read back by the node's own request reader
 * (mgmt_json_parse, mgmt/mgmt_json.c).
 *
 * The input is argv: arguments separated by NUL bytes. Properties: parsing never crashes or
 * leaks; it accepts or names a usage error; integer options answer 0, -ENOENT or -EINVAL; an
 * accepted command line becomes one request line that the node parses as an object with the
 * same id, the command name as "cmd" and an "args" object with one member per option that is
 * not omsctl's own (when the line fits the node's MGMT_LINE_MAX).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "mgmt/mgmt.h"
#include "tools/omsctl/omsctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ARGS_MAX 64

static const char *const own[] = {"socket", "timeout-ms", "json", "count", "interval-ms"};

static bool
is_own(const char *name)
{
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (strcmp(own[i], name) == 0)
			return true;
	return false;
}

static struct mgmt_json json;

static void
request(struct ctl *ctl)
{
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "%s", ctl->word_count ? ctl->words[0] : "status");
	char *line = ctl_mgmt_request(ctl, cmd, 42);
	CHECK(line != NULL);
	size_t len = strlen(line);
	CHECK(len > 0 && line[len - 1] == '\n');
	if (len - 1 > MGMT_LINE_MAX) {
		free(line);
		return;
	}
	size_t at = 0;
	CHECK(mgmt_json_parse(&json, line, len - 1, &at) == 0);
	CHECK(json.toks[0].type == MGMT_JSON_OBJECT);
	uint64_t id;
	CHECK(mgmt_json_get_u64(&json, 0, "id", &id) == 0 && id == 42);
	char got[sizeof(cmd) + 8];
	CHECK(mgmt_json_get_str(&json, 0, "cmd", got, sizeof(got)) == 0);
	CHECK(strcmp(got, cmd) == 0);
	int args = mgmt_json_get(&json, 0, "args");
	CHECK(args > 0 && json.toks[args].type == MGMT_JSON_OBJECT);
	uint32_t want = 0;
	for (uint32_t i = 0; i < ctl->opt_count; i++)
		want += !is_own(ctl->opts[i].name);
	CHECK(json.toks[args].size == want);
	free(line);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *text = malloc(size + 1);
	CHECK(text != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	char *argv[ARGS_MAX + 1];
	int argc = 0;
	argv[argc++] = "omsctl";
	for (size_t i = 0; i < size && argc < ARGS_MAX; i++) {
		argv[argc++] = text + i;
		i += strlen(text + i);
	}
	argv[argc] = NULL;

	static struct ctl ctl;
	static FILE *null;
	if (null == NULL)
		null = fopen("/dev/null", "w");
	memset(&ctl, 0, sizeof(ctl));
	ctl.out = null;
	ctl.err = null;
	int rc = ctl_args_parse(&ctl, argc, argv);
	CHECK(rc == CTL_EXIT_OK || rc == CTL_EXIT_USAGE);
	if (rc == CTL_EXIT_OK) {
		CHECK(ctl.word_count <= CTL_WORDS_MAX && ctl.opt_count <= CTL_OPTS_MAX);
		for (uint32_t i = 0; i < ctl.opt_count; i++) {
			const char *name = ctl.opts[i].name;
			CHECK(name != NULL && strchr(name, '=') == NULL);
			uint64_t u;
			int64_t v;
			int r = ctl_opt_u64(&ctl, name, &u);
			CHECK(r == 0 || r == -EINVAL || r == -ENOENT);
			r = ctl_opt_i64(&ctl, name, &v);
			CHECK(r == 0 || r == -EINVAL || r == -ENOENT);
		}
		request(&ctl);
	}
	ctl_args_free(&ctl);
	free(text);
	return 0;
}

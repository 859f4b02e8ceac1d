/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for omsctl's reader of control-socket answers (ctl_json_parse,
 * tools/omsctl/ctl_render.c) and everything that walks the tree it builds: the compact
 * writer (--json) and the table renderer. The node's own request reader is fuzz_mgmt.
 *
 * Properties: the parser never crashes, recurses without bound or reads past the text
 * (ASan, the input is copied to an exact-size NUL-terminated buffer); every accepted tree
 * renders; writing it and parsing the output gives a tree that writes the same text again
 * (the writer's output is something the reader takes, and nothing is lost twice); member
 * lookup finds each object's first key; every node is freed (LeakSanitizer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "tools/omsctl/omsctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *
write_text(const struct ctl_json *j)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	ctl_json_write(f, j);
	fclose(f);
	return buf;
}

static void
walk(const struct ctl_json *j)
{
	if (j->type == CJ_OBJECT && j->child != NULL)
		CHECK(ctl_json_member(j, j->child->key) == j->child);
	uint32_t n = 0;
	for (const struct ctl_json *c = j->child; c != NULL; c = c->next) {
		CHECK((j->type == CJ_OBJECT) == (c->key != NULL));
		walk(c);
		n++;
	}
	if (j->type == CJ_ARRAY || j->type == CJ_OBJECT)
		CHECK(n == j->count);
	else
		CHECK(j->text != NULL && j->child == NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65536)
		return 0;
	char *text = malloc(size + 1);
	CHECK(text != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	struct ctl_json *j = ctl_json_parse(text);
	free(text);
	if (j == NULL)
		return 0;
	walk(j);
	static FILE *null;
	if (null == NULL)
		null = fopen("/dev/null", "w");
	ctl_render(null, j);
	char *once = write_text(j);
	struct ctl_json *k = ctl_json_parse(once);
	CHECK(k != NULL);
	char *twice = write_text(k);
	CHECK(strcmp(once, twice) == 0);
	free(once);
	free(twice);
	ctl_json_free(k);
	ctl_json_free(j);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for omsd's configuration loader (app/app_config*.c): the input is written
 * as an INI file and loaded with app_config_load, exactly as omsd does before the EAL starts
 * (pass 1 our line scanner, pass 2 DPDK's rte_cfgfile, then every section's keys and the
 * checks that span sections).
 *
 * Properties: the loader never crashes or reads past a line (overlong lines and values,
 * missing ']', keys before any section, duplicate sections and keys, NUL bytes, numbers out
 * of range, unknown names, inconsistent shards, peers, routes and symbols); it answers the
 * number of errors it reported, each reported on its own line as FILE:LINE: ... or FILE: ...
 * (never silence: a refused file has at least one such line); a file it accepts produced no
 * error text, and loads again to the same configuration (same dump).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app_config.h"
#include "common/check.h"
#include "fuzz_util.h"

static struct app_config cfg;

static char *
dump(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	app_config_dump(&cfg, f);
	fclose(f);
	return buf;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 16384)
		return 0;
	char path[512];
	fz_write(fz_dir(), "omsd.ini", data, size, path, sizeof(path));
	char *text = NULL;
	size_t text_len = 0;
	FILE *err = open_memstream(&text, &text_len);
	CHECK(err != NULL);
	int errors = app_config_load(path, &cfg, err);
	fclose(err);
	CHECK(errors >= 0);
	if (errors == 0) {
		CHECK(text_len == 0);
		char *first = dump();
		err = fopen("/dev/null", "w");
		CHECK(app_config_load(path, &cfg, err) == 0);
		fclose(err);
		char *second = dump();
		CHECK(strcmp(first, second) == 0);
		free(first);
		free(second);
	} else {
		/* One line per error, each naming the file. */
		int lines = 0;
		size_t plen = strlen(path);
		for (char *l = text; *l != '\0'; lines++) {
			CHECK(strncmp(l, path, plen) == 0 && l[plen] == ':');
			char *nl = strchr(l, '\n');
			CHECK(nl != NULL);
			l = nl + 1;
		}
		CHECK(lines == errors);
	}
	free(text);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A node's API keys (docs/security.md): the [sessions] keys_file read into an auth_keys
 * set. Loaded by the configuration check (so `omsd --check` names a bad line) and by the
 * main lcore, which reloads the file when it changes and hands the new set to the gateway
 * (app_session.c).
 */
#ifndef OMSD_APP_KEYS_H
#define OMSD_APP_KEYS_H

#include <stddef.h>
#include <sys/stat.h>

#include "auth/auth.h"

#define APP_KEYS_FILE_MAX (4u << 20) /* bytes: a bigger file is refused */

struct app_keyset {
	struct auth_keys ks;
	uint64_t digest;       /* of the text parsed (the key thread's change detection) */
	struct timespec mtime; /* of the file read */
	off_t size;
	ino_t ino;
};

/* Key-file text (len bytes, from a file or built from the api_keys rows) into a new set, with
 * its digest; NULL with "name:line: why" in err. The text is wiped either way (secrets). */
struct app_keyset *app_keyset_parse(char *text, size_t len, const char *name, char *err,
				    size_t cap);
/* 0, or -1 with "path: why" / "path:line: why" in err. *out is the caller's to free. */
int app_keyset_load(const char *path, struct app_keyset **out, char *err, size_t cap);
void app_keyset_free(struct app_keyset *k);
/* True when path no longer is the file k was read from (or cannot be looked at). */
bool app_keyset_changed(const struct app_keyset *k, const char *path);
/* The api_keys table (app_keys_db.c, libpq; keys_source = database): 0, or -1 with why in
 * err. The connection gives up after 5 s. */
int app_keyset_from_db(const char *conninfo, struct app_keyset **out, char *err, size_t cap);

#endif

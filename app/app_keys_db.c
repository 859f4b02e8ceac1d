/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API keys from PostgreSQL ([sessions] keys_source = database; docs/security.md): the
 * api_keys table (migration 0010, written by `omsctl keys`) read whole, turned into the key
 * file's lines and parsed by the same parser (auth_keys_parse), so both sources are held to
 * the same rules. Runs on the main lcore at start and on the key thread after (app_session.c);
 * never on a shard lcore.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "app_keys.h"

#define ROW_TEXT_MAX 640 /* one key's line: id, 64 hex digits, perms, users, "revoked" */

int
app_keyset_from_db(const char *conninfo, struct app_keyset **out, char *err, size_t cap)
{
	*out = NULL;
	const char *kw[] = { "dbname", "connect_timeout", NULL };
	const char *val[] = { conninfo, "5", NULL };
	PGconn *c = PQconnectdbParams(kw, val, 1);
	if (PQstatus(c) != CONNECTION_OK) {
		snprintf(err, cap, "api_keys: %s", PQerrorMessage(c));
		err[strcspn(err, "\n")] = '\0';
		PQfinish(c);
		return -1;
	}
	PGresult *r = PQexec(c, "SELECT key_id, encode(secret, 'hex'), perms, users,"
				" revoked_at IS NOT NULL FROM api_keys ORDER BY key_id");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		snprintf(err, cap, "api_keys: %s", PQerrorMessage(c));
		err[strcspn(err, "\n")] = '\0';
		PQclear(r);
		PQfinish(c);
		return -1;
	}
	int rows = PQntuples(r);
	size_t text_cap = (size_t)rows * ROW_TEXT_MAX + 1, len = 0;
	char *text = malloc(text_cap);
	if (text == NULL) {
		snprintf(err, cap, "api_keys: out of memory");
		PQclear(r);
		PQfinish(c);
		return -1;
	}
	for (int i = 0; i < rows; i++) {
		int n = snprintf(text + len, text_cap - len, "%s %s %s %s%s\n", PQgetvalue(r, i, 0),
				 PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 3),
				 strcmp(PQgetvalue(r, i, 4), "t") == 0 ? " revoked" : "");
		if (n < 0 || (size_t)n >= text_cap - len || n >= ROW_TEXT_MAX) {
			/* A row longer than any valid key (the table's checks should prevent it). */
			snprintf(err, cap, "api_keys: key %s: row too long", PQgetvalue(r, i, 0));
			explicit_bzero(text, len);
			free(text);
			PQclear(r);
			PQfinish(c);
			return -1;
		}
		len += (size_t)n;
	}
	PQclear(r);
	PQfinish(c);
	*out = app_keyset_parse(text, len, "api_keys", err, cap);
	free(text);
	return *out != NULL ? 0 : -1;
}

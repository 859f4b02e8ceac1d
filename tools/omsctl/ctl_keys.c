/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsctl keys: the API keys in PostgreSQL (docs/security.md, "API keys"), written as a role
 * that may (the table's owner, the migration role): nodes with [sessions] keys_source =
 * database read them and end at once the sessions of a key revoked or removed. And
 * omsctl users add: opening accounts (docs/security.md, "No account from nowhere"), which
 * omsd never does.
 *
 *   omsctl users add   --db CONNINFO --user FIRST [--last LAST]
 *
 *   omsctl keys add    --db CONNINFO --perms P --users U [--key-id N] [--out FILE]
 *   omsctl keys list   --db CONNINFO
 *   omsctl keys revoke --db CONNINFO --key-id N
 *   omsctl keys rotate --db CONNINFO --key-id N [--out FILE]
 *
 * add and rotate make a secret of 32 random bytes (getrandom) and print the client's key
 * line, `<key_id> <secret hex> <perms> <users>` (the format of --key-file), to stdout or to
 * --out FILE (created 0600, never overwritten). list never prints a secret. The perms and
 * users are checked here with the node's own parser (auth_keys_parse) and again by the
 * table's constraints. --db defaults to $OMSD_KEYS_DB.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "auth/auth.h"
#include "tools/omsctl/omsctl.h"

static void
hex(const uint8_t *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/* perms and users as the node reads them: 0, or a usage error printed. */
static int
check_grant(struct ctl *ctl, const char *perms, const char *users)
{
	char line[512], err[256];
	struct auth_key k;
	struct auth_keys ks = { .keys = &k, .cap = 1 };
	snprintf(line, sizeof(line), "1 %064d %s %s\n", 1, perms, users);
	if (strpbrk(perms, " \t\n#") != NULL || strpbrk(users, " \t\n#") != NULL ||
	    auth_keys_parse(line, strlen(line), "--perms/--users", &ks, err, sizeof(err)) != 0)
		return ctl_usage(ctl, "keys: %s", strchr(err, ' ') != NULL ? strchr(err, ' ') + 1
									    : "bad perms or users");
	return 0;
}

/* Print or write the client's key line. */
static int
emit_line(struct ctl *ctl, const char *out_path, uint64_t id, const char *secret_hex,
	  const char *perms, const char *users)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%" PRIu64 " %s %s %s\n", id, secret_hex, perms,
			 users);
	if (out_path == NULL) {
		fputs(line, ctl->out);
		return CTL_EXIT_OK;
	}
	int fd = open(out_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, line, (size_t)n) != n) {
		fprintf(ctl->err, "omsctl: keys: %s: %s (the key is in the database: rotate it)\n",
			out_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return CTL_EXIT_IO;
	}
	close(fd);
	fprintf(ctl->out, "key %" PRIu64 " written to %s\n", id, out_path);
	return CTL_EXIT_OK;
}

static PGresult *
run(struct ctl *ctl, PGconn *c, const char *sql, int n, const char *const *params, int *rc)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(r);
	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		fprintf(ctl->err, "omsctl: keys: %s", PQerrorMessage(c));
		PQclear(r);
		*rc = CTL_EXIT_REFUSED;
		return NULL;
	}
	*rc = CTL_EXIT_OK;
	return r;
}

/* The --db option, else $OMSD_KEYS_DB; NULL with a usage error printed. */
static const char *
db_conninfo(struct ctl *ctl, const char *what)
{
	const char *db = ctl_opt(ctl, "db");
	if (db == NULL)
		db = getenv("OMSD_KEYS_DB");
	if (db == NULL)
		(void)ctl_usage(ctl, "%s: --db CONNINFO (a role that may write the table)", what);
	return db;
}

int
ctl_users_add_main(struct ctl *ctl)
{
	const char *db = db_conninfo(ctl, "users add");
	if (db == NULL)
		return CTL_EXIT_USAGE;
	uint64_t first = 0, last = 0;
	int frc = ctl_opt_u64(ctl, "user", &first), lrc = ctl_opt_u64(ctl, "last", &last);
	if (frc == -EINVAL || lrc == -EINVAL)
		return CTL_EXIT_USAGE;
	if (lrc == -ENOENT)
		last = first;
	if (frc != 0 || first == 0 || last < first || last > INT64_MAX || last - first >= 10000000)
		return ctl_usage(ctl, "users add --user FIRST [--last LAST] (1 <= FIRST <= LAST, at "
				      "most 10,000,000 at once)");
	PGconn *c = PQconnectdb(db);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(ctl->err, "omsctl: users add: %s", PQerrorMessage(c));
		PQfinish(c);
		return CTL_EXIT_NO_ANSWER;
	}
	char a[24], b[24];
	snprintf(a, sizeof(a), "%" PRIu64, first);
	snprintf(b, sizeof(b), "%" PRIu64, last);
	const char *p[2] = { a, b };
	int rc;
	PGresult *r = run(ctl, c,
			  "WITH ins AS (INSERT INTO accounts (user_id)"
			  " SELECT generate_series($1::bigint, $2::bigint)"
			  " ON CONFLICT (user_id) DO NOTHING RETURNING 1) SELECT count(*) FROM ins",
			  2, p, &rc);
	if (r != NULL) {
		uint64_t n = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
		if (ctl->json)
			fprintf(ctl->out, "{\"first\":%s,\"last\":%s,\"opened\":%" PRIu64 "}\n", a, b, n);
		else
			fprintf(ctl->out, "users %s..%s: %" PRIu64 " opened, %" PRIu64 " were open\n", a, b,
				n, last - first + 1 - n);
	}
	PQclear(r);
	PQfinish(c);
	return rc;
}

int
ctl_keys_main(struct ctl *ctl)
{
	if (ctl->word_count != 2)
		return ctl_usage(ctl, "keys add|list|revoke|rotate");
	const char *sub = ctl->words[1];
	const char *db = db_conninfo(ctl, "keys");
	if (db == NULL)
		return CTL_EXIT_USAGE;
	const char *perms = ctl_opt(ctl, "perms"), *users = ctl_opt(ctl, "users");
	const char *out_path = ctl_opt(ctl, "out");
	uint64_t id = 0;
	int idrc = ctl_opt_u64(ctl, "key-id", &id);
	if (idrc == -EINVAL)
		return CTL_EXIT_USAGE;
	bool add = strcmp(sub, "add") == 0, list = strcmp(sub, "list") == 0;
	bool revoke = strcmp(sub, "revoke") == 0, rotate = strcmp(sub, "rotate") == 0;
	if (!add && !list && !revoke && !rotate)
		return ctl_usage(ctl, "keys add|list|revoke|rotate, not '%s'", sub);
	if (add && (perms == NULL || users == NULL))
		return ctl_usage(ctl, "keys add: --perms trade,transfer,read|all --users *|1-1000,...");
	if (add && check_grant(ctl, perms, users) != 0)
		return CTL_EXIT_USAGE;
	if ((revoke || rotate) && (idrc != 0 || id == 0))
		return ctl_usage(ctl, "keys %s: --key-id N", sub);
	if (idrc == 0 && (id == 0 || id > INT64_MAX))
		return ctl_usage(ctl, "keys: --key-id is 1..2^63-1");

	PGconn *c = PQconnectdb(db);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(ctl->err, "omsctl: keys: %s", PQerrorMessage(c));
		PQfinish(c);
		return CTL_EXIT_NO_ANSWER;
	}
	int rc = CTL_EXIT_OK;
	char idbuf[24], secret_hex[2 * AUTH_SECRET_SIZE + 1];
	uint8_t secret[AUTH_SECRET_SIZE];
	if ((add || rotate) && getrandom(secret, sizeof(secret), 0) != (ssize_t)sizeof(secret)) {
		fprintf(ctl->err, "omsctl: keys: getrandom: %s\n", strerror(errno));
		PQfinish(c);
		return CTL_EXIT_IO;
	}
	hex(secret, sizeof(secret), secret_hex);
	explicit_bzero(secret, sizeof(secret));
	snprintf(idbuf, sizeof(idbuf), "%" PRIu64, id);
	PGresult *r = NULL;
	if (list) {
		r = run(ctl, c,
			"SELECT key_id, perms, users, to_char(created_at, 'YYYY-MM-DD HH24:MI:SS'),"
			" coalesce(to_char(revoked_at, 'YYYY-MM-DD HH24:MI:SS'), '')"
			" FROM api_keys ORDER BY key_id", 0, NULL, &rc);
		if (r != NULL) {
			if (!ctl->json)
				fprintf(ctl->out, "%-10s %-20s %-24s %-20s %s\n", "key_id", "perms",
					"users", "created", "revoked");
			for (int i = 0; i < PQntuples(r); i++) {
				if (ctl->json)
					fprintf(ctl->out, "{\"key_id\":%s,\"perms\":\"%s\","
						"\"users\":\"%s\",\"created\":\"%s\",\"revoked\":\"%s\"}\n",
						PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
						PQgetvalue(r, i, 3), PQgetvalue(r, i, 4));
				else
					fprintf(ctl->out, "%-10s %-20s %-24s %-20s %s\n",
						PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
						PQgetvalue(r, i, 3), PQgetvalue(r, i, 4));
			}
		}
	} else if (add) {
		const char *p[4] = { idrc == 0 ? idbuf : NULL, secret_hex, perms, users };
		r = run(ctl, c,
			"INSERT INTO api_keys (key_id, secret, perms, users)"
			" VALUES (coalesce($1::bigint, (SELECT coalesce(max(key_id), 0) + 1 FROM api_keys)),"
			"  decode($2, 'hex'), $3, $4) RETURNING key_id", 4, p, &rc);
		if (r != NULL)
			rc = emit_line(ctl, out_path, strtoull(PQgetvalue(r, 0, 0), NULL, 10),
				       secret_hex, perms, users);
	} else if (revoke) {
		const char *p[1] = { idbuf };
		r = run(ctl, c,
			"UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()), updated_at = now()"
			" WHERE key_id = $1::bigint RETURNING key_id", 1, p, &rc);
		if (r != NULL && PQntuples(r) == 0) {
			fprintf(ctl->err, "omsctl: keys revoke: no key %s\n", idbuf);
			rc = CTL_EXIT_REFUSED;
		} else if (r != NULL) {
			fprintf(ctl->out, "key %s revoked: its sessions end at the nodes' next refresh\n",
				idbuf);
		}
	} else {
		const char *p[2] = { idbuf, secret_hex };
		r = run(ctl, c,
			"UPDATE api_keys SET secret = decode($2, 'hex'), updated_at = now()"
			" WHERE key_id = $1::bigint AND revoked_at IS NULL RETURNING perms, users",
			2, p, &rc);
		if (r != NULL && PQntuples(r) == 0) {
			fprintf(ctl->err, "omsctl: keys rotate: no live key %s\n", idbuf);
			rc = CTL_EXIT_REFUSED;
		} else if (r != NULL) {
			rc = emit_line(ctl, out_path, id, secret_hex, PQgetvalue(r, 0, 0),
				       PQgetvalue(r, 0, 1));
		}
	}
	explicit_bzero(secret_hex, sizeof(secret_hex));
	PQclear(r);
	PQfinish(c);
	return rc;
}

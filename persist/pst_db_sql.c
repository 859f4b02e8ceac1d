/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The database's side of the conversation as plain data: the four statements' SQL text
 * (docs/persist.md "Database", "Fencing protocol"; docs/fencing.md), the encoding of a
 * request's parameters into libpq's text format, and the decoding of an answer row into an
 * outcome. Everything here is a pure function over buffers: no request table, no connection,
 * no libpq call. The pipeline (pst_db_batch.c) moves the bytes; what they mean lives here, in
 * one place, where a fuzzer can reach the row decoders with nothing but strings.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "common/check.h"
#include "persist/pst_db_int.h"

/* Read and claim in one statement (ARCHITECTURE.md §6: "Hydration claims the row (fails if
 * another shard holds it)"). Accounts are created by the operator (deploy/pg/accounts;
 * the omsd role may not INSERT): a user without a row is answered 2 (UNKNOWN_USER) and
 * nothing is created. A row never written by a shard (version 0) is NEW. A claim that fails
 * returns the holder from the statement's snapshot. A re-claim by the holder never lowers
 * the epoch stamp: a stale request re-driven late must not make the claim look older than
 * one a newer incarnation took, since a release takes every claim of the shard at or below
 * its epoch (docs/fencing.md). */
static const char SQL_HYDRATE[] =
	"WITH claim AS ("
	" UPDATE accounts AS a SET owner_shard = $2::integer,"
	"  owner_epoch = CASE WHEN a.owner_shard = $2::integer"
	"   THEN GREATEST(a.owner_epoch, $3::bigint) ELSE $3::bigint END,"
	"  updated_at = now()"
	"  WHERE a.user_id = $1::bigint"
	"   AND (a.owner_shard IS NULL OR a.owner_shard = $2::integer)"
	" RETURNING a.version, a.user_seq, a.tier, a.assets, a.totals,"
	"  (a.version = 0) AS inserted, a.recent, a.xfer_id_max, a.cl_ord_floor, a.egress_seq,"
	"  a.rl_tokens, a.rl_tokens_ns)"
	" SELECT 1, inserted, version, user_seq, tier, assets, totals, NULL::integer, recent,"
	"  xfer_id_max, cl_ord_floor, egress_seq, rl_tokens, rl_tokens_ns FROM claim"
	" UNION ALL"
	" SELECT 0, false, version, user_seq, tier, assets, totals, owner_shard, NULL::bytea,"
	"  NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint"
	"  FROM accounts WHERE user_id = $1::bigint AND NOT EXISTS (SELECT 1 FROM claim)"
	" UNION ALL"
	" SELECT 2, false, NULL::bigint, NULL::bigint, NULL::smallint, NULL::integer[],"
	"  NULL::bigint[], NULL::integer, NULL::bytea, NULL::bigint, NULL::bigint, NULL::bigint,"
	"  NULL::bigint, NULL::bigint"
	"  WHERE NOT EXISTS (SELECT 1 FROM claim)"
	"   AND NOT EXISTS (SELECT 1 FROM accounts WHERE user_id = $1::bigint)";

/* The fenced flush (docs/fencing.md): only while we hold the claim, and only when newer than
 * the claim's stamp (epochs are unique and increasing per shard, so a stale flush of an older
 * incarnation is refused). CAS on version, except that a version ahead of what we expect which
 * our own ledgered flush produced (overtaken by cancel-on-activity) is overwritten by our
 * newer state; any other writer's version is a conflict. A flush already in the ledger
 * (same shard and epoch) never writes twice. It KEEPS the claim (stamping owner_epoch with
 * the flush's epoch) so nobody can hydrate the user while this shard might still serve it;
 * RELEASE_CLAIM lets go. The write is recorded in the ledger under (user, shard, epoch), so
 * a repeat (after failover, after a lost answer) finds its own write even when later
 * flushes have moved the row on. The transfer outcomes the state carries are recorded in the
 * transfers table by the same statement, only when the row is written (so under the same
 * fence), first answer kept (ON CONFLICT DO NOTHING): a transfer id answers the same for its
 * lifetime. Outcome 1 written, 2 our own write already there, 3 conflict (a foreign write, no
 * claim, or a stale epoch). */
static const char SQL_FLUSH[] =
	"WITH up AS ("
	" UPDATE accounts SET user_seq = $5::bigint, tier = $6::smallint,"
	"  assets = $7::integer[], totals = $8::bigint[], recent = $9::bytea,"
	"  xfer_id_max = $15::bigint, cl_ord_floor = $16::bigint, egress_seq = $17::bigint,"
	"  rl_tokens = $18::bigint, rl_tokens_ns = $19::bigint,"
	"  version = version + 1,"
	"  owner_epoch = $4::bigint, last_flush_shard = $3::integer,"
	"  last_flush_epoch = $4::bigint, updated_at = now()"
	" WHERE user_id = $1::bigint AND owner_shard = $3::integer"
	"  AND owner_epoch <= $4::bigint"
	"  AND (version = $2::bigint OR EXISTS (SELECT 1 FROM account_flushes g"
	"   WHERE g.user_id = $1::bigint AND g.shard = $3::integer"
	"    AND g.base_version + 1 = accounts.version))"
	"  AND NOT EXISTS (SELECT 1 FROM account_flushes f WHERE f.user_id = $1::bigint"
	"   AND f.shard = $3::integer AND f.epoch = $4::bigint)"
	" RETURNING version),"
	" led AS ("
	" INSERT INTO account_flushes (user_id, base_version, shard, epoch)"
	" SELECT $1::bigint, version - 1, $3::integer, $4::bigint FROM up),"
	" xfer AS ("
	" INSERT INTO transfers (user_id, transfer_id, asset, amount, reason, total, shard, epoch)"
	" SELECT $1::bigint, t.id, t.asset, t.amount, t.reason, t.total, $3::integer, $4::bigint"
	"  FROM unnest($10::bigint[], $11::integer[], $12::bigint[], $13::smallint[],"
	"   $14::bigint[]) AS t(id, asset, amount, reason, total)"
	"  WHERE EXISTS (SELECT 1 FROM up)"
	" ON CONFLICT (user_id, transfer_id) DO NOTHING)"
	" SELECT 1, version FROM up"
	" UNION ALL"
	" SELECT CASE WHEN EXISTS (SELECT 1 FROM account_flushes f WHERE f.user_id = $1::bigint"
	"   AND f.shard = $3::integer AND f.epoch = $4::bigint)"
	"  THEN 2 ELSE 3 END,"
	"  COALESCE((SELECT version FROM accounts WHERE user_id = $1::bigint), -1)"
	" WHERE NOT EXISTS (SELECT 1 FROM up)";

/* One transfer's recorded outcome (docs/oms.md, "Transfers for their lifetime"): a plain
 * read, no claim needed (every transfer the asking shard applied and has not seen flushed is
 * still pinned in its window). No row: NOT_FOUND. */
static const char SQL_LOOKUP[] =
	"SELECT reason, total, asset, amount FROM transfers"
	" WHERE user_id = $1::bigint AND transfer_id = $2::bigint";

/* Release the claim a flush kept once the shard has dropped the actor, or the claim a
 * hydration the shard gave up may have taken (docs/fencing.md): any claim of this shard
 * stamped with this epoch or an older one (a shard's epochs only grow, and it holds no
 * actor for the user at or below it). Idempotent, and a no-op when the user was hydrated
 * again since (a newer epoch) or was released already. Returns how many rows it released
 * (0 or 1); both answer OK. $4 NULL frees the claim; a shard id hands it to that shard
 * stamped 0 (the last step of a move whose orders that shard adopted: only it may hydrate
 * the user next, and its own epochs then stamp the claim). */
static const char SQL_RELEASE[] =
	"WITH rel AS ("
	" UPDATE accounts SET owner_shard = $4::integer,"
	"  owner_epoch = CASE WHEN $4::integer IS NULL THEN NULL ELSE 0 END, updated_at = now()"
	" WHERE user_id = $1::bigint AND owner_shard = $2::integer AND owner_epoch <= $3::bigint"
	" RETURNING 1)"
	" SELECT count(*) FROM rel";
/* ------------------------------------------------------------------ multi-row groups -- */

/* The same three statements over arrays: a group of consecutive requests of one kind about
 * distinct users (pst_db_batch.c ends a group at a repeated user, so no row is touched twice
 * and the rows are independent of each other) runs as one statement. The input is unnested
 * WITH ORDINALITY into i; every rule of the single-row statement above is applied per input
 * row, joined on ord; the answer is exactly one row per request, ordered by ord: the ord, then
 * the single-row statement's columns, which the same decoders read. Arrays rather than COPY
 * into a staging table: a staging table is DDL (the omsd role has none) or a shared table
 * with a DELETE (it has no DELETE either), and COPY does not run in a pipeline; an array
 * parameter is one more prepared statement, no new privilege (docs/persist.md, "Multi-row
 * statements"). The redundant `user_id = ANY ($1)` bounds the account scan to the group's
 * users whatever the planner guesses of unnest. */

/* Hydrate: $1 users, $2 shards, $3 epochs. A claim that fails reads the holder from the
 * statement's snapshot (NULL there, or ourselves: RETRY, exactly as the single statement's
 * missing row). */
static const char SQL_HYDRATE_N[] =
	"WITH i AS (SELECT * FROM unnest($1::bigint[], $2::integer[], $3::bigint[])"
	"  WITH ORDINALITY AS i(user_id, shard, epoch, ord)),"
	" claim AS ("
	" UPDATE accounts AS a SET owner_shard = i.shard,"
	"  owner_epoch = CASE WHEN a.owner_shard = i.shard"
	"   THEN GREATEST(a.owner_epoch, i.epoch) ELSE i.epoch END,"
	"  updated_at = now()"
	" FROM i"
	" WHERE a.user_id = ANY ($1::bigint[]) AND a.user_id = i.user_id"
	"  AND (a.owner_shard IS NULL OR a.owner_shard = i.shard)"
	" RETURNING a.user_id, a.version, a.user_seq, a.tier, a.assets, a.totals,"
	"  (a.version = 0) AS inserted, a.recent, a.xfer_id_max, a.cl_ord_floor, a.egress_seq,"
	"  a.rl_tokens, a.rl_tokens_ns)"
	" SELECT i.ord, CASE WHEN c.user_id IS NOT NULL THEN 1"
	"  WHEN EXISTS (SELECT 1 FROM accounts s WHERE s.user_id = i.user_id) THEN 0 ELSE 2 END,"
	"  COALESCE(c.inserted, false),"
	"  c.version, c.user_seq, c.tier, c.assets, c.totals,"
	"  CASE WHEN c.user_id IS NULL THEN"
	"   (SELECT s.owner_shard FROM accounts s WHERE s.user_id = i.user_id) END,"
	"  c.recent, c.xfer_id_max, c.cl_ord_floor, c.egress_seq, c.rl_tokens, c.rl_tokens_ns"
	" FROM i LEFT JOIN claim c ON c.user_id = i.user_id"
	" ORDER BY i.ord";

/* Flush: $1 users, $2 expected versions, $3 shards, $4 epochs, $5 user_seq, $6 tiers,
 * $7 assets and $8 totals (text[] whose elements are the integer[] / bigint[] texts of one
 * user), $9 recent windows (text[] of hex without the \x), $10 xfer_id_max, $11
 * cl_ord_floor, $12 egress_seq, $13 rl_tokens, $14 rl_tokens_ns; the transfers of every
 * request flattened into $15 the request's ord, $16..$20 id, asset, amount, reason, total.
 * Per row: SQL_FLUSH's fence, CAS, ledger, transfers and outcome. */
static const char SQL_FLUSH_N[] =
	"WITH i AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::integer[], $4::bigint[],"
	"   $5::bigint[], $6::smallint[], $7::text[], $8::text[], $9::text[], $10::bigint[],"
	"   $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[])"
	"  WITH ORDINALITY AS i(user_id, version, shard, epoch, user_seq, tier, assets, totals,"
	"   recent, xfer_id_max, cl_ord_floor, egress_seq, rl_tokens, rl_tokens_ns, ord)),"
	" up AS ("
	" UPDATE accounts a SET user_seq = i.user_seq, tier = i.tier,"
	"  assets = i.assets::integer[], totals = i.totals::bigint[],"
	"  recent = decode(i.recent, 'hex'), xfer_id_max = i.xfer_id_max,"
	"  cl_ord_floor = i.cl_ord_floor, egress_seq = i.egress_seq,"
	"  rl_tokens = i.rl_tokens, rl_tokens_ns = i.rl_tokens_ns,"
	"  version = a.version + 1, owner_epoch = i.epoch, last_flush_shard = i.shard,"
	"  last_flush_epoch = i.epoch, updated_at = now()"
	" FROM i"
	" WHERE a.user_id = ANY ($1::bigint[]) AND a.user_id = i.user_id"
	"  AND a.owner_shard = i.shard AND a.owner_epoch <= i.epoch"
	"  AND (a.version = i.version OR EXISTS (SELECT 1 FROM account_flushes g"
	"   WHERE g.user_id = i.user_id AND g.shard = i.shard AND g.base_version + 1 = a.version))"
	"  AND NOT EXISTS (SELECT 1 FROM account_flushes f WHERE f.user_id = i.user_id"
	"   AND f.shard = i.shard AND f.epoch = i.epoch)"
	" RETURNING i.ord, a.version, i.user_id, i.shard, i.epoch),"
	" led AS ("
	" INSERT INTO account_flushes (user_id, base_version, shard, epoch)"
	" SELECT up.user_id, up.version - 1, up.shard, up.epoch FROM up),"
	" xfer AS ("
	" INSERT INTO transfers (user_id, transfer_id, asset, amount, reason, total, shard, epoch)"
	" SELECT up.user_id, t.id, t.asset, t.amount, t.reason, t.total, up.shard, up.epoch"
	"  FROM unnest($15::integer[], $16::bigint[], $17::integer[], $18::bigint[],"
	"   $19::smallint[], $20::bigint[]) AS t(ord, id, asset, amount, reason, total)"
	"  JOIN up ON up.ord = t.ord"
	" ON CONFLICT (user_id, transfer_id) DO NOTHING)"
	" SELECT i.ord,"
	"  CASE WHEN up.ord IS NOT NULL THEN 1"
	"   WHEN EXISTS (SELECT 1 FROM account_flushes f WHERE f.user_id = i.user_id"
	"    AND f.shard = i.shard AND f.epoch = i.epoch) THEN 2 ELSE 3 END,"
	"  CASE WHEN up.ord IS NOT NULL THEN up.version"
	"   ELSE COALESCE((SELECT s.version FROM accounts s WHERE s.user_id = i.user_id), -1) END"
	" FROM i LEFT JOIN up ON up.ord = i.ord"
	" ORDER BY i.ord";

/* Release: $1 users, $2 shards, $3 epochs, $4 the shards the claims are handed to (NULL
 * elements: freed). Per row: SQL_RELEASE's rule; 1 released now, 0 nothing to do. */
static const char SQL_RELEASE_N[] =
	"WITH i AS (SELECT * FROM unnest($1::bigint[], $2::integer[], $3::bigint[], $4::integer[])"
	"  WITH ORDINALITY AS i(user_id, shard, epoch, to_shard, ord)),"
	" rel AS ("
	" UPDATE accounts a SET owner_shard = i.to_shard,"
	"  owner_epoch = CASE WHEN i.to_shard IS NULL THEN NULL ELSE 0 END, updated_at = now()"
	" FROM i"
	" WHERE a.user_id = ANY ($1::bigint[]) AND a.user_id = i.user_id"
	"  AND a.owner_shard = i.shard AND a.owner_epoch <= i.epoch"
	" RETURNING i.ord)"
	" SELECT i.ord, CASE WHEN rel.ord IS NULL THEN 0 ELSE 1 END"
	" FROM i LEFT JOIN rel ON rel.ord = i.ord"
	" ORDER BY i.ord";

const struct pst_sql_stmt pst_sql_group_stmts[PST_GROUP_KINDS] = {
	[PST_REQ_HYDRATE - 1] = {.name = "pst_hydrate_n", .text = SQL_HYDRATE_N},
	[PST_REQ_FLUSH - 1] = {.name = "pst_flush_n", .text = SQL_FLUSH_N},
	[PST_REQ_RELEASE - 1] = {.name = "pst_release_n", .text = SQL_RELEASE_N},
};

const struct pst_sql_stmt pst_sql_stmts[PST_REQ_KINDS] = {
	[PST_REQ_HYDRATE - 1] = {.name = "pst_hydrate", .text = SQL_HYDRATE},
	[PST_REQ_FLUSH - 1] = {.name = "pst_flush", .text = SQL_FLUSH},
	[PST_REQ_RELEASE - 1] = {.name = "pst_release", .text = SQL_RELEASE},
	[PST_REQ_LOOKUP - 1] = {.name = "pst_lookup", .text = SQL_LOOKUP},
};

/* ------------------------------------------------------------------------- parameters -- */

static const char *
fmt_i64(char *buf, size_t size, int64_t v)
{
	int n = snprintf(buf, size, "%" PRId64, v);
	DCHECK(n > 0);
	DCHECK((size_t)n < size);
	return buf;
}

/* The balances as two arrays in text form, "{1,2,3}": assets ($7) and totals ($8). */
static void
fmt_balances(struct pst_sql_params *p, const struct wire_user_state *us)
{
	size_t a = 0, t = 0;
	p->assets[a++] = '{';
	p->totals[t++] = '{';
	for (uint32_t k = 0; k < us->balance_count; k++) {
		int n = snprintf(p->assets + a, sizeof(p->assets) - a, "%s%" PRIu32, k ? "," : "",
				 us->balances[k].asset);
		DCHECK(n > 0);
		a += (size_t)n;
		n = snprintf(p->totals + t, sizeof(p->totals) - t, "%s%" PRId64, k ? "," : "",
			     us->balances[k].total);
		DCHECK(n > 0);
		t += (size_t)n;
	}
	DCHECK(a + 2 <= sizeof(p->assets));
	DCHECK(t + 2 <= sizeof(p->totals));
	p->assets[a++] = '}';
	p->assets[a] = '\0';
	p->totals[t++] = '}';
	p->totals[t] = '\0';
}

/* bytea in hex text form: \x then two digits a byte; only the valid entries. */
static void
fmt_recent(struct pst_sql_params *p, const struct wire_user_state *us)
{
	static const char hex[] = "0123456789abcdef";
	uint32_t rc = us->recent_count <= WIRE_RECENT_MAX ? us->recent_count : 0;
	const uint8_t *rb = (const uint8_t *)us->recent;
	size_t rn = 0;
	p->recent[rn++] = '\\';
	p->recent[rn++] = 'x';
	for (size_t k = 0; k < rc * sizeof(struct wire_recent); k++) {
		p->recent[rn++] = hex[rb[k] >> 4];
		p->recent[rn++] = hex[rb[k] & 15];
	}
	DCHECK(rn < sizeof(p->recent));
	p->recent[rn] = '\0';
}

/* Append ",v" (or "v" first) to an array text under construction at *n. */
static void
arr_add(char *buf, size_t size, size_t *n, bool first, int64_t v)
{
	int k = snprintf(buf + *n, size - *n, "%s%" PRId64, first ? "" : ",", v);
	DCHECK(k > 0);
	DCHECK(*n + (size_t)k + 2 <= size);
	*n += (size_t)k;
}

/* The transfer outcomes among recent[] as five arrays ($10..$14), one element each. A
 * transfer id is stored as the bigint of the same 64 bits. */
static void
fmt_transfers(struct pst_sql_params *p, const struct wire_user_state *us)
{
	char *bufs[5] = { p->xfer_ids, p->xfer_assets, p->xfer_amounts, p->xfer_reasons,
			  p->xfer_totals };
	size_t sizes[5] = { sizeof(p->xfer_ids), sizeof(p->xfer_assets), sizeof(p->xfer_amounts),
			    sizeof(p->xfer_reasons), sizeof(p->xfer_totals) };
	size_t n[5];
	for (int c = 0; c < 5; c++) {
		bufs[c][0] = '{';
		n[c] = 1;
	}
	uint32_t rc = us->recent_count <= WIRE_RECENT_MAX ? us->recent_count : 0;
	bool first = true;
	for (uint32_t k = 0; k < rc; k++) {
		const struct wire_recent *r = &us->recent[k];
		if (r->kind != WIRE_RECENT_TRANSFER)
			continue;
		int64_t v[5] = { (int64_t)r->id, r->asset, r->amount, r->reason, (int64_t)r->user_seq };
		for (int c = 0; c < 5; c++)
			arr_add(bufs[c], sizes[c], &n[c], first, v[c]);
		first = false;
	}
	for (int c = 0; c < 5; c++) {
		bufs[c][n[c]++] = '}';
		bufs[c][n[c]] = '\0';
	}
}

void
pst_sql_encode_release(struct pst_sql_params *p, uint64_t user, uint16_t shard, uint64_t epoch,
		       bool handoff, uint16_t to_shard)
{
	pst_sql_encode(p, PST_REQ_RELEASE, user, shard, epoch, NULL);
	/* $4: the claim's next holder (a move's handoff, docs/fencing.md), or NULL: freed. */
	if (handoff)
		p->values[3] = fmt_i64(p->num[3], sizeof(p->num[3]), to_shard);
}

void
pst_sql_encode_lookup(struct pst_sql_params *p, uint64_t user, uint64_t transfer_id)
{
	CHECK(p != NULL);
	DCHECK(user <= INT64_MAX);
	p->stmt = pst_sql_stmts[PST_REQ_LOOKUP - 1].name;
	p->values[0] = fmt_i64(p->num[0], sizeof(p->num[0]), (int64_t)user);
	p->values[1] = fmt_i64(p->num[1], sizeof(p->num[1]), (int64_t)transfer_id);
	p->count = 2;
}

void
pst_sql_encode(struct pst_sql_params *p, uint8_t kind, uint64_t user, uint16_t shard,
	       uint64_t epoch, const struct wire_user_state *us)
{
	CHECK(p != NULL);
	CHECK(kind >= PST_REQ_HYDRATE);
	CHECK(kind <= PST_REQ_RELEASE); /* a lookup: pst_sql_encode_lookup */
	DCHECK(user <= INT64_MAX);
	DCHECK(epoch <= INT64_MAX);
	p->stmt = pst_sql_stmts[kind - 1].name;
	p->values[0] = fmt_i64(p->num[0], sizeof(p->num[0]), (int64_t)user);
	if (kind == PST_REQ_HYDRATE || kind == PST_REQ_RELEASE) {
		/* $1 user, $2 shard, $3 epoch; a release's $4 (the handoff) NULL: freed */
		p->values[1] = fmt_i64(p->num[1], sizeof(p->num[1]), shard);
		p->values[2] = fmt_i64(p->num[2], sizeof(p->num[2]), (int64_t)epoch);
		p->values[3] = NULL;
		p->count = kind == PST_REQ_RELEASE ? 4 : 3;
		return;
	}
	CHECK(us != NULL);
	DCHECK(us->balance_count <= WIRE_BALANCES_MAX);
	/* $1 user, $2 expected version, $3 shard, $4 epoch, $5 user_seq, $6 tier, $7 assets,
	 * $8 totals, $9 recent */
	p->values[1] = fmt_i64(p->num[1], sizeof(p->num[1]), (int64_t)us->version);
	p->values[2] = fmt_i64(p->num[2], sizeof(p->num[2]), shard);
	p->values[3] = fmt_i64(p->num[3], sizeof(p->num[3]), (int64_t)epoch);
	p->values[4] = fmt_i64(p->num[4], sizeof(p->num[4]), (int64_t)us->user_seq);
	p->values[5] = fmt_i64(p->num[5], sizeof(p->num[5]), us->tier);
	fmt_balances(p, us);
	fmt_recent(p, us);
	fmt_transfers(p, us);
	p->values[6] = p->assets;
	p->values[7] = p->totals;
	p->values[8] = p->recent;
	p->values[9] = p->xfer_ids;
	p->values[10] = p->xfer_assets;
	p->values[11] = p->xfer_amounts;
	p->values[12] = p->xfer_reasons;
	p->values[13] = p->xfer_totals;
	p->values[14] = fmt_i64(p->num[6], sizeof(p->num[6]), (int64_t)us->xfer_id_max);
	p->values[15] = fmt_i64(p->num[7], sizeof(p->num[7]), (int64_t)us->cl_ord_floor);
	p->values[16] = fmt_i64(p->num[8], sizeof(p->num[8]), (int64_t)us->egress_seq);
	p->values[17] = fmt_i64(p->num[9], sizeof(p->num[9]), us->rl_tokens);
	DCHECK(us->rl_tokens_ns <= INT64_MAX); /* pst_db_submit refused more */
	p->values[18] = fmt_i64(p->num[10], sizeof(p->num[10]), (int64_t)us->rl_tokens_ns);
	p->count = 19;
	static_assert(PST_SQL_PARAMS_MAX == 19, "the flush has nineteen parameters");
	static_assert(PST_SQL_NUMS == 11, "the flush's numeric parameters");
}

/* ------------------------------------------------------------- group parameters -- */

/* An array text under construction in the group's buffer. Running past the buffer is a
 * programmer error (pst_sql_group_size sized it for the worst case): CHECK. */
struct sbuf {
	char *p;     /* the buffer */
	size_t n;    /* bytes written */
	size_t size; /* capacity */
};

static inline void
put_c(struct sbuf *b, char c)
{
	CHECK(b->n < b->size);
	b->p[b->n++] = c;
}

/* A decimal integer, without snprintf: a group of 256 flushes formats some 8,000 of them. */
static void
put_i64(struct sbuf *b, int64_t v)
{
	char tmp[20];
	int n = 0;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		put_c(b, '-');
	while (n > 0)
		put_c(b, tmp[--n]);
}

/* Open the array text of parameter k: '{', and the parameter points at it. */
static void
col_open(struct pst_sql_group *g, struct sbuf *b, uint32_t k)
{
	DCHECK(k < PST_SQL_GROUP_PARAMS_MAX);
	g->values[k] = b->p + b->n;
	put_c(b, '{');
}

static void
col_close(struct sbuf *b)
{
	put_c(b, '}');
	put_c(b, '\0');
}

/* One bigint[] / integer[] / smallint[] parameter: element r is value(items[r]). */
#define COL_INTS(g, b, k, items, count, expr)                                              \
	do {                                                                               \
		col_open((g), (b), (k));                                                   \
		for (uint32_t r_ = 0; r_ < (count); r_++) {                                \
			const struct pst_sql_item *it = &(items)[r_];                      \
			if (r_ > 0)                                                        \
				put_c((b), ',');                                           \
			put_i64((b), (int64_t)(expr));                                     \
		}                                                                          \
		col_close(b);                                                              \
	} while (0)

/* Balances of every item as a text[] whose elements are one user's integer[] (assets) or
 * bigint[] (totals) text: {"{1,2}","{}"}. */
static void
col_balances(struct pst_sql_group *g, struct sbuf *b, uint32_t k,
	     const struct pst_sql_item *items, uint32_t count, bool totals)
{
	col_open(g, b, k);
	for (uint32_t r = 0; r < count; r++) {
		const struct wire_user_state *us = items[r].us;
		if (r > 0)
			put_c(b, ',');
		put_c(b, '"');
		put_c(b, '{');
		for (uint32_t j = 0; j < us->balance_count; j++) {
			if (j > 0)
				put_c(b, ',');
			put_i64(b, totals ? us->balances[j].total : (int64_t)us->balances[j].asset);
		}
		put_c(b, '}');
		put_c(b, '"');
	}
	col_close(b);
}

/* The idempotency windows as a text[] of hex (decode(x, 'hex') in the statement): only the
 * valid entries, "" for none. */
static void
col_recent(struct pst_sql_group *g, struct sbuf *b, uint32_t k,
	   const struct pst_sql_item *items, uint32_t count)
{
	static const char hex[] = "0123456789abcdef";
	col_open(g, b, k);
	for (uint32_t r = 0; r < count; r++) {
		const struct wire_user_state *us = items[r].us;
		uint32_t rc = us->recent_count <= WIRE_RECENT_MAX ? us->recent_count : 0;
		const uint8_t *rb = (const uint8_t *)us->recent;
		if (r > 0)
			put_c(b, ',');
		put_c(b, '"');
		for (size_t j = 0; j < rc * sizeof(struct wire_recent); j++) {
			put_c(b, hex[rb[j] >> 4]);
			put_c(b, hex[rb[j] & 15]);
		}
		put_c(b, '"');
	}
	col_close(b);
}

/* Column c of the transfers of every item, flattened: 0 the item's ord (1-based), 1 id (the
 * bigint of the same bits), 2 asset, 3 amount, 4 reason, 5 total. */
static void
col_transfers(struct pst_sql_group *g, struct sbuf *b, uint32_t k,
	      const struct pst_sql_item *items, uint32_t count, int c)
{
	col_open(g, b, k);
	bool first = true;
	for (uint32_t r = 0; r < count; r++) {
		const struct wire_user_state *us = items[r].us;
		uint32_t rc = us->recent_count <= WIRE_RECENT_MAX ? us->recent_count : 0;
		for (uint32_t j = 0; j < rc; j++) {
			const struct wire_recent *e = &us->recent[j];
			if (e->kind != WIRE_RECENT_TRANSFER)
				continue;
			int64_t v[6] = { (int64_t)r + 1, (int64_t)e->id, e->asset, e->amount,
					 e->reason, (int64_t)e->user_seq };
			if (!first)
				put_c(b, ',');
			put_i64(b, v[c]);
			first = false;
		}
	}
	col_close(b);
}

size_t
pst_sql_group_size(uint32_t rows_max)
{
	static_assert(sizeof(struct wire_recent) == 32, "PST_SQL_GROUP_ROW_BYTES: 64 hex digits");
	return (size_t)rows_max * PST_SQL_GROUP_ROW_BYTES + PST_SQL_GROUP_PARAMS_MAX * 4;
}

void
pst_sql_encode_group(struct pst_sql_group *g, uint8_t kind, const struct pst_sql_item *items,
		     uint32_t count)
{
	CHECK(g != NULL);
	CHECK(items != NULL);
	CHECK(count >= 1);
	CHECK(count <= g->rows_max);
	CHECK(kind >= PST_REQ_HYDRATE);
	CHECK(kind <= PST_REQ_RELEASE);
	struct sbuf b = {.p = g->buf, .n = 0, .size = pst_sql_group_size(g->rows_max)};
	g->stmt = pst_sql_group_stmts[kind - 1].name;
	g->rows = count;
	for (uint32_t r = 0; r < count; r++) {
		DCHECK(items[r].user <= INT64_MAX);
		DCHECK(items[r].epoch <= INT64_MAX);
		DCHECK(kind != PST_REQ_FLUSH || items[r].us != NULL);
	}
	COL_INTS(g, &b, 0, items, count, it->user);
	if (kind == PST_REQ_HYDRATE || kind == PST_REQ_RELEASE) {
		/* $1 users, $2 shards, $3 epochs; a release's $4 next holders (NULL: freed) */
		COL_INTS(g, &b, 1, items, count, it->shard);
		COL_INTS(g, &b, 2, items, count, it->epoch);
		g->count = 3;
		if (kind == PST_REQ_RELEASE) {
			col_open(g, &b, 3);
			for (uint32_t r = 0; r < count; r++) {
				if (r > 0)
					put_c(&b, ',');
				if (items[r].handoff) {
					put_i64(&b, items[r].to_shard);
				} else {
					put_c(&b, 'N');
					put_c(&b, 'U');
					put_c(&b, 'L');
					put_c(&b, 'L');
				}
			}
			col_close(&b);
			g->count = 4;
		}
		return;
	}
	/* The flush: as SQL_FLUSH_N lists them. */
	COL_INTS(g, &b, 1, items, count, it->us->version);
	COL_INTS(g, &b, 2, items, count, it->shard);
	COL_INTS(g, &b, 3, items, count, it->epoch);
	COL_INTS(g, &b, 4, items, count, it->us->user_seq);
	COL_INTS(g, &b, 5, items, count, it->us->tier);
	col_balances(g, &b, 6, items, count, false);
	col_balances(g, &b, 7, items, count, true);
	col_recent(g, &b, 8, items, count);
	COL_INTS(g, &b, 9, items, count, it->us->xfer_id_max);
	COL_INTS(g, &b, 10, items, count, it->us->cl_ord_floor);
	COL_INTS(g, &b, 11, items, count, it->us->egress_seq);
	COL_INTS(g, &b, 12, items, count, it->us->rl_tokens);
	COL_INTS(g, &b, 13, items, count, it->us->rl_tokens_ns);
	for (int c = 0; c < 6; c++)
		col_transfers(g, &b, 14 + (uint32_t)c, items, count, c);
	g->count = 20;
	static_assert(PST_SQL_GROUP_PARAMS_MAX == 20, "the group flush has twenty parameters");
}

/* ------------------------------------------------------------------------------- rows -- */

/* The column's text is exactly s (SQL NULL is nothing). */
static bool
col_is(const struct pst_sql_row *row, uint32_t k, const char *s)
{
	DCHECK(k < row->col_count);
	return row->cols[k] != NULL && strcmp(row->cols[k], s) == 0;
}

/* A decimal integer filling the whole text; SQL NULL is none. */
static bool
parse_i64(const char *s, int64_t *out)
{
	if (s == NULL)
		return false;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0')
		return false;
	*out = v;
	return true;
}

/* Parse a text array "{1,2,3}" of integers into out (at most max). Count or -1. */
static int
parse_array(const char *s, int64_t *out, int max)
{
	if (s == NULL || s[0] != '{')
		return -1;
	s++;
	int n = 0;
	if (*s == '}')
		return s[1] == '\0' ? 0 : -1;
	for (;;) {
		if (n == max)
			return -1;
		char *end;
		errno = 0;
		long long v = strtoll(s, &end, 10);
		if (errno != 0 || end == s)
			return -1;
		out[n++] = v;
		if (*end == ',') {
			s = end + 1;
		} else if (*end == '}' && end[1] == '\0') {
			return n;
		} else {
			return -1;
		}
	}
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The balances: columns 5 (assets) and 6 (totals), arrays of one length. */
static bool
decode_balances(const struct pst_sql_row *row, struct wire_user_state *us)
{
	int64_t assets[WIRE_BALANCES_MAX], totals[WIRE_BALANCES_MAX];
	int na = parse_array(row->cols[5], assets, WIRE_BALANCES_MAX);
	int nt = parse_array(row->cols[6], totals, WIRE_BALANCES_MAX);
	if (na < 0 || na != nt)
		return false; /* more balances than a wire state carries, ... */
	us->balance_count = (uint32_t)na;
	for (int k = 0; k < na; k++) {
		if (assets[k] <= 0 || assets[k] > INT32_MAX || totals[k] < 0)
			return false;
		us->balances[k].asset = (uint32_t)assets[k];
		us->balances[k].total = totals[k];
	}
	return true;
}

/* The idempotency window: column 8, packed wire_recent entries, bytea in hex text form. */
static bool
decode_recent(const struct pst_sql_row *row, struct wire_user_state *us)
{
	const char *rt = row->cols[8];
	if (rt == NULL)
		return false;
	size_t rl = strlen(rt);
	if (rl < 2 || rt[0] != '\\' || rt[1] != 'x' ||
	    (rl - 2) % (2 * sizeof(struct wire_recent)) != 0 || (rl - 2) / 2 > sizeof(us->recent))
		return false;
	uint8_t *rb = (uint8_t *)us->recent;
	for (size_t k = 0; k < (rl - 2) / 2; k++) {
		int hi = hexval(rt[2 + 2 * k]), lo = hexval(rt[3 + 2 * k]);
		if (hi < 0 || lo < 0)
			return false;
		rb[k] = (uint8_t)(hi << 4 | lo);
	}
	us->recent_count = (uint32_t)((rl - 2) / 2 / sizeof(struct wire_recent));
	for (uint32_t k = 0; k < us->recent_count; k++) {
		const struct wire_recent *e = &us->recent[k];
		if (e->kind < WIRE_RECENT_ORDER || e->kind > WIRE_RECENT_TRANSFER ||
		    e->reason >= WIRE_REASON_MAX || e->reserved != 0)
			return false;
		if (e->kind == WIRE_RECENT_ORDER && (e->asset != 0 || e->amount != 0))
			return false;
	}
	return true;
}

enum pst_outcome
pst_sql_hydrate_decode(const struct pst_sql_row *row, uint64_t user, uint16_t shard,
		       struct wire_user_state *us, uint16_t *owner, uint8_t *is_new)
{
	CHECK(row != NULL);
	CHECK(us != NULL);
	CHECK(owner != NULL);
	CHECK(is_new != NULL);
	if (!row->present || row->col_count != 14) {
		/* No row: the row changed between our snapshot and the claim. Ask again. */
		return PST_OUT_HYD_RETRY;
	}
	static_assert(PST_SQL_COLS_MAX >= 14, "the hydrate's columns");
	if (col_is(row, 0, "2"))
		return PST_OUT_HYD_UNKNOWN; /* no account: the operator creates them */
	if (!col_is(row, 0, "1")) {
		int64_t holder;
		if (!parse_i64(row->cols[7], &holder) || holder == shard)
			return PST_OUT_HYD_RETRY; /* raced a release or our own claim */
		if (holder < 0 || holder > UINT16_MAX)
			return PST_OUT_BAD_ROW; /* no shard has that id: never name a wrong owner */
		*owner = (uint16_t)holder;
		return PST_OUT_HYD_OWNED;
	}
	int64_t version, seq, tier, xmax, floor, egress, tokens, tokens_ns;
	if (!parse_i64(row->cols[2], &version) || !parse_i64(row->cols[3], &seq) ||
	    !parse_i64(row->cols[4], &tier) || !parse_i64(row->cols[9], &xmax) ||
	    !parse_i64(row->cols[10], &floor) || !parse_i64(row->cols[11], &egress) ||
	    !parse_i64(row->cols[12], &tokens) || !parse_i64(row->cols[13], &tokens_ns))
		return PST_OUT_BAD_ROW;
	/* Any rl_tokens goes (the OMS clamps it to the tier's burst); a time before 0 is no
	 * cluster time and would read as one far ahead. */
	if (version < 0 || seq < 0 || tier < 0 || tier > UINT8_MAX || tokens_ns < 0)
		return PST_OUT_BAD_ROW;
	memset(us, 0, sizeof(*us));
	us->user = user;
	us->version = (uint64_t)version;
	us->user_seq = (uint64_t)seq;
	us->tier = (uint8_t)tier;
	us->xfer_id_max = (uint64_t)xmax; /* stored as the bigint of the same bits */
	us->cl_ord_floor = (uint64_t)floor; /* likewise */
	us->egress_seq = (uint64_t)egress;  /* likewise */
	us->rl_tokens = tokens;
	us->rl_tokens_ns = (uint64_t)tokens_ns;
	if (!decode_balances(row, us) || !decode_recent(row, us))
		return PST_OUT_BAD_ROW;
	*is_new = col_is(row, 1, "t");
	DCHECK(us->balance_count <= WIRE_BALANCES_MAX);
	DCHECK(us->recent_count <= WIRE_RECENT_MAX);
	return PST_OUT_HYD_CLAIMED;
}

enum pst_outcome
pst_sql_flush_decode(const struct pst_sql_row *row, uint64_t base_version, uint64_t *version)
{
	CHECK(row != NULL);
	CHECK(version != NULL);
	int64_t outcome, v;
	if (!row->present || row->col_count != 2 || !parse_i64(row->cols[0], &outcome) ||
	    !parse_i64(row->cols[1], &v))
		return PST_OUT_FAILED_RETRY;
	*version = v < 0 ? 0 : (uint64_t)v;
	if (outcome == 1)
		return PST_OUT_FLUSH_WRITTEN;
	if (outcome == 2) {
		*version = base_version + 1; /* the version our write produced */
		return PST_OUT_FLUSH_REPEAT;
	}
	return PST_OUT_FLUSH_CONFLICT;
}

enum pst_outcome
pst_sql_release_decode(const struct pst_sql_row *row)
{
	CHECK(row != NULL);
	int64_t n;
	if (!row->present || row->col_count != 1 || !parse_i64(row->cols[0], &n))
		return PST_OUT_FAILED_RETRY;
	return n > 0 ? PST_OUT_RELEASED : PST_OUT_RELEASE_NOOP;
}

enum pst_outcome
pst_sql_lookup_decode(const struct pst_sql_row *row, uint64_t transfer_id,
		      struct wire_recent *rec)
{
	CHECK(row != NULL);
	CHECK(rec != NULL);
	if (row->col_count != 4)
		return PST_OUT_FAILED_RETRY;
	if (!row->present)
		return PST_OUT_XFER_NOT_FOUND;
	int64_t reason, total, asset, amount;
	if (!parse_i64(row->cols[0], &reason) || !parse_i64(row->cols[1], &total) ||
	    !parse_i64(row->cols[2], &asset) || !parse_i64(row->cols[3], &amount))
		return PST_OUT_BAD_ROW;
	if (reason < 0 || reason >= WIRE_REASON_MAX || asset < 0 || asset > INT32_MAX)
		return PST_OUT_BAD_ROW;
	memset(rec, 0, sizeof(*rec));
	rec->id = transfer_id;
	rec->kind = WIRE_RECENT_TRANSFER;
	rec->reason = (uint16_t)reason;
	rec->user_seq = (uint64_t)total;
	rec->asset = (uint32_t)asset;
	rec->amount = amount;
	return PST_OUT_XFER_FOUND;
}

bool
pst_sql_group_ord_is(const char *text, uint32_t ord)
{
	int64_t v;
	return parse_i64(text, &v) && v == (int64_t)ord;
}

bool
pst_sql_permanent(const char *state)
{
	if (state == NULL || strlen(state) != 5)
		return false;
	return strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0 ||
	       strncmp(state, "42", 2) == 0 || strncmp(state, "2B", 2) == 0 ||
	       strncmp(state, "44", 2) == 0;
}

/* ------------------------------------------------------------------- schema version -- */

const char pst_sql_schema_query[] =
	"SELECT max(version), count(*) FILTER (WHERE version <= '" PST_SCHEMA_VERSION "') "
	"FROM schema_migrations";

bool
pst_sql_schema_ok(const char *newest, const char *count, char *why, size_t cap)
{
	int64_t n = 0;
	if (newest == NULL) {
		snprintf(why, cap, "database schema: no migration applied (this omsd needs %s): "
			 "run deploy/pg/migrate", PST_SCHEMA_VERSION);
		return false;
	}
	if (strcmp(newest, PST_SCHEMA_VERSION) > 0) {
		snprintf(why, cap, "database schema is at %.64s, newer than this omsd knows (%s): "
			 "run the omsd built for it", newest, PST_SCHEMA_VERSION);
		return false;
	}
	if (strcmp(newest, PST_SCHEMA_VERSION) != 0 || count == NULL || !parse_i64(count, &n) ||
	    n != PST_SCHEMA_COUNT) {
		snprintf(why, cap, "database schema lacks migrations this omsd needs: newest "
			 "applied %.64s, %lld of the %d up to %s: run deploy/pg/migrate",
			 newest, (long long)n, PST_SCHEMA_COUNT, PST_SCHEMA_VERSION);
		return false;
	}
	return true;
}

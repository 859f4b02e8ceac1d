/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the decoding of PostgreSQL answer rows (persist/pst_db_sql.c): the
 * hydrate's row (claim flag, version, user_seq, tier, assets integer[], totals bigint[],
 * owner shard, recent bytea in hex, the highest transfer id, the clientOrderId floor, the
 * report sequence, the rate-limit bucket and its time) and the flush's and release's, as
 * libpq's text columns.
 * No connection: the decoders take plain strings.
 *
 * Byte 0: bits 0-1 pick the statement (hydrate, flush, release), bit 2 says the result held
 * no row. The rest is the columns, separated by NUL bytes; a column "\N" is SQL NULL.
 * Properties: no decoder crashes or reads past a column; a claimed hydrate yields a state
 * the flush would accept (user, version and user_seq within bigint, every balance with a
 * positive asset below 2^31 and a non-negative total, at most WIRE_BALANCES_MAX balances and
 * WIRE_RECENT_MAX recent entries of known kinds, the bucket's time within bigint) and encodes back (pst_sql_encode, the
 * flush's parameters) into columns that decode to the very same state, and the multi-row
 * flush (pst_sql_encode_group, the state twice in a group of two) carries each element exactly
 * as the single-row flush does; an OWNED answer names a shard other than ours, the one the row
 * names; UNKNOWN (no account) comes only from a whole row whose first column is 2.
 */
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "persist/pst_db_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define USER 77
#define SHARD 3

static void group_matches(const struct wire_user_state *us, const struct pst_sql_params *p);

static void
claimed(const struct wire_user_state *us, bool is_new)
{
	CHECK(us->user == USER && us->version < INT64_MAX && us->user_seq <= INT64_MAX);
	CHECK(us->rl_tokens_ns <= INT64_MAX);
	CHECK(us->balance_count <= WIRE_BALANCES_MAX && us->recent_count <= WIRE_RECENT_MAX);
	for (uint32_t k = 0; k < us->balance_count; k++)
		CHECK(us->balances[k].asset > 0 && us->balances[k].asset <= INT32_MAX &&
		      us->balances[k].total >= 0);
	/* What the flush writes is what the next hydrate reads. */
	static struct pst_sql_params p;
	pst_sql_encode(&p, PST_REQ_FLUSH, USER, SHARD, 9, us);
	struct pst_sql_row row = {.present = true, .col_count = 14,
				  .cols = {"1", is_new ? "t" : "f", p.values[1], p.values[4],
					   p.values[5], p.values[6], p.values[7], NULL,
					   p.values[8], p.values[14], p.values[15], p.values[16],
					   p.values[17], p.values[18]}};
	struct wire_user_state again;
	uint16_t owner = 0;
	uint8_t again_new = 0;
	CHECK(pst_sql_hydrate_decode(&row, USER, SHARD, &again, &owner, &again_new) ==
	      PST_OUT_HYD_CLAIMED);
	CHECK(memcmp(&again, us, sizeof(again)) == 0 && again_new == is_new);
	group_matches(us, &p);
}

/* Array text {a,a} of the single-row parameter text a (two group rows of one state). */
static void
check_pair(const char *group, const char *single, bool quoted)
{
	char want[4096];
	const char *q = quoted ? "\"" : "";
	int n = snprintf(want, sizeof(want), "{%s%s%s,%s%s%s}", q, single, q, q, single, q);
	CHECK(n > 0 && (size_t)n < sizeof(want));
	CHECK(strcmp(group, want) == 0);
}

/* Array text of a flattened transfers column for two rows of one state: the single-row
 * array's elements twice (or, for the ord column, its count of 1s then of 2s). */
static void
check_transfers(const char *group, const char *single, int ord)
{
	char want[4096];
	size_t w = 0;
	want[w++] = '{';
	for (int r = 1; r <= 2; r++) {
		if (strcmp(single, "{}") == 0)
			break;
		if (w > 1)
			want[w++] = ',';
		if (ord == 0) {
			size_t len = strlen(single) - 2;
			memcpy(want + w, single + 1, len);
			w += len;
		} else {
			for (const char *c = single + 1; *c != '\0'; c++) {
				if (*c == ',' || *c == '}') {
					want[w++] = (char)('0' + r);
					if (*c == ',')
						want[w++] = ',';
				}
			}
		}
	}
	want[w++] = '}';
	want[w] = '\0';
	CHECK(strcmp(group, want) == 0);
}

/* The multi-row flush of a group of two (the state twice) carries what the single-row flush
 * carries, element for element. */
static void
group_matches(const struct wire_user_state *us, const struct pst_sql_params *p)
{
	static char buf[2 * PST_SQL_GROUP_ROW_BYTES + PST_SQL_GROUP_PARAMS_MAX * 4];
	CHECK(pst_sql_group_size(2) <= sizeof(buf));
	struct pst_sql_group g = {.buf = buf, .rows_max = 2};
	struct pst_sql_item items[2] = {
		{.user = USER, .epoch = 9, .shard = SHARD, .us = us},
		{.user = USER, .epoch = 9, .shard = SHARD, .us = us},
	};
	pst_sql_encode_group(&g, PST_REQ_FLUSH, items, 2);
	CHECK(g.count == PST_SQL_GROUP_PARAMS_MAX);
	CHECK(g.rows == 2);
	/* user, version, shard, epoch, user_seq, tier */
	for (int k = 0; k < 6; k++)
		check_pair(g.values[k], p->values[k], false);
	check_pair(g.values[6], p->values[6], true); /* assets */
	check_pair(g.values[7], p->values[7], true); /* totals */
	CHECK(strncmp(p->values[8], "\\x", 2) == 0);
	check_pair(g.values[8], p->values[8] + 2, true); /* recent, hex without \x */
	/* xfer_id_max, cl_ord_floor, egress_seq, rl_tokens, rl_tokens_ns */
	for (int k = 0; k < 5; k++)
		check_pair(g.values[9 + k], p->values[14 + k], false);
	check_transfers(g.values[14], p->values[9], 1);
	for (int k = 0; k < 5; k++)
		check_transfers(g.values[15 + k], p->values[9 + k], 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	/* Each column an exact-size heap string: ASan sees a read past its NUL. */
	char *cols[PST_SQL_COLS_MAX] = {0};
	struct pst_sql_row row = {.present = !(data[0] & 4)};
	size_t pos = 1;
	while (pos <= size && row.col_count < PST_SQL_COLS_MAX) {
		const uint8_t *end = memchr(data + pos, 0, size - pos);
		size_t n = end != NULL ? (size_t)(end - (data + pos)) : size - pos;
		char *c = malloc(n + 1);
		CHECK(c != NULL);
		memcpy(c, data + pos, n);
		c[n] = '\0';
		cols[row.col_count] = c;
		row.cols[row.col_count] = strcmp(c, "\\N") == 0 ? NULL : c;
		row.col_count++;
		pos += n + 1;
	}
	switch (data[0] & 3) {
	case 0: {
		struct wire_user_state us;
		uint16_t owner = 0;
		uint8_t is_new = 0;
		enum pst_outcome o = pst_sql_hydrate_decode(&row, USER, SHARD, &us, &owner, &is_new);
		CHECK(o == PST_OUT_HYD_CLAIMED || o == PST_OUT_HYD_OWNED || o == PST_OUT_HYD_RETRY ||
		      o == PST_OUT_HYD_UNKNOWN || o == PST_OUT_BAD_ROW);
		/* No account: only the statement's third branch says so, a row of 14 columns
		 * whose first is 2 (docs/security.md, "No account from nowhere"). */
		if (o == PST_OUT_HYD_UNKNOWN)
			CHECK(row.present && row.col_count == 14 && row.cols[0] != NULL &&
			      strcmp(row.cols[0], "2") == 0);
		if (o == PST_OUT_HYD_CLAIMED)
			claimed(&us, is_new);
		if (o == PST_OUT_HYD_OWNED) {
			CHECK(owner != SHARD);
			CHECK(row.cols[7] != NULL && strtoll(row.cols[7], NULL, 10) == owner);
		}
		break;
	}
	case 1: {
		uint64_t version = 0;
		enum pst_outcome o = pst_sql_flush_decode(&row, 41, &version);
		CHECK(o == PST_OUT_FLUSH_WRITTEN || o == PST_OUT_FLUSH_REPEAT ||
		      o == PST_OUT_FLUSH_CONFLICT || o == PST_OUT_FAILED_RETRY);
		if (o == PST_OUT_FLUSH_REPEAT)
			CHECK(version == 42);
		break;
	}
	default: {
		enum pst_outcome o = pst_sql_release_decode(&row);
		CHECK(o == PST_OUT_RELEASED || o == PST_OUT_RELEASE_NOOP ||
		      o == PST_OUT_FAILED_RETRY);
		(void)pst_sql_permanent(row.col_count > 0 ? row.cols[0] : NULL);
		/* The same columns as the schema version row: only the exact version passes. */
		char why[256];
		if (pst_sql_schema_ok(row.col_count > 0 ? row.cols[0] : NULL,
				      row.col_count > 1 ? row.cols[1] : NULL, why, sizeof(why)))
			CHECK(strcmp(row.cols[0], PST_SCHEMA_VERSION) == 0);
		else
			CHECK(why[0] != '\0' && strlen(why) < sizeof(why));
		break;
	}
	}
	for (uint32_t k = 0; k < row.col_count; k++)
		free(cols[k]);
	return 0;
}

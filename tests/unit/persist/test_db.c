/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hydration and fenced flush against a real PostgreSQL (run-with-pg starts a throwaway one
 * and exports PST_TEST_CONNINFO). Each test uses its own user ids.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <libpq-fe.h>

#include "persist/persist.h"
#include "persist/pst_db_int.h" /* pst_sql_schema_ok */
#include "helpers.h"

union msg {
	struct wire_msg_hdr hdr;
	struct wire_hydrate_user hyd;
	struct wire_flush_complete fc;
	struct wire_release_claim rel;
	struct wire_transfer_found tf;
};

#define SINK_MAX 8192

struct sink {
	union msg msgs[SINK_MAX]; /* completions in emission order */
	uint32_t n;
	uint32_t refuse;          /* refuse this many offers first */
};

static struct sink sink;
static const char *conninfo;
static uint64_t time_skew_ns; /* added to the clock the persister sees (time is injected) */

static uint64_t
db_now(void)
{
	return test_now_ns() + time_skew_ns;
}

static int
emit(void *arg, const struct wire_msg_hdr *m)
{
	struct sink *s = arg;
	if (s->refuse > 0) {
		s->refuse--;
		return -ENOBUFS;
	}
	cr_assert(lt(u32, s->n, SINK_MAX));
	/* Every completion is a valid wire message (the shard's decoder would take it). */
	uint16_t len = 0;
	cr_assert(eq(int, wire_msg_check(m, m->length, &len), WIRE_E_OK), "%s",
		  wire_type_name(m->type));
	cr_assert(eq(u16, len, m->length));
	memcpy(&s->msgs[s->n++], m, m->length);
	return 0;
}

static void
need_db(void)
{
	conninfo = getenv("PST_TEST_CONNINFO");
	if (conninfo == NULL)
		cr_skip_test("PST_TEST_CONNINFO not set (run through run-with-pg)");
	memset(&sink, 0, sizeof(sink));
	time_skew_ns = 0;
}

/* Non-zero: the negative cache's TTL for the next db_make (a test that must hit the cache
 * sets it long and moves time_skew_ns past it, so a slow host cannot expire the entry). */
static uint64_t neg_ttl_ns;

/* A persister with the default lanes (a read lane beside the write lane), or with one
 * connection for everything. */
static struct pst_db *
db_make_lanes(uint32_t requests_max, bool one_connection)
{
	struct pst_db_config cfg;
	pst_db_config_default(&cfg, conninfo, emit, &sink);
	cfg.backoff_min_ns = 5000000;
	cfg.backoff_max_ns = 100000000;
	if (requests_max)
		cfg.requests_max = requests_max;
	if (one_connection)
		cfg.read_batches_in_flight_max = 0;
	if (neg_ttl_ns != 0)
		cfg.neg_ttl_ns = neg_ttl_ns;
	struct pst_db *db;
	cr_assert(eq(int, pst_db_create(&db, &cfg), 0));
	return db;
}

static struct pst_db *
db_make(uint32_t requests_max)
{
	return db_make_lanes(requests_max, false);
}

/* Poll until the sink holds want completions (or the timeout fails the test). */
static void
drive(struct pst_db *db, uint32_t want, double timeout_s)
{
	uint64_t end = test_now_ns() + (uint64_t)(timeout_s * 1e9);
	while (sink.n < want) {
		uint64_t now = test_now_ns();
		cr_assert(lt(u64, now, end), "timeout: %u of %u completions, last error: %s",
			  sink.n, want, pst_db_last_error(db));
		if (pst_db_poll(db, now + time_skew_ns) == 0)
			usleep(100);
	}
}

/* The migration role's conninfo (it owns the tables: opens accounts, changes the schema). */
static void
migrator_conninfo(char *conn, size_t cap)
{
	const char *u = strstr(conninfo, "user=omsd");
	cr_assert(u != NULL, "%s", conninfo);
	snprintf(conn, cap, "%.*suser=omsd_migrator%s", (int)(u - conninfo), conninfo,
		 u + strlen("user=omsd"));
}

/* Open user's account as the operator would (deploy/pg/accounts): omsd creates none. When
 * the server is down (a test stopped it) nothing is opened; such a test wants the error. */
static void
open_account(uint64_t user)
{
	char conn[512], sql[160];
	migrator_conninfo(conn, sizeof(conn));
	PGconn *c = PQconnectdb(conn);
	if (PQstatus(c) == CONNECTION_OK) {
		snprintf(sql, sizeof(sql),
			 "INSERT INTO accounts (user_id) VALUES (%llu) ON CONFLICT DO NOTHING",
			 (unsigned long long)user);
		PQclear(PQexec(c, sql));
	}
	PQfinish(c);
}

static void
hydrate(struct pst_db *db, uint16_t shard, uint64_t user, uint64_t epoch)
{
	open_account(user);
	struct wire_hydrate_request m = {.user = user, .epoch = epoch};
	wire_hdr_init(&m.hdr, WIRE_HYDRATE_REQUEST, shard);
	cr_assert(eq(int, pst_db_submit(db, &m.hdr, test_now_ns()), 0));
}

static struct wire_user_state
state_make(uint64_t user, uint64_t version, uint64_t seq, int64_t base)
{
	struct wire_user_state s = {.user = user, .version = version, .user_seq = seq, .tier = 2,
				    .balance_count = 2};
	s.balances[0] = (struct wire_balance){.asset = 1, .total = base};
	s.balances[1] = (struct wire_balance){.asset = 7, .total = base * 3 + 1};
	return s;
}

static void
release(struct pst_db *db, uint16_t shard, uint64_t user, uint64_t epoch)
{
	struct wire_release_claim m = {.user = user, .epoch = epoch};
	wire_hdr_init(&m.hdr, WIRE_RELEASE_CLAIM, shard);
	cr_assert(eq(int, pst_db_submit(db, &m.hdr, test_now_ns()), 0));
}

static int
flush(struct pst_db *db, uint16_t shard, uint64_t epoch, const struct wire_user_state *s)
{
	struct wire_begin_dehydrate m = {.epoch = epoch, .state = *s};
	wire_hdr_init(&m.hdr, WIRE_BEGIN_DEHYDRATE, shard);
	return pst_db_submit(db, &m.hdr, test_now_ns());
}

/* One value from the database over a fresh blocking connection (checks only). */
static int64_t
q_i64(const char *fmt, ...)
{
	char sql[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	PGconn *c = PQconnectdb(conninfo);
	cr_assert(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	cr_assert(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	int64_t v = PQgetisnull(r, 0, 0) ? -999 : strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return v;
}

/* Run a statement; returns the SQLSTATE class ("00" on success). */
static void
q_exec(char state[6], const char *sql)
{
	PGconn *c = PQconnectdb(conninfo);
	cr_assert(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	snprintf(state, 6, "%s", s ? s : "00000");
	PQclear(r);
	PQfinish(c);
}

TestSuite(pst_db, .init = need_db);

/* Goal (docs/security.md, "No account from nowhere"): a user without an account row is
 * answered UNKNOWN, and nothing is created — alone and in a multi-row group beside users
 * that have one (which are claimed as usual); once the operator opens the account the same
 * user hydrates NEW.
 * Method: hydrate 29001 (never opened) alone, then 29002 (opened) and 29003 (not) together
 *; count the rows; open 29001 and hydrate it again. */
Test(pst_db, unknown_user_refused_nothing_created)
{
	struct pst_db *db = db_make(0);
	struct wire_hydrate_request m = {.user = 29001, .epoch = 3};
	wire_hdr_init(&m.hdr, WIRE_HYDRATE_REQUEST, 1);
	cr_assert(eq(int, pst_db_submit(db, &m.hdr, test_now_ns()), 0));
	drive(db, 1, 10);
	cr_assert(eq(u8, sink.msgs[0].hyd.status, WIRE_HYD_UNKNOWN));
	cr_assert(eq(u64, sink.msgs[0].hyd.state.user, 29001));
	open_account(29002);
	m.user = 29002;
	cr_assert(eq(int, pst_db_submit(db, &m.hdr, test_now_ns()), 0));
	m.user = 29003;
	cr_assert(eq(int, pst_db_submit(db, &m.hdr, test_now_ns()), 0));
	drive(db, 3, 10);
	for (uint32_t i = 1; i < 3; i++) {
		const struct wire_hydrate_user *h = &sink.msgs[i].hyd;
		cr_assert(eq(u8, h->status, h->state.user == 29002 ? WIRE_HYD_NEW : WIRE_HYD_UNKNOWN),
			  "user %llu", (unsigned long long)h->state.user);
	}
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM accounts WHERE user_id IN (29001, 29003)"),
		     0));
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 29002"), 1));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_HYDRATE_UNKNOWN], 2));
	hydrate(db, 1, 29001, 4);
	drive(db, 4, 10);
	cr_assert(eq(u8, sink.msgs[3].hyd.status, WIRE_HYD_NEW));
	pst_db_destroy(db);
}

/* Goal: the round trip — an unknown user hydrates NEW (zero balances, claimed), a flush
 * writes version+1 and keeps the claim (docs/fencing.md), RELEASE_CLAIM lets it go, the next
 * hydrate reads back what was flushed.
 * Method: hydrate, flush, check the row, release, check, hydrate again. */
Test(pst_db, hydrate_flush_round_trip)
{
	struct pst_db *db = db_make(0);
	hydrate(db, 1, 1001, 5);
	drive(db, 1, 10);
	struct wire_hydrate_user *h = &sink.msgs[0].hyd;
	cr_assert(eq(u16, h->hdr.type, WIRE_HYDRATE_USER));
	cr_assert(eq(u16, h->hdr.shard, 1));
	cr_assert(eq(u8, h->status, WIRE_HYD_NEW));
	cr_assert(eq(u64, h->epoch, 5));
	cr_assert(eq(u64, h->state.user, 1001));
	cr_assert(eq(u64, h->state.version, 0));
	cr_assert(eq(u32, h->state.balance_count, 0));
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 1001"), 1));

	struct wire_user_state s = state_make(1001, 0, 42, 1000);
	cr_assert(eq(int, flush(db, 1, 5, &s), 0));
	drive(db, 2, 10);
	struct wire_flush_complete *f = &sink.msgs[1].fc;
	cr_assert(eq(u16, f->hdr.type, WIRE_FLUSH_COMPLETE));
	cr_assert(eq(u8, f->status, WIRE_FLUSH_OK));
	cr_assert(eq(u64, f->user, 1001));
	cr_assert(eq(u64, f->epoch, 5));
	cr_assert(eq(u64, f->version, 1));
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 1001"), 1));
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 1001"), 1));
	cr_assert(eq(i64, q_i64("SELECT owner_epoch FROM accounts WHERE user_id = 1001"), 5));
	cr_assert(eq(i64, q_i64("SELECT totals[2] FROM accounts WHERE user_id = 1001"), 3001));

	release(db, 1, 1001, 5);
	drive(db, 3, 10);
	struct wire_release_claim *rd = &sink.msgs[2].rel;
	cr_assert(eq(u16, rd->hdr.type, WIRE_RELEASE_DONE));
	cr_assert(eq(u16, rd->hdr.shard, 1));
	cr_assert(eq(u64, rd->user, 1001));
	cr_assert(eq(u64, rd->epoch, 5));
	cr_assert(eq(u8, rd->status, WIRE_FLUSH_OK));
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 1001"), -999));

	hydrate(db, 1, 1001, 6);
	drive(db, 4, 10);
	h = &sink.msgs[3].hyd;
	cr_assert(eq(u8, h->status, WIRE_HYD_OK));
	cr_assert(eq(u64, h->state.version, 1));
	cr_assert(eq(u64, h->state.user_seq, 42));
	cr_assert(eq(u8, h->state.tier, 2));
	cr_assert(eq(u32, h->state.balance_count, 2));
	cr_assert(eq(u32, h->state.balances[1].asset, 7));
	cr_assert(eq(i64, h->state.balances[1].total, 3001));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_FLUSH_OK], 1));
	cr_assert(eq(u32, pst_db_pending(db), 0));
	pst_db_destroy(db);
}

/* Goal: the CAS — a flush based on a version that moved (a foreign write) is CONFLICT and
 * writes nothing.
 * Method: hydrate + flush (v1); re-claim; another writer bumps the version behind our back;
 * our flush based on v1 is CONFLICT and the row keeps the foreign write. */
Test(pst_db, cas_conflict)
{
	struct pst_db *db = db_make(0);
	hydrate(db, 1, 2001, 1);
	drive(db, 1, 10);
	struct wire_user_state s = state_make(2001, 0, 1, 10);
	cr_assert(eq(int, flush(db, 1, 1, &s), 0));
	drive(db, 2, 10);
	hydrate(db, 1, 2001, 2);
	drive(db, 3, 10);
	cr_assert(eq(u8, sink.msgs[2].hyd.status, WIRE_HYD_OK));
	char st[6];
	q_exec(st, "UPDATE accounts SET version = version + 1, totals = '{5,5}' "
		   "WHERE user_id = 2001");
	cr_assert(eq(str, st, "00000"));
	s = state_make(2001, 1, 2, 999);
	cr_assert(eq(int, flush(db, 1, 2, &s), 0));
	drive(db, 4, 10);
	struct wire_flush_complete *f = &sink.msgs[3].fc;
	cr_assert(eq(u8, f->status, WIRE_FLUSH_CONFLICT));
	cr_assert(eq(u64, f->version, 2));
	cr_assert(eq(i64, q_i64("SELECT totals[1] FROM accounts WHERE user_id = 2001"), 5));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_FLUSH_CONFLICT], 1));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_FLUSH_RECHECKS], 1));
	pst_db_destroy(db);
}

/* Goal: fencing — while shard 1 holds the claim, shard 2 can neither hydrate (OWNED, owner
 * carried back, then served from the negative cache) nor flush (CONFLICT); shard 1's flush
 * keeps the claim (still OWNED for shard 2); only its RELEASE_CLAIM lets shard 2 in.
 * Method: as described, with counters. */
Test(pst_db, owner_claim_refuses_second_shard)
{
	neg_ttl_ns = UINT64_C(30000000000); /* 30 s: only time_skew_ns below expires it */
	struct pst_db *db = db_make(0);
	neg_ttl_ns = 0;
	hydrate(db, 1, 3001, 1);
	drive(db, 1, 10);
	cr_assert(eq(u8, sink.msgs[0].hyd.status, WIRE_HYD_NEW));
	hydrate(db, 2, 3001, 9);
	drive(db, 2, 10);
	struct wire_hydrate_user *h = &sink.msgs[1].hyd;
	cr_assert(eq(u16, h->hdr.shard, 2));
	cr_assert(eq(u8, h->status, WIRE_HYD_OWNED));
	cr_assert(eq(u16, h->owner_shard, 1));
	cr_assert(eq(u64, h->state.user, 3001));
	hydrate(db, 2, 3001, 10);
	drive(db, 3, 10);
	cr_assert(eq(u8, sink.msgs[2].hyd.status, WIRE_HYD_OWNED));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_HYDRATES_NEG_CACHE], 1));
	/* Shard 2 never held the claim: its flush cannot land. */
	struct wire_user_state s = state_make(3001, 0, 1, 666);
	cr_assert(eq(int, flush(db, 2, 10, &s), 0));
	drive(db, 4, 10);
	cr_assert(eq(u8, sink.msgs[3].fc.status, WIRE_FLUSH_CONFLICT));
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 3001"), 0));
	/* Shard 1 flushes: the claim stays (it may still cancel the eviction). */
	s = state_make(3001, 0, 3, 77);
	cr_assert(eq(int, flush(db, 1, 1, &s), 0));
	drive(db, 5, 10);
	cr_assert(eq(u8, sink.msgs[4].fc.status, WIRE_FLUSH_OK));
	time_skew_ns += UINT64_C(31000000000); /* past the negative cache: from the database */
	hydrate(db, 2, 3001, 11);
	drive(db, 6, 10);
	cr_assert(eq(u8, sink.msgs[5].hyd.status, WIRE_HYD_OWNED));
	cr_assert(eq(u16, sink.msgs[5].hyd.owner_shard, 1));
	/* Shard 1 drops the actor and releases; shard 2 may now take the user. */
	release(db, 1, 3001, 1);
	drive(db, 7, 10);
	cr_assert(eq(u8, sink.msgs[6].rel.status, WIRE_FLUSH_OK));
	hydrate(db, 2, 3001, 12);
	drive(db, 8, 10);
	h = &sink.msgs[7].hyd;
	cr_assert(eq(u8, h->status, WIRE_HYD_OK));
	cr_assert(eq(i64, h->state.balances[0].total, 77));
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 3001"), 2));
	pst_db_destroy(db);
}

/* Goal: a flush repeated after a failover (a new leader's persister, rebuilt with the same
 * outstanding BEGIN_DEHYDRATE) is OK, reports the version its first run produced, and is
 * not applied twice — even after another shard has since taken and flushed the user.
 * Method: persister A flushes and dies; persister B gets the same request; then shard 2
 * moves the row on and B's request comes once more. */
Test(pst_db, flush_repeat_after_failover)
{
	struct pst_db *a = db_make(0);
	hydrate(a, 1, 4001, 3);
	drive(a, 1, 10);
	struct wire_user_state s = state_make(4001, 0, 5, 500);
	cr_assert(eq(int, flush(a, 1, 3, &s), 0));
	drive(a, 2, 10);
	cr_assert(eq(u8, sink.msgs[1].fc.status, WIRE_FLUSH_OK));
	pst_db_destroy(a);

	memset(&sink, 0, sizeof(sink));
	struct pst_db *b = db_make(0);
	cr_assert(eq(int, flush(b, 1, 3, &s), 0));
	drive(b, 1, 10);
	struct wire_flush_complete *f = &sink.msgs[0].fc;
	cr_assert(eq(u8, f->status, WIRE_FLUSH_OK));
	cr_assert(eq(u64, f->version, 1));
	cr_assert(eq(u64, pst_db_counters(b)[PST_C_DB_FLUSH_REPEAT], 1));
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 4001"), 1));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM account_flushes WHERE user_id = 4001"), 1));

	/* Shard 1 releases; shard 2 takes the user and flushes (v2); the old request is still
	 * ours, still OK, and writes nothing. */
	release(b, 1, 4001, 3);
	drive(b, 2, 10);
	hydrate(b, 2, 4001, 1);
	drive(b, 3, 10);
	cr_assert(eq(u8, sink.msgs[2].hyd.status, WIRE_HYD_OK));
	struct wire_user_state s2 = state_make(4001, 1, 9, 10);
	cr_assert(eq(int, flush(b, 2, 1, &s2), 0));
	drive(b, 4, 10);
	cr_assert(eq(u8, sink.msgs[3].fc.status, WIRE_FLUSH_OK));
	cr_assert(eq(int, flush(b, 1, 3, &s), 0));
	drive(b, 5, 10);
	cr_assert(eq(u8, sink.msgs[4].fc.status, WIRE_FLUSH_OK));
	cr_assert(eq(u64, sink.msgs[4].fc.version, 1));
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 4001"), 2));
	cr_assert(eq(i64, q_i64("SELECT totals[1] FROM accounts WHERE user_id = 4001"), 10));
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 4001"), 2));
	/* A different epoch on the same base version is not ours: conflict. */
	cr_assert(eq(int, flush(b, 1, 4, &s), 0));
	drive(b, 6, 10);
	cr_assert(eq(u8, sink.msgs[5].fc.status, WIRE_FLUSH_CONFLICT));
	pst_db_destroy(b);
}

/* Goal: single flight — a burst of hydrates for one user from one shard is one read and
 * one answer carrying the newest epoch; an identical flush in flight is merged too.
 * Method: submit 5 hydrates before polling; then 3 identical flushes. */
Test(pst_db, single_flight_merges)
{
	struct pst_db *db = db_make(0);
	for (uint64_t e = 1; e <= 5; e++)
		hydrate(db, 3, 5001, e);
	drive(db, 1, 10);
	for (int k = 0; k < 50; k++)
		pst_db_poll(db, test_now_ns());
	cr_assert(eq(u32, sink.n, 1));
	cr_assert(eq(u64, sink.msgs[0].hyd.epoch, 5));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_HYDRATES_MERGED], 4));
	cr_assert(eq(i64, q_i64("SELECT owner_epoch FROM accounts WHERE user_id = 5001"), 5));
	/* Once sent, a higher epoch is a read (and claim) of its own; a lower one joins. */
	hydrate(db, 3, 5001, 7);
	pst_db_poll(db, test_now_ns()); /* sent */
	hydrate(db, 3, 5001, 6);
	hydrate(db, 3, 5001, 8);
	drive(db, 3, 10);
	for (int k = 0; k < 50; k++)
		pst_db_poll(db, test_now_ns());
	cr_assert(eq(u32, sink.n, 3));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_HYDRATES_MERGED], 5));
	cr_assert(eq(i64, q_i64("SELECT owner_epoch FROM accounts WHERE user_id = 5001"), 8));
	cr_assert(eq(u64, sink.msgs[2].hyd.epoch, 8));
	memmove(&sink.msgs[1], &sink.msgs[2], sizeof(sink.msgs[0]));
	sink.n = 1;
	/* A flush draws an epoch newer than the claim (docs/fencing.md). */
	struct wire_user_state s = state_make(5001, 0, 1, 1);
	for (int k = 0; k < 3; k++)
		cr_assert(eq(int, flush(db, 3, 9, &s), 0));
	drive(db, 2, 10);
	for (int k = 0; k < 50; k++)
		pst_db_poll(db, test_now_ns());
	cr_assert(eq(u32, sink.n, 2));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_FLUSHES_MERGED], 2));
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 5001"), 1));
	pst_db_destroy(db);
}

/* Goal: RELEASE_CLAIM is idempotent and fenced by the epoch (docs/fencing.md): it releases
 * only the claim the flush of that epoch kept; a stale release re-emitted after the user was
 * hydrated again (epoch moved), or one from another shard, is a harmless no-op.
 * Method: hydrate at epoch 3, flush at 4 (stamps 4); release 3 (no-op), release 4 (done),
 * release 4 again (no-op); hydrate at 5; release 4 again (no-op, claim kept); shard 2's
 * release of shard 1's claim (no-op); then a release at 9 (a hydration given up after
 * reaching epoch 9, whose earlier request claimed at 5) lets the claim go: the release
 * takes any claim of the shard at or below its epoch. */
Test(pst_db, release_is_idempotent_and_fenced)
{
	struct pst_db *db = db_make(0);
	hydrate(db, 1, 10001, 3);
	drive(db, 1, 10);
	struct wire_user_state s = state_make(10001, 0, 1, 1);
	cr_assert(eq(int, flush(db, 1, 4, &s), 0));
	drive(db, 2, 10);
	cr_assert(eq(u8, sink.msgs[1].fc.status, WIRE_FLUSH_OK));
	release(db, 1, 10001, 3);
	drive(db, 3, 10);
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 10001"), 1));
	release(db, 1, 10001, 4);
	drive(db, 4, 10);
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 10001"), -999));
	release(db, 1, 10001, 4);
	drive(db, 5, 10);
	hydrate(db, 1, 10001, 5);
	drive(db, 6, 10);
	cr_assert(eq(u8, sink.msgs[5].hyd.status, WIRE_HYD_OK));
	release(db, 1, 10001, 4);
	release(db, 2, 10001, 5);
	drive(db, 8, 10);
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 10001"), 1));
	cr_assert(eq(i64, q_i64("SELECT owner_epoch FROM accounts WHERE user_id = 10001"), 5));
	release(db, 1, 10001, 9);
	drive(db, 9, 10);
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 10001"), -999));
	for (uint32_t k = 2; k < 9; k++) {
		if (k == 5)
			continue;
		cr_assert(eq(u16, sink.msgs[k].hdr.type, WIRE_RELEASE_DONE));
		cr_assert(eq(u8, sink.msgs[k].rel.status, WIRE_FLUSH_OK));
	}
	const uint64_t *c = pst_db_counters(db);
	cr_assert(eq(u64, c[PST_C_DB_RELEASE_OK], 2));
	cr_assert(eq(u64, c[PST_C_DB_RELEASE_NOOP], 4));
	pst_db_destroy(db);
}

/* Goal (docs/fencing.md, "Moving a user with open orders"): the last release of a move
 * whose orders the new owner adopted hands the claim to it, unstamped: the old owner's own
 * hydration is then refused OWNED naming the new owner, which hydrates (its epoch stamps
 * the claim, however small) and can flush and release as usual.
 * Method: shard 1 hydrates (epoch 7) and flushes (8); releases at 8 handing over to shard 2;
 * shard 1 asks again (OWNED, owner 2); shard 2 hydrates at epoch 2 (OK), flushes at 3 (OK)
 * and releases (freed). */
Test(pst_db, release_hands_the_claim_over)
{
	struct pst_db *db = db_make(0);
	hydrate(db, 1, 10077, 7);
	drive(db, 1, 10);
	struct wire_user_state s = state_make(10077, 0, 1, 1);
	s.egress_seq = 41;
	cr_assert(eq(int, flush(db, 1, 8, &s), 0));
	drive(db, 2, 10);
	cr_assert(eq(u8, sink.msgs[1].fc.status, WIRE_FLUSH_OK));
	struct wire_release_claim m = {.user = 10077, .epoch = 8, .handoff = 1, .to_shard = 2};
	wire_hdr_init(&m.hdr, WIRE_RELEASE_CLAIM, 1);
	cr_assert(eq(int, pst_db_submit(db, &m.hdr, test_now_ns()), 0));
	drive(db, 3, 10);
	cr_assert(eq(u8, sink.msgs[2].rel.status, WIRE_FLUSH_OK));
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 10077"), 2));
	cr_assert(eq(i64, q_i64("SELECT owner_epoch FROM accounts WHERE user_id = 10077"), 0));
	hydrate(db, 1, 10077, 9);
	drive(db, 4, 10);
	cr_assert(eq(u8, sink.msgs[3].hyd.status, WIRE_HYD_OWNED));
	cr_assert(eq(u16, sink.msgs[3].hyd.owner_shard, 2));
	hydrate(db, 2, 10077, 2);
	drive(db, 5, 10);
	cr_assert(eq(u8, sink.msgs[4].hyd.status, WIRE_HYD_OK));
	cr_assert(eq(u64, sink.msgs[4].hyd.state.egress_seq, 41));
	s.version = sink.msgs[4].hyd.state.version;
	cr_assert(eq(int, flush(db, 2, 3, &s), 0));
	drive(db, 6, 10);
	cr_assert(eq(u8, sink.msgs[5].fc.status, WIRE_FLUSH_OK));
	release(db, 2, 10077, 3);
	drive(db, 7, 10);
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 10077"), -999));
	pst_db_destroy(db);
}

#define BURST_USERS 1500

/* Goal: PostgreSQL stopped and restarted in the middle of a flush burst — every flush
 * completes exactly once, OK, driven only by polling; nothing lost, nothing applied twice.
 * Method: hydrate 1500 users; a second session locks the accounts table so the first 500
 * flushes sit in flight inside the database; a child process halts the server (which aborts
 * them) and starts it again while the rest of the burst is submitted in waves; poll
 * throughout; check every completion, the rows (version 1 each), the ledger (one row each),
 * that the connection was lost and that in-flight statements were sent again. */
Test(pst_db, postgres_restart_mid_flush_burst, .timeout = 240)
{
	const char *pgdir = getenv("PST_TEST_PGDIR"), *pgctl = getenv("PST_TEST_PGCTL");
	if (pgdir == NULL || pgctl == NULL)
		cr_skip_test("PST_TEST_PGDIR / PST_TEST_PGCTL not set");
	struct pst_db *db = db_make(BURST_USERS + 16);
	for (uint64_t u = 0; u < BURST_USERS; u++)
		hydrate(db, 4, 100000 + u, 1);
	drive(db, BURST_USERS, 60);
	for (uint32_t k = 0; k < BURST_USERS; k++)
		cr_assert(eq(u8, sink.msgs[k].hyd.status, WIRE_HYD_NEW));
	memset(&sink, 0, sizeof(sink));

	/* Hold the flushes inside the database. */
	PGconn *locker = PQconnectdb(conninfo);
	cr_assert(PQstatus(locker) == CONNECTION_OK);
	PGresult *r = PQexec(locker, "BEGIN; LOCK TABLE accounts IN EXCLUSIVE MODE");
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(locker));
	PQclear(r);
	uint32_t submitted = 0;
	for (; submitted < 500; submitted++) {
		uint64_t u = 100000 + submitted;
		struct wire_user_state s = state_make(u, 0, u, (int64_t)u);
		cr_assert(eq(int, flush(db, 4, 1, &s), 0));
	}
	uint64_t until = test_now_ns() + 200000000;
	while (test_now_ns() < until)
		if (pst_db_poll(db, test_now_ns()) == 0)
			usleep(200);
	cr_assert(eq(u32, sink.n, 0), "flushes went through a locked table");

	char cmd[512];
	snprintf(cmd, sizeof(cmd), "'%s' halt '%s' && sleep 0.5 && '%s' resume '%s'", pgctl,
		 pgdir, pgctl, pgdir);
	pid_t child = fork();
	cr_assert(child >= 0);
	if (child == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	/* The rest in waves of 50 every 20 ms, while the server goes away and comes back. */
	uint64_t next_wave = test_now_ns();
	int child_status = -1;
	uint64_t end = test_now_ns() + UINT64_C(120000000000);
	while (sink.n < BURST_USERS || child_status < 0) {
		uint64_t now = test_now_ns();
		cr_assert(lt(u64, now, end), "timeout: %u/%u, %s", sink.n, BURST_USERS,
			  pst_db_last_error(db));
		if (submitted < BURST_USERS && now >= next_wave) {
			for (int k = 0; k < 50 && submitted < BURST_USERS; k++, submitted++) {
				uint64_t u = 100000 + submitted;
				struct wire_user_state s = state_make(u, 0, u, (int64_t)u);
				cr_assert(eq(int, flush(db, 4, 1, &s), 0));
			}
			next_wave = now + 20000000;
		}
		if (pst_db_poll(db, now) == 0)
			usleep(200);
		if (child_status < 0) {
			int st;
			if (waitpid(child, &st, WNOHANG) == child)
				child_status = st;
		}
	}
	PQfinish(locker);
	bool child_ok = WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0;
	cr_assert(child_ok, "pgctl halt/resume failed");
	for (int k = 0; k < 100; k++) /* nothing more may come */
		pst_db_poll(db, test_now_ns());
	cr_assert(eq(u32, sink.n, BURST_USERS));
	static uint8_t seen[BURST_USERS];
	for (uint32_t k = 0; k < BURST_USERS; k++) {
		struct wire_flush_complete *f = &sink.msgs[k].fc;
		cr_assert(eq(u16, f->hdr.type, WIRE_FLUSH_COMPLETE));
		cr_assert(eq(u8, f->status, WIRE_FLUSH_OK), "user %" PRIu64 " status %u", f->user,
			  f->status);
		cr_assert(eq(u64, f->version, 1));
		uint64_t i = f->user - 100000;
		cr_assert(lt(u64, i, BURST_USERS));
		cr_assert(eq(u8, seen[i], 0), "user %" PRIu64 " answered twice", f->user);
		seen[i] = 1;
	}
	const uint64_t *c = pst_db_counters(db);
	cr_assert(ge(u64, c[PST_C_DB_DISCONNECTS], 1), "the restart was not noticed");
	cr_assert(ge(u64, c[PST_C_DB_RESENT], 500), "in-flight statements were not sent again");
	cr_log_info("restart burst: disconnects %" PRIu64 ", resent %" PRIu64 ", repeats %" PRIu64
		    ", connect failures %" PRIu64,
		    c[PST_C_DB_DISCONNECTS], c[PST_C_DB_RESENT], c[PST_C_DB_FLUSH_REPEAT],
		    c[PST_C_DB_CONNECT_FAILURES]);
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM accounts WHERE user_id >= 100000 AND "
				"user_id < %d AND version = 1 AND owner_shard = 4 AND "
				"totals[1] = user_id",
				100000 + BURST_USERS),
		     BURST_USERS));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM account_flushes WHERE user_id >= 100000 "
				"AND user_id < %d",
				100000 + BURST_USERS),
		     BURST_USERS));
	pst_db_destroy(db);
}

/* Goal: an answer lost after the commit may have happened (the connection given up while
 * the statement was inside the database) costs nothing: the statement is sent again on a
 * new connection, the flush is applied exactly once, and the answer is OK.
 * Method: a second session locks the table; the flush is sent and waits on the lock; the
 * persister's clock jumps past the batch timeout, so it drops the connection, connects
 * again (its set-up waits too) and sends the flush again; the lock goes; both statements
 * run, one writes, the other finds the write (ledger) or nothing to do. Exactly one version bump, one ledger row,
 * one OK. */
Test(pst_db, answer_lost_after_commit_is_applied_once)
{
	struct pst_db *db = db_make(0);
	hydrate(db, 1, 12001, 1);
	drive(db, 1, 10);
	/* The write lane connected and its statements prepared before the lock: otherwise, on a
	 * slow host, the timeout below can hit its set-up, and the flush is sent for the first
	 * time after the lock goes (no re-send to test). A flush of another user does it. */
	hydrate(db, 1, 12002, 1);
	drive(db, 2, 10);
	struct wire_user_state w = state_make(12002, 0, 1, 5);
	cr_assert(eq(int, flush(db, 1, 1, &w), 0));
	drive(db, 3, 10);
	cr_assert(eq(u8, sink.msgs[2].fc.status, WIRE_FLUSH_OK));
	const uint64_t *c = pst_db_counters(db);
	uint64_t flushes0 = c[PST_C_DB_FLUSH_OK] + c[PST_C_DB_FLUSH_REPEAT];
	uint64_t timeouts0 = c[PST_C_DB_TIMEOUTS], resent0 = c[PST_C_DB_RESENT];
	PGconn *locker = PQconnectdb(conninfo);
	cr_assert(PQstatus(locker) == CONNECTION_OK);
	PGresult *r = PQexec(locker, "BEGIN; LOCK TABLE accounts IN EXCLUSIVE MODE");
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(locker));
	PQclear(r);
	struct wire_user_state s = state_make(12001, 0, 3, 30);
	cr_assert(eq(int, flush(db, 1, 1, &s), 0));
	uint64_t until = test_now_ns() + 100000000;
	while (test_now_ns() < until)
		pst_db_poll(db, db_now());
	cr_assert(eq(u32, sink.n, 3));
	time_skew_ns = UINT64_C(10000000000); /* past batch_timeout_ns (5 s) */
	until = test_now_ns() + 200000000;
	while (test_now_ns() < until)
		if (pst_db_poll(db, db_now()) == 0)
			usleep(100);
	cr_assert(eq(u64, c[PST_C_DB_TIMEOUTS] - timeouts0, 1));
	cr_assert(eq(u32, sink.n, 3));
	r = PQexec(locker, "COMMIT");
	PQclear(r);
	PQfinish(locker);
	drive(db, 4, 10);
	/* Sent again on the new connection once its set-up came back (its prepares wait for
	 * the lock too: a FOR UPDATE statement locks the table it reads at parse time). */
	cr_assert(ge(u64, c[PST_C_DB_RESENT] - resent0, 1));
	struct wire_flush_complete *f = &sink.msgs[3].fc;
	cr_assert(eq(u8, f->status, WIRE_FLUSH_OK));
	cr_assert(eq(u64, f->version, 1));
	cr_assert(eq(u64, c[PST_C_DB_FLUSH_OK] + c[PST_C_DB_FLUSH_REPEAT] - flushes0, 1));
	usleep(200000); /* the abandoned backend's statement has run by now */
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 12001"), 1));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM account_flushes WHERE user_id = 12001"), 1));
	cr_log_info("lost answer: flush ok %" PRIu64 ", repeat %" PRIu64 ", rechecks %" PRIu64,
		    c[PST_C_DB_FLUSH_OK], c[PST_C_DB_FLUSH_REPEAT], c[PST_C_DB_FLUSH_RECHECKS]);
	pst_db_destroy(db);
}

/* Goal: one bad statement does not take its batch with it. The batch's transaction rolls
 * back, every request of it is re-run alone, the bad one is answered ERROR (a permanent
 * SQLSTATE), the others OK exactly once.
 * Method: the superuser adds a CHECK that one flush of ten violates; submit the ten together
 * (one batch); check answers, counters and rows; drop the CHECK. */
Test(pst_db, bad_statement_is_isolated)
{
	const char *pgdir = getenv("PST_TEST_PGDIR"), *pgctl = getenv("PST_TEST_PGCTL");
	if (pgdir == NULL || pgctl == NULL)
		cr_skip_test("PST_TEST_PGDIR / PST_TEST_PGCTL not set");
	struct pst_db *db = db_make(0);
	for (uint64_t u = 11001; u <= 11010; u++)
		hydrate(db, 1, u, 1);
	drive(db, 10, 10);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "'%s' psql '%s' -c 'ALTER TABLE accounts ADD CONSTRAINT "
		 "pst_test_seq CHECK (user_seq < 1000000) NOT VALID' >/dev/null", pgctl, pgdir);
	cr_assert(eq(int, system(cmd), 0));
	memset(&sink, 0, sizeof(sink));
	for (uint64_t u = 11001; u <= 11010; u++) {
		struct wire_user_state s = state_make(u, 0, u == 11005 ? 5000000 : 1, 9);
		cr_assert(eq(int, flush(db, 1, 1, &s), 0));
	}
	drive(db, 10, 10);
	snprintf(cmd, sizeof(cmd), "'%s' psql '%s' -c 'ALTER TABLE accounts DROP CONSTRAINT "
		 "pst_test_seq' >/dev/null", pgctl, pgdir);
	cr_assert(eq(int, system(cmd), 0));
	for (uint32_t k = 0; k < 10; k++) {
		struct wire_flush_complete *f = &sink.msgs[k].fc;
		cr_assert(eq(u8, f->status, f->user == 11005 ? WIRE_FLUSH_ERROR : WIRE_FLUSH_OK),
			  "user %" PRIu64, f->user);
	}
	const uint64_t *c = pst_db_counters(db);
	cr_assert(ge(u64, c[PST_C_DB_BATCH_FAILURES], 1));
	cr_assert(eq(u64, c[PST_C_DB_FLUSH_ERROR], 1));
	cr_assert(eq(u64, c[PST_C_DB_FLUSH_OK], 9));
	cr_assert(strstr(pst_db_last_error(db), "pst_test_seq") != NULL, "%s",
		  pst_db_last_error(db));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM accounts WHERE user_id BETWEEN 11001 AND "
				"11010 AND version = 1"),
		     9));
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 11005"), 0));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM account_flushes WHERE user_id BETWEEN "
				"11001 AND 11010"),
		     9));
	pst_db_destroy(db);
}

/* Goal: a full output keeps completions in order and loses none.
 * Method: the sink refuses the first 5 offers; 3 hydrates come out in order anyway. */
Test(pst_db, output_backpressure_keeps_order)
{
	struct pst_db *db = db_make(0);
	sink.refuse = 5;
	hydrate(db, 1, 6001, 1);
	hydrate(db, 1, 6002, 1);
	hydrate(db, 1, 6003, 1);
	drive(db, 3, 10);
	cr_assert(eq(u64, sink.msgs[0].hyd.state.user, 6001));
	cr_assert(eq(u64, sink.msgs[1].hyd.state.user, 6002));
	cr_assert(eq(u64, sink.msgs[2].hyd.state.user, 6003));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_EMIT_BLOCKED], 5));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_HYDRATE_NEW], 3));
	pst_db_destroy(db);
}

/* Goal: bad requests are refused with -EINVAL and a full pool with -ENOBUFS, nothing
 * queued for them.
 * Method: wrong type, zero user, negative balance, asset 0; a 2-slot pool. */
Test(pst_db, refuses_bad_requests_and_full_pool)
{
	struct pst_db *db = db_make(2);
	struct wire_tick t = {0};
	wire_hdr_init(&t.hdr, WIRE_TICK, 1);
	cr_assert(eq(int, pst_db_submit(db, &t.hdr, 0), -EINVAL));
	struct wire_hydrate_request h = {.user = 0, .epoch = 1};
	wire_hdr_init(&h.hdr, WIRE_HYDRATE_REQUEST, 1);
	cr_assert(eq(int, pst_db_submit(db, &h.hdr, 0), -EINVAL));
	struct wire_user_state s = state_make(7001, 0, 1, 5);
	s.balances[1].total = -1;
	cr_assert(eq(int, flush(db, 1, 1, &s), -EINVAL));
	s = state_make(7001, 0, 1, 5);
	s.balances[0].asset = 0;
	cr_assert(eq(int, flush(db, 1, 1, &s), -EINVAL));
	s.balance_count = WIRE_BALANCES_MAX + 1;
	cr_assert(eq(int, flush(db, 1, 1, &s), -EINVAL));
	struct wire_release_claim rc = {.user = 7001, .epoch = 1, .status = 1};
	wire_hdr_init(&rc.hdr, WIRE_RELEASE_CLAIM, 1);
	cr_assert(eq(int, pst_db_submit(db, &rc.hdr, 0), -EINVAL));
	hydrate(db, 1, 7001, 1);
	hydrate(db, 1, 7002, 1);
	h.user = 7003;
	cr_assert(eq(int, pst_db_submit(db, &h.hdr, 0), -ENOBUFS));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_FULL], 1));
	cr_assert(eq(u32, pst_db_pending(db), 2));
	drive(db, 2, 10);
	cr_assert(eq(u32, pst_db_pending(db), 0));
	pst_db_destroy(db);
}

/* Goal: with the database unreachable, nothing blocks: a hydrate is answered ERROR after
 * its deadline (the shard may ask again), a flush stays queued (money is never given up).
 * Method: a conninfo pointing at a socket directory with no server. */
Test(pst_db, unreachable_database_never_blocks)
{
	struct pst_db_config cfg;
	pst_db_config_default(&cfg, "host=/nonexistent-omsd port=1 dbname=x user=y "
				    "connect_timeout=1",
			      emit, &sink);
	cfg.backoff_min_ns = 1000000;
	cfg.backoff_max_ns = 10000000;
	cfg.hydrate_deadline_ns = 50000000;
	struct pst_db *db;
	cr_assert(eq(int, pst_db_create(&db, &cfg), 0));
	hydrate(db, 1, 8001, 1);
	struct wire_user_state s = state_make(8001, 0, 1, 1);
	cr_assert(eq(int, flush(db, 1, 1, &s), 0));
	uint64_t start = test_now_ns(), worst = 0;
	while (sink.n < 1) {
		uint64_t t0 = test_now_ns();
		pst_db_poll(db, t0);
		uint64_t d = test_now_ns() - t0;
		worst = d > worst ? d : worst;
		cr_assert(lt(u64, t0 - start, UINT64_C(5000000000)));
		usleep(500);
	}
	cr_assert(eq(u8, sink.msgs[0].hyd.status, WIRE_HYD_ERROR));
	cr_assert(eq(u32, pst_db_pending(db), 1)); /* the flush waits */
	cr_assert(gt(u64, pst_db_counters(db)[PST_C_DB_CONNECT_FAILURES], 0));
	cr_assert(lt(u64, worst, UINT64_C(20000000)), "a poll took %" PRIu64 " ns", worst);
	bool connected = pst_db_connected(db);
	cr_assert(eq(int, connected, 0));
	pst_db_destroy(db);
}

/* Goal: pst_db_clear (leadership lost) drops every answer, including those in flight, and
 * the same requests submitted again afterwards are answered once.
 * Method: submit, poll once (sent), clear, poll: nothing; resubmit: one answer each. */
Test(pst_db, clear_then_rebuild)
{
	struct pst_db *db = db_make(0);
	while (!pst_db_connected(db))
		pst_db_poll(db, test_now_ns());
	for (uint64_t u = 0; u < 20; u++)
		hydrate(db, 6, 9000 + u, 1);
	pst_db_poll(db, test_now_ns());
	pst_db_clear(db);
	uint64_t end = test_now_ns() + 300000000;
	while (test_now_ns() < end)
		pst_db_poll(db, test_now_ns());
	cr_assert(eq(u32, sink.n, 0));
	cr_assert(eq(u32, pst_db_pending(db), 0));
	for (uint64_t u = 0; u < 20; u++)
		hydrate(db, 6, 9000 + u, 2);
	drive(db, 20, 10);
	for (uint32_t k = 0; k < 20; k++) {
		uint8_t st = sink.msgs[k].hyd.status;
		cr_assert(st == WIRE_HYD_OK || st == WIRE_HYD_NEW);
		cr_assert(eq(u64, sink.msgs[k].hyd.epoch, 2));
	}
	pst_db_destroy(db);
}

/* Goal: the omsd role is least-privilege: no DDL, no DELETE.
 * Method: try CREATE TABLE, DROP TABLE and DELETE as omsd. */
Test(pst_db, omsd_role_has_no_ddl)
{
	char st[6];
	q_exec(st, "CREATE TABLE pst_should_fail (a int)");
	cr_assert(eq(str, st, "42501"));
	q_exec(st, "DROP TABLE accounts");
	cr_assert(eq(str, st, "42501"));
	q_exec(st, "DELETE FROM accounts");
	cr_assert(eq(str, st, "42501"));
	/* No account from nowhere: the operator opens them (deploy/pg/accounts). */
	q_exec(st, "INSERT INTO accounts (user_id) VALUES (424242)");
	cr_assert(eq(str, st, "42501"));
	q_exec(st, "ALTER TABLE accounts ADD COLUMN x int");
	cr_assert(eq(str, st, "42501"));
}

/* Goal: the user's recent request ids travel with the account (docs/fencing.md): what a
 * flush writes, the next hydration reads back, byte for byte.
 * Method: hydrate, flush a state with three recent entries, release, hydrate on another
 * shard; compare the window. */
Test(pst_db, recent_window_round_trip)
{
	struct pst_db *db = db_make(0);
	hydrate(db, 1, 12001, 1);
	drive(db, 1, 10);
	struct wire_user_state s = state_make(12001, 0, 3, 50);
	s.recent_count = 3;
	s.recent[0] = (struct wire_recent){.id = 7, .user_seq = 1, .kind = WIRE_RECENT_ORDER};
	s.recent[1] = (struct wire_recent){.id = UINT64_C(1) << 40, .kind = WIRE_RECENT_TRANSFER};
	s.recent[2] = (struct wire_recent){.id = 9, .reason = WIRE_REASON_INSUFFICIENT_FUNDS,
					   .kind = WIRE_RECENT_ORDER};
	cr_assert(eq(int, flush(db, 1, 2, &s), 0));
	drive(db, 2, 10);
	cr_assert(eq(u8, sink.msgs[1].fc.status, WIRE_FLUSH_OK));
	release(db, 1, 12001, 2);
	drive(db, 3, 10);
	hydrate(db, 2, 12001, 1);
	drive(db, 4, 10);
	const struct wire_hydrate_user *h = &sink.msgs[3].hyd;
	cr_assert(eq(u8, h->status, WIRE_HYD_OK));
	cr_assert(eq(u32, h->state.recent_count, 3));
	cr_assert(eq(int, memcmp(h->state.recent, s.recent, 3 * sizeof(s.recent[0])), 0));
	cr_assert(eq(i64, q_i64("SELECT length(recent) FROM accounts WHERE user_id = 12001"), 96));
	pst_db_destroy(db);
}

/* Goal: the epoch-fenced CAS (docs/fencing.md). A flush overtaken by cancel-on-activity is
 * followed by a newer one that still expects the old version: it overwrites our own write.
 * A stale flush of an older epoch, re-driven late, is refused and writes nothing.
 * Method: hydrate (epoch 1), flush at 2 (v1), flush at 3 expecting v0 (OK, v2), then a
 * flush at 2 with other money expecting v0 that is not a repeat (CONFLICT). */
Test(pst_db, epoch_fenced_cas)
{
	struct pst_db *db = db_make(0);
	hydrate(db, 1, 13001, 1);
	drive(db, 1, 10);
	struct wire_user_state s1 = state_make(13001, 0, 1, 100);
	cr_assert(eq(int, flush(db, 1, 2, &s1), 0));
	drive(db, 2, 10);
	cr_assert(eq(u64, sink.msgs[1].fc.version, 1));
	struct wire_user_state s2 = state_make(13001, 0, 2, 200);
	cr_assert(eq(int, flush(db, 1, 3, &s2), 0));
	drive(db, 3, 10);
	cr_assert(eq(u8, sink.msgs[2].fc.status, WIRE_FLUSH_OK));
	cr_assert(eq(u64, sink.msgs[2].fc.version, 2));
	cr_assert(eq(i64, q_i64("SELECT totals[1] FROM accounts WHERE user_id = 13001"), 200));
	/* The epoch-2 flush again is a repeat of a ledgered write: OK, nothing written. */
	cr_assert(eq(int, flush(db, 1, 2, &s1), 0));
	drive(db, 4, 10);
	cr_assert(eq(u8, sink.msgs[3].fc.status, WIRE_FLUSH_OK));
	cr_assert(eq(i64, q_i64("SELECT totals[1] FROM accounts WHERE user_id = 13001"), 200));
	/* An older epoch that was never written (a stale incarnation's flush): refused. */
	struct wire_user_state old = state_make(13001, 0, 1, 999);
	cr_assert(eq(int, flush(db, 1, 1, &old), 0));
	drive(db, 5, 10);
	cr_assert(eq(u8, sink.msgs[4].fc.status, WIRE_FLUSH_CONFLICT));
	cr_assert(eq(i64, q_i64("SELECT totals[1] FROM accounts WHERE user_id = 13001"), 200));
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 13001"), 2));
	pst_db_destroy(db);
}

static void
lookup(struct pst_db *db, uint16_t shard, uint64_t user, uint64_t id, uint64_t epoch)
{
	struct wire_transfer_lookup m = {.user = user, .transfer_id = id, .epoch = epoch};
	wire_hdr_init(&m.hdr, WIRE_TRANSFER_LOOKUP, shard);
	cr_assert(eq(int, pst_db_submit(db, &m.hdr, test_now_ns()), 0));
}

/* Goal (docs/oms.md, "Transfers for their lifetime"): the transfer outcomes a flush carries
 * are recorded in the transfers table by the same fenced statement, first outcome kept, and
 * a lookup answers them for ever: FOUND with the original reason and total, NOT_FOUND for an
 * id never recorded; a flush that loses its fence records nothing; xfer_id_max travels with
 * the row, and so do cl_ord_floor (migration 0005) and egress_seq (0006). Ids above INT64_MAX
 * survive (stored as the bigint of the same bits).
 * Method: hydrate, flush two transfers (one refused) and an order, look them up and an
 * unknown id; flush again with the first id carrying other content (kept as first written);
 * a stale-epoch flush with a new transfer (CONFLICT) leaves no row. */
Test(pst_db, transfers_recorded_and_looked_up)
{
	struct pst_db *db = db_make(0);
	const uint64_t big = UINT64_C(0xfedcba9876543210);
	hydrate(db, 1, 14001, 1);
	drive(db, 1, 10);
	struct wire_user_state s = state_make(14001, 0, 3, 50);
	s.xfer_id_max = big;
	s.cl_ord_floor = big - 1;
	s.egress_seq = big - 2;
	s.recent_count = 3;
	s.recent[0] = (struct wire_recent){.id = 5, .user_seq = 550, .kind = WIRE_RECENT_TRANSFER,
					   .asset = 7, .amount = 500};
	s.recent[1] = (struct wire_recent){.id = 9, .user_seq = 1, .kind = WIRE_RECENT_ORDER};
	s.recent[2] = (struct wire_recent){.id = big, .user_seq = 550,
					   .reason = WIRE_REASON_INSUFFICIENT_FUNDS,
					   .kind = WIRE_RECENT_TRANSFER, .asset = 7, .amount = -9999};
	cr_assert(eq(int, flush(db, 1, 2, &s), 0));
	drive(db, 2, 10);
	cr_assert(eq(u8, sink.msgs[1].fc.status, WIRE_FLUSH_OK));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM transfers WHERE user_id = 14001"), 2));
	cr_assert(eq(i64, q_i64("SELECT shard * 1000 + epoch FROM transfers WHERE user_id = 14001"
				" AND transfer_id = 5"), 1002));
	lookup(db, 1, 14001, 5, 3);
	lookup(db, 1, 14001, big, 4);
	lookup(db, 1, 14001, 6, 5);
	drive(db, 5, 10);
	const struct wire_transfer_found *f = &sink.msgs[2].tf;
	cr_assert(eq(u16, f->hdr.type, WIRE_TRANSFER_FOUND));
	cr_assert(eq(u8, f->status, WIRE_XFER_FOUND));
	cr_assert(eq(u64, f->epoch, 3));
	cr_assert(eq(int, memcmp(&f->rec, &s.recent[0], sizeof(f->rec)), 0));
	f = &sink.msgs[3].tf;
	cr_assert(eq(u8, f->status, WIRE_XFER_FOUND));
	cr_assert(eq(u64, f->transfer_id, big));
	cr_assert(eq(int, memcmp(&f->rec, &s.recent[2], sizeof(f->rec)), 0));
	cr_assert(eq(u8, sink.msgs[4].tf.status, WIRE_XFER_NOT_FOUND));
	cr_assert(eq(u64, sink.msgs[4].tf.transfer_id, 6));

	/* Written again with other content: the first outcome stays. */
	struct wire_user_state s2 = s;
	s2.version = 1;
	s2.recent[0].amount = 1;
	s2.recent[0].user_seq = 51;
	cr_assert(eq(int, flush(db, 1, 6, &s2), 0));
	drive(db, 6, 10);
	cr_assert(eq(u8, sink.msgs[5].fc.status, WIRE_FLUSH_OK));
	cr_assert(eq(i64, q_i64("SELECT amount * 1000 + total FROM transfers WHERE user_id = 14001"
				" AND transfer_id = 5"), 500550));

	/* A flush refused by its fence (an epoch older than the claim's stamp) records none. */
	struct wire_user_state s3 = s2;
	s3.version = 2;
	s3.recent[1] = (struct wire_recent){.id = 77, .user_seq = 1, .kind = WIRE_RECENT_TRANSFER,
					    .asset = 1, .amount = 1};
	cr_assert(eq(int, flush(db, 1, 4, &s3), 0));
	drive(db, 7, 10);
	cr_assert(eq(u8, sink.msgs[6].fc.status, WIRE_FLUSH_CONFLICT));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM transfers WHERE user_id = 14001"), 2));

	/* xfer_id_max comes back with the row. */
	release(db, 1, 14001, 6);
	drive(db, 8, 10);
	hydrate(db, 2, 14001, 1);
	drive(db, 9, 10);
	cr_assert(eq(u8, sink.msgs[8].hyd.status, WIRE_HYD_OK));
	cr_assert(eq(u64, sink.msgs[8].hyd.state.xfer_id_max, big));
	cr_assert(eq(u64, sink.msgs[8].hyd.state.cl_ord_floor, big - 1));
	cr_assert(eq(u64, sink.msgs[8].hyd.state.egress_seq, big - 2));
	cr_assert(eq(u32, sink.msgs[8].hyd.state.recent_count, 3));
	pst_db_destroy(db);
}

/* Goal: a lookup while the database is away is answered ERROR at the hydrate deadline (a
 * client waits on it), never blocks, and a repeat of the same lookup is merged.
 * Method: an unreachable conninfo, two identical lookups and one more; poll past the
 * deadline: two answers (the repeat merged), both ERROR. */
Test(pst_db, lookup_errors_when_database_away)
{
	struct pst_db_config cfg;
	pst_db_config_default(&cfg, "host=/nonexistent-omsd port=1 dbname=x user=y "
				    "connect_timeout=1",
			      emit, &sink);
	cfg.backoff_min_ns = 1000000;
	cfg.backoff_max_ns = 10000000;
	cfg.hydrate_deadline_ns = 50000000;
	struct pst_db *db;
	cr_assert(eq(int, pst_db_create(&db, &cfg), 0));
	lookup(db, 1, 15001, 5, 3);
	lookup(db, 1, 15001, 5, 3);
	lookup(db, 1, 15001, 6, 4);
	uint64_t t0 = test_now_ns();
	uint64_t end = t0 + 5000000000ull;
	while (sink.n < 2 && test_now_ns() < end) {
		pst_db_poll(db, test_now_ns());
		usleep(1000);
	}
	cr_assert(eq(u32, sink.n, 2));
	cr_assert(eq(u8, sink.msgs[0].tf.status, WIRE_XFER_ERROR));
	cr_assert(eq(u8, sink.msgs[1].tf.status, WIRE_XFER_ERROR));
	cr_assert(eq(u64, sink.msgs[1].tf.transfer_id, 6));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_LOOKUPS_MERGED], 1));
	pst_db_destroy(db);
}

/* ---------------------------------------------------------------- multi-row statements -- */

/* Connected, with the statements prepared: what is submitted next goes out as one batch. */
static void
ready(struct pst_db *db)
{
	uint64_t end = test_now_ns() + UINT64_C(10000000000);
	while (pst_db_counters(db)[PST_C_DB_CONNECTS] == 0 || !pst_db_connected(db)) {
		cr_assert(lt(u64, test_now_ns(), end), "no connection: %s", pst_db_last_error(db));
		if (pst_db_poll(db, test_now_ns()) == 0)
			usleep(100);
	}
}

/* The answer to (type, user, shard) among the completions; fails when there is none. */
static const union msg *
answer_of(uint16_t type, uint64_t user, uint16_t shard, uint32_t nth)
{
	for (uint32_t k = 0; k < sink.n; k++) {
		const union msg *m = &sink.msgs[k];
		if (m->hdr.type != type || m->hdr.shard != shard)
			continue;
		uint64_t u = type == WIRE_HYDRATE_USER ? m->hyd.state.user
			     : type == WIRE_FLUSH_COMPLETE ? m->fc.user
							   : m->rel.user;
		if (u == user && nth-- == 0)
			return m;
	}
	cr_assert(false, "no answer of type %u for user %" PRIu64, type, user);
	return NULL;
}

/* Goal: one multi-row flush and one multi-row hydrate answer every request with the outcome
 * it gets alone: written, our own write already there (repeat), conflict (a foreign write),
 * OWNED with the holder, NEW for an unknown user, OK for a free row.
 * Method: prepare six users one request at a time; then submit three flushes and three
 * hydrates together (one batch: two multi-row statements); check each answer, the rows, the
 * ledger, and that the requests went out in multi-row statements. */
Test(pst_db, group_mixed_outcomes)
{
	struct pst_db *db = db_make(0);
	/* 16001 held by 1 (to be written); 16002 held by 1, flushed at epoch 2 (to repeat);
	 * 16003 held by 1, a foreign write behind our back (conflict); 16004 held by shard 2
	 * (OWNED); 16006 free (OK); 16005 unknown (NEW). */
	hydrate(db, 1, 16001, 1);
	hydrate(db, 1, 16002, 1);
	hydrate(db, 1, 16003, 1);
	hydrate(db, 2, 16004, 1);
	hydrate(db, 1, 16006, 1);
	drive(db, 5, 10);
	release(db, 1, 16006, 1);
	struct wire_user_state s2 = state_make(16002, 0, 2, 20);
	cr_assert(eq(int, flush(db, 1, 2, &s2), 0));
	drive(db, 7, 10);
	char st[6];
	q_exec(st, "UPDATE accounts SET version = version + 1 WHERE user_id = 16003");
	cr_assert(eq(str, st, "00000"));
	uint64_t stmts = pst_db_counters(db)[PST_C_DB_STATEMENTS];
	uint64_t grouped = pst_db_counters(db)[PST_C_DB_GROUPED];
	memset(&sink, 0, sizeof(sink));

	struct wire_user_state s1 = state_make(16001, 0, 1, 10);
	struct wire_user_state s3 = state_make(16003, 0, 3, 30);
	cr_assert(eq(int, flush(db, 1, 2, &s1), 0));
	cr_assert(eq(int, flush(db, 1, 2, &s2), 0)); /* the same again: found in the ledger */
	cr_assert(eq(int, flush(db, 1, 2, &s3), 0));
	hydrate(db, 1, 16004, 5);
	hydrate(db, 1, 16005, 5);
	hydrate(db, 1, 16006, 5);
	drive(db, 6, 10);

	const struct wire_flush_complete *f = &answer_of(WIRE_FLUSH_COMPLETE, 16001, 1, 0)->fc;
	cr_assert(eq(u8, f->status, WIRE_FLUSH_OK));
	cr_assert(eq(u64, f->version, 1));
	f = &answer_of(WIRE_FLUSH_COMPLETE, 16002, 1, 0)->fc;
	cr_assert(eq(u8, f->status, WIRE_FLUSH_OK));
	cr_assert(eq(u64, f->version, 1));
	f = &answer_of(WIRE_FLUSH_COMPLETE, 16003, 1, 0)->fc;
	cr_assert(eq(u8, f->status, WIRE_FLUSH_CONFLICT));
	cr_assert(eq(u64, f->version, 1));
	const struct wire_hydrate_user *h = &answer_of(WIRE_HYDRATE_USER, 16004, 1, 0)->hyd;
	cr_assert(eq(u8, h->status, WIRE_HYD_OWNED));
	cr_assert(eq(u16, h->owner_shard, 2));
	cr_assert(eq(u64, h->epoch, 5));
	h = &answer_of(WIRE_HYDRATE_USER, 16005, 1, 0)->hyd;
	cr_assert(eq(u8, h->status, WIRE_HYD_NEW));
	cr_assert(eq(u32, h->state.balance_count, 0));
	h = &answer_of(WIRE_HYDRATE_USER, 16006, 1, 0)->hyd;
	cr_assert(eq(u8, h->status, WIRE_HYD_NEW)); /* claimed again, never written: NEW */

	const uint64_t *c = pst_db_counters(db);
	cr_assert(eq(u64, c[PST_C_DB_FLUSH_OK], 2));
	cr_assert(eq(u64, c[PST_C_DB_FLUSH_REPEAT], 1));
	cr_assert(eq(u64, c[PST_C_DB_FLUSH_CONFLICT], 1));
	/* Three flushes and three hydrates in one statement each; then the conflict's recheck. */
	cr_assert(eq(u64, c[PST_C_DB_GROUPED] - grouped, 6));
	cr_assert(eq(u64, c[PST_C_DB_STATEMENTS] - stmts, 3));
	cr_assert(eq(i64, q_i64("SELECT totals[1] FROM accounts WHERE user_id = 16001"), 10));
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 16003"), 1));
	cr_assert(eq(i64, q_i64("SELECT totals[1] FROM accounts WHERE user_id = 16003"), -999));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM account_flushes WHERE user_id BETWEEN 16001 "
				"AND 16003"),
		     2));
	cr_assert(eq(i64, q_i64("SELECT owner_shard * 100 + owner_epoch FROM accounts "
				"WHERE user_id = 16004"),
		     201));
	cr_assert(eq(i64, q_i64("SELECT owner_shard * 100 + owner_epoch FROM accounts "
				"WHERE user_id = 16006"),
		     105));
	cr_assert(eq(u32, pst_db_pending(db), 0));
	pst_db_destroy(db);
}

/* Goal: one request of a multi-row statement fails permanently: the batch rolls back, every
 * request of it is re-run alone, the bad one is answered ERROR and every other one exactly
 * as it would be alone (written once, claimed, released), including requests of other kinds
 * in the same batch.
 * Method: the superuser adds a CHECK that one of four flushes violates; submit four flushes,
 * two hydrates and a release (after its user's flush) together; check answers and rows. */
Test(pst_db, group_with_a_failing_row)
{
	const char *pgdir = getenv("PST_TEST_PGDIR"), *pgctl = getenv("PST_TEST_PGCTL");
	if (pgdir == NULL || pgctl == NULL)
		cr_skip_test("PST_TEST_PGDIR / PST_TEST_PGCTL not set");
	struct pst_db *db = db_make(0);
	for (uint64_t u = 17001; u <= 17006; u++)
		hydrate(db, 1, u, 1);
	drive(db, 6, 10);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "'%s' psql '%s' -c 'ALTER TABLE accounts ADD CONSTRAINT "
		 "pst_test_group CHECK (user_seq < 1000000) NOT VALID' >/dev/null", pgctl, pgdir);
	cr_assert(eq(int, system(cmd), 0));
	memset(&sink, 0, sizeof(sink));
	uint64_t failures = pst_db_counters(db)[PST_C_DB_BATCH_FAILURES];
	for (uint64_t u = 17001; u <= 17004; u++) {
		struct wire_user_state s = state_make(u, 0, u == 17003 ? 5000000 : 1, 40);
		cr_assert(eq(int, flush(db, 1, 2, &s), 0));
	}
	hydrate(db, 1, 17005, 3);
	hydrate(db, 1, 17006, 3);
	release(db, 1, 17002, 2);
	drive(db, 7, 10);
	snprintf(cmd, sizeof(cmd), "'%s' psql '%s' -c 'ALTER TABLE accounts DROP CONSTRAINT "
		 "pst_test_group' >/dev/null", pgctl, pgdir);
	cr_assert(eq(int, system(cmd), 0));
	for (uint64_t u = 17001; u <= 17004; u++) {
		const struct wire_flush_complete *f = &answer_of(WIRE_FLUSH_COMPLETE, u, 1, 0)->fc;
		cr_assert(eq(u8, f->status, u == 17003 ? WIRE_FLUSH_ERROR : WIRE_FLUSH_OK),
			  "user %" PRIu64, u);
	}
	/* Claimed again, never written (version 0): NEW. */
	cr_assert(eq(u8, answer_of(WIRE_HYDRATE_USER, 17005, 1, 0)->hyd.status, WIRE_HYD_NEW));
	cr_assert(eq(u8, answer_of(WIRE_HYDRATE_USER, 17006, 1, 0)->hyd.status, WIRE_HYD_NEW));
	cr_assert(eq(u8, answer_of(WIRE_RELEASE_DONE, 17002, 1, 0)->rel.status, WIRE_FLUSH_OK));
	const uint64_t *c = pst_db_counters(db);
	cr_assert(ge(u64, c[PST_C_DB_BATCH_FAILURES], failures + 1));
	cr_assert(eq(u64, c[PST_C_DB_FLUSH_ERROR], 1));
	cr_assert(eq(u64, c[PST_C_DB_RELEASE_OK], 1));
	cr_assert(strstr(pst_db_last_error(db), "pst_test_group") != NULL, "%s",
		  pst_db_last_error(db));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM accounts WHERE user_id BETWEEN 17001 AND "
				"17004 AND version = 1"),
		     3));
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 17003"), 0));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM account_flushes WHERE user_id BETWEEN "
				"17001 AND 17004"),
		     3));
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 17002"), -999));
	cr_assert(eq(i64, q_i64("SELECT owner_epoch FROM accounts WHERE user_id = 17005"), 3));
	pst_db_destroy(db);
}

/* Goal: requests about one user in one batch run in submission order, each in its own
 * statement, while the other users' requests around them still share multi-row ones.
 * Method: in one batch, for user 18001: hydrate (NEW), flush at epoch 2 (v1), flush at epoch
 * 3 expecting v0 (our own ledgered write ahead of it: written, v2); interleaved with
 * hydrates and flushes of 18002..18005. Answers in order, the row at v2 with the last money. */
Test(pst_db, same_user_twice_in_a_batch)
{
	struct pst_db *db = db_make_lanes(0, true); /* one connection: one batch */
	hydrate(db, 1, 18002, 1);
	hydrate(db, 1, 18003, 1);
	drive(db, 2, 10);
	ready(db);
	memset(&sink, 0, sizeof(sink));
	uint64_t batches = pst_db_counters(db)[PST_C_DB_BATCHES];
	struct wire_user_state a = state_make(18001, 0, 1, 100);
	struct wire_user_state b = state_make(18001, 0, 2, 200);
	struct wire_user_state x2 = state_make(18002, 0, 1, 2);
	struct wire_user_state x3 = state_make(18003, 0, 1, 3);
	hydrate(db, 1, 18001, 1);
	hydrate(db, 1, 18004, 1);
	cr_assert(eq(int, flush(db, 1, 2, &a), 0));
	cr_assert(eq(int, flush(db, 1, 2, &x2), 0));
	cr_assert(eq(int, flush(db, 1, 3, &b), 0));
	cr_assert(eq(int, flush(db, 1, 2, &x3), 0));
	hydrate(db, 1, 18005, 1);
	drive(db, 7, 10);
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_BATCHES] - batches, 1), "one batch");
	cr_assert(eq(u8, answer_of(WIRE_HYDRATE_USER, 18001, 1, 0)->hyd.status, WIRE_HYD_NEW));
	const struct wire_flush_complete *f1 = &answer_of(WIRE_FLUSH_COMPLETE, 18001, 1, 0)->fc;
	const struct wire_flush_complete *f2 = &answer_of(WIRE_FLUSH_COMPLETE, 18001, 1, 1)->fc;
	cr_assert(eq(u64, f1->epoch, 2));
	cr_assert(eq(u8, f1->status, WIRE_FLUSH_OK));
	cr_assert(eq(u64, f1->version, 1));
	cr_assert(eq(u64, f2->epoch, 3));
	cr_assert(eq(u8, f2->status, WIRE_FLUSH_OK));
	cr_assert(eq(u64, f2->version, 2));
	cr_assert(eq(u8, answer_of(WIRE_FLUSH_COMPLETE, 18002, 1, 0)->fc.status, WIRE_FLUSH_OK));
	cr_assert(eq(u8, answer_of(WIRE_FLUSH_COMPLETE, 18003, 1, 0)->fc.status, WIRE_FLUSH_OK));
	cr_assert(eq(u8, answer_of(WIRE_HYDRATE_USER, 18004, 1, 0)->hyd.status, WIRE_HYD_NEW));
	cr_assert(eq(u8, answer_of(WIRE_HYDRATE_USER, 18005, 1, 0)->hyd.status, WIRE_HYD_NEW));
	cr_assert(eq(i64, q_i64("SELECT version FROM accounts WHERE user_id = 18001"), 2));
	cr_assert(eq(i64, q_i64("SELECT totals[1] FROM accounts WHERE user_id = 18001"), 200));
	cr_assert(eq(i64, q_i64("SELECT owner_epoch FROM accounts WHERE user_id = 18001"), 3));
	cr_assert(eq(i64, q_i64("SELECT count(*) FROM account_flushes WHERE user_id = 18001"), 2));
	/* hydrate {18001, 18004, 18005}, flush {18001, 18002, 18003}, flush {18001}. */
	cr_assert(ge(u64, pst_db_counters(db)[PST_C_DB_GROUPED], 6));
	pst_db_destroy(db);
}

/* Goal: a release and a later hydrate of the same user by another shard in one batch behave
 * as if run one after the other: the hydrate finds the claim free (OK, not OWNED), even
 * though a multi-row hydrate of other users comes before the release in the same batch.
 * Method: shard 1 hydrates and flushes 19001; then, together: shard 2 hydrates 19002 and
 * 19003, shard 1 releases 19001, shard 2 hydrates 19001 and 19004. */
Test(pst_db, release_then_hydrate_in_one_batch)
{
	struct pst_db *db = db_make_lanes(0, true); /* one connection: one batch */
	hydrate(db, 1, 19001, 4);
	drive(db, 1, 10);
	struct wire_user_state s = state_make(19001, 0, 7, 70);
	cr_assert(eq(int, flush(db, 1, 5, &s), 0));
	drive(db, 2, 10);
	cr_assert(eq(u8, sink.msgs[1].fc.status, WIRE_FLUSH_OK));
	ready(db);
	memset(&sink, 0, sizeof(sink));
	uint64_t batches = pst_db_counters(db)[PST_C_DB_BATCHES];
	hydrate(db, 2, 19002, 1);
	hydrate(db, 2, 19003, 1);
	release(db, 1, 19001, 5);
	hydrate(db, 2, 19001, 1);
	hydrate(db, 2, 19004, 1);
	drive(db, 5, 10);
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_BATCHES] - batches, 1), "one batch");
	cr_assert(eq(u8, answer_of(WIRE_RELEASE_DONE, 19001, 1, 0)->rel.status, WIRE_FLUSH_OK));
	const struct wire_hydrate_user *h = &answer_of(WIRE_HYDRATE_USER, 19001, 2, 0)->hyd;
	cr_assert(eq(u8, h->status, WIRE_HYD_OK));
	cr_assert(eq(u64, h->state.version, 1));
	cr_assert(eq(i64, h->state.balances[0].total, 70));
	cr_assert(eq(u8, answer_of(WIRE_HYDRATE_USER, 19002, 2, 0)->hyd.status, WIRE_HYD_NEW));
	cr_assert(eq(u8, answer_of(WIRE_HYDRATE_USER, 19004, 2, 0)->hyd.status, WIRE_HYD_NEW));
	cr_assert(eq(i64, q_i64("SELECT owner_shard * 100 + owner_epoch FROM accounts "
				"WHERE user_id = 19001"),
		     201));
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_RELEASE_OK], 1));
	pst_db_destroy(db);
}

/* Goal (issue 17, migration 0007): the rate-limit bucket travels with the row, through the
 * single-row and the multi-row statements alike: what a flush wrote (rl_tokens any bigint,
 * the OMS clamps it; rl_tokens_ns a cluster time) is what the next hydration reads; a new
 * row says nothing was saved (time 0); a time that is no cluster time is refused on submit
 * (above INT64_MAX) and by the table (negative).
 * Method: single-row: hydrate 21001 (NEW, time 0), flush a negative figure, release,
 * hydrate again. Multi-row: 21002 and 21003 flushed together in one batch, released, then
 * hydrated together (grouped statements, counted); the columns checked in the table. */
Test(pst_db, rate_limit_bucket_round_trip)
{
	const uint64_t t = UINT64_C(1764770000123456789);
	struct pst_db *db = db_make(0);
	hydrate(db, 1, 21001, 1);
	drive(db, 1, 10);
	cr_assert(eq(u8, sink.msgs[0].hyd.status, WIRE_HYD_NEW));
	cr_assert(eq(u64, sink.msgs[0].hyd.state.rl_tokens_ns, 0));
	struct wire_user_state s = state_make(21001, 0, 1, 10);
	s.rl_tokens = -7;
	s.rl_tokens_ns = t;
	cr_assert(eq(int, flush(db, 1, 2, &s), 0));
	drive(db, 2, 10);
	cr_assert(eq(u8, sink.msgs[1].fc.status, WIRE_FLUSH_OK));
	release(db, 1, 21001, 2);
	drive(db, 3, 10);
	hydrate(db, 1, 21001, 3);
	drive(db, 4, 10);
	cr_assert(eq(u8, sink.msgs[3].hyd.status, WIRE_HYD_OK));
	cr_assert(eq(i64, sink.msgs[3].hyd.state.rl_tokens, -7));
	cr_assert(eq(u64, sink.msgs[3].hyd.state.rl_tokens_ns, t));
	s.rl_tokens_ns = (uint64_t)INT64_MAX + 1;
	cr_assert(eq(int, flush(db, 1, 3, &s), -EINVAL));
	char st[6];
	q_exec(st, "UPDATE accounts SET rl_tokens_ns = -1 WHERE user_id = 21001");
	cr_assert(eq(str, st, "23514")); /* check_violation */

	hydrate(db, 1, 21002, 1);
	hydrate(db, 1, 21003, 1);
	drive(db, 6, 10);
	ready(db);
	memset(&sink, 0, sizeof(sink));
	uint64_t grouped = pst_db_counters(db)[PST_C_DB_GROUPED];
	struct wire_user_state a = state_make(21002, 0, 1, 20);
	struct wire_user_state b = state_make(21003, 0, 1, 30);
	a.rl_tokens = 1500000000;
	a.rl_tokens_ns = t + 1;
	b.rl_tokens = INT64_MAX;
	b.rl_tokens_ns = t + 2;
	cr_assert(eq(int, flush(db, 1, 2, &a), 0));
	cr_assert(eq(int, flush(db, 1, 2, &b), 0));
	drive(db, 2, 10);
	cr_assert(eq(u8, answer_of(WIRE_FLUSH_COMPLETE, 21002, 1, 0)->fc.status, WIRE_FLUSH_OK));
	cr_assert(eq(u8, answer_of(WIRE_FLUSH_COMPLETE, 21003, 1, 0)->fc.status, WIRE_FLUSH_OK));
	cr_assert(eq(i64, q_i64("SELECT rl_tokens FROM accounts WHERE user_id = 21002"),
		     1500000000));
	cr_assert(eq(i64, q_i64("SELECT rl_tokens_ns FROM accounts WHERE user_id = 21003"),
		     (int64_t)t + 2));
	release(db, 1, 21002, 2);
	release(db, 1, 21003, 2);
	drive(db, 4, 10);
	memset(&sink, 0, sizeof(sink));
	hydrate(db, 2, 21002, 1);
	hydrate(db, 2, 21003, 1);
	drive(db, 2, 10);
	const struct wire_hydrate_user *h = &answer_of(WIRE_HYDRATE_USER, 21002, 2, 0)->hyd;
	cr_assert(eq(u8, h->status, WIRE_HYD_OK));
	cr_assert(eq(i64, h->state.rl_tokens, 1500000000));
	cr_assert(eq(u64, h->state.rl_tokens_ns, t + 1));
	h = &answer_of(WIRE_HYDRATE_USER, 21003, 2, 0)->hyd;
	cr_assert(eq(u8, h->status, WIRE_HYD_OK));
	cr_assert(eq(i64, h->state.rl_tokens, INT64_MAX));
	cr_assert(eq(u64, h->state.rl_tokens_ns, t + 2));
	/* The two flushes, the two releases and the two hydrations: multi-row statements. */
	cr_assert(ge(u64, pst_db_counters(db)[PST_C_DB_GROUPED] - grouped, 6));
	cr_assert(eq(u32, pst_db_pending(db), 0));
	pst_db_destroy(db);
}

/* A blocking connection holding a row lock on user's account (a slow writer elsewhere). */
static PGconn *
lock_account(uint64_t user)
{
	PGconn *c = PQconnectdb(conninfo);
	cr_assert(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, "BEGIN");
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT 1 FROM accounts WHERE user_id = %" PRIu64 " FOR UPDATE",
		 user);
	r = PQexec(c, sql);
	cr_assert(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1, "%s",
		  PQerrorMessage(c));
	PQclear(r);
	return c;
}

static void
unlock_account(PGconn *c)
{
	PGresult *r = PQexec(c, "COMMIT");
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/* Poll for about ms milliseconds whatever arrives. */
static void
drive_for(struct pst_db *db, uint32_t ms)
{
	uint64_t end = test_now_ns() + (uint64_t)ms * 1000000u;
	while (test_now_ns() < end)
		if (pst_db_poll(db, db_now()) == 0)
			usleep(100);
}

/* Goal: a hydrate does not wait behind other users' writes (the read lane), and a user's
 * requests keep their order across the lanes. Method: 20001's row is locked by another
 * session, so its flush stalls the write lane; a hydrate of the new user 20002 is answered
 * while it stalls. With one connection the same hydrate waits for the lock (so the test can
 * tell the two apart). Then, with the lock gone: shard 1 releases 20003 and shard 2 hydrates
 * it at once; the hydrate follows the release onto the write lane (counted) and finds the
 * claim free, with the flushed money. */
Test(pst_db, reads_do_not_wait_behind_writes)
{
	for (int one = 1; one >= 0; one--) {
		memset(&sink, 0, sizeof(sink));
		struct pst_db *db = db_make_lanes(0, one == 1);
		uint64_t user = one ? 20011 : 20001, fresh = one ? 20012 : 20002;
		hydrate(db, 1, user, 1);
		drive(db, 1, 10);
		ready(db);
		PGconn *lock = lock_account(user);
		struct wire_user_state s = state_make(user, 0, 3, 30);
		cr_assert(eq(int, flush(db, 1, 2, &s), 0));
		drive_for(db, 50); /* the flush is sent and waits for the lock */
		hydrate(db, 1, fresh, 1);
		drive_for(db, 500);
		if (one) {
			cr_assert(eq(u32, sink.n, 1), "one connection: the hydrate waits");
		} else {
			cr_assert(eq(u32, sink.n, 2), "the read lane answers while the write lane waits");
			cr_assert(eq(u8, sink.msgs[1].hyd.status, WIRE_HYD_NEW));
			cr_assert(eq(u64, sink.msgs[1].hyd.state.user, fresh));
			cr_assert(ge(u64, pst_db_counters(db)[PST_C_DB_READ_BATCHES], 1));
		}
		unlock_account(lock);
		drive(db, 3, 10);
		cr_assert(eq(u8, answer_of(WIRE_FLUSH_COMPLETE, user, 1, 0)->fc.status, WIRE_FLUSH_OK));
		cr_assert(eq(u8, answer_of(WIRE_HYDRATE_USER, fresh, 1, 0)->hyd.status, WIRE_HYD_NEW));
		pst_db_destroy(db);
	}

	struct pst_db *db = db_make(0);
	memset(&sink, 0, sizeof(sink));
	hydrate(db, 1, 20003, 4);
	drive(db, 1, 10);
	struct wire_user_state s = state_make(20003, 0, 7, 70);
	cr_assert(eq(int, flush(db, 1, 5, &s), 0));
	drive(db, 2, 10);
	ready(db);
	uint64_t follows = pst_db_counters(db)[PST_C_DB_LANE_FOLLOWS];
	release(db, 1, 20003, 5);
	hydrate(db, 2, 20003, 1);
	hydrate(db, 2, 20004, 1);
	drive(db, 5, 10);
	cr_assert(eq(u64, pst_db_counters(db)[PST_C_DB_LANE_FOLLOWS] - follows, 1));
	cr_assert(eq(u8, answer_of(WIRE_RELEASE_DONE, 20003, 1, 0)->rel.status, WIRE_FLUSH_OK));
	const struct wire_hydrate_user *h = &answer_of(WIRE_HYDRATE_USER, 20003, 2, 0)->hyd;
	cr_assert(eq(u8, h->status, WIRE_HYD_OK));
	cr_assert(eq(i64, h->state.balances[0].total, 70));
	cr_assert(eq(u8, answer_of(WIRE_HYDRATE_USER, 20004, 2, 0)->hyd.status, WIRE_HYD_NEW));
	pst_db_destroy(db);
}

/* Goal: the schema version this build checks for is the newest migration shipped, and the
 * count is theirs, so the two cannot drift apart. Method: read deploy/pg/migrations. */
Test(pst_schema, version_is_the_newest_migration)
{
	DIR *d = opendir(PST_TEST_MIGRATIONS);
	cr_assert(not(eq(ptr, d, NULL)), "%s", PST_TEST_MIGRATIONS);
	char newest[256] = "";
	int count = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		if (n < 9 || strcmp(e->d_name + n - 4, ".sql") != 0 || e->d_name[4] != '_')
			continue;
		count++;
		char v[256];
		snprintf(v, sizeof(v), "%.*s", (int)(n - 4), e->d_name);
		if (strcmp(v, newest) > 0)
			snprintf(newest, sizeof(newest), "%s", v);
	}
	closedir(d);
	cr_assert(eq(str, newest, PST_SCHEMA_VERSION));
	cr_assert(eq(int, count, PST_SCHEMA_COUNT));
}

/* Goal: the rule — exactly the migrations this build knows, each reason naming both
 * versions. */
Test(pst_schema, rule)
{
	char why[256];
	char n[16];
	snprintf(n, sizeof(n), "%d", PST_SCHEMA_COUNT);
	cr_assert(pst_sql_schema_ok(PST_SCHEMA_VERSION, n, why, sizeof(why)));
	cr_assert(not(pst_sql_schema_ok(NULL, "0", why, sizeof(why))));
	cr_assert(not(eq(ptr, strstr(why, "no migration applied"), NULL)), "%s", why);
	cr_assert(not(pst_sql_schema_ok("9999_later", "9", why, sizeof(why))));
	cr_assert(not(eq(ptr, strstr(why, "9999_later, newer than this omsd knows (" PST_SCHEMA_VERSION),
			 NULL)), "%s", why);
	cr_assert(not(pst_sql_schema_ok("0001_accounts", "1", why, sizeof(why))));
	cr_assert(not(eq(ptr, strstr(why, "lacks migrations"), NULL)), "%s", why);
	cr_assert(not(eq(ptr, strstr(why, "0001_accounts"), NULL)), "%s", why);
	cr_assert(not(eq(ptr, strstr(why, PST_SCHEMA_VERSION), NULL)), "%s", why);
	/* The newest in place but one before it missing. */
	cr_assert(not(pst_sql_schema_ok(PST_SCHEMA_VERSION, "3", why, sizeof(why))));
	cr_assert(not(pst_sql_schema_ok(PST_SCHEMA_VERSION, "x", why, sizeof(why))));
}

/* Run one statement as the migration role (the schema's owner). */
static void
as_migrator(const char *sql)
{
	char conn[512];
	migrator_conninfo(conn, sizeof(conn));
	PGconn *c = PQconnectdb(conn);
	cr_assert(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/* Goal: a database with a migration this build does not know is refused, at start
 * (pst_db_schema_check) and on every connection of the persister, naming both versions;
 * nothing runs on it; once the database is right again the persister serves. An
 * unreachable database is told apart from a wrong one. */
Test(pst_db, schema_mismatch_refused, .timeout = 60)
{
	char why[512];
	cr_assert(eq(int, pst_db_schema_check(conninfo, 5, why, sizeof(why)), 0), "%s", why);
	cr_assert(eq(int, pst_db_schema_check("host=/nonexistent-dir dbname=omsd", 2, why,
					      sizeof(why)), -EHOSTUNREACH));
	cr_assert(not(eq(ptr, strstr(why, "not reachable"), NULL)), "%s", why);

	as_migrator("INSERT INTO schema_migrations (version) VALUES ('9999_from_the_future')");
	cr_assert(eq(int, pst_db_schema_check(conninfo, 5, why, sizeof(why)), -EPROTO));
	cr_assert(not(eq(ptr, strstr(why, "9999_from_the_future"), NULL)), "%s", why);
	cr_assert(not(eq(ptr, strstr(why, PST_SCHEMA_VERSION), NULL)), "%s", why);

	struct pst_db *db = db_make(0);
	hydrate(db, 1, 22001, 1);
	uint64_t end = test_now_ns() + UINT64_C(1000000000);
	while (test_now_ns() < end)
		if (pst_db_poll(db, test_now_ns()) == 0)
			usleep(100);
	cr_assert(not(pst_db_connected(db)));
	cr_assert(ge(u64, pst_db_counters(db)[PST_C_DB_SCHEMA_REFUSED], 1));
	cr_assert(not(eq(ptr, strstr(pst_db_last_error(db), "9999_from_the_future"), NULL)), "%s",
		  pst_db_last_error(db));
	cr_assert(eq(i64, q_i64("SELECT owner_shard FROM accounts WHERE user_id = 22001"), -999),
		  "nothing ran on the wrong schema (the account is not claimed)");

	as_migrator("DELETE FROM schema_migrations WHERE version = '9999_from_the_future'");
	drive(db, 1, 10);
	const union msg *m = answer_of(WIRE_HYDRATE_USER, 22001, 1, 0);
	/* Answered ERROR if it outlived the hydrate deadline while refused, else NEW: either
	 * way it was answered, and the next one is served. */
	cr_assert(m->hyd.status == WIRE_HYD_NEW || m->hyd.status == WIRE_HYD_ERROR);
	ready(db);
	memset(&sink, 0, sizeof(sink));
	hydrate(db, 1, 22002, 1);
	drive(db, 1, 10);
	cr_assert(eq(u8, sink.msgs[0].hyd.status, WIRE_HYD_NEW));
	cr_assert(pst_db_connected(db));
	pst_db_destroy(db);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The batch state machine on one libpq connection (a lane, pst_db_int.h) in pipeline mode.
 * Each lane owns its pipe — the ring of what is in flight, in the order libpq will answer it: a statement (its request
 * slot), a statement being prepared, or a Sync — and the batch of statements whose results
 * came back but whose transaction is not over yet.
 *
 *  - A batch is up to batch_max requests followed by one Sync: one implicit transaction,
 *    one commit (one WAL fsync) for the batch. Its answers are only final at the Sync: until
 *    then the transaction may still roll back, so completions are made at the Sync.
 *  - Inside a batch, hydrates, flushes and releases share one multi-row statement per kind
 *    (a group, pst_db_sql.c) wherever that keeps every user's requests in submission order
 *    (batch_plan): requests of different users touch disjoint rows and commute, requests of
 *    one user run one statement after the other, and no statement holds a user twice. So
 *    each request is answered as if the batch had run one request after another. A request
 *    alone in its statement, a lookup, or one being isolated is sent as the single-row
 *    statement.
 *  - A statement error aborts the whole batch (everything before it rolls back). The batch's
 *    requests are re-sent one per Sync, each as the single-row statement, so a group's bad
 *    request is found; a statement that fails alone with a permanent error (integrity, data,
 *    privilege) is answered ERROR, a transient one is retried.
 *  - A lost connection (pst_batch_abort) puts every unanswered request back at the front of
 *    the queue in its original order; the connection's owner (pst_db.c) reconnects.
 *
 * What the bytes of a statement or a row mean is pst_db_sql.c's; the requests themselves
 * live in the table (pst_db_req.c). This room only moves them through the pipe.
 */
#include <errno.h>

#include "common/check.h"
#include "persist/pst_db_int.h"

#define RETRIES_MAX 8 /* transient failures of one statement before it is answered ERROR */

static const char SQL_SESSION_SETUP[] = "SET plan_cache_mode = force_generic_plan";

/* ------------------------------------------------------------------------------- pipe -- */

static void
pipe_push(struct pst_lane *l, uint32_t item, uint64_t now_ns)
{
	CHECK(l->pipe_count < l->pipe_cap);
	uint32_t at = (l->pipe_head + l->pipe_count) % l->pipe_cap;
	l->pipe[at] = item;
	l->pipe_ns[at] = now_ns;
	l->pipe_count++;
}

static uint32_t
pipe_pop(struct pst_lane *l)
{
	CHECK(l->pipe_count > 0);
	uint32_t item = l->pipe[l->pipe_head];
	l->pipe_head = (l->pipe_head + 1) % l->pipe_cap;
	l->pipe_count--;
	l->head_has_result = false;
	return item;
}

bool
pst_batch_overdue(const struct pst_db *db, const struct pst_lane *l, uint64_t now_ns)
{
	return l->pipe_count > 0 &&
	       now_ns - l->pipe_ns[l->pipe_head] > db->cfg.batch_timeout_ns;
}

/* Move the requests of the statement whose first slot is head onto f, in order. */
static void
chain_push(struct pst_db *db, struct pst_fifo *f, uint32_t head)
{
	uint32_t i = head;
	while (i != PST_SLOT_NONE) {
		uint32_t next = db->reqs[i].next; /* pst_fifo_push overwrites it */
		pst_fifo_push(db, f, i);
		i = next;
	}
}

/* ------------------------------------------------------------------------------- send -- */

int
pst_batch_prepare(struct pst_lane *l, uint64_t now_ns)
{
	CHECK(l->conn != NULL);
	CHECK(l->pipe_count == 0);
	CHECK(l->syncs_out == 0);
	/* Generic plans for this session's statements. A custom plan of a multi-row statement
	 * folds its arrays into constants: planning them costs more than running them, and the
	 * planner may then filter the whole accounts table with `= ANY (constant)` instead of
	 * looking the group's users up in the index. The generic plan looks them up whatever the
	 * table's size (docs/persist.md, "Multi-row statements"). */
	if (!PQsendQueryParams(l->conn, SQL_SESSION_SETUP, 0, NULL, NULL, NULL, NULL, 0))
		return -1;
	pipe_push(l, PST_ITEM_PREPARE, now_ns);
	for (uint32_t k = 0; k < PST_REQ_KINDS; k++) {
		if (!PQsendPrepare(l->conn, pst_sql_stmts[k].name, pst_sql_stmts[k].text, 0, NULL))
			return -1;
		pipe_push(l, PST_ITEM_PREPARE, now_ns);
	}
	for (uint32_t k = 0; k < PST_GROUP_KINDS; k++) {
		if (!PQsendPrepare(l->conn, pst_sql_group_stmts[k].name, pst_sql_group_stmts[k].text,
				   0, NULL))
			return -1;
		pipe_push(l, PST_ITEM_PREPARE, now_ns);
	}
	/* The schema this build was made for, checked on every connection: a database migrated
	 * behind the node's back (or not yet) is refused before any request runs on it. */
	if (!PQsendQueryParams(l->conn, pst_sql_schema_query, 0, NULL, NULL, NULL, NULL, 0))
		return -1;
	pipe_push(l, PST_ITEM_SCHEMA, now_ns);
	if (!PQpipelineSync(l->conn))
		return -1;
	pipe_push(l, PST_ITEM_SYNC, now_ns);
	l->syncs_out++;
	return 0;
}

static int
send_req(struct pst_db *db, struct pst_lane *l, uint32_t i)
{
	const struct pst_req *r = &db->reqs[i];
	struct pst_sql_params p;
	if (r->kind == PST_REQ_LOOKUP)
		pst_sql_encode_lookup(&p, r->user, r->xfer_id);
	else if (r->kind == PST_REQ_RELEASE)
		pst_sql_encode_release(&p, r->user, r->shard, r->epoch, r->handoff, r->to_shard);
	else
		pst_sql_encode(&p, r->kind, r->user, r->shard, r->epoch, &r->us);
	return PQsendQueryPrepared(l->conn, p.stmt, (int)p.count, p.values, NULL, NULL, 0) ? 0
											  : -1;
}

static void
item_fill(struct pst_sql_item *it, const struct pst_req *r)
{
	it->user = r->user;
	it->epoch = r->epoch;
	it->shard = r->shard;
	it->handoff = r->handoff != 0;
	it->to_shard = r->to_shard;
	it->us = &r->us;
}

/* The statement after the last one of this batch's plan that holds user (0: user is not in
 * the plan yet). The user table is open addressing, emptied by a new generation per batch. */
static uint32_t *
plan_user_slot(struct pst_db *db, uint64_t user)
{
	uint32_t mask = db->plan_user_mask;
	uint32_t b = (uint32_t)((user * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & mask;
	for (uint32_t probe = 0; probe <= mask; probe++, b = (b + 1) & mask) {
		struct pst_plan_user *u = &db->plan_users[b];
		if (u->gen != db->plan_gen) {
			u->gen = db->plan_gen;
			u->user = user;
			u->stmt_after = 0;
			return &u->stmt_after;
		}
		if (u->user == user)
			return &u->stmt_after;
	}
	CHECK(false); /* twice as many slots as requests in a batch */
	return NULL;
}

/* Take the next batch off the queue and sort it into statements (db->plan, *stmts of them):
 * each request joins the first statement of its kind after the last one that holds its
 * user, or opens a new one at the end. So every user's requests keep their submission order
 * (and no statement holds a user twice), while requests of different users, which touch
 * disjoint rows (an account, its ledger and transfers rows) and so commute, share the
 * multi-row statement of their kind: an interleaved stream of hydrates, flushes and releases
 * becomes about three statements a batch. A lookup, or a request being isolated (alone in its
 * batch), has a statement of its own. Returns the requests taken. */
static uint32_t
batch_plan(struct pst_db *db, struct pst_lane *l, uint32_t *stmts)
{
	uint32_t n = 0, m = 0;
	if (++db->plan_gen == 0) {
		/* After 2^32 batches: start the table over rather than meet an old generation. */
		memset(db->plan_users, 0, (db->plan_user_mask + 1) * sizeof(*db->plan_users));
		db->plan_gen = 1;
	}
	while (l->queue.head != PST_SLOT_NONE && n < db->cfg.batch_max) {
		const struct pst_req *r = &db->reqs[l->queue.head];
		bool isolate = r->isolate != 0;
		if (isolate && n > 0)
			break; /* a suspect statement goes alone */
		uint32_t i = pst_fifo_pop(db, &l->queue);
		DCHECK(db->reqs[i].phase == PST_PHASE_QUEUED);
		uint32_t *after = plan_user_slot(db, r->user);
		uint32_t k = m;
		if (r->kind != PST_REQ_LOOKUP && !isolate) {
			for (k = *after; k < m; k++)
				if (db->plan[k].kind == r->kind && !db->plan[k].alone)
					break;
		}
		struct pst_plan_stmt *st = &db->plan[k];
		db->reqs[i].next = PST_SLOT_NONE;
		if (k == m) {
			*st = (struct pst_plan_stmt){.head = i, .tail = i, .count = 1,
						     .kind = r->kind,
						     .alone = r->kind == PST_REQ_LOOKUP || isolate};
			m++;
		} else {
			DCHECK(!st->alone);
			db->reqs[st->tail].next = i;
			st->tail = i;
			st->count++;
		}
		*after = k + 1;
		n++;
		if (isolate)
			break;
	}
	DCHECK(m <= n);
	*stmts = m;
	return n;
}

/* Send planned statement st (its requests chained through next; the head is the pipe
 * item). 0 or -1 (the connection failed). */
static int
stmt_send(struct pst_db *db, struct pst_lane *l, const struct pst_plan_stmt *st, uint64_t now_ns)
{
	CHECK(st->count >= 1);
	CHECK(st->count <= db->cfg.batch_max);
	if (st->count == 1) {
		if (send_req(db, l, st->head) < 0)
			return -1;
	} else {
		uint32_t k = 0;
		for (uint32_t i = st->head; i != PST_SLOT_NONE; i = db->reqs[i].next)
			item_fill(&db->items[k++], &db->reqs[i]);
		CHECK(k == st->count);
		struct pst_sql_group g = {.buf = db->group_buf, .rows_max = db->cfg.batch_max};
		pst_sql_encode_group(&g, st->kind, db->items, st->count);
		if (!PQsendQueryPrepared(l->conn, g.stmt, (int)g.count, g.values, NULL, NULL, 0))
			return -1;
		db->counters[PST_C_DB_GROUPED] += st->count;
	}
	db->counters[PST_C_DB_STATEMENTS]++;
	for (uint32_t i = st->head; i != PST_SLOT_NONE; i = db->reqs[i].next) {
		struct pst_req *r = &db->reqs[i];
		r->phase = PST_PHASE_SENT;
		r->outcome = PST_OUT_NONE;
		r->grouped = st->count > 1;
		if (r->tries++ > 0)
			db->counters[PST_C_DB_RESENT]++;
		else
			r->sent_ns = now_ns;
	}
	pipe_push(l, st->head, now_ns);
	return 0;
}

int
pst_batch_send(struct pst_db *db, struct pst_lane *l, uint64_t now_ns, uint32_t *work)
{
	CHECK(l->conn != NULL);
	CHECK(work != NULL);
	/* Nothing goes out before the connection's set-up came back (its Sync): the schema
	 * check must pass before a request runs on the database. */
	if (!l->prepared)
		return 0;
	while (l->queue.head != PST_SLOT_NONE && l->syncs_out < l->syncs_max) {
		uint32_t m;
		uint32_t n = batch_plan(db, l, &m);
		for (uint32_t k = 0; k < m; k++) {
			if (stmt_send(db, l, &db->plan[k], now_ns) == 0)
				continue;
			/* The connection failed: what was not sent goes back to the front of the
			 * queue, in plan order (each user's order); pst_batch_abort puts the sent
			 * statements before it. */
			struct pst_fifo back;
			pst_fifo_init(&back);
			for (; k < m; k++)
				chain_push(db, &back, db->plan[k].head);
			pst_fifo_prepend(db, &l->queue, &back);
			return -1;
		}
		if (!PQpipelineSync(l->conn))
			return -1;
		pipe_push(l, PST_ITEM_SYNC, now_ns);
		l->syncs_out++;
		db->counters[PST_C_DB_BATCHES]++;
		if (l == &db->lanes[PST_LANE_READ])
			db->counters[PST_C_DB_READ_BATCHES]++;
		*work += n;
	}
	DCHECK(l->syncs_out <= l->syncs_max);
	return 0;
}

/* ---------------------------------------------------------------------------- results -- */

/* Row tuple of a result as text columns from column first on, for the decoders of
 * pst_db_sql.c (a group's answer rows start with the request's ord). */
static void
row_read(const PGresult *res, int tuple, int first, bool present, struct pst_sql_row *row)
{
	int fields = PQnfields(res) - first;
	row->present = present;
	row->col_count = fields > 0 ? (uint32_t)fields : 0;
	for (int k = 0; k < fields && k < PST_SQL_COLS_MAX; k++)
		row->cols[k] = present && !PQgetisnull(res, tuple, first + k)
				       ? PQgetvalue(res, tuple, first + k)
				       : NULL;
}

/* What request r's answer row says. */
static void
row_decode(struct pst_req *r, const struct pst_sql_row *row)
{
	if (r->kind == PST_REQ_HYDRATE)
		r->outcome = pst_sql_hydrate_decode(row, r->user, r->shard, &r->us, &r->owner,
						    &r->hyd_new);
	else if (r->kind == PST_REQ_FLUSH)
		r->outcome = pst_sql_flush_decode(row, r->us.version, &r->version);
	else if (r->kind == PST_REQ_LOOKUP)
		r->outcome = pst_sql_lookup_decode(row, r->xfer_id, &r->xfer);
	else
		r->outcome = pst_sql_release_decode(row);
	DCHECK(r->outcome != PST_OUT_NONE);
}

/* A multi-row statement's rows: row k answers the k-th request of the chain (its ord says
 * so). A row that does not name its request leaves it to be asked again (FAILED_RETRY): a
 * re-run is harmless, every statement being idempotent. */
static void
group_result(struct pst_db *db, uint32_t head, const PGresult *res)
{
	int rows = PQntuples(res);
	bool shaped = PQnfields(res) >= 2;
	uint32_t k = 0;
	for (uint32_t i = head; i != PST_SLOT_NONE; i = db->reqs[i].next, k++) {
		struct pst_req *r = &db->reqs[i];
		DCHECK(r->grouped);
		if (!shaped || (int)k >= rows || PQgetisnull(res, (int)k, 0) ||
		    !pst_sql_group_ord_is(PQgetvalue(res, (int)k, 0), k + 1)) {
			r->outcome = PST_OUT_FAILED_RETRY;
			continue;
		}
		struct pst_sql_row row;
		row_read(res, (int)k, 1, true, &row);
		row_decode(r, &row);
	}
	DCHECK(k >= 2);
}

static void
statement_result(struct pst_db *db, struct pst_lane *l, uint32_t i, const PGresult *res)
{
	struct pst_req *r = &db->reqs[i];
	ExecStatusType st = PQresultStatus(res);
	if (st == PGRES_TUPLES_OK) {
		if (r->grouped) {
			group_result(db, i, res);
			return;
		}
		struct pst_sql_row row;
		row_read(res, 0, 0, PQntuples(res) == 1, &row);
		row_decode(r, &row);
		return;
	}
	l->batch_failed = true;
	if (st == PGRES_PIPELINE_ABORTED)
		return; /* an earlier statement of the batch failed */
	pst_db_error_keep(db, PQresultErrorMessage(res));
	/* A group's error names none of its requests: the batch holds two or more, so each is
	 * re-run alone (batch_done), where the error is its own. */
	uint8_t outcome = pst_sql_permanent(PQresultErrorField(res, PG_DIAG_SQLSTATE))
				  ? PST_OUT_FAILED
				  : PST_OUT_FAILED_RETRY;
	for (uint32_t j = i; j != PST_SLOT_NONE; j = r->grouped ? db->reqs[j].next : PST_SLOT_NONE)
		db->reqs[j].outcome = outcome;
}

/* A Sync came back: the batch's transaction is over, its answers are final. */
static void
batch_done(struct pst_db *db, struct pst_lane *l, uint64_t now_ns)
{
	bool failed = l->batch_failed;
	bool single = l->batch.head != PST_SLOT_NONE && l->batch.head == l->batch.tail;
	l->batch_failed = false;
	if (failed && !single)
		db->counters[PST_C_DB_BATCH_FAILURES]++;
	struct pst_fifo again;
	pst_fifo_init(&again);
	uint32_t i;
	while ((i = pst_fifo_pop(db, &l->batch)) != PST_SLOT_NONE) {
		struct pst_req *r = &db->reqs[i];
		if (r->abandoned) {
			pst_req_free(db, i);
			continue;
		}
		if (failed && !single) {
			/* The whole batch rolled back: every statement goes again, alone. */
			r->isolate = 1;
			r->phase = PST_PHASE_QUEUED;
			pst_fifo_push(db, &again, i);
			continue;
		}
		switch (r->outcome) {
		case PST_OUT_HYD_CLAIMED:
			pst_neg_forget(db, r->user);
			break;
		case PST_OUT_HYD_OWNED:
			pst_neg_note(db, r->user, r->owner, now_ns + db->cfg.neg_ttl_ns);
			break;
		case PST_OUT_HYD_UNKNOWN:
			break; /* not remembered: the operator may open the account any time */
		case PST_OUT_RELEASED:
		case PST_OUT_RELEASE_NOOP:
			pst_neg_forget(db, r->user); /* the claim is free (or ours again) */
			break;
		case PST_OUT_FLUSH_CONFLICT:
			/* READ COMMITTED: when our UPDATE waited for a concurrent writer of the row
			 * (our own earlier attempt, still running on a connection we gave up), it
			 * re-checks the row but the ledger lookup still sees the statement's old
			 * snapshot, so our own write can look foreign. A conflict is final only
			 * when a second statement, started after that writer committed, agrees. */
			if (!r->rechecked) {
				r->rechecked = 1;
				r->phase = PST_PHASE_QUEUED;
				db->counters[PST_C_DB_FLUSH_RECHECKS]++;
				pst_fifo_push(db, &again, i);
				continue;
			}
			break;
		case PST_OUT_FLUSH_WRITTEN:
		case PST_OUT_FLUSH_REPEAT:
		case PST_OUT_XFER_FOUND:
		case PST_OUT_XFER_NOT_FOUND:
		case PST_OUT_FAILED:
		case PST_OUT_BAD_ROW:
			break;
		default: /* PST_OUT_NONE, PST_OUT_HYD_RETRY, PST_OUT_FAILED_RETRY */
			if (r->tries < RETRIES_MAX) {
				r->phase = PST_PHASE_QUEUED;
				pst_fifo_push(db, &again, i);
				continue;
			}
			r->outcome = PST_OUT_FAILED;
			break;
		}
		r->isolate = 0;
		if (r->kind >= 1 && r->kind <= PST_REQ_KINDS && r->sent_ns >= r->accepted_ns &&
		    now_ns >= r->sent_ns) {
			hist_record(&db->lat_queue[r->kind - 1], r->sent_ns - r->accepted_ns);
			hist_record(&db->lat_db[r->kind - 1], now_ns - r->sent_ns);
		}
		pst_req_complete(db, i);
	}
	pst_fifo_prepend(db, &l->queue, &again);
}

int
pst_batch_read(struct pst_db *db, struct pst_lane *l, uint64_t now_ns, uint32_t *work)
{
	CHECK(l->conn != NULL);
	CHECK(work != NULL);
	/* Nothing in flight, nothing to read: spare the recv() (a system call on every idle
	 * poll of the persister lcore). A connection that died meanwhile fails at the next
	 * send or read. */
	if (l->pipe_count == 0)
		return PQstatus(l->conn) == CONNECTION_BAD ? -1 : 0;
	if (!PQconsumeInput(l->conn))
		return -1;
	while (l->pipe_count > 0 && !PQisBusy(l->conn)) {
		uint32_t item = l->pipe[l->pipe_head];
		PGresult *res = PQgetResult(l->conn);
		if (res == NULL) {
			/* The end of one statement's results. */
			if (item == PST_ITEM_SYNC || !l->head_has_result)
				break;
			pipe_pop(l);
			if (item < PST_ITEM_SPECIAL_MIN)
				chain_push(db, &l->batch, item);
			continue;
		}
		ExecStatusType st = PQresultStatus(res);
		int rc = 0;
		if (st == PGRES_PIPELINE_SYNC) {
			if (item != PST_ITEM_SYNC) {
				rc = -1; /* out of step with libpq: start over */
			} else {
				pipe_pop(l);
				CHECK(l->syncs_out > 0);
				l->syncs_out--;
				if (!l->prepared)
					pst_db_conn_proven(db, l); /* the statements are ready */
				batch_done(db, l, now_ns);
				(*work)++;
			}
		} else if (item == PST_ITEM_SYNC) {
			rc = -1;
		} else if (item == PST_ITEM_PREPARE) {
			l->head_has_result = true;
			if (st != PGRES_COMMAND_OK) {
				pst_db_error_keep(db, PQresultErrorMessage(res));
				rc = -1; /* schema missing or no privilege: back off and retry */
			}
		} else if (item == PST_ITEM_SCHEMA) {
			l->head_has_result = true;
			char why[256];
			if (st != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) != 2) {
				pst_db_error_keep(db, PQresultErrorMessage(res));
				db->counters[PST_C_DB_SCHEMA_REFUSED]++;
				rc = -1;
			} else if (!pst_sql_schema_ok(PQgetisnull(res, 0, 0) ? NULL
									: PQgetvalue(res, 0, 0),
						      PQgetisnull(res, 0, 1) ? NULL
									: PQgetvalue(res, 0, 1),
						      why, sizeof(why))) {
				pst_db_error_keep(db, why);
				db->counters[PST_C_DB_SCHEMA_REFUSED]++;
				rc = -1; /* not the schema we write: back off, ask again later */
			}
		} else {
			l->head_has_result = true;
			statement_result(db, l, item, res);
			(*work)++;
		}
		PQclear(res);
		if (rc < 0)
			return -1;
	}
	return PQstatus(l->conn) == CONNECTION_BAD ? -1 : 0;
}

/* ----------------------------------------------------------------- losing the pipeline -- */

void
pst_batch_abort(struct pst_db *db, struct pst_lane *l)
{
	struct pst_fifo back;
	pst_fifo_init(&back);
	uint32_t i;
	while ((i = pst_fifo_pop(db, &l->batch)) != PST_SLOT_NONE)
		pst_fifo_push(db, &back, i);
	while (l->pipe_count > 0) {
		uint32_t item = pipe_pop(l);
		if (item < PST_ITEM_SPECIAL_MIN)
			chain_push(db, &back, item);
	}
	struct pst_fifo again;
	pst_fifo_init(&again);
	while ((i = pst_fifo_pop(db, &back)) != PST_SLOT_NONE) {
		struct pst_req *r = &db->reqs[i];
		if (r->abandoned) {
			pst_req_free(db, i);
			continue;
		}
		r->phase = PST_PHASE_QUEUED;
		r->outcome = PST_OUT_NONE;
		r->isolate = 0;
		pst_fifo_push(db, &again, i);
	}
	pst_fifo_prepend(db, &l->queue, &again);
	l->syncs_out = 0;
	l->batch_failed = false;
	l->head_has_result = false;
	CHECK(l->pipe_count == 0);
	CHECK(l->batch.head == PST_SLOT_NONE);
}

void
pst_batch_abandon(struct pst_db *db, struct pst_lane *l)
{
	for (uint32_t i = l->batch.head; i != PST_SLOT_NONE; i = db->reqs[i].next) {
		if (!db->reqs[i].abandoned) {
			pst_req_unhash(db, i);
			db->reqs[i].abandoned = 1;
		}
	}
	for (uint32_t k = 0; k < l->pipe_count; k++) {
		uint32_t item = l->pipe[(l->pipe_head + k) % l->pipe_cap];
		if (item >= PST_ITEM_SPECIAL_MIN)
			continue;
		for (uint32_t i = item; i != PST_SLOT_NONE; i = db->reqs[i].next) {
			if (!db->reqs[i].abandoned) {
				pst_req_unhash(db, i);
				db->reqs[i].abandoned = 1;
			}
		}
	}
}

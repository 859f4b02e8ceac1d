/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PostgreSQL: hydration (read + claim), fenced flush (version-checked CAS, claim kept) and
 * claim release, through libpq in non-blocking pipeline mode (docs/persist.md "Database",
 * "Fencing protocol"; docs/fencing.md). This room holds the public entry points, the
 * connection's lifecycle (connect, prepare, lose) and its back-off; the request table, the
 * batch state machine and the SQL live in the rooms pst_db_int.h lists.
 *
 * Shape (Aeron agent style): pst_db_submit() queues a request, pst_db_poll() does bounded,
 * non-blocking work — connect with back-off, send batches, read results, emit completions.
 *
 * A lost connection puts every unanswered request back at the front of the queue in its
 * original order and reconnects with exponential back-off. Every statement is idempotent (a
 * claim we hold is claimed again; our own flush is found in the ledger; a release is a no-op
 * the second time), so a commit whose answer was lost is harmless when re-sent: nothing
 * lost, nothing applied twice.
 *
 * Seed: "Hydration and flush carry a monotonic fencing epoch per user, and the DB flush is a
 * version-checked CAS — so a stale route or a slow flush racing a newer write cannot corrupt
 * state." ARCHITECTURE.md §6 and docs/fencing.md: the claim refuses a second shard; the flush
 * keeps the claim and RELEASE_CLAIM lets it go after the drop; a repeat that finds its own
 * write is a success.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include "common/check.h"
#include "persist/pst_db_int.h"

/* --------------------------------------------------------------------- create/destroy -- */

void
pst_db_config_default(struct pst_db_config *cfg, const char *conninfo, pst_db_emit_fn *emit,
		      void *emit_arg)
{
	CHECK(cfg != NULL);
	memset(cfg, 0, sizeof(*cfg));
	cfg->conninfo = conninfo;
	/* Sized for a sustained 5,000 hydrations and 5,000 evictions (a flush and a release
	 * each) a second from one OMS shard, 15,000 requests a second (docs/persist.md,
	 * "Sizing the defaults"): a batch of up to 256 requests is one commit, so a slow WAL
	 * fsync (4 ms) still carries some 30,000 a second; two Syncs would keep the backend busy,
	 * four leave slack for the lcore's idle back-off without queueing more than about four
	 * commits' worth of latency; the pool holds a second of the whole churn while the
	 * database is away, restarting or stalled. */
	cfg->requests_max = 16384;
	cfg->batch_max = 256;
	cfg->batches_in_flight_max = 4;
	cfg->read_batches_in_flight_max = 2;
	cfg->neg_cache_size = 1024;
	cfg->neg_ttl_ns = UINT64_C(50000000);
	cfg->backoff_min_ns = UINT64_C(10000000);
	cfg->backoff_max_ns = UINT64_C(1000000000);
	cfg->batch_timeout_ns = UINT64_C(5000000000);
	cfg->hydrate_deadline_ns = UINT64_C(2000000000);
	cfg->emit = emit;
	cfg->emit_arg = emit_arg;
}

/* The limits a config must keep (the slot numbers leave room for the pipe's item codes). */
static bool
config_valid(const struct pst_db_config *cfg)
{
	if (cfg->conninfo == NULL || cfg->emit == NULL)
		return false;
	if (cfg->requests_max == 0 || cfg->requests_max >= PST_ITEM_SPECIAL_MIN)
		return false;
	if (cfg->batch_max == 0 || cfg->batch_max > PST_DB_BATCH_MAX_LIMIT ||
	    cfg->batches_in_flight_max == 0 ||
	    cfg->read_batches_in_flight_max > PST_DB_READ_BATCHES_LIMIT)
		return false;
	if (cfg->neg_cache_size == 0 || (cfg->neg_cache_size & (cfg->neg_cache_size - 1)) != 0)
		return false;
	if (cfg->backoff_min_ns == 0 || cfg->backoff_max_ns < cfg->backoff_min_ns)
		return false;
	return cfg->batch_timeout_ns != 0;
}

int
pst_db_create(struct pst_db **out, const struct pst_db_config *cfg)
{
	CHECK(out != NULL);
	CHECK(cfg != NULL);
	if (!config_valid(cfg))
		return -EINVAL;

	struct pst_db *db = calloc(1, sizeof(*db));
	if (db == NULL)
		goto fail_db;
	db->cfg = *cfg;
	for (uint32_t k = 0; k < PST_REQ_KINDS; k++) {
		hist_init(&db->lat_queue[k]);
		hist_init(&db->lat_db[k]);
	}
	db->conninfo = strdup(cfg->conninfo);
	if (db->conninfo == NULL)
		goto fail_conninfo;
	db->reqs = calloc(cfg->requests_max, sizeof(*db->reqs));
	if (db->reqs == NULL)
		goto fail_reqs;
	uint32_t buckets = 1;
	while (buckets < cfg->requests_max * 2u)
		buckets <<= 1;
	db->buckets = malloc(buckets * sizeof(*db->buckets));
	if (db->buckets == NULL)
		goto fail_buckets;
	db->bucket_mask = buckets - 1;
	db->lane_count = cfg->read_batches_in_flight_max > 0 ? 2 : 1;
	for (uint32_t k = 0; k < db->lane_count; k++) {
		struct pst_lane *l = &db->lanes[k];
		l->syncs_max = k == PST_LANE_READ ? cfg->read_batches_in_flight_max
						  : cfg->batches_in_flight_max;
		/* Every batch in flight and its Sync; the session's SET, the prepares, the schema
		 * query and their Sync. */
		l->pipe_cap = l->syncs_max * (cfg->batch_max + 1) + 1 + PST_REQ_KINDS +
			      PST_GROUP_KINDS + 1 + 1;
		l->pipe = calloc(l->pipe_cap, sizeof(*l->pipe));
		l->pipe_ns = calloc(l->pipe_cap, sizeof(*l->pipe_ns));
		if (l->pipe == NULL || l->pipe_ns == NULL)
			goto fail_pipe;
		l->backoff_ns = cfg->backoff_min_ns;
		l->conn_state = PST_CONN_DOWN;
	}
	db->plan = calloc(cfg->batch_max, sizeof(*db->plan));
	if (db->plan == NULL)
		goto fail_plan;
	uint32_t plan_users = 1;
	while (plan_users < cfg->batch_max * 2u)
		plan_users <<= 1;
	db->plan_users = calloc(plan_users, sizeof(*db->plan_users));
	if (db->plan_users == NULL)
		goto fail_plan_users;
	db->plan_user_mask = plan_users - 1;
	db->plan_gen = 1; /* calloc's zero generation is empty */
	db->items = calloc(cfg->batch_max, sizeof(*db->items));
	if (db->items == NULL)
		goto fail_items;
	db->group_buf = malloc(pst_sql_group_size(cfg->batch_max));
	if (db->group_buf == NULL)
		goto fail_group_buf;
	db->negs = calloc(cfg->neg_cache_size, sizeof(*db->negs));
	if (db->negs == NULL)
		goto fail_negs;
	db->neg_mask = cfg->neg_cache_size - 1;

	pst_req_table_init(db);
	*out = db;
	return 0;

fail_negs:
	free(db->group_buf);
fail_group_buf:
	free(db->items);
fail_items:
	free(db->plan_users);
fail_plan_users:
	free(db->plan);
fail_plan:
fail_pipe:
	for (uint32_t k = 0; k < PST_LANES; k++) {
		free(db->lanes[k].pipe_ns);
		free(db->lanes[k].pipe);
	}
	free(db->buckets);
fail_buckets:
	free(db->reqs);
fail_reqs:
	free(db->conninfo);
fail_conninfo:
	free(db);
fail_db:
	return -ENOMEM;
}

void
pst_db_destroy(struct pst_db *db)
{
	if (db == NULL)
		return;
	for (uint32_t k = 0; k < PST_LANES; k++) {
		if (db->lanes[k].conn != NULL)
			PQfinish(db->lanes[k].conn);
		free(db->lanes[k].pipe_ns);
		free(db->lanes[k].pipe);
	}
	free(db->negs);
	free(db->group_buf);
	free(db->items);
	free(db->plan_users);
	free(db->plan);
	free(db->buckets);
	free(db->reqs);
	free(db->conninfo);
	free(db);
}

bool
pst_db_connected(const struct pst_db *db)
{
	for (uint32_t k = 0; k < db->lane_count; k++)
		if (db->lanes[k].conn_state != PST_CONN_READY || !db->lanes[k].prepared)
			return false;
	return true;
}

uint32_t
pst_db_pending(const struct pst_db *db)
{
	return db->pending;
}

int
pst_db_socket(const struct pst_db *db, unsigned lane)
{
	return lane < db->lane_count && db->lanes[lane].conn != NULL
		       ? PQsocket(db->lanes[lane].conn)
		       : -1;
}

const uint64_t *
pst_db_counters(const struct pst_db *db)
{
	return db->counters;
}

const struct hist *
pst_db_lat_queue(const struct pst_db *db, unsigned kind)
{
	return kind >= 1 && kind <= PST_REQ_KINDS ? &db->lat_queue[kind - 1] : NULL;
}

const struct hist *
pst_db_lat_db(const struct pst_db *db, unsigned kind)
{
	return kind >= 1 && kind <= PST_REQ_KINDS ? &db->lat_db[kind - 1] : NULL;
}

const char *
pst_db_last_error(const struct pst_db *db)
{
	return db->last_error;
}

/* ----------------------------------------------------------------------------- submit -- */

/* What the schema can hold: ids and amounts as signed 64-bit, assets as integer. */
static bool
state_valid(const struct wire_user_state *us)
{
	if (us->user == 0 || us->user > INT64_MAX || us->balance_count > WIRE_BALANCES_MAX ||
	    us->user_seq > INT64_MAX || us->version >= INT64_MAX || us->rl_tokens_ns > INT64_MAX)
		return false;
	for (uint32_t k = 0; k < us->balance_count; k++)
		if (us->balances[k].asset == 0 || us->balances[k].asset > INT32_MAX ||
		    us->balances[k].total < 0)
			return false;
	/* The transfers table's columns: asset an integer, reason a smallint. */
	for (uint32_t k = 0; k < us->recent_count && k < WIRE_RECENT_MAX; k++)
		if (us->recent[k].asset > INT32_MAX || us->recent[k].reason >= WIRE_REASON_MAX)
			return false;
	return us->recent_count <= WIRE_RECENT_MAX;
}

int
pst_db_submit(struct pst_db *db, const struct wire_msg_hdr *msg, uint64_t now_ns)
{
	CHECK(db != NULL);
	CHECK(msg != NULL);
	int rc;
	if (msg->type == WIRE_HYDRATE_REQUEST) {
		if (msg->length != sizeof(struct wire_hydrate_request))
			return -EINVAL;
		const struct wire_hydrate_request *h = (const void *)msg;
		if (h->user == 0 || h->user > INT64_MAX || h->epoch > INT64_MAX)
			return -EINVAL;
		rc = pst_req_add_hydrate(db, h->user, msg->shard, h->epoch, now_ns);
	} else if (msg->type == WIRE_BEGIN_DEHYDRATE) {
		if (msg->length != sizeof(struct wire_begin_dehydrate))
			return -EINVAL;
		const struct wire_begin_dehydrate *b = (const void *)msg;
		if (!state_valid(&b->state) || b->epoch > INT64_MAX)
			return -EINVAL;
		rc = pst_req_add_flush(db, &b->state, msg->shard, b->epoch, now_ns);
	} else if (msg->type == WIRE_RELEASE_CLAIM) {
		if (msg->length != sizeof(struct wire_release_claim))
			return -EINVAL;
		const struct wire_release_claim *c = (const void *)msg;
		if (c->user == 0 || c->user > INT64_MAX || c->epoch > INT64_MAX || c->status != 0 ||
		    c->handoff > 1 || (c->handoff == 0 && c->to_shard != 0))
			return -EINVAL;
		rc = pst_req_add_release(db, c->user, msg->shard, c->epoch, c->handoff == 1,
					 c->to_shard, now_ns);
	} else if (msg->type == WIRE_TRANSFER_LOOKUP) {
		if (msg->length != sizeof(struct wire_transfer_lookup))
			return -EINVAL;
		const struct wire_transfer_lookup *t = (const void *)msg;
		if (t->user == 0 || t->user > INT64_MAX || t->epoch > INT64_MAX)
			return -EINVAL;
		rc = pst_req_add_lookup(db, t->user, t->transfer_id, msg->shard, t->epoch, now_ns);
	} else {
		return -EINVAL;
	}
	CHECK(rc == 0 || rc == -ENOBUFS);
	CHECK(db->pending <= db->cfg.requests_max);
	return rc;
}

void
pst_db_clear(struct pst_db *db)
{
	CHECK(db != NULL);
	pst_req_drop_waiting(db);
	/* Statements on the wire finish in the database; their answers are dropped. */
	for (uint32_t k = 0; k < db->lane_count; k++) {
		pst_batch_abandon(db, &db->lanes[k]);
		CHECK(db->lanes[k].queue.head == PST_SLOT_NONE);
	}
	CHECK(db->done.head == PST_SLOT_NONE);
}

/* ------------------------------------------------------------------------- connection -- */

/* Hydrates and transfer lookups that have waited past the deadline while the database is
 * away are answered ERROR ("database unavailable; the shard may ask again" — a client waits
 * on each); flushes wait, they are money. */
static void
hydrate_deadlines(struct pst_db *db, struct pst_lane *l, uint64_t now_ns)
{
	if (db->cfg.hydrate_deadline_ns == 0)
		return;
	struct pst_fifo keep;
	pst_fifo_init(&keep);
	uint32_t i;
	while ((i = pst_fifo_pop(db, &l->queue)) != PST_SLOT_NONE) {
		struct pst_req *r = &db->reqs[i];
		if ((r->kind == PST_REQ_HYDRATE || r->kind == PST_REQ_LOOKUP) &&
		    now_ns - r->accepted_ns > db->cfg.hydrate_deadline_ns) {
			r->outcome = PST_OUT_FAILED;
			pst_req_complete(db, i);
		} else {
			pst_fifo_push(db, &keep, i);
		}
	}
	l->queue = keep;
}

static void
backoff_arm(struct pst_db *db, struct pst_lane *l, uint64_t now_ns)
{
	l->retry_at_ns = now_ns + l->backoff_ns;
	l->backoff_ns = l->backoff_ns * 2 > db->cfg.backoff_max_ns ? db->cfg.backoff_max_ns
								     : l->backoff_ns * 2;
	DCHECK(l->backoff_ns >= db->cfg.backoff_min_ns);
	DCHECK(l->backoff_ns <= db->cfg.backoff_max_ns);
}

/* The connection is gone (or given up): every unanswered request goes back to the front of
 * the queue, oldest first. Their commits may or may not have happened; re-sending is safe
 * because every statement is idempotent. */
static void
conn_lost(struct pst_db *db, struct pst_lane *l, uint64_t now_ns)
{
	/* libpq's own error, when it has one; a refusal of ours (the schema, a statement's
	 * error) already holds the reason. */
	if (l->conn != NULL && PQerrorMessage(l->conn)[0] != '\0')
		pst_db_error_keep(db, PQerrorMessage(l->conn));
	pst_batch_abort(db, l);
	l->prepared = false;
	if (l->conn != NULL) {
		PQfinish(l->conn);
		l->conn = NULL;
	}
	if (l->conn_state == PST_CONN_READY)
		db->counters[PST_C_DB_DISCONNECTS]++;
	else
		db->counters[PST_C_DB_CONNECT_FAILURES]++;
	l->conn_state = PST_CONN_DOWN;
	backoff_arm(db, l, now_ns);
	hydrate_deadlines(db, l, now_ns);
}

static int
conn_setup(struct pst_lane *l, uint64_t now_ns)
{
	if (PQsetnonblocking(l->conn, 1) != 0 || PQenterPipelineMode(l->conn) != 1)
		return -1;
	if (pst_batch_prepare(l, now_ns) < 0)
		return -1;
	l->conn_state = PST_CONN_READY;
	return 0;
}

/* Start a connection attempt. A socket path or hostaddr never blocks here. */
static uint32_t
conn_start(struct pst_db *db, struct pst_lane *l, uint64_t now_ns)
{
	CHECK(l->conn == NULL);
	l->conn = PQconnectStart(db->conninfo);
	if (l->conn == NULL || PQstatus(l->conn) == CONNECTION_BAD) {
		conn_lost(db, l, now_ns);
		return 1;
	}
	l->conn_state = PST_CONN_CONNECTING;
	l->connect_poll = PGRES_POLLING_WRITING; /* libpq: behave as if it said WRITING */
	l->connect_started_ns = now_ns;
	return 1;
}

static uint32_t
conn_step(struct pst_db *db, struct pst_lane *l, uint64_t now_ns)
{
	CHECK(l->conn != NULL);
	struct pollfd p = {
		.fd = PQsocket(l->conn),
		.events = l->connect_poll == PGRES_POLLING_READING ? POLLIN : POLLOUT,
	};
	if (p.fd < 0) {
		conn_lost(db, l, now_ns);
		return 1;
	}
	int rc = poll(&p, 1, 0); /* readiness only: never waits */
	if (rc == 0) {
		if (now_ns - l->connect_started_ns > db->cfg.batch_timeout_ns) {
			pst_db_error_keep(db, "connection attempt timed out");
			db->counters[PST_C_DB_TIMEOUTS]++;
			conn_lost(db, l, now_ns);
			return 1;
		}
		return 0;
	}
	l->connect_poll = PQconnectPoll(l->conn);
	if (l->connect_poll == PGRES_POLLING_FAILED) {
		conn_lost(db, l, now_ns);
		return 1;
	}
	if (l->connect_poll == PGRES_POLLING_OK && conn_setup(l, now_ns) < 0)
		conn_lost(db, l, now_ns);
	return 1;
}

/* ------------------------------------------------------------------------------- poll -- */

static uint32_t
lane_poll(struct pst_db *db, struct pst_lane *l, uint64_t now_ns)
{
	uint32_t work = 0;
	switch (l->conn_state) {
	case PST_CONN_DOWN:
		if (now_ns >= l->retry_at_ns)
			work += conn_start(db, l, now_ns);
		break;
	case PST_CONN_CONNECTING:
		work += conn_step(db, l, now_ns);
		break;
	case PST_CONN_READY:
		if (PQflush(l->conn) < 0 || pst_batch_read(db, l, now_ns, &work) < 0 ||
		    pst_batch_send(db, l, now_ns, &work) < 0 || PQflush(l->conn) < 0) {
			conn_lost(db, l, now_ns);
			work++;
			break;
		}
		if (pst_batch_overdue(db, l, now_ns)) {
			/* The server is not answering (a dead host keeps a TCP socket open). */
			pst_db_error_keep(db, "batch timed out");
			db->counters[PST_C_DB_TIMEOUTS]++;
			conn_lost(db, l, now_ns);
			work++;
		}
		break;
	default:
		CHECK(false);
	}
	DCHECK(l->syncs_out <= l->syncs_max);
	return work;
}

uint32_t
pst_db_poll(struct pst_db *db, uint64_t now_ns)
{
	CHECK(db != NULL);
	uint32_t work = 0;
	/* The read lane first: its statements are the ones a client is waiting on. */
	for (uint32_t k = db->lane_count; k-- > 0;)
		work += lane_poll(db, &db->lanes[k], now_ns);
	work += pst_req_emit_done(db);
	CHECK(db->pending <= db->cfg.requests_max);
	return work;
}

/* ---------------------------------------------------------------------- schema check -- */

int
pst_db_schema_check(const char *conninfo, int timeout_s, char *why, size_t cap)
{
	CHECK(conninfo != NULL);
	char t[16];
	snprintf(t, sizeof(t), "%d", timeout_s > 0 ? timeout_s : 1);
	/* conninfo may be a URI or key=value text: pass the timeout beside it, not inside. */
	const char *keys[] = {"dbname", "connect_timeout", NULL};
	const char *vals[] = {conninfo, t, NULL};
	PGconn *c = PQconnectdbParams(keys, vals, 1);
	if (c == NULL || PQstatus(c) != CONNECTION_OK) {
		snprintf(why, cap, "database not reachable: %s",
			 c != NULL ? PQerrorMessage(c) : "out of memory");
		pst_trim_tail(why);
		PQfinish(c);
		return -EHOSTUNREACH;
	}
	int rc = 0;
	PGresult *r = PQexec(c, pst_sql_schema_query);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 2) {
		snprintf(why, cap, "database schema: cannot read schema_migrations: %s",
			 PQresultErrorMessage(r));
		pst_trim_tail(why);
		rc = -EPROTO;
	} else if (!pst_sql_schema_ok(PQgetisnull(r, 0, 0) ? NULL : PQgetvalue(r, 0, 0),
				      PQgetisnull(r, 0, 1) ? NULL : PQgetvalue(r, 0, 1), why, cap)) {
		rc = -EPROTO;
	}
	PQclear(r);
	PQfinish(c);
	return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PostgreSQL: hydration (read + claim), fenced flush (version-checked CAS, claim kept) and
 * claim release, through libpq in non-blocking pipeline mode (docs/persist.md "Database",
 * "Fencing protocol"; docs/fencing.md).
 *
 * Shape (Aeron agent style): pst_db_submit() queues a request, pst_db_poll() does bounded,
 * non-blocking work — connect with back-off, send batches, read results, emit completions.
 *
 *  - A batch is up to batch_max statements followed by one Sync: one implicit transaction,
 *    one commit (one WAL fsync) for the batch. Its answers are only final at the Sync: until
 *    then the transaction may still roll back, so completions are emitted at the Sync.
 *  - A statement error aborts the whole batch (everything before it rolls back). The batch's
 *    requests are re-sent one per Sync; a statement that fails alone with a permanent error
 *    (integrity, data, privilege) is answered ERROR, a transient one is retried.
 *  - A lost connection puts every unanswered request back at the front of the queue in its
 *    original order and reconnects with exponential back-off. Every statement is
 *    idempotent (a claim we hold is claimed again; our own flush is found in the ledger; a
 *    release is a no-op the second time), so a commit whose answer was lost is harmless when
 *    re-sent: nothing lost, nothing applied twice.
 *
 * Seed: "Hydration and flush carry a monotonic fencing epoch per user, and the DB flush is a
 * version-checked CAS — so a stale route or a slow flush racing a newer write cannot corrupt
 * state." ARCHITECTURE.md §6 and docs/fencing.md: the claim refuses a second shard; the flush
 * keeps the claim and RELEASE_CLAIM lets it go after the drop; a repeat that finds its own
 * write is a success.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "common/check.h"
#include "persist/pst_int.h"

#define NONE UINT32_MAX
#define ITEM_SYNC (UINT32_MAX - 1)   /* pipe item: a Sync */
#define ITEM_PREPARE (UINT32_MAX - 2) /* pipe item: a statement being prepared */
#define PREPARES 3

/* Read and claim in one statement (ARCHITECTURE.md §6: "Hydration claims the row (fails if
 * another shard holds it)"). An unknown user gets a row with zero balances (NEW). A claim
 * that fails returns the holder from the statement's snapshot. A re-claim by the holder
 * never lowers the epoch stamp: a stale request re-driven late must not make the claim look
 * older than one a newer incarnation took, since a release takes every claim of the shard
 * at or below its epoch (docs/fencing.md). */
static const char SQL_HYDRATE[] =
	"WITH claim AS ("
	" INSERT INTO accounts AS a (user_id, user_seq, tier, version, owner_shard,"
	"  owner_epoch, assets, totals)"
	" VALUES ($1::bigint, 0, 0, 0, $2::integer, $3::bigint, '{}', '{}')"
	" ON CONFLICT (user_id) DO UPDATE SET owner_shard = EXCLUDED.owner_shard,"
	"  owner_epoch = CASE WHEN a.owner_shard = EXCLUDED.owner_shard"
	"   THEN GREATEST(a.owner_epoch, EXCLUDED.owner_epoch) ELSE EXCLUDED.owner_epoch END,"
	"  updated_at = now()"
	"  WHERE a.owner_shard IS NULL OR a.owner_shard = EXCLUDED.owner_shard"
	" RETURNING a.version, a.user_seq, a.tier, a.assets, a.totals,"
	"  (a.xmax = 0) AS inserted, a.recent)"
	" SELECT 1, inserted, version, user_seq, tier, assets, totals, NULL::integer, recent"
	"  FROM claim"
	" UNION ALL"
	" SELECT 0, false, version, user_seq, tier, assets, totals, owner_shard, NULL::bytea"
	"  FROM accounts WHERE user_id = $1::bigint AND NOT EXISTS (SELECT 1 FROM claim)";

/* The fenced flush (docs/fencing.md): only while we hold the claim, and only when newer than
 * the claim's stamp (epochs are unique and increasing per shard, so a stale flush of an older
 * incarnation is refused). CAS on version, except that a version ahead of what we expect which
 * our own ledgered flush produced (overtaken by cancel-on-activity) is overwritten by our
 * newer state; any other writer's version is a conflict. A flush already in the ledger
 * (same shard and epoch) never writes twice. It KEEPS the claim (stamping owner_epoch with
 * the flush's epoch) so nobody can hydrate the user while this shard might still serve it;
 * RELEASE_CLAIM lets go. The write is recorded in the ledger under (user, shard, epoch), so
 * a repeat (after failover, after a lost answer) finds its own write even when later
 * flushes have moved the row on. Outcome 1 written, 2 our own write already there, 3
 * conflict (a foreign write, no claim, or a stale epoch). */
static const char SQL_FLUSH[] =
	"WITH up AS ("
	" UPDATE accounts SET user_seq = $5::bigint, tier = $6::smallint,"
	"  assets = $7::integer[], totals = $8::bigint[], recent = $9::bytea,"
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
	" SELECT $1::bigint, version - 1, $3::integer, $4::bigint FROM up)"
	" SELECT 1, version FROM up"
	" UNION ALL"
	" SELECT CASE WHEN EXISTS (SELECT 1 FROM account_flushes f WHERE f.user_id = $1::bigint"
	"   AND f.shard = $3::integer AND f.epoch = $4::bigint)"
	"  THEN 2 ELSE 3 END,"
	"  COALESCE((SELECT version FROM accounts WHERE user_id = $1::bigint), -1)"
	" WHERE NOT EXISTS (SELECT 1 FROM up)";

/* Release the claim a flush kept once the shard has dropped the actor, or the claim a
 * hydration the shard gave up may have taken (docs/fencing.md): any claim of this shard
 * stamped with this epoch or an older one (a shard's epochs only grow, and it holds no
 * actor for the user at or below it). Idempotent, and a no-op when the user was hydrated
 * again since (a newer epoch) or was released already. Returns how many rows it released
 * (0 or 1); both answer OK. */
static const char SQL_RELEASE[] =
	"WITH rel AS ("
	" UPDATE accounts SET owner_shard = NULL, owner_epoch = NULL, updated_at = now()"
	" WHERE user_id = $1::bigint AND owner_shard = $2::integer AND owner_epoch <= $3::bigint"
	" RETURNING 1)"
	" SELECT count(*) FROM rel";

enum req_kind {
	REQ_HYDRATE = 1,
	REQ_FLUSH = 2,
	REQ_RELEASE = 3,
};

enum req_state {
	RS_FREE = 0,
	RS_QUEUED = 1, /* waiting to be sent */
	RS_SENT = 2,   /* in the pipeline; answer not final before its Sync */
	RS_DONE = 3,   /* answered; completion waiting for the output */
};

/* What a statement's row said, made final at the Sync. */
enum outcome {
	OUT_NONE = 0,      /* no row yet */
	OUT_HYD_CLAIMED,   /* hydrate: claimed (ok/new in out) */
	OUT_HYD_OWNED,     /* hydrate: another shard holds it */
	OUT_HYD_RETRY,     /* hydrate: raced a concurrent change; ask again */
	OUT_FLUSH_WRITTEN, /* flush: written now */
	OUT_FLUSH_REPEAT,  /* flush: our own write found */
	OUT_FLUSH_CONFLICT,/* flush: foreign write */
	OUT_RELEASED,      /* release: the claim was let go now */
	OUT_RELEASE_NOOP,  /* release: nothing to do (released already, or hydrated again) */
	OUT_FAILED,        /* the statement failed (permanent) */
	OUT_FAILED_RETRY,  /* the statement failed (transient) */
	OUT_BAD_ROW,       /* a row we cannot represent (too many balances, ...) */
};

struct req {
	uint8_t kind;      /* enum req_kind */
	uint8_t phase;     /* enum req_state */
	uint8_t outcome;   /* enum outcome, pending the Sync */
	uint8_t isolate;   /* send alone (its batch failed) */
	uint8_t abandoned; /* pst_db_clear: answer dropped */
	uint8_t rechecked; /* flush: a CONFLICT was confirmed by a second statement */
	uint16_t shard;    /* requesting OMS shard */
	uint32_t next;     /* FIFO link (queue / done / batch) */
	uint32_t hnext;    /* hash chain */
	uint32_t tries;    /* times sent */
	uint64_t user;
	uint64_t epoch;    /* highest epoch asked for */
	uint64_t accepted_ns; /* when submitted (hydrate deadline) */
	uint64_t version;  /* flush: version after (outcome) */
	uint16_t owner;    /* hydrate OWNED: holder */
	uint8_t hyd_new;   /* hydrate: the row was created */
	struct wire_user_state us; /* flush: what to write; hydrate: what was read */
};

struct fifo {
	uint32_t head; /* first, NONE when empty */
	uint32_t tail; /* last */
};

enum conn_state {
	CONN_DOWN = 0,
	CONN_CONNECTING = 1,
	CONN_READY = 2,
};

struct neg {
	uint64_t user;       /* 0: empty */
	uint64_t expires_ns; /* valid before */
	uint16_t owner;      /* holder of the claim */
};

struct pst_db {
	struct pst_db_config cfg;    /* copy (conninfo copied below) */
	char *conninfo;              /* owned copy */
	PGconn *conn;                /* NULL when down */
	uint32_t conn_state;         /* enum conn_state */
	PostgresPollingStatusType connect_poll; /* last PQconnectPoll answer */
	uint64_t connect_started_ns; /* connection attempt start */
	uint64_t retry_at_ns;        /* next attempt when down */
	uint64_t backoff_ns;         /* current back-off */
	struct req *reqs;            /* requests_max slots */
	uint32_t free_head;          /* free list through next */
	uint32_t pending;            /* slots in use */
	uint32_t *buckets;           /* hash heads, bucket_mask + 1 */
	uint32_t bucket_mask;
	struct fifo queue;           /* RS_QUEUED, in send order */
	struct fifo done;            /* RS_DONE, in answer order */
	struct fifo batch;           /* RS_SENT items taken off the pipe, not yet synced */
	bool batch_failed;           /* a statement in the current batch failed */
	uint32_t *pipe;              /* items in flight: slot, ITEM_SYNC or ITEM_PREPARE */
	uint64_t *pipe_ns;           /* send time of each item */
	uint32_t pipe_cap;
	uint32_t pipe_head;          /* oldest */
	uint32_t pipe_count;
	bool head_has_result;        /* the oldest item has delivered a result */
	uint32_t syncs_out;          /* Syncs in flight (prepare Sync included) */
	struct neg *negs;            /* negative cache */
	uint32_t neg_mask;
	bool prepared;               /* statements prepared on this connection */
	char last_error[256];        /* last database error text, for operators */
	uint64_t counters[PST_C_COUNT];
};

/* ------------------------------------------------------------------ small structures -- */

static void
fifo_init(struct fifo *f)
{
	f->head = f->tail = NONE;
}

static void
fifo_push(struct pst_db *db, struct fifo *f, uint32_t i)
{
	db->reqs[i].next = NONE;
	if (f->tail == NONE)
		f->head = i;
	else
		db->reqs[f->tail].next = i;
	f->tail = i;
}

static uint32_t
fifo_pop(struct pst_db *db, struct fifo *f)
{
	uint32_t i = f->head;
	if (i != NONE) {
		f->head = db->reqs[i].next;
		if (f->head == NONE)
			f->tail = NONE;
	}
	return i;
}

/* Put a whole list in front of f, keeping both orders. */
static void
fifo_prepend(struct pst_db *db, struct fifo *f, struct fifo *front)
{
	if (front->head == NONE)
		return;
	db->reqs[front->tail].next = f->head;
	if (f->tail == NONE)
		f->tail = front->tail;
	f->head = front->head;
	fifo_init(front);
}

static uint32_t
user_hash(uint64_t user)
{
	uint64_t h = user * UINT64_C(0x9E3779B97F4A7C15);
	return (uint32_t)(h >> 32);
}

static void
hash_insert(struct pst_db *db, uint32_t i)
{
	uint32_t b = user_hash(db->reqs[i].user) & db->bucket_mask;
	db->reqs[i].hnext = db->buckets[b];
	db->buckets[b] = i;
}

static void
hash_remove(struct pst_db *db, uint32_t i)
{
	uint32_t *p = &db->buckets[user_hash(db->reqs[i].user) & db->bucket_mask];
	while (*p != NONE) {
		if (*p == i) {
			*p = db->reqs[i].hnext;
			return;
		}
		p = &db->reqs[*p].hnext;
	}
	CHECK(false); /* every live, non-abandoned request is hashed */
}

static uint32_t
slot_alloc(struct pst_db *db)
{
	uint32_t i = db->free_head;
	if (i == NONE)
		return NONE;
	db->free_head = db->reqs[i].next;
	memset(&db->reqs[i], 0, sizeof(db->reqs[i]));
	db->reqs[i].next = NONE;
	db->reqs[i].hnext = NONE;
	db->pending++;
	return i;
}

static void
slot_free(struct pst_db *db, uint32_t i)
{
	CHECK(db->pending > 0);
	db->reqs[i].phase = RS_FREE;
	db->reqs[i].next = db->free_head;
	db->free_head = i;
	db->pending--;
}

static struct neg *
neg_slot(struct pst_db *db, uint64_t user)
{
	return &db->negs[user_hash(user) & db->neg_mask];
}

static void
neg_forget(struct pst_db *db, uint64_t user)
{
	struct neg *n = neg_slot(db, user);
	if (n->user == user)
		n->user = 0;
}

/* --------------------------------------------------------------------- create/destroy -- */

void
pst_db_config_default(struct pst_db_config *cfg, const char *conninfo, pst_db_emit_fn *emit,
		      void *emit_arg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->conninfo = conninfo;
	cfg->requests_max = 4096;
	cfg->batch_max = 64;
	cfg->batches_in_flight_max = 8;
	cfg->neg_cache_size = 1024;
	cfg->neg_ttl_ns = UINT64_C(50000000);
	cfg->backoff_min_ns = UINT64_C(10000000);
	cfg->backoff_max_ns = UINT64_C(1000000000);
	cfg->batch_timeout_ns = UINT64_C(5000000000);
	cfg->hydrate_deadline_ns = UINT64_C(2000000000);
	cfg->emit = emit;
	cfg->emit_arg = emit_arg;
}

int
pst_db_create(struct pst_db **out, const struct pst_db_config *cfg)
{
	CHECK(out != NULL && cfg != NULL);
	if (cfg->conninfo == NULL || cfg->emit == NULL || cfg->requests_max == 0 ||
	    cfg->requests_max >= ITEM_PREPARE || cfg->batch_max == 0 ||
	    cfg->batches_in_flight_max == 0 || cfg->neg_cache_size == 0 ||
	    (cfg->neg_cache_size & (cfg->neg_cache_size - 1)) != 0 || cfg->backoff_min_ns == 0 ||
	    cfg->backoff_max_ns < cfg->backoff_min_ns || cfg->batch_timeout_ns == 0)
		return -EINVAL;

	struct pst_db *db = calloc(1, sizeof(*db));
	if (db == NULL)
		goto fail_db;
	db->cfg = *cfg;
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
	db->pipe_cap = cfg->batches_in_flight_max * (cfg->batch_max + 1) + PREPARES + 1;
	db->pipe = calloc(db->pipe_cap, sizeof(*db->pipe));
	if (db->pipe == NULL)
		goto fail_pipe;
	db->pipe_ns = calloc(db->pipe_cap, sizeof(*db->pipe_ns));
	if (db->pipe_ns == NULL)
		goto fail_pipe_ns;
	db->negs = calloc(cfg->neg_cache_size, sizeof(*db->negs));
	if (db->negs == NULL)
		goto fail_negs;
	db->neg_mask = cfg->neg_cache_size - 1;

	for (uint32_t b = 0; b < buckets; b++)
		db->buckets[b] = NONE;
	for (uint32_t i = 0; i < cfg->requests_max; i++)
		db->reqs[i].next = i + 1 < cfg->requests_max ? i + 1 : NONE;
	db->free_head = 0;
	fifo_init(&db->queue);
	fifo_init(&db->done);
	fifo_init(&db->batch);
	db->backoff_ns = cfg->backoff_min_ns;
	db->conn_state = CONN_DOWN;
	*out = db;
	return 0;

fail_negs:
	free(db->pipe_ns);
fail_pipe_ns:
	free(db->pipe);
fail_pipe:
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
	if (db->conn != NULL)
		PQfinish(db->conn);
	free(db->negs);
	free(db->pipe_ns);
	free(db->pipe);
	free(db->buckets);
	free(db->reqs);
	free(db->conninfo);
	free(db);
}

bool
pst_db_connected(const struct pst_db *db)
{
	return db->conn_state == CONN_READY;
}

uint32_t
pst_db_pending(const struct pst_db *db)
{
	return db->pending;
}

int
pst_db_socket(const struct pst_db *db)
{
	return db->conn != NULL ? PQsocket(db->conn) : -1;
}

const uint64_t *
pst_db_counters(const struct pst_db *db)
{
	return db->counters;
}

const char *
pst_db_last_error(const struct pst_db *db)
{
	return db->last_error;
}

/* ---------------------------------------------------------------------------- answers -- */

/* Build the completion message of a request in place of nothing: emitted from r. */
static void
complete(struct pst_db *db, uint32_t i)
{
	struct req *r = &db->reqs[i];
	r->phase = RS_DONE;
	fifo_push(db, &db->done, i);
}

/* Build the completion of request i into m; *counter is what to count once it is taken. */
static void
hydrate_answer(const struct pst_db *db, uint32_t i, struct wire_hydrate_user *m,
	       enum pst_counter *counter)
{
	const struct req *r = &db->reqs[i];
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_HYDRATE_USER, r->shard);
	m->epoch = r->epoch;
	switch (r->outcome) {
	case OUT_HYD_CLAIMED:
		m->status = r->hyd_new ? WIRE_HYD_NEW : WIRE_HYD_OK;
		m->state = r->us;
		*counter = r->hyd_new ? PST_C_DB_HYDRATE_NEW : PST_C_DB_HYDRATE_OK;
		break;
	case OUT_HYD_OWNED:
		m->status = WIRE_HYD_OWNED;
		m->owner_shard = r->owner;
		*counter = PST_C_DB_HYDRATE_OWNED;
		break;
	default:
		m->status = WIRE_HYD_ERROR;
		*counter = PST_C_DB_HYDRATE_ERROR;
		break;
	}
	m->state.user = r->user;
}

static void
flush_answer(const struct pst_db *db, uint32_t i, struct wire_flush_complete *m,
	     enum pst_counter *counter)
{
	const struct req *r = &db->reqs[i];
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_FLUSH_COMPLETE, r->shard);
	m->user = r->user;
	m->epoch = r->epoch;
	m->version = r->version;
	switch (r->outcome) {
	case OUT_FLUSH_WRITTEN:
		m->status = WIRE_FLUSH_OK;
		*counter = PST_C_DB_FLUSH_OK;
		break;
	case OUT_FLUSH_REPEAT:
		m->status = WIRE_FLUSH_OK;
		*counter = PST_C_DB_FLUSH_REPEAT;
		break;
	case OUT_FLUSH_CONFLICT:
		m->status = WIRE_FLUSH_CONFLICT;
		*counter = PST_C_DB_FLUSH_CONFLICT;
		break;
	default:
		m->status = WIRE_FLUSH_ERROR;
		m->version = r->us.version;
		*counter = PST_C_DB_FLUSH_ERROR;
		break;
	}
}

static void
release_answer(const struct pst_db *db, uint32_t i, struct wire_release_claim *m,
	       enum pst_counter *counter)
{
	const struct req *r = &db->reqs[i];
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_RELEASE_DONE, r->shard);
	m->user = r->user;
	m->epoch = r->epoch;
	switch (r->outcome) {
	case OUT_RELEASED:
		m->status = WIRE_FLUSH_OK;
		*counter = PST_C_DB_RELEASE_OK;
		break;
	case OUT_RELEASE_NOOP:
		m->status = WIRE_FLUSH_OK;
		*counter = PST_C_DB_RELEASE_NOOP;
		break;
	default:
		m->status = WIRE_FLUSH_ERROR;
		*counter = PST_C_DB_RELEASE_ERROR;
		break;
	}
}

/* Offer completions to the output, in order, until it refuses. */
static uint32_t
emit_done(struct pst_db *db)
{
	uint32_t n = 0;
	while (db->done.head != NONE) {
		uint32_t i = db->done.head;
		union {
			struct wire_msg_hdr hdr;
			struct wire_hydrate_user hyd;
			struct wire_flush_complete fc;
			struct wire_release_claim rc;
		} m;
		enum pst_counter counter;
		if (db->reqs[i].kind == REQ_HYDRATE)
			hydrate_answer(db, i, &m.hyd, &counter);
		else if (db->reqs[i].kind == REQ_FLUSH)
			flush_answer(db, i, &m.fc, &counter);
		else
			release_answer(db, i, &m.rc, &counter);
		if (db->cfg.emit(db->cfg.emit_arg, &m.hdr) < 0) {
			db->counters[PST_C_DB_EMIT_BLOCKED]++;
			break; /* the output is full: the answer stays first in line */
		}
		db->counters[counter]++;
		fifo_pop(db, &db->done);
		hash_remove(db, i);
		slot_free(db, i);
		n++;
	}
	return n;
}

/* ----------------------------------------------------------------------------- submit -- */

/* A hydrate of (user, shard) this one can join. Before it is sent, any: the claim goes out
 * with the highest epoch asked for. Once sent, only when it already carries an epoch at
 * least as high: the database stored the sent epoch as owner_epoch, and the answer must name
 * exactly that epoch (a later RELEASE_CLAIM is fenced by it). */
static uint32_t
find_hydrate(const struct pst_db *db, uint64_t user, uint16_t shard, uint64_t epoch)
{
	uint32_t found = NONE;
	for (uint32_t i = db->buckets[user_hash(user) & db->bucket_mask]; i != NONE;
	     i = db->reqs[i].hnext) {
		const struct req *r = &db->reqs[i];
		if (r->kind != REQ_HYDRATE || r->user != user || r->shard != shard)
			continue;
		if (r->phase == RS_QUEUED)
			return i;
		if (r->epoch >= epoch)
			found = i;
	}
	return found;
}

static uint32_t
find_flush(const struct pst_db *db, const struct wire_user_state *us, uint16_t shard,
	   uint64_t epoch)
{
	for (uint32_t i = db->buckets[user_hash(us->user) & db->bucket_mask]; i != NONE;
	     i = db->reqs[i].hnext) {
		const struct req *r = &db->reqs[i];
		if (r->kind == REQ_FLUSH && r->user == us->user && r->shard == shard &&
		    r->epoch == epoch && r->us.version == us->version)
			return i;
	}
	return NONE;
}

static uint32_t
find_release(const struct pst_db *db, uint64_t user, uint16_t shard, uint64_t epoch)
{
	for (uint32_t i = db->buckets[user_hash(user) & db->bucket_mask]; i != NONE;
	     i = db->reqs[i].hnext) {
		const struct req *r = &db->reqs[i];
		if (r->kind == REQ_RELEASE && r->user == user && r->shard == shard &&
		    r->epoch == epoch)
			return i;
	}
	return NONE;
}

/* What the schema can hold: ids and amounts as signed 64-bit, assets as integer. */
static bool
state_valid(const struct wire_user_state *us)
{
	if (us->user == 0 || us->user > INT64_MAX || us->balance_count > WIRE_BALANCES_MAX ||
	    us->user_seq > INT64_MAX || us->version >= INT64_MAX)
		return false;
	for (uint32_t k = 0; k < us->balance_count; k++)
		if (us->balances[k].asset == 0 || us->balances[k].asset > INT32_MAX ||
		    us->balances[k].total < 0)
			return false;
	return true;
}

int
pst_db_submit(struct pst_db *db, const struct wire_msg_hdr *msg, uint64_t now_ns)
{
	CHECK(db != NULL && msg != NULL);
	if (msg->type == WIRE_HYDRATE_REQUEST) {
		if (msg->length != sizeof(struct wire_hydrate_request))
			return -EINVAL;
		const struct wire_hydrate_request *h = (const void *)msg;
		if (h->user == 0 || h->user > INT64_MAX || h->epoch > INT64_MAX)
			return -EINVAL;
		uint32_t i = find_hydrate(db, h->user, msg->shard, h->epoch);
		if (i != NONE) {
			/* Seed: single-flight collapses a burst of first orders into one read;
			 * the answer carries the newest epoch asked for. */
			if (h->epoch > db->reqs[i].epoch) {
				DCHECK(db->reqs[i].phase == RS_QUEUED);
				db->reqs[i].epoch = h->epoch;
			}
			db->counters[PST_C_DB_HYDRATES_MERGED]++;
			return 0;
		}
		i = slot_alloc(db);
		if (i == NONE) {
			db->counters[PST_C_DB_FULL]++;
			return -ENOBUFS;
		}
		struct req *r = &db->reqs[i];
		r->kind = REQ_HYDRATE;
		r->shard = msg->shard;
		r->user = h->user;
		r->epoch = h->epoch;
		r->accepted_ns = now_ns;
		hash_insert(db, i);
		db->counters[PST_C_DB_HYDRATES]++;
		const struct neg *n = neg_slot(db, h->user);
		if (n->user == h->user && now_ns < n->expires_ns && n->owner != msg->shard) {
			/* Negative cache: the holder was seen moments ago; spare the database and
			 * carry the owner back so the gateway can re-route. */
			r->outcome = OUT_HYD_OWNED;
			r->owner = n->owner;
			db->counters[PST_C_DB_HYDRATES_NEG_CACHE]++;
			complete(db, i);
			return 0;
		}
		r->phase = RS_QUEUED;
		fifo_push(db, &db->queue, i);
		return 0;
	}
	if (msg->type == WIRE_BEGIN_DEHYDRATE) {
		if (msg->length != sizeof(struct wire_begin_dehydrate))
			return -EINVAL;
		const struct wire_begin_dehydrate *b = (const void *)msg;
		if (!state_valid(&b->state) || b->epoch > INT64_MAX)
			return -EINVAL;
		if (find_flush(db, &b->state, msg->shard, b->epoch) != NONE) {
			db->counters[PST_C_DB_FLUSHES_MERGED]++;
			return 0;
		}
		uint32_t i = slot_alloc(db);
		if (i == NONE) {
			db->counters[PST_C_DB_FULL]++;
			return -ENOBUFS;
		}
		struct req *r = &db->reqs[i];
		r->kind = REQ_FLUSH;
		r->shard = msg->shard;
		r->user = b->state.user;
		r->epoch = b->epoch;
		r->accepted_ns = now_ns;
		r->us = b->state;
		hash_insert(db, i);
		db->counters[PST_C_DB_FLUSHES]++;
		r->phase = RS_QUEUED;
		fifo_push(db, &db->queue, i);
		return 0;
	}
	if (msg->type == WIRE_RELEASE_CLAIM) {
		if (msg->length != sizeof(struct wire_release_claim))
			return -EINVAL;
		const struct wire_release_claim *c = (const void *)msg;
		if (c->user == 0 || c->user > INT64_MAX || c->epoch > INT64_MAX || c->status != 0)
			return -EINVAL;
		if (find_release(db, c->user, msg->shard, c->epoch) != NONE) {
			db->counters[PST_C_DB_RELEASES_MERGED]++;
			return 0;
		}
		uint32_t i = slot_alloc(db);
		if (i == NONE) {
			db->counters[PST_C_DB_FULL]++;
			return -ENOBUFS;
		}
		struct req *r = &db->reqs[i];
		r->kind = REQ_RELEASE;
		r->shard = msg->shard;
		r->user = c->user;
		r->epoch = c->epoch;
		r->accepted_ns = now_ns;
		hash_insert(db, i);
		db->counters[PST_C_DB_RELEASES]++;
		r->phase = RS_QUEUED;
		fifo_push(db, &db->queue, i);
		return 0;
	}
	return -EINVAL;
}

void
pst_db_clear(struct pst_db *db)
{
	CHECK(db != NULL);
	uint32_t i;
	while ((i = fifo_pop(db, &db->queue)) != NONE) {
		hash_remove(db, i);
		slot_free(db, i);
	}
	while ((i = fifo_pop(db, &db->done)) != NONE) {
		hash_remove(db, i);
		slot_free(db, i);
	}
	/* Statements on the wire finish in the database; their answers are dropped. */
	for (i = db->batch.head; i != NONE; i = db->reqs[i].next) {
		if (!db->reqs[i].abandoned) {
			hash_remove(db, i);
			db->reqs[i].abandoned = 1;
		}
	}
	for (uint32_t k = 0; k < db->pipe_count; k++) {
		uint32_t item = db->pipe[(db->pipe_head + k) % db->pipe_cap];
		if (item < ITEM_PREPARE && !db->reqs[item].abandoned) {
			hash_remove(db, item);
			db->reqs[item].abandoned = 1;
		}
	}
}

/* ------------------------------------------------------------------------- connection -- */

static void
pipe_push(struct pst_db *db, uint32_t item, uint64_t now_ns)
{
	CHECK(db->pipe_count < db->pipe_cap);
	uint32_t at = (db->pipe_head + db->pipe_count) % db->pipe_cap;
	db->pipe[at] = item;
	db->pipe_ns[at] = now_ns;
	db->pipe_count++;
}

static uint32_t
pipe_pop(struct pst_db *db)
{
	CHECK(db->pipe_count > 0);
	uint32_t item = db->pipe[db->pipe_head];
	db->pipe_head = (db->pipe_head + 1) % db->pipe_cap;
	db->pipe_count--;
	db->head_has_result = false;
	return item;
}

static void
error_keep(struct pst_db *db, const char *text)
{
	snprintf(db->last_error, sizeof(db->last_error), "%s", text ? text : "?");
	size_t n = strlen(db->last_error);
	while (n > 0 && (db->last_error[n - 1] == '\n' || db->last_error[n - 1] == ' '))
		db->last_error[--n] = '\0';
}

/* Hydrates that have waited past the deadline while the database is away are answered
 * ERROR ("database unavailable; the shard may ask again"); flushes wait, they are money. */
static void
hydrate_deadlines(struct pst_db *db, uint64_t now_ns)
{
	if (db->cfg.hydrate_deadline_ns == 0)
		return;
	struct fifo keep;
	fifo_init(&keep);
	uint32_t i;
	while ((i = fifo_pop(db, &db->queue)) != NONE) {
		struct req *r = &db->reqs[i];
		if (r->kind == REQ_HYDRATE && now_ns - r->accepted_ns > db->cfg.hydrate_deadline_ns) {
			r->outcome = OUT_FAILED;
			complete(db, i);
		} else {
			fifo_push(db, &keep, i);
		}
	}
	db->queue = keep;
}

static void
backoff_arm(struct pst_db *db, uint64_t now_ns)
{
	db->retry_at_ns = now_ns + db->backoff_ns;
	db->backoff_ns = db->backoff_ns * 2 > db->cfg.backoff_max_ns ? db->cfg.backoff_max_ns
								     : db->backoff_ns * 2;
}

/* The connection is gone (or given up): every unanswered request goes back to the front of
 * the queue, oldest first. Their commits may or may not have happened; re-sending is safe
 * because both statements are idempotent. */
static void
conn_lost(struct pst_db *db, uint64_t now_ns)
{
	if (db->conn != NULL)
		error_keep(db, PQerrorMessage(db->conn));
	struct fifo back;
	fifo_init(&back);
	uint32_t i;
	while ((i = fifo_pop(db, &db->batch)) != NONE)
		fifo_push(db, &back, i);
	while (db->pipe_count > 0) {
		uint32_t item = pipe_pop(db);
		if (item < ITEM_PREPARE)
			fifo_push(db, &back, item);
	}
	struct fifo again;
	fifo_init(&again);
	while ((i = fifo_pop(db, &back)) != NONE) {
		struct req *r = &db->reqs[i];
		if (r->abandoned) {
			slot_free(db, i);
			continue;
		}
		r->phase = RS_QUEUED;
		r->outcome = OUT_NONE;
		r->isolate = 0;
		fifo_push(db, &again, i);
	}
	fifo_prepend(db, &db->queue, &again);
	db->syncs_out = 0;
	db->batch_failed = false;
	db->head_has_result = false;
	db->prepared = false;
	if (db->conn != NULL) {
		PQfinish(db->conn);
		db->conn = NULL;
	}
	if (db->conn_state == CONN_READY)
		db->counters[PST_C_DB_DISCONNECTS]++;
	else
		db->counters[PST_C_DB_CONNECT_FAILURES]++;
	db->conn_state = CONN_DOWN;
	backoff_arm(db, now_ns);
	hydrate_deadlines(db, now_ns);
}

static int
conn_setup(struct pst_db *db, uint64_t now_ns)
{
	if (PQsetnonblocking(db->conn, 1) != 0 || PQenterPipelineMode(db->conn) != 1)
		return -1;
	if (!PQsendPrepare(db->conn, "pst_hydrate", SQL_HYDRATE, 0, NULL))
		return -1;
	pipe_push(db, ITEM_PREPARE, now_ns);
	if (!PQsendPrepare(db->conn, "pst_flush", SQL_FLUSH, 0, NULL))
		return -1;
	pipe_push(db, ITEM_PREPARE, now_ns);
	if (!PQsendPrepare(db->conn, "pst_release", SQL_RELEASE, 0, NULL))
		return -1;
	pipe_push(db, ITEM_PREPARE, now_ns);
	if (!PQpipelineSync(db->conn))
		return -1;
	pipe_push(db, ITEM_SYNC, now_ns);
	db->syncs_out++;
	db->conn_state = CONN_READY;
	return 0;
}

/* Start a connection attempt. A socket path or hostaddr never blocks here. */
static uint32_t
conn_start(struct pst_db *db, uint64_t now_ns)
{
	db->conn = PQconnectStart(db->conninfo);
	if (db->conn == NULL || PQstatus(db->conn) == CONNECTION_BAD) {
		conn_lost(db, now_ns);
		return 1;
	}
	db->conn_state = CONN_CONNECTING;
	db->connect_poll = PGRES_POLLING_WRITING; /* libpq: behave as if it said WRITING */
	db->connect_started_ns = now_ns;
	return 1;
}

static uint32_t
conn_step(struct pst_db *db, uint64_t now_ns)
{
	struct pollfd p = {
		.fd = PQsocket(db->conn),
		.events = db->connect_poll == PGRES_POLLING_READING ? POLLIN : POLLOUT,
	};
	if (p.fd < 0) {
		conn_lost(db, now_ns);
		return 1;
	}
	int rc = poll(&p, 1, 0); /* readiness only: never waits */
	if (rc == 0) {
		if (now_ns - db->connect_started_ns > db->cfg.batch_timeout_ns) {
			error_keep(db, "connection attempt timed out");
			db->counters[PST_C_DB_TIMEOUTS]++;
			conn_lost(db, now_ns);
			return 1;
		}
		return 0;
	}
	db->connect_poll = PQconnectPoll(db->conn);
	if (db->connect_poll == PGRES_POLLING_FAILED) {
		conn_lost(db, now_ns);
		return 1;
	}
	if (db->connect_poll == PGRES_POLLING_OK && conn_setup(db, now_ns) < 0)
		conn_lost(db, now_ns);
	return 1;
}

/* ------------------------------------------------------------------------------- send -- */

static int
fmt_i64(char *buf, size_t size, int64_t v)
{
	return snprintf(buf, size, "%" PRId64, v);
}

static int
send_req(struct pst_db *db, uint32_t i)
{
	const struct req *r = &db->reqs[i];
	char p[8][24];
	char assets[WIRE_BALANCES_MAX * 12 + 3], totals[WIRE_BALANCES_MAX * 21 + 3];
	char recent[3 + 2 * sizeof(struct wire_recent) * WIRE_RECENT_MAX];
	const char *values[9];
	int n;

	fmt_i64(p[0], sizeof(p[0]), (int64_t)r->user);
	if (r->kind == REQ_HYDRATE || r->kind == REQ_RELEASE) {
		fmt_i64(p[1], sizeof(p[1]), r->shard);
		fmt_i64(p[2], sizeof(p[2]), (int64_t)r->epoch);
		values[0] = p[0];
		values[1] = p[1];
		values[2] = p[2];
		const char *stmt = r->kind == REQ_HYDRATE ? "pst_hydrate" : "pst_release";
		return PQsendQueryPrepared(db->conn, stmt, 3, values, NULL, NULL, 0) ? 0 : -1;
	}
	fmt_i64(p[1], sizeof(p[1]), (int64_t)r->us.version);
	fmt_i64(p[2], sizeof(p[2]), r->shard);
	fmt_i64(p[3], sizeof(p[3]), (int64_t)r->epoch);
	fmt_i64(p[4], sizeof(p[4]), (int64_t)r->us.user_seq);
	fmt_i64(p[5], sizeof(p[5]), r->us.tier);
	size_t a = 0, t = 0;
	assets[a++] = '{';
	totals[t++] = '{';
	for (uint32_t k = 0; k < r->us.balance_count; k++) {
		n = snprintf(assets + a, sizeof(assets) - a, "%s%" PRIu32, k ? "," : "",
			     r->us.balances[k].asset);
		a += (size_t)n;
		n = snprintf(totals + t, sizeof(totals) - t, "%s%" PRId64, k ? "," : "",
			     r->us.balances[k].total);
		t += (size_t)n;
	}
	assets[a++] = '}';
	assets[a] = '\0';
	totals[t++] = '}';
	totals[t] = '\0';
	for (int k = 0; k < 6; k++)
		values[k] = p[k];
	values[6] = assets;
	values[7] = totals;
	/* bytea in hex text form: \x then two digits a byte; only the valid entries. */
	static const char hex[] = "0123456789abcdef";
	uint32_t rc = r->us.recent_count <= WIRE_RECENT_MAX ? r->us.recent_count : 0;
	const uint8_t *rb = (const uint8_t *)r->us.recent;
	size_t rn = 0;
	recent[rn++] = '\\';
	recent[rn++] = 'x';
	for (size_t k = 0; k < rc * sizeof(struct wire_recent); k++) {
		recent[rn++] = hex[rb[k] >> 4];
		recent[rn++] = hex[rb[k] & 15];
	}
	recent[rn] = '\0';
	values[8] = recent;
	return PQsendQueryPrepared(db->conn, "pst_flush", 9, values, NULL, NULL, 0) ? 0 : -1;
}

/* Send queued requests as batches, each ended by a Sync. -1 when the connection failed. */
static int
send_batches(struct pst_db *db, uint64_t now_ns, uint32_t *work)
{
	while (db->queue.head != NONE && db->syncs_out < db->cfg.batches_in_flight_max) {
		uint32_t n = 0;
		while (db->queue.head != NONE && n < db->cfg.batch_max) {
			uint32_t i = db->queue.head;
			struct req *r = &db->reqs[i];
			if (r->isolate && n > 0)
				break; /* a suspect statement goes alone */
			if (send_req(db, i) < 0)
				return -1;
			fifo_pop(db, &db->queue);
			r->phase = RS_SENT;
			r->outcome = OUT_NONE;
			if (r->tries++ > 0)
				db->counters[PST_C_DB_RESENT]++;
			pipe_push(db, i, now_ns);
			n++;
			if (r->isolate)
				break;
		}
		if (!PQpipelineSync(db->conn))
			return -1;
		pipe_push(db, ITEM_SYNC, now_ns);
		db->syncs_out++;
		db->counters[PST_C_DB_BATCHES]++;
		*work += n;
	}
	return 0;
}

/* ---------------------------------------------------------------------------- results -- */

static bool
parse_i64(const char *s, int64_t *out)
{
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
	if (s[0] != '{')
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

static void
hydrate_row(struct pst_db *db, struct req *r, const PGresult *res)
{
	(void)db;
	if (PQntuples(res) != 1 || PQnfields(res) != 9) {
		/* No row: the row changed between our snapshot and the claim. Ask again. */
		r->outcome = OUT_HYD_RETRY;
		return;
	}
	if (strcmp(PQgetvalue(res, 0, 0), "1") != 0) {
		int64_t owner;
		if (PQgetisnull(res, 0, 7) || !parse_i64(PQgetvalue(res, 0, 7), &owner) ||
		    owner == r->shard) {
			r->outcome = OUT_HYD_RETRY; /* raced a release or our own claim */
			return;
		}
		r->outcome = OUT_HYD_OWNED;
		r->owner = (uint16_t)owner;
		return;
	}
	int64_t version, seq, tier, assets[WIRE_BALANCES_MAX], totals[WIRE_BALANCES_MAX];
	if (!parse_i64(PQgetvalue(res, 0, 2), &version) ||
	    !parse_i64(PQgetvalue(res, 0, 3), &seq) || !parse_i64(PQgetvalue(res, 0, 4), &tier)) {
		r->outcome = OUT_BAD_ROW;
		return;
	}
	int na = parse_array(PQgetvalue(res, 0, 5), assets, WIRE_BALANCES_MAX);
	int nt = parse_array(PQgetvalue(res, 0, 6), totals, WIRE_BALANCES_MAX);
	if (na < 0 || na != nt || version < 0 || seq < 0 || tier < 0 || tier > UINT8_MAX) {
		r->outcome = OUT_BAD_ROW; /* more balances than a wire state carries, ... */
		return;
	}
	memset(&r->us, 0, sizeof(r->us));
	r->us.user = r->user;
	r->us.version = (uint64_t)version;
	r->us.user_seq = (uint64_t)seq;
	r->us.tier = (uint8_t)tier;
	r->us.balance_count = (uint32_t)na;
	for (int k = 0; k < na; k++) {
		if (assets[k] <= 0 || assets[k] > INT32_MAX || totals[k] < 0) {
			r->outcome = OUT_BAD_ROW;
			return;
		}
		r->us.balances[k].asset = (uint32_t)assets[k];
		r->us.balances[k].total = totals[k];
	}
	/* The idempotency window: packed wire_recent entries, bytea in hex text form. */
	const char *rt = PQgetvalue(res, 0, 8);
	size_t rl = strlen(rt);
	if (rl < 2 || rt[0] != '\\' || rt[1] != 'x' || (rl - 2) % (2 * sizeof(struct wire_recent)) != 0 ||
	    (rl - 2) / 2 > sizeof(r->us.recent)) {
		r->outcome = OUT_BAD_ROW;
		return;
	}
	uint8_t *rb = (uint8_t *)r->us.recent;
	for (size_t k = 0; k < (rl - 2) / 2; k++) {
		int hi = hexval(rt[2 + 2 * k]), lo = hexval(rt[3 + 2 * k]);
		if (hi < 0 || lo < 0) {
			r->outcome = OUT_BAD_ROW;
			return;
		}
		rb[k] = (uint8_t)(hi << 4 | lo);
	}
	r->us.recent_count = (uint32_t)((rl - 2) / 2 / sizeof(struct wire_recent));
	for (uint32_t k = 0; k < r->us.recent_count; k++) {
		const struct wire_recent *e = &r->us.recent[k];
		if (e->kind < WIRE_RECENT_ORDER || e->kind > WIRE_RECENT_TRANSFER ||
		    e->reason >= WIRE_REASON_MAX) {
			r->outcome = OUT_BAD_ROW;
			return;
		}
	}
	r->hyd_new = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
	r->outcome = OUT_HYD_CLAIMED;
}

static void
flush_row(struct req *r, const PGresult *res)
{
	int64_t outcome, version;
	if (PQntuples(res) != 1 || PQnfields(res) != 2 ||
	    !parse_i64(PQgetvalue(res, 0, 0), &outcome) ||
	    !parse_i64(PQgetvalue(res, 0, 1), &version)) {
		r->outcome = OUT_FAILED_RETRY;
		return;
	}
	r->version = version < 0 ? 0 : (uint64_t)version;
	r->outcome = outcome == 1 ? OUT_FLUSH_WRITTEN
		   : outcome == 2 ? OUT_FLUSH_REPEAT
				  : OUT_FLUSH_CONFLICT;
	if (outcome == 2)
		r->version = r->us.version + 1; /* the version our write produced */
}

static void
release_row(struct req *r, const PGresult *res)
{
	int64_t n;
	if (PQntuples(res) != 1 || PQnfields(res) != 1 || !parse_i64(PQgetvalue(res, 0, 0), &n)) {
		r->outcome = OUT_FAILED_RETRY;
		return;
	}
	r->outcome = n > 0 ? OUT_RELEASED : OUT_RELEASE_NOOP;
}

/* Errors a retry cannot cure: bad data, constraint violations, missing privileges. */
static bool
sqlstate_permanent(const char *state)
{
	if (state == NULL || strlen(state) != 5)
		return false;
	return strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0 ||
	       strncmp(state, "42", 2) == 0 || strncmp(state, "2B", 2) == 0 ||
	       strncmp(state, "44", 2) == 0;
}

static void
statement_result(struct pst_db *db, uint32_t i, const PGresult *res)
{
	struct req *r = &db->reqs[i];
	ExecStatusType st = PQresultStatus(res);
	if (st == PGRES_TUPLES_OK) {
		if (r->kind == REQ_HYDRATE)
			hydrate_row(db, r, res);
		else if (r->kind == REQ_FLUSH)
			flush_row(r, res);
		else
			release_row(r, res);
		return;
	}
	db->batch_failed = true;
	if (st == PGRES_PIPELINE_ABORTED)
		return; /* an earlier statement of the batch failed */
	error_keep(db, PQresultErrorMessage(res));
	r->outcome = sqlstate_permanent(PQresultErrorField(res, PG_DIAG_SQLSTATE))
			     ? OUT_FAILED
			     : OUT_FAILED_RETRY;
}

#define RETRIES_MAX 8 /* transient failures of one statement before it is answered ERROR */

/* A Sync came back: the batch's transaction is over, its answers are final. */
static void
batch_done(struct pst_db *db, uint64_t now_ns)
{
	bool failed = db->batch_failed;
	bool single = db->batch.head != NONE && db->batch.head == db->batch.tail;
	db->batch_failed = false;
	if (failed && !single)
		db->counters[PST_C_DB_BATCH_FAILURES]++;
	struct fifo again;
	fifo_init(&again);
	uint32_t i;
	while ((i = fifo_pop(db, &db->batch)) != NONE) {
		struct req *r = &db->reqs[i];
		if (r->abandoned) {
			slot_free(db, i);
			continue;
		}
		if (failed && !single) {
			/* The whole batch rolled back: every statement goes again, alone. */
			r->isolate = 1;
			r->phase = RS_QUEUED;
			fifo_push(db, &again, i);
			continue;
		}
		switch (r->outcome) {
		case OUT_HYD_CLAIMED:
			neg_forget(db, r->user);
			break;
		case OUT_HYD_OWNED: {
			struct neg *n = neg_slot(db, r->user);
			n->user = r->user;
			n->owner = r->owner;
			n->expires_ns = now_ns + db->cfg.neg_ttl_ns;
			break;
		}
		case OUT_RELEASED:
		case OUT_RELEASE_NOOP:
			neg_forget(db, r->user); /* the claim is free (or ours again) */
			break;
		case OUT_FLUSH_CONFLICT:
			/* READ COMMITTED: when our UPDATE waited for a concurrent writer of the row
			 * (our own earlier attempt, still running on a connection we gave up), it
			 * re-checks the row but the ledger lookup still sees the statement's old
			 * snapshot, so our own write can look foreign. A conflict is final only
			 * when a second statement, started after that writer committed, agrees. */
			if (!r->rechecked) {
				r->rechecked = 1;
				r->phase = RS_QUEUED;
				db->counters[PST_C_DB_FLUSH_RECHECKS]++;
				fifo_push(db, &again, i);
				continue;
			}
			break;
		case OUT_FLUSH_WRITTEN:
		case OUT_FLUSH_REPEAT:
		case OUT_FAILED:
		case OUT_BAD_ROW:
			break;
		default: /* OUT_NONE, OUT_HYD_RETRY, OUT_FAILED_RETRY */
			if (r->tries < RETRIES_MAX) {
				r->phase = RS_QUEUED;
				fifo_push(db, &again, i);
				continue;
			}
			r->outcome = OUT_FAILED;
			break;
		}
		r->isolate = 0;
		complete(db, i);
	}
	fifo_prepend(db, &db->queue, &again);
}

/* Read what arrived. -1 when the connection is unusable. */
static int
read_results(struct pst_db *db, uint64_t now_ns, uint32_t *work)
{
	if (!PQconsumeInput(db->conn))
		return -1;
	while (db->pipe_count > 0 && !PQisBusy(db->conn)) {
		uint32_t item = db->pipe[db->pipe_head];
		PGresult *res = PQgetResult(db->conn);
		if (res == NULL) {
			/* The end of one statement's results. */
			if (item == ITEM_SYNC || !db->head_has_result)
				break;
			pipe_pop(db);
			if (item != ITEM_PREPARE)
				fifo_push(db, &db->batch, item);
			continue;
		}
		ExecStatusType st = PQresultStatus(res);
		int rc = 0;
		if (st == PGRES_PIPELINE_SYNC) {
			if (item != ITEM_SYNC) {
				rc = -1; /* out of step with libpq: start over */
			} else {
				pipe_pop(db);
				db->syncs_out--;
				if (!db->prepared) {
					/* The statements are ready: the connection is good. */
					db->prepared = true;
					db->backoff_ns = db->cfg.backoff_min_ns;
					db->counters[PST_C_DB_CONNECTS]++;
				}
				batch_done(db, now_ns);
				(*work)++;
			}
		} else if (item == ITEM_SYNC) {
			rc = -1;
		} else if (item == ITEM_PREPARE) {
			db->head_has_result = true;
			if (st != PGRES_COMMAND_OK) {
				error_keep(db, PQresultErrorMessage(res));
				rc = -1; /* schema missing or no privilege: back off and retry */
			}
		} else {
			db->head_has_result = true;
			statement_result(db, item, res);
			(*work)++;
		}
		PQclear(res);
		if (rc < 0)
			return -1;
	}
	return PQstatus(db->conn) == CONNECTION_BAD ? -1 : 0;
}

/* ------------------------------------------------------------------------------- poll -- */

uint32_t
pst_db_poll(struct pst_db *db, uint64_t now_ns)
{
	CHECK(db != NULL);
	uint32_t work = 0;
	switch (db->conn_state) {
	case CONN_DOWN:
		if (now_ns >= db->retry_at_ns)
			work += conn_start(db, now_ns);
		break;
	case CONN_CONNECTING:
		work += conn_step(db, now_ns);
		break;
	case CONN_READY:
		if (PQflush(db->conn) < 0 || read_results(db, now_ns, &work) < 0 ||
		    send_batches(db, now_ns, &work) < 0 || PQflush(db->conn) < 0) {
			conn_lost(db, now_ns);
			work++;
			break;
		}
		if (db->pipe_count > 0 &&
		    now_ns - db->pipe_ns[db->pipe_head] > db->cfg.batch_timeout_ns) {
			/* The server is not answering (a dead host keeps a TCP socket open). */
			error_keep(db, "batch timed out");
			db->counters[PST_C_DB_TIMEOUTS]++;
			conn_lost(db, now_ns);
			work++;
		}
		break;
	default:
		CHECK(false);
	}
	work += emit_done(db);
	return work;
}

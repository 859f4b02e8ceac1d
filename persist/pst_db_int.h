/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the PostgreSQL rooms of persist/: the request table, the pipeline and the
 * connection state they share, and what each room offers the ones above it. Calls run one
 * way only, from the top down, so no room needs to know the one that calls it:
 *
 *   pst_db.c        the public entry points, the connection's lifecycle and its back-off
 *   pst_db_batch.c  the batch state machine: statements and Syncs in the pipeline
 *   pst_db_req.c    the request table: slots, queues, merge lookups, negative cache, answers
 *   pst_db_sql.c    SQL text, parameter encoding and row decoding over plain buffers
 *
 * pst_db_sql.c touches neither the table nor libpq, so a row decoder can be driven by a
 * fuzzer with nothing but strings. None of this is public (persist/persist.h is).
 */
#ifndef OMSD_PERSIST_PST_DB_INT_H
#define OMSD_PERSIST_PST_DB_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <libpq-fe.h>

#include "common/hist.h"
#include "persist/pst_int.h"

#define PST_SLOT_NONE UINT32_MAX          /* no slot: an empty list, the end of a chain */
#define PST_ITEM_SYNC (UINT32_MAX - 1)    /* pipe item: a Sync */
#define PST_ITEM_PREPARE (UINT32_MAX - 2) /* pipe item: a statement being prepared */
#define PST_ITEM_SCHEMA (UINT32_MAX - 3)  /* pipe item: the schema version query */
#define PST_ITEM_SPECIAL_MIN PST_ITEM_SCHEMA /* items at or above: not a request slot */

/* What a request asks the database; also the index (minus one) of its prepared statement. */
enum pst_req_kind {
	PST_REQ_HYDRATE = 1, /* read and claim a user's row */
	PST_REQ_FLUSH = 2,   /* fenced CAS write, claim kept */
	PST_REQ_RELEASE = 3, /* let go of the claim */
	PST_REQ_LOOKUP = 4,  /* read one transfer's recorded outcome */
};
#define PST_REQ_KINDS 4 /* prepared statements, one per kind */

/* Where a request slot is in its life. */
enum pst_req_phase {
	PST_PHASE_FREE = 0,   /* on the free list */
	PST_PHASE_QUEUED = 1, /* waiting to be sent */
	PST_PHASE_SENT = 2,   /* in the pipeline; answer not final before its Sync */
	PST_PHASE_DONE = 3,   /* answered; completion waiting for the output */
};

/* What a statement's row said, made final at the Sync. */
enum pst_outcome {
	PST_OUT_NONE = 0,       /* no row yet */
	PST_OUT_HYD_CLAIMED,    /* hydrate: claimed (ok/new in out) */
	PST_OUT_HYD_OWNED,      /* hydrate: another shard holds it */
	PST_OUT_HYD_RETRY,      /* hydrate: raced a concurrent change; ask again */
	PST_OUT_HYD_UNKNOWN,    /* hydrate: no such account (nothing created) */
	PST_OUT_FLUSH_WRITTEN,  /* flush: written now */
	PST_OUT_FLUSH_REPEAT,   /* flush: our own write found */
	PST_OUT_FLUSH_CONFLICT, /* flush: foreign write */
	PST_OUT_RELEASED,       /* release: the claim was let go now */
	PST_OUT_RELEASE_NOOP,   /* release: nothing to do (released already, or hydrated again) */
	PST_OUT_XFER_FOUND,     /* lookup: the transfer is recorded (its outcome in xfer) */
	PST_OUT_XFER_NOT_FOUND, /* lookup: no such transfer */
	PST_OUT_FAILED,         /* the statement failed (permanent) */
	PST_OUT_FAILED_RETRY,   /* the statement failed (transient) */
	PST_OUT_BAD_ROW,        /* a row we cannot represent (too many balances, ...) */
};

/* One request slot. */
struct pst_req {
	uint8_t kind;         /* enum pst_req_kind */
	uint8_t phase;        /* enum pst_req_phase */
	uint8_t outcome;      /* enum pst_outcome, pending the Sync */
	uint8_t isolate;      /* send alone (its batch failed) */
	uint8_t abandoned;    /* pst_db_clear: answer dropped */
	uint8_t rechecked;    /* flush: a CONFLICT was confirmed by a second statement */
	uint8_t grouped;      /* sent inside a multi-row statement (its answer row has an ord) */
	uint8_t lane;         /* the connection it is queued on or sent over (enum pst_lane_id) */
	uint16_t shard;       /* requesting OMS shard */
	uint32_t next;        /* FIFO link (queue / done / batch), the next member of a statement
			       * in the pipe (a group, PST_SLOT_NONE at its end), or free list */
	uint32_t hnext;       /* hash chain */
	uint32_t tries;       /* times sent */
	uint64_t user;        /* the user the statement is about */
	uint64_t epoch;       /* highest epoch asked for */
	uint64_t accepted_ns; /* when submitted (hydrate deadline) */
	uint64_t sent_ns;     /* when first sent to the database (the latency split) */
	uint64_t version;     /* flush: version after (outcome) */
	uint16_t owner;       /* hydrate OWNED: holder */
	uint8_t hyd_new;      /* hydrate: the row was created */
	uint8_t handoff;      /* release: hand the claim to to_shard (a move, docs/fencing.md) */
	uint16_t to_shard;    /* release with handoff: the new holder */
	uint64_t xfer_id;     /* lookup: the transfer id */
	struct wire_recent xfer; /* lookup FOUND: the recorded outcome */
	struct wire_user_state us; /* flush: what to write; hydrate: what was read */
};

/* A list of request slots linked through pst_req.next. */
struct pst_fifo {
	uint32_t head; /* first, PST_SLOT_NONE when empty */
	uint32_t tail; /* last */
};

/* The connections (lanes). Each runs its own pipeline of batches; a user's live requests
 * are all on one lane at a time (pst_req_lane), so every user's requests keep their order
 * while reads need not wait behind other users' writes. */
enum pst_lane_id {
	PST_LANE_WRITE = 0, /* flushes and releases (and whatever shares a user with them) */
	PST_LANE_READ = 1,  /* hydrates and lookups, when the config asks for a read lane */
};
#define PST_LANES 2

enum pst_conn_state {
	PST_CONN_DOWN = 0,       /* no connection; the next attempt at retry_at_ns */
	PST_CONN_CONNECTING = 1, /* PQconnectPoll in progress */
	PST_CONN_READY = 2,      /* in pipeline mode; statements prepared or being prepared */
};

/* One statement of the batch being sent (pst_db_batch.c): its requests chained through
 * pst_req.next, in submission order. */
struct pst_plan_stmt {
	uint32_t head;  /* first request, the pipe item */
	uint32_t tail;  /* last request */
	uint32_t count; /* requests: one row each */
	uint8_t kind;   /* enum pst_req_kind, shared by all */
	bool alone;     /* a lookup or an isolated request: nobody joins it */
};

/* Where a user is in the batch being planned. */
struct pst_plan_user {
	uint64_t user;       /* the user */
	uint32_t stmt_after; /* the statement after the last one holding the user */
	uint32_t gen;        /* plan_gen when written; any other value: empty */
};

/* Negative cache entry: a user another shard was seen to hold. */
struct pst_neg {
	uint64_t user;       /* 0: empty */
	uint64_t expires_ns; /* valid before */
	uint16_t owner;      /* holder of the claim */
};

/* One connection and the pipeline on it (pst_db.c runs its lifecycle, pst_db_batch.c its
 * batches). */
struct pst_lane {
	PGconn *conn;                /* NULL when down */
	uint32_t conn_state;         /* enum pst_conn_state */
	PostgresPollingStatusType connect_poll; /* last PQconnectPoll answer */
	uint64_t connect_started_ns; /* connection attempt start */
	uint64_t retry_at_ns;        /* next attempt when down */
	uint64_t backoff_ns;         /* current back-off */
	uint32_t syncs_max;          /* batches (Syncs) in flight at most */
	struct pst_fifo queue;       /* PST_PHASE_QUEUED on this lane, in send order */
	struct pst_fifo batch;       /* PST_PHASE_SENT items taken off the pipe, not yet synced */
	bool batch_failed;           /* a statement in the current batch failed */
	uint32_t *pipe;              /* items in flight: a statement (its first slot, the others
				      * chained through next), PST_ITEM_SYNC or PST_ITEM_PREPARE */
	uint64_t *pipe_ns;           /* send time of each item */
	uint32_t pipe_cap;           /* slots of pipe and pipe_ns */
	uint32_t pipe_head;          /* oldest */
	uint32_t pipe_count;         /* items in flight */
	bool head_has_result;        /* the oldest item has delivered a result */
	uint32_t syncs_out;          /* Syncs in flight (prepare Sync included) */
	bool prepared;               /* statements prepared on this connection */
};

struct pst_db {
	struct pst_db_config cfg;    /* copy (conninfo copied below) */
	/* Per kind (index kind - 1), answered requests: submitted → first sent (the queue)
	 * and first sent → answer final at its Sync (the database, retries included). */
	struct hist lat_queue[PST_REQ_KINDS];
	struct hist lat_db[PST_REQ_KINDS];
	char *conninfo;              /* owned copy */
	struct pst_lane lanes[PST_LANES]; /* lane_count of them in use */
	uint32_t lane_count;         /* 1, or 2 with a read lane */
	struct pst_req *reqs;        /* requests_max slots */
	uint32_t free_head;          /* free list through next */
	uint32_t pending;            /* slots in use */
	uint32_t *buckets;           /* hash heads, bucket_mask + 1 */
	uint32_t bucket_mask;        /* buckets - 1 (a power of two, >= 2 * requests_max) */
	struct pst_fifo done;        /* PST_PHASE_DONE, in answer order */
	struct pst_plan_stmt *plan;  /* batch_max: the statements of the batch being sent */
	struct pst_plan_user *plan_users; /* plan_user_mask + 1: where each user is in the plan */
	uint32_t plan_user_mask;     /* a power of two, >= 2 * batch_max, minus one */
	uint32_t plan_gen;           /* the batch being planned (older table entries are empty) */
	struct pst_sql_item *items;  /* batch_max: the group being encoded */
	char *group_buf;             /* its parameters: pst_sql_group_size(batch_max) bytes */
	struct pst_neg *negs;        /* negative cache */
	uint32_t neg_mask;           /* neg_cache_size - 1 */
	char last_error[256];        /* last database error text, for operators */
	uint64_t counters[PST_C_COUNT]; /* PST_C_DB_* counted here */
};

/* Cut the newlines and blanks libpq leaves at the end of its messages. */
static inline void
pst_trim_tail(char *s)
{
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = '\0';
}

/* Keep a database error text for operators (pst_db_last_error), without trailing blanks. */
static inline void
pst_db_error_keep(struct pst_db *db, const char *text)
{
	snprintf(db->last_error, sizeof(db->last_error), "%s", text ? text : "?");
	pst_trim_tail(db->last_error);
}

/* The connection's lifecycle, seen from the pipeline: the prepare Sync came back, so the
 * connection is good. The back-off starts over and the connect is counted. */
static inline void
pst_db_conn_proven(struct pst_db *db, struct pst_lane *l)
{
	l->prepared = true;
	l->backoff_ns = db->cfg.backoff_min_ns;
	db->counters[PST_C_DB_CONNECTS]++;
}

/* ---- the request table (pst_db_req.c) ---- */

void pst_fifo_init(struct pst_fifo *f);
void pst_fifo_push(struct pst_db *db, struct pst_fifo *f, uint32_t i);
/* The first slot of f, taken off it, or PST_SLOT_NONE when f is empty. */
uint32_t pst_fifo_pop(struct pst_db *db, struct pst_fifo *f);
/* Put the whole list front before f, keeping both orders; front is left empty. */
void pst_fifo_prepend(struct pst_db *db, struct pst_fifo *f, struct pst_fifo *front);

/* Link every slot into the free list, empty the hash and the lists (after allocation). */
void pst_req_table_init(struct pst_db *db);
/* Accept a request whose message was validated by pst_db_submit: merged into a matching one
 * (counted), answered from the negative cache (hydrate), or queued. 0 or -ENOBUFS (full). */
int pst_req_add_hydrate(struct pst_db *db, uint64_t user, uint16_t shard, uint64_t epoch,
			uint64_t now_ns);
int pst_req_add_flush(struct pst_db *db, const struct wire_user_state *us, uint16_t shard,
		      uint64_t epoch, uint64_t now_ns);
int pst_req_add_release(struct pst_db *db, uint64_t user, uint16_t shard, uint64_t epoch,
			bool handoff, uint16_t to_shard,
			uint64_t now_ns);
int pst_req_add_lookup(struct pst_db *db, uint64_t user, uint64_t transfer_id, uint16_t shard,
		       uint64_t epoch, uint64_t now_ns);
/* Request i is answered: its completion joins the output line. */
void pst_req_complete(struct pst_db *db, uint32_t i);
/* Return slot i to the free list (it must no longer be on a list or in the hash). */
void pst_req_free(struct pst_db *db, uint32_t i);
/* Take slot i out of the hash (abandoned requests are no longer found for merging). */
void pst_req_unhash(struct pst_db *db, uint32_t i);
/* Queue request i on the lane its user's live requests are on, or else the lane its kind
 * goes to (a read lane's hydrates and lookups, everything else the write lane). */
void pst_req_queue(struct pst_db *db, uint32_t i);
/* Free every queued and every answered request (pst_db_clear). */
void pst_req_drop_waiting(struct pst_db *db);
/* Offer completions to the output, in order, until it refuses. Returns how many it took. */
uint32_t pst_req_emit_done(struct pst_db *db);

/* Remember that owner holds user's claim until expires_ns. */
void pst_neg_note(struct pst_db *db, uint64_t user, uint16_t owner, uint64_t expires_ns);
/* Forget what the negative cache knows of user. */
void pst_neg_forget(struct pst_db *db, uint64_t user);

/* ---- SQL text, parameters and rows (pst_db_sql.c): no table, no libpq ---- */

/* One prepared statement: its name on the connection and its text. */
struct pst_sql_stmt {
	const char *name; /* "pst_hydrate", "pst_flush", "pst_release" */
	const char *text; /* the SQL */
};
/* Indexed by kind - 1 (enum pst_req_kind), prepared in this order on each connection. */
extern const struct pst_sql_stmt pst_sql_stmts[PST_REQ_KINDS];

#define PST_SQL_PARAMS_MAX 19 /* the flush's parameters */
#define PST_SQL_NUMS 11      /* numeric parameters of the flush ($1..$6, $15..$19) */
#define PST_SQL_COLS_MAX 14  /* the hydrate's columns */

/* A statement's parameters in libpq's text format, built in place. */
struct pst_sql_params {
	const char *stmt;                       /* prepared statement name */
	uint32_t count;                         /* parameters used */
	const char *values[PST_SQL_PARAMS_MAX]; /* text of each, pointing into the buffers below */
	char num[PST_SQL_NUMS][24];             /* decimal integers */
	char assets[WIRE_BALANCES_MAX * 12 + 3]; /* flush: integer[] "{1,2}" */
	char totals[WIRE_BALANCES_MAX * 21 + 3]; /* flush: bigint[] "{10,20}" */
	char recent[3 + 2 * sizeof(struct wire_recent) * WIRE_RECENT_MAX]; /* flush: bytea hex */
	/* flush: the transfer outcomes in recent[], columns of the transfers table */
	char xfer_ids[WIRE_RECENT_MAX * 21 + 3];    /* bigint[] */
	char xfer_assets[WIRE_RECENT_MAX * 12 + 3]; /* integer[] */
	char xfer_amounts[WIRE_RECENT_MAX * 21 + 3];/* bigint[] */
	char xfer_reasons[WIRE_RECENT_MAX * 7 + 3]; /* smallint[] */
	char xfer_totals[WIRE_RECENT_MAX * 21 + 3]; /* bigint[] */
};

/* ---- multi-row groups (pst_db_sql.c) ---- */

#define PST_GROUP_KINDS 3 /* hydrate, flush and release have a multi-row statement */
/* Indexed by kind - 1, prepared after pst_sql_stmts on each connection. */
extern const struct pst_sql_stmt pst_sql_group_stmts[PST_GROUP_KINDS];

/* One request of a group, as the encoder needs it (no request table here). */
struct pst_sql_item {
	uint64_t user;                    /* the user the row is about */
	uint64_t epoch;                   /* the request's epoch */
	uint16_t shard;                   /* the requesting OMS shard */
	bool handoff;                     /* release: hand the claim to to_shard */
	uint16_t to_shard;                /* release with handoff: the next holder */
	const struct wire_user_state *us; /* flush: what to write */
};

#define PST_SQL_GROUP_PARAMS_MAX 20 /* the group flush's parameters */
/* Bytes one flush row can take over all the group flush's array texts: eleven integers
 * (at most 20 characters and a comma each), assets and totals as quoted array texts, the
 * window in hex, and up to WIRE_RECENT_MAX transfers of six integers. A hydrate or a
 * release takes less. */
#define PST_SQL_GROUP_ROW_BYTES                                                            \
	(11 * 21 + (WIRE_BALANCES_MAX * 11 + 5) + (WIRE_BALANCES_MAX * 21 + 5) +           \
	 (2 * 32 * WIRE_RECENT_MAX + 3) + WIRE_RECENT_MAX * (11 + 21 + 11 + 21 + 7 + 21))

/* A multi-row statement's parameters, array texts in libpq's text format, built in one
 * buffer the caller allocated once (pst_sql_group_size(rows_max) bytes). */
struct pst_sql_group {
	char *buf;                                    /* caller memory */
	uint32_t rows_max;                            /* rows buf was sized for */
	const char *stmt;                             /* prepared statement name */
	uint32_t rows;                                /* requests encoded */
	uint32_t count;                               /* parameters used */
	const char *values[PST_SQL_GROUP_PARAMS_MAX]; /* text of each, pointing into buf */
};

/* The buffer a group of up to rows_max requests needs. */
size_t pst_sql_group_size(uint32_t rows_max);
/* Encode count (1..rows_max) requests of kind (hydrate, flush or release), about distinct
 * users, as the parameters of kind's multi-row statement; row r of the answer is items[r]. */
void pst_sql_encode_group(struct pst_sql_group *g, uint8_t kind, const struct pst_sql_item *items,
			  uint32_t count);
/* A group answer row's first column names request ord (1-based) of the group. */
bool pst_sql_group_ord_is(const char *text, uint32_t ord);

/* Encode the parameters of a statement of kind about (user, shard, epoch); a flush also
 * writes us (the state pst_db_submit validated against the schema). */
void pst_sql_encode(struct pst_sql_params *p, uint8_t kind, uint64_t user, uint16_t shard,
		    uint64_t epoch, const struct wire_user_state *us);
/* The lookup's parameters: $1 user, $2 transfer id (as the bigint of the same bits). */
void pst_sql_encode_lookup(struct pst_sql_params *p, uint64_t user, uint64_t transfer_id);
/* A release's parameters ($4: the shard the claim is handed to, or NULL to free it). */
void pst_sql_encode_release(struct pst_sql_params *p, uint64_t user, uint16_t shard,
			    uint64_t epoch, bool handoff, uint16_t to_shard);

/* One answer row as text columns (libpq's text format): plain data, so decoding needs no
 * connection. */
struct pst_sql_row {
	bool present;                       /* the result held exactly one row */
	uint32_t col_count;                 /* columns of the result */
	const char *cols[PST_SQL_COLS_MAX]; /* each column's text, NULL for SQL NULL */
};

/* The hydrate's row for (user, shard). CLAIMED fills *us and *is_new, OWNED fills *owner;
 * RETRY and BAD_ROW may leave *us half written. Returns the outcome. */
enum pst_outcome pst_sql_hydrate_decode(const struct pst_sql_row *row, uint64_t user,
					uint16_t shard, struct wire_user_state *us,
					uint16_t *owner, uint8_t *is_new);
/* The flush's row; base_version is the version the flush expected. Fills *version unless
 * the row is unreadable (FAILED_RETRY). Returns the outcome. */
enum pst_outcome pst_sql_flush_decode(const struct pst_sql_row *row, uint64_t base_version,
				      uint64_t *version);
/* The release's row. Returns RELEASED, RELEASE_NOOP or FAILED_RETRY. */
enum pst_outcome pst_sql_release_decode(const struct pst_sql_row *row);
/* The lookup's row (none: NOT_FOUND). FOUND fills *rec (kind TRANSFER, id transfer_id);
 * BAD_ROW for a row we cannot represent. */
enum pst_outcome pst_sql_lookup_decode(const struct pst_sql_row *row, uint64_t transfer_id,
				       struct wire_recent *rec);
/* An SQLSTATE a retry cannot cure: bad data, constraint violations, missing privileges. */
bool pst_sql_permanent(const char *sqlstate);

/* The schema version query (one row: the newest migration applied, and how many of those
 * up to PST_SCHEMA_VERSION are applied), sent on every new connection. */
extern const char pst_sql_schema_query[];
/* Whether that row says the database holds exactly the migrations this build needs: true,
 * or false with the reason (naming both versions) in why. newest NULL: none applied. */
bool pst_sql_schema_ok(const char *newest, const char *count, char *why, size_t cap);

/* ---- the batch state machine (pst_db_batch.c) ---- */

/* Prepare the statements and send a Sync on a connection just in pipeline mode. 0 or -1
 * (the connection failed). */
int pst_batch_prepare(struct pst_lane *l, uint64_t now_ns);
/* Send queued requests as batches, each ended by a Sync, while Syncs in flight allow; adds
 * the statements sent to *work. 0 or -1 (the connection failed). */
int pst_batch_send(struct pst_db *db, struct pst_lane *l, uint64_t now_ns, uint32_t *work);
/* Read what arrived; a Sync makes its batch's answers final. Adds to *work. 0 or -1 (the
 * connection is unusable). */
int pst_batch_read(struct pst_db *db, struct pst_lane *l, uint64_t now_ns, uint32_t *work);
/* The oldest item in flight has waited longer than batch_timeout_ns. */
bool pst_batch_overdue(const struct pst_db *db, const struct pst_lane *l, uint64_t now_ns);
/* The connection is gone: every unanswered request goes back to the front of the queue,
 * oldest first (abandoned ones are freed); the pipeline is empty afterwards. */
void pst_batch_abort(struct pst_db *db, struct pst_lane *l);
/* pst_db_clear: requests on the wire finish in the database, their answers are dropped. */
void pst_batch_abandon(struct pst_db *db, struct pst_lane *l);

#endif

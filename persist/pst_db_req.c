/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The request table: every request the persister holds between pst_db_submit and its
 * completion lives in one slot of a fixed array sized at create (no allocation afterwards).
 * A slot is on exactly one list at a time — free, queue, pipeline, batch or done — and in a
 * hash by user while it can be merged with a new request. Merging is the seed's single-flight:
 * a burst of first orders for one user becomes one read, a repeated flush or release one
 * statement. The negative cache beside it remembers, for a moment, which shard holds a
 * user's claim, so a hydrate for it is answered without a round trip.
 *
 * The table knows nothing of SQL or of the connection: it hands requests to the batch state
 * machine (pst_db_batch.c) through the queue and takes finished ones back through
 * pst_req_complete, then turns them into the completion messages the shard receives.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/check.h"
#include "persist/pst_db_int.h"

/* ------------------------------------------------------------------------------ lists -- */

void
pst_fifo_init(struct pst_fifo *f)
{
	f->head = f->tail = PST_SLOT_NONE;
}

void
pst_fifo_push(struct pst_db *db, struct pst_fifo *f, uint32_t i)
{
	DCHECK(i < db->cfg.requests_max);
	db->reqs[i].next = PST_SLOT_NONE;
	if (f->tail == PST_SLOT_NONE)
		f->head = i;
	else
		db->reqs[f->tail].next = i;
	f->tail = i;
}

uint32_t
pst_fifo_pop(struct pst_db *db, struct pst_fifo *f)
{
	uint32_t i = f->head;
	if (i != PST_SLOT_NONE) {
		f->head = db->reqs[i].next;
		if (f->head == PST_SLOT_NONE)
			f->tail = PST_SLOT_NONE;
	}
	return i;
}

void
pst_fifo_prepend(struct pst_db *db, struct pst_fifo *f, struct pst_fifo *front)
{
	if (front->head == PST_SLOT_NONE)
		return;
	db->reqs[front->tail].next = f->head;
	if (f->tail == PST_SLOT_NONE)
		f->tail = front->tail;
	f->head = front->head;
	pst_fifo_init(front);
}

/* ------------------------------------------------------------------------ slots, hash -- */

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

void
pst_req_unhash(struct pst_db *db, uint32_t i)
{
	DCHECK(i < db->cfg.requests_max);
	uint32_t *p = &db->buckets[user_hash(db->reqs[i].user) & db->bucket_mask];
	while (*p != PST_SLOT_NONE) {
		if (*p == i) {
			*p = db->reqs[i].hnext;
			return;
		}
		p = &db->reqs[*p].hnext;
	}
	CHECK(false); /* every live, non-abandoned request is hashed */
}

void
pst_req_table_init(struct pst_db *db)
{
	CHECK(db->reqs != NULL);
	CHECK(db->buckets != NULL);
	for (uint32_t b = 0; b <= db->bucket_mask; b++)
		db->buckets[b] = PST_SLOT_NONE;
	for (uint32_t i = 0; i < db->cfg.requests_max; i++)
		db->reqs[i].next = i + 1 < db->cfg.requests_max ? i + 1 : PST_SLOT_NONE;
	db->free_head = 0;
	db->pending = 0;
	pst_fifo_init(&db->done);
	for (uint32_t k = 0; k < PST_LANES; k++) {
		pst_fifo_init(&db->lanes[k].queue);
		pst_fifo_init(&db->lanes[k].batch);
	}
}

static uint32_t
slot_alloc(struct pst_db *db)
{
	uint32_t i = db->free_head;
	if (i == PST_SLOT_NONE)
		return PST_SLOT_NONE;
	db->free_head = db->reqs[i].next;
	memset(&db->reqs[i], 0, sizeof(db->reqs[i]));
	db->reqs[i].next = PST_SLOT_NONE;
	db->reqs[i].hnext = PST_SLOT_NONE;
	db->pending++;
	DCHECK(db->pending <= db->cfg.requests_max);
	return i;
}

void
pst_req_free(struct pst_db *db, uint32_t i)
{
	CHECK(db->pending > 0);
	DCHECK(i < db->cfg.requests_max);
	db->reqs[i].phase = PST_PHASE_FREE;
	db->reqs[i].next = db->free_head;
	db->free_head = i;
	db->pending--;
}

/* A new request in a free slot, hashed under its user. PST_SLOT_NONE (counted) when the
 * table is full. */
static uint32_t
req_new(struct pst_db *db, uint8_t kind, uint16_t shard, uint64_t user, uint64_t epoch,
	uint64_t now_ns)
{
	uint32_t i = slot_alloc(db);
	if (i == PST_SLOT_NONE) {
		db->counters[PST_C_DB_FULL]++;
		return PST_SLOT_NONE;
	}
	struct pst_req *r = &db->reqs[i];
	r->kind = kind;
	r->shard = shard;
	r->user = user;
	r->epoch = epoch;
	r->accepted_ns = now_ns;
	hash_insert(db, i);
	return i;
}

/* Which lane request i goes on. A user whose earlier request is still queued or in flight
 * keeps that lane, so a user's requests are sent in submission order over one connection
 * and each one sees the commits of the ones before it (a hydrate after a move's release, a
 * flush after its hydrate). Otherwise reads take the read lane, where they do not wait
 * behind other users' write batches and their commits. */
static uint8_t
kind_lane(const struct pst_db *db, uint8_t kind)
{
	return db->lane_count > 1 && (kind == PST_REQ_HYDRATE || kind == PST_REQ_LOOKUP)
		       ? PST_LANE_READ
		       : PST_LANE_WRITE;
}

static uint8_t
req_lane(const struct pst_db *db, uint32_t i)
{
	const struct pst_req *r = &db->reqs[i];
	for (uint32_t j = db->buckets[user_hash(r->user) & db->bucket_mask]; j != PST_SLOT_NONE;
	     j = db->reqs[j].hnext) {
		const struct pst_req *o = &db->reqs[j];
		if (j != i && o->user == r->user &&
		    (o->phase == PST_PHASE_QUEUED || o->phase == PST_PHASE_SENT))
			return o->lane;
	}
	return kind_lane(db, r->kind);
}

void
pst_req_queue(struct pst_db *db, uint32_t i)
{
	struct pst_req *r = &db->reqs[i];
	r->lane = req_lane(db, i);
	if (r->lane != kind_lane(db, r->kind))
		db->counters[PST_C_DB_LANE_FOLLOWS]++;
	r->phase = PST_PHASE_QUEUED;
	pst_fifo_push(db, &db->lanes[r->lane].queue, i);
}

void
pst_req_complete(struct pst_db *db, uint32_t i)
{
	DCHECK(i < db->cfg.requests_max);
	db->reqs[i].phase = PST_PHASE_DONE;
	pst_fifo_push(db, &db->done, i);
}

void
pst_req_drop_waiting(struct pst_db *db)
{
	uint32_t i;
	for (uint32_t k = 0; k < PST_LANES; k++) {
		while ((i = pst_fifo_pop(db, &db->lanes[k].queue)) != PST_SLOT_NONE) {
			pst_req_unhash(db, i);
			pst_req_free(db, i);
		}
	}
	while ((i = pst_fifo_pop(db, &db->done)) != PST_SLOT_NONE) {
		pst_req_unhash(db, i);
		pst_req_free(db, i);
	}
}

/* --------------------------------------------------------------------- negative cache -- */

static struct pst_neg *
neg_slot(struct pst_db *db, uint64_t user)
{
	return &db->negs[user_hash(user) & db->neg_mask];
}

void
pst_neg_note(struct pst_db *db, uint64_t user, uint16_t owner, uint64_t expires_ns)
{
	DCHECK(user != 0);
	struct pst_neg *n = neg_slot(db, user);
	n->user = user;
	n->owner = owner;
	n->expires_ns = expires_ns;
}

void
pst_neg_forget(struct pst_db *db, uint64_t user)
{
	struct pst_neg *n = neg_slot(db, user);
	if (n->user == user)
		n->user = 0;
}

/* ---------------------------------------------------------------------------- lookups -- */

/* A hydrate of (user, shard) this one can join. Before it is sent, any: the claim goes out
 * with the highest epoch asked for. Once sent, only when it already carries an epoch at
 * least as high: the database stored the sent epoch as owner_epoch, and the answer must name
 * exactly that epoch (a later RELEASE_CLAIM is fenced by it). */
static uint32_t
find_hydrate(const struct pst_db *db, uint64_t user, uint16_t shard, uint64_t epoch)
{
	uint32_t found = PST_SLOT_NONE;
	for (uint32_t i = db->buckets[user_hash(user) & db->bucket_mask]; i != PST_SLOT_NONE;
	     i = db->reqs[i].hnext) {
		const struct pst_req *r = &db->reqs[i];
		if (r->kind != PST_REQ_HYDRATE || r->user != user || r->shard != shard)
			continue;
		if (r->phase == PST_PHASE_QUEUED)
			return i;
		if (r->epoch >= epoch)
			found = i;
	}
	return found;
}

/* An identical flush or release (same kind, user, shard, epoch and, for a flush, the same
 * expected version). */
static uint32_t
find_same(const struct pst_db *db, uint8_t kind, uint64_t user, uint16_t shard,
	  uint64_t epoch, uint64_t version)
{
	for (uint32_t i = db->buckets[user_hash(user) & db->bucket_mask]; i != PST_SLOT_NONE;
	     i = db->reqs[i].hnext) {
		const struct pst_req *r = &db->reqs[i];
		if (r->kind == kind && r->user == user && r->shard == shard && r->epoch == epoch &&
		    (kind != PST_REQ_FLUSH || r->us.version == version))
			return i;
	}
	return PST_SLOT_NONE;
}

/* -------------------------------------------------------------------------------- add -- */

int
pst_req_add_hydrate(struct pst_db *db, uint64_t user, uint16_t shard, uint64_t epoch,
		    uint64_t now_ns)
{
	DCHECK(user != 0);
	DCHECK(user <= INT64_MAX);
	DCHECK(epoch <= INT64_MAX);
	uint32_t i = find_hydrate(db, user, shard, epoch);
	if (i != PST_SLOT_NONE) {
		/* Seed: single-flight collapses a burst of first orders into one read; the
		 * answer carries the newest epoch asked for. */
		if (epoch > db->reqs[i].epoch) {
			DCHECK(db->reqs[i].phase == PST_PHASE_QUEUED);
			db->reqs[i].epoch = epoch;
		}
		db->counters[PST_C_DB_HYDRATES_MERGED]++;
		return 0;
	}
	i = req_new(db, PST_REQ_HYDRATE, shard, user, epoch, now_ns);
	if (i == PST_SLOT_NONE)
		return -ENOBUFS;
	db->counters[PST_C_DB_HYDRATES]++;
	const struct pst_neg *n = neg_slot(db, user);
	if (n->user == user && now_ns < n->expires_ns && n->owner != shard) {
		/* Negative cache: the holder was seen moments ago; spare the database and carry
		 * the owner back so the gateway can re-route. */
		struct pst_req *r = &db->reqs[i];
		r->outcome = PST_OUT_HYD_OWNED;
		r->owner = n->owner;
		db->counters[PST_C_DB_HYDRATES_NEG_CACHE]++;
		pst_req_complete(db, i);
		return 0;
	}
	pst_req_queue(db, i);
	return 0;
}

int
pst_req_add_flush(struct pst_db *db, const struct wire_user_state *us, uint16_t shard,
		  uint64_t epoch, uint64_t now_ns)
{
	CHECK(us != NULL);
	DCHECK(us->user != 0);
	DCHECK(epoch <= INT64_MAX);
	if (find_same(db, PST_REQ_FLUSH, us->user, shard, epoch, us->version) != PST_SLOT_NONE) {
		db->counters[PST_C_DB_FLUSHES_MERGED]++;
		return 0;
	}
	uint32_t i = req_new(db, PST_REQ_FLUSH, shard, us->user, epoch, now_ns);
	if (i == PST_SLOT_NONE)
		return -ENOBUFS;
	db->reqs[i].us = *us;
	db->counters[PST_C_DB_FLUSHES]++;
	pst_req_queue(db, i);
	return 0;
}

int
pst_req_add_release(struct pst_db *db, uint64_t user, uint16_t shard, uint64_t epoch,
		    bool handoff, uint16_t to_shard, uint64_t now_ns)
{
	DCHECK(user != 0);
	DCHECK(epoch <= INT64_MAX);
	/* A repeat of one release (a re-drive) carries the same handoff: the shard's state
	 * records it with the release. */
	if (find_same(db, PST_REQ_RELEASE, user, shard, epoch, 0) != PST_SLOT_NONE) {
		db->counters[PST_C_DB_RELEASES_MERGED]++;
		return 0;
	}
	uint32_t i = req_new(db, PST_REQ_RELEASE, shard, user, epoch, now_ns);
	if (i == PST_SLOT_NONE)
		return -ENOBUFS;
	db->reqs[i].handoff = handoff;
	db->reqs[i].to_shard = handoff ? to_shard : 0;
	db->counters[PST_C_DB_RELEASES]++;
	pst_req_queue(db, i);
	return 0;
}

int
pst_req_add_lookup(struct pst_db *db, uint64_t user, uint64_t transfer_id, uint16_t shard,
		   uint64_t epoch, uint64_t now_ns)
{
	DCHECK(user != 0);
	DCHECK(epoch <= INT64_MAX);
	/* The epoch names one lookup of the shard: a repeat of it (a re-drive) is the same. */
	uint32_t i = find_same(db, PST_REQ_LOOKUP, user, shard, epoch, 0);
	if (i != PST_SLOT_NONE && db->reqs[i].xfer_id == transfer_id) {
		db->counters[PST_C_DB_LOOKUPS_MERGED]++;
		return 0;
	}
	i = req_new(db, PST_REQ_LOOKUP, shard, user, epoch, now_ns);
	if (i == PST_SLOT_NONE)
		return -ENOBUFS;
	db->reqs[i].xfer_id = transfer_id;
	db->counters[PST_C_DB_LOOKUPS]++;
	pst_req_queue(db, i);
	return 0;
}

/* ---------------------------------------------------------------------------- answers -- */

/* Build the completion of request r into m; *counter is what to count once it is taken. */
static void
hydrate_answer(const struct pst_req *r, struct wire_hydrate_user *m, enum pst_counter *counter)
{
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_HYDRATE_USER, r->shard);
	m->epoch = r->epoch;
	switch (r->outcome) {
	case PST_OUT_HYD_CLAIMED:
		m->status = r->hyd_new ? WIRE_HYD_NEW : WIRE_HYD_OK;
		m->state = r->us;
		*counter = r->hyd_new ? PST_C_DB_HYDRATE_NEW : PST_C_DB_HYDRATE_OK;
		break;
	case PST_OUT_HYD_OWNED:
		m->status = WIRE_HYD_OWNED;
		m->owner_shard = r->owner;
		*counter = PST_C_DB_HYDRATE_OWNED;
		break;
	case PST_OUT_HYD_UNKNOWN:
		m->status = WIRE_HYD_UNKNOWN;
		*counter = PST_C_DB_HYDRATE_UNKNOWN;
		break;
	default:
		m->status = WIRE_HYD_ERROR;
		*counter = PST_C_DB_HYDRATE_ERROR;
		break;
	}
	m->state.user = r->user;
}

static void
flush_answer(const struct pst_req *r, struct wire_flush_complete *m, enum pst_counter *counter)
{
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_FLUSH_COMPLETE, r->shard);
	m->user = r->user;
	m->epoch = r->epoch;
	m->version = r->version;
	switch (r->outcome) {
	case PST_OUT_FLUSH_WRITTEN:
		m->status = WIRE_FLUSH_OK;
		*counter = PST_C_DB_FLUSH_OK;
		break;
	case PST_OUT_FLUSH_REPEAT:
		m->status = WIRE_FLUSH_OK;
		*counter = PST_C_DB_FLUSH_REPEAT;
		break;
	case PST_OUT_FLUSH_CONFLICT:
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
release_answer(const struct pst_req *r, struct wire_release_claim *m, enum pst_counter *counter)
{
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_RELEASE_DONE, r->shard);
	m->user = r->user;
	m->epoch = r->epoch;
	switch (r->outcome) {
	case PST_OUT_RELEASED:
		m->status = WIRE_FLUSH_OK;
		*counter = PST_C_DB_RELEASE_OK;
		break;
	case PST_OUT_RELEASE_NOOP:
		m->status = WIRE_FLUSH_OK;
		*counter = PST_C_DB_RELEASE_NOOP;
		break;
	default:
		m->status = WIRE_FLUSH_ERROR;
		*counter = PST_C_DB_RELEASE_ERROR;
		break;
	}
}

static void
lookup_answer(const struct pst_req *r, struct wire_transfer_found *m, enum pst_counter *counter)
{
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_TRANSFER_FOUND, r->shard);
	m->user = r->user;
	m->transfer_id = r->xfer_id;
	m->epoch = r->epoch;
	switch (r->outcome) {
	case PST_OUT_XFER_FOUND:
		m->status = WIRE_XFER_FOUND;
		m->rec = r->xfer;
		*counter = PST_C_DB_LOOKUP_FOUND;
		break;
	case PST_OUT_XFER_NOT_FOUND:
		m->status = WIRE_XFER_NOT_FOUND;
		*counter = PST_C_DB_LOOKUP_NOT_FOUND;
		break;
	default:
		m->status = WIRE_XFER_ERROR;
		*counter = PST_C_DB_LOOKUP_ERROR;
		break;
	}
}

uint32_t
pst_req_emit_done(struct pst_db *db)
{
	uint32_t n = 0;
	while (db->done.head != PST_SLOT_NONE) {
		uint32_t i = db->done.head;
		const struct pst_req *r = &db->reqs[i];
		DCHECK(r->phase == PST_PHASE_DONE);
		union {
			struct wire_msg_hdr hdr;
			struct wire_hydrate_user hyd;
			struct wire_flush_complete fc;
			struct wire_release_claim rc;
			struct wire_transfer_found tf;
		} m;
		enum pst_counter counter;
		if (r->kind == PST_REQ_HYDRATE)
			hydrate_answer(r, &m.hyd, &counter);
		else if (r->kind == PST_REQ_FLUSH)
			flush_answer(r, &m.fc, &counter);
		else if (r->kind == PST_REQ_LOOKUP)
			lookup_answer(r, &m.tf, &counter);
		else
			release_answer(r, &m.rc, &counter);
		if (db->cfg.emit(db->cfg.emit_arg, &m.hdr) < 0) {
			db->counters[PST_C_DB_EMIT_BLOCKED]++;
			break; /* the output is full: the answer stays first in line */
		}
		db->counters[counter]++;
		pst_fifo_pop(db, &db->done);
		pst_req_unhash(db, i);
		pst_req_free(db, i);
		n++;
	}
	return n;
}

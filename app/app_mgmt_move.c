/* SPDX-License-Identifier: Apache-2.0 */
/*
 * symbols move: a symbol moves to another ME shard with its resting book while the venue
 * trades (docs/cluster-ops.md "Move a symbol"). One driver per node, on the main lcore: a
 * state machine fed by the answers of the commands it starts (app_mgmt_internal).
 *
 *   WATCH   SYMBOL_MOVE WATCH into F: from here F journals the orderId of every change to
 *           the symbol's book (me.h), so the difference after the freeze is read from the
 *           journal, not from the whole book (an ME without it refuses: no journal).
 *   COPY    the book as it is, read from this node's replica of the source F in one view
 *           (APP_VIEW_MOVE, one applied index, after WATCH), cut into BOOK_CHUNKs of ADDs
 *           that each fit one frame and one log entry, and — after the symbol's config (F
 *           the owner) went into M, which may not know a symbol added on F alone — proposed
 *           into the target M (forwarded to its leader), a window at a time; M installs
 *           them inert, in order and once (each answer names the chunk it takes next). The
 *           symbol still trades on F. The copy is indexed by orderId now, not in the pause.
 *   OUT     SYMBOL_MOVE OUT into F: the book is frozen (SYMBOL_MOVING), its count and hash
 *           taken there, in F's log. The trading pause starts here.
 *   EXPORT  the journal read from the replica (each orderId changed since WATCH as it is
 *           now: resting or gone) — or, when the journal is not whole (it overflowed,
 *           another move took it), the whole frozen book; its difference from the copy
 *           (orders gone, orders whose leaves, cum or stream changed, new orders) goes to M
 *           as more chunks (REMOVE, UPDATE, ADD). The pause's work is the changes', not
 *           the book's.
 *   READY   every OMS shard holds, committed, every event F sent it about the frozen
 *           orders, so no OMS can see M's events about an order before F's: this node's
 *           replica of each OMS shard F's replica names (its stream of F not all
 *           acknowledged) applied that stream as far as F had sent it at the freeze — or,
 *           where that replica is not here, F's replica shows those events acknowledged
 *   IN      SYMBOL_MOVE IN into M: M checks count and hash of its book (kept running as
 *           the chunks installed) against F's (kept running from WATCH), owns the book
 *           and opens it
 *   SWITCH  SYMBOL_CONFIG (me_shard M) into every OMS shard: new orders, and the moved
 *           orders' cancels, go to M; requests already sent to F are answered by F. The
 *           pause ends when the last OMS shard has switched.
 *   DONE    SYMBOL_MOVE DONE into F: the frozen copy is dropped
 *
 * Every step is idempotent on the move's id: a step whose answer was lost (busy, a lost
 * entry, a timeout) is sent again, and a move a driver left half-way (a crash, the
 * deadline) is finished by running the command again: F answers WATCH (or OUT) with the id
 * of the move it has frozen, and the driver resumes that one (M's partial install of it is dropped
 * and the frozen book copied whole). Until IN commits a refusal aborts the move (ABORT into
 * M, then F: F trades the book again); once M owns the book the move only goes forward.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "app_mgmt_int.h"
#include "common/check.h"
#include "common/wire.h"
#include "me/me.h"

#define CMD_TIMEOUT_NS (3000ull * 1000000)  /* each step's commit deadline */
#define MOVE_TIMEOUT_MS 10000               /* the whole move, unless args.timeout_ms (omsctl
					     * --timeout-ms: give it more) */
#define RETRY_NS (20ull * 1000000)          /* a step answered busy/lost/timeout: again */
#define VIEW_RETRY_NS (100ull * 1000)       /* F's replica behind, or not ready yet */
#define READY_RETRY_NS (1000ull * 1000)     /* F's replica walks its book for ready */
#define WATCH_WAIT_NS (2000ull * 1000000) /* the copy waits this long for the replica to
					    * apply WATCH, then goes on without the journal */
#define CHUNK_WINDOW 14                     /* chunks in flight (APP_CMD_PENDING_MAX 16) */

enum mv_step {
	MV_WATCH = 1,    /* SYMBOL_MOVE WATCH into F: it journals the book's changes from here */
	MV_COPY,         /* reading the live book */
	MV_PREP,         /* the symbol's config into M (a symbol added on F alone is new to M) */
	MV_COPY_CHUNKS,  /* sending it */
	MV_OUT,
	MV_RESUME,       /* resuming: dropping M's partial install of the frozen move */
	MV_EXPORT,       /* reading the frozen book */
	MV_CHUNKS,       /* sending the difference; waiting for READY */
	MV_IN,           /* IN into M and the switch into every OMS shard, at once */
	MV_SWITCH,       /* the switch alone (a resumed move M opened already) */
	MV_DONE,
	MV_UNSWITCH,     /* IN refused after the switch went out: every OMS back to F */
	MV_ABORT_M,
	MV_ABORT_F,
};

/* A drill (`--stop-after`): the driver stops half-way as if its node had died, leaving the
 * cluster as such a death would, for the operator to practise (and the tests to check) the
 * run that finishes or undoes it. */
enum mv_stop {
	MV_STOP_NONE = 0,
	MV_STOP_COPY,   /* once M took half the copy's chunks: nothing frozen */
	MV_STOP_FREEZE, /* once OUT is answered: the book frozen on F, M holding the copy */
};

/* Tags of the driver's commands: the step, and the chunk's seq or the OMS target index. */
#define TAG(step, n) (((uint64_t)(step) << 32) | (uint32_t)(n))
#define TAG_STEP(t) ((uint32_t)((t) >> 32))
#define TAG_N(t) ((uint32_t)(t))
#define MV_VIEW 100 /* a view of F's replica, whatever the step */
#define MV_CHUNK 101
#define MV_STALE 102 /* the abort of another move's install found on M */
#define MV_SVIEW 103 /* a view of an OMS shard's replica: how far it applied F's stream */

struct app_move {
	bool active;
	uint32_t token;           /* the client's deferred answer */
	uint32_t symbol;
	uint16_t from, to;        /* F and M */
	uint64_t move_id;
	bool resumed;             /* F had this move frozen already */
	bool watched;             /* F journals the book's changes for this move (WATCH ok) */
	bool use_journal;         /* the difference is read from the journal (else the book) */
	uint64_t watch_wait_ns;   /* the copy waits this long for the replica to apply WATCH */
	uint32_t journal_recs;    /* journal records the difference was made from */
	uint32_t watch_tries;     /* WATCHes that had no answer */
	uint8_t stop_after;       /* a drill: stop as a dead driver would (enum mv_stop) */
	bool to_switch;           /* resumed past IN: read the config, then switch */
	enum mv_step step;
	uint32_t out_cmds;        /* commands of ours not yet back */
	uint64_t deadline_ns;     /* the whole move */
	uint64_t retry_ns;        /* the current step is sent again at this time, 0: not due */
	/* What F's replica says (the last frozen view). */
	struct app_move_view v;
	bool view_out;            /* a view is out */
	uint64_t view_ns;         /* next view at this time, 0: none due */
	size_t view_cap;          /* answer room the next book view asks for */
	bool ready;
	/* Ready read from the OMS shards (their replicas here) rather than from F's
	 * acknowledgements, which come only every 64 events or at an idle OMS leader's tick and
	 * then take a commit of F: each OMS shard whose stream of F has events not acknowledged,
	 * and that stream's last seq at the freeze (me.h me_move_info.need_*). An OMS replica
	 * that applied that far holds every event about the frozen book, committed. need_n 0:
	 * F's replica says ready. */
	uint32_t need_n;
	uint16_t need_shard[APP_MOVE_NEED_MAX];
	uint64_t need_seq[APP_MOVE_NEED_MAX];
	bool need_met[APP_MOVE_NEED_MAX];
	bool need_out[APP_MOVE_NEED_MAX];
	uint64_t sview_ns;        /* next round of OMS views at this time, 0: none due */
	uint32_t sviews;          /* OMS replica views asked */
	bool ready_oms;           /* ready came from the OMS replicas */
	bool need_off;            /* an OMS shard that waits is not hosted here, or too many
				   * wait: F's replica decides (APP_VIEW_MOVE_READY) */
	/* The copy (before the freeze): every order sent as an ADD, in export order. */
	struct wire_book_order *copy;
	uint32_t copied;
	/* The copy's orderIds hashed (open addressing, copy index + 1, 0: empty) and the
	 * difference's room, made with the copy so the pause only looks up and compares. */
	uint32_t *slot;
	uint32_t slot_bits;
	bool *seen;
	struct wire_book_order *dbuf;     /* [3 * dbuf_cap]: removes + updates, updates, adds */
	uint32_t dbuf_cap;
	/* Everything sent to M, in chunk order, and where each chunk starts. */
	struct wire_book_order *ops;
	uint32_t nops, ops_cap;
	uint32_t *chunk_at;       /* [chunks + 1]: first op of each chunk, then nops */
	uint32_t chunks, chunks_cap;
	uint32_t per_chunk;
	uint32_t sent_next;       /* next chunk to send */
	uint32_t m_next;          /* the chunk M takes next, as last answered */
	uint32_t chunks_out;
	uint32_t delta_add, delta_update, delta_remove;
	bool stale_aborted;       /* M held another move's install: aborted once */
	bool prep_again;          /* M refused the config for that install: put it after */
	bool stale_out;           /* that install's abort is out: no chunk goes meanwhile */
	/* Switch. */
	struct app_mgmt_targets oms;
	bool oms_ok[APP_MGMT_TARGETS_MAX];
	bool oms_out[APP_MGMT_TARGETS_MAX];
	bool in_ok, in_out;
	/* Timing (dp_clock_ns). */
	uint64_t t_begin, t_copied, t_out_sent, t_out_ok, t_book, t_chunks_ok, t_ready, t_in_ok,
		t_switch_ok, t_done;
	uint64_t t_view_sent;     /* the last view asked */
	uint64_t t_book_asked, t_diffed; /* the frozen book's view asked; its difference made */
	uint32_t views;           /* views of F's replica asked */
	uint32_t resends;         /* steps and chunks sent again */
	/* Abort: the refusal that started it. */
	char err_code[32];
	char err[320];
};

bool
app_mgmt_move_active(const struct app_mgmt *m)
{
	return m->move != NULL && m->move->active;
}

static void
mv_reset(struct app_move *mv)
{
	free(mv->copy);
	free(mv->slot);
	free(mv->seen);
	free(mv->dbuf);
	free(mv->ops);
	free(mv->chunk_at);
	memset(mv, 0, sizeof(*mv));
}

void
app_mgmt_move_fini(struct app_mgmt *m)
{
	if (m->move == NULL)
		return;
	mv_reset(m->move);
	free(m->move);
	m->move = NULL;
}

static void mv_done(struct app_mgmt *m, const struct app_cmd *c, void *owner, uint64_t tag);

/* Orders per chunk: a chunk is proposed alone in an entry, possibly wrapped in a
 * FORWARDED_ADMIN, and the entry travels in one AppendEntries frame (app_shard_setup.c
 * cns_conf sizes entries to the MTU the same way). */
static uint32_t
orders_per_chunk(const struct app *app)
{
	uint32_t cap = (uint32_t)app->cfg.dp.mtu - 28u;
	if (cap > WIRE_FRAME_MAX)
		cap = WIRE_FRAME_MAX;
	uint32_t over = (uint32_t)(sizeof(struct wire_frame_hdr) + WIRE_MAC_SIZE +
				   sizeof(struct wire_append_entries) +
				   sizeof(struct wire_entry_hdr) + sizeof(struct wire_fwd_admin));
	uint32_t data = cap > over ? (cap - over) & ~7u : 0;
	if (data > APP_CMD_MSG_MAX)
		data = APP_CMD_MSG_MAX;
	if (data > WIRE_TAIL_MAX)
		data = WIRE_TAIL_MAX;
	uint32_t n = data > sizeof(struct wire_book_chunk)
			     ? (data - (uint32_t)sizeof(struct wire_book_chunk)) /
				       (uint32_t)sizeof(struct wire_book_order)
			     : 0;
	return n > UINT16_MAX ? UINT16_MAX : n;
}

/* ---- what goes to M ---- */

/* Append ops[0, n) to what is sent, in chunks of their own (a batch never shares a chunk
 * with the one before: the copy's chunks can be on M before the difference is known).
 * With `open` an empty batch still makes one (empty) chunk: chunk 0 opens the install. */
static int
ops_append(struct app_move *mv, const struct wire_book_order *ops, uint32_t n, bool open)
{
	uint32_t more = (n + mv->per_chunk - 1) / mv->per_chunk;
	if (more == 0 && open)
		more = 1;
	if (mv->nops + n > mv->ops_cap) {
		uint32_t cap = mv->nops + n + 1024;
		void *p = realloc(mv->ops, (size_t)cap * sizeof(*mv->ops));
		if (p == NULL)
			return -ENOMEM;
		mv->ops = p;
		mv->ops_cap = cap;
	}
	if (mv->chunks + more + 1 > mv->chunks_cap) {
		uint32_t cap = mv->chunks + more + 64;
		void *p = realloc(mv->chunk_at, (size_t)cap * sizeof(*mv->chunk_at));
		if (p == NULL)
			return -ENOMEM;
		mv->chunk_at = p;
		mv->chunks_cap = cap;
	}
	if (n > 0)
		memcpy(mv->ops + mv->nops, ops, (size_t)n * sizeof(*ops));
	for (uint32_t i = 0; i < more; i++)
		mv->chunk_at[mv->chunks + i] = mv->nops + i * mv->per_chunk;
	mv->chunks += more;
	mv->nops += n;
	mv->chunk_at[mv->chunks] = mv->nops;
	return 0;
}

/* Room for `more` ops (and their chunks) beyond those held, touched now. */
static int
ops_reserve(struct app_move *mv, uint32_t more)
{
	uint32_t cap = mv->nops + more;
	if (cap > mv->ops_cap) {
		void *p = realloc(mv->ops, (size_t)cap * sizeof(*mv->ops));
		if (p == NULL)
			return -ENOMEM;
		mv->ops = p;
		memset(mv->ops + mv->ops_cap, 0, (size_t)(cap - mv->ops_cap) * sizeof(*mv->ops));
		mv->ops_cap = cap;
	}
	uint32_t ccap = mv->chunks + more / (mv->per_chunk ? mv->per_chunk : 1) + 64;
	if (ccap > mv->chunks_cap) {
		void *p = realloc(mv->chunk_at, (size_t)ccap * sizeof(*mv->chunk_at));
		if (p == NULL)
			return -ENOMEM;
		mv->chunk_at = p;
		mv->chunks_cap = ccap;
	}
	return 0;
}

/* Start over: M holds nothing of this move (a resume dropped its partial install). */
static void
ops_clear(struct app_move *mv)
{
	mv->nops = 0;
	mv->chunks = 0;
	mv->sent_next = 0;
	mv->m_next = 0;
	mv->copied = 0;
	free(mv->slot); /* the copy's index goes with it */
	mv->slot = NULL;
}

/* Hash of an orderId into a table of 2^bits slots. */
static uint32_t
oid_slot(const struct wire_oid *o, uint32_t bits)
{
	return (uint32_t)(XXH3_64bits(o, sizeof(*o)) >> (64 - bits));
}

/* The copy's index, made once it is read (before the freeze): its orderIds hashed and the
 * room the difference needs for a frozen book of up to `room` orders. */
static int
copy_index(struct app_move *mv, uint32_t room)
{
	uint32_t bits = 4;
	while ((1u << bits) < 2 * (mv->copied + 1))
		bits++;
	uint32_t size = 1u << bits;
	free(mv->slot);
	free(mv->seen);
	free(mv->dbuf);
	mv->slot = calloc(size, sizeof(*mv->slot));
	mv->seen = malloc(((size_t)mv->copied + 1) * sizeof(*mv->seen));
	mv->dbuf_cap = room + mv->copied + 1;
	mv->dbuf = malloc(3 * (size_t)mv->dbuf_cap * sizeof(*mv->dbuf));
	mv->slot_bits = bits;
	if (mv->slot == NULL || mv->seen == NULL || mv->dbuf == NULL)
		return -ENOMEM;
	/* Touched now, so the pause takes no page faults on them. */
	memset(mv->seen, 0, ((size_t)mv->copied + 1) * sizeof(*mv->seen));
	memset(mv->dbuf, 0, 3 * (size_t)mv->dbuf_cap * sizeof(*mv->dbuf));
	for (uint32_t i = 0; i < mv->copied; i++) {
		uint32_t h = oid_slot(&mv->copy[i].oid, bits);
		while (mv->slot[h] != 0)
			h = (h + 1) & (size - 1);
		mv->slot[h] = i + 1;
	}
	return 0;
}

static bool
oid_eq(const struct wire_oid *a, const struct wire_oid *b)
{
	return a->user == b->user && a->shard_seq == b->shard_seq;
}

/* The copy's index + 1 of orderId o, 0: not in the copy. */
static uint32_t
copy_find(const struct app_move *mv, const struct wire_oid *o)
{
	uint32_t size = 1u << mv->slot_bits;
	for (uint32_t h = oid_slot(o, mv->slot_bits); mv->slot[h] != 0; h = (h + 1) & (size - 1))
		if (oid_eq(&mv->copy[mv->slot[h] - 1].oid, o))
			return mv->slot[h];
	return 0;
}

/* The difference's three lists (dbuf: removes; updates, adds after it) into what is sent,
 * in that order. */
static int
diff_finish(struct app_move *mv, uint32_t nd, uint32_t nu, uint32_t na)
{
	struct wire_book_order *d = mv->dbuf;
	mv->delta_remove = nd;
	memmove(d + nd, d + mv->dbuf_cap, (size_t)nu * sizeof(*d));
	memmove(d + nd + nu, d + 2 * (size_t)mv->dbuf_cap, (size_t)na * sizeof(*d));
	mv->delta_update = nu;
	mv->delta_add = na;
	return ops_append(mv, d, nd + nu + na, mv->chunks == 0);
}

/* Make sure the copy's index and the difference's room hold n more orders. */
static int
diff_room(struct app_move *mv, uint32_t n)
{
	if (mv->slot != NULL && n + mv->copied + 1 <= mv->dbuf_cap)
		return 0;
	return copy_index(mv, n); /* a resumed move, or a book that grew */
}

/* The difference between the copy M holds and the frozen book fz[0, n) (both in export
 * order): the orders gone (REMOVE), the ones whose leaves, cum or stream changed (UPDATE),
 * then the new ones in export order (ADD: each goes to the tail of its level, behind every
 * older order, which is where the book has it). */
static int
diff_append(struct app_move *mv, const struct wire_book_order *fz, uint32_t n)
{
	int rc = diff_room(mv, n);
	if (rc != 0)
		return rc;
	struct wire_book_order *d = mv->dbuf, *upd = d + mv->dbuf_cap,
			       *add = d + 2 * (size_t)mv->dbuf_cap;
	uint32_t nd = 0, nu = 0, na = 0;
	memset(mv->seen, 0, ((size_t)mv->copied + 1) * sizeof(*mv->seen));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = copy_find(mv, &fz[i].oid);
		if (k == 0) {
			add[na] = fz[i];
			add[na++].op = WIRE_BOOK_ADD;
			continue;
		}
		mv->seen[k - 1] = true;
		if (memcmp(&mv->copy[k - 1], &fz[i], sizeof(fz[i])) != 0) {
			upd[nu] = fz[i];
			upd[nu++].op = WIRE_BOOK_UPDATE;
		}
	}
	for (uint32_t i = 0; i < mv->copied; i++) {
		if (!mv->seen[i]) {
			d[nd] = mv->copy[i];
			d[nd++].op = WIRE_BOOK_REMOVE;
		}
	}
	return diff_finish(mv, nd, nu, na);
}

/* The same difference from F's journal instead of its whole book: jr[0, n) holds, in the
 * order the changes happened since WATCH, each orderId the book changed as it is now (the
 * order, UPDATE; or gone, REMOVE). A copied order's first record decides (they all say the
 * same); a new order is added once, in the order of its first record, which is when it
 * joined its level's tail (time priority). -EPROTO (nothing appended) when the result would
 * not hold `count` orders, F's frozen count: the caller reads the whole book instead. */
static int
diff_journal(struct app_move *mv, const struct wire_book_order *jr, uint32_t n, uint32_t count)
{
	int rc = diff_room(mv, n);
	if (rc != 0)
		return rc;
	uint32_t bits = 4;
	while ((1u << bits) < 2 * (n + 1))
		bits++;
	uint32_t asize = 1u << bits;
	uint32_t *added = calloc(asize, sizeof(*added)); /* journal index + 1 of new orders */
	if (added == NULL)
		return -ENOMEM;
	struct wire_book_order *d = mv->dbuf, *upd = d + mv->dbuf_cap,
			       *add = d + 2 * (size_t)mv->dbuf_cap;
	uint32_t nd = 0, nu = 0, na = 0;
	memset(mv->seen, 0, ((size_t)mv->copied + 1) * sizeof(*mv->seen));
	for (uint32_t i = 0; i < n; i++) {
		const struct wire_book_order *r = &jr[i];
		uint32_t k = copy_find(mv, &r->oid);
		if (k != 0) {
			if (mv->seen[k - 1])
				continue;
			mv->seen[k - 1] = true;
			if (r->op == WIRE_BOOK_REMOVE) {
				d[nd] = mv->copy[k - 1];
				d[nd++].op = WIRE_BOOK_REMOVE;
				continue;
			}
			struct wire_book_order w = *r;
			w.op = mv->copy[k - 1].op;
			if (memcmp(&mv->copy[k - 1], &w, sizeof(w)) != 0) {
				upd[nu] = *r;
				upd[nu++].op = WIRE_BOOK_UPDATE;
			}
			continue;
		}
		if (r->op == WIRE_BOOK_REMOVE)
			continue; /* came and went since WATCH */
		uint32_t h = oid_slot(&r->oid, bits);
		while (added[h] != 0 && !oid_eq(&jr[added[h] - 1].oid, &r->oid))
			h = (h + 1) & (asize - 1);
		if (added[h] != 0)
			continue;
		added[h] = i + 1;
		add[na] = *r;
		add[na++].op = WIRE_BOOK_ADD;
	}
	free(added);
	if ((uint64_t)mv->copied - nd + na != count)
		return -EPROTO;
	mv->journal_recs = n;
	return diff_finish(mv, nd, nu, na);
}

/* ---- commands ---- */

static int
mv_propose(struct app_mgmt *m, uint16_t shard, const void *msg, uint16_t len, uint32_t flags,
	   uint64_t tag)
{
	struct app_move *mv = m->move;
	struct app_mgmt_proposal p = {.msg = msg, .len = len, .key = 0, .flags = flags};
	if (((const struct wire_msg_hdr *)msg)->type == WIRE_SYMBOL_CONFIG)
		p.key = mv->symbol; /* an OMS echoes it in req_id */
	int rc = app_mgmt_internal(m, shard, &p, NULL, true, CMD_TIMEOUT_NS, mv_done, mv, tag);
	if (rc == 0)
		mv->out_cmds++;
	return rc;
}

static void
move_msg(const struct app_move *mv, struct wire_symbol_move *s, uint8_t phase, uint16_t peer)
{
	memset(s, 0, sizeof(*s));
	wire_hdr_init(&s->hdr, WIRE_SYMBOL_MOVE, 0);
	s->move_id = mv->move_id;
	s->symbol = mv->symbol;
	s->peer = peer;
	s->phase = phase;
}

/* The symbol's config as F's replica holds it, naming me_shard as the owner. */
static void
symbol_config(const struct app_move *mv, struct wire_symbol_config *c, uint16_t me_shard)
{
	memset(c, 0, sizeof(*c));
	wire_hdr_init(&c->hdr, WIRE_SYMBOL_CONFIG, 0);
	c->symbol = mv->symbol;
	c->base_asset = mv->v.base_asset;
	c->quote_asset = mv->v.quote_asset;
	c->me_shard = me_shard;
	c->status = mv->v.status;
	c->tick = mv->v.tick;
	c->lot = mv->v.lot;
	c->min_qty = mv->v.min_qty;
	c->min_notional = mv->v.min_notional;
	c->base_unit = mv->v.base_unit;
	c->ref_px = mv->v.ref_px;
	c->band_bps = mv->v.band_bps;
	c->map_version = 1;
}

/* SYMBOL_CONFIG naming me_shard as the owner into every OMS shard not yet answered ok. */
static int
send_switch(struct app_mgmt *m, uint16_t me_shard, uint32_t tag_step)
{
	struct app_move *mv = m->move;
	struct wire_symbol_config c;
	symbol_config(mv, &c, me_shard);
	for (uint32_t i = 0; i < mv->oms.n; i++) {
		if (mv->oms_ok[i] || mv->oms_out[i])
			continue;
		/* Each OMS replica keeps its own fees (APP_CMD_SYMBOL_FILL). */
		int rc = mv_propose(m, mv->oms.shard[i], &c, sizeof(c), APP_CMD_SYMBOL_FILL,
				    TAG(tag_step, i));
		if (rc != 0)
			return rc;
		mv->oms_out[i] = true;
	}
	return 0;
}

static void
send_step(struct app_mgmt *m)
{
	struct app_move *mv = m->move;
	struct wire_symbol_move s;
	int rc = 0;
	mv->retry_ns = 0;
	switch (mv->step) {
	case MV_WATCH:
		move_msg(mv, &s, WIRE_MOVE_WATCH, mv->to);
		rc = mv_propose(m, mv->from, &s, sizeof(s), 0, TAG(MV_WATCH, 0));
		break;
	case MV_OUT:
		move_msg(mv, &s, WIRE_MOVE_OUT, mv->to);
		if (mv->t_out_sent == 0)
			mv->t_out_sent = dp_clock_ns();
		rc = mv_propose(m, mv->from, &s, sizeof(s), 0, TAG(MV_OUT, 0));
		break;
	case MV_RESUME:
		move_msg(mv, &s, WIRE_MOVE_ABORT, mv->from);
		rc = mv_propose(m, mv->to, &s, sizeof(s), 0, TAG(MV_RESUME, 0));
		break;
	case MV_PREP: {
		/* M learns the symbol as F holds it, F named the owner (no change where M knows
		 * it already; the ME refuses a config that would make M the owner). */
		struct wire_symbol_config c;
		symbol_config(mv, &c, mv->from);
		rc = mv_propose(m, mv->to, &c, sizeof(c), 0, TAG(MV_PREP, 0));
		break;
	}
	case MV_IN:
		if (!mv->in_ok && !mv->in_out) {
			move_msg(mv, &s, WIRE_MOVE_IN, mv->from);
			s.count = mv->v.count;
			s.hash = mv->v.hash;
			s.status = mv->v.status;
			s.killed = mv->v.killed;
			s.trade_seq = mv->v.trade_seq;
			s.last_px = mv->v.last_px;
			rc = mv_propose(m, mv->to, &s, sizeof(s), 0, TAG(MV_IN, 0));
			mv->in_out = rc == 0;
		}
		/* The switch goes out with IN, not after it (one commit less of pause): until
		 * M opens, what the OMS shards send it is refused SYMBOL_MOVING, as F did. */
		if (rc == 0)
			rc = send_switch(m, mv->to, MV_SWITCH);
		break;
	case MV_SWITCH:
		rc = send_switch(m, mv->to, MV_SWITCH);
		break;
	case MV_UNSWITCH:
		rc = send_switch(m, mv->from, MV_UNSWITCH);
		break;
	case MV_DONE:
		move_msg(mv, &s, WIRE_MOVE_DONE, mv->to);
		rc = mv_propose(m, mv->from, &s, sizeof(s), 0, TAG(MV_DONE, 0));
		break;
	case MV_ABORT_M:
		move_msg(mv, &s, WIRE_MOVE_ABORT, mv->from);
		rc = mv_propose(m, mv->to, &s, sizeof(s), 0, TAG(MV_ABORT_M, 0));
		break;
	case MV_ABORT_F:
		move_msg(mv, &s, WIRE_MOVE_ABORT, mv->to);
		rc = mv_propose(m, mv->from, &s, sizeof(s), 0, TAG(MV_ABORT_F, 0));
		break;
	default:
		break;
	}
	if (rc != 0)
		mv->retry_ns = dp_clock_ns() + RETRY_NS; /* no command slot: later */
}

/* A view of F's replica: the live book (COPY), the frozen one (EXPORT), or only whether
 * the frozen one is ready (no orders). */
static void
send_view(struct app_mgmt *m)
{
	struct app_move *mv = m->move;
	bool book = mv->step == MV_COPY || mv->step == MV_EXPORT;
	uint32_t flags = mv->step == MV_COPY					? APP_VIEW_MOVE_LIVE
			 : mv->step == MV_EXPORT && mv->use_journal ? APP_VIEW_MOVE_JOURNAL
								    : 0;
	if (mv->need_off)
		flags |= APP_VIEW_MOVE_READY; /* F's acknowledgements decide: of the book alone */
	struct app_mgmt_view_query q = {.view = APP_VIEW_MOVE, .target = mv->symbol,
					.user = mv->move_id, .flags = flags,
					.limit = book ? UINT32_MAX : 0,
					.out_cap = book ? mv->view_cap : 0};
	mv->view_ns = 0;
	int rc = app_mgmt_internal(m, mv->from, NULL, &q, false, CMD_TIMEOUT_NS, mv_done, mv,
				   TAG(MV_VIEW, mv->step));
	if (rc != 0) {
		mv->view_ns = dp_clock_ns() + RETRY_NS;
		return;
	}
	mv->out_cmds++;
	mv->view_out = true;
	mv->views++;
	mv->t_view_sent = dp_clock_ns();
}

/* Views of this node's replica of every OMS shard that waits for F's events. A shard not
 * hosted here: F's acknowledgements decide instead. */
static void
send_stream_views(struct app_mgmt *m)
{
	struct app_move *mv = m->move;
	mv->sview_ns = 0;
	for (uint32_t i = 0; i < mv->need_n; i++) {
		if (mv->need_met[i] || mv->need_out[i])
			continue;
		struct app_mgmt_view_query q = {.view = APP_VIEW_STREAM, .target = mv->from,
						.out_cap = sizeof(struct app_stream_view)};
		int rc = app_mgmt_internal(m, mv->need_shard[i], NULL, &q, false, CMD_TIMEOUT_NS,
					   mv_done, mv, TAG(MV_SVIEW, i));
		if (rc == -ENOENT) {
			mv->need_n = 0; /* answers still out are dropped (on_stream_view) */
			mv->need_off = true;
			mv->view_ns = dp_clock_ns();
			return;
		}
		if (rc != 0) {
			mv->sview_ns = dp_clock_ns() + RETRY_NS;
			return;
		}
		mv->out_cmds++;
		mv->need_out[i] = true;
		mv->sviews++;
	}
}

static void
send_chunks(struct app_mgmt *m)
{
	struct app_move *mv = m->move;
	_Alignas(8) uint8_t buf[APP_CMD_MSG_MAX];
	while (!mv->stale_out && mv->chunks_out < CHUNK_WINDOW && mv->sent_next < mv->chunks) {
		uint32_t seq = mv->sent_next;
		uint32_t first = mv->chunk_at[seq], n = mv->chunk_at[seq + 1] - first;
		struct wire_book_chunk *c = (void *)buf;
		size_t tail = (size_t)n * sizeof(struct wire_book_order);
		CHECK(sizeof(*c) + tail <= sizeof(buf));
		memset(c, 0, sizeof(*c));
		wire_hdr_init(&c->hdr, WIRE_BOOK_CHUNK, 0);
		c->hdr.length = (uint16_t)(sizeof(*c) + tail);
		c->move_id = mv->move_id;
		c->symbol = mv->symbol;
		c->seq = seq;
		c->source = mv->from;
		c->count = (uint16_t)n;
		c->tail_len = (uint16_t)tail;
		if (n > 0)
			memcpy(c + 1, mv->ops + first, tail);
		if (mv_propose(m, mv->to, c, c->hdr.length, 0, TAG(MV_CHUNK, seq)) != 0) {
			mv->retry_ns = dp_clock_ns() + RETRY_NS;
			return;
		}
		mv->chunks_out++;
		mv->sent_next++;
	}
}

/* ---- the answer ---- */

static uint64_t
us(uint64_t a, uint64_t b)
{
	return a != 0 && b >= a ? (b - a) / 1000 : 0;
}

static void
reply_ok(struct app_mgmt *m)
{
	struct app_move *mv = m->move;
	struct mgmt_out o;
	mgmt_out_init(&o, m->result, APP_MGMT_RESULT_MAX);
	mgmt_out_obj_begin(&o);
	mgmt_out_kv_u64(&o, "symbol", mv->symbol);
	mgmt_out_kv_u64(&o, "from", mv->from);
	mgmt_out_kv_u64(&o, "to", mv->to);
	mgmt_out_kv_u64(&o, "move_id", mv->move_id);
	mgmt_out_kv_bool(&o, "resumed", mv->resumed);
	mgmt_out_kv_u64(&o, "orders", mv->v.count);
	mgmt_out_kv_u64(&o, "copied", mv->copied);
	mgmt_out_kv_u64(&o, "delta_add", mv->delta_add);
	mgmt_out_kv_u64(&o, "delta_update", mv->delta_update);
	mgmt_out_kv_u64(&o, "delta_remove", mv->delta_remove);
	mgmt_out_kv_u64(&o, "chunks", mv->chunks);
	mgmt_out_kv_u64(&o, "orders_per_chunk", mv->per_chunk);
	mgmt_out_kv_u64(&o, "resends", mv->resends);
	mgmt_out_kv_u64(&o, "views", mv->views);
	mgmt_out_kv_u64(&o, "stream_views", mv->sviews);
	mgmt_out_kv_str(&o, "ready_by", mv->ready_oms ? "oms_replicas" : "acks");
	mgmt_out_kv_bool(&o, "journal", mv->use_journal);
	mgmt_out_kv_u64(&o, "journal_records", mv->journal_recs);
	/* The symbol trades nowhere from OUT to the last switch. */
	mgmt_out_kv_u64(&o, "pause_us", us(mv->t_out_sent, mv->t_switch_ok));
	mgmt_out_key(&o, "phases_us");
	mgmt_out_obj_begin(&o);
	mgmt_out_kv_u64(&o, "copy", us(mv->t_begin, mv->t_copied));
	mgmt_out_kv_u64(&o, "freeze", us(mv->t_out_sent, mv->t_out_ok));
	mgmt_out_kv_u64(&o, "export", us(mv->t_out_ok, mv->t_book));
	mgmt_out_kv_u64(&o, "export_view", us(mv->t_book_asked, mv->t_book));
	mgmt_out_kv_u64(&o, "diff", us(mv->t_book, mv->t_diffed));
	mgmt_out_kv_u64(&o, "delta", us(mv->t_book, mv->t_chunks_ok));
	mgmt_out_kv_u64(&o, "ready", us(mv->t_out_ok, mv->t_ready));
	mgmt_out_kv_u64(&o, "open", us(mv->t_out_sent, mv->t_in_ok));
	mgmt_out_kv_u64(&o, "switch", us(mv->t_in_ok, mv->t_switch_ok));
	mgmt_out_kv_u64(&o, "drop", us(mv->t_switch_ok, mv->t_done));
	mgmt_out_obj_end(&o);
	mgmt_out_obj_end(&o);
	if (o.overflow)
		mgmt_reply_err(m->srv, mv->token, "too_large", "result does not fit");
	else
		mgmt_reply_ok(m->srv, mv->token, m->result);
	APP_LOG(INFO, "symbols move: symbol %u from ME shard %u to %u: %u orders (%u copied, "
		"%u chunks), pause %" PRIu64 " us (move %" PRIu64 ")", mv->symbol, mv->from,
		mv->to, mv->v.count, mv->copied, mv->chunks, us(mv->t_out_sent, mv->t_switch_ok),
		mv->move_id);
	mv->active = false;
}

static void
reply_err(struct app_mgmt *m, const char *code, const char *msg)
{
	struct app_move *mv = m->move;
	APP_LOG(WARNING, "symbols move: symbol %u from ME shard %u to %u (move %" PRIu64
		"): %s: %s", mv->symbol, mv->from, mv->to, mv->move_id, code, msg);
	mgmt_reply_err(m->srv, mv->token, code, msg);
	mv->active = false;
}

/* The drill's stop: the answer says what is left behind; the commands still out drain. */
static void
drill_stop(struct app_mgmt *m, const char *where)
{
	struct app_move *mv = m->move;
	char msg[320];
	snprintf(msg, sizeof(msg), "drill: the driver stopped %s (move %" PRIu64 ", %u of %u "
		 "chunks taken), as if its node had died; run the command again to %s", where,
		 mv->move_id, mv->m_next, mv->chunks,
		 mv->stop_after == MV_STOP_FREEZE ? "finish the move" : "move the symbol");
	reply_err(m, "stopped", msg);
}

/* A refusal before IN: undo (M first: what it installed; then F, if frozen: trade
 * again). */
static void
abort_move(struct app_mgmt *m, const char *code, const char *msg)
{
	struct app_move *mv = m->move;
	snprintf(mv->err_code, sizeof(mv->err_code), "%s", code);
	snprintf(mv->err, sizeof(mv->err), "%.300s", msg);
	mv->step = MV_ABORT_M;
	mv->retry_ns = dp_clock_ns(); /* once nothing else of ours is out */
}

/* A refusal's reason, else the status's code as the control socket names it. */
static const char *
status_name(const struct app_cmd *c)
{
	return c->status == APP_CMD_REJECTED ? wire_reason_name(c->reason)
					     : app_mgmt_status_code(c->status);
}

/* An answer that says nothing was decided (or that the outcome is unknown): send again. */
static bool
transient(const struct app_cmd *c)
{
	return c->status == APP_CMD_NOT_LEADER || c->status == APP_CMD_LOST ||
	       c->status == APP_CMD_TIMEOUT || c->status == APP_CMD_BUSY;
}

/* Room for a book view of `count` orders, and some growth. */
static size_t
book_cap(uint32_t count)
{
	return sizeof(struct app_move_view) +
	       ((size_t)count + count / 4 + 64) * sizeof(struct wire_book_order);
}

static void
on_view_copy(struct app_mgmt *m, const struct app_move_view *v, uint64_t now)
{
	struct app_move *mv = m->move;
	if (!v->known || v->me_shard != mv->from) {
		char msg[160];
		snprintf(msg, sizeof(msg), "symbol %u is not on ME shard %u here (owner: %u); name "
			 "its ME shard with --from", mv->symbol, mv->from, v->me_shard);
		reply_err(m, v->known ? "bad_argument" : "unknown_symbol", msg);
		return;
	}
	if (mv->watched && (v->move_id != mv->move_id || v->role != ME_MOVE_SOURCE ||
			    v->phase != ME_MOVE_WATCHING)) {
		/* The copy must be read after WATCH (the journal then holds every change
		 * since); this replica has not applied it yet. Another move's WATCH may have
		 * taken the journal over: after a while, go on without it. */
		if (now < mv->watch_wait_ns) {
			mv->view_ns = now + VIEW_RETRY_NS;
			return;
		}
		mv->watched = false;
	}
	if (v->n < v->count) {
		mv->view_cap = book_cap(v->count); /* the book outgrew the room */
		mv->view_ns = now;
		return;
	}
	mv->use_journal = mv->watched;
	free(mv->copy);
	mv->copy = malloc(((size_t)v->n + 1) * sizeof(*mv->copy));
	if (mv->copy == NULL) {
		reply_err(m, "internal", "out of memory for the book");
		return;
	}
	memcpy(mv->copy, v + 1, (size_t)v->n * sizeof(*mv->copy));
	mv->copied = v->n;
	for (uint32_t i = 0; i < mv->copied; i++)
		mv->copy[i].op = WIRE_BOOK_ADD;
	/* The difference's room and the copy's index now, while it trades: the pause only
	 * reads the frozen book, looks up and compares. */
	uint32_t room = v->count + v->count / 4 + 1024;
	if (ops_append(mv, mv->copy, mv->copied, true) != 0 || copy_index(mv, room) != 0 ||
	    ops_reserve(mv, 2 * room) != 0) {
		reply_err(m, "internal", "out of memory for the book");
		return;
	}
	/* The copy's pace is the log's: give the deadline a commit's worth per chunk. */
	mv->deadline_ns += (uint64_t)mv->chunks * 5000000;
	mv->v = *v; /* the symbol's config, for PREP */
	mv->step = MV_PREP;
	send_step(m);
}

static void
on_view_frozen(struct app_mgmt *m, const struct app_move_view *v, uint64_t now)
{
	struct app_move *mv = m->move;
	if (v->move_id == mv->move_id && v->role == ME_MOVE_SOURCE &&
	    v->phase == ME_MOVE_FINISHED) {
		/* F dropped the book already: a run before this one went past IN and the
		 * switch may not have reached every OMS shard. Finish from there. */
		mv->v = *v;
		mv->step = MV_SWITCH;
		send_step(m);
		return;
	}
	if (v->move_id != mv->move_id || v->role != ME_MOVE_SOURCE || v->phase != ME_MOVE_FROZEN) {
		mv->view_ns = now + VIEW_RETRY_NS; /* this replica has not applied OUT yet */
		return;
	}
	if (v->peer != mv->to) {
		char msg[200];
		snprintf(msg, sizeof(msg), "symbol %u is being moved to ME shard %u by move %" PRIu64
			 "; run the command with --to %u to finish it", mv->symbol, v->peer,
			 mv->move_id, v->peer);
		reply_err(m, "conflict", msg);
		return;
	}
	if (mv->step == MV_EXPORT) {
		if (mv->use_journal && !v->journal_ok) {
			/* The journal is not the whole of the changes (it overflowed, or another
			 * move's WATCH took it over): the whole frozen book instead. */
			mv->use_journal = false;
			mv->view_cap = book_cap(v->count);
			mv->view_ns = now;
			return;
		}
		uint32_t want = mv->use_journal ? v->journal : v->count;
		if (v->n < want) {
			mv->view_cap = book_cap(want);
			mv->view_ns = now;
			return;
		}
		mv->v = *v;
		mv->t_book = now;
		if (mv->to_switch) {
			mv->step = MV_SWITCH;
			send_step(m);
			return;
		}
		mv->t_book_asked = mv->t_view_sent;
		int rc = mv->use_journal ? diff_journal(mv, (const void *)(v + 1), v->n, v->count)
					 : diff_append(mv, (const void *)(v + 1), v->n);
		if (rc == -EPROTO) {
			APP_LOG(WARNING, "symbols move: symbol %u: the journal of ME shard %u does not "
				"add up to its frozen book (%u orders); reading the whole book",
				mv->symbol, mv->from, v->count);
			mv->use_journal = false;
			mv->view_cap = book_cap(v->count);
			mv->view_ns = now;
			return;
		}
		if (rc != 0) {
			abort_move(m, "internal", "out of memory for the book");
			return;
		}
		mv->t_diffed = dp_clock_ns();
		mv->step = MV_CHUNKS;
		send_chunks(m);
	}
	if (v->ready && !mv->ready) {
		mv->ready = true;
		mv->t_ready = now;
	}
	if (mv->ready || mv->need_n > 0)
		return;
	if (v->need_over)
		mv->need_off = true; /* more OMS shards wait than a view names */
	if (v->need_n > 0 && v->need_n <= APP_MOVE_NEED_MAX && !v->need_over && !mv->need_off) {
		/* Taken once after the freeze, they cover every event about a frozen order (none
		 * is emitted while it is frozen): read them off the OMS replicas from here. */
		mv->need_n = v->need_n;
		memcpy(mv->need_shard, v->need_shard, sizeof(mv->need_shard));
		memcpy(mv->need_seq, v->need_seq, sizeof(mv->need_seq));
		memset(mv->need_met, 0, sizeof(mv->need_met));
		mv->sview_ns = now;
		return;
	}
	/* A walk of the frozen book each (APP_VIEW_MOVE_READY): not every 100 us. */
	mv->view_ns = now + (mv->need_off ? READY_RETRY_NS : VIEW_RETRY_NS);
}

static void
on_stream_view(struct app_mgmt *m, const struct app_cmd *c, uint32_t i)
{
	struct app_move *mv = m->move;
	if (i < APP_MOVE_NEED_MAX)
		mv->need_out[i] = false;
	if (mv->ready || i >= mv->need_n || (mv->step != MV_EXPORT && mv->step != MV_CHUNKS))
		return; /* ready already, or F's acknowledgements decide (not hosted here) */
	uint64_t now = dp_clock_ns();
	if (c->status == APP_CMD_OK && c->out_len >= sizeof(struct app_stream_view) &&
	    ((const struct app_stream_view *)(const void *)c->out)->seq >= mv->need_seq[i])
		mv->need_met[i] = true;
	uint32_t met = 0;
	for (uint32_t k = 0; k < mv->need_n; k++)
		met += mv->need_met[k];
	if (met == mv->need_n) {
		mv->ready = true;
		mv->ready_oms = true;
		mv->t_ready = now;
		return;
	}
	if (mv->sview_ns == 0)
		mv->sview_ns = now + VIEW_RETRY_NS;
}

static void
on_view(struct app_mgmt *m, const struct app_cmd *c, uint32_t step)
{
	struct app_move *mv = m->move;
	mv->view_out = false;
	uint64_t now = dp_clock_ns();
	if (step != mv->step)
		return; /* the step moved on (or aborts): this view says nothing any more */
	if (c->status != APP_CMD_OK || c->out_len < sizeof(struct app_move_view)) {
		mv->view_ns = now + RETRY_NS;
		return;
	}
	const struct app_move_view *v = (const void *)c->out;
	if (step == MV_COPY)
		on_view_copy(m, v, now);
	else
		on_view_frozen(m, v, now);
}

static void
on_chunk(struct app_mgmt *m, const struct app_cmd *c, uint32_t seq)
{
	struct app_move *mv = m->move;
	CHECK(mv->chunks_out > 0);
	mv->chunks_out--;
	if (mv->step != MV_COPY_CHUNKS && mv->step != MV_CHUNKS)
		return; /* aborting */
	if (c->status == APP_CMD_OK) {
		if (c->value > mv->m_next)
			mv->m_next = (uint32_t)RTE_MIN(c->value, (uint64_t)mv->chunks);
		return;
	}
	if (c->status == APP_CMD_REJECTED && seq == 0 && c->reason == WIRE_REASON_CONFLICT &&
	    !mv->stale_aborted && c->value != 0 && c->value != mv->move_id) {
		/* M holds the install of an earlier move a driver left: drop it, start again. */
		struct wire_symbol_move s;
		move_msg(mv, &s, WIRE_MOVE_ABORT, mv->from);
		s.move_id = c->value;
		mv->stale_aborted = true;
		if (mv_propose(m, mv->to, &s, sizeof(s), 0, TAG(MV_STALE, 0)) == 0) {
			mv->chunks_out++; /* counted as a chunk: the window restarts after it */
			/* With the config still to put, nothing more goes to M until the
			 * abort is back: the config must precede the new chunk 0. */
			mv->stale_out = mv->prep_again;
		}
		mv->sent_next = 0;
		return;
	}
	if (c->status == APP_CMD_REJECTED && c->value < seq) {
		/* A gap (an earlier chunk not applied): M names the one it takes next. */
		if (mv->sent_next > c->value)
			mv->sent_next = (uint32_t)c->value;
		mv->resends++;
		return;
	}
	if (c->status == APP_CMD_REJECTED) {
		char msg[200];
		snprintf(msg, sizeof(msg), "ME shard %u refused chunk %u of the book: %s; the move "
			 "is undone", mv->to, seq, wire_reason_name(c->reason));
		abort_move(m, "rejected", msg);
		return;
	}
	/* Outcome unknown or nothing done: from the first chunk M has not taken. */
	if (mv->sent_next > mv->m_next)
		mv->sent_next = mv->m_next;
	mv->resends++;
}

/* The answers of IN and of the switches (MV_IN: both out at once; MV_SWITCH: a resumed
 * move's switch; MV_UNSWITCH: every OMS shard back to F after M refused IN). */
static void
on_open(struct app_mgmt *m, const struct app_cmd *c, uint32_t tag_step, uint32_t n)
{
	struct app_move *mv = m->move;
	uint64_t now = dp_clock_ns();
	bool in = tag_step == MV_IN;
	if (in)
		mv->in_out = false;
	else
		mv->oms_out[n] = false;
	/* A switch of the step before (the unswitch started while one was out): its answer
	 * says nothing of where the shard stands now; the unswitch goes there regardless. */
	if ((tag_step == MV_UNSWITCH) != (mv->step == MV_UNSWITCH) ||
	    (mv->step != MV_IN && mv->step != MV_SWITCH && mv->step != MV_UNSWITCH))
		return;
	if (transient(c)) {
		mv->resends++;
		mv->retry_ns = now + RETRY_NS;
		return;
	}
	char msg[512];
	if (in && c->status != APP_CMD_OK) {
		/* M would not open it: every OMS shard goes back to F, then the move is undone. */
		snprintf(mv->err, sizeof(mv->err), "ME shard %u refused to open the book: %s; the "
			 "move is undone", mv->to, status_name(c));
		snprintf(mv->err_code, sizeof(mv->err_code), "rejected");
		mv->step = MV_UNSWITCH;
		memset(mv->oms_ok, 0, sizeof(mv->oms_ok));
		mv->retry_ns = now; /* once the switches out are back */
		return;
	}
	if (in) {
		mv->in_ok = true;
		mv->t_in_ok = now;
	} else if (c->status == APP_CMD_OK ||
		   (c->status == APP_CMD_REJECTED && c->reason == WIRE_REASON_UNKNOWN_SYMBOL)) {
		mv->oms_ok[n] = true; /* (an OMS shard that never knew the symbol routes nothing) */
	} else if (mv->step == MV_UNSWITCH) {
		snprintf(msg, sizeof(msg), "%s; and OMS shard %u refused the route back to ME shard "
			 "%u: %s", mv->err, mv->oms.shard[n], mv->from, status_name(c));
		reply_err(m, mv->err_code, msg);
		return;
	} else {
		snprintf(msg, sizeof(msg), "OMS shard %u refused the new route: %s; run the "
			 "command again to finish the move", mv->oms.shard[n], status_name(c));
		reply_err(m, "incomplete", msg);
		return;
	}
	if (mv->step == MV_IN && !mv->in_ok)
		return;
	for (uint32_t i = 0; i < mv->oms.n; i++)
		if (!mv->oms_ok[i])
			return;
	if (mv->step == MV_UNSWITCH) {
		mv->step = MV_ABORT_M;
		send_step(m);
		return;
	}
	mv->t_switch_ok = now;
	mv->step = MV_DONE;
	send_step(m);
}

/* WATCH or OUT answered CONFLICT with a move id: F has this symbol frozen by an earlier run
 * (a driver that died half-way): finish that move. What M installed of it is dropped first
 * and the frozen book copied whole. */
static bool
resume_frozen(struct app_mgmt *m, const struct app_cmd *c, uint64_t now)
{
	struct app_move *mv = m->move;
	if (c->status != APP_CMD_REJECTED || c->reason != WIRE_REASON_CONFLICT || c->value == 0)
		return false;
	mv->move_id = c->value;
	mv->resumed = true;
	mv->t_out_ok = now;
	mv->step = MV_RESUME;
	send_step(m);
	return true;
}

/* WATCH answered (watched: F journals for this move): read the book to copy. */
static void
copy_start(struct app_move *mv, bool watched, uint64_t now)
{
	mv->watched = watched;
	mv->watch_wait_ns = now + WATCH_WAIT_NS;
	mv->step = MV_COPY;
	mv->view_cap = book_cap(4096);
	mv->view_ns = now;
}

static void
on_step(struct app_mgmt *m, const struct app_cmd *c, uint32_t step, uint32_t n)
{
	struct app_move *mv = m->move;
	uint64_t now = dp_clock_ns();
	if (step == MV_IN || step == MV_SWITCH || step == MV_UNSWITCH) {
		on_open(m, c, step, n);
		return;
	}
	if (step != mv->step)
		return; /* a late answer of a step already over */
	if (step == MV_WATCH && transient(c) && ++mv->watch_tries >= 2) {
		/* No answer twice: go on without the journal (a node of an older build drops a
		 * WATCH as malformed and never answers; the journal only saves time). */
		copy_start(mv, false, now);
		return;
	}
	if (transient(c)) {
		mv->resends++;
		mv->retry_ns = now + RETRY_NS;
		return;
	}
	char msg[512];
	switch (step) {
	case MV_WATCH:
		if (resume_frozen(m, c, now))
			return;
		/* Any other refusal: no journal (an ME before WATCH refuses it BAD_REQUEST);
		 * the copy's view names a symbol F does not own. */
		copy_start(mv, c->status == APP_CMD_OK, now);
		return;
	case MV_PREP:
		if (c->status == APP_CMD_OK || (c->status == APP_CMD_REJECTED &&
						 c->reason == WIRE_REASON_BACKPRESSURE &&
						 !mv->stale_aborted)) {
			/* BACKPRESSURE: M holds the install of a move a driver left (it knows the
			 * symbol then); chunk 0 names that move, whose install is dropped, and the
			 * config is put again after it (mv_done, MV_STALE). */
			mv->prep_again = c->status != APP_CMD_OK;
			mv->step = MV_COPY_CHUNKS;
			send_chunks(m);
			return;
		}
		snprintf(msg, sizeof(msg), "ME shard %u refused the symbol's config: %s; nothing "
			 "changed", mv->to, status_name(c));
		reply_err(m, "rejected", msg);
		return;
	case MV_OUT:
		if (c->status == APP_CMD_OK && mv->stop_after == MV_STOP_FREEZE) {
			drill_stop(m, "once the book was frozen on the source");
			return;
		}
		if (c->status == APP_CMD_OK) {
			mv->t_out_ok = now;
			mv->step = MV_EXPORT;
			mv->view_cap = book_cap(mv->copied);
			mv->view_ns = now;
			return;
		}
		if (resume_frozen(m, c, now))
			return;
		snprintf(msg, sizeof(msg), "ME shard %u refused to give the symbol up: %s; the move "
			 "is undone", mv->from, status_name(c));
		/* Nothing is frozen: only M's copy is dropped. */
		abort_move(m, c->status == APP_CMD_REJECTED &&
					      c->reason == WIRE_REASON_UNKNOWN_SYMBOL
				      ? "unknown_symbol"
				      : "rejected",
			   msg);
		return;
	case MV_RESUME:
		ops_clear(mv);
		mv->use_journal = false; /* the frozen book is copied whole */
		mv->step = MV_EXPORT;
		mv->view_cap = book_cap(1024);
		mv->view_ns = now;
		if (c->status == APP_CMD_REJECTED && c->reason == WIRE_REASON_TOO_LATE)
			mv->to_switch = true; /* M opened it already */
		else if (c->status != APP_CMD_OK) {
			snprintf(msg, sizeof(msg), "resuming move %" PRIu64 ": ME shard %u: %s",
				 mv->move_id, mv->to, status_name(c));
			reply_err(m, "rejected", msg);
		}
		return;
	case MV_DONE:
		if (c->status == APP_CMD_OK) {
			mv->t_done = now;
			reply_ok(m);
			return;
		}
		snprintf(msg, sizeof(msg), "ME shard %u did not drop its frozen copy: %s; the "
			 "symbol trades on ME shard %u; run the command again to finish",
			 mv->from, status_name(c), mv->to);
		reply_err(m, "incomplete", msg);
		return;
	case MV_ABORT_M:
		if (c->status == APP_CMD_OK) {
			if (mv->t_out_ok == 0 && !mv->watched) { /* F was never frozen */
				reply_err(m, mv->err_code, mv->err);
				return;
			}
			mv->step = MV_ABORT_F;
			send_step(m);
			return;
		}
		snprintf(msg, sizeof(msg), "%s; and ME shard %u refused to drop what it installed "
			 "(%s)", mv->err, mv->to, status_name(c));
		reply_err(m, mv->err_code, msg);
		return;
	case MV_ABORT_F:
		if (c->status == APP_CMD_OK || mv->t_out_ok == 0) {
			/* (never frozen: only the journal is dropped, or a later WATCH took it) */
			reply_err(m, mv->err_code, mv->err);
			return;
		}
		snprintf(msg, sizeof(msg), "%s; and ME shard %u refused to unfreeze the book "
			 "(%s)", mv->err, mv->from, status_name(c));
		reply_err(m, mv->err_code, msg);
		return;
	default:
		return;
	}
}

static void
mv_done(struct app_mgmt *m, const struct app_cmd *c, void *owner, uint64_t tag)
{
	struct app_move *mv = owner;
	CHECK(mv == m->move);
	CHECK(mv->out_cmds > 0);
	mv->out_cmds--;
	if (!mv->active)
		return; /* answered already (a refusal); the rest drains */
	uint32_t step = TAG_STEP(tag);
	if (step == MV_VIEW) {
		on_view(m, c, TAG_N(tag));
	} else if (step == MV_SVIEW) {
		on_stream_view(m, c, TAG_N(tag));
	} else if (step == MV_CHUNK) {
		on_chunk(m, c, TAG_N(tag));
	} else if (step == MV_STALE) {
		mv->chunks_out--; /* the stale install's abort; chunks start again */
		mv->stale_out = false;
		if (mv->prep_again && mv->step == MV_COPY_CHUNKS) {
			mv->prep_again = false;
			mv->step = MV_PREP; /* then the chunks from 0 */
			send_step(m);
		}
	} else {
		on_step(m, c, step, TAG_N(tag));
	}
	/* The next step goes out with this answer, not at the next poll. */
	app_mgmt_move_poll(m);
}


void
app_mgmt_move_poll(struct app_mgmt *m)
{
	struct app_move *mv = m->move;
	if (mv == NULL || !mv->active)
		return;
	uint64_t now = dp_clock_ns();
	if (now > mv->deadline_ns) {
		char msg[512];
		if ((mv->step == MV_IN && mv->in_ok) || mv->step == MV_SWITCH ||
		    mv->step == MV_DONE)
			snprintf(msg, sizeof(msg), "ME shard %u owns the symbol, but the move did not "
				 "finish in time (step %s); run the command again to finish it",
				 mv->to, mv->step == MV_DONE ? "drop" : "switch");
		else if (mv->step >= MV_UNSWITCH)
			snprintf(msg, sizeof(msg), "%s; the abort did not finish in time: run the "
				 "command again (it resumes the move)", mv->err);
		else if (mv->t_out_sent == 0)
			snprintf(msg, sizeof(msg), "the copy of the book did not reach ME shard %u in "
				 "time (%u of %u chunks taken); nothing is frozen, ME shard %u still "
				 "trades it; a copy left on %u is dropped by the next move", mv->to,
				 mv->m_next, mv->chunks, mv->from, mv->to);
		else
			snprintf(msg, sizeof(msg), "the move did not reach IN in time (step %u, %u of "
				 "%u chunks taken, %s); the book stays frozen on ME shard %u: run the "
				 "command again to finish it", mv->step, mv->m_next, mv->chunks,
				 mv->ready ? "ready" : "events not all acknowledged", mv->from);
		reply_err(m, "timeout", msg);
		return;
	}
	bool viewing = mv->step == MV_COPY || mv->step == MV_EXPORT ||
		       (mv->step == MV_CHUNKS && !mv->ready);
	if (viewing && !mv->view_out && mv->view_ns != 0 && now >= mv->view_ns)
		send_view(m);
	if ((mv->step == MV_EXPORT || mv->step == MV_CHUNKS) && !mv->ready && mv->need_n > 0 &&
	    mv->sview_ns != 0 && now >= mv->sview_ns)
		send_stream_views(m);
	if (mv->step == MV_COPY_CHUNKS || mv->step == MV_CHUNKS) {
		if (mv->retry_ns == 0 || now >= mv->retry_ns) {
			mv->retry_ns = 0;
			if (mv->chunks_out == 0 && mv->sent_next == mv->chunks &&
			    mv->m_next < mv->chunks)
				mv->sent_next = mv->m_next; /* answers lost: from M's next */
			send_chunks(m);
		}
		if (mv->step == MV_COPY_CHUNKS && mv->stop_after == MV_STOP_COPY &&
		    mv->m_next >= mv->chunks / 2) {
			drill_stop(m, "half-way through the copy, nothing frozen");
			return;
		}
		if (mv->m_next < mv->chunks || mv->chunks_out > 0)
			return;
		if (mv->step == MV_COPY_CHUNKS) {
			mv->t_copied = now;
			mv->step = MV_OUT;
			send_step(m);
			return;
		}
		if (mv->t_chunks_ok == 0)
			mv->t_chunks_ok = now;
		if (mv->ready) {
			mv->step = MV_IN;
			send_step(m);
		}
		return;
	}
	if (mv->step >= MV_UNSWITCH && mv->retry_ns != 0 && now >= mv->retry_ns) {
		if (mv->out_cmds > 0)
			return; /* commands still out: undo once they are back */
		send_step(m);
		return;
	}
	if (mv->retry_ns != 0 && now >= mv->retry_ns)
		send_step(m);
}

/* symbols move --symbol S --to M [--from F] [--timeout-ms N]: the handler. */
int
app_mgmt_symbols_move(struct app_mgmt_call *a, uint32_t variant)
{
	(void)variant;
	static const char *const names[] = {"symbol", "to", "from", "stop_after", NULL};
	struct app_mgmt *m = a->mgmt;
	const struct app *app = m->app;
	uint64_t sym, to, from, tmo = MOVE_TIMEOUT_MS;
	if (app_mgmt_args_known(a, names) != 0 ||
	    app_mgmt_arg_u64(a, "symbol", true, 1, UINT32_MAX, &sym) ||
	    app_mgmt_arg_u64(a, "to", true, 0, DP_SHARDS_MAX - 1, &to) ||
	    app_mgmt_arg_u64(a, "timeout_ms", false, 1, 600000, &tmo))
		return -EINVAL;
	uint16_t old;
	if (app_mgmt_arg_present(a, "from")) {
		if (app_mgmt_arg_u64(a, "from", true, 0, DP_SHARDS_MAX - 1, &from) != 0)
			return -EINVAL;
		old = (uint16_t)from;
	} else {
		int rc = app_mgmt_symbol_me_shard(a, sym, &old);
		if (rc != 0)
			return rc;
	}
	uint16_t ids[2] = {old, (uint16_t)to};
	if (app_mgmt_shards_check(a, ids, 2, APP_SERVICE_ME) != 0)
		return -EINVAL;
	if (old == to) {
		snprintf(a->err, a->cap, "bad_argument: symbol %" PRIu64 " is already on ME shard %u",
			 sym, old);
		return -EINVAL;
	}
	if (old == 0 || to == 0) {
		/* An event names the ME shard that emitted it, 0 meaning "a build before live
		 * moves" (wire_me_event.me_shard): shard 0's events cannot be told apart. */
		snprintf(a->err, a->cap, "bad_argument: ME shard 0 cannot take part in a live move "
			 "(its events are not told apart from an older build's); number ME shards "
			 "from 1");
		return -EINVAL;
	}
	bool local = false;
	if (app_mgmt_arg_bool(a, "local", &local) != 0)
		return -EINVAL;
	char stop[16] = "";
	int src = mgmt_json_get_str(a->req->json, a->req->args, "stop_after", stop, sizeof(stop));
	uint8_t stop_after = strcmp(stop, "copy") == 0	  ? MV_STOP_COPY
			     : strcmp(stop, "freeze") == 0 ? MV_STOP_FREEZE
							   : MV_STOP_NONE;
	if ((src != 0 && src != -ENOENT) || (src == 0 && stop_after == MV_STOP_NONE)) {
		snprintf(a->err, a->cap, "bad_argument: --stop-after (a drill) is copy or freeze");
		return -EINVAL;
	}
	if (local) {
		snprintf(a->err, a->cap, "bad_argument: a move spans shards led anywhere; --local "
			 "does not apply");
		return -EINVAL;
	}
	if (app->shard_index[old] < 0) {
		snprintf(a->err, a->cap, "not_hosted: the move reads the frozen book from a replica "
			 "of ME shard %u, which this node does not host; run it on a node that does",
			 old);
		return -ENOENT;
	}
	if (a->req->token == 0)
		return MGMT_PENDING; /* the server answers busy itself */
	if (app_mgmt_move_active(m)) {
		snprintf(a->err, a->cap, "busy: symbol %u is being moved by this node; one move at "
			 "a time", m->move->symbol);
		return -EBUSY;
	}
	if (m->move == NULL) {
		m->move = calloc(1, sizeof(*m->move));
		if (m->move == NULL) {
			snprintf(a->err, a->cap, "internal: out of memory");
			return -ENOMEM;
		}
	}
	struct app_move *mv = m->move;
	if (mv->out_cmds > 0) {
		snprintf(a->err, a->cap, "busy: the last move's commands are still out; try again");
		return -EBUSY;
	}
	mv_reset(mv);
	mv->active = true;
	mv->token = a->req->token;
	mv->symbol = (uint32_t)sym;
	mv->from = old;
	mv->to = (uint16_t)to;
	mv->move_id = app_mgmt_fwd_id_next(m);
	mv->stop_after = stop_after;
	mv->per_chunk = orders_per_chunk(app);
	if (mv->per_chunk == 0) {
		mv->active = false;
		snprintf(a->err, a->cap, "internal: the MTU leaves no room for a book chunk");
		return -EINVAL;
	}
	app_mgmt_targets_oms(app, &mv->oms);
	mv->t_begin = dp_clock_ns();
	mv->deadline_ns = mv->t_begin + tmo * 1000000;
	mv->step = MV_WATCH;
	send_step(m);
	return MGMT_PENDING;
}

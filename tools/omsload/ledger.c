/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsload's ledger (ledger.h): the orders sent, keyed by (user, cl_ord_id), and the egress
 * seqs seen per user. Kept apart from omsload's sending and printing so that the tool tests
 * can feed it messages in any order and check what it concludes.
 */
#include "ledger.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int
ledger_init(struct ledger *g, uint64_t orders_max, uint64_t first_user, uint32_t user_count)
{
	memset(g, 0, sizeof(*g));
	uint64_t slots = LEDGER_SLOTS_MIN;
	while (slots < orders_max * 2 && slots < LEDGER_SLOTS_MAX)
		slots <<= 1;
	g->t = calloc(slots, sizeof(*g->t));
	g->users = calloc(user_count > 0 ? user_count : 1, sizeof(*g->users));
	if (g->t == NULL || g->users == NULL) {
		ledger_free(g);
		return -ENOMEM;
	}
	g->mask = slots - 1;
	g->first_user = first_user;
	g->user_count = user_count;
	return 0;
}

void
ledger_free(struct ledger *g)
{
	for (uint32_t i = 0; g->users != NULL && i < g->user_count; i++)
		free(g->users[i].bits);
	free(g->users);
	free(g->t);
	memset(g, 0, sizeof(*g));
}

/* ---------------------------------------------------------------------------------------
 * Orders.
 * ------------------------------------------------------------------------------------- */

static struct ledger_ord *
slot(const struct ledger *g, uint64_t user, uint64_t id, bool insert, bool *no_room)
{
	uint64_t h = (user * UINT64_C(0x9E3779B97F4A7C15)) ^ (id * UINT64_C(0xC2B2AE3D27D4EB4F));
	*no_room = false;
	for (uint64_t p = 0; p <= g->mask; p++) {
		struct ledger_ord *o = &g->t[(h + p) & g->mask];
		if (o->user == user && o->id == id)
			return o;
		if (o->user == 0) {
			if (!insert || g->used * 4 >= (g->mask + 1) * 3) {
				*no_room = insert;
				return NULL;
			}
			return o;
		}
	}
	*no_room = insert;
	return NULL;
}

void
ledger_order_sent(struct ledger *g, uint64_t user, uint64_t id, int64_t qty)
{
	bool no_room;
	struct ledger_ord *o = slot(g, user, id, true, &no_room);
	if (o == NULL) {
		g->full += no_room;
		return;
	}
	if (o->user == 0) {
		o->user = user;
		o->id = id;
		g->used++;
	}
	o->qty = qty;
}

const struct ledger_ord *
ledger_order(const struct ledger *g, uint64_t user, uint64_t id)
{
	bool no_room;
	if (user == 0)
		return NULL;
	return slot(g, user, id, false, &no_room);
}

/* An ACK or report names the order with an orderId: the first one seen records it, the
 * same one again agrees, another one means the order was admitted twice. */
static struct ledger_ord *
admit(struct ledger *g, uint64_t user, uint64_t id, const struct wire_oid *oid)
{
	bool no_room;
	struct ledger_ord *o = user == 0 ? NULL : slot(g, user, id, false, &no_room);
	if (o == NULL)
		return NULL;
	o->admitted = 1;
	if (!o->oid_known) {
		o->oid = *oid;
		o->oid_known = 1;
	} else if (memcmp(&o->oid, oid, sizeof(*oid)) != 0) {
		o->oid_changed = 1;
	}
	return o;
}

/* ---------------------------------------------------------------------------------------
 * Egress seqs.
 * ------------------------------------------------------------------------------------- */

/* Make s->bits cover seq: upwards by doubling, downwards to the word of seq. False when
 * that would pass LEDGER_SEQ_WORDS_MAX or memory runs out. */
static bool
seqs_cover(struct ledger_seqs *s, uint64_t seq)
{
	uint64_t word_of = seq & ~UINT64_C(63);
	if (word_of > UINT64_MAX - 64 * (uint64_t)LEDGER_SEQ_WORDS_MAX)
		return false; /* no real seq comes near: refuse rather than wrap */
	if (s->bits != NULL && word_of >= s->base && (word_of - s->base) / 64 < s->words)
		return true;
	uint64_t base = s->bits == NULL || word_of < s->base ? word_of : s->base;
	uint64_t end = s->bits == NULL ? word_of + 64 : s->base + (uint64_t)s->words * 64;
	if (word_of + 64 > end) {
		uint64_t doubled = s->base + (uint64_t)s->words * 128;
		end = word_of + 64 > doubled ? word_of + 64 : doubled;
		uint64_t cap = base + 64 * (uint64_t)LEDGER_SEQ_WORDS_MAX;
		if (end > cap && word_of + 64 <= cap)
			end = cap; /* the doubling would pass the cap; what is needed fits */
	}
	if ((end - base) / 64 > LEDGER_SEQ_WORDS_MAX)
		return false;
	uint32_t words = (uint32_t)((end - base) / 64);
	uint64_t *bits = calloc(words, sizeof(*bits));
	if (bits == NULL)
		return false;
	if (s->bits != NULL)
		memcpy(bits + (s->base - base) / 64, s->bits, (size_t)s->words * sizeof(*bits));
	free(s->bits);
	s->bits = bits;
	s->base = base;
	s->words = words;
	return true;
}

/* Note (user, seq): true when never seen before. Holes are counted as the span [lo, hi]
 * of seen seqs widens, and as filled when a seq inside it arrives late. */
static bool
seq_new(struct ledger *g, uint64_t user, uint64_t seq)
{
	if (seq == 0 || user < g->first_user || user - g->first_user >= g->user_count)
		return true;
	struct ledger_seqs *s = &g->users[user - g->first_user];
	bool first = s->bits == NULL;
	if (!seqs_cover(s, seq)) {
		g->seq_untracked++;
		return true;
	}
	uint64_t k = seq - s->base;
	uint64_t *w = &s->bits[k / 64], bit = UINT64_C(1) << (k % 64);
	if (*w & bit) {
		g->seq_repeats++;
		return false;
	}
	*w |= bit;
	if (first) {
		s->lo = s->hi = seq;
	} else if (seq > s->hi) {
		g->seq_gaps += seq - s->hi - 1;
		s->hi = seq;
	} else if (seq < s->lo) {
		g->seq_gaps += s->lo - seq - 1;
		s->lo = seq;
	} else {
		g->seq_filled++;
	}
	return true;
}

/* ---------------------------------------------------------------------------------------
 * Messages.
 * ------------------------------------------------------------------------------------- */

bool
ledger_on_ack(struct ledger *g, const struct wire_ack *m)
{
	if (!seq_new(g, m->user, m->seq))
		return false;
	(void)admit(g, m->user, m->cl_ord_id, &m->oid);
	return true;
}

bool
ledger_on_nak(struct ledger *g, const struct wire_nak *m)
{
	return seq_new(g, m->user, m->seq);
}

bool
ledger_on_exec(struct ledger *g, const struct wire_exec_report *m)
{
	if (!seq_new(g, m->user, m->seq))
		return false;
	/* A report proves admission even when the ACK is late or lost, and carries the
	 * orderId as well as the ACK does. */
	struct ledger_ord *o = admit(g, m->user, m->cl_ord_id, &m->oid);
	if (o == NULL)
		return true;
	if (m->exec == WIRE_EXEC_OPEN)
		o->opened = 1;
	else if (m->exec == WIRE_EXEC_FILL)
		o->filled += m->last_qty;
	/* The last report (a FILL, CANCELLED, AMENDED, REJECTED or DONE that says so). */
	if (wire_report_final(m))
		o->finals = (uint8_t)(o->finals < 255 ? o->finals + 1 : 255);
	return true;
}

/* ---------------------------------------------------------------------------------------
 * After the drain.
 * ------------------------------------------------------------------------------------- */

/* Every admitted order must be resting (OPEN, no final report) or final (its last report
 * says done, once); fills never exceed the quantity; one orderId per order. A final report settles
 * the order whether or not its OPEN was seen (an IOC never rests; reports may cross). */
void
ledger_count(const struct ledger *g, struct ledger_counts *out)
{
	memset(out, 0, sizeof(*out));
	for (uint64_t i = 0; g->t != NULL && i <= g->mask; i++) {
		const struct ledger_ord *o = &g->t[i];
		if (o->user == 0 || !o->admitted)
			continue;
		out->acked++;
		if (o->finals == 1)
			out->final++;
		else if (o->finals == 0 && o->opened)
			out->resting++;
		else if (o->finals == 0)
			out->unreported++;
		if (o->finals > 1 || o->oid_changed)
			out->doubled++;
		if (o->qty > 0 && o->filled > o->qty)
			out->overfilled++;
	}
}

const struct ledger_ord *
ledger_next_resting(const struct ledger *g, uint64_t *cursor)
{
	for (; g->t != NULL && *cursor <= g->mask; (*cursor)++) {
		const struct ledger_ord *o = &g->t[*cursor];
		if (o->user != 0 && o->opened && o->finals == 0) {
			(*cursor)++;
			return o;
		}
	}
	return NULL;
}

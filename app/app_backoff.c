/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bridge's re-drive schedule and queue (app_backoff.h): exponential back-off per saga
 * to a ceiling, in two fixed generations of an open-addressing table.
 */
#include <errno.h>
#include <string.h>

#include "app_backoff.h"
#include "common/check.h"

uint64_t
app_backoff_interval(const struct app_backoff *b, uint32_t sends)
{
	DCHECK(b->base_ns > 0);
	DCHECK(b->max_ns >= b->base_ns);
	uint64_t w = b->base_ns;
	/* Double without overflow: stop as soon as the ceiling is reached. */
	for (uint32_t i = 0; i < sends && w < b->max_ns; i++)
		w = w > b->max_ns / 2 ? b->max_ns : w * 2;
	return w < b->max_ns ? w : b->max_ns;
}

uint32_t
app_backoff_sends_within(const struct app_backoff *b, uint64_t t_ns)
{
	uint64_t at = app_backoff_interval(b, 0); /* first re-send, after first sight */
	uint32_t n = 0;
	while (at <= t_ns) {
		n++;
		uint64_t w = app_backoff_interval(b, n);
		if (at > UINT64_MAX - w)
			break;
		at += w;
	}
	return n;
}

static uint32_t
cap_for(uint32_t sagas_max)
{
	uint32_t cap = 64;
	while (cap < 2 * (uint64_t)sagas_max && cap < (UINT32_C(1) << 30))
		cap <<= 1;
	return cap;
}

size_t
app_rdq_footprint(uint32_t sagas_max)
{
	if (sagas_max == 0)
		return 0;
	size_t cap = cap_for(sagas_max);
	return 2 * cap * (sizeof(struct app_rdq_ent) + sizeof(uint32_t));
}

int
app_rdq_init(struct app_rdq *q, void *mem, uint32_t sagas_max, const struct app_backoff *bo,
	     uint64_t old_ns)
{
	if (sagas_max == 0 || bo->base_ns == 0 || bo->max_ns < bo->base_ns)
		return -EINVAL;
	memset(q, 0, sizeof(*q));
	q->cap = cap_for(sagas_max);
	q->bo = *bo;
	q->old_ns = old_ns;
	memset(mem, 0, app_rdq_footprint(sagas_max));
	uint8_t *p = mem;
	for (int g = 0; g < 2; g++) {
		q->gen[g].ent = (struct app_rdq_ent *)(void *)p;
		p += q->cap * sizeof(struct app_rdq_ent);
	}
	for (int g = 0; g < 2; g++) {
		q->gen[g].used = (uint32_t *)(void *)p;
		p += q->cap * sizeof(uint32_t);
	}
	return 0;
}

static void
gen_clear(struct app_rdq_gen *g)
{
	for (uint32_t i = 0; i < g->used_count; i++)
		memset(&g->ent[g->used[i]], 0, sizeof(g->ent[0]));
	g->used_count = 0;
}

void
app_rdq_reset(struct app_rdq *q)
{
	gen_clear(&q->gen[0]);
	gen_clear(&q->gen[1]);
}

static uint32_t
home(const struct app_rdq *q, const struct wire_oid *id)
{
	/* splitmix64 finaliser over both words: user_seqs of one user are consecutive. */
	uint64_t x = id->user * UINT64_C(0x9e3779b97f4a7c15) ^ id->shard_seq;
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	return (uint32_t)x & (q->cap - 1);
}

/* The slot of id in g, or the free slot where it would go (*found false); NULL: full. */
static struct app_rdq_ent *
slot(const struct app_rdq *q, struct app_rdq_gen *g, const struct wire_oid *id, bool *found)
{
	uint32_t i = home(q, id);
	for (uint32_t n = 0; n < q->cap; n++, i = (i + 1) & (q->cap - 1)) {
		struct app_rdq_ent *e = &g->ent[i];
		if (e->id.user == 0) {
			*found = false;
			return e;
		}
		if (e->id.user == id->user && e->id.shard_seq == id->shard_seq) {
			*found = true;
			return e;
		}
	}
	*found = false;
	return NULL;
}

void
app_rdq_begin(struct app_rdq *q)
{
	gen_clear(&q->gen[q->cur ^ 1]);
	q->pass_pending = q->pass_old = q->pass_untracked = 0;
	q->pass_oldest_ns = 0;
}

bool
app_rdq_visit(struct app_rdq *q, const struct wire_oid *id, uint64_t now_ns, uint64_t began_ns,
	      bool fresh)
{
	DCHECK(id->user != 0);
	uint64_t age = now_ns > began_ns ? now_ns - began_ns : 0;
	q->pass_pending++;
	if (age >= q->old_ns)
		q->pass_old++;
	if (age > q->pass_oldest_ns)
		q->pass_oldest_ns = age;

	bool found = false;
	struct app_rdq_ent *prev = slot(q, &q->gen[q->cur], id, &found);
	struct app_rdq_ent e;
	bool send;
	if (found) {
		e = *prev;
		send = fresh || now_ns >= e.due_ns;
	} else {
		memset(&e, 0, sizeof(e));
		e.id = *id;
		send = fresh;
	}
	if (found && send && !fresh) {
		e.sends++;
		e.due_ns = now_ns + app_backoff_interval(&q->bo, e.sends);
	} else if (!found || fresh) {
		e.sends = 0;
		e.due_ns = now_ns + app_backoff_interval(&q->bo, 0);
	}
	struct app_rdq_gen *g = &q->gen[q->cur ^ 1];
	bool dup = false;
	struct app_rdq_ent *next = slot(q, g, id, &dup);
	if (next == NULL || dup) {
		/* No room (more sagas than sized for), or visited twice in one pass: keep it
		 * moving at the base cadence rather than lose it. */
		q->pass_untracked++;
		return true;
	}
	*next = e;
	g->used[g->used_count++] = (uint32_t)(next - g->ent);
	DCHECK(g->used_count <= q->cap);
	return send;
}

void
app_rdq_end(struct app_rdq *q)
{
	gen_clear(&q->gen[q->cur]);
	q->cur ^= 1;
	q->pending = q->pass_pending;
	q->old = q->pass_old;
	q->untracked = q->pass_untracked;
	q->oldest_age_ns = q->pass_oldest_ns;
}

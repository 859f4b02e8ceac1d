/* SPDX-License-Identifier: Apache-2.0 */
#include "fixture.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * The test service.
 * ------------------------------------------------------------------------------------- */

static void
svc_see(struct fx_svc *s, uint64_t index, uint64_t now_ns)
{
	if (now_ns < s->last_time_ns || index < s->last_index)
		s->time_back++;
	s->last_index = index;
	s->last_time_ns = now_ns;
}

static void
svc_apply(void *svc, uint64_t index, uint64_t now_ns, const struct wire_msg_hdr *msg,
	  struct svc_sink *sink)
{
	struct fx_svc *s = svc;
	(void)sink;
	svc_see(s, index, now_ns);
	s->msgs++;
	if (msg->type == WIRE_TRANSFER) {
		const struct wire_transfer *t = (const void *)msg;
		s->sum += (uint64_t)t->amount;
		s->blob[s->sum % FX_BLOB] ^= (uint8_t)(t->amount + 1);
	}
}

static void
svc_tick(void *svc, uint64_t index, uint64_t now_ns, struct svc_sink *sink)
{
	struct fx_svc *s = svc;
	(void)sink;
	svc_see(s, index, now_ns);
	s->ticks++;
}

static size_t
svc_snapshot_size(const void *svc)
{
	(void)svc;
	return sizeof(struct fx_svc);
}

static size_t
svc_snapshot(const void *svc, void *buf, size_t cap)
{
	if (cap < sizeof(struct fx_svc))
		return 0;
	memcpy(buf, svc, sizeof(struct fx_svc));
	return sizeof(struct fx_svc);
}

static int
svc_restore(void *svc, const void *buf, size_t len)
{
	if (len != sizeof(struct fx_svc)) {
		memset(svc, 0, sizeof(struct fx_svc));
		return -EINVAL;
	}
	memcpy(svc, buf, len);
	return 0;
}

static uint64_t
svc_hash(const void *svc)
{
	const struct fx_svc *s = svc;
	uint64_t h = 1469598103934665603ull;
	const uint8_t *p = (const uint8_t *)s;
	for (size_t i = 0; i < sizeof(*s); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static const struct svc_ops fx_svc_ops = {
	.name = "fx",
	.apply = svc_apply,
	.tick = svc_tick,
	.snapshot_size = svc_snapshot_size,
	.snapshot = svc_snapshot,
	.restore = svc_restore,
	.state_hash = svc_hash,
};

static void
sink_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	(void)ctx;
	(void)dest;
	(void)msg;
}

static struct svc_sink fx_sink = {.ctx = NULL, .emit = sink_emit};

struct send_ctx {
	struct fx *f;
	uint32_t idx;
};

/* The host persists the new base: keep a copy, so tests can check what it was handed and
 * boot a node from it as a restart would. */
static void
fx_snapshot_saved(void *ctx, const struct cns_snapshot_meta *meta, const void *data)
{
	const struct send_ctx *sc = ctx;
	struct fx_node *nd = &sc->f->nodes[sc->idx];
	cr_assert(meta->len <= sizeof(nd->saved), "snapshot of %lu bytes",
		  (unsigned long)meta->len);
	nd->saved_count++;
	nd->saved_meta = *meta;
	memcpy(nd->saved, data, meta->len);
}

/* ---------------------------------------------------------------------------------------
 * Network.
 * ------------------------------------------------------------------------------------- */

static struct send_ctx send_ctxs[FX_NODES];

static void
fx_send(void *ctx, uint32_t to, const struct wire_msg_hdr *msg)
{
	struct send_ctx *sc = ctx;
	struct fx *f = sc->f;
	cr_assert(to >= 1 && to <= f->n);
	/* Everything the core emits is a valid wire message of its shard. */
	uint16_t len = 0;
	cr_assert(eq(int, wire_msg_check(msg, msg->length, &len), WIRE_E_OK), "bad %s",
		  wire_type_name(msg->type));
	cr_assert(eq(u16, msg->shard, f->cfg.shard));
	f->sent[sc->idx][to - 1]++;
	f->sent_type[sc->idx][msg->type % WIRE_TYPE_LIMIT]++;
	if (msg->type == WIRE_APPEND_ENTRIES)
		f->sent_entries[sc->idx][to - 1] +=
			((const struct wire_append_entries *)(const void *)msg)->entry_count;
	if (f->cut[sc->idx][to - 1] || (f->drop != NULL && f->drop(f, sc->idx + 1, to, msg)) ||
	    f->q_len == FX_QUEUE) {
		f->dropped++;
		return;
	}
	fx_inject(f, sc->idx + 1, to, msg);
}

void
fx_inject(struct fx *f, uint32_t from, uint32_t to, const struct wire_msg_hdr *msg)
{
	cr_assert(f->q_len < FX_QUEUE);
	struct fx_msg *m = &f->q[(f->q_head + f->q_len) % FX_QUEUE];
	f->q_len++;
	m->from = from;
	m->to = to;
	cr_assert(msg->length <= sizeof(m->buf));
	memcpy(m->buf, msg, msg->length);
}

static void after(struct fx *f, uint32_t i);

/* Boot node i over its log store (kept as it is) and an optional snapshot. */
static int
node_boot(struct fx *f, uint32_t i, const struct cns_snapshot_meta *snap, const void *data)
{
	struct fx_node *nd = &f->nodes[i];
	memset(&nd->svc, 0, sizeof(nd->svc));
	struct cns_config cfg = f->cfg;
	cfg.self = i + 1;
	cfg.seed = 1000 + i;
	if (i >= f->cfg.member_count) {
		/* Beyond the bootstrap set: a joining node, configured with no members. */
		cfg.flags |= CNS_CFG_JOIN;
		cfg.member_count = 0;
		memset(cfg.members, 0, sizeof(cfg.members));
	}
	send_ctxs[i].f = f;
	send_ctxs[i].idx = i;
	struct cns_env env = {
		.log_ops = &cns_memlog_ops,
		.log = nd->log,
		.svc_ops = &fx_svc_ops,
		.svc = &nd->svc,
		.sink = &fx_sink,
		.host = {.ctx = &send_ctxs[i],
			 .send = fx_send,
			 .snapshot_saved = fx_snapshot_saved},
	};
	struct cns_boot boot = {.term = cns_memlog_term(nd->log),
				.vote = cns_memlog_vote(nd->log),
				.snapshot = snap,
				.snapshot_data = data};
	int rc = cns_init(&nd->c, nd->mem, &f->lim, &cfg, &env, &boot);
	nd->up = rc == 0;
	nd->durable_reported = 0;
	return rc;
}

static void
node_init(struct fx *f, uint32_t i)
{
	int rc = node_boot(f, i, NULL, NULL);
	cr_assert(rc == 0, "cns_init: %d", rc);
}

int
fx_restart(struct fx *f, uint32_t i, const struct cns_snapshot_meta *snap, const void *data)
{
	cr_assert(i < f->n);
	return node_boot(f, i, snap, data);
}

int
fx_change(struct fx *f, uint32_t i, enum cns_member_op op, uint32_t node)
{
	int rc = cns_member_change(f->nodes[i].c, fx_local(f, i), op, node);
	after(f, i);
	return rc;
}

void
fx_init(struct fx *f, uint32_t n, uint32_t durability)
{
	fx_init_join(f, n, n, durability);
}

void
fx_init_join(struct fx *f, uint32_t voters, uint32_t n, uint32_t durability)
{
	cr_assert(voters <= n);
	cr_assert(n <= FX_NODES);
	memset(f, 0, sizeof(*f));
	f->n = n;
	f->q = calloc(FX_QUEUE, sizeof(struct fx_msg));
	cr_assert(f->q != NULL);
	uint32_t members[FX_NODES] = {1, 2, 3, 4, 5};
	cns_config_default(&f->cfg, 3, 1, voters, members);
	f->cfg.durability = durability;
	f->cfg.tick_entry_ns = 0; /* tests that want tick entries turn them on */
	f->lim.snapshot_bytes_max = FX_SNAP_MAX;
	f->ll.entries_max = 4096;
	f->ll.bytes_max = 4u << 20;
	f->auto_durable = true;
	f->now = 1000000000ull;
	/* Room for the third snapshot buffer too: tests of asynchronous snapshots turn the flag
	 * on and reconfigure, and smaller limits fit in the larger memory. */
	struct cns_limits room = f->lim;
	room.flags |= CNS_LIM_SNAP_ASYNC;
	for (uint32_t i = 0; i < n; i++) {
		struct fx_node *nd = &f->nodes[i];
		nd->mem = aligned_alloc(64, cns_footprint(&room));
		nd->logmem = aligned_alloc(64, cns_memlog_footprint(&f->ll));
		cr_assert(nd->mem != NULL && nd->logmem != NULL);
		cr_assert(cns_memlog_init(&nd->log, nd->logmem, &f->ll) == 0);
		node_init(f, i);
	}
}

void
fx_reconfigure(struct fx *f)
{
	for (uint32_t i = 0; i < f->n; i++) {
		cr_assert(cns_memlog_init(&f->nodes[i].log, f->nodes[i].logmem, &f->ll) == 0);
		node_init(f, i);
	}
}

void
fx_fini(struct fx *f)
{
	for (uint32_t i = 0; i < f->n; i++) {
		free(f->nodes[i].mem);
		free(f->nodes[i].logmem);
	}
	free(f->q);
}

uint64_t
fx_local(const struct fx *f, uint32_t i)
{
	return (uint64_t)((int64_t)f->now + f->nodes[i].skew_ns);
}

void
fx_durable(struct fx *f, uint32_t i)
{
	struct cns *c = f->nodes[i].c;
	uint64_t last = cns_last_index(c);
	if (last > 0 && last != f->nodes[i].durable_reported) {
		cns_durable(c, last, cns_last_term(c));
		f->nodes[i].durable_reported = last;
	}
}

static void
after(struct fx *f, uint32_t i)
{
	if (f->cfg.durability == CNS_DURABLE_DISK && f->auto_durable && !f->nodes[i].disk_stalled)
		fx_durable(f, i);
	fx_check(f);
}

bool
fx_deliver_one(struct fx *f)
{
	if (f->q_len == 0)
		return false;
	struct fx_msg *m = &f->q[f->q_head];
	f->q_head = (f->q_head + 1) % FX_QUEUE;
	f->q_len--;
	uint32_t i = m->to - 1;
	if (!f->nodes[i].up || f->cut[m->from - 1][i])
		return true;
	int rc = cns_step(f->nodes[i].c, fx_local(f, i), (const struct wire_msg_hdr *)m->buf);
	cr_assert(rc == 0, "cns_step: %d", rc);
	after(f, i);
	return true;
}

uint32_t
fx_deliver_all(struct fx *f)
{
	uint32_t n = 0;
	while (fx_deliver_one(f)) {
		n++;
		cr_assert(n < 1000000, "message storm");
	}
	return n;
}

void
fx_apply_all(struct fx *f)
{
	for (uint32_t i = 0; i < f->n; i++)
		if (f->nodes[i].up)
			cns_apply(f->nodes[i].c, UINT32_MAX);
	fx_check(f);
}

void
fx_run_ms(struct fx *f, uint32_t ms)
{
	for (uint32_t t = 0; t < ms; t++) {
		f->now += 1000000;
		for (uint32_t i = 0; i < f->n; i++) {
			if (!f->nodes[i].up)
				continue;
			cns_tick(f->nodes[i].c, fx_local(f, i));
			after(f, i);
		}
		fx_deliver_all(f);
		fx_apply_all(f);
	}
}

void
fx_campaign(struct fx *f, uint32_t i)
{
	struct cns *c = f->nodes[i].c;
	c->election_deadline_ns = 1; /* fires on the next tick */
	cns_tick(c, fx_local(f, i));
	after(f, i);
	fx_deliver_all(f);
	fx_apply_all(f);
}

int
fx_leader(const struct fx *f)
{
	int best = -1;
	for (uint32_t i = 0; i < f->n; i++) {
		const struct fx_node *nd = &f->nodes[i];
		if (nd->up && cns_role(nd->c) == CNS_LEADER &&
		    (best < 0 || cns_term(nd->c) > cns_term(f->nodes[best].c)))
			best = (int)i;
	}
	return best;
}

void
fx_isolate(struct fx *f, uint32_t i, bool on)
{
	for (uint32_t j = 0; j < f->n; j++) {
		if (j == i)
			continue;
		f->cut[i][j] = on;
		f->cut[j][i] = on;
	}
}

void
fx_heal(struct fx *f)
{
	memset(f->cut, 0, sizeof(f->cut));
}

int
fx_propose(struct fx *f, uint32_t i, uint64_t amount)
{
	struct wire_transfer t;
	memset(&t, 0, sizeof(t));
	wire_hdr_init(&t.hdr, WIRE_TRANSFER, f->cfg.shard);
	t.user = 1;
	t.asset = 2;
	t.amount = (int64_t)amount;
	t.transfer_id = amount;
	return cns_propose(f->nodes[i].c, fx_local(f, i), &t.hdr);
}

void
fx_check(struct fx *f)
{
	for (uint32_t i = 0; i < f->n; i++) {
		struct fx_node *a = &f->nodes[i];
		if (!a->up)
			continue;
		const struct cns *ca = a->c;
		cr_assert(a->svc.time_back == 0, "service time went backwards on n%u", i + 1);
		cr_assert(cns_commit_index(ca) <= cns_last_index(ca));
		cr_assert(cns_applied_index(ca) <= cns_commit_index(ca));
		if (cns_role(ca) == CNS_LEADER) {
			uint64_t t = cns_term(ca);
			cr_assert(t < 1024);
			if (f->leader_of_term[t] == 0)
				f->leader_of_term[t] = i + 1;
			cr_assert(f->leader_of_term[t] == i + 1, "two leaders in term %lu",
				  (unsigned long)t);
		}
		for (uint32_t j = i + 1; j < f->n; j++) {
			struct fx_node *b = &f->nodes[j];
			if (!b->up)
				continue;
			const struct cns *cb = b->c;
			/* Committed entries agree (State Machine Safety, Raft §5.4.3). */
			uint64_t m = cns_commit_index(ca) < cns_commit_index(cb) ? cns_commit_index(ca)
										  : cns_commit_index(cb);
			uint64_t ta = cns_term_at(ca, m), tb = cns_term_at(cb, m);
			if (m > 0 && ta != CNS_TERM_UNKNOWN && tb != CNS_TERM_UNKNOWN &&
			    m > ca->base_index && m > cb->base_index) {
				const struct wire_entry_hdr *ea = cns_log_entry(ca, m);
				const struct wire_entry_hdr *eb = cns_log_entry(cb, m);
				cr_assert(ea->term == eb->term && ea->time_ns == eb->time_ns &&
						  ea->data_len == eb->data_len &&
						  memcmp(ea + 1, eb + 1, ea->data_len) == 0,
					  "committed entry %lu differs on n%u and n%u",
					  (unsigned long)m, i + 1, j + 1);
			}
			if (cns_applied_index(ca) == cns_applied_index(cb))
				cr_assert(memcmp(&a->svc, &b->svc, sizeof(a->svc)) == 0,
					  "state differs at applied index %lu",
					  (unsigned long)cns_applied_index(ca));
		}
	}
}

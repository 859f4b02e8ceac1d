/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A control request's lifecycle on the main lcore. A handler starts a request (a view, a
 * command, or a proposal of one or two steps): it gets one struct app_cmd per target
 * shard, handed to that shard's lcore on its mgmt ring, since the shard lcore is the only
 * reader and proposer of its service's state. The answers come back on app->mgmt_done and
 * are collected here between socket polls; once every command of a request is back, the
 * request is answered: an error naming the first shard that was not ok, or the render
 * function the handler stored in it. A mutation is proposed only when every target shard
 * is led here (docs/appliance.md "Control socket" says why); a second step is proposed
 * only once every command of the first is ok. A shard lcore that never gives a command
 * back is answered timeout here, and the request is freed only when its commands return.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ring.h>

#include "app_mgmt_int.h"
#include "consensus/cns.h"
#include "common/check.h"
#include "common/wire.h"

#define TIMEOUT_MS_DEFAULT 3000      /* commit deadline unless args.timeout_ms */
#define TIMEOUT_MS_MAX 60000
#define GRACE_NS (1000ull * 1000000) /* main answers timeout itself this long after */
#define COLLECT_BURST 32             /* answered commands taken per dequeue */

/* Writes one step's command for one target shard. */
typedef int(cmd_fill_fn)(struct app_cmd *c, uint16_t shard, const void *ctx);

int
app_mgmt_req_init(struct app_mgmt *m)
{
	m->result = malloc(APP_MGMT_RESULT_MAX);
	m->reqs = calloc(APP_CMDS_MAX, sizeof(*m->reqs));
	return m->result == NULL || m->reqs == NULL ? -ENOMEM : 0;
}

static struct app_mgmt_req *
req_slot_get(struct app_mgmt *m)
{
	for (uint32_t i = 0; i < APP_CMDS_MAX; i++)
		if (!m->reqs[i].used)
			return &m->reqs[i];
	return NULL;
}

static uint32_t
cmds_at_shard(const struct app_mgmt_req *r)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < r->cmd_count; i++)
		n += r->cmds[i] != NULL && r->cmds[i]->at_shard;
	return n;
}

static void
req_free(struct app_mgmt_req *r)
{
	free(r->next);
	for (uint32_t i = 0; i < r->cmd_count; i++) {
		if (r->cmds[i] != NULL && !r->cmds[i]->at_shard) {
			free(r->cmds[i]->out);
			free(r->cmds[i]);
		}
	}
	memset(r, 0, sizeof(*r));
}

void
app_mgmt_req_fini(struct app_mgmt *m)
{
	/* What the stopped shard lcores still hold is freed by app_shard_fini (at_shard). */
	if (m->reqs != NULL && m->app != NULL && m->app->mgmt_done != NULL) {
		struct app_cmd *c;
		while (rte_ring_sc_dequeue(m->app->mgmt_done, (void **)&c) == 0)
			c->at_shard = false;
	}
	if (m->reqs != NULL)
		for (uint32_t i = 0; i < APP_CMDS_MAX; i++)
			if (m->reqs[i].used)
				req_free(&m->reqs[i]);
	free(m->reqs);
	m->reqs = NULL;
	free(m->result);
	m->result = NULL;
}

static uint64_t
timeout_ns(const struct mgmt_req *req)
{
	uint64_t ms = TIMEOUT_MS_DEFAULT;
	if (mgmt_json_get_u64(req->json, req->args, "timeout_ms", &ms) != 0 || ms == 0 ||
	    ms > TIMEOUT_MS_MAX)
		ms = TIMEOUT_MS_DEFAULT;
	return ms * 1000000;
}

/* ---- who leads ---- */

int
app_mgmt_reply_not_leader(struct app_mgmt_call *a, const struct app_mgmt_targets *t)
{
	const struct app *app = a->mgmt->app;
	char extra[2048], msg[256] = "";
	struct mgmt_out o;
	mgmt_out_init(&o, extra, sizeof(extra));
	uint32_t first = 0;
	mgmt_out_key(&o, "leaders");
	mgmt_out_arr_begin(&o);
	for (uint32_t i = 0; i < t->n; i++) {
		uint16_t id = t->shard[i];
		int idx = app->shard_index[id];
		uint32_t leader = 0;
		bool leads = idx >= 0 && app_shard_leads(app, (uint32_t)idx, &leader);
		if (leads)
			continue;
		if (idx < 0)
			leader = __atomic_load_n(&app->leader_hint[id], __ATOMIC_RELAXED);
		if (leader == app->cfg.dp.node_id)
			leader = 0;
		if (first == 0)
			first = leader;
		mgmt_out_obj_begin(&o);
		mgmt_out_kv_u64(&o, "shard", id);
		mgmt_out_kv_u64(&o, "leader", leader);
		mgmt_out_kv_bool(&o, "hosted", idx >= 0);
		mgmt_out_obj_end(&o);
		size_t l = strlen(msg);
		if (leader != 0)
			snprintf(msg + l, sizeof(msg) - l, "%sshard %u: leader is node %u",
				 l ? "; " : "", id, leader);
		else
			snprintf(msg + l, sizeof(msg) - l, "%sshard %u: leader unknown%s",
				 l ? "; " : "", id, idx < 0 ? " (not hosted here)" : "");
	}
	mgmt_out_arr_end(&o);
	char head[64];
	snprintf(head, sizeof(head), "\"leader\":%u,", first);
	char members[2200];
	snprintf(members, sizeof(members), "%s%s", head, extra);
	mgmt_reply_err_extra(a->mgmt->srv, a->req->token, "not_leader", msg, members);
	return MGMT_PENDING;
}

bool
app_mgmt_all_led(const struct app *app, const struct app_mgmt_targets *t)
{
	for (uint32_t i = 0; i < t->n; i++) {
		int idx = app->shard_index[t->shard[i]];
		uint32_t leader;
		if (idx < 0 || !app_shard_leads(app, (uint32_t)idx, &leader))
			return false;
	}
	return true;
}

/* ---- fan-out ---- */

/* The shard lcore that carries forwards to shards not hosted here: the gateway's when it
 * runs on one (any shard lcore can send to any node; the gateway lcore of [gateway] has no
 * command ring). -1: the node hosts no shard. */
static int
fwd_carrier(const struct app *app)
{
	if (app->gateway_index >= 0 && (uint32_t)app->gateway_index < app->cfg.shard_count)
		return app->gateway_index;
	for (uint32_t i = 0; i < app->cfg.shard_count; i++)
		if (app_shard_mgmt_ring(app, i) != NULL)
			return (int)i;
	return -1;
}

/* A forwarding id: with this node's id, unique across the cluster and across restarts
 * (the wall clock at the request, moved on by one where two fall on one nanosecond), so
 * a leader never mistakes a new command for an old one it applied. */
uint64_t
app_mgmt_fwd_id_next(struct app_mgmt *m)
{
	uint64_t now = (uint64_t)((int64_t)dp_clock_ns() + m->app->clock_offset_ns);
	m->fwd_last = now > m->fwd_last ? now : m->fwd_last + 1;
	return m->fwd_last;
}

/* The commands a forwarding request sends to a leader elsewhere: proposals, membership
 * changes and leadership transfers (app_admin_fwd.c); snapshots and views stay here. */
static bool
kind_forwards(uint32_t kind)
{
	return kind == APP_CMD_PROPOSE || kind == APP_CMD_MEMBERS || kind == APP_CMD_TRANSFER;
}

/* Add one step's commands to r and enqueue them. A proposal (or a membership change, or a
 * leadership transfer) of a forwarding request goes to the target's lcore when led here (it
 * forwards itself if leadership moved meanwhile), else as APP_CMD_FORWARD to the target's
 * lcore (hosted here) or the carrier lcore.
 * Otherwise targets not led here (led: checked before) are answered here with NOT_LEADER
 * and the hint, never enqueued. 0 or -ENOMEM. */
static int
step_enqueue(struct app_mgmt *m, struct app_mgmt_req *r, const struct app_mgmt_targets *t,
	     uint32_t kind, cmd_fill_fn *fill, const void *ctx, bool led)
{
	uint64_t now = dp_clock_ns();
	uint32_t first = r->cmd_count;
	int rc = 0;
	for (uint32_t i = 0; i < t->n && rc == 0; i++) {
		CHECK(r->cmd_count < sizeof(r->cmds) / sizeof(r->cmds[0]));
		struct app_cmd *c = calloc(1, sizeof(*c));
		if (c == NULL) {
			rc = -ENOMEM;
			break;
		}
		r->cmds[r->cmd_count++] = c;
		c->kind = kind;
		c->shard = t->shard[i];
		c->deadline_ns = now + r->timeout_ns;
		c->req = r;
		c->step = r->step;
		if (kind == APP_CMD_VIEW) {
			c->out = malloc(APP_MGMT_VIEW_MAX);
			c->out_cap = APP_MGMT_VIEW_MAX;
			if (c->out == NULL) {
				rc = -ENOMEM;
				break;
			}
		}
		rc = fill(c, t->shard[i], ctx);
	}
	if (rc != 0) {
		/* Nothing of this step was enqueued: its commands are answered here. */
		for (uint32_t i = first; i < r->cmd_count; i++) {
			r->cmds[i]->status = APP_CMD_FAILED;
			r->cmds[i]->err = rc;
			r->done_count++;
		}
		return rc;
	}
	const struct app *app = m->app;
	for (uint32_t i = first; i < r->cmd_count; i++) {
		struct app_cmd *c = r->cmds[i];
		int idx = app->shard_index[c->shard];
		uint32_t leader = 0;
		bool leads = idx >= 0 && app_shard_leads(app, (uint32_t)idx, &leader);
		bool forwarded = kind_forwards(kind) && r->forward;
		if (forwarded) {
			c->fwd.id = app_mgmt_fwd_id_next(m);
			if (leads) {
				c->flags |= APP_CMD_MAY_FORWARD;
			} else {
				c->kind = APP_CMD_FORWARD;
				if (idx < 0)
					idx = fwd_carrier(app);
			}
		}
		struct rte_ring *ring = idx >= 0 ? app_shard_mgmt_ring(app, (uint32_t)idx) : NULL;
		if (!led && !leads && !forwarded) {
			if (idx < 0)
				leader = __atomic_load_n(&app->leader_hint[c->shard],
							 __ATOMIC_RELAXED);
			c->leader = leader == app->cfg.dp.node_id ? 0 : leader;
			c->status = APP_CMD_NOT_LEADER;
			r->done_count++;
			continue;
		}
		c->at_shard = true;
		if (ring == NULL || rte_ring_sp_enqueue(ring, c) != 0) {
			c->at_shard = false;
			/* Never reached the shard: answered here, still ours. */
			c->status = ring == NULL ? APP_CMD_NOT_LEADER : APP_CMD_BUSY;
			r->done_count++;
			continue;
		}
		dp_bell_ring(app->shard_bell[idx]);
		m->cmds_out++;
	}
	return 0;
}

/* Start a request: its first step's commands, one per target, enqueued. Returns the
 * request, or NULL with *rc the handler's answer: MGMT_PENDING when the server has no
 * token left (it answers busy itself), else -errno with a->err written. */
static struct app_mgmt_req *
dispatch(struct app_mgmt_call *a, const struct app_mgmt_targets *t, enum app_mgmt_need need,
	 app_mgmt_render_fn *render, uint32_t kind, cmd_fill_fn *fill, const void *ctx,
	 int *rc)
{
	struct app_mgmt *m = a->mgmt;
	const struct mgmt_req *req = a->req;
	if (req->token == 0) {
		*rc = MGMT_PENDING;
		return NULL;
	}
	if (t->n == 0) {
		snprintf(a->err, a->cap, "not_hosted: no shard on this node serves this");
		*rc = -ENOENT;
		return NULL;
	}
	struct app_mgmt_req *r = req_slot_get(m);
	if (r == NULL || m->cmds_out + 2 * t->n > APP_CMDS_MAX) {
		snprintf(a->err, a->cap, "busy: too many control commands in flight");
		*rc = -EBUSY;
		return NULL;
	}
	uint64_t now = dp_clock_ns();
	memset(r, 0, sizeof(*r));
	r->need = need;
	r->render = render;
	r->token = req->token;
	r->timeout_ns = timeout_ns(req);
	r->deadline_ns = now + r->timeout_ns + GRACE_NS;
	r->step = 1;
	r->forward = a->forward && kind_forwards(kind);
	snprintf(r->name, sizeof(r->name), "%s", req->cmd);
	r->used = true;
	int erc = step_enqueue(m, r, t, kind, fill, ctx, true);
	if (erc != 0) {
		CHECK(cmds_at_shard(r) == 0);
		req_free(r);
		snprintf(a->err, a->cap, "internal: command not built (%s)", strerror(-erc));
		*rc = erc;
		return NULL;
	}
	*rc = MGMT_PENDING;
	return r;
}

static int
fill_view(struct app_cmd *c, uint16_t shard, const void *ctx)
{
	(void)shard;
	const struct app_mgmt_view_query *q = ctx;
	c->view = q->view;
	c->target = q->target;
	if (q->out_cap > c->out_cap) {
		char *big = realloc(c->out, q->out_cap);
		if (big == NULL)
			return -ENOMEM;
		c->out = big;
		c->out_cap = q->out_cap;
	}
	c->user = q->user;
	c->cursor = q->cursor;
	c->limit = q->limit;
	c->flags = q->flags;
	return 0;
}

static int
fill_target(struct app_cmd *c, uint16_t shard, const void *ctx)
{
	(void)shard;
	c->target = *(const uint32_t *)ctx;
	return 0;
}

struct member_change {
	uint32_t op;   /* enum cns_member_op */
	uint32_t node;
};

/* The change for the shard lcore (member_op, target) and, should it be forwarded, as the
 * MEMBER_CHANGE its leader takes (msg). */
static int
fill_members(struct app_cmd *c, uint16_t shard, const void *ctx)
{
	const struct member_change *mc = ctx;
	c->member_op = mc->op;
	c->target = mc->node;
	struct wire_member_change *m = (void *)c->msg;
	static_assert(sizeof(*m) <= APP_CMD_MSG_MAX, "a member change fits msg");
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_MEMBER_CHANGE, shard);
	m->node = mc->node;
	m->op = (uint8_t)mc->op;
	return 0;
}

/* The transfer for the shard lcore (target) and, should it be forwarded, as the
 * LEADER_TRANSFER its leader takes (msg). */
static int
fill_transfer(struct app_cmd *c, uint16_t shard, const void *ctx)
{
	c->target = *(const uint32_t *)ctx;
	struct wire_leader_transfer *m = (void *)c->msg;
	static_assert(sizeof(*m) <= APP_CMD_MSG_MAX, "a transfer fits msg");
	memset(m, 0, sizeof(*m));
	wire_hdr_init(&m->hdr, WIRE_LEADER_TRANSFER, shard);
	m->node = c->target;
	return 0;
}

static int
fill_propose(struct app_cmd *c, uint16_t shard, const void *ctx)
{
	const struct app_mgmt_proposal *p = ctx;
	CHECK(p->len <= APP_CMD_MSG_MAX);
	memcpy(c->msg, p->msg, p->len);
	((struct wire_msg_hdr *)c->msg)->shard = shard;
	c->req_key = p->key;
	c->flags = p->flags;
	return 0;
}

int
app_mgmt_internal(struct app_mgmt *m, uint16_t shard, const struct app_mgmt_proposal *p,
		  const struct app_mgmt_view_query *q, bool forward, uint64_t timeout_ns,
		  app_mgmt_done_fn *done, void *owner, uint64_t tag)
{
	CHECK((p == NULL) != (q == NULL));
	CHECK(done != NULL);
	struct app_mgmt_req *r = req_slot_get(m);
	if (r == NULL || m->cmds_out + 2 > APP_CMDS_MAX)
		return -EBUSY;
	if (q != NULL && m->app->shard_index[shard] < 0)
		return -ENOENT;
	uint64_t now = dp_clock_ns();
	memset(r, 0, sizeof(*r));
	r->need = APP_MGMT_NEED_ALL;
	r->answered = true; /* no client waits on it */
	r->done = done;
	r->owner = owner;
	r->tag = tag;
	r->timeout_ns = timeout_ns;
	r->deadline_ns = now + timeout_ns + GRACE_NS;
	r->step = 1;
	r->forward = p != NULL && forward;
	snprintf(r->name, sizeof(r->name), "internal");
	r->used = true;
	struct app_mgmt_targets t = {0};
	app_mgmt_targets_add(&t, shard);
	int rc = p != NULL ? step_enqueue(m, r, &t, APP_CMD_PROPOSE, fill_propose, p, false)
			   : step_enqueue(m, r, &t, APP_CMD_VIEW, fill_view, q, true);
	if (rc != 0) {
		CHECK(cmds_at_shard(r) == 0);
		req_free(r);
		return rc;
	}
	return 0;
}

int
app_mgmt_view(struct app_mgmt_call *a, const struct app_mgmt_targets *t,
	      const struct app_mgmt_view_query *q, app_mgmt_render_fn *render)
{
	int rc;
	dispatch(a, t, APP_MGMT_NEED_ALL, render, APP_CMD_VIEW, fill_view, q, &rc);
	return rc;
}

int
app_mgmt_command(struct app_mgmt_call *a, const struct app_mgmt_targets *t, uint32_t kind,
		 uint32_t target, app_mgmt_render_fn *render)
{
	int rc;
	dispatch(a, t, APP_MGMT_NEED_ALL, render, kind, fill_target, &target, &rc);
	return rc;
}


/* A shard a command can be forwarded to: hosted here, named by the configuration (the
 * routing's OMS shards, the symbols' ME shards), or one whose leader an answer named. A
 * shard nothing here knows of may not exist: the command is refused before anything is
 * proposed, as it was before forwarding (`shards scale` to a shard no node hosts). */
static bool
shard_known(const struct app *app, uint16_t id)
{
	if (app->shard_index[id] >= 0 ||
	    __atomic_load_n(&app->leader_hint[id], __ATOMIC_RELAXED) != 0)
		return true;
	struct app_mgmt_targets k = {0};
	app_mgmt_targets_oms(app, &k);
	app_mgmt_targets_me(app, &k);
	for (uint32_t i = 0; i < k.n; i++)
		if (k.shard[i] == id)
			return true;
	return false;
}

/* The targets of t no command can reach from here, into out. */
static void
targets_unknown(const struct app *app, const struct app_mgmt_targets *t,
		struct app_mgmt_targets *out)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < t->n; i++)
		if (!shard_known(app, t->shard[i]))
			app_mgmt_targets_add(out, t->shard[i]);
}

/* args.local: the request is refused unless this node leads every target (the behaviour
 * before forwarding: all-or-nothing by leadership). Else it is forwarded where needed. */
static int
local_only(struct app_mgmt_call *a, bool *local)
{
	if (app_mgmt_arg_bool(a, "local", local) != 0)
		return -EINVAL;
	a->forward = !*local;
	return 0;
}

/* What a forwarding request answers before anything is dispatched: --local refuses
 * not_leader unless this node leads every target, and a target no node is known to lead or
 * host is refused not_leader too. true: refused, *rc the request's code. */
static bool
forward_refused(struct app_mgmt_call *a, const struct app_mgmt_targets *t, int *rc)
{
	bool local;
	if (local_only(a, &local) != 0) {
		*rc = -EINVAL;
		return true;
	}
	if (local && !app_mgmt_all_led(a->mgmt->app, t)) {
		*rc = app_mgmt_reply_not_leader(a, t);
		return true;
	}
	struct app_mgmt_targets unknown;
	targets_unknown(a->mgmt->app, t, &unknown);
	if (unknown.n > 0) {
		*rc = app_mgmt_reply_not_leader(a, &unknown);
		return true;
	}
	return false;
}

int
app_mgmt_propose(struct app_mgmt_call *a, const struct app_mgmt_targets *t,
		 const struct app_mgmt_proposal *p, enum app_mgmt_need need)
{
	int rc;
	if (forward_refused(a, t, &rc))
		return rc;
	dispatch(a, t, need, app_mgmt_render_results, APP_CMD_PROPOSE, fill_propose, p, &rc);
	return rc;
}

int
app_mgmt_member_change(struct app_mgmt_call *a, const struct app_mgmt_targets *t, uint32_t op,
		       uint32_t node, app_mgmt_render_fn *render)
{
	CHECK(op >= CNS_MEMBER_ADD);
	CHECK(op <= CNS_MEMBER_REMOVE);
	int rc;
	if (forward_refused(a, t, &rc))
		return rc;
	struct member_change mc = {.op = op, .node = node};
	dispatch(a, t, APP_MGMT_NEED_ALL, render, APP_CMD_MEMBERS, fill_members, &mc, &rc);
	return rc;
}

int
app_mgmt_transfer(struct app_mgmt_call *a, const struct app_mgmt_targets *t, uint32_t to,
		  app_mgmt_render_fn *render)
{
	CHECK(to != 0);
	int rc;
	if (forward_refused(a, t, &rc))
		return rc;
	dispatch(a, t, APP_MGMT_NEED_ALL, render, APP_CMD_TRANSFER, fill_transfer, &to, &rc);
	return rc;
}

int
app_mgmt_propose_two_steps(struct app_mgmt_call *a, const struct app_mgmt_targets *t,
			   const struct app_mgmt_proposal *p, struct app_mgmt_next_step *next)
{
	struct app_mgmt_targets all = *t;
	for (uint32_t i = 0; i < next->t.n; i++)
		app_mgmt_targets_add(&all, next->t.shard[i]);
	bool local;
	if (local_only(a, &local) != 0) {
		free(next);
		return -EINVAL;
	}
	if (local && !app_mgmt_all_led(a->mgmt->app, &all)) {
		free(next);
		return app_mgmt_reply_not_leader(a, &all);
	}
	struct app_mgmt_targets unknown;
	targets_unknown(a->mgmt->app, &all, &unknown);
	if (unknown.n > 0) {
		free(next);
		return app_mgmt_reply_not_leader(a, &unknown);
	}
	int rc;
	struct app_mgmt_req *r = dispatch(a, t, APP_MGMT_NEED_ALL, app_mgmt_render_results,
					  APP_CMD_PROPOSE, fill_propose, p, &rc);
	if (r == NULL) {
		free(next);
		return rc;
	}
	r->next = next;
	return rc;
}

/* Step 1 is committed everywhere: propose the next step (forwarded where not led here;
 * with args.local its shards must be led here too, else they are answered not_leader and
 * the answer says step 1 applied). */
static void
next_step_start(struct app_mgmt *m, struct app_mgmt_req *r)
{
	struct app_mgmt_next_step *n = r->next;
	if (n->copy_first) {
		const struct wire_msg_hdr *h = (const void *)r->cmds[0]->msg;
		CHECK(h->length <= APP_CMD_MSG_MAX);
		memcpy(n->msg, r->cmds[0]->msg, h->length);
	}
	r->step = 2;
	uint64_t now = dp_clock_ns();
	r->deadline_ns = now + r->timeout_ns + GRACE_NS;
	if (m->cmds_out + n->t.n > APP_CMDS_MAX) {
		r->failed = -EBUSY;
		return;
	}
	struct app_mgmt_proposal p = {.msg = n->msg, .len = n->len, .key = n->key,
				      .flags = n->flags};
	int rc = step_enqueue(m, r, &n->t, APP_CMD_PROPOSE, fill_propose, &p, false);
	if (rc != 0)
		r->failed = rc;
}

/* ---- answers ---- */

const char *
app_mgmt_status_code(uint32_t st)
{
	switch (st) {
	case APP_CMD_OK:
		return "ok";
	case APP_CMD_REJECTED:
		return "rejected";
	case APP_CMD_NOT_LEADER:
		return "not_leader";
	case APP_CMD_LOST:
		return "lost";
	case APP_CMD_TIMEOUT:
		return "timeout";
	case APP_CMD_BUSY:
		return "busy";
	default:
		return "failed";
	}
}

/* A membership change, made here (MEMBERS) or forwarded to the leader (FORWARD). */
static bool
cmd_is_member(const struct app_cmd *c)
{
	return c->kind == APP_CMD_MEMBERS ||
	       (c->kind == APP_CMD_FORWARD &&
		((const struct wire_msg_hdr *)(const void *)c->msg)->type == WIRE_MEMBER_CHANGE);
}

/* A leadership transfer, started here (TRANSFER) or forwarded to the leader (FORWARD). */
static bool
cmd_is_transfer(const struct app_cmd *c)
{
	return c->kind == APP_CMD_TRANSFER ||
	       (c->kind == APP_CMD_FORWARD &&
		((const struct wire_msg_hdr *)(const void *)c->msg)->type == WIRE_LEADER_TRANSFER);
}

static void
result_row(struct mgmt_out *o, const struct app_cmd *c)
{
	mgmt_out_obj_begin(o);
	mgmt_out_kv_u64(o, "shard", c->shard);
	if (c->step > 1 || ((const struct app_mgmt_req *)c->req)->next != NULL)
		mgmt_out_kv_u64(o, "step", c->step);
	mgmt_out_kv_str(o, "status", app_mgmt_status_code(c->status));
	if (c->status == APP_CMD_REJECTED)
		mgmt_out_kv_str(o, "reason", wire_reason_name(c->reason));
	if (c->status == APP_CMD_NOT_LEADER)
		mgmt_out_kv_u64(o, "leader", c->leader);
	if (c->status == APP_CMD_TIMEOUT && c->kind == APP_CMD_FORWARD)
		mgmt_out_kv_u64(o, "leader", c->leader);
	if (c->status == APP_CMD_FAILED)
		mgmt_out_kv_str(o, "error", strerror(-c->err));
	if (c->via != 0)
		mgmt_out_kv_u64(o, "via", c->via); /* the node whose leader proposed it */
	if (c->kind == APP_CMD_PROPOSE || c->kind == APP_CMD_FORWARD ||
	    c->kind == APP_CMD_SNAPSHOT || c->kind == APP_CMD_MEMBERS) {
		mgmt_out_kv_u64(o, "index", c->index);
		mgmt_out_kv_u64(o, "term", c->term);
	}
	if (c->status == APP_CMD_OK || c->status == APP_CMD_REJECTED)
		mgmt_out_kv_u64(o, "value", c->value);
	mgmt_out_obj_end(o);
}

void
app_mgmt_render_results(struct mgmt_out *o, const struct app_mgmt_req *r)
{
	mgmt_out_key(o, "results");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < r->cmd_count; i++)
		result_row(o, r->cmds[i]);
	mgmt_out_arr_end(o);
}

void
app_mgmt_render_views(struct mgmt_out *o, const struct app_mgmt_req *r)
{
	mgmt_out_key(o, "shards");
	mgmt_out_arr_begin(o);
	for (uint32_t i = 0; i < r->cmd_count; i++) {
		const struct app_cmd *c = r->cmds[i];
		c->out[c->out_len < APP_MGMT_VIEW_MAX ? c->out_len : APP_MGMT_VIEW_MAX - 1] = '\0';
		if (o->need_comma)
			mgmt_out_raw(o, ",");
		mgmt_out_raw(o, c->out);
		o->need_comma = true;
	}
	mgmt_out_arr_end(o);
}

/* The answer when a command was not ok: the first such one names the code and message,
 * the shards that applied their command are listed (a command spanning several shards
 * commits on each separately), every command gets its row. */
static void
reply_failure(struct app_mgmt *m, const struct app_mgmt_req *r, const struct app_cmd *bad,
	      const uint16_t *applied, uint32_t applied_count)
{
	struct mgmt_out o;
	mgmt_out_init(&o, m->result, APP_MGMT_RESULT_MAX);
	char msg[384];
	bool fwd = bad->kind == APP_CMD_FORWARD;
	if (fwd && bad->status == APP_CMD_TIMEOUT && bad->leader == 0)
		snprintf(msg, sizeof(msg), "shard %u: no leader found to forward to before the "
			 "deadline (an election?); nothing was proposed", bad->shard);
	else if (fwd && bad->status == APP_CMD_TIMEOUT)
		snprintf(msg, sizeof(msg), "shard %u: no answer from its leader (node %u, "
			 "forwarded) before the deadline; it may still be applied", bad->shard,
			 bad->leader);
	else if (fwd && bad->status == APP_CMD_NOT_LEADER)
		snprintf(msg, sizeof(msg), "shard %u: leadership kept moving while forwarding "
			 "(last hint: node %u)", bad->shard, bad->leader);
	else if (bad->status == APP_CMD_REJECTED)
		snprintf(msg, sizeof(msg), "shard %u refused it: %s", bad->shard,
			 wire_reason_name(bad->reason));
	else if (bad->status == APP_CMD_NOT_LEADER)
		snprintf(msg, sizeof(msg), "shard %u is not led here; leader: node %u%s",
			 bad->shard, bad->leader, bad->leader == 0 ? " (unknown)" : "");
	else if (bad->status == APP_CMD_LOST)
		snprintf(msg, sizeof(msg), "shard %u: the entry was not committed "
			 "(leadership changed); nothing was applied by it", bad->shard);
	else if (bad->status == APP_CMD_TIMEOUT)
		snprintf(msg, sizeof(msg), "shard %u: no outcome before the deadline; it "
			 "may still be applied", bad->shard);
	else if (cmd_is_member(bad) && bad->status == APP_CMD_BUSY && bad->err == -EAGAIN)
		snprintf(msg, sizeof(msg), "shard %u: node %u is still catching up (or the log is "
			 "full); promote it once `omsctl members` shows it a few entries behind",
			 bad->shard, bad->target);
	else if (cmd_is_member(bad) && bad->status == APP_CMD_BUSY)
		snprintf(msg, sizeof(msg), "shard %u: the previous membership change (or the "
			 "leader's first entry of its term) is not committed yet, or leadership is "
			 "being transferred; nothing was changed, try again", bad->shard);
	else if (cmd_is_member(bad) && bad->status == APP_CMD_FAILED &&
		 bad->err == -ENOSPC)
		snprintf(msg, sizeof(msg), "shard %u: it has %u members already (voters and "
			 "learners); remove one first", bad->shard, (unsigned)CNS_MEMBERS_MAX);
	else if (cmd_is_member(bad) && bad->status == APP_CMD_FAILED)
		snprintf(msg, sizeof(msg), "shard %u: not a change that applies to node %u here "
			 "(add: not yet a member; promote: a learner; remove: a member, not the "
			 "last voter)", bad->shard, bad->target);
	else if (cmd_is_transfer(bad) && bad->status == APP_CMD_BUSY && bad->err == -ETIMEDOUT)
		snprintf(msg, sizeof(msg), "shard %u: node %u did not take over within an "
			 "election timeout (behind, or unreachable); node %u still leads, nothing "
			 "changed; try again", bad->shard, bad->target, bad->via);
	else if (cmd_is_transfer(bad) && bad->status == APP_CMD_FAILED && bad->err == -EINVAL)
		snprintf(msg, sizeof(msg), "shard %u: node %u is not a voter of its configuration "
			 "in effect%s", bad->shard, bad->target,
			 bad->via != 0 ? " (its leader says)" : "");
	else if (bad->status == APP_CMD_BUSY)
		snprintf(msg, sizeof(msg), "shard %u: busy (backpressure or a leadership "
			 "transfer); nothing was proposed", bad->shard);
	else
		snprintf(msg, sizeof(msg), "shard %u: %s", bad->shard, strerror(-bad->err));
	size_t l = strlen(msg);
	for (uint32_t i = 0; i < applied_count; i++) {
		snprintf(msg + l, sizeof(msg) - l, "%s%u", i == 0 ? "; applied on shard(s) " : ",",
			 applied[i]);
		l = strlen(msg);
	}
	if (bad->step > 1)
		snprintf(msg + l, sizeof(msg) - l, " (step 1 applied)");
	if (bad->status == APP_CMD_NOT_LEADER)
		mgmt_out_kv_u64(&o, "leader", bad->leader);
	mgmt_out_key(&o, "applied");
	mgmt_out_arr_begin(&o);
	for (uint32_t i = 0; i < applied_count; i++) {
		if (o.need_comma)
			mgmt_out_raw(&o, ",");
		char n[8];
		snprintf(n, sizeof(n), "%u", applied[i]);
		mgmt_out_raw(&o, n);
		o.need_comma = true;
	}
	mgmt_out_arr_end(&o);
	app_mgmt_render_results(&o, r);
	const char *code = app_mgmt_status_code(bad->status);
	if (bad->status == APP_CMD_REJECTED && bad->reason == WIRE_REASON_UNKNOWN_SYMBOL)
		code = "unknown_symbol";
	mgmt_reply_err_extra(m->srv, r->token, code, msg, o.overflow ? NULL : m->result);
}

/* The request's answer once every command is back. */
static void
req_finish(struct app_mgmt *m, const struct app_mgmt_req *r)
{
	struct app_fwd_outcome out[2 * APP_MGMT_TARGETS_MAX];
	uint16_t applied[2 * APP_MGMT_TARGETS_MAX];
	uint32_t applied_count;
	for (uint32_t i = 0; i < r->cmd_count; i++)
		out[i] = (struct app_fwd_outcome){.shard = r->cmds[i]->shard,
						  .status = r->cmds[i]->status,
						  .reason = r->cmds[i]->reason};
	int b = app_fwd_verdict(out, r->cmd_count, r->need == APP_MGMT_NEED_ANY, applied,
				RTE_DIM(applied), &applied_count);
	const struct app_cmd *bad = b >= 0 ? r->cmds[b] : NULL;
	if (bad == NULL && r->failed != 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "step %u not started: %s (step 1 applied)", r->step,
			 strerror(-r->failed));
		mgmt_reply_err(m->srv, r->token, r->failed == -EBUSY ? "busy" : "internal", msg);
		return;
	}
	if (bad != NULL) {
		reply_failure(m, r, bad, applied, applied_count);
		return;
	}
	struct mgmt_out o;
	mgmt_out_init(&o, m->result, APP_MGMT_RESULT_MAX);
	mgmt_out_obj_begin(&o);
	r->render(&o, r);
	mgmt_out_obj_end(&o);
	if (o.overflow) {
		mgmt_reply_err(m->srv, r->token, "too_large", "result does not fit");
		return;
	}
	mgmt_reply_ok(m->srv, r->token, m->result);
}

static bool
step_ok(const struct app_mgmt_req *r)
{
	for (uint32_t i = 0; i < r->cmd_count; i++)
		if (r->cmds[i]->status != APP_CMD_OK)
			return false;
	return true;
}

uint32_t
app_mgmt_req_collect(struct app_mgmt *m)
{
	if (m->app->mgmt_done == NULL)
		return 0;
	struct app_cmd *cs[COLLECT_BURST];
	unsigned n;
	uint32_t taken = 0;
	while ((n = rte_ring_sc_dequeue_burst(m->app->mgmt_done, (void **)cs, COLLECT_BURST,
					      NULL)) > 0) {
		taken += n;
		for (unsigned i = 0; i < n; i++) {
			struct app_mgmt_req *r = cs[i]->req;
			CHECK(m->cmds_out > 0);
			CHECK(r != NULL);
			CHECK(r->used);
			CHECK(cs[i]->at_shard);
			cs[i]->at_shard = false;
			m->cmds_out--;
			r->done_count++;
		}
	}
	uint64_t now = dp_clock_ns();
	for (uint32_t i = 0; i < APP_CMDS_MAX; i++) {
		struct app_mgmt_req *r = &m->reqs[i];
		if (!r->used)
			continue;
		if (r->done_count == r->cmd_count && !r->answered && r->step == 1 &&
		    r->next != NULL && r->failed == 0 && step_ok(r)) {
			next_step_start(m, r);
			if (r->done_count != r->cmd_count)
				continue;
		}
		if (r->done_count == r->cmd_count) {
			if (r->done != NULL) {
				CHECK(r->cmd_count == 1);
				r->done(m, r->cmds[0], r->owner, r->tag);
			} else if (!r->answered) {
				req_finish(m, r);
			}
			req_free(r);
			continue;
		}
		if (!r->answered && now > r->deadline_ns) {
			/* A shard lcore did not give its commands back in time (it always does at
			 * their deadline unless it is stuck): answer, keep them until they return. */
			mgmt_reply_err(m->srv, r->token, "timeout",
				       "no answer from the shard lcore; the command may still apply");
			r->answered = true;
		}
	}
	return taken;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admin forwarding on the shard lcore (docs/appliance.md "Control socket", "Forwarding").
 * A control-socket mutation for a shard this node does not lead travels to the shard's
 * leader as FORWARDED_ADMIN, on the dataplane like every other message between nodes (the
 * peer key's MAC, peers' addresses only):
 *
 *   origin (any shard lcore of the node; the target's own when hosted here): holds the
 *   command among its waiting ones, sends it to the leader it believes in, re-sends every
 *   APP_FWD_RESEND_NS without an answer, follows NOT_LEADER hints (app_fwd.c says how far)
 *   and answers TIMEOUT at the command's deadline;
 *
 *   leader of the target: completes the message from its replica as a local command would
 *   be (routing merge, symbol fill), proposes the whole FORWARDED_ADMIN alone in one entry,
 *   and notes it PENDING in its dedup table;
 *
 *   every member, applying that entry: hands the service the wrapped message, takes the
 *   ADMIN_REPLY it emits as the outcome, records it DONE under (origin, fwd_id) and, on the
 *   leader, sends FORWARDED_REPLY to the origin.
 *
 * Exactly once: a re-send finds its command DONE (answered from the table) or PENDING in
 * this term (its answer comes); a leader looks only once its state is current, when every
 * entry of an earlier term it will ever apply is applied, so a command it does not know
 * was never committed and is proposed again. The table is the host's, not the service's:
 * a member that restored a snapshot taken after the command does not know it (the window
 * is the origin's deadline; docs/appliance.md says which commands are idempotent anyway).
 *
 * A membership change (`omsctl members add|promote|remove`) travels the same way, its tail a
 * MEMBER_CHANGE instead of an admin message, but it is not a service message: the leader
 * makes it with cns_member_change (nothing proposed, nothing for the service to apply),
 * notes it PENDING at the configuration entry's index and term, and answers when that entry
 * commits (app_fwd_members_settle, the wait a local APP_CMD_MEMBERS does in app_cmd_work).
 * A change the configuration in effect already shows is answered ok once that configuration
 * commits and never made again (app_fwd_member_effected), so a re-send that a new leader
 * never saw cannot apply it twice either.
 *
 * A leadership transfer (`omsctl transfer-leader`) too: its tail a LEADER_TRANSFER{to}, which
 * the leader acts on with cns_transfer (nothing proposed), notes PENDING and answers OK once
 * it sees `to` leading — as a follower by then (app_fwd_transfers_settle, the wait a local
 * APP_CMD_TRANSFER does in app_cmd_work). A re-send that reaches `to` as leader is answered
 * OK at once (already so), one that reaches another leader is decided by it. A transfer
 * consensus gave up on (an election timeout without `to` taking over) is answered BUSY:
 * nothing changed, and the origin answers busy at once rather than starting it again.
 */
#include <errno.h>
#include <inttypes.h>

#include "app_shard_int.h"
#include "common/check.h"

static_assert(APP_CMD_ROUTE_MERGE == WIRE_FWD_F_ROUTE_MERGE, "flag bits shared");
static_assert(APP_CMD_ROUTE_SCALE == WIRE_FWD_F_ROUTE_SCALE, "flag bits shared");
static_assert(APP_CMD_SYMBOL_FILL == WIRE_FWD_F_SYMBOL_FILL, "flag bits shared");
static_assert(sizeof(struct wire_fwd_admin) % 8 == 0, "the wrapped message stays aligned");
static_assert((int)WIRE_MEMBER_ADD == (int)CNS_MEMBER_ADD, "member ops shared");
static_assert((int)WIRE_MEMBER_PROMOTE == (int)CNS_MEMBER_PROMOTE, "member ops shared");
static_assert((int)WIRE_MEMBER_REMOVE == (int)CNS_MEMBER_REMOVE, "member ops shared");
/* A PENDING member change or transfer keeps its FORWARDED_ADMIN (origin, reply_shard) and
 * the message. */
#define MEMBER_SEEN_LEN (sizeof(struct wire_fwd_admin) + sizeof(struct wire_member_change))
#define TRANSFER_SEEN_LEN (sizeof(struct wire_fwd_admin) + sizeof(struct wire_leader_transfer))
static_assert(MEMBER_SEEN_LEN <= APP_FWD_MSG_MAX, "a pending member change fits its entry");
static_assert(TRANSFER_SEEN_LEN <= APP_FWD_MSG_MAX, "a pending transfer fits its entry");
/* Consensus gives a transfer up after election_timeout_max (2 x election_ms,
 * app_shard_setup.c); one more election_ms lets a TimeoutNow sent at the last moment turn
 * into a vote request that deposes this leader. An election `to` started is over long
 * before TRANSFER_FORGET_ELECTIONS election_ms without any leader heard of. */
#define TRANSFER_ABANDON_ELECTIONS 3
#define TRANSFER_FORGET_ELECTIONS 8

static uint16_t
cmd_msg_type(const struct app_cmd *c)
{
	return ((const struct wire_msg_hdr *)(const void *)c->msg)->type;
}

/* A command of c carries a membership change, not an admin message. */
static bool
cmd_is_member(const struct app_cmd *c)
{
	return cmd_msg_type(c) == WIRE_MEMBER_CHANGE;
}

/* A command of c carries a leadership transfer, not an admin message. */
static bool
cmd_is_transfer(const struct app_cmd *c)
{
	return cmd_msg_type(c) == WIRE_LEADER_TRANSFER;
}

/* ---- origin ---- */

/* The leader of c's shard as this node believes: the local member's view when the shard
 * is hosted here, else the node-wide hint (never ourselves: we do not host it). */
static uint32_t
fwd_guess(struct app_shard *s, const struct app_cmd *c)
{
	if (c->shard == s->id) {
		uint32_t l = cns_leader(s->cns);
		return l == CNS_NODE_NONE ? 0 : l;
	}
	uint32_t g = app_leader_guess(s->app, c->shard);
	if (g == s->self) {
		app_leader_rotate(s->app, c->shard, g);
		g = app_leader_guess(s->app, c->shard);
	}
	return g == s->self ? 0 : g;
}

static void
fwd_send(struct app_shard *s, struct app_cmd *c)
{
	const struct wire_msg_hdr *inner = (const void *)c->msg;
	CHECK(inner->length <= APP_CMD_MSG_MAX);
	struct wire_fwd_admin f;
	memset(&f, 0, sizeof(f));
	wire_hdr_init(&f.hdr, WIRE_FORWARDED_ADMIN, c->shard);
	f.hdr.flags = (uint16_t)(c->flags & WIRE_FWD_F_ALL);
	f.fwd_id = c->fwd.id;
	f.origin = s->self;
	f.reply_shard = s->id;
	f.tail_len = inner->length;
	c->err = 0; /* a BUSY answer to an earlier send no longer says what this one did */
	sc_add(s, c->fwd.sends > 1 ? SC_FWD_RESENT : SC_FWD_SENT, 1);
	app_send_node_tail(s, c->fwd.node, DP_CLASS_SHARD, c->shard, &f.hdr, inner, inner->length);
}

void
app_fwd_cmd_start(struct app_shard *s, struct app_cmd *c)
{
	if (s->cmd_wait_count == APP_CMD_PENDING_MAX) {
		app_cmd_give(s, c, APP_CMD_BUSY);
		return;
	}
	const struct wire_msg_hdr *inner = (const void *)c->msg;
	if (c->fwd.id == 0 ||
	    (!wire_type_is_admin(inner->type) && !cmd_is_member(c) && !cmd_is_transfer(c)) ||
	    inner->length > APP_CMD_MSG_MAX) {
		c->err = -EINVAL; /* main always names the command and sends admin messages */
		app_cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
	c->kind = APP_CMD_FORWARD;
	c->fwd.next_ns = 0; /* the first send goes out in this cycle's settle pass */
	s->cmd_wait[s->cmd_wait_count++] = c;
}

bool
app_fwd_cmd_settle(struct app_shard *s, struct app_cmd *c, enum app_cmd_status *st)
{
	if (s->clock_ns >= c->deadline_ns) {
		c->leader = c->fwd.node; /* who did not answer, for the operator */
		/* A member change whose last send the leader answered BUSY was not made (err
		 * says why, as for a local one); any other silence may have made it. */
		*st = cmd_is_member(c) && c->err != 0 ? APP_CMD_BUSY : APP_CMD_TIMEOUT;
		return true;
	}
	bool rotate;
	if (app_fwd_due(&c->fwd, s->clock_ns, fwd_guess(s, c), &rotate) != APP_FWD_ACT_SEND)
		return false;
	if (rotate && c->shard != s->id) {
		app_leader_rotate(s->app, c->shard, c->fwd.node);
		uint32_t g = fwd_guess(s, c);
		if (g != 0)
			c->fwd.node = g;
	}
	fwd_send(s, c);
	return false;
}

static struct app_cmd *
fwd_waiting(struct app_shard *s, const struct wire_fwd_reply *r, uint32_t *at)
{
	for (uint32_t i = 0; i < s->cmd_wait_count; i++) {
		struct app_cmd *c = s->cmd_wait[i];
		if (c->kind == APP_CMD_FORWARD && c->fwd.id == r->fwd_id && c->shard == r->shard) {
			*at = i;
			return c;
		}
	}
	return NULL;
}

/* The answer of a leader (or of a member that is not one) to a command we forwarded. */
static void
fwd_reply_in(struct app_shard *s, uint32_t from, const struct wire_msg_hdr *msg)
{
	const struct wire_fwd_reply *r = (const void *)msg;
	uint32_t at;
	struct app_cmd *c = fwd_waiting(s, r, &at);
	if (c == NULL) {
		sc_add(s, SC_FWD_LATE, 1); /* answered already (a re-send's twin), or given up */
		return;
	}
	sc_add(s, SC_FWD_ANSWERED, 1);
	switch (r->status) {
	case WIRE_FWD_OK:
	case WIRE_FWD_REJECTED:
		c->reason = r->reason;
		c->value = r->value;
		c->index = r->index;
		c->term = r->term;
		c->via = from;
		if (r->tail_len > 0 && r->tail_len <= APP_CMD_MSG_MAX)
			memcpy(c->msg, r + 1, r->tail_len); /* as the leader filled it */
		app_cmd_unwait(s, at);
		app_cmd_give(s, c, r->status == WIRE_FWD_OK ? APP_CMD_OK : APP_CMD_REJECTED);
		return;
	case WIRE_FWD_NOT_LEADER: {
		uint32_t hint = app_node_known(s->app, r->leader) ? r->leader : 0;
		if (hint != 0 && c->shard != s->id)
			PUB(s->app->leader_hint[c->shard], hint);
		enum app_fwd_act act = app_fwd_not_leader(&c->fwd, s->clock_ns, from, hint);
		if (act == APP_FWD_ACT_SEND) {
			fwd_send(s, c);
		} else if (act == APP_FWD_ACT_GIVE_UP) {
			c->leader = hint;
			app_cmd_unwait(s, at);
			app_cmd_give(s, c, APP_CMD_NOT_LEADER);
		}
		return;
	}
	case WIRE_FWD_BUSY:
		if (cmd_is_transfer(c)) {
			/* The leader tried and consensus gave up: `to` did not take over. Final,
			 * as a local transfer that lapsed would be: another try is the
			 * operator's (each one stops the shard's proposals for its length). */
			c->err = -ETIMEDOUT;
			c->via = from;
			app_cmd_unwait(s, at);
			app_cmd_give(s, c, APP_CMD_BUSY);
			return;
		}
		/* Nothing was done: tried again at the next re-send, until the deadline. A
		 * member change keeps the leader's cause (BACKPRESSURE: the learner is behind). */
		if (cmd_is_member(c))
			c->err = r->reason == WIRE_REASON_BACKPRESSURE ? -EAGAIN : -EBUSY;
		app_fwd_busy(&c->fwd, s->clock_ns);
		return;
	default:
		/* The message is wrong for that shard (a routing config to an ME shard), a
		 * member change that makes no sense there (CAPACITY: no room for a member), or
		 * a transfer to a node that is not a voter there. */
		c->err = r->reason == WIRE_REASON_CAPACITY ? -ENOSPC : -EINVAL;
		c->via = from;
		app_cmd_unwait(s, at);
		app_cmd_give(s, c, APP_CMD_FAILED);
		return;
	}
}

/* ---- the target shard's leader ---- */

/* Every entry of an earlier term this member will ever apply is applied: the entry at the
 * applied index is of the current term (it follows them all). */
static bool
state_current(const struct app_shard *s)
{
	uint64_t applied = cns_applied_index(s->cns);
	uint64_t t = cns_term_at(s->cns, applied);
	if (t == UINT64_MAX) {
		const struct cns_snapshot_meta *meta = cns_snapshot(s->cns, NULL);
		t = meta != NULL && meta->index == applied ? meta->term : 0;
	}
	return t == cns_term(s->cns);
}

struct fwd_answer {
	uint8_t status;               /* enum wire_fwd_status */
	uint16_t reason;
	uint64_t value, index, term;
	const void *tail;             /* the message as proposed, or NULL */
	uint16_t tail_len;
};

static void
fwd_answer(struct app_shard *s, uint32_t origin, uint16_t reply_shard, uint64_t fwd_id,
	   const struct fwd_answer *a)
{
	struct wire_fwd_reply r;
	memset(&r, 0, sizeof(r));
	wire_hdr_init(&r.hdr, WIRE_FORWARDED_REPLY, reply_shard);
	r.fwd_id = fwd_id;
	r.value = a->value;
	r.index = a->index;
	r.term = a->term;
	r.shard = s->id;
	r.status = a->status;
	r.reason = a->reason;
	if (a->status == WIRE_FWD_NOT_LEADER) {
		uint32_t l = cns_leader(s->cns);
		r.leader = l == s->self ? 0 : l;
	}
	r.tail_len = a->tail != NULL ? a->tail_len : 0;
	app_send_node_tail(s, origin, DP_CLASS_SHARD, reply_shard, &r.hdr, a->tail, r.tail_len);
}

static void
fwd_refuse(struct app_shard *s, const struct wire_fwd_admin *f, uint8_t status, uint16_t reason)
{
	struct fwd_answer a = {.status = status, .reason = reason};
	sc_add(s, SC_FWD_REFUSED, 1);
	fwd_answer(s, f->origin, f->reply_shard, f->fwd_id, &a);
}

static void
fwd_answer_seen(struct app_shard *s, const struct wire_fwd_admin *f, const struct app_fwd_seen *e)
{
	struct fwd_answer a = {.status = e->status, .reason = e->reason, .value = e->value,
			       .index = e->index, .term = e->term};
	if (e->msg_len > 0) {
		a.tail = e->msg;
		a.tail_len = e->msg_len;
	}
	fwd_answer(s, f->origin, f->reply_shard, f->fwd_id, &a);
}

/* Propose the forwarded command, completed as a local one is, alone in the next entry. */
static void
fwd_propose(struct app_shard *s, const struct wire_fwd_admin *f)
{
	_Alignas(8) uint8_t buf[sizeof(struct wire_fwd_admin) + APP_CMD_MSG_MAX];
	const struct wire_msg_hdr *inner = (const void *)(f + 1);
	if (inner->length > APP_CMD_MSG_MAX || inner->shard != s->id) {
		fwd_refuse(s, f, WIRE_FWD_FAILED, WIRE_REASON_BAD_REQUEST);
		return;
	}
	memcpy(buf, f, f->hdr.length);
	struct wire_fwd_admin *m = (void *)buf;
	m->hdr.flags = 0; /* completed here: the entry is what every member applies */
	int rc = app_cmd_fill(s, (struct wire_msg_hdr *)(m + 1), f->hdr.flags);
	if (rc == -ENOENT) {
		/* Nothing proposed: a symbol this replica cannot fill. */
		fwd_refuse(s, f, WIRE_FWD_REJECTED, WIRE_REASON_UNKNOWN_SYMBOL);
		return;
	}
	if (rc != 0) {
		fwd_refuse(s, f, WIRE_FWD_FAILED, WIRE_REASON_BAD_REQUEST);
		return;
	}
	cns_flush(s->cns, s->now); /* seal what is open: the entry holds only this command */
	uint64_t last = cns_last_index(s->cns);
	rc = app_shard_propose(s, &m->hdr);
	if (rc != 0) {
		fwd_refuse(s, f, rc == -EPERM ? WIRE_FWD_NOT_LEADER
			   : rc == -EAGAIN || rc == -EBUSY ? WIRE_FWD_BUSY : WIRE_FWD_FAILED,
			   WIRE_REASON_NONE);
		return;
	}
	cns_flush(s->cns, s->now);
	struct app_fwd_seen *e = app_fwd_seen_get(&s->fwd_seen, f->origin, f->fwd_id);
	e->state = APP_FWD_PENDING;
	e->index = last + 1;
	e->term = cns_term(s->cns);
	sc_add(s, SC_FWD_PROPOSED, 1);
}

/* The type of the message a PENDING member change or transfer keeps behind its wrapper. */
static uint16_t
seen_type(const struct app_fwd_seen *e)
{
	return ((const struct wire_msg_hdr *)(const void *)(e->msg +
							     sizeof(struct wire_fwd_admin)))->type;
}

static bool
seen_is_member(const struct app_fwd_seen *e)
{
	return e->state == APP_FWD_PENDING && e->msg_len == MEMBER_SEEN_LEN &&
	       seen_type(e) == WIRE_MEMBER_CHANGE;
}

static bool
seen_is_transfer(const struct app_fwd_seen *e)
{
	return e->state == APP_FWD_PENDING && e->msg_len == TRANSFER_SEEN_LEN &&
	       seen_type(e) == WIRE_LEADER_TRANSFER;
}

/* A PENDING member change's configuration entry committed: DONE, answered to the origin. */
static void
member_done(struct app_shard *s, struct app_fwd_seen *e)
{
	CHECK(seen_is_member(e));
	struct wire_fwd_admin f;
	memcpy(&f, e->msg, sizeof(f));
	e->state = APP_FWD_DONE;
	e->status = WIRE_FWD_OK;
	e->reason = WIRE_REASON_NONE;
	e->value = e->index;
	e->msg_len = 0; /* the answer carries no message back */
	sc_add(s, SC_FWD_REPLIED, 1);
	fwd_answer_seen(s, &f, e);
}

/* A forwarded membership change, made here as cmd_members (app_shard_cmd.c) makes a local
 * one: never proposed (it is not a service message), the configuration entry appended by
 * consensus, noted PENDING at its index and term (the wrapper kept for the answer) and
 * answered when it commits. Refusals map as a local command's: -EPERM NOT_LEADER, -EBUSY
 * BUSY, -EAGAIN BUSY BACKPRESSURE (the learner is behind, or the log is full), -EINVAL
 * FAILED BAD_REQUEST, -ENOSPC FAILED CAPACITY. */
static void
fwd_member_change(struct app_shard *s, const struct wire_fwd_admin *f)
{
	const struct wire_member_change *mc = (const void *)(f + 1);
	CHECK(mc->hdr.type == WIRE_MEMBER_CHANGE);
	if (mc->hdr.shard != s->id || f->hdr.flags != 0) {
		fwd_refuse(s, f, WIRE_FWD_FAILED, WIRE_REASON_BAD_REQUEST);
		return;
	}
	uint64_t index, term;
	if (app_fwd_member_effected(mc->op, cns_is_voter(s->cns, mc->node),
				    cns_is_learner(s->cns, mc->node))) {
		index = cns_members(s->cns, NULL);
		term = cns_term_at(s->cns, index);
	} else {
		int rc = cns_member_change(s->cns, s->now, (enum cns_member_op)mc->op, mc->node);
		if (rc == -EPERM) {
			fwd_refuse(s, f, WIRE_FWD_NOT_LEADER, WIRE_REASON_NOT_LEADER);
			return;
		}
		if (rc == -EBUSY || rc == -EAGAIN) {
			fwd_refuse(s, f, WIRE_FWD_BUSY,
				   rc == -EAGAIN ? WIRE_REASON_BACKPRESSURE : WIRE_REASON_NONE);
			return;
		}
		if (rc != 0) {
			fwd_refuse(s, f, WIRE_FWD_FAILED,
				   rc == -ENOSPC ? WIRE_REASON_CAPACITY : WIRE_REASON_BAD_REQUEST);
			return;
		}
		index = cns_members(s->cns, NULL);
		term = cns_term(s->cns);
		APP_LOG(NOTICE, "shard %u: membership change %s node %u (forwarded by node %u) "
			"appended at %" PRIu64 " in term %" PRIu64, s->id,
			mc->op == WIRE_MEMBER_ADD ? "add learner"
			: mc->op == WIRE_MEMBER_PROMOTE ? "promote" : "remove",
			mc->node, f->origin, index, term);
	}
	struct app_fwd_seen *e = app_fwd_seen_get(&s->fwd_seen, f->origin, f->fwd_id);
	e->state = APP_FWD_PENDING;
	e->index = index;
	e->term = term;
	memcpy(e->msg, f, MEMBER_SEEN_LEN);
	e->msg_len = MEMBER_SEEN_LEN;
	s->fwd_seen.member_waits++;
	sc_add(s, SC_FWD_PROPOSED, 1);
	if (cns_commit_index(s->cns) >= index)
		member_done(s, e); /* already so, and committed: at once */
}

uint32_t
app_fwd_members_settle(struct app_shard *s)
{
	struct app_fwd_seen_table *t = &s->fwd_seen;
	if (t->member_waits == 0)
		return 0;
	bool leads = cns_role(s->cns) == CNS_LEADER;
	uint64_t commit = cns_commit_index(s->cns), last = cns_last_index(s->cns);
	uint32_t waits = 0, answered = 0;
	for (uint32_t i = 0; i < APP_FWD_SEEN_MAX; i++) {
		struct app_fwd_seen *e = &t->e[i];
		if (!seen_is_member(e))
			continue;
		/* As app_cmd_work settles a local APP_CMD_MEMBERS: done once its entry commits,
		 * lost once the log no longer holds it (compacted: it committed). */
		uint64_t at = e->index <= last ? cns_term_at(s->cns, e->index) : 0;
		bool held = at == e->term || at == UINT64_MAX;
		if (held && commit >= e->index) {
			member_done(s, e);
			answered++;
		} else if (!held || !leads) {
			/* Not known to commit: forgotten, so a re-send is decided again by the
			 * leader it reaches (a change already made there answers ok). */
			e->state = APP_FWD_FREE;
		} else {
			waits++;
		}
	}
	t->member_waits = waits;
	return answered;
}

/* A PENDING transfer is settled: DONE with status (OK: value the term `to` leads in; BUSY:
 * consensus gave it up), answered to the origin. */
static void
transfer_done(struct app_shard *s, struct app_fwd_seen *e, uint8_t status)
{
	CHECK(seen_is_transfer(e));
	struct wire_fwd_admin f;
	memcpy(&f, e->msg, sizeof(f));
	e->state = APP_FWD_DONE;
	e->status = status;
	e->reason = WIRE_REASON_NONE;
	e->value = status == WIRE_FWD_OK ? cns_term(s->cns) : 0;
	e->index = 0;
	e->msg_len = 0; /* the answer carries no message back */
	sc_add(s, status == WIRE_FWD_OK ? SC_FWD_REPLIED : SC_FWD_REFUSED, 1);
	fwd_answer_seen(s, &f, e);
}

/* A forwarded leadership transfer, started here as cmd_transfer (app_shard_cmd.c) starts a
 * local one: never proposed, cns_transfer hands leadership to `to` (thesis §3.10), noted
 * PENDING with the term and clock it started at, answered OK once `to` is seen leading.
 * A transfer to this leader is done already: OK at once, in this term. Refusals map as a
 * local command's: -EPERM NOT_LEADER, -EINVAL (not a voter here) FAILED BAD_REQUEST. */
static void
fwd_leader_transfer(struct app_shard *s, const struct wire_fwd_admin *f)
{
	const struct wire_leader_transfer *lt = (const void *)(f + 1);
	CHECK(lt->hdr.type == WIRE_LEADER_TRANSFER);
	if (lt->hdr.shard != s->id || f->hdr.flags != 0) {
		fwd_refuse(s, f, WIRE_FWD_FAILED, WIRE_REASON_BAD_REQUEST);
		return;
	}
	struct app_fwd_seen *e;
	if (lt->node == s->self) {
		e = app_fwd_seen_get(&s->fwd_seen, f->origin, f->fwd_id);
		e->state = APP_FWD_DONE;
		e->status = WIRE_FWD_OK;
		e->reason = WIRE_REASON_NONE;
		e->value = cns_term(s->cns);
		e->index = 0;
		e->term = cns_term(s->cns);
		e->msg_len = 0;
		sc_add(s, SC_FWD_REPLIED, 1);
		fwd_answer_seen(s, f, e);
		return;
	}
	int rc = cns_transfer(s->cns, s->now, lt->node);
	if (rc == -EPERM) {
		fwd_refuse(s, f, WIRE_FWD_NOT_LEADER, WIRE_REASON_NOT_LEADER);
		return;
	}
	if (rc != 0) {
		fwd_refuse(s, f, WIRE_FWD_FAILED, WIRE_REASON_BAD_REQUEST);
		return;
	}
	APP_LOG(NOTICE, "shard %u: leadership transfer to node %u (forwarded by node %u) in "
		"term %" PRIu64, s->id, lt->node, f->origin, cns_term(s->cns));
	e = app_fwd_seen_get(&s->fwd_seen, f->origin, f->fwd_id);
	e->state = APP_FWD_PENDING;
	e->index = 0;
	e->term = cns_term(s->cns);
	e->value = s->now;
	memcpy(e->msg, f, TRANSFER_SEEN_LEN);
	e->msg_len = TRANSFER_SEEN_LEN;
	s->fwd_seen.transfer_waits++;
	sc_add(s, SC_FWD_PROPOSED, 1);
}

uint32_t
app_fwd_transfers_settle(struct app_shard *s)
{
	struct app_fwd_seen_table *t = &s->fwd_seen;
	if (t->transfer_waits == 0)
		return 0;
	uint64_t election_ns = s->app->cfg.election_ms * 1000000;
	uint32_t leader = cns_leader(s->cns);
	struct app_fwd_transfer_view v = {
		.leader = leader == CNS_NODE_NONE ? 0 : leader,
		.leads = cns_role(s->cns) == CNS_LEADER,
		.now_ns = s->now,
	};
	uint32_t waits = 0, answered = 0;
	for (uint32_t i = 0; i < APP_FWD_SEEN_MAX; i++) {
		struct app_fwd_seen *e = &t->e[i];
		if (!seen_is_transfer(e))
			continue;
		const struct wire_leader_transfer *lt =
			(const void *)(e->msg + sizeof(struct wire_fwd_admin));
		v.to = lt->node;
		v.same_term = cns_term(s->cns) == e->term;
		v.abandon_ns = e->value + TRANSFER_ABANDON_ELECTIONS * election_ns;
		v.forget_ns = e->value + TRANSFER_FORGET_ELECTIONS * election_ns;
		switch (app_fwd_transfer_state(&v)) {
		case APP_FWD_TRANSFER_DONE:
			transfer_done(s, e, WIRE_FWD_OK);
			answered++;
			break;
		case APP_FWD_TRANSFER_FAILED:
			APP_LOG(NOTICE, "shard %u: leadership transfer to node %u (forwarded by "
				"node %u) lapsed: still leading", s->id, lt->node,
				((const struct wire_fwd_admin *)(const void *)e->msg)->origin);
			transfer_done(s, e, WIRE_FWD_BUSY);
			answered++;
			break;
		case APP_FWD_TRANSFER_FORGET:
			e->state = APP_FWD_FREE;
			break;
		case APP_FWD_TRANSFER_WAIT:
			waits++;
			break;
		}
	}
	t->transfer_waits = waits;
	return answered;
}

static void
fwd_admin_in(struct app_shard *s, const struct wire_msg_hdr *msg)
{
	const struct wire_fwd_admin *f = (const void *)msg;
	if (!app_node_known(s->app, f->origin)) {
		sc_add(s, SC_FWD_REFUSED, 1); /* nowhere to answer */
		return;
	}
	if (cns_role(s->cns) != CNS_LEADER) {
		fwd_refuse(s, f, WIRE_FWD_NOT_LEADER, WIRE_REASON_NOT_LEADER);
		return;
	}
	uint16_t type = ((const struct wire_msg_hdr *)(f + 1))->type;
	/* A transfer proposes nothing, so what the log holds has no bearing on it: only who
	 * leads now (and the new leader answers a re-send at once). */
	if (type != WIRE_LEADER_TRANSFER && !state_current(s)) {
		fwd_refuse(s, f, WIRE_FWD_BUSY, WIRE_REASON_NONE); /* the origin re-sends */
		return;
	}
	struct app_fwd_seen *e = app_fwd_seen_find(&s->fwd_seen, f->origin, f->fwd_id);
	switch (app_fwd_seen_verdict(e, cns_term(s->cns))) {
	case APP_FWD_ANSWER:
		sc_add(s, SC_FWD_DUP, 1);
		fwd_answer_seen(s, f, e);
		return;
	case APP_FWD_WAIT:
		sc_add(s, SC_FWD_DUP, 1);
		return;
	case APP_FWD_PROPOSE:
		if (type == WIRE_MEMBER_CHANGE)
			fwd_member_change(s, f); /* never proposed */
		else if (type == WIRE_LEADER_TRANSFER)
			fwd_leader_transfer(s, f); /* never proposed */
		else
			fwd_propose(s, f);
		return;
	}
}

void
app_fwd_msg_in(struct app_shard *s, const struct dp_meta *meta, const struct wire_msg_hdr *msg)
{
	if (msg->type == WIRE_FORWARDED_ADMIN)
		fwd_admin_in(s, msg);
	else if (msg->type == WIRE_FORWARDED_REPLY)
		fwd_reply_in(s, meta->sender_id, msg);
}

/* ---- applying a forwarded entry (every member) ---- */

/* The service's sink while it applies a forwarded command: its ADMIN_REPLY is the
 * command's outcome (answered to the origin, not to the last admin sender); the rest of
 * its egress (a kill's cancels) goes on as usual. */
static void
fwd_emit(void *ctx, enum wire_dest dest, const struct wire_msg_hdr *msg)
{
	struct app_fwd_apply *fa = ctx;
	if (msg->type == WIRE_ADMIN_REPLY && !fa->replied) {
		fa->replied = true;
		fa->reply = *(const struct wire_admin_reply *)msg;
		return;
	}
	fa->down->emit(fa->down->ctx, dest, msg);
}

const struct wire_msg_hdr *
app_fwd_apply_begin(struct app_shard *s, struct app_fwd_apply *fa, const struct wire_msg_hdr *msg,
		    struct svc_sink *down)
{
	CHECK(msg->type == WIRE_FORWARDED_ADMIN);
	const struct wire_fwd_admin *m = (const void *)msg;
	/* fwd_admin_in never proposes a member change or a transfer, so none is in a log this
	 * code wrote; one in the log (another build's leader) is skipped by every member alike,
	 * counted, and no service sees it. */
	uint16_t type = ((const struct wire_msg_hdr *)(const void *)(m + 1))->type;
	if (type == WIRE_MEMBER_CHANGE || type == WIRE_LEADER_TRANSFER) {
		sc_add(s, SC_FWD_REFUSED, 1);
		return NULL;
	}
	memset(fa, 0, sizeof(*fa));
	fa->s = s;
	fa->m = m;
	fa->down = down;
	fa->sink.ctx = fa;
	fa->sink.emit = fwd_emit;
	return (const void *)(fa->m + 1);
}

void
app_fwd_apply_end(struct app_fwd_apply *fa)
{
	struct app_shard *s = fa->s;
	const struct wire_fwd_admin *f = fa->m;
	const struct wire_msg_hdr *inner = (const void *)(f + 1);
	sc_add(s, SC_FWD_APPLIED, 1);
	if (f->origin == 0)
		return; /* the decoder refuses it; nothing to remember it by */
	struct app_fwd_seen *e = app_fwd_seen_get(&s->fwd_seen, f->origin, f->fwd_id);
	e->state = APP_FWD_DONE;
	e->index = s->apply_index;
	e->term = s->apply_term;
	/* Every admin message is answered by an ADMIN_REPLY; none would mean applied as is. */
	e->reason = fa->replied ? fa->reply.reason : WIRE_REASON_NONE;
	e->status = e->reason == WIRE_REASON_NONE ? WIRE_FWD_OK : WIRE_FWD_REJECTED;
	e->value = fa->replied ? fa->reply.value : 0;
	e->msg_len = 0;
	if (inner->type == WIRE_SYMBOL_CONFIG && inner->length == APP_FWD_MSG_MAX) {
		memcpy(e->msg, inner, APP_FWD_MSG_MAX);
		e->msg_len = APP_FWD_MSG_MAX;
	}
	if (!s->leader)
		return; /* ARCHITECTURE.md §3: only the leader's egress leaves */
	sc_add(s, SC_FWD_REPLIED, 1);
	fwd_answer_seen(s, f, e);
}

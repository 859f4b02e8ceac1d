/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the control socket's files share, and nothing else includes. The socket and its
 * command table (app_mgmt.c) own one struct app_mgmt and hand it to every handler in the
 * call they make (struct app_mgmt_call). A handler checks its arguments (app_mgmt_args.c),
 * names the shards its command goes to, and starts a request (app_mgmt_req.c) that fans
 * one struct app_cmd out to each target shard's mgmt ring, collects the answers from
 * app->mgmt_done and renders the reply. The handlers live one noun family per file
 * (app_mgmt_symbols.c, app_mgmt_routes.c, app_mgmt_users.c). Calls run one way: app_mgmt.c
 * → handlers → request and args; the request reaches back into a handler's file only
 * through the render function the handler stored in it.
 */
#ifndef OMSD_APP_MGMT_INT_H
#define OMSD_APP_MGMT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "mgmt/mgmt.h"

#define APP_MGMT_RESULT_MAX (1u << 20)        /* a deferred answer */
#define APP_MGMT_VIEW_MAX (256u * 1024)       /* one shard's view */
#define APP_MGMT_TARGETS_MAX APP_SHARDS_MAX   /* shards one request goes to */

struct app_mgmt_req;
struct app_move;

/* The control socket's state: one per node, owned by app_mgmt.c. */
struct app_mgmt {
	struct mgmt_server *srv;      /* the socket, NULL when none is configured */
	const struct app *app;        /* the node, read-only here */
	struct app_mgmt_req *reqs;    /* requests waiting for shard lcores [APP_CMDS_MAX] */
	uint32_t cmds_out;            /* commands held by shard lcores or on their rings */
	char *result;                 /* a deferred answer being rendered [APP_MGMT_RESULT_MAX] */
	uint64_t fwd_last;            /* the last forwarding id given (wall-clock ns based) */
	struct app_move *move;        /* symbols move's driver (app_mgmt_move.c), NULL: none */
	struct dp_idle *idle;         /* main's back-off between a move's steps (its bell is
				       * app->main_bell, rung by the shard lcores' answers) */
};

/* One command being handled: where it came from and where a refusal is written. */
struct app_mgmt_call {
	struct app_mgmt *mgmt;        /* the control socket */
	const struct mgmt_req *req;   /* the command and its arguments */
	char *err;                    /* "code: message" of a refusal */
	size_t cap;                   /* size of err */
	bool forward;                 /* a proposal's shards not led here go to their leader */
};

/* The shards one step of a request goes to, each once. */
struct app_mgmt_targets {
	uint16_t shard[APP_MGMT_TARGETS_MAX]; /* shard ids, in the order added */
	uint32_t n;                           /* shards in shard[] */
};

/* ---- app_mgmt_args.c: arguments, and the shard sets they name ---- */

bool app_mgmt_arg_present(const struct app_mgmt_call *a, const char *key);
/* Every argument must be one of names (NULL-terminated); timeout_ms and local (no
 * forwarding: app_mgmt_propose) are always allowed. */
int app_mgmt_args_known(struct app_mgmt_call *a, const char *const *names);
int app_mgmt_arg_u64(struct app_mgmt_call *a, const char *key, bool required, uint64_t min,
		     uint64_t max, uint64_t *out);
/* A flag: false when absent. */
int app_mgmt_arg_bool(struct app_mgmt_call *a, const char *key, bool *out);
/* A list of distinct shard ids: "1,2,3" (or one number); out holds WIRE_ROUTE_SHARDS_MAX. */
int app_mgmt_arg_shards(struct app_mgmt_call *a, const char *key, bool required,
			uint16_t *out, uint32_t *n);
/* No shard of ids is one of this node's shards of another service (APP_SERVICE_OMS, _ME). */
int app_mgmt_shards_check(struct app_mgmt_call *a, const uint16_t *ids, uint32_t n,
			  int service);
/* The symbol's ME shard: args.me_shard, else the node's [symbol.N] config. */
int app_mgmt_symbol_me_shard(struct app_mgmt_call *a, uint64_t symbol, uint16_t *shard);

void app_mgmt_targets_add(struct app_mgmt_targets *t, uint16_t shard);
/* Every OMS shard: those of the configured routing and those hosted here. */
void app_mgmt_targets_oms(const struct app *app, struct app_mgmt_targets *t);
/* Every ME shard: those of the configured symbols and those hosted here. */
void app_mgmt_targets_me(const struct app *app, struct app_mgmt_targets *t);
/* Hosted shards of a service (-1: every service but echo). */
void app_mgmt_targets_hosted(const struct app *app, struct app_mgmt_targets *t, int service);
bool app_mgmt_is_oms_shard(const struct app *app, uint16_t shard);

/* ---- app_mgmt_req.c: a request's lifecycle ---- */

/* Writes the members of a request's ok answer, between the braces of its object. Called
 * once every command of the request answered ok. */
typedef void(app_mgmt_render_fn)(struct mgmt_out *o, const struct app_mgmt_req *r);

/* Which answers make a request ok. */
enum app_mgmt_need {
	APP_MGMT_NEED_ALL = 1,        /* every target answers ok */
	APP_MGMT_NEED_ANY,            /* ok somewhere, not_found elsewhere (users evict/migrate) */
};

/* The second step of a request, proposed once every command of the first is ok
 * (all-or-nothing per step): shards scale (receiving, then active), symbols add and move
 * (the ME shard that validates or gives the symbol up first, then the others). */
struct app_mgmt_next_step {
	struct app_mgmt_targets t;    /* its target shards */
	_Alignas(8) uint8_t msg[APP_CMD_MSG_MAX]; /* the admin message */
	uint16_t len;                 /* bytes of msg proposed */
	uint64_t key;                 /* req_id of its ADMIN_REPLY */
	uint32_t flags;               /* APP_CMD_ROUTE_MERGE, ... */
	bool copy_first;              /* msg is step 1's first command's, as its shard filled it */
};

/* An internal request's answer (app_mgmt_internal): its one command, back from the shard
 * lcore (or answered here); owner and tag as given. */
typedef void(app_mgmt_done_fn)(struct app_mgmt *m, const struct app_cmd *c, void *owner,
			       uint64_t tag);

struct app_mgmt_req {
	bool used;                    /* the slot holds a request */
	app_mgmt_done_fn *done;       /* internal: called instead of answering a client */
	void *owner;                  /* internal: done's owner and tag */
	uint64_t tag;
	bool answered;                /* the client got its answer (main's timeout) */
	enum app_mgmt_need need;      /* which answers make it ok */
	app_mgmt_render_fn *render;   /* the ok answer */
	uint32_t token;               /* mgmt deferred answer */
	uint32_t cmd_count;           /* commands in cmds[] */
	uint32_t done_count;          /* commands answered (back from the shard lcores or here) */
	uint64_t deadline_ns;         /* main answers timeout after this */
	char name[32];                /* the command */
	uint64_t timeout_ns;          /* per step: the shard lcores' deadline */
	uint8_t step;                 /* 1, or 2 while the second step runs */
	int failed;                   /* -errno: building a step failed */
	bool forward;                 /* proposals to shards not led here are forwarded */
	struct app_mgmt_next_step *next; /* the second step, or NULL */
	struct app_cmd *cmds[2 * APP_MGMT_TARGETS_MAX]; /* both steps' commands */
};

/* An admin message proposed into each target shard's log (its shard field set per target). */
struct app_mgmt_proposal {
	const void *msg;              /* the admin message, same for every target */
	uint16_t len;                 /* bytes of msg */
	uint64_t key;                 /* req_id of its ADMIN_REPLY */
	uint32_t flags;               /* APP_CMD_ROUTE_MERGE, ... */
};

/* What a read-only view asks of each shard (struct app_cmd's view fields). */
struct app_mgmt_view_query {
	uint32_t view;                /* enum app_cmd_view */
	uint32_t target;              /* APP_VIEW_MOVE: the symbol */
	size_t out_cap;               /* bytes of answer room, 0: APP_MGMT_VIEW_MAX */
	uint64_t user;                /* APP_VIEW_USER */
	uint32_t cursor;              /* APP_VIEW_USERS: first actor slot of the page */
	uint32_t limit;               /* APP_VIEW_USERS: users per page */
	uint32_t flags;               /* APP_VIEW_MOVE: APP_VIEW_MOVE_LIVE, _JOURNAL */
};

/* 0 or -ENOMEM; app_mgmt_req_fini undoes it (also after a failure). */
int app_mgmt_req_init(struct app_mgmt *m);
/* After the shard lcores stopped: take back what they answered, free every request. */
void app_mgmt_req_fini(struct app_mgmt *m);
/* Take answered commands back; answer requests that are complete or overdue. Returns the
 * commands taken back. */
uint32_t app_mgmt_req_collect(struct app_mgmt *m);

/* Each starts a request and returns the handler's answer: MGMT_PENDING, or -errno with
 * a->err written. */
int app_mgmt_view(struct app_mgmt_call *a, const struct app_mgmt_targets *t,
		  const struct app_mgmt_view_query *q, app_mgmt_render_fn *render);
/* A command without a message (APP_CMD_SNAPSHOT), acted on here only. */
int app_mgmt_command(struct app_mgmt_call *a, const struct app_mgmt_targets *t, uint32_t kind,
		     uint32_t target, app_mgmt_render_fn *render);
/* APP_CMD_MEMBERS: cns_member_change(op, node) on each target's leader: made here where this
 * node leads the target, else forwarded to its leader as a MEMBER_CHANGE (app_admin_fwd.c);
 * with args.local every target must be led here (else not_leader, nothing changed). */
int app_mgmt_member_change(struct app_mgmt_call *a, const struct app_mgmt_targets *t, uint32_t op,
			   uint32_t node, app_mgmt_render_fn *render);
/* APP_CMD_TRANSFER: cns_transfer(to) on each target's leader, answered once `to` leads:
 * started here where this node leads the target, else forwarded to its leader as a
 * LEADER_TRANSFER (app_admin_fwd.c); with args.local every target must be led here (else
 * not_leader, nothing started). */
int app_mgmt_transfer(struct app_mgmt_call *a, const struct app_mgmt_targets *t, uint32_t to,
		      app_mgmt_render_fn *render);
/* A mutation: one admin entry per target, proposed here where this node leads the target
 * and forwarded to the target's leader elsewhere; with args.local every target must be
 * led here (else not_leader, nothing proposed). */
int app_mgmt_propose(struct app_mgmt_call *a, const struct app_mgmt_targets *t,
		     const struct app_mgmt_proposal *p, enum app_mgmt_need need);
/* A two-step mutation: p into t first; once every target answered ok, next (allocated by
 * the caller, owned by the request from here on, freed on every path). Forwarded like
 * app_mgmt_propose; with args.local every shard of both steps must be led here before
 * anything is proposed. */
int app_mgmt_propose_two_steps(struct app_mgmt_call *a, const struct app_mgmt_targets *t,
			       const struct app_mgmt_proposal *p,
			       struct app_mgmt_next_step *next);

/* A command the control plane starts itself (a symbol move's steps): one APP_CMD_PROPOSE
 * (p; forwarded to the shard's leader when `forward`) or APP_CMD_VIEW (q, answered by this
 * node's replica whoever leads) for one shard. done(m, cmd, owner, tag) is called from
 * app_mgmt_req_collect once it is back. 0, or -EBUSY / -ENOMEM / -ENOENT (not hosted, no
 * carrier): nothing started, done is not called. */
int app_mgmt_internal(struct app_mgmt *m, uint16_t shard, const struct app_mgmt_proposal *p,
		      const struct app_mgmt_view_query *q, bool forward, uint64_t timeout_ns,
		      app_mgmt_done_fn *done, void *owner, uint64_t tag);
/* A command's status as answers name it: "ok", "rejected", "not_leader", "lost", ... */
const char *app_mgmt_status_code(uint32_t st);
/* A new forwarding id (unique in the cluster across restarts; also a symbol move's id). */
uint64_t app_mgmt_fwd_id_next(struct app_mgmt *m);

/* ---- app_mgmt_move.c: symbols move (a symbol and its resting book) ---- */

/* Called by app_mgmt_poll after every collect: timers of the move in progress. */
void app_mgmt_move_poll(struct app_mgmt *m);
/* A move is in progress (the main lcore polls faster meanwhile). */
bool app_mgmt_move_active(const struct app_mgmt *m);
/* Free the driver (after app_mgmt_req_fini). */
void app_mgmt_move_fini(struct app_mgmt *m);

/* Every target shard is hosted and led here (as last published: a hint, the shard lcore
 * decides). */
bool app_mgmt_all_led(const struct app *app, const struct app_mgmt_targets *t);
/* Answer a request whose shards are not all led here (nothing was proposed). */
int app_mgmt_reply_not_leader(struct app_mgmt_call *a, const struct app_mgmt_targets *t);

/* Renderers: "results" (one row per command) and "shards" (one view object per shard). */
app_mgmt_render_fn app_mgmt_render_results;
app_mgmt_render_fn app_mgmt_render_views;

/* ---- the handlers, one noun family per file; app_mgmt.c's table registers them ---- */

/* A shard command's handler: checks a's arguments, then starts its request. variant is
 * its table row's (halt or resume, the kill's scope, pin or unpin), 0 where a handler
 * serves one command. Returns MGMT_PENDING, or -errno with a->err written. */
typedef int(app_mgmt_handler_fn)(struct app_mgmt_call *a, uint32_t variant);

app_mgmt_handler_fn app_mgmt_symbols_list;   /* app_mgmt_symbols.c */
app_mgmt_handler_fn app_mgmt_symbols_status; /* variant: WIRE_SYM_HALTED or _TRADING */
app_mgmt_handler_fn app_mgmt_symbols_add;
app_mgmt_handler_fn app_mgmt_symbols_move;    /* app_mgmt_move.c */
app_mgmt_handler_fn app_mgmt_symbols_book;
app_mgmt_handler_fn app_mgmt_kill;           /* variant: WIRE_KILL_USER or _SYMBOL */
app_mgmt_handler_fn app_mgmt_routes_show;    /* app_mgmt_routes.c */
app_mgmt_handler_fn app_mgmt_routes_set;
app_mgmt_handler_fn app_mgmt_routes_pin;     /* variant: 1 unpins */
app_mgmt_handler_fn app_mgmt_users_show;     /* app_mgmt_users.c */
app_mgmt_handler_fn app_mgmt_users_evict;
app_mgmt_handler_fn app_mgmt_users_migrate;
app_mgmt_handler_fn app_mgmt_shards_scale;
app_mgmt_handler_fn app_mgmt_snapshot;
app_mgmt_handler_fn app_mgmt_transfer_leader;
app_mgmt_handler_fn app_mgmt_members_change;

/* WHALE_PIN (or unpin) of one user into every OMS shard: a new routing epoch
 * (app_mgmt_routes.c; users migrate --to uses it too). */
int app_mgmt_pin_propose(struct app_mgmt_call *a, uint64_t user, uint16_t shard, bool unpin);

#endif /* OMSD_APP_MGMT_INT_H */

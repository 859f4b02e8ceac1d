/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admin forwarding's pure parts (docs/appliance.md "Control socket", "Forwarding"): no
 * DPDK call, no clock, no allocation, so tests/unit/app runs them alone.
 *
 *   - The dedup table every member of a shard keeps of the forwarded commands it saw:
 *     (origin node, fwd_id) → pending at (index, term) on the leader that proposed it, or
 *     done with its outcome on every member that applied it. A re-send of a command that
 *     is already in the log is answered from it, never proposed again.
 *   - The origin's re-send policy: where the next FORWARDED_ADMIN goes, how often, and how
 *     many NOT_LEADER hints are followed before the command is answered not_leader.
 *   - The verdict of a control request once every command answered: the first command not
 *     ok, and the shards that committed.
 */
#ifndef OMSD_APP_APP_FWD_H
#define OMSD_APP_APP_FWD_H

#include <stdbool.h>
#include <stdint.h>

#define APP_FWD_SEEN_MAX 256            /* commands remembered per shard member (a ring) */
#define APP_FWD_MSG_MAX 88              /* the filled message kept: a wire_symbol_config */
#define APP_FWD_RESEND_NS (200ull * 1000000) /* no answer: send again after this */
#define APP_FWD_HOPS_MAX 4              /* NOT_LEADER hints followed per command */
#define APP_FWD_SILENT_MAX 2            /* sends to one node without an answer: try another */

enum app_fwd_seen_state {
	APP_FWD_FREE = 0,
	APP_FWD_PENDING = 1,   /* proposed by this member as leader, not applied yet (or a
				* member change or transfer it made, not settled yet) */
	APP_FWD_DONE = 2,      /* applied on this member: the outcome below */
};

/* One forwarded command a member saw. */
struct app_fwd_seen {
	uint64_t fwd_id;       /* the origin's id */
	uint32_t origin;       /* the origin node; 0 with state FREE */
	uint8_t state;         /* enum app_fwd_seen_state */
	uint8_t status;        /* DONE: enum wire_fwd_status (OK or REJECTED; a transfer BUSY) */
	uint16_t reason;       /* DONE: the ADMIN_REPLY's reason */
	uint64_t index;        /* log index of its entry (a transfer: 0) */
	uint64_t term;         /* term of its entry (a transfer: the term it started in) */
	uint64_t value;        /* DONE: the ADMIN_REPLY's value; PENDING transfer: the
				* cluster clock it started at */
	uint16_t msg_len;      /* DONE: bytes of msg kept (0: none) */
	uint8_t reserved[6];
	_Alignas(8) uint8_t msg[APP_FWD_MSG_MAX]; /* DONE: a SYMBOL_CONFIG as proposed */
};

struct app_fwd_seen_table {
	struct app_fwd_seen e[APP_FWD_SEEN_MAX];
	uint32_t next;         /* ring position the next new command takes */
	uint32_t member_waits; /* leader: forwarded member changes PENDING (at most this many;
				* app_admin_fwd.c looks for their commits only while non-zero) */
	uint32_t transfer_waits; /* leader (or the one it was): forwarded leadership
				  * transfers PENDING (at most this many; looked at only
				  * while non-zero; placement holds off while non-zero) */
};

/* The entry of (origin, fwd_id), or NULL. */
struct app_fwd_seen *app_fwd_seen_find(struct app_fwd_seen_table *t, uint32_t origin,
				       uint64_t fwd_id);
/* The entry of (origin, fwd_id), made (state FREE, the oldest one overwritten) when absent.
 * origin must not be 0. */
struct app_fwd_seen *app_fwd_seen_get(struct app_fwd_seen_table *t, uint32_t origin,
				      uint64_t fwd_id);

/* What the current leader does with a FORWARDED_ADMIN, given its entry (NULL: none). The
 * precondition is that this leader's state is current (it applied everything committed and
 * its commit index is in its term): every entry of an earlier term it will ever apply is
 * then applied, so a command not DONE here and not PENDING in this term was never
 * committed and is proposed (again). */
enum app_fwd_verdict {
	APP_FWD_PROPOSE = 1,   /* not in the log as far as this leader knows: propose it */
	APP_FWD_ANSWER = 2,    /* applied: answer with the outcome kept */
	APP_FWD_WAIT = 3,      /* proposed in this term: its answer comes when it applies */
};
enum app_fwd_verdict app_fwd_seen_verdict(const struct app_fwd_seen *e, uint64_t term);

/* A membership change (op: enum wire_member_op, the same values as enum cns_member_op) that
 * the configuration in effect already shows done, node being a voter and/or a learner
 * there: it is answered ok once that configuration commits and is never made again. So a
 * repeat (the operator's, after a lost answer) or a forwarded re-send that reaches a leader
 * which never saw the first send finds ok, not an error, and a change applies at most once. */
bool app_fwd_member_effected(uint32_t op, bool voter, bool learner);

/* Where a forwarded leadership transfer that this member started stands (thesis §3.10:
 * the leader brings `to` up to date, tells it to time out now, and gives up after an
 * election timeout, keeping the lead). */
enum app_fwd_transfer {
	APP_FWD_TRANSFER_WAIT = 1,   /* still running: ask again later */
	APP_FWD_TRANSFER_DONE = 2,   /* `to` leads: answer OK */
	APP_FWD_TRANSFER_FAILED = 3, /* this member leads after consensus gave it up (or again,
				      * in a later term): answer BUSY, nothing changed */
	APP_FWD_TRANSFER_FORGET = 4, /* another node leads, or none was heard of for too long:
				      * forgotten unanswered, so a re-send is decided by the
				      * leader it reaches (`to` answers OK: already so) */
};
/* What this member knows now: leader (0: none known), whether it leads and still in the
 * term the transfer started in; abandon_ns: when consensus has given the transfer up for
 * sure; forget_ns (>= abandon_ns): when an election it may have started is over. */
struct app_fwd_transfer_view {
	uint32_t to;            /* the node that is to lead, non-zero */
	uint32_t leader;        /* cns_leader, 0 when none is known */
	bool leads;             /* this member is the leader */
	bool same_term;         /* ... in the term the transfer started in */
	uint64_t now_ns;        /* cluster clock */
	uint64_t abandon_ns;    /* start + the election timeout's maximum + slack */
	uint64_t forget_ns;     /* start + a few election timeouts */
};
enum app_fwd_transfer app_fwd_transfer_state(const struct app_fwd_transfer_view *v);

/* The origin's state of one forwarded command (in its struct app_cmd). */
struct app_fwd_try {
	uint64_t id;           /* fwd_id: with the origin node, unique */
	uint32_t node;         /* where the last FORWARDED_ADMIN went, 0: none yet */
	uint32_t hops;         /* NOT_LEADER hints followed */
	uint32_t sends;        /* FORWARDED_ADMINs sent */
	uint32_t silent;       /* sends to node in a row without any answer */
	uint64_t next_ns;      /* clock of the next (re-)send; 0: at once */
};

enum app_fwd_act {
	APP_FWD_ACT_WAIT = 1,    /* nothing to send now */
	APP_FWD_ACT_SEND = 2,    /* send to t->node now */
	APP_FWD_ACT_GIVE_UP = 3, /* answer not_leader: the hints went round too often */
};

/* A send is due at now_ns (or not): guess is the leader this node believes in (0: none
 * known). SEND sets t->node, counts the send and schedules the next one; a guess that
 * stayed silent APP_FWD_SILENT_MAX times is reported with *rotate so the caller moves its
 * hint on (the guess is then asked again at the next resend). */
enum app_fwd_act app_fwd_due(struct app_fwd_try *t, uint64_t now_ns, uint32_t guess,
			     bool *rotate);
/* The node `from` answered NOT_LEADER naming `hint` (0: none known). Follows a new hint at
 * once, up to APP_FWD_HOPS_MAX times; without one waits for the next resend. */
enum app_fwd_act app_fwd_not_leader(struct app_fwd_try *t, uint64_t now_ns, uint32_t from,
				    uint32_t hint);
/* The leader answered BUSY (backpressure, a transfer, its state not current yet): retry at
 * the next resend. (A forwarded transfer's BUSY is final: app_admin_fwd.c.) */
void app_fwd_busy(struct app_fwd_try *t, uint64_t now_ns);

/* What a request's answer needs of each command (enum app_cmd_status, reason). */
struct app_fwd_outcome {
	uint16_t shard;        /* the command's target */
	uint32_t status;       /* enum app_cmd_status */
	uint16_t reason;       /* REJECTED: enum wire_reason */
};
/* The first command that makes the request fail (-1: none): any not ok, or with need_any
 * a REJECTED NOT_FOUND counts as fine but at least one must be ok. applied[] gets the
 * shards whose command committed and applied ok (each once, in order), at most cap. */
int app_fwd_verdict(const struct app_fwd_outcome *o, uint32_t n, bool need_any,
		    uint16_t *applied, uint32_t cap, uint32_t *applied_count);

#endif /* OMSD_APP_APP_FWD_H */

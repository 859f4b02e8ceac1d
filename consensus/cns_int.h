/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cns internals, shared by consensus/cns_*.c and the unit tests.
 */
#ifndef OMSD_CONSENSUS_CNS_INT_H
#define OMSD_CONSENSUS_CNS_INT_H

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cns.h"
#include "common/check.h"
#include "common/prng.h"

#define CNS_TERM_UNKNOWN UINT64_MAX
#define CNS_SLOT_NONE UINT32_MAX  /* self_slot of a node outside the configuration */
#define CNS_SCAN_MAX 4096u        /* bound on backward log scans (fast back-up hints) */
#define CNS_SEND_BUF_SIZE (sizeof(struct wire_install_snapshot) + WIRE_TAIL_MAX)

static_assert(sizeof(struct wire_append_entries) + WIRE_TAIL_MAX <= CNS_SEND_BUF_SIZE,
	      "send buffer holds a full AppendEntries");
static_assert(CNS_SNAPSHOT_CHUNK_MAX <= WIRE_TAIL_MAX, "snapshot chunk fits a tail");
static_assert(CNS_SNAPSHOT_CHUNK_MAX % 8 == 0, "snapshot chunks keep offsets 8-byte aligned");
static_assert(CNS_ENTRY_DATA_MAX % 8 == 0, "entry data stays 8-byte aligned");

/* Replication state of one follower, kept by the leader (Raft Figure 2 nextIndex,
 * matchIndex, plus the flow control of etcd's Progress). */
enum cns_peer_state {
	CNS_PEER_PROBE = 1,     /* one AppendEntries at a time until the logs match */
	CNS_PEER_REPLICATE = 2, /* pipelined: up to inflight_max AppendEntries in flight */
	CNS_PEER_SNAPSHOT = 3,  /* sending InstallSnapshot chunks */
};

struct cns_peer {
	uint32_t id;              /* node id */
	uint8_t state;            /* enum cns_peer_state */
	uint8_t vote_granted;     /* this election: granted us a (pre-)vote */
	uint16_t reserved;
	uint64_t next_index;      /* next entry to send (Raft nextIndex) */
	uint64_t match_index;     /* highest entry known replicated (Raft matchIndex): counted */
	uint64_t recv_index;      /* highest entry it holds matching ours (>= match_index; in
				   * disk mode it may not be durable yet): never re-sent */
	uint32_t inflight;        /* probe: an AppendEntries is out (replicate: next - 1 - recv) */
	uint8_t snap_probe;       /* snapshot: one chunk out after a gap, window after its ack */
	uint8_t reserved1[3];
	uint64_t last_send_ns;    /* when we last sent it anything */
	uint64_t last_ack_ns;     /* when it last answered in this term (check-quorum) */
	uint64_t progress_ns;     /* when its recv/match (or snapshot offset) last advanced or
				   * the window opened */
	uint64_t commit_sent;     /* commit index last sent to it */
	uint64_t seq_next;        /* seq of the next AppendEntries to it (from 1) */
	uint64_t seq_mark;        /* first seq of the current probe or pipeline run: rejections
				   * of older messages are stale */
	uint64_t snap_index;      /* snapshot being sent (its last index) */
	uint64_t snap_offset;     /* bytes acknowledged (the follower holds [0, snap_offset)) */
	uint64_t snap_sent;       /* next byte to send, snap_offset <= snap_sent <= len */
};

struct cns {
	struct cns_config cfg;       /* membership and tuning */
	struct cns_limits lim;       /* memory sizing */
	struct cns_env env;          /* log store, service, host */
	struct prng prng;            /* election timeouts */
	uint32_t majority;           /* voters / 2 + 1 in the configuration in effect */
	uint32_t self_slot;          /* our position in mem.ids / peers, or CNS_SLOT_NONE */

	/* Membership (thesis §4.1): the latest configuration in the log is in effect from when
	 * it is appended. Every configuration entry of a log but the last is committed (a
	 * leader appends one only when the previous one committed, and every log is a prefix
	 * of some leader's), so a truncation needs only the one before the latest. */
	struct cns_members mem;      /* in effect; peers are indexed like mem.ids */
	uint64_t mem_index;          /* its entry (0: bootstrap set; snapshot index: from one) */
	struct cns_members mem_prev; /* the configuration before it (committed) */
	uint64_t mem_prev_index;
	uint8_t mem_prev_known;      /* 0 after a snapshot install or a revert: never needed */
	uint8_t reserved_m[7];
	struct cns_members mem_applied; /* in effect at the applied index: snapshots carry it */
	uint64_t term_first_index;   /* leader: its term's first entry (UINT64_MAX: not yet) */

	/* Persistent state (Raft Figure 2), saved through log_ops.save_vote. */
	uint64_t term;               /* currentTerm */
	uint32_t vote;               /* votedFor in term, or CNS_NODE_NONE */

	/* Volatile state. */
	uint8_t role;                /* enum cns_role */
	uint8_t transfer_vote;       /* this election was started by TimeoutNow */
	uint8_t need_first_entry;    /* leader still owes its term's first entry */
	uint8_t reserved;
	uint32_t leader;             /* known leader of term, or CNS_NODE_NONE */
	uint64_t now_ns;             /* latest local clock seen */
	uint64_t commit;             /* commitIndex */
	uint64_t applied;            /* lastApplied */
	uint64_t applied_time_ns;    /* cluster time of the last applied entry */
	uint64_t durable;            /* log durable through here (a prefix of the log) */
	uint64_t last_index;         /* cached log_ops.last_index */
	uint64_t last_term;          /* its term */
	uint64_t last_time_ns;       /* its cluster time: the leader never stamps below it */
	uint64_t base_index;         /* entry before the first held one (compaction point) */
	uint64_t base_term;          /* its term */
	uint64_t base_time_ns;       /* its cluster time */
	uint64_t leader_match;       /* follower: log known to match the leader's through here */
	uint64_t match_acked;        /* follower: match index last acknowledged to the leader */

	/* Timers, on the local clock. */
	uint64_t election_deadline_ns; /* follower/candidate: start a (pre-)election */
	uint64_t leader_heard_ns;      /* last AppendEntries/snapshot from the leader */
	uint64_t leader_since_ns;      /* leader: when elected (check-quorum grace) */

	/* Leader. */
	struct cns_peer peers[CNS_MEMBERS_MAX]; /* indexed like cfg.members; self unused */
	uint32_t transfer_target;    /* leadership transfer in progress to, or NONE */
	uint32_t reserved1;
	uint64_t transfer_deadline_ns;
	uint64_t transfer_sent_ns;   /* last TimeoutNow sent (0: none yet) */

	/* Open batch of proposals (leader), sealed into one NORMAL entry. */
	uint8_t *batch;              /* batch_bytes_max bytes */
	uint32_t batch_len;          /* bytes used */
	uint32_t batch_msgs;         /* messages in it */

	/* Snapshots: the node's base, and one being received. */
	struct cns_snapshot_meta snap;   /* current snapshot (len 0 and index 0: none) */
	uint8_t *snap_buf;               /* its bytes */
	struct cns_snapshot_meta recv;   /* snapshot being received (len = total) */
	uint64_t recv_offset;            /* bytes received so far */
	uint8_t *recv_buf;
	/* An asynchronous snapshot being written by the host (cns_snapshot_begin/end). */
	struct cns_snapshot_meta take;   /* index 0: none pending */
	uint8_t *take_buf;               /* NULL without CNS_LIM_SNAP_ASYNC */

	uint8_t *send_buf;           /* outgoing message with a tail */
	/* Snapshot buffers hold the configuration prefix and the service's bytes. */
	uint64_t counters[CNS_C_COUNT];
};

#define CNS_COUNT(c, name) ((c)->counters[CNS_C_##name]++)
#define CNS_ADD(c, name, n) ((c)->counters[CNS_C_##name] += (n))

/* Messaging primitives, inline so every file uses them without depending on another. */

/* Slot of member id in mem.ids (and peers), or -1. */
static inline int
cns_slot_of(const struct cns *c, uint32_t id)
{
	for (uint32_t i = 0; i < c->mem.count; i++)
		if (c->mem.ids[i] == id)
			return (int)i;
	return -1;
}

/* The member in slot i votes (is not a learner). */
static inline bool
cns_slot_votes(const struct cns *c, uint32_t i)
{
	return i < c->mem.count && (c->mem.learners & (1u << i)) == 0;
}

static inline bool
cns_self_votes(const struct cns *c)
{
	return c->self_slot != CNS_SLOT_NONE && cns_slot_votes(c, c->self_slot);
}

/* The leader's progress record of follower id, or NULL when id is not a member (a reply
 * from a member removed since, or from a stranger). */
static inline struct cns_peer *
cns_peer_find(struct cns *c, uint32_t id)
{
	int slot = cns_slot_of(c, id);
	if (slot < 0 || (uint32_t)slot == c->self_slot)
		return NULL;
	return &c->peers[slot];
}

/* Hand one message to the host (copied before it returns). */
static inline void
cns_send(struct cns *c, uint32_t to, const void *msg)
{
	DCHECK(to != c->cfg.self);
	c->env.host.send(c->env.host.ctx, to, (const struct wire_msg_hdr *)msg);
}

/* cns_log.c: the core's view of its log. */
uint64_t cns_log_term(const struct cns *c, uint64_t index);
const struct wire_entry_hdr *cns_log_entry(const struct cns *c, uint64_t index);
int cns_log_append(struct cns *c, const struct wire_entry_hdr *hdr, const void *data);
void cns_log_truncate(struct cns *c, uint64_t index);
void cns_log_compact(struct cns *c, uint64_t index);
void cns_log_reset_to(struct cns *c, uint64_t index, uint64_t term, uint64_t time_ns);
void cns_log_refresh(struct cns *c);
bool cns_log_up_to_date(const struct cns *c, uint64_t last_index, uint64_t last_term);

/* cns_append.c: the leader's side of its own log (nothing sent). */
uint64_t cns_stamp(const struct cns *c);
int cns_leader_append(struct cns *c, uint16_t kind, const void *data, uint32_t len);
void cns_append_first_entry(struct cns *c);
void cns_seal_batch(struct cns *c);
void cns_maybe_tick_entry(struct cns *c);

/* cns_progress.c: what the leader sends each follower next; the commit rule. */
void cns_send_heartbeat(struct cns *c, struct cns_peer *p);
void cns_send_append(struct cns *c, struct cns_peer *p); /* entries, or the snapshot */
bool cns_window_open(const struct cns *c, const struct cns_peer *p);
void cns_replicate_peer(struct cns *c, struct cns_peer *p);
void cns_replicate_all(struct cns *c);
void cns_leader_commit(struct cns *c);
void cns_snapshot_follow(struct cns *c, struct cns_peer *p);
void cns_snapshot_fill(struct cns *c, struct cns_peer *p);
void cns_snapshot_probe(struct cns *c, struct cns_peer *p, uint64_t offset);
void cns_snapshot_start(struct cns *c, struct cns_peer *p);

/* cns_members.c: the configuration in effect, its entries, snapshots' prefix, the
 * progress records that follow the members. */
void cns_peer_init(struct cns *c, struct cns_peer *p, uint32_t id);
uint32_t cns_members_voters(const struct cns_members *m);
bool cns_members_decode(const void *data, uint32_t len, struct cns_members *out);
void cns_members_encode(const struct cns_members *m, struct cns_config_entry *ce);
void cns_members_bootstrap(const struct cns *c, struct cns_members *out);
void cns_members_set(struct cns *c, const struct cns_members *m, uint64_t index);
void cns_members_appended(struct cns *c, uint64_t index, const struct wire_entry_hdr *e,
			  const void *data);
void cns_members_truncated(struct cns *c, uint64_t index);
int cns_snap_split(const struct cns *c, const uint8_t *blob, uint64_t len,
		   struct cns_members *members, uint64_t *svc_off);

/* cns_role.c: role transitions and the persistent term and vote. */
void cns_save_term_vote(struct cns *c, uint64_t term, uint32_t vote);
void cns_reset_election_timer(struct cns *c);
bool cns_lease_active(const struct cns *c);
void cns_become_follower(struct cns *c, uint64_t term, uint32_t leader);
void cns_become_leader(struct cns *c);

/* cns_elect.c */
void cns_start_pre_vote(struct cns *c);
void cns_start_election(struct cns *c, bool transfer);
void cns_on_request_vote(struct cns *c, const struct wire_request_vote *m);
void cns_on_vote_reply(struct cns *c, const struct wire_vote_reply *m);
void cns_on_timeout_now(struct cns *c, const struct wire_timeout_now *m);

/* cns_replicate.c: AppendEntries and its replies, the leader's tick. */
void cns_leader_tick(struct cns *c);
void cns_on_append_entries(struct cns *c, const struct wire_append_entries *m);
void cns_on_append_reply(struct cns *c, const struct wire_append_reply *m);
void cns_follower_ack(struct cns *c);

/* cns_snapshot.c: taking, receiving, installing and restoring snapshots. */
void cns_on_install_snapshot(struct cns *c, const struct wire_install_snapshot *m);
void cns_on_snapshot_reply(struct cns *c, const struct wire_snapshot_reply *m);
int cns_snapshot_restore(struct cns *c, const struct cns_snapshot_meta *meta, const void *data);

static inline bool
cns_is_self(const struct cns *c, uint32_t id)
{
	return id == c->cfg.self;
}

#endif

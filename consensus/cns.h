/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cns — the Raft core of one shard member (ARCHITECTURE.md §4).
 *
 * A pure, deterministic state machine. Everything enters as a call with the caller's clock:
 *
 *   cns_step(c, now, msg)       a Raft message from a peer (REQUEST_VOTE .. TIMEOUT_NOW)
 *   cns_tick(c, now)            the node's local clock moved: timers, batching, heartbeats
 *   cns_propose(c, now, msg)    an ingress message to replicate (leader; batched per entry)
 *   cns_durable(c, idx, term)   the log store made the log durable through idx
 *   cns_apply(c, max)           apply up to max committed entries to the hosted service
 *   cns_snapshot_take(c)        snapshot the service at the applied index, compact the log
 *   cns_transfer(c, now, to)    hand leadership to another member (TimeoutNow)
 *   cns_member_change(c, now, op, node)  add a learner, promote it, remove a member
 *                               (one server at a time, thesis §4.1-4.2)
 *
 * and everything leaves through the caller's interfaces: messages to send go to
 * cns_host.send (copied before it returns), entries to persist go to the log store
 * (cns_log_ops.append/truncate/compact/save_vote), committed entries go to the service
 * (svc_ops.apply/tick with the entry's index and cluster time), snapshots that become the
 * node's base go to cns_host.snapshot_saved.
 *
 * No clock, randomness, allocation or I/O inside: election timeouts come from a prng seeded
 * by configuration, memory is the caller's (cns_footprint, cns_init), so a host can run any
 * number of members of any number of shards in one thread and replay them exactly.
 */
#ifndef OMSD_CONSENSUS_CNS_H
#define OMSD_CONSENSUS_CNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/service.h"
#include "common/wire.h"

#define CNS_MEMBERS_MAX 5     /* voters and learners of a shard together */
#define CNS_NODE_NONE 0u      /* no node (node ids are non-zero) */
/* The largest entry data: one entry alone must fit an AppendEntries tail. */
#define CNS_ENTRY_DATA_MAX (WIRE_TAIL_MAX - (uint32_t)sizeof(struct wire_entry_hdr))
/* InstallSnapshot chunks: the largest (and default) chunk, and the most chunks in flight. */
#define CNS_SNAPSHOT_CHUNK_MAX WIRE_TAIL_MAX
#define CNS_SNAPSHOT_INFLIGHT_MAX 64
/* Named bounds for a host's duty cycle (STYLE.md §3). */
#define CNS_INGRESS_DRAIN_MAX 256 /* ingress messages proposed per cycle */
#define CNS_APPLY_DRAIN_MAX 256   /* entries applied per cycle (cns_apply max) */

enum cns_role {
	CNS_FOLLOWER = 1,
	CNS_PRE_CANDIDATE = 2, /* asking for pre-votes, term not yet bumped (thesis §9.6) */
	CNS_CANDIDATE = 3,
	CNS_LEADER = 4,
};

/* wire_entry_hdr.kind */
enum cns_entry_kind {
	CNS_ENTRY_NORMAL = 1, /* a batch of ingress messages */
	CNS_ENTRY_TICK = 2,   /* no data: cluster time moved (idle leader) */
	CNS_ENTRY_CONFIG = 3, /* membership (struct cns_config_entry); first entry of a log */
	CNS_ENTRY_NOOP = 4,   /* a new leader's first entry of its term (thesis §6.4) */
};

/* When a member counts towards a majority for an entry (ARCHITECTURE.md §4). */
enum cns_durability {
	CNS_DURABLE_MEMORY = 1, /* it holds the entry in memory (Aeron's default) */
	CNS_DURABLE_DISK = 2,   /* its log store reported the entry durable */
};

/* Counters: single writer (the shard lcore), read by mgmt. */
#define CNS_COUNTERS(X)                                                                    \
	X(PRE_VOTES_STARTED, "pre-vote rounds started")                                   \
	X(ELECTIONS_STARTED, "elections started (term bumped)")                           \
	X(LEADER_ELECTED, "times this node became leader")                                \
	X(STEP_DOWNS, "leader or candidate stepped down")                                 \
	X(CHECK_QUORUM_LOST, "leader stepped down: no majority heard")                    \
	X(VOTES_GRANTED, "votes and pre-votes granted")                                   \
	X(VOTES_IGNORED_LEASE, "vote requests ignored: a leader was heard recently")      \
	X(APPEND_SENT, "AppendEntries sent")                                              \
	X(APPEND_RECV, "AppendEntries received")                                          \
	X(APPEND_REJECTED, "AppendEntries rejected (log mismatch)")                       \
	X(ENTRIES_APPENDED, "entries written to the log store")                           \
	X(ENTRIES_TRUNCATED, "conflicting entries removed")                               \
	X(ENTRIES_COMMITTED, "commit index advance, in entries")                          \
	X(ENTRIES_APPLIED, "entries applied to the service")                              \
	X(MSGS_APPLIED, "messages applied to the service")                                \
	X(LOG_FULL, "append refused by the log store")                                    \
	X(PROPOSALS, "ingress messages accepted")                                         \
	X(PROPOSALS_NOT_LEADER, "ingress refused: not leader")                            \
	X(PROPOSALS_BACKPRESSURE, "ingress refused: too much uncommitted / log full")     \
	X(BATCHES_SEALED, "normal entries created from batches")                          \
	X(TICK_ENTRIES, "tick entries appended by an idle leader")                        \
	X(SNAPSHOTS_TAKEN, "snapshots taken")                                             \
	X(SNAPSHOT_CHUNKS_SENT, "InstallSnapshot chunks sent")                            \
	X(SNAPSHOTS_INSTALLED, "snapshots installed from a leader")                       \
	X(TRANSFERS, "leadership transfers started")                                      \
	X(TIMEOUT_NOW_SENT, "TimeoutNow sent")                                            \
	X(STALE_MSGS, "messages from an older term, or replies to superseded messages")    \
	X(MALFORMED, "entries refused from a leader: bad length, kind, term or time")    \
	X(DURABLE_REPORTS_STALE, "durability reports for entries no longer in the log")    \
	X(CONFIG_CHANGES, "configuration entries appended by this node as leader")       \
	X(CONFIG_REVERTED, "uncommitted configurations undone by a truncation or snapshot")

enum cns_counter {
#define CNS_COUNTER_ENUM(name, text) CNS_C_##name,
	CNS_COUNTERS(CNS_COUNTER_ENUM)
#undef CNS_COUNTER_ENUM
	CNS_C_COUNT,
};

const char *cns_counter_name(enum cns_counter counter);

/* The log store. The core writes through it and reads entries back for replication and
 * apply; durability of appended entries is reported back with cns_durable(). An entry is
 * stored as a wire_entry_hdr immediately followed by data_len bytes (8-byte aligned), the
 * same layout as in an AppendEntries tail. */
struct cns_log_ops {
	/* Append the entry at index last_index()+1. 0, or -ENOSPC (store full, nothing written). */
	int (*append)(void *store, uint64_t index, const struct wire_entry_hdr *hdr,
		      const void *data);
	/* Remove the entries at index and after (first_index() <= index <= last_index()). */
	void (*truncate)(void *store, uint64_t index);
	/* Remove the entries at index and before. When index >= last_index() the store becomes
	 * empty and the next append is at index + 1. */
	void (*compact)(void *store, uint64_t index);
	/* The entry at index, first_index() <= index <= last_index(); data follows the header. */
	const struct wire_entry_hdr *(*entry)(const void *store, uint64_t index);
	/* First held index (last_index()+1 when empty) and last held index (the compaction
	 * point when empty). */
	uint64_t (*first_index)(const void *store);
	uint64_t (*last_index)(const void *store);
	/* Record the hard state (Raft Figure 2: currentTerm, votedFor). Must be durable when it
	 * returns: a vote is never sent before its record is. */
	void (*save_vote)(void *store, uint64_t term, uint32_t vote);
};

/* Snapshot metadata (Raft §7: last included index and term) plus the cluster time of that
 * entry, so time continues from it after a restore. */
struct cns_snapshot_meta {
	uint64_t index;   /* last entry the snapshot covers */
	uint64_t term;    /* its term */
	uint64_t time_ns; /* its cluster time */
	uint64_t len;     /* snapshot bytes */
};

/* The host side of a member. */
struct cns_host {
	void *ctx;
	/* Send msg (hdr.length bytes) to member `to`; copy it before returning. Loss is fine. */
	void (*send)(void *ctx, uint32_t to, const struct wire_msg_hdr *msg);
	/* A snapshot became this node's base (taken or installed). The host persists it before
	 * returning (the log store compacts behind it next). May be NULL in tests. */
	void (*snapshot_saved)(void *ctx, const struct cns_snapshot_meta *meta,
			       const void *data);
};

/* Sizes the caller's memory. */
struct cns_limits {
	uint32_t snapshot_bytes_max; /* largest service snapshot (two buffers are kept) */
	uint32_t flags;              /* CNS_LIM_* */
};

/* cns_limits.flags */
#define CNS_LIM_SNAP_ASYNC 0x1u /* a third snapshot buffer, for cns_snapshot_begin/end */

/* cns_config.flags */
#define CNS_CFG_JOIN 0x1u /* a new node: no configuration of its own; it waits for a leader
			   * to send it the log (or a snapshot) after adding it as a learner,
			   * and takes the configuration from there; until then it never
			   * stands and grants no vote */

struct cns_config {
	uint16_t shard;                     /* hdr.shard of every message */
	uint16_t reserved;
	uint32_t self;                      /* this member's node id, non-zero */
	/* The bootstrap set: the voters of a new shard's first CONFIG entry (1, 3 or 5, self
	 * among them). Once the log or a snapshot holds a configuration, that one is in
	 * effect and these are not looked at (0 with CNS_CFG_JOIN). */
	uint32_t member_count;
	uint32_t members[CNS_MEMBERS_MAX];
	uint32_t durability;                /* enum cns_durability */
	uint64_t election_timeout_min_ns;   /* randomized in [min, max] (Raft §5.2) */
	uint64_t election_timeout_max_ns;
	uint64_t heartbeat_ns;              /* leader's idle AppendEntries interval */
	uint64_t tick_entry_ns;             /* idle leader appends a TICK entry; 0: never */
	uint32_t batch_bytes_max;           /* entry data, <= CNS_ENTRY_DATA_MAX */
	uint32_t append_entries_max;        /* entries per AppendEntries */
	uint32_t inflight_max;              /* AppendEntries in flight per follower */
	uint32_t uncommitted_max;           /* proposals refused beyond this many entries */
	uint32_t log_keep_entries;          /* entries kept behind a snapshot for laggards */
	uint32_t snapshot_chunk_bytes;      /* InstallSnapshot data per message, multiple of 8,
					     * <= CNS_SNAPSHOT_CHUNK_MAX (fit it to the MTU) */
	uint32_t snapshot_inflight_max;     /* chunks in flight per follower, 1..64 */
	uint32_t flags;                     /* CNS_CFG_* */
	uint64_t seed;                      /* election timeout generator */
};

/* Fill a configuration with workable defaults for the given members. */
void cns_config_default(struct cns_config *cfg, uint16_t shard, uint32_t self,
			uint32_t member_count, const uint32_t *members);

/* Everything a member is connected to. */
struct cns_env {
	const struct cns_log_ops *log_ops;
	void *log;                  /* the log store */
	const struct svc_ops *svc_ops;
	void *svc;                  /* the hosted service */
	struct svc_sink *sink;      /* egress of applied entries (host discards on followers) */
	struct cns_host host;
};

/* What survived a restart: the hard state and the last saved snapshot. */
struct cns_boot {
	uint64_t term;                          /* saved by save_vote */
	uint32_t vote;
	uint32_t reserved;
	const struct cns_snapshot_meta *snapshot; /* NULL: none */
	const void *snapshot_data;
};

struct cns;

size_t cns_footprint(const struct cns_limits *limits);
/* Initialise a member in memory (cns_footprint bytes, 64-byte aligned). The log store must
 * hold only what it held durably (on a restart), contiguous after the boot snapshot; the
 * service must be empty (a boot snapshot is restored into it). 0 or -EINVAL. */
int cns_init(struct cns **out, void *memory, const struct cns_limits *limits,
	     const struct cns_config *config, const struct cns_env *env,
	     const struct cns_boot *boot);

/* A Raft message for this shard from a peer (validated by wire_msg_check). 0, or -EINVAL
 * for a wrong shard, type or length, or a sender 0 or itself (a sender outside the
 * configuration is taken: a leader may be ahead of this member's configuration). */
int cns_step(struct cns *c, uint64_t now_ns, const struct wire_msg_hdr *msg);
/* The local clock moved (call at least every heartbeat/4). Seals the open batch. */
void cns_tick(struct cns *c, uint64_t now_ns);
/* Replicate one ingress message (msg->length bytes, already validated by the host's
 * decoder: wire_frame_decode/wire_msg_check; DCHECKed here). Batched into
 * the open entry; the entry is sealed by cns_tick/cns_flush or when full. Returns 0,
 * -EPERM (not leader: NAK NOT_LEADER with cns_leader() as the hint), -EBUSY (leadership
 * transfer in progress), -EAGAIN (backpressure: uncommitted window or log store full),
 * -EMSGSIZE, -EINVAL (length not a multiple of 8). */
int cns_propose(struct cns *c, uint64_t now_ns, const struct wire_msg_hdr *msg);
/* Seal the open batch into an entry and replicate now. */
void cns_flush(struct cns *c, uint64_t now_ns);
/* The log store made everything through (index, term) durable (writes complete in order). */
void cns_durable(struct cns *c, uint64_t index, uint64_t term);
/* Apply up to max committed entries to the service. Returns entries applied. */
uint32_t cns_apply(struct cns *c, uint32_t max);
/* Snapshot the service at the applied index, hand it to host.snapshot_saved, compact the
 * log behind it. 0, -EALREADY (nothing applied since the last one), -ENOSPC (too big). */
int cns_snapshot_take(struct cns *c);
/*
 * A snapshot serialised somewhere else while the node goes on (CNS_LIM_SNAP_ASYNC): the
 * host of a big service hands the state as it is now to another process (a fork's
 * copy-on-write image) instead of stalling the node while it serialises.
 *
 * cns_snapshot_begin fixes the snapshot's index (the applied one), term, cluster time and
 * configuration and gives the buffer the service's bytes go to (*buf, *cap: the third
 * buffer, past the configuration prefix, which begin writes). The host must write there
 * svc_ops.snapshot of the state at exactly that index — before it applies anything more —
 * and then call cns_snapshot_end with the bytes written (0: it failed). Between the two
 * the node applies, replicates, votes and installs snapshots as usual; the log keeps
 * everything after the current base until end compacts it. begin: 0, -EALREADY (nothing
 * applied since the base), -EBUSY (one is pending), -ENOTSUP (no third buffer).
 * end: 0 (the snapshot is the base now: host.snapshot_saved, the log compacted behind it),
 * -ESTALE (a snapshot installed meanwhile covers more: this one is dropped), -ENOSPC (len
 * 0: the service did not fit, or the host's serialisation failed), -EINVAL (none pending
 * or len beyond the buffer). Either way nothing is pending afterwards.
 */
int cns_snapshot_begin(struct cns *c, void **buf, size_t *cap);
int cns_snapshot_end(struct cns *c, size_t len);
/* The index of the pending asynchronous snapshot, 0 when none is. */
uint64_t cns_snapshot_pending(const struct cns *c);
/* Leader: transfer leadership to member `target` (thesis §3.10). 0, -EPERM, -EINVAL. */
int cns_transfer(struct cns *c, uint64_t now_ns, uint32_t target);

enum cns_role cns_role(const struct cns *c);
uint64_t cns_term(const struct cns *c);
uint32_t cns_leader(const struct cns *c);           /* known leader, or CNS_NODE_NONE */
uint32_t cns_self(const struct cns *c);
uint64_t cns_commit_index(const struct cns *c);
uint64_t cns_applied_index(const struct cns *c);
uint64_t cns_applied_time(const struct cns *c);     /* cluster time of the last applied */
uint64_t cns_last_index(const struct cns *c);
uint64_t cns_last_term(const struct cns *c);
uint64_t cns_durable_index(const struct cns *c);
const struct cns_snapshot_meta *cns_snapshot(const struct cns *c, const void **data);
uint64_t cns_counter(const struct cns *c, enum cns_counter counter);
/* Leader only: the highest entry known replicated on member `node` (Raft Figure 2
 * matchIndex; for the leader itself what counts towards commit: its last index, or its
 * durable index under CNS_DURABLE_DISK). UINT64_MAX when this member is not the leader or
 * node is not a member. A read-only view for mgmt (lag = cns_last_index - match). */
uint64_t cns_match_index(const struct cns *c, uint32_t node);
/* Term of the entry at index, or UINT64_MAX when the log no longer (or not yet) holds it. */
uint64_t cns_term_at(const struct cns *c, uint64_t index);

/* A shard's configuration: voters count towards elections and commit; learners receive
 * the log and never vote (thesis §4.2.1: a new server catches up as a learner first). */
struct cns_members {
	uint32_t count;                  /* voters + learners, 0..CNS_MEMBERS_MAX */
	uint32_t learners;               /* bit i set: ids[i] is a learner */
	uint32_t ids[CNS_MEMBERS_MAX];   /* node ids, distinct, non-zero */
};

/* Membership changes, one server at a time (thesis §4.1). */
enum cns_member_op {
	CNS_MEMBER_ADD = 1,     /* add a new node as a learner */
	CNS_MEMBER_PROMOTE = 2, /* a caught-up learner becomes a voter */
	CNS_MEMBER_REMOVE = 3,  /* remove a learner or a voter (the leader itself too) */
};

/* Leader: append a configuration entry that applies op to node. It is in effect on each
 * member from when the member appends it (thesis §4.1) and done when committed
 * (cns_members() index <= cns_commit_index()). A leader that removes itself keeps leading
 * until that entry commits, then hands over to the most up-to-date voter and steps down.
 * 0, or -EPERM (not leader), -EBUSY (the previous change or this term's first entry is not
 * committed yet, or a leadership transfer is under way), -EINVAL (adding a member, promoting
 * a voter or a non-member, removing a non-member or the last voter, node 0), -ENOSPC
 * (CNS_MEMBERS_MAX members already), -EAGAIN (promote: the learner is more than
 * append_entries_max entries behind; add: the log store is full). */
int cns_member_change(struct cns *c, uint64_t now_ns, enum cns_member_op op, uint32_t node);
/* The configuration in effect (the latest in the log, committed or not); returns the index
 * of its entry (0: the bootstrap set, not logged yet). */
uint64_t cns_members(const struct cns *c, struct cns_members *out);
/* node is a voter / a learner in the configuration in effect. */
bool cns_is_voter(const struct cns *c, uint32_t node);
bool cns_is_learner(const struct cns *c, uint32_t node);

/* Data of a CONFIG entry (consensus-private; services never see it). The first 24 bytes
 * are the layout of the static-membership version (learners were reserved zeros), so a
 * stored entry of that version reads as all voters. */
struct cns_config_entry {
	uint32_t member_count;
	uint32_t members[CNS_MEMBERS_MAX];
	uint32_t learners;               /* bit i: members[i] is a learner */
	uint32_t reserved;               /* zero */
};
static_assert(sizeof(struct cns_config_entry) == 32, "cns_config_entry");
static_assert(offsetof(struct cns_config_entry, learners) == 24, "static-membership prefix");

/* Snapshots begin with the configuration at their index (Raft §7: the snapshot holds the
 * latest configuration as of its last included index), then the service's bytes. A snapshot
 * without this prefix (written before membership changes) is all service bytes and its
 * configuration is the bootstrap set. */
#define CNS_SNAP_MAGIC UINT64_C(0x31474643534e4d43) /* "CMNSCFG1" little-endian */
struct cns_snap_prefix {
	uint64_t magic;                  /* CNS_SNAP_MAGIC */
	struct cns_config_entry config;
};
static_assert(sizeof(struct cns_snap_prefix) == 40, "cns_snap_prefix");

/* ---------------------------------------------------------------------------------------
 * The in-memory log store: entries in a ring of slots plus a byte ring, both over caller
 * memory; compaction frees space at the head. The hard state is kept in it too.
 * ------------------------------------------------------------------------------------- */

struct cns_memlog_limits {
	uint32_t entries_max; /* entries held at once */
	uint32_t bytes_max;   /* header + data bytes held at once (multiple of 8) */
};

struct cns_memlog;

extern const struct cns_log_ops cns_memlog_ops;

size_t cns_memlog_footprint(const struct cns_memlog_limits *limits);
int cns_memlog_init(struct cns_memlog **out, void *memory,
		    const struct cns_memlog_limits *limits);
uint64_t cns_memlog_term(const struct cns_memlog *m);   /* saved hard state */
uint32_t cns_memlog_vote(const struct cns_memlog *m);
uint32_t cns_memlog_count(const struct cns_memlog *m);  /* entries held */
uint32_t cns_memlog_bytes(const struct cns_memlog *m);  /* bytes held (incl. wrap waste) */

#endif

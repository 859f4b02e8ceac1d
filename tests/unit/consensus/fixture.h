/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fixture that hosts 1..5 members (some of them joining nodes) in one process over a FIFO in-memory network the test
 * controls message by message (canonical/raft's fixture), with safety checked after every
 * delivery and tick: one leader per term, committed prefixes equal, equal state hashes at
 * equal applied index, service time equal to the applied entry's time.
 */
#ifndef OMSD_TEST_CNS_FIXTURE_H
#define OMSD_TEST_CNS_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "consensus/cns_int.h"

#define FX_NODES 5
#define FX_QUEUE 2048
#define FX_BLOB 20000 /* service state bytes: snapshots take 3 chunks */

/* The test service: a sum of applied values and a blob derived from it. */
struct fx_svc {
	uint64_t sum;          /* sum of applied transfer amounts */
	uint64_t msgs;         /* messages applied */
	uint64_t ticks;        /* tick/noop entries */
	uint64_t last_index;   /* last entry index seen */
	uint64_t last_time_ns; /* last entry time seen */
	uint64_t time_back;    /* times time went backwards (must stay 0) */
	uint8_t blob[FX_BLOB]; /* state bulk */
};

/* The default cns_limits.snapshot_bytes_max: the service image with room to spare. */
#define FX_SNAP_MAX (sizeof(struct fx_svc) + 64)

struct fx_msg {
	uint32_t from;
	uint32_t to;
	uint64_t buf[(CNS_SEND_BUF_SIZE + 8) / 8];
};

struct fx;
typedef bool(fx_drop_fn)(struct fx *f, uint32_t from, uint32_t to,
			 const struct wire_msg_hdr *msg);

struct fx_node {
	struct cns *c;
	void *mem;
	struct cns_memlog *log;
	void *logmem;
	struct fx_svc svc;
	bool up;
	int64_t skew_ns;  /* local clock = fx.now + skew */
	uint64_t durable_reported; /* disk mode: last index reported durable */
	bool disk_stalled; /* disk mode: no durability reports (a slow disk) */
	/* What host.snapshot_saved was handed last (the node's durable base). */
	uint32_t saved_count;               /* snapshot_saved calls since fx_init */
	struct cns_snapshot_meta saved_meta; /* the last one's meta */
	uint8_t saved[FX_SNAP_MAX + sizeof(struct cns_snap_prefix)]; /* and its bytes */
};

struct fx {
	uint32_t n;
	struct fx_node nodes[FX_NODES];
	struct cns_config cfg;
	struct cns_limits lim;
	struct cns_memlog_limits ll;
	struct fx_msg *q;       /* FX_QUEUE messages, FIFO */
	uint32_t q_head;
	uint32_t q_len;
	bool cut[FX_NODES][FX_NODES];
	fx_drop_fn *drop;       /* extra filter, may be NULL */
	bool auto_durable;      /* disk mode: report durability on every step */
	uint64_t now;           /* fixture time */
	uint32_t leader_of_term[1024];
	uint64_t dropped;
	/* Everything the members emitted (before cuts and drops), to count messages. */
	uint64_t sent[FX_NODES][FX_NODES];         /* messages from -> to */
	uint64_t sent_type[FX_NODES][WIRE_TYPE_LIMIT]; /* messages by sender and type */
	uint64_t sent_entries[FX_NODES][FX_NODES]; /* entries inside AppendEntries from -> to */
};

/* n nodes, all voters. Here and in fx_init_join node memory is sized for CNS_LIM_SNAP_ASYNC
 * whatever f->lim says, so a test may set f->lim.flags and fx_reconfigure. */
void fx_init(struct fx *f, uint32_t n, uint32_t durability);
/* n nodes of which the first `voters` are the bootstrap set; the others boot as joining
 * nodes (CNS_CFG_JOIN, no members) that wait for a leader to add them. */
void fx_init_join(struct fx *f, uint32_t voters, uint32_t n, uint32_t durability);
/* Restart node i over its log store as it is, from snapshot snap (NULL: none); its
 * service starts empty. Returns cns_init's result (the node is up when 0). */
int fx_restart(struct fx *f, uint32_t i, const struct cns_snapshot_meta *snap, const void *data);
/* cns_member_change on node i at its local clock, then the safety checks. */
int fx_change(struct fx *f, uint32_t i, enum cns_member_op op, uint32_t node);
/* Re-init every node after changing f->cfg (before anything ran). */
void fx_reconfigure(struct fx *f);
void fx_fini(struct fx *f);
uint64_t fx_local(const struct fx *f, uint32_t i);
/* Queue msg from -> to at the tail, as if just sent (for duplication and reordering). */
void fx_inject(struct fx *f, uint32_t from, uint32_t to, const struct wire_msg_hdr *msg);
/* Deliver the oldest queued message. false when the queue is empty. */
bool fx_deliver_one(struct fx *f);
/* Deliver until the queue is empty. Returns messages delivered. */
uint32_t fx_deliver_all(struct fx *f);
/* Advance time by ms milliseconds in 1 ms steps: tick every live node, deliver, apply. */
void fx_run_ms(struct fx *f, uint32_t ms);
/* Make node i campaign now (its election timer fires) and deliver everything. */
void fx_campaign(struct fx *f, uint32_t i);
/* The live leader with the highest term, or -1. */
int fx_leader(const struct fx *f);
/* Isolate node i (both directions) or heal it. */
void fx_isolate(struct fx *f, uint32_t i, bool on);
void fx_heal(struct fx *f);
/* Propose a transfer of amount through node i. Returns cns_propose's result. */
int fx_propose(struct fx *f, uint32_t i, uint64_t amount);
/* Apply everything committed on every live node. */
void fx_apply_all(struct fx *f);
/* Report everything durable on node i (disk mode). */
void fx_durable(struct fx *f, uint32_t i);
/* Safety after each event (cr_assert on violation). */
void fx_check(struct fx *f);

#endif

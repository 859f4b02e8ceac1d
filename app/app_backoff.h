/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bridge's re-drive schedule (docs/appliance.md "Bridge"): every PENDING saga is re-sent
 * to the ME after bridge_redrive_ms, then after twice that, four times, ... up to the
 * ceiling bridge_redrive_max_ms, and then every ceiling for as long as it stays PENDING
 * (never given up: the ME's dedup makes every repeat safe, docs/me-contract.md). The
 * schedule restarts when a saga leaves the queue (its ME answer was applied) and when the
 * queue is rebuilt after a change of leader.
 *
 * Pure: no DPDK, no clock (times are the caller's cluster time), no allocation after init
 * (the caller hands in app_rdq_footprint bytes). Unit-tested in tests/unit/app.
 */
#ifndef OMSD_APP_APP_BACKOFF_H
#define OMSD_APP_APP_BACKOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"

struct app_backoff {
	uint64_t base_ns;   /* first wait: [timers] bridge_redrive_ms */
	uint64_t max_ns;    /* ceiling: [timers] bridge_redrive_max_ms, >= base_ns */
};

/* The wait after a saga's sends-th re-send (0: after it was first seen): base_ns << sends,
 * at most max_ns. */
uint64_t app_backoff_interval(const struct app_backoff *b, uint32_t sends);
/* Re-sends the schedule makes within t_ns of a saga's first sighting (the count a pass
 * every base_ns reaches at most): for tests and the bound in the docs. */
uint32_t app_backoff_sends_within(const struct app_backoff *b, uint64_t t_ns);

/* One saga in the queue. */
struct app_rdq_ent {
	struct wire_oid id;  /* SUBMIT oid or modify req; id.user == 0: free slot */
	uint64_t due_ns;     /* cluster time of its next re-send */
	uint32_t sends;      /* re-sends since it was first seen (or the queue was rebuilt) */
	uint32_t reserved;
};

/* One generation of the queue: an open-addressing table and the slots it uses. */
struct app_rdq_gen {
	struct app_rdq_ent *ent;  /* cap slots */
	uint32_t *used;           /* indexes of the slots in use (cleared at the next swap) */
	uint32_t used_count;
};

/* The re-drive queue. A pass visits every PENDING saga once (the service's state is the
 * queue; this is only its schedule): each is looked up in the previous generation and
 * written to the next, so a saga the pass does not visit (answered) is forgotten at the
 * swap. Memory is fixed: two tables of cap >= 2 x sagas_max slots. A saga that finds no
 * slot is "untracked" and re-sent every pass, as before back-off (never lost). */
struct app_rdq {
	struct app_rdq_gen gen[2];
	uint32_t cur;             /* generation the previous pass wrote */
	uint32_t cap;             /* slots per generation, a power of two */
	struct app_backoff bo;
	uint64_t old_ns;          /* a saga at least this old counts as old */
	/* Figures of the last completed pass (and running totals during one). */
	uint32_t pending;         /* sagas visited */
	uint32_t old;             /* of which began at least old_ns ago */
	uint32_t untracked;       /* of which found no slot (re-sent every pass) */
	uint64_t oldest_age_ns;   /* age of the oldest */
	uint32_t pass_pending, pass_old, pass_untracked;
	uint64_t pass_oldest_ns;
};

/* Bytes app_rdq_init needs for sagas_max sagas (>= 1), 8-byte aligned memory. */
size_t app_rdq_footprint(uint32_t sagas_max);
/* 0, or -EINVAL (sagas_max 0, base_ns 0, max_ns < base_ns). mem is zeroed here. */
int app_rdq_init(struct app_rdq *q, void *mem, uint32_t sagas_max, const struct app_backoff *bo,
		 uint64_t old_ns);
/* Forget every schedule (a new leader's rebuilt queue starts fresh). */
void app_rdq_reset(struct app_rdq *q);
/* A pass: begin, one visit per PENDING saga, end. visit returns whether to re-send it now:
 * fresh (the rebuild pass) re-sends every saga; otherwise a saga seen for the first time
 * waits one interval (the service sent it when it began), a known one is re-sent when due.
 * began_ns: cluster time its saga began (for the age figures). */
void app_rdq_begin(struct app_rdq *q);
bool app_rdq_visit(struct app_rdq *q, const struct wire_oid *id, uint64_t now_ns,
		   uint64_t began_ns, bool fresh);
void app_rdq_end(struct app_rdq *q);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's load shedding (docs/appliance.md "Overload"): past saturation a queue
 * stands somewhere between the port and the OMS apply, and every order admitted waits for
 * all the ones before it. The gateway refuses new orders (NAK BACKPRESSURE, nothing
 * proposed, the client may send again) while such a queue stands, so that the orders it does
 * admit are answered within about the target; cancels, amends and replaces always pass.
 *
 * Two signals, per OMS shard the gateway routes to:
 *
 *   - the queue behind the gateway: the RX → ACK time of the new orders it forwarded there.
 *     A window of window_ns whose FASTEST ACK took longer than target_ns, with at least
 *     min_samples ACKs in it, means a standing queue (a burst that drains within a window
 *     leaves fast ACKs in it; one slow ACK on an idle box is not load). The next window
 *     sheds every new order to that shard; the window after decides again from the ACKs of
 *     the orders still in flight: fewer than min_samples of them, or a fast one, and orders
 *     are admitted again. (CoDel's observation — the minimum sojourn over an interval tells
 *     a standing queue from a burst — without its drop schedule: an exchange gateway refuses
 *     at admission, where a refusal costs nothing, rather than dropping a fraction.)
 *   - the queue before it: a new order that already waited more than wait_ns between the
 *     io lcore's rx burst and the gateway (the io → gateway ring) is refused at once: by the
 *     time the first signal sees such a wait in the answers, the ring holds a window's
 *     worth more. Each signal works alone (0 turns it off).
 *
 * Pure: no DPDK, no clock (times are the caller's), no allocation. Unit-tested in
 * tests/unit/app (test_shed.c). Single writer: the gateway lcore.
 */
#ifndef OMSD_APP_APP_SHED_H
#define OMSD_APP_APP_SHED_H

#include <stdbool.h>
#include <stdint.h>

#define APP_SHED_SHARDS 64     /* shard ids below this (DP_SHARDS_MAX) */
#define APP_SHED_MIN_SAMPLES 8 /* ACKs in a window for it to count as loaded */

struct app_shed_conf {
	uint64_t target_ns;    /* [timers] shed_ack_us: a standing queue's least ACK time; 0 = off */
	uint64_t window_ns;    /* [timers] shed_window_us */
	uint64_t wait_ns;      /* [timers] shed_wait_us: longest wait before the gateway; 0 = off */
	uint32_t min_samples;  /* ACKs a window needs to count as loaded */
};

struct app_shed_shard {
	uint64_t win_start;    /* the current window began (caller's ns); 0: none yet */
	uint64_t win_min;      /* its fastest ACK */
	uint32_t win_n;        /* its ACKs */
	bool shedding;         /* the window before showed a standing queue */
};

enum app_shed_verdict {
	APP_SHED_ADMIT = 0,
	APP_SHED_QUEUE = 1,    /* refused: a standing queue behind the gateway */
	APP_SHED_WAIT = 2,     /* refused: it waited too long before the gateway */
};

struct app_shed {
	struct app_shed_conf conf;
	struct app_shed_shard sh[APP_SHED_SHARDS];
	uint64_t windows_shed; /* windows that shed (a standing queue seen), all shards */
};

void app_shed_init(struct app_shed *s, const struct app_shed_conf *conf);
/* A new order's ACK (or NAK) left for its client: ack_ns after its rx burst. */
void app_shed_sample(struct app_shed *s, uint16_t shard, uint64_t now_ns, uint64_t ack_ns);
/* A new order for shard that waited waited_ns before the gateway: admit it or not. */
enum app_shed_verdict app_shed_admit(struct app_shed *s, uint16_t shard, uint64_t now_ns,
				     uint64_t waited_ns);
/* Is shard's gateway refusing new orders now (for the stats)? */
bool app_shed_active(const struct app_shed *s, uint16_t shard);

#endif

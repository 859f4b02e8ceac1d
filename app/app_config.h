/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsd configuration: one INI file read with DPDK's rte_cfgfile, validated whole before the
 * EAL starts. Every bad key or value is reported as
 *
 *     FILE:LINE: [section] key: reason
 *
 * and the process exits 2. Unknown sections and keys are errors too, so a typo never
 * silently falls back to a default. docs/dataplane.md lists every key with its default.
 */
#ifndef OMSD_APP_APP_CONFIG_H
#define OMSD_APP_APP_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "app_placement.h"
#include "dataplane/dp.h"

#define APP_SHARDS_MAX 16        /* shards one host can host */
#define APP_MEMBERS_MAX 5        /* a Raft group has 1, 3 or 5 members */
#define APP_EAL_ARGS_MAX 64      /* tokens in [eal] args */
#define APP_STR_MAX 256          /* longest value rte_cfgfile keeps */
#define APP_SYMBOLS_MAX 64       /* [symbol.N] sections */

enum app_service {
	APP_SERVICE_ME = 1,
	APP_SERVICE_OMS = 2,
	APP_SERVICE_ECHO = 3, /* diagnostic: echo every frame to its sender (dataplane tests) */
};

enum app_durability {
	APP_DURABILITY_MEMORY = 1,  /* commit on a majority holding the entry in memory: a
				     * power loss of a majority loses what it committed */
	APP_DURABILITY_DURABLE = 2, /* commit on a majority having fsynced it (the default) */
};

/* One lcore the app runs besides the main lcore. */
struct app_lcore_conf {
	bool enabled;                    /* declared in the file (io always is) */
	uint16_t cpu;                    /* physical CPU the lcore's thread is pinned to */
	struct dp_idle_policy idle;      /* back-off when a cycle finds no work */
};

struct app_shard_conf {
	uint16_t id;                          /* shard id (wire hdr.shard), < DP_SHARDS_MAX */
	enum app_service service;             /* me | oms */
	/* The bootstrap set: the voters of a new shard's first configuration. Membership then
	 * changes in the log (omsctl members add|promote|remove); this list is not looked at
	 * once the node holds the shard's log or a snapshot. */
	uint32_t members[APP_MEMBERS_MAX];    /* node ids, ours included unless joining */
	uint32_t member_count;                /* 1, 3 or 5 */
	bool joining;                         /* omsd --join and not in members: the node
					       * starts as a stranger that a leader adds as a
					       * learner (CNS_CFG_JOIN) */
	struct app_lcore_conf lcore;          /* the shard's lcore */
	/* [placement] policy = prefer (or colocate, ME shards): the nodes that should lead,
	 * best first, each a member of the bootstrap set; 0 of them: no preference. */
	uint32_t leader_pref[APP_MEMBERS_MAX];
	uint32_t leader_pref_count;
};

/* [symbol.N]: one instrument, proposed as a SYMBOL_CONFIG into every OMS and ME shard by
 * their leaders at bootstrap (same content on every node). */
struct app_symbol_conf {
	uint32_t id;                          /* symbol id (N) */
	uint32_t base_asset;                  /* base */
	uint32_t quote_asset;                 /* quote */
	uint16_t me_shard;                    /* owning ME shard */
	int16_t maker_fee_bps;                /* may be negative (rebate) */
	int16_t taker_fee_bps;
	uint16_t reserved;
	uint32_t band_bps;                    /* 0 = no band */
	int64_t tick;                         /* price increment */
	int64_t lot;                          /* quantity increment */
	int64_t min_qty;
	int64_t min_notional;
	int64_t base_unit;                    /* notional = px * qty / base_unit */
	int64_t ref_px;                       /* band reference until the first trade */
};

/* [routing]: the routing config every gateway uses and every OMS leader proposes. */
struct app_routing_conf {
	uint64_t epoch;                               /* routing epoch (>= 1) */
	uint16_t shards[WIRE_ROUTE_SHARDS_MAX];       /* active OMS shards */
	uint32_t shard_count;
	struct wire_route_pin pins[WIRE_ROUTE_PINS_MAX]; /* whale pins */
	uint32_t pin_count;
};

struct app_config {
	char path[PATH_MAX];                  /* the file it came from */
	struct dp_conf dp;                    /* node, port, memory, peers, keys */

	/* [eal] */
	char *eal_args[APP_EAL_ARGS_MAX];     /* tokens of `args` (point into eal_buf) */
	uint32_t eal_arg_count;
	char eal_buf[APP_STR_MAX];            /* storage for the tokens */
	uint16_t main_cpu;                    /* CPU of the main lcore (mgmt, stats) */

	/* [port] */
	char port_dev[APP_STR_MAX];           /* vdev spec "net_tap0,iface=x" or PCI address */
	bool port_is_vdev;                    /* --vdev, else -a */
	bool rx_start_leader;                 /* rx_start = leader: no RX until every hosted
					       * shard has a leader and is configured */
	uint32_t rx_hold_frames;              /* no RX while a shard ring holds this many
					       * frames (lossless replays); 0 = off */

	/* [memory] */
	uint32_t ring_size;                   /* every inter-lcore ring */

	/* lcores */
	struct app_lcore_conf io;             /* [io] (the first io lcore's cpu; every one's idle) */
	uint16_t io_cpus[DP_IO_MAX];          /* [io] cpus: io lcore k's CPU, k < dp.rx_queues */
	struct app_lcore_conf bridge;         /* [bridge], optional */
	bool bridge_seal;                     /* [bridge] seal: the bridge lcore writes the MAC
					       * of the shard lcores' frames to the network
					       * (app_seal.c; default on when [bridge] is) */
	struct app_lcore_conf persister;      /* [persister], optional */
	struct app_lcore_conf gateway;        /* [gateway], optional: the gateway on an lcore of
					       * its own (app_gateway.c); without it, on the
					       * node's first OMS shard lcore */
	uint64_t duty_threshold_ns;           /* a working cycle longer than this is counted */

	/* [shard.N] */
	struct app_shard_conf shards[APP_SHARDS_MAX];
	uint32_t shard_count;

	/* [limits] */
	uint64_t resident_users_max;          /* OMS: resident actors */
	uint64_t parked_orders_max;           /* OMS: orders waiting for hydration */
	uint64_t waiting_users_max;           /* OMS: cold users waiting for room in the cap */
	uint64_t report_ring;                 /* OMS: numbered client answers kept per shard for
					       * REPORT_REPLAY and a new leader (power of two) */
	uint64_t evictions_max;               /* OMS: eviction flushes in flight */
	uint64_t inflight_sagas_max;          /* OMS: PENDING sagas before BACKPRESSURE */
	uint64_t orders_max;                  /* OMS and ME: order records */
	uint64_t log_entries_max;             /* in-memory Raft log: entries per shard */
	uint64_t log_mb;                      /* in-memory Raft log: MiB per shard */
	uint64_t snapshot_mb;                 /* largest snapshot (two buffers per shard, three
					       * with snapshot_by = fork) */
	uint64_t snapshot_entries;            /* applied entries between snapshots */
	bool snapshot_fork;                   /* [limits] snapshot_by = fork (the default): a
					       * forked child serialises a copy-on-write image;
					       * lcore: the shard lcore serialises in its cycle */
	uint64_t snapshot_fork_min_mb;        /* fork only when the last snapshot was at least
					       * this big; smaller ones cost the lcore less than
					       * a fork of the whole process */
	bool snapshot_shadow;                 /* [limits] snapshot_by = shadow: a copy of the
					       * service on a thread of its own serialises
					       * (app_shadow.h); fork as above when it is lost */
	uint64_t shadow_ring_mb;              /* the shadow's ring: how far it may fall behind */
	uint64_t dedup_window_ms;             /* ME: a finished order's dedup record outlives
					       * its ack this long (docs/me-contract.md) */
	uint64_t me_events_max;               /* ME: events retained per OMS stream until acked
					       * (a power of two; docs/me.md, "Bulk cancels") */
	uint64_t writeback_max;               /* OMS: write-backs started per flush_ms pass */
	uint64_t dedup_per_user;              /* OMS: request outcomes remembered per resident
					       * user (clientOrderId / transfer_id window) */

	/* [timers] */
	uint64_t admit_wait_ms;               /* OMS: longest a cold user waits for room */
	uint64_t shed_ack_us;                 /* gateway: a standing queue's least RX → ACK
					       * time; new orders refused past it (0 = off) */
	uint64_t shed_window_us;              /* gateway: the window that least is taken over */
	uint64_t shed_wait_us;                /* gateway: longest wait before it (0 = off) */
	uint64_t user_ttl_ms;                 /* idle time before an actor may be evicted */
	uint64_t sweep_ms;                    /* TTL/reconciliation sweep cadence */
	uint64_t sweep_evict_max;             /* evictions per sweep */
	uint64_t tick_ms;                     /* idle leader tick entry cadence */
	uint64_t bridge_redrive_ms;           /* bridge re-sends pending sagas this often */
	uint64_t election_ms;                 /* Raft election timeout (min; max is 2x) */
	uint64_t heartbeat_ms;                /* Raft leader heartbeat */
	uint64_t reconcile_ms;                /* OMS reconciliation sweep cadence; 0 = off */
	uint64_t flush_ms;                    /* OMS: write-back of dirty resident users to
					       * the database this often; 0 = off (docs/oms.md) */
	uint64_t bridge_redrive_max_ms;       /* ceiling of a saga's re-drive back-off */
	uint64_t saga_old_ms;                 /* a PENDING saga this old counts in sagas_old */

	/* [routing], [symbol.N] */
	struct app_routing_conf routing;
	struct app_symbol_conf symbols[APP_SYMBOLS_MAX];
	uint32_t symbol_count;

	/* [durability], [database], [paths] */
	enum app_durability durability;
	char db_conninfo[APP_STR_MAX];        /* libpq conninfo; empty = no database */
	char data_dir[APP_STR_MAX];           /* Raft logs and snapshots */
	char mgmt_socket[108];                /* unix socket path (sun_path size) */
	char mgmt_group[32];                  /* the socket's group (0660), when it exists */
	char stats_file[APP_STR_MAX];         /* counters written on SIGUSR1 and at exit */

	/* [sessions] (docs/security.md) */
	char keys_file[APP_STR_MAX];          /* API keys, reloaded when it changes; "" = none */
	bool keys_from_db;                    /* keys_source = database: the api_keys table */
	bool allow_unauthenticated;           /* development only: client traffic outside a
					       * session (the legacy shared [keys] client) */
	uint64_t logon_window_ms;             /* |node clock - LOGON timestamp| allowed */
	uint64_t session_heartbeat_ms;        /* when the client asks for none */
	uint64_t sessions_max;                /* sessions one gateway holds */
	uint64_t session_msgs_per_sec;        /* messages per session per second; 0 = no limit */
	uint64_t session_warn_pct;            /* warn at this % of it (0 = no warning) */
	uint64_t logons_per_sec;              /* LOGONs a gateway looks at per second (each
					       * costs an HMAC); 0 = no limit */
	uint64_t keys_refresh_ms;             /* how often the key file is looked at */

	/* [placement] (docs/appliance.md "Leadership placement") */
	enum app_place_policy place_policy;   /* none (the default) | spread | colocate | prefer */
	uint64_t place_check_ms;              /* a leader looks at its placement this often */
	uint64_t place_settle_ms;             /* a better node must have been caught up and
					       * heard this long before leadership moves to it */

	/* [mgmt] */
	char metrics_listen[32];              /* "127.0.0.1:9464"; "" = no HTTP listener */
	uint32_t metrics_ip_be;               /* its address (loopback only), network order */
	uint16_t metrics_port;                /* its port; 0 = off */
};

/*
 * Load and validate path. Errors go to err, one line each; returns the number of errors
 * (0 = success, cfg filled). Needs no EAL.
 */
int app_config_load(const char *path, struct app_config *cfg, FILE *err);
/* The same for `omsd --join`: a [shard.N] whose members do not list this node is joined
 * (app_shard_conf.joining) rather than refused. */
int app_config_load_join(const char *path, struct app_config *cfg, FILE *err);

/* Print the effective configuration (one "section.key = value" per line). */
void app_config_dump(const struct app_config *cfg, FILE *out);

const char *app_service_name(enum app_service s);

/* [limits] dedup_window_ms: the least the file may say (bridge_redrive_ms + 2 x
 * election_ms, docs/me-contract.md "Windows"), and the value used when it says nothing
 * (twice that, at least one second). */
uint64_t app_dedup_window_min_ms(const struct app_config *cfg);
uint64_t app_dedup_window_default_ms(const struct app_config *cfg);
/* [timers] bridge_redrive_max_ms when the file says nothing: 8 x bridge_redrive_ms. */
uint64_t app_redrive_max_default_ms(const struct app_config *cfg);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsd [-c FILE] [--check] [--service] [--join] [-- EAL args]
 *
 * Load and validate the configuration (exit 2 on any error, before the EAL starts), start
 * the EAL with the lcore map and port from the configuration plus the pass-through
 * arguments, create the rings between lcores (app_wire.c), set up the roles on them,
 * launch one agent per lcore, and run the main lcore (signals, stats, the control socket)
 * until SIGINT/SIGTERM. Then stop the lcores
 * (producers first, io last), drain the tx queues, close the port and exit 0.
 *
 * SIGUSR1 writes every counter to [paths] stats_file (or the log when it is empty); the
 * same dump is written at start-up and at shutdown.
 *
 * Under systemd (app_notify.c, docs/install.md): READY=1 once every hosted shard has a
 * leader, STATUS= as that changes, STOPPING=1, the watchdog; with --service a node in
 * memory mode refuses a second start (exit 3). Exit status: 0 stopped, 1 failed at start
 * or run time, 2 configuration (or schema, or command line) refused, 3 that refusal.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "app.h"
#include "app_notify.h"
#include "app_views.h"
#include "common/check.h"
#include "mgmt/mgmt.h"
#include "persist/persist.h"

#define EXIT_CONFIG 2
#ifndef OMSD_SYSCONFDIR
#define OMSD_SYSCONFDIR "/etc" /* meson: prefix / sysconfdir */
#endif
#define MAIN_TICK_US 20000 /* main lcore poll period for signals */
#define MAIN_MOVE_WAIT_US 200 /* longest sleep between a symbol move's steps (a bell ends it) */
#define EAL_ARGV_MAX (APP_EAL_ARGS_MAX * 2 + 16)

int app_logtype = RTE_LOGTYPE_USER2;

static volatile sig_atomic_t stopping;
static volatile sig_atomic_t dump_requested;

static void
on_signal(int sig)
{
	if (sig == SIGUSR1)
		dump_requested = 1;
	else
		stopping = 1;
}

static void
usage(FILE *out)
{
	fprintf(out,
		"usage: omsd [-c FILE] [--check] [--service] [--join] [-- EAL args]\n"
		"  -c, --config FILE  configuration (default: ./deploy/omsd.ini, else "
		OMSD_SYSCONFDIR "/omsd/omsd.ini)\n"
		"  --check            validate the configuration, print it and the CPUs its "
		"lcores need, exit (0 or 2)\n"
		"  --service          started by the service manager (the systemd units): in "
		"[durability] mode = memory,\n"
		"                     refuse to start again after a run on the same data_dir "
		"(exit 3) until\n"
		"                     the operator removes <data_dir>/" APP_MEMORY_MARK "\n"
		"  --join             a new host: shards whose [shard.N] members do not list "
		"this node are\n"
		"                     joined (a leader adds it: omsctl members add, then "
		"promote)\n"
		"  -h, --help         this text\n"
		"EAL arguments after -- are appended to [eal] args (e.g. --file-prefix X).\n"
		"Signals: SIGINT/SIGTERM stop cleanly; SIGUSR1 writes the counters.\n"
		"Exit status: 0 stopped, 1 failed, 2 configuration refused, 3 memory-mode "
		"restart refused.\n"
		"Under systemd (Type=notify): READY=1 once every hosted shard has a leader.\n");
}

static const char *
default_config(void)
{
	if (access("deploy/omsd.ini", R_OK) == 0)
		return "deploy/omsd.ini";
	return OMSD_SYSCONFDIR "/omsd/omsd.ini";
}

/* --check: the CPUs the lcores are pinned to, as a list a unit's CPUAffinity= takes. The
 * process's affinity must cover them (checked when the file is loaded); under systemd that
 * is the unit's CPUAffinity=, which on a host with isolcpus= must name the isolated CPUs. */
static void
cpus_print(const struct app_config *cfg, FILE *out)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cfg->main_cpu, &set);
	for (uint32_t k = 0; k < cfg->dp.rx_queues || k == 0; k++)
		CPU_SET(cfg->io_cpus[k], &set);
	if (cfg->bridge.enabled)
		CPU_SET(cfg->bridge.cpu, &set);
	if (cfg->persister.enabled)
		CPU_SET(cfg->persister.cpu, &set);
	if (cfg->gateway.enabled)
		CPU_SET(cfg->gateway.cpu, &set);
	for (uint32_t i = 0; i < cfg->shard_count; i++)
		CPU_SET(cfg->shards[i].lcore.cpu, &set);
	fprintf(out, "cpus =");
	for (int c = 0, n = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			fprintf(out, "%s%d", n++ ? "," : " ", c);
	fprintf(out, "\n");
}

static void
stats_dump(const struct app *app, const char *why)
{
	const char *path = app->cfg.stats_file;
	if (path[0] == '\0') {
		APP_LOG(INFO, "counters (%s):", why);
		app_stats_write(app, stdout);
		fflush(stdout);
		return;
	}
	/* Write whole, then rename: a reader never sees half a file. */
	char tmp[APP_STR_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f == NULL) {
		APP_LOG(WARNING, "stats file %s: %s", tmp, strerror(errno));
		return;
	}
	fprintf(f, "# omsd counters (%s)\n", why);
	app_stats_write(app, f);
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		APP_LOG(WARNING, "stats file %s: %s", path, strerror(errno));
}

/* The EAL argument vector: program name, [eal] args, the lcore map, the port, then the
 * command line's pass-through arguments. */
static int
eal_argv_build(const struct app *app, char **argv, int argc_max, char *lcores, size_t lsize,
	       int pass_argc, char **pass_argv)
{
	const struct app_config *cfg = &app->cfg;
	int argc = 0;
	size_t off = 0;

	argv[argc++] = (char *)"omsd";
	for (uint32_t i = 0; i < cfg->eal_arg_count; i++)
		argv[argc++] = cfg->eal_args[i];
	off += (size_t)snprintf(lcores + off, lsize - off, "0@%u", cfg->main_cpu);
	for (uint32_t i = 0; i < app->agent_count && off < lsize; i++)
		off += (size_t)snprintf(lcores + off, lsize - off, ",%u@%u",
					app->agents[i].lcore_id, app->agents[i].cpu);
	if (off >= lsize)
		return -ENOSPC;
	argv[argc++] = (char *)"--lcores";
	argv[argc++] = lcores;
	argv[argc++] = (char *)"--main-lcore";
	argv[argc++] = (char *)"0";
	argv[argc++] = (char *)(cfg->port_is_vdev ? "--vdev" : "-a");
	argv[argc++] = (char *)cfg->port_dev;
	for (int i = 0; i < pass_argc; i++) {
		if (argc + 1 >= argc_max)
			return -E2BIG;
		argv[argc++] = pass_argv[i];
	}
	argv[argc] = NULL;
	return argc;
}

/* Lay out the agents: io first, then bridge, persister, one per shard; lcore ids 1..n. */
static void
agents_plan(struct app *app)
{
	const struct app_config *cfg = &app->cfg;
	struct app_agent *a;

#define AGENT(role_, cpu_, policy_, ...)                                                   \
	do {                                                                               \
		a = &app->agents[app->agent_count];                                         \
		a->role = role_;                                                           \
		a->cpu = cpu_;                                                             \
		a->lcore_id = ++app->agent_count;                                          \
		snprintf(a->name, sizeof(a->name), __VA_ARGS__);                           \
		dp_idle_init(&a->idle, policy_);                                           \
		dp_duty_init(&a->duty, cfg->duty_threshold_ns);                            \
	} while (0)

	/* Bells (dp.h): the io lcore's port and the persister's database connection are
	 * polled, so those two sleep no longer than idle_sleep_us; every input of a shard
	 * lcore (and of a persister without a database) rings, so it may wait idle_wait_us. */
	AGENT(APP_ROLE_IO, cfg->io.cpu, &cfg->io.idle, "io");
	dp_idle_bell(&a->idle, &a->bell, false);
	/* [port] rx_queues > 1: one more io lcore per rx queue ("io1", ...; dataplane/dp_io.c). */
	for (uint32_t k = 1; k < cfg->dp.rx_queues; k++) {
		AGENT(APP_ROLE_IO, cfg->io_cpus[k], &cfg->io.idle, "io%u", k);
		dp_idle_bell(&a->idle, &a->bell, false);
	}
	if (cfg->bridge.enabled) {
		AGENT(APP_ROLE_BRIDGE, cfg->bridge.cpu, &cfg->bridge.idle, "bridge");
		dp_idle_bell(&a->idle, &a->bell, true); /* its input (app_seal.c) rings it */
		app->bridge_bell = &a->bell;
	}
	if (cfg->persister.enabled) {
		AGENT(APP_ROLE_PERSISTER, cfg->persister.cpu, &cfg->persister.idle, "persister");
		dp_idle_bell(&a->idle, &a->bell, cfg->db_conninfo[0] == '\0');
		app->persist_bell = &a->bell;
	}
	if (cfg->gateway.enabled) {
		/* Its rings and bell take the place after the last shard's (app.h). */
		AGENT(APP_ROLE_GATEWAY, cfg->gateway.cpu, &cfg->gateway.idle, "gateway");
		dp_idle_bell(&a->idle, &a->bell, true); /* every input of it rings */
		app->shard_bell[cfg->shard_count] = &a->bell;
	}
	for (uint32_t i = 0; i < cfg->shard_count; i++) {
		AGENT(APP_ROLE_SHARD, cfg->shards[i].lcore.cpu, &cfg->shards[i].lcore.idle,
		      "shard%u", cfg->shards[i].id);
		dp_idle_bell(&a->idle, &a->bell, true);
		app->shard_bell[i] = &a->bell;
	}
#undef AGENT
	/* The main lcore between a move's steps: woken by the answers; its socket and the
	 * move's own retries (100 µs views) are looked at every MAIN_MOVE_WAIT_US. */
	const struct dp_idle_policy main_policy = {
		.mode = DP_IDLE_SLEEP, .sleep_us_min = MAIN_MOVE_WAIT_US,
		.sleep_us_max = MAIN_MOVE_WAIT_US, .wait_us_max = MAIN_MOVE_WAIT_US};
	dp_idle_init(&app->main_idle, &main_policy);
	dp_idle_bell(&app->main_idle, &app->main_bell, true);
}

/* Stop the agents of one stage: 0 the producers (shards, persister), 1 the bridge (which
 * takes the shards' frames), 2 the io lcore (which takes everybody's). */
static void
agents_stop(struct app *app, int stage)
{
	for (uint32_t i = 0; i < app->agent_count; i++) {
		struct app_agent *a = &app->agents[i];
		int st = a->role == APP_ROLE_IO ? 2 : a->role == APP_ROLE_BRIDGE ? 1 : 0;
		if (st != stage || !a->launched)
			continue;
		__atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
		rte_eal_wait_lcore(a->lcore_id);
		a->launched = false;
	}
}

int
main(int argc, char **argv)
{
	static struct app app; /* large (config, agents): not on the stack */
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'k' },
		{ "service", no_argument, NULL, 's' },
		{ "join", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL;
	bool check_only = false, service = false, join = false;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config = optarg;
			break;
		case 'k':
			check_only = true;
			break;
		case 's':
			service = true;
			break;
		case 'j':
			join = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_CONFIG;
		}
	}
	int pass_argc = argc - optind;
	char **pass_argv = argv + optind;
	if (config == NULL)
		config = default_config();

	/* 1. Configuration, whole, before anything else. */
	if ((join ? app_config_load_join : app_config_load)(config, &app.cfg, stderr) != 0) {
		fprintf(stderr, "omsd: %s: configuration refused\n", config);
		return EXIT_CONFIG;
	}
	for (int i = 0; i < pass_argc; i++) {
		const char *a = pass_argv[i];
		if (!strcmp(a, "-l") || !strcmp(a, "-c") || !strncmp(a, "--lcores", 8) ||
		    !strncmp(a, "--main-lcore", 12) || !strncmp(a, "--master-lcore", 14)) {
			fprintf(stderr,
				"omsd: command line: EAL argument '%s' is not allowed: the lcore "
				"map comes from the configuration\n", a);
			return EXIT_CONFIG;
		}
	}
	if (check_only) {
		app_config_dump(&app.cfg, stdout);
		cpus_print(&app.cfg, stdout);
		return 0;
	}
	/* A node whose Raft state was in RAM is not started again behind the operator's back. */
	ret = app_service_guard_check(&app.cfg, service, stderr);
	if (ret == -EEXIST)
		return APP_EXIT_MEMORY_RAN;
	if (ret != 0)
		return 1;
	app_notify_log_init();
	app_notify_status("starting");
	if (app.cfg.db_conninfo[0] != '\0') {
		/* The database must hold the schema this build writes: refuse now, naming both
		 * versions, rather than fail statement by statement later. */
		char why[512];
		int src = pst_db_schema_check(app.cfg.db_conninfo, 5, why, sizeof(why));
		if (src == -EPROTO) {
			fprintf(stderr, "omsd: %s; refusing to start\n", why);
			return EXIT_CONFIG;
		}
		if (src < 0)
			fprintf(stderr, "omsd: warning: %s; starting anyway (the persister checks the "
				"schema on every connection)\n", why);
	}
	agents_plan(&app);
	memset(app.shard_index, -1, sizeof(app.shard_index));
	app.gateway_index = -1;
	app.route_src_index = -1;
	for (uint32_t i = 0; i < app.cfg.shard_count; i++) {
		const struct app_shard_conf *sc = &app.cfg.shards[i];
		app.shard_index[sc->id] = (int8_t)i;
		/* The gateway runs on the first OMS shard lcore (else the first oms/me one);
		 * with [gateway], on its own, routing by what that OMS lcore publishes. */
		if (sc->service == APP_SERVICE_OMS && app.route_src_index < 0)
			app.route_src_index = (int)i;
	}
	if (app.cfg.gateway.enabled)
		app.gateway_index = (int)app.cfg.shard_count;
	else
		app.gateway_index = app.route_src_index;
	for (uint32_t i = 0; i < app.cfg.shard_count && app.gateway_index < 0; i++)
		if (app.cfg.shards[i].service != APP_SERVICE_ECHO)
			app.gateway_index = (int)i;
	if (!app.cfg.gateway.enabled)
		app.route_src_index = -1; /* the gateway reads the replica on its own lcore */

	/* A snapshot child's CPUs, from the set we were started with (EAL pins us next). */
	if (sched_getaffinity(0, sizeof(app.snap_cpus), &app.snap_cpus) == 0) {
		cpu_set_t spare = app.snap_cpus;
		for (uint32_t k = 0; k < app.cfg.dp.rx_queues || k == 0; k++)
			CPU_CLR(app.cfg.io_cpus[k], &spare);
		if (app.cfg.bridge.enabled)
			CPU_CLR(app.cfg.bridge.cpu, &spare);
		if (app.cfg.persister.enabled)
			CPU_CLR(app.cfg.persister.cpu, &spare);
		if (app.cfg.gateway.enabled)
			CPU_CLR(app.cfg.gateway.cpu, &spare);
		for (uint32_t i = 0; i < app.cfg.shard_count; i++)
			CPU_CLR(app.cfg.shards[i].lcore.cpu, &spare);
		if (CPU_COUNT(&spare) > 0)
			app.snap_cpus = spare;
		app.snap_cpus_ok = true;
	}

	/* 2. EAL. */
	app_notify_status("starting: EAL, dataplane, shards");
	char *eal_argv[EAL_ARGV_MAX];
	char lcores[512];
	int eal_argc = eal_argv_build(&app, eal_argv, EAL_ARGV_MAX, lcores, sizeof(lcores),
				      pass_argc, pass_argv);
	if (eal_argc < 0) {
		fprintf(stderr, "omsd: too many EAL arguments\n");
		return EXIT_CONFIG;
	}
	ret = dp_eal_init(eal_argc, eal_argv);
	if (ret != 0) {
		fprintf(stderr, "omsd: EAL initialisation failed: %s\n", strerror(-ret));
		return 1;
	}
	int lt = rte_log_register_type_and_pick_level("user.omsd.app", RTE_LOG_INFO);
	if (lt >= 0)
		app_logtype = lt;
	app.start_ns = dp_clock_ns();
	{
		/* Cluster time is wall-clock based (GTD expiry, reports), advanced by the TSC. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		app.clock_offset_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec -
				      (int64_t)app.start_ns;
	}

	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);

	/* API keys before the gateway's role takes them (app_session.c). */
	if (app_keys_start(&app) != 0) {
		ret = -EINVAL;
		goto fail_dp;
	}
	if (app.cfg.allow_unauthenticated)
		APP_LOG(WARNING, "[sessions] allow_unauthenticated = true: clients may trade "
			"without logging on, as any user they name (development only)");
	if (app.cfg.db_conninfo[0] == '\0')
		APP_LOG(WARNING, "no [database]: accounts are not checked, a user id a session may "
			"act for is served as a new account (UNKNOWN_USER needs the database; "
			"docs/security.md)");

	/* 3. Dataplane, rings and routes, roles, port start. */
	ret = dp_create(&app.dp, &app.cfg.dp);
	if (ret != 0) {
		APP_LOG(ERR, "dataplane: %s", strerror(-ret));
		goto fail_dp;
	}
	/* agents_plan: the io lcores first, in queue order. */
	for (uint16_t k = 0; k < dp_io_count(app.dp); k++)
		CHECK(dp_io_bell_set(app.dp, k, &app.agents[k].bell) == 0);
	/* Every ring between lcores, before any role takes its own (app_wire.c). */
	ret = app_wire_init(&app);
	if (ret != 0) {
		APP_LOG(ERR, "rings: %s", strerror(-ret));
		goto fail_roles;
	}
	for (uint32_t i = 0, shard = 0, io = 0; i < app.agent_count; i++) {
		struct app_agent *a = &app.agents[i];
		ret = app_roles[a->role].init(&app, a, a->role == APP_ROLE_SHARD ? shard++
						       : a->role == APP_ROLE_IO  ? io++
										 : 0);
		if (ret != 0) {
			APP_LOG(ERR, "%s: init: %s", a->name, strerror(-ret));
			goto fail_roles;
		}
	}
	ret = dp_start(app.dp);
	if (ret != 0)
		goto fail_roles;

	/* 4. Lcores. */
	bool launch_failed = false;
	for (uint32_t i = 0; i < app.agent_count; i++) {
		struct app_agent *a = &app.agents[i];
		ret = rte_eal_remote_launch(app_agent_main, a, a->lcore_id);
		if (ret != 0) {
			APP_LOG(ERR, "%s: launch on lcore %u: %s", a->name, a->lcore_id,
				strerror(-ret));
			stopping = 1;
			launch_failed = true;
			break;
		}
		a->launched = true;
	}
	/* From now on the lcores may vote: a restart in memory mode must be refusable. */
	bool mark_failed = false;
	if (!stopping && app_service_guard_mark(&app.cfg, service) != 0) {
		stopping = 1;
		mark_failed = true;
	}
	if (!stopping) {
		char ip[INET_ADDRSTRLEN];
		struct in_addr in = { .s_addr = app.cfg.dp.ip_be };
		inet_ntop(AF_INET, &in, ip, sizeof(ip));
		APP_LOG(INFO, "ready: node %u, %s udp %u on %s, %u shard(s), %u lcores",
			app.cfg.dp.node_id, ip, app.cfg.dp.udp_port, app.cfg.dp.port_name,
			app.cfg.shard_count, app.agent_count + 1);
		stats_dump(&app, "start");
	}

	/* 5. Main lcore: signals, stats and the control socket (never a hot lcore). */
	bool mgmt_on = false, mgmt_refused = false;
	if (!stopping) {
		/* Views first: the control socket, telemetry and HTTP render from them. */
		int vrc = app_views_open(&app, app_http_stats_write);
		if (vrc < 0)
			APP_LOG(WARNING, "views: %s", strerror(-vrc));
		vrc = app_telemetry_register(&app);
		if (vrc < 0)
			APP_LOG(WARNING, "telemetry commands /omsd/*: %s", strerror(-vrc));
		vrc = app_http_open(&app);
		if (vrc < 0)
			APP_LOG(WARNING, "metrics_listen %s: %s (running without it)",
				app.cfg.metrics_listen, strerror(-vrc));
		int mrc = app_mgmt_open(&app, &app.main_idle);
		if (mrc == -EPERM) {
			/* Someone else controls the socket's directory: they could put their own
			 * socket in its place and answer the operator. Refuse to run. */
			char why[256];
			mgmt_socket_dir_check(app.cfg.mgmt_socket, why, sizeof(why));
			APP_LOG(ERR, "control socket %s: unsafe directory: %s; stopping",
				app.cfg.mgmt_socket, why);
			stopping = 1;
			mgmt_refused = true;
		} else if (mrc < 0)
			APP_LOG(WARNING, "control socket %s: %s (running without it)",
				app.cfg.mgmt_socket, strerror(-mrc));
		else
			mgmt_on = app.cfg.mgmt_socket[0] != '\0';
		app_notify_open(&app, dp_clock_ns());
	}
	while (!stopping) {
		if (mgmt_on)
			app_mgmt_poll(MAIN_TICK_US / 1000 > 0 ? MAIN_TICK_US / 1000 : 1);
		else
			usleep(MAIN_TICK_US);
		app_views_tick(dp_clock_ns());
		app_keys_poll(&app, dp_clock_ns());
		app_http_poll();
		app_notify_tick(&app, dp_clock_ns());
		app_shard_collapse_tick(&app);
		app_route_reclaim(&app.route); /* the gateway lcore's old routing copies */
		if (dump_requested) {
			dump_requested = 0;
			stats_dump(&app, "SIGUSR1");
		}
	}

	/* 6. Shutdown: producers first, then io; then what is still queued goes out. */
	APP_LOG(INFO, "stopping");
	app_notify_stopping();
	app_telemetry_close();
	app_http_close();
	app_views_close();
	agents_stop(&app, 0);
	agents_stop(&app, 1);
	app_seal_drain(&app); /* the io lcore still runs and takes them */
	agents_stop(&app, 2);
	app_mgmt_close(); /* after the shard lcores: it takes back the commands they held */
	app_keys_stop();
	uint32_t drained = dp_io_drain(app.dp);
	stats_dump(&app, "exit");
	APP_LOG(INFO, "stopped: %u queued frame(s) drained", drained);
	ret = launch_failed ? -ECHILD : mgmt_refused ? -EPERM : mark_failed ? -EIO : 0;
fail_roles:
	for (uint32_t i = 0; i < app.agent_count; i++)
		if (app_roles[app.agents[i].role].fini != NULL)
			app_roles[app.agents[i].role].fini(&app, &app.agents[i]);
	app_wire_fini(&app);
	dp_destroy(app.dp);
	app.dp = NULL;
fail_dp:
	dp_eal_cleanup();
	return ret == 0 ? 0 : 1;
}

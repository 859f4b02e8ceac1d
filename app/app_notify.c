/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsd under a service manager (app_notify.h). Everything here runs on the main lcore, at
 * start-up or from its tick (never on a shard lcore): readiness is read from what the shard
 * lcores publish (app_shard_ready, app_shard_leads), the watchdog from the agents' cycle
 * counters.
 *
 * Readiness (Type=notify): a node is ready when it can serve, that is when every shard it
 * hosts knows a leader and its replica has applied everything committed in that leader's
 * term and the bootstrap configuration (the RX gate's test, app_shard.c ready()). A member
 * started before a majority of its group is up is not ready, and says so in STATUS=.
 *
 * The memory-mode guard: with [durability] mode = memory a member's Raft log and vote live
 * in RAM. Started again it rejoins with an empty log and no record of its votes: it may
 * vote a second time in a term it already voted in (thesis §3.4: at most one vote per
 * term), and its empty log may elect a leader that lacks entries it had acknowledged, so a
 * committed entry can be lost (Raft §5.4.1). A service manager restarts a crashed process
 * by itself; with --service, the first start leaves a mark in data_dir and every later
 * start refuses (APP_EXIT_MEMORY_RAN) until the operator removes it.
 */
#include "app_notify.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rte_log.h>

#ifdef OMSD_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#define NOTIFY_EVERY_NS (100 * 1000000ull) /* readiness and status checks */
#define NOTIFY_STATUS_MAX 1024             /* bytes of one STATUS= text */

static struct {
	bool ready;                        /* READY=1 sent */
	uint64_t start_ns;                 /* dp_clock_ns at app_notify_open, after the launch */
	uint64_t next_ns;                  /* next readiness check */
	char status[NOTIFY_STATUS_MAX];    /* the last STATUS= sent */
	uint64_t watchdog_ns;              /* ping period: half of WATCHDOG_USEC; 0: off */
	uint64_t watchdog_next_ns;         /* next ping due */
	uint64_t cycles[APP_AGENTS_MAX];   /* each agent's duty cycles at the last ping */
	bool watchdog_held;                /* a ping was withheld (logged once per stall) */
} ntf;

static void
notify(const char *text)
{
#ifdef OMSD_SYSTEMD
	(void)sd_notify(0, text); /* nothing without $NOTIFY_SOCKET */
#else
	(void)text;
#endif
}

/* ---------------------------------------------------------------------------------------
 * The journal.
 * ------------------------------------------------------------------------------------- */

static bool journal_line_start = true; /* the next byte written begins a line */

/* rte_log's stream when stderr is the journal: each line prefixed with the syslog priority
 * of the message being written (RTE_LOG_EMERG 1 .. RTE_LOG_DEBUG 8 are syslog 0 .. 7). */
static ssize_t
journal_write(void *cookie, const char *buf, size_t size)
{
	(void)cookie;
	int level = rte_log_cur_msg_loglevel();
	int prio = level >= 1 && level <= 8 ? level - 1 : 6;
	size_t off = 0;
	while (off < size) {
		const char *nl = memchr(buf + off, '\n', size - off);
		size_t len = nl != NULL ? (size_t)(nl - (buf + off)) + 1 : size - off;
		if (journal_line_start)
			fprintf(stderr, "<%d>%.*s", prio, (int)len, buf + off);
		else
			fwrite(buf + off, 1, len, stderr);
		journal_line_start = nl != NULL;
		off += len;
	}
	fflush(stderr);
	return (ssize_t)size;
}

void
app_notify_log_init(void)
{
	/* systemd.exec(5): JOURNAL_STREAM is "device:inode" of the stream connected to the
	 * journal; it is ours only if stderr is still that stream. */
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	if (js == NULL || sscanf(js, "%llu:%llu", &dev, &ino) != 2 ||
	    fstat(STDERR_FILENO, &st) != 0 || (unsigned long long)st.st_dev != dev ||
	    (unsigned long long)st.st_ino != ino)
		return;
	cookie_io_functions_t io = { .write = journal_write };
	FILE *f = fopencookie(NULL, "w", io);
	if (f == NULL)
		return;
	setvbuf(f, NULL, _IOLBF, 0); /* a line is written by the thread that logged it */
	rte_openlog_stream(f);
}

/* ---------------------------------------------------------------------------------------
 * The memory-mode guard.
 * ------------------------------------------------------------------------------------- */

static bool
guard_applies(const struct app_config *cfg, bool service)
{
	return service && cfg->durability == APP_DURABILITY_MEMORY;
}

static int
mark_path(const struct app_config *cfg, char *path, size_t cap)
{
	int n = snprintf(path, cap, "%s/%s", cfg->data_dir, APP_MEMORY_MARK);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int
app_service_guard_check(const struct app_config *cfg, bool service, FILE *err)
{
	char path[APP_STR_MAX + 32];
	if (!guard_applies(cfg, service))
		return 0;
	if (mark_path(cfg, path, sizeof(path)) != 0) {
		fprintf(err, "omsd: [paths] data_dir %s: too long\n", cfg->data_dir);
		return -ENAMETOOLONG;
	}
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		if (errno == ENOENT)
			return 0;
		int e = errno;
		fprintf(err, "omsd: refusing to start: %s: %s (cannot tell whether this node "
			"already ran in [durability] mode = memory)\n", path, strerror(e));
		return -e;
	}
	char first[256] = "";
	if (fgets(first, sizeof(first), f) == NULL)
		snprintf(first, sizeof(first), "(empty)\n");
	fclose(f);
	first[strcspn(first, "\n")] = '\0';
	fprintf(err,
		"omsd: refusing to start: %s says this node already ran with [durability] "
		"mode = memory (%s). Its Raft logs and votes were in RAM and are gone: started "
		"again, it would rejoin its shards with an empty log and no record of its votes, "
		"so it could vote twice in one term, and a committed entry it held could be "
		"lost. Once every other member of its shards is up and caught up (omsctl "
		"status: equal commit), remove %s and start it again (omsd(8), "
		"docs/install.md \"Memory mode\").\n",
		path, first, path);
	return -EEXIST;
}

/* mkdir -p of dir, mode for what is created. */
static int
mkdir_parents(const char *dir, mode_t mode)
{
	char p[APP_STR_MAX];
	int n = snprintf(p, sizeof(p), "%s", dir);
	if (n < 0 || (size_t)n >= sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s != '\0'; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) != 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, mode) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int
app_service_guard_mark(const struct app_config *cfg, bool service)
{
	char path[APP_STR_MAX + 32];
	if (!guard_applies(cfg, service))
		return 0;
	int rc = mark_path(cfg, path, sizeof(path));
	if (rc == 0)
		rc = mkdir_parents(cfg->data_dir, 0750);
	int fd = -1;
	if (rc == 0) {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
		if (fd < 0)
			rc = -errno;
	}
	if (rc == 0) {
		char when[32];
		time_t now = time(NULL);
		struct tm tm;
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
		char text[1024];
		int n = snprintf(text, sizeof(text),
				 "node %u, pid %ld, started %s\n"
				 "omsd ran here with [durability] mode = memory and --service: its "
				 "Raft logs and votes were in RAM only.\n"
				 "A restart refuses (exit %d) while this file exists. Remove it once "
				 "every other member of the node's shards is up and caught up.\n",
				 cfg->dp.node_id, (long)getpid(), when, APP_EXIT_MEMORY_RAN);
		if (write(fd, text, (size_t)n) != n || fsync(fd) != 0)
			rc = errno != 0 ? -errno : -EIO;
	}
	if (fd >= 0)
		close(fd);
	if (rc == 0) {
		/* The name must survive a power loss too: a host that boots enables omsd. */
		int dfd = open(cfg->data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || fsync(dfd) != 0)
			rc = -errno;
		if (dfd >= 0)
			close(dfd);
	}
	if (rc != 0)
		APP_LOG(ERR, "memory-mode guard: cannot write %s: %s; stopping (a restart could "
			"not be refused)", path, strerror(-rc));
	else
		APP_LOG(WARNING, "memory-mode guard: %s written: this node will not start again "
			"until the operator removes it", path);
	return rc;
}

/* ---------------------------------------------------------------------------------------
 * Readiness, status, watchdog.
 * ------------------------------------------------------------------------------------- */

void
app_notify_status(const char *text)
{
	char msg[NOTIFY_STATUS_MAX + 8];
	snprintf(msg, sizeof(msg), "STATUS=%s", text);
	notify(msg);
}

void
app_notify_open(const struct app *app, uint64_t now_ns)
{
	ntf.start_ns = now_ns;
	ntf.next_ns = now_ns;
#ifdef OMSD_SYSTEMD
	uint64_t usec = 0;
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		ntf.watchdog_ns = usec * 1000 / 2;
		ntf.watchdog_next_ns = now_ns;
		for (uint32_t i = 0; i < app->agent_count; i++)
			ntf.cycles[i] = UINT64_MAX; /* the first ping needs no progress */
		APP_LOG(INFO, "systemd watchdog: %" PRIu64 " ms, pinged while every lcore cycles",
			usec / 1000);
	}
#else
	(void)app;
#endif
	snprintf(ntf.status, sizeof(ntf.status), "waiting for leaders");
	app_notify_status(ntf.status);
}

/* The readiness summary into out; true when every hosted shard is ready. */
static bool
summary(const struct app *app, char *out, size_t cap)
{
	const struct app_config *cfg = &app->cfg;
	char shards[NOTIFY_STATUS_MAX] = "";
	size_t off = 0;
	uint32_t ready = 0;

	for (uint32_t i = 0; i < cfg->shard_count; i++) {
		const struct app_shard_conf *sc = &cfg->shards[i];
		uint32_t leader = 0;
		bool ok = sc->service == APP_SERVICE_ECHO || app_shard_ready(app, i);
		(void)app_shard_leads(app, i, &leader);
		ready += ok;
		int n;
		if (sc->service == APP_SERVICE_ECHO)
			n = snprintf(shards + off, sizeof(shards) - off, "%sshard %u echo",
				     i ? ", " : "", sc->id);
		else if (ok)
			n = snprintf(shards + off, sizeof(shards) - off, "%sshard %u led by node %u",
				     i ? ", " : "", sc->id, leader);
		else if (leader == 0)
			n = snprintf(shards + off, sizeof(shards) - off, "%sshard %u no leader",
				     i ? ", " : "", sc->id);
		else
			n = snprintf(shards + off, sizeof(shards) - off,
				     "%sshard %u led by node %u, catching up", i ? ", " : "",
				     sc->id, leader);
		if (n < 0 || (size_t)n >= sizeof(shards) - off) {
			shards[off] = '\0'; /* no room for this shard: the list ends before it */
			off = sizeof(shards) - 1;
		} else {
			off += (size_t)n;
		}
	}
	bool all = ready == cfg->shard_count;
	if (all)
		snprintf(out, cap, "ready: %u shard%s; %s", cfg->shard_count,
			 cfg->shard_count == 1 ? "" : "s", shards);
	else
		snprintf(out, cap, "%s for leaders: %u of %u shards ready; %s",
			 ntf.ready ? "serving, waiting" : "waiting", ready, cfg->shard_count,
			 shards);
	return all;
}

/* WATCHDOG=1 only while every launched lcore has cycled since the last ping: a shard lcore
 * stuck in one call must not be hidden by a healthy main lcore. */
static void
watchdog(const struct app *app, uint64_t now_ns)
{
	if (ntf.watchdog_ns == 0 || now_ns < ntf.watchdog_next_ns)
		return;
	ntf.watchdog_next_ns = now_ns + ntf.watchdog_ns;
	const char *stuck = NULL;
	for (uint32_t i = 0; i < app->agent_count; i++) {
		const struct app_agent *a = &app->agents[i];
		if (!a->launched)
			continue;
		uint64_t c = __atomic_load_n(&a->duty.cycles, __ATOMIC_RELAXED);
		if (c == ntf.cycles[i] && stuck == NULL)
			stuck = a->name;
		ntf.cycles[i] = c;
	}
	if (stuck != NULL) {
		if (!ntf.watchdog_held)
			APP_LOG(ERR, "lcore %s made no cycle in %" PRIu64 " ms: the systemd "
				"watchdog is not pinged", stuck, ntf.watchdog_ns / 1000000);
		ntf.watchdog_held = true;
		return;
	}
	ntf.watchdog_held = false;
	notify("WATCHDOG=1");
}

void
app_notify_tick(const struct app *app, uint64_t now_ns)
{
	watchdog(app, now_ns);
	if (now_ns < ntf.next_ns)
		return;
	ntf.next_ns = now_ns + NOTIFY_EVERY_NS;
	char text[NOTIFY_STATUS_MAX];
	bool all = summary(app, text, sizeof(text));
	if (all && !ntf.ready) {
		ntf.ready = true;
		snprintf(ntf.status, sizeof(ntf.status), "%s", text);
		char msg[NOTIFY_STATUS_MAX + 16];
		snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", text);
		notify(msg);
		APP_LOG(INFO, "service ready: every hosted shard has a leader and has applied its "
			"term (%" PRIu64 " ms after launch): %s", (now_ns - ntf.start_ns) / 1000000,
			text);
		return;
	}
	if (strcmp(text, ntf.status) != 0) {
		snprintf(ntf.status, sizeof(ntf.status), "%s", text);
		app_notify_status(text);
	}
}

void
app_notify_stopping(void)
{
	notify("STOPPING=1\nSTATUS=stopping");
}

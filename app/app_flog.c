/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The durable file log store ([durability] mode = durable; docs/appliance.md): the log
 * store consensus sees is the memory log (reads, replication) with the file log (persist/)
 * following it. What the file log must do — the entries it lacks, truncations, compactions
 * — is handed to its writer (app_logw.c) in the order it happened to the memory log: the
 * [persister] lcore writes them, one batch and one fdatasync per cycle (group commit), and
 * publishes what is synced, which the duty cycle reports to consensus (in memory mode: all
 * the memory log holds). A node without a [persister] lcore writes on the shard lcore, as
 * the same writer drained inline. Votes are saved at once, on the shard lcore. At boot the
 * files are loaded back into the memory log.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "app_shard_int.h"
#include "common/check.h"

#define FLOG_READ_BUF (1u << 20)  /* boot: bytes read from the file log at once */

static int
flog_append(void *st, uint64_t index, const struct wire_entry_hdr *hdr, const void *data)
{
	struct app_shard *s = st;
	return cns_memlog_ops.append(s->log, index, hdr, data);
}

static void
flog_truncate(void *st, uint64_t index)
{
	struct app_shard *s = st;
	cns_memlog_ops.truncate(s->log, index);
	if (s->cns != NULL && index <= cns_commit_index(s->cns)) {
		/* Committed entries leave the log only when a snapshot installed from the leader
		 * replaces all of it (Raft §7: cns_log_reset_to truncates, then compacts to the
		 * snapshot's index). This member may have reported them durable, and the
		 * snapshot's file is not written yet: the files keep them until it is
		 * (flog_compact, flog_snap_ended). */
		s->flog_discard = true;
	} else if (index <= s->flog_pushed) {
		/* Handed over already: the writer cuts the files (and aborts the process if
		 * they refuse: they would keep entries Raft removed). */
		app_logw_push_truncate(s->logw, index);
		s->flog_pushed = index - 1;
	}
	if (s->durable_index >= index) {
		s->durable_index = 0;
		s->durable_term = 0;
	}
}

/* Compact the files up to what consensus compacted and a durable snapshot file covers (the
 * two moves: a compaction, a snapshot file written). Only what such a file covers leaves
 * them: after a failed snapshot write the file log keeps the entries after the last good
 * snapshot file, so a restart (that file plus a replay) still finds them. At or past what
 * was handed over, the writer restarts the file log after it. */
static void
flog_compact_files(struct app_shard *s)
{
	uint64_t upto = s->flog_compact_want < s->snap_file_index ? s->flog_compact_want
								   : s->snap_file_index;
	if (upto <= s->flog_compacted)
		return; /* asked already */
	s->flog_compacted = upto;
	app_logw_push_compact(s->logw, upto);
	if (upto > s->flog_pushed)
		s->flog_pushed = upto;
}

static void
flog_compact(void *st, uint64_t index)
{
	struct app_shard *s = st;
	cns_memlog_ops.compact(s->log, index);
	if (index > s->flog_compact_want)
		s->flog_compact_want = index; /* done once a snapshot file covers it */
	if (s->flog_discard) {
		/* The log was replaced by a snapshot at index: what the files hold past it
		 * conflicts with it and goes now; nothing more is handed over until the
		 * snapshot's file is durable and the file log restarts after it, so the files
		 * never hold new entries after a prefix the snapshot replaced. */
		s->flog_discard = false;
		if (index + 1 <= s->flog_pushed) {
			app_logw_push_truncate(s->logw, index + 1);
			s->flog_pushed = index;
		}
		s->flog_await = index;
	}
	flog_compact_files(s);
}

static const struct wire_entry_hdr *
flog_entry(const void *st, uint64_t index)
{
	const struct app_shard *s = st;
	return cns_memlog_ops.entry(s->log, index);
}

static uint64_t
flog_first(const void *st)
{
	const struct app_shard *s = st;
	return cns_memlog_ops.first_index(s->log);
}

static uint64_t
flog_last(const void *st)
{
	const struct app_shard *s = st;
	return cns_memlog_ops.last_index(s->log);
}

/* Raft Figure 2: currentTerm and votedFor are on stable storage before any answer. The
 * shard lcore does not wait for it: the hard state goes to the file log's writer in the
 * ring's order (app_logw_push_vote: after the entries before it, before any entry of its
 * term), and until the writer has saved it every Raft message this member sends waits in
 * a hold (sent, in order, the cycle the save is seen) and nothing is reported durable.
 * On a node without a [persister] this lcore is the writer and saves it at once. A save
 * that fails is tried again by the writer (APP_LOGW_RETRY_NS) while the member stays
 * silent: to the others it looks like message loss, a leader loses its quorum and steps
 * down. A hold that fills drops what does not fit (counted): Raft takes loss. */
#define APP_RAFT_HOLD (64u << 10)

struct held_msg {
	uint32_t to;
	uint32_t len; /* the message's bytes; the record is padded to 8 */
};

static void
flog_save_vote(void *st, uint64_t term, uint32_t vote)
{
	struct app_shard *s = st;
	cns_memlog_ops.save_vote(s->log, term, vote);
	s->vote_ticket = app_logw_push_vote(s->logw, term, vote);
	app_logw_publish(s->logw);
	if (s->flog_inline)
		app_logw_drain(s->logw, s->clock_ns); /* this lcore is the writer */
}

/* A vote handed to the writer is not on disk yet. */
static bool
vote_pending(struct app_shard *s)
{
	if (s->vote_saved >= s->vote_ticket)
		return false;
	s->vote_saved = app_logw_votes_saved(s->logw);
	return s->vote_saved < s->vote_ticket;
}

static void
held_release(struct app_shard *s)
{
	for (uint32_t off = 0; off < s->held_len;) {
		const struct held_msg *h = (const struct held_msg *)(s->held + off);
		app_shard_host_send(s, h->to, (const struct wire_msg_hdr *)(h + 1));
		off += (uint32_t)sizeof(*h) + ((h->len + 7u) & ~7u);
	}
	s->held_len = 0;
}

static void
held_add(struct app_shard *s, uint32_t to, const struct wire_msg_hdr *msg)
{
	uint32_t len = msg->length;
	uint32_t need = (uint32_t)sizeof(struct held_msg) + ((len + 7u) & ~7u);
	sc_add(s, SC_RAFT_HELD, 1);
	if (s->held == NULL || need > APP_RAFT_HOLD - s->held_len) {
		sc_add(s, SC_RAFT_HELD_DROPPED, 1);
		return;
	}
	struct held_msg *h = (struct held_msg *)(s->held + s->held_len);
	h->to = to;
	h->len = len;
	memcpy(h + 1, msg, len);
	s->held_len += need;
}

/* Once a cycle: what the writer says of the votes. true while one is not on disk. */
static bool
vote_duty(struct app_shard *s)
{
	uint64_t failed = app_logw_counter(s->logw, APP_LOGW_VOTE_FAILED);
	if (failed != s->vote_failed_seen) {
		sc_add(s, SC_VOTE_SAVE_FAILED, failed - s->vote_failed_seen);
		s->vote_failed_seen = failed;
		if (!s->vote_failing) {
			int err = app_logw_vote_error(s->logw);
			APP_LOG(CRIT, "shard %u: saving the vote (term %" PRIu64 ", vote %u) in %s "
				"failed: %s; this member sends no Raft message and reports nothing "
				"durable until it is saved (tried again every %llu ms)", s->id,
				cns_memlog_term(s->log), cns_memlog_vote(s->log), s->vote_dir,
				err != 0 ? strerror(-err) : "an error since cleared",
				APP_LOGW_RETRY_NS / 1000000);
			s->vote_failing = true;
		}
	}
	if (vote_pending(s))
		return true;
	if (s->vote_failing) {
		APP_LOG(NOTICE, "shard %u: vote saved (term %" PRIu64 "): Raft messages flow again",
			s->id, cns_memlog_term(s->log));
		s->vote_failing = false;
	}
	if (s->held_len > 0)
		held_release(s);
	return false;
}

void
app_flog_host_send(void *ctx, uint32_t to, const struct wire_msg_hdr *msg)
{
	struct app_shard *s = ctx;
	if (s->held_len > 0 || s->vote_saved < s->vote_ticket) {
		if (vote_pending(s)) {
			held_add(s, to, msg);
			return;
		}
		held_release(s); /* saved since: what waited goes first */
	}
	app_shard_host_send(ctx, to, msg);
}

const struct cns_log_ops app_flog_ops = {
	.append = flog_append,
	.truncate = flog_truncate,
	.compact = flog_compact,
	.entry = flog_entry,
	.first_index = flog_first,
	.last_index = flog_last,
	.save_vote = flog_save_vote,
};

/* A snapshot file job ended (the writer's report): a durable file lets the file log be
 * compacted behind it, up to what consensus compacted; a failed one keeps the file log from
 * the last good file (flog_compact's clamp). */
static void
flog_snap_ended(struct app_shard *s, uint64_t index, int rc)
{
	bool take = s->snap_job_take;
	s->snap_job_take = false;
	if (rc == 0) {
		s->snap_file_index = index;
		if (take)
			sc_add(s, SC_SNAPSHOTS, 1);
		if (s->flog_await != 0 && index >= s->flog_await)
			s->flog_await = 0; /* the compaction below restarts the file log after it */
		flog_compact_files(s);
		return;
	}
	if (rc == -ECANCELED)
		return; /* superseded by a snapshot installed from the leader */
	sc_add(s, SC_SNAPSHOT_FAILED, 1);
	APP_LOG(ERR, "shard %u: writing the snapshot at %" PRIu64 " in %s failed: %s; the file "
		"log is kept from the last snapshot file (%" PRIu64 ")", s->id, index,
		s->snap_dir, strerror(-rc), s->snap_file_index);
}

/* Collect what the writer finished (each cycle, and before a job is posted). */
static void
flog_snap_poll(struct app_shard *s)
{
	uint64_t index;
	int rc;
	if (app_logw_snap_poll(s->logw, &index, &rc))
		flog_snap_ended(s, index, rc);
}

/* Consensus made a snapshot this member's base (taken here, or installed from the leader)
 * and keeps its bytes unchanged until the next one: the writer writes the file in slices
 * (the shard takes none meanwhile: app_shard_snapshot_take); an installed one supersedes
 * a file still being written. */
void
app_flog_snapshot_saved(void *ctx, const struct cns_snapshot_meta *meta, const void *data)
{
	struct app_shard *s = ctx;
	struct pst_snap_meta pm = {
		.last_index = meta->index,
		.last_term = meta->term,
		.last_time_ns = meta->time_ns,
		.length = meta->len,
	};
	if (app_logw_snap_busy(s->logw)) {
		app_logw_snap_cancel(s->logw);
		flog_snap_poll(s);
	}
	s->snap_job_take = s->snap_taking;
	app_logw_snap_post(s->logw, s->snap_dir, &pm, data);
}

bool
app_flog_snap_busy(struct app_shard *s)
{
	if (s->logw == NULL)
		return false;
	flog_snap_poll(s);
	return app_logw_snap_busy(s->logw);
}

static int
mkdirs(const char *path)
{
	char buf[APP_STR_MAX + 64];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0750) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0750) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* A member saves its term before it writes an entry or installs a snapshot of that term
 * (Raft Figure 2), so a vote file whose term is below the log's or the snapshot's last term
 * was lost or replaced: the member may have voted in any term up to the lost one, and
 * voting again there could elect two leaders in one term. No term can be proven safe, so
 * it does not start (docs/persist.md "A lost vote"). */
static int
vote_check(struct app_shard *s, int vote_rc, uint64_t term, const struct pst_snap_meta *pm,
	   const char *log_dir)
{
	uint64_t log_term = pst_log_last_term(s->plog);
	if (term >= log_term && term >= pm->last_term)
		return 0;
	char what[96];
	if (vote_rc == -ENOENT)
		snprintf(what, sizeof(what), "is missing (term 0)");
	else
		snprintf(what, sizeof(what), "holds term %" PRIu64, term);
	APP_LOG(ERR, "shard %u: refusing to start: the vote file %s/vote %s, but the file log %s "
		"ends at index %" PRIu64 " in term %" PRIu64 " and the snapshot in %s at index "
		"%" PRIu64 " is in term %" PRIu64 ": this member may have voted in term %" PRIu64
		" or later and must not vote there again; restore the vote file "
		"(docs/persist.md \"A lost vote\")", s->id, s->vote_dir, what, log_dir,
		pst_log_last_index(s->plog), log_term, s->snap_dir, pm->last_index, pm->last_term,
		log_term > pm->last_term ? log_term : pm->last_term);
	return -EBADMSG;
}

#define FLOG_FREE_MIN (UINT64_C(2) << 20) /* the file log grows 1 MiB at a time */

/* A disk that cannot take the vote or the log's next growth is found here, before the
 * member answers anyone, not at its first election: the vote is written again (the same
 * record, atomically) and the log's file system must have room to grow. */
static int
disk_probe(struct app_shard *s, const struct cns_boot *boot, const char *log_dir)
{
	int rc = pst_vote_save(s->vote_dir, boot->term, boot->vote);
	if (rc != 0) {
		APP_LOG(ERR, "shard %u: refusing to start: cannot save the vote in %s: %s (a vote "
			"must be on disk before it is sent)", s->id, s->vote_dir, strerror(-rc));
		return rc;
	}
	struct statvfs fs;
	if (statvfs(log_dir, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < FLOG_FREE_MIN) {
		APP_LOG(ERR, "shard %u: refusing to start: %s has %" PRIu64 " KiB free, the file "
			"log needs at least %" PRIu64 " KiB to grow", s->id, log_dir,
			(uint64_t)fs.f_bavail * fs.f_frsize >> 10, FLOG_FREE_MIN >> 10);
		return -ENOSPC;
	}
	return 0;
}

/* Open the files and load what survived into the memory log and the boot record. */
static int
flog_load(struct app_shard *s, struct cns_boot *boot, struct cns_snapshot_meta *snap,
	  void **snap_data)
{
	const struct app_config *cfg = &s->app->cfg;
	char log_dir[APP_STR_MAX + 32], err[PST_ERR_SIZE];
	snprintf(log_dir, sizeof(log_dir), "%s/shard%u/log", cfg->data_dir, s->id);
	snprintf(s->vote_dir, sizeof(s->vote_dir), "%s/shard%u/vote", cfg->data_dir, s->id);
	snprintf(s->snap_dir, sizeof(s->snap_dir), "%s/shard%u/snap", cfg->data_dir, s->id);
	int rc = mkdirs(log_dir);
	if (rc == 0)
		rc = mkdirs(s->vote_dir);
	if (rc == 0)
		rc = mkdirs(s->snap_dir);
	if (rc != 0) {
		APP_LOG(ERR, "shard %u: %s: %s", s->id, cfg->data_dir, strerror(-rc));
		return rc;
	}
	int vote_rc = pst_vote_load(s->vote_dir, &boot->term, &boot->vote);
	if (vote_rc != 0 && vote_rc != -ENOENT) {
		APP_LOG(ERR, "shard %u: vote in %s: %s", s->id, s->vote_dir, strerror(-vote_rc));
		return vote_rc;
	}
	if (vote_rc == 0)
		cns_memlog_ops.save_vote(s->log, boot->term, boot->vote);
	struct pst_snap_meta pm = { 0 };
	uint32_t corrupt = 0;
	rc = pst_snap_load(s->snap_dir, &pm, snap_data, &corrupt, err, sizeof(err));
	if (corrupt > 0) {
		sc_add(s, SC_SNAPSHOT_CORRUPT, corrupt);
		APP_LOG(WARNING, "shard %u: %u corrupt snapshot(s) skipped: %s", s->id, corrupt,
			err);
	}
	uint64_t start = 1;
	if (rc == 0) {
		s->snap_file_index = pm.last_index;
		*snap = (struct cns_snapshot_meta){
			.index = pm.last_index,
			.term = pm.last_term,
			.time_ns = pm.last_time_ns,
			.len = pm.length,
		};
		boot->snapshot = snap;
		boot->snapshot_data = *snap_data;
		start = pm.last_index + 1;
		cns_memlog_ops.compact(s->log, pm.last_index);
	} else if (rc != -ENOENT) {
		APP_LOG(ERR, "shard %u: snapshots in %s: %s", s->id, s->snap_dir, strerror(-rc));
		return rc;
	}
	struct pst_log_config lc = { .dir = log_dir, .sync = PST_SYNC_DATA };
	rc = pst_log_open(&s->plog, &lc, err, sizeof(err));
	if (rc == -EBADMSG) {
		/* Damage to what was once synced, or no way to tell: the operator decides
		 * (docs/persist.md "A damaged log"). */
		APP_LOG(ERR, "shard %u: refusing to start: the file log does not check: %s", s->id,
			err);
		return rc;
	}
	if (rc != 0) {
		APP_LOG(ERR, "shard %u: refusing to start: cannot open the file log in %s: %s (%s)",
			s->id, log_dir, strerror(-rc), err);
		return rc;
	}
	const struct pst_log_repair *rep = pst_log_repair_info(s->plog);
	if (rep->text[0] != '\0') {
		/* A torn write past the last sync (never reported durable): cut, said, counted. */
		APP_LOG(WARNING, "shard %u: file log: %s", s->id, rep->text);
		sc_add(s, SC_FLOG_TORN_BYTES, rep->bytes);
		sc_add(s, SC_FLOG_TORN_REPAIRS, rep->repairs);
	}
	rc = vote_check(s, vote_rc, boot->term, &pm, log_dir);
	if (rc == 0)
		rc = disk_probe(s, boot, log_dir);
	if (rc != 0)
		return rc;
	uint64_t first = pst_log_first_index(s->plog), last = pst_log_last_index(s->plog);
	if (last < start || first > start) {
		if (last >= first && first > start) {
			APP_LOG(ERR, "shard %u: file log starts at %" PRIu64 ", after the snapshot's "
				"next entry %" PRIu64, s->id, first, start);
			return -EBADMSG;
		}
		/* Nothing after the snapshot: start the file log right after it. */
		return last < start ? pst_log_reset(s->plog, start) : 0;
	}
	void *buf = malloc(FLOG_READ_BUF); /* start-up only */
	struct pst_entry ents[64];
	if (buf == NULL)
		return -ENOMEM;
	for (uint64_t i = start; i <= last;) {
		int n = pst_log_read(s->plog, i, ents, 64, buf, FLOG_READ_BUF);
		if (n <= 0) {
			APP_LOG(ERR, "shard %u: file log read at %" PRIu64 ": %s", s->id, i,
				strerror(-n));
			free(buf);
			return n < 0 ? n : -EIO;
		}
		for (int k = 0; k < n; k++, i++) {
			struct wire_entry_hdr h = {
				.term = ents[k].term,
				.time_ns = ents[k].time_ns,
				.data_len = ents[k].data_len,
				.kind = (uint16_t)ents[k].kind,
			};
			rc = cns_memlog_ops.append(s->log, i, &h, ents[k].data);
			if (rc != 0) {
				APP_LOG(ERR, "shard %u: the memory log is too small for the file "
					"log ([limits] log_entries, log_mb)", s->id);
				free(buf);
				return rc;
			}
			sc_add(s, SC_FLOG_BOOT_ENTRIES, 1);
		}
	}
	free(buf);
	return 0;
}

/* The writer's ring: a quarter of the memory log's bytes, 1-64 MiB. */
#define FLOG_RING_MIN (UINT64_C(1) << 20)
#define FLOG_RING_MAX (UINT64_C(64) << 20)

/* The writer thread sleeps on its bell: what the shard hands it wakes it. */
static void
flog_wake(void *bell)
{
	dp_bell_ring(bell);
}

/* A node with a [persister]: one writer thread per shard, on the persister's CPU, so the
 * shards' group commits (write + fdatasync each) and snapshot slices overlap instead of
 * queueing behind each other on one lcore. It sleeps on its bell until the shard hands it
 * something (or APP_LOGW_RETRY_NS passes: a failed write is tried again), and rings the
 * shard's when it synced further, made room or wrote a slice. No DPDK here but the clock. */
#define FLOG_THREAD_WAIT_US 10000u

static void *
flog_thread(void *arg)
{
	struct app_shard *s = arg;
	struct dp_bell *shard_bell = s->app->shard_bell[s->index];
	while (!__atomic_load_n(&s->wt_stop, __ATOMIC_ACQUIRE)) {
		dp_idle_arm(&s->wt_idle);
		uint32_t n = app_logw_drain(s->logw, dp_clock_ns());
		if (n > 0)
			dp_bell_ring(shard_bell);
		dp_idle_run(&s->wt_idle, n);
	}
	return NULL;
}

static int
flog_thread_start(struct app_shard *s)
{
	const struct dp_idle_policy pol = {
		.mode = DP_IDLE_SLEEP, .spins = 0, .sleep_us_min = FLOG_THREAD_WAIT_US,
		.sleep_us_max = FLOG_THREAD_WAIT_US, .wait_us_max = FLOG_THREAD_WAIT_US,
	};
	dp_idle_init(&s->wt_idle, &pol);
	dp_idle_bell(&s->wt_idle, &s->wt_bell, true);
	cpu_set_t cpus;
	CPU_ZERO(&cpus);
	CPU_SET(s->app->cfg.persister.cpu, &cpus);
	pthread_attr_t attr;
	int rc = pthread_attr_init(&attr);
	if (rc == 0)
		rc = pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
	if (rc == 0)
		rc = pthread_create(&s->wt_tid, &attr, flog_thread, s);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		APP_LOG(ERR, "shard %u: the file log's writer thread: %s", s->id, strerror(rc));
		return -rc;
	}
	char name[16];
	snprintf(name, sizeof(name), "omsd-logw%u", s->id);
	pthread_setname_np(s->wt_tid, name);
	s->wt_running = true;
	APP_LOG(INFO, "shard %u: file log writer thread %s on cpu %u (the persister's)", s->id,
		name, (unsigned)s->app->cfg.persister.cpu);
	return 0;
}

void
app_flog_stop(struct app_shard *s)
{
	if (!s->wt_running)
		return;
	__atomic_store_n(&s->wt_stop, 1, __ATOMIC_RELEASE);
	dp_bell_wake(&s->wt_bell);
	pthread_join(s->wt_tid, NULL);
	s->wt_running = false;
}

int
app_flog_boot(struct app_shard *s, struct cns_boot *boot, struct cns_snapshot_meta *snap,
	      void **snap_data)
{
	int rc = flog_load(s, boot, snap, snap_data);
	if (rc != 0) {
		if (s->plog != NULL)
			pst_log_close(s->plog);
		s->plog = NULL;
		return rc;
	}
	const struct app_config *cfg = &s->app->cfg;
	uint64_t ring = ((uint64_t)cfg->log_mb << 20) / 4;
	ring = ring < FLOG_RING_MIN ? FLOG_RING_MIN : ring > FLOG_RING_MAX ? FLOG_RING_MAX : ring;
	s->flog_inline = !cfg->persister.enabled;
	s->flog_pushed = pst_log_last_index(s->plog);
	rc = app_logw_create(&s->logw, s->plog, ring, s->flog_inline, app_flog_say, s);
	if (rc != 0) {
		pst_log_close(s->plog);
		s->plog = NULL;
		return rc;
	}
	s->plog = NULL; /* the writer's now */
	app_logw_set_vote_dir(s->logw, s->vote_dir);
	s->held = malloc(APP_RAFT_HOLD);
	if (s->held == NULL)
		return -ENOMEM; /* the writer goes with the shard (app_shard_free) */
	if (!s->flog_inline) {
		app_logw_set_wake(s->logw, flog_wake, &s->wt_bell);
		rc = flog_thread_start(s);
		if (rc != 0)
			return rc; /* the writer goes with the shard (app_shard_free) */
	}
	if (s->flog_inline)
		APP_LOG(NOTICE, "shard %u: no [persister] lcore: this shard lcore writes and syncs "
			"its file log itself (docs/appliance.md \"Durability\")", s->id);
	return 0;
}

/* Durable mode: hand the writer what the memory log holds beyond what it was given (copies:
 * the memory log reuses its slots), and drain it here when this node has no persister. */
static void
flog_push(struct app_shard *s)
{
	uint64_t mfirst = cns_memlog_ops.first_index(s->log);
	uint64_t mlast = cns_memlog_ops.last_index(s->log);
	if (s->flog_await != 0) {
		mlast = 0; /* a replacing snapshot's file is not durable yet (flog_compact) */
		sc_add(s, SC_FLOG_AWAIT, 1);
	}
	if (mlast > s->flog_pushed && mfirst > s->flog_pushed + 1) {
		/* Compacted behind a snapshot before it was handed over: the snapshot file
		 * covers it, unless writing that file failed; then nothing is durable past the
		 * file log until a snapshot file is written. */
		if (mfirst - 1 > s->snap_file_index) {
			sc_add(s, SC_FLOG_GAP, 1);
			return;
		}
		app_logw_push_compact(s->logw, mfirst - 1);
		s->flog_pushed = mfirst - 1;
		if (mfirst - 1 > s->flog_compacted)
			s->flog_compacted = mfirst - 1;
	}
	for (uint64_t i = s->flog_pushed + 1; i <= mlast; i++) {
		const struct wire_entry_hdr *e = cns_memlog_ops.entry(s->log, i);
		if (!app_logw_push_entry(s->logw, i, e, e + 1))
			break; /* the ring is full: the rest next cycle */
		s->flog_pushed = i;
	}
	app_logw_publish(s->logw);
	if (s->flog_inline)
		app_logw_drain(s->logw, s->clock_ns);
}

void
app_flog_say(void *ctx, bool crit, const char *text)
{
	const struct app_shard *s = ctx;
	if (crit)
		APP_LOG(CRIT, "shard %u: %s", s->id, text);
	else
		APP_LOG(ERR, "shard %u: %s", s->id, text);
}


/* Memory mode: the in-memory log is durable as soon as an entry is in it. Durable mode:
 * what the file log has synced (docs/appliance.md). */
void
app_flog_durable_report(struct app_shard *s)
{
	uint64_t last, term;
	if (s->logw != NULL) {
		bool vote_unsaved = vote_duty(s);
		flog_snap_poll(s);
		flog_push(s); /* the writer keeps them behind the vote */
		if (vote_unsaved)
			return; /* entries of a term not on disk would outlive it */
		/* The writer's synced (index, term): consensus takes it only while that entry
		 * is still in its log (a truncation since makes it stale). Term 0: the point is
		 * covered by a snapshot file, whose entries are committed and stay. */
		app_logw_synced(s->logw, &last, &term);
		if (last == 0)
			return;
		if (term == 0)
			term = cns_term_at(s->cns, last);
		if (term == UINT64_MAX)
			return;
		if (last == s->durable_index && term == s->durable_term)
			return;
		cns_durable(s->cns, last, term);
		s->durable_index = last;
		s->durable_term = term;
		return;
	}
	last = cns_last_index(s->cns);
	if (last == 0)
		return;
	term = cns_last_term(s->cns);
	if (last == s->durable_index && term == s->durable_term)
		return;
	cns_durable(s->cns, last, term);
	s->durable_index = last;
	s->durable_term = term;
}

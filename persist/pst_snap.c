/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshot files (docs/persist.md "Snapshot format").
 *
 * A snapshot is written under a temp name, fsynced, renamed to snap-<index>-<term>.snap and
 * the directory fsynced: a crash at any point leaves either the old snapshot or the new one
 * whole, never a half file under a final name. Loading takes the newest that checks (header
 * CRC, data CRC, length, name); corrupt ones are skipped, reported and renamed aside with a
 * ".corrupt" suffix, never trusted and never deleted: they are the evidence of a disk fault,
 * and the next snapshot's pruning only removes files under a snapshot name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/check.h"
#include "persist/pst_int.h"

#define CORRUPT_SUFFIX ".corrupt" /* a corrupt snapshot set aside as evidence */

struct snap_name {
	uint64_t index; /* from the file name */
	uint64_t term;
};

static int
name_parse(const char *name, struct snap_name *out)
{
	/* snap-<20 digits>-<20 digits>.snap */
	if (strlen(name) != 5 + 20 + 1 + 20 + 5 || strncmp(name, "snap-", 5) != 0 ||
	    name[25] != '-' || strcmp(name + 46, ".snap") != 0)
		return -1;
	uint64_t v[2] = {0, 0};
	for (int k = 0; k < 2; k++) {
		const char *p = name + (k == 0 ? 5 : 26);
		for (int i = 0; i < 20; i++) {
			if (p[i] < '0' || p[i] > '9')
				return -1;
			v[k] = v[k] * 10 + (uint64_t)(p[i] - '0');
		}
	}
	out->index = v[0];
	out->term = v[1];
	return 0;
}

static void
hdr_fill(struct pst_snap_hdr *h, const struct pst_snap_meta *meta, uint32_t data_crc)
{
	memset(h, 0, sizeof(*h));
	h->magic = PST_SNAP_MAGIC;
	h->version = PST_SNAP_VERSION;
	h->last_index = meta->last_index;
	h->last_term = meta->last_term;
	h->last_time_ns = meta->last_time_ns;
	h->length = meta->length;
	h->data_crc = data_crc;
	h->hdr_crc = pst_crc32c(0, h, offsetof(struct pst_snap_hdr, hdr_crc));
}

/* Remove every snapshot older than (index, term) and leftover temp files. A newer one is
 * never touched (it would be the caller's bug to write an older snapshot after it). */
static void
prune(const char *dir, uint64_t index, uint64_t term)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	bool removed = false;
	while ((de = readdir(d)) != NULL) {
		struct snap_name sn;
		bool tmp = strncmp(de->d_name, PST_SNAP_TMP_PREFIX,
				   strlen(PST_SNAP_TMP_PREFIX)) == 0;
		if (!tmp && (name_parse(de->d_name, &sn) < 0 || sn.index > index ||
			     (sn.index == index && sn.term >= term)))
			continue;
		char path[PATH_MAX + 256];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (unlink(path) == 0)
			removed = true;
	}
	closedir(d);
	if (removed)
		pst_dir_sync(dir);
}

int
pst_snap_begin(struct pst_snap_job *job, const char *dir, const struct pst_snap_meta *meta,
	       const void *data)
{
	CHECK(job != NULL);
	CHECK(dir != NULL);
	CHECK(meta != NULL);
	CHECK(meta->length == 0 || data != NULL);
	job->fd = -1;
	if (strlen(dir) + 64 >= sizeof(job->dir) || strlen(dir) + 64 >= PATH_MAX)
		return -ENAMETOOLONG;
	int rc = pst_dir_make(dir);
	if (rc < 0)
		return rc;
	snprintf(job->dir, sizeof(job->dir), "%s", dir);
	snprintf(job->tmp, sizeof(job->tmp), "%s/" PST_SNAP_TMP_PREFIX "%020" PRIu64 "-%d", dir,
		 meta->last_index, (int)getpid());
	job->fd = open(job->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (job->fd < 0)
		return -errno;
	job->data = data;
	job->meta = *meta;
	job->done = 0;
	job->crc = 0;
	return 0;
}

void
pst_snap_abort(struct pst_snap_job *job)
{
	if (job->fd < 0)
		return;
	close(job->fd);
	job->fd = -1;
	unlink(job->tmp);
}

static int
job_fail(struct pst_snap_job *job, int rc)
{
	pst_snap_abort(job);
	return rc;
}

int
pst_snap_step(struct pst_snap_job *job, size_t max)
{
	CHECK(job->fd >= 0);
	CHECK(max > 0);
	uint64_t left = job->meta.length - job->done;
	if (left > 0) {
		uint64_t n = left < max ? left : max;
		uint64_t at = sizeof(struct pst_snap_hdr) + job->done;
		int rc = pst_write_full(job->fd, job->data + job->done, n, at);
		if (rc < 0)
			return job_fail(job, rc);
		job->crc = pst_crc32c(job->crc, job->data + job->done, n);
		job->done += n;
		/* Start the write-back of this slice now: the final fsync has less to do. */
		(void)sync_file_range(job->fd, (off_t)at, (off_t)n, SYNC_FILE_RANGE_WRITE);
		if (job->done < job->meta.length)
			return 1;
	}
	struct pst_snap_hdr h;
	hdr_fill(&h, &job->meta, job->crc);
	int rc = pst_write_full(job->fd, &h, sizeof(h), 0);
	if (rc < 0)
		return job_fail(job, rc);
	if (fsync(job->fd) < 0)
		return job_fail(job, -errno);
	int fd = job->fd;
	job->fd = -1;
	if (close(fd) < 0) {
		unlink(job->tmp);
		return -errno;
	}
	char final[PST_SNAP_PATH_MAX + 64];
	snprintf(final, sizeof(final), "%s/" PST_SNAP_NAME_FMT, job->dir, job->meta.last_index,
		 job->meta.last_term);
	if (rename(job->tmp, final) < 0) {
		rc = -errno;
		unlink(job->tmp);
		return rc;
	}
	rc = pst_dir_sync(job->dir);
	if (rc < 0)
		return rc;
	/* The new snapshot is durable: everything behind it can go. */
	prune(job->dir, job->meta.last_index, job->meta.last_term);
	return 0;
}

int
pst_snap_write(const char *dir, const struct pst_snap_meta *meta, const void *data,
	       struct pst_log *log)
{
	struct pst_snap_job job;
	int rc = pst_snap_begin(&job, dir, meta, data);
	while (rc == 0 && (rc = pst_snap_step(&job, SIZE_MAX)) == 1)
		rc = 0;
	if (rc < 0)
		return rc;
	if (log != NULL) {
		rc = pst_log_compact(log, meta->last_index);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int
cmp_newest(const void *a, const void *b)
{
	const struct snap_name *x = a, *y = b;
	if (x->index != y->index)
		return x->index > y->index ? -1 : 1;
	if (x->term != y->term)
		return x->term > y->term ? -1 : 1;
	return 0;
}

/* Read and check one snapshot file. 0, or -EBADMSG with a reason in why. */
static int
snap_read(const char *path, const struct snap_name *sn, struct pst_snap_meta *meta,
	  void **data, char *why, size_t why_size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, why_size, "open: %s", strerror(errno));
		return -errno;
	}
	int rc = -EBADMSG;
	void *buf = NULL;
	struct stat st;
	struct pst_snap_hdr h;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(why, why_size, "stat: %s", strerror(errno));
		goto out;
	}
	if ((uint64_t)st.st_size < sizeof(h) ||
	    pst_read_full(fd, &h, sizeof(h), 0) < 0) {
		snprintf(why, why_size, "header truncated");
		goto out;
	}
	if (h.magic != PST_SNAP_MAGIC || h.version != PST_SNAP_VERSION ||
	    h.hdr_crc != pst_crc32c(0, &h, offsetof(struct pst_snap_hdr, hdr_crc))) {
		snprintf(why, why_size, "bad header");
		goto out;
	}
	if (h.last_index != sn->index || h.last_term != sn->term) {
		snprintf(why, why_size, "header does not match the name");
		goto out;
	}
	if ((uint64_t)st.st_size != sizeof(h) + h.length) {
		snprintf(why, why_size, "length %" PRIu64 " but %" PRIu64 " data bytes",
			 h.length, (uint64_t)st.st_size - sizeof(h));
		goto out;
	}
	buf = malloc(h.length ? h.length : 1);
	if (buf == NULL) {
		rc = -ENOMEM;
		snprintf(why, why_size, "out of memory");
		goto out;
	}
	if (h.length > 0 && pst_read_full(fd, buf, h.length, sizeof(h)) < 0) {
		snprintf(why, why_size, "data unreadable");
		goto out;
	}
	if (pst_crc32c(0, buf, h.length) != h.data_crc) {
		snprintf(why, why_size, "data CRC mismatch");
		goto out;
	}
	meta->last_index = h.last_index;
	meta->last_term = h.last_term;
	meta->last_time_ns = h.last_time_ns;
	meta->length = h.length;
	*data = buf;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

/* Rename a corrupt snapshot to <path>.corrupt (or .corrupt-N if that exists), so that no
 * later load tries it and no pruning removes it. The new name goes to aside. 0 or -errno. */
static int
set_aside(const char *dir, const char *path, char *aside, size_t aside_size)
{
	for (int k = 0; k < 100; k++) {
		int w = k == 0 ? snprintf(aside, aside_size, "%s" CORRUPT_SUFFIX, path)
			       : snprintf(aside, aside_size, "%s" CORRUPT_SUFFIX "-%d",
					  path, k);
		if (w < 0 || (size_t)w >= aside_size)
			return -ENAMETOOLONG;
		if (access(aside, F_OK) == 0)
			continue;
		if (rename(path, aside) < 0)
			return -errno;
		return pst_dir_sync(dir);
	}
	return -EEXIST;
}

int
pst_snap_load(const char *dir, struct pst_snap_meta *meta, void **data, uint32_t *corrupt,
	      char *err, size_t err_size)
{
	CHECK(dir != NULL && meta != NULL && data != NULL);
	if (corrupt != NULL)
		*corrupt = 0;
	if (err != NULL && err_size > 0)
		err[0] = '\0';
	DIR *d = opendir(dir);
	if (d == NULL)
		return errno == ENOENT ? -ENOENT : -errno;
	struct snap_name *names = NULL;
	uint32_t n = 0, cap = 0;
	bool tmp_removed = false;
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, PST_SNAP_TMP_PREFIX, strlen(PST_SNAP_TMP_PREFIX)) == 0) {
			/* A write that crashed before its rename: never part of the state. */
			char path[PATH_MAX];
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			if (unlink(path) == 0)
				tmp_removed = true;
			continue;
		}
		struct snap_name sn;
		if (name_parse(de->d_name, &sn) < 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			struct snap_name *nn = realloc(names, cap * sizeof(*nn));
			if (nn == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			names = nn;
		}
		names[n++] = sn;
	}
	if (tmp_removed)
		pst_dir_sync(dir);
	if (n > 0)
		qsort(names, n, sizeof(*names), cmp_newest);
	rc = -ENOENT;
	size_t used = 0;
	for (uint32_t i = 0; i < n; i++) {
		char path[PATH_MAX], why[128];
		snprintf(path, sizeof(path), "%s/" PST_SNAP_NAME_FMT, dir, names[i].index,
			 names[i].term);
		int r = snap_read(path, &names[i], meta, data, why, sizeof(why));
		if (r == 0) {
			rc = 0;
			break;
		}
		if (r == -ENOMEM) {
			rc = r;
			break;
		}
		if (corrupt != NULL)
			(*corrupt)++;
		char aside[PATH_MAX + 16] = "";
		if (r == -EBADMSG) {
			int a = set_aside(dir, path, aside, sizeof(aside));
			if (a < 0)
				snprintf(aside, sizeof(aside), "left in place, renaming failed: %s",
					 strerror(-a));
		}
		if (err != NULL && used < err_size) {
			int w = snprintf(err + used, err_size - used, "%s%s: %s%s%s%s",
					 used ? "; " : "", path, why, aside[0] ? " (kept as " : "",
					 aside, aside[0] ? ")" : "");
			if (w > 0)
				used += (size_t)w;
		}
	}
out:
	closedir(d);
	free(names);
	return rc;
}

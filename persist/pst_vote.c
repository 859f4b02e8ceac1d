/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Raft hard state (Figure 2: currentTerm and votedFor), one small file replaced
 * atomically: a vote is never sent before its record is durable (Raft §5.2, §5.4).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/check.h"
#include "persist/pst_int.h"

#define VOTE_MAGIC UINT64_C(0x31544f5644534d4f) /* "OMSDVOT1" */

struct vote_rec {
	uint64_t magic; /* VOTE_MAGIC */
	uint64_t term;  /* currentTerm */
	uint32_t vote;  /* votedFor, 0: none */
	uint32_t crc;   /* CRC32C of the 20 bytes before */
};
static_assert(sizeof(struct vote_rec) == 24, "vote_rec");

int
pst_vote_save(const char *dir, uint64_t term, uint32_t vote)
{
	CHECK(dir != NULL);
	char tmp[PATH_MAX], final[PATH_MAX];
	if (strlen(dir) + 16 >= PATH_MAX)
		return -ENAMETOOLONG;
	int rc = pst_dir_make(dir);
	if (rc < 0)
		return rc;
	snprintf(tmp, sizeof(tmp), "%s/.tmp-vote", dir);
	snprintf(final, sizeof(final), "%s/vote", dir);
	struct vote_rec r = {.magic = VOTE_MAGIC, .term = term, .vote = vote};
	r.crc = pst_crc32c(0, &r, offsetof(struct vote_rec, crc));
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	rc = pst_write_full(fd, &r, sizeof(r), 0);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, final) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		return rc;
	}
	return pst_dir_sync(dir);
}

int
pst_vote_load(const char *dir, uint64_t *term, uint32_t *vote)
{
	CHECK(dir != NULL && term != NULL && vote != NULL);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/vote", dir);
	*term = 0;
	*vote = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	struct vote_rec r;
	struct stat st;
	int rc = fstat(fd, &st) < 0 ? -errno : pst_read_full(fd, &r, sizeof(r), 0);
	close(fd);
	if (rc < 0)
		return rc == -EIO ? -EBADMSG : rc;
	if (st.st_size != (off_t)sizeof(r))
		return -EBADMSG; /* the writer writes one record: anything else is damage */
	if (r.magic != VOTE_MAGIC || r.crc != pst_crc32c(0, &r, offsetof(struct vote_rec, crc)))
		return -EBADMSG;
	*term = r.term;
	*vote = r.vote;
	return 0;
}

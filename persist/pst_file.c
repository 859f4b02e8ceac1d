/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File helpers shared by the log, snapshot and vote files, and the counter labels.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/check.h"
#include "persist/pst_int.h"

static const char *const counter_names[] = {
#define PST_COUNTER_NAME(name, text) #name,
	PST_COUNTERS(PST_COUNTER_NAME)
#undef PST_COUNTER_NAME
};

static const char *const counter_texts[] = {
#define PST_COUNTER_TEXT(name, text) text,
	PST_COUNTERS(PST_COUNTER_TEXT)
#undef PST_COUNTER_TEXT
};

const char *
pst_counter_name(enum pst_counter counter)
{
	return (unsigned)counter < PST_C_COUNT ? counter_names[counter] : "?";
}

const char *
pst_counter_text(enum pst_counter counter)
{
	return (unsigned)counter < PST_C_COUNT ? counter_texts[counter] : "?";
}

int
pst_dir_sync(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

int
pst_dir_make(const char *dir)
{
	if (mkdir(dir, 0750) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* pwrite() src or pread() into dst (exactly one is non-NULL) until len bytes moved,
 * retrying short transfers and EINTR. A transfer of nothing is -EIO: EOF on a read, a
 * device that takes nothing on a write. 0 or -errno. */
static int
io_full(int fd, const char *src, char *dst, size_t len, uint64_t offset)
{
	if (len == 0)
		return 0;
	CHECK((src == NULL) != (dst == NULL));
	size_t done = 0;
	while (done < len) {
		ssize_t n = src != NULL
				    ? pwrite(fd, src + done, len - done, (off_t)(offset + done))
				    : pread(fd, dst + done, len - done, (off_t)(offset + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

int
pst_write_full(int fd, const void *buf, size_t len, uint64_t offset)
{
	return io_full(fd, buf, NULL, len, offset);
}

int
pst_read_full(int fd, void *buf, size_t len, uint64_t offset)
{
	return io_full(fd, NULL, buf, len, offset);
}

void
pst_errf(char *err, size_t err_size, const char *fmt, ...)
{
	if (err == NULL || err_size == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
}

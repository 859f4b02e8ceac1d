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

int
pst_write_full(int fd, const void *buf, size_t len, uint64_t offset)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t)offset);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		offset += (uint64_t)n;
	}
	return 0;
}

int
pst_read_full(int fd, void *buf, size_t len, uint64_t offset)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = pread(fd, p, len, (off_t)offset);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		offset += (uint64_t)n;
	}
	return 0;
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

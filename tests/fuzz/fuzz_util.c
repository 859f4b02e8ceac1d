/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "fuzz_util.h"

static char dir[64];

static void
dir_remove(void)
{
	fz_dir_clear(dir);
	rmdir(dir);
}

const char *
fz_dir(void)
{
	if (dir[0] == '\0') {
		/* tmpfs when there is one: the writers under test fsync every file. */
		snprintf(dir, sizeof(dir), "/dev/shm/omsd-fuzz-XXXXXX");
		if (mkdtemp(dir) == NULL) {
			snprintf(dir, sizeof(dir), "/tmp/omsd-fuzz-XXXXXX");
			CHECK(mkdtemp(dir) != NULL);
		}
		atexit(dir_remove);
	}
	return dir;
}

void
fz_dir_clear(const char *d)
{
	DIR *dp = opendir(d);
	if (dp == NULL)
		return;
	struct dirent *de;
	char path[PATH_MAX];
	while ((de = readdir(dp)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", d, de->d_name);
		unlink(path);
	}
	closedir(dp);
}

void
fz_write(const char *d, const char *name, const void *data, size_t len, char *path,
	 size_t path_size)
{
	snprintf(path, path_size, "%s/%s", d, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	const uint8_t *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		CHECK(n > 0);
		p += n;
		len -= (size_t)n;
	}
	CHECK(close(fd) == 0);
}

void
fz_quiet_stdout(void)
{
	static int done;
	if (done)
		return;
	fflush(stdout);
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(dup2(fd, STDOUT_FILENO) == STDOUT_FILENO);
	close(fd);
	done = 1;
}

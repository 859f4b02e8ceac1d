/* SPDX-License-Identifier: Apache-2.0 */
/* A node's API keys read from [sessions] keys_file (app_keys.h). */
#include "app_keys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

struct app_keyset *
app_keyset_parse(char *text, size_t len, const char *name, char *err, size_t cap)
{
	/* One key a line at most. */
	uint32_t lines = 1;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	struct app_keyset *k = calloc(1, sizeof(*k));
	if (k != NULL) {
		k->ks.cap = lines;
		k->ks.keys = calloc(lines, sizeof(k->ks.keys[0]));
	}
	if (k == NULL || k->ks.keys == NULL) {
		snprintf(err, cap, "%s: out of memory", name);
		app_keyset_free(k);
		k = NULL;
	} else if (auth_keys_parse(text, len, name, &k->ks, err, cap) != 0) {
		app_keyset_free(k);
		k = NULL;
	} else {
		k->digest = XXH3_64bits(text, len);
	}
	explicit_bzero(text, len);
	return k;
}

int
app_keyset_load(const char *path, struct app_keyset **out, char *err, size_t cap)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, cap, "%s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, cap, "%s: not a regular file", path);
		close(fd);
		return -1;
	}
	/* The secrets are the keys to every account they name: the owner and at most its
	 * group (root:omsd 0640) read them, only the owner writes. */
	if ((st.st_mode & 0027) != 0) {
		snprintf(err, cap, "%s: mode %03o lets others read or change the secrets (chmod "
			 "600, or 640 for the service's group)", path, (unsigned)(st.st_mode & 0777));
		close(fd);
		return -1;
	}
	if (st.st_size > (off_t)APP_KEYS_FILE_MAX) {
		snprintf(err, cap, "%s: larger than %u bytes", path, APP_KEYS_FILE_MAX);
		close(fd);
		return -1;
	}
	size_t len = (size_t)st.st_size;
	char *text = malloc(len + 1);
	size_t got = 0;
	while (text != NULL && got < len) {
		ssize_t n = read(fd, text + got, len - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (text == NULL || got != len) {
		snprintf(err, cap, "%s: %s", path, text == NULL ? "out of memory" : "short read");
		if (text != NULL)
			explicit_bzero(text, got);
		free(text);
		return -1;
	}
	struct app_keyset *k = app_keyset_parse(text, len, path, err, cap);
	free(text);
	if (k == NULL)
		return -1;
	k->mtime = st.st_mtim;
	k->size = st.st_size;
	k->ino = st.st_ino;
	*out = k;
	return 0;
}

void
app_keyset_free(struct app_keyset *k)
{
	if (k == NULL)
		return;
	if (k->ks.keys != NULL)
		explicit_bzero(k->ks.keys, k->ks.cap * sizeof(k->ks.keys[0]));
	free(k->ks.keys);
	free(k);
}

bool
app_keyset_changed(const struct app_keyset *k, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return true;
	return st.st_ino != k->ino || st.st_size != k->size ||
	       st.st_mtim.tv_sec != k->mtime.tv_sec || st.st_mtim.tv_nsec != k->mtime.tv_nsec;
}

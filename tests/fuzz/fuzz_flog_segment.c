/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the Raft log's segment reader (pst_log_open and pst_log_read,
 * persist/pst_log.c): the input is one or more segment files, written into an empty log
 * directory (each named after the first index its header claims) and opened the way omsd
 * opens its log at boot.
 *
 * Byte 0 is a mode: bit 0 makes the CRCs right (segment header and every record that can be
 * walked), so the fuzzer reaches the checks behind them (index gaps, terms going back,
 * lengths, a bad record followed by a good one). The rest is split into segments at each
 * "\n--SEG--\n".
 * Properties: open answers 0 or an error (-EBADMSG with a text naming the file); an opened
 * log reads back every entry from first to last, each index in order, terms never going
 * back, the last one's term the log's last term; an append after it and a close and reopen
 * keep everything (the entry reads back the same).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "fuzz_util.h"
#include "persist/pst_int.h"

#define SEP "\n--SEG--\n"
#define SEGS_MAX 4
#define BUF_SIZE (1u << 20)

static uint8_t *buf;

static void
fix_crcs(uint8_t *s, size_t len)
{
	if (len < sizeof(struct pst_seg_hdr))
		return;
	struct pst_seg_hdr h;
	memcpy(&h, s, sizeof(h));
	h.crc = pst_crc32c(0, &h, offsetof(struct pst_seg_hdr, crc));
	memcpy(s, &h, sizeof(h));
	for (size_t off = sizeof(h); off + sizeof(struct pst_rec_hdr) <= len;) {
		struct pst_rec_hdr r;
		memcpy(&r, s + off, sizeof(r));
		uint64_t rs = pst_rec_size(r.data_len);
		if (r.magic != PST_REC_MAGIC || rs > len - off)
			break;
		r.crc = pst_crc32c(0, s + off + 4, rs - 4);
		memcpy(s + off, &r.crc, 4);
		off += rs;
	}
}

static void
check_log(struct pst_log *log)
{
	uint64_t first = pst_log_first_index(log), last = pst_log_last_index(log);
	CHECK(first >= 1 && last + 1 >= first);
	uint64_t term = 0, i = first;
	struct pst_entry e[16];
	while (i <= last && i != 0) {
		int n = pst_log_read(log, i, e, 16, buf, BUF_SIZE);
		CHECK(n >= 1);
		for (int k = 0; k < n; k++) {
			CHECK(e[k].index == i + (uint64_t)k);
			CHECK(e[k].term >= term);
			term = e[k].term;
		}
		uint64_t t;
		CHECK(pst_log_term(log, i, &t) == 0 && t == e[0].term);
		i += (uint64_t)n;
	}
	if (last >= first)
		CHECK(pst_log_last_term(log) == term);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (buf == NULL) {
		buf = aligned_alloc(64, BUF_SIZE);
		CHECK(buf != NULL);
	}
	const char *dir = fz_dir();
	fz_dir_clear(dir);
	uint8_t *in = malloc(size);
	CHECK(in != NULL);
	memcpy(in, data + 1, size - 1);
	size_t left = size - 1, seps = strlen(SEP);
	uint8_t *p = in;
	for (int k = 0; k < SEGS_MAX && (left > 0 || k == 0); k++) {
		uint8_t *end = memmem(p, left, SEP, seps);
		size_t len = end != NULL && k + 1 < SEGS_MAX ? (size_t)(end - p) : left;
		if (data[0] & 1)
			fix_crcs(p, len);
		uint64_t first = 1;
		if (len >= sizeof(struct pst_seg_hdr))
			memcpy(&first, p + offsetof(struct pst_seg_hdr, first_index), 8);
		char name[64], path[512];
		snprintf(name, sizeof(name), PST_SEG_NAME_FMT, first);
		fz_write(dir, name, p, len, path, sizeof(path));
		if (len == left)
			break;
		p += len + seps;
		left -= len + seps;
	}
	free(in);

	struct pst_log_config cfg = {.dir = dir, .segment_size = 1u << 20, .sync = PST_SYNC_NONE};
	struct pst_log *log;
	char err[PST_ERR_SIZE] = "";
	int rc = pst_log_open(&log, &cfg, err, sizeof(err));
	if (rc != 0) {
		CHECK(rc < 0);
		if (rc == -EBADMSG)
			CHECK(strncmp(err, dir, strlen(dir)) == 0);
		return 0;
	}
	check_log(log);
	uint64_t last = pst_log_last_index(log);
	if (last < UINT64_MAX - 1) {
		static const uint64_t payload[3] = {1, 2, 3};
		struct pst_entry e = {.index = last + 1, .term = pst_log_last_term(log) | 1,
				      .time_ns = 5, .kind = 1, .data_len = sizeof(payload),
				      .data = payload};
		CHECK(pst_log_append(log, &e, 1) == 0);
		pst_log_close(log);
		CHECK(pst_log_open(&log, &cfg, err, sizeof(err)) == 0);
		CHECK(pst_log_last_index(log) == last + 1);
		check_log(log);
		struct pst_entry back;
		CHECK(pst_log_read(log, last + 1, &back, 1, buf, BUF_SIZE) == 1);
		CHECK(back.term == e.term && back.data_len == sizeof(payload));
		CHECK(memcmp(back.data, payload, sizeof(payload)) == 0);
	}
	pst_log_close(log);
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes the binary seed corpora from the real writers, so each fuzzer starts from inputs
 * that pass the first checks (tests/fuzz/make-corpus runs it for every KIND):
 *   wire          one valid frame per message family (fuzz_wire)
 *   me_snapshot   snapshots of the small engine after a seeded market (fuzz_me_snapshot)
 *   oms_snapshot  snapshots of the small OMS shard after the same market (fuzz_oms_snapshot)
 *   cns_snapshot  index/term/time + an engine snapshot (fuzz_cns_snapshot)
 *   snap_file     snapshot files written by pst_snap_write (fuzz_snap_file)
 *   flog_segment  log segments written by pst_log_append (fuzz_flog_segment)
 *   vote          vote files written by pst_vote_save (fuzz_vote)
 *   pg_row        the three statements' answer rows, as libpq text (fuzz_pg_row)
 * Usage: fuzz-seeds KIND DIR
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "common/wire.h"
#include "persist/pst_int.h"
#include "tests/fuzz/fuzz_state.h"

static _Alignas(8) uint8_t buf[WIRE_FRAME_MAX];

static void
save_bytes(const char *dir, const char *name, const void *data, size_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (f == NULL || fwrite(data, 1, len, f) != len) {
		perror(path);
		exit(1);
	}
	fclose(f);
}

static void
save(const char *dir, const char *name, uint32_t len)
{
	save_bytes(dir, name, buf, len);
}

static void
wire_seeds(char **argv)
{
	struct wire_builder b;

	struct wire_new_order o = {0};
	wire_hdr_init(&o.hdr, WIRE_NEW_ORDER, 1);
	o.user = 7, o.cl_ord_id = 1, o.symbol = 1, o.side = WIRE_SIDE_BUY;
	o.ord_type = WIRE_ORD_LIMIT, o.tif = WIRE_TIF_GTC, o.px = 100, o.qty = 5;
	struct wire_cancel c = {0};
	wire_hdr_init(&c.hdr, WIRE_CANCEL, 1);
	c.user = 7, c.cl_ord_id = 2, c.orig_cl_ord_id = 1;
	wire_builder_init(&b, buf, sizeof(buf), 9);
	wire_builder_add(&b, &o);
	wire_builder_add(&b, &c);
	save(argv[1], "orders", wire_builder_finish(&b, NULL));

	struct wire_me_event ev = {0};
	wire_hdr_init(&ev.hdr, WIRE_ME_EVENT, 1);
	ev.seq = 1, ev.event = WIRE_EV_FILL, ev.side = WIRE_SIDE_SELL, ev.liquidity = 1;
	struct wire_submit s = {0};
	wire_hdr_init(&s.hdr, WIRE_SUBMIT, 2);
	s.oid = wire_oid_make(1, 7, 1), s.side = WIRE_SIDE_BUY, s.ord_type = WIRE_ORD_MARKET;
	s.tif = WIRE_TIF_IOC, s.quote_qty = 1000;
	wire_builder_init(&b, buf, sizeof(buf), 2);
	wire_builder_add(&b, &s);
	wire_builder_add(&b, &ev);
	uint32_t me_len = wire_builder_finish(&b, NULL);
	save(argv[1], "me", me_len);

	/* The same frame from a node one minor newer (docs/wire.md, "Versions"): its SUBMIT
	 * carries 16 bytes of fields that minor appended, which the decoder skips. */
	static _Alignas(8) uint8_t next[WIRE_FRAME_MAX];
	uint32_t sub_len = wire_type_size_sent(WIRE_SUBMIT);
	memcpy(next, buf, sizeof(struct wire_frame_hdr) + sub_len);
	memset(next + sizeof(struct wire_frame_hdr) + sub_len, 0x5a, 16);
	memcpy(next + sizeof(struct wire_frame_hdr) + sub_len + 16,
	       buf + sizeof(struct wire_frame_hdr) + sub_len,
	       me_len - sizeof(struct wire_frame_hdr) - sub_len);
	struct wire_frame_hdr *nfh = (struct wire_frame_hdr *)(void *)next;
	struct wire_msg_hdr *nsub = (struct wire_msg_hdr *)(void *)(nfh + 1);
	nsub->length = (uint16_t)(sub_len + 16);
	nfh->length = (uint16_t)(me_len + 16);
	nfh->version_minor = WIRE_VERSION_MINOR + 1;
	save_bytes(argv[1], "me-next-minor", next, me_len + 16);

	_Alignas(8) uint8_t tail[sizeof(struct wire_entry_hdr) + sizeof(o)];
	struct wire_entry_hdr e = {.term = 1, .time_ns = 5, .data_len = sizeof(o), .kind = 1};
	memcpy(tail, &e, sizeof(e));
	memcpy(tail + sizeof(e), &o, sizeof(o));
	struct wire_append_entries ae = {0};
	wire_hdr_init(&ae.hdr, WIRE_APPEND_ENTRIES, 1);
	ae.term = 1, ae.entry_count = 1, ae.tail_len = sizeof(tail);
	struct wire_request_vote rv = {0};
	wire_hdr_init(&rv.hdr, WIRE_REQUEST_VOTE, 1);
	rv.hdr.flags = WIRE_VOTE_F_PRE, rv.term = 2;
	wire_builder_init(&b, buf, sizeof(buf), 3);
	wire_builder_add_tail(&b, &ae, tail, sizeof(tail));
	wire_builder_add(&b, &rv);
	save(argv[1], "raft", wire_builder_finish(&b, NULL));

	struct wire_hydrate_user hu = {0};
	wire_hdr_init(&hu.hdr, WIRE_HYDRATE_USER, 1);
	hu.status = WIRE_HYD_OK, hu.state.user = 7, hu.state.balance_count = 1;
	hu.state.balances[0].asset = 1, hu.state.balances[0].total = 100;
	struct wire_routing_config rc = {0};
	wire_hdr_init(&rc.hdr, WIRE_ROUTING_CONFIG, 1);
	rc.epoch = 1, rc.shard_count = 1, rc.shards[0].shard = 1;
	rc.shards[0].state = WIRE_SHARD_ACTIVE;
	wire_builder_init(&b, buf, sizeof(buf), 4);
	wire_builder_add(&b, &hu);
	wire_builder_add(&b, &rc);
	save(argv[1], "admin", wire_builder_finish(&b, NULL));

	/* Control-socket forwarding: an admin message, a membership change and a leadership
	 * transfer to a leader. */
	struct wire_symbol_status_msg ss = {0};
	wire_hdr_init(&ss.hdr, WIRE_SYMBOL_STATUS, 2);
	ss.symbol = 1, ss.status = WIRE_SYM_HALTED;
	struct wire_member_change mc = {0};
	wire_hdr_init(&mc.hdr, WIRE_MEMBER_CHANGE, 2);
	mc.node = 4, mc.op = WIRE_MEMBER_PROMOTE;
	struct wire_fwd_admin fa = {0};
	wire_hdr_init(&fa.hdr, WIRE_FORWARDED_ADMIN, 2);
	fa.fwd_id = 1, fa.origin = 3, fa.reply_shard = 1, fa.tail_len = sizeof(ss);
	wire_builder_init(&b, buf, sizeof(buf), 3);
	wire_builder_add_tail(&b, &fa, &ss, sizeof(ss));
	fa.fwd_id = 2, fa.tail_len = sizeof(mc);
	wire_builder_add_tail(&b, &fa, &mc, sizeof(mc));
	struct wire_leader_transfer lt = {0};
	wire_hdr_init(&lt.hdr, WIRE_LEADER_TRANSFER, 2);
	lt.node = 3;
	fa.fwd_id = 3, fa.tail_len = sizeof(lt);
	wire_builder_add_tail(&b, &fa, &lt, sizeof(lt));
	save(argv[1], "forwarded", wire_builder_finish(&b, NULL));

	/* A live symbol move's steps (docs/me.md "Moving a symbol with its book"): WATCH, OUT, a
	 * chunk of two orders (an ADD and a REMOVE), IN. */
	struct wire_symbol_move sm = {0};
	wire_hdr_init(&sm.hdr, WIRE_SYMBOL_MOVE, 2);
	sm.move_id = 9, sm.symbol = 1, sm.peer = 3, sm.phase = WIRE_MOVE_WATCH;
	struct wire_symbol_move watch = sm;
	sm.phase = WIRE_MOVE_OUT;
	struct wire_book_order bo[2];
	memset(bo, 0, sizeof(bo));
	bo[0].oid = wire_oid_make(1, 7, 1), bo[0].px = 100, bo[0].leaves = 2;
	bo[0].side = WIRE_SIDE_BUY, bo[0].ord_type = WIRE_ORD_LIMIT, bo[0].tif = WIRE_TIF_GTC;
	bo[0].stream = 1;
	bo[1] = bo[0];
	bo[1].oid = wire_oid_make(1, 7, 2), bo[1].op = WIRE_BOOK_REMOVE;
	struct wire_book_chunk bc = {0};
	wire_hdr_init(&bc.hdr, WIRE_BOOK_CHUNK, 3);
	bc.move_id = 9, bc.symbol = 1, bc.seq = 0, bc.source = 2, bc.count = 2;
	bc.tail_len = sizeof(bo);
	wire_builder_init(&b, buf, sizeof(buf), 3);
	wire_builder_add(&b, &watch);
	wire_builder_add(&b, &sm);
	wire_builder_add_tail(&b, &bc, bo, sizeof(bo));
	sm.phase = WIRE_MOVE_IN, sm.count = 1, sm.hash = 1, sm.status = WIRE_SYM_TRADING;
	wire_builder_add(&b, &sm);
	save(argv[1], "move", wire_builder_finish(&b, NULL));
}

/* ---- snapshots of the small engine and shard (fuzz_state.c) ---- */

#define SNAP_MAX (4u << 20)

static uint8_t *snap;

static size_t
market(uint32_t steps, uint64_t seed, struct me **me_out, struct oms **oms_out)
{
	struct me *me = fz_me_new(0);
	struct oms *oms = fz_oms_new(0);
	uint64_t now;
	fz_market(oms, me, steps, seed, &now);
	*me_out = me;
	*oms_out = oms;
	return 0;
}

static void
snapshot_seeds(const char *dir, int kind)
{
	/* An engine snapshot is ~140 KB whatever the market (its hash tables and the stream map
	 * are written whole): one seed each for the engine and consensus keeps the corpus small. */
	static const uint32_t steps[] = {200, 20, 0};
	for (int i = 0; i < (kind == 1 ? 3 : 1); i++) {
		struct me *me;
		struct oms *oms;
		market(steps[i], 7 + (uint64_t)i, &me, &oms);
		size_t n = kind == 1 ? oms_snapshot(oms, snap, SNAP_MAX) : me_snapshot(me, snap, SNAP_MAX);
		CHECK(n > 0);
		char name[64];
		snprintf(name, sizeof(name), "market-%u", steps[i]);
		if (kind == 2) {
			/* fuzz_cns_snapshot: mode, index, term, time, then the engine snapshot. */
			uint8_t *m = malloc(n + 25);
			CHECK(m != NULL);
			uint64_t meta[3] = {10 + steps[i], 2 + (uint64_t)i, 123456789};
			m[0] = 0x7e; /* chunks of 512 bytes */
			memcpy(m + 1, meta, sizeof(meta));
			n = me_snapshot(me, m + 25, n);
			save_bytes(dir, name, m, n + 25);
			free(m);
			continue;
		}
		if (kind == 0) {
			/* fuzz_me_snapshot: mode byte first (0: as is). */
			uint8_t *m = malloc(n + 1);
			CHECK(m != NULL);
			m[0] = 0;
			memcpy(m + 1, snap, n);
			save_bytes(dir, name, m, n + 1);
			free(m);
			continue;
		}
		save_bytes(dir, name, snap, n);
	}
}

/* ---- files from the persist writers ---- */

static char scratch[64];

static void
scratch_clear(void)
{
	DIR *d = opendir(scratch);
	struct dirent *de;
	char path[600];
	while (d != NULL && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || de->d_name[1] == '.'))
			continue;
		snprintf(path, sizeof(path), "%s/%s", scratch, de->d_name);
		unlink(path);
	}
	if (d != NULL)
		closedir(d);
}

static size_t
slurp(const char *name, uint8_t *out, size_t cap)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	FILE *f = fopen(path, "rb");
	CHECK(f != NULL);
	size_t n = fread(out, 1, cap, f);
	fclose(f);
	return n;
}

static void
snap_file_seeds(const char *dir)
{
	static const char data[] = "a snapshot body of 40 bytes, padded....";
	for (int i = 0; i < 2; i++) {
		scratch_clear();
		struct pst_snap_meta m = {.last_index = 5 + (uint64_t)i * 1000, .last_term = 2,
					  .last_time_ns = 99, .length = i ? sizeof(data) : 0};
		CHECK(pst_snap_write(scratch, &m, data, NULL) == 0);
		char name[128];
		snprintf(name, sizeof(name), PST_SNAP_NAME_FMT, m.last_index, m.last_term);
		snap[0] = (uint8_t)(i ? 4 : 0); /* mode: the second also has an older one */
		size_t n = slurp(name, snap + 1, SNAP_MAX - 1);
		snprintf(name, sizeof(name), "snap-%d", i);
		save_bytes(dir, name, snap, n + 1);
	}
}

static void
flog_seeds(const char *dir)
{
	static const uint64_t payload[4] = {1, 2, 3, 4};
	for (int i = 0; i < 2; i++) {
		scratch_clear();
		struct pst_log_config cfg = {.dir = scratch, .segment_size = 512,
					     .sync = PST_SYNC_NONE};
		struct pst_log *log;
		CHECK(pst_log_open(&log, &cfg, NULL, 0) == 0);
		for (uint64_t k = 1; k <= (i ? 12u : 3u); k++) {
			struct pst_entry e = {.index = k, .term = 1 + k / 4, .time_ns = k * 10,
					      .kind = 1, .data_len = (uint32_t)(8 * (k % 4)),
					      .data = payload};
			CHECK(pst_log_append(log, &e, 1) == 0);
		}
		pst_log_close(log);
		/* Every segment, in index order, joined by the target's separator. */
		struct dirent **list;
		int n = scandir(scratch, &list, NULL, alphasort);
		CHECK(n >= 0);
		size_t len = 1;
		snap[0] = 0;
		for (int k = 0; k < n; k++) {
			if (strstr(list[k]->d_name, ".log") != NULL) {
				if (len > 1) {
					memcpy(snap + len, "\n--SEG--\n", 9);
					len += 9;
				}
				len += slurp(list[k]->d_name, snap + len, SNAP_MAX - len);
			}
			free(list[k]);
		}
		free(list);
		char name[32];
		snprintf(name, sizeof(name), "log-%d", i);
		save_bytes(dir, name, snap, len);
	}
}

static void
vote_seeds(const char *dir)
{
	scratch_clear();
	CHECK(pst_vote_save(scratch, 7, 2) == 0);
	size_t n = slurp("vote", snap, SNAP_MAX);
	save_bytes(dir, "vote-7-2", snap, n);
}

static void
pg_row_seeds(const char *dir)
{
	/* Byte 0 picks the statement; columns are NUL-separated, "\N" is SQL NULL. */
	static const char claimed[] = "\0" "1\0t\0" "3\0" "12\0" "1\0" "{1,2}\0"
				      "{100,2500}\0" "\\N\0"
				      "\\x070000000000000001000000000003000000010000000000"
				      "0000000000000000\0" "7\0" "9\0"
				      "31\0" "1500000000\0" "1764770000000000000";
	static const char owned[] = "\0" "0\0f\0" "3\0" "12\0" "1\0" "{1}\0" "{5}\0"
				    "4\0" "\\N\0" "\\N\0" "\\N\0" "\\N\0" "\\N\0" "\\N";
	static const char flush[] = "\1" "2\0" "42";
	static const char release[] = "\2" "1";
	save_bytes(dir, "hydrate-claimed", claimed, sizeof(claimed) - 1);
	save_bytes(dir, "hydrate-owned", owned, sizeof(owned) - 1);
	save_bytes(dir, "flush-repeat", flush, sizeof(flush) - 1);
	save_bytes(dir, "release", release, sizeof(release) - 1);
}

int
main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s KIND DIR\n", argv[0]);
		return 2;
	}
	snap = malloc(SNAP_MAX);
	CHECK(snap != NULL);
	snprintf(scratch, sizeof(scratch), "/tmp/fuzz-seeds-XXXXXX");
	CHECK(mkdtemp(scratch) != NULL);
	const char *kind = argv[1], *dir = argv[2];
	char *wargv[2] = {argv[0], argv[2]};
	if (strcmp(kind, "wire") == 0)
		wire_seeds(wargv);
	else if (strcmp(kind, "me_snapshot") == 0)
		snapshot_seeds(dir, 0);
	else if (strcmp(kind, "oms_snapshot") == 0)
		snapshot_seeds(dir, 1);
	else if (strcmp(kind, "cns_snapshot") == 0)
		snapshot_seeds(dir, 2);
	else if (strcmp(kind, "snap_file") == 0)
		snap_file_seeds(dir);
	else if (strcmp(kind, "flog_segment") == 0)
		flog_seeds(dir);
	else if (strcmp(kind, "vote") == 0)
		vote_seeds(dir);
	else if (strcmp(kind, "pg_row") == 0)
		pg_row_seeds(dir);
	else {
		fprintf(stderr, "fuzz-seeds: unknown kind %s\n", kind);
		return 2;
	}
	scratch_clear();
	rmdir(scratch);
	free(snap);
	return 0;
}

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: a durable single node meets storage faults with true counters, kept evidence and a
# clear refusal, never with "ready" followed by an abort (docs/persist.md "Storage faults").
# Method: one node (OMS shard 1, ME shard 2), [durability] mode = durable, a snapshot every
# 50 entries (the idle leader's tick entries make them). Five phases on the same data_dir:
#   a. a full snapshot directory (a filled 64 KiB tmpfs over shard1/snap): the snapshots
#      that fail count in snapshot_failed, not in snapshots, and are logged; after the
#      tmpfs is gone they succeed again;
#   b. a restart: snapshot_failed stays 0 (nothing failed);
#   c. a flipped byte in the newest snapshot of shard 1, restart: the node comes up from
#      the log, says which file it skipped, counts snapshot_corrupt 1, and the file is kept
#      as <name>.corrupt through the snapshots taken after it;
#   d. the vote file of shard 1 deleted: the node refuses to start, naming the vote file
#      and the log's term, and never prints ready; with the file back it starts;
#   e. a fresh data_dir on a full disk (a filled 64 KiB tmpfs): it refuses to start with
#      "cannot open the file log" (its checkpoint cannot be created) or "cannot save the
#      vote", never ready;
#   f. a stop, then one flipped byte in the last record of shard 1's file log (synced:
#      the log's checkpoint names it; SIGTERM, as kill -9 may land between a batch's write
#      and its fdatasync, and then the last record was never synced): it refuses to start, naming the segment, the offset,
#      the entry, what was found and the checkpoint, and never prints ready (it used to cut
#      the record as a "torn tail", exit 0, the entry gone, nothing said); with the byte
#      flipped back it starts;
#   g. kill -9, then a torn write past the last sync (a partial record for the next index
#      after the last one): it starts, logs one line naming the bytes cut and the entries,
#      and counts flog_torn_bytes > 0 and flog_torn_repairs 1.
# E2E_STORAGE_PHASES (default abcdefg) runs a subset, e.g. to see each fail on older code.
source "$(dirname "$0")/lib.sh"
need_root
e2e_init ost 41
MOUNTS=()
e2e_cleanup_hook() {
	local m
	for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
}
# full_tmpfs DIR [PID]: a 64 KiB tmpfs on DIR, filled to the last block; with PID in that
# process's mount namespace (ip netns exec gives omsd one of its own, which mounts made
# here after its start do not reach; it goes away with the process).
full_tmpfs() {
	local in=()
	[ -n "${2:-}" ] && in=(nsenter -t "$2" -m)
	mkdir -p "$1"
	"${in[@]}" mount -t tmpfs -o size=64k tmpfs "$1"
	[ -n "${2:-}" ] || MOUNTS+=("$1")
	"${in[@]}" dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null || true
}
# start_refused CONFIG: omsd must exit during start-up without printing ready.
start_refused() {
	rm -f "$STATS"
	ip netns exec "$NS_N" "$OMSD" -c "$1" -- --file-prefix "$PREFIX" >"$OMSD_LOG" 2>&1 &
	OMSD_PID=$!
	for _ in $(seq 150); do kill -0 "$OMSD_PID" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$OMSD_PID" 2>/dev/null; then
		fail "omsd still running 15 s after a start that must be refused"
	fi
	local rc=0
	wait "$OMSD_PID" || rc=$?
	OMSD_PID=
	grep -q "ready:" "$OMSD_LOG" && fail "omsd printed ready before refusing (exit $rc)"
	[ "$rc" -ne 0 ] || fail "omsd refused to start with exit status 0"
	grep "refusing to start" "$OMSD_LOG" | sed 's/^/    /'
}
want() { [[ "${E2E_STORAGE_PHASES:-abcdefg}" == *"$1"* ]]; }
stat_wait_ge() { # KEY MIN: until KEY >= MIN (15 s)
	for _ in $(seq 75); do
		e2e_stats
		local v
		v=$(e2e_stat "$1")
		[ "$v" != missing ] && [ "$v" -ge "$2" ] && return 0
		sleep 0.2
	done
	return 1
}

e2e_net_up
e2e_trade_config "$TMP/omsd.ini" "" "[durability]" "mode = durable"
sed -i 's/^snapshot_entries = .*/snapshot_entries = 50/' "$TMP/omsd.ini"
SNAP=$TMP/data/shard1/snap
e2e_start "$TMP/omsd.ini"
e2e_wait_stat shard.1.is_leader 1 || fail "no OMS leader"
stat_wait_ge shard.1.snapshots 1 || fail "no snapshot taken"

if want a; then
	log "a. a full snapshot directory"
	full_tmpfs "$SNAP" "$OMSD_PID"
	e2e_stats
	ok0=$(e2e_stat shard.1.snapshots)
	failed0=$(e2e_stat shard.1.snapshot_failed)
	stat_wait_ge shard.1.snapshot_failed $((failed0 + 2)) ||
		fail "snapshot_failed stayed $(e2e_stat shard.1.snapshot_failed) with a full snapshot directory"
	ok1=$(e2e_stat shard.1.snapshots)
	log "   snapshots $ok0 -> $ok1, snapshot_failed $failed0 -> $(e2e_stat shard.1.snapshot_failed)"
	# One snapshot may have completed between the two readings; never one per failure.
	[ "$ok1" -le $((ok0 + 1)) ] || fail "failed snapshot writes counted in snapshots ($ok0 -> $ok1)"
	grep -q "shard 1: writing the snapshot at .* failed: No space left on device" "$OMSD_LOG" ||
		fail "the failed snapshot write is not logged"
	nsenter -t "$OMSD_PID" -m umount "$SNAP"
	stat_wait_ge shard.1.snapshots $((ok1 + 1)) || fail "snapshots did not resume after the disk came back"
fi

if want b; then
	log "b. a restart counts no failed snapshot"
	e2e_stop TERM
	[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
	e2e_start "$TMP/omsd.ini"
	e2e_wait_stat shard.1.is_leader 1 || fail "no OMS leader after the restart"
	sleep 1
	e2e_stats
	for sh in 1 2; do
		[ "$(e2e_stat shard.$sh.snapshot_failed)" = 0 ] ||
			fail "shard $sh: snapshot_failed $(e2e_stat shard.$sh.snapshot_failed) after a restart"
	done
fi

if want c; then
	log "c. a corrupt snapshot is skipped, named and kept"
	e2e_stop TERM
	newest=$(ls "$SNAP"/snap-*.snap | sort | tail -n 1)
	size=$(stat -c %s "$newest")
	# Flip one byte of the data (after the 56-byte header).
	printf '\xff' | dd of="$newest" bs=1 seek=$((size - 1)) conv=notrunc 2>/dev/null
	e2e_start "$TMP/omsd.ini"
	e2e_wait_stat shard.1.is_leader 1 || fail "no OMS leader after skipping the corrupt snapshot"
	grep "corrupt snapshot" "$OMSD_LOG" | sed 's/^/    /'
	grep -q "shard 1: 1 corrupt snapshot(s) skipped: $newest: data CRC mismatch (kept as $newest.corrupt)" \
		"$OMSD_LOG" || fail "the corrupt snapshot is not named with where it was kept"
	[ "$(e2e_stat shard.1.snapshot_corrupt)" = 1 ] ||
		fail "snapshot_corrupt $(e2e_stat shard.1.snapshot_corrupt), expected 1"
	stat_wait_ge shard.1.snapshots 2 || fail "no snapshots after the restart"
	[ -f "$newest.corrupt" ] || fail "the corrupt snapshot was deleted by the next snapshot"
fi

if want d; then
	log "d. a deleted vote file"
	e2e_stop TERM
	cp "$TMP/data/shard1/vote/vote" "$TMP/vote.saved"
	rm "$TMP/data/shard1/vote/vote"
	start_refused "$TMP/omsd.ini"
	grep -q "shard 1: refusing to start: the vote file $TMP/data/shard1/vote/vote is missing (term 0), but the file log" \
		"$OMSD_LOG" || fail "the refusal does not name the vote file and the log"
	cp "$TMP/vote.saved" "$TMP/data/shard1/vote/vote"
	e2e_start "$TMP/omsd.ini"
	e2e_wait_stat shard.1.is_leader 1 || fail "no OMS leader with the vote file restored"
	e2e_stop TERM
fi
[ -z "$OMSD_PID" ] || e2e_stop TERM

if want e; then
	log "e. a full disk at start"
	full_tmpfs "$TMP/full"
	sed "s|^data_dir = .*|data_dir = $TMP/full/data|" "$TMP/omsd.ini" >"$TMP/full.ini"
	start_refused "$TMP/full.ini"
	# The file log's checkpoint is created first (a new log), else the vote is written.
	grep -Eq "refusing to start: (cannot save the vote in $TMP/full/data/shard1/vote|cannot open the file log in $TMP/full/data/shard1/log): No space left on device" \
		"$OMSD_LOG" || fail "the refusal does not say what cannot be written"
fi

# last_record SEGMENT: "OFFSET INDEX DATA_LEN END" of the last record that checks in a log
# segment (docs/persist.md "Format"; the preallocated zeros end the records).
last_record() {
	"$PY" - "$1" <<'PYEOF'
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
off, last = 32, None
while off + 40 <= len(d):
	crc, magic, index, term, t, kind, dlen = struct.unpack_from("<IIQQQII", d, off)
	if magic != 0x45545350:
		break
	last = (off, index, dlen, off + 40 + ((dlen + 7) & ~7))
	off = last[3]
print("%d %d %d %d" % last)
PYEOF
}
LOGDIR=$TMP/data/shard1/log
if want f || want g; then
	e2e_start "$TMP/omsd.ini"
	e2e_wait_stat shard.1.is_leader 1 || fail "no OMS leader"
	sleep 0.5
fi
if want f; then
	log "f. a flipped byte in the last synced record of the file log"
	e2e_stop TERM
	seg=$(ls "$LOGDIR"/*.log | sort | tail -n 1)
	read -r off idx dlen _ < <(last_record "$seg")
	at=$((off + 40 + (dlen > 0 ? dlen - 1 : -24))) # its last data byte, else its term
	log "   last record: $seg offset $off index $idx ($dlen data bytes): flip the byte at $at"
	flip() { "$PY" -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x20]))' "$seg" "$at"; }
	flip
	size=$(stat -c %s "$seg")
	start_refused "$TMP/omsd.ini"
	grep -q "shard 1: refusing to start: the file log does not check: $seg: offset $off: entry $idx: the record of index $idx (term [0-9]*) fails its CRC (stored [0-9a-f]*, computed [0-9a-f]*), but $LOGDIR/ckpt says entries through $idx (term [0-9]*) were synced: damage, not a torn tail" \
		"$OMSD_LOG" || fail "the refusal does not name the segment, offset, entry and checkpoint"
	[ "$(stat -c %s "$seg")" = "$size" ] || fail "the refused start changed the segment"
	flip
	e2e_start "$TMP/omsd.ini"
	e2e_wait_stat shard.1.is_leader 1 || fail "no OMS leader with the byte flipped back"
	e2e_stats
	[ "$(e2e_stat shard.1.flog_torn_repairs)" = 0 ] || fail "flog_torn_repairs $(e2e_stat shard.1.flog_torn_repairs) after a clean start"
	sleep 0.5
fi
if want g; then
	log "g. a torn write past the last sync"
	e2e_stop KILL
	seg=$(ls "$LOGDIR"/*.log | sort | tail -n 1)
	read -r off idx dlen end < <(last_record "$seg")
	# What a crash in the middle of the next batch's write leaves: its first record's
	# header (index idx+1, a CRC that does not match) and 100 bytes of its data.
	"$PY" - "$seg" "$end" "$((idx + 1))" <<'PYEOF'
import struct, sys
path, end, index = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hdr = struct.pack("<IIQQQII", 0x12345678, 0x45545350, index, 1, 0, 1, 400)
with open(path, "r+b") as f:
	f.seek(end)
	f.write(hdr + b"\xa5" * 100)
PYEOF
	e2e_start "$TMP/omsd.ini"
	e2e_wait_stat shard.1.is_leader 1 || fail "no OMS leader after the torn tail"
	grep "torn tail repaired" "$OMSD_LOG" | sed 's/^/    /'
	grep -q "shard 1: file log: torn tail repaired: 140 bytes cut from $seg at offset $end, entries $((idx + 1))..$((idx + 1)) (never synced: the checkpoint is at [0-9]*)" \
		"$OMSD_LOG" || fail "the torn tail is not logged with its bytes and entries"
	e2e_stats
	[ "$(e2e_stat shard.1.flog_torn_bytes)" = 140 ] || fail "flog_torn_bytes $(e2e_stat shard.1.flog_torn_bytes), want 140"
	[ "$(e2e_stat shard.1.flog_torn_repairs)" = 1 ] || fail "flog_torn_repairs $(e2e_stat shard.1.flog_torn_repairs), want 1"
	[ "$(e2e_stat shard.2.flog_torn_repairs)" = 0 ] || fail "shard 2 counted a repair"
	e2e_stop TERM
fi
log "PASS"

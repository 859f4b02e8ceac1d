#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: with [durability] mode = durable a node survives kill -9: the Raft log, vote and
# snapshots in data_dir bring back the book, the balances and the dedup window.
# Method: one node (OMS shard 1, ME shard 2, no database), durable mode, snapshots every 50
# entries so the restart goes through a snapshot and the log after it. Phase a: deposits,
# a sell of 4 rests, a buy of 1 fills. kill -9, start again on the same data_dir. Phase b:
# a buy of 3 fills against the rested remainder; the buyer can sell exactly the 4 base it
# holds; the pre-kill clientOrderId is answered DUPLICATE_REQUEST. The snapshots are
# serialised by forked children (the default [limits] snapshot_by = fork; this state is
# small, so snapshot_fork_min_mb = 0): they must have run, and the restart reads their files.
# SNAPSHOT_BY=shadow (e2e_restart_shadow): a shadow copy of each service serialises them
# (app_shadow.h); after the restart the copy is seeded from the snapshot file consensus
# restored and follows the replayed log: the snapshots after the restart are the copy's too,
# and a third start reads them.
source "$(dirname "$0")/lib.sh"
need_root
SNAPSHOT_BY=${SNAPSHOT_BY:-fork}
e2e_init oer 18
e2e_net_up
e2e_trade_config "$TMP/omsd.ini" "" "[durability]" "mode = durable"
sed -i "s/^snapshot_entries = .*/snapshot_entries = 50\nsnapshot_fork_min_mb = 0\nsnapshot_by = $SNAPSHOT_BY/" "$TMP/omsd.ini"
e2e_start "$TMP/omsd.ini"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_trade.py" restart --phase a --nodes "$NODE_IP" ||
	fail "phase a"
sleep 1 # a few tick entries, a snapshot
e2e_stats
log "before the kill: applied $(e2e_stat shard.1.applied), snapshots $(e2e_stat shard.1.snapshots), file log entries $(e2e_stat shard.1.flog_entries)"
# How the snapshots were serialised: forked children (the shipped default) or the shadow
# copies ([limits] snapshot_by); never lost, none failed, each durable.
check_snapshots() {
	local sh n
	for sh in 1 2; do
		log "shard $sh: snapshots $(e2e_stat shard.$sh.snapshots), children $(e2e_stat shard.$sh.snapshot_forks) (longest fork $(e2e_stat shard.$sh.snapshot_fork_max_ns) ns), shadowed $(e2e_stat shard.$sh.snapshot_shadowed) (lost $(e2e_stat shard.$sh.snapshot_shadow_lost)), failed $(e2e_stat shard.$sh.snapshot_failed)"
		if [ "$SNAPSHOT_BY" = shadow ]; then
			n=$(e2e_stat shard.$sh.snapshot_shadowed)
			[ "$(e2e_stat shard.$sh.snapshot_shadow_lost)" = 0 ] ||
				fail "shard $sh: the shadow copy was lost"
			[ "$(e2e_stat shard.$sh.snapshot_forks)" = 0 ] ||
				fail "shard $sh: a snapshot was forked with the shadow copy ready"
		else
			n=$(e2e_stat shard.$sh.snapshot_forks)
		fi
		[ "${n:-0}" -ge 1 ] || fail "shard $sh: no snapshot was serialised by $SNAPSHOT_BY"
		[ "$(e2e_stat shard.$sh.snapshot_failed)" = 0 ] || fail "shard $sh: a snapshot failed"
		[ "$(e2e_stat shard.$sh.snapshots)" -ge 1 ] || fail "shard $sh: no snapshot file is durable"
	done
}
check_snapshots
restart() {
	kill -KILL "$OMSD_PID"
	wait "$OMSD_PID" 2>/dev/null || true
	OMSD_PID=
	log "killed; restarting on $TMP/data"
	cp "$OMSD_LOG" "$TMP/omsd.log.$1"
	e2e_start "$TMP/omsd.ini"
	grep "file log" "$OMSD_LOG" | sed 's/^/    /'
	e2e_wait_stat shard.1.is_leader 1 || fail "no OMS leader after the restart"
	e2e_stats
	boot=$(e2e_stat shard.1.flog_boot_entries)
	log "after the restart: term $(e2e_stat shard.1.term), entries recovered $boot"
}
restart 1
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_trade.py" restart --phase b --nodes "$NODE_IP" ||
	fail "phase b"
if [ "$SNAPSHOT_BY" = shadow ]; then
	# The copies restored the boot snapshot and followed the replay: the snapshots since
	# are theirs. A third start reads them, and the book and balances are as phase b left
	# them (the buyer's 4 base already sold: a second sell of 4 is refused for funds).
	sleep 1
	e2e_stats
	check_snapshots
	restart 2
	ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_trade.py" restart --phase c --nodes "$NODE_IP" ||
		fail "phase c"
fi
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

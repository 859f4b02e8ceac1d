#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: snapshots are serialised by forked children ([limits] snapshot_by = fork, the
# default; docs/persist.md "Snapshots without a stall"), and a node that cannot fork (a
# pids limit, fork's EAGAIN) goes on taking them on the shard lcore: none fails, the log is
# compacted, and a restart from them brings the book, the balances and the dedup window
# back.
# Method: one node (OMS shard 1, ME shard 2, no database), durable mode, a snapshot every
# 50 entries, forked however small (snapshot_fork_min_mb = 0) (the idle leader's tick entries alone make one every few seconds), started
# and then moved into a pids cgroup. Phase a of e2e_trade.py restart (deposits, a sell of 4
# rests, a buy of 1 fills); both shards fork children. Then pids.max = the node's tasks:
# fork fails; the snapshots go on (more files, no failure, the log says why) with no new
# child. The limit lifted, children again. kill -9, start again on the same data_dir:
# phase b (a buy of 3 fills against the rested remainder, the pre-kill clientOrderId is a
# DUPLICATE_REQUEST).
source "$(dirname "$0")/lib.sh"
need_root

# The pids controller: cgroup v1 (/sys/fs/cgroup/pids) or v2 with pids enabled at the root.
if [ -d /sys/fs/cgroup/pids ] && [ -f /sys/fs/cgroup/pids/cgroup.procs ]; then
	CG_ROOT=/sys/fs/cgroup/pids
elif grep -qw pids /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	CG_ROOT=/sys/fs/cgroup
	grep -qw pids /sys/fs/cgroup/cgroup.subtree_control ||
		echo +pids >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
else
	echo "SKIP: no pids cgroup controller"
	exit 77
fi

e2e_init osf 43
CG=$CG_ROOT/omsd-e2e-osf-$$
e2e_cleanup_hook() {
	[ -d "$CG" ] || return 0
	echo max >"$CG/pids.max" 2>/dev/null || true
	while read -r p; do echo "$p" >"$CG_ROOT/cgroup.procs" 2>/dev/null || true; done <"$CG/cgroup.procs"
	rmdir "$CG" 2>/dev/null || true
}
mkdir "$CG" || fail "cannot make the cgroup $CG"
[ -f "$CG/pids.max" ] || fail "$CG has no pids.max"

e2e_net_up
e2e_trade_config "$TMP/omsd.ini" "" "[durability]" "mode = durable"
sed -i 's/^snapshot_entries = .*/snapshot_entries = 50\nsnapshot_fork_min_mb = 0/' "$TMP/omsd.ini"
e2e_start "$TMP/omsd.ini"
echo "$OMSD_PID" >"$CG/cgroup.procs" || fail "cannot move omsd into $CG"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_trade.py" restart --phase a --nodes "$NODE_IP" ||
	fail "phase a"

# wait_more KEY N: wait up to 20 s for shard 1's and shard 2's KEY to pass N1 / N2.
wait_both_above() {
	local key=$1 n1=$2 n2=$3
	for _ in $(seq 100); do
		e2e_stats
		[ "$(e2e_stat shard.1.$key)" -gt "$n1" ] && [ "$(e2e_stat shard.2.$key)" -gt "$n2" ] && return 0
		sleep 0.2
	done
	return 1
}
wait_both_above snapshot_forks 0 0 || fail "no snapshot child was forked on both shards"
forks1=$(e2e_stat shard.1.snapshot_forks) forks2=$(e2e_stat shard.2.snapshot_forks)
log "children forked: shard 1 $forks1, shard 2 $forks2; longest fork $(e2e_stat shard.1.snapshot_fork_max_ns) / $(e2e_stat shard.2.snapshot_fork_max_ns) ns, child $(e2e_stat shard.1.snapshot_child_max_ns) / $(e2e_stat shard.2.snapshot_child_max_ns) ns"

# No more tasks: fork fails. The node's own threads, not pids.current, which counts a
# snapshot child that may be running now.
tasks=$(awk '/^Threads:/ { print $2 }' "/proc/$OMSD_PID/status")
echo "$tasks" >"$CG/pids.max"
e2e_stats
snaps1=$(e2e_stat shard.1.snapshots) snaps2=$(e2e_stat shard.2.snapshots)
forks1=$(e2e_stat shard.1.snapshot_forks) forks2=$(e2e_stat shard.2.snapshot_forks)
log "pids.max = $tasks (the node's tasks): snapshots so far $snaps1 / $snaps2"
wait_both_above snapshots $((snaps1 + 1)) $((snaps2 + 1)) ||
	fail "snapshots stopped when fork could not: $(e2e_stat shard.1.snapshots) / $(e2e_stat shard.2.snapshots)"
grep -q "cannot fork a snapshot child" "$OMSD_LOG" || fail "the log does not say fork failed"
grep "cannot fork a snapshot child" "$OMSD_LOG" | head -2 | sed 's/^/    /'
# A child forked just before the limit may still have ended after it: at most one more.
[ "$(e2e_stat shard.1.snapshot_forks)" -le $((forks1 + 1)) ] || fail "shard 1 forked under the limit"
[ "$(e2e_stat shard.2.snapshot_forks)" -le $((forks2 + 1)) ] || fail "shard 2 forked under the limit"
for sh in 1 2; do
	[ "$(e2e_stat shard.$sh.snapshot_failed)" = 0 ] || fail "shard $sh: a snapshot failed"
done
log "without fork: snapshots $(e2e_stat shard.1.snapshots) / $(e2e_stat shard.2.snapshots), taken on the shard lcores"

echo max >"$CG/pids.max"
forks1=$(e2e_stat shard.1.snapshot_forks) forks2=$(e2e_stat shard.2.snapshot_forks)
wait_both_above snapshot_forks "$forks1" "$forks2" || fail "no child forked once the limit was lifted"
log "the limit lifted: children again ($(e2e_stat shard.1.snapshot_forks) / $(e2e_stat shard.2.snapshot_forks))"

kill -KILL "$OMSD_PID"
wait "$OMSD_PID" 2>/dev/null || true
OMSD_PID=
cp "$OMSD_LOG" "$TMP/omsd.log.1"
e2e_start "$TMP/omsd.ini"
grep "file log" "$OMSD_LOG" | sed 's/^/    /'
grep -q "snapshot at 0," "$OMSD_LOG" && fail "a shard restarted without a snapshot"
e2e_wait_stat shard.1.is_leader 1 || fail "no OMS leader after the restart"
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_trade.py" restart --phase b --nodes "$NODE_IP" ||
	fail "phase b"
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: three nodes trade, and survive the loss of the OMS leader: a new leader is elected,
# its bridge re-drives from state, further orders are acknowledged, and no acknowledged
# order is lost (every ACKed order reaches OPEN or its last report).
# Method: three omsd processes on a Linux bridge, each a member of OMS shard 1 and ME shard
# 2 (no database). The client (tests/e2e/e2e_trade.py cluster) deposits, trades five
# crossing pairs, rests one sell, then kill -9s the node that leads the OMS shard, waits for
# a new leader, trades five more pairs (rotating to a live gateway when one is silent),
# crosses the order rested before the kill, and checks every report.
# Without E2E_DURABLE the nodes run [durability] mode = memory (the e2e cluster test of that
# mode). With E2E_DURABLE=1 (e2e_failover_durable) the nodes keep their Raft logs in files,
# and the killed node is started again afterwards: it must recover from its files and catch
# up with the leader's commit index as a follower.
source "$(dirname "$0")/lib.sh"
need_root
e2e_cluster_init oef 16 3
e2e_cluster_net_up
e2e_config_edit() {
	# Snapshots (and log compaction behind them) happen during the run.
	sed -i 's/^snapshot_entries = .*/snapshot_entries = 300/' "$1"
	# e2e_failover is the memory-mode test of the pair (durable is the default).
	if [ -n "${E2E_DURABLE:-}" ]; then
		printf '\n[durability]\nmode = durable\n' >>"$1"
	else
		printf '\n[durability]\nmode = memory\n' >>"$1"
	fi
}
e2e_cluster_trading_up
if grep -q "file log" "$TMP/1/omsd.log"; then log "durable mode: Raft logs in $TMP/<node>/data"; fi

e2e_cluster_wait_bootstrap
log "OMS shard bootstrapped"

pids="1:${NODE_PIDS[1]},2:${NODE_PIDS[2]},3:${NODE_PIDS[3]}"
if ! ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_trade.py" cluster \
	--nodes "$NET.11,$NET.12,$NET.13" --pids "$pids" --stats "$TMP"; then
	for i in 1 2 3; do
		echo "---- node $i ----" >&2
		tail -n 15 "$TMP/$i/omsd.log" >&2
	done
	fail "failover checks"
fi
log "client done"
for i in 1 2 3; do
	# The killed node is a zombie until reaped: reap it first.
	if [ "$(ps -o stat= -p "${NODE_PIDS[$i]}" 2>/dev/null | cut -c1)" = Z ]; then
		wait "${NODE_PIDS[$i]}" 2>/dev/null || true
	fi
	if kill -0 "${NODE_PIDS[$i]}" 2>/dev/null; then
		log "node $i: oms $(e2e_cluster_stat "$i" shard.1.role) term $(e2e_cluster_stat "$i" shard.1.term), rebuilds $(e2e_cluster_stat "$i" shard.1.bridge_rebuilds), re-sent $(e2e_cluster_stat "$i" shard.1.bridge_resent), snapshots oms $(e2e_cluster_stat "$i" shard.1.snapshots) me $(e2e_cluster_stat "$i" shard.2.snapshots) failed $(e2e_cluster_stat "$i" shard.1.snapshot_failed)/$(e2e_cluster_stat "$i" shard.2.snapshot_failed)"
		[ "$(e2e_cluster_stat "$i" shard.1.snapshots)" -ge 1 ] || fail "node $i took no OMS snapshot"
	else
		unset "NODE_PIDS[$i]"
	fi
done
if [ -n "${E2E_DURABLE:-}" ]; then
	dead=
	for i in 1 2 3; do [ -z "${NODE_PIDS[$i]:-}" ] && dead=$i; done
	[ -n "$dead" ] || fail "no killed node found"
	leader=
	for i in 1 2 3; do
		[ "$i" = "$dead" ] && continue
		[ "$(e2e_cluster_stat "$i" shard.1.is_leader)" = 1 ] && leader=$i
	done
	[ -n "$leader" ] || fail "no OMS leader among the survivors"
	target=$(e2e_cluster_stat "$leader" shard.1.commit)
	mv "$TMP/$dead/omsd.log" "$TMP/$dead/omsd.log.1"
	e2e_cluster_start "$dead" "$TMP/$dead/omsd.ini"
	grep "file log" "$TMP/$dead/omsd.log" | sed 's/^/    /'
	ok=
	for _ in $(seq 75); do
		applied=$(e2e_cluster_stat "$dead" shard.1.applied)
		role=$(e2e_cluster_stat "$dead" shard.1.role)
		if [ "$applied" -ge "$target" ] && [ "$role" = follower ]; then ok=1; break; fi
		sleep 0.2
	done
	[ -n "$ok" ] || fail "restarted node $dead: applied $applied role $role, want >= $target as follower"
	log "node $dead restarted from its files: follower, applied $applied >= leader's commit $target at restart, recovered $(e2e_cluster_stat "$dead" shard.1.flog_boot_entries) entries"
fi
log "PASS"

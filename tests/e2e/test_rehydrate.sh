#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: a user evicted and re-hydrated between two orders looks to its client as if it had
# never left (issue 17): its per-user report sequence continues (no restart at 1, no gap),
# a deposit retried after the eviction gets its original outcome (same reason, same total)
# and is credited once, and an order re-sent after the eviction gets its original answer
# (the same orderId), not a second execution.
# Method: three omsd processes on a Linux bridge in the sharded shape, durable, with a
# throwaway PostgreSQL (deploy/pg/pgctl): OMS shards 1 and 3, ME shards 2 (symbol 1) and 4
# (symbol 2), every node a member of all four; leaders spread by transfer-leader (OMS 1 on
# node 1, OMS 3 on node 2, ME 2 on node 3, ME 4 on node 1); the client talks to node 3, so
# its requests reach the owner's leader through the gateway and its admin commands are
# forwarded. The scenario (tests/e2e/e2e_rehydrate.py, phases A to E in its header): a
# deposit T and order 1, `omsctl users evict`, the user absent on every replica and its
# accounts row released (owner_shard NULL, egress_seq kept), order 2 re-hydrates it
# (hydrations + 1) and continues the sequence, T and order 1 re-sent answered as the first
# time; a second eviction, the re-sends hydrating it, T answered from the transfers table
# once the window forgot it; a third eviction and the row checked: every balance once.
# The user TTL stays at its default (60 s): only the operator evicts here. Elections are
# slowed (election_ms 1000) so that a loaded machine does not move the leaders mid-run:
# failover is not what this test is about.
set -euo pipefail
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
source "$(dirname "$0")/lib.sh"
need_root
e2e_cluster_init orh 63 3
e2e_cluster_pg_start $((58000 + $$ % 1000)) 1 20000

LINES=(
	"" "[shard.3]" "service = oms" "members = 1,2,3" "cpu = 0" "idle = sleep"
	"" "[shard.4]" "service = me" "members = 1,2,3" "cpu = 1" "idle = sleep"
	"" "[persister]" "cpu = 1" "idle = sleep"
	"" "[database]" "conninfo = $CONNINFO"
	"" "[durability]" "mode = durable"
	"" "[limits]" "resident_users = 1024" "parked_orders = 256" "inflight_sagas = 256"
	"orders = 2048" "log_entries = 16384" "log_mb = 8" "snapshot_mb = 2"
	"snapshot_entries = 8000"
	"" "[timers]" "tick_ms = 10" "bridge_redrive_ms = 200" "election_ms = 1000"
	"heartbeat_ms = 100"
	"" "[routing]" "epoch = 1" "oms_shards = 1,3"
	"" "[symbol.1]" "base = 1" "quote = 2" "me_shard = 2" "tick = 1" "lot = 1" "min_qty = 1"
	"min_notional = 1" "base_unit = 1" "ref_px = 100" "band_bps = 5000"
	"maker_fee_bps = 2" "taker_fee_bps = 7"
	"" "[symbol.2]" "base = 1" "quote = 2" "me_shard = 4" "tick = 1" "lot = 1" "min_qty = 1"
	"min_notional = 1" "base_unit = 1" "ref_px = 100" "band_bps = 5000"
	"maker_fee_bps = 2" "taker_fee_bps = 7"
)
e2e_cluster_net_up
for i in 1 2 3; do
	mkdir -p "$TMP/$i"
	E2E_SERVICE_1=oms E2E_SERVICE_2=me e2e_cluster_config "$i" "$TMP/$i/omsd.ini" "${LINES[@]}"
	e2e_cluster_start "$i" "$TMP/$i/omsd.ini"
done
log "3 nodes up: ${NODE_PIDS[*]}"

leader_of() { # SHARD: the node whose member of SHARD leads, or empty
	local n
	for n in 1 2 3; do
		[ "$(e2e_cluster_stat "$n" "shard.$1.is_leader")" = 1 ] && { echo "$n"; return 0; }
	done
	return 0
}
wait_leader() { # SHARD: until it has a leader (15 s), which is printed
	local l
	for _ in $(seq 75); do
		l=$(leader_of "$1")
		[ -n "$l" ] && { echo "$l"; return 0; }
		sleep 0.2
	done
	return 1
}
for s in 1 2 3 4; do wait_leader "$s" >/dev/null || fail "shard $s elected no leader"; done
for s in 1 3; do
	for _ in $(seq 75); do
		[ "$(e2e_cluster_stat "$(wait_leader "$s")" "shard.$s.route_epoch")" = 1 ] && break
		sleep 0.2
	done
done
for _ in $(seq 75); do
	[ "$(e2e_cluster_stat 1 persister.connected)" = 1 ] && [ "$(e2e_cluster_stat 2 persister.connected)" = 1 ] && break
	sleep 0.2
done
# Spread the leaders: OMS 1 on node 1, OMS 3 on node 2, ME 2 on node 3, ME 4 on node 1.
for pair in 1:1 3:2 2:3 4:1; do
	s=${pair%:*} want=${pair#*:}
	for _ in $(seq 10); do
		l=$(wait_leader "$s") || fail "shard $s lost its leader"
		[ "$l" = "$want" ] && break
		"$OMSCTL" --socket "$TMP/$l/omsd.sock" transfer-leader --shard "$s" --to "$want" \
			>/dev/null 2>&1 || true
		sleep 0.5
	done
	[ "$(wait_leader "$s")" = "$want" ] || fail "shard $s not led by node $want"
done
log "leaders: oms 1 node $(leader_of 1), oms 3 node $(leader_of 3), me 2 node $(leader_of 2), me 4 node $(leader_of 4)"

ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_rehydrate.py" --gateway "$NET.13" --gateway-node 3 \
	--pids "1:${NODE_PIDS[1]},2:${NODE_PIDS[2]},3:${NODE_PIDS[3]}" --tmp "$TMP" \
	--omsctl "$OMSCTL" --pgctl "$PGCTL" --pgdir "$PG_DIR/pg" ||
	{ OMSD_LOG=$TMP/$(leader_of 1)/omsd.log; fail "the re-hydration checks"; }

# Nothing impossible happened on any replica.
for i in 1 2 3; do
	e2e_cluster_stat "$i" shard.1.role >/dev/null
	alarms=$(awk '$1 ~ /\.alarm_/ && $2 != 0 { print $1 "=" $2 }' "$TMP/$i/stats")
	[ -z "$alarms" ] || fail "node $i: alarms: $alarms"
done
log "no alarm on any node"
log "PASS"

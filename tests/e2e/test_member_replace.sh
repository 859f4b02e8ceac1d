#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: replace a host for good while the venue trades. Node 3 of a three-node cluster dies
# (kill -9, never restarted); a fourth host joins (omsd --join), each shard's leader adds it
# as a learner (it catches up: the shards snapshot every 300 entries and keep 300 behind,
# so the busier shards send it a snapshot and the log after it), promotes it once caught up and removes the dead member
# (omsctl members add|promote|remove). Nothing acknowledged is lost or doubled, money is
# exact on every replica of the new configuration, and the new host is a real voter: with
# node 1 then killed too, the two left (2 and 4) elect leaders and trade on.
# Method: four namespaces on a Linux bridge, every node a [peer.N] of every other, shards
# OMS 1 and ME 2 bootstrapped on nodes 1-3, Raft logs in files ([durability] mode =
# durable), no database (users stay resident). omsload (300 orders/s for 16 s, 40 users,
# --flatten) enters through node 1 or 2 while node 3 is killed and replaced; a second load
# phase runs after node 1 is killed. The clients wait up to 20 s for their final reports: on
# a host running four nodes and other work on two cores, elections repeat and the flatten's
# cancels took longer than 8 s once (every book was empty afterwards).
set -euo pipefail
: "${OMSLOAD:?set OMSLOAD}"
: "${OMSCTL:?set OMSCTL}"
source "$(dirname "$0")/lib.sh"
need_root
e2e_cluster_init omr 81 4
e2e_cluster_net_up
export E2E_MEMBERS=1,2,3
e2e_members_configs
for i in 1 2 3 4; do sed -i 's/^snapshot_entries = .*/snapshot_entries = 300/' "$TMP/$i/omsd.ini"; done
for i in 1 2 3; do e2e_cluster_start "$i" "$TMP/$i/omsd.ini"; done
log "nodes 1-3 up: ${NODE_PIDS[*]}; node 4 is a declared peer, not a member"
leader_of() { e2e_live_leader "$@"; }
wait_leader() { e2e_wait_live_leader "$@"; }
members_of() { e2e_members "$@"; }
change() { e2e_member_change "$@"; }

e2e_trading_ready
l=$OMS_LEADER

# A node that is not in a shard's members refuses to start without --join.
if ip netns exec "${TAG}4" "$OMSD" --check -c "$TMP/4/omsd.ini" >"$TMP/4/check.log" 2>&1; then
	fail "node 4 started without --join"
fi
grep -q "not a member.*--join" "$TMP/4/check.log" || fail "no --join hint: $(cat "$TMP/4/check.log")"

DEPOSITS=0
# check_ledger NAME OUT: omsload's own ledger (as e2e_failover_load reads it).
check_ledger() {
	local name=$1 out=$2 dep ledger
	sed 's/^/    /' "$out"
	dep=$(grep "^deposits: " "$out")
	grep -q "^deposits: sent=80 ok=80 refused=0 lost=0" <<<"$dep" || fail "$name: $dep"
	DEPOSITS=$((DEPOSITS + 40))
	ledger=$(grep "^ledger: " "$out") || fail "$name: no ledger"
	read -r acked resting final unrep doubled over gaps filled < <(sed -E \
		's/ledger: acked=([0-9]+) resting=([0-9]+) final=([0-9]+) unreported=([0-9]+) doubled=([0-9]+) overfilled=([0-9]+) seq_gaps=([0-9]+) seq_filled=([0-9]+) .*/\1 \2 \3 \4 \5 \6 \7 \8/' \
		<<<"$ledger")
	[ "$acked" -gt 500 ] || fail "$name: only $acked orders acknowledged"
	[ "$resting" -eq 0 ] || fail "$name: $resting orders still rest after --flatten"
	[ "$final" -gt 0 ] || fail "$name: no order reached a final state"
	[ "$doubled" -eq 0 ] || fail "$name: $doubled orders executed twice or re-numbered"
	[ "$over" -eq 0 ] || fail "$name: $over orders filled beyond their quantity"
	[ "$unrep" -le $((gaps - filled)) ] ||
		fail "$name: $unrep acknowledged orders unreported, $((gaps - filled)) open gaps"
	UNREPORTED=$((${UNREPORTED:-0} + unrep))
}

# Phase 1: load through node 1 or 2; node 3 dies 2 s in and node 4 replaces it.
gw=1
[ "$(leader_of 1)" = 1 ] && gw=2
out1=$TMP/load-replace.log
ip netns exec "$NS_C" "$OMSLOAD" --host "$NET.1$gw" --users 40 --first-user 1000 \
	--rate 300 --seconds 16 --seed 31 --mid 100 --drain-ms 20000 --flatten >"$out1" 2>&1 &
load_pid=$!
sleep 2
log "kill -9 node 3 (pid ${NODE_PIDS[3]}) for good"
kill -KILL "${NODE_PIDS[3]}"
wait "${NODE_PIDS[3]}" 2>/dev/null || true
unset 'NODE_PIDS[3]'
t0=$(date +%s%N)
E2E_OMSD_ARGS=--join e2e_cluster_start 4 "$TMP/4/omsd.ini"
log "node 4 started with --join (pid ${NODE_PIDS[4]})"
for s in 1 2; do change add "$s" 4; done
# Caught up: the leader sees node 4 within a few entries of its log.
for s in 1 2; do e2e_wait_caught_up "$s" 4; done
for s in 1 2; do change promote "$s" 4; done
for s in 1 2; do change remove "$s" 3; done
t1=$(date +%s%N)
log "replacement done in $(((t1 - t0) / 1000000)) ms (join, add, catch up, promote, remove)"
rc=0
wait "$load_pid" || rc=$?
[ "$rc" -eq 0 ] || { sed 's/^/    /' "$out1"; fail "replace phase: omsload exit $rc"; }
check_ledger replace "$out1"

# The configuration every live node sees: voters 1, 2, 4, committed; node 3 gone.
for n in 1 2 4; do
	want=$(printf '%s\n' "1 1 voter 1" "1 2 voter 1" "1 4 voter 1" "2 1 voter 1" "2 2 voter 1" \
		"2 4 voter 1")
	for _ in $(seq 50); do
		m=$(members_of "$n")
		got=$(awk '{ print $1, $2, $3, $5 }' <<<"$m" | sort)
		[ "$got" = "$want" ] && break
		sleep 0.2
	done
	[ "$got" = "$want" ] || fail "node $n: members $(tr '\n' ';' <<<"$m"), want voters 1,2,4 on both shards"
done
log "every node: shards 1 and 2 have voters 1, 2, 4 (committed)"
snap1=$(e2e_cluster_stat 4 shard.1.cns.SNAPSHOTS_INSTALLED)
snap2=$(e2e_cluster_stat 4 shard.2.cns.SNAPSHOTS_INSTALLED)
log "node 4: snapshots installed from a leader: shard 1 $snap1, shard 2 $snap2"
[ $((snap1 + snap2)) -ge 1 ] || fail "node 4 caught up without a snapshot on either shard"

# Phase 2: node 1 dies too; the new configuration (2, 4) must still elect and trade.
log "kill -9 node 1 (pid ${NODE_PIDS[1]})"
kill -KILL "${NODE_PIDS[1]}"
wait "${NODE_PIDS[1]}" 2>/dev/null || true
unset 'NODE_PIDS[1]'
for s in 1 2; do
	l=$(wait_leader "$s") || fail "shard $s: no leader among nodes 2 and 4 after node 1 died"
	log "shard $s: leader node $l without nodes 1 and 3"
done
out2=$TMP/load-after.log
ip netns exec "$NS_C" "$OMSLOAD" --host "$NET.12" --users 40 --first-user 2000 \
	--rate 300 --seconds 4 --seed 32 --mid 100 --drain-ms 20000 --flatten >"$out2" 2>&1 ||
	{ sed 's/^/    /' "$out2"; fail "phase 2: omsload failed"; }
check_ledger after "$out2"

# Every replica left (2 and 4) applied the same commit and holds exactly the deposits.
for s in 1 2; do
	ok=
	for _ in $(seq 50); do
		l=$(leader_of "$s")
		c=$(e2e_cluster_stat "$l" "shard.$s.commit")
		a2=$(e2e_cluster_stat 2 "shard.$s.applied")
		a4=$(e2e_cluster_stat 4 "shard.$s.applied")
		if [ "$a2" -ge "$c" ] && [ "$a4" -ge "$c" ]; then ok=1; break; fi
		sleep 0.2
	done
	[ -n "$ok" ] || fail "shard $s: applied $a2/$a4, leader commit $c"
done
sleep 0.5
for i in 2 4; do
	e2e_cluster_stat "$i" shard.1.role >/dev/null
	st() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/$i/stats"; }
	book=$(st shard.2.resting)
	inflight=$(st shard.1.inflight)
	base=$(st shard.1.asset.1.sum)
	quote=$(st shard.1.asset.2.sum)
	log "node $i: book $book, sagas $inflight, base $base, quote $quote"
	[ "$book" -le "${UNREPORTED:-0}" ] || fail "node $i: the ME book rests $book orders after both loads flattened"
	[ "$inflight" = 0 ] || fail "node $i: $inflight sagas still in flight"
	[ "$base" = $((DEPOSITS * 1000000000)) ] || fail "node $i: base asset sum $base, want $((DEPOSITS * 1000000000))"
	[ "$quote" = $((DEPOSITS * 1000000000000)) ] || fail "node $i: quote asset sum $quote"
done
log "PASS"

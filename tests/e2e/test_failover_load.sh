#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal : under a steady load, kill -9 the OMS leader and then the ME leader. Each
# time a new leader is elected and the bridge re-drives; no acknowledged order is lost or
# executed twice; money is conserved on every replica; the killed node restarts from its
# files, rejoins and catches up.
# Method: three omsd processes on a Linux bridge, each a member of OMS shard 1 and ME shard
# 2, Raft logs in files ([durability] mode = durable), no database (users stay resident).
# Two phases of omsload (300 orders/s for 8 s, its own users each), both entering through a
# node the victim is not:
#   phase 1: 3 s in, kill -9 the node that leads the OMS shard; 1 s after a new OMS leader
#            is elected, restart it.
#   phase 2: 3 s in, kill -9 the node that leads the ME shard; restart it the same way.
# omsload keeps a ledger of every order (tools/omsload) and at the end cancels what rests
# (--flatten): after each phase no acknowledged order may be unreported beyond what the
# client saw as report sequence gaps, none doubled or over-filled, none left resting. At the
# end every replica must agree: the same commit on both shards, empty ME books, no saga in
# flight, and every replica's asset sums (balances and fees) equal the deposits — also
# when every user is queried one by one through the control socket (users show), with
# nothing left reserved. Reconciliation runs every 500 ms ([timers] reconcile_ms) through
# both kills: it must have compared orders with the ME (recon_matched advanced, in
# omsctl stats and on /metrics) and raised no alarm on any replica (docs/oms.md).
set -euo pipefail
: "${OMSLOAD:?set OMSLOAD}"
: "${OMSCTL:?set OMSCTL}"
source "$(dirname "$0")/lib.sh"
need_root
e2e_cluster_init ofl 25 3
e2e_cluster_net_up
e2e_config_edit() {
	sed -i 's/^snapshot_entries = .*/snapshot_entries = 2000/' "$1"
	sed -i '/^bridge_redrive_ms/a reconcile_ms = 500' "$1"
}
e2e_cluster_trading_up "" "[durability]" "mode = durable"

leader_of() { e2e_live_leader "$@"; } # SHARD: the live node leading it, or empty
wait_leader() { # SHARD: wait up to 10 s for a live leader; print it
	local l
	for _ in $(seq 50); do
		l=$(leader_of "$1")
		[ -n "$l" ] && { echo "$l"; return 0; }
		sleep 0.2
	done
	return 1
}
other_than() { # NODE...: the first node not listed
	for i in 1 2 3; do
		case " $* " in *" $i "*) ;; *) echo "$i"; return ;; esac
	done
}
restart() { # NODE: start a killed node again from its files
	local n=$1
	mv "$TMP/$n/omsd.log" "$TMP/$n/omsd.log.$(date +%s%N)"
	e2e_cluster_start "$n" "$TMP/$n/omsd.ini"
	log "node $n restarted: $(grep -o 'file log.*' "$TMP/$n/omsd.log" | head -n 1)"
}

e2e_trading_ready
oms=$OMS_LEADER

DEPOSITS=0
# phase NAME FIRST_USER SEED SHARD: load through a node that does not lead SHARD, kill the
# one that does 3 s in, restart it once a new leader is elected, check the ledger.
phase() {
	local name=$1 first=$2 seed=$3 shard=$4 victim gw new out
	victim=$(wait_leader "$shard") || fail "$name: no leader of shard $shard"
	gw=$(other_than "$victim" "$(leader_of $((3 - shard)))")
	[ -n "$gw" ] || gw=$(other_than "$victim")
	log "$name: load through node $gw; shard $shard leader is node $victim"
	out=$TMP/load-$name.log
	ip netns exec "$NS_C" "$OMSLOAD" --host "$NET.1$gw" --users 40 --first-user "$first" \
		--rate 300 --seconds 8 --seed "$seed" --mid 100 --drain-ms 8000 --flatten \
		>"$out" 2>&1 &
	local load_pid=$!
	sleep 3
	log "$name: kill -9 node $victim (pid ${NODE_PIDS[$victim]})"
	kill -KILL "${NODE_PIDS[$victim]}"
	wait "${NODE_PIDS[$victim]}" 2>/dev/null || true
	new=$(wait_leader "$shard") || fail "$name: no new leader of shard $shard"
	log "$name: new shard $shard leader: node $new"
	sleep 1
	restart "$victim"
	local rc=0
	wait "$load_pid" || rc=$?
	sed 's/^/    /' "$out"
	[ "$rc" -eq 0 ] || fail "$name: omsload exit $rc"
	local dep ledger
	dep=$(grep "^deposits: " "$out")
	grep -q "^deposits: sent=80 ok=80 refused=0 lost=0" <<<"$dep" || fail "$name: $dep"
	DEPOSITS=$((DEPOSITS + 40))
	ledger=$(grep "^ledger: " "$out") || fail "$name: no ledger"
	read -r acked resting final unrep doubled over gaps filled < <(sed -E \
		's/ledger: acked=([0-9]+) resting=([0-9]+) final=([0-9]+) unreported=([0-9]+) doubled=([0-9]+) overfilled=([0-9]+) seq_gaps=([0-9]+) seq_filled=([0-9]+) .*/\1 \2 \3 \4 \5 \6 \7 \8/' \
		<<<"$ledger")
	[ "$acked" -gt 1000 ] || fail "$name: only $acked orders acknowledged"
	[ "$resting" -eq 0 ] || fail "$name: $resting orders still rest after --flatten"
	[ "$final" -gt 0 ] || fail "$name: no order reached a final state"
	[ "$doubled" -eq 0 ] || fail "$name: $doubled orders executed twice or re-numbered"
	[ "$over" -eq 0 ] || fail "$name: $over orders filled beyond their quantity"
	# The new leader re-sends its recent reports (counted as repeats by the client, or as
	# fills of a hole a dead leader left). What is still missing shows as an unfilled
	# sequence gap; an acknowledged order with no report and no open gap is a silent loss.
	[ "$unrep" -le $((gaps - filled)) ] ||
		fail "$name: $unrep acknowledged orders unreported, $((gaps - filled)) open gaps"
	[ "$shard" = 1 ] && log "$name: reports re-sent by the new leader: node $new $(e2e_cluster_stat "$new" "shard.1.reports_resent") (shard 1); the client saw $(sed -nE 's/.* seq_repeats=([0-9]+) .*/\1/p' "$out") repeats, $gaps gaps, $filled filled"
	UNREPORTED=$((${UNREPORTED:-0} + unrep))
}
phase oms-kill 1000 11 1
phase me-kill 2000 12 2

log "quiescing: every replica must reach the same commit"
sleep 1
e2e_quiesce 50 1 2
sleep 0.5 # the published aggregates refresh every 200 ms
for i in 1 2 3; do
	e2e_cluster_stat "$i" shard.1.role >/dev/null
	st() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/$i/stats"; }
	book=$(st shard.2.resting)
	inflight=$(st shard.1.inflight)
	base=$(st shard.1.asset.1.sum)
	quote=$(st shard.1.asset.2.sum)
	log "node $i: oms $(st shard.1.role) me $(st shard.2.role), book $book, sagas $inflight, base $base, quote $quote"
	# Both loads cancelled what they knew rested; only an order whose reports were all lost
	# (counted unreported) could still rest without the client knowing.
	[ "$book" -le "$UNREPORTED" ] ||
		fail "node $i: the ME book rests $book orders after both loads flattened ($UNREPORTED unreported)"
	[ "$inflight" = 0 ] || fail "node $i: $inflight sagas still in flight"
	[ "$base" = $((DEPOSITS * 1000000000)) ] || fail "node $i: base asset sum $base"
	[ "$quote" = $((DEPOSITS * 1000000000000)) ] || fail "node $i: quote asset sum $quote"
	# Every user, one by one, on this replica (the control socket's users show): nothing
	# reserved after --flatten, and the balances plus the fees equal the deposits.
	for u in $(seq 1000 1039) $(seq 2000 2039); do
		"$OMSCTL" --json --socket "$TMP/$i/omsd.sock" users show --user "$u" ||
			fail "node $i: users show --user $u"
	done >"$TMP/users.$i.json"
	fees1=$(st shard.1.asset.1.fees)
	fees2=$(st shard.1.asset.2.fees)
	# Reconciliation: it ran (queries answered, orders matched with the ME's books) and
	# found nothing wrong. Its counters are replicated state, so every replica agrees.
	for k in recon_queries recon_snapshots recon_matched; do
		v=$(st "shard.1.oms.$k")
		[ -n "$v" ] && [ "$v" -gt 0 ] || fail "node $i: shard.1.oms.$k is '$v': reconciliation did not run"
	done
	for k in alarm_recon_phantom alarm_recon_unknown alarm_recon_mismatch alarm_recon_leak \
		alarm_bad_state; do
		[ "$(st "shard.1.oms.$k")" = 0 ] || fail "node $i: shard.1.oms.$k = $(st "shard.1.oms.$k")"
	done
	"$OMSCTL" --socket "$TMP/$i/omsd.sock" metrics >"$TMP/metrics.$i" ||
		fail "node $i: omsctl metrics"
	m=$(sed -nE 's/^omsd_shard_oms_recon_matched_total\{node="'"$i"'",shard="1"\} ([0-9]+)$/\1/p' \
		"$TMP/metrics.$i")
	[ -n "$m" ] && [ "$m" -gt 0 ] || fail "node $i: /metrics recon_matched is '$m'"
	grep -qE '^omsd_shard_oms_alarm_recon_phantom_total\{node="'"$i"'",shard="1"\} 0$' "$TMP/metrics.$i" ||
		fail "node $i: /metrics alarm_recon_phantom is not 0"
	# Every node's bridge lcore wrote the MAC of its shard lcores' frames to the network
	# (lib.sh gives each a [bridge]): Raft traffic, sagas, events and reports all passed
	# their receivers' MAC check to get this far.
	sealed=$(st bridge.sealed_frames)
	[ -n "$sealed" ] && [ "$sealed" -gt 0 ] || fail "node $i: bridge.sealed_frames is '$sealed'"
	[ "$(st shard.1.tx_frames)" -gt 0 ] || fail "node $i: shard 1 sent no frame"
	log "node $i: reconciliation: queries $(st shard.1.oms.recon_queries) matched $(st shard.1.oms.recon_matched) transient $(st shard.1.oms.recon_transient) deferred $(st shard.1.oms.recon_deferred), no alarm"
	"$PY" "$E2E_DIR/e2e_users_money.py" "$TMP/users.$i.json" $((DEPOSITS * 1000000000 - fees1)) \
		$((DEPOSITS * 1000000000000 - fees2)) 80 || fail "node $i: per-user balances"
done
log "PASS"

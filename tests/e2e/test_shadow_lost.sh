#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: a shadow copy ([limits] snapshot_by = shadow, app_shadow.h) that falls behind by its
# whole ring is lost, and mends: the shard counts it, takes its next snapshot without the
# copy (on the shard lcore here: the state is small) and seeds the copy from it; the
# snapshots after that are the copy's again (each checked against the service's state hash
# in this build: a wrong copy aborts the node). No snapshot fails, no order is lost or
# doubled.
# Method: one node (OMS shard 1, ME shard 2), durable mode, shadow_ring_mb = 1, a snapshot
# every 200 entries. The copies' threads (omsd-shadow) are made SCHED_IDLE on CPU 0 beside
# two busy loops, so they barely run, while omsload trades 3,000 orders/s for 5 s (several
# MiB of applied messages a shard); then the busy loops stop. The shard whose copy was lost
# (either; on a loaded host the scheduler may still let one keep up) is the one followed.
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSLOAD:?set OMSLOAD}"
command -v chrt >/dev/null && command -v taskset >/dev/null || { echo "SKIP: no chrt/taskset"; exit 77; }
e2e_init osl 44
SPIN=
e2e_cleanup_hook() { [ -z "$SPIN" ] || kill $SPIN 2>/dev/null || true; }
e2e_net_up
e2e_trade_config "$TMP/omsd.ini" "" "[durability]" "mode = durable"
sed -i 's/^snapshot_entries = .*/snapshot_entries = 200\nsnapshot_by = shadow\nshadow_ring_mb = 1/' "$TMP/omsd.ini"
e2e_start "$TMP/omsd.ini"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"

tids=()
for t in /proc/"$OMSD_PID"/task/*; do
	[ "$(cat "$t/comm" 2>/dev/null)" = omsd-shadow ] && tids+=("${t##*/}")
done
[ "${#tids[@]}" = 2 ] || fail "expected 2 omsd-shadow threads, found ${#tids[@]}"
taskset -c 0 bash -c 'while :; do :; done' &
SPIN=$!
taskset -c 0 bash -c 'while :; do :; done' &
SPIN="$SPIN $!"
for t in "${tids[@]}"; do
	taskset -p -c 0 "$t" >/dev/null || fail "taskset $t"
	chrt --idle -p 0 "$t" || fail "chrt $t"
done
log "shadow threads ${tids[*]} starved on CPU 0; trading"
out=$TMP/load.log
ip netns exec "$NS_C" "$OMSLOAD" --host "$NODE_IP" --users 40 --first-user 1000 \
	--rate 3000 --seconds 5 --seed 5 --mid 100 --drain-ms 8000 --flatten >"$out" 2>&1 ||
	{ sed 's/^/    /' "$out"; fail "omsload"; }
sed 's/^/    /' "$out"
e2e_stats
lost1=$(e2e_stat shard.1.snapshot_shadow_lost) lost2=$(e2e_stat shard.2.snapshot_shadow_lost)
shad1=$(e2e_stat shard.1.snapshot_shadowed) shad2=$(e2e_stat shard.2.snapshot_shadowed)
log "while starved: lost $lost1 / $lost2, shadowed $shad1 / $shad2, snapshots $(e2e_stat shard.1.snapshots) / $(e2e_stat shard.2.snapshots), lag max $(e2e_stat shard.1.shadow_lag_max_bytes) / $(e2e_stat shard.2.shadow_lag_max_bytes) bytes"
sh=1
[ "$lost1" -ge 1 ] || sh=2
[ "$(e2e_stat shard.$sh.snapshot_shadow_lost)" -ge 1 ] || fail "no copy was lost with a 1 MiB ring"
shad=$(e2e_stat shard.$sh.snapshot_shadowed)
kill $SPIN
wait $SPIN 2>/dev/null || true
SPIN=
for t in "${tids[@]}"; do chrt --other -p 0 "$t" || true; done
log "the busy loop stopped"

# The next snapshots (the idle leader's tick entries make one every 2 s): the lost copy's
# shard took its first one after the loss without the copy, and seeded it; then the copy's
# again.
ok=
for _ in $(seq 100); do
	e2e_stats
	if [ "$(e2e_stat shard.$sh.snapshot_shadowed)" -ge $((shad + 2)) ]; then ok=1; break; fi
	sleep 0.2
done
for sh in 1 2; do
	log "shard $sh: snapshots $(e2e_stat shard.$sh.snapshots), shadowed $(e2e_stat shard.$sh.snapshot_shadowed), lost $(e2e_stat shard.$sh.snapshot_shadow_lost), forked $(e2e_stat shard.$sh.snapshot_forks), failed $(e2e_stat shard.$sh.snapshot_failed), longest serialisation $(e2e_stat shard.$sh.snapshot_shadow_max_ns) ns"
	[ "$(e2e_stat shard.$sh.snapshot_failed)" = 0 ] || fail "shard $sh: a snapshot failed"
done
[ -n "$ok" ] || fail "shard $sh: the copy serialised no snapshot after it was lost"
grep -q "the shadow copy is lost" "$OMSD_LOG" || fail "the loss is not in the log"

ledger=$(grep "^ledger: " "$out") || fail "no ledger"
read -r acked resting doubled over < <(sed -E \
	's/ledger: acked=([0-9]+) resting=([0-9]+) .* doubled=([0-9]+) overfilled=([0-9]+) .*/\1 \2 \3 \4/' \
	<<<"$ledger")
[ "$acked" -gt 1000 ] || fail "only $acked orders acknowledged"
[ "$resting" -eq 0 ] || fail "$resting orders still rest after --flatten"
[ "$doubled" -eq 0 ] || fail "$doubled orders executed twice"
[ "$over" -eq 0 ] || fail "$over orders overfilled"
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

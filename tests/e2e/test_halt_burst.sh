#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal (issue 15, e2e_halt_burst): a halt with cancel-resting of a symbol holding 3 x the ME's
# event retention (events_max) in resting orders, while an OMS follower lags, overwrites no
# event the OMS has not acknowledged: the ME cancels in chunks as the OMS's acks free room
# (me/me_bulk.c), every order reaches one CANCELLED that says done at the client, no report sequence has
# a gap, every replica (the lagging one too) ends with the same halt, and the overrun counter
# never moves.
# Method: three omsd processes (OMS shard 1 + ME shard 2 on each, [limits] me_events = 64);
# ME leadership moved to the OMS leader's node; the client (e2e_halt_burst.py) rests 192
# sells, SIGSTOPs the third node, halts symbol 1 with cancel-resting through omsctl, SIGCONTs
# it, then checks the reports and every node's ME counters.
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
EVENTS=64
e2e_cluster_init ohb 47 3
e2e_cluster_net_up
e2e_config_edit() {
	sed -i "s/^\[limits\]\$/[limits]\nme_events = $EVENTS/" "$1"
}
e2e_cluster_trading_up
grep -q "^me_events = $EVENTS" "$TMP/1/omsd.ini" || fail "me_events not in the config"
e2e_cluster_wait_bootstrap

# leader_of SHARD: the node that leads SHARD (by its own stats), or empty.
leader_of() {
	local n
	for n in 1 2 3; do
		[ "$(e2e_cluster_stat "$n" "shard.$1.is_leader")" = 1 ] && { echo "$n"; return; }
	done
}
L1=
for _ in $(seq 75); do L1=$(leader_of 1); [ -n "$L1" ] && break; sleep 0.2; done
[ -n "$L1" ] || { OMSD_LOG=$TMP/1/omsd.log; fail "no OMS leader"; }
L2=$(leader_of 2)
if [ "$L2" != "$L1" ]; then
	OUT=$("$OMSCTL" --socket "$TMP/$L2/omsd.sock" --json transfer-leader --shard 2 --to "$L1" 2>&1) ||
		fail "transfer-leader of ME shard 2 to node $L1: $OUT"
fi
[ "$(leader_of 2)" = "$L1" ] || fail "node $L1 does not lead ME shard 2"
F=$(( L1 % 3 + 1 ))
log "node $L1 leads OMS shard 1 and ME shard 2; node $F lags (SIGSTOP) during the halt"
[ "$(e2e_cluster_stat "$L1" shard.2.me.EVENTS_OVERRUN)" = 0 ] || fail "overrun before the test"

pids="1:${NODE_PIDS[1]},2:${NODE_PIDS[2]},3:${NODE_PIDS[3]}"
if ! ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_halt_burst.py" \
	--nodes "$NET.11,$NET.12,$NET.13" --orders $((3 * EVENTS)) --omsctl "$OMSCTL" \
	--socket "$TMP/$L1/omsd.sock" --stop-pid "${NODE_PIDS[$F]}" --pids "$pids" --stats "$TMP"; then
	kill -CONT "${NODE_PIDS[$F]}" 2>/dev/null || true
	for i in 1 2 3; do
		echo "---- node $i ----" >&2
		tail -n 15 "$TMP/$i/omsd.log" >&2
	done
	fail "halt burst checks"
fi
for i in 1 2 3; do
	log "node $i: ME halt-cancelled $(e2e_cluster_stat "$i" shard.2.me.HALT_CANCELLED), bulk jobs $(e2e_cluster_stat "$i" shard.2.me.BULK_JOBS), deferred steps $(e2e_cluster_stat "$i" shard.2.me.BULK_DEFERRED), overruns $(e2e_cluster_stat "$i" shard.2.me.EVENTS_OVERRUN), OMS replays $(e2e_cluster_stat "$i" shard.1.oms.replay_requests)"
done
log "PASS"

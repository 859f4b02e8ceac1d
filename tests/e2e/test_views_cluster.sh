#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: the lag per member is real: the leader of a three-member shard shows a
# follower that stopped falling behind, and catching up again once it runs; followers show
# no match/lag of their own (only the leader knows them).
# Method: three trading nodes (OMS shard 1 + ME shard 2 on each, tick entries every 10 ms so
# the log grows while idle); find shard 1's leader; SIGSTOP one follower for 1.5 s and read
# `omsctl members` and `status` on the leader; SIGCONT it and wait for its lag to shrink.
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
e2e_cluster_init omt 23 3
e2e_cluster_net_up
e2e_cluster_trading_up
ctl() { "$OMSCTL" --socket "$TMP/$1/omsd.sock" "${@:2}"; }

leader=
for _ in $(seq 100); do
	for i in 1 2 3; do
		if ctl "$i" --json status 2>/dev/null | grep -qF '"shard":1,"service":"oms","role":"leader"'; then
			leader=$i
		fi
	done
	[ -n "$leader" ] && break
	sleep 0.1
done
[ -n "$leader" ] || fail "no leader for shard 1"
follower=$((leader % 3 + 1))
other=$(((leader + 1) % 3 + 1))
log "shard 1: leader node $leader, stopping follower node $follower"

# member_lag NODE: node NODE's lag on shard 1 as the leader reports it ("null" off-leader).
member_lag() {
	ctl "$leader" --json members | "$PY" -c '
import json, sys
r = json.load(sys.stdin)["result"]["members"]
print(next(m["lag"] for m in r if m["shard"] == 1 and m["node"] == int(sys.argv[1])))' "$1"
}

# A follower knows no match index: its rows say null. (It learns the leader from the first
# AppendEntries, which may still be on its way right after the election.)
named=
for _ in $(seq 50); do
	ctl "$follower" --json members >"$TMP/fmembers.json" || fail "members on a follower"
	if grep -qF '"shard":1,"node":'"$leader"',"self":false,"leader":true' "$TMP/fmembers.json"; then
		named=1
		break
	fi
	sleep 0.1
done
[ -n "$named" ] || fail "follower does not name the leader: $(cat "$TMP/fmembers.json")"
grep -qF '"match":null,"lag":null' "$TMP/fmembers.json" ||
	fail "follower reports a match index: $(cat "$TMP/fmembers.json")"

kill -STOP "${NODE_PIDS[$follower]}"
sleep 1.5
behind=$(member_lag "$follower")
live=$(member_lag "$other")
log "lag while stopped: node $follower $behind, node $other $live"
[ "$behind" -ge 50 ] || fail "stopped follower lag $behind, want >= 50 (tick entries every 10 ms)"
[ "$live" -lt "$behind" ] || fail "live follower lag $live not below the stopped one's $behind"
ctl "$leader" --json status >"$TMP/status.json" || fail "status on the leader"
slag=$("$PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))["result"]["shards"]
print(next(s["lag"][sys.argv[2]] for s in r if s["shard"] == 1))' "$TMP/status.json" "$follower")
[ "$slag" -ge 50 ] || fail "status lag of node $follower is $slag: $(cat "$TMP/status.json")"
"$OMSCTL" --socket "$TMP/$leader/omsd.sock" members >"$TMP/members.txt"
log "members on the leader:"$'\n'"$(cat "$TMP/members.txt")"

kill -CONT "${NODE_PIDS[$follower]}"
caught=
for _ in $(seq 50); do
	lag=$(member_lag "$follower")
	if [ "$lag" -lt 10 ]; then caught=$lag; break; fi
	sleep 0.1
done
[ -n "$caught" ] || fail "follower $follower did not catch up (lag $lag)"
log "caught up: lag $caught"
log "PASS"

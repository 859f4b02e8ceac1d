#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: control-socket mutations go through the Raft logs of a 3-node cluster: a
# halt committed on the leader is visible on a follower; with --local a follower answers
# not_leader with the leader's node id and proposes nothing; a halt survives a change of ME leader (the
# bootstrap does not re-propose symbols the replica knows); transfer-leader moves a shard and
# answers once the new leader is seen; a --local request that needs shards led by two nodes
# is refused not_leader naming the other; orders are NAKed HALTED while halted and ACKed after
# resume; a whale pin committed on the leader shows on a follower's routes show.
# Method: three omsd processes (OMS shard 1 + ME shard 2 on every node, no database);
# omsctl against each node's socket; orders from the client namespace (e2e_mgmt.py).
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
e2e_cluster_init oma 19 3
e2e_cluster_net_up
e2e_cluster_trading_up
NODES_IPS="$NET.11,$NET.12,$NET.13"

ctl_rc() { e2e_ctl_rc "$@"; } # omsctl on a node, exit code checked (lib.sh)
# leader_of SHARD: the node that leads SHARD (by its own status), or empty; wait_leader
# SHARD [NOT]: until a node other than NOT leads it, printed (lib.sh).
leader_of() { e2e_leader_of "$@"; }
wait_leader() { e2e_wait_leader "$@"; }
# wait_json NODE PATTERN-COUNT PATTERN ARGS...: until omsctl --json ARGS on NODE prints
# PATTERN COUNT times.
wait_json() {
	local node=$1 want=$2 pat=$3
	shift 3
	for _ in $(seq 50); do
		OUT=$("$OMSCTL" --socket "$TMP/$node/omsd.sock" --json "$@" 2>&1) || true
		[ "$(grep -oF "$pat" <<<"$OUT" | wc -l)" = "$want" ] && return 0
		sleep 0.2
	done
	return 1
}
order() { ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_mgmt.py" expect --nodes "$NODES_IPS" "$@"; }

L1=$(wait_leader 1) || { OMSD_LOG=$TMP/1/omsd.log; fail "no OMS leader"; }
L2=$(wait_leader 2) || { OMSD_LOG=$TMP/1/omsd.log; fail "no ME leader"; }
log "leaders: OMS shard 1 on node $L1, ME shard 2 on node $L2"
for _ in $(seq 75); do
	[ "$(e2e_cluster_stat "$L1" shard.1.route_epoch)" = 1 ] && break
	sleep 0.2
done

# With --local (no forwarding, test_admin_forward.sh covers that) a follower refuses and
# names the leader; nothing is proposed.
F=$(( L1 % 3 + 1 ))
ctl_rc "$F" 1 --json symbols halt --symbol 1 --local
grep -qF '"error":"not_leader"' <<<"$OUT" || fail "follower's answer: $OUT"
grep -qF "\"leader\":$L1" <<<"$OUT" || fail "not_leader without the leader $L1: $OUT"
log "follower $F: $OUT"
# transfer-leader is forwarded too (e2e_admin_forward); --local keeps the refusal.
ctl_rc "$F" 1 transfer-leader --shard 1 --to "$F" --local
grep -q "not_leader" <<<"$OUT" || fail "transfer-leader --local on a follower: $OUT"

# Put the ME shard's leadership with the OMS shard's (answered once node L1 leads it).
if [ "$L2" != "$L1" ]; then
	ctl_rc "$L2" 0 --json transfer-leader --shard 2 --to "$L1"
	grep -qF "\"leader\":$L1" <<<"$OUT" || fail "transfer answer: $OUT"
	log "transfer: $OUT"
fi
[ "$(leader_of 2)" = "$L1" ] || fail "node $L1 does not lead shard 2 after the transfer"

# Malformed requests on the leader: clear errors, no change.
ctl_rc "$L1" 1 symbols halt --symbol 1 --bogus 1
grep -q "bad_argument" <<<"$OUT" || fail "unknown argument: $OUT"
ctl_rc "$L1" 1 symbols halt --symbol -4
grep -q "bad_argument" <<<"$OUT" || fail "negative symbol: $OUT"
bad=$("$PY" - "$TMP/$L1/omsd.sock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b'{"cmd": "symbols.halt", "args": {"symbol": 1\n')
print(s.recv(4096).decode().strip())
s.sendall(b'{"cmd": "symbols.melt", "args": {"symbol": 1}}\n')
print(s.recv(4096).decode().strip())
PY
) || fail "raw requests"
grep -qF '"error":"bad_json"' <<<"$bad" || fail "bad JSON: $bad"
grep -qF '"error":"unknown_command"' <<<"$bad" || fail "unknown command: $bad"
ctl_rc "$F" 0 --json symbols list
grep -qF '"halted"' <<<"$OUT" && fail "a refused request changed state: $OUT"

ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_mgmt.py" fund --nodes "$NODES_IPS" >/dev/null ||
	fail "deposits"

# The halt commits through both logs; a follower's replicas show it.
ctl_rc "$L1" 0 --json symbols halt --symbol 1
log "halt on node $L1: $OUT"
wait_json "$F" 2 '"status":"halted"' symbols list ||
	fail "follower $F does not show the halt on both shards: $OUT"
log "follower $F: $OUT"
order --user 1002 --cl 1 --want HALTED || fail "order on a halted symbol"

# A new ME leader keeps the halt (bootstrap only proposes symbols a replica lacks).
ctl_rc "$L1" 0 transfer-leader --shard 2 --to "$F"
sleep 1
wait_json "$F" 2 '"status":"halted"' symbols list || fail "halt undone by a new leader: $OUT"
order --user 1002 --cl 2 --want HALTED || fail "order after the ME leader changed"

# Now the shards are led by two nodes: resume --local on either is refused, naming the other.
ctl_rc "$L1" 1 --json symbols resume --symbol 1 --local
grep -qF '"error":"not_leader"' <<<"$OUT" && grep -qF "\"leader\":$F" <<<"$OUT" ||
	fail "split leadership: $OUT"
ctl_rc "$F" 0 transfer-leader --shard 2 --to "$L1"
ctl_rc "$L1" 0 --json symbols resume --symbol 1
wait_json "$F" 2 '"status":"trading"' symbols list || fail "follower does not show resume: $OUT"
order --user 1002 --cl 3 --want ack || fail "order after resume"

# A whale pin: routing epoch 2 on every replica.
ctl_rc "$L1" 0 --json routes pin --user 4242 --shard 1
wait_json "$F" 1 '"user":4242' routes show || fail "pin not on follower $F: $OUT"
grep -qF '"epoch":2' <<<"$OUT" || fail "pin did not bump the epoch: $OUT"
ctl_rc "$F" 0 --json snapshot --shard 1
grep -qF '"status":"ok"' <<<"$OUT" || fail "snapshot on a follower: $OUT"
log "PASS"

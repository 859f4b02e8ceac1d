#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: any node's control socket runs any admin mutation whatever the leader placement
# (issue 21): with the sharded shape (3 nodes; OMS shards 1-2, ME shards 3-4; leaders spread
# over the three nodes by transfer-leader) every node halts and resumes a symbol, kills and
# releases a user, pins and unpins a user; each command answers ok with every target shard
# committed, shows on the other nodes' replicas, and applies exactly once (the routing
# epoch moves by one per pin, also when every forwarded frame reaches the leader twice).
# `--local` keeps the old rule (not_leader, nothing proposed). transfer-leader on a node that
# does not lead the shard (OMS and ME shards) is forwarded too and answers ok once the target
# leads (via the old leader; a repeat via the target, already so). A kill -9 of a target shard's
# leader while a forwarded command is pending: the command completes after the re-election
# or answers a clear error, never later than its deadline. A client cannot inject admin
# commands: a raw SYMBOL_STATUS, an INGRESS wrapping one and a FORWARDED_ADMIN from the
# client's address are refused, counted, and change nothing.
# Method: three omsd processes, omsctl on each node's socket, nftables `dup` on the switch
# copying every frame to one leader, raw UDP frames from the client namespace (python).
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
e2e_cluster_init oaf 57 3
e2e_cluster_net_up

e2e_sharded_lines 1,2,3
LINES=("${E2E_SHARDED_LINES[@]}")
for i in 1 2 3; do
	mkdir -p "$TMP/$i"
	E2E_SERVICE_1=oms E2E_SERVICE_2=oms e2e_cluster_config "$i" "$TMP/$i/omsd.ini" "${LINES[@]}"
	e2e_cluster_start "$i" "$TMP/$i/omsd.ini"
done
log "3 nodes up: ${NODE_PIDS[*]}"

ctl_rc() { e2e_ctl_rc "$@"; } # omsctl on a node, exit code checked (lib.sh)
# Leadership by the nodes' own status (lib.sh).
leader_of() { e2e_leader_of "$@"; }
wait_leader() { e2e_wait_leader "$@"; }
leads() { e2e_leads "$@"; }
lead() { e2e_lead "$@"; }
# py_json EXPR: evaluate EXPR with r = the JSON result in $OUT.
py_json() { "$PY" -c "import json,sys; r=json.loads(sys.argv[1])['result']; print($1)" "$OUT"; }
# wait_view NODE EXPR WANT ARGS...: until py_json EXPR over omsctl --json ARGS on NODE is WANT.
wait_view() {
	local node=$1 expr=$2 want=$3 got=
	shift 3
	for _ in $(seq 50); do
		OUT=$("$OMSCTL" --socket "$TMP/$node/omsd.sock" --json "$@" 2>&1) &&
			got=$(py_json "$expr" 2>/dev/null) && [ "$got" = "$want" ] && return 0
		sleep 0.2
	done
	fail "node $node: $* gives '$got' for $expr, want '$want': $OUT"
}
SYM1='sorted(set(x["status"] for x in r["symbols"] if x["symbol"]==1 and x["shard"] in (1,2,3)))'
KILLED='sorted(set(x["killed"] for x in r["shards"]))'
EPOCHS='sorted(set(x["epoch"] for x in r["shards"]))'
PINNED='sorted(set(str(any(p["user"]==4242 for p in x["pins"])) for x in r["shards"]))'
# Each result row of $OUT as shard:status, in the request's order.
ROWS='",".join("%d:%s" % (x["shard"], x["status"]) for x in r["results"])'

for s in 1 2 3 4; do wait_leader "$s" >/dev/null || fail "shard $s elected no leader"; done
for _ in $(seq 75); do
	[ "$(e2e_cluster_stat 1 shard.1.route_epoch)" = 1 ] &&
		[ "$(e2e_cluster_stat 1 shard.2.route_epoch)" = 1 ] && break
	sleep 0.2
done
# Leaders spread: OMS 1 on node 1, OMS 2 on node 2, ME 3 on node 3, ME 4 on node 2.
lead 1 1
lead 2 2
lead 3 3
lead 4 2
log "leaders: shard 1 → 1, 2 → 2, 3 → 3, 4 → 2"

# The old rule on request: a node that does not lead every target refuses, proposes nothing.
ctl_rc 1 1 --json symbols halt --symbol 1 --local
grep -qF '"error":"not_leader"' <<<"$OUT" || fail "--local answer: $OUT"
wait_view 2 "$SYM1" "['trading']" symbols list

EPOCH=1
for n in 1 2 3; do
	o=$(( n % 3 + 1 )) # another node, to see the effect on
	ctl_rc "$n" 0 --json symbols halt --symbol 1
	[ "$(py_json "$ROWS")" = "3:ok,1:ok,2:ok" ] || fail "node $n halt rows: $OUT"
	grep -qF '"via":' <<<"$OUT" || fail "node $n halt: nothing was forwarded: $OUT"
	wait_view "$o" "$SYM1" "['halted']" symbols list
	ctl_rc "$n" 0 --json symbols resume --symbol 1
	wait_view "$o" "$SYM1" "['trading']" symbols list

	ctl_rc "$n" 0 --json kill user --user 77
	[ "$(py_json "$ROWS")" = "3:ok,4:ok,1:ok,2:ok" ] || fail "node $n kill rows: $OUT"
	wait_view "$o" "$KILLED" "[True]" users show --user 77
	ctl_rc "$n" 0 --json kill user --user 77 --release
	wait_view "$o" "$KILLED" "[False]" users show --user 77

	ctl_rc "$n" 0 --json routes pin --user 4242 --shard 2
	EPOCH=$((EPOCH + 1))
	wait_view "$o" "$PINNED" "['True']" routes show
	wait_view "$o" "$EPOCHS" "[$EPOCH]" routes show
	ctl_rc "$n" 0 --json routes unpin --user 4242
	EPOCH=$((EPOCH + 1))
	wait_view "$o" "$PINNED" "['False']" routes show
	wait_view "$o" "$EPOCHS" "[$EPOCH]" routes show

	# Membership changes go to each shard's leader as well (e2e_standby makes real ones):
	# here, on every hosted shard, ones the configuration already shows — promote a voter,
	# remove a node that is no member — answered ok by the leaders, nothing changed.
	for op in promote remove; do
		[ "$op" = promote ] && m=$n || m=9
		ctl_rc "$n" 0 --json members "$op" --node "$m"
		[ "$(py_json "$ROWS")" = "1:ok,2:ok,3:ok,4:ok" ] || fail "node $n members $op rows: $OUT"
		grep -qF '"via":' <<<"$OUT" || fail "node $n members $op: nothing was forwarded: $OUT"
	done
	log "node $n: halt, resume, kill, release, pin, unpin, members promote, remove ok; routing epoch $EPOCH"
done
# transfer-leader runs from any node too: on a node that does not lead the shard it goes to
# the leader as a LEADER_TRANSFER, which hands leadership over and answers once the target
# leads (`via` the old leader); a re-send or a repeat that reaches the target as leader is
# answered ok at once (already so, `via` the target). `--local` keeps not_leader.
ctl_rc 2 1 --json transfer-leader --shard 1 --to 3 --local
grep -qF '"error":"not_leader"' <<<"$OUT" || fail "transfer-leader --local answer: $OUT"
leads 1 1 || fail "transfer-leader --local moved shard 1: $OUT"
# xfer SHARD ON TO [VIA]: transfer-leader on node ON (not SHARD's leader) until it answers
# ok (a transfer can lapse on a loaded host: busy, or timeout; up to 5 tries); the answer
# must name TO and come via a leader other than ON (VIA when given), and TO must then lead
# by its own status.
xfer() {
	local shard=$1 on=$2 to=$3 l rc via t
	for try in 1 2 3 4 5; do
		l=$(wait_leader "$shard") || fail "no leader for shard $shard"
		[ "$l" != "$on" ] || fail "shard $shard: node $on leads it, nothing to forward"
		t=$(date +%s%N)
		rc=0
		OUT=$("$OMSCTL" --socket "$TMP/$on/omsd.sock" --json transfer-leader --shard "$shard" \
			--to "$to" 2>&1) || rc=$?
		t=$((($(date +%s%N) - t) / 1000000))
		if [ "$rc" -eq 0 ]; then
			[ "$(py_json 'r["shard"], r["leader"]')" = "$shard $to" ] ||
				fail "node $on transfer-leader shard $shard to $to: $OUT"
			via=$(py_json 'r.get("via", 0)')
			# (ON itself only when ON is TO: a re-send reached it once it led.)
			[ "$via" != 0 ] && { [ "$via" != "$on" ] || [ "$on" = "$to" ]; } ||
				fail "node $on transfer-leader shard $shard: not forwarded (via $via): $OUT"
			[ -z "${4:-}" ] || [ "$via" = "$4" ] ||
				fail "node $on transfer-leader shard $shard: via $via, want $4: $OUT"
			for _ in $(seq 20); do
				leads "$to" "$shard" && break
				sleep 0.2
			done
			leads "$to" "$shard" || fail "shard $shard: ok via $via, but node $to does not lead: $OUT"
			log "shard $shard: transfer-leader --to $to on node $on via node $via (leader $l) ok in $t ms"
			return 0
		fi
		grep -qE '"error":"(busy|timeout|not_leader|lost)"' <<<"$OUT" ||
			fail "node $on transfer-leader shard $shard to $to: exit $rc: $OUT"
		log "shard $shard: transfer-leader --to $to on node $on (try $try): $OUT"
		sleep 0.5
	done
	fail "shard $shard: transfer-leader --to $to on node $on never went through"
}
xfer 1 2 3 # OMS 1, led by node 1, from node 2 to node 3
xfer 1 2 3 3 # the same again: node 3 leads, it answers ok itself
xfer 3 1 1 # ME 3, led by node 3, from node 1 to node 1 itself
xfer 4 3 1 # ME 4, led by node 2, from node 3 to node 1
# The layout the phases below expect.
lead 1 1
lead 3 3
lead 4 2
log "leaders again: shard 1 → 1, 2 → 2, 3 → 3, 4 → 2"

fwd=0
for n in 1 2 3; do fwd=$((fwd + $(e2e_cluster_stat "$n" shard.1.fwd_proposed) +
	$(e2e_cluster_stat "$n" shard.2.fwd_proposed))); done
log "forwarded proposals on the OMS shards: $fwd"
[ "$fwd" -ge 8 ] || fail "too few forwarded proposals ($fwd): the commands were not forwarded"

# Exactly once: every frame to node 2 (OMS 2 and ME 4's leader) arrives twice, so each
# forwarded command reaches it twice; the epoch still moves by one per pin.
# The switch copies what nodes 1 and 3 send to node 2 (nftables netdev dup at their ports).
sw() { ip netns exec "$NS_SW" nft "$@"; }
sw add table netdev fwddup || fail "nftables netdev unavailable"
for p in 1 3; do
	sw add chain netdev fwddup "in$p" "{ type filter hook ingress device ${TAG}${p}s priority 0; }"
	sw add rule netdev fwddup "in$p" ip daddr "$NET.12" udp dport 7400 dup to "${TAG}2s"
done
# The layout again: an election on a loaded host since the commands above may have moved
# OMS 2's leadership off node 2, and then no forward would reach the duplicating port.
lead 1 1
lead 2 2
dup0=$(e2e_cluster_stat 2 shard.2.fwd_dup)
for n in 1 3; do
	ctl_rc "$n" 0 --json routes pin --user 4242 --shard 1
	EPOCH=$((EPOCH + 1))
	wait_view 2 "$EPOCHS" "[$EPOCH]" routes show
	ctl_rc "$n" 0 --json routes unpin --user 4242
	EPOCH=$((EPOCH + 1))
	wait_view 2 "$EPOCHS" "[$EPOCH]" routes show
done
sleep 0.5
wait_view 1 "$EPOCHS" "[$EPOCH]" routes show
sw delete table netdev fwddup
dup1=$(e2e_cluster_stat 2 shard.2.fwd_dup)
log "duplicated frames: shard 2 on node 2 answered $((dup1 - dup0)) re-sends from its table; epoch $EPOCH"
# Each of the 4 commands arrives twice; a copy that finds its first still unanswered, or
# answered, is counted. Not every copy need be: a first copy refused BUSY (a leader whose
# state is not current yet) leaves nothing to find, and the copy is proposed as the first.
# The epoch moving by exactly one per command (above) is what says nothing applied twice.
[ $((dup1 - dup0)) -ge 1 ] || fail "the duplicates never reached the dedup table ($dup0 → $dup1)"

# A client cannot inject admin commands (no MAC keys here: the address decides). Sent to
# node 2, which leads ME shard 4: before the check a raw halt from a client was proposed.
MAJOR=$(awk '$1 == "#define" && $2 == "WIRE_VERSION_MAJOR" { print $3 }' "$E2E_DIR/../../common/wire.h")
nfn0=$(e2e_cluster_stat 2 shard.4.admin_not_from_node)
ing0=$(e2e_cluster_stat 1 shard.1.not_from_node)
inject=$(ip netns exec "$NS_C" "$PY" - "$NET.12" "$NET.11" "$MAJOR" <<'PY'
import socket, struct, sys
MAGIC, MAJOR = 0x44534D4F, int(sys.argv[3])
def frame(msg):  # version MAJOR.0 (docs/wire.md)
    return struct.pack("<IBBHIHBB", MAGIC, MAJOR, 0, 1, 500, 16 + len(msg), 0, 0) + msg
def halt(shard):  # SYMBOL_STATUS: symbol 2 halted
    return struct.pack("<HHHHIBBH", 50, 16, shard, 0, 2, 2, 0, 0)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
me4, oms1 = (sys.argv[1], 7400), (sys.argv[2], 7400)
s.sendto(frame(halt(4)), me4)                                               # raw admin
s.sendto(frame(struct.pack("<HHHHQIHH", 72, 40, 4, 0, 1, 1, 4, 16) + halt(4)), me4)  # FWD
s.sendto(frame(struct.pack("<HHHHIHH", 71, 32, 1, 0, 1, 16, 0) + halt(1)), oms1)   # INGRESS
print("sent")
PY
) || fail "inject: $inject"
sleep 0.5
nfn1=$(e2e_cluster_stat 2 shard.4.admin_not_from_node)
ing1=$(e2e_cluster_stat 1 shard.1.not_from_node)
[ $((nfn1 - nfn0)) -eq 2 ] || fail "raw SYMBOL_STATUS / FORWARDED_ADMIN from a client: counted $nfn0 → $nfn1"
[ $((ing1 - ing0)) -ge 1 ] || fail "INGRESS from a client not counted ($ing0 → $ing1)"
sleep 0.5
wait_view 3 'sorted(set(x["status"] for x in r["symbols"] if x["symbol"]==2))' "['trading']" \
	symbols list
log "client injection refused and counted"

# kill -9 the leader of OMS shard 2 (node 2), then at once pin from node 1: the command is
# pending while shards 2 and 4 elect; it completes or fails clearly, before its deadline.
kill -KILL "${NODE_PIDS[2]}"
wait "${NODE_PIDS[2]}" 2>/dev/null || true
unset 'NODE_PIDS[2]'
t0=$(date +%s%N)
rc=0
OUT=$("$OMSCTL" --socket "$TMP/1/omsd.sock" --timeout-ms 15000 --json routes pin --user 4343 \
	--shard 1 --timeout_ms 5000 2>&1) || rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
log "pin with the OMS 2 leader killed: exit $rc after $ms ms: $OUT"
[ "$ms" -le 7000 ] || fail "the command outlived its deadline: $ms ms"
l2=$(wait_leader 2 2) || fail "shard 2 elected no new leader"
if [ "$rc" -eq 0 ]; then
	EPOCH=$((EPOCH + 1))
	wait_view 3 "$EPOCHS" "[$EPOCH]" routes show
	wait_view 1 "$EPOCHS" "[$EPOCH]" routes show
	# Exactly once across the failover too: the unpin moves the epoch by one more.
	ctl_rc 3 0 --json routes unpin --user 4343
	EPOCH=$((EPOCH + 1))
	wait_view 1 "$EPOCHS" "[$EPOCH]" routes show
else
	grep -qE '"error":"(timeout|not_leader|lost|busy)"' <<<"$OUT" || fail "unclear error: $OUT"
	grep -qE 'shard [12]' <<<"$OUT" || fail "the error names no shard: $OUT"
	ctl_rc 3 0 --json kill user --user 88 # the survivors answer the next command
fi
log "after the re-election (shard 2 now on node $l2): $OUT"
log "PASS"

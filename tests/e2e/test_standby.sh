#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: a hot standby. A fourth host joins (omsd --join) and every shard's leader adds it as
# a learner: it follows every shard (its applied index keeps up) but never counts — with two
# of the three voters paused (SIGSTOP), nothing commits although the learner acknowledges
# everything. When a voter is lost for good (kill -9 under load), the standby is promoted
# and the dead member removed; the standby holds the log already, so each change commits in
# one round (the time from the kill to both shards back at three voters is printed, most of
# it this script's polling). Nothing acknowledged is lost, money exact on every replica.
# Every change runs on a node that does not lead the shard (the learner itself for the
# promote): it is forwarded to the leader, and the answer's row says `via` that leader; the
# repeated remove and promote, forwarded again, answer ok without a second change.
# Method: four namespaces on a Linux bridge, shards OMS 1 and ME 2 bootstrapped on nodes
# 1-3, durable logs, no database; omsload 300 orders/s for 10 s through a node that stays.
set -euo pipefail
: "${OMSLOAD:?set OMSLOAD}"
: "${OMSCTL:?set OMSCTL}"
source "$(dirname "$0")/lib.sh"
need_root
e2e_cluster_init osb 82 4
e2e_cluster_net_up
export E2E_MEMBERS=1,2,3
e2e_members_configs
for i in 1 2 3; do e2e_cluster_start "$i" "$TMP/$i/omsd.ini"; done
E2E_OMSD_ARGS=--join e2e_cluster_start 4 "$TMP/4/omsd.ini"
log "nodes 1-3 (members) and 4 (--join) up: ${NODE_PIDS[*]}"
leader_of() { e2e_live_leader "$@"; }
wait_leader() { e2e_wait_live_leader "$@"; }
members_of() { e2e_members "$@"; }
# change OP SHARD NODE [CANDIDATES]: `omsctl members OP` on the first live candidate that
# does not lead SHARD (default 1 2 3 4), so the leader gets it forwarded; retried while
# busy or leadership moves (20 s). The answer must be ok with `via` the shard's leader.
change() {
	local op=$1 shard=$2 node=$3 l on out t i via
	shift 3
	local cands=("$@")
	[ "${#cands[@]}" -gt 0 ] || cands=(1 2 3 4)
	for _ in $(seq 100); do
		l=$(wait_leader "$shard") || fail "shard $shard: no leader"
		on=
		for i in "${cands[@]}"; do
			[ "$i" != "$l" ] && [ -n "${NODE_PIDS[$i]:-}" ] && { on=$i; break; }
		done
		[ -n "$on" ] || fail "shard $shard: no live candidate among ${cands[*]} but the leader $l"
		t=$(date +%s%N)
		if out=$("$OMSCTL" --socket "$TMP/$on/omsd.sock" --json members "$op" --shard "$shard" \
			--node "$node" 2>&1); then
			t=$((($(date +%s%N) - t) / 1000000))
			via=$(printf '%s' "$out" | "$PY" -c '
import json, sys
rows = json.load(sys.stdin)["result"]["results"]
assert len(rows) == 1 and rows[0]["status"] == "ok", rows
print(rows[0].get("via", 0))') || fail "shard $shard: members $op on node $on: $out"
			[ "$via" != 0 ] && [ "$via" != "$on" ] ||
				fail "shard $shard: members $op on node $on was not forwarded (via $via): $out"
			[ "$via" = "$l" ] || [ "$via" = "$(leader_of "$shard")" ] ||
				fail "shard $shard: members $op on node $on via $via, leader $l: $out"
			log "shard $shard: members $op --node $node on node $on via leader $via committed in $t ms"
			return 0
		fi
		case "$out" in
		*busy* | *not_leader* | *lost* | *timeout*) sleep 0.2 ;;
		*) fail "shard $shard: members $op --node $node on node $on: $out" ;;
		esac
	done
	fail "shard $shard: members $op --node $node never went through: $out"
}

e2e_cluster_wait_bootstrap
# Node 4 does not know the leaders before it is added: ask the voters that do not lead.
for s in 1 2; do change add "$s" 4 1 2 3; done
for s in 1 2; do e2e_wait_caught_up "$s" 4; done
log "node 4 is a learner of shards 1 and 2 and caught up"
[ "$(members_of 4 | awk '$2 == 4 { print $3 }' | sort -u)" = learner ] ||
	fail "node 4 does not see itself as a learner: $(members_of 4 | tr '\n' ';')"

# A learner never counts: pause the two voters that do not lead shard 1; its leader keeps
# appending (tick entries) and the learner keeps acknowledging, but nothing commits.
l=$(wait_leader 1)
paused=()
for i in 1 2 3; do [ "$i" != "$l" ] && paused+=("$i"); done
kill -STOP "${NODE_PIDS[${paused[0]}]}" "${NODE_PIDS[${paused[1]}]}"
sleep 0.5 # acknowledgements already in flight land
c0=$(e2e_cluster_stat "$l" shard.1.commit)
last0=$(e2e_cluster_stat "$l" shard.1.last_index)
a0=$(e2e_cluster_stat 4 shard.1.applied)
sleep 2
c1=$(e2e_cluster_stat "$l" shard.1.commit)
last1=$(e2e_cluster_stat "$l" shard.1.last_index)
a1=$(e2e_cluster_stat 4 shard.1.applied)
kill -CONT "${NODE_PIDS[${paused[0]}]}" "${NODE_PIDS[${paused[1]}]}"
log "voters ${paused[*]} paused: leader $l commit $c0 -> $c1 over 2 s (last index $last0 -> $last1), learner applied $a0 -> $a1"
[ "$c1" = "$c0" ] || fail "shard 1 committed $((c1 - c0)) entries with only a voter and a learner"
# The leader kept appending until check-quorum stepped it down, and the learner took it all.
[ "$a1" -le "$c1" ] || fail "the learner applied $a1 beyond the leader's commit $c1"
for s in 1 2; do wait_leader "$s" >/dev/null || fail "shard $s: no leader after the pause"; done

# Under load, node 3 dies for good; the standby takes its place.
gw=1
[ "$(leader_of 1)" = 1 ] && gw=2
out=$TMP/load.log
ip netns exec "$NS_C" "$OMSLOAD" --host "$NET.1$gw" --users 40 --first-user 1000 \
	--rate 300 --seconds 10 --seed 41 --mid 100 --drain-ms 20000 --flatten >"$out" 2>&1 &
load_pid=$!
sleep 2
log "kill -9 node 3 for good"
t0=$(date +%s%N)
kill -KILL "${NODE_PIDS[3]}"
wait "${NODE_PIDS[3]}" 2>/dev/null || true
unset 'NODE_PIDS[3]'
# The learner asks for its own promotion (a learner never leads, so it is forwarded).
for s in 1 2; do change promote "$s" 4 4; done
for s in 1 2; do change remove "$s" 3 1 2 4; done
t1=$(date +%s%N)
log "standby: promoted and node 3 removed on both shards $(((t1 - t0) / 1000000)) ms after the kill"
echo "standby: restore_ms=$(((t1 - t0) / 1000000))"
# A change repeated (its answer lost, say) is answered ok, not refused, and not made again:
# forwarded too, the remove of a node no longer a member is ok, not an error.
for s in 1 2; do
	m0=$(members_of 1 | awk -v s="$s" '$1 == s { print $2, $3 }' | sort | tr '\n' ';')
	change remove "$s" 3 1 2 4
	change promote "$s" 4 1 2 4
	m1=$(members_of 1 | awk -v s="$s" '$1 == s { print $2, $3 }' | sort | tr '\n' ';')
	[ "$m1" = "$m0" ] || fail "shard $s: the repeated changes moved the membership: $m0 -> $m1"
done
rc=0
wait "$load_pid" || rc=$?
sed 's/^/    /' "$out"
[ "$rc" -eq 0 ] || fail "omsload exit $rc"
grep -q "^deposits: sent=80 ok=80 refused=0 lost=0" "$out" || fail "deposits: $(grep '^deposits' "$out")"
read -r acked resting final unrep doubled over gaps filled < <(sed -nE \
	's/ledger: acked=([0-9]+) resting=([0-9]+) final=([0-9]+) unreported=([0-9]+) doubled=([0-9]+) overfilled=([0-9]+) seq_gaps=([0-9]+) seq_filled=([0-9]+) .*/\1 \2 \3 \4 \5 \6 \7 \8/p' \
	"$out")
[ "${acked:-0}" -gt 500 ] || fail "only ${acked:-0} orders acknowledged"
[ "$resting" -eq 0 ] && [ "$doubled" -eq 0 ] && [ "$over" -eq 0 ] ||
	fail "resting $resting doubled $doubled overfilled $over"
[ "$unrep" -le $((gaps - filled)) ] || fail "$unrep acknowledged orders unreported"

for s in 1 2; do
	for _ in $(seq 50); do
		l=$(leader_of "$s")
		c=$(e2e_cluster_stat "$l" "shard.$s.commit")
		ok=1
		for i in 1 2 4; do
			[ "$(e2e_cluster_stat "$i" "shard.$s.applied")" -ge "$c" ] || ok=
		done
		[ -n "$ok" ] && break
		sleep 0.2
	done
	[ -n "$ok" ] || fail "shard $s: replicas 1, 2, 4 did not all apply the commit $c"
done
sleep 0.5
for i in 1 2 4; do
	got=$(members_of "$i" | awk '{ print $1, $2, $3, $5 }' | sort | tr '\n' ';')
	[ "$got" = "1 1 voter 1;1 2 voter 1;1 4 voter 1;2 1 voter 1;2 2 voter 1;2 4 voter 1;" ] ||
		fail "node $i: members $got"
	e2e_cluster_stat "$i" shard.1.role >/dev/null
	st() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/$i/stats"; }
	[ "$(st shard.1.inflight)" = 0 ] || fail "node $i: sagas in flight"
	[ "$(st shard.2.resting)" -le "$unrep" ] || fail "node $i: $(st shard.2.resting) orders rest"
	[ "$(st shard.1.asset.1.sum)" = 40000000000 ] || fail "node $i: base sum $(st shard.1.asset.1.sum)"
	[ "$(st shard.1.asset.2.sum)" = 40000000000000 ] || fail "node $i: quote sum $(st shard.1.asset.2.sum)"
done
log "nodes 1, 2, 4: voters of both shards, same commit applied, money exact"
log "PASS"

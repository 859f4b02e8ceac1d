#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: at MTU 1500 a follower that falls behind the leaders' compaction point catches up
# through InstallSnapshot (chunks cut to the MTU), and no frame is too big for the port.
# Method: three omsd processes on a Linux bridge (OMS shard 1 + ME shard 2 on every node,
# durable mode, the default), [node] mtu = 1500, a snapshot every 16 applied entries (so 16
# entries are kept behind it). Deposit to a few users, freeze a node that leads neither shard
# (kill -STOP), deposit to 40 more users (the OMS state grows to several chunks) while idle
# leaders append tick entries and compact far past the frozen node, then resume it
# (kill -CONT). It must install snapshots (cns INSTALL counters > 0) and apply at least
# the leaders' commit index read after the resume, as a follower; the leader sent more
# than one chunk; tx_too_big is 0 on every node. E2E_SNAPSHOT_BY=shadow (e2e_catchup_shadow):
# the snapshots are serialised by shadow copies (app_shadow.h); the installs seed the frozen
# node's copies, whose later snapshots (each checked against the service's state hash in
# this build) must be theirs: none lost, none forked.
source "$(dirname "$0")/lib.sh"
need_root
e2e_cluster_init ocu 24 3
e2e_cluster_net_up
e2e_config_edit() {
	sed -i 's/^snapshot_entries = .*/snapshot_entries = 16/' "$1"
	sed -i 's/^udp_port = 7400$/udp_port = 7400\nmtu = 1500/' "$1"
}
e2e_cluster_trading_up
# Both shards elected; the OMS shard applied its bootstrap routing config.
e2e_cluster_wait_bootstrap

# leader_of SHARD: the node that leads it (empty when none); the frozen one is not asked.
leader_of() {
	for i in 1 2 3; do
		[ "$i" = "${victim:-}" ] && continue
		[ "$(e2e_cluster_stat "$i" "shard.$1.is_leader")" = 1 ] && { echo "$i"; return 0; }
	done
	return 0
}

# deposits FIRST COUNT NODE_IPS: one deposit each to users FIRST.. on the OMS shard.
deposits() {
	ip netns exec "$NS_C" "$PY" - "$1" "$2" "$3" <<'PY' || fail "deposits"
import os
import sys
sys.path.insert(0, os.environ["E2E_DIR"])
from e2e_trade import Client, OMS, QUOTE
first, count, nodes = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
c = Client(nodes)
for u in range(first, first + count):
    if not c.deposit(OMS, u, 9000 + u, QUOTE, 1000000, all_nodes=True):
        sys.exit("deposit for user %d not confirmed" % u)
print("deposited to %d users" % count)
PY
}
export E2E_DIR
deposits 2001 4 "$NET.11,$NET.12,$NET.13"

victim=
for i in 1 2 3; do
	if [ "$(e2e_cluster_stat "$i" shard.1.is_leader)" = 0 ] &&
		[ "$(e2e_cluster_stat "$i" shard.2.is_leader)" = 0 ]; then
		victim=$i
		break
	fi
done
[ -n "$victim" ] || fail "no node that leads neither shard"
live=()
for i in 1 2 3; do [ "$i" != "$victim" ] && live+=("$NET.1$i"); done
before1=$(e2e_cluster_stat "$victim" shard.1.applied)
before2=$(e2e_cluster_stat "$victim" shard.2.applied)
log "freezing node $victim (applied oms $before1, me $before2)"
kill -STOP "${NODE_PIDS[$victim]}"

deposits 3001 40 "$(IFS=,; echo "${live[*]}")"
sleep 2
l1=$(leader_of 1)
l2=$(leader_of 2)
[ -n "$l1" ] && [ -n "$l2" ] || fail "no leaders while node $victim is frozen"
c1=$(e2e_cluster_stat "$l1" shard.1.commit)
c2=$(e2e_cluster_stat "$l2" shard.2.commit)
log "leaders oms $l1 (commit $c1, snapshots $(e2e_cluster_stat "$l1" shard.1.snapshots)), me $l2 (commit $c2)"
# 16 entries are kept behind each snapshot: the leaders compacted far past the frozen node.
[ "$c1" -gt $((before1 + 200)) ] || fail "oms commit $c1 did not move past $before1 + 200"
[ "$c2" -gt $((before2 + 200)) ] || fail "me commit $c2 did not move past $before2 + 200"

kill -CONT "${NODE_PIDS[$victim]}"
t1=$(e2e_cluster_stat "$l1" shard.1.commit)
t2=$(e2e_cluster_stat "$l2" shard.2.commit)
ok=
for _ in $(seq 100); do
	a1=$(e2e_cluster_stat "$victim" shard.1.applied)
	a2=$(e2e_cluster_stat "$victim" shard.2.applied)
	if [ "$a1" -ge "$t1" ] && [ "$a2" -ge "$t2" ]; then ok=1; break; fi
	sleep 0.2
done
[ -n "$ok" ] || { OMSD_LOG=$TMP/$victim/omsd.log; fail "node $victim applied oms $a1 / me $a2, leaders had committed $t1 / $t2"; }
role1=$(e2e_cluster_stat "$victim" shard.1.role)
role2=$(e2e_cluster_stat "$victim" shard.2.role)
inst1=$(e2e_cluster_stat "$victim" shard.1.cns.SNAPSHOTS_INSTALLED)
inst2=$(e2e_cluster_stat "$victim" shard.2.cns.SNAPSHOTS_INSTALLED)
chunks1=$(e2e_cluster_stat "$l1" shard.1.cns.SNAPSHOT_CHUNKS_SENT)
chunks2=$(e2e_cluster_stat "$l2" shard.2.cns.SNAPSHOT_CHUNKS_SENT)
log "node $victim caught up: applied oms $a1 >= $t1, me $a2 >= $t2; roles $role1/$role2;" \
	"snapshots installed oms $inst1 me $inst2; chunks sent by the leaders oms $chunks1 me $chunks2"
[ "$role1" = follower ] && [ "$role2" = follower ] || fail "node $victim is not a follower"
[ "$inst1" -ge 1 ] || fail "node $victim installed no OMS snapshot"
[ "$inst2" -ge 1 ] || fail "node $victim installed no ME snapshot"
[ "$chunks1" -ge 2 ] || fail "OMS snapshot sent in $chunks1 chunk(s): expected several at MTU 1500"
if [ "${E2E_SNAPSHOT_BY:-}" = shadow ]; then
	# The frozen node's next snapshots: 16 entries after the installed ones.
	for sh in 1 2; do
		base=$(e2e_cluster_stat "$victim" shard.$sh.snapshot_shadowed)
		for _ in $(seq 50); do
			[ "$(e2e_cluster_stat "$victim" shard.$sh.snapshot_shadowed)" -gt "$base" ] && break
			sleep 0.2
		done
		for i in 1 2 3; do
			log "node $i shard $sh: shadowed $(e2e_cluster_stat "$i" shard.$sh.snapshot_shadowed), lost $(e2e_cluster_stat "$i" shard.$sh.snapshot_shadow_lost), forked $(e2e_cluster_stat "$i" shard.$sh.snapshot_forks), failed $(e2e_cluster_stat "$i" shard.$sh.snapshot_failed)"
			[ "$(e2e_cluster_stat "$i" shard.$sh.snapshot_shadowed)" -ge 1 ] ||
				fail "node $i shard $sh: no snapshot from the shadow copy"
			[ "$(e2e_cluster_stat "$i" shard.$sh.snapshot_shadow_lost)" = 0 ] ||
				fail "node $i shard $sh: the shadow copy was lost"
			[ "$(e2e_cluster_stat "$i" shard.$sh.snapshot_forks)" = 0 ] ||
				fail "node $i shard $sh: a snapshot was forked"
		done
		[ "$(e2e_cluster_stat "$victim" shard.$sh.snapshot_shadowed)" -gt "$base" ] ||
			fail "node $victim shard $sh: no snapshot from its copy after the install"
	done
fi
for i in 1 2 3; do
	e2e_cluster_stat "$i" shard.1.commit >/dev/null
	big=$(awk '$1 ~ /tx_too_big$/ { s += $2 } END { print s + 0 }' "$TMP/$i/stats")
	[ "$big" = 0 ] || fail "node $i: $big frames too big for the MTU"
done
log "PASS"

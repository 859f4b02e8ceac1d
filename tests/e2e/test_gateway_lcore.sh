#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: the gateway on an lcore of its own ([gateway], docs/appliance.md "The gateway
# lcore") in the sharded shape: (1) it carries the clients' traffic (gateway.gw_in and
# gw_out move, no shard lcore's gw_in does) and orders through a node that leads neither OMS
# shard are ACKed once each, reach the ME, and need no re-route (the routing copy it reads is
# the OMS replica's: gateway.route_epoch = 1); (2) a pin proposed at run time reaches every
# node's gateway lcore as a new copy (route_epoch 2, published and the old copy reclaimed
# after a grace period), and the pinned user's orders through the old owner's node go
# straight to the new owner — no NOT_OWNER from shard 1, no re-route by the gateway, no NAK to
# the client; (3) a node with a gateway lcore stops on SIGTERM with exit status 0 (the RCU
# reader unregisters).
# Method: three omsd processes, each with OMS shards 1-2, ME shards 3-4 (three members each)
# and [gateway] on CPU 1; leaders spread by transfer-leader (OMS 1 → node 1, OMS 2 → node 2,
# ME 3 → node 3, ME 4 → node 2); python clients in the client namespace; omsctl for the pin
# (from node 3, forwarded to both OMS leaders) and to find users by owner.
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
e2e_cluster_init ogl 59 3
e2e_cluster_net_up

e2e_sharded_lines 1,2,3
for i in 1 2 3; do
	mkdir -p "$TMP/$i"
	E2E_GATEWAY=1 E2E_SERVICE_1=oms E2E_SERVICE_2=oms \
		e2e_cluster_config "$i" "$TMP/$i/omsd.ini" "${E2E_SHARDED_LINES[@]}"
	e2e_cluster_start "$i" "$TMP/$i/omsd.ini"
done
log "3 nodes up: ${NODE_PIDS[*]}"
for i in 1 2 3; do
	grep -q "gateway, idle sleep, RCU reader" "$TMP/$i/omsd.log" ||
		{ OMSD_LOG=$TMP/$i/omsd.log; fail "node $i: no gateway lcore in the log"; }
done

ctl_rc() { e2e_ctl_rc "$@"; } # omsctl on a node, exit code checked (lib.sh)
leads() { e2e_leads "$@"; }
wait_leader() { e2e_wait_leader "$@"; }
lead() { e2e_lead "$@"; }
# wait_stat NODE KEY WANT: until NODE's stats say KEY = WANT (15 s).
wait_stat() {
	local got=
	for _ in $(seq 75); do
		got=$(e2e_cluster_stat "$1" "$2")
		[ "$got" = "$3" ] && return 0
		sleep 0.2
	done
	OMSD_LOG=$TMP/$1/omsd.log
	fail "node $1: $2 = $got, want $3"
}
# user_on SHARD FROM: the first user from FROM on whose owner every OMS replica agrees is
# SHARD (node 1's view).
user_on() {
	local u
	for u in $(seq "$2" $(($2 + 60))); do
		ctl_rc 1 0 --json users show --user "$u"
		if grep -qF "\"owner\":$1" <<<"$OUT" && ! grep -qF "\"owner\":$((3 - $1))" <<<"$OUT"; then
			echo "$u"
			return 0
		fi
	done
	fail "no user from $2 owned by shard $1: $OUT"
}

for s in 1 2 3 4; do wait_leader "$s" >/dev/null || fail "shard $s elected no leader"; done
for i in 1 2 3; do
	wait_stat "$i" shard.1.route_epoch 1
	wait_stat "$i" gateway.route_epoch 1
done
lead 1 1
lead 2 2
lead 3 3
lead 4 2
log "leaders: OMS 1 → node 1, OMS 2 → node 2, ME 3 → node 3, ME 4 → node 2"

A=$(user_on 1 7001)
B=$(user_on 2 7101)
C=$(user_on 1 $((A + 1)))
log "users: $A on OMS shard 1, $B on OMS shard 2, $C on shard 1 (to be pinned to 2)"

# client MODE NODE_IP SHARD USER FIRST COUNT: fund USER on SHARD (straight to the shard), then
# COUNT buys through NODE_IP's gateway, alternating the two symbols (two ME shards): every
# one ACKed once (one orderId each), none NAKed, each reaching the ME (OPEN).
client() {
	ip netns exec "$NS_C" "$PY" - "$@" <<'PY'
import os, sys
sys.path.insert(0, os.environ["E2E_DIR"])
import e2e_trade as t
node, shard, user, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5])
leader = {1: "%s.11" % os.environ["NET"], 2: "%s.12" % os.environ["NET"]}[shard]
f = t.Client([leader])
t.check(f.deposit(shard, user, 90000 + user * 10 + first, t.QUOTE, 10**9),
        "deposit to %d on OMS shard %d" % (user, shard))
c = t.Client([node])
cls = list(range(first, first + count))
for cl in cls:
    r = c.order(user, cl, 1 + cl % 2, t.BUY, 100, 1, timeout=20)
    t.check(r is not None and r["type"] == t.ACK, "order %d/%d ACKed: %s" % (user, cl, r))
for cl in cls:
    rep = c.wait_reports(user, cl, ("OPEN",), timeout=20)
    t.check(rep and rep[-1] == "OPEN", "order %d/%d rests on its ME shard: %s" % (user, cl, rep))
c.poll(0.3)
naks = [m for m in c.got if m["type"] == t.NAK and m.get("user") == user]
t.check(not naks, "no NAK reached the client: %s" % naks)
oids = {}
for m in c.got:
    if m["type"] == t.ACK and m["user"] == user:
        oids.setdefault(m["cl"], set()).add((m["oid_user"], m["oid_seq"]))
t.check(all(len(oids.get(cl, ())) == 1 for cl in cls), "every order ACKed with one orderId")
PY
}
export E2E_DIR NET

# (1) Orders through node 3, which leads neither OMS shard.
client "$NET.13" 1 "$A" 1 10 || fail "orders of $A (shard 1) through node 3's gateway lcore"
client "$NET.13" 2 "$B" 1 10 || fail "orders of $B (shard 2) through node 3's gateway lcore"
gin=$(e2e_cluster_stat 3 gateway.gw_in)
gout=$(e2e_cluster_stat 3 gateway.gw_out)
rer=$(e2e_cluster_stat 3 gateway.gw_reroutes_owner)
log "node 3 gateway lcore: gw_in $gin gw_out $gout reroutes_owner $rer"
[ "$gin" -ge 20 ] || fail "node 3's gateway lcore routed $gin orders, want >= 20"
[ "$gout" -ge 40 ] || fail "node 3's gateway lcore forwarded $gout answers, want >= 40 (ACK + OPEN each)"
[ "$rer" = 0 ] || fail "node 3's gateway re-routed $rer orders: its routing copy is not the replica's"
for i in 1 2 3; do
	for s in 1 2 3 4; do
		v=$(e2e_cluster_stat "$i" "shard.$s.gw_in")
		[ "$v" = 0 ] || fail "node $i: shard $s's lcore routed $v client messages (the gateway lcore should)"
	done
done

# (2) A pin at run time, from node 3 (forwarded to both OMS leaders).
ctl_rc 3 0 --json routes pin --user "$C" --shard 2
for i in 1 2 3; do
	wait_stat "$i" shard.1.route_epoch 2
	wait_stat "$i" shard.2.route_epoch 2
	wait_stat "$i" gateway.route_epoch 2
done
for i in 1 2 3; do
	pub=$(e2e_cluster_stat "$i" gateway.route_publishes)
	[ "$pub" -ge 2 ] || fail "node $i: $pub routing copies published, want >= 2"
	for _ in $(seq 50); do
		[ "$(e2e_cluster_stat "$i" gateway.route_reclaims)" -ge 1 ] && break
		sleep 0.1
	done
	rec=$(e2e_cluster_stat "$i" gateway.route_reclaims)
	[ "$rec" -ge 1 ] || fail "node $i: the replaced routing copy was never reclaimed"
	log "node $i: routing copies published $pub, reclaimed $rec, in grace periods $(e2e_cluster_stat "$i" gateway.route_grace_ns) ns"
done
nak0=$(e2e_cluster_stat 1 shard.1.nak.NOT_OWNER)
rer0=$(e2e_cluster_stat 1 gateway.gw_reroutes_owner)
client "$NET.11" 2 "$C" 1 10 || fail "orders of pinned $C through node 1's gateway lcore"
nak1=$(e2e_cluster_stat 1 shard.1.nak.NOT_OWNER)
rer1=$(e2e_cluster_stat 1 gateway.gw_reroutes_owner)
log "pinned user $C through node 1: shard 1 NOT_OWNER $nak0 → $nak1, gateway re-routes $rer0 → $rer1"
[ "$nak1" = "$nak0" ] || fail "shard 1 refused $((nak1 - nak0)) orders of the pinned user NOT_OWNER: the gateway routed by an old copy"
[ "$rer1" = "$rer0" ] || fail "node 1's gateway re-routed $((rer1 - rer0)) orders of the pinned user"

# (3) SIGTERM: the node with a gateway lcore stops cleanly.
kill -TERM "${NODE_PIDS[3]}"
rc=0
for _ in $(seq 100); do kill -0 "${NODE_PIDS[3]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${NODE_PIDS[3]}" 2>/dev/null && fail "node 3 still running 10 s after SIGTERM"
wait "${NODE_PIDS[3]}" || rc=$?
unset 'NODE_PIDS[3]'
[ "$rc" = 0 ] || { OMSD_LOG=$TMP/3/omsd.log; fail "node 3 exit status $rc after SIGTERM"; }
log "PASS"

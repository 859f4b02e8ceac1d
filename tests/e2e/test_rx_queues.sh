#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: [port] rx_queues = 2 runs two io lcores per node, one per rx queue (net_af_packet
# qpairs=2: the kernel's fanout spreads flows over the queues): both decode, MAC-check and
# route frames and send on their own tx queue, the first answers ARP and ICMP echo
# whichever queue they came in on, and a
# trading cluster over them (each node's [bridge] sealing, the cluster key on) keeps every
# replica the same and the money exact.
# Method: three nodes with E2E_RX_QUEUES=2. Ping every node from eight ping processes (eight
# ICMP ids). Send every node 32 datagrams from 32 source ports (garbage: refused as bad
# frames by whichever io lcore took them), so both queues see traffic: dp.rxq.0.rx_pkts and
# dp.rxq.1.rx_pkts both move, and every datagram is counted refused. Then omsload (40 users,
# 6 s, --flatten) through a node that does not lead the OMS shard; quiesce; check the ledger,
# the asset sums on every replica, that agent io1 did work on every node, that each node's
# tx queues add up to its tx count, and that both tx queues sent across the cluster (each io
# lcore drains its share of the tx queues; the bridge spreads its sealed frames over one
# queue per io lcore by destination — so a follower that only answers its one leader sends
# on one queue, by design, and the per-node check cannot ask both of every node).
: "${OMSLOAD:?set OMSLOAD}"
source "$(dirname "$0")/lib.sh"
need_root
export E2E_RX_QUEUES=2
e2e_cluster_init orq 26 3
e2e_cluster_net_up
e2e_cluster_trading_up

e2e_trading_ready
oms=$OMS_LEADER
for i in 1 2 3; do
	grep -q "2 rx queues" "$TMP/$i/omsd.log" || fail "node $i: the port did not take 2 rx queues"
	grep -q "lcore .*: io1," "$TMP/$i/omsd.log" || fail "node $i: no second io lcore"
done
log "3 nodes, 2 rx queues and 2 io lcores each; OMS leader node $oms"

st() { awk -v k="$2" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$TMP/$1/stats"; }
for i in 1 2 3; do
	e2e_cluster_stat "$i" dp.rx_pkts >/dev/null
	replied0=$(st "$i" dp.icmp_echo_replied)
	bad0=$(st "$i" dp.frame_bad)
	pings=()
	for _ in $(seq 8); do
		ip netns exec "$NS_C" ping -c 1 -W 2 "$NET.1$i" >/dev/null &
		pings+=($!)
	done
	wait_ok=0
	for p in "${pings[@]}"; do wait "$p" || wait_ok=1; done
	[ "$wait_ok" = 0 ] || fail "node $i: a ping went unanswered"
	ip netns exec "$NS_C" "$PY" - "$NET.1$i" <<'PY'
import socket, sys
for port in range(40000, 40032):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("", port))
    s.sendto(b"\x00" * 64, (sys.argv[1], 7400))
    s.close()
PY
	ok=
	for _ in $(seq 25); do
		e2e_cluster_stat "$i" dp.rx_pkts >/dev/null
		[ $(($(st "$i" dp.frame_bad) - bad0)) -ge 32 ] && { ok=1; break; }
		sleep 0.2
	done
	[ -n "$ok" ] || fail "node $i: $(($(st "$i" dp.frame_bad) - bad0)) of 32 garbage datagrams counted refused"
	replied=$(($(st "$i" dp.icmp_echo_replied) - replied0))
	[ "$replied" -ge 8 ] || fail "node $i: $replied of 8 pings answered"
	q0=$(st "$i" dp.rxq.0.rx_pkts)
	q1=$(st "$i" dp.rxq.1.rx_pkts)
	[ "$q0" -gt 0 ] && [ "$q1" -gt 0 ] || fail "node $i: rx queue 0 took $q0 packets, queue 1 $q1"
	[ "$(st "$i" dp.rx_pkts)" = $((q0 + q1)) ] || fail "node $i: dp.rx_pkts is not the queues' sum"
	log "node $i: 8 pings answered, 32 garbage datagrams refused; rx queue 0 $q0 packets, queue 1 $q1"
done

gw=1
[ "$gw" = "$oms" ] && gw=2
out=$TMP/load.log
ip netns exec "$NS_C" "$OMSLOAD" --host "$NET.1$gw" --users 40 --first-user 1000 \
	--rate 300 --seconds 6 --seed 5 --mid 100 --drain-ms 8000 --flatten >"$out" 2>&1 ||
	{ cat "$out"; fail "omsload"; }
sed 's/^/    /' "$out"
grep -q "^deposits: sent=80 ok=80 refused=0 lost=0" "$out" || fail "deposits: $(grep '^deposits' "$out")"
read -r acked resting final unrep doubled over < <(sed -nE \
	's/^ledger: acked=([0-9]+) resting=([0-9]+) final=([0-9]+) unreported=([0-9]+) doubled=([0-9]+) overfilled=([0-9]+) .*/\1 \2 \3 \4 \5 \6/p' "$out")
[ "${acked:-0}" -gt 500 ] || fail "only ${acked:-0} orders acknowledged"
[ "$resting" = 0 ] && [ "$unrep" = 0 ] && [ "$doubled" = 0 ] && [ "$over" = 0 ] ||
	fail "ledger: resting $resting unreported $unrep doubled $doubled overfilled $over"
[ "$final" -gt 0 ] || fail "no order reached a final state"

e2e_quiesce 50 1 2
tq0=0
tq1=0
sleep 0.5 # the published aggregates refresh every 200 ms
for i in 1 2 3; do
	e2e_cluster_stat "$i" shard.1.role >/dev/null
	[ "$(st "$i" shard.1.asset.1.sum)" = $((40 * 1000000000)) ] ||
		fail "node $i: base asset sum $(st "$i" shard.1.asset.1.sum)"
	[ "$(st "$i" shard.1.asset.2.sum)" = $((40 * 1000000000000)) ] ||
		fail "node $i: quote asset sum $(st "$i" shard.1.asset.2.sum)"
	[ "$(st "$i" shard.1.inflight)" = 0 ] || fail "node $i: sagas still in flight"
	[ "$(st "$i" agent.io1.work_items)" -gt 0 ] || fail "node $i: io lcore 1 did no work"
	[ "$(st "$i" dp.slow_ring_full)" = 0 ] || fail "node $i: ARP/ICMP hand-over ring overflowed"
	[ "$(st "$i" dp.tx_slow_full)" = 0 ] || fail "node $i: the tx hand-over ring overflowed"
	t0=$(st "$i" dp.txport.0.tx_pkts)
	t1=$(st "$i" dp.txport.1.tx_pkts)
	tq0=$((tq0 + t0))
	tq1=$((tq1 + t1))
	[ "$(st "$i" dp.tx_pkts)" = $((t0 + t1)) ] || fail "node $i: dp.tx_pkts is not the queues' sum"
	log "node $i: sums exact, io lcores rx $(st "$i" dp.rxq.0.rx_pkts) / $(st "$i" dp.rxq.1.rx_pkts), tx $t0 / $t1 (handed to io 0: $(st "$i" dp.tx_handed)), bridge sealed $(st "$i" bridge.sealed_frames)"
done
[ "$tq0" -gt 0 ] && [ "$tq1" -gt 0 ] || fail "tx queue 0 sent $tq0 packets over the cluster, queue 1 $tq1"
log "PASS"

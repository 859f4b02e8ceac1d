#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bench: the pipeline of pipeline.sh with three replicas (docs/appliance.md "Benchmarks").
# Three omsd in namespaces on a Linux bridge (tests/e2e/lib.sh, tag ob3, 10.201.22.0/24),
# each a member of OMS shard 1 and ME shard 2, net_af_packet on veths. The load enters through ONE node, the one leading OMS shard 1 (TRANSFERs are
# admin messages that only the OMS leader proposes): `omspcap send` in the client namespace
# replays the UDP payloads of the omspcap capture from a kernel UDP socket, paced at RATE
# frames/s. Every order is replicated (Raft, majority of 3) in the OMS shard and in the ME
# shard, whose leader may be another node. The entry node's gateway measures RX → ACK and
# RX → final report (the same histograms as pipeline.sh).
#
# Env: ORDERS (10000), USERS (64), SEED (1), RATE (frames/s, 4000), OMSD, OMSPCAP,
#      E2E_FRAME (default: build/), KEEP=1 (keep the temp dir), NODES (3; 1 runs the same
#      paced load against one node on af_packet, for comparison: `bench: pipeline1 ...`),
#      SESSIONS (1: the capture is a logged-on session, the nodes get a key file; 0: order
#      entry outside sessions, allow_unauthenticated), DURABILITY (memory, the figures of
#      docs/perf.md; durable: file logs written and synced by each node's persister lcore
#      before an entry counts towards a majority), SHED_ACK_US, SHED_WINDOW_US, SHED_WAIT_US
#      (the gateway's load shedding, [timers] shed_*: docs/appliance.md "Overload"; unset:
#      the defaults, off). New orders the gateway sheds (NAK BACKPRESSURE, never proposed)
#      count as settled; the line says how many (shed=N). DROPS_OK=1: frames the nodes'
#      rings refused (io → shard ring full, ...) are printed, not a failure — past
#      saturation the io lcore drops what the gateway cannot take, and the session's frames
#      come back (omspcap send goes back to the frame a SEQ_GAP names); what still fails
#      the run is an order not seen or not settled. STATS_OUT=FILE: a copy of the entry
#      node's stats after the run, OMSPCAP_OUT=FILE: omspcap send's output (for tests).
#      CLIENT_DROP_EVERY=N: the switch drops every N-th frame from the client to the nodes
#      (nftables netdev at the client's port), so the session sees gaps and the replay sends
#      again (tests/e2e/test_replay_gaps.sh).
# Last line: bench: pipeline3 orders_per_s=N p50_us=N p99_us=N final_p50_us=N ...
# orders_per_s is bounded by RATE (an open-loop sender): raise RATE until drops or NAKs
# appear to find the ceiling. Exit 1 when the run is not clean.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
ORDERS=${ORDERS:-10000}
USERS=${USERS:-64}
SEED=${SEED:-1}
RATE=${RATE:-4000}
NODES=${NODES:-3}
DURABILITY=${DURABILITY:-memory}
case "$DURABILITY" in memory | durable) ;; *) echo "pipeline3: DURABILITY is memory or durable" >&2; exit 2 ;; esac
[ "$NODES" = 1 ] || [ "$NODES" = 3 ] || { echo "pipeline3: NODES is 1 or 3" >&2; exit 2; }
export OMSD=${OMSD:-$ROOT/build/app/omsd}
export E2E_FRAME=${E2E_FRAME:-$ROOT/build/tests/e2e/e2e_frame}
OMSPCAP=${OMSPCAP:-$ROOT/build/tools/omspcap}
[ -x "$OMSPCAP" ] || { echo "pipeline3: no omspcap at $OMSPCAP" >&2; exit 2; }
source "$ROOT/tests/e2e/lib.sh"
need_root
# AFP_ARGS: more net_af_packet arguments for every node's port (e.g. framecnt=8192).
export E2E_AFP_ARGS=${AFP_ARGS:-}
e2e_cluster_init ob3 22 "$NODES"
if [ "${KEEP:-0}" = 1 ]; then e2e_cleanup_hook() { cp -r "$TMP" "$TMP.kept"; echo "kept $TMP.kept"; }; fi
e2e_cluster_net_up
if [ -n "${CLIENT_DROP_EVERY:-}" ]; then
	sw() { ip netns exec "$NS_SW" nft "$@"; }
	sw add table netdev cdrop || fail "nftables netdev unavailable"
	sw add chain netdev cdrop cin "{ type filter hook ingress device ${TAG}cs priority 0; }"
	sw add rule netdev cdrop cin udp dport 7400 numgen inc mod "$CLIENT_DROP_EVERY" == \
		$((CLIENT_DROP_EVERY - 1)) counter drop
fi
SESSIONS=${SESSIONS:-1}
KEYARG=()
if [ "$SESSIONS" = 1 ]; then
	export E2E_KEYS_FILE=$TMP/api_keys
	export E2E_MSGS_PER_SEC=0 # one session carries the whole paced load
	printf '1 %s all *\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$E2E_KEYS_FILE"
	chmod 600 "$E2E_KEYS_FILE"
	KEYARG=(--key-file "$E2E_KEYS_FILE")
fi

LINES=(
	"" "[limits]" "resident_users = 4096" "parked_orders = 1024" "inflight_sagas = 16384"
	"orders = 32768" "log_entries = 65536" "log_mb = 32" "snapshot_mb = 8"
	"snapshot_entries = 20000"
	"" "[timers]" "user_ttl_ms = 86400000"
	${SHED_ACK_US:+"shed_ack_us = $SHED_ACK_US"} ${SHED_WINDOW_US:+"shed_window_us = $SHED_WINDOW_US"}
	${SHED_WAIT_US:+"shed_wait_us = $SHED_WAIT_US"}
	"" "[durability]" "mode = $DURABILITY"
	"" "[symbol.1]" "base = 1" "quote = 2" "me_shard = 2" "ref_px = 10000" "band_bps = 5000"
	"maker_fee_bps = 2" "taker_fee_bps = 7"
)
e2e_cluster_bench_up "${LINES[@]}"
# [port] rx_start = leader is for single-member shards (it holds the whole port, Raft
# included), so here the sender waits instead: for the OMS leader, and for that node to
# report both shards ready — the same predicate the RX gate uses.
e2e_cluster_ready_leader
[ -n "$L" ] || { OMSD_LOG=$TMP/1/omsd.log; fail "no OMS leader ready within 20 s"; }
log "OMS leader node $L (both shards ready there), ME leader node $MEL; load enters node $L"

# Drop counters before the load: the first Raft frames of a start-up go out before ARP has
# resolved the peers (tx_arp_miss); only what moves during the run counts.
DROP_KEYS="dp.frame_ring_full dp.frame_no_route dp.frame_bad dp.frame_mixed dp.tx_arp_miss
	dp.tx_port_full dp.tx_nombuf dp.tx_too_big shard.1.tx_full shard.1.tx_nombuf
	shard.2.tx_full shard.2.tx_nombuf shard.1.persist_dropped"
declare -A BASE=()
for i in $(seq "$NODES"); do
	e2e_cluster_stat "$i" dp.rx_pkts >/dev/null
	for k in $DROP_KEYS; do
		BASE["$i.$k"]=$(awk -v k="$k" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$TMP/$i/stats")
	done
done

gen=$("$OMSPCAP" gen --out "$TMP/in.pcap" --count $((ORDERS + 2 * USERS)) --seed "$SEED" \
	"${KEYARG[@]}" --users "$USERS" --transfer-shard 1 --fund-first 1 --open-max 48 --gap-us 1)
log "$gen"
FRAMES=$(sed -n 's/.* frames=\([0-9]*\) .*/\1/p' <<<"$gen")
NEW_ORDERS=$(sed -n 's/.* NEW_ORDER=\([0-9]*\).*/\1/p' <<<"$gen")
send=$(ip netns exec "$NS_C" "$OMSPCAP" send "$TMP/in.pcap" --to "$NET.1$L" --rate "$RATE" \
	"${KEYARG[@]}" --idle-ms 2000 --drain-ms 120000) || fail "omspcap send: $send"
log "$send"

STATS=$TMP/$L/stats
stat() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$STATS"; }
last=-1
stable=0
for _ in $(seq 200); do
	e2e_cluster_stat "$L" dp.rx_pkts >/dev/null
	shed=$(($(stat shard.1.gw_shed_queue) + $(stat shard.1.gw_shed_wait)))
	orders=$(($(stat gateway.lat_orders) + shed))
	settled=$(($(stat gateway.lat_finals) + $(stat gateway.lat_naked) + $(stat gateway.lat_lost) + shed))
	out=$(stat shard.1.gw_out)
	if [ "$orders" -eq "$NEW_ORDERS" ] && [ "$settled" -ge "$orders" ] && [ "$out" = "$last" ]; then
		stable=$((stable + 1))
		[ $stable -ge 2 ] && break
	else
		stable=0
	fi
	last=$out
	sleep 0.25
done
cp "$STATS" "$TMP/entry.stats"
[ -z "${STATS_OUT:-}" ] || cp "$STATS" "$STATS_OUT"
[ -z "${OMSPCAP_OUT:-}" ] || printf '%s\n' "$send" >"$OMSPCAP_OUT"
v() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$TMP/entry.stats"; }
drops=0
for i in $(seq "$NODES"); do
	e2e_cluster_stat "$i" dp.rx_pkts >/dev/null
	for k in $DROP_KEYS; do
		n=$(($(awk -v k="$k" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$TMP/$i/stats") - ${BASE["$i.$k"]}))
		[ "$n" = 0 ] || { log "node $i drop during the run: $k $n"; drops=$((drops + n)); }
	done
done
acked=$(v gateway.lat_acked)
shed=$(($(v shard.1.gw_shed_queue) + $(v shard.1.gw_shed_wait)))
span=$(v gateway.lat_span_ns)
ops=0
[ "$span" -gt 0 ] && ops=$((acked * 1000000000 / span))
us() { awk -v n="$1" 'BEGIN { printf "%.1f", n / 1000 }'; }
log "frames=$FRAMES rx=$(v dp.rx_pkts) new_orders=$NEW_ORDERS timed=$(v gateway.lat_orders)" \
	"acked=$acked finals=$(v gateway.lat_finals) naked=$(v gateway.lat_naked)" \
	"lost=$(v gateway.lat_lost) fills=$(v shard.1.oms.fills) transfers=$(v shard.1.oms.transfers)" \
	"span_ms=$((span / 1000000)) rate=$RATE"
# The entry node's bridge lcore (lib.sh gives each node one unless E2E_BRIDGE=0): the frames
# and bytes it MAC'd for its shard lcores, per new order — work the shard lcores no longer do.
log "node $L lcores busy: shard1_ms=$(($(v agent.shard1.busy_ns) / 1000000))" \
	"shard2_ms=$(($(v agent.shard2.busy_ns) / 1000000)) io_ms=$(($(v agent.io.busy_ns) / 1000000))" \
	"bridge_ms=$(($(v agent.bridge.busy_ns) / 1000000)) sealed_frames=$(v bridge.sealed_frames)" \
	"sealed_bytes_per_order=$(($(v bridge.sealed_bytes) / NEW_ORDERS))" \
	"$(awk '$1 ~ /^dp\.rxq\.[0-9]+\.rx_pkts$/ { split($1, p, "."); printf "rxq%s_pkts=%s ", p[3], $2 }' "$TMP/entry.stats")"
echo "bench: pipeline$NODES orders_per_s=$ops p50_us=$(us "$(v gateway.lat_rx_ack_ns.p50)")" \
	"p99_us=$(us "$(v gateway.lat_rx_ack_ns.p99)")" \
	"final_p50_us=$(us "$(v gateway.lat_rx_final_ns.p50)")" \
	"final_p99_us=$(us "$(v gateway.lat_rx_final_ns.p99)")" \
	"orders=$NEW_ORDERS acked=$acked naked=$(v gateway.lat_naked)" \
	"finals=$(v gateway.lat_finals) fills=$(v shard.1.oms.fills) drops=$drops rate=$RATE" \
	"durability=$DURABILITY shed=$shed shed_queue=$(v shard.1.gw_shed_queue)" \
	"shed_wait=$(v shard.1.gw_shed_wait) shed_ack_us=${SHED_ACK_US:-0}" \
	"resent=$(sed -n 's/.* resent=\([0-9]*\).*/\1/p' <<<"$send")"
[ $(($(v gateway.lat_orders) + shed)) -eq "$NEW_ORDERS" ] || fail "orders not all seen by the gateway"
[ $(($(v gateway.lat_finals) + $(v gateway.lat_naked) + shed)) -eq "$NEW_ORDERS" ] || fail "orders unsettled"
[ "$drops" -eq 0 ] || [ "${DROPS_OK:-0}" = 1 ] || fail "drops"

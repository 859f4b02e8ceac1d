#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: the pcap-replay bench (tests/bench/app/pipeline.sh) is correct on a small run: with
# [port] rx_start = leader every order of the capture is answered, none is NAKed, fills
# happen, the deposits are applied and money is conserved, nothing is dropped, and the
# latency histograms hold one value per order. And the gate is what makes it so: the same
# capture with rx_start = now reaches the node before it has elected, and orders are NAKed
# NOT_LEADER.
# Method: run pipeline.sh (one omsd on net_pcap: rx_pcap in, tx_pcap out; no namespaces,
# tag obp for the temp dir and the DPDK file prefix) with ORDERS=600 USERS=8, keep its
# directory and check the final stats and the egress capture; then once more with
# RX_START=now, and once with GATEWAY=lcore. Only correctness is checked, never a time.
set -euo pipefail
: "${OMSD:?set OMSD to the omsd binary}"
: "${OMSPCAP:?set OMSPCAP to the omspcap binary}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d /tmp/omsd-e2e-obp.XXXXXX)
ok=0
trap 'rm -rf /var/run/dpdk/e2e-obp-$$-*; if [ $ok = 1 ]; then rm -rf "$TMP"; else echo "kept $TMP" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$TMP/gate/omsd.log" >&2 2>/dev/null || true; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*"; }

out=$(ORDERS=600 USERS=8 SEED=7 ME_BENCH_OPS=100000 BENCH_DIR=$TMP/gate PREFIX=e2e-obp-$$-gate \
	"$SRC/tests/bench/app/pipeline.sh" 2>&1) || { echo "$out"; fail "pipeline.sh (rx_start = leader)"; }
echo "$out"
S=$TMP/gate/stats
v() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print "missing" }' "$S"; }
orders=$(sed -n 's/.* NEW_ORDER=\([0-9]*\).*/\1/p' <<<"$out")
[ -n "$orders" ] && [ "$orders" -gt 100 ] || fail "the capture has no orders ($orders)"
[ "$(v gateway.lat_orders)" = "$orders" ] || fail "gateway timed $(v gateway.lat_orders) of $orders orders"
[ "$(v gateway.lat_acked)" = "$orders" ] || fail "$(v gateway.lat_acked) of $orders orders ACKed"
[ "$(v gateway.lat_naked)" = 0 ] || fail "$(v gateway.lat_naked) orders NAKed"
[ "$(v gateway.lat_finals)" = "$orders" ] || fail "$(v gateway.lat_finals) of $orders orders settled"
[ "$(v gateway.lat_rx_ack_ns.count)" = "$orders" ] || fail "ack histogram count"
[ "$(v gateway.lat_rx_final_ns.count)" = "$orders" ] || fail "final histogram count"
[ "$(v gateway.lat_rx_ack_ns.p50)" -le "$(v gateway.lat_rx_final_ns.p50)" ] ||
	fail "the median ACK comes after the median final report"
[ "$(v shard.1.oms.fills)" -gt 0 ] || fail "no fills"
[ "$(v shard.1.oms.transfers)" = 16 ] || fail "$(v shard.1.oms.transfers) deposits applied, want 16"
# The capture is a logged-on session (pipeline.sh): its answers are MAC'd under the session
# key, which show derives from the input's LOGON and the key file.
show_out() { "$OMSPCAP" show "$1/out.pcap" --key-file "$1/api_keys" --logon-from "$1/in.pcap"; }
show_out "$TMP/gate" >"$TMP/show" || fail "the egress capture does not decode"
! grep -Eq '^nak +NOT_LEADER' "$TMP/show" || fail "NOT_LEADER NAKs with the gate"
[ "$(v dp.rx_gated)" -gt 0 ] || fail "the rx gate never held the port"
[ "$(v dp.rx_pkts)" = "$(sed -n 's/.* frames=\([0-9]*\) .*/\1/p' <<<"$out" | head -1)" ] || fail "not every frame was read"
# Money: every deposit stays in the system (user totals plus fees; trades only move it).
[ "$(v shard.1.asset.1.sum)" = $((8 * 1000000)) ] || fail "base asset sum $(v shard.1.asset.1.sum)"
[ "$(v shard.1.asset.2.sum)" = $((8 * 1000000000)) ] || fail "quote asset sum $(v shard.1.asset.2.sum)"
grep -q "drops=0" <<<"$out" || fail "drops"
log "gate: $orders orders acked and settled, $(v shard.1.oms.fills) fills, money conserved"

# The gateway on an lcore of its own ([gateway]; GATEWAY=lcore): the same capture, every
# order answered and settled, through that lcore (its gw_in), none through the shard's.
out=$(ORDERS=600 USERS=8 SEED=7 ME_BENCH_OPS=100000 GATEWAY=lcore BENCH_DIR=$TMP/gwl \
	PREFIX=e2e-obp-$$-gwl "$SRC/tests/bench/app/pipeline.sh" 2>&1) ||
	{ echo "$out"; fail "pipeline.sh (GATEWAY=lcore)"; }
S=$TMP/gwl/stats
[ "$(v gateway.lcore)" = 1 ] || fail "GATEWAY=lcore: no gateway lcore"
[ "$(v gateway.lat_acked)" = "$orders" ] || fail "gateway lcore: $(v gateway.lat_acked) of $orders orders ACKed"
[ "$(v gateway.lat_naked)" = 0 ] || fail "gateway lcore: $(v gateway.lat_naked) orders NAKed"
[ "$(v gateway.lat_finals)" = "$orders" ] || fail "gateway lcore: $(v gateway.lat_finals) of $orders settled"
[ "$(v gateway.gw_in)" -ge "$orders" ] || fail "gateway lcore routed $(v gateway.gw_in) messages"
[ "$(v shard.1.gw_in)" = 0 ] || fail "shard 1's lcore routed $(v shard.1.gw_in) messages beside the gateway lcore"
[ "$(v gateway.route_epoch)" = 1 ] || fail "gateway lcore routes by epoch $(v gateway.route_epoch), want 1"
[ "$(v shard.1.asset.2.sum)" = $((8 * 1000000000)) ] || fail "gateway lcore: quote asset sum $(v shard.1.asset.2.sum)"
grep -q "drops=0" <<<"$out" || fail "gateway lcore: drops"
log "gateway lcore: $orders orders acked and settled through it"
S=$TMP/gate/stats

# Without the gate the replay arrives before the election: NOT_LEADER.
out=$(ORDERS=600 USERS=8 SEED=7 ME_BENCH_OPS=100000 RX_START=now BENCH_DIR=$TMP/now PREFIX=e2e-obp-$$-now \
	"$SRC/tests/bench/app/pipeline.sh" 2>&1) || true
echo "$out" | tail -3
nl=$(show_out "$TMP/now" | awk '$1 == "nak" && $2 == "NOT_LEADER" { print $3 }')
[ "${nl:-0}" -gt 0 ] || fail "rx_start = now: no NOT_LEADER NAKs (the test cannot tell the gate works)"
log "no gate: $nl NOT_LEADER NAKs"
ok=1
echo PASS

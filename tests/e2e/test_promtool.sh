#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: a live node's /metrics follows the Prometheus conventions as promtool checks them
# (`promtool check metrics` reports nothing): counters end in _total, times are in seconds,
# no gauge or counter borrows the _count/_sum/_bucket suffixes of histograms and summaries
# (docs/appliance.md, "Views and metrics"). And the renamed families carry sensible values.
# Method: one trading node (OMS shard 1 + ME shard 2) with [mgmt] metrics_listen =
# 127.0.0.1:9464 in its namespace; e2e_trade.py single trades through it so the latency
# families have samples; GET /metrics with curl, promtool over the text, every line it prints
# is a failure; then a counter, a summary quantile, a histogram and a converted gauge are
# read back. Skipped (77) only without promtool (Debian package prometheus).
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
PROMTOOL=$(command -v promtool || true)
if [ -z "$PROMTOOL" ]; then
	echo "SKIP: promtool not installed (Debian package prometheus)"
	exit 77
fi
e2e_init opt 71
e2e_net_up

# Two rx queues and a sealing bridge, so their series (omsd_dp_rxq_*, omsd_bridge_*) are
# checked too.
export E2E_RX_QUEUES=2
e2e_trade_config "$TMP/omsd.ini" "" "[mgmt]" "metrics_listen = 127.0.0.1:9464" \
	"" "[bridge]" "cpu = 0" "idle = sleep"
e2e_start "$TMP/omsd.ini"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_trade.py" single --nodes "$NODE_IP" \
	>"$TMP/trade.log" 2>&1 || fail "trading failed: $(tail -5 "$TMP/trade.log")"

M=$TMP/metrics.txt
ip netns exec "$NS_N" curl -sS -o "$M" http://127.0.0.1:9464/metrics || fail "curl /metrics"
log "metrics: $(grep -c '^# TYPE' "$M") families, $(grep -vc '^#' "$M") samples"
# E2E_METRICS_OUT=FILE keeps a copy of the scrape (to compare renderings by hand).
[ -z "${E2E_METRICS_OUT:-}" ] || cp "$M" "$E2E_METRICS_OUT"

# promtool prints one line per problem (on stderr) and exits non-zero when there is one; any
# line at all is a failure here, whatever the exit status.
rc=0
"$PROMTOOL" check metrics <"$M" >"$TMP/promtool.out" 2>&1 || rc=$?
if [ -s "$TMP/promtool.out" ] || [ "$rc" -ne 0 ]; then
	sed 's/^/promtool: /' "$TMP/promtool.out" >&2
	fail "promtool check metrics: exit $rc, $(wc -l <"$TMP/promtool.out") line(s)"
fi

# value SERIES: the value of the sample whose name{labels} is exactly SERIES, or "missing".
value() {
	awk -v s="$1" 'index($0, s " ") == 1 { print $2; found = 1 } END { if (!found) print "missing" }' "$M"
}
# check SERIES AWK-CONDITION(v) WHAT
check() {
	local v
	v=$(value "$1")
	[ "$v" != missing ] || fail "no sample $1"
	awk -v v="$v" "BEGIN { exit !($2) }" || fail "$3: $1 = $v"
	log "$1 = $v"
}
check 'omsd_dp_rx_pkts_total{node="1"}' 'v > 0' "a counter that counted frames"
check 'omsd_dp_rxq_rx_pkts_total{node="1",queue="0"}' 'v >= 0' "rx queue 0's packets"
check 'omsd_dp_rxq_rx_pkts_total{node="1",queue="1"}' 'v >= 0' "rx queue 1's packets"
# (No session, no client key here: the answers go without a MAC, through the bridge all
# the same.)
check 'omsd_bridge_plain_frames_total{node="1"}' 'v > 0' "the bridge passed the answers on"
check 'omsd_bridge_sealed_frames_total{node="1"}' 'v >= 0' "the bridge's sealed frames"
grep -qxF '# TYPE omsd_dp_rx_pkts_total counter' "$M" || fail "omsd_dp_rx_pkts_total is not a counter"
check 'omsd_latency_seconds_count{node="1",shard="1",path="ingress_ack"}' 'v > 0' \
	"no ingress→ack latency after trading"
check 'omsd_latency_seconds{node="1",shard="1",path="ingress_ack",quantile="0.99"}' \
	'v > 0 && v < 10' "an ingress→ack p99 in seconds"
check 'omsd_latency_seconds_sum{node="1",shard="1",path="ingress_ack"}' 'v > 0 && v < 100' \
	"an ingress→ack sum in seconds"
check 'omsd_latency_hist_seconds_bucket{node="1",shard="1",path="order_final",le="+Inf"}' \
	'v > 0' "no order→final buckets after trading"
check 'omsd_latency_hist_seconds_bucket{node="1",shard="1",path="order_final",le="10"}' \
	'v > 0' "the 10 s bound in seconds"
grep -qxF '# TYPE omsd_agent_max_cycle_seconds gauge' "$M" || fail "no gauge omsd_agent_max_cycle_seconds"
check 'omsd_agent_max_cycle_seconds{node="1",lcore="io"}' 'v > 0 && v < 10' \
	"a longest duty cycle in seconds"
check 'omsd_uptime_seconds{node="1"}' 'v > 0 && v < 3600' "an uptime in seconds"
check 'omsd_gateway_latency_seconds{node="1",path="rx_ack",quantile="0.5"}' 'v > 0 && v < 10' \
	"a gateway RX→ACK median in seconds"
check 'omsd_agent_busy_ratio{node="1",lcore="io"}' 'v >= 0 && v <= 1' "a busy ratio"
grep -qxF '# TYPE omsd_agent_busy_seconds_total counter' "$M" ||
	fail "no counter omsd_agent_busy_seconds_total"
# No counter without _total, no time left in ns/us/ms.
bad=$(awk '$1 == "#" && $2 == "TYPE" && $4 == "counter" && $3 !~ /_total$/ { print $3 }' "$M")
[ -z "$bad" ] || fail "counters without _total: $bad"
bad=$(grep -E '^[a-z_]+_(ns|us|ms)(_[a-z]+)?[{ ]' "$M" | head -5 || true)
[ -z "$bad" ] || fail "times not in seconds: $bad"
# Every stat found its Prometheus name (none left out of the rendering).
! grep -q '^omsd_metrics_unmapped' "$M" || fail "$(grep '^omsd_metrics_unmapped' "$M")"
# The dashboard's queries use only names this node exports, counters under rate().
"$PY" "$E2E_DIR/../tools/check_grafana.py" "$E2E_DIR/../../deploy/grafana/omsd.json" "$M" ||
	fail "dashboard references metrics the node does not export"

e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

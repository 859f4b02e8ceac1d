#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: the read-only views against a running node: omsctl members / lcores /
# status (lag per member) / top, the Prometheus text on the control socket and on the
# loopback HTTP listener (metrics_listen, malformed requests answered and survived), the
# DPDK telemetry commands (/omsd/*) through dpdk-telemetry.py, latency histograms filled by
# real orders, a non-loopback metrics_listen refused, and every metric the Grafana
# dashboard uses exported by the node.
# Method: one trading node (OMS shard 1 + ME shard 2) with [mgmt] metrics_listen =
# 127.0.0.1:9464 in its namespace; e2e_trade.py single trades through it; then each view is
# queried and checked for content, not just for an answer.
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
e2e_init omt 23
e2e_net_up
SOCK=$TMP/omsd.sock
CTL=("$OMSCTL" --socket "$SOCK")

# A non-loopback listener is a configuration error naming file, line, section and key.
e2e_trade_config "$TMP/bad.ini" "" "[mgmt]" "metrics_listen = 10.0.0.1:9464"
rc=0
"$OMSD" --check -c "$TMP/bad.ini" >"$TMP/bad.out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "non-loopback metrics_listen: exit $rc, want 2"
grep -qE "bad.ini:[0-9]+: \[mgmt\] metrics_listen: 10.0.0.1 is not a loopback address" \
	"$TMP/bad.out" || fail "no FILE:LINE error for metrics_listen: $(cat "$TMP/bad.out")"

e2e_trade_config "$TMP/omsd.ini" "" "[mgmt]" "metrics_listen = 127.0.0.1:9464"
e2e_start "$TMP/omsd.ini"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_trade.py" single --nodes "$NODE_IP" \
	>"$TMP/trade.log" 2>&1 || fail "trading failed: $(tail -5 "$TMP/trade.log")"

# members: every member of both shards, this node the leader, lag 0 (single member).
json=$("${CTL[@]}" --json members) || fail "omsctl members: exit $?"
log "members: $json"
for want in '"shard":1,"node":1,"self":true,"leader":true' '"shard":2,"node":1' '"lag":0'; do
	grep -qF "$want" <<<"$json" || fail "members lacks $want"
done
"${CTL[@]}" members >"$TMP/members.txt" || fail "omsctl members (table)"
grep -qE '^ +shard +node +self +leader +term +match +lag' "$TMP/members.txt" ||
	fail "members table header: $(cat "$TMP/members.txt")"

# lcores: io and both shards, with their idle mode and rings.
json=$("${CTL[@]}" --json lcores) || fail "omsctl lcores: exit $?"
log "lcores: $json"
for want in '"name":"io"' '"name":"shard1"' '"name":"shard2"' '"idle":"sleep"' \
	'"busy_pct":' '"ring_size":'; do
	grep -qF "$want" <<<"$json" || fail "lcores lacks $want"
done

# status: lag per member and the last log index next to commit and applied.
json=$("${CTL[@]}" --json status) || fail "omsctl status: exit $?"
grep -qF '"lag":{"1":0}' <<<"$json" || fail "status has no lag per member: $json"
grep -qE '"last_index":[1-9]' <<<"$json" || fail "status has no last_index: $json"

# metrics on the socket: labelled families, TYPE lines, latency from the trades above.
"${CTL[@]}" metrics >"$TMP/metrics.txt" || fail "omsctl metrics: exit $?"
grep -qE '^omsd_shard_commit\{node="1",shard="1"\} [1-9][0-9]*$' "$TMP/metrics.txt" ||
	fail "no omsd_shard_commit for shard 1"
grep -qxF '# TYPE omsd_shard_commit gauge' "$TMP/metrics.txt" || fail "no TYPE line"
# Counters end in _total (docs/appliance.md "Metric names"; all of it: e2e_promtool).
grep -qxF '# TYPE omsd_shard_oms_acks_total counter' "$TMP/metrics.txt" ||
	fail "no counter omsd_shard_oms_acks_total"
# Orders waiting for a hydration now (a gauge; nothing waits once the trades are done).
grep -qE '^omsd_shard_parked_now\{node="1",shard="1"\} 0$' "$TMP/metrics.txt" ||
	fail "no omsd_shard_parked_now 0 for shard 1"
acks=$(awk -F' ' '/^omsd_latency_seconds_count\{node="1",shard="1",path="ingress_ack"\}/ {print $2}' \
	"$TMP/metrics.txt")
[ "${acks:-0}" -gt 0 ] || fail "no ingress→ack latency recorded after trading"
finals=$(awk '/^omsd_latency_hist_seconds_count\{node="1",shard="1",path="order_final"\}/ {print $2}' \
	"$TMP/metrics.txt")
[ "${finals:-0}" -gt 0 ] || fail "no order→final latency recorded after trading"
log "latency samples: $acks acks, $finals finals"
# One TYPE per family: families are not split.
dups=$(grep '^# TYPE' "$TMP/metrics.txt" | awk '{print $3}' | sort | uniq -d)
[ -z "$dups" ] || fail "families declared twice: $dups"

# The same text over HTTP from inside the node's namespace.
NSX=(ip netns exec "$NS_N")
"${NSX[@]}" curl -sS -D "$TMP/h.hdr" -o "$TMP/h.txt" http://127.0.0.1:9464/metrics ||
	fail "curl /metrics"
grep -qi '^Content-Type: text/plain; version=0.0.4' "$TMP/h.hdr" || fail "content type"
grep -q '^omsd_latency_seconds{node="1",shard="1",path="ingress_ack",quantile="0.99"}' \
	"$TMP/h.txt" || fail "HTTP metrics lack latency quantiles"
code=$("${NSX[@]}" curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:9464/nothing)
[ "$code" = 404 ] || fail "GET /nothing: $code, want 404"
code=$("${NSX[@]}" curl -s -o /dev/null -w '%{http_code}' -X POST http://127.0.0.1:9464/metrics)
[ "$code" = 405 ] || fail "POST /metrics: $code, want 405"
bad=$("${NSX[@]}" "$PY" - <<'PY'
import socket
s = socket.create_connection(("127.0.0.1", 9464))
s.sendall(b"\x16\x03\x01garbage\r\n\r\n")
print(s.recv(200).decode(errors="replace").splitlines()[0])
s = socket.create_connection(("127.0.0.1", 9464))
s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 8000)
try:
    print(s.recv(200).decode(errors="replace").splitlines()[0])
except ConnectionResetError:
    print("reset")
PY
) || fail "raw HTTP requests"
log "malformed HTTP: $bad"
grep -q "400 Bad Request" <<<"$bad" || fail "malformed request line not answered 400"
grep -qE "431|reset" <<<"$bad" || fail "overlong request not refused"
"${NSX[@]}" curl -sS -o /dev/null http://127.0.0.1:9464/metrics || fail "HTTP dead after bad requests"
"${CTL[@]}" metrics >"$TMP/metrics2.txt" || fail "omsctl metrics (2)"
grep -qE '^omsd_http_answers_total\{node="1",code="400"\} 1$' "$TMP/metrics2.txt" ||
	fail "HTTP 400 not counted: $(grep omsd_http "$TMP/metrics2.txt")"

# top, non-interactively: two refreshes, rates and latency quantiles.
"${CTL[@]}" top --count 2 --interval-ms 300 >"$TMP/top.txt" || fail "omsctl top: exit $?"
[ "$(grep -c '^omsctl top' "$TMP/top.txt")" = 2 ] || fail "top did not refresh twice"
grep -q 'quantile=' "$TMP/top.txt" || fail "top shows no latency quantiles"
grep -qE '^ *io ' "$TMP/top.txt" || fail "top shows no lcores"

# DPDK telemetry: the same views for dpdk-telemetry.py.
TEL=$(command -v dpdk-telemetry.py || true)
[ -n "$TEL" ] || fail "dpdk-telemetry.py not installed (Debian package dpdk-dev)"
tel() { printf '%s\n' "$@" | "$PY" "$TEL" -f "$PREFIX" 2>&1; }
out=$(tel /omsd/status /omsd/members /omsd/lcores /omsd/stats /omsd/stats,shard.1.oms)
log "telemetry: $(head -c 600 <<<"$out")"
for want in '"/omsd/status": {"node": 1' '"role": "leader"' '"lag_node_1": 0' \
	'"/omsd/members": {' '"node_1_match":' '"/omsd/lcores": {"io": {' '"busy_permille":' \
	'"groups": [' '"shard_1_oms_acks":'; do
	grep -qF "$want" <<<"$out" || fail "telemetry lacks $want"
done

# Every metric the dashboard uses is exported (tests/tools/check_grafana.py with a scrape).
"$PY" "$E2E_DIR/../tools/check_grafana.py" "$E2E_DIR/../../deploy/grafana/omsd.json" \
	"$TMP/h.txt" || fail "dashboard references metrics the node does not export"

e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

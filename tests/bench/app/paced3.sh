#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bench: a paced run against three replicas (issue 18: "omsload at 20k orders/s for 30 s
# against three replicas: ACK p99 ≤ 2 ms, final p99 ≤ 5 ms; report the histogram").
# Three omsd in namespaces on a Linux bridge (tests/e2e/lib.sh, tag opc, 10.201.44.0/24),
# each a member of OMS shard 1 and ME shard 2, net_af_packet on veths, the shipped
# durability (durable: every entry on disk, synced by each node's persister lcore, before it
# counts towards a majority) and API keys. omsload, in the client namespace, logs on to the
# node leading OMS shard 1, funds USERS users and sends its seeded flow (limits that cross
# and rest, cancels, markets, IOCs) at RATE requests/s for DURATION_S seconds, open loop, then drains.
#
# Two views of the latency:
#   - the client's (omsload): first send → ACK, over the kernel's UDP stack and the veths;
#     its histogram in power-of-two bins (omsload --hist);
#   - the entry node's gateway (the histograms of pipeline.sh): RX → ACK and RX → the first
#     report after the ME (OPEN, DONE or REJECTED: "final").
#
# Env: RATE (requests/s, 20000), DURATION_S (30), USERS (1000), SEED (7), DURABILITY (durable |
#      memory), OMSD, OMSLOAD, E2E_FRAME (default: build/), PACED_TAG / PACED_NET (opc, 44:
#      the namespaces and subnet), KEEP=1 (keep the temp dir), CHECK=1 (omsload writes a
#      history and tests/chaos/checker.py judges it against the cluster's state).
# Last line: bench: paced3 rate=N seconds=N sent=N acked=N naked=N ack_p50_us=N
#   ack_p99_us=N ack_p999_us=N gw_ack_p50_us=N gw_ack_p99_us=N gw_final_p50_us=N
#   gw_final_p99_us=N durability=...
# Exit 1 when the run is not clean: omsload failed, nothing was acknowledged, or its ledger
# found an acknowledged order unreported, doubled or over-filled. omsload drains until 10 s
# pass with nothing new (--quiet-ms): past saturation the OMS leader holds a backlog of
# sagas that its bridge re-drives with back-off. Never on a time.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
RATE=${RATE:-20000}
SECONDS_RUN=${DURATION_S:-30} # not SECONDS: bash counts the shell's own seconds in it
USERS=${USERS:-1000}
SEED=${SEED:-7}
DURABILITY=${DURABILITY:-durable}
case "$DURABILITY" in memory | durable) ;; *) echo "paced3: DURABILITY is memory or durable" >&2; exit 2 ;; esac
export OMSD=${OMSD:-$ROOT/build/app/omsd}
export E2E_FRAME=${E2E_FRAME:-$ROOT/build/tests/e2e/e2e_frame}
OMSLOAD=${OMSLOAD:-$ROOT/build/tools/omsload}
[ -x "$OMSLOAD" ] || { echo "paced3: no omsload at $OMSLOAD" >&2; exit 2; }
source "$ROOT/tests/e2e/lib.sh"
need_root
e2e_cluster_init "${PACED_TAG:-opc}" "${PACED_NET:-44}" 3
if [ "${KEEP:-0}" = 1 ]; then e2e_cleanup_hook() { cp -r "$TMP" "$TMP.kept"; echo "kept $TMP.kept"; }; fi
e2e_cluster_net_up

# omsload's users are 1000.. (its --first-user default); one key for them.
export E2E_KEYS_FILE=$TMP/api_keys
export E2E_MSGS_PER_SEC=0 # one session carries the whole paced load
secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
printf '1 %s trade,transfer,read 1000-%d\n' "$secret" $((999 + USERS)) >"$E2E_KEYS_FILE"
printf '1 %s\n' "$secret" >"$TMP/client_key"
chmod 600 "$E2E_KEYS_FILE" "$TMP/client_key"

LINES=(
	"" "[limits]" "resident_users = $((USERS + 1024))" "parked_orders = 4096"
	"inflight_sagas = 16384" "orders = 65536" "log_entries = 65536" "log_mb = 32"
	"snapshot_mb = 16" "snapshot_entries = 20000"
	"" "[timers]" "user_ttl_ms = 86400000"
	"" "[durability]" "mode = $DURABILITY"
	"" "[persister]" "cpu = 1" "idle = sleep"
	"" "[symbol.1]" "base = 1" "quote = 2" "me_shard = 2" "ref_px = 100" "band_bps = 5000"
	"maker_fee_bps = 2" "taker_fee_bps = 7"
)
e2e_cluster_bench_up "${LINES[@]}"
e2e_cluster_ready_leader
[ -n "$L" ] || { OMSD_LOG=$TMP/1/omsd.log; fail "no OMS leader ready within 20 s"; }
log "OMS leader node $L, ME leader node $MEL; omsload logs on to node $L:" \
	"$USERS users, $RATE requests/s for ${SECONDS_RUN}s, durability $DURABILITY"

HIST=()
[ "${CHECK:-0}" = 1 ] && mkdir -p "$TMP/check/state" && HIST=(--history "$TMP/check/history.tsv")
rc=0
ip netns exec "$NS_C" "$OMSLOAD" "${HIST[@]}" --host "$NET.1$L" --port 7400 --users "$USERS" \
	--key-file "$TMP/client_key" --rate "$RATE" --seconds "$SECONDS_RUN" --seed "$SEED" \
	--symbols 1 --mid 100 --drain-ms 120000 --quiet-ms 10000 --inflight 65536 --hist \
	>"$TMP/load.log" 2>&1 || rc=$?
sed 's/^/  /' "$TMP/load.log"
[ "$rc" = 0 ] || fail "omsload exit status $rc"

if [ "${CHECK:-0}" = 1 ]; then
	# The chaos checker's verdict on the history and the cluster's state (it trusts neither
	# omsload's ledger nor one node): the nodes' stats and the OMS leader's resident users.
	sleep 2
	for i in 1 2 3; do
		e2e_cluster_stat "$i" dp.rx_pkts >/dev/null
		cp "$TMP/$i/stats" "$TMP/check/state/node$i.stats"
	done
	echo "1 2 3" >"$TMP/check/state/live_nodes"
	ol=
	for i in 1 2 3; do [ "$(e2e_cluster_stat "$i" shard.1.is_leader)" = 1 ] && ol=$i; done
	python3 "$HERE/churn_views.py" --socket "$TMP/$ol/omsd.sock" --shard 1 \
		--out "$TMP/check/state/users.1.jsonl" || fail "cannot read OMS shard 1's views"
	check_rc=0
	python3 "$ROOT/tests/chaos/checker.py" --dir "$TMP/check" --scenario paced3 \
		--users "$USERS" --first-user 1000 --oms-shards 1 --me-shards 2 \
		>"$TMP/check/verdict" || check_rc=$?
	grep -v "^finding: " "$TMP/check/verdict" | sed 's/^/  /' || true
	grep "^finding: " "$TMP/check/verdict" | head -n 20 | sed 's/^/  /' || true
	[ "$check_rc" = 0 ] || fail "the checker: $(tail -n 1 "$TMP/check/verdict")"
fi
e2e_cluster_stat "$L" dp.rx_pkts >/dev/null
cp "$TMP/$L/stats" "$TMP/entry.stats"
v() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$TMP/entry.stats"; }
us() { awk -v n="$1" 'BEGIN { printf "%.1f", n / 1000 }'; }
f() { sed -n "s/.*[ :]$1=\([0-9]*\).*/\1/p" "$TMP/load.log" | tail -1; }
led=$(grep '^ledger:' "$TMP/load.log" || true)
[ -n "$led" ] || fail "no ledger line from omsload"
for k in unreported doubled overfilled; do
	n=$(sed -n "s/.* $k=\([0-9]*\).*/\1/p" <<<"$led")
	[ "${n:-x}" = 0 ] || fail "omsload's ledger: $k=$n"
done
acked=$(sed -n 's/^load: .* acked=\([0-9]*\).*/\1/p' "$TMP/load.log")
[ "${acked:-0}" -gt 0 ] || fail "nothing acknowledged"
echo "gateway (node $L): rx_ack p50/p90/p99/p999/max us" \
	"$(us "$(v gateway.lat_rx_ack_ns.p50)") $(us "$(v gateway.lat_rx_ack_ns.p90)")" \
	"$(us "$(v gateway.lat_rx_ack_ns.p99)") $(us "$(v gateway.lat_rx_ack_ns.p999)")" \
	"$(us "$(v gateway.lat_rx_ack_ns.max)");" \
	"rx_final $(us "$(v gateway.lat_rx_final_ns.p50)") $(us "$(v gateway.lat_rx_final_ns.p90)")" \
	"$(us "$(v gateway.lat_rx_final_ns.p99)") $(us "$(v gateway.lat_rx_final_ns.p999)")" \
	"$(us "$(v gateway.lat_rx_final_ns.max)"); timed $(v gateway.lat_orders)," \
	"lost $(v gateway.lat_lost)"
for i in 1 2 3; do
	e2e_cluster_stat "$i" dp.rx_pkts >/dev/null
	awk -v n="$i" '
		$1 ~ /^agent\..*\.max_cycle_ns$/ { split($1, p, "."); c = c sprintf(" %s=%.0f", p[2], $2 / 1000) }
		END { printf "node %s max_cycle_us:%s\n", n, c }' "$TMP/$i/stats"
done
echo "bench: paced3 rate=$RATE seconds=$SECONDS_RUN sent=$(sed -n 's/^load: sent=\([0-9]*\).*/\1/p' "$TMP/load.log")" \
	"acked=$acked naked=$(sed -n 's/^load: .* naked=\([0-9]*\).*/\1/p' "$TMP/load.log")" \
	"ack_p50_us=$(f ack_p50_us) ack_p99_us=$(f ack_p99_us) ack_p999_us=$(f ack_p999_us)" \
	"gw_ack_p50_us=$(us "$(v gateway.lat_rx_ack_ns.p50)") gw_ack_p99_us=$(us "$(v gateway.lat_rx_ack_ns.p99)")" \
	"gw_final_p50_us=$(us "$(v gateway.lat_rx_final_ns.p50)") gw_final_p99_us=$(us "$(v gateway.lat_rx_final_ns.p99)")" \
	"durability=$DURABILITY"

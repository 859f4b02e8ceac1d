#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Bench: the hot-user cache under churn (docs/appliance.md "Benchmarks", issue 17). Many
# more users than the OMS may hold resident, each sending now and then: most orders come
# from a user the OMS evicted (or never saw), so it must hydrate the user from PostgreSQL,
# make room by evicting another, or refuse the order CAPACITY.
#
# The chaos harness's infrastructure (docs/testing.md "Chaos"): three omsd in network
# namespaces on a Linux bridge (tests/e2e/lib.sh, tag ochn, 10.201.61.0/24), durable, a
# real PostgreSQL (deploy/pg/pgctl), omsload with --history through one node's gateway,
# and tests/chaos/checker.py deciding from the history, the stats dumps, the leaders' views
# and the accounts rows. The users are funded by seeding their accounts rows before the
# nodes start (base 10^9, quote 10^12 each, what omsload's deposits give), so the first
# order of every user is a real hydration from the database; the checker knows that
# funding (--funded) and checks money per user as well as per asset.
#
# Env: USERS (20000), CAP ([limits] resident_users, 2000), TTL_MS ([timers] user_ttl_ms,
#      2000; sweep_ms is 100), RATE (omsload requests/s, 2000; about 1 in 30 is a cancel:
#      a user rarely rests enough to be picked for one), DURATION_S (60), OMS_SHARDS (1: OMS
#      shard 1; 2: OMS shards 1 and 3; ME shard 2 either way), KILL (none | oms: kill -9 the
#      node leading OMS shard 1 a third of the way in and restart it from its data dir,
#      durable, DURATION_S/3 s later (4 to 20), as the chaos harness's kill-one does),
#      MIX (ioc: every limit order IOC, so a user holds no open order once its order is
#      done — the issue's acceptance shape, "no more than the cap hold open orders"; gtc:
#      omsload's usual mix, most limits rest, and a user resting an order is never evicted,
#      so the cap fills with such users and cold users are refused CAPACITY by design),
#      DURABILITY (durable, the shipped default; memory: the log in memory only, to see what
#      the shard lcore's fsyncs cost), SEED (1), OMSD and OMSLOAD (default build/), CHURN_TAG and CHURN_NET (the namespace
#      tag and subnet), CHURN_OUT (keep the evidence there; otherwise /tmp/omsd-churn.*,
#      removed after a clean run), E2E_IDLE_SPINS and E2E_IDLE_SLEEP_US (every lcore's
#      idle_spins and idle_sleep_us, tests/e2e/lib.sh; default omsd's 200 and 200: three
#      nodes' dozen lcores on two CPUs spend much of them polling, docs/perf.md).
#
# omsload classes each new order on the client side: cold when its user sent nothing for
# longer than TTL_MS (or never), hot otherwise (--cold-ms). Prints the checker's findings,
# `money: exact` or `money: off users=...` (every user: the OMS leader's view if resident,
# the accounts row if not, against funding + fills), and as its last line
#   bench: churn orders=N orders_per_s=N capacity_naks=N hydrations_per_s=N
#          cold_ack_p50_us=N cold_ack_p99_us=N hot_ack_p99_us=N ...
# Exit 1 when the run is not clean (the checker failed: money off, an order lost or
# doubled, a report missing, an alarm ...), or the cluster did not come up; never for the
# CAPACITY refusals or the latency, which it only prints. 77 without root and ip netns.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
USERS=${USERS:-20000}
CAP=${CAP:-2000}
TTL_MS=${TTL_MS:-2000}
RATE=${RATE:-2000}
DURATION_S=${DURATION_S:-60}
OMS_SHARDS=${OMS_SHARDS:-1}
KILL=${KILL:-none}
MIX=${MIX:-ioc}
DURABILITY=${DURABILITY:-durable}
SEED=${SEED:-1}
FIRST_USER=1000
FUND_BASE=1000000000
FUND_QUOTE=1000000000000
case $OMS_SHARDS in 1) OMS_LIST=(1) ;; 2) OMS_LIST=(1 3) ;; *) echo "churn: OMS_SHARDS is 1 or 2" >&2; exit 2 ;; esac
case $KILL in none | oms) ;; *) echo "churn: KILL is none or oms" >&2; exit 2 ;; esac
case $DURABILITY in durable | memory) ;; *) echo "churn: DURABILITY is durable or memory" >&2; exit 2 ;; esac
case $MIX in ioc) MIX_ARGS=(--ioc) ;; gtc) MIX_ARGS=() ;; *) echo "churn: MIX is ioc or gtc" >&2; exit 2 ;; esac
for v in USERS CAP TTL_MS RATE DURATION_S SEED; do
	if ! [[ ${!v} =~ ^[0-9]+$ ]] || [ "${!v}" -eq 0 ]; then
		echo "churn: $v must be a positive number" >&2
		exit 2
	fi
done
[ "$DURATION_S" -ge 6 ] || { echo "churn: DURATION_S must be >= 6" >&2; exit 2; }
SHARDS=("${OMS_LIST[@]}" 2)
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
	echo "SKIP: the churn bench needs root and ip netns"
	exit 77
fi
export OMSD=${OMSD:-$ROOT/build/app/omsd}
export E2E_FRAME=${E2E_FRAME:-$ROOT/build/tests/e2e/e2e_frame}
OMSLOAD=${OMSLOAD:-$ROOT/build/tools/omsload}
PGCTL=$ROOT/deploy/pg/pgctl
# lib.sh wants E2E_FRAME set; its cluster helpers, all this uses, never run it.
for b in "$OMSD" "$OMSLOAD"; do
	[ -x "$b" ] || { echo "churn: no $b (set OMSD and OMSLOAD)" >&2; exit 2; }
done
OUT=${CHURN_OUT:-}
KEEP_OUT=1
[ -n "$OUT" ] || { OUT=$(mktemp -d /tmp/omsd-churn.XXXXXX); KEEP_OUT=0; }
mkdir -p "$OUT/state"

# shellcheck source=../../e2e/lib.sh disable=SC1091
source "$ROOT/tests/e2e/lib.sh"
e2e_cluster_init "${CHURN_TAG:-ochn}" "${CHURN_NET:-61}" 3
PG_DIR=$TMP/pg
churn_cleanup() {
	local rc=$?
	set +e
	"$PGCTL" stop "$PG_DIR" >/dev/null 2>&1
	for f in "$TMP"/*/omsd.log "$TMP"/load.log; do
		[ -f "$f" ] && cp "$f" "$OUT/$(basename "$(dirname "$f")")-$(basename "$f")"
	done
	if [ "$rc" -eq 0 ] && [ "$KEEP_OUT" = 0 ]; then rm -rf "$OUT"; else echo "churn: evidence in $OUT" >&2; fi
	(exit "$rc")
	e2e_cluster_cleanup
}
trap churn_cleanup EXIT

log "== churn: $USERS users, resident_users $CAP, ttl ${TTL_MS} ms, $RATE requests/s for" \
	"${DURATION_S} s, OMS shards ${OMS_LIST[*]}, kill $KILL, seed $SEED (out: $OUT)"

# PostgreSQL, and every user's accounts row seeded with its funding: one statement, where
# 2 x USERS deposits through the cluster would take minutes and keep every user resident.
mkdir -p "$PG_DIR"
chmod 0755 "$TMP" "$PG_DIR"
CONNINFO=$("$PGCTL" start "$PG_DIR" $((56000 + $$ % 900)) 2>"$OUT/pgctl.log") ||
	{ cat "$OUT/pgctl.log" >&2; fail "pgctl start"; }
"$PGCTL" psql "$PG_DIR" -c "INSERT INTO accounts (user_id, assets, totals)
	SELECT u, '{1,2}', ARRAY[$FUND_BASE, $FUND_QUOTE]::bigint[]
	FROM generate_series($FIRST_USER, $((FIRST_USER + USERS - 1))) AS u" >/dev/null ||
	fail "cannot seed the accounts rows"
log "PostgreSQL up, $USERS accounts rows seeded"

e2e_cluster_net_up
oms_csv=$(IFS=,; echo "${OMS_LIST[*]}")
LINES=()
if [ "$OMS_SHARDS" = 2 ]; then
	LINES+=("" "[shard.3]" "service = oms" "members = 1,2,3" "cpu = 0" "idle = sleep"
		"${E2E_IDLE_SPINS:+idle_spins = $E2E_IDLE_SPINS}" "${E2E_IDLE_SLEEP_US:+idle_sleep_us = $E2E_IDLE_SLEEP_US}")
fi
LINES+=(
	"" "[persister]" "cpu = 1" "idle = sleep" "${E2E_IDLE_SPINS:+idle_spins = $E2E_IDLE_SPINS}" "${E2E_IDLE_SLEEP_US:+idle_sleep_us = $E2E_IDLE_SLEEP_US}"
	"" "[database]" "conninfo = $CONNINFO"
	"" "[durability]" "mode = $DURABILITY"
	"" "[limits]" "resident_users = $CAP" "parked_orders = 16384" "inflight_sagas = 4096"
	"report_ring = 524288"
	"orders = 65536" "log_entries = 65536" "log_mb = 64" "snapshot_mb = 16"
	"snapshot_entries = 20000"
	"" "[timers]" "tick_ms = 10" "bridge_redrive_ms = 200" "user_ttl_ms = $TTL_MS"
	"sweep_ms = 100"
	"" "[routing]" "epoch = 1" "oms_shards = $oms_csv"
	"" "[symbol.1]" "base = 1" "quote = 2" "me_shard = 2" "tick = 1" "lot = 1"
	"min_qty = 1" "min_notional = 1" "base_unit = 1" "ref_px = 100" "band_bps = 5000"
	"maker_fee_bps = 2" "taker_fee_bps = 7"
)
for i in 1 2 3; do
	mkdir -p "$TMP/$i"
	E2E_SERVICE_1=oms E2E_SERVICE_2=me e2e_cluster_config "$i" "$TMP/$i/omsd.ini" "${LINES[@]}"
	sed -i 's/-m 256/-m 512/' "$TMP/$i/omsd.ini"
	e2e_cluster_start "$i" "$TMP/$i/omsd.ini"
done
log "3 nodes up: ${NODE_PIDS[*]}"

leader_of() { # SHARD: the live node that leads SHARD, or empty
	local n
	for n in "${!NODE_PIDS[@]}"; do
		[ "$(e2e_cluster_stat "$n" "shard.$1.is_leader")" = 1 ] && { echo "$n"; return 0; }
	done
	return 0
}
wait_leaders() { # TRIES: until every shard has a leader (0.2 s apart)
	local s ok
	for _ in $(seq "$1"); do
		ok=1
		for s in "${SHARDS[@]}"; do [ -n "$(leader_of "$s")" ] || { ok=0; break; }; done
		[ "$ok" = 1 ] && return 0
		sleep 0.2
	done
	return 1
}
wait_leaders 150 || fail "not every shard elected a leader"
for _ in $(seq 75); do
	[ "$(e2e_cluster_stat "$(leader_of 1)" shard.1.route_epoch)" -ge 1 ] 2>/dev/null && break
	sleep 0.2
done
L1=$(leader_of 1)
# The gateway: a node that does not lead OMS shard 1, so KILL=oms does not take it away.
GW=$((L1 % 3 + 1))
placement=""
for s in "${SHARDS[@]}"; do placement+=" shard$s@node$(leader_of "$s")"; done
log "leaders:$placement; the load enters node $GW"

# The load. Cold: the user sent nothing for longer than the TTL (or never).
ip netns exec "$NS_C" "$OMSLOAD" --host "$NET.1$GW" --port 7400 --users "$USERS" \
	--first-user "$FIRST_USER" --rate "$RATE" --seconds "$DURATION_S" --seed "$SEED" \
	--symbols 1 --mid 100 --no-fund --cold-ms "$TTL_MS" --drain-ms 15000 "${MIX_ARGS[@]}" --seq-from-one \
	--history "$OUT/history.tsv" >"$TMP/load.log" 2>&1 &
LOAD_PID=$!

# While it runs: the resident count every second (read on the gateway node, which is never
# killed: the count is replicated state), and KILL=oms at a third of the way in.
resident_now() { # the sum of shard.S.resident over the OMS shards, on the gateway node
	local s n=0 v
	e2e_cluster_stat "$GW" dp.rx_pkts >/dev/null
	for s in "${OMS_LIST[@]}"; do
		v=$(awk -v k="shard.$s.resident" '$1 == k { print $2 }' "$TMP/$GW/stats")
		n=$((n + ${v:-0}))
	done
	echo "$n"
}
RES_MAX=0
KILL_AT=$((DURATION_S / 3))
KILL_LEN=$((DURATION_S / 3))
[ "$KILL_LEN" -gt 20 ] && KILL_LEN=20
[ "$KILL_LEN" -lt 4 ] && KILL_LEN=4
t0=$SECONDS
killed=
: >"$OUT/residents"
while kill -0 "$LOAD_PID" 2>/dev/null; do
	r=$(resident_now)
	echo "$((SECONDS - t0)) $r" >>"$OUT/residents"
	[ "$r" -gt "$RES_MAX" ] && RES_MAX=$r
	if [ "$KILL" = oms ] && [ -z "$killed" ] && [ $((SECONDS - t0)) -ge "$KILL_AT" ]; then
		killed=$(leader_of 1)
		[ -n "$killed" ] || fail "no leader of OMS shard 1 to kill"
		[ "$killed" = "$GW" ] && log "warning: OMS shard 1's leader moved to the gateway node"
		log "kill -9 node $killed (leads OMS shard 1) for ${KILL_LEN} s"
		kill -KILL "${NODE_PIDS[$killed]}"
		wait "${NODE_PIDS[$killed]}" 2>/dev/null || true
		echo "kill $(date +%s.%N) node$killed" >>"$OUT/faults"
		kill_until=$((SECONDS + KILL_LEN))
	fi
	if [ -n "$killed" ] && [ -n "${kill_until:-}" ] && [ "$SECONDS" -ge "$kill_until" ]; then
		e2e_cluster_start "$killed" "$TMP/$killed/omsd.ini"
		log "node $killed restarted (durable): pid ${NODE_PIDS[$killed]}"
		echo "restart $(date +%s.%N) node$killed" >>"$OUT/faults"
		kill_until=
		wait_leaders 75 || fail "not every shard has a leader 15 s after the restart"
	fi
	sleep 1
done
load_rc=0
wait "$LOAD_PID" || load_rc=$?
cp "$TMP/load.log" "$OUT/load.log"
[ "$load_rc" -eq 0 ] || { cat "$TMP/load.log" >&2; fail "omsload exit status $load_rc"; }
if [ -n "${kill_until:-}" ]; then # the load ended before the restart was due
	e2e_cluster_start "$killed" "$TMP/$killed/omsd.ini"
	log "node $killed restarted (durable) after the load"
fi
grep -E "^(load|latency|naks|deposits):" "$TMP/load.log" | sed 's/^/omsload: /'

# Quiet: after the load the sweep evicts every flat user idle for the TTL (the users left
# hold orders); wait for that, and for no saga, parked message or resident-count change on
# the OMS leaders three samples running (30 s at most). Only then are the dumps, the views
# and the rows read, so that none of them sees a user the others do not.
quiet_now() { # one line of what must stop moving, from the OMS leaders' dumps
	local s l k
	for s in "${OMS_LIST[@]}"; do
		l=$(leader_of "$s")
		for k in resident sagas_pending parked_now inflight oms.evictions oms.hydrations; do
			printf '%s ' "$(awk -v k="shard.$s.$k" '$1 == k { print $2 }' "$TMP/$l/stats")"
		done
	done
}
wait_leaders 75 || fail "not every shard has a leader after the load"
sleep "$(awk -v t="$TTL_MS" 'BEGIN { printf "%.1f", t / 1000 + 0.5 }')"
prev="" same=0
for _ in $(seq 60); do
	cur=$(quiet_now)
	if [ "$cur" = "$prev" ]; then same=$((same + 1)); [ "$same" -ge 2 ] && break; else same=0; fi
	prev=$cur
	sleep 0.5
done
[ "$same" -ge 2 ] || log "warning: the OMS leaders did not go quiet in 30 s: $cur"
log "quiet: $(resident_now) users resident"

# What the checker reads (tests/chaos/checker.py): stats dumps, the leaders' views of the
# resident users, the accounts rows.
for n in 1 2 3; do
	e2e_cluster_stat "$n" dp.rx_pkts >/dev/null
	cp "$TMP/$n/stats" "$OUT/state/node$n.stats"
done
for s in "${OMS_LIST[@]}"; do
	l=$(leader_of "$s")
	[ -n "$l" ] || continue
	python3 "$HERE/churn_views.py" --socket "$TMP/$l/omsd.sock" --shard "$s" \
		--out "$OUT/state/users.$s.jsonl" || fail "cannot read the views of OMS shard $s"
done
"$PGCTL" psql "$PG_DIR" -tA -F $'\t' -c \
	"SELECT user_id, coalesce(owner_shard, 0), version, array_to_string(assets, ','), array_to_string(totals, ',') FROM accounts ORDER BY user_id" \
	>"$OUT/state/accounts.tsv" 2>"$OUT/state/accounts.err" || fail "cannot read the accounts rows"
echo "1 2 3" >"$OUT/state/live_nodes"

check_rc=0
python3 "$ROOT/tests/chaos/checker.py" --dir "$OUT" --scenario "churn-kill-$KILL" \
	--users "$USERS" --first-user "$FIRST_USER" --oms-shards "$oms_csv" --me-shards 2 \
	--funded "1=$FUND_BASE" --funded "2=$FUND_QUOTE" --per-user-money >"$OUT/verdict" ||
	check_rc=$?
grep -v "^finding: " "$OUT/verdict" | grep -v "^checker: " || true
grep "^finding: " "$OUT/verdict" | head -n 20 || true
tail -n 1 "$OUT/verdict"

# The figures. Node counters from the leaders (the OMS counters are replicated state).
lstat() { # NODE KEY: KEY in NODE's final dump, 0 when missing
	awk -v k="$2" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$OUT/state/node$1.stats"
}
cap_naks=0 hydrations=0 evictions=0 valve=0 hydrate_errors=0 oms_naks=0 parked_full=0
bp_naks=0 admit_waits=0 admit_timeouts=0 admit_wait_ns=0 admit_promoted=0
for s in "${OMS_LIST[@]}"; do
	l=$(awk -v k="shard.$s.is_leader" '$1 == k && $2 == 1 { print FILENAME }' "$OUT"/state/node*.stats |
		sed -nE 's/.*node([0-9]+)\.stats$/\1/p' | head -n 1)
	[ -n "$l" ] || continue
	cap_naks=$((cap_naks + $(lstat "$l" "shard.$s.nak.CAPACITY")))
	parked_full=$((parked_full + $(lstat "$l" "shard.$s.nak.PARKED_FULL")))
	bp_naks=$((bp_naks + $(lstat "$l" "shard.$s.nak.BACKPRESSURE")))
	admit_waits=$((admit_waits + $(lstat "$l" "shard.$s.oms.admit_waits")))
	admit_promoted=$((admit_promoted + $(lstat "$l" "shard.$s.oms.admit_promoted")))
	admit_timeouts=$((admit_timeouts + $(lstat "$l" "shard.$s.oms.admit_timeouts")))
	admit_wait_ns=$((admit_wait_ns + $(lstat "$l" "shard.$s.oms.admit_wait_ns")))
	oms_naks=$((oms_naks + $(lstat "$l" "shard.$s.oms.naks")))
	hydrations=$((hydrations + $(lstat "$l" "shard.$s.oms.hydrations")))
	hydrate_errors=$((hydrate_errors + $(lstat "$l" "shard.$s.oms.hydrate_errors")))
	evictions=$((evictions + $(lstat "$l" "shard.$s.oms.evictions")))
	valve=$((valve + $(lstat "$l" "shard.$s.oms.valve_dehydrates")))
done
# How the OMS shards' lcores fared: the longest duty cycle on any node (a cycle longer than
# the election timeout costs the leadership), and the terms (1 + leader changes).
cycle_ms=0 terms=""
for n in 1 2 3; do
	for s in "${OMS_LIST[@]}"; do
		v=$(lstat "$n" "agent.shard$s.max_cycle_ns")
		[ $((v / 1000000)) -gt "$cycle_ms" ] && cycle_ms=$((v / 1000000))
	done
done
for s in "${OMS_LIST[@]}"; do terms+="${terms:+,}$(lstat 1 "shard.$s.term")"; done
lf() { # LINE KEY: KEY=value from omsload's line that starts with LINE
	grep -m 1 "^$1" "$OUT/load.log" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
orders=$(lf "load: users=" orders)
secs=$(lf "load: users=" seconds)
per_s() { awk -v n="$1" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }'; }
money=$(grep -q "^money: exact" "$OUT/verdict" && echo exact || echo off)
result=$([ "$check_rc" -eq 0 ] && echo ok || echo FAIL)
echo "bench: churn orders=${orders:-0} orders_per_s=$(per_s "${orders:-0}")" \
	"capacity_naks=$cap_naks hydrations_per_s=$(per_s "$hydrations")" \
	"cold_ack_p50_us=$(lf latency_cold: ack_p50_us) cold_ack_p99_us=$(lf latency_cold: ack_p99_us)" \
	"hot_ack_p99_us=$(lf latency_hot: ack_p99_us) hot_ack_p50_us=$(lf latency_hot: ack_p50_us)" \
	"cold_orders=$(lf latency_cold: orders) hot_orders=$(lf latency_hot: orders)" \
	"cold_capacity=$(lf latency_cold: capacity) hot_capacity=$(lf latency_hot: capacity)" \
	"oms_naks=$oms_naks parked_full=$parked_full backpressure_naks=$bp_naks hydrations=$hydrations" \
	"admit_waits=$admit_waits admit_timeouts=$admit_timeouts admit_wait_mean_us=$(awk -v t="$admit_wait_ns" -v n="$admit_promoted" 'BEGIN { printf "%.0f", (n > 0 ? t / n / 1000 : 0) }')" \
	"hydrate_errors=$hydrate_errors evictions_per_s=$(per_s "$evictions")" \
	"valve_dehydrates=$valve residents_max=$RES_MAX oms_terms=$terms oms_max_cycle_ms=$cycle_ms users=$USERS cap=$CAP ttl_ms=$TTL_MS" \
	"rate=$RATE oms_shards=$OMS_SHARDS kill=$KILL mix=$MIX durability=$DURABILITY money=$money result=$result"
[ "$check_rc" -eq 0 ] || exit 1

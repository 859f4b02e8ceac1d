#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: a power loss of the whole cluster loses nothing that was acknowledged (issue 15,
# e2e_power_loss): durable mode, kill -9 of all three nodes at once under load, restart
# from their data directories; every acknowledged order, fill and deposit is there, the
# money is exact, the book equals the client's ledger, nothing is executed twice.
# Method: three omsd processes on a Linux bridge in the sharded shape: OMS shards 1 and 3
# (users spread over both by HRW), ME shards 2 (symbol 1) and 4 (symbol 2), every node a
# member of all four, Raft logs in files ([durability] mode = durable), a persister on a
# throwaway PostgreSQL. Two clients through two different nodes:
#   trade:   omsload, 120 users funded first, then 600 requests/s on both symbols for 10 s
#            (at most 128 unanswered, so a retransmit after the outage finds its original
#            in the user's idempotency window);
#   deposit: omsload, 400 more users, started 0.3 s before the kill: its 800 deposits are
#            in flight when the cluster dies (no orders: --rate 1 for 1 s after funding).
# 4 s into the trading, all three omsd are killed with one kill -9 and restarted from the
# same data directories; both clients retransmit what was unanswered (either outcome is
# allowed for those). After the clients drain, with every replica applied up to its
# leader's commit:
#   - trade's ledger: no order doubled or over-filled; every acknowledged order reported
#     (or its report counted missing by an open sequence gap); the ME books (shards 2 + 4)
#     rest exactly the orders the ledger says rest, plus at most the unreported ones;
#   - deposits: every user of the deposit run holds exactly 0 or one deposit of each asset
#     (never two), and every acknowledged one is there;
#   - money per asset: on every replica the OMS sums (balances free and reserved, plus
#     fees) of shards 1 + 3 equal the deposits the users hold;
#   - every replica agrees (the same sums, the same books).
# Run: flock /tmp/omsd-e2e.lock meson test -C build --no-rebuild e2e_power_loss
set -euo pipefail
: "${OMSLOAD:?set OMSLOAD}"
: "${OMSCTL:?set OMSCTL}"
source "$(dirname "$0")/lib.sh"
need_root
e2e_cluster_init opl 27 3
e2e_cluster_pg_start $((57000 + $$ % 1000)) 1 20000

# The sharded shape: E2E_TRADE_LINES with two OMS shards and a second symbol on ME shard 4.
LINES=(
	""
	"[shard.3]" "service = oms" "members = 1,2,3" "cpu = 0" "idle = sleep"
	"" "[shard.4]" "service = me" "members = 1,2,3" "cpu = 1" "idle = sleep"
	"" "[limits]" "resident_users = 2048" "parked_orders = 1024" "inflight_sagas = 1024"
	"orders = 8192" "log_entries = 65536" "log_mb = 16" "snapshot_mb = 4"
	"snapshot_entries = 4000"
	"" "[timers]" "tick_ms = 10" "bridge_redrive_ms = 200"
	"" "[routing]" "epoch = 1" "oms_shards = 1,3"
	"" "[symbol.1]" "base = 1" "quote = 2" "me_shard = 2" "tick = 1" "lot = 1" "min_qty = 1"
	"min_notional = 1" "base_unit = 1" "ref_px = 100" "band_bps = 5000"
	"maker_fee_bps = 2" "taker_fee_bps = 7"
	"" "[symbol.2]" "base = 1" "quote = 2" "me_shard = 4" "tick = 1" "lot = 1" "min_qty = 1"
	"min_notional = 1" "base_unit = 1" "ref_px = 100" "band_bps = 5000"
	"maker_fee_bps = 2" "taker_fee_bps = 7"
	"" "[durability]" "mode = ${E2E_POWER_LOSS_MODE:-durable}" # memory: see it fail
	"" "[persister]" "cpu = 1" "idle = sleep"
	"" "[database]" "conninfo = $CONNINFO"
)
e2e_cluster_net_up
for i in 1 2 3; do
	mkdir -p "$TMP/$i"
	E2E_SERVICE_1=oms E2E_SERVICE_2=me e2e_cluster_config "$i" "$TMP/$i/omsd.ini" "${LINES[@]}"
	e2e_cluster_start "$i" "$TMP/$i/omsd.ini"
done
log "3 nodes up: ${NODE_PIDS[*]}"

leader_of() { e2e_live_leader "$@"; } # SHARD: the node leading it, or empty
wait_leaders() { # every shard led, both OMS shards past the routing bootstrap (30 s)
	local l s ok
	for _ in $(seq 150); do
		ok=1
		for s in 1 2 3 4; do
			l=$(leader_of "$s")
			[ -n "$l" ] || { ok=; break; }
			if [ "$s" = 1 ] || [ "$s" = 3 ]; then
				[ "$(e2e_cluster_stat "$l" "shard.$s.route_epoch")" = 1 ] || { ok=; break; }
			fi
		done
		[ -n "$ok" ] && return 0
		sleep 0.2
	done
	return 1
}
wait_leaders || fail "not every shard elected a leader"
log "leaders: oms 1: node $(leader_of 1), me 2: node $(leader_of 2), oms 3: node $(leader_of 3), me 4: node $(leader_of 4)"

ip netns exec "$NS_C" "$OMSLOAD" --host "$NET.11" --users 120 --first-user 1000 \
	--rate 600 --seconds 10 --seed 21 --symbols 2 --mid 100 --inflight 128 \
	--drain-ms 15000 >"$TMP/trade.log" 2>&1 &
trade_pid=$!
sleep 4
ip netns exec "$NS_C" "$OMSLOAD" --host "$NET.12" --users 400 --first-user 5000 \
	--rate 1 --seconds 1 --seed 22 --symbols 2 --mid 100 --drain-ms 15000 \
	>"$TMP/deposit.log" 2>&1 &
deposit_pid=$!
sleep 0.3
e2e_cluster_stat 1 shard.1.commit >/dev/null
log "kill -9 all three nodes (pids ${NODE_PIDS[*]}); node 1: oms commit $(awk '$1 == "shard.1.commit" { print $2 }' "$TMP/1/stats"), file log entries $(awk '$1 == "shard.1.flog_entries" { print $2 }' "$TMP/1/stats")"
kill -KILL "${NODE_PIDS[1]}" "${NODE_PIDS[2]}" "${NODE_PIDS[3]}"
for i in 1 2 3; do wait "${NODE_PIDS[$i]}" 2>/dev/null || true; done
for i in 1 2 3; do
	mv "$TMP/$i/omsd.log" "$TMP/$i/omsd.log.before"
	e2e_cluster_start "$i" "$TMP/$i/omsd.ini"
done
log "restarted from the data directories: ${NODE_PIDS[*]}"
for i in 1 2 3; do
	grep -q "refusing\|torn tail" "$TMP/$i/omsd.log" && grep "refusing\|torn tail" "$TMP/$i/omsd.log" | sed 's/^/    /'
	log "node $i recovered $(e2e_cluster_stat "$i" shard.1.flog_boot_entries) + $(awk '$1 == "shard.2.flog_boot_entries" { print $2 }' "$TMP/$i/stats") + $(awk '$1 == "shard.3.flog_boot_entries" { print $2 }' "$TMP/$i/stats") + $(awk '$1 == "shard.4.flog_boot_entries" { print $2 }' "$TMP/$i/stats") entries from its file logs"
done
wait_leaders || fail "not every shard elected a leader after the restart"
log "leaders after the restart: oms 1: node $(leader_of 1), me 2: node $(leader_of 2), oms 3: node $(leader_of 3), me 4: node $(leader_of 4)"

rc=0
wait "$trade_pid" || rc=$?
sed 's/^/    trade: /' "$TMP/trade.log"
[ "$rc" -eq 0 ] || fail "trade: omsload exit $rc"
rc=0
wait "$deposit_pid" || rc=$?
sed 's/^/    deposit: /' "$TMP/deposit.log"
[ "$rc" -eq 0 ] || fail "deposit: omsload exit $rc"

log "quiescing: every replica must reach its leader's commit"
e2e_quiesce 100 1 2 3 4
sleep 0.5 # the published aggregates refresh every 200 ms

# The clients' view.
grep -q "^deposits: sent=240 ok=240 refused=0 lost=0" "$TMP/trade.log" ||
	fail "trade: the funding before the load did not complete: $(grep '^deposits: ' "$TMP/trade.log")"
read -r dsent dok dref dlost < <(sed -nE \
	's/^deposits: sent=([0-9]+) ok=([0-9]+) refused=([0-9]+) lost=([0-9]+).*/\1 \2 \3 \4/p' \
	"$TMP/deposit.log")
[ "$dsent" = 800 ] || fail "deposit: sent $dsent deposits, want 800"
[ "$dref" = 0 ] || fail "deposit: $dref deposits refused"
ledger=$(grep "^ledger: " "$TMP/trade.log") || fail "trade: no ledger line"
read -r acked resting final unrep doubled over gaps filled < <(sed -E \
	's/ledger: acked=([0-9]+) resting=([0-9]+) final=([0-9]+) unreported=([0-9]+) doubled=([0-9]+) overfilled=([0-9]+) seq_gaps=([0-9]+) seq_filled=([0-9]+) .*/\1 \2 \3 \4 \5 \6 \7 \8/' \
	<<<"$ledger")
[ "$acked" -gt 2000 ] || fail "trade: only $acked orders acknowledged"
[ "$doubled" -eq 0 ] || fail "trade: $doubled orders executed twice or re-numbered"
[ "$over" -eq 0 ] || fail "trade: $over orders filled beyond their quantity"
[ "$unrep" -le $((gaps - filled)) ] ||
	fail "trade: $unrep acknowledged orders unreported, $((gaps - filled)) open sequence gaps"

# Every resident user on every replica, with balances: both OMS shards' resident sets paged
# (e2e_users_pages; the money check below needs every trading user resident, and a deposit
# user not resident holds nothing).
for i in 1 2 3; do
	e2e_users_pages "$TMP/$i/omsd.sock" "$TMP/users.$i.json" 1 3
done
# The cluster's view, replica by replica.
want_book=
for i in 1 2 3; do
	e2e_cluster_stat "$i" shard.1.role >/dev/null
	st() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/$i/stats"; }
	book=$(($(st shard.2.resting) + $(st shard.4.resting)))
	sums=()
	for a in 1 2; do
		sums+=("$(($(st shard.1.asset.$a.sum) + $(st shard.3.asset.$a.sum)))")
	done
	log "node $i: book $book (me 2: $(st shard.2.resting), me 4: $(st shard.4.resting)), sagas $(st shard.1.inflight)+$(st shard.3.inflight), base ${sums[0]}, quote ${sums[1]}, fees $(($(st shard.1.asset.1.fees) + $(st shard.3.asset.1.fees)))/$(($(st shard.1.asset.2.fees) + $(st shard.3.asset.2.fees)))"
	# Every order the ledger says rests is in a book, except those whose final report is
	# among the messages the client never received (open sequence gaps: a report lost with
	# the killed leader, not re-sent — report replay is open work on issue 16); beyond
	# those, only orders whose reports the client never saw (unreported) may rest.
	open_gaps=$((gaps - filled))
	[ "$book" -ge $((resting - open_gaps)) ] && [ "$book" -le $((resting + unrep)) ] ||
		fail "node $i: the books rest $book orders, the ledger $resting (+ $unrep unreported, $open_gaps open sequence gaps)"
	[ -z "$want_book" ] || [ "$book" = "$want_book" ] || fail "node $i: book $book, another replica $want_book"
	want_book=$book
	"$PY" - "$TMP/users.$i.json" "${sums[0]}" "${sums[1]}" \
		"$(($(st shard.1.asset.1.fees) + $(st shard.3.asset.1.fees)))" \
		"$(($(st shard.1.asset.2.fees) + $(st shard.3.asset.2.fees)))" "$dok" \
		>"$TMP/money.$i" <<'PYEOF' || { cat "$TMP/money.$i"; fail "node $i: money"; }
import json, sys
path = sys.argv[1]
sums = {1: int(sys.argv[2]), 2: int(sys.argv[3])}
fees = {1: int(sys.argv[4]), 2: int(sys.argv[5])}
acked_deposits = int(sys.argv[6])
unit = {1: 10**9, 2: 10**12}
held = {}  # user -> {asset: total}
def walk(x):
    if isinstance(x, dict):
        if "balances" in x and x.get("status") == "resident":
            u = x["user"]
            if u in held:
                sys.exit("user %d resident on two OMS shards" % u)
            held[u] = {b["asset"]: b["total"] for b in x["balances"]}
        for v in x.values():
            walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
for line in open(path):
    if line.strip():
        walk(json.loads(line))
# Trading users: funded before the load, all acknowledged: both assets, traded.
traders = [u for u in range(1000, 1120)]
missing = [u for u in traders if u not in held]
if missing:
    sys.exit("trading users not resident: %s" % missing[:10])
# Deposit users: each asset 0 or exactly one deposit, never two.
dep = {1: 0, 2: 0}
for u in range(5000, 5400):
    for a in (1, 2):
        t = held.get(u, {}).get(a, 0)
        if t not in (0, unit[a]):
            sys.exit("user %d holds %d of asset %d: not 0 or one deposit of %d" % (u, t, a, unit[a]))
        dep[a] += t // unit[a]
if dep[1] + dep[2] < acked_deposits:
    sys.exit("%d deposits held, %d were acknowledged" % (dep[1] + dep[2], acked_deposits))
for a in (1, 2):
    users = sum(h.get(a, 0) for h in held.values())
    want = (120 + dep[a]) * unit[a]
    if users + fees[a] != want or sums[a] != want:
        sys.exit("asset %d: users hold %d + fees %d = %d, OMS sums %d, deposited %d"
                 % (a, users, fees[a], users + fees[a], sums[a], want))
print("money: %d users queried; per asset users + fees = OMS sums = deposits "
      "(base %d, quote %d); deposit run: %d + %d deposits held, %d acknowledged"
      % (len(held), sums[1], sums[2], dep[1], dep[2], acked_deposits))
PYEOF
	sed 's/^/    /' "$TMP/money.$i"
done
log "PASS"

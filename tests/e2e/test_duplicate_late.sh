#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal (issue 15, e2e_duplicate_late): a SubmitToME and a deposit re-sent after completion
# and after 1,000 newer requests of the same user are answered from dedup, not re-executed;
# the deposit also after the user was evicted and re-hydrated, when only the transfers table
# still knows it (docs/oms.md, "Transfers for their lifetime").
# Method: a throwaway PostgreSQL, omsd with the persister and [limits] dedup_per_user = 1100
# (the clientOrderId window the order's guarantee needs while the user is resident; its
# documented guarantee after an eviction is WIRE_RECENT_MAX = 16, docs/me-contract.md).
# e2e_dup.py a: deposit 1,000,000; an order rests and is cancelled (CANCELLED, done); 995 orders NAKed
# UNKNOWN_SYMBOL and 5 more deposits; the deposit and the order re-sent: the original answer
# (total included), the original orderId, no new report. Balance via omsctl users show:
# credited once. Then omsctl users evict; the transfers row is in PostgreSQL with its
# amount and total; e2e_dup.py b: 1,100 newer requests (the first hydrates the user again,
# the deposit among the 16 entries that came back; the rest push it out of the window), the
# deposit re-sent: answered from the database (a TRANSFER_LOOKUP found it), balance still
# credited once; the order re-sent: NAK STALE_REQUEST (its id is below the clientOrderId
# floor the row carried back, accounts.cl_ord_floor), nothing executed.
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
PGCTL=$E2E_DIR/../../deploy/pg/pgctl
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
[ -x "$PGBIN/initdb" ] || { echo "SKIP: no PostgreSQL in $PGBIN"; exit 77; }
e2e_init odl 27
PG_DIR=$(mktemp -d /tmp/omsd-e2e-pg.XXXXXX)
chmod 0755 "$PG_DIR"
e2e_cleanup_hook() { "$PGCTL" stop "$PG_DIR/pg" >/dev/null 2>&1; rm -rf "$PG_DIR"; }
CONNINFO=$("$PGCTL" start "$PG_DIR/pg" $((56000 + $$ % 1000)) 2>"$PG_DIR/pgctl.log") ||
	{ cat "$PG_DIR/pgctl.log" >&2; fail "pgctl start"; }
"$PGCTL" accounts "$PG_DIR/pg" 1 20000 >/dev/null || fail "cannot open the accounts" # docs/security.md
log "PostgreSQL up: $CONNINFO"
psql_() { "$PGCTL" psql "$PG_DIR/pg" -tA -c "$1"; }
e2e_net_up
E2E_SERVICE_1=oms E2E_SERVICE_2=me e2e_config "$TMP/omsd.ini" \
	"" "[limits]" "resident_users = 64" "parked_orders = 1024" "inflight_sagas = 1024" \
	"orders = 8192" "log_entries = 65536" "log_mb = 32" "snapshot_mb = 8" \
	"snapshot_entries = 20000" "dedup_per_user = 1100" \
	"" "[timers]" "tick_ms = 10" "bridge_redrive_ms = 200" \
	"" "[routing]" "epoch = 1" "oms_shards = 1" \
	"" "[symbol.1]" "base = 1" "quote = 2" "me_shard = 2" "tick = 1" "lot = 1" "min_qty = 1" \
	"min_notional = 1" "base_unit = 1" "ref_px = 100" "band_bps = 5000" \
	"maker_fee_bps = 2" "taker_fee_bps = 7" \
	"" "[persister]" "cpu = 1" "idle = sleep" "" "[database]" "conninfo = $CONNINFO"
e2e_start "$TMP/omsd.ini"
log "omsd up (pid $OMSD_PID)"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"
e2e_wait_stat persister.connected 1 || fail "persister never connected"
SOCK=$TMP/omsd.sock
USER=3001

# quote_total: the user's quote balance as the OMS leader holds it (users show).
quote_total() {
	"$OMSCTL" --json --socket "$SOCK" users show --user "$USER" | "$PY" -c '
import json, sys
def walk(x):
    if isinstance(x, dict):
        if "balances" in x:
            for b in x["balances"]:
                if b["asset"] == 2:
                    print(b["total"], b["reserved"], x["status"])
                    sys.exit(0)
        for v in x.values():
            walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
walk(json.load(sys.stdin))
print("none none", "absent")'
}

ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_dup.py" a --nodes "$NODE_IP" --state "$TMP/dup.json" ||
	fail "phase a"
# 1,000,000 + the five newer deposits 10..14, once each; nothing reserved (nothing rests).
want=$((1000000 + 10 + 11 + 12 + 13 + 14))
read -r total reserved status < <(quote_total)
log "user $USER: quote total $total reserved $reserved ($status)"
[ "$total" = "$want" ] || fail "quote total $total, want $want (a deposit applied twice?)"
[ "$reserved" = 0 ] || fail "quote reserved $reserved: the re-sent order was executed again"

"$OMSCTL" --json --socket "$SOCK" users evict --user "$USER" >/dev/null || fail "users evict"
for _ in $(seq 50); do
	read -r _ _ status < <(quote_total)
	[ "$status" = absent ] && break
	sleep 0.2
done
[ "$status" = absent ] || fail "user $USER still $status after users evict"
row=$(psql_ "SELECT asset, amount, reason, total FROM transfers
	WHERE user_id = $USER AND transfer_id = 1000")
log "transfers row of deposit 1000: $row"
[ "$row" = "2|1000000|0|1000000" ] || fail "transfers row of deposit 1000: '$row'"
n=$(psql_ "SELECT count(*) FROM transfers WHERE user_id = $USER")
[ "$n" = 6 ] || fail "$n transfers rows for user $USER, want 6"
acct=$(psql_ "SELECT totals[array_position(assets, 2)], xfer_id_max FROM accounts
	WHERE user_id = $USER")
[ "$acct" = "$want|2004" ] || fail "accounts row: '$acct', want '$want|2004'"
# The clientOrderId floor travelled with the row: the order ids the flush left behind (the
# row carries the newest 16 outcomes) are at or below it, order 1 among them.
floor=$(psql_ "SELECT cl_ord_floor FROM accounts WHERE user_id = $USER")
log "accounts.cl_ord_floor $floor"
[ "${floor:-0}" -ge 1 ] && [ "$floor" -lt 1000 ] || fail "cl_ord_floor '$floor', want 1..999"

ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_dup.py" b --nodes "$NODE_IP" --state "$TMP/dup.json" ||
	fail "phase b"
read -r total reserved status < <(quote_total)
log "user $USER: quote total $total ($status)"
[ "$total" = "$want" ] || fail "quote total $total after the late re-send, want $want"
e2e_stats
found=$(e2e_stat persister.pst.DB_LOOKUP_FOUND)
[ "${found:-0}" -ge 1 ] || fail "persister.pst.DB_LOOKUP_FOUND=$found: the answer did not come \
from the transfers table"
log "lookups found=$found not_found=$(e2e_stat persister.pst.DB_LOOKUP_NOT_FOUND)" \
	"flushes ok=$(e2e_stat persister.pst.DB_FLUSH_OK)"
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: the single-node trading path with a real PostgreSQL behind the persister lcore:
# hydration claims rows, an idle flat user is flushed (version-checked) and released.
# Method: a throwaway PostgreSQL (deploy/pg/pgctl, unix socket), omsd with [persister] and
# [database] conninfo and a short user TTL; run the single-node trading checks
# (tests/e2e/e2e_trade.py single), then wait until the seller (flat after its fill) has
# been flushed: its accounts row has version >= 1, no owner claim, and holds the quote it
# was paid. Before that, while resident, it is written back ([timers] flush_ms, default 1 s,
# shorter than the TTL): the claim is kept then, so the row's version is ahead of the drop's.
source "$(dirname "$0")/lib.sh"
need_root
PGCTL=$E2E_DIR/../../deploy/pg/pgctl
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
[ -x "$PGBIN/initdb" ] || { echo "SKIP: no PostgreSQL in $PGBIN"; exit 77; }
e2e_init oeg 17
PG_DIR=$(mktemp -d /tmp/omsd-e2e-pg.XXXXXX)
chmod 0755 "$PG_DIR"
e2e_cleanup_hook() { "$PGCTL" stop "$PG_DIR/pg" >/dev/null 2>&1; rm -rf "$PG_DIR"; }
CONNINFO=$("$PGCTL" start "$PG_DIR/pg" $((55000 + $$ % 1000)) 2>"$PG_DIR/pgctl.log") ||
	{ cat "$PG_DIR/pgctl.log" >&2; fail "pgctl start"; }
log "PostgreSQL up: $CONNINFO"
# The operator opens the accounts (deploy/pg/accounts); omsd creates none.
"$PGCTL" accounts "$PG_DIR/pg" 1 2000 >/dev/null || fail "cannot open the accounts"
e2e_net_up
e2e_trade_config "$TMP/omsd.ini" "" "[persister]" "cpu = 1" "idle = sleep" "" \
	"[database]" "conninfo = $CONNINFO"
sed -i '/^bridge_redrive_ms/a user_ttl_ms = 1500\nsweep_ms = 200' "$TMP/omsd.ini"
e2e_start "$TMP/omsd.ini"
log "omsd up (pid $OMSD_PID)"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"
e2e_wait_stat persister.connected 1 || fail "persister never connected"

ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_trade.py" single --nodes "$NODE_IP" ||
	fail "trading checks"
# No account from nowhere (docs/security.md): an order and a deposit for a user nobody
# opened are refused UNKNOWN_USER, and no row appears.
ip netns exec "$NS_C" env E2E_DIR="$E2E_DIR" "$PY" - "$NODE_IP" <<'PY' || fail "unknown user checks"
import os, sys
sys.path.insert(0, os.environ["E2E_DIR"])
import e2e_trade as t
c = t.Client([sys.argv[1]])
r = c.order(5000, 1, t.SYM, t.BUY, 100, 1)
t.check(r is not None and r["type"] == t.NAK and r["reason"] == 29,
        "order for unopened user 5000 refused UNKNOWN_USER: %s" % r)
c.send([t.transfer(t.OMS, 5001, 77, t.QUOTE, 10)])
hits = c.wait(lambda m: m["type"] == t.ADMIN_REPLY and m["req_id"] == 77, 10)
t.check(hits and hits[0]["reason"] == 29, "deposit to unopened user 5001 refused: %s" % hits)
PY
[ "$("$PGCTL" psql "$PG_DIR/pg" -tA -c "SELECT count(*) FROM accounts WHERE user_id IN (5000, 5001)")" = 0 ] ||
	fail "an account row appeared for an unopened user"
e2e_stats
unknown=$(e2e_stat persister.pst.DB_HYDRATE_UNKNOWN)
[ "$unknown" -ge 2 ] || fail "persister.pst.DB_HYDRATE_UNKNOWN=$unknown, want >= 2"
log "unopened users refused UNKNOWN_USER ($unknown hydrations answered UNKNOWN), no row created"
new=$(e2e_stat persister.pst.DB_HYDRATE_NEW)
[ "$new" -ge 2 ] || fail "persister.pst.DB_HYDRATE_NEW=$new, want >= 2 (two new users)"

row=
for _ in $(seq 50); do
	row=$("$PGCTL" psql "$PG_DIR/pg" -tA -c \
		"SELECT version, coalesce(owner_shard, -1), assets, totals FROM accounts WHERE user_id = 1001")
	# A write-back (version >= 1, claim kept) comes first; wait for the drop's release.
	case "$row" in 0\|*|*\|1\|*|"") sleep 0.2 ;; *) break ;; esac
done
log "seller's row: $row"
IFS='|' read -r version owner assets totals <<<"$row"
[ "${version:-0}" -ge 1 ] || fail "seller never flushed (row: $row)"
[ "$owner" = -1 ] || fail "seller's claim not released (owner $owner)"
e2e_stats
log "flushes ok=$(e2e_stat persister.pst.DB_FLUSH_OK) releases ok=$(e2e_stat persister.pst.DB_RELEASE_OK) write-backs ok=$(e2e_stat shard.1.oms.writebacks_ok)"
[ "$(e2e_stat shard.1.oms.writebacks_ok)" -ge 1 ] || fail "no write-back while the users were resident"
[ "$version" -ge 2 ] || fail "seller's row: version $version, want >= 2 (written back, then flushed)"
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"

# A database migrated past what this omsd knows is refused at start, naming both versions
# (docs/persist.md, "Schema version"), before the EAL starts.
"$PGCTL" psql "$PG_DIR/pg" -c "INSERT INTO schema_migrations (version) VALUES ('9999_later')" \
	>/dev/null || fail "cannot add a migration row"
rc=0
out=$("$OMSD" -c "$TMP/omsd.ini" -- --file-prefix "$PREFIX-schema" 2>&1) || rc=$?
[ "$rc" -eq 2 ] || fail "omsd started on a newer schema (exit $rc): $(tail -3 <<<"$out")"
grep -q "database schema is at 9999_later, newer than this omsd knows" <<<"$out" ||
	fail "no schema message: $(tail -3 <<<"$out")"
log "newer schema refused: $(grep -o 'database schema is at .*' <<<"$out")"
log "PASS"

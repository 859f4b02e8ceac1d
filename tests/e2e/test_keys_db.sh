#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: API keys in PostgreSQL (docs/security.md): `omsctl keys` adds, lists, rotates and
# revokes them, and a node with [sessions] keys_source = database follows the table without
# a restart — a new key logs on and trades, a rotated key's old secret no longer logs on, a
# revoked key's open session ends at once (LOGOUT KEY_REVOKED) and its logon is refused.
# Method: one omsd with a real PostgreSQL (deploy/pg/pgctl), keys_refresh_ms = 200. omsctl
# keys as the migration role writes the keys (--out files, mode 0600); omsctl order/deposit
# with --key-file logs on and trades; tests/e2e/e2e_session's revoke step holds a session of
# key 3 open while `omsctl keys revoke --key-id 3` runs.
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL}"
[ -n "${E2E_SESSION:-}" ] || { echo "E2E_SESSION not set"; exit 77; }
PGCTL=$E2E_DIR/../../deploy/pg/pgctl
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
[ -x "$PGBIN/initdb" ] || { echo "SKIP: no PostgreSQL in $PGBIN"; exit 77; }
e2e_init okd 18
PG_DIR=$(mktemp -d /tmp/omsd-e2e-keys.XXXXXX)
chmod 0755 "$PG_DIR"
e2e_cleanup_hook() { "$PGCTL" stop "$PG_DIR/pg" >/dev/null 2>&1; rm -rf "$PG_DIR"; }
CONNINFO=$("$PGCTL" start "$PG_DIR/pg" $((54000 + $$ % 1000)) 2>"$PG_DIR/pgctl.log") ||
	{ cat "$PG_DIR/pgctl.log" >&2; fail "pgctl start"; }
ADMIN=${CONNINFO/user=omsd/user=omsd_migrator}
# Accounts are the operator's to open (docs/security.md): omsctl users add, as the owner.
"$OMSCTL" users add --user 1 --last 100 --db "$ADMIN" | grep -q "^users 1..100: 100 opened" ||
	fail "omsctl users add"
"$OMSCTL" users add --user 5 --last 6 --db "$ADMIN" | grep -q ": 0 opened, 2 were open" ||
	fail "omsctl users add is not idempotent"
if "$OMSCTL" users add --user 7 --db "$CONNINFO" >/dev/null 2>&1; then
	fail "the omsd role opened an account"
fi
keys() { "$OMSCTL" keys "$@" --db "$ADMIN"; }

keys add --key-id 1 --perms trade,transfer,read --users 1-10 --out "$TMP/k1" ||
	fail "keys add 1"
keys add --key-id 3 --perms trade --users 7 --out "$TMP/k3" || fail "keys add 3"
[ "$(stat -c %a "$TMP/k1")" = 600 ] || fail "the key file is not 0600"
if keys add --perms sell --users 1 >/dev/null 2>"$TMP/err"; then fail "bad perms accepted"; fi
grep -q "perms" "$TMP/err" || fail "bad perms: $(cat "$TMP/err")"
if keys add --key-id 1 --perms all --users '*' >/dev/null 2>&1; then fail "key 1 added twice"; fi
keys list >"$TMP/list" || fail "keys list"
grep -q "^1 .*trade,transfer,read" "$TMP/list" || fail "keys list: $(cat "$TMP/list")"
if grep -qF "$(awk '{print $2}' "$TMP/k1")" "$TMP/list"; then fail "keys list shows a secret"; fi
log "omsctl keys: added 1 and 3 (mode 0600 files), list shows no secret, bad input refused"

export E2E_KEYS_SOURCE=database
e2e_net_up
e2e_trade_config "$TMP/omsd.ini" "" "[persister]" "cpu = 1" "idle = sleep" "" \
	"[database]" "conninfo = $CONNINFO"
e2e_start "$TMP/omsd.ini"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"
grep -q "API keys: 2 from the database" "$OMSD_LOG" || fail "keys not read at start"

ctl() { ip netns exec "$NS_C" "$OMSCTL" --host "$NODE_IP" --wait-ms 5000 "$@"; }
ctl deposit --user 1 --asset 2 --amount 100000 --key-file "$TMP/k1" >/dev/null ||
	fail "deposit with key 1"
ctl order new --user 1 --symbol 1 --side buy --type limit --tif gtc --px 100 --qty 1 \
	--key-file "$TMP/k1" >"$TMP/o1" || fail "order with key 1: $(cat "$TMP/o1")"
log "key 1 logged on, deposited and ordered"

# A key added while the node runs is picked up without a restart.
keys add --key-id 2 --perms trade,read --users 1-10 --out "$TMP/k2" || fail "keys add 2"
ok=0
for _ in $(seq 30); do
	if ctl order new --user 1 --symbol 1 --side buy --type limit --tif gtc --px 99 --qty 1 \
		--key-file "$TMP/k2" >/dev/null 2>&1; then ok=1; break; fi
	sleep 0.2
done
[ "$ok" = 1 ] || fail "key 2 (added live) never logged on"
log "key 2, added while the node runs, logs on and trades"

# Rotation: the old secret is refused, the new one logs on.
cp "$TMP/k2" "$TMP/k2.old"
keys rotate --key-id 2 --out "$TMP/k2.new" || fail "keys rotate"
sleep 1
rc=0
ctl order new --user 1 --symbol 1 --side buy --type limit --tif gtc --px 98 --qty 1 \
	--key-file "$TMP/k2.old" >"$TMP/old" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "BAD_SIGNATURE" "$TMP/old" || fail "old secret after rotate ($rc): $(cat "$TMP/old")"
ctl order new --user 1 --symbol 1 --side buy --type limit --tif gtc --px 98 --qty 1 \
	--key-file "$TMP/k2.new" >/dev/null || fail "the rotated key does not log on"
log "key 2 rotated: the old secret is refused BAD_SIGNATURE, the new one trades"

# Revocation ends an open session at once, and refuses the next logon.
ip netns exec "$NS_C" "$E2E_SESSION" --host "$NODE_IP" --port 7400 --keys "$TMP/k3" revoke \
	>"$TMP/revoke.out" 2>&1 &
rpid=$!
for _ in $(seq 50); do grep -q '^ready' "$TMP/revoke.out" && break; sleep 0.1; done
grep -q '^ready' "$TMP/revoke.out" || { cat "$TMP/revoke.out"; fail "key 3 never logged on"; }
keys revoke --key-id 3 >/dev/null || fail "keys revoke"
rrc=0
wait "$rpid" || rrc=$?
grep -v '^ready' "$TMP/revoke.out"
[ "$rrc" -eq 0 ] || fail "revocation checks"
keys list --json | grep -q '"key_id":3,.*"revoked":"[0-9]' || fail "keys list: 3 not revoked"
keys list --json | grep -q '"key_id":1,.*"revoked":""' || fail "keys list: 1 revoked"
e2e_stats
[ "$(e2e_stat gateway.sessions.ended_revoked)" -ge 1 ] || fail "no session ended revoked"
log "key 3 revoked in the table: its open session ended (LOGOUT KEY_REVOKED), logon refused"
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

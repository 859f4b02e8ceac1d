#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: the node's control socket serves omsctl on the main lcore: status shows the
# shards and their Raft roles, metrics is Prometheus text; symbols, routes, users, kill,
# snapshot work on one node (views from the shard lcores, mutations answered after commit);
# an unknown command, bad arguments and a malformed request get clear errors and change
# nothing; the socket is mode 0660 and is removed at exit.
# Method: one trading node (OMS shard 1 + ME shard 2); omsctl for every command family; orders
# from the client namespace (e2e_mgmt.py) NAKed HALTED / KILLED and ACKed after resume;
# a raw malformed line sent with python; then SIGTERM.
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
e2e_init oem 18
e2e_net_up
# Shards 3 (OMS, not in the routing yet) and 4 (ME, no symbols) are there to scale to and
# move to.
e2e_trade_config "$TMP/omsd.ini" "" "[shard.3]" "service = oms" "members = 1" "cpu = 0" \
	"idle = sleep" "" "[shard.4]" "service = me" "members = 1" "cpu = 1" "idle = sleep"
e2e_start "$TMP/omsd.ini"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"
SOCK=$TMP/omsd.sock
[ -S "$SOCK" ] || fail "no control socket at $SOCK"
[ "$(stat -c %a "$SOCK")" = 660 ] || fail "socket mode $(stat -c %a "$SOCK"), want 660"

json=$("$OMSCTL" --socket "$SOCK" --json status) || fail "omsctl status: exit $?"
log "status: $json"
for want in '"node":1' '"shard":1' '"shard":2' '"role":"leader"' '"service":"oms"' \
	'"service":"me"' '"route_epoch":1'; do
	grep -qF "$want" <<<"$json" || fail "status lacks $want"
done
"$OMSCTL" --socket "$SOCK" status >"$TMP/status.txt" || fail "omsctl status (table): exit $?"

"$OMSCTL" --socket "$SOCK" metrics >"$TMP/metrics.txt" || fail "omsctl metrics: exit $?"
grep -qE '^omsd_shard_commit\{node="1",shard="1"\} [0-9]+$' "$TMP/metrics.txt" ||
	fail "metrics lack omsd_shard_commit for shard 1: $(head -5 "$TMP/metrics.txt")"
log "metrics: $(wc -l <"$TMP/metrics.txt") samples"

ctl() { "$OMSCTL" --socket "$SOCK" "$@"; }
# ctl_rc WANT ARGS...: run omsctl, keep its output in $OUT, check its exit code.
ctl_rc() {
	local want=$1 rc=0
	shift
	OUT=$(ctl "$@" 2>&1) || rc=$?
	[ "$rc" -eq "$want" ] || fail "omsctl $*: exit $rc, want $want: $OUT"
}

# sym_status SHARD SYMBOL: the status of that row in the symbols list $OUT ("none": no row).
sym_status() {
	"$PY" -c 'import json, sys
rows = json.loads(sys.argv[1])["result"]["symbols"]
print(next((r["status"] for r in rows if r["shard"] == int(sys.argv[2]) and
            r["symbol"] == int(sys.argv[3])), "none"))' "$OUT" "$1" "$2"
}

# Read-only views, served by the shard lcores.
ctl_rc 0 --json routes show
grep -qF '"epoch":1' <<<"$OUT" || fail "routes show lacks epoch 1: $OUT"
ctl_rc 0 --json symbols list
[ "$(sym_status 1 1)/$(sym_status 2 1)" = trading/trading ] ||
	fail "symbols list: want symbol 1 trading on the OMS and the ME shard: $OUT"
ctl_rc 0 symbols list
grep -q "trading" <<<"$OUT" || fail "symbols list table: $OUT"

# Refusals change nothing: unknown command, missing and unknown arguments, bad values.
ctl_rc 1 frobnicate
grep -q "unknown_command" <<<"$OUT" || fail "no unknown_command: $OUT"
ctl_rc 1 symbols halt
grep -q "bad_argument: --symbol is required" <<<"$OUT" || fail "missing --symbol: $OUT"
ctl_rc 1 symbols halt --symbol 1 --bogus 3
grep -q "bad_argument: unknown argument 'bogus'" <<<"$OUT" || fail "unknown arg: $OUT"
ctl_rc 1 symbols halt --symbol abc
grep -q "bad_argument" <<<"$OUT" || fail "non-numeric symbol: $OUT"
ctl_rc 1 symbols halt --symbol 77
grep -q "unknown_symbol" <<<"$OUT" || fail "unknown symbol: $OUT"
ctl_rc 0 --json symbols list
grep -qF '"status":"halted"' <<<"$OUT" && fail "a refused request changed state: $OUT"

# A halt goes through both logs and is answered once applied; orders are then NAKed.
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_mgmt.py" fund --nodes "$NODE_IP" >/dev/null ||
	fail "deposits"
ctl_rc 0 --json symbols halt --symbol 1
log "halt: $OUT"
# ME shard 2 owns it; OMS shard 1 routes, OMS shard 3 is hosted: three entries.
[ "$(grep -o '"status":"ok"' <<<"$OUT" | wc -l)" = 3 ] || fail "halt not ok on 3 shards: $OUT"
ctl_rc 0 --json symbols list
[ "$(sym_status 1 1)/$(sym_status 2 1)/$(sym_status 3 1)" = halted/halted/halted ] ||
	fail "not halted: $OUT"
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_mgmt.py" expect --nodes "$NODE_IP" \
	--user 1002 --cl 1 --want HALTED || fail "order on a halted symbol"
ctl_rc 0 symbols resume --symbol 1
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_mgmt.py" expect --nodes "$NODE_IP" \
	--user 1002 --cl 2 --want ack || fail "order after resume"
ctl_rc 0 --json kill user --user 1002
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_mgmt.py" expect --nodes "$NODE_IP" \
	--user 1002 --cl 3 --want KILLED || fail "order of a killed user"
ctl_rc 0 kill user --user 1002 --release
ctl_rc 0 --json users show --user 1002
grep -qF '"status":"resident"' <<<"$OUT" || fail "users show: $OUT"
ctl_rc 0 --json users show --limit 10
grep -qF '"user":1002,"status":"resident"' <<<"$OUT" || fail "resident set: $OUT"
ctl_rc 1 users show --user 1002 --limit 3
grep -q "bad_argument" <<<"$OUT" || fail "users show --user with --limit: $OUT"
# A symbol kill-switch: orders NAKed KILLED until released.
ctl_rc 0 --json kill symbol --symbol 1
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_mgmt.py" expect --nodes "$NODE_IP" \
	--user 1001 --cl 1 --side sell --want KILLED || fail "order on a killed symbol"
ctl_rc 0 kill symbol --symbol 1 --release
ctl_rc 0 --json symbols list
grep -qF '"killed":true' <<<"$OUT" && fail "kill symbol not released: $OUT"
ctl_rc 0 --json snapshot
grep -qF '"status":"ok"' <<<"$OUT" || fail "snapshot: $OUT"
ctl_rc 1 transfer-leader --shard 1 --to 9
grep -q "bad_argument" <<<"$OUT" || fail "transfer to a non-member: $OUT"
ctl_rc 0 --json routes pin --user 1002 --shard 1
ctl_rc 0 --json routes show
grep -qF '"epoch":2' <<<"$OUT" && grep -qF '"user":1002' <<<"$OUT" || fail "pin: $OUT"
ctl_rc 0 routes unpin --user 1002
# The user is resident on OMS shard 1: evict is ok there (NOT_FOUND on shard 3 is not an
# error); an unknown user is not_found everywhere.
ctl_rc 0 --json users evict --user 1002
ctl_rc 1 --json users migrate --user 999999
grep -qF "NOT_FOUND" <<<"$OUT" || fail "migrate of an unknown user: $OUT"
ctl_rc 0 --json routes set --active 1
grep -qF '"value":4' <<<"$OUT" || fail "routes set: want epoch 4 (pin 2, unpin 3): $OUT"
ctl_rc 1 routes set --active 1 --receiving 1
grep -q "both active and receiving" <<<"$OUT" || fail "routes set overlap: $OUT"
# A shard this node does not host cannot be proposed to here: refused, nothing changes.
ctl_rc 1 --json shards scale --shard 5
grep -qF '"hosted":false' <<<"$OUT" || fail "scale to an unhosted shard: $OUT"
ctl_rc 0 --json routes show
grep -qF '"epoch":4' <<<"$OUT" || fail "a refused scale changed the routing: $OUT"
# Scale out to OMS shard 3: receiving (epoch 5) on shards 1 and 3, then active (epoch 6).
ctl_rc 0 --json shards scale --shard 3
log "scale: $OUT"
[ "$(grep -o '"status":"ok"' <<<"$OUT" | wc -l)" = 4 ] || fail "scale: want 2 steps x 2 shards: $OUT"
ctl_rc 0 --json routes show
[ "$(grep -oF '"epoch":6' <<<"$OUT" | wc -l)" = 2 ] || fail "scale: epoch 6 on shards 1 and 3: $OUT"
[ "$(grep -oF '{"shard":3,"state":"active"}' <<<"$OUT" | wc -l)" = 2 ] ||
	fail "scale: shard 3 active on both: $OUT"
# The gateway follows the applied routing: a user pinned to shard 3 reaches shard 3 at once
# (a new account there: INSUFFICIENT_FUNDS), where the configured routing (shard 1 only)
# would have got NOT_OWNER from shard 1.
ctl_rc 0 routes pin --user 7777 --shard 3
ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_mgmt.py" expect --nodes "$NODE_IP" \
	--user 7777 --cl 1 --want INSUFFICIENT_FUNDS || fail "gateway did not route by the pin"
# A fenced move of one user to a named shard: a pin under a new routing epoch on every OMS
# shard; both replicas then name shard 3 as the owner (shard 1 drains the user).
ctl_rc 1 users migrate --user 1001 --to 2
grep -q "bad_argument: shard 2 is not an OMS shard" <<<"$OUT" || fail "migrate to an ME shard: $OUT"
ctl_rc 0 --json users migrate --user 1001 --to 3
[ "$(grep -o '"status":"ok"' <<<"$OUT" | wc -l)" = 2 ] || fail "migrate --to: $OUT"
ctl_rc 0 --json users show --user 1001
[ "$(grep -oF '"owner":3' <<<"$OUT" | wc -l)" = 2 ] || fail "migrate --to: owner not 3: $OUT"
ctl_rc 1 routes set --active 1,2
grep -q "bad_argument: shard 2 is not an OMS shard" <<<"$OUT" || fail "ME shard in routes: $OUT"
ctl_rc 1 symbols add --symbol 5 --base 3 --quote 2 --me-shard 1 --tick 1 --lot 1 --base-unit 1
grep -q "bad_argument: shard 1 is not an ME shard" <<<"$OUT" || fail "OMS shard as ME: $OUT"
# Symbols: add symbol 2 on ME shard 2, then move it (empty book) to ME shard 4.
ctl_rc 1 symbols add --symbol 2 --base 3 --quote 2 --me-shard 2 --tick 3 --lot 1 --base-unit 2
grep -q "rejected" <<<"$OUT" || fail "a grid the ME refuses (tick*lot % base_unit): $OUT"
ctl_rc 0 --json symbols list
grep -qF '"symbol":2' <<<"$OUT" && fail "a refused add reached a shard: $OUT"
ctl_rc 0 --json symbols add --symbol 2 --base 3 --quote 2 --me-shard 2 --tick 1 --lot 1 \
	--base-unit 1 --taker-fee-bps 5
ctl_rc 0 --json symbols move --symbol 2 --from 2 --to 4
log "move: $OUT"
ctl_rc 0 --json symbols list
"$PY" - "$OUT" <<'PY' || fail "after the move: $OUT"
import json, sys
rows = [r for r in json.loads(sys.argv[1])["result"]["symbols"] if r["symbol"] == 2]
by = {(r["shard"]): r for r in rows}
assert by[4]["me_shard"] == 4 and by[2]["me_shard"] == 4, rows      # ME shards: 4 owns it
assert all(by[s]["me_shard"] == 4 and by[s]["taker_fee_bps"] == 5 for s in (1, 3)), rows
PY
ctl_rc 0 symbols halt --symbol 2 --me-shard 4
ctl_rc 0 --json symbols list
grep -qF '"shard":4,"service":"me","symbol":2,"status":"halted"' <<<"$OUT" ||
	fail "halt of a moved symbol: $OUT"
log "control commands ok"

bad=$("$PY" - "$SOCK" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b'{"cmd": "status", \n')
print(s.recv(4096).decode().strip())
PY
) || fail "raw request"
grep -q '"error":"bad_json"' <<<"$bad" || fail "malformed request answered: $bad"
# Still serving after the bad line.
"$OMSCTL" --socket "$SOCK" --json status >/dev/null || fail "socket dead after a bad request"

e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
[ ! -e "$SOCK" ] || fail "socket left behind at exit"
log "PASS"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: the node's control socket (issue 9) serves omsctl on the main lcore: status shows the
# shards and their Raft roles, metrics is Prometheus text, a command the node does not serve
# and a malformed request get clear errors and change nothing, the socket is mode 0660 and
# is removed at exit.
# Method: one trading node (OMS shard 1 + ME shard 2); omsctl status/metrics/routes show;
# a raw malformed line sent with python; then SIGTERM.
source "$(dirname "$0")/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
e2e_init oem 18
e2e_net_up
e2e_trade_config "$TMP/omsd.ini"
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

rc=0
"$OMSCTL" --socket "$SOCK" routes show >"$TMP/unknown.txt" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "a command the node does not serve: exit $rc, want 1"
grep -q "unknown_command" "$TMP/unknown.txt" || fail "no unknown_command: $(cat "$TMP/unknown.txt")"

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

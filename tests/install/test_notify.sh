#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: omsd as systemd runs it (deploy/systemd/omsd.service; this container has no systemd
# to start the unit, so the test plays its part): Type=notify readiness only once the shards
# have a leader, STATUS= lines, the watchdog, STOPPING=1 on SIGTERM, the log written once
# with priorities when stderr is the journal, the memory-mode guard (--service: a second
# start exits 3 until the mark is removed), and a node run as an unprivileged user with
# exactly the unit's AmbientCapabilities and NoNewPrivileges.
# Method: a single trading node (OMS shard 1 + ME shard 2) in a network namespace on a veth
# (tests/e2e/lib.sh), with NOTIFY_SOCKET on a unix datagram listener (notify_listen.py) that
# logs every notification; WATCHDOG_USEC and JOURNAL_STREAM set as systemd sets them. Then
# the same node in memory mode with --service, started twice; then in durable mode as uid
# 65534 through setpriv with the unit file's capabilities.
source "$(dirname "$0")/../e2e/lib.sh"
need_root
: "${OMSCTL:?set OMSCTL to the omsctl binary}"
: "${OMSD_SRC:?set OMSD_SRC to the source tree}"
e2e_init oin 88
e2e_net_up
OMSD_REAL=$OMSD
NSOCK=$TMP/notify.sock
NLOG=$TMP/notify.log
: >"$NLOG"
"$PY" "$(dirname "$0")/notify_listen.py" "$NSOCK" "$NLOG" &
LISTEN_PID=$!
e2e_cleanup_hook() { kill "$LISTEN_PID" 2>/dev/null || true; }
for _ in $(seq 50); do [ -S "$NSOCK" ] && break; sleep 0.1; done
[ -S "$NSOCK" ] || fail "notification listener did not bind $NSOCK"

# notify_wait PATTERN COUNT: until COUNT notifications match PATTERN (20 s).
notify_wait() {
	for _ in $(seq 200); do
		[ "$(grep -c -- "$1" "$NLOG")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
# The line number of the COUNT-th notification matching PATTERN.
notify_line() { grep -n -- "$1" "$NLOG" | sed -n "${2}p" | cut -d: -f1; }

# --- 1. Durable node: readiness, status, watchdog, journal, stopping -------------------
e2e_trade_config "$TMP/omsd.ini"
: >"$OMSD_LOG"
export NOTIFY_SOCKET=$NSOCK WATCHDOG_USEC=400000
JOURNAL_STREAM=$(stat -c '%d:%i' "$OMSD_LOG")
export JOURNAL_STREAM
e2e_start "$TMP/omsd.ini"
unset JOURNAL_STREAM
notify_wait 'READY=1' 1 || fail "no READY=1 within 20 s: $(cat "$NLOG")"
ready=$(grep 'READY=1' "$NLOG")
log "notified: ${ready#* }"
[ "$(notify_line 'STATUS=starting' 1)" = 1 ] || fail "the first notification is not STATUS=starting"
[ "$(notify_line 'READY=1' 1)" -gt "$(notify_line 'STATUS=waiting for leaders' 1)" ] ||
	fail "READY=1 came before 'waiting for leaders'"
for want in 'STATUS=ready: 2 shards' 'shard 1 led by node 1' 'shard 2 led by node 1'; do
	grep -qF -- "$want" <<<"$ready" || fail "READY=1 without '$want': $ready"
done
# Ready means what the shards publish: a leader, the term applied.
e2e_stats
for s in 1 2; do
	[ "$(e2e_stat "shard.$s.is_leader")" = 1 ] || fail "shard $s: READY=1 but no leader"
	[ "$(e2e_stat "shard.$s.ready")" = 1 ] || fail "shard $s: READY=1 but not ready"
done
"$OMSCTL" --socket "$TMP/omsd.sock" status >/dev/null || fail "omsctl status after READY=1"
grep -q '^<6>omsd: service ready: every hosted shard has a leader' "$OMSD_LOG" ||
	fail "no '<6>omsd: service ready' line in the log (journal priorities)"
grep -q '^<4>omsd: ' "$OMSD_LOG" || fail "no warning logged with priority 4"
if grep -v '^<[0-7]>' "$OMSD_LOG" | grep -q 'omsd: '; then
	fail "log lines without a priority prefix: $(grep -v '^<[0-7]>' "$OMSD_LOG" | grep 'omsd: ' | head -3)"
fi
grep -q 'systemd watchdog: 400 ms' "$OMSD_LOG" || fail "the watchdog was not armed"
sleep 1
dogs=$(grep -c 'WATCHDOG=1' "$NLOG")
[ "$dogs" -ge 3 ] || fail "WATCHDOG=1 sent $dogs times in over a second at 200 ms"
log "watchdog: $dogs pings"
e2e_stop TERM
[ "$STOP_RC" = 0 ] || fail "omsd exited $STOP_RC on SIGTERM"
notify_wait 'STOPPING=1' 1 || fail "no STOPPING=1 on SIGTERM"
[ "$(notify_line 'STOPPING=1' 1)" -gt "$(notify_line 'READY=1' 1)" ] || fail "STOPPING=1 before READY=1"
unset WATCHDOG_USEC
log "durable node: READY=1 after its leaders, watchdog, STOPPING=1, journal priorities"

# --- 2. Memory mode under --service: no second start ---------------------------------------
cat >"$TMP/omsd-service" <<SH
#!/bin/sh
exec "$OMSD_REAL" --service "\$@"
SH
chmod 755 "$TMP/omsd-service"
e2e_trade_config "$TMP/mem.ini" "" "[durability]" "mode = memory"
sed -i "s|^data_dir = .*|data_dir = $TMP/mem|" "$TMP/mem.ini"
OMSD=$TMP/omsd-service
e2e_start "$TMP/mem.ini"
notify_wait 'READY=1' 2 || fail "memory mode: no READY=1"
mark=$TMP/mem/memory-run
[ -f "$mark" ] || fail "memory mode under --service: no $mark"
grep -q '^node 1, pid [0-9]*, started ' "$mark" || fail "mark: $(head -1 "$mark")"
e2e_stop TERM
[ "$STOP_RC" = 0 ] || fail "memory mode: exit $STOP_RC on SIGTERM"
rc=0
ip netns exec "$NS_N" "$OMSD" -c "$TMP/mem.ini" -- --file-prefix "$PREFIX" \
	>"$TMP/refused.log" 2>&1 || rc=$?
[ "$rc" = 3 ] || fail "second start in memory mode: exit $rc, want 3: $(cat "$TMP/refused.log")"
grep -q "refusing to start: $mark says this node already ran with \[durability\] mode = memory" \
	"$TMP/refused.log" || fail "refusal text: $(cat "$TMP/refused.log")"
log "second start refused (exit 3): $(cut -c1-140 "$TMP/refused.log")..."
"$OMSD_REAL" --check -c "$TMP/mem.ini" >/dev/null || fail "--check refused while the mark exists"
rm "$mark"
e2e_start "$TMP/mem.ini"
notify_wait 'READY=1' 3 || fail "memory mode: no READY=1 after the mark was removed"
e2e_stop TERM
log "memory mode: first start marks, second refuses with 3, starts again once the mark is gone"

# --- 3. As the unit runs it: not root, the unit's capabilities only ------------------------
unit=$OMSD_SRC/deploy/systemd/omsd.service.in
caps=$(sed -n 's/^AmbientCapabilities=//p' "$unit" | tr 'A-Z ' 'a-z\n' | sed 's/^cap_/+/' |
	paste -sd, -)
[ -n "$caps" ] || fail "no AmbientCapabilities= in $unit"
grep -q '^NoNewPrivileges=yes' "$unit" || fail "the unit lost NoNewPrivileges=yes"
chmod 0711 "$TMP"
svc=$TMP/svc
install -d -m 0750 -o 65534 -g 65534 "$svc" "$svc/run"
e2e_trade_config "$TMP/svc.ini"
sed -i -e "s|^data_dir = .*|data_dir = $svc/data|" -e "s|^mgmt_socket = .*|mgmt_socket = $svc/omsd.sock|" \
	-e "s|^stats_file = .*|stats_file = $svc/stats|" "$TMP/svc.ini"
STATS=$svc/stats
cat >"$TMP/omsd-unit" <<SH
#!/bin/sh
ulimit -l unlimited
exec setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs \\
	--inh-caps=-all,$caps --ambient-caps=-all,$caps --bounding-set=-all,$caps \\
	env XDG_RUNTIME_DIR=$svc/run "$OMSD_REAL" --service "\$@"
SH
chmod 755 "$TMP/omsd-unit"
OMSD=$TMP/omsd-unit
e2e_start "$TMP/svc.ini"
notify_wait 'READY=1' 4 || fail "as uid 65534 with $caps: no READY=1"
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$OMSD_PID/status")
[ "$uid" = 65534 ] || fail "the node runs as uid $uid"
capeff=$(awk '/^CapEff:/ { print $2 }' "/proc/$OMSD_PID/status")
"$OMSCTL" --socket "$svc/omsd.sock" status >/dev/null || fail "omsctl status (uid 65534 node)"
[ -S "$svc/run/dpdk/$PREFIX/mp_socket" ] || [ -d "$svc/run/dpdk/$PREFIX" ] ||
	fail "the EAL's runtime directory is not under XDG_RUNTIME_DIR"
e2e_stop TERM
[ "$STOP_RC" = 0 ] || fail "uid 65534 node: exit $STOP_RC on SIGTERM"
log "as the unit runs it: uid 65534, capabilities $caps (CapEff $capeff), ready and stopped"
log "PASS"

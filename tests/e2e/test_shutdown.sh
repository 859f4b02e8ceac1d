#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: SIGTERM and SIGINT stop omsd cleanly (exit 0) with traffic queued, and the port and
# DPDK resources are released so the same node starts again at once.
# Method: start, exchange traffic, SIGTERM; start again with the same --file-prefix and port,
# check it answers, SIGINT. Each run must exit 0 and write its final counters.
source "$(dirname "$0")/lib.sh"
need_root
e2e_init oed 13
e2e_net_up
e2e_config "$TMP/omsd.ini"

for sig in TERM INT; do
	e2e_start "$TMP/omsd.ini"
	ip netns exec "$NS_C" ping -c 3 -i 0.2 -W 2 "$NODE_IP" >/dev/null || fail "ping before SIG$sig"
	# Keep traffic in flight while the signal lands.
	ip netns exec "$NS_C" ping -f -w 10 "$NODE_IP" >/dev/null 2>&1 &
	flood=$!
	sleep 0.5
	e2e_stop "$sig"
	kill "$flood" 2>/dev/null || true
	wait "$flood" 2>/dev/null || true
	[ "$STOP_RC" -eq 0 ] || fail "exit status $STOP_RC after SIG$sig"
	grep -q "stopped:" "$OMSD_LOG" || fail "no 'stopped' line after SIG$sig"
	head -1 "$STATS" | grep -q "(exit)" || fail "final counters not written after SIG$sig"
	replied=$(e2e_stat dp.icmp_echo_replied)
	[ "$replied" -ge 3 ] || fail "dp.icmp_echo_replied=$replied after SIG$sig"
	log "SIG$sig: exit 0, final counters written (icmp_echo_replied=$replied)"
done

# Nothing left behind by the process itself: no omsd holding the port, the runtime
# directory may be reused (it was, by the second run).
pgrep -f -- "--file-prefix $PREFIX" >/dev/null && fail "an omsd with prefix $PREFIX is still running"
log "PASS"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: malformed and unauthenticated frames are dropped and counted per cause, while valid
# frames keep flowing through io → shard lcore → io.
# Method: a node with a client MAC key; from the client namespace send 200 rounds of every
# malformed class (bad magic, garbage, truncated, bad length, bad version, wrong MAC, no MAC,
# unknown message type, bad UDP checksum, bad IP checksum, unknown IP protocol, wrong UDP
# port, unroutable shard, mixed routes) shuffled with valid frames (one message, and five
# messages in one frame); every valid frame must
# be echoed back intact and every counter must move by exactly what was sent.
source "$(dirname "$0")/lib.sh"
need_root
e2e_init oes 12
e2e_net_up
KEY=000102030405060708090a0b0c0d0e0f
e2e_config "$TMP/omsd.ini" "" "[keys]" "client = $KEY"
e2e_start "$TMP/omsd.ini"
log "omsd up (pid $OMSD_PID), client key set"

ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_net.py" storm --iface "$VETH_C" \
	--node-ip "$NODE_IP" --client-ip "$CLIENT_IP" --node-mac "$NODE_MAC" \
	--client-mac "$CLIENT_MAC" --tool "$E2E_FRAME" --stats "$STATS" --key "$KEY" \
	--pid "$OMSD_PID" --rounds "${STORM_ROUNDS:-200}" || fail "storm checks"

# The node is still healthy after the storm.
ip netns exec "$NS_C" ping -c 2 -i 0.2 -W 2 "$NODE_IP" >/dev/null || fail "ping after storm"
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: three omsd processes share one L2 segment (veth + Linux bridge, net_af_packet), each
# answers for its own address only, and frames are authenticated with the peer key when they
# come from a configured peer's address and with the client key otherwise.
# Method: three nodes and a client on a bridge, each node configured with the client address
# as [peer.9]. Ping every node; to every node send a Raft frame sealed with the peer key (must
# be echoed) and one sealed with the client key (must be refused as bad_mac). Then stop all
# three with SIGTERM: each exits 0.
source "$(dirname "$0")/lib.sh"
need_root
e2e_cluster_init oec 14 3
e2e_cluster_net_up
PEER_KEY=00112233445566778899aabbccddeeff
CLIENT_KEY=0f1e2d3c4b5a69788796a5b4c3d2e1f0
for i in 1 2 3; do
	mkdir -p "$TMP/$i"
	e2e_cluster_config "$i" "$TMP/$i/omsd.ini" "" "[peer.9]" "ip = $CLIENT_IP" "" \
		"[keys]" "peer = $PEER_KEY" "client = $CLIENT_KEY"
	e2e_cluster_start "$i" "$TMP/$i/omsd.ini"
done
log "3 nodes up: ${NODE_PIDS[*]}"

for i in 1 2 3; do
	ip netns exec "$NS_C" ping -c 2 -i 0.2 -W 2 "$NET.1$i" >/dev/null || fail "ping node $i"
	ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_net.py" echo --src "$CLIENT_IP" \
		--dst "$NET.1$i" --tool "$E2E_FRAME" --kind raft --shard 1 --key "$PEER_KEY" \
		>/dev/null || fail "peer-keyed frame not echoed by node $i"
	ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_net.py" echo --src "$CLIENT_IP" \
		--dst "$NET.1$i" --tool "$E2E_FRAME" --kind raft --shard 1 --key "$CLIENT_KEY" \
		--expect-none >/dev/null || fail "client-keyed frame from a peer address accepted by node $i"
done
log "every node: ping answered, peer-keyed frame echoed, client-keyed frame refused"

for i in 1 2 3; do
	ok=$(e2e_cluster_stat "$i" shard.1.frames)
	bad=$(e2e_cluster_stat "$i" dp.frame_err.bad_mac)
	echo_replied=$(e2e_cluster_stat "$i" dp.icmp_echo_replied)
	[ "$ok" = 1 ] || fail "node $i: shard.1.frames=$ok, want 1"
	[ "$bad" = 1 ] || fail "node $i: dp.frame_err.bad_mac=$bad, want 1"
	[ "$echo_replied" = 2 ] || fail "node $i: dp.icmp_echo_replied=$echo_replied, want 2 (only its own pings)"
done

for i in 1 2 3; do
	pid=${NODE_PIDS[$i]}
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	unset "NODE_PIDS[$i]"
	[ "$rc" -eq 0 ] || fail "node $i exit status $rc"
done
log "PASS"

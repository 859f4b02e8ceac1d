#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: a node answers ARP and ICMP echo, so ordinary tools work against it, and resolves its
# own next hops with ARP.
# Method: omsd on net_af_packet in its own namespace; from the client namespace arping must
# resolve the node's address to the port's MAC and ping (small and 1400-byte payloads) must
# be answered; the node's counters must agree with what was sent. First of all, a frame
# from an off-subnet client address must be echoed through the configured gateway, which the node
# has to resolve by sending its own ARP request.
source "$(dirname "$0")/lib.sh"
need_root
e2e_init oep 11
e2e_net_up
e2e_config "$TMP/omsd.ini"
sed -i "/^udp_port = 7400/a gateway = $CLIENT_IP" "$TMP/omsd.ini"
FAR_IP=10.250.${NET##*.}.1
ip -n "$NS_C" addr add "$FAR_IP/32" dev "$VETH_C"
e2e_start "$TMP/omsd.ini"
log "omsd up (pid $OMSD_PID) on $NODE_IP, mac $NODE_MAC"

# First, before anything teaches the node the gateway's MAC. The off-subnet sender is learned
# from neither its ARP (not on-link) nor its datagram, so the echo needs the gateway's MAC:
# the node asks for it (ARP request), the client kernel answers, and the echo goes out. The
# first frame may be dropped meanwhile (tx_arp_miss).
attempts=$(ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_net.py" echo --src "$FAR_IP" \
	--dst "$NODE_IP" --tool "$E2E_FRAME") || fail "off-subnet echo: $attempts"
log "off-subnet client $FAR_IP echoed via gateway $CLIENT_IP after $attempts attempt(s)"

out=$(ip netns exec "$NS_C" arping -c 3 -w 5 -I "$VETH_C" "$NODE_IP") || fail "arping: $out"
grep -qi "from $NODE_MAC" <<<"$out" || fail "arping did not resolve to $NODE_MAC: $out"
log "arping resolved $NODE_IP to $NODE_MAC"

out=$(ip netns exec "$NS_C" ping -c 5 -i 0.2 -W 2 "$NODE_IP") || fail "ping: $out"
grep -q " 0% packet loss" <<<"$out" || fail "ping lost packets: $out"
out=$(ip netns exec "$NS_C" ping -c 3 -i 0.2 -W 2 -s 1400 "$NODE_IP") || fail "ping -s 1400: $out"
grep -q " 0% packet loss" <<<"$out" || fail "large ping lost packets: $out"
log "ping: 8/8 answered"

# An address on the subnet that is not ours is neither answered by ARP nor by ICMP.
if ip netns exec "$NS_C" arping -c 1 -w 1 -I "$VETH_C" "$NET.3" >/dev/null 2>&1; then
	fail "arping for $NET.3 was answered"
fi

e2e_stats
requested=$(e2e_stat dp.arp_requested)
reply_rx=$(e2e_stat dp.arp_reply_rx)
[ "$requested" -ge 1 ] || fail "dp.arp_requested=$requested, want >= 1"
[ "$reply_rx" -ge 1 ] || fail "dp.arp_reply_rx=$reply_rx, want >= 1"
grep -qi "^dp.arp.$CLIENT_IP $CLIENT_MAC dynamic" "$STATS" || fail "gateway $CLIENT_IP not in the ARP table"
replied=$(e2e_stat dp.icmp_echo_replied)
arp=$(e2e_stat dp.arp_replied)
not_us=$(e2e_stat dp.arp_not_us)
[ "$replied" -eq 8 ] || fail "dp.icmp_echo_replied=$replied, want 8"
[ "$arp" -ge 3 ] || fail "dp.arp_replied=$arp, want >= 3"
[ "$not_us" -ge 1 ] || fail "dp.arp_not_us=$not_us, want >= 1"
log "counters: icmp_echo_replied=$replied arp_replied=$arp arp_not_us=$not_us"

e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: on a port that computes checksums (RTE_ETH_TX_OFFLOAD_IPV4_CKSUM and _UDP_CKSUM) the
# io lcore leaves them to the port (dp_udp_encap: IP sum 0, the UDP field seeded with the
# pseudo-header's sum, the mbuf flagged), and what leaves is what a kernel takes: a trading
# client over the kernel's UDP stack gets every answer, and the kernel counts no checksum
# error. (net_af_packet and net_pcap have no tx offload: every other test sends with the
# io lcore's own sums, dp.tx_csum_offload 0.)
# Method: one node on net_tap (the DPDK tap PMD, which offers both offloads and completes
# them in software from the mbuf's flags and header lengths; it sums the pseudo-header
# itself, so the seed is unit-tested instead: dp_parse/encap_offload_completed_by_the_port),
# its tap interface in the node's namespace with the client's
# address; omsload (20 users, 4 s, --flatten) from that namespace; the kernel's
# UdpInCsumErrors and IpExtInCsumErrors stay 0; the node says dp.tx_csum_offload 1 and
# logged "tx by the port"; ping is answered (ICMP sums stay the io lcore's).
: "${OMSLOAD:?set OMSLOAD}"
source "$(dirname "$0")/lib.sh"
need_root
[ -c /dev/net/tun ] || { echo "SKIP: no /dev/net/tun"; exit 77; }
e2e_init otp 28
TAP=${TAG}t0
ip netns del "$NS_N" 2>/dev/null || true
ip netns add "$NS_N"
ip -n "$NS_N" link set lo up
e2e_trade_config "$TMP/omsd.ini"
sed -i "s|^dev = .*|dev = net_tap0,iface=$TAP|" "$TMP/omsd.ini"
e2e_start "$TMP/omsd.ini"
ip -n "$NS_N" addr add "$CLIENT_IP/24" dev "$TAP"
ip -n "$NS_N" link set "$TAP" up
grep -q "checksums: .*tx by the port" "$OMSD_LOG" || fail "the port does not take the tx sums"
e2e_stats
[ "$(e2e_stat dp.tx_csum_offload)" = 1 ] || fail "dp.tx_csum_offload $(e2e_stat dp.tx_csum_offload)"
log "omsd on $TAP ($NODE_IP), checksums offloaded on tx"

out=$(ip netns exec "$NS_N" ping -c 3 -i 0.2 -W 2 "$NODE_IP") || fail "ping: $out"
snmp() { ip netns exec "$NS_N" awk -v f="$1" -v k="$2" '$1 == f ":" && !h { for (i = 2; i <= NF; i++) n[i] = $i; h = 1; next }
	$1 == f ":" { for (i = 2; i <= NF; i++) if (n[i] == k) print $i }' /proc/net/"$3"; }
udp0=$(snmp Udp InCsumErrors snmp)
ip0=$(snmp IpExt InCsumErrors netstat)
out=$TMP/load.out
ip netns exec "$NS_N" "$OMSLOAD" --host "$NODE_IP" --users 20 --first-user 1000 \
	--rate 200 --seconds 4 --seed 7 --mid 100 --drain-ms 8000 --flatten --seq-from-one \
	>"$out" 2>&1 || { cat "$out"; fail "omsload"; }
sed 's/^/    /' "$out"
read -r acked resting final unrep doubled over < <(sed -nE \
	's/^ledger: acked=([0-9]+) resting=([0-9]+) final=([0-9]+) unreported=([0-9]+) doubled=([0-9]+) overfilled=([0-9]+) .*/\1 \2 \3 \4 \5 \6/p' "$out")
[ "${acked:-0}" -gt 300 ] || fail "only ${acked:-0} orders acknowledged"
[ "$resting" = 0 ] && [ "$unrep" = 0 ] && [ "$doubled" = 0 ] && [ "$over" = 0 ] ||
	fail "ledger: resting $resting unreported $unrep doubled $doubled overfilled $over"
grep -q "still_missing=0" "$out" || fail "answers missing: $(grep '^replay' "$out")"
udp1=$(snmp Udp InCsumErrors snmp)
ip1=$(snmp IpExt InCsumErrors netstat)
[ "$udp1" = "$udp0" ] && [ "$ip1" = "$ip0" ] ||
	fail "the kernel refused checksums: UdpInCsumErrors $udp0 -> $udp1, IpExt InCsumErrors $ip0 -> $ip1"
e2e_stats
tx=$(e2e_stat dp.tx_frames)
[ "$tx" -gt 100 ] || fail "dp.tx_frames $tx"
log "omsload: acked $acked final $final over the kernel's UDP; $tx frames sent with the port's sums, no checksum error"
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

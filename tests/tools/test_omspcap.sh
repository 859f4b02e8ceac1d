#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: omspcap gen writes a reproducible capture of valid frames that omspcap show decodes
# with zero errors and tshark reads as Ethernet/IPv4/UDP with good checksums; --fund-first
# puts every deposit first; send delivers every payload and counts the answers.
# Method: generate 2000 messages (with and without a MAC key), read back with omspcap show
# (message counts must match what gen reported) and with tshark (frame count, UDP to the
# node's port, no bad checksum); the same seed gives the same bytes, another seed does not.
set -euo pipefail
: "${OMSPCAP:?set OMSPCAP to the omspcap binary}"
TMP=$(mktemp -d /tmp/omspcap-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

gen=$("$OMSPCAP" gen --out "$TMP/a.pcap" --count 2000 --seed 11 --users 8 --symbols 2 \
	--dst-ip 10.201.5.2 --dst-port 7400 --dst-mac 02:aa:bb:cc:dd:ee --transfer-shard 1)
echo "$gen"
frames=$(sed -n 's/.* frames=\([0-9]*\) .*/\1/p' <<<"$gen")
msgs=$(sed -n 's/.* msgs=\([0-9]*\) .*/\1/p' <<<"$gen")
[ "$msgs" -eq 2000 ] || fail "gen wrote $msgs messages"
[ "$frames" -lt 2000 ] || fail "no frame carried several messages ($frames frames)"

show=$("$OMSPCAP" show "$TMP/a.pcap")
echo "$show"
grep -qx "show: frames=$frames msgs=2000 decode_errors=0 non_udp=0" <<<"$show" ||
	fail "show does not match gen"
# The node refuses frames that mix order entry with transfers: gen never writes one.
if grep -q "^mixed frames" <<<"$show"; then fail "gen wrote mixed frames"; fi
for t in NEW_ORDER CANCEL AMEND CANCEL_REPLACE TRANSFER; do
	want=$(sed -n "s/.* $t=\([0-9]*\).*/\1/p" <<<"$gen")
	got=$(awk -v t="$t" '$1 == "type" && $2 == t { print $3 }' <<<"$show")
	[ "$want" = "$got" ] || fail "$t: gen $want, show $got"
done

# Same seed, same bytes; another seed, other bytes.
"$OMSPCAP" gen --out "$TMP/b.pcap" --count 2000 --seed 11 --users 8 --symbols 2 \
	--dst-ip 10.201.5.2 --dst-port 7400 --dst-mac 02:aa:bb:cc:dd:ee --transfer-shard 1 >/dev/null
cmp -s "$TMP/a.pcap" "$TMP/b.pcap" || fail "same seed, different file"
"$OMSPCAP" gen --out "$TMP/c.pcap" --count 2000 --seed 12 --users 8 >/dev/null
cmp -s "$TMP/a.pcap" "$TMP/c.pcap" && fail "different seeds, same file"

# With a MAC key: show needs the key, and refuses every frame without it.
KEY=000102030405060708090a0b0c0d0e0f
"$OMSPCAP" gen --out "$TMP/k.pcap" --count 300 --seed 5 --key "$KEY" >/dev/null
"$OMSPCAP" show "$TMP/k.pcap" --key "$KEY" | grep -q "decode_errors=0 " || fail "keyed show"
if "$OMSPCAP" show "$TMP/k.pcap" >"$TMP/nokey" 2>&1; then fail "keyless show accepted MACs"; fi
grep -q "decode_errors=[1-9]" "$TMP/nokey" || fail "keyless show counted no errors"

# A logged-on capture (docs/security.md): a LOGON first, then session frames whose MACs show
# checks under the session key derived with the key file; with another key's file every
# session frame is refused; the same seed and --logon-ts-ns give the same bytes.
printf '7 %064d all *\n' 3 >"$TMP/api"
printf '7 %064d all *\n' 4 >"$TMP/api.other"
"$OMSPCAP" gen --out "$TMP/s.pcap" --count 300 --seed 5 --users 8 --key-file "$TMP/api" \
	--logon-ts-ns 1767225600000000000 >"$TMP/s.gen"
grep -q " LOGON=1 " "$TMP/s.gen" || fail "no LOGON in the session capture: $(cat "$TMP/s.gen")"
"$OMSPCAP" show "$TMP/s.pcap" --key-file "$TMP/api" | grep -q "decode_errors=0 " ||
	fail "session capture: MACs do not verify under the session key"
if "$OMSPCAP" show "$TMP/s.pcap" --key-file "$TMP/api.other" >"$TMP/s.other"; then
	fail "session capture verified under another key"
fi
grep -q "decode_errors=[1-9]" "$TMP/s.other" || fail "another key: no decode errors counted"
"$OMSPCAP" gen --out "$TMP/s2.pcap" --count 300 --seed 5 --users 8 --key-file "$TMP/api" \
	--logon-ts-ns 1767225600000000000 >/dev/null
cmp -s "$TMP/s.pcap" "$TMP/s2.pcap" || fail "session capture: same seed and time, other bytes"
if "$OMSPCAP" gen --out "$TMP/x.pcap" --count 5 --key-file "$TMP/api" --key "$KEY" \
	>/dev/null 2>&1; then fail "gen took --key with --key-file"; fi

# Usage errors.
if "$OMSPCAP" gen --count 5 >/dev/null 2>&1; then fail "gen without --out"; fi
if "$OMSPCAP" show "$TMP/missing.pcap" >/dev/null 2>&1; then fail "show of a missing file"; fi

# --fund-first: every deposit before the first order. --open-max: more cancels, same total.
"$OMSPCAP" gen --out "$TMP/f.pcap" --count 400 --seed 3 --users 8 --transfer-shard 1 \
	--fund-first 1 --open-max 4 >"$TMP/f.gen"
"$OMSPCAP" show "$TMP/f.pcap" --verbose >"$TMP/f.show"
order=$(awk '$1 == "frame" { print ($NF == "TRANSFER") ? "T" : "o" }' "$TMP/f.show" | tr -d '\n')
[[ "$order" =~ ^T{16}o+$ ]] || fail "fund-first: deposits and orders interleave: ${order:0:40}"
c_open=$(sed -n 's/.* CANCEL=\([0-9]*\).*/\1/p' "$TMP/f.gen")
c_free=$("$OMSPCAP" gen --out "$TMP/g.pcap" --count 400 --seed 3 --users 8 --transfer-shard 1 \
	--fund-first 1 | sed -n 's/.* CANCEL=\([0-9]*\).*/\1/p')
[ "$c_open" -gt "$c_free" ] || fail "open-max 4 did not add cancels ($c_open vs $c_free)"
echo "fund-first: 16 deposits first; open-max: $c_open cancels instead of $c_free"

# send: the payloads reach a UDP peer unchanged, and what it sends back is counted. Paced
# at 2000 frames/s (half a second) so that loopback buffers never overflow.
if command -v python3 >/dev/null; then
	python3 - "$TMP/port" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind(("127.0.0.1", 0))
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
s.settimeout(5)
try:
    while True:
        data, addr = s.recvfrom(65535)
        s.sendto(data, addr)          # echo: the sender decodes its own frames
except socket.timeout:
    pass
PY
	echo_pid=$!
	for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
	out=$("$OMSPCAP" send "$TMP/a.pcap" --to 127.0.0.1 --port "$(cat "$TMP/port")" \
		--rate 2000 --idle-ms 500) || fail "send: $out"
	kill "$echo_pid" 2>/dev/null || true
	echo "$out"
	grep -q "^send: frames=$frames sent=$frames send_errors=0 non_udp=0 .* rx_frames=$frames rx_msgs=2000 .* decode_errors=0 resent=0 rewinds=0 skipped=0 probes=0$" <<<"$out" ||
		fail "send did not deliver and count every frame"
	if "$OMSPCAP" send "$TMP/a.pcap" >/dev/null 2>&1; then fail "send without --to"; fi
else
	echo "SKIP (send part): python3 is not installed"
fi

if ! command -v tshark >/dev/null; then
	echo "SKIP (tshark part): tshark is not installed; omspcap checks passed"
	exit 0
fi
fields=$(tshark -r "$TMP/a.pcap" -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE \
	-T fields -e ip.dst -e udp.dstport -e ip.checksum.status -e udp.checksum.status \
	2>/dev/null)
n=$(wc -l <<<"$fields")
[ "$n" -eq "$frames" ] || fail "tshark read $n frames, gen wrote $frames"
bad=$(awk '!($1 == "10.201.5.2" && $2 == 7400 && $3 == 1 && $4 == 1)' <<<"$fields" | head -3)
[ -z "$bad" ] || fail "tshark: frames not UDP to the node with good checksums: $bad"
echo "tshark: $n frames, UDP to 10.201.5.2:7400, IPv4 and UDP checksums good"
echo "PASS"

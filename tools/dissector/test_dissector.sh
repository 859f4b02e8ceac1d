#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: omsd.lua, generated from common/wire.h, dissects what omsd sends: every message of a
# valid capture with the values the C code wrote, every message type's layout, a MAC, the
# heuristic on another port, and damaged datagrams flagged malformed rather than a Lua error.
# Method: omspcap gen writes 2000 messages (every type omspcap writes: NEW_ORDER, CANCEL,
# AMEND, CANCEL_REPLACE, TRANSFER); tshark with the dissector prints PDML; compare.py checks
# frames, the type sequence and sender of every frame and the per-type counts against
# `omspcap show --verbose`, and every field value against wire_ref (a reader compiled against
# wire.h). wire_ref all writes one frame per WIRE_TYPES type: the leaf fields must tile each
# datagram and each integer equal its little-endian bytes. Skipped (77) without tshark.
#
# Root: Wireshark refuses Lua plugins to the superuser unless init.lua sets
# run_user_scripts_when_superuser = true (Debian's /usr/share/wireshark/init.lua does; -X
# lua_script is refused with it false). The probe below says so instead of failing obscurely.
set -euo pipefail
: "${OMSPCAP:?set OMSPCAP to the omspcap binary}"
: "${WIRE_REF:?set WIRE_REF to the wire_ref binary}"
: "${OMSD_LUA:?set OMSD_LUA to the generated omsd.lua}"
: "${COMPARE:?set COMPARE to compare.py}"
fail() { echo "FAIL: $*" >&2; exit 1; }

if ! command -v tshark >/dev/null; then
	echo "SKIP: tshark is not installed (deploy/install-deps installs it)"
	exit 77
fi
TMP=$(mktemp -d /tmp/dissector-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# tshark -X lua_script:... -T pdml, the root warning dropped from stderr.
ts() { tshark -X lua_script:"$OMSD_LUA" "$@" 2> >(grep -v 'Running as user "root"' >&2); }

# The dissector loads (as root too) and registers its protocol.
if ! tshark -G protocols -X lua_script:"$OMSD_LUA" 2>/dev/null | grep -q '^omsd wire protocol'; then
	if [ "$(id -u)" -eq 0 ]; then
		fail "tshark did not load $OMSD_LUA as root: set run_user_scripts_when_superuser = true in init.lua (docs/tools.md, Wireshark)"
	fi
	fail "tshark did not load $OMSD_LUA"
fi

# 1. A seeded order flow, several messages per frame.
"$OMSPCAP" gen --out "$TMP/a.pcap" --count 2000 --seed 11 --users 8 --symbols 2 \
	--transfer-shard 1 --multi 40 --open-max 4
"$OMSPCAP" show "$TMP/a.pcap" --verbose >"$TMP/a.show"
"$WIRE_REF" dump "$TMP/a.pcap" >"$TMP/a.ref"
ts -r "$TMP/a.pcap" -T pdml >"$TMP/a.pdml"
python3 "$COMPARE" fields "$TMP/a.pdml" "$TMP/a.show" "$TMP/a.ref"
# The same through -T fields, as an operator would filter.
n=$(ts -r "$TMP/a.pcap" -Y 'omsd.msg.type == 1' -T fields -e omsd.user | wc -l)
want=$(awk '/^frame / && $NF == "NEW_ORDER" { split($2, a, ":"); f[a[1]] = 1 } END { print length(f) }' "$TMP/a.show")
[ "$n" -eq "$want" ] || fail "filter omsd.msg.type == 1: $n frames, omspcap show $want"
echo "filter: omsd.msg.type == 1 selects the $n frames holding a NEW_ORDER"

# 2. With a MAC: the tag is shown after the messages, the messages as without.
KEY=000102030405060708090a0b0c0d0e0f
"$OMSPCAP" gen --out "$TMP/k.pcap" --count 300 --seed 5 --key "$KEY" >/dev/null
"$OMSPCAP" show "$TMP/k.pcap" --key "$KEY" --verbose >"$TMP/k.show"
"$WIRE_REF" dump "$TMP/k.pcap" --key "$KEY" >"$TMP/k.ref"
ts -r "$TMP/k.pcap" -T pdml >"$TMP/k.pdml"
# Into a file, not a pipe into head: with pipefail a broken pipe would fail the test.
python3 "$COMPARE" fields "$TMP/k.pdml" "$TMP/k.show" "$TMP/k.ref" >"$TMP/k.out"
head -n 1 "$TMP/k.out"
macs=$(ts -r "$TMP/k.pcap" -T fields -e omsd.mac | grep -c .)
frames=$(sed -n 's/^show: frames=\([0-9]*\) .*/\1/p' "$TMP/k.show")
[ "$macs" -eq "$frames" ] || fail "keyed capture: $macs MACs shown, $frames frames"
echo "mac: $macs frames show their 16-byte tag"

# 2b. A logged-on capture (omspcap gen --key-file): a LOGON frame, then session frames, each
# SESSION_HDR first with seq 1, 2, 3, ... and the session MAC. The dissector shows every
# frame's messages in omspcap show's order (show decodes under the derived session key, so
# this also proves the frames it dissects are the MAC-valid ones).
printf '7 %s trade,transfer 1-100000\n' 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f \
	>"$TMP/api_keys"
chmod 600 "$TMP/api_keys"
"$OMSPCAP" gen --out "$TMP/s.pcap" --count 300 --seed 9 --users 4 --transfer-shard 1 \
	--key-file "$TMP/api_keys" >/dev/null
"$OMSPCAP" show "$TMP/s.pcap" --key-file "$TMP/api_keys" --verbose >"$TMP/s.show"
grep -q "decode_errors=0 " "$TMP/s.show" || fail "omspcap show of the session capture: $(tail -1 "$TMP/s.show")"
awk '/^frame / { f = $2 + 0; if (f in seq) seq[f] = seq[f] "," $NF; else seq[f] = $NF }
	END { for (f = 1; f in seq; f++) print seq[f] }' "$TMP/s.show" >"$TMP/s.want"
# The dissector's type numbers, named from wire.h's WIRE_TYPES table.
ts -r "$TMP/s.pcap" -T fields -e omsd.msg.type >"$TMP/s.num"
python3 - "$TMP/s.num" "$TMP/s.got" "$(dirname "$0")/../../common/wire.h" <<'PY'
import re, sys
names = {}
for m in re.finditer(r"X\((\w+),\s*(\d+),", open(sys.argv[3]).read()):
    names[m.group(2)] = m.group(1)
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        out.write(",".join(names.get(t, "?" + t) for t in line.strip().split(",") if t) + "\n")
PY
diff -u "$TMP/s.want" "$TMP/s.got" >"$TMP/s.diff" || fail "session capture: the dissector's messages differ from omspcap show: $(head -20 "$TMP/s.diff")"
frames=$(wc -l <"$TMP/s.want")
seqs=$(ts -r "$TMP/s.pcap" -Y 'omsd.msg.type == 11' -T fields -e omsd.seq | tr '\n' ' ')
want_seqs=$(seq 1 $((frames - 1)) | tr '\n' ' ')
[ "$seqs" = "$want_seqs" ] || fail "session seqs '$seqs', want '$want_seqs'"
[ "$(head -n 1 "$TMP/s.want")" = LOGON ] || fail "session capture does not start with its LOGON"
echo "session: $frames frames (a LOGON, then SESSION_HDR seq 1..$((frames - 1))) dissected as omspcap show decodes them"

# 3. Every message type: layout against the C compiler's (wire_ref all), with and without a MAC.
"$WIRE_REF" all "$TMP/all.pcap" >"$TMP/all.ref"
ts -r "$TMP/all.pcap" -T pdml >"$TMP/all.pdml"
python3 "$COMPARE" layout "$TMP/all.pdml" "$TMP/all.ref"
"$WIRE_REF" all "$TMP/allk.pcap" --key "$KEY" >"$TMP/allk.ref"
ts -r "$TMP/allk.pcap" -T pdml >"$TMP/allk.pdml"
python3 "$COMPARE" layout "$TMP/allk.pdml" "$TMP/allk.ref"
# The wrapped messages of INGRESS and the entry of APPEND_ENTRIES are dissected too.
inner=$(ts -r "$TMP/all.pcap" -Y 'omsd.msg.type == 71' -T fields -e omsd.msg.type -e omsd.user)
[ "$inner" = $'71,1\t77' ] || fail "INGRESS tail: '$inner', want the wrapped NEW_ORDER of user 77"
entry=$(ts -r "$TMP/all.pcap" -Y 'omsd.msg.type == 66' -T fields -e omsd.msg.type -e omsd.entry.data_len)
[ "$entry" = $'66,56\t8' ] || fail "APPEND_ENTRIES tail: '$entry', want one entry holding a TICK"
echo "tails: INGRESS shows its NEW_ORDER, APPEND_ENTRIES its entry and the TICK in it"

# 4. The heuristic finds frames on another port.
"$OMSPCAP" gen --out "$TMP/p.pcap" --count 50 --seed 2 --dst-port 9999 >/dev/null
hp=$(ts -r "$TMP/p.pcap" -Y omsd -T fields -e frame.number | wc -l)
hf=$(tshark -r "$TMP/p.pcap" -T fields -e frame.number 2>/dev/null | wc -l)
[ "$hp" -eq "$hf" ] || fail "heuristic: $hp of $hf frames on port 9999 dissected"
echo "heuristic: $hp of $hf frames on UDP port 9999 dissected"

# 5. Damaged datagrams: flagged malformed (expert info), never a Lua error; omspcap agrees.
python3 "$COMPARE" truncate "$TMP/a.pcap" "$TMP/t.pcap"
ts -r "$TMP/t.pcap" -T pdml >"$TMP/t.pdml"
python3 "$COMPARE" malformed "$TMP/t.pdml" 4
if "$OMSPCAP" show "$TMP/t.pcap" >"$TMP/t.show"; then fail "omspcap show accepted a damaged frame"; fi
grep -q "decode_errors=4 " "$TMP/t.show" || fail "omspcap show: $(tail -1 "$TMP/t.show")"
echo "PASS"

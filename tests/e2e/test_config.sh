#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: every bad key or value is refused before the EAL starts, with file, line, section,
# key and reason, and exit status 2; good files (the shipped ones included) pass --check.
# Method: one good base file; each case appends or replaces a line and must produce its
# expected message. No namespaces, no EAL: the refusal happens before either is needed.
set -euo pipefail
: "${OMSD:?set OMSD to the omsd binary}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d /tmp/omsd-e2e-config.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0

base() {
	cat <<'INI'
[node]
id = 1
ip = 10.9.0.2/24
udp_port = 7400

[eal]
args = --no-huge --no-pci -m 512

[port]
dev = net_null0

[io]
cpu = 0
idle = sleep

[peer.2]
ip = 10.9.0.3

[peer.3]
ip = 10.9.0.4
mac = 02:00:00:00:00:03

[shard.1]
service = oms
members = 1,2,3

[shard.2]
service = me
members = 1

[sessions]
allow_unauthenticated = true
INI
}

# case NAME SED-SCRIPT EXPECTED-REGEX: apply the sed script to the base file, run omsd,
# expect exit 2 and a stderr line matching the regex.
case_bad() {
	local name=$1 script=$2 want=$3 f="$TMP/$1.ini" rc=0 out
	base | sed -e "$script" >"$f"
	out=$("$OMSD" -c "$f" 2>&1 >/dev/null) || rc=$?
	if [ "$rc" -ne 2 ]; then
		echo "FAIL $name: exit $rc, want 2"; echo "$out"; fails=$((fails + 1)); return
	fi
	if ! grep -Eq -- "$want" <<<"$out"; then
		echo "FAIL $name: no line matching '$want' in:"; echo "$out"; fails=$((fails + 1)); return
	fi
	echo "ok   $name: $(echo "$out" | grep -E -- "$want" | head -1)"
}

F="$TMP"
# The base file itself is good.
base >"$TMP/good.ini"
"$OMSD" -c "$TMP/good.ini" --check >/dev/null || { echo "FAIL good base refused"; exit 1; }

case_bad unknown_key     '/^udp_port/a colour = blue' \
	"unknown_key.ini:5: \[node\] colour: unknown key"
case_bad unknown_section '$a [frobnicate]\nx = 1' "unknown_section.ini:[0-9]+: \[frobnicate\] unknown section"
case_bad bad_ip          's/^ip = 10.9.0.2\/24/ip = 10.9.0.300/' "bad_ip.ini:3: \[node\] ip: '10.9.0.300' is not a unicast IPv4"
case_bad bad_prefix      's/^ip = 10.9.0.2\/24/ip = 10.9.0.2\/40/' "bad_prefix.ini:3: \[node\] ip: prefix length '40'"
case_bad bad_port        's/^udp_port = 7400/udp_port = 70000/' "bad_port.ini:4: \[node\] udp_port: 70000 is out of range"
case_bad not_a_number    's/^udp_port = 7400/udp_port = 74x0/' "not_a_number.ini:4: \[node\] udp_port: '74x0' is not a non-negative decimal integer"
case_bad missing_id      '/^id = 1/d' "missing_id.ini:1: \[node\] id: missing \(required\)"
case_bad bad_idle        's/^idle = sleep/idle = nap/' "bad_idle.ini:[0-9]+: \[io\] idle: 'nap' is not one of busy\|pause\|sleep"
case_bad bad_service     's/^service = me/service = bank/' "bad_service.ini:[0-9]+: \[shard.2\] service: 'bank' is not one of me\|oms"
case_bad unknown_member  's/^members = 1,2,3/members = 1,2,4/' "unknown_member.ini:[0-9]+: \[shard.1\] members: node 4 has no \[peer.4\] section"
case_bad even_members    's/^members = 1,2,3/members = 1,2/' "even_members.ini:[0-9]+: \[shard.1\] members: a Raft group has 1, 3 or 5 members, not 2"
case_bad not_member      's/^members = 1$/members = 2/' "not_member.ini:[0-9]+: \[shard.2\] members: this node \(1\) is not a member"
case_bad dup_key         '/^udp_port/a udp_port = 7401' "dup_key.ini:5: \[node\] udp_port: duplicate key \(first at line 4\)"
case_bad dup_section     '$a [node]' "dup_section.ini:[0-9]+: \[node\]: duplicate section"
case_bad garbage_line    '/^\[port\]/a this is not ini' "garbage_line.ini:[0-9]+: neither a \[section\] nor key = value"
case_bad bad_dev         's/^dev = net_null0/dev = eth0/' "bad_dev.ini:[0-9]+: \[port\] dev: 'eth0' is neither a vdev"
case_bad bad_mac         's/^mac = 02:00:00:00:00:03/mac = 01:00:00:00:00:03/' "bad_mac.ini:[0-9]+: \[peer.3\] mac: '01:00:00:00:00:03' is not a unicast MAC"
case_bad bad_key         '$a [keys]\nclient = 1234' "bad_key.ini:[0-9]+: \[keys\] client: must be 32 hex digits"
case_bad lcore_arg       's/^args = .*/args = --no-huge -l 0-1/' "lcore_arg.ini:[0-9]+: \[eal\] args: '-l' is not allowed"
case_bad ring_size       '$a [memory]\nring_size = 1000' "ring_size.ini:[0-9]+: \[memory\] ring_size: 1000 is not a power of two"
case_bad bad_cpu         's/^cpu = 0/cpu = 1000/' "bad_cpu.ini:[0-9]+: \[io\] cpu: CPU 1000 is not available"
case_bad bad_durability  '$a [durability]\nmode = maybe' "bad_durability.ini:[0-9]+: \[durability\] mode: 'maybe' is not one of memory\|durable"
case_bad bad_shard_name  's/^\[shard.2\]/[shard.x]/' "bad_shard_name.ini:[0-9]+: \[shard.x\] shard sections are named"
case_bad no_shards       '/^\[shard/,$d' "no_shards.ini: no \[shard.N\] section"
case_bad bad_pin         '$a [routing]\npins = 5:1,7' "bad_pin.ini:[0-9]+: \[routing\] pins: '7' is not user:shard"
case_bad bad_oms_shard   '$a [routing]\noms_shards = 1,99' "bad_oms_shard.ini:[0-9]+: \[routing\] oms_shards: '99' is not a shard id"
case_bad symbol_no_base  '$a [symbol.1]\nquote = 2\nme_shard = 2' "symbol_no_base.ini:[0-9]+: \[symbol.1\] base: missing \(required\)"
case_bad symbol_fee      '$a [symbol.1]\nbase = 1\nquote = 2\nme_shard = 2\nmaker_fee_bps = -20000' "symbol_fee.ini:[0-9]+: \[symbol.1\] maker_fee_bps: -20000 is out of range"
case_bad db_no_persister '$a [database]\nconninfo = host=/tmp' "db_no_persister.ini:[0-9]+: \[database\] conninfo: needs a \[persister\] lcore"
case_bad log_mb          '$a [limits]\nlog_mb = 4096' "log_mb.ini:[0-9]+: \[limits\] log_mb: 4096 is out of range"
case_bad bad_rx_start    '/^dev = net_null0/a rx_start = later' "bad_rx_start.ini:[0-9]+: \[port\] rx_start: 'later' is not one of now\|leader"
case_bad rx_start_raft   '/^dev = net_null0/a rx_start = leader' "rx_start_raft.ini:[0-9]+: \[port\] rx_start: leader needs single-member shards \(shard 1 has 3 members"
case_bad rx_hold_frames  '/^dev = net_null0/a rx_hold_frames = 1024' "rx_hold_frames.ini:[0-9]+: \[port\] rx_hold_frames: 1024 must be below \[memory\] ring_size"
case_bad sweep_vs_ttl    '$a [timers]\nuser_ttl_ms = 1000\nsweep_ms = 5000' "sweep_vs_ttl.ini:[0-9]+: \[timers\] sweep_ms: 5000 is longer than user_ttl_ms"
case_bad metrics_remote   '$a [mgmt]\nmetrics_listen = 0.0.0.0:9464' "metrics_remote.ini:[0-9]+: \[mgmt\] metrics_listen: 0.0.0.0 is not a loopback address"
case_bad metrics_port     '$a [mgmt]\nmetrics_listen = 127.0.0.1:99999' "metrics_port.ini:[0-9]+: \[mgmt\] metrics_listen: port '99999' is not 1..65535"
case_bad metrics_form     '$a [mgmt]\nmetrics_listen = localhost' "metrics_form.ini:[0-9]+: \[mgmt\] metrics_listen: 'localhost' is not ADDRESS:PORT"

# Sessions (docs/security.md): keys are required unless the development switch is on, the
# shared client key only goes with it, and the key file's faults name its line.
printf '1 %064d trade 1-10\n2 zz trade 1\n' 7 >"$TMP/keys.bad"
chmod 600 "$TMP/keys.bad"
printf '1 %064d trade 1-10\n' 7 >"$TMP/keys.open"
chmod 644 "$TMP/keys.open"
case_bad no_keys_file    's/^allow_unauthenticated = true/allow_unauthenticated = false/' \
	"no_keys_file.ini:[0-9]+: \[sessions\] keys_file: required"
case_bad client_key_auth "s|^allow_unauthenticated = true|keys_file = $TMP/keys.bad|;\$a [keys]\nclient = 000102030405060708090a0b0c0d0e0f" \
	"client_key_auth.ini:[0-9]+: \[keys\] client: the shared client key is for"
case_bad keys_bad_line   "s|^allow_unauthenticated = true|keys_file = $TMP/keys.bad|" \
	"keys_bad_line.ini:[0-9]+: \[sessions\] keys_file: $TMP/keys.bad:2: secret"
case_bad keys_open_mode  "s|^allow_unauthenticated = true|keys_file = $TMP/keys.open|" \
	"keys_open_mode.ini:[0-9]+: \[sessions\] keys_file: $TMP/keys.open: mode 644"
case_bad keys_missing    "s|^allow_unauthenticated = true|keys_file = $TMP/nope.keys|" \
	"keys_missing.ini:[0-9]+: \[sessions\] keys_file: $TMP/nope.keys: No such file"
case_bad keys_source     "s|^allow_unauthenticated = true|keys_source = ldap|" \
	"keys_source.ini:[0-9]+: \[sessions\] keys_source: 'ldap' is not one of file\|database"
case_bad keys_db_no_db   "s|^allow_unauthenticated = true|keys_source = database|" \
	"keys_db_no_db.ini:[0-9]+: \[sessions\] keys_source: database needs \[database\] conninfo"

# Several errors in one file are all reported, not just the first.
base | sed -e 's/^udp_port = 7400/udp_port = 0/' -e 's/^idle = sleep/idle = x/' \
	-e '/^id = 1/a colour = red' >"$TMP/many.ini"
n=$("$OMSD" -c "$TMP/many.ini" 2>&1 | grep -c "many.ini:" || true)
if [ "$n" -lt 3 ]; then echo "FAIL many: $n errors reported, want 3"; fails=$((fails + 1)); else echo "ok   many: $n errors reported"; fi

# A missing file, and EAL lcore arguments on the command line.
rc=0; out=$("$OMSD" -c "$TMP/nope.ini" 2>&1) || rc=$?
if [ "$rc" -eq 2 ] && grep -q "nope.ini: cannot open" <<<"$out"; then echo "ok   missing_file"; else echo "FAIL missing_file ($rc): $out"; fails=$((fails + 1)); fi
rc=0; out=$("$OMSD" -c "$TMP/good.ini" -- -l 0-1 2>&1) || rc=$?
if [ "$rc" -eq 2 ] && grep -q "'-l' is not allowed" <<<"$out"; then echo "ok   cmdline_lcores"; else echo "FAIL cmdline_lcores ($rc): $out"; fails=$((fails + 1)); fi

# The shipped configurations are valid. Only CPU availability and the API key file may
# differ from this host (production.ini names isolated cores a development box does not
# have; the key files are the operator's, created at install or by deploy/demo).
for f in "$SRC/deploy/omsd.ini" "$SRC"/deploy/configs/*.ini; do
	[ -f "$f" ] || continue
	if "$OMSD" -c "$f" --check >/dev/null 2>"$TMP/err"; then
		echo "ok   shipped $(basename "$f")"
	elif ! grep -v -e "is not available to this process" -e "configuration refused" \
		-e "keys_file: .*: No such file" "$TMP/err" | grep -q .; then
		echo "ok   shipped $(basename "$f") (valid; names CPUs or a key file this host lacks)"
	else
		echo "FAIL shipped $f:"; cat "$TMP/err"; fails=$((fails + 1))
	fi
done

# A control socket directory someone else could write is refused at start (the EAL runs
# with net_null: no namespaces needed), naming the directory; omsd exits 1.
mkdir -p "$TMP/open" "$TMP/data"
chmod 0777 "$TMP/open"
base | sed -e "\$a [paths]\ndata_dir = $TMP/data\nmgmt_socket = $TMP/open/omsd.sock" \
	-e 's/^members = 1,2,3/members = 1/' -e '/^\[peer/,/^$/d' -e '/^ip = 10.9.0/d' \
	-e '/^mac = /d' >"$TMP/open.ini"
sed -i -e 's|^\[node\]|[node]\nip = 10.9.0.2/24|' "$TMP/open.ini"
rc=0
out=$(timeout 60 "$OMSD" -c "$TMP/open.ini" -- --file-prefix "omsd-cfg-$$" 2>&1) || rc=$?
if [ "$rc" -eq 1 ] && grep -q "unsafe directory: $TMP/open is writable by its group or by others" <<<"$out" &&
	[ ! -e "$TMP/open/omsd.sock" ]; then
	echo "ok   unsafe_socket_dir: $(grep -o 'unsafe directory: .*' <<<"$out" | head -1)"
else
	echo "FAIL unsafe_socket_dir (exit $rc):"; echo "$out" | tail -5; fails=$((fails + 1))
fi

[ "$fails" -eq 0 ] || { echo "$fails case(s) failed"; exit 1; }
echo PASS

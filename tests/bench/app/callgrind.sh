#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bench: instructions per order on the single-node pcap path (pipeline.sh) under
# valgrind --tool=callgrind (docs/appliance.md "Benchmarks").
#
# What is counted: instructions executed inside the lcores' duty-cycle work, i.e. the
# inclusive cost of dp_io_do_work (io lcore: rx, parse, route, tx), app_shard_do_work (OMS
# shard 1 with the gateway and the saga re-drive, ME shard 2: Raft, services, egress) and
# app_seal_do_work (the bridge lcore: the MAC of the frames to the network), collected
# with --collect-atstart=no --toggle-collect=<those functions>. Start-up, the main lcore
# (stats) and the idle back-off (sleeps) are outside. The lcores also poll when there is
# nothing to do, and under valgrind (one thread at a time) they poll far more often than
# natively, so the cost of empty cycles is calibrated and taken out:
#   1. an idle run (USERS_IDLE users' deposits only, no orders): Ir per empty cycle of the
#      io lcore and of the shard lcores (from the callgrind totals and agent.*.cycles);
#   2. the load run (ORDERS order-entry messages, USERS users);
#   instructions_per_order = (Ir_load − empty_cycles_load × Ir_per_empty_cycle) / NEW_ORDERs
# where NEW_ORDERs are the flow's new orders; the flow's cancels, amends, replaces and
# deposits (about a third more messages) are carried by them. Also printed: the raw figure
# (Ir_load / NEW_ORDERs, empty cycles included) and per message.
#
# Env: ORDERS (2000), USERS (16), SEED (1), USERS_IDLE (2), VALGRIND (valgrind), BRIDGE (seal),
#      OMSD, OMSPCAP (default: the callgrind tree, tests/bench/cg-tree: x86-64-v3 release,
#      built if missing; a -march=native omsd may hold instructions valgrind cannot decode,
#      e.g. AVX-512). Needs valgrind; about a minute per run.
# Last line: bench: callgrind instructions_per_order=N ...
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ORDERS=${ORDERS:-2000}
USERS=${USERS:-16}
USERS_IDLE=${USERS_IDLE:-2}
VALGRIND=${VALGRIND:-valgrind}
# BRIDGE: seal (default; the shipped configs' shape: a [bridge] lcore MACs the shard lcores'
# frames, app/app_seal.c, and its cycles are counted too), off or empty (no [bridge]: the
# shard lcores MAC their own; pipeline.sh's BRIDGE).
BRIDGE=${BRIDGE-seal}
command -v "$VALGRIND" >/dev/null || { echo "callgrind: valgrind not found" >&2; exit 2; }
command -v callgrind_annotate >/dev/null || { echo "callgrind: callgrind_annotate not found" >&2; exit 2; }
if [ -z "${OMSD:-}" ] || [ -z "${OMSPCAP:-}" ]; then
	tree=$("$HERE/../cg-tree" app/omsd tools/omspcap)
	export OMSD=${OMSD:-$tree/app/omsd} OMSPCAP=${OMSPCAP:-$tree/tools/omspcap}
fi
DIR=$(mktemp -d /tmp/omsd-bench-callgrind.XXXXXX)
# KEEP=1 keeps the runs' files (cg.out, stats, logs) and names the directory on stderr.
trap 'if [ -n "${KEEP:-}" ]; then echo "callgrind: kept $DIR" >&2; else rm -rf "$DIR"; fi' EXIT

# run NAME ORDERS USERS: pipeline.sh under callgrind; leaves $DIR/NAME/{cg.out,stats}.
run() {
	local name=$1
	mkdir -p "$DIR/$name"
	OMSD_WRAP="$VALGRIND --tool=callgrind --callgrind-out-file=$DIR/$name/cg.out
		--collect-atstart=no --toggle-collect=dp_io_do_work --toggle-collect=app_shard_do_work
		--toggle-collect=app_seal_do_work" \
		READY_S=300 DRAIN_S=900 QUIET=1 ORDERS=$2 USERS=$3 BENCH_DIR=$DIR/$name BRIDGE=$BRIDGE \
		"$HERE/pipeline.sh" >"$DIR/$name/pipeline.out" 2>&1 || {
		cat "$DIR/$name/pipeline.out" >&2
		tail -20 "$DIR/$name/omsd.log" >&2
		echo "callgrind: the $name run failed" >&2
		exit 1
	}
}
# ir NAME FUNCTION: inclusive Ir of FUNCTION.
ir() {
	callgrind_annotate --inclusive=yes --threshold=100 "$DIR/$1/cg.out" 2>/dev/null |
		awk -v f="$2" '{ n = $1; gsub(",", "", n) } !found && $0 ~ ":" f " " { v = n; found = 1 }
			END { print found ? v : 0 }'
}
st() { awk -v k="$2" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$DIR/$1/stats"; }
empty() { echo $(($(st "$1" "agent.$2.cycles") - $(st "$1" "agent.$2.work_cycles"))); }

run idle 0 "$USERS_IDLE"
run load "$ORDERS" "$USERS"
grep '^bench:' "$DIR/load/pipeline.out" | sed 's/^/callgrind: under valgrind: /'

# Ir per empty cycle, from the idle run (its few working cycles are the deposits).
io_idle=$(ir idle dp_io_do_work)
sh_idle=$(ir idle app_shard_do_work)
io_cyc=$(st idle agent.io.cycles)
sh_cyc=$(($(st idle agent.shard1.cycles) + $(st idle agent.shard2.cycles)))
[ "$io_cyc" -gt 0 ] && [ "$sh_cyc" -gt 0 ] || { echo "callgrind: no cycles in the idle run" >&2; exit 1; }

# The bridge lcore (BRIDGE=seal): its empty cycles, from the idle run as well.
br_idle=0 br_cyc=1 br_load=0 br_empty=0
if [ "$BRIDGE" = seal ]; then
	br_idle=$(ir idle app_seal_do_work)
	br_cyc=$(st idle agent.bridge.cycles)
	[ "$br_cyc" -gt 0 ] || { echo "callgrind: no bridge cycles in the idle run" >&2; exit 1; }
	br_load=$(ir load app_seal_do_work)
	br_empty=$(empty load bridge)
fi
io_load=$(ir load dp_io_do_work)
sh_load=$(ir load app_shard_do_work)
io_empty=$(empty load io)
sh_empty=$(($(empty load shard1) + $(empty load shard2)))
new_orders=$(sed -n 's/.* orders=\([0-9]*\) .*/\1/p' "$DIR/load/pipeline.out" | tail -1)
msgs=$((ORDERS + 2 * USERS))
[ "${new_orders:-0}" -gt 0 ] || { echo "callgrind: no orders in the load run" >&2; exit 1; }

# Where they go: the top functions by own (exclusive) cost in the load run.
echo "callgrind: top functions by own instructions (load run, empty polls included):"
callgrind_annotate --threshold=100 "$DIR/load/cg.out" 2>/dev/null |
	awk '/^-+$/ { sep++; next } sep >= 5 && NF >= 3 && n < 12 { n++; print "callgrind:   " $0 }'
awk -v io_idle="$io_idle" -v sh_idle="$sh_idle" -v io_cyc="$io_cyc" -v sh_cyc="$sh_cyc" \
	-v io_load="$io_load" -v sh_load="$sh_load" -v io_empty="$io_empty" \
	-v sh_empty="$sh_empty" -v n="$new_orders" -v msgs="$msgs" -v br_idle="$br_idle" \
	-v br_cyc="$br_cyc" -v br_load="$br_load" -v br_empty="$br_empty" -v bridge="$BRIDGE" 'BEGIN {
	io_e = io_idle / io_cyc; sh_e = sh_idle / sh_cyc; br_e = br_idle / br_cyc
	raw = io_load + sh_load + br_load
	net = raw - io_empty * io_e - sh_empty * sh_e - br_empty * br_e
	printf "callgrind: idle run: io %.0f Ir/empty cycle, shard %.0f Ir/empty cycle, bridge %.0f\n", io_e, sh_e, br_e
	printf "callgrind: load run: Ir io=%d shard=%d bridge=%d, empty cycles io=%d shard=%d bridge=%d, new orders=%d messages=%d\n",
		io_load, sh_load, br_load, io_empty, sh_empty, br_empty, n, msgs
	printf "bench: callgrind instructions_per_order=%.0f instructions_per_msg=%.0f raw_per_order=%.0f io_per_order=%.0f shard_per_order=%.0f bridge_per_order=%.0f bridge=%s orders=%d\n",
		net / n, net / msgs, raw / n, (io_load - io_empty * io_e) / n,
		(sh_load - sh_empty * sh_e) / n, (br_load - br_empty * br_e) / n,
		bridge == "" ? "none" : bridge, n
}'

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
# natively, so the cost of empty cycles is measured and taken out, per lcore kind (io,
# shard, bridge), and so is the start-up:
#   1. an idle run (USERS_IDLE users' deposits only, no orders) and the same run left idle
#      for IDLE_TAIL_S more seconds before it stops: the same start-up, more empty cycles,
#      so c = ΔIr / Δempty_cycles is the cost of one empty cycle (a start-up's elections,
#      configuration and deposits are not spread over it), and the idle run's work is
#      start = Ir_idle − empty_idle × c;
#   2. the load run (ORDERS order-entry messages, USERS users);
#   instructions_per_order = Σ (Ir_load − empty_load × c − start) / NEW_ORDERs
# where NEW_ORDERs are the flow's new orders; the flow's cancels, amends, replaces and the
# deposits beyond the idle run's (about a third more messages) are carried by them. Also
# printed: the raw figure (Ir_load / NEW_ORDERs, empty cycles and start-up included), per
# message, and per lcore kind. (Until session 41 the idle run's Ir per cycle, start-up
# included, stood for c; the tail shows the start-up is small — 0.2M of a shard's — and that
# an empty cycle costs the same after a load as at idle: 839 against 832 Ir.) What still
# moves between runs of one tree (±3 %) is work driven by time, not orders: Raft ticks,
# re-drive passes, write-backs, about 175 working cycles a second at idle under valgrind,
# which a slower or faster interleaving of the lcores adds or removes.
#
# Env: ORDERS (2000), USERS (16), SEED (1), USERS_IDLE (2), IDLE_TAIL_S (20),
#      VALGRIND (valgrind), BRIDGE (seal), GATEWAY (empty: the gateway on the OMS shard
#      lcore; lcore: on an lcore of its own, counted as its own kind, app_gateway_do_work),
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
IDLE_TAIL_S=${IDLE_TAIL_S:-20}
command -v "$VALGRIND" >/dev/null || { echo "callgrind: valgrind not found" >&2; exit 2; }
command -v callgrind_annotate >/dev/null || { echo "callgrind: callgrind_annotate not found" >&2; exit 2; }
if [ -z "${OMSD:-}" ] || [ -z "${OMSPCAP:-}" ]; then
	tree=$("$HERE/../cg-tree" app/omsd tools/omspcap)
	export OMSD=${OMSD:-$tree/app/omsd} OMSPCAP=${OMSPCAP:-$tree/tools/omspcap}
fi
DIR=$(mktemp -d /tmp/omsd-bench-callgrind.XXXXXX)
# KEEP=1 keeps the runs' files (cg.out, stats, logs) and names the directory on stderr.
trap 'if [ -n "${KEEP:-}" ]; then echo "callgrind: kept $DIR" >&2; else rm -rf "$DIR"; fi' EXIT

# The duty functions counted, by name, and by the name link-time optimisation gives a static
# one it keeps out of line (app_seal_do_work.lto_priv.0; omsd is built with -flto).
TOGGLES=
for f in dp_io_do_work app_shard_do_work app_seal_do_work app_gateway_do_work; do
	TOGGLES+=" --toggle-collect=$f --toggle-collect=$f.lto_priv.?"
done

# run NAME ORDERS USERS [IDLE_TAIL_S]: pipeline.sh under callgrind; leaves
# $DIR/NAME/{cg.out,stats}.
run() {
	local name=$1 tail=${4:-0}
	mkdir -p "$DIR/$name"
	OMSD_WRAP="$VALGRIND --tool=callgrind --callgrind-out-file=$DIR/$name/cg.out
		--collect-atstart=no $TOGGLES" \
		READY_S=300 DRAIN_S=900 QUIET=1 ORDERS=$2 USERS=$3 BENCH_DIR=$DIR/$name BRIDGE=$BRIDGE \
		GATEWAY=${GATEWAY:-} \
		IDLE_TAIL_S=$tail \
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
		awk -v f="$2" '{ n = $1; gsub(",", "", n) } !found && $0 ~ ":" f "(\\.lto_priv\\.[0-9]+)? " { v = n; found = 1 }
			END { print found ? v : 0 }'
}
st() { awk -v k="$2" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$DIR/$1/stats"; }
empty() { echo $(($(st "$1" "agent.$2.cycles") - $(st "$1" "agent.$2.work_cycles"))); }

run idle 0 "$USERS_IDLE"
run idletail 0 "$USERS_IDLE" "$IDLE_TAIL_S"
run load "$ORDERS" "$USERS"
grep '^bench:' "$DIR/load/pipeline.out" | sed 's/^/callgrind: under valgrind: /'

# Per lcore kind: its duty function and its agents.
KINDS="io shard bridge"
fn_of() { case $1 in io) echo dp_io_do_work ;; shard) echo app_shard_do_work ;; bridge) echo app_seal_do_work ;; gateway) echo app_gateway_do_work ;; esac; }
agents_of() { case $1 in io) echo io ;; shard) echo shard1 shard2 ;; bridge) echo bridge ;; gateway) echo gateway ;; esac; }
cycles() { local n=0 a; for a in $(agents_of "$2"); do n=$((n + $(st "$1" "agent.$a.cycles"))); done; echo $n; }
empties() { local n=0 a; for a in $(agents_of "$2"); do n=$((n + $(empty "$1" "$a"))); done; echo $n; }
[ "$BRIDGE" = seal ] || KINDS="io shard"
[ "${GATEWAY:-}" != lcore ] || KINDS+=" gateway"
declare -A IR EMPTY
for run_name in idle idletail load; do
	for k in $KINDS; do
		IR[$run_name.$k]=$(ir "$run_name" "$(fn_of "$k")")
		EMPTY[$run_name.$k]=$(empties "$run_name" "$k")
	done
done
[ "$(cycles idle shard)" -gt 0 ] || { echo "callgrind: no cycles in the idle run" >&2; exit 1; }
new_orders=$(sed -n 's/.* orders=\([0-9]*\) .*/\1/p' "$DIR/load/pipeline.out" | tail -1)
msgs=$((ORDERS + 2 * USERS))
[ "${new_orders:-0}" -gt 0 ] || { echo "callgrind: no orders in the load run" >&2; exit 1; }

# Where they go: the top functions by own (exclusive) cost in the load run.
echo "callgrind: top functions by own instructions (load run, empty polls included):"
callgrind_annotate --threshold=100 "$DIR/load/cg.out" 2>/dev/null |
	awk '/^-+$/ { sep++; next } sep >= 5 && NF >= 3 && n < 12 { n++; print "callgrind:   " $0 }'
summary=
for k in $KINDS; do
	de=$((EMPTY[idletail.$k] - EMPTY[idle.$k]))
	[ "$de" -gt 0 ] || { echo "callgrind: $k: the idle tail added no empty cycle" >&2; exit 1; }
	summary+="$k ${IR[idle.$k]} ${EMPTY[idle.$k]} ${IR[idletail.$k]} ${EMPTY[idletail.$k]} ${IR[load.$k]} ${EMPTY[load.$k]} "
done
awk -v n="$new_orders" -v msgs="$msgs" -v bridge="$BRIDGE" -v gateway="${GATEWAY:-shard}" \
	-v s="$summary" 'BEGIN {
	k = split(s, f, " ")
	raw = 0; net = 0; line = ""; cal = ""
	for (i = 1; i + 6 <= k; i += 7) {
		kind = f[i]; ir0 = f[i+1]; e0 = f[i+2]; ir1 = f[i+3]; e1 = f[i+4]; irl = f[i+5]; el = f[i+6]
		c = (ir1 - ir0) / (e1 - e0)          # one empty cycle
		start = ir0 - e0 * c                  # the idle run: start-up and its deposits
		w = irl - el * c - start
		raw += irl; net += w; per[kind] = w / n
		cal = cal sprintf(" %s %.0f Ir/empty cycle (start-up %.1fM)", kind, c, start / 1e6)
		line = line sprintf(" %s=%d/%d", kind, irl, el)
	}
	printf "callgrind: calibration:%s\n", cal
	printf "callgrind: load run: Ir/empty cycles%s, new orders=%d messages=%d\n", line, n, msgs
	printf "bench: callgrind instructions_per_order=%.0f instructions_per_msg=%.0f raw_per_order=%.0f io_per_order=%.0f shard_per_order=%.0f bridge_per_order=%.0f gateway_per_order=%.0f bridge=%s gateway=%s orders=%d\n",
		net / n, net / msgs, raw / n, per["io"], per["shard"], per["bridge"] + 0,
		per["gateway"] + 0, bridge == "" ? "none" : bridge, gateway, n
}'

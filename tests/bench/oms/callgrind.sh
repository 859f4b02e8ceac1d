#!/usr/bin/env bash
# Instructions per order of the OMS hot path under oms_bench (admit → ACK + SUBMIT →
# ACCEPTED → FILL → DONE, 100k users, Zipf 0.99).
#
#   tests/bench/oms/callgrind.sh [path/to/oms_bench] [ops]
#
# Build without DCHECKs (e.g. `meson setup build-rel -Dpure_only=true`) for representative
# figures. Counts only instructions executed inside oms_apply (--toggle-collect), i.e. the
# service and the host sink it calls, not the bench's generator or the 100k-user warm-up;
# runs the bench with --ops 0 (warm-up only) and with `ops`, and divides the difference by
# `ops`. The bench's sink (records the SUBMIT's orderId) is subtracted for the main figure.
# Prints: instructions_per_op=N
set -euo pipefail
bench=${1:-build/tests/bench/oms/oms_bench}
ops=${2:-100000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
	valgrind --tool=callgrind --toggle-collect=oms_apply --callgrind-out-file="$tmp/out.$1" \
		"$bench" --ops "$1" --no-timing > /dev/null 2> "$tmp/err.$1"
}
total() { awk '/^summary:/ { print $2 }' "$tmp/out.$1"; }
sink() {
	callgrind_annotate "$tmp/out.$1" 2>/dev/null | tr -d , |
		awk '/:sink_emit / { print $1; found = 1 } END { if (!found) print 0 }'
}
run 0
run "$ops"
t0=$(total 0); t1=$(total "$ops"); s0=$(sink 0); s1=$(sink "$ops")
echo "callgrind: ops=$ops ir_warmup=$t0 ir_total=$t1 sink_warmup=$s0 sink_total=$s1"
echo "callgrind: with host sink instructions_per_op=$(( (t1 - t0) / ops ))"
echo "instructions_per_op=$(( ((t1 - s1) - (t0 - s0)) / ops ))"

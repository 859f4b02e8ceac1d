#!/usr/bin/env bash
# Instructions per request of the matching engine under the me_bench standard mix.
#
#   tests/bench/me/callgrind.sh [path/to/me_bench] [ops]
#
# Build the bench without DCHECKs (a plain `meson setup build`) for representative figures.
# Counts only instructions executed inside me_apply (--toggle-collect), i.e. the engine, not
# the bench's request generator; the bench's own sink callback (the host's emit, which copies
# nothing here but tracks resting orders for the generator) is subtracted. Runs the bench
# twice with the same seed — warm-up only (--ops 0) and warm-up plus `ops` requests — and
# divides the difference by `ops`, so the 100k-order warm-up is subtracted too. The per-batch
# stream acks (record release) run inside me_apply and are included.
# Prints: instructions_per_op=N (and the figure with the host sink included).
set -euo pipefail
bench=${1:-build/tests/bench/me/me_bench}
ops=${2:-200000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
	valgrind --tool=callgrind --toggle-collect=me_apply --callgrind-out-file="$tmp/out.$1" \
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

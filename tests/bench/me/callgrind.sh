#!/usr/bin/env bash
# Instructions per request of the matching engine under the me_bench standard mix.
#
#   tests/bench/me/callgrind.sh [path/to/me_bench] [ops]
#
# Counts only instructions executed inside me_apply (--toggle-collect), i.e. the engine and
# the sink it calls, not the bench's request generator. Runs the bench twice with the same
# seed — warm-up only (--ops 0) and warm-up plus `ops` requests — and divides the difference
# by `ops`, so the warm-up (100k passive orders) is subtracted. Per-batch stream acks are
# inside me_apply and therefore included. Prints: instructions_per_op=N
set -euo pipefail
bench=${1:-build/tests/bench/me/me_bench}
ops=${2:-200000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() {
	valgrind --tool=callgrind --toggle-collect=me_apply --callgrind-out-file="$tmp/out.$1" \
		"$bench" --ops "$1" --no-timing > /dev/null 2> "$tmp/err.$1"
	awk '/^summary:/ { print $2 }' "$tmp/out.$1"
}
base=$(ir 0)
full=$(ir "$ops")
echo "callgrind: ir_warmup=$base ir_total=$full ops=$ops"
echo "instructions_per_op=$(( (full - base) / ops ))"

#!/usr/bin/env bash
# Instructions per payload through the consensus step functions (3 members, batch 64),
# measured as the difference between two runs so start-up cost cancels out:
#   tests/bench/consensus/callgrind.sh [build-dir] [entries]
set -eu
build=${1:-build}
n=${2:-20000}
bench="$build/tests/bench/consensus/raft_bench"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() {
	valgrind --tool=callgrind --callgrind-out-file="$tmp/out.$1" "$bench" --entries "$1" \
		>/dev/null 2>&1
	awk '/^(summary|totals):/ { print $2; exit }' "$tmp/out.$1"
}
a=$(ir "$n")
b=$(ir $((2 * n)))
echo "callgrind: raft Ir($n)=$a Ir($((2 * n)))=$b"
echo "instructions_per_entry=$(( (b - a) / n ))"

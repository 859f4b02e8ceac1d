#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per payload through the consensus step functions (3 members, batch 64),
# measured as the difference between two runs so start-up cost cancels out:
#   tests/bench/consensus/callgrind.sh [build-dir] [entries]
# Without a build dir, the callgrind tree (tests/bench/cg-tree: x86-64-v3 release, built if
# missing; a -march=native tree may hold instructions valgrind cannot decode).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-}
n=${2:-20000}
if [ -z "$build" ]; then
	build=$("$here/../cg-tree" tests/bench/consensus/raft_bench)
fi
bench="$build/tests/bench/consensus/raft_bench"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() {
	valgrind --tool=callgrind --callgrind-out-file="$tmp/out.$1" "$bench" --entries "$1" \
		>/dev/null 2>"$tmp/err.$1" || {
		tail -20 "$tmp/err.$1" >&2
		echo "callgrind: $bench --entries $1 failed under valgrind" >&2
		exit 1
	}
	awk '/^(summary|totals):/ { print $2; exit }' "$tmp/out.$1"
}
a=$(ir "$n")
b=$(ir $((2 * n)))
echo "callgrind: $bench"
echo "callgrind: raft Ir($n)=$a Ir($((2 * n)))=$b"
echo "instructions_per_entry=$(( (b - a) / n ))"

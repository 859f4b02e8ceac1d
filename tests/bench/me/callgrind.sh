#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per request of the matching engine under the me_bench standard mix (the
# engine only: me_apply, host sink subtracted; the per-batch stream acks are included), and
# first the same for the small-book mix (issue 18: one symbol, a book of about 1,000 resting
# orders, in an engine of the standard run's capacity), counted on me_bench_small_book, the
# bench built with only that phase (callgrind-per-op passes only --ops and --no-timing).
#   tests/bench/me/callgrind.sh [path/to/me_bench] [ops]
# Without a path, me_bench of the callgrind tree (tests/bench/cg-tree, built if missing);
# with one, me_bench_small_book next to it. Both runs count `ops` requests (200,000).
# Lines: callgrind-per-op's for the small book, prefixed "callgrind: small_book: ", ending
#   callgrind: small_book: instructions_per_op=N
# then its lines for the standard mix; the last line is the standard figure, as before:
#   instructions_per_op=N
set -euo pipefail
per_op=$(dirname "$0")/../callgrind-per-op
bench=${1:-cg:tests/bench/me/me_bench}
ops=${2:-200000}
case $bench in
cg:*) small=cg:tests/bench/me/me_bench_small_book ;;
*) small=$(dirname "$bench")/me_bench_small_book ;;
esac
# pipefail: a failed count fails the script (callgrind-per-op says why on stderr).
"$per_op" "$small" "$ops" me_apply sink_emit | sed 's/^callgrind: //; s/^/callgrind: small_book: /'
exec "$per_op" "$bench" "$ops" me_apply sink_emit

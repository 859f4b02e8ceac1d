#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per request of the matching engine under the me_bench standard mix (the
# engine only: me_apply, host sink subtracted; the per-batch stream acks are included).
#   tests/bench/me/callgrind.sh [path/to/me_bench] [ops]
# Without a path, me_bench of the callgrind tree (tests/bench/cg-tree, built if missing).
exec "$(dirname "$0")/../callgrind-per-op" "${1:-cg:tests/bench/me/me_bench}" "${2:-200000}" \
	me_apply sink_emit

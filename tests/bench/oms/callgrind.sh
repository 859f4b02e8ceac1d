#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per order of the OMS hot path under oms_bench (admit → ACK + SUBMIT → one FILL
# that enters and ends the order → its report, which says done; 100k users, Zipf 0.99):
# oms_apply only, the bench's sink (which records the SUBMIT's orderId) subtracted.
#   tests/bench/oms/callgrind.sh [path/to/oms_bench] [ops]
# Without a path, oms_bench of the callgrind tree (tests/bench/cg-tree, built if missing).
exec "$(dirname "$0")/../callgrind-per-op" "${1:-cg:tests/bench/oms/oms_bench}" \
	"${2:-100000}" oms_apply sink_emit

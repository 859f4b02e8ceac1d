#!/usr/bin/env bash
# Instructions per order of the OMS hot path under oms_bench (admit → ACK + SUBMIT →
# ACCEPTED → FILL → DONE, 100k users, Zipf 0.99): oms_apply only, the bench's sink (which
# records the SUBMIT's orderId) subtracted.
#   tests/bench/oms/callgrind.sh [path/to/oms_bench] [ops]
exec "$(dirname "$0")/../callgrind-per-op" "${1:-build/tests/bench/oms/oms_bench}" \
	"${2:-100000}" oms_apply sink_emit

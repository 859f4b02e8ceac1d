#!/usr/bin/env bash
# Instructions per request of the matching engine under the me_bench standard mix (the
# engine only: me_apply, host sink subtracted; the per-batch stream acks are included).
#   tests/bench/me/callgrind.sh [path/to/me_bench] [ops]
exec "$(dirname "$0")/../callgrind-per-op" "${1:-build/tests/bench/me/me_bench}" "${2:-200000}" \
	me_apply sink_emit

#!/usr/bin/env bash
# Instructions per frame of wire_frame_decode (keyed frames: SipHash MAC plus every message
# checked), under the wire_bench mix.
#   tests/bench/common/callgrind.sh [path/to/wire_bench] [frames]
exec "$(dirname "$0")/../callgrind-per-op" "${1:-build/tests/bench/common/wire_bench}" \
	"${2:-40960}" wire_frame_decode

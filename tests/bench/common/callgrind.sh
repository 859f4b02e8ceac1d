#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per frame of wire_frame_decode (keyed frames: SipHash MAC plus every message
# checked), under the wire_bench mix.
#   tests/bench/common/callgrind.sh [path/to/wire_bench] [frames]
# Without a path, wire_bench of the callgrind tree (tests/bench/cg-tree, built if missing).
exec "$(dirname "$0")/../callgrind-per-op" "${1:-cg:tests/bench/common/wire_bench}" \
	"${2:-40960}" wire_frame_decode

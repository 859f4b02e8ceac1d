#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# e2e: a logged-on session's lost frames are sent again (omspcap send, docs/tools.md).
#
# One node (tests/bench/app/pipeline3.sh NODES=1, net_af_packet in a namespace) takes a
# logged-on session's replay at a rate it carries, while the switch drops every 97th frame
# from the client (nftables netdev at the client's port). The gateway refuses every frame
# after a lost one (SESSION_REJECT SEQ_GAP naming the seq it expects, nothing acted on);
# the replay goes back to that frame, and a HEARTBEAT probe after the last frame finds a
# lost tail. Checked: frames were lost and sent again (rewinds > 0, the node counted
# refused_seq_gap), and every new order was seen, answered and settled exactly as without
# loss — none NAKed, the deposits all applied.
set -euo pipefail
: "${OMSD:?set OMSD to the omsd binary}"
: "${OMSPCAP:?set OMSPCAP to the omspcap binary}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d /tmp/omsd-e2e-gaps.XXXXXX)
ok=0
trap 'if [ $ok = 1 ]; then rm -rf "$TMP"; else echo "kept $TMP" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$(NODES=1 RATE=3000 ORDERS=3000 USERS=16 SEED=5 CLIENT_DROP_EVERY=97 \
	STATS_OUT=$TMP/stats OMSPCAP_OUT=$TMP/send \
	"$SRC/tests/bench/app/pipeline3.sh" 2>&1) || { echo "$out"; fail "pipeline3.sh"; }
echo "$out" | grep -E '^bench:|gen:|send:'
v() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$TMP/stats"; }
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$TMP/send"; }
new=$(sed -n 's/.* NEW_ORDER=\([0-9]*\).*/\1/p' <<<"$out")
[ "$(field rewinds)" -gt 0 ] || fail "no frame was sent again"
[ "$(field resent)" -gt 0 ] || fail "nothing resent"
[ "$(v gateway.sessions.refused_seq_gap)" -gt 0 ] || fail "the gateway saw no gap"
[ "$(v gateway.lat_orders)" = "$new" ] || fail "$(v gateway.lat_orders) of $new orders seen"
[ "$(v gateway.lat_acked)" = "$new" ] || fail "$(v gateway.lat_acked) of $new orders ACKed"
[ "$(v gateway.lat_naked)" = 0 ] || fail "$(v gateway.lat_naked) orders NAKed"
[ "$(v gateway.lat_finals)" = "$new" ] || fail "$(v gateway.lat_finals) of $new orders settled"
[ "$(v shard.1.oms.transfers)" = 32 ] || fail "$(v shard.1.oms.transfers) deposits applied, want 32"
echo "e2e_replay_gaps: new=$new rewinds=$(field rewinds) resent=$(field resent) probes=$(field probes) refused_seq_gap=$(v gateway.sessions.refused_seq_gap)"
ok=1

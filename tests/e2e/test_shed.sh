#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# e2e: the gateway sheds new orders past saturation (docs/appliance.md "Overload").
#
# One node (tests/bench/app/pipeline3.sh NODES=1: net_af_packet in a namespace, a logged-on
# session replayed by omspcap send at 64k frames/s, far past what one node carries here)
# with [timers] shed_ack_us = 1: any window with enough answers counts as a standing queue,
# so the gateway must shed. What is checked is what shedding promises, never a time:
#   - it shed (gw_shed_queue > 0), and every shed order reached the client as NAK
#     BACKPRESSURE (the client's count includes the OMS's own, so at least as many; unless
#     the node counted answers dropped on their way out);
#   - every new order was either forwarded (timed by the gateway) or shed, and every
#     forwarded one was answered (ACK or NAK): nothing lost, the session's lost frames sent
#     again by omspcap;
#   - a shed order never reached the OMS: the OMS submitted to the ME exactly the orders
#     it ACKed, and those are the gateway's ACKs;
#   - only new orders are shed: every cancel, amend and replace of the capture was routed
#     (gw_in + shed = the capture's order-entry messages);
#   - the deposits all applied.
set -euo pipefail
: "${OMSD:?set OMSD to the omsd binary}"
: "${OMSPCAP:?set OMSPCAP to the omspcap binary}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d /tmp/omsd-e2e-shed.XXXXXX)
ok=0
trap 'if [ $ok = 1 ]; then rm -rf "$TMP"; else echo "kept $TMP" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$(NODES=1 RATE=64000 ORDERS=4000 USERS=32 SEED=3 SHED_ACK_US=1 SHED_WINDOW_US=5000 \
	DROPS_OK=1 STATS_OUT=$TMP/stats OMSPCAP_OUT=$TMP/send \
	"$SRC/tests/bench/app/pipeline3.sh" 2>&1) || { echo "$out"; fail "pipeline3.sh"; }
echo "$out" | grep -E '^bench:|gen:|send:'
v() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$TMP/stats"; }
gen=$(grep -o 'gen: .*' <<<"$out")
num() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$gen"; }
new=$(num NEW_ORDER)
entry=$(($(num NEW_ORDER) + $(num CANCEL) + $(num AMEND) + $(num CANCEL_REPLACE)))
shed=$(v shard.1.gw_shed_queue)
[ "$(v shard.1.gw_shed_wait)" = 0 ] || fail "shed_wait_us is off, yet $(v shard.1.gw_shed_wait) shed for their wait"
[ "$shed" -gt 0 ] || fail "nothing shed at 64k frames/s with shed_ack_us = 1"
bp=$(sed -n 's/^nak *BACKPRESSURE *\([0-9]*\)$/\1/p' "$TMP/send")
[ "${bp:-0}" -gt 0 ] || fail "$shed shed, the client saw no NAK BACKPRESSURE"
# Every shed order's NAK reaches the client, unless the node counted a frame of answers
# dropped on its way out (a full tx queue or mbuf pool: refusals are not numbered, so not
# replayable, like the gateway's other refusals).
txlost=$(($(v shard.1.tx_full) + $(v shard.1.tx_nombuf) + $(v dp.tx_port_full) + $(v dp.tx_nombuf)))
[ "$txlost" -gt 0 ] || [ "$bp" -ge "$shed" ] || fail "$shed shed, the client saw $bp NAK BACKPRESSURE"
timed=$(v gateway.lat_orders)
[ $((timed + shed)) -eq "$new" ] || fail "forwarded $timed + shed $shed != $new new orders"
acked=$(v gateway.lat_acked)
[ $((acked + $(v gateway.lat_naked))) -eq "$timed" ] || fail "forwarded orders unanswered"
[ "$(v shard.1.oms.submits)" -eq "$acked" ] ||
	fail "the OMS submitted $(v shard.1.oms.submits) orders, the gateway saw $acked ACKs"
[ "$(v shard.1.oms.acks)" -ge "$acked" ] || fail "OMS ACKs $(v shard.1.oms.acks) < $acked"
[ $(($(v shard.1.gw_in) + shed)) -eq "$entry" ] ||
	fail "routed $(v shard.1.gw_in) + shed $shed != $entry order-entry messages"
[ "$(v shard.1.oms.transfers)" = 64 ] || fail "$(v shard.1.oms.transfers) deposits applied, want 64"
echo "e2e_shed: shed=$shed forwarded=$timed acked=$acked of new=$new; BACKPRESSURE seen=$bp"
ok=1

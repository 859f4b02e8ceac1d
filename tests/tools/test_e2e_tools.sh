#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: the tools work against a real node over kernel UDP: omsctl funds users, rests, crosses
# and cancels orders and shows every transition with the right exit code; omsload runs a
# bounded load with every request answered; money is conserved.
# Method: one trading node (OMS shard 1, ME shard 2, symbol 1, a client MAC key) on
# net_af_packet in its own namespace (tests/e2e/lib.sh); the tools run in the client
# namespace with the key (and once without it: dropped, no answer). Then the node's asset
# sums must equal the deposits.
set -euo pipefail
: "${OMSCTL:?set OMSCTL}"
: "${OMSLOAD:?set OMSLOAD}"
export E2E_FRAME=${E2E_FRAME:-/bin/true} # lib.sh wants it; this test sends no raw frames
source "$(dirname "$0")/../e2e/lib.sh"
need_root
e2e_init ott 41
e2e_net_up
KEY=8899aabbccddeeff0011223344556677
e2e_trade_config "$TMP/omsd.ini" "" "[keys]" "client = $KEY"
e2e_start "$TMP/omsd.ini"
log "omsd up (pid $OMSD_PID)"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"

ctl() { ip netns exec "$NS_C" "$OMSCTL" --host "$NODE_IP" --key "$KEY" "$@"; }
# expect RC CMD...: run, keep the output in OUT, check the exit code.
expect() {
	local want=$1 rc=0
	shift
	OUT=$("$@" 2>&1) || rc=$?
	echo "$OUT" | sed 's/^/    /'
	[ "$rc" -eq "$want" ] || fail "exit $rc, want $want: $*"
}

log "deposits: one addressed to shard 1, one routed by the gateway"
expect 0 ctl deposit --shard 1 --user 1 --asset 2 --amount 1000000 --transfer-id 1
grep -q "^ok .*total=1000000" <<<"$OUT" || fail "deposit answer"
expect 0 ctl deposit --user 2 --asset 1 --amount 10 --transfer-id 2
grep -q "^ok .*total=10" <<<"$OUT" || fail "routed deposit answer"

log "rest a sell, cross it with an IOC buy, cancel the rest"
expect 0 ctl order new --user 2 --symbol 1 --side sell --type limit --px 100 --qty 10 --cl-id 1
grep -q "^ack " <<<"$OUT" || fail "no ack for the sell"
grep -q "^open .* cl_id=1 sell" <<<"$OUT" || fail "the sell did not rest"
expect 0 ctl order new --user 1 --symbol 1 --side buy --type limit --tif ioc --px 100 --qty 4 \
	--cl-id 1
grep -q "^fill .* px=100 qty=4 .* done$" <<<"$OUT" || fail "the buy's FILL of 4 at 100 is not its last"
! grep -q "^done " <<<"$OUT" || fail "a DONE report after the FILL that ended the IOC"
expect 0 ctl order cancel --user 2 --orig 1 --cl-id 2
grep -q "^cancelled .* cl_id=1 .*qty=6 .* done$" <<<"$OUT" ||
	fail "the sell remainder was not cancelled, or the CANCELLED is not its last report"

log "refusals"
expect 1 ctl order new --user 1 --symbol 99 --side buy --type limit --px 100 --qty 1
grep -q "reason=UNKNOWN_SYMBOL" <<<"$OUT" || fail "unknown symbol not NAKed with its reason"
expect 1 ctl order cancel --user 2 --orig 1 --cl-id 3
expect 2 ctl order new --user 1
log "frames without the client MAC are dropped: no answer, exit 3"
expect 3 ip netns exec "$NS_C" "$OMSCTL" --host "$NODE_IP" --wait-ms 600 --retry-ms 100 \
	order new --user 1 --symbol 1 --side buy --type limit --px 100 --qty 1
log "--json: one object per message"
expect 0 ctl --json order new --user 2 --symbol 1 --side sell --type limit --px 120 --qty 1 \
	--cl-id 5
"$PY" -c 'import json,sys; [json.loads(l) for l in sys.stdin if l.strip()]' <<<"$OUT" ||
	fail "--json output is not JSON lines"

log "omsload"
USERS=8
expect 0 ip netns exec "$NS_C" "$OMSLOAD" --host "$NODE_IP" --key "$KEY" --users "$USERS" --rate 200 \
	--seconds 2 --seed 5 --first-user 100 --mid 100 --drain-ms 3000
last=$(tail -n 1 <<<"$OUT")
read -r sent acked naked final < <(sed -E \
	's/load: sent=([0-9]+) acked=([0-9]+) naked=([0-9]+) final=([0-9]+) .*/\1 \2 \3 \4/' <<<"$last")
[ "$sent" -gt 300 ] || fail "omsload sent only $sent"
[ $((acked + naked)) -eq "$sent" ] || fail "omsload: $sent sent, $acked acked + $naked naked"
[ "$final" -gt 0 ] || fail "omsload: no order reached a final state"
grep -q "deposits: sent=$((USERS * 2)) ok=$((USERS * 2)) " <<<"$OUT" || fail "omsload funding"
ledger=$(grep "^ledger: " <<<"$OUT") || fail "omsload printed no ledger"
grep -q " unreported=0 doubled=0 overfilled=0 " <<<"$ledger" || fail "omsload ledger: $ledger"
resting=$(sed -E 's/.* resting=([0-9]+) .*/\1/' <<<"$ledger")

log "money is conserved"
e2e_stats
# The book holds what the ledger says rests, plus the --json sell at 120 (cl-id 5).
book=$(e2e_stat shard.2.resting)
[ "$book" -eq $((resting + 1)) ] || fail "ME book rests $book orders, the ledger $resting + 1"
bad_mac=$(e2e_stat dp.frame_err.bad_mac)
[ "$bad_mac" -ge 1 ] || fail "the unkeyed frames were not counted as bad_mac ($bad_mac)"
base=$(e2e_stat shard.1.asset.1.sum)
quote=$(e2e_stat shard.1.asset.2.sum)
[ "$base" = $((10 + USERS * 1000000000)) ] || fail "base asset sum $base"
[ "$quote" = $((1000000 + USERS * 1000000000000)) ] || fail "quote asset sum $quote"

if [ -S "$TMP/omsd.sock" ]; then
	log "control socket"
	rc=0
	ip netns exec "$NS_N" "$OMSCTL" --socket "$TMP/omsd.sock" help || rc=$?
	[ "$rc" -eq 0 ] || fail "omsctl help on the control socket: exit $rc"
else
	log "no control socket at $TMP/omsd.sock yet: control-plane part skipped"
fi
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

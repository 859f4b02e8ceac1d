#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Goal: one node trades end to end: client UDP → gateway → OMS shard (Raft + oms) → bridge →
# ME shard (Raft + me) → events back → reports out, with no database (inline persistence).
# Method: omsd with OMS shard 1 and ME shard 2 (one member each) and symbol 1 from the
# configuration (bootstrap admin). From the client namespace (tests/e2e/e2e_trade.py):
# deposit for two users, rest a sell, cross it with a buy; both sides must be ACKed and
# reported (seller OPEN, FILL done; buyer FILL done) at 100 x 10; the funds moved (the
# seller cannot sell again, the buyer can sell exactly the 10 it bought); an order for an
# unknown symbol is NAKed UNKNOWN_SYMBOL. Then the counters: asset sums are conserved.
source "$(dirname "$0")/lib.sh"
need_root
e2e_init oet 15
e2e_net_up
e2e_trade_config "$TMP/omsd.ini"
e2e_start "$TMP/omsd.ini"
log "omsd up (pid $OMSD_PID)"
e2e_wait_stat shard.1.route_epoch 1 || fail "OMS shard never applied the routing config"
log "bootstrap applied (routing epoch 1)"

ip netns exec "$NS_C" "$PY" "$E2E_DIR/e2e_trade.py" single --nodes "$NODE_IP" ||
	fail "trading checks"

e2e_stats
base=$(e2e_stat shard.1.asset.1.sum)
quote=$(e2e_stat shard.1.asset.2.sum)
[ "$base" = 10 ] || fail "base asset sum $base, want 10 (deposits only)"
[ "$quote" = 1000000 ] || fail "quote asset sum $quote, want 1000000 (fees included)"
fills=$(e2e_stat shard.1.oms.fills)
trades=$(e2e_stat shard.2.me.TRADES)
[ "$trades" = 1 ] || fail "me trades $trades, want 1"
log "counters: fills=$fills trades=$trades, asset sums conserved"
e2e_stop TERM
[ "$STOP_RC" -eq 0 ] || fail "omsd exit status $STOP_RC after SIGTERM"
log "PASS"

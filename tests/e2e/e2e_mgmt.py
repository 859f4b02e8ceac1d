#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Order-side checks for the control-socket tests (test_mgmt*.sh), on e2e_trade's client.

  e2e_mgmt.py fund   --nodes A,B  deposit to SELLER and BUYER (OMS shard 1)
  e2e_mgmt.py expect --nodes A,B --user U --cl N --side buy|sell --px P --qty Q --want ack|NAME
      send one NEW_ORDER on symbol 1 and check the answer: ACK, or a NAK with reason NAME
      (HALTED, KILLED, ...). Exit 0 when it matches, 1 otherwise.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_trade as t  # noqa: E402

REASONS = {"HALTED": 3, "KILLED": 30, "INSUFFICIENT_FUNDS": 18}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["fund", "expect"])
    p.add_argument("--nodes", required=True)
    p.add_argument("--user", type=int)
    p.add_argument("--cl", type=int)
    p.add_argument("--side", choices=["buy", "sell"], default="buy")
    p.add_argument("--px", type=int, default=100)
    p.add_argument("--qty", type=int, default=1)
    p.add_argument("--want", default="ack")
    a = p.parse_args()
    c = t.Client(a.nodes.split(","))
    if a.mode == "fund":
        t.check(c.deposit(t.OMS, t.SELLER, 1, t.BASE, 100, all_nodes=True),
                "deposit 100 base to the seller")
        t.check(c.deposit(t.OMS, t.BUYER, 2, t.QUOTE, 1000000, all_nodes=True),
                "deposit 1000000 quote to the buyer")
        return
    side = t.BUY if a.side == "buy" else t.SELL
    r = c.order(a.user, a.cl, t.SYM, side, a.px, a.qty, timeout=15, rotate=True)
    if a.want == "ack":
        t.check(r is not None and r["type"] == t.ACK, "order %d/%d acknowledged: %s"
                % (a.user, a.cl, r))
    else:
        want = REASONS[a.want]
        t.check(r is not None and r["type"] == t.NAK and r["reason"] == want,
                "order %d/%d NAKed %s: %s" % (a.user, a.cl, a.want, r))


if __name__ == "__main__":
    main()

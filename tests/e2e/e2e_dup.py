#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Late duplicates for tests/e2e/test_duplicate_late.sh (run in the client namespace), with
the wire client of e2e_trade.py.

  e2e_dup.py a --nodes IP --state FILE   deposit, an order to completion, 1,000 newer
                                         requests, both re-sent: answered from dedup
  e2e_dup.py b --nodes IP --state FILE   after an eviction: 1,100 newer requests, the
                                         deposit re-sent: answered from the transfers table;
                                         the order re-sent: STALE_REQUEST (below the floor)
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_trade import (ACK, ADMIN_REPLY, BUY, CANCEL, EXEC_REPORT, FINAL, NAK, OMS,  # noqa: E402
                       QUOTE, REASON, SYM, Client, cancel, check, log, new_order, transfer)

USER = 3001
DEPOSIT_ID = 1000
DEPOSIT = 1000000
OTHER_IDS = range(2000, 2005)  # newer deposits among the 1,000 (fewer than the 8 pins)
UNKNOWN_SYM = 99               # orders NAKed UNKNOWN_SYMBOL: outcomes the window remembers


def transfer_reply(c, tid, amount, timeout=20):
    """The ADMIN_REPLY to TRANSFER tid (retried while the answer is a retry reason)."""
    msg = transfer(OMS, USER, tid, QUOTE, amount)
    end = time.time() + timeout
    while time.time() < end:
        c.send([msg])
        hits = c.wait(lambda m: m["type"] == ADMIN_REPLY and m["req_id"] == tid, 1.0)
        for h in hits:
            c.got.remove(h)
            if h["reason"] in (15, 16, 19, 26):  # NOT_LEADER BACKPRESSURE PARKED_FULL DB_ERROR
                continue
            return h
    return None


def newer_requests(c, first_cl, n):
    """n orders for an unknown symbol, sent in windows of 50: each NAKed UNKNOWN_SYMBOL (a
    RATE_LIMITED or PARKED_FULL one, which is not remembered, is sent again)."""
    cl = first_cl
    while cl < first_cl + n:
        todo = set(range(cl, min(cl + 50, first_cl + n)))
        end = time.time() + 20
        while todo and time.time() < end:
            for k in sorted(todo):
                c.send([new_order(USER, k, UNKNOWN_SYM, BUY, 100, 1)])
            stop = time.time() + 1.0
            while todo and time.time() < stop:
                c.poll(0.02)
                for m in c.got:
                    if m["type"] == NAK and m.get("user") == USER and m["cl"] in todo:
                        check_quiet(m["reason"] in (2, 17, 19),
                                    "order %d NAKed %s" % (m["cl"], REASON.get(m["reason"])))
                        if m["reason"] == 2:
                            todo.discard(m["cl"])
                c.got = [m for m in c.got if not (m["type"] == NAK and m.get("user") == USER)]
            if todo:
                time.sleep(0.1)  # rate-limited: let the bucket refill
        check_quiet(not todo, "orders %s never answered UNKNOWN_SYMBOL" % sorted(todo))
        cl = min(cl + 50, first_cl + n)
    return cl


def check_quiet(cond, what):
    if not cond:
        log("FAIL:", what)
        sys.exit(1)


def phase_a(a):
    c = Client(a.nodes.split(","))
    r = transfer_reply(c, DEPOSIT_ID, DEPOSIT)
    check(r is not None and r["reason"] == 0 and r["value"] == DEPOSIT,
          "deposit %d applied: total %s" % (DEPOSIT_ID, r and r["value"]))
    first = r

    # A SubmitToME to completion: rests, then cancelled by the user (its CANCELLED says
    # done: the order's last report).
    order = new_order(USER, 1, SYM, BUY, 90, 3)
    ack = c.request(order, USER, 1)
    check(ack is not None and ack["type"] == ACK, "order 1 ACKed (sent to the ME)")
    rep = c.wait_reports(USER, 1, ("OPEN",))
    check("OPEN" in rep, "order 1 rests: %s" % rep)
    r = c.request(cancel(USER, 2, 1), USER, 2)
    check(r is not None and r["type"] == ACK, "cancel of order 1 ACKed")
    rep = c.wait_reports(USER, 1, (FINAL,))
    check(rep[-1:] == ["CANCELLED(done)"],
          "order 1 cancelled, its CANCELLED the last report (done): %s" % rep)

    # 1,000 newer requests: 995 orders and 5 deposits, the deposits spread among them.
    cl = 3
    for i, tid in enumerate(OTHER_IDS):
        cl = newer_requests(c, cl, 199)
        r = transfer_reply(c, tid, 10 + i)
        check_quiet(r is not None and r["reason"] == 0, "deposit %d: %s" % (tid, r))
    newer = (cl - 3) + len(OTHER_IDS)
    check(newer == 1000, "%d newer requests (995 orders NAKed, 5 deposits)" % newer)

    # The deposit again: the original answer, total included; not credited twice.
    r = transfer_reply(c, DEPOSIT_ID, DEPOSIT)
    check(r is not None and r["reason"] == first["reason"] and r["value"] == first["value"],
          "deposit %d re-sent: original answer (%s, total %s), got (%s, total %s)" %
          (DEPOSIT_ID, REASON.get(first["reason"]), first["value"],
           r and REASON.get(r["reason"]), r and r["value"]))
    # A different amount under the same id is refused, not applied.
    r = transfer_reply(c, DEPOSIT_ID, DEPOSIT + 1)
    check(r is not None and r["reason"] == 28, "same id, other amount: DUPLICATE_REQUEST")

    # The order again (same clientOrderId and content): the original ACK, same orderId, and
    # nothing new reaches the ME (no report for it, nothing rests).
    n_reports = len([m for m in c.got if m["type"] == EXEC_REPORT and m["user"] == USER])
    c.got = [m for m in c.got if not (m["type"] in (ACK, NAK) and m.get("cl") == 1)]
    again = c.request(order, USER, 1)
    check(again is not None and again["type"] == ACK and
          again["oid_seq"] == ack["oid_seq"] and again["oid_user"] == ack["oid_user"],
          "order 1 re-sent: the original ACK (orderId seq %d), not a new order" % ack["oid_seq"])
    c.poll(1.0)
    more = len([m for m in c.got if m["type"] == EXEC_REPORT and m["user"] == USER])
    check(more == n_reports, "no report for the re-sent order (%d then %d)" % (n_reports, more))
    with open(a.state, "w") as f:
        json.dump({"total": first["value"], "oid_seq": ack["oid_seq"], "cl": cl}, f)
    log("PASS phase a")


def phase_b(a):
    with open(a.state) as f:
        st = json.load(f)
    c = Client(a.nodes.split(","))
    # The first request hydrates the user again (the deposit among the 16 entries that came
    # back with the row); 1,100 newer ones push it out of the resident window.
    newer_requests(c, st["cl"], 1100)
    r = transfer_reply(c, DEPOSIT_ID, DEPOSIT)
    check(r is not None and r["reason"] == 0 and r["value"] == st["total"],
          "deposit %d re-sent after eviction and 1,100 more: original answer (total %d), got %s"
          % (DEPOSIT_ID, st["total"], r))
    # The order of phase a again: its outcome is long out of the window (it did not travel
    # with the row), and its id is below the floor the row carried back: refused
    # STALE_REQUEST, not executed a second time (nothing reaches the ME, no report).
    order = new_order(USER, 1, SYM, BUY, 90, 3)
    again = c.request(order, USER, 1)
    check(again is not None and again["type"] == NAK and again["reason"] == 32,
          "order 1 re-sent after eviction and 1,100 more: STALE_REQUEST, got %s" %
          str(again and (again["type"], REASON.get(again.get("reason")))))
    c.poll(1.0)
    reps = [m for m in c.got if m["type"] == EXEC_REPORT and m["user"] == USER]
    check(not reps, "no report for the stale re-send (%d)" % len(reps))
    log("PASS phase b")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("phase", choices=["a", "b"])
    p.add_argument("--nodes", required=True)
    p.add_argument("--state", required=True)
    a = p.parse_args()
    if a.phase == "a":
        phase_a(a)
    else:
        phase_b(a)


if __name__ == "__main__":
    main()

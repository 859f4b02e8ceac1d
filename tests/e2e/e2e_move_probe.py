#!/usr/bin/env python3
"""Trading probe of e2e_symbol_move_live (tests/e2e/test_symbol_move_live.sh), run in the
client namespace while a symbol moves between ME shards.

  e2e_move_probe.py --nodes IP,IP,IP --user U --symbol S --px P --seconds N --every-ms M
                    --go FILE [--cross-px X --cross-qty Q] [--max-outstanding K]

Every M ms (unless K of its orders are unanswered: then that tick is skipped and counted)
a new IOC buy of 1 at P (below every ask: it never trades, never rests) goes to
the first node's gateway (one gateway: the user's clientOrderIds arrive in order); each one ends REJECTED (SYMBOL_MOVING or SYMBOL_NOT_OWNED: the book is moving) or
CANCELLED (expired: the book took it and it did not cross), either saying done (its last
report; no DONE report follows). The trading pause the client
saw is the time from the last order taken before the first refused one to the first taken
after the last refused one (send times), at the probe's resolution M. Once FILE exists
(the move is done) and with --cross-px, one IOC buy of --cross-qty at X must fill against the
moved book (its asks). Prints one JSON line: sent, taken, refused, unanswered, pause_ms,
refusals by reason (NAKs the OMS gives a probe that outruns a loaded node, CAPACITY or
BACKPRESSURE, are counted apart and do not enter the pause), the cross's fills.
"""
import argparse
import json
import os
import select
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_trade import (EXEC, EXEC_REPORT, NAK, NEW_ORDER, Client, hdr, parse,  # noqa: E402
                       report_final)

BUY, LIMIT, IOC = 1, 1, 2
REASONS = {21: "SYMBOL_NOT_OWNED", 47: "SYMBOL_MOVING", 3: "HALTED"}


def ioc_buy(user, cl, symbol, px, qty):
    return hdr(NEW_ORDER, 72) + struct.pack("<QQIBBBBqqqQQ", user, cl, symbol, BUY, LIMIT, IOC,
                                            0, px, qty, 0, 0, 0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", required=True)
    p.add_argument("--user", type=int, required=True)
    p.add_argument("--symbol", type=int, required=True)
    p.add_argument("--px", type=int, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--every-ms", type=float, default=2.0)
    p.add_argument("--go", required=True)
    p.add_argument("--cross-px", type=int, default=0)
    p.add_argument("--cross-qty", type=int, default=0)
    # The user's open orders are bounded (64 per user; the probe's user rests about 36 of
    # the seed's): a tick with this many orders unanswered sends nothing, so a loaded node
    # makes the probe coarser rather than refuse it CAPACITY through the pause.
    p.add_argument("--max-outstanding", type=int, default=16)
    a = p.parse_args()
    c = Client(a.nodes.split(","))
    # Run-unique client order ids, above the seeding run's (a user's ids only grow).
    base = (1 << 63) | ((int(time.time() * 1000) & 0xffffffff) << 24)
    sent = {}      # cl -> send time
    outcome = {}   # cl -> "taken" | reason name
    end = time.time() + a.seconds
    nxt = time.time()
    k = 0
    node = 0
    cross_cl = None
    skipped = 0    # ticks without a send: max_outstanding orders were unanswered

    def absorb(msgs):
        for m in msgs:
            if m.get("user") != a.user or m["type"] not in (NAK, EXEC_REPORT):
                continue
            cl = m["cl"]
            if cl not in sent or cl in outcome:
                continue
            if m["type"] == NAK:
                outcome[cl] = "NAK_%d" % m["reason"]
            elif EXEC[m["exec"]] == "REJECTED":
                outcome[cl] = REASONS.get(m["reason"], "REJECTED_%d" % m["reason"])
            elif EXEC[m["exec"]] in ("CANCELLED", "DONE", "FILL"):
                outcome[cl] = "taken"

    while time.time() < end:
        now = time.time()
        if now >= nxt:
            if len(sent) - len(outcome) < a.max_outstanding:
                k += 1
                cl = base + k
                sent[cl] = now
                c.send([ioc_buy(a.user, cl, a.symbol, a.px, 1)], node)
            else:
                skipped += 1
            nxt += a.every_ms / 1000.0
            if nxt < now:
                nxt = now
        if cross_cl is None and a.cross_px and os.path.exists(a.go):
            k += 1
            cross_cl = base + k  # ids only grow: a higher one would make later ones stale
            c.send([ioc_buy(a.user, cross_cl, a.symbol, a.cross_px, a.cross_qty)], node)
        before = len(c.got)
        r, _, _ = select.select([c.sock], [], [], max(0.0, min(nxt, end) - time.time()))
        while r:  # everything that is there now (Client.poll(0) would read nothing)
            data, _ = c.sock.recvfrom(65536)
            c.got.extend(parse(data))
            r, _, _ = select.select([c.sock], [], [], 0)
        absorb(c.got[before:])
        if len(c.got) > 200000:
            c.got = []
    # Late answers.
    drain = time.time() + 3
    while time.time() < drain and len(outcome) < len(sent):
        before = len(c.got)
        c.poll(0.1)
        absorb(c.got[before:])
    fills = 0
    if cross_cl is not None:
        # Until its last report (the FILL or CANCELLED that says done).
        c.wait(lambda m: m["type"] == EXEC_REPORT and m.get("cl") == cross_cl and
               report_final(m), 5)
        fills = sum(m["last_qty"] for m in c.got if m["type"] == EXEC_REPORT and
                    m.get("cl") == cross_cl and EXEC[m["exec"]] == "FILL")
    order = sorted(sent, key=lambda cl: sent[cl])
    # Refused because the book was moving; other refusals (the OMS's CAPACITY or
    # BACKPRESSURE when the probe outruns a loaded node) say nothing of the move.
    moving = ("SYMBOL_MOVING", "SYMBOL_NOT_OWNED")
    refused = [cl for cl in order if outcome.get(cl) in moving]
    other = [cl for cl in order if cl in outcome and outcome[cl] not in moving and
             outcome[cl] != "taken"]
    taken = [cl for cl in order if outcome.get(cl) == "taken"]
    pause_ms = 0.0
    if refused:
        first, last = sent[refused[0]], sent[refused[-1]]
        before = [sent[cl] for cl in taken if sent[cl] < first]
        after = [sent[cl] for cl in taken if sent[cl] > last]
        lo = before[-1] if before else first
        hi = after[0] if after else last
        pause_ms = (hi - lo) * 1000.0
    by = {}
    for cl in refused + other:
        by[outcome[cl]] = by.get(outcome[cl], 0) + 1
    print(json.dumps({"sent": len(sent), "taken": len(taken), "refused": len(refused),
                      "other_refusals": len(other),
                      "unanswered": len(sent) - len(outcome), "pause_ms": round(pause_ms, 1),
                      "every_ms": a.every_ms, "skipped": skipped, "reasons": by,
                      "cross_filled": fills}))


if __name__ == "__main__":
    main()

"""Client of e2e_halt_burst (tests/e2e/test_halt_burst.sh), run in the client namespace.

  e2e_halt_burst.py --nodes IP,IP,IP --orders N --omsctl PATH --socket SOCK
                    --stop-pid PID --pids 1:PID,2:PID,3:PID --stats DIR

Rests N sells of qty 1 on symbol 1 (over four users, a few at a time: the ME keeps only a
small retention per stream in this test), SIGSTOPs the lagging OMS follower (--stop-pid),
halts symbol 1 with cancel-resting through omsctl on the leader's socket, SIGCONTs the
follower, and checks at the client that every order ended with exactly one CANCELLED (cause
HALT), which says done (REPORT_F_DONE: the order's last report, no DONE report after it) and
is the last report after its OPEN, that each user's reports came without a gap in their
sequence, and on every node that the ME never wrote over unacknowledged retention and
finished the halt in chunks.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_trade import (ACK, EXEC_REPORT, FINAL, NAK, REASON, SELL, Client, check,  # noqa: E402
                       is_final, log, new_order, read_stat, report_name)

SYM, BASE = 1, 1
OMS = 1
SELLERS = (2001, 2002, 2003, 2004)
CAUSE_HALT = 6
EXEC_CANCELLED = 5
BATCH = 8


def rest(c, n):
    """Rest n sells, BATCH at a time; one refused by the ME (BACKPRESSURE while acks catch
    up) is sent again under a new clientOrderId. Returns [(user, cl)] of the resting ones."""
    resting = []
    cl = {u: 0 for u in SELLERS}
    k = 0
    deadline = time.time() + 120
    while len(resting) < n and time.time() < deadline:
        batch = []
        for _ in range(min(BATCH, n - len(resting))):
            u = SELLERS[k % len(SELLERS)]
            k += 1
            cl[u] += 1
            batch.append((u, cl[u], 110 + k % 40))
        for u, o, px in batch:
            r = c.order(u, o, SYM, SELL, px, 1, timeout=30)
            check(r is not None, "order %d/%d answered" % (u, o))
            if r["type"] == NAK:
                log("order %d/%d NAKed %s: sent again" % (u, o, REASON.get(r["reason"])))
        for u, o, _ in batch:
            rep = c.wait_reports(u, o, ("OPEN", FINAL), timeout=10)
            if rep and rep[-1] == "OPEN":
                resting.append((u, o))
    check(len(resting) == n, "%d orders resting" % len(resting))
    return resting


def me_stat(a, pids, key):
    return {i: read_stat("%s/%d/stats" % (a.stats, i), pid, key) for i, pid in pids.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", required=True)
    p.add_argument("--orders", type=int, required=True)
    p.add_argument("--omsctl", required=True)
    p.add_argument("--socket", required=True)
    p.add_argument("--stop-pid", type=int, required=True)
    p.add_argument("--pids", required=True)
    p.add_argument("--stats", required=True)
    a = p.parse_args()
    pids = {int(k): int(v) for k, v in (x.split(":") for x in a.pids.split(","))}
    c = Client(a.nodes.split(","))
    for i, u in enumerate(SELLERS):
        check(c.deposit(OMS, u, 100 + i, BASE, 10000, all_nodes=True), "deposit base to %d" % u)
    resting = rest(c, a.orders)

    os.kill(a.stop_pid, signal.SIGSTOP)
    log("follower pid %d stopped" % a.stop_pid)
    try:
        t0 = time.time()
        out = subprocess.run([a.omsctl, "--socket", a.socket, "--json", "symbols", "halt",
                              "--symbol", str(SYM), "--cancel-resting"],
                             capture_output=True, text=True, timeout=60)
        check(out.returncode == 0, "halt with cancel-resting answered ok in %.2f s: %s" %
              (time.time() - t0, out.stdout.strip()[:200] or out.stderr.strip()[:200]))
        # Reports flow while the follower lags.
        c.poll(2.0)
    finally:
        os.kill(a.stop_pid, signal.SIGCONT)
        log("follower pid %d continued" % a.stop_pid)

    missing = []
    end = time.time() + 30
    while time.time() < end:
        missing = [(u, o) for u, o in resting
                   if not (c.reports(u, o) and is_final(c.reports(u, o)[-1]))]
        if not missing:
            break
        c.poll(0.2)
    check(not missing, "every order reached its last report (%d orders; missing %s)" %
          (len(resting), missing[:5]))
    bad = []
    for u, o in resting:
        reps = [m for m in c.got if m["type"] == EXEC_REPORT and m["user"] == u and m["cl"] == o]
        # Reports of one order, deduplicated by their per-user sequence (a resend is the same
        # report), after its OPEN.
        seen = {}
        for m in reps:
            seen.setdefault(m["seq"], m)
        kinds = [report_name(m) for _, m in sorted(seen.items())]
        tail = kinds[kinds.index("OPEN") + 1:] if "OPEN" in kinds else kinds
        cancelled = [m for m in seen.values() if m["exec"] == EXEC_CANCELLED]
        # Exactly one report after OPEN: the CANCELLED, saying done (no DONE after it).
        if tail != ["CANCELLED(done)"] or cancelled[0]["cause"] != CAUSE_HALT:
            bad.append((u, o, kinds))
    check(not bad, "each order: exactly one CANCELLED(HALT) after OPEN, which says done and "
          "is its last report %s" % bad[:5])
    for u in SELLERS:
        seqs = sorted({m["seq"] for m in c.got if m["type"] in (ACK, EXEC_REPORT) and
                       m.get("user") == u and m.get("seq")})
        gaps = [s for s, t in zip(seqs, seqs[1:]) if t != s + 1]
        check(not gaps, "user %d: reports %d..%d without a gap" % (u, seqs[0], seqs[-1]))

    # Every replica, the lagging one included, applied the same halt in chunks.
    end = time.time() + 20
    while time.time() < end:
        pending = me_stat(a, pids, "shard.2.me.BULK_PENDING")
        done = me_stat(a, pids, "shard.2.me.HALT_CANCELLED")
        if all(v == "0" for v in pending.values()) and \
                all(v == str(a.orders) for v in done.values()):
            break
        time.sleep(0.2)
    check(all(v == str(a.orders) for v in done.values()),
          "every node's ME cancelled %d orders by the halt: %s" % (a.orders, done))
    overrun = me_stat(a, pids, "shard.2.me.EVENTS_OVERRUN")
    check(all(v == "0" for v in overrun.values()), "no ME overran retention: %s" % overrun)
    deferred = me_stat(a, pids, "shard.2.me.BULK_DEFERRED")
    check(all(v is not None and int(v) > 0 for v in deferred.values()),
          "the halt waited for acks on every node (deferred steps %s)" % deferred)
    log("PASS")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A tiny trading client for the e2e tests (run in the client namespace): raw wire frames
(common/wire.h layouts) over a kernel UDP socket, retransmission of unanswered requests
(the OMS dedups on (user, clientOrderId), transfers on (user, transfer_id)).

  e2e_trade.py single  --nodes IP              deposit, rest, cross, check reports and funds
  e2e_trade.py cluster --nodes IP,IP,IP --pids 1:PID,2:PID,3:PID --stats DIR
                       trade, kill -9 the OMS leader, trade on, check nothing ACKed is lost

An order's reports are compared by name (report_name): the exec kind, with "(done)" when the
report says REPORT_F_DONE in its header flags, the order's last report (a FILL, CANCELLED or
AMENDED that leaves nothing live, every REJECTED; no DONE report follows it): an order that
rests and then fills reports ["OPEN", "FILL(done)"]. wait_reports(..., (FINAL,)) waits for
the order's last report.
"""
import argparse
import os
import select
import signal
import socket
import struct
import sys
import time

MAGIC = 0x44534D4F


def wire_define(name):
    """An integer #define of common/wire.h (the layouts below follow the same header)."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "common", "wire.h")) as f:
        for line in f:
            if line.startswith("#define %s " % name):
                return int(line.split()[2])
    raise SystemExit("e2e_trade: #define %s not found in common/wire.h" % name)


# The frame header's version: this tree's major and release minor (docs/wire.md).
VERSION_MAJOR = wire_define("WIRE_VERSION_MAJOR")
VERSION_MINOR = wire_define("WIRE_VERSION_MINOR_RELEASE")
PORT = 7400
SESSION = 500

NEW_ORDER, CANCEL, ACK, NAK, EXEC_REPORT = 1, 2, 5, 6, 7
REPORT_REPLAY = 8
TRANSFER, ADMIN_REPLY = 52, 57
BUY, SELL = 1, 2
LIMIT = 1
GTC = 1
EXEC = {1: "PENDING", 2: "OPEN", 3: "REJECTED", 4: "FILL", 5: "CANCELLED", 6: "DONE",
        7: "AMENDED", 8: "CANCEL_REJECTED"}
REPORT_F_DONE = 0x0001  # EXEC_REPORT hdr.flags: the order's last report
DONE_KINDS = (3, 4, 5, 6, 7)  # REJECTED, FILL, CANCELLED, DONE, AMENDED: may say done
FINAL = "final"  # in wait_reports' want_last: the order's last report, whatever its kind
REASON = {0: "NONE", 1: "BAD_REQUEST", 2: "UNKNOWN_SYMBOL", 12: "CAPACITY", 13: "UNKNOWN_ORDER",
          14: "NOT_OWNER",
          15: "NOT_LEADER", 16: "BACKPRESSURE", 18: "INSUFFICIENT_FUNDS",
          19: "PARKED_FULL", 26: "DB_ERROR", 28: "DUPLICATE_REQUEST", 29: "UNKNOWN_USER",
          32: "STALE_REQUEST"}
RETRY_REASONS = (15, 16, 19, 26)  # NOT_LEADER, BACKPRESSURE, PARKED_FULL, DB_ERROR


def log(*a):
    print("[trade %s]" % time.strftime("%H:%M:%S"), *a, flush=True)


def report_name(m):
    """An EXEC_REPORT's name as the checks compare them: "FILL", "FILL(done)" when it says
    REPORT_F_DONE; any other header flag, or the flag on a kind that cannot end an order,
    spelled out ("OPEN(flags 0x1)"), so that no check takes it for a valid report."""
    name = EXEC[m["exec"]]
    if m["flags"] == REPORT_F_DONE and m["exec"] in DONE_KINDS:
        return name + "(done)"
    if m["flags"]:
        return "%s(flags 0x%x)" % (name, m["flags"])
    return name


def is_final(name):
    """Whether the report named name (report_name) is its order's last: it says done, or it
    is a DONE or a REJECTED (a node of an earlier release, which never set the flag)."""
    return name.endswith("(done)") or name in ("DONE", "REJECTED")


def report_final(m):
    """is_final of a parsed EXEC_REPORT m (wire_report_final)."""
    return is_final(report_name(m))


def hdr(mtype, length, shard=0):
    return struct.pack("<HHHH", mtype, length, shard, 0)


def new_order(user, cl, symbol, side, px, qty):
    return hdr(NEW_ORDER, 72) + struct.pack("<QQIBBBBqqqQQ", user, cl, symbol, side, LIMIT,
                                            GTC, 0, px, qty, 0, 0, 0)


def cancel(user, cl, orig):
    return hdr(CANCEL, 40) + struct.pack("<QQQQ", user, cl, orig, 0)


def report_replay(user, first, last):
    return hdr(REPORT_REPLAY, 32) + struct.pack("<QQQ", user, first, last)


def transfer(shard, user, tid, asset, amount):
    return hdr(TRANSFER, 40, shard) + struct.pack("<QQIIq", user, tid, asset, 0, amount)


def frame(msgs):
    body = b"".join(msgs)
    return struct.pack("<IBBHIHBB", MAGIC, VERSION_MAJOR, 0, len(msgs), SESSION, 16 + len(body),
                       VERSION_MINOR, 0) + body


def parse(data):
    out = []
    if len(data) < 16:
        return out
    magic, _major, _flags, count, _sender, length, _minor, _r = struct.unpack_from("<IBBHIHBB",
                                                                                   data)
    if magic != MAGIC:
        return out
    pos = 16
    for _ in range(count):
        mtype, mlen, shard, flags = struct.unpack_from("<HHHH", data, pos)
        body = data[pos + 8:pos + mlen]
        m = {"type": mtype, "shard": shard, "flags": flags}
        if mtype == ACK:
            m["user"], m["cl"], m["oid_user"], m["oid_seq"], m["seq"], m["time"] = \
                struct.unpack_from("<QQQQQQ", body)
        elif mtype == NAK:
            (m["user"], m["cl"], m["reason"], m["owner"], m["leader"], m["epoch"],
             m["seq"]) = struct.unpack_from("<QQHHIQQ", body)
        elif mtype == EXEC_REPORT:
            (m["user"], m["cl"], _ou, _os, m["seq"], m["time"], m["symbol"], m["exec"],
             m["side"], m["liq"], m["cause"], m["reason"], _r0, _r1, m["last_px"],
             m["last_qty"], m["cum_qty"], m["leaves"], m["fee"]) = \
                struct.unpack_from("<QQQQQQIBBBBHHIqqqqq", body)
        elif mtype == ADMIN_REPLY:
            m["req_id"], m["reason"], _r, m["leader"], m["value"] = \
                struct.unpack_from("<QHHIQ", body)
        out.append(m)
        pos += mlen
    return out


class Client:
    def __init__(self, nodes):
        self.nodes = nodes
        self.node = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # Reports arrive in bursts: a default receive buffer (≈200 KiB) overflows.
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE (root)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind(("0.0.0.0", 0))
        self.got = []   # every message received, in order

    def send(self, msgs, node=None):
        ip = self.nodes[self.node if node is None else node]
        self.sock.sendto(frame(msgs), (ip, PORT))

    def poll(self, timeout):
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                return
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                return
            data, _ = self.sock.recvfrom(65536)
            self.got.extend(parse(data))

    def find(self, pred):
        return [m for m in self.got if pred(m)]

    def wait(self, pred, timeout):
        end = time.time() + timeout
        while time.time() < end:
            hits = self.find(pred)
            if hits:
                return hits
            self.poll(min(0.05, max(0.0, end - time.time())))
        return self.find(pred)

    def deposit(self, shard, user, tid, asset, amount, timeout=20, all_nodes=False):
        """TRANSFER to the OMS shard (admin, straight to the shard); retried until the
        ADMIN_REPLY for tid arrives."""
        end = time.time() + timeout
        msg = transfer(shard, user, tid, asset, amount)
        while time.time() < end:
            if all_nodes:
                for i in range(len(self.nodes)):
                    self.send([msg], i)
            else:
                self.send([msg])
            hits = self.wait(lambda m: m["type"] == ADMIN_REPLY and m["req_id"] == tid, 0.5)
            for h in hits:
                if h["reason"] == 0:
                    return True
                if h["reason"] not in RETRY_REASONS:
                    raise SystemExit("deposit %d refused: %s" % (tid, REASON.get(h["reason"],
                                                                             h["reason"])))
                self.got.remove(h)
        return False

    def order(self, user, cl, symbol, side, px, qty, timeout=20, rotate=False):
        """NEW_ORDER until ACKed or NAKed for good. Returns the ACK or NAK."""
        return self.request(new_order(user, cl, symbol, side, px, qty), user, cl, timeout,
                            rotate)

    def request(self, msg, user, cl, timeout=20, rotate=False):
        """A client request until ACKed or NAKed for good. Returns the ACK or NAK."""
        end = time.time() + timeout
        tries = 0
        while time.time() < end:
            self.send([msg])
            tries += 1
            hits = self.wait(lambda m: m["type"] in (ACK, NAK) and m.get("user") == user and
                             m.get("cl") == cl, 0.5)
            for h in hits:
                if h["type"] == ACK:
                    return h
                if h["reason"] == 28:  # DUPLICATE_REQUEST: the first attempt was taken
                    acks = self.find(lambda m: m["type"] == ACK and m["user"] == user and
                                     m["cl"] == cl)
                    if acks:
                        return acks[0]
                    return h
                if h["reason"] not in RETRY_REASONS:
                    return h
                self.got.remove(h)
            if rotate and not hits and tries % 3 == 0:
                self.node = (self.node + 1) % len(self.nodes)
                log("no answer: trying node", self.nodes[self.node])
        return None

    def reports(self, user, cl):
        """The names (report_name) of the order's reports, in arrival order."""
        return [report_name(m) for m in self.got
                if m["type"] == EXEC_REPORT and m["user"] == user and m["cl"] == cl]

    def wait_reports(self, user, cl, want_last, timeout=10):
        """Poll until the order's latest report is named in want_last (FINAL: its last
        report, is_final); its reports' names."""
        end = time.time() + timeout
        while time.time() < end:
            r = self.reports(user, cl)
            if r and (r[-1] in want_last or (FINAL in want_last and is_final(r[-1]))):
                return r
            self.poll(0.05)
        return self.reports(user, cl)


def check(cond, what):
    if not cond:
        log("FAIL:", what)
        sys.exit(1)
    log("ok:", what)


SYM, BASE, QUOTE = 1, 1, 2
OMS, ME = 1, 2
SELLER, BUYER = 1001, 1002


def single(a):
    c = Client(a.nodes.split(","))
    check(c.deposit(OMS, SELLER, 1, BASE, 10), "deposit 10 base to the seller")
    check(c.deposit(OMS, BUYER, 2, QUOTE, 1000000), "deposit 1000000 quote to the buyer")

    r = c.order(SELLER, 11, SYM, SELL, 100, 10)
    check(r is not None and r["type"] == ACK, "resting sell acknowledged")
    rep = c.wait_reports(SELLER, 11, ("OPEN",))
    check("OPEN" in rep, "sell reported OPEN: %s" % rep)

    r = c.order(BUYER, 21, SYM, BUY, 100, 10)
    check(r is not None and r["type"] == ACK, "crossing buy acknowledged")
    rb = c.wait_reports(BUYER, 21, (FINAL,))
    rs = c.wait_reports(SELLER, 11, (FINAL,))
    check(rb[-1:] == ["FILL(done)"], "buy's last report is a FILL that says done: %s" % rb)
    check(rs[-2:] == ["OPEN", "FILL(done)"], "sell reported OPEN, then a FILL that says done: "
          "%s" % rs)
    fills = [m for m in c.got if m["type"] == EXEC_REPORT and m["exec"] == 4]
    check(all(f["last_px"] == 100 and f["last_qty"] == 10 for f in fills),
          "both fills at 100 x 10")

    # Funds moved: the seller has no base left, the buyer has 10.
    r = c.order(SELLER, 12, SYM, SELL, 100, 1)
    check(r is not None and r["type"] == NAK and r["reason"] == 18,
          "seller's next sell NAKed INSUFFICIENT_FUNDS (base moved away): %s" % r)
    r = c.order(BUYER, 22, SYM, SELL, 120, 10)
    check(r is not None and r["type"] == ACK, "buyer can sell the 10 base it bought")
    rep = c.wait_reports(BUYER, 22, ("OPEN",))
    check("OPEN" in rep, "buyer's sell rests: %s" % rep)
    r = c.order(BUYER, 23, SYM, SELL, 120, 1)
    check(r is not None and r["type"] == NAK and r["reason"] == 18,
          "and no more than 10 (INSUFFICIENT_FUNDS)")

    # A bad order: unknown symbol.
    r = c.order(BUYER, 24, 99, BUY, 100, 1)
    check(r is not None and r["type"] == NAK and r["reason"] == 2,
          "unknown symbol NAKed UNKNOWN_SYMBOL (%s)" %
          (REASON.get(r["reason"], r["reason"]) if r and r["type"] == NAK else r))

    # Report replay: every numbered answer the buyer got, asked for again from seq 2 on,
    # comes back byte for byte the same (same type, id and fields), in seq order, once.
    numbered = lambda m: (m.get("user") == BUYER and m["type"] in (ACK, NAK, EXEC_REPORT)  # noqa: E731
                          and m.get("seq", 0) != 0)
    orig = {}
    for m in c.got:
        if numbered(m):
            orig.setdefault(m["seq"], m)
    check(sorted(orig) == list(range(1, max(orig) + 1)),
          "the buyer's answers carry seqs 1..%d without a hole" % max(orig))
    before = len(c.got)
    c.send([report_replay(BUYER, 2, 0)])
    end = time.time() + 5
    while time.time() < end and len([m for m in c.got[before:] if numbered(m)]) < len(orig) - 1:
        c.poll(0.1)
    again = [m for m in c.got[before:] if numbered(m)]
    check([m["seq"] for m in again] == list(range(2, max(orig) + 1)),
          "REPORT_REPLAY from seq 2: seqs %s re-sent in order" % [m["seq"] for m in again])
    check(all(m == orig[m["seq"]] for m in again), "each re-sent answer equals the original")
    before = len(c.got)
    c.send([report_replay(BUYER, 3, 4)])
    c.poll(1.0)
    check([m["seq"] for m in c.got[before:] if numbered(m)] == [3, 4],
          "REPORT_REPLAY 3..4: exactly seqs 3 and 4")
    log("PASS")


def restart(a):
    """Phase a before a kill -9 of the node, phase b after its restart from its files,
    phase c after a second one (test_restart.sh with SNAPSHOT_BY=shadow)."""
    c = Client(a.nodes.split(","))
    if a.phase == "c":
        # The buyer's sell of 4 at 120 (phase b) still rests and holds all its base.
        r = c.order(BUYER, 25, SYM, SELL, 120, 1, timeout=30)
        check(r is not None and r["type"] == NAK and r["reason"] == 18,
              "the buyer has no base left to sell (INSUFFICIENT_FUNDS): %s" % r)
        r = c.order(SELLER, 12, SYM, BUY, 120, 1)
        check(r is not None and r["type"] == ACK, "the seller buys 1 at 120: %s" % r)
        rep = c.wait_reports(SELLER, 12, (FINAL,))
        check(rep[-1:] == ["FILL(done)"],
              "it fills against the buyer's sell rested before the restart: %s" % rep)
        # A new sell of 4 would be refused for funds (18): only the original answers.
        r = c.order(BUYER, 23, SYM, SELL, 120, 4)
        check(r is not None and ((r["type"] == NAK and r["reason"] == 28) or r["type"] == ACK),
              "clientOrderId 23 is still known (its original answered): %s" % r)
        log("PASS (phase c)")
        return
    if a.phase == "a":
        check(c.deposit(OMS, SELLER, 1, BASE, 4), "deposit 4 base to the seller")
        check(c.deposit(OMS, BUYER, 2, QUOTE, 1000000), "deposit 1000000 quote to the buyer")
        r = c.order(SELLER, 11, SYM, SELL, 100, 4)
        check(r is not None and r["type"] == ACK, "sell 4 acknowledged")
        check("OPEN" in c.wait_reports(SELLER, 11, ("OPEN",)), "sell rests")
        r = c.order(BUYER, 21, SYM, BUY, 100, 1)
        check(r is not None and r["type"] == ACK, "buy 1 acknowledged")
        check(c.wait_reports(BUYER, 21, (FINAL,))[-1:] == ["FILL(done)"], "buy 1 filled")
        log("PASS (phase a)")
        return
    # After the restart: the book still holds the seller's remaining 3, the buyer still has
    # its quote and the 1 base it bought.
    r = c.order(BUYER, 22, SYM, BUY, 100, 3, timeout=30)
    check(r is not None and r["type"] == ACK, "buy 3 after the restart acknowledged: %s" % r)
    rep = c.wait_reports(BUYER, 22, (FINAL,))
    check(rep[-1:] == ["FILL(done)"], "it fills against the order rested before the kill: %s"
          % rep)
    r = c.order(BUYER, 23, SYM, SELL, 120, 4)
    check(r is not None and r["type"] == ACK, "the buyer sells the 4 base it holds (1 + 3)")
    r = c.order(BUYER, 24, SYM, SELL, 120, 1)
    check(r is not None and r["type"] == NAK and r["reason"] == 18,
          "and not a fifth (INSUFFICIENT_FUNDS)")
    r = c.order(BUYER, 21, SYM, BUY, 100, 1)
    check(r is not None and ((r["type"] == NAK and r["reason"] == 28) or
                             (r["type"] == ACK and r["oid_seq"] & (2**48 - 1) == 1)),
          "the pre-kill clientOrderId 21 is still known (its original orderId answered): %s"
          % r)
    log("PASS (phase b)")


def read_stat(path, pid, key):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.kill(pid, signal.SIGUSR1)
    for _ in range(50):
        if os.path.exists(path):
            break
        time.sleep(0.1)
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.strip().partition(" ")
                if k == key:
                    return v
    except FileNotFoundError:
        pass
    return None


def cluster(a):
    nodes = a.nodes.split(",")
    pids = {int(k): int(v) for k, v in (p.split(":") for p in a.pids.split(","))}
    c = Client(nodes)

    def leader_of(shard):
        for i, pid in pids.items():
            if read_stat("%s/%d/stats" % (a.stats, i), pid, "shard.%d.is_leader" % shard) == "1":
                return i
        return None

    check(c.deposit(OMS, SELLER, 1, BASE, 100000, all_nodes=True), "deposit base (cluster)")
    check(c.deposit(OMS, BUYER, 2, QUOTE, 100000000, all_nodes=True), "deposit quote (cluster)")
    acked = []
    cl = 100

    def trade(n, rotate=False):
        nonlocal cl
        for _ in range(n):
            cl += 1
            r = c.order(SELLER, cl, SYM, SELL, 100, 1, rotate=rotate, timeout=30)
            check(r is not None and r["type"] == ACK, "sell %d acknowledged" % cl)
            acked.append((SELLER, cl))
            r = c.order(BUYER, cl, SYM, BUY, 100, 1, rotate=rotate, timeout=30)
            check(r is not None and r["type"] == ACK, "buy %d acknowledged" % cl)
            acked.append((BUYER, cl))

    trade(5)
    for u, o in acked:
        rep = c.wait_reports(u, o, (FINAL,))
        check(rep[-1:] == ["FILL(done)"], "order %d/%d filled and done: %s" % (u, o, rep))

    oms_leader = leader_of(OMS)
    check(oms_leader is not None, "OMS leader is node %s" % oms_leader)
    # The client sits behind a node that survives, unless told otherwise.
    survivors = [i for i in pids if i != oms_leader]
    c.node = survivors[0] - 1
    # A resting order that must survive the failover.
    cl += 1
    r = c.order(SELLER, cl, SYM, SELL, 101, 3)
    check(r is not None and r["type"] == ACK, "resting sell before the kill acknowledged")
    resting = (SELLER, cl)
    # A burst of resting sells in flight when the leader dies: some sagas are PENDING.
    burst = list(range(1000, 1030))
    for i, b in enumerate(burst):
        c.send([new_order(SELLER, b, SYM, SELL, 120 + i, 1)])
    c.wait(lambda m: m["type"] == ACK and m["user"] == SELLER and m["cl"] in burst, 5)
    os.kill(pids[oms_leader], signal.SIGKILL)
    del pids[oms_leader]
    t0 = time.time()
    new = None
    while time.time() - t0 < 15 and new is None:
        new = leader_of(OMS)
        if new is None:
            time.sleep(0.2)
    check(new is not None and new != oms_leader, "new OMS leader: node %s after %.1f s" %
          (new, time.time() - t0))
    # Every burst order is (re)submitted with its own id: the OMS dedups what its window
    # holds (16 outcomes per user) and refuses the older ones STALE_REQUEST (32: executed or
    # not, never twice; the cancels below prove each rests once).
    for i, b in enumerate(burst):
        r = c.order(SELLER, b, SYM, SELL, 120 + i, 1, rotate=True, timeout=30)
        check(r is not None and (r["type"] == ACK or r["reason"] in (28, 32)),
              "burst order %d acknowledged (or a duplicate of an acknowledged one)" % b)
    cl = 1100  # clientOrderIds increase per user: above the burst's
    trade(5, rotate=True)
    # Cross the order that rested before the kill.
    cl += 1
    r = c.order(BUYER, cl, SYM, BUY, 101, 3, rotate=True)
    check(r is not None and r["type"] == ACK, "buy crossing the pre-kill resting order acked")
    acked.append((BUYER, cl))
    acked.append(resting)
    lost = []
    for u, o in acked:
        rep = c.wait_reports(u, o, (FINAL, "OPEN"), timeout=15)
        if not rep or not (rep[-1] == "OPEN" or is_final(rep[-1])):
            lost.append((u, o, rep))
    check(not lost, "every acknowledged order reached OPEN or its last report (%d orders) %s" %
          (len(acked), lost[:5]))
    rep = c.wait_reports(*resting, (FINAL,), timeout=10)
    check(rep[-1:] == ["FILL(done)"], "the pre-kill resting order filled after failover: %s" %
          rep)
    # Not lost: every burst order rests, so a cancel finds it (a lost one is UNKNOWN_ORDER).
    for b in burst:
        r = c.request(cancel(SELLER, b + 1000, b), SELLER, b + 1000, rotate=True)
        check(r is not None and r["type"] == ACK, "cancel of burst order %d accepted (%s)" %
              (b, REASON.get(r["reason"], r["reason"]) if r and r["type"] == NAK else "ack"))
    for b in burst:
        rep = c.wait_reports(SELLER, b, (FINAL,), timeout=10)
        check(rep[-1:] == ["CANCELLED(done)"], "burst order %d cancelled and done: %s" %
              (b, rep))
    log("PASS")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["single", "cluster", "restart"])
    p.add_argument("--phase", choices=["a", "b", "c"], default="a")
    p.add_argument("--nodes", required=True)
    p.add_argument("--pids")
    p.add_argument("--stats")
    a = p.parse_args()
    if a.mode == "single":
        single(a)
    elif a.mode == "restart":
        restart(a)
    else:
        cluster(a)


if __name__ == "__main__":
    main()

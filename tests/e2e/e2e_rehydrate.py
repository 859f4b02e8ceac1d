#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The client side of e2e_rehydrate (tests/e2e/test_rehydrate.sh; issue 17): one user is
evicted and re-hydrated between orders, and what the client sees must not show it.

Run in the client namespace. It speaks the wire format over UDP through one gateway node
(e2e_trade.Client, deposits routed by the gateway with WIRE_TRANSFER_F_ROUTE), and looks at
the cluster from the side: omsctl on the nodes' control sockets (users show / evict), their
stats dumps (SIGUSR1) and the PostgreSQL rows (deploy/pg/pgctl psql). Every check asserts an
exact value; the first one that fails ends the run with exit 1.

User U buys from seller S, whom the other OMS shard owns, on symbol 1 (maker 2 bps, taker
7 bps, quote fees rounded up once per order). Phase by phase:
  A  S deposits 15 base and rests sell 15 @ 100; U deposits 1,000,000 quote (transfer T) and
     buys 10 @ 100 (order 1, clientOrderId 101): ACK and a FILL that says done (the
     order's last report, REPORT_F_DONE; no DONE report) numbered 1, 2.
  B  users evict U: absent on every replica of both OMS shards, accounts row released
     (owner_shard NULL) holding egress_seq 2, the balances, and T in the transfers table.
  C  order 2 (102, buy 5 @ 100) re-hydrates U (hydrations + 1 on the owner shard): ACK and
     FILL (done) numbered 3, 4 (the sequence continues, no restart at 1, no gap);
     T re-sent: ADMIN_REPLY NONE with the ORIGINAL total 1,000,000 (not 998,498, not a
     second credit); 101 re-sent: ACK with order 1's orderId, nothing executed.
  D  evicted again; 101 re-sent first (it hydrates U): the original orderId again; then T
     again: the original outcome. Sixteen refused orders (unknown symbol, outcomes the
     window remembers) push T and 101 out of U's window: T re-sent is looked up in the
     transfers table (xfer_lookups, xfer_found + 1) and answered with the original outcome;
     101 re-sent is refused STALE_REQUEST (its outcome forgotten, never executed again).
  E  evicted a third time: the row holds every balance once (quote 998,498, base 15),
     egress_seq = the last number the client saw, one transfers row for T; every numbered
     answer U received over the whole run carries 1..N exactly once, in order.
"""
import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_trade import (ACK, ADMIN_REPLY, BUY, EXEC, EXEC_REPORT, NAK, REASON,  # noqa: E402
                       RETRY_REASONS, SELL, TRANSFER, Client, hdr, new_order, report_final,
                       report_name)

SYM, BASE, QUOTE = 1, 1, 2
U, S = 4001, 4002          # S: the first id from 4002 on that the other OMS shard owns
T, T_S = 7001, 9001         # U's deposit (the one retried) and S's
DEPOSIT_Q = 1000000         # quote U deposits
DEPOSIT_B = 15              # base S deposits (and sells)
TRANSFER_F_ROUTE = 0x0001
UNKNOWN_SYMBOL, STALE_REQUEST = 2, 32
RETRY_S = 3.0               # between retransmissions: one answer per request, almost always

A = None                    # the command line


def log(*a):
    print("[rehydrate %s]" % time.strftime("%H:%M:%S"), *a, flush=True)


def check(cond, what):
    if not cond:
        log("FAIL:", what)
        sys.exit(1)
    log("ok:", what)


def fee(notional, bps):
    return -(-notional * bps // 10000)


# ---- the cluster from the side: omsctl, stats dumps, PostgreSQL ----

def ctl(node, *args):
    """omsctl --json ARGS on NODE's control socket: the result object."""
    p = subprocess.run([A.omsctl, "--socket", "%s/%d/omsd.sock" % (A.tmp, node),
                        "--timeout-ms", "5000", "--json"] + list(args),
                       capture_output=True, text=True)
    try:
        out = json.loads(p.stdout)
    except ValueError:
        out = None
    return p.returncode, out, p.stdout + p.stderr


def user_rows(node, user):
    """users show --user USER on NODE: {shard: row} for its OMS shards."""
    rc, out, text = ctl(node, "users", "show", "--user", str(user))
    if rc != 0 or out is None:
        raise SystemExit("node %d: users show --user %d: exit %d: %s" % (node, user, rc, text))
    return {r["shard"]: r for r in out["result"]["shards"]}


def balances(row):
    return {b["asset"]: (b["total"], b["reserved"]) for b in row.get("balances", [])}


def stat(node, key):
    path = "%s/%d/stats" % (A.tmp, node)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.kill(A.pids[node], signal.SIGUSR1)
    for _ in range(50):
        if os.path.exists(path):
            break
        time.sleep(0.1)
    time.sleep(0.05)
    with open(path) as f:
        for line in f:
            k, _, v = line.strip().partition(" ")
            if k == key:
                return int(v)
    raise SystemExit("node %d: no %s in its stats" % (node, key))


def leader_of(shard, timeout=15):
    """The node that leads SHARD (waiting through an election), or None."""
    end = time.time() + timeout
    while True:
        for n in A.pids:
            if stat(n, "shard.%d.is_leader" % shard) == 1:
                return n
        if time.time() > end:
            return None
        time.sleep(0.2)


def oms_counter(name):
    """The owner shard's counter, from its leader's replica (replicated state; what the
    leader answered, it applied)."""
    leader = leader_of(A.owner)
    if leader != A.owner_leader:
        log("note: OMS shard %d is now led by node %s (was %s)" % (A.owner, leader,
                                                                  A.owner_leader))
        A.owner_leader = leader
    return stat(A.owner_leader, "shard.%d.oms.%s" % (A.owner, name))


def psql(query):
    p = subprocess.run([A.pgctl, "psql", A.pgdir, "-tA", "-F", "|", "-c", query],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("psql: %s" % p.stderr)
    return p.stdout.strip()


def pg_balances(assets, totals):
    """The accounts row's assets and totals arrays as {asset: total}."""
    a = [int(x) for x in assets.strip("{}").split(",") if x]
    t = [int(x) for x in totals.strip("{}").split(",") if x]
    return dict(zip(a, t)) if len(a) == len(t) else None


def account_row(user):
    return psql("SELECT coalesce(owner_shard, -1), version, egress_seq, assets, totals, "
                "xfer_id_max, cl_ord_floor FROM accounts WHERE user_id = %d" % user)


def evict(user, gateway_node):
    """users evict from a node that leads no OMS shard (admin forwarding), then wait until
    every replica of every OMS shard says absent and the row's claim is released."""
    rc, out, text = ctl(gateway_node, "users", "evict", "--user", str(user))
    check(rc == 0, "users evict --user %d from node %d: %s" % (user, gateway_node,
                                                               text.strip()[:300]))
    end = time.time() + 15
    where = {}
    while time.time() < end:
        where = {(n, s): r["status"] for n in A.pids for s, r in user_rows(n, user).items()}
        if all(v == "absent" for v in where.values()):
            break
        time.sleep(0.2)
    check(where and all(v == "absent" for v in where.values()),
          "user %d absent on every replica of every OMS shard: %s" % (user, where))
    row = ""
    while time.time() < end:
        row = account_row(user)
        if row.startswith("-1|"):
            break
        time.sleep(0.2)
    check(row.startswith("-1|"), "user %d's accounts row released (owner_shard NULL): %s" %
          (user, row))
    return row


# ---- the client ----

class Rh(Client):
    def answers(self, user):
        """Every numbered answer (ACK, NAK with a seq, EXEC_REPORT) USER got, in order."""
        return [m for m in self.got if m.get("user") == user and
                m["type"] in (ACK, NAK, EXEC_REPORT) and m.get("seq", 0) != 0]

    def wait_since(self, start, pred, timeout):
        """Messages received from index start on that match pred, waiting up to timeout."""
        end = time.time() + timeout
        while True:
            hits = [m for m in self.got[start:] if pred(m)]
            if hits or time.time() >= end:
                return hits
            self.poll(min(0.05, max(0.0, end - time.time())))

    def transfer(self, user, tid, asset, amount, timeout=30):
        """A routed TRANSFER until an ADMIN_REPLY for tid that is not a retry reason: the
        replies received for it (the final one last)."""
        msg = struct.pack("<HHHH", TRANSFER, 40, 0, TRANSFER_F_ROUTE) + \
            struct.pack("<QQIIq", user, tid, asset, 0, amount)
        end = time.time() + timeout
        start = len(self.got)
        while time.time() < end:
            self.send([msg])
            hits = self.wait_since(start, lambda m: m["type"] == ADMIN_REPLY and
                                   m["req_id"] == tid and m["reason"] not in RETRY_REASONS,
                                   RETRY_S)
            if hits:
                self.poll(0.3)  # an answer to a retransmission, if any, lands here too
                return [m for m in self.got[start:]
                        if m["type"] == ADMIN_REPLY and m["req_id"] == tid]
        return []

    def request_once(self, msg, user, cl, timeout=30):
        """A request until an ACK or a NAK that is not a retry reason arrives after it was
        first sent: that answer."""
        end = time.time() + timeout
        start = len(self.got)
        while time.time() < end:
            self.send([msg])
            hits = self.wait_since(start, lambda m: m["type"] in (ACK, NAK) and
                                   m.get("user") == user and m.get("cl") == cl and
                                   (m["type"] == ACK or m["reason"] not in RETRY_REASONS),
                                   RETRY_S)
            if hits:
                return hits[0]
        return None

    def reports(self, user, cl):
        return [m for m in self.got if m["type"] == EXEC_REPORT and m["user"] == user and
                m["cl"] == cl]

    def wait_done(self, user, cl, timeout=15):
        """Until the order's last report (one that says done)."""
        end = time.time() + timeout
        while time.time() < end:
            r = self.reports(user, cl)
            if r and report_final(r[-1]):
                break
            self.poll(0.05)
        return self.reports(user, cl)


def describe(m):
    if m["type"] == ACK:
        return "ACK(cl %d, orderId %x:%x, seq %d)" % (m["cl"], m["oid_user"], m["oid_seq"],
                                                      m["seq"])
    if m["type"] == NAK:
        return "NAK(cl %d, %s, seq %d)" % (m["cl"], REASON.get(m["reason"], m["reason"]),
                                           m["seq"])
    return "%s(cl %d, seq %d)" % (report_name(m), m["cl"], m["seq"])


def check_reply(replies, what, reason, value):
    """Every ADMIN_REPLY for a transfer says (reason, value), and there is one."""
    got = [(REASON.get(r["reason"], r["reason"]), r["value"]) for r in replies]
    check(len(replies) >= 1 and all(r["reason"] == reason and r["value"] == value
                                    for r in replies),
          "%s: ADMIN_REPLY %s, want (%s, %d)" % (what, got, REASON.get(reason, reason), value))


def check_user(node_shard_rows, want, what):
    """The owner's replicas all hold want = {asset: total}, nothing reserved, no order."""
    bad = {}
    for n, rows in node_shard_rows.items():
        r = rows[A.owner]
        b = {a: t for a, (t, res) in balances(r).items()}
        if (r["status"] != "resident" or b != want or r["orders"] != 0 or r["live"] != 0 or
                any(res != 0 for _, res in balances(r).values())):
            bad[n] = r
    check(not bad, "%s: U resident on shard %d with %s, no order, nothing reserved, on every "
          "replica %s" % (what, A.owner, want, bad))


def all_rows(user):
    """users show on every node, once every replica applied what the leader did (until the
    owner's rows agree, 5 s)."""
    end = time.time() + 5
    while True:
        rows = {n: user_rows(n, user) for n in A.pids}
        views = {json.dumps({k: v for k, v in rows[n][A.owner].items()
                             if k not in ("applied", "role")}, sort_keys=True)
                 for n in A.pids}
        if len(views) == 1:
            return rows
        if time.time() > end:
            log("the owner's replicas still differ: %s" % sorted(views))
            return rows
        time.sleep(0.2)


def main():
    global A
    p = argparse.ArgumentParser()
    p.add_argument("--gateway", required=True, help="IP of the node the client talks to")
    p.add_argument("--gateway-node", type=int, required=True)
    p.add_argument("--pids", required=True, help="1:PID,2:PID,3:PID")
    p.add_argument("--tmp", required=True)
    p.add_argument("--omsctl", required=True)
    p.add_argument("--pgctl", required=True)
    p.add_argument("--pgdir", required=True)
    A = p.parse_args()
    A.pids = {int(k): int(v) for k, v in (x.split(":") for x in A.pids.split(","))}
    gw = A.gateway_node

    # Which OMS shard owns U, and who leads it.
    owners = {r["owner"] for r in user_rows(gw, U).values()}
    check(len(owners) == 1, "every OMS shard names one owner for U: %s" % owners)
    A.owner = owners.pop()
    A.owner_leader = leader_of(A.owner)
    check(A.owner_leader is not None and A.owner_leader != gw,
          "U is owned by OMS shard %d, led by node %s; the client talks to node %d" %
          (A.owner, A.owner_leader, gw))
    # The seller on the other OMS shard: the trades cross shards at the ME.
    global S
    for cand in range(S, S + 64):
        if next(iter(user_rows(gw, cand).values()))["owner"] != A.owner:
            S = cand
            break
    s_owner = next(iter(user_rows(gw, S).values()))["owner"]
    check(s_owner != A.owner, "the seller S = %d is owned by OMS shard %d" % (S, s_owner))

    c = Rh([A.gateway])

    # ---- A: deposits, a resting sell, order 1 ----
    check_reply(c.transfer(S, T_S, BASE, DEPOSIT_B), "S deposits %d base" % DEPOSIT_B, 0,
                DEPOSIT_B)
    r = c.request_once(new_order(S, 1, SYM, SELL, 100, DEPOSIT_B), S, 1)
    check(r is not None and r["type"] == ACK, "S's sell 15 @ 100 acknowledged")
    end = time.time() + 10
    while time.time() < end and not any(EXEC[m["exec"]] == "OPEN" for m in c.reports(S, 1)):
        c.poll(0.05)
    check(any(EXEC[m["exec"]] == "OPEN" for m in c.reports(S, 1)), "S's sell rests")

    check_reply(c.transfer(U, T, QUOTE, DEPOSIT_Q), "U deposits %d quote (transfer %d)" %
                (DEPOSIT_Q, T), 0, DEPOSIT_Q)
    ack1 = c.request_once(new_order(U, 101, SYM, BUY, 100, 10), U, 101)
    check(ack1 is not None and ack1["type"] == ACK, "order 1 (101, buy 10 @ 100) acknowledged")
    rep = c.wait_done(U, 101)
    check([report_name(m) for m in rep] == ["FILL(done)"] and rep[0]["last_qty"] == 10 and
          rep[0]["last_px"] == 100 and rep[0]["fee"] == fee(1000, 7),
          "order 1 reported FILL 10 @ 100 (taker fee %d), its last report (done): %s" %
          (fee(1000, 7), [describe(m) for m in rep]))
    seen = c.answers(U)
    check([m["seq"] for m in seen] == [1, 2],
          "order 1's answers (ACK, FILL done) numbered 1, 2: %s" % [describe(m) for m in seen])
    last1 = seen[-1]["seq"]
    quote = DEPOSIT_Q - 1000 - fee(1000, 7)
    check_user(all_rows(U), {BASE: 10, QUOTE: quote}, "after order 1")

    # ---- B: evicted ----
    h0 = oms_counter("hydrations")
    ev0 = oms_counter("evictions")
    row = evict(U, gw)
    check(oms_counter("evictions") == ev0 + 1, "the owner shard counted one eviction")
    own, version, eseq, assets, totals, xmax, floor = row.split("|")
    check(int(eseq) == last1, "the row keeps the report sequence: egress_seq %s, want %d" %
          (eseq, last1))
    check(pg_balances(assets, totals) == {BASE: 10, QUOTE: quote},
          "the row holds base 10, quote %d: assets %s totals %s" % (quote, assets, totals))
    check(int(xmax) == T, "the row's xfer_id_max is %s, want %d" % (xmax, T))
    xrows = psql("SELECT asset, amount, reason, total FROM transfers WHERE user_id = %d" % U)
    check(xrows == "2|%d|0|%d" % (DEPOSIT_Q, DEPOSIT_Q),
          "transfers holds T once: asset 2, amount %d, reason 0, total %d: %r" %
          (DEPOSIT_Q, DEPOSIT_Q, xrows))
    check(oms_counter("hydrations") == h0, "no hydration yet (hydrations %d)" % h0)

    # ---- C: order 2 re-hydrates U; T and order 1 re-sent ----
    ack2 = c.request_once(new_order(U, 102, SYM, BUY, 100, 5), U, 102)
    check(ack2 is not None and ack2["type"] == ACK, "order 2 (102, buy 5 @ 100) acknowledged")
    rep = c.wait_done(U, 102)
    check([report_name(m) for m in rep] == ["FILL(done)"] and rep[0]["last_qty"] == 5,
          "order 2 reported FILL 5, its last report (done): %s" % [describe(m) for m in rep])
    check(oms_counter("hydrations") == h0 + 1,
          "U re-hydrated once: hydrations %d -> %d" % (h0, oms_counter("hydrations")))
    seen = c.answers(U)
    new = [m for m in seen if m["cl"] == 102]
    check([m["seq"] for m in new] == [last1 + 1, last1 + 2],
          "order 2's answers continue the sequence: %s (order 1 ended at %d)" %
          ([describe(m) for m in new], last1))
    check(ack2["oid_seq"] & 0xFFFFFFFFFFFF == (ack1["oid_seq"] & 0xFFFFFFFFFFFF) + 1,
          "order 2's orderId follows order 1's (user_seq %d -> %d)" %
          (ack1["oid_seq"] & 0xFFFFFFFFFFFF, ack2["oid_seq"] & 0xFFFFFFFFFFFF))
    quote -= 500 + fee(500, 7)
    check_reply(c.transfer(U, T, QUOTE, DEPOSIT_Q), "T re-sent after the eviction", 0,
                DEPOSIT_Q)
    dup = c.request_once(new_order(U, 101, SYM, BUY, 100, 10), U, 101)
    check(dup is not None and dup["type"] == ACK and dup["oid_user"] == ack1["oid_user"] and
          dup["oid_seq"] == ack1["oid_seq"],
          "order 1 re-sent after the eviction: ACK with its orderId %x:%x (%s)" %
          (ack1["oid_user"], ack1["oid_seq"], dup and describe(dup)))
    c.poll(1.0)
    check(len(c.reports(U, 101)) == 1, "nothing executed for the re-sent order 1: %s" %
          [describe(m) for m in c.reports(U, 101)])
    check_user(all_rows(U), {BASE: 15, QUOTE: quote}, "after order 2 and the re-sends "
               "(the deposit credited once)")

    # ---- D: evicted again; the re-sends hydrate it; T and 101 pushed out of the window ----
    h1 = oms_counter("hydrations")
    evict(U, gw)
    dup = c.request_once(new_order(U, 101, SYM, BUY, 100, 10), U, 101)
    check(dup is not None and dup["type"] == ACK and dup["oid_seq"] == ack1["oid_seq"],
          "order 1 re-sent as the first message after the second eviction: its orderId "
          "(%s)" % (dup and describe(dup)))
    check(oms_counter("hydrations") == h1 + 1, "U re-hydrated by the re-send")
    check_reply(c.transfer(U, T, QUOTE, DEPOSIT_Q), "T re-sent after the second eviction", 0,
                DEPOSIT_Q)
    lk0, fd0 = oms_counter("xfer_lookups"), oms_counter("xfer_found")
    for cl in range(201, 217):
        r = c.request_once(new_order(U, cl, 99, BUY, 100, 1), U, cl)
        check(r is not None and r["type"] == NAK and r["reason"] == UNKNOWN_SYMBOL,
              "order %d on symbol 99 refused UNKNOWN_SYMBOL (a remembered outcome)" % cl)
    check_reply(c.transfer(U, T, QUOTE, DEPOSIT_Q), "T re-sent once the window forgot it", 0,
                DEPOSIT_Q)
    lk1, fd1 = oms_counter("xfer_lookups"), oms_counter("xfer_found")
    check((lk1, fd1) == (lk0 + 1, fd0 + 1),
          "answered from the transfers table: xfer_lookups %d -> %d, xfer_found %d -> %d" %
          (lk0, lk1, fd0, fd1))
    r = c.request_once(new_order(U, 101, SYM, BUY, 100, 10), U, 101)
    check(r is not None and r["type"] == NAK and r["reason"] == STALE_REQUEST,
          "order 1 re-sent once the window forgot it: NAK STALE_REQUEST (%s)" %
          (r and describe(r)))
    c.poll(1.0)
    check(len(c.reports(U, 101)) == 1, "order 1 never executed twice")
    check_user(all_rows(U), {BASE: 15, QUOTE: quote}, "after the window was pushed")

    # ---- E: the whole run, as the database and the client saw it ----
    row = evict(U, gw)
    seen = c.answers(U)
    seqs = [m["seq"] for m in seen]
    check(seqs == list(range(1, len(seen) + 1)),
          "every numbered answer U received carries 1..%d once, in order: %s" %
          (len(seen), seqs))
    own, version, eseq, assets, totals, xmax, floor = row.split("|")
    check(int(eseq) == seqs[-1], "the row's egress_seq %s = the last number sent, %d" %
          (eseq, seqs[-1]))
    check(pg_balances(assets, totals) == {BASE: 15, QUOTE: quote},
          "the row holds the deposit once: base 15, quote %d = %d - %d - %d: %s %s" %
          (quote, DEPOSIT_Q, 1000 + fee(1000, 7), 500 + fee(500, 7), assets, totals))
    xrows = psql("SELECT count(*) FROM transfers WHERE user_id = %d" % U)
    check(xrows == "1", "one transfers row for U: %s" % xrows)
    replies = [m for m in c.got if m["type"] == ADMIN_REPLY and m["req_id"] == T]
    check(all(m["reason"] in RETRY_REASONS or (m["reason"] == 0 and m["value"] == DEPOSIT_Q)
              for m in replies),
          "every answer to T over the run: NONE with total %d (%d answers)" %
          (DEPOSIT_Q, len(replies)))
    log("U: %d numbered answers, %d ADMIN_REPLYs for T, re-hydrated %d times" %
        (len(seen), len(replies), oms_counter("hydrations") - h0))
    log("PASS")


if __name__ == "__main__":
    main()

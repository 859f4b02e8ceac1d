# SPDX-License-Identifier: Apache-2.0
"""Goal: omsclient trades against a live node: logon, crossing orders for two users ACKed and
filled at the right qty and px, cancel, amend, cancel-replace, transfers (idempotent on their
id), refusals with their reason (unknown symbol, a bad key, a bad signature), heartbeats,
a seq resync, logout, and answers lost on the way back recovered through REPORT_REPLAY.
Method: real sessions against the node named by the environment; each test uses its own
fresh users (a random base), funds them with routed deposits and reads every answer through
Client.poll, deduplicated by (user, seq) as a ledger would be. Skipped unless these are set
(tests/pyclient/test_pyclient.sh sets them for a node it starts):
  OMSD_TEST_HOST       the node's address
  OMSD_TEST_KEY_FILE   an API key line with every permission for any user ("<id> <secret>
                       all *" in the node's keys_file)
  OMSD_TEST_PORT       7400
  OMSD_TEST_SYMBOL     1; OMSD_TEST_BASE / OMSD_TEST_QUOTE: its assets (1, 2)
  OMSD_TEST_PX         100: a price inside the symbol's band (tick and lot 1)
  OMSD_TEST_USER_BASE  first user id (random by default)
  OMSD_TEST_TRANSFER_LOG  a file to append "asset amount" to for every transfer applied, so
                       the runner can check the node's asset sums against them
"""

import collections
import os
import random
import time

import pytest

from omsclient import Client, LogonRefused, auth, wire
from omsclient.client import ANSWERED, NAKED, TRANSFER_USER

HOST = os.environ.get("OMSD_TEST_HOST")
KEY_FILE = os.environ.get("OMSD_TEST_KEY_FILE")
PORT = int(os.environ.get("OMSD_TEST_PORT", "7400"))
SYMBOL = int(os.environ.get("OMSD_TEST_SYMBOL", "1"))
BASE = int(os.environ.get("OMSD_TEST_BASE", "1"))
QUOTE = int(os.environ.get("OMSD_TEST_QUOTE", "2"))
PX = int(os.environ.get("OMSD_TEST_PX", "100"))
TRANSFER_LOG = os.environ.get("OMSD_TEST_TRANSFER_LOG")
WAIT_S = 8.0

pytestmark = pytest.mark.skipif(not HOST or not KEY_FILE,
                                reason="OMSD_TEST_HOST and OMSD_TEST_KEY_FILE not set")

_next_user = [int(os.environ.get("OMSD_TEST_USER_BASE", "0")) or
              random.randrange(1, 1 << 20) * 1000]


def fresh_users(n):
    """n user ids no other test (and no earlier run, with the random base) has used."""
    first = _next_user[0]
    _next_user[0] += n
    return list(range(first, first + n))


class Ledger:
    """Every answer by request, each numbered answer once ((user, seq) dedup)."""

    def __init__(self):
        self.seen = set()
        self.by_req = collections.defaultdict(list)
        self.events = []

    def feed(self, events):
        for ev in events:
            self.events.append(ev)
            m = ev.msg
            if ev.kind in ("ack", "nak", "exec"):
                if m.seq:
                    if (m.user, m.seq) in self.seen:
                        continue
                    self.seen.add((m.user, m.seq))
                self.by_req[(m.user, m.cl_ord_id)].append(ev)
            elif ev.kind == "admin_reply":
                self.by_req[(TRANSFER_USER, m.req_id)].append(ev)

    def execs(self, user, cl, kind=None):
        return [ev.msg for ev in self.by_req[(user, cl)]
                if ev.kind == "exec" and (kind is None or ev.exec == kind)]

    def kinds(self, user, cl):
        return [ev.exec or ev.kind for ev in self.by_req[(user, cl)]]

    def has(self, user, cl, kind):
        return kind in self.kinds(user, cl)

    def finals(self, user, cl):
        """The request's order's last reports (one, unless something is wrong): those that
        say done (or a DONE / REJECTED from a node of an earlier release)."""
        return [m for m in self.execs(user, cl) if m.final]

    def ended(self, user, cl):
        return bool(self.finals(user, cl))


def run_until(c, ledger, pred, timeout=WAIT_S, what="condition"):
    """Poll c into ledger until pred() holds."""
    end = time.monotonic() + timeout
    while True:
        ledger.feed(c.poll(0.05))
        if pred():
            return
        if time.monotonic() > end:
            raise AssertionError("%s not reached in %.0f s; last events: %r; stats %r" % (
                what, timeout, ledger.events[-12:], c.stats))


@pytest.fixture
def session():
    """A logged-on client and its ledger; logs out at the end."""
    c = Client(HOST, PORT, key_file=KEY_FILE)
    c.logon(timeout=WAIT_S)
    assert c.session_up and c.session_seq == 1 and c.heartbeat_ms > 0
    yield c, Ledger()
    if c.session_up:
        c.logout()
    c.close()


def applied(asset, amount):
    """A transfer the node applied (answered with reason NONE, not a repeat)."""
    if TRANSFER_LOG:
        with open(TRANSFER_LOG, "a") as f:
            f.write("%d %d\n" % (asset, amount))


def fund(c, ledger, users, base=1000, quote=1000000):
    reqs = []
    for u in users:
        reqs.append((c.transfer(u, BASE, base), BASE, base))
        reqs.append((c.transfer(u, QUOTE, quote), QUOTE, quote))
    run_until(c, ledger, lambda: all(r.state != "sent" for r, _, _ in reqs), what="deposits")
    for r, asset, amount in reqs:
        assert r.state == ANSWERED, (r, ledger.by_req[(TRANSFER_USER, r.id)])
        applied(asset, amount)


def final(ledger, user, cl):
    return ledger.ended(user, cl) or ledger.has(user, cl, "nak")


# ------------------------------------------------------------------------------------------
# Logon refusals.
# ------------------------------------------------------------------------------------------

def test_unknown_key_refused_bad_key():
    key_id, secret = auth.load_key_file(KEY_FILE)
    with Client(HOST, PORT, key_id=key_id + 1000003, secret=secret) as c:
        with pytest.raises(LogonRefused) as exc:
            c.logon(timeout=WAIT_S)
        assert exc.value.reason_name == "BAD_KEY"
        assert c.logon_reason == wire.REASON["BAD_KEY"] and not c.session_up
        assert c.stats["logons_refused"] == 1


def test_wrong_secret_refused_bad_signature():
    key_id, secret = auth.load_key_file(KEY_FILE)
    wrong = bytes(b ^ 0x5A for b in secret)
    with Client(HOST, PORT, key_id=key_id, secret=wrong) as c:
        with pytest.raises(LogonRefused) as exc:
            c.logon(timeout=WAIT_S)
        assert exc.value.reason_name == "BAD_SIGNATURE"
        # Nothing is sent outside a session: the request waits for a logon that never came.
        req = c.new_order(1, SYMBOL, "buy", 1, PX)
        assert req.send_error < 0 and c.stats["frames_tx"] == c.stats["logons_sent"]


# ------------------------------------------------------------------------------------------
# Trading.
# ------------------------------------------------------------------------------------------

def test_crossing_orders_fill(session):
    c, led = session
    seller, buyer = fresh_users(2)
    fund(c, led, [seller, buyer])
    sell = c.new_order(seller, SYMBOL, "sell", 10, PX)
    run_until(c, led, lambda: led.has(seller, sell.id, "open"), what="sell resting")
    ack = [ev.msg for ev in led.by_req[(seller, sell.id)] if ev.kind == "ack"]
    assert len(ack) == 1 and ack[0].oid.user == seller and ack[0].seq > 0
    opened = led.execs(seller, sell.id, "open")[0]
    assert (opened.side, opened.leaves_qty, opened.cum_qty) == (wire.SIDE_SELL, 10, 0)
    assert sell.state == ANSWERED

    buy1 = c.new_order(buyer, SYMBOL, "buy", 4, PX)
    run_until(c, led, lambda: led.ended(buyer, buy1.id) and
              len(led.execs(seller, sell.id, "fill")) == 1, what="first fill")
    fill = led.execs(buyer, buy1.id, "fill")
    assert [(f.last_px, f.last_qty, f.cum_qty, f.leaves_qty, f.liquidity) for f in fill] == \
        [(PX, 4, 4, 0, 2)]  # the taker
    assert fill[0].fee >= 0
    # The fill that ends the order says so: no DONE report of its own.
    assert fill[0].done and led.execs(buyer, buy1.id)[-1] is fill[0]
    assert not led.has(buyer, buy1.id, "done")
    maker = led.execs(seller, sell.id, "fill")[0]
    assert (maker.last_px, maker.last_qty, maker.cum_qty, maker.leaves_qty, maker.liquidity) \
        == (PX, 4, 4, 6, 1)
    assert not maker.done  # 6 still rest

    buy2 = c.new_order(buyer, SYMBOL, "buy", 6, PX, tif="ioc")
    run_until(c, led, lambda: led.ended(buyer, buy2.id) and
              led.ended(seller, sell.id), what="both orders done")
    assert sum(f.last_qty for f in led.execs(buyer, buy2.id, "fill")) == 6
    last = led.execs(seller, sell.id)[-1]
    assert (last.exec, last.done, last.cum_qty, last.leaves_qty) == (wire.EXEC["fill"], True,
                                                                     10, 0)
    assert led.finals(seller, sell.id) == [last] and len(led.finals(buyer, buy2.id)) == 1
    assert sum(f.last_qty for f in led.execs(seller, sell.id, "fill")) == 10
    # Reports carry the orderId the ACK gave.
    assert all(m.oid == ack[0].oid for m in led.execs(seller, sell.id))
    assert c.stats["seq_gaps"] == 0 and c.stats["gave_up"] == 0


def test_cancel_resting_order(session):
    c, led = session
    (user,) = fresh_users(1)
    fund(c, led, [user])
    order = c.new_order(user, SYMBOL, "buy", 5, PX - 20)
    run_until(c, led, lambda: led.has(user, order.id, "open"), what="resting buy")
    cxl = c.cancel(user, order.id)
    run_until(c, led, lambda: led.ended(user, order.id), what="cancelled order done")
    assert cxl.state == ANSWERED
    cancelled = led.execs(user, order.id, "cancelled")
    assert len(cancelled) == 1
    assert wire.cause_name(cancelled[0].cause) == "user" and cancelled[0].leaves_qty == 0
    # The CANCELLED ends the order: it says done, its last report, cum_qty 0.
    assert cancelled[0].done and cancelled[0].cum_qty == 0
    assert led.execs(user, order.id)[-1] is cancelled[0]
    # Cancelling it again: refused, the order being final.
    again = c.cancel(user, order.id)
    run_until(c, led, lambda: again.state != "sent" and (
        again.state == NAKED or led.has(user, again.id, "cancel_rejected")),
        what="second cancel refused")


def test_amend_down(session):
    c, led = session
    (user,) = fresh_users(1)
    fund(c, led, [user])
    order = c.new_order(user, SYMBOL, "buy", 10, PX - 21)
    run_until(c, led, lambda: led.has(user, order.id, "open"), what="resting buy")
    am = c.amend(user, order.id, 4)
    run_until(c, led, lambda: led.has(user, order.id, "amended"), what="amended")
    assert am.state == ANSWERED
    assert led.execs(user, order.id, "amended")[0].leaves_qty == 4
    up = c.amend(user, order.id, 8)  # an amend must go down
    run_until(c, led, lambda: up.state != "sent" and up.reason != 0, what="amend up refused")
    assert wire.reason_name(up.reason) == "AMEND_NOT_DOWN"
    c.cancel(user, order.id)
    run_until(c, led, lambda: led.ended(user, order.id), what="done")


def test_cancel_replace(session):
    c, led = session
    (user,) = fresh_users(1)
    fund(c, led, [user])
    old = c.new_order(user, SYMBOL, "buy", 5, PX - 22)
    run_until(c, led, lambda: led.has(user, old.id, "open"), what="resting buy")
    new = c.cancel_replace(user, old.id, PX - 23, 7)
    run_until(c, led, lambda: led.has(user, new.id, "open") and led.ended(user, old.id),
              what="replacement open, old order done")
    assert wire.cause_name(led.execs(user, old.id, "cancelled")[0].cause) == "replaced"
    assert led.execs(user, new.id, "open")[0].leaves_qty == 7
    c.cancel(user, new.id)
    run_until(c, led, lambda: led.ended(user, new.id), what="replacement cancelled")


def test_unknown_symbol_naked(session):
    c, led = session
    (user,) = fresh_users(1)
    fund(c, led, [user])
    req = c.new_order(user, 99999, "buy", 1, PX)
    run_until(c, led, lambda: final(led, user, req.id), what="refusal")
    assert req.state == NAKED and req.reason_name == "UNKNOWN_SYMBOL"
    assert c.stats["nak_reason"] == {"UNKNOWN_SYMBOL": 1}


def test_transfers_and_their_idempotency(session):
    c, led = session
    (user,) = fresh_users(1)
    d1 = c.transfer(user, BASE, 1000)
    run_until(c, led, lambda: d1.state != "sent", what="deposit")
    assert d1.state == ANSWERED
    reply = led.by_req[(TRANSFER_USER, d1.id)][0].msg
    assert (reply.req_id, reply.reason, reply.value) == (d1.id, 0, 1000)
    applied(BASE, 1000)
    w = c.transfer(user, BASE, -300)
    run_until(c, led, lambda: w.state != "sent", what="withdrawal")
    assert led.by_req[(TRANSFER_USER, w.id)][0].msg.value == 700
    applied(BASE, -300)
    too_much = c.transfer(user, BASE, -5000)
    run_until(c, led, lambda: too_much.state != "sent", what="refused withdrawal")
    assert too_much.state == NAKED and too_much.reason_name == "INSUFFICIENT_FUNDS"
    # The same deposit again, from another session: its original answer, not a second one.
    with Client(HOST, PORT, key_file=KEY_FILE) as c2:
        c2.logon(timeout=WAIT_S)
        led2 = Ledger()
        again = c2.transfer(user, BASE, 1000, transfer_id=d1.id)
        run_until(c2, led2, lambda: again.state != "sent", what="repeated deposit")
        assert led2.by_req[(TRANSFER_USER, d1.id)][0].msg.value == 1000
    d2 = c.transfer(user, BASE, 1)
    run_until(c, led, lambda: d2.state != "sent", what="one more")
    assert led.by_req[(TRANSFER_USER, d2.id)][0].msg.value == 701
    applied(BASE, 1)


# ------------------------------------------------------------------------------------------
# The session.
# ------------------------------------------------------------------------------------------

def test_heartbeats_keep_an_idle_session():
    with Client(HOST, PORT, key_file=KEY_FILE, heartbeat_ms=200) as c:
        c.logon(timeout=WAIT_S)
        assert c.heartbeat_ms == 200
        end = time.monotonic() + 1.5  # more than the three beats that end a silent session
        events = []
        while time.monotonic() < end:
            events.extend(c.poll(0.05))
        assert c.session_up and not [ev for ev in events if ev.kind == "session_ended"]
        assert c.stats["heartbeats_tx"] >= 4 and c.stats["heartbeats_rx"] >= 4
        led = Ledger()
        (user,) = fresh_users(1)
        d = c.transfer(user, BASE, 5)
        run_until(c, led, lambda: d.state == ANSWERED, what="deposit after idling")
        applied(BASE, 5)


def test_seq_gap_resync(session):
    """The client skips session seqs: the node refuses the frame SEQ_GAP naming the seq it
    expects; the client takes it and resends the request at once."""
    c, led = session
    (user,) = fresh_users(1)
    c._tx_seq += 5  # as if five frames were lost on the way
    d = c.transfer(user, BASE, 7)
    run_until(c, led, lambda: d.state == ANSWERED, what="deposit after the resync")
    applied(BASE, 7)
    assert c.stats["seq_resyncs"] == 1 and d.tries == 2
    assert [wire.reason_name(ev.msg.reason) for ev in led.events if ev.kind == "session"] \
        == ["SEQ_GAP"]


def test_logout_then_logon_again():
    with Client(HOST, PORT, key_file=KEY_FILE) as c:
        c.logon(timeout=WAIT_S)
        c.logout()
        assert not c.session_up
        led = Ledger()
        (user,) = fresh_users(1)
        d = c.transfer(user, BASE, 9)  # tracked, not sent: no session
        assert d.send_error < 0
        frames = c.stats["frames_tx"]
        led.feed(c.poll(0.3))
        assert c.stats["frames_tx"] == frames and d.state == "sent"
        c.logon(timeout=WAIT_S)  # a fresh nonce, seq from 1; the deposit goes now
        assert c.session_seq == 1
        run_until(c, led, lambda: d.state == ANSWERED, what="deposit after the new logon")
        applied(BASE, 9)
        assert c.stats["logons"] == 2


def test_relogon_after_the_node_ends_the_session():
    """The node ends the session (here: a LOGOUT the client slips in behind its own back, so
    the node's LOGOUT is news to it); with relogon the client logs on again by itself and
    sends what is unanswered in the new session."""
    with Client(HOST, PORT, key_file=KEY_FILE, relogon=True) as c:
        c.logon(timeout=WAIT_S)
        led = Ledger()
        c.send_untracked(wire.Logout(session_id=c.session_id))
        run_until(c, led, lambda: not c.session_up, what="the node's LOGOUT")
        (user,) = fresh_users(1)
        d = c.transfer(user, BASE, 11)  # tracked while the client logs on again
        run_until(c, led, lambda: d.state == ANSWERED, what="deposit in the new session")
        applied(BASE, 11)
        assert c.session_up and c.stats["relogons"] == 1 and c.stats["session_ended"] == 0
        assert [ev.kind for ev in led.events if ev.kind.startswith("session")][0] == "session"


# ------------------------------------------------------------------------------------------
# Answers lost on the way back.
# ------------------------------------------------------------------------------------------

def test_lost_answers_come_back_through_report_replay():
    """The client throws away a fifth of the datagrams it receives (drop_rx_permille): the
    holes its seq tracking sees are asked for with REPORT_REPLAY and filled; unanswered
    requests are resent with the same cl_ord_id (the node answers with the original
    outcome, never a second order). At the end every order has its reports, every user's
    seqs are contiguous from 1, nothing is still missing."""
    seller, buyer = fresh_users(2)
    with Client(HOST, PORT, key_file=KEY_FILE, drop_rx_permille=200, drop_seed=11,
                seq_from_one=True) as c:
        c.logon(timeout=WAIT_S)
        led = Ledger()
        fund(c, led, [seller, buyer])
        pairs = []
        for _ in range(15):
            s = c.new_order(seller, SYMBOL, "sell", 2, PX)
            b = c.new_order(buyer, SYMBOL, "buy", 2, PX)
            pairs.append((s, b))
            led.feed(c.poll(0.01))
        # A lost answer after the newest seq seen is revealed by no later one: like
        # omsload's drain, ask for every user's tail every half second meanwhile.
        tail_at = [time.monotonic()]

        def all_done():
            if time.monotonic() - tail_at[0] >= 0.5:
                tail_at[0] = time.monotonic()
                c.replay_tail()
            return all(led.ended(seller, s.id) and led.ended(buyer, b.id)
                       for s, b in pairs)

        run_until(c, led, all_done, timeout=30, what="every order done")
        c.drop_rx_permille = 0
        c.replay_tail()
        quiet_until = time.monotonic() + 1.0
        while time.monotonic() < quiet_until:
            led.feed(c.poll(0.05))
        st = c.stats
        print("stats:", {k: v for k, v in st.items() if v})
        assert st["rx_dropped"] > 0 and st["replay_requests"] > 0
        assert st["seq_gaps"] > 0 and st["seq_filled"] == st["seq_gaps"], st
        assert st["seq_abandoned"] == 0 and st["gave_up"] == 0
        for u in (seller, buyer):
            assert c.user_contig(u) == c.user_seq(u) > 0
            assert sorted(s for usr, s in led.seen if usr == u) == \
                list(range(1, c.user_seq(u) + 1))
        for s, b in pairs:
            for user, req in ((seller, s), (buyer, b)):
                fills = led.execs(user, req.id, "fill")
                assert sum(f.last_qty for f in fills) == 2 and all(f.last_px == PX
                                                                  for f in fills)
                # One last report, the last of all (in seq order: replayed reports come
                # late): a fill that says done.
                last = max(led.execs(user, req.id), key=lambda m: m.seq)
                assert led.finals(user, req.id) == [last]
                assert last.exec == wire.EXEC["fill"] and last.done

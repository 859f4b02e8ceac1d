# SPDX-License-Identifier: Apache-2.0
"""Goal: the client's bookkeeping behaves as tools/client.c's (docs/tools.md): the back-off
schedule and the give-up, byte-for-byte resends, matching answers to requests, per-user seq
gaps / fills / repeats with contig, the automatic REPORT_REPLAY of a hole and its timing,
the window sliding, and un-MAC'd frames refused in a session.
Method: a client whose node is a local UDP socket the test reads (no omsd); answers are
built with omsclient.wire and handed to Client.rx with injected time, and time moves only
through tick(now)."""

import socket

import pytest

from omsclient import Client, ClientError, wire
from omsclient.client import ANSWERED, GAVE_UP, NAKED, NS_PER_MS, SEQ_WINDOW, TRANSFER_USER

T0 = 10**12
MS = NS_PER_MS


@pytest.fixture
def node():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(1.0)
    yield s
    s.close()


def client(node, **kw):
    return Client("127.0.0.1", node.getsockname()[1], session_id=5, **kw)


def received(node):
    """Every frame waiting at the fake node, decoded (no MAC)."""
    out = []
    node.settimeout(0.05)
    while True:
        try:
            buf = node.recv(9000)
        except socket.timeout:
            return out
        out.append(wire.decode_frame(buf))


def answer(c, *msgs, now=T0):
    return c.rx(wire.encode_frame(list(msgs), 1), now)


def order(c, user=7, cl=100):
    return c.submit(wire.NewOrder(user=user, cl_ord_id=cl, symbol=1, side=1, ord_type=1,
                                  tif=1, px=100, qty=1), now=T0)


def test_resend_schedule_and_give_up(node):
    c = client(node, retry_first_ms=100, retry_cap_ms=400, retries_max=4, give_up_ms=100000)
    req = order(c)
    c.flush()
    first = received(node)
    assert len(first) == 1 and first[0].msgs[0].cl_ord_id == 100
    sends = [0]
    t = T0
    events = []
    while t < T0 + 3000 * MS:
        t += 10 * MS
        events += c.tick(t)
        sends += [(t - T0) // MS] * (c.stats["retransmits"] - (len(sends) - 1))
    # 100, then doubling to the cap: 100, 200, 400, 400 after each previous send.
    assert sends == [0, 100, 300, 700, 1100]
    assert [ev.kind for ev in events] == ["gave_up"] and events[0].req is req
    assert req.state == GAVE_UP and c.stats["gave_up"] == 1 and c.unanswered == 0
    frames = received(node)
    assert len(frames) == 4 and all(f.msgs[0].encode() == req.msg for f in frames)


def test_give_up_on_time(node):
    c = client(node, retry_first_ms=100, retries_max=100, give_up_ms=250)
    req = order(c)
    evs = []
    for ms in range(0, 400, 10):
        evs += c.tick(T0 + ms * MS)
    assert req.state == GAVE_UP and [e.kind for e in evs] == ["gave_up"]
    assert evs[0].now_ns == T0 + 250 * MS


def test_answers_match_and_stop_resends(node):
    c = client(node)
    a = order(c, cl=1)
    b = order(c, cl=2)
    x = c.submit(wire.Transfer(user=7, transfer_id=9, asset=1, amount=5,
                               flags=wire.TRANSFER_F_ROUTE), now=T0)
    with pytest.raises(ClientError):
        order(c, cl=1)  # tracked already
    evs = answer(c, wire.Ack(user=7, cl_ord_id=1, seq=1),
                 wire.Nak(user=7, cl_ord_id=2, reason=wire.REASON["OFF_TICK"], seq=2),
                 wire.AdminReply(req_id=9, value=5))
    assert [(e.kind, e.req) for e in evs] == [("ack", a), ("nak", b), ("admin_reply", x)]
    assert (a.state, b.state, b.reason_name, x.state) == (ANSWERED, NAKED, "OFF_TICK", ANSWERED)
    assert c.find(TRANSFER_USER, 9) is x and c.unanswered == 0
    c.tick(T0 + 5000 * MS)
    assert c.stats["retransmits"] == 0
    c.release(a)
    assert c.find(7, 1) is None and c.tracked == 2


def test_report_before_ack_answers(node):
    c = client(node)
    r = order(c, cl=3)
    ev = answer(c, wire.ExecReport(user=7, cl_ord_id=3, seq=1, exec=2, side=1))[0]
    assert ev.kind == "exec" and ev.exec == "open" and ev.req is r and r.state == ANSWERED


def test_final_report_done_flag_or_done(node):
    """An order's last report says REPORT_F_DONE; from a node of an earlier release (no
    flag) it is the DONE after the FILL / CANCELLED, or a REJECTED."""
    c = client(node)
    r = order(c, cl=4)

    def rep(seq, kind, flags=0, cl=4):
        return answer(c, wire.ExecReport(user=7, cl_ord_id=cl, seq=seq, exec=wire.EXEC[kind],
                                         side=1, flags=flags))[0]

    evs = [rep(1, "pending"), rep(2, "fill"), rep(3, "fill", wire.REPORT_F_DONE)]
    assert [(e.exec, e.done, e.final) for e in evs] == \
        [("pending", False, False), ("fill", False, False), ("fill", True, True)]
    assert all(e.req is r for e in evs) and "fill(done)" in repr(evs[-1])
    old = [rep(4, "cancelled", cl=5), rep(5, "done", cl=5), rep(6, "rejected", cl=6)]
    assert [(e.exec, e.done, e.final) for e in old] == \
        [("cancelled", False, False), ("done", False, True), ("rejected", False, True)]
    # A flag where it may not be: the report is refused like any other bad field.
    assert answer(c, wire.ExecReport(user=7, cl_ord_id=4, seq=7, exec=wire.EXEC["open"],
                                     side=1, flags=wire.REPORT_F_DONE)) == []
    assert c.stats["decode_err"] == {"BAD_RESERVED": 1}


def test_seq_gaps_fills_repeats_and_replay(node):
    c = client(node, replay_after_ms=100, replay_every_ms=300)

    def ack(seq, now=T0):
        return answer(c, wire.Ack(user=7, cl_ord_id=seq, seq=seq), now=now)[0]

    assert not ack(5).seq_gap  # the baseline
    assert ack(6).seq_gap == 0
    ev = ack(9)
    assert ev.seq_gap == 2 and (c.user_contig(7), c.user_seq(7)) == (6, 9)
    c.tick(T0 + 99 * MS)
    assert received(node) == []
    c.tick(T0 + 100 * MS)  # the hole has been the oldest for replay_after_ms
    rr = [m for f in received(node) for m in f.msgs]
    assert rr == [wire.ReportReplay(user=7, from_seq=7, to_seq=9)]
    c.tick(T0 + 399 * MS)
    assert received(node) == []
    c.tick(T0 + 400 * MS)  # again every replay_every_ms while it stays
    assert [m for f in received(node) for m in f.msgs] == rr
    ev = ack(8, T0 + 500 * MS)
    assert ev.seq_fill and c.user_contig(7) == 6
    assert ack(8).seq_repeat
    ev = ack(7, T0 + 600 * MS)
    assert ev.seq_fill and c.user_contig(7) == c.user_seq(7) == 9
    assert ack(7).seq_repeat and ack(3).seq_repeat
    c.tick(T0 + 2000 * MS)
    assert received(node) == []  # no hole, no replay
    st = c.stats
    assert (st["seq_gaps"], st["seq_filled"], st["seq_repeats"], st["replay_requests"]) == \
        (2, 2, 3, 2)


def test_seq_from_one_and_window_slide(node):
    c = client(node, seq_from_one=True, replay_off=True)
    ev = answer(c, wire.Ack(user=8, cl_ord_id=1, seq=4))[0]
    assert ev.seq_gap == 3 and c.user_contig(8) == 0
    ev = answer(c, wire.Ack(user=8, cl_ord_id=1, seq=4 + SEQ_WINDOW + 10))[0]
    assert c.user_contig(8) == 14 and c.stats["seq_abandoned"] == 13
    assert answer(c, wire.Ack(user=8, cl_ord_id=1, seq=2))[0].seq_repeat
    c.tick(T0 + 10**9)
    assert received(node) == [] and c.replay_tail() == 1
    assert [m for f in received(node) for m in f.msgs] == \
        [wire.ReportReplay(user=8, from_seq=15, to_seq=0)]


def test_frames_split_by_class(node):
    c = client(node)
    order(c, cl=1)
    c.submit(wire.Transfer(user=7, transfer_id=1, asset=1, amount=5, shard=3), now=T0)
    order(c, cl=2)
    c.flush()
    assert [[m.NAME for m in f.msgs] for f in received(node)] == \
        [["NEW_ORDER"], ["TRANSFER"], ["NEW_ORDER"]]


def test_bad_frames_counted_not_delivered(node):
    c = client(node, key="000102030405060708090a0b0c0d0e0f")
    assert c.rx(wire.encode_frame([wire.Ack(user=1, cl_ord_id=1, seq=1)], 1)) == []
    assert c.stats["decode_err"] == {"BAD_MAC": 1}
    good = wire.encode_frame([wire.Ack(user=1, cl_ord_id=1, seq=1)], 1,
                             wire.Key.from_hex("000102030405060708090a0b0c0d0e0f"))
    assert [e.kind for e in c.rx(good)] == ["ack"]


def test_session_client_refuses_unkeyed_answers(node):
    c = Client("127.0.0.1", node.getsockname()[1], key_id=3, secret=bytes(range(1, 33)))
    with pytest.raises(ClientError):
        c.replay(1, 1)  # not logged on
    assert c.rx(wire.encode_frame([wire.Ack(user=1, cl_ord_id=1, seq=1)], 1)) == []
    assert c.stats["decode_err"] == {"BAD_MAC": 1}
    # What the node cannot key: a refused logon (here unasked for: nothing changes).
    evs = c.rx(wire.encode_frame([wire.LogonReply(key_id=3, session_id=c.session_id,
                                                  reason=wire.REASON["BAD_KEY"])], 1))
    assert [e.kind for e in evs] == ["session"] and not c.session_up

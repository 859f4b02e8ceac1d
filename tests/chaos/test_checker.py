#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Self-test of tests/chaos/checker.py: a small consistent run passes, and each kind of
damage the checker exists to find makes it fail with the right count. Synthetic files in the
formats the harness writes (omsload's history, stats dumps, users.show answers, accounts).
An order's last report says done (REPORT_F_DONE: an exec line's 13th field, the report's
hdr.flags); the same run as a node of the previous release reported it (a DONE report of its
own after the last FILL, no flag, with or without the flags field) passes as well."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "checker.py")
U1, U2 = 1000, 1001
DEP1, DEP2 = 10**9, 10**12
EXEC_CANCELLED, EXEC_DONE = 5, 6
DONE = 1  # REPORT_F_DONE in an exec line's flags field


def previous_release(w, flags_field=True):
    """w's history as a node of the previous release reported it: every report that says
    done loses the flag and is followed by a DONE report of its own, numbered next (the
    user's later seqs shift by one); without flags_field the exec lines have no 13th field
    (an omsload of the previous release)."""
    shift = {}
    hist = []
    for r in w["hist"]:
        r = list(r)
        if r[0] in ("ack", "nak", "exec") and r[5] != 0:
            r[5] += shift.get(r[2], 0)
        done = r[0] == "exec" and len(r) > 12 and r[12] & DONE
        if r[0] == "exec":
            r = r[:12] + ([0] if flags_field else [])
        hist.append(r)
        if done and r[6] != EXEC_DONE:
            hist.append(r[:5] + [r[5] + 1, EXEC_DONE, 0, 0, r[9], 0, 0] + r[12:])
            shift[r[2]] = shift.get(r[2], 0) + 1
    w["hist"] = hist
    return w


def base():
    """Two users, each funded; U1 rests order 1 (OPEN), order 2 traded and ended (its FILL
    says done), U2's order 3 ended (the same); fees 7 of asset 2."""
    hist = []
    tid = 1
    for u in (U1, U2):
        for asset, amt in ((1, DEP1), (2, DEP2)):
            hist.append(["dep", 1, u, tid, asset, amt])
            hist.append(["admin", 2, tid, 0, 0])
            tid += 1
    hist += [
        ["new", 10, U1, 1, 1, 1, 1, 1, 5, 100, 0],
        ["ack", 11, U1, 1, 1 << 48 | 1, 1],
        ["exec", 12, U1, 1, 1 << 48 | 1, 2, 2, 0, 0, 0, 5, 0, 0],
        ["new", 13, U1, 2, 1, 1, 1, 1, 3, 101, 0],
        ["ack", 14, U1, 2, 1 << 48 | 2, 3],
        ["exec", 15, U1, 2, 1 << 48 | 2, 4, 4, 3, 101, 3, 0, 7, DONE],
        ["new", 17, U2, 1, 1, 2, 1, 1, 3, 101, 0],
        ["ack", 18, U2, 1, 3 << 48 | 1, 1],
        ["exec", 19, U2, 1, 3 << 48 | 1, 2, 4, 3, 101, 3, 0, 0, DONE],
        ["end", 30],
    ]
    # After the trade: U1 bought 3 @ 101 paying 7 fee; U2 sold.
    bal = {U1: {1: DEP1 + 3, 2: DEP2 - 303 - 7}, U2: {1: DEP1 - 3, 2: DEP2 + 303}}
    res = {U1: {1: 0, 2: 500}, U2: {1: 0, 2: 0}}
    owner = {U1: 1, U2: 3}
    live = {U1: 1, U2: 0}
    return {"hist": hist, "bal": bal, "res": res, "owner": owner, "live": live,
            "fees": {1: {1: 0, 2: 7}, 3: {1: 0, 2: 0}}, "resting": {2: 1, 4: 0},
            "alarm": 0}


def write(d, w):
    os.makedirs(os.path.join(d, "state"), exist_ok=True)
    with open(os.path.join(d, "history.tsv"), "w") as f:
        for r in w["hist"]:
            f.write("\t".join(str(x) for x in r) + "\n")
    for s in (1, 3):
        if w.get("pages"):
            # The harness's collect: the shard's resident set in pages (e2e_users_pages).
            rows = [{"user": u, "status": "resident", "sagas": 0, "live": w["live"][u],
                     "owner": w["owner"][u],
                     "balances": [{"asset": a, "total": w["bal"][u][a],
                                   "reserved": w["res"][u][a]} for a in (1, 2)]}
                    for u in (U1, U2) if w["owner"][u] == s]
            with open(os.path.join(d, "state", "users.%d.jsonl" % s), "w") as f:
                for i in range(0, max(len(rows), 1)):
                    page = {"shard": s, "role": "leader", "applied": 10, "resident": len(rows),
                            "users": rows[i:i + 1], "next": i + 1 if i + 1 < len(rows) else "end"}
                    f.write(json.dumps({"id": 1, "ok": True,
                                        "result": {"shards": [page]}}) + "\n")
            continue
        with open(os.path.join(d, "state", "users.%d.jsonl" % s), "w") as f:
            for u in (U1, U2):
                shards = []
                for t in (1, 3):
                    e = {"shard": t, "role": "leader", "applied": 10, "user": u,
                         "owner": w["owner"][u], "killed": False}
                    if w["owner"][u] == t:
                        e.update(status="resident", orders=w["live"][u], sagas=0,
                                 live=w["live"][u], parked=0, epoch=1, version=0,
                                 balances=[{"asset": a, "total": w["bal"][u][a],
                                            "reserved": w["res"][u][a]} for a in (1, 2)])
                    else:
                        e["status"] = "absent"
                    shards.append(e)
                f.write(json.dumps({"id": 1, "ok": True, "result": {"shards": shards}}) + "\n")
    for n in (1, 2, 3):
        with open(os.path.join(d, "state", "node%d.stats" % n), "w") as f:
            for s in (1, 2, 3, 4):
                f.write("shard.%d.is_leader %d\n" % (s, 1 if n == 1 else 0))
                f.write("shard.%d.applied 10\n" % s)
                if s in (1, 3):
                    for a in (1, 2):
                        tot = sum(w["bal"][u][a] for u in (U1, U2) if w["owner"][u] == s)
                        f.write("shard.%d.asset.%d.sum %d\n" % (s, a, tot + w["fees"][s][a]))
                        f.write("shard.%d.asset.%d.fees %d\n" % (s, a, w["fees"][s][a]))
                    f.write("shard.%d.oms.alarm_settle_shortfall %d\n" % (s, w["alarm"]))
                else:
                    f.write("shard.%d.resting %d\n" % (s, w["resting"][s]))
    open(os.path.join(d, "state", "accounts.tsv"), "w").close()
    if "phases" in w:
        write_scale(d, w)


def scale():
    """The scale-out scenario's shape: OMS shard 1 alone, shard 3 added at 100 and drained to
    by 200, removed at 300 and drained from by 400. HRW over 1,3 keeps U1 (1000) on shard 1
    and gives U2 (1001) to shard 3. U1 rests an order admitted by shard 1; U2's orders (each
    ended unfilled: a CANCELLED that says done) are admitted by 1, then 3 between the drains,
    then 1 again."""
    w = base()
    hist = [r for r in w["hist"] if r[0] in ("dep", "admin")]
    hist += [
        ["new", 50, U1, 1, 1, 1, 1, 1, 5, 100, 0],
        ["ack", 51, U1, 1, 1 << 48 | 1, 1],
        ["exec", 52, U1, 1, 1 << 48 | 1, 2, 2, 0, 0, 0, 5, 0, 0],
    ]
    for cid, (t, shard) in enumerate(((60, 1), (250, 3), (450, 1)), 1):
        hist += [["new", t, U2, cid, 1, 2, 1, 1, 3, 101, 0],
                 ["ack", t + 1, U2, cid, shard << 48 | cid, 2 * cid - 1],
                 ["exec", t + 2, U2, cid, shard << 48 | cid, 2 * cid, EXEC_CANCELLED, 0, 0, 0,
                  0, 0, DONE]]
    hist.append(["end", 500])
    w["hist"] = hist
    w["bal"] = {U1: {1: DEP1, 2: DEP2}, U2: {1: DEP1, 2: DEP2}}
    w["res"] = {U1: {1: 0, 2: 500}, U2: {1: 0, 2: 0}}
    w["owner"] = {U1: 1, U2: 1}
    w["fees"] = {1: {1: 0, 2: 0}, 3: {1: 0, 2: 0}}
    w["phases"] = {"funded": 5, "out_start": 100, "out_active": 110, "out_drained": 200,
                   "in_start": 300, "in_set": 310, "in_drained": 400}
    w["mid"] = {1: [U1], 3: [U2]}             # resident after the scale-out's drain
    w["claims"] = {U1: 1, U2: 3}              # the rows' owner_shard then
    w["epoch_mid"], w["epoch_end"] = 3, 4
    return w


def write_scale(d, w):
    with open(os.path.join(d, "phases"), "w") as f:
        for k, v in w["phases"].items():
            f.write("%s %d\n" % (k, v))
    mid = os.path.join(d, "mid")
    os.makedirs(mid, exist_ok=True)
    page = {"result": {"shards": [
        {"shard": s, "role": "leader", "resident": len(w["mid"][s]), "next": "end",
         "users": [{"user": u, "status": "resident", "sagas": 0, "live": 0, "owner": s}
                   for u in w["mid"][s]]} for s in (1, 3)]}}
    for s in (1, 3):
        with open(os.path.join(mid, "users.%d.jsonl" % s), "w") as f:
            f.write(json.dumps(page) + "\n")
    routes = {"result": {"shards": [
        {"shard": s, "role": "leader", "epoch": w["epoch_mid"], "draining": False,
         "shards": [{"shard": 1, "state": "active"}, {"shard": 3, "state": "active"}],
         "pins": []} for s in (1, 3)]}}
    with open(os.path.join(mid, "routes.node1.json"), "w") as f:
        f.write(json.dumps(routes) + "\n")
    with open(os.path.join(mid, "accounts.tsv"), "w") as f:
        for u, c in sorted(w["claims"].items()):
            f.write("%d\t%d\t1\n" % (u, c))
    for n in (1, 2, 3):
        with open(os.path.join(d, "state", "node%d.stats" % n), "a") as f:
            for s in (1, 3):
                f.write("shard.%d.route_epoch %d\n" % (s, w["epoch_end"]))


def check(w, want_rc, want, args=(), want_out=()):
    """Run the checker on w (with extra args): its exit status, words of its last line, and
    lines its output must hold."""
    with tempfile.TemporaryDirectory() as d:
        write(d, w)
        p = subprocess.run([sys.executable, CHECKER, "--dir", d, "--users", "2",
                            "--first-user", str(U1)] + list(args),
                           capture_output=True, text=True)
        last = p.stdout.strip().splitlines()[-1]
        ok = p.returncode == want_rc and all(x in last for x in want)
        ok = ok and all(x in p.stdout.splitlines() for x in want_out)
        print("%s rc=%d %s" % ("ok  " if ok else "FAIL", p.returncode, last))
        if not ok:
            print(p.stdout, p.stderr)
        return ok


def main():
    results = []
    results.append(check(base(), 0, ["result=ok", "acked=3", "final=2", "resting=1",
                                     "lost=0", "doubled=0", "money=exact"]))
    # The same run from a node of the previous release: a DONE report after each last FILL,
    # no flag; with the flags field (0) and without it (an omsload of that release).
    for field in (True, False):
        results.append(check(previous_release(base(), field), 0,
                             ["result=ok", "acked=3", "final=2", "resting=1", "lost=0",
                              "doubled=0", "seq_gaps=0", "money=exact"]))
    w = base()  # U2's last FILL does not say done: the client holds it open, the cluster not
    w["hist"] = [r[:12] + [0] if r[0] == "exec" and r[2] == U2 else r for r in w["hist"]]
    results.append(check(w, 1, ["final=1", "lost=1"]))
    w = base()  # the same run collected as pages of each shard's resident set
    w["pages"] = True
    results.append(check(w, 0, ["result=ok", "lost=0", "doubled=0", "money=exact"]))
    w["bal"][U2][2] += 1
    results.append(check(w, 1, ["money=off"]))
    w = base()  # a balance one unit too high
    w["bal"][U2][2] += 1
    results.append(check(w, 1, ["money=off"]))
    w = base()  # U1's resting order gone from the cluster without a report
    w["live"][U1] = 0
    w["resting"][2] = 0
    w["res"][U1][2] = 0
    results.append(check(w, 1, ["lost=1"]))
    w = base()  # a second last report for U2's order, under a new seq
    w["hist"].insert(-1, ["exec", 21, U2, 1, 3 << 48 | 1, 3, EXEC_CANCELLED, 0, 0, 3, 0, 0,
                          DONE])
    results.append(check(w, 1, ["doubled=1"]))
    w = base()  # a DONE of the previous release's kind after the FILL that said done
    w["hist"].insert(-1, ["exec", 21, U2, 1, 3 << 48 | 1, 3, EXEC_DONE, 0, 0, 3, 0, 0, 0])
    results.append(check(w, 1, ["doubled=1"]))
    w = previous_release(base(), False)  # a second DONE, previous release, no flags field
    w["hist"].insert(-1, ["exec", 21, U2, 1, 3 << 48 | 1, 4, EXEC_DONE, 0, 0, 3, 0, 0])
    results.append(check(w, 1, ["doubled=1"]))
    w = base()  # a second orderId for U1's order 2
    w["hist"].insert(-1, ["ack", 22, U1, 2, 1 << 48 | 9, 5])
    results.append(check(w, 1, ["doubled=1"]))
    w = base()  # the book rests an order the OMS does not hold
    w["resting"][4] = 1
    results.append(check(w, 1, ["book=off"]))
    w = base()  # the cluster holds a live order the client was told had ended
    w["live"][U2] = 1
    w["resting"][4] = 1
    results.append(check(w, 1, ["phantom=1"]))
    w = base()  # an answer that never arrived (seq 3 of U1, order 2's ACK, missing)
    w["hist"] = [r for r in w["hist"] if not (r[0] == "ack" and r[2] == U1 and r[5] == 3)]
    results.append(check(w, 1, ["seq_gaps=1"]))
    w = base()  # an alarm on a node
    w["alarm"] = 2
    results.append(check(w, 1, ["result=FAIL"]))
    w = base()  # reserved funds with nothing open
    w["res"][U2][1] = 5
    results.append(check(w, 1, ["result=FAIL"]))
    w = base()  # a deposit never answered but applied: allowed (either outcome)
    w["hist"] = [r for r in w["hist"] if not (r[0] == "admin" and r[2] == 4)]
    results.append(check(w, 0, ["result=ok", "money=exact"]))
    for reason, want_rc, want in ((32, 0, ["result=ok", "phantom=0"]), (2, 1, ["phantom=1"])):
        # U2's order 5: its ACK lost, the re-send refused. STALE_REQUEST (32: the node
        # forgot the outcome) leaves it unknown, so the cluster may hold it; a final refusal
        # (2, UNKNOWN_SYMBOL) says it never executed, so a live order is a phantom.
        w = base()
        w["hist"][-1:-1] = [["new", 21, U2, 5, 1, 2, 1, 1, 3, 101, 0],
                            ["nak", 22, U2, 5, reason, 0]]
        w["live"][U2] = 1
        w["resting"][4] = 1
        results.append(check(w, want_rc, want))
    # Per-user money (tests/bench/app/churn.sh): each user's balances against its funding,
    # deposits and fills.
    per_user = ["--per-user-money"]
    results.append(check(base(), 0, ["result=ok", "money=exact"], per_user,
                         ["money: exact (2 users, each: funding + deposits + fills)"]))
    w = base()  # one unit of quote moved from U2 to U1: the sums agree, the users do not
    w["bal"][U1][2] += 1
    w["bal"][U2][2] -= 1
    results.append(check(w, 0, ["money=exact"]))
    results.append(check(w, 1, ["money=off"], per_user, ["money: off users=1000,1001"]))
    w = base()  # funded by seeded accounts rows instead of deposits (--funded)
    w["hist"] = [r for r in w["hist"] if r[0] not in ("dep", "admin")]
    funded = ["--funded", "1=%d" % DEP1, "--funded", "2=%d" % DEP2]
    results.append(check(w, 0, ["result=ok", "money=exact"], funded + per_user,
                         ["money: exact (2 users, each: funding + deposits + fills)"]))
    results.append(check(w, 1, ["money=off"]))  # without --funded nothing was deposited
    w = base()  # one OMS shard and one ME shard (--oms-shards / --me-shards)
    w["owner"][U2] = 1
    w["fees"] = {1: {1: 0, 2: 7}, 3: {1: 0, 2: 0}}
    results.append(check(w, 0, ["result=ok", "money=exact"],
                         ["--oms-shards", "1", "--me-shards", "2"] + per_user))
    # The scale-out scenario (--scale): a consistent run passes with one user of two moved.
    sc = ["--scale", "--per-user-money"]
    results.append(check(scale(), 0, ["result=ok", "money=exact"], sc,
                         ["scale: users=2 moved=1 moved_ratio=0.50 hrw_expected=1 "
                          "ack_p99_steady_us=1 ack_p99_during_us=0 final_p99_steady_us=2 "
                          "final_p99_during_us=0 ack_p99_after_us=1 final_p99_after_us=2 "
                          "orders_steady=1 orders_during=0 naks_steady=0 naks_during=0 "
                          "user_gap_ms_p50=0 user_gap_ms_max=0 drain_ms=0 epoch=3 drained=? "
                          "adopted=?"]))
    w = scale()  # U1, which HRW keeps on shard 1, admitted by shard 3 between the drains
    w["hist"][-1:-1] = [["new", 260, U1, 2, 1, 2, 1, 1, 3, 101, 0],
                        ["ack", 261, U1, 2, 3 << 48 | 2, 3],
                        ["exec", 262, U1, 2, 3 << 48 | 2, 4, EXEC_CANCELLED, 0, 0, 0, 0, 0,
                         DONE]]
    results.append(check(w, 1, ["result=FAIL"], sc,
                         ["finding: scale: user 1000 order 2 admitted by shard 3: HRW keeps "
                          "the user on shard 1"]))
    w = scale()  # U2's order sent while shard 3 owned it, admitted by shard 1
    w["hist"] = [r if not (r[0] in ("ack", "exec") and r[2] == U2 and r[3] == 2) else
                 r[:4] + [1 << 48 | 2] + r[5:] for r in w["hist"]]
    results.append(check(w, 1, ["result=FAIL"], sc,
                         ["finding: scale: user 1001 order 2 sent while shard 3 owned the "
                          "user, admitted by shard 1"]))
    w = scale()  # U2 served by 3 again after shard 1 took it back (report order 1,3,1,3)
    w["hist"][-1:-1] = [["new", 320, U2, 4, 1, 2, 1, 1, 3, 101, 0],
                        ["ack", 321, U2, 4, 3 << 48 | 4, 7],
                        ["exec", 322, U2, 4, 3 << 48 | 4, 8, EXEC_CANCELLED, 0, 0, 0, 0, 0,
                         DONE]]
    results.append(check(w, 1, ["result=FAIL"], sc,
                         ["finding: scale: user 1001 admitted by shards 1->3->1->3 in report "
                          "order (allowed 1->3->1)"]))
    w = scale()  # U2 resident on both shards after the scale-out
    w["mid"][1] = [U1, U2]
    results.append(check(w, 1, ["result=FAIL"], sc,
                         ["finding: scale: user 1001 resident on shards 1 and 3 after the "
                          "scale-out"]))
    w = scale()  # U2 resident on 3, its row claimed by 1
    w["claims"][U2] = 1
    results.append(check(w, 1, ["result=FAIL"], sc,
                         ["finding: scale: user 1001 resident on shard 3, its row claimed by "
                          "shard 1"]))
    w = scale()  # the scale-in did not move the routing epoch
    w["epoch_end"] = 3
    results.append(check(w, 1, ["result=FAIL"], sc,
                         ["finding: scale: routing epoch 3 at the end, 3 after the scale-out: "
                          "the scale-in did not advance it"]))
    w = scale()  # U2 still resident on shard 3 at the end
    w["owner"][U2] = 3
    results.append(check(w, 1, ["result=FAIL"], sc,
                         ["finding: scale: 1 users still resident on shard 3 after the "
                          "scale-in: [1001]"]))
    w = scale()  # U2 never moved: nobody on shard 3, 0 of 2 moved
    w["mid"] = {1: [U1, U2], 3: []}
    w["claims"][U2] = 1
    w["hist"] = [r if not (r[0] in ("ack", "exec") and r[2] == U2 and r[3] == 2) else
                 r[:4] + [1 << 48 | 2] + r[5:] for r in w["hist"]]
    results.append(check(w, 1, ["result=FAIL"], sc,
                         ["finding: scale: 0 of 2 users moved (0.00), HRW's expectation is "
                          "1/2 (band 0.35-0.65)"]))
    print("checker self-test: %d/%d" % (sum(results), len(results)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

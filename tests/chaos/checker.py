#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The chaos harness's checker (docs/testing.md "Chaos").

It trusts neither omsload's counts nor any single node. It reads, from --dir:

  history.tsv        omsload --history: every request sent, every answer and report
                     received, repeats included (tools/omsload/history.h)
  state/node*.stats  each live node's stats dump (SIGUSR1) taken after the cluster settled
  state/users.S.jsonl  `omsctl --json users show --user U` for every user of the run, asked
                     of the node leading OMS shard S
  state/accounts.tsv the PostgreSQL accounts rows (user, owner, version, assets, totals)

and checks, printing one line per finding and a last line
  checker: scenario=NAME result=ok|FAIL acked=N ... lost=N doubled=N ... money=exact|off

  - every shard has exactly one leader among the live nodes, and the members of a shard that
    applied the same index hold the same money (OMS) or book size (ME);
  - orders: each (user, clientOrderId) got at most one orderId and at most one final report
    (DONE or REJECTED; reports counted once per (user, seq)), never filled beyond its
    quantity (doubled); per user, the orders the client saw admitted and not finished equal
    the orders live in the cluster, allowing for requests whose answer never came (lost:
    the cluster finished orders the client never heard the end of; phantom: the cluster
    holds live orders the client was told had ended);
  - reports: every admitted order got an OPEN or a final report (unreported) and no
    per-user sequence number below the highest seen is missing (seq_gaps);
  - money, per asset: the users' balances (resident: the OMS leader's view; evicted: the
    database row) plus the fee accounts equal the deposits the cluster acknowledged, plus
    any subset of the deposits whose answer never came;
  - book: the ME shards rest exactly the orders the OMS shards hold live;
  - reservations: a user with no live order and no saga in flight reserves nothing;
  - one owner: no user is resident on two OMS shards;
  - alarms: every alarm_* counter on every node is 0 (alarm_settle_shortfall included).

Options for runs that are not the chaos harness's shape (tests/bench/app/churn.sh):
  --oms-shards 1 --me-shards 2   the shards of the run (default 1,3 and 2,4);
  --funded ASSET=AMOUNT          every user of the run started with AMOUNT of ASSET (the
                                 accounts rows seeded before the nodes started), repeatable;
  --per-user-money               money checked per user too: each user's balances (the
                                 leader's view if resident, the database row if not) against
                                 what the history says the user must hold (funding,
                                 acknowledged deposits, and every fill: the buyer gets the
                                 quantity and pays price × quantity + fee in the quote asset,
                                 the seller the reverse, minus its fee; base_unit 1, assets 1
                                 and 2). Prints `money: exact`, or `money: off users=U,...`
                                 and a line per user that differs.
"""
import argparse
import collections
import glob
import json
import os
import sys

EXEC_OPEN, EXEC_REJECTED, EXEC_FILL, EXEC_DONE = 2, 3, 4, 6
REASON_STALE_REQUEST = 32  # common/wire.h WIRE_REASONS
OMS_SHARDS = (1, 3)  # --oms-shards
ME_SHARDS = (2, 4)   # --me-shards
ASSET_BASE, ASSET_QUOTE = 1, 2
SIDE_BUY = 1


class Order:
    __slots__ = ("user", "id", "qty", "oids", "finals", "opened", "filled", "admitted",
                 "naked", "side", "money")

    def __init__(self, user, cid, qty, side):
        self.user, self.id, self.qty, self.side = user, cid, qty, side
        self.money = {ASSET_BASE: 0, ASSET_QUOTE: 0}  # what its fills moved, per asset
        self.oids = set()
        self.finals = 0
        self.opened = False
        self.filled = 0
        self.admitted = False
        self.naked = False


def read_history(path):
    orders = {}
    deposits = {}          # transfer_id -> (user, asset, amount)
    dep_answers = {}       # transfer_id -> set of reasons
    seen = collections.defaultdict(set)   # user -> seqs applied
    ended = False
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            k = p[0]
            if k == "new":
                user, cid = int(p[2]), int(p[3])
                orders[(user, cid)] = Order(user, cid, int(p[8]), int(p[5]))
            elif k == "dep":
                deposits[int(p[3])] = (int(p[2]), int(p[4]), int(p[5]))
            elif k == "admin":
                dep_answers.setdefault(int(p[2]), set()).add(int(p[3]))
            elif k in ("ack", "nak", "exec"):
                user, cid = int(p[2]), int(p[3])
                seq = int(p[5]) if k != "nak" else int(p[5])
                if seq != 0:
                    if seq in seen[user]:
                        continue  # a repeat: applied once
                    seen[user].add(seq)
                o = orders.get((user, cid))
                if o is None:
                    continue  # a cancel's own answer, or a user outside the run
                if k == "nak":
                    # STALE_REQUEST: the re-send of a request whose outcome the node forgot
                    # (it may have executed): says nothing about the original.
                    if int(p[4]) != REASON_STALE_REQUEST:
                        o.naked = True
                    continue
                o.admitted = True
                oid = int(p[4])
                if oid != 0:
                    o.oids.add(oid)
                if k == "exec":
                    ex = int(p[6])
                    if ex == EXEC_OPEN:
                        o.opened = True
                    elif ex == EXEC_FILL:
                        qty, px, fee = int(p[7]), int(p[8]), int(p[11])
                        o.filled += qty
                        sign = 1 if o.side == SIDE_BUY else -1
                        o.money[ASSET_BASE] += sign * qty
                        o.money[ASSET_QUOTE] += -sign * qty * px - fee
                    elif ex in (EXEC_DONE, EXEC_REJECTED):
                        o.finals += 1
            elif k == "end":
                ended = True
    return orders, deposits, dep_answers, seen, ended


def read_stats(d):
    nodes = {}
    for path in sorted(glob.glob(os.path.join(d, "state", "node*.stats"))):
        n = int(os.path.basename(path)[4:].split(".")[0])
        kv = {}
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2:
                    kv[parts[0]] = parts[1]
        nodes[n] = kv
    return nodes


def find_user_entries(doc):
    """The per-shard entries of a users.show answer (each names its user)."""
    out = []

    def walk(x):
        if isinstance(x, dict):
            if "user" in x and "status" in x and "shard" in x:
                out.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    return out


def read_users(d, users):
    """views[shard][user] = the entry of users.show on that shard's leader."""
    views = {s: {} for s in OMS_SHARDS}
    problems = []
    for s in OMS_SHARDS:
        path = os.path.join(d, "state", "users.%d.jsonl" % s)
        if not os.path.exists(path):
            problems.append("no view of OMS shard %d (no leader at the end?)" % s)
            continue
        with open(path) as f:
            text = f.read()
        dec = json.JSONDecoder()
        i = 0
        while i < len(text):
            while i < len(text) and text[i] in " \r\n\t":
                i += 1
            if i >= len(text):
                break
            try:
                doc, i = dec.raw_decode(text, i)
            except ValueError:
                problems.append("shard %d: unreadable users.show output near byte %d" % (s, i))
                break
            if isinstance(doc, dict) and "error" in doc and "user" in doc:
                problems.append("shard %d: users show --user %s failed" % (s, doc["user"]))
                continue
            for e in find_user_entries(doc):
                u = e.get("user")
                if u in users and e.get("shard") == s:
                    views[s][u] = e
    return views, problems


def read_accounts(d):
    rows = {}
    path = os.path.join(d, "state", "accounts.tsv")
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 5 or not p[0].isdigit():
                continue
            assets = [int(x) for x in p[3].split(",") if x]
            totals = [int(x) for x in p[4].split(",") if x]
            rows[int(p[0])] = dict(zip(assets, totals))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--scenario", default="?")
    ap.add_argument("--users", type=int, required=True)
    ap.add_argument("--first-user", type=int, default=1000)
    ap.add_argument("--oms-shards", default="1,3")
    ap.add_argument("--me-shards", default="2,4")
    ap.add_argument("--funded", action="append", default=[], metavar="ASSET=AMOUNT")
    ap.add_argument("--per-user-money", action="store_true")
    a = ap.parse_args()
    global OMS_SHARDS, ME_SHARDS
    OMS_SHARDS = tuple(int(x) for x in a.oms_shards.split(","))
    ME_SHARDS = tuple(int(x) for x in a.me_shards.split(","))
    funded = {}
    for f in a.funded:
        asset, amount = f.split("=")
        funded[int(asset)] = int(amount)
    users = list(range(a.first_user, a.first_user + a.users))
    user_set = set(users)
    bad = []

    orders, deposits, dep_answers, seen, ended = read_history(os.path.join(a.dir, "history.tsv"))
    if not ended:
        bad.append("history: no end line (omsload did not finish)")
    nodes = read_stats(a.dir)
    views, problems = read_users(a.dir, user_set)
    bad += problems
    accounts = read_accounts(a.dir)

    # Leaders and replicas.
    for s in OMS_SHARDS + ME_SHARDS:
        leaders = [n for n, kv in nodes.items() if kv.get("shard.%d.is_leader" % s) == "1"]
        if len(leaders) != 1:
            bad.append("shard %d: %d leaders among live nodes %s" % (s, len(leaders), sorted(nodes)))
        by_applied = collections.defaultdict(set)
        for n, kv in nodes.items():
            app = kv.get("shard.%d.applied" % s)
            if app is None:
                continue
            if s in OMS_SHARDS:
                val = tuple(kv.get("shard.%d.asset.%d.sum" % (s, x)) for x in (1, 2))
            else:
                val = kv.get("shard.%d.resting" % s)
            by_applied[app].add(val)
        for app, vals in by_applied.items():
            if len(vals) > 1:
                bad.append("shard %d: members at applied %s disagree: %s" % (s, app, sorted(vals)))

    # Alarms.
    alarms = 0
    for n, kv in nodes.items():
        for k, v in kv.items():
            if "alarm" in k and v.isdigit() and int(v) != 0:
                alarms += int(v)
                bad.append("node %d: %s = %s" % (n, k, v))

    def leader_stats(s):
        for n, kv in nodes.items():
            if kv.get("shard.%d.is_leader" % s) == "1":
                return kv
        return {}

    # Orders, per user.
    acked = final = resting = unreported = doubled = lost = phantom = 0
    unfinished = collections.Counter()
    unknown = collections.Counter()
    for o in orders.values():
        if o.admitted:
            acked += 1
            if len(o.oids) > 1 or o.finals > 1 or (o.qty > 0 and o.filled > o.qty):
                doubled += 1
                bad.append("order user %d id %d: %d orderIds, %d finals, filled %d of %d" %
                           (o.user, o.id, len(o.oids), o.finals, o.filled, o.qty))
            if o.finals >= 1:
                final += 1
            else:
                unfinished[o.user] += 1
                if o.opened:
                    resting += 1
                else:
                    unreported += 1
        elif not o.naked:
            unknown[o.user] += 1  # never answered: the cluster may or may not hold it
    live_total = 0
    for u in users:
        entries = [views[s][u] for s in OMS_SHARDS if u in views[s]]
        resident = [e for e in entries if e.get("status") not in (None, "absent")]
        if len(resident) > 1:
            bad.append("user %d resident on shards %s" % (u, [e["shard"] for e in resident]))
        live = sum(int(e.get("live", 0)) for e in resident)
        live_total += live
        if live < unfinished[u]:
            lost += unfinished[u] - live
            bad.append("user %d: the client has %d orders admitted and unfinished, the cluster "
                       "holds %d live" % (u, unfinished[u], live))
        elif live > unfinished[u] + unknown[u]:
            phantom += live - unfinished[u] - unknown[u]
            bad.append("user %d: the cluster holds %d live orders, the client knows of %d "
                       "(+%d unanswered)" % (u, live, unfinished[u], unknown[u]))
        for e in resident:
            if int(e.get("live", 0)) == 0 and int(e.get("sagas", 0)) == 0:
                for b in e.get("balances", []):
                    if int(b.get("reserved", 0)) != 0:
                        bad.append("user %d: reserves %s of asset %s with nothing open" %
                                   (u, b["reserved"], b["asset"]))

    # Report sequence: missing seqs below the highest seen, per user.
    seq_gaps = 0
    for u, s in seen.items():
        if s:
            seq_gaps += max(s) - len(s)
    if unreported:
        bad.append("%d admitted orders got neither OPEN nor a final report" % unreported)
    if seq_gaps:
        bad.append("%d report sequence numbers never arrived" % seq_gaps)

    # Book.
    book = 0
    for s in ME_SHARDS:
        v = leader_stats(s).get("shard.%d.resting" % s)
        if v is None:
            bad.append("ME shard %d: no leader to read the book from" % s)
        else:
            book += int(v)
    book_ok = book == live_total
    if not book_ok:
        bad.append("book: the ME shards rest %d orders, the OMS shards hold %d live" %
                   (book, live_total))

    # Money.
    money_ok = True

    def held_of(u, asset):
        """User u's total of asset: the owner's view if resident, else the database row."""
        e = next((views[s][u] for s in OMS_SHARDS if u in views[s] and
                  views[s][u].get("status") not in (None, "absent")), None)
        if e is not None:
            return sum(int(b["total"]) for b in e.get("balances", [])
                       if int(b["asset"]) == asset)
        return accounts.get(u, {}).get(asset, 0)

    for asset in (1, 2):
        ok_sum = funded.get(asset, 0) * len(users)
        unk_sum = 0
        amounts = set()
        for tid, (user, ast, amount) in deposits.items():
            if ast != asset:
                continue
            answers = dep_answers.get(tid, set())
            if 0 in answers:
                ok_sum += amount
            elif not answers:
                unk_sum += amount
                amounts.add(amount)
        held = sum(held_of(u, asset) for u in users)
        fees = 0
        for s in OMS_SHARDS:
            kv = leader_stats(s)
            fees += int(kv.get("shard.%d.asset.%d.fees" % (s, asset), 0))
            # The stats' sum (resident users + fees) must agree with the per-user views.
            ssum = kv.get("shard.%d.asset.%d.sum" % (s, asset))
            vsum = sum(int(b["total"]) for u, e in views[s].items()
                       if e.get("status") not in (None, "absent")
                       for b in e.get("balances", []) if int(b["asset"]) == asset)
            if ssum is not None and int(ssum) != vsum + int(kv.get(
                    "shard.%d.asset.%d.fees" % (s, asset), 0)):
                bad.append("shard %d asset %d: stats sum %s, per-user views + fees %d" %
                           (s, asset, ssum, vsum + int(kv.get(
                               "shard.%d.asset.%d.fees" % (s, asset), 0))))
        total = held + fees
        extra = total - ok_sum
        exact = extra == 0 or (0 < extra <= unk_sum and len(amounts) == 1 and
                               extra % next(iter(amounts)) == 0)
        print("money: asset %d: balances %d + fees %d = %d; deposits acknowledged %d "
              "(+%d unanswered)" % (asset, held, fees, total, ok_sum, unk_sum))
        if not exact:
            money_ok = False
            bad.append("money: asset %d off by %d" % (asset, extra))

    if a.per_user_money:
        # What each user must hold: its funding, its acknowledged deposits, its fills. A user
        # with a deposit never answered may hold it or not: either is right.
        want = {u: {x: funded.get(x, 0) for x in (1, 2)} for u in users}
        maybe = collections.defaultdict(lambda: collections.defaultdict(set))
        for tid, (user, ast, amount) in deposits.items():
            if user not in want or ast not in (1, 2):
                continue
            answers = dep_answers.get(tid, set())
            if 0 in answers:
                want[user][ast] += amount
            elif not answers:
                maybe[user][ast].add(amount)
        for o in orders.values():
            if o.user in want:
                for x in (1, 2):
                    want[o.user][x] += o.money[x]
        differ = []
        for u in users:
            for x in (1, 2):
                got, exp = held_of(u, x), want[u][x]
                if got != exp and (got - exp) not in maybe[u][x]:
                    differ.append((u, x, got, exp))
        if differ:
            money_ok = False
            us = sorted({d[0] for d in differ})
            print("money: off users=%s" % ",".join(str(u) for u in us))
            for u, x, got, exp in differ[:50]:
                print("money: user %d asset %d holds %d, the history says %d (%+d)" %
                      (u, x, got, exp, got - exp))
            bad.append("money: %d users hold other balances than their fills say" % len(us))
        else:
            print("money: exact (%d users, each: funding + deposits + fills)" % len(users))

    for line in bad:
        print("finding: " + line)
    fail = bool(bad)
    print("checker: scenario=%s result=%s acked=%d final=%d resting=%d unreported=%d "
          "seq_gaps=%d lost=%d doubled=%d phantom=%d book=%s alarms=%d money=%s" %
          (a.scenario, "FAIL" if fail else "ok", acked, final, resting, unreported, seq_gaps,
           lost, doubled, phantom, "ok" if book_ok else "off", alarms,
           "exact" if money_ok else "off"))
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())

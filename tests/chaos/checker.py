#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The chaos harness's checker (docs/testing.md "Chaos").

It trusts neither omsload's counts nor any single node. It reads, from --dir:

  history.tsv        omsload --history: every request sent, every answer and report
                     received, repeats included (tools/omsload/history.h); an exec line's
                     13th field is the report's hdr.flags (REPORT_F_DONE: 1), absent in the
                     history of an omsload of an earlier release (read as 0)
  state/node*.stats  each live node's stats dump (SIGUSR1) taken after the cluster settled
  state/users.S.jsonl  OMS shard S's resident set, every user's status, open orders and
                     balances, paged from the node leading S (`omsctl --json users show
                     --shard S --limit 256 --from C`, one answer per line); or `users show
                     --user U` answers: a user missing there is not resident on S
  state/accounts.tsv the PostgreSQL accounts rows (user, owner, version, assets, totals)

and checks, printing one line per finding and a last line
  checker: scenario=NAME result=ok|FAIL acked=N ... lost=N doubled=N ... money=exact|off

  - every shard has exactly one leader among the live nodes, and the members of a shard that
    applied the same index hold the same money (OMS) or book size (ME);
  - orders: each (user, clientOrderId) got at most one orderId and at most one final report
    (one that says REPORT_F_DONE, or a DONE or a REJECTED: a node of an earlier release sent
    a DONE of its own after an order's last FILL, CANCELLED or AMENDED and never set the
    flag; reports counted once per (user, seq)), never filled beyond its
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
REPORT_F_DONE = 0x0001  # common/wire.h: EXEC_REPORT hdr.flags, the order's last report
REASON_STALE_REQUEST = 32  # common/wire.h WIRE_REASONS
NAK_NAMES = {12: "CAPACITY", 13: "UNKNOWN_ORDER", 14: "NOT_OWNER", 15: "NOT_LEADER",
             16: "BACKPRESSURE", 17: "RATE_LIMITED", 18: "INSUFFICIENT_FUNDS",
             19: "PARKED_FULL", 26: "DB_ERROR"}  # the ones a move can cause; others by number
OMS_SHARDS = (1, 3)  # --oms-shards
ME_SHARDS = (2, 4)   # --me-shards
ASSET_BASE, ASSET_QUOTE = 1, 2
SIDE_BUY = 1


class Order:
    __slots__ = ("user", "id", "qty", "oids", "finals", "opened", "filled", "admitted",
                 "naked", "side", "money", "sent", "t_ack", "t_exec", "t_nak", "nak_reason",
                 "ack_seq")

    def __init__(self, user, cid, qty, side, sent):
        self.user, self.id, self.qty, self.side = user, cid, qty, side
        self.money = {ASSET_BASE: 0, ASSET_QUOTE: 0}  # what its fills moved, per asset
        self.oids = set()
        self.finals = 0
        self.opened = False
        self.filled = 0
        self.admitted = False
        self.naked = False
        self.sent = sent       # first send (µs, CLOCK_MONOTONIC)
        self.t_ack = None      # first ACK or report: admitted (omsload's ack latency)
        self.t_exec = None     # first report: the ME's answer (OPEN, FILL, CANCELLED, ...)
        self.t_nak = None      # first NAK
        self.nak_reason = 0    # ... and its reason
        self.ack_seq = None    # the report sequence number of its ACK (admission order)


def read_history(path):
    orders = {}
    deposits = {}          # transfer_id -> (user, asset, amount)
    dep_answers = {}       # transfer_id -> set of reasons
    seen = collections.defaultdict(set)   # user -> seqs applied
    ended = None           # the end line's time
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            k = p[0]
            if k == "new":
                user, cid = int(p[2]), int(p[3])
                orders[(user, cid)] = Order(user, cid, int(p[8]), int(p[5]), int(p[1]))
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
                t = int(p[1])
                if k == "nak":
                    # STALE_REQUEST: the re-send of a request whose outcome the node forgot
                    # (it may have executed): says nothing about the original.
                    if int(p[4]) != REASON_STALE_REQUEST:
                        o.naked = True
                        if o.t_nak is None:
                            o.t_nak, o.nak_reason = t, int(p[4])
                    continue
                o.admitted = True
                oid = int(p[4])
                if oid != 0:
                    o.oids.add(oid)
                if o.t_ack is None:
                    o.t_ack = t
                if k == "ack" and o.ack_seq is None and seq != 0:
                    o.ack_seq = seq
                if k == "exec" and o.t_exec is None:
                    o.t_exec = t
                if k == "exec":
                    ex = int(p[6])
                    flags = int(p[12]) if len(p) > 12 else 0  # an older omsload: none
                    if ex == EXEC_OPEN:
                        o.opened = True
                    elif ex == EXEC_FILL:
                        qty, px, fee = int(p[7]), int(p[8]), int(p[11])
                        o.filled += qty
                        sign = 1 if o.side == SIDE_BUY else -1
                        o.money[ASSET_BASE] += sign * qty
                        o.money[ASSET_QUOTE] += -sign * qty * px - fee
                    # The order's last report: it says done, or (a node of an earlier
                    # release) it is a DONE or a REJECTED.
                    if flags & REPORT_F_DONE or ex in (EXEC_DONE, EXEC_REJECTED):
                        o.finals += 1
            elif k == "end":
                ended = int(p[1])
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
    """The per-shard entries of a users.show answer (each names its user): of one user
    (`--user U`, an entry per hosted shard) or a page of a shard's resident set (`--shard S
    --limit --from`, rows under the shard's entry, which names the shard)."""
    out = []

    def walk(x):
        if isinstance(x, dict):
            if "user" in x and "status" in x and "shard" in x:
                out.append(x)
            if "shard" in x and isinstance(x.get("users"), list):
                out.extend(dict(r, shard=x["shard"]) for r in x["users"]
                           if isinstance(r, dict) and "user" in r and "status" in r)
                return
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

# HRW as common/hrw.c computes it: XXH3-64 of the user id's 8 little-endian bytes, seeded
# with the shard id, the highest weight wins, ties to the lower id. For an 8-byte input XXH3
# is its 4-to-8-byte path (xxhash.h XXH3_len_4to8_64b with the default secret's bytes 8..23,
# then rrmxmx). The routing's own answer (`owner` in the users views) is compared with it.
_M64 = (1 << 64) - 1
_XXH3_SECRET_8 = 0x1cad21f72c81017c   # XXH3_kSecret[8..15], little-endian
_XXH3_SECRET_16 = 0xdb979083e96dd4de  # XXH3_kSecret[16..23]


def _rotl64(x, r):
    return ((x << r) | (x >> (64 - r))) & _M64


def hrw_weight(user, shard):
    seed = shard & _M64
    swapped = int.from_bytes((seed & 0xFFFFFFFF).to_bytes(4, "little"), "big")
    seed ^= (swapped << 32) & _M64
    bitflip = ((_XXH3_SECRET_8 ^ _XXH3_SECRET_16) - seed) & _M64
    h = ((user >> 32) + ((user & 0xFFFFFFFF) << 32)) & _M64
    h ^= bitflip
    h ^= _rotl64(h, 49) ^ _rotl64(h, 24)
    h = (h * 0x9FB21C651E98DF25) & _M64
    h ^= (h >> 35) + 8
    h = (h * 0x9FB21C651E98DF25) & _M64
    return h ^ (h >> 28)


def hrw_pick(user, shards):
    best, best_w = None, -1
    for s in shards:
        w = hrw_weight(user, s)
        if w > best_w or (w == best_w and s < best):
            best, best_w = s, w
    return best


def p99(values):
    """The nearest-rank 99th percentile, 0 for none."""
    if not values:
        return 0
    v = sorted(values)
    return v[max(0, -(-99 * len(v) // 100) - 1)]


def read_pages(path, shard):
    """users[user] = row of the resident set of `shard` (e2e_users_pages: one page per line,
    asked of that shard's leader), or None when the file is missing or unreadable."""
    rows = {}
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                return None
            for e in find_user_entries(doc):
                if e.get("shard") == shard:
                    rows[int(e["user"])] = e
    return rows


def read_routes(d):
    """Every (node, shard) routing view in d/routes.node*.json."""
    out = []
    for path in sorted(glob.glob(os.path.join(d, "routes.node*.json"))):
        n = int(os.path.basename(path)[len("routes.node"):].split(".")[0])
        with open(path) as f:
            text = f.read().strip()
        try:
            doc = json.loads(text) if text else {}
        except ValueError:
            doc = {}
        for sh in doc.get("result", {}).get("shards", []):
            out.append((n, sh))
    return out


def check_scale(d, users, orders, views, nodes, accounts, end_t, bad):
    """The scale-out scenario (tests/chaos/run scale_out): OMS shard 1 alone, then shard 3
    added (`shards scale --shard 3`) and drained to, then removed again (`routes set
    --active 1`) and drained from, all under load. From the phase marks (res/phases), the
    history (which shard admitted each order: the orderId's high 16 bits; in which order:
    the ACK's report sequence number), the residency and routing taken once the scale-out's
    drain was over (res/mid), and the final state."""
    ph = {}
    path = os.path.join(d, "phases")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) == 2:
                    ph[p[0]] = int(p[1])
    need = ("funded", "out_start", "out_active", "out_drained", "in_start", "in_set",
            "in_drained")
    missing = [k for k in need if k not in ph]
    if missing:
        bad.append("scale: phase marks missing: %s" % ",".join(missing))
        return
    if any(ph[need[i]] > ph[need[i + 1]] for i in range(len(need) - 1)):
        bad.append("scale: phase marks out of order: %s" % ph)
        return
    before, after = (1,), (1, 3)
    # The client leaves once nothing new comes for a moment: had it left while a move was
    # under way, reports held back by the move would have come after it (its orders would
    # count as lost). The harness starts the scale-in early enough or after the load; the
    # scale-out's drain ending after the load means the host was too slow for the run's
    # length. Said, for whoever reads a failure; not a finding itself (the drain's last
    # pass may end after the last move did).
    if end_t is not None:
        for lo, hi, what in ((ph["out_start"], ph["out_drained"], "scale-out"),
                             (ph["in_start"], ph["in_drained"], "scale-in")):
            if lo < end_t < hi:
                print("scale: note: the load ended %.1f s before the end of the %s's drain "
                      "(%.1f s): if the client left with moves under way, it missed reports "
                      "they held back (lost, unreported, money by its history)" %
                      ((hi - end_t) / 1e6, what, (hi - lo) / 1e6))

    # The users of the run that the cluster admitted anything for, and where HRW puts them.
    present = sorted({o.user for o in orders.values() if o.admitted and o.user in users})
    n = len(present)
    predicted = {u for u in present if hrw_pick(u, after) == 3}
    if any(hrw_pick(u, before) != 1 for u in present):
        bad.append("scale: HRW over {1} picks another shard (the checker's HRW is wrong)")

    # Which shard admitted each order, against the routing of the moment. Times: a shard
    # can admit only after the routing that gives it the user was committed, so an answer
    # from shard 3 before out_start, a new order of a moved user sent between the two
    # drains admitted by shard 1, or any order sent after in_drained admitted by shard 3,
    # means a shard served a user it did not own.
    admitted_by = collections.defaultdict(list)  # user -> [(ack seq, shard)]
    on3 = set()
    wrong = 0
    for o in orders.values():
        if not o.admitted or o.user not in users or not o.oids:
            continue
        shards = {oid >> 48 for oid in o.oids}
        shard = min(shards)
        if shards - {1, 3}:
            wrong += 1
            bad.append("scale: user %d order %d admitted by shard(s) %s" %
                       (o.user, o.id, sorted(shards)))
            continue
        if shard == 3:
            on3.add(o.user)
            why = None
            if o.user not in predicted:
                why = "HRW keeps the user on shard 1"
            elif o.t_ack is not None and o.t_ack < ph["out_start"]:
                why = "answered before the scale-out began"
            elif o.sent > ph["in_drained"]:
                why = "sent after the scale-in's drain"
            if why:
                wrong += 1
                bad.append("scale: user %d order %d admitted by shard 3: %s" %
                           (o.user, o.id, why))
        elif (o.user in predicted and ph["out_drained"] < o.sent < ph["in_start"]):
            wrong += 1
            bad.append("scale: user %d order %d sent while shard 3 owned the user, admitted "
                       "by shard 1" % (o.user, o.id))
        if o.ack_seq is not None:
            admitted_by[o.user].append((o.ack_seq, shard))
    # In the user's own report order its admitting shard changes at most as the routing did:
    # 1 then 3 then 1 for a moved user (or a part of that, for a user that traded in only
    # some of the phases), never for the others. More runs mean two shards served the user
    # in turns (or at once).
    interleaved = 0
    for u, lst in admitted_by.items():
        runs = []
        for _, sh in sorted(lst):
            if not runs or runs[-1] != sh:
                runs.append(sh)
        allowed = [1, 3, 1] if u in predicted else [1]
        if not any(runs == allowed[i:i + len(runs)] for i in range(len(allowed))):
            interleaved += 1
            bad.append("scale: user %d admitted by shards %s in report order (allowed %s)" %
                       (u, "->".join(map(str, runs)), "->".join(map(str, allowed))))

    # Residency and routing once the scale-out's drain was over.
    mid = os.path.join(d, "mid")
    res1 = read_pages(os.path.join(mid, "users.1.jsonl"), 1)
    res3 = read_pages(os.path.join(mid, "users.3.jsonl"), 3)
    if res1 is None or res3 is None:
        bad.append("scale: no readable resident set of shard 1 or 3 after the scale-out")
        res1, res3 = res1 or {}, res3 or {}
    for u in sorted(set(res1) & set(res3)):
        bad.append("scale: user %d resident on shards 1 and 3 after the scale-out" % u)
    for u, r in sorted(res1.items()):
        if u in predicted:
            bad.append("scale: user %d (HRW: shard 3) still resident on shard 1 after the "
                       "drain (%s)" % (u, r.get("status")))
    for u in sorted(set(res3) - predicted):
        bad.append("scale: user %d (HRW: shard 1) resident on shard 3" % u)
    for u, r in list(res1.items()) + list(res3.items()):
        if "owner" in r and int(r["owner"]) != hrw_pick(u, after):
            bad.append("scale: user %d: the routing names owner %s, HRW over 1,3 says %d" %
                       (u, r["owner"], hrw_pick(u, after)))
    claims = {}
    path = os.path.join(mid, "accounts.tsv")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if len(p) >= 2 and p[0].isdigit():
                    claims[int(p[0])] = int(p[1])
    if not claims:
        bad.append("scale: no accounts rows read after the scale-out")
    # A resident actor holds its row's claim (docs/fencing.md: hydrate claims, flushes keep
    # it, only the drop releases it), and the rows were read after the resident sets with no
    # routing change between: a moved user served by shard 3 came through the database.
    for shard, res in ((1, res1), (3, res3)):
        for u, r in res.items():
            c = claims.get(u)
            if c is None:
                continue
            if r.get("status") == "resident" and c != shard:
                bad.append("scale: user %d resident on shard %d, its row claimed by shard %d" %
                           (u, shard, c))
            elif c not in (0, 1, 3):
                bad.append("scale: user %d's row claimed by shard %d" % (u, c))
    epoch_mid = None
    mid_routes = read_routes(mid)
    if not mid_routes:
        bad.append("scale: no routing views after the scale-out")
    for node, v in mid_routes:
        st = {int(x["shard"]): x.get("state") for x in v.get("shards", [])}
        if st != {1: "active", 3: "active"}:
            bad.append("scale: node %d shard %s routes %s after the scale-out" %
                       (node, v.get("shard"), st))
        e = int(v.get("epoch", 0))
        epoch_mid = e if epoch_mid is None else min(epoch_mid, e)
    epoch_mid = epoch_mid or 0
    if epoch_mid < 3:
        bad.append("scale: routing epoch %d after the scale-out (bootstrap 1, receiving, "
                   "active: 3 at least)" % epoch_mid)

    # The end: shard 3 out of the routing, nobody resident there, no row claimed by it.
    epoch_end = None
    for nd, kv in nodes.items():
        for sh in (1, 3):
            v = kv.get("shard.%d.route_epoch" % sh)
            if v is not None:
                e = int(v)
                epoch_end = e if epoch_end is None else min(epoch_end, e)
    epoch_end = epoch_end or 0
    if epoch_end <= epoch_mid:
        bad.append("scale: routing epoch %d at the end, %d after the scale-out: the scale-in "
                   "did not advance it" % (epoch_end, epoch_mid))
    left = sorted(u for u, e in views.get(3, {}).items()
                  if e.get("status") not in (None, "absent"))
    if left:
        bad.append("scale: %d users still resident on shard 3 after the scale-in: %s" %
                   (len(left), left[:20]))
    path = os.path.join(d, "state", "accounts.tsv")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if len(p) >= 2 and p[0].isdigit() and int(p[1]) == 3:
                    bad.append("scale: user %s's row still claimed by shard 3 at the end" % p[0])

    # How many moved: users whose state the history or the residency shows on shard 3.
    moved = on3 | set(res3)
    unseen = sorted(predicted - moved)
    if len(unseen) > max(1, len(predicted) // 10):
        bad.append("scale: %d of %d users HRW gives to shard 3 never showed there: %s" %
                   (len(unseen), len(predicted), unseen[:20]))
    ratio = len(moved) / n if n else 0.0
    if n == 0 or not 0.35 <= ratio <= 0.65:
        bad.append("scale: %d of %d users moved (%.2f), HRW's expectation is 1/2 (band "
                   "0.35-0.65)" % (len(moved), n, ratio))

    # Latency by phase of the first send: steady (from 2 s after the funding, when every
    # user has been hydrated, to the scale command), during the scale-out (the command to
    # the end of its drain), after it, during the scale-in, after it. ack: first send -> ACK
    # (or a first report); final: first send -> the first report, i.e. the ME's answer
    # (OPEN, FILL, CANCELLED, REJECTED, ...).
    end = end_t if end_t is not None else max([o.sent for o in orders.values()] + [0])
    warm = min(2000000, (ph["out_start"] - ph["funded"]) // 2)  # first orders hydrate users
    windows = (("steady", ph["funded"] + warm, ph["out_start"]),
               ("during", ph["out_start"], ph["out_drained"]),
               ("after", ph["out_drained"], ph["in_start"]),
               ("in_during", ph["in_start"], ph["in_drained"]),
               ("in_after", ph["in_drained"], end))
    lat = {}
    for name, lo, hi in windows:
        acks, finals, sent, naks = [], [], 0, 0
        reasons = collections.Counter()
        for o in orders.values():
            if not lo <= o.sent < hi:
                continue
            sent += 1
            if o.t_ack is not None and (o.t_nak is None or o.t_ack < o.t_nak):
                acks.append(o.t_ack - o.sent)
                if o.t_exec is not None:
                    finals.append(o.t_exec - o.sent)
            elif o.t_nak is not None:
                naks += 1
                reasons[o.nak_reason] += 1
        lat[name] = (p99(acks), p99(finals), sent, naks)
        if reasons:
            print("scale: naks %s: %s" % (name, " ".join(
                "%s=%d" % (NAK_NAMES.get(r, r), c) for r, c in sorted(reasons.items()))))
    # How long a moved user was out of service: from its last admission (the ACK's arrival)
    # on the shard it left to its first on the shard it moved to, per direction.
    def gaps(src, dst, lo, hi):
        last, first = {}, {}
        for o in orders.values():
            if o.user not in moved or not o.oids or o.t_ack is None or not lo <= o.t_ack < hi:
                continue
            sh = min(oid >> 48 for oid in o.oids)
            if sh == src:
                last[o.user] = max(last.get(o.user, 0), o.t_ack)
            elif sh == dst:
                first[o.user] = min(first.get(o.user, o.t_ack), o.t_ack)
        g = sorted((first[u] - last[u]) // 1000 for u in first if u in last)
        return (g[len(g) // 2], g[-1]) if g else (0, 0)
    gap_out = gaps(1, 3, ph["funded"], ph["in_start"])
    gap_in = gaps(3, 1, ph["out_drained"], end + 1)
    stats1 = next((kv for kv in nodes.values() if kv.get("shard.1.is_leader") == "1"), {})
    stats3 = next((kv for kv in nodes.values() if kv.get("shard.3.is_leader") == "1"), {})
    print("scale: users=%d moved=%d moved_ratio=%.2f hrw_expected=%d "
          "ack_p99_steady_us=%d ack_p99_during_us=%d final_p99_steady_us=%d "
          "final_p99_during_us=%d ack_p99_after_us=%d final_p99_after_us=%d "
          "orders_steady=%d orders_during=%d naks_steady=%d naks_during=%d "
          "user_gap_ms_p50=%d user_gap_ms_max=%d drain_ms=%d epoch=%d drained=%s adopted=%s" %
          (n, len(moved), ratio, len(predicted), lat["steady"][0], lat["during"][0],
           lat["steady"][1], lat["during"][1], lat["after"][0], lat["after"][1],
           lat["steady"][2], lat["during"][2], lat["steady"][3], lat["during"][3],
           gap_out[0], gap_out[1], (ph["out_drained"] - ph["out_start"]) // 1000, epoch_mid,
           stats1.get("shard.1.oms.drained", "?"), stats3.get("shard.3.oms.orders_adopted", "?")))
    # Moved back: users that were on shard 3 and are admitted by, or resident on, shard 1
    # after the scale-in began.
    back = {u for u in moved if u in views.get(1, {}) and
            views[1][u].get("status") not in (None, "absent")}
    back |= {o.user for o in orders.values() if o.user in moved and o.sent >= ph["in_start"]
             and o.oids and min(oid >> 48 for oid in o.oids) == 1}
    print("scale-in: moved_back=%d ack_p99_during_us=%d final_p99_during_us=%d "
          "ack_p99_after_us=%d final_p99_after_us=%d orders_during=%d naks_during=%d "
          "user_gap_ms_p50=%d user_gap_ms_max=%d drain_ms=%d epoch=%d drained=%s adopted=%s" %
          (len(back), lat["in_during"][0], lat["in_during"][1],
           lat["in_after"][0], lat["in_after"][1], lat["in_during"][2], lat["in_during"][3],
           gap_in[0], gap_in[1], (ph["in_drained"] - ph["in_start"]) // 1000, epoch_end,
           stats3.get("shard.3.oms.drained", "?"), stats1.get("shard.1.oms.orders_adopted", "?")))
    if wrong or interleaved:
        print("scale: %d orders admitted by a shard that did not own the user, %d users "
              "served by shards in turns" % (wrong, interleaved))


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
    ap.add_argument("--scale", action="store_true")
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
    if ended is None:
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

    if a.scale:
        check_scale(a.dir, user_set, orders, views, nodes, accounts, ended, bad)

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

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Each shard's downtime while nodes are stopped, restarted and leaderships moved
(tests/e2e/test_rolling_upgrade.sh).

  e2e_downtime.py sample OUT STOP SOCKET...   every ~50 ms ask each node's control socket for
                                             `status` (role, leader, commit and term of
                                             every shard: live values, published by the
                                             shard lcore each cycle),
                                             one line per answer in OUT, until the file STOP
                                             exists
  e2e_downtime.py report SAMPLES MARKS        per step of MARKS ("<unix time> begin|end
                                             <step>" lines), per shard: the longest time the
                                             shard's commit did not advance (commit_stall_ms)
                                             and the time no node led it or followed a
                                             leader (leaderless_ms: a node slow to answer
                                             is not an election), and how many terms began
                                             (elections); prints `upgrade:` lines and a
                                             `bench:` line, and the worst stall per shard last
                                             as `stall <shard> <ms>` for the caller's bound

A leader with nothing to do appends a tick entry every tick_ms (10 ms in the tests), so a
shard that can commit advances its commit between two samples; the stall is measured
between the samples that saw it move, so its resolution is the sampling period (printed).
"""
import json
import os
import socket
import sys
import time

# Sampling period. Each status is rendered on the node's main lcore, which shares a CPU with
# shard lcores on a small host: often enough to see an election, not so often as to cause one.
PERIOD_S = 0.05


def status(path):
    """The shards of one node's status: {shard: (role, leader, commit, term)}, or None if it
    is down."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(0.25)
    try:
        s.connect(path)
        s.sendall(b'{"id": 1, "cmd": "status"}\n')
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                return None
            buf += chunk
        r = json.loads(buf)
        if not r.get("ok"):
            return None
        return {int(x["shard"]): (x.get("role", "?"), int(x.get("leader") or 0),
                                  int(x.get("commit", 0)), int(x.get("term", 0)))
                for x in r["result"]["shards"]}
    except (OSError, ValueError, KeyError):
        return None
    finally:
        s.close()


def sample(out, stop, socks):
    with open(out, "w") as f:
        while not os.path.exists(stop):
            t = time.time()
            for node, path in enumerate(socks, 1):
                st = status(path)
                if st is None:
                    f.write("%.4f %d down\n" % (t, node))
                    continue
                for shard, (role, leader, commit, term) in sorted(st.items()):
                    f.write("%.4f %d %d %s %d %d %d\n" % (t, node, shard, role, leader, commit,
                                                        term))
            f.flush()
            time.sleep(max(0.0, PERIOD_S - (time.time() - t)))


def report(samples_path, marks_path):
    # One row per sampling round: {shard: (max commit seen, led, max term seen)}; led: some
    # node leads the shard or follows a leader it heard from in its term.
    rounds = {}
    for line in open(samples_path):
        w = line.split()
        if len(w) != 7:
            continue
        t, shard, role = float(w[0]), int(w[2]), w[3]
        leader, commit, term = int(w[4]), int(w[5]), int(w[6])
        r = rounds.setdefault(t, {})
        c, lead, tm = r.get(shard, (0, False, 0))
        led = role == "leader" or (role == "follower" and leader != 0)
        r[shard] = (max(c, commit), lead or led, max(tm, term))
    times = sorted(rounds)
    shards = sorted({s for r in rounds.values() for s in r})
    steps, begun = [], {}
    for line in open(marks_path):
        w = line.split()
        if len(w) == 3 and w[1] == "begin":
            begun[w[2]] = float(w[0])
        elif len(w) == 3 and w[1] == "end" and w[2] in begun:
            steps.append((w[2], begun.pop(w[2]), float(w[0])))
    period = sorted(b - a for a, b in zip(times, times[1:]))
    period_ms = 1000 * period[len(period) // 2] if period else 0
    worst = {s: 0.0 for s in shards}
    leaderless_total = {s: 0.0 for s in shards}
    base = {}
    for name, t0, t1 in steps:
        inside = [t for t in times if t0 <= t <= t1]
        for s in shards:
            # The commit's advances, from the last one before the step to the first after.
            moved, last = [], None
            for t in times:
                c = rounds[t].get(s, (None, False, 0))[0]
                if c is None:
                    continue
                if last is None or c > last:
                    moved.append(t)
                    last = c
            stall = 0.0
            for a, b in zip(moved, moved[1:]):
                if b >= t0 and a <= t1:
                    stall = max(stall, min(b, t1) - max(a, t0))
            leaderless = 0.0
            for a, b in zip(inside, inside[1:]):
                if not rounds[a].get(s, (0, False, 0))[1]:
                    leaderless += b - a
            terms = [rounds[t][s][2] for t in inside if s in rounds[t]]
            elections = max(terms) - min(terms) if terms else 0
            print("upgrade: step=%s shard=%d commit_stall_ms=%d leaderless_ms=%d elections=%d "
                  "samples=%d" % (name, s, 1000 * stall, 1000 * leaderless, elections,
                                  len(inside)))
            if name == "baseline":
                base[s] = stall
            else:
                worst[s] = max(worst[s], stall)
                leaderless_total[s] += leaderless
    print("bench: rolling_upgrade " + " ".join(
        "shard%d_downtime_ms=%d shard%d_leaderless_ms=%d shard%d_baseline_stall_ms=%d"
        % (s, 1000 * worst[s], s, 1000 * leaderless_total[s], s, 1000 * base.get(s, 0))
        for s in shards) + " sample_ms=%d" % period_ms)
    for s in shards:
        print("stall %d %d" % (s, 1000 * worst[s]))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "sample":
        sample(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()

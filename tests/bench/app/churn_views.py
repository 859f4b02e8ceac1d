#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The per-user views tests/chaos/checker.py reads, for a run with many users (churn.sh).

The chaos harness asks `omsctl --json users show --user U` for every user of its run (64);
with 20,000 users, most of them evicted to PostgreSQL, that is 20,000 processes. This asks
one node's control socket (mgmt/mgmt.h: JSON lines) instead, over one connection: it pages
the resident set (`users.show` without a user, 256 at a time), and shows each user resident
on the shard, one answer per line, as `omsctl --json` would print it. Users not resident are
left out: the checker takes their balances from the accounts rows.

  churn_views.py --socket SOCK --shard S --out FILE      the views of OMS shard S
"""
import argparse
import json
import socket
import sys

PAGE = 256  # users.show --limit maximum (app/app_mgmt_users.c)


class Ctl:
    def __init__(self, path, timeout):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""
        self.id = 0

    def call(self, cmd, args):
        """One request, its answer as text (one line) and as a dict."""
        self.id += 1
        self.s.sendall((json.dumps({"id": self.id, "cmd": cmd, "args": args}) + "\n").encode())
        while b"\n" not in self.buf:
            chunk = self.s.recv(1 << 16)
            if not chunk:
                raise OSError("the control socket closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        text = line.decode()
        return text, json.loads(text)


def shard_pages(doc):
    """The per-shard objects of a users.show answer: {"shard": S, "resident": N,
    "users": [{"user", "status", "sagas", "live", "owner"}], "next": N | "end"}."""
    res = doc.get("result") or {}
    return [x for x in res.get("shards", []) if isinstance(x, dict) and "shard" in x]


def residents(ctl, shard):
    """The users resident (any status but absent) on shard, by paging its resident set."""
    users, cursor = set(), 0
    for _ in range(1 << 16):  # bounded: 2^16 pages of 256
        _, doc = ctl.call("users.show", {"limit": PAGE, "from": cursor})
        if not doc.get("ok"):
            raise OSError("users.show failed: %s" % doc)
        page = [x for x in shard_pages(doc) if int(x["shard"]) == shard]
        if not page:
            raise OSError("users.show: no page of shard %d: %s" % (shard, doc))
        for e in page[0].get("users", []):
            if e.get("status") not in (None, "absent"):
                users.add(int(e["user"]))
        nxt = page[0].get("next")
        if not isinstance(nxt, int):
            return users
        cursor = nxt
    raise OSError("users.show: more pages than expected")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--shard", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=10.0)
    a = ap.parse_args()
    ctl = Ctl(a.socket, a.timeout)
    users = residents(ctl, a.shard)
    with open(a.out, "w") as f:
        for u in sorted(users):
            text, _ = ctl.call("users.show", {"user": u})
            f.write(text + "\n")
    print("views: shard %d: %d resident users shown" % (a.shard, len(users)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Per-user money over a node's `users show` pages (e2e tests).

Usage: e2e_users_money.py FILE WANT1 WANT2 NUSERS

FILE holds JSON lines (the pages `omsctl --json users show` gave, or per-user answers).
Every resident user's balances are summed per asset: asset 1 must come to WANT1 and asset 2
to WANT2 (deposits less the fees the shard took), exactly NUSERS users must be resident and
none may hold anything reserved (no open order, no saga). Exits 1 with the reason.
"""
import json
import sys


def main():
    path, want1, want2, nusers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    tot = {1: 0, 2: 0}
    users = 0

    def walk(x):
        nonlocal users
        if isinstance(x, dict):
            if "balances" in x and x.get("status") == "resident":
                users += 1
                for b in x["balances"]:
                    tot[b["asset"]] = tot.get(b["asset"], 0) + b["total"]
                    if b["reserved"] != 0:
                        sys.exit("user %s: %d of asset %d still reserved" %
                                 (x["user"], b["reserved"], b["asset"]))
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    with open(path) as f:
        for line in f:
            if line.strip():
                walk(json.loads(line))
    if users != nusers or tot[1] != want1 or tot[2] != want2:
        sys.exit("%d users resident, held %s, want %d users holding {1: %d, 2: %d}" %
                 (users, tot, nusers, want1, want2))
    print("    %d users queried: held base %d quote %d + fees = deposits, nothing reserved" %
          (users, tot[1], tot[2]))


if __name__ == "__main__":
    main()

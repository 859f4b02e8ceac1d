#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check the Grafana dashboard (deploy/grafana/omsd.json).

  check_grafana.py DASHBOARD            the JSON parses; every panel has an id, a title and,
                                        unless it is a row, queries; ids are unique; the
                                        operator topics are there
  check_grafana.py DASHBOARD METRICS    also: every omsd_* metric a query uses is a sample
                                        name in METRICS (Prometheus text from a running node)
Exit 0 when all holds, 1 with the reasons otherwise.
"""
import json
import re
import sys

TOPICS = ["throughput", "latency", "drop", "raft", "commit", "resident", "saga", "lcore"]


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    errors = []
    with open(sys.argv[1]) as f:
        dash = json.load(f)
    panels = dash.get("panels")
    if not isinstance(panels, list) or not panels:
        errors.append("no panels")
        panels = []
    ids = [p.get("id") for p in panels]
    if len(set(ids)) != len(ids):
        errors.append("panel ids repeat")
    metrics = set()
    titles = " ".join(str(p.get("title", "")).lower() for p in panels)
    for p in panels:
        if not p.get("title"):
            errors.append(f"panel {p.get('id')} has no title")
        if p.get("type") == "row":
            continue
        targets = p.get("targets") or []
        if not targets:
            errors.append(f"panel '{p.get('title')}' has no queries")
        for t in targets:
            expr = t.get("expr", "")
            if not expr:
                errors.append(f"panel '{p.get('title')}' has an empty query")
            metrics.update(re.findall(r"\bomsd_[A-Za-z0-9_]+", expr))
    for topic in TOPICS:
        if topic not in titles:
            errors.append(f"no panel about {topic}")
    if len(sys.argv) == 3:
        exported = set()
        with open(sys.argv[2]) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                exported.add(re.split(r"[{ ]", line, maxsplit=1)[0])
        for m in sorted(metrics):
            if m not in exported:
                errors.append(f"metric {m} is not exported by the node")
    for e in errors:
        print("check_grafana:", e)
    print(f"check_grafana: {len(panels)} panels, {len(metrics)} metrics referenced, "
          f"{len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

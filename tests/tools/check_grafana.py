#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check the Grafana dashboard (deploy/grafana/omsd.json).

  check_grafana.py DASHBOARD            the JSON parses; every panel has an id, a title and,
                                        unless it is a row, queries; ids are unique; the
                                        operator topics are there; every omsd_* name a query
                                        uses follows the metric naming rules of
                                        docs/appliance.md (no abbreviated unit, only counters
                                        and histogram/summary series under rate/increase)
                                        and no panel shows a time in a unit other than
                                        seconds
  check_grafana.py DASHBOARD METRICS    also: every omsd_* metric a query uses is a sample
                                        name in METRICS (Prometheus text from a running node,
                                        e2e_views and e2e_promtool), and what a query takes
                                        the rate of is a counter there (or a histogram's or
                                        summary's series)
Exit 0 when all holds, 1 with the reasons otherwise.
"""
import json
import re
import sys

TOPICS = ["throughput", "latency", "drop", "raft", "commit", "resident", "saga", "lcore"]
# promtool (client_golang promlint) flags a name with one of these as a token.
ABBREVIATIONS = {"s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h",
                 "d"}
# The series of a histogram or a summary, which rate() takes like a counter's.
SERIES = ("_bucket", "_count", "_sum")
# Functions over a counter.
RATE = re.compile(r"\b(?:rate|irate|increase)\(\s*(omsd_[A-Za-z0-9_]+)")
# Panel units of time other than seconds (every omsd time is in seconds).
TIME_UNITS = {"ns", "µs", "us", "ms"}


def name_problems(name, rated):
    """The naming rules a referenced metric breaks (docs/appliance.md, Metric names)."""
    out = []
    tokens = name.split("_")
    if ABBREVIATIONS & set(tokens):
        out.append(f"metric {name} has an abbreviated unit (seconds, bytes, ratio)")
    if any(t in ("permille", "percent", "pct") for t in tokens):
        out.append(f"metric {name} is not a ratio")
    if rated and not name.endswith(("_total",) + SERIES):
        out.append(f"rate() of {name}, which is not a counter (_total) nor a histogram series")
    return out


def exported(path):
    """Sample names and each family's TYPE in Prometheus text."""
    samples, types = set(), {}
    with open(path) as f:
        for line in f:
            if line.startswith("# TYPE "):
                _, _, family, kind = line.split()[:4]
                types[family] = kind
            elif line.strip() and not line.startswith("#"):
                samples.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return samples, types


def family_type(name, types):
    if name in types:
        return types[name]
    for suffix in SERIES:
        if name.endswith(suffix) and name[: -len(suffix)] in types:
            return types[name[: -len(suffix)]]
    return None


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
    metrics, rated = set(), set()
    titles = " ".join(str(p.get("title", "")).lower() for p in panels)
    for p in panels:
        if not p.get("title"):
            errors.append(f"panel {p.get('id')} has no title")
        if p.get("type") == "row":
            continue
        field = p.get("fieldConfig") or {}
        units = [(field.get("defaults") or {}).get("unit")]
        for o in field.get("overrides") or []:
            units += [q.get("value") for q in o.get("properties", []) if q.get("id") == "unit"]
        for u in units:
            if u in TIME_UNITS:
                errors.append(f"panel '{p.get('title')}' shows unit {u}: times are in seconds")
        targets = p.get("targets") or []
        if not targets:
            errors.append(f"panel '{p.get('title')}' has no queries")
        for t in targets:
            expr = t.get("expr", "")
            if not expr:
                errors.append(f"panel '{p.get('title')}' has an empty query")
            metrics.update(re.findall(r"\bomsd_[A-Za-z0-9_]+", expr))
            rated.update(RATE.findall(expr))
    for topic in TOPICS:
        if topic not in titles:
            errors.append(f"no panel about {topic}")
    for m in sorted(metrics):
        errors += name_problems(m, m in rated)
    if len(sys.argv) == 3:
        samples, types = exported(sys.argv[2])
        for m in sorted(metrics):
            if m not in samples:
                errors.append(f"metric {m} is not exported by the node")
            elif m in rated and family_type(m, types) not in ("counter", "histogram",
                                                                "summary"):
                errors.append(f"rate() of {m}, a {family_type(m, types)} on the node")
    for e in errors:
        print("check_grafana:", e)
    print(f"check_grafana: {len(panels)} panels, {len(metrics)} metrics referenced, "
          f"{len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

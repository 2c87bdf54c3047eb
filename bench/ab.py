#!/usr/bin/env python3
"""Median of interleaved A/B benchmark runs (bench/device_run.sh `ab`): ab_prev_*.json against
ab_new_*.json in one folder. Prints, per (nprobe, k, batch), the median QPS (and p50 latency for
batch 1) of each side, the change, and the spread of each side (max/min - 1), which is the noise
a change must exceed to count as a regression."""
import glob
import json
import statistics
import sys


def load(pattern):
    runs = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            runs.append({(r["nprobe"], r["k"], r["batch"]): r for r in json.load(f)["results"]})
    return runs


def main(folder):
    prev, new = load(f"{folder}/ab_prev_*.json"), load(f"{folder}/ab_new_*.json")
    if not prev or not new:
        print("no A/B runs found")
        return 1
    print(f"{len(prev)} previous and {len(new)} new runs, medians")
    print(f"{'nprobe':>6} {'k':>4} {'batch':>6} {'metric':>8} {'previous':>12} {'new':>12} {'change':>8} {'spread prev/new':>16}")
    for key in sorted(prev[0]):
        nprobe, k, batch = key
        metric = "p50_ms" if batch == 1 else "qps"
        a = [r[key][metric] for r in prev if key in r]
        b = [r[key][metric] for r in new if key in r]
        ma, mb = statistics.median(a), statistics.median(b)
        change = (mb / ma - 1) * 100 if ma else 0
        spread = lambda v: (max(v) / min(v) - 1) * 100 if min(v) > 0 else 0
        print(f"{nprobe:>6} {k:>4} {batch:>6} {metric:>8} {ma:>12.4g} {mb:>12.4g} {change:>7.1f}% "
              f"{spread(a):>7.1f}%/{spread(b):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))

#!/usr/bin/env python3
"""How well a timing cache's isolated times predict its in-context times,
leave one out: for each key of a context (a model) timed both alone and in
context, its in-context time predicted from its isolated time and the
ratio (in-context / isolated) of the other calibrated keys of its op type:
their median (the cost model before 2026-12-03) against the median of the
K nearest in log isolated time (MeasuredCostModel::LocalFactor, K = 5).
Keys fused into a neighbour's kernel are left out, as the cost model's
Derive leaves them out. Prints, overall and per op type (the most keys
first): the median |log(predicted / in-context)| and the share within 10%.

  python3 tools/ratio_loo.py CACHE [--k=5] [--ops=12]

CACHE: a timing cache (`--timing_cache`, default ~/.cache/rlflow/timing-cache.txt).
"""
import argparse
import collections
import math
import statistics


def load(path):
    iso, ctx, fused = {}, collections.defaultdict(dict), set()
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 2:
            continue
        try:
            value = float(parts[0])
        except ValueError:
            continue
        key = parts[1]
        if "|ctx|" in key:
            prefix, k = key.split("|ctx|", 1)
            ctx[prefix][k] = value
        elif "|fused|" in key:
            prefix, k = key.split("|fused|", 1)
            fused.add((prefix, k))
        elif "|" in key:
            prefix, k = key.split("|", 1)
            if "@" not in prefix and "#" in k and "|" not in k:
                iso[(prefix, k)] = value
    return iso, ctx, fused


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cache")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--ops", type=int, default=12)
    a = ap.parse_args()
    iso, ctx, fused = load(a.cache)
    errors = collections.defaultdict(list)  # op -> [(median-ratio error, nearest-k error)]
    for prefix, keys in ctx.items():
        fingerprint = prefix.split("@")[0]
        by_op = collections.defaultdict(list)
        for k, c in keys.items():
            i = iso.get((fingerprint, k))
            if (prefix, k) in fused or c <= 0 or i is None or i <= 0:
                continue
            by_op[k.split("#")[0]].append((i, c))
        for op, points in by_op.items():
            for n, (i, c) in enumerate(points):
                others = points[:n] + points[n + 1:]
                if len(others) < 2:
                    continue
                median = statistics.median(x[1] / x[0] for x in others)
                near = sorted(others, key=lambda x: abs(math.log(x[0] / i)))[:a.k]
                local = statistics.median(x[1] / x[0] for x in near) if len(others) > a.k else median
                e = (abs(math.log(i * median / c)), abs(math.log(i * local / c)))
                errors[op].append(e)
                errors["(all)"].append(e)
    within = math.log(1.1)
    print("%-20s %6s  %-24s  %-24s" % ("op", "keys", "op median: |log err|, <10%", "nearest %d: |log err|, <10%%" % a.k))
    for op, e in sorted(errors.items(), key=lambda kv: -len(kv[1]))[:a.ops + 1]:
        m = [x[0] for x in e]
        l = [x[1] for x in e]
        print("%-20s %6d  %.3f, %3d%%%14s%.3f, %3d%%" % (op, len(e), statistics.median(m), 100 * sum(x < within for x in m) // len(m),
                                                   "", statistics.median(l), 100 * sum(x < within for x in l) // len(l)))


if __name__ == "__main__":
    main()

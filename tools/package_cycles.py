#!/usr/bin/env python3
"""Prints the Bazel package cycles of the workspace (tests included) and
exits 1 if there is one. Reads `bazel query 'deps(//...)' --output=graph`
on stdin:  ./bazelw query 'deps(//...)' --output=graph --noimplicit_deps |
tools/package_cycles.py"""
import collections
import re
import sys

edges = collections.defaultdict(set)
for line in sys.stdin:
    if "->" not in line:
        continue
    left, right = line.split("->", 1)
    for a in re.findall(r'(//[^:"\\]*):', left):
        for b in re.findall(r'(//[^:"\\]*):', right):
            if a != b and not b.startswith("//third_party"):
                edges[a].add(b)

sys.setrecursionlimit(100000)
index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges.get(v, ()):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            cycles.append(sorted(comp))


for v in list(edges):
    if v not in index:
        visit(v)
for comp in cycles:
    print("package cycle:", " ".join(comp))
    for a in comp:
        for b in sorted(edges[a]):
            if b in comp:
                print("   ", a, "->", b)
print("%d packages, %d package cycles" % (len(index), len(cycles)))
sys.exit(1 if cycles else 0)

#!/bin/bash
# The per-operator table of docs/onnx_node_tests.md, merged from the four
# shards' logs of //runtime:onnx_node_tests_test (run it first:
# ./bazelw test //runtime:onnx_node_tests_test). Prints the totals line and
# the table rows (operator | cases | accepted | run and equal | refused),
# sorted by operator name as the C locale sorts.
set -euo pipefail
cd "$(dirname "$0")/.."
logs=(bazel-testlogs/runtime/onnx_node_tests_test/shard_*/test.log)
grep -h '^case ' "${logs[@]}" | LC_ALL=C awk '
  { op = $3; st = $4; cases[op]++; n++;
    if (st == "refused") { refused[op]++; r++ } else { accepted[op]++; a++ }
    if (st == "matched") { matched[op]++; m++ }
    if (st == "mismatch" || st == "run_error") bad++ }
  END {
    printf "Totals: %d cases, %d accepted (%.1f%%), %d run and equal, %d mismatches, %d refused.\n\n", n, a, 100.0 * a / n, m, bad + 0, r + 0
    print "| operator | cases | accepted | run and equal | refused |"
    print "|---|---:|---:|---:|---:|"
    for (op in cases) printf "%s\t| %s | %d | %d | %d | %d |\n", op, op, cases[op], accepted[op], matched[op], refused[op]
  }' | { IFS= read -r totals; echo "$totals"; IFS= read -r blank; echo; IFS= read -r h1; IFS= read -r h2; echo "$h1"; echo "$h2"; LC_ALL=C sort -t$'\t' -k1,1 | cut -f2; }

#!/bin/bash
# Estimate error of the original on the corpus and zoo models: each model
# three times in turn, a fresh timing cache per run, --search=none (README,
# "Estimate error"). With SHARED=1, one timing cache per round shared by the
# models in turn, as the default run's persistent cache is when a user
# optimises one model after another; with CACHE=FILE, that file throughout
# (kept: a user's persistent cache, warm after the first round). SEARCH=taso
# (any --search value; the default run's is taso) runs that search instead
# of none; ROUNDS=N sets the number of rounds (3). The optimised graph's
# error follows as a seventh column.
# SOURCES=real (or cpp, torch; space-separated) limits the models swept;
# MODELS="a b ..." to those names.
# Needs ./bazelw build //optimiser //zoo:real_models //zoo:torch_zoo first.
# OPTIMISERS="A B" (binaries, each beside its A.runfiles; default
# ./bazel-bin/optimiser/optimiser) runs each on every model in turn, the
# order swapped from one model to the next, a fresh cache for each run
# unless SHARED or CACHE; each line then starts with the binary's index.
# Prints: round source model estimate_ms measured_ms error error_after
# written guard time_base, where written is "optimised" or "original", guard the
# ONNX Runtime guard's speedup and interval ("-" where it did not run), and
# time_base the cached timings' time base at calibration, "->" the reading
# before the verdict where it was read again, "B/A=V" the readings before and
# after the verdict and their geometric mean ("-": unknown, a fresh cache),
# how many times the verdict measured (PipelineOptions::steady_ratio) and
# the kept measurement's DriftRatio of its own runs (report verdict.drifts).
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
list=()
while read m s1 s2; do list+=("real:$m:$s1"); done < bazel-bin/zoo/real_models/models.txt
for m in inception_v3 resnet18 resnet50 resnext50_32x4d squeezenet1_1 bert_base vit_b_16; do list+=("cpp:$m"); list+=("torch:$m"); done
for rep in $(seq "${ROUNDS:-3}"); do
  cache=${CACHE:-$tmp/cache.txt}
  [ -n "$CACHE" ] || rm -f "$cache"
  for e in "${list[@]}"; do
    IFS=: read src m s <<< "$e"
    [[ " ${SOURCES:-real cpp torch} " == *" $src "* ]] || continue
    [ -z "$MODELS" ] || [[ " $MODELS " == *" $m "* ]] || continue
    case $src in
      real) args="--model=bazel-bin/zoo/real_models/$m.onnx --input_shape=$s";;
      cpp) args="--model=$m.onnx";;
      torch) args="--model=bazel-bin/zoo/torch_zoo/$m.onnx";;
    esac
    read -r -a bins <<< "${OPTIMISERS:-./bazel-bin/optimiser/optimiser}"
    n=${#bins[@]}; order=$(seq 0 $((n - 1))); swap=$((${swap:-0} ^ 1))
    [ "$n" -gt 1 ] && [ "$swap" = 0 ] && order=$(seq $((n - 1)) -1 0)
    for b in $order; do
    [ "${SHARED:-0}" = 1 ] || [ -n "$CACHE" ] || rm -f "$cache"
    rm -f "$tmp/report.json"
    out=$("${bins[$b]}" $args --search="${SEARCH:-none}" --timing_cache="$cache" --output="$tmp/out.onnx" --report="$tmp/report.json" 2>&1)
    est=$(echo "$out" | grep -o "estimate [0-9.]*" | head -1 | cut -d' ' -f2)
    meas=$(echo "$out" | grep -o "^measured: *[0-9.]*" | awk '{print $2}')
    err=$(echo "$out" | grep -o "error [-+0-9.]*%" | head -1 | cut -d' ' -f2)
    after=$(echo "$out" | grep -o "before, [-+0-9.]*% after" | head -1 | cut -d' ' -f2)
    written=$(echo "$out" | grep -qi "^written: .*(the original model" && echo original || echo optimised)
    guard=$(echo "$out" | grep -o "^guard: *in ort .*speedup [0-9.]*x \[[0-9.]*, [0-9.]*\]" | grep -o "[0-9.]*x \[.*\]" | tr -d ' ')
    # The cached timings' time base at calibration and, where it was read
    # again before the verdict, that reading ("-": unknown, a fresh cache).
    bases=$(echo "$out" | grep -o "time base [0-9.]* at calibration, [0-9.]* at the verdict (read before it [0-9.]*, after it [0-9.]*" | awk '{gsub(",", "", $13); print $3"->"$13"/"$16"="$6}')
    [ -n "$bases" ] || bases=$(echo "$out" | grep -o "time base [0-9.]* at calibration, [0-9.]* as last read" | awk '{print $3"->"$6}')
    [ -n "$bases" ] || bases=$(echo "$out" | grep -o "cached timings' time base [0-9.]*" | awk '{print $5}')
    times=$(echo "$out" | grep -o "(measured [0-9]* times" | awk '{print $2}')
    # The kept measurement's DriftRatio of its own runs ("-": not reported).
    drift=$(python3 -c 'import json, sys
v = json.load(open(sys.argv[1])).get("verdict", {}); d = v.get("drifts") or []
print("%.3f" % d[v.get("kept_measurement", 0)] if d else "-")' "$tmp/report.json" 2>/dev/null)
    label=""; [ "$n" -gt 1 ] && label="$b "
    echo "$label$rep $src $m $est $meas $err $after $written ${guard:--} ${bases:--} ${times:-1} ${drift:--}"
    done
  done
done
echo done

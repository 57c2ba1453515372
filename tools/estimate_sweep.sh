#!/bin/bash
# Estimate error of the original on the corpus and zoo models: each model
# three times in turn, a fresh timing cache per run, --search=none (README,
# "Estimate error"). With SHARED=1, one timing cache per round shared by the
# models in turn, as the default run's persistent cache is when a user
# optimises one model after another.
# Needs ./bazelw build //optimiser //zoo:real_models //zoo:torch_zoo first.
# Prints: round source model estimate_ms measured_ms error.
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
list=()
while read m s1 s2; do list+=("real:$m:$s1"); done < bazel-bin/zoo/real_models/models.txt
for m in inception_v3 resnet18 resnet50 resnext50_32x4d squeezenet1_1 bert_base vit_b_16; do list+=("cpp:$m"); list+=("torch:$m"); done
for rep in 1 2 3; do
  rm -f "$tmp/cache.txt"
  for e in "${list[@]}"; do
    IFS=: read src m s <<< "$e"
    case $src in
      real) args="--model=bazel-bin/zoo/real_models/$m.onnx --input_shape=$s";;
      cpp) args="--model=$m.onnx";;
      torch) args="--model=bazel-bin/zoo/torch_zoo/$m.onnx";;
    esac
    [ "${SHARED:-0}" = 1 ] || rm -f "$tmp/cache.txt"
    out=$(./bazel-bin/optimiser/optimiser $args --search=none --timing_cache="$tmp/cache.txt" --output="$tmp/out.onnx" 2>&1)
    est=$(echo "$out" | grep -o "estimate [0-9.]*" | head -1 | cut -d' ' -f2)
    meas=$(echo "$out" | grep -o "^measured: *[0-9.]*" | awk '{print $2}')
    err=$(echo "$out" | grep -o "error [-+0-9.]*%" | head -1 | cut -d' ' -f2)
    echo "$rep $src $m $est $meas $err"
  done
done
echo done

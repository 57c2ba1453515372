#!/bin/bash
# Builds the CUDA backend's tests and //benchmarks:cuda_zoo_bench without
# Bazel and runs them, on a GPU machine that has a CUDA toolkit (nvcc,
# cuBLAS), cuDNN and PyTorch from pip (its ATen and c10 stand in for
# Debian's libtorch) but not this project's toolchain: the `device` tool's
# machines. Z3 and GoogleTest come from .devdeps/ (tools/cuda_device/deps.sh,
# carried). Writes logs and the test reports to $OUT. Never used in CI.
# With "optimise" it builds //optimiser the same way instead (its source
# list and generated sources also from .devdeps) and optimises the zoo's
# ResNet-50 and BERT-Base (or $MODELS) with --device=cuda.
#
#   device run: tools/cuda_device/run.sh [optimise]   (carry: .devdeps)
MODE=${1:-tests}
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/rlflow_cuda_out}
B=/tmp/rlflow_cuda_build
mkdir -p "$OUT" "$B"
D=$PWD/.devdeps
# TORCH_INCLUDES, TORCH_LIBDIR and ABI may be given (e.g. Debian's libtorch,
# to try this script where there is no GPU); else from python3's torch.
if [ -z "${TORCH_LIBDIR:-}" ]; then
  TORCH=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  TORCH_INCLUDES="$TORCH/include $TORCH/include/torch/csrc/api/include"
  TORCH_LIBDIR=$TORCH/lib
  ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
fi
SITE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || echo /nonexistent)
CUDA=$(dirname "$(dirname "$(command -v nvcc)")")
find_dir() {  # the first directory among the rest holding $1
  local f=$1
  shift
  for dir in "$@"; do
    if [ -e "$dir/$f" ]; then
      echo "$dir"
      return
    fi
  done
}
CUDNN_INC=$(find_dir cudnn.h "$CUDA/include" /usr/include "$SITE"/nvidia/cudnn/include "$SITE"/nvidia/*/include)
CUBLAS_INC=$(find_dir cublas_v2.h "$CUDA/include" "$SITE"/nvidia/cublas/include "$SITE"/nvidia/*/include)
CUDNN_LIB=$(find_dir libcudnn.so.9 "$CUDA/lib64" /usr/lib/x86_64-linux-gnu "$SITE"/nvidia/cudnn/lib "$SITE"/nvidia/*/lib)
CUBLAS_LIB=$(find_dir libcublas.so.13 "$CUDA/lib64" "$SITE"/nvidia/cublas/lib "$SITE"/nvidia/*/lib)
echo "torch $TORCH_LIBDIR (cxx11 abi $ABI); cuda $CUDA; cudnn.h $CUDNN_INC; cublas_v2.h $CUBLAS_INC; libcudnn $CUDNN_LIB; libcublas $CUBLAS_LIB"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export LD_LIBRARY_PATH="$TORCH_LIBDIR:$D/lib:$CUDNN_LIB:$CUBLAS_LIB:$CUDA/lib64:${LD_LIBRARY_PATH:-}"
FLAGS="-std=c++17 -O2 -fPIC -w -D_GLIBCXX_USE_CXX11_ABI=$ABI -DONNX_ML=1 -DONNX_NAMESPACE=onnx -I. -I$D/include -I$D/gen -I$D/gtest/include -I$D/gtest \
  $(for i in $TORCH_INCLUDES; do echo "-I$i"; done) -I$CUDA/include -I$CUDNN_INC -I$CUBLAS_INC \
  -DRLFLOW_CUDA_LIB_DIR=\"$CUDA/lib64\""
LIB_SRCS="core/attribute.cc core/error.cc core/graph.cc core/graph_builder.cc core/node_key.cc core/op_registry.cc
  core/strings.cc core/symbolic.cc core/tensor.cc core/ops/activations.cc core/ops/elementwise.cc
  core/ops/exporter_ops.cc core/ops/helpers.cc core/ops/kernel.cc core/ops/nn.cc core/ops/resize.cc
  core/ops/semantics.cc core/ops/tensor_ops.cc runtime/executor.cc runtime/cuda/device.cc runtime/cuda/executor.cc
  runtime/cuda/libs.cc runtime/cuda/plan.cc zoo/zoo.cc core/file_util.cc core/summary.cc runtime/stats.cc
  runtime/cost_model.cc runtime/cuda/cuda_backend.cc"
TEST_SRCS="core/op_cases_testing.cc runtime/cuda/conformance_test.cc runtime/cuda/plan_test.cc runtime/cuda/device_test.cc
  $D/gtest/src/gtest-all.cc $D/gtest/src/gtest_main.cc benchmarks/cuda_zoo_bench.cc"
obj() { echo "$B/$(echo "$1" | tr '/' '_').o"; }
if [ "$MODE" = optimise ]; then
  LIB_SRCS="$(cat "$D/optimiser_srcs.txt") $D/gen/core/rules/rules.pb.cc $D/gen/world_model/rollouts.pb.cc"
  TEST_SRCS=""
fi
export -f obj
export B FLAGS
t0=$(date +%s)
printf '%s\n' $LIB_SRCS $TEST_SRCS | xargs -P "$(nproc)" -I{} bash -c 'g++ $FLAGS -c {} -o "$(obj {})" 2> "$(obj {}).err" || echo "FAILED {}"' | tee "$OUT/compile_failures.txt"
nvcc -std=c++17 -O2 -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 -I. -c runtime/cuda/kernels.cu -o "$B/kernels.o" || echo "FAILED kernels.cu" | tee -a "$OUT/compile_failures.txt"
echo "compiled in $(( $(date +%s) - t0 )) s"
for f in "$B"/*.err; do [ -s "$f" ] && { echo "---- $f"; head -30 "$f"; }; done > "$OUT/compile_errors.txt"
if [ -s "$OUT/compile_failures.txt" ]; then
  cat "$OUT/compile_errors.txt" | head -80
  exit 1
fi
LIBS="$(for s in $LIB_SRCS; do obj "$s"; done) $B/kernels.o"
LINK="-L$TORCH_LIBDIR -ltorch_cpu -lc10 $D/lib/libz3.so.4 -L$CUDA/lib64 -lcudart_static -ldl -lrt -lpthread"
if [ "$MODE" = optimise ]; then
  g++ -o "$B/optimiser" $LIBS -L"$TORCH_LIBDIR" -ltorch -ltorch_cpu -lc10 "$D"/lib/*.so* -L"$CUDA/lib64" -lcudart_static \
    -ldl -lrt -lpthread || exit 1
  echo "linked in $(( $(date +%s) - t0 )) s"
  rc=0
  "$B/optimiser" --list_devices
  for m in ${MODELS:-resnet50 bert_base}; do
    timeout 240 "$B/optimiser" --model="$m" --device="${DEVICE:-cuda}" --rules=rules/default.rules.pb \
      --output="$OUT/$m.cuda.onnx" --report="$OUT/$m.report.json" --timing_cache="$B/cache.txt" --time_limit="${TIME_LIMIT:-60}" \
      2>&1 | tee "$OUT/$m.log" | tail -40
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  done
  rm -f "$OUT"/*.onnx  # the models are big; the reports say what was written
  echo "done in $(( $(date +%s) - t0 )) s, rc=$rc"
  exit $rc
fi
g++ -o "$B/conformance_test" $LIBS "$(obj core/op_cases_testing.cc)" "$(obj runtime/cuda/conformance_test.cc)" \
  "$(obj $D/gtest/src/gtest-all.cc)" "$(obj $D/gtest/src/gtest_main.cc)" $LINK || exit 1
g++ -o "$B/plan_test" $LIBS "$(obj core/op_cases_testing.cc)" "$(obj runtime/cuda/plan_test.cc)" \
  "$(obj $D/gtest/src/gtest-all.cc)" "$(obj $D/gtest/src/gtest_main.cc)" $LINK || exit 1
g++ -o "$B/device_test" $LIBS "$(obj runtime/cuda/device_test.cc)" \
  "$(obj $D/gtest/src/gtest-all.cc)" "$(obj $D/gtest/src/gtest_main.cc)" $LINK || exit 1
g++ -o "$B/cuda_zoo_bench" $LIBS "$(obj benchmarks/cuda_zoo_bench.cc)" $LINK || exit 1
echo "linked in $(( $(date +%s) - t0 )) s"
rc=0
"$B/plan_test" --gtest_brief=1 || rc=1
timeout 120 "$B/device_test" --gtest_output=xml:"$OUT/device.xml" 2>&1 | tail -30 || rc=1
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
timeout 300 "$B/conformance_test" --gtest_output=xml:"$OUT/conformance.xml" 2>&1 | tail -150 || rc=1
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
timeout 300 "$B/cuda_zoo_bench" 2>&1 | tee "$OUT/cuda_zoo_bench.txt"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
echo "done in $(( $(date +%s) - t0 )) s, rc=$rc"
exit $rc

#!/bin/bash
# Gathers, into .devdeps/ (git-ignored), what tools/cuda_device/run.sh needs
# on a GPU machine that has its own CUDA toolkit, cuDNN and pip PyTorch but
# not this project's Debian packages: the headers and libraries of Z3,
# protobuf, ONNX, glog, gflags, Open MPI and nlohmann/json, GoogleTest's
# sources, the generated sources (the zoo's model list, the protobuf
# messages) and the optimiser's source list. Run here, after
# ./bazelw build //optimiser.
set -euo pipefail
cd "$(dirname "$0")/../.."
d=.devdeps
rm -rf "$d"
mkdir -p "$d/include" "$d/lib" "$d/gen/zoo"
cp /usr/include/z3*.h "$d/include/"
mkdir -p "$d/include/google"
cp -r /usr/include/google/protobuf "$d/include/google/"
cp -r /usr/include/onnx /usr/include/glog /usr/include/gflags /usr/include/nlohmann "$d/include/"
cp /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h /usr/lib/x86_64-linux-gnu/openmpi/include/mpi_portable_platform.h \
  /usr/lib/x86_64-linux-gnu/openmpi/include/mpi-ext.h "$d/include/"
# The libraries (by soname) and theirs, but the C and C++ runtimes.
for l in libz3.so.4 libprotobuf.so.32 libonnx.so libonnx_proto.so.1 libglog.so.1 libgflags.so.2.2 libunwind.so.8 \
  libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40 libhwloc.so.15 libevent_core-2.1.so.7 \
  libevent_pthreads-2.1.so.7; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$d/lib/$(objdump -p "/lib/x86_64-linux-gnu/$l" | sed -n "s/^ *SONAME *//p")"
done
cp -r /usr/src/googletest/googletest "$d/gtest"
cp bazel-bin/zoo/model_names.inc "$d/gen/zoo/"
mkdir -p "$d/gen/core/rules" "$d/gen/world_model"
cp bazel-bin/core/rules/rules.pb.cc bazel-bin/core/rules/rules.pb.h "$d/gen/core/rules/"
cp bazel-bin/world_model/rollouts.pb.cc bazel-bin/world_model/rollouts.pb.h "$d/gen/world_model/"
./bazelw query 'kind("source file", deps(//optimiser:optimiser))' --output=label 2>/dev/null |
  sed -n 's|^//\(.*\):\(.*\.cc\)$|\1/\2|p' | sed 's|^/||' > "$d/optimiser_srcs.txt"
wc -l < "$d/optimiser_srcs.txt"
grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo '/.devdeps/' >> .git/info/exclude
du -sh "$d"

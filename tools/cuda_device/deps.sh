#!/bin/bash
# Gathers, into .devdeps/ (git-ignored), what tools/cuda_device/run.sh needs
# on a GPU machine that has its own CUDA toolkit, cuDNN and pip PyTorch but
# not this project's Debian packages: Z3's headers and library, GoogleTest's
# sources, and the zoo's generated model list. Run here, after
# ./bazelw build //zoo.
set -euo pipefail
cd "$(dirname "$0")/../.."
d=.devdeps
rm -rf "$d"
mkdir -p "$d/include" "$d/lib" "$d/gen/zoo"
cp /usr/include/z3*.h "$d/include/"
cp /lib/x86_64-linux-gnu/libz3.so.4 "$d/lib/"
cp -r /usr/src/googletest/googletest "$d/gtest"
cp bazel-bin/zoo/model_names.inc "$d/gen/zoo/"
grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo '/.devdeps/' >> .git/info/exclude
du -sh "$d"

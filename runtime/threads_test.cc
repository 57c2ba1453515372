// --threads=1 must mean one core: ATen's pool and OpenBLAS's (GEMMs).
#include "runtime/threads.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>

namespace rlflow {
namespace {

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// CPU time over wall time of a few large matrix products (OpenBLAS GEMM):
// about 1 on one thread; up to the core count when the BLAS pool is free.
TEST(Threads, OneThreadUsesAboutOneCore) {
  ThreadPinning p = SetComputeThreads(1);
  EXPECT_EQ(p.aten, 1);
  EXPECT_TRUE(p.blas_pinned) << "libblas.so.3 is not OpenBLAS (./bazelw installs libopenblas0-pthread)";
  at::Tensor a = at::randn({768, 768}), b = at::randn({768, 768});
  at::Tensor c = at::mm(a, b);  // warm-up
  double cpu0 = ProcessCpuSeconds();
  auto wall0 = std::chrono::steady_clock::now();
  for (int k = 0; k < 20; ++k) c = at::mm(c, b) * 1e-3;
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  double cpu = ProcessCpuSeconds() - cpu0;
  EXPECT_LT(cpu / wall, 1.3) << "cpu " << cpu << " s over wall " << wall << " s";
  EXPECT_TRUE(at::isfinite(c).all().item<bool>());
}

}  // namespace
}  // namespace rlflow

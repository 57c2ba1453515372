// --threads=1 must mean one core: ATen's pool and OpenBLAS's (GEMMs).
#include "runtime/threads.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iterator>

// Built with AddressSanitizer: gcc says so with __SANITIZE_ADDRESS__,
// clang 14 (the fuzz configuration) with __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define RLFLOW_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RLFLOW_ASAN 1
#endif
#endif
#ifndef RLFLOW_ASAN
#define RLFLOW_ASAN 0
#endif

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

long ThreadsOfThisProcess() {
  return std::distance(std::filesystem::directory_iterator("/proc/self/task"), std::filesystem::directory_iterator());
}

// OpenBLAS shuts its thread server down before every fork; pinning again to
// the count already set must not start it again: its new threads spin for
// about 0.1 s of CPU each before they sleep, and a process that runs the
// pipeline again after a fork (ONNX's shape inference and ONNX Runtime's
// node process are forked) paid that on every run.
TEST(Threads, PinningAgainAfterAForkStartsNoThread) {
  ASSERT_TRUE(SetComputeThreads(1).blas_pinned);
  at::Tensor a = at::randn({256, 256});
  at::Tensor c = at::mm(a, a);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const long before = ThreadsOfThisProcess();
  for (int k = 0; k < 3; ++k) SetComputeThreads(1);
  EXPECT_EQ(ThreadsOfThisProcess(), before);
  c = at::mm(c, a);  // one thread: runs without the server
  EXPECT_TRUE(at::isfinite(c).all().item<bool>());
}

#if !RLFLOW_ASAN
long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}
#endif

// A 48 MiB tensor allocated, written and freed five times: by glibc's
// defaults (above its largest adaptive mmap threshold, 32 MiB) every round
// maps fresh pages and faults each of its 12288 pages in; with steady
// allocation the block is reused from the heap after the first round.
TEST(Threads, SteadyAllocationReusesLargeTensors) {
#if RLFLOW_ASAN
  GTEST_SKIP() << "the sanitizer's allocator ignores mallopt";
#else
  ASSERT_TRUE(SetSteadyAllocation());
  const int64_t n = (48 << 20) / 4;
  { at::Tensor t = at::ones({n}); }  // first round: the heap grows
  long before = MinorFaults();
  for (int k = 0; k < 4; ++k) {
    at::Tensor t = at::empty({n});
    t.fill_(static_cast<float>(k));
    ASSERT_EQ(t[n - 1].item<float>(), static_cast<float>(k));
  }
  EXPECT_LT(MinorFaults() - before, 1000) << "each round faulted its pages in again";
#endif
}

}  // namespace
}  // namespace rlflow

#pragma once
// Pinning the compute thread pools: ATen's intra-op pool and the BLAS
// library's own (Debian's libtorch calls the system BLAS, OpenBLAS, whose
// GEMMs otherwise run on every core whatever ATen is told).

namespace rlflow {

struct ThreadPinning {
  int aten = 0;              // ATen intra-op threads after the call
  bool blas_pinned = false;  // the BLAS library exposed a thread setter and it was called
};

// n > 0: both pools to n threads; n == 0: leave the libraries' defaults.
ThreadPinning SetComputeThreads(int n);

// Tensors up to kHeapTensorBytes come from glibc's heap, and freed heap
// memory up to kKeptHeapBytes stays with the process (as an inference
// runtime's arena keeps it). glibc's defaults adapt as the process runs:
// its mmap threshold starts at 128 KiB and rises only after a large block
// is freed, so the same graph ran 2.5x slower early in a process (each
// activation mapped, page-faulted in and unmapped on every run; SqueezeNet
// calibrated at 40 ms, measured at 16 ms minutes later). Fixed thresholds
// make every run of a process allocate alike. Process-wide, idempotent; a
// no-op under a sanitizer's allocator. Returns whether glibc took them.
constexpr long kHeapTensorBytes = 64L << 20;
constexpr long kKeptHeapBytes = 256L << 20;
bool SetSteadyAllocation();

// This thread's CPU time in milliseconds (CLOCK_THREAD_CPUTIME_ID). With one
// compute thread all of a run's work is on the calling thread, so this
// leaves out other processes' time on its core; not the host's slowdowns,
// which a guest's clocks count as its own time (on this project's VMs
// thread CPU time moves with wall time to within 0.3%).
double ThreadCpuMs();

}  // namespace rlflow

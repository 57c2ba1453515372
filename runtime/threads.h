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

}  // namespace rlflow

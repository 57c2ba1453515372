#include "runtime/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <malloc.h>

namespace rlflow {

ThreadPinning SetComputeThreads(int n) {
  ThreadPinning p;
  if (n > 0) {
    at::set_num_threads(n);
    // OpenBLAS (libblas.so.3 through Debian's alternatives) is loaded with
    // libtorch; the symbol is looked up so that another BLAS still links.
    using SetFn = void (*)(int);
    if (auto* f = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
      f(n);
      p.blas_pinned = true;
    }
  }
  p.aten = at::get_num_threads();
  return p;
}

bool SetSteadyAllocation() {
  // mallopt returns 1 on success.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapTensorBytes)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, static_cast<int>(kKeptHeapBytes)) == 1;
}

}  // namespace rlflow

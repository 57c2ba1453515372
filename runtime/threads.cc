#include "runtime/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <malloc.h>
#include <time.h>

namespace rlflow {

ThreadPinning SetComputeThreads(int n) {
  ThreadPinning p;
  if (n > 0) {
    at::set_num_threads(n);
    // OpenBLAS (libblas.so.3 through Debian's alternatives) is loaded with
    // libtorch; the symbol is looked up so that another BLAS still links.
    // Set only when it differs: OpenBLAS shuts its thread server down
    // before every fork (a pthread_atfork handler), and its setter starts
    // the server again, whose new threads then spin in sched_yield for
    // about 0.1 s of CPU before they sleep, even for one thread; a process
    // that forks between pipeline runs (ONNX's shape inference, ONNX
    // Runtime's node process) paid that on every run.
    using SetFn = void (*)(int);
    using GetFn = int (*)();
    if (auto* f = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
      auto* get = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
      if (get == nullptr || get() != n) f(n);
      p.blas_pinned = true;
    }
  }
  p.aten = at::get_num_threads();
  return p;
}

double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

bool SetSteadyAllocation() {
  // mallopt returns 1 on success.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapTensorBytes)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, static_cast<int>(kKeptHeapBytes)) == 1;
}

}  // namespace rlflow

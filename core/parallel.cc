#include "core/parallel.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace rlflow {

bool ParallelFor(size_t n, int threads, const std::atomic<bool>* stop,
                 const std::function<void(int worker, size_t k)>& body) {
  std::atomic<size_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto worker = [&](int w) {
    for (;;) {
      if (failed.load() || (stop != nullptr && stop->load())) return;
      size_t k = next.fetch_add(1);
      if (k >= n) return;
      try {
        body(w, k);
        ++done;
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  const int count = std::max(1, threads);
  std::vector<std::thread> pool;
  pool.reserve(count - 1);
  for (int t = 1; t < count; ++t) pool.emplace_back(worker, t);
  worker(0);  // the calling thread is worker 0
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return done.load() == n;
}

}  // namespace rlflow

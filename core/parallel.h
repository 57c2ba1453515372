#pragma once
// The one worker pool of the project's batch tools (generator, verifier):
// items 0..n-1 taken in order from a shared counter by a fixed number of
// threads, stoppable between items, exceptions carried to the caller.
#include <atomic>
#include <cstddef>
#include <functional>

namespace rlflow {

// Runs body(worker, k) for every k in [0, n) on `threads` threads (at least
// one; worker is in [0, threads)), each item exactly once, in no particular
// order across workers. Once `stop` (may be null) is set, workers take no
// new item and the call returns false after the running items finish. If a
// body throws, the other workers stop taking items and the first exception
// is rethrown here after every thread has joined. Returns true when every
// item ran.
bool ParallelFor(size_t n, int threads, const std::atomic<bool>* stop,
                 const std::function<void(int worker, size_t k)>& body);

}  // namespace rlflow

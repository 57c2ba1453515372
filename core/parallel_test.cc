#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <vector>

namespace rlflow {
namespace {

TEST(ParallelFor, RunsEveryItemOnceOnItsWorkers) {
  for (int threads : {1, 2, 5}) {
    std::vector<std::atomic<int>> hits(1000);
    std::vector<std::atomic<int>> by_worker(threads);
    std::atomic<int> bad_worker{0};
    EXPECT_TRUE(ParallelFor(hits.size(), threads, nullptr, [&](int w, size_t k) {
      if (w < 0 || w >= threads)
        ++bad_worker;
      else
        ++by_worker[w];
      ++hits[k];
    }));
    for (size_t k = 0; k < hits.size(); ++k)
      ASSERT_EQ(hits[k].load(), 1) << "item " << k << ", " << threads << " threads";
    EXPECT_EQ(bad_worker.load(), 0);
    int total = 0;
    for (auto& c : by_worker) total += c.load();
    EXPECT_EQ(total, 1000);
  }
  EXPECT_TRUE(ParallelFor(0, 3, nullptr, [](int, size_t) { FAIL() << "no items"; }));
}

TEST(ParallelFor, StopsTakingItemsOnceStopIsSet) {
  std::atomic<bool> stop{false};
  std::atomic<int> ran{0};
  bool all = ParallelFor(10000, 2, &stop, [&](int, size_t k) {
    ++ran;
    if (k == 10) stop = true;
  });
  EXPECT_FALSE(all);
  EXPECT_LT(ran.load(), 10000);
  EXPECT_GE(ran.load(), 11);
}

TEST(ParallelFor, RethrowsTheFirstExceptionAfterJoining) {
  // One worker: nothing runs after the item that threw.
  std::atomic<int> ran{0};
  auto body = [&](int, size_t k) {
    ++ran;
    if (k == 5) throw std::runtime_error("item 5");
  };
  EXPECT_THROW(ParallelFor(10000, 1, nullptr, body), std::runtime_error);
  EXPECT_EQ(ran.load(), 6);
  // Several: the exception reaches the caller, whichever worker threw.
  for (int round = 0; round < 20; ++round) {
    try {
      ParallelFor(1000, 3, nullptr, body);
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "item 5");
    }
  }
}

}  // namespace
}  // namespace rlflow

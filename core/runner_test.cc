#include "core/runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "core/error.h"

namespace rlflow {
namespace {

TEST(Runner, NoLimitsNeverStops) {
  Runner r;
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(r.Check(), StopReason::kNone);
  r.CountSteps(1000000);
  EXPECT_FALSE(r.ShouldStop());
  EXPECT_EQ(r.stats().steps, 1000000);
  EXPECT_EQ(r.stats().stopped, StopReason::kNone);
  EXPECT_TRUE(std::isinf(r.Remaining()));
}

TEST(Runner, DeadlineStopsAndStaysStopped) {
  RunnerLimits l;
  l.time_limit_s = 0.05;
  Runner r(l);
  EXPECT_EQ(r.Check(), StopReason::kNone);
  EXPECT_GT(r.Remaining(), 0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_EQ(r.Check(), StopReason::kTimeLimit);
  EXPECT_EQ(r.Remaining(), 0.0);
  EXPECT_EQ(r.stats().stopped, StopReason::kTimeLimit);
  EXPECT_GE(r.stats().stopped_at_s, 0.05);
  EXPECT_EQ(r.Check(), StopReason::kTimeLimit);  // sticky
}

TEST(Runner, InterruptTakesPrecedenceAndIsSticky) {
  std::atomic<bool> interrupted{false};
  RunnerLimits l;
  l.interrupted = &interrupted;
  l.max_steps = 3;
  Runner r(l);
  r.CountSteps(2);
  EXPECT_EQ(r.Check(), StopReason::kNone);
  interrupted = true;
  r.CountSteps(5);
  EXPECT_EQ(r.Check(), StopReason::kInterrupted);
  interrupted = false;  // the run that was stopped stays stopped
  EXPECT_EQ(r.Check(), StopReason::kInterrupted);
}

TEST(Runner, StepLimit) {
  RunnerLimits l;
  l.max_steps = 10;
  Runner r(l);
  r.CountSteps(9);
  EXPECT_EQ(r.Check(), StopReason::kNone);
  r.CountSteps();
  EXPECT_EQ(r.Check(), StopReason::kStepLimit);
  EXPECT_TRUE(IsRunnerStop(StopReason::kStepLimit));
  EXPECT_FALSE(IsRunnerStop(StopReason::kLocalOptimum));
}

TEST(Runner, ProgressIsRateLimitedAndBuiltOnlyWhenShown) {
  std::vector<std::string> lines;
  Runner r(
      {}, [&](const std::string& s) { lines.push_back(s); }, /*progress_interval_s=*/3600);
  int built = 0;
  for (int i = 0; i < 5; ++i)
    r.Report([&] {
      ++built;
      return "line " + std::to_string(i);
    });
  ASSERT_EQ(lines.size(), 1u);  // the first, then nothing within the hour
  EXPECT_EQ(lines[0], "line 0");
  EXPECT_EQ(built, 1);
  r.Say("milestone");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "milestone");
  Runner silent;
  silent.Report([&] {
    ++built;
    return std::string("x");
  });
  EXPECT_EQ(built, 1);
}

TEST(Runner, RejectsBadLimits) {
  RunnerLimits l;
  l.time_limit_s = -1;
  EXPECT_THROW(Runner r(l), Error);
  RunnerLimits m;
  m.max_steps = -2;
  EXPECT_THROW(Runner r(m), Error);
}

TEST(Runner, NamesEveryReason) {
  for (StopReason s : {StopReason::kBudget, StopReason::kExhausted, StopReason::kLocalOptimum, StopReason::kTimeLimit,
                       StopReason::kInterrupted, StopReason::kNoSearch, StopReason::kStopAction, StopReason::kHorizon,
                       StopReason::kNoCandidates, StopReason::kStepLimit})
    EXPECT_STRNE(StopReasonName(s), "");
  EXPECT_STREQ(StopReasonName(StopReason::kTimeLimit), "time limit");
}

}  // namespace
}  // namespace rlflow

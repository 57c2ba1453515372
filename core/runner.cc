#include "core/runner.h"

#include <limits>

#include "core/error.h"

namespace rlflow {

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kNone: return "";
    case StopReason::kBudget: return "budget";
    case StopReason::kExhausted: return "exhausted";
    case StopReason::kLocalOptimum: return "local optimum";
    case StopReason::kTimeLimit: return "time limit";
    case StopReason::kInterrupted: return "interrupted";
    case StopReason::kNoSearch: return "no search";
    case StopReason::kStopAction: return "stop action";
    case StopReason::kHorizon: return "horizon";
    case StopReason::kNoCandidates: return "no candidates";
    case StopReason::kStepLimit: return "step limit";
  }
  return "?";
}

bool IsRunnerStop(StopReason reason) {
  return reason == StopReason::kTimeLimit || reason == StopReason::kInterrupted || reason == StopReason::kStepLimit;
}

Runner::Runner() : start_(Clock::now()) {}

Runner::Runner(RunnerLimits limits, Progress progress, double progress_interval_s)
    : limits_(limits), progress_(std::move(progress)), interval_s_(progress_interval_s), start_(Clock::now()) {
  if (!(limits_.time_limit_s >= 0)) Fail("--time_limit must be >= 0, got ", limits_.time_limit_s);
  if (limits_.max_steps < 0) Fail("the step limit must be >= 0, got ", limits_.max_steps);
  if (!(interval_s_ >= 0)) Fail("the progress interval must be >= 0, got ", interval_s_);
}

StopReason Runner::Check() {
  polls_.fetch_add(1, std::memory_order_relaxed);
  int stopped = stopped_.load(std::memory_order_relaxed);
  if (stopped != static_cast<int>(StopReason::kNone)) return static_cast<StopReason>(stopped);
  StopReason why = StopReason::kNone;
  if (limits_.interrupted != nullptr && limits_.interrupted->load())
    why = StopReason::kInterrupted;
  else if (limits_.time_limit_s > 0 && Elapsed() >= limits_.time_limit_s)
    why = StopReason::kTimeLimit;
  else if (limits_.max_steps > 0 && steps_.load(std::memory_order_relaxed) >= limits_.max_steps)
    why = StopReason::kStepLimit;
  if (why == StopReason::kNone) return why;
  int expected = static_cast<int>(StopReason::kNone);
  if (stopped_.compare_exchange_strong(expected, static_cast<int>(why))) {
    stopped_at_s_.store(Elapsed());
    return why;
  }
  return static_cast<StopReason>(expected);
}

void Runner::CountSteps(int64_t n) { steps_.fetch_add(n, std::memory_order_relaxed); }

void Runner::Report(const std::function<std::string()>& line) {
  if (!progress_) return;
  std::lock_guard<std::mutex> lock(progress_mu_);
  const double now = Elapsed();
  if (now - last_progress_s_ < interval_s_) return;
  last_progress_s_ = now;
  progress_(line());
}

void Runner::Say(const std::string& line) {
  if (!progress_) return;
  std::lock_guard<std::mutex> lock(progress_mu_);
  last_progress_s_ = Elapsed();
  progress_(line);
}

double Runner::Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

double Runner::Remaining() const {
  if (limits_.time_limit_s <= 0) return std::numeric_limits<double>::infinity();
  return std::max(0.0, limits_.time_limit_s - Elapsed());
}

RunnerStats Runner::stats() const {
  RunnerStats s;
  s.steps = steps_.load();
  s.polls = polls_.load();
  s.stopped = static_cast<StopReason>(stopped_.load());
  s.stopped_at_s = stopped_at_s_.load();
  return s;
}

}  // namespace rlflow

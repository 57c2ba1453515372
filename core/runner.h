#pragma once
// The one owner of when work stops, as egg's Runner is for every egg user:
// one deadline, the interrupt, a step limit, one progress hook, one stats
// record and a typed stop reason. Every search of an optimise run (its
// rounds, its greedy finish, the retries after a slower verdict), every
// environment episode and every pass pipeline polls the same Runner, so a
// time limit bounds all of them together and means the same for each.
//
// A Runner is cheap to poll (an atomic load and a clock read) and is shared
// by pointer; it is not copied. Thread-safe for polling and counting.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace rlflow {

// Why a search, an episode or a pipeline ended.
enum class StopReason {
  kNone,          // still running
  kBudget,        // taso: the graph budget is spent
  kExhausted,     // taso: nothing left in the queue; passes: the list ran out
  kLocalOptimum,  // greedy: no rewrite improves
  kTimeLimit,     // the Runner's deadline passed
  kInterrupted,   // the Runner's interrupt was raised
  kNoSearch,      // --search=none
  kStopAction,    // an agent chose to stop
  kHorizon,       // an episode reached its step limit
  kNoCandidates,  // no rewrite applies
  kStepLimit,     // the Runner's real-step limit is spent
};
// "budget", "exhausted", "local optimum", "time limit", "interrupted", "no
// search", "stop action", "horizon", "no candidates", "step limit", ""
// (kNone).
const char* StopReasonName(StopReason reason);
// True for the reasons a Runner imposes (time, interrupt, steps), as
// opposed to a search ending by itself.
bool IsRunnerStop(StopReason reason);

struct RunnerLimits {
  double time_limit_s = 0;  // from the Runner's construction; 0: none
  int64_t max_steps = 0;    // real steps (rewrites applied, passes run); 0: none
  const std::atomic<bool>* interrupted = nullptr;
};

struct RunnerStats {
  int64_t steps = 0;                       // real steps counted with CountSteps
  int64_t polls = 0;                       // Check() calls
  StopReason stopped = StopReason::kNone;  // the first limit that stopped work
  double stopped_at_s = 0;                 // when (seconds from the start)
};

class Runner {
 public:
  using Progress = std::function<void(const std::string&)>;
  using Clock = std::chrono::steady_clock;

  // No limits and no progress.
  Runner();
  // Throws rlflow::Error for a negative limit.
  explicit Runner(RunnerLimits limits, Progress progress = {}, double progress_interval_s = 2.0);
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // kNone while work may go on; else kInterrupted, kTimeLimit or
  // kStepLimit (in that order of precedence). Once a limit has stopped work
  // it stays stopped (the deadline does not move).
  StopReason Check();
  bool ShouldStop() { return Check() != StopReason::kNone; }

  // Counts real steps (a rewrite applied to a graph, a pass run).
  void CountSteps(int64_t n = 1);

  // Progress: `line` is built and passed to the hook only when a hook is
  // set and progress_interval_s has passed since the last line shown.
  void Report(const std::function<std::string()>& line);
  // A line shown whatever the interval (milestones: a round, an episode).
  void Say(const std::string& line);
  bool has_progress() const { return static_cast<bool>(progress_); }
  double progress_interval_s() const { return interval_s_; }

  double Elapsed() const;
  // Seconds left before the deadline (infinity without one; never < 0).
  double Remaining() const;
  const RunnerLimits& limits() const { return limits_; }
  RunnerStats stats() const;

 private:
  RunnerLimits limits_;
  Progress progress_;
  double interval_s_ = 2.0;
  Clock::time_point start_;
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> polls_{0};
  std::atomic<int> stopped_{static_cast<int>(StopReason::kNone)};
  std::atomic<double> stopped_at_s_{0};
  mutable std::mutex progress_mu_;
  double last_progress_s_ = -1e300;
};

}  // namespace rlflow

#pragma once
// The end-to-end verdict: is graph B faster than graph A? Decided from
// paired, interleaved runs (TimingBackend::TimePaired) by the median of the
// per-pair ratios A/B with a 95% confidence interval, in wall time and in
// CPU time. B is "faster" only when both intervals lie above 1.0, "slower"
// when either lies below 1.0, and otherwise "within noise".
#include <string>

#include "runtime/cost_model.h"
#include "runtime/stats.h"

namespace rlflow {

struct Verdict {
  enum class Outcome { kFaster, kWithinNoise, kSlower };
  Outcome outcome = Outcome::kWithinNoise;
  RatioInterval wall, cpu;    // speedup of B over A (A time / B time)
  std::string cpu_clock;      // PairedTimes::cpu_clock
  double a_ms = 0, b_ms = 0;  // median wall ms
  double a_cpu_ms = 0, b_cpu_ms = 0;
  int blocks = 1;  // PairedTimes::blocks (1: one block)
  bool faster() const { return outcome == Outcome::kFaster; }
  // "faster", "within noise", "slower".
  std::string OutcomeName() const;
  // e.g. "speedup 1.042x [1.031, 1.055] wall, 1.040x [1.030, 1.049] thread CPU (95%, 20 pairs): faster"
  std::string ToString() const;
};

Verdict Judge(const PairedTimes& times, double level = 0.95);

}  // namespace rlflow

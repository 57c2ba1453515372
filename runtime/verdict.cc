#include "runtime/verdict.h"

#include <algorithm>
#include <cstdio>

namespace rlflow {

Verdict Judge(const PairedTimes& t, double level) {
  Verdict v;
  v.wall = BlockedPairedRatio(t.wall_a, t.wall_b, t.blocks, level);
  v.cpu = BlockedPairedRatio(t.cpu_a, t.cpu_b, t.blocks, level);
  v.blocks = std::max<int>(1, static_cast<int>(t.blocks.size()));
  v.cpu_clock = t.cpu_clock;
  v.a_ms = Median(t.wall_a);
  v.b_ms = Median(t.wall_b);
  v.a_cpu_ms = Median(t.cpu_a);
  v.b_cpu_ms = Median(t.cpu_b);
  if (v.wall.Above1() && v.cpu.Above1())
    v.outcome = Verdict::Outcome::kFaster;
  else if (v.wall.Below1() || v.cpu.Below1())
    v.outcome = Verdict::Outcome::kSlower;
  return v;
}

std::string Verdict::OutcomeName() const {
  switch (outcome) {
    case Outcome::kFaster: return "faster";
    case Outcome::kSlower: return "slower";
    case Outcome::kWithinNoise: break;
  }
  return "within noise";
}

std::string Verdict::ToString() const {
  auto interval = [](const RatioInterval& r) {
    char buf[96];
    if (r.confidence > 0)
      std::snprintf(buf, sizeof buf, "%.3fx [%.3f, %.3f]", r.median, r.lo, r.hi);
    else
      std::snprintf(buf, sizeof buf, "%.3fx [no interval]", r.median);
    return std::string(buf);
  };
  char tail[96];
  if (blocks > 1)
    std::snprintf(tail, sizeof tail, " (%g%%, %d pairs in %d session pairs): ", 100 * wall.level, wall.n, blocks);
  else
    std::snprintf(tail, sizeof tail, " (%g%%, %d pairs): ", 100 * wall.level, wall.n);
  return "speedup " + interval(wall) + " wall, " + interval(cpu) + " " + cpu_clock + " CPU" + tail + OutcomeName();
}

}  // namespace rlflow

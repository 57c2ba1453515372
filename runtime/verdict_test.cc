#include "runtime/verdict.h"

#include <gtest/gtest.h>

namespace rlflow {
namespace {

PairedTimes Times(double wall_ratio, double cpu_ratio, int pairs, double jitter) {
  PairedTimes t;
  t.cpu_clock = "thread";
  for (int i = 0; i < pairs; ++i) {
    double machine = 10.0 * (1.0 + 0.3 * (i % 4));    // the machine drifts
    double e = jitter * ((i * 7919) % 11 - 5) / 5.0;  // +-jitter, deterministic
    t.wall_a.push_back(machine * wall_ratio * (1 + e));
    t.wall_b.push_back(machine);
    t.cpu_a.push_back(machine * cpu_ratio * (1 - e));
    t.cpu_b.push_back(machine);
  }
  return t;
}

// Pairs timed in blocks (ONNX Runtime session pairs): a block that
// disagrees with the others makes a speedup the pooled pairs show within
// noise; blocks that agree keep it.
TEST(Verdict, BlocksThatDisagreeAreWithinNoise) {
  PairedTimes t = Times(1.06, 1.06, 40, 0.005);
  t.blocks = {10, 10, 10, 10};
  EXPECT_TRUE(Judge(t).faster());
  EXPECT_NE(Judge(t).ToString().find("(95%, 40 pairs in 4 session pairs): faster"), std::string::npos)
      << Judge(t).ToString();
  for (int i = 30; i < 40; ++i) t.wall_a[i] *= 0.90, t.cpu_a[i] *= 0.90;  // the last pair of sessions: 0.954x
  EXPECT_EQ(Judge(t).OutcomeName(), "within noise") << Judge(t).ToString();
  t.blocks.clear();  // the same pairs as one block: the pooled interval says faster
  EXPECT_TRUE(Judge(t).faster()) << Judge(t).ToString();
}

TEST(Verdict, FasterOnlyWhenBothIntervalsLieAbove1) {
  Verdict v = Judge(Times(1.05, 1.04, 20, 0.01));
  EXPECT_TRUE(v.faster());
  EXPECT_EQ(v.OutcomeName(), "faster");
  EXPECT_NEAR(v.wall.median, 1.05, 0.011);
  EXPECT_GT(v.wall.lo, 1.0);
  EXPECT_NE(v.ToString().find("thread CPU (95%, 20 pairs): faster"), std::string::npos) << v.ToString();
  // Wall time says faster, CPU time cannot tell: within noise.
  Verdict mixed = Judge(Times(1.05, 1.0, 20, 0.01));
  EXPECT_EQ(mixed.OutcomeName(), "within noise");
  EXPECT_FALSE(mixed.faster());
  // A 1% difference under 5% jitter: within noise.
  EXPECT_EQ(Judge(Times(1.01, 1.01, 20, 0.05)).OutcomeName(), "within noise");
  // Slower in either clock: slower.
  EXPECT_EQ(Judge(Times(0.95, 0.95, 20, 0.01)).OutcomeName(), "slower");
  EXPECT_EQ(Judge(Times(1.00, 0.90, 20, 0.01)).OutcomeName(), "slower");
  // Too few pairs for a 95% interval: never faster.
  Verdict few = Judge(Times(1.5, 1.5, 5, 0.0));
  EXPECT_EQ(few.OutcomeName(), "within noise");
  EXPECT_NE(few.ToString().find("no interval"), std::string::npos);
}

}  // namespace
}  // namespace rlflow

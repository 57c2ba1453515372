#include "runtime/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

namespace rlflow {
namespace {

TEST(Stats, MedianQuantileSpread) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3, 4, 5}, 0.25), 2);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3, 4, 5}, 0.75), 4);
  EXPECT_DOUBLE_EQ(RelativeSpread({1, 2, 3, 4, 5}), 2.0 / 3.0);
  EXPECT_EQ(RelativeSpread({0, 0, 0}), 0);
}

// A series timed while the machine's speed moved: 20 runs of 1 ms with a
// jitter of 2%, the middle ones (a quarter and a little more) 1.5x slower.
// The medians of the first and last halves agree (the slow runs straddle
// the middle); the quarters do not.
TEST(Stats, DriftRatioSeesASlowMomentInsideASeries) {
  std::vector<double> series;
  for (int k = 0; k < 20; ++k) series.push_back(1.0 + 0.01 * (k % 3));
  EXPECT_NEAR(DriftRatio(series), 1.0, 0.021);
  for (int k = 7; k < 13; ++k) series[static_cast<size_t>(k)] *= 1.5;
  EXPECT_NEAR(DriftRatio(series), 1.5, 0.04);
  EXPECT_NEAR(Median(std::vector<double>(series.begin(), series.begin() + 10)) /
                  Median(std::vector<double>(series.begin() + 10, series.end())),
              1.0, 0.021);
  // Halves under 8 values, nothing under 4.
  EXPECT_DOUBLE_EQ(DriftRatio({1, 1, 2, 2, 2}), 2.0);
  EXPECT_DOUBLE_EQ(DriftRatio({1, 2, 3}), 1.0);
  EXPECT_DOUBLE_EQ(DriftRatio({}), 1.0);
}

// ORT's profiler events of a near-empty kernel: whole microseconds, most 2
// to 4, and a few the machine preempted. The mean follows the outliers, the
// median loses the fraction; the trimmed mean keeps it and drops them.
TEST(Stats, TrimmedMeanDropsOutliersAndKeepsFractions) {
  std::vector<double> events;
  for (int k = 0; k < 100; ++k) events.push_back(k % 4 == 0 ? 4.0 : k % 4 == 1 ? 2.0 : 3.0);  // mean 3.0
  EXPECT_DOUBLE_EQ(TrimmedMean(events, 0.1), 3.0);
  for (int k = 0; k < 5; ++k) events[static_cast<size_t>(k) * 7] = 900.0;  // 5 preempted events
  events.push_back(3.0);
  events.push_back(3.0);
  events.push_back(2.0);  // 103 values, 10 dropped from each end
  double sum = 0;
  for (double e : events) sum += e;
  EXPECT_GT(sum / static_cast<double>(events.size()), 40.0);  // the plain mean
  EXPECT_DOUBLE_EQ(TrimmedMean(events, 0.1), 252.0 / 83);     // 15 x 2, 50 x 3, 18 x 4 kept
  std::vector<double> fraction = {3, 3, 3, 4, 3, 3, 4, 3, 3, 3};
  EXPECT_DOUBLE_EQ(Median(fraction), 3.0);
  EXPECT_DOUBLE_EQ(TrimmedMean(fraction, 0.0), 3.2);
  EXPECT_DOUBLE_EQ(TrimmedMean(fraction, 0.1), 3.125);  // seven 3s and one 4 after dropping a 3 and a 4
  EXPECT_DOUBLE_EQ(TrimmedMean({}, 0.1), 0.0);
  EXPECT_DOUBLE_EQ(TrimmedMean({5.0}, 0.4), 5.0);
}

TEST(Stats, OrderStatisticInterval) {
  // 95%: at least 6 pairs (coverage 1 - 2/64 = 0.969 with the extremes).
  EXPECT_EQ(MinPairsFor(0.95), 6);
  RatioInterval five = PairedRatio({1, 1, 1, 1, 1}, {1, 1, 1, 1, 1});
  EXPECT_EQ(five.confidence, 0);
  EXPECT_FALSE(five.Above1());
  EXPECT_FALSE(five.Below1());
  // n = 10: the interval is [2nd, 9th] smallest ratio, coverage 1 - 2 * 11/1024.
  std::vector<double> a = {1.10, 1.00, 1.30, 1.05, 0.90, 1.20, 1.15, 1.02, 1.08, 1.25}, b(10, 1.0);
  RatioInterval r = PairedRatio(a, b);
  EXPECT_EQ(r.n, 10);
  EXPECT_DOUBLE_EQ(r.median, (1.08 + 1.10) / 2);
  EXPECT_DOUBLE_EQ(r.lo, 1.00);
  EXPECT_DOUBLE_EQ(r.hi, 1.25);
  EXPECT_NEAR(r.confidence, 1 - 22.0 / 1024, 1e-12);
  EXPECT_FALSE(r.Above1());  // 1.00 is in the interval
  // Pairs are compared as pairs: a common drift cancels.
  std::vector<double> drift_a, drift_b;
  for (int i = 0; i < 12; ++i) {
    double machine = 1.0 + 0.5 * (i % 3);  // the machine slows down by up to 2x
    drift_a.push_back(1.05 * machine);
    drift_b.push_back(1.00 * machine);
  }
  RatioInterval d = PairedRatio(drift_a, drift_b);
  EXPECT_NEAR(d.median, 1.05, 1e-12);
  EXPECT_TRUE(d.Above1());
  EXPECT_NE(d.ToString().find("1.050x [1.050, 1.050] (95%, 12 pairs)"), std::string::npos) << d.ToString();
}

// Simulated noisy runs: the interval covers the true median ratio at least
// 95% of the time, and an equal pair is called faster at most ~2.5%.
// Pairs timed in blocks (ONNX Runtime session pairs) whose own conditions
// move every pair in them: one block that disagrees is a sample of one
// that the pooled interval does not see.
TEST(Stats, BlocksThatDisagreeWidenTheInterval) {
  std::vector<double> a, b;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> jitter(0, 0.003);
  for (double effect : {1.06, 1.07, 1.05, 0.94})
    for (int k = 0; k < 10; ++k) a.push_back(effect * (1 + jitter(rng))), b.push_back(1.0);
  const std::vector<int> blocks = {10, 10, 10, 10};
  const RatioInterval pooled = PairedRatio(a, b), blocked = BlockedPairedRatio(a, b, blocks);
  EXPECT_TRUE(pooled.Above1()) << pooled.ToString();
  EXPECT_FALSE(blocked.Above1()) << blocked.ToString();
  EXPECT_EQ(blocked.median, pooled.median);
  EXPECT_LE(blocked.lo, pooled.lo);
  EXPECT_GE(blocked.hi, pooled.hi);
  // Blocks that agree: a real speedup is still found.
  for (size_t k = 30; k < 40; ++k) a[k] = a[k] / 0.94 * 1.06;
  EXPECT_TRUE(BlockedPairedRatio(a, b, blocks).Above1()) << BlockedPairedRatio(a, b, blocks).ToString();
  // One block: PairedRatio's.
  EXPECT_EQ(BlockedPairedRatio(a, b, {40}).lo, PairedRatio(a, b).lo);
}

// Identical graphs whose session pairs each move the ratio by N(0, 4%)
// (what a 495 MB model against a copy of itself showed in ORT), 4 blocks of
// 10 pairs with 1% noise within: the pooled interval calls most of them
// faster or slower, the blocked one about as often as its level allows.
TEST(Stats, BlockedIntervalKeepsItsLevelWhenSessionsDiffer) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> session(0, 0.04), pair(0, 0.01);
  int pooled_wrong = 0, blocked_wrong = 0;
  constexpr int kMeasurements = 200;
  for (int m = 0; m < kMeasurements; ++m) {
    std::vector<double> a, b;
    for (int block = 0; block < 4; ++block) {
      const double effect = std::exp(session(rng));
      for (int k = 0; k < 10; ++k) a.push_back(effect * std::exp(pair(rng))), b.push_back(1.0);
    }
    const RatioInterval p = PairedRatio(a, b), q = BlockedPairedRatio(a, b, {10, 10, 10, 10});
    pooled_wrong += p.Above1() || p.Below1() ? 1 : 0;
    blocked_wrong += q.Above1() || q.Below1() ? 1 : 0;
  }
  std::printf("of %d measurements of equal graphs, faster or slower: pooled %d, blocked %d\n", kMeasurements,
              pooled_wrong, blocked_wrong);
  EXPECT_GT(pooled_wrong, kMeasurements / 3);
  EXPECT_LE(blocked_wrong, kMeasurements / 10);
}

TEST(Stats, CoverageAndFalsePositivesOnSimulatedNoise) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> noise(0.0, 0.03);
  std::uniform_real_distribution<double> machine(1.0, 1.6);
  const int trials = 4000, pairs = 15;
  int covered = 0, false_faster = 0, detected = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> a, b, a0, b0;
    for (int i = 0; i < pairs; ++i) {
      double m = machine(rng);
      a.push_back(1.05 * m * noise(rng));
      b.push_back(m * noise(rng));
      a0.push_back(m * noise(rng));
      b0.push_back(m * noise(rng));
    }
    RatioInterval r = PairedRatio(a, b);
    // The ratio of two i.i.d. lognormal noises has median 1: the true median ratio is 1.05.
    if (r.lo <= 1.05 && 1.05 <= r.hi) ++covered;
    if (r.Above1()) ++detected;
    if (PairedRatio(a0, b0).Above1()) ++false_faster;
  }
  EXPECT_GE(covered, 0.95 * trials);
  EXPECT_LE(false_faster, 0.035 * trials);
  EXPECT_GE(detected, 0.85 * trials);  // a real 5% at 3% noise per run and 15 pairs is seen
}

}  // namespace
}  // namespace rlflow

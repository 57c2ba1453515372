#pragma once
// Statistics for timings on a noisy machine: medians, spreads, and the
// paired comparison every speed claim of rlflow rests on (the median of
// per-pair ratios of interleaved runs with a distribution-free confidence
// interval). No I/O, no dependencies.
#include <string>
#include <vector>

namespace rlflow {

double Median(std::vector<double> v);
// Linear-interpolated quantile, q in [0, 1]; 0 for an empty vector.
double Quantile(std::vector<double> v, double q);
// The mean of the values left when `trim` of them (a fraction, [0, 0.5))
// are dropped from each end: robust to a few outliers like the median, but
// keeping the fraction of values that come in whole units (ORT's profiler
// gives whole microseconds). 0 for an empty vector.
double TrimmedMean(std::vector<double> v, double trim);
// Interquartile range / median: a robust relative spread (0 if the median is 0).
double RelativeSpread(const std::vector<double>& v);

// How far the machine's speed moved while a series of timings was taken
// (`series` in the order taken): the series cut into 4 consecutive parts of
// (nearly) equal size (2 under 8 values, none under 4), the slowest part's
// median over the fastest's. 1 for a steady series and under 4 values. A
// slow moment of the host covering at least a quarter of the series, but
// not all of it, shows here even where readings taken right before and
// right after the series agree.
double DriftRatio(const std::vector<double>& series);

struct RatioInterval {
  int n = 0;              // pairs
  double median = 0;      // median of a[i] / b[i]
  double lo = 0, hi = 0;  // confidence interval of that median
  double level = 0;       // the requested confidence level (e.g. 0.95)
  double confidence = 0;  // actual coverage of [lo, hi] (>= level), 0 if too few pairs
  // True when the whole interval lies above 1 (a is slower than b: b is faster).
  bool Above1() const { return confidence > 0 && lo > 1.0; }
  bool Below1() const { return confidence > 0 && hi < 1.0; }
  std::string ToString() const;  // "1.042x [1.031, 1.055] (95%, 20 pairs)"
};

// The ratio a[i] / b[i] per pair, its median, and the order-statistic
// confidence interval for the median (exact under the binomial: the number
// of ratios below the true median is Binomial(n, 1/2)), the narrowest
// symmetric one whose coverage is at least `level`. Needs n >= 6 for 95%;
// with fewer pairs lo = 0, hi = infinity and confidence = 0.
RatioInterval PairedRatio(const std::vector<double>& a, const std::vector<double>& b, double level = 0.95);

// The same for pairs timed in blocks whose conditions differ between them
// (the pairs of each block in one pair of ONNX Runtime sessions, which sit
// in memory differently from one pair to the next: a model against a copy
// of itself measured 0.935x to 1.090x by single session pairs that each
// gave a narrow interval): `blocks` are the blocks' sizes, in order, adding
// up to the pairs. The median is the pooled one; the interval is the wider
// of PairedRatio's and Student's t interval over the blocks (each block's
// median ratio one sample, in logarithms; with 4 blocks t = 3.18 at 95%),
// so that it covers the variation between blocks, not only within them.
// Fewer than two blocks: PairedRatio.
RatioInterval BlockedPairedRatio(const std::vector<double>& a, const std::vector<double>& b,
                                 const std::vector<int>& blocks, double level = 0.95);
// Each block's median ratio a[i] / b[i] (pairs with a non-positive or
// infinite ratio left out, as PairedRatio does; an empty block none).
std::vector<double> BlockMedianRatios(const std::vector<double>& a, const std::vector<double>& b,
                                      const std::vector<int>& blocks);

// Smallest number of pairs for which PairedRatio can reach `level`.
int MinPairsFor(double level);

}  // namespace rlflow

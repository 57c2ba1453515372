#include "runtime/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace rlflow {

double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  size_t i = static_cast<size_t>(std::floor(pos));
  if (i + 1 >= v.size()) return v.back();
  double f = pos - static_cast<double>(i);
  return v[i] + f * (v[i + 1] - v[i]);
}

double TrimmedMean(std::vector<double> v, double trim) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t drop = static_cast<size_t>(std::clamp(trim, 0.0, 0.49) * static_cast<double>(v.size()));
  double sum = 0;
  for (size_t k = drop; k < v.size() - drop; ++k) sum += v[k];
  return sum / static_cast<double>(v.size() - 2 * drop);
}

double RelativeSpread(const std::vector<double>& v) {
  double m = Median(v);
  if (!(m > 0)) return 0;
  return (Quantile(v, 0.75) - Quantile(v, 0.25)) / m;
}

double DriftRatio(const std::vector<double>& series) {
  const size_t n = series.size();
  const size_t parts = n >= 8 ? 4 : n >= 4 ? 2 : 1;
  if (parts == 1) return 1.0;
  double lo = 0, hi = 0;
  for (size_t p = 0; p < parts; ++p) {
    const auto begin = series.begin() + static_cast<std::ptrdiff_t>(p * n / parts);
    const auto end = series.begin() + static_cast<std::ptrdiff_t>((p + 1) * n / parts);
    const double m = Median(std::vector<double>(begin, end));
    if (p == 0 || m < lo) lo = m;
    if (p == 0 || m > hi) hi = m;
  }
  return lo > 0 ? hi / lo : 1.0;
}

namespace {

// P(X <= k) for X ~ Binomial(n, 1/2).
double BinomialHalfCdf(int n, int k) {
  if (k < 0) return 0;
  double total = 0, term = std::pow(0.5, n);  // C(n, 0) / 2^n
  for (int i = 0; i <= k && i <= n; ++i) {
    total += term;
    term = term * (n - i) / (i + 1);
  }
  return std::min(total, 1.0);
}

// The largest k >= 1 with coverage 1 - 2 P(X <= k - 1) >= level of the
// interval [x_(k), x_(n+1-k)]; 0 if none.
int OrderStatisticRank(int n, double level, double* coverage) {
  int best = 0;
  *coverage = 0;
  for (int k = 1; 2 * k <= n + 1; ++k) {
    double c = 1.0 - 2.0 * BinomialHalfCdf(n, k - 1);
    if (c + 1e-12 < level) break;
    best = k;
    *coverage = c;
  }
  return best;
}

}  // namespace

int MinPairsFor(double level) {
  for (int n = 1; n < 1000; ++n) {
    double c;
    if (OrderStatisticRank(n, level, &c) > 0) return n;
  }
  return 1000;
}

RatioInterval PairedRatio(const std::vector<double>& a, const std::vector<double>& b, double level) {
  RatioInterval r;
  r.level = level;
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (b[i] > 0 && std::isfinite(a[i] / b[i])) ratios.push_back(a[i] / b[i]);
  r.n = static_cast<int>(ratios.size());
  if (ratios.empty()) return r;
  std::sort(ratios.begin(), ratios.end());
  r.median = Median(ratios);
  int k = OrderStatisticRank(r.n, level, &r.confidence);
  if (k == 0) {
    r.lo = 0;
    r.hi = std::numeric_limits<double>::infinity();
    r.confidence = 0;
    return r;
  }
  r.lo = ratios[k - 1];
  r.hi = ratios[r.n - k];
  return r;
}

namespace {

// Student's t distribution's quantile at probability p (> 0.5) for `df`
// degrees of freedom: bisection on its CDF, the density integrated by
// Simpson's rule (accurate to 1e-6 here; called a few times per verdict).
double StudentT(double p, int df) {
  const double v = df;
  const double c = std::exp(std::lgamma((v + 1) / 2) - std::lgamma(v / 2)) / std::sqrt(v * M_PI);
  const auto density = [&](double x) { return c * std::pow(1 + x * x / v, -(v + 1) / 2); };
  const auto cdf = [&](double x) {
    constexpr int kSteps = 2000;
    const double h = x / kSteps;
    double sum = density(0) + density(x);
    for (int i = 1; i < kSteps; ++i) sum += density(i * h) * (i % 2 ? 4 : 2);
    return 0.5 + sum * h / 3;
  };
  double lo = 0, hi = 1000;
  for (int it = 0; it < 60; ++it) {
    const double mid = (lo + hi) / 2;
    (cdf(mid) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace

std::vector<double> BlockMedianRatios(const std::vector<double>& a, const std::vector<double>& b,
                                      const std::vector<int>& blocks) {
  std::vector<double> medians;
  size_t at = 0;
  for (int size : blocks) {
    std::vector<double> ratios;
    for (int k = 0; k < size && at < a.size() && at < b.size(); ++k, ++at)
      if (b[at] > 0 && a[at] > 0 && std::isfinite(a[at] / b[at])) ratios.push_back(a[at] / b[at]);
    if (!ratios.empty()) medians.push_back(Median(ratios));
  }
  return medians;
}

RatioInterval BlockedPairedRatio(const std::vector<double>& a, const std::vector<double>& b,
                                 const std::vector<int>& blocks, double level) {
  RatioInterval r = PairedRatio(a, b, level);
  if (blocks.size() < 2 || r.confidence == 0) return r;
  // Each block's median ratio, in logarithms.
  std::vector<double> logs;
  for (double m : BlockMedianRatios(a, b, blocks)) logs.push_back(std::log(m));
  const int k = static_cast<int>(logs.size());
  if (k < 2) return r;
  double mean = 0, var = 0;
  for (double x : logs) mean += x / k;
  for (double x : logs) var += (x - mean) * (x - mean) / (k - 1);
  // The blocks as k samples of the ratio: Student's t interval of their
  // mean (in logarithms, so that A/B and B/A are symmetric).
  const double half = StudentT(1 - (1 - level) / 2, k - 1) * std::sqrt(var / k);
  r.lo = std::min(r.lo, std::exp(mean - half));
  r.hi = std::max(r.hi, std::exp(mean + half));
  return r;
}

std::string RatioInterval::ToString() const {
  char buf[128];
  if (confidence > 0)
    std::snprintf(buf, sizeof buf, "%.3fx [%.3f, %.3f] (%.0f%%, %d pairs)", median, lo, hi, 100 * level, n);
  else
    std::snprintf(buf, sizeof buf, "%.3fx (no interval: %d pairs)", median, n);
  return buf;
}

}  // namespace rlflow

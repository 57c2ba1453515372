#include "core/ops/semantics.h"

#include <algorithm>
#include <numeric>

namespace rlflow::ops {

std::vector<SliceSpec> SliceSpecs(const AttrReader& a, const Shape& shape, const std::vector<int64_t>& starts,
                                  const std::vector<int64_t>& ends, const std::vector<int64_t>* axes_in,
                                  const std::vector<int64_t>* steps_in) {
  const int64_t r = static_cast<int64_t>(shape.size());
  size_t n = starts.size();
  if (ends.size() != n) a.Fail("starts and ends differ in length");
  std::vector<int64_t> axes(n), steps(n, 1);
  if (axes_in && !axes_in->empty())
    axes = *axes_in;
  else
    std::iota(axes.begin(), axes.end(), 0);
  if (steps_in && !steps_in->empty()) steps = *steps_in;
  if (axes.size() != n || steps.size() != n) a.Fail("axes/steps differ in length from starts");
  std::vector<SliceSpec> out;
  for (size_t k = 0; k < n; ++k) {
    SliceSpec s;
    s.axis = NormalizeAxis(axes[k], r, a);
    s.step = steps[k];
    if (s.step == 0) a.Fail("slice step cannot be 0");
    int64_t dim = shape[s.axis];
    if (dim < 0) a.Fail("slicing an unknown dimension");
    int64_t st = starts[k], en = ends[k];
    if (st < 0) st += dim;
    if (en < 0) en += dim;
    if (s.step > 0) {
      st = std::clamp<int64_t>(st, 0, dim);
      en = std::clamp<int64_t>(en, 0, dim);
      s.count = en > st ? (en - st + s.step - 1) / s.step : 0;
    } else {
      st = std::clamp<int64_t>(st, 0, dim - 1);
      en = std::clamp<int64_t>(en, -1, dim - 1);
      s.count = st > en ? (st - en + (-s.step) - 1) / (-s.step) : 0;
    }
    s.start = st;
    s.end = en;
    out.push_back(s);
  }
  return out;
}

std::vector<int64_t> ReduceAxes(const AttrReader& a, int64_t rank) {
  std::vector<int64_t> axes;
  if (a.Has("axes")) {
    for (int64_t ax : a.Ints("axes")) axes.push_back(NormalizeAxis(ax, rank, a));
  } else {
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
  }
  return axes;
}

std::vector<int64_t> ReduceSumAxes(const AttrReader& a, const std::vector<int64_t>& given, int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t ax : given) axes.push_back(NormalizeAxis(ax, rank, a));
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) a.Fail("axes has a repeated axis");
  if (axes.empty() && a.Int("noop_with_empty_axes") == 0) {
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
  }
  return axes;
}

}  // namespace rlflow::ops

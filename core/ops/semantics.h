#pragma once
// What an operator's attributes and constant inputs mean, shared by the
// registry's CPU kernels and shape rules and by the other executors (the
// CUDA backend's plans), so that each rule of the ONNX spec is written
// once. No ATen.
#include <cstdint>
#include <vector>

#include "core/op_registry.h"

namespace rlflow::ops {

// Slice: one entry per sliced axis, clamped as the ONNX spec says. `count`
// elements from `start` in steps of `step` (negative: backwards; `end` is
// the exclusive bound after clamping).
struct SliceSpec {
  int64_t axis, start, end, step;
  int64_t count;
};
// From Slice's starts, ends and optional axes and steps (null or empty:
// the default), over an input of `shape`. Fails through `a` (naming the
// node) on mismatched lengths, a zero step or an unknown sliced dimension
// (Slice's shape rule passes such dimensions as 0 and leaves them unknown).
std::vector<SliceSpec> SliceSpecs(const AttrReader& a, const Shape& shape, const std::vector<int64_t>& starts,
                                  const std::vector<int64_t>& ends, const std::vector<int64_t>* axes_in,
                                  const std::vector<int64_t>* steps_in);

// The axes a reduction with an `axes` attribute (opset 13 forms of
// ReduceMean, ReduceMax, ...) reduces: the attribute's, normalised, or every
// axis.
std::vector<int64_t> ReduceAxes(const AttrReader& a, int64_t rank);
// ReduceSum (opset 13): the axes are an optional constant input; with none
// (or an empty list) every axis is reduced, or none if noop_with_empty_axes.
// Sorted; a repeated axis fails.
std::vector<int64_t> ReduceSumAxes(const AttrReader& a, const std::vector<int64_t>& given, int64_t rank);

}  // namespace rlflow::ops

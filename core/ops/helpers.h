#pragma once
// Small helpers shared by the op entries in core/ops/*.cc.
#include <string>
#include <vector>

#include "core/op_registry.h"
#include "core/ops/kernel.h"

namespace rlflow::ops {

inline AttrSpec IntAttr(const std::string& name, int64_t def) { return {name, AttrType::kInt, Attribute::Int(def)}; }
inline AttrSpec FloatAttr(const std::string& name, float def) {
  return {name, AttrType::kFloat, Attribute::Float(def)};
}
inline AttrSpec StringAttr(const std::string& name, const std::string& def) {
  return {name, AttrType::kString, Attribute::String(def)};
}
// Optional list attribute without a default (the rule decides).
inline AttrSpec IntsAttr(const std::string& name) { return {name, AttrType::kInts, std::nullopt, false}; }
inline AttrSpec RequiredInts(const std::string& name) { return {name, AttrType::kInts, std::nullopt, true}; }
inline AttrSpec RequiredInt(const std::string& name) { return {name, AttrType::kInt, std::nullopt, true}; }
inline AttrSpec OptionalAttr(const std::string& name, AttrType type) { return {name, type, std::nullopt, false}; }

inline TensorType Type(DType dtype, Shape shape) {
  TensorType t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  return t;
}

// A type with `rank` unknown dimensions; rank < 0: the rank is unknown too.
inline TensorType UnknownDims(DType dtype, int64_t rank) {
  TensorType t = Type(dtype, Shape(std::max<int64_t>(rank, 0), kUnknownDim));
  t.rank_known = rank >= 0;
  return t;
}

inline double Numel(const TensorType& t) { return static_cast<double>(std::max<int64_t>(t.NumElements(), 0)); }

// FLOPs = number of output elements times a constant.
inline FlopsFn PerOutputElement(double per) {
  return [per](const ShapeContext&, const std::vector<TensorType>& out) { return per * Numel(out[0]); };
}

// Static rank of an input; fails on an unknown rank.
inline int64_t RankOf(const ShapeContext& c, int i) {
  const TensorType& t = c.input(i);
  if (!t.rank_known) c.Fail("the rank of input " + std::to_string(i) + " is unknown");
  return t.rank();
}

// Convolution / pooling window geometry (ONNX semantics, auto_pad included).
struct Window {
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pad_begin, pad_end;
  Shape out_spatial;
  bool symmetric() const { return pad_begin == pad_end; }
};
Window ComputeWindow(const AttrReader& a, const Shape& in_spatial, const std::vector<int64_t>& kernel, bool ceil_mode,
                     bool has_dilations);

// Reshape target resolution (0 copies a dimension unless allowzero, -1 infers).
Shape ResolveReshape(const Shape& in, const std::vector<int64_t>& target, bool allowzero, const AttrReader& a);

}  // namespace rlflow::ops

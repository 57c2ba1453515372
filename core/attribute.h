#pragma once
// Typed operator attributes (ONNX's attribute kinds).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace rlflow {

enum class AttrType { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kOther };

std::string AttrTypeName(AttrType type);

struct Attribute {
  AttrType type = AttrType::kInt;
  int64_t i = 0;
  float f = 0.0f;
  std::string s;  // kString; for kOther: the serialized ONNX AttributeProto
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  TensorDataPtr tensor;

  static Attribute Int(int64_t v);
  static Attribute Float(float v);
  static Attribute String(std::string v);
  static Attribute Ints(std::vector<int64_t> v);
  static Attribute Floats(std::vector<float> v);
  static Attribute Strings(std::vector<std::string> v);
  static Attribute Tensor(TensorDataPtr v);

  uint64_t Hash() const;
  std::string ToString() const;  // short, for DOT and messages
  bool operator==(const Attribute& other) const;
  bool operator!=(const Attribute& other) const { return !(*this == other); }
};

// Sorted by name so that hashing and printing are deterministic.
using AttributeMap = std::map<std::string, Attribute>;

}  // namespace rlflow

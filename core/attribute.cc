#include "core/attribute.h"

#include <cstring>
#include <sstream>

namespace rlflow {

std::string AttrTypeName(AttrType type) {
  switch (type) {
    case AttrType::kInt: return "int";
    case AttrType::kFloat: return "float";
    case AttrType::kString: return "string";
    case AttrType::kInts: return "ints";
    case AttrType::kFloats: return "floats";
    case AttrType::kStrings: return "strings";
    case AttrType::kTensor: return "tensor";
    case AttrType::kOther: return "other";
  }
  return "?";
}

Attribute Attribute::Int(int64_t v) {
  Attribute a;
  a.type = AttrType::kInt;
  a.i = v;
  return a;
}
Attribute Attribute::Float(float v) {
  Attribute a;
  a.type = AttrType::kFloat;
  a.f = v;
  return a;
}
Attribute Attribute::String(std::string v) {
  Attribute a;
  a.type = AttrType::kString;
  a.s = std::move(v);
  return a;
}
Attribute Attribute::Ints(std::vector<int64_t> v) {
  Attribute a;
  a.type = AttrType::kInts;
  a.ints = std::move(v);
  return a;
}
Attribute Attribute::Floats(std::vector<float> v) {
  Attribute a;
  a.type = AttrType::kFloats;
  a.floats = std::move(v);
  return a;
}
Attribute Attribute::Strings(std::vector<std::string> v) {
  Attribute a;
  a.type = AttrType::kStrings;
  a.strings = std::move(v);
  return a;
}
Attribute Attribute::Tensor(TensorDataPtr v) {
  Attribute a;
  a.type = AttrType::kTensor;
  a.tensor = std::move(v);
  return a;
}

uint64_t Attribute::Hash() const {
  uint64_t h = static_cast<uint64_t>(type) + 1;
  switch (type) {
    case AttrType::kInt: return HashCombine(h, static_cast<uint64_t>(i));
    case AttrType::kFloat: {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return HashCombine(h, bits);
    }
    case AttrType::kString:
    case AttrType::kOther: return HashCombine(h, HashString(s));
    case AttrType::kInts:
      for (int64_t v : ints) h = HashCombine(h, static_cast<uint64_t>(v));
      return h;
    case AttrType::kFloats:
      for (float v : floats) {
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        h = HashCombine(h, bits);
      }
      return h;
    case AttrType::kStrings:
      for (const auto& v : strings) h = HashCombine(h, HashString(v));
      return h;
    case AttrType::kTensor: return HashCombine(h, tensor ? tensor->content_hash() : 0);
  }
  return h;
}

std::string Attribute::ToString() const {
  std::ostringstream os;
  auto list = [&os](const auto& v) {
    os << "[";
    for (size_t k = 0; k < v.size(); ++k) os << (k ? "," : "") << v[k];
    os << "]";
  };
  switch (type) {
    case AttrType::kInt: os << i; break;
    case AttrType::kFloat: os << f; break;
    case AttrType::kString: os << '"' << s << '"'; break;
    case AttrType::kInts: list(ints); break;
    case AttrType::kFloats: list(floats); break;
    case AttrType::kStrings: list(strings); break;
    case AttrType::kTensor: os << "tensor" << (tensor ? tensor->type().ToString() : "[]"); break;
    case AttrType::kOther: os << "<" << s.size() << " bytes>"; break;
  }
  return os.str();
}

bool Attribute::operator==(const Attribute& o) const {
  if (type != o.type) return false;
  switch (type) {
    case AttrType::kInt: return i == o.i;
    case AttrType::kFloat: return std::memcmp(&f, &o.f, 4) == 0;
    case AttrType::kString:
    case AttrType::kOther: return s == o.s;
    case AttrType::kInts: return ints == o.ints;
    case AttrType::kFloats:
      return floats.size() == o.floats.size() &&
             (floats.empty() || std::memcmp(floats.data(), o.floats.data(), 4 * floats.size()) == 0);
    case AttrType::kStrings: return strings == o.strings;
    case AttrType::kTensor:
      if (!tensor || !o.tensor) return tensor == o.tensor;
      return *tensor == *o.tensor;
  }
  return false;
}

}  // namespace rlflow

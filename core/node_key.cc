#include "core/node_key.h"

#include <cstdio>
#include <vector>

#include "core/op_registry.h"

namespace rlflow {
namespace {

// The effective attributes and an opaque node's proto, hashed.
uint64_t AttributeHash(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  uint64_t h = 0;
  for (const auto& [name, a] : EffectiveAttributes(g, id)) h = HashCombine(HashCombine(h, HashString(name)), a.Hash());
  if (n.opaque()) h = HashCombine(h, HashString(*n.opaque_proto));
  return h;
}

// A Transpose's permutation moves a dimension of more than one element past
// another: its output is not laid out row-major (ATen's is_contiguous, which
// ignores unit dimensions).
bool MovesData(const Graph& g, const Node& n) {
  if (n.inputs.empty() || n.inputs[0] == kNoValue) return false;
  const TensorType& x = g.value(n.inputs[0]).type;
  if (!x.rank_known) return true;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  // The permutation as given, else the reversal (no copy: this runs for
  // every Transpose on the cost model's key path).
  auto it = n.attrs.find("perm");
  const std::vector<int64_t>* given = it != n.attrs.end() && !it->second.ints.empty() ? &it->second.ints : nullptr;
  const int64_t count = given != nullptr ? static_cast<int64_t>(given->size()) : rank;
  int64_t last = -1;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t axis = given != nullptr ? (*given)[k] : rank - 1 - k;
    if (axis < 0 || axis >= rank) return true;
    if (x.shape[axis] == 1) continue;
    if (axis < last) return true;
    last = axis;
  }
  return false;
}

struct InputPart {
  const TensorType* type = nullptr;  // null: an omitted optional input
  bool small_constant = false;
  uint64_t content = 0;  // a small stored constant's content hash
  bool permuted = false;
};

InputPart PartOf(const Graph& g, ValueId in) {
  InputPart p;
  if (in == kNoValue) return p;
  const Value& v = g.value(in);
  p.type = &v.type;
  // Contents that change what the op does (integers: shapes, axes, pads,
  // indices; a scalar: Pow's exponent picks the kernel). A vector of floats
  // (a small layer's bias or scale) changes nothing of the op's cost: by
  // its type only, so that two such layers are one key.
  const int64_t elements = v.initializer != nullptr ? v.initializer->NumElements() : 0;
  p.small_constant = v.initializer != nullptr && elements <= kNodeKeyConstantElements &&
                     (!IsFloatingPoint(v.type.dtype) || elements <= 1);
  if (p.small_constant) p.content = v.initializer->content_hash();
  p.permuted = PermutedView(g, in);
  return p;
}

// One input's part of the hash.
uint64_t InputPartHash(const InputPart& p) {
  if (p.type == nullptr) return 0x51ed27;
  const TensorType& type = *p.type;
  uint64_t h = HashCombine(static_cast<uint64_t>(type.dtype) * 4 + (type.rank_known ? 1 : 2), type.shape.size());
  for (int64_t d : type.shape) h = HashCombine(h, static_cast<uint64_t>(d));
  if (p.small_constant) h = HashCombine(h + 0x9e37, p.content);
  return p.permuted ? HashCombine(h, 0x7e57) : h;
}

}  // namespace

uint64_t OperatorHash(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  return HashCombine(HashCombine(HashString(n.domain), HashString(n.op)), AttributeHash(g, id));
}

bool PermutedView(const Graph& g, ValueId value) {
  // Through a chain of views (kSameView) to the operator that made the layout.
  for (ValueId v = value; v != kNoValue;) {
    const Value& val = g.value(v);
    if (val.producer == kNoNode) return val.arrives_permuted;
    const Node& n = g.node(val.producer);
    const OpDef* def = n.opaque() ? nullptr : OpRegistry::Global().Find(n.domain, n.op);
    if (def == nullptr || val.output_index != 0) return false;
    switch (def->output_layout) {
      case OpDef::OutputLayout::kFresh: return false;
      case OpDef::OutputLayout::kPermutedView:
        if (MovesData(g, n)) return true;
        break;  // the identity on the data: as its input
      case OpDef::OutputLayout::kSameView: break;
    }
    v = n.inputs.empty() ? kNoValue : n.inputs[0];
  }
  return false;
}

uint64_t NodeKeyHash(const Graph& g, NodeId id) {
  uint64_t h = OperatorHash(g, id);
  for (ValueId in : g.node(id).inputs) h = HashCombine(h, InputPartHash(PartOf(g, in)));
  return h | 1;
}

uint64_t ValueKeyHash(const Graph& g, ValueId value) { return InputPartHash(PartOf(g, value)); }

std::string NodeKeyText(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  std::string key = n.domain.empty() ? n.op : n.domain + "." + n.op;
  char buf[32];
  std::snprintf(buf, sizeof buf, "#%016llx", static_cast<unsigned long long>(AttributeHash(g, id)));
  key += buf;
  for (ValueId in : n.inputs) {
    const InputPart p = PartOf(g, in);
    key += p.type == nullptr ? " -" : " " + p.type->ToString();
    if (p.small_constant) {
      std::snprintf(buf, sizeof buf, "=%016llx", static_cast<unsigned long long>(p.content));
      key += buf;
    }
    if (p.permuted) key += "^t";
  }
  return key;
}

}  // namespace rlflow

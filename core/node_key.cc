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

// A permutation of `x` (`perm`, else the reversal) moves a dimension of
// more than one element past another: the result is not laid out
// row-major (ATen's is_contiguous, which ignores unit dimensions).
bool MovesData(const TensorType& x, const std::vector<int64_t>* perm) {
  if (!x.rank_known) return true;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t count = perm != nullptr ? static_cast<int64_t>(perm->size()) : rank;
  int64_t last = -1;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t axis = perm != nullptr ? (*perm)[k] : rank - 1 - k;
    if (axis < 0 || axis >= rank) return true;
    if (x.shape[axis] == 1) continue;
    if (axis < last) return true;
    last = axis;
  }
  return false;
}

// A Transpose's permutation as given, else null (the reversal).
const std::vector<int64_t>* PermOf(const Node& n) {
  auto it = n.attrs.find("perm");
  return it != n.attrs.end() && !it->second.ints.empty() ? &it->second.ints : nullptr;
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
  // Through a chain of views (kSameView) and of operators that keep their
  // input's layout (kSameLayout) to the operator that made the layout.
  // Transposes met on the way compose: a pair that composes to the
  // identity gives the layout of what it read (ATen's permute of a permute
  // has the strides it started from, and ONNX Runtime cancels such pairs),
  // so a search that inserts one around a node does not make its readers
  // new cost keys. `composite` maps the value's axes to those of the
  // tensor below the Transposes walked through (empty: none yet).
  if (!g.info().permuted_views) return false;
  std::vector<int64_t> composite;
  auto pending_moves = [&](const TensorType& below) { return !composite.empty() && MovesData(below, &composite); };
  for (ValueId v = value; v != kNoValue;) {
    const Value& val = g.value(v);
    if (val.producer == kNoNode) return val.arrives_permuted || pending_moves(val.type);
    const Node& n = g.node(val.producer);
    const OpDef* def = n.opaque() ? nullptr : OpRegistry::Global().Find(n.domain, n.op);
    if (def == nullptr || val.output_index != 0) return pending_moves(val.type);
    const ValueId in = n.inputs.empty() ? kNoValue : n.inputs[0];
    switch (def->output_layout) {
      case OpDef::OutputLayout::kFresh: return pending_moves(val.type);
      case OpDef::OutputLayout::kPermutedView: {
        if (in == kNoValue) return pending_moves(val.type);
        const TensorType& x = g.value(in).type;
        if (!x.rank_known) return true;
        const int64_t rank = static_cast<int64_t>(x.shape.size());
        const std::vector<int64_t>* perm = PermOf(n);
        if (perm != nullptr && static_cast<int64_t>(perm->size()) != rank) return true;
        auto p = [&](int64_t k) { return perm != nullptr ? (*perm)[k] : rank - 1 - k; };
        for (int64_t k = 0; k < rank; ++k)
          if (p(k) < 0 || p(k) >= rank) return true;
        if (composite.empty()) {
          for (int64_t k = 0; k < rank; ++k) composite.push_back(p(k));
        } else {
          if (static_cast<int64_t>(composite.size()) != rank) return true;
          for (int64_t& c : composite) c = p(c);
        }
        break;
      }
      case OpDef::OutputLayout::kSameView:
      case OpDef::OutputLayout::kSameLayout: {
        // A view that changes the rank (Squeeze, Unsqueeze): the
        // Transposes above it are judged on its output, and the walk goes
        // on below it with none pending.
        if (in == kNoValue) return pending_moves(val.type);
        if (g.value(in).type.shape.size() != val.type.shape.size() || !g.value(in).type.rank_known) {
          if (pending_moves(val.type)) return true;
          composite.clear();
        }
        break;
      }
    }
    v = in;
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
  std::string key = QualifiedOp(n.domain, n.op);  // as rules and the cost model name it
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

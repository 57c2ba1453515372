#include "core/node_key.h"

#include <cstdio>

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

// Calls part(type, constant) for each input of the node: type is null for an
// omitted optional input; constant is the content hash of a small stored
// constant, or null.
template <typename Part>
void ForEachInputPart(const Graph& g, const Node& n, Part&& part) {
  for (ValueId in : n.inputs) {
    if (in == kNoValue) {
      part(nullptr, nullptr);
      continue;
    }
    const Value& v = g.value(in);
    uint64_t content = 0;
    bool small = v.initializer != nullptr && v.initializer->NumElements() <= kNodeKeyConstantElements;
    if (small) content = v.initializer->content_hash();
    part(&v.type, small ? &content : nullptr);
  }
}

// One input's part of the hash: its type and a small constant's contents.
uint64_t InputPartHash(const TensorType& type, const uint64_t* content) {
  uint64_t h = HashCombine(static_cast<uint64_t>(type.dtype) * 4 + (type.rank_known ? 1 : 2), type.shape.size());
  for (int64_t d : type.shape) h = HashCombine(h, static_cast<uint64_t>(d));
  return content == nullptr ? h : HashCombine(h + 0x9e37, *content);
}

}  // namespace

uint64_t OperatorHash(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  return HashCombine(HashCombine(HashString(n.domain), HashString(n.op)), AttributeHash(g, id));
}

uint64_t NodeKeyHash(const Graph& g, NodeId id) {
  uint64_t h = OperatorHash(g, id);
  ForEachInputPart(g, g.node(id), [&h](const TensorType* type, const uint64_t* content) {
    h = HashCombine(h, type == nullptr ? 0x51ed27 : InputPartHash(*type, content));
  });
  return h | 1;
}

uint64_t ValueKeyHash(const Value& v) {
  bool small = v.initializer != nullptr && v.initializer->NumElements() <= kNodeKeyConstantElements;
  uint64_t content = small ? v.initializer->content_hash() : 0;
  return InputPartHash(v.type, small ? &content : nullptr);
}

std::string NodeKeyText(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  std::string key = n.domain.empty() ? n.op : n.domain + "." + n.op;
  char buf[32];
  std::snprintf(buf, sizeof buf, "#%016llx", static_cast<unsigned long long>(AttributeHash(g, id)));
  key += buf;
  ForEachInputPart(g, n, [&](const TensorType* type, const uint64_t* content) {
    key += type == nullptr ? " -" : " " + type->ToString();
    if (content != nullptr) {
      std::snprintf(buf, sizeof buf, "=%016llx", static_cast<unsigned long long>(*content));
      key += buf;
    }
  });
  return key;
}

}  // namespace rlflow

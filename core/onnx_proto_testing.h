#pragma once
// Attributes of ONNX nodes for the tests that build models as protobufs.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rlflow::testing {

inline void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

// A graph attribute `name` of `n` (an If's branch, a Loop's body), named
// `graph_name`: the graph to build.
inline onnx::GraphProto* GraphAttr(onnx::NodeProto* n, const std::string& name, const std::string& graph_name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(graph_name);
  return a->mutable_g();
}

}  // namespace rlflow::testing

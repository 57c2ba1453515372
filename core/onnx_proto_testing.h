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

// `vi` declared as a tensor `name` of element type `type` and shape `dims`
// (a negative dimension: a symbolic one, named "d<index>").
inline void DeclareTensor(onnx::ValueInfoProto* vi, const std::string& name, int32_t type,
                          const std::vector<int64_t>& dims) {
  vi->Clear();
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  t->mutable_shape();
  for (size_t k = 0; k < dims.size(); ++k) {
    auto* d = t->mutable_shape()->add_dim();
    if (dims[k] < 0)
      d->set_dim_param("d" + std::to_string(k));
    else
      d->set_dim_value(dims[k]);
  }
}

// `t` as the float tensor `name` of shape `dims` holding `values` (raw data).
inline void FloatTensor(onnx::TensorProto* t, const std::string& name, const std::vector<int64_t>& dims,
                        const std::vector<float>& values) {
  t->Clear();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
}

// `t` as the 1-D int64 tensor `name` holding `values` (shapes, axes).
inline void Int64Tensor(onnx::TensorProto* t, const std::string& name, const std::vector<int64_t>& values) {
  t->Clear();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t x : values) t->add_int64_data(x);
}

// A node of `g` running `op` on `in`, writing `out`.
inline onnx::NodeProto* AddNodeTo(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                                  const std::vector<std::string>& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (const auto& s : in) n->add_input(s);
  for (const auto& s : out) n->add_output(s);
  return n;
}

}  // namespace rlflow::testing

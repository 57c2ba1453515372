#pragma once
// Helpers on ONNX protobufs private to core's ONNX code (onnx_io.cc, the
// opset conversions in onnx_upgrade.cc and onnx_newer_opsets.cc,
// onnx_branches.cc): attributes, fresh names, the names a subgraph reads
// from enclosing scopes, element types along a graph before shape
// inference.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>

namespace rlflow::onnx_detail {

inline bool IsDefault(const std::string& d) { return d.empty() || d == "ai.onnx"; }

inline const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

inline void DropAttr(onnx::NodeProto* n, const std::string& name) {
  auto* attrs = n->mutable_attribute();
  for (int k = attrs->size() - 1; k >= 0; --k)
    if (attrs->Get(k).name() == name) attrs->DeleteSubrange(k, 1);
}

// The names a model uses (values, nodes; subgraphs included), and new ones
// that clash with none: `base`, else `base_1`, `base_2`, ...
class FreshNames {
 public:
  void Collect(const onnx::GraphProto& g) {
    for (const auto& vi : g.input()) names_.insert(vi.name());
    for (const auto& t : g.initializer()) names_.insert(t.name());
    for (const auto& vi : g.value_info()) names_.insert(vi.name());
    for (const auto& vi : g.output()) names_.insert(vi.name());
    for (const auto& n : g.node()) {
      names_.insert(n.name());
      for (const auto& o : n.output()) names_.insert(o);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) Collect(a.g());
        for (const auto& sub : a.graphs()) Collect(sub);
      }
    }
  }
  std::string Fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

 private:
  std::set<std::string> names_;
};

// Names read by a subgraph (If/Loop/Scan bodies) from enclosing scopes.
inline void CollectOuterReads(const onnx::GraphProto& g, std::set<std::string> defined, std::set<std::string>* reads) {
  for (const auto& vi : g.input()) defined.insert(vi.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) defined.insert(o);
  for (const auto& n : g.node()) {
    for (const auto& in : n.input())
      if (!in.empty() && !defined.count(in)) reads->insert(in);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectOuterReads(a.g(), defined, reads);
      for (const auto& sub : a.graphs()) CollectOuterReads(sub, defined, reads);
    }
  }
  for (const auto& o : g.output())
    if (!defined.count(o.name())) reads->insert(o.name());
}

// A tensor's data as little-endian bytes, whichever field holds it
// (raw_data, float_data, int64_data, ...; core/onnx_io.cc). Throws
// rlflow::Error for data it cannot read (external, string, segmented).
std::string TensorBytes(const onnx::TensorProto& t);
// Whether two tensors hold the same bytes (as TensorBytes gives them),
// those in external data files (locations relative to `external_dir`)
// read in pieces, never whole. Throws rlflow::Error for data it cannot
// read.
bool SameTensorBytes(const onnx::TensorProto& a, const onnx::TensorProto& b, const std::string* external_dir);

// ONNX's shape inference on `model` in a child process (its crash fails
// the inference, never the caller; core/onnx_io.cc): the types it inferred
// become the graph's value_info, also where it stopped partway. False,
// with the reason in `*why`, if it did not finish.
bool InferValueInfo(onnx::ModelProto* model, std::string* why);

// Element types of the tensors a graph states or that follow from its nodes
// (enough for the scalars Pad and Clip need: the type of their data input).
// Unknown: 0.
class ElemTypes {
 public:
  explicit ElemTypes(const std::unordered_map<std::string, int32_t>& outer) : types_(outer) {}
  void AddGraph(const onnx::GraphProto& g) {
    for (const auto& vi : g.input()) Add(vi);
    for (const auto& vi : g.value_info()) Add(vi);
    for (const auto& vi : g.output()) Add(vi);
    for (const auto& t : g.initializer()) types_[t.name()] = t.data_type();
  }
  // The output types of a node, from its inputs' (run in topological order).
  void AddNode(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    int32_t first = 0;
    for (const auto& in : n.input())
      if (!in.empty() && Of(in) != 0) {
        first = Of(in);
        break;
      }
    for (int k = 0; k < n.output_size(); ++k) {
      int32_t t = first;
      if (op == "Cast") {
        const auto* to = FindAttr(n, "to");
        t = to ? static_cast<int32_t>(to->i()) : 0;
      } else if (op == "Shape" || op == "Size" || op == "NonZero" || op == "ArgMax" || op == "ArgMin" ||
                 (op == "TopK" && k == 1) || (op == "MaxPool" && k == 1)) {
        t = onnx::TensorProto::INT64;
      } else if (op == "Equal" || op == "Less" || op == "Greater" || op == "Not" || op == "And" || op == "Or" ||
                 op == "Xor" || op == "IsNaN" || op == "IsInf" || op == "LessOrEqual" || op == "GreaterOrEqual") {
        t = onnx::TensorProto::BOOL;
      } else if (op == "Constant") {
        const auto* v = FindAttr(n, "value");
        t = v && v->has_t() ? v->t().data_type() : 0;
      } else if (op == "ConstantOfShape") {
        const auto* v = FindAttr(n, "value");
        t = v && v->has_t() ? v->t().data_type() : onnx::TensorProto::FLOAT;
      } else if (!IsDefault(n.domain()) || op == "If" || op == "Loop" || op == "Scan") {
        t = 0;
      }
      if (t != 0 && !types_.count(n.output(k))) types_[n.output(k)] = t;
    }
  }
  int32_t Of(const std::string& name) const {
    auto it = types_.find(name);
    return it == types_.end() ? 0 : it->second;
  }
  const std::unordered_map<std::string, int32_t>& all() const { return types_; }

 private:
  void Add(const onnx::ValueInfoProto& vi) {
    if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0)
      types_[vi.name()] = vi.type().tensor_type().elem_type();
  }
  std::unordered_map<std::string, int32_t> types_;
};

}  // namespace rlflow::onnx_detail

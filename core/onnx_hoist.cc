#include "core/onnx_hoist.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/onnx_detail.h"

namespace rlflow {
namespace {

using onnx_detail::CollectOuterReads;
using onnx_detail::FindAttr;
using onnx_detail::FreshNames;
using onnx_detail::IsDefault;

constexpr int32_t kBool = onnx::TensorProto::BOOL;

// A tensor's element type and rank (-1: unknown).
struct Info {
  int32_t elem = 0;
  int rank = -1;
};

Info FromType(const onnx::TypeProto& t) {
  Info i;
  if (!t.has_tensor_type()) return i;
  i.elem = t.tensor_type().elem_type();
  if (t.tensor_type().has_shape()) i.rank = t.tensor_type().shape().dim_size();
  return i;
}

Info FromTensor(const onnx::TensorProto& t) { return Info{t.data_type(), t.dims_size()}; }

// A Constant node's value (its tensor, or a scalar or list attribute).
Info FromConstant(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) {
    if (a.name() == "value" && a.has_t()) return FromTensor(a.t());
    if (a.name() == "value_float") return Info{onnx::TensorProto::FLOAT, 0};
    if (a.name() == "value_int") return Info{onnx::TensorProto::INT64, 0};
    if (a.name() == "value_floats") return Info{onnx::TensorProto::FLOAT, 1};
    if (a.name() == "value_ints") return Info{onnx::TensorProto::INT64, 1};
  }
  return Info{};
}

// A body value as the transformation sees it: a loop invariant, or the row
// of an outer tensor that the step reads (`sliced`: row t of `stacked`,
// from the source `source`).
struct Val {
  bool sliced = false;
  Info info;
  std::string source;   // "scan:<direction>" or "loop:<outer tensor>:<axis>"
  std::string stacked;  // the outer value whose rows the step reads
  // Where the rows are along another axis of `stacked` (a scan input's
  // scan_input_axes, a Gather's axis): that axis and the rank of
  // `stacked` (the value is transposed outside, the rows' axis first).
  int64_t axis = 0;
  int outer_rank = -1;
};

bool IsUnary(const std::string& op) {
  static const std::set<std::string> kOps = {
      "Relu",      "Sigmoid", "Tanh",     "Exp",       "Log",  "Neg",  "Abs",      "Sqrt",     "Reciprocal",
      "Erf",       "Cast",    "Identity", "LeakyRelu", "Elu",  "Selu", "Softplus", "Softsign", "HardSigmoid",
      "HardSwish", "Floor",   "Ceil",     "Round",     "Sign", "Not",  "Sin",      "Cos"};
  return kOps.count(op) > 0;
}

// Operators whose every input broadcasts elementwise (ONNX's multidirectional
// broadcasting from the trailing axes; PRelu's slope and Clip's bounds
// unidirectionally, alike).
bool IsElementwise(const std::string& op) {
  static const std::set<std::string> kOps = {
      "Add", "Sub",  "Mul",   "Div",   "Pow",     "Max",         "Min",
      "Sum", "Mean", "Equal", "Less",  "Greater", "LessOrEqual", "GreaterOrEqual",
      "And", "Or",   "Xor",   "Where", "Clip",    "PRelu"};
  return kOps.count(op) > 0;
}

bool MakesBool(const std::string& op) {
  static const std::set<std::string> kOps = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                             "And",   "Or",   "Xor",     "Not"};
  return kOps.count(op) > 0;
}

int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t otherwise) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  return a == nullptr ? otherwise : a->i();
}

float FloatAttr(const onnx::NodeProto& n, const std::string& name, float otherwise) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  return a == nullptr ? otherwise : a->f();
}

onnx::AttributeProto* FindMutableAttr(onnx::NodeProto* n, const std::string& name) {
  for (auto& a : *n->mutable_attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

onnx::AttributeProto* MutableAttr(onnx::NodeProto* n, const std::string& name, onnx::AttributeProto::AttributeType t) {
  if (onnx::AttributeProto* a = FindMutableAttr(n, name)) return a;
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}

void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  MutableAttr(n, name, onnx::AttributeProto::INT)->set_i(v);
}

// MatMul's result rank for operands of ranks `a` and `b` (numpy's rule).
int MatMulRank(int a, int b) {
  if (a == 1 && b == 1) return 0;
  if (a == 1) return b - 1;
  if (b == 1) return a - 1;
  return std::max(a, b);
}

// Whether node `n`, whose inputs are `in` (nullptr: an absent optional
// input), computes each row of its sliced inputs stacked as it computes
// the row alone (see the header); the types of its outputs if so.
bool Batchable(const onnx::NodeProto& n, const std::vector<const Val*>& in, std::vector<Info>* out) {
  if (!IsDefault(n.domain()) || n.output_size() == 0) return false;
  for (const auto& a : n.attribute())
    if (a.has_g() || a.graphs_size() > 0) return false;
  const std::string& op = n.op_type();
  std::string source;
  int rank = -1;  // of the sliced inputs, which must agree
  for (const Val* v : in) {
    if (v == nullptr || !v->sliced) continue;
    if (v->info.rank < 0) return false;
    if (source.empty()) {
      source = v->source;
      rank = v->info.rank;
    } else if (v->source != source || v->info.rank != rank) {
      return false;  // rows of one source, of one rank
    }
  }
  if (source.empty()) return false;
  const auto sliced = [&](size_t k) { return k < in.size() && in[k] != nullptr && in[k]->sliced; };
  const auto invariant = [&](size_t k) { return k < in.size() && in[k] != nullptr && !in[k]->sliced; };
  const auto rank_of = [&](size_t k) { return in[k]->info.rank; };
  Info o;
  o.elem = in[0] != nullptr ? in[0]->info.elem : 0;
  if (IsUnary(op) || IsElementwise(op)) {
    for (size_t k = 0; k < in.size(); ++k)
      if (invariant(k) && (rank_of(k) < 0 || rank_of(k) > rank)) return false;
    o.rank = rank;
    if (op == "Cast") o.elem = static_cast<int32_t>(IntAttr(n, "to", 0));
    if (MakesBool(op)) o.elem = kBool;
    if (op == "Where") o.elem = in.size() > 1 && in[1] != nullptr ? in[1]->info.elem : 0;
    out->assign(1, o);
    return n.output_size() == 1;
  }
  if (op == "MatMul") {
    if (in.size() != 2 || in[0] == nullptr || in[1] == nullptr) return false;
    const int a = rank_of(0), b = rank_of(1);
    if (a < 1 || b < 1) return false;
    if (sliced(0) && sliced(1)) {
      if (a != b || a < 2) return false;
    } else if (sliced(0)) {
      if (b > std::max(a, 2)) return false;  // no batch axes beyond the row's
    } else if (b < 2 || a > b) {
      return false;
    }
    o.rank = MatMulRank(a, b);
    out->assign(1, o);
    return n.output_size() == 1;
  }
  if (op == "Gemm") {
    if (!sliced(0) || rank != 2 || !invariant(1) || rank_of(1) != 2) return false;
    if (in.size() > 2 && in[2] != nullptr && (!invariant(2) || rank_of(2) < 0 || rank_of(2) > 2)) return false;
    if (IntAttr(n, "transA", 0) != 0 || FloatAttr(n, "alpha", 1.f) != 1.f || FloatAttr(n, "beta", 1.f) != 1.f)
      return false;
    o.rank = 2;
    out->assign(1, o);
    return n.output_size() == 1;
  }
  if (op == "Transpose" || op == "Softmax" || op == "LogSoftmax") {
    if (in.size() != 1 || !sliced(0)) return false;
    o.rank = rank;
    out->assign(1, o);
    return n.output_size() == 1;
  }
  if (op == "Split") {
    if (!sliced(0)) return false;
    for (size_t k = 1; k < in.size(); ++k)
      if (sliced(k)) return false;
    o.rank = rank;
    out->assign(static_cast<size_t>(n.output_size()), o);
    return true;
  }
  if (op == "Concat") {
    for (size_t k = 0; k < in.size(); ++k)
      if (!sliced(k)) return false;
    o.rank = rank;
    out->assign(1, o);
    return n.output_size() == 1;
  }
  return false;
}

// An axis attribute moved past the new leading axis: a non-negative axis
// counts from the front, where the rows' axis now is.
void ShiftAxis(onnx::NodeProto* n, int64_t otherwise) {
  const int64_t axis = IntAttr(*n, "axis", otherwise);
  if (axis >= 0) SetInt(n, "axis", axis + 1);
}

int64_t DefaultOpset(const onnx::ModelProto& m) {
  for (const auto& op : m.opset_import())
    if (IsDefault(op.domain())) return op.version();
  return 0;
}

// The work on one Scan or Loop node of the model's graph.
class Hoister {
 public:
  Hoister(onnx::ModelProto* model, FreshNames* fresh, const std::map<std::string, Info>& outer,
          const std::map<std::string, const onnx::TensorProto*>& outer_tensors)
      : model_(model), fresh_(fresh), outer_(outer), outer_tensors_(outer_tensors), opset_(DefaultOpset(*model)) {}

  // Moves what it can out of the body of node `index`; the nodes to put
  // before it in `before`; false (nothing changed) if nothing is moved.
  bool Run(int index, std::vector<onnx::NodeProto>* before, HoistedLoop* rec) {
    onnx::NodeProto* node = model_->mutable_graph()->mutable_node(index);
    const std::string& op = node->op_type();
    onnx::GraphProto* body = nullptr;
    for (auto& a : *node->mutable_attribute())
      if (a.name() == "body" && a.has_g()) body = a.mutable_g();
    if (body == nullptr) return false;
    std::map<std::string, Val> vals;  // body values that are invariant or sliced
    std::set<std::string> defined;    // by the body
    for (const auto& vi : body->input()) defined.insert(vi.name());
    for (const auto& n : body->node())
      for (const auto& o : n.output()) defined.insert(o);
    for (const auto& t : body->initializer()) {
      defined.insert(t.name());
      vals[t.name()] = Val{false, FromTensor(t), "", ""};
      body_initializers_[t.name()] = &t;
    }
    for (const auto& n : body->node())
      if (IsDefault(n.domain()) && n.op_type() == "Constant" && n.output_size() == 1 && n.input_size() == 0) {
        vals[n.output(0)] = Val{false, FromConstant(n), "", ""};
        body_constants_[n.output(0)] = &n;
      }
    std::set<std::string> reads;
    CollectOuterReads(*body, {}, &reads);
    for (const std::string& r : reads) {
      auto it = outer_.find(r);
      vals[r] = Val{false, it == outer_.end() ? Info{} : it->second, "", ""};
    }
    // The sliced values the body starts from.
    std::set<int> sources;  // body nodes that slice (a Loop's Gathers)
    if (op == "Scan") {
      const int64_t m = IntAttr(*node, "num_scan_inputs", 0);
      const int first = node->input_size() - static_cast<int>(m);
      if (m <= 0 || first < 0 || body->input_size() != node->input_size()) return false;
      const onnx::AttributeProto* axes = FindAttr(*node, "scan_input_axes");
      const onnx::AttributeProto* dirs = FindAttr(*node, "scan_input_directions");
      for (int j = 0; j < m; ++j) {
        const std::string& outer_name = node->input(first + j);
        const onnx::ValueInfoProto& formal = body->input(first + j);
        Info info = FromType(formal.type());
        auto it = outer_.find(outer_name);
        const Info whole = it == outer_.end() ? Info{} : it->second;
        if (info.rank < 0 && whole.rank > 0) info.rank = whole.rank - 1;
        if (info.elem == 0) info.elem = whole.elem;
        int64_t axis = axes != nullptr && j < axes->ints_size() ? axes->ints(j) : 0;
        if (axis < 0) axis = whole.rank < 0 ? -1 : axis + whole.rank;
        const int64_t dir = dirs != nullptr && j < dirs->ints_size() ? dirs->ints(j) : 0;
        if (axis < 0 || (axis > 0 && whole.rank <= axis) || outer_name.empty()) continue;
        vals[formal.name()] = Val{true, info, "scan:" + std::to_string(dir), outer_name, axis, whole.rank};
      }
    } else {  // Loop: Gather(X, i) with X outside the body, i the step's index
      if (body->input_size() < 2) return false;
      // The step's index: the iteration number, and a carried integer that
      // starts at 0 and grows by 1 a step (TensorFlow's loop counter, as
      // tf2onnx writes a while loop).
      std::set<std::string> index = {body->input(0).name()};
      std::map<std::string, const onnx::NodeProto*> made_by;
      for (const auto& n : body->node())
        for (const auto& o : n.output()) made_by[o] = &n;
      for (int c = 2; c < body->input_size() && c < node->input_size() && c - 1 < body->output_size(); ++c) {
        if (ConstantInt(node->input(c)) != std::optional<int64_t>(0)) continue;
        auto add = made_by.find(body->output(c - 1).name());
        if (add == made_by.end() || !IsDefault(add->second->domain()) || add->second->op_type() != "Add" ||
            add->second->input_size() != 2)
          continue;
        const onnx::NodeProto& a = *add->second;
        const std::string& counter = body->input(c).name();
        if ((a.input(0) == counter && ConstantInt(a.input(1)) == std::optional<int64_t>(1)) ||
            (a.input(1) == counter && ConstantInt(a.input(0)) == std::optional<int64_t>(1)))
          index.insert(counter);
      }
      for (int k = 0; k < body->node_size(); ++k) {
        const onnx::NodeProto& n = body->node(k);
        if (!IsDefault(n.domain()) || n.op_type() != "Gather" || n.input_size() != 2 || !index.count(n.input(1)))
          continue;
        const std::string& x = n.input(0);
        if (defined.count(x) || !vals.count(x)) continue;
        const Info whole = vals[x].info;
        int64_t axis = IntAttr(n, "axis", 0);
        if (axis < 0) axis = whole.rank < 0 ? -1 : axis + whole.rank;
        if (axis < 0 || whole.rank <= axis) continue;
        vals[n.output(0)] =
            Val{true, Info{whole.elem, whole.rank - 1}, "loop:" + x + ":" + std::to_string(axis), x, axis, whole.rank};
        sources.insert(k);
      }
    }
    // The nodes that can be moved out, in body order.
    std::vector<int> moved;
    for (int k = 0; k < body->node_size(); ++k) {
      if (sources.count(k)) continue;
      const onnx::NodeProto& n = body->node(k);
      std::vector<const Val*> in;
      bool known = true;
      for (const auto& name : n.input()) {
        if (name.empty()) {
          in.push_back(nullptr);
          continue;
        }
        auto it = vals.find(name);
        if (it == vals.end()) {
          known = false;
          break;
        }
        in.push_back(&it->second);
      }
      if (known && Invariant(n, in, &vals)) continue;
      std::vector<Info> out;
      if (!known || in.empty() || !Batchable(n, in, &out)) continue;
      std::string source;
      for (const Val* v : in)
        if (v != nullptr && v->sliced) source = v->source;
      for (int o = 0; o < n.output_size(); ++o)
        if (!n.output(o).empty()) vals[n.output(o)] = Val{true, out[static_cast<size_t>(o)], source, ""};
      moved.push_back(k);
    }
    int matmuls = 0;
    for (int k : moved) matmuls += body->node(k).op_type() == "MatMul" || body->node(k).op_type() == "Gemm" ? 1 : 0;
    if (matmuls == 0) return false;
    // What the rest of the body reads of the values moved out.
    std::set<int> moved_set(moved.begin(), moved.end());
    std::set<std::string> read_by_rest;
    for (int k = 0; k < body->node_size(); ++k) {
      if (moved_set.count(k)) continue;
      const onnx::NodeProto& n = body->node(k);
      read_by_rest.insert(n.input().begin(), n.input().end());
      for (const auto& a : n.attribute()) {
        if (a.has_g()) CollectOuterReads(a.g(), {}, &read_by_rest);
        for (const auto& g : a.graphs()) CollectOuterReads(g, {}, &read_by_rest);
      }
    }
    for (const auto& o : body->output()) read_by_rest.insert(o.name());
    std::vector<std::string> needed;  // values moved out that the body still reads, in order
    for (int k : moved)
      for (const auto& o : body->node(k).output())
        if (!o.empty() && read_by_rest.count(o)) needed.push_back(o);
    for (const std::string& v : needed)
      if (vals[v].info.elem == 0 || vals[v].info.rank < 0) return false;  // cannot be declared
    // The nodes outside: each moved node over the stacked rows.
    for (int k : moved) Emit(body->node(k), &vals, before, rec);
    // The body reads the rows of what it still needs.
    std::map<std::string, const onnx::ValueInfoProto*> declared;
    for (const auto& vi : body->value_info()) declared[vi.name()] = &vi;
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    std::set<std::string> body_outputs;
    for (const auto& o : body->output()) body_outputs.insert(o.name());
    for (const std::string& v : needed) {
      const Val& val = vals[v];
      // A body output is never one of its inputs (ONNX Runtime's Scan does
      // not write such an output): the row comes in under another name.
      const std::string row = body_outputs.count(v) ? fresh_->Fresh(v + "_row") : v;
      if (op == "Scan") {
        onnx::ValueInfoProto* vi = body->add_input();
        auto d = declared.find(v);
        if (d != declared.end() && FromType(d->second->type()).rank == val.info.rank &&
            FromType(d->second->type()).elem == val.info.elem) {
          *vi = *d->second;
          vi->set_name(row);
        } else {
          vi->set_name(row);
          auto* tt = vi->mutable_type()->mutable_tensor_type();
          tt->set_elem_type(val.info.elem);
          auto* shape = tt->mutable_shape();
          for (int r = 0; r < val.info.rank; ++r) shape->add_dim();
        }
        node->add_input(val.stacked);
        SetInt(node, "num_scan_inputs", IntAttr(*node, "num_scan_inputs", 0) + 1);
        if (onnx::AttributeProto* axes = FindMutableAttr(node, "scan_input_axes")) axes->add_ints(0);
        onnx::AttributeProto* dirs = FindMutableAttr(node, "scan_input_directions");
        const int64_t dir = std::stoll(val.source.substr(5));
        if (dirs != nullptr) {
          dirs->add_ints(dir);
        } else if (dir != 0) {
          return false;  // cannot happen: a reversed input implies the attribute
        }
      } else {
        onnx::NodeProto* g = kept.Add();
        g->set_op_type("Gather");
        g->set_name(fresh_->Fresh(v + "_row"));
        g->add_input(val.stacked);
        g->add_input(body->input(0).name());
        g->add_output(row);
        SetInt(g, "axis", 0);
      }
      if (row != v) {
        onnx::NodeProto* id = kept.Add();
        id->set_op_type("Identity");
        id->set_name(fresh_->Fresh(v + "_row"));
        id->add_input(row);
        id->add_output(v);
      }
      ++rec->new_inputs;
    }
    for (int k = 0; k < body->node_size(); ++k)
      if (!moved_set.count(k)) *kept.Add() = body->node(k);
    body->mutable_node()->Swap(&kept);
    DropUnread(body);
    // Types stated for what the body no longer computes (moved out, or now
    // an input) go.
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> infos;
    std::set<std::string> computed;
    for (const auto& n : body->node()) computed.insert(n.output().begin(), n.output().end());
    for (const auto& vi : body->value_info())
      if (computed.count(vi.name())) *infos.Add() = vi;
    body->mutable_value_info()->Swap(&infos);
    rec->op = op;
    rec->nodes = static_cast<int>(moved.size());
    rec->matmuls = matmuls;
    return true;
  }

 private:
  // Whether body node `n` computes a loop invariant from invariants alone
  // (a weight read through an Identity or transposed in the body) with an
  // operator whose result's rank follows from its inputs'; its output is
  // then one in `vals` (copied out where a node moved out reads it).
  bool Invariant(const onnx::NodeProto& n, const std::vector<const Val*>& in, std::map<std::string, Val>* vals) {
    const std::string& op = n.op_type();
    const bool reshapes = op == "Reshape" || op == "Unsqueeze" || op == "Squeeze" || op == "Flatten";
    if (!IsDefault(n.domain()) || n.output_size() != 1 || n.output(0).empty() || in.empty() || in[0] == nullptr ||
        !(IsUnary(op) || IsElementwise(op) || op == "Transpose" || reshapes))
      return false;
    for (const auto& a : n.attribute())
      if (a.has_g() || a.graphs_size() > 0) return false;
    Info o{in[0]->info.elem, -1};
    for (const Val* v : in) {
      if (v == nullptr) continue;
      if (v->sliced || v->info.rank < 0) return false;
      o.rank = std::max(o.rank, v->info.rank);  // the broadcast rank
    }
    if (reshapes) {
      // The result's rank from the constant shape or axes (an input from
      // opset 13, an attribute before; Squeeze without axes: unknown).
      std::optional<std::vector<int64_t>> c;
      if (n.input_size() > 1 && !n.input(1).empty())
        c = ConstantInts(n.input(1));
      else if (const onnx::AttributeProto* a = FindAttr(n, "axes"); a != nullptr)
        c = std::vector<int64_t>(a->ints().begin(), a->ints().end());
      const int64_t r = in[0]->info.rank, count = c ? static_cast<int64_t>(c->size()) : -1;
      o.rank = op == "Flatten"     ? 2
               : op == "Reshape"   ? count
               : count < 0         ? -1
               : op == "Unsqueeze" ? r + count
                                   : r - count;
      if (o.rank < 0) return false;
    }
    if (op == "Cast") o.elem = static_cast<int32_t>(IntAttr(n, "to", 0));
    if (MakesBool(op)) o.elem = kBool;
    if (op == "Where") o.elem = in.size() > 1 && in[1] != nullptr ? in[1]->info.elem : 0;
    (*vals)[n.output(0)] = Val{false, o, "", ""};
    body_invariant_nodes_[n.output(0)] = &n;
    return true;
  }

  // The values of an integer constant of at most 64 elements (an outer or
  // body initializer or Constant node), if `name` is one.
  std::optional<std::vector<int64_t>> ConstantInts(const std::string& name) const {
    const onnx::TensorProto* t = nullptr;
    if (auto it = body_initializers_.find(name); it != body_initializers_.end()) t = it->second;
    if (auto it = outer_tensors_.find(name); t == nullptr && it != outer_tensors_.end()) t = it->second;
    if (auto it = body_constants_.find(name); t == nullptr && it != body_constants_.end()) {
      for (const auto& a : it->second->attribute()) {
        if (a.name() == "value_int") return std::vector<int64_t>{a.i()};
        if (a.name() == "value_ints") return std::vector<int64_t>(a.ints().begin(), a.ints().end());
        if (a.name() == "value" && a.has_t()) t = &a.t();
      }
    }
    if (t == nullptr || t->data_location() == onnx::TensorProto::EXTERNAL) return std::nullopt;
    int64_t elements = 1;
    for (int64_t d : t->dims()) elements *= d;
    if (elements < 0 || elements > 64) return std::nullopt;
    std::string bytes;
    try {
      bytes = onnx_detail::TensorBytes(*t);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    std::vector<int64_t> v(static_cast<size_t>(elements));
    if (t->data_type() == onnx::TensorProto::INT64 && bytes.size() == 8 * v.size()) {
      std::memcpy(v.data(), bytes.data(), bytes.size());
      return v;
    }
    if (t->data_type() == onnx::TensorProto::INT32 && bytes.size() == 4 * v.size()) {
      std::vector<int32_t> w(v.size());
      if (!w.empty()) std::memcpy(w.data(), bytes.data(), bytes.size());
      std::copy(w.begin(), w.end(), v.begin());
      return v;
    }
    return std::nullopt;
  }

  // The value of a one-element integer constant, if `name` is one.
  std::optional<int64_t> ConstantInt(const std::string& name) const {
    const std::optional<std::vector<int64_t>> v = ConstantInts(name);
    if (!v || v->size() != 1) return std::nullopt;
    return v->front();
  }

  // The outer name of a body invariant: itself if outside, else a copy of
  // the body's initializer or Constant node outside (made once).
  std::string Outside(const std::string& name, std::vector<onnx::NodeProto>* before) {
    auto done = copied_.find(name);
    if (done != copied_.end()) return done->second;
    std::string outer = name;
    if (auto it = body_initializers_.find(name); it != body_initializers_.end()) {
      outer = fresh_->Fresh(name + "_outer");
      onnx::TensorProto* t = model_->mutable_graph()->add_initializer();
      *t = *it->second;
      t->set_name(outer);
    } else if (auto c = body_constants_.find(name); c != body_constants_.end()) {
      outer = fresh_->Fresh(name + "_outer");
      onnx::NodeProto n = *c->second;
      n.set_name(fresh_->Fresh(n.name().empty() ? outer : n.name() + "_outer"));
      n.set_output(0, outer);
      before->push_back(n);
    } else if (auto m = body_invariant_nodes_.find(name); m != body_invariant_nodes_.end()) {
      onnx::NodeProto n = *m->second;  // its inputs outside first
      for (int k = 0; k < n.input_size(); ++k)
        if (!n.input(k).empty()) n.set_input(k, Outside(n.input(k), before));
      outer = fresh_->Fresh(name + "_outer");
      n.set_name(fresh_->Fresh(n.name().empty() ? outer : n.name() + "_outer"));
      n.set_output(0, outer);
      before->push_back(n);
    }
    copied_[name] = outer;
    return outer;
  }

  std::string In(const std::string& name, std::map<std::string, Val>* vals, std::vector<onnx::NodeProto>* before) {
    if (name.empty()) return name;
    const Val& v = vals->at(name);
    if (!v.sliced) return Outside(name, before);
    if (v.axis == 0) return v.stacked;
    // Rows along another axis: that axis first, once per value and axis.
    const std::string key = v.stacked + ":" + std::to_string(v.axis);
    auto done = transposed_.find(key);
    if (done != transposed_.end()) return done->second;
    onnx::NodeProto t;
    t.set_op_type("Transpose");
    t.set_name(fresh_->Fresh(v.stacked + "_rows_first"));
    t.add_input(v.stacked);
    const std::string out = fresh_->Fresh(v.stacked + "_rows_first");
    t.add_output(out);
    onnx::AttributeProto* perm = MutableAttr(&t, "perm", onnx::AttributeProto::INTS);
    perm->add_ints(v.axis);
    for (int64_t a = 0; a < v.outer_rank; ++a)
      if (a != v.axis) perm->add_ints(a);
    before->push_back(t);
    transposed_[key] = out;
    return out;
  }

  // Node `n` of the body over the stacked rows, appended to `before`; its
  // outputs' stacked names recorded in `vals`.
  void Emit(const onnx::NodeProto& n, std::map<std::string, Val>* vals, std::vector<onnx::NodeProto>* before,
            HoistedLoop* rec) {
    rec->ops.push_back(n.op_type());
    std::vector<std::string> in;
    for (const auto& name : n.input()) in.push_back(In(name, vals, before));
    std::vector<std::string> out;
    for (const auto& name : n.output()) {
      if (name.empty()) {
        out.push_back(name);
        continue;
      }
      out.push_back(fresh_->Fresh(name + "_rows"));
      (*vals)[name].stacked = out.back();
    }
    const std::string base = n.name().empty() ? n.op_type() : n.name();
    if (n.op_type() == "Gemm") {  // as MatMul (B transposed outside where transB) and Add
      std::string b = in[1];
      if (IntAttr(n, "transB", 0) != 0) {
        onnx::NodeProto t;
        t.set_op_type("Transpose");
        t.set_name(fresh_->Fresh(base + "_transB"));
        t.add_input(b);
        b = fresh_->Fresh(in[1] + "_t");
        t.add_output(b);
        before->push_back(t);
      }
      const bool bias = in.size() > 2 && !in[2].empty();
      onnx::NodeProto mm;
      mm.set_op_type("MatMul");
      mm.set_name(fresh_->Fresh(base + "_rows"));
      mm.add_input(in[0]);
      mm.add_input(b);
      mm.add_output(bias ? fresh_->Fresh(n.output(0) + "_product") : out[0]);
      before->push_back(mm);
      if (bias) {
        onnx::NodeProto add;
        add.set_op_type("Add");
        add.set_name(fresh_->Fresh(base + "_bias"));
        add.add_input(mm.output(0));
        add.add_input(in[2]);
        add.add_output(out[0]);
        before->push_back(add);
      }
      return;
    }
    onnx::NodeProto m = n;
    m.set_name(fresh_->Fresh(base + "_rows"));
    for (size_t k = 0; k < in.size(); ++k) m.set_input(static_cast<int>(k), in[k]);
    for (size_t k = 0; k < out.size(); ++k) m.set_output(static_cast<int>(k), out[k]);
    const std::string& op = n.op_type();
    if (op == "Transpose") {
      const int rank = vals->at(n.input(0)).info.rank;
      onnx::AttributeProto* perm = MutableAttr(&m, "perm", onnx::AttributeProto::INTS);
      std::vector<int64_t> p(perm->ints().begin(), perm->ints().end());
      if (p.empty())
        for (int r = rank - 1; r >= 0; --r) p.push_back(r);
      perm->clear_ints();
      perm->add_ints(0);
      for (int64_t a : p) perm->add_ints(a < 0 ? a + rank + 1 : a + 1);
    } else if (op == "Softmax" || op == "LogSoftmax") {
      ShiftAxis(&m, opset_ < 13 ? 1 : -1);
    } else if (op == "Split") {
      ShiftAxis(&m, 0);
    } else if (op == "Concat") {
      ShiftAxis(&m, 0);
    }
    before->push_back(m);
  }

  // Drops the body's Gathers, Constant nodes, invariant nodes and
  // initializers that nothing reads any more (what the moved nodes read).
  void DropUnread(onnx::GraphProto* body) const {
    for (bool changed = true; changed;) {
      changed = false;
      std::set<std::string> reads;
      for (const auto& n : body->node()) {
        reads.insert(n.input().begin(), n.input().end());
        for (const auto& a : n.attribute()) {
          if (a.has_g()) CollectOuterReads(a.g(), {}, &reads);
          for (const auto& g : a.graphs()) CollectOuterReads(g, {}, &reads);
        }
      }
      for (const auto& o : body->output()) reads.insert(o.name());
      google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
      for (const auto& n : body->node()) {
        const bool droppable =
            IsDefault(n.domain()) && n.output_size() == 1 && !reads.count(n.output(0)) &&
            (n.op_type() == "Gather" || n.op_type() == "Constant" || body_invariant_nodes_.count(n.output(0)));
        if (droppable)
          changed = true;
        else
          *kept.Add() = n;
      }
      body->mutable_node()->Swap(&kept);
      google::protobuf::RepeatedPtrField<onnx::TensorProto> weights;
      for (const auto& t : body->initializer())
        if (reads.count(t.name()))
          *weights.Add() = t;
        else
          changed = true;
      body->mutable_initializer()->Swap(&weights);
    }
  }

  onnx::ModelProto* model_;
  FreshNames* fresh_;
  const std::map<std::string, Info>& outer_;
  const std::map<std::string, const onnx::TensorProto*>& outer_tensors_;  // outer initializers and Constants
  int64_t opset_;
  std::map<std::string, const onnx::TensorProto*> body_initializers_;
  std::map<std::string, const onnx::NodeProto*> body_constants_;
  std::map<std::string, const onnx::NodeProto*> body_invariant_nodes_;  // by output (Invariant)
  std::map<std::string, std::string> copied_;                           // body invariants' outer names
  std::map<std::string, std::string> transposed_;  // "<value>:<axis>": the value with that axis first
};

}  // namespace

std::vector<HoistedLoop> HoistLoopInvariantProducts(onnx::ModelProto* model) {
  std::vector<HoistedLoop> records;
  onnx::GraphProto* g = model->mutable_graph();
  const int64_t opset = DefaultOpset(*model);
  // Only a body with a product is worth ONNX's shape inference.
  bool candidate = false;
  for (const auto& n : g->node()) {
    if (!IsDefault(n.domain()) || !(n.op_type() == "Loop" || (n.op_type() == "Scan" && opset >= 9))) continue;
    for (const auto& a : n.attribute())
      if (a.name() == "body" && a.has_g())
        for (const auto& b : a.g().node())
          candidate = candidate || (IsDefault(b.domain()) && (b.op_type() == "MatMul" || b.op_type() == "Gemm"));
  }
  if (!candidate) return records;
  std::map<std::string, Info> outer;
  for (const auto& vi : g->input()) outer[vi.name()] = FromType(vi.type());
  for (const auto& vi : g->value_info()) outer[vi.name()] = FromType(vi.type());
  {
    // The outer values' types as ONNX's shape inference gives them (on a
    // copy: the model keeps its own value_info).
    onnx::ModelProto typed = *model;
    std::string why;
    onnx_detail::InferValueInfo(&typed, &why);  // where it stops, what it inferred
    for (const auto& vi : typed.graph().value_info()) {
      const Info i = FromType(vi.type());
      if (i.elem != 0 && i.rank >= 0) outer[vi.name()] = i;
    }
  }
  for (const auto& vi : g->output()) outer.emplace(vi.name(), FromType(vi.type()));
  for (const auto& t : g->initializer()) outer[t.name()] = FromTensor(t);
  for (const auto& n : g->node())
    if (IsDefault(n.domain()) && n.op_type() == "Constant" && n.output_size() == 1)
      outer[n.output(0)] = FromConstant(n);
  std::map<std::string, const onnx::TensorProto*> outer_tensors;
  for (const auto& t : g->initializer()) outer_tensors[t.name()] = &t;
  for (const auto& n : g->node())
    if (IsDefault(n.domain()) && n.op_type() == "Constant" && n.output_size() == 1)
      for (const auto& a : n.attribute())
        if (a.name() == "value" && a.has_t()) outer_tensors[n.output(0)] = &a.t();
  FreshNames fresh;
  fresh.Collect(*g);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int k = 0; k < g->node_size(); ++k) {
    const onnx::NodeProto& n = g->node(k);
    const bool loop = IsDefault(n.domain()) && (n.op_type() == "Loop" || (n.op_type() == "Scan" && opset >= 9));
    if (loop) {
      // Work on a copy: a body left half changed is never kept.
      onnx::ModelProto trial;
      *trial.mutable_opset_import() = model->opset_import();
      *trial.mutable_graph()->add_node() = n;
      HoistedLoop rec;
      rec.node_name = n.name().empty() ? n.op_type() + "_" + std::to_string(k) : n.name();
      std::vector<onnx::NodeProto> before;
      FreshNames names = fresh;
      Hoister h(&trial, &names, outer, outer_tensors);
      if (h.Run(0, &before, &rec)) {
        fresh = names;
        for (auto& b : before) *nodes.Add() = std::move(b);
        *nodes.Add() = trial.graph().node(0);
        for (const auto& t : trial.graph().initializer()) *g->add_initializer() = t;
        records.push_back(rec);
        continue;
      }
    }
    *nodes.Add() = n;
  }
  if (!records.empty()) g->mutable_node()->Swap(&nodes);
  return records;
}

}  // namespace rlflow

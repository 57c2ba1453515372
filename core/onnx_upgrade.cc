#include "core/onnx_upgrade.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "core/onnx_detail.h"

namespace rlflow {
namespace {

using onnx_detail::DropAttr;
using onnx_detail::ElemTypes;
using onnx_detail::FindAttr;
using onnx_detail::IsDefault;

void SetString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  DropAttr(n, name);
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

std::string Label(const onnx::NodeProto& n) { return "'" + n.name() + "' (" + n.op_type() + ")"; }

class Upgrader {
 public:
  Upgrader(onnx::ModelProto* model, std::vector<std::string>* notes) : model_(model), notes_(notes) {
    for (const auto& imp : model->opset_import())
      if (IsDefault(imp.domain())) opset_ = static_cast<int>(imp.version());
    names_.Collect(model->graph());
  }

  void Run() {
    Graph(model_->mutable_graph(), {});
    for (auto& imp : *model_->mutable_opset_import())
      if (IsDefault(imp.domain())) imp.set_version(11);
    for (const auto& [what, count] : done_)
      notes_->push_back("opset " + std::to_string(opset_) + " -> 11: " + what + " (" + std::to_string(count) + " node" +
                        (count == 1 ? "" : "s") + ")");
  }

 private:
  std::string Fresh(const std::string& base) { return names_.Fresh(base); }

  // A new initializer in the main graph (subgraphs read it from there); before
  // IR 4 every initializer is also listed as a graph input.
  onnx::TensorProto* NewInit(const std::string& base, int32_t type, std::vector<int64_t> dims) {
    onnx::GraphProto* main = model_->mutable_graph();
    onnx::TensorProto* t = main->add_initializer();
    t->set_name(Fresh(base));
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    if (model_->ir_version() < 4) {
      auto* vi = main->add_input();
      vi->set_name(t->name());
      auto* tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(type);
      auto* shape = tt->mutable_shape();
      for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
    }
    return t;
  }
  std::string Ints(const std::string& base, const std::vector<int64_t>& v) {
    onnx::TensorProto* t = NewInit(base, onnx::TensorProto::INT64, {static_cast<int64_t>(v.size())});
    for (int64_t x : v) t->add_int64_data(x);
    return t->name();
  }
  // A scalar of element type `type` (float types and the integer types Pad
  // and Clip take).
  std::string Scalar(const std::string& base, int32_t type, double value, const onnx::NodeProto& n) {
    onnx::TensorProto* t = NewInit(base, type, {});
    switch (type) {
      case onnx::TensorProto::FLOAT: t->add_float_data(static_cast<float>(value)); break;
      case onnx::TensorProto::DOUBLE: t->add_double_data(value); break;
      case onnx::TensorProto::INT32:
      case onnx::TensorProto::INT16:
      case onnx::TensorProto::INT8:
      case onnx::TensorProto::UINT8:
      case onnx::TensorProto::UINT16: t->add_int32_data(static_cast<int32_t>(value)); break;
      case onnx::TensorProto::INT64: t->add_int64_data(static_cast<int64_t>(value)); break;
      default:
        Fail("cannot upgrade node ", Label(n), " to opset 11: its input's element type ", type, " is not handled");
    }
    return t->name();
  }
  std::vector<int64_t> IntsAttr(const onnx::NodeProto& n, const std::string& name) {
    const auto* a = FindAttr(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }
  void Done(const std::string& what) { ++done_[what]; }

  // ReplaceExperimentalOperators: returns the count replaced.
 public:
  int RunExperimental() {
    experimental_ = true;
    Graph(model_->mutable_graph(), {});
    int count = 0;
    for (const auto& [what, n] : done_) {
      notes_->push_back(what + " (" + std::to_string(n) + " node" + (n == 1 ? "" : "s") +
                        "): an experimental operator ONNX removed at opset 10, written as ONNX's documentation gives");
      count += n;
    }
    return count;
  }

 private:
  void Graph(onnx::GraphProto* g, const std::unordered_map<std::string, int32_t>& outer) {
    ElemTypes types(outer);
    types.AddGraph(*g);
    // Nodes a replacement puts before the node it rewrites (which keeps its
    // outputs), by the node's index.
    std::map<int, std::vector<onnx::NodeProto>> inserted;
    for (int k = 0; k < g->node_size(); ++k) {
      onnx::NodeProto& n = *g->mutable_node(k);
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) Graph(a.mutable_g(), types.all());
        for (auto& sub : *a.mutable_graphs()) Graph(&sub, types.all());
      }
      std::vector<onnx::NodeProto> before;
      if (IsDefault(n.domain())) {
        if (experimental_)
          ExperimentalNode(&n, types, &before);
        else
          Node(&n, types);
      }
      for (const auto& b : before) types.AddNode(b);
      if (!before.empty()) inserted[k] = std::move(before);
      types.AddNode(n);
    }
    if (inserted.empty()) return;
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int k = 0; k < g->node_size(); ++k) {
      auto it = inserted.find(k);
      if (it != inserted.end())
        for (auto& b : it->second) *nodes.Add() = std::move(b);
      *nodes.Add() = std::move(*g->mutable_node(k));
    }
    g->mutable_node()->Swap(&nodes);
  }

  // A constant of the element type `type` holding `values` in `dims`: an
  // initializer for float and double (the same values in another float
  // type: a float one and a Cast to it, put in `before`).
  std::string Constant(const std::string& base, int32_t type, const std::vector<double>& values,
                       const std::vector<int64_t>& dims, const onnx::NodeProto& n,
                       std::vector<onnx::NodeProto>* before) {
    const bool direct = type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::DOUBLE;
    if (!direct && type != onnx::TensorProto::FLOAT16 && type != onnx::TensorProto::BFLOAT16)
      Fail("node ", Label(n), ": its input's element type ", type, " is not a float type");
    onnx::TensorProto* t = NewInit(base, direct ? type : onnx::TensorProto::FLOAT, dims);
    for (double v : values) {
      if (type == onnx::TensorProto::DOUBLE)
        t->add_double_data(v);
      else
        t->add_float_data(static_cast<float>(v));
    }
    if (direct) return t->name();
    onnx::NodeProto cast;
    cast.set_op_type("Cast");
    cast.set_name(Fresh(base + "_cast"));
    cast.add_input(t->name());
    cast.add_output(Fresh(base + "_cast"));
    auto* to = cast.add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(type);
    before->push_back(cast);
    return cast.output(0);
  }
  // A node of `op` on `inputs` put in `before`; returns its output.
  std::string Before(const std::string& op, const std::vector<std::string>& inputs, const std::string& base,
                     std::vector<onnx::NodeProto>* before) {
    onnx::NodeProto m;
    m.set_op_type(op);
    m.set_name(Fresh(base + "_" + op));
    for (const auto& in : inputs) m.add_input(in);
    m.add_output(Fresh(base + "_" + op));
    before->push_back(m);
    return m.output(0);
  }
  // `n` becomes `op` on `inputs`, its attributes dropped, its name and
  // outputs kept.
  void Become(onnx::NodeProto* n, const std::string& op, const std::vector<std::string>& inputs) {
    n->set_op_type(op);
    n->clear_input();
    for (const auto& in : inputs) n->add_input(in);
    n->clear_attribute();
  }
  float FloatAttr(const onnx::NodeProto& n, const std::string& name, std::optional<float> fallback) {
    const auto* a = FindAttr(n, name);
    if (a != nullptr) return a->f();
    if (!fallback)
      Fail("node ", Label(n), " has no attribute '", name, "', which ONNX Runtime's ", n.op_type(), " requires");
    return *fallback;
  }

  void ExperimentalNode(onnx::NodeProto* n, const ElemTypes& types, std::vector<onnx::NodeProto>* before) {
    const std::string op = n->op_type();
    if (op != "ImageScaler" && op != "Affine" && op != "Scale" && op != "ScaledTanh" && op != "ParametricSoftplus" &&
        op != "Crop")
      return;
    if (onnx::OpSchemaRegistry::Schema(op, opset_, "") != nullptr) return;  // not the experimental one
    const std::string base = n->name().empty() ? (n->output_size() ? n->output(0) : op) : n->name();
    if (n->input_size() < 1 || n->input(0).empty()) Fail("node ", Label(*n), " has no input");
    const std::string x = n->input(0);
    int32_t type = types.Of(x);
    if (type == 0) type = onnx::TensorProto::FLOAT;
    auto scalar = [&](const std::string& what, double v) {
      return Constant(base + "_" + what, type, {v}, {}, *n, before);
    };
    if (op == "ImageScaler") {
      const float scale = FloatAttr(*n, "scale", 1.0f);
      const auto* bias = FindAttr(*n, "bias");
      if (bias == nullptr || bias->floats_size() == 0) {
        Become(n, "Mul", {x, scalar("scale", scale)});
      } else {
        const std::string scaled = Before("Mul", {x, scalar("scale", scale)}, base, before);
        std::vector<double> b(bias->floats().begin(), bias->floats().end());
        const int64_t c = static_cast<int64_t>(b.size());
        Become(n, "Add", {scaled, Constant(base + "_bias", type, b, {1, c, 1, 1}, *n, before)});
      }
      ++done_["ImageScaler -> Mul, Add"];
    } else if (op == "Affine") {
      const float alpha = FloatAttr(*n, "alpha", 1.0f), beta = FloatAttr(*n, "beta", 0.0f);
      const std::string scaled = Before("Mul", {x, scalar("alpha", alpha)}, base, before);
      Become(n, "Add", {scaled, scalar("beta", beta)});
      ++done_["Affine -> Mul, Add"];
    } else if (op == "Scale") {
      Become(n, "Mul", {x, scalar("scale", FloatAttr(*n, "scale", 1.0f))});
      ++done_["Scale -> Mul"];
    } else if (op == "ScaledTanh" || op == "ParametricSoftplus") {
      const float alpha = FloatAttr(*n, "alpha", std::nullopt), beta = FloatAttr(*n, "beta", std::nullopt);
      const std::string inner = Before("Mul", {x, scalar("beta", beta)}, base, before);
      const std::string f = Before(op == "ScaledTanh" ? "Tanh" : "Softplus", {inner}, base, before);
      Become(n, "Mul", {f, scalar("alpha", alpha)});
      ++done_[op == "ScaledTanh" ? "ScaledTanh -> alpha * Tanh(beta * x)"
                                 : "ParametricSoftplus -> alpha * Softplus(beta * x)"];
    } else if (op == "Crop") {
      // border = (left, top, right, bottom); scale = (height, width) from
      // the top left corner, else up to the right and bottom borders.
      std::vector<int64_t> border = IntsAttr(*n, "border"), scale = IntsAttr(*n, "scale");
      if (border.size() != 4)
        Fail("node ", Label(*n), " has ", border.size(), " border values; ONNX Runtime's Crop requires 4");
      if (!scale.empty() && scale.size() != 2)
        Fail("node ", Label(*n), " has ", scale.size(), " scale values; Crop's scale is (height, width)");
      const int64_t left = border[0], top = border[1], right = border[2], bottom = border[3];
      const int64_t kEnd = std::numeric_limits<int64_t>::max();
      std::vector<int64_t> ends = scale.empty()
                                      ? std::vector<int64_t>{bottom > 0 ? -bottom : kEnd, right > 0 ? -right : kEnd}
                                      : std::vector<int64_t>{top + scale[0], left + scale[1]};
      Become(n, "Slice", {x});
      auto ints = [&](const std::string& name, const std::vector<int64_t>& v) {
        auto* a = n->add_attribute();
        a->set_name(name);
        a->set_type(onnx::AttributeProto::INTS);
        for (int64_t i : v) a->add_ints(i);
      };
      ints("axes", {2, 3});
      ints("starts", {top, left});
      ints("ends", ends);
      ++done_["Crop -> Slice"];
    }
  }

  void Node(onnx::NodeProto* n, const ElemTypes& types) {
    const std::string op = n->op_type();
    const std::string base = n->name().empty() ? (n->output_size() ? n->output(0) : op) : n->name();
    auto data_type = [&] {
      int32_t t = types.Of(n->input(0));
      return t == 0 ? static_cast<int32_t>(onnx::TensorProto::FLOAT) : t;
    };
    if (op == "BatchNormalization" && opset_ < 9) {
      const auto* spatial = FindAttr(*n, "spatial");
      if (spatial && spatial->i() == 0)
        Fail("node ", Label(*n), " has spatial=0 (statistics per position), which has no form at opset 9 or later");
      if (spatial) {
        DropAttr(n, "spatial");
        Done("BatchNormalization's spatial attribute dropped");
      }
    } else if (op == "Upsample" || (op == "Resize" && opset_ == 10)) {
      std::string scales;
      if (op == "Upsample" && opset_ < 9) {
        const auto* a = FindAttr(*n, "scales");
        if (a == nullptr) Fail("node ", Label(*n), " has no scales");
        onnx::TensorProto* t = NewInit(base + "_scales", onnx::TensorProto::FLOAT, {a->floats_size()});
        for (float s : a->floats()) t->add_float_data(s);
        scales = t->name();
        DropAttr(n, "scales");
      } else {
        if (n->input_size() < 2) Fail("node ", Label(*n), " has no scales input");
        scales = n->input(1);
      }
      const auto* m = FindAttr(*n, "mode");
      std::string mode = m ? m->s() : "nearest";
      if (mode == "bilinear") mode = "linear";
      std::string x = n->input(0);
      n->clear_input();
      n->add_input(x);
      onnx::TensorProto* roi = NewInit(base + "_roi", onnx::TensorProto::FLOAT, {0});
      n->add_input(roi->name());
      n->add_input(scales);
      n->set_op_type("Resize");
      SetString(n, "mode", mode);
      SetString(n, "coordinate_transformation_mode", "asymmetric");
      if (mode == "nearest") SetString(n, "nearest_mode", "floor");
      Done(op == "Upsample" ? "Upsample -> Resize (asymmetric, floor)" : "Resize-10 -> Resize-11 (asymmetric, floor)");
    } else if (op == "Slice" && opset_ < 10) {
      std::vector<int64_t> starts = IntsAttr(*n, "starts"), ends = IntsAttr(*n, "ends"), axes = IntsAttr(*n, "axes");
      std::string x = n->input(0);
      n->clear_input();
      n->add_input(x);
      n->add_input(Ints(base + "_starts", starts));
      n->add_input(Ints(base + "_ends", ends));
      if (FindAttr(*n, "axes")) n->add_input(Ints(base + "_axes", axes));
      DropAttr(n, "starts");
      DropAttr(n, "ends");
      DropAttr(n, "axes");
      Done("Slice attributes -> inputs");
    } else if (op == "Pad") {
      std::vector<int64_t> pads = IntsAttr(*n, "pads");
      if (!FindAttr(*n, "pads")) Fail("node ", Label(*n), " has no pads");
      const auto* m = FindAttr(*n, "mode");
      const auto* v = FindAttr(*n, "value");
      std::string x = n->input(0);
      n->clear_input();
      n->add_input(x);
      n->add_input(Ints(base + "_pads", pads));
      if ((!m || m->s() == "constant") && v && v->f() != 0.0f)
        n->add_input(Scalar(base + "_value", data_type(), v->f(), *n));
      DropAttr(n, "pads");
      DropAttr(n, "value");
      Done("Pad attributes -> inputs");
    } else if (op == "Clip") {
      const auto* lo = FindAttr(*n, "min");
      const auto* hi = FindAttr(*n, "max");
      std::string x = n->input(0);
      n->clear_input();
      n->add_input(x);
      if (lo || hi) n->add_input(lo ? Scalar(base + "_min", data_type(), lo->f(), *n) : "");
      if (hi) n->add_input(Scalar(base + "_max", data_type(), hi->f(), *n));
      DropAttr(n, "min");
      DropAttr(n, "max");
      Done("Clip attributes -> inputs");
    } else if (op == "TopK" && opset_ < 10) {
      const auto* k = FindAttr(*n, "k");
      if (k == nullptr) Fail("node ", Label(*n), " has no k");
      n->add_input(Ints(base + "_k", {k->i()}));
      DropAttr(n, "k");
      Done("TopK's k -> input");
    } else if (op == "Scatter") {
      // Deprecated at opset 11 for ScatterElements, which computes the same
      // (axis attribute, no reduction).
      n->set_op_type("ScatterElements");
      Done("Scatter -> ScatterElements");
    } else if (op == "Scan" && opset_ < 9) {
      UpgradeScan8(n);
      Done("Scan-8 -> a Scan over the batch of a Scan over the sequence");
    } else if (op == "DynamicSlice" && opset_ < 10) {
      // ONNX's experimental operator that became Slice-10: the same inputs
      // (data, starts, ends, axes) and function.
      n->set_op_type("Slice");
      Done("DynamicSlice (experimental) -> Slice");
    }
  }

  // Scan-8 runs its body over axis 1 of each scan input [B, T, ...], once
  // per batch element b, with state variables [B, ...] per element. Without
  // sequence_lens (every sequence has length T) that is a Scan over the batch
  // (axis 0 of states and scan inputs alike, no state of its own) whose body
  // is a Scan-9+ over the sequence with the original body: its final states
  // and scan outputs are the outer Scan's scan outputs, stacked along the
  // batch into [B, ...] and [B, T, ...], as Scan-8 returns them.
  void UpgradeScan8(onnx::NodeProto* n) {
    if (n->input_size() > 0 && !n->input(0).empty())
      Fail("node ", Label(*n), " is a Scan-8 with sequence_lens (sequences of different lengths), which has no ",
           "opset-9+ form");
    const auto* body_attr = FindAttr(*n, "body");
    const auto* m_attr = FindAttr(*n, "num_scan_inputs");
    if (body_attr == nullptr || !body_attr->has_g() || m_attr == nullptr)
      Fail("node ", Label(*n), " (Scan-8) has no body or num_scan_inputs");
    const onnx::GraphProto& body = body_attr->g();
    const int m = static_cast<int>(m_attr->i());
    const int inputs = n->input_size() - 1;  // states + scan inputs
    const int states = inputs - m;
    if (m < 1 || states < 0 || body.input_size() != inputs || body.output_size() < states)
      Fail("node ", Label(*n), " (Scan-8): its body's inputs and outputs do not fit num_scan_inputs ", m);
    const std::string base = n->name().empty() ? n->output(0) : n->name();
    // The outer body's inputs: one slice along the batch of each input; its
    // outputs: the inner Scan's, all stacked along the batch.
    onnx::GraphProto outer;
    outer.set_name(Fresh(base + "_batch_body"));
    onnx::NodeProto* inner = outer.add_node();
    inner->set_op_type("Scan");
    inner->set_name(Fresh(base + "_sequence"));
    // A slice's type is the body's for states; scan inputs and outputs have
    // the sequence axis in front (its length unknown).
    auto slice_type = [](const onnx::ValueInfoProto& vi, bool sequence, onnx::ValueInfoProto* out) {
      if (!vi.type().has_tensor_type()) return;
      auto* tt = out->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(vi.type().tensor_type().elem_type());
      if (!vi.type().tensor_type().has_shape()) return;
      auto* shape = tt->mutable_shape();
      if (sequence) shape->add_dim();
      for (const auto& d : vi.type().tensor_type().shape().dim()) *shape->add_dim() = d;
    };
    for (int k = 0; k < inputs; ++k) {
      auto* vi = outer.add_input();
      vi->set_name(Fresh(base + "_slice" + std::to_string(k)));
      slice_type(body.input(k), /*sequence=*/k >= states, vi);
      inner->add_input(vi->name());
    }
    for (int k = 0; k < body.output_size(); ++k) {
      auto* vi = outer.add_output();
      vi->set_name(Fresh(base + "_slice_out" + std::to_string(k)));
      slice_type(body.output(k), /*sequence=*/k >= states, vi);
      inner->add_output(vi->name());
    }
    for (const auto& a : n->attribute()) {
      if (a.name() == "directions") {
        auto* d = inner->add_attribute();
        *d = a;
        d->set_name("scan_input_directions");
      } else if (a.name() == "body" || a.name() == "num_scan_inputs") {
        *inner->add_attribute() = a;
      }
    }
    // The outer Scan: every input is a scan input over axis 0.
    std::vector<std::string> ins(n->input().begin() + 1, n->input().end());
    n->clear_input();
    for (const auto& in : ins) n->add_input(in);
    n->clear_attribute();
    auto* b = n->add_attribute();
    b->set_name("body");
    b->set_type(onnx::AttributeProto::GRAPH);
    *b->mutable_g() = std::move(outer);
    auto* num = n->add_attribute();
    num->set_name("num_scan_inputs");
    num->set_type(onnx::AttributeProto::INT);
    num->set_i(inputs);
  }

  onnx::ModelProto* model_;
  std::vector<std::string>* notes_;
  int opset_ = 0;
  bool experimental_ = false;
  onnx_detail::FreshNames names_;
  std::map<std::string, int> done_;
};

}  // namespace

void UpgradeToOpset11(onnx::ModelProto* model, std::vector<std::string>* notes) { Upgrader(model, notes).Run(); }

int ReplaceExperimentalOperators(onnx::ModelProto* model, std::vector<std::string>* notes) {
  const int64_t opset = DefaultDomainOpset(*model);
  if (opset >= 10) return 0;
  if (opset < 7) Fail("ReplaceExperimentalOperators: the model is at opset ", opset, ", not 7 to 9");
  return Upgrader(model, notes).RunExperimental();
}

bool IsExperimentalOperator(const std::string& op_type, int64_t opset) {
  static const std::set<std::string> kOps = {"Affine",          "ConstantFill", "Crop",           "DynamicSlice",
                                             "GivenTensorFill", "GRUUnit",      "ImageScaler",    "ParametricSoftplus",
                                             "Scale",           "ScaledTanh",   "ThresholdedRelu"};
  return kOps.count(op_type) > 0 && onnx::OpSchemaRegistry::Schema(op_type, static_cast<int>(opset), "") == nullptr;
}

bool IsOrtExperimentalOperator(const std::string& op_type, int64_t opset) {
  return opset < 10 && op_type != "ConstantFill" && IsExperimentalOperator(op_type, opset);
}

namespace {

constexpr char kHiddenPrefix[] = "rlflow.hidden_node.";
constexpr char kOrtOnnxDomainForChecker[] = "ai.rlflow.onnx_runtime_onnx_domain";

void ForEachGraphNode(onnx::GraphProto* g, const std::function<void(onnx::NodeProto*)>& f) {
  for (auto& n : *g->mutable_node()) {
    f(&n);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) ForEachGraphNode(a.mutable_g(), f);
      for (auto& sub : *a.mutable_graphs()) ForEachGraphNode(&sub, f);
    }
  }
}

}  // namespace

bool IsOrtOnnxDomainOperator(const std::string& op_type, int64_t opset) {
  return (op_type == "LayerNormalization" && opset < 17) || op_type == "SimplifiedLayerNormalization";
}

int64_t DefaultDomainOpset(const onnx::ModelProto& model) {
  int64_t opset = 0;
  for (const auto& imp : model.opset_import())
    if (IsDefault(imp.domain())) opset = imp.version();
  return opset;
}

bool HasOrtOnnxDomainOperators(const onnx::ModelProto& model) {
  const int64_t opset = DefaultDomainOpset(model);
  std::function<bool(const onnx::GraphProto&)> has = [&](const onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      if (IsDefault(n.domain()) && IsOrtOnnxDomainOperator(n.op_type(), opset)) return true;
      for (const auto& a : n.attribute()) {
        if (a.has_g() && has(a.g())) return true;
        for (const auto& sub : a.graphs())
          if (has(sub)) return true;
      }
    }
    return false;
  };
  return has(model.graph());
}

int NormaliseDefaultDomainName(onnx::ModelProto* model) {
  int renamed = 0;
  // (domain() first: mutable_domain() would mark the field as set on every
  // node, and opaque nodes are written back byte for byte.)
  auto rename = [&](onnx::NodeProto* n) {
    if (n->domain() != "ai.onnx") return;
    n->clear_domain();
    ++renamed;
  };
  auto imports = [&](auto* list) {
    bool has_empty = false;
    for (const auto& imp : *list) has_empty |= imp.domain().empty();
    for (int k = list->size() - 1; k >= 0; --k) {
      if (list->Get(k).domain() != "ai.onnx") continue;
      ++renamed;
      if (has_empty)  // both names imported: the one under "" counts, as in ONNX Runtime
        list->DeleteSubrange(k, 1);
      else
        list->Mutable(k)->clear_domain();
    }
  };
  imports(model->mutable_opset_import());
  ForEachGraphNode(model->mutable_graph(), rename);
  for (auto& f : *model->mutable_functions()) {
    imports(f.mutable_opset_import());
    for (auto& n : *f.mutable_node()) {
      rename(&n);
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) ForEachGraphNode(a.mutable_g(), rename);
        for (auto& sub : *a.mutable_graphs()) ForEachGraphNode(&sub, rename);
      }
    }
  }
  return renamed;
}

int MoveOrtOnnxDomainOperatorsForChecker(onnx::ModelProto* model) {
  const int64_t opset = DefaultDomainOpset(*model);
  int moved = 0;
  ForEachGraphNode(model->mutable_graph(), [&](onnx::NodeProto* n) {
    if (!IsDefault(n->domain()) || !IsOrtOnnxDomainOperator(n->op_type(), opset)) return;
    n->set_domain(kOrtOnnxDomainForChecker);
    ++moved;
  });
  if (moved > 0) {
    auto* imp = model->add_opset_import();
    imp->set_domain(kOrtOnnxDomainForChecker);
    imp->set_version(1);
  }
  return moved;
}

void RestoreOrtOnnxDomainOperators(onnx::ModelProto* model) {
  ForEachGraphNode(model->mutable_graph(), [&](onnx::NodeProto* n) {
    if (n->domain() == kOrtOnnxDomainForChecker) n->clear_domain();
  });
  auto* imports = model->mutable_opset_import();
  for (int k = imports->size() - 1; k >= 0; --k)
    if (imports->Get(k).domain() == kOrtOnnxDomainForChecker) imports->DeleteSubrange(k, 1);
}

int HideNodesFromConverter(onnx::GraphProto* graph, int64_t opset, std::vector<onnx::NodeProto>* hidden) {
  const size_t before = hidden->size();
  ForEachGraphNode(graph, [&](onnx::NodeProto* n) {
    if (IsDefault(n->domain()) && !IsOrtOnnxDomainOperator(n->op_type(), opset) &&
        !IsOrtExperimentalOperator(n->op_type(), opset))
      return;
    hidden->push_back(*n);
    n->clear_domain();
    n->clear_attribute();
    n->set_op_type("Identity");
    n->set_name(kHiddenPrefix + std::to_string(hidden->size() - 1));
  });
  return static_cast<int>(hidden->size() - before);
}

void RestoreHiddenNodes(onnx::GraphProto* graph, const std::vector<onnx::NodeProto>& hidden) {
  std::vector<int> found(hidden.size(), 0);
  const std::string prefix = kHiddenPrefix;
  ForEachGraphNode(graph, [&](onnx::NodeProto* n) {
    if (n->name().compare(0, prefix.size(), prefix) != 0 || !IsDefault(n->domain()) || n->op_type() != "Identity")
      return;
    size_t i = 0;
    try {
      i = std::stoul(n->name().substr(prefix.size()));
    } catch (const std::exception&) {
      return;
    }
    if (i >= hidden.size()) return;
    ++found[i];
    const onnx::NodeProto& orig = hidden[i];
    n->set_op_type(orig.op_type());
    if (orig.has_domain())
      n->set_domain(orig.domain());
    else
      n->clear_domain();
    n->set_name(orig.name());
    *n->mutable_attribute() = orig.attribute();
    if (orig.has_doc_string()) n->set_doc_string(orig.doc_string());
  });
  for (size_t i = 0; i < hidden.size(); ++i)
    if (found[i] != 1)
      Fail("node '", hidden[i].name(), "' (", hidden[i].domain(), ".", hidden[i].op_type(),
           ") did not come back from ONNX's version converter");
}

int ExpandSoftmaxOfUnknownRank(onnx::GraphProto* g) {
  std::unordered_map<std::string, const onnx::TypeProto*> known;
  for (const auto& vi : g->input()) known[vi.name()] = &vi.type();
  for (const auto& vi : g->value_info()) known[vi.name()] = &vi.type();
  std::set<std::string> initializers;
  for (const auto& t : g->initializer()) initializers.insert(t.name());
  std::set<std::string> names;
  for (const auto& vi : g->input()) names.insert(vi.name());
  for (const auto& n : g->node()) {
    names.insert(n.name());
    for (const auto& o : n.output()) names.insert(o);
  }
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; names.count(name); ++k) name = base + "_" + std::to_string(k);
    names.insert(name);
    return name;
  };
  google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
  int rewritten = 0;
  for (const auto& n : g->node()) {
    const bool family = n.op_type() == "Softmax" || n.op_type() == "LogSoftmax" || n.op_type() == "Hardmax";
    auto it = family && IsDefault(n.domain()) && n.input_size() == 1 ? known.find(n.input(0)) : known.end();
    const bool rank_known = it != known.end() && it->second->has_tensor_type() && it->second->tensor_type().has_shape();
    if (!family || !IsDefault(n.domain()) || n.input_size() != 1 || rank_known || initializers.count(n.input(0))) {
      *out.Add() = n;
      continue;
    }
    const auto* axis_attr = FindAttr(n, "axis");
    const int64_t axis = axis_attr ? axis_attr->i() : 1;
    const std::string x = n.input(0), y = n.output(0);
    const std::string base = n.name().empty() ? y : n.name();
    std::string shape = fresh(base + "_shape"), flat = fresh(base + "_2d"), soft = fresh(base + "_2d_out");
    onnx::NodeProto* s = out.Add();
    s->set_op_type("Shape");
    s->set_name(fresh(base + "/Shape"));
    s->add_input(x);
    s->add_output(shape);
    onnx::NodeProto* f = out.Add();
    f->set_op_type("Flatten");
    f->set_name(fresh(base + "/Flatten"));
    f->add_input(x);
    f->add_output(flat);
    auto* fa = f->add_attribute();
    fa->set_name("axis");
    fa->set_type(onnx::AttributeProto::INT);
    fa->set_i(axis);
    onnx::NodeProto* m = out.Add();
    *m = n;
    m->clear_input();
    m->clear_output();
    m->add_input(flat);
    m->add_output(soft);
    DropAttr(m, "axis");
    auto* ma = m->add_attribute();
    ma->set_name("axis");
    ma->set_type(onnx::AttributeProto::INT);
    ma->set_i(1);
    onnx::NodeProto* r = out.Add();
    r->set_op_type("Reshape");
    r->set_name(fresh(base + "/Reshape"));
    r->add_input(soft);
    r->add_input(shape);
    r->add_output(y);
    // The 2-D tensors' rank, stated for the converter.
    int32_t elem = it != known.end() && it->second->has_tensor_type() ? it->second->tensor_type().elem_type() : 0;
    if (elem == 0) elem = onnx::TensorProto::FLOAT;
    for (const std::string& name : {flat, soft}) {
      auto* vi = g->add_value_info();
      vi->set_name(name);
      auto* tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(elem);
      tt->mutable_shape()->add_dim();
      tt->mutable_shape()->add_dim();
    }
    ++rewritten;
  }
  g->mutable_node()->Swap(&out);
  return rewritten;
}

}  // namespace rlflow

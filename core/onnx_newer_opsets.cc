// Opsets 18 to kNewestImportOpset: to opset 17 on import, back on export
// (core/onnx_upgrade.h). The table of what changed after 17 is ONNX's
// operator changelog (docs/Changelog.md, opsets 18 to 26), read by hand.
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/onnx_detail.h"
#include "core/onnx_upgrade.h"

namespace rlflow {
namespace {

using onnx_detail::DropAttr;
using onnx_detail::FindAttr;
using onnx_detail::IsDefault;

int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const auto* a = FindAttr(n, name);
  return a ? a->i() : fallback;
}

bool AllOnes(const onnx::NodeProto& n, const std::string& name) {
  const auto* a = FindAttr(n, name);
  if (a == nullptr) return true;
  for (int64_t v : a->ints())
    if (v != 1) return false;
  return true;
}

// How an operator's version after 17 differs from the one before it.
enum class Change {
  kTypes,   // element types added (none rlflow runs), same function otherwise
  kNoForm,  // a new operator or new semantics: no opset-17 form
  kDetail,  // handled in DowngradeNode / UpgradeNode
};

// Every (operator, version) of the default domain from 18 to 26.
const std::map<std::string, std::map<int, Change>>& Changes() {
  static const auto* table = [] {
    auto* t = new std::map<std::string, std::map<int, Change>>;
    auto set = [&](std::initializer_list<const char*> ops, std::initializer_list<int> versions, Change c) {
      for (const char* op : ops)
        for (int v : versions) (*t)[op][v] = c;
    };
    // bfloat16 and other element types at 22.
    set({"Acos",
         "Acosh",
         "Asin",
         "Asinh",
         "Atan",
         "Atanh",
         "AveragePool",
         "Bernoulli",
         "Conv",
         "ConvTranspose",
         "Cos",
         "Cosh",
         "Det",
         "Dropout",
         "Elu",
         "EyeLike",
         "GRU",
         "GlobalAveragePool",
         "GlobalLpPool",
         "GlobalMaxPool",
         "HardSigmoid",
         "HardSwish",
         "InstanceNormalization",
         "LSTM",
         "LpNormalization",
         "LpPool",
         "MaxPool",
         "MaxRoiPool",
         "MaxUnpool",
         "Multinomial",
         "NegativeLogLikelihoodLoss",
         "RNN",
         "RandomNormal",
         "RandomNormalLike",
         "RandomUniform",
         "RandomUniformLike",
         "RoiAlign",
         "Round",
         "Selu",
         "Sin",
         "Sinh",
         "Softplus",
         "Softsign",
         "Tan",
         "ThresholdedRelu"},
        {22}, Change::kTypes);
    // float8, int4, float4 and other element types.
    set({"Constant", "Identity", "If", "Loop", "Reshape", "Scan", "Shape", "Size"}, {19, 21, 23, 24, 25},
        Change::kTypes);
    set({"ConstantOfShape"}, {20, 21, 23, 24, 25}, Change::kTypes);
    set({"Flatten", "Pad", "Squeeze", "Transpose", "Unsqueeze"}, {21, 23, 24, 25}, Change::kTypes);
    set({"Cast", "CastLike"}, {21, 23, 25}, Change::kTypes);
    set({"DequantizeLinear", "QuantizeLinear"}, {24, 25}, Change::kTypes);
    set({"Equal"}, {19}, Change::kTypes);
    set({"IsInf", "IsNaN", "ReduceMax", "ReduceMin"}, {20}, Change::kTypes);
    set({"OptionalGetElement", "OptionalHasElement"}, {18}, Change::kTypes);
    set({"QLinearMatMul"}, {21}, Change::kTypes);
    set({"SplitToSequence", "TopK"}, {24}, Change::kTypes);
    // New operators, and versions whose meaning changed.
    set({"BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "CenterCropPad", "Col2Im", "GroupNormalization",
         "Mish"},
        {18}, Change::kNoForm);
    set({"DeformConv"}, {19}, Change::kNoForm);
    set({"AffineGrid", "Gelu", "ImageDecoder", "RegexFullMatch", "StringConcat", "StringSplit", "DFT", "GridSample"},
        {20}, Change::kNoForm);
    set({"Attention", "RMSNormalization", "RotaryEmbedding"}, {23}, Change::kNoForm);
    set({"Swish", "TensorScatter"}, {24}, Change::kNoForm);
    set({"BitCast", "CumProd"}, {26}, Change::kNoForm);
    // Attributes or inputs that moved or were added (DowngradeNode).
    set({"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
         "ReduceProd", "ReduceSumSquare", "Split", "Pad", "Resize", "ScatterElements", "ScatterND", "LpPool"},
        {18}, Change::kDetail);
    set({"AveragePool", "Cast", "CastLike", "Pad", "Resize", "QuantizeLinear"}, {19}, Change::kDetail);
    set({"DequantizeLinear", "QuantizeLinear"}, {21, 23}, Change::kDetail);
    set({"Cast", "CastLike"}, {24}, Change::kDetail);
    return t;
  }();
  return *table;
}

bool IsReduceWithAxesInput(const std::string& op) {
  return op == "ReduceL1" || op == "ReduceL2" || op == "ReduceLogSum" || op == "ReduceLogSumExp" || op == "ReduceMax" ||
         op == "ReduceMean" || op == "ReduceMin" || op == "ReduceProd" || op == "ReduceSumSquare";
}

// Constant int64/int32 tensors visible in a scope: initializers and
// Constant nodes, by name.
using ConstInts = std::unordered_map<std::string, std::vector<int64_t>>;
// Static shapes stated in a scope (inputs, value_info, outputs,
// initializers); -1 for a dimension that is not a number.
using Shapes = std::unordered_map<std::string, std::vector<int64_t>>;

bool TensorInts(const onnx::TensorProto& t, std::vector<int64_t>* out) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return false;
  out->clear();
  if (t.data_type() == onnx::TensorProto::INT64) {
    if (!t.raw_data().empty()) {
      const std::string& r = t.raw_data();
      if (r.size() % 8) return false;
      out->resize(r.size() / 8);
      std::memcpy(out->data(), r.data(), r.size());
    } else {
      out->assign(t.int64_data().begin(), t.int64_data().end());
    }
    return true;
  }
  if (t.data_type() == onnx::TensorProto::INT32) {
    if (!t.raw_data().empty()) {
      const std::string& r = t.raw_data();
      if (r.size() % 4) return false;
      std::vector<int32_t> v(r.size() / 4);
      std::memcpy(v.data(), r.data(), r.size());
      out->assign(v.begin(), v.end());
    } else {
      out->assign(t.int32_data().begin(), t.int32_data().end());
    }
    return true;
  }
  return false;
}

void AddScope(const onnx::GraphProto& g, ConstInts* consts, Shapes* shapes) {
  auto add_shape = [&](const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    std::vector<int64_t> dims;
    for (const auto& d : vi.type().tensor_type().shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    (*shapes)[vi.name()] = dims;
  };
  for (const auto& vi : g.input()) add_shape(vi);
  for (const auto& vi : g.value_info()) add_shape(vi);
  for (const auto& vi : g.output()) add_shape(vi);
  for (const auto& t : g.initializer()) {
    (*shapes)[t.name()] = std::vector<int64_t>(t.dims().begin(), t.dims().end());
    std::vector<int64_t> v;
    if (TensorInts(t, &v)) (*consts)[t.name()] = v;
  }
  for (const auto& n : g.node()) {
    if (n.op_type() != "Constant" || !IsDefault(n.domain()) || n.output_size() != 1) continue;
    const auto* value = FindAttr(n, "value");
    const auto* ints = FindAttr(n, "value_ints");
    std::vector<int64_t> v;
    if (value && value->has_t() && TensorInts(value->t(), &v)) (*consts)[n.output(0)] = v;
    if (ints) (*consts)[n.output(0)] = std::vector<int64_t>(ints->ints().begin(), ints->ints().end());
  }
}

// The index of the node that computes each value of `g`.
std::unordered_map<std::string, int> Producers(const onnx::GraphProto& g) {
  std::unordered_map<std::string, int> producer;
  for (int k = 0; k < g.node_size(); ++k)
    for (const auto& o : g.node(k).output()) producer[o] = k;
  return producer;
}

// Removes the nodes at the indices in `dead`, keeping the others' order.
void RemoveNodes(onnx::GraphProto* g, const std::set<int>& dead) {
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int k = 0; k < g->node_size(); ++k)
    if (!dead.count(k)) *kept.Add() = std::move(*g->mutable_node(k));
  g->mutable_node()->Swap(&kept);
}

class NewerOpsets {
 public:
  NewerOpsets(onnx::ModelProto* model, int source, bool fuse_functions = true)
      : model_(model), source_(source), fuse_functions_(fuse_functions) {
    names_.Collect(model->graph());
  }

  void Downgrade(std::vector<std::string>* notes) {
    DowngradeGraph(model_->mutable_graph(), {}, {}, {});
    SetOpset(kNewestOnnxOpsetForChecks);
    if (kept_ > 0) {
      bool has = false;
      for (const auto& imp : model_->opset_import()) has = has || imp.domain() == kNewerOpsetDomain;
      if (!has) {
        auto* imp = model_->add_opset_import();
        imp->set_domain(kNewerOpsetDomain);
        imp->set_version(source_);
      }
    }
    for (const auto& [what, count] : done_)
      notes->push_back("opset " + std::to_string(source_) + " -> 17: " + what + " (" + std::to_string(count) + " node" +
                       (count == 1 ? "" : "s") + ")");
  }

  void Upgrade() {
    CountReads(model_->graph());
    // One-element float and int64 initializers: the constants the bodies
    // and the computed sizes are matched by.
    for (const auto& t : model_->graph().initializer()) {
      if (t.dims_size() > 1 || (t.dims_size() == 1 && t.dims(0) != 1)) continue;
      std::vector<int64_t> v;
      if (t.data_type() == onnx::TensorProto::INT64 && TensorInts(t, &v) && v.size() == 1) {
        ints_[t.name()] = v[0];
      } else if (t.data_type() == onnx::TensorProto::FLOAT && t.float_data_size() == 1) {
        floats_[t.name()] = t.float_data(0);
      } else if (t.data_type() == onnx::TensorProto::FLOAT && t.raw_data().size() == 4) {
        float f;
        std::memcpy(&f, t.raw_data().data(), 4);
        floats_[t.name()] = f;
      }
    }
    UpgradeGraph(model_->mutable_graph());
    if (fused_ > 0 || removed_ > 0) {
      // The bodies' and sizes' scalar constants, now read by nothing.
      reads_.clear();
      CountReads(model_->graph());
      std::set<std::string> inputs;
      for (const auto& vi : model_->graph().input()) inputs.insert(vi.name());
      auto* inits = model_->mutable_graph()->mutable_initializer();
      for (int k = inits->size() - 1; k >= 0; --k) {
        const std::string& name = inits->Get(k).name();
        if ((floats_.count(name) || ints_.count(name)) && !reads_.count(name) && !inputs.count(name))
          inits->DeleteSubrange(k, 1);
      }
    }
    SetOpset(source_);
    auto* imports = model_->mutable_opset_import();
    for (int k = imports->size() - 1; k >= 0; --k)
      if (imports->Get(k).domain() == kNewerOpsetDomain) imports->DeleteSubrange(k, 1);
  }

 private:
  static constexpr int kNewestOnnxOpsetForChecks = 17;

  void SetOpset(int v) {
    for (auto& imp : *model_->mutable_opset_import())
      if (IsDefault(imp.domain())) imp.set_version(v);
  }

  std::string Fresh(const std::string& base) { return names_.Fresh(base); }
  // An int64 initializer of the main graph (subgraphs read it from there).
  std::string Ints(const std::string& base, const std::vector<int64_t>& v) {
    onnx::TensorProto* t = model_->mutable_graph()->add_initializer();
    t->set_name(Fresh(base));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return t->name();
  }

  // The node's changes after 17, up to the model's opset: kNoForm wins, then
  // kDetail; versions of kDetail are returned.
  Change Classify(const onnx::NodeProto& n, std::vector<int>* details) const {
    const auto& table = Changes();
    auto it = table.find(n.op_type());
    if (it == table.end()) {
      // Unchanged since 17 if ONNX 1.12 knows it, else newer than anything
      // the table lists (or not an operator): no opset-17 form.
      return onnx::OpSchemaRegistry::Schema(n.op_type(), kNewestOnnxOpsetForChecks, "") ? Change::kTypes
                                                                                        : Change::kNoForm;
    }
    // An operator new after 17 is in the table from its first version.
    if (!onnx::OpSchemaRegistry::Schema(n.op_type(), kNewestOnnxOpsetForChecks, "") &&
        it->second.begin()->first <= source_)
      return Change::kNoForm;
    Change c = Change::kTypes;
    for (const auto& [version, change] : it->second) {
      if (version > source_) break;
      if (change == Change::kNoForm) return Change::kNoForm;
      if (change == Change::kDetail) {
        c = Change::kDetail;
        details->push_back(version);
      }
    }
    return c;
  }

  void DowngradeGraph(onnx::GraphProto* g, ConstInts consts, Shapes shapes,
                      const std::unordered_map<std::string, int32_t>& outer_types) {
    AddScope(*g, &consts, &shapes);
    onnx_detail::ElemTypes types(outer_types);
    types.AddGraph(*g);
    std::vector<onnx::NodeProto> before;  // nodes to insert before the current one
    google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
    for (auto& n : *g->mutable_node()) {
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) DowngradeGraph(a.mutable_g(), consts, shapes, types.all());
        for (auto& sub : *a.mutable_graphs()) DowngradeGraph(&sub, consts, shapes, types.all());
      }
      before.clear();
      if (IsDefault(n.domain()) && !ExpandFunction(&n, types, &before)) DowngradeNode(&n, consts, shapes, &before);
      for (auto& b : before) {
        types.AddNode(b);
        *out.Add() = std::move(b);
      }
      types.AddNode(n);
      *out.Add() = std::move(n);
    }
    g->mutable_node()->Swap(&out);
  }

  // A scalar initializer of a float type (the main graph's).
  std::string FloatScalar(const std::string& base, int32_t type, double value) {
    onnx::TensorProto* t = model_->mutable_graph()->add_initializer();
    t->set_name(Fresh(base));
    t->set_data_type(type);
    if (type == onnx::TensorProto::DOUBLE)
      t->add_double_data(value);
    else
      t->add_float_data(static_cast<float>(value));
    return t->name();
  }

  // Operators ONNX defines by a function of opset-17 operators (Mish-18,
  // Gelu-20, Swish-24) become that function's nodes: rlflow models and
  // rewrites them, and UpgradeGraph fuses Mish and Gelu again. Returns
  // false for anything else (and for element types other than float and
  // double, whose constants this does not write).
  bool ExpandFunction(onnx::NodeProto* n, const onnx_detail::ElemTypes& types, std::vector<onnx::NodeProto>* before) {
    const std::string op = n->op_type();
    const bool mish = op == "Mish" && source_ >= 18, gelu = op == "Gelu" && source_ >= 20,
               swish = op == "Swish" && source_ >= 24;
    if (!(mish || gelu || swish) || n->input_size() != 1 || n->output_size() != 1) return false;
    int32_t type = types.Of(n->input(0));
    if (type == 0) type = onnx::TensorProto::FLOAT;
    if (type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::DOUBLE) return false;
    const std::string x = n->input(0);
    const std::string base = n->name().empty() ? n->output(0) : n->name();
    auto node = [&](const std::string& type_name, std::vector<std::string> in) {
      onnx::NodeProto m;
      m.set_op_type(type_name);
      m.set_name(Fresh(base + "/" + type_name));
      for (auto& s : in) m.add_input(s);
      m.add_output(Fresh(base + "/" + type_name + "_output"));
      before->push_back(m);
      return before->back().output(0);
    };
    std::string a, b;  // the node becomes Mul(a, b)
    if (mish) {
      a = x;
      b = node("Tanh", {node("Softplus", {x})});
    } else if (gelu) {
      const auto* approx = FindAttr(*n, "approximate");
      const std::string mode = approx ? approx->s() : "none";
      std::string inner;
      if (mode == "none") {
        inner = node("Erf", {node("Mul", {x, FloatScalar(base + "/one_over_sqrt2", type, M_SQRT1_2)})});
      } else if (mode == "tanh") {
        std::string cube = node("Pow", {x, FloatScalar(base + "/three", type, 3.0)});
        std::string sum = node("Add", {x, node("Mul", {cube, FloatScalar(base + "/c", type, 0.044715)})});
        inner = node("Tanh", {node("Mul", {sum, FloatScalar(base + "/sqrt_2_over_pi", type, std::sqrt(2.0 / M_PI))})});
      } else {
        return false;
      }
      a = node("Mul", {x, node("Add", {inner, FloatScalar(base + "/one", type, 1.0)})});
      b = FloatScalar(base + "/half", type, 0.5);
    } else {
      const auto* alpha = FindAttr(*n, "alpha");
      a = x;
      b = node("Sigmoid", {alpha ? node("Mul", {x, FloatScalar(base + "/alpha", type, alpha->f())}) : x});
    }
    n->set_op_type("Mul");
    n->clear_attribute();
    n->clear_input();
    n->add_input(a);
    n->add_input(b);
    ++done_[op + " -> its function body (" +
            (mish   ? "Softplus, Tanh, Mul"
             : gelu ? "Erf or Tanh, Mul, Add"
                    : "Sigmoid, Mul") +
            ")"];
    return true;
  }

  void Keep(onnx::NodeProto* n, const std::string& why) {
    n->set_domain(kNewerOpsetDomain);
    ++kept_;
    ++done_["kept as " + std::to_string(source_) + " (" + why + "), opaque"];
  }

  void DowngradeNode(onnx::NodeProto* n, const ConstInts& consts, const Shapes& shapes,
                     std::vector<onnx::NodeProto>* before) {
    std::vector<int> details;
    const Change c = Classify(*n, &details);
    const std::string op = n->op_type();  // a copy: a Reduce* may become an Identity below
    if (c == Change::kNoForm) return Keep(n, "no opset-17 form");
    if (c == Change::kTypes) return;
    for (int v : details) {
      if (IsReduceWithAxesInput(op) && v == 18) {
        std::vector<int64_t> axes;
        bool has_axes = n->input_size() >= 2 && !n->input(1).empty();
        if (has_axes) {
          auto it = consts.find(n->input(1));
          if (it == consts.end()) return Keep(n, "axes computed at run time");
          axes = it->second;
        }
        const bool noop = IntAttr(*n, "noop_with_empty_axes", 0) != 0;
        DropAttr(n, "noop_with_empty_axes");
        while (n->input_size() > 1) n->mutable_input()->RemoveLast();
        if (axes.empty() && noop) {
          n->set_op_type("Identity");
          n->clear_attribute();
          ++done_[op + " with no axes and noop_with_empty_axes -> Identity"];
          return;
        }
        if (!axes.empty()) {
          auto* a = n->add_attribute();
          a->set_name("axes");
          a->set_type(onnx::AttributeProto::INTS);
          for (int64_t x : axes) a->add_ints(x);
        }
        ++done_["Reduce axes input -> attribute"];
      } else if (op == "Split" && v == 18) {
        const auto* num = FindAttr(*n, "num_outputs");
        if (num == nullptr) continue;
        const int64_t parts = num->i();
        DropAttr(n, "num_outputs");
        if (n->input_size() >= 2 && !n->input(1).empty()) continue;
        if (parts != n->output_size() || parts < 1) return Keep(n, "num_outputs differs from its outputs");
        const int64_t axis = IntAttr(*n, "axis", 0);
        int64_t dim = -1;
        if (auto it = shapes.find(n->input(0)); it != shapes.end()) {
          const int64_t rank = static_cast<int64_t>(it->second.size());
          const int64_t a = axis < 0 ? axis + rank : axis;
          if (a >= 0 && a < rank) dim = it->second[a];
        }
        if (dim >= 0 && dim % parts == 0) {
          ++done_["Split num_outputs, even -> Split"];
          continue;
        }
        const std::string base = n->name().empty() ? n->output(0) : n->name();
        std::string sizes;
        if (dim >= 0) {
          const int64_t chunk = (dim + parts - 1) / parts;
          if (chunk * (parts - 1) >= dim) return Keep(n, "num_outputs leaves an empty chunk");
          std::vector<int64_t> v(parts, chunk);
          v.back() = dim - chunk * (parts - 1);
          sizes = Ints(base + "_split", v);
          ++done_["Split num_outputs, uneven -> Split with sizes"];
        } else {
          // Sizes computed from the input's shape: ceil(d / n) each, the
          // remainder last (constant folding makes them static).
          auto node = [&](const std::string& type, std::vector<std::string> in, const std::string& out_base) {
            onnx::NodeProto m;
            m.set_op_type(type);
            m.set_name(Fresh(base + "_" + out_base));
            for (auto& s : in) m.add_input(s);
            m.add_output(Fresh(base + "_" + out_base));
            before->push_back(m);
            return before->back().output(0);
          };
          std::string shape = node("Shape", {n->input(0)}, "shape");
          std::string d = node("Gather", {shape, Ints(base + "_axis", {axis})}, "dim");
          std::string c =
              node("Div", {node("Add", {d, Ints(base + "_nm1", {parts - 1})}, "dim_up"), Ints(base + "_n", {parts})},
                   "chunk");
          std::string last = node("Sub", {d, node("Mul", {c, Ints(base + "_nm1b", {parts - 1})}, "front")}, "last");
          onnx::NodeProto concat;
          concat.set_op_type("Concat");
          concat.set_name(Fresh(base + "_sizes"));
          for (int64_t k = 0; k + 1 < parts; ++k) concat.add_input(c);
          concat.add_input(last);
          concat.add_output(Fresh(base + "_sizes"));
          auto* ax = concat.add_attribute();
          ax->set_name("axis");
          ax->set_type(onnx::AttributeProto::INT);
          ax->set_i(0);
          before->push_back(concat);
          sizes = concat.output(0);
          ++done_["Split num_outputs, shape unknown -> Split with computed sizes"];
        }
        const std::string x = n->input(0);
        n->clear_input();
        n->add_input(x);
        n->add_input(sizes);
      } else if (op == "Pad" && v == 18) {
        if (n->input_size() >= 4 && !n->input(3).empty()) {
          // Pads on given axes: as pads on every axis (0 on the others),
          // where the axes and pads are constants and the input's rank is
          // declared (a graph input's, or value_info's, as exporters write).
          auto axes = consts.find(n->input(3));
          auto pads = consts.find(n->input(1));
          auto shape = shapes.find(n->input(0));
          if (axes == consts.end() || pads == consts.end() || shape == shapes.end())
            return Keep(n, "pads on given axes");
          const int64_t rank = static_cast<int64_t>(shape->second.size());
          const std::vector<int64_t>& ax = axes->second;
          const int64_t k = static_cast<int64_t>(ax.size());
          if (static_cast<int64_t>(pads->second.size()) != 2 * k) return Keep(n, "pads on given axes");
          std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
          std::vector<bool> seen(static_cast<size_t>(rank), false);
          for (int64_t i = 0; i < k; ++i) {
            const int64_t a = ax[i] < 0 ? ax[i] + rank : ax[i];
            if (a < 0 || a >= rank || seen[a]) return Keep(n, "pads on given axes");
            seen[a] = true;
            full[a] = pads->second[i];
            full[a + rank] = pads->second[i + k];
          }
          const std::string base = n->name().empty() ? n->output(0) : n->name();
          n->set_input(1, Ints(base + "_pads", full));
          n->mutable_input()->RemoveLast();
          while (n->input_size() > 2 && n->input(n->input_size() - 1).empty()) n->mutable_input()->RemoveLast();
          ++done_["Pad on given axes -> pads on every axis"];
        }
      } else if (op == "Pad" && v == 19) {
        const auto* m = FindAttr(*n, "mode");
        if (m && m->s() == "wrap") return Keep(n, "mode wrap");
      } else if (op == "Resize" && v == 18) {
        if (IntAttr(*n, "antialias", 0) != 0) return Keep(n, "antialias");
        if (FindAttr(*n, "axes")) return Keep(n, "resize on given axes");
        const auto* k = FindAttr(*n, "keep_aspect_ratio_policy");
        if (k && k->s() != "stretch") return Keep(n, "keep_aspect_ratio_policy " + k->s());
        DropAttr(n, "antialias");
        DropAttr(n, "keep_aspect_ratio_policy");
      } else if (op == "Resize" && v == 19) {
        const auto* m = FindAttr(*n, "coordinate_transformation_mode");
        if (m && m->s() == "half_pixel_symmetric") return Keep(n, "half_pixel_symmetric");
      } else if ((op == "ScatterElements" || op == "ScatterND") && v == 18) {
        const auto* r = FindAttr(*n, "reduction");
        if (r && (r->s() == "max" || r->s() == "min")) return Keep(n, "reduction " + r->s());
      } else if (op == "LpPool" && v == 18) {
        if (IntAttr(*n, "ceil_mode", 0) != 0 || !AllOnes(*n, "dilations")) return Keep(n, "ceil_mode or dilations");
        DropAttr(n, "ceil_mode");
        DropAttr(n, "dilations");
      } else if (op == "AveragePool" && v == 19) {
        if (!AllOnes(*n, "dilations")) return Keep(n, "dilations");
        DropAttr(n, "dilations");
      } else if ((op == "Cast" || op == "CastLike") && v == 19) {
        DropAttr(n, "saturate");  // float8 targets only
      } else if ((op == "Cast" || op == "CastLike") && v == 24) {
        DropAttr(n, "round_mode");  // float8e8m0 targets only
      } else if (op == "QuantizeLinear" && v == 19) {
        DropAttr(n, "saturate");
      } else if ((op == "QuantizeLinear" || op == "DequantizeLinear") && v == 21) {
        if (IntAttr(*n, "block_size", 0) != 0) return Keep(n, "blocked quantization");
        if (IntAttr(*n, "output_dtype", 0) != 0) return Keep(n, "output_dtype");
        DropAttr(n, "block_size");
        DropAttr(n, "output_dtype");
      } else if ((op == "QuantizeLinear" || op == "DequantizeLinear") && v == 23) {
        if (IntAttr(*n, "precision", 0) != 0 || IntAttr(*n, "output_dtype", 0) != 0)
          return Keep(n, "precision or output_dtype");
        DropAttr(n, "precision");
        DropAttr(n, "output_dtype");
      } else {
        return Keep(n, "version " + std::to_string(v) + " not handled");
      }
    }
  }

  // Number of reads of each name anywhere in the model (subgraphs
  // included) and the graph outputs.
  void CountReads(const onnx::GraphProto& g) {
    for (const auto& o : g.output()) ++reads_[o.name()];
    for (const auto& n : g.node()) {
      for (const auto& in : n.input()) ++reads_[in];
      for (const auto& a : n.attribute()) {
        if (a.has_g()) CountReads(a.g());
        for (const auto& sub : a.graphs()) CountReads(sub);
      }
    }
  }

  bool ScalarIs(const std::string& name, double value) const {
    auto it = floats_.find(name);
    return it != floats_.end() && it->second == static_cast<float>(value);
  }

  // Mish (target 18+) and Gelu (20+) where their function bodies, as
  // ExpandFunction writes them, are still whole: Mul(x, Tanh(Softplus(x)))
  // and Mul(Mul(x, Add(Erf(Mul(x, 1/sqrt 2)), 1)), 0.5), the inner values
  // read once. The nodes of the body but the last are removed.
  void FuseFunctions(onnx::GraphProto* g) {
    const std::unordered_map<std::string, int> producer = Producers(*g);
    // The node (index) that alone computes `name`, read once, if it is `op`.
    auto single = [&](const std::string& name, const char* op) -> int {
      auto it = producer.find(name);
      if (it == producer.end() || reads_[name] != 1) return -1;
      const onnx::NodeProto& p = g->node(it->second);
      if (p.op_type() != op || !IsDefault(p.domain()) || p.output_size() != 1) return -1;
      return it->second;
    };
    auto in = [&](int k, int i) -> const std::string& { return g->node(k).input(i); };
    std::set<int> dead;
    for (int k = 0; k < g->node_size(); ++k) {
      const onnx::NodeProto& n = g->node(k);
      if (n.op_type() != "Mul" || !IsDefault(n.domain()) || n.input_size() != 2) continue;
      std::vector<int> body;
      std::string fused, input;
      for (int side = 0; side < 2 && fused.empty(); ++side) {
        const std::string& x = n.input(side);
        const std::string& other = n.input(1 - side);
        if (source_ >= 18) {
          const int tanh = single(other, "Tanh");
          const int softplus = tanh >= 0 ? single(in(tanh, 0), "Softplus") : -1;
          if (softplus >= 0 && in(softplus, 0) == x) {
            body = {tanh, softplus};
            fused = "Mish";
            input = x;
            break;
          }
        }
        if (source_ < 20 || !ScalarIs(other, 0.5)) continue;
        const int outer = single(x, "Mul");
        for (int s2 = 0; outer >= 0 && s2 < 2 && fused.empty(); ++s2) {
          const int add = single(in(outer, 1 - s2), "Add");
          for (int s3 = 0; add >= 0 && s3 < 2 && fused.empty(); ++s3) {
            const int erf = ScalarIs(in(add, 1 - s3), 1.0) ? single(in(add, s3), "Erf") : -1;
            const int scale = erf >= 0 ? single(in(erf, 0), "Mul") : -1;
            for (int s4 = 0; scale >= 0 && s4 < 2; ++s4)
              if (in(scale, s4) == in(outer, s2) && ScalarIs(in(scale, 1 - s4), M_SQRT1_2)) {
                body = {outer, add, erf, scale};
                fused = "Gelu";
                input = in(outer, s2);
                break;
              }
          }
        }
      }
      if (fused.empty()) continue;
      dead.insert(body.begin(), body.end());
      onnx::NodeProto& m = *g->mutable_node(k);
      m.set_op_type(fused);
      m.clear_input();
      m.add_input(input);
      ++fused_;
    }
    if (dead.empty()) return;
    RemoveNodes(g, dead);
  }

  bool IntIs(const std::string& name, int64_t value) const {
    auto it = ints_.find(name);
    return it != ints_.end() && it->second == value;
  }

  // A Split whose sizes are still the computation DowngradeNode wrote for
  // num_outputs on a dimension it could not see (Concat of n - 1 chunks
  // c = (d + n - 1) / n and the rest d - c (n - 1), d = Gather(Shape(x),
  // [axis])) gets num_outputs back; the computation's nodes go when nothing
  // else reads them.
  void RestoreNumOutputs(onnx::GraphProto* g) {
    const std::unordered_map<std::string, int> producer = Producers(*g);
    auto made_by = [&](const std::string& name, const char* op) -> int {
      auto it = producer.find(name);
      if (it == producer.end()) return -1;
      const onnx::NodeProto& p = g->node(it->second);
      return p.op_type() == op && IsDefault(p.domain()) && p.output_size() == 1 ? it->second : -1;
    };
    auto in = [&](int k, int i) -> std::string {
      return k >= 0 && i < g->node(k).input_size() ? g->node(k).input(i) : std::string();
    };
    std::vector<int> chain;
    for (int k = 0; k < g->node_size(); ++k) {
      const onnx::NodeProto& split = g->node(k);
      if (split.op_type() != "Split" || !IsDefault(split.domain()) || split.input_size() != 2) continue;
      const int64_t parts = split.output_size();
      const int64_t axis = IntAttr(split, "axis", 0);
      const int concat = made_by(split.input(1), "Concat");
      if (parts < 2 || concat < 0 || g->node(concat).input_size() != parts || IntAttr(g->node(concat), "axis", 0) != 0)
        continue;
      const std::string c = in(concat, 0);
      bool same = true;
      for (int64_t i = 1; i + 1 < parts; ++i) same = same && in(concat, static_cast<int>(i)) == c;
      const int sub = made_by(in(concat, static_cast<int>(parts - 1)), "Sub");
      const int mul = made_by(in(sub, 1), "Mul");
      const int div = made_by(c, "Div");
      const int add = made_by(in(div, 0), "Add");
      const std::string d = in(add, 0);
      const int gather = made_by(d, "Gather");
      const int shape = made_by(in(gather, 0), "Shape");
      if (!same || sub < 0 || mul < 0 || div < 0 || add < 0 || gather < 0 || shape < 0 || in(sub, 0) != d ||
          in(mul, 0) != c || !IntIs(in(mul, 1), parts - 1) || !IntIs(in(add, 1), parts - 1) ||
          !IntIs(in(div, 1), parts) || !IntIs(in(gather, 1), axis) || in(shape, 0) != split.input(0) ||
          IntAttr(g->node(gather), "axis", 0) != 0)
        continue;
      onnx::NodeProto& m = *g->mutable_node(k);
      --reads_[m.input(1)];
      m.mutable_input()->RemoveLast();
      auto* a = m.add_attribute();
      a->set_name("num_outputs");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(parts);
      chain.insert(chain.end(), {concat, sub, mul, div, add, gather, shape});
    }
    // The chain's nodes that nothing reads any more, consumers first.
    std::set<int> dead;
    for (bool changed = true; changed;) {
      changed = false;
      for (int k : chain) {
        if (dead.count(k) || reads_[g->node(k).output(0)] > 0) continue;
        dead.insert(k);
        for (const auto& i : g->node(k).input()) --reads_[i];
        changed = true;
      }
    }
    if (dead.empty()) return;
    RemoveNodes(g, dead);
    removed_ += static_cast<int>(dead.size());
  }

  void UpgradeGraph(onnx::GraphProto* g) {
    RestoreNumOutputs(g);
    if (fuse_functions_) FuseFunctions(g);
    for (auto& n : *g->mutable_node()) {
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) UpgradeGraph(a.mutable_g());
        for (auto& sub : *a.mutable_graphs()) UpgradeGraph(&sub);
      }
      if (n.domain() == kNewerOpsetDomain) {
        n.clear_domain();
        continue;
      }
      if (!IsDefault(n.domain())) continue;
      const std::string& op = n.op_type();
      const std::string base = n.name().empty() ? (n.output_size() ? n.output(0) : op) : n.name();
      if (IsReduceWithAxesInput(op) && source_ >= 18) {
        const auto* axes = FindAttr(n, "axes");
        if (axes == nullptr) continue;
        std::vector<int64_t> v(axes->ints().begin(), axes->ints().end());
        DropAttr(&n, "axes");
        n.add_input(Ints(base + "_axes", v));
      } else if (op == "Split" && source_ >= 18) {
        if ((n.input_size() >= 2 && !n.input(1).empty()) || FindAttr(n, "num_outputs")) continue;
        auto* a = n.add_attribute();
        a->set_name("num_outputs");
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(n.output_size());
      }
    }
  }

  onnx::ModelProto* model_;
  int source_;
  bool fuse_functions_;
  onnx_detail::FreshNames names_;
  std::map<std::string, int> done_;
  int kept_ = 0;
  std::unordered_map<std::string, int> reads_;
  std::unordered_map<std::string, float> floats_;  // scalar float initializers
  std::unordered_map<std::string, int64_t> ints_;  // one-element int64 initializers
  int fused_ = 0;
  int removed_ = 0;
};

int DefaultOpset(const onnx::ModelProto& model) {
  for (const auto& imp : model.opset_import())
    if (IsDefault(imp.domain())) return static_cast<int>(imp.version());
  return -1;
}

}  // namespace

void DowngradeToOpset17(onnx::ModelProto* model, std::vector<std::string>* notes) {
  const int source = DefaultOpset(*model);
  if (source <= 17 || source > kNewestImportOpset)
    Fail("DowngradeToOpset17: the model is at opset ", source, ", not 18 to ", kNewestImportOpset);
  NewerOpsets(model, source).Downgrade(notes);
}

void UpgradeFromOpset17(onnx::ModelProto* model, int target, bool fuse_functions) {
  if (DefaultOpset(*model) != 17 || target <= 17 || target > kNewestImportOpset)
    Fail("UpgradeFromOpset17: the model is at opset ", DefaultOpset(*model), "; target ", target);
  NewerOpsets(model, target, fuse_functions).Upgrade();
}

}  // namespace rlflow

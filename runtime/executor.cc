#include "runtime/executor.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "core/error.h"
#include "core/op_registry.h"
#include "core/ops/kernel.h"

namespace rlflow {

Executor::Executor(const Graph& graph) : graph_(graph) {
  order_ = graph.TopologicalOrder();
  defs_.resize(graph.num_nodes(), nullptr);
  output_types_.resize(graph.num_nodes());
  for (NodeId id : order_) {
    defs_[id] = &KernelDefFor(graph.node(id));
    output_types_[id] = OutputTypes(graph, graph.node(id));
  }
  constants_.resize(graph.num_values());
  for (ValueId v : graph.initializers()) constants_[v] = ToAten(graph.value(v).initializer);
  // Last use of each intermediate value.
  std::vector<int> last_use(graph.num_values(), -1);
  for (size_t step = 0; step < order_.size(); ++step)
    for (ValueId in : graph.node(order_[step]).inputs)
      if (in != kNoValue) last_use[in] = static_cast<int>(step);
  for (ValueId out : graph.outputs()) last_use[out] = static_cast<int>(order_.size());
  free_after_.resize(order_.size());
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    const Value& val = graph.value(v);
    if (val.initializer || val.is_graph_input) continue;
    if (last_use[v] >= 0 && last_use[v] < static_cast<int>(order_.size())) free_after_[last_use[v]].push_back(v);
  }
}

namespace {
void CheckType(const at::Tensor& t, const TensorType& expected, const std::string& what) {
  if (expected.dtype != DType::kUndefined && FromAtenType(t.scalar_type()) != expected.dtype)
    Fail(what, " has type ", DTypeName(FromAtenType(t.scalar_type())), ", expected ", expected.ToString());
  if (!expected.rank_known) return;
  bool ok = t.dim() == expected.rank();
  for (int64_t k = 0; ok && k < t.dim(); ++k)
    if (expected.shape[k] >= 0 && t.size(k) != expected.shape[k]) ok = false;
  if (!ok) {
    Shape actual(t.sizes().begin(), t.sizes().end());
    Fail(what, " has shape ", ShapeToString(actual), ", expected ", expected.ToString());
  }
}
}  // namespace

std::vector<at::Tensor> Executor::Run(const std::vector<at::Tensor>& inputs, std::vector<double>* node_ms) const {
  const Graph& g = graph_;
  if (inputs.size() != g.inputs().size()) Fail("the graph has ", g.inputs().size(), " inputs, got ", inputs.size());
  std::vector<at::Tensor> values = constants_;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Value& v = g.value(g.inputs()[k]);
    CheckType(inputs[k], v.type, "graph input '" + v.name + "'");
    values[g.inputs()[k]] = inputs[k];
  }
  c10::NoGradGuard no_grad;
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  if (node_ms) node_ms->assign(g.num_nodes(), 0.0);
  for (size_t step = 0; step < order_.size(); ++step) {
    NodeId id = order_[step];
    const Node& n = g.node(id);
    // A node's time: gathering its inputs, its kernel, checking and storing
    // its outputs, and later the release of each of its outputs (by the
    // step that read it last): what running it costs, wherever the
    // executor pays for it.
    auto t0 = node_ms ? Clock::now() : Clock::time_point();
    std::vector<at::Tensor> args;
    args.reserve(n.inputs.size());
    for (ValueId in : n.inputs) args.push_back(in == kNoValue ? at::Tensor() : values[in]);
    std::vector<at::Tensor> outs = RunKernel(n, *defs_[id], std::move(args), output_types_[id]);
    for (size_t k = 0; k < outs.size(); ++k) {
      const Value& v = g.value(n.outputs[k]);
      CheckType(outs[k], v.type, "output '" + v.name + "' of node " + n.Describe());
      values[n.outputs[k]] = std::move(outs[k]);
    }
    if (node_ms) (*node_ms)[id] += ms_since(t0);
    for (ValueId dead : free_after_[step]) {
      auto t1 = node_ms ? Clock::now() : Clock::time_point();
      values[dead] = at::Tensor();
      if (node_ms && g.value(dead).producer != kNoNode) (*node_ms)[g.value(dead).producer] += ms_since(t1);
    }
  }
  // A graph output that is a view (a Transpose's permuted tensor, a weight
  // a cut-out opaque node reads transposed) is copied into its own layout
  // here: its producer's cost, as any runtime pays it where it hands the
  // value out (before, the run's per-node overhead carried it, and folding
  // two such weight Transposes saved 3x what the estimate said). Only views
  // are timed: two clock readings for each of a cut graph's many outputs
  // (73 in a QDQ model's) cost more than its 10 us run's copies.
  std::vector<at::Tensor> result;
  for (ValueId out : g.outputs()) {
    const NodeId producer = g.value(out).producer;
    if (!node_ms || producer == kNoNode || values[out].is_contiguous()) {
      result.push_back(values[out].contiguous());
      continue;
    }
    auto t1 = Clock::now();
    result.push_back(values[out].contiguous());
    (*node_ms)[producer] += ms_since(t1);
  }
  return result;
}

namespace {

// A graph input's static shape, or nullptr.
const Shape* StaticShape(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).type.IsStatic()) return nullptr;
  return &g.value(v).type.shape;
}

// Positions in `longer` that are not in `shorter` (size-1 dimensions only),
// matching the rest in order from the back: the axes Unsqueeze inserted or
// Squeeze removed. Empty with *ok false if the shapes do not align.
std::vector<int64_t> InsertedOnes(const Shape& longer, const Shape& shorter, bool* ok) {
  std::vector<int64_t> axes;
  const int64_t inserts = static_cast<int64_t>(longer.size()) - static_cast<int64_t>(shorter.size());
  int64_t i = static_cast<int64_t>(shorter.size()) - 1;
  *ok = inserts >= 0;
  for (int64_t j = static_cast<int64_t>(longer.size()) - 1; j >= 0 && *ok; --j) {
    const bool can_insert = longer[j] == 1 && static_cast<int64_t>(axes.size()) < inserts;
    if (i >= 0 && longer[j] == shorter[i]) {
      --i;
    } else if (can_insert) {
      axes.push_back(j);
    } else {
      *ok = false;
    }
  }
  *ok = *ok && i < 0 && static_cast<int64_t>(axes.size()) == inserts;
  std::reverse(axes.begin(), axes.end());
  return axes;
}

// Values for integer (or Range/Resize float) graph input `v` read as input
// `idx` of node `c` that make `c` produce the output shape the importer
// inferred: shapes, axes, sizes, counts. Recognised: Reshape/Expand shape,
// ConstantOfShape, Tile repeats, Slice starts/ends/axes/steps, Unsqueeze and
// Squeeze axes, ReduceSum axes, TopK k, Range, Pad pads, Resize scales and
// sizes, OneHot depth, Split sizes, Range. False if `c` is none of them or its shapes
// are not static.
bool ShapeConsistentValues(const Graph& g, const Node& c, size_t idx, int64_t n, std::vector<double>* out,
                           std::string* how) {
  const Shape* in = StaticShape(g, c.inputs.empty() ? kNoValue : c.inputs[0]);
  const Shape* res = c.outputs.empty() ? nullptr : StaticShape(g, c.outputs[0]);
  auto attr_i = [&](const char* name, int64_t dflt) { return c.attrs.count(name) ? c.attrs.at(name).i : dflt; };
  auto set = [&](const std::vector<int64_t>& v, const std::string& what) {
    if (static_cast<int64_t>(v.size()) != n) return false;
    out->assign(v.begin(), v.end());
    *how = what + " " + c.op + " '" + c.name + "' was inferred to have";
    return true;
  };
  if (res == nullptr) {
    // The output shape is not known: values that are valid whatever the
    // input holds (an identity reshape, broadcast to ones, a full slice).
    auto valid = [&](const std::vector<int64_t>& v) {
      if (static_cast<int64_t>(v.size()) != n) return false;
      out->assign(v.begin(), v.end());
      *how = "values valid for " + c.op + " '" + c.name + "' (its output shape is not known)";
      return true;
    };
    const int64_t r = in ? static_cast<int64_t>(in->size()) : -1;
    if (c.op == "Reshape" && idx == 1 && in) {
      if (n == r) return valid(*in);
      std::vector<int64_t> v(static_cast<size_t>(n), 1);
      if (n > 0) v.back() = -1;
      return valid(v);
    }
    if ((c.op == "Expand" || c.op == "Tile") && idx == 1) return valid(std::vector<int64_t>(n, 1));
    if (c.op == "ConstantOfShape" && idx == 0) return valid(std::vector<int64_t>(n, 1));
    if (c.op == "TopK" && idx == 1) return valid({1});
    if (c.op == "Unsqueeze" && idx == 1) {
      std::vector<int64_t> v(static_cast<size_t>(n));
      std::iota(v.begin(), v.end(), 0);
      return valid(v);
    }
    if (c.op == "Slice" && idx >= 1 && idx <= 4 && n <= r) {
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k)
        v[k] = idx == 1 ? 0 : idx == 2 ? std::numeric_limits<int64_t>::max() : idx == 3 ? k : 1;
      return valid(v);
    }
    if (c.op == "Range" && idx <= 2) return valid({idx == 0 ? 0 : idx == 1 ? 4 : 1});
    return false;
  }
  const int64_t rank = static_cast<int64_t>(res->size());
  const std::string& op = c.op;
  if ((op == "Reshape" || op == "Expand") && idx == 1) {
    if (op == "Expand" && n < rank) return set(std::vector<int64_t>(res->end() - n, res->end()), "the output shape");
    return set(*res, "the output shape");
  }
  if (op == "ConstantOfShape" && idx == 0) return set(*res, "the output shape");
  if (op == "Range" && idx <= 2 && rank == 1)
    return set({idx == 0 ? 0 : idx == 1 ? (*res)[0] : 1}, "the length of the output shape");
  if (in == nullptr) return false;
  const int64_t in_rank = static_cast<int64_t>(in->size());
  if (op == "Tile" && idx == 1 && in_rank == rank) {
    std::vector<int64_t> reps(rank);
    for (int64_t k = 0; k < rank; ++k) reps[k] = (*in)[k] > 0 ? (*res)[k] / (*in)[k] : 1;
    return set(reps, "the repeats of the output shape");
  }
  if (op == "Slice" && idx >= 1 && idx <= 4 && in_rank == rank) {
    // Axes: the constant axes input, else those whose size changes first.
    std::vector<int64_t> axes;
    const Value* axes_v = c.inputs.size() > 3 && c.inputs[3] != kNoValue ? &g.value(c.inputs[3]) : nullptr;
    if (axes_v && axes_v->initializer) {
      axes = axes_v->initializer->ToInt64();
      for (int64_t& a : axes) a = a < 0 ? a + rank : a;
    } else {
      for (int64_t k = 0; k < rank; ++k)
        if ((*in)[k] != (*res)[k]) axes.push_back(k);
      for (int64_t k = 0; k < rank && static_cast<int64_t>(axes.size()) < n; ++k)
        if ((*in)[k] == (*res)[k]) axes.push_back(k);
      if (static_cast<int64_t>(axes.size()) > n) return false;
      std::sort(axes.begin(), axes.end());
    }
    std::vector<int64_t> v;
    for (int64_t a : axes) {
      if (a < 0 || a >= rank) return false;
      v.push_back(idx == 1 ? 0 : idx == 2 ? (*res)[a] : idx == 3 ? a : 1);
    }
    return set(v, "the slice to the output shape");
  }
  if ((op == "Unsqueeze" || op == "Squeeze") && idx == 1) {
    bool ok = true;
    std::vector<int64_t> axes = op == "Unsqueeze" ? InsertedOnes(*res, *in, &ok) : InsertedOnes(*in, *res, &ok);
    return ok && set(axes, "the axes of the output shape");
  }
  if (op == "ReduceSum" && idx == 1 && attr_i("keepdims", 1) == 1 && in_rank == rank) {
    std::vector<int64_t> axes;
    for (int64_t k = 0; k < rank; ++k)
      if ((*res)[k] == 1 && (*in)[k] != 1) axes.push_back(k);
    for (int64_t k = 0; k < rank && static_cast<int64_t>(axes.size()) < n; ++k)
      if ((*in)[k] == 1) axes.push_back(k);
    std::sort(axes.begin(), axes.end());
    return set(axes, "the axes of the output shape");
  }
  if (op == "TopK" && idx == 1) {
    int64_t axis = attr_i("axis", -1);
    if (axis < 0) axis += rank;
    return axis >= 0 && axis < rank && set({(*res)[axis]}, "the k of the output shape");
  }
  if (op == "Pad" && idx == 1 && in_rank == rank) {
    std::vector<int64_t> pads(2 * rank, 0);
    for (int64_t k = 0; k < rank; ++k) pads[rank + k] = (*res)[k] - (*in)[k];
    return set(pads, "the pads of the output shape");
  }
  if (op == "Resize" && (idx == 2 || idx == 3) && in_rank == rank) {
    if (idx == 3) return set(*res, "the output shape");
    if (n != rank) return false;
    out->clear();
    for (int64_t k = 0; k < rank; ++k)
      out->push_back((*in)[k] > 0 ? static_cast<double>((*res)[k]) / static_cast<double>((*in)[k]) : 1.0);
    *how = "the scales of the output shape Resize '" + c.name + "' was inferred to have";
    return true;
  }
  if (op == "OneHot" && idx == 1) {
    int64_t axis = attr_i("axis", -1);
    if (axis < 0) axis += rank;
    return axis >= 0 && axis < rank && set({(*res)[axis]}, "the depth of the output shape");
  }
  if (op == "Split" && idx == 1) {
    int64_t axis = attr_i("axis", 0);
    if (axis < 0) axis += rank;
    std::vector<int64_t> sizes;
    for (ValueId o : c.outputs) {
      const Shape* s = StaticShape(g, o);
      if (s == nullptr || axis < 0 || axis >= static_cast<int64_t>(s->size())) return false;
      sizes.push_back((*s)[axis]);
    }
    return set(sizes, "the split sizes of the output shapes");
  }
  return false;
}

// A mask: an input whose values, through casts and reshapes, are taken
// from 1 (`1 - mask`, `mask - 1`) or scaled by a masking bias (|c| >= 1e4:
// -10000 or the float's lowest, as Hugging Face's exports write the attention mask,
// `(1 - mask) * finfo.min`). Such an input is 0 or 1: other values make the
// bias overflow to infinity and every output NaN, and the check would
// compare NaN with NaN. Returns how the graph uses it ("" if not a mask).
std::string MaskUse(const Graph& g, const std::vector<std::vector<std::pair<NodeId, int>>>& consumers, ValueId v) {
  // A constant of a few elements (a scalar as exporters write it), each `pred`.
  auto constant = [&](ValueId c, auto&& pred) {
    if (c == kNoValue || !g.value(c).initializer || g.value(c).type.NumElements() > 16) return false;
    const std::vector<double> values = g.value(c).initializer->ToDouble();
    return !values.empty() && std::all_of(values.begin(), values.end(), pred);
  };
  // A Mul of `x` by a masking bias: its name, else "".
  auto bias = [&](ValueId x) -> std::string {
    for (auto [node, idx] : consumers[x]) {
      const Node& c = g.node(node);
      if (!c.opaque() && c.op == "Mul" && c.inputs.size() == 2 &&
          constant(c.inputs[1 - idx], [](double d) { return std::abs(d) >= 1e4; }))
        return c.name;
    }
    return "";
  };
  // A float input taken from 1 may be anything (an image inverted): a mask
  // only when the bias follows.
  const bool integer = !IsFloatingPoint(g.value(v).type.dtype);
  std::vector<ValueId> frontier = {v};
  for (int depth = 0; depth < 6 && !frontier.empty(); ++depth) {
    std::vector<ValueId> next;
    for (ValueId x : frontier) {
      if (std::string mul = bias(x); !mul.empty()) return "a masking bias in Mul '" + mul + "'";
      for (auto [node, idx] : consumers[x]) {
        const Node& c = g.node(node);
        if (c.opaque()) continue;
        if (c.op == "Sub" && c.inputs.size() == 2 && constant(c.inputs[1 - idx], [](double d) { return d == 1.0; })) {
          const std::string mul = bias(c.outputs[0]);
          if (integer || !mul.empty())
            return (idx == 1 ? "1 - x in Sub '" : "x - 1 in Sub '") + c.name + "'" +
                   (mul.empty() ? "" : ", a masking bias in Mul '" + mul + "'");
        }
        static const std::set<std::string> carriers = {"Cast",  "Unsqueeze", "Squeeze",  "Reshape",  "Flatten",
                                                       "Slice", "Expand",    "Identity", "Transpose"};
        if (idx == 0 && carriers.count(c.op))
          for (ValueId o : c.outputs) next.push_back(o);
      }
    }
    frontier = std::move(next);
  }
  return "";
}

}  // namespace

// Operands of ONNX Runtime's contrib operators (opaque here) whose values
// must be in range, as its transformer optimiser writes BERT's embedding:
// EmbedLayerNormalization's token ids index the rows of its word embedding
// (operand 2), its segment ids those of its segment embedding (4), and its
// mask (7) is of 0 and 1 (ONNX Runtime counts it into the attention's mask
// index).
struct ContribOperand {
  const char* op;
  int operand;
  int table;  // the operand whose first dimension bounds it; -1: a mask
};
constexpr ContribOperand kContribOperands[] = {
    {"EmbedLayerNormalization", 0, 2}, {"EmbedLayerNormalization", 1, 4}, {"EmbedLayerNormalization", 7, -1}};

const ContribOperand* ContribOperandOf(const Node& c, int idx) {
  if (c.domain != "com.microsoft") return nullptr;
  for (const ContribOperand& o : kContribOperands)
    if (c.op == o.op && idx == o.operand) return &o;
  return nullptr;
}

std::vector<at::Tensor> RandomInputs(const Graph& g, uint64_t seed, std::vector<std::string>* how) {
  auto consumers = g.Consumers();
  std::vector<at::Tensor> out;
  if (how) how->clear();
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    const Value& v = g.value(g.inputs()[k]);
    if (!v.type.IsStatic()) Fail("graph input '", v.name, "' has no static shape: ", v.type.ToString());
    std::vector<int64_t> shape(v.type.shape.begin(), v.type.shape.end());
    int64_t n = v.type.NumElements();
    std::string note;
    if (v.sample_data) {
      if (!(v.sample_data->type() == v.type))
        Fail("the data given for graph input '", v.name, "' is ", v.sample_data->type().ToString(),
             ", the input is bound to ", v.type.ToString());
      out.push_back(ToAten(v.sample_data).clone());
      if (how) how->push_back("given (--input_data)");
      continue;
    }
    if (v.type.dtype != DType::kBool) {
      std::string use = MaskUse(g, consumers, g.inputs()[k]);
      for (auto [node, idx] : consumers[g.inputs()[k]])
        if (const ContribOperand* o = ContribOperandOf(g.node(node), idx); use.empty() && o && o->table < 0)
          use = "the mask of " + g.node(node).op + " '" + g.node(node).name + "'";
      if (!use.empty()) {
        std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + k + 1);
        at::Tensor t = at::empty(shape, at::kLong);
        int64_t* p = t.data_ptr<int64_t>();
        for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(rng() >> 63);
        out.push_back(t.to(ToAtenType(v.type.dtype)));
        if (how) how->push_back("random 0 or 1 (a mask: " + use + ")");
        continue;
      }
    }
    // Shapes, axes, counts: values that make the node reading them produce
    // the shape the importer inferred (random ones make a valid model fail).
    if (v.type.dtype != DType::kBool && n <= 64) {
      std::vector<double> values;
      bool found = false;
      for (auto [node, idx] : consumers[g.inputs()[k]]) {
        const Node& c = g.node(node);
        if (!c.opaque() && ShapeConsistentValues(g, c, static_cast<size_t>(idx), n, &values, &note)) {
          found = IsFloatingPoint(v.type.dtype) || c.op != "Resize" || idx != 2;
          if (found) break;
        }
      }
      if (found) {
        at::Tensor t = at::empty(shape, at::kDouble);
        for (int64_t i = 0; i < n; ++i) t.data_ptr<double>()[i] = values[i];
        out.push_back(t.to(ToAtenType(v.type.dtype)));
        if (how) how->push_back(note);
        continue;
      }
    }
    // Our own generator keeps inputs identical across platforms and ATen versions.
    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + k + 1);
    if (IsFloatingPoint(v.type.dtype)) {
      at::Tensor t = at::empty(shape, at::kDouble);
      double* p = t.data_ptr<double>();
      for (int64_t i = 0; i < n; i += 2) {
        // Box-Muller from 53-bit uniforms.
        double u1 = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
        double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
        double r = std::sqrt(-2.0 * std::log(u1));
        p[i] = r * std::cos(2 * M_PI * u2);
        if (i + 1 < n) p[i + 1] = r * std::sin(2 * M_PI * u2);
      }
      out.push_back(t.to(ToAtenType(v.type.dtype)));
      if (how) how->push_back("random, N(0, 1)");
    } else if (v.type.dtype == DType::kBool) {
      at::Tensor t = at::empty(shape, at::kBool);
      bool* p = t.data_ptr<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = (rng() >> 63) != 0;
      out.push_back(t);
      if (how) how->push_back("random bools");
    } else {
      // Indices: below the size of the dimension they index.
      int64_t bound = -1;
      std::string indexed;
      for (auto [node, idx] : consumers[g.inputs()[k]]) {
        const Node& c = g.node(node);
        const ContribOperand* contrib = ContribOperandOf(c, idx);
        const bool indices =
            contrib ? contrib->table >= 0
                    : (c.op == "Gather" || c.op == "GatherElements" || c.op == "ScatterElements") && idx == 1;
        const size_t table = contrib ? static_cast<size_t>(contrib->table) : 0;
        if (!indices || table >= c.inputs.size() || c.inputs[table] == kNoValue) continue;
        const TensorType& data = g.value(c.inputs[table]).type;
        int64_t axis = !contrib && c.attrs.count("axis") ? c.attrs.at("axis").i : 0;
        if (data.rank_known && data.rank() > 0) {
          if (axis < 0) axis += data.rank();
          if (axis >= 0 && axis < data.rank() && data.shape[axis] > 0 && (bound < 0 || data.shape[axis] < bound)) {
            bound = data.shape[axis];
            indexed = " (indices of " + c.op + " '" + c.name + "')";
          }
        }
      }
      // Integer divisors (Div, Mod): never zero.
      int64_t low = 0;
      for (auto [node, idx] : consumers[g.inputs()[k]]) {
        const Node& c = g.node(node);
        if ((c.op == "Div" || c.op == "Mod") && idx == 1) {
          low = 1;
          indexed = " (divisor of " + c.op + " '" + c.name + "')";
        }
      }
      if (bound < 0) bound = 10;
      if (low >= bound) low = 0;
      at::Tensor t = at::empty(shape, at::kLong);
      int64_t* p = t.data_ptr<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = low + static_cast<int64_t>(rng() % static_cast<uint64_t>(bound - low));
      out.push_back(t.to(ToAtenType(v.type.dtype)));
      if (how)
        how->push_back("random integers in [" + std::to_string(low) + ", " + std::to_string(bound) + ")" + indexed);
    }
  }
  // An input that is a permuted view where the graph was cut from
  // (Value::arrives_permuted) is fed as one: the same values, laid out with
  // the dimensions in reverse order.
  for (size_t k = 0; k < out.size(); ++k) {
    if (!g.value(g.inputs()[k]).arrives_permuted || out[k].dim() < 2) continue;
    std::vector<int64_t> reverse(out[k].dim());
    for (size_t d = 0; d < reverse.size(); ++d) reverse[d] = static_cast<int64_t>(reverse.size() - 1 - d);
    out[k] = out[k].permute(reverse).contiguous().permute(reverse);
  }
  return out;
}

double RelativeError(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
  if (a.numel() == 0) return 0.0;
  at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);
  // NaN and infinities must sit at the same places with the same values;
  // the error is measured over the finite elements.
  at::Tensor finite = at::isfinite(bd);
  if (!finite.all().item<bool>()) {
    at::Tensor same = (at::isnan(ad) & at::isnan(bd)) | (ad == bd) | finite;
    if (!same.all().item<bool>()) return std::numeric_limits<double>::infinity();
    ad = at::where(finite, ad, at::zeros_like(ad));
    bd = at::where(finite, bd, at::zeros_like(bd));
  }
  double diff = (ad - bd).abs().max().item<double>();
  double scale = bd.abs().max().item<double>();
  if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
  return diff / std::max(scale, 1e-12);
}

}  // namespace rlflow

#include "runtime/executor.h"

#include <chrono>
#include <random>

#include "core/error.h"
#include "core/op_registry.h"
#include "core/ops/kernel.h"

namespace rlflow {

Executor::Executor(const Graph& graph) : graph_(graph) {
  order_ = graph.TopologicalOrder();
  defs_.resize(graph.num_nodes(), nullptr);
  for (NodeId id : order_) defs_[id] = &KernelDefFor(graph.node(id));
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
  at::NoGradGuard no_grad;
  for (size_t step = 0; step < order_.size(); ++step) {
    NodeId id = order_[step];
    const Node& n = g.node(id);
    std::vector<at::Tensor> args;
    args.reserve(n.inputs.size());
    for (ValueId in : n.inputs) args.push_back(in == kNoValue ? at::Tensor() : values[in]);
    auto t0 = node_ms ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    std::vector<at::Tensor> outs = RunKernel(n, *defs_[id], std::move(args));
    if (node_ms) {
      node_ms->resize(g.num_nodes(), 0.0);
      (*node_ms)[id] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      const Value& v = g.value(n.outputs[k]);
      CheckType(outs[k], v.type, "output '" + v.name + "' of node " + n.Describe());
      values[n.outputs[k]] = std::move(outs[k]);
    }
    for (ValueId dead : free_after_[step]) values[dead] = at::Tensor();
  }
  std::vector<at::Tensor> result;
  for (ValueId out : g.outputs()) result.push_back(values[out].contiguous());
  return result;
}

std::vector<at::Tensor> RandomInputs(const Graph& g, uint64_t seed) {
  // Bounds for integer inputs used as Gather indices.
  auto consumers = g.Consumers();
  std::vector<at::Tensor> out;
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    const Value& v = g.value(g.inputs()[k]);
    if (!v.type.IsStatic()) Fail("graph input '", v.name, "' has no static shape: ", v.type.ToString());
    std::vector<int64_t> shape(v.type.shape.begin(), v.type.shape.end());
    // Our own generator keeps inputs identical across platforms and ATen versions.
    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + k + 1);
    int64_t n = v.type.NumElements();
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
    } else if (v.type.dtype == DType::kBool) {
      at::Tensor t = at::empty(shape, at::kBool);
      bool* p = t.data_ptr<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = (rng() >> 63) != 0;
      out.push_back(t);
    } else {
      int64_t bound = -1;
      for (auto [node, idx] : consumers[g.inputs()[k]]) {
        const Node& c = g.node(node);
        if (c.op == "Gather" && idx == 1 && c.inputs[0] != kNoValue) {
          const TensorType& data = g.value(c.inputs[0]).type;
          int64_t axis = c.attrs.count("axis") ? c.attrs.at("axis").i : 0;
          if (data.rank_known && data.rank() > 0) {
            if (axis < 0) axis += data.rank();
            if (axis >= 0 && axis < data.rank() && data.shape[axis] > 0)
              bound = bound < 0 ? data.shape[axis] : std::min(bound, data.shape[axis]);
          }
        }
      }
      if (bound < 0) bound = 10;
      at::Tensor t = at::empty(shape, at::kLong);
      int64_t* p = t.data_ptr<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(rng() % static_cast<uint64_t>(bound));
      out.push_back(t.to(ToAtenType(v.type.dtype)));
    }
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

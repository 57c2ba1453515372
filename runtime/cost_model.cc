#include "runtime/cost_model.h"

#include <ATen/Parallel.h>
#include <ATen/ATen.h>
#include <torch/csrc/api/include/torch/version.h>  // TORCH_VERSION only, not torch.h

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/summary.h"
#include "core/op_registry.h"
#include "runtime/executor.h"

namespace rlflow {

// ---------------------------------------------------------------- graphs

std::vector<char> WeightOnlyNodes(const Graph& g) {
  std::vector<char> weight_only(g.num_nodes(), 0);
  std::vector<char> const_value(g.num_values(), 0);
  for (ValueId v = 0; v < g.num_values(); ++v) const_value[v] = g.IsConstant(v);
  for (NodeId id : g.TopologicalOrder()) {
    const Node& n = g.node(id);
    if (n.opaque() || n.inputs.empty()) continue;
    bool all = true;
    for (ValueId in : n.inputs)
      if (in != kNoValue && !const_value[in]) all = false;
    if (!all) continue;
    weight_only[id] = 1;
    for (ValueId out : n.outputs) const_value[out] = 1;
  }
  return weight_only;
}

double CostModel::GraphCost(const Graph& g) {
  std::vector<char> weight_only = WeightOnlyNodes(g);
  double total = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (!weight_only[id]) total += NodeMs(g, id);
  return total;
}

Graph ExtractNode(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  Graph out;
  out.info() = g.info();
  std::map<ValueId, ValueId> mapped;
  std::vector<ValueId> ins;
  for (ValueId in : n.inputs) {
    if (in == kNoValue) {
      ins.push_back(kNoValue);
      continue;
    }
    auto it = mapped.find(in);
    if (it == mapped.end()) {
      const Value& v = g.value(in);
      // Values computed at run time but known at the bound dimensions (shape
      // arithmetic on a symbolic batch) are timed with their actual value.
      ValueId nv = v.initializer ? out.AddInitializer(v.name, v.initializer)
                   : v.known     ? out.AddInitializer(v.name, v.known)
                                 : out.AddInput(v.name, v.type);
      it = mapped.emplace(in, nv).first;
    }
    ins.push_back(it->second);
  }
  std::vector<std::string> names;
  for (ValueId o : n.outputs) names.push_back(g.value(o).name);
  NodeId nid = out.AddNode(n.op, ins, static_cast<int>(n.outputs.size()), n.attrs, n.name, names);
  out.mutable_node(nid).domain = n.domain;
  out.mutable_node(nid).opaque_proto = n.opaque_proto;
  std::vector<ValueId> outs = out.node(nid).outputs;
  for (size_t k = 0; k < outs.size(); ++k) out.mutable_value(outs[k]).type = g.value(n.outputs[k]).type;
  out.SetOutputs(outs);
  return out;
}

std::string NodeCostKey(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  std::string key = n.domain.empty() ? n.op : n.domain + "." + n.op;
  uint64_t h = 0;
  // Effective attributes: one operator built in different ways (a rule's
  // conv with only `pads`, an imported one with every attribute explicit)
  // is one key and one timing.
  for (const auto& [name, a] : EffectiveAttributes(g, id)) h = HashCombine(HashCombine(h, HashString(name)), a.Hash());
  if (n.opaque()) h = HashCombine(h, HashString(*n.opaque_proto));
  char buf[32];
  std::snprintf(buf, sizeof buf, "#%016llx", static_cast<unsigned long long>(h));
  key += buf;
  for (ValueId in : n.inputs) {
    key += in == kNoValue ? " -" : " " + g.value(in).type.ToString();
    // Small constants (shapes, axes, pads) can change what the op does;
    // weights only by their type, whether stored or computed from weights.
    if (in != kNoValue && g.IsConstant(in) && g.value(in).initializer->NumElements() <= 64) {
      std::snprintf(buf, sizeof buf, "=%016llx", static_cast<unsigned long long>(g.value(in).initializer->content_hash()));
      key += buf;
    }
  }
  return key;
}

uint64_t NodeCostHash(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  uint64_t h = HashCombine(HashString(n.op), HashString(n.domain));
  for (const auto& [name, a] : n.attrs) h = HashCombine(HashCombine(h, HashString(name)), a.Hash());
  if (n.opaque()) h = HashCombine(h, HashString(*n.opaque_proto));
  for (ValueId in : n.inputs) {
    if (in == kNoValue) {
      h = HashCombine(h, 0x51ed27);
      continue;
    }
    const Value& v = g.value(in);
    h = HashCombine(h, static_cast<uint64_t>(v.type.dtype) * 1000003 + (v.type.rank_known ? v.type.rank() : 99));
    if (!v.type.shape.empty()) h = HashCombine(h, HashBytes(v.type.shape.data(), v.type.shape.size() * sizeof(v.type.shape[0])));
    if (v.initializer && v.initializer->NumElements() <= 64) h = HashCombine(h, v.initializer->content_hash());
  }
  return h;
}

OpCost StaticNodeCost(const Graph& g, NodeId id) {
  OpCost c;
  const Node& n = g.node(id);
  c.flops = NodeFlops(g, id);
  auto bytes = [&](ValueId v) {
    if (v == kNoValue) return 0.0;
    const TensorType& t = g.value(v).type;
    int64_t numel = t.NumElements();
    return numel < 0 ? 0.0 : static_cast<double>(numel) * DTypeSize(t.dtype);
  };
  for (ValueId in : n.inputs) c.bytes += bytes(in);
  for (ValueId out : n.outputs) c.bytes += bytes(out);
  return c;
}

OpCost AnalyticalCostModel::NodeCost(const Graph& g, NodeId id) {
  OpCost c = StaticNodeCost(g, id);
  c.ms = overhead_ms_ + std::max(c.flops / (gflops_ * 1e6), c.bytes / (gbps_ * 1e6));
  return c;
}

// ---------------------------------------------------------------- CPU backend

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

class CpuBackend : public TimingBackend {
 public:
  std::string name() const override { return "cpu"; }
  std::string fingerprint() const override {
    return "cpu/t" + std::to_string(at::get_num_threads()) + "/torch" + TORCH_VERSION;
  }

  double TimeGraph(const Graph& graph, const TimingOptions& o) override {
    Executor exec(graph);
    std::vector<at::Tensor> inputs = RandomInputs(graph, o.seed);
    auto run_ms = [&](int reps) {
      auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) exec.Run(inputs);
      return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    };
    double first = 0;
    for (int k = 0; k < std::max(o.warmup, 1); ++k) first = run_ms(1);
    int reps = 1;
    if (first > 0 && first < o.min_sample_ms) reps = std::min(1000, static_cast<int>(o.min_sample_ms / first) + 1);
    std::vector<double> samples;
    for (int k = 0; k < std::max(o.samples, 1); ++k) samples.push_back(run_ms(reps) / reps);
    return Median(samples);
  }

  std::pair<double, double> TimeInterleaved(const Graph& a, const Graph& b, int runs,
                                            const TimingOptions& o) override {
    Executor ea(a), eb(b);
    std::vector<at::Tensor> inputs = RandomInputs(a, o.seed);
    auto time = [&](const Executor& e) {
      auto t0 = Clock::now();
      e.Run(inputs);
      return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    };
    for (int k = 0; k < std::max(o.warmup, 1); ++k) {
      time(ea);
      time(eb);
    }
    std::vector<double> ta, tb;
    for (int k = 0; k < std::max(runs, 1); ++k) {
      // ABBA order: neither graph always runs first.
      if (k % 2 == 0) {
        ta.push_back(time(ea));
        tb.push_back(time(eb));
      } else {
        tb.push_back(time(eb));
        ta.push_back(time(ea));
      }
    }
    return {Median(ta), Median(tb)};
  }
};

}  // namespace

std::vector<std::string> TimingBackendNames() { return {"cpu", "cuda"}; }

std::unique_ptr<TimingBackend> MakeTimingBackend(const std::string& device) {
  if (device == "cpu") return std::make_unique<CpuBackend>();
  if (device == "cuda")
    Fail("--device=cuda: this build has no CUDA cost backend yet (only the CPU backend is implemented)");
  Fail("unknown device '", device, "' (available: cpu)");
}

// ---------------------------------------------------------------- measured model

MeasuredCostModel::MeasuredCostModel(TimingBackend* backend, TimingOptions options)
    : backend_(backend), options_(options) {
  RLFLOW_CHECK(backend_ != nullptr, "MeasuredCostModel needs a backend");
}

OpCost MeasuredCostModel::NodeCost(const Graph& g, NodeId id) {
  OpCost c;
  c.ms = NodeTime(g, id);
  OpCost s = StaticNodeCost(g, id);
  c.flops = s.flops;
  c.bytes = s.bytes;
  return c;
}

double MeasuredCostModel::NodeTime(const Graph& g, NodeId id) {
  // Opaque nodes cannot run here; rewrites never cross them, so every graph
  // the search compares has the same ones: they cost nothing relative.
  if (g.node(id).opaque()) return 0;
  uint64_t fast_key = NodeCostHash(g, id);
  std::lock_guard<std::mutex> lock(mu_);
  if (fingerprint_.empty()) fingerprint_ = backend_->fingerprint();
  auto fast = fast_.find(fast_key);
  if (fast != fast_.end()) {
    ++hits_;
    return fast->second;
  }
  OpCost c;
  std::string key = fingerprint_ + "|" + NodeCostKey(g, id);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    ++hits_;
    fast_.emplace(fast_key, it->second);
    return it->second;
  }
  Graph single = ExtractNode(g, id);
  c.ms = backend_->TimeGraph(single, options_);
  ++measured_;
  cache_.emplace(key, c.ms);
  fast_.emplace(fast_key, c.ms);
  return c.ms;
}

static const char kCacheMagic[] = "rlflow-timing-cache 1";

void MeasuredCostModel::LoadCache(const std::string& path) {
  if (!FileExists(path)) return;
  LoadCacheText(ReadFile(path, "timing cache"), path);
}

void MeasuredCostModel::LoadCacheText(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  std::map<std::string, double> loaded;
  while (std::getline(in, line)) {
    ++lineno;
    if (lineno == 1) {
      if (line != kCacheMagic)
        Fail("timing cache ", path, " is not an rlflow timing cache (first line should be '", kCacheMagic,
             "'); delete it or pass another --timing_cache");
      continue;
    }
    if (line.empty()) continue;
    size_t tab = line.find('\t');
    char* end = nullptr;
    double ms = tab == std::string::npos ? -1 : std::strtod(line.c_str(), &end);
    if (tab == std::string::npos || end != line.c_str() + tab || !(ms >= 0) || tab + 1 >= line.size())
      Fail("timing cache ", path, " line ", lineno, " is malformed (expected '<ms>\\t<key>')");
    loaded[line.substr(tab + 1)] = ms;
  }
  if (lineno == 0) Fail("timing cache ", path, " is empty");
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [k, v] : loaded) cache_.emplace(k, v);
}

void MeasuredCostModel::SaveCache(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = std::string(kCacheMagic) + "\n";
  char buf[64];
  for (const auto& [k, v] : cache_) {
    std::snprintf(buf, sizeof buf, "%.17g\t", v);
    out += buf + k + "\n";
  }
  WriteFileAtomically(path, out);
}

}  // namespace rlflow

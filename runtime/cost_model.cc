#include "runtime/cost_model.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>  // not ATen/ATen.h: 17 s to compile this file, 10 s without
#include <fcntl.h>
#include <sys/file.h>
#include <torch/csrc/api/include/torch/version.h>  // TORCH_VERSION only, not torch.h
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/node_key.h"
#include "core/op_registry.h"
#include "core/summary.h"
#include "runtime/executor.h"
#include "runtime/stats.h"

namespace rlflow {
namespace {

// The graph a cost sum (GraphCost, RunCost) is walking on this thread, with
// what MeasuredCostModel::NextTo asks of it computed once per sum rather than
// once per node ONNX Runtime fuses into a neighbour: each such node's check
// had scanned every node for the readers of its outputs, and a 3796-node
// graph's cost was quadratic (a quarter of swin_t's search time in ORT).
struct CostingGraph {
  const Graph* graph = nullptr;
  std::vector<std::vector<NodeId>> readers;  // by node: the nodes reading its outputs (when first needed)
  std::vector<uint64_t> anchor_key;          // by node: NodeKeyHash >> 12, computed when first needed
  std::vector<char> has_anchor_key;
};
thread_local CostingGraph* t_costing = nullptr;

class CostingScope {
 public:
  explicit CostingScope(const Graph& g) : saved_(t_costing) {
    graph_.graph = &g;
    t_costing = &graph_;
  }
  ~CostingScope() { t_costing = saved_; }
  CostingScope(const CostingScope&) = delete;
  CostingScope& operator=(const CostingScope&) = delete;

 private:
  CostingGraph graph_;
  CostingGraph* saved_;
};

}  // namespace

// ---------------------------------------------------------------- graphs

double CostModel::GraphCost(const Graph& g) {
  CostingScope scope(g);
  std::vector<char> weight_only = WeightOnlyNodes(g);
  double total = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (!weight_only[id]) total += NodeMs(g, id);
  return total + RunFixedMs();
}

Graph ExtractNode(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  Graph out;
  out.info() = g.info();
  std::map<ValueId, ValueId> mapped;
  std::vector<ValueId> ins;
  std::optional<std::vector<char>> weight_only;  // computed where an input needs it
  for (ValueId in : n.inputs) {
    if (in == kNoValue) {
      ins.push_back(kNoValue);
      continue;
    }
    auto it = mapped.find(in);
    if (it == mapped.end()) {
      const Value& v = g.value(in);
      // Weights computed from weights (a MatMul's weight halves, a scale
      // moved into a weight: Split(W), Mul(s, W)) are folded into
      // initializers before the graph is written, and runtimes treat
      // initializers otherwise than inputs (ONNX Runtime prepacks a
      // MatMul's constant weight: 128 x 1536 by 1536 x 768 took 2.4 ms with
      // its weight an initializer, 3.6 ms with it an input): timed as
      // initializers (zeros; only the shape matters for timing).
      TensorDataPtr weight;
      if (!v.initializer && !v.known && v.producer != kNoNode && IsFloatingPoint(v.type.dtype) && v.type.IsStatic() &&
          v.type.NumElements() <= TensorData::kMaxTimingZeros) {
        if (!weight_only) weight_only = WeightOnlyNodes(g);
        if ((*weight_only)[v.producer]) weight = std::make_shared<const TensorData>(TensorData::Zeros(v.type));
      }
      // Values computed at run time but known at the bound dimensions (shape
      // arithmetic on a symbolic batch) are timed with their actual value.
      ValueId nv = v.initializer ? out.AddInitializer(v.name, v.initializer)
                   : v.known     ? out.AddInitializer(v.name, v.known)
                   : weight      ? out.AddInitializer(v.name, weight)
                                 : out.AddInput(v.name, v.type);
      // Timed reading the layout it reads in the graph (a permuted view or not).
      if (!v.initializer && !v.known && !weight) out.mutable_value(nv).arrives_permuted = PermutedView(g, in);
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

double CpuMs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

class CpuBackend : public TimingBackend {
 public:
  std::string name() const override { return "cpu"; }
  std::string fingerprint() const override {
    // "/m2": in-context node times include the executor's bookkeeping and
    // the release of the node's outputs (caches of earlier versions differ).
    // "/m3": node keys tell permuted inputs apart (PermutedView); before,
    // one key's time was that of whichever layout was timed first.
    // "/m4": a graph output's copy into its own layout is its producer's
    // in-context time (Executor::Run); before, the per-node overhead's.
    return "cpu/t" + std::to_string(at::get_num_threads()) + "/torch" + TORCH_VERSION + "/m4";
  }
  // A node's time in a run depends on the model around it: whether its
  // weights and inputs are still in the CPU's caches (the classifier Gemms
  // of a 1.5 ms MobileNetV3 take a third of the time they take in a 3 ms one
  // with the same head), and the per-node overhead differs between models.
  // In-context timings are kept per model, as for ONNX Runtime.
  bool context_sensitive() const override { return true; }

  double TimeGraph(const Graph& graph, const TimingOptions& o) override { return Median(TimeGraphRuns(graph, o)); }

  std::vector<double> TimeGraphRuns(const Graph& graph, const TimingOptions& o) override {
    Executor exec(graph);
    std::vector<at::Tensor> inputs = RandomInputs(graph, o.seed);
    auto run_ms = [&](int reps) {
      auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) exec.Run(inputs);
      return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    };
    double first = run_ms(1);
    const int n = SamplesWithin(o, first);
    for (int k = 1; k < std::max(o.warmup, 1) && n == std::max(o.samples, 1); ++k) first = run_ms(1);
    int reps = 1;
    if (first > 0 && first < o.min_sample_ms) reps = std::min(1000, static_cast<int>(o.min_sample_ms / first) + 1);
    std::vector<double> samples;
    for (int k = 0; k < n; ++k) samples.push_back(run_ms(reps) / reps);
    return samples;
  }

  PairedTimes TimePaired(const Graph& a, const Graph& b, int pairs, const TimingOptions& o) override {
    Executor ea(a), eb(b);
    std::vector<at::Tensor> inputs = RandomInputs(a, o.seed);
    PairedTimes t;
    // With one compute thread all the work runs on this thread: its CPU
    // time excludes other processes' time on its core (ThreadCpuMs).
    clockid_t clock = at::get_num_threads() == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID;
    t.cpu_clock = clock == CLOCK_THREAD_CPUTIME_ID ? "thread" : "process";
    int reps = 1;
    auto time = [&](const Executor& e, std::vector<double>* wall, std::vector<double>* cpu) {
      double c0 = CpuMs(clock);
      auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) e.Run(inputs);
      double w = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / reps;
      double c = (CpuMs(clock) - c0) / reps;
      if (wall) wall->push_back(w);
      if (cpu) cpu->push_back(c);
    };
    std::vector<double> first;
    for (int k = 0; k < std::max(o.warmup, 1); ++k) {
      time(ea, &first, nullptr);
      time(eb, &first, nullptr);
    }
    double shortest = *std::min_element(first.begin(), first.end());
    if (shortest > 0 && shortest < o.min_sample_ms)
      reps = std::min(1000, static_cast<int>(o.min_sample_ms / shortest) + 1);
    RunAlternately(pairs, [&](bool a) { a ? time(ea, &t.wall_a, &t.cpu_a) : time(eb, &t.wall_b, &t.cpu_b); });
    return t;
  }

  InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions& o) override {
    Executor exec(g);
    std::vector<at::Tensor> inputs = RandomInputs(g, o.seed);
    std::vector<double> node_ms;
    for (int k = 0; k < std::max(o.warmup, 1); ++k) exec.Run(inputs, &node_ms);
    std::vector<std::vector<double>> samples(g.num_nodes());
    std::vector<double> totals;
    for (int r = 0; r < std::max(runs, 1); ++r) {
      auto t0 = Clock::now();
      exec.Run(inputs, &node_ms);
      totals.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      for (NodeId id = 0; id < g.num_nodes(); ++id)
        samples[id].push_back(static_cast<size_t>(id) < node_ms.size() ? node_ms[id] : 0.0);
    }
    return SummariseInContext(samples, totals);
  }
};

}  // namespace

TimingOptions NodeTiming() {
  TimingOptions o;
  o.max_total_ms = 150;
  return o;
}

int SamplesWithin(const TimingOptions& o, double first_ms) {
  const int samples = std::max(o.samples, 1);
  if (!(o.max_total_ms > 0) || !(first_ms * samples > o.max_total_ms)) return samples;
  return std::min(samples, std::max(3, static_cast<int>(std::ceil(o.max_total_ms / first_ms))));
}

int CalibrationRuns(double run_seconds) {
  return std::max(3, std::min(2000, static_cast<int>(1.0 / std::max(run_seconds, 1e-4))));
}

int VerdictPairs(double run_seconds) {
  const double s = std::max(run_seconds, 1e-3);
  // At least 20 pairs while they take at most 30 s (a 180 ms model had 11,
  // and its 1.054x [0.995, 1.179] decided nothing), never fewer than 10.
  const int floor = std::max(10, std::min(20, static_cast<int>(15.0 / s)));
  return std::max(floor, std::min(40, static_cast<int>(2.0 / s)));
}

int VerdictPairs(double run_seconds, const TimingBackend& backend) {
  const int pairs = std::max(VerdictPairs(run_seconds), backend.min_paired_pairs());
  if (backend.min_paired_pairs() <= 0) return pairs;
  // A backend that times pairs in blocks of fresh sessions (ONNX Runtime):
  // a fast model up to 120 pairs, one per 1/120 s of its run, in blocks of
  // 10 (VerdictTiming), so that its interval is over 12 session pairs, not 4.
  return std::max(pairs, std::min(120, static_cast<int>(1.0 / std::max(run_seconds, 1e-3))));
}

TimingOptions VerdictTiming(int pairs, uint64_t seed) {
  TimingOptions timing;
  timing.seed = seed;
  // Samples of 1000 / pairs ms, at least 25 ms: 120 pairs of 8.3 ms samples
  // in 12 session pairs gave wider intervals than 40 of 25 ms in 4 (a model
  // against a copy of itself in ORT: half-widths 2.6% against 2.4%, 13.8%
  // against 7.5%), 120 of 25 ms narrower (1.3%, 4.3%).
  timing.min_sample_ms = std::max(timing.min_sample_ms, 1000.0 / std::min(std::max(pairs, 1), 40));
  timing.blocks = VerdictBlocks(pairs);
  return timing;
}

int VerdictBlocks(int pairs) { return pairs > 40 ? pairs / 10 : 0; }

PairedTimes TimingBackend::TimePairedFiles(const std::string&, const std::string&, const Graph&, int,
                                           const TimingOptions&) {
  Fail("the ", name(), " backend does not run model files");
}

void RunAlternately(int pairs, const std::function<void(bool a)>& time) {
  for (int k = 0; k < std::max(pairs, 1); ++k) {
    time(k % 2 == 0);
    time(k % 2 != 0);
  }
}

InContextTimes SummariseInContext(const std::vector<std::vector<double>>& node_samples,
                                  const std::vector<double>& run_ms) {
  InContextTimes t;
  t.runs = static_cast<int>(run_ms.size());
  t.run_ms = run_ms.empty() ? 0.0 : Median(run_ms);
  const size_t nodes = node_samples.size();
  t.node_ms.resize(nodes);
  t.node_spread.resize(nodes);
  double sum_of_medians = 0;
  std::vector<double> per_run(run_ms.size(), 0.0);
  for (size_t id = 0; id < nodes; ++id) {
    const std::vector<double>& s = node_samples[id];
    t.node_ms[id] = s.empty() ? 0.0 : Median(s);
    t.node_spread[id] = t.node_ms[id] > 0 ? RelativeSpread(s) : 0;
    sum_of_medians += t.node_ms[id];
    for (size_t r = 0; r < s.size() && r < per_run.size(); ++r) per_run[r] += s[r];
  }
  // Node times are skewed (a run is sometimes slow in one node, another
  // time in another): their medians add up to less than a median run's
  // nodes. Each node gets its share of the median per-run node total.
  if (sum_of_medians > 0 && !per_run.empty()) {
    const double scale = Median(per_run) / sum_of_medians;
    for (double& ms : t.node_ms) ms *= scale;
  }
  return t;
}

namespace {

std::map<std::string, BackendInfo>& BackendRegistry() {
  static auto* registry = new std::map<std::string, BackendInfo>();
  return *registry;
}

}  // namespace

bool RegisterTimingBackend(BackendInfo info) {
  RLFLOW_CHECK(!info.name.empty() && info.make, "a timing backend needs a name and a factory");
  RLFLOW_CHECK(!BackendRegistry().count(info.name), "timing backend '", info.name, "' registered twice");
  std::string name = info.name;
  BackendRegistry().emplace(std::move(name), std::move(info));
  return true;
}

std::vector<std::string> TimingBackendNames() {
  std::vector<std::string> names;
  for (const auto& [name, info] : BackendRegistry()) names.push_back(name);
  return names;
}

const BackendInfo& FindTimingBackend(const std::string& device) {
  auto it = BackendRegistry().find(device);
  if (it == BackendRegistry().end()) {
    std::string known;
    for (const std::string& n : TimingBackendNames()) known += (known.empty() ? "" : ", ") + n;
    Fail("unknown device '", device, "' (available: ", known, ")");
  }
  return it->second;
}

std::string DescribeTimingBackends() {
  std::string out;
  for (const auto& [name, info] : BackendRegistry()) out += name + ": " + info.description + "\n";
  return out;
}

void CheckBackendSettings(const BackendInfo& backend, const BackendOptions& options) {
  for (const auto& [setting, value] : options.settings)
    if (std::find(backend.settings.begin(), backend.settings.end(), setting) == backend.settings.end())
      Fail("--", setting, " does not apply to --device=", backend.name);
}

std::unique_ptr<TimingBackend> MakeTimingBackend(const std::string& device, const BackendOptions& options) {
  const BackendInfo& info = FindTimingBackend(device);
  CheckBackendSettings(info, options);
  return info.make(options);
}

RLFLOW_REGISTER_BACKEND(cpu, BackendInfo{"cpu",
                                         "rlflow's executor on ATen's CPU kernels (the thread count the run pins)",
                                         {},
                                         "onnx",
                                         false,
                                         [](const BackendOptions&) { return std::make_unique<CpuBackend>(); }});
// --device=cuda: runtime/cuda (//runtime/cuda:backend, linked where the CUDA toolkit is).

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

double MeasuredCostModel::NodeTimeOf(const Graph& g, NodeId id, uint64_t fast_key) {
  // Opaque nodes cannot run here; rewrites never cross them, so every graph
  // the search compares has the same ones: they cost nothing relative.
  const Node& n = g.node(id);
  if (n.opaque()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (fingerprint_.empty()) fingerprint_ = backend_->fingerprint();
  if (!derived_) Derive();
  auto fast = fast_.find(fast_key);
  if (fast != fast_.end()) {
    ++hits_;
    return fast->second;
  }
  auto fused = fused_.find(fast_key);
  if (fused != fused_.end()) {
    ++hits_;
    const Fused& f = fused->second;
    return NextTo(g, id, f.anchor, f.distance) ? f.fused_ms : f.alone_ms;
  }
  std::string key = NodeKeyText(g, id);
  auto alone = [&] {
    const double isolated = IsolatedTime(g, id, key);
    // Keyed as the calibration keys it: by the qualified op type
    // ("com.microsoft.FusedMatMul").
    return isolated * LocalFactor(QualifiedOp(n.domain, n.op), isolated);
  };
  double base;
  auto ctx = cache_.find(ContextKey("|ctx|") + key);
  if (ctx != cache_.end()) {
    ++hits_;
    base = ctx->second;
    auto distance = cache_.find(ContextKey("|fused|") + key);
    auto anchor = cache_.find(ContextKey("|anchor|") + key);
    if (distance != cache_.end() && anchor != cache_.end()) {
      // Run inside a neighbour's kernel where it was timed: free next to
      // that neighbour, its own kernel elsewhere (a rewrite broke the fusion).
      const int code = static_cast<int>(distance->second);
      Fused f{base + overhead_ms_, alone() + overhead_ms_, static_cast<uint64_t>(anchor->second),
              (code / 2) * (code % 2 ? -1 : 1)};
      fused_.emplace(fast_key, f);
      return NextTo(g, id, f.anchor, f.distance) ? f.fused_ms : f.alone_ms;
    }
  } else {
    base = alone();
  }
  double ms = base + overhead_ms_;
  fast_.emplace(fast_key, ms);
  return ms;
}

double MeasuredCostModel::LocalFactor(const std::string& op, double isolated_ms) const {
  auto f = factor_.find(op);
  auto points = ratio_points_.find(op);
  if (points == ratio_points_.end() || f == factor_.end()) return default_factor_;
  const std::vector<std::pair<double, double>>& p = points->second;
  if (static_cast<int>(p.size()) <= kLocalFactorKeys || !(isolated_ms > 0)) return f->second;
  // The kLocalFactorKeys nearest in log isolated time: outward from where
  // `isolated_ms` would stand.
  size_t hi = std::lower_bound(p.begin(), p.end(), std::make_pair(isolated_ms, -1.0)) - p.begin(), lo = hi;
  std::vector<double> near;
  auto distance = [&](size_t k) { return std::abs(std::log(p[k].first / isolated_ms)); };
  while (static_cast<int>(near.size()) < kLocalFactorKeys) {
    const bool take_lo = lo > 0 && (hi >= p.size() || distance(lo - 1) <= distance(hi));
    near.push_back(take_lo ? p[--lo].second : p[hi++].second);
  }
  return Median(near);
}

bool MeasuredCostModel::NextTo(const Graph& g, NodeId id, uint64_t anchor, int distance) {
  // Within a cost sum over `g`, its readers and keys are computed once for
  // the whole sum; else (a single node's cost) here.
  CostingGraph local;
  CostingGraph& c = t_costing != nullptr && t_costing->graph == &g ? *t_costing : local;
  if (distance > 0 && c.readers.empty()) {
    c.readers.resize(g.num_nodes());
    for (NodeId r = 0; r < g.num_nodes(); ++r)
      for (ValueId v : g.node(r).inputs) {
        if (v == kNoValue || g.value(v).producer == kNoNode) continue;
        std::vector<NodeId>& of = c.readers[g.value(v).producer];
        if (of.empty() || of.back() != r) of.push_back(r);
      }
  }
  if (c.anchor_key.empty()) {
    c.anchor_key.assign(g.num_nodes(), 0);
    c.has_anchor_key.assign(g.num_nodes(), 0);
  }
  auto key = [&](NodeId m) {
    if (!c.has_anchor_key[m]) {
      c.anchor_key[m] = NodeKeyHash(g, m) >> 12;
      c.has_anchor_key[m] = 1;
    }
    return c.anchor_key[m];
  };
  // Breadth first, `distance` edges downstream (> 0) or upstream (< 0).
  std::vector<NodeId> frontier = {id};
  for (int step = 0; step < std::abs(distance) && !frontier.empty(); ++step) {
    std::vector<NodeId> next;
    for (NodeId u : frontier) {
      if (distance < 0) {
        for (ValueId v : g.node(u).inputs)
          if (v != kNoValue && g.value(v).producer != kNoNode) next.push_back(g.value(v).producer);
      } else {
        next.insert(next.end(), c.readers[u].begin(), c.readers[u].end());
      }
    }
    for (NodeId m : next)
      if (key(m) == anchor) return true;
    frontier = std::move(next);
  }
  return false;
}

double MeasuredCostModel::IsolatedTime(const Graph& g, NodeId id, const std::string& key) {
  auto it = cache_.find(fingerprint_ + "|" + key);
  if (it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  Graph single = ExtractNode(g, id);
  // A node reading a value whose length the values set (NonZero's, an
  // If's output) is timed with those lengths 1 (detection post-processing
  // holds such nodes; their in-context time, which the original's nodes
  // have, is what counts), and at no time if it cannot run so.
  bool bound = false;
  for (ValueId in : single.inputs()) {
    TensorType& t = single.mutable_value(in).type;
    if (!t.rank_known || t.IsStatic()) continue;
    for (int64_t& d : t.shape) d = d < 0 ? 1 : d;
    bound = true;
  }
  double ms = 0;
  try {
    ms = backend_->TimeGraph(single, options_);
  } catch (const Error&) {
    if (!bound) throw;
  }
  ++measured_;
  cache_.emplace(fingerprint_ + "|" + key, ms);
  return ms;
}

double MeasuredCostModel::NodeSpread(const Graph& g, NodeId id) { return NodeSpreadOf(g, id, NodeKeyHash(g, id)); }

double MeasuredCostModel::NodeSpreadOf(const Graph& g, NodeId id, uint64_t fast_key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto fast = fast_spread_.find(fast_key);
    if (fast != fast_spread_.end()) return fast->second;
  }
  std::string key = NodeKeyText(g, id);
  std::lock_guard<std::mutex> lock(mu_);
  if (fingerprint_.empty()) fingerprint_ = backend_->fingerprint();
  auto it = cache_.find(ContextKey("|spread|") + key);
  const double spread = it == cache_.end() ? -1 : it->second;
  fast_spread_.emplace(fast_key, spread);
  return spread;
}

// Stores what a calibration run measured for the keys not cached yet (in
// the cache's time base); mu_ held.
void MeasuredCostModel::RecordInContext(const Graph& g, const std::map<std::string, std::vector<NodeId>>& by_key,
                                        const std::map<std::string, double>& now, const InContextTimes& t, int executed,
                                        CalibrationReport& report) {
  const std::string ctx_prefix = ContextKey("|ctx|"), spread_prefix = ContextKey("|spread|");
  const std::string overhead_key = ContextKey("|overhead"), fixed_key = ContextKey("|fixed");
  // Keys every node of which ran fused into a neighbour of one key at one
  // distance (InContextTimes::fused_into): free only next to it.
  const std::string fused_prefix = ContextKey("|fused|"), anchor_prefix = ContextKey("|anchor|");
  if (t.fused_into.size() == static_cast<size_t>(g.num_nodes()) && t.fused_distance.size() == t.fused_into.size()) {
    for (const auto& [key, ids] : by_key) {
      std::set<std::pair<uint64_t, int>> at;
      for (NodeId id : ids) {
        const NodeId into = t.fused_into[id];
        at.insert(into == kNoNode ? std::make_pair(uint64_t{0}, 0)
                                  : std::make_pair(NodeKeyHash(g, into) >> 12, t.fused_distance[id]));
      }
      if (at.size() != 1 || at.begin()->second == 0) continue;
      // Stored non-negative (2 |d|, + 1 downstream): only A/B outcomes are signed.
      const int d = at.begin()->second;
      cache_.emplace(fused_prefix + key, 2 * std::abs(d) + (d < 0 ? 1 : 0));
      cache_.emplace(anchor_prefix + key, static_cast<double>(at.begin()->first));
    }
  }
  cache_[ContextKey("|fusions")] = 1;
  for (const auto& [key, ids] : by_key) {
    if (cache_.count(ctx_prefix + key)) continue;
    std::vector<double> spread;
    for (NodeId id : ids) spread.push_back(t.node_spread[id]);
    cache_.emplace(ctx_prefix + key, now.at(key) * report.time_base);
    cache_.emplace(spread_prefix + key, Median(spread));
    ++report.new_keys;
  }
  if (!cache_.count(overhead_key) || !cache_.count(fixed_key)) {
    // What a run costs beyond its nodes' own times: the part every graph
    // with these inputs and outputs pays (the backend's fixed_ms) once
    // per run, the rest (dispatching each node) per node. Both or
    // neither, so that they always split one measurement.
    double kernels = 0;
    for (NodeId id = 0; id < g.num_nodes(); ++id) kernels += t.node_ms[id];
    const double beyond = std::max(0.0, t.run_ms - kernels);
    const double fixed = std::min(std::max(0.0, t.fixed_ms), beyond);
    cache_[fixed_key] = fixed * report.time_base;
    cache_[overhead_key] = (beyond - fixed) / executed * report.time_base;
  }
}

std::map<std::string, std::vector<NodeId>> MeasuredCostModel::TimedKeys(const Graph& g) const {
  // Weight-only nodes are timed as well where the device runs them on every
  // run (the original model, as the user has it, pays for them: RunCost);
  // where it folds them at load they do not run and have no time.
  std::vector<char> weight_only =
      backend_->folds_constants() ? WeightOnlyNodes(g) : std::vector<char>(g.num_nodes(), 0);
  std::map<std::string, std::vector<NodeId>> by_key;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (!g.node(id).opaque() && !weight_only[id]) by_key[NodeKeyText(g, id)].push_back(id);
  return by_key;
}

int MeasuredCostModel::UncalibratedKeys(const Graph& g, double* alone) {
  const std::map<std::string, std::vector<NodeId>> by_key = TimedKeys(g);
  std::lock_guard<std::mutex> lock(mu_);
  if (fingerprint_.empty()) fingerprint_ = backend_->fingerprint();
  const std::string ctx_prefix = ContextKey("|ctx|");
  int missing = 0, missing_alone = 0;
  for (const auto& entry : by_key) {
    missing += cache_.count(ctx_prefix + entry.first) ? 0 : 1;
    missing_alone += cache_.count(fingerprint_ + "|" + entry.first) ? 0 : 1;
  }
  if (alone != nullptr) *alone = by_key.empty() ? 0.0 : static_cast<double>(missing_alone) / by_key.size();
  return missing;
}

namespace {

// Cached / current time of the keys timed now that were cached (their total
// times): set where they are at least 3 keys and a fifth of the run's node
// time. `now`, if given, gets every key's median time in this run.
std::optional<double> TimeBase(const std::map<std::string, std::vector<NodeId>>& by_key, const InContextTimes& t,
                               const std::map<std::string, double>& cache, const std::string& ctx_prefix,
                               std::map<std::string, double>* now = nullptr) {
  // Weighted by time (sum cached / sum now): the long operators, whose
  // timings are the stablest, set it. Known keys that add up to little of
  // the run (a few microsecond shape ops shared with another model) would
  // set it by noise.
  double cached_sum = 0, now_sum = 0, total = 0;
  int known = 0;
  for (const auto& [key, ids] : by_key) {
    std::vector<double> ms;
    for (NodeId id : ids) ms.push_back(t.node_ms[id]);
    const double m = Median(ms);
    if (now != nullptr) (*now)[key] = m;
    total += m * ids.size();
    auto cached = cache.find(ctx_prefix + key);
    if (cached == cache.end()) continue;
    cached_sum += cached->second * ids.size();
    now_sum += m * ids.size();
    ++known;
  }
  if (known >= 3 && now_sum > 0 && cached_sum > 0 && now_sum >= 0.2 * total) return cached_sum / now_sum;
  return std::nullopt;
}

// Cached / current time of a whole run, where the cache holds every key of
// the graph and the per-node and per-run costs: the cache's estimate of the
// run (its keys' in-context times, the per-node overhead, the per-run cost)
// over the run timed now. Used where the cache keeps this model's own
// timings (a context-sensitive backend after SetContext): there the
// estimate of the model itself is the run measured when it was recorded,
// while its keys' times are derived (ORT's profiler: its cost per kernel
// event, measured once per process, is taken off each kernel of a few
// microseconds, so on a 0.25 ms model the keys' time base moved from 1.0 to
// 2.6 between processes over a run time that moved by 4%).
std::optional<double> RunTimeBase(const std::map<std::string, std::vector<NodeId>>& by_key, int executed,
                                  const InContextTimes& t, const std::map<std::string, double>& cache,
                                  const std::string& ctx_prefix, const std::string& overhead_key,
                                  const std::string& fixed_key) {
  auto overhead = cache.find(overhead_key), fixed = cache.find(fixed_key);
  if (overhead == cache.end() || fixed == cache.end() || !(t.run_ms > 0)) return std::nullopt;
  double cached = overhead->second * executed + fixed->second;
  for (const auto& [key, ids] : by_key) {
    auto it = cache.find(ctx_prefix + key);
    if (it == cache.end()) return std::nullopt;
    cached += it->second * ids.size();
  }
  if (!(cached > 0)) return std::nullopt;
  return cached / t.run_ms;
}

void RequireNoOpaque(const Graph& g, const char* what) {
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    RLFLOW_CHECK(!g.node(id).opaque(), "Calibrate: the ", what, " has opaque nodes (cut them first)");
}

}  // namespace

CalibrationReport MeasuredCostModel::Calibrate(const Graph& g, int runs, int time_base_runs, const Graph* reference) {
  CalibrationReport report;
  RequireNoOpaque(g, "graph");
  const int executed = g.num_nodes();
  const std::map<std::string, std::vector<NodeId>> by_key = TimedKeys(g);
  for (const auto& entry : by_key) report.nodes += static_cast<int>(entry.second.size());
  std::lock_guard<std::mutex> lock(mu_);
  if (fingerprint_.empty()) fingerprint_ = backend_->fingerprint();
  const std::string ctx_prefix = ContextKey("|ctx|"), spread_prefix = ContextKey("|spread|");
  const std::string overhead_key = ContextKey("|overhead"), fixed_key = ContextKey("|fixed");
  report.keys = static_cast<int>(by_key.size());
  bool missing = !cache_.count(overhead_key) || !cache_.count(fixed_key);
  // Where the device fuses nodes, which ones it fused is part of the
  // calibration (timings from before it was recorded are timed again).
  missing |= backend_->context_sensitive() && !cache_.count(ContextKey("|fusions"));
  for (const auto& [key, ids] : by_key) missing |= !cache_.count(ctx_prefix + key);
  // All cached: nothing is timed, unless the caller asks for the time base
  // of the cached timings (then the graph runs, and nothing cached changes).
  if ((missing || time_base_runs > 0) && executed > 0) {
    InContextTimes t = backend_->TimeNodesInContext(g, missing ? runs : time_base_runs, options_);
    report.run_ms = t.run_ms;
    // One time base: the machine may run faster or slower now than when the
    // cached keys were timed (a shared VM drifts by 1.5x). New keys are
    // scaled by the ratio cached / now over the keys timed both times
    // (TimeBase), so that every cached timing compares with every other.
    // Where the cache keeps this model's own timings, the whole run sets
    // it (RunTimeBase): this graph's when all of it is cached, else the
    // reference's (the original's) when that is.
    std::map<std::string, double> now;
    std::optional<double> base = TimeBase(by_key, t, cache_, ctx_prefix, &now);
    const bool per_model = !context_.empty();
    if (per_model && !missing) base = RunTimeBase(by_key, executed, t, cache_, ctx_prefix, overhead_key, fixed_key);
    if ((!base || per_model) && missing && reference != nullptr && reference->num_nodes() > 0) {
      RequireNoOpaque(*reference, "reference graph");
      const std::map<std::string, std::vector<NodeId>> ref_keys = TimedKeys(*reference);
      bool all_cached = true;
      for (const auto& entry : ref_keys) all_cached &= cache_.count(ctx_prefix + entry.first) > 0;
      if (all_cached) {
        InContextTimes rt = backend_->TimeNodesInContext(*reference, std::max(runs, 3), options_);
        std::optional<double> ref_base =
            per_model ? RunTimeBase(ref_keys, reference->num_nodes(), rt, cache_, ctx_prefix, overhead_key, fixed_key)
                      : TimeBase(ref_keys, rt, cache_, ctx_prefix);
        if (ref_base) base = ref_base;
        report.time_base_from_reference = ref_base.has_value();
      }
    }
    report.time_base_known = base.has_value();
    report.time_base = base.value_or(1.0);
    if (missing) RecordInContext(g, by_key, now, t, executed, report);
  }
  // Isolated times of the same keys, for the in-context / isolated ratios.
  for (const auto& [key, ids] : by_key) {
    if (stop_ && stop_()) break;
    IsolatedTime(g, ids.front(), key);
  }
  Derive();
  fast_.clear();
  fast_spread_.clear();
  fused_.clear();
  for (const auto& [key, ids] : by_key) report.fused_keys += cache_.count(ContextKey("|fused|") + key) ? 1 : 0;
  report.overhead_ms = overhead_ms_;
  report.fixed_ms = fixed_ms_;
  std::map<std::string, std::vector<double>> spreads;
  for (const auto& [key, ids] : by_key) {
    const std::string op = QualifiedOp(g.node(ids.front()).domain, g.node(ids.front()).op);
    CalibrationReport::PerOp& p = report.per_op[op];
    p.nodes += static_cast<int>(ids.size());
    p.ms += cache_.at(ctx_prefix + key) * ids.size();
    auto sp = cache_.find(spread_prefix + key);
    if (sp != cache_.end()) spreads[op].push_back(sp->second);
    auto f = factor_.find(op);
    p.factor = f != factor_.end() ? f->second : default_factor_;
  }
  for (auto& [op, v] : spreads) report.per_op[op].spread = Median(v);
  return report;
}

double MeasuredCostModel::RunCost(const Graph& g) {
  if (backend_->folds_constants()) return GraphCost(g);
  // Every node runs: GraphCost without leaving the weight-only ones out.
  CostingScope scope(g);
  double total = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id) total += NodeMs(g, id);
  return total + RunFixedMs();
}

double MeasuredCostModel::RunFixedMs() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fingerprint_.empty()) fingerprint_ = backend_->fingerprint();
  if (!derived_) Derive();
  return fixed_ms_;
}

double MeasuredCostModel::NodeNoiseMs(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.opaque()) return 0;
  const uint64_t fast_key = NodeKeyHash(g, id);
  double ms = NodeTimeOf(g, id, fast_key);
  double spread = NodeSpreadOf(g, id, fast_key);
  if (spread < 0) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = op_spread_.find(QualifiedOp(n.domain, n.op));
    spread = it != op_spread_.end() ? it->second : 0.05;
  }
  return std::max(spread, 0.01) * ms;
}

int ResolvePairs(int pairs, double side_ms, int min_pairs) {
  if (!(side_ms > 0)) return pairs;
  const int within = static_cast<int>(std::ceil(kResolveBudgetMs / (2 * side_ms)));
  return std::max(std::min(pairs, std::max(within, 20)), min_pairs);
}

double MeasuredCostModel::ResolveGain(const Graph& before, const Graph& after, const std::string& key,
                                      double estimate) {
  const std::map<std::string, std::vector<NodeId>> before_keys = TimedKeys(before), after_keys = TimedKeys(after);
  std::lock_guard<std::mutex> lock(mu_);
  if (fingerprint_.empty()) fingerprint_ = backend_->fingerprint();
  const std::string k = fingerprint_ + "|ab|" + key;
  auto it = cache_.find(k);
  double outcome;
  if (it != cache_.end()) {
    ++hits_;
    outcome = it->second;
  } else {
    TimingOptions o = options_;
    o.min_sample_ms = std::max(o.min_sample_ms, 1.0);  // small subgraphs: repeated to >= 1 ms per sample
    // Where the two sides run long (a conv at batch 16: 60 pairs of 40 ms
    // runs, 5 s, and such timings were most of a search's time), fewer
    // pairs: their time from what the cache holds of their nodes.
    const auto cached_ms = [&](const std::map<std::string, std::vector<NodeId>>& keys) {
      double ms = 0;
      for (const auto& [key, ids] : keys) {
        auto c = cache_.find(ContextKey("|ctx|") + key);
        if (c == cache_.end()) c = cache_.find(fingerprint_ + "|" + key);
        if (c != cache_.end()) ms += c->second * ids.size();
      }
      return ms;
    };
    const int pairs = ResolvePairs(resolve_pairs_, std::max(cached_ms(before_keys), cached_ms(after_keys)),
                                   backend_->min_paired_pairs());
    PairedTimes t = backend_->TimePaired(before, after, pairs, o);
    // One compute thread: the thread's CPU time is free of the machine's
    // other load and steal time, the more precise clock.
    bool cpu = t.cpu_clock == "thread" && t.cpu_a.size() == t.wall_a.size();
    RatioInterval r = cpu ? PairedRatio(t.cpu_a, t.cpu_b) : PairedRatio(t.wall_a, t.wall_b);
    const std::vector<double>& a = cpu ? t.cpu_a : t.wall_a;
    const std::vector<double>& b = cpu ? t.cpu_b : t.wall_b;
    outcome = r.Above1() ? 1.0 : r.Below1() ? std::min(-1e-9, Median(a) - Median(b)) : 0.0;
    cache_.emplace(k, outcome);
    ++resolved_;
  }
  return outcome == 1.0 ? estimate : outcome;
}

void MeasuredCostModel::Derive() {
  // From the cache alone (every key timed both in context and alone, from
  // any graph), so that the same cache always gives the same costs.
  const std::string ctx_prefix = ContextKey("|ctx|"), spread_prefix = ContextKey("|spread|");
  std::map<std::string, std::vector<double>> ratios, spreads;
  std::vector<double> all;
  ratio_points_.clear();
  auto op_of = [](const std::string& key) { return key.substr(0, key.find('#')); };
  for (auto it = cache_.lower_bound(ctx_prefix);
       it != cache_.end() && it->first.compare(0, ctx_prefix.size(), ctx_prefix) == 0; ++it) {
    std::string key = it->first.substr(ctx_prefix.size());
    // A key run inside a neighbour's kernel took no time of its own: no
    // ratio for its op type.
    if (cache_.count(ContextKey("|fused|") + key)) continue;
    auto iso = cache_.find(fingerprint_ + "|" + key);
    if (iso == cache_.end() || !(iso->second > 0)) continue;
    ratios[op_of(key)].push_back(it->second / iso->second);
    all.push_back(it->second / iso->second);
    ratio_points_[op_of(key)].push_back({iso->second, it->second / iso->second});
  }
  for (auto& [op, p] : ratio_points_) std::sort(p.begin(), p.end());
  for (auto it = cache_.lower_bound(spread_prefix);
       it != cache_.end() && it->first.compare(0, spread_prefix.size(), spread_prefix) == 0; ++it)
    spreads[op_of(it->first.substr(spread_prefix.size()))].push_back(it->second);
  factor_.clear();
  for (const auto& [op, v] : ratios) factor_[op] = Median(v);
  default_factor_ = all.empty() ? 1.0 : Median(all);
  op_spread_.clear();
  for (const auto& [op, v] : spreads) op_spread_[op] = Median(v);
  auto oh = cache_.find(ContextKey("|overhead"));
  overhead_ms_ = oh == cache_.end() ? 0.0 : oh->second;
  auto fixed = cache_.find(ContextKey("|fixed"));
  fixed_ms_ = fixed == cache_.end() ? 0.0 : fixed->second;
  derived_ = true;
}

void MeasuredCostModel::SetContext(const Graph& model) {
  std::string context;
  if (backend_->context_sensitive()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "@%016llx", static_cast<unsigned long long>(model.StructuralHash()));
    context = buf;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (context == context_) return;
  context_ = context;
  derived_ = false;
  fast_.clear();
  fast_spread_.clear();
  fused_.clear();
}

static const char kCacheMagic[] = "rlflow-timing-cache 1";

void MeasuredCostModel::LoadCache(const std::string& path) {
  if (!FileExists(path)) return;
  LoadCacheText(ReadFile(path, "timing cache"), path);
}

namespace {

// The entries of a timing cache's text; errors name `path` and the line.
std::map<std::string, double> ParseCacheText(const std::string& text, const std::string& path) {
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
    // Only the outcomes of pairs timed against each other may be negative.
    bool signed_entry = tab != std::string::npos && line.find("|ab|", tab) != std::string::npos;
    if (tab == std::string::npos || end != line.c_str() + tab || !std::isfinite(ms) || (!signed_entry && ms < 0) ||
        tab + 1 >= line.size())
      Fail("timing cache ", path, " line ", lineno, " is malformed (expected '<ms>\\t<key>')");
    loaded[line.substr(tab + 1)] = ms;
  }
  // An empty file is an empty cache (`touch cache.txt`, /dev/null): a cache
  // this code wrote always has its first line, since saves are atomic.
  return loaded;
}

// An advisory lock on "<path>.lock" (flock), held while it lives; none if the
// lock file cannot be opened (then saves are as before: the last one wins),
// or for a cache that is not a regular file (--timing_cache=/dev/null: no
// /dev/null.lock).
class CacheLock {
 public:
  explicit CacheLock(const std::string& path) {
    if (IsSpecialFile(path)) return;
    fd_ = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

void MeasuredCostModel::LoadCacheText(const std::string& text, const std::string& path) {
  std::map<std::string, double> loaded = ParseCacheText(text, path);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [k, v] : loaded) cache_.emplace(k, v);
  derived_ = false;
  fast_.clear();
  fast_spread_.clear();
  fused_.clear();
}

void MeasuredCostModel::SaveCache(const std::string& path) const {
  // Runs that share a cache file (models optimised in parallel with the
  // default cache) may have saved entries since this one loaded it: those
  // are kept, and this run's entries win where both have a key. The read,
  // the merge and the write hold the file's lock, so that two saves do not
  // interleave. A file that no longer parses is replaced.
  CacheLock file_lock(path);
  std::map<std::string, double> merged;
  if (FileExists(path) && !IsSpecialFile(path)) {
    try {
      merged = ParseCacheText(ReadFile(path, "timing cache"), path);
    } catch (const Error&) {
      merged.clear();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, v] : cache_) merged[k] = v;
  }
  std::string out = std::string(kCacheMagic) + "\n";
  char buf[64];
  for (const auto& [k, v] : merged) {
    std::snprintf(buf, sizeof buf, "%.17g\t", v);
    out += buf + k + "\n";
  }
  WriteFileAtomically(path, out);
}

}  // namespace rlflow

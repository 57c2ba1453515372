#include "agents/env.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "core/error.h"
#include "core/op_registry.h"
#include "core/passes/fold_constants.h"
#include "core/passes/interface.h"
#include "core/summary.h"

namespace rlflow::agents {
namespace {

float Log1p(double x) { return static_cast<float>(std::log1p(std::max(0.0, x))); }

const std::map<std::string, int>& OpIndex() {
  static const auto* index = [] {
    auto* m = new std::map<std::string, int>();
    const std::vector<std::string>& v = OpVocabulary();
    for (size_t i = 0; i < v.size(); ++i) (*m)[v[i]] = static_cast<int>(i);
    return m;
  }();
  return *index;
}

}  // namespace

const char* RewardKindName(RewardKind kind) {
  switch (kind) {
    case RewardKind::kDelta: return "delta";
    case RewardKind::kCombined: return "combined";
    case RewardKind::kNormalised: return "normalised";
    case RewardKind::kEndToEnd: return "end_to_end";
  }
  return "?";
}

RewardKind ParseRewardKind(const std::string& name) {
  for (RewardKind k : {RewardKind::kDelta, RewardKind::kCombined, RewardKind::kNormalised, RewardKind::kEndToEnd})
    if (name == RewardKindName(k)) return k;
  Fail("unknown reward '", name, "' (available: delta, combined, normalised, end_to_end)");
}

const std::vector<std::string>& OpVocabulary() {
  // Frozen: the registry's operators when the checked-in agents
  // (agents/zoo_agent.pt, agents/pass_agent.pt) were trained. Their networks'
  // input layers have this size, so an operator added to the registry later
  // is featurised as "opaque" until the vocabulary is extended and the agents
  // are retrained (env_test checks every entry is still a registry op).
  static const auto* vocab = new std::vector<std::string>{"Abs",
                                                          "Add",
                                                          "AveragePool",
                                                          "BatchNormalization",
                                                          "Cast",
                                                          "Ceil",
                                                          "Clip",
                                                          "Concat",
                                                          "Constant",
                                                          "ConstantOfShape",
                                                          "Conv",
                                                          "Div",
                                                          "Dropout",
                                                          "Equal",
                                                          "Erf",
                                                          "Exp",
                                                          "Expand",
                                                          "Flatten",
                                                          "Floor",
                                                          "Gather",
                                                          "Gemm",
                                                          "GlobalAveragePool",
                                                          "Greater",
                                                          "Identity",
                                                          "LayerNormalization",
                                                          "Less",
                                                          "Log",
                                                          "MatMul",
                                                          "Max",
                                                          "MaxPool",
                                                          "Min",
                                                          "Mul",
                                                          "Neg",
                                                          "Pad",
                                                          "Pow",
                                                          "Range",
                                                          "Reciprocal",
                                                          "ReduceL1",
                                                          "ReduceL2",
                                                          "ReduceLogSum",
                                                          "ReduceLogSumExp",
                                                          "ReduceMax",
                                                          "ReduceMean",
                                                          "ReduceMin",
                                                          "ReduceProd",
                                                          "ReduceSum",
                                                          "ReduceSumSquare",
                                                          "Relu",
                                                          "Reshape",
                                                          "Shape",
                                                          "Sigmoid",
                                                          "Slice",
                                                          "Softmax",
                                                          "Split",
                                                          "Sqrt",
                                                          "Squeeze",
                                                          "Sub",
                                                          "Tanh",
                                                          "Transpose",
                                                          "Unsqueeze",
                                                          "Where",
                                                          "opaque"};
  return *vocab;
}

int NodeFeatureSize() { return static_cast<int>(OpVocabulary().size()) + kNodeScalarFeatures; }

RewriteEnv::RewriteEnv(const Matcher* matcher, CostModel* cost, EnvOptions options, TimingBackend* backend)
    : matcher_(matcher), cost_(cost), o_(options), backend_(backend) {
  if (matcher_ == nullptr) Fail("environment: no rules (matcher) given");
  if (cost_ == nullptr) Fail("environment: no cost model given");
  if (o_.max_candidates < 1) Fail("environment: max_candidates must be >= 1, got ", o_.max_candidates);
  if (o_.max_locations < 1) Fail("environment: max_locations must be >= 1, got ", o_.max_locations);
  if (o_.horizon < 1) Fail("environment: horizon must be >= 1, got ", o_.horizon);
  if (!(o_.max_growth >= 1.0)) Fail("environment: max_growth must be >= 1, got ", o_.max_growth);
  if (o_.reward == RewardKind::kEndToEnd) {
    if (backend_ == nullptr) Fail("environment: the end_to_end reward needs a timing backend");
    if (o_.measure_every < 1) Fail("environment: measure_every must be >= 1, got ", o_.measure_every);
    if (o_.measure_samples < 1) Fail("environment: measure_samples must be >= 1, got ", o_.measure_samples);
  }
}

const Observation& RewriteEnv::Reset(const Graph& graph) {
  EngineOptions e;
  e.matcher = matcher_;
  e.cost = cost_;
  e.max_nodes = static_cast<int64_t>(o_.max_growth * graph.num_nodes());
  e.runner = o_.runner;
  engine_ = std::make_shared<RewriteEngine>(std::move(e));
  state_ = engine_->Start(graph);
  initial_cost_ = state_.cost();
  // Memory access is needed by the combined reward only.
  initial_ma_ = memory_access_ = o_.reward == RewardKind::kCombined ? MemoryAccess(graph) : 0.0;
  steps_ = 0;
  last_measured_step_ = 0;
  done_ = false;
  if (o_.reward == RewardKind::kEndToEnd) initial_ms_ = last_ms_ = Measure(graph);
  Observe(state_, &obs_, &costed_);
  return obs_;
}

double RewriteEnv::MemoryAccess(const Graph& g) const {
  std::vector<char> weight_only = WeightOnlyNodes(g);
  double bytes = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (!weight_only[id] && !g.node(id).opaque()) bytes += StaticNodeCost(g, id).bytes;
  return bytes;
}

double RewriteEnv::Measure(const Graph& g) {
  ++counters_->measurements;
  Graph folded = g;
  FoldOptions fold;
  fold.max_elements = std::numeric_limits<int64_t>::max();
  InferShapesAndFold(folded, fold);
  TimingOptions t;
  t.seed = o_.seed;
  t.samples = o_.measure_samples;
  return backend_->TimeGraph(CutAtOpaque(folded), t);
}

double RewriteEnv::Reward(double before_cost, double after_cost, double before_ma, double after_ma) {
  switch (o_.reward) {
    case RewardKind::kDelta: return before_cost - after_cost;
    case RewardKind::kNormalised: return 100.0 * (before_cost - after_cost) / initial_cost_;
    case RewardKind::kCombined:
      return 100.0 * (o_.alpha * (before_cost - after_cost) / initial_cost_ +
                      o_.beta * (initial_ma_ > 0 ? (before_ma - after_ma) / initial_ma_ : 0.0));
    case RewardKind::kEndToEnd: {
      if (!done_ && steps_ - last_measured_step_ < o_.measure_every) return 0;
      double now = Measure(state_.graph());
      double r = 100.0 * (last_ms_ - now) / initial_ms_;
      last_ms_ = now;
      last_measured_step_ = steps_;
      return r;
    }
  }
  return 0;
}

namespace {
std::atomic<int64_t> process_steps{0};
}  // namespace

int64_t RewriteEnv::ProcessSteps() { return process_steps.load(); }

StepResult RewriteEnv::Step(int action) {
  ++counters_->steps;
  ++process_steps;
  StepResult r;
  r.observation = &obs_;
  r.info.cost_ms = state_.shared_graph() ? state_.cost() : 0.0;
  r.info.measured_ms = last_ms_;
  if (done_) {
    r.done = true;
    r.reward = o_.invalid_penalty;
    r.info.valid = false;
    r.info.message = state_.shared_graph() ? "the episode is over: call Reset" : "no episode: call Reset";
    return r;
  }
  const int n = static_cast<int>(costed_.size());
  ++steps_;
  const double before_cost = state_.cost(), before_ma = memory_access_;
  if (action == n) {
    done_ = true;
    r.info.message = "stop";
    r.info.stop = StopReason::kStopAction;
  } else if (action < 0 || action > n) {
    r.info.valid = false;
    r.info.message = "action " + std::to_string(action) + " is out of range (0.." + std::to_string(n) + ", " +
                     std::to_string(n) + " = stop)";
  } else {
    // Never throws: the next state and its observation are built aside and
    // taken only when all of it succeeded.
    try {
      std::optional<RewriteState> next = state_.Apply(costed_[action]);
      if (!next) {
        r.info.valid = false;
        r.info.message = "rewrite " + engine_->MatchName(costed_[action].match) + " gives no valid graph (a cycle)";
      } else {
        Observation obs;
        std::vector<Candidate> costed;
        Observe(*next, &obs, &costed);
        const double ma = o_.reward == RewardKind::kCombined ? MemoryAccess(next->graph()) : 0.0;
        r.info.rule = engine_->MatchName(costed_[action].match);
        r.info.message = "applied " + r.info.rule;
        state_ = std::move(*next);
        obs_ = std::move(obs);
        costed_ = std::move(costed);
        memory_access_ = ma;
      }
    } catch (const std::exception& e) {
      r.info.valid = false;
      r.info.message = "rewrite " + engine_->MatchName(costed_[action].match) + " failed: " + e.what();
    }
  }
  if (r.info.valid && !done_ && obs_.candidates.empty()) {
    done_ = true;  // nothing left to apply
    r.info.stop = StopReason::kNoCandidates;
  }
  if (!done_ && steps_ >= o_.horizon) {
    done_ = true;
    r.info.stop = StopReason::kHorizon;
  }
  if (!done_ && o_.runner != nullptr) {
    if (const StopReason why = o_.runner->Check(); why != StopReason::kNone) {
      done_ = true;
      r.info.stop = why;
    }
  }
  obs_.global_features[1] = static_cast<float>(steps_) / static_cast<float>(o_.horizon);
  if (r.info.valid) {
    try {
      r.reward = Reward(before_cost, state_.cost(), before_ma, memory_access_);
    } catch (const std::exception& e) {
      r.reward = 0;
      r.info.message += std::string("; no end-to-end measurement: ") + e.what();
    }
  } else {
    r.reward = o_.invalid_penalty;  // the state is unchanged; the step counts towards the horizon
  }
  r.done = done_;
  r.info.cost_ms = state_.cost();
  r.info.measured_ms = last_ms_;
  return r;
}

int RewriteEnv::FlatAction(int rule_action, int location) const {
  if (rule_action < 0 || rule_action >= static_cast<int>(obs_.locations.size())) return -1;
  const std::vector<int32_t>& l = obs_.locations[rule_action];
  if (location < 0 || location >= static_cast<int>(l.size())) return -1;
  return l[location];
}

void RewriteEnv::Observe(const RewriteState& state, Observation* out, std::vector<Candidate>* costed) const {
  const Graph& g = state.graph();
  Observation& o = *out;
  const int vocab = static_cast<int>(OpVocabulary().size());
  const int nf = NodeFeatureSize();
  const std::map<std::string, int>& index = OpIndex();
  std::vector<char> weight_only = WeightOnlyNodes(g);
  std::vector<char> is_output(g.num_values(), 0);
  for (ValueId v : g.outputs()) is_output[v] = 1;
  // Nodes: the ones that run (weight-only subgraphs are folded before export).
  std::vector<int> row(g.num_nodes(), -1);
  o.num_nodes = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (!weight_only[id]) row[id] = o.num_nodes++;
  o.node_features.assign(static_cast<size_t>(o.num_nodes) * nf, 0.0f);
  o.node_op.assign(o.num_nodes, 0);
  o.edge_src.clear();
  o.edge_dst.clear();
  o.edge_features.clear();
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    if (row[id] < 0) continue;
    const Node& n = g.node(id);
    int op = vocab - 1;  // opaque
    if (!n.opaque()) {
      auto it = index.find(n.op);
      if (it != index.end() && n.domain.empty()) op = it->second;
    }
    float* f = &o.node_features[static_cast<size_t>(row[id]) * nf];
    o.node_op[row[id]] = op;
    f[op] = 1.0f;
    f[vocab + 0] = n.opaque() ? 0.0f : Log1p(cost_->NodeMs(g, id) * 1e3);
    f[vocab + 1] = n.opaque() ? 0.0f : Log1p(NodeFlops(g, id) / 1e6);
    int weights = 0;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      const Value& v = g.value(in);
      if (v.producer == kNoNode || weight_only[v.producer]) {
        if (g.IsConstant(in) || v.producer != kNoNode) ++weights;  // graph inputs are not weights
        continue;
      }
      // An edge from the producing node, with the tensor's shape.
      o.edge_src.push_back(row[v.producer]);
      o.edge_dst.push_back(row[id]);
      const TensorType& t = v.type;
      float e[kEdgeFeatureSize] = {0};
      e[0] = static_cast<float>(t.shape.size()) / 4.0f;
      e[1] = Log1p(static_cast<double>(std::max<int64_t>(t.NumElements(), 0)));
      for (size_t d = 0; d < t.shape.size() && d < 4; ++d)
        e[2 + d] = Log1p(static_cast<double>(std::max<int64_t>(t.shape[t.shape.size() - 1 - d], 0)));
      e[6] = IsFloatingPoint(t.dtype) ? 1.0f : 0.0f;
      o.edge_features.insert(o.edge_features.end(), e, e + kEdgeFeatureSize);
    }
    f[vocab + 2] = static_cast<float>(weights);
    bool out = false;
    for (ValueId v : n.outputs) out = out || is_output[v];
    f[vocab + 3] = out ? 1.0f : 0.0f;
  }
  o.num_edges = static_cast<int>(o.edge_src.size());
  const double cost = state.cost();
  o.global_features = {static_cast<float>(cost / initial_cost_), static_cast<float>(steps_) / o_.horizon,
                       Log1p(initial_cost_)};

  // Candidates: the engine's, the cheapest max_candidates estimates kept,
  // in the engine's (match) order.
  std::vector<Candidate> all = state.Candidates();
  o.candidates_total = static_cast<int>(all.size());
  std::vector<size_t> keep(all.size());
  std::iota(keep.begin(), keep.end(), 0);
  if (static_cast<int>(all.size()) > o_.max_candidates) {
    std::stable_sort(keep.begin(), keep.end(), [&](size_t a, size_t b) { return all[a].cost < all[b].cost; });
    keep.resize(o_.max_candidates);
    std::sort(keep.begin(), keep.end());
  }
  costed->clear();
  o.candidates.clear();
  const int rule_actions = 2 * static_cast<int>(matcher_->rules().size());
  o.rule_mask.assign(rule_actions, 0);
  o.locations.assign(rule_actions, {});
  for (size_t k : keep) {
    Candidate& c = all[k];
    EnvCandidate ec;
    ec.rule = c.match.rule;
    ec.reverse = c.match.reverse;
    ec.rule_action = 2 * c.match.rule + (c.match.reverse ? 1 : 0);
    for (NodeId id : c.match.nodes)
      if (row[id] >= 0) ec.nodes.push_back(row[id]);
    ec.estimated_gain = cost - c.cost;
    std::vector<int32_t>& loc = o.locations[ec.rule_action];
    if (static_cast<int>(loc.size()) < o_.max_locations) {
      loc.push_back(static_cast<int32_t>(o.candidates.size()));
      o.rule_mask[ec.rule_action] = 1;
    }
    o.candidates.push_back(std::move(ec));
    costed->push_back(std::move(c));
  }
}

}  // namespace rlflow::agents

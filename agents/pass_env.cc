#include "agents/pass_env.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "agents/env.h"
#include "core/error.h"
#include "core/summary.h"

namespace rlflow::agents {

const char* PassRewardName(PassReward kind) { return kind == PassReward::kOpCount ? "op_count" : "runtime"; }

PassReward ParsePassReward(const std::string& name) {
  if (name == "op_count") return PassReward::kOpCount;
  if (name == "runtime") return PassReward::kRuntime;
  Fail("unknown pass-ordering reward '", name, "' (op_count or runtime)");
}

GraphStats ComputeGraphStats(const Graph& g, CostModel* cost) {
  static const std::map<std::string, int>* index = [] {
    auto* m = new std::map<std::string, int>();
    const std::vector<std::string>& v = OpVocabulary();
    for (size_t i = 0; i < v.size(); ++i) (*m)[v[i]] = static_cast<int>(i);
    return m;
  }();
  GraphStats s;
  s.op_counts.assign(OpVocabulary().size(), 0.0f);
  const int opaque = static_cast<int>(OpVocabulary().size()) - 1;
  double activation_bytes = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    auto it = index->find(n.op);
    s.op_counts[n.opaque() || !n.domain.empty() || it == index->end() ? opaque : it->second] += 1;
    s.flops += NodeFlops(g, id);
    for (ValueId v : n.outputs) {
      const TensorType& t = g.value(v).type;
      int64_t e = t.IsStatic() ? t.NumElements() : 0;
      activation_bytes += static_cast<double>(std::max<int64_t>(e, 0)) * static_cast<double>(DTypeSize(t.dtype));
    }
  }
  s.nodes = g.num_nodes();
  s.parameters = static_cast<double>(g.NumParameters());
  double weight_bytes = 0;
  for (ValueId v : g.initializers()) weight_bytes += static_cast<double>(g.value(v).initializer->size_bytes());
  s.bytes = activation_bytes + weight_bytes;
  s.cost = cost != nullptr ? cost->GraphCost(g) : 0.0;
  return s;
}

PassEnv::PassEnv(const PassRegistry* registry, CostModel* cost, PassEnvOptions options)
    : registry_(registry), cost_(cost), o_(std::move(options)) {
  if (registry_ == nullptr) Fail("pass environment: no pass registry");
  if (cost_ == nullptr) Fail("pass environment: no cost model");
  if (o_.horizon < 1) Fail("pass environment: the horizon must be >= 1, got ", o_.horizon);
  if (!(o_.gamma > 0 && o_.gamma <= 1)) Fail("pass environment: gamma must be in (0, 1]");
  names_ = o_.passes.empty() ? registry_->Names() : o_.passes;
  for (const std::string& n : names_)
    if (!registry_->Has(n)) Fail("pass environment: unknown pass '", n, "'");
}

int PassEnv::observation_size() const {
  return static_cast<int>(OpVocabulary().size()) + kPassScalarFeatures + static_cast<int>(names_.size());
}

double PassEnv::Potential(const GraphStats& s) const {
  const double f = initial_.flops > 0 ? s.flops / initial_.flops : 0.0;
  const double b = initial_.bytes > 0 ? s.bytes / initial_.bytes : 0.0;
  return -100.0 * 0.5 * (f + b);
}

const PassObservation& PassEnv::Reset(const Graph& graph) {
  graph_ = graph;
  initial_ = stats_ = ComputeGraphStats(graph_, cost_);
  stale_.assign(names_.size(), 0);
  applied_.clear();
  steps_ = 0;
  done_ = false;
  Observe();
  return obs_;
}

void PassEnv::Observe() {
  auto ratio = [](double a, double b) { return static_cast<float>(b > 0 ? a / b : 1.0); };
  auto log1p = [](double x) { return static_cast<float>(std::log1p(std::max(x, 0.0))); };
  obs_.features.clear();
  for (float c : stats_.op_counts) obs_.features.push_back(log1p(c));
  obs_.features.push_back(log1p(stats_.nodes));
  obs_.features.push_back(log1p(stats_.flops / 1e6));
  obs_.features.push_back(log1p(stats_.parameters / 1e3));
  obs_.features.push_back(log1p(stats_.bytes / 1e6));
  obs_.features.push_back(ratio(stats_.nodes, initial_.nodes));
  obs_.features.push_back(ratio(stats_.flops, initial_.flops));
  obs_.features.push_back(ratio(stats_.bytes, initial_.bytes));
  obs_.features.push_back(ratio(stats_.cost, initial_.cost));
  obs_.features.push_back(static_cast<float>(steps_) / static_cast<float>(o_.horizon));
  for (uint8_t s : stale_) obs_.features.push_back(s ? 1.0f : 0.0f);
  obs_.mask.assign(names_.size() + 1, 1);
  for (size_t k = 0; k < names_.size(); ++k) obs_.mask[k] = stale_[k] ? 0 : 1;
}

PassStepResult PassEnv::Step(int action) {
  PassStepResult r;
  r.observation = &obs_;
  if (done_) {
    r.valid = false;
    r.done = true;
    r.reward = o_.invalid_penalty;
    r.message = "the episode is over: call Reset";
    return r;
  }
  const int stop = static_cast<int>(names_.size());
  if (action < 0 || action > stop || !obs_.mask[action]) {
    r.valid = false;
    r.reward = o_.invalid_penalty;
    r.message = action < 0 || action > stop
                    ? "action " + std::to_string(action) + " is out of range [0, " + std::to_string(stop) + "]"
                    : "pass " + names_[action] + " already ran on this graph and changed nothing";
    ++steps_;
    if (steps_ >= o_.horizon) done_ = r.done = true;
    Observe();
    return r;
  }
  const GraphStats before = stats_;
  ++steps_;
  if (action == stop) {
    r.message = "stop";
    done_ = r.done = true;
  } else {
    Graph next = graph_;
    bool changed = false;
    try {
      changed = registry_->Make(names_[action])->Run(next);
    } catch (const std::exception& e) {
      r.valid = false;
      r.reward = o_.invalid_penalty;
      r.message = "pass " + names_[action] + " failed: " + e.what();
      stale_[action] = 1;
      if (steps_ >= o_.horizon) done_ = r.done = true;
      Observe();
      return r;
    }
    r.message = "pass " + names_[action] + (changed ? ": changed the graph" : ": no change");
    r.changed = changed;
    if (changed) {
      graph_ = std::move(next);
      stats_ = ComputeGraphStats(graph_, cost_);
      applied_.push_back(names_[action]);
      stale_.assign(names_.size(), 0);
    } else {
      stale_[action] = 1;
    }
    if (steps_ >= o_.horizon) done_ = r.done = true;
  }
  if (o_.reward == PassReward::kOpCount)
    r.reward = initial_.nodes > 0 ? 100.0 * (before.nodes - stats_.nodes) / initial_.nodes : 0.0;
  else
    r.reward = initial_.cost > 0 ? 100.0 * (before.cost - stats_.cost) / initial_.cost : 0.0;
  if (o_.shaping) r.reward += o_.gamma * Potential(stats_) - Potential(before);
  if (!done_ && o_.runner != nullptr && o_.runner->ShouldStop()) done_ = r.done = true;
  Observe();
  return r;
}

}  // namespace rlflow::agents

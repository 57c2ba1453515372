#pragma once
// The pass-ordering environment (shared/seeds 003, XLA Gym, on rlflow's IR):
// an action runs one whole graph pass (core/passes and the rule-family
// passes of search/rule_passes.h) or stops; the observation is the
// graph's operation counts per op type plus FLOPs, parameters, node count
// and bytes; the reward is the operation-count reduction (as the seed) or
// the cost-model runtime reduction, optionally with potential-based shaping
// F = gamma Phi(s') - Phi(s), Phi = -100 (FLOPs / FLOPs_0 + bytes / bytes_0) / 2
// (the seed's best variant), which leaves the optimal policy unchanged
// (Ng et al. 1999): an episode's discounted shaped return differs from the
// unshaped one by gamma^T Phi(s_T) - Phi(s_0) only.
//
// Same API as the rewrite environment (agents/env.h): Reset, Step (never
// throws; an invalid action gets `invalid_penalty` and changes nothing),
// Fork, observation(). A pass that just ran without changing the graph is
// masked until some other pass changes it (it would change nothing again).
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/passes/pass.h"
#include "runtime/cost_model.h"

namespace rlflow::agents {

enum class PassReward {
  kOpCount,  // 100 (N_{t-1} - N_t) / N_0, N = nodes (the seed's operation-count reduction)
  kRuntime,  // 100 (C_{t-1} - C_t) / C_0, C = the cost model's estimate
};
const char* PassRewardName(PassReward kind);
PassReward ParsePassReward(const std::string& name);  // op_count, runtime; throws rlflow::Error

struct PassEnvOptions {
  // The actions (pass names, all registered); empty: every pass of the registry.
  std::vector<std::string> passes;
  int horizon = 30;
  double invalid_penalty = -100;
  PassReward reward = PassReward::kOpCount;
  bool shaping = false;
  double gamma = 0.99;  // the shaping's discount (use PPO's)
  // The run's owner of limits (optional): once it says stop, the episode ends.
  Runner* runner = nullptr;
};

// Feature layout: log1p op counts (OpVocabulary() order, then opaque), then
// kPassScalarFeatures scalars, then one flag per pass (masked: known to
// change nothing now).
constexpr int kPassScalarFeatures =
    9;  // log1p nodes, MFLOPs, kparams, MB; their ratios to the start (and cost's); step / horizon

struct PassObservation {
  std::vector<float> features;
  std::vector<uint8_t> mask;  // per action (passes, then stop)
  int stop_action() const { return static_cast<int>(mask.size()) - 1; }
};

struct PassStepResult {
  const PassObservation* observation = nullptr;  // valid until the next Step / Reset
  double reward = 0;
  bool done = false;
  bool valid = true;
  bool changed = false;  // the pass changed the graph
  std::string message;   // the pass run, or why the action was invalid
};

// The graph quantities the observation and the rewards read.
struct GraphStats {
  double nodes = 0, flops = 0, parameters = 0, bytes = 0, cost = 0;
  std::vector<float> op_counts;  // OpVocabulary() order, then opaque
};
GraphStats ComputeGraphStats(const Graph& g, CostModel* cost);

class PassEnv {
 public:
  // `registry` and `cost` must outlive the environment and its forks.
  // Throws rlflow::Error for an unknown pass name or bad options.
  PassEnv(const PassRegistry* registry, CostModel* cost, PassEnvOptions options = {});

  const PassObservation& Reset(const Graph& graph);
  // Runs pass `action` (0 .. passes - 1) or stops (== passes).
  PassStepResult Step(int action);
  PassEnv Fork() const { return *this; }

  const PassObservation& observation() const { return obs_; }
  const Graph& graph() const { return graph_; }
  const GraphStats& stats() const { return stats_; }
  const GraphStats& initial_stats() const { return initial_; }
  const std::vector<std::string>& passes() const { return names_; }
  int num_actions() const { return static_cast<int>(names_.size()) + 1; }
  int observation_size() const;
  int steps() const { return steps_; }
  bool done() const { return done_; }
  // The passes that changed the graph, in order.
  const std::vector<std::string>& applied() const { return applied_; }
  const PassEnvOptions& options() const { return o_; }
  // Phi(s) of the current state (for tests of the shaping identity).
  double Potential() const { return Potential(stats_); }

 private:
  double Potential(const GraphStats& s) const;
  void Observe();

  const PassRegistry* registry_;
  CostModel* cost_;
  PassEnvOptions o_;
  std::vector<std::string> names_;
  Graph graph_;
  GraphStats initial_, stats_;
  std::vector<uint8_t> stale_;  // per pass: ran on this very graph without changing it
  std::vector<std::string> applied_;
  PassObservation obs_;
  int steps_ = 0;
  bool done_ = true;
};

}  // namespace rlflow::agents

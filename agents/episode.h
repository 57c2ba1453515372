#pragma once
// One episode of the model-free agent's policy (agents/gnn.h) in the rewrite
// environment, for callers that run a trained agent without training it.
// libtorch's C++ API stays out of this header: it costs 15-25 s of
// compilation in each file that reaches it.
#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "agents/env.h"

namespace rlflow::agents {

class PolicyImpl;  // agents/gnn.h

// One episode of a policy from `graph`: greedy (the most likely action each
// step) or sampled with `rng`. Returns the cheapest state the episode
// reached (the start included) and the rules applied to reach it.
struct EpisodeResult {
  RewriteState best;
  double best_cost = 0;
  double initial_cost = 0;
  int steps = 0;
};
EpisodeResult RunEpisode(PolicyImpl& policy, RewriteEnv& env, const Graph& graph, bool greedy,
                         std::mt19937_64* rng = nullptr);

// One action of `policy` in `obs` (a flat action of the environment),
// sampled with `rng` among the valid ones.
int SamplePolicyAction(PolicyImpl& policy, const Observation& obs, std::mt19937_64& rng);

// LoadPolicy (agents/gnn.h), in evaluation mode.
std::shared_ptr<PolicyImpl> LoadPolicyForInference(const std::string& path,
                                                   const std::vector<std::string>& database_ids);

// Fine-tunes `policy` in place with PPO (PpoTrainer, the default PpoOptions;
// libtorch's generator and the trainer's seeded with `seed`) in `env`, every
// episode starting at `graph`, until it has taken `env_steps` environment
// steps or `runner` says stop; progress through `runner`. Leaves the policy
// in evaluation mode.
void FineTunePolicy(const std::shared_ptr<PolicyImpl>& policy, RewriteEnv& env, const Graph& graph, int64_t env_steps,
                    uint64_t seed, Runner& runner);

}  // namespace rlflow::agents

#pragma once
// PPO (clipped surrogate, GAE) for the rewrite environment, after CleanRL's
// single-file PPO: masked logits at a large negative value (not -inf),
// masked actions excluded from the entropy, the sampling-time masks stored
// with each transition and reused in the update, GAE (gamma 0.99, lambda
// 0.95), clip 0.2, value and entropy terms, Adam (lr 5e-4, eps 1e-5),
// gradient-norm clipping 0.5, per-minibatch advantage normalisation; each
// update reports approx-KL, clip fraction, entropy and explained variance.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "agents/env.h"
#include "agents/gnn.h"

namespace rlflow::agents {

constexpr double kMaskedLogit = -1e8;

// Logits with invalid actions at kMaskedLogit.
torch::Tensor MaskLogits(const torch::Tensor& logits, const torch::Tensor& mask);
// Entropy over the valid actions only ([B]).
torch::Tensor MaskedEntropy(const torch::Tensor& masked_logits, const torch::Tensor& mask);

// Samples an action from log-probabilities `logp` [A] restricted to `mask`
// [A] (masked actions have probability 0 and are never drawn).
int64_t SampleAction(const torch::Tensor& logp, const torch::Tensor& mask, std::mt19937_64& rng);

// Generalised advantage estimation over one rollout of length T:
// `dones[t]` is true when the episode ended at step t (no bootstrap past it);
// `last_value` is the value of the state after the last step.
void ComputeGae(const std::vector<float>& rewards, const std::vector<float>& values, const std::vector<uint8_t>& dones,
                float last_value, double gamma, double lambda, std::vector<float>* advantages,
                std::vector<float>* returns);

// One episode of a policy from `graph`: greedy (the most likely action each
// step) or sampled with `rng`. Returns the cheapest state the episode
// reached (the start included) and the rules applied to reach it.
struct EpisodeResult {
  RewriteState best;
  double best_cost = 0;
  double initial_cost = 0;
  int steps = 0;
};
EpisodeResult RunEpisode(class PolicyImpl& policy, RewriteEnv& env, const Graph& graph, bool greedy,
                         std::mt19937_64* rng = nullptr);

struct PpoOptions {
  double lr = 5e-4;
  double adam_eps = 1e-5;
  double gamma = 0.99;
  double lambda = 0.95;
  double clip = 0.2;
  double value_coef = 0.5;
  double entropy_coef = 0.01;
  double max_grad_norm = 0.5;
  int rollout_steps = 64;  // transitions per update
  int epochs = 4;
  int minibatches = 4;
  bool normalise_advantages = true;
};

struct Transition {
  Observation observation;
  torch::Tensor mask;  // [A] bool, as sampled
  int64_t action = 0;
  float logprob = 0, value = 0, reward = 0;
  bool done = false;
};

struct UpdateStats {
  double policy_loss = 0, value_loss = 0, entropy = 0, approx_kl = 0, clip_fraction = 0, explained_variance = 0;
  double mean_reward = 0;
  int episodes = 0;            // episodes that ended in this rollout
  double episode_return = 0;   // their mean return (0 if none)
};

class PpoTrainer {
 public:
  // `next_graph` gives the graph of each new episode (e.g. round robin over
  // the training models); `seed` seeds action sampling.
  PpoTrainer(Policy policy, RewriteEnv* env, std::function<Graph()> next_graph, PpoOptions options, uint64_t seed);

  // Collects rollout_steps transitions and updates the policy.
  UpdateStats Iterate();

  Policy& policy() { return policy_; }
  torch::optim::Adam& optimizer() { return optimizer_; }
  int64_t updates() const { return updates_; }
  int64_t env_steps() const { return env_steps_; }
  void set_counters(int64_t updates, int64_t env_steps) {
    updates_ = updates;
    env_steps_ = env_steps;
  }
  const PpoOptions& options() const { return o_; }
  // The action sampler's state (for checkpoints).
  std::string sampler_state() const;
  void set_sampler_state(const std::string& state);

 private:
  std::vector<Transition> Collect(UpdateStats* stats);
  void Update(std::vector<Transition>& rollout, float last_value, UpdateStats* stats);

  Policy policy_;
  RewriteEnv* env_;
  std::function<Graph()> next_graph_;
  PpoOptions o_;
  torch::optim::Adam optimizer_;
  std::mt19937_64 rng_;
  int64_t updates_ = 0, env_steps_ = 0;
  double episode_return_ = 0;
  bool need_reset_ = true;
};

}  // namespace rlflow::agents

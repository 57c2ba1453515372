#pragma once
// PPO (clipped surrogate, GAE) for the rewrite environment, after CleanRL's
// single-file PPO: masked logits at a large negative value (not -inf),
// masked actions excluded from the entropy, the sampling-time masks stored
// with each transition and reused in the update, GAE (gamma 0.99, lambda
// 0.95), clip 0.2, value and entropy terms, Adam (lr 5e-4, eps 1e-5),
// gradient-norm clipping 0.5, per-minibatch advantage normalisation; each
// update reports approx-KL, clip fraction, entropy and explained variance.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "agents/env.h"
#include "agents/episode.h"
#include "agents/gnn.h"
#include "core/error.h"
#include "third_party/torch_nn.h"

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

template <class Obs>
struct BasicTransition {
  Obs observation;
  torch::Tensor mask;  // [A] bool, as sampled
  int64_t action = 0;
  float logprob = 0, value = 0, reward = 0;
  bool done = false;
};
using Transition = BasicTransition<Observation>;

struct UpdateStats {
  double policy_loss = 0, value_loss = 0, entropy = 0, approx_kl = 0, clip_fraction = 0, explained_variance = 0;
  double mean_reward = 0;
  int episodes = 0;           // episodes that ended in this rollout
  double episode_return = 0;  // their mean return (0 if none)
};

// The workers of a data-parallel run (DD-PPO's synchronous scheme, e.g.
// the ranks of an MPI job): each collects its own rollouts with its own
// sampler; the gradients of every minibatch are averaged over the workers
// before the optimiser's step, so the parameters stay the same everywhere.
// Every worker makes the same calls in the same order.
class Workers {
 public:
  virtual ~Workers() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums data[0..n) over the workers in place: the same bits on every
  // worker, and the same each run (a fixed order of addition).
  virtual void Sum(float* data, int64_t n) = 0;
  virtual void Sum(double* data, int64_t n) = 0;
};

// What the training binaries' loop (checkpoints, resume, metrics) needs of
// a trainer, whatever its environment and policy.
class PpoTrainerBase {
 public:
  virtual ~PpoTrainerBase() = default;
  // Collects rollout_steps transitions and updates the policy.
  virtual UpdateStats Iterate() = 0;
  virtual torch::nn::Module& module() = 0;
  torch::optim::Adam& optimizer() { return *optimizer_; }
  int64_t updates() const { return updates_; }
  // Environment steps of all workers together.
  int64_t env_steps() const { return env_steps_; }
  // Trains as one of `workers` (not owned; null or one worker: alone). Set
  // before the first update, with the same parameters on every worker.
  void set_workers(Workers* workers) { workers_ = workers; }
  int num_workers() const { return workers_ != nullptr ? workers_->size() : 1; }
  void set_counters(int64_t updates, int64_t env_steps) {
    updates_ = updates;
    env_steps_ = env_steps;
  }
  const PpoOptions& options() const { return o_; }
  // The action sampler's state (for checkpoints); setting it starts a fresh episode.
  std::string sampler_state() const;
  void set_sampler_state(const std::string& state);

 protected:
  PpoTrainerBase(PpoOptions options, uint64_t seed);
  // The clipped-surrogate loss of one minibatch, given the policy's logits
  // [B, A], values [B] and the stored masks [B, A]; accumulates the
  // minibatch's statistics into `stats`.
  torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& value, const torch::Tensor& mask,
                     const std::vector<int64_t>& actions, const std::vector<float>& old_logp,
                     const std::vector<float>& adv, const std::vector<float>& ret, const std::vector<float>& old_v,
                     UpdateStats* stats);
  // Explained variance of `values` for `returns` (CleanRL's).
  static double ExplainedVariance(const std::vector<float>& returns, const std::vector<float>& values);
  // With several workers: replaces the module's gradients by their mean
  // over the workers (a parameter without a gradient counts as zeros).
  void AverageGradients();
  // With several workers: the update's statistics over all workers'
  // transitions (rewards, episodes and returns summed; losses averaged).
  void CombineStats(UpdateStats* stats, int64_t transitions);

  PpoOptions o_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  std::mt19937_64 rng_;
  Workers* workers_ = nullptr;
  int64_t updates_ = 0, env_steps_ = 0;
  double episode_return_ = 0;
  bool need_reset_ = true;
};

// PPO over an environment with Reset(const Graph&), Step(int) -> {reward,
// done, ...} and observation() -> const Obs&, and a policy module whose
// forward(std::vector<const Obs*>) gives {logits [B, A], mask [B, A] bool,
// value [B]}: the rewrite environment with the GNN policy (PpoTrainer), the
// pass-ordering environment with its MLP policy (agents/pass_env.h), the
// world model's dream with its controller (world_model/dream.h, whose
// episodes start from a recorded state, `Start`, instead of a graph).
template <class Env, class Net, class Start = Graph>
class BasicPpoTrainer : public PpoTrainerBase {
 public:
  using Obs = std::decay_t<decltype(std::declval<Env&>().observation())>;

  // `next_graph` gives the graph (start) of each new episode (e.g. round
  // robin over the training models); `seed` seeds action sampling.
  BasicPpoTrainer(Net policy, Env* env, std::function<Start()> next_graph, PpoOptions options, uint64_t seed)
      : PpoTrainerBase(options, seed), policy_(std::move(policy)), env_(env), next_graph_(std::move(next_graph)) {
    if (env_ == nullptr || !next_graph_) Fail("PPO: no environment or graph source");
    optimizer_ =
        std::make_unique<torch::optim::Adam>(policy_->parameters(), torch::optim::AdamOptions(o_.lr).eps(o_.adam_eps));
  }

  UpdateStats Iterate() override {
    UpdateStats stats;
    std::vector<BasicTransition<Obs>> rollout = Collect(&stats);
    float last_value = 0;
    if (!need_reset_) {
      torch::NoGradGuard no_grad;
      const Obs& o = env_->observation();
      last_value = policy_->forward({&o}).value[0].template item<float>();
    }
    Update(rollout, last_value, &stats);
    CombineStats(&stats, static_cast<int64_t>(rollout.size()));
    env_steps_ += static_cast<int64_t>(rollout.size()) * num_workers();
    ++updates_;
    return stats;
  }
  torch::nn::Module& module() override { return *policy_; }
  Net& policy() { return policy_; }

 private:
  std::vector<BasicTransition<Obs>> Collect(UpdateStats* stats) {
    std::vector<BasicTransition<Obs>> rollout;
    rollout.reserve(o_.rollout_steps);
    torch::NoGradGuard no_grad;
    double returns = 0;
    for (int t = 0; t < o_.rollout_steps; ++t) {
      if (need_reset_) {
        env_->Reset(next_graph_());
        episode_return_ = 0;
        need_reset_ = false;
      }
      BasicTransition<Obs> tr;
      tr.observation = env_->observation();
      auto out = policy_->forward({&tr.observation});
      tr.mask = out.mask[0].clone();
      torch::Tensor logp = torch::log_softmax(MaskLogits(out.logits, out.mask), -1)[0];
      // Sample from the valid actions with the trainer's generator.
      tr.action = SampleAction(logp, tr.mask, rng_);
      tr.logprob = logp[tr.action].template item<float>();
      tr.value = out.value[0].template item<float>();
      auto r = env_->Step(static_cast<int>(tr.action));
      tr.reward = static_cast<float>(r.reward);
      tr.done = r.done;
      episode_return_ += r.reward;
      if (r.done) {
        ++stats->episodes;
        returns += episode_return_;
        need_reset_ = true;
      }
      rollout.push_back(std::move(tr));
    }
    stats->episode_return = stats->episodes > 0 ? returns / stats->episodes : 0.0;
    double sum = 0;
    for (const auto& tr : rollout) sum += tr.reward;
    stats->mean_reward = sum / static_cast<double>(rollout.size());
    return rollout;
  }

  void Update(std::vector<BasicTransition<Obs>>& rollout, float last_value, UpdateStats* stats) {
    const int64_t T = static_cast<int64_t>(rollout.size());
    std::vector<float> rewards, values, advantages, returns;
    std::vector<uint8_t> dones;
    for (const auto& tr : rollout) {
      rewards.push_back(tr.reward);
      values.push_back(tr.value);
      dones.push_back(tr.done ? 1 : 0);
    }
    ComputeGae(rewards, values, dones, last_value, o_.gamma, o_.lambda, &advantages, &returns);
    std::vector<int64_t> order(T);
    for (int64_t k = 0; k < T; ++k) order[k] = k;
    const int64_t mb_size = std::max<int64_t>(1, T / o_.minibatches);
    UpdateStats sum;
    int batches = 0;
    for (int epoch = 0; epoch < o_.epochs; ++epoch) {
      std::shuffle(order.begin(), order.end(), rng_);
      for (int64_t start = 0; start + mb_size <= T; start += mb_size) {
        std::vector<const Obs*> obs;
        std::vector<int64_t> actions;
        std::vector<float> old_logp, adv, ret, old_v;
        for (int64_t k = start; k < start + mb_size; ++k) {
          const auto& tr = rollout[order[k]];
          obs.push_back(&tr.observation);
          actions.push_back(tr.action);
          old_logp.push_back(tr.logprob);
          adv.push_back(advantages[order[k]]);
          ret.push_back(returns[order[k]]);
          old_v.push_back(tr.value);
        }
        auto out = policy_->forward(obs);
        // The masks stored at sampling time, padded to this minibatch's width.
        const int64_t width = out.logits.size(1);
        torch::Tensor mask = torch::zeros({mb_size, width}, torch::TensorOptions().dtype(torch::kBool));
        for (int64_t k = 0; k < mb_size; ++k) {
          const torch::Tensor& m = rollout[order[start + k]].mask;
          if (m.size(0) > width) Fail("PPO: a stored mask is wider than its observation's actions");
          mask[k].slice(0, 0, m.size(0)).copy_(m);
        }
        if (!torch::equal(mask, out.mask)) Fail("PPO: the observation's actions changed since sampling");
        torch::Tensor loss = Loss(out.logits, out.value, mask, actions, old_logp, adv, ret, old_v, &sum);
        optimizer_->zero_grad();
        loss.backward();
        AverageGradients();
        torch::nn::utils::clip_grad_norm_(policy_->parameters(), o_.max_grad_norm);
        optimizer_->step();
        ++batches;
      }
    }
    stats->policy_loss = sum.policy_loss / batches;
    stats->value_loss = sum.value_loss / batches;
    stats->entropy = sum.entropy / batches;
    stats->approx_kl = sum.approx_kl / batches;
    stats->clip_fraction = sum.clip_fraction / batches;
    stats->explained_variance = ExplainedVariance(returns, values);
  }

  Net policy_;
  Env* env_;
  std::function<Start()> next_graph_;
};

using PpoTrainer = BasicPpoTrainer<RewriteEnv, Policy>;

}  // namespace rlflow::agents

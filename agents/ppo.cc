#include "agents/ppo.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/error.h"

namespace rlflow::agents {

torch::Tensor MaskLogits(const torch::Tensor& logits, const torch::Tensor& mask) {
  return logits.masked_fill(mask.logical_not(), kMaskedLogit);
}

torch::Tensor MaskedEntropy(const torch::Tensor& masked_logits, const torch::Tensor& mask) {
  torch::Tensor logp = torch::log_softmax(masked_logits, -1);
  return -(logp.exp() * logp).masked_fill(mask.logical_not(), 0.0).sum(-1);
}

int64_t SampleAction(const torch::Tensor& logp, const torch::Tensor& mask, std::mt19937_64& rng) {
  torch::Tensor lp = logp.contiguous().to(torch::kFloat64), m = mask.contiguous();
  const double* l = lp.data_ptr<double>();
  const bool* valid = m.data_ptr<bool>();
  std::vector<double> p(static_cast<size_t>(lp.numel()));
  for (size_t a = 0; a < p.size(); ++a) p[a] = valid[a] ? std::exp(l[a]) : 0.0;
  std::discrete_distribution<int64_t> pick(p.begin(), p.end());
  return pick(rng);
}

EpisodeResult RunEpisode(PolicyImpl& policy, RewriteEnv& env, const Graph& graph, bool greedy, std::mt19937_64* rng) {
  if (!greedy && rng == nullptr) Fail("RunEpisode: sampling needs a generator");
  torch::NoGradGuard no_grad;
  env.Reset(graph);
  EpisodeResult r;
  r.best = env.state();
  r.best_cost = r.initial_cost = env.state().cost();
  while (!env.done()) {
    const Observation& o = env.observation();
    PolicyImpl::Output out = policy.forward({&o});
    torch::Tensor logp = torch::log_softmax(MaskLogits(out.logits, out.mask), -1)[0];
    int64_t a = greedy ? logp.argmax().item<int64_t>() : SampleAction(logp, out.mask[0], *rng);
    StepResult s = env.Step(static_cast<int>(a));
    ++r.steps;
    if (s.info.valid && env.state().cost() < r.best_cost) {
      r.best_cost = env.state().cost();
      r.best = env.state();
    }
  }
  return r;
}

void ComputeGae(const std::vector<float>& rewards, const std::vector<float>& values, const std::vector<uint8_t>& dones,
                float last_value, double gamma, double lambda, std::vector<float>* advantages,
                std::vector<float>* returns) {
  const size_t T = rewards.size();
  if (values.size() != T || dones.size() != T) Fail("GAE: rewards, values and dones differ in length");
  advantages->assign(T, 0.0f);
  returns->assign(T, 0.0f);
  double gae = 0;
  for (size_t k = T; k-- > 0;) {
    const double next_value = k + 1 < T ? values[k + 1] : last_value;
    const double not_done = dones[k] ? 0.0 : 1.0;
    const double delta = rewards[k] + gamma * next_value * not_done - values[k];
    gae = delta + gamma * lambda * not_done * gae;
    (*advantages)[k] = static_cast<float>(gae);
    (*returns)[k] = static_cast<float>(gae + values[k]);
  }
}

PpoTrainer::PpoTrainer(Policy policy, RewriteEnv* env, std::function<Graph()> next_graph, PpoOptions options,
                       uint64_t seed)
    : policy_(std::move(policy)),
      env_(env),
      next_graph_(std::move(next_graph)),
      o_(options),
      optimizer_(policy_->parameters(), torch::optim::AdamOptions(options.lr).eps(options.adam_eps)),
      rng_(seed) {
  if (env_ == nullptr || !next_graph_) Fail("PPO: no environment or graph source");
  if (o_.rollout_steps < 1 || o_.epochs < 1 || o_.minibatches < 1 || o_.minibatches > o_.rollout_steps)
    Fail("PPO: rollout_steps, epochs and minibatches must be >= 1 (minibatches <= rollout_steps)");
}

std::vector<Transition> PpoTrainer::Collect(UpdateStats* stats) {
  std::vector<Transition> rollout;
  rollout.reserve(o_.rollout_steps);
  torch::NoGradGuard no_grad;
  double returns = 0;
  for (int t = 0; t < o_.rollout_steps; ++t) {
    if (need_reset_) {
      env_->Reset(next_graph_());
      episode_return_ = 0;
      need_reset_ = false;
    }
    Transition tr;
    tr.observation = env_->observation();
    PolicyImpl::Output out = policy_->forward({&tr.observation});
    tr.mask = out.mask[0].clone();
    torch::Tensor logp = torch::log_softmax(MaskLogits(out.logits, out.mask), -1)[0];
    // Sample from the valid actions with the trainer's generator.
    tr.action = SampleAction(logp, tr.mask, rng_);
    tr.logprob = logp[tr.action].item<float>();
    tr.value = out.value[0].item<float>();
    StepResult r = env_->Step(static_cast<int>(tr.action));
    tr.reward = static_cast<float>(r.reward);
    tr.done = r.done;
    episode_return_ += r.reward;
    ++env_steps_;
    if (r.done) {
      ++stats->episodes;
      returns += episode_return_;
      need_reset_ = true;
    }
    rollout.push_back(std::move(tr));
  }
  stats->episode_return = stats->episodes > 0 ? returns / stats->episodes : 0.0;
  double sum = 0;
  for (const Transition& tr : rollout) sum += tr.reward;
  stats->mean_reward = sum / static_cast<double>(rollout.size());
  return rollout;
}

std::string PpoTrainer::sampler_state() const {
  std::ostringstream out;
  out << rng_;
  return out.str();
}

void PpoTrainer::set_sampler_state(const std::string& state) {
  std::istringstream in(state);
  in >> rng_;
  if (in.fail()) Fail("PPO: a corrupt sampler state in the checkpoint");
  need_reset_ = true;
}

UpdateStats PpoTrainer::Iterate() {
  UpdateStats stats;
  std::vector<Transition> rollout = Collect(&stats);
  float last_value = 0;
  if (!need_reset_) {
    torch::NoGradGuard no_grad;
    const Observation& o = env_->observation();
    last_value = policy_->forward({&o}).value[0].item<float>();
  }
  Update(rollout, last_value, &stats);
  ++updates_;
  return stats;
}

void PpoTrainer::Update(std::vector<Transition>& rollout, float last_value, UpdateStats* stats) {
  const int64_t T = static_cast<int64_t>(rollout.size());
  std::vector<float> rewards, values, advantages, returns;
  std::vector<uint8_t> dones;
  for (const Transition& tr : rollout) {
    rewards.push_back(tr.reward);
    values.push_back(tr.value);
    dones.push_back(tr.done ? 1 : 0);
  }
  ComputeGae(rewards, values, dones, last_value, o_.gamma, o_.lambda, &advantages, &returns);
  std::vector<int64_t> order(T);
  std::iota(order.begin(), order.end(), 0);
  const int64_t mb_size = std::max<int64_t>(1, T / o_.minibatches);
  double pl = 0, vl = 0, ent = 0, kl = 0, cf = 0;
  int batches = 0;
  for (int epoch = 0; epoch < o_.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng_);
    for (int64_t start = 0; start + mb_size <= T; start += mb_size) {
      std::vector<const Observation*> obs;
      std::vector<int64_t> actions;
      std::vector<float> old_logp, adv, ret, old_v;
      for (int64_t k = start; k < start + mb_size; ++k) {
        const Transition& tr = rollout[order[k]];
        obs.push_back(&tr.observation);
        actions.push_back(tr.action);
        old_logp.push_back(tr.logprob);
        adv.push_back(advantages[order[k]]);
        ret.push_back(returns[order[k]]);
        old_v.push_back(tr.value);
      }
      PolicyImpl::Output out = policy_->forward(obs);
      // The masks stored at sampling time, padded to this minibatch's width.
      const int64_t width = out.logits.size(1);
      torch::Tensor mask = torch::zeros({mb_size, width}, torch::TensorOptions().dtype(torch::kBool));
      for (int64_t k = 0; k < mb_size; ++k) {
        const torch::Tensor& m = rollout[order[start + k]].mask;
        if (m.size(0) > width) Fail("PPO: a stored mask is wider than its observation's actions");
        mask[k].slice(0, 0, m.size(0)).copy_(m);
      }
      if (!torch::equal(mask, out.mask)) Fail("PPO: the observation's actions changed since sampling");
      torch::Tensor logits = MaskLogits(out.logits, mask);
      torch::Tensor logp_all = torch::log_softmax(logits, -1);
      torch::Tensor a = torch::tensor(actions, torch::kInt64);
      torch::Tensor new_logp = logp_all.gather(1, a.unsqueeze(1)).squeeze(1);
      torch::Tensor entropy = MaskedEntropy(logits, mask);
      torch::Tensor old = torch::tensor(old_logp);
      torch::Tensor log_ratio = new_logp - old;
      torch::Tensor ratio = log_ratio.exp();
      torch::Tensor advantage = torch::tensor(adv);
      if (o_.normalise_advantages && mb_size > 1) advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8);
      torch::Tensor pg = torch::max(-advantage * ratio, -advantage * torch::clamp(ratio, 1 - o_.clip, 1 + o_.clip)).mean();
      // Clipped value loss (CleanRL's default).
      torch::Tensor target = torch::tensor(ret), v_old = torch::tensor(old_v);
      torch::Tensor v_clipped = v_old + torch::clamp(out.value - v_old, -o_.clip, o_.clip);
      torch::Tensor v_loss =
          0.5 * torch::max((out.value - target).pow(2), (v_clipped - target).pow(2)).mean();
      torch::Tensor loss = pg - o_.entropy_coef * entropy.mean() + o_.value_coef * v_loss;
      optimizer_.zero_grad();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(policy_->parameters(), o_.max_grad_norm);
      optimizer_.step();
      {
        torch::NoGradGuard no_grad;
        kl += ((ratio - 1) - log_ratio).mean().item<double>();
        cf += ((ratio - 1.0).abs() > o_.clip).to(torch::kFloat32).mean().item<double>();
      }
      pl += pg.item<double>();
      vl += v_loss.item<double>();
      ent += entropy.mean().item<double>();
      ++batches;
    }
  }
  stats->policy_loss = pl / batches;
  stats->value_loss = vl / batches;
  stats->entropy = ent / batches;
  stats->approx_kl = kl / batches;
  stats->clip_fraction = cf / batches;
  // Explained variance of the rollout's values for its returns:
  // 1 - Var[y - v] / Var[y] (population variances, as CleanRL's np.var).
  const double mean_y = std::accumulate(returns.begin(), returns.end(), 0.0) / T;
  double mean_res = 0;
  for (int64_t k = 0; k < T; ++k) mean_res += returns[k] - values[k];
  mean_res /= T;
  double var_y = 0, var_res = 0;
  for (int64_t k = 0; k < T; ++k) {
    var_y += (returns[k] - mean_y) * (returns[k] - mean_y);
    const double r = returns[k] - values[k] - mean_res;
    var_res += r * r;
  }
  stats->explained_variance = var_y > 0 ? 1.0 - var_res / var_y : 0.0;
}

}  // namespace rlflow::agents

#include "agents/ppo.h"

#include <algorithm>
#include <cmath>
#include <iterator>
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

std::shared_ptr<PolicyImpl> LoadPolicyForInference(const std::string& path,
                                                   const std::vector<std::string>& database_ids) {
  Policy policy = LoadPolicy(path, database_ids);
  policy->eval();
  return policy.ptr();
}

int SamplePolicyAction(PolicyImpl& policy, const Observation& obs, std::mt19937_64& rng) {
  torch::NoGradGuard no_grad;
  PolicyImpl::Output p = policy.forward({&obs});
  torch::Tensor logp = torch::log_softmax(MaskLogits(p.logits, p.mask), -1)[0];
  return static_cast<int>(SampleAction(logp, p.mask[0], rng));
}

void FineTunePolicy(const std::shared_ptr<PolicyImpl>& policy, RewriteEnv& env, const Graph& graph, int64_t env_steps,
                    uint64_t seed, Runner& runner) {
  torch::manual_seed(seed);
  Policy net(policy);
  net->train();
  PpoTrainer trainer(
      net, &env, [&] { return graph; }, PpoOptions{}, seed);
  while (trainer.env_steps() < env_steps) {
    if (runner.ShouldStop()) break;
    UpdateStats s = trainer.Iterate();
    runner.Report([&] {
      return "ppo fine-tuning: " + std::to_string(trainer.env_steps()) + " steps, episode return " +
             std::to_string(s.episode_return);
    });
  }
  net->eval();
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

PpoTrainerBase::PpoTrainerBase(PpoOptions options, uint64_t seed) : o_(options), rng_(seed) {
  if (o_.rollout_steps < 1 || o_.epochs < 1 || o_.minibatches < 1 || o_.minibatches > o_.rollout_steps)
    Fail("PPO: rollout_steps, epochs and minibatches must be >= 1 (minibatches <= rollout_steps)");
}

std::string PpoTrainerBase::sampler_state() const {
  std::ostringstream out;
  out << rng_;
  return out.str();
}

void PpoTrainerBase::set_sampler_state(const std::string& state) {
  std::istringstream in(state);
  in >> rng_;
  if (in.fail()) Fail("PPO: a corrupt sampler state in the checkpoint");
  need_reset_ = true;
}

torch::Tensor PpoTrainerBase::Loss(const torch::Tensor& raw_logits, const torch::Tensor& value,
                                   const torch::Tensor& mask, const std::vector<int64_t>& actions,
                                   const std::vector<float>& old_logp, const std::vector<float>& adv,
                                   const std::vector<float>& ret, const std::vector<float>& old_v, UpdateStats* stats) {
  const int64_t mb_size = static_cast<int64_t>(actions.size());
  torch::Tensor logits = MaskLogits(raw_logits, mask);
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
  torch::Tensor v_clipped = v_old + torch::clamp(value - v_old, -o_.clip, o_.clip);
  torch::Tensor v_loss = 0.5 * torch::max((value - target).pow(2), (v_clipped - target).pow(2)).mean();
  torch::Tensor loss = pg - o_.entropy_coef * entropy.mean() + o_.value_coef * v_loss;
  {
    torch::NoGradGuard no_grad;
    stats->approx_kl += ((ratio - 1) - log_ratio).mean().item<double>();
    stats->clip_fraction += ((ratio - 1.0).abs() > o_.clip).to(torch::kFloat32).mean().item<double>();
    stats->policy_loss += pg.item<double>();
    stats->value_loss += v_loss.item<double>();
    stats->entropy += entropy.mean().item<double>();
  }
  return loss;
}

void PpoTrainerBase::AverageGradients() {
  if (num_workers() == 1) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params = module().parameters();
  int64_t n = 0;
  for (const torch::Tensor& p : params) n += p.numel();
  std::vector<float> flat(static_cast<size_t>(n), 0.0f);
  int64_t at = 0;
  for (const torch::Tensor& p : params) {
    if (p.grad().defined()) {
      torch::Tensor g = p.grad().to(torch::kFloat32).contiguous().view(-1);
      std::copy(g.data_ptr<float>(), g.data_ptr<float>() + g.numel(), flat.begin() + at);
    }
    at += p.numel();
  }
  workers_->Sum(flat.data(), n);
  const float scale = 1.0f / static_cast<float>(num_workers());
  at = 0;
  for (torch::Tensor& p : params) {
    torch::Tensor mean = torch::from_blob(flat.data() + at, p.sizes(), torch::kFloat32).mul(scale).to(p.dtype());
    if (p.grad().defined()) {
      p.mutable_grad().copy_(mean);
    } else {
      p.mutable_grad() = mean.clone();
    }
    at += p.numel();
  }
}

void PpoTrainerBase::CombineStats(UpdateStats* s, int64_t transitions) {
  if (num_workers() == 1) return;
  const double w = num_workers();
  double v[] = {s->mean_reward * transitions,
                static_cast<double>(s->episodes),
                s->episode_return * s->episodes,
                s->policy_loss,
                s->value_loss,
                s->entropy,
                s->approx_kl,
                s->clip_fraction,
                s->explained_variance,
                static_cast<double>(transitions)};
  workers_->Sum(v, static_cast<int64_t>(std::size(v)));
  s->mean_reward = v[0] / v[9];
  s->episodes = static_cast<int>(v[1]);
  s->episode_return = v[1] > 0 ? v[2] / v[1] : 0.0;
  s->policy_loss = v[3] / w;
  s->value_loss = v[4] / w;
  s->entropy = v[5] / w;
  s->approx_kl = v[6] / w;
  s->clip_fraction = v[7] / w;
  s->explained_variance = v[8] / w;
}

double PpoTrainerBase::ExplainedVariance(const std::vector<float>& returns, const std::vector<float>& values) {
  // 1 - Var[y - v] / Var[y] (population variances, as CleanRL's np.var).
  const int64_t T = static_cast<int64_t>(returns.size());
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
  return var_y > 0 ? 1.0 - var_res / var_y : 0.0;
}

}  // namespace rlflow::agents

#include "world_model/mdn_rnn.h"

#include <cmath>

#include "core/error.h"

namespace rlflow::world_model {

namespace nn = torch::nn;

MdnRnnImpl::MdnRnnImpl(MdnRnnOptions o) : o_(o) {
  if (o.latent < 1 || o.rule_actions < 1 || o.embedding < 1 || o.hidden < 1 || o.mixtures < 1)
    Fail("world model: sizes must be positive (latent ", o.latent, ", rule actions ", o.rule_actions, ")");
  const int a = o.rule_actions, e = o.embedding, h = o.hidden, k = o.mixtures, z = o.latent;
  action_ = register_module("action", nn::Embedding(a + 1, e));
  lstm_ = register_module("lstm", nn::LSTM(nn::LSTMOptions(z + e + 1, h)));
  mdn_ = register_module("mdn", nn::Linear(h, k * (1 + 2 * z)));
  done_ = register_module("done", nn::Linear(h, 1));
  query_ = register_module("query", nn::Linear(h, e));
  count_ = register_module("count", nn::Linear(h, e));
  reward_ = register_module("reward", nn::Sequential(nn::Linear(h + z + e + 1, 128), nn::Tanh(), nn::Linear(128, 64),
                                                     nn::Tanh(), nn::Linear(64, 1)));
  mask_bias_ = register_parameter("mask_bias", torch::zeros({a}));
  count_bias_ = register_parameter("count_bias", torch::zeros({a}));
  torch::NoGradGuard no_grad;
  action_->weight.normal_(0, 0.1);
}

torch::Tensor MdnRnnImpl::ActionInput(const torch::Tensor& rule_action, const torch::Tensor& location) {
  torch::Tensor emb = action_->forward(rule_action + 1);  // stop (-1) -> 0
  torch::Tensor loc = torch::log1p(location.clamp_min(0).to(torch::kFloat32)) / std::log1p(o_.max_locations);
  return torch::cat({emb, loc.unsqueeze(-1)}, -1);
}

MdnRnnImpl::Output MdnRnnImpl::forward(const torch::Tensor& z, const torch::Tensor& rule_action,
                                       const torch::Tensor& location, const State* state) {
  if (z.dim() != 3 || z.size(2) != o_.latent) Fail("world model: latents must be [T, B, ", o_.latent, "]");
  const int64_t t = z.size(0), b = z.size(1), k = o_.mixtures, zs = o_.latent;
  torch::Tensor act = ActionInput(rule_action, location);  // [T, B, E + 1]
  torch::Tensor in = torch::cat({z, act}, -1);
  auto [h, st] = state != nullptr ? lstm_->forward(in, *state) : lstm_->forward(in);
  Output out;
  out.state = st;
  torch::Tensor m = mdn_->forward(h);  // [T, B, K (1 + 2Z)]
  out.pi_logits = m.narrow(-1, 0, k);
  out.mu = m.narrow(-1, k, k * zs).view({t, b, k, zs});
  out.log_sigma = m.narrow(-1, k + k * zs, k * zs).view({t, b, k, zs}).clamp(-7.0, 3.0);
  out.done_logit = done_->forward(h).squeeze(-1);
  out.reward = reward_->forward(torch::cat({h, z, act}, -1)).squeeze(-1);
  torch::Tensor rules = action_->weight.narrow(0, 1, o_.rule_actions);  // [A, E]
  out.mask_logits = torch::matmul(query_->forward(h), rules.t()) + mask_bias_;
  out.log_locations = torch::matmul(count_->forward(h), rules.t()) + count_bias_;
  return out;
}

torch::Tensor MixtureNll(const MdnRnnImpl::Output& out, const torch::Tensor& target) {
  // log N(x | mu, sigma) summed over the latent's dimensions, per component.
  torch::Tensor x = target.unsqueeze(2);  // [T, B, 1, Z]
  torch::Tensor inv = torch::exp(-out.log_sigma);
  torch::Tensor log_n = (-0.5 * ((x - out.mu) * inv).pow(2) - out.log_sigma - 0.5 * std::log(2 * M_PI)).sum(-1);
  torch::Tensor log_pi = torch::log_softmax(out.pi_logits, -1);
  return -torch::logsumexp(log_pi + log_n, -1);
}

torch::Tensor SampleLatent(const MdnRnnImpl::Output& out, int64_t t, double tau, std::mt19937_64& generator) {
  if (!(tau > 0)) Fail("world model: the temperature must be > 0, got ", tau);
  torch::NoGradGuard no_grad;
  torch::Tensor logits = out.pi_logits[t] / tau;  // [B, K]
  torch::Tensor probs = torch::softmax(logits, -1).to(torch::kFloat64).contiguous();
  torch::Tensor mu = out.mu[t], sigma = torch::exp(out.log_sigma[t]);  // [B, K, Z]
  const int64_t b = probs.size(0), k = probs.size(1), z = mu.size(2);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  torch::Tensor sample = torch::empty({b, z});
  const double* p = probs.data_ptr<double>();
  for (int64_t i = 0; i < b; ++i) {
    double u = uniform(generator), acc = 0;
    int64_t c = k - 1;
    for (int64_t j = 0; j < k; ++j) {
      acc += p[i * k + j];
      if (u < acc) {
        c = j;
        break;
      }
    }
    torch::Tensor eps = torch::empty({z});
    float* e = eps.data_ptr<float>();
    for (int64_t d = 0; d < z; ++d) e[d] = normal(generator);
    sample[i] = mu[i][c] + sigma[i][c] * std::sqrt(tau) * eps;
  }
  return sample;
}

}  // namespace rlflow::world_model

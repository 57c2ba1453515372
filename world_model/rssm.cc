#include "world_model/rssm.h"

#include <cmath>

#include "core/error.h"

namespace rlflow::world_model {

namespace nn = torch::nn;

namespace {

constexpr int kEmbedded = 128;  // the observed latent's embedding
constexpr int kMlp = 256;
constexpr double kUniform = 0.01;        // DreamerV3's unimix
constexpr double kFreeNats = 1.0;        // free bits, per step
constexpr double kDynamics = 0.5;        // KL[sg(q) || p]: trains the prior
constexpr double kRepresentation = 0.1;  // KL[q || sg(p)]: regularises the posterior

nn::Sequential Mlp(int in, int out) {
  return nn::Sequential(nn::Linear(in, kMlp), nn::LayerNorm(nn::LayerNormOptions({kMlp})), nn::SiLU(),
                        nn::Linear(kMlp, out));
}

}  // namespace

RssmImpl::RssmImpl(WorldModelOptions options) : WorldModelImpl(std::move(options)) {
  const int e = o_.embedding, h = o_.hidden, z = o_.latent, s = stochastic();
  RegisterActionEmbedding();
  encoder_ = register_module("encoder", nn::Sequential(nn::Linear(z, kEmbedded),
                                                       nn::LayerNorm(nn::LayerNormOptions({kEmbedded})), nn::SiLU()));
  input_ = register_module(
      "input", nn::Sequential(nn::Linear(s + e + 1, h), nn::LayerNorm(nn::LayerNormOptions({h})), nn::SiLU()));
  gru_ = register_module("gru", nn::GRUCell(h, h));
  prior_ = register_module("prior", Mlp(h, s));
  posterior_ = register_module("posterior", Mlp(h + kEmbedded, s));
  decoder_ = register_module("decoder", Mlp(h + s, 2 * z));
  RegisterHeads(h + s);
  InitActionEmbedding();
  torch::Tensor u = torch::rand({std::max(0, o_.mixtures - 1), o_.groups, o_.classes}).clamp(1e-6, 1 - 1e-6);
  gumbel_ = register_buffer("gumbel", -torch::log(-torch::log(u)));
}

torch::Tensor RssmImpl::Probabilities(const torch::Tensor& logits) const {
  std::vector<int64_t> shape = logits.sizes().vec();
  shape.back() = o_.groups;
  shape.push_back(o_.classes);
  return torch::softmax(logits.view(shape), -1) * (1 - kUniform) + kUniform / o_.classes;
}

torch::Tensor RssmImpl::Kl(const torch::Tensor& p, const torch::Tensor& q) {
  return (p * (torch::log(p) - torch::log(q))).sum({-2, -1});
}

torch::Tensor RssmImpl::OneHot(const torch::Tensor& index) const {
  torch::Tensor one = torch::one_hot(index, o_.classes).to(torch::kFloat32);  // [.., G, C]
  return one.flatten(-2);
}

torch::Tensor RssmImpl::Posterior(const torch::Tensor& h, const torch::Tensor& embedded) {
  return Probabilities(posterior_->forward(torch::cat({h, embedded}, -1)));
}

torch::Tensor RssmImpl::Advance(const torch::Tensor& h, const torch::Tensor& s, const torch::Tensor& act) {
  return gru_->forward(input_->forward(torch::cat({s, act}, -1)), h);
}

std::pair<torch::Tensor, torch::Tensor> RssmImpl::Decode(const torch::Tensor& f) {
  torch::Tensor d = decoder_->forward(f);
  return {d.narrow(-1, 0, o_.latent), d.narrow(-1, o_.latent, o_.latent).clamp(-7.0, 3.0)};
}

void RssmImpl::CheckLatents(const torch::Tensor& z, int64_t dims) const {
  if (z.dim() != dims || z.size(-1) != o_.latent)
    Fail("world model: latents must have ", dims, " dimensions, the last of size ", o_.latent);
}

RssmImpl::Output RssmImpl::forward(const torch::Tensor& z, const torch::Tensor& rule_action,
                                   const torch::Tensor& location, const State* state) {
  CheckLatents(z, 3);
  const int64_t t_max = z.size(0), b = z.size(1), k = o_.mixtures, zs = o_.latent;
  torch::Tensor act = ActionInput(rule_action, location);  // [T, B, E + 1]
  torch::Tensor embedded = encoder_->forward(z);
  torch::Tensor h = state != nullptr ? std::get<0>(*state)[0] : torch::zeros({b, o_.hidden});
  torch::Tensor s = state != nullptr && std::get<1>(*state).defined() ? std::get<1>(*state)[0] : torch::Tensor();
  std::vector<torch::Tensor> features, mu, log_sigma;
  for (int64_t t = 0; t < t_max; ++t) {
    if (!s.defined()) s = OneHot(Posterior(h, embedded[t]).argmax(-1));
    h = Advance(h, s, act[t]);
    torch::Tensor prior = Probabilities(prior_->forward(h));  // [B, G, C]
    torch::Tensor mode = OneHot(prior.argmax(-1));            // [B, S]
    std::vector<torch::Tensor> components{mode};
    for (int64_t c = 0; c + 1 < k; ++c) components.push_back(OneHot((torch::log(prior) + gumbel_[c]).argmax(-1)));
    torch::Tensor comp = torch::stack(components, 1);  // [B, K, S]
    auto [m, ls] = Decode(torch::cat({h.unsqueeze(1).expand({b, k, o_.hidden}), comp}, -1));
    features.push_back(torch::cat({h, mode}, -1));
    mu.push_back(m);
    log_sigma.push_back(ls);
    s = torch::Tensor();  // the next step observes its latent
  }
  Output out;
  out.pi_logits = torch::zeros({t_max, b, k});
  out.mu = torch::stack(mu).view({t_max, b, k, zs});
  out.log_sigma = torch::stack(log_sigma).view({t_max, b, k, zs});
  Heads(torch::stack(features), z, act, out);
  out.state = {h.unsqueeze(0), torch::Tensor()};
  return out;
}

RssmImpl::Imagined RssmImpl::Imagine(const torch::Tensor& z, const torch::Tensor& rule_action,
                                     const torch::Tensor& location, const State* state, double tau,
                                     std::mt19937_64& generator) {
  if (!(tau >= 0)) Fail("world model: the temperature must be >= 0, got ", tau);
  CheckLatents(z, 2);
  const int64_t b = z.size(0);
  torch::Tensor act = ActionInput(rule_action, location);  // [B, E + 1]
  torch::Tensor h = state != nullptr ? std::get<0>(*state)[0] : torch::zeros({b, o_.hidden});
  torch::Tensor s = state != nullptr && std::get<1>(*state).defined() ? std::get<1>(*state)[0] : torch::Tensor();
  if (!s.defined()) s = OneHot(Posterior(h, encoder_->forward(z)).argmax(-1));
  h = Advance(h, s, act);
  torch::Tensor log_prior = torch::log(Probabilities(prior_->forward(h)));  // [B, G, C]
  torch::Tensor next_s;
  if (tau > 0) {
    torch::Tensor g = torch::empty(log_prior.sizes());
    std::uniform_real_distribution<float> uniform(1e-6f, 1.0f - 1e-6f);
    float* gp = g.data_ptr<float>();
    for (int64_t i = 0; i < g.numel(); ++i) gp[i] = -std::log(-std::log(uniform(generator)));
    next_s = OneHot((log_prior / tau + g).argmax(-1));
  } else {
    next_s = OneHot(log_prior.argmax(-1));
  }
  torch::Tensor f = torch::cat({h, next_s}, -1);
  auto [m, ls] = Decode(f);
  Imagined r;
  r.next_latent = m;
  if (tau > 0) {
    torch::Tensor eps = torch::empty(m.sizes());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    float* ep = eps.data_ptr<float>();
    for (int64_t i = 0; i < eps.numel(); ++i) ep[i] = normal(generator);
    r.next_latent = m + torch::exp(ls) * std::sqrt(tau) * eps;
  }
  Output heads;
  Heads(f, z, act, heads);
  r.reward = heads.reward;
  r.done_logit = heads.done_logit;
  r.mask_logits = heads.mask_logits;
  r.log_locations = heads.log_locations;
  r.state = {h.unsqueeze(0), next_s.unsqueeze(0)};
  return r;
}

RssmImpl::TrainingTerms RssmImpl::ForTraining(const torch::Tensor& z, const torch::Tensor& next,
                                              const torch::Tensor& rule_action, const torch::Tensor& location) {
  CheckLatents(z, 3);
  CheckLatents(next, 3);
  const int64_t t_max = z.size(0), b = z.size(1);
  torch::Tensor act = ActionInput(rule_action, location);
  torch::Tensor embedded = encoder_->forward(torch::cat({z.narrow(0, 0, 1), next}, 0));  // [T + 1, B, 128]
  // Balanced KL with free bits, per batch element.
  auto kl_loss = [](const torch::Tensor& post, const torch::Tensor& prior) {
    return kDynamics * Kl(post.detach(), prior).clamp_min(kFreeNats) +
           kRepresentation * Kl(post, prior.detach()).clamp_min(kFreeNats);
  };
  // A straight-through one-hot sample (torch's generator: seeded by the trainer).
  auto sample = [&](const torch::Tensor& probs) {
    torch::Tensor index = torch::multinomial(probs.reshape({-1, o_.classes}), 1).view({b, o_.groups});
    return (OneHot(index).view(probs.sizes()) + probs - probs.detach()).flatten(-2);
  };
  torch::Tensor h = torch::zeros({b, o_.hidden});
  torch::Tensor post = Posterior(h, embedded[0]);
  torch::Tensor s = sample(post);
  torch::Tensor first_kl = kl_loss(post, Probabilities(prior_->forward(h)));
  std::vector<torch::Tensor> features, latent;
  for (int64_t t = 0; t < t_max; ++t) {
    h = Advance(h, s, act[t]);
    torch::Tensor prior = Probabilities(prior_->forward(h));
    post = Posterior(h, embedded[t + 1]);
    s = sample(post);
    torch::Tensor f = torch::cat({h, s}, -1);
    auto [m, ls] = Decode(f);
    torch::Tensor nll = (0.5 * ((next[t] - m) * torch::exp(-ls)).pow(2) + ls + 0.5 * std::log(2 * M_PI)).sum(-1);
    torch::Tensor term = nll + kl_loss(post, prior);
    latent.push_back(t == 0 ? term + first_kl : term);
    features.push_back(f);
  }
  TrainingTerms r;
  r.latent = torch::stack(latent);
  Heads(torch::stack(features), z, act, r.heads);
  return r;
}

}  // namespace rlflow::world_model

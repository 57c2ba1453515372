#include "world_model/world_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "world_model/mdn_rnn.h"
#include "world_model/rssm.h"

namespace rlflow::world_model {

namespace nn = torch::nn;

WorldModelImpl::WorldModelImpl(WorldModelOptions o) : o_(std::move(o)) {
  if (o_.latent < 1 || o_.rule_actions < 1 || o_.embedding < 1 || o_.hidden < 1 || o_.mixtures < 1 || o_.groups < 1 ||
      o_.classes < 2)
    Fail("world model: sizes must be positive (latent ", o_.latent, ", rule actions ", o_.rule_actions, ")");
  if (o_.vocabulary.empty())
    for (int64_t r = 0; r < o_.rule_actions; ++r) o_.vocabulary.push_back(r);
  for (size_t i = 0; i < o_.vocabulary.size(); ++i) {
    const int64_t r = o_.vocabulary[i];
    if (r < 0 || r >= o_.rule_actions || (i > 0 && r <= o_.vocabulary[i - 1]))
      Fail("world model: the vocabulary must be increasing rule actions below ", o_.rule_actions);
  }
}

void WorldModelImpl::RegisterActionEmbedding() {
  const int v = vocabulary_size();
  std::vector<int64_t> lookup(o_.rule_actions + 1, v + 1);
  lookup[0] = 0;
  for (int i = 0; i < v; ++i) lookup[o_.vocabulary[i] + 1] = i + 1;
  lookup_ = register_buffer("lookup", torch::tensor(lookup));
  action_ = register_module("action", nn::Embedding(v + 2, o_.embedding));
}

void WorldModelImpl::RegisterHeads(int f) {
  const int e = o_.embedding, z = o_.latent, v = vocabulary_size();
  done_ = register_module("done", nn::Linear(f + e + 1, 1));
  query_ = register_module("query", nn::Linear(f, e));
  count_ = register_module("count", nn::Linear(f, e));
  reward_ = register_module("reward", nn::Sequential(nn::Linear(f + z + e + 1, 128), nn::Tanh(), nn::Linear(128, 64),
                                                     nn::Tanh(), nn::Linear(64, 1)));
  mask_bias_ = register_parameter("mask_bias", torch::zeros({v}));
  count_bias_ = register_parameter("count_bias", torch::zeros({v}));
}

void WorldModelImpl::InitActionEmbedding() {
  torch::NoGradGuard no_grad;
  action_->weight.normal_(0, 0.1);
}

int64_t WorldModelImpl::VocabularyIndex(int64_t rule_action) const {
  auto it = std::lower_bound(o_.vocabulary.begin(), o_.vocabulary.end(), rule_action);
  return it != o_.vocabulary.end() && *it == rule_action ? it - o_.vocabulary.begin() : -1;
}

torch::Tensor WorldModelImpl::ActionInput(const torch::Tensor& rule_action, const torch::Tensor& location) {
  torch::Tensor emb = action_->forward(lookup_.index_select(0, (rule_action + 1).flatten()).view(rule_action.sizes()));
  torch::Tensor loc = torch::log1p(location.clamp_min(0).to(torch::kFloat32)) / std::log1p(o_.max_locations);
  return torch::cat({emb, loc.unsqueeze(-1)}, -1);
}

void WorldModelImpl::Heads(const torch::Tensor& f, const torch::Tensor& z, const torch::Tensor& act, Output& out) {
  out.done_logit = done_->forward(torch::cat({f, act}, -1)).squeeze(-1);
  out.reward = reward_->forward(torch::cat({f, z, act}, -1)).squeeze(-1);
  torch::Tensor rules = action_->weight.narrow(0, 1, vocabulary_size());  // [V, E]
  out.mask_logits = torch::matmul(query_->forward(f), rules.t()) + mask_bias_;
  out.log_locations = torch::matmul(count_->forward(f), rules.t()) + count_bias_;
}

torch::Tensor MixtureNll(const WorldModelImpl::Output& out, const torch::Tensor& target) {
  // log N(x | mu, sigma) summed over the latent's dimensions, per component.
  torch::Tensor x = target.unsqueeze(2);  // [T, B, 1, Z]
  torch::Tensor inv = torch::exp(-out.log_sigma);
  torch::Tensor log_n = (-0.5 * ((x - out.mu) * inv).pow(2) - out.log_sigma - 0.5 * std::log(2 * M_PI)).sum(-1);
  torch::Tensor log_pi = torch::log_softmax(out.pi_logits, -1);
  return -torch::logsumexp(log_pi + log_n, -1);
}

torch::Tensor SampleLatent(const WorldModelImpl::Output& out, int64_t t, double tau, std::mt19937_64& generator) {
  if (!(tau > 0)) Fail("world model: the temperature must be > 0, got ", tau);
  torch::NoGradGuard no_grad;
  torch::Tensor probs = torch::softmax(out.pi_logits[t].to(torch::kFloat64) / tau, -1);  // [B, K]
  torch::Tensor mu = out.mu[t], sigma = torch::exp(out.log_sigma[t]);                    // [B, K, Z]
  const int64_t b = probs.size(0), k = probs.size(1), z = mu.size(2);
  // The component: the first whose cumulative probability exceeds a uniform draw.
  torch::Tensor u = torch::empty({b, 1}, torch::kFloat64);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  double* up = u.data_ptr<double>();
  for (int64_t i = 0; i < b; ++i) up[i] = uniform(generator);
  torch::Tensor c = (probs.cumsum(-1) <= u).sum(-1).clamp_max(k - 1);  // [B]
  torch::Tensor idx = c.view({b, 1, 1}).expand({b, 1, z});
  torch::Tensor eps = torch::empty({b, z});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float* ep = eps.data_ptr<float>();
  for (int64_t i = 0; i < b * z; ++i) ep[i] = normal(generator);
  return mu.gather(1, idx).squeeze(1) + sigma.gather(1, idx).squeeze(1) * std::sqrt(tau) * eps;
}

torch::Tensor MostLikelyMean(const WorldModelImpl::Output& out) {
  torch::Tensor k = out.pi_logits.argmax(-1);  // [T, B]
  torch::Tensor idx = k.unsqueeze(-1).unsqueeze(-1).expand({k.size(0), k.size(1), 1, out.mu.size(3)});
  return out.mu.gather(2, idx).squeeze(2);
}

WorldModel MakeWorldModel(const std::string& kind, WorldModelOptions options) {
  if (kind == "mdn_rnn") return std::make_shared<MdnRnnImpl>(std::move(options));
  if (kind == "rssm") return std::make_shared<RssmImpl>(std::move(options));
  Fail("unknown world model kind '", kind, "' (", kWorldModelKinds, ")");
}

void WorldModelImpl::SetRuleIds(std::vector<std::string> ids) {
  if (2 * static_cast<int>(ids.size()) != o_.rule_actions)
    Fail("world model: ", ids.size(), " rule ids for ", o_.rule_actions / 2, " rules");
  o_.rule_ids = std::move(ids);
}

}  // namespace rlflow::world_model

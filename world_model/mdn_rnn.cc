#include "world_model/mdn_rnn.h"

#include "core/error.h"

namespace rlflow::world_model {

namespace nn = torch::nn;

MdnRnnImpl::MdnRnnImpl(WorldModelOptions options) : WorldModelImpl(std::move(options)) {
  const int e = o_.embedding, h = o_.hidden, k = o_.mixtures, z = o_.latent;
  // This order fixes the initialisation the checked-in model was trained with.
  RegisterActionEmbedding();
  lstm_ = register_module("lstm", nn::LSTM(nn::LSTMOptions(z + e + 1, h)));
  mdn_ = register_module("mdn", nn::Linear(h, k * (1 + 2 * z)));
  RegisterHeads(h);
  InitActionEmbedding();
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
  Heads(h, z, act, out);
  return out;
}

MdnRnnImpl::Imagined MdnRnnImpl::Imagine(const torch::Tensor& z, const torch::Tensor& rule_action,
                                         const torch::Tensor& location, const State* state, double tau,
                                         std::mt19937_64& generator) {
  if (!(tau >= 0)) Fail("world model: the temperature must be >= 0, got ", tau);
  Output out = forward(z.unsqueeze(0), rule_action.unsqueeze(0), location.unsqueeze(0), state);
  Imagined r;
  r.next_latent = tau > 0 ? SampleLatent(out, 0, tau, generator) : MostLikelyMean(out)[0];
  r.reward = out.reward[0];
  r.done_logit = out.done_logit[0];
  r.mask_logits = out.mask_logits[0];
  r.log_locations = out.log_locations[0];
  r.state = out.state;
  return r;
}

MdnRnnImpl::TrainingTerms MdnRnnImpl::ForTraining(const torch::Tensor& z, const torch::Tensor& next,
                                                  const torch::Tensor& rule_action, const torch::Tensor& location) {
  TrainingTerms r;
  r.heads = forward(z, rule_action, location);
  r.latent = MixtureNll(r.heads, next);
  return r;
}

}  // namespace rlflow::world_model

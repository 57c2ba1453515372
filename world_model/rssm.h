#pragma once
// A DreamerV3-style recurrent state-space model (Hafner et al. 2023), kind
// "rssm" of world_model/world_model.h (issue #23: the stronger design where
// the MDN-RNN falls short).
//
// The state of step t is (h_t, s_t): h_t deterministic (a GRU, 256), s_t
// stochastic: G (16) categorical variables of C (16) classes, one-hot.
//  - posterior  q(s_t | h_t, enc(z_t))   (the observed latent z_t)
//  - prior      p(s_t | h_t)             (what the dream uses)
//  - sequence   h_{t+1} = GRU(h_t, [s_t, a_t])
//  - decoder    z_t ~ N(mu(h_t, s_t), sigma(h_t, s_t)) (the 32-d graph
//               latent, so the controller's input is the MDN-RNN's)
//  - heads      reward, done and mask (world_model.h) from (h_{t+1},
//               s_{t+1}), the state after the action.
// Training (DreamerV3): straight-through one-hot samples of the posterior,
// 1% uniform mixed into every categorical, the decoder's negative
// log-likelihood, and KL balancing with free bits:
// 0.5 max(1, KL[sg(q) || p]) + 0.1 max(1, KL[q || sg(p)]) nats per step.
// The heads are trained on posterior states and used on prior states.
//
// The dream (Imagine) steps in latent space: the next stochastic state is
// drawn from the prior (its logits divided by tau, Gumbel-max with the
// caller's generator; tau = 0: the mode), carried in the state, and
// decoded to the latent the controller sees (noise scaled by sqrt(tau)).
// Nothing is re-encoded: the decoded latent is an output only.
//
// Teacher-forced prediction (forward, for held-out metrics) observes z_t
// through the posterior's mode and predicts step t + 1 from the prior. Its
// distribution over z_{t+1} is a mixture of K equally weighted components:
// the decoding of the prior's mode (component 0, the "most likely" one:
// argmax takes the first of equal logits) and of K - 1 draws from the prior
// made with fixed Gumbel noise (drawn once when the model is built and saved
// with it): a deterministic Monte-Carlo estimate of the predictive
// distribution, so its NLL is comparable with the MDN-RNN's.
#include "third_party/torch_nn.h"
#include "world_model/world_model.h"

namespace rlflow::world_model {

class RssmImpl : public WorldModelImpl {
 public:
  explicit RssmImpl(WorldModelOptions options);
  Output forward(const torch::Tensor& z, const torch::Tensor& rule_action, const torch::Tensor& location,
                 const State* state = nullptr) override;
  Imagined Imagine(const torch::Tensor& z, const torch::Tensor& rule_action, const torch::Tensor& location,
                   const State* state, double tau, std::mt19937_64& generator) override;
  // latent: the decoder's NLL of z_{t+1} (posterior state) plus the
  // balanced KL, and at step 0 the first state's KL too.
  TrainingTerms ForTraining(const torch::Tensor& z, const torch::Tensor& next, const torch::Tensor& rule_action,
                            const torch::Tensor& location) override;
  std::string kind() const override { return "rssm"; }

  // The categorical distribution [.., G, C] of logits [.., G * C], with 1%
  // uniform mixed in; and the KL of two such, summed over the groups.
  torch::Tensor Probabilities(const torch::Tensor& logits) const;
  static torch::Tensor Kl(const torch::Tensor& p, const torch::Tensor& q);

 private:
  int stochastic() const { return o_.groups * o_.classes; }
  torch::Tensor OneHot(const torch::Tensor& index) const;                          // [.., G] -> [.., G * C]
  torch::Tensor Posterior(const torch::Tensor& h, const torch::Tensor& embedded);  // probabilities
  torch::Tensor Advance(const torch::Tensor& h, const torch::Tensor& s, const torch::Tensor& action_input);
  // Decoder mean and log sigma of features [.., H + S]: [.., Z] each.
  std::pair<torch::Tensor, torch::Tensor> Decode(const torch::Tensor& features);
  void CheckLatents(const torch::Tensor& z, int64_t dims) const;

  torch::nn::Sequential encoder_{nullptr}, input_{nullptr}, prior_{nullptr}, posterior_{nullptr}, decoder_{nullptr};
  torch::nn::GRUCell gru_{nullptr};
  torch::Tensor gumbel_;  // [K - 1, G, C]: the fixed draws of forward's mixture
};
TORCH_MODULE(Rssm);

}  // namespace rlflow::world_model

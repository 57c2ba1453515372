#pragma once
// The MDN-RNN world model (World Models' and RLFlow's; issue #23), kind
// "mdn_rnn" of world_model/world_model.h.
//
// Input per step: the latent z_t and the action a_t (world_model.h). An
// LSTM (256) runs over the episode; its output h_t is the heads' features,
// and a mixture of K (8) diagonal Gaussians over z_{t+1} (mixture logits,
// means, log standard deviations) is read from it. The dream feeds the
// sampled latent back as the next input. Sampling at temperature tau
// divides the mixture logits by tau and scales the Gaussian noise by
// sqrt(tau) (World Models, RLFlow).
#include "third_party/torch_nn.h"
#include "world_model/world_model.h"

namespace rlflow::world_model {

using MdnRnnOptions = WorldModelOptions;

class MdnRnnImpl : public WorldModelImpl {
 public:
  explicit MdnRnnImpl(WorldModelOptions options);
  Output forward(const torch::Tensor& z, const torch::Tensor& rule_action, const torch::Tensor& location,
                 const State* state = nullptr) override;
  Imagined Imagine(const torch::Tensor& z, const torch::Tensor& rule_action, const torch::Tensor& location,
                   const State* state, double tau, std::mt19937_64& generator) override;
  // latent: the mixture's negative log-likelihood of z_{t+1}.
  TrainingTerms ForTraining(const torch::Tensor& z, const torch::Tensor& next, const torch::Tensor& rule_action,
                            const torch::Tensor& location) override;
  std::string kind() const override { return "mdn_rnn"; }

 private:
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::Linear mdn_{nullptr};
};
TORCH_MODULE(MdnRnn);

}  // namespace rlflow::world_model

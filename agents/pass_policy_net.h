#pragma once
// The pass-ordering agent's policy: an MLP over the pass environment's
// observation vector (two tanh hidden layers, CleanRL's PPO network) with
// a policy head over the passes + stop and a value head.
#include <vector>

#include "agents/pass_env.h"
#include "agents/pass_policy.h"
#include "third_party/torch_nn.h"

namespace rlflow::agents {

class PassPolicyImpl : public torch::nn::Module {
 public:
  PassPolicyImpl(int observation_size, int actions, int hidden = 64);
  struct Output {
    torch::Tensor logits;  // [B, A]
    torch::Tensor mask;    // [B, A] bool
    torch::Tensor value;   // [B]
  };
  Output forward(const std::vector<const PassObservation*>& observations);
  int observation_size() const { return observation_size_; }
  int actions() const { return actions_; }
  int hidden() const { return hidden_; }

 private:
  int observation_size_, actions_, hidden_;
  torch::nn::Sequential actor_{nullptr}, critic_{nullptr};
};
TORCH_MODULE(PassPolicy);

}  // namespace rlflow::agents

#pragma once
// The pass-ordering agent's policy: an MLP over the pass environment's
// observation vector (two tanh hidden layers, CleanRL's PPO network) with
// a policy head over the passes + stop and a value head.
#include <random>
#include <string>
#include <vector>

#include "agents/pass_env.h"
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

// Saves the weights and the action names (the passes, in order),
// atomically. LoadPassPolicy reads sizes from the file and fails (one-line
// rlflow::Error) if the file is missing or corrupt or if its passes are not
// `passes`.
// The episode horizon it was trained with is stored too (the observation
// reads step / horizon).
void SavePassPolicy(PassPolicyImpl& policy, const std::vector<std::string>& passes, int horizon,
                    const std::string& path);
PassPolicy LoadPassPolicy(const std::string& path, const std::vector<std::string>& passes, int* horizon = nullptr);
// The passes an agent file was trained with.
std::vector<std::string> PassPolicyActions(const std::string& path);

// One episode from `graph`: the most likely action each step (greedy) or
// sampled with `rng` (random_policy: uniform over the valid actions, the
// baseline). Returns the environment at the episode's end.
struct PassEpisode {
  std::vector<std::string> applied;  // passes that changed the graph
  double initial_nodes = 0, final_nodes = 0, initial_cost = 0, final_cost = 0;
  double shaped_return = 0;  // sum of rewards
  Graph graph;
};
PassEpisode RunPassEpisode(PassPolicyImpl* policy, PassEnv& env, const Graph& graph, bool greedy,
                           std::mt19937_64* rng = nullptr);

}  // namespace rlflow::agents

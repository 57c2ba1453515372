#pragma once
// The pass-ordering agent: saving, loading and running its policy. The
// policy network itself (libtorch) is in agents/pass_policy_net.h, which
// only the files that build or train one include: libtorch's C++ API
// headers cost 15-25 s of compilation in each file that reaches them.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "agents/pass_env.h"

namespace rlflow::agents {

class PassPolicyImpl;  // agents/pass_policy_net.h

// Saves the weights and the action names (the passes, in order),
// atomically. LoadPassPolicy reads sizes from the file and fails (one-line
// rlflow::Error) if the file is missing or corrupt or if its passes are not
// `passes`; the policy it returns is in evaluation mode.
// The episode horizon it was trained with is stored too (the observation
// reads step / horizon).
void SavePassPolicy(PassPolicyImpl& policy, const std::vector<std::string>& passes, int horizon,
                    const std::string& path);
std::shared_ptr<PassPolicyImpl> LoadPassPolicy(const std::string& path, const std::vector<std::string>& passes,
                                               int* horizon = nullptr);
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

// The pass-ordering agent: PPO (the same trainer as the rewrite agent)
// learns the order that matters on a small graph (remove the Identity that
// hides a Neg pair first, then the pair) within a CI-sized budget; the
// policy round-trips through its file, and files of another pass list,
// missing or corrupt files are one-line errors.
#include "agents/pass_policy.h"

#include <gtest/gtest.h>

#include <fstream>

#include "agents/pass_policy_net.h"
#include "agents/ppo.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/graph_builder.h"
#include "runtime/ort_testing.h"

namespace rlflow::agents {
namespace {

Graph Hidden() {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 8});
  ValueId y = b.Op("Neg", {b.Op("Identity", {b.Op("Neg", {b.Op("Relu", {x})})})});
  return b.Build({b.Op("Sigmoid", {y})});
}

PassEnvOptions Options() {
  PassEnvOptions o;
  o.passes = {"neg_neg", "fold_constants", "remove_identity", "cse"};
  o.horizon = 2;
  return o;
}

TEST(PassAgent, PpoLearnsTheOrderThatMatters) {
  AnalyticalCostModel cost;
  PassEnv env(&PassRegistry::Builtin(), &cost, Options());
  torch::manual_seed(3);
  PassPolicy policy(env.observation_size(), env.num_actions(), 32);
  Graph g = Hidden();
  auto greedy = [&] {
    PassEnv e = env.Fork();
    return RunPassEpisode(policy.get(), e, g, true);
  };
  PassEpisode before = greedy();
  EXPECT_NE(before.final_nodes, 2.0) << "the untrained policy already finds the order";
  PpoOptions o;
  o.rollout_steps = 32;
  o.minibatches = 4;
  BasicPpoTrainer<PassEnv, PassPolicy> trainer(
      policy, &env, [&] { return g; }, o, 3);
  for (int k = 0; k < 150; ++k) trainer.Iterate();
  PassEpisode after = greedy();
  EXPECT_EQ(after.applied, (std::vector<std::string>{"remove_identity", "neg_neg"}));
  EXPECT_EQ(after.final_nodes, 2.0);  // Relu, Sigmoid

  // Round trip through the file.
  std::string dir = testing::MakeTempDir("pass_agent_");
  SavePassPolicy(*policy, env.passes(), 2, dir + "/agent.pt");
  EXPECT_EQ(PassPolicyActions(dir + "/agent.pt"), env.passes());
  int horizon = 0;
  PassPolicy loaded = LoadPassPolicy(dir + "/agent.pt", env.passes(), &horizon);
  EXPECT_EQ(horizon, 2);
  PassEnv e2 = env.Fork();
  EXPECT_EQ(RunPassEpisode(loaded.get(), e2, g, true).applied, after.applied);
  // Errors.
  std::vector<std::string> other = env.passes();
  other.pop_back();
  EXPECT_THROW(LoadPassPolicy(dir + "/agent.pt", other), Error);
  EXPECT_THROW(LoadPassPolicy(dir + "/missing.pt", env.passes()), Error);
  std::string bytes = ReadFile(dir + "/agent.pt");
  std::ofstream(dir + "/cut.pt") << bytes.substr(0, bytes.size() / 2);
  EXPECT_THROW(LoadPassPolicy(dir + "/cut.pt", env.passes()), Error);
}

}  // namespace
}  // namespace rlflow::agents

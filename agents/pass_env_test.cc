// The pass-ordering environment: rewards by definition, masks, invalid
// actions that never throw and change nothing, forks, determinism, and the
// potential-based shaping identity (the discounted shaped return differs
// from the unshaped one by gamma^T Phi(s_T) - Phi(s_0) only).
#include "agents/pass_env.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/graph_builder.h"
#include "runtime/executor.h"
#include "zoo/zoo.h"

namespace rlflow::agents {
namespace {

// Relu -> Neg -> Identity -> Neg, and two equal Sigmoids (cse).
Graph Small() {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 8});
  ValueId y = b.Op("Neg", {b.Op("Identity", {b.Op("Neg", {b.Op("Relu", {x})})})});
  ValueId s = b.Op("Add", {b.Op("Sigmoid", {y}), b.Op("Sigmoid", {y})});
  return b.Build({s});
}

int Action(const PassEnv& env, const std::string& name) {
  for (size_t k = 0; k < env.passes().size(); ++k)
    if (env.passes()[k] == name) return static_cast<int>(k);
  ADD_FAILURE() << "no pass " << name;
  return -1;
}

PassEnvOptions Options(bool shaping = false) {
  PassEnvOptions o;
  o.passes = {"remove_identity", "neg_neg", "cse", "dce", "fold_constants"};
  o.horizon = 6;
  o.shaping = shaping;
  return o;
}

TEST(PassEnv, RewardsMasksAndInvalidActions) {
  AnalyticalCostModel cost;
  PassEnv env(&PassRegistry::Builtin(), &cost, Options());
  const Graph g = Small();
  const PassObservation& o = env.Reset(g);
  EXPECT_EQ(static_cast<int>(o.features.size()), env.observation_size());
  EXPECT_EQ(o.mask, std::vector<uint8_t>(6, 1));
  const double n0 = g.num_nodes();  // 7
  // neg_neg first: the Identity hides the pair, nothing changes, the pass is masked.
  PassStepResult r = env.Step(Action(env, "neg_neg"));
  EXPECT_TRUE(r.valid);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.reward, 0.0);
  EXPECT_EQ(env.observation().mask[Action(env, "neg_neg")], 0);
  // A masked action is invalid: penalty, graph unchanged, no throw.
  uint64_t hash = env.graph().StructuralHash();
  r = env.Step(Action(env, "neg_neg"));
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reward, -100.0);
  EXPECT_EQ(env.graph().StructuralHash(), hash);
  r = env.Step(99);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.reward, -100.0);
  EXPECT_NE(r.message.find("out of range"), std::string::npos);
  r = env.Step(-1);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(env.graph().StructuralHash(), hash);
  // remove_identity: one node fewer; reward 100 * 1 / 7; every mask back on.
  r = env.Step(Action(env, "remove_identity"));
  EXPECT_TRUE(r.changed);
  EXPECT_NEAR(r.reward, 100.0 * 1 / n0, 1e-9);
  EXPECT_EQ(env.observation().mask[Action(env, "neg_neg")], 1);
  // neg_neg now removes two nodes; the horizon (6) ends the episode.
  r = env.Step(Action(env, "neg_neg"));
  EXPECT_NEAR(r.reward, 100.0 * 2 / n0, 1e-9);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(env.applied(), (std::vector<std::string>{"remove_identity", "neg_neg"}));
  r = env.Step(0);  // after the end
  EXPECT_FALSE(r.valid);
  EXPECT_TRUE(r.done);
  // What the passes left computes the same.
  std::vector<at::Tensor> in = RandomInputs(g, 3);
  EXPECT_LT(RelativeError(Executor(env.graph()).Run(in)[0], Executor(g).Run(in)[0]), 1e-6);
  EXPECT_THROW(PassEnv(&PassRegistry::Builtin(), &cost, PassEnvOptions{{"no_such_pass"}}), Error);
}

TEST(PassEnv, RuntimeRewardIsTheCostDecrease) {
  AnalyticalCostModel cost;
  PassEnvOptions o = Options();
  o.reward = PassReward::kRuntime;
  PassEnv env(&PassRegistry::Builtin(), &cost, o);
  env.Reset(Small());
  double c0 = env.stats().cost;
  PassStepResult r = env.Step(Action(env, "cse"));
  ASSERT_TRUE(r.changed);
  EXPECT_NEAR(r.reward, 100.0 * (c0 - cost.GraphCost(env.graph())) / c0, 1e-9);
  EXPECT_GT(r.reward, 0);
  EXPECT_EQ(ParsePassReward("op_count"), PassReward::kOpCount);
  EXPECT_THROW(ParsePassReward("flops"), Error);
}

TEST(PassEnv, ForksAreIndependentAndRunsDeterministic) {
  AnalyticalCostModel cost;
  PassEnv env(&PassRegistry::Builtin(), &cost, Options());
  env.Reset(Small());
  env.Step(Action(env, "remove_identity"));
  PassEnv fork = env.Fork();
  fork.Step(Action(fork, "neg_neg"));
  EXPECT_EQ(env.applied().size(), 1u);
  EXPECT_EQ(fork.applied().size(), 2u);
  EXPECT_NE(env.graph().num_nodes(), fork.graph().num_nodes());
  PassEnv again(&PassRegistry::Builtin(), &cost, Options());
  again.Reset(Small());
  again.Step(Action(again, "remove_identity"));
  again.Step(Action(again, "neg_neg"));
  EXPECT_EQ(again.graph().StructuralHash(), fork.graph().StructuralHash());
  EXPECT_EQ(again.observation().features, fork.observation().features);
}

TEST(PassEnv, ShapingChangesTheReturnOnlyByTheBoundaryTerms) {
  AnalyticalCostModel cost;
  Graph g = zoo::Build("resnet18", 1);
  PassEnvOptions plain = Options(false), shaped = Options(true);
  plain.passes =
      shaped.passes = {"lower_batchnorm", "fold_mul_into_conv", "fold_add_into_conv", "dce", "raise_batchnorm"};
  plain.horizon = shaped.horizon = 5;
  PassEnv a(&PassRegistry::Builtin(), &cost, plain), b(&PassRegistry::Builtin(), &cost, shaped);
  a.Reset(g);
  b.Reset(g);
  const double phi0 = b.Potential();
  EXPECT_NEAR(phi0, -100.0, 1e-9);  // FLOPs and bytes at their start values
  double ga = 0, gb = 0, discount = 1;
  int t = 0;
  for (int action : {0, 1, 2, 3, 4}) {
    PassStepResult ra = a.Step(action), rb = b.Step(action);
    ga += discount * ra.reward;
    gb += discount * rb.reward;
    discount *= shaped.gamma;
    ++t;
    if (ra.done) break;
  }
  ASSERT_EQ(t, 5);
  EXPECT_NE(gb, ga);  // shaping does change the rewards ...
  // ... by exactly gamma^T Phi(s_T) - Phi(s_0) over the episode.
  EXPECT_NEAR(gb - ga, std::pow(shaped.gamma, t) * b.Potential() - phi0, 1e-6);
  EXPECT_LT(b.Potential(), 0);
  EXPECT_GT(b.Potential(), phi0);  // folding removed FLOPs and bytes
}

}  // namespace
}  // namespace rlflow::agents

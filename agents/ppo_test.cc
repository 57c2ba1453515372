// PPO: masked entropy and sampling, GAE against its definition, a short
// training run on a small graph that makes the best rewrite more likely,
// and reproducibility from a seed.
#include "agents/ppo.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>

#include "core/graph_builder.h"
#include "rules/testing.h"
#include "runtime/table_cost_testing.h"

namespace rlflow::agents {
namespace {

TEST(Ppo, MaskedEntropyCountsOnlyValidActions) {
  torch::Tensor logits = torch::tensor({{1.0f, 2.0f, 3.0f, 100.0f}});
  torch::Tensor mask = torch::tensor({{true, true, true, false}});
  torch::Tensor masked = MaskLogits(logits, mask);
  EXPECT_LT(masked[0][3].item<double>(), -1e7);
  EXPECT_TRUE(std::isfinite(masked[0][3].item<double>()));  // large negative, not -inf
  torch::Tensor p = torch::softmax(torch::tensor({1.0, 2.0, 3.0}), 0);
  double want = -(p * p.log()).sum().item<double>();
  EXPECT_NEAR(MaskedEntropy(masked, mask)[0].item<double>(), want, 1e-5);
  EXPECT_NEAR(torch::softmax(masked, -1)[0][3].item<double>(), 0.0, 1e-30);
}

TEST(Ppo, AMaskedActionIsNeverSampled) {
  // The masked action has by far the largest logit.
  torch::Tensor logits = torch::tensor({{0.0f, 50.0f, 0.5f, 0.2f}});
  torch::Tensor mask = torch::tensor({{true, false, true, true}});
  torch::Tensor logp = torch::log_softmax(MaskLogits(logits, mask), -1)[0];
  EXPECT_EQ(torch::exp(logp[1]).item<double>(), 0.0);
  std::mt19937_64 rng(1);
  std::vector<int> counts(4, 0);
  for (int k = 0; k < 20000; ++k) ++counts[SampleAction(logp, mask[0], rng)];
  EXPECT_EQ(counts[1], 0);
  // The others in proportion to their probabilities.
  for (int a : {0, 2, 3}) EXPECT_NEAR(counts[a] / 20000.0, std::exp(logp[a].item<double>()), 0.02) << a;
}

TEST(Ppo, GaeFollowsItsDefinition) {
  std::vector<float> r = {1, 0, 2, -1}, v = {0.5f, 0.2f, 0.1f, 0.4f};
  std::vector<uint8_t> d = {0, 1, 0, 0};
  const double g = 0.9, l = 0.8;
  const float last = 0.3f;
  std::vector<float> adv, ret;
  ComputeGae(r, v, d, last, g, l, &adv, &ret);
  // delta_t = r_t + g V_{t+1} (1 - done_t) - V_t; A_t = sum_k (g l)^k delta_{t+k} within the episode.
  double d0 = 1 + g * 0.2 - 0.5, d1 = 0 - 0.2, d2 = 2 + g * 0.4 - 0.1, d3 = -1 + g * 0.3 - 0.4;
  std::vector<double> want = {d0 + g * l * d1, d1, d2 + g * l * d3, d3};
  for (int k = 0; k < 4; ++k) {
    EXPECT_NEAR(adv[k], want[k], 1e-5) << k;
    EXPECT_NEAR(ret[k], want[k] + v[k], 1e-5) << k;
  }
}

Graph Model() {
  GraphBuilder b(7);
  ValueId x = b.Input("x", {1, 4, 6, 6});
  ValueId w = b.Weight("w", {8, 4, 1, 1}, 0.5f);
  ValueId s = b.Weight("s", {8, 1, 1}, 0.5f, 1.0f);
  ValueId t = b.Weight("t", {8, 1, 1}, 0.5f);
  return b.Build({b.Op("Relu", {b.Op("Add", {b.Op("Mul", {b.Op("Conv", {x, w}), s}), t})})});
}

struct Setup {
  Matcher matcher{testing::AllRules()};
  testing::TableCost cost{0.0};
};
Setup& S() {
  static Setup* s = new Setup();
  return *s;
}

// Probability the policy gives to the actions with a positive estimated gain at the start.
double GoodActionProbability(Policy& policy, const Observation& o) {
  torch::NoGradGuard no_grad;
  auto out = policy->forward({&o});
  torch::Tensor p = torch::softmax(MaskLogits(out.logits, out.mask), -1)[0];
  double good = 0;
  for (int i = 0; i < o.stop_action(); ++i)
    if (o.candidates[i].estimated_gain > 0) good += p[i].item<double>();
  return good;
}

std::vector<UpdateStats> Train(int iterations, Policy* out, double* before, double* after) {
  torch::manual_seed(11);
  EnvOptions eo;
  eo.horizon = 4;
  RewriteEnv env(&S().matcher, &S().cost, eo);
  Observation start = env.Reset(Model());
  Policy policy(2 * static_cast<int>(S().matcher.rules().size()), GnnOptions{32, 2});
  *before = GoodActionProbability(policy, start);
  PpoOptions o;
  o.rollout_steps = 32;
  o.minibatches = 4;
  o.lr = 3e-3;
  PpoTrainer trainer(
      policy, &env, [] { return Model(); }, o, 7);
  std::vector<UpdateStats> stats;
  for (int k = 0; k < iterations; ++k) stats.push_back(trainer.Iterate());
  *after = GoodActionProbability(policy, start);
  *out = policy;
  return stats;
}

TEST(Ppo, TrainingMakesGoodRewritesMoreLikely) {
  Policy policy{nullptr};
  double before, after;
  std::vector<UpdateStats> stats = Train(12, &policy, &before, &after);
  EXPECT_GT(after, before + 0.1) << before << " -> " << after;
  for (const UpdateStats& s : stats) {
    EXPECT_TRUE(std::isfinite(s.policy_loss) && std::isfinite(s.value_loss) && std::isfinite(s.approx_kl));
    EXPECT_GE(s.entropy, 0);
    EXPECT_GE(s.clip_fraction, 0);
    EXPECT_LE(s.clip_fraction, 1);
  }
  EXPECT_GT(stats.back().episode_return, stats.front().episode_return);
}

TEST(Ppo, ASeedReproducesTheRun) {
  Policy a{nullptr}, b{nullptr};
  double b0, a0, b1, a1;
  std::vector<UpdateStats> x = Train(2, &a, &b0, &a0), y = Train(2, &b, &b1, &a1);
  ASSERT_EQ(x.size(), y.size());
  for (size_t k = 0; k < x.size(); ++k) {
    EXPECT_EQ(x[k].policy_loss, y[k].policy_loss);
    EXPECT_EQ(x[k].value_loss, y[k].value_loss);
    EXPECT_EQ(x[k].mean_reward, y[k].mean_reward);
  }
  EXPECT_EQ(a0, a1);
}

// Two convolutions of one input, 1x1 and 3x3 (search_test's greedy trap):
// enlarging the 1x1 conv to 3x3 costs more (21 -> 21.8), after which the two
// merge into one conv + Split (11.9). Greedy never takes the first step; the
// trained policy must.
TEST(Ppo, LearnsTheSequenceGreedyMisses) {
  GraphBuilder b(11);
  ValueId x = b.Input("x", {1, 4, 6, 6});
  ValueId a = b.Op("Conv", {x, b.Weight("w1", {4, 4, 1, 1}, 0.5f)});
  ValueId c = b.Op("Conv", {x, b.Weight("w3", {4, 4, 3, 3}, 0.5f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  Graph g = b.Build({a, c});
  Matcher m(testing::RulesById({"ef1d9f385d5a", "d1b546e55a9f", "fb7ae47167c7"}));  // enlarge, merge, scale fold
  testing::TableCost cost;
  EnvOptions eo;
  eo.horizon = 3;
  RewriteEnv env(&m, &cost, eo);
  // Greedy descent finds nothing: no single rewrite improves.
  env.Reset(g);
  for (const EnvCandidate& k : env.observation().candidates) EXPECT_LE(k.estimated_gain, 1e-9);
  torch::manual_seed(3);
  Policy policy(2 * static_cast<int>(m.rules().size()), GnnOptions{32, 2});
  PpoOptions o;
  o.rollout_steps = 32;
  o.minibatches = 4;
  o.lr = 3e-3;
  PpoTrainer trainer(
      policy, &env, [&] { return g; }, o, 5);
  // Up to 200 updates of 32 steps, checking the greedy policy every 10
  // (seed 3: learned after 40 updates; the count moves with the network's
  // parameters, so the test allows far more than it needs).
  EpisodeResult r;
  int updates = 0;
  while (updates < 200) {
    for (int k = 0; k < 10; ++k, ++updates) trainer.Iterate();
    r = RunEpisode(*policy, env, g, /*greedy=*/true);
    if (r.best_cost < 12) break;
  }
  std::cout << "learned after " << updates << " updates\n";
  EXPECT_DOUBLE_EQ(r.initial_cost, 21.0);
  EXPECT_NEAR(r.best_cost, 11.9, 1e-9) << "the greedy policy did not learn enlarge-then-merge";
  std::map<std::string, int> ops = r.best.graph().OpCounts();
  EXPECT_EQ(ops["Conv"], 1);
  EXPECT_EQ(ops["Split"], 1);
}

}  // namespace
}  // namespace rlflow::agents

// The latent encoder: the checked-in agent's frozen GNN gives a latent of
// its hidden size (32), deterministically, and different latents to a
// graph and the graph after a rewrite that changes its cost; Spearman's
// rank correlation against hand-computed values.
#include "world_model/encoder.h"

#include <gtest/gtest.h>

#include <cmath>

#include "agents/gnn.h"
#include "core/error.h"
#include "core/file_util.h"
#include "rules/testing.h"
#include "runtime/cost_model.h"
#include "search/canonical.h"
#include "zoo/zoo.h"

namespace rlflow::world_model {
namespace {

TEST(Encoder, RankCorrelation) {
  EXPECT_DOUBLE_EQ(RankCorrelation({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(RankCorrelation({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_DOUBLE_EQ(RankCorrelation({1, 2, 3, 4}, {1, 8, 27, 64}), 1.0);  // ranks, not values
  // Ties share their mean rank: ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4).
  const double r = RankCorrelation({1, 5, 5, 9}, {1, 2, 3, 4});
  EXPECT_NEAR(r, 4.5 / std::sqrt(4.5 * 5.0), 1e-12);
  EXPECT_DOUBLE_EQ(RankCorrelation({1, 1, 1}, {1, 2, 3}), 0.0);  // constant
  EXPECT_DOUBLE_EQ(RankCorrelation({1, 2}, {1, 2}), 0.0);        // too few
}

TEST(Encoder, TheZooAgentsGnnGivesDistinctLatents) {
  Matcher matcher(testing::AllRules());
  AnalyticalCostModel cost;
  agents::RewriteEnv env(&matcher, &cost);
  env.Reset(CanonicalForm(zoo::Build("resnet18", 1)));
  const std::vector<std::string> ids = agents::RuleIds(matcher.rules());
  LatentEncoder encoder(FindRunfile("agents/zoo_agent.pt"), ids);
  EXPECT_EQ(encoder.size(), 32);
  EXPECT_NE(encoder.description().find("hidden 32"), std::string::npos) << encoder.description();
  std::vector<float> z0 = encoder.Encode(env.observation());
  ASSERT_EQ(z0.size(), 32u);
  EXPECT_EQ(encoder.Encode(env.observation()), z0);  // deterministic
  for (float v : z0) EXPECT_TRUE(std::isfinite(v));
  // After the rewrite with the largest estimated gain the cost differs, and
  // so does the latent.
  const agents::Observation& o = env.observation();
  ASSERT_FALSE(o.candidates.empty());
  int best = 0;
  for (int i = 1; i < static_cast<int>(o.candidates.size()); ++i)
    if (o.candidates[i].estimated_gain > o.candidates[best].estimated_gain) best = i;
  const double before = env.state().cost();
  env.Step(best);
  ASSERT_LT(env.state().cost(), before);
  std::vector<float> z1 = encoder.Encode(env.observation());
  double d = 0;
  for (size_t i = 0; i < z0.size(); ++i) d += (z0[i] - z1[i]) * (z0[i] - z1[i]);
  EXPECT_GT(std::sqrt(d), 1e-4);
  // An agent for a rule database that shares none of its rules is refused.
  EXPECT_THROW(LatentEncoder(FindRunfile("agents/zoo_agent.pt"), {"fffffffffff0"}), Error);
}

}  // namespace
}  // namespace rlflow::world_model

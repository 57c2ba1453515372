// --search=world_model with the checked-in controller and world model: on
// zoo graphs (the cost model the agents were trained with) it returns a
// graph no costlier than the input that computes the same, counts its real
// steps, and finished by greedy descent leaves no improving rewrite; a
// missing or mismatched agent directory is an error.
#include <gtest/gtest.h>

#include "agents/gnn.h"
#include "core/error.h"
#include "core/file_util.h"
#include "rules/testing.h"
#include "runtime/cost_model.h"
#include "runtime/equivalence.h"
#include "search/canonical.h"
#include "search/search.h"
#include "world_model/controller_episode.h"
#include "world_model/world_model.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

TEST(WorldModelSearch, TheCheckedInControllerSearchesZooGraphs) {
  ASSERT_FALSE(FindRunfile("world_model/agent/controller.pt").empty()) << "world_model/agent/ is not checked in";
  Matcher matcher(testing::AllRules());
  AnalyticalCostModel analytical;
  BatchNormAwareCost cost(&analytical);
  for (const char* model : {"squeezenet1_1", "resnet18"}) {
    Graph original = zoo::Build(model, 1);
    Graph g = CanonicalForm(original);
    SearchOptions o;
    o.matcher = &matcher;
    o.cost = &cost;
    o.params.Set("horizon", "20");
    o.greedy_finish = false;
    SearchResult r = MakeSearch("world_model")->Run(g, o);
    EXPECT_LE(r.final_cost, r.initial_cost + 1e-9) << model;
    EXPECT_NEAR(r.final_cost, cost.GraphCost(r.graph), 1e-9 * r.final_cost) << model;
    EXPECT_LE(r.applied.size(), 20u) << model;
    EXPECT_GE(r.real_steps, 1) << model;  // at least the stop action
    EXPECT_LT(CompareGraphs(original, r.graph, 3).max_error, 1e-4) << model;
    o.greedy_finish = true;
    SearchResult f = MakeSearch("world_model")->Run(g, o);
    EXPECT_LE(f.final_cost, r.final_cost + 1e-9) << model;
    SearchOptions greedy = o;
    greedy.params = SearchParams();  // greedy has no settings of its own
    EXPECT_TRUE(MakeSearch("greedy")->Run(f.graph, greedy).applied.empty()) << model;
    std::printf("%s: controller %zu rewrites (cost %.3f -> %.3f), finished %.3f\n", model, r.applied.size(),
                r.initial_cost, r.final_cost, f.final_cost);
  }
  SearchOptions bad;
  bad.matcher = &matcher;
  bad.cost = &cost;
  bad.params.Set("agent", MakeTempDir("no_agent_"));
  EXPECT_THROW(MakeSearch("world_model")->Run(CanonicalForm(zoo::Build("squeezenet1_1", 1)), bad), Error);
}

// The search, the collector and the loop load a controller and its world
// model through one function, which checks them against the rule database
// and the encoder.
TEST(WorldModelSearch, LoadDreamAgentChecksWhatItLoads) {
  const std::string controller = FindRunfile("world_model/agent/controller.pt");
  ASSERT_FALSE(controller.empty());
  const std::string dir = controller.substr(0, controller.rfind('/'));
  // On the checked-in database (which may have grown since the model was
  // trained: it acts by rule id).
  world_model::DreamAgent current = world_model::LoadDreamAgent(dir, agents::RuleIds(testing::AllRules()), 32);
  EXPECT_NE(current.controller, nullptr);
  ASSERT_NE(current.model, nullptr);
  for (int64_t action : current.vocabulary) EXPECT_GE(action, 0) << "a vocabulary rule is not in the database";
  // On the database it was trained on (the ids it records): the vocabulary as it is.
  const std::vector<std::string> ids = current.model->options().rule_ids;
  ASSERT_EQ(2 * static_cast<int>(ids.size()), current.model->options().rule_actions)
      << "the checked-in model records its database's rule ids";
  world_model::DreamAgent a = world_model::LoadDreamAgent(dir, ids, 32);
  EXPECT_EQ(a.vocabulary, a.model->options().vocabulary);
  EXPECT_NO_THROW(world_model::LoadDreamAgent(dir));  // nothing to check against
  // A database grown by a rule before all others: every vocabulary action
  // moves by one rule, by id.
  std::vector<std::string> grown = {"fffffffffff0"};
  grown.insert(grown.end(), ids.begin(), ids.end());
  world_model::DreamAgent g = world_model::LoadDreamAgent(dir, grown, 32);
  ASSERT_EQ(g.vocabulary.size(), a.vocabulary.size());
  for (size_t j = 0; j < a.vocabulary.size(); ++j) EXPECT_EQ(g.vocabulary[j], a.vocabulary[j] + 2) << j;
  // Without the vocabulary's first rule: that action is never valid.
  std::vector<std::string> fewer = ids;
  fewer.erase(fewer.begin() + a.vocabulary[0] / 2);
  world_model::DreamAgent f = world_model::LoadDreamAgent(dir, fewer, 32);
  EXPECT_EQ(f.vocabulary[0], -1);
  auto message = [&](const std::vector<std::string>& database, int latent, const std::string& where) {
    try {
      world_model::LoadDreamAgent(where, database, latent);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({"fffffffffff0"}, 32, dir).find("knows none of the rule database's 1 rules"), std::string::npos);
  EXPECT_NE(message(ids, 31, dir).find("does not fit its world model or the encoder"), std::string::npos);
  EXPECT_NE(message(ids, 32, MakeTempDir("empty_agent_")).find("must be a directory with controller.pt"),
            std::string::npos);
}

}  // namespace
}  // namespace rlflow

// --search=ppo with the checked-in agent (agents/zoo_agent.pt): it loads,
// searches a zoo graph it was not trained on (ResNet-50) and one it was
// (SqueezeNet), and what it returns computes what the original does; a
// missing agent or one of another rule database is a one-line error.
#include <gtest/gtest.h>

#include <iostream>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "rules/testing.h"
#include "runtime/executor.h"
#include "search/canonical.h"
#include "search/search.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

TEST(PpoSearch, TheCheckedInAgentSearchesZooGraphs) {
  ASSERT_FALSE(FindRunfile("agents/zoo_agent.pt").empty()) << "agents/zoo_agent.pt is not checked in";
  Matcher matcher(testing::AllRules());
  AnalyticalCostModel analytical;
  BatchNormAwareCost cost(&analytical);
  for (const char* model : {"squeezenet1_1", "resnet50"}) {
    Graph original = zoo::Build(model, 1);
    Graph g = CanonicalForm(original);
    SearchOptions o;
    o.matcher = &matcher;
    o.cost = &cost;
    o.params.Set("episodes", "2");
    o.params.Set("horizon", "20");
    o.greedy_finish = false;  // the agent alone: at most one horizon of rewrites
    SearchResult r = MakeSearch("ppo")->Run(g, o);
    EXPECT_LE(r.final_cost, r.initial_cost + 1e-9) << model;
    EXPECT_DOUBLE_EQ(r.final_cost, cost.GraphCost(r.graph)) << model;
    EXPECT_LE(r.applied.size(), 20u) << model;
    EXPECT_EQ(r.finish_applied, 0) << model;
    EXPECT_GE(r.graphs_explored, 1) << model;
    // Every environment step is a real one (the stop actions too).
    EXPECT_GE(r.real_steps, r.graphs_explored) << model;
    EXPECT_LE(r.real_steps, 3 * 20) << model;  // three episodes of at most 20 steps
    std::vector<at::Tensor> in = RandomInputs(original, 3);
    EXPECT_LT(RelativeError(Executor(r.graph).Run(in)[0], Executor(original).Run(in)[0]), 1e-4) << model;

    // With the greedy finish, no improving rewrite is left: the result is a
    // local optimum (greedy from it applies nothing) and no worse than the
    // agent alone.
    o.greedy_finish = true;
    SearchResult f = MakeSearch("ppo")->Run(g, o);
    EXPECT_LE(f.final_cost, r.final_cost + 1e-9) << model;
    EXPECT_NEAR(f.final_cost, cost.GraphCost(f.graph), 1e-9 * f.final_cost) << model;
    EXPECT_EQ(f.applied.size(), r.applied.size() + static_cast<size_t>(f.finish_applied)) << model;
    SearchOptions greedy = o;
    greedy.params = SearchParams();  // greedy has no settings of its own
    SearchResult again = MakeSearch("greedy")->Run(f.graph, greedy);
    EXPECT_TRUE(again.applied.empty()) << model << ": greedy still improves the finished graph";
    EXPECT_LT(RelativeError(Executor(f.graph).Run(in)[0], Executor(original).Run(in)[0]), 1e-4) << model;
  }
}

// train_steps: the agent is fine-tuned on the input graph (ResNet-18) first (PPO
// updates of 64 steps until that many environment steps are taken), which
// counts as real steps; the same seed gives the same search.
TEST(PpoSearch, FineTunesOnTheInputGraphFirst) {
  Matcher matcher(testing::AllRules());
  AnalyticalCostModel analytical;
  BatchNormAwareCost cost(&analytical);
  Graph original = zoo::Build("resnet18", 1);
  Graph g = CanonicalForm(original);
  SearchOptions o;
  o.matcher = &matcher;
  o.cost = &cost;
  o.seed = 5;
  o.params.Set("episodes", "2");
  o.params.Set("horizon", "20");
  o.params.Set("train_steps", "128");
  o.greedy_finish = false;
  SearchResult a = MakeSearch("ppo")->Run(g, o);
  EXPECT_GE(a.real_steps, 128 + a.graphs_explored);  // fine-tuning, then the episodes
  EXPECT_LE(a.real_steps, 128 + 64 + 3 * 20);
  EXPECT_LE(a.final_cost, a.initial_cost + 1e-9);
  std::vector<at::Tensor> in = RandomInputs(original, 3);
  EXPECT_LT(RelativeError(Executor(a.graph).Run(in)[0], Executor(original).Run(in)[0]), 1e-4);
  SearchResult b = MakeSearch("ppo")->Run(g, o);
  EXPECT_EQ(a.applied, b.applied);
  EXPECT_EQ(a.real_steps, b.real_steps);
  std::cout << "fine-tuned: " << a.real_steps << " real steps, " << a.applied.size() << " applied, cost "
            << a.initial_cost << " -> " << a.final_cost << "\n";
}

TEST(PpoSearch, BadAgentsAreErrors) {
  Matcher matcher(testing::RulesById({"fb7ae47167c7"}));
  AnalyticalCostModel cost;
  SearchOptions o;
  o.matcher = &matcher;
  o.cost = &cost;
  Graph g = zoo::Build("squeezenet1_1", 1);
  o.params.Set("agent", "/nonexistent/agent.pt");
  EXPECT_THROW(MakeSearch("ppo")->Run(g, o), Error);
  // The checked-in agent records its rules' ids: on a database of one of
  // them it acts by id; on a database of a rule written after it was
  // trained (a layer norm taking in its scale), it knows nothing.
  o.params.Set("agent", FindRunfile("agents/zoo_agent.pt"));
  EXPECT_NO_THROW(MakeSearch("ppo")->Run(g, o));
  Matcher unknown(testing::RulesById({"d3f5bde0881c"}));
  o.matcher = &unknown;
  try {
    MakeSearch("ppo")->Run(g, o);
    ADD_FAILURE() << "no error for an agent of another rule database";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("knows none of the rule database's 1 rules"), std::string::npos) << e.what();
  }
  o.matcher = &matcher;
  o.params.Set("agent", "");
  o.params.Set("horizon", "0");
  EXPECT_THROW(MakeSearch("ppo")->Run(g, o), Error);
}

}  // namespace
}  // namespace rlflow

// --search=pass_order with the checked-in agent (agents/pass_agent.pt): it
// loads, orders passes on a zoo graph it was not trained on (ResNet-50, in
// the pipeline's canonical form) and what it returns computes what the
// original does with fewer nodes; a missing agent is a one-line error.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_util.h"
#include "rules/testing.h"
#include "runtime/executor.h"
#include "search/canonical.h"
#include "search/search.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

TEST(PassOrderSearch, TheCheckedInAgentOrdersPassesOnAHeldOutGraph) {
  ASSERT_FALSE(FindRunfile("agents/pass_agent.pt").empty()) << "agents/pass_agent.pt is not checked in";
  Matcher matcher(testing::AllRules());
  AnalyticalCostModel analytical;
  BatchNormAwareCost cost(&analytical);
  Graph original = zoo::Build("resnet50", 1);
  Graph g = CanonicalForm(original);
  SearchOptions o;
  o.matcher = &matcher;
  o.cost = &cost;
  SearchResult r = MakeSearch("pass_order")->Run(g, o);
  ASSERT_FALSE(r.applied.empty());
  EXPECT_EQ(r.applied[0].rfind("pass ", 0), 0u) << r.applied[0];
  EXPECT_LT(r.graph.num_nodes(), original.num_nodes());
  EXPECT_EQ(r.graph.OpCounts().count("BatchNormalization"), 0u);  // folded into the convs
  EXPECT_DOUBLE_EQ(r.final_cost, cost.GraphCost(r.graph));
  std::vector<at::Tensor> in = RandomInputs(original, 3);
  EXPECT_LT(RelativeError(Executor(r.graph).Run(in)[0], Executor(original).Run(in)[0]), 1e-4);

  o.params.Set("agent", "/nonexistent/pass_agent.pt");
  try {
    MakeSearch("pass_order")->Run(g, o);
    ADD_FAILURE() << "no error for a missing agent";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not found"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlflow

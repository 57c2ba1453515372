// Rule-family passes: the families partition the rule database and are
// named by their most specific operator; on every zoo model every family's
// pass keeps the outputs within 1e-5 (relative) and the interface, and
// lowers (never raises) the cost model's estimate; --search=passes runs the
// default order through the same registry.
#include "search/rule_passes.h"

#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/rules/rule.h"
#include "rules/testing.h"
#include "runtime/executor.h"
#include "runtime/table_cost_testing.h"
#include "search/canonical.h"
#include "search/search.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

TEST(RuleFamilies, PartitionTheDatabase) {
  std::vector<rules::Rule> all = testing::AllRules();
  std::map<std::string, std::vector<int>> families = RuleFamilies(all);
  std::set<int> seen;
  size_t total = 0;
  for (const auto& [name, indices] : families) {
    EXPECT_EQ(name.rfind("rules_", 0), 0u) << name;
    EXPECT_FALSE(indices.empty()) << name;
    total += indices.size();
    seen.insert(indices.begin(), indices.end());
  }
  EXPECT_EQ(total, all.size());
  EXPECT_EQ(seen.size(), all.size());
  // A rule with a Conv on either side is in rules_conv, whatever else it has.
  for (int k : families.at("rules_conv")) {
    bool conv = false;
    for (const rules::Pattern* p : {&all[k].source(), &all[k].target()})
      for (const rules::Node& n : p->nodes()) conv = conv || n.op() == "Conv";
    EXPECT_TRUE(conv) << all[k].id();
  }
  EXPECT_GE(families.size(), 10u);
}

// A family's pass uses only the rules its matcher leaves in: a residual Add
// into a LayerNormalization becomes ONNX Runtime's SkipLayerNormalization
// (rules_add) only where the target runs it.
TEST(RuleFamilies, PassesKeepTheMatchersLeftOutRulesOut) {
  GraphBuilder b(2);
  ValueId x = b.Input("x", {1, 8, 16}), y = b.Input("y", {1, 8, 16});
  ValueId sum = b.Op("Add", {x, y});
  Graph g = b.Build({b.Op("LayerNormalization", {sum, b.Uniform("g", {16}, 0.5f, 1.5f), b.Weight("t", {16}, 0.1f)},
                          {{"epsilon", Attribute::Float(1e-5f)}, {"axis", Attribute::Int(-1)}})});
  g.mutable_value(g.outputs()[0]).name = "out";
  std::vector<rules::Rule> all = testing::AllRules();
  testing::TableCost cost;  // every operator 1: fusing pays
  for (const std::string target : {"onnx", "ort"}) {
    Matcher matcher(all, /*both_directions=*/true, RulesEnabledFor(all, target, 17));
    PassRegistry registry = PassesWithRuleFamilies(matcher, &cost);
    Graph h = g;
    registry.Make("rules_add")->Run(h);
    EXPECT_EQ(h.OpCounts()["com.microsoft.SkipLayerNormalization"], target == "ort" ? 1 : 0) << target;
  }
}

std::vector<std::string> Interface(const Graph& g) {
  std::vector<std::string> out;
  for (ValueId v : g.inputs()) out.push_back("in " + g.value(v).name + " " + g.value(v).type.ToString());
  for (ValueId v : g.outputs()) out.push_back("out " + g.value(v).name + " " + g.value(v).type.ToString());
  return out;
}

class ZooRulePasses : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooRulePasses, KeepOutputsAndInterfaceAndLowerTheCost) {
  // The rules the optimiser uses by default (--target=onnx).
  static const Matcher* matcher =
      new Matcher(testing::AllRules(), /*both_directions=*/true, RulesEnabledFor(testing::AllRules(), "onnx", 17));
  AnalyticalCostModel analytical;
  BatchNormAwareCost cost(&analytical);
  PassRegistry registry = PassesWithRuleFamilies(*matcher, &cost);
  const Graph original = zoo::Build(GetParam(), 1);
  std::vector<at::Tensor> in = RandomInputs(original, 5);
  std::vector<at::Tensor> want = Executor(original).Run(in);
  // As imported, and with batch norms lowered (the form the searches see).
  Graph lowered = original;
  registry.Make("lower_batchnorm")->Run(lowered);
  for (const Graph* g : std::vector<const Graph*>{&original, &lowered}) {
    const double c0 = cost.GraphCost(*g);
    int fired = 0;
    for (const PassInfo& p : registry.passes()) {
      if (p.name.rfind("rules_", 0) != 0) continue;
      Graph h = *g;
      if (!p.make()->Run(h)) continue;
      ++fired;
      SCOPED_TRACE(GetParam() + ": " + p.name + (g == &lowered ? " (batch norms lowered)" : ""));
      h.Validate();
      EXPECT_EQ(Interface(h), Interface(original));
      EXPECT_LT(cost.GraphCost(h), c0);
      std::vector<at::Tensor> got = Executor(h).Run(in);
      for (size_t k = 0; k < got.size(); ++k) EXPECT_LT(RelativeError(got[k], want[k]), 1e-5) << "output " << k;
    }
    std::printf("%s%s: %d rule-family passes changed the graph\n", GetParam().c_str(),
                g == &lowered ? " (lowered)" : "", fired);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooRulePasses, ::testing::ValuesIn(zoo::ModelNames()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(PassesSearch, ChecksItsPassNamesAgainstTheRules) {
  Matcher m(testing::AllRules());
  testing::TableCost cost;
  SearchOptions o;
  o.matcher = &m;
  o.cost = &cost;
  // Builtin passes and the rules' families are known; anything else is refused by name.
  o.params.Set("passes", "dce, no_such_pass");
  try {
    MakeSearch("passes")->Resolve(o);
    ADD_FAILURE() << "an unknown pass was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_pass"), std::string::npos) << e.what();
  }
  o.params.Set("passes", "dce, rules_conv");
  EXPECT_EQ(MakeSearch("passes")->Resolve(o).params.List("passes"), (std::vector<std::string>{"dce", "rules_conv"}));
  // Its default: the default order.
  o.params = SearchParams();
  EXPECT_EQ(MakeSearch("passes")->Resolve(o).params.Text("passes"), "");
}

}  // namespace
}  // namespace rlflow

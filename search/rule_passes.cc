#include "search/rule_passes.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <set>

#include "core/error.h"
#include "search/canonical.h"
#include "search/search.h"

namespace rlflow {

const std::vector<std::string>& FamilyOps() {
  static const std::vector<std::string> ops = {"Conv",      "Gemm",   "MatMul", "MaxPool",   "AveragePool",
                                               "Pad",       "Concat", "Split",  "Transpose", "Reshape",
                                               "Unsqueeze", "Relu",   "Div",    "Mul",       "Add"};
  return ops;
}

std::map<std::string, std::vector<int>> RuleFamilies(const std::vector<rules::Rule>& rules) {
  std::map<std::string, std::vector<int>> families;
  for (size_t k = 0; k < rules.size(); ++k) {
    std::set<std::string> ops;
    for (const rules::Pattern* p : {&rules[k].source(), &rules[k].target()})
      for (const rules::Node& n : p->nodes()) ops.insert(n.op());
    std::string family = "rules_other";
    for (const std::string& op : FamilyOps())
      if (ops.count(op)) {
        family = "rules_";
        for (char c : op) family += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        break;
      }
    families[family].push_back(static_cast<int>(k));
  }
  return families;
}

namespace {

class RuleFamilyPass : public Pass {
 public:
  RuleFamilyPass(std::string name, std::shared_ptr<const Matcher> matcher, CostModel* cost, Runner* runner)
      : name_(std::move(name)), matcher_(std::move(matcher)), cost_(cost), runner_(runner) {}
  std::string Name() const override { return name_; }
  std::string Description() const override {
    return "the " + std::to_string(matcher_->rules().size()) + " generated rules whose most specific operator is " +
           name_.substr(6) + ", applied greedily while the cost model says they gain";
  }
  bool Run(Graph& g) const override {
    SearchOptions o;
    o.matcher = matcher_.get();
    o.cost = cost_;
    o.runner = runner_;
    SearchResult r = MakeSearch("greedy")->Run(g, o);
    if (r.applied.empty()) return false;
    g = std::move(r.graph);
    return true;
  }

 private:
  std::string name_;
  std::shared_ptr<const Matcher> matcher_;
  CostModel* cost_;
  Runner* runner_;
};

}  // namespace

PassRegistry PassesWithRuleFamilies(const Matcher& matcher, CostModel* cost, Runner* runner) {
  PassRegistry registry = PassRegistry::Builtin();
  const std::vector<rules::Rule>& all = matcher.rules();
  for (const auto& [name, indices] : RuleFamilies(all)) {
    std::vector<rules::Rule> subset;
    std::vector<char> enabled;
    for (int k : indices) {
      subset.push_back(all[k]);
      enabled.push_back(matcher.enabled(k));
    }
    // The rules `matcher` leaves out (a target's, a newer opset's) stay out.
    auto m = std::make_shared<const Matcher>(subset, /*both_directions=*/true, enabled);
    std::string desc = RuleFamilyPass(name, m, cost, runner).Description();
    registry.Add(PassInfo{name, desc, [name, m, cost, runner] {
                            return std::unique_ptr<Pass>(new RuleFamilyPass(name, m, cost, runner));
                          }});
  }
  return registry;
}

namespace {

// --search=passes: runs SearchOptions::passes (default: DefaultPassOrder())
// with the builtin and rule-family passes.
class PassesSearch : public Search {
 public:
  std::string name() const override { return "passes"; }
  std::string description() const override {
    return "run a list of graph passes in order (--passes; --list_passes prints them)";
  }
  std::vector<SearchParam> Params() const override {
    return {{"passes", "", "the passes, comma-separated, in order (empty: the default order)"}};
  }
  void CheckParams(const SearchOptions& o) const override {
    // Rule-family passes exist only with the rules: checked where known.
    const std::vector<std::string> passes = o.params.List("passes");
    if (o.matcher == nullptr || passes.empty()) return;
    const std::map<std::string, std::vector<int>> families = RuleFamilies(o.matcher->rules());
    for (const std::string& p : passes)
      if (!PassRegistry::Builtin().Has(p) && !families.count(p))
        Fail("unknown pass '", p, "' in --passes (--list_passes prints them)");
  }
  SearchResult Explore(const Graph& graph, const SearchOptions& o, Runner& runner) override {
    CheckSearchOptions(o);
    PassRegistry registry = PassesWithRuleFamilies(*o.matcher, o.cost, &runner);
    std::vector<std::string> list = o.params.List("passes");
    if (list.empty()) list = DefaultPassOrder();
    SearchResult r;
    r.graph = graph;
    r.initial_cost = o.cost->GraphCost(graph);
    PassRunOptions po;
    po.after_pass = [&](const std::string& name, bool changed) {
      ++r.graphs_explored;
      if (changed) r.applied.push_back("pass " + name);
      runner.Say("pass " + name + (changed ? ": changed the graph" : ": no change"));
    };
    po.runner = &runner;
    RunPasses(registry, list, r.graph, po);
    r.final_cost = o.cost->GraphCost(r.graph);
    r.real_steps = r.graphs_explored;        // each pass run on the real graph
    r.stop_reason = StopReason::kExhausted;  // Search::Run puts the runner's reason in its place
    return r;
  }
};
RLFLOW_REGISTER_SEARCH("passes", PassesSearch);

}  // namespace
}  // namespace rlflow

// --search=pass_order: a trained pass-ordering agent (//agents:train_passes)
// picks the passes to run, one at a time, greedily (the most likely pass
// each step) until it stops or reaches its horizon. The episode starts from
// the graph with its lowered batch norms raised back (the form the agent
// was trained on, as imported); the pipeline then folds, checks, measures
// and writes the result like any search's.
#include "agents/pass_env.h"
#include "agents/pass_policy.h"
#include "core/error.h"
#include "core/file_util.h"
#include "search/rule_passes.h"
#include "search/search.h"

namespace rlflow::agents {
namespace {

class PassOrderSearch : public Search {
 public:
  std::string name() const override { return "pass_order"; }
  std::string description() const override {
    return "a trained pass-ordering agent picks which graph pass to run next, and when to stop";
  }
  std::vector<SearchParam> Params() const override {
    return {{"agent", "", "the trained agent (empty: the checked-in agents/pass_agent.pt)", /*path=*/true}};
  }

  SearchResult Explore(const Graph& graph, const SearchOptions& o, Runner& runner) override {
    CheckSearchOptions(o);
    std::string path = o.params.Text("agent");
    if (path.empty()) {
      path = FindRunfile("agents/pass_agent.pt");
      if (path.empty()) Fail("no trained pass-ordering agent: pass --agent=PATH (see //agents:train_passes)");
    }
    PassRegistry registry = PassesWithRuleFamilies(*o.matcher, o.cost, &runner);
    // The agent's actions must be passes this build has.
    std::vector<std::string> actions = PassPolicyActions(path);
    for (const std::string& a : actions)
      if (!registry.Has(a)) Fail("pass-ordering agent ", path, " uses pass '", a, "', which this build does not have");
    PassEnvOptions eo;
    eo.passes = actions;
    eo.runner = &runner;
    std::shared_ptr<PassPolicyImpl> policy = LoadPassPolicy(path, actions, &eo.horizon);
    PassEnv env(&registry, o.cost, eo);
    Graph start = graph;
    registry.Make("raise_batchnorm")->Run(start);
    SearchResult r;
    r.initial_cost = o.cost->GraphCost(graph);
    PassEpisode ep = RunPassEpisode(policy.get(), env, start, /*greedy=*/true);
    r.graphs_explored = env.steps();
    r.real_steps = env.steps();
    for (const std::string& p : ep.applied) {
      r.applied.push_back("pass " + p);
      runner.Say("pass_order: ran " + p);
    }
    r.graph = ep.applied.empty() ? graph : std::move(ep.graph);
    r.final_cost = o.cost->GraphCost(r.graph);
    r.stop_reason = env.steps() >= eo.horizon ? StopReason::kHorizon : StopReason::kStopAction;
    return r;
  }
};

RLFLOW_REGISTER_SEARCH("pass_order", PassOrderSearch);

}  // namespace
}  // namespace rlflow::agents

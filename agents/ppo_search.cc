// --search=ppo: a trained agent (GNN + PPO) searches the rewrite
// environment: one greedy episode (the most likely action each step) and
// `episodes` sampled ones (seeded), optionally after fine-tuning on the
// input graph (`train_steps`); the cheapest graph any episode reached is the
// result, which the pipeline then folds, checks, measures and writes like
// any search's. As taso's, the result is finished by greedy descent
// (--greedy_finish).
#include <random>

#include "agents/env.h"
#include "agents/episode.h"
#include "agents/gnn.h"
#include "core/error.h"
#include "core/file_util.h"
#include "search/search.h"

namespace rlflow::agents {
namespace {

class PpoSearch : public Search {
 public:
  std::string name() const override { return "ppo"; }
  std::string description() const override {
    return "a trained agent (GNN + PPO): one greedy and --episodes sampled episodes, the cheapest graph kept";
  }
  std::vector<SearchParam> Params() const override {
    return {{"agent", "", "the trained agent (empty: the checked-in agents/zoo_agent.pt)", /*path=*/true},
            {"episodes", "8", "sampled episodes after the greedy one"},
            {"horizon", "100", "steps per episode"},
            {"train_steps", "0", "environment steps of fine-tuning on the input graph first"}};
  }
  void CheckParams(const SearchOptions& o) const override {
    o.params.Int("episodes", 0);
    o.params.Int("horizon", 1);
    o.params.Int("train_steps", 0);
  }

  SearchResult Explore(const Graph& graph, const SearchOptions& o, Runner& runner) override {
    CheckSearchOptions(o);
    const int64_t episodes = o.params.Int("episodes", 0), horizon = o.params.Int("horizon", 1),
                  train_steps = o.params.Int("train_steps", 0);
    std::string path = o.params.Text("agent");
    if (path.empty()) {
      path = FindRunfile("agents/zoo_agent.pt");
      if (path.empty()) Fail("no trained agent: pass --agent=PATH (see //agents:train)");
    }
    std::shared_ptr<PolicyImpl> policy = LoadPolicyForInference(path, RuleIds(o.matcher->rules()));
    EnvOptions eo;
    eo.horizon = static_cast<int>(horizon);
    eo.max_growth = o.max_growth;
    eo.seed = o.seed;
    eo.runner = &runner;
    RewriteEnv env(o.matcher, o.cost, eo);
    SearchResult r;
    if (train_steps > 0) FineTunePolicy(policy, env, graph, train_steps, o.seed, runner);
    std::mt19937_64 rng(o.seed);
    EpisodeResult best;
    bool have = false;
    r.stop_reason = StopReason::kExhausted;
    for (int e = 0; e <= episodes; ++e) {
      if (runner.ShouldStop()) break;  // Search::Run reports the runner's reason
      EpisodeResult ep = RunEpisode(*policy, env, graph, /*greedy=*/e == 0, &rng);
      r.graphs_explored += ep.steps;
      if (!have || ep.best_cost < best.best_cost) {
        best = ep;
        have = true;
      }
      runner.Say("ppo episode " + std::to_string(e) + (e == 0 ? " (greedy)" : " (sampled)") + ": cost " +
                 std::to_string(ep.initial_cost) + " -> " + std::to_string(ep.best_cost) + " ms");
    }
    r.real_steps = env.real_steps();  // fine-tuning and episodes
    if (!have) {
      r.graph = graph;
      r.initial_cost = r.final_cost = o.cost->GraphCost(graph);
      return r;
    }
    r.graph = best.best.graph();
    r.applied = best.best.Applied();
    r.initial_cost = best.initial_cost;
    r.final_cost = best.best_cost;
    GreedyFinish(&r, o);
    return r;
  }
};

RLFLOW_REGISTER_SEARCH("ppo", PpoSearch);

}  // namespace
}  // namespace rlflow::agents

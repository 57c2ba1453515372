// --search=world_model: the controller trained in the world model's dream
// (//world_model:dream) acts in the real rewrite environment. Each step the
// state's latent (the same frozen encoder the world model was trained on)
// goes to the controller; its choices are restricted to the rule actions
// valid in the real state (the real mask: "real masks only keep its actions
// valid there"), and the chosen rule action is applied at the location the
// cost model estimates best. One greedy episode (the controller's most
// likely action each step); the cheapest graph reached is the result,
// finished by greedy descent like taso's and ppo's (--greedy_finish). The
// agent is a directory with controller.pt and world_model.pt (default: the
// checked-in world_model/agent/).
#include <algorithm>

#include "agents/env.h"
#include "agents/gnn.h"
#include "core/error.h"
#include "core/file_util.h"
#include "search/search.h"
#include "world_model/controller_episode.h"
#include "world_model/encoder.h"

namespace rlflow::world_model {
namespace {

class WorldModelSearch : public Search {
 public:
  std::string name() const override { return "world_model"; }
  std::string description() const override {
    return "a controller trained in a learned world model's dream (RLFlow) acts on the real graph";
  }
  std::vector<SearchParam> Params() const override {
    return {
        {"agent", "", "a directory with controller.pt and world_model.pt (empty: the checked-in world_model/agent/)",
         /*path=*/true},
        {"horizon", "100", "steps of the episode"}};
  }
  void CheckParams(const SearchOptions& o) const override { o.params.Int("horizon", 1); }

  SearchResult Explore(const Graph& graph, const SearchOptions& o, Runner& runner) override {
    CheckSearchOptions(o);
    const int64_t horizon = o.params.Int("horizon", 1);
    std::string dir = o.params.Text("agent");
    if (dir.empty()) {
      std::string c = FindRunfile("world_model/agent/controller.pt");
      if (c.empty()) Fail("no trained controller: pass --agent=DIR (see //world_model:dream)");
      dir = c.substr(0, c.rfind('/'));
    }
    const std::vector<std::string> ids = agents::RuleIds(o.matcher->rules());
    std::string encoder_path = FindRunfile("agents/zoo_agent.pt");
    if (encoder_path.empty()) Fail("the encoder agents/zoo_agent.pt was not found");
    LatentEncoder encoder(encoder_path, ids);
    DreamAgent agent = LoadDreamAgent(dir, ids, encoder.size());
    agents::EnvOptions eo;
    eo.horizon = static_cast<int>(horizon);
    eo.max_growth = o.max_growth;
    eo.seed = o.seed;
    eo.runner = &runner;
    agents::RewriteEnv env(o.matcher, o.cost, eo);
    ControllerEpisode ep = RunControllerEpisode(*agent.controller, agent.vocabulary, encoder, env, graph);
    SearchResult r;
    r.initial_cost = ep.initial_cost;
    r.final_cost = ep.best_cost;
    r.graphs_explored = ep.steps;
    r.stop_reason = ep.interrupted           ? StopReason::kInterrupted
                    : env.steps() >= horizon ? StopReason::kHorizon
                                             : StopReason::kStopAction;
    RewriteState best = ep.best;
    r.real_steps = env.real_steps();
    r.graph = best.graph();
    r.applied = best.Applied();
    runner.Say("world_model controller: " + std::to_string(env.steps()) + " steps, cost " +
               std::to_string(r.initial_cost) + " -> " + std::to_string(r.final_cost) + " ms");
    GreedyFinish(&r, o);
    return r;
  }
};

RLFLOW_REGISTER_SEARCH("world_model", WorldModelSearch);

}  // namespace
}  // namespace rlflow::world_model

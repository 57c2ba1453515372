#include "world_model/controller_episode.h"

#include <algorithm>

#include "agents/gnn.h"
#include "agents/ppo.h"
#include "core/error.h"
#include "core/file_util.h"
#include "world_model/dream.h"
#include "world_model/train.h"
#include "world_model/world_model.h"

namespace rlflow::world_model {

DreamAgent LoadDreamAgent(const std::string& dir, const std::vector<std::string>& database_ids, int latent) {
  if (!FileExists(dir + "/controller.pt") || !FileExists(dir + "/world_model.pt"))
    Fail("'", dir, "' must be a directory with controller.pt and world_model.pt (of //world_model:dream)");
  DreamAgent a;
  a.model = LoadWorldModel(dir + "/world_model.pt");
  a.controller = LoadController(dir + "/controller.pt").ptr();
  a.controller->eval();
  const WorldModelOptions& mo = a.model->options();
  a.vocabulary = mo.vocabulary;
  if (!database_ids.empty() && mo.rule_ids.empty() && mo.rule_actions != 2 * static_cast<int>(database_ids.size()))
    Fail("the world model in '", dir, "' was trained with ", mo.rule_actions / 2, " rules, the rule database has ",
         database_ids.size(),
         " (the model does not record which, so it cannot act on another database): train it "
         "on this database");
  if (!database_ids.empty() && !mo.rule_ids.empty() && mo.rule_ids != database_ids) {
    const std::vector<int> there = agents::IndexByRuleId(mo.rule_ids, database_ids);
    int found = 0;
    for (int64_t& action : a.vocabulary) {
      const int rule = there[static_cast<size_t>(action / 2)];
      action = rule < 0 ? -1 : 2 * rule + action % 2;
      found += action >= 0;
    }
    if (found == 0)
      Fail("the world model in '", dir, "' knows none of the rule database's ", database_ids.size(),
           " rules: train it on this database");
  }
  if (a.controller->vocabulary() != a.model->vocabulary_size() || (latent > 0 && a.controller->latent() != latent))
    Fail("the controller in '", dir, "' does not fit its world model or the encoder (vocabulary ",
         a.controller->vocabulary(), " vs ", a.model->vocabulary_size(), ", latent ", a.controller->latent(), " vs ",
         latent > 0 ? latent : a.controller->latent(), ")");
  return a;
}

DreamObservation ObserveReal(const agents::Observation& obs, const std::vector<int64_t>& vocabulary,
                             std::vector<float> latent, float step_fraction) {
  const int v = static_cast<int>(vocabulary.size());
  DreamObservation d;
  d.latent = std::move(latent);
  d.valid.assign(v, 0);
  d.locations.assign(v, 0);
  for (int j = 0; j < v; ++j) {
    if (vocabulary[j] < 0) continue;  // a rule the database lacks
    d.valid[j] = obs.rule_mask[vocabulary[j]];
    d.locations[j] = static_cast<int>(obs.locations[vocabulary[j]].size());
  }
  d.step_fraction = step_fraction;
  return d;
}

int SampleControllerRule(ControllerImpl& controller, const std::vector<int64_t>& vocabulary,
                         const agents::Observation& obs, std::vector<float> latent, float step_fraction,
                         std::mt19937_64& rng) {
  torch::NoGradGuard no_grad;
  DreamObservation d = ObserveReal(obs, vocabulary, std::move(latent), step_fraction);
  ControllerImpl::Output p = controller.forward({&d});
  torch::Tensor logp = torch::log_softmax(agents::MaskLogits(p.logits, p.mask), -1)[0];
  const int a = static_cast<int>(agents::SampleAction(logp, p.mask[0], rng));
  return a < static_cast<int>(vocabulary.size()) ? static_cast<int>(vocabulary[a]) : -1;
}

ControllerEpisode RunControllerEpisode(ControllerImpl& controller, const std::vector<int64_t>& vocabulary,
                                       LatentEncoder& encoder, agents::RewriteEnv& env, const Graph& graph,
                                       const std::atomic<bool>* interrupted) {
  torch::NoGradGuard no_grad;
  const int v = static_cast<int>(vocabulary.size());
  env.Reset(graph);
  ControllerEpisode r;
  r.best = env.state();
  r.initial_cost = r.best_cost = env.state().cost();
  while (!env.done()) {
    if (interrupted != nullptr && interrupted->load()) {
      r.interrupted = true;
      break;
    }
    const agents::Observation& obs = env.observation();
    DreamObservation d =
        ObserveReal(obs, vocabulary, encoder.Encode(obs), static_cast<float>(env.steps()) / env.options().horizon);
    ControllerImpl::Output out = controller.forward({&d});
    const int a =
        static_cast<int>(out.logits[0].masked_fill(out.mask[0].logical_not(), -1e30).argmax().item<int64_t>());
    int flat = obs.stop_action();
    if (a < v) {
      const std::vector<int32_t>& locs = obs.locations[vocabulary[a]];
      flat = *std::max_element(locs.begin(), locs.end(), [&](int32_t x, int32_t y) {
        return obs.candidates[x].estimated_gain < obs.candidates[y].estimated_gain;
      });
    }
    agents::StepResult s = env.Step(flat);
    ++r.steps;
    if (s.info.valid && env.state().cost() < r.best_cost) {
      r.best_cost = env.state().cost();
      r.best = env.state();
    }
  }
  return r;
}

}  // namespace rlflow::world_model

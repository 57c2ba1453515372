#include "world_model/controller_episode.h"

#include <algorithm>

#include "agents/ppo.h"
#include "core/error.h"
#include "core/file_util.h"
#include "world_model/dream.h"
#include "world_model/train.h"
#include "world_model/world_model.h"

namespace rlflow::world_model {

DreamAgent LoadDreamAgent(const std::string& dir, int rule_actions, int latent) {
  if (!FileExists(dir + "/controller.pt") || !FileExists(dir + "/world_model.pt"))
    Fail("'", dir, "' must be a directory with controller.pt and world_model.pt (of //world_model:dream)");
  DreamAgent a;
  a.model = LoadWorldModel(dir + "/world_model.pt");
  a.controller = LoadController(dir + "/controller.pt").ptr();
  a.controller->eval();
  if (rule_actions > 0 && a.model->options().rule_actions != rule_actions)
    Fail("the world model in '", dir, "' was trained with ", a.model->options().rule_actions / 2,
         " rules, the rule database has ", rule_actions / 2, ": train it on this database");
  if (a.controller->vocabulary() != a.model->vocabulary_size() || (latent > 0 && a.controller->latent() != latent))
    Fail("the controller in '", dir, "' does not fit its world model or the encoder (vocabulary ",
         a.controller->vocabulary(), " vs ", a.model->vocabulary_size(), ", latent ", a.controller->latent(), " vs ",
         latent > 0 ? latent : a.controller->latent(), ")");
  return a;
}

DreamObservation ObserveReal(const agents::Observation& obs, const WorldModelImpl& model, std::vector<float> latent,
                             float step_fraction) {
  const std::vector<int64_t>& vocabulary = model.options().vocabulary;
  const int v = model.vocabulary_size();
  DreamObservation d;
  d.latent = std::move(latent);
  d.valid.assign(v, 0);
  d.locations.assign(v, 0);
  for (int j = 0; j < v; ++j) {
    d.valid[j] = obs.rule_mask[vocabulary[j]];
    d.locations[j] = static_cast<int>(obs.locations[vocabulary[j]].size());
  }
  d.step_fraction = step_fraction;
  return d;
}

int SampleControllerRule(ControllerImpl& controller, const WorldModelImpl& model, const agents::Observation& obs,
                         std::vector<float> latent, float step_fraction, std::mt19937_64& rng) {
  torch::NoGradGuard no_grad;
  DreamObservation d = ObserveReal(obs, model, std::move(latent), step_fraction);
  ControllerImpl::Output p = controller.forward({&d});
  torch::Tensor logp = torch::log_softmax(agents::MaskLogits(p.logits, p.mask), -1)[0];
  const int a = static_cast<int>(agents::SampleAction(logp, p.mask[0], rng));
  return a < model.vocabulary_size() ? static_cast<int>(model.options().vocabulary[a]) : -1;
}

ControllerEpisode RunControllerEpisode(ControllerImpl& controller, const WorldModelImpl& model, LatentEncoder& encoder,
                                       agents::RewriteEnv& env, const Graph& graph,
                                       const std::atomic<bool>* interrupted) {
  torch::NoGradGuard no_grad;
  const std::vector<int64_t>& vocabulary = model.options().vocabulary;
  const int v = model.vocabulary_size();
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
        ObserveReal(obs, model, encoder.Encode(obs), static_cast<float>(env.steps()) / env.options().horizon);
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

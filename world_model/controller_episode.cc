#include "world_model/controller_episode.h"

#include <algorithm>

namespace rlflow::world_model {

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

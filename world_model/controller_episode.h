#pragma once
// The dream-trained controller acting in the real rewrite environment
// (--search=world_model, the temperature sweep): each step the state's
// latent (the encoder the world model was trained on) and the real valid
// actions go to the controller; its most likely action among them is
// taken, a rule action at the location the cost model estimates best.
#include "agents/env.h"
#include "search/engine.h"
#include "world_model/dream.h"
#include "world_model/encoder.h"

namespace rlflow::world_model {

struct ControllerEpisode {
  RewriteState best;  // the cheapest state reached
  double initial_cost = 0, best_cost = 0;
  int steps = 0;
  bool interrupted = false;
};

// The controller's observation of a real state: `latent` (the encoder's
// for `obs`), the real valid actions and location counts in `model`'s
// vocabulary, and the step fraction.
DreamObservation ObserveReal(const agents::Observation& obs, const WorldModelImpl& model, std::vector<float> latent,
                             float step_fraction);

// Runs one greedy episode from `graph` (reset) until the controller stops,
// the horizon, or `interrupted`. The controller's vocabulary is `model`'s.
ControllerEpisode RunControllerEpisode(ControllerImpl& controller, const WorldModelImpl& model, LatentEncoder& encoder,
                                       agents::RewriteEnv& env, const Graph& graph,
                                       const std::atomic<bool>* interrupted = nullptr);

}  // namespace rlflow::world_model

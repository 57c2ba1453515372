#pragma once
// The dream-trained controller acting in the real rewrite environment
// (--search=world_model, the temperature sweep): each step the state's
// latent (the encoder the world model was trained on) and the real valid
// actions go to the controller; its most likely action among them is
// taken, a rule action at the location the cost model estimates best.
//
// libtorch's C++ API stays out of this header (world_model/dream.h and
// world_model/world_model.h have the classes): it costs 15-25 s of
// compilation in each file that reaches it.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "agents/env.h"
#include "search/engine.h"
#include "world_model/encoder.h"

namespace rlflow::world_model {

struct DreamObservation;  // world_model/dream.h
class ControllerImpl;     // world_model/dream.h
class WorldModelImpl;     // world_model/world_model.h
using WorldModel = std::shared_ptr<WorldModelImpl>;

// A controller and the world model it was trained in, from a directory of
// //world_model:dream (controller.pt, world_model.pt), in evaluation mode.
// rlflow::Error, naming the directory, if either is missing or corrupt, if
// the model was trained on a rule database with another number of rule
// actions than `rule_actions` (0: not checked), or if the controller does
// not fit the model's vocabulary or a latent of size `latent` (0: not
// checked).
struct DreamAgent {
  std::shared_ptr<ControllerImpl> controller;
  WorldModel model;
};
DreamAgent LoadDreamAgent(const std::string& dir, int rule_actions = 0, int latent = 0);

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

// The controller's action in a real state (ObserveReal's observation),
// sampled with `rng` among the valid ones: a rule action of the environment,
// or -1 to stop.
int SampleControllerRule(ControllerImpl& controller, const WorldModelImpl& model, const agents::Observation& obs,
                         std::vector<float> latent, float step_fraction, std::mt19937_64& rng);

// Runs one greedy episode from `graph` (reset) until the controller stops,
// the horizon, or `interrupted`. The controller's vocabulary is `model`'s.
ControllerEpisode RunControllerEpisode(ControllerImpl& controller, const WorldModelImpl& model, LatentEncoder& encoder,
                                       agents::RewriteEnv& env, const Graph& graph,
                                       const std::atomic<bool>* interrupted = nullptr);

}  // namespace rlflow::world_model

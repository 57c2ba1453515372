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
// //world_model:dream (controller.pt, world_model.pt), in evaluation mode,
// to act on the rule database whose rule ids are `database_ids` (empty:
// the model's own): by rule id where the model records its database's ids
// (a database regenerated or grown since), else by position. rlflow::Error,
// naming the directory, if either file is missing or corrupt, if the model
// records no ids and its database had another number of rules, if the
// database has none of its vocabulary's rules, or if the controller does
// not fit the model's vocabulary or a latent of size `latent` (0: not
// checked).
struct DreamAgent {
  std::shared_ptr<ControllerImpl> controller;
  WorldModel model;
  // Per vocabulary action of the model: the database's rule action (-1: a
  // rule the database lacks, never valid).
  std::vector<int64_t> vocabulary;
};
DreamAgent LoadDreamAgent(const std::string& dir, const std::vector<std::string>& database_ids = {}, int latent = 0);

struct ControllerEpisode {
  RewriteState best;  // the cheapest state reached
  double initial_cost = 0, best_cost = 0;
  int steps = 0;
  bool interrupted = false;
};

// The controller's observation of a real state: `latent` (the encoder's
// for `obs`), the real valid actions and location counts of the
// vocabulary (per vocabulary action the environment's rule action, -1
// for none: DreamAgent::vocabulary, or a model's own), and the step
// fraction.
DreamObservation ObserveReal(const agents::Observation& obs, const std::vector<int64_t>& vocabulary,
                             std::vector<float> latent, float step_fraction);

// The controller's action in a real state (ObserveReal's observation),
// sampled with `rng` among the valid ones: a rule action of the environment,
// or -1 to stop.
int SampleControllerRule(ControllerImpl& controller, const std::vector<int64_t>& vocabulary,
                         const agents::Observation& obs, std::vector<float> latent, float step_fraction,
                         std::mt19937_64& rng);

// Runs one greedy episode from `graph` (reset) until the controller stops,
// the horizon, or `interrupted`. `vocabulary` as for ObserveReal.
ControllerEpisode RunControllerEpisode(ControllerImpl& controller, const std::vector<int64_t>& vocabulary,
                                       LatentEncoder& encoder, agents::RewriteEnv& env, const Graph& graph,
                                       const std::atomic<bool>* interrupted = nullptr);

}  // namespace rlflow::world_model

#pragma once
// Rollouts of the real rewrite environment for the world model (issue #23):
// episodes on the given models, acted by a uniform random policy or a
// trained agent, each step recorded with the latent of the state it was
// taken in, the action in the dream's action space (rule action, location),
// the reward, done and the valid actions of the next state
// (world_model/rollouts.h for the file).
//
// The dream's action space is RLFlow's hierarchical one: a rule action
// (2 x rule + reverse) that is valid in the state, then one of its
// locations (at most EnvOptions::max_locations, in the environment's
// order), or stop. A dream action maps to the real environment's flat
// action with RewriteEnv::FlatAction(rule_action, location).
//
// Episode k uses model k mod M and a seed derived from (seed, k) alone, so
// a collection resumed after a kill writes what an uninterrupted one would.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/rewrite/matcher.h"
#include "core/rules/rule.h"
#include "runtime/cost_model.h"

namespace rlflow::world_model {

class LatentEncoder;  // world_model/encoder.h (libtorch; not needed by the callers of Collect)

struct CollectOptions {
  std::vector<std::string> models;  // zoo names or ONNX files
  int episodes = 16;
  std::string policy = "random";  // "random" or an agent (agent.pt of //agents:train)
  // Or a dream-trained controller (a directory with controller.pt and
  // world_model.pt, //world_model:dream), the loop's later rounds: its rule
  // action sampled from its distribution over the valid ones in its
  // vocabulary (or stop), at a location drawn uniformly, as the dream draws
  // them; with probability `epsilon` a uniform random action instead, so
  // that actions outside its vocabulary are still tried. Overrides policy.
  std::string controller;
  double epsilon = 0.2;
  // Where a chosen rule action is applied: "uniform" (any of its
  // locations, at random) or "best" (the location the cost model estimates
  // best, as the controller applies it in the real environment).
  std::string locations = "uniform";
  // The file's episode k is the collection's episode first_episode + k:
  // model (first_episode + k) mod M, seed from (seed, first_episode + k).
  int first_episode = 0;
  std::string out;  // the rollout file
  uint64_t seed = 1;
  int horizon = 50;
  std::string encoder;              // agent whose GNN makes the latents ("": agents/zoo_agent.pt)
  std::string rules;                // "": the checked-in database
  std::string cost = "analytical";  // or "measured" (operators timed on this machine)
  std::string reward = "normalised";
  std::string argv0;  // for runfiles
  std::function<void(const std::string&)> progress;
  const std::atomic<bool>* interrupted = nullptr;  // stops after the episode in progress is written
};

struct CollectResult {
  int episodes = 0;      // in the file
  int new_episodes = 0;  // collected by this call (the others were resumed)
  int64_t steps = 0;     // in the file
  // Real work of this call: environment steps and graphs timed on the device.
  int64_t real_steps = 0, real_measurements = 0;
  bool finished = false;  // the file was completed (not interrupted)
  // How well the latent separates states of one model that differ in cost:
  // Spearman's rank correlation between latent distance and cost
  // difference over `pairs` random pairs of states of the same model.
  double latent_cost_correlation = 0;
  int pairs = 0;
};

// rlflow::Error on bad options, models or files (nothing but PATH.partial
// is written before the first episode completes).
CollectResult Collect(const CollectOptions& options);

// The real environment's parts, as the collection and the loop's
// evaluation build them: the rule database's rules that produce no
// runtime's own operators, the frozen encoder, the models in canonical
// form (zoo weights from `seed`), and the cost model ("analytical", or
// "measured": each graph calibrated on the CPU) over a counting backend.
struct RealWorld {
  std::vector<rules::Rule> rules;
  std::unique_ptr<Matcher> matcher;
  std::string encoder_path;
  std::unique_ptr<LatentEncoder> encoder;
  std::vector<Graph> graphs;
  std::unique_ptr<TimingBackend> device;
  std::unique_ptr<CountingBackend> counted;
  std::unique_ptr<CostModel> base;  // analytical or measured
  std::unique_ptr<CostModel> cost;  // batch-norm aware, over `base`
  int rule_actions() const { return 2 * static_cast<int>(rules.size()); }
  ~RealWorld();  // in collect.cc, where LatentEncoder is complete
};
// `rules` and `encoder` "" for the checked-in ones (found from argv0).
// rlflow::Error on a bad cost kind, missing files or models.
std::unique_ptr<RealWorld> MakeRealWorld(const std::vector<std::string>& models, uint64_t seed, const std::string& cost,
                                         const std::string& rules, const std::string& encoder,
                                         const std::string& argv0);

}  // namespace rlflow::world_model

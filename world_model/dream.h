#pragma once
// Training a controller entirely inside the world model (issue #23; World
// Models, RLFlow): the dream is an environment whose states are latents
// sampled from the world model (either kind), whose valid actions are the mask head's and
// whose rewards and episode ends are its reward and done heads. Nothing in
// it touches a graph, a rule or the real rewrite environment: its episodes
// start from recorded initial states (the latent and the valid actions of
// each model's graph, from a rollout file), and the controller is trained
// by the same PPO as the model-free agent (agents/ppo.h's BasicPpoTrainer).
//
// The dream's actions: one of the model's vocabulary of rule actions that
// is valid in the state, or stop. A rule action's location is drawn
// uniformly from its predicted number of locations (locations have no
// identity in the latent: the random collection policy drew them so too).
// In the real environment (OptimiseWithController) the controller's rule
// action is applied at the location the cost model estimates best.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "third_party/torch_nn.h"
#include "world_model/rollouts.h"
#include "world_model/world_model.h"

namespace rlflow::world_model {

struct DreamObservation {
  std::vector<float> latent;   // z_t
  std::vector<uint8_t> valid;  // per vocabulary action
  std::vector<int> locations;  // per vocabulary action: its number of locations (0 if not valid)
  float step_fraction = 0;     // step / horizon
};

// Where a dream episode starts: a recorded state of a model's graph.
struct DreamStart {
  std::string model;
  DreamObservation state;
};

// The starts of the dreams, expressed in `model`'s vocabulary: one per
// model of `data` (its first episode's initial state; `all` false), or
// every recorded state of every episode (`all` true; DreamerV3 imagines
// from every replayed state): the initial states first, one per model,
// then the others in a shuffle seeded by `seed`.
std::vector<DreamStart> DreamStarts(const Rollouts& data, const WorldModelImpl& model, bool all = false,
                                    uint64_t seed = 1);

struct DreamOptions {
  double tau = 1.0;  // sampling temperature
  int horizon = 50;
  uint64_t seed = 1;
};

struct DreamStepResult {
  double reward = 0;
  bool done = false;
};

class DreamEnv {
 public:
  DreamEnv(WorldModel model, DreamOptions options);
  const DreamObservation& Reset(const DreamStart& start);
  // 0 .. V - 1: the vocabulary's rule action; V: stop. An action that is not
  // valid ends the episode with reward 0.
  DreamStepResult Step(int action);
  const DreamObservation& observation() const { return obs_; }
  int actions() const { return model_->vocabulary_size() + 1; }
  int64_t steps() const { return steps_total_; }  // dream steps since construction
  const WorldModel& model() const { return model_; }

 private:
  WorldModel model_;
  DreamOptions o_;
  std::mt19937_64 rng_;
  DreamObservation obs_;
  WorldModelImpl::State state_;
  bool have_state_ = false, done_ = true;
  int steps_ = 0;
  int64_t steps_total_ = 0;
};

// The controller: an MLP over the latent and the step fraction scoring each
// vocabulary rule action and stop, and a value; invalid actions masked.
class ControllerImpl : public torch::nn::Module {
 public:
  ControllerImpl(int latent, int vocabulary, int hidden = 128);
  struct Output {
    torch::Tensor logits;  // [B, V + 1]
    torch::Tensor mask;    // [B, V + 1] bool
    torch::Tensor value;   // [B]
  };
  Output forward(const std::vector<const DreamObservation*>& observations);
  int latent() const { return latent_; }
  int vocabulary() const { return vocabulary_; }

 private:
  int latent_, vocabulary_;
  torch::nn::Sequential body_{nullptr};
  torch::nn::Linear policy_{nullptr}, value_{nullptr};
};
TORCH_MODULE(Controller);

// Saved with its sizes (atomically); Load throws rlflow::Error naming the file.
void SaveController(ControllerImpl& controller, const std::string& path);
Controller LoadController(const std::string& path);

}  // namespace rlflow::world_model

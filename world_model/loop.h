#pragma once
// The model-based agent's whole loop (issue #23), the library behind
// //world_model:loop: for each round, collect episodes in the real rewrite
// environment (round 1: the uniform random policy; later rounds: the
// previous round's dream-trained controller, epsilon-greedy, Dyna-style),
// train the world model on every round's episodes so far, train a
// controller in its dream, and evaluate that controller in the real
// environment on each model (one greedy episode, the cost model the
// episodes were collected with), beside the model-free agent the project
// ships (agents/zoo_agent.pt: PPO + GNN, trained with 20,480 real steps on
// resnet18, squeezenet1_1 and inception_v3), whose greedy episode in the
// same environment is the reference.
//
// OUT/round_K/ holds new.rollouts (this round's episodes), data.rollouts
// (all rounds' so far; round 1 uses new.rollouts), wm/ (//world_model:train's
// run directory), dream/ (//world_model:dream's: controller.pt and
// world_model.pt, what --search=world_model --agent=DIR loads) and
// eval.json; OUT/summary.json has every round's figures. Every stage
// resumes (collection from PATH.partial, training from its checkpoints)
// and a finished stage is not run again, so the same command after a kill
// goes on where it stopped and computes what an uninterrupted run does.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace rlflow::world_model {

struct LoopOptions {
  std::vector<std::string> models;  // zoo names or ONNX files
  int rounds = 1;
  int episodes = 100;  // collected per round
  std::string out;
  uint64_t seed = 1;
  int horizon = 50;
  double epsilon = 0.2;                      // later rounds: the controller's exploration
  int epochs = 30;                           // world-model training
  std::string reward_loss = "huber";         // TrainOptions::reward_loss
  std::string lr_schedule = "cosine";        // TrainOptions::lr_schedule
  std::string world_model_kind = "mdn_rnn";  // TrainOptions::kind
  int64_t dream_steps = 20480;
  double tau = 1.0;
  std::string cost = "analytical";
  std::string locations = "uniform";  // CollectOptions::locations
  std::string reward = "normalised";  // the collections' (end_to_end: graphs timed on this machine)
  std::string argv0;                  // for runfiles
  std::function<void(const std::string&)> progress;
  const std::atomic<bool>* interrupted = nullptr;
};

struct LoopRound {
  int round = 0;
  int episodes = 0;               // collected this round
  int64_t real_steps = 0;         // environment steps of this round's collection
  int64_t real_steps_total = 0;   // of every collection so far (what the controller was trained from)
  int64_t eval_real_steps = 0;    // of this round's evaluation episodes
  int64_t real_measurements = 0;  // graphs timed by this round's collection (the end_to_end reward)
  int64_t dream_steps = 0;
  double latent_error_1 = 0, reward_mae = 0, mask_recall = 0;  // held-out (TrainWorldModel)
  struct ModelResult {
    double initial_cost = 0, best_cost = 0;  // of the greedy episode (ms, the collection's cost model)
    double improvement = 0;                  // (initial - best) / initial
    int steps = 0;
    double model_free_improvement = 0;  // the shipped model-free agent's, same environment
    int model_free_steps = 0;
  };
  std::map<std::string, ModelResult> models;
};

struct LoopResult {
  std::vector<LoopRound> rounds;  // those finished
  bool finished = false;          // every round (not interrupted)
};

// rlflow::Error on bad options, models or files.
LoopResult RunLoop(const LoopOptions& options);

}  // namespace rlflow::world_model

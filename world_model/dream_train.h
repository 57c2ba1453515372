#pragma once
// Training a controller in the dream, the library behind //world_model:dream
// and the loop (//world_model:loop): a TrainingRun directory
// (agents/training_run.h: config.txt, metrics.csv, checkpoint.pt,
// resumed after a kill), then controller.pt, a copy of the world model
// (world_model.pt) and summary.json. The real rewrite environment is never
// stepped (summary.json's real_steps counts any step of the process while
// training, and is 0).
#include <cstdint>
#include <string>

namespace rlflow::world_model {

struct DreamTrainOptions {
  std::string world_model;  // world_model.pt of TrainWorldModel, or its directory
  std::string data;         // the rollout file whose states start the dreams
  // Where dream episodes start: "initial" (each model's recorded initial
  // state, in turn) or "all": every other episode from an initial state,
  // the others from every recorded state in turn (a seeded shuffle,
  // DreamStarts), so the controller learns the states a random policy
  // reached as well as the one it starts from in the real environment.
  std::string starts = "initial";
  std::string out;  // the run directory
  double tau = 1.0;
  int64_t steps = 20480;  // dream steps (whole updates)
  int horizon = 50;
  uint64_t seed = 1;
  int hidden = 128;
  int rollout_steps = 256;
  int epochs = 4;
  int minibatches = 4;
  double lr = 3e-4;
};

struct DreamTrainResult {
  int64_t updates = 0, dream_steps = 0;
  int64_t real_steps = 0;  // real environment steps while training (0)
  bool finished = false;   // reached `steps` (not interrupted)
  std::string controller;  // path of controller.pt ("" if not finished)
};

// rlflow::Error on bad options or files.
DreamTrainResult TrainController(const DreamTrainOptions& options);

}  // namespace rlflow::world_model

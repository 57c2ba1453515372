#pragma once
// The training binaries' shared loop (//agents:train, //agents:train_passes):
// an output directory with config.txt (a different configuration in an
// existing directory is an error), metrics.csv (one row per update),
// training.png (gnuplot), checkpoint.pt (policy, optimiser, counters and the
// sampler's state, written atomically after every update). Started again
// with the same command after a crash or kill -9, training resumes from the
// last checkpoint: at most one update is lost. Progress goes to stdout;
// Ctrl-C stops after the current update with the checkpoint kept.
#include <functional>
#include <string>

#include "agents/ppo.h"

namespace rlflow::train {

struct TrainingRun {
  std::string dir;     // created if missing (each level)
  std::string config;  // everything that changes what training computes
  int64_t steps = 0;   // environment steps to train for (whole updates)
};

// Creates the directory and checks or writes config.txt; returns whether a
// checkpoint is there to resume from. Throws rlflow::Error.
bool PrepareRun(const TrainingRun& run);

// Resumes from the checkpoint if PrepareRun found one (then calls
// `on_resumed`), and trains until `steps` environment steps or an interrupt.
void RunTraining(const TrainingRun& run, agents::PpoTrainerBase& trainer, bool resume,
                 const std::function<void()>& on_resumed = {});

}  // namespace rlflow::train

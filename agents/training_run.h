#pragma once
// The training binaries' shared loop (//agents:train, //agents:train_passes):
// an output directory with config.txt (a different configuration in an
// existing directory is an error), metrics.csv (one row per update),
// training.png (gnuplot), checkpoint.pt (policy, optimiser, counters and the
// sampler's state, written atomically after every update). Started again
// with the same command after a crash or kill -9, training resumes from the
// last checkpoint: at most one update is lost. Progress goes to stdout;
// Ctrl-C stops after the current update with the checkpoint kept.
//
// Started by `mpirun -np N` (or srun), the N ranks are N data-parallel
// workers (DD-PPO): each collects its own rollouts, the gradients of every
// minibatch are averaged over them (agents::Workers over MPI), and the
// parameters stay the same on every rank. Rank 0 alone owns the directory
// (config, metrics, plot, checkpoint: the other ranks need no shared file
// system) and sends the parameters, or the checkpoint it resumes from, to the
// others; the checkpoint holds every rank's sampler state. `steps` counts
// the steps of all workers; an interrupt on any rank stops all of them after
// the same update.
#include <functional>
#include <string>

#include "agents/ppo.h"
#include "core/mpi.h"

namespace rlflow::train {

// The ranks of this process's MPI job as PPO workers (one worker without
// mpirun).
agents::Workers& MpiWorkers();

struct TrainingRun {
  std::string dir;     // created if missing (each level)
  std::string config;  // everything that changes what training computes
  int64_t steps = 0;   // environment steps to train for (whole updates)
};

// Creates the directory and checks or writes config.txt (rank 0); returns,
// on every rank, whether a checkpoint is there to resume from. Throws
// rlflow::Error.
bool PrepareRun(const TrainingRun& run);

// Resumes from the checkpoint if PrepareRun found one (then calls
// `on_resumed`), and trains until `steps` environment steps or an
// interrupt; returns false after an interrupt (on every rank).
bool RunTraining(const TrainingRun& run, agents::PpoTrainerBase& trainer, bool resume,
                 const std::function<void()>& on_resumed = {});

}  // namespace rlflow::train

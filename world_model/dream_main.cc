// Trains a controller entirely inside a world model (the dream): no graph
// is rewritten and no rewrite environment exists in this process.
//
//   ./bazelw run //world_model:dream -- --world_model=DIR --data=FILE --out=DIR [--tau=1.0] [--steps=N]
//
// DIR/metrics.csv, DIR/training.png, DIR/checkpoint.pt after every PPO
// update (resumed by the same command after a kill), and at the end
// DIR/controller.pt, a copy of the world model as DIR/world_model.pt (the
// pair is what --search=world_model --agent=DIR loads) and
// DIR/summary.json (dream steps, and the real environment's steps in this
// process: 0).
#include <gflags/gflags.h>

#include <cstdio>

#include "core/cli.h"
#include "runtime/threads.h"
#include "world_model/dream_train.h"

DEFINE_string(world_model, "", "world_model.pt of //world_model:train, or its directory; required");
DEFINE_string(data, "", "rollout file whose recorded states start the dreams; required");
DEFINE_string(starts, "initial",
              "where dream episodes start: initial (each model's initial state) or all (every recorded state)");
DEFINE_string(out, "", "output directory; required");
DEFINE_double(tau, 1.0, "sampling temperature of the world model");
DEFINE_int64(steps, 20480, "dream steps to train for (whole updates)");
DEFINE_int32(horizon, 50, "steps per dream episode");
DEFINE_uint64(seed, 1, "seed of the controller's initialisation, the dream's sampling and PPO's");
DEFINE_int32(hidden, 128, "controller hidden size");
DEFINE_int32(rollout_steps, 256, "transitions per PPO update");
DEFINE_int32(epochs, 4, "PPO epochs per update");
DEFINE_int32(minibatches, 4, "PPO minibatches per epoch");
DEFINE_double(lr, 3e-4, "Adam learning rate");
DEFINE_int32(threads, 1, "ATen threads");

namespace rlflow {
namespace {

int Run() {
  SetComputeThreads(FLAGS_threads);
  world_model::DreamTrainOptions o;
  o.world_model = FLAGS_world_model;
  o.data = FLAGS_data;
  o.out = FLAGS_out;
  o.tau = FLAGS_tau;
  o.starts = FLAGS_starts;
  o.steps = FLAGS_steps;
  o.horizon = FLAGS_horizon;
  o.seed = FLAGS_seed;
  o.hidden = FLAGS_hidden;
  o.rollout_steps = FLAGS_rollout_steps;
  o.epochs = FLAGS_epochs;
  o.minibatches = FLAGS_minibatches;
  o.lr = FLAGS_lr;
  world_model::DreamTrainResult r = world_model::TrainController(o);
  if (!r.finished) {
    std::printf("interrupted after %lld updates (%lld dream steps): the same command resumes\n",
                static_cast<long long>(r.updates), static_cast<long long>(r.dream_steps));
    return 130;
  }
  std::printf("done: %lld updates, %lld dream steps, %lld real environment steps; %s\n",
              static_cast<long long>(r.updates), static_cast<long long>(r.dream_steps),
              static_cast<long long>(r.real_steps), r.controller.c_str());
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(
      argc, argv, "dream: ./bazelw run //world_model:dream -- --world_model=DIR --data=FILE --out=DIR", rlflow::Run);
}

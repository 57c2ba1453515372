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
#include <glog/logging.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agents/env.h"
#include "agents/ppo.h"
#include "core/error.h"
#include "core/file_util.h"
#include "runtime/threads.h"
#include "tools/cli/cli.h"
#include "tools/train/training_run.h"
#include "world_model/dream.h"
#include "world_model/train.h"

DEFINE_string(world_model, "", "world_model.pt of //world_model:train, or its directory; required");
DEFINE_string(data, "", "rollout file whose episodes' initial states start the dreams; required");
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
  if (FLAGS_world_model.empty()) Fail("--world_model is required (world_model.pt of //world_model:train)");
  if (FLAGS_data.empty()) Fail("--data is required (the rollout file the world model was trained on)");
  if (FLAGS_out.empty()) Fail("--out is required (a directory for the controller and its metrics)");
  if (FLAGS_steps < 1) Fail("--steps must be >= 1");
  std::string wm_path = ResolveUserPath(FLAGS_world_model);
  if (FileExists(wm_path + "/world_model.pt")) wm_path += "/world_model.pt";
  SetComputeThreads(FLAGS_threads);
  torch::set_num_threads(std::max(1, FLAGS_threads));
  const int64_t real_before = agents::RewriteEnv::ProcessSteps();

  std::ostringstream config;
  config << "world_model=" << wm_path << "\nworld_model_bytes=" << ReadFile(wm_path, "world model").size()
         << "\ndata=" << ResolveUserPath(FLAGS_data) << "\ntau=" << FLAGS_tau << "\nhorizon=" << FLAGS_horizon
         << "\nseed=" << FLAGS_seed << "\nhidden=" << FLAGS_hidden << "\nrollout_steps=" << FLAGS_rollout_steps
         << "\nepochs=" << FLAGS_epochs << "\nminibatches=" << FLAGS_minibatches << "\nlr=" << FLAGS_lr << "\n";
  train::TrainingRun run{ResolveUserPath(FLAGS_out), config.str(), FLAGS_steps};
  const bool resume = train::PrepareRun(run);

  world_model::MdnRnn model = world_model::LoadWorldModel(wm_path);
  std::vector<world_model::DreamStart> starts =
      world_model::DreamStarts(world_model::ReadRollouts(ResolveUserPath(FLAGS_data)), *model);
  world_model::DreamOptions dream;
  dream.tau = FLAGS_tau;
  dream.horizon = FLAGS_horizon;
  dream.seed = FLAGS_seed;
  world_model::DreamEnv env(model, dream);
  torch::manual_seed(FLAGS_seed);
  world_model::Controller controller(model->options().latent, model->vocabulary_size(), FLAGS_hidden);
  agents::PpoOptions po;
  po.rollout_steps = FLAGS_rollout_steps;
  po.epochs = FLAGS_epochs;
  po.minibatches = FLAGS_minibatches;
  po.lr = FLAGS_lr;
  size_t next = 0;
  agents::BasicPpoTrainer<world_model::DreamEnv, world_model::Controller, world_model::DreamStart> trainer(
      controller, &env, [&] { return starts[next++ % starts.size()]; }, po, FLAGS_seed);
  train::RunTraining(run, trainer, resume, [&] { next = static_cast<size_t>(trainer.updates()); });
  world_model::SaveController(*controller, run.dir + "/controller.pt");
  WriteFileAtomically(run.dir + "/world_model.pt", ReadFile(wm_path, "world model"));
  const int64_t real = agents::RewriteEnv::ProcessSteps() - real_before;
  nlohmann::json summary = {{"updates", trainer.updates()},
                            {"dream_steps", trainer.env_steps()},
                            {"dream_steps_this_run", env.steps()},
                            {"real_steps", real},
                            {"tau", FLAGS_tau},
                            {"starts", starts.size()}};
  WriteFileAtomically(run.dir + "/summary.json", summary.dump(2) + "\n");
  std::printf("done: %lld updates, %lld dream steps, %lld real environment steps; %s\n",
              static_cast<long long>(trainer.updates()), static_cast<long long>(trainer.env_steps()),
              static_cast<long long>(real), run.dir.c_str());
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(
      argc, argv, "dream: ./bazelw run //world_model:dream -- --world_model=DIR --data=FILE --out=DIR", rlflow::Run);
}

// The model-based agent's whole loop as one command (world_model/loop.h):
// collect -> train the world model -> train a controller in its dream ->
// evaluate it in the real environment, --rounds times, each later round
// collecting with the previous round's controller (Dyna-style).
//
//   ./bazelw run //world_model:loop -- --model=resnet18 --model=squeezenet1_1 --rounds=3 --episodes=100 --out=DIR
//
// Progress on the terminal; OUT/summary.json and one table row per round
// (real steps so far and each model's improvement). Killed or Ctrl-C, the
// same command goes on where it stopped.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "core/cli.h"
#include "core/strings.h"
#include "runtime/threads.h"
#include "world_model/loop.h"

DEFINE_string(model, "", "models: zoo names or ONNX files (repeat --model or separate with commas)");
DEFINE_int32(rounds, 1, "rounds of collect, train, dream, evaluate");
DEFINE_int32(episodes, 100, "episodes collected per round");
DEFINE_string(out, "", "output directory; required");
DEFINE_uint64(seed, 1, "seed of every stage");
DEFINE_int32(horizon, 50, "steps per episode");
DEFINE_double(epsilon, 0.2, "rounds after the first: probability of a random action while collecting");
DEFINE_int32(epochs, 30, "world-model training epochs per round");
DEFINE_int64(dream_steps, 20480, "dream steps of PPO per round");
DEFINE_double(tau, 1.0, "the world model's sampling temperature in the dream");
DEFINE_string(cost, "analytical", "cost model of the rewards: analytical or measured");
DEFINE_string(reward, "normalised", "reward of the collections: delta, combined, normalised, end_to_end");
DEFINE_string(locations, "uniform",
              "where the collections apply a rule action: uniform (a random location) or best (the cost model's "
              "best, as the controller does)");
DEFINE_string(reward_loss, "huber", "the world model's reward loss: mse or huber");
DEFINE_string(world_model_kind, "mdn_rnn", "the world model: mdn_rnn or rssm");
DEFINE_string(lr_schedule, "cosine", "the world model's learning rate over the epochs: cosine or constant");
DEFINE_int32(threads, 1, "ATen / OpenBLAS threads");

namespace rlflow {
namespace {

int Run() {
  world_model::LoopOptions o;
  o.models = SplitList(FLAGS_model);
  o.rounds = FLAGS_rounds;
  o.episodes = FLAGS_episodes;
  o.out = FLAGS_out;
  o.seed = FLAGS_seed;
  o.horizon = FLAGS_horizon;
  o.epsilon = FLAGS_epsilon;
  o.epochs = FLAGS_epochs;
  o.dream_steps = FLAGS_dream_steps;
  o.tau = FLAGS_tau;
  o.cost = FLAGS_cost;
  o.reward = FLAGS_reward;
  o.locations = FLAGS_locations;
  o.reward_loss = FLAGS_reward_loss;
  o.lr_schedule = FLAGS_lr_schedule;
  o.world_model_kind = FLAGS_world_model_kind;
  o.argv0 = gflags::GetArgv0();
  o.progress = [](const std::string& line) { LOG(INFO) << line; };
  SetComputeThreads(FLAGS_threads);
  cli::InstallInterruptHandler();
  o.interrupted = &cli::interrupted;
  world_model::LoopResult r = world_model::RunLoop(o);
  std::fflush(stderr);
  std::printf(
      "| round | real steps (collection, so far) | real measurements (collection) | evaluation real steps | dream "
      "steps |");
  for (const std::string& m : o.models) std::printf(" %s improvement (model-free agent's) |", m.c_str());
  std::printf("\n|---:|---:|---:|---:|---:|");
  for (size_t m = 0; m < o.models.size(); ++m) std::printf("---:|");
  std::printf("\n");
  for (const world_model::LoopRound& round : r.rounds) {
    std::printf("| %d | %lld | %lld | %lld | %lld |", round.round, static_cast<long long>(round.real_steps_total),
                static_cast<long long>(round.real_measurements), static_cast<long long>(round.eval_real_steps),
                static_cast<long long>(round.dream_steps));
    for (const std::string& m : o.models)
      std::printf(" %.2f%% (%.2f%%) |", 100 * round.models.at(m).improvement,
                  100 * round.models.at(m).model_free_improvement);
    std::printf("\n");
  }
  if (!r.finished) {
    std::printf("interrupted after %zu rounds: the same command goes on\n", r.rounds.size());
    return 130;
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv, {"model"},
                           "loop: ./bazelw run //world_model:loop -- --model=M --rounds=K --out=DIR", rlflow::Run);
}

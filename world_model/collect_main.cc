// Collects rollouts of the real rewrite environment for the world model.
//
//   ./bazelw run //world_model:collect -- --model=M [--model=M2 ...] --episodes=N --policy=random|PATH --out=FILE
//
// Progress on the terminal, one line per episode. The file is written as
// FILE.partial, episode by episode, and renamed to FILE when complete;
// killed (or Ctrl-C) midway, the same command resumes after the episodes
// already written (world_model/collect.h, world_model/rollouts.h).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "core/cli.h"
#include "core/error.h"
#include "core/strings.h"
#include "runtime/threads.h"
#include "world_model/collect.h"

DEFINE_string(model, "", "models: zoo names or ONNX files (repeat --model or separate with commas)");
DEFINE_int32(episodes, 16, "episodes in the file (a resumed file counts its own)");
DEFINE_string(policy, "random", "random (uniform over valid rule actions and stop, then locations) or an agent.pt");
DEFINE_string(controller, "",
              "a dream-trained controller's directory (controller.pt, world_model.pt of //world_model:dream) as the "
              "policy instead, epsilon-greedy");
DEFINE_double(epsilon, 0.2, "with --controller: the probability of a uniform random action instead");
DEFINE_string(locations, "uniform",
              "where a chosen rule action is applied: uniform (a random location) or best (the cost model's best, as "
              "the controller does in the real environment)");
DEFINE_string(out, "", "the rollout file to write; required");
DEFINE_uint64(seed, 1, "seed of the episodes' sampling and of zoo model weights");
DEFINE_int32(horizon, 50, "steps per episode");
DEFINE_string(encoder, "", "agent whose frozen GNN makes the latents (default: the checked-in agents/zoo_agent.pt)");
DEFINE_string(rules, "", "rule database (default: the checked-in rules/default.rules.pb)");
DEFINE_string(cost, "analytical", "cost model of the rewards: analytical or measured (timed on this machine)");
DEFINE_string(reward, "normalised", "reward: delta, combined, normalised, end_to_end");
DEFINE_int32(threads, 1, "ATen / OpenBLAS threads");

namespace rlflow {
namespace {

int Run() {
  world_model::CollectOptions o;
  o.models = SplitList(FLAGS_model);
  o.episodes = FLAGS_episodes;
  o.policy = FLAGS_policy;
  o.controller = FLAGS_controller;
  o.epsilon = FLAGS_epsilon;
  o.locations = FLAGS_locations;
  o.out = FLAGS_out;
  o.seed = FLAGS_seed;
  o.horizon = FLAGS_horizon;
  o.encoder = FLAGS_encoder;
  o.rules = FLAGS_rules;
  o.cost = FLAGS_cost;
  o.reward = FLAGS_reward;
  o.argv0 = gflags::GetArgv0();
  o.progress = [](const std::string& line) { LOG(INFO) << line; };
  SetComputeThreads(FLAGS_threads);
  cli::InstallInterruptHandler();
  o.interrupted = &cli::interrupted;
  world_model::CollectResult r = world_model::Collect(o);
  if (!r.finished) {
    std::printf("interrupted: %d episodes in %s.partial (run the same command to go on)\n", r.episodes,
                FLAGS_out.c_str());
    return 1;
  }
  std::printf(
      "done: %d episodes (%d new), %lld steps in %s; this run: %lld real steps, %lld graphs timed on the device; "
      "latent distance vs cost difference within a model: rank correlation %.3f over %d pairs\n",
      r.episodes, r.new_episodes, static_cast<long long>(r.steps), FLAGS_out.c_str(),
      static_cast<long long>(r.real_steps), static_cast<long long>(r.real_measurements), r.latent_cost_correlation,
      r.pairs);
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(
      argc, argv, {"model"},
      "collect: ./bazelw run //world_model:collect -- --model=M [--model=M2 ...] --episodes=N --policy=random|PATH "
      "--out=FILE",
      rlflow::Run);
}

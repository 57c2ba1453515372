// Trains the model-free agent (GNN + PPO) on the rewrite environment.
//
//   ./bazelw run //agents:train -- --model=resnet18 [--model=squeezenet1_1 ...] --steps=N --out=DIR
//
// Progress on the terminal; DIR/metrics.csv (one row per update), DIR/
// training.png (gnuplot), DIR/checkpoint.pt (policy, optimiser, counters and
// the sampler's state, written atomically after every update),
// DIR/config.txt, and at the end DIR/agent.pt (the policy alone, for
// `--search=ppo --agent=`) and DIR/summary.json (updates, environment
// steps, this invocation's real work: real environment steps and graphs
// timed on the device; and the cost the trained policy reaches on each
// training graph: the cheapest of one greedy and 8 sampled episodes). Started again with the same command after a crash
// or kill -9, it resumes from the last checkpoint: at most one update is lost (the episode in progress restarts). A
// different configuration in an existing DIR is an error.
//
// Data-parallel (DD-PPO) on MPI: `mpirun -np N bazel-bin/agents/train ...`
// (or srun) trains with N workers, each collecting its own rollouts
// (worker r samples with --seed + r and starts on the r-th training graph),
// gradients averaged every minibatch; --steps counts all workers' steps and
// rank 0 writes DIR (agents/training_run.h).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "agents/env.h"
#include "agents/gnn.h"
#include "agents/ppo.h"
#include "agents/training_run.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/mpi.h"
#include "core/onnx_io.h"
#include "core/rewrite/matcher.h"
#include "core/rules/rule.h"
#include "core/strings.h"
#include "runtime/threads.h"
#include "search/canonical.h"
#include "zoo/load.h"
#include "zoo/zoo.h"

DEFINE_string(model, "", "training models: zoo names or ONNX files (repeat --model or separate with commas)");
DEFINE_int64(steps, 2048, "environment steps to train for (whole updates)");
DEFINE_string(out, "", "output directory (metrics.csv, training.png, checkpoint.pt, config.txt); required");
DEFINE_uint64(seed, 1, "seed of the weights' initialisation and of action sampling");
DEFINE_string(reward, "normalised", "reward: delta, combined, normalised, end_to_end");
DEFINE_int32(horizon, 100, "steps per episode");
DEFINE_int32(rollout_steps, 64, "transitions per PPO update");
DEFINE_int32(epochs, 4, "PPO epochs per update");
DEFINE_int32(minibatches, 4, "PPO minibatches per epoch");
DEFINE_double(lr, 5e-4, "Adam learning rate");
DEFINE_int32(hidden, 64, "GNN hidden size");
DEFINE_int32(gnn_steps, 5, "GNN message-passing steps");
DEFINE_string(cost, "analytical",
              "cost model the rewards come from: analytical (deterministic roofline) or measured "
              "(operators timed on this machine, in context)");
DEFINE_int32(threads, 1, "ATen / OpenBLAS threads");
DEFINE_string(rules, "", "rule database (default: the checked-in rules/default.rules.pb)");

namespace rlflow {
namespace {

// Everything that changes what training computes (not --steps: more steps
// continue a run), the rule database included: the policy's actions are its
// rules by position, so a resume on a database changed since would train
// other actions.
std::string Config(const std::string& rules_digest) {
  std::ostringstream c;
  c << "model=" << FLAGS_model << "\nseed=" << FLAGS_seed << "\nreward=" << FLAGS_reward
    << "\nhorizon=" << FLAGS_horizon << "\nrollout_steps=" << FLAGS_rollout_steps << "\nepochs=" << FLAGS_epochs
    << "\nminibatches=" << FLAGS_minibatches << "\nlr=" << FLAGS_lr << "\nhidden=" << FLAGS_hidden
    << "\ngnn_steps=" << FLAGS_gnn_steps << "\ncost=" << FLAGS_cost << "\nthreads=" << FLAGS_threads
    << "\nrules=" << FLAGS_rules << "\nrule_database=" << rules_digest << "\n";
  // Several workers train differently (DD-PPO); one is today's trainer.
  if (const int workers = mpi::World::Get().size(); workers > 1) c << "workers=" << workers << "\n";
  return c.str();
}

int Run() {
  std::vector<std::string> models = SplitList(FLAGS_model);
  if (models.empty()) Fail("--model is required (zoo names such as resnet18, or ONNX files)");
  if (FLAGS_out.empty()) Fail("--out is required (a directory for metrics, plot and checkpoints)");
  if (FLAGS_steps < 1) Fail("--steps must be >= 1");
  if (FLAGS_cost != "analytical" && FLAGS_cost != "measured") Fail("--cost must be analytical or measured");
  mpi::World& world = mpi::World::Get();
  if (!world.root()) FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);  // rank 0 reports
  agents::EnvOptions eo;
  eo.reward = agents::ParseRewardKind(FLAGS_reward);
  eo.horizon = FLAGS_horizon;
  eo.seed = FLAGS_seed;
  SetComputeThreads(FLAGS_threads);
  SetSteadyAllocation();
  torch::set_num_threads(std::max(1, FLAGS_threads));

  rules::RuleDatabase db = LoadRuleDatabase(RuleDatabasePath(FLAGS_rules, gflags::GetArgv0()));
  // Trained for any ONNX runtime: rules that produce a runtime's own
  // operators are left out (kept in the list: the actions are the database's).
  std::vector<rules::Rule> rule_list = RuleList(db);
  train::TrainingRun run{ResolveUserPath(FLAGS_out), Config(agents::RuleDatabaseId(agents::RuleIds(rule_list))),
                         FLAGS_steps};
  const bool resume = train::PrepareRun(run);

  Matcher matcher(rule_list, /*both_directions=*/true, RulesEnabledFor(rule_list, "onnx", kMaxOpset));

  // The training graphs, canonical, and the cost model.
  std::vector<Graph> graphs;
  for (const std::string& m : models) {
    LoadOptions lo;
    lo.zoo_seed = FLAGS_seed;
    graphs.push_back(CanonicalForm(LoadModel(m, lo).graph));
    LOG(INFO) << "training graph " << m << ": " << graphs.back().num_nodes() << " nodes";
  }
  std::unique_ptr<TimingBackend> device = MakeTimingBackend("cpu");
  // Every graph timed on the device counts (the summary's real measurements).
  CountingBackend counted(device.get());
  TimingBackend* backend = &counted;
  AnalyticalCostModel analytical;
  MeasuredCostModel measured(backend);
  CostModel* base = &analytical;
  if (FLAGS_cost == "measured") {
    for (const Graph& g : graphs) measured.Calibrate(g, 3);
    base = &measured;
  }
  BatchNormAwareCost cost(base);
  agents::RewriteEnv env(&matcher, &cost, eo, backend);

  torch::manual_seed(FLAGS_seed);
  agents::GnnOptions go{FLAGS_hidden, FLAGS_gnn_steps};
  agents::Policy policy(2 * static_cast<int>(matcher.rules().size()), go);
  size_t next = static_cast<size_t>(world.rank());
  agents::PpoOptions po;
  po.rollout_steps = FLAGS_rollout_steps;
  po.epochs = FLAGS_epochs;
  po.minibatches = FLAGS_minibatches;
  po.lr = FLAGS_lr;
  agents::PpoTrainer trainer(
      policy, &env, [&] { return graphs[next++ % graphs.size()]; }, po, FLAGS_seed + world.rank());

  // After a resume: a fresh episode on the next graph.
  train::RunTraining(run, trainer, resume,
                     [&] { next = static_cast<size_t>(trainer.updates()) + static_cast<size_t>(world.rank()); });
  // Real work of this invocation, all workers (a resumed run counts from its restart).
  double work[] = {static_cast<double>(env.real_steps()), static_cast<double>(counted.measurements())};
  world.SumInRankOrder(work, 2);
  if (!world.root()) return 0;
  // The policy alone, for --search=ppo --agent=DIR/agent.pt, with the ids
  // of the rules it was trained on (it acts on a database grown since by
  // rule id; checkpoints, for resuming this run, hold the weights alone).
  policy->SetRuleIds(agents::RuleIds(matcher.rules()));
  agents::SavePolicy(*policy, run.dir + "/agent.pt");
  nlohmann::json summary = {{"updates", trainer.updates()},
                            {"env_steps", trainer.env_steps()},
                            {"workers", world.size()},
                            {"real_steps", static_cast<int64_t>(work[0])},
                            {"real_measurements", static_cast<int64_t>(work[1])},
                            {"resumed", resume}};
  // What the trained policy reaches on each training graph, as --search=ppo
  // searches with it: the cheapest state of one greedy and 8 sampled
  // episodes (seeded), in the training cost model (not counted in the real
  // work above).
  policy->eval();
  std::mt19937_64 eval_rng(FLAGS_seed);
  for (size_t k = 0; k < graphs.size(); ++k) {
    agents::EpisodeResult best = agents::RunEpisode(*policy, env, graphs[k], /*greedy=*/true);
    const double greedy = best.best_cost;
    for (int e = 0; e < 8; ++e) {
      agents::EpisodeResult r = agents::RunEpisode(*policy, env, graphs[k], /*greedy=*/false, &eval_rng);
      if (r.best_cost < best.best_cost) best = r;
    }
    summary["final_cost"][models[k]] = {
        {"initial", best.initial_cost}, {"greedy", greedy}, {"best_of_9_episodes", best.best_cost}};
    std::printf("final cost on %s: %.4f -> %.4f (%.2f%% lower; greedy episode alone %.4f)\n", models[k].c_str(),
                best.initial_cost, best.best_cost, 100.0 * (1.0 - best.best_cost / best.initial_cost), greedy);
  }
  WriteFileAtomically(run.dir + "/summary.json", summary.dump(2) + "\n");
  std::printf(
      "done: %lld updates, %lld environment steps; this run: %lld real steps, %lld graphs timed on the device; %s\n",
      static_cast<long long>(trainer.updates()), static_cast<long long>(trainer.env_steps()),
      static_cast<long long>(work[0]), static_cast<long long>(work[1]), run.dir.c_str());
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::mpi::Finish(rlflow::cli::Main(
      argc, argv, {"model"}, "train: ./bazelw run //agents:train -- --model=M [--model=M2 ...] --steps=N --out=DIR",
      rlflow::Run));
}

// Trains the pass-ordering agent (MLP + PPO) on the pass environment and
// evaluates it on held-out graphs against the default order and random
// orders (shared/seeds 003's metric).
//
//   ./bazelw run //agents:train_passes -- --train=M1,M2 --test=M3,M4 --steps=N --out=DIR
//
// Models: zoo names (resnet18), torch-exported zoo models (torch:resnet18,
// built by //zoo:torch_zoo) or ONNX files. The same run directory,
// progress, metrics.csv, training.png, atomic checkpoints and resume after
// kill -9 as //agents:train (agents/training_run.h); at the end
// DIR/agent.pt (for --search=pass_order --agent=) and DIR/eval.md (the
// evaluation table, also printed). Under `mpirun -np N` it trains with N
// data-parallel workers as //agents:train does (rank 0 writes and
// evaluates).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "agents/pass_env.h"
#include "agents/pass_policy.h"
#include "agents/pass_policy_net.h"
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
#include "search/rule_passes.h"
#include "zoo/load.h"

DEFINE_string(train, "", "training models, comma-separated: zoo names, torch:NAME (torch-exported zoo) or ONNX files");
DEFINE_string(test, "", "held-out models (disjoint from --train), evaluated at the end");
DEFINE_int64(steps, 4096, "environment steps to train for (whole updates)");
DEFINE_string(out, "", "output directory (metrics.csv, training.png, checkpoint.pt, config.txt, agent.pt, eval.md)");
DEFINE_uint64(seed, 1, "seed of the weights' initialisation, action sampling and random-order baselines");
DEFINE_string(reward, "op_count", "reward: op_count (operation-count reduction, as the seed) or runtime (cost model)");
DEFINE_bool(shaping, false, "potential-based reward shaping from FLOPs and bytes");
DEFINE_bool(rule_families, true, "include one pass per family of generated rules among the actions");
DEFINE_int32(horizon, 30, "passes per episode");
DEFINE_int32(rollout_steps, 64, "transitions per PPO update");
DEFINE_int32(epochs, 4, "PPO epochs per update");
DEFINE_int32(minibatches, 4, "PPO minibatches per epoch");
DEFINE_double(lr, 5e-4, "Adam learning rate");
DEFINE_int32(hidden, 64, "MLP hidden size");
DEFINE_int32(random_orders, 5, "random orders per graph for the baseline");
DEFINE_int32(threads, 1, "ATen / OpenBLAS threads");
DEFINE_string(rules, "", "rule database (default: the checked-in rules/default.rules.pb)");

namespace rlflow {
namespace {

std::string Config() {
  std::ostringstream c;
  c << "train=" << FLAGS_train << "\ntest=" << FLAGS_test << "\nseed=" << FLAGS_seed << "\nreward=" << FLAGS_reward
    << "\nshaping=" << FLAGS_shaping << "\nrule_families=" << FLAGS_rule_families << "\nhorizon=" << FLAGS_horizon
    << "\nrollout_steps=" << FLAGS_rollout_steps << "\nepochs=" << FLAGS_epochs << "\nminibatches=" << FLAGS_minibatches
    << "\nlr=" << FLAGS_lr << "\nhidden=" << FLAGS_hidden << "\nthreads=" << FLAGS_threads << "\nrules=" << FLAGS_rules
    << "\n";
  // Several workers train differently (DD-PPO); one is today's trainer.
  if (const int workers = mpi::World::Get().size(); workers > 1) c << "workers=" << workers << "\n";
  return c.str();
}

Graph Load(const std::string& spec) {
  std::string m = spec;
  if (m.rfind("torch:", 0) == 0) {
    m = FindRunfile("zoo/torch_zoo/" + m.substr(6) + ".onnx", gflags::GetArgv0());
    if (m.empty()) Fail("no torch-exported zoo model '", spec.substr(6), "' (//zoo:torch_zoo)");
  }
  LoadOptions lo;
  lo.zoo_seed = FLAGS_seed;
  return LoadModel(m, lo).graph;
}

int Run() {
  std::vector<std::string> train_names = SplitList(FLAGS_train), test_names = SplitList(FLAGS_test);
  if (train_names.empty()) Fail("--train is required (zoo names, torch:NAME or ONNX files)");
  for (const std::string& t : test_names)
    for (const std::string& r : train_names)
      if (t == r) Fail("--test must be disjoint from --train: ", t, " is in both");
  if (FLAGS_out.empty()) Fail("--out is required (a directory for metrics, plot and checkpoints)");
  if (FLAGS_steps < 1) Fail("--steps must be >= 1");
  if (FLAGS_random_orders < 0) Fail("--random_orders must be >= 0");
  mpi::World& world = mpi::World::Get();
  if (!world.root()) FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);  // rank 0 reports
  agents::PassEnvOptions eo;
  eo.reward = agents::ParsePassReward(FLAGS_reward);
  eo.shaping = FLAGS_shaping;
  eo.horizon = FLAGS_horizon;
  SetComputeThreads(FLAGS_threads);
  SetSteadyAllocation();
  torch::set_num_threads(std::max(1, FLAGS_threads));
  train::TrainingRun run{ResolveUserPath(FLAGS_out), Config(), FLAGS_steps};
  const bool resume = train::PrepareRun(run);

  rules::RuleDatabase db = LoadRuleDatabase(RuleDatabasePath(FLAGS_rules, gflags::GetArgv0()));
  // Trained for any ONNX runtime: rules that produce a runtime's own
  // operators are left out (kept in the list: the actions are the database's).
  std::vector<rules::Rule> rule_list = RuleList(db);
  Matcher matcher(rule_list, /*both_directions=*/true, RulesEnabledFor(rule_list, "onnx", kMaxOpset));
  AnalyticalCostModel analytical;
  BatchNormAwareCost cost(&analytical);
  PassRegistry registry = FLAGS_rule_families ? PassesWithRuleFamilies(matcher, &cost) : PassRegistry::Builtin();

  std::vector<Graph> train_graphs, test_graphs;
  for (const std::string& m : train_names) train_graphs.push_back(Load(m));
  for (const std::string& m : test_names) test_graphs.push_back(Load(m));
  agents::PassEnv env(&registry, &cost, eo);
  LOG(INFO) << env.passes().size() << " passes as actions; " << train_graphs.size() << " training graphs, "
            << test_graphs.size() << " test graphs";

  torch::manual_seed(FLAGS_seed);
  agents::PassPolicy policy(env.observation_size(), env.num_actions(), FLAGS_hidden);
  agents::PpoOptions po;
  po.rollout_steps = FLAGS_rollout_steps;
  po.epochs = FLAGS_epochs;
  po.minibatches = FLAGS_minibatches;
  po.lr = FLAGS_lr;
  size_t next = static_cast<size_t>(world.rank());
  agents::BasicPpoTrainer<agents::PassEnv, agents::PassPolicy> trainer(
      policy, &env, [&] { return train_graphs[next++ % train_graphs.size()]; }, po, FLAGS_seed + world.rank());
  const bool finished = train::RunTraining(
      run, trainer, resume, [&] { next = static_cast<size_t>(trainer.updates()) + static_cast<size_t>(world.rank()); });
  if (!world.root()) return finished ? 0 : 1;  // rank 0 writes and evaluates
  agents::SavePassPolicy(*policy, env.passes(), FLAGS_horizon, run.dir + "/agent.pt");
  if (!finished) return 1;

  // Evaluation: default order, random orders, the agent (greedy).
  policy->eval();
  std::ostringstream table;
  table << "| graph | set | nodes | default order | random orders (mean) | agent | cost (ms) | default order | random "
           "orders (mean) | agent | agent's passes |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  double log_op[2] = {0, 0}, log_cost[2] = {0, 0};
  int counted[2] = {0, 0}, counted_cost[2] = {0, 0};
  auto evaluate = [&](const std::string& name, const Graph& g, int set) {
    Graph d = g;
    RunPasses(registry, DefaultPassOrder(), d);
    const double n0 = g.num_nodes(), c0 = cost.GraphCost(g), nd = d.num_nodes(), cd = cost.GraphCost(d);
    std::mt19937_64 rng(FLAGS_seed);
    agents::PassEnv e = env.Fork();
    double nr = 0, cr = 0;
    for (int k = 0; k < FLAGS_random_orders; ++k) {
      agents::PassEpisode ep = agents::RunPassEpisode(nullptr, e, g, false, &rng);
      nr += ep.final_nodes / FLAGS_random_orders;
      cr += ep.final_cost / FLAGS_random_orders;
    }
    agents::PassEpisode a = agents::RunPassEpisode(policy.get(), e, g, true);
    std::string passes;
    for (const std::string& p : a.applied) passes += (passes.empty() ? "" : ", ") + p;
    char row[2048];
    std::snprintf(row, sizeof row, "| %s | %s | %.0f | %.0f | %.1f | %.0f | %.2f | %.2f | %.2f | %.2f | %s |\n",
                  name.c_str(), set == 0 ? "train" : "test", n0, nd, FLAGS_random_orders > 0 ? nr : n0, a.final_nodes,
                  c0, cd, FLAGS_random_orders > 0 ? cr : c0, a.final_cost, passes.empty() ? "none" : passes.c_str());
    table << row;
    // The seed's metric: agent's reduction / the default order's (where the
    // default order reduces at all).
    // A reduction of zero or less counts as 1% of the default's (the
    // geometric mean needs a positive ratio).
    if (n0 > nd) {
      log_op[set] += std::log(std::max((n0 - a.final_nodes) / (n0 - nd), 0.01));
      ++counted[set];
    }
    if (c0 > cd) {
      log_cost[set] += std::log(std::max((c0 - a.final_cost) / (c0 - cd), 0.01));
      ++counted_cost[set];
    }
  };
  for (size_t k = 0; k < train_graphs.size(); ++k) evaluate(train_names[k], train_graphs[k], 0);
  for (size_t k = 0; k < test_graphs.size(); ++k) evaluate(test_names[k], test_graphs[k], 1);
  for (int set = 0; set < 2; ++set) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "\n%s graphs: geometric mean of (agent's reduction / default order's reduction): op count %.3f "
                  "(over the %d graphs where the default order reduces it), cost-model runtime %.3f (over %d)\n",
                  set == 0 ? "training" : "held-out", counted[set] ? std::exp(log_op[set] / counted[set]) : 0.0,
                  counted[set], counted_cost[set] ? std::exp(log_cost[set] / counted_cost[set]) : 0.0,
                  counted_cost[set]);
    table << line;
  }
  WriteFileAtomically(run.dir + "/eval.md", table.str());
  std::fputs(table.str().c_str(), stdout);
  std::printf("done: %lld updates, %lld environment steps; %s\n", static_cast<long long>(trainer.updates()),
              static_cast<long long>(trainer.env_steps()), run.dir.c_str());
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::mpi::Finish(
      rlflow::cli::Main(argc, argv,
                        "train_passes: ./bazelw run //agents:train_passes -- --train=M1,M2 --test=M3 --steps=N "
                        "--out=DIR",
                        rlflow::Run));
}

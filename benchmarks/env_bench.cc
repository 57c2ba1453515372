// Speed of the rewrite environment (agents/env.h): the median time of a
// step (apply the rewrite, find and cost the new graph's candidates, build
// the observation, compute the reward) and of a fork, along seeded random
// episodes on zoo models in canonical form.
//
//   ./bazelw run //benchmarks:env_bench [-- --models=resnet50,inception_v3 --cost=measured]
//
// --cost=analytical (default) isolates the environment's own work;
// --cost=measured uses the calibrated, cached cost model the optimiser uses
// (each episode runs twice: the first times any operator a rewrite creates,
// the second, timed, replays it with a warm cache).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>

#include "agents/env.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/file_util.h"
#include "runtime/threads.h"
#include "search/canonical.h"
#include "zoo/zoo.h"

DEFINE_string(models, "resnet50,inception_v3", "comma-separated zoo models");
DEFINE_string(cost, "analytical", "cost model: analytical or measured (calibrated in context, ATen executor)");
DEFINE_int32(episodes, 3, "measured episodes per model");
DEFINE_int32(horizon, 100, "steps per episode");
DEFINE_int32(threads, 1, "ATen / OpenBLAS threads (measured cost model)");
DEFINE_uint64(seed, 1, "seed of the random actions");

namespace rlflow {
namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

int Run() {
  if (FLAGS_cost != "analytical" && FLAGS_cost != "measured") Fail("--cost must be analytical or measured");
  if (FLAGS_episodes < 1 || FLAGS_horizon < 1) Fail("--episodes and --horizon must be >= 1");
  SetComputeThreads(FLAGS_threads);
  SetSteadyAllocation();
  rules::RuleDatabase db = LoadRuleDatabase(RuleDatabasePath("", gflags::GetArgv0()));
  Matcher matcher(RuleList(db));
  std::printf(
      "| model | nodes | candidates at reset | steps | step median (ms) | step p90 (ms) | fork median (ms) | cost "
      "model |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---|\n");
  std::stringstream names(FLAGS_models);
  for (std::string name; std::getline(names, name, ',');) {
    Graph g = CanonicalForm(zoo::Build(name, 1));
    std::unique_ptr<TimingBackend> backend = MakeTimingBackend("cpu");
    AnalyticalCostModel analytical;
    MeasuredCostModel measured(backend.get());
    CostModel* base = &analytical;
    if (FLAGS_cost == "measured") {
      LOG(INFO) << name << ": calibrating the cost model in context";
      measured.Calibrate(g, 3);
      base = &measured;
    }
    BatchNormAwareCost cost(base);
    agents::EnvOptions opt;
    opt.horizon = FLAGS_horizon;
    agents::RewriteEnv env(&matcher, &cost, opt);
    std::vector<double> steps, forks;
    int reset_candidates = 0;
    // With a measured model every episode is run twice and only the second
    // is timed: the first times the operators its rewrites create (once per
    // operator key, then cached, as the persistent timing cache does across
    // runs), the second replays the same seeded actions with a warm cache.
    const int warmup = FLAGS_cost == "measured" ? FLAGS_episodes : 0;
    for (int e = 0; e < FLAGS_episodes + warmup; ++e) {
      std::mt19937_64 rng(FLAGS_seed + static_cast<uint64_t>(e % FLAGS_episodes));
      const agents::Observation* o = &env.Reset(g);
      reset_candidates = o->stop_action();
      while (!env.done()) {
        int n = o->stop_action();
        int a = n == 0 ? 0 : static_cast<int>(rng() % static_cast<uint64_t>(n));  // never stop early
        auto tf = Clock::now();
        agents::RewriteEnv fork = env.Fork();
        double fork_ms = Ms(tf);
        auto t0 = Clock::now();
        agents::StepResult r = env.Step(a);
        double step_ms = Ms(t0);
        if (e >= warmup) {
          steps.push_back(step_ms);
          forks.push_back(fork_ms);
        }
        o = r.observation;
      }
      LOG(INFO) << name << ": episode " << e << (e < warmup ? " (warm-up)" : "") << ", " << env.steps()
                << " steps, cost " << env.initial_cost() << " -> " << env.state().cost() << " ms";
    }
    std::printf("| %s | %d | %d | %zu | %.2f | %.2f | %.4f | %s |\n", name.c_str(), g.num_nodes(), reset_candidates,
                steps.size(), Quantile(steps, 0.5), Quantile(steps, 0.9), Quantile(forks, 0.5), FLAGS_cost.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv, "env_bench [--models=a,b] [--cost=analytical|measured]", rlflow::Run);
}

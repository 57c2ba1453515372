// Cost-model accuracy: the measured per-operator estimate (sum of op costs)
// against the measured end-to-end time of the whole graph on the executor.
//
//   ./bazelw run //benchmarks:cost_bench -- --models=resnet50,bert_base
#include <ATen/Parallel.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/cli.h"
#include "core/error.h"
#include "core/passes/lower_batchnorm.h"
#include "runtime/cost_model.h"
#include "runtime/executor.h"
#include "runtime/stats.h"
#include "runtime/threads.h"
#include "zoo/zoo.h"

DEFINE_string(models, "", "comma-separated zoo models (default: all)");
DEFINE_int32(runs, 10, "end-to-end runs (median)");
DEFINE_bool(profile, false, "per-op comparison");
DEFINE_int32(threads, 1, "ATen and OpenBLAS threads");

namespace rlflow {
namespace {

int Run() {
  SetComputeThreads(FLAGS_threads);
  SetSteadyAllocation();
  std::vector<std::string> models;
  std::stringstream ss(FLAGS_models);
  for (std::string m; std::getline(ss, m, ',');) models.push_back(m);
  if (models.empty()) models = zoo::ModelNames();
  auto backend = MakeTimingBackend("cpu");
  // Isolated: per-op times alone (the pre-calibration model); calibrated:
  // the model after timing the graph's nodes in context (what the optimiser
  // uses). Each model on a fresh cache; measured: median of paired runs.
  std::printf(
      "| model | nodes | distinct op keys | isolated estimate (ms) | calibrated estimate (ms) | measured (ms) | "
      "isolated error | calibrated error |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& name : models) {
    Graph g = zoo::Build(name, 1);
    MeasuredCostModel model(backend.get());
    double isolated = model.GraphCost(g);
    size_t keys = model.cache_size();
    model.Calibrate(g);
    double calibrated = model.GraphCost(g);
    TimingOptions o;
    double measured = Median(backend->TimePaired(g, g, FLAGS_runs, o).wall_a);
    if (FLAGS_profile) {
      Executor e(g);
      auto in = RandomInputs(g, 1);
      std::vector<double> sum(g.num_nodes(), 0.0), t;
      for (int r = 0; r < 5; ++r) {
        e.Run(in, &t);
        if (r >= 2)
          for (int i = 0; i < g.num_nodes(); ++i) sum[i] += t[i] / 3;
      }
      std::map<std::string, std::pair<double, double>> by_op;
      for (int i = 0; i < g.num_nodes(); ++i) {
        by_op[g.node(i).op].first += sum[i];
        by_op[g.node(i).op].second += model.NodeCost(g, i).ms;
      }
      for (auto& [op, p] : by_op) std::printf("  %s in-graph %.2f model %.2f\n", op.c_str(), p.first, p.second);
    }
    std::printf("| %s | %d | %zu | %.2f | %.2f | %.2f | %+.1f%% | %+.1f%% |\n", name.c_str(), g.num_nodes(), keys,
                isolated, calibrated, measured, 100 * (isolated - measured) / measured,
                100 * (calibrated - measured) / measured);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) { return rlflow::cli::Main(argc, argv, "cost_bench [--models=a,b]", rlflow::Run); }

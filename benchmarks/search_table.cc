// Every search on zoo models, through the optimise pipeline library: taso
// (budget 1000), greedy, ppo with the checked-in agent alone (no greedy
// finish: what the agent finds by itself), the same finished by greedy
// descent (the optimiser's default), ppo fine-tuned on the graph first
// (--train_steps) and finished, and the world model's controller
// (--search=world_model, world_model/agent) alone and finished. Per row: cost-model estimate before ->
// after, search time, rewrites, the search's real work (rewrites applied to
// real graphs, graphs timed on the device), and the measured end-to-end
// speedup with its 95% interval. Prints the README's Markdown table.
//
//   ./bazelw run //benchmarks:search_table [-- --models=resnet18,squeezenet1_1 --train_steps=2048]
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <sstream>

#include "core/cli.h"
#include "core/error.h"
#include "optimiser/pipeline.h"
#include "runtime/ort_testing.h"
#include "zoo/zoo.h"

DEFINE_string(models, "", "comma-separated zoo models (default: the whole zoo)");
DEFINE_int64(train_steps, 2048, "environment steps of fine-tuning for the 'ppo, fine-tuned' rows");
DEFINE_int32(measure_runs, 10, "pairs of interleaved runs for each verdict");
DEFINE_string(timing_cache, "", "timing cache shared by all rows (default: a fresh one in a temp dir)");

namespace rlflow {
namespace {

int Run() {
  std::string dir = testing::MakeTempDir("search_table_");
  std::string cache = FLAGS_timing_cache.empty() ? dir + "/timing-cache.txt" : FLAGS_timing_cache;
  std::printf(
      "| model | search | trained on it | estimate before -> after (ms) | estimated speedup | search (s) | "
      "rewrites | real steps | real measurements | measured speedup [95%%] | verdict |\n"
      "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  std::vector<std::string> models;
  std::stringstream names(FLAGS_models);
  for (std::string model; std::getline(names, model, ',');) models.push_back(model);
  if (models.empty()) models = zoo::ModelNames();
  for (const std::string& model : models) {
    const bool seen = model == "resnet18" || model == "squeezenet1_1" || model == "inception_v3";
    struct Row {
      const char* label;
      std::string search;
      int64_t train_steps;
      bool finish;
    };
    for (const Row& row :
         {Row{"taso", "taso", 0, true}, Row{"greedy", "greedy", 0, true}, Row{"ppo (zoo agent alone)", "ppo", 0, false},
          Row{"ppo (zoo agent) + greedy finish", "ppo", 0, true},
          Row{"ppo, fine-tuned, + greedy finish", "ppo", FLAGS_train_steps, true},
          Row{"world_model (controller alone)", "world_model", 0, false},
          Row{"world_model + greedy finish", "world_model", 0, true}}) {
      PipelineOptions o;
      o.model = model + ".onnx";
      o.output = dir + "/" + model + ".onnx";
      o.search = row.search;
      if (row.train_steps > 0) o.search_params.Set("train_steps", std::to_string(row.train_steps));
      o.greedy_finish = row.finish;
      o.timing_cache = cache;
      o.measure_runs = FLAGS_measure_runs;
      o.force_optimised = true;
      o.log = [](bool warning, const std::string& line) {
        if (warning)
          LOG(WARNING) << line;
        else
          LOG(INFO) << line;
      };
      PipelineResult r = RunPipeline(o);
      std::string trained = row.search != "ppo" && row.search != "world_model" ? "-"
                            : row.train_steps > 0                              ? "yes (fine-tuned)"
                            : seen                                             ? "yes"
                                                                               : "no";
      char speed[96];
      if (r.check.unchanged)
        std::snprintf(speed, sizeof speed, "1.000x (same graph)");
      else
        std::snprintf(speed, sizeof speed, "%.3fx [%.3f, %.3f]", r.verdict.wall.median, r.verdict.wall.lo,
                      r.verdict.wall.hi);
      std::printf("| %s | %s | %s | %.2f -> %.2f | %.3fx | %.1f | %zu | %lld | %lld | %s | %s |\n", model.c_str(),
                  row.label, trained.c_str(), r.search.before_estimate, r.verdict.after_estimate,
                  r.search.before_estimate / r.verdict.after_estimate, r.search.seconds, r.search.result.applied.size(),
                  static_cast<long long>(r.search.result.real_steps), static_cast<long long>(r.search.measurements),
                  speed, r.check.unchanged ? "unchanged" : r.verdict.OutcomeName().c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv, "search_table [--models=a,b] [--train_steps=N]", rlflow::Run);
}

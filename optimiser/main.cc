// rlflow optimiser: loads an ONNX model (or a built-in zoo model), checks it,
// searches for a faster equivalent graph, verifies the result numerically
// against the original on the CPU executor, and writes ONNX.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/rules/rule.h"
#include "core/summary.h"
#include "optimiser/load.h"
#include "optimiser/search.h"
#include "runtime/executor.h"
#include "tools/cli/cli.h"

#include <ATen/Parallel.h>

DEFINE_string(model, "", "ONNX model to optimise, or a zoo model name (e.g. resnet50.onnx); relative paths are "
                         "resolved against the directory `bazel run` was started from");
DEFINE_string(output, "", "where to write the optimised ONNX model (default: <model>.rlflow.onnx beside the input, "
                          "or in the working directory for a zoo model)");
DEFINE_string(search, "none", "search strategy: none");
DEFINE_uint64(seed, 1, "seed for the random check inputs and for zoo model weights");
DEFINE_int32(free_dim, 1, "value bound to symbolic dimensions of graph inputs");
DEFINE_string(dot, "", "also write the optimised graph as Graphviz DOT to this path");
DEFINE_double(tolerance, 1e-4, "maximum relative error allowed between original and optimised outputs");
DEFINE_int32(threads, 0, "ATen intra-op threads for the CPU executor (0: ATen's default)");
DEFINE_string(rules, "", "rule database (default: the checked-in rules/default.rules.pb)");

namespace rlflow {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// The checked-in database ships as a runfile of this binary.
std::string DefaultRulesPath() {
  const std::string rel = "rules/default.rules.pb";
  if (FileExists(rel)) return rel;  // `bazel run` / `bazel test`: cwd is the runfiles tree
  if (const char* dir = std::getenv("RUNFILES_DIR")) {
    std::string p = std::string(dir) + "/rlflow/" + rel;
    if (FileExists(p)) return p;
  }
  std::string exe = gflags::GetArgv0();
  std::string p = exe + ".runfiles/rlflow/" + rel;
  if (FileExists(p)) return p;
  Fail("the default rule database was not found (run through ./bazelw run, or pass --rules=PATH)");
}

std::string DefaultOutput(const LoadedModel& m) {
  if (m.from_zoo) return ResolveUserPath(m.source.substr(4) + ".rlflow.onnx");
  std::string p = m.source;
  if (p.size() > 5 && p.compare(p.size() - 5, 5, ".onnx") == 0) p.resize(p.size() - 5);
  return p + ".rlflow.onnx";
}

int Main() {
  if (FLAGS_model.empty()) Fail("--model is required (an ONNX file or a zoo model name such as resnet50.onnx)");
  if (FLAGS_free_dim <= 0) Fail("--free_dim must be positive, got ", FLAGS_free_dim);
  if (!(FLAGS_tolerance > 0)) Fail("--tolerance must be positive");
  if (FLAGS_threads < 0) Fail("--threads must be >= 0");
  if (FLAGS_threads > 0) at::set_num_threads(FLAGS_threads);
  std::unique_ptr<Search> search = MakeSearch(FLAGS_search);
  std::string rules_path = FLAGS_rules.empty() ? DefaultRulesPath() : ResolveUserPath(FLAGS_rules);
  rules::RuleDatabase rule_db = LoadRuleDatabase(rules_path);
  LOG(INFO) << "loaded " << rule_db.rules_size() << " rules from " << rules_path;
  // Fail on unwritable outputs before any long work.
  if (!FLAGS_output.empty()) CheckWritablePath(ResolveUserPath(FLAGS_output), "--output");
  if (!FLAGS_dot.empty()) CheckWritablePath(ResolveUserPath(FLAGS_dot), "--dot");

  auto t0 = Clock::now();
  LoadOptions load;
  load.import.free_dim_value = FLAGS_free_dim;
  load.zoo_seed = FLAGS_seed;
  LoadedModel model = LoadModel(FLAGS_model, load);
  for (const auto& note : model.notes) LOG(INFO) << note;
  std::string output = FLAGS_output.empty() ? DefaultOutput(model) : ResolveUserPath(FLAGS_output);
  CheckWritablePath(output, "--output");
  LOG(INFO) << "loaded " << model.source << " in " << Seconds(t0) << " s";

  const Graph& original = model.graph;
  GraphSummary before = Summarize(original);
  std::vector<at::Tensor> inputs = RandomInputs(original, FLAGS_seed);
  Executor reference(original);
  auto t1 = Clock::now();
  std::vector<at::Tensor> expected = reference.Run(inputs);
  double original_run_s = Seconds(t1);
  LOG(INFO) << "original graph ran on the CPU executor in " << original_run_s * 1e3 << " ms";

  SearchOptions options;
  options.seed = FLAGS_seed;
  options.progress = [](const std::string& line) { LOG(INFO) << line; };
  auto t2 = Clock::now();
  SearchResult result = search->Run(original, options);
  double search_s = Seconds(t2);

  // Every optimised graph is checked against the original before it is written.
  Executor optimised(result.graph);
  std::vector<at::Tensor> actual = optimised.Run(inputs);
  if (actual.size() != expected.size()) Fail("the optimised graph has ", actual.size(), " outputs, the original ", expected.size());
  double worst = 0;
  for (size_t k = 0; k < actual.size(); ++k) worst = std::max(worst, RelativeError(actual[k], expected[k]));
  if (worst > FLAGS_tolerance) {
    std::string rules;
    for (const auto& r : result.applied) rules += (rules.empty() ? "" : ", ") + r;
    Fail("the optimised graph differs from the original (relative error ", worst, " > ", FLAGS_tolerance,
         "); rules applied: ", rules.empty() ? "none" : rules, "; nothing was written");
  }

  WriteOnnxFile(result.graph, output);
  if (!FLAGS_dot.empty()) WriteFileAtomically(ResolveUserPath(FLAGS_dot), result.graph.ToDot());
  GraphSummary after = Summarize(result.graph);

  std::printf("model:      %s\n", model.source.c_str());
  std::printf("rules:      %d (%s)\n", rule_db.rules_size(), rules_path.c_str());
  std::printf("search:     %s (%.3f s, %lld graphs explored, %zu rewrites)\n", search->name().c_str(), search_s,
              static_cast<long long>(result.graphs_explored), result.applied.size());
  std::printf("before:     %s", before.ToString().c_str());
  std::printf("after:      %s", after.ToString().c_str());
  std::printf("cpu run:    %.1f ms (original, one run)\n", original_run_s * 1e3);
  std::printf("check:      max relative error %.3g over %zu outputs (seed %llu)\n", worst, actual.size(),
              static_cast<unsigned long long>(FLAGS_seed));
  std::printf("written:    %s\n", output.c_str());
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv,
                           "rlflow optimiser: ./bazelw run //optimiser -- --model=resnet50.onnx [--output=PATH]",
                           rlflow::Main);
}

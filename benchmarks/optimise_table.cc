// The optimiser on every zoo model (C++-built and torch-exported): op counts,
// cost-model estimate vs measured end-to-end time, speedups on our executor
// and in ONNX Runtime, and search times of taso and greedy. Prints a
// Markdown table (the README's). Runs the real optimiser binary with its
// default settings plus --search, a shared timing cache, and
// --force_optimised so that the optimised graph is measured in ORT even
// where our executor did not find it faster.
//
//   ./bazelw run //benchmarks:optimise_table [-- --models=resnet50 --sources=cpp]
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <sys/wait.h>

#include <climits>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "benchmarks/zoo/zoo.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/json.h"
#include "core/onnx_io.h"
#include "runtime/executor.h"
#include "tools/cli/cli.h"
#include "tools/ort/ort.h"

DEFINE_string(models, "", "comma-separated zoo models (default: all)");
DEFINE_string(sources, "cpp,torch", "model sources: cpp (C++ builders), torch (torch.onnx exports)");
DEFINE_int32(ort_runs, 10, "interleaved ONNX Runtime runs per model (median)");
DEFINE_string(extra_args, "", "extra optimiser flags for both searches (e.g. --budget=200)");

namespace rlflow {
namespace {

std::string Runfile(const std::string& rel) {
  std::string p = FindRunfile(rel, gflags::GetArgv0());
  if (p.empty()) Fail("runfile ", rel, " not found");
  return p;
}

// Absolute: the optimiser resolves relative paths against the user's directory.
std::string Absolute(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) Fail("cannot resolve ", p);
  return buf;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

// Runs the optimiser; returns its JSON report.
std::string Optimise(const std::string& model, const std::string& search, const std::string& out,
                     const std::string& dir) {
  std::string report = out + ".json";
  std::string cmd = Runfile("optimiser/optimiser") + " --model=" + model + " --search=" + search + " --output=" + out +
                    " --report=" + report + " --timing_cache=" + dir + "/timing-cache.txt --force_optimised " +
                    FLAGS_extra_args + " > " + out + ".log 2>&1";
  int status = std::system(cmd.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Fail("optimiser failed on ", model, " (", search, "): see ", out, ".log");
  return ReadFile(report);
}

int Run() {
  std::vector<std::string> models = Split(FLAGS_models);
  if (models.empty()) models = zoo::ModelNames();
  std::string dir = testing::MakeTempDir("optimise_table_");
  std::printf("| model | source | ops before | ops after | estimate (ms) | measured (ms) | estimate error "
              "(original / optimised) | estimated speedup | executor speedup | predicted optimised time error | ORT (ms) | ORT speedup | taso search (s) | greedy search (s) | greedy speedup |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const std::string& source : Split(FLAGS_sources)) {
    for (const std::string& m : models) {
      std::string original =
          source == "torch" ? Absolute(Runfile("benchmarks/torch_zoo/" + m + ".onnx")) : dir + "/" + m + ".onnx";
      if (source != "torch") WriteOnnxFile(zoo::Build(m, 1), original);
      LOG(INFO) << m << " (" << source << "): taso";
      std::string taso_out = dir + "/" + m + "." + source + ".taso.onnx";
      std::string taso = Optimise(original, "taso", taso_out, dir);
      LOG(INFO) << m << " (" << source << "): greedy";
      std::string greedy = Optimise(original, "greedy", dir + "/" + m + "." + source + ".greedy.onnx", dir);
      size_t after = taso.find("\"after\"");
      Graph g = ImportOnnxFile(original);
      std::vector<at::Tensor> inputs = RandomInputs(g, 1);
      std::vector<std::pair<std::string, at::Tensor>> named;
      for (size_t k = 0; k < inputs.size(); ++k) named.push_back({g.value(g.inputs()[k]).name, inputs[k]});
      LOG(INFO) << m << " (" << source << "): ONNX Runtime";
      auto [ort_before, ort_after] = testing::TimeOnnxRuntime(original, taso_out, named, FLAGS_ort_runs);
      std::printf("| %s | %s | %.0f | %.0f | %.1f | %.1f | %+.1f%% / %+.1f%% | %.3fx | %.3fx | %+.1f%% | %.1f -> %.1f | %.3fx | %.1f | %.1f | %.3fx |\n",
                  m.c_str(), source.c_str(), JsonFindNumber(taso, "nodes"), JsonFindNumber(taso, "nodes", after),
                  JsonFindNumber(taso, "estimated_ms", after), JsonFindNumber(taso, "measured_ms", after),
                  100 * JsonFindNumber(taso, "estimate_error"), 100 * JsonFindNumber(taso, "estimate_error", after),
                  JsonFindNumber(taso, "estimated_speedup"), JsonFindNumber(taso, "speedup"),
                  100 * JsonFindNumber(taso, "predicted_after_error"), ort_before,
                  ort_after, ort_before / ort_after, JsonFindNumber(taso, "time_s"), JsonFindNumber(greedy, "time_s"),
                  JsonFindNumber(greedy, "speedup"));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv, "optimise_table [--models=a,b] [--sources=cpp,torch]", rlflow::Run);
}

// Acceptance: every zoo model, C++-built and torch-exported, optimises with
// the optimiser's default settings (./bazelw run //optimiser -- --model=M);
// the written model re-imports (it passed onnx::checker on export), and ONNX
// Runtime gives the same outputs for the original and the written model
// within 1e-4 relative error. The report is valid and consistent.
//
// One test binary per (model, source); see BUILD.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "benchmarks/zoo/zoo.h"
#include "benchmarks/zoo/zoo_cases.h"
#include "core/file_util.h"
#include "core/json.h"
#include "core/onnx_io.h"
#include "runtime/executor.h"
#include "tools/ort/ort.h"

namespace rlflow {
namespace {

using zoo::Case;

class ZooOptimise : public ::testing::TestWithParam<Case> {};

double JsonNumber(const std::string& json, const std::string& key, size_t from = 0) {
  return JsonFindNumber(json, key, from);
}

TEST_P(ZooOptimise, DefaultSettingsMatchOnnxRuntime) {
  const Case& c = GetParam();
  std::string dir = testing::MakeTempDir(c.model + "_opt_");
  std::string original = c.torch ? FindRunfile("benchmarks/torch_zoo/" + c.model + ".onnx") : dir + "/original.onnx";
  if (!c.torch) WriteOnnxFile(zoo::Build(c.model, 1), original);
  std::string written = dir + "/optimised.onnx", report = dir + "/report.json";
  std::string cmd = FindRunfile("optimiser/optimiser") + " --model=" + original + " --output=" + written +
                    " --report=" + report + " > " + dir + "/stdout.txt 2> " + dir + "/stderr.txt";
  int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(dir + "/stderr.txt");
  std::string out = ReadFile(dir + "/stdout.txt");
  std::cout << out;

  Graph before = ImportOnnxFile(original);
  Graph after = ImportOnnxFile(written);  // exported through onnx::checker; re-imports
  std::string json = ReadFile(report);
  bool wrote_original = json.find("\"wrote_original\": true") != std::string::npos;
  // "after" describes the optimised graph, written unless it was not faster.
  if (!wrote_original) {
    EXPECT_EQ(JsonNumber(json, "nodes", json.find("\"after\"")), after.num_nodes()) << json;
  }
  EXPECT_GT(JsonNumber(json, "graphs_explored"), 0) << json;
  EXPECT_LE(JsonNumber(json, "graphs_explored"), 1000) << json;
  EXPECT_LE(JsonNumber(json, "max_relative_error"), 1e-4) << json;
  double speedup = JsonNumber(json, "speedup");
  // Either the optimised graph was measured faster, or the original was written.
  if (wrote_original) {
    EXPECT_EQ(after.StructuralHash(), before.StructuralHash());
  } else {
    EXPECT_GT(speedup, 1.0) << json;
  }

  std::vector<at::Tensor> inputs = RandomInputs(before, 11);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (size_t k = 0; k < inputs.size(); ++k) named.push_back({before.value(before.inputs()[k]).name, inputs[k]});
  std::vector<at::Tensor> a = testing::RunOnnxRuntime(original, named);
  std::vector<at::Tensor> b = testing::RunOnnxRuntime(written, named);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    ASSERT_GT(a[k].to(at::kDouble).std().item<double>(), 1e-6) << "output " << k << " is degenerate";
    double err = RelativeError(b[k], a[k]);
    std::cout << c.model << (c.torch ? " (torch)" : " (c++)") << " output " << k
              << ": ORT original vs optimised rel. error " << err << (wrote_original ? " (original written)" : "")
              << "\n";
    EXPECT_LE(err, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooOptimise, ::testing::ValuesIn(zoo::Cases()), zoo::CaseName);

}  // namespace
}  // namespace rlflow

// Acceptance: every zoo model, C++-built and torch-exported, optimises with
// the optimiser's default settings (./bazelw run //optimiser -- --model=M);
// the written model re-imports (it passed onnx::checker on export), and ONNX
// Runtime gives the same outputs for the original and the written model
// within 1e-4 relative error. The report is valid and consistent.
//
// One test binary per (model, source); see BUILD.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/subprocess.h"
#include "runtime/executor.h"
#include "runtime/ort_testing.h"
#include "zoo/zoo.h"
#include "zoo/zoo_cases.h"

namespace rlflow {
namespace {

using zoo::Case;

class ZooOptimise : public ::testing::TestWithParam<Case> {};

TEST_P(ZooOptimise, DefaultSettingsMatchOnnxRuntime) {
  const Case& c = GetParam();
  std::string dir = testing::MakeTempDir(c.model + "_opt_");
  std::string original = c.torch ? FindRunfile("zoo/torch_zoo/" + c.model + ".onnx") : dir + "/original.onnx";
  if (!c.torch) WriteOnnxFile(zoo::Build(c.model, 1), original);
  std::string written = dir + "/optimised.onnx", report = dir + "/report.json";
  // The torch exports have a symbolic batch: their optimised graph is
  // written even when not measured faster, so that its interface and its
  // results at other batch sizes are checked below.
  // Default settings, except a deadline for the search phase that keeps the
  // test well under a minute on CI's 2 cores: 10 s (with 20, ResNet-50,
  // ResNeXt-50 and Inception-v3 took 37 to 41 s here). BERT-Base and
  // ViT-B/16 run 0.8 and 1.2 s a pass: the verdict's default (10 pairs at
  // least) alone took 18 and 28 s there, so these two get 6 pairs (the
  // fewest that give a 95% interval) and 3 s of search (with 6, ViT-B/16's
  // torch export took 53 s in CI's test step here, 2026-11-29). The
  // search's results are not what this test checks: the benchmarks measure
  // those.
  const bool large = c.model == "bert_base" || c.model == "vit_b_16";
  std::vector<std::string> args = {FindRunfile("optimiser/optimiser"), "--model=" + original, "--output=" + written,
                                   "--report=" + report, large ? "--time_limit=3" : "--time_limit=10"};
  if (large) args.push_back("--measure_runs=6");
  if (c.torch) args.push_back("--force_optimised");
  ProgramIo io;
  io.out = dir + "/stdout.txt";
  io.err = dir + "/stderr.txt";
  const int status = RunProgram(args, io);
  ASSERT_EQ(status, 0) << ReadFile(dir + "/stderr.txt");
  std::string out = ReadFile(dir + "/stdout.txt");
  std::cout << out;

  Graph after = ImportOnnxFile(written);  // exported through onnx::checker; re-imports
  nlohmann::json json = nlohmann::json::parse(ReadFile(report));
  bool wrote_original = json["wrote_original"].get<bool>();
  // "after" describes the optimised graph, written unless it was not faster.
  if (!wrote_original) {
    EXPECT_EQ(json["after"]["nodes"].get<int64_t>(), after.num_nodes()) << json;
  }
  EXPECT_GT(json["search"]["graphs_explored"].get<int64_t>(), 0) << json;
  // A changed graph is written only when the verdict says faster.
  if (!wrote_original && !c.torch) {
    EXPECT_EQ(json["verdict"]["outcome"], "faster") << json;
  }
  // Per round, the budget (1000 graphs), then the greedy finish: one graph
  // per rewrite it applied, and the last. The report's count is the rounds' sum.
  ASSERT_EQ(json["search"]["per_round"].size(), json["search"]["rounds"].get<size_t>()) << json;
  int64_t explored = 0;
  for (const auto& round : json["search"]["per_round"]) {
    EXPECT_LE(round["graphs_explored"].get<int64_t>(), 1000 + round["finish_applied"].get<int64_t>() + 1) << json;
    explored += round["graphs_explored"].get<int64_t>();
  }
  EXPECT_EQ(json["search"]["graphs_explored"].get<int64_t>(), explored) << json;
  EXPECT_LE(json["check"]["max_relative_error"].get<double>(), 1e-4) << json;
  double speedup = json["speedup"].get<double>();
  // Either the optimised graph was measured faster, or the original was written.
  if (wrote_original) {
    // The original is written as it came, byte for byte.
    EXPECT_TRUE(ReadFile(written) == ReadFile(original)) << "the written 'original' differs from the input file";
  } else if (!c.torch) {
    EXPECT_GT(speedup, 1.0) << json;
  }

  // Drop-in: the same interface (names, element types, dimensions, symbolic
  // names included), opsets and metadata.
  onnx::ModelProto mo, mw;
  ASSERT_TRUE(mo.ParseFromString(ReadFile(original)));
  ASSERT_TRUE(mw.ParseFromString(ReadFile(written)));
  ASSERT_EQ(mo.graph().input_size(), mw.graph().input_size());
  ASSERT_EQ(mo.graph().output_size(), mw.graph().output_size());
  for (int k = 0; k < mo.graph().input_size(); ++k)
    EXPECT_EQ(mo.graph().input(k).SerializeAsString(), mw.graph().input(k).SerializeAsString())
        << "input " << k << " changed";
  for (int k = 0; k < mo.graph().output_size(); ++k)
    EXPECT_EQ(mo.graph().output(k).SerializeAsString(), mw.graph().output(k).SerializeAsString())
        << "output " << k << " changed";
  EXPECT_EQ(mo.metadata_props_size(), mw.metadata_props_size());
  auto default_opset = [](const onnx::ModelProto& m) {
    for (const auto& imp : m.opset_import())
      if (imp.domain().empty() || imp.domain() == "ai.onnx") return imp.version();
    return int64_t{-1};
  };
  EXPECT_EQ(default_opset(mo), default_opset(mw)) << "the opset changed";

  // ONNX Runtime: original and written model agree, at batch 1 and, where
  // the batch is symbolic, at batch 2.
  bool symbolic = false;
  for (const auto& d : mo.graph().input(0).type().tensor_type().shape().dim()) symbolic |= !d.has_dim_value();
  EXPECT_EQ(symbolic, c.torch) << "the torch exports have a dynamic batch";
  // Each model in one ONNX Runtime session for all batch sizes.
  const std::vector<int> batches = symbolic ? std::vector<int>{1, 2} : std::vector<int>{1};
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> input_sets;
  for (int batch : batches) {
    ImportOptions at_batch;
    at_batch.free_dim_value = batch;
    Graph bound = ImportOnnxFile(original, at_batch);
    std::vector<at::Tensor> inputs = RandomInputs(bound, 11);
    std::vector<std::pair<std::string, at::Tensor>> named;
    for (size_t k = 0; k < inputs.size(); ++k) named.push_back({bound.value(bound.inputs()[k]).name, inputs[k]});
    input_sets.push_back(std::move(named));
  }
  const std::vector<std::vector<at::Tensor>> by_original = testing::RunOnnxRuntime(original, input_sets);
  const std::vector<std::vector<at::Tensor>> by_written = testing::RunOnnxRuntime(written, input_sets);
  ASSERT_EQ(by_original.size(), batches.size());
  ASSERT_EQ(by_written.size(), batches.size());
  for (size_t i = 0; i < batches.size(); ++i) {
    const int batch = batches[i];
    const std::vector<at::Tensor>&a = by_original[i], &b = by_written[i];
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_GT(a[k].to(at::kDouble).std().item<double>(), 1e-6) << "output " << k << " is degenerate";
      EXPECT_EQ(a[k].size(0), batch);
      double err = RelativeError(b[k], a[k]);
      std::cout << c.model << (c.torch ? " (torch)" : " (c++)") << " batch " << batch << " output " << k
                << ": ORT original vs optimised rel. error " << err << (wrote_original ? " (original written)" : "")
                << "\n";
      EXPECT_LE(err, 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooOptimise, ::testing::ValuesIn(zoo::Cases()), zoo::CaseName);

}  // namespace
}  // namespace rlflow

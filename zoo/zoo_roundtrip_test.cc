// Every zoo model, C++-built and torch-exported, round-trips import -> export,
// passes onnx::checker (inside WriteOnnxFile), and gives the same outputs in
// ONNX Runtime before and after the round trip (relative error <= 1e-5); the
// CPU executor matches ONNX Runtime within 1e-4.
//
// One test binary per (model, source); see BUILD. Relative error is
// max |a - b| / max |reference| over each output.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/file_util.h"
#include "core/onnx_io.h"
#include "runtime/executor.h"
#include "runtime/ort_testing.h"
#include "zoo/zoo.h"
#include "zoo/zoo_cases.h"

namespace rlflow {
namespace {

using zoo::Case;

class ZooRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(ZooRoundTrip, MatchesOnnxRuntime) {
  const Case& c = GetParam();
  std::string dir = testing::MakeTempDir(c.model + "_");
  std::string original = c.torch ? FindRunfile("zoo/torch_zoo/" + c.model + ".onnx") : dir + "/original.onnx";
  if (!c.torch) WriteOnnxFile(zoo::Build(c.model, 1), original);
  ASSERT_TRUE(FileExists(original)) << original;

  ImportReport report;
  Graph imported = ImportOnnxFile(original, {}, &report);
  for (const auto& w : report.warnings) std::cout << "import: " << w << "\n";
  for (NodeId id = 0; id < imported.num_nodes(); ++id)
    EXPECT_FALSE(imported.node(id).opaque()) << "not modelled: " << imported.node(id).Describe();

  std::string roundtrip = dir + "/roundtrip.onnx";
  WriteOnnxFile(imported, roundtrip);
  Graph again = ImportOnnxFile(roundtrip);
  EXPECT_EQ(again.StructuralHash(), imported.StructuralHash()) << "import(export(g)) differs from g";
  EXPECT_EQ(again.num_nodes(), imported.num_nodes());

  std::vector<at::Tensor> inputs = RandomInputs(imported, 7);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (size_t k = 0; k < inputs.size(); ++k) named.push_back({imported.value(imported.inputs()[k]).name, inputs[k]});
  std::vector<at::Tensor> ort_original = testing::RunOnnxRuntime(original, named);
  std::vector<at::Tensor> ort_roundtrip = testing::RunOnnxRuntime(roundtrip, named);
  std::vector<at::Tensor> ours = Executor(imported).Run(inputs);
  ASSERT_EQ(ort_original.size(), imported.outputs().size());
  ASSERT_EQ(ort_roundtrip.size(), ort_original.size());
  ASSERT_EQ(ours.size(), ort_original.size());
  for (size_t k = 0; k < ours.size(); ++k) {
    // A degenerate (all-zero or constant) output would make the check vacuous.
    ASSERT_GT(ort_original[k].to(at::kDouble).std().item<double>(), 1e-6) << "output " << k << " is degenerate";
    double rt = RelativeError(ort_roundtrip[k], ort_original[k]);
    double ex = RelativeError(ours[k], ort_original[k]);
    std::cout << c.model << (c.torch ? " (torch)" : " (c++)") << " output " << k << ": ORT round trip rel. error " << rt
              << ", executor vs ORT rel. error " << ex << "\n";
    EXPECT_LE(rt, 1e-5);
    EXPECT_LE(ex, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooRoundTrip, ::testing::ValuesIn(zoo::Cases()), zoo::CaseName);

}  // namespace
}  // namespace rlflow

// The optimiser end to end with --device=cuda on ResNet-50 and BERT-Base:
// calibrated on the GPU, searched, checked against the CPU executor,
// measured with cudaEvents, written. Where there is no GPU, each test
// reports itself skipped, by name, with the probe's reason.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "core/file_util.h"
#include "core/subprocess.h"
#include "runtime/cuda/device.h"

namespace rlflow {
namespace {

class CudaOptimise : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    cuda::DeviceInfo d = cuda::ProbeDevice();
    if (!d.available) GTEST_SKIP() << "skipped: " << d.error;
  }
};

TEST_P(CudaOptimise, OptimisesOnTheGpu) {
  const std::string dir = MakeTempDir("cuda_optimise_");
  const std::string bin = std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/optimiser/optimiser";
  const std::string model = GetParam();
  const int rc = RunProgram({bin, "--model=" + model, "--device=cuda", "--output=" + dir + "/out.onnx",
                             "--report=" + dir + "/report.json", "--time_limit=60"},
                            dir + "/log.txt");
  ASSERT_EQ(rc, 0) << ReadFile(dir + "/log.txt");
  nlohmann::json report = nlohmann::json::parse(ReadFile(dir + "/report.json"));
  EXPECT_EQ(report["device"], "cuda");
  EXPECT_TRUE(FileExists(dir + "/out.onnx"));
  EXPECT_TRUE(report.contains("verdict")) << report.dump(2);
}

INSTANTIATE_TEST_SUITE_P(ZooModels, CudaOptimise, ::testing::Values("resnet50", "bert_base"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace rlflow

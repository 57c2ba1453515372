// The CUDA backend where there may be no GPU: the probe gives a one-line
// reason instead of crashing, --device=cuda and the executor fail with it,
// and the library versions that key the timing cache are known either way.
#include "runtime/cuda/device.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/graph_builder.h"
#include "runtime/cost_model.h"
#include "runtime/cuda/executor.h"

namespace rlflow::cuda {
namespace {

TEST(CudaDevice, ProbeNeverCrashesAndKnowsTheLibraries) {
  DeviceInfo d = ProbeDevice();
  EXPECT_GE(d.cudnn_version, 90000u);  // cuDNN 9 (9.19 here: 91900)
  EXPECT_GE(d.cublas_version, 120000);
  EXPECT_GT(d.runtime_version, 0);
  if (d.available) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.compute_major, 7);
    EXPECT_NE(d.Fingerprint().find(d.name), std::string::npos);
  } else {
    // One line that says why.
    EXPECT_FALSE(d.error.empty());
    EXPECT_EQ(d.error.find('\n'), std::string::npos) << d.error;
    EXPECT_NE(d.error.find("CUDA"), std::string::npos) << d.error;
  }
}

TEST(CudaDevice, DeviceCudaIsRegisteredAndFailsCleanlyWithoutADevice) {
  const BackendInfo& info = FindTimingBackend("cuda");
  EXPECT_EQ(info.target, "onnx");
  DeviceInfo d = ProbeDevice();
  if (d.available) {
    std::unique_ptr<TimingBackend> b = MakeTimingBackend("cuda");
    EXPECT_EQ(b->name(), "cuda");
    EXPECT_NE(b->fingerprint().find("cudnn"), std::string::npos);
    return;
  }
  try {
    MakeTimingBackend("cuda");
    FAIL() << "made a CUDA backend without a device";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--device=cuda: no CUDA device"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  GraphBuilder b(1);
  Graph g = b.Build({b.Op("Relu", {b.Input("x", {2, 3})})});
  EXPECT_THROW(CudaExecutor e(g), Error);
}

// With a GPU: the timing backend's three measurements and a cost-model
// calibration, on a graph with device nodes and a node that runs on the
// host (TopK). Skipped, by name, without one.
TEST(CudaDevice, TimingBackendMeasuresWholeRunsPairsAndNodes) {
  DeviceInfo d = ProbeDevice();
  if (!d.available) GTEST_SKIP() << "skipped: " << d.error;
  GraphBuilder b(3);
  ValueId x = b.Input("x", {1, 16, 32, 32});
  ValueId y =
      b.Op("Relu", {b.Op("Conv", {x, b.Weight("w", {16, 16, 3, 3}, 0.1f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}})});
  ValueId flat = b.Op("Reshape", {y, b.ConstInts({16, 1024})});
  std::vector<ValueId> top = b.OpN("TopK", {flat, b.ConstInts({4})}, 2);
  Graph g = b.Build({b.Op("ReduceMean", {top[0]}, {{"axes", Attribute::Ints({1})}})});
  std::unique_ptr<TimingBackend> backend = MakeTimingBackend("cuda");
  TimingOptions o;
  EXPECT_GT(backend->TimeGraph(g, o), 0.0);
  PairedTimes p = backend->TimePaired(g, g, 5, o);
  ASSERT_EQ(p.wall_a.size(), 5u);
  ASSERT_EQ(p.wall_b.size(), 5u);
  for (double t : p.wall_a) EXPECT_GT(t, 0.0);
  InContextTimes in = backend->TimeNodesInContext(g, 5, o);
  ASSERT_EQ(in.node_ms.size(), static_cast<size_t>(g.num_nodes()));
  EXPECT_GT(in.run_ms, 0.0);
  for (NodeId id : g.TopologicalOrder()) EXPECT_GT(in.node_ms[id], 0.0) << g.node(id).Describe();
  MeasuredCostModel cost(backend.get());
  CalibrationReport r = cost.Calibrate(g, 5);
  EXPECT_GT(r.run_ms, 0.0);
  EXPECT_GT(cost.GraphCost(g), 0.0);
}

}  // namespace
}  // namespace rlflow::cuda

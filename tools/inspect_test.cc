// //tools:inspect as a user runs it to learn what --input_shape to give:
// it imports a model as the optimiser does and prints its inputs, also for a
// detector that does not fit the free binding (bound where it fits, said so)
// and for a model with control flow (its outputs typed by one ONNX Runtime
// run); a missing model is a one-line error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/subprocess.h"

namespace rlflow {
namespace {

std::string Runfile(const std::string& path) { return std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/" + path; }

TEST(InspectTool, PrintsTheInputsOfModelsThatNeedFittingOrARun) {
  const std::string tool = Runfile("tools/inspect");
  int status = -1;
  std::string out = RunProgramOutput({tool, "--model=" + Runfile("zoo/real_models/yolo_detect_op13.onnx")}, &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("the model does not fit at the shapes its symbolic input dimensions were bound to"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("input  x float32[1,3,224,224]  (declared [N,3,H,W])"), std::string::npos) << out;
  out = RunProgramOutput(
      {tool, "--model=" + Runfile("zoo/real_models/yolo_detect_op13.onnx"), "--input_shape=x:2,3,96,128"}, &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("input  x float32[2,3,96,128]  (declared [N,3,H,W])"), std::string::npos) << out;
  EXPECT_EQ(out.find("does not fit"), std::string::npos) << out;

  out = RunProgramOutput({tool, "--model=" + Runfile("zoo/real_models/control_flow_op13.onnx")}, &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("typed 1 outputs of control-flow or custom nodes by running the model once"), std::string::npos)
      << out;
  EXPECT_NE(out.find("input  x float32[1,3,1,1]  (declared [N,3,H,W])"), std::string::npos) << out;

  out = RunProgramOutput({tool, "--model=/no/such/model.onnx"}, &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("error: "), std::string::npos) << out;
}

}  // namespace
}  // namespace rlflow

#pragma once
// Test cases over the zoo: every model, C++-built and torch-exported, with
// names "<model>_cpp" / "<model>_torch" for parameterised tests (one Bazel
// test target per case filters on the name; see the BUILD files).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zoo/zoo.h"

namespace rlflow::zoo {

struct Case {
  std::string model;
  bool torch;  // torch.onnx.export output (//zoo:torch_zoo), else the C++ builder's
};

inline std::vector<Case> Cases() {
  std::vector<Case> out;
  for (const auto& m : ModelNames()) {
    out.push_back({m, false});
    out.push_back({m, true});
  }
  return out;
}

inline std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.model + (info.param.torch ? "_torch" : "_cpp");
}

}  // namespace rlflow::zoo

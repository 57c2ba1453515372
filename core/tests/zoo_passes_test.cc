// Every builtin pass, alone and in the default order, on every zoo model
// (one test per model): the outputs stay within 1e-5 (relative) of the
// original's on seeded random inputs, the interface (input and output names
// and types) is unchanged, the graph validates, and no opaque node is
// touched.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/passes/pass.h"
#include "runtime/executor.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

std::vector<std::string> Interface(const Graph& g) {
  std::vector<std::string> out;
  for (ValueId v : g.inputs()) out.push_back("in " + g.value(v).name + " " + g.value(v).type.ToString());
  for (ValueId v : g.outputs()) out.push_back("out " + g.value(v).name + " " + g.value(v).type.ToString());
  return out;
}

class ZooPasses : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooPasses, OutputsAndInterfaceUnchanged) {
  Graph g = zoo::Build(GetParam(), 1);
  std::vector<at::Tensor> in = RandomInputs(g, 5);
  std::vector<at::Tensor> want = Executor(g).Run(in);
  auto check = [&](const std::string& what, const Graph& h) {
    SCOPED_TRACE(GetParam() + ": " + what);
    h.Validate();
    EXPECT_EQ(Interface(h), Interface(g));
    std::vector<at::Tensor> got = Executor(h).Run(in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_LT(RelativeError(got[k], want[k]), 1e-5) << "output " << k;
  };
  std::string fired;
  for (const PassInfo& p : PassRegistry::Builtin().passes()) {
    Graph h = g;
    if (p.make()->Run(h)) {
      fired += p.name + " ";
      check(p.name, h);
    }
  }
  Graph all = g;
  RunPasses(PassRegistry::Builtin(), DefaultPassOrder(), all);
  check("default order", all);
  EXPECT_LE(all.num_nodes(), g.num_nodes());
  std::printf("%s: passes that changed the graph: %s\n", GetParam().c_str(), fired.c_str());
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooPasses, ::testing::ValuesIn(zoo::ModelNames()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace rlflow

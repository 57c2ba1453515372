// Every rule in the checked-in database, checked numerically in float64 at
// shapes well beyond the proof bound (2x16x32x32 activations).
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <cstdlib>

#include "core/rules/rule.h"
#include "runtime/executor.h"

namespace rlflow {
namespace {

TEST(RuleDatabase, EveryRuleHoldsOnLargeShapes) {
  at::set_num_threads(2);
  std::string path = std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/rules/default.rules.pb";
  rules::RuleDatabase db = LoadRuleDatabase(path);
  ASSERT_GE(db.rules_size(), 700);
  const SymbolBinding large = {{"n", 2}, {"c", 16}, {"d", 8}, {"h", 32}, {"w", 32},
                               {"m", 16}, {"k", 32}, {"j", 24}, {"l", 8}};
  int failures = 0;
  for (const auto& r : db.rules()) {
    Graph src = InstantiatePattern(r, r.source(), large, DType::kFloat64);
    Graph tgt = InstantiatePattern(r, r.target(), large, DType::kFloat64);
    std::vector<at::Tensor> in = RandomInputs(src, HashString(r.id()));
    for (auto& t : in) t = t.to(at::kDouble);
    std::vector<at::Tensor> a = Executor(src).Run(in), b = Executor(tgt).Run(in);
    ASSERT_EQ(a.size(), b.size()) << r.id();
    double worst = 0;
    for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, RelativeError(a[k], b[k]));
    if (!(worst <= 1e-9)) {
      ++failures;
      ADD_FAILURE() << r.id() << " " << RuleToString(r) << ": relative error " << worst;
    }
  }
  EXPECT_EQ(failures, 0);
  std::cout << db.rules_size() << " rules checked at n=2 c=16 d=8 h=32 w=32 m=16 k=32 j=24 l=8, " << failures
            << " failures\n";
}

}  // namespace
}  // namespace rlflow

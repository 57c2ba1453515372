// Every rule in the checked-in database, checked numerically in float64 at
// shapes well beyond the proof bound (2x16x32x32 activations); every
// attribute-generic rule at random window attributes (kernels 1 to 5,
// strides 1 to 3, asymmetric pads, dilations, groups), beyond the verifier's
// instance table. The rules are checked in kParts parts (a parameterised
// test, sharded by Bazel) so that each stays well under a minute.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "core/rules/rule.h"
#include "runtime/executor.h"

namespace rlflow {
namespace {

constexpr int kParts = 8;

class RuleDatabase : public ::testing::TestWithParam<int> {};

// Rule k of the database is in part k % kParts.
TEST_P(RuleDatabase, EveryRuleHoldsOnLargeShapes) {
  const int part = GetParam();
  at::set_num_threads(1);
  std::string path = std::string(std::getenv("TEST_SRCDIR")) + "/rlflow/rules/default.rules.pb";
  rules::RuleDatabase db = LoadRuleDatabase(path);
  ASSERT_GE(db.rules_size(), 700);
  const SymbolBinding large = {{"n", 2},  {"c", 16}, {"d", 8},  {"h", 32}, {"w", 32},
                               {"m", 16}, {"k", 32}, {"j", 24}, {"l", 8}};
  int failures = 0, generic = 0, generic_checks = 0;
  auto check = [&](const rules::Rule& r, const SymbolBinding& given, const std::string& what) {
    // Symbols of written rules (d1, d2, ... of rank-generic ones) that the
    // table above does not name: 6.
    SymbolBinding binding = given;
    for (const std::string& sym : RuleSymbols(r)) binding.emplace(sym, 6);
    Graph src = InstantiatePattern(r, r.source(), binding, DType::kFloat64);
    Graph tgt = InstantiatePattern(r, r.target(), binding, DType::kFloat64);
    std::vector<at::Tensor> in = RandomInputs(src, HashString(r.id()));
    for (auto& t : in) t = t.to(at::kDouble);
    for (const auto& [k, bound] : UpperBounds(r)) in.at(static_cast<size_t>(k)).clamp_max_(bound);  // its premise
    std::vector<at::Tensor> a = Executor(src).Run(in), b = Executor(tgt).Run(in);
    ASSERT_EQ(a.size(), b.size()) << r.id();
    double worst = 0;
    for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, RelativeError(a[k], b[k]));
    // Rules proved within a tolerance (float32 attributes) hold within it.
    if (!(worst <= std::max(1e-9, 10 * r.tolerance()))) {
      ++failures;
      ADD_FAILURE() << r.id() << " " << RuleToString(r) << what << ": relative error " << worst;
    }
  };
  int checked = 0;
  for (int index = part; index < db.rules_size(); index += kParts) {
    const rules::Rule& r = db.rules(index);
    ++checked;
    std::vector<std::string> vars = AttributeVariables(r);
    if (vars.empty()) {
      check(r, large, "");
      continue;
    }
    ++generic;
    std::mt19937_64 rng(HashString(r.id()));
    auto pick = [&](int lo, int hi) { return static_cast<int64_t>(lo + rng() % static_cast<uint64_t>(hi - lo + 1)); };
    bool pool = std::find(vars.begin(), vars.end(), "kernel_shape") != vars.end();
    for (int trial = 0; trial < 6; ++trial) {
      SymbolBinding b = large;
      int64_t kh = pick(1, 5), kw = pick(1, 5);
      AttrBinding attrs;
      b["kh"] = kh;
      b["kw"] = kw;
      // Pooling pads stay below the kernel (ONNX); conv pads are free.
      attrs["pads"] = Attribute::Ints({pick(0, pool ? kh - 1 : 2), pick(0, pool ? kw - 1 : 2),
                                       pick(0, pool ? kh - 1 : 2), pick(0, pool ? kw - 1 : 2)});
      attrs["strides"] = Attribute::Ints({pick(1, 3), pick(1, 3)});
      attrs["dilations"] = Attribute::Ints({pick(1, 2), pick(1, 2)});
      attrs["kernel_shape"] = Attribute::Ints({kh, kw});
      int64_t group = std::vector<int64_t>{1, 2, 8}[trial % 3];  // c = 16, d = 8: depthwise-like at 8
      attrs["group"] = Attribute::Int(group);
      b["cg"] = b["c"] / group;
      rules::Rule bound = BindAttributes(r, attrs);
      std::string what = " at kh=" + std::to_string(kh) + " kw=" + std::to_string(kw) + " " + attrs["pads"].ToString() +
                         " strides " + attrs["strides"].ToString() + " dilations " + attrs["dilations"].ToString() +
                         " group " + std::to_string(group);
      check(bound, b, what);
      ++generic_checks;
    }
  }
  EXPECT_GT(generic, 0);
  EXPECT_EQ(failures, 0);
  std::cout << "part " << part << "/" << kParts << ": " << checked << " of " << db.rules_size()
            << " rules checked at n=2 c=16 d=8 h=32 w=32 m=16 k=32 j=24 l=8 (" << generic
            << " attribute-generic ones at " << generic_checks << " random attribute instances), " << failures
            << " failures\n";
}

INSTANTIATE_TEST_SUITE_P(Parts, RuleDatabase, ::testing::Range(0, kParts));

}  // namespace
}  // namespace rlflow

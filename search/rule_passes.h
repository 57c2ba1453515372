#pragma once
// Passes over the generated rules, one per family, and --search=passes.
//
// A family is every rule whose most specific operator (the first of
// kFamilyOps on either side) is the same: "rules_conv" holds every rule with
// a Conv, "rules_matmul" those with a MatMul but no Conv or Gemm, and so on.
// A family's pass applies the family's rewrites greedily, best estimate
// first, while the cost model says they gain (the registered greedy search
// restricted to the family: one loop, not a copy), i.e. to a fixed point.
#include <map>
#include <string>
#include <vector>

#include "core/passes/pass.h"
#include "core/rewrite/matcher.h"
#include "runtime/cost_model.h"

namespace rlflow {

// The operators that name families, most specific first.
const std::vector<std::string>& FamilyOps();
// Family name -> indices into `rules` (families without rules are absent).
std::map<std::string, std::vector<int>> RuleFamilies(const std::vector<rules::Rule>& rules);

// The builtin passes plus one pass per rule family of `matcher`'s rules,
// costed with `cost`; the family passes' greedy searches run under `runner`
// when given (the run's deadline and interrupt). All three must outlive the
// registry's passes.
PassRegistry PassesWithRuleFamilies(const Matcher& matcher, CostModel* cost, Runner* runner = nullptr);

}  // namespace rlflow

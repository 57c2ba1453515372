#include "core/passes/pass.h"

#include <sstream>

#include "core/error.h"

namespace rlflow {

PassRegistry& PassRegistry::Builtin() {
  static PassRegistry* registry = new PassRegistry();
  return *registry;
}

void PassRegistry::Add(PassInfo info) {
  if (info.name.empty() || !info.make) Fail("pass registry: a pass without a name or factory");
  if (Has(info.name)) Fail("pass registry: two passes named '", info.name, "'");
  passes_.push_back(std::move(info));
}

bool PassRegistry::Has(const std::string& name) const {
  for (const PassInfo& p : passes_)
    if (p.name == name) return true;
  return false;
}

std::vector<std::string> PassRegistry::Names() const {
  std::vector<std::string> out;
  for (const PassInfo& p : passes_) out.push_back(p.name);
  return out;
}

std::unique_ptr<Pass> PassRegistry::Make(const std::string& name) const {
  for (const PassInfo& p : passes_)
    if (p.name == name) return p.make();
  std::string known;
  for (const PassInfo& p : passes_) known += (known.empty() ? "" : ", ") + p.name;
  Fail("unknown pass '", name, "' (known: ", known, ")");
}

PassRunResult RunPasses(const PassRegistry& registry, const std::vector<std::string>& names, Graph& graph,
                        const PassRunOptions& o) {
  std::vector<std::unique_ptr<Pass>> passes;
  for (const std::string& n : names) passes.push_back(registry.Make(n));
  if (o.max_rounds < 1) Fail("passes: max_rounds must be >= 1");
  PassRunResult r;
  for (;;) {
    ++r.rounds;
    bool changed = false;
    for (const auto& p : passes) {
      if (o.runner != nullptr && o.runner->ShouldStop()) return r;
      bool c = p->Run(graph);
      if (o.runner != nullptr) o.runner->CountSteps();
      ++r.passes_run;
      if (c) ++r.passes_changed;
      changed = changed || c;
      if (o.after_pass) o.after_pass(p->Name(), c);
    }
    if (!o.fixed_point || !changed || r.rounds >= o.max_rounds) break;
  }
  return r;
}

const std::vector<std::string>& CanonicalisePasses() {
  static const std::vector<std::string> list = {"lower_batchnorm"};
  return list;
}

const std::vector<std::string>& FinishPasses() {
  static const std::vector<std::string> list = {"fold_constants", "raise_batchnorm", "dce"};
  return list;
}

const std::vector<std::string>& DefaultPassOrder() {
  static const std::vector<std::string> list = {
      // cleanup
      "dce", "remove_identity", "remove_dropout", "remove_nop_cast", "remove_nop_pad", "remove_nop_slice",
      "remove_nop_expand", "remove_single_input_concat", "dedup_initializers", "cse",
      // constants and algebra
      "fold_constants", "remove_mul_one", "remove_add_zero", "combine_constant_chains", "transpose_transpose",
      "remove_nop_transpose", "reshape_reshape", "remove_nop_reshape", "squeeze_unsqueeze", "concat_split",
      "idempotent_unary", "neg_neg",
      // fusions
      "fold_batchnorm_into_conv", "fold_mul_into_conv", "fold_add_into_conv", "matmul_add_to_gemm",
      "transpose_into_gemm", "merge_parallel_convs", "merge_parallel_matmuls",
      // cleanup again
      "fold_constants", "cse", "dce"};
  return list;
}

}  // namespace rlflow

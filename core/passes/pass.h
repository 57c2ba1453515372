#pragma once
// Graph passes: small objects with a name and one Run that says whether it
// changed the graph (XLA's HloPassInterface, ONNX Runtime's
// GraphTransformer), a registry of passes by name, and a pipeline that runs
// a list of them, optionally to a fixed point.
//
// Every pass keeps what the graph computes (within float rounding: e.g.
// batch-norm folding reassociates) and its interface: graph inputs and
// output names are never changed (a node whose output is a graph output is
// removed only when its input can take the output's name). Every pass
// leaves the graph valid, shape-inferred and free of dead nodes, and never
// touches an opaque node (nor folds through one).
//
// Adding a pass: one class with Name/Description/Run in core/passes/*.cc,
// registered with RLFLOW_REGISTER_PASS, plus a case in passes_test.cc
// (which fails for a registered pass without one).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/runner.h"

namespace rlflow {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string Name() const = 0;
  // One line: what it does.
  virtual std::string Description() const = 0;
  // Returns true if it changed the graph. Throws rlflow::Error only for a
  // graph that was invalid before it ran.
  virtual bool Run(Graph& graph) const = 0;
};

struct PassInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Pass>()> make;
};

// A set of passes by name. Builtin() holds the passes of core/passes
// (registered statically); other libraries add passes that need more than
// the graph (e.g. the rule-family passes of //optimiser:rule_passes, which
// need a rule database and a cost model) to a copy.
class PassRegistry {
 public:
  static PassRegistry& Builtin();
  // Throws rlflow::Error if the name is taken.
  void Add(PassInfo info);
  bool Has(const std::string& name) const;
  // Throws rlflow::Error for an unknown name, listing the known ones.
  std::unique_ptr<Pass> Make(const std::string& name) const;
  // In registration order.
  const std::vector<PassInfo>& passes() const { return passes_; }
  std::vector<std::string> Names() const;

 private:
  std::vector<PassInfo> passes_;
};

struct PassRegistrar {
  explicit PassRegistrar(PassInfo info) { PassRegistry::Builtin().Add(std::move(info)); }
};
#define RLFLOW_PASS_CONCAT_INNER(a, b) a##b
#define RLFLOW_PASS_CONCAT(a, b) RLFLOW_PASS_CONCAT_INNER(a, b)
// RLFLOW_REGISTER_PASS(MyPass) at namespace scope: registers a default-constructed MyPass.
#define RLFLOW_REGISTER_PASS(type)                                                                        \
  static ::rlflow::PassRegistrar RLFLOW_PASS_CONCAT(rlflow_pass_registrar_, __LINE__)(::rlflow::PassInfo{ \
      type().Name(), type().Description(), [] { return std::unique_ptr<::rlflow::Pass>(new type()); }})

struct PassRunOptions {
  // Repeat the whole list until no pass changes the graph (at most
  // max_rounds rounds).
  bool fixed_point = false;
  int max_rounds = 10;
  // Called after each pass with its name and whether it changed the graph.
  std::function<void(const std::string&, bool)> after_pass;
  // The run's owner of limits (optional): polled between passes; when it
  // says stop, the pipeline stops. Each pass run counts as a real step.
  Runner* runner = nullptr;
};

struct PassRunResult {
  int passes_run = 0;
  int passes_changed = 0;  // runs that changed the graph
  int rounds = 0;
};

// Runs the named passes in order (each name must be registered in
// `registry`; all names are checked before anything runs).
PassRunResult RunPasses(const PassRegistry& registry, const std::vector<std::string>& names, Graph& graph,
                        const PassRunOptions& options = {});

// The order the optimiser's pipeline runs its own steps in, as pass lists:
// before the search (canonicalisation: batch-norm lowering) and after it
// (folding weight-only subgraphs, raising unfolded Mul/Add pairs back to
// batch norms, dropping dead nodes).
const std::vector<std::string>& CanonicalisePasses();
const std::vector<std::string>& FinishPasses();
// The standard simplification order (what `--search=passes` runs without
// --passes, and the baseline of the pass-ordering agent): cleanup, constant
// folding, algebraic simplification, fusions, then cleanup again.
const std::vector<std::string>& DefaultPassOrder();

}  // namespace rlflow

#include "verifier/verify.h"

#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/op_registry.h"
#include "core/symbolic.h"
#include "runtime/executor.h"

namespace rlflow::verifier {

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kProved: return "proved";
    case Outcome::kRefutedNumeric: return "refuted (float64 check)";
    case Outcome::kRefutedZ3: return "refuted (Z3 counterexample)";
    case Outcome::kTimeout: return "timed out";
    case Outcome::kPrunedDuplicate: return "pruned: duplicate up to renaming";
    case Outcome::kPrunedCommonSubgraph: return "pruned: common subgraph";
    case Outcome::kPrunedCommonContext: return "pruned: common context";
    case Outcome::kPrunedComposite: return "pruned: shares an inner subgraph (composite)";
    case Outcome::kError: return "error";
  }
  return "?";
}

namespace {

SymbolBinding Bind(const rules::Rule& rule, const std::map<std::string, int64_t>& values, int64_t fallback) {
  SymbolBinding b;
  for (const auto& s : RuleSymbols(rule)) {
    auto it = values.find(s);
    b[s] = it == values.end() ? fallback : it->second;
  }
  return b;
}

uint64_t RuleSeed(const rules::Rule& rule) { return HashString(rule.id()); }

std::vector<at::Tensor> RandomDoubles(const Graph& g, uint64_t seed) {
  std::vector<at::Tensor> inputs = RandomInputs(g, seed);
  for (auto& t : inputs) t = t.to(at::kDouble);
  return inputs;
}

double MaxError(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, RelativeError(a[k], b[k]));
  return worst;
}

constexpr double kNumericTolerance = 1e-9;

// Replaces the outputs of node `name` by fresh graph inputs (appended).
void AbstractNode(Graph& g, const std::string& name) {
  NodeId target = kNoNode;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (g.node(id).name == name) target = id;
  if (target == kNoNode) Fail("AbstractNode: no node ", name);
  std::vector<ValueId> outs = g.node(target).outputs;
  for (size_t k = 0; k < outs.size(); ++k) {
    ValueId fresh = g.AddInput("abstract_" + std::to_string(k), g.value(outs[k]).type);
    g.ReplaceAllUses(outs[k], fresh);
  }
  g.RemoveDeadCode();
}

// Does the rule still hold with node `src_node`/`tgt_node` (same expression)
// replaced by a free input on both sides?
bool HoldsWhenAbstracted(const rules::Rule& rule, int src_node, int tgt_node) {
  for (const SymbolBinding& b : CheckBindings(rule)) {
    Graph s = InstantiatePattern(rule, rule.source(), b, DType::kFloat64);
    Graph t = InstantiatePattern(rule, rule.target(), b, DType::kFloat64);
    AbstractNode(s, "n" + std::to_string(src_node));
    AbstractNode(t, "n" + std::to_string(tgt_node));
    if (s.inputs().size() != t.inputs().size()) return false;
    std::vector<at::Tensor> in = RandomDoubles(s, RuleSeed(rule) + 17);
    if (MaxError(Executor(s).Run(in), Executor(t).Run(in)) > kNumericTolerance) return false;
  }
  return true;
}

// A sub-rule from one input position of the two root nodes.
rules::Rule SubRule(const rules::Rule& rule, const rules::Ref& a, const rules::Ref& b) {
  rules::Rule sub;
  *sub.mutable_inputs() = rule.inputs();
  *sub.mutable_source() = rule.source();
  *sub.mutable_target() = rule.target();
  sub.mutable_source()->clear_outputs();
  sub.mutable_target()->clear_outputs();
  *sub.mutable_source()->add_outputs() = a;
  *sub.mutable_target()->add_outputs() = b;
  sub.set_id(rule.id() + ".sub");
  return sub;
}

bool SameRefText(const rules::Rule& rule, const rules::Ref& a, const rules::Ref& b,
                 const std::vector<std::string>& src_expr, const std::vector<std::string>& tgt_expr) {
  if (a.kind_case() != b.kind_case()) return false;
  switch (a.kind_case()) {
    case rules::Ref::kInput: return a.input() == b.input();
    case rules::Ref::kConstant:
      return SerializeDeterministic(rule.source().constants(a.constant())) ==
             SerializeDeterministic(rule.target().constants(b.constant()));
    case rules::Ref::kNode:
      return a.node().output() == b.node().output() && src_expr[a.node().node()] == tgt_expr[b.node().node()];
    default: return a.kind_case() == b.kind_case();
  }
}

// Common context: both roots are the same operator with the same attributes
// and operands except one, and those two operands are equal on their own.
bool CommonContext(const rules::Rule& rule) {
  if (rule.source().outputs_size() != 1) return false;
  const rules::Ref& so = rule.source().outputs(0);
  const rules::Ref& to = rule.target().outputs(0);
  if (so.kind_case() != rules::Ref::kNode || to.kind_case() != rules::Ref::kNode) return false;
  const rules::Node& sn = rule.source().nodes(so.node().node());
  const rules::Node& tn = rule.target().nodes(to.node().node());
  if (sn.op() != tn.op() || sn.inputs_size() != tn.inputs_size() || so.node().output() != to.node().output())
    return false;
  if (sn.attrs_size() != tn.attrs_size()) return false;
  for (int k = 0; k < sn.attrs_size(); ++k)
    if (SerializeDeterministic(sn.attrs(k)) != SerializeDeterministic(tn.attrs(k))) return false;
  std::vector<std::string> se = NodeExpressions(rule, rule.source()), te = NodeExpressions(rule, rule.target());
  int differing = -1;
  for (int k = 0; k < sn.inputs_size(); ++k) {
    if (SameRefText(rule, sn.inputs(k), tn.inputs(k), se, te)) continue;
    if (differing >= 0) return false;
    differing = k;
  }
  if (differing < 0) return false;
  rules::Rule sub = SubRule(rule, sn.inputs(differing), tn.inputs(differing));
  try {
    for (const SymbolBinding& b : CheckBindings(rule))
      if (NumericError(sub, b, RuleSeed(rule) + 29) > kNumericTolerance) return false;
  } catch (const Error&) {
    return false;
  }
  return true;
}

bool IsOutputNode(const rules::Pattern& p, int node) {
  for (const auto& r : p.outputs())
    if (r.kind_case() == rules::Ref::kNode && r.node().node() == node) return true;
  return false;
}

enum class Common { kNone, kFactored, kComposite };

// Sides sharing a sub-expression. kFactored: replacing it by a free input
// on both sides leaves a rule that still holds (a smaller rule implies this
// one). kComposite: TASO's criterion -- an inner sub-expression (not a whole
// side) is shared, and the rule is a composition of smaller ones.
Common CommonSubgraph(const rules::Rule& rule) {
  std::vector<std::string> se = NodeExpressions(rule, rule.source()), te = NodeExpressions(rule, rule.target());
  bool inner_shared = false;
  for (size_t i = 0; i < se.size(); ++i)
    for (size_t j = 0; j < te.size(); ++j)
      if (se[i] == te[j]) {
        try {
          if (HoldsWhenAbstracted(rule, static_cast<int>(i), static_cast<int>(j))) return Common::kFactored;
        } catch (const Error&) {
        }
        inner_shared = inner_shared || (!IsOutputNode(rule.source(), static_cast<int>(i)) &&
                                         !IsOutputNode(rule.target(), static_cast<int>(j)));
      }
  return inner_shared ? Common::kComposite : Common::kNone;
}

// ---- Z3 ----
std::vector<SymTensor> Symbolic(const Graph& g, z3::context& z3, const std::vector<SymTensor>& inputs) {
  std::vector<SymTensor> vals(g.num_values());
  for (size_t k = 0; k < g.inputs().size(); ++k) vals[g.inputs()[k]] = inputs[k];
  for (ValueId v : g.initializers()) vals[v] = SymConstant(z3, *g.value(v).initializer);
  for (NodeId id : g.TopologicalOrder()) {
    const Node& n = g.node(id);
    const OpDef* def = OpRegistry::Global().Find(n.domain, n.op);
    std::vector<SymTensor> args;
    std::vector<const TensorData*> constants;
    for (ValueId in : n.inputs) {
      args.push_back(in == kNoValue ? SymTensor() : vals[in]);
      constants.push_back(in == kNoValue ? nullptr : g.value(in).initializer.get());
    }
    std::vector<SymTensor> outs = RunSymbolic(n, *def, z3, std::move(args), std::move(constants));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (outs[k].shape != g.value(n.outputs[k]).type.shape)
        Fail("node ", n.Describe(), ": symbolic shape ", ShapeToString(outs[k].shape), " differs from ",
             g.value(n.outputs[k]).type.ToString());
      vals[n.outputs[k]] = std::move(outs[k]);
    }
  }
  std::vector<SymTensor> out;
  for (ValueId v : g.outputs()) out.push_back(vals[v]);
  return out;
}

}  // namespace

std::vector<SymbolBinding> ProofBindings(const rules::Rule& rule) {
  return {Bind(rule, {}, 2),
          Bind(rule, {{"n", 1}, {"c", 3}, {"d", 2}, {"h", 3}, {"w", 4}, {"m", 3}, {"k", 2}, {"j", 4}, {"l", 3}}, 3)};
}

std::vector<SymbolBinding> CheckBindings(const rules::Rule& rule) {
  return {Bind(rule, {{"n", 2}, {"c", 3}, {"d", 4}, {"h", 5}, {"w", 6}, {"m", 3}, {"k", 4}, {"j", 5}, {"l", 2}}, 3),
          Bind(rule, {{"n", 1}, {"c", 5}, {"d", 3}, {"h", 4}, {"w", 3}, {"m", 6}, {"k", 3}, {"j", 2}, {"l", 4}}, 4)};
}

double NumericError(const rules::Rule& rule, const SymbolBinding& binding, uint64_t seed) {
  Graph s = InstantiatePattern(rule, rule.source(), binding, DType::kFloat64);
  Graph t = InstantiatePattern(rule, rule.target(), binding, DType::kFloat64);
  std::vector<at::Tensor> in = RandomDoubles(s, seed);
  return MaxError(Executor(s).Run(in), Executor(t).Run(in));
}

Outcome ProveAt(const rules::Rule& rule, const SymbolBinding& binding, const Options& options, uint64_t* rlimit_used,
                bool* by_simplification, std::string* detail) {
  Graph s = InstantiatePattern(rule, rule.source(), binding);
  Graph t = InstantiatePattern(rule, rule.target(), binding);
  z3::context z3;
  std::vector<SymTensor> inputs;
  for (ValueId in : s.inputs()) inputs.push_back(SymVariables(z3, s.value(in).name, s.value(in).type.shape));
  std::vector<SymTensor> a = Symbolic(s, z3, inputs);
  std::vector<SymTensor> b = Symbolic(t, z3, inputs);
  z3::params simp(z3);
  simp.set("som", true);
  simp.set("arith_lhs", true);
  z3::expr_vector differ(z3);
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].shape != b[k].shape) {
      *detail = "output shapes differ";
      return Outcome::kRefutedZ3;
    }
    for (size_t i = 0; i < a[k].v.size(); ++i) {
      z3::expr d = (a[k].v[i] - b[k].v[i]).simplify(simp);
      if (d.is_numeral()) {
        if (d.get_decimal_string(6) != "0") {
          *detail = "output " + std::to_string(k) + " element " + std::to_string(i) + " differs by a constant";
          return Outcome::kRefutedZ3;
        }
        continue;
      }
      differ.push_back(a[k].v[i] != b[k].v[i]);
    }
  }
  if (differ.empty()) {
    *by_simplification = true;
    return Outcome::kProved;
  }
  *by_simplification = false;
  // Elements are checked one at a time, each with a fresh (non-incremental)
  // solver: many small problems are far easier for Z3 than one large
  // disjunction, and incremental solving would lose the nonlinear tactics.
  uint64_t used = 0;
  Outcome outcome = Outcome::kProved;
  for (unsigned k = 0; k < differ.size() && outcome == Outcome::kProved; ++k) {
    z3::solver solver(z3);
    z3::params p(z3);
    p.set("rlimit", static_cast<unsigned>(std::min<uint64_t>(options.rlimit, 4000000000ULL)));
    p.set("timeout", static_cast<unsigned>(options.timeout_ms));
    solver.set(p);
    solver.add(differ[k]);
    z3::check_result r = solver.check();
    z3::stats st = solver.statistics();
    for (unsigned i = 0; i < st.size(); ++i)
      if (st.key(i) == "rlimit count") used += static_cast<uint64_t>(st.is_uint(i) ? st.uint_value(i) : st.double_value(i));
    if (r == z3::sat) {
      *detail = "Z3 found a counterexample";
      outcome = Outcome::kRefutedZ3;
    } else if (r == z3::unknown) {
      *detail = "Z3: " + solver.reason_unknown();
      outcome = Outcome::kTimeout;
    }
  }
  *rlimit_used += used;
  return outcome;
}

Result VerifyOne(const rules::Rule& candidate, const Options& options) {
  auto start = std::chrono::steady_clock::now();
  Result r;
  r.rule = candidate;
  auto done = [&](Outcome o) {
    r.outcome = o;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  try {
    for (const SymbolBinding& b : CheckBindings(candidate)) {
      double err = NumericError(candidate, b, RuleSeed(candidate));
      if (!(err <= kNumericTolerance)) {
        r.detail = "relative error " + std::to_string(err);
        return done(Outcome::kRefutedNumeric);
      }
    }
    Common common = CommonSubgraph(candidate);
    if (common == Common::kFactored) return done(Outcome::kPrunedCommonSubgraph);
    if (common == Common::kComposite) return done(Outcome::kPrunedComposite);
    if (CommonContext(candidate)) return done(Outcome::kPrunedCommonContext);
    uint64_t rlimit = 0;
    bool all_simplified = true;
    rules::Provenance* prov = r.rule.mutable_provenance();
    prov->clear_proved_on();
    for (const SymbolBinding& b : ProofBindings(candidate)) {
      bool simplified = false;
      Outcome o = ProveAt(candidate, b, options, &rlimit, &simplified, &r.detail);
      if (o != Outcome::kProved) return done(o);
      all_simplified = all_simplified && simplified;
      auto* inst = prov->add_proved_on();
      for (const auto& [sym, value] : b) {
        auto* bind = inst->add_bindings();
        bind->set_symbol(sym);
        bind->set_value(value);
      }
    }
    prov->set_proof_rlimit(rlimit);
    prov->set_proved_by_simplification(all_simplified);
    return done(Outcome::kProved);
  } catch (const std::exception& e) {
    r.detail = FirstLine(e.what());
    return done(Outcome::kError);
  }
}

std::vector<Result> VerifyAll(const rules::CandidateSet& candidates, const Options& options,
                              const std::function<void(const std::string&)>& progress, const std::atomic<bool>* stop) {
  // Shards split by rule id, so that duplicates (same canonical form, same
  // id) land in the same shard and cost no work there either.
  std::vector<int> mine;
  for (int k = 0; k < candidates.candidates_size(); ++k)
    if (static_cast<int>(HashString(candidates.candidates(k).id()) % options.shard_count) == options.shard_index)
      mine.push_back(k);
  // Duplicates (same canonical form) need no work: only the first is verified.
  std::map<std::string, int> first;
  std::vector<char> duplicate(mine.size(), 0);
  for (size_t k = 0; k < mine.size(); ++k) {
    auto [it, inserted] = first.emplace(CanonicalForm(candidates.candidates(mine[k])), static_cast<int>(k));
    duplicate[k] = !inserted;
  }
  std::vector<Result> results(mine.size());
  std::atomic<size_t> next{0}, finished{0};
  std::mutex mu;
  auto start = std::chrono::steady_clock::now();
  auto worker = [&]() {
    for (;;) {
      if (stop && stop->load()) return;
      size_t k = next.fetch_add(1);
      if (k >= mine.size()) return;
      const rules::Rule& c = candidates.candidates(mine[k]);
      if (duplicate[k]) {
        results[k].rule = c;
        results[k].outcome = Outcome::kPrunedDuplicate;
      } else {
        results[k] = VerifyOne(c, options);
      }
      size_t f = ++finished;
      if (progress) {
        std::lock_guard<std::mutex> lock(mu);
        double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        progress("verifying: " + std::to_string(f) + "/" + std::to_string(mine.size()) + " candidates, " +
                 std::to_string(static_cast<int>(el)) + " s");
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, options.threads); ++t) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
  if (stop && stop->load()) Fail("interrupted");
  return results;
}

rules::RuleDatabase Assemble(const rules::GeneratorSettings& settings, const std::vector<rules::Rule>& proved,
                             int64_t* duplicates) {
  std::map<std::string, const rules::Rule*> by_form;
  for (const rules::Rule& r : proved) {
    std::string form = CanonicalForm(r);
    auto it = by_form.find(form);
    if (it == by_form.end() || r.id() < it->second->id()) by_form[form] = &r;
  }
  std::vector<const rules::Rule*> kept;
  for (const auto& [form, r] : by_form) kept.push_back(r);
  std::sort(kept.begin(), kept.end(), [](const rules::Rule* a, const rules::Rule* b) { return a->id() < b->id(); });
  if (duplicates) *duplicates = static_cast<int64_t>(proved.size() - kept.size());
  rules::RuleDatabase db;
  db.set_magic(kRuleDatabaseMagic);
  db.set_format_version(kRuleFormatVersion);
  *db.mutable_settings() = settings;
  for (const rules::Rule* r : kept) *db.add_rules() = *r;
  return db;
}

}  // namespace rlflow::verifier

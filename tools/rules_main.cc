// Inspects rule databases (and candidate files).
//
//   ./bazelw run //tools:rules -- list [--db=PATH]
//   ./bazelw run //tools:rules -- show ID [--db=PATH]
//   ./bazelw run //tools:rules -- stats [--db=PATH]
//   ./bazelw run //tools:rules -- diff A B
//   ./bazelw run //tools:rules -- reach MODEL... [--db=PATH] [--base=PATH]
//     which rules of the database apply (a match whose rewrite is valid) to
//     each model as the optimiser sees it (canonical form); with --base,
//     only the rules not in that database (e.g. the new ones of a larger
//     generation)
#include <gflags/gflags.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "core/rewrite/matcher.h"
#include "core/rules/rule.h"
#include "search/canonical.h"
#include "zoo/load.h"

DEFINE_string(db, "rules/default.rules.pb", "rule database (default: the checked-in one)");
DEFINE_string(base, "", "reach: count only the rules that are not in this database");

namespace rlflow {
namespace {

rules::RuleDatabase Load(const std::string& flag_path) {
  // The default database is a runfile; other paths are the user's.
  std::string path =
      flag_path == "rules/default.rules.pb" && FileExists(flag_path) ? flag_path : ResolveUserPath(flag_path);
  return LoadRuleDatabase(path);
}

void PrintRule(const rules::Rule& r, bool details) {
  std::printf("%s  %s\n", r.id().c_str(), RuleToString(r).c_str());
  if (!details) return;
  for (const auto& in : r.inputs()) {
    std::printf("  input %s: %s%s", in.name().c_str(), DTypeName(DTypeFromCode(in.dtype())).c_str(),
                ShapeToString(in).c_str());
    if (in.bounded_above()) std::printf(" <= %g (a constant, every element)", in.upper_bound());
    std::printf("\n");
  }
  std::printf("  source: %d ops, target: %d ops, outputs: %d\n", r.source().nodes_size(), r.target().nodes_size(),
              r.source().outputs_size());
  const auto& p = r.provenance();
  std::printf("  fingerprint: %016llx\n", static_cast<unsigned long long>(p.fingerprint()));
  for (const auto& inst : p.proved_on()) {
    std::printf("  proved on:");
    for (const auto& b : inst.bindings())
      std::printf(" %s=%lld", b.symbol().c_str(), static_cast<long long>(b.value()));
    std::printf("\n");
  }
  std::printf("  proof: %s, Z3 resource count %llu\n",
              p.proved_by_simplification() ? "Z3 simplifier (both sides normalise to the same terms)" : "Z3 solver",
              static_cast<unsigned long long>(p.proof_rlimit()));
}

int Run(const std::vector<std::string>& args) {
  if (args.empty()) Fail("usage: rules list|show ID|stats|diff A B|reach MODEL... [--db=PATH] [--base=PATH]");
  const std::string& cmd = args[0];
  if (cmd == "list") {
    rules::RuleDatabase db = Load(FLAGS_db);
    for (const auto& r : db.rules()) PrintRule(r, false);
    return 0;
  }
  if (cmd == "show") {
    if (args.size() != 2) Fail("usage: rules show ID");
    rules::RuleDatabase db = Load(FLAGS_db);
    for (const auto& r : db.rules())
      if (r.id() == args[1]) {
        PrintRule(r, true);
        return 0;
      }
    Fail("no rule with id '", args[1], "'");
  }
  if (cmd == "stats") {
    rules::RuleDatabase db = Load(FLAGS_db);
    std::map<std::string, int> ops;
    std::map<int, int> sizes;
    for (const auto& r : db.rules()) {
      std::set<std::string> used;
      for (const auto& n : r.source().nodes()) used.insert(n.op());
      for (const auto& n : r.target().nodes()) used.insert(n.op());
      for (const auto& o : used) ++ops[o];
      ++sizes[r.source().nodes_size() + r.target().nodes_size()];
    }
    std::printf("%d rules (format version %u)\n", db.rules_size(), db.format_version());
    for (const auto& [op, n] : ops) std::printf("  %-14s %d rules\n", op.c_str(), n);
    for (const auto& [k, n] : sizes) std::printf("  %d ops in total: %d rules\n", k, n);
    return 0;
  }
  if (cmd == "diff") {
    if (args.size() != 3) Fail("usage: rules diff A B");
    rules::RuleDatabase a = LoadRuleDatabase(ResolveUserPath(args[1]));
    rules::RuleDatabase b = LoadRuleDatabase(ResolveUserPath(args[2]));
    std::map<std::string, const rules::Rule*> ia, ib;
    for (const auto& r : a.rules()) ia[r.id()] = &r;
    for (const auto& r : b.rules()) ib[r.id()] = &r;
    int only_a = 0, only_b = 0, changed = 0;
    for (const auto& [id, r] : ia) {
      auto it = ib.find(id);
      if (it == ib.end()) {
        std::printf("- %s  %s\n", id.c_str(), RuleToString(*r).c_str());
        ++only_a;
      } else if (SerializeDeterministic(*r) != SerializeDeterministic(*it->second)) {
        std::printf("~ %s  %s\n", id.c_str(), RuleToString(*r).c_str());
        ++changed;
      }
    }
    for (const auto& [id, r] : ib)
      if (!ia.count(id)) {
        std::printf("+ %s  %s\n", id.c_str(), RuleToString(*r).c_str());
        ++only_b;
      }
    std::printf("%d only in A, %d only in B, %d changed, %zu in both\n", only_a, only_b, changed, ia.size() - only_a);
    return (only_a || only_b || changed) ? 1 : 0;
  }
  if (cmd == "reach") {
    if (args.size() < 2) Fail("usage: rules reach MODEL... [--db=PATH] [--base=PATH]");
    rules::RuleDatabase db = Load(FLAGS_db);
    std::set<std::string> base;
    if (!FLAGS_base.empty()) {
      const rules::RuleDatabase base_db = LoadRuleDatabase(ResolveUserPath(FLAGS_base));
      for (const auto& r : base_db.rules()) base.insert(r.id());
    }
    std::vector<rules::Rule> list;
    for (const auto& r : db.rules())
      if (!base.count(r.id())) list.push_back(r);
    Matcher matcher(list, /*both_directions=*/true);
    std::printf("%zu rules%s\n", list.size(), FLAGS_base.empty() ? "" : " not in --base");
    std::map<int, int> reached;  // rule -> models it applies to
    for (size_t k = 1; k < args.size(); ++k) {
      const Graph graph = CanonicalForm(LoadModel(args[k]).graph);
      std::map<int, int> valid;  // rule -> valid matches
      for (const Match& m : matcher.FindAll(graph))
        if (matcher.TryApply(graph, m)) ++valid[m.rule];
      int matches = 0;
      for (const auto& [rule, n] : valid) {
        matches += n;
        ++reached[rule];
      }
      std::printf("%s: %zu rules apply (%d matches)\n", args[k].c_str(), valid.size(), matches);
    }
    for (const auto& [rule, models] : reached)
      std::printf("  %s  %d model(s)  %s\n", list[rule].id().c_str(), models, RuleToString(list[rule]).c_str());
    return 0;
  }
  Fail("unknown command '", cmd, "' (list, show, stats, diff, reach)");
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  gflags::SetUsageMessage("rules list|show ID|stats|diff A B|reach MODEL... [--db=PATH] [--base=PATH]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return rlflow::Run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}

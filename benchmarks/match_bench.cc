// Rule matching throughput: all matches of the default database on a zoo
// model (both directions), and the cost of applying each match.
//
//   ./bazelw run //benchmarks:match_bench -- --model=resnet50
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <set>

#include "core/cli.h"
#include "core/error.h"
#include "core/rewrite/matcher.h"
#include "zoo/zoo.h"

DEFINE_string(model, "resnet50", "zoo model");
DEFINE_string(rules, "rules/default.rules.pb", "rule database");
DEFINE_int32(repeat, 3, "times to repeat the search for all matches");
DEFINE_int32(steps, 50, "random rewrite steps for the incremental figure");

namespace rlflow {
namespace {

int Run() {
  rules::RuleDatabase db = LoadRuleDatabase(FLAGS_rules);
  std::vector<rules::Rule> all(db.rules().begin(), db.rules().end());
  Graph g = zoo::Build(FLAGS_model, 1);
  Matcher m(all);
  using Clock = std::chrono::steady_clock;
  std::vector<Match> found;
  auto t0 = Clock::now();
  for (int i = 0; i < FLAGS_repeat; ++i) found = m.FindAll(g);
  double find_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / FLAGS_repeat;
  auto t1 = Clock::now();
  int applied = 0, rejected = 0;
  for (const Match& match : found) {
    // As the engine does: an invalid rewrite (a cycle) is refused as a value.
    if (m.TryApply(g, match))
      ++applied;
    else
      ++rejected;
  }
  double apply_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  int tried = applied + rejected;
  // A search / RL step: apply one match, then find the new graph's matches
  // incrementally (FindAllAfter), along a chain of seeded random rewrites.
  std::mt19937_64 rng(1);
  Graph cur = g;
  std::vector<Match> cur_matches = found;
  int steps = 0;
  double step_ms = 0;
  for (int attempt = 0; attempt < 4 * FLAGS_steps && steps < FLAGS_steps && !cur_matches.empty(); ++attempt) {
    const Match pick = cur_matches[rng() % cur_matches.size()];
    auto t2 = Clock::now();
    ApplyInfo info;
    std::optional<Graph> applied_graph = m.TryApply(cur, pick, &info);
    if (!applied_graph) continue;
    Graph next = std::move(*applied_graph);
    std::vector<Match> next_matches = m.FindAllAfter(next, cur_matches, info);
    step_ms += std::chrono::duration<double, std::milli>(Clock::now() - t2).count();
    cur = std::move(next);
    cur_matches = std::move(next_matches);
    ++steps;
  }
  std::set<int> rules_matching;
  for (const Match& match : found) rules_matching.insert(match.rule);
  std::printf(
      "| model | nodes | rules (x2 directions) | rules that match | matches | rejected (cycle) | find all (ms) | "
      "apply, per match (ms) | applications/s | apply + incremental re-match (ms/step) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %s | %d | %zu | %zu | %zu | %d | %.1f | %.3f | %.0f | %.2f |\n", FLAGS_model.c_str(), g.num_nodes(),
              all.size(), rules_matching.size(), found.size(), rejected, find_ms, tried ? apply_ms / tried : 0.0,
              tried ? 1000.0 * tried / apply_ms : 0.0, steps ? step_ms / steps : 0.0);
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) { return rlflow::cli::Main(argc, argv, "match_bench --model=resnet50", rlflow::Run); }

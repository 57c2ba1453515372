// The cost-based searches over rule rewrites: TASO's backtracking search
// (--search=taso) and greedy descent (--search=greedy). Both drive the
// rewrite engine (search/engine.h): it finds, costs and applies rewrites;
// the searches decide which states to expand.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "search/engine.h"
#include "search/search.h"

namespace rlflow {
namespace {

using Clock = std::chrono::steady_clock;

bool SameCost(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// A search's engine, limits, counters, progress lines and seen graphs.
class SearchRun {
 public:
  SearchRun(const Graph& original, const SearchOptions& o, Runner& runner)
      : o_(Checked(o)), runner_(runner), start_(Clock::now()), engine_(EngineFor(original, o, runner)) {}

  RewriteEngine& engine() { return engine_; }
  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  // kNone if the search may go on, else why it must stop (the runner's limits).
  StopReason MustStop() const { return runner_.Check(); }

  // The state's candidates (costing them reports progress and stays interruptible).
  std::vector<Candidate> Candidates(const RewriteState& s) { return s.Candidates(); }

  // Applies a candidate; nullopt if the result is invalid (a cycle) or was
  // seen before. A built state's exact cost is then known.
  std::optional<RewriteState> Materialise(const RewriteState& s, const Candidate& c) {
    std::optional<RewriteState> next = s.Apply(c);
    if (!next || !seen_.insert(next->StructuralHash()).second) return std::nullopt;
    next->cost();
    ++result.graphs_built;
    return next;
  }

  // Applies a candidate Materialise built before (its graph dropped): the
  // same graph and cost again, not counted or checked as new.
  std::optional<RewriteState> Rebuild(const RewriteState& s, const Candidate& c) {
    std::optional<RewriteState> next = s.Apply(c);
    if (next) next->cost();
    return next;
  }

  void MarkSeen(const Graph& g) { seen_.insert(g.StructuralHash()); }

  // Whether the search may take `s` (SearchOptions::acceptable), asked once
  // per distinct graph.
  bool Acceptable(const RewriteState& s) {
    if (!o_.acceptable) return true;
    const uint64_t hash = s.StructuralHash();
    auto it = acceptable_.find(hash);
    if (it != acceptable_.end()) return it->second;
    const bool ok = o_.acceptable(s.graph());
    ++result.graphs_judged;
    if (!ok) ++result.graphs_refused;
    acceptable_.emplace(hash, ok);
    return ok;
  }

  void Progress(const std::string& what, double best, size_t queue) {
    runner_.Report([&] {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "%s: %.1f s, %lld graphs explored, %lld rewrites costed, queue %zu, best cost %.3f ms (from %.3f)",
                    what.c_str(), Elapsed(), static_cast<long long>(result.graphs_explored),
                    static_cast<long long>(result.rewrites_costed), queue, best, result.initial_cost);
      return std::string(buf);
    });
  }

  // The result, with the engine's counters.
  SearchResult Finish(const RewriteState& best) {
    result.graph = best.graph();
    result.final_cost = best.cost();
    result.applied = best.Applied();
    const EngineStats& st = engine_.stats();
    result.rewrites_rejected = st.rewrites_rejected;
    result.real_steps = st.rewrites_applied;
    result.gains_resolved = st.gains_resolved;
    result.gains_confirmed = st.gains_confirmed;
    result.gains_resolve_s = st.gains_resolve_s;
    result.noise_rule = st.noise_rule;
    result.judged = true;  // the start, or a graph Acceptable accepted
    return std::move(result);
  }

  SearchResult result;

 private:
  static const SearchOptions& Checked(const SearchOptions& o) {
    CheckSearchOptions(o);
    return o;
  }
  static EngineOptions EngineFor(const Graph& original, const SearchOptions& o, Runner& runner) {
    EngineOptions e;
    e.matcher = o.matcher;
    e.cost = o.cost;
    e.max_nodes = static_cast<int64_t>(o.max_growth * original.num_nodes());
    e.runner = &runner;
    e.noise_outcomes = o.noise_outcomes;
    return e;
  }

  const SearchOptions& o_;
  Runner& runner_;
  Clock::time_point start_;
  RewriteEngine engine_;
  std::unordered_set<uint64_t> seen_;
  std::unordered_map<uint64_t, bool> acceptable_;
};

// Greedy descent from a state: applies the single best improving rewrite
// (best estimate first; the exact cost decides) until none improves. Used by
// --search=greedy and to finish TASO's search from its best graph.
struct Descent {
  RewriteState state;
  StopReason stop = StopReason::kLocalOptimum;
};

Descent Descend(SearchRun& run, RewriteState current) {
  SearchResult& r = run.result;
  Descent d;
  for (;;) {
    StopReason stop = run.MustStop();
    if (stop != StopReason::kNone) {
      d.stop = stop;
      break;
    }
    ++r.graphs_explored;
    std::vector<Candidate> rewrites = run.Candidates(current);
    r.rewrites_costed += static_cast<int64_t>(rewrites.size());
    std::stable_sort(rewrites.begin(), rewrites.end(),
                     [](const Candidate& a, const Candidate& b) { return a.cost < b.cost; });
    bool moved = false;
    const double cost = current.cost();
    for (const Candidate& rw : rewrites) {
      if (!(rw.cost < cost) || SameCost(rw.cost, cost)) break;
      std::optional<RewriteState> next = run.Materialise(current, rw);
      if (!next || !(next->cost() < cost) || SameCost(next->cost(), cost) || !run.Acceptable(*next)) continue;
      current = std::move(*next);
      moved = true;
      break;
    }
    run.Progress("greedy", current.cost(), 0);
    if (!moved) break;
  }
  d.state = std::move(current);
  return d;
}

// TASO's cost-based backtracking search (Jia et al., SOSP'19, Algorithm 2):
// a queue of graphs ordered by cost; pop the cheapest, enqueue each rewrite
// of it whose cost is below alpha x the best cost; stop after `budget` pops.
class TasoSearch : public Search {
 public:
  std::string name() const override { return "taso"; }
  std::string description() const override {
    return "TASO's cost-based backtracking: expand the cheapest graph, keep rewrites below alpha x the best cost, "
           "up to --budget graphs, then descend greedily (--greedy_finish)";
  }
  std::vector<SearchParam> Params() const override {
    return {{"alpha", "1.05", "keep exploring graphs whose cost is below alpha x the best cost (>= 1)"}};
  }
  void CheckParams(const SearchOptions& o) const override { o.params.Double("alpha", 1.0); }

  SearchResult Explore(const Graph& original, const SearchOptions& o, Runner& runner) override {
    const double alpha = o.params.Double("alpha", 1.0);
    SearchRun run(original, o, runner);
    SearchResult& r = run.result;
    // A graph in the queue: a built state, or `candidate` applied to `state`
    // (built when popped; `built_before`: built once already, `cost` exact).
    struct Entry {
      double cost;
      uint64_t seq;  // ties: first in, first out (deterministic)
      RewriteState state;
      std::shared_ptr<const Candidate> candidate;
      bool built_before = false;
      bool operator<(const Entry& e) const { return cost != e.cost ? cost < e.cost : seq < e.seq; }
    };
    std::set<Entry> queue;
    uint64_t seq = 0;
    RewriteState best = run.engine().Start(original);
    r.initial_cost = best.cost();
    double best_cost = r.initial_cost;
    run.MarkSeen(original);
    queue.insert({best_cost, seq++, best, nullptr});
    // The best graph is always one the search may return (acceptable).
    auto improve = [&](const RewriteState& s) {
      if (s.cost() < best_cost && !SameCost(s.cost(), best_cost) && run.Acceptable(s)) {
        best_cost = s.cost();
        best = s;
      }
    };
    r.stop_reason = StopReason::kExhausted;
    while (!queue.empty()) {
      if (r.graphs_explored >= o.budget) {
        r.stop_reason = StopReason::kBudget;
        break;
      }
      StopReason stop = run.MustStop();
      if (stop != StopReason::kNone) {
        r.stop_reason = stop;
        break;
      }
      Entry e = *queue.begin();
      queue.erase(queue.begin());
      RewriteState s = e.state;
      if (e.candidate && e.built_before) {
        std::optional<RewriteState> again = run.Rebuild(e.state, *e.candidate);
        if (!again) continue;  // applies as it did (a rewrite is deterministic); never a failed run
        s = std::move(*again);
      } else if (e.candidate) {
        std::optional<RewriteState> built = run.Materialise(e.state, *e.candidate);
        if (!built) continue;  // invalid, or reached before by another order of rewrites
        s = std::move(*built);
        improve(s);
        if (!SameCost(s.cost(), e.cost)) {
          // The estimate was off: requeue at the exact cost, as the rewrite
          // (built again if popped). Most such entries never are, and as
          // built graphs they had held 3.7 GB on a 3796-node model whose
          // estimates ONNX Runtime's fusions move (swin_t, --device=ort).
          if (s.cost() < alpha * best_cost) queue.insert({s.cost(), seq++, e.state, e.candidate, true});
          continue;
        }
      }
      ++r.graphs_explored;
      std::vector<Candidate> rewrites = run.Candidates(s);
      // Of the rewrites that beat the best graph, only the cheapest is built
      // now (so that the best is always a real graph); the others are queued
      // like any rewrite and built when popped. Building each at once would
      // cost a graph copy per rewrite: quadratic on a long chain.
      size_t cheapest = rewrites.size();
      for (size_t i = 0; i < rewrites.size(); ++i)
        if (rewrites[i].cost < best_cost && !SameCost(rewrites[i].cost, best_cost) &&
            (cheapest == rewrites.size() || rewrites[i].cost < rewrites[cheapest].cost))
          cheapest = i;
      bool stopped = false;
      for (size_t i = 0; i < rewrites.size(); ++i) {
        if ((i & 255) == 255) {
          if (run.MustStop() != StopReason::kNone) {
            stopped = true;
            break;
          }
          run.Progress("taso", best_cost, queue.size());
        }
        Candidate& rw = rewrites[i];
        ++r.rewrites_costed;
        if (!(rw.cost < alpha * best_cost)) continue;
        if (i == cheapest) {
          std::optional<RewriteState> next = run.Materialise(s, rw);
          if (!next) continue;
          improve(*next);
          if (next->cost() < alpha * best_cost) queue.insert({next->cost(), seq++, *next, nullptr});
          continue;
        }
        queue.insert({rw.cost, seq++, s, std::make_shared<const Candidate>(std::move(rw))});
      }
      if (stopped) continue;  // the loop's head reports why
      // Only budget - explored more graphs are expanded; entries far beyond
      // that rank can never be reached (popped duplicates do not count, so
      // keep a margin).
      size_t capacity = static_cast<size_t>(std::max<int64_t>(4 * (o.budget - r.graphs_explored), 16));
      while (queue.size() > capacity) queue.erase(std::prev(queue.end()));
      run.Progress("taso", best_cost, queue.size());
    }
    // The budget ends the backtracking, not the descent: from the best graph,
    // greedy descent applies what still improves (on a large model the
    // budget can run out before every batch norm is folded).
    if (o.greedy_finish && (r.stop_reason == StopReason::kBudget || r.stop_reason == StopReason::kExhausted)) {
      int64_t steps = best.steps();
      Descent d = Descend(run, best);
      best = std::move(d.state);
      r.finish_applied = best.steps() - steps;
      if (d.stop != StopReason::kLocalOptimum) r.stop_reason = d.stop;
    }
    return run.Finish(best);
  }
};

// Greedy descent: applies the single best improving rewrite until none improves.
class GreedySearch : public Search {
 public:
  std::string name() const override { return "greedy"; }
  std::string description() const override {
    return "greedy descent: apply the single best improving rewrite until none improves";
  }

  SearchResult Explore(const Graph& original, const SearchOptions& o, Runner& runner) override {
    SearchRun run(original, o, runner);
    RewriteState start = run.engine().Start(original);
    run.result.initial_cost = start.cost();
    run.MarkSeen(original);
    Descent d = Descend(run, std::move(start));
    run.result.stop_reason = d.stop;
    return run.Finish(d.state);
  }
};

RLFLOW_REGISTER_SEARCH("taso", TasoSearch);
RLFLOW_REGISTER_SEARCH("greedy", GreedySearch);

}  // namespace
}  // namespace rlflow

// The cost-based searches over rule rewrites: TASO's backtracking search
// (--search=taso) and greedy descent (--search=greedy).
//
// A rewrite is costed before it is applied: its cost is the parent's minus
// the matched nodes' plus the replacement's (built alone, Matcher::
// Replacement), so only graphs that are popped (or that improve on the best)
// are materialised. A materialised graph's exact cost is recomputed; if it
// differs from the estimate (e.g. an upstream node became dead) the exact
// value is used.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/passes/fold_constants.h"
#include "optimiser/search.h"

namespace rlflow {
namespace {

using Clock = std::chrono::steady_clock;

// The rules applied to reach a graph: a shared chain back to the original.
struct History {
  std::string rule;
  std::shared_ptr<const History> parent;
};

std::vector<std::string> Unwind(const std::shared_ptr<const History>& h) {
  std::vector<std::string> out;
  for (const History* p = h.get(); p != nullptr; p = p->parent.get()) out.push_back(p->rule);
  return {out.rbegin(), out.rend()};
}

// A rewrite of a graph, costed but not applied.
struct Rewrite {
  Match match;
  double cost = 0;    // estimated cost of the rewritten graph
  // cost - (parent cost - matched nodes' cost + replacement's cost): nonzero
  // where the noise rule replaced an estimated gain within the timings'
  // noise by the outcome of timing the two sides against each other. The
  // built graph's cost is its GraphCost plus the adjustments along its path.
  double adjust = 0;
};

bool SameCost(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// The noise of a rewrite's estimated gain: its nodes' timing noise added in
// quadrature per cost key, weighted by how many more nodes of that key one
// side has than the other (a key on both sides has one timing: it cancels).
double Noise(const std::vector<std::pair<uint64_t, double>>& removed,
             const std::vector<std::pair<uint64_t, double>>& added) {
  std::map<uint64_t, std::pair<int, double>> net;
  for (const auto& [k, noise] : removed) {
    net[k].first += 1;
    net[k].second = noise;
  }
  for (const auto& [k, noise] : added) {
    net[k].first -= 1;
    net[k].second = noise;
  }
  double total = 0;
  for (const auto& [k, p] : net) total += (p.first * p.second) * (p.first * p.second);
  return std::sqrt(total);
}

// A hash of the node's cost key (effective attributes: a rule-built and an
// imported conv that are the same operator are the same key); never 0.
uint64_t CanonicalKey(const Graph& g, NodeId id) { return HashString(NodeCostKey(g, id)) | 1; }

// The same, memoised per node of one graph.
uint64_t CanonicalKey(const Graph& g, NodeId id, std::vector<uint64_t>* memo) {
  uint64_t& k = (*memo)[id];
  if (k == 0) k = CanonicalKey(g, id);
  return k;
}

// State shared by the searches: limits, counters, progress, seen graphs.
class SearchRun {
 public:
  SearchRun(const Graph& original, const SearchOptions& o)
      : o_(o), start_(Clock::now()), max_nodes_(static_cast<int64_t>(o.max_growth * original.num_nodes())) {
    CheckSearchOptions(o);
  }

  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  // Empty if the search may go on, else why it must stop.
  std::string MustStop() const {
    if (o_.interrupted != nullptr && o_.interrupted->load()) return "interrupted";
    if (o_.time_limit_s > 0 && Elapsed() >= o_.time_limit_s) return "time limit";
    return "";
  }

  // Every rewrite of `g` (cost `g_cost`, matches `matches`) that changes
  // what runs, costed.
  std::vector<Rewrite> Rewrites(const Graph& g, double g_cost, const std::vector<Match>& matches) {
    std::vector<char> weight_only = WeightOnlyNodes(g);
    std::vector<uint64_t> canonical(g.num_nodes(), 0);  // cost keys (effective attributes), computed on demand
    std::vector<Rewrite> out;
    out.reserve(matches.size());
    for (size_t i = 0; i < matches.size(); ++i) {
      const Match& m = matches[i];
      // Long steps (a graph with thousands of matches) stay interruptible
      // and report progress.
      if ((i & 255) == 255) {
        if (!MustStop().empty()) break;
        Progress("costing rewrites (" + std::to_string(i) + " of " + std::to_string(matches.size()) + ")", g_cost, 0);
      }
      // Rewrites inside weight-only subgraphs change nothing that runs: those
      // subgraphs are folded into initializers before export.
      double removed = 0;
      // Noise per cost key (the same key on both sides has the same timing:
      // its error cancels): key -> {removed count, noise}.
      std::vector<std::pair<uint64_t, double>> removed_keys;
      bool runs = false;
      for (NodeId id : m.nodes) {
        if (weight_only[id]) continue;
        runs = true;
        removed += o_.cost->NodeMs(g, id);
        removed_keys.push_back({CanonicalKey(g, id, &canonical), o_.cost->NodeNoiseMs(g, id)});
      }
      if (!runs) continue;
      // The replacement's cost depends only on the rule side and its inputs'
      // types and constness: computed once per such key.
      std::vector<char> input_constant(m.inputs.size());
      uint64_t key = HashCombine(static_cast<uint64_t>(m.rule) * 2 + (m.reverse ? 1 : 0), 0x5eed);
      for (size_t k = 0; k < m.inputs.size(); ++k) {
        ValueId v = m.inputs[k];
        const Value& val = g.value(v);
        input_constant[k] = g.IsConstant(v) || (val.producer != kNoNode && weight_only[val.producer]);
        key = HashCombine(key, static_cast<uint64_t>(val.type.dtype) * 31 + input_constant[k]);
        key = HashCombine(key, HashBytes(val.type.shape.data(), val.type.shape.size() * sizeof(int64_t)));
        if (val.initializer && val.initializer->NumElements() <= 64) key = HashCombine(key, val.initializer->content_hash());
      }
      auto cached = replacement_cost_.find(key);
      if (cached == replacement_cost_.end()) {
        Graph rep;
        try {
          rep = o_.matcher->Replacement(g, m);
        } catch (const Error&) {
          replacement_cost_.emplace(key, ReplacementCost{-1.0, 0, {}});
          ++result.rewrites_rejected;
          continue;
        }
        // Replacement inputs computed from weights only are constants too.
        std::vector<char> constant(rep.num_values(), 0);
        for (size_t k = 0; k < input_constant.size(); ++k) constant[k] = input_constant[k];
        for (ValueId v = 0; v < rep.num_values(); ++v)
          if (rep.IsConstant(v)) constant[v] = 1;
        double added = 0;
        std::vector<std::pair<uint64_t, double>> added_keys;
        for (NodeId id = 0; id < rep.num_nodes(); ++id) {  // added in topological order
          const Node& n = rep.node(id);
          bool all = true;
          for (ValueId in : n.inputs)
            if (in != kNoValue && !constant[in]) all = false;
          if (all) {
            for (ValueId o : n.outputs) constant[o] = 1;
          } else {
            added += o_.cost->NodeMs(rep, id);
            added_keys.push_back({CanonicalKey(rep, id), o_.cost->NodeNoiseMs(rep, id)});
          }
        }
        cached = replacement_cost_.emplace(key, ReplacementCost{added, rep.num_nodes(), std::move(added_keys)}).first;
      }
      const ReplacementCost& rc = cached->second;
      if (rc.added < 0) continue;  // the replacement does not infer
      if (g.num_nodes() - static_cast<int64_t>(m.nodes.size()) + rc.nodes > max_nodes_) continue;
      // The noise rule: a gain within the timings' noise is not a gain
      // unless the two sides, timed against each other, say so.
      double gain = removed - rc.added, used = gain;
      double noise = Noise(removed_keys, rc.keys);
      if (gain > 0 && gain <= noise) used = ResolvedGain(g, m, key, input_constant, gain);
      out.push_back({m, g_cost - used, gain - used});
    }
    return out;
  }

  // The gain of a rewrite whose estimated gain is within noise, from the
  // cost model's timing of the two sides against each other (once per
  // replacement key: same rule side, input types and constness).
  double ResolvedGain(const Graph& g, const Match& m, uint64_t key, const std::vector<char>& input_constant,
                      double estimate) {
    auto it = resolved_.find(key);
    if (it == resolved_.end()) {
      double outcome = 0;  // an unresolvable pair is no gain
      try {
        // Inputs computed from weights become constants (their values where
        // known, zeros otherwise: only their shapes matter for timing) and
        // weight-only work is folded away on both sides, as in the written model.
        std::vector<TensorDataPtr> constants(m.inputs.size());
        for (size_t k = 0; k < m.inputs.size(); ++k) {
          const Value& v = g.value(m.inputs[k]);
          if (!input_constant[k] || v.initializer) continue;
          constants[k] = v.known ? v.known
                                 : std::make_shared<const TensorData>(
                                       v.type.dtype, v.type.shape,
                                       std::string(static_cast<size_t>(v.type.NumElements()) * DTypeSize(v.type.dtype), '\0'));
        }
        Graph before = o_.matcher->Matched(g, m, &constants), after = o_.matcher->Replacement(g, m, &constants);
        FoldOptions fold;
        fold.max_elements = std::numeric_limits<int64_t>::max();
        InferShapesAndFold(before, fold);
        InferShapesAndFold(after, fold);
        const rules::Rule& rule = o_.matcher->rules().at(m.rule);
        char hex[24];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
        std::string ab_key = rule.id() + (m.reverse ? "<" : ">") + hex;
        // The outcome relative to the estimate: 1 = faster (estimate kept).
        outcome = o_.cost->ResolveGain(before, after, ab_key, 1.0);
      } catch (const Error&) {
        outcome = 0;
      }
      it = resolved_.emplace(key, outcome).first;
      ++result.gains_resolved;
      if (outcome == 1.0) ++result.gains_confirmed;
      char line[160];
      std::snprintf(line, sizeof line, "%s: estimated gain %.4f ms within noise; timed A/B: %s", MatchName(*o_.matcher, m).c_str(),
                    estimate, outcome == 1.0 ? "faster" : outcome == 0 ? "no difference" : "slower");
      result.noise_rule.push_back(line);
    }
    return it->second == 1.0 ? estimate : it->second;
  }

  // Applies a rewrite; nullptr if it is invalid (a cycle) or the graph was
  // seen before. `cost` receives the exact cost (GraphCost + `adjust`, the
  // noise-rule adjustments on the way to it), `info` what changed.
  std::shared_ptr<const Graph> Materialise(const Graph& g, const Match& m, double* cost, ApplyInfo* info,
                                           double adjust) {
    std::shared_ptr<Graph> next;
    try {
      next = std::make_shared<Graph>(o_.matcher->Apply(g, m, info));
    } catch (const Error&) {
      ++result.rewrites_rejected;
      return nullptr;
    }
    if (!seen_.insert(next->StructuralHash()).second) return nullptr;
    *cost = o_.cost->GraphCost(*next) + adjust;
    ++result.graphs_built;
    return next;
  }

  void MarkSeen(const Graph& g) { seen_.insert(g.StructuralHash()); }

  void Progress(const std::string& what, double best, size_t queue) {
    if (!o_.progress) return;
    double now = Elapsed();
    if (now - last_progress_ < o_.progress_interval_s) return;
    last_progress_ = now;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s: %.1f s, %lld graphs explored, %lld rewrites costed, queue %zu, best cost %.3f ms (from %.3f)",
                  what.c_str(), now, static_cast<long long>(result.graphs_explored),
                  static_cast<long long>(result.rewrites_costed), queue, best, result.initial_cost);
    o_.progress(buf);
  }

  SearchResult result;

 private:
  const SearchOptions& o_;
  Clock::time_point start_;
  int64_t max_nodes_;
  std::unordered_set<uint64_t> seen_;
  struct ReplacementCost {
    double added;   // -1: does not infer
    int nodes;
    std::vector<std::pair<uint64_t, double>> keys;  // its running nodes' cost keys and noise
  };
  std::unordered_map<uint64_t, ReplacementCost> replacement_cost_;
  std::unordered_map<uint64_t, double> resolved_;  // replacement key -> ResolveGain outcome
  double last_progress_ = 0;
};

// TASO's cost-based backtracking search (Jia et al., SOSP'19, Algorithm 2):
// a queue of graphs ordered by cost; pop the cheapest, enqueue each rewrite
// of it whose cost is below alpha x the best cost; stop after `budget` pops.
class TasoSearch : public Search {
 public:
  std::string name() const override { return "taso"; }

  SearchResult Run(const Graph& original, const SearchOptions& o) override {
    SearchRun run(original, o);
    SearchResult& r = run.result;
    using Matches = std::shared_ptr<const std::vector<Match>>;
    // A graph in the queue: built (`graph`), or `match` applied to `graph`.
    // Built graphs made from a parent keep the parent's matches and what
    // changed, so that their matches are found incrementally.
    struct Entry {
      double cost;
      uint64_t seq;  // ties: first in, first out (deterministic)
      std::shared_ptr<const Graph> graph;
      std::shared_ptr<const Match> match;
      Matches matches;                         // of `graph` if `match` is set, else of its parent
      std::shared_ptr<const ApplyInfo> info;   // parent -> `graph` (built entries)
      std::shared_ptr<const History> history;
      double adjust = 0;                       // noise-rule adjustments of the graph this entry stands for
      bool operator<(const Entry& e) const { return cost != e.cost ? cost < e.cost : seq < e.seq; }
    };
    std::set<Entry> queue;
    uint64_t seq = 0;
    r.initial_cost = o.cost->GraphCost(original);
    auto best = std::make_shared<const Graph>(original);
    std::shared_ptr<const History> best_history;
    double best_cost = r.initial_cost;
    run.MarkSeen(original);
    queue.insert({best_cost, seq++, best, nullptr, nullptr, nullptr, nullptr, 0.0});
    auto improve = [&](const std::shared_ptr<const Graph>& g, double cost, const std::shared_ptr<const History>& h) {
      if (cost < best_cost && !SameCost(cost, best_cost)) {
        best_cost = cost;
        best = g;
        best_history = h;
      }
    };
    r.stop_reason = "exhausted";
    while (!queue.empty()) {
      if (r.graphs_explored >= o.budget) {
        r.stop_reason = "budget";
        break;
      }
      std::string stop = run.MustStop();
      if (!stop.empty()) {
        r.stop_reason = stop;
        break;
      }
      Entry e = *queue.begin();
      queue.erase(queue.begin());
      std::shared_ptr<const Graph> g = e.graph;
      double cost = e.cost;
      Matches parent_matches = e.matches;
      std::shared_ptr<const ApplyInfo> info = e.info;
      if (e.match) {
        auto applied = std::make_shared<ApplyInfo>();
        g = run.Materialise(*e.graph, *e.match, &cost, applied.get(), e.adjust);
        if (!g) continue;  // invalid, or reached before by another order of rewrites
        info = applied;
        improve(g, cost, e.history);
        if (!SameCost(cost, e.cost)) {
          // The estimate was off: requeue at the exact cost.
          if (cost < o.alpha * best_cost)
            queue.insert({cost, seq++, g, nullptr, parent_matches, info, e.history, e.adjust});
          continue;
        }
      }
      ++r.graphs_explored;
      auto matches = std::make_shared<const std::vector<Match>>(
          parent_matches && info ? o.matcher->FindAllAfter(*g, *parent_matches, *info) : o.matcher->FindAll(*g));
      std::vector<Rewrite> rewrites = run.Rewrites(*g, cost, *matches);
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
          if (!run.MustStop().empty()) {
            stopped = true;
            break;
          }
          run.Progress("taso", best_cost, queue.size());
        }
        Rewrite& rw = rewrites[i];
        ++r.rewrites_costed;
        if (!(rw.cost < o.alpha * best_cost)) continue;
        auto history = std::make_shared<const History>(History{MatchName(*o.matcher, rw.match), e.history});
        if (i == cheapest) {
          double exact;
          auto next_info = std::make_shared<ApplyInfo>();
          auto next = run.Materialise(*g, rw.match, &exact, next_info.get(), e.adjust + rw.adjust);
          if (!next) continue;
          improve(next, exact, history);
          if (exact < o.alpha * best_cost)
            queue.insert({exact, seq++, next, nullptr, matches, next_info, history, e.adjust + rw.adjust});
          continue;
        }
        queue.insert({rw.cost, seq++, g, std::make_shared<const Match>(std::move(rw.match)), matches, nullptr, history,
                      e.adjust + rw.adjust});
      }
      if (stopped) continue;  // the loop's head reports why
      // Only budget - explored more graphs are expanded; entries far beyond
      // that rank can never be reached (popped duplicates do not count, so
      // keep a margin).
      size_t capacity = static_cast<size_t>(std::max<int64_t>(4 * (o.budget - r.graphs_explored), 16));
      while (queue.size() > capacity) queue.erase(std::prev(queue.end()));
      run.Progress("taso", best_cost, queue.size());
    }
    r.graph = *best;
    r.final_cost = best_cost;
    r.applied = Unwind(best_history);
    return r;
  }
};

// Greedy descent: applies the single best improving rewrite until none improves.
class GreedySearch : public Search {
 public:
  std::string name() const override { return "greedy"; }

  SearchResult Run(const Graph& original, const SearchOptions& o) override {
    SearchRun run(original, o);
    SearchResult& r = run.result;
    auto current = std::make_shared<const Graph>(original);
    double cost = r.initial_cost = o.cost->GraphCost(original);
    double adjust = 0;
    std::vector<Match> matches = o.matcher->FindAll(original);
    run.MarkSeen(original);
    r.stop_reason = "local optimum";
    for (;;) {
      std::string stop = run.MustStop();
      if (!stop.empty()) {
        r.stop_reason = stop;
        break;
      }
      ++r.graphs_explored;
      std::vector<Rewrite> rewrites = run.Rewrites(*current, cost, matches);
      r.rewrites_costed += static_cast<int64_t>(rewrites.size());
      std::stable_sort(rewrites.begin(), rewrites.end(),
                       [](const Rewrite& a, const Rewrite& b) { return a.cost < b.cost; });
      bool moved = false;
      // Best estimate first; the exact cost decides.
      for (const Rewrite& rw : rewrites) {
        if (!(rw.cost < cost) || SameCost(rw.cost, cost)) break;
        double exact;
        ApplyInfo info;
        auto next = run.Materialise(*current, rw.match, &exact, &info, adjust + rw.adjust);
        if (!next || !(exact < cost) || SameCost(exact, cost)) continue;
        matches = o.matcher->FindAllAfter(*next, matches, info);
        current = next;
        cost = exact;
        adjust += rw.adjust;
        r.applied.push_back(MatchName(*o.matcher, rw.match));
        moved = true;
        break;
      }
      run.Progress("greedy", cost, 0);
      if (!moved) break;
    }
    r.graph = *current;
    r.final_cost = cost;
    return r;
  }
};

RLFLOW_REGISTER_SEARCH("taso", TasoSearch);
RLFLOW_REGISTER_SEARCH("greedy", GreedySearch);

}  // namespace
}  // namespace rlflow

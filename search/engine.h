#pragma once
// The rewrite engine: the one implementation of finding, costing and
// applying rule rewrites that every search drives (--search=taso, greedy,
// and the agents' environments), the way egg's Runner is the one loop every
// egg user drives.
//
// A RewriteState is a graph with its matches and its cost. Its candidates
// are the rewrites that change what runs, each costed before it is applied:
// the state's cost minus the matched nodes' plus the replacement's (built
// alone, Matcher::Replacement), with the noise rule applied (an estimated
// gain within the timings' noise counts only if timing the two sides
// against each other confirms it). Apply builds the rewritten graph; its
// exact cost and its matches (found incrementally from the parent's) are
// computed when first asked for. States are immutable values sharing their
// graph: Fork is a copy of a few pointers.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/graph.h"
#include "core/rewrite/matcher.h"
#include "core/runner.h"
#include "runtime/cost_model.h"

namespace rlflow {

struct EngineOptions {
  const Matcher* matcher = nullptr;  // required
  CostModel* cost = nullptr;         // required
  // Rewrites that would grow the graph beyond max_nodes nodes are not
  // candidates (0: no limit).
  int64_t max_nodes = 0;
  // The run's owner of limits and progress (optional). Polled every 256
  // matches while costing a state's candidates: once it says stop,
  // Candidates() returns what it has costed so far. Every rewrite applied
  // counts as one of its real steps.
  Runner* runner = nullptr;
  // The noise rule's outcomes by replacement key, shared by engines that
  // search one graph one after another (the optimiser's rounds), so that
  // each kind of rewrite is timed, counted and listed once (null: this
  // engine's own).
  std::unordered_map<uint64_t, double>* noise_outcomes = nullptr;
};

// What the engine did, over all states it served.
struct EngineStats {
  // Rewrites applied to a graph (RewriteState::Apply that succeeded): the
  // steps taken in the real environment, the currency a world model saves.
  int64_t rewrites_applied = 0;
  int64_t rewrites_rejected = 0;        // matches whose rewrite was invalid (cycle, shape or type change)
  int64_t gains_resolved = 0;           // noise rule: kinds of rewrite timed A/B (a gain within noise, or more kernels)
  int64_t gains_confirmed = 0;          // ... of which the A/B timing confirmed the gain
  double gains_resolve_s = 0;           // seconds spent timing them
  std::vector<std::string> noise_rule;  // one line per such kind: rule, estimated gain, outcome
};

// A rewrite of a state's graph, costed but not applied.
struct Candidate {
  Match match;
  double cost = 0;  // estimated cost of the rewritten graph
  // cost - (state cost - matched nodes' cost + replacement's cost): nonzero
  // where the noise rule replaced an estimated gain within the timings'
  // noise by the outcome of timing the two sides against each other.
  double adjust = 0;
  // The match in its surroundings (rule side, input types and constness,
  // the neighbours' cost keys), and what the estimate added for it: where
  // the cost of a node depends on its neighbours (ONNX Runtime's fusions),
  // a rewrite's own nodes do not tell its cost; the error of the last graph
  // built from a match in the same surroundings is added (see
  // RewriteEngine::Estimate).
  uint64_t surroundings = 0;
  double correction = 0;
};

class RewriteEngine;

class RewriteState {
 public:
  RewriteState() = default;
  const Graph& graph() const { return *graph_; }
  const std::shared_ptr<const Graph>& shared_graph() const { return graph_; }
  // The cost model's cost of the graph plus the noise-rule adjustments on
  // the way to it (computed on first use).
  double cost() const;
  // Every match of every rule, in the matcher's deterministic order
  // (computed on first use, incrementally from the parent's).
  const std::vector<Match>& Matches() const;
  const std::shared_ptr<const std::vector<Match>>& SharedMatches() const;
  // The rewrites that change what runs, costed, in match order. Skipped:
  // rewrites only inside weight-only subgraphs (folded before export),
  // rewrites whose replacement does not infer, rewrites beyond max_nodes.
  std::vector<Candidate> Candidates() const;
  // One match costed; nullopt if it is no candidate (see Candidates).
  std::optional<Candidate> EstimateCost(const Match& match) const;
  // The state after a rewrite; nullopt if the result is no valid graph (a
  // cycle, a changed output type).
  std::optional<RewriteState> Apply(const Candidate& candidate) const;
  // An independent copy (states are immutable: a copy of a few pointers).
  RewriteState Fork() const { return *this; }
  // The rules applied since the start state, in order ("<id>" or "<id> (reversed)").
  std::vector<std::string> Applied() const;
  int64_t steps() const { return steps_; }
  // The noise-rule adjustments included in cost().
  double adjust() const { return adjust_; }
  uint64_t StructuralHash() const { return graph_->StructuralHash(); }

 private:
  friend class RewriteEngine;
  struct History {
    std::string rule;
    std::shared_ptr<const History> parent;
  };
  RewriteEngine* engine_ = nullptr;
  std::shared_ptr<const Graph> graph_;
  double adjust_ = 0;
  int64_t steps_ = 0;
  std::shared_ptr<const History> history_;
  // Lazily computed.
  mutable std::optional<double> cost_;
  // Built by Apply: the candidate's surroundings and uncorrected estimate,
  // whose error the engine learns when cost() is first computed.
  uint64_t surroundings_ = 0;
  double estimate_ = 0;
  mutable std::shared_ptr<const std::vector<Match>> matches_;
  // For incremental matching: the parent's matches and what Apply changed
  // (released once the matches are found).
  mutable std::shared_ptr<const std::vector<Match>> parent_matches_;
  mutable std::shared_ptr<const ApplyInfo> info_;
};

class RewriteEngine {
 public:
  // Throws rlflow::Error without a matcher or a cost model.
  explicit RewriteEngine(EngineOptions options);
  RewriteEngine(const RewriteEngine&) = delete;
  RewriteEngine& operator=(const RewriteEngine&) = delete;

  // The state of a graph with nothing applied. `cost` (optional) is its
  // known cost, e.g. to continue from a state of another engine.
  RewriteState Start(const Graph& graph, std::optional<double> cost = std::nullopt);
  RewriteState Start(std::shared_ptr<const Graph> graph, std::optional<double> cost = std::nullopt, double adjust = 0);

  const Matcher& matcher() const { return *o_.matcher; }
  CostModel& cost_model() const { return *o_.cost; }
  const EngineStats& stats() const { return stats_; }
  // The reported name of a match ("<id>" or "<id> (reversed)").
  std::string MatchName(const Match& match) const;

 private:
  friend class RewriteState;
  // Per node of one state's graph, computed on first use: cost key, time
  // and noise (a node is in many matches; its cost key is not cheap).
  struct NodeMemo {
    explicit NodeMemo(int nodes) : key(nodes, 0), ms(nodes, -1.0), noise(nodes, -1.0), flops(nodes, -1.0) {}
    std::vector<uint64_t> key;
    std::vector<double> ms, noise, flops;
    std::optional<std::vector<std::vector<std::pair<NodeId, int>>>> consumers;  // built when first needed
  };
  std::optional<Candidate> Estimate(const RewriteState& s, const Match& m, const std::vector<char>& weight_only,
                                    NodeMemo* memo);
  double ResolvedGain(const Graph& g, const Match& m, uint64_t key, const std::vector<char>& input_constant,
                      double estimate, const char* why);

  EngineOptions o_;
  EngineStats stats_;
  struct ReplacementCost {
    double added;  // -1: does not infer
    int nodes;
    double flops;                                   // its running nodes' FLOPs
    std::vector<std::pair<uint64_t, double>> keys;  // its running nodes' cost keys and noise
    std::vector<char> out_permuted;                 // per output: a permuted view (PermutedView)
  };
  std::unordered_map<uint64_t, ReplacementCost> replacement_cost_;
  // Candidate::surroundings -> exact cost - uncorrected estimate of the last
  // graph built from such a match.
  std::unordered_map<uint64_t, double> estimate_error_;
  std::unordered_map<uint64_t, double> resolved_;  // replacement key -> ResolveGain outcome
  std::unordered_map<uint64_t, double>& Resolved() { return o_.noise_outcomes ? *o_.noise_outcomes : resolved_; }
};

}  // namespace rlflow

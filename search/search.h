#pragma once
// The search interface. Each --search value is one Search implementation,
// registered by name (RLFLOW_REGISTER_SEARCH); TASO's backtracking search,
// greedy and the learned agents of later issues plug in the same way, by
// linking their library into the optimiser.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/graph.h"
#include "core/rewrite/matcher.h"
#include "core/runner.h"
#include "runtime/cost_model.h"
#include "search/engine.h"

namespace rlflow {

// One setting a search declares as its own: the optimiser passes it as
// --search_param=NAME=VALUE (or by the named flag it keeps for the settings
// of the built-in searches, e.g. --episodes).
struct SearchParam {
  std::string name;
  std::string default_value;  // text, as a user would give it
  std::string help;
  bool path = false;  // a file or directory as the user gives it (resolved by the caller)
};

// A search's own settings by name, as text. A search reads them with the
// typed getters, which throw rlflow::Error naming the setting on a bad or
// missing value; Search::Run fills in the declared defaults first and
// refuses a name the search does not declare.
class SearchParams {
 public:
  SearchParams& Set(const std::string& name, std::string value);
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  const std::map<std::string, std::string>& values() const { return values_; }
  const std::string& Text(const std::string& name) const;
  int64_t Int(const std::string& name, int64_t min) const;
  double Double(const std::string& name, double min) const;
  std::vector<std::string> List(const std::string& name) const;  // comma-separated, "" -> {}

 private:
  std::map<std::string, std::string> values_;
};

// "NAME=VALUE[;NAME=VALUE...]" (--search_param); throws rlflow::Error.
SearchParams ParseSearchParams(const std::string& text);

struct SearchOptions {
  uint64_t seed = 1;
  int64_t budget = 1000;    // graphs expanded (taso: popped from the queue)
  double max_growth = 2.0;  // skip graphs with more than max_growth x the original's nodes
  // taso, ppo, world_model: when the search ends by itself (budget, queue
  // exhausted, episodes done), descend greedily from its best graph until no
  // rewrite improves.
  bool greedy_finish = true;
  // The strategy's own settings (Search::Params declares them).
  SearchParams params;
  // What a search works with (required).
  const Matcher* matcher = nullptr;
  CostModel* cost = nullptr;
  // The owner of the run's deadline, interrupt, step limit and progress
  // (core/runner.h), shared by every search of one optimise run: a second
  // search (a later round, the greedy finish) continues against the same
  // deadline. Null: a Runner with no limits for this Run alone.
  Runner* runner = nullptr;
  // The search whose Resolve checked these options and filled in its
  // defaults ("": not resolved); Run resolves them unless its own search did.
  std::string resolved_by;
  // A graph the search may return (null: any), e.g. one not estimated slower
  // at a second binding of the model's symbolic dimensions (the optimiser's
  // --second_binding_search). The start graph must be one. taso takes only
  // such graphs as its best (it still expands the others: a later rewrite
  // can make one acceptable), greedy descent steps only to such graphs, and
  // Run returns the start graph where a search's result is not one. Called
  // once per distinct graph (by structural hash) and run, from the search's
  // own thread; it may be slow (the optimiser costs the graph at the other
  // binding), so it is asked only of graphs that would be taken.
  std::function<bool(const Graph&)> acceptable;
  // The noise rule's outcomes shared with earlier searches of the same
  // graph (EngineOptions::noise_outcomes; null: this search's own).
  std::unordered_map<uint64_t, double>* noise_outcomes = nullptr;
};

// The work a search did: what adds up over searches run one after another
// (a taso run and its greedy finish, the optimiser's rounds).
struct SearchWork {
  int64_t graphs_explored = 0;    // graphs expanded (popped / stepped from)
  int64_t rewrites_costed = 0;    // rewrites whose cost was estimated
  int64_t graphs_built = 0;       // distinct graphs built (applied) and costed exactly
  int64_t rewrites_rejected = 0;  // matches whose rewrite was invalid (cycle, type change)
  // Graphs SearchOptions::acceptable was asked about, and of those refused.
  int64_t graphs_judged = 0;
  int64_t graphs_refused = 0;
  // Steps in the real environment: rewrites applied to real graphs
  // (EngineStats::rewrites_applied; the environment's steps for the agents).
  int64_t real_steps = 0;
  SearchWork& operator+=(const SearchWork& o) {
    graphs_explored += o.graphs_explored;
    rewrites_costed += o.rewrites_costed;
    graphs_built += o.graphs_built;
    rewrites_rejected += o.rewrites_rejected;
    graphs_judged += o.graphs_judged;
    graphs_refused += o.graphs_refused;
    real_steps += o.real_steps;
    return *this;
  }
};

struct SearchResult : SearchWork {
  Graph graph;
  std::vector<std::string> applied;     // rules in the order applied ("<id>" or "<id> (reversed)")
  int64_t gains_resolved = 0;           // noise rule: rewrite kinds timed A/B (a gain within noise, or more kernels)
  int64_t gains_confirmed = 0;          // ... of which the A/B timing confirmed the gain
  double gains_resolve_s = 0;           // seconds spent timing them
  std::vector<std::string> noise_rule;  // one line per such kind: rule, estimated gain, outcome
  int64_t finish_applied = 0;           // taso: rewrites (the last of `applied`) applied by the greedy finish
  // The search took only graphs SearchOptions::acceptable accepts (or the
  // start graph): Run does not ask again.
  bool judged = false;
  double initial_cost = 0;  // cost-model estimate (ms)
  double final_cost = 0;
  StopReason stop_reason = StopReason::kNone;
};

class Search {
 public:
  virtual ~Search() = default;
  virtual std::string name() const = 0;
  // One line for --help and the list of searches.
  virtual std::string description() const = 0;
  // The settings this search reads from SearchOptions::params.
  virtual std::vector<SearchParam> Params() const { return {}; }
  // `options` with its params checked (a name the search does not declare,
  // or a value it refuses, throws rlflow::Error naming it) and the declared
  // defaults filled in. Run calls it; callers with long work before the
  // search call it first to fail fast.
  SearchOptions Resolve(const SearchOptions& options) const;
  // Runs the search under options.runner (or a Runner of no limits): when
  // the runner says stop, the search returns its best graph so far with the
  // runner's reason (time limit, interrupted, step limit) as stop_reason.
  // Throws rlflow::Error on bad options.
  SearchResult Run(const Graph& graph, const SearchOptions& options);

 protected:
  // Checks the resolved params' values (throws rlflow::Error); options.matcher
  // may be null here.
  virtual void CheckParams(const SearchOptions& /*options*/) const {}
  // The strategy: polls `runner` at every step and reports through it.
  virtual SearchResult Explore(const Graph& graph, const SearchOptions& options, Runner& runner) = 0;
};

using SearchFactory = std::function<std::unique_ptr<Search>()>;
// Registers a --search value; returns true (for static registration).
bool RegisterSearch(const std::string& name, SearchFactory factory);
#define RLFLOW_REGISTER_SEARCH(name, type)            \
  static const bool rlflow_search_registered_##type = \
      ::rlflow::RegisterSearch(name, [] { return std::make_unique<type>(); })

// The names accepted by --search, sorted.
std::vector<std::string> SearchNames();
// Every search, its description and its settings, for --help and
// --list_searches (several lines).
std::string DescribeSearches();
// Throws rlflow::Error for an unknown name (listing the known ones).
std::unique_ptr<Search> MakeSearch(const std::string& name);

// Helpers shared by search implementations.
// Checks the options every search needs; throws rlflow::Error.
void CheckSearchOptions(const SearchOptions& options);
// A learned search's finish, as taso's: its best graph `r->graph` is
// finished by the registered greedy search (not a copy of its loop), so that
// an episode that stopped early never leaves an improving rewrite
// unapplied. Adds greedy's rewrites, counters and gain to `r`; does nothing
// unless options.greedy_finish, or after an interrupt.
void GreedyFinish(SearchResult* r, const SearchOptions& options);

}  // namespace rlflow

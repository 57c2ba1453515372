#include "search/search.h"

#include <mutex>

#include "core/error.h"

namespace rlflow {
namespace {

std::map<std::string, SearchFactory>& Registry() {
  static auto* registry = new std::map<std::string, SearchFactory>();
  return *registry;
}

// --search=none: import, check, export.
class NoSearch : public Search {
 public:
  std::string name() const override { return "none"; }
  SearchResult Explore(const Graph& graph, const SearchOptions& options, Runner&) override {
    SearchResult r;
    r.graph = graph;
    r.graphs_explored = 1;
    if (options.cost != nullptr) r.initial_cost = r.final_cost = options.cost->GraphCost(graph);
    r.stop_reason = StopReason::kNoSearch;
    return r;
  }
};
RLFLOW_REGISTER_SEARCH("none", NoSearch);

}  // namespace

SearchResult Search::Run(const Graph& graph, const SearchOptions& options) {
  Runner unlimited;
  Runner& runner = options.runner != nullptr ? *options.runner : unlimited;
  SearchOptions o = options;
  o.runner = &runner;
  SearchResult r = Explore(graph, o, runner);
  // The runner's limits stop every search the same way, whichever loop
  // noticed first.
  if (const StopReason why = runner.Check(); why != StopReason::kNone) r.stop_reason = why;
  return r;
}

bool RegisterSearch(const std::string& name, SearchFactory factory) {
  RLFLOW_CHECK(!Registry().count(name), "search '", name, "' registered twice");
  Registry()[name] = std::move(factory);
  return true;
}

std::vector<std::string> SearchNames() {
  std::vector<std::string> names;
  for (const auto& [name, f] : Registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Search> MakeSearch(const std::string& name) {
  auto it = Registry().find(name);
  if (it != Registry().end()) return it->second();
  std::string known;
  for (const auto& n : SearchNames()) known += (known.empty() ? "" : ", ") + n;
  Fail("unknown --search '", name, "' (available: ", known, ")");
}

void CheckSearchOptions(const SearchOptions& o) {
  if (o.matcher == nullptr) Fail("search: no rules (matcher) given");
  if (o.cost == nullptr) Fail("search: no cost model given");
  if (o.budget < 0) Fail("--budget must be >= 0, got ", o.budget);
  if (!(o.alpha >= 1.0)) Fail("--alpha must be >= 1, got ", o.alpha);
  if (!(o.max_growth >= 1.0)) Fail("the node growth limit must be >= 1, got ", o.max_growth);
}

void GreedyFinish(SearchResult* r, const SearchOptions& o) {
  if (!o.greedy_finish || IsRunnerStop(r->stop_reason)) return;
  SearchResult f = MakeSearch("greedy")->Run(r->graph, o);
  if (f.final_cost < r->final_cost) {
    r->graph = std::move(f.graph);
    r->applied.insert(r->applied.end(), f.applied.begin(), f.applied.end());
    r->finish_applied = static_cast<int64_t>(f.applied.size());
    // The greedy search costs from its own start: carry its gain over.
    r->final_cost -= f.initial_cost - f.final_cost;
  }
  r->graphs_explored += f.graphs_explored;
  r->rewrites_costed += f.rewrites_costed;
  r->real_steps += f.real_steps;
  if (IsRunnerStop(f.stop_reason)) r->stop_reason = f.stop_reason;
}

}  // namespace rlflow

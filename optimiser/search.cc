#include "optimiser/search.h"

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
  SearchResult Run(const Graph& graph, const SearchOptions& options) override {
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
  if (!(o.time_limit_s >= 0)) Fail("--time_limit must be >= 0, got ", o.time_limit_s);
  if (!(o.max_growth >= 1.0)) Fail("the node growth limit must be >= 1, got ", o.max_growth);
}

void GreedyFinish(SearchResult* r, const SearchOptions& o) {
  if (!o.greedy_finish || r->stop_reason == StopReason::kInterrupted) return;
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
  if (f.stop_reason == StopReason::kInterrupted || f.stop_reason == StopReason::kTimeLimit)
    r->stop_reason = f.stop_reason;
}

}  // namespace rlflow

#include "optimiser/search.h"

#include "core/error.h"

namespace rlflow {
namespace {

// --search=none: import, check, export.
class NoSearch : public Search {
 public:
  std::string name() const override { return "none"; }
  SearchResult Run(const Graph& graph, const SearchOptions&) override {
    SearchResult r;
    r.graph = graph;
    r.graphs_explored = 1;
    return r;
  }
};

}  // namespace

std::vector<std::string> SearchNames() { return {"none"}; }

std::unique_ptr<Search> MakeSearch(const std::string& name) {
  if (name == "none") return std::make_unique<NoSearch>();
  std::string known;
  for (const auto& n : SearchNames()) known += (known.empty() ? "" : ", ") + n;
  Fail("unknown --search '", name, "' (available: ", known, ")");
}

}  // namespace rlflow

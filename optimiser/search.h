#pragma once
// The search interface. Each --search value is one Search implementation;
// TASO's backtracking search, greedy and the learned agents plug in here.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/graph.h"

namespace rlflow {

struct SearchOptions {
  uint64_t seed = 1;
  double time_limit_s = 0;  // 0: none
  // Progress callback (e.g. to the log); may be empty.
  std::function<void(const std::string&)> progress;
};

struct SearchResult {
  Graph graph;
  std::vector<std::string> applied;  // rule ids in the order applied
  int64_t graphs_explored = 0;
};

class Search {
 public:
  virtual ~Search() = default;
  virtual std::string name() const = 0;
  virtual SearchResult Run(const Graph& graph, const SearchOptions& options) = 0;
};

// The names accepted by --search.
std::vector<std::string> SearchNames();
// Throws rlflow::Error for an unknown name.
std::unique_ptr<Search> MakeSearch(const std::string& name);

}  // namespace rlflow

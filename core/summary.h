#pragma once
// Graph statistics for reports: operator counts, parameters, FLOPs.
#include <cstdint>
#include <map>
#include <string>

#include "core/graph.h"

namespace rlflow {

struct GraphSummary {
  int nodes = 0;
  int opaque_nodes = 0;
  std::map<std::string, int> op_counts;
  int64_t parameters = 0;  // weight elements
  int64_t parameter_bytes = 0;
  double flops = 0;  // from the registry's per-op FLOPs rules

  std::string ToString() const;  // multi-line, human readable
};

// FLOPs of one node (0 for opaque nodes and pure data movement).
double NodeFlops(const Graph& graph, NodeId id);
GraphSummary Summarize(const Graph& graph);

}  // namespace rlflow

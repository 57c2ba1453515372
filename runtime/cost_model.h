#pragma once
// The cost model: each operator's runtime measured on a backend (warm-up,
// then the median of several timed runs), cached by (backend, operator,
// attributes, input types, small constant inputs) in memory and in a
// persistent timing cache reused across runs, like TensorRT's timing cache.
// Graph cost = sum of the costs of the nodes that run at inference time:
// weight-only nodes (every input a weight or computed from weights only) are
// folded into initializers before export and cost nothing.
//
// Backends implement TimingBackend; the CPU backend runs the ATen executor.
// A CUDA backend plugs in through MakeTimingBackend without changes to the
// callers. No flags, no I/O except the explicit cache Load/Save calls.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <string>
#include <vector>

#include "core/graph.h"

namespace rlflow {

struct TimingOptions {
  int warmup = 2;          // untimed runs first
  int samples = 7;         // timed samples; the median is reported
  double min_sample_ms = 0.2;  // a sample repeats the run until it lasts this long (short ops)
  uint64_t seed = 1;       // random inputs
};

// Runs whole graphs on one device and times them.
class TimingBackend {
 public:
  virtual ~TimingBackend() = default;
  // "cpu", "cuda".
  virtual std::string name() const = 0;
  // Identifies the timing conditions (device, threads, library versions);
  // part of every timing-cache key so that caches from other conditions are
  // never reused.
  virtual std::string fingerprint() const = 0;
  // Median milliseconds per run of `graph` on random inputs.
  virtual double TimeGraph(const Graph& graph, const TimingOptions& options) = 0;
  // End-to-end comparison: runs `a` and `b` alternately (a, b, b, a, ...) so
  // that machine noise affects both alike; returns the median ms of each.
  virtual std::pair<double, double> TimeInterleaved(const Graph& a, const Graph& b, int runs,
                                                    const TimingOptions& options) = 0;
};

// Device names accepted by MakeTimingBackend.
std::vector<std::string> TimingBackendNames();
// "cpu" (the ATen executor, with ATen's current thread count). Throws
// rlflow::Error for an unknown device or one this build has no backend for.
std::unique_ptr<TimingBackend> MakeTimingBackend(const std::string& device);

struct OpCost {
  double ms = 0;      // measured (or, for analytical models, estimated) time
  double flops = 0;   // from the registry's FLOPs rules
  double bytes = 0;   // bytes read and written (inputs + outputs)
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Cost of one node as if it runs (weight-only or not).
  virtual OpCost NodeCost(const Graph& graph, NodeId id) = 0;
  // NodeCost(...).ms, possibly faster.
  virtual double NodeMs(const Graph& graph, NodeId id) { return NodeCost(graph, id).ms; }
  // Sum of NodeMs over the nodes that run at inference time.
  virtual double GraphCost(const Graph& graph);
};

// Nodes computed from weights only (folded before export); per node id.
std::vector<char> WeightOnlyNodes(const Graph& graph);

// A single-node graph computing `graph`'s node `id`: its non-constant inputs
// become graph inputs, its constant inputs stay initializers.
Graph ExtractNode(const Graph& graph, NodeId id);

// The cache key of a node: operator, attributes, input types (and the
// contents of small constant inputs, e.g. Reshape's shape).
std::string NodeCostKey(const Graph& graph, NodeId id);
// A 64-bit hash of the same information, for the in-memory fast path.
uint64_t NodeCostHash(const Graph& graph, NodeId id);

// Measures each node on a backend, once per key.
class MeasuredCostModel : public CostModel {
 public:
  MeasuredCostModel(TimingBackend* backend, TimingOptions options = {});
  OpCost NodeCost(const Graph& graph, NodeId id) override;
  double NodeMs(const Graph& graph, NodeId id) override { return NodeTime(graph, id); }  // hashed fast path

  // Timing-cache file: "rlflow-timing-cache 1" then one "<ms>\t<key>" line per
  // entry (keys start with the backend fingerprint). Load merges entries in;
  // a missing file is not an error; a malformed one throws rlflow::Error
  // naming the file and line. Save writes atomically.
  void LoadCache(const std::string& path);
  // The same from the file's text (`path` names it in errors).
  void LoadCacheText(const std::string& text, const std::string& path);
  void SaveCache(const std::string& path) const;

  int64_t hits() const { return hits_; }
  int64_t measurements() const { return measured_; }
  size_t cache_size() const { return cache_.size(); }

 private:
  TimingBackend* backend_;
  TimingOptions options_;
  mutable std::mutex mu_;
  double NodeTime(const Graph& graph, NodeId id);
  std::string fingerprint_;              // the backend's, taken at the first use
  std::map<std::string, double> cache_;  // fingerprint|key -> ms
  std::unordered_map<uint64_t, double> fast_;  // NodeCostHash -> ms (in memory)
  int64_t hits_ = 0, measured_ = 0;
};

// Deterministic analytical model (roofline plus a per-op overhead), for tests
// and for a first ordering without measurements.
class AnalyticalCostModel : public CostModel {
 public:
  AnalyticalCostModel(double gflops = 50, double gbytes_per_s = 10, double overhead_ms = 0.005)
      : gflops_(gflops), gbps_(gbytes_per_s), overhead_ms_(overhead_ms) {}
  OpCost NodeCost(const Graph& graph, NodeId id) override;

 private:
  double gflops_, gbps_, overhead_ms_;
};

// FLOPs and bytes of a node, without time.
OpCost StaticNodeCost(const Graph& graph, NodeId id);

}  // namespace rlflow

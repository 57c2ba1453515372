#pragma once
// Tests: a timing backend whose times are a formula of the graph, so that a
// verdict or a search decision is known in advance. Each node costs
// node_ms(graph, node), alone and in context; a whole run costs run_ms(graph)
// (the nodes' sum unless given: a run can cost what no node shows, like a
// fusion the runtime stops making). Paired timings carry a small
// deterministic jitter in opposite directions, so that intervals are not
// degenerate.
#include <functional>
#include <string>
#include <utility>

#include "runtime/cost_model.h"

namespace rlflow::testing {

class ScriptedBackend : public TimingBackend {
 public:
  using NodeMs = std::function<double(const Graph&, NodeId)>;
  using RunMs = std::function<double(const Graph&)>;
  ScriptedBackend(std::string fingerprint, NodeMs node_ms, RunMs run_ms = nullptr)
      : fingerprint_(std::move(fingerprint)), node_ms_(std::move(node_ms)), run_ms_(std::move(run_ms)) {}

  std::string name() const override { return "cpu"; }
  // As ONNX Runtime (TimingBackend::fuses_nodes): the optimiser's --retries
  // default then searches again after a verdict that is not "faster".
  bool fuses_nodes() const override { return fuses_nodes_; }
  void set_fuses_nodes(bool fuses) { fuses_nodes_ = fuses; }
  // As ONNX Runtime (TimingBackend::min_paired_pairs): pairs timed in
  // blocks of sessions, and the verdict's pair count follows from it.
  int min_paired_pairs() const override { return min_paired_pairs_; }
  void set_min_paired_pairs(int pairs) { min_paired_pairs_ = pairs; }
  // As ONNX Runtime (TimingBackend::times_files): a model file's run costs
  // file_ms(path, inputs) (`inputs`: the graph whose inputs it is fed).
  using FileMs = std::function<double(const std::string&, const Graph&)>;
  bool times_files() const override { return static_cast<bool>(file_ms_); }
  void set_file_ms(FileMs file_ms) { file_ms_ = std::move(file_ms); }
  std::string fingerprint() const override { return fingerprint_; }
  double RunTime(const Graph& g) const {
    if (run_ms_) return run_ms_(g);
    double ms = 0;
    for (NodeId id = 0; id < g.num_nodes(); ++id) ms += node_ms_(g, id);
    return ms;
  }
  double TimeGraph(const Graph& g, const TimingOptions&) override { return RunTime(g); }
  // In TimingOptions::blocks blocks where given (as ONNX Runtime's session pairs).
  PairedTimes TimePaired(const Graph& a, const Graph& b, int pairs, const TimingOptions& o) override {
    return Paired(RunTime(a), RunTime(b), pairs, o);
  }
  PairedTimes TimePairedFiles(const std::string& a, const std::string& b, const Graph& inputs, int pairs,
                              const TimingOptions& o) override {
    if (!file_ms_) return TimingBackend::TimePairedFiles(a, b, inputs, pairs, o);
    return Paired(file_ms_(a, inputs), file_ms_(b, inputs), pairs, o);
  }
  InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions&) override {
    InContextTimes t;
    t.runs = runs;
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
      t.node_ms.push_back(node_ms_(g, id));
      t.node_spread.push_back(0.01);
      t.run_ms += node_ms_(g, id);
    }
    return t;
  }

 private:
  static PairedTimes Paired(double a_ms, double b_ms, int pairs, const TimingOptions& o) {
    PairedTimes t;
    t.cpu_clock = "thread";
    for (int k = 0; k < o.blocks; ++k) t.blocks.push_back(pairs / o.blocks + (k < pairs % o.blocks ? 1 : 0));
    for (int i = 0; i < pairs; ++i) {
      const double jitter = 1.0 + 0.001 * (i % 5);
      t.wall_a.push_back(a_ms * jitter);
      t.wall_b.push_back(b_ms * (2.0 - jitter));
    }
    t.cpu_a = t.wall_a;
    t.cpu_b = t.wall_b;
    return t;
  }
  FileMs file_ms_;
  std::string fingerprint_;
  bool fuses_nodes_ = false;
  int min_paired_pairs_ = 0;
  NodeMs node_ms_;
  RunMs run_ms_;
};

}  // namespace rlflow::testing

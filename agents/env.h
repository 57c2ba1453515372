#pragma once
// A Gym-style environment over graph rewrites (RLFlow's and X-RLflow's),
// driving the same rewrite engine as --search=taso and greedy
// (search/engine.h).
//
// An episode starts from a graph (Reset). Each step applies one candidate
// rewrite -- a (rule, direction, location) the matcher found, costed by the
// engine -- or the stop action. The observation is the graph as flat
// tensors (node, edge and global features) plus the candidates, both as a
// flat list and in RLFlow's hierarchical form (a rule mask, and per rule a
// location mask). Step never throws: an invalid action gets a penalty, the
// graph is unchanged and `info` says why.
//
// No flags, no I/O: the agents' binaries own those.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/rewrite/matcher.h"
#include "runtime/cost_model.h"
#include "search/engine.h"

namespace rlflow::agents {

enum class RewardKind {
  kDelta,       // RT_{t-1} - RT_t, cost-model ms (RLFlow eq. 2)
  kCombined,    // 100 (alpha dRT / RT_0 + beta dMA / MA_0): runtime and memory-access decrease (RLFlow eq. 3)
  kNormalised,  // 100 (RT_{t-1} - RT_t) / RT_0 (X-RLflow)
  kEndToEnd,  // sparse: 100 (T_last - T_now) / T_0 measured on a timing backend every `measure_every` steps and at the
              // end
};
// "delta", "combined", "normalised", "end_to_end"; ParseRewardKind throws rlflow::Error on others.
const char* RewardKindName(RewardKind kind);
RewardKind ParseRewardKind(const std::string& name);

struct EnvOptions {
  int max_candidates = 500;  // flat candidate list cap (the cheapest estimates are kept)
  int max_locations = 200;   // hierarchical form: locations per rule action
  int horizon = 100;         // steps per episode
  double invalid_penalty = -100;
  double max_growth = 2.0;  // rewrites may not grow the graph beyond max_growth x its start size
  RewardKind reward = RewardKind::kNormalised;
  double alpha = 0.8, beta = 0.2;  // kCombined weights
  int measure_every = 10;          // kEndToEnd: steps between measurements
  int measure_samples = 5;         // kEndToEnd: runs per measurement (median)
  uint64_t seed = 1;               // kEndToEnd: input data
  // The run's owner of limits (optional; core/runner.h): once it says stop,
  // the episode ends (info.stop = its reason) and a state's costing stops
  // early. Every rewrite applied counts as one of its real steps.
  Runner* runner = nullptr;
};

// The op-type vocabulary of the node features: the registry's operators
// when the checked-in agents were trained (sorted by name; operators added
// since are featurised as "opaque") and, last, "opaque" (nodes the IR keeps
// unchanged).
const std::vector<std::string>& OpVocabulary();

// Feature layouts (sizes of the per-node, per-edge and global vectors).
constexpr int kNodeScalarFeatures = 4;  // log cost (us), log FLOPs, weight inputs, is graph output
int NodeFeatureSize();                  // OpVocabulary().size() + kNodeScalarFeatures
constexpr int kEdgeFeatureSize = 7;     // rank / 4, log elements, four log dims (padded), is float
constexpr int kGlobalFeatureSize = 3;   // cost / initial cost, step / horizon, log initial cost (ms)

struct EnvCandidate {
  int rule = 0;  // index into the matcher's rules
  bool reverse = false;
  int rule_action = 0;        // 2 * rule + reverse: the hierarchical form's first choice
  std::vector<NodeId> nodes;  // the graph nodes it rewrites (a subset of the observation's nodes)
  double estimated_gain = 0;  // state cost - estimated cost after it (ms)
};

struct Observation {
  // The graph: node features [num_nodes x NodeFeatureSize()], edges (value
  // from producer node to consumer node) with features [num_edges x
  // kEdgeFeatureSize], global features [kGlobalFeatureSize]. Row-major.
  int num_nodes = 0, num_edges = 0;
  std::vector<float> node_features;
  std::vector<int64_t> node_op;  // index into OpVocabulary() per node
  std::vector<int64_t> edge_src, edge_dst;
  std::vector<float> edge_features;
  std::vector<float> global_features;
  // The valid actions: candidates 0..n-1 and the stop action n.
  std::vector<EnvCandidate> candidates;
  int candidates_total = 0;  // before the cap; the cut ones had the highest estimated cost
  // Hierarchical form (RLFlow): rule_mask[a] for each rule action a = 2 *
  // rule + reverse (2 x rules), and per rule action the indices into
  // `candidates` of its locations (at most max_locations; empty if masked).
  std::vector<uint8_t> rule_mask;
  std::vector<std::vector<int32_t>> locations;
  int stop_action() const { return static_cast<int>(candidates.size()); }
};

struct StepInfo {
  bool valid = true;
  std::string message;     // why an action was invalid, or what was applied
  std::string rule;        // "<id>" or "<id> (reversed)" for an applied rewrite
  double cost_ms = 0;      // cost-model cost after the step
  double measured_ms = 0;  // kEndToEnd: the last measurement
  StopReason stop = StopReason::kNone;
};

struct StepResult {
  const Observation* observation = nullptr;  // valid until the next Step / Reset of this environment
  double reward = 0;
  bool done = false;
  StepInfo info;
};

class RewriteEnv {
 public:
  // `matcher` and `cost` must outlive the environment and its forks;
  // `backend` is needed for RewardKind::kEndToEnd only. Throws rlflow::Error
  // on bad options.
  RewriteEnv(const Matcher* matcher, CostModel* cost, EnvOptions options = {}, TimingBackend* backend = nullptr);

  // Starts an episode from `graph` (used as given: canonicalise it first,
  // e.g. CanonicalForm from search/canonical.h).
  const Observation& Reset(const Graph& graph);
  // Applies candidate `action` (0 .. candidates - 1) or stops (== candidates).
  StepResult Step(int action);
  // The flat action of a hierarchical choice (rule action, location index);
  // -1 if there is none.
  int FlatAction(int rule_action, int location) const;
  // An independent copy of the environment in its current state: the graph,
  // its matches and costs are shared (immutable); stepping one does not
  // change the other.
  RewriteEnv Fork() const { return *this; }

  const Observation& observation() const { return obs_; }
  const RewriteState& state() const { return state_; }
  const Graph& graph() const { return state_.graph(); }
  double initial_cost() const { return initial_cost_; }
  int steps() const { return steps_; }
  bool done() const { return done_; }
  // Real work of this environment and its forks together, since it was
  // made: Step calls (every action, the stop action and invalid ones
  // included) and end-to-end measurements (graph runs timed on the
  // backend, RewardKind::kEndToEnd). What a world model's dream saves.
  int64_t real_steps() const { return counters_->steps; }
  int64_t real_measurements() const { return counters_->measurements; }
  // Step calls of every rewrite environment of this process: what a test
  // of dream training checks stays unchanged.
  static int64_t ProcessSteps();
  const EnvOptions& options() const { return o_; }

 private:
  // The observation of `state` and the engine candidates behind it.
  void Observe(const RewriteState& state, Observation* out, std::vector<Candidate>* costed) const;
  double MemoryAccess(const Graph& g) const;
  double Measure(const Graph& g);
  double Reward(double before_cost, double after_cost, double before_ma, double after_ma);

  const Matcher* matcher_;
  CostModel* cost_;
  EnvOptions o_;
  TimingBackend* backend_;
  std::shared_ptr<RewriteEngine> engine_;
  RewriteState state_;
  std::vector<Candidate> costed_;  // the engine's candidates behind obs_.candidates
  Observation obs_;
  double initial_cost_ = 0, initial_ma_ = 0, memory_access_ = 0;
  double initial_ms_ = 0, last_ms_ = 0;
  int steps_ = 0, last_measured_step_ = 0;
  bool done_ = true;
  struct Counters {
    std::atomic<int64_t> steps{0}, measurements{0};
  };
  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();  // shared with forks
};

}  // namespace rlflow::agents

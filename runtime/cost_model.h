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
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/graph.h"
#include "core/node_key.h"
#include "core/passes/fold_constants.h"  // WeightOnlyNodes

namespace rlflow {

struct TimingOptions {
  int warmup = 2;              // untimed runs first
  int samples = 7;             // timed samples; the median is reported
  double min_sample_ms = 0.2;  // a sample repeats the run until it lasts this long (short ops)
  uint64_t seed = 1;           // random inputs
  // > 0: TimeGraph of a graph whose warm-up run is slower than
  // max_total_ms / samples takes no second warm-up and fewer samples (at
  // least 3), about max_total_ms in all. A node of a model at a large
  // batch (a ResNet-50 conv at batch 16: 40 ms) was run 9 times each time
  // a rewrite gave it a new key, and such timings were most of the
  // search's time. 0: always warmup + samples runs (the verdict's timings).
  double max_total_ms = 0;
  // TimePaired on a backend that times pairs in blocks of fresh sessions
  // (ONNX Runtime): how many; 0: the backend's own number.
  int blocks = 0;
};

// The pairs MeasuredCostModel::ResolveGain times two sides of `side_ms`
// each in: `pairs`, or fewer where they would take over kResolveBudgetMs
// (never fewer than 20, nor than the backend's `min_pairs`); side_ms 0
// (unknown): `pairs`.
inline constexpr double kResolveBudgetMs = 2000;
int ResolvePairs(int pairs, double side_ms, int min_pairs);

// The timings MeasuredCostModel takes of single nodes: TimingOptions'
// defaults with max_total_ms = 150.
TimingOptions NodeTiming();
// The samples TimeGraph takes after a warm-up run of `first_ms` (see
// max_total_ms; runtime/ort_run.js's samplesWithin is the same rule).
int SamplesWithin(const TimingOptions& options, double first_ms);

// Paired end-to-end timings of two graphs: pair i is (a[i], b[i]), run one
// after the other in alternating order (a b, b a, ...).
struct PairedTimes {
  std::vector<double> wall_a, wall_b;  // ms per run
  std::vector<double> cpu_a, cpu_b;    // CPU ms per run (see cpu_clock)
  // "thread": the timing thread's CPU time (one compute thread: all the
  // work runs on it); "process": the whole process's (several threads).
  std::string cpu_clock;
  // Where the pairs were timed in blocks of their own set-up (ONNX
  // Runtime: a pair of sessions per block, created in alternating order),
  // the blocks' sizes in order; empty: one block (BlockedPairedRatio).
  std::vector<int> blocks;
};

// Each node's time inside whole-graph runs (warm, in context: the caches
// hold what the previous nodes left there), per node id.
struct InContextTimes {
  std::vector<double> node_ms;      // share of a median run (SummariseInContext); 0 for nodes that do not run
  std::vector<double> node_spread;  // interquartile range / median over the runs
  double run_ms = 0;                // median whole-run time
  // Of run_ms, the time spent outside every node that any graph with the
  // same inputs and outputs spends too (taking the inputs, handing the
  // outputs back): a drop-in replacement costs it unchanged, so it is a
  // cost per run, not per node. 0 where the backend does not measure it.
  double fixed_ms = 0;
  int runs = 0;
  // Nodes the device ran inside another node's kernel (ORT's GELU, a MatMul
  // with its scale or transposes, a Conv with its activation): fused_into[id]
  // is the node charged with the kernel that computed node id (kNoNode for
  // the others), fused_distance[id] how many edges lie between them (> 0:
  // the node is upstream of it, < 0 downstream). Such a node costs nothing
  // only while that kernel's node is still next to it: a rewrite that moves
  // or removes it breaks the fusion, and the node runs on its own again.
  // Empty where the backend fuses nothing.
  std::vector<NodeId> fused_into;
  std::vector<int> fused_distance;
};

// The order every backend's TimePaired runs its pairs in: max(pairs, 1)
// rounds, alternately a then b and b then a, so that neither graph always
// runs first; time(true) runs and times a, time(false) b.
void RunAlternately(int pairs, const std::function<void(bool a)>& time);
// InContextTimes from `runs` timed runs: node_samples[node][run] (ms),
// run_ms[run] (whole runs). Each node's time is its median scaled so that
// the nodes add up to the median run's node total (medians of skewed
// samples add up to less); spreads are IQR / median.
InContextTimes SummariseInContext(const std::vector<std::vector<double>>& node_samples,
                                  const std::vector<double>& run_ms);

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
  // TimeGraph's samples (milliseconds per run), in the order taken, their
  // median TimeGraph's result: whether the machine's speed moved while they
  // were taken shows in them (DriftRatio). A backend that keeps only the
  // median gives that alone.
  virtual std::vector<double> TimeGraphRuns(const Graph& graph, const TimingOptions& options) {
    return {TimeGraph(graph, options)};
  }
  // End-to-end comparison: `pairs` runs of each of `a` and `b` (same
  // inputs), alternately (a b, b a, ...) after options.warmup runs of each,
  // so that machine noise affects both alike. A graph faster than
  // options.min_sample_ms runs repeatedly per sample (times are per run).
  virtual PairedTimes TimePaired(const Graph& a, const Graph& b, int pairs, const TimingOptions& options) = 0;
  // TimePaired of two model files as the runtime loads them (their external
  // data files beside them), on the inputs `inputs` has (RandomInputs, by
  // graph input name): the file a user gave against the file a run would
  // write, where the import converted the model to another form (an older
  // opset's, ONNX's experimental operators) that the runtime may run
  // otherwise than the file. Only where times_files(); others throw
  // rlflow::Error.
  virtual PairedTimes TimePairedFiles(const std::string& a, const std::string& b, const Graph& inputs, int pairs,
                                      const TimingOptions& options);
  // Whether TimePairedFiles runs files: a runtime that loads ONNX models
  // (ONNX Runtime). rlflow's executors run rlflow's graphs.
  virtual bool times_files() const { return false; }
  // Every node timed in place during `runs` warm whole-graph runs.
  virtual InContextTimes TimeNodesInContext(const Graph& graph, int runs, const TimingOptions& options) = 0;
  // Whether a node's in-context time depends on the graph around it beyond
  // its own key: ONNX Runtime fuses neighbours into one kernel (a Conv and
  // the Clip after it run as one FusedConv, timed as the Conv), so the same
  // Conv key costs differently in another model. MeasuredCostModel then
  // keeps in-context timings per model (SetContext).
  virtual bool context_sensitive() const { return false; }
  // Whether the runtime computes nodes whose inputs are all weights once,
  // when it loads the model (ONNX Runtime's constant folding), rather than on
  // every run (rlflow's executors). A model written with them still in
  // place then costs them on every run (CostModel::RunCost).
  virtual bool folds_constants() const { return false; }
  // Whether the runtime runs several nodes as one kernel (ONNX Runtime's
  // fusions: a transpose and a scale folded into its FusedMatMul), so that a
  // rewrite can break a fusion and lose in whole runs while its nodes' costs
  // show a gain. The optimiser's verdict then searches again without one
  // applied rule at a time (PipelineOptions::retries). rlflow's executors
  // run node by node.
  virtual bool fuses_nodes() const { return false; }
  // Whether a Transpose's output is a permuted view that its readers read
  // strided (rlflow's CPU executor), so that they are other cost keys
  // (ModelInfo::permuted_views). ONNX Runtime materialises every tensor
  // contiguous: false there.
  virtual bool permuted_views() const { return true; }
  // The fewest pairs TimePaired needs for its interval to cover the
  // variation it has: ONNX Runtime times its pairs in several pairs of
  // sessions (at least 5 pairs each), and with fewer pairs it has fewer
  // session pairs, the interval over them as wide as Student's t with one
  // degree of freedom makes it (12.7 at 95%). 0: any number.
  virtual int min_paired_pairs() const { return 0; }
};

// Counts the real measurements made on a backend: every TimeGraph,
// TimePaired and TimeNodesInContext call is one (a graph timed on the
// device), whoever makes it (the cost model's calibration and isolated
// timings, the noise rule's A/B pairs, the verdict, an environment's
// end-to-end reward). Forwards everything to `inner`, which must outlive
// it. Thread-safe.
class CountingBackend : public TimingBackend {
 public:
  explicit CountingBackend(TimingBackend* inner) : inner_(inner) {}
  std::string name() const override { return inner_->name(); }
  std::string fingerprint() const override { return inner_->fingerprint(); }
  double TimeGraph(const Graph& graph, const TimingOptions& options) override {
    ++measurements_;
    return inner_->TimeGraph(graph, options);
  }
  std::vector<double> TimeGraphRuns(const Graph& graph, const TimingOptions& options) override {
    ++measurements_;
    return inner_->TimeGraphRuns(graph, options);
  }
  PairedTimes TimePaired(const Graph& a, const Graph& b, int pairs, const TimingOptions& options) override {
    ++measurements_;
    return inner_->TimePaired(a, b, pairs, options);
  }
  PairedTimes TimePairedFiles(const std::string& a, const std::string& b, const Graph& inputs, int pairs,
                              const TimingOptions& options) override {
    ++measurements_;
    return inner_->TimePairedFiles(a, b, inputs, pairs, options);
  }
  bool times_files() const override { return inner_->times_files(); }
  InContextTimes TimeNodesInContext(const Graph& graph, int runs, const TimingOptions& options) override {
    ++measurements_;
    return inner_->TimeNodesInContext(graph, runs, options);
  }
  bool context_sensitive() const override { return inner_->context_sensitive(); }
  bool folds_constants() const override { return inner_->folds_constants(); }
  bool fuses_nodes() const override { return inner_->fuses_nodes(); }
  bool permuted_views() const override { return inner_->permuted_views(); }
  int min_paired_pairs() const override { return inner_->min_paired_pairs(); }
  int64_t measurements() const { return measurements_.load(); }

 private:
  TimingBackend* inner_;
  std::atomic<int64_t> measurements_{0};
};

// What a timing backend is made with: the thread count the run pins, and
// the backend's own settings by name (named as the optimiser's flag for
// them, e.g. "ort_level"); a backend refuses a setting it does not declare.
struct BackendOptions {
  int threads = 1;
  std::map<std::string, std::string> settings;
};

// One --device, registered by name (RLFLOW_REGISTER_BACKEND) like searches
// and passes: its library registers it, linking it in makes it available,
// and --device is read in one place (MakeTimingBackend).
struct BackendInfo {
  std::string name;
  std::string description;            // one line, for --help and errors
  std::vector<std::string> settings;  // the BackendOptions::settings it takes
  // The runtime a model optimised on this device is for (KnownTargets):
  // "onnx" (standard operators only) or "ort" (its contrib operators too),
  // and whether the written model may be raised to the newest opset rlflow
  // writes (the runtime is known to run it).
  std::string target = "onnx";
  bool newest_opset = false;
  std::function<std::unique_ptr<TimingBackend>(const BackendOptions&)> make;
};
// Returns true (for static registration); a name registered twice is a bug.
bool RegisterTimingBackend(BackendInfo info);
#define RLFLOW_REGISTER_BACKEND(id, ...) \
  static const bool rlflow_backend_registered_##id = ::rlflow::RegisterTimingBackend(__VA_ARGS__)

// Registered device names, sorted.
std::vector<std::string> TimingBackendNames();
// The registration of `device`; throws rlflow::Error for an unknown one,
// listing those this binary has.
const BackendInfo& FindTimingBackend(const std::string& device);
// Every backend and its description (several lines, for --help).
std::string DescribeTimingBackends();
// Makes `device`'s backend ("cpu": the ATen executor, with ATen's current
// thread count). Throws rlflow::Error for an unknown device, a setting it
// does not take, or one this build cannot run.
std::unique_ptr<TimingBackend> MakeTimingBackend(const std::string& device, const BackendOptions& options = {});
// Throws rlflow::Error naming a setting in `options` that `backend` does not
// take ("--ort_level does not apply to --device=cpu"); MakeTimingBackend
// checks it, and callers that make the backend later may check it first.
void CheckBackendSettings(const BackendInfo& backend, const BackendOptions& options);

struct OpCost {
  double ms = 0;     // measured (or, for analytical models, estimated) time
  double flops = 0;  // from the registry's FLOPs rules
  double bytes = 0;  // bytes read and written (inputs + outputs)
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Cost of one node as if it runs (weight-only or not).
  virtual OpCost NodeCost(const Graph& graph, NodeId id) = 0;
  // NodeCost(...).ms, possibly faster.
  virtual double NodeMs(const Graph& graph, NodeId id) { return NodeCost(graph, id).ms; }
  // Sum of NodeMs over the nodes that run at inference time, plus
  // RunFixedMs(). Weight-only nodes cost nothing: the optimiser folds them
  // into initializers before it writes a graph (the graphs a search
  // compares are all written that way).
  virtual double GraphCost(const Graph& graph);
  // What a run of `graph` as it stands costs on the device: GraphCost, plus
  // its weight-only nodes where the device computes them on every run
  // (TimingBackend::folds_constants is false). The original model is
  // measured as the user has it, unfolded: its estimate is this one. By
  // default (no device) GraphCost.
  virtual double RunCost(const Graph& graph) { return GraphCost(graph); }
  // What every run costs beyond its nodes, the same for the model and any
  // drop-in replacement of it (InContextTimes::fixed_ms); 0 by default.
  virtual double RunFixedMs() { return 0; }
  // How far NodeMs may be off (ms, about the interquartile range of its
  // measurements); 0 for exact (analytical) models.
  virtual double NodeNoiseMs(const Graph& graph, NodeId id) {
    (void)graph, (void)id;
    return 0;
  }
  // The noise rule: the gain (ms) of running `after` instead of `before`
  // (two graphs with the same inputs, in the same order) when the estimated
  // gain `estimate` is within the timings' noise. A measuring model times
  // the two against each other, interleaved, and returns `estimate` if
  // `after` is faster (95% interval above 1), 0 if it cannot tell, and the
  // measured (negative) difference if `after` is slower; cached under `key`
  // (equal keys: equal pairs). Models that cannot measure return `estimate`.
  virtual double ResolveGain(const Graph& before, const Graph& after, const std::string& key, double estimate) {
    (void)before, (void)after, (void)key;
    return estimate;
  }
};

// A single-node graph computing `graph`'s node `id`: its non-constant inputs
// become graph inputs, its constant inputs stay initializers.
Graph ExtractNode(const Graph& graph, NodeId id);

// What one calibration measured (MeasuredCostModel::Calibrate).
struct CalibrationReport {
  int nodes = 0;           // nodes timed: those that run (not opaque; not weight-only where the device folds them)
  int keys = 0;            // distinct cost keys among them
  int new_keys = 0;        // keys timed in context by this call (the others came from the cache)
  double run_ms = 0;       // measured whole-run time (0 if nothing was run)
  double overhead_ms = 0;  // per-node executor overhead used
  double fixed_ms = 0;     // per-run cost used (RunFixedMs)
  int fused_keys = 0;      // keys the device ran fused into a neighbour's kernel (free only next to it)
  // Cached / current time of the keys this run timed that were cached
  // already (their total times), used where they are at least 3 keys and
  // a fifth of the run's node time (else 1, time_base_known false); where
  // the cache keeps the model's own timings (a context-sensitive backend
  // after SetContext), of the whole run (the cache's estimate of it over
  // the run now), this graph's when all of it is cached, else the
  // reference's: new
  // keys were scaled by it, and costs in ms divided by it are in the
  // machine's speed now (the estimates a report compares with measured
  // times).
  double time_base = 1;
  bool time_base_known = false;
  // The time base came from the reference graph's run (Calibrate's
  // `reference`): this graph's own cached keys could not set it.
  bool time_base_from_reference = false;
  struct PerOp {
    int nodes = 0;
    double ms = 0;      // in-context ms of these nodes together
    double spread = 0;  // median relative spread (IQR / median) of their in-context times
    double factor = 1;  // median in-context / isolated time ratio over their keys
  };
  std::map<std::string, PerOp> per_op;
};

// How the optimiser times a graph whose one run took `run_seconds`: the
// whole runs a calibration times in context (about 1 s of them, at least 3:
// small models run up to 2000 times, their node times are microseconds and
// noisier), and the verdict's end-to-end timing (pairs spanning about 2 s,
// at most 40, at least 20 while they take at most 30 s and never fewer
// than 10; each sample repeats a small graph to at least 1000 / pairs ms,
// and at least 25 ms, so that the pairs are not a snapshot of a machine
// whose speed moves from second to second).
int CalibrationRuns(double run_seconds);
int VerdictPairs(double run_seconds);
// VerdictPairs for `backend`: at least its min_paired_pairs(), and where it
// times pairs in blocks of fresh sessions (min_paired_pairs() > 0: ONNX
// Runtime) up to 120 for a fast model (one per 1/120 s of its run).
int VerdictPairs(double run_seconds, const TimingBackend& backend);
// The timing of a verdict of `pairs` pairs: samples of at least
// 1000 / min(pairs, 40) ms, and more than 40 pairs timed in blocks (fresh
// ONNX Runtime sessions) of 10: ORT's sessions of one graph differ by a few
// percent (a copy of a model against itself 0.935x-1.090x by session pair),
// and the interval is Student's t over the blocks as well, so a fast
// model's is narrower over 12 session pairs than over 4 (a small encoder
// against a copy of itself: half-width 1.3% against 2.4%).
TimingOptions VerdictTiming(int pairs, uint64_t seed);
// The blocks VerdictTiming times `pairs` pairs in (0: the backend's own
// number).
int VerdictBlocks(int pairs);

// Measures each node on a backend, once per key, in two ways: alone (a
// one-node graph timed by itself) and in context (timed in place inside
// whole runs of a calibrated graph, Calibrate). A node's cost is its
// in-context time if its key was ever seen in context, else its isolated
// time scaled by the in-context/isolated ratio of the calibrated keys of
// its op type nearest to it in isolated time (LocalFactor); plus the
// executor's per-node overhead. Every measurement is cached under its key
// and never re-measured (the first one wins), so two runs with the same
// warm cache cost every graph identically.
class MeasuredCostModel : public CostModel {
 public:
  MeasuredCostModel(TimingBackend* backend, TimingOptions options = NodeTiming());
  OpCost NodeCost(const Graph& graph, NodeId id) override;
  double NodeMs(const Graph& graph, NodeId id) override { return NodeTime(graph, id); }  // hashed fast path

  // Times every node of `graph` in context (`runs` warm whole runs) unless
  // all of its keys are cached, then derives the per-op ratios and the
  // per-node overhead from the graphs calibrated so far. `graph` must run
  // on the executor (no opaque nodes: cut them first). With all keys cached
  // nothing runs, unless `time_base_runs` > 0: then `graph` runs that many
  // times to measure the time base of the cached timings (the report's
  // time_base: how much faster the machine was when they were timed than
  // now); nothing cached changes, so costs stay those of the cache.
  // Where new keys are timed and the graph's own cached keys cannot set the
  // time base (fewer than 3, or under a fifth of its node time: a graph
  // the search rewrote, whose every long node has new neighbours), or the
  // cache keeps the model's own timings (then always, by its whole run),
  // `reference`, a graph whose keys are cached (the original), runs right
  // after it `runs` times and sets it. Without one the new keys are taken
  // at the machine's speed now, beside cached keys timed at another speed.
  CalibrationReport Calibrate(const Graph& graph, int runs = 7, int time_base_runs = 0,
                              const Graph* reference = nullptr);
  // The keys of `graph` Calibrate would time in context now (never timed in
  // context): 0 when calibrating it would run nothing new. Runs nothing.
  // `alone`, if given, gets the fraction of its keys never timed alone
  // (Calibrate times those too).
  int UncalibratedKeys(const Graph& graph, double* alone = nullptr);
  // The node's relative spread (its key's, else its op type's median, else
  // 5%; at least 1%) x NodeMs.
  double NodeNoiseMs(const Graph& graph, NodeId id) override;
  double RunFixedMs() override;
  double RunCost(const Graph& graph) override;
  // Times `before` and `after` in 60 interleaved pairs (fewer where they
  // run long: ResolvePairs; each sample >= 1 ms; thread CPU time with one
  // compute thread, else wall time), cached in the timing cache under `key`.
  double ResolveGain(const Graph& before, const Graph& after, const std::string& key, double estimate) override;
  int64_t gains_resolved() const { return resolved_; }
  void set_resolve_pairs(int pairs) { resolve_pairs_ = pairs; }  // pairs timed against each other by this model
  // Polled between the keys Calibrate times alone (the larger part of a
  // calibration: a batch-16 ResNet-50's 43 keys, 17 of its 25 s): once it
  // returns true the rest are left untimed (timed when first costed, or by
  // the next calibration). The in-context runs are not cut short.
  void set_stop(std::function<bool()> stop) { stop_ = std::move(stop); }
  // A node's measured relative spread (in context), or -1 if unknown.
  double NodeSpread(const Graph& graph, NodeId id);

  // Timing-cache file: "rlflow-timing-cache 1" then one "<ms>\t<key>" line per
  // entry (keys start with the backend fingerprint). Load merges entries in;
  // a missing file is not an error; a malformed one throws rlflow::Error
  // naming the file and line. Save writes atomically.
  void LoadCache(const std::string& path);
  // The same from the file's text (`path` names it in errors).
  void LoadCacheText(const std::string& text, const std::string& path);
  void SaveCache(const std::string& path) const;

  // The model whose graphs are costed next (the original, before the
  // search). With a context-sensitive backend, in-context times, spreads,
  // the per-node overhead and the in-context/isolated ratios are read and
  // written under this model's structural hash only, so that one model's
  // fusions never price another's nodes; isolated times and A/B outcomes
  // stay shared. Without one (the executor) nothing changes.
  void SetContext(const Graph& model);

  int64_t hits() const { return hits_; }
  int64_t measurements() const { return measured_; }
  size_t cache_size() const { return cache_.size(); }

 private:
  TimingBackend* backend_;
  TimingOptions options_;
  mutable std::mutex mu_;
  double NodeTime(const Graph& graph, NodeId id) { return NodeTimeOf(graph, id, NodeKeyHash(graph, id)); }
  // The same, and the spread, for a node whose NodeKeyHash is `fast_key`.
  double NodeTimeOf(const Graph& graph, NodeId id, uint64_t fast_key);
  double NodeSpreadOf(const Graph& graph, NodeId id, uint64_t fast_key);
  std::string fingerprint_;  // the backend's, taken at the first use
  std::string context_;      // "@<model hash>" with a context-sensitive backend after SetContext, else ""
  // Key prefix of in-context entries of `kind` ("|ctx|", "|spread|", "|overhead", "|fixed"); mu_ held.
  std::string ContextKey(const char* kind) const { return fingerprint_ + context_ + kind; }
  double IsolatedTime(const Graph& graph, NodeId id, const std::string& key);  // mu_ held
  void RecordInContext(const Graph& g, const std::map<std::string, std::vector<NodeId>>& by_key,
                       const std::map<std::string, double>& now, const InContextTimes& t, int executed,
                       CalibrationReport& report);  // mu_ held
  void Derive();                                    // factors, spreads and overhead from the cache; mu_ held
  // The node ids a calibration times, by key: every node but the opaque ones
  // and, where the device folds them at load, the weight-only ones.
  std::map<std::string, std::vector<NodeId>> TimedKeys(const Graph& g) const;
  // fingerprint|key -> isolated ms; fingerprint<context>|ctx|key -> in-context ms;
  // fingerprint<context>|spread|key -> in-context relative spread;
  // fingerprint<context>|overhead -> per-node overhead;
  // fingerprint<context>|fixed -> per-run cost (<context>: context_, "" or "@<model hash>");
  // fingerprint|ab|key -> outcome of a pair timed against each other (1
  // faster, 0 within noise, else the measured difference in ms, < 0).
  std::map<std::string, double> cache_;
  std::unordered_map<uint64_t, double> fast_;         // NodeKeyHash -> ms (in memory)
  std::unordered_map<uint64_t, double> fast_spread_;  // NodeKeyHash -> NodeSpread (in memory)
  bool derived_ = false;                              // Derive() ran since the cache was last loaded
  std::map<std::string, double> factor_;              // op type -> in-context / isolated (median)
  // op type -> (isolated ms, in-context / isolated) of each calibrated key
  // of the context, by isolated time (LocalFactor).
  std::map<std::string, std::vector<std::pair<double, double>>> ratio_points_;
  // The ratio a key of `op` with isolated time `isolated_ms` is costed by:
  // the median over the kLocalFactorKeys calibrated keys of `op` nearest in
  // log isolated time (the ratio moves with the size: a small node's
  // isolated run is mostly the run's own overhead, so its ratio is low; on
  // four timing caches, leave-one-out, the median |log error| of a key's
  // estimate 0.240 -> 0.205, 0.333 -> 0.109, 0.228 -> 0.211, 0.154 -> 0.108
  // against the op type's median ratio); the op type's median where it has
  // no more keys than that, the median over all op types where it has none.
  static constexpr int kLocalFactorKeys = 5;
  double LocalFactor(const std::string& op, double isolated_ms) const;
  std::map<std::string, double> op_spread_;  // op type -> median relative spread
  int64_t resolved_ = 0;
  int resolve_pairs_ = 60;
  std::function<bool()> stop_;
  double default_factor_ = 1, overhead_ms_ = 0, fixed_ms_ = 0;
  int64_t hits_ = 0, measured_ = 0;
  // Keys the device ran fused into a neighbour's kernel (InContextTimes::
  // fused_into): free while a node with the neighbour's key lies `distance`
  // edges away in the graph being costed, else priced as run on their own.
  // fingerprint<context>|fused|key -> distance; |anchor|key -> the
  // neighbour's NodeKeyHash >> 12 (exact in a double).
  struct Fused {
    double fused_ms = 0, alone_ms = 0;
    uint64_t anchor = 0;
    int distance = 0;
  };
  std::unordered_map<uint64_t, Fused> fused_;  // NodeKeyHash -> its fused key's prices (in memory)
  static bool NextTo(const Graph& graph, NodeId id, uint64_t anchor, int distance);
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

#pragma once
// The optimise pipeline, a list of named stages (Stages() in stages.h),
// each one function over the run's state that writes its own record of the
// result, timed into the report:
// configure (options, search and its settings, backend, rules, cost model)
// -> load (model, shapes, the rules the written model may use) -> branches
// (each branch of a top-level If optimised as a model, by this pipeline) ->
// reference_run -> canonicalise (batch norm lowered for the rules) ->
// calibrate (the cost model in context; the search phase's runner) ->
// search (rounds until no new operator is left untimed) -> finish (fold
// weight-only work, raise unfolded batch norms, restore the interface) ->
// check (numerically against the original, also at another binding of
// symbolic dimensions) -> verdict (both measured end to end) -> retries ->
// write (the model, the original unless the optimised graph is faster; the
// DOT graph, the picture) -> report (JSON), each written atomically.
//
// The optimiser binary is flag parsing plus RunPipeline; the benchmarks call
// the same function. Errors (bad input, a result that
// does not check) are rlflow::Error with one line naming the problem; in
// that case nothing is written.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/onnx_hoist.h"
#include "core/summary.h"
#include "runtime/cost_model.h"
#include "runtime/verdict.h"
#include "search/search.h"

namespace rlflow {
namespace rules {
class RuleDatabase;
}  // namespace rules

struct PipelineOptions {
  // Paths as a user gives them: relative ones are resolved against the
  // directory `bazel run` was started from (ResolveUserPath).
  std::string model;    // ONNX file, or a zoo model name (e.g. resnet50.onnx); required
  std::string output;   // "": <model>.rlflow.onnx beside the input, or in the working directory for a zoo model
  std::string report;   // "": none
  std::string dot;      // "": none
  std::string picture;  // --picture: PNG of the rewritten regions ("": none)
  std::string rules;    // "": the checked-in rules/default.rules.pb (a runfile)
  // The database at `rules`, already read (LoadRuleDatabase), for callers
  // that run many models with one database: it is not read again (the
  // report still names `rules`). nullptr: read `rules`.
  std::shared_ptr<const rules::RuleDatabase> loaded_rules;
  std::string argv0;  // optional: where the binary's runfiles are (else found from /proc/self/exe)
  // "": $XDG_CACHE_HOME/rlflow or ~/.cache/rlflow/timing-cache.txt; "none": no cache.
  std::string timing_cache;
  std::string search = "taso";
  int64_t budget = 1000;
  bool greedy_finish = true;
  double time_limit_s = 0;
  // The search's own settings (Search::Params: taso's alpha, ppo's episodes,
  // the passes of --search=passes, ...); a name the search does not declare
  // is refused. Settings declared as paths are resolved like --model.
  SearchParams search_params;
  std::string device = "cpu";  // cpu, ort (cuda where built with it)
  std::string ort_level;       // --device=ort only; "": all (ORT's default)
  bool force_optimised = false;
  int measure_runs = 0;  // 0: auto (VerdictPairs: 10 to 40 pairs)
  // The time base of the cached timings is read again right before the
  // verdict (and right after it) where its last reading is older than this
  // (s; PipelineResult::TimeBaseNow). 0: always. The machine's speed moves
  // 2x within a second here: with 5 s, a small model (calibration and search
  // under 5 s) kept the calibration's reading, and a cold-cache default run
  // missed 10% in 11 of 65 runs (3 of 66 read always; +1 s a run).
  double time_base_max_age_s = 0.0;
  // Where the readings of the time base right before and right after the
  // verdict's measurement differ by more than `steady_ratio` (the larger
  // over the smaller), the machine's speed moved while it measured: the
  // measurement is taken again (the reading after it serves as the next
  // one's reading before), at most `unsteady_remeasures` more times and
  // only while one measurement with its reading takes at most
  // `remeasure_max_s`; the steadiest (the readings nearest each other,
  // the last of equals) is the verdict. In a noisy hour here 9 of 11
  // estimates more than 10% off were runs whose readings were 1.2x-1.8x
  // apart (docs/figures/estimate_sweep_default_run_2026-12-05_m4.txt).
  // A measurement whose own runs disagree by more than `steady_ratio`
  // (VerdictRecord::drifts) is said in the log, not measured again: doing
  // so changed no estimate's error in two corpus sweeps
  // (docs/figures/estimate_drift_2026-12-06.txt).
  double steady_ratio = 1.10;
  int unsteady_remeasures = 2;
  double remeasure_max_s = 20.0;
  // When the verdict does not find the optimised graph faster and its
  // rewrites come from several rules: searches again leaving out one
  // applied rule at a time (the least applied first), at most this many
  // times, and keeps the first graph the verdict finds faster. -1: 2 with a
  // backend that fuses nodes into one kernel (TimingBackend::fuses_nodes:
  // ONNX Runtime's fusions, which per-node costs cannot see), else 0.
  int retries = -1;
  // Where the written model must not run slower as well (--guard): "auto"
  // (ONNX Runtime, level all, --threads, for --device=cpu, where most users
  // run the written model: a rewrite that pays on rlflow's executor can
  // break a pattern ORT fuses), "ort", or "none". When the device's verdict
  // finds the result faster, both graphs are timed in the guard's runtime
  // too, interleaved (as many pairs as the verdict there would take; the
  // files where VerdictRecord::files), and the original is written if it
  // is slower there (its 95% interval below 1, in a retry too; with
  // `retries` as for a slower verdict). Not
  // with --force_optimised, a scripted backend or --device=ort.
  std::string guard = "auto";
  // The verdict at a second binding of the symbolic dimensions, the one the
  // check runs the written model at (the given shapes moved: batch 1 -> 2,
  // an image's height halved and its width doubled): the written model keeps
  // its symbolic dimensions, so it will run at shapes other than the one it
  // was optimised at. When the verdict finds the result faster, both graphs
  // are timed at that binding too, interleaved (as many pairs). "require":
  // the original is written if the result is slower there (its interval
  // below 1; with `retries` as for a slower verdict); "report": measured and
  // reported only; "off": not measured; "auto": "require" where a symbolic
  // dimension was bound by free_dim (no shape was given: the binding
  // optimised at says no more about where the model runs than the second
  // does), "report" where input_shapes or input_data gave every input that
  // has one (the shapes the model will run at).
  std::string second_binding_verdict = "auto";
  // --second_input_shape: the second binding, given: shapes the model will
  // run at too (as input_shapes; inputs not named keep the first binding's
  // shapes, a dimension named like a given one taking its value). The check
  // and that verdict run there instead of at the moved binding, and "auto"
  // requires the result not slower there. Empty: the moved binding.
  std::map<std::string, std::vector<int64_t>> second_input_shapes;
  // The search at the second binding too: "auto" (where --second_input_shape
  // gave it), "on" (also at the check's moved binding), "off". The cost
  // model is calibrated there as well (the original's canonical form at
  // those shapes, in context), and the search takes as its result only
  // graphs whose cost there is estimated no higher than the original's
  // (SearchOptions::acceptable; taso still explores the others): the loss
  // at the second binding the verdict would veto is avoided in the search,
  // instead of the original being written or a rule left out by a retry.
  std::string second_binding_search = "auto";
  // How much more than the original's a graph's estimated cost there may be
  // (a fraction; --second_binding_slack). 0: none. Differences of about 1%
  // are near the estimate's resolution there, but losses of that size are
  // real: CBAM at 2x3x64x256 with 0.01 took a graph estimated 0.9% slower
  // there, which ran 0.987x [0.983, 0.995] there (file against file), while
  // the verdict there, in 120 pairs, found it within noise.
  double second_binding_slack = 0;
  uint64_t seed = 1;
  int free_dim = 1;
  // The newest default-domain opset the written model may be raised to, so
  // that rules may produce operators of that opset (HardSwish: 14,
  // LayerNormalization: 17). 0: the model's own opset, or the newest rlflow
  // writes (17) with --device=ort (the runtime the model is for runs it).
  int target_opset = 0;
  // The runtime the written model is for (KnownTargets): "onnx" (any ONNX
  // runtime: standard operators only) or "ort" (ONNX Runtime: its contrib
  // operators too). "": "ort" with --device=ort, else "onnx".
  std::string target;
  // --input_shape: the shapes the model will run at, by graph input name
  // (ParseInputShapes); symbolic dimensions not covered get free_dim.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // --input_data: values to run the model on (the check, the timings), by
  // graph input name: .npy or TensorProto files. An input given data and no
  // --input_shape runs at the data's shape.
  std::map<std::string, std::string> input_data;
  double tolerance = 1e-4;
  int threads = 1;  // 0: the libraries' defaults
  // A reference run longer than this (seconds) at shapes the user did not
  // give (--free_dim, fitted) is warned about before the calibration.
  double slow_run_warning_s = 2.0;
  // Log lines (the binary sends them to glog); warning = true for warnings.
  std::function<void(bool warning, const std::string&)> log;
  // When set and true, the search stops and its best graph is checked and written.
  const std::atomic<bool>* interrupted = nullptr;
  // How deep in If branches this run is (Branches sets it for the run of a
  // branch; the branches of branches are optimised up to kMaxBranchDepth).
  int branch_depth = 0;
  // Whether the finish stage folds weight-only nodes into initializers.
  // Branches run without it: a weight derived from the outer graph's (a
  // transposed one) would be an outer-scope or duplicated tensor once the
  // branch is put back, and ONNX Runtime fuses MatMul and Gemm with a
  // subgraph's own initializers only; left a node (Transpose of the outer
  // weight, as exporters write it), ORT folds it into one at load.
  bool fold_weights = true;
  // Tests: makes the timing backend instead of `device` (a scripted one).
  std::function<std::unique_ptr<TimingBackend>()> make_backend;
  // Tests: makes the guard's backend instead of `guard`'s runtime.
  std::function<std::unique_ptr<TimingBackend>()> make_guard_backend;
};

// What each stage found and did, in the stage's own record: a stage writes
// its record only, and the summary and the JSON report are built from the
// records, stage by stage (Stages() in stages.h says which stage writes which
// lines and keys).
struct ConfigureRecord {
  std::string search;                                // the strategy's name
  std::map<std::string, std::string> search_params;  // its settings, defaults filled in
  std::string device;                                // the timing backend's name
  std::string target;  // the runtime the written model is for (PipelineOptions::target, resolved)
  int threads = 0;
  std::string rules_path;
  int rule_count = 0;
  std::string timing_cache;  // path ("" if none)
};

struct LoadRecord {
  std::string model_source;  // file path, or "zoo:<name>"
  std::string output;        // where the model will be written
  // Each graph input: its declared shape (symbolic names kept) and the shape
  // the search, the check and the verdict ran at.
  struct Input {
    std::string name, declared;
    Shape used;
    bool given = false;   // by --input_shape or --input_data
    bool fitted = false;  // where the free binding did not fit (LoadedModel::fitted)
    // Not named in --input_shape, but every symbolic dimension it has is
    // named in an input that is (dim_param "batch" in two inputs).
    bool by_dim_name = false;
    // Its symbolic axes that the model fixes (ModelInfo::fixed_axes): bound
    // for the check's second binding too.
    std::vector<int> fixed_axes;
    std::string filled;  // how the check and the timings filled it (reference_run)
  };
  std::vector<Input> inputs;
  int rules_newer = 0, rules_elsewhere = 0;  // rules left out: opset above the written model's, or not on the target
  // Static dimensions of symbolic shapes folded at import (LoadedModel::
  // static_dims): the optimised graph has them folded, the original not.
  int static_dims = 0;
};

// The branches of the model's top-level If nodes and the bodies of its
// top-level Loops, each optimised as a model of its own by this pipeline
// (its inputs a body's own and the outer values it reads), put back where
// its run wrote an optimised graph (Branches in stages.h).
struct BranchRecord {
  std::string op;               // "If" or "Loop"
  std::string node, attribute;  // the node's name; "then_branch" or "else_branch", or "body"
  int nodes_before = 0, nodes_after = 0;
  // "optimised" (put back), "unchanged" (its run wrote it as it was: nothing
  // faster), "not optimised" (`note` says why: it could not be made a
  // model, its run failed, or it could not be put back)
  std::string outcome;
  double time_limit_s = 0;  // its run's --time_limit (a share of the run's; 0: none)
  bool measured = false;    // its run's verdict measured it
  Verdict verdict;
  std::string guard;  // the guard's outcome on it ("": not guarded)
  std::string note;
};
struct BranchesRecord {
  // What was moved out of the bodies before they were optimised, kept only
  // where the model computes the same in ONNX Runtime (`hoist_error`: the
  // largest relative error of its outputs there, against the model as it
  // came) and, with the branches, is not slower there (`checks`).
  std::vector<HoistedLoop> hoisted;  // per Scan or Loop body (core/onnx_hoist.h)
  double hoist_error = 0;
  std::string hoist_note;  // why nothing moved out was kept ("": it was, or nothing could be)
  std::vector<BranchRecord> branches;
  // The model with its optimised branches against the model as it came,
  // in ONNX Runtime (the device, or the guard's runtime), once per value of
  // the bool inputs an If takes as its condition: a branch runs as a
  // subgraph there, not as the model its run measured. Where one is slower
  // (or cannot be timed), the branches are put back as they were.
  std::string check_device;  // "": not checked (`check_note` says why, if there was a reason)
  struct ModelCheck {
    std::string condition;  // e.g. "use_cache_branch=1" ("" without such inputs)
    Verdict verdict;
  };
  std::vector<ModelCheck> checks;
  std::string check_note;
  int dropped_initializers = 0;  // outer weights no branch reads any more
  std::string note;              // why the branches were not looked at ("": they were, or there are none)
  int optimised() const;
  // Whether the model differs from the input file before the search: a
  // branch optimised or products moved out of a loop.
  bool changed() const { return optimised() > 0 || !hoisted.empty(); }
};

struct ReferenceRunRecord {
  double seconds = 0;                         // one warm run of the parts the executor runs
  std::map<std::string, std::string> filled;  // how each input was filled, by name
};

struct CanonicaliseRecord {
  int lowered_batchnorm = 0;  // BatchNormalization nodes lowered to Mul/Add
  // select_rows_early changed the graph (and it fits another binding).
  bool rows_selected_early = false;
};

// One search round's own figures.
struct SearchRoundRecord : SearchWork {     // the round's own work
  int64_t applied = 0, finish_applied = 0;  // rewrites of the round's graph; of them, by the greedy finish
  double final_cost = 0;                    // its graph's estimate under that round's timings (ms)
  StopReason stop_reason = StopReason::kNone;
};

struct SearchRecord {
  // graph: the optimised graph (before the finishing passes). Its work
  // counters (graphs explored, rewrites costed, graphs built, rewrites
  // rejected, real steps) are the sums over the rounds; the rest is the kept
  // round's.
  SearchResult result;
  int rounds = 0;
  std::vector<SearchRoundRecord> per_round;  // each round's own figures, in order
  double seconds = 0;
  // The original's cost as it runs (ms, CostModel::RunCost), by the cost
  // model the search ended with.
  double before_estimate = 0;
  int64_t measurements = 0;  // graphs timed on the device by the search (its recalibration rounds included)
  // The search at the second binding too (PipelineOptions::second_binding_search).
  struct SecondBinding {
    bool on = false;
    std::string shapes;      // the symbolic inputs' shapes there ("x:[2,3,32,128]")
    std::string note;        // why it is off where it was asked for ("": on, or not asked for)
    double original_ms = 0;  // the original's canonical form's estimated cost there: the bound
    double result_ms = 0;    // the search's result's there
    double calibrate_s = 0;  // the cost model calibrated there
    // Graphs costed there (each once, again after a calibration there; over
    // the rounds and attempts), and of those estimated slower there than the original.
    int64_t judged = 0;
    int64_t refused = 0;
    int64_t not_imported = 0;  // ... of those that did not import there (counted slower)
    double slack = 0;          // PipelineOptions::second_binding_slack
  } second;
};

struct FinishRecord {
  GraphSummary before, after;  // the original; the optimised graph (written unless the verdict kept the original)
  int folded = 0;              // weight-only nodes folded into initializers
  int kept_weight_nodes = 0;   // the model's weight-only nodes kept: folded they would grow its weights
  int raised_batchnorm = 0;    // Mul/Add pairs raised back to BatchNormalization
  int64_t raised_opset = 0;    // the opset the optimised graph was raised to (0: not raised)
  int renamed_outputs = 0;     // graph outputs whose names were restored
};

struct CheckRecord {
  double max_error = 0;
  double allowed = 0;  // the relative error allowed where max_error is (AllowedError: more for half outputs)
  int outputs_compared = 0, opaque_nodes = 0;
  bool symbolic_dims = false;
  bool unchanged = false;  // the optimised graph is the original
  bool skipped = false;    // not compared: interrupted with the graph unchanged
  bool general_ok = true;  // right at another binding of the symbolic dimensions
  std::string general_note;
  // What makes the comparison weaker (an output of the original holding NaN
  // or infinity on the filled inputs: those elements compared for equality).
  std::vector<std::string> notes;
};

// The verdict (runtime/verdict.h: both graphs timed end to end, interleaved)
// and what it decided.
struct VerdictRecord : Verdict {
  int pairs = 0;
  double before_ms = 0, after_ms = 0;  // measured (ms)
  double after_estimate = 0;           // the optimised graph's cost as it runs (ms, CostModel::RunCost)
  bool keep_original = false;          // the original is written
  // Not measured: interrupted with the graph unchanged (nothing to decide;
  // the original is written as it came). before_ms and after_ms stay 0.
  bool skipped = false;
  // The time base of the cached timings as last read before the
  // measurement, where that was after the calibration: the original run
  // again against its cached timings, by a search round that timed new
  // keys, or right before the measurement where the last reading was more
  // than a few seconds old (a search ran in between: the machine's speed
  // drifts by 10-15% within a minute here). 0: not read again (the
  // calibration's stands). Where it was read right before the measurement,
  // it is read again right after it (a few runs each, either can fall in a
  // slow moment of the host): `time_base` is then the geometric mean of
  // the two readings, `time_base_before` and `time_base_after` (0: not read).
  double time_base = 0;
  double time_base_before = 0, time_base_after = 0;
  // How many times the measurement was taken (PipelineOptions::steady_ratio),
  // and each one's readings before and after it, in order (empty where the
  // time base was not read on both sides); the kept one is `kept` (0-based).
  int measurements = 0;
  std::vector<std::pair<double, double>> readings;
  int kept = 0;
  // Each measurement's DriftRatio of its runs in the order taken (a pair's
  // two runs together), in order: whether the machine's speed moved inside
  // it (1: steady, or a backend that gives only a median).
  std::vector<double> drifts;
  // Timed as model files (TimingBackend::TimePairedFiles): the input file as
  // it was given against the file the run writes, not the graphs. Where the
  // import converted the model to another form (opsets 7 to 12 and 18+,
  // ONNX's experimental operators replaced), the runtime can run the file
  // otherwise than the converted graph: coreml_experimental_op7's opset-11
  // form ran 4% slower in ONNX Runtime than its file, whose Affine and
  // ScaledTanh ORT runs as one kernel each, and a graph 1.012x faster than
  // that form was written, 0.967x [0.959, 0.974] against the file. Where the
  // backend runs files and the model came from one. `files_note`: why the
  // graphs were timed where the files were wanted ("": they were not).
  bool files = false;
  std::string files_note;
  // The guard (PipelineOptions::guard): both graphs in `guard_device` too,
  // when the verdict above found the result faster. `guarded`: measured;
  // `guard_note`: why it was not, or what failed.
  std::string guard_device;
  bool guarded = false;
  Verdict guard;
  std::string guard_note;
  bool guard_files = false;  // the guard timed the files (as `files`)
  bool guard_slower() const { return guarded && guard.outcome == Outcome::kSlower; }
  // The verdict at the check's second binding of the symbolic dimensions
  // (PipelineOptions::second_binding_verdict), when the verdict above found
  // the result faster: `second_binding` the shapes ("": none, or not asked),
  // `second_measured` whether both were timed there, `second_required`
  // whether a slower result there keeps the original, `second_note` why it
  // was not measured or what failed (measured: why the graphs were timed
  // where the files were wanted, as `files_note`).
  std::string second_binding;
  bool second_measured = false, second_required = false;
  bool second_given = false;  // by --second_input_shape
  Verdict second;
  std::string second_note;
  bool second_files = false;  // timed the files there (as `files`)
  bool second_slower() const { return second_measured && second.outcome == Outcome::kSlower; }
  // The original is kept because the result is slower at the second binding.
  bool second_vetoed() const { return second_required && second_slower(); }
};

// Each search run again without one applied rule (PipelineOptions::retries).
struct RetryRecord {
  std::string left_out;  // the rule's id
  int applied = 0;       // rewrites applied without it
  std::string outcome;   // the verdict's ("faster", ...), or "unchanged"
  double speedup = 1;    // measured (wall median)
  double seconds = 0;    // search, check and verdict
  // The guard's outcome and speedup, where it measured the retry's graph ("": not).
  std::string guard_device, guard_outcome;
  double guard_speedup = 1;
  // The verdict's outcome and speedup at the second binding, where it measured the retry's graph there ("": not).
  std::string second_outcome;
  double second_speedup = 1;
};

struct WriteRecord {
  std::string opset_note;      // why the model was written at another opset than its own ("" if it was not)
  bool external_data = false;  // weights written beside the model (<output>.data)
  // Real work (what a learned world model would save): rewrites applied to
  // real graphs by every search of the run (retries included), and graphs
  // timed on the device (CountingBackend) by the whole run.
  int64_t real_steps = 0, real_measurements = 0;
};

struct ReportRecord {
  int64_t cache_entries = 0, ops_timed = 0, cache_hits = 0;
  double peak_memory_mb = 0;
  std::string path;  // where the JSON report was written ("" if none)
};

struct PipelineResult {
  ConfigureRecord configure;
  LoadRecord load;
  BranchesRecord branches;
  ReferenceRunRecord reference_run;
  CanonicaliseRecord canonicalise;
  CalibrationReport calibrate;  // the cost model in context (the search rounds add the keys they timed)
  SearchRecord search;
  FinishRecord finish;
  CheckRecord check;
  VerdictRecord verdict;
  std::vector<RetryRecord> retries;
  WriteRecord write;
  ReportRecord report;
  // Each stage of the pipeline that ran and its seconds, in order (the
  // report stage's own time is not in the report it writes).
  std::vector<std::pair<std::string, double>> stage_seconds;
  PipelineOptions options;  // what it ran with

  // The optimised time predicted from the original's measured time and the
  // estimated speedup.
  double PredictedAfterMs() const { return verdict.before_ms * verdict.after_estimate / search.before_estimate; }
  // The time base of the cached timings at the verdict: read right before
  // it where a search ran in between, else the calibration's (1 where it is
  // unknown, e.g. a fresh cache).
  double TimeBaseNow() const { return verdict.time_base > 0 ? verdict.time_base : calibrate.time_base; }
  // An estimate (ms, in the timing cache's time base, as the search costs
  // graphs) in the machine's speed at the verdict: divided by TimeBaseNow.
  // The estimates the summary and the report compare with measured times.
  double EstimateNowMs(double estimate_ms) const { return estimate_ms / TimeBaseNow(); }
  // The human-readable summary the optimiser prints (several lines).
  std::string Summary() const;
  // The JSON report.
  std::string ReportJson() const;
};

// The passes --passes accepts (builtin and rule families of the rule
// database at `rules`, "" for the checked-in one): name and description.
std::vector<std::pair<std::string, std::string>> ListPasses(const std::string& rules, const std::string& argv0 = "");

// Runs the pipeline; throws rlflow::Error (nothing written) on bad input or
// a result that does not check.
PipelineResult RunPipeline(const PipelineOptions& options);

}  // namespace rlflow

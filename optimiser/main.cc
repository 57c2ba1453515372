// rlflow optimiser: loads an ONNX model (or a built-in zoo model), checks it,
// searches for a faster equivalent graph with the proved rules, folds
// weight-only subgraphs, verifies the result numerically against the
// original, measures both end to end, and writes ONNX (the original if the
// optimised graph is not faster) and a report.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <tuple>

#include "core/error.h"
#include "core/file_util.h"
#include "core/json.h"
#include "core/onnx_io.h"
#include "core/passes/fold_constants.h"
#include "core/passes/interface.h"
#include "core/passes/lower_batchnorm.h"
#include "core/rewrite/matcher.h"
#include "core/rules/rule.h"
#include "core/summary.h"
#include "optimiser/batchnorm_cost.h"
#include "optimiser/load.h"
#include "optimiser/search.h"
#include "runtime/cost_model.h"
#include "runtime/equivalence.h"
#include "runtime/executor.h"
#include "runtime/ort_backend.h"
#include "runtime/threads.h"
#include "runtime/verdict.h"
#include "tools/cli/cli.h"

DEFINE_string(model, "", "ONNX model to optimise, or a zoo model name (e.g. resnet50.onnx); relative paths are "
                         "resolved against the directory `bazel run` was started from");
DEFINE_string(output, "", "where to write the optimised ONNX model (default: <model>.rlflow.onnx beside the input, "
                          "or in the working directory for a zoo model)");
DEFINE_string(search, "taso", "search strategy: taso (cost-based backtracking), greedy, none");
DEFINE_int64(budget, 1000, "taso: stop after this many graphs popped from the queue");
DEFINE_double(alpha, 1.05, "taso: keep exploring graphs whose cost is below alpha x the best cost (>= 1)");
DEFINE_double(time_limit, 0, "stop the search after this many seconds and keep the best graph so far (0: none)");
DEFINE_string(device, "cpu", "where the cost model, the noise rule and the end-to-end verdict measure: cpu (rlflow's "
                             "ATen executor) or ort (ONNX Runtime's CPU provider, with its own graph optimisations at "
                             "--ort_level)");
DEFINE_string(ort_level, "all", "--device=ort: ONNX Runtime's graph optimisation level (disabled, basic, extended, "
                                "all: ORT's default)");
DEFINE_string(timing_cache, "", "persistent timing cache (default: $XDG_CACHE_HOME/rlflow or ~/.cache/rlflow/"
                                "timing-cache.txt; 'none': do not read or write one)");
DEFINE_bool(force_optimised, false, "write the optimised graph even if the end-to-end verdict is not 'faster' (the 95% "
                                    "interval of its speedup above 1.0), e.g. to benchmark it in another runtime");
DEFINE_string(report, "", "also write the report as JSON to this path");
DEFINE_int32(measure_runs, 0, "end-to-end verdict: pairs of interleaved runs of the original and the optimised graph "
                              "(0: auto, 10 to 40 pairs, about 2 s of runs per graph); fewer than 6 pairs give no 95% "
                              "interval, so the original is written unless --force_optimised");
DEFINE_uint64(seed, 1, "seed for the random check inputs and for zoo model weights");
DEFINE_int32(free_dim, 1, "value bound to symbolic dimensions of graph inputs");
DEFINE_string(dot, "", "also write the written graph as Graphviz DOT to this path");
DEFINE_double(tolerance, 1e-4, "maximum relative error allowed between original and optimised outputs");
DEFINE_int32(threads, 1, "threads of ATen's and OpenBLAS's pools for the executor and the timings (0: the libraries' defaults)");
DEFINE_string(rules, "", "rule database (default: the checked-in rules/default.rules.pb)");

namespace rlflow {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// The checked-in database ships as a runfile of this binary.
std::string DefaultRulesPath() {
  std::string p = FindRunfile("rules/default.rules.pb", gflags::GetArgv0());
  if (p.empty()) Fail("the default rule database was not found (run through ./bazelw run, or pass --rules=PATH)");
  return p;
}

std::string DefaultOutput(const LoadedModel& m) {
  if (m.from_zoo) return ResolveUserPath(m.source.substr(4) + ".rlflow.onnx");
  std::string p = m.source;
  if (p.size() > 5 && p.compare(p.size() - 5, 5, ".onnx") == 0) p.resize(p.size() - 5);
  return p + ".rlflow.onnx";
}

// "" when the timing cache is disabled.
std::string TimingCachePath() {
  if (FLAGS_timing_cache == "none") return "";
  if (!FLAGS_timing_cache.empty()) return ResolveUserPath(FLAGS_timing_cache);
  std::string dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg) dir = xdg;
  else if (const char* home = std::getenv("HOME"); home != nullptr && *home) dir = std::string(home) + "/.cache";
  else return "";
  dir += "/rlflow";
  // Best effort: a cache that cannot be created is skipped (with a warning below).
  std::string parent = dir.substr(0, dir.rfind('/'));
  ::mkdir(parent.c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  return dir + "/timing-cache.txt";
}

double PeakMemoryMb() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // Linux: kilobytes
}

void WriteSummary(JsonWriter& j, const GraphSummary& s, double estimate_ms, double measured_ms) {
  j.BeginObject();
  j.Key("nodes").Int(s.nodes);
  j.Key("op_counts").BeginObject();
  for (const auto& [op, n] : s.op_counts) j.Key(op).Int(n);
  j.EndObject();
  j.Key("parameters").Int(s.parameters);
  j.Key("flops").Number(s.flops);
  j.Key("estimated_ms").Number(estimate_ms);
  j.Key("measured_ms").Number(measured_ms);
  j.Key("estimate_error").Number((estimate_ms - measured_ms) / measured_ms);
  j.EndObject();
}

int Main() {
  if (FLAGS_model.empty()) Fail("--model is required (an ONNX file or a zoo model name such as resnet50.onnx)");
  if (FLAGS_free_dim <= 0) Fail("--free_dim must be positive, got ", FLAGS_free_dim);
  if (!(FLAGS_tolerance > 0)) Fail("--tolerance must be positive");
  if (FLAGS_threads < 0) Fail("--threads must be >= 0");
  if (FLAGS_budget < 0) Fail("--budget must be >= 0, got ", FLAGS_budget);
  if (!(FLAGS_alpha >= 1.0)) Fail("--alpha must be >= 1, got ", FLAGS_alpha);
  if (!(FLAGS_time_limit >= 0)) Fail("--time_limit must be >= 0, got ", FLAGS_time_limit);
  if (FLAGS_measure_runs < 0) Fail("--measure_runs must be >= 0, got ", FLAGS_measure_runs);
  ThreadPinning pinned = SetComputeThreads(FLAGS_threads);
  if (FLAGS_threads > 0 && !pinned.blas_pinned)
    LOG(WARNING) << "the BLAS library is not OpenBLAS: its thread count is not pinned to --threads";
  std::unique_ptr<Search> search = MakeSearch(FLAGS_search);
  if (FLAGS_device != "cpu" && FLAGS_device != "ort" && FLAGS_device != "cuda")
    Fail("unknown device '", FLAGS_device, "' (available: cpu, ort)");
  if (FLAGS_device != "ort" && !gflags::GetCommandLineFlagInfoOrDie("ort_level").is_default)
    Fail("--ort_level applies to --device=ort only");
  std::unique_ptr<TimingBackend> backend = FLAGS_device == "ort"
                                               ? MakeOrtBackend(OrtOptions{FLAGS_threads, FLAGS_ort_level})
                                               : MakeTimingBackend(FLAGS_device);
  std::string rules_path = FLAGS_rules.empty() ? DefaultRulesPath() : ResolveUserPath(FLAGS_rules);
  rules::RuleDatabase rule_db = LoadRuleDatabase(rules_path);
  LOG(INFO) << "loaded " << rule_db.rules_size() << " rules from " << rules_path;
  MeasuredCostModel cost(backend.get());
  std::string cache_path = TimingCachePath();
  if (!cache_path.empty()) {
    cost.LoadCache(cache_path);
    LOG(INFO) << "timing cache " << cache_path << ": " << cost.cache_size() << " entries";
  }
  // Fail on unwritable outputs before any long work.
  if (!FLAGS_output.empty()) CheckWritablePath(ResolveUserPath(FLAGS_output), "--output");
  if (!FLAGS_dot.empty()) CheckWritablePath(ResolveUserPath(FLAGS_dot), "--dot");
  if (!FLAGS_report.empty()) CheckWritablePath(ResolveUserPath(FLAGS_report), "--report");

  auto t0 = Clock::now();
  LoadOptions load;
  load.import.free_dim_value = FLAGS_free_dim;
  load.zoo_seed = FLAGS_seed;
  LoadedModel model = LoadModel(FLAGS_model, load);
  for (const auto& note : model.notes) LOG(INFO) << note;
  std::string output = FLAGS_output.empty() ? DefaultOutput(model) : ResolveUserPath(FLAGS_output);
  CheckWritablePath(output, "--output");
  if (!model.from_zoo && output == model.source)
    Fail("--output is the input model '", output, "'; write the optimised model elsewhere");
  if (!FLAGS_report.empty() && ResolveUserPath(FLAGS_report) == output)
    Fail("--report and --output are the same file '", output, "'");
  if (!FLAGS_dot.empty() && ResolveUserPath(FLAGS_dot) == output)
    Fail("--dot and --output are the same file '", output, "'");
  if (!FLAGS_dot.empty() && !FLAGS_report.empty() && ResolveUserPath(FLAGS_dot) == ResolveUserPath(FLAGS_report))
    Fail("--dot and --report are the same file '", ResolveUserPath(FLAGS_dot), "'");
  LOG(INFO) << "loaded " << model.source << " (" << model.graph.num_nodes() << " nodes) in " << Seconds(t0) << " s";

  const Graph& original = model.graph;
  // The parts of the model the executor can run (all of it unless it has
  // opaque nodes) run once now: a model that cannot run fails before the
  // search, and the run time sets the number of end-to-end runs.
  Graph original_cut = CutAtOpaque(original);
  double reference_s;
  {
    std::vector<at::Tensor> inputs = RandomInputs(original_cut, FLAGS_seed);
    Executor reference(original_cut);
    auto t_ref = Clock::now();
    reference.Run(inputs);
    reference_s = Seconds(t_ref);
  }

  // Canonical form for the rules: batch norm in inference form (x * S + T).
  Graph canonical = original;
  int lowered = LowerBatchNorm(canonical);
  if (lowered > 0) LOG(INFO) << "lowered " << lowered << " BatchNormalization nodes to per-channel Mul/Add";

  // The cost model is calibrated on the graphs themselves: every node timed
  // in place inside whole runs (original and canonical form), the rest
  // scaled by its op type's in-context/isolated ratio, plus the executor's
  // per-node overhead. Cached: a warm cache runs nothing here.
  CalibrationReport calibration;
  const int cal_runs = std::max(3, std::min(7, static_cast<int>(2.0 / std::max(reference_s, 1e-3))));
  {
    auto t_cal = Clock::now();
    calibration = cost.Calibrate(original_cut, cal_runs);
    if (lowered > 0) {
      CalibrationReport c = cost.Calibrate(CutAtOpaque(canonical), cal_runs);
      calibration.new_keys += c.new_keys;
      for (const auto& [op, p] : c.per_op)
        if (!calibration.per_op.count(op)) calibration.per_op[op] = p;
    }
    LOG(INFO) << "cost model calibrated in context: " << calibration.keys << " operator keys (" << calibration.new_keys
              << " timed now), per-node overhead " << calibration.overhead_ms * 1e3 << " us, in " << Seconds(t_cal)
              << " s";
  }

  std::vector<rules::Rule> rule_list(rule_db.rules().begin(), rule_db.rules().end());
  Matcher matcher(rule_list);
  SearchOptions options;
  options.seed = FLAGS_seed;
  options.budget = FLAGS_budget;
  options.alpha = FLAGS_alpha;
  options.time_limit_s = FLAGS_time_limit;
  options.matcher = &matcher;
  // Lowered batch norms the search leaves are raised back afterwards: cost them as such.
  BatchNormAwareCost search_cost(&cost);
  options.cost = &search_cost;
  options.progress = [](const std::string& line) { LOG(INFO) << line; };
  cli::InstallInterruptHandler();
  options.interrupted = &cli::interrupted;
  double before_estimate = cost.GraphCost(original);
  LOG(INFO) << "searching (" << search->name() << ") ...";
  auto t2 = Clock::now();
  SearchResult result = search->Run(canonical, options);
  // Operators the search created (a conv with a folded bias, a merged conv)
  // were costed from their isolated timings. Their graph is run and timed
  // in context, and the search repeats with those timings until it picks
  // nothing new (at most 3 rounds). With a warm cache the first round has
  // them all: runs with the same cache make the same rewrites.
  int search_rounds = 1;
  for (; search_rounds < 3 && !result.applied.empty() && result.stop_reason != "interrupted"; ++search_rounds) {
    Graph chosen = result.graph;
    FoldOptions fold;
    fold.max_elements = std::numeric_limits<int64_t>::max();
    InferShapesAndFold(chosen, fold);
    CalibrationReport c = cost.Calibrate(CutAtOpaque(chosen), cal_runs);
    if (c.new_keys == 0) break;
    calibration.new_keys += c.new_keys;
    for (const auto& [op, p] : c.per_op)
      if (!calibration.per_op.count(op)) calibration.per_op[op] = p;
    LOG(INFO) << "the chosen graph has " << c.new_keys << " operator keys never timed in context: timed them "
              << "(time base " << c.time_base << "), searching again";
    before_estimate = cost.GraphCost(original);
    int64_t resolved = result.gains_resolved, confirmed = result.gains_confirmed;
    std::vector<std::string> noise = std::move(result.noise_rule);
    result = search->Run(canonical, options);
    result.gains_resolved += resolved;
    result.gains_confirmed += confirmed;
    noise.insert(noise.end(), result.noise_rule.begin(), result.noise_rule.end());
    result.noise_rule = std::move(noise);
  }
  double search_s = Seconds(t2);
  if (result.stop_reason == "interrupted")
    LOG(WARNING) << "search interrupted: checking and writing the best graph found so far (interrupt again to abort)";
  LOG(INFO) << "search cost estimate " << result.initial_cost << " -> " << result.final_cost << " ms";
  LOG(INFO) << "search stopped (" << result.stop_reason << ") after " << search_s << " s";

  // Fold weight-only subgraphs (merged conv weights, scaled weights) into
  // initializers so that the written model does no extra work. No rewrite:
  // the original itself (not its canonical form).
  Graph optimised = result.applied.empty() ? original : std::move(result.graph);
  FoldOptions fold_all;
  fold_all.max_elements = std::numeric_limits<int64_t>::max();
  int folded = InferShapesAndFold(optimised, fold_all);
  if (folded > 0) LOG(INFO) << "folded " << folded << " weight-only nodes into initializers";
  // Batch norms the search did not fold away go back to one node each (one
  // pass over the tensor instead of Mul + Add), if the cost model agrees.
  {
    Graph raised = optimised;
    int n = RaiseBatchNorm(raised);
    if (n > 0 && cost.GraphCost(raised) < cost.GraphCost(optimised)) {
      LOG(INFO) << "raised " << n << " unfolded Mul/Add pairs back to BatchNormalization";
      optimised = std::move(raised);
    }
  }

  // The written model keeps the original's interface: input and output
  // names, types, symbolic dimensions.
  int renamed = RestoreInterface(original, optimised);
  if (renamed > 0) LOG(INFO) << "restored the names of " << renamed << " graph outputs";

  // Every optimised graph is checked against the original before it is written.
  std::string applied_list;
  for (const auto& r : result.applied) applied_list += (applied_list.empty() ? "" : ", ") + r;
  if (applied_list.empty()) applied_list = "none";
  EquivalenceResult check = CompareGraphs(original, optimised, FLAGS_seed);
  for (const auto& note : check.notes) LOG(WARNING) << note;
  double worst = check.max_error;
  if (worst > FLAGS_tolerance)
    Fail("the optimised graph differs from the original (relative error ", worst, " > ", FLAGS_tolerance,
         " at '", check.worst_output, "'); rules applied: ", applied_list, "; nothing was written");

  bool unchanged = optimised.StructuralHash() == original.StructuralHash();
  // A model with symbolic dimensions was optimised at one binding
  // (--free_dim): the written model must be right at others too. Both are
  // written, imported again at another binding, and compared.
  std::string general_note;
  bool general_ok = true;
  if (original.info().symbolic_dims && !unchanged) {
    ImportOptions other;
    other.free_dim_value = FLAGS_free_dim == 2 ? 3 : 2;
    Graph original_other;
    try {
      original_other = ImportOnnxBytes(model.bytes.empty() ? ExportOnnxBytes(original) : model.bytes, "original", other);
    } catch (const Error& e) {
      general_note = std::string("the original model does not import with its symbolic dimensions bound to ") +
                     std::to_string(other.free_dim_value) + " (" + e.what() + "); checked at --free_dim only";
    }
    if (general_note.empty()) {
      try {
        Graph optimised_other = ImportOnnxBytes(ExportOnnxBytes(optimised), "optimised", other);
        EquivalenceResult c = CompareGraphs(original_other, optimised_other, FLAGS_seed + 1);
        if (c.max_error > FLAGS_tolerance)
          Fail("relative error ", c.max_error, " at '", c.worst_output, "'");
        general_note = "also checked with symbolic dimensions bound to " + std::to_string(other.free_dim_value) +
                       " (max relative error " + std::to_string(c.max_error) + ")";
      } catch (const Error& e) {
        general_ok = false;
        general_note = std::string("the optimised graph is not right with symbolic dimensions bound to ") +
                       std::to_string(other.free_dim_value) + " (" + e.what() + "; rules applied: " + applied_list +
                       "): the original is written";
        LOG(WARNING) << general_note;
      }
    }
    LOG(INFO) << general_note;
  }

  // Measure both end to end; keep the original unless the result is
  // faster: paired interleaved runs, the speedup's 95% interval above 1.0
  // in wall and CPU time. Opaque nodes are the same in both graphs: the
  // parts around them are timed.
  Graph optimised_cut = CutAtOpaque(optimised);
  int pairs = FLAGS_measure_runs > 0
                  ? FLAGS_measure_runs
                  : std::max(10, std::min(40, static_cast<int>(2.0 / std::max(reference_s, 1e-3))));
  TimingOptions timing;
  timing.seed = FLAGS_seed;
  double before_ms, after_ms;
  Verdict verdict;
  if (unchanged) {
    LOG(INFO) << "measuring the (unchanged) graph end to end (" << pairs << " runs)";
    timing.samples = pairs;
    before_ms = after_ms = backend->TimeGraph(original_cut, timing);
  } else {
    if (pairs < MinPairsFor(0.95))
      LOG(WARNING) << "--measure_runs=" << pairs << " is too few pairs for a 95% interval (at least "
                   << MinPairsFor(0.95) << "): the verdict can only be 'within noise'";
    LOG(INFO) << "measuring original and optimised graphs end to end (" << pairs << " interleaved pairs)";
    verdict = Judge(backend->TimePaired(original_cut, optimised_cut, pairs, timing));
    before_ms = verdict.a_ms;
    after_ms = verdict.b_ms;
    LOG(INFO) << verdict.ToString();
  }
  double after_estimate = cost.GraphCost(optimised);
  bool keep_original = unchanged || !general_ok || (!FLAGS_force_optimised && !verdict.faster());
  const Graph& written = keep_original ? original : optimised;
  if (!cache_path.empty()) {
    try {
      cost.SaveCache(cache_path);
    } catch (const Error& e) {
      LOG(WARNING) << "timing cache not saved: " << e.what();
    }
  }
  // The original is written as it came: its file's bytes, unchanged.
  if (keep_original && !model.bytes.empty()) WriteFileAtomically(output, model.bytes);
  std::string opset_note;
  if (!(keep_original && !model.bytes.empty())) {
    // At the input's opset where it was upgraded for the search (11, 12):
    // the converted model is imported again and must compute the same.
    std::string bytes = ExportOnnxBytesAtSourceOpset(written, &opset_note);
    const int64_t source_opset = written.info().source_opset;
    if (opset_note.empty() && source_opset > 0 && source_opset < written.opset()) {
      try {
        Graph back = ImportOnnxBytes(bytes, "the model converted to opset " + std::to_string(source_opset), load.import);
        EquivalenceResult c = CompareGraphs(written, back, FLAGS_seed);
        if (c.max_error > FLAGS_tolerance) Fail("relative error ", c.max_error, " at '", c.worst_output, "'");
        LOG(INFO) << "converted back to opset " << source_opset << " (checked, max relative error " << c.max_error << ")";
      } catch (const Error& e) {
        opset_note = "written at opset " + std::to_string(written.opset()) + ": the model converted back to opset " +
                     std::to_string(source_opset) + " does not check (" + e.what() + ")";
        bytes = ExportOnnxBytes(written);
      }
    }
    CheckWritablePath(output, "--output");
    WriteFileAtomically(output, bytes);
  }
  if (!opset_note.empty()) LOG(WARNING) << opset_note;
  if (!FLAGS_dot.empty()) WriteFileAtomically(ResolveUserPath(FLAGS_dot), written.ToDot());

  GraphSummary before = Summarize(original), after = Summarize(optimised);
  std::map<std::string, int> rule_counts;
  for (const auto& r : result.applied) ++rule_counts[r];
  double peak_mb = PeakMemoryMb();

  std::printf("model:      %s\n", model.source.c_str());
  std::printf("rules:      %d (%s)\n", rule_db.rules_size(), rules_path.c_str());
  std::printf("search:     %s, %d round%s, %.2f s, stopped: %s; %lld graphs explored, %lld rewrites costed, %lld graphs built; "
              "%zu rewrites applied\n",
              search->name().c_str(), search_rounds, search_rounds == 1 ? "" : "s", search_s, result.stop_reason.c_str(),
              static_cast<long long>(result.graphs_explored), static_cast<long long>(result.rewrites_costed),
              static_cast<long long>(result.graphs_built), result.applied.size());
  if (result.gains_resolved > 0)
    std::printf("noise rule: %lld kinds of rewrite had an estimated gain within the timings' noise; timed against the "
                "original side, %lld were faster\n",
                static_cast<long long>(result.gains_resolved), static_cast<long long>(result.gains_confirmed));
  for (const auto& [r, n] : rule_counts) std::printf("  %3d x %s\n", n, r.c_str());
  std::printf("before:     %s", before.ToString().c_str());
  std::printf("after:      %s", after.ToString().c_str());
  std::printf("cost:       estimate %.2f -> %.2f ms (%s, %lld ops timed, %lld cache hits)\n", before_estimate,
              after_estimate, backend->name().c_str(), static_cast<long long>(cost.measurements()),
              static_cast<long long>(cost.hits()));
  if (unchanged)
    std::printf("measured:   %.2f ms (median of %d runs)\n", before_ms, pairs);
  else
    std::printf("measured:   %.2f -> %.2f ms (medians of %d interleaved pairs), %s\n", before_ms, after_ms, pairs,
                verdict.ToString().c_str());
  // The search ranks graphs by estimated cost, so what matters is the
  // estimated ratio: the optimised time predicted from the original's
  // measured time and the estimated speedup, against its measured time.
  double predicted_after_ms = before_ms * after_estimate / before_estimate;
  double predicted_error = (predicted_after_ms - after_ms) / after_ms;
  std::printf("estimate:   error %+.1f%% before, %+.1f%% after (estimate vs measured); predicted speedup %.3fx, "
              "optimised time predicted from the original's %+.1f%% off\n",
              100 * (before_estimate - before_ms) / before_ms, 100 * (after_estimate - after_ms) / after_ms,
              before_estimate / after_estimate, 100 * predicted_error);
  std::printf("check:      max relative error %.3g over %d outputs (seed %llu)%s\n", worst, check.outputs,
              static_cast<unsigned long long>(FLAGS_seed),
              check.opaque_nodes > 0 ? (", around " + std::to_string(check.opaque_nodes) + " opaque nodes").c_str()
                                     : "");
  if (!general_note.empty()) std::printf("            %s\n", general_note.c_str());
  std::printf("memory:     peak %.0f MB\n", peak_mb);
  if (unchanged)
    std::printf("written:    %s (the original model: no rewrite improved it)\n", output.c_str());
  else if (!general_ok)
    std::printf("written:    %s (the ORIGINAL model: the optimised graph is not right at other values of the "
                "symbolic dimensions)\n",
                output.c_str());
  else if (keep_original)
    std::printf("written:    %s (the ORIGINAL model: the optimised graph is %s when measured)\n", output.c_str(),
                verdict.OutcomeName().c_str());
  else if (!verdict.faster())
    std::printf("written:    %s (the optimised graph, forced: it is %s when measured)\n", output.c_str(),
                verdict.OutcomeName().c_str());
  else
    std::printf("written:    %s\n", output.c_str());

  if (!opset_note.empty()) std::printf("            %s\n", opset_note.c_str());

  if (!FLAGS_report.empty()) {
    JsonWriter j;
    j.BeginObject();
    j.Key("model").String(model.source);
    j.Key("output").String(output);
    j.Key("wrote_original").Bool(keep_original);
    j.Key("opset_note").String(opset_note);
    j.Key("unchanged").Bool(unchanged);
    j.Key("search").BeginObject();
    j.Key("strategy").String(search->name());
    j.Key("budget").Int(FLAGS_budget);
    j.Key("alpha").Number(FLAGS_alpha);
    j.Key("time_limit_s").Number(FLAGS_time_limit);
    j.Key("seed").Int(static_cast<int64_t>(FLAGS_seed));
    j.Key("time_s").Number(search_s);
    j.Key("stop_reason").String(result.stop_reason);
    j.Key("rounds").Int(search_rounds);
    j.Key("graphs_explored").Int(result.graphs_explored);
    j.Key("rewrites_costed").Int(result.rewrites_costed);
    j.Key("graphs_built").Int(result.graphs_built);
    j.Key("rewrites_rejected").Int(result.rewrites_rejected);
    j.Key("gains_within_noise").Int(result.gains_resolved);
    j.Key("gains_confirmed").Int(result.gains_confirmed);
    j.Key("noise_rule").BeginArray();
    for (const auto& line : result.noise_rule) j.String(line);
    j.EndArray();
    j.EndObject();
    j.Key("rules").BeginObject();
    j.Key("database").String(rules_path);
    j.Key("count").Int(rule_db.rules_size());
    j.Key("applied").BeginObject();
    for (const auto& [r, n] : rule_counts) j.Key(r).Int(n);
    j.EndObject();
    j.Key("sequence").BeginArray();
    for (const auto& r : result.applied) j.String(r);
    j.EndArray();
    j.EndObject();
    j.Key("device").String(backend->name());
    j.Key("threads").Int(at::get_num_threads());
    j.Key("before");
    WriteSummary(j, before, before_estimate, before_ms);
    j.Key("after");
    WriteSummary(j, after, after_estimate, after_ms);
    j.Key("speedup").Number(unchanged ? 1.0 : verdict.wall.median);
    j.Key("verdict").BeginObject();
    j.Key("outcome").String(unchanged ? "unchanged" : verdict.OutcomeName());
    j.Key("pairs").Int(unchanged ? 0 : verdict.wall.n);
    j.Key("level").Number(0.95);
    auto interval = [&](const RatioInterval& r) {
      j.BeginObject();
      j.Key("median").Number(r.median);
      j.Key("lo").Number(r.confidence > 0 ? r.lo : 0.0);
      j.Key("hi").Number(r.confidence > 0 ? r.hi : 0.0);
      j.Key("coverage").Number(r.confidence);
      j.EndObject();
    };
    j.Key("wall");
    interval(verdict.wall);
    j.Key("cpu");
    interval(verdict.cpu);
    j.Key("cpu_clock").String(verdict.cpu_clock);
    j.Key("before_cpu_ms").Number(verdict.a_cpu_ms);
    j.Key("after_cpu_ms").Number(verdict.b_cpu_ms);
    j.EndObject();
    j.Key("cost_model").BeginObject();
    j.Key("overhead_ms_per_node").Number(calibration.overhead_ms);
    j.Key("keys_calibrated").Int(calibration.keys);
    j.Key("keys_timed_now").Int(calibration.new_keys);
    j.Key("per_op").BeginObject();
    for (const auto& [op, p] : calibration.per_op) {
      j.Key(op).BeginObject();
      j.Key("nodes").Int(p.nodes);
      j.Key("ms").Number(p.ms);
      j.Key("spread").Number(p.spread);
      j.Key("context_factor").Number(p.factor);
      j.EndObject();
    }
    j.EndObject();
    j.EndObject();
    j.Key("estimated_speedup").Number(before_estimate / after_estimate);
    j.Key("predicted_after_ms").Number(predicted_after_ms);
    j.Key("predicted_after_error").Number(predicted_error);
    j.Key("check").BeginObject();
    j.Key("max_relative_error").Number(worst);
    j.Key("outputs_compared").Int(check.outputs);
    j.Key("opaque_nodes").Int(check.opaque_nodes);
    j.Key("symbolic_dims").Bool(original.info().symbolic_dims);
    j.Key("general").Bool(general_ok);
    j.Key("tolerance").Number(FLAGS_tolerance);
    j.EndObject();
    j.Key("timing_cache").BeginObject();
    j.Key("path").String(cache_path);
    j.Key("entries").Int(static_cast<int64_t>(cost.cache_size()));
    j.Key("ops_timed").Int(cost.measurements());
    j.Key("hits").Int(cost.hits());
    j.EndObject();
    j.Key("peak_memory_mb").Number(peak_mb);
    j.EndObject();
    WriteFileAtomically(ResolveUserPath(FLAGS_report), j.Finish());
    std::printf("report:     %s\n", ResolveUserPath(FLAGS_report).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv,
                           "rlflow optimiser: ./bazelw run //optimiser -- --model=resnet50.onnx [--output=PATH]",
                           rlflow::Main);
}

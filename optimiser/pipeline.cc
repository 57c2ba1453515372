#include "optimiser/pipeline.h"

#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/op_registry.h"
#include "core/passes/fold_constants.h"
#include "core/passes/interface.h"
#include "core/passes/lower_batchnorm.h"
#include "core/passes/pass.h"
#include "core/rewrite/matcher.h"
#include "core/rules/rule.h"
#include "optimiser/picture.h"
#include "runtime/equivalence.h"
#include "runtime/executor.h"
#include "runtime/ort_backend.h"
#include "runtime/threads.h"
#include "search/canonical.h"
#include "search/rule_passes.h"
#include "zoo/load.h"

namespace rlflow {
namespace {

WriteOptions AtGraphOpset() {
  WriteOptions w;
  w.at_graph_opset = true;
  return w;
}

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// The checked-in database ships as a runfile of the binary.
std::string DefaultRulesPath(const std::string& argv0) {
  std::string p = FindRunfile("rules/default.rules.pb", argv0);
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
std::string TimingCachePath(const std::string& flag) {
  if (flag == "none") return "";
  if (!flag.empty()) return ResolveUserPath(flag);
  std::string dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg)
    dir = xdg;
  else if (const char* home = std::getenv("HOME"); home != nullptr && *home)
    dir = std::string(home) + "/.cache";
  else
    return "";
  dir += "/rlflow";
  // Best effort: a cache that cannot be created is skipped (with a warning).
  std::string parent = dir.substr(0, dir.rfind('/'));
  ::mkdir(parent.c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  return dir + "/timing-cache.txt";
}

// Keys in the order written: the report reads top-down.
using Json = nlohmann::ordered_json;

double PeakMemoryMb() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // Linux: kilobytes
}

Json SummaryJson(const GraphSummary& s, double estimate_ms, double measured_ms) {
  Json op_counts = Json::object();
  for (const auto& [op, n] : s.op_counts) op_counts[op] = n;
  return Json{{"nodes", s.nodes},
              {"op_counts", op_counts},
              {"parameters", s.parameters},
              {"flops", s.flops},
              {"estimated_ms", estimate_ms},
              {"measured_ms", measured_ms},
              {"estimate_error", (estimate_ms - measured_ms) / measured_ms}};
}

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

// "batch=2, images:[2,3,320,320]": the free value and the given shapes.
std::string BindingText(const ImportOptions& o) {
  std::string out = "free dimensions=" + std::to_string(o.free_dim_value);
  for (const auto& [name, shape] : o.input_shapes) out += ", " + name + ":" + ShapeToString(shape);
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ListPasses(const std::string& rules, const std::string& argv0) {
  std::string path = rules.empty() ? DefaultRulesPath(argv0) : ResolveUserPath(rules);
  rules::RuleDatabase db = LoadRuleDatabase(path);
  Matcher matcher(std::vector<rules::Rule>(db.rules().begin(), db.rules().end()));
  AnalyticalCostModel cost;
  std::vector<std::pair<std::string, std::string>> out;
  PassRegistry registry = PassesWithRuleFamilies(matcher, &cost);
  for (const PassInfo& p : registry.passes()) out.push_back({p.name, p.description});
  return out;
}

namespace {

// One optimise run, passed from stage to stage: what the stages before
// made that the stages after use.
struct OptimiseRun {
  OptimiseRun(const PipelineOptions& options, PipelineResult& result) : o(options), res(result) {}
  const PipelineOptions& o;
  PipelineResult& res;
  std::function<void(const std::string&)> info, warn;  // log lines (PipelineOptions::log)
  // configure
  std::unique_ptr<Search> search;
  const BackendInfo* device = nullptr;
  std::unique_ptr<TimingBackend> backend;
  rules::RuleDatabase rule_db;
  std::vector<rules::Rule> rule_list;
  SearchOptions search_options;              // resolved: the search's settings checked
  std::unique_ptr<CountingBackend> counted;  // counts every graph timed on the device
  std::unique_ptr<MeasuredCostModel> cost;   // on `counted`
  // load
  LoadedModel model;          // model.graph: the original
  std::vector<char> enabled;  // the rules the written model may use (opset, target)
  std::string output;
  // reference_run, canonicalise, calibrate
  Graph original_cut;  // the parts the executor runs
  double reference_s = 0;
  int lowered = 0;
  Graph canonical;
  int cal_runs = 0;
  std::unique_ptr<Runner> runner;  // the search phase's one deadline, interrupt and progress
  // one attempt (search, finish, check, verdict): its rules and verdict level
  std::vector<char> mask;
  double level = 0.95;
  Graph optimised;
  int64_t real_steps = 0;  // every attempt's
};

// Checks the options, pins the thread pools, and makes the search, the timing
// backend, the rules and the cost model (with its timing cache); fails on
// unwritable outputs before any long work.
void Configure(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  PipelineResult& res = r.res;
  const auto& info = r.info;
  const auto& warn = r.warn;
  std::unique_ptr<Search>& search = r.search;
  std::unique_ptr<TimingBackend>& backend = r.backend;
  rules::RuleDatabase& rule_db = r.rule_db;
  std::vector<rules::Rule>& rule_list = r.rule_list;
  SearchOptions& search_options = r.search_options;
  if (o.model.empty()) Fail("--model is required (an ONNX file or a zoo model name such as resnet50.onnx)");
  if (o.free_dim <= 0) Fail("--free_dim must be positive, got ", o.free_dim);
  if (!(o.tolerance > 0)) Fail("--tolerance must be positive");
  if (o.threads < 0) Fail("--threads must be >= 0");
  if (o.budget < 0) Fail("--budget must be >= 0, got ", o.budget);
  if (!(o.time_limit_s >= 0)) Fail("--time_limit must be >= 0, got ", o.time_limit_s);
  if (o.measure_runs < 0) Fail("--measure_runs must be >= 0, got ", o.measure_runs);
  if (o.retries < -1) Fail("--retries must be >= 0 (or -1: auto), got ", o.retries);
  ThreadPinning pinned = SetComputeThreads(o.threads);
  SetSteadyAllocation();
  if (o.threads > 0 && !pinned.blas_pinned)
    warn("the BLAS library is not OpenBLAS: its thread count is not pinned to --threads");
  search = MakeSearch(o.search);
  // --device is read here only: the backend's registration says what it
  // takes and which runtime the written model is for.
  r.device = &FindTimingBackend(o.device);
  const BackendInfo& device = *r.device;
  BackendOptions backend_options;
  backend_options.threads = o.threads;
  if (!o.ort_level.empty()) backend_options.settings["ort_level"] = o.ort_level;
  for (const auto& [setting, value] : backend_options.settings)
    if (std::find(device.settings.begin(), device.settings.end(), setting) == device.settings.end())
      Fail("--", setting, " does not apply to --device=", o.device);
  res.target = o.target.empty() ? device.target : o.target;
  {
    const std::vector<std::string>& known = KnownTargets();
    if (std::find(known.begin(), known.end(), res.target) == known.end())
      Fail("--target: unknown target '", res.target, "' (known: onnx, ort)");
  }
  backend = o.make_backend ? o.make_backend() : MakeTimingBackend(o.device, backend_options);
  res.rules_path = o.rules.empty() ? DefaultRulesPath(o.argv0) : ResolveUserPath(o.rules);
  rule_db = LoadRuleDatabase(res.rules_path);
  res.rule_count = rule_db.rules_size();
  info("loaded " + std::to_string(rule_db.rules_size()) + " rules from " + res.rules_path);
  rule_list.assign(rule_db.rules().begin(), rule_db.rules().end());
  // The search's settings are its own: checked now (with the rules, which
  // name the rule-family passes), before any long work.
  search_options.seed = o.seed;
  search_options.budget = o.budget;
  search_options.greedy_finish = o.greedy_finish;
  search_options.params = o.search_params;
  for (const SearchParam& p : search->Params())
    if (p.path && search_options.params.Has(p.name) && !search_options.params.Text(p.name).empty())
      search_options.params.Set(p.name, ResolveUserPath(search_options.params.Text(p.name)));
  {
    Matcher all_rules(rule_list, /*both_directions=*/true);
    search_options.matcher = &all_rules;
    search_options = search->Resolve(search_options);
    search_options.matcher = nullptr;
  }
  res.search_params = search_options.params.values();
  // Every graph timed on the device is counted (the report's real work).
  r.counted = std::make_unique<CountingBackend>(backend.get());
  r.cost = std::make_unique<MeasuredCostModel>(r.counted.get());
  MeasuredCostModel& cost = *r.cost;
  res.timing_cache = TimingCachePath(o.timing_cache);
  if (!res.timing_cache.empty()) {
    cost.LoadCache(res.timing_cache);
    info("timing cache " + res.timing_cache + ": " + std::to_string(cost.cache_size()) + " entries");
  }
  // Fail on unwritable outputs before any long work.
  if (!o.output.empty()) CheckWritablePath(ResolveUserPath(o.output), "--output");
  if (!o.dot.empty()) CheckWritablePath(ResolveUserPath(o.dot), "--dot");
  if (!o.picture.empty()) {
    CheckWritablePath(ResolveUserPath(o.picture), "--picture");
    for (const std::string* other : {&o.dot, &o.report})
      if (!other->empty() && ResolveUserPath(*other) == ResolveUserPath(o.picture))
        Fail("--picture and another output are the same file '", ResolveUserPath(o.picture), "'");
  }
  if (!o.report.empty()) CheckWritablePath(ResolveUserPath(o.report), "--report");
}

// Loads the model (or builds the zoo model) at the given shapes and data, and
// chooses the rules the written model may use (opset, target).
void Load(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  PipelineResult& res = r.res;
  const auto& info = r.info;
  const BackendInfo& device = *r.device;
  rules::RuleDatabase& rule_db = r.rule_db;
  LoadedModel& model = r.model;
  std::vector<char>& enabled = r.enabled;
  std::string& output = r.output;
  auto t0 = Clock::now();
  LoadOptions load;
  load.import.free_dim_value = o.free_dim;
  load.import.input_shapes = o.input_shapes;
  // Outputs of control flow that ONNX cannot type: one run in ONNX Runtime.
  load.import.type_oracle = [seed = o.seed](const std::string& bytes, const std::vector<std::string>& names) {
    return OrtTensorTypes(bytes, names, seed);
  };
  load.zoo_seed = o.seed;
  // --input_data: read first (a bad file fails fast); an input given data
  // and no --input_shape is bound to the data's shape.
  std::map<std::string, TensorDataPtr> input_data;
  for (const auto& [name, file] : o.input_data) {
    TensorDataPtr data;
    try {
      data = std::make_shared<const TensorData>(ReadTensorFile(ResolveUserPath(file)));
    } catch (const Error& e) {
      Fail("--input_data for input '", name, "': ", e.what());
    }
    input_data[name] = data;
    load.import.input_shapes.emplace(name, data->shape());
  }
  model = LoadModel(o.model, load);
  for (const auto& [name, data] : input_data) {
    ValueId v = model.graph.FindValue(name);
    if (v == kNoValue || !model.graph.value(v).is_graph_input)
      Fail("--input_data names '", name, "', which is not a graph input of the model");
    Value& in = model.graph.mutable_value(v);
    if (!(data->type() == in.type))
      Fail("--input_data for input '", name, "': the file holds ", data->type().ToString(), ", the input is ",
           in.type.ToString(), " (declared ", DeclaredTypeText(model.graph, name), ")");
    in.sample_data = data;
  }
  res.model_source = model.source;
  for (const auto& note : model.notes) info(note);
  // Rules that would produce an operator newer than the opset the written
  // model may have, or one the target runtime lacks, are left out (kept in
  // the list, never matched: rule numbers stay the database's).
  enabled.assign(rule_db.rules_size(), 1);
  {
    const int64_t model_opset =
        model.graph.info().source_opset > 0 ? model.graph.info().source_opset : model.graph.opset();
    const int64_t target_opset = o.target_opset > 0 ? o.target_opset : device.newest_opset ? kMaxOpset : model_opset;
    if (o.target_opset != 0 && (o.target_opset < model_opset || o.target_opset > kMaxOpset))
      Fail("--target_opset=", o.target_opset, " is outside ", model_opset, " (the model's opset) to ", kMaxOpset);
    int newer = 0, elsewhere = 0;
    for (int k = 0; k < rule_db.rules_size(); ++k) {
      const rules::Rule& r = rule_db.rules(k);
      if (RuleOpset(r) > target_opset) {
        enabled[k] = 0;
        ++newer;
      } else if (!RuleRunsOn(r, res.target)) {
        enabled[k] = 0;
        ++elsewhere;
      }
    }
    if (newer > 0)
      info(Format("%d rules need an opset above %lld (the written model's): not used", newer,
                  static_cast<long long>(target_opset)));
    if (elsewhere > 0)
      info(Format("%d rules produce operators that --target=%s does not run: not used", elsewhere, res.target.c_str()));
  }
  output = o.output.empty() ? DefaultOutput(model) : ResolveUserPath(o.output);
  res.output = output;
  CheckWritablePath(output, "--output");
  if (!model.from_zoo && output == model.source)
    Fail("--output is the input model '", output, "'; write the optimised model elsewhere");
  if (!o.report.empty() && ResolveUserPath(o.report) == output)
    Fail("--report and --output are the same file '", output, "'");
  if (!o.dot.empty() && ResolveUserPath(o.dot) == output) Fail("--dot and --output are the same file '", output, "'");
  if (!o.dot.empty() && !o.report.empty() && ResolveUserPath(o.dot) == ResolveUserPath(o.report))
    Fail("--dot and --report are the same file '", ResolveUserPath(o.dot), "'");
  info("loaded " + model.source + " (" + std::to_string(model.graph.num_nodes()) + " nodes) in " +
       Format("%g", Seconds(t0)) + " s");
  for (ValueId in : model.graph.inputs()) {
    const Value& v = model.graph.value(in);
    PipelineResult::InputRecord r;
    r.name = v.name;
    r.declared = DeclaredTypeText(model.graph, v.name);
    r.used = v.type.shape;
    r.given = o.input_shapes.count(v.name) > 0 || o.input_data.count(v.name) > 0;
    res.inputs.push_back(r);
  }
}

// Runs the parts of the model the executor can run, once: a model that cannot
// run fails before the search, and the run time sets the number of timed runs.
void ReferenceRun(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  PipelineResult& res = r.res;
  const auto& info = r.info;
  LoadedModel& model = r.model;
  Graph& original_cut = r.original_cut;
  double& reference_s = r.reference_s;
  const Graph& original = model.graph;
  // The parts of the model the executor can run (all of it unless it has
  // opaque nodes) run once now: a model that cannot run fails before the
  // search, and the run time sets the number of end-to-end runs.
  original_cut = CutAtOpaque(original);
  {
    std::vector<std::string> how;
    std::vector<at::Tensor> inputs = RandomInputs(original_cut, o.seed, &how);
    for (auto& r : res.inputs)
      for (size_t k = 0; k < original_cut.inputs().size(); ++k)
        if (original_cut.value(original_cut.inputs()[k]).name == r.name) r.filled = how[k];
    for (const auto& r : res.inputs) info("input '" + r.name + "' filled: " + r.filled);
    Executor reference(original_cut);
    auto t_ref = Clock::now();
    try {
      reference.Run(inputs);
    } catch (const Error& e) {
      std::string filled;
      for (const auto& r : res.inputs)
        if (!IsFloatingPoint(original.value(original.FindValue(r.name)).type.dtype) && r.filled.rfind("given", 0) != 0)
          filled += (filled.empty() ? "" : ", ") + r.name;
      if (filled.empty()) throw;
      Fail(e.what(), " (on the filled values of input", filled.find(',') == std::string::npos ? " " : "s ", filled,
           "; give real ones with --input_data=NAME:FILE)");
    }
    reference_s = Seconds(t_ref);
    // The first run is cold (allocations, first calls): a warm one says
    // more about how long the timings below will take (unless it is slow).
    if (reference_s < 1.0) {
      auto t_warm = Clock::now();
      reference.Run(inputs);
      reference_s = std::min(reference_s, Seconds(t_warm));
    }
  }
}

// The canonical form the rules are stated in (batch norm lowered).
void Canonicalise(OptimiseRun& r) {
  const auto& info = r.info;
  const Graph& original = r.model.graph;
  int& lowered = r.lowered;
  Graph& canonical = r.canonical;
  // Canonical form for the rules: batch norm in inference form (x * S + T).
  canonical = CanonicalForm(original, &lowered);
  if (lowered > 0) info("lowered " + std::to_string(lowered) + " BatchNormalization nodes to per-channel Mul/Add");
}

// Calibrates the cost model in context, and starts the runner that owns the
// search phase's deadline.
void Calibrate(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  PipelineResult& res = r.res;
  const auto& info = r.info;
  MeasuredCostModel& cost = *r.cost;
  Graph& original_cut = r.original_cut;
  double& reference_s = r.reference_s;
  int& lowered = r.lowered;
  Graph& canonical = r.canonical;
  int& cal_runs = r.cal_runs;
  // The cost model is calibrated on the graphs themselves: every node timed
  // in place inside whole runs (original and canonical form), the rest
  // scaled by its op type's in-context/isolated ratio, plus the executor's
  // per-node overhead. Cached: a warm cache runs nothing here.
  CalibrationReport& calibration = res.calibration;
  // About 1 s of runs (at least 3): small models run up to 2000 times, their
  // node times are microseconds and noisier.
  cal_runs = std::max(3, std::min(2000, static_cast<int>(1.0 / std::max(reference_s, 1e-4))));
  {
    auto t_cal = Clock::now();
    // ONNX Runtime's in-context times belong to this model (its fusions):
    // kept apart from other models' in the timing cache.
    cost.SetContext(original_cut);
    calibration = cost.Calibrate(original_cut, cal_runs);
    if (lowered > 0) {
      CalibrationReport c = cost.Calibrate(CutAtOpaque(canonical), cal_runs);
      calibration.new_keys += c.new_keys;
      for (const auto& [op, p] : c.per_op)
        if (!calibration.per_op.count(op)) calibration.per_op[op] = p;
    }
    info(
        Format("cost model calibrated in context: %d operator keys (%d timed now), run %g ms, per-node overhead %g us, "
               "per-run cost %g us, in %g s",
               calibration.keys, calibration.new_keys, calibration.run_ms, calibration.overhead_ms * 1e3,
               calibration.fixed_ms * 1e3, Seconds(t_cal)));
  }
  // One owner of the search's limits for the whole run: every attempt (the
  // first, its rounds, its greedy finish, the retries after a slower
  // verdict) runs against the same deadline, so --time_limit bounds the
  // search phase as a whole, for every --search alike. The checks, the
  // verdict and the write that follow are not cut short: they are what
  // makes the result safe to write.
  RunnerLimits limits;
  limits.time_limit_s = o.time_limit_s;
  limits.interrupted = o.interrupted;
  r.runner = std::make_unique<Runner>(limits, r.info);
  r.mask = r.enabled;
  r.level = 0.95;
}

// The search with the rules r.mask enables, in rounds until it picks no
// operator left untimed.
void SearchRounds(OptimiseRun& r) {
  PipelineResult& res = r.res;
  const auto& info = r.info;
  const auto& warn = r.warn;
  std::unique_ptr<Search>& search = r.search;
  std::vector<rules::Rule>& rule_list = r.rule_list;
  SearchOptions& search_options = r.search_options;
  CountingBackend& counted = *r.counted;
  MeasuredCostModel& cost = *r.cost;
  const Graph& original = r.model.graph;
  Graph& canonical = r.canonical;
  int& cal_runs = r.cal_runs;
  int64_t& real_steps = r.real_steps;
  Runner& runner = *r.runner;
  const std::vector<char>& mask = r.mask;
  Matcher matcher(rule_list, /*both_directions=*/true, mask);
  SearchOptions options = search_options;
  options.matcher = &matcher;
  // Lowered batch norms the search leaves are raised back afterwards: cost them as such.
  BatchNormAwareCost search_cost(&cost);
  options.cost = &search_cost;
  options.runner = &runner;
  res.search = search->name();
  res.before_estimate = cost.GraphCost(original);
  info("searching (" + search->name() + ") ...");
  auto t2 = Clock::now();
  const int64_t measured_before_search = counted.measurements();
  SearchResult& result = res.result;
  result = search->Run(canonical, options);
  // Operators the search created (a conv with a folded bias, a merged conv)
  // were costed from their isolated timings. Their graph is run and timed
  // in context, and the search repeats with those timings until it picks
  // nothing new (at most 3 rounds). With a warm cache the first round has
  // them all: runs with the same cache make the same rewrites.
  CalibrationReport& calibration = res.calibration;
  int& search_rounds = res.search_rounds;
  search_rounds = 1;
  for (; search_rounds < 3 && !result.applied.empty() && !runner.ShouldStop(); ++search_rounds) {
    Graph chosen = result.graph;
    FoldOptions fold;
    fold.max_elements = std::numeric_limits<int64_t>::max();
    InferShapesAndFold(chosen, fold);
    CalibrationReport c = cost.Calibrate(CutAtOpaque(chosen), cal_runs);
    if (c.new_keys == 0) break;
    calibration.new_keys += c.new_keys;
    for (const auto& [op, p] : c.per_op)
      if (!calibration.per_op.count(op)) calibration.per_op[op] = p;
    info(
        Format("the chosen graph has %d operator keys never timed in context: timed them (time base %g), searching "
               "again",
               c.new_keys, c.time_base));
    res.before_estimate = cost.GraphCost(original);
    int64_t resolved = result.gains_resolved, confirmed = result.gains_confirmed;
    std::vector<std::string> noise = std::move(result.noise_rule);
    SearchResult previous = std::move(result);
    result = search->Run(canonical, options);
    // The deadline is the run's, not the round's: a round it cut short may
    // have got less far than the round before. Keep the better of the two
    // under the new timings (the verdict measures whichever is kept).
    if (IsRunnerStop(result.stop_reason) && !previous.applied.empty() &&
        search_cost.GraphCost(previous.graph) < result.final_cost) {
      info(Format("round %d was stopped (%s) before it reached round %d's graph: keeping that graph", search_rounds + 1,
                  StopReasonName(result.stop_reason), search_rounds));
      // The kept round's own counters (the report's search figures are one
      // search's); the stop reason is the deadline's.
      previous.stop_reason = result.stop_reason;
      previous.final_cost = search_cost.GraphCost(previous.graph);
      previous.initial_cost = result.initial_cost;
      previous.gains_resolved = result.gains_resolved;
      previous.gains_confirmed = result.gains_confirmed;
      previous.noise_rule = std::move(result.noise_rule);
      result = std::move(previous);
    }
    result.gains_resolved += resolved;
    result.gains_confirmed += confirmed;
    noise.insert(noise.end(), result.noise_rule.begin(), result.noise_rule.end());
    result.noise_rule = std::move(noise);
  }
  res.search_s = Seconds(t2);
  res.search_measurements = counted.measurements() - measured_before_search;
  real_steps += result.real_steps;
  if (result.stop_reason == StopReason::kInterrupted)
    warn("search interrupted: checking and writing the best graph found so far (interrupt again to abort)");
  info(Format("search cost estimate %g -> %g ms", result.initial_cost, result.final_cost));
  info(Format("search stopped (%s) after %g s", StopReasonName(result.stop_reason), res.search_s));
}

// The finishing passes, the opset the result needs, the target check and the
// original's interface.
void Finish(OptimiseRun& r) {
  PipelineResult& res = r.res;
  const auto& info = r.info;
  MeasuredCostModel& cost = *r.cost;
  const Graph& original = r.model.graph;
  Graph& optimised = r.optimised;
  SearchResult& result = r.res.result;
  // Fold weight-only subgraphs (merged conv weights, scaled weights) into
  // initializers so that the written model does no extra work. No rewrite:
  // the original itself (not its canonical form).
  // The finishing passes (FinishPasses(): fold_constants, raise_batchnorm):
  // batch norms the search did not fold away go back to one node each (one
  // pass over the tensor instead of Mul + Add) only if the cost model agrees.
  optimised = result.applied.empty() ? original : result.graph;
  for (const std::string& name : FinishPasses()) {
    Graph next = optimised;
    const int nodes = optimised.num_nodes();
    if (!PassRegistry::Builtin().Make(name)->Run(next)) continue;
    if (name == "raise_batchnorm") {
      if (!(cost.GraphCost(next) < cost.GraphCost(optimised))) continue;
      info("raised " + std::to_string(nodes - next.num_nodes()) + " unfolded Mul/Add pairs back to BatchNormalization");
    } else if (name == "fold_constants") {
      info("folded " + std::to_string(nodes - next.num_nodes()) + " weight-only nodes into initializers");
    }
    optimised = std::move(next);
  }

  // A rewrite that introduced a newer operator (HardSwish, opset 14) needs
  // the model written at that opset (within --target_opset, see above).
  if (const int64_t needed = OpsetNeeded(optimised); needed > optimised.opset()) {
    optimised.info().opsets[""] = needed;
    optimised.info().source_opset = std::max<int64_t>(optimised.info().source_opset, needed);
    res.raised_opset = needed;
    info("the optimised graph uses operators of opset " + std::to_string(needed) + ": it is written at that opset");
  }

  // No target receives an operator it cannot run: the rules that produce
  // one were left out above; this holds the line for every other path.
  {
    std::set<std::string> had;
    for (NodeId id = 0; id < original.num_nodes(); ++id)
      had.insert(QualifiedOp(original.node(id).domain, original.node(id).op));
    for (NodeId id = 0; id < optimised.num_nodes(); ++id) {
      const Node& n = optimised.node(id);
      const OpDef* def = n.opaque() ? nullptr : OpRegistry::Global().Find(n.domain, n.op);
      if (def != nullptr && !def->RunsOn(res.target) && !had.count(QualifiedOp(n.domain, n.op)))
        Fail("internal error: the optimised graph has a ", QualifiedOp(n.domain, n.op),
             " node, which --target=", res.target, " does not run");
    }
  }

  // The written model keeps the original's interface: input and output
  // names, types, symbolic dimensions.
  int renamed = RestoreInterface(original, optimised);
  if (renamed > 0) info("restored the names of " + std::to_string(renamed) + " graph outputs");
}

// The numerical check against the original (also at a second binding of
// symbolic dimensions).
void Check(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  PipelineResult& res = r.res;
  const auto& info = r.info;
  const auto& warn = r.warn;
  LoadedModel& model = r.model;
  const Graph& original = r.model.graph;
  Graph& optimised = r.optimised;
  SearchResult& result = r.res.result;
  // Every optimised graph is checked against the original before it is written.
  std::string applied_list;
  for (const auto& r : result.applied) applied_list += (applied_list.empty() ? "" : ", ") + r;
  if (applied_list.empty()) applied_list = "none";
  EquivalenceResult check = CompareGraphs(original, optimised, o.seed);
  for (const auto& note : check.notes) warn(note);
  res.max_error = check.max_error;
  res.outputs_compared = check.outputs;
  res.opaque_nodes = check.opaque_nodes;
  res.symbolic_dims = original.info().symbolic_dims;
  if (check.max_error > o.tolerance)
    Fail("the optimised graph differs from the original (relative error ", check.max_error, " > ", o.tolerance, " at '",
         check.worst_output, "'); rules applied: ", applied_list, "; nothing was written");

  res.unchanged = optimised.StructuralHash() == original.StructuralHash();
  // A model with symbolic dimensions was optimised at one binding
  // (--free_dim): the written model must be right at others too. Both are
  // written, imported again at another binding, and compared.
  if (original.info().symbolic_dims && !res.unchanged) {
    ImportOptions other = SecondBinding(original, model.import);
    Graph original_other;
    try {
      original_other = model.bytes.empty() ? ReimportGraph(original, "original", other, AtGraphOpset())
                                           : ImportOnnxBytes(model.bytes, "original", other);
    } catch (const Error& e) {
      res.general_note =
          std::string("the original model does not import at a second binding of its symbolic dimensions (") +
          BindingText(other) + ": " + e.what() + "); checked at the first binding only";
    }
    if (res.general_note.empty()) {
      try {
        Graph optimised_other = ReimportGraph(optimised, "optimised", other, AtGraphOpset());
        EquivalenceResult c = CompareGraphs(original_other, optimised_other, o.seed + 1);
        if (c.max_error > o.tolerance) Fail("relative error ", c.max_error, " at '", c.worst_output, "'");
        res.general_note = "also checked with symbolic dimensions bound to " + BindingText(other) +
                           " (max relative error " + std::to_string(c.max_error) + ")";
      } catch (const Error& e) {
        res.general_ok = false;
        res.general_note = std::string("the optimised graph is not right with symbolic dimensions bound to ") +
                           BindingText(other) + " (" + e.what() + "; rules applied: " + applied_list +
                           "): the original is written";
        warn(res.general_note);
      }
    }
    info(res.general_note);
  }
}

// Both graphs measured end to end, interleaved: the verdict (its interval at
// r.level).
void Measure(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  PipelineResult& res = r.res;
  const auto& info = r.info;
  const auto& warn = r.warn;
  CountingBackend& counted = *r.counted;
  MeasuredCostModel& cost = *r.cost;
  Graph& original_cut = r.original_cut;
  double& reference_s = r.reference_s;
  Graph& optimised = r.optimised;
  const double level = r.level;
  // Measure both end to end; keep the original unless the result is
  // faster: paired interleaved runs, the speedup's 95% interval above 1.0
  // in wall and CPU time. Opaque nodes are the same in both graphs: the
  // parts around them are timed.
  Graph optimised_cut = CutAtOpaque(optimised);
  res.pairs = o.measure_runs > 0 ? o.measure_runs
                                 : std::max(10, std::min(40, static_cast<int>(2.0 / std::max(reference_s, 1e-3))));
  TimingOptions timing;
  timing.seed = o.seed;
  // Each sample repeats a small graph so that the pairs span about 2 s:
  // 40 pairs of a 0.5 ms model would otherwise be a 40 ms snapshot of a
  // machine whose speed moves from second to second.
  timing.min_sample_ms = std::max(timing.min_sample_ms, 1000.0 / res.pairs);
  if (res.unchanged) {
    info("measuring the (unchanged) graph end to end (" + std::to_string(res.pairs) + " runs)");
    timing.samples = res.pairs;
    res.before_ms = res.after_ms = counted.TimeGraph(original_cut, timing);
  } else {
    if (res.pairs < MinPairsFor(level))
      warn("--measure_runs=" + std::to_string(res.pairs) + " is too few pairs for a " + Format("%g", level * 100) +
           "% interval (at least " + std::to_string(MinPairsFor(level)) + "): the verdict can only be 'within noise'");
    info("measuring original and optimised graphs end to end (" + std::to_string(res.pairs) + " interleaved pairs)");
    res.verdict = Judge(counted.TimePaired(original_cut, optimised_cut, res.pairs, timing), level);
    res.before_ms = res.verdict.a_ms;
    res.after_ms = res.verdict.b_ms;
    info(res.verdict.ToString());
  }
  res.after_estimate = cost.GraphCost(optimised);
  res.keep_original = res.unchanged || !res.general_ok || (!o.force_optimised && !res.verdict.faster());
}

// One attempt: the search with the rules `mask` enables, the finishing
// passes, the check against the original and the verdict (its interval at
// `level`), into r.res and r.optimised.
void Attempt(OptimiseRun& r, const std::vector<char>& mask, double level) {
  r.mask = mask;
  r.level = level;
  SearchRounds(r);
  Finish(r);
  Check(r);
  Measure(r);
}

// Searches again without one applied rule at a time when the verdict does not
// find the graph faster.
void Retries(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  PipelineResult& res = r.res;
  const auto& info = r.info;
  std::unique_ptr<TimingBackend>& backend = r.backend;
  rules::RuleDatabase& rule_db = r.rule_db;
  std::vector<char>& enabled = r.enabled;
  Graph& optimised = r.optimised;
  Runner& runner = *r.runner;
  // A rewrite can look like a gain to the per-node costs and lose in the
  // runtime: ONNX Runtime fuses patterns (a transpose and a scale into its
  // FusedMatMul) that one rewrite breaks while the others pay. When the
  // verdict does not find the graph faster and its rewrites come from more
  // than one rule, the search runs again leaving out one applied rule at a
  // time (the least applied first), at most --retries times; the first
  // graph found faster is kept. Each retry's verdict is at level 1 - 0.05/N
  // (N retries), so that the retries together are held to 95%.
  const int retries = o.retries >= 0 ? o.retries : backend->context_sensitive() ? 2 : 0;
  if (retries > 0 && !res.unchanged && res.general_ok && !res.verdict.faster() && !o.force_optimised &&
      !runner.ShouldStop()) {
    std::vector<std::pair<int, std::string>> by_count;  // (applications, rule id), first applied first
    for (const std::string& name : res.result.applied) {
      const std::string id = name.substr(0, name.find(' '));
      auto it = std::find_if(by_count.begin(), by_count.end(), [&](const auto& p) { return p.second == id; });
      if (it == by_count.end())
        by_count.push_back({1, id});
      else
        ++it->first;
    }
    std::stable_sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const int tries = std::min<int>(retries, static_cast<int>(by_count.size()));
    const double level = 1.0 - 0.05 / std::max(tries, 1);
    // Too few pairs for that level: a retry could only be 'within noise'.
    if (by_count.size() >= 2 && res.pairs >= MinPairsFor(level)) {
      std::vector<PipelineResult::Retry> retries;
      for (int t = 0; t < tries; ++t) {
        if (runner.ShouldStop()) break;
        const auto& [count, id] = by_count[t];
        std::vector<char> mask = enabled;
        for (int k = 0; k < rule_db.rules_size(); ++k)
          if (rule_db.rules(k).id() == id) mask[k] = 0;
        info(
            Format("the verdict does not find the optimised graph faster: searching again without rule %s (applied "
                   "%d times; retry %d of %d, verdict at %g%%)",
                   id.c_str(), count, t + 1, tries, level * 100));
        PipelineResult saved = res;
        Graph saved_optimised = optimised;
        auto t_retry = Clock::now();
        Attempt(r, mask, level);
        PipelineResult::Retry r;
        r.left_out = id;
        r.applied = static_cast<int>(res.result.applied.size());
        r.outcome = res.unchanged ? "unchanged" : res.verdict.OutcomeName();
        r.speedup = res.unchanged ? 1.0 : res.verdict.wall.median;
        r.seconds = Seconds(t_retry);
        retries.push_back(r);
        if (!res.keep_original) {
          info("kept the graph found without rule " + id);
          break;
        }
        CalibrationReport calibration_now = res.calibration;
        res = std::move(saved);
        res.calibration = std::move(calibration_now);
        optimised = std::move(saved_optimised);
      }
      res.retries = std::move(retries);
    }
  }
}

// Saves the timing cache; writes the model (the original unless the result is
// faster), the DOT graph and the picture, each atomically.
void Write(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  PipelineResult& res = r.res;
  const auto& info = r.info;
  const auto& warn = r.warn;
  CountingBackend& counted = *r.counted;
  MeasuredCostModel& cost = *r.cost;
  LoadedModel& model = r.model;
  std::string& output = r.output;
  const Graph& original = r.model.graph;
  Graph& optimised = r.optimised;
  int64_t& real_steps = r.real_steps;
  const Graph& written = res.keep_original ? original : optimised;
  res.real_steps = real_steps;
  res.real_measurements = counted.measurements();
  if (!res.timing_cache.empty()) {
    try {
      cost.SaveCache(res.timing_cache);
    } catch (const Error& e) {
      warn(std::string("timing cache not saved: ") + e.what());
    }
  }
  // The original is written as it came: its file's bytes, unchanged (not
  // when its weights are in external files: those are written beside the
  // output from the graph).
  const bool write_bytes = res.keep_original && !model.bytes.empty() && !model.external_data;
  if (write_bytes) {
    CheckWritablePath(output, "--output");
    WriteFileAtomically(output, model.bytes);
  } else {
    // At the input's opset where it was upgraded for the search (11, 12;
    // 7 to 10 are written at 11): the converted model is imported again and
    // must compute the same.
    WriteOptions write;
    if (written.info().source_opset > 0 && written.info().source_opset < written.opset()) {
      int written_opset = 0;
      std::string note;
      try {
        Graph back =
            ReimportGraph(written, "the model converted back to its opset", model.import, write, &written_opset, &note);
        if (written_opset < written.opset()) {
          EquivalenceResult c = CompareGraphs(written, back, o.seed);
          if (c.max_error > o.tolerance) Fail("relative error ", c.max_error, " at '", c.worst_output, "'");
          info("converted back to opset " + std::to_string(written_opset) + " (checked, max relative error " +
               Format("%g", c.max_error) + ")");
        }
      } catch (const Error& e) {
        note = "written at opset " + std::to_string(written.opset()) + ": the model converted back to opset " +
               std::to_string(written_opset) + " does not check (" + e.what() + ")";
        write.at_graph_opset = true;
      }
      res.opset_note = note;
    }
    CheckWritablePath(output, "--output");
    std::string ignored;
    WriteOnnxFile(written, output, write.at_graph_opset ? &ignored : &res.opset_note, write);
    if (WritesExternalData(written, write)) info("weights written to '" + output + ".data' (external data)");
  }
  if (!res.opset_note.empty()) warn(res.opset_note);
  if (!o.dot.empty()) WriteFileAtomically(ResolveUserPath(o.dot), written.ToDot());
  if (!o.picture.empty()) {
    std::map<std::string, int> counts;
    for (const std::string& r : res.result.applied) ++counts[r];
    std::vector<std::string> lines;
    if (res.keep_original && !res.result.applied.empty())
      lines.push_back("(the search's graph, not written: the original was, see the verdict)");
    for (const auto& [r, n] : counts) lines.push_back(r + " x" + std::to_string(n));
    const Graph& shown = res.keep_original ? optimised : written;
    WritePng(RewritePictureDot(original, shown, lines), ResolveUserPath(o.picture));
    info("picture of the rewritten regions written to '" + ResolveUserPath(o.picture) + "'");
  }
}

// The summaries and the JSON report.
void Report(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  PipelineResult& res = r.res;
  std::unique_ptr<TimingBackend>& backend = r.backend;
  MeasuredCostModel& cost = *r.cost;
  const Graph& original = r.model.graph;
  Graph& optimised = r.optimised;
  res.before = Summarize(original);
  res.after = Summarize(optimised);
  res.device = backend->name();
  res.threads = at::get_num_threads();
  res.cache_entries = static_cast<int64_t>(cost.cache_size());
  res.ops_timed = cost.measurements();
  res.cache_hits = cost.hits();
  res.peak_memory_mb = PeakMemoryMb();
  if (!o.report.empty()) {
    res.report = ResolveUserPath(o.report);
    WriteFileAtomically(res.report, res.ReportJson());
  }
}

// The pipeline, in order; each stage's time goes into the report. search,
// finish, check and verdict are one attempt (Attempt); retries repeats
// them with one rule left out.
struct Stage {
  const char* name;
  void (*run)(OptimiseRun&);
};
const Stage kStages[] = {{"configure", Configure},
                         {"load", Load},
                         {"reference_run", ReferenceRun},
                         {"canonicalise", Canonicalise},
                         {"calibrate", Calibrate},
                         {"search", SearchRounds},
                         {"finish", Finish},
                         {"check", Check},
                         {"verdict", Measure},
                         {"retries", Retries},
                         {"write", Write},
                         {"report", Report}};

}  // namespace

PipelineResult RunPipeline(const PipelineOptions& o) {
  PipelineResult res;
  res.options = o;
  OptimiseRun r(o, res);
  r.info = [&o](const std::string& line) {
    if (o.log) o.log(false, line);
  };
  r.warn = [&o](const std::string& line) {
    if (o.log) o.log(true, line);
  };
  for (const Stage& stage : kStages) {
    const auto t = Clock::now();
    stage.run(r);
    res.stage_seconds.push_back({stage.name, Seconds(t)});
  }
  return res;
}

std::string PipelineResult::Summary() const {
  std::map<std::string, int> rule_counts;
  for (const auto& r : result.applied) ++rule_counts[r];
  std::ostringstream out;
  out << Format("model:      %s\n", model_source.c_str());
  out << Format("rules:      %d (%s)\n", rule_count, rules_path.c_str());
  for (const auto& in : inputs)
    if (in.declared != ShapeToString(in.used))
      out << Format("input:      %s %s run at %s%s\n", in.name.c_str(), in.declared.c_str(),
                    ShapeToString(in.used).c_str(), in.given ? " (--input_shape)" : " (--free_dim)");
  out << Format(
      "search:     %s, %d round%s, %.2f s, stopped: %s; %lld graphs explored, %lld rewrites costed, %lld "
      "graphs built; %zu rewrites applied%s\n",
      search.c_str(), search_rounds, search_rounds == 1 ? "" : "s", search_s, StopReasonName(result.stop_reason),
      static_cast<long long>(result.graphs_explored), static_cast<long long>(result.rewrites_costed),
      static_cast<long long>(result.graphs_built), result.applied.size(),
      result.finish_applied > 0 ? (" (" + std::to_string(result.finish_applied) + " by the greedy finish)").c_str()
                                : "");
  if (result.gains_resolved > 0)
    out << Format(
        "noise rule: %lld kinds of rewrite had an estimated gain within the timings' noise; timed against "
        "the original side, %lld were faster\n",
        static_cast<long long>(result.gains_resolved), static_cast<long long>(result.gains_confirmed));
  for (const auto& [r, n] : rule_counts) out << Format("  %3d x %s\n", n, r.c_str());
  out << "before:     " << before.ToString();
  out << "after:      " << after.ToString();
  out << Format("cost:       estimate %.2f -> %.2f ms (%s, %lld ops timed, %lld cache hits)\n", before_estimate,
                after_estimate, device.c_str(), static_cast<long long>(ops_timed), static_cast<long long>(cache_hits));
  if (unchanged)
    out << Format("measured:   %.2f ms (median of %d runs)\n", before_ms, pairs);
  else
    out << Format("measured:   %.2f -> %.2f ms (medians of %d interleaved pairs), %s\n", before_ms, after_ms, pairs,
                  verdict.ToString().c_str());
  out << Format("real work:  %lld rewrites applied to real graphs, %lld graphs timed on %s (%lld by the search)\n",
                static_cast<long long>(real_steps), static_cast<long long>(real_measurements), device.c_str(),
                static_cast<long long>(search_measurements));
  for (const auto& r : retries)
    out << Format("retry:      without rule %s: %d rewrites applied, %s (%.3fx), %.1f s\n", r.left_out.c_str(),
                  r.applied, r.outcome.c_str(), r.speedup, r.seconds);
  // The search ranks graphs by estimated cost, so what matters is the
  // estimated ratio: the optimised time predicted from the original's
  // measured time and the estimated speedup, against its measured time.
  double predicted_error = (PredictedAfterMs() - after_ms) / after_ms;
  out << Format(
      "estimate:   error %+.1f%% before, %+.1f%% after (estimate vs measured); predicted speedup %.3fx, "
      "optimised time predicted from the original's %+.1f%% off\n",
      100 * (before_estimate - before_ms) / before_ms, 100 * (after_estimate - after_ms) / after_ms,
      before_estimate / after_estimate, 100 * predicted_error);
  out << Format("check:      max relative error %.3g over %d outputs (seed %llu)%s\n", max_error, outputs_compared,
                static_cast<unsigned long long>(options.seed),
                opaque_nodes > 0 ? (", around " + std::to_string(opaque_nodes) + " opaque nodes").c_str() : "");
  if (!general_note.empty()) out << Format("            %s\n", general_note.c_str());
  out << Format("memory:     peak %.0f MB\n", peak_memory_mb);
  if (!stage_seconds.empty()) {
    std::string stages;
    for (const auto& [name, seconds] : stage_seconds)
      stages += Format("%s%s %.2f s", stages.empty() ? "" : ", ", name.c_str(), seconds);
    out << "stages:     " << stages << "\n";
  }
  if (unchanged)
    out << Format("written:    %s (the original model: no rewrite improved it)\n", output.c_str());
  else if (!general_ok)
    out << Format(
        "written:    %s (the ORIGINAL model: the optimised graph is not right at other values of the "
        "symbolic dimensions)\n",
        output.c_str());
  else if (keep_original)
    out << Format("written:    %s (the ORIGINAL model: the optimised graph is %s when measured)\n", output.c_str(),
                  verdict.OutcomeName().c_str());
  else if (!verdict.faster())
    out << Format("written:    %s (the optimised graph, forced: it is %s when measured)\n", output.c_str(),
                  verdict.OutcomeName().c_str());
  else
    out << Format("written:    %s\n", output.c_str());
  if (!opset_note.empty()) out << Format("            %s\n", opset_note.c_str());
  if (raised_opset > 0 && !keep_original)
    out << Format("            written at opset %lld: the rewrites produced operators of that opset\n",
                  static_cast<long long>(raised_opset));
  if (!report.empty()) out << Format("report:     %s\n", report.c_str());
  return out.str();
}

std::string PipelineResult::ReportJson() const {
  std::map<std::string, int> rule_counts;
  for (const auto& r : result.applied) ++rule_counts[r];
  Json applied = Json::object();
  for (const auto& [r, n] : rule_counts) applied[r] = n;
  auto interval = [](const RatioInterval& r) {
    return Json{{"median", r.median},
                {"lo", r.confidence > 0 ? r.lo : 0.0},
                {"hi", r.confidence > 0 ? r.hi : 0.0},
                {"coverage", r.confidence}};
  };
  Json per_op = Json::object();
  for (const auto& [op, p] : calibration.per_op)
    per_op[op] = Json{{"nodes", p.nodes}, {"ms", p.ms}, {"spread", p.spread}, {"context_factor", p.factor}};
  Json j;
  j["model"] = model_source;
  j["output"] = output;
  j["wrote_original"] = keep_original;
  j["opset_note"] = opset_note;
  j["raised_opset"] = raised_opset;
  j["unchanged"] = unchanged;
  j["search"] = Json{{"strategy", search},
                     {"budget", options.budget},
                     {"params", search_params},
                     {"greedy_finish", options.greedy_finish},
                     {"finish_applied", result.finish_applied},
                     {"time_limit_s", options.time_limit_s},
                     {"seed", options.seed},
                     {"time_s", search_s},
                     {"stop_reason", StopReasonName(result.stop_reason)},
                     {"rounds", search_rounds},
                     {"graphs_explored", result.graphs_explored},
                     {"rewrites_costed", result.rewrites_costed},
                     {"graphs_built", result.graphs_built},
                     {"rewrites_rejected", result.rewrites_rejected},
                     {"gains_within_noise", result.gains_resolved},
                     {"gains_confirmed", result.gains_confirmed},
                     {"noise_rule", result.noise_rule}};
  j["rules"] =
      Json{{"database", rules_path}, {"count", rule_count}, {"applied", applied}, {"sequence", result.applied}};
  Json input_list = Json::array();
  for (const auto& in : inputs)
    input_list.push_back(Json{{"name", in.name},
                              {"declared", in.declared},
                              {"used", in.used},
                              {"bound_by", in.declared == ShapeToString(in.used) ? "static"
                                           : in.given                            ? "input_shape"
                                                                                 : "free_dim"},
                              {"filled", in.filled}});
  j["inputs"] = input_list;
  j["device"] = device;
  j["target"] = target;
  j["threads"] = threads;
  j["before"] = SummaryJson(before, before_estimate, before_ms);
  j["after"] = SummaryJson(after, after_estimate, after_ms);
  j["speedup"] = unchanged ? 1.0 : verdict.wall.median;
  Json retry_list = Json::array();
  for (const auto& r : retries)
    retry_list.push_back(Json{{"left_out", r.left_out},
                              {"applied", r.applied},
                              {"outcome", r.outcome},
                              {"speedup", r.speedup},
                              {"seconds", r.seconds}});
  j["retries"] = retry_list;
  j["real_work"] = Json{{"steps", real_steps},
                        {"search_steps", result.real_steps},
                        {"measurements", real_measurements},
                        {"search_measurements", search_measurements}};
  j["verdict"] = Json{{"outcome", unchanged ? std::string("unchanged") : verdict.OutcomeName()},
                      {"pairs", unchanged ? 0 : verdict.wall.n},
                      {"level", unchanged ? 0.95 : verdict.wall.level},
                      {"wall", interval(verdict.wall)},
                      {"cpu", interval(verdict.cpu)},
                      {"cpu_clock", verdict.cpu_clock},
                      {"before_cpu_ms", verdict.a_cpu_ms},
                      {"after_cpu_ms", verdict.b_cpu_ms}};
  j["cost_model"] = Json{{"overhead_ms_per_node", calibration.overhead_ms},
                         {"fixed_ms_per_run", calibration.fixed_ms},
                         {"keys_calibrated", calibration.keys},
                         {"keys_timed_now", calibration.new_keys},
                         {"time_base", calibration.time_base},
                         {"time_base_known", calibration.time_base_known},
                         {"per_op", per_op}};
  j["estimated_speedup"] = before_estimate / after_estimate;
  j["predicted_after_ms"] = PredictedAfterMs();
  j["predicted_after_error"] = (PredictedAfterMs() - after_ms) / after_ms;
  j["check"] = Json{{"max_relative_error", max_error}, {"outputs_compared", outputs_compared},
                    {"opaque_nodes", opaque_nodes},    {"symbolic_dims", symbolic_dims},
                    {"general", general_ok},           {"tolerance", options.tolerance}};
  j["timing_cache"] =
      Json{{"path", timing_cache}, {"entries", cache_entries}, {"ops_timed", ops_timed}, {"hits", cache_hits}};
  j["peak_memory_mb"] = peak_memory_mb;
  Json stages = Json::object();
  for (const auto& [name, seconds] : stage_seconds) stages[name] = seconds;
  j["stage_seconds"] = stages;
  // Non-finite numbers are written as null; bytes that are not UTF-8 (a
  // path) as U+FFFD.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace rlflow

#include "optimiser/stages.h"

#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

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
#include "runtime/stats.h"
#include "runtime/threads.h"
#include "search/canonical.h"
#include "search/rule_passes.h"
#include "zoo/load.h"

namespace rlflow {

std::string Format(const char* fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

namespace {

WriteOptions AtGraphOpset() {
  WriteOptions w;
  w.at_graph_opset = true;
  return w;
}

// For a graph imported again at another binding of its symbolic dimensions:
// at its own opset, its large weights shared rather than copied (a model's
// weights are held once in memory, not three times).
WriteOptions SharingWeights() {
  WriteOptions w = AtGraphOpset();
  w.weights_by_reference = true;
  return w;
}

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

std::string DefaultOutput(const LoadedModel& m) {
  if (m.from_zoo) return ResolveUserPath(m.source.substr(4) + ".rlflow.onnx");
  // A model read from a pipe (--model=<(curl ...), /dev/stdin) has no
  // directory to write beside it.
  if (IsSpecialFile(m.source)) Fail("--model '", m.source, "' is not a regular file (a pipe or device): give --output");
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
              // 0 where nothing was estimated or measured (every node opaque).
              {"estimate_error", estimate_ms > 0 && measured_ms > 0 ? (estimate_ms - measured_ms) / measured_ms : 0.0}};
}

// "batch=2, images:[2,3,320,320]": the free value and the given shapes.
std::string BindingText(const ImportOptions& o) {
  std::string out = "free dimensions=" + std::to_string(o.free_dim_value);
  for (const auto& [name, shape] : o.input_shapes) out += ", " + name + ":" + ShapeToString(shape);
  return out;
}

// A later calibration's keys into the run's report (the first per-op
// figures of each operator are kept).
void AddCalibration(CalibrationReport& into, const CalibrationReport& more) {
  into.new_keys += more.new_keys;
  for (const auto& [op, p] : more.per_op)
    if (!into.per_op.count(op)) into.per_op[op] = p;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ListPasses(const std::string& rules, const std::string& argv0) {
  std::string path = RuleDatabasePath(rules, argv0);
  Matcher matcher(RuleList(LoadRuleDatabase(path)));
  AnalyticalCostModel cost;
  std::vector<std::pair<std::string, std::string>> out;
  PassRegistry registry = PassesWithRuleFamilies(matcher, &cost);
  for (const PassInfo& p : registry.passes()) out.push_back({p.name, p.description});
  return out;
}

OptimiseRun::OptimiseRun(const PipelineOptions& options, PipelineResult& result) : o(options), res(result) {
  res.options = options;
  info = [&log = o.log](const std::string& line) {
    if (log) log(false, line);
  };
  warn = [&log = o.log](const std::string& line) {
    if (log) log(true, line);
  };
}
OptimiseRun::~OptimiseRun() {
  if (!branches_dir.empty()) RemoveTree(branches_dir);
  if (!verdict_dir.empty()) RemoveTree(verdict_dir);
}

// Checks the options, pins the thread pools, and makes the search, the timing
// backend, the rules and the cost model (with its timing cache); fails on
// unwritable outputs before any long work.
void Configure(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  ConfigureRecord& rec = r.res.configure;
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
    r.warn("the BLAS library is not OpenBLAS: its thread count is not pinned to --threads");
  r.search = MakeSearch(o.search);
  rec.search = r.search->name();
  // --device is read here only: the backend's registration says what it
  // takes and which runtime the written model is for.
  r.device = &FindTimingBackend(o.device);
  const BackendInfo& device = *r.device;
  BackendOptions backend_options;
  backend_options.threads = o.threads;
  if (!o.ort_level.empty()) backend_options.settings["ort_level"] = o.ort_level;
  CheckBackendSettings(device, backend_options);
  rec.target = o.target.empty() ? device.target : o.target;
  {
    const std::vector<std::string>& known = KnownTargets();
    if (std::find(known.begin(), known.end(), rec.target) == known.end())
      Fail("--target: unknown target '", rec.target, "' (known: onnx, ort)");
  }
  if (o.guard != "auto" && o.guard != "none" && o.guard != "ort")
    Fail("--guard must be auto, ort or none, got '", o.guard, "'");
  if (o.second_binding_verdict != "auto" && o.second_binding_verdict != "require" &&
      o.second_binding_verdict != "report" && o.second_binding_verdict != "off")
    Fail("--second_binding_verdict must be auto, require, report or off, got '", o.second_binding_verdict, "'");
  if (o.second_binding_search != "auto" && o.second_binding_search != "on" && o.second_binding_search != "off")
    Fail("--second_binding_search must be auto, on or off, got '", o.second_binding_search, "'");
  if (!(o.second_binding_slack >= 0 && o.second_binding_slack < 1))
    Fail("--second_binding_slack must be in [0, 1), got ", o.second_binding_slack);
  if (o.guard == "ort" && o.device == "ort") Fail("--guard=ort with --device=ort: the verdict is in ORT already");
  if (o.guard == "ort" || (o.guard == "auto" && o.device == "cpu" && !o.make_backend && !o.force_optimised))
    r.guard_device = "ort";
  r.backend = o.make_backend ? o.make_backend() : MakeTimingBackend(o.device, backend_options);
  rec.device = r.backend->name();
  rec.threads = at::get_num_threads();
  rec.rules_path = RuleDatabasePath(o.rules, o.argv0);
  r.rule_db = o.loaded_rules != nullptr ? o.loaded_rules
                                        : std::make_shared<const rules::RuleDatabase>(LoadRuleDatabase(rec.rules_path));
  rec.rule_count = r.rule_db->rules_size();
  r.info("loaded " + std::to_string(rec.rule_count) + " rules from " + rec.rules_path);
  // The search's settings are its own: checked now (with the rules, which
  // name the rule-family passes), before any long work.
  SearchOptions& so = r.search_options;
  so.seed = o.seed;
  so.budget = o.budget;
  so.greedy_finish = o.greedy_finish;
  so.params = o.search_params;
  for (const SearchParam& p : r.search->Params())
    if (p.path && so.params.Has(p.name) && !so.params.Text(p.name).empty())
      so.params.Set(p.name, ResolveUserPath(so.params.Text(p.name)));
  if (so.params.values().empty()) {
    so = r.search->Resolve(so);  // the defaults need no rules to check
  } else {
    Matcher all_rules(RuleList(*r.rule_db), /*both_directions=*/true);
    so.matcher = &all_rules;
    so = r.search->Resolve(so);
    so.matcher = nullptr;
  }
  rec.search_params = so.params.values();
  // Every graph timed on the device is counted (the report's real work).
  r.counted = std::make_unique<CountingBackend>(r.backend.get());
  r.cost = std::make_unique<MeasuredCostModel>(r.counted.get());
  rec.timing_cache = TimingCachePath(o.timing_cache);
  if (!rec.timing_cache.empty()) {
    r.cost->LoadCache(rec.timing_cache);
    r.info("timing cache " + rec.timing_cache + ": " + std::to_string(r.cost->cache_size()) + " entries");
  }
  // Fail on unwritable outputs before any long work.
  if (!o.output.empty()) CheckWritablePath(ResolveUserPath(o.output), "--output");
  if (!o.dot.empty()) CheckWritablePath(ResolveUserPath(o.dot), "--dot");
  if (!o.picture.empty()) CheckWritablePath(ResolveUserPath(o.picture), "--picture");
  if (!o.report.empty()) CheckWritablePath(ResolveUserPath(o.report), "--report");
}

// No two outputs are one file, and no output replaces a file the run reads
// (the model, its external data files, the rules, --input_data's files):
// compared as files (SameFile), not as the flags spell them, so that
// `--output=./m.onnx` for `--model=m.onnx`, a symlink or an output whose
// data file, `<output>.data`, is the input's external data file are caught.
void CheckOutputPaths(const OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  const LoadedModel& model = r.model;
  const std::string& output = r.res.load.output;
  std::vector<FileRole> outputs = {{"--output", output}, {"--output's data file", output + ".data"}};
  if (!o.report.empty()) outputs.push_back({"--report", ResolveUserPath(o.report)});
  if (!o.dot.empty()) outputs.push_back({"--dot", ResolveUserPath(o.dot)});
  if (!o.picture.empty()) outputs.push_back({"--picture", ResolveUserPath(o.picture)});
  // The timing cache is read and written, by design: an output only here.
  outputs.push_back({"--timing_cache", r.res.configure.timing_cache});
  std::vector<FileRole> inputs;
  if (!model.from_zoo) {
    inputs.push_back({"the input model", model.source});
    for (const std::string& location : model.graph.info().external_files)
      inputs.push_back({"an external data file of the input model", DirName(model.source) + "/" + location});
  }
  inputs.push_back({"the rule database", r.res.configure.rules_path});
  for (const auto& [name, file] : o.input_data)
    inputs.push_back({"--input_data's file for input '" + name + "'", ResolveUserPath(file)});
  CheckFileRoles(outputs, inputs);
  if (model.graph.info().external_data && IsSpecialFile(output))
    Fail("cannot write --output '", output, "': it is not a regular file, and a model with external data is written ",
         "as two files (the model and '<output>.data')");
}

// Loads the model (or builds the zoo model) at the given shapes and data, and
// chooses the rules the written model may use (opset, target).
TimingBackend* GuardBackend(OptimiseRun& r, std::string* why) {
  if (!r.guard_backend) {
    BackendOptions options;
    options.threads = r.o.threads;
    try {
      r.guard_backend = r.o.make_guard_backend ? r.o.make_guard_backend() : MakeTimingBackend(r.guard_device, options);
    } catch (const Error& e) {
      if (r.o.guard != "auto") throw;
      *why = e.what();
      return nullptr;
    }
  }
  return r.guard_backend.get();
}

LoadedModel ImportModelFile(const OptimiseRun& r, const std::string& path) {
  const PipelineOptions& o = r.o;
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
  LoadedModel model = LoadModel(path, load);
  // Costed for the device: where it has no permuted views (ONNX Runtime),
  // no node is another cost key for the Transposes above it.
  for (Graph* g : {&model.graph, &model.as_given}) g->info().permuted_views = r.backend->permuted_views();
  for (const auto& [name, data] : input_data) {
    // Both graphs where there are two: the reference run, the check and the
    // verdict run the graph as the file computes it.
    for (Graph* g : {&model.graph, model.static_dims > 0 ? &model.as_given : nullptr}) {
      if (g == nullptr) continue;
      ValueId v = g->FindValue(name);
      if (v == kNoValue || !g->value(v).is_graph_input)
        Fail("--input_data names '", name, "', which is not a graph input of the model");
      Value& in = g->mutable_value(v);
      if (!(data->type() == in.type))
        Fail("--input_data for input '", name, "': the file holds ", data->type().ToString(), ", the input is ",
             in.type.ToString(), " (declared ", DeclaredTypeText(*g, name), ")");
      in.sample_data = data;
    }
  }
  return model;
}

// `original` (the model as the file computes it) imported again at
// `other`: the file again where there is one (its weights the ones in
// memory; a file that changed since it was loaded is ModelFileChanged).
static Graph ImportAtBinding(const LoadedModel& model, const Graph& original, const ImportOptions& other) {
  if (model.file.empty()) return ReimportGraph(original, "original", other, SharingWeights());
  ImportOptions file = other;
  file.known_weights = WeightsByName(original);
  return model.ImportFileAgain(file);
}

// The import options of the second binding --second_input_shape gave.
static ImportOptions GivenSecondImport(const OptimiseRun& r) {
  ImportOptions other = GivenSecondBinding(r.model.AsGiven(), r.model.import, r.o.second_input_shapes);
  other.fold_static_dims = false;
  return other;
}

// The check's second binding, in the order tried: --second_input_shape's
// where it was given (it imports: Load), else the given shapes moved, then
// doubled, then made smaller (a model given its largest size).
static std::vector<ImportOptions> SecondBindings(const OptimiseRun& r) {
  if (!r.o.second_input_shapes.empty()) return {GivenSecondImport(r)};
  std::vector<ImportOptions> bindings;
  for (SecondBindingKind kind : {SecondBindingKind::kMoved, SecondBindingKind::kDoubled, SecondBindingKind::kSmaller}) {
    ImportOptions next = SecondBinding(r.model.AsGiven(), r.model.import, kind);
    next.fold_static_dims = false;
    if (std::none_of(bindings.begin(), bindings.end(),
                     [&](const ImportOptions& b) { return b.input_shapes == next.input_shapes; }))
      bindings.push_back(std::move(next));
  }
  return bindings;
}

// --second_input_shape, checked before any long work: the model imports
// there (the import's errors name the input), and it moves some input.
static void CheckGivenSecondBinding(const OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  const Graph& original = r.model.AsGiven();
  if (!original.info().symbolic_dims || InputsWithSymbolicDims(original).empty())
    Fail("--second_input_shape: the model's inputs have no symbolic dimensions (it runs at one shape)");
  for (const auto& [name, shape] : o.second_input_shapes)
    if (o.input_data.count(name))
      Fail("--second_input_shape for input '", name, "': --input_data gives its values, so it runs at their shape");
  Graph other;
  try {
    other = ImportAtBinding(r.model, original, GivenSecondImport(r));
  } catch (const ModelFileChanged&) {
    throw;
  } catch (const Error& e) {
    std::string what = e.what();
    // The import's errors name the flag its shapes usually come from.
    const std::string flag = "--input_shape", given = "--second_input_shape";
    for (size_t at = what.find(flag); at != std::string::npos; at = what.find(flag, at + given.size()))
      what.replace(at, flag.size(), given);
    if (what.find(given) == std::string::npos) what = given + ": " + what;
    Fail(what);
  }
  for (ValueId in : other.inputs()) {
    const ValueId first = original.FindValue(other.value(in).name);
    if (first != kNoValue && original.value(first).type.shape != other.value(in).type.shape) return;
  }
  Fail("--second_input_shape binds every input as the model is optimised at: give shapes it also runs at");
}

void Load(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  LoadRecord& rec = r.res.load;
  const std::string& target = r.res.configure.target;
  const rules::RuleDatabase& rule_db = *r.rule_db;
  LoadedModel& model = r.model;
  auto t0 = Clock::now();
  model = ImportModelFile(r, o.model);
  rec.model_source = model.source;
  rec.static_dims = model.static_dims;
  for (const auto& note : model.notes) r.info(note);
  if (!o.second_input_shapes.empty()) CheckGivenSecondBinding(r);
  // Rules that would produce an operator newer than the opset the written
  // model may have, or one the target runtime lacks, are left out (kept in
  // the list, never matched: rule numbers stay the database's).
  r.enabled.assign(rule_db.rules_size(), 1);
  {
    const int64_t source_opset =
        model.graph.info().source_opset > 0 ? model.graph.info().source_opset : model.graph.opset();
    // A model from opsets 1 to 10 is written at 11 once anything in it
    // changes (kMinWrittenOpset), so rules of opset 11 are its rules too.
    const int64_t model_opset = std::max<int64_t>(source_opset, kMinWrittenOpset);
    const int64_t target_opset = o.target_opset > 0 ? o.target_opset : r.device->newest_opset ? kMaxOpset : model_opset;
    // A model from opsets 18+ is written at its own opset (its graph is at
    // 17, and so is every rule).
    const int64_t newest = std::max<int64_t>(kMaxOpset, model_opset);
    if (o.target_opset != 0 && (o.target_opset < model_opset || o.target_opset > newest))
      Fail("--target_opset=", o.target_opset, " is outside ", model_opset,
           source_opset < model_opset ? " (the lowest opset rlflow writes)" : " (the model's opset)", " to ", newest);
    for (int k = 0; k < rule_db.rules_size(); ++k) {
      const rules::Rule& rule = rule_db.rules(k);
      if (RuleOpset(rule) > target_opset) {
        r.enabled[k] = 0;
        ++rec.rules_newer;
      } else if (!RuleRunsOn(rule, target)) {
        r.enabled[k] = 0;
        ++rec.rules_elsewhere;
      }
    }
    if (rec.rules_newer > 0)
      r.info(Format("%d rules need an opset above %lld (the written model's): not used", rec.rules_newer,
                    static_cast<long long>(target_opset)));
    if (rec.rules_elsewhere > 0)
      r.info(Format("%d rules produce operators that --target=%s does not run: not used", rec.rules_elsewhere,
                    target.c_str()));
  }
  const std::string& output = rec.output = o.output.empty() ? DefaultOutput(model) : ResolveUserPath(o.output);
  CheckWritablePath(output, "--output");
  CheckOutputPaths(r);
  r.info("loaded " + model.source + " (" + std::to_string(model.graph.num_nodes()) + " nodes) in " +
         Format("%g", Seconds(t0)) + " s");
  for (ValueId in : model.graph.inputs()) {
    const Value& v = model.graph.value(in);
    LoadRecord::Input input;
    input.name = v.name;
    input.declared = DeclaredTypeText(model.graph, v.name);
    input.used = v.type.shape;
    input.given = o.input_shapes.count(v.name) > 0 || o.input_data.count(v.name) > 0;
    input.fitted = model.fitted.count(v.name) > 0;
    input.by_dim_name = !input.given && !input.fitted && !o.input_shapes.empty() && !model.free_axes.count(v.name);
    if (auto fixed = model.graph.info().fixed_axes.find(v.name); fixed != model.graph.info().fixed_axes.end())
      input.fixed_axes = fixed->second;
    rec.inputs.push_back(input);
  }
  // An image's height and width, a text's length bound to --free_dim's 1:
  // every decision and the verdict are about that degenerate workload.
  constexpr int kSmallFreeDim = 8;
  if (o.free_dim <= kSmallFreeDim) {
    std::string which, first;
    for (const auto& in : rec.inputs) {
      auto free = model.free_axes.find(in.name);
      if (in.given || in.fitted || free == model.free_axes.end()) continue;
      if (std::none_of(free->second.begin(), free->second.end(), [](int a) { return a > 0; })) continue;
      which += (which.empty() ? "" : ", ") +
               Format("'%s' %s at %s", in.name.c_str(), in.declared.c_str(), ShapeToString(in.used).c_str());
      if (first.empty()) first = in.name;
    }
    if (!which.empty())
      r.warn(
          Format("optimised with --free_dim=%d for symbolic dimensions: input %s; the search and the verdict time "
                 "that workload, not the one the model runs at: give that with --input_shape=%s:D1,D2,...[;...]",
                 o.free_dim, which.c_str(), first.c_str()));
  }
  // At shapes where the model computes nothing (a batch of 0), the costs and
  // the verdict time overheads and the check compares empty tensors.
  const auto empty = [&](ValueId out) {
    const TensorType& t = model.graph.value(out).type;
    return t.rank_known && std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d == 0; });
  };
  if (!model.graph.outputs().empty() && std::all_of(model.graph.outputs().begin(), model.graph.outputs().end(), empty))
    r.warn(
        "every graph output is empty at the shapes the model is optimised at (--input_shape, --free_dim): the "
        "costs and the verdict time overheads only; the check relies on its second binding");
}

// Runs the parts of the model the executor can run, once: a model that cannot
// run fails before the search, and the run time sets the number of timed runs.
void ReferenceRun(OptimiseRun& r) {
  ReferenceRunRecord& rec = r.res.reference_run;
  const Graph& original = r.model.AsGiven();
  // The parts of the model the executor can run (all of it unless it has
  // opaque nodes) run once now: a model that cannot run fails before the
  // search, and the run time sets the number of end-to-end runs.
  r.original_cut = CutAtOpaque(original);
  const Graph& cut = r.original_cut;
  std::vector<std::string> how;
  std::vector<at::Tensor> inputs = RandomInputs(cut, r.o.seed, &how);
  for (size_t k = 0; k < cut.inputs().size(); ++k) {
    rec.filled[cut.value(cut.inputs()[k]).name] = how[k];
    r.info("input '" + cut.value(cut.inputs()[k]).name + "' filled: " + how[k]);
  }
  Executor reference(cut);
  auto t_ref = Clock::now();
  try {
    reference.Run(inputs);
  } catch (const Error& e) {
    std::string filled;
    for (const auto& [name, with] : rec.filled)
      if (!IsFloatingPoint(original.value(original.FindValue(name)).type.dtype) && with.rfind("given", 0) != 0)
        filled += (filled.empty() ? "" : ", ") + name;
    if (filled.empty()) throw;
    Fail(e.what(), " (on the filled values of input", filled.find(',') == std::string::npos ? " " : "s ", filled,
         "; give real ones with --input_data=NAME:FILE)");
  }
  rec.seconds = Seconds(t_ref);
  // The first run is cold (allocations, first calls): a warm one says more
  // about how long the timings below will take (unless it is slow).
  if (rec.seconds < 1.0) {
    auto t_warm = Clock::now();
    reference.Run(inputs);
    rec.seconds = std::min(rec.seconds, Seconds(t_warm));
  }
  // A run of seconds at shapes the user did not give (a diffusion UNet's
  // latent fitted at 224 x 224: 20 s a run, a default run past 10 minutes)
  // is said now, before the calibration and the search time it many times.
  std::string bound;
  for (const LoadRecord::Input& in : r.res.load.inputs)
    if (!in.given && in.declared != ShapeToString(in.used)) {
      bound += (bound.empty() ? "" : ";") + in.name + ":";
      for (size_t k = 0; k < in.used.size(); ++k) bound += (k ? "," : "") + std::to_string(in.used[k]);
    }
  if (rec.seconds > r.o.slow_run_warning_s && !bound.empty())
    r.warn("one run of the model takes " + Format("%.1f", rec.seconds) +
           " s at the shapes its symbolic dimensions were bound to (" + bound +
           "), and the calibration, the search and the verdict run it many times: if it runs at other shapes, give "
           "them with --input_shape");
}

// Whether `g` (the canonical graph rewritten) imports at a second binding
// of the model's symbolic dimensions where the canonical graph does, with
// outputs of the same types: a rewrite made at one binding can be right
// there only (a dimension bound to 1 hides a merge). True for a model
// without symbolic dimensions; false where no second binding fits the
// canonical graph.
static bool FitsAnotherBinding(const OptimiseRun& r, const Graph& g) {
  const Graph& original = r.model.AsGiven();
  if (!original.info().symbolic_dims) return true;
  for (SecondBindingKind kind : {SecondBindingKind::kMoved, SecondBindingKind::kDoubled, SecondBindingKind::kSmaller}) {
    ImportOptions other = SecondBinding(original, r.model.import, kind);
    other.fold_static_dims = false;
    Graph before;
    try {
      before = ReimportGraph(r.canonical, "canonical", other, SharingWeights());
    } catch (const Error&) {
      continue;
    }
    try {
      const Graph after = ReimportGraph(g, "rewritten", other, SharingWeights());
      for (size_t k = 0; k < before.outputs().size(); ++k)
        if (after.value(after.outputs()[k]).type != before.value(before.outputs()[k]).type) return false;
      return true;
    } catch (const Error&) {
      return false;
    }
  }
  return false;
}

// Rows a constant Gather or Slice selects (a classifier's class token) are selected
// before the operators that compute each row alone (select_rows_early), so
// that the rows nobody reads are not computed; kept where the result is
// right at another binding of the symbolic dimensions too.
static void SelectRowsEarly(OptimiseRun& r) {
  Graph selected = r.canonical;
  const double flops = Summarize(r.canonical).flops;
  if (!(flops > 0) || RunPasses(PassRegistry::Builtin(), {"select_rows_early"}, selected).passes_changed == 0) return;
  const double after = Summarize(selected).flops;
  // Each selection moved is a node more: where little work goes (a short
  // axis, a model of data movement), not worth the nodes.
  if (!(after < 0.99 * flops)) {
    r.info(Format("selecting rows early saves %.2f%% of the FLOPs: not done", 100 * (1 - after / flops)));
    return;
  }
  if (!FitsAnotherBinding(r, selected)) {
    r.info("selecting rows early does not fit another binding of the symbolic dimensions: not done");
    return;
  }
  r.res.canonicalise.rows_selected_early = true;
  r.info(Format("rows a constant Gather or Slice selects computed alone (select_rows_early): %.3f -> %.3f GFLOPs",
                flops / 1e9, after / 1e9));
  r.canonical = std::move(selected);
}

// The canonical form the rules are stated in: batch norm in inference form
// (x * S + T); rows nobody reads not computed.
void Canonicalise(OptimiseRun& r) {
  int& lowered = r.res.canonicalise.lowered_batchnorm;
  r.canonical = CanonicalForm(r.model.graph, &lowered);
  if (lowered > 0) r.info("lowered " + std::to_string(lowered) + " BatchNormalization nodes to per-channel Mul/Add");
  if (r.o.search != "none") SelectRowsEarly(r);
}

// Ctrl-C (or SIGTERM) came: the search stops, and what follows writes the
// best graph found.
static bool Interrupted(const PipelineOptions& o) { return o.interrupted != nullptr && o.interrupted->load(); }

// "about 43 s": how long a step that runs the model will take.
static std::string About(double s) {
  return s < 1 ? std::string("under a second") : s < 120 ? Format("about %.0f s", s) : Format("about %.1f min", s / 60);
}

// Raises `g`'s default-domain opset to the newest its operators need
// (a rewrite's HardSwish: 14); returns it, or 0 if it was new enough.
static int64_t RaiseToOpsetNeeded(Graph& g) {
  const int64_t needed = OpsetNeeded(g);
  if (needed <= g.opset()) return 0;
  g.info().opsets[""] = needed;
  g.info().source_opset = std::max<int64_t>(g.info().source_opset, needed);
  return needed;
}

// A search's graph imported at the second binding (its opset raised first
// as Finish raises it, so that it exports).
static Graph AtSecondBinding(const OptimiseRun& r, Graph g) {
  RaiseToOpsetNeeded(g);
  ImportOptions at = r.second_cost->import;
  at.onnx_passes_in_process = true;  // a graph rlflow exported, costed often
  return ReimportGraph(g, "candidate", at, SharingWeights());
}

// The shapes the symbolic inputs of `original` have in `other`, its import
// at another binding ("x:[2,3,32,128], z:[2,8,32]").
static std::string SymbolicInputShapes(const Graph& original, const Graph& other) {
  std::string shapes;
  for (const std::string& name : InputsWithSymbolicDims(original))
    for (ValueId in : other.inputs())
      if (other.value(in).name == name)
        shapes += (shapes.empty() ? "" : ", ") + name + ":" + ShapeToString(other.value(in).type.shape);
  return shapes;
}

// The search at the second binding too (PipelineOptions::
// second_binding_search): the cost model there, calibrated in context on
// the original's canonical form imported there (whose cost is the bound).
// Graphs are costed there in the search's own form (batch norms lowered
// where the search left them), the bound as well.
static void PrepareSecondBindingSearch(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  r.second_cost.reset();
  r.second_search_note.clear();
  const bool given = !o.second_input_shapes.empty();
  if (o.second_binding_search == "off" || (o.second_binding_search == "auto" && !given)) return;
  const Graph& original = r.model.AsGiven();
  if (!original.info().symbolic_dims || InputsWithSymbolicDims(original).empty()) {
    r.second_search_note = "the model's inputs have no symbolic dimensions: it runs at one binding";
    r.info("the search costs graphs at one binding: " + r.second_search_note);
    return;
  }
  const auto t = Clock::now();
  auto second = std::make_unique<OptimiseRun::SecondBindingCost>();
  Graph canonical_other;  // the original's canonical form there
  std::string failed;
  for (ImportOptions& next : SecondBindings(r)) {
    try {
      // Its shapes as the check will give them: the original as the file
      // computes it, imported there.
      const Graph original_other = ImportAtBinding(r.model, original, next);
      canonical_other = ReimportGraph(r.canonical, "canonical", next, SharingWeights());
      second->shapes = SymbolicInputShapes(original, original_other);
      second->import = std::move(next);
      failed.clear();
      break;
    } catch (const ModelFileChanged&) {
      throw;
    } catch (const Error& e) {
      if (failed.empty()) failed = BindingText(next) + ": " + e.what();
    }
  }
  if (!failed.empty()) {
    r.second_search_note = "the model does not import at a second binding (" + failed + ")";
    r.warn("the search costs graphs at one binding: " + r.second_search_note);
    return;
  }
  second->cost = std::make_unique<MeasuredCostModel>(r.counted.get());
  if (!r.res.configure.timing_cache.empty()) second->cost->LoadCache(r.res.configure.timing_cache);
  second->cost->set_stop([&o] { return Interrupted(o); });
  second->canonical = std::move(canonical_other);
  second->canonical_cut = CutAtOpaque(second->canonical);
  second->cost->SetContext(second->canonical_cut);
  r.info("calibrating the cost model at " + second->shapes +
         Format(" too (the search takes only graphs estimated at most %g%% slower there than the original)",
                100 * o.second_binding_slack));
  const CalibrationReport c = second->cost->Calibrate(second->canonical_cut, r.cal_runs);
  second->bound_ms = second->cost->RunCost(second->canonical);
  second->calibrate_s = Seconds(t);
  r.info(Format("at %s: the original estimated %.4g ms (%d operator keys, %d timed now, in %.1f s)",
                second->shapes.c_str(), second->bound_ms, c.keys, c.new_keys, second->calibrate_s));
  r.second_cost = std::move(second);
}

// The estimated cost of a search's graph at the second binding (infinite
// where it does not import there: the check would refuse it), once per graph.
static double SecondBindingMs(OptimiseRun& r, const Graph& g) {
  OptimiseRun::SecondBindingCost& second = *r.second_cost;
  const uint64_t hash = g.StructuralHash();
  auto it = second.ms.find(hash);
  if (it != second.ms.end()) return it->second;
  double ms = std::numeric_limits<double>::infinity();
  try {
    ms = second.cost->RunCost(AtSecondBinding(r, g));
  } catch (const Error& e) {
    if (second.not_imported++ == 0)
      r.info(std::string("a graph the search would take does not import at ") + second.shapes + " (" + e.what() +
             "): not taken (the first such graph; the report counts them)");
  }
  ++second.judged;
  if (ms > second.bound_ms * (1 + r.o.second_binding_slack)) ++second.refused;
  second.ms.emplace(hash, ms);
  return ms;
}

// Calibrates the cost model in context, and starts the runner that owns the
// search phase's deadline.
void Calibrate(OptimiseRun& r) {
  MeasuredCostModel& cost = *r.cost;
  // The cost model is calibrated on the graphs themselves: every node timed
  // in place inside whole runs (original and canonical form), the rest
  // scaled by its op type's in-context/isolated ratio, plus the executor's
  // per-node overhead. Cached: a warm cache runs nothing here.
  CalibrationReport& calibration = r.res.calibrate;
  r.cal_runs = CalibrationRuns(r.res.reference_run.seconds);
  {
    auto t_cal = Clock::now();
    // ONNX Runtime's in-context times belong to this model (its fusions):
    // kept apart from other models' in the timing cache.
    cost.SetContext(r.original_cut);
    cost.set_stop([&o = r.o] { return Interrupted(o); });
    // A calibration that runs the model for a while says so first (a
    // batch-16 ResNet-50's took 25 s with no line): the runs in context,
    // and the keys never timed alone, about 9 runs' worth for all of them
    // (warm-up and samples).
    const double run_s = r.res.reference_run.seconds;
    double untimed_alone = 0;
    cost.UncalibratedKeys(r.original_cut, &untimed_alone);
    const double expected_s = (r.cal_runs + 2 + 9 * untimed_alone) * run_s;
    if (expected_s >= 5) r.info("calibrating the cost model in context (" + About(expected_s) + ")");
    // With a warm cache the original still runs as many times, for the
    // time base of its cached timings: the machine's speed drifts (1.5x
    // within minutes on a shared VM), and the estimates reported against
    // measured times are in its speed now.
    calibration = cost.Calibrate(r.original_cut, r.cal_runs, r.cal_runs);
    r.time_base_read = Clock::now();
    r.calibration_s = Seconds(t_cal);
    // The search starts from the canonical form of the graph as imported
    // (batch norms lowered, static dimensions folded): its keys as well.
    if (r.res.canonicalise.lowered_batchnorm > 0 || r.model.static_dims > 0) {
      AddCalibration(calibration, cost.Calibrate(CutAtOpaque(r.canonical), r.cal_runs, 0, &r.original_cut));
    }
    r.info(
        Format("cost model calibrated in context: %d operator keys (%d timed now, %d run fused into a neighbour's "
               "kernel), run %g ms, per-node overhead %g us, per-run cost %g us, time base %g%s, in %g s",
               calibration.keys, calibration.new_keys, calibration.fused_keys, calibration.run_ms,
               calibration.overhead_ms * 1e3, calibration.fixed_ms * 1e3, calibration.time_base,
               calibration.time_base_known ? "" : " (unknown)", Seconds(t_cal)));
  }
  // One owner of the search's limits for the whole run: every attempt (the
  // first, its rounds, its greedy finish, the retries after a slower
  // verdict) runs against the same deadline, so --time_limit bounds the
  // search phase as a whole, for every --search alike. The checks, the
  // verdict and the write that follow are not cut short: they are what
  // makes the result safe to write. If branches optimised before (the
  // branches stage) spent part of it.
  PrepareSecondBindingSearch(r);
  RunnerLimits limits;
  limits.time_limit_s = r.o.time_limit_s > 0 ? std::max(1e-3, r.o.time_limit_s - r.branch_search_s) : 0;
  limits.interrupted = r.o.interrupted;
  r.runner = std::make_unique<Runner>(limits, r.info);
  r.mask = r.enabled;
  r.level = 0.95;
}

// The search with the rules r.mask enables, in rounds until it picks no
// operator left untimed.
void SearchRounds(OptimiseRun& r) {
  SearchRecord& rec = r.res.search;
  MeasuredCostModel& cost = *r.cost;
  Runner& runner = *r.runner;
  Search& search = *r.search;
  Matcher matcher(RuleList(*r.rule_db), /*both_directions=*/true, r.mask);
  SearchOptions options = r.search_options;
  options.matcher = &matcher;
  // Lowered batch norms the search leaves are raised back afterwards: cost them as such.
  BatchNormAwareCost search_cost(&cost);
  options.cost = &search_cost;
  options.runner = &runner;
  // Each kind of rewrite the noise rule times is timed, counted and listed
  // once over the rounds (a round's new engine had listed it again).
  std::unordered_map<uint64_t, double> noise_outcomes;
  options.noise_outcomes = &noise_outcomes;
  // Only graphs not estimated slower at the second binding than the
  // original (PipelineOptions::second_binding_slack).
  if (r.second_cost)
    options.acceptable = [&r](const Graph& g) {
      return SecondBindingMs(r, g) <= r.second_cost->bound_ms * (1 + r.o.second_binding_slack);
    };
  rec = SearchRecord();
  rec.before_estimate = cost.RunCost(r.model.AsGiven());
  r.info("searching (" + search.name() + ") ...");
  auto t2 = Clock::now();
  const int64_t measured_before_search = r.counted->measurements();
  SearchResult& result = rec.result;
  auto record_round = [&rec](const SearchResult& s) {
    SearchRoundRecord f;
    static_cast<SearchWork&>(f) = s;
    f.applied = static_cast<int64_t>(s.applied.size());
    f.finish_applied = s.finish_applied;
    f.final_cost = s.final_cost;
    f.stop_reason = s.stop_reason;
    rec.per_round.push_back(f);
  };
  result = search.Run(r.canonical, options);
  record_round(result);
  // Operators the search created (a conv with a folded bias, a merged conv)
  // were costed from their isolated timings. Their graph is run and timed
  // in context, and the search repeats with those timings until it picks
  // nothing new (at most 3 rounds). With a warm cache the first round has
  // them all: runs with the same cache make the same rewrites.
  CalibrationReport& calibration = r.res.calibrate;
  int& search_rounds = rec.rounds;
  search_rounds = 1;
  double round_s = Seconds(t2);
  for (; search_rounds < 3 && !result.applied.empty() && !runner.ShouldStop(); ++search_rounds) {
    FoldOptions fold;
    fold.max_elements = std::numeric_limits<int64_t>::max();
    auto folded_cut = [&fold](Graph g) {
      InferShapesAndFold(g, fold);
      return CutAtOpaque(g);
    };
    const Graph chosen = folded_cut(result.graph);
    const int untimed = cost.UncalibratedKeys(chosen);
    // With --second_binding_search, its keys at the second binding as well
    // (there too, keys timed alone misjudge what the runtime fuses: a
    // NAFNet graph estimated 5% faster there than the original by them ran
    // 0.946x there).
    Graph chosen_other;
    int untimed_other = 0;
    if (r.second_cost) {
      try {
        chosen_other = folded_cut(AtSecondBinding(r, result.graph));
        untimed_other = r.second_cost->cost->UncalibratedKeys(chosen_other);
      } catch (const Error&) {
        // Taken by the search, so it imported there (SecondBindingMs).
      }
    }
    if (untimed == 0 && untimed_other == 0) break;
    // Another round costs a calibration (about what the original's took)
    // and about the last round's search. Where the deadline leaves less, it
    // would be stopped where it starts, after a calibration run past the
    // deadline: the rounds end here and the last round's graph stands.
    const double needed =
        (untimed > 0 ? r.calibration_s : 0) + (untimed_other > 0 ? r.second_cost->calibrate_s : 0) + round_s;
    if (runner.Remaining() < needed) {
      r.info(
          Format("the chosen graph has %d operator keys never timed in context, but another round (about %.1f s) "
                 "does not fit in the %.1f s left: keeping round %d's graph",
                 untimed + untimed_other, needed, runner.Remaining(), search_rounds));
      break;
    }
    if (untimed > 0) {
      // Its long nodes may all have new keys (new neighbours): then the
      // original, whose keys are cached, runs after it for the time base of
      // the new timings (taken at the machine's speed now, they had made a
      // rewritten RegNet look 1.27x faster; measured 1.008x).
      CalibrationReport c = cost.Calibrate(chosen, r.cal_runs, 0, &r.original_cut);
      if (c.time_base_from_reference) {
        r.time_base_read = Clock::now();
        r.time_base_since = c.time_base;
      }
      AddCalibration(calibration, c);
      r.info(
          Format("the chosen graph has %d operator keys never timed in context: timed them (time base %g%s), "
                 "searching again",
                 c.new_keys, c.time_base,
                 c.time_base_from_reference ? ", from the original's run"
                 : c.time_base_known        ? ""
                                            : ", unknown"));
    }
    if (untimed_other > 0) {
      OptimiseRun::SecondBindingCost& second = *r.second_cost;
      const CalibrationReport c = second.cost->Calibrate(chosen_other, r.cal_runs, 0, &second.canonical_cut);
      // The costs there change with the new timings: the bound and every
      // graph's are costed again.
      second.ms.clear();
      second.bound_ms = second.cost->RunCost(second.canonical);
      r.info(
          Format("the chosen graph has %d operator keys never timed in context at %s: timed them (time base "
                 "%g); the original estimated %.4g ms there, searching again",
                 c.new_keys, second.shapes.c_str(), c.time_base, second.bound_ms));
    }
    rec.before_estimate = cost.RunCost(r.model.AsGiven());
    int64_t resolved = result.gains_resolved, confirmed = result.gains_confirmed;
    double resolve_s = result.gains_resolve_s;
    std::vector<std::string> noise = std::move(result.noise_rule);
    SearchResult previous = std::move(result);
    const auto t_round = Clock::now();
    result = search.Run(r.canonical, options);
    round_s = Seconds(t_round);
    record_round(result);
    // The deadline is the run's, not the round's: a round it cut short may
    // have got less far than the round before. Keep the better of the two
    // under the new timings (the verdict measures whichever is kept).
    if (IsRunnerStop(result.stop_reason) && !previous.applied.empty() &&
        search_cost.GraphCost(previous.graph) < result.final_cost) {
      r.info(Format("round %d was stopped (%s) before it reached round %d's graph: keeping that graph",
                    search_rounds + 1, StopReasonName(result.stop_reason), search_rounds));
      // The kept round's graph, applied rules and finish; the stop reason is
      // the deadline's (the work counters are summed over rounds below).
      previous.stop_reason = result.stop_reason;
      previous.final_cost = search_cost.GraphCost(previous.graph);
      previous.initial_cost = result.initial_cost;
      previous.gains_resolved = result.gains_resolved;
      previous.gains_confirmed = result.gains_confirmed;
      previous.gains_resolve_s = result.gains_resolve_s;
      previous.noise_rule = std::move(result.noise_rule);
      result = std::move(previous);
    }
    result.gains_resolved += resolved;
    result.gains_confirmed += confirmed;
    result.gains_resolve_s += resolve_s;
    noise.insert(noise.end(), result.noise_rule.begin(), result.noise_rule.end());
    result.noise_rule = std::move(noise);
  }
  // The work counters are every round's: a round the deadline stopped at
  // once, or one whose graph was not kept, still did its part of the work.
  SearchWork total;
  for (const SearchRoundRecord& f : rec.per_round) total += f;
  static_cast<SearchWork&>(result) = total;
  rec.seconds = Seconds(t2);
  rec.measurements = r.counted->measurements() - measured_before_search;
  rec.second.note = r.second_search_note;
  if (r.second_cost) {
    SearchRecord::SecondBinding& s2 = rec.second;
    s2.on = true;
    s2.shapes = r.second_cost->shapes;
    s2.original_ms = r.second_cost->bound_ms;
    s2.result_ms = result.applied.empty() ? s2.original_ms : SecondBindingMs(r, result.graph);
    s2.calibrate_s = r.second_cost->calibrate_s;
    s2.judged = r.second_cost->judged;
    s2.refused = r.second_cost->refused;
    s2.not_imported = r.second_cost->not_imported;
    s2.slack = r.o.second_binding_slack;
    r.info(
        Format("at %s the search's graph is estimated %.4g ms (the original %.4g ms); %lld graphs costed there, "
               "%lld estimated more than %g%% slower",
               s2.shapes.c_str(), s2.result_ms, s2.original_ms, static_cast<long long>(s2.judged),
               static_cast<long long>(s2.refused), 100 * s2.slack));
  }
  r.real_steps += result.real_steps;
  if (result.stop_reason == StopReason::kInterrupted)
    r.warn("search interrupted: checking and writing the best graph found so far (interrupt again to abort)");
  r.info(Format("search cost estimate %g -> %g ms", result.initial_cost, result.final_cost));
  r.info(Format("search stopped (%s) after %g s", StopReasonName(result.stop_reason), rec.seconds));
}

// The finishing passes, the opset the result needs, the target check and the
// original's interface.
void Finish(OptimiseRun& r) {
  FinishRecord& rec = r.res.finish = FinishRecord();
  // The graph as imported (static dimensions folded): where the search
  // started, and what is written if it applied nothing (the folding is part
  // of the optimisation; the verdict compares with AsGiven()).
  const Graph& imported = r.model.graph;
  Graph& optimised = r.optimised;
  const SearchResult& result = r.res.search.result;
  // Fold weight-only subgraphs (merged conv weights, scaled weights) into
  // initializers so that the written model does no extra work. No rewrite:
  // the original itself (not its canonical form).
  // The finishing passes (FinishPasses(): fold_constants, raise_batchnorm):
  // batch norms the search did not fold away go back to one node each (one
  // pass over the tensor instead of Mul + Add) only if the cost model agrees.
  optimised = result.applied.empty() && !r.res.canonicalise.rows_selected_early ? imported : result.graph;
  for (const std::string& name : FinishPasses()) {
    if (name == "fold_constants" && !r.o.fold_weights) continue;
    if (name == "fold_constants") {
      // The model's own weight-only nodes that would store more weight data
      // folded (float16 weights cast to float32) stay nodes (the pass).
      const std::vector<char> kept = WeightGrowingNodes(optimised);
      rec.kept_weight_nodes = static_cast<int>(std::count(kept.begin(), kept.end(), 1));
      if (rec.kept_weight_nodes > 0)
        r.info(
            Format("kept %d of the model's weight-only nodes as they are: folded, they would store more weight "
                   "data than it holds (ONNX Runtime folds them at load)",
                   rec.kept_weight_nodes));
    }
    Graph next = optimised;
    const int nodes = optimised.num_nodes();
    if (!PassRegistry::Builtin().Make(name)->Run(next)) continue;
    if (name == "raise_batchnorm") {
      if (!(r.cost->GraphCost(next) < r.cost->GraphCost(optimised))) continue;
      rec.raised_batchnorm = nodes - next.num_nodes();
      r.info("raised " + std::to_string(rec.raised_batchnorm) + " unfolded Mul/Add pairs back to BatchNormalization");
    } else if (name == "fold_constants") {
      rec.folded = nodes - next.num_nodes();
      r.info("folded " + std::to_string(rec.folded) + " weight-only nodes into initializers");
    }
    optimised = std::move(next);
  }

  // A rewrite that introduced a newer operator (HardSwish, opset 14) needs
  // the model written at that opset (within --target_opset, see above).
  if (const int64_t needed = RaiseToOpsetNeeded(optimised)) {
    rec.raised_opset = needed;
    r.info("the optimised graph uses operators of opset " + std::to_string(needed) + ": it is written at that opset");
  }

  // No target receives an operator it cannot run: the rules that produce
  // one were left out above; this holds the line for every other path.
  {
    const std::string& target = r.res.configure.target;
    std::set<std::string> had;  // in the file
    const Graph& given = r.model.AsGiven();
    for (NodeId id = 0; id < given.num_nodes(); ++id) had.insert(QualifiedOp(given.node(id).domain, given.node(id).op));
    for (NodeId id = 0; id < optimised.num_nodes(); ++id) {
      const Node& n = optimised.node(id);
      const OpDef* def = n.opaque() ? nullptr : OpRegistry::Global().Find(n.domain, n.op);
      if (def != nullptr && !def->RunsOn(target) && !had.count(QualifiedOp(n.domain, n.op)))
        Fail("internal error: the optimised graph has a ", QualifiedOp(n.domain, n.op),
             " node, which --target=", target, " does not run");
    }
  }

  // The written model keeps the original's interface: input and output
  // names, types, symbolic dimensions.
  rec.renamed_outputs = RestoreInterface(imported, optimised);
  if (rec.renamed_outputs > 0)
    r.info("restored the names of " + std::to_string(rec.renamed_outputs) + " graph outputs");
  rec.before = Summarize(r.model.AsGiven());
  rec.after = Summarize(optimised);
}

// The numerical check against the original (also at a second binding of
// symbolic dimensions).
void Check(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  CheckRecord& rec = r.res.check = CheckRecord();
  r.original_other_cut = r.optimised_other_cut = r.original_other = Graph();
  r.other_binding.clear();
  const LoadedModel& model = r.model;
  // The original as the file computes it (static dimensions not folded).
  const Graph& original = r.model.AsGiven();
  const Graph& optimised = r.optimised;
  // Every optimised graph is checked against the original before it is written.
  rec.symbolic_dims = original.info().symbolic_dims;
  // Interrupted with nothing changed: the original is written as it came,
  // and comparing it with itself would only keep the user waiting.
  if (Interrupted(o) && optimised.StructuralHash() == original.StructuralHash()) {
    rec.unchanged = rec.skipped = true;
    return;
  }
  std::string applied_list;
  for (const auto& a : r.res.search.result.applied) applied_list += (applied_list.empty() ? "" : ", ") + a;
  if (applied_list.empty()) applied_list = "none";
  EquivalenceResult check = CompareGraphs(original, optimised, o.seed, o.tolerance);
  for (const auto& note : check.notes) r.warn(note);
  rec.notes = check.notes;
  rec.max_error = check.max_error;
  rec.allowed = check.allowed;
  rec.outputs_compared = check.outputs;
  rec.opaque_nodes = check.opaque_nodes;
  if (!check.within)
    Fail("the optimised graph differs from the original (relative error ", check.max_error, " > ", check.allowed,
         " at '", check.worst_output, "'); rules applied: ", applied_list, "; nothing was written");

  rec.unchanged = optimised.StructuralHash() == original.StructuralHash();
  // A model with symbolic dimensions was optimised at one binding
  // (--free_dim): the written model must be right at others too. Both are
  // written, imported again at another binding, and compared.
  if (original.info().symbolic_dims && !rec.unchanged) {
    ImportOptions other;
    Graph original_other;
    // The file again where there is one (its weights the ones in memory); a
    // file that changed since it was loaded is an error, not a note. Where
    // the model does not fit the second binding, the given shapes doubled,
    // then made smaller (a model given its largest size).
    std::string failed;
    for (ImportOptions& next : SecondBindings(r)) {
      other = std::move(next);
      try {
        original_other = ImportAtBinding(model, original, other);
        failed.clear();
        break;
      } catch (const ModelFileChanged&) {
        throw;  // checked by ImportFileAgain, also where the file no longer imports
      } catch (const Error& e) {
        if (failed.empty()) failed = BindingText(other) + ": " + e.what();
      }
    }
    if (!failed.empty() && model.folded_at_binding) {
      // Every shape computed from the symbolic dimensions was folded at
      // this binding (the importer found no second one either): the
      // optimised graph would run at these shapes only, not a drop-in
      // replacement.
      rec.general_ok = false;
      rec.general_note = "the model does not import at a second binding of its symbolic dimensions (" + failed +
                         ") and its shape computations were folded at the shapes it was optimised at: the "
                         "optimised graph would run at those only, so the original is written";
      r.warn(rec.general_note);
    } else if (!failed.empty()) {
      rec.general_note = "the original model does not import at a second binding of its symbolic dimensions (" +
                         failed + "); checked at the first binding only";
    }
    if (rec.general_note.empty()) {
      try {
        Graph optimised_other = ReimportGraph(optimised, "optimised", other, SharingWeights());
        EquivalenceResult c = CompareGraphs(original_other, optimised_other, o.seed + 1, o.tolerance);
        if (!c.within) Fail("relative error ", c.max_error, " at '", c.worst_output, "'");
        rec.general_note = "also checked with symbolic dimensions bound to " + BindingText(other) +
                           " (max relative error " + std::to_string(c.max_error) + ")";
        if (o.second_binding_verdict != "off") {  // the verdict there (Measure)
          r.original_other_cut = CutAtOpaque(original_other);
          r.optimised_other_cut = CutAtOpaque(optimised_other);
          r.original_other = original_other;
          r.other_binding = SymbolicInputShapes(original, original_other);
          if (r.other_binding.empty()) r.other_binding = BindingText(other);
        }
      } catch (const Error& e) {
        rec.general_ok = false;
        rec.general_note = std::string("the optimised graph is not right with symbolic dimensions bound to ") +
                           BindingText(other) + " (" + e.what() + "; rules applied: " + applied_list +
                           "): the original is written";
        r.warn(rec.general_note);
      }
    }
    r.info(rec.general_note);
  }
}

static WriteOptions WrittenForm(OptimiseRun& r, const Graph& written, std::string* note, std::string* converted);

// The level of the measurements that can only keep the original (the guard,
// the verdict at the second binding): 95%, in a retry too. A retry's own
// verdict is held to 1 - 0.05/N so that the retries together claim "faster"
// at 95%; a veto at that level would be looser (a wider interval finds
// fewer graphs slower): post_norm_encoder_op13's retry, 0.985x
// [0.967, 1.004] in ONNX Runtime at 97.5%, was written.
constexpr double kVetoLevel = 0.95;

// Where `backend` runs model files and the import converted the model from
// its file to another form (VerdictRecord::files), the file the run would
// write for r.optimised (Write's form), written into r.verdict_dir: the
// verdict times the input file against it. "" otherwise; `why` then says why
// not where the files were wanted ("" where they were not).
static std::string FileToWrite(OptimiseRun& r, const TimingBackend& backend, std::string* why) {
  why->clear();
  const Graph& given = r.model.AsGiven();
  const int64_t source_opset = given.info().source_opset;
  if (!backend.times_files() || source_opset <= 0 || source_opset == given.opset()) return "";
  if (r.model.file.empty() || r.model.external_data) {
    *why = !r.model.file.empty() ? "its weights are in external data files"
           : r.model.from_zoo    ? "a zoo model has no input file to time"
                                 : "there is no input file to time (its nodes are out of order)";
    *why += ": the graphs are timed, not the files";
    return "";
  }
  try {
    // The file made for this attempt's graph already (a retry's graph is
    // another: written again).
    const auto path = [&r] { return r.verdict_dir + "/rlflow-to-write.onnx"; };
    const uint64_t hash = r.optimised.StructuralHash();
    if (!r.verdict_dir.empty() && r.verdict_file_hash == hash) return path();
    std::string note, converted;
    const WriteOptions write = WrittenForm(r, r.optimised, &note, &converted);
    if (WritesExternalData(r.optimised, write)) Fail("its weights would be written in external data files");
    if (r.verdict_dir.empty()) r.verdict_dir = MakeTempDir("rlflow-verdict-");
    r.verdict_file_hash = 0;
    WriteOnnxFile(r.optimised, path(), &note, write);
    r.verdict_file_hash = hash;
    return path();
  } catch (const Error& e) {
    *why = std::string("the file to be written could not be made (") + e.what() + "): the graphs are timed";
    return "";
  }
}

// Times `a` against `b` on `backend`: the input file against `file` where one
// was made (FileToWrite; `*files` set; their inputs as `inputs`'s, null: the
// model's as given), else the graphs; a pair of files the backend cannot run
// falls back to the graphs, `note` saying why.
static PairedTimes TimeFilesOrGraphs(OptimiseRun& r, TimingBackend& backend, const std::string& file, const Graph& a,
                                     const Graph& b, int pairs, const TimingOptions& timing, bool* files,
                                     std::string* note, const Graph* inputs = nullptr) {
  *files = false;
  if (!file.empty()) {
    try {
      PairedTimes t = backend.TimePairedFiles(r.model.file, file, inputs ? *inputs : r.model.AsGiven(), pairs, timing);
      *files = true;
      return t;
    } catch (const Error& e) {
      *note = backend.name() + " could not time the files (" + e.what() + "): the graphs are timed";
      r.warn(*note);
    }
  }
  return backend.TimePaired(a, b, pairs, timing);
}

// The guard (PipelineOptions::guard): the pair the verdict found faster,
// timed in the guard's runtime too (at least the verdict's pairs, at
// kVetoLevel; the files where the import converted the model, as
// FileToWrite); the original is kept if it runs faster there. A runtime that cannot be started (no
// Node.js or onnxruntime-node) leaves the run unguarded, said so; one that
// cannot run the pair keeps the original.
void Guard(OptimiseRun& r, const Graph& optimised_cut, const TimingOptions& timing) {
  VerdictRecord& rec = r.res.verdict;
  rec.guard_device = r.guard_device;
  std::string why;
  if (GuardBackend(r, &why) == nullptr) {
    rec.guard_note = std::string("not measured in ") + r.guard_device + " (" + why + ")";
    r.warn("the result is not checked in ONNX Runtime: " + rec.guard_note);
    return;
  }
  // As many pairs as the verdict's, and at least what the guard's runtime
  // gives a model of this run time (VerdictPairs: ONNX Runtime's session
  // pairs, and a fast model's up to 120 in 12 of them, as its own verdict
  // with --device=ort would take: 40 pairs in 4 session pairs had left the
  // intervals of 1-3 ms models at +-2-6%, too wide to see a loss of 4%).
  const int pairs = r.o.measure_runs > 0
                        ? rec.pairs
                        : std::max(rec.pairs, VerdictPairs(r.res.reference_run.seconds, *r.guard_backend));
  const TimingOptions guard_timing = pairs == rec.pairs ? timing : VerdictTiming(pairs, r.o.seed);
  std::string files_note;
  const std::string file = FileToWrite(r, *r.guard_backend, &files_note);
  r.info("measuring both " + std::string(file.empty() ? "" : "files ") + "in " + r.guard_device + " too (the guard, " +
         std::to_string(pairs) + " interleaved pairs)");
  try {
    static_cast<Verdict&>(rec.guard) = Judge(TimeFilesOrGraphs(r, *r.guard_backend, file, r.original_cut, optimised_cut,
                                                               pairs, guard_timing, &rec.guard_files, &files_note),
                                             kVetoLevel);
    rec.guard_note = files_note;
  } catch (const Error& e) {
    rec.guard_note = r.guard_device + " could not time the pair: " + e.what();
    rec.keep_original = true;
    r.warn(rec.guard_note + "; the original is written");
    return;
  }
  rec.guarded = true;
  r.info("in " + r.guard_device + ": " + rec.guard.ToString());
  if (rec.guard_slower()) {
    rec.keep_original = true;
    r.warn("the optimised graph is faster on " + r.res.configure.device + " and slower in " + r.guard_device +
           ": the original is kept");
  }
}

// The verdict at the check's second binding of the symbolic dimensions
// (PipelineOptions::second_binding_verdict), on the device, as many pairs
// as the verdict's: the written model keeps its symbolic dimensions and
// will run at shapes other than the one it was optimised at (NAFNet's
// channel layer norms as the rules write them, optimised at 1x3x64x64 and
// 1.075x faster there in ORT, ran 0.961x [0.952, 0.967] at 2x3x32x128).
void SecondBindingVerdict(OptimiseRun& r, const TimingOptions& timing) {
  const PipelineOptions& o = r.o;
  VerdictRecord& rec = r.res.verdict;
  if (o.second_binding_verdict == "off" || r.other_binding.empty()) return;
  // Given (--second_input_shape), it is where the model runs too.
  const bool given = !o.second_input_shapes.empty();
  bool required = o.second_binding_verdict == "require" || (o.second_binding_verdict == "auto" && given);
  if (o.second_binding_verdict == "auto")
    for (const std::string& name : InputsWithSymbolicDims(r.model.AsGiven()))
      if (!o.input_shapes.count(name) && !o.input_data.count(name)) required = true;
  rec.second_binding = r.other_binding;
  rec.second_required = required;
  rec.second_given = given;
  if (Interrupted(o) || (r.runner && r.runner->ShouldStop())) {
    rec.second_note = "not measured: interrupted";
    return;
  }
  // As many pairs as the verdict's (a fast model's up to 120 in a block of
  // fresh sessions per 10, VerdictPairs and VerdictTiming): what a second
  // binding shows is a loss of a few percent, and ORT's sessions of one
  // graph differ by about as much (NAFNet at 2x3x32x128, its written file:
  // 0.94x to 0.99x by session, 4 sessions x 30 pairs), so 40 pairs in 4
  // session pairs did not resolve it (0.955x [0.916, 1.009]; 120 in 4:
  // 0.972x [0.933, 1.019]).
  // The files where the import converted the model, as the verdict's
  // (FileToWrite), their inputs at this binding: the file as given is what
  // the model runs as there too.
  std::string files_note;
  const std::string file = FileToWrite(r, *r.counted, &files_note);
  r.info(std::string("measuring both ") + (file.empty() ? "" : "files ") + "at " +
         (given ? "--second_input_shape's" : "the check's second binding of the symbolic dimensions") + " too (" +
         r.other_binding + ", " + std::to_string(rec.pairs) + " interleaved pairs)");
  try {
    static_cast<Verdict&>(rec.second) =
        Judge(TimeFilesOrGraphs(r, *r.counted, file, r.original_other_cut, r.optimised_other_cut, rec.pairs, timing,
                                &rec.second_files, &files_note, &r.original_other),
              kVetoLevel);
    rec.second_note = files_note;
  } catch (const Error& e) {
    rec.second_note = std::string("the pair could not be timed there: ") + e.what();
    if (required) rec.keep_original = true;
    r.warn("at the second binding (" + r.other_binding + ") " + rec.second_note +
           (required ? "; the original is written" : ""));
    return;
  }
  rec.second_measured = true;
  r.info("at " + r.other_binding + ": " + rec.second.ToString());
  if (rec.second_vetoed()) {
    rec.keep_original = true;
    r.warn("the optimised graph is faster at the shapes it was optimised at and slower at " + r.other_binding +
           ": the original is kept (" +
           (given                                   ? std::string("--second_input_shape: the model runs there too")
            : o.second_binding_verdict == "require" ? std::string("--second_binding_verdict=require")
                                                    : std::string("no --input_shape said where the model runs")) +
           ")");
  } else if (rec.second_slower()) {
    r.warn("the optimised graph is faster at the shapes given and slower at " + r.other_binding +
           ": written all the same (--second_binding_verdict=" + o.second_binding_verdict +
           ": the shapes given are where the model runs)");
  }
}

// Both graphs measured end to end, interleaved: the verdict (its interval at
// r.level).
void Measure(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  VerdictRecord& rec = r.res.verdict = VerdictRecord();
  const CheckRecord& check = r.res.check;
  const double level = r.level;
  // Measure both end to end; keep the original unless the result is
  // faster: paired interleaved runs, the speedup's 95% interval above 1.0
  // in wall and CPU time. Opaque nodes are the same in both graphs: the
  // parts around them are timed.
  // Interrupted with nothing changed: nothing to decide, and the user asked
  // to stop (a batch-16 ResNet-50 had measured its unchanged graph for 21 s
  // after Ctrl-C).
  if (check.unchanged && Interrupted(o)) {
    rec.skipped = rec.keep_original = true;
    rec.after_estimate = r.cost->RunCost(r.optimised);
    r.info(r.res.branches.changed()
               ? "interrupted with the graph around the optimised subgraphs unchanged: not measured, written as it came"
               : "interrupted with the graph unchanged: not measured, the original is written as it came");
    return;
  }
  Graph optimised_cut = CutAtOpaque(r.optimised);
  // An unchanged graph's runs (for the estimate) have no session pairs to
  // span: the executor's count (at least the backend's fewest).
  rec.pairs = o.measure_runs > 0 ? o.measure_runs
              : check.unchanged  ? std::max(VerdictPairs(r.res.reference_run.seconds), r.counted->min_paired_pairs())
                                 : VerdictPairs(r.res.reference_run.seconds, *r.counted);
  TimingOptions timing = VerdictTiming(rec.pairs, o.seed);
  // The estimates are reported against the measured times at the machine's
  // speed now: the original runs again first (half the calibration's runs,
  // about half a second; its keys are cached, so nothing is recorded),
  // unless the time base was read less than time_base_max_age_s ago (by
  // default always). Read 20 s before, after a search, it had put a
  // model's estimate 13% under its measured time; read again, within 2%;
  // read 2 s before (a small model's calibration), up to 32% off.
  // A reading is a few runs: one taken in a slow moment of a second (the
  // host's, here up to 2x) had put a 200 ms model's estimate 16% over its
  // measured time, the verdict's runs 6% slower than the calibration's and
  // the reading 22%. So the reading taken here is taken again after the
  // measurement too, and the two bracket it: their geometric mean is the
  // time base at the verdict.
  const auto read_time_base = [&r]() -> double {
    const CalibrationReport now = r.cost->Calibrate(r.original_cut, 0, std::max(3, r.cal_runs / 2));
    return now.time_base_known ? now.time_base : 0.0;
  };
  if (Seconds(r.time_base_read) > o.time_base_max_age_s && r.original_cut.num_nodes() > 0) {
    rec.time_base_before = read_time_base();
    if (rec.time_base_before > 0) r.time_base_since = rec.time_base_before;
    r.time_base_read = Clock::now();
  }
  rec.time_base = r.time_base_since;
  // How long the measurement will take, from the reference run: for a slow
  // model (a UNet at 20 s a run) it is minutes, also after an interrupt.
  const double run_s = r.res.reference_run.seconds;
  if (!check.unchanged && rec.pairs < MinPairsFor(level))
    r.warn("--measure_runs=" + std::to_string(rec.pairs) + " is too few pairs for a " + Format("%g", level * 100) +
           "% interval (at least " + std::to_string(MinPairsFor(level)) + "): the verdict can only be 'within noise'");
  // Interleaved pairs cancel the machine's drift from pair to pair, not a
  // move of its speed by 1.5x-2x within the measurement (a slow moment of
  // the host, here many a minute in a noisy hour): the readings around it
  // then disagree, and it is taken again (PipelineOptions::steady_ratio).
  // Where the moment began and ended inside it, its own runs disagree
  // instead: that is reported (VerdictRecord::drifts), not measured again
  // (measuring again on it too changed no estimate's error in two corpus
  // sweeps, and took a second measurement in 15 of 49 runs in a quiet hour).
  // The files where the import converted the model (VerdictRecord::files).
  const std::string file = check.unchanged ? "" : FileToWrite(r, *r.counted, &rec.files_note);
  if (!rec.files_note.empty()) r.info(rec.files_note);
  VerdictRecord steadiest;
  double steadiest_ratio = 0;
  for (;;) {
    const auto t_measure = Clock::now();
    ++rec.measurements;
    std::vector<double> series;  // the runs in the order taken (a pair's two together)
    if (check.unchanged) {
      r.info("measuring the (unchanged) graph end to end (" + std::to_string(rec.pairs) + " runs, " +
             About(rec.pairs * run_s) + ")");
      timing.samples = rec.pairs;
      series = r.counted->TimeGraphRuns(r.original_cut, timing);
      rec.before_ms = rec.after_ms = Median(series);
    } else {
      r.info(std::string(file.empty() || !rec.files_note.empty()
                             ? "measuring original and optimised graphs end to end ("
                             : "measuring the model file as given and the file to be written end to end (the "
                               "import converted the model to another form; ") +
             std::to_string(rec.pairs) + " interleaved pairs, " + About(2 * rec.pairs * run_s) + ")");
      const PairedTimes times = TimeFilesOrGraphs(r, *r.counted, rec.files_note.empty() ? file : "", r.original_cut,
                                                  optimised_cut, rec.pairs, timing, &rec.files, &rec.files_note);
      static_cast<Verdict&>(rec) = Judge(times, level);
      for (size_t i = 0; i < times.wall_a.size() && i < times.wall_b.size(); ++i)
        series.push_back(times.wall_a[i] + times.wall_b[i]);
      rec.before_ms = rec.a_ms;
      rec.after_ms = rec.b_ms;
      r.info(rec.ToString());
    }
    rec.drifts.push_back(DriftRatio(series));
    if (rec.drifts.back() > o.steady_ratio)
      r.info(
          Format("the machine's speed moved inside the measurement: its slowest quarter of runs took %.2fx as long "
                 "as its fastest",
                 rec.drifts.back()));
    if (!(rec.time_base_before > 0) || (r.runner && r.runner->ShouldStop())) break;  // no runner: a stage run alone
    rec.time_base_after = read_time_base();
    if (!(rec.time_base_after > 0)) break;
    rec.time_base = std::sqrt(rec.time_base_before * rec.time_base_after);
    r.time_base_since = rec.time_base;
    r.time_base_read = Clock::now();
    rec.readings.emplace_back(rec.time_base_before, rec.time_base_after);
    const double ratio =
        std::max(rec.time_base_before, rec.time_base_after) / std::min(rec.time_base_before, rec.time_base_after);
    if (steadiest.measurements == 0 || ratio <= steadiest_ratio) {
      steadiest = rec;
      steadiest_ratio = ratio;
    }
    if (ratio <= o.steady_ratio) break;
    const double took_s = Seconds(t_measure);
    if (rec.measurements > o.unsteady_remeasures || took_s > o.remeasure_max_s || Interrupted(o) ||
        (r.runner && r.runner->ShouldStop()))
      break;
    r.info(Format(
        "the machine's speed moved during the measurement (the original ran %.2fx as fast right after it as right "
        "before it): measuring again (%d of at most %d)",
        rec.time_base_after / rec.time_base_before, rec.measurements + 1, o.unsteady_remeasures + 1));
    rec.time_base_before = rec.time_base_after;  // read right before the next measurement
  }
  if (rec.readings.size() > 1 && steadiest.measurements != rec.measurements) {
    // An earlier measurement's readings were nearer each other: it stands.
    std::vector<std::pair<double, double>> readings = rec.readings;
    std::vector<double> drifts = rec.drifts;
    const int measurements = rec.measurements;
    rec = steadiest;
    rec.kept = rec.measurements - 1;
    rec.measurements = measurements;
    rec.readings = std::move(readings);
    rec.drifts = std::move(drifts);
    r.time_base_since = rec.time_base;
    r.info(Format(
        "measurement %d of %d is kept, the steadiest (readings %.3f before it, %.3f after it; its runs' quarters "
        "%.2fx apart): %s",
        rec.kept + 1, rec.measurements, rec.time_base_before, rec.time_base_after, rec.drifts[rec.kept],
        check.unchanged ? Format("%.4g ms", rec.before_ms).c_str() : rec.ToString().c_str()));
  } else {
    rec.kept = rec.measurements - 1;
  }
  rec.after_estimate = r.cost->RunCost(r.optimised);
  rec.keep_original = check.unchanged || !check.general_ok || (!o.force_optimised && !rec.faster());
  if (!rec.keep_original && !o.force_optimised && !r.guard_device.empty()) Guard(r, optimised_cut, timing);
  if (!rec.keep_original && !o.force_optimised) SecondBindingVerdict(r, timing);
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
  Runner& runner = *r.runner;
  // A rewrite can look like a gain to the per-node costs and lose in the
  // runtime: ONNX Runtime fuses patterns (a transpose and a scale into its
  // FusedMatMul) that one rewrite breaks while the others pay. When the
  // verdict does not find the graph faster and its rewrites come from more
  // than one rule, the search runs again leaving out one applied rule at a
  // time (the least applied first), at most --retries times; the first
  // graph found faster is kept. Each retry's verdict is at level 1 - 0.05/N
  // (N retries), so that the retries together are held to 95%.
  // The same when the guard's runtime (which fuses nodes) runs the graph slower.
  // The same when the result is slower at the check's second binding
  // (--second_binding_verdict=require).
  const bool guard_slower = res.verdict.guard_slower();
  const bool second_slower = res.verdict.second_vetoed();
  const int retries = o.retries >= 0 ? o.retries : r.backend->fuses_nodes() || guard_slower || second_slower ? 2 : 0;
  if (retries > 0 && !res.check.unchanged && res.check.general_ok &&
      (!res.verdict.faster() || guard_slower || second_slower) && !o.force_optimised && !runner.ShouldStop()) {
    std::vector<std::pair<int, std::string>> by_count;  // (applications, rule id), first applied first
    for (const std::string& name : res.search.result.applied) {
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
    if (by_count.size() >= 2 && res.verdict.pairs >= MinPairsFor(level)) {
      std::vector<RetryRecord> done;
      for (int t = 0; t < tries; ++t) {
        if (runner.ShouldStop()) break;
        const auto& [count, id] = by_count[t];
        std::vector<char> mask = r.enabled;
        for (int k = 0; k < r.rule_db->rules_size(); ++k)
          if (r.rule_db->rules(k).id() == id) mask[k] = 0;
        r.info(
            Format("the verdict does not find the optimised graph faster%s: searching again without rule %s "
                   "(applied %d times; retry %d of %d, verdict at %g%%)",
                   guard_slower    ? (" in " + r.guard_device).c_str()
                   : second_slower ? (" at " + res.verdict.second_binding).c_str()
                                   : "",
                   id.c_str(), count, t + 1, tries, level * 100));
        PipelineResult saved = res;
        Graph saved_optimised = r.optimised;
        auto t_retry = Clock::now();
        Attempt(r, mask, level);
        RetryRecord retry;
        retry.left_out = id;
        retry.applied = static_cast<int>(res.search.result.applied.size());
        retry.outcome = res.check.unchanged ? "unchanged" : res.verdict.OutcomeName();
        retry.speedup = res.check.unchanged ? 1.0 : res.verdict.wall.median;
        if (res.verdict.guarded) {
          retry.guard_device = res.verdict.guard_device;
          retry.guard_outcome = res.verdict.guard.OutcomeName();
          retry.guard_speedup = res.verdict.guard.wall.median;
        }
        if (res.verdict.second_measured) {
          retry.second_outcome = res.verdict.second.OutcomeName();
          retry.second_speedup = res.verdict.second.wall.median;
        }
        retry.seconds = Seconds(t_retry);
        done.push_back(retry);
        if (!res.verdict.keep_original) {
          r.info("kept the graph found without rule " + id);
          break;
        }
        CalibrationReport calibration_now = res.calibrate;
        res = std::move(saved);
        res.calibrate = std::move(calibration_now);
        r.optimised = std::move(saved_optimised);
      }
      res.retries = std::move(done);
    }
  }
}

// How `written` is written: at the input's opset where it was converted for
// the search (11, 12; 7 to 10 are written at 11; 18 to 26 were converted to
// 17), where the converted model imported again computes the same; else at
// its own opset, `note` saying why. `converted`: the line saying it was
// converted back ("" where it was not). Throws rlflow::Error where a model
// of opsets 18+ does not convert back (there is no other form to write).
static WriteOptions WrittenForm(OptimiseRun& r, const Graph& written, std::string* note, std::string* converted) {
  WriteOptions write;
  note->clear();
  converted->clear();
  const int64_t source_opset = written.info().source_opset;
  if (source_opset <= 0 || source_opset == written.opset()) return write;
  int written_opset = 0;
  try {
    Graph back =
        ReimportGraph(written, "the model converted back to its opset", r.model.import, write, &written_opset, note);
    if (written_opset != written.opset()) {
      EquivalenceResult c = CompareGraphs(written, back, r.o.seed, r.o.tolerance);
      if (!c.within) Fail("relative error ", c.max_error, " at '", c.worst_output, "'");
      *converted = "converted back to opset " + std::to_string(written_opset) + " (checked, max relative error " +
                   Format("%g", c.max_error) + ")";
    }
  } catch (const Error& e) {
    if (source_opset > kMaxOpset)
      Fail("the optimised model converted back to opset ", source_opset, " does not check (", e.what(), ")");
    *note = "written at opset " + std::to_string(written.opset()) + ": the model converted back to opset " +
            std::to_string(written_opset) + " does not check (" + e.what() + ")";
    write.at_graph_opset = true;
  }
  return write;
}

// Saves the timing cache; writes the model (the original unless the result is
// faster), the DOT graph and the picture, each atomically.
void Write(OptimiseRun& r) {
  const PipelineOptions& o = r.o;
  WriteRecord& rec = r.res.write;
  const LoadedModel& model = r.model;
  const std::string& output = r.res.load.output;
  const Graph& original = r.model.AsGiven();
  const bool keep_original = r.res.verdict.keep_original;
  const Graph& written = keep_original ? original : r.optimised;
  rec.real_steps = r.real_steps;
  rec.real_measurements = r.counted->measurements();
  const std::string& cache = r.res.configure.timing_cache;
  if (!cache.empty()) {
    try {
      r.cost->SaveCache(cache);
      // The second binding's timings too: merged into what was just saved
      // (an entry both timed keeps the second model's, as loading keeps the
      // first one read).
      if (r.second_cost) {
        r.second_cost->cost->LoadCache(cache);
        r.second_cost->cost->SaveCache(cache);
      }
    } catch (const Error& e) {
      r.warn(std::string("timing cache not saved: ") + e.what());
    }
  }
  // The original is written as it came: its file's bytes, unchanged (not
  // when its weights are in external files: those are written beside the
  // output from the graph).
  const bool write_bytes = keep_original && !model.file.empty() && !model.external_data;
  if (write_bytes) {
    CheckWritablePath(output, "--output");
    model.CopyFileTo(output);
  } else {
    std::string converted;
    const WriteOptions write = WrittenForm(r, written, &rec.opset_note, &converted);
    if (!converted.empty()) r.info(converted);
    CheckWritablePath(output, "--output");
    std::string ignored;
    WriteOnnxFile(written, output, write.at_graph_opset ? &ignored : &rec.opset_note, write);
    rec.external_data = WritesExternalData(written, write);
    if (rec.external_data) r.info("weights written to '" + output + ".data' (external data)");
  }
  if (!rec.opset_note.empty()) r.warn(rec.opset_note);
  if (!o.dot.empty()) WriteFileAtomically(ResolveUserPath(o.dot), written.ToDot());
  if (!o.picture.empty()) {
    std::map<std::string, int> counts;
    const std::vector<std::string>& applied = r.res.search.result.applied;
    for (const std::string& a : applied) ++counts[a];
    std::vector<std::string> lines;
    if (keep_original && !applied.empty())
      lines.push_back("(the search's graph, not written: the original was, see the verdict)");
    for (const auto& [a, n] : counts) lines.push_back(a + " x" + std::to_string(n));
    WritePng(RewritePictureDot(original, r.optimised, lines), ResolveUserPath(o.picture));
    r.info("picture of the rewritten regions written to '" + ResolveUserPath(o.picture) + "'");
  }
}

// The run-wide figures (timing cache, memory) and the JSON report.
void Report(OptimiseRun& r) {
  ReportRecord& rec = r.res.report;
  rec.cache_entries = static_cast<int64_t>(r.cost->cache_size());
  rec.ops_timed = r.cost->measurements();
  rec.cache_hits = r.cost->hits();
  rec.peak_memory_mb = PeakMemoryMb();
  if (!r.o.report.empty()) {
    rec.path = ResolveUserPath(r.o.report);
    WriteFileAtomically(rec.path, r.res.ReportJson());
  }
}

// ---- each stage's part of the summary and the report, from its record ----
namespace {

void DescribeConfigure(const PipelineResult& p, std::string&, Json& j) {
  const ConfigureRecord& c = p.configure;
  j["device"] = c.device;
  j["target"] = c.target;
  j["threads"] = c.threads;
  j["rules"]["database"] = c.rules_path;
  j["rules"]["count"] = c.rule_count;
  j["search"]["strategy"] = c.search;
  j["search"]["params"] = c.search_params;
  j["search"]["budget"] = p.options.budget;
  j["search"]["greedy_finish"] = p.options.greedy_finish;
  j["search"]["time_limit_s"] = p.options.time_limit_s;
  j["search"]["seed"] = p.options.seed;
  j["timing_cache"]["path"] = c.timing_cache;
}

void DescribeLoad(const PipelineResult& p, std::string& s, Json& j) {
  const LoadRecord& l = p.load;
  s += Format("model:      %s\n", l.model_source.c_str());
  s += Format("rules:      %d (%s)", p.configure.rule_count, p.configure.rules_path.c_str());
  if (l.rules_newer + l.rules_elsewhere > 0)
    s += Format("; %d not used (%d need a newer opset, %d make operators --target=%s does not run)",
                l.rules_newer + l.rules_elsewhere, l.rules_newer, l.rules_elsewhere, p.configure.target.c_str());
  s += "\n";
  j["model"] = l.model_source;
  Json inputs = Json::array();
  for (const auto& in : l.inputs) {
    const bool bound = in.declared != ShapeToString(in.used);
    if (bound)
      s += Format("input:      %s %s run at %s%s\n", in.name.c_str(), in.declared.c_str(),
                  ShapeToString(in.used).c_str(),
                  in.given         ? " (--input_shape)"
                  : in.fitted      ? " (fitted: the model does not fit at --free_dim; give --input_shape)"
                  : in.by_dim_name ? " (--input_shape: its dimensions' names are bound there)"
                                   : " (--free_dim)");
    if (bound && !in.fixed_axes.empty()) {
      std::string axes;
      for (int a : in.fixed_axes) axes += (axes.empty() ? "" : ", ") + std::to_string(a);
      s.insert(s.size() - 1, Format("; the model fixes %s %s: bound there for the check too",
                                    in.fixed_axes.size() == 1 ? "axis" : "axes", axes.c_str()));
    }
    auto filled = p.reference_run.filled.find(in.name);
    inputs.push_back(Json{{"name", in.name},
                          {"declared", in.declared},
                          {"used", in.used},
                          {"bound_by", !bound           ? "static"
                                       : in.given       ? "input_shape"
                                       : in.fitted      ? "fitted"
                                       : in.by_dim_name ? "input_shape_dim_names"
                                                        : "free_dim"},
                          {"fixed_axes", in.fixed_axes},
                          {"filled", filled == p.reference_run.filled.end() ? "" : filled->second}});
  }
  j["inputs"] = inputs;
  j["rules"]["not_used"] = Json{{"newer_opset", l.rules_newer}, {"not_on_target", l.rules_elsewhere}};
  if (l.static_dims > 0)
    s += Format("folded:     %d static dimensions of symbolic shapes (and the arithmetic on them)\n", l.static_dims);
  j["static_dims_folded"] = l.static_dims;
}

void DescribeReferenceRun(const PipelineResult& p, std::string&, Json& j) {
  j["reference_run_s"] = p.reference_run.seconds;
}

void DescribeCanonicalise(const PipelineResult& p, std::string&, Json& j) {
  j["canonical_form"] = Json{{"lowered_batchnorm", p.canonicalise.lowered_batchnorm},
                             {"rows_selected_early", p.canonicalise.rows_selected_early}};
}

void DescribeCalibrate(const PipelineResult& p, std::string&, Json& j) {
  const CalibrationReport& c = p.calibrate;
  Json per_op = Json::object();
  for (const auto& [op, o] : c.per_op)
    per_op[op] = Json{{"nodes", o.nodes}, {"ms", o.ms}, {"spread", o.spread}, {"context_factor", o.factor}};
  j["cost_model"] = Json{{"overhead_ms_per_node", c.overhead_ms},
                         {"fixed_ms_per_run", c.fixed_ms},
                         {"keys_calibrated", c.keys},
                         {"keys_timed_now", c.new_keys},
                         {"time_base", c.time_base},
                         {"time_base_known", c.time_base_known},
                         {"time_base_at_verdict", p.TimeBaseNow()},
                         {"time_base_before_verdict", p.verdict.time_base_before},
                         {"time_base_after_verdict", p.verdict.time_base_after},
                         {"per_op", per_op}};
}

void DescribeSearch(const PipelineResult& p, std::string& s, Json& j) {
  const SearchRecord& rec = p.search;
  const SearchResult& r = rec.result;
  std::map<std::string, int> rule_counts;
  for (const auto& a : r.applied) ++rule_counts[a];
  // Each round's share of the graphs explored, where there were several.
  std::string by_round;
  for (const SearchRoundRecord& f : rec.per_round)
    by_round += (by_round.empty() ? "" : " + ") + std::to_string(f.graphs_explored);
  if (rec.per_round.size() > 1)
    by_round = " (" + by_round + " by round)";
  else
    by_round.clear();
  s += Format(
      "search:     %s, %d round%s, %.2f s, stopped: %s; %lld graphs explored%s, %lld rewrites costed, %lld "
      "graphs built; %zu rewrites applied%s\n",
      p.configure.search.c_str(), rec.rounds, rec.rounds == 1 ? "" : "s", rec.seconds, StopReasonName(r.stop_reason),
      static_cast<long long>(r.graphs_explored), by_round.c_str(), static_cast<long long>(r.rewrites_costed),
      static_cast<long long>(r.graphs_built), r.applied.size(),
      r.finish_applied > 0 ? (" (" + std::to_string(r.finish_applied) + " by the greedy finish)").c_str() : "");
  const SearchRecord::SecondBinding& s2 = rec.second;
  if (s2.on)
    s += Format(
        "            at %s too (--second_binding_search): taken only graphs estimated at most %g%% slower there "
        "than the original; %lld graphs costed there, %lld slower than that; the result %.4g ms there (the "
        "original %.4g ms)\n",
        s2.shapes.c_str(), 100 * s2.slack, static_cast<long long>(s2.judged), static_cast<long long>(s2.refused),
        s2.result_ms, s2.original_ms);
  else if (!s2.note.empty())
    s += "            at one binding (--second_binding_search): " + s2.note + "\n";
  if (r.gains_resolved > 0)
    s += Format(
        "noise rule: %lld kinds of rewrite had an estimated gain within the timings' noise or from more kernels "
        "doing the same work; timed against the original side (%.1f s), %lld were faster\n",
        static_cast<long long>(r.gains_resolved), r.gains_resolve_s, static_cast<long long>(r.gains_confirmed));
  Json applied = Json::object();
  for (const auto& [a, n] : rule_counts) {
    s += Format("  %3d x %s\n", n, a.c_str());
    applied[a] = n;
  }
  Json& js = j["search"];
  js["finish_applied"] = r.finish_applied;
  js["time_s"] = rec.seconds;
  js["stop_reason"] = StopReasonName(r.stop_reason);
  js["rounds"] = rec.rounds;
  Json per_round = Json::array();
  for (const SearchRoundRecord& f : rec.per_round)
    per_round.push_back(Json{{"graphs_explored", f.graphs_explored},
                             {"rewrites_costed", f.rewrites_costed},
                             {"graphs_built", f.graphs_built},
                             {"rewrites_applied", f.applied},
                             {"finish_applied", f.finish_applied},
                             {"estimated_ms", f.final_cost},
                             {"stop_reason", StopReasonName(f.stop_reason)}});
  js["per_round"] = per_round;
  js["graphs_explored"] = r.graphs_explored;
  js["rewrites_costed"] = r.rewrites_costed;
  js["graphs_built"] = r.graphs_built;
  js["rewrites_rejected"] = r.rewrites_rejected;
  js["gains_within_noise"] = r.gains_resolved;
  js["gains_confirmed"] = r.gains_confirmed;
  js["gains_resolve_s"] = r.gains_resolve_s;
  js["noise_rule"] = r.noise_rule;
  if (s2.on)
    js["second_binding"] =
        Json{{"shapes", s2.shapes},         {"original_ms", s2.original_ms},         {"result_ms", s2.result_ms},
             {"slack", s2.slack},           {"calibrate_s", s2.calibrate_s},         {"graphs_costed", s2.judged},
             {"graphs_slower", s2.refused}, {"graphs_not_imported", s2.not_imported}};
  else if (!s2.note.empty())
    js["second_binding"] = Json{{"note", s2.note}};
  j["rules"]["applied"] = applied;
  j["rules"]["sequence"] = r.applied;
}

void DescribeFinish(const PipelineResult& p, std::string& s, Json& j) {
  const FinishRecord& f = p.finish;
  s += "before:     " + f.before.ToString();
  s += "after:      " + f.after.ToString();
  j["finish"] = Json{{"folded", f.folded},
                     {"kept_weight_nodes", f.kept_weight_nodes},
                     {"raised_batchnorm", f.raised_batchnorm},
                     {"renamed_outputs", f.renamed_outputs}};
  j["raised_opset"] = f.raised_opset;
}

void DescribeCheck(const PipelineResult& p, std::string& s, Json& j) {
  const CheckRecord& c = p.check;
  if (c.skipped)
    s += p.branches.changed()
             ? "check:      none (interrupted with the graph around the optimised subgraphs unchanged: it is written "
               "as it came)\n"
             : "check:      none (interrupted with the graph unchanged: the original is written as it came)\n";
  else
    s += Format("check:      max relative error %.3g%s over %d outputs (seed %llu)%s\n", c.max_error,
                c.allowed > p.options.tolerance ? Format(" (%.3g allowed: half precision)", c.allowed).c_str() : "",
                c.outputs_compared, static_cast<unsigned long long>(p.options.seed),
                c.opaque_nodes > 0 ? (", around " + std::to_string(c.opaque_nodes) + " opaque nodes").c_str() : "");
  if (!c.general_note.empty()) s += Format("            %s\n", c.general_note.c_str());
  // The written model is the input file's (not where If branches were optimised).
  j["unchanged"] = c.unchanged && !p.branches.changed();
  j["check"] = Json{{"compared", !c.skipped},
                    {"max_relative_error", c.max_error},
                    {"outputs_compared", c.outputs_compared},
                    {"opaque_nodes", c.opaque_nodes},
                    {"symbolic_dims", c.symbolic_dims},
                    {"general", c.general_ok},
                    {"tolerance", p.options.tolerance},
                    {"allowed", c.allowed},
                    {"notes", c.notes}};
}

// Milliseconds for the summary: two decimals, or two significant digits
// below 0.1 ms (a model of a few nodes runs in microseconds: "0.00 ms" read
// as nothing measured).
std::string Ms(double ms) { return Format(ms >= 0.1 || ms <= 0 ? "%.2f" : "%.2g", ms); }

void DescribeVerdict(const PipelineResult& p, std::string& s, Json& j) {
  const VerdictRecord& v = p.verdict;
  const bool unchanged = p.check.unchanged;
  const double before_estimate = p.EstimateNowMs(p.search.before_estimate),
               after_estimate = p.EstimateNowMs(v.after_estimate);
  // Nothing to estimate: every node is opaque (e.g. a quantized model's
  // units), so no operator was timed (and on the executor nothing ran).
  const bool nothing_estimated = before_estimate <= 0 || after_estimate <= 0;
  // ONNX Runtime runs opaque nodes; rlflow's executors run the graph cut at
  // them (here: nothing).
  const bool nothing_run = p.finish.before.nodes == p.finish.before.opaque_nodes && p.options.device != "ort";
  if (unchanged && nothing_run)
    s += "measured:   nothing (every node is opaque: the executor runs none of them)\n";
  else if (v.skipped)
    s += "measured:   not measured (interrupted with the graph unchanged)\n";
  else if (unchanged)
    s += Format("measured:   %s ms (median of %d runs)\n", Ms(v.before_ms).c_str(), v.pairs);
  else {
    s += Format("measured:   %s -> %s ms (medians of %d interleaved pairs), %s\n", Ms(v.before_ms).c_str(),
                Ms(v.after_ms).c_str(), v.pairs, v.ToString().c_str());
    // Each side's median moves with the machine's speed during the run; the
    // verdict's per-pair ratios do not (each pair ran within a moment). Say
    // so where the two disagree, or the line reads as a contradiction.
    const double ratio_of_medians = v.after_ms > 0 ? v.before_ms / v.after_ms : 0.0;
    if (v.wall.confidence > 0 && ratio_of_medians > 0 && (ratio_of_medians < v.wall.lo || ratio_of_medians > v.wall.hi))
      s += Format(
          "            (the two medians' ratio, %.3fx, lies outside the interval: the machine's speed moved during "
          "the runs; the verdict is the median of the per-pair ratios, which such drift does not move)\n",
          ratio_of_medians);
  }
  if (v.files)
    s += "            (the model file as given against the file written: the import converted the model to another "
         "form, which the runtime can run otherwise)\n";
  else if (!v.files_note.empty())
    s += "            (" + v.files_note + ")\n";
  if (v.measurements > 1)
    s += Format(
        "            (measured %d times: the original's speed right before and right after a measurement "
        "differed by more than %.0f%%; measurement %d, whose readings were nearest each other, stands)\n",
        v.measurements, 100 * (p.options.steady_ratio - 1), v.kept + 1);
  // The search ranks graphs by estimated cost, so what matters is the
  // estimated ratio: the optimised time predicted from the original's
  // measured time and the estimated speedup, against its measured time.
  const double predicted_error =
      nothing_estimated || v.after_ms <= 0 ? 0.0 : (p.PredictedAfterMs() - v.after_ms) / v.after_ms;
  if (nothing_estimated)
    s += "estimate:   none (every node is opaque: no operator to time)\n";
  else if (v.skipped)
    s += Format("estimate:   %s ms (nothing measured to compare it with)\n", Ms(before_estimate).c_str());
  else
    s += Format(
        "estimate:   error %+.1f%% before, %+.1f%% after (estimate vs measured); predicted speedup %.3fx, "
        "optimised time predicted from the original's %+.1f%% off\n",
        100 * (before_estimate - v.before_ms) / v.before_ms, 100 * (after_estimate - v.after_ms) / v.after_ms,
        before_estimate / after_estimate, 100 * predicted_error);
  auto interval = [](const RatioInterval& r) {
    return Json{{"median", r.median},
                {"lo", r.confidence > 0 ? r.lo : 0.0},
                {"hi", r.confidence > 0 ? r.hi : 0.0},
                {"coverage", r.confidence}};
  };
  j["before"] = SummaryJson(p.finish.before, before_estimate, v.before_ms);
  j["after"] = SummaryJson(p.finish.after, after_estimate, v.after_ms);
  j["speedup"] = unchanged ? 1.0 : v.wall.median;
  j["verdict"] = Json{{"outcome", unchanged ? std::string("unchanged") : v.OutcomeName()},
                      {"measured", !v.skipped},
                      {"pairs", unchanged ? 0 : v.wall.n},
                      {"blocks", unchanged ? 0 : v.blocks},  // ONNX Runtime's session pairs (1: one block)
                      {"level", unchanged ? 0.95 : v.wall.level},
                      {"wall", interval(v.wall)},
                      {"cpu", interval(v.cpu)},
                      {"cpu_clock", v.cpu_clock},
                      {"before_cpu_ms", v.a_cpu_ms},
                      {"after_cpu_ms", v.b_cpu_ms},
                      {"measurements", v.measurements},
                      {"kept_measurement", v.kept},
                      {"drifts", v.drifts},
                      {"timed", v.files ? "files" : "graphs"},  // VerdictRecord::files
                      {"files_note", v.files_note}};
  Json readings = Json::array();
  for (const auto& [before, after] : v.readings) readings.push_back(Json{{"before", before}, {"after", after}});
  j["verdict"]["time_base_readings"] = readings;
  if (v.guarded)
    s += Format("guard:      in %s %s -> %s ms, %s\n", v.guard_device.c_str(), Ms(v.guard.a_ms).c_str(),
                Ms(v.guard.b_ms).c_str(), v.guard.ToString().c_str());
  else if (!v.guard_note.empty())
    s += Format("guard:      %s\n", v.guard_note.c_str());
  // A verdict besides the main one (the guard's, the second binding's): the
  // keys they share.
  auto other_verdict = [&](const Verdict& verdict, bool measured, const std::string& note) {
    return Json{{"measured", measured},
                {"outcome", measured ? verdict.OutcomeName() : std::string()},
                {"before_ms", verdict.a_ms},
                {"after_ms", verdict.b_ms},
                {"wall", interval(verdict.wall)},
                {"cpu", interval(verdict.cpu)},
                {"pairs", measured ? verdict.wall.n : 0},
                {"blocks", measured ? verdict.blocks : 0},
                {"note", note}};
  };
  if (!v.guard_device.empty()) {
    j["verdict"]["guard"] = other_verdict(v.guard, v.guarded, v.guard_note);
    j["verdict"]["guard"]["device"] = v.guard_device;
    j["verdict"]["guard"]["timed"] = v.guard_files ? "files" : "graphs";
  }
  if (v.second_measured)
    s += Format("second:     at %s%s: %s -> %s ms, %s%s\n", v.second_binding.c_str(),
                v.second_files ? ", the files" : "", Ms(v.second.a_ms).c_str(), Ms(v.second.b_ms).c_str(),
                v.second.ToString().c_str(), v.second_vetoed() ? " (required: the original is kept)" : "");
  if (v.second_measured && !v.second_note.empty())
    s += "            (" + v.second_note + ")\n";
  else if (!v.second_note.empty())
    s += Format("second:     at %s: %s\n", v.second_binding.c_str(), v.second_note.c_str());
  if (!v.second_binding.empty()) {
    Json& second = j["verdict"]["second_binding"] = other_verdict(v.second, v.second_measured, v.second_note);
    second["shapes"] = v.second_binding;
    second["given"] = v.second_given;
    second["required"] = v.second_required;
    second["timed"] = v.second_files ? "files" : "graphs";
  }
  j["estimated_speedup"] = nothing_estimated ? 1.0 : before_estimate / after_estimate;
  j["predicted_after_ms"] = nothing_estimated ? v.before_ms : p.PredictedAfterMs();
  j["predicted_after_error"] = predicted_error;
}

void DescribeRetries(const PipelineResult& p, std::string& s, Json& j) {
  Json list = Json::array();
  for (const RetryRecord& r : p.retries) {
    const std::string guard = r.guard_outcome.empty() ? ""
                                                      : Format(", in %s %s (%.3fx)", r.guard_device.c_str(),
                                                               r.guard_outcome.c_str(), r.guard_speedup);
    const std::string second = r.second_outcome.empty() ? ""
                                                        : Format(", at the second binding %s (%.3fx)",
                                                                 r.second_outcome.c_str(), r.second_speedup);
    s += Format("retry:      without rule %s: %d rewrites applied, %s (%.3fx)%s%s, %.1f s\n", r.left_out.c_str(),
                r.applied, r.outcome.c_str(), r.speedup, guard.c_str(), second.c_str(), r.seconds);
    Json one = {{"left_out", r.left_out},
                {"applied", r.applied},
                {"outcome", r.outcome},
                {"speedup", r.speedup},
                {"seconds", r.seconds}};
    if (!r.guard_outcome.empty()) one["guard"] = Json{{"outcome", r.guard_outcome}, {"speedup", r.guard_speedup}};
    if (!r.second_outcome.empty())
      one["second_binding"] = Json{{"outcome", r.second_outcome}, {"speedup", r.second_speedup}};
    list.push_back(one);
  }
  j["retries"] = list;
}

void DescribeWrite(const PipelineResult& p, std::string& s, Json& j) {
  const WriteRecord& w = p.write;
  const std::string& output = p.load.output;
  const VerdictRecord& v = p.verdict;
  const int branches = p.branches.optimised();
  const int hoisted = static_cast<int>(p.branches.hoisted.size());
  // "1 optimised subgraph" (an If branch or a Loop body; branch: lines), and
  // the loop bodies whose products are computed before them (hoisted: lines)
  std::string subgraphs = Format("%d optimised subgraph%s", branches, branches == 1 ? "" : "s");
  if (hoisted > 0)
    subgraphs = (branches > 0 ? subgraphs + ", branch: above, and " : std::string()) +
                Format(hoisted == 1 ? "%d loop body's products computed before it, hoisted: above"
                                    : "%d loop bodies' products computed before them, hoisted: above",
                       hoisted);
  else
    subgraphs += ", branch: above";
  if (p.check.unchanged && (branches > 0 || hoisted > 0))
    s += Format("written:    %s (with %s; no rewrite improved the graph around them)\n", output.c_str(),
                subgraphs.c_str());
  else if (p.check.unchanged)
    s += Format("written:    %s (the original model: %s)\n", output.c_str(),
                v.skipped ? "interrupted, no rewrite found that improved it" : "no rewrite improved it");
  else if (!p.check.general_ok)
    s += Format(
        "written:    %s (the ORIGINAL model: the optimised graph is not right at other values of the "
        "symbolic dimensions)\n",
        output.c_str());
  else if (v.keep_original && v.faster() && v.second_vetoed())
    s += Format(
        "written:    %s (the ORIGINAL model: the optimised graph is faster at the shapes it was optimised at "
        "but slower at %s)\n",
        output.c_str(), v.second_binding.c_str());
  else if (v.keep_original && v.faster() && !v.guard_slower() && !v.second_measured && !v.second_note.empty())
    s += Format("written:    %s (the ORIGINAL model: the optimised graph is faster but could not be timed at %s)\n",
                output.c_str(), v.second_binding.c_str());
  else if (v.keep_original && v.faster())
    s += Format("written:    %s (the ORIGINAL model: the optimised graph is faster on %s but %s in %s)\n",
                output.c_str(), p.configure.device.c_str(),
                v.guarded ? v.guard.OutcomeName().c_str() : "could not be timed", v.guard_device.c_str());
  else if (v.keep_original)
    s += Format("written:    %s (the ORIGINAL model: the optimised graph is %s when measured)\n", output.c_str(),
                v.OutcomeName().c_str());
  else if (!v.faster())
    s += Format("written:    %s (the optimised graph, forced: it is %s when measured)\n", output.c_str(),
                v.OutcomeName().c_str());
  else
    s += Format("written:    %s\n", output.c_str());
  if ((branches > 0 || hoisted > 0) && !p.check.unchanged)
    s += Format("            with %s%s\n", subgraphs.c_str(),
                v.keep_original ? "; the graph around them as it was" : "");
  if (!w.opset_note.empty()) s += Format("            %s\n", w.opset_note.c_str());
  if (p.finish.raised_opset > 0 && !v.keep_original)
    s += Format("            written at opset %lld: the rewrites produced operators of that opset\n",
                static_cast<long long>(p.finish.raised_opset));
  s += Format("real work:  %lld rewrites applied to real graphs, %lld graphs timed on %s (%lld by the search)\n",
              static_cast<long long>(w.real_steps), static_cast<long long>(w.real_measurements),
              p.configure.device.c_str(), static_cast<long long>(p.search.measurements));
  j["output"] = output;
  j["wrote_original"] = v.keep_original && branches == 0 && hoisted == 0;
  j["opset_note"] = w.opset_note;
  j["external_data"] = w.external_data;
  j["real_work"] = Json{{"steps", w.real_steps},
                        {"search_steps", p.search.result.real_steps},
                        {"measurements", w.real_measurements},
                        {"search_measurements", p.search.measurements}};
}

void DescribeReport(const PipelineResult& p, std::string& s, Json& j) {
  const ReportRecord& r = p.report;
  s += Format("cost:       estimate %s -> %s ms (%s, %lld ops timed, %lld cache hits",
              Ms(p.search.before_estimate).c_str(), Ms(p.verdict.after_estimate).c_str(), p.configure.device.c_str(),
              static_cast<long long>(r.ops_timed), static_cast<long long>(r.cache_hits));
  if (p.verdict.time_base > 0 && p.verdict.time_base_after > 0)
    s += Format(
        "; cached timings' time base %.3f at calibration, %.3f at the verdict (read before it %.3f, after it "
        "%.3f): %s -> %s ms at the machine's speed then",
        p.calibrate.time_base, p.verdict.time_base, p.verdict.time_base_before, p.verdict.time_base_after,
        Ms(p.EstimateNowMs(p.search.before_estimate)).c_str(), Ms(p.EstimateNowMs(p.verdict.after_estimate)).c_str());
  else if (p.verdict.time_base > 0)
    s += Format(
        "; cached timings' time base %.3f at calibration, %.3f as last read before the verdict: %s -> %s ms at "
        "the machine's speed then",
        p.calibrate.time_base, p.verdict.time_base, Ms(p.EstimateNowMs(p.search.before_estimate)).c_str(),
        Ms(p.EstimateNowMs(p.verdict.after_estimate)).c_str());
  else if (p.calibrate.time_base_known)
    s += Format("; cached timings' time base %.3f: %s -> %s ms at the machine's speed now", p.calibrate.time_base,
                Ms(p.EstimateNowMs(p.search.before_estimate)).c_str(),
                Ms(p.EstimateNowMs(p.verdict.after_estimate)).c_str());
  s += ")\n";
  s += Format("memory:     peak %.0f MB\n", r.peak_memory_mb);
  Json stages = Json::object();
  std::string line;
  for (const auto& [name, seconds] : p.stage_seconds) {
    line += Format("%s%s %.2f s", line.empty() ? "" : ", ", name.c_str(), seconds);
    stages[name] = seconds;
  }
  if (!line.empty()) s += "stages:     " + line + "\n";
  if (!r.path.empty()) s += Format("report:     %s\n", r.path.c_str());
  j["timing_cache"]["entries"] = r.cache_entries;
  j["timing_cache"]["ops_timed"] = r.ops_timed;
  j["timing_cache"]["hits"] = r.cache_hits;
  j["peak_memory_mb"] = r.peak_memory_mb;
  j["stage_seconds"] = stages;
}

}  // namespace

const std::vector<Stage>& Stages() {
  static const std::vector<Stage> stages = {{"configure", Configure, DescribeConfigure},
                                            {"load", Load, DescribeLoad},
                                            {"branches", Branches, DescribeBranches},
                                            {"reference_run", ReferenceRun, DescribeReferenceRun},
                                            {"canonicalise", Canonicalise, DescribeCanonicalise},
                                            {"calibrate", Calibrate, DescribeCalibrate},
                                            {"search", SearchRounds, DescribeSearch},
                                            {"finish", Finish, DescribeFinish},
                                            {"check", Check, DescribeCheck},
                                            {"verdict", Measure, DescribeVerdict},
                                            {"retries", Retries, DescribeRetries},
                                            {"write", Write, DescribeWrite},
                                            {"report", Report, DescribeReport}};
  return stages;
}

}  // namespace rlflow

#pragma once
// The optimise pipeline's stages (RunPipeline runs Stages() in order), open
// to tests that run one stage at a time on a run's state. Each stage is one
// function over OptimiseRun: it reads what the stages before it made, writes
// its own record in the result (PipelineResult::configure, load, ...), and
// has a describe function that turns its record into its lines of the
// summary and its keys of the JSON report.
//
// Adding a stage: its function and its describe function in stages.cc, one
// row in Stages(), its record (if it has one) in pipeline.h.
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/graph.h"
#include "core/rules/rule.h"
#include "optimiser/pipeline.h"
#include "runtime/cost_model.h"
#include "search/search.h"
#include "zoo/load.h"

namespace rlflow {

class Runner;

// One optimise run, passed from stage to stage: what the stages before made
// that the stages after use.
struct OptimiseRun {
  OptimiseRun(const PipelineOptions& options, PipelineResult& result);
  ~OptimiseRun();
  const PipelineOptions& o;
  PipelineResult& res;
  std::function<void(const std::string&)> info, warn;  // log lines to PipelineOptions::log (if set)
  // configure
  std::unique_ptr<Search> search;
  const BackendInfo* device = nullptr;
  std::unique_ptr<TimingBackend> backend;
  std::shared_ptr<const rules::RuleDatabase> rule_db;  // never null after configure
  SearchOptions search_options;                        // resolved: the search's settings checked
  std::unique_ptr<CountingBackend> counted;            // counts every graph timed on the device
  std::unique_ptr<MeasuredCostModel> cost;             // on `counted`
  std::string guard_device;                            // PipelineOptions::guard resolved ("": none)
  std::unique_ptr<TimingBackend> guard_backend;        // made when first needed
  // load
  LoadedModel model;  // model.graph: the original
  // branches: where the model with its optimised subgraphs is (removed
  // with the run; "": none were optimised)
  std::string branches_dir;
  double branch_search_s = 0;  // the branches' runs' searches (and retries), against --time_limit
  std::vector<char> enabled;   // the rules the written model may use (opset, target)
  // reference_run, canonicalise, calibrate
  Graph original_cut;  // the parts the executor runs
  double reference_s = 0;
  int lowered = 0;
  Graph canonical;
  int cal_runs = 0;
  // How long calibrating the original took (about what another search round's calibration costs).
  double calibration_s = 0;
  std::unique_ptr<Runner> runner;  // the search phase's one deadline, interrupt and progress
  // When the time base of the cached timings was last read (the original
  // run against its cached timings: the calibration, or a search round's
  // reference run).
  std::chrono::steady_clock::time_point time_base_read;
  double time_base_since = 0;  // the last reading after the calibration's (0: none)
  // one attempt (search, finish, check, verdict): its rules and verdict level
  std::vector<char> mask;
  double level = 0.95;
  Graph optimised;
  // check: the original (as the file computes it) and the optimised graph
  // at the check's second binding of the symbolic dimensions, cut at opaque
  // nodes, for the verdict there (empty: not checked there); its shapes.
  // `original_other`: the original there, not cut (the inputs of the model
  // file at that binding, where the verdict there times the files).
  Graph original_other_cut, optimised_other_cut, original_other;
  std::string other_binding;
  // verdict: where the file to be written is, where the verdict times the
  // files (VerdictRecord::files; removed with the run, "": none made), and
  // the structural hash of the graph it holds (the verdict, the guard and
  // the second binding's verdict ask for the same attempt's file; 0: none)
  std::string verdict_dir;
  uint64_t verdict_file_hash = 0;
  int64_t real_steps = 0;  // every attempt's
  // The search at the second binding too (PipelineOptions::
  // second_binding_search; null: off): its import, the cost model there (on
  // `counted`, in the context of the original's canonical form there), that
  // graph's cost there (the bound) and each graph's cost there by structural
  // hash (the rounds and retries ask of the same graphs).
  struct SecondBindingCost {
    ImportOptions import;
    Graph canonical, canonical_cut;  // the original's canonical form there; its runnable parts
    std::unique_ptr<MeasuredCostModel> cost;
    double bound_ms = 0;
    std::unordered_map<uint64_t, double> ms;
    int64_t judged = 0, refused = 0;  // graphs costed there (again after a calibration there); of them slower
    int64_t not_imported = 0;         // ... of them that did not import there
    std::string shapes;               // the symbolic inputs' shapes there
    double calibrate_s = 0;
  };
  std::unique_ptr<SecondBindingCost> second_cost;
  std::string second_search_note;  // why it is off where it was asked for
};

// The stages, in the order RunPipeline runs them.
void Configure(OptimiseRun& r);     // options, thread pools, search and its settings, backend, rules, cost model
void Load(OptimiseRun& r);          // the model at its shapes and data; the rules the written model may use
void Branches(OptimiseRun& r);      // each If branch optimised as a model (this pipeline); the model with them
void ReferenceRun(OptimiseRun& r);  // the runnable parts run once (fails before the search if they cannot)
void Canonicalise(OptimiseRun& r);  // batch norm lowered to Mul/Add for the rules
void Calibrate(OptimiseRun& r);     // the cost model in context; the search phase's runner
void SearchRounds(OptimiseRun& r);  // the search with r.mask, in rounds until nothing new is left untimed
void Finish(OptimiseRun& r);        // finishing passes, opset, target check, the original's interface
void Check(OptimiseRun& r);         // numerically against the original (and at a second binding)
void Measure(OptimiseRun& r);       // the verdict: both graphs timed end to end, interleaved, at r.level
void Retries(OptimiseRun& r);       // a slower verdict: searches again leaving out one applied rule
void Write(OptimiseRun& r);         // the model (the original unless faster), timing cache, DOT, picture
void Report(OptimiseRun& r);        // run-wide figures; the JSON report

// printf into a string (the summary's lines; up to 1023 characters).
std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// The branches stage's lines of the summary and keys of the report.
void DescribeBranches(const PipelineResult& p, std::string& summary, nlohmann::ordered_json& report);

// The guard's timing backend (PipelineOptions::guard, r.guard_device), made
// when first needed; null, with the reason in `*why`, if it cannot be made
// and the guard is "auto" (else that error is thrown).
TimingBackend* GuardBackend(OptimiseRun& r, std::string* why);

// The model file at `path` imported as Load imports --model (its shapes,
// --input_data, control flow typed by ONNX Runtime).
LoadedModel ImportModelFile(const OptimiseRun& r, const std::string& path);

// search, finish, check and verdict with the rules `mask` enables, the
// verdict's interval at `level` (what Retries repeats).
void Attempt(OptimiseRun& r, const std::vector<char>& mask, double level);

struct Stage {
  const char* name;
  void (*run)(OptimiseRun&);
  // Appends the stage's record to the summary (whole lines) and the report
  // (its keys); null: the stage has nothing to report.
  void (*describe)(const PipelineResult&, std::string& summary, nlohmann::ordered_json& report);
};
const std::vector<Stage>& Stages();

}  // namespace rlflow

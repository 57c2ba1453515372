// rlflow optimiser: loads an ONNX model (or a built-in zoo model), checks it,
// searches for a faster equivalent graph with the proved rules, folds
// weight-only subgraphs, verifies the result numerically against the
// original, measures both end to end, and writes ONNX (the original if the
// optimised graph is not faster) and a report. Flag parsing around the
// pipeline library (optimiser/pipeline.h).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "core/cli.h"
#include "core/error.h"
#include "core/onnx_io.h"
#include "core/passes/pass.h"
#include "core/strings.h"
#include "optimiser/pipeline.h"

DEFINE_string(model, "",
              "ONNX model to optimise, or a zoo model name (e.g. resnet50.onnx); relative paths are "
              "resolved against the directory `bazel run` was started from");
DEFINE_string(output, "",
              "where to write the optimised ONNX model (default: <model>.rlflow.onnx beside the input, "
              "or in the working directory for a zoo model)");
DEFINE_string(search, "taso",
              "search strategy: taso (cost-based backtracking), greedy, ppo (a trained agent), world_model (a "
              "controller trained in a world model's dream), passes (a list of graph passes, --passes), pass_order "
              "(a trained pass-ordering agent), none; --list_searches prints each with its settings");
DEFINE_bool(list_searches, false, "print the registered searches, each with its settings and their defaults, and exit");
DEFINE_string(search_param, "",
              "settings of the chosen search, NAME=VALUE[;NAME=VALUE...] (--list_searches lists them); the flags "
              "--alpha, --agent, --episodes, --horizon, --train_steps and --passes set the built-in searches' own");
DEFINE_string(passes, "",
              "run these passes in this order (comma-separated; implies --search=passes; default order "
              "without it: see --list_passes and the README)");
DEFINE_bool(list_passes, false, "print the registered passes (name and one-line description) and exit");
DEFINE_string(agent, "",
              "--search=ppo / pass_order / world_model: the trained agent (default: the checked-in "
              "agents/zoo_agent.pt / agents/pass_agent.pt / world_model/agent/, a directory with controller.pt and "
              "world_model.pt)");
DEFINE_int32(episodes, 8, "--search=ppo: sampled episodes after the greedy one; the cheapest graph is kept");
DEFINE_int32(horizon, 100, "--search=ppo: steps per episode");
DEFINE_int64(train_steps, 0, "--search=ppo: environment steps of fine-tuning on the input graph first");
DEFINE_int64(budget, 1000, "taso: stop after this many graphs popped from the queue");
DEFINE_bool(greedy_finish, true,
            "taso: when the budget is spent (or the queue empty), descend greedily from the best "
            "graph until no rewrite improves");
DEFINE_double(alpha, 1.05, "taso: keep exploring graphs whose cost is below alpha x the best cost (>= 1)");
DEFINE_double(time_limit, 0, "stop the search after this many seconds and keep the best graph so far (0: none)");
DEFINE_string(device, "cpu",
              "where the cost model, the noise rule and the end-to-end verdict measure: cpu (rlflow's "
              "ATen executor) or ort (ONNX Runtime's CPU provider, with its own graph optimisations at "
              "--ort_level); --list_devices prints those this binary has");
DEFINE_bool(list_devices, false, "print the registered timing backends (--device values) and exit");
DEFINE_string(ort_level, "all",
              "--device=ort: ONNX Runtime's graph optimisation level (disabled, basic, extended, "
              "all: ORT's default)");
DEFINE_string(timing_cache, "",
              "persistent timing cache (default: $XDG_CACHE_HOME/rlflow or ~/.cache/rlflow/"
              "timing-cache.txt; 'none': do not read or write one)");
DEFINE_bool(force_optimised, false,
            "write the optimised graph even if the end-to-end verdict is not 'faster' (the 95% "
            "interval of its speedup above 1.0), e.g. to benchmark it in another runtime");
DEFINE_string(report, "", "also write the report as JSON to this path");
DEFINE_int32(measure_runs, 0,
             "end-to-end verdict: pairs of interleaved runs of the original and the optimised graph "
             "(0: auto: about 2 s of runs per graph, 20 to 40 pairs, 10 to 19 for graphs slower than 0.75 s; "
             "in ONNX Runtime up to 120 in 12 session pairs for graphs faster than 25 ms, about 6 s); "
             "fewer than 6 pairs give no 95% "
             "interval, so the original is written unless --force_optimised");
DEFINE_int32(retries, -1,
             "when the verdict does not find the optimised graph faster and its rewrites come from "
             "several rules: search again leaving out one applied rule at a time (the least applied "
             "first), at most this many times, and keep the first graph found faster (each such "
             "verdict at 1 - 0.05/N); 0: never; -1 (auto): 2 with --device=ort (whose fusions "
             "per-node costs cannot see) or when the guard finds the result slower, 0 otherwise");
DEFINE_string(guard, "auto",
              "where the written model must not run slower as well: auto (ONNX Runtime, level all, "
              "--threads, with --device=cpu: when the verdict finds the result faster there, both are timed "
              "in ORT too and the original is written if ORT runs the result slower), ort, or none");
DEFINE_string(second_binding_verdict, "auto",
              "where the model has symbolic dimensions, when the verdict finds the result faster: both are also "
              "timed at the check's second binding of them (batch 1 -> 2, an image's height halved and width "
              "doubled). require: the original is written if the result is slower there; report: reported only; "
              "off; auto: require where some symbolic dimension was not given by --input_shape or where "
              "--second_input_shape gave the second binding, else report");
DEFINE_string(second_input_shape, "",
              "shapes the model will also run at, NAME:D1,D2,...[;NAME2:...] as --input_shape (inputs not named "
              "keep theirs, a dimension named like a given one takes its value): the check and the second "
              "binding's verdict run there instead of at the moved binding, and the original is written if the "
              "result is slower there (unless --second_binding_verdict=report or off)");
DEFINE_string(second_binding_search, "auto",
              "the search at the second binding too: the cost model is calibrated there as well and the search "
              "takes only graphs not estimated slower there than the original. auto: where --second_input_shape "
              "gave it; on: also at the check's moved binding; off");
DEFINE_double(second_binding_slack, 0,
              "--second_binding_search: how much more than the original's a graph's estimated cost at the second "
              "binding may be (a fraction in [0, 1); the verdict there, measured, still decides)");
DEFINE_uint64(seed, 1, "seed for the random check inputs and for zoo model weights");
DEFINE_int32(free_dim, 1,
             "value bound to symbolic dimensions of graph inputs not given by --input_shape; where the model "
             "does not fit it (a detector of any resolution at 1 x 1), the dimensions after each input's first "
             "are bound to 224, else 256, 512 or 1024, and the summary says so");
DEFINE_int32(target_opset, 0,
             "newest ONNX opset the written model may be raised to, so that rewrites may produce operators of "
             "that opset (HardSwish: 14, LayerNormalization: 17); 0: the model's own opset, or 17 with "
             "--device=ort");
DEFINE_string(target, "",
              "the runtime the written model is for: onnx (any ONNX runtime; standard operators only) or ort "
              "(ONNX Runtime; rewrites may produce its com.microsoft contrib operators); default: ort with "
              "--device=ort, else onnx");
DEFINE_string(input_shape, "",
              "shapes the model will run at, NAME:D1,D2,...[;NAME2:...] (e.g. images:1,3,640,640): the search, the "
              "check and the verdict run at them; the written model keeps its symbolic dimensions "
              "(//tools:inspect lists the inputs)");
DEFINE_string(input_data, "",
              "values to run the model on for the check and the timings, NAME:FILE[;NAME2:FILE2] (.npy or ONNX "
              "TensorProto .pb); an input given data runs at its shape. Without it inputs are filled: shapes, "
              "axes and indices consistently with the model, other values at random");
DEFINE_string(dot, "", "also write the written graph as Graphviz DOT to this path");
DEFINE_string(picture, "",
              "also draw the rewritten regions, before and after, side by side, with the rules applied, as a PNG "
              "(Graphviz) to this path");
DEFINE_double(tolerance, 1e-4,
              "maximum relative error allowed between original and optimised outputs (float16 and bfloat16 "
              "outputs: at least 4 units of their precision, 2^-8 and 2^-5)");
DEFINE_int32(threads, 1,
             "threads of ATen's and OpenBLAS's pools for the executor and the timings (0: the libraries' defaults)");
DEFINE_string(rules, "", "rule database (default: the checked-in rules/default.rules.pb)");

namespace rlflow {
namespace {

int Main() {
  if (FLAGS_list_devices) {
    std::fputs(DescribeTimingBackends().c_str(), stdout);
    return 0;
  }
  if (FLAGS_list_searches) {
    std::fputs(DescribeSearches().c_str(), stdout);
    return 0;
  }
  if (FLAGS_list_passes) {
    for (const auto& [name, description] : ListPasses(FLAGS_rules, gflags::GetArgv0()))
      std::printf("%s\t%s\n", name.c_str(), description.c_str());
    return 0;
  }
  PipelineOptions o;
  o.model = FLAGS_model;
  o.output = FLAGS_output;
  o.report = FLAGS_report;
  o.dot = FLAGS_dot;
  o.picture = FLAGS_picture;
  o.rules = FLAGS_rules;
  o.argv0 = gflags::GetArgv0();
  o.timing_cache = FLAGS_timing_cache;
  o.search = FLAGS_search;
  if (!FLAGS_passes.empty() && gflags::GetCommandLineFlagInfoOrDie("search").is_default) o.search = "passes";
  if (!FLAGS_passes.empty() && SplitList(FLAGS_passes).empty()) Fail("--passes is empty");
  // The search's own settings: --search_param, and the named flags of the
  // built-in searches' settings when given (the search refuses one it does
  // not have, e.g. --episodes with --search=taso).
  o.search_params = ParseSearchParams(FLAGS_search_param);
  for (const char* flag : {"alpha", "agent", "episodes", "horizon", "train_steps", "passes"}) {
    gflags::CommandLineFlagInfo info = gflags::GetCommandLineFlagInfoOrDie(flag);
    if (info.is_default) continue;
    if (o.search_params.Has(flag)) Fail("--", flag, " and --search_param=", flag, "=... are both given");
    o.search_params.Set(flag, info.current_value);
  }
  o.budget = FLAGS_budget;
  o.greedy_finish = FLAGS_greedy_finish;
  o.time_limit_s = FLAGS_time_limit;
  o.device = FLAGS_device;
  // An explicit --ort_level (even "all") is refused without --device=ort.
  if (!gflags::GetCommandLineFlagInfoOrDie("ort_level").is_default) o.ort_level = FLAGS_ort_level;
  o.force_optimised = FLAGS_force_optimised;
  o.measure_runs = FLAGS_measure_runs;
  o.retries = FLAGS_retries;
  o.guard = FLAGS_guard;
  o.second_binding_verdict = FLAGS_second_binding_verdict;
  o.second_binding_search = FLAGS_second_binding_search;
  o.second_binding_slack = FLAGS_second_binding_slack;
  o.seed = FLAGS_seed;
  o.free_dim = FLAGS_free_dim;
  o.target_opset = FLAGS_target_opset;
  o.target = FLAGS_target;
  o.input_shapes = ParseInputShapes(FLAGS_input_shape);
  o.input_data = ParseInputData(FLAGS_input_data);
  o.second_input_shapes = ParseInputShapes(FLAGS_second_input_shape, "--second_input_shape");
  o.tolerance = FLAGS_tolerance;
  o.threads = FLAGS_threads;
  o.log = [](bool warning, const std::string& line) {
    if (warning)
      LOG(WARNING) << line;
    else
      LOG(INFO) << line;
  };
  cli::InstallInterruptHandler();
  o.interrupted = &cli::interrupted;
  PipelineResult r = RunPipeline(o);
  std::fputs(r.Summary().c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(
      argc, argv, "rlflow optimiser: ./bazelw run //optimiser -- --model=resnet50.onnx [--output=PATH]", rlflow::Main);
}

// The optimise pipeline as a library (what the optimiser binary, benchmarks
// and agents' tools call): a small conv + batch-norm model written to a
// temp file, optimised with real timings. Whatever the search chooses on
// this machine, the written model must be a checked drop-in replacement and
// the report must describe what was written; bad input writes nothing; an
// interrupted or empty search writes the original byte for byte.
#include "optimiser/pipeline.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/file_util.h"
#include "core/graph_builder.h"
#include "core/onnx_io.h"
#include "core/onnx_proto_testing.h"
#include "core/passes/pass.h"
#include "core/rules/rule.h"
#include "optimiser/scripted_backend.h"
#include "runtime/equivalence.h"
#include "runtime/ort_testing.h"

namespace rlflow {
namespace {

// x -> Conv 3x3 -> BN -> Relu -> Conv 1x1 -> BN
std::string WriteModel(const std::string& dir) {
  GraphBuilder b(3);
  ValueId x = b.Input("x", {1, 8, 16, 16});
  auto bn = [&](ValueId v, int64_t c, const std::string& n) {
    return b.Op("BatchNormalization", {v, b.Weight(n + "_s", {c}, 0.2f, 1.0f), b.Weight(n + "_b", {c}, 0.2f),
                                       b.Weight(n + "_m", {c}, 0.2f), b.Weight(n + "_v", {c}, 0.1f, 1.0f)});
  };
  ValueId y = b.Op("Conv", {x, b.Weight("w1", {16, 8, 3, 3}, 0.2f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  y = b.Op("Relu", {bn(y, 16, "bn1")});
  y = bn(b.Op("Conv", {y, b.Weight("w2", {32, 16, 1, 1}, 0.2f)}), 32, "bn2");
  std::string path = dir + "/model.onnx";
  WriteOnnxFile(b.Build({y}), path);
  return path;
}

// The same model in float16 (weights, input and output), as converters to
// half precision write models for deployment.
void WriteHalfModel(const std::string& dir, std::string* path) {
  Graph g = ImportOnnxFile(WriteModel(dir));
  for (ValueId v : g.initializers()) {
    const TensorData& t = *g.value(v).initializer;
    ASSERT_EQ(t.dtype(), DType::kFloat32);
    g.MakeConstant(
        v, std::make_shared<const TensorData>(TensorData::FromDouble(t.ToDouble(), t.shape(), DType::kFloat16)));
  }
  for (ValueId v = 0; v < g.num_values(); ++v)
    if (g.value(v).type.dtype == DType::kFloat32) g.mutable_value(v).type.dtype = DType::kFloat16;
  *path = dir + "/half.onnx";
  WriteOnnxFile(g, *path);
}

PipelineOptions Options(const std::string& dir, const std::string& model) {
  PipelineOptions o;
  o.model = model;
  o.output = dir + "/out.onnx";
  o.report = dir + "/report.json";
  o.timing_cache = "none";
  o.measure_runs = 8;
  o.budget = 50;
  return o;
}

// A node of `op` reading `in`, writing `out`, added to `g`.
onnx::NodeProto* AddOnnxNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                             const std::string& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& s : in) n->add_input(s);
  n->add_output(out);
  return n;
}

// Options of the control-flow and interface tests: x run at [4, 8], the
// cse and dce passes as the search, each node costing 1 ms on a scripted
// backend (fewer nodes are measured faster).
PipelineOptions CseOptions(const std::string& dir, const std::string& model) {
  PipelineOptions o = Options(dir, model);
  o.input_shapes["x"] = {4, 8};
  o.search = "passes";
  o.search_params.Set("passes", "cse, dce");
  o.make_backend = [] {
    return std::make_unique<testing::ScriptedBackend>("cse", [](const Graph&, NodeId) { return 1.0; });
  };
  return o;
}

// `vi` declared a tensor of `type` with `dims`: digits a fixed dimension,
// anything else a dimension of that name.
void DeclareTensor(onnx::ValueInfoProto* vi, const std::string& name, int32_t type,
                   const std::vector<std::string>& dims) {
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  t->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
}

// `written` computes what `model` computes in ONNX Runtime for x of 4, 2
// and 7 rows of 8 (the first the rows optimised at); `grown`: the rows the
// output has beyond x's.
void ExpectTheSameInOrtAtOtherRows(const std::string& model, const std::string& written, int64_t grown = 0) {
  for (const int64_t rows : {4, 2, 7}) {
    const at::Tensor x = at::randn({rows, 8});
    const at::Tensor want = testing::RunOnnxRuntime(model, {{"x", x}})[0];
    const at::Tensor got = testing::RunOnnxRuntime(written, {{"x", x}})[0];
    ASSERT_EQ(got.sizes(), want.sizes()) << rows;
    EXPECT_EQ(want.size(0), rows + grown);
    EXPECT_TRUE(got.allclose(want, 1e-5, 1e-6)) << rows;
  }
}

TEST(Pipeline, WritesACheckedDropInModelAndItsReport) {
  std::string dir = testing::MakeTempDir("pipeline_");
  std::string model = WriteModel(dir);
  PipelineOptions o = Options(dir, model);
  o.force_optimised = true;  // the optimised graph is written whatever the verdict
  PipelineResult r = RunPipeline(o);
  EXPECT_EQ(r.load.output, o.output);
  EXPECT_EQ(r.configure.search, "taso");
  EXPECT_GE(r.search.rounds, 1);
  EXPECT_EQ(r.verdict.pairs, 8);
  Graph original = ImportOnnxFile(model), written = ImportOnnxFile(o.output);
  // Drop-in: same interface, same outputs.
  ASSERT_EQ(written.inputs().size(), original.inputs().size());
  ASSERT_EQ(written.outputs().size(), original.outputs().size());
  EXPECT_EQ(written.value(written.inputs()[0]).name, original.value(original.inputs()[0]).name);
  EXPECT_EQ(written.value(written.outputs()[0]).name, original.value(original.outputs()[0]).name);
  EXPECT_EQ(written.value(written.outputs()[0]).type.shape, original.value(original.outputs()[0]).type.shape);
  EXPECT_LE(CompareGraphs(original, written, 9).max_error, 1e-4);
  // The report is the result, as JSON.
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  EXPECT_EQ(j["output"], o.output);
  EXPECT_EQ(j["wrote_original"], r.verdict.keep_original);
  EXPECT_EQ(j["search"]["strategy"], "taso");
  EXPECT_EQ(j["search"]["stop_reason"], StopReasonName(r.search.result.stop_reason));
  EXPECT_EQ(j["rules"]["sequence"].size(), r.search.result.applied.size());
  EXPECT_EQ(j["before"]["nodes"], original.num_nodes());
  if (!r.verdict.keep_original) {
    EXPECT_EQ(j["after"]["nodes"], written.num_nodes());
  }
  EXPECT_EQ(j["before"]["op_counts"]["BatchNormalization"], 2);
  EXPECT_EQ(j["verdict"]["pairs"], r.check.unchanged ? 0 : 8);
  // Real work: every rewrite applied counts (the search applies more than
  // it keeps), every graph timed on the device counts (the calibration,
  // each operator alone, the verdict).
  EXPECT_GE(r.search.result.real_steps, static_cast<int64_t>(r.search.result.applied.size()));
  EXPECT_EQ(r.write.real_steps, r.search.result.real_steps);  // no retry (forced)
  EXPECT_GE(r.write.real_measurements, r.search.measurements + 3);
  EXPECT_EQ(j["real_work"]["steps"], r.write.real_steps);
  EXPECT_EQ(j["real_work"]["measurements"], r.write.real_measurements);
  EXPECT_EQ(j["real_work"]["search_measurements"], r.search.measurements);
  // The summary names what was written.
  std::string summary = r.Summary();
  EXPECT_NE(summary.find("written:    " + o.output), std::string::npos) << summary;
  EXPECT_NE(summary.find("report:     " + o.report), std::string::npos) << summary;
  // Every stage ran, in the pipeline's order, and is timed in the summary
  // and (all but the report stage, which writes it) in the report.
  const std::vector<std::string> stages = {"configure", "load",   "branches", "reference_run", "canonicalise",
                                           "calibrate", "search", "finish",   "check",         "verdict",
                                           "retries",   "write",  "report"};
  ASSERT_EQ(r.stage_seconds.size(), stages.size());
  double total = 0;
  for (size_t k = 0; k < stages.size(); ++k) {
    EXPECT_EQ(r.stage_seconds[k].first, stages[k]);
    EXPECT_GE(r.stage_seconds[k].second, 0.0) << stages[k];
    total += r.stage_seconds[k].second;
  }
  EXPECT_GT(total, 0.0);
  ASSERT_TRUE(j.contains("stage_seconds"));
  EXPECT_EQ(j["stage_seconds"].size(), stages.size() - 1);
  EXPECT_TRUE(j["stage_seconds"].contains("verdict"));
  EXPECT_FALSE(j["stage_seconds"].contains("report"));
  EXPECT_NE(summary.find("stages:     configure "), std::string::npos) << summary;
  // The search's settings, defaults filled in.
  EXPECT_EQ(j["search"]["params"]["alpha"], "1.05");
}

// A float16 model is optimised like any other (its nodes computed in
// float32 and rounded, as ONNX Runtime's CPU provider runs them; they were
// kept opaque and nothing was rewritten): the batch norms fold into the
// convolutions, the written model is float16, and the check allows a few
// units of float16's precision.
TEST(Pipeline, AHalfPrecisionModelIsOptimisedInHalf) {
  std::string dir = testing::MakeTempDir("pipeline_half_");
  std::string model;
  ASSERT_NO_FATAL_FAILURE(WriteHalfModel(dir, &model));
  PipelineOptions o = Options(dir, model);
  o.force_optimised = true;
  // Costs that do not depend on the machine (1 us per node and 10 ns per
  // output element): with measured ones, whether the second batch norm's
  // fold looked like a gain depended on the timings' noise (one of two cold
  // clean-clone CI runs of the same tree folded only one).
  o.make_backend = [] {
    return std::make_unique<testing::ScriptedBackend>("scripted-half", [](const Graph& g, NodeId id) {
      double elements = 0;
      for (ValueId v : g.node(id).outputs) elements += static_cast<double>(g.value(v).type.NumElements());
      return 1e-3 + 1e-5 * elements;
    });
  };
  PipelineResult r = RunPipeline(o);
  Graph original = ImportOnnxFile(model), written = ImportOnnxFile(o.output);
  ASSERT_EQ(original.value(original.inputs()[0]).type.dtype, DType::kFloat16);
  for (NodeId id = 0; id < original.num_nodes(); ++id) EXPECT_FALSE(original.node(id).opaque());
  EXPECT_EQ(written.value(written.inputs()[0]).type.dtype, DType::kFloat16);
  EXPECT_EQ(written.value(written.outputs()[0]).type.dtype, DType::kFloat16);
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  EXPECT_EQ(j["before"]["op_counts"]["BatchNormalization"], 2);
  EXPECT_FALSE(j["after"]["op_counts"].contains("BatchNormalization")) << j["after"]["op_counts"];
  for (ValueId v : written.initializers()) EXPECT_EQ(written.value(v).initializer->dtype(), DType::kFloat16);
  EXPECT_EQ(r.check.allowed, 4.0 / 1024);
  EXPECT_LE(r.check.max_error, r.check.allowed);
  EquivalenceResult c = CompareGraphs(original, written, 9);
  EXPECT_TRUE(c.within) << c.max_error;
  EXPECT_NE(r.Summary().find("allowed: half precision"), std::string::npos) << r.Summary();
}

// A model that stores its weights in float16 and casts them to float32 for
// its MatMuls (a mixed-precision export): the written model keeps the casts
// and the float16 weights (folded, the file would be twice the size for no
// gain where it runs: ONNX Runtime folds them at load); the rest is
// optimised (a Relu of a Relu removed).
TEST(Pipeline, TheModelsFloat16WeightsAreWrittenAtTheirSize) {
  std::string dir = testing::MakeTempDir("pipeline_half_weights_");
  GraphBuilder b(5, 13);
  ValueId h = b.Input("x", {2, 512});
  for (int k = 0; k < 3; ++k)
    h = b.Op("Relu", {b.Op("MatMul", {h, b.Op("Cast", {b.Weight("w" + std::to_string(k), {512, 512}, 0.05f)},
                                              {{"to", Attribute::Int(static_cast<int64_t>(DType::kFloat32))}})})});
  Graph g = b.Build({b.Op("Relu", {h})});
  for (ValueId v : g.initializers()) {
    const TensorData& d = *g.value(v).initializer;
    g.MakeConstant(
        v, std::make_shared<const TensorData>(TensorData::FromDouble(d.ToDouble(), d.shape(), DType::kFloat16)));
    g.mutable_value(v).type.dtype = DType::kFloat16;
  }
  const std::string model = dir + "/half_weights.onnx";
  WriteFileAtomically(model, ExportOnnxBytes(g));
  PipelineOptions o = Options(dir, model);
  o.search = "passes";
  o.search_params.Set("passes", "idempotent_unary, dce");
  o.make_backend = [] {
    return std::make_unique<testing::ScriptedBackend>("half-weights", [](const Graph&, NodeId) { return 1.0; });
  };
  std::vector<std::string> lines;
  o.log = [&](bool, const std::string& line) { lines.push_back(line); };
  PipelineResult r = RunPipeline(o);
  EXPECT_EQ(r.finish.kept_weight_nodes, 3);
  EXPECT_EQ(r.finish.folded, 0);
  Graph written = ImportOnnxFile(o.output);
  EXPECT_EQ(written.OpCounts()["Relu"], 3) << "the optimised model is written";
  EXPECT_EQ(written.OpCounts()["Cast"], 3);
  for (ValueId v : written.initializers()) EXPECT_EQ(written.value(v).initializer->dtype(), DType::kFloat16);
  EXPECT_LE(ReadFile(o.output).size(), ReadFile(model).size());
  EXPECT_TRUE(CompareGraphs(ImportOnnxFile(model), written, 9).within);
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  EXPECT_EQ(j["finish"]["kept_weight_nodes"], 3) << j["finish"];
  bool said = false;
  for (const std::string& line : lines) said = said || line.find("kept 3 of the model's weight-only nodes") == 0;
  EXPECT_TRUE(said);
}

TEST(Pipeline, BadInputIsAnErrorAndWritesNothing) {
  std::string dir = testing::MakeTempDir("pipeline_bad_");
  std::string model = WriteModel(dir);
  std::string bytes = ReadFile(model);
  WriteFileAtomically(dir + "/truncated.onnx", bytes.substr(0, bytes.size() / 2));
  PipelineOptions o = Options(dir, dir + "/truncated.onnx");
  EXPECT_THROW(RunPipeline(o), Error);
  EXPECT_FALSE(FileExists(o.output));
  EXPECT_FALSE(FileExists(o.report));
  PipelineOptions missing = Options(dir, dir + "/missing.onnx");
  EXPECT_THROW(RunPipeline(missing), Error);
  PipelineOptions bad_search = Options(dir, model);
  bad_search.search = "magic";
  EXPECT_THROW(RunPipeline(bad_search), Error);
  PipelineOptions bad_level = Options(dir, model);
  bad_level.ort_level = "all";  // --device=cpu
  EXPECT_THROW(RunPipeline(bad_level), Error);
  EXPECT_FALSE(FileExists(o.output));
}

// No output replaces a file the run reads, however its path is spelled, and
// no two outputs are one file: each a one-line error before anything is
// written. (Before 2026-11-29 `--output=./model.onnx` replaced the model, and
// an output whose data file was the input's external data file replaced the
// input's weights.)
TEST(Pipeline, NoOutputReplacesAnInputOrAnotherOutput) {
  const std::string dir = testing::MakeTempDir("pipeline_roles_");
  const std::string model = WriteModel(dir);
  const std::string model_bytes = ReadFile(model);
  // A model whose weights are in "out.onnx.data" (as if written as
  // out.onnx, then renamed): an output named out.onnx would write its data
  // file over them.
  WriteOptions external;
  external.external = ExternalData::kExternal;
  WriteOnnxFile(ImportOnnxFile(model), dir + "/out.onnx", nullptr, external);
  ASSERT_EQ(::rename((dir + "/out.onnx").c_str(), (dir + "/ext.onnx").c_str()), 0);
  const std::string data_bytes = ReadFile(dir + "/out.onnx.data");
  ASSERT_EQ(::symlink(model.c_str(), (dir + "/link.onnx").c_str()), 0);
  const std::string rules = dir + "/rules.pb";
  WriteFileAtomically(rules, ReadFile(RuleDatabasePath("", "")));

  auto error = [&](PipelineOptions o) {
    o.rules = rules;
    try {
      RunPipeline(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  PipelineOptions dot_slash = Options(dir, model);
  dot_slash.output = dir + "/./model.onnx";
  EXPECT_NE(error(dot_slash).find("--output '" + dir + "/./model.onnx' is the input model"), std::string::npos)
      << error(dot_slash);
  PipelineOptions through_link = Options(dir, dir + "/link.onnx");
  through_link.output = model;
  EXPECT_NE(error(through_link).find("is the input model"), std::string::npos) << error(through_link);
  PipelineOptions data_file = Options(dir, dir + "/ext.onnx");
  data_file.output = dir + "/out.onnx";
  EXPECT_NE(error(data_file).find("--output's data file '" + dir +
                                  "/out.onnx.data' is an external data file of the "
                                  "input model"),
            std::string::npos)
      << error(data_file);
  PipelineOptions over_data = Options(dir, dir + "/ext.onnx");
  over_data.output = dir + "/sub/../out.onnx.data";
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0755), 0);
  EXPECT_NE(error(over_data).find("is an external data file of the input model"), std::string::npos)
      << error(over_data);
  PipelineOptions report_over_rules = Options(dir, model);
  report_over_rules.report = dir + "/./rules.pb";
  EXPECT_NE(error(report_over_rules).find("--report '" + dir + "/./rules.pb' is the rule database"), std::string::npos)
      << error(report_over_rules);
  PipelineOptions picture_over_output = Options(dir, model);
  picture_over_output.picture = dir + "/./out.onnx";
  EXPECT_NE(error(picture_over_output).find("--picture and --output are the same file"), std::string::npos)
      << error(picture_over_output);
  PipelineOptions report_over_dot = Options(dir, model);
  report_over_dot.dot = dir + "/sub/../report.json";
  EXPECT_NE(error(report_over_dot).find("--dot and --report are the same file"), std::string::npos)
      << error(report_over_dot);

  // A model with external data is two files: never written onto a FIFO or
  // a device (which a plain file is written into in place).
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0644), 0);
  PipelineOptions into_fifo = Options(dir, dir + "/ext.onnx");
  into_fifo.output = dir + "/fifo";
  EXPECT_NE(error(into_fifo).find("it is not a regular file, and a model with external data"), std::string::npos)
      << error(into_fifo);
  struct stat st;
  ASSERT_EQ(::lstat((dir + "/fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));

  // A model read from a pipe (--model=<(cat m.onnx)) has no directory to
  // write beside: --output is needed (the default path was
  // /dev/fd/N.rlflow.onnx, which failed after the search).
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_GE(::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20), static_cast<int>(model_bytes.size()));
  WriteAll(fds[1], model_bytes.data(), model_bytes.size(), "pipe");
  ::close(fds[1]);
  PipelineOptions from_pipe = Options(dir, "/dev/fd/" + std::to_string(fds[0]));
  from_pipe.output = "";
  EXPECT_NE(error(from_pipe).find("--model '/dev/fd/" + std::to_string(fds[0]) +
                                  "' is not a regular file (a pipe or device): give --output"),
            std::string::npos)
      << error(from_pipe);
  ::close(fds[0]);

  // Nothing was written or replaced.
  EXPECT_EQ(ReadFile(model), model_bytes);
  EXPECT_EQ(ReadFile(dir + "/out.onnx.data"), data_bytes);
  EXPECT_FALSE(FileExists(dir + "/out.onnx"));
  EXPECT_FALSE(FileExists(dir + "/report.json"));
  // The same model read from another file is optimised and written beside it.
  PipelineOptions fine = Options(dir, dir + "/ext.onnx");
  fine.output = dir + "/fine.onnx";
  fine.rules = rules;
  fine.search = "none";
  RunPipeline(fine);
  EXPECT_TRUE(FileExists(dir + "/fine.onnx"));
  EXPECT_EQ(ReadFile(dir + "/out.onnx.data"), data_bytes);
}

TEST(Pipeline, AnInterruptedOrEmptySearchWritesTheOriginalBytes) {
  std::string dir = testing::MakeTempDir("pipeline_stop_");
  std::string model = WriteModel(dir);
  for (const bool interrupt : {true, false}) {
    PipelineOptions o = Options(dir, model);
    std::atomic<bool> stop{interrupt};
    o.interrupted = &stop;
    if (!interrupt) o.search = "none";
    PipelineResult r = RunPipeline(o);
    EXPECT_EQ(r.search.result.stop_reason, interrupt ? StopReason::kInterrupted : StopReason::kNoSearch);
    EXPECT_TRUE(r.search.result.applied.empty());
    EXPECT_TRUE(r.check.unchanged);
    EXPECT_TRUE(r.verdict.keep_original);
    EXPECT_EQ(ReadFile(o.output), ReadFile(model)) << interrupt;
  }
}

// A backend scripted like ONNX Runtime: each node costs 1 us plus 10 ns per
// output element, alone and in context, but whole runs also pay 1 ms for
// every Mul fed by a Transpose (a fusion the runtime no longer makes) and
// no node's timing shows it, so the per-node costs cannot see it.
double FusionNodeMs(const Graph& g, NodeId id) {
  double elements = 0;
  for (ValueId v : g.node(id).outputs) elements += static_cast<double>(g.value(v).type.NumElements());
  return 1e-3 + 1e-5 * elements;
}
double FusionRunMs(const Graph& g) {
  double ms = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    ms += FusionNodeMs(g, id);
    if (g.node(id).op != "Mul") continue;
    for (ValueId in : g.node(id).inputs) {
      NodeId p = in == kNoValue ? kNoNode : g.value(in).producer;
      if (p != kNoNode && g.node(p).op == "Transpose") ms += 1.0;
    }
  }
  return ms;
}

// Two rules apply: a written-out layer norm into LayerNormalization (a real
// gain) and a scale moved from a big operand of a MatMul onto its small
// one, which is transposed (a gain to the per-node costs, a loss in whole
// runs). The first verdict finds the graph slower; searching again without
// the scale motion finds it faster, and that graph is written.
// The model of the two tests below, written into `dir` (model.onnx), and
// the two rules alone, from the checked-in database.
std::string FusionBreakingModel(const std::string& dir, rules::RuleDatabase* two) {
  GraphBuilder b(5);
  ValueId x = b.Input("x", {1, 32, 8}), w = b.Input("w", {32, 256}), z = b.Input("z", {1, 8, 32});
  ValueId t = b.Op("Transpose", {x}, {{"perm", Attribute::Ints({0, 2, 1})}});
  ValueId scaled = b.Op("Mul", {b.ConstFloat(0.125f, "scale"), w});
  ValueId y1 = b.Op("MatMul", {t, scaled});
  ValueId m = b.Op("ReduceMean", {z}, {{"axes", Attribute::Ints({-1})}});
  ValueId d = b.Op("Sub", {z, m});
  ValueId v = b.Op("ReduceMean", {b.Op("Pow", {d, b.ConstFloat(2.0f)})}, {{"axes", Attribute::Ints({-1})}});
  ValueId y2 = b.Op("Div", {d, b.Op("Sqrt", {b.Op("Add", {v, b.ConstFloat(1e-5f)})})});
  std::string model = dir + "/model.onnx";
  WriteOnnxFile(b.Build({y1, y2}), model);
  rules::RuleDatabase db = LoadRuleDatabase(FindRunfile("rules/default.rules.pb"));
  *two = db;
  two->clear_rules();
  for (const rules::Rule& r : db.rules())
    if (r.id() == "0a73e9f3f3a1" || r.id() == "9638de9c216a") *two->add_rules() = r;
  return model;
}

TEST(Pipeline, ASlowerVerdictSearchesAgainWithoutOneAppliedRule) {
  std::string dir = testing::MakeTempDir("pipeline_retry_");
  rules::RuleDatabase two;
  const std::string model = FusionBreakingModel(dir, &two);
  ASSERT_EQ(two.rules_size(), 2);
  SaveMessageAtomically(two, dir + "/two.rules.pb");

  PipelineOptions o = Options(dir, model);
  o.rules = dir + "/two.rules.pb";
  o.search = "greedy";
  o.measure_runs = 20;
  // The last run is given the database already read (PipelineOptions::
  // loaded_rules): the path it names is not read, and the result is the same.
  // --retries' default (-1) retries on a backend that fuses nodes, as ONNX
  // Runtime, and not on one that runs node by node, as rlflow's executor.
  struct Case {
    int retries;
    bool fuses, loaded;
  };
  for (const auto& [retries, fuses, loaded] : {Case{0, true, false}, Case{-1, false, false}, Case{2, false, false},
                                               Case{-1, true, false}, Case{2, true, true}}) {
    SCOPED_TRACE(::testing::Message() << "retries " << retries << ", fuses " << fuses << ", loaded " << loaded);
    o.retries = retries;
    o.make_backend = [fuses = fuses] {
      auto backend = std::make_unique<testing::ScriptedBackend>("scripted-fusion-breaking", FusionNodeMs, FusionRunMs);
      backend->set_fuses_nodes(fuses);
      return backend;
    };
    if (loaded) {
      o.rules = dir + "/not-read.rules.pb";
      o.loaded_rules = std::make_shared<const rules::RuleDatabase>(two);
    }
    PipelineResult r = RunPipeline(o);
    EXPECT_EQ(r.configure.rule_count, 2);
    EXPECT_EQ(r.configure.rules_path, o.rules);
    std::map<std::string, int> ops;
    for (const std::string& a : r.search.result.applied) ++ops[a.substr(0, a.find(' '))];
    Graph written = ImportOnnxFile(o.output);
    auto counts = written.OpCounts();
    if (retries == 0 || (retries < 0 && !fuses)) {
      // Both rules applied, the whole-run loss measured: the original is written.
      EXPECT_EQ(ops["0a73e9f3f3a1"], 1);
      EXPECT_EQ(ops["9638de9c216a"], 1);
      EXPECT_EQ(r.verdict.outcome, Verdict::Outcome::kSlower);
      EXPECT_TRUE(r.verdict.keep_original);
      EXPECT_TRUE(r.retries.empty());
      EXPECT_EQ(ReadFile(o.output), ReadFile(model));
      continue;
    }
    ASSERT_FALSE(r.retries.empty());
    EXPECT_GT(r.write.real_steps, r.search.result.real_steps);  // the first search's steps count too
    EXPECT_EQ(r.retries.back().left_out, "0a73e9f3f3a1");
    EXPECT_EQ(r.retries.back().outcome, "faster");
    EXPECT_EQ(r.retries.back().applied, 1);
    EXPECT_FALSE(r.verdict.keep_original);
    EXPECT_TRUE(r.verdict.faster());
    EXPECT_GT(r.verdict.wall.level, 0.95);  // held to 1 - 0.05/2
    EXPECT_EQ(ops.count("0a73e9f3f3a1"), 0u);
    EXPECT_EQ(ops["9638de9c216a"], 1);
    EXPECT_EQ(counts["LayerNormalization"], 1);
    EXPECT_EQ(counts.count("Pow"), 0u);
    EXPECT_LE(CompareGraphs(ImportOnnxFile(model), written, 3).max_error, 1e-4);
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    ASSERT_EQ(j["retries"].size(), r.retries.size());
    EXPECT_EQ(j["retries"].back()["left_out"], "0a73e9f3f3a1");
    EXPECT_EQ(j["retries"].back()["outcome"], "faster");
  }
}

// The guard (--guard): the device runs node by node, so both rules of the
// model are gains there and its verdict finds the result faster; the
// guard's runtime fuses like ONNX Runtime (the scale motion costs it a whole
// fusion) and finds it slower. The original is then kept, or, with retries,
// the search runs again without the applied rule that ORT pays for, and the
// graph faster in both is written. A guard that cannot time the pair keeps
// the original; none (--guard=none) writes what the device found faster.
TEST(Pipeline, TheGuardKeepsWhatOnnxRuntimeRunsSlower) {
  std::string dir = testing::MakeTempDir("pipeline_guard_");
  rules::RuleDatabase two;
  const std::string model = FusionBreakingModel(dir, &two);
  ASSERT_EQ(two.rules_size(), 2);

  PipelineOptions o = Options(dir, model);
  o.loaded_rules = std::make_shared<const rules::RuleDatabase>(two);
  o.search = "greedy";
  o.measure_runs = 20;
  o.make_backend = [] { return std::make_unique<testing::ScriptedBackend>("scripted-node-by-node", FusionNodeMs); };
  enum class Guard { kNone, kFusing, kFusingNoRetries, kFailing };
  for (Guard guard : {Guard::kNone, Guard::kFusing, Guard::kFusingNoRetries, Guard::kFailing}) {
    SCOPED_TRACE(static_cast<int>(guard));
    o.guard = guard == Guard::kNone ? "none" : "ort";
    o.retries = guard == Guard::kFusingNoRetries ? 0 : -1;
    o.make_guard_backend = [guard]() -> std::unique_ptr<TimingBackend> {
      if (guard == Guard::kFailing) {
        struct Failing : testing::ScriptedBackend {
          Failing() : ScriptedBackend("scripted-failing", FusionNodeMs) {}
          PairedTimes TimePaired(const Graph&, const Graph&, int, const TimingOptions&) override {
            Fail("the runtime cannot run the model");
          }
        };
        return std::make_unique<Failing>();
      }
      return std::make_unique<testing::ScriptedBackend>("scripted-fusing", FusionNodeMs, FusionRunMs);
    };
    PipelineResult r = RunPipeline(o);
    std::map<std::string, int> ops;
    for (const std::string& a : r.search.result.applied) ++ops[a.substr(0, a.find(' '))];
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    EXPECT_TRUE(r.verdict.faster());  // on the device, every attempt
    if (guard == Guard::kNone) {
      EXPECT_FALSE(r.verdict.guarded);
      EXPECT_FALSE(j["verdict"].contains("guard"));
      EXPECT_EQ(ops["0a73e9f3f3a1"], 1);
      EXPECT_FALSE(r.verdict.keep_original);
      EXPECT_NE(ReadFile(o.output), ReadFile(model));
      continue;
    }
    EXPECT_EQ(j["verdict"]["guard"]["device"], "ort");
    if (guard == Guard::kFailing) {
      EXPECT_FALSE(r.verdict.guarded);
      EXPECT_NE(r.verdict.guard_note.find("the runtime cannot run the model"), std::string::npos)
          << r.verdict.guard_note;
      EXPECT_TRUE(r.verdict.keep_original);
      EXPECT_EQ(ReadFile(o.output), ReadFile(model));
      continue;
    }
    ASSERT_TRUE(r.verdict.guarded);
    if (guard == Guard::kFusingNoRetries) {
      EXPECT_EQ(r.verdict.guard.outcome, Verdict::Outcome::kSlower);
      EXPECT_EQ(j["verdict"]["guard"]["outcome"], "slower");
      EXPECT_TRUE(r.verdict.keep_original);
      EXPECT_TRUE(r.retries.empty());
      EXPECT_EQ(ReadFile(o.output), ReadFile(model));
      continue;
    }
    // Searched again without the scale motion: faster in both.
    ASSERT_EQ(r.retries.size(), 1u);
    EXPECT_EQ(r.retries[0].left_out, "0a73e9f3f3a1");
    EXPECT_EQ(r.retries[0].guard_outcome, "faster");
    EXPECT_EQ(j["retries"][0]["guard"]["outcome"], "faster");
    EXPECT_EQ(r.verdict.guard.outcome, Verdict::Outcome::kFaster);
    EXPECT_EQ(j["verdict"]["guard"]["outcome"], "faster");
    // The retry's verdict at 97.5% (two retries), its guard at 95%: a veto
    // is never looser in a retry.
    EXPECT_EQ(r.verdict.wall.level, 0.975);
    EXPECT_EQ(r.verdict.guard.wall.level, 0.95);
    EXPECT_FALSE(r.verdict.keep_original);
    EXPECT_EQ(ops.count("0a73e9f3f3a1"), 0u);
    EXPECT_EQ(ops["9638de9c216a"], 1);
    EXPECT_EQ(ImportOnnxFile(o.output).OpCounts()["LayerNormalization"], 1);
  }
  // Without --measure_runs, the guard in a runtime that times in session
  // pairs (as ONNX Runtime) gives this fast model what its own verdict
  // there would: 120 pairs in 12 session pairs; the executor's verdict 40
  // in one block.
  o.measure_runs = 0;
  o.retries = 0;
  o.guard = "ort";
  o.make_guard_backend = []() -> std::unique_ptr<TimingBackend> {
    auto b = std::make_unique<testing::ScriptedBackend>("scripted-fusing", FusionNodeMs, FusionRunMs);
    b->set_min_paired_pairs(20);
    return b;
  };
  PipelineResult r = RunPipeline(o);
  ASSERT_TRUE(r.verdict.guarded) << r.Summary();
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  EXPECT_EQ(j["verdict"]["pairs"], 40);
  EXPECT_EQ(j["verdict"]["blocks"], 1);
  EXPECT_EQ(j["verdict"]["guard"]["pairs"], 120);
  EXPECT_EQ(j["verdict"]["guard"]["blocks"], 12);
}

// The verdict at the check's second binding of the symbolic dimensions
// (--second_binding_verdict): the model of the tests above with x's and z's
// first dimension a symbolic batch, the layer-norm rule alone. The scripted
// backend charges every node as before, and whole runs of a graph with
// LayerNormalization 5 ms more from batch 2 on (the second binding, from 1),
// so the result is faster at the binding it was optimised at and slower at
// the other. Without --input_shape (auto: required) the original is
// written; with the shapes given (auto: reported) the result is, the line
// saying where it is slower; require keeps the original with the shapes
// given too; off measures nothing there; a result faster at both is
// written. A second binding given (--second_input_shape, x's batch at 3;
// z, sharing its name, follows) is the one checked and timed, and auto
// requires it with the shapes given too; report only reports it.
// FusionBreakingModel with x's and z's first dimension, and the outputs',
// a symbolic batch.
std::string FusionBreakingModelWithBatch(const std::string& dir, rules::RuleDatabase* two) {
  const std::string model = FusionBreakingModel(dir, two);
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(ReadFile(model)));
  m.mutable_graph()->clear_value_info();
  auto batch = [](onnx::ValueInfoProto* vi) {
    vi->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  };
  for (auto& in : *m.mutable_graph()->mutable_input())
    if (in.name() == "x" || in.name() == "z") batch(&in);
  for (auto& out : *m.mutable_graph()->mutable_output()) batch(&out);
  WriteFileAtomically(model, m.SerializeAsString());
  return model;
}

TEST(Pipeline, TheVerdictAtTheSecondBindingKeepsTheOriginalWhereRequired) {
  std::string dir = testing::MakeTempDir("pipeline_second_binding_");
  rules::RuleDatabase two;
  const std::string model = FusionBreakingModelWithBatch(dir, &two);
  rules::RuleDatabase one = two;
  one.clear_rules();
  for (const rules::Rule& rule : two.rules())
    if (rule.id() == "9638de9c216a") *one.add_rules() = rule;
  ASSERT_EQ(one.rules_size(), 1);
  PipelineOptions base = Options(dir, model);
  base.loaded_rules = std::make_shared<const rules::RuleDatabase>(one);
  base.search = "greedy";
  base.measure_runs = 20;
  auto backend = [](bool penalty, int min_paired_pairs = 0) {
    return [penalty, min_paired_pairs] {
      auto b = std::make_unique<testing::ScriptedBackend>(
          "scripted-second-binding", FusionNodeMs, [penalty](const Graph& g) {
            double ms = FusionRunMs(g);
            if (!penalty || g.OpCounts().count("LayerNormalization") == 0) return ms;
            for (ValueId in : g.inputs())
              if (g.value(in).name == "x" && g.value(in).type.shape[0] >= 2) ms += 5.0;
            return ms;
          });
      b->set_min_paired_pairs(min_paired_pairs);
      return b;
    };
  };
  struct Case {
    std::string mode;
    bool given, penalty, written_original, required;
    bool second_given = false;  // --second_input_shape=x:3,32,8 (z's batch by its name)
  };
  for (const Case& c : {Case{"auto", false, true, true, true}, Case{"auto", true, true, false, false},
                        Case{"require", true, true, true, true}, Case{"off", false, true, false, false},
                        Case{"auto", false, false, false, true}, Case{"auto", true, true, true, true, true},
                        Case{"report", true, true, false, false, true}}) {
    SCOPED_TRACE(c.mode + (c.given ? ", shapes given" : "") + (c.penalty ? ", slower at batch 2" : "") +
                 (c.second_given ? ", second binding given" : ""));
    PipelineOptions o = base;
    o.second_binding_verdict = c.mode;
    o.make_backend = backend(c.penalty);
    if (c.given) o.input_shapes = {{"x", {1, 32, 8}}, {"z", {1, 8, 32}}};
    if (c.second_given) o.second_input_shapes = {{"x", {3, 32, 8}}};
    PipelineResult r = RunPipeline(o);
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    EXPECT_TRUE(r.verdict.faster());  // at batch 1
    EXPECT_EQ(r.verdict.keep_original, c.written_original);
    EXPECT_EQ(ReadFile(o.output) == ReadFile(model), c.written_original);
    if (c.mode == "off") {
      EXPECT_FALSE(r.verdict.second_measured);
      EXPECT_FALSE(j["verdict"].contains("second_binding"));
      continue;
    }
    ASSERT_TRUE(r.verdict.second_measured);
    EXPECT_EQ(r.verdict.second_required, c.required);
    EXPECT_EQ(r.verdict.second_binding, c.second_given ? "x:[3,32,8], z:[3,8,32]" : "x:[2,32,8], z:[2,8,32]");
    EXPECT_EQ(r.verdict.second_given, c.second_given);
    EXPECT_EQ(j["verdict"]["second_binding"]["given"], c.second_given);
    EXPECT_EQ(r.verdict.second.outcome, c.penalty ? Verdict::Outcome::kSlower : Verdict::Outcome::kFaster);
    EXPECT_EQ(j["verdict"]["second_binding"]["outcome"], c.penalty ? "slower" : "faster");
    EXPECT_EQ(j["verdict"]["second_binding"]["required"], c.required);
    EXPECT_TRUE(r.retries.empty());  // one rule applied: nothing to leave out
    const std::string summary = r.Summary();
    EXPECT_NE(summary.find("second:     at "), std::string::npos) << summary;
    if (c.written_original) {
      EXPECT_NE(summary.find("but slower at "), std::string::npos) << summary;
    }
  }
  {
    // The pairs (without --measure_runs), at both bindings: on a backend that
    // times pairs in session pairs (ONNX Runtime) up to 120 for a fast
    // model, in blocks of 10; else at most 40, in one block.
    for (const int min_paired_pairs : {20, 0}) {
      SCOPED_TRACE("pairs, min_paired_pairs " + std::to_string(min_paired_pairs));
      const int pairs = min_paired_pairs > 0 ? 120 : 40, blocks = min_paired_pairs > 0 ? 12 : 1;
      PipelineOptions o = base;
      o.measure_runs = 0;
      o.make_backend = backend(true, min_paired_pairs);
      PipelineResult r = RunPipeline(o);
      ASSERT_TRUE(r.verdict.second_measured);
      EXPECT_EQ(r.verdict.second.wall.n, pairs);
      EXPECT_EQ(r.verdict.second.blocks, blocks);
      EXPECT_EQ(r.verdict.pairs, pairs);
      EXPECT_EQ(r.verdict.wall.n, pairs);
      EXPECT_EQ(r.verdict.blocks, blocks);
      EXPECT_TRUE(r.verdict.keep_original);
      nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
      EXPECT_EQ(j["verdict"]["pairs"], pairs);
      EXPECT_EQ(j["verdict"]["blocks"], blocks);
      EXPECT_EQ(j["verdict"]["second_binding"]["pairs"], pairs);
      EXPECT_EQ(j["verdict"]["second_binding"]["blocks"], blocks);
    }
  }
}

// The search at the second binding too (--second_binding_search): the
// model above, both rules; the scripted backend charges a LayerNormalization
// node 5 ms more from batch 2 on (so the cost model sees it, at the second
// binding only) and whole runs the sum of their nodes. Optimised at batch 1
// with --second_input_shape at batch 3, the search (auto: on) takes only the
// scale motion (a gain at both), and that graph is written, faster at both,
// with no retry. Without it (off) both rules are applied, the verdict at
// batch 3 finds the result slower, and the original is written or a retry
// needed. "on" without --second_input_shape: at the check's moved binding
// (batch 2). A model whose inputs have no symbolic dimensions: said, not on.
TEST(Pipeline, TheSearchAtTheSecondBindingTakesOnlyGraphsNotSlowerThere) {
  std::string dir = testing::MakeTempDir("pipeline_second_search_");
  rules::RuleDatabase two;
  const std::string model = FusionBreakingModelWithBatch(dir, &two);
  PipelineOptions base = Options(dir, model);
  base.loaded_rules = std::make_shared<const rules::RuleDatabase>(two);
  base.search = "greedy";
  base.measure_runs = 20;
  base.input_shapes = {{"x", {1, 32, 8}}, {"z", {1, 8, 32}}};
  base.make_backend = [] {
    return std::make_unique<testing::ScriptedBackend>("scripted-second-search", [](const Graph& g, NodeId id) {
      const Node& n = g.node(id);
      const bool big = n.op == "LayerNormalization" && g.value(n.inputs[0]).type.shape[0] >= 2;
      return FusionNodeMs(g, id) + (big ? 5.0 : 0.0);
    });
  };
  auto layer_norms = [](const std::string& path) { return ImportOnnxFile(path).OpCounts()["LayerNormalization"]; };
  {
    SCOPED_TRACE("given, auto");
    PipelineOptions o = base;
    o.second_input_shapes = {{"x", {3, 32, 8}}};
    PipelineResult r = RunPipeline(o);
    const auto& s2 = r.search.second;
    EXPECT_TRUE(s2.on);
    EXPECT_EQ(s2.shapes, "x:[3,32,8], z:[3,8,32]");
    EXPECT_GE(s2.refused, 1);
    EXPECT_GE(s2.judged, s2.refused + 1);
    EXPECT_LT(s2.result_ms, s2.original_ms);
    EXPECT_EQ(r.search.result.applied, std::vector<std::string>{"0a73e9f3f3a1"});
    EXPECT_TRUE(r.verdict.faster());
    ASSERT_TRUE(r.verdict.second_measured);
    EXPECT_FALSE(r.verdict.second_slower());
    EXPECT_FALSE(r.verdict.keep_original);
    EXPECT_TRUE(r.retries.empty());
    EXPECT_EQ(layer_norms(o.output), 0);
    EXPECT_NE(ReadFile(o.output), ReadFile(model));
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    EXPECT_EQ(j["search"]["second_binding"]["shapes"], "x:[3,32,8], z:[3,8,32]");
    EXPECT_EQ(j["search"]["second_binding"]["graphs_slower"], s2.refused);
    EXPECT_NE(r.Summary().find("at x:[3,32,8], z:[3,8,32] too (--second_binding_search)"), std::string::npos)
        << r.Summary();
  }
  {
    SCOPED_TRACE("given, off");
    PipelineOptions o = base;
    o.second_input_shapes = {{"x", {3, 32, 8}}};
    o.second_binding_search = "off";
    PipelineResult r = RunPipeline(o);
    EXPECT_FALSE(r.search.second.on);
    // The first attempt (both rules) was slower there: a retry without one
    // of them is what was written.
    ASSERT_FALSE(r.retries.empty());
    EXPECT_EQ(r.retries.back().applied, 1);
    EXPECT_EQ(r.retries.back().outcome, "faster");
    // The retry's verdict at its stricter level, the second binding's at
    // 95%: a veto is never looser in a retry.
    EXPECT_GT(r.verdict.wall.level, 0.95);
    ASSERT_TRUE(r.verdict.second_measured);
    EXPECT_EQ(r.verdict.second.wall.level, 0.95);
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    EXPECT_FALSE(j["search"].contains("second_binding"));
  }
  {
    SCOPED_TRACE("on, the moved binding");
    PipelineOptions o = base;
    o.second_binding_search = "on";
    PipelineResult r = RunPipeline(o);
    EXPECT_TRUE(r.search.second.on);
    EXPECT_EQ(r.search.second.shapes, "x:[2,32,8], z:[2,8,32]");
    EXPECT_EQ(r.search.result.applied, std::vector<std::string>{"0a73e9f3f3a1"});
    EXPECT_EQ(layer_norms(o.output), 0);
  }
  {
    SCOPED_TRACE("auto without --second_input_shape: off");
    PipelineResult r = RunPipeline(base);
    EXPECT_FALSE(r.search.second.on);
    EXPECT_EQ(r.search.result.applied.size(), 2u);
  }
  {
    SCOPED_TRACE("no symbolic dimensions");
    PipelineOptions o = base;
    o.model = FusionBreakingModel(dir, &two);  // written again, static
    o.input_shapes.clear();
    o.second_binding_search = "on";
    PipelineResult r = RunPipeline(o);
    EXPECT_FALSE(r.search.second.on);
    EXPECT_NE(r.search.second.note.find("no symbolic dimensions"), std::string::npos) << r.search.second.note;
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    EXPECT_NE(j["search"]["second_binding"]["note"].get<std::string>().find("no symbolic"), std::string::npos);
  }
}

// x: [batch, 3, 4] reshaped to [n, w / 2, -1] where n and w are read from
// x's shape (torch's `n, s, w = x.shape`): w is static though the batch is
// symbolic. The import folds it (one Gather, no Div left); the file computes
// it on every run. The verdict compares with the file's graph, so that
// folding alone is an optimisation the verdict sees and writes.
TEST(Pipeline, TheVerdictComparesWithTheGraphAsTheFileComputesIt) {
  std::string dir = testing::MakeTempDir("pipeline_static_");
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("static_width");
  auto info = [](onnx::ValueInfoProto* vi, const std::string& name, const std::vector<int64_t>& shape) {
    vi->set_name(name);
    auto* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) {
      auto* dim = t->mutable_shape()->add_dim();
      d >= 0 ? dim->set_dim_value(d) : dim->set_dim_param("batch");
    }
  };
  auto int64s = [&](const std::string& name, const std::vector<int64_t>& v, bool scalar) {
    onnx::TensorProto* t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  };
  auto node = [&](const std::string& op, const std::vector<std::string>& in, const std::string& out) {
    onnx::NodeProto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g.node_size()));
    for (const auto& s : in) n->add_input(s);
    n->add_output(out);
    return n;
  };
  info(g.add_input(), "x", {-1, 3, 4});
  int64s("zero", {0}, true);
  int64s("two", {2}, true);
  int64s("axes0", {0}, false);
  int64s("minus1", {-1}, false);
  node("Shape", {"x"}, "s");
  node("Gather", {"s", "zero"}, "n");
  node("Gather", {"s", "two"}, "w");
  node("Div", {"w", "two"}, "half");
  node("Unsqueeze", {"n", "axes0"}, "n1");
  node("Unsqueeze", {"half", "axes0"}, "half1");
  onnx::NodeProto* concat = node("Concat", {"n1", "half1", "minus1"}, "target");
  onnx::AttributeProto* axis = concat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  node("Reshape", {"x", "target"}, "r");
  node("Relu", {"r"}, "y");
  info(g.add_output(), "y", {-1, 2, 6});
  const std::string model = dir + "/model.onnx";
  WriteFileAtomically(model, m.SerializeAsString());

  PipelineOptions o = Options(dir, model);
  o.search = "none";
  o.measure_runs = 20;
  // Every node costs the same: the graph with fewer nodes is faster.
  o.make_backend = [] {
    return std::make_unique<testing::ScriptedBackend>("scripted-per-node", [](const Graph&, NodeId) { return 0.01; });
  };
  PipelineResult r = RunPipeline(o);
  EXPECT_EQ(r.load.static_dims, 1);
  EXPECT_FALSE(r.check.unchanged) << "the file computes the width; the imported graph has it folded";
  EXPECT_GT(r.search.before_estimate, r.verdict.after_estimate);
  EXPECT_TRUE(r.verdict.faster());
  ASSERT_FALSE(r.verdict.keep_original);
  Graph original = ImportOnnxFile(model), written = ImportOnnxFile(o.output);
  auto count = [](const Graph& graph, const std::string& op) {
    auto counts = graph.OpCounts();
    return counts.count(op) ? counts.at(op) : 0;
  };
  EXPECT_EQ(r.finish.before.nodes, 9) << "the file's nodes, none folded";
  EXPECT_EQ(count(written, "Gather"), 1) << "only the batch is read at run time";
  EXPECT_TRUE(written.info().symbolic_dims);
  // Right at another batch too.
  ImportOptions batch3;
  batch3.input_shapes["x"] = {3, 3, 4};
  EXPECT_LE(CompareGraphs(ImportOnnxFile(model, batch3), ImportOnnxFile(o.output, batch3), 3).max_error, 1e-6);
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  EXPECT_EQ(j["static_dims_folded"], 1);
  EXPECT_EQ(count(original, "Gather"), 1) << "imported with the folding (the default)";

  // Values given with --input_data are what the graph as the file computes
  // it runs on as well (the reference run, the check, the verdict).
  onnx::TensorProto given;
  given.set_name("x");
  given.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {2, 3, 4}) given.add_dims(d);
  for (int k = 0; k < 24; ++k) given.add_float_data(0.5f * static_cast<float>(k) - 3.0f);
  WriteFileAtomically(dir + "/x.pb", given.SerializeAsString());
  PipelineOptions with_data = o;
  with_data.input_data["x"] = dir + "/x.pb";
  with_data.output = dir + "/with_data.onnx";
  with_data.report = dir + "/with_data.json";
  PipelineResult d = RunPipeline(with_data);
  EXPECT_EQ(d.load.static_dims, 1);
  EXPECT_EQ(d.reference_run.filled["x"], "given (--input_data)");
}

// A backend whose in-context timings of a Conv with a bias (what folding a
// batch norm makes) are 100x their isolated ones, and which interrupts the
// run when it first times such a conv in context: after round 1, whose graph
// has them. Round 2 is stopped before it explores a graph, and round 1's
// graph, dearer under the new timings, is not kept.
class StopAtTheChosenGraph : public testing::ScriptedBackend {
 public:
  explicit StopAtTheChosenGraph(std::atomic<bool>* stop)
      : ScriptedBackend("scripted-stop-at-round-2", FusionNodeMs), stop_(stop) {}
  InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions& o) override {
    InContextTimes t = ScriptedBackend::TimeNodesInContext(g, runs, o);
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
      if (g.node(id).op != "Conv" || g.node(id).inputs.size() < 3) continue;
      stop_->store(true);
      t.run_ms += 99 * t.node_ms[id];
      t.node_ms[id] *= 100;
    }
    return t;
  }

 private:
  std::atomic<bool>* stop_;
};

// The report's work counters are every round's: a round stopped at once
// adds nothing, but does not erase what the rounds before it did.
TEST(Pipeline, TheSearchCountersSumTheRounds) {
  std::string dir = testing::MakeTempDir("pipeline_rounds_");
  std::string model = WriteModel(dir);
  PipelineOptions o = Options(dir, model);
  std::atomic<bool> stop{false};
  o.interrupted = &stop;
  o.make_backend = [&stop] { return std::make_unique<StopAtTheChosenGraph>(&stop); };
  PipelineResult r = RunPipeline(o);
  const SearchRecord& rec = r.search;
  ASSERT_EQ(rec.rounds, 2);
  ASSERT_EQ(rec.per_round.size(), 2u);
  EXPECT_GT(rec.per_round[0].graphs_explored, 0);
  EXPECT_GT(rec.per_round[0].applied, 0);
  EXPECT_EQ(rec.per_round[1].graphs_explored, 0);
  EXPECT_EQ(rec.per_round[1].stop_reason, StopReason::kInterrupted);
  EXPECT_TRUE(rec.result.applied.empty());  // round 2's graph (the original) was kept
  EXPECT_EQ(rec.result.graphs_explored, rec.per_round[0].graphs_explored);
  EXPECT_EQ(rec.result.rewrites_costed, rec.per_round[0].rewrites_costed + rec.per_round[1].rewrites_costed);
  EXPECT_EQ(rec.result.graphs_built, rec.per_round[0].graphs_built + rec.per_round[1].graphs_built);
  EXPECT_EQ(rec.result.real_steps, rec.per_round[0].real_steps + rec.per_round[1].real_steps);
  EXPECT_EQ(ReadFile(o.output), ReadFile(model));
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  EXPECT_EQ(j["search"]["graphs_explored"], rec.per_round[0].graphs_explored);
  ASSERT_EQ(j["search"]["per_round"].size(), 2u);
  EXPECT_EQ(j["search"]["per_round"][0]["graphs_explored"], rec.per_round[0].graphs_explored);
  EXPECT_EQ(j["search"]["per_round"][1]["stop_reason"], StopReasonName(StopReason::kInterrupted));
  const std::string summary = r.Summary();
  EXPECT_NE(summary.find(std::to_string(rec.per_round[0].graphs_explored) + " + 0 by round"), std::string::npos)
      << summary;
}

// A backend whose every calibration takes 2 s (a large model's).
class SlowCalibration : public testing::ScriptedBackend {
 public:
  SlowCalibration() : ScriptedBackend("scripted-slow-calibration", FusionNodeMs) {}
  InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions& o) override {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    return ScriptedBackend::TimeNodesInContext(g, runs, o);
  }
};

// Under a deadline, another round starts only if its calibration and search
// fit in the time left: here the chosen graph has new keys (convs with a
// folded bias) but calibrating it (2 s) does not fit in the 1.5 s deadline,
// so the first round's graph stands; before, the calibration ran past the
// deadline and round 2 was stopped where it started.
TEST(Pipeline, NoRoundStartsThatTheDeadlineCannotHold) {
  std::string dir = testing::MakeTempDir("pipeline_deadline_");
  std::string model = WriteModel(dir);
  PipelineOptions o = Options(dir, model);
  o.time_limit_s = 1.5;
  o.force_optimised = true;
  o.make_backend = [] { return std::make_unique<SlowCalibration>(); };
  std::vector<std::string> lines;
  o.log = [&lines](bool, const std::string& line) { lines.push_back(line); };
  PipelineResult r = RunPipeline(o);
  EXPECT_EQ(r.search.rounds, 1);
  ASSERT_EQ(r.search.per_round.size(), 1u);
  // Unless the deadline stopped round 1 itself (a very slow machine), it
  // chose convs with a folded bias, and no second round was tried for them.
  if (!IsRunnerStop(r.search.per_round[0].stop_reason)) {
    EXPECT_GT(r.search.per_round[0].applied, 0);
    bool said = false;
    for (const std::string& l : lines) said |= l.find("does not fit in the") != std::string::npos;
    EXPECT_TRUE(said) << "no line says why no second round ran";
  }
}

// A backend that keeps its timings per model (as the executor's and ONNX
// Runtime's do) on a machine whose speed a test scripts: the in-context
// runs (calibrations and readings of the time base) at InContextFactor of
// the scripted times, the measurements (TimeGraph, TimePaired) at
// MeasureFactor.
class ScriptedSpeedBackend : public testing::ScriptedBackend {
 public:
  explicit ScriptedSpeedBackend(const std::string& name) : ScriptedBackend(name, FusionNodeMs) {}
  bool context_sensitive() const override { return true; }
  InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions& o) override {
    InContextTimes t = ScriptedBackend::TimeNodesInContext(g, runs, o);
    const double factor = InContextFactor(runs);
    for (double& ms : t.node_ms) ms *= factor;
    t.run_ms *= factor;
    return t;
  }
  double TimeGraph(const Graph& g, const TimingOptions&) override { return MeasureFactor() * RunTime(g); }
  PairedTimes TimePaired(const Graph& a, const Graph& b, int pairs, const TimingOptions& o) override {
    PairedTimes t = ScriptedBackend::TimePaired(a, b, pairs, o);
    for (auto* v : {&t.wall_a, &t.wall_b, &t.cpu_a, &t.cpu_b})
      for (double& ms : *v) ms *= MeasureFactor();
    return t;
  }

 protected:
  virtual double InContextFactor(int runs) = 0;
  virtual double MeasureFactor() const = 0;
};

// A machine that runs twice as slow once the calibration has timed the
// original: the machine's speed moved between the calibration and the
// verdict, not the cost model's error.
class SlowsDownAfterCalibration : public ScriptedSpeedBackend {
 public:
  SlowsDownAfterCalibration() : ScriptedSpeedBackend("scripted-slows-down") {}

 protected:
  double InContextFactor(int) override {
    const double now = factor_;
    factor_ = 2.0;  // the calibration ran at speed 1, everything after at half that
    return now;
  }
  double MeasureFactor() const override { return factor_; }

 private:
  double factor_ = 1.0;
};

// The options of the tests of the time base: a model of its own, the
// optimised graph written whatever the verdict finds, no retry.
PipelineOptions TimeBaseOptions(const std::string& name) {
  const std::string dir = testing::MakeTempDir(name);
  PipelineOptions o = Options(dir, WriteModel(dir));
  o.force_optimised = true;
  o.retries = 0;
  return o;
}

// The estimates reported against the measured times are at the machine's
// speed at the verdict: by default the time base is read again right before
// and after it, even where the calibration ran milliseconds before (the
// machine's speed moves within a second).
TEST(Pipeline, EstimatesAreReportedAtTheMachinesSpeedAtTheVerdict) {
  PipelineOptions o = TimeBaseOptions("pipeline_time_base_");
  o.make_backend = [] { return std::make_unique<SlowsDownAfterCalibration>(); };
  // No search: the verdict follows the calibration within milliseconds,
  // and the default options read the time base again all the same.
  o.search = "none";
  PipelineResult r = RunPipeline(o);
  EXPECT_DOUBLE_EQ(r.calibrate.time_base, 1.0);  // a fresh cache: timed at the calibration
  EXPECT_DOUBLE_EQ(r.verdict.time_base, 0.5);
  EXPECT_DOUBLE_EQ(r.TimeBaseNow(), 0.5);
  EXPECT_NEAR(r.EstimateNowMs(r.search.before_estimate) / r.verdict.before_ms, 1.0, 0.02)
      << r.search.before_estimate << " ms estimated, " << r.verdict.before_ms << " measured";
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  EXPECT_DOUBLE_EQ(j["cost_model"]["time_base_at_verdict"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r.verdict.time_base_before, 0.5);
  EXPECT_DOUBLE_EQ(r.verdict.time_base_after, 0.5);  // read again after the measurement
  EXPECT_NE(r.Summary().find("0.500 at the verdict (read before it 0.500, after it 0.500)"), std::string::npos)
      << r.Summary();

  // A reading younger than the limit is not read again: the calibration's
  // time base stands, and the estimate is half the measured time.
  o.time_base_max_age_s = 1e9;
  PipelineResult stale = RunPipeline(o);
  EXPECT_EQ(stale.verdict.time_base, 0.0);
  EXPECT_DOUBLE_EQ(stale.TimeBaseNow(), 1.0);
  EXPECT_NEAR(stale.EstimateNowMs(stale.search.before_estimate) / stale.verdict.before_ms, 0.5, 0.02);

  // A search round that timed new keys read the time base from the
  // original's run after them: that reading stands at the verdict.
  o.search = "taso";
  PipelineResult searched = RunPipeline(o);
  ASSERT_GE(searched.search.rounds, 2);
  EXPECT_DOUBLE_EQ(searched.verdict.time_base, 0.5);
  EXPECT_NEAR(searched.EstimateNowMs(searched.search.before_estimate) / searched.verdict.before_ms, 1.0, 0.02);
  EXPECT_NEAR(searched.EstimateNowMs(searched.verdict.after_estimate) / searched.verdict.after_ms, 1.0, 0.02);
}

// A machine whose speed moves within seconds: the original's runs right
// before the verdict fall in a slow moment (4x the calibration's time),
// the verdict runs at 2x, the runs right after it at 1x. The readings
// bracket the measurement; their geometric mean is its speed (one reading
// alone, the one before, had put the estimate at twice the measured time).
class SlowMomentBeforeTheVerdict : public ScriptedSpeedBackend {
 public:
  SlowMomentBeforeTheVerdict() : ScriptedSpeedBackend("scripted-slow-moment") {}

 protected:
  // The calibration's runs (the original, its canonical form and the
  // original again as the canonical form's reference) are the most; a
  // reading of the time base runs half as many times. The first reading,
  // before the verdict, falls in the slow moment; the second, after it,
  // runs at the calibration's speed.
  double InContextFactor(int runs) override {
    if (calibration_runs_ == 0) calibration_runs_ = runs;
    return runs < calibration_runs_ && readings_++ == 0 ? 4.0 : 1.0;
  }
  double MeasureFactor() const override { return 2.0; }

 private:
  int calibration_runs_ = 0, readings_ = 0;
};

TEST(Pipeline, TheTimeBaseReadingsBracketTheVerdict) {
  PipelineOptions o = TimeBaseOptions("pipeline_time_base_bracket_");
  o.search = "none";
  o.time_base_max_age_s = 0;
  o.unsteady_remeasures = 0;  // the bracket alone (MeasuresAgainWhileTheReadingsDisagree below)
  o.make_backend = [] { return std::make_unique<SlowMomentBeforeTheVerdict>(); };
  PipelineResult r = RunPipeline(o);
  EXPECT_EQ(r.verdict.measurements, 1);
  EXPECT_DOUBLE_EQ(r.calibrate.time_base, 1.0);
  EXPECT_DOUBLE_EQ(r.verdict.time_base_before, 0.25);
  EXPECT_DOUBLE_EQ(r.verdict.time_base_after, 1.0);
  EXPECT_DOUBLE_EQ(r.TimeBaseNow(), 0.5);
  EXPECT_NEAR(r.EstimateNowMs(r.search.before_estimate) / r.verdict.before_ms, 1.0, 0.02)
      << r.search.before_estimate << " ms estimated, " << r.verdict.before_ms << " measured";
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  EXPECT_DOUBLE_EQ(j["cost_model"]["time_base_before_verdict"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["cost_model"]["time_base_after_verdict"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["cost_model"]["time_base_at_verdict"].get<double>(), 0.5);
}

// A machine whose speed a test scripts moment by moment: the k-th reading
// of the time base after the calibration runs at readings[k] of the
// scripted times (the last one after that), and a measurement right after
// the k-th reading at measures[k - 1] (1 before any reading).
class ScriptedMoments : public ScriptedSpeedBackend {
 public:
  ScriptedMoments(std::vector<double> readings, std::vector<double> measures)
      : ScriptedSpeedBackend("scripted-moments"), readings_(std::move(readings)), measures_(std::move(measures)) {}

 protected:
  double InContextFactor(int runs) override {
    if (calibration_runs_ == 0) calibration_runs_ = runs;
    if (runs >= calibration_runs_) return 1.0;  // the calibration's runs (see SlowMomentBeforeTheVerdict)
    return readings_[std::min(taken_++, readings_.size() - 1)];
  }
  double MeasureFactor() const override {
    return taken_ == 0 ? 1.0 : measures_[std::min(taken_ - 1, measures_.size() - 1)];
  }

 private:
  std::vector<double> readings_, measures_;
  int calibration_runs_ = 0;
  size_t taken_ = 0;
};

// A slow moment (2x) over the reading right before the verdict that ends
// before the measurement: the bracket's geometric mean would put the
// original's estimate 41% over its measured time. The readings disagree
// (2x), so it is measured again between two readings at one speed.
TEST(Pipeline, MeasuresAgainWhileTheReadingsDisagree) {
  PipelineOptions o = TimeBaseOptions("pipeline_time_base_unsteady_");
  o.search = "none";
  o.make_backend = [] {
    return std::make_unique<ScriptedMoments>(std::vector<double>{2.0, 1.0, 1.0}, std::vector<double>{1.0, 1.0});
  };
  PipelineResult r = RunPipeline(o);
  EXPECT_EQ(r.verdict.measurements, 2);
  EXPECT_EQ(r.verdict.kept, 1);
  ASSERT_EQ(r.verdict.readings.size(), 2u);
  EXPECT_DOUBLE_EQ(r.verdict.readings[0].first, 0.5);
  EXPECT_DOUBLE_EQ(r.verdict.readings[0].second, 1.0);
  EXPECT_DOUBLE_EQ(r.verdict.readings[1].first, 1.0);  // the first's reading after it
  EXPECT_DOUBLE_EQ(r.verdict.readings[1].second, 1.0);
  EXPECT_DOUBLE_EQ(r.TimeBaseNow(), 1.0);
  EXPECT_NEAR(r.EstimateNowMs(r.search.before_estimate) / r.verdict.before_ms, 1.0, 0.02)
      << r.search.before_estimate << " ms estimated, " << r.verdict.before_ms << " measured";
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  EXPECT_EQ(j["verdict"]["measurements"].get<int>(), 2);
  EXPECT_EQ(j["verdict"]["kept_measurement"].get<int>(), 1);
  EXPECT_EQ(j["verdict"]["time_base_readings"].size(), 2u);
  EXPECT_NE(r.Summary().find("measured 2 times"), std::string::npos) << r.Summary();

  // Not measured again: where it is not asked for, and where one
  // measurement takes longer than the limit. The bracket stands.
  for (int variant = 0; variant < 2; ++variant) {
    PipelineOptions once = o;
    if (variant == 0) once.unsteady_remeasures = 0;
    if (variant == 1) once.remeasure_max_s = 0;
    PipelineResult one = RunPipeline(once);
    EXPECT_EQ(one.verdict.measurements, 1) << variant;
    EXPECT_EQ(one.verdict.readings.size(), 1u) << variant;
    EXPECT_NEAR(one.TimeBaseNow(), std::sqrt(0.5), 1e-9) << variant;
    EXPECT_NEAR(one.EstimateNowMs(one.search.before_estimate) / one.verdict.before_ms, std::sqrt(2.0), 0.03) << variant;
  }
}

// Every measurement unsteady: at most 1 + unsteady_remeasures of them, and
// the one whose readings were nearest each other (the first: 1.25x apart,
// then 2x and 2.5x) is the verdict, with its measured times.
TEST(Pipeline, KeepsTheSteadiestMeasurement) {
  PipelineOptions o = TimeBaseOptions("pipeline_time_base_steadiest_");
  o.search = "none";
  o.make_backend = [] {
    return std::make_unique<ScriptedMoments>(std::vector<double>{1.0, 1.25, 2.5, 1.0, 1.0},
                                             std::vector<double>{1.0, 2.0, 2.0, 2.0});
  };
  PipelineResult r = RunPipeline(o);
  EXPECT_EQ(r.verdict.measurements, 3);
  EXPECT_EQ(r.verdict.kept, 0);
  ASSERT_EQ(r.verdict.readings.size(), 3u);
  EXPECT_DOUBLE_EQ(r.verdict.time_base_before, 1.0);
  EXPECT_DOUBLE_EQ(r.verdict.time_base_after, 0.8);
  EXPECT_NEAR(r.TimeBaseNow(), std::sqrt(0.8), 1e-9);
  // The first measurement ran at the scripted speed, the later ones at
  // half of it: the first's times are the verdict's.
  EXPECT_NEAR(r.EstimateNowMs(r.search.before_estimate) / r.verdict.before_ms, 1.0 / std::sqrt(0.8), 0.03)
      << r.search.before_estimate << " ms estimated, " << r.verdict.before_ms << " measured";
  EXPECT_NE(r.Summary().find("measurement 1, whose readings were nearest each other, stands"), std::string::npos)
      << r.Summary();
}

// A slow moment (2x) that begins and ends inside the verdict's first
// measurement, over just more than the middle half of its runs: the
// readings right before and right after it agree, its runs do not, and
// their median is the slow moment's (the original's estimate half its
// measured time). The first measurement after a reading of the time base
// (a run of the original shorter than the calibration's) is the one.
class SlowMomentInsideTheMeasurement : public ScriptedSpeedBackend {
 public:
  SlowMomentInsideTheMeasurement() : ScriptedSpeedBackend("scripted-slow-inside") {}
  std::vector<double> TimeGraphRuns(const Graph& g, const TimingOptions& o) override {
    std::vector<double> runs(static_cast<size_t>(std::max(o.samples, 1)), RunTime(g));
    SlowMiddle(runs);
    return runs;
  }
  PairedTimes TimePaired(const Graph& a, const Graph& b, int pairs, const TimingOptions& o) override {
    PairedTimes t = ScriptedSpeedBackend::TimePaired(a, b, pairs, o);
    std::vector<double> factor(t.wall_a.size(), 1.0);
    SlowMiddle(factor);
    for (auto* v : {&t.wall_a, &t.wall_b, &t.cpu_a, &t.cpu_b})
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] *= factor[i];
    return t;
  }

 protected:
  double InContextFactor(int runs) override {
    if (calibration_runs_ == 0) calibration_runs_ = runs;
    after_reading_ = runs < calibration_runs_;
    return 1.0;
  }
  double MeasureFactor() const override { return 1.0; }

 private:
  void SlowMiddle(std::vector<double>& runs) {
    const bool slow = after_reading_ && slowed_ == 0;
    after_reading_ = false;
    if (!slow) return;
    ++slowed_;
    for (size_t i = runs.size() / 4; i < runs.size() - runs.size() / 4 + 1 && i < runs.size(); ++i) runs[i] *= 2.0;
  }
  int calibration_runs_ = 0, slowed_ = 0;
  bool after_reading_ = false;
};

// A slow moment inside the measurement alone: the readings around it
// agree, so it is measured once, and its own runs' drift (2x) is in the
// record, the report and the log, the graph unchanged (its runs timed
// alone) or optimised (the pairs). The estimate is then half the measured
// time: what readings around a measurement cannot see.
TEST(Pipeline, ReportsHowItsOwnRunsDrifted) {
  for (const std::string search : {"none", "taso"}) {
    PipelineOptions o = TimeBaseOptions("pipeline_time_base_inside_");
    o.search = search;
    o.make_backend = [] { return std::make_unique<SlowMomentInsideTheMeasurement>(); };
    std::vector<std::string> lines;
    o.log = [&lines](bool, const std::string& line) { lines.push_back(line); };
    PipelineResult r = RunPipeline(o);
    EXPECT_EQ(r.check.unchanged, search == "none");
    EXPECT_EQ(r.verdict.measurements, 1) << search;
    ASSERT_EQ(r.verdict.drifts.size(), 1u) << search;
    EXPECT_NEAR(r.verdict.drifts[0], 2.0, 0.02) << search;
    ASSERT_EQ(r.verdict.readings.size(), 1u) << search;
    EXPECT_DOUBLE_EQ(r.verdict.readings[0].first, r.verdict.readings[0].second) << search;
    EXPECT_NEAR(r.EstimateNowMs(r.search.before_estimate) / r.verdict.before_ms, 0.5, 0.02)
        << search << ": " << r.search.before_estimate << " ms estimated, " << r.verdict.before_ms << " measured";
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    ASSERT_EQ(j["verdict"]["drifts"].size(), 1u) << search;
    EXPECT_NEAR(j["verdict"]["drifts"][0].get<double>(), 2.0, 0.02) << search;
    bool said = false;
    for (const std::string& l : lines) said |= l.find("slowest quarter of runs took 2.0") != std::string::npos;
    EXPECT_TRUE(said) << search;
  }
}

// A classifier that reads one token of its last layer: x [N, T, 8], y =
// Relu(x @ w)[:, 0] ([N, 8]). With `merged`, x [6, N, 8] and y =
// Reshape(Relu(Reshape(x, [-1, 8])), [6, -1])[0] ([8 N]): at N = 1 the
// second Reshape looks like it keeps rows (6 x 8 -> 6 x 8), at N = 2 it
// merges them (12 x 8 -> 6 x 16).
std::string WriteTokenModel(const std::string& dir, bool merged) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("token");
  auto* idx = g->add_initializer();
  idx->set_name("idx");
  idx->set_data_type(onnx::TensorProto::INT64);
  idx->add_int64_data(0);
  if (merged) {
    DeclareTensor(g->add_input(), "x", onnx::TensorProto::FLOAT, {"6", "N", "8"});
    DeclareTensor(g->add_output(), "y", onnx::TensorProto::FLOAT, {"M"});
    testing::Int64Tensor(g->add_initializer(), "rows", {-1, 8});
    testing::Int64Tensor(g->add_initializer(), "cols", {6, -1});
    AddOnnxNode(g, "Reshape", {"x", "rows"}, "a");
    AddOnnxNode(g, "Relu", {"a"}, "b");
    AddOnnxNode(g, "Reshape", {"b", "cols"}, "c");
    AddOnnxNode(g, "Gather", {"c", "idx"}, "y");
  } else {
    DeclareTensor(g->add_input(), "x", onnx::TensorProto::FLOAT, {"N", "T", "8"});
    DeclareTensor(g->add_output(), "y", onnx::TensorProto::FLOAT, {"N", "8"});
    std::vector<float> w(64);
    for (size_t k = 0; k < w.size(); ++k) w[k] = 0.05f * static_cast<float>(k % 9) - 0.2f;
    testing::FloatTensor(g->add_initializer(), "w", {8, 8}, w);
    AddOnnxNode(g, "MatMul", {"x", "w"}, "m");
    AddOnnxNode(g, "Relu", {"m"}, "h");
    testing::IntAttr(AddOnnxNode(g, "Gather", {"h", "idx"}, "y"), "axis", 1);
  }
  const std::string path = dir + (merged ? "/merged.onnx" : "/token.onnx");
  WriteFileAtomically(path, m.SerializeAsString());
  return path;
}

// The rows nobody reads are not computed (select_rows_early before the
// search), where that is right at every binding of the symbolic
// dimensions: the written model computes what the input computes in ONNX
// Runtime at the shape it was optimised at and at others.
TEST(Pipeline, RowsNobodyReadsAreNotComputed) {
  std::string dir = testing::MakeTempDir("pipeline_rows_");
  const auto same_in_ort = [](const std::string& a, const std::string& b, const std::vector<int64_t>& shape) {
    const at::Tensor x = at::randn(shape);
    const at::Tensor want = testing::RunOnnxRuntime(a, {{"x", x}})[0];
    const at::Tensor got = testing::RunOnnxRuntime(b, {{"x", x}})[0];
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_TRUE(got.allclose(want, 1e-5, 1e-6));
  };
  for (const bool merged : {false, true}) {
    SCOPED_TRACE(merged ? "merged" : "token");
    const std::string model = WriteTokenModel(dir, merged);
    PipelineOptions o = Options(dir, model);
    o.input_shapes["x"] = merged ? std::vector<int64_t>{6, 1, 8} : std::vector<int64_t>{2, 6, 8};
    o.search = "passes";
    o.search_params.Set("passes", "dce");
    o.force_optimised = true;
    PipelineResult r = RunPipeline(o);
    EXPECT_EQ(r.canonicalise.rows_selected_early, !merged);
    EXPECT_TRUE(r.check.general_ok);
    if (!merged) {
      EXPECT_LT(r.finish.after.flops, r.finish.before.flops / 3);
    }
    same_in_ort(model, o.output, o.input_shapes["x"]);
    same_in_ort(model, o.output, merged ? std::vector<int64_t>{6, 3, 8} : std::vector<int64_t>{3, 4, 8});
  }
}

TEST(Pipeline, RunsAGivenPassOrder) {
  std::string dir = testing::MakeTempDir("pipeline_passes_");
  std::string model = WriteModel(dir);
  PipelineOptions o = Options(dir, model);
  o.search = "passes";
  o.search_params.Set("passes", "fold_mul_into_conv, fold_add_into_conv, dce");
  o.force_optimised = true;
  PipelineResult r = RunPipeline(o);
  EXPECT_EQ(r.configure.search, "passes");
  // Both lowered batch norms fold into their convs: no Mul or Add is left.
  auto counts = r.search.result.graph.OpCounts();
  EXPECT_EQ(counts.count("Mul"), 0u);
  EXPECT_EQ(counts.count("Add"), 0u);
  EXPECT_EQ(counts["Conv"], 2);
  ASSERT_GE(r.search.result.applied.size(), 2u);
  EXPECT_EQ(r.search.result.applied[0], "pass fold_mul_into_conv");
  EXPECT_EQ(r.search.result.applied[1], "pass fold_add_into_conv");
  EXPECT_TRUE(CompareGraphs(ImportOnnxFile(model), ImportOnnxFile(o.output), 1).max_error < 1e-4);

  o.search_params.Set("passes", "fold_mul_into_conv,no_such_pass");
  try {
    RunPipeline(o);
    ADD_FAILURE() << "an unknown pass is not an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_pass"), std::string::npos) << e.what();
  }
  o.search = "taso";
  o.search_params.Set("passes", "dce");  // taso has no such setting
  EXPECT_THROW(RunPipeline(o), Error);

  // Every builtin pass and one pass per rule family are listed, each with a description.
  std::vector<std::pair<std::string, std::string>> listed = ListPasses("");
  std::set<std::string> names;
  for (const auto& [name, description] : listed) {
    names.insert(name);
    EXPECT_FALSE(description.empty()) << name;
  }
  for (const std::string& n : DefaultPassOrder()) EXPECT_TRUE(names.count(n)) << n;
  EXPECT_TRUE(names.count("rules_conv"));
  EXPECT_TRUE(names.count("rules_matmul"));
}

// A model whose computation is inside an If (as Hugging Face Optimum's
// merged decoders are): x [N, 8], c (bool), a weight w [520, 8]; h =
// Relu(x) outside, typed by no value_info (ONNX's shape inference types
// it); If(c): then (Relu(x) + Relu(x)) @ Transpose(w) (a common
// subexpression; the outer weight transposed, as torch.onnx writes a
// Linear), else Neg(h) @ Transpose(w) (nothing to improve).
std::string WriteIfModel(const std::string& dir) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  auto* g = m.mutable_graph();
  g->set_name("switch");
  auto info = [](onnx::ValueInfoProto* vi, const std::string& name, int32_t type, std::vector<int64_t> dims) {
    vi->set_name(name);
    auto* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    t->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = t->mutable_shape()->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
  };
  info(g->add_input(), "x", onnx::TensorProto::FLOAT, {-1, 8});
  info(g->add_input(), "c", onnx::TensorProto::BOOL, {});
  info(g->add_output(), "y", onnx::TensorProto::FLOAT, {-1, 520});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(520);  // over 4096 elements: a weight, not folded at import
  w->add_dims(8);
  for (int k = 0; k < 520 * 8; ++k) w->add_float_data(0.01f * static_cast<float>(k % 7) - 0.03f);
  AddOnnxNode(g, "Relu", {"x"}, "h");
  auto* n = AddOnnxNode(g, "If", {"c"}, "y");
  n->set_name("switch");
  onnx::GraphProto* then_g = testing::GraphAttr(n, "then_branch", "then");
  AddOnnxNode(then_g, "Relu", {"x"}, "r1");
  AddOnnxNode(then_g, "Relu", {"x"}, "r2");
  AddOnnxNode(then_g, "Add", {"r1", "r2"}, "s");
  AddOnnxNode(then_g, "Transpose", {"w"}, "wt");
  AddOnnxNode(then_g, "MatMul", {"s", "wt"}, "then_y");
  info(then_g->add_output(), "then_y", onnx::TensorProto::FLOAT, {-1, 520});
  onnx::GraphProto* else_g = testing::GraphAttr(n, "else_branch", "else");
  AddOnnxNode(else_g, "Neg", {"h"}, "n");
  AddOnnxNode(else_g, "Transpose", {"w"}, "else_wt");
  AddOnnxNode(else_g, "MatMul", {"n", "else_wt"}, "else_y");
  info(else_g->add_output(), "else_y", onnx::TensorProto::FLOAT, {-1, 520});
  const std::string path = dir + "/if.onnx";
  WriteFileAtomically(path, m.SerializeAsString());
  return path;
}

TEST(Pipeline, IfBranchesAreOptimisedAsModelsOfTheirOwn) {
  std::string dir = testing::MakeTempDir("pipeline_branches_");
  std::string model = WriteIfModel(dir);
  PipelineOptions o = CseOptions(dir, model);
  o.time_limit_s = 30;  // shared: each branch's run an equal share of what is left
  std::vector<std::string> lines;
  o.log = [&](bool, const std::string& line) { lines.push_back(line); };
  PipelineResult r = RunPipeline(o);
  ASSERT_EQ(r.branches.branches.size(), 2u);
  const BranchRecord& then_b = r.branches.branches[0];
  const BranchRecord& else_b = r.branches.branches[1];
  EXPECT_EQ(then_b.node, "switch");
  EXPECT_EQ(then_b.attribute, "then_branch");
  EXPECT_EQ(then_b.outcome, "optimised");
  EXPECT_EQ(then_b.nodes_before, 5);
  EXPECT_EQ(then_b.nodes_after, 4);
  EXPECT_TRUE(then_b.measured);
  EXPECT_TRUE(then_b.verdict.faster());
  EXPECT_EQ(then_b.time_limit_s, 10);
  // A half of what the then branch's search left (the other half for the
  // model around them).
  EXPECT_GT(else_b.time_limit_s, 14);
  EXPECT_LE(else_b.time_limit_s, 15);
  EXPECT_EQ(else_b.outcome, "unchanged");
  EXPECT_EQ(r.branches.optimised(), 1);
  // The branch's own run logged, labelled.
  bool labelled = false;
  for (const std::string& l : lines) labelled |= l.rfind("[If 'switch' then_branch] ", 0) == 0;
  EXPECT_TRUE(labelled);
  // The written model: the then branch with one Relu, the else branch and
  // the interface as they were, the same outputs in ONNX Runtime for both
  // values of c.
  onnx::ModelProto in, out;
  ASSERT_TRUE(in.ParseFromString(ReadFile(model)));
  ASSERT_TRUE(out.ParseFromString(ReadFile(o.output)));
  ASSERT_EQ(out.graph().node_size(), 2);
  const onnx::NodeProto& written_if = out.graph().node(1);
  ASSERT_EQ(written_if.op_type(), "If");
  for (const auto& attr : written_if.attribute()) {
    if (attr.name() == "then_branch") {
      // One Relu; the Transpose of the outer weight still a node (ONNX
      // Runtime folds it at load into the branch's own initializer, which it
      // fuses into its MatMul kernels; an outer one it does not), w read
      // from the outer graph.
      ASSERT_EQ(attr.g().node_size(), 4);
      EXPECT_EQ(attr.g().node(2).op_type(), "Transpose");
      EXPECT_EQ(attr.g().node(2).input(0), "w");
      EXPECT_EQ(attr.g().initializer_size(), 0);
      EXPECT_EQ(attr.g().input_size(), 0);
      EXPECT_EQ(attr.g().output(0).name(), "then_y");
    } else {
      EXPECT_EQ(attr.g().SerializeAsString(), in.graph().node(1).attribute(1).g().SerializeAsString());
    }
  }
  EXPECT_EQ(out.graph().input(0).SerializeAsString(), in.graph().input(0).SerializeAsString());
  EXPECT_EQ(out.graph().output(0).SerializeAsString(), in.graph().output(0).SerializeAsString());
  const at::Tensor x = at::randn({4, 8});
  for (const bool c : {false, true}) {
    const at::Tensor flag = c ? at::ones({}, at::kBool) : at::zeros({}, at::kBool);
    const at::Tensor want = testing::RunOnnxRuntime(model, {{"x", x}, {"c", flag}})[0];
    const at::Tensor got = testing::RunOnnxRuntime(o.output, {{"x", x}, {"c", flag}})[0];
    EXPECT_TRUE(got.allclose(want, 1e-5, 1e-6)) << c;
    EXPECT_GT(want.abs().max().item<float>(), 0.01f) << c;
  }
  // The summary and the report say what was done to each branch.
  const std::string summary = r.Summary();
  EXPECT_NE(summary.find("branch:     If 'switch' then_branch: optimised, 5 -> 4 nodes"), std::string::npos) << summary;
  EXPECT_NE(summary.find("with 1 optimised subgraph, branch: above"), std::string::npos) << summary;
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  ASSERT_EQ(j["branches"].size(), 2u);
  EXPECT_EQ(j["branches"][0]["outcome"], "optimised");
  EXPECT_EQ(j["branches"][1]["outcome"], "unchanged");
  EXPECT_EQ(j["branches"][0]["verdict"]["outcome"], "faster");
  EXPECT_FALSE(j["unchanged"].get<bool>());
  EXPECT_FALSE(j["wrote_original"].get<bool>());
}

// A model whose computation is inside a Loop (as scripted generation loops
// are exported): x [N, 8]; a Loop of 3 steps carrying s from x, which grows
// by a row each step: s' = Concat(s, ReduceSum(Relu(s) + Relu(s), axis 0))
// (a common subexpression in the body), the condition passed through.
std::string WriteLoopModel(const std::string& dir) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  auto* g = m.mutable_graph();
  g->set_name("grow");
  const auto info = DeclareTensor;
  auto int64s = [](onnx::TensorProto* t, const std::string& name, std::vector<int64_t> dims, int64_t v) {
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    t->add_int64_data(v);
  };
  info(g->add_input(), "x", onnx::TensorProto::FLOAT, {"N", "8"});
  info(g->add_output(), "y", onnx::TensorProto::FLOAT, {"M", "8"});
  int64s(g->add_initializer(), "n", {}, 3);
  int64s(g->add_initializer(), "axis0", {1}, 0);
  auto* go = g->add_initializer();
  go->set_name("go");
  go->set_data_type(onnx::TensorProto::BOOL);
  go->add_int32_data(1);
  auto* loop = AddOnnxNode(g, "Loop", {"n", "go", "x"}, "y");
  loop->set_name("grow");
  auto* b = testing::GraphAttr(loop, "body", "step");
  info(b->add_input(), "i", onnx::TensorProto::INT64, {});
  info(b->add_input(), "c", onnx::TensorProto::BOOL, {});
  info(b->add_input(), "s", onnx::TensorProto::FLOAT, {"rows", "8"});
  AddOnnxNode(b, "Relu", {"s"}, "r1");
  AddOnnxNode(b, "Relu", {"s"}, "r2");
  AddOnnxNode(b, "Add", {"r1", "r2"}, "t");
  AddOnnxNode(b, "ReduceSum", {"t", "axis0"}, "row");
  testing::IntAttr(AddOnnxNode(b, "Concat", {"s", "row"}, "s_out"), "axis", 0);
  AddOnnxNode(b, "Identity", {"c"}, "c_out");
  info(b->add_output(), "c_out", onnx::TensorProto::BOOL, {});
  info(b->add_output(), "s_out", onnx::TensorProto::FLOAT, {"rows_plus_1", "8"});
  const std::string path = dir + "/loop.onnx";
  WriteFileAtomically(path, m.SerializeAsString());
  return path;
}

// A model whose computation is a Scan over x's rows (x [N, 8], as
// keras2onnx wrote recurrent layers): its body reads a row x_t [8] and the
// running sum s [8], y_t = Relu(x_t) + Relu(x_t), s_out = s + y_t; the
// Scan's outputs are y [N, 8] (the y_t stacked) and the last sum.
std::string WriteScanModel(const std::string& dir) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  auto* g = m.mutable_graph();
  g->set_name("scan");
  auto info = [](onnx::ValueInfoProto* vi, const std::string& name, const std::vector<std::string>& dims) {
    DeclareTensor(vi, name, onnx::TensorProto::FLOAT, dims);
  };
  info(g->add_input(), "x", {"N", "8"});
  info(g->add_output(), "y", {"N", "8"});
  info(g->add_output(), "sum", {"8"});
  auto* zero = g->add_initializer();
  zero->set_name("zero");
  zero->set_data_type(onnx::TensorProto::FLOAT);
  zero->add_dims(8);
  for (int k = 0; k < 8; ++k) zero->add_float_data(0.0f);
  auto* scan = AddOnnxNode(g, "Scan", {"zero", "x"}, "sum");
  scan->add_output("y");
  scan->set_name("rows");
  testing::IntAttr(scan, "num_scan_inputs", 1);
  auto* b = testing::GraphAttr(scan, "body", "row");
  info(b->add_input(), "s", {"8"});
  info(b->add_input(), "x_t", {"8"});
  AddOnnxNode(b, "Relu", {"x_t"}, "r1");
  AddOnnxNode(b, "Relu", {"x_t"}, "r2");
  AddOnnxNode(b, "Add", {"r1", "r2"}, "t");
  AddOnnxNode(b, "Add", {"s", "t"}, "s_out");
  AddOnnxNode(b, "Identity", {"t"}, "y_t");
  info(b->add_output(), "s_out", {"8"});
  info(b->add_output(), "y_t", {"8"});
  const std::string path = dir + "/scan.onnx";
  WriteFileAtomically(path, m.SerializeAsString());
  return path;
}

TEST(Pipeline, ScanBodiesAreOptimisedAsModelsOfTheirOwn) {
  std::string dir = testing::MakeTempDir("pipeline_scan_body_");
  std::string model = WriteScanModel(dir);
  PipelineOptions o = CseOptions(dir, model);
  PipelineResult r = RunPipeline(o);
  ASSERT_EQ(r.branches.branches.size(), 1u);
  const BranchRecord& body = r.branches.branches[0];
  EXPECT_EQ(body.op, "Scan");
  EXPECT_EQ(body.node, "rows");
  EXPECT_EQ(body.attribute, "body");
  EXPECT_EQ(body.outcome, "optimised") << body.note;
  EXPECT_EQ(body.nodes_before, 5);
  EXPECT_EQ(body.nodes_after, 4);
  // The written body: one Relu, its own inputs and outputs as they were;
  // the model computes what it did in ONNX Runtime at the rows it was
  // optimised at and at others.
  onnx::ModelProto in, out;
  ASSERT_TRUE(in.ParseFromString(ReadFile(model)));
  ASSERT_TRUE(out.ParseFromString(ReadFile(o.output)));
  ASSERT_EQ(out.graph().node_size(), 1);
  const onnx::GraphProto& written = out.graph().node(0).attribute(1).g();
  const onnx::GraphProto& given = in.graph().node(0).attribute(1).g();
  EXPECT_EQ(written.node_size(), 4);
  ASSERT_EQ(written.input_size(), 2);
  ASSERT_EQ(written.output_size(), 2);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(written.input(k).SerializeAsString(), given.input(k).SerializeAsString());
    EXPECT_EQ(written.output(k).SerializeAsString(), given.output(k).SerializeAsString());
  }
  ExpectTheSameInOrtAtOtherRows(model, o.output);
  const std::string summary = r.Summary();
  EXPECT_NE(summary.find("branch:     Scan 'rows' body: optimised, 5 -> 4 nodes"), std::string::npos) << summary;
}

// An input and an output that declare no shape (ONNX Runtime runs such a
// model at any shape; ONNX's checker wants a shape field on the main
// graph's interface): y = Reshape(Relu(x) + Relu(x), Shape(x)), x given at
// [4, 8] with --input_shape; with `weight`, Relu(x) + Relu(x) is multiplied
// by an 8 x 8 matrix before the Reshape, so that x's columns are fixed at 8;
// with `named`, x declares two dimensions named as tf2onnx names them.
std::string WriteShapelessModel(const std::string& dir, bool weight, bool named = false) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  auto* g = m.mutable_graph();
  g->set_name("shapeless");
  g->add_input()->set_name("x");
  g->add_output()->set_name("y");
  for (auto* vi : {g->mutable_input(0), g->mutable_output(0)})
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  if (named)
    for (const char* dim : {"unk__0", "unk__1"})
      g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param(dim);
  AddOnnxNode(g, "Relu", {"x"}, "r1");
  AddOnnxNode(g, "Relu", {"x"}, "r2");
  AddOnnxNode(g, "Add", {"r1", "r2"}, weight ? "sum" : "t");
  if (weight) {
    onnx::TensorProto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(8);
    w->add_dims(8);
    for (int k = 0; k < 64; ++k) w->add_float_data(static_cast<float>((k * 7) % 11) / 11.0f - 0.5f);
    AddOnnxNode(g, "MatMul", {"sum", "w"}, "t");
  }
  AddOnnxNode(g, "Shape", {"x"}, "s");
  AddOnnxNode(g, "Reshape", {"t", "s"}, "y");
  const std::string model = dir + (weight ? "/shapeless_weight" : "/shapeless") + (named ? "_named" : "") + ".onnx";
  WriteFileAtomically(model, m.SerializeAsString());
  return model;
}

// The written model keeps the interface as declared and is right at any
// shape: the Shape is not folded at [4, 8].
TEST(Pipeline, AnInterfaceWithoutShapesIsKeptAndNothingIsFoldedAtTheGivenShape) {
  std::string dir = testing::MakeTempDir("pipeline_shapeless_");
  const std::string model = WriteShapelessModel(dir, /*weight=*/false);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(ReadFile(model)));
  PipelineOptions o = CseOptions(dir, model);
  PipelineResult r = RunPipeline(o);
  EXPECT_TRUE(r.verdict.faster());
  ASSERT_FALSE(r.verdict.keep_original) << r.Summary();
  onnx::ModelProto out;
  ASSERT_TRUE(out.ParseFromString(ReadFile(o.output)));
  EXPECT_EQ(out.graph().input(0).SerializeAsString(), m.graph().input(0).SerializeAsString());
  EXPECT_EQ(out.graph().output(0).SerializeAsString(), m.graph().output(0).SerializeAsString());
  EXPECT_EQ(out.graph().node_size(), 4);  // one Relu fewer, the Shape still there
  ExpectTheSameInOrtAtOtherRows(model, o.output);
}

// Where the import converts the model to another form (here opset 11 to 13)
// and the backend runs model files (as ONNX Runtime), the verdict times the
// input file as given against the file to be written, not the graphs: the
// runtime can run the file otherwise than the converted graph (ONNX's
// experimental operators that ORT runs as one kernel). The scripted backend
// charges each graph node 1 ms, so the graphs (one Relu fewer after cse) are
// always faster; the files cost what `file_ms` says. A written file slower
// than the input file keeps the original, byte for byte; one faster is
// written, at the input's opset. The guard times the files the same way.
// A model the import does not convert (opset 13) is timed as graphs.
TEST(Pipeline, TheVerdictTimesTheFilesWhereTheImportConvertedTheModel) {
  std::string dir = testing::MakeTempDir("pipeline_files_verdict_");
  auto write_model = [&](int64_t opset) {
    onnx::ModelProto m;
    m.set_ir_version(7);
    m.add_opset_import()->set_version(opset);
    onnx::GraphProto* g = m.mutable_graph();
    g->set_name("twice");
    DeclareTensor(g->add_input(), "x", onnx::TensorProto::FLOAT, {"4", "8"});
    DeclareTensor(g->add_output(), "y", onnx::TensorProto::FLOAT, {"4", "8"});
    AddOnnxNode(g, "Relu", {"x"}, "a");
    AddOnnxNode(g, "Relu", {"x"}, "b");
    AddOnnxNode(g, "Add", {"a", "b"}, "y");
    const std::string path = dir + "/twice" + std::to_string(opset) + ".onnx";
    WriteFileAtomically(path, m.SerializeAsString());
    return path;
  };
  struct Case {
    int64_t opset;
    double written_ms;  // the file to be written; the input file: 10 ms
    bool guard;         // the files timed by the guard (the device's backend runs no files)
  };
  for (const Case c : {Case{11, 12, false}, Case{11, 8, false}, Case{13, 12, false}, Case{11, 12, true}}) {
    SCOPED_TRACE(::testing::Message() << "opset " << c.opset << ", written " << c.written_ms << " ms"
                                      << (c.guard ? ", guard" : ""));
    const std::string model = write_model(c.opset);
    PipelineOptions o = CseOptions(dir, model);
    o.retries = 0;
    auto files_timed = std::make_shared<int>(0);
    auto make = [model, c, files_timed](bool files) {
      auto b = std::make_unique<testing::ScriptedBackend>("files", [](const Graph&, NodeId) { return 1.0; });
      if (files)
        b->set_file_ms([model, c, files_timed](const std::string& path, const Graph&) {
          ++*files_timed;
          return path == model ? 10.0 : c.written_ms;
        });
      return b;
    };
    o.make_backend = [make, c]() -> std::unique_ptr<TimingBackend> { return make(!c.guard); };
    if (c.guard) {
      o.guard = "ort";
      o.make_guard_backend = [make]() -> std::unique_ptr<TimingBackend> { return make(true); };
    }
    PipelineResult r = RunPipeline(o);
    ASSERT_FALSE(r.check.unchanged) << r.Summary();
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    const Verdict& timed = c.guard ? r.verdict.guard : r.verdict;
    if (c.opset == 13) {
      EXPECT_EQ(*files_timed, 0);
      EXPECT_FALSE(r.verdict.files);
      EXPECT_EQ(j["verdict"]["timed"], "graphs");
      EXPECT_FALSE(r.verdict.keep_original);
      continue;
    }
    EXPECT_EQ(*files_timed, 2);  // once each side (the scripted backend times a file once per measurement)
    EXPECT_EQ(c.guard ? r.verdict.guard_files : r.verdict.files, true);
    EXPECT_EQ(c.guard ? j["verdict"]["guard"]["timed"] : j["verdict"]["timed"], "files");
    EXPECT_NEAR(timed.a_ms, 10.0, 0.05);  // the input file's (the graph's: 3 ms), jitter 1.000 to 1.004
    if (c.written_ms > 10) {
      EXPECT_EQ(timed.outcome, Verdict::Outcome::kSlower);
      EXPECT_TRUE(r.verdict.keep_original);
      EXPECT_EQ(ReadFile(o.output), ReadFile(model));
    } else {
      EXPECT_EQ(timed.outcome, Verdict::Outcome::kFaster);
      EXPECT_FALSE(r.verdict.keep_original);
      onnx::ModelProto out;
      ASSERT_TRUE(out.ParseFromString(ReadFile(o.output)));
      EXPECT_EQ(out.opset_import(0).version(), 11);
      EXPECT_EQ(out.graph().node_size(), 2);  // one Relu fewer
    }
  }
}

// The verdict at the check's second binding times the files too where the
// import converted the model (opset 11 here), fed the inputs of that binding:
// the written file 8 ms against the input file's 10 at the given shape
// (x: 4 x 8) and `second_ms` at the second (x: 2 x 8), which keeps the
// original when slower there (--second_binding_verdict=require).
TEST(Pipeline, TheVerdictAtTheSecondBindingTimesTheFilesToo) {
  std::string dir = testing::MakeTempDir("pipeline_files_second_");
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(11);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("twice");
  DeclareTensor(g->add_input(), "x", onnx::TensorProto::FLOAT, {"N", "8"});
  DeclareTensor(g->add_output(), "y", onnx::TensorProto::FLOAT, {"N", "8"});
  AddOnnxNode(g, "Relu", {"x"}, "a");
  AddOnnxNode(g, "Relu", {"x"}, "b");
  AddOnnxNode(g, "Add", {"a", "b"}, "y");
  const std::string model = dir + "/twice_symbolic11.onnx";
  WriteFileAtomically(model, m.SerializeAsString());
  for (const double second_ms : {12.0, 9.0}) {
    SCOPED_TRACE(second_ms);
    PipelineOptions o = CseOptions(dir, model);
    o.retries = 0;
    o.second_binding_verdict = "require";
    auto rows_timed = std::make_shared<std::vector<int64_t>>();
    o.make_backend = [model, second_ms, rows_timed]() -> std::unique_ptr<TimingBackend> {
      auto b = std::make_unique<testing::ScriptedBackend>("files", [](const Graph&, NodeId) { return 1.0; });
      b->set_file_ms([model, second_ms, rows_timed](const std::string& path, const Graph& inputs) {
        const int64_t rows = inputs.value(inputs.inputs()[0]).type.shape[0];
        rows_timed->push_back(rows);
        return path == model ? 10.0 : rows == 4 ? 8.0 : second_ms;
      });
      return b;
    };
    PipelineResult r = RunPipeline(o);
    ASSERT_FALSE(r.check.unchanged) << r.Summary();
    EXPECT_EQ(*rows_timed, (std::vector<int64_t>{4, 4, 2, 2})) << r.Summary();
    EXPECT_TRUE(r.verdict.files);
    EXPECT_TRUE(r.verdict.faster());
    ASSERT_TRUE(r.verdict.second_measured) << r.Summary();
    EXPECT_TRUE(r.verdict.second_files);
    EXPECT_NEAR(r.verdict.second.a_ms, 10.0, 0.05);  // the input file's (the graph's: 3 ms)
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    EXPECT_EQ(j["verdict"]["second_binding"]["timed"], "files");
    EXPECT_NE(r.Summary().find("second:     at x:[2,8], the files: 10"), std::string::npos) << r.Summary();
    if (second_ms > 10) {
      EXPECT_EQ(r.verdict.second.outcome, Verdict::Outcome::kSlower);
      EXPECT_TRUE(r.verdict.keep_original);
      EXPECT_EQ(ReadFile(o.output), ReadFile(model));
    } else {
      EXPECT_EQ(r.verdict.second.outcome, Verdict::Outcome::kFaster);
      EXPECT_FALSE(r.verdict.keep_original);
      EXPECT_NE(ReadFile(o.output), ReadFile(model));
    }
  }
}

// Where the model fixes a symbolic dimension of an input (x's columns, read
// by an 8 x 8 MatMul; x declaring no shape, or two dimensions named as
// tf2onnx names them), the check's second binding keeps it: moved, the
// model would not run, and the optimised one would never be written (every
// CNN's channels). The rows stay symbolic: the Shape is not folded.
TEST(Pipeline, ASymbolicAxisThatTheModelFixesStaysBound) {
  std::string dir = testing::MakeTempDir("pipeline_shapeless_fixed_");
  for (const bool named : {false, true}) {
    SCOPED_TRACE(named ? "unk__0, unk__1" : "no shape");
    const std::string model = WriteShapelessModel(dir, /*weight=*/true, named);
    ImportOptions io;
    io.input_shapes["x"] = {4, 8};
    ImportReport rep;
    Graph g = ImportOnnxFile(model, io, &rep);
    EXPECT_EQ(g.info().fixed_axes, (std::map<std::string, std::vector<int>>{{"x", {1}}}));
    bool said = false;
    for (const std::string& w : rep.warnings)
      said |= w.find(named ? "fixes axis 1 (unk__1) at 8" : "fixes axis 1 at 8") != std::string::npos;
    EXPECT_TRUE(said);
    EXPECT_FALSE(rep.folded_at_binding);
    EXPECT_EQ(SecondBinding(g, io).input_shapes.at("x"), (std::vector<int64_t>{2, 8}));
    PipelineOptions o = CseOptions(dir, model);
    PipelineResult r = RunPipeline(o);
    EXPECT_TRUE(r.check.general_ok) << r.check.general_note;
    ASSERT_FALSE(r.verdict.keep_original) << r.Summary();
    onnx::ModelProto out;
    ASSERT_TRUE(out.ParseFromString(ReadFile(o.output)));
    EXPECT_EQ(out.graph().node_size(), 5);  // one Relu fewer, the Shape still there
    ExpectTheSameInOrtAtOtherRows(model, o.output);
    const std::string summary = r.Summary();
    EXPECT_NE(summary.find("run at [4,8] (--input_shape); the model fixes axis 1: bound there for the check too\n"),
              std::string::npos)
        << summary;
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    EXPECT_EQ(j["inputs"][0]["fixed_axes"], nlohmann::json({1}));
  }
}

TEST(Pipeline, LoopBodiesAreOptimisedAsModelsOfTheirOwn) {
  std::string dir = testing::MakeTempDir("pipeline_loop_body_");
  std::string model = WriteLoopModel(dir);
  PipelineOptions o = CseOptions(dir, model);
  std::vector<std::string> lines;
  o.log = [&](bool, const std::string& line) { lines.push_back(line); };
  PipelineResult r = RunPipeline(o);
  ASSERT_EQ(r.branches.branches.size(), 1u);
  const BranchRecord& body = r.branches.branches[0];
  EXPECT_EQ(body.op, "Loop");
  EXPECT_EQ(body.node, "grow");
  EXPECT_EQ(body.attribute, "body");
  EXPECT_EQ(body.outcome, "optimised") << body.note;
  EXPECT_EQ(body.nodes_before, 6);
  EXPECT_EQ(body.nodes_after, 5);
  EXPECT_TRUE(body.verdict.faster());
  bool labelled = false;
  for (const std::string& l : lines) labelled |= l.rfind("[Loop 'grow' body] ", 0) == 0;
  EXPECT_TRUE(labelled);
  // The written body: one Relu, its own inputs as they were; the model
  // computes what it did in ONNX Runtime, at the rows it was optimised at
  // and at others (s grows each step).
  onnx::ModelProto in, out;
  ASSERT_TRUE(in.ParseFromString(ReadFile(model)));
  ASSERT_TRUE(out.ParseFromString(ReadFile(o.output)));
  ASSERT_EQ(out.graph().node_size(), 1);
  const onnx::GraphProto& written = out.graph().node(0).attribute(0).g();
  EXPECT_EQ(written.node_size(), 5);
  ASSERT_EQ(written.input_size(), 3);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(written.input(k).SerializeAsString(), in.graph().node(0).attribute(0).g().input(k).SerializeAsString());
  ExpectTheSameInOrtAtOtherRows(model, o.output, /*grown=*/3);
  const std::string summary = r.Summary();
  EXPECT_NE(summary.find("branch:     Loop 'grow' body: optimised, 6 -> 5 nodes"), std::string::npos) << summary;
  nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
  ASSERT_EQ(j["branches"].size(), 1u);
  EXPECT_EQ(j["branches"][0]["op"], "Loop");
  EXPECT_EQ(j["branches"][0]["outcome"], "optimised");
  // Interrupted once the body's run has measured it: the body is kept, the
  // graph around it (unchanged) is neither compared nor measured, and the
  // summary says what is written.
  std::atomic<bool> interrupted{false};
  o.interrupted = &interrupted;
  o.log = [&](bool, const std::string& line) {
    if (line.rfind("[Loop 'grow' body] speedup", 0) == 0) interrupted = true;
  };
  r = RunPipeline(o);
  ASSERT_TRUE(interrupted.load());
  EXPECT_EQ(r.branches.optimised(), 1);
  EXPECT_TRUE(r.check.skipped);
  ASSERT_TRUE(out.ParseFromString(ReadFile(o.output)));
  EXPECT_EQ(out.graph().node(0).attribute(0).g().node_size(), 5);
  const std::string interrupted_summary = r.Summary();
  EXPECT_NE(interrupted_summary.find("check:      none (interrupted with the graph around the optimised subgraphs "
                                     "unchanged: it is written as it came)"),
            std::string::npos)
      << interrupted_summary;
  EXPECT_NE(interrupted_summary.find("(with 1 optimised subgraph, branch: above;"), std::string::npos)
      << interrupted_summary;
}

// The model with its optimised branches is timed against the model as it
// came in the guard's runtime, for each value of the condition, and the
// branches are put back as they were where it is slower there.
TEST(Pipeline, OptimisedBranchesAreCheckedInsideTheModel) {
  std::string dir = testing::MakeTempDir("pipeline_branches_check_");
  std::string model = WriteIfModel(dir);
  for (const bool slower : {true, false}) {
    SCOPED_TRACE(slower);
    PipelineOptions o = CseOptions(dir, model);
    o.guard = "ort";
    o.measure_runs = 0;  // each measurement's own pairs
    // As ONNX Runtime might: a branch alone costs its nodes; the model with
    // an If whose then branch was optimised (fewer than 5 nodes) costs 2 ms
    // (or 0.5 ms), as it came 1 ms.
    o.make_guard_backend = [slower] {
      auto node_ms = [](const Graph&, NodeId) { return 1.0; };
      auto run_ms = [slower](const Graph& g) {
        for (NodeId id = 0; id < g.num_nodes(); ++id) {
          const Node& n = g.node(id);
          if (n.op != "If" || n.source_proto == nullptr) continue;
          onnx::NodeProto np;
          EXPECT_TRUE(np.ParseFromString(*n.source_proto));
          for (const auto& a : np.attribute())
            if (a.name() == "then_branch") return a.g().node_size() < 5 ? (slower ? 2.0 : 0.5) : 1.0;
        }
        return static_cast<double>(g.num_nodes());
      };
      auto backend = std::make_unique<testing::ScriptedBackend>("scripted-ort", node_ms, run_ms);
      backend->set_min_paired_pairs(20);  // as ONNX Runtime: pairs in blocks of fresh sessions
      return backend;
    };
    PipelineResult r = RunPipeline(o);
    ASSERT_EQ(r.branches.branches.size(), 2u);
    const BranchRecord& then_b = r.branches.branches[0];
    EXPECT_TRUE(then_b.verdict.faster());
    EXPECT_EQ(r.branches.check_device, "ort");
    // A 1 ms model: as many pairs as a verdict in ONNX Runtime takes (120 in
    // 12 session pairs), not a fixed 40.
    ASSERT_FALSE(r.branches.checks.empty());
    EXPECT_EQ(r.branches.checks[0].verdict.wall.n, 120);
    EXPECT_EQ(r.branches.checks[0].verdict.blocks, 12);
    const std::string summary = r.Summary();
    if (slower) {
      // The first value of the condition is slower: the branches as they were.
      ASSERT_EQ(r.branches.checks.size(), 1u);
      EXPECT_EQ(r.branches.checks[0].condition, "c=0");
      EXPECT_EQ(r.branches.checks[0].verdict.outcome, Verdict::Outcome::kSlower);
      EXPECT_EQ(then_b.outcome, "not optimised");
      EXPECT_NE(then_b.note.find("slower in ort inside the model (c=0)"), std::string::npos) << then_b.note;
      EXPECT_EQ(ReadFile(o.output), ReadFile(model));
    } else {
      ASSERT_EQ(r.branches.checks.size(), 2u);
      EXPECT_EQ(r.branches.checks[1].condition, "c=1");
      EXPECT_TRUE(r.branches.checks[0].verdict.faster());
      EXPECT_TRUE(r.branches.checks[1].verdict.faster());
      EXPECT_EQ(then_b.outcome, "optimised");
      EXPECT_NE(ReadFile(o.output), ReadFile(model));
      EXPECT_NE(summary.find("branches:   in ort inside the model (c=1): speedup 2.0"), std::string::npos) << summary;
    }
    nlohmann::json j = nlohmann::json::parse(ReadFile(o.report));
    EXPECT_EQ(j["branches_check"]["device"], "ort");
    EXPECT_EQ(j["branches_check"]["checks"].size(), r.branches.checks.size());
  }
}

// An If inside a branch: its branches are optimised by the branch's run
// (the outer then branch is one If node, the then branch inside it has the
// common subexpression); the outer else branch is x @ Transpose(w).
TEST(Pipeline, IfBranchesInsideBranchesAreOptimisedToo) {
  std::string dir = testing::MakeTempDir("pipeline_nested_");
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(ReadFile(WriteIfModel(dir))));
  auto* g = m.mutable_graph();
  auto* c1 = g->add_input();
  *c1 = g->input(1);
  c1->set_name("c1");
  onnx::NodeProto inner = g->node(1);  // If(c) -> y
  inner.set_name("inner");
  inner.set_output(0, "inner_y");
  onnx::NodeProto* outer = g->mutable_node(1);
  outer->Clear();
  outer->set_op_type("If");
  outer->set_name("outer");
  outer->add_input("c1");
  outer->add_output("y");
  auto* a = outer->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("outer_then");
  *a->mutable_g()->add_node() = inner;
  *a->mutable_g()->add_output() = g->output(0);
  a->mutable_g()->mutable_output(0)->set_name("inner_y");
  a = outer->add_attribute();
  a->set_name("else_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("outer_else");
  auto* t = a->mutable_g()->add_node();
  t->set_op_type("Transpose");
  t->add_input("w");
  t->add_output("outer_wt");
  auto* mm = a->mutable_g()->add_node();
  mm->set_op_type("MatMul");
  mm->add_input("x");
  mm->add_input("outer_wt");
  mm->add_output("outer_else_y");
  *a->mutable_g()->add_output() = g->output(0);
  a->mutable_g()->mutable_output(0)->set_name("outer_else_y");
  const std::string model = dir + "/nested.onnx";
  WriteFileAtomically(model, m.SerializeAsString());

  PipelineOptions o = CseOptions(dir, model);
  PipelineResult r = RunPipeline(o);
  ASSERT_EQ(r.branches.branches.size(), 2u);
  EXPECT_EQ(r.branches.branches[0].attribute, "then_branch");
  EXPECT_EQ(r.branches.branches[0].outcome, "optimised");
  EXPECT_NE(r.branches.branches[0].note.find("with 1 optimised subgraph inside it"), std::string::npos)
      << r.branches.branches[0].note;
  EXPECT_EQ(r.branches.branches[1].outcome, "unchanged");
  onnx::ModelProto out;
  ASSERT_TRUE(out.ParseFromString(ReadFile(o.output)));
  const onnx::GraphProto& outer_then = out.graph().node(1).attribute(0).g();
  ASSERT_EQ(outer_then.node_size(), 1);
  ASSERT_EQ(outer_then.node(0).op_type(), "If");
  EXPECT_EQ(outer_then.node(0).attribute(0).g().node_size(), 4);  // one Relu fewer
  const at::Tensor x = at::randn({4, 8});
  for (const bool v1 : {false, true}) {
    for (const bool v2 : {false, true}) {
      auto flag = [](bool v) { return v ? at::ones({}, at::kBool) : at::zeros({}, at::kBool); };
      const std::vector<std::pair<std::string, at::Tensor>> in = {{"x", x}, {"c", flag(v2)}, {"c1", flag(v1)}};
      EXPECT_TRUE(testing::RunOnnxRuntime(o.output, in)[0].allclose(testing::RunOnnxRuntime(model, in)[0], 1e-5, 1e-6))
          << v1 << v2;
    }
  }
}

}  // namespace
}  // namespace rlflow

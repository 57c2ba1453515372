// The optimise pipeline's stages one at a time, on a run's state set up by
// hand: each stage does its one job and writes its own record, and the
// summary and the report are built from the records alone.
#include "optimiser/stages.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "core/graph_builder.h"
#include "core/onnx_io.h"
#include "optimiser/scripted_backend.h"
#include "runtime/ort_testing.h"

namespace rlflow {
namespace {

// x -> Conv 3x3 -> BN -> Relu; the weights drawn from `seed`.
Graph SmallModel(uint64_t seed) {
  GraphBuilder b(seed);
  ValueId x = b.Input("x", {1, 4, 8, 8});
  ValueId y = b.Op("Conv", {x, b.Weight("w", {8, 4, 3, 3}, 0.2f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  y = b.Op("BatchNormalization", {y, b.Weight("s", {8}, 0.2f, 1.0f), b.Weight("b", {8}, 0.2f), b.Weight("m", {8}, 0.2f),
                                  b.Weight("v", {8}, 0.1f, 1.0f)});
  return b.Build({b.Op("Relu", {y})});
}

struct StageTest : ::testing::Test {
  void SetUp() override {
    dir = testing::MakeTempDir("stages_");
    model = dir + "/model.onnx";
    WriteOnnxFile(SmallModel(3), model);
    o.model = model;
    o.output = dir + "/out.onnx";
    o.timing_cache = "none";
    o.measure_runs = 10;
    // Every node costs 1 ms, alone and in context: a graph with fewer nodes
    // is faster, by exactly the ratio of the node counts.
    o.make_backend = [] {
      return std::make_unique<testing::ScriptedBackend>("scripted-node-count",
                                                        [](const Graph&, NodeId) { return 1.0; });
    };
  }
  std::string dir, model;
  PipelineOptions o;
  PipelineResult res;
};

TEST_F(StageTest, ConfigureAloneChecksTheOptionsAndFillsItsRecordOnly) {
  OptimiseRun r(o, res);
  Configure(r);
  EXPECT_EQ(res.configure.search, "taso");
  EXPECT_EQ(res.configure.search_params.at("alpha"), "1.05");  // taso's default, filled in
  EXPECT_EQ(res.configure.device, "cpu");
  EXPECT_EQ(res.configure.target, "onnx");  // the cpu backend's registration
  EXPECT_GT(res.configure.rule_count, 0);
  ASSERT_NE(r.cost, nullptr);
  EXPECT_TRUE(res.load.model_source.empty());  // the load stage has not run

  PipelineOptions bad = o;
  bad.free_dim = 0;
  OptimiseRun r2(bad, res);
  try {
    Configure(r2);
    ADD_FAILURE() << "--free_dim=0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--free_dim"), std::string::npos) << e.what();
  }
  bad = o;
  bad.make_backend = nullptr;
  bad.ort_level = "basic";
  OptimiseRun r3(bad, res);
  try {
    Configure(r3);
    ADD_FAILURE() << "--ort_level with --device=cpu accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--ort_level does not apply to --device=cpu");
  }
}

TEST_F(StageTest, CheckAloneRefusesAGraphThatComputesSomethingElse) {
  OptimiseRun r(o, res);
  Configure(r);
  Load(r);
  r.optimised = r.model.graph;
  Check(r);
  EXPECT_TRUE(res.check.unchanged);
  EXPECT_EQ(res.check.max_error, 0.0);
  EXPECT_EQ(res.check.outputs_compared, 1);
  // Same interface, other weights.
  r.optimised = SmallModel(4);
  try {
    Check(r);
    ADD_FAILURE() << "a graph with other weights passed the check";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("differs from the original"), std::string::npos) << e.what();
  }
}

// x [N, 3, H, W] -> MaxPool 2x2 / 2 (padded after, as TF's "same") ->
// ConvTranspose 2x2 / 2 -> Concat with x -> Relu (twice with `twice`): fits
// where H and W are even (3 x 3 pools to 2 x 2 and comes back 4 x 4); with
// `one_size`, then reshaped to [1, 6, 36]: fits at 6 x 6 only.
std::string DetectorFile(const std::string& path, bool twice, bool one_size = false) {
  GraphBuilder b(5);
  ValueId x = b.Input("x", {1, 3, 6, 6});
  ValueId p = b.Op("MaxPool", {x},
                   {{"kernel_shape", Attribute::Ints({2, 2})},
                    {"strides", Attribute::Ints({2, 2})},
                    {"pads", Attribute::Ints({0, 0, 1, 1})}});
  ValueId u = b.Op("ConvTranspose", {p, b.Weight("w", {3, 3, 2, 2}, 0.3f)}, {{"strides", Attribute::Ints({2, 2})}});
  ValueId y = b.Op("Relu", {b.Op("Concat", {u, x}, {{"axis", Attribute::Int(1)}})});
  if (twice) y = b.Op("Relu", {y});
  if (one_size) y = b.Op("Reshape", {y, b.ConstInts({1, 6, 36})});
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(ExportOnnxBytes(b.Build({y}))));
  m.mutable_graph()->clear_value_info();  // the intermediate shapes at 6 x 6
  for (auto* vi : {m.mutable_graph()->mutable_input(0), m.mutable_graph()->mutable_output(0)}) {
    if (one_size && vi == m.mutable_graph()->mutable_output(0)) continue;
    auto* dims = vi->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim();
    for (auto [k, name] : {std::pair{0, "N"}, {2, "H"}, {3, "W"}}) dims->Mutable(k)->set_dim_param(name);
  }
  WriteFileAtomically(path, m.SerializeAsString());
  return path;
}

// Given 6 x 6, the check's second binding halves it to 3 x 3, where the
// model does not fit: it checks at the doubled one (12 x 12) instead of
// the first binding only.
TEST_F(StageTest, CheckTakesTheDoubledSecondBindingWhereTheHalvedDoesNotFit) {
  o.model = DetectorFile(dir + "/detector.onnx", false);
  o.input_shapes = ParseInputShapes("x:1,3,6,6");
  OptimiseRun r(o, res);
  Configure(r);
  Load(r);
  ImportOptions same = r.model.import;
  r.optimised = ImportOnnxFile(DetectorFile(dir + "/twice.onnx", true), same);
  Check(r);
  EXPECT_FALSE(res.check.unchanged);
  EXPECT_TRUE(res.check.general_ok);
  EXPECT_NE(res.check.general_note.find("also checked with symbolic dimensions bound to free dimensions=2, "
                                        "x:[2,3,12,12]"),
            std::string::npos)
      << res.check.general_note;
}

// A model that fits at the given shapes only (here a Reshape to a constant
// shape): the importer folds every shape computation at them, and the check
// finds no second binding. An optimised graph exported from it would run at
// those shapes only, where the model declares them symbolic: the check
// fails it, and the original is written whatever the verdict.
TEST_F(StageTest, AGraphFoldedAtItsOnlyBindingIsNotWritten) {
  o.model = DetectorFile(dir + "/one_size.onnx", false, true);
  o.input_shapes = ParseInputShapes("x:1,3,6,6");
  OptimiseRun r(o, res);
  Configure(r);
  Load(r);
  EXPECT_TRUE(r.model.folded_at_binding);
  ImportOptions same = r.model.import;
  r.optimised = ImportOnnxFile(DetectorFile(dir + "/one_size_twice.onnx", true, true), same);
  Check(r);
  EXPECT_FALSE(res.check.unchanged);
  EXPECT_FALSE(res.check.general_ok);
  EXPECT_NE(res.check.general_note.find("the original is written"), std::string::npos) << res.check.general_note;
  // A model that fits a second binding is not marked.
  o.model = DetectorFile(dir + "/detector.onnx", false);
  OptimiseRun r2(o, res);
  Configure(r2);
  Load(r2);
  EXPECT_FALSE(r2.model.folded_at_binding);
}

// A model slow at shapes the user did not give (a diffusion UNet fitted at
// 224 x 224: 20 s a run) is said at the reference run, before the
// calibration and the search time it; at shapes the user gave it is not.
TEST_F(StageTest, ASlowRunAtShapesNotGivenIsWarnedAbout) {
  o.model = DetectorFile(dir + "/detector.onnx", false);
  o.slow_run_warning_s = 0;  // every run is "slow"
  for (const bool given : {false, true}) {
    std::vector<std::string> warnings;
    o.log = [&](bool warning, const std::string& line) {
      if (warning) warnings.push_back(line);
    };
    o.input_shapes = given ? ParseInputShapes("x:1,3,6,6") : std::map<std::string, std::vector<int64_t>>{};
    PipelineResult result;
    OptimiseRun r(o, result);
    Configure(r);
    Load(r);
    ReferenceRun(r);
    std::string all;
    for (const auto& w : warnings) all += w + "\n";
    const bool warned = all.find("one run of the model takes") != std::string::npos;
    EXPECT_EQ(warned, !given) << all;
    if (!given) {
      EXPECT_NE(all.find("at the shapes its symbolic dimensions were bound to (x:1,3,224,224)"), std::string::npos)
          << all;
    }
  }
}

TEST_F(StageTest, VerdictAloneKeepsTheOriginalUnlessTheGraphIsFaster) {
  OptimiseRun r(o, res);
  Configure(r);
  Load(r);
  ReferenceRun(r);
  // The verdict times, it does not check: any graph with the interface will
  // do. Fewer nodes are faster on this backend.
  GraphBuilder b(0);
  ValueId x = b.Input("x", {1, 4, 8, 8});
  ValueId y = b.Op("Conv", {x, b.Weight("w", {8, 4, 3, 3}, 0.2f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  Graph smaller = b.Build({b.Op("Relu", {y})});
  r.optimised = smaller;
  r.level = 0.99;
  // The log says how long the measurement takes, from the reference run
  // (set here as a UNet's 30 s: 10 pairs of two runs).
  std::vector<std::string> lines;
  o.log = [&](bool, const std::string& line) { lines.push_back(line); };
  const double reference_s = res.reference_run.seconds;
  res.reference_run.seconds = 30;
  Measure(r);
  res.reference_run.seconds = reference_s;
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "measuring original and optimised graphs end to end (10 interleaved pairs, about 10.0 min)"),
            lines.end());
  EXPECT_EQ(res.verdict.outcome, Verdict::Outcome::kFaster);
  EXPECT_FALSE(res.verdict.keep_original);
  EXPECT_EQ(res.verdict.pairs, 10);
  EXPECT_DOUBLE_EQ(res.verdict.wall.level, 0.99);
  EXPECT_NEAR(res.verdict.before_ms / res.verdict.after_ms, 3.0 / 2.0, 0.01);

  // The same graph found unchanged by the check is timed once, and kept.
  res.check.unchanged = true;
  r.optimised = r.model.graph;
  Measure(r);
  EXPECT_TRUE(res.verdict.keep_original);
  EXPECT_EQ(res.verdict.before_ms, res.verdict.after_ms);
  // Faster, but wrong at a second binding of the symbolic dimensions: kept.
  res.check.unchanged = false;
  res.check.general_ok = false;
  r.optimised = smaller;
  Measure(r);
  EXPECT_TRUE(res.verdict.faster());
  EXPECT_TRUE(res.verdict.keep_original);
}

TEST_F(StageTest, WriteAloneWritesTheOriginalBytesWhenTheVerdictKeepsThem) {
  OptimiseRun r(o, res);
  Configure(r);
  Load(r);
  r.optimised = SmallModel(4);
  res.verdict.keep_original = true;
  Write(r);
  EXPECT_EQ(ReadFile(o.output), ReadFile(model));
  res.verdict.keep_original = false;
  Write(r);
  Graph written = ImportOnnxFile(o.output);
  EXPECT_EQ(written.StructuralHash(), SmallModel(4).StructuralHash());
}

// The sides' medians and the paired ratio disagree when the machine's speed
// moves during the verdict's runs (seen on ResNet-50: 188.54 -> 189.38 ms,
// speedup 1.041x [1.014, 1.060]): the summary says why, and only then.
TEST(StageRecords, TheSummaryExplainsMediansThatDisagreeWithThePairedRatio) {
  auto summary = [](double before_ms, double after_ms) {
    PipelineResult p;
    p.configure.search = "taso";
    p.configure.device = "cpu";
    p.load.model_source = "m.onnx";
    p.load.output = "out.onnx";
    p.search.before_estimate = 190;
    static_cast<Verdict&>(p.verdict).outcome = Verdict::Outcome::kFaster;
    p.verdict.wall.n = 12;
    p.verdict.wall.median = 1.041;
    p.verdict.wall.lo = 1.014;
    p.verdict.wall.hi = 1.060;
    p.verdict.wall.level = 0.975;
    p.verdict.wall.confidence = 0.98;
    p.verdict.cpu = p.verdict.wall;
    p.verdict.pairs = 12;
    p.verdict.before_ms = before_ms;
    p.verdict.after_ms = after_ms;
    p.verdict.after_estimate = 180;
    return p.Summary();
  };
  const std::string drifted = summary(188.54, 189.38);
  EXPECT_NE(drifted.find("the two medians' ratio, 0.996x, lies outside the interval"), std::string::npos) << drifted;
  const std::string steady = summary(188.54, 181.0);
  EXPECT_NE(steady.find("measured:   188.54 -> 181.00 ms"), std::string::npos) << steady;
  EXPECT_EQ(steady.find("lies outside the interval"), std::string::npos) << steady;
  // A model of a few nodes runs in microseconds: two significant digits,
  // not "0.00 ms".
  const std::string tiny = summary(0.0031, 0.0029);
  EXPECT_NE(tiny.find("measured:   0.0031 -> 0.0029 ms"), std::string::npos) << tiny;
}

TEST(StageRecords, TheSummaryAndTheReportAreBuiltFromTheRecords) {
  PipelineResult p;
  p.configure.search = "greedy";
  p.configure.device = "cpu";
  p.configure.rules_path = "db.pb";
  p.configure.rule_count = 7;
  p.load.model_source = "m.onnx";
  p.load.output = "out.onnx";
  p.search.rounds = 2;
  p.search.before_estimate = 4.0;
  p.search.result.applied = {"r1", "r1", "r2"};
  p.check.max_error = 0.5;
  p.check.outputs_compared = 3;
  static_cast<Verdict&>(p.verdict).outcome = Verdict::Outcome::kFaster;
  p.verdict.pairs = 12;
  p.verdict.before_ms = 4.0;
  p.verdict.after_ms = 2.0;
  p.verdict.after_estimate = 2.5;
  p.verdict.guard_device = "ort";
  p.verdict.guarded = true;
  p.verdict.guard.outcome = Verdict::Outcome::kWithinNoise;
  p.verdict.guard.a_ms = 3.0;
  p.verdict.guard.b_ms = 2.9;
  p.verdict.second_binding = "x:[2,3,32,128]";
  p.verdict.second_measured = true;
  p.verdict.second.outcome = Verdict::Outcome::kWithinNoise;
  p.verdict.second.a_ms = 6.0;
  p.verdict.second.b_ms = 5.9;
  p.retries.push_back(RetryRecord{"abc", 1, "slower", 0.9, 1.5, "ort", "faster", 1.02, "slower", 0.97});
  p.write.real_steps = 40;
  p.report.peak_memory_mb = 321;
  p.report.path = "report.json";
  p.stage_seconds = {{"configure", 0.5}, {"report", 0.25}};

  const std::string s = p.Summary();
  // Each stage's lines, in the stages' order.
  size_t at = 0;
  for (const std::string line :
       {"model:      m.onnx\n", "rules:      7 (db.pb)\n", "search:     greedy, 2 rounds", "    2 x r1\n",
        "    1 x r2\n", "check:      max relative error 0.5 over 3 outputs", "measured:   4.00 -> 2.00 ms",
        "guard:      in ort 3.00 -> 2.90 ms", "second:     at x:[2,3,32,128]: 6.00 -> 5.90 ms",
        "retry:      without rule abc: 1 rewrites applied, slower (0.900x), in ort faster (1.020x), at the second "
        "binding slower (0.970x), 1.5 s\n",
        "written:    out.onnx\n", "real work:  40 rewrites applied", "cost:       estimate 4.00 -> 2.50 ms",
        "memory:     peak 321 MB\n", "stages:     configure 0.50 s, report 0.25 s\n", "report:     report.json\n"}) {
    const size_t found = s.find(line, at);
    ASSERT_NE(found, std::string::npos) << "'" << line << "' missing or out of order in:\n" << s;
    at = found + 1;
  }
  const nlohmann::json j = nlohmann::json::parse(p.ReportJson());
  EXPECT_EQ(j["model"], "m.onnx");
  EXPECT_EQ(j["search"]["strategy"], "greedy");
  EXPECT_EQ(j["search"]["rounds"], 2);
  EXPECT_EQ(j["rules"]["count"], 7);
  EXPECT_EQ(j["rules"]["applied"]["r1"], 2);
  EXPECT_EQ(j["check"]["outputs_compared"], 3);
  EXPECT_EQ(j["verdict"]["outcome"], "faster");
  EXPECT_DOUBLE_EQ(j["estimated_speedup"].get<double>(), 4.0 / 2.5);
  EXPECT_DOUBLE_EQ(j["predicted_after_ms"].get<double>(), 4.0 * 2.5 / 4.0);
  EXPECT_EQ(j["retries"][0]["left_out"], "abc");
  EXPECT_EQ(j["retries"][0]["guard"]["outcome"], "faster");
  EXPECT_EQ(j["verdict"]["guard"]["device"], "ort");
  EXPECT_EQ(j["verdict"]["guard"]["outcome"], "within noise");
  EXPECT_DOUBLE_EQ(j["verdict"]["guard"]["after_ms"].get<double>(), 2.9);
  EXPECT_EQ(j["verdict"]["second_binding"]["shapes"], "x:[2,3,32,128]");
  EXPECT_EQ(j["verdict"]["second_binding"]["outcome"], "within noise");
  EXPECT_EQ(j["verdict"]["second_binding"]["required"], false);
  EXPECT_DOUBLE_EQ(j["verdict"]["second_binding"]["before_ms"].get<double>(), 6.0);
  EXPECT_EQ(j["retries"][0]["second_binding"]["outcome"], "slower");
  EXPECT_EQ(j["real_work"]["steps"], 40);
  EXPECT_EQ(j["wrote_original"], false);
  EXPECT_DOUBLE_EQ(j["stage_seconds"]["report"].get<double>(), 0.25);
}

}  // namespace
}  // namespace rlflow

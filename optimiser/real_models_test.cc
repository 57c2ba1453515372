// Acceptance on the real-model corpus (//zoo:real_models, zoo/export_real.py):
// models in the shapes users bring them (opset 9, dynamic height and width,
// hard-swish and squeeze-excitation, activations by formula, upsampling,
// If/Loop, shifted-window attention, a decoder with a key/value cache). Each is optimised by the optimiser binary at
// the shape the manifest gives (--input_shape), and ONNX Runtime must give the same outputs for the original and the
// written model at that shape and at a second one (the symbolic dimensions stay symbolic). The written model keeps the
// interface and is at the model's own opset, or 11 for opsets below 11.
//
// One test per model (see BUILD), named by the argument --gtest_filter picks.
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros_like.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/subprocess.h"
#include "runtime/equivalence.h"
#include "runtime/executor.h"
#include "runtime/ort_backend.h"
#include "runtime/ort_testing.h"

namespace rlflow {
namespace {

struct RealModel {
  std::string name, input_shape, other_shape;
};

std::vector<RealModel> Manifest() {
  std::vector<RealModel> out;
  std::istringstream in(ReadFile(FindRunfile("zoo/real_models/models.txt")));
  RealModel m;
  while (in >> m.name >> m.input_shape >> m.other_shape) out.push_back(m);
  return out;
}

int64_t DefaultOpset(const onnx::ModelProto& m) {
  for (const auto& imp : m.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx") return imp.version();
  return -1;
}

// Import options at a --input_shape value, typing control flow as the
// optimiser does (one ONNX Runtime run).
ImportOptions At(const std::string& shape) {
  ImportOptions o;
  o.input_shapes = ParseInputShapes(shape);
  o.type_oracle = [](const std::string& bytes, const std::vector<std::string>& names) {
    return OrtTensorTypes(bytes, names, 1);
  };
  return o;
}

// ONNX Runtime gives `written` the outputs it gives `original` (within
// `tolerance`; for a rewritten model's float16 outputs what the optimiser's
// check allows them, AllowedError) on seeded inputs at `shape` (a
// --input_shape value); `check_degenerate`: the original's outputs must
// also vary.
void ExpectSameInOrt(const std::string& original, const std::string& written, const std::string& shape, uint64_t seed,
                     double tolerance, bool rewritten, bool check_degenerate, const std::string& label) {
  Graph bound = ImportOnnxFile(original, At(shape));
  std::vector<at::Tensor> inputs = RandomInputs(bound, seed);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (size_t k = 0; k < inputs.size(); ++k) named.push_back({bound.value(bound.inputs()[k]).name, inputs[k]});
  // A bool input is a switch (Optimum's use_cache_branch chooses an If
  // branch): each value of it, so that every branch is compared.
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> sets = {named};
  if (std::any_of(named.begin(), named.end(), [](const auto& in) { return in.second.scalar_type() == at::kBool; })) {
    sets = {named, named};
    for (size_t set = 0; set < 2; ++set)
      for (auto& [name, t] : sets[set])
        if (t.scalar_type() == at::kBool) t = set == 1 ? at::ones_like(t) : at::zeros_like(t);
  }
  for (size_t set = 0; set < sets.size(); ++set) {
    std::vector<at::Tensor> a = testing::RunOnnxRuntime(original, sets[set]);
    std::vector<at::Tensor> b = testing::RunOnnxRuntime(written, sets[set]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      if (check_degenerate) {
        ASSERT_GT(a[k].to(at::kDouble).std().item<double>(), 1e-6) << "output " << k << " is degenerate";
      }
      double err = RelativeError(b[k], a[k]);
      const double allowed =
          rewritten && a[k].scalar_type() == at::kHalf ? AllowedError(DType::kFloat16, tolerance) : tolerance;
      std::cout << label << (sets.size() > 1 ? (set == 0 ? " (bool inputs false)" : " (bool inputs true)") : "")
                << " output " << k << ": ORT original vs written rel. error " << err << "\n";
      EXPECT_LE(err, allowed) << shape;
    }
  }
}

// The optimiser binary on `model` with the default settings but a search
// time limit that keeps a test under a minute; written even when not
// measured faster (--force_optimised), so that what the search did is what
// is checked. Its stdout and stderr in dir/stdout.txt, dir/stderr.txt, its
// timing cache in `dir`; returns its exit status.
int RunOptimiser(const std::string& model, const std::string& written, const std::string& report,
                 const std::string& input_shape, int time_limit_s, const std::string& dir) {
  ProgramIo io;
  io.out = dir + "/stdout.txt";
  io.err = dir + "/stderr.txt";
  return RunProgram(
      {FindRunfile("optimiser/optimiser"), "--model=" + model, "--output=" + written, "--report=" + report,
       "--input_shape=" + input_shape, "--time_limit=" + std::to_string(time_limit_s), "--force_optimised",
       "--timing_cache=" + dir + "/cache.txt"},
      io);
}

class RealModels : public ::testing::TestWithParam<RealModel> {};

TEST_P(RealModels, OptimisedAtTheGivenShapeAndRightAtAnother) {
  const RealModel& c = GetParam();
  std::string dir = testing::MakeTempDir(c.name + "_");
  std::string original = FindRunfile("zoo/real_models/" + c.name + ".onnx");
  std::string written = dir + "/optimised.onnx", report = dir + "/report.json";
  const int status = RunOptimiser(original, written, report, c.input_shape, 20, dir);
  ASSERT_EQ(status, 0) << ReadFile(dir + "/stderr.txt");
  std::cout << ReadFile(dir + "/stdout.txt");
  nlohmann::json json = nlohmann::json::parse(ReadFile(report));
  // Within what the check allows: 1e-4, or a few units of float16's
  // precision for a float16 model's outputs.
  EXPECT_LE(json["check"]["max_relative_error"].get<double>(), json["check"]["allowed"].get<double>()) << json;
  EXPECT_LE(json["check"]["allowed"].get<double>(), AllowedError(DType::kFloat16, 1e-4)) << json;
  // Compared on finite outputs (the filled inputs are values the model is
  // meant for: indices in range, masks of 0 and 1).
  EXPECT_TRUE(json["check"]["notes"].empty()) << json["check"];
  // Every operator of the corpus is modelled (an opaque node is optimised
  // around, but no rewrite crosses it and the estimate does not charge it),
  // except control flow (If, Loop; a merged decoder's If branches and a
  // generation loop's body are optimised as models of their own; the
  // detector's NMS is inside the If
  // torchvision's batched_nms exports, its guard for no boxes) and a QDQ
  // model's quantized units, kept opaque by design; and ONNX Runtime's
  // contrib operators but SkipLayerNormalization (two Attention, two
  // BiasGelu, an EmbedLayerNormalization, the default-domain LayerNormalization
  // ONNX Runtime runs before opset 17).
  const bool opaque_by_design =
      c.name.find("control_flow") != std::string::npos || c.name.find("_merged") != std::string::npos ||
      c.name.find("_loop") != std::string::npos || c.name.find("qdq_") == 0 || c.name.find("nms_") == 0 ||
      c.name.find("ort_transformers_") == 0 || c.name.find("scan_") == 0 || c.name.find("scripted_") == 0 ||
      c.name.find("_while_") != std::string::npos;
  if (c.name.find("nms_") == 0) {
    EXPECT_EQ(json["check"]["opaque_nodes"].get<int>(), 1) << json["check"];
  }
  if (c.name.find("ort_transformers_") == 0) {
    EXPECT_EQ(json["check"]["opaque_nodes"].get<int>(), 6) << json["check"];
  }
  if (!opaque_by_design) {
    EXPECT_EQ(json["check"]["opaque_nodes"].get<int>(), 0) << json["check"];
  }
  // Every If branch and Loop body goes through the optimiser (the NMS
  // detector's If branch, which reads the boxes NonZero left, of a length
  // only the values set, had not: "dimension 0 is -1").
  for (const auto& b : json["branches"]) EXPECT_NE(b["outcome"], "not optimised") << b;
  // A merged decoder's If branches (its weights in an external data file
  // too) and a generation loop's body are optimised as models of their own.
  if (c.name.find("_merged") != std::string::npos || c.name.find("_loop") != std::string::npos) {
    int optimised = 0;
    for (const auto& b : json["branches"]) optimised += b["outcome"] == "optimised" ? 1 : 0;
    EXPECT_GT(optimised, 0) << json["branches_note"] << "\n" << json["branches"];
  }
  // A recurrent layer written as a loop (a Scan body, a scripted loop over
  // time): its input products are computed once before it
  // (core/onnx_hoist.h), and each body optimised.
  if (c.name.find("scan_") == 0 || c.name.find("scripted_") == 0 || c.name.find("_while_") != std::string::npos) {
    ASSERT_TRUE(json.contains("hoisted")) << json;
    EXPECT_FALSE(json["hoisted"]["loops"].empty()) << json["hoisted"];
    EXPECT_FALSE(json["branches"].empty()) << json["branches_note"];
  }
  // A classifier that reads its class token (Hugging Face's pooler reads
  // x[:, 0], TensorFlow's and Paddle's x[:, 0:1] squeezed) computes its last
  // layer on that token (select_rows_early).
  if (c.name.find("hf_bert_classifier") == 0 || c.name.find("bert_slice_pooler") == 0) {
    EXPECT_TRUE(json["canonical_form"]["rows_selected_early"].get<bool>()) << json["canonical_form"];
  }
  // The report records the shapes the search ran at.
  ImportOptions given;
  given.input_shapes = ParseInputShapes(c.input_shape);
  int recorded = 0;
  for (const auto& input : json["inputs"]) {
    auto it = given.input_shapes.find(input["name"].get<std::string>());
    if (it == given.input_shapes.end()) continue;
    EXPECT_EQ(input["used"].get<std::vector<int64_t>>(), it->second) << json["inputs"];
    ++recorded;
  }
  EXPECT_EQ(recorded, static_cast<int>(given.input_shapes.size())) << json["inputs"];

  onnx::ModelProto mo, mw;
  ASSERT_TRUE(mo.ParseFromString(ReadFile(original)));
  ASSERT_TRUE(mw.ParseFromString(ReadFile(written)));
  // The inputs a user feeds: before IR 4 every initializer is listed as a
  // graph input too (ONNX Runtime does not count those among the model's
  // inputs, and a model written at IR 7 lists none).
  auto fed = [](const onnx::ModelProto& m) {
    std::set<std::string> inits;
    for (const auto& t : m.graph().initializer()) inits.insert(t.name());
    std::vector<const onnx::ValueInfoProto*> out;
    for (const auto& vi : m.graph().input())
      if (!inits.count(vi.name())) out.push_back(&vi);
    return out;
  };
  const auto inputs_o = fed(mo), inputs_w = fed(mw);
  ASSERT_EQ(inputs_o.size(), inputs_w.size());
  ASSERT_EQ(mo.graph().output_size(), mw.graph().output_size());
  for (size_t k = 0; k < inputs_o.size(); ++k)
    EXPECT_EQ(inputs_o[k]->SerializeAsString(), inputs_w[k]->SerializeAsString()) << "input " << k << " changed";
  for (int k = 0; k < mo.graph().output_size(); ++k)
    EXPECT_EQ(mo.graph().output(k).SerializeAsString(), mw.graph().output(k).SerializeAsString())
        << "output " << k << " changed";
  // The original is written as it came when nothing changed; a changed model
  // at its own opset (11 for 7 to 10).
  // A model with external data is written from the graph, its weights in
  // one data file beside the output.
  const std::string weights = original.substr(0, original.size() - 5) + ".weights";
  const bool external = FileExists(weights);
  EXPECT_EQ(FileExists(written + ".data"), external);
  if (json["unchanged"].get<bool>() && !external)
    EXPECT_TRUE(ReadFile(written) == ReadFile(original)) << "the written 'original' differs from the input file";
  else
    EXPECT_EQ(DefaultOpset(mw), std::max<int64_t>(DefaultOpset(mo), kMinWrittenOpset));
  if (external) {
    EXPECT_LT(ReadFile(written).size(), ReadFile(weights).size());
  }

  for (const std::string& shape : {c.input_shape, c.other_shape})
    ExpectSameInOrt(original, written, shape, 11, 1e-4, /*rewritten=*/true, /*check_degenerate=*/true,
                    c.name + " at " + shape);
}

// Import and export alone (no search): the model upgraded for the IR
// (rlflow's 7..10 -> 11, ONNX's converter -> 13) and written back at its own
// opset (11 for 7 to 10) computes what the original does in ONNX Runtime, at
// both shapes.
TEST_P(RealModels, ImportedAndWrittenBackAtItsOpset) {
  const RealModel& c = GetParam();
  std::string dir = testing::MakeTempDir(c.name + "_io_");
  std::string original = FindRunfile("zoo/real_models/" + c.name + ".onnx");
  std::string written = dir + "/roundtrip.onnx";
  Graph g = ImportOnnxFile(original, At(c.input_shape));
  std::string note;
  WriteOnnxFile(g, written, &note);
  onnx::ModelProto mo, mw;
  ASSERT_TRUE(mo.ParseFromString(ReadFile(original)));
  ASSERT_TRUE(mw.ParseFromString(ReadFile(written)));
  EXPECT_EQ(DefaultOpset(mw), std::max<int64_t>(DefaultOpset(mo), kMinWrittenOpset)) << note;
  for (const std::string& shape : {c.input_shape, c.other_shape})
    ExpectSameInOrt(original, written, shape, 5, 1e-5, /*rewritten=*/false, /*check_degenerate=*/false,
                    c.name + " round trip at " + shape);
}

// Models as ONNX Runtime saves them optimised (a session's
// optimizedModelFilePath), which users deploy and bring: at level extended
// a BERT with ORT's contrib operators (FusedMatMul, BiasGelu, FusedGemm) and
// LayerNormalization in the default domain at opset 14 (refused by ONNX's
// checker before), its attention reshapes [0, 0, heads, size] after opaque
// nodes (which did not infer at a second binding, so every shape was folded
// at the first and the result not right at other sequence lengths); at
// level all a CNN in ORT's blocked layout (com.microsoft.nchwc). Each is
// optimised around those nodes, right at other shapes, and equal in ORT.
TEST(SavedByOnnxRuntime, OptimisedAroundItsOperatorsAndRightAtOtherShapes) {
  std::map<std::string, RealModel> corpus;
  for (const RealModel& m : Manifest()) corpus[m.name] = m;
  for (const auto& [name, level] : std::vector<std::pair<std::string, std::string>>{
           {"hf_bert_classifier_op14", "extended"}, {"mobilenet_v3_small_op13", "all"}}) {
    SCOPED_TRACE(name + " saved at level " + level);
    ASSERT_TRUE(corpus.count(name));
    const RealModel& c = corpus[name];
    const std::string dir = testing::MakeTempDir(name + "_ort_");
    const std::string saved = dir + "/saved.onnx", written = dir + "/optimised.onnx", report = dir + "/report.json";
    testing::SaveOrtOptimizedModel(FindRunfile("zoo/real_models/" + name + ".onnx"), level, saved);
    const int status = RunOptimiser(saved, written, report, c.input_shape, 5, dir);
    ASSERT_EQ(status, 0) << ReadFile(dir + "/stderr.txt");
    const nlohmann::json json = nlohmann::json::parse(ReadFile(report));
    EXPECT_GT(json["check"]["opaque_nodes"].get<int>(), 0) << json["check"];
    EXPECT_TRUE(json["check"]["general"].get<bool>()) << json["check"];
    for (const std::string& shape : {c.input_shape, c.other_shape})
      ExpectSameInOrt(saved, written, shape, 13, 1e-4, /*rewritten=*/true, /*check_degenerate=*/true,
                      name + " saved by ORT at " + shape);
  }
}

INSTANTIATE_TEST_SUITE_P(Real, RealModels, ::testing::ValuesIn(Manifest()),
                         [](const ::testing::TestParamInfo<RealModel>& info) { return info.param.name; });

}  // namespace
}  // namespace rlflow

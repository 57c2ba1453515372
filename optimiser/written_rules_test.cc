// Every family of written rules (rules/written.rules, by name before "/")
// is in the checked-in database and fires on a model of the real-model
// corpus (//zoo:real_models) where the exporter wrote that form (or on what
// other written rules make of it); and each rewrite computes what the model
// did. Models are matched in the canonical form every search works on
// (batch norms lowered to x * S + T).
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/rewrite/matcher.h"
#include "core/rules/rule.h"
#include "core/rules/written.h"
#include "rules/testing.h"
#include "runtime/executor.h"
#include "runtime/table_cost_testing.h"
#include "search/canonical.h"
#include "search/search.h"

namespace rlflow {
namespace {

std::string Family(const std::string& written_name) { return written_name.substr(0, written_name.find('/')); }

TEST(WrittenRules, EachFamilyIsInTheDatabaseAndFiresOnTheCorpus) {
  const std::string path = FindRunfile("rules/written.rules");
  ASSERT_FALSE(path.empty());
  std::vector<rules::Rule> written = ParseWrittenRules(ReadFile(path), path);
  // The database holds each written rule, by id and name (regenerated with
  // the verifier's --written; README, "Rules").
  std::map<std::string, const rules::Rule*> by_id;
  for (const auto& r : testing::DefaultRules().rules()) by_id[r.id()] = &r;
  std::set<std::string> families;
  for (const auto& r : written) {
    families.insert(Family(r.written_name()));
    auto it = by_id.find(r.id());
    ASSERT_NE(it, by_id.end()) << r.written_name() << " (" << r.id() << ") is not in the database";
    EXPECT_EQ(it->second->written_name(), r.written_name());
  }
  std::vector<rules::Rule> db_written;
  for (const auto& r : testing::DefaultRules().rules())
    if (!r.written_name().empty()) db_written.push_back(r);
  EXPECT_EQ(db_written.size(), written.size()) << "the database has written rules the file does not";
  Matcher matcher(db_written, /*both_directions=*/false);
  std::map<std::string, size_t> position;  // rule id -> its place in the file
  for (size_t k = 0; k < written.size(); ++k) position[written[k].id()] = k;

  std::map<std::string, int> fired;
  std::istringstream manifest(ReadFile(FindRunfile("zoo/real_models/models.txt")));
  std::string name, shape, other;
  int models = 0;
  while (manifest >> name >> shape >> other) {
    // The models written with such forms.
    if (name.find("formula") == std::string::npos && name.find("post_norm") == std::string::npos &&
        name.find("prelu") == std::string::npos && name.find("mish") == std::string::npos &&
        name.find("repvgg") == std::string::npos && name.find("mobileone") == std::string::npos &&
        name.find("layernorm2d") == std::string::npos)
      continue;
    ++models;
    ImportOptions at;
    at.input_shapes = ParseInputShapes(shape);
    const Graph imported = CanonicalForm(ImportOnnxFile(FindRunfile("zoo/real_models/" + name + ".onnx"), at));
    std::vector<at::Tensor> inputs = RandomInputs(imported, 1);
    std::vector<at::Tensor> want = Executor(imported).Run(inputs);
    // Every match of the model, and of what the written rules make of it
    // (a rule that completes another's result, such as a layer norm taking
    // in its scale, fires only there): each rewrite computes what the model
    // did (run for the first four matches of each family in the model and
    // for every applied one: a re-parameterised network has dozens of the
    // same merge); then the first is applied and the rest found again,
    // until none; again applying the last match each time (rules that
    // merge a chain of sums reach different forms in different orders, as
    // the searches apply them in any); and once more in the file's order of
    // the rules (a layer norm's division taken as a product consumes the
    // form its fusion reads in both of the other orders).
    std::map<std::string, int> run;
    for (int order : {0, 1, 2}) {
      Graph g = imported;
      for (int steps = 0; steps < 200; ++steps) {
        std::vector<Match> matches = matcher.FindAll(g);
        if (matches.empty()) break;
        if (order == 1) std::reverse(matches.begin(), matches.end());
        if (order == 2)
          std::stable_sort(matches.begin(), matches.end(), [&](const Match& a, const Match& b) {
            return position.at(matcher.rules()[a.rule].id()) < position.at(matcher.rules()[b.rule].id());
          });
        std::optional<Graph> next;
        for (const Match& m : matches) {
          const std::string family = Family(matcher.rules()[m.rule].written_name());
          ++fired[family];
          if (next && run[family]++ >= 4) continue;
          Graph rewritten = matcher.Apply(g, m);
          std::vector<at::Tensor> got = Executor(rewritten).Run(inputs);
          ASSERT_EQ(got.size(), want.size());
          for (size_t k = 0; k < got.size(); ++k)
            EXPECT_LE(RelativeError(got[k], want[k]), got[k].scalar_type() == at::kHalf ? 4.0 / 1024 : 1e-5)
                << family << " on " << name;  // a float16 model (AllowedError)
          if (!next) next = std::move(rewritten);
        }
        g = std::move(*next);
      }
    }
  }
  EXPECT_GE(models, 7);
  for (const std::string& f : families) EXPECT_GT(fired[f], 0) << f << " fires on no corpus model";
}

// The re-parameterisation rules write nothing an opset-11 model cannot hold
// (RepVGG-style models come from exports at 9 and 11 too; the importer
// writes opsets below 11 at 11): their kernels are computed with Reshape,
// Pad's pads input (opset 11) and EyeLike, not Unsqueeze's axes input (13),
// which had kept the identity-branch rule from every opset-11 model.
TEST(WrittenRules, ReparameterisationRulesApplyFromOpset11) {
  int found = 0;
  for (const auto& r : testing::DefaultRules().rules()) {
    if (Family(r.written_name()).rfind("repconv_", 0) != 0) continue;
    ++found;
    EXPECT_LE(RuleOpset(r), 11) << r.written_name();
  }
  EXPECT_EQ(found, 14);
}

// Where the two sides of a rank-generic unary rule (its rank-1 instance)
// disagree on the executor in float32 at `x` (one line each): a NaN
// against a number, or
// more than 1e-6 (absolute, and relative to the source) apart; exactly
// equal required from `exact_from` on and where the source is infinite.
std::vector<std::string> DisagreementsInFloat32(const rules::Rule& rule, const std::vector<float>& x,
                                                float exact_from) {
  const SymbolBinding at = {{"d1", static_cast<int64_t>(x.size())}};
  Graph source = InstantiatePattern(rule, rule.source(), at), target = InstantiatePattern(rule, rule.target(), at);
  const at::Tensor in = at::tensor(x);
  const at::Tensor want = Executor(source).Run({in})[0], got = Executor(target).Run({in})[0];
  std::vector<std::string> bad;
  for (size_t i = 0; i < x.size(); ++i) {
    const float w = want[i].item<float>(), g = got[i].item<float>();
    bool ok = std::isnan(w) == std::isnan(g);
    if (ok && !std::isnan(w))
      ok = std::isinf(w) || x[i] >= exact_from ? g == w : std::abs(g - w) <= 1e-6f + 1e-6f * std::abs(w);
    if (!ok)
      bad.push_back("x = " + std::to_string(x[i]) + ": source " + std::to_string(w) + ", target " + std::to_string(g));
  }
  return bad;
}

// mish_softplus_by_exp_log writes Softplus as ln(exp(x) + 1), which
// overflows in float32 past 88.7; inside Mish the overflow is harmless
// (tanh(inf) = 1). Both sides in float32 on the executor, at the values
// where the forms part: within 1e-6 (where 1 + exp(x) rounds to 1, Mish is
// x * exp(x), under 1e-6 in magnitude), exactly equal from 9 on and at the
// infinities, NaN where the other is NaN. The same check refutes Softplus
// written out alone (inf where softplus is x).
TEST(WrittenRules, MishWrittenWithExpAndLogHoldsInFloat32AtTheExtremes) {
  const rules::Rule* mish = nullptr;
  for (const auto& r : testing::DefaultRules().rules())
    if (Family(r.written_name()) == "mish_softplus_by_exp_log" && r.inputs(0).shape_size() == 1) mish = &r;
  ASSERT_NE(mish, nullptr) << "mish_softplus_by_exp_log (rank 1) is not in the database";
  ASSERT_EQ(InstantiatePattern(*mish, mish->target(), {{"d1", 1}}).OpCounts()["Softplus"], 0);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-inf,  -1e30f, -100.0f, -88.0f, -30.0f, -17.0f, -16.0f, -10.0f, -3.0f,
                                -1.0f, -1e-3f, 0.0f,    1e-3f,  1.0f,   3.0f,   9.0f,   20.0f,  50.0f,
                                88.0f, 88.8f,  89.0f,   100.0f, 1e4f,   1e30f,  3e38f,  inf,    nan};
  for (const std::string& d : DisagreementsInFloat32(*mish, x, 9.0f)) ADD_FAILURE() << d;
  std::vector<rules::Rule> alone = ParseWrittenRules(
      "rule softplus_alone\n  input X: float32[*]\n  source Softplus(X)\n  target Log(Add(Exp(X), 1.0))\n", "t");
  EXPECT_GE(DisagreementsInFloat32(alone.at(0), x, 9.0f).size(), 5u);  // 88.8 and up: inf, not x
}

// Issue #22's multi-step case: hard-swish written with the 1/6 on the other
// factor, `(x / 6) * clip(x + 3, 0, 6)` (corpus model
// hardswish_scale_first_op13, two of them). No written rule matches that
// form; a generated rule moving the division (`Mul(M1, Div(M2, s)) =>
// Div(Mul(M1, M2), s)`) makes it the written form at no gain, and only then
// does the fusion into HardSwish pay. Greedy descent never takes the
// neutral step; taso (alpha 1.05) does. Every operator costs 1 and a conv 10
// + 0.1 per kernel element (TableCost), so the decisions are deterministic.
TEST(WrittenRules, AnEnablingRewriteUnlocksTheFusionGreedyMisses) {
  ImportOptions at;
  at.input_shapes = ParseInputShapes("x:1,3,64,64");
  Graph g = ImportOnnxFile(FindRunfile("zoo/real_models/hardswish_scale_first_op13.onnx"), at);
  ASSERT_EQ(g.OpCounts()["HardSwish"], 0);
  // The rules the optimiser uses at opset 14 (HardSwish's), as --target_opset=14 keeps them.
  std::vector<rules::Rule> usable;
  for (const auto& r : testing::DefaultRules().rules())
    if (RuleOpset(r) <= 14) usable.push_back(r);
  Matcher matcher(usable);
  testing::TableCost cost;
  auto run = [&](const std::string& name) {
    SearchOptions o;
    o.matcher = &matcher;
    o.cost = &cost;
    o.budget = 200;
    return MakeSearch(name)->Run(g, o);
  };
  SearchResult greedy = run("greedy");
  SearchResult taso = run("taso");
  EXPECT_EQ(greedy.graph.OpCounts()["HardSwish"], 0) << "greedy found the fusion: the case is not multi-step";
  EXPECT_DOUBLE_EQ(greedy.final_cost, greedy.initial_cost);
  EXPECT_EQ(taso.graph.OpCounts()["HardSwish"], 2);
  // 2 convs (10.9 each) + 2 HardSwish, from 2 convs + 2 x (Div, Add, Clip, Mul).
  EXPECT_DOUBLE_EQ(taso.initial_cost, 2 * 10.9 + 8);
  EXPECT_DOUBLE_EQ(taso.final_cost, 2 * 10.9 + 2);
  std::vector<at::Tensor> inputs = RandomInputs(g, 3);
  std::vector<at::Tensor> want = Executor(g).Run(inputs), got = Executor(taso.graph).Run(inputs);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(RelativeError(got[0], want[0]), 1e-5);
}

// A rule that produces an ONNX Runtime contrib operator is used only when
// optimising for ONNX Runtime: on the post-norm encoder of the corpus, where
// each residual sum feeds a LayerNormalization (8 of them), greedy with a
// table cost (every operator 1, so fusing pays) turns each into one
// com.microsoft.SkipLayerNormalization for --target=ort, and leaves the
// model without any com.microsoft operator for --target=onnx (the default
// with --device=cpu), with the same rules database.
TEST(WrittenRules, ContribOperatorsOnlyForTheTargetThatRunsThem) {
  ImportOptions at;
  at.input_shapes = ParseInputShapes("x:1,64,32");
  Graph g = ImportOnnxFile(FindRunfile("zoo/real_models/post_norm_encoder_op17.onnx"), at);
  ASSERT_EQ(g.OpCounts()["LayerNormalization"], 8);
  std::vector<rules::Rule> all(testing::DefaultRules().rules().begin(), testing::DefaultRules().rules().end());
  testing::TableCost cost;
  std::vector<at::Tensor> inputs = RandomInputs(g, 3);
  std::vector<at::Tensor> want = Executor(g).Run(inputs);
  auto contrib = [](const Graph& graph) {
    int n = 0;
    for (NodeId id = 0; id < graph.num_nodes(); ++id) n += graph.node(id).domain == "com.microsoft";
    return n;
  };
  for (const std::string target : {"ort", "onnx"}) {
    Matcher matcher(all, /*both_directions=*/true, RulesEnabledFor(all, target, 17));
    EXPECT_EQ(matcher.rules().size(), all.size()) << "rules left out keep their numbers";
    SearchOptions o;
    o.matcher = &matcher;
    o.cost = &cost;
    o.budget = 100;
    SearchResult r = MakeSearch("greedy")->Run(g, o);
    if (target == "ort") {
      EXPECT_EQ(r.graph.OpCounts()["com.microsoft.SkipLayerNormalization"], 8);
      EXPECT_EQ(contrib(r.graph), 8);
    } else {
      EXPECT_EQ(contrib(r.graph), 0) << "--target=onnx received a com.microsoft operator";
      for (const Match& m : matcher.FindAll(g))
        EXPECT_TRUE(RuleRunsOn(matcher.rules()[m.rule], "onnx")) << matcher.rules()[m.rule].written_name();
    }
    std::vector<at::Tensor> got = Executor(r.graph).Run(inputs);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(RelativeError(got[0], want[0]), 1e-5) << target;
  }
}

}  // namespace
}  // namespace rlflow

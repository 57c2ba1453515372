// The searches on tiny hand-built graphs whose optimal rewrite sequence is
// known, with a deterministic table cost model (so that results do not
// depend on machine timings): a forced two-step sequence both searches find,
// and a local optimum greedy is trapped in that TASO's backtracking (alpha >
// 1) escapes.
#include "search/search.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/passes/fold_constants.h"
#include "rules/testing.h"
#include "runtime/executor.h"
#include "search/canonical.h"

namespace rlflow {
namespace {

const rules::RuleDatabase& Db() { return testing::DefaultRules(); }
std::vector<rules::Rule> Rules(const std::vector<std::string>& ids) { return testing::RulesById(ids); }

// Conv: 10 + 0.1 per kernel element (a 3x3 conv costs 10.9, a 1x1 10.1);
// every other runtime op 1. Weight-only nodes cost nothing (CostModel).
class TableCost : public CostModel {
 public:
  double bias_ms = 0;  // extra for a Conv with a bias input
  double batchnorm_ms = 0.5;
  OpCost NodeCost(const Graph& g, NodeId id) override {
    OpCost c;
    const Node& n = g.node(id);
    c.ms = n.op == "BatchNormalization" ? batchnorm_ms : 1.0;
    if (n.op == "Conv") {
      const Shape& w = g.value(n.inputs[1]).type.shape;
      c.ms = 10.0 + 0.1 * static_cast<double>(w[2] * w[3]) + (n.inputs.size() > 2 ? bias_ms : 0.0);
    }
    return c;
  }
};

double MaxDiff(const Graph& a, const Graph& b) {
  std::vector<at::Tensor> in = RandomInputs(a, 5);
  std::vector<at::Tensor> x = Executor(a).Run(in), y = Executor(b).Run(in);
  double worst = 0;
  for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, RelativeError(y[k], x[k]));
  return worst;
}

SearchResult RunSearch(const std::string& name, const Graph& g, const Matcher& m, CostModel* cost, double alpha = 1.05,
                       int64_t budget = 100, bool greedy_finish = true) {
  SearchOptions o;
  o.matcher = &m;
  o.cost = cost;
  if (name == "taso") o.params.Set("alpha", std::to_string(alpha));
  o.budget = budget;
  o.greedy_finish = greedy_finish;
  return MakeSearch(name)->Run(g, o);
}

// x -> Conv 1x1 -> *S -> +T  (batch norm in inference form after a conv).
Graph ConvScaleShift(int in_channels = 4) {
  GraphBuilder b(7);
  ValueId x = b.Input("x", {1, in_channels, 6, 6});
  ValueId w = b.Weight("w", {8, in_channels, 1, 1}, 0.5f);
  ValueId s = b.Weight("s", {8, 1, 1}, 0.5f, 1.0f);
  ValueId t = b.Weight("t", {8, 1, 1}, 0.5f);
  ValueId y = b.Op("Conv", {x, w});
  return b.Build({b.Op("Add", {b.Op("Mul", {y, s}), t})});
}

// Two convolutions of the same input, 1x1 and 3x3, both graph outputs.
Graph ParallelConvs() {
  GraphBuilder b(11);
  ValueId x = b.Input("x", {1, 4, 6, 6});
  ValueId w1 = b.Weight("w1", {4, 4, 1, 1}, 0.5f);
  ValueId w3 = b.Weight("w3", {4, 4, 3, 3}, 0.5f);
  ValueId a = b.Op("Conv", {x, w1});
  ValueId c = b.Op("Conv", {x, w3}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  return b.Build({a, c});
}

const char kMulFold1x1[] = "fb7ae47167c7";   // Conv(X, W*S) => S*Conv(X, W), any window attributes
const char kBiasFold1x1[] = "30070f196d5c";  // Conv(X, W, T) => T+Conv(X, W), any window attributes
const char kEnlarge[] = "ef1d9f385d5a";      // Conv[pads=1](X, Pad(W)) => Conv[pads=0](X, W)
const char kMerge[] = "d1b546e55a9f";        // Split(Conv(X, Concat(W2, W1))) => (Conv(X, W1), Conv(X, W2))

TEST(Search, ForcedSequenceFoundByBoth) {
  Graph g = ConvScaleShift();
  Matcher m(Rules({kMulFold1x1, kBiasFold1x1}));
  TableCost cost;
  EXPECT_DOUBLE_EQ(cost.GraphCost(g), 12.1);  // conv + mul + add
  for (const std::string name : {"greedy", "taso"}) {
    SearchResult r = RunSearch(name, g, m, &cost);
    // The shift can only fold after the scale: exactly this order.
    std::vector<std::string> want = {std::string(kMulFold1x1) + " (reversed)",
                                     std::string(kBiasFold1x1) + " (reversed)"};
    EXPECT_EQ(r.applied, want) << name;
    // Real steps: greedy applies what it keeps and nothing else; taso also
    // builds graphs it does not keep.
    if (name == "greedy") {
      EXPECT_EQ(r.real_steps, 2);
    }
    EXPECT_GE(r.real_steps, 2) << name;
    EXPECT_DOUBLE_EQ(r.final_cost, 10.1) << name;
    EXPECT_DOUBLE_EQ(cost.GraphCost(r.graph), r.final_cost) << name;
    Graph folded = r.graph;
    FoldOptions all;
    all.max_elements = 1 << 30;
    InferShapesAndFold(folded, all);
    EXPECT_EQ(folded.num_nodes(), 1) << name;  // one Conv with folded weights and bias
    EXPECT_LT(MaxDiff(g, folded), 1e-5) << name;
  }
}

// A cost that depends on a node's neighbours (ONNX Runtime's fusions): an
// Add reading a Conv's output runs partly inside the Conv's kernel (0.5 for
// 1), and a Mul costs nothing here. Folding the scale into the weights is
// estimated from its own nodes as no gain (11.1 stays 11.1), so it is queued,
// not built at once; built, it costs 10.6 (the Add now next to the Conv).
// TASO requeues it at that cost as the rewrite, builds it again when it
// comes first and goes on from it: the shift folds too (10.1).
TEST(Search, AGraphWhoseEstimateWasOffIsBuiltAgainAndExplored) {
  struct FusingCost : TableCost {
    OpCost NodeCost(const Graph& g, NodeId id) override {
      OpCost c = TableCost::NodeCost(g, id);
      const Node& n = g.node(id);
      const NodeId from = n.inputs.empty() ? kNoNode : g.value(n.inputs[0]).producer;
      if (n.op == "Mul") c.ms = 0;
      if (n.op == "Add" && from != kNoNode && g.node(from).op == "Conv") c.ms = 0.5;
      return c;
    }
  } cost;
  Graph g = ConvScaleShift();
  EXPECT_DOUBLE_EQ(cost.GraphCost(g), 11.1);
  Matcher m(Rules({kMulFold1x1, kBiasFold1x1}));
  SearchResult r = RunSearch("taso", g, m, &cost, 1.05, 100, /*greedy_finish=*/false);
  std::vector<std::string> want = {std::string(kMulFold1x1) + " (reversed)", std::string(kBiasFold1x1) + " (reversed)"};
  EXPECT_EQ(r.applied, want);
  EXPECT_DOUBLE_EQ(r.final_cost, 10.1);
  EXPECT_EQ(r.graphs_explored, 3);  // the original, the scale folded (built twice), both folded
}

// A search that takes the first candidate rewrite and does not ask
// SearchOptions::acceptable (as the learned agents' episodes do not).
class FirstRewriteSearch : public Search {
 public:
  std::string name() const override { return "first_rewrite_test"; }
  std::string description() const override { return "test: the first candidate rewrite"; }
  SearchResult Explore(const Graph& graph, const SearchOptions& o, Runner&) override {
    EngineOptions e;
    e.matcher = o.matcher;
    e.cost = o.cost;
    RewriteEngine engine(e);
    RewriteState start = engine.Start(graph);
    SearchResult r;
    r.graph = graph;
    r.initial_cost = r.final_cost = start.cost();
    std::vector<Candidate> rewrites = start.Candidates();
    std::optional<RewriteState> next = rewrites.empty() ? std::nullopt : start.Apply(rewrites[0]);
    if (next) {
      r.graph = next->graph();
      r.applied = next->Applied();
      r.final_cost = next->cost();
    }
    return r;
  }
};
RLFLOW_REGISTER_SEARCH("first_rewrite_test", FirstRewriteSearch);

// SearchOptions::acceptable: the graphs a search may return. Refusing the
// fully folded graph (10.1), taso and greedy stop at the scale folded
// (11.1), each graph asked about once; refusing every graph but the start,
// they return the start. A search that does not ask gets its result
// replaced by the start graph in Search::Run.
TEST(Search, OnlyAcceptableGraphsAreReturned) {
  Graph g = ConvScaleShift();
  Matcher m(Rules({kMulFold1x1, kBiasFold1x1}));
  TableCost cost;
  for (const std::string name : {"greedy", "taso"}) {
    SCOPED_TRACE(name);
    SearchOptions o;
    o.matcher = &m;
    o.cost = &cost;
    std::map<uint64_t, int> asked;
    o.acceptable = [&](const Graph& x) {
      ++asked[x.StructuralHash()];
      return cost.GraphCost(x) > 10.5;
    };
    SearchResult r = MakeSearch(name)->Run(g, o);
    EXPECT_EQ(r.applied, std::vector<std::string>{std::string(kMulFold1x1) + " (reversed)"});
    EXPECT_DOUBLE_EQ(r.final_cost, 11.1);
    EXPECT_DOUBLE_EQ(cost.GraphCost(r.graph), 11.1);
    EXPECT_GE(r.graphs_refused, 1);
    EXPECT_EQ(r.graphs_judged, static_cast<int64_t>(asked.size()));
    for (const auto& [hash, times] : asked) EXPECT_EQ(times, 1);
    // Unconstrained: both folds.
    o.acceptable = nullptr;
    EXPECT_DOUBLE_EQ(MakeSearch(name)->Run(g, o).final_cost, 10.1);
    o.acceptable = [&](const Graph& x) { return x.StructuralHash() == g.StructuralHash(); };
    SearchResult none = MakeSearch(name)->Run(g, o);
    EXPECT_TRUE(none.applied.empty());
    EXPECT_EQ(none.graph.StructuralHash(), g.StructuralHash());
    EXPECT_GE(none.graphs_refused, 1);
  }
  SearchOptions o;
  o.matcher = &m;
  o.cost = &cost;
  SearchResult taken = MakeSearch("first_rewrite_test")->Run(g, o);
  ASSERT_EQ(taken.applied.size(), 1u);
  EXPECT_NE(taken.graph.StructuralHash(), g.StructuralHash());
  o.acceptable = [&](const Graph& x) { return x.StructuralHash() == g.StructuralHash(); };
  SearchResult replaced = MakeSearch("first_rewrite_test")->Run(g, o);
  EXPECT_TRUE(replaced.applied.empty());
  EXPECT_EQ(replaced.graph.StructuralHash(), g.StructuralHash());
  EXPECT_DOUBLE_EQ(replaced.final_cost, replaced.initial_cost);
  EXPECT_EQ(replaced.graphs_refused, 1);
}

TEST(Search, GreedyTrappedBacktrackingEscapes) {
  Graph g = ParallelConvs();
  Matcher m(Rules({kEnlarge, kMerge, kMulFold1x1}));
  TableCost cost;
  EXPECT_DOUBLE_EQ(cost.GraphCost(g), 21.0);
  // Greedy: enlarging the 1x1 conv costs more (21.8), so it never gets to the merge.
  SearchResult greedy = RunSearch("greedy", g, m, &cost);
  EXPECT_TRUE(greedy.applied.empty());
  EXPECT_DOUBLE_EQ(greedy.final_cost, 21.0);
  // TASO with alpha = 1: no worse graph is kept either.
  SearchResult strict = RunSearch("taso", g, m, &cost, /*alpha=*/1.0);
  EXPECT_DOUBLE_EQ(strict.final_cost, 21.0);
  // TASO with alpha = 1.05 keeps the enlarged graph (21.8 < 1.05 x 21) and merges: one 3x3 conv + Split.
  SearchResult taso = RunSearch("taso", g, m, &cost);
  std::vector<std::string> want = {std::string(kEnlarge) + " (reversed)", std::string(kMerge) + " (reversed)"};
  EXPECT_EQ(taso.applied, want);
  EXPECT_DOUBLE_EQ(taso.final_cost, 11.9);
  EXPECT_LT(MaxDiff(g, taso.graph), 1e-5);
  std::map<std::string, int> ops = taso.graph.OpCounts();
  EXPECT_EQ(ops["Conv"], 1);
  EXPECT_EQ(ops["Split"], 1);
  EXPECT_GE(taso.graphs_explored, 2);
}

// Lowered batch norms are raised back after the search, so the search costs
// an intact Mul/Add pair as one BatchNormalization: folding only pays off if
// the folded form is cheaper than that.
TEST(Search, BatchNormAwareCostKeepsTheBatchNormWhenCheaper) {
  Graph g = ConvScaleShift();
  Matcher m(Rules({kMulFold1x1, kBiasFold1x1}));
  TableCost table;
  BatchNormAwareCost aware(&table);
  EXPECT_DOUBLE_EQ(aware.GraphCost(g), 10.1 + 0.5);  // conv + the pair as one batch norm
  // A conv with bias costs 1 more: conv + BN (10.6) beats conv with bias (11.1).
  table.bias_ms = 1.0;
  SearchResult keep = RunSearch("taso", g, m, &aware);
  EXPECT_TRUE(keep.applied.empty());
  EXPECT_DOUBLE_EQ(keep.final_cost, 10.6);
  // Free bias: folding wins (10.1 < 10.6), but its first step (conv + Add,
  // 11.1) is worse than the batch norm: greedy stays, TASO (11.1 < 1.05 x
  // 10.6) goes through.
  table.bias_ms = 0.0;
  SearchResult greedy = RunSearch("greedy", g, m, &aware);
  EXPECT_TRUE(greedy.applied.empty());
  SearchResult fold = RunSearch("taso", g, m, &aware);
  EXPECT_EQ(fold.applied.size(), 2u);
  EXPECT_DOUBLE_EQ(fold.final_cost, 10.1);
}

// Table costs with noise per op and a scripted A/B outcome.
class NoisyTable : public TableCost {
 public:
  std::map<std::string, double> noise;  // per op, ms
  double outcome = 0;                   // ResolveGain: 1 = faster (estimate), 0 = no difference
  int resolved = 0;
  int before_nodes = -1, after_nodes = -1;
  std::string key;
  double NodeNoiseMs(const Graph& g, NodeId id) override {
    auto it = noise.find(g.node(id).op);
    return it == noise.end() ? 0.0 : it->second;
  }
  double ResolveGain(const Graph& before, const Graph& after, const std::string& k, double estimate) override {
    ++resolved;
    before_nodes = before.num_nodes();
    after_nodes = after.num_nodes();
    key = k;
    return outcome == 1.0 ? estimate : outcome;
  }
};

// The noise rule: a rewrite whose estimated gain (here 1 ms: the Mul goes)
// is within its nodes' noise is applied only if timing the two sides
// against each other confirms it; a key on both sides (the Conv) cancels.
TEST(Search, NoiseRule) {
  Graph g = ConvScaleShift(16);  // a weight > 64 elements: keyed by its type only, whether stored or computed
  Matcher m(Rules({kMulFold1x1}));
  for (const std::string name : {"greedy", "taso"}) {
    NoisyTable quiet;
    EXPECT_EQ(RunSearch(name, g, m, &quiet).applied.size(), 1u) << name;
    EXPECT_EQ(quiet.resolved, 0) << name;
    EXPECT_EQ(RunSearch(name, g, m, &quiet).gains_resolve_s, 0.0) << name;
    // The Conv is very noisy, the Mul is not: the conv's error cancels.
    NoisyTable conv_noise;
    conv_noise.noise = {{"Conv", 5.0}, {"Mul", 0.5}};
    EXPECT_EQ(RunSearch(name, g, m, &conv_noise).applied.size(), 1u) << name;
    EXPECT_EQ(conv_noise.resolved, 0) << name;
    // The Mul's own time is within noise: timed A/B, no difference -> not applied.
    NoisyTable unsure;
    unsure.noise = {{"Mul", 2.0}};
    SearchResult r = RunSearch(name, g, m, &unsure);
    EXPECT_TRUE(r.applied.empty()) << name;
    EXPECT_EQ(unsure.resolved, 1) << name;  // once per kind of rewrite
    EXPECT_EQ(r.gains_resolved, 1) << name;
    EXPECT_EQ(r.gains_confirmed, 0) << name;
    ASSERT_EQ(r.noise_rule.size(), 1u) << name;
    EXPECT_NE(r.noise_rule[0].find("no difference"), std::string::npos) << r.noise_rule[0];
    EXPECT_EQ(unsure.before_nodes, 2) << name;  // Conv + Mul
    EXPECT_EQ(unsure.after_nodes, 1) << name;   // Conv (the weight scaling folded away, as on export)
    EXPECT_EQ(unsure.key.rfind(kMulFold1x1, 0), 0u) << unsure.key;
    // ... confirmed faster -> applied, at the estimated cost.
    NoisyTable confirmed;
    confirmed.noise = {{"Mul", 2.0}};
    confirmed.outcome = 1.0;
    SearchResult c = RunSearch(name, g, m, &confirmed);
    EXPECT_EQ(c.applied.size(), 1u) << name;
    EXPECT_EQ(c.gains_confirmed, 1) << name;
    EXPECT_DOUBLE_EQ(c.final_cost, 11.1) << name;
  }
}

// A kernel that runs long contractions slowly (MatMul: K^2 / 4 ms for a
// contraction of K), and no timing noise.
class SlowLongContractions : public NoisyTable {
 public:
  OpCost NodeCost(const Graph& g, NodeId id) override {
    OpCost c = NoisyTable::NodeCost(g, id);
    if (g.node(id).op == "MatMul") {
      const Shape& a = g.value(g.node(id).inputs[0]).type.shape;
      c.ms = static_cast<double>(a.back() * a.back()) / 4.0;
    }
    return c;
  }
};

const char kHalves[] = "51d7e94a6f7f";  // MatMul(X[b,m,2h], W[2h,n]) => the contraction in halves, summed

// A replacement that runs more kernels to do no less work (a contraction in
// halves) is taken only where the two sides timed against each other say
// it is faster, however far above the noise its estimated gain is (here
// 16 ms -> 1 + 4 + 4 + 1 ms, no noise; four Relus of 1 ms before).
TEST(Search, MoreKernelsForTheSameWorkAreTimedAB) {
  GraphBuilder b(3);
  ValueId x = b.Input("x", {1, 4, 8});
  for (int k = 0; k < 4; ++k) x = b.Op("Relu", {x});  // room for the search's node limit (2 x the original's)
  ValueId w = b.Weight("w", {8, 3}, 0.5f);
  Graph g = b.Build({b.Op("MatMul", {x, w})});
  Matcher m(Rules({kHalves}));
  for (const std::string name : {"greedy", "taso"}) {
    SlowLongContractions same;  // A/B: no difference
    SearchResult r = RunSearch(name, g, m, &same);
    EXPECT_TRUE(r.applied.empty()) << name;
    EXPECT_DOUBLE_EQ(r.final_cost, 4.0 + 16.0) << name;
    EXPECT_EQ(same.resolved, 1) << name;
    EXPECT_GT(r.gains_resolve_s, 0.0) << name;  // the time the A/B took (building and folding both sides here)
    ASSERT_EQ(r.noise_rule.size(), 1u) << name;
    EXPECT_NE(r.noise_rule[0].find("more kernels"), std::string::npos) << r.noise_rule[0];
    EXPECT_EQ(same.before_nodes, 1) << name;  // the MatMul
    EXPECT_EQ(same.after_nodes, 4) << name;   // Split of x, two MatMuls, Add (W's halves folded)
    SlowLongContractions faster;
    faster.outcome = 1.0;
    SearchResult f = RunSearch(name, g, m, &faster);
    ASSERT_EQ(f.applied.size(), 1u) << name;  // the halves of 4 cost as much as one of 4: not split again
    EXPECT_EQ(f.applied[0], kHalves) << name;
    EXPECT_DOUBLE_EQ(f.final_cost, 4.0 + 10.0) << name;
    EXPECT_LT(MaxDiff(g, f.graph), 1e-5) << name;
  }
  // Searches of one graph one after another (the optimiser's rounds) that
  // share their outcomes time each kind of rewrite once: the second neither
  // times nor lists it again, and decides by the first's outcome.
  std::unordered_map<uint64_t, double> shared;
  SlowLongContractions faster;
  faster.outcome = 1.0;
  SearchOptions o;
  o.matcher = &m;
  o.cost = &faster;
  o.noise_outcomes = &shared;
  SearchResult first = MakeSearch("greedy")->Run(g, o);
  EXPECT_EQ(first.noise_rule.size(), 1u);
  EXPECT_EQ(shared.size(), 1u);
  faster.outcome = 0.0;  // would be "no difference" if timed again
  SearchResult second = MakeSearch("greedy")->Run(g, o);
  EXPECT_EQ(faster.resolved, 1);
  EXPECT_EQ(second.gains_resolved, 0);
  EXPECT_TRUE(second.noise_rule.empty());
  EXPECT_EQ(second.applied, first.applied);
}

TEST(Search, BudgetAndDeterminism) {
  Graph g = ParallelConvs();
  Matcher m(RuleList(Db()));
  TableCost cost;
  SearchResult zero = RunSearch("taso", g, m, &cost, 1.05, /*budget=*/0, /*greedy_finish=*/false);
  EXPECT_EQ(zero.graphs_explored, 0);
  EXPECT_EQ(zero.stop_reason, StopReason::kBudget);
  EXPECT_EQ(zero.graph.StructuralHash(), g.StructuralHash());
  // With the greedy finish a spent budget still ends at a local optimum:
  // budget 0 is greedy descent, step for step.
  Graph bn = ConvScaleShift();
  SearchResult finished = RunSearch("taso", bn, m, &cost, 1.05, /*budget=*/0);
  SearchResult descent = RunSearch("greedy", bn, m, &cost);
  EXPECT_EQ(finished.stop_reason, StopReason::kBudget);
  EXPECT_FALSE(descent.applied.empty());
  EXPECT_EQ(finished.applied, descent.applied);
  EXPECT_EQ(finished.finish_applied, static_cast<int64_t>(descent.applied.size()));
  EXPECT_DOUBLE_EQ(finished.final_cost, descent.final_cost);
  EXPECT_LT(MaxDiff(bn, finished.graph), 1e-5);
  // The finish of the agents' searches (GreedyFinish) adds its work to the
  // search's: every counter, on top of what the search had counted.
  SearchResult before;
  before.graph = bn;
  before.initial_cost = before.final_cost = cost.GraphCost(bn);
  before.graphs_explored = before.rewrites_costed = before.graphs_built = before.rewrites_rejected = before.real_steps =
      100;
  SearchOptions fo;
  fo.matcher = &m;
  fo.cost = &cost;
  GreedyFinish(&before, fo);
  EXPECT_EQ(before.applied, descent.applied);
  EXPECT_GT(descent.graphs_built, 0);
  EXPECT_EQ(before.graphs_explored, 100 + descent.graphs_explored);
  EXPECT_EQ(before.rewrites_costed, 100 + descent.rewrites_costed);
  EXPECT_EQ(before.graphs_built, 100 + descent.graphs_built);
  EXPECT_EQ(before.rewrites_rejected, 100 + descent.rewrites_rejected);
  EXPECT_EQ(before.real_steps, 100 + descent.real_steps);
  SearchResult a = RunSearch("taso", g, m, &cost, 1.05, 30);
  SearchResult b = RunSearch("taso", g, m, &cost, 1.05, 30);
  EXPECT_EQ(a.applied, b.applied);
  EXPECT_EQ(a.graph.StructuralHash(), b.graph.StructuralHash());
  EXPECT_LE(a.graphs_explored, 30);
  // With the whole database the result is at least as good as the two-rule search.
  EXPECT_LE(a.final_cost, 11.9 + 1e-9);
  EXPECT_LT(MaxDiff(g, a.graph), 1e-5);
  SearchResult greedy = RunSearch("greedy", g, m, &cost);
  EXPECT_LE(a.final_cost, greedy.final_cost + 1e-9);
}

TEST(Search, BadOptionsAndNames) {
  Graph g = ParallelConvs();
  Matcher m(Rules({kEnlarge}));
  TableCost cost;
  EXPECT_THROW(RunSearch("taso", g, m, &cost, 0.9), Error);
  EXPECT_THROW(RunSearch("taso", g, m, &cost, 1.05, -1), Error);
  SearchOptions no_cost;
  no_cost.matcher = &m;
  EXPECT_THROW(MakeSearch("greedy")->Run(g, no_cost), Error);
  EXPECT_THROW(MakeSearch("magic"), Error);
  std::vector<std::string> names = SearchNames();
  for (const char* n : {"greedy", "none", "taso"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

}  // namespace
}  // namespace rlflow

namespace rlflow {
namespace {

Graph ReluChain(int n) {
  GraphBuilder b(1);
  ValueId v = b.Input("x", {1, 16});
  for (int k = 0; k < n; ++k) v = b.Op("Relu", {v});
  return b.Build({v});
}

// A step with thousands of rewrites (a chain of 300 Relus) stops when
// interrupted in the middle of the step, not only between steps.
TEST(Search, InterruptedInsideAStep) {
  Graph g = ReluChain(300);
  Matcher m(RuleList(Db()));
  for (const std::string name : {"taso", "greedy"}) {
    TableCost cost;
    std::atomic<bool> stop{false};
    int progress_lines = 0;
    RunnerLimits limits;
    limits.interrupted = &stop;
    // The first progress line (reported from inside the first step) interrupts.
    Runner runner(
        limits,
        [&](const std::string&) {
          ++progress_lines;
          stop = true;
        },
        /*progress_interval_s=*/0);
    SearchOptions o;
    o.matcher = &m;
    o.cost = &cost;
    o.runner = &runner;
    SearchResult r = MakeSearch(name)->Run(g, o);
    EXPECT_EQ(r.stop_reason, StopReason::kInterrupted) << name;
    EXPECT_LE(r.graphs_explored, 1) << name;
    EXPECT_GE(progress_lines, 1) << name;
    EXPECT_LE(MaxDiff(g, r.graph), 1e-6) << name;
  }
}

// A step whose rewrites are slow to cost (each new key timed: a second
// apiece at batch 16) answers an interrupt within an estimate or two, not
// at the next 256th: the clock is polled too.
TEST(Search, ASlowStepAnswersAnInterruptAtOnce) {
  class SlowCost : public TableCost {
   public:
    std::atomic<bool>* stop = nullptr;
    int calls = 0;
    OpCost NodeCost(const Graph& g, NodeId id) override {
      // Well into the first step's costing (the first graph's own 300
      // nodes are costed before it, then one call per rewrite): one slow
      // estimate, and Ctrl-C during it.
      if (++calls == 340) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        *stop = true;
      }
      return TableCost::NodeCost(g, id);
    }
  };
  Graph g = ReluChain(300);
  Matcher m(RuleList(Db()));
  for (const std::string name : {"taso", "greedy"}) {
    std::atomic<bool> stop{false};
    SlowCost cost;
    cost.stop = &stop;
    RunnerLimits limits;
    limits.interrupted = &stop;
    Runner runner(limits);
    SearchOptions o;
    o.matcher = &m;
    o.cost = &cost;
    o.runner = &runner;
    SearchResult r = MakeSearch(name)->Run(g, o);
    ASSERT_GE(cost.calls, 340) << name;
    EXPECT_EQ(r.stop_reason, StopReason::kInterrupted) << name;
    // About 40 rewrites costed when the interrupt came; polled every 256
    // rewrites alone, the step went on to the 256th.
    EXPECT_LE(r.rewrites_costed, 50) << name;
    EXPECT_LE(MaxDiff(g, r.graph), 1e-6) << name;
  }
}

// The progress a user sees is the search's: a step whose costing is quick
// (300 rewrites of a Relu chain) does not report its own line, which had
// taken the search's place in every interval.
TEST(Search, ProgressLinesAreTheSearchsUnlessAStepIsLong) {
  Graph g = ReluChain(300);
  Matcher m(RuleList(Db()));
  TableCost cost;
  std::vector<std::string> lines;
  // The first line is shown; later ones only 1000 s after it.
  Runner runner(
      RunnerLimits{}, [&](const std::string& line) { lines.push_back(line); },
      /*progress_interval_s=*/1000);
  SearchOptions o;
  o.matcher = &m;
  o.cost = &cost;
  o.runner = &runner;
  o.budget = 3;
  MakeSearch("taso")->Run(g, o);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("graphs explored"), std::string::npos) << lines[0];
  for (const std::string& line : lines) EXPECT_EQ(line.find("costing rewrites"), std::string::npos) << line;
}

TEST(SearchParams, EachSearchDeclaresAndChecksItsOwn) {
  Matcher m(RuleList(Db()));
  TableCost cost;
  SearchOptions o;
  o.matcher = &m;
  o.cost = &cost;
  // Declared defaults are filled in.
  SearchOptions taso = MakeSearch("taso")->Resolve(o);
  EXPECT_EQ(taso.params.Text("alpha"), "1.05");
  EXPECT_DOUBLE_EQ(taso.params.Double("alpha", 1.0), 1.05);
  // A setting the search does not declare is refused, naming what it has.
  o.params.Set("episodes", "3");
  try {
    MakeSearch("taso")->Resolve(o);
    ADD_FAILURE() << "taso accepted --episodes";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--search=taso has no setting 'episodes' (its settings: alpha)");
  }
  // Values are checked by the search that owns them.
  o.params = SearchParams();
  o.params.Set("alpha", "0.5");
  EXPECT_THROW(MakeSearch("taso")->Resolve(o), Error);
  o.params.Set("alpha", "1.2x");
  EXPECT_THROW(MakeSearch("taso")->Resolve(o), Error);
  o.params.Set("alpha", "1.2");
  EXPECT_DOUBLE_EQ(MakeSearch("taso")->Resolve(o).params.Double("alpha", 1.0), 1.2);
  // Options resolved by one search are that search's: another search's Run
  // checks them again (and refuses taso's alpha).
  SearchOptions resolved = MakeSearch("taso")->Resolve(o);
  EXPECT_EQ(resolved.resolved_by, "taso");
  EXPECT_THROW(MakeSearch("greedy")->Run(Graph(), resolved), Error);
  // Every search describes itself and its settings.
  const std::string all = DescribeSearches();
  for (const std::string& name : SearchNames()) {
    EXPECT_NE(all.find(name + ": "), std::string::npos) << name;
    EXPECT_FALSE(MakeSearch(name)->description().empty()) << name;
  }
  EXPECT_NE(all.find("    alpha (default '1.05')"), std::string::npos) << all;
}

TEST(SearchParams, ParsesTheFlag) {
  SearchParams p = ParseSearchParams(" alpha=1.1 ; passes=dce,cse");
  EXPECT_EQ(p.Text("alpha"), "1.1");
  EXPECT_EQ(p.List("passes"), (std::vector<std::string>{"dce", "cse"}));
  EXPECT_THROW(p.Int("alpha", 0), Error);  // 1.1 is not an integer
  EXPECT_THROW(p.Text("horizon"), Error);  // not set
  EXPECT_THROW(ParseSearchParams("a=1;a=2"), Error);
  EXPECT_THROW(ParseSearchParams("alpha"), Error);
  EXPECT_TRUE(ParseSearchParams("").values().empty());
}

}  // namespace
}  // namespace rlflow

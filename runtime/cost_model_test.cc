// The cost model: cache keys, weight-only nodes, the timing cache file,
// measurement reuse and the end-to-end interleaved timing.
#include "runtime/cost_model.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/graph_builder.h"
#include "core/node_key.h"
#include "runtime/stats.h"

namespace rlflow {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

// x -> Conv(w) -> Relu; x -> Conv(w2) -> + (bias * s), bias * s weight-only.
Graph Small(int channels = 8) {
  GraphBuilder b(3);
  ValueId x = b.Input("x", {1, 4, 16, 16});
  ValueId w = b.Weight("w", {channels, 4, 3, 3}, 0.1f);
  ValueId w2 = b.Weight("w2", {channels, 4, 3, 3}, 0.1f);
  ValueId bias = b.Weight("bias", {channels, 1, 1}, 0.1f);
  ValueId s = b.Weight("s", {channels, 1, 1}, 0.1f, 1.0f);
  ValueId scaled = b.Op("Mul", {bias, s});  // weight-only
  ValueId a = b.Op("Relu", {b.Op("Conv", {x, w}, {{"pads", Attribute::Ints({1, 1, 1, 1})}})});
  ValueId c = b.Op("Conv", {x, w2}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  return b.Build({a, b.Op("Add", {c, scaled})});
}

NodeId Find(const Graph& g, const std::string& op, int nth = 0) {
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (g.node(id).op == op && nth-- == 0) return id;
  ADD_FAILURE() << op << " not found";
  return 0;
}

TEST(TimingBackends, RegisteredByName) {
  // This test links the CPU backend only (--device=cuda is runtime/cuda's).
  EXPECT_EQ(TimingBackendNames(), (std::vector<std::string>{"cpu"}));
  EXPECT_EQ(MakeTimingBackend("cpu")->name(), "cpu");
  EXPECT_EQ(FindTimingBackend("cpu").target, "onnx");
  EXPECT_FALSE(FindTimingBackend("cpu").newest_opset);
  try {
    MakeTimingBackend("tpu");
    ADD_FAILURE() << "unknown device accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown device 'tpu' (available: cpu)");
  }
  try {
    MakeTimingBackend("cpu", BackendOptions{1, {{"ort_level", "all"}}});
    ADD_FAILURE() << "a setting the backend does not declare was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--ort_level does not apply to --device=cpu");
  }
  EXPECT_THROW(MakeTimingBackend("cuda"), Error);
  EXPECT_NE(DescribeTimingBackends().find("cpu: "), std::string::npos);
}

TEST(CostModel, KeysDependOnOpAttributesAndShapesOnly) {
  Graph g = Small();
  NodeId c0 = Find(g, "Conv", 0), c1 = Find(g, "Conv", 1);
  // Same op, attributes and input types (different weights): same key.
  EXPECT_EQ(NodeKeyText(g, c0), NodeKeyText(g, c1));
  EXPECT_EQ(NodeKeyHash(g, c0), NodeKeyHash(g, c1));
  Graph wider = Small(16);
  EXPECT_NE(NodeKeyText(g, c0), NodeKeyText(wider, Find(wider, "Conv")));
  EXPECT_NE(NodeKeyHash(g, c0), NodeKeyHash(wider, Find(wider, "Conv")));
  Graph other = g;
  other.mutable_node(c0).attrs["strides"] = Attribute::Ints({2, 2});
  EXPECT_NE(NodeKeyText(g, c0), NodeKeyText(other, c0));
  EXPECT_NE(NodeKeyHash(g, c0), NodeKeyHash(other, c0));
}

// One conv built three ways (only pads; every attribute explicit; auto_pad):
// one key, and the cost model times it once.
TEST(CostModel, KeysUseEffectiveAttributes) {
  GraphBuilder b(3);
  ValueId x = b.Input("x", {1, 4, 16, 16});
  ValueId w = b.Weight("w", {8, 4, 3, 3}, 0.1f);
  ValueId c1 = b.Op("Conv", {x, w}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  ValueId c2 = b.Op("Conv", {x, w},
                    {{"pads", Attribute::Ints({1, 1, 1, 1})},
                     {"strides", Attribute::Ints({1, 1})},
                     {"dilations", Attribute::Ints({1, 1})},
                     {"kernel_shape", Attribute::Ints({3, 3})},
                     {"group", Attribute::Int(1)},
                     {"auto_pad", Attribute::String("NOTSET")}});
  ValueId c3 = b.Op("Conv", {x, w}, {{"auto_pad", Attribute::String("SAME_UPPER")}});
  ValueId other = b.Op("Conv", {x, w}, {{"pads", Attribute::Ints({1, 1, 1, 1})}, {"strides", Attribute::Ints({2, 2})}});
  Graph g = b.Build({c1, c2, c3, other});
  NodeId n1 = Find(g, "Conv", 0), n2 = Find(g, "Conv", 1), n3 = Find(g, "Conv", 2), n4 = Find(g, "Conv", 3);
  EXPECT_EQ(NodeKeyText(g, n1), NodeKeyText(g, n2));
  EXPECT_EQ(NodeKeyText(g, n1), NodeKeyText(g, n3));
  EXPECT_NE(NodeKeyText(g, n1), NodeKeyText(g, n4));
  auto backend = MakeTimingBackend("cpu");
  TimingOptions fast;
  fast.samples = 3;
  fast.min_sample_ms = 0.05;
  MeasuredCostModel model(backend.get(), fast);
  double t1 = model.NodeMs(g, n1), t2 = model.NodeMs(g, n2), t3 = model.NodeMs(g, n3);
  EXPECT_EQ(model.measurements(), 1);
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(t1, t3);
}

// The executor's TimeGraph samples, each a run's time, as many as asked
// for (their median is TimeGraph's result; DriftRatio reads their order).
TEST(CostModel, TimeGraphRunsAreItsSamples) {
  auto backend = MakeTimingBackend("cpu");
  TimingOptions o;
  o.min_sample_ms = 0.05;
  for (int samples : {1, 5}) {
    o.samples = samples;
    std::vector<double> runs = backend->TimeGraphRuns(Small(), o);
    ASSERT_EQ(runs.size(), static_cast<size_t>(samples));
    for (double ms : runs) {
      EXPECT_GT(ms, 0.0);
      EXPECT_LT(ms, 1000.0);
    }
  }
}

TEST(CostModel, WeightOnlyNodesCostNothing) {
  Graph g = Small();
  std::vector<char> wo = WeightOnlyNodes(g);
  EXPECT_TRUE(wo[Find(g, "Mul")]);
  EXPECT_FALSE(wo[Find(g, "Conv")]);
  EXPECT_FALSE(wo[Find(g, "Relu")]);
  AnalyticalCostModel model;
  double total = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (!wo[id]) total += model.NodeCost(g, id).ms;
  EXPECT_DOUBLE_EQ(model.GraphCost(g), total);
  EXPECT_GT(model.NodeCost(g, Find(g, "Mul")).ms, 0);  // as a node it has a cost; in the graph it is folded
  // FLOPs: 2 * 8 * 4 * 3 * 3 * 16 * 16 multiply-adds for each conv.
  EXPECT_NEAR(model.NodeCost(g, Find(g, "Conv")).flops, 2.0 * 8 * 4 * 9 * 256, 8 * 256 + 1);
  EXPECT_DOUBLE_EQ(model.NodeCost(g, Find(g, "Relu")).bytes, 2.0 * 8 * 256 * 4);
}

TEST(CostModel, MeasuresOncePerKeyAndPersists) {
  auto backend = MakeTimingBackend("cpu");
  TimingOptions fast;
  fast.samples = 3;
  fast.min_sample_ms = 0.05;
  MeasuredCostModel model(backend.get(), fast);
  Graph g = Small();
  double total = model.GraphCost(g);
  EXPECT_GT(total, 0);
  // Conv x2 share a key; Relu and Add are timed; the weight-only Mul is not.
  EXPECT_EQ(model.measurements(), 3);
  double again = model.GraphCost(g);
  EXPECT_EQ(again, total);
  EXPECT_EQ(model.measurements(), 3);
  EXPECT_GT(model.hits(), 0);

  std::string path = TempDir() + "/timing_cache.txt";
  model.SaveCache(path);
  MeasuredCostModel reloaded(backend.get(), fast);
  reloaded.LoadCache(path);
  EXPECT_EQ(reloaded.cache_size(), model.cache_size());
  EXPECT_EQ(reloaded.GraphCost(g), total);
  EXPECT_EQ(reloaded.measurements(), 0);  // everything from the file

  // A missing or empty file is an empty cache; malformed ones are errors
  // naming the file.
  MeasuredCostModel fresh(backend.get(), fast);
  fresh.LoadCache(TempDir() + "/does_not_exist.txt");
  EXPECT_EQ(fresh.cache_size(), 0u);
  std::ofstream(path) << "rlflow-timing-cache 1\n1.5\n";
  try {
    fresh.LoadCache(path);
    ADD_FAILURE() << "no error for a malformed cache";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timing_cache.txt line 2 is malformed"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "";
  fresh.LoadCache(path);
  EXPECT_EQ(fresh.cache_size(), 0u);
  std::ofstream(path) << "\n";
  EXPECT_THROW(fresh.LoadCache(path), Error);  // a first line that is not the magic
}

// Nodes reading a value whose length the values set (detection
// post-processing: NonZero's indices, sliced) are costed: timed alone with
// that length 1 (the run had stopped with "graph input ... has no static
// shape"), and a node that cannot run so costs only the overhead.
TEST(CostModel, NodesOfValueDependentLengthsAreCosted) {
  auto backend = MakeTimingBackend("cpu");
  TimingOptions fast;
  fast.samples = 3;
  fast.min_sample_ms = 0.05;
  MeasuredCostModel model(backend.get(), fast);
  GraphBuilder b(1);
  ValueId idx = b.Op("NonZero", {b.Op("Relu", {b.Input("x", {4, 6})})});
  ValueId first = b.Op("Slice", {idx, b.ConstInts({0}), b.ConstInts({5}), b.ConstInts({1})});
  ValueId as_float = b.Op("Cast", {first}, AttributeMap{{"to", Attribute::Int(1)}});
  ValueId fixed = b.Op("Reshape", {first, b.ConstInts({10})});  // cannot run at length 1
  Graph g = b.Build({as_float, fixed});
  EXPECT_EQ(g.value(first).type.shape, (Shape{2, kUnknownDim}));
  for (ValueId v : {as_float, fixed}) EXPECT_GE(model.NodeCost(g, g.value(v).producer).ms, 0.0);
  EXPECT_GT(model.measurements(), 0);
}

TEST(CostModel, PairedTimingAndBackends) {
  auto backend = MakeTimingBackend("cpu");
  EXPECT_EQ(backend->name(), "cpu");
  EXPECT_NE(backend->fingerprint().find("cpu/t"), std::string::npos);
  Graph small = Small(4), big = Small(64);
  TimingOptions o;
  PairedTimes t = backend->TimePaired(small, big, 6, o);
  ASSERT_EQ(t.wall_a.size(), 6u);
  ASSERT_EQ(t.wall_b.size(), 6u);
  ASSERT_EQ(t.cpu_a.size(), 6u);
  ASSERT_EQ(t.cpu_b.size(), 6u);
  EXPECT_FALSE(t.cpu_clock.empty());
  for (int i = 0; i < 6; ++i) {
    EXPECT_GT(t.wall_a[i], 0);
    EXPECT_GT(t.cpu_b[i], 0);
  }
  EXPECT_GT(Median(t.wall_b), Median(t.wall_a));  // 16x the conv work
  EXPECT_GT(Median(t.cpu_b), Median(t.cpu_a));
  InContextTimes c = backend->TimeNodesInContext(big, 3, o);
  ASSERT_EQ(c.node_ms.size(), static_cast<size_t>(big.num_nodes()));
  EXPECT_GT(c.node_ms[Find(big, "Conv")], c.node_ms[Find(big, "Relu")]);
  EXPECT_GT(c.run_ms, c.node_ms[Find(big, "Conv")]);
  EXPECT_THROW(MakeTimingBackend("tpu"), Error);
  EXPECT_THROW(MakeTimingBackend("cuda"), Error);  // not linked into this test
}

// Node medians are scaled so that they add up to the median run's node
// total: skewed nodes (each slow in a different run) would otherwise add up
// to less than a run. Hand-computed: nodes A (1, 1, 1, 4), B (2, 2, 5, 2);
// per-run totals 3, 3, 6, 6: median 4.5; medians 1 and 2: scale 1.5.
TEST(CostModel, InContextNodeTimesAddUpToAMedianRun) {
  InContextTimes t = SummariseInContext({{1, 1, 1, 4}, {2, 2, 5, 2}, {0, 0, 0, 0}}, {3.5, 3.5, 6.5, 6.5});
  EXPECT_EQ(t.runs, 4);
  EXPECT_DOUBLE_EQ(t.run_ms, 5.0);
  ASSERT_EQ(t.node_ms.size(), 3u);
  EXPECT_DOUBLE_EQ(t.node_ms[0], 1.5);
  EXPECT_DOUBLE_EQ(t.node_ms[1], 3.0);
  EXPECT_DOUBLE_EQ(t.node_ms[2], 0.0);
  EXPECT_DOUBLE_EQ(t.node_spread[2], 0.0);
  EXPECT_GT(t.node_spread[0], 0.0);
  // Unskewed samples are left as they are.
  InContextTimes u = SummariseInContext({{1, 1, 1}, {2, 2, 2}}, {3.1, 3.2, 3.3});
  EXPECT_DOUBLE_EQ(u.node_ms[0], 1.0);
  EXPECT_DOUBLE_EQ(u.node_ms[1], 2.0);
  EXPECT_DOUBLE_EQ(u.run_ms, 3.2);
  EXPECT_DOUBLE_EQ(u.node_spread[1], 0.0);
  InContextTimes none = SummariseInContext({}, {});
  EXPECT_EQ(none.runs, 0);
  EXPECT_TRUE(none.node_ms.empty());
}

// A node alone keeps its weights as initializers, and so are the weights
// computed from weights (the scaled bias, Mul(bias, s): folded before the
// graph is written, and ONNX Runtime prepacks a MatMul's weight only where
// it is an initializer), zeros of their shape.
TEST(CostModel, ExtractNodeKeepsConstantInputs) {
  Graph g = Small();
  Graph single = ExtractNode(g, Find(g, "Add"));
  EXPECT_EQ(single.num_nodes(), 1);
  ASSERT_EQ(single.inputs().size(), 1u);  // the conv output
  EXPECT_EQ(single.value(single.inputs()[0]).name, g.value(g.node(Find(g, "Conv", 1)).outputs[0]).name);
  ASSERT_EQ(single.initializers().size(), 1u);  // the (computed) scaled bias
  const TensorData& scaled = *single.value(single.initializers()[0]).initializer;
  EXPECT_EQ(scaled.shape(), (Shape{8, 1, 1}));
  for (double v : scaled.ToDouble()) EXPECT_EQ(v, 0.0);
  EXPECT_NE(NodeKeyText(g, Find(g, "Add")).find("float32[8,1,1]"), std::string::npos);
  Graph conv0 = ExtractNode(g, Find(g, "Conv", 0));
  EXPECT_EQ(conv0.inputs().size(), 1u);  // x; the weight stays an initializer
  EXPECT_EQ(conv0.initializers().size(), 1u);
}

// A backend with scripted times: isolated time per op type, in-context time
// per op type (a different ratio for each), whole run = nodes + 1 ms per node.
class ScriptedBackend : public TimingBackend {
 public:
  std::map<std::string, double> isolated = {{"Conv", 2.0}, {"Relu", 0.1}, {"Add", 0.1}, {"Mul", 0.1}, {"Sigmoid", 0.3}};
  std::map<std::string, double> in_context = {{"Conv", 1.8}, {"Relu", 0.3}, {"Add", 0.2}, {"Mul", 0.4}};
  int context_runs = 0, graphs_timed = 0;
  double fixed_ms = 0;  // added to every whole run, reported as its cost per run
  bool folds = true;    // folds_constants(): weight-only nodes never run
  bool fuses = false;   // fuses_nodes()
  std::string name() const override { return "scripted"; }
  bool folds_constants() const override { return folds; }
  bool fuses_nodes() const override { return fuses; }
  std::string fingerprint() const override { return "scripted"; }
  // A node's time alone, in context, and what a whole run adds per node.
  virtual double Isolated(const Graph& g, NodeId id) { return isolated.at(g.node(id).op); }
  virtual double InContext(const Graph& g, NodeId id) { return in_context.at(g.node(id).op); }
  virtual double RunMsPerNode() { return 1.0; }
  double last_max_total_ms = -1;  // TimeGraph's last options.max_total_ms
  double TimeGraph(const Graph& g, const TimingOptions& o) override {
    ++graphs_timed;
    last_max_total_ms = o.max_total_ms;
    double ms = 0;
    for (NodeId id = 0; id < g.num_nodes(); ++id) ms += Isolated(g, id);
    return ms;
  }
  double pair_ratio = 1.0;  // TimePaired: a's time / b's time
  int pairs_timed = 0, last_pairs = 0;
  PairedTimes TimePaired(const Graph&, const Graph&, int pairs, const TimingOptions&) override {
    ++pairs_timed;
    last_pairs = pairs;
    PairedTimes t;
    for (int i = 0; i < pairs; ++i) {
      double jitter = 1.0 + 0.01 * ((i * 7) % 5 - 2);
      t.wall_a.push_back(pair_ratio * jitter);
      t.wall_b.push_back(1.0);
    }
    t.cpu_a = t.wall_a;
    t.cpu_b = t.wall_b;
    return t;
  }
  InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions&) override {
    ++context_runs;
    InContextTimes t;
    t.runs = runs;
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
      t.node_ms.push_back(InContext(g, id));
      t.node_spread.push_back(0.02);
      t.run_ms += t.node_ms.back() + RunMsPerNode();
    }
    t.run_ms += fixed_ms;
    t.fixed_ms = fixed_ms;
    return t;
  }
};

// In-context times replace isolated ones for calibrated keys; other keys get
// their op type's in-context/isolated ratio; the per-node overhead is the
// run's time beyond its nodes'; first measurements win, so a warm cache
// costs identically without running anything.
TEST(CostModel, CalibrationUsesInContextTimesRatiosAndOverhead) {
  ScriptedBackend backend;
  MeasuredCostModel model(&backend);
  Graph g = Small();                                            // Conv, Relu, Conv, Mul (weight-only), Add
  EXPECT_DOUBLE_EQ(model.GraphCost(g), 2.0 + 0.1 + 2.0 + 0.1);  // isolated only
  CalibrationReport r = model.Calibrate(g);
  EXPECT_EQ(backend.context_runs, 1);
  EXPECT_EQ(r.nodes, 4);  // the weight-only Mul does not run after folding
  EXPECT_EQ(r.keys, 3);
  EXPECT_EQ(r.new_keys, 3);
  EXPECT_DOUBLE_EQ(r.overhead_ms, 1.0);  // 5 nodes ran, 1 ms each beyond their kernels
  EXPECT_DOUBLE_EQ(r.per_op.at("Conv").ms, 3.6);
  EXPECT_DOUBLE_EQ(r.per_op.at("Conv").factor, 0.9);
  EXPECT_DOUBLE_EQ(r.per_op.at("Relu").factor, 3.0);
  EXPECT_DOUBLE_EQ(r.per_op.at("Relu").spread, 0.02);
  EXPECT_DOUBLE_EQ(model.NodeSpread(g, Find(g, "Relu")), 0.02);
  EXPECT_DOUBLE_EQ(model.GraphCost(g), 1.8 + 0.3 + 1.8 + 0.2 + 4 * 1.0);
  // A key never seen in context: isolated x its op's ratio (+ overhead) ...
  Graph wide = Small(16);
  EXPECT_DOUBLE_EQ(model.NodeMs(wide, Find(wide, "Relu")), 0.1 * 3.0 + 1.0);
  // ... or x the median ratio of all keys for an op never calibrated (0.9, 2.0, 3.0).
  GraphBuilder b(1);
  ValueId x = b.Input("x", {1, 4, 16, 16});
  Graph sig = b.Build({b.Op("Sigmoid", {x})});
  EXPECT_DOUBLE_EQ(model.NodeMs(sig, 0), 0.3 * 2.0 + 1.0);

  // Persisted and reused: a second model with the cache runs nothing and costs the same.
  std::string path = TempDir() + "/calibrated_cache.txt";
  model.SaveCache(path);
  ScriptedBackend other;
  other.in_context["Conv"] = 5.0;  // a later measurement would differ
  MeasuredCostModel warm(&other);
  warm.LoadCache(path);
  CalibrationReport again = warm.Calibrate(g);
  EXPECT_EQ(other.context_runs, 0);
  EXPECT_EQ(other.graphs_timed, 0);
  EXPECT_EQ(again.new_keys, 0);
  EXPECT_DOUBLE_EQ(warm.GraphCost(g), model.GraphCost(g));
  EXPECT_DOUBLE_EQ(warm.NodeMs(wide, Find(wide, "Relu")), model.NodeMs(wide, Find(wide, "Relu")));

  // Asked for the time base of its cached timings, a warm model runs the
  // graph (here on a machine twice as fast as when they were timed) and
  // says so; nothing cached changes, so the costs stay the cache's.
  ScriptedBackend fast;
  for (auto& [op, ms] : fast.in_context) ms *= 0.5;
  MeasuredCostModel based(&fast);
  based.LoadCache(path);
  CalibrationReport base = based.Calibrate(g, 7, 2);
  EXPECT_EQ(fast.context_runs, 1);
  EXPECT_EQ(base.new_keys, 0);
  EXPECT_TRUE(base.time_base_known);
  EXPECT_DOUBLE_EQ(base.time_base, 2.0);
  EXPECT_DOUBLE_EQ(based.GraphCost(g), model.GraphCost(g));
  std::string resaved = TempDir() + "/calibrated_cache_again.txt";
  based.SaveCache(resaved);
  EXPECT_EQ(ReadFile(resaved, "cache"), ReadFile(path, "cache"));
  // Without the request it runs nothing (above), and the time base is unknown.
  EXPECT_FALSE(again.time_base_known);
  EXPECT_DOUBLE_EQ(again.time_base, 1.0);

  // One time base: the machine is now 2x slower; a graph with the known
  // keys (Conv, Relu, Add) and a new one (Sigmoid) gets the new key scaled
  // back by the known keys' ratio.
  ScriptedBackend slow;
  for (auto& [op, ms] : slow.in_context) ms *= 2;
  slow.in_context["Sigmoid"] = 0.8;
  MeasuredCostModel later(&slow);
  later.LoadCache(path);
  GraphBuilder b2(3);
  ValueId x2 = b2.Input("x", {1, 4, 16, 16});
  ValueId w = b2.Weight("w", {8, 4, 3, 3}, 0.1f);
  ValueId bias = b2.Op("Mul", {b2.Weight("bias", {8, 1, 1}, 0.1f), b2.Weight("s", {8, 1, 1}, 0.1f, 1.0f)});
  ValueId conv = b2.Op("Conv", {x2, w}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  Graph mixed = b2.Build({b2.Op("Sigmoid", {b2.Op("Add", {b2.Op("Relu", {conv}), bias})})});
  // What a calibration would time is known without running anything: the
  // new key (Sigmoid); the weight-only Mul is folded at load, not timed.
  const int runs_before = slow.context_runs, timed_before = slow.graphs_timed;
  EXPECT_EQ(later.UncalibratedKeys(mixed), 1);
  EXPECT_EQ(slow.context_runs, runs_before);
  EXPECT_EQ(slow.graphs_timed, timed_before);
  CalibrationReport r2 = later.Calibrate(mixed);
  EXPECT_EQ(r2.new_keys, 1);
  EXPECT_EQ(later.UncalibratedKeys(mixed), 0);
  EXPECT_DOUBLE_EQ(r2.time_base, 0.5);  // (1.8 + 0.3 + 0.2) / (3.6 + 0.6 + 0.4)
  EXPECT_DOUBLE_EQ(later.NodeMs(mixed, Find(mixed, "Sigmoid")), 0.4 + 1.0);
  EXPECT_DOUBLE_EQ(later.NodeMs(mixed, Find(mixed, "Conv")), 1.8 + 1.0);  // cached, unchanged
  EXPECT_TRUE(r2.time_base_known);

  // Known keys that are little of the run (under a fifth of its node time)
  // do not set the time base: here three cheap known keys beside a new key
  // that is nearly all of the run.
  ScriptedBackend skewed;
  for (auto& [op, ms] : skewed.in_context) ms *= 3;  // would say "3x slower"
  skewed.in_context["Sigmoid"] = 40.0;
  MeasuredCostModel third(&skewed);
  third.LoadCache(path);
  CalibrationReport r4 = third.Calibrate(mixed);
  EXPECT_FALSE(r4.time_base_known);  // 2.3 * 3 = 6.9 of 46.9 ms
  EXPECT_DOUBLE_EQ(r4.time_base, 1.0);
  EXPECT_DOUBLE_EQ(third.NodeMs(mixed, Find(mixed, "Sigmoid")), 40.0 + 1.0);
  EXPECT_FALSE(r4.time_base_from_reference);

  // With a reference graph whose keys are all cached (the original), it
  // runs after the graph and sets the time base: the new key is scaled to
  // the cache's speed (40 ms now, 3x slower than then: 13.3 ms).
  ScriptedBackend skewed2 = skewed;
  MeasuredCostModel fourth(&skewed2);
  fourth.LoadCache(path);
  const int runs_then = skewed2.context_runs;
  CalibrationReport r5 = fourth.Calibrate(mixed, 7, 0, &g);
  EXPECT_EQ(skewed2.context_runs, runs_then + 2);  // the graph, then the reference
  EXPECT_TRUE(r5.time_base_known);
  EXPECT_TRUE(r5.time_base_from_reference);
  EXPECT_DOUBLE_EQ(r5.time_base, 1.0 / 3.0);
  EXPECT_NEAR(fourth.NodeMs(mixed, Find(mixed, "Sigmoid")), 40.0 / 3.0 + 1.0, 1e-9);
  // A graph whose own known keys set it does not run the reference.
  MeasuredCostModel fifth(&slow);
  fifth.LoadCache(path);
  const int slow_runs = slow.context_runs;
  CalibrationReport r6 = fifth.Calibrate(mixed, 7, 0, &g);
  EXPECT_EQ(slow.context_runs, slow_runs + 1);
  EXPECT_FALSE(r6.time_base_from_reference);
  EXPECT_DOUBLE_EQ(r6.time_base, 0.5);
}

// Where the cache keeps a model's own timings (a context-sensitive device
// after SetContext), the time base of its cached timings is the whole
// run's: the cache's estimate of the run over the run measured now. There
// the node times are derived (ORT's profiler, less its cost per kernel
// event, measured once per process) and move between processes more than
// the run does: here the machine is 2x slower and this process's node
// times come out 1.5x higher again, which the keys alone would take for
// 3x.
TEST(CostModel, PerModelTimeBaseIsTheWholeRuns) {
  struct Derived : ScriptedBackend {
    double per_node = 1.0, distortion = 1.0;
    bool context_sensitive() const override { return true; }
    double RunMsPerNode() override { return per_node; }
    InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions& o) override {
      InContextTimes t = ScriptedBackend::TimeNodesInContext(g, runs, o);
      for (double& ms : t.node_ms) ms *= distortion;  // the run is timed plainly
      return t;
    }
  };
  Graph g = Small();  // Conv, Relu, Conv, Mul (weight-only, run on every run here), Add
  Derived then;
  then.folds = false;
  MeasuredCostModel model(&then);
  model.SetContext(g);
  model.Calibrate(g);
  const std::string path = TempDir() + "/per_model_time_base_cache.txt";
  model.SaveCache(path);

  Derived now;
  now.folds = false;
  for (auto& [op, ms] : now.in_context) ms *= 2;
  now.in_context["Sigmoid"] = 0.8;
  now.per_node = 2.0;
  now.distortion = 1.5;
  MeasuredCostModel warm(&now);
  warm.LoadCache(path);
  warm.SetContext(g);
  CalibrationReport r = warm.Calibrate(g, 7, 2);
  EXPECT_EQ(r.new_keys, 0);
  EXPECT_TRUE(r.time_base_known);
  EXPECT_DOUBLE_EQ(r.time_base, 0.5);  // 9.5 ms then (4.5 of nodes, 5 x 1 ms per node), 19 now

  // A rewrite of it with a new key (a Sigmoid after the Add), calibrated in
  // the model's context with the original as reference: the reference runs
  // (though the graph's own cached keys could set a time base) and its
  // whole run sets it; the new key is taken to the cache's speed by it.
  GraphBuilder b(3);
  ValueId x = b.Input("x", {1, 4, 16, 16});
  ValueId scaled = b.Op("Mul", {b.Weight("bias", {8, 1, 1}, 0.1f), b.Weight("s", {8, 1, 1}, 0.1f, 1.0f)});
  ValueId a =
      b.Op("Relu", {b.Op("Conv", {x, b.Weight("w", {8, 4, 3, 3}, 0.1f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}})});
  ValueId c = b.Op("Conv", {x, b.Weight("w2", {8, 4, 3, 3}, 0.1f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  Graph rewritten = b.Build({a, b.Op("Sigmoid", {b.Op("Add", {c, scaled})})});
  ASSERT_EQ(warm.UncalibratedKeys(rewritten), 1);
  const int runs_before = now.context_runs;
  CalibrationReport r2 = warm.Calibrate(rewritten, 7, 0, &g);
  EXPECT_EQ(now.context_runs, runs_before + 2);  // the graph, then the reference
  EXPECT_EQ(r2.new_keys, 1);
  EXPECT_TRUE(r2.time_base_from_reference);
  EXPECT_DOUBLE_EQ(r2.time_base, 0.5);
  // 0.8 ms x 1.5 measured, x 0.5: 0.6 ms in the cache's speed, + 1 ms per node.
  EXPECT_NEAR(warm.NodeMs(rewritten, Find(rewritten, "Sigmoid")), 0.6 + 1.0, 1e-9);
}

// On a device that runs weight-only nodes on every run (rlflow's executors),
// the original model as the user has it pays for them: they are timed in
// context with the rest, and RunCost (the estimate of a graph as it stands)
// adds them to GraphCost (the graph as the optimiser writes it, folded). On
// a device that folds them at load (ONNX Runtime) they cost nothing either
// way.
// A backend whose times follow the size: a node alone costs the run's own
// 0.05 ms beside 1e-5 ms per output element, in context only the latter.
// So the in-context / isolated ratio of a small node is low (0.02 for 16
// elements) and of a large one near 1 (0.98 for 262144).
class SizedBackend : public ScriptedBackend {
 public:
  static double Work(const Graph& g, NodeId id) {
    return 1e-5 * static_cast<double>(g.value(g.node(id).outputs[0]).type.NumElements());
  }
  double Isolated(const Graph& g, NodeId id) override { return 0.05 + Work(g, id); }
  double InContext(const Graph& g, NodeId id) override { return Work(g, id); }
  double RunMsPerNode() override { return 0; }
};

// A key never timed in context is costed by the ratio of the calibrated
// keys of its op type nearest to it in isolated time, not by the op type's
// median ratio (here 48 x 48's, 0.32): a large new Relu gets the large
// keys' ratio, a small one the small keys'.
TEST(CostModel, ANewKeyTakesTheRatioOfItsNearestCalibratedKeys) {
  SizedBackend backend;
  MeasuredCostModel model(&backend);
  GraphBuilder b(1);
  std::vector<ValueId> outs;
  for (int64_t side : {4, 8, 16, 32, 48, 64, 128, 256, 512})
    outs.push_back(b.Op("Relu", {b.Input("x" + std::to_string(side), {1, 1, side, side})}));
  Graph g = b.Build(outs);
  model.Calibrate(g);
  auto cost = [&](int64_t side) {
    GraphBuilder one(1);
    Graph single = one.Build({one.Op("Relu", {one.Input("x", {1, 1, side, side})})});
    return model.NodeMs(single, 0);
  };
  // 400 x 400: 1.6 ms of work, 1.65 alone; the five nearest keys (512^2,
  // 256^2, 128^2, 64^2, 48^2) have ratios 0.98, 0.93, 0.77, 0.45, 0.32:
  // 128^2's is the median.
  const double large = 1.6, large_alone = 0.05 + large;
  const double ratio_128 = 0.16384 / (0.05 + 0.16384);
  EXPECT_NEAR(cost(400), large_alone * ratio_128, 1e-9);
  EXPECT_GT(cost(400), 0.75 * large);  // the op's median ratio gave 0.52 of it
  // 6 x 6: the small keys' ratios; the median of the five nearest is 16 x 16's.
  const double ratio_16 = 0.00256 / (0.05 + 0.00256);
  EXPECT_NEAR(cost(6), (0.05 + 0.00036) * ratio_16, 1e-9);
}

// An operator of another domain (ONNX Runtime's contrib operators) is keyed
// by its qualified name ("com.microsoft.SkipLayerNormalization"); a key of
// it never timed in context takes that op type's in-context / isolated ratio
// and spread, not those of all op types.
TEST(CostModel, AContribOpTakesItsOwnRatioAndSpread) {
  ScriptedBackend backend;
  backend.isolated["SkipLayerNormalization"] = 1.0;
  backend.in_context["SkipLayerNormalization"] = 5.0;  // ratio 5; Relu's 3, so all ops' median 4
  MeasuredCostModel model(&backend);
  auto norm = [](int64_t rows) {
    GraphBuilder b(1);
    ValueId x = b.Input("x", {1, rows, 8}), skip = b.Input("s", {1, rows, 8});
    ValueId y = b.Op("com.microsoft.SkipLayerNormalization",
                     {x, skip, b.Weight("gamma", {8}, 0.1f, 1.0f), b.Weight("beta", {8}, 0.1f)});
    return b.Build({b.Op("Relu", {y})});
  };
  Graph g = norm(4);
  CalibrationReport r = model.Calibrate(g);
  ASSERT_EQ(r.per_op.count("com.microsoft.SkipLayerNormalization"), 1u);
  EXPECT_DOUBLE_EQ(r.per_op.at("com.microsoft.SkipLayerNormalization").factor, 5.0);
  Graph taller = norm(16);  // a new key: isolated 1.0 x its op's ratio 5 + the overhead 1.0
  const NodeId id = Find(taller, "SkipLayerNormalization");
  EXPECT_DOUBLE_EQ(model.NodeMs(taller, id), 1.0 * 5.0 + 1.0);
  EXPECT_DOUBLE_EQ(model.NodeNoiseMs(taller, id), 0.02 * 6.0);  // its op's spread, not the unknown 0.05
}

TEST(CostModel, RunCostChargesWeightOnlyNodesWhereTheDeviceRunsThem) {
  Graph g = Small();  // Conv, Relu, Conv, Mul (weight-only), Add
  ScriptedBackend runs;
  runs.folds = false;
  MeasuredCostModel model(&runs);
  CalibrationReport r = model.Calibrate(g);
  EXPECT_EQ(r.nodes, 5);
  EXPECT_EQ(r.keys, 4);
  EXPECT_DOUBLE_EQ(r.per_op.at("Mul").ms, 0.4);           // its in-context time
  EXPECT_DOUBLE_EQ(r.overhead_ms, 1.0);                   // 5 nodes ran, 1 ms each beyond their kernels
  const double folded = 1.8 + 0.3 + 1.8 + 0.2 + 4 * 1.0;  // Conv, Relu, Conv, Add
  EXPECT_DOUBLE_EQ(model.GraphCost(g), folded);
  EXPECT_DOUBLE_EQ(model.RunCost(g), folded + 0.4 + 1.0);

  ScriptedBackend folds;  // folds = true
  MeasuredCostModel at_load(&folds);
  CalibrationReport f = at_load.Calibrate(g);
  EXPECT_EQ(f.nodes, 4);
  EXPECT_EQ(f.per_op.count("Mul"), 0u);
  EXPECT_DOUBLE_EQ(at_load.RunCost(g), at_load.GraphCost(g));
  EXPECT_DOUBLE_EQ(at_load.RunCost(g), folded);

  // Without a device (the analytical model) RunCost is GraphCost.
  AnalyticalCostModel analytical;
  EXPECT_DOUBLE_EQ(analytical.RunCost(g), analytical.GraphCost(g));
}

// A backend that measures a cost per run (ONNX Runtime: inputs in, outputs
// out): it is charged once per graph, not spread over the nodes, so a
// drop-in replacement with fewer nodes still pays all of it.
TEST(CostModel, TheCostPerRunIsChargedOncePerGraph) {
  ScriptedBackend backend;
  backend.fixed_ms = 3.0;
  MeasuredCostModel model(&backend);
  Graph g = Small();  // Conv, Relu, Conv, Mul (weight-only), Add
  CalibrationReport r = model.Calibrate(g);
  EXPECT_DOUBLE_EQ(r.run_ms, 3.6 + 0.3 + 0.2 + 0.4 + 5 * 1.0 + 3.0);
  EXPECT_DOUBLE_EQ(r.fixed_ms, 3.0);
  EXPECT_DOUBLE_EQ(r.overhead_ms, 1.0);  // not (5 + 3) / 5
  EXPECT_DOUBLE_EQ(model.RunFixedMs(), 3.0);
  EXPECT_DOUBLE_EQ(model.GraphCost(g), 1.8 + 0.3 + 1.8 + 0.2 + 4 * 1.0 + 3.0);
  // The Relu's graph without it: one node less, the cost per run unchanged.
  GraphBuilder b(2);
  ValueId x = b.Input("x", {1, 4, 16, 16});
  ValueId conv = b.Op("Conv", {x, b.Weight("w", {8, 4, 3, 3}, 0.1f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  Graph one = b.Build({conv});
  EXPECT_DOUBLE_EQ(model.GraphCost(one), 1.8 + 1.0 + 3.0);
  // A reported cost per run above what the run spends beyond its nodes is
  // capped there: nothing is left per node.
  struct Overstating : ScriptedBackend {
    InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions& o) override {
      InContextTimes t = ScriptedBackend::TimeNodesInContext(g, runs, o);
      t.fixed_ms += 10.0;
      return t;
    }
  } over;
  over.fixed_ms = 3.0;
  MeasuredCostModel capped(&over);
  CalibrationReport c = capped.Calibrate(g);
  EXPECT_DOUBLE_EQ(c.overhead_ms, 0.0);
  EXPECT_DOUBLE_EQ(c.fixed_ms, 5 * 1.0 + 3.0);
  // A cache written before the cost per run was measured (an overhead but
  // no cost per run) is calibrated again, and both are then replaced.
  std::string path = TempDir() + "/old_overhead_cache.txt";
  {
    std::ofstream f(path);
    f << "rlflow-timing-cache 1\n2.6\tscripted|overhead\n";
  }
  ScriptedBackend again;
  again.fixed_ms = 3.0;
  MeasuredCostModel migrated(&again);
  migrated.LoadCache(path);
  CalibrationReport m = migrated.Calibrate(g);
  EXPECT_EQ(again.context_runs, 1);
  EXPECT_DOUBLE_EQ(m.overhead_ms, 1.0);
  EXPECT_DOUBLE_EQ(m.fixed_ms, 3.0);
}

// A backend whose fusions make in-context times depend on the model (ONNX
// Runtime): each model's in-context times, overhead and ratios are its own;
// isolated times stay shared. Without the trait, a key timed in one model
// prices it in every other.
TEST(CostModel, InContextTimesArePerModelForContextSensitiveBackends) {
  struct Fusing : ScriptedBackend {
    bool sensitive = true;
    bool context_sensitive() const override { return sensitive; }
  };
  Graph g = Small();  // Conv, Relu, Conv, Mul (weight-only), Add
  GraphBuilder b(3);  // the first Conv of Small() (same key) with an Add after it
  ValueId x = b.Input("x", {1, 4, 16, 16});
  ValueId conv = b.Op("Conv", {x, b.Weight("w", {8, 4, 3, 3}, 0.1f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  // Its Add reads a [1, 8, 1, 1] shift (g's reads [8, 1, 1]): another key.
  Graph h = b.Build({b.Op("Add", {conv, b.Weight("t", {1, 8, 1, 1}, 0.1f)})});
  ASSERT_EQ(NodeKeyText(g, Find(g, "Conv")), NodeKeyText(h, Find(h, "Conv")));
  for (bool sensitive : {true, false}) {
    Fusing backend;
    backend.sensitive = sensitive;
    MeasuredCostModel model(&backend);
    model.SetContext(g);
    model.Calibrate(g);
    EXPECT_DOUBLE_EQ(model.NodeMs(g, Find(g, "Conv")), 1.8 + 1.0);
    // In h the runtime fuses the Add into the Conv: the Conv takes longer, the Add nothing.
    backend.in_context["Conv"] = 2.5;
    backend.in_context["Add"] = 0.0;
    model.SetContext(h);
    CalibrationReport r = model.Calibrate(h);
    EXPECT_EQ(backend.context_runs, 2) << "h has a new key (its Add) either way";
    EXPECT_EQ(r.new_keys, sensitive ? 2 : 1);
    EXPECT_DOUBLE_EQ(model.NodeMs(h, Find(h, "Conv")), (sensitive ? 2.5 : 1.8) + 1.0) << sensitive;
    // Back to g: its own times, untouched by h's.
    model.SetContext(g);
    EXPECT_EQ(model.Calibrate(g).new_keys, 0);
    EXPECT_DOUBLE_EQ(model.NodeMs(g, Find(g, "Conv")), 1.8 + 1.0);
    EXPECT_DOUBLE_EQ(model.NodeMs(g, Find(g, "Add")), 0.2 + 1.0);
    // Persisted: a fresh model with the saved cache prices each model as before.
    std::string path = TempDir() + "/per_model_cache_" + std::to_string(sensitive) + ".txt";
    model.SaveCache(path);
    Fusing idle;
    idle.sensitive = sensitive;
    MeasuredCostModel warm(&idle);
    warm.LoadCache(path);
    warm.SetContext(h);
    EXPECT_DOUBLE_EQ(warm.NodeMs(h, Find(h, "Conv")), (sensitive ? 2.5 : 1.8) + 1.0);
    EXPECT_EQ(idle.context_runs, 0);
  }
}

// rlflow's executor is context-sensitive too: a node's time depends on
// what else the model keeps in the CPU's caches (a MobileNetV3's classifier
// Gemms, the same key in two models, cost 0.22 ms per node after a 3 ms
// body and a third of that after a 1.5 ms one), and a cache shared by the
// two priced the second model 19-31% off. The same key is timed again in
// each model; each model's timings come back when it does.
TEST(CostModel, TheExecutorKeepsInContextTimesPerModel) {
  std::unique_ptr<TimingBackend> cpu = MakeTimingBackend("cpu");
  ASSERT_TRUE(cpu->context_sensitive());
  // ... though it runs node by node: no fusion for the verdict to retry around.
  EXPECT_FALSE(cpu->fuses_nodes());
  Graph g = Small();
  GraphBuilder b(3);  // the first Conv of Small() (same key) with an Add after it
  ValueId x = b.Input("x", {1, 4, 16, 16});
  ValueId conv = b.Op("Conv", {x, b.Weight("w", {8, 4, 3, 3}, 0.1f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  Graph h = b.Build({b.Op("Add", {conv, b.Weight("t", {8, 1, 1}, 0.1f)})});
  MeasuredCostModel model(cpu.get());
  model.SetContext(g);
  CalibrationReport first = model.Calibrate(g, 3);
  EXPECT_EQ(first.new_keys, first.keys);
  model.SetContext(h);
  CalibrationReport second = model.Calibrate(h, 3);
  EXPECT_EQ(second.keys, 2);
  EXPECT_EQ(second.new_keys, 2) << "h's Conv is timed in h, not priced from g";
  model.SetContext(g);
  EXPECT_EQ(model.Calibrate(g, 3).new_keys, 0);
}

// A device that runs a node inside a neighbour's kernel (ORT's GELU: the
// Sigmoid of x * Sigmoid(x) here, its kernel charged to the Mul) reports it
// (InContextTimes::fused_into): the node costs nothing while that neighbour
// is next to it, and its own kernel in a graph where a rewrite took the
// neighbour away. Such keys give no in-context / isolated ratio, the marker
// that fusions were recorded is persisted, and a context calibrated before
// fusions were recorded is timed again.
TEST(CostModel, AFusedNodeIsFreeOnlyNextToTheKernelThatRanIt) {
  struct Fusing : ScriptedBackend {
    Fusing() {
      in_context["Sigmoid"] = 0.5;
      in_context["Mul"] = 0.7;  // the fused kernel
      isolated["Mul"] = 0.2;
    }
    bool context_sensitive() const override { return true; }
    InContextTimes TimeNodesInContext(const Graph& g, int runs, const TimingOptions& o) override {
      InContextTimes t = ScriptedBackend::TimeNodesInContext(g, runs, o);
      t.fused_into.assign(g.num_nodes(), kNoNode);
      t.fused_distance.assign(g.num_nodes(), 0);
      for (NodeId id = 0; id < g.num_nodes(); ++id) {
        if (g.node(id).op != "Sigmoid") continue;
        ValueId out = g.node(id).outputs[0];
        for (NodeId c = 0; c < g.num_nodes(); ++c)
          if (g.node(c).op == "Mul" && g.node(c).inputs[1] == out) {
            t.fused_into[id] = c;  // upstream of the Mul, one edge
            t.fused_distance[id] = 1;
            t.node_ms[id] = 0;
            t.run_ms -= 0.5;
          }
      }
      return t;
    }
  };
  Fusing backend;
  // x -> Sigmoid -> Mul(x, .) -> Relu
  GraphBuilder b(1);
  ValueId x = b.Input("x", {1, 64, 32});
  Graph swish = b.Build({b.Op("Relu", {b.Op("Mul", {x, b.Op("Sigmoid", {x})})})});
  // The same Sigmoid with the Mul moved away (after the Relu): not fused.
  GraphBuilder b2(1);
  ValueId x2 = b2.Input("x", {1, 64, 32});
  Graph apart = b2.Build({b2.Op("Mul", {b2.Op("Relu", {x2}), b2.Op("Relu", {b2.Op("Sigmoid", {x2})})})});
  ASSERT_EQ(NodeKeyText(swish, Find(swish, "Sigmoid")), NodeKeyText(apart, Find(apart, "Sigmoid")));
  ASSERT_EQ(NodeKeyText(swish, Find(swish, "Mul")), NodeKeyText(apart, Find(apart, "Mul")));

  MeasuredCostModel model(&backend);
  model.SetContext(swish);
  CalibrationReport r = model.Calibrate(swish);
  EXPECT_EQ(r.fused_keys, 1);
  EXPECT_DOUBLE_EQ(r.overhead_ms, 1.0);
  // Next to its Mul: free (the overhead only); the Mul carries the kernel.
  EXPECT_DOUBLE_EQ(model.NodeMs(swish, Find(swish, "Sigmoid")), 0 + 1.0);
  EXPECT_DOUBLE_EQ(model.NodeMs(swish, Find(swish, "Mul")), 0.7 + 1.0);
  // Apart: its isolated time x the median ratio of the keys that ran on
  // their own (Mul 3.5, Relu 3.0: the fused Sigmoid's 0 is not one).
  EXPECT_DOUBLE_EQ(r.per_op.at("Sigmoid").factor, (3.5 + 3.0) / 2);
  EXPECT_DOUBLE_EQ(model.NodeMs(apart, Find(apart, "Sigmoid")), 0.3 * 3.25 + 1.0);
  EXPECT_GT(model.GraphCost(apart) - model.NodeMs(apart, Find(apart, "Relu", 1)), model.GraphCost(swish) + 0.5);
  // Asked again in the first graph after the second: still free there.
  EXPECT_DOUBLE_EQ(model.NodeMs(swish, Find(swish, "Sigmoid")), 0 + 1.0);
  // A graph's cost (its readers and keys found once for the whole sum) is
  // the sum of its nodes' costs asked one at a time.
  for (const Graph* g : {&swish, &apart}) {
    double nodes = model.RunFixedMs();
    for (NodeId id = 0; id < g->num_nodes(); ++id) nodes += model.NodeMs(*g, id);
    EXPECT_DOUBLE_EQ(model.GraphCost(*g), nodes);
  }
  EXPECT_DOUBLE_EQ(model.GraphCost(swish),
                   model.RunFixedMs() + (0 + 1.0) + (0.7 + 1.0) + model.NodeMs(swish, Find(swish, "Relu")));

  // Persisted: a fresh model prices both graphs the same without running anything.
  std::string path = TempDir() + "/fused_cache.txt";
  model.SaveCache(path);
  Fusing idle;
  MeasuredCostModel warm(&idle);
  warm.LoadCache(path);
  warm.SetContext(swish);
  EXPECT_EQ(warm.Calibrate(swish).new_keys, 0);
  EXPECT_EQ(idle.context_runs, 0);
  EXPECT_DOUBLE_EQ(warm.NodeMs(swish, Find(swish, "Sigmoid")), 0 + 1.0);
  EXPECT_DOUBLE_EQ(warm.NodeMs(apart, Find(apart, "Sigmoid")), model.NodeMs(apart, Find(apart, "Sigmoid")));

  // A cache from before fusions were recorded (no marker): timed again.
  std::string text = ReadFile(path, "cache");
  std::string old;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.find("|fusions") == std::string::npos && line.find("|fused|") == std::string::npos &&
        line.find("|anchor|") == std::string::npos)
      old += line + "\n";
  Fusing again;
  MeasuredCostModel stale(&again);
  stale.LoadCacheText(old, "old cache");
  stale.SetContext(swish);
  EXPECT_DOUBLE_EQ(stale.NodeMs(apart, Find(apart, "Sigmoid")), 0 + 1.0) << "unknown fusion: its in-context 0";
  EXPECT_EQ(stale.Calibrate(swish).fused_keys, 1);
  EXPECT_EQ(again.context_runs, 1);
  EXPECT_DOUBLE_EQ(stale.NodeMs(apart, Find(apart, "Sigmoid")), 0.3 * 3.25 + 1.0);
}

// Runs that share a cache file (models optimised in parallel) keep each
// other's entries: a save merges with what the file holds by then, the
// saving run's entries winning where both have a key. A file that no longer
// parses is replaced.
TEST(CostModel, SavesMergeWithTheEntriesOthersSaved) {
  const std::string magic = "rlflow-timing-cache 1\n";
  ScriptedBackend backend;
  MeasuredCostModel a(&backend), b(&backend);
  a.LoadCacheText(magic + "1\tscripted|a\n4\tscripted|both\n", "a");
  b.LoadCacheText(magic + "2\tscripted|b\n3\tscripted|both\n", "b");
  const std::string path = TempDir() + "/shared_cache.txt";
  a.SaveCache(path);
  b.SaveCache(path);  // b loaded before a saved
  EXPECT_EQ(ReadFile(path, "cache"), magic + "1\tscripted|a\n2\tscripted|b\n3\tscripted|both\n");
  std::ofstream(path) << "not a cache\n";
  a.SaveCache(path);
  EXPECT_EQ(ReadFile(path, "cache"), magic + "1\tscripted|a\n4\tscripted|both\n");
  // A FIFO (or /dev/null) is written in place: no lock file beside it.
  const std::string fifo = TempDir() + "/cache_fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  a.SaveCache(fifo);
  char buf[256];
  EXPECT_GT(::read(reader, buf, sizeof buf), 0);
  ::close(reader);
  EXPECT_FALSE(FileExists(fifo + ".lock"));
}

// The noise rule's A/B timing: faster keeps the estimate, no difference is
// 0, slower is the measured (negative) difference; cached, persisted.
TEST(CostModel, ResolveGainTimesPairsOnceAndPersists) {
  ScriptedBackend backend;
  MeasuredCostModel model(&backend);
  Graph a = Small(), b = Small(4);
  backend.pair_ratio = 1.10;
  EXPECT_DOUBLE_EQ(model.ResolveGain(a, b, "faster", 0.25), 0.25);
  backend.pair_ratio = 1.0;
  EXPECT_DOUBLE_EQ(model.ResolveGain(a, b, "same", 0.25), 0.0);
  backend.pair_ratio = 0.5;
  EXPECT_DOUBLE_EQ(model.ResolveGain(a, b, "slower", 0.25), -0.5);
  EXPECT_EQ(backend.pairs_timed, 3);
  backend.pair_ratio = 1.10;
  EXPECT_DOUBLE_EQ(model.ResolveGain(a, b, "slower", 0.25), -0.5);  // cached: first outcome wins
  EXPECT_EQ(backend.pairs_timed, 3);
  std::string path = TempDir() + "/ab_cache.txt";
  model.SaveCache(path);
  MeasuredCostModel warm(&backend);
  warm.LoadCache(path);  // negative outcomes load
  EXPECT_DOUBLE_EQ(warm.ResolveGain(a, b, "slower", 0.25), -0.5);
  EXPECT_DOUBLE_EQ(warm.ResolveGain(a, b, "faster", 0.75), 0.75);
  EXPECT_EQ(backend.pairs_timed, 3);
  // Other entries may not be negative.
  std::ofstream(path) << "rlflow-timing-cache 1\n-1\tscripted|Relu#0 float32[1]\n";
  EXPECT_THROW(warm.LoadCache(path), Error);
}

// Real measurements (issue #23's currency): every graph timed on the
// backend counts once, whichever call made it; cache hits count nothing.
TEST(CostModel, CountingBackendCountsEveryGraphTimed) {
  ScriptedBackend inner;
  CountingBackend counted(&inner);
  EXPECT_EQ(counted.name(), "scripted");
  EXPECT_EQ(counted.fingerprint(), inner.fingerprint());
  EXPECT_TRUE(counted.folds_constants());
  inner.folds = false;
  EXPECT_FALSE(counted.folds_constants());
  inner.folds = true;
  EXPECT_FALSE(counted.fuses_nodes());
  inner.fuses = true;
  EXPECT_TRUE(counted.fuses_nodes());
  inner.fuses = false;
  MeasuredCostModel model(&counted);
  Graph g = Small();
  model.Calibrate(g);  // one in-context run, then each key alone
  model.ResolveGain(g, Small(4), "ab", 0.1);
  const int64_t inner_total = inner.graphs_timed + inner.pairs_timed + inner.context_runs;
  EXPECT_EQ(inner.context_runs, 1);
  EXPECT_EQ(inner.pairs_timed, 1);
  EXPECT_GE(inner.graphs_timed, 3);  // Conv, Relu, Add alone
  EXPECT_EQ(counted.measurements(), inner_total);
  model.Calibrate(g);  // all cached: nothing runs
  model.GraphCost(g);
  model.ResolveGain(g, Small(4), "ab", 0.1);
  EXPECT_EQ(counted.measurements(), inner_total);
  counted.TimeGraph(g, {});
  EXPECT_EQ(counted.measurements(), inner_total + 1);
  EXPECT_EQ(counted.TimeGraphRuns(g, {}).size(), 1u);  // the fake keeps only a median
  EXPECT_EQ(counted.measurements(), inner_total + 2);
}

// The optimiser's timing settings: about 1 s of calibration runs (3 to
// 2000), verdict pairs spanning about 2 s (at most 40, in ORT a fast
// model's up to 120 in blocks of 10; at least 20 while they take at most
// 30 s, never fewer than 10), each verdict sample at least
// 1000 / min(pairs, 40) ms.
TEST(TimingSettings, SpanTheirTimeWithinBounds) {
  EXPECT_EQ(CalibrationRuns(0.010), 100);
  EXPECT_EQ(CalibrationRuns(2.0), 3);
  EXPECT_EQ(CalibrationRuns(1e-7), 2000);
  EXPECT_EQ(VerdictPairs(0.1), 20);
  EXPECT_EQ(VerdictPairs(0.05), 40);
  EXPECT_EQ(VerdictPairs(0.18), 20);  // 2 s would be 11 pairs
  EXPECT_EQ(VerdictPairs(0.75), 20);  // 2 x 20 x 0.75 s = 30 s
  EXPECT_EQ(VerdictPairs(1.0), 15);   // 30 s of pairs
  EXPECT_EQ(VerdictPairs(3.0), 10);   // never fewer than 10
  EXPECT_EQ(VerdictPairs(0.001), 40);
  // A backend that needs more pairs for its interval (ONNX Runtime's session
  // pairs) gets at least that many.
  struct Blocked : ScriptedBackend {
    int min_paired_pairs() const override { return 20; }
  } blocked;
  EXPECT_EQ(VerdictPairs(1.0, blocked), 20);
  // and where it times in session pairs a fast model up to 120 pairs, one
  // per 1/120 s of its run (the executor: 40).
  EXPECT_EQ(VerdictPairs(0.001, blocked), 120);
  EXPECT_EQ(VerdictPairs(1e-6, blocked), 120);
  EXPECT_EQ(VerdictPairs(0.0125, blocked), 80);
  EXPECT_EQ(VerdictPairs(0.03, blocked), 40);
  EXPECT_EQ(VerdictPairs(0.001, ScriptedBackend()), 40);
  EXPECT_EQ(VerdictPairs(3.0, blocked), 20);
  EXPECT_EQ(VerdictPairs(3.0, ScriptedBackend()), 10);
  TimingOptions t = VerdictTiming(40, 7);
  EXPECT_EQ(t.seed, 7u);
  EXPECT_DOUBLE_EQ(t.min_sample_ms, 25.0);
  EXPECT_DOUBLE_EQ(VerdictTiming(10000, 1).min_sample_ms, 25.0);
  // Up to 40 pairs in the backend's own blocks (ORT: 4 session pairs), more
  // in blocks of 10, their samples still at least 25 ms.
  EXPECT_EQ(t.blocks, 0);
  EXPECT_EQ(VerdictTiming(120, 1).blocks, 12);
  EXPECT_EQ(VerdictTiming(80, 1).blocks, 8);
  EXPECT_EQ(VerdictTiming(41, 1).blocks, 4);
  EXPECT_DOUBLE_EQ(VerdictTiming(120, 1).min_sample_ms, 25.0);
  EXPECT_DOUBLE_EQ(VerdictTiming(20, 1).min_sample_ms, 50.0);
}

// A node that runs long alone (a conv at batch 16) is sampled fewer times
// (at least 3, about max_total_ms in all); the verdict's timings are not.
TEST(Timing, SlowNodesAloneAreSampledFewerTimes) {
  TimingOptions node = NodeTiming();
  ASSERT_EQ(node.samples, 7);
  EXPECT_DOUBLE_EQ(node.max_total_ms, 150.0);
  EXPECT_EQ(SamplesWithin(node, 0.05), 7);
  EXPECT_EQ(SamplesWithin(node, 20.0), 7);   // 140 ms in all
  EXPECT_EQ(SamplesWithin(node, 25.0), 6);   // 175 > 150: 6 of 25 ms
  EXPECT_EQ(SamplesWithin(node, 40.0), 4);   // 3.75 -> 4
  EXPECT_EQ(SamplesWithin(node, 500.0), 3);  // never fewer than 3
  for (const TimingOptions& o : {TimingOptions{}, VerdictTiming(20, 1)}) {
    EXPECT_DOUBLE_EQ(o.max_total_ms, 0.0);
    EXPECT_EQ(SamplesWithin(o, 500.0), o.samples);
  }
  // The cost model times nodes alone so.
  ScriptedBackend backend;
  MeasuredCostModel cost(&backend);
  GraphBuilder b;
  ValueId x = b.Input("x", {1, 8});
  Graph g = b.Build({b.Op("Relu", {x})});
  cost.NodeCost(g, 0);
  EXPECT_DOUBLE_EQ(backend.last_max_total_ms, 150.0);
}

// The noise rule's A/B timing of two sides that run long (a conv at batch
// 16) takes fewer pairs: about 2 s of runs, at least 20.
TEST(Timing, LongSidesAreTimedAgainstEachOtherInFewerPairs) {
  EXPECT_EQ(ResolvePairs(60, 0.0, 0), 60);  // unknown
  EXPECT_EQ(ResolvePairs(60, 1.0, 0), 60);
  EXPECT_EQ(ResolvePairs(60, 40.0, 0), 25);
  EXPECT_EQ(ResolvePairs(60, 200.0, 0), 20);
  EXPECT_EQ(ResolvePairs(60, 200.0, 24), 24);  // the backend's own minimum
  ScriptedBackend backend;
  MeasuredCostModel cost(&backend);
  const auto one_node = [](const char* op, int64_t rows) {
    GraphBuilder b;
    ValueId x = b.Input("x", {rows, 8});
    return b.Build({b.Op(op, {x})});
  };
  Graph relu = one_node("Relu", 1), sigmoid = one_node("Sigmoid", 1);
  // Timed alone first (as the search's estimates do): 0.1 and 0.3 ms.
  cost.NodeCost(relu, 0);
  cost.NodeCost(sigmoid, 0);
  cost.ResolveGain(relu, sigmoid, "short", 0.01);
  EXPECT_EQ(backend.last_pairs, 60);
  backend.isolated["Relu"] = 150.0;
  backend.isolated["Sigmoid"] = 160.0;
  Graph relu_long = one_node("Relu", 16), sigmoid_long = one_node("Sigmoid", 16);  // other keys: timed now
  cost.NodeCost(relu_long, 0);
  cost.NodeCost(sigmoid_long, 0);
  cost.ResolveGain(relu_long, sigmoid_long, "long", 0.01);
  EXPECT_EQ(backend.last_pairs, 20);
}

}  // namespace
}  // namespace rlflow
